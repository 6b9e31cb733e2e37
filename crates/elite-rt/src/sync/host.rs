//! What this host's costs are, and the thresholds of the runtime that derive from them.
//!
//! A threshold tuned on one machine does not carry to another: the time a cache line takes to
//! cross between two cores differs several times over from machine to machine, and the time to
//! wake a parked thread by an order of magnitude or more (a hypervisor that halts idle virtual
//! CPUs must first schedule the sleeper's again). So the runtime measures what
//! its thresholds are made of, on the host it runs on, and derives each threshold from those
//! measurements by a rule that is the same everywhere:
//!
//! | threshold | derived from | rule |
//! | --- | --- | --- |
//! | the adaptive spin budget ([`SpinPolicy::Adaptive`](super::SpinPolicy::Adaptive)) | the coroutine round trip (at start) and the wake-up of a parked processor (at start, then a running average of the wake-ups the runtime makes) | spin for as long as blocking costs: a coroutine round trip plus a wake-up ([`SwitchCost`]) |
//! | the adaptive spin threshold on a lock's hold time | the same | half the spin budget |
//! | a mutex's saturation window (`sync::mutex::gather`) | a cache line's round trip between two cores (at start, or at a later runtime's start while unmeasured) | a candidate when its bounces come less than [`GATHER_ROUND_TRIPS`] round trips apart on average, saturated if its trial (its measured period per acquisition, gathered against spread) says so; no longer when more than 4 times that; never while the round trip is unmeasured |
//! | the hand-off rule's line count ([`policy::hand_off`](crate::policy::hand_off)) | the line round trip and the time to fetch a line last written by another core, in a stream (as the round trip) | the lines that can be fetched in the time [`HAND_OFF_ROUND_TRIPS`] round trips take (4 to 256); 4 while unmeasured |
//!
//! The affinity policies' quiet mode is not among them: its bound, *little data*, is a share of
//! the first-level data cache the topology describes ([`policy`](crate::policy), "When there is
//! nothing to act on"), so it holds whether or not the line costs below could be measured.
//!
//! # The measurements
//!
//! [`host_costs`] measures once per process, when the first runtime starts (a few milliseconds
//! at most, two short-lived helper threads):
//!
//! * **Coroutine round trip**: the fastest of five batches of 2000 switches to a coroutine and
//!   back.
//! * **Wake-up**: the median latency of nine unparks of a helper thread parked for 50 µs (longer
//!   than an idle processor spins before it parks), from the unpark to the helper's answer.
//! * **Line round trip**: this thread and a helper pass a counter on one cache line back and
//!   forth, each waiting for the other's write, each round trip timed. A round trip over
//!   [`MAX_LINE_ROUND_TRIP_NS`] (2 µs) is not a transfer but two threads taking turns on a CPU
//!   (one of them descheduled). It takes 100 round trips, and more, 100 at a time, while
//!   fewer than a quarter of them were transfers (a busy host), up to 2000 or for 20 ms; the
//!   round trip is the first quartile of the transfers. With fewer transfers than that, both
//!   line costs are unmeasured. (A fixed 100 round trips, transfers or not, would leave the
//!   costs unmeasured whenever another program kept the helper from running beside this thread
//!   for most of them.) On Linux the two threads are kept on two CPUs while they
//!   measure: this thread pinned to the CPU it runs on, the helper to another CPU of its mask,
//!   and this thread's mask restored afterwards. Left to the OS, a helper started while another
//!   program keeps one CPU busy tends to join this thread on the idle CPU, and the two take
//!   turns there, which leaves the line costs unmeasured; pinned, they run side by side.
//! * **Line fetch**: between round trips the helper writes 64 lines of a block, then this thread
//!   reads them all at once (independent loads, which the core overlaps): the median time per
//!   line over 15 such reads.
//!
//! With a single CPU the helper never runs beside this thread, nor under valgrind (one thread at
//! a time), so the two line measurements are left out; so are they where the environment
//! variable `ELITE_LINE_COSTS` ([`LINE_COSTS_ENV`]) is `unmeasured`, which makes a process run
//! as on a host where they could not be measured (to compare the rules' two cases).
//! Unmeasured line costs decide nothing
//! ([`HostCosts::lines_measured`]): the numbers in their place ([`DEFAULT_LINE_ROUND_TRIP_NS`],
//! [`DEFAULT_LINE_FETCH_NS`]) are only for readers that want one; no lock saturates, so none
//! gathers (with a single CPU a lock cannot bounce between cores anyway), and the hand-off rule
//! allows its fewest lines (a woken ULT with more expected at home goes home, the policy's own
//! choice). A runtime with two processors or more that starts while they are unmeasured measures
//! them again (`measure_lines_if_unmeasured`, the same measurement), so that a busy moment at the
//! first start (two threads that never ran side by side) does not leave them unmeasured for the
//! life of the process. [`DEFAULT_WAKE_NS`] stands in for the wake-up when no helper thread
//! starts (then no runtime thread could start either); the running average of real wake-ups
//! replaces it (below).
//!
//! # Re-measured while running
//!
//! The wake-up of a parked processor is the cost that moves most with the host's load (a busy host
//! keeps a virtual CPU from halting, and its wake-ups are fast), so the runtime measures every
//! wake-up it makes: the waker stamps the processor's park slot (`park::ParkSlot`) when it
//! unparks it, and the processor, back from its park, adds the time since the stamp to a running
//! average (7/8 old, 1/8 new, the new counted as at most twice the old, so that one wake-up delayed
//! by a busy host moves it little; samples above [`MAX_WAKE_SAMPLE_NS`] are dropped as not a
//! wake-up but a stamp left over from another). The spin budget and threshold follow that average
//! ([`switch_cost`]). The line costs are measured once they can be: they do not move with the load, only
//! with where the hypervisor places the virtual CPUs, which a process cannot see (two virtual
//! CPUs that are two hardware threads of one core pass a line far faster than two on separate
//! cores, and which a process gets may change from one run to the next).

