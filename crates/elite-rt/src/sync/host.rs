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
//! | a mutex's saturation window (`sync::mutex::gather`) | a cache line's round trip between two cores (at start, and again while running: below) | a candidate when its bounces come less than [`GATHER_ROUND_TRIPS`] round trips apart on average, saturated if its trial (its measured period per acquisition, gathered against spread) says so; no longer when more than 4 times that; never while the round trip is unmeasured |
//! | the hand-off rule's line count ([`policy::hand_off`](crate::policy::hand_off)) | the line round trip and the time to fetch a line last written by another core, in a stream (as the round trip: at start, and again while running) | the lines that can be fetched in the time [`HAND_OFF_ROUND_TRIPS`] round trips take (4 to 256); 4 while unmeasured |
//!
//! The affinity policies' quiet mode is not among them: its bound, *little data*, is a share of
//! the first-level data cache the topology describes ([`policy`](crate::policy), "When there is
//! nothing to act on"), so it holds whether or not the line costs below could be measured.
//!
//! # The measurements
//!
//! [`host_costs`] measures when the first runtime starts (a few milliseconds at most, two
//! short-lived helper threads); the line costs again later (below, "Re-measured while
//! running"):
//!
//! * **Coroutine round trip**: the fastest of five batches of 2000 switches to a coroutine and
//!   back.
//! * **Wake-up**: the median latency of nine unparks of a helper thread parked for 50 µs (longer
//!   than an idle processor spins before it parks), from the unpark to the helper's answer.
//! * **Line round trip**: this thread and a helper pass a counter on one cache line back and
//!   forth, each waiting for the other's write, the round trips timed in batches of 8 (one clock
//!   read on each side of a batch: a clock read per round trip would add its own cost, a
//!   sizeable part of a fast round trip, and the clock's granularity, to each). A batch of more
//!   than [`MAX_LINE_ROUND_TRIP_NS`] (2 µs) a round trip is not transfers but two threads
//!   taking turns on a CPU (one of them descheduled). It takes 64 batches, and more, 64 at a
//!   time, while fewer than a quarter of them were transfers (a busy host), up to 1000 or for
//!   20 ms; the round trip is the first quartile of the transfers' batches. With fewer
//!   transfers than that, both line costs are unmeasured. (A fixed number of round trips,
//!   transfers or not, would leave the costs unmeasured whenever another program kept the
//!   helper from running beside this thread for most of them.) On Linux the two threads are
//!   kept on two CPUs while they measure: this thread pinned to the CPU it runs on, the helper
//!   to another CPU of its mask (or to the one asked for: below), and this thread's mask
//!   restored afterwards. Left to the OS, a helper started while another
//!   program keeps one CPU busy tends to join this thread on the idle CPU, and the two take
//!   turns there, which leaves the line costs unmeasured; pinned, they run side by side.
//! * **Line fetch**: between round trips the helper writes the 256 lines of a block (16 KiB, the
//!   most the hand-off rule counts), then this thread reads them all at once (independent loads,
//!   which the core overlaps): the median time per line over 15 such reads. (A smaller block
//!   reads in a few ticks of a coarse clock, and a virtual machine's may tick in steps of
//!   10 ns or more: its time per line would be mostly the clock's granularity.)
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
//! them again (`measure_lines_if_due`, the same measurement), so that a busy moment at the
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
//! ([`switch_cost`]).
//!
//! The line costs do not move with the load but with where the hypervisor places the virtual
//! CPUs, which a process cannot see: two virtual CPUs that are two hardware threads of one core
//! pass a line far faster than two on separate cores or chips, and a virtual machine's pair may
//! be moved from one to the other while it runs (within minutes, or in bursts shorter than a
//! second: `docs/benchmarks.md` has what was seen on one such guest). So they are measured again
//! once their measurement is older than [`LINE_COSTS_MAX_AGE`] (1 s), by whoever finds them so
//! first:
//!
//! * a runtime with two processors or more as it starts (`measure_lines_if_due`), the same
//!   measurement as at the first start;
//! * an idle processor on its way to its park (`Processor::remeasure_lines`), with the helper
//!   thread pinned to the CPU of another processor of its runtime that is parked, so that the
//!   measurement takes no CPU a ULT could use. It gives up as soon as work appears for either
//!   (the measurement looks while it waits for the helper to start, asleep, and between
//!   batches of round trips: a delay of a few microseconds), and measures nothing while no
//!   other processor is parked. (The other one may wake meanwhile without work, for the
//!   stranded-ULT watch: that ends nothing.) A runtime whose processors never idle
//!   keeps the costs of its last measurement.
//!
//! One measurement at a time (a flag); a measurement that fails (stopped, or no transfers) leaves
//! the costs as they were, and the next try waits for the age again. The current line costs are
//! the medians of the last five measurements that succeeded (the round trip's and the fetch's,
//! each on its own): a burst of slow transfers that one measurement caught moves nothing, a
//! change that lasts moves the costs at its third measurement. Each success stores the medians
//! (one word: the round trip and the fetch as two `f32`, so that no reader pairs one
//! measurement's round trip with another's fetch) and then the hand-off rule's line count
//! derived from them; the mutex gathering derives its gap from the current costs at each sample.
//! [`line_measurements`] counts the successes. A measurement takes the helper's start (from tens
//! of microseconds to a millisecond or more on a virtual machine), 512 round trips (tens of
//! microseconds where a round trip takes 50 ns, a quarter of a millisecond where it takes 400)
//! and 15 reads of the block.

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

    /// These costs with the line costs of `word` (as [`LINES`] holds them; 0: unmeasured).
    fn with_lines_word(self, word: u64) -> HostCosts {
        if word == 0 {
            return self.unmeasured_lines();
        }
        HostCosts {
            line_round_trip_ns: f64::from(f32::from_bits((word >> 32) as u32)),
            line_fetch_ns: f64::from(f32::from_bits(word as u32)),
            lines_measured: true,
            ..self
        }
    }
}

