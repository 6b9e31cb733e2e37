//! The active-threads solver: one ULT per patch, relaxing when woken, waking its neighbours when
//! it changed.
//!
//! Each ULT owns one patch ([`crate::layout`]). Its life:
//!
//! 1. Start, report ready, and sleep on its [`Doorbell`] (so every stack is allocated before the
//!    clock starts). The root then rings every doorbell once.
//! 2. Woken: answer the rings ([`Doorbell::begin_sweep`]), then relax the patch's unknowns once,
//!    in order, with the neighbours' current values (Gauss-Seidel on the patch).
//! 3. If some unknown moved by more than the tolerance `τ` since the patch last told its
//!    neighbours, tell them now (ring each neighbour patch's doorbell), remember the values told,
//!    and yield, so the woken neighbours run before this patch sweeps again.
//! 4. Otherwise sleep until a neighbour rings ([`Doorbell::wait`]); go to 2.
//!
//! Why step 3 yields rather than sweeping again at once (the patch's own cells are coupled, so it
//! must sweep again either way): a sweep against neighbours that have not moved yet is mostly
//! wasted, and worse, with wake-ups served last-in first-out (`no-affinity`) a group of patches
//! that keep waking each other would then run in a tight loop while patches woken earlier wait,
//! their values frozen; the group converges only in steps of about `τ`, which even a small solve
//! cannot afford. The solver thus relies on `yield_now` putting the ULT behind the other ready
//! ULTs of its processor, which is the default `yield_priority` of every policy
//! (`elite_rt::policy::Policy`).
//!
//! The solve is over when no ULT runs and none is woken or pending: the token count of
//! [`Quiescence`] reaches zero (the protocol and why no ring is lost are in
//! [`crate::activation`]). The root then sets the stop flag, rings every doorbell, and joins
//! every ULT.
//!
//! **What the termination guarantees.** When the solve ends, every patch's last sweep moved none
//! of its unknowns by more than `τ` from the values it last told, and it started after the last
//! ring of each neighbour, whose unknowns have stayed within `τ` of what that neighbour last told
//! (a larger move would have rung again). So every unknown's last update used neighbour values
//! within `2τ` of their final ones, and `|b - A u|_i <= 2τ Σ_j a_ij`
//! ([`Problem::residual_bound`](crate::matrix::Problem::residual_bound)): a caller may check a
//! solution against exactly that bound.
//!
//! The ULTs only use `elite_rt`'s public API: `Builder::spawn`, `yield_now`, `set_footprint`,
//! `set_data_block`, and `sync::{Semaphore, WaitGroup}`.

use crate::activation::{Doorbell, Quiescence, Waited};
use crate::layout::{Patches, Values, MAX_PATCH};
use crate::matrix::Problem;
use elite_rt::sync::WaitGroup;
use elite_rt::{JoinHandle, SpawnError};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to solve.
#[derive(Clone, Debug, PartialEq)]
pub struct SolveOptions {
    /// Cells per patch, i.e. per ULT, `1..=64` (default 8: one cache line of unknowns).
    pub patch_size: usize,
    /// A patch wakes its neighbours when one of its unknowns moved by more than this since it
    /// last did (default `1e-9`; finite, `> 0`).
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
        SolveOptions { patch_size: 8, tolerance: 1e-9, prefetch: false, time_limit: Duration::from_secs(120) }
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

/// The shared state of one patch: its doorbell, and a progress counter only its ULT writes.
/// Aligned to a cache line, so ringing one patch never touches another's line.
#[repr(align(64))]
#[derive(Default)]
struct PatchState {
    bell: Doorbell,
    relaxations: AtomicU64,
}

/// Lines of unknowns a patch's footprint counts (see `run_patch`).
const FOOTPRINT_UNKNOWN_LINES: usize = 6;

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
    quiescence: Quiescence,
    /// Set by the root once the solve is over: every ULT returns when it sees it.
    stop: AtomicBool,
    /// Why the root's wait for quiescence was interrupted, if it was (`QUIET` otherwise).
    alarm: AtomicU8,
    tolerance: f64,
    prefetch: bool,
}