// (Miri measures nothing: the measurement code goes unused there.)
#![cfg_attr(miri, allow(dead_code, unused_imports))]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::ticks;

/// The costs of this host that the runtime's thresholds are derived from (see the
/// notes of `sync/host.rs` in the source), measured by [`host_costs`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct HostCosts {
    /// One switch to a stackful coroutine and back (a resume and a suspend), in nanoseconds.
    pub coroutine_ns: f64,
    /// The wake-up of a parked thread as measured at start, in nanoseconds (the running average
    /// that follows it is in [`switch_cost`]).
    pub wake_ns: f64,
    /// A cache line's round trip between two cores: written by one, read and written by the
    /// other, read by the first again, in nanoseconds.
    pub line_round_trip_ns: f64,
    /// Reading one line of a block another core has just written, many lines at once, in
    /// nanoseconds per line.
    pub line_fetch_ns: f64,
    /// Time-stamp ticks per nanosecond (`sync::ticks`).
    pub ticks_per_ns: f64,
    /// Whether the two line costs were measured on this host. When they could not be (a single
    /// CPU, valgrind, two threads that never ran side by side), `line_round_trip_ns` and
    /// `line_fetch_ns` hold stand-ins (100 ns and 10 ns), which
    /// decide nothing: no lock saturates ([`HostCosts::gather_gap_ns`] is 0) and the hand-off
    /// rule allows its fewest lines ([`HostCosts::hand_off_lines`]), until a runtime with two
    /// processors or more starts and measures them (see the notes of `sync/host.rs` in the
    /// source).
    pub lines_measured: bool,
}

/// The measured cost of a context switch in the runtime, and the spin threshold derived from it.
///
/// ELiTE's threshold is "50% of the cycles for a context switch" (section 2.3.2), the switch being
/// what a waiter pays when it blocks instead of spinning: switching out to its processor, having
/// the wake-up delivered to it, and switching back in. When the waiter's processor has nothing else
/// to run it parks meanwhile, so the delivery includes waking a parked OS thread, which dwarfs the
/// register switch (a coroutine round trip takes nanoseconds; waking a parked processor takes
/// microseconds, and far longer in a virtual machine whose host halted its virtual CPU). So the
/// cost is `coroutine_ns + wake_ns`, the wake-up being the running average of the wake-ups the
/// runtime has made (see the notes of `sync/host.rs` in the source).
#[derive(Clone, Copy, Debug)]
pub struct SwitchCost {
    /// The context switch as a blocked waiter pays it: `coroutine_ns + wake_ns`, in nanoseconds.
    pub switch_ns: f64,
    /// The same in time-stamp ticks (the adaptive policy's spin budget).
    pub switch_ticks: u64,
    /// Half of `switch_ticks`: the adaptive policy's threshold on a lock's average hold time.
    pub threshold_ticks: u64,
    /// One switch to a stackful coroutine and back (a resume and a suspend), in nanoseconds: the
    /// register switch alone.
    pub coroutine_ns: f64,
    /// The wake-up of a parked processor, in nanoseconds: measured at start (the median latency
    /// of unparking a thread parked for longer than an idle processor spins), then the running
    /// average of the wake-ups the runtime made.
    pub wake_ns: f64,
}

impl SwitchCost {
    /// The switch cost of a host with `costs` whose wake-ups take `wake_ticks` on average.
    fn derive(costs: &HostCosts, wake_ticks: u64) -> SwitchCost {
        let wake_ns = wake_ticks as f64 / costs.ticks_per_ns;
        let switch_ns = costs.coroutine_ns + wake_ns;
        let switch_ticks = ((switch_ns * costs.ticks_per_ns) as u64).max(2);
        SwitchCost {
            switch_ns,
            switch_ticks,
            threshold_ticks: switch_ticks / 2,
            coroutine_ns: costs.coroutine_ns,
            wake_ns,
        }
    }
}

/// Wake-up time assumed when no helper thread can be started to measure it (nanoseconds).
pub const DEFAULT_WAKE_NS: f64 = 2000.0;

/// A line's round trip between cores in [`HostCosts`] where it could not be measured (a single
/// CPU), in nanoseconds: a number for readers only, on which no threshold depends
/// ([`HostCosts::lines_measured`]).
pub const DEFAULT_LINE_ROUND_TRIP_NS: f64 = 100.0;

/// A streamed line fetch in [`HostCosts`] where it could not be measured (a single CPU), in
/// nanoseconds: as [`DEFAULT_LINE_ROUND_TRIP_NS`], for readers only.
pub const DEFAULT_LINE_FETCH_NS: f64 = 10.0;

/// A lock is a candidate for saturation when its bounces (acquisitions from another processor
/// than the one before) come less than this many line round trips apart on average: the line's
/// transfers then take an eighth of the time or more, and its contenders may do more on one
/// processor than on two. A wide band: whether they do is the candidate's trial's to say (its
/// period per acquisition timed gathered against spread: `sync::mutex::gather`).
pub const GATHER_ROUND_TRIPS: f64 = 8.0;

