//! The active-threads solver: one ULT per patch, each sweeping its patch as soon as the
//! neighbours it reads have moved on, in a dataflow that makes the result and the work the same
//! under every schedule.
//!
//! Each ULT owns one patch ([`crate::layout`]). The patches are coloured so that neighbours
//! differ ([`Patches::colour`](crate::layout::Patches::colour)), and the solve is the
//! *multicolour* Gauss-Seidel iteration: in sweep `k`, patch `p` relaxes its cells in order with
//! the values of sweep `k` of its lower-coloured neighbours and of sweep `k - 1` of its
//! higher-coloured ones. No barrier separates the colours or the sweeps; each patch waits only for
//! what it reads:
//!
//! 1. **Dependencies.** Patch `p` may run sweep `k` once every lower-coloured neighbour finished
//!    its sweep `k` and every higher-coloured one its sweep `k - 1`. A patch that finishes a sweep
//!    *signals* each neighbour: a decrement of the neighbour's count of missing signals; the
//!    signal that takes it to zero releases the neighbour's semaphore, on which the neighbour
//!    sleeps. A neighbour cannot run ahead either: its next sweep needs this patch's next one. So
//!    two neighbours never sweep at once, every value a sweep reads is exactly the one the
//!    iteration prescribes, and every run (any policy, any number of processors) computes the
//!    same values, bit for bit, as [`crate::rayon_peer`], which runs the same sweeps colour after
//!    colour with barriers.
//! 2. **Convergence.** Each patch reports its sweep's largest change to its group of 64
//!    patches, the group's last patch to the solve's (`Progress`): when all patches finished
//!    sweep `k`, sweep `k` is *complete*, and the first complete sweep whose largest change is at
//!    most the tolerance `τ` is `S`. To know whether to run sweep `k + 1`, a patch needs sweep
//!    `k + 1 - LAG` complete (the *gate*, [`LAG`] is 4: patches far apart in the mesh are a few
//!    sweeps apart in the dataflow, and a patch waits on a condition variable in the rare case
//!    that it runs too far ahead), and it stops once `S` is at most that sweep: so far, every
//!    patch would run sweeps `1..=S + LAG - 1`, three more than the sequential loop.
//! 3. **Closing.** The largest change shrinks by about the same factor every sweep near the end.
//!    When sweep `d` completes, its largest change and the previous sweep's predict how many
//!    sweeps remain to `S`; the first complete sweep `d` that predicts `S <= d + LAG +
//!    CLOSING_SWEEPS - 1` is the solve's *closing* sweep `C`. From then on the gate reaches back
//!    one sweep instead of `LAG`: when `C <= k + 1 - LAG`, a patch decides on sweep `k + 1` once
//!    sweep `k` is complete, and stops when `S <= k`. With an exact prediction the sweeps from
//!    `S - CLOSING_SWEEPS + 1` to `S` each wait for the one before, as sweeps behind a barrier
//!    do. So the solve ends at `S` exactly when the prediction is early enough, and at most at
//!    `S + LAG - 1` when it is not. Every patch runs the same sweeps `1..=K` and the result stays
//!    the same under every schedule: `C`, like `S`, is a function of the complete sweeps'
//!    largest changes, which are the same under every schedule.
//!
//! **What the termination guarantees.** The multicolour iteration is Gauss-Seidel in another
//! order, and with a strictly diagonally dominant matrix its iteration matrix `G` has
//! `||G||_inf <= max_i Σ_j |a_ij| / a_ii < 1`, so the largest change of a sweep never exceeds the
//! previous one's: the sweeps after `S` changed no unknown by more than `τ`. In its last sweep each
//! unknown read every neighbour at its final value or one sweep before it, within `τ`, so
//! `|b - A u|_i <= τ Σ_j a_ij`, within
//! [`Problem::residual_bound`](crate::matrix::Problem::residual_bound) (`2τ max_i Σ_j a_ij`).
//!
//! **Why not chaotic relaxation.** An earlier version woke a patch whenever a neighbour moved by
//! more than `τ` and let the scheduler pick the order: the policies then changed the order of the
//! relaxations and so the work (more relaxations per cell than the sequential solve, how many
//! more depending on the policy: `docs/benchmarks.md` in the repository has the counts), and a
//! policy that raised the rate could lengthen the solve. Here the work is fixed by the mesh and
//! `τ`, and a policy can only change how fast it is done.
//!
//! The ULTs only use `elite_rt`'s public API: `Builder::spawn`, `set_footprint`,
//! `set_data_block`, and `sync::{Semaphore, Mutex, Condvar, WaitGroup}`.

use crate::counts::{signal, Counts};
use crate::layout::{Patches, Values, MAX_PATCH};
use crate::matrix::Problem;
use elite_rt::sync::{Condvar, Mutex, Semaphore, WaitGroup};
use elite_rt::{JoinHandle, SpawnError};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to solve.
#[derive(Clone, Debug, PartialEq)]
pub struct SolveOptions {
    /// Cells per patch, i.e. per ULT, `1..=MAX_PATCH` (default 128; [`Costs::patch_size`]
    /// chooses one from costs measured on the machine).
    pub patch_size: usize,
    /// The solve ends at, or at most `LAG - 1` sweeps after, the first sweep that moved no
    /// unknown by more than this (default `1e-9`; finite, `> 0`).
    pub tolerance: f64,
    /// Declare each patch's block as its ULT's data for the runtime to prefetch (see
    /// [`declare_data_block`]; default off).
    pub prefetch: bool,
    /// Give up (with [`SolveError::TimeLimit`]) when the solve, start-up included, has not
    /// converged after this long (default 120 s).
    pub time_limit: Duration,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            patch_size: 128,
            tolerance: 1e-9,
            prefetch: false,
            time_limit: Duration::from_secs(120),
        }
    }
}