/// The costs of this host now: those measured when the first runtime started, with the line
/// costs as currently measured (the medians of the last five measurements: at the first start,
/// then at a runtime's start and by idle processors once the last is older than
/// [`LINE_COSTS_MAX_AGE`]; see the notes of `sync/host.rs` in the source).
///
/// ```
/// let costs = elite_rt::sync::host_costs();
/// assert!(costs.coroutine_ns > 0.0 && costs.line_round_trip_ns > 0.0);
/// ```
pub fn host_costs() -> HostCosts {
    let first = *COSTS.get_or_init(measure);
    first.with_lines_word(LINES.load(Ordering::Relaxed))
}

/// The costs measured when the first runtime started, their line costs left out (those are in
/// [`LINES`]).
static COSTS: OnceLock<HostCosts> = OnceLock::new();

/// The current line costs (the medians of [`RECENT_LINES`]): the round trip and the streamed
/// fetch in nanoseconds, as two `f32` in one word (the round trip in the high half), so that a
/// reader never sees one measurement's round trip with another's fetch; 0 while none succeeded.
static LINES: AtomicU64 = AtomicU64::new(0);

/// When the last measurement of the line costs began, in ticks ([`ticks`]); 0: none yet.
static LINES_TRIED_AT: AtomicU64 = AtomicU64::new(0);

/// Measurements of the line costs that succeeded in this process.
static LINE_MEASUREMENTS: AtomicU64 = AtomicU64::new(0);

/// Those among them that an idle processor made (counted in tests only).
#[cfg(test)]
static IDLE_MEASUREMENTS: AtomicU64 = AtomicU64::new(0);