/// The hand-off rule lets a woken ULT follow its waker when its lines expected at home can be
/// fetched again in the time this many line round trips take: about what going home costs in
/// transfers (the push onto the home's wake-up stack, its drain, and the handed-over data
/// fetched back by the woken ULT).
pub const HAND_OFF_ROUND_TRIPS: f64 = 3.0;

/// The fewest and the most lines the hand-off rule may allow, whatever the measurements say (a
/// ULT with more than 16 KiB expected at home goes home: its data is worth more than any wake-up).
const HAND_OFF_LINES_RANGE: (f64, f64) = (4.0, 256.0);

/// A wake-up sample longer than this (nanoseconds) is dropped from the running average.
pub const MAX_WAKE_SAMPLE_NS: f64 = 10_000_000.0;

impl HostCosts {
    /// The time between bounces below which a lock is a candidate for saturation (saturated if
    /// its trial says so), in nanoseconds: `GATHER_ROUND_TRIPS` (8) line round trips; 0 (no
    /// lock saturates) while the line costs are not measured ([`HostCosts::lines_measured`]).
    ///
    /// ```
    /// let costs = elite_rt::sync::HostCosts::scripted(2.0, 2000.0, 100.0, 10.0);
    /// assert_eq!(costs.gather_gap_ns(), 800.0);
    /// assert_eq!(costs.unmeasured_lines().gather_gap_ns(), 0.0);
    /// ```
    pub fn gather_gap_ns(&self) -> f64 {
        if !self.lines_measured {
            return 0.0;
        }
        GATHER_ROUND_TRIPS * self.line_round_trip_ns
    }

    /// The most lines a woken ULT may expect still cached at home and yet follow its waker
    /// ([`policy::hand_off`](crate::policy::hand_off)): the lines fetched in the time of
    /// [`HAND_OFF_ROUND_TRIPS`] line round trips, within 4 and 256; the fewest, 4, while the line
    /// costs are not measured ([`HostCosts::lines_measured`]).
    ///
    /// ```
    /// // A host whose lines take 100 ns there and back, and 9.4 ns each in a stream.
    /// let costs = elite_rt::sync::HostCosts::scripted(2.0, 2000.0, 100.0, 9.4);
    /// assert_eq!(costs.hand_off_lines(), 31.0);
    /// assert_eq!(costs.unmeasured_lines().hand_off_lines(), 4.0);
    /// ```
    pub fn hand_off_lines(&self) -> f32 {
        let (lo, hi) = HAND_OFF_LINES_RANGE;
        if !self.lines_measured {
            return lo as f32;
        }
        (HAND_OFF_ROUND_TRIPS * self.line_round_trip_ns / self.line_fetch_ns.max(0.1)).clamp(lo, hi).floor()
            as f32
    }

    /// Costs given rather than measured (the ticks are nanoseconds): to see what the runtime
    /// would derive on a host with these costs.
    pub fn scripted(
        coroutine_ns: f64,
        wake_ns: f64,
        line_round_trip_ns: f64,
        line_fetch_ns: f64,
    ) -> HostCosts {
        HostCosts {
            coroutine_ns,
            wake_ns,
            line_round_trip_ns,
            line_fetch_ns,
            ticks_per_ns: 1.0,
            lines_measured: true,
        }
    }

    /// These costs as on a host whose line costs could not be measured: the defaults in their
    /// place, and [`lines_measured`](HostCosts::lines_measured) false.
    pub fn unmeasured_lines(self) -> HostCosts {
        HostCosts {
            line_round_trip_ns: DEFAULT_LINE_ROUND_TRIP_NS,
            line_fetch_ns: DEFAULT_LINE_FETCH_NS,
            lines_measured: false,
            ..self
        }
    }

    /// These costs with the line costs `lines` (a round trip and a streamed fetch, in ticks, as
    /// [`measure_lines`] gives them) if they are a measurement (some, and a round trip of at most
    /// [`MAX_LINE_ROUND_TRIP_NS`]), else with the line costs unmeasured.
    fn with_lines(self, lines: Option<(f64, f64)>) -> HostCosts {
        match lines {
            Some((round_trip, fetch)) if round_trip / self.ticks_per_ns <= MAX_LINE_ROUND_TRIP_NS => {
                HostCosts {
                    line_round_trip_ns: round_trip / self.ticks_per_ns,
                    line_fetch_ns: fetch / self.ticks_per_ns,
                    lines_measured: true,
                    ..self
                }
            }
            _ => self.unmeasured_lines(),
        }
    }
}

/// The costs of this host (measured when the first runtime starts, the line costs again when a
/// runtime with two processors or more starts while they are unmeasured; see the notes of
/// `sync/host.rs` in the source).
pub fn host_costs() -> HostCosts {
    let first = *COSTS.get_or_init(measure);
    match LINES.get() {
        Some(&later) => {
            HostCosts { line_round_trip_ns: later.0, line_fetch_ns: later.1, lines_measured: true, ..first }
        }
        None => first,
    }
}

/// The costs measured when the first runtime started.
static COSTS: OnceLock<HostCosts> = OnceLock::new();

/// The line costs (round trip, streamed fetch; nanoseconds) measured by a later runtime's start,
/// where the first measurement could not measure them.
static LINES: OnceLock<(f64, f64)> = OnceLock::new();