impl SolveOptions {
    /// Checks the fields' ranges.
    pub fn validate(&self) -> Result<(), SolveError> {
        if !(1..=MAX_PATCH).contains(&self.patch_size) {
            return Err(SolveError::Option {
                field: "patch_size",
                value: self.patch_size.to_string(),
                expected: format!("1..={MAX_PATCH}"),
            });
        }
        if !(self.tolerance.is_finite() && self.tolerance > 0.0) {
            return Err(SolveError::Option {
                field: "tolerance",
                value: self.tolerance.to_string(),
                expected: "a finite number > 0".into(),
            });
        }
        if self.time_limit.is_zero() {
            return Err(SolveError::Option {
                field: "time_limit",
                value: "0 s".into(),
                expected: "more than 0 s".into(),
            });
        }
        Ok(())
    }
}

/// Why a solve failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum SolveError {
    /// A [`SolveOptions`] field is out of range.
    Option {
        /// The field.
        field: &'static str,
        /// What it was.
        value: String,
        /// What it may be.
        expected: String,
    },
    /// A ULT could not be spawned or started (the other ULTs were stopped and joined).
    Spawn(SpawnError),
    /// The solve had not converged within the time limit (all ULTs were stopped and joined).
    TimeLimit {
        /// The limit.
        limit: Duration,
        /// Relaxations done by then.
        relaxations: u64,
    },
    /// A ULT panicked (a bug; the others were stopped and joined).
    Panicked(String),
}

impl fmt::Display for SolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SolveError::Option { field, value, expected } => {
                write!(f, "invalid `{field}`: {value}, expected {expected}")
            }
            SolveError::Spawn(e) => write!(f, "could not start a patch's ULT: {e}"),
            SolveError::TimeLimit { limit, relaxations } => {
                write!(f, "not converged within the time limit of {limit:?} ({relaxations} relaxations done)")
            }
            SolveError::Panicked(why) => write!(f, "a patch's ULT panicked: {why}"),
        }
    }
}

impl std::error::Error for SolveError {}

/// The shared state of one patch. Aligned to a cache line, so signalling one patch never
/// touches another's line.
#[repr(align(64))]
struct PatchState {
    /// Signals still missing before the patch's next sweep may run.
    missing: AtomicU32,
    /// Released by the signal that makes `missing` zero (and by [`Shared::abort`]).
    ready: Semaphore,
    /// Relaxations done so far, written only by the patch's ULT.
    relaxations: AtomicU64,
}

/// Patches per group of the convergence count (a group's patches are neighbours in memory and
/// mostly run on one processor, so its counter is rarely contended).
const GROUP: usize = 64;

/// How far a patch may run ahead of the slowest: it runs sweep `k + 1` only once sweep
/// `k + 1 - LAG` is complete on the whole mesh (the gate), until the solve closes (module docs).
/// Patches far apart in the mesh are several sweeps apart in the dataflow; a lag of 2 made most
/// sweeps wait at the gate.
pub const LAG: u64 = 4;

/// Sweeps whose counts may be open at once: counts are open for at most `LAG` sweeps, and a slot
/// is reset (by the count that completes it) before the sweep `LAG + 1` later can use it.
const SLOTS: usize = LAG as usize + 1;

/// No sweep within the tolerance yet.
const NOT_YET: u64 = u64::MAX;

/// The sweeps up to `S` that wait for the one before once the solve closed, with an exact
/// prediction (module docs, "Closing"): each one more costs a sweep's wait at that barrier; a
/// prediction later by more than `CLOSING_SWEEPS - 1` sweeps costs sweeps past `S`.
pub const CLOSING_SWEEPS: u64 = 2;

/// Which sweeps are complete, and when the solve converged (see the module docs).
struct Progress {
    groups: Box<[Counts<SLOTS>]>,
    whole: Counts<SLOTS>,
    patches: usize,
    /// The newest complete sweep (0: the start). Sweeps are published in order.
    complete: AtomicU64,
    /// `S`: the first complete sweep whose largest change was within the tolerance, or `NOT_YET`.
    converged: AtomicU64,
    /// `C`: the first complete sweep that predicted `S` close (module docs), or `NOT_YET`.
    closing: AtomicU64,
    /// The largest change of the newest complete sweep (bits of an `f64`), for the next one's
    /// prediction: written and read only by the publishers of complete sweeps, which publish in
    /// order.
    last_largest: AtomicU64,
    /// Held while `complete` changes and while a patch decides to wait for it.
    gate: Mutex<()>,
    opened: Condvar,
}

impl Progress {
    fn new(patches: usize) -> Progress {
        Progress {
            groups: (0..patches.div_ceil(GROUP)).map(|_| Counts::new()).collect(),
            whole: Counts::new(),
            patches,
            complete: AtomicU64::new(0),
            converged: AtomicU64::new(NOT_YET),
            closing: AtomicU64::new(NOT_YET),
            last_largest: AtomicU64::new(f64::INFINITY.to_bits()),
            gate: Mutex::new(()),
            opened: Condvar::new(),
        }
    }