/// The hand-off rule's line count derived from [`LINES`] (`f32` bits; 0: not derived yet), kept
/// beside them so that the rule reads one word: stored again by every measurement, after
/// [`LINES`].
static HAND_OFF_LINES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Whether a measurement of the line costs is under way (one at a time: two measurements at once
/// would measure each other's helper threads).
static MEASURING_LINES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How old a measurement of the line costs may get before a runtime's start or an idle processor
/// measures them again: where the hypervisor places a virtual machine's virtual CPUs, and so
/// what a line costs between them, can change within minutes (see the notes of `sync/host.rs` in
/// the source).
pub const LINE_COSTS_MAX_AGE: Duration = Duration::from_secs(1);

/// Line measurements that succeeded in this process so far: the one at the first runtime's start
/// (where it could measure) and those after it (see the notes of `sync/host.rs` in the source).
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(2).build()?;
/// // On a host with two CPUs or more, not under valgrind: at least the measurement at start.
/// let _measured_so_far = elite_rt::sync::line_measurements();
/// # drop(rt);
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
pub fn line_measurements() -> u64 {
    LINE_MEASUREMENTS.load(Ordering::Relaxed)
}

/// The hand-off rule's line count ([`HostCosts::hand_off_lines`] of [`host_costs`]), one load
/// once derived (`policy::hand_off::hand_off_lines`).
#[inline]
pub(crate) fn hand_off_lines() -> f32 {
    let cached = HAND_OFF_LINES.load(Ordering::Relaxed);
    if cached != 0 {
        return f32::from_bits(cached);
    }
    let lines = host_costs().hand_off_lines();
    // (A measurement that stored its count meanwhile stands: it derived from newer costs.)
    let _ = HAND_OFF_LINES.compare_exchange(0, lines.to_bits(), Ordering::Relaxed, Ordering::Relaxed);
    lines
}

/// The line measurements that the current line costs are the medians of: the last
/// [`LINE_COSTS_KEPT`] (round trip, fetch), in nanoseconds, oldest first.
static RECENT_LINES: std::sync::Mutex<Vec<(f64, f64)>> = std::sync::Mutex::new(Vec::new());

/// How many of the last line measurements the current line costs are the medians of: a burst of
/// slow (or fast) transfers shorter than that many measurements moves them not at all, a change
/// that lasts moves them after three (see the notes of `sync/host.rs` in the source).
pub(crate) const LINE_COSTS_KEPT: usize = 5;

/// `recent` with `new` added and, beyond `LINE_COSTS_KEPT`, the oldest dropped; the median
/// round trip and the median fetch of the result (each on its own; of an even count, the upper).
fn add_lines(recent: &mut Vec<(f64, f64)>, new: (f64, f64)) -> (f64, f64) {
    recent.push(new);
    if recent.len() > LINE_COSTS_KEPT {
        recent.remove(0);
    }
    let median = |pick: fn(&(f64, f64)) -> f64| {
        let mut v: Vec<f64> = recent.iter().map(pick).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(|l| l.0), median(|l| l.1))
}

/// Adds `costs`' line costs, if they are a measurement, to the recent ones, and makes the medians
/// of those the current line costs: stores them, then the hand-off count derived from them
/// (derived here, not through [`host_costs`], which may be what is measuring).
fn set_lines(costs: &HostCosts) {
    if !costs.lines_measured {
        return;
    }
    let (round_trip, fetch) = {
        let mut recent = RECENT_LINES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        add_lines(&mut recent, (costs.line_round_trip_ns, costs.line_fetch_ns))
    };
    let costs = HostCosts { line_round_trip_ns: round_trip, line_fetch_ns: fetch, ..*costs };
    let word = (u64::from((costs.line_round_trip_ns as f32).to_bits()) << 32)
        | u64::from((costs.line_fetch_ns as f32).to_bits());
    LINES.store(word, Ordering::Relaxed);
    HAND_OFF_LINES.store(costs.hand_off_lines().to_bits(), Ordering::Relaxed);
    LINE_MEASUREMENTS.fetch_add(1, Ordering::Relaxed);
}

/// Whether the line costs are due to be measured at `now` (ticks), the last measurement having
/// begun at `tried_at` (0: never): when it is older than `max_age` ticks.
fn due(now: u64, tried_at: u64, max_age: u64) -> bool {
    tried_at == 0 || now.wrapping_sub(tried_at) > max_age
}

/// Whether the line costs are due to be measured now: never measured in this process, or their
/// last measurement is older than [`LINE_COSTS_MAX_AGE`] (one load and a clock read, on an idle
/// processor's way to its park).
#[inline]
pub(crate) fn lines_due() -> bool {
    let max_age = (LINE_COSTS_MAX_AGE.as_nanos() as f64 * host_costs().ticks_per_ns) as u64;
    due(ticks(), LINES_TRIED_AT.load(Ordering::Relaxed), max_age)
}

/// Measures the line costs if no other measurement is under way, with the helper thread on
/// `helper_cpu` (else on another CPU of this thread's mask), giving up as soon as `stop` says so;
/// a measurement replaces the current line costs, a failure leaves them. True if it measured.
pub(crate) fn remeasure_lines(helper_cpu: Option<usize>, stop: &dyn Fn() -> bool) -> bool {
    if MEASURING_LINES.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return false;
    }
    LINES_TRIED_AT.store(ticks().max(1), Ordering::Relaxed);
    let measured = host_costs().with_lines(measure_lines_now(helper_cpu, stop));
    set_lines(&measured);
    #[cfg(test)]
    if measured.lines_measured && helper_cpu.is_some() {
        IDLE_MEASUREMENTS.fetch_add(1, Ordering::Relaxed);
    }
    MEASURING_LINES.store(false, Ordering::Release);
    measured.lines_measured
}