/// Whether a measurement of the line costs is under way (one at a time: two runtimes starting at
/// once would measure each other's helper threads).
static MEASURING_LINES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// For a runtime of `processors` processors that is starting: measures the line costs if they are
/// not measured yet (the first measurement found one CPU, ran under valgrind, or its two threads
/// never ran side by side: a busy host), so that one busy moment does not leave them unmeasured,
/// and its lock gathering off, for the life of the process. A runtime of one processor measures
/// nothing: its locks cannot bounce, and its wakers are always at home.
pub(crate) fn measure_lines_if_unmeasured(processors: usize) {
    let costs = host_costs();
    if lines_to_measure(&costs, processors)
        && MEASURING_LINES.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
    {
        let measured = costs.with_lines(measure_lines_now());
        if measured.lines_measured {
            let _ = LINES.set((measured.line_round_trip_ns, measured.line_fetch_ns));
        }
        MEASURING_LINES.store(false, Ordering::Release);
    }
}

/// Whether the line costs were measured by a later runtime's start (not the first measurement):
/// one load (what the derived thresholds cached before check).
#[inline]
pub(crate) fn lines_measured_later() -> bool {
    LINES.get().is_some()
}

/// Line costs for the tests of the rules that derive from them, where the measurement could not
/// measure them (a loaded machine running the tests): those of a host whose lines take 100 ns
/// there and back. Measured costs stay as they are.
#[cfg(test)]
pub(crate) fn measured_lines_for_tests() {
    if !host_costs().lines_measured {
        let _ = LINES.set((100.0, 10.0));
    }
}

/// Whether a runtime of `processors` processors starting on a host with `costs` measures the line
/// costs: they are unmeasured, and it has two processors or more.
fn lines_to_measure(costs: &HostCosts, processors: usize) -> bool {
    !costs.lines_measured && processors > 1
}

/// [`measure_lines`] where it can run (nothing under Miri).
fn measure_lines_now() -> Option<(f64, f64)> {
    #[cfg(miri)]
    return None;
    #[cfg(not(miri))]
    measure_lines()
}

/// The running average of the wake-ups the runtime made, in ticks (0: none yet, the measurement
/// at start stands).
static WAKE_AVERAGE: AtomicU64 = AtomicU64::new(0);

/// Wake-ups counted into [`WAKE_AVERAGE`] (counted in tests only).
#[cfg(test)]
static WAKE_SAMPLES: AtomicU64 = AtomicU64::new(0);

/// The context-switch cost on this host now: the coroutine round trip measured at start plus the
/// running average of the wake-ups of parked processors (see the notes of `sync/host.rs` in the source).
pub fn switch_cost() -> SwitchCost {
    let costs = host_costs();
    SwitchCost::derive(&costs, wake_ticks(&costs))
}

/// The spin budget of [`switch_cost`] alone, in ticks (the adaptive spinner's, on its path).
#[inline]
pub(crate) fn switch_ticks() -> u64 {
    let costs = host_costs();
    ((costs.coroutine_ns * costs.ticks_per_ns) as u64 + wake_ticks(&costs)).max(2)
}

/// The wake-up of a parked processor in ticks: the running average, or the measurement at start.
#[inline]
fn wake_ticks(costs: &HostCosts) -> u64 {
    match WAKE_AVERAGE.load(Ordering::Relaxed) {
        0 => (costs.wake_ns * costs.ticks_per_ns) as u64,
        avg => avg,
    }
}

/// The running average after a sample: 7/8 the old, 1/8 the new (the old being `start` before any
/// sample), the new taken as at most twice the old: one wake-up delayed by a busy host (its thread
/// waiting for a CPU for a scheduler tick) moves the average by an eighth at most, while wake-ups
/// that stay slow still raise it, by up to an eighth each.
fn next_average(old: u64, start: u64, sample: u64) -> u64 {
    let old = if old == 0 { start } else { old };
    (old - old / 8 + sample.min(old.saturating_mul(2)) / 8).max(1)
}

/// A processor back from a park that a waker ended: `notified_at` is the waker's time stamp
/// (`park::ParkSlot`), 0 if none. Adds the wake-up's latency to the running average. Two
/// processors that do so at once may lose one of the two samples (a load and a store): the
/// average is a hint, and the next wake-up counts.
pub(crate) fn note_wake(notified_at: u64) {
    if notified_at == 0 {
        return;
    }
    let sample = ticks().wrapping_sub(notified_at); // (before a first `host_costs` measures)
    let costs = host_costs();
    if sample as i64 <= 0 || sample as f64 > MAX_WAKE_SAMPLE_NS * costs.ticks_per_ns {
        return;
    }
    let start = (costs.wake_ns * costs.ticks_per_ns) as u64;
    let old = WAKE_AVERAGE.load(Ordering::Relaxed);
    WAKE_AVERAGE.store(next_average(old, start, sample), Ordering::Relaxed);
    #[cfg(test)]
    WAKE_SAMPLES.fetch_add(1, Ordering::Relaxed);
}

/// Wake-ups counted into the running average so far.
#[cfg(test)]
pub(crate) fn wake_samples() -> u64 {
    WAKE_SAMPLES.load(Ordering::Relaxed)
}

/// Under Miri, which cannot switch stacks or time anything: nominal costs, so that the primitives
/// run there.
#[cfg(miri)]
fn measure() -> HostCosts {
    HostCosts::scripted(5.0, 0.0, DEFAULT_LINE_ROUND_TRIP_NS, DEFAULT_LINE_FETCH_NS).unmeasured_lines()
}