    /// Patch `p` finished sweep `k` with largest change `drift`.
    fn finish(&self, p: usize, k: u64, drift: f64, tolerance: f64, stop: &AtomicBool) {
        let g = p / GROUP;
        let members = GROUP.min(self.patches - g * GROUP);
        let Some(group) = self.groups[g].finish(k, drift.to_bits(), members) else { return };
        let Some(largest) = self.whole.finish(k, group, self.groups.len()) else { return };
        // Sweep `k` is complete. Publish it after `k - 1`, whose last count may not have been
        // published yet (its processor's thread was descheduled just before, say).
        while self.complete.load(Ordering::Acquire) + 1 < k {
            if stop.load(Ordering::Acquire) {
                return;
            }
            elite_rt::yield_now();
        }
        let largest = f64::from_bits(largest);
        if largest <= tolerance && self.converged.load(Ordering::Acquire) == NOT_YET {
            self.converged.store(k, Ordering::Release);
        }
        // `C`: set once, by the publisher of sweep `k` (the previous publisher's `last_largest`
        // is visible: it published `k - 1` after storing it, and this one read that `complete`).
        // Patches read `closing` and `converged` only after seeing `complete >= k`, which is
        // stored after them below (release, under the gate's lock).
        let previous = f64::from_bits(self.last_largest.load(Ordering::Relaxed));
        if self.closing.load(Ordering::Relaxed) == NOT_YET && closes(previous, largest, tolerance) {
            self.closing.store(k, Ordering::Release);
        }
        self.last_largest.store(largest.to_bits(), Ordering::Relaxed);
        {
            let _gate = self.gate.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            self.complete.store(k, Ordering::Release);
        }
        self.opened.notify_all();
    }

    /// Waits until sweep `k` is complete: `Some(waited)`, or `None` if the solve was stopped
    /// first.
    fn wait_complete(&self, k: u64, stop: &AtomicBool) -> Option<bool> {
        if self.complete.load(Ordering::Acquire) >= k {
            return Some(false);
        }
        let mut gate = self.gate.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut waited = false;
        while self.complete.load(Ordering::Acquire) < k {
            if stop.load(Ordering::Acquire) {
                return None;
            }
            waited = true;
            gate = self.opened.wait(gate).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        Some(waited)
    }
}

/// Whether a complete sweep whose largest change was `largest`, after one of `previous`, predicts
/// `S` within [`LAG`]` + `[`CLOSING_SWEEPS`]` - 1` sweeps (module docs, "Closing"): the changes
/// shrink by `largest / previous` a sweep, so `S` is `ln(τ / largest) / ln(largest / previous)`
/// sweeps away. A sweep already within the tolerance closes; one that did not shrink the change
/// predicts nothing.
fn closes(previous: f64, largest: f64, tolerance: f64) -> bool {
    if largest <= tolerance {
        return true;
    }
    let rate = largest / previous;
    if !(rate > 0.0 && rate < 1.0) {
        return false;
    }
    let remaining = (tolerance / largest).ln() / rate.ln();
    remaining <= (LAG + CLOSING_SWEEPS - 1) as f64
}

/// Lines of unknowns a patch's footprint counts besides its own (see `run_patch`).
const FOOTPRINT_NEIGHBOUR_LINES: usize = 6;

/// [`Shared::alarm`]: nothing happened.
const QUIET: u8 = 0;
/// [`Shared::alarm`]: the watchdog saw the time limit pass.
const TIMED_OUT: u8 = 1;
/// [`Shared::alarm`]: a ULT panicked.
const PANICKED: u8 = 2;

/// What every ULT of a solve shares.
struct Shared {
    patches: Patches,
    values: Values,
    states: Box<[PatchState]>,
    /// The patches without a lower-coloured neighbour: the root starts them.
    first: Vec<usize>,
    progress: Progress,
    /// The patches' ULTs that have not returned yet.
    running: WaitGroup,
    /// Set to stop every ULT early (time limit, panic, failed spawn).
    stop: AtomicBool,
    /// Why the solve was stopped early, if it was (`QUIET` otherwise).
    alarm: AtomicU8,
    tolerance: f64,
    prefetch: bool,
}

impl Shared {
    /// Stops the solve for `why`: every ULT returns at its next step.
    fn abort(&self, why: u8) {
        let _ = self.alarm.compare_exchange(QUIET, why, Ordering::AcqRel, Ordering::Acquire);
        self.stop.store(true, Ordering::Release);
        for state in self.states.iter() {
            state.ready.release();
        }
        // A patch decides to wait at the gate under its lock, after reading `stop`.
        drop(self.progress.gate.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        self.progress.opened.notify_all();
    }

    /// Patch `q`'s neighbour finished a sweep that `q`'s next one reads.
    #[inline]
    fn signal(&self, q: usize) {
        let state = &self.states[q];
        if signal(&state.missing) {
            state.ready.release();
        }
    }

    fn relaxations(&self) -> u64 {
        self.states.iter().map(|s| s.relaxations.load(Ordering::Relaxed)).sum()
    }
}

/// What one ULT did.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    sweeps: u64,
    relaxations: u64,
    sleeps: u64,
    gate_waits: u64,
    closing_waits: u64,
}

/// The result of a solve.
#[derive(Clone, Debug)]
pub struct Solution {
    /// The unknowns, in Morton order.
    pub values: Vec<f64>,
    /// Smoothing operations: relaxations of one unknown.
    pub relaxations: u64,
    /// Patch sweeps (runs of a patch's ULT).
    pub sweeps: u64,
    /// Sweeps that had to wait for a neighbour (the ULT slept and was woken), rather than finding
    /// their inputs ready.
    pub sleeps: u64,
    /// Times a patch, its sweep done, had to wait for the sweep before it to complete on the
    /// whole mesh (the gate, see the module docs) before it could decide to go on.
    pub gate_waits: u64,
    /// Times a patch, after the solve closed (module docs, "Closing"), had to wait for its own
    /// sweep to complete on the whole mesh before it could decide to go on: the closing sweeps'
    /// barrier waits.
    pub closing_waits: u64,
    /// Sweeps of the whole mesh: every patch ran this many (the sequential reference: its sweeps).
    pub iterations: u64,
    /// ULTs (patches).
    pub ults: usize,
    /// Time from the start of the first sweep to the end of the last: spawning, stack allocation
    /// and joining are not in it.
    pub elapsed: Duration,
    /// CPU time the process used over the same span (every thread; `None` where the system does
    /// not say): at one processor, the solve's time without the time other programs took the
    /// CPU away, which a shared machine's wall clock includes.
    pub cpu: Option<Duration>,
}

impl Solution {
    /// Smoothing operations per second.
    pub fn rate(&self) -> f64 {
        self.relaxations as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Reads a running solve's progress from any thread.
#[derive(Clone)]
pub struct Monitor {
    shared: Arc<Shared>,
}

impl fmt::Debug for Monitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor").field("relaxations", &self.relaxations()).finish()
    }
}

impl Monitor {
    /// Relaxations done so far (a sum of per-patch snapshots).
    pub fn relaxations(&self) -> u64 {
        self.shared.relaxations()
    }