/// For a runtime of `processors` processors that is starting: measures the line costs if they are
/// unmeasured (the first measurement found one CPU, ran under valgrind, or its two threads never
/// ran side by side: a busy host) or their measurement is older than [`LINE_COSTS_MAX_AGE`]. A
/// runtime of one processor measures nothing: its locks cannot bounce, and its wakers are always
/// at home.
pub(crate) fn measure_lines_if_due(processors: usize) {
    if lines_to_measure(&host_costs(), processors, lines_due()) {
        remeasure_lines(None, &|| false);
    }
}

/// Line costs for the tests of the rules that derive from them, where the measurement could not
/// measure them (a loaded machine running the tests): those of a host whose lines take 100 ns
/// there and back. Measured costs stay as they are.
#[cfg(test)]
pub(crate) fn measured_lines_for_tests() {
    if !host_costs().lines_measured {
        set_lines(
            &host_costs()
                .with_lines(Some((100.0 * host_costs().ticks_per_ns, 10.0 * host_costs().ticks_per_ns))),
        );
    }
}

/// Whether a runtime of `processors` processors starting on a host with `costs` measures the line
/// costs: it has two processors or more, and they are unmeasured or `due` again.
fn lines_to_measure(costs: &HostCosts, processors: usize, due: bool) -> bool {
    processors > 1 && (!costs.lines_measured || due)
}