#[cfg(not(miri))]
fn measure() -> HostCosts {
    let (t0, k0) = (Instant::now(), ticks());
    let coroutine_ns = measure_coroutine_round_trip();
    let wake_ns = measure_wake().unwrap_or(DEFAULT_WAKE_NS);
    let lines = measure_lines();
    let (ns, tk) = (t0.elapsed().as_nanos().max(1) as f64, ticks().wrapping_sub(k0) as f64);
    let ticks_per_ns = if tk > 0.0 { tk / ns } else { 1.0 };
    HostCosts {
        coroutine_ns,
        wake_ns,
        line_round_trip_ns: DEFAULT_LINE_ROUND_TRIP_NS,
        line_fetch_ns: DEFAULT_LINE_FETCH_NS,
        ticks_per_ns,
        lines_measured: false,
    }
    .with_lines(lines)
}

/// The fastest of a few batches of coroutine round trips (resume + suspend), in nanoseconds each.
#[cfg(not(miri))]
fn measure_coroutine_round_trip() -> f64 {
    use corosensei::{stack::DefaultStack, Coroutine, CoroutineResult};
    let Ok(stack) = DefaultStack::new(16 * 1024) else {
        return 0.0;
    };
    let mut co = Coroutine::with_stack(stack, |y: &corosensei::Yielder<(), ()>, ()| loop {
        y.suspend(());
    });
    let mut best = f64::MAX;
    for _ in 0..5 {
        const N: u32 = 2000;
        let t0 = Instant::now();
        for _ in 0..N {
            if let CoroutineResult::Return(()) = co.resume(()) {
                break;
            }
        }
        best = best.min(t0.elapsed().as_nanos() as f64 / f64::from(N));
    }
    best
}

/// How long the helper of [`measure_wake`] stays parked before each wake-up: longer than an idle
/// processor spins before it parks, so that the wake-up is that of a processor parked for real.
const WAKE_PAUSE: Duration = Duration::from_micros(50);

/// The latency of waking a parked processor, in nanoseconds: the median over a few wake-ups of a
/// helper thread parked for [`WAKE_PAUSE`] (this thread spins meanwhile and while it waits for
/// the helper's answer). `None` if no helper thread starts.
#[cfg(not(miri))]
fn measure_wake() -> Option<f64> {
    use std::sync::atomic::AtomicU32;
    const TRIPS: u32 = 9;
    let turn = Arc::new(AtomicU32::new(0));
    let me = std::thread::current();
    let helper = {
        let turn = Arc::clone(&turn);
        std::thread::Builder::new()
            .name("elite-switch-cost".into())
            .spawn(move || {
                for i in 0..TRIPS {
                    while turn.load(Ordering::Acquire) != 2 * i + 1 {
                        std::thread::park();
                    }
                    turn.store(2 * i + 2, Ordering::Release);
                    me.unpark(); // for a waiter that stopped spinning (a single CPU)
                }
            })
            .ok()?
    };
    let other = helper.thread().clone();
    let mut trips = Vec::with_capacity(TRIPS as usize);
    for i in 0..TRIPS {
        let pause = Instant::now();
        while pause.elapsed() < WAKE_PAUSE {
            std::hint::spin_loop();
        }
        let t0 = Instant::now();
        turn.store(2 * i + 1, Ordering::Release);
        other.unpark();
        while turn.load(Ordering::Acquire) != 2 * i + 2 {
            if t0.elapsed() < 4 * WAKE_PAUSE {
                std::hint::spin_loop();
            } else {
                std::thread::park();
            }
        }
        trips.push(t0.elapsed().as_nanos() as f64);
    }
    helper.join().ok()?;
    trips.sort_by(f64::total_cmp);
    Some(trips[trips.len() / 2])
}

/// One cache line.
#[repr(align(64))]
struct Line(AtomicU64);

/// Lines in the block of the fetch measurement.
const BLOCK_LINES: usize = 64;

/// Round trips of the round-trip measurement: at least this many, and a quarter of them (or of
/// all taken, up to [`MAX_ROUND_TRIPS`] or for [`ROUND_TRIP_SPAN`]) at most
/// [`MAX_LINE_ROUND_TRIP_NS`] long.
const ROUND_TRIPS: usize = 100;

/// The most round trips the measurement takes while too few of them were transfers.
const MAX_ROUND_TRIPS: usize = 2000;

/// How long the measurement goes on taking round trips while too few of them were transfers.
const ROUND_TRIP_SPAN: Duration = Duration::from_millis(20);

/// A line round trip (its first quartile) measured longer than this (nanoseconds) is no measurement: the two threads
/// did not run side by side (a busy host, or one CPU to share), and the defaults stand in.
pub const MAX_LINE_ROUND_TRIP_NS: f64 = 2000.0;

/// Reads of the block in the fetch measurement.
const FETCHES: u64 = 15;

/// How long either side of [`measure_lines`] waits for the other's write before it gives up (a
/// thread descheduled on a busy host comes back within a few scheduler ticks).
const LINE_PATIENCE: Duration = Duration::from_millis(50);

/// Spins of [`wait_for`] between two looks at the clock, each followed by a yield: far longer
/// than a line's round trip, so that a helper running beside the waiter answers first. (Where the
/// two take turns on one CPU, as under valgrind, which runs one thread at a time, the yield lets
/// the other run: the measurement then takes as many instructions each time.)
const SPINS_PER_YIELD: u32 = 256;

/// Waits until the word on `turn` satisfies `done`; its value, or `None` after [`LINE_PATIENCE`].
#[cfg(not(miri))]
fn wait_for(turn: &Line, done: impl Fn(u64) -> bool) -> Option<u64> {
    let mut since = None;
    let mut spins = 0u32;
    loop {
        let t = turn.0.load(Ordering::Acquire);
        if done(t) {
            return Some(t);
        }
        spins += 1;
        if !spins.is_multiple_of(SPINS_PER_YIELD) {
            std::hint::spin_loop();
            continue;
        }
        if since.get_or_insert_with(Instant::now).elapsed() > LINE_PATIENCE {
            return None;
        }
        std::thread::yield_now();
    }
}