    /// Patches whose ULT has not finished yet (a snapshot).
    pub fn active(&self) -> usize {
        self.shared.running.count()
    }

    /// Sweeps of the whole mesh complete so far.
    pub fn complete_sweeps(&self) -> u64 {
        self.shared.progress.complete.load(Ordering::Relaxed)
    }
}

/// A solve, set up and ready to run on a runtime.
pub struct ActiveSolver {
    shared: Arc<Shared>,
    time_limit: Duration,
}

impl fmt::Debug for ActiveSolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActiveSolver").field("patches", &self.patches()).finish_non_exhaustive()
    }
}

impl ActiveSolver {
    /// Lays out `problem` in patches, starting from `u = 0`.
    pub fn new(problem: &Problem, options: &SolveOptions) -> Result<ActiveSolver, SolveError> {
        options.validate()?;
        let patches = Patches::new(problem, options.patch_size);
        let count = patches.count();
        let states: Box<[PatchState]> = (0..count)
            .map(|p| PatchState {
                missing: AtomicU32::new(patches.lower_neighbours(p) as u32),
                ready: Semaphore::new(0),
                relaxations: AtomicU64::new(0),
            })
            .collect();
        let first = (0..count).filter(|&p| patches.lower_neighbours(p) == 0).collect();
        let running = WaitGroup::new();
        running.add(count);
        let shared = Shared {
            values: Values::new(&vec![0.0; problem.len()]),
            states,
            first,
            progress: Progress::new(count),
            running,
            stop: AtomicBool::new(false),
            alarm: AtomicU8::new(QUIET),
            tolerance: options.tolerance,
            prefetch: options.prefetch,
            patches,
        };
        Ok(ActiveSolver { shared: Arc::new(shared), time_limit: options.time_limit })
    }

    /// Number of patches, i.e. of ULTs the solve runs.
    pub fn patches(&self) -> usize {
        self.shared.patches.count()
    }

    /// Number of colours of the patches.
    pub fn colours(&self) -> usize {
        self.shared.patches.colours()
    }

    /// Bytes of the patches' blocks (the static data the ULTs read).
    pub fn block_bytes(&self) -> usize {
        self.shared.patches.bytes()
    }

    /// A handle to watch the solve's progress from another thread.
    pub fn monitor(&self) -> Monitor {
        Monitor { shared: self.shared.clone() }
    }

    /// Runs the solve on `rt` (as its root ULT): spawns one ULT per patch with the runtime's
    /// default stack size, starts the patches without a lower-coloured neighbour, waits until
    /// every ULT returned, and joins them. A watchdog OS thread enforces the time limit, so the
    /// root's wait is untimed (an armed timer would make every pass of the processor loop read
    /// the clock).
    pub fn solve(self, rt: &elite_rt::Runtime) -> Result<Solution, SolveError> {
        let ActiveSolver { shared, time_limit } = self;
        let (done, watch) = std::sync::mpsc::channel::<()>();
        let watched = shared.clone();
        let watchdog = std::thread::Builder::new()
            .name("grid-watchdog".into())
            .spawn(move || {
                if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(time_limit) {
                    watched.abort(TIMED_OUT);
                }
            })
            .map_err(|e| SolveError::Panicked(format!("could not start the watchdog thread: {e}")))?;
        let result = rt.block_on(|| solve_root(&shared, time_limit));
        drop(done);
        // The watchdog returns as soon as `done` is gone.
        let _ = watchdog.join();
        result
    }
}