impl Shared {
    /// Interrupts the root's wait for quiescence with `why`.
    fn raise(&self, why: u8) {
        self.alarm.store(why, Ordering::Release);
        self.quiescence.interrupt();
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
    notifications: u64,
}

/// The result of a solve.
#[derive(Clone, Debug)]
pub struct Solution {
    /// The unknowns, in Morton order.
    pub values: Vec<f64>,
    /// Smoothing operations: relaxations of one unknown.
    pub relaxations: u64,
    /// Patch sweeps (activations of a ULT).
    pub sweeps: u64,
    /// Times a ULT went to sleep and was woken (sweeps that began with a context switch caused by
    /// a ring rather than a yield).
    pub sleeps: u64,
    /// Sweeps after which the patch woke its neighbours.
    pub notifications: u64,
    /// ULTs (patches).
    pub ults: usize,
    /// Time from the first ring to quiescence: spawning, stack allocation and joining are not in it.
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

    /// ULTs running or woken right now, plus one while the root is starting the solve (a
    /// snapshot, meaningful while the solve runs).
    pub fn active(&self) -> usize {
        self.shared.quiescence.tokens()
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
        let shared = Shared {
            values: Values::new(&vec![0.0; problem.len()]),
            states: (0..count).map(|_| PatchState::default()).collect(),
            // One token per ULT (each starts running) and the root's.
            quiescence: Quiescence::new(count + 1),
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

    /// Bytes of the patches' blocks (the static data the ULTs read).
    pub fn block_bytes(&self) -> usize {
        self.shared.patches.bytes()
    }

    /// A handle to watch the solve's progress from another thread.
    pub fn monitor(&self) -> Monitor {
        Monitor { shared: self.shared.clone() }
    }

    /// Runs the solve on `rt` (as its root ULT): spawns one ULT per patch with the runtime's
    /// default stack size, rings them all, waits for quiescence, stops and joins them. A watchdog
    /// OS thread enforces the time limit, so the root's wait is untimed (an armed timer would make
    /// every pass of the processor loop read the clock).
    pub fn solve(self, rt: &elite_rt::Runtime) -> Result<Solution, SolveError> {
        let ActiveSolver { shared, time_limit } = self;
        let (done, watch) = std::sync::mpsc::channel::<()>();
        let watched = shared.clone();
        let watchdog = std::thread::Builder::new()
            .name("grid-watchdog".into())
            .spawn(move || {
                if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(time_limit) {
                    watched.raise(TIMED_OUT);
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
                stop_all(shared, handles);
                return Err(SolveError::Spawn(e));
            }
        }
    }
    // Every ULT has its stack and sleeps (or one could not start: its join says why). Timed
    // waits are fine here: the clock has not started.
    while !ready.wait_timeout(Duration::from_millis(20)) {
        if handles.iter().any(JoinHandle::is_finished) {
            return Err(failure(shared, handles));
        }
        if shared.alarm.load(Ordering::Acquire) == TIMED_OUT {
            stop_all(shared, handles);
            return Err(SolveError::TimeLimit { limit: time_limit, relaxations: 0 });
        }
    }
    let (start, cpu_start) = (Instant::now(), process_cpu_time());
    for state in shared.states.iter() {
        state.bell.ring(&shared.quiescence);
    }
    shared.quiescence.drop_token();
    shared.quiescence.wait();
    let elapsed = start.elapsed();
    let cpu = process_cpu_time().zip(cpu_start).map(|(end, start)| end.saturating_sub(start));
    match shared.alarm.load(Ordering::Acquire) {
        QUIET => {}
        TIMED_OUT => {
            let relaxations = shared.relaxations();
            stop_all(shared, handles);
            return Err(SolveError::TimeLimit { limit: time_limit, relaxations });
        }
        _ => return Err(failure(shared, handles)),
    }
    let tallies = stop_all(shared, handles);
    let mut total = Tally::default();
    for t in tallies {
        match t {
            Ok(t) => {
                total.sweeps += t.sweeps;
                total.relaxations += t.relaxations;
                total.sleeps += t.sleeps;
                total.notifications += t.notifications;
            }
            Err(why) => return Err(SolveError::Panicked(why)),
        }
    }
    Ok(Solution {
        values: shared.values.to_vec(),
        relaxations: total.relaxations,
        sweeps: total.sweeps,
        sleeps: total.sleeps,
        notifications: total.notifications,
        ults: count,
        elapsed,
        cpu,
    })
}

/// The CPU time this process has used so far (user and system, every thread).
pub(crate) fn process_cpu_time() -> Option<Duration> {
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

/// Sets the stop flag, rings every doorbell and joins every ULT.
fn stop_all(shared: &Shared, handles: Vec<JoinHandle<Tally>>) -> Vec<Result<Tally, String>> {
    shared.stop.store(true, Ordering::Release);
    for state in shared.states.iter() {
        state.bell.ring(&shared.quiescence);
    }
    handles.into_iter().map(|h| h.join().map_err(|payload| panic_message(&*payload))).collect()
}

/// Stops everything after a ULT ended early, and says why it did.
fn failure(shared: &Shared, handles: Vec<JoinHandle<Tally>>) -> SolveError {
    let mut why = None;
    shared.stop.store(true, Ordering::Release);
    for state in shared.states.iter() {
        state.bell.ring(&shared.quiescence);
    }
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
    why.unwrap_or_else(|| SolveError::Panicked("a ULT returned before the solve ended".into()))
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

/// Interrupts the root's wait if the ULT holding it unwinds (a bug: relaxing cannot panic).
struct PanicAlarm<'a>(&'a Shared);

impl Drop for PanicAlarm<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.raise(PANICKED);
        }
    }
}

/// The life of a patch's ULT (see the module docs).
fn run_patch(shared: &Shared, p: usize, ready: &WaitGroup) -> Tally {
    let _alarm = PanicAlarm(shared);
    let patch = shared.patches.patch(p);
    let state = &shared.states[p];
    let q = &shared.quiescence;
    // The data a sweep touches, for the policies that estimate cache misses (their estimator
    // takes each run to touch this much): the block, and the lines of unknowns it reads (its
    // own and, in Morton order, mostly those of a few neighbouring patches).
    elite_rt::set_footprint(std::mem::size_of_val(patch.block()) + FOOTPRINT_UNKNOWN_LINES * 64);
    if shared.prefetch {
        declare_data_block(patch.block());
    }
    let len = patch.len();
    // `told`: the values the neighbours were last told about; `now`: after the last sweep.
    let mut told = [0.0f64; MAX_PATCH];
    let mut now = [0.0f64; MAX_PATCH];
    for (r, t) in told[..len].iter_mut().enumerate() {
        *t = shared.values.get(patch.first() + r);
    }
    let mut tally = Tally::default();
    ready.done();
    if state.bell.wait(q) == Waited::Woken {
        tally.sleeps += 1;
    }
    while !shared.stop.load(Ordering::Acquire) {
        state.bell.begin_sweep();
        let drift = patch.relax(&shared.values, &told[..len], &mut now[..len]);
        tally.sweeps += 1;
        tally.relaxations += len as u64;
        // Owner-only counter: a plain store, no read-modify-write.
        state.relaxations.store(tally.relaxations, Ordering::Relaxed);
        if drift > shared.tolerance {
            told[..len].copy_from_slice(&now[..len]);
            for n in patch.neighbours() {
                shared.states[n].bell.ring(q);
            }
            tally.notifications += 1;
            elite_rt::yield_now();
        } else if state.bell.wait(q) == Waited::Woken {
            tally.sleeps += 1;
        }
    }
    tally
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
                assert!(s.sweeps >= s.notifications);
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

    #[test]
    fn a_time_limit_stops_the_solve_cleanly() {
        let p = problem(9);
        let options = SolveOptions {
            // Satisfied only at an exact fixed point, hundreds of sweeps of 10 000 cells away.
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
            (SolveOptions { patch_size: 65, ..SolveOptions::default() }, "patch_size"),
            (SolveOptions { tolerance: 0.0, ..SolveOptions::default() }, "tolerance"),
            (SolveOptions { tolerance: f64::NAN, ..SolveOptions::default() }, "tolerance"),
            (SolveOptions { time_limit: Duration::ZERO, ..SolveOptions::default() }, "time_limit"),
        ] {
            let e = ActiveSolver::new(&p, &options).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
    }
}