/// Whether the process runs under valgrind (which preloads its own library): valgrind runs one
/// thread at a time, so no line crosses between cores while a thread waits for another, and the
/// time the waits take (and so the instructions they count, which the hot-path probes compare
/// between runs) depends on how the host schedules valgrind's threads.
fn under_valgrind() -> bool {
    std::env::var_os("LD_PRELOAD").is_some_and(|p| p.to_string_lossy().contains("vgpreload"))
}

/// The environment variable that, set to `unmeasured`, leaves the line costs unmeasured in the
/// process (see the notes of `sync/host.rs` in the source): its runtimes derive their thresholds
/// as on a host where the measurement failed.
pub(crate) const LINE_COSTS_ENV: &str = "ELITE_LINE_COSTS";

/// Whether [`LINE_COSTS_ENV`] asks for the line costs to stay unmeasured.
fn lines_left_unmeasured() -> bool {
    std::env::var_os(LINE_COSTS_ENV).is_some_and(|v| v == "unmeasured")
}

/// The line round trip and the streamed fetch of a line (see the notes of `sync/host.rs` in the source), in ticks;
/// `None` on a single CPU, under valgrind, where [`LINE_COSTS_ENV`] says so, if no helper thread
/// starts, or if the helper stops answering.
#[cfg(not(miri))]
fn measure_lines() -> Option<(f64, f64)> {
    if std::thread::available_parallelism().map_or(true, |n| n.get() < 2)
        || under_valgrind()
        || lines_left_unmeasured()
    {
        return None;
    }
    // This thread stays on its CPU and the helper goes to another one until the measurement
    // ends (`apart` restores this thread's mask): left to the OS, a helper started while one CPU
    // is busy with another program joins this thread on the idle one, and the two take turns
    // there instead of passing the line between cores.
    let apart = apart::Apart::new();
    let helper_cpu = apart.as_ref().map(|a| a.other);
    // The turn: odd when this thread asks, even when the helper answered; `u64::MAX`: stop.
    let turn = Arc::new(Line(AtomicU64::new(0)));
    let block: Arc<[Line; BLOCK_LINES]> = Arc::new(std::array::from_fn(|_| Line(AtomicU64::new(0))));
    // Set (before the turn's Release store that the helper's Acquire load reads) once the round
    // trips are done: from then on the helper writes the block before each answer.
    let fetching = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let helper = {
        let (turn, block, fetching) = (Arc::clone(&turn), Arc::clone(&block), Arc::clone(&fetching));
        std::thread::Builder::new().name("elite-line-cost".into()).spawn(move || {
            if let Some(cpu) = helper_cpu {
                // (Refused: the OS places it, as without `apart`.)
                let _ = elite_affinity::pin_current_thread(cpu);
            }
            let mut seen = 0;
            loop {
                let Some(t) = wait_for(&turn, |t| t != seen) else { return };
                if t == u64::MAX {
                    return;
                }
                if fetching.load(Ordering::Relaxed) {
                    for line in block.iter() {
                        line.0.store(t, Ordering::Relaxed);
                    }
                }
                seen = t + 1;
                turn.0.store(seen, Ordering::Release);
            }
        })
    };
    let helper = helper.ok()?;
    let mut t = 0u64;
    // One round trip: false if the helper did not answer in time.
    let trip = |t: &mut u64| {
        *t += 1;
        turn.0.store(*t, Ordering::Release);
        *t += 1;
        let answer = *t;
        wait_for(&turn, |t| t == answer).is_some()
    };
    let result = (|| {
        // Round trips until a quarter of them were transfers (at most MAX_LINE_ROUND_TRIP_NS:
        // both threads ran side by side), ROUND_TRIPS at least; on a host busy enough that
        // fewer were, more of them, so that the transfers among them are enough, up to
        // MAX_ROUND_TRIPS or ROUND_TRIP_SPAN. The first quartile of the transfers (of all, on
        // a quiet host).
        let (i0, k0) = (Instant::now(), ticks());
        let mut round_trips = Vec::with_capacity(ROUND_TRIPS);
        let mut transfers = loop {
            let k = ticks();
            if !trip(&mut t) {
                return None;
            }
            round_trips.push(ticks().wrapping_sub(k) as f64);
            if round_trips.len() % ROUND_TRIPS != 0 {
                continue;
            }
            let ticks_per_ns = ticks().wrapping_sub(k0) as f64 / i0.elapsed().as_nanos().max(1) as f64;
            let most = MAX_LINE_ROUND_TRIP_NS * ticks_per_ns;
            let transfers: Vec<f64> = round_trips.iter().copied().filter(|&r| r <= most).collect();
            if transfers.len() >= ROUND_TRIPS / 4 {
                break transfers;
            }
            if round_trips.len() >= MAX_ROUND_TRIPS || i0.elapsed() >= ROUND_TRIP_SPAN {
                // Too few: the quartile of all, which is no transfer (`with_lines` says so).
                break round_trips;
            }
        };
        transfers.sort_by(f64::total_cmp);
        let round_trip = transfers[transfers.len() / 4];
        fetching.store(true, Ordering::Relaxed);
        let mut fetches = Vec::with_capacity(FETCHES as usize);
        for _ in 0..FETCHES {
            if !trip(&mut t) {
                return None;
            }
            let k0 = ticks_fenced();
            let sum: u64 = block.iter().map(|l| l.0.load(Ordering::Relaxed)).fold(0, u64::wrapping_add);
            let k1 = ticks_fenced();
            std::hint::black_box(sum);
            fetches.push(k1.wrapping_sub(k0) as f64 / BLOCK_LINES as f64);
        }
        fetches.sort_by(f64::total_cmp);
        Some((round_trip, fetches[fetches.len() / 2]))
    })();
    turn.0.store(u64::MAX, Ordering::Release);
    // (A helper that stopped answering ends by itself once it sees the stop or its patience
    // runs out; it is not waited for.)
    if result.is_some() {
        let _ = helper.join();
    }
    drop(apart);
    result
}