/// The root ULT of a solve.
fn solve_root(shared: &Arc<Shared>, time_limit: Duration) -> Result<Solution, SolveError> {
    let count = shared.patches.count();
    let ready = Arc::new(WaitGroup::new());
    ready.add(count);
    let mut handles = Vec::with_capacity(count);
    for p in 0..count {
        let (s, r) = (shared.clone(), ready.clone());
        match elite_rt::Builder::new().spawn(move || run_patch(&s, p, &r)) {
            Ok(h) => handles.push(h),
            Err(e) => {
                shared.abort(PANICKED);
                join_all(handles);
                return Err(SolveError::Spawn(e));
            }
        }
    }
    // Every ULT has its stack and sleeps (or one could not start: its join says why). Timed
    // waits are fine here: the clock has not started.
    while !ready.wait_timeout(Duration::from_millis(20)) {
        if handles.iter().any(JoinHandle::is_finished) || shared.stop.load(Ordering::Acquire) {
            shared.abort(PANICKED);
            return Err(failure(shared, handles, time_limit));
        }
    }
    let (start, cpu_start) = (Instant::now(), process_cpu_time());
    for &p in &shared.first {
        shared.states[p].ready.release();
    }
    shared.running.wait();
    let elapsed = start.elapsed();
    let cpu = process_cpu_time().zip(cpu_start).map(|(end, start)| end.saturating_sub(start));
    if shared.alarm.load(Ordering::Acquire) != QUIET {
        return Err(failure(shared, handles, time_limit));
    }
    let mut total = Tally::default();
    for t in join_all(handles) {
        match t {
            Ok(t) => {
                total.sweeps += t.sweeps;
                total.relaxations += t.relaxations;
                total.sleeps += t.sleeps;
                total.gate_waits += t.gate_waits;
                total.closing_waits += t.closing_waits;
            }
            Err(why) => return Err(SolveError::Panicked(why)),
        }
    }
    // Every patch ran the same sweeps (module docs).
    let iterations = total.sweeps / count.max(1) as u64;
    Ok(Solution {
        values: shared.values.to_vec(),
        relaxations: total.relaxations,
        sweeps: total.sweeps,
        sleeps: total.sleeps,
        gate_waits: total.gate_waits,
        closing_waits: total.closing_waits,
        iterations,
        ults: count,
        elapsed,
        cpu,
    })
}

/// The CPU time this process has used so far (user and system, every thread); `None` where
/// the OS does not say. Over an interval it is the time the process's threads ran: a thread
/// asleep, or held off its CPU by the OS (other load, a real-time policy's throttling), adds
/// nothing.
pub fn process_cpu_time() -> Option<Duration> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `getrusage` writes a `rusage` to the pointer, which points to enough memory.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: the call succeeded, so it initialized `usage`.
    let usage = unsafe { usage.assume_init() };
    let of = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Some(of(usage.ru_utime) + of(usage.ru_stime))
}

/// Joins every ULT: each one's tally, or why it panicked.
fn join_all(handles: Vec<JoinHandle<Tally>>) -> Vec<Result<Tally, String>> {
    handles.into_iter().map(|h| h.join().map_err(|payload| panic_message(&*payload))).collect()
}

/// Joins every ULT after the solve was stopped early (`abort` was called), and says why.
fn failure(shared: &Shared, handles: Vec<JoinHandle<Tally>>, time_limit: Duration) -> SolveError {
    let mut why = None;
    for h in handles {
        if let Err(payload) = h.join() {
            if why.is_none() {
                why = Some(match payload.downcast_ref::<SpawnError>() {
                    Some(e) => SolveError::Spawn(e.clone()),
                    None => SolveError::Panicked(panic_message(&*payload)),
                });
            }
        }
    }
    if shared.alarm.load(Ordering::Acquire) == TIMED_OUT {
        return SolveError::TimeLimit { limit: time_limit, relaxations: shared.relaxations() };
    }
    why.unwrap_or_else(|| SolveError::Panicked("a ULT returned before the solve ended".into()))
}

/// Marks the ULT finished when it returns, and stops the solve if it unwinds (a bug: relaxing
/// cannot panic).
struct Leaving<'a>(&'a Shared);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abort(PANICKED);
        }
        self.0.running.done();
    }
}