/// [`measure_lines`] where it can run (nothing under Miri).
fn measure_lines_now(helper_cpu: Option<usize>, stop: &dyn Fn() -> bool) -> Option<(f64, f64)> {
    #[cfg(miri)]
    return {
        let _ = (helper_cpu, stop);
        None
    };
    #[cfg(not(miri))]
    measure_lines(helper_cpu, stop)
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
    LINES_TRIED_AT.store(ticks().max(1), Ordering::Relaxed);
    let lines = measure_lines(None, &|| false);
    let (ns, tk) = (t0.elapsed().as_nanos().max(1) as f64, ticks().wrapping_sub(k0) as f64);
    let ticks_per_ns = if tk > 0.0 { tk / ns } else { 1.0 };
    let costs = HostCosts {
        coroutine_ns,
        wake_ns,
        line_round_trip_ns: DEFAULT_LINE_ROUND_TRIP_NS,
        line_fetch_ns: DEFAULT_LINE_FETCH_NS,
        ticks_per_ns,
        lines_measured: false,
    };
    // The line costs live in `LINES`, which later measurements replace.
    set_lines(&costs.with_lines(lines));
    costs
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

/// Lines in the block of the fetch measurement: as many as the hand-off rule counts at most.
const BLOCK_LINES: usize = 256;

/// Round trips timed together in the round-trip measurement (one sample).
const BATCH: usize = 8;

/// Samples (batches) of the round-trip measurement: at least this many, and a quarter of them (or
/// of all taken, up to [`MAX_SAMPLES`] or for [`ROUND_TRIP_SPAN`]) at most
/// [`MAX_LINE_ROUND_TRIP_NS`] a round trip.
const SAMPLES: usize = 64;

/// The most samples the measurement takes while too few of them were transfers.
const MAX_SAMPLES: usize = 1000;

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

/// Waits until the word on `turn` satisfies `done`; its value, or `None` after [`LINE_PATIENCE`]
/// or once `stop` says so (asked between spins, as often as the clock).
#[cfg(not(miri))]
fn wait_for(turn: &Line, done: impl Fn(u64) -> bool, stop: &dyn Fn() -> bool) -> Option<u64> {
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
        if since.get_or_insert_with(Instant::now).elapsed() > LINE_PATIENCE || stop() {
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

/// The line round trip and the streamed fetch of a line (see the notes of `sync/host.rs` in the
/// source), in ticks, the helper thread on `helper_cpu` if given (else on another CPU of this
/// thread's mask); `None` on a single CPU, under valgrind, where [`LINE_COSTS_ENV`] says so, if
/// no helper thread starts, if the helper stops answering, or once `stop` says so (asked between
/// batches of round trips).
#[cfg(not(miri))]
fn measure_lines(helper_cpu: Option<usize>, stop: &dyn Fn() -> bool) -> Option<(f64, f64)> {
    // (A thread pinned to one CPU, as a processor is, sees a parallelism of one: with a CPU for
    // the helper given, there are two.)
    if (helper_cpu.is_none() && std::thread::available_parallelism().map_or(true, |n| n.get() < 2))
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
    // (A CPU asked for that this thread runs on, which an unpinned thread may: another one.)
    let helper_cpu = helper_cpu
        .filter(|&cpu| elite_affinity::current_cpu() != Some(cpu))
        .or(apart.as_ref().map(|a| a.other));
    // The turn: odd when this thread asks, even when the helper answered; `u64::MAX`: stop.
    let turn = Arc::new(Line(AtomicU64::new(0)));
    let block: Arc<[Line; BLOCK_LINES]> = Arc::new(std::array::from_fn(|_| Line(AtomicU64::new(0))));
    // Set (before the turn's Release store that the helper's Acquire load reads) once the round
    // trips are done: from then on the helper writes the block before each answer.
    let fetching = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Set by the helper once it runs where it belongs.
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let helper = {
        let (turn, block, fetching, started) =
            (Arc::clone(&turn), Arc::clone(&block), Arc::clone(&fetching), Arc::clone(&started));
        std::thread::Builder::new().name("elite-line-cost".into()).spawn(move || {
            if let Some(cpu) = helper_cpu {
                // (Refused: the OS places it, as without `apart`.)
                let _ = elite_affinity::pin_current_thread(cpu);
            }
            started.store(true, Ordering::Release);
            let mut seen = 0;
            loop {
                let Some(t) = wait_for(&turn, |t| t != seen, &|| false) else { return };
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
        wait_for(&turn, |t| t == answer, stop).is_some()
    };
    let result = (|| {
        // Asleep until the helper has started: it inherits this thread's mask, which for a
        // processor is its one CPU, so it starts there, and a thread that spins there instead of
        // sleeping may keep it from starting for a time slice (milliseconds) before it can move
        // to its own CPU.
        let since = Instant::now();
        while !started.load(Ordering::Acquire) {
            if since.elapsed() > LINE_PATIENCE || stop() {
                return None;
            }
            std::thread::sleep(Duration::from_micros(20));
        }
        // Batches of BATCH round trips, each batch timed as a whole (one clock read on each side
        // of BATCH trips: a clock read per trip would add its own cost, a sizeable part of a
        // fast round trip, and the clock's granularity), until a quarter of the batches were
        // transfers (at most MAX_LINE_ROUND_TRIP_NS a trip: both threads ran side by side),
        // SAMPLES at least; on a host busy enough that fewer were, more of them, so that the
        // transfers among them are enough, up to MAX_SAMPLES or ROUND_TRIP_SPAN. The first
        // quartile of the transfers' round trips (of all, on a quiet host).
        let (i0, k0) = (Instant::now(), ticks());
        let mut round_trips = Vec::with_capacity(SAMPLES);
        let mut transfers = loop {
            if stop() {
                return None;
            }
            let k = ticks();
            for _ in 0..BATCH {
                if !trip(&mut t) {
                    return None;
                }
            }
            round_trips.push(ticks().wrapping_sub(k) as f64 / BATCH as f64);
            if round_trips.len() % SAMPLES != 0 {
                continue;
            }
            let ticks_per_ns = ticks().wrapping_sub(k0) as f64 / i0.elapsed().as_nanos().max(1) as f64;
            let most = MAX_LINE_ROUND_TRIP_NS * ticks_per_ns;
            let transfers: Vec<f64> = round_trips.iter().copied().filter(|&r| r <= most).collect();
            if transfers.len() >= SAMPLES / 4 {
                break transfers;
            }
            if round_trips.len() >= MAX_SAMPLES || i0.elapsed() >= ROUND_TRIP_SPAN {
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
/// loads still waiting for their lines, so that a read of a block timed by it may give the
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
#[cfg(not(miri))]
mod apart {
    /// The calling thread pinned to the CPU it runs on, and another CPU of its affinity mask for
    /// the helper; the thread's mask as it was is put back on drop (`SavedMask`, which is not
    /// `Send`: dropped on the thread whose mask it saved).
    pub(super) struct Apart {
        _saved: elite_affinity::SavedMask,
        /// A CPU of the mask other than the one the calling thread now runs on.
        pub(super) other: usize,
    }

    impl Apart {
        /// `None` (the mask as it was) where the mask cannot be read or set, or names one CPU.
        pub(super) fn new() -> Option<Apart> {
            let saved = elite_affinity::SavedMask::save()?;
            let here = elite_affinity::current_cpu()?;
            let other = saved.cpus().iter().copied().find(|&cpu| cpu != here)?;
            elite_affinity::pin_current_thread(here).ok()?;
            Some(Apart { _saved: saved, other })
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

    /// A runtime that starts while the line costs are unmeasured, or measured longer ago than
    /// their age allows, measures them, if it has two processors or more (with one, its locks
    /// cannot bounce); with a recent measurement, none does.
    #[test]
    fn a_later_runtime_measures_the_line_costs_while_unmeasured_or_old() {
        let unmeasured = host().unmeasured_lines();
        assert!(lines_to_measure(&unmeasured, 2, false));
        assert!(!lines_to_measure(&unmeasured, 1, true));
        assert!(!lines_to_measure(&host(), 2, false));
        assert!(lines_to_measure(&host(), 2, true));
    }

    /// Due: never measured, or the last measurement began longer ago than the age allowed (the
    /// clock read across a wrap of the tick counter as well).
    #[test]
    fn the_line_costs_are_due_when_never_measured_or_old() {
        assert!(due(5, 0, 1000));
        assert!(!due(1500, 1000, 1000));
        assert!(!due(2000, 1000, 1000));
        assert!(due(2001, 1000, 1000));
        assert!(!due(10, u64::MAX - 10, 1000));
        assert!(due(2000, u64::MAX - 10, 1000));
    }

    /// The current line costs are the medians of the last five measurements, each cost on its
    /// own: one slow measurement among fast ones moves nothing, three move the round trip.
    #[test]
    fn the_line_costs_are_the_medians_of_the_last_five_measurements() {
        let mut recent = Vec::new();
        assert_eq!(add_lines(&mut recent, (50.0, 1.0)), (50.0, 1.0));
        // Of two, the upper: a change shows once it is half of what is kept.
        assert_eq!(add_lines(&mut recent, (400.0, 4.0)), (400.0, 4.0));
        for _ in 0..3 {
            add_lines(&mut recent, (50.0, 1.0));
        }
        assert_eq!(add_lines(&mut recent, (400.0, 0.5)), (50.0, 1.0), "{recent:?}");
        assert_eq!(recent.len(), LINE_COSTS_KEPT);
        assert_eq!(add_lines(&mut recent, (380.0, 4.0)), (50.0, 1.0));
        assert_eq!(add_lines(&mut recent, (390.0, 4.2)), (380.0, 1.0), "{recent:?}");
        assert_eq!(add_lines(&mut recent, (410.0, 4.1)), (390.0, 4.0), "{recent:?}");
    }

    /// The line costs travel as two `f32` in one word: what was stored is read back (to `f32`
    /// precision), and 0 is no measurement.
    #[test]
    fn the_line_word_holds_a_round_trip_and_a_fetch() {
        let word = (u64::from(47.5f32.to_bits()) << 32) | u64::from(1.25f32.to_bits());
        let costs = host().with_lines_word(word);
        assert!(costs.lines_measured);
        assert_eq!((costs.line_round_trip_ns, costs.line_fetch_ns), (47.5, 1.25));
        assert!(!host().with_lines_word(0).lines_measured);
    }

    /// A measurement that fails (stopped before its first batch) leaves the line costs and their
    /// count as they were, and lets the next one start.
    #[test]
    #[cfg_attr(miri, ignore = "Miri measures nothing")]
    fn a_stopped_measurement_changes_nothing() {
        let (before, count) = (LINES.load(Ordering::Relaxed), line_measurements());
        // (Another test's runtime measuring at the same moment makes this one measure nothing.)
        assert!(!remeasure_lines(None, &|| true));
        if line_measurements() == count {
            assert_eq!(LINES.load(Ordering::Relaxed), before);
        }
    }

    /// An idle processor measures the line costs again once their measurement is old, with a
    /// parked processor's CPU for the helper, while the runtime runs.
    #[test]
    #[cfg_attr(miri, ignore = "Miri measures nothing")]
    fn an_idle_processor_measures_old_line_costs_again() {
        if std::thread::available_parallelism().map_or(true, |n| n.get() < 2)
            || under_valgrind()
            || lines_left_unmeasured()
        {
            return;
        }
        let rt = crate::Runtime::builder().processors(2).build().unwrap();
        let before = IDLE_MEASUREMENTS.load(Ordering::Relaxed);
        let mut measured = false;
        for _ in 0..50 {
            // Old: measured more than `LINE_COSTS_MAX_AGE` ago.
            LINES_TRIED_AT.store(1, Ordering::Relaxed);
            // The root ULT sleeps: its processor idles while the other one is parked.
            rt.block_on(|| crate::sleep(Duration::from_millis(20)));
            if IDLE_MEASUREMENTS.load(Ordering::Relaxed) > before {
                measured = true;
                break;
            }
        }
        assert!(measured, "no idle processor measured the line costs in 50 tries");
    }

    /// Where the host lets two threads run side by side (two CPUs or more, not valgrind), a
    /// measurement replaces the line costs, counts, and stores the hand-off count derived from
    /// them.
    #[test]
    #[cfg_attr(miri, ignore = "Miri measures nothing")]
    fn a_measurement_replaces_the_line_costs() {
        let count = line_measurements();
        let mut measured = false;
        for _ in 0..20 {
            // (A busy moment, or another test's measurement under way: again.)
            if remeasure_lines(None, &|| false) {
                measured = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let two_cpus = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        if !measured {
            assert!(!two_cpus || under_valgrind() || lines_left_unmeasured(), "no measurement in 20 tries");
            return;
        }
        assert!(line_measurements() > count);
        let costs = host_costs();
        assert!(costs.lines_measured && costs.line_round_trip_ns <= MAX_LINE_ROUND_TRIP_NS, "{costs:?}");
        assert!(costs.line_fetch_ns > 0.0, "{costs:?}");
        assert_eq!(f32::from_bits(HAND_OFF_LINES.load(Ordering::Relaxed)), hand_off_lines());
        assert!((4.0..=256.0).contains(&hand_off_lines()));
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