/// [`ticks`] once every load before it has completed: on x86-64 `rdtsc` alone may run ahead of
/// loads still waiting for their lines, so that a read of 64 lines timed by it may give the
/// time to issue the loads, not to fetch them; `lfence` first waits for them.
#[cfg(not(miri))]
#[inline(always)]
fn ticks_fenced() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `lfence` (SSE2, part of x86-64's base) has no preconditions.
    unsafe {
        core::arch::x86_64::_mm_lfence()
    };
    ticks()
}

/// Keeping the two threads of the line measurement on two CPUs.
#[cfg(all(not(miri), target_os = "linux"))]
mod apart {
    use std::mem::{size_of, zeroed};

    /// The calling thread pinned to the CPU it runs on, and another CPU of its affinity mask for
    /// the helper; the thread's mask as it was is restored on drop.
    pub(super) struct Apart {
        saved: libc::cpu_set_t,
        /// A CPU of the mask other than the one the calling thread now runs on.
        pub(super) other: usize,
        /// Not `Send`: dropped on the thread whose mask it saved.
        _here: std::marker::PhantomData<*const ()>,
    }

    impl Apart {
        /// `None` (nothing changed) where the mask cannot be read or set, or names one CPU.
        pub(super) fn new() -> Option<Apart> {
            // SAFETY: `cpu_set_t` is a plain bit array, for which all zeroes is the empty set.
            let mut saved: libc::cpu_set_t = unsafe { zeroed() };
            // SAFETY: pid 0 names the calling thread; the size is that of the set written.
            if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut saved) } != 0 {
                return None;
            }
            // SAFETY: no arguments; it returns the CPU the calling thread runs on, or -1.
            let here = usize::try_from(unsafe { libc::sched_getcpu() }).ok()?;
            let cpus = 8 * size_of::<libc::cpu_set_t>();
            // SAFETY: every index is below the set's size in bits.
            let other = (0..cpus).find(|&cpu| cpu != here && unsafe { libc::CPU_ISSET(cpu, &saved) })?;
            // SAFETY: as for `saved`.
            let mut only: libc::cpu_set_t = unsafe { zeroed() };
            // SAFETY: `here` is a CPU id the OS returned, below the set's size in bits.
            unsafe { libc::CPU_SET(here, &mut only) };
            // SAFETY: pid 0 names the calling thread; the set is initialized, its size given.
            if unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &only) } != 0 {
                return None;
            }
            Some(Apart { saved, other, _here: std::marker::PhantomData })
        }
    }

    impl Drop for Apart {
        fn drop(&mut self) {
            // SAFETY: pid 0 names the calling thread, the one that made `self` (`Apart` is not
            // `Send`); the set is the mask it had.
            unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &self.saved) };
        }
    }
}

/// Elsewhere the OS places the two threads.
#[allow(dead_code)] // (never built here: `new` declines)
#[cfg(all(not(miri), not(target_os = "linux")))]
mod apart {
    pub(super) struct Apart {
        pub(super) other: usize,
    }

    impl Apart {
        pub(super) fn new() -> Option<Apart> {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line measurement's two threads on two CPUs: the calling thread pinned to the CPU it
    /// runs on while an `Apart` lives, another CPU of its mask for the helper, the mask as it was
    /// afterwards.
    #[test]
    #[cfg(all(not(miri), target_os = "linux"))]
    fn apart_pins_the_measuring_thread_and_restores_its_mask() {
        std::thread::spawn(|| {
            let mask = || {
                // SAFETY: `cpu_set_t` is a plain bit array; all zeroes is the empty set.
                let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                // SAFETY: pid 0 is this thread; the size is the set's.
                assert_eq!(unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) }, 0);
                (0..8 * std::mem::size_of_val(&set))
                    .filter(|&cpu| {
                        // SAFETY: every index is below the set's size in bits.
                        unsafe { libc::CPU_ISSET(cpu, &set) }
                    })
                    .collect::<Vec<usize>>()
            };
            let before = mask();
            let Some(apart) = apart::Apart::new() else {
                assert!(before.len() < 2, "two CPUs or more to choose from, and no Apart");
                return;
            };
            let pinned = mask();
            assert_eq!(pinned.len(), 1, "pinned to one CPU");
            assert!(before.contains(&pinned[0]) && before.contains(&apart.other));
            assert_ne!(pinned[0], apart.other, "the helper's CPU is another one");
            drop(apart);
            assert_eq!(mask(), before, "the mask restored");
        })
        .join()
        .unwrap();
    }

    /// A host whose wake-ups take 2 µs, whose lines take 100 ns there and back and 10 ns each in
    /// a stream (the ticks are nanoseconds).
    fn host() -> HostCosts {
        HostCosts::scripted(2.0, 2000.0, 100.0, 10.0)
    }