/// The life of a patch's ULT (see the module docs).
fn run_patch(shared: &Shared, p: usize, ready: &WaitGroup) -> Tally {
    let _leaving = Leaving(shared);
    let patch = shared.patches.patch(p);
    let state = &shared.states[p];
    let progress = &shared.progress;
    // The data a sweep touches, for the policies that estimate cache misses (their estimator
    // takes each run to touch this much): the block, the patch's unknowns, and the lines of
    // unknowns it reads from its neighbours.
    elite_rt::set_footprint(
        std::mem::size_of_val(patch.block())
            + (patch.len() * 8).div_ceil(64) * 64
            + FOOTPRINT_NEIGHBOUR_LINES * 64,
    );
    if shared.prefetch {
        declare_data_block(patch.block());
    }
    let degree = patch.neighbours().count() as u32;
    let len = patch.len() as u64;
    let mut tally = Tally::default();
    ready.done();
    // `k`: the sweeps done.
    let mut k = 0u64;
    loop {
        // Wait for the sweeps that sweep `k + 1` reads (the root's start for sweep 1 when no
        // neighbour has a lower colour; nothing from sweep 2 on when there is no neighbour).
        if (k == 0 || degree > 0) && !state.ready.try_acquire() {
            tally.sleeps += 1;
            state.ready.acquire();
        }
        if shared.stop.load(Ordering::Acquire) {
            break;
        }
        k += 1;
        // The signals for sweep `k + 1` all come after this sweep's own signals below.
        state.missing.store(degree, Ordering::Relaxed);
        let drift = patch.relax(&shared.values);
        tally.sweeps += 1;
        tally.relaxations += len;
        // The solve's unit of work for `Policy::auto` (the work is the same under every policy,
        // so more relaxations per second is a shorter solve).
        elite_rt::progress(len);
        // Owner-only counter: a plain store, no read-modify-write.
        state.relaxations.store(tally.relaxations, Ordering::Relaxed);
        for q in patch.neighbours() {
            shared.signal(q);
        }
        progress.finish(p, k, drift, shared.tolerance, &shared.stop);
        // Sweep `k + 1` runs unless `S`, the first sweep within the tolerance, is at most
        // `k + 1 - LAG`, or, once the solve closed at `C <= k + 1 - LAG`, at most `k`.
        if let Some(gate) = (k + 1).checked_sub(LAG).filter(|&d| d > 0) {
            match progress.wait_complete(gate, &shared.stop) {
                None => break,
                Some(waited) => tally.gate_waits += u64::from(waited),
            }
            let decisive = if progress.closing.load(Ordering::Acquire) <= gate {
                match progress.wait_complete(k, &shared.stop) {
                    None => break,
                    Some(waited) => tally.closing_waits += u64::from(waited),
                }
                k
            } else {
                gate
            };
            if progress.converged.load(Ordering::Acquire) <= decisive {
                break;
            }
        }
    }
    tally
}

/// What a patch's sweep costs besides relaxing its cells, and what relaxing a cell costs, as
/// measured on this machine by [`measure_costs`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// Nanoseconds to relax one cell (sequential Gauss-Seidel over the whole problem).
    pub cell_ns: f64,
    /// Nanoseconds a sweep spends outside its cells: waking the next ULT through its semaphore,
    /// blocking on its own, the switch, and eight signals to other patches, with the ULTs' and
    /// the signals' lines cold, as they are when many patches take turns.
    pub sweep_ns: f64,
}

/// The share of a sweep's time that [`Costs::patch_size`] allows the per-sweep costs.
pub const OVERHEAD_SHARE: f64 = 0.03;

/// The fewest patches per processor [`Costs::patch_size`] leaves, so that every colour has work
/// for every processor.
pub const MIN_PATCHES_PER_PROCESSOR: usize = 48;

impl Costs {
    /// The patch size that keeps the per-sweep costs near [`OVERHEAD_SHARE`] of a sweep, in
    /// whole cache lines of unknowns (a multiple of 8 cells), `8..=MAX_PATCH`, and small enough
    /// to leave [`MIN_PATCHES_PER_PROCESSOR`] patches per processor for `cells` cells.
    pub fn patch_size(&self, cells: usize, processors: usize) -> usize {
        let wanted = (self.sweep_ns / (OVERHEAD_SHARE * self.cell_ns.max(0.1))).ceil();
        let wanted = if wanted.is_finite() { wanted.min(MAX_PATCH as f64) as usize } else { MAX_PATCH };
        let most = cells / (MIN_PATCHES_PER_PROCESSOR * processors.max(1));
        wanted.min(most).next_multiple_of(8).clamp(8, MAX_PATCH)
    }
}

/// ULTs in the ring of [`measure_costs`]: about as many as patches of a few hundred cells make at
/// the default size, so that their control blocks and stacks do not stay cached.
const RING_ULTS: usize = 1024;

/// Turns of the token around the ring; the first is not timed (it finds the ULTs' lines wherever
/// spawning left them).
const RING_TURNS: usize = 5;

/// Measures [`Costs`] on this machine: three sequential sweeps of `problem` (the fastest counts),
/// and a token passed 4 times (after one untimed turn) around a ring of 1024 ULTs of a
/// one-processor runtime built for it, each holder signalling eight lines spread over 8 MiB
/// before it wakes the next one through its semaphore and blocks on its own.
pub fn measure_costs(problem: &Problem) -> Result<Costs, elite_rt::BuildError> {
    let mut u = vec![0.0; problem.len()];
    let mut cell_ns = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        problem.gauss_seidel(&mut u, 0.0, 1);
        cell_ns = cell_ns.min(start.elapsed().as_secs_f64() * 1e9 / problem.len().max(1) as f64);
    }
    let rt = elite_rt::Runtime::builder().processors(1).stack_size(16 * 1024).build()?;
    let sweep_ns = rt.block_on(|| {
        let bells: Arc<Vec<Semaphore>> = Arc::new((0..RING_ULTS).map(|_| Semaphore::new(0)).collect());
        // 8 MiB of counters, one per line: larger than the caches that matter here.
        let lines: Arc<Vec<AtomicU64>> = Arc::new((0..(8 << 20) / 8).map(|_| AtomicU64::new(0)).collect());
        let started = Arc::new(WaitGroup::new());
        started.add(RING_ULTS);
        let second_turn = Arc::new(std::sync::OnceLock::new());
        let ring: Vec<_> = (0..RING_ULTS)
            .map(|i| {
                let (bells, lines, started) = (bells.clone(), lines.clone(), started.clone());
                let second_turn = second_turn.clone();
                elite_rt::spawn(move || {
                    started.done();
                    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    for turn in 0..RING_TURNS {
                        bells[i].acquire();
                        if i == 0 && turn == 1 {
                            let _ = second_turn.set(Instant::now());
                        }
                        for _ in 0..8 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let line = (x as usize % (lines.len() / 8)) * 8;
                            lines[line].fetch_add(1, Ordering::AcqRel);
                        }
                        bells[(i + 1) % RING_ULTS].release();
                    }
                })
            })
            .collect();
        started.wait();
        bells[0].release();
        for h in ring {
            let _ = h.join();
        }
        let timed = second_turn.get().map_or(Duration::ZERO, Instant::elapsed);
        timed.as_secs_f64() * 1e9 / (RING_ULTS * (RING_TURNS - 1)) as f64
    });
    Ok(Costs { cell_ns, sweep_ns })
}

/// The text of a panic payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(e) = payload.downcast_ref::<SpawnError>() {
        e.to_string()
    } else {
        "a panic without a message".into()
    }
}