    #[test]
    fn the_spin_budget_is_a_coroutine_round_trip_plus_a_wake_up() {
        let c = SwitchCost::derive(&host(), 2000);
        assert_eq!((c.switch_ns, c.switch_ticks, c.threshold_ticks), (2002.0, 2002, 1001));
        // A host whose wake-ups take 40 µs spins twenty times as long.
        let slow = SwitchCost::derive(&HostCosts::scripted(2.0, 40_000.0, 100.0, 10.0), 40_000);
        assert_eq!((slow.switch_ticks, slow.threshold_ticks), (40_002, 20_001));
    }

    #[test]
    fn the_wake_up_average_follows_the_wake_ups_observed() {
        // Starts from the measurement at start (2000), moves an eighth of the way each sample,
        // a sample counting as at most twice the average.
        assert_eq!(next_average(0, 2000, 3000), 2000 - 250 + 375);
        assert_eq!(next_average(0, 2000, 10_000), 2000 - 250 + 500);
        assert_eq!(next_average(3000, 2000, 10_000), 3000 - 375 + 750);
        // One wake-up of 10 ms (a busy host) among 2 µs ones: an eighth more, then back.
        let spike = next_average(2000, 2000, 10_000_000);
        assert_eq!(spike, 2250);
        assert!((0..20).fold(spike, |old, _| next_average(old, 2000, 2000)) < 2050);
        // After 60 wake-ups of 40 µs, a host measured at 2 µs at start spins for about 40 µs.
        let avg = (0..60).fold(0, |old, _| next_average(old, 2000, 40_000));
        assert!((39_000..=40_000).contains(&avg), "{avg}");
        let c = SwitchCost::derive(&host(), avg);
        assert!((39_000..=40_002).contains(&c.switch_ticks), "{c:?}");
        // And back down when the host gets busy and its wake-ups fast.
        let avg = (0..60).fold(avg, |old, _| next_average(old, 2000, 1500));
        assert!((1500..1600).contains(&avg), "{avg}");
    }

    #[test]
    fn the_saturation_gap_is_eight_line_round_trips() {
        assert_eq!(host().gather_gap_ns(), 800.0);
        // A host whose lines cross in 300 ns tries gathering locks whose bounces come 2400 ns apart.
        assert_eq!(HostCosts::scripted(2.0, 2000.0, 300.0, 10.0).gather_gap_ns(), 2400.0);
    }

    /// Line costs that could not be measured decide nothing: no lock saturates, the hand-off
    /// rule allows its fewest lines; a measurement (a round trip of at most 2 µs) replaces them.
    #[test]
    fn unmeasured_line_costs_decide_nothing() {
        let unmeasured = host().with_lines(None);
        assert!(!unmeasured.lines_measured);
        assert_eq!((unmeasured.gather_gap_ns(), unmeasured.hand_off_lines()), (0.0, 4.0));
        // Two threads taking turns on one CPU: no transfer, no measurement.
        let turns = host().with_lines(Some((MAX_LINE_ROUND_TRIP_NS * 2.0, 10.0)));
        assert!(!turns.lines_measured);
        assert_eq!(turns.gather_gap_ns(), 0.0);
        let measured = unmeasured.with_lines(Some((300.0, 5.0)));
        assert!(measured.lines_measured);
        assert_eq!((measured.gather_gap_ns(), measured.hand_off_lines()), (2400.0, 180.0));
    }

    /// A runtime that starts while the line costs are unmeasured measures them, if it has two
    /// processors or more (with one, its locks cannot bounce); once measured, none does again.
    #[test]
    fn a_later_runtime_measures_the_line_costs_while_unmeasured() {
        let unmeasured = host().unmeasured_lines();
        assert!(lines_to_measure(&unmeasured, 2));
        assert!(!lines_to_measure(&unmeasured, 1));
        assert!(!lines_to_measure(&host(), 2));
    }

    #[test]
    fn the_hand_off_lines_are_those_fetched_in_three_round_trips() {
        assert_eq!(host().hand_off_lines(), 30.0);
        assert_eq!(HostCosts::scripted(2.0, 2000.0, 300.0, 5.0).hand_off_lines(), 180.0);
        // Within bounds whatever the measurements.
        assert_eq!(HostCosts::scripted(2.0, 2000.0, 1.0, 100.0).hand_off_lines(), 4.0);
        assert_eq!(HostCosts::scripted(2.0, 2000.0, 100_000.0, 0.0).hand_off_lines(), 256.0);
    }

    #[test]
    fn a_processor_woken_from_its_park_adds_a_sample() {
        use crate::park::{Idle, ParkSlot, Parked};
        let (idle, slot) = (Idle::new(), ParkSlot::new());
        let before = wake_samples();
        std::thread::scope(|s| {
            let parker = s.spawn(|| {
                slot.register(std::thread::current());
                idle.park(&slot, None, || false)
            });
            while !slot.is_parked() {
                std::thread::yield_now();
            }
            assert!(slot.notify());
            assert_eq!(parker.join().unwrap(), Parked::Slept);
        });
        // (Other tests' runtimes may add samples meanwhile: at least this one.)
        assert!(wake_samples() > before);
        // The processor took the waker's stamp: the next park's wake-up is timed from its own.
        assert_eq!(slot.notified_at_for_tests(), 0);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri times nothing: host_costs gives its defaults there, with no wake-up measured"
    )]
    fn this_host_is_measured() {
        let c = host_costs();
        assert!(c.coroutine_ns > 0.0 && c.wake_ns > 0.0, "{c:?}");
        assert!(c.line_round_trip_ns > 0.0 && c.line_fetch_ns > 0.0 && c.ticks_per_ns > 0.0, "{c:?}");
    }
}