/// Declares `block` as the running ULT's data, for the runtime to prefetch before it next runs
/// the ULT (`elite_rt::set_data_block`).
#[inline]
pub fn declare_data_block(block: &[u64]) {
    elite_rt::set_data_block(block);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Layer;
    use crate::quadtree::{Feature, Quadtree, Refinement};

    fn problem(max_level: u8) -> Problem {
        let eps = 2.0 / (1u64 << max_level) as f64;
        let tree = Quadtree::build(&Refinement {
            base_level: 2,
            max_level,
            feature: Feature::Circle { cx: 0.52, cy: 0.47, r: 0.3 },
            band: 1.0,
            halo: eps,
        })
        .unwrap();
        let layer = Layer { cx: 0.52, cy: 0.47, r: 0.3, width: eps };
        Problem::manufactured(tree, 1.0 / (eps * eps), |x, y| layer.value(x, y))
    }

    fn runtime(processors: usize) -> elite_rt::Runtime {
        elite_rt::Runtime::builder().processors(processors).stack_size(32 * 1024).build().unwrap()
    }

    #[test]
    #[cfg_attr(miri, ignore = "calls getrusage")]
    fn the_process_cpu_time_counts_a_busy_loop() {
        let before = process_cpu_time().expect("the process CPU clock");
        let spun = Instant::now();
        while spun.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(spun.elapsed());
        }
        let after = process_cpu_time().unwrap();
        // The spin ran on a CPU for most of its 30 ms (a loaded machine may hold the thread off
        // for some of it; other tests' threads only add to the process's time).
        assert!(after - before >= Duration::from_millis(5), "{:?}", after - before);
    }

    /// The threaded solve converges on 1 and 2 processors, to the residual its termination
    /// guarantees, and so to the known solution.
    #[test]
    fn threaded_solve_converges_on_one_and_two_processors() {
        let p = problem(7);
        for processors in [1, 2] {
            for patch_size in [1, 8] {
                let options = SolveOptions { patch_size, tolerance: 1e-10, ..SolveOptions::default() };
                let solver = ActiveSolver::new(&p, &options).unwrap();
                let ults = solver.patches();
                let monitor = solver.monitor();
                let s = solver.solve(&runtime(processors)).unwrap();
                assert_eq!(s.ults, ults);
                assert_eq!(monitor.relaxations(), s.relaxations);
                assert!(s.relaxations >= p.len() as u64, "every unknown relaxed at least once");
                assert_eq!(s.sweeps, s.iterations * ults as u64, "every patch runs the same sweeps");
                let residual = p.residual(&s.values);
                let bound = p.residual_bound(options.tolerance);
                assert!(
                    residual <= bound,
                    "{processors} processors, patch {patch_size}: residual {residual:e} > bound {bound:e}"
                );
                let error = p.error(&s.values);
                assert!(error < 1e-7, "{processors} processors, patch {patch_size}: error {error:e}");
            }
        }
    }

    /// The work and the answer do not depend on the schedule: every policy at 1 and 2
    /// processors computes the same values, bit for bit, with the same relaxations, and they are
    /// the rayon peer's after as many sweeps.
    #[test]
    fn the_result_is_the_same_under_every_schedule() {
        let p = problem(7);
        let options = SolveOptions { patch_size: 8, tolerance: 1e-10, ..SolveOptions::default() };
        let mut first: Option<Solution> = None;
        for policy in ["no-affinity", "virtual-time", "reload-transient"] {
            for processors in [1, 2] {
                let rt = elite_rt::Runtime::builder()
                    .policy(policy.parse::<elite_rt::Policy>().unwrap())
                    .processors(processors)
                    .stack_size(32 * 1024)
                    .build()
                    .unwrap();
                let s = ActiveSolver::new(&p, &options).unwrap().solve(&rt).unwrap();
                match &first {
                    None => first = Some(s),
                    Some(f) => {
                        assert_eq!((s.relaxations, s.iterations), (f.relaxations, f.iterations), "{policy}");
                        let same = s.values.iter().zip(&f.values).all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{policy} at {processors} processors computed other values");
                    }
                }
            }
        }
        let f = first.unwrap();
        assert!(f.iterations > 10, "{} sweeps", f.iterations);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let r = crate::rayon_peer::RayonSolver::new(&p, &options)
            .unwrap()
            .run_sweeps(&pool, f.iterations)
            .unwrap();
        assert!(r.values.iter().zip(&f.values).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    /// The closing sweeps (module docs, "Closing"): the ULT solver stops at `S`, the sweep the
    /// rayon peer stops at, where the changes shrink steadily, and it computes the same values.
    #[test]
    fn the_solve_closes_at_the_first_sweep_within_the_tolerance() {
        for (level, patch_size) in [(7, 8), (9, 64)] {
            let p = problem(level);
            let options = SolveOptions { patch_size, tolerance: 1e-9, ..SolveOptions::default() };
            let s = ActiveSolver::new(&p, &options).unwrap().solve(&runtime(2)).unwrap();
            let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
            let r = crate::rayon_peer::RayonSolver::new(&p, &options).unwrap().solve(&pool).unwrap();
            assert_eq!(s.iterations, r.iterations, "size {level}: the solve did not close at S");
            assert!(s.closing_waits > 0, "size {level}: no sweep waited at the closing barrier");
            assert!(s.values.iter().zip(&r.values).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }

    /// The prediction of `S`: within `LAG + CLOSING_SWEEPS - 1` sweeps at the change's rate of
    /// shrinking closes, further does not, and a change that did not shrink predicts nothing.
    #[test]
    fn the_closing_prediction_follows_the_rate() {
        let reach = (LAG + CLOSING_SWEEPS - 1) as i32;
        let tolerance = 1e-9;
        let at = |sweeps: i32| tolerance / 0.8f64.powi(sweeps);
        assert!(closes(at(reach) / 0.8, at(reach) * 0.99, tolerance));
        assert!(!closes(at(reach + 1) / 0.8, at(reach + 1), tolerance));
        assert!(closes(f64::INFINITY, tolerance, tolerance), "within the tolerance");
        assert!(!closes(f64::INFINITY, at(1), tolerance), "the first sweep predicts nothing");
        assert!(!closes(at(1), at(1), tolerance) && !closes(at(1), at(1) * 2.0, tolerance));
        assert!(!closes(f64::NAN, at(1), tolerance));
    }

    /// A problem of one patch: no neighbour to wait for.
    #[test]
    fn a_single_patch_solves_alone() {
        let p = problem(5);
        let options = SolveOptions { patch_size: MAX_PATCH, tolerance: 1e-10, ..SolveOptions::default() };
        assert!(p.len() <= MAX_PATCH);
        let s = ActiveSolver::new(&p, &options).unwrap().solve(&runtime(2)).unwrap();
        assert_eq!(s.ults, 1);
        assert!(p.residual(&s.values) <= p.residual_bound(options.tolerance));
    }

    #[test]
    fn the_patch_size_follows_the_costs() {
        let costs = Costs { cell_ns: 5.0, sweep_ns: 300.0 };
        // 300 / (0.03 * 5) = 2000 cells, in whole lines.
        assert_eq!(costs.patch_size(1 << 20, 1), 2000);
        // Fewer patches than 48 per processor: smaller.
        assert_eq!(costs.patch_size(96_000, 2), 1000);
        assert_eq!(costs.patch_size(100, 2), 8);
        assert_eq!(Costs { cell_ns: 5.0, sweep_ns: 1e9 }.patch_size(usize::MAX, 1), MAX_PATCH);
        assert_eq!(Costs { cell_ns: 0.0, sweep_ns: 0.0 }.patch_size(1 << 20, 1), 8);
        let measured = measure_costs(&problem(6)).unwrap();
        assert!(measured.cell_ns > 0.0 && measured.sweep_ns > 0.0, "{measured:?}");
    }

    #[test]
    fn a_time_limit_stops_the_solve_cleanly() {
        let p = problem(11);
        let options = SolveOptions {
            // Satisfied only at an exact fixed point, hundreds of sweeps of 40 000 cells away
            // (a release build on a fast host reaches size 9's in under 20 ms).
            tolerance: 1e-300,
            time_limit: Duration::from_millis(20),
            ..SolveOptions::default()
        };
        let err = ActiveSolver::new(&p, &options).unwrap().solve(&runtime(2)).unwrap_err();
        assert!(matches!(err, SolveError::TimeLimit { .. }), "expected a time-limit error, got {err}");
    }

    #[test]
    fn bad_options_name_the_field() {
        let p = problem(5);
        for (options, field) in [
            (SolveOptions { patch_size: 0, ..SolveOptions::default() }, "patch_size"),
            (SolveOptions { patch_size: MAX_PATCH + 1, ..SolveOptions::default() }, "patch_size"),
            (SolveOptions { tolerance: 0.0, ..SolveOptions::default() }, "tolerance"),
            (SolveOptions { tolerance: f64::NAN, ..SolveOptions::default() }, "tolerance"),
            (SolveOptions { time_limit: Duration::ZERO, ..SolveOptions::default() }, "time_limit"),
        ] {
            let e = ActiveSolver::new(&p, &options).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
    }
}
