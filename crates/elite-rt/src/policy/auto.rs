//! The `auto` policy: the runtime measures its progress under candidate policies while the
//! program runs, and keeps the best.
//!
//! ```
//! use elite_rt::policy::Policy;
//!
//! let rt = elite_rt::Runtime::builder().processors(1).policy(Policy::auto()).build()?;
//! assert_eq!(rt.policy_name(), "auto");
//! let sum = rt.block_on(|| {
//!     let hs: Vec<_> = (0..64u64)
//!         .map(|i| {
//!             elite_rt::spawn(move || {
//!                 let mut s = 0;
//!                 for k in 0..200 {
//!                     s += i * k;
//!                     elite_rt::progress(1); // one unit of this program's work
//!                     elite_rt::yield_now();
//!                 }
//!                 s
//!             })
//!         })
//!         .collect();
//!     hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
//! });
//! assert_eq!(sum, (0..64u64).sum::<u64>() * (0..200u64).sum::<u64>());
//! // What `auto` put in force, when and why (empty until its first decision).
//! for decision in rt.stats().auto {
//!     println!("{decision}");
//! }
//! # Ok::<(), elite_rt::BuildError>(())
//! ```
//!
//! # How it decides
//!
//! A thread of the runtime (the *selector*) measures the program's *progress rate* in epochs:
//! at least [`Auto::epoch`] (default 5 ms) long, doubled (up to 64 times) while an epoch would
//! count fewer than [`MIN_UNITS`] units of progress, so that a rate is not a count of a few
//! events.
//!
//! 1. **Start.** The first candidate ([`Auto::candidates`]; by default every built-in fixed
//!    policy: `no-affinity`, `virtual-time`, `minimum-misses`, `reload-transient`, `gravity`,
//!    so that the best fixed policy is always among them) is in force from the start. Until the
//!    program makes progress (the selector looks after a fifth of an epoch, then twice as long
//!    each time, where anything is worth measuring), and once more then, it looks at the
//!    *locality signal*: whether the
//!    processors count cache misses with a hardware counter, or some ULT declared a footprint or
//!    data block
//!    ([`Builder::footprint`](crate::Builder::footprint), [`set_footprint`](crate::set_footprint),
//!    [`Builder::data`](crate::Builder::data), [`set_data_block`](crate::set_data_block)) larger
//!    than the first-level data cache (of processor 0 in the runtime's topology; [`DEFAULT_BAR`]
//!    where it describes none). Without a hardware counter, the recording policies
//!    (`virtual-time`, `minimum-misses`, `reload-transient`, `gravity`) order by the misses the
//!    estimator derives from declared footprints: with nothing declared they order as
//!    `no-affinity` does at a higher cost per run, and a run whose data fits in the first-level
//!    cache reloads it, wherever it was evicted to, for about what their bookkeeping costs.
//!    * **Without the signal** the first candidate stays in force and nothing else is measured
//!      (custom candidates excepted: they are always measured, see 2), so `auto` costs what the
//!      first candidate costs. While fewer than two candidates are worth measuring the selector
//!      does not wake at all (on a machine whose every core runs a processor, each wake-up
//!      would take a core from one): it sleeps until a ULT declares a footprint or data block
//!      that crosses the first-level cache's size, or its first data block (the declaring
//!      thread wakes it), or until the budget's re-check is due (4), and takes the next step
//!      once the signal is there.
//!    * **With it** the selector puts the *lead* in force at once ([`AutoReason::Locality`]):
//!      the first `reload-transient` candidate (it orders by the expected reload, the quantity
//!      the signal stands for) where that can differ from recency, with a hardware counter or
//!      where the declarations so far differ by more than [`UNEVEN_DECLARATIONS`] times;
//!      otherwise the first recording policy among the candidates (`virtual-time` among the
//!      defaults): with every ULT declaring alike and misses estimated from the declarations,
//!      `reload-transient`'s expected reload grows with the time since a ULT ran and nothing
//!      else, the recency order, which `virtual-time` keeps for less work per run. (The lead
//!      reads the declarations made when the signal comes: a program whose first declarations
//!      are alike and whose later ones differ has the probe to find `reload-transient`.) Then it
//!      *probes* at once: the signal says the candidates can differ, and a program that runs
//!      for a fraction of a second would otherwise never be measured.
//!
//!    **The probe.** Under the lead, after a *tick* (a fifth of [`Auto::epoch`], 1 ms by
//!    default) to settle, the selector measures the progress rate in [`PROBE_NOISE_TICKS`]
//!    back-to-back ticks and takes their spread (the median absolute deviation, scaled to a
//!    standard deviation `σ` of one tick's rate relative to the median; a single disturbed
//!    tick, even one without progress, moves it little). Ticks of which the median saw no
//!    progress, or progress reported for the first time during the ticks, make it measure
//!    again ([`PROBE_ATTEMPTS`] times in all, then the probe is given up: a program that idles
//!    is not probed). It then sizes the probe's epoch from that noise: the fewest ticks `m` for which
//!    twice the standard error of the difference of two rates, `2σ√(2/m)`, is at most
//!    [`PROBE_RESOLUTION`] (5%), at most [`PROBE_MAX_TICKS`]. Each other candidate worth
//!    measuring (see 2) is put in force, given a tick to settle and measured for one epoch of
//!    `m` ticks; the lead's rate is the mean of its noise ticks. The best is put in force if it
//!    beats the lead by more than twice the standard error of that difference,
//!    `2σ√(1/m + 1/8)`, and at least [`Auto::margin`]; otherwise the lead stays. A candidate
//!    that passes that bar is only the *challenger*: one epoch each ranks the candidates by
//!    where each fell in the program's course as much as by the policy (the start, spawning
//!    and reading cold data, moves the rate by more than the policies do, and the state the
//!    policy before left lasts into the next epoch). The challenger and the lead are then put
//!    in force in turn, [`CONFIRM_EPOCHS`] epochs of `m` ticks (each after a tick to settle),
//!    and each lead epoch is compared with the challenger epochs on either side of it; the
//!    challenger is kept only if it beats the lead by more than the margin in all those
//!    comparisons but at most one, and by more than the bar in their median (a rate that
//!    drifts over the confirmation then favours neither, and one epoch that fell on a fast
//!    stretch decides nothing). The probe is logged as an exploration
//!    ([`AutoReason::Explored`]; the challenger's rate the lead's times the median ratio), and
//!    remembered like one ([`Auto::remember`]) when its choice also read the highest rate (a
//!    probe that kept the lead while another candidate read higher within the noise ranked
//!    nothing, and a warm start must begin from the best measured); the memory keeps the
//!    lead's rate and the challenger's from the alternation, not the single epochs of the
//!    others. With four candidates
//!    worth measuring and quiet progress it takes about 8 ticks under the lead and 3 × 2 under
//!    the others (10 + 3 × 9 at the cap), and [`CONFIRM_EPOCHS`] × (1 + `m`) ticks more when
//!    a challenger comes up (up to 54).
//!
//!    The first probe measures the program's start, which can favour a candidate its steady
//!    work does not (a bench that spawns its ULTs and sweeps every working set once, cold,
//!    before its timed work: every order misses alike there, and the policies differ only in
//!    how they take in new ULTs). So its choice is provisional: once [`REPROBE_AFTER`] times
//!    as long as the probe took has passed since it began, the selector puts the lead in force
//!    again and probes once more, and that choice stands; a first probe that left the lead is
//!    not remembered (a runtime that ends before the second would carry the start's choice to
//!    the next). The selector then watches (4) as after a choice: the next, full, exploration
//!    comes when the run has lasted long enough for one to take at most [`Auto::budget`] of
//!    it.
//!
//!    A selector that [remembers](Auto::remember) under a key for which an earlier runtime of
//!    the process explored starts *warm* instead: it puts the remembered choice in force at once
//!    and goes straight to watching (4), see [Carrying a choice](#carrying-a-choice-to-the-next-runtime).
//! 2. **Explore.** It leaves out the candidates that cannot behave otherwise than an earlier
//!    one on what the program declared so far: the recording policies without the locality
//!    signal, and `gravity` until some ULT declared a data block, because its forces act only
//!    between overlapping declared blocks and without them it orders as `virtual-time` does
//!    (the first candidate and custom policies are always explored; a left-out candidate's rate
//!    reads 0 in the decision). With fewer than two candidates left there is nothing to
//!    explore: it keeps watching. It puts each
//!    remaining candidate in force in turn with
//!    [`Runtime::set_policy`](crate::Runtime::set_policy), lets the processors take it up and
//!    settle for a fifth of an epoch, then measures one epoch. It goes round the candidates
//!    [`Auto::rounds`] times (default 3), each round starting one candidate later, so that a
//!    drift of the machine's speed (other programs, frequency) falls on every candidate alike.
//!    A candidate whose median rate falls below 70% of the best one's after the first round, or
//!    below 90% after a later one ([`KEEP_AFTER`]), leaves the exploration: a clearly worse
//!    policy costs one epoch, not three. From the second round on, the exploration also ends
//!    early when the candidates still in it are *apart* (the best one's slowest epoch beat
//!    every other one's fastest) or *tied* (none's median beats the first candidate's by more
//!    than the margin): more rounds would measure what is already clear, or a difference the
//!    margin discards anyway.
//! 3. **Settle.** The candidate with the highest median rate is put in force, unless it beats
//!    the first candidate (the cheapest, `no-affinity` by default) by less than
//!    [`Auto::margin`] (default 2%): a difference that small is within the noise of a few
//!    epochs, and the first candidate costs least when the others gain nothing.
//! 4. **Watch.** It goes on measuring under the choice (or the lead, or the first candidate,
//!    before any exploration), while two candidates or more are worth measuring (otherwise it
//!    sleeps, see 1). When the rate moves away from the settled rate (the median of
//!    the first 3 epochs after settling) by more than [`Auto::phase_change`] (default 30%,
//!    either way) for 3 epochs in a row, the workload changed phase: it explores at once,
//!    provided the explorations so far (the probe's included), with this one, take at most
//!    twice [`Auto::budget`] of the run (10% by default); otherwise the new rate becomes the
//!    settled one and the watch goes on (a short run, or one whose rate keeps moving, would
//!    spend most of its time under the candidates being tried). A change of unit (the
//!    program's first [`progress`] report) is no phase change: the watch settles again on
//!    rates in the new unit.
//!    Otherwise it explores once the time since the start, or since the last exploration, is
//!    long enough for a full exploration to take at most [`Auto::budget`] (default 5%) of it;
//!    each re-check that keeps the policy doubles that wait (up to 64 times), so a steady
//!    program pays less and less; but not one whose own medians chose another policy and was
//!    outvoted by the remembered ones (it doubts the choice: the next re-check comes after
//!    the first wait, and settles it). A re-check that chooses another candidate than the one in
//!    force does not put it in force yet ([`AutoReason::Unconfirmed`]): it waits the first wait
//!    again, and the next re-check puts that candidate in force only if it chooses the same one
//!    (an exploration measures each candidate in a few epochs, and a program whose rate swings over
//!    stretches longer than an epoch, its groups of work, its start, its end, can favour any of
//!    them in one; two in a row that agree by chance are much rarer). A phase change's
//!    exploration, and the first one, put their choice in force at once. Either way it explores
//!    only with two candidates or more left to measure (see 2).
//!
//! # Carrying a choice to the next runtime
//!
//! A program that builds a runtime per job (a benchmark's samples, a batch per request, a
//! solver per time step) would otherwise pay an exploration in every one, and a job shorter
//! than an exploration would run mostly under whichever candidate is being tried.
//! [`Auto::remember`] names the workload; under that key, together with the candidates' names
//! and the processor count, the process keeps (for its whole life, in memory only):
//!
//! * the latest [`REMEMBERED_EXPLORATIONS`] explorations, each as every candidate's median rate
//!   divided by that exploration's best (so that runtimes on a machine whose speed drifted, or
//!   jobs of other sizes, still compare), and the unit they were counted in. Until the first
//!   full exploration under the key, the probes' are kept instead (their lead and challenger
//!   only); the first full one forgets them, and probes after it are not kept: a probe
//!   measures each candidate in one short epoch, and a series of short runtimes that started
//!   warm from one probe's luck would otherwise pool that luck with every exploration after;
//! * the candidate settled on, the epoch's length, and the time spent under the choice since
//!   the last exploration together with the re-check's back-off, summed over the runtimes.
//!
//! A runtime whose key has a remembered choice starts warm ([`AutoReason::Remembered`], its
//! `rates` the pooled fractions, [`ProgressUnit::Relative`]): the choice is in force at once,
//! and the first re-check comes when the time under it, counted over the runtimes before and
//! this one, reaches the budget's wait, so a series of short runtimes re-checks as rarely as
//! one long one; but not before this runtime has run for one exploration's length, so that a
//! re-check due from the runtimes before does not measure this one's start (its spawns, its
//! first touches of cold data) instead of its work. Every exploration under a key (the first cold one, re-checks, phase changes)
//! settles on the best *pooled* rate: each candidate's median fraction over the remembered
//! explorations, so one exploration disturbed by another program is outvoted by the others. A
//! phase change, or a change of unit, forgets the explorations before it.
//!
//! Every decision is kept ([`RuntimeStats::auto`](crate::RuntimeStats::auto), the last
//! [`DECISIONS_KEPT`]): when, which policy, why, and the median rate measured for each
//! candidate.
//!
//! The *progress* is, by default, the ULT runs that ended (switches out of ULTs, over all
//! processors) per second of wall-clock time. A program that counts its own units of work with
//! [`progress`] (iterations, cells relaxed, requests served) is measured in
//! those instead, from the first unit reported on.
//!
//! # Where it can be fooled
//!
//! * **Runs are not work.** A policy that makes ULTs run more often for the same work (more
//!   yields, shorter runs between blocks, a lock handed back and forth) scores higher on runs
//!   per second. Report real units with [`progress`] where runs and work
//!   differ.
//! * **Idle time counts against a policy.** Rates are per wall-clock second: a program that
//!   waits (on I/O, on timers, on a thread outside the runtime) for part of an epoch measures
//!   low in it, whatever the policy. Epochs with no progress at all are measured again, but a
//!   half-idle epoch is not told apart.
//! * **Short programs.** A full exploration takes `candidates × rounds × 1.2 × epoch` (90 ms
//!   with the default settings and 5 ms epochs; less when candidates drop out or the
//!   exploration ends early), and waits until it would take at most the budget's share of the
//!   run (about 1.7 s with the defaults). Before that, a program with the locality signal has
//!   only the probe to go by: one epoch of a few milliseconds per candidate. The probe costs
//!   what its epochs under worse candidates lose (a program of a tenth of a second spends a
//!   quarter of it or more probing, and the gain has to pay for that), and a program without
//!   the signal is never measured before the budget's wait. A program that runs the same short
//!   job many times gives it a key ([`Auto::remember`]): the explorations of the longer runs,
//!   or the budget's re-checks summed over the runtimes, then carry a measured choice to the
//!   short ones.
//! * **Noise the ticks do not show.** The probe sizes its epochs from the spread of the rate
//!   over a few milliseconds under the lead, and takes ticks as independent: a program whose
//!   rate swings over a longer period (phases of tens of milliseconds, a sweep longer than a
//!   tick, another program taking the CPU for a whole time slice) is noisier than its ticks
//!   say, and one epoch per candidate can rank them by where each fell in that period. Where
//!   the spread asks for more than [`PROBE_MAX_TICKS`], the bar to leave the lead rises with
//!   it instead, so a noisy program mostly stays on the lead until the full exploration. The
//!   lead is measured before the others, so a rate that drifts over the probe (a warming
//!   cache, a program that speeds up) favours whichever came later; the confirmation's
//!   alternation takes the drift out, but not a rate that swings with a period near two of
//!   its epochs, which can fall on the challenger's epochs each time.
//! * **A start unlike the rest.** The probes measure the run's first tenth of a second or so
//!   (or the first after the declaration that brought the signal) and, [`REPROBE_AFTER`]
//!   times later, one more stretch of it: a program whose work changes
//!   after that (a setup phase longer than the second probe's wait, phases that alternate) is
//!   decided on those stretches until the full exploration, and one that ends before the
//!   second probe keeps the first one's choice. A policy whose effect takes longer than a
//!   tick and an epoch to show (an order that pays from the second round over a working set
//!   whose rounds last longer than an epoch) is measured in its first round: shorter
//!   epochs ([`Auto::epoch`]) do not help there, longer ones do.
//! * **A signal that predicts wrong.** The lead is put in force on a declaration, not on a
//!   measurement: a program that declares large footprints but whose order does not matter
//!   (its data streams through once, or fits in a cache level the model does not describe) is
//!   probed, and runs under the lead until then, and after it unless another candidate beat the
//!   lead by more than the probe's bar; one that declares nothing
//!   (or only small footprints) while its order does matter is never explored on a machine
//!   without a hardware counter (declare footprints with [`set_footprint`](crate::set_footprint),
//!   or choose the policy).
//! * **Effects longer than an epoch.** A policy whose benefit builds up over many epochs (a
//!   placement that gathers ULTs, as `gravity` does, and survives a switch away) is credited
//!   partly to whichever candidate follows it; the rotation of the order spreads that credit,
//!   the median discards the extreme epochs, but neither removes it.
//! * **Noise.** On a shared machine an epoch can lose a few milliseconds to another program; the
//!   median of the rounds and the margin keep a single bad epoch from deciding, not a sustained
//!   disturbance during one candidate's epochs. Longer epochs ([`Auto::epoch`]) and more rounds
//!   trade exploration time for steadier choices. The other side of re-checks that must agree
//!   twice: a program that changes gradually, without a phase change, keeps the policy in force
//!   for one wait more than it needs.
//! * **A key shared by different workloads.** A remembered choice is trusted until a re-check
//!   or a phase change: a key given to jobs of another kind (or the same jobs on input that
//!   behaves otherwise) starts them under a choice made for something else, and with the
//!   back-off a re-check may come only after many of them. Keys should name the workload, not
//!   the program. The memory does not outlive the process.
//! * **Early ends.** An exploration that ends after two rounds because the candidates look
//!   apart decides on two epochs each: a disturbance that slows every epoch of one candidate
//!   in both rounds picks the wrong one (a later re-check, and with a key the pooling of
//!   explorations, correct it).
//! * **Data declared late.** Which candidates are explored is decided at the start of each
//!   exploration: a program whose ULTs declare their data blocks only after the first
//!   exploration has gravity considered from the next one (a re-check or a phase change) on. A
//!   footprint declared late that brings the locality signal puts the lead in force at once
//!   (the declaring thread wakes the selector), if the first candidate is still in force.
//! * **A phase shorter than the watch.** A change of workload that lasts less than three epochs
//!   is not seen; one that keeps alternating faster than an exploration makes every choice
//!   stale.
//! * **A phase change early in the run.** A phase change explores only while explorations take
//!   at most twice the budget's share of the run: one that comes earlier (with the default
//!   settings, a probe of 100 ms and explorations of 100 ms: within about the first 2 s) keeps
//!   the policy in force, and the next exploration is the budget's re-check. A program that ramps up (its first sweeps, its
//!   spawning) or winds down (its last ULTs ending) moves its rate for reasons no policy
//!   changes, so a short run is better off without that exploration; a real change of phase
//!   early in a run is answered late.

use super::Policy;
use crate::runtime::Shared;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// How many decisions [`RuntimeStats::auto`](crate::RuntimeStats::auto) keeps (the newest).
pub const DECISIONS_KEPT: usize = 256;

/// How often the selector looks whether an idle program makes progress again.
const IDLE_LOOK: Duration = Duration::from_millis(50);

/// The fewest units of progress an epoch counts: an epoch that would count fewer is doubled
/// (up to 64 times [`Auto::epoch`]), so that one unit more or less moves a rate by little.
pub const MIN_UNITS: u64 = 256;

/// The settings of the `auto` policy ([`Policy::auto_with`]); [`Policy::auto`] takes the
/// defaults. See the [module docs](self) for how they are used.
///
/// ```
/// use elite_rt::policy::{Auto, Policy};
/// use std::time::Duration;
///
/// let auto = Auto::new()
///     .candidates([Policy::no_affinity(), Policy::virtual_time()])?
///     .epoch(Duration::from_millis(20))?
///     .rounds(5)?
///     .budget(0.1)?;
/// let rt = elite_rt::Runtime::builder().processors(1).policy(Policy::auto_with(auto)).build()?;
/// assert_eq!(rt.policy_name(), "auto");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Auto {
    candidates: Vec<Policy>,
    epoch: Duration,
    rounds: u32,
    margin: f64,
    phase_change: f64,
    budget: f64,
    /// The name under which decisions are remembered for the life of the process
    /// ([`Auto::remember`]).
    memory: Option<Arc<str>>,
}

/// A setting of [`Auto`] out of its range; the message names the setting, the value and the
/// range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoError {
    message: String,
}

impl fmt::Display for AutoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AutoError {}

fn refuse<T>(message: String) -> Result<T, AutoError> {
    Err(AutoError { message })
}

impl Default for Auto {
    fn default() -> Auto {
        Auto::new()
    }
}

impl Auto {
    /// The default settings: candidates every built-in fixed policy (`no-affinity`,
    /// `virtual-time`, `minimum-misses`, `reload-transient`, `gravity`); epochs of at least 5 ms; 3 rounds; a margin of 2%; a phase change at 30%; a
    /// budget of 5%.
    pub fn new() -> Auto {
        Auto {
            candidates: vec![
                Policy::no_affinity(),
                Policy::virtual_time(),
                Policy::minimum_misses(),
                Policy::reload_transient(),
                Policy::gravity(),
            ],
            epoch: Duration::from_millis(5),
            rounds: 3,
            margin: 0.02,
            phase_change: 0.3,
            budget: 0.05,
            memory: None,
        }
    }

    /// The policies to choose among, the first of them the one put in force at start and
    /// preferred on a near tie (see [`margin`](Self::margin)). 1 to 16 of them, none of them
    /// `auto`.
    pub fn candidates(mut self, candidates: impl IntoIterator<Item = Policy>) -> Result<Auto, AutoError> {
        let candidates: Vec<Policy> = candidates.into_iter().collect();
        if candidates.is_empty() || candidates.len() > 16 {
            return refuse(format!("auto candidates: {} given, expected 1..=16", candidates.len()));
        }
        if candidates.iter().any(Policy::is_auto) {
            return refuse("auto candidates: `auto` cannot be one of its own candidates".into());
        }
        self.candidates = candidates;
        Ok(self)
    }

    /// The shortest epoch, the time each measurement takes at least (longer when it would
    /// count fewer than [`MIN_UNITS`] units of progress): 1 ms to 10 s.
    pub fn epoch(mut self, epoch: Duration) -> Result<Auto, AutoError> {
        if epoch < Duration::from_millis(1) || epoch > Duration::from_secs(10) {
            return refuse(format!("auto epoch: {epoch:?} is out of range, expected 1ms..=10s"));
        }
        self.epoch = epoch;
        Ok(self)
    }

    /// Rounds of measurements per exploration (each candidate measured once a round): 1 to 15.
    pub fn rounds(mut self, rounds: u32) -> Result<Auto, AutoError> {
        if !(1..=15).contains(&rounds) {
            return refuse(format!("auto rounds: {rounds} is out of range, expected 1..=15"));
        }
        self.rounds = rounds;
        Ok(self)
    }

    /// How much better than the first candidate another must measure to be chosen over it, as
    /// a fraction (0.02: 2%): 0 to 1.
    pub fn margin(mut self, margin: f64) -> Result<Auto, AutoError> {
        if !(0.0..=1.0).contains(&margin) {
            return refuse(format!("auto margin: {margin} is out of range, expected 0..=1"));
        }
        self.margin = margin;
        Ok(self)
    }

    /// How far the rate must move from the settled rate, as a fraction, for 3 epochs in a row
    /// to count as a phase change: 0.01 to 10.
    pub fn phase_change(mut self, fraction: f64) -> Result<Auto, AutoError> {
        if !(0.01..=10.0).contains(&fraction) {
            return refuse(format!("auto phase_change: {fraction} is out of range, expected 0.01..=10"));
        }
        self.phase_change = fraction;
        Ok(self)
    }

    /// The most of the run time explorations may take, as a fraction: 0.001 to 0.5. An
    /// exploration waits until the time since the start (for the first) or since the last
    /// exploration is long enough for a full exploration to take at most this share of it (a
    /// phase change explores at once, while all explorations so far with it take at most twice
    /// this share of the run).
    pub fn budget(mut self, fraction: f64) -> Result<Auto, AutoError> {
        if !(0.001..=0.5).contains(&fraction) {
            return refuse(format!("auto budget: {fraction} is out of range, expected 0.001..=0.5"));
        }
        self.budget = fraction;
        Ok(self)
    }

    /// Remembers this selector's explorations under `key` for the life of the process, so that
    /// a later runtime whose `auto` remembers under the same key, with the same candidates and
    /// as many processors, starts *warm*: it puts the remembered choice in force at once
    /// ([`AutoReason::Remembered`]) instead of exploring, and its first re-check comes when the
    /// run time under that choice, summed over the runtimes that shared it, reaches the
    /// budget's wait. Each exploration adds to what is remembered, and a choice is made from
    /// the latest [`REMEMBERED_EXPLORATIONS`] together (see the [module docs](self)).
    ///
    /// The key names the *workload*: a program that builds a runtime per job, per request
    /// batch or per benchmark sample gives each kind of job its own key. Runtimes running
    /// different workloads under one key carry a choice to where it may not hold (until a
    /// re-check or a phase change finds out). The key is 1 to 256 bytes.
    ///
    /// ```
    /// use elite_rt::policy::{Auto, AutoReason, Policy};
    ///
    /// let auto = Auto::new().remember("doc-example: sum of products")?;
    /// for _ in 0..2 {
    ///     let rt = elite_rt::Runtime::builder().processors(1).policy(Policy::auto_with(auto.clone())).build()?;
    ///     rt.block_on(|| elite_rt::progress(1));
    ///     // The first runtime explores (if it runs long enough); once one has, the next starts
    ///     // from its choice: its decisions then begin with `AutoReason::Remembered`.
    ///     let warm = rt.stats().auto.iter().any(|d| d.reason == AutoReason::Remembered);
    ///     println!("started warm: {warm}");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remember(mut self, key: impl Into<String>) -> Result<Auto, AutoError> {
        let key: String = key.into();
        if key.is_empty() || key.len() > 256 {
            return refuse(format!("auto remember: a key of {} bytes, expected 1..=256", key.len()));
        }
        self.memory = Some(key.into());
        Ok(self)
    }

    /// The candidates, the first put in force at start.
    pub fn candidate_policies(&self) -> &[Policy] {
        &self.candidates
    }

    /// These settings with every candidate aggregated with `settings` (`Policy::aggregate`).
    pub(crate) fn with_candidates_aggregated(&self, settings: super::Aggregate) -> Auto {
        let candidates = self.candidates.iter().map(|c| c.clone().aggregate_with(settings)).collect();
        Auto { candidates, ..self.clone() }
    }

    /// The key of [`remember`](Self::remember), if any.
    pub fn memory_key(&self) -> Option<&str> {
        self.memory.as_deref()
    }
}

/// Why `auto` put a policy in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AutoReason {
    /// The first candidate, at start, before any measurement.
    Start,
    /// The best of the first exploration (whether the budget's wait or a phase change brought it).
    Explored,
    /// The best of an exploration started because the rate moved (a phase change).
    PhaseChange,
    /// The best of a periodic re-check (within the budget).
    Recheck,
    /// A periodic re-check that chose another candidate than the one in force, which stays until
    /// the next re-check chooses that same candidate (see [the module docs](self#how-it-decides),
    /// 4): one exploration's epochs may have fallen on stretches of the program that favoured it.
    Unconfirmed,
    /// The choice remembered under [`Auto::remember`]'s key, at start, before any
    /// measurement (a warm start).
    Remembered,
    /// The *lead*, put in force before any measurement because the program declared data large
    /// enough for the order of its ULTs to matter to the cache (see [the module
    /// docs](self#how-it-decides)).
    Locality,
}

impl fmt::Display for AutoReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AutoReason::Start => "start",
            AutoReason::Explored => "explored",
            AutoReason::PhaseChange => "phase change",
            AutoReason::Recheck => "re-check",
            AutoReason::Unconfirmed => "re-check, unconfirmed",
            AutoReason::Remembered => "remembered",
            AutoReason::Locality => "locality",
        })
    }
}

/// What `auto` progress is counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProgressUnit {
    /// ULT runs that ended (switches out of ULTs).
    Runs,
    /// Units the program reported with [`progress`].
    Reported,
    /// Fractions of the best candidate's rate in each exploration, pooled over the remembered
    /// explorations (the median of each candidate's fractions): the evidence behind a
    /// [`AutoReason::Remembered`] start.
    Relative,
}

impl fmt::Display for ProgressUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProgressUnit::Runs => "runs",
            ProgressUnit::Reported => "units",
            ProgressUnit::Relative => "of the best",
        })
    }
}

/// One decision of `auto`: which policy it put in force, when and why.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct AutoDecision {
    /// When, from the start of the selector (the runtime's build, or the `set_policy` that
    /// chose `auto`).
    pub at: Duration,
    /// The policy put in force.
    pub policy: &'static str,
    /// Why.
    pub reason: AutoReason,
    /// What the rates are counted in.
    pub unit: ProgressUnit,
    /// Each candidate's median rate over the exploration's rounds (units per second), in the
    /// order of the candidates; empty for [`AutoReason::Start`]; for
    /// [`AutoReason::Remembered`], fractions of the best ([`ProgressUnit::Relative`]). With
    /// [`Auto::remember`] the choice weighs the remembered explorations too, so it can differ
    /// from the best of these rates.
    pub rates: Vec<(&'static str, f64)>,
    /// How long the exploration took.
    pub explored_for: Duration,
}

impl fmt::Display for AutoDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>9.3} s  {:<16} ({})", self.at.as_secs_f64(), self.policy, self.reason)?;
        if !self.rates.is_empty() {
            write!(f, " after {:.0} ms:", self.explored_for.as_secs_f64() * 1e3)?;
            if self.unit == ProgressUnit::Relative {
                for (name, rate) in &self.rates {
                    write!(f, " {name} {rate:.3}")?;
                }
                write!(f, " {}", self.unit)?;
            } else {
                for (name, rate) in &self.rates {
                    write!(f, " {name} {rate:.4e}")?;
                }
                write!(f, " {}/s", self.unit)?;
            }
        }
        Ok(())
    }
}

/// A running selector: its thread, the bell that stops or wakes it, and the decisions it made.
pub(crate) struct Selector {
    bell: Arc<Bell>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What wakes a selector's thread before its timed wait ends: a stop, or a ring (a declaration
/// that may have brought the locality signal, or a first data block).
///
/// Protocol (a mutex and a condition variable; no lock-free part): the selector registers its
/// bell with the engine ([`Engine::hang_bell`](super::engine::Engine::hang_bell), under the
/// engine's bell lock) before it first reads the signals. A declaring thread that raises the
/// largest declaration across the bell's bar, or declares the first data block, stores the
/// declaration first and then takes the engine's bell lock to ring: sets `rung` under the bell's
/// own mutex and notifies. Either the declarer's lock came after the registration (it rings the
/// bell, and a selector that read the signals before the store finds `rung` set, or is notified,
/// before it sleeps on it), or before (the lock orders its store before the selector's first
/// read of the signals, which sees it). So a selector that sleeps on the bell while nothing is
/// worth measuring misses no signal. The selector clears `rung` when it wakes for it.
#[derive(Default)]
pub(crate) struct Bell {
    flags: Mutex<Flags>,
    wake: Condvar,
}

#[derive(Default)]
struct Flags {
    stopped: bool,
    rung: bool,
}

impl Bell {
    /// Wakes the selector to look at the signals again (the declaring thread's side).
    pub(crate) fn ring(&self) {
        self.flags.lock().unwrap_or_else(|e| e.into_inner()).rung = true;
        self.wake.notify_all();
    }
}

/// The decisions of the runtime's selectors (kept across a stop and a restart), and how many
/// times they woke.
#[derive(Default)]
pub(crate) struct Log {
    decisions: Mutex<Vec<AutoDecision>>,
    /// Times a selector's thread woke from a wait (to measure, to look, or rung).
    looks: std::sync::atomic::AtomicU64,
}

impl Log {
    fn push(&self, decision: AutoDecision) {
        let mut d = self.decisions.lock().unwrap_or_else(|e| e.into_inner());
        if d.len() == DECISIONS_KEPT {
            d.remove(0);
        }
        d.push(decision);
    }

    pub(crate) fn snapshot(&self) -> Vec<AutoDecision> {
        self.decisions.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many times the selectors woke so far.
    #[cfg(test)]
    pub(crate) fn looks(&self) -> u64 {
        self.looks.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn looked(&self) {
        self.looks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Selector {
    /// Starts a selector on `shared` with `auto`'s settings, after its first candidate was put in
    /// force. It holds `shared` weakly: the runtime stops it before shutting down.
    pub(crate) fn start(shared: &Arc<Shared>, auto: &Auto, log: Arc<Log>) -> std::io::Result<Selector> {
        let bell = Arc::new(Bell::default());
        // (Before the thread reads any signal: see `Bell`'s protocol.)
        shared.engine.hang_bell(first_level_bytes(&shared.config.topology), &bell);
        let (weak, settings, flag) = (Arc::downgrade(shared), auto.clone(), Arc::clone(&bell));
        // (Ranked above the processors under a real-time policy: `crate::helper`.)
        let thread = crate::helper::spawn("elite-auto", move || Run::new(weak, settings, flag, log).run())?;
        Ok(Selector { bell, thread: Some(thread) })
    }

    /// Stops the selector and waits for its thread (at most one epoch's wait).
    pub(crate) fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.bell.flags.lock().unwrap_or_else(|e| e.into_inner()).stopped = true;
        self.bell.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Selector {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The selector's state.
struct Run {
    shared: Weak<Shared>,
    auto: Auto,
    bell: Arc<Bell>,
    log: Arc<Log>,
    began: Instant,
    /// Whether any unit was reported with `progress` (then rates are in those).
    reported: bool,
    /// The epoch's length now: `auto.epoch`, doubled while epochs count too few units.
    span: Duration,
    /// The runtime's processor count (part of what a memory is kept for).
    processors: usize,
    /// What the recording policies can go by besides declarations (see [`Signals`]).
    hardware: bool,
    /// The size of a declaration that makes the order matter, in bytes (see [`Signals`]).
    bar: usize,
    /// The time the probe and the explorations took so far.
    spent: Duration,
    /// The candidate the last re-check chose over the one in force, which the next re-check
    /// must choose again to be put in force ([`AutoReason::Unconfirmed`]).
    challenger: Option<usize>,
}

/// A count of progress at an instant.
#[derive(Clone, Copy)]
struct Mark {
    at: Instant,
    runs: u64,
    units: u64,
}

impl Run {
    fn new(shared: Weak<Shared>, auto: Auto, bell: Arc<Bell>, log: Arc<Log>) -> Run {
        let span = auto.epoch;
        let (processors, hardware, bar) = shared.upgrade().map_or((0, false, DEFAULT_BAR), |s| {
            (s.processors.len(), counts_misses(&s.config.counters), first_level_bytes(&s.config.topology))
        });
        Run {
            shared,
            auto,
            bell,
            log,
            began: Instant::now(),
            reported: false,
            span,
            processors,
            hardware,
            bar,
            spent: Duration::ZERO,
            challenger: None,
        }
    }

    /// What the program declared so far, and what the counters can see.
    fn signals(&self) -> Signals {
        let (range, data) = self
            .shared
            .upgrade()
            .map_or((None, false), |s| (s.engine.declared_range(), s.engine.data_declared()));
        let (smallest, declared) = range.unwrap_or((0, 0));
        Signals { hardware: self.hardware, declared, smallest, bar: self.bar, data }
    }

    /// Which candidates are worth measuring now (the first always is).
    fn plausible(&self) -> Vec<bool> {
        let signals = self.signals();
        self.auto.candidates.iter().enumerate().map(|(i, c)| i == 0 || plausible(c, &signals)).collect()
    }

    /// With the first candidate in force (`current` 0) and the signals saying the order
    /// matters, puts the lead ([`lead`]) in force and logs why; returns the candidate in force.
    fn lead_in(&mut self, current: usize) -> Result<usize, ()> {
        if current != 0 {
            return Ok(current);
        }
        let Some(i) = lead(&self.auto.candidates, &self.signals()) else { return Ok(current) };
        if !self.put_in_force(i) {
            return Err(());
        }
        self.remember_choice(i);
        self.log.push(AutoDecision {
            at: self.began.elapsed(),
            policy: self.auto.candidates[i].name(),
            reason: AutoReason::Locality,
            unit: self.unit(),
            rates: Vec::new(),
            explored_for: Duration::ZERO,
        });
        Ok(i)
    }

    /// Waits `d`; false when told to stop (or the runtime is gone).
    fn wait(&self, d: Duration) -> bool {
        self.wait_until(Instant::now() + d, false)
    }

    /// Waits until `deadline` or, when `ring`, until the bell rings (a declaration that may
    /// bring the locality signal), whichever comes first, and then takes the ring; false when
    /// told to stop. (A wait that does not listen leaves a ring for the next that does.)
    fn wait_until(&self, deadline: Instant, ring: bool) -> bool {
        let mut flags = self.bell.flags.lock().unwrap_or_else(|e| e.into_inner());
        while !flags.stopped {
            let now = Instant::now();
            if now >= deadline || (ring && flags.rung) {
                flags.rung &= !ring;
                self.log.looked();
                return true;
            }
            flags = self.bell.wake.wait_timeout(flags, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        false
    }

    /// Whether anything is worth measuring: two candidates or more to compare (see
    /// [`plausible`]; a lead implies two: the first and the lead).
    fn worth_measuring(&self) -> bool {
        self.plausible().iter().filter(|p| **p).count() >= 2
    }

    fn mark(&self) -> Option<Mark> {
        let shared = self.shared.upgrade()?;
        let (mut runs, mut units) = (0u64, 0u64);
        for p in shared.processors.iter() {
            runs = runs.wrapping_add(p.stats.switches.get());
            units = units.wrapping_add(p.stats.progress.get());
        }
        Some(Mark { at: Instant::now(), runs, units })
    }

    /// The rate between two marks in the current unit (`None`: no progress at all, or a unit
    /// switch: measure again).
    fn rate(&mut self, a: Mark, b: Mark) -> Option<f64> {
        let secs = b.at.duration_since(a.at).as_secs_f64();
        if b.units != a.units && !self.reported {
            self.reported = true; // from now on in the program's units
            return None;
        }
        let delta = if self.reported { b.units.wrapping_sub(a.units) } else { b.runs.wrapping_sub(a.runs) };
        (delta > 0 && secs > 0.0).then(|| delta as f64 / secs)
    }

    fn unit(&self) -> ProgressUnit {
        if self.reported {
            ProgressUnit::Reported
        } else {
            ProgressUnit::Runs
        }
    }

    fn put_in_force(&self, i: usize) -> bool {
        let Some(shared) = self.shared.upgrade() else { return false };
        shared.put_in_force(&self.auto.candidates[i]);
        true
    }

    /// One epoch under what is in force: its rate (`None` with no progress); `Err` on a stop.
    /// After a switch (`settle`) it first waits a fifth of an epoch for the processors to take
    /// the policy up. An epoch that counts fewer than [`MIN_UNITS`] goes on for as long again
    /// (up to 64 times [`Auto::epoch`]), and later epochs start that long.
    fn measure(&mut self, settle: bool) -> Result<Option<f64>, ()> {
        if settle && !self.wait(self.span / 5) {
            return Err(());
        }
        let a = self.mark().ok_or(())?;
        let mut wait = self.span;
        loop {
            if !self.wait(wait) {
                return Err(());
            }
            let b = self.mark().ok_or(())?;
            let units =
                if self.reported { b.units.wrapping_sub(a.units) } else { b.runs.wrapping_sub(a.runs) };
            if units >= MIN_UNITS || units == 0 || self.span >= self.auto.epoch * 64 {
                return Ok(self.rate(a, b));
            }
            wait = self.span; // (as long again as measured so far)
            self.span *= 2;
        }
    }

    /// Waits until the program makes progress again (or, with `or_lead`, until the locality
    /// signal gives a lead), looking after `look`, then twice as long each time up to
    /// [`IDLE_LOOK`] (an idle program wakes the selector that rarely).
    fn until_progress(&mut self, mut look: Duration, or_lead: bool) -> Result<(), ()> {
        loop {
            if or_lead && lead(&self.auto.candidates, &self.signals()).is_some() {
                return Ok(());
            }
            let a = self.mark().ok_or(())?;
            if !self.wait(look) {
                return Err(());
            }
            look = (look * 2).min(IDLE_LOOK);
            let b = self.mark().ok_or(())?;
            if b.runs != a.runs || b.units != a.units {
                return Ok(());
            }
        }
    }

    /// How long an exploration is expected to take with the epochs as long as they are now.
    fn exploration(&self) -> Duration {
        let epochs = self.auto.candidates.len() as u32 * self.auto.rounds;
        (self.span + self.span / 5) * epochs
    }

    /// Explores every candidate, puts the best in force and logs why; the index of the policy put
    /// in force (chosen on the pooled rates where the selector remembers), of the one this
    /// exploration's own medians chose, and the reason logged. A re-check that chooses another
    /// candidate than `incumbent`, the one in force, keeps `incumbent` unless the re-check before
    /// chose that same candidate ([`confirm_recheck`]).
    fn explore(&mut self, reason: AutoReason, incumbent: usize) -> Result<(usize, usize, AutoReason), ()> {
        let n = self.auto.candidates.len();
        let started = Instant::now();
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut unit = self.unit();
        // Only the candidates that can behave otherwise than an earlier one on what the program
        // declared so far (see `plausible`).
        let plausible = self.plausible();
        let mut alive = plausible.clone();
        let mut round = 0;
        while round < self.auto.rounds as usize && alive.iter().filter(|a| **a).count() > 1 {
            let mut measured = 0;
            for k in 0..n {
                let i = (k + round) % n;
                if !alive[i] {
                    continue;
                }
                if n > 1 && !self.put_in_force(i) {
                    return Err(());
                }
                if let Some(rate) = self.measure(true)? {
                    samples[i].push(rate);
                    measured += 1;
                }
            }
            if self.unit() != unit {
                // Progress began to be reported: start over in its units.
                unit = self.unit();
                samples.iter_mut().for_each(Vec::clear);
                alive.copy_from_slice(&plausible);
                round = 0;
                continue;
            }
            if measured == 0 {
                // Nothing progressed in a whole round (an idle program): wait for progress
                // under what is in force rather than switching on.
                self.until_progress(IDLE_LOOK, false)?;
                continue;
            }
            round += 1;
            drop_the_clearly_worse(&mut samples, &mut alive, round);
            if round >= 2 && decided(&mut samples, &alive, self.auto.margin) {
                break; // (apart, or tied: more rounds would not change the choice)
            }
        }
        let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
        let measured: Vec<bool> = samples.iter().map(|s| !s.is_empty()).collect();
        let own = choose(&medians, self.auto.margin);
        let chosen = match self.remember_exploration(&medians, &measured, reason, true) {
            Some(pooled) => choose(&pooled, self.auto.margin),
            None => own,
        };
        let (best, challenger) = match reason {
            AutoReason::Recheck => confirm_recheck(chosen, incumbent, self.challenger),
            _ => (chosen, None),
        };
        self.challenger = challenger;
        let reason = if challenger.is_some() { AutoReason::Unconfirmed } else { reason };
        self.remember_choice(best);
        if !self.put_in_force(best) {
            return Err(());
        }
        let took = started.elapsed();
        self.spent += took;
        let names = self.auto.candidates.iter().map(Policy::name);
        self.log.push(AutoDecision {
            at: self.began.elapsed(),
            policy: self.auto.candidates[best].name(),
            reason,
            unit: self.unit(),
            rates: names.zip(medians.iter().copied()).collect(),
            explored_for: took,
        });
        Ok((best, own, reason))
    }

    /// Rates over `count` back-to-back ticks of `tick` under what is in force, in the current
    /// unit (a tick without progress reads 0); `None` when the unit changed meanwhile
    /// (progress began to be reported: measure again); `Err` on a stop.
    fn ticks(&mut self, count: usize, tick: Duration) -> Result<Option<Vec<f64>>, ()> {
        let unit = self.unit();
        let mut a = self.mark().ok_or(())?;
        let mut rates = Vec::with_capacity(count);
        for _ in 0..count {
            if !self.wait(tick) {
                return Err(());
            }
            let b = self.mark().ok_or(())?;
            if !self.reported && b.units != a.units {
                self.reported = true; // (from now on in the program's units)
            }
            let delta =
                if self.reported { b.units.wrapping_sub(a.units) } else { b.runs.wrapping_sub(a.runs) };
            let secs = b.at.duration_since(a.at).as_secs_f64();
            rates.push(if secs > 0.0 { delta as f64 / secs } else { 0.0 });
            a = b;
        }
        Ok((self.unit() == unit).then_some(rates))
    }

    /// The early probe, with the `lead` in force: measures the noise of the progress rate
    /// under the lead in [`PROBE_NOISE_TICKS`] ticks of a fifth of an epoch, sizes an epoch
    /// from it ([`probe_ticks`]), measures every other plausible candidate for one such epoch
    /// (after a tick to settle), and puts in force the one that beats the lead by more than
    /// the noise allows ([`probe_choice`]) and then again in turn with it ([`confirm`]),
    /// logged as [`AutoReason::Explored`]; `provisional` (a second probe follows) leaves a
    /// choice other than the lead unremembered. `None` (the
    /// lead stays, nothing logged) when no other candidate is plausible, or the noise could not
    /// be measured in [`PROBE_ATTEMPTS`] tries (the median tick without progress in each).
    fn probe(&mut self, lead: usize, provisional: bool) -> Result<Option<usize>, ()> {
        let plausible = self.plausible();
        let others: Vec<usize> = (0..plausible.len()).filter(|&i| i != lead && plausible[i]).collect();
        if others.is_empty() {
            return Ok(None);
        }
        let tick = self.auto.epoch / 5;
        let started = Instant::now();
        // The lead was put in force just now: a tick to settle, then the noise.
        if !self.wait(tick) {
            return Err(());
        }
        // (Again when progress begins to be reported meanwhile, or a tick saw none: the
        // program's start, spawning and setting up, is not its steady work.)
        let mut attempts = 0;
        let (noise, sigma) = loop {
            attempts += 1;
            if let Some(mut noise) = self.ticks(PROBE_NOISE_TICKS, tick)? {
                if let Some(sigma) = relative_spread(&mut noise) {
                    break (noise, sigma);
                }
            }
            if attempts == PROBE_ATTEMPTS {
                return Ok(None);
            }
            self.until_progress(tick, false)?;
        };
        let m = probe_ticks(sigma);
        let unit = self.unit();
        let mut rates = vec![0.0; plausible.len()];
        rates[lead] = noise.iter().sum::<f64>() / noise.len() as f64;
        for &i in &others {
            let Some(r) = self.epoch_under(i, tick, tick * m)? else { break };
            rates[i] = r;
        }
        let threshold = probe_threshold(sigma, m, self.auto.margin);
        let mut best = probe_choice(&rates, lead, threshold);
        let challenger = best;
        // (Whether the challenger's rate comes from a whole alternation with the lead.)
        let mut compared = false;
        // (Not when progress began to be reported halfway: the rates do not compare, below.)
        if best != lead && self.unit() == unit {
            // One epoch each ranks the candidates by where each fell in the program's course (a
            // start, a pass that ends, the state the policy before left): the challenger is
            // put in force in turn with the lead, epochs of the same length, and kept only if
            // it beats the lead in the comparisons of neighbouring epochs ([`confirm`]).
            let mut series = Vec::with_capacity(CONFIRM_EPOCHS);
            for k in 0..CONFIRM_EPOCHS {
                let Some(r) = self.epoch_under(if k % 2 == 0 { best } else { lead }, tick, tick * m)? else {
                    break;
                };
                series.push(r);
            }
            let mut ratios = neighbour_ratios(&series);
            let (ratio, kept) = confirm(&mut ratios, threshold, self.auto.margin);
            // (The challenger's rate as the lead's times the median ratio: what the decision
            // and the memory keep.)
            if ratio.is_finite() && !series.is_empty() {
                rates[best] = rates[lead] * ratio;
                compared = series.len() == CONFIRM_EPOCHS;
            }
            if series.len() < CONFIRM_EPOCHS || !kept {
                best = lead;
            }
        }
        let took = started.elapsed();
        self.spent += took;
        if self.unit() != unit {
            // (Progress began to be reported halfway: the rates do not compare.)
            return if self.put_in_force(lead) { Ok(None) } else { Err(()) };
        }
        if !self.put_in_force(best) {
            return Err(());
        }
        // Remembered are the lead's rate and, where one came up, the challenger's from the
        // alternation: the other candidates' single epochs each fell on one stretch of the
        // program, and a warm start is not to pool them with an exploration's medians.
        let measured: Vec<bool> =
            (0..rates.len()).map(|i| i == lead || (compared && i == challenger)).collect();
        // Remembered only when its choice also has the highest rate: a probe that kept the lead
        // while another candidate read higher (within the noise) ranked nothing, and a runtime
        // that starts warm from memory must start from the best that was measured.
        // A `provisional` probe (one the re-probe follows) that left the lead is not
        // remembered: it measured the program's start, and a runtime that ends before the
        // re-probe must not carry it to the next.
        if rates.iter().all(|&r| r <= rates[best]) && !(provisional && best != lead) {
            self.remember_exploration(&rates, &measured, AutoReason::Explored, false);
            self.remember_choice(best);
        }
        let names = self.auto.candidates.iter().map(Policy::name);
        self.log.push(AutoDecision {
            at: self.began.elapsed(),
            policy: self.auto.candidates[best].name(),
            reason: AutoReason::Explored,
            unit: self.unit(),
            rates: names.zip(rates.iter().copied()).collect(),
            explored_for: took,
        });
        Ok(Some(best))
    }

    /// One epoch of the probe under candidate `i`: put in force, a tick (`settle`) to settle,
    /// then its rate over `epoch`; `None` when the epoch saw no progress (as [`Run::ticks`]).
    fn epoch_under(&mut self, i: usize, settle: Duration, epoch: Duration) -> Result<Option<f64>, ()> {
        if !self.put_in_force(i) || !self.wait(settle) {
            return Err(());
        }
        Ok(self.ticks(1, epoch)?.map(|r| r[0]))
    }

    /// The early probe from the `lead`, twice: the first measures the program's start (its
    /// spawning, its first pass over cold data, or what came right after the declaration that
    /// brought the signal), which can favour another candidate than its steady work does, so
    /// its choice is provisional; once [`REPROBE_AFTER`] times as long as it took has passed
    /// since it began, the lead is put in force again and probed from once more, and that
    /// choice stands (the lead where the second probe cannot measure). `None` when the first
    /// probe measured nothing (see [`probe`](Self::probe)).
    fn probe_twice(&mut self, lead: usize) -> Result<Option<usize>, ()> {
        let began = Instant::now();
        if self.probe(lead, true)?.is_none() {
            return Ok(None);
        }
        if !self.wait_until(began + began.elapsed().mul_f64(REPROBE_AFTER), false) || !self.put_in_force(lead)
        {
            return Err(());
        }
        Ok(Some(self.probe(lead, false)?.unwrap_or(lead)))
    }

    fn run(mut self) {
        self.log.push(AutoDecision {
            at: Duration::ZERO,
            policy: self.auto.candidates[0].name(),
            reason: AutoReason::Start,
            unit: self.unit(),
            rates: Vec::new(),
            explored_for: Duration::ZERO,
        });
        let _ = self.select();
    }

    /// At the first progress, the lead where the locality signal holds (or later, once it does);
    /// then watch, and explore when the time since the start or the last exploration is long
    /// enough for one to take at most the budget's share of it (twice that, 4 times, ... up to
    /// 64 times, after each re-check that kept the policy), or at once on a phase change; until
    /// stopped.
    fn select(&mut self) -> Result<(), ()> {
        if self.auto.candidates.len() == 1 {
            return Ok(()); // (nothing to choose: the one candidate is in force)
        }
        let (mut best, mut backoff, mut credit, mut explored) = match self.recall() {
            Some(memory) => {
                // A warm start: the remembered choice, at once, and the wait before a re-check
                // goes on from where the runtimes before this one left it.
                self.span = memory.span;
                self.reported = memory.unit == ProgressUnit::Reported;
                self.challenger = memory.challenger;
                if !self.put_in_force(memory.choice) {
                    return Err(());
                }
                let pooled = pool(&memory.explorations, self.auto.candidates.len());
                let names = self.auto.candidates.iter().map(Policy::name);
                self.log.push(AutoDecision {
                    at: self.began.elapsed(),
                    policy: self.auto.candidates[memory.choice].name(),
                    reason: AutoReason::Remembered,
                    unit: ProgressUnit::Relative,
                    rates: names.zip(pooled).collect(),
                    explored_for: Duration::ZERO,
                });
                (memory.choice, memory.backoff, memory.quiet, true)
            }
            None => {
                // The program's first spawns declare what it works on: look soon, and lead as soon
                // as they do. (With nothing worth measuring, the watch sleeps until a declaration
                // rings the bell.)
                if self.worth_measuring() {
                    self.until_progress(self.span / 5, true)?;
                }
                let lead = self.lead_in(0)?;
                // With a lead in force (the locality signal), an early probe of the others in
                // short epochs sized from the noise: it explores only where that signal says
                // the candidates can differ.
                let probed = if lead != 0 { self.probe_twice(lead)? } else { None };
                (probed.unwrap_or(lead), 1u32, Duration::ZERO, probed.is_some())
            }
        };
        loop {
            let since = Instant::now();
            let quiet =
                |run: &Run| run.exploration().mul_f64((1.0 / run.auto.budget - 1.0) * f64::from(backoff));
            let reason = self.watch(since, credit, backoff, &quiet, best == 0 && !explored)?;
            credit = Duration::ZERO;
            if reason == AutoReason::Locality {
                best = self.lead_in(best)?;
                if best != 0 {
                    // (The probe, as at the start: the signal came later.)
                    if let Some(choice) = self.probe_twice(best)? {
                        (best, explored) = (choice, true);
                    }
                }
                continue;
            }
            if self.plausible().iter().filter(|p| **p).count() < 2 {
                // Nothing else is worth measuring: keep what is in force, and look again later.
                backoff = (backoff * 2).min(64);
                continue;
            }
            // (The first exploration is `Explored`, whatever brought it.)
            let reason = if explored { reason } else { AutoReason::Explored };
            explored = true;
            let (now, own, reason) = self.explore(reason, best)?;
            backoff = next_backoff(backoff, reason, best, now, own);
            best = now;
            self.remember_quiet(Duration::ZERO, backoff);
        }
    }

    /// Whether `memory` was kept for this selector: its key, candidates and processor count.
    fn is_mine(&self, memory: &Memory) -> bool {
        self.auto.memory.as_deref() == Some(&*memory.key)
            && memory.processors == self.processors
            && memory.candidates.len() == self.auto.candidates.len()
            && memory.candidates.iter().zip(&self.auto.candidates).all(|(m, c)| *m == c.name())
    }

    /// What this selector's key remembers, if it made a choice.
    fn recall(&self) -> Option<Memory> {
        self.auto.memory.as_ref()?;
        let memories = MEMORIES.lock().unwrap_or_else(|e| e.into_inner());
        memories.iter().find(|m| self.is_mine(m)).filter(|m| !m.explorations.is_empty()).cloned()
    }

    /// Runs `f` on this selector's memory, made if there is none; `None` without a key.
    fn with_memory<R>(&self, f: impl FnOnce(&mut Memory) -> R) -> Option<R> {
        let key = self.auto.memory.as_ref()?;
        let mut memories = MEMORIES.lock().unwrap_or_else(|e| e.into_inner());
        let at = match memories.iter().position(|m| self.is_mine(m)) {
            Some(at) => at,
            None => {
                memories.push(Memory {
                    key: Arc::clone(key),
                    processors: self.processors,
                    candidates: self.auto.candidates.iter().map(Policy::name).collect(),
                    unit: self.unit(),
                    explorations: Vec::new(),
                    full: false,
                    choice: 0,
                    challenger: None,
                    quiet: Duration::ZERO,
                    backoff: 1,
                    span: self.span,
                });
                memories.len() - 1
            }
        };
        Some(f(&mut memories[at]))
    }

    /// Adds an exploration's medians (`measured`: whether each candidate was measured; `full`:
    /// a full exploration rather than a probe) to the memory, and returns each candidate's
    /// rate pooled over the remembered explorations ([`pool`]); `None` without a key.
    /// A phase change, or a change of unit, forgets the explorations before it (they measured
    /// another workload, or in other units); the first full exploration forgets the probes
    /// (their epochs were one per candidate, and the full one's medians outrank them).
    fn remember_exploration(
        &self,
        medians: &[f64],
        measured: &[bool],
        reason: AutoReason,
        full: bool,
    ) -> Option<Vec<f64>> {
        let (unit, span, n) = (self.unit(), self.span, medians.len());
        self.with_memory(|m| {
            if reason == AutoReason::PhaseChange || m.unit != unit {
                m.forget();
            }
            m.unit = unit;
            m.span = span;
            m.add(medians, measured, full);
            pool(&m.explorations, n)
        })
    }

    /// Remembers `choice` as the policy settled on, with the challenger a re-check chose over it,
    /// if any (`self.challenger`).
    fn remember_choice(&self, choice: usize) {
        let challenger = self.challenger;
        self.with_memory(|m| (m.choice, m.challenger) = (choice, challenger));
    }

    /// Remembers the time under the choice since the last exploration and the re-check's
    /// back-off.
    fn remember_quiet(&self, quiet: Duration, backoff: u32) {
        self.with_memory(|m| {
            m.quiet = quiet;
            m.backoff = backoff;
        });
    }

    /// Measures epoch after epoch under the policy in force until `quiet(self)` passed since
    /// `since`, counting `credit` as already passed ([`recheck_due`], [`AutoReason::Recheck`]),
    /// or the rate moved away from the settled rate (the
    /// median of the first 3 epochs) by more than the phase-change fraction for 3 epochs in a
    /// row ([`AutoReason::PhaseChange`]), or, with `lead_pending` (the first candidate in force
    /// and nothing explored yet), the locality signal appeared ([`AutoReason::Locality`]). While
    /// fewer than two candidates are worth measuring it measures nothing: it sleeps until the
    /// bell rings (a declaration) or the re-check is due.
    fn watch(
        &mut self,
        since: Instant,
        credit: Duration,
        backoff: u32,
        quiet: &dyn Fn(&Run) -> Duration,
        lead_pending: bool,
    ) -> Result<AutoReason, ()> {
        let mut phase = PhaseWatch::new(self.unit(), self.auto.phase_change);
        loop {
            if lead_pending && lead(&self.auto.candidates, &self.signals()).is_some() {
                return Ok(AutoReason::Locality); // (declared since: the lead, at once)
            }
            if recheck_due(since.elapsed(), credit, quiet(self), self.exploration()) {
                return Ok(AutoReason::Recheck);
            }
            if !self.worth_measuring() {
                // Nothing to compare (a phase change or a re-check would explore nothing): sleep
                // until a declaration may have brought the signal, or the re-check is due.
                let due = since + recheck_wait(credit, quiet(self), self.exploration());
                if !self.wait_until(due, true) {
                    return Err(());
                }
                self.remember_quiet(since.elapsed() + credit, backoff);
                continue;
            }
            let measured = self.measure(false);
            // (Kept after every epoch: a runtime may be dropped at any time.)
            self.remember_quiet(since.elapsed() + credit, backoff);
            let Some(rate) = measured? else {
                self.until_progress(IDLE_LOOK, false)?;
                continue;
            };
            // A phase change explores only when it is affordable; otherwise the watch has
            // settled again, on the new rate, and the budget's re-check comes as it would (a
            // short run, or one whose rate keeps moving, would spend most of its time under the
            // candidates being tried).
            if phase.observe(rate, self.unit()) == Watched::PhaseChange
                && affordable(self.spent, self.began.elapsed(), self.exploration(), 2.0 * self.auto.budget)
            {
                return Ok(AutoReason::PhaseChange);
            }
        }
    }
}

/// Whether the budget's re-check is due `elapsed` into a watch that counts `credit` as already
/// passed under the choice, with `quiet` the wait before a re-check: once the two together reach
/// the wait. With credit (a warm start's first watch), also not before `elapsed` reaches one
/// exploration's length, so that a re-check due from the runtimes before measures this one's
/// work rather than its start (spawning, first touches of cold data).
fn recheck_due(elapsed: Duration, credit: Duration, quiet: Duration, exploration: Duration) -> bool {
    elapsed >= recheck_wait(credit, quiet, exploration)
}

/// How long into the watch the re-check of [`recheck_due`] comes: the rest of the wait after
/// the credit, and with credit at least one exploration.
fn recheck_wait(credit: Duration, quiet: Duration, exploration: Duration) -> Duration {
    if credit.is_zero() {
        quiet
    } else {
        quiet.saturating_sub(credit).max(exploration)
    }
}

/// What [`PhaseWatch::observe`] made of a rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watched {
    /// Nothing to act on (settling, within the band, or not yet 3 epochs away).
    Steady,
    /// The rate was away from the settled rate for 3 epochs in a row (the watch settles again
    /// from the next epoch on).
    PhaseChange,
}

/// The phase-change watch over the rates of successive epochs: the settled rate is the median
/// of the first 3 after a start (or a restart); 3 epochs in a row further from it than
/// `fraction` (either way) are a phase change. A change of unit (progress began to be
/// reported) restarts the settling: rates in another unit do not compare, and the program did
/// not change what it does.
struct PhaseWatch {
    unit: ProgressUnit,
    fraction: f64,
    first: Vec<f64>,
    settled: f64,
    away: u32,
}

impl PhaseWatch {
    fn new(unit: ProgressUnit, fraction: f64) -> PhaseWatch {
        PhaseWatch { unit, fraction, first: Vec::with_capacity(3), settled: 0.0, away: 0 }
    }

    fn observe(&mut self, rate: f64, unit: ProgressUnit) -> Watched {
        if unit != self.unit {
            *self = PhaseWatch::new(unit, self.fraction);
        }
        if self.first.len() < 3 {
            self.first.push(rate);
            if self.first.len() == 3 {
                self.settled = median(&mut self.first);
            }
            return Watched::Steady;
        }
        if (rate - self.settled).abs() > self.fraction * self.settled {
            self.away += 1;
            if self.away >= 3 {
                *self = PhaseWatch::new(unit, self.fraction);
                return Watched::PhaseChange;
            }
        } else {
            self.away = 0;
        }
        Watched::Steady
    }
}

/// Whether an exploration expected to take `next` may start now, `elapsed` into the run, after
/// explorations (the probe's included) that took `spent` in all: only if all of them together,
/// this one included, take at most `share` of the run by its end. A phase change in a short
/// run (or one whose rate keeps moving) otherwise spends most of it under the candidates
/// being tried.
fn affordable(spent: Duration, elapsed: Duration, next: Duration, share: f64) -> bool {
    (spent + next).as_secs_f64() <= share * (elapsed + next).as_secs_f64()
}

/// The size of a declaration that brings the locality signal where the topology describes no
/// first-level data cache, in bytes (see the [module docs](self#how-it-decides)).
pub const DEFAULT_BAR: usize = 32 << 10;

/// The size of the first-level data cache of processor 0 in `topology`, in bytes
/// ([`DEFAULT_BAR`] where it describes none).
pub(crate) fn first_level_bytes(topology: &elite_affinity::Topology) -> usize {
    use elite_affinity::CacheKind;
    topology
        .caches_of(0)
        .filter(|c| c.level == 1 && c.kind != CacheKind::Instruction)
        .map(|c| c.size as usize)
        .min()
        .filter(|&size| size > 0)
        .unwrap_or(DEFAULT_BAR)
}

/// Whether the runtime's processors count cache misses otherwise than by the estimator (a
/// hardware counter, or a script), with the counters `choice`.
fn counts_misses(choice: &super::engine::CounterChoice) -> bool {
    use super::engine::CounterChoice;
    match choice {
        CounterChoice::Estimated => false,
        CounterChoice::Scripted(_) => true,
        CounterChoice::Detect => {
            elite_affinity::HardwareSource::open(elite_affinity::CounterEvent::CacheMisses).is_ok()
        }
    }
}

/// What tells `auto` whether the order of the ULTs can matter to the cache.
#[derive(Clone, Copy, Debug)]
struct Signals {
    /// The processors count misses otherwise than by the estimator: the recording policies see
    /// real reloads whatever the program declared.
    hardware: bool,
    /// The largest footprint or data block a ULT declared, in bytes.
    declared: usize,
    /// The smallest one (of more than 0 bytes), in bytes; 0 before the first.
    smallest: usize,
    /// The size of a declaration that makes the order matter: the first-level data cache's.
    bar: usize,
    /// A ULT declared a data block (gravity's input).
    data: bool,
}

impl Signals {
    /// Whether the recording policies have something to order by that can pay: real miss
    /// counts, or a declaration larger than the first-level cache.
    fn locality(&self) -> bool {
        self.hardware || self.declared > self.bar
    }

    /// Whether `reload-transient` can order otherwise than by recency: it counts real misses,
    /// or the declarations differ by more than [`UNEVEN_DECLARATIONS`] times. Otherwise its
    /// estimator takes every run to reload the same lines, its expected reload grows with the
    /// time since a ULT's run alone, and it orders as `virtual-time` does, for more work per run.
    fn uneven(&self) -> bool {
        self.hardware || self.declared > self.smallest.saturating_mul(UNEVEN_DECLARATIONS)
    }
}

/// How many times the largest declaration must exceed the smallest for the locality signal to
/// lead with `reload-transient` rather than the first other recording candidate (the
/// [module docs](self), step 1).
pub const UNEVEN_DECLARATIONS: usize = 2;

/// Whether `candidate` is worth exploring given the `signals`: the first candidate and custom
/// policies always; the recording policies (virtual-time, minimum-misses, reload-transient,
/// gravity) only with the locality signal ([`Signals::locality`]). Without a hardware counter
/// they order by the misses the estimator derives from declared footprints: with none
/// declared they order as `no-affinity` does, at a higher cost per run, and a run whose data
/// fits in the first-level cache reloads it, wherever it was evicted to, for about what
/// their bookkeeping costs. Gravity also needs a data block: its forces act only between
/// ULTs whose declared blocks overlap, and without them it orders as `virtual-time` does.
fn plausible(candidate: &Policy, signals: &Signals) -> bool {
    use super::Kind;
    match candidate.kind() {
        Kind::Custom | Kind::NoAffinity => true,
        Kind::Gravity => signals.data && signals.locality(),
        Kind::VirtualTime | Kind::MinimumMisses | Kind::ReloadTransient => signals.locality(),
    }
}

/// The candidate `auto` puts in force, before measuring anything, when the `signals` say the
/// order matters: where `reload-transient` can order otherwise than by recency
/// ([`Signals::uneven`]: a hardware counter, or declarations of different sizes), the first
/// `reload-transient` candidate (it orders by the expected reload, the quantity the signal
/// stands for); else, and without one, the first plausible recording policy after the first
/// candidate (`virtual-time` among the default candidates: recency, at the least cost per run);
/// `None` without the signal or without such a candidate.
fn lead(candidates: &[Policy], signals: &Signals) -> Option<usize> {
    use super::Kind;
    if !signals.locality() {
        return None;
    }
    let recording = |i: &usize| {
        let c = &candidates[*i];
        !matches!(c.kind(), Kind::Custom | Kind::NoAffinity) && plausible(c, signals)
    };
    let mut rest = (1..candidates.len()).filter(recording);
    (1..candidates.len())
        .filter(recording)
        .find(|&i| signals.uneven() && candidates[i].kind() == Kind::ReloadTransient)
        .or_else(|| rest.next())
}

/// How many ticks (a fifth of [`Auto::epoch`] each) the early probe measures the lead in, to
/// see how much the progress rate moves from tick to tick.
pub const PROBE_NOISE_TICKS: usize = 8;

/// How many times the early probe measures the noise before it gives up: again when
/// progress begins to be reported in the middle of a measurement, or the median tick saw none.
pub const PROBE_ATTEMPTS: u32 = 4;

/// The difference between two candidates' rates, as a fraction, that the early probe's epochs
/// are sized to resolve: twice the standard error of the difference of two of its rates.
pub const PROBE_RESOLUTION: f64 = 0.05;

/// The longest epoch of the early probe, in ticks: a program noisier than that allows is
/// probed with epochs this long, and a correspondingly higher bar to leave the lead.
pub const PROBE_MAX_TICKS: u32 = 8;

/// The relative spread of tick rates (`None` when the median tick saw no progress): the
/// median absolute deviation from the median, as a fraction of the median, scaled (by 1.4826)
/// to estimate a standard deviation; a single tick disturbed by another program (even one
/// without progress, its processors off their CPUs) moves it little.
fn relative_spread(rates: &mut [f64]) -> Option<f64> {
    if rates.iter().any(|&r| r < 0.0 || !r.is_finite()) {
        return None;
    }
    let mid = median(rates);
    if mid <= 0.0 {
        return None;
    }
    let mut deviations: Vec<f64> = rates.iter().map(|r| (r - mid).abs()).collect();
    Some(1.4826 * median(&mut deviations) / mid)
}

/// How many ticks one epoch of the early probe lasts for a tick-to-tick relative spread
/// `sigma`: the fewest `m` with which twice the standard error of the difference between two
/// `m`-tick rates, `2 sigma sqrt(2 / m)`, is at most [`PROBE_RESOLUTION`] (ticks taken as
/// independent), from 1 to [`PROBE_MAX_TICKS`].
fn probe_ticks(sigma: f64) -> u32 {
    let m = (8.0 * sigma * sigma / (PROBE_RESOLUTION * PROBE_RESOLUTION)).ceil();
    if m.is_nan() || m < 1.0 {
        1
    } else {
        (m as u32).min(PROBE_MAX_TICKS)
    }
}

/// How much better than the lead's rate (as a fraction) a candidate's one-epoch rate must be
/// for the probe to switch to it: twice the standard error of the difference between an
/// `m`-tick rate and the lead's [`PROBE_NOISE_TICKS`]-tick one, and at least `margin`.
fn probe_threshold(sigma: f64, m: u32, margin: f64) -> f64 {
    let se = sigma * (1.0 / f64::from(m) + 1.0 / PROBE_NOISE_TICKS as f64).sqrt();
    (2.0 * se).max(margin)
}

/// The candidate the probe settles on: the highest rate if it beats the `lead`'s by more than
/// `threshold` (a fraction), else the lead.
fn probe_choice(rates: &[f64], lead: usize, threshold: f64) -> usize {
    let best = (0..rates.len()).fold(lead, |b, i| if rates[i] > rates[b] { i } else { b });
    if rates[best] > rates[lead] * (1.0 + threshold) {
        best
    } else {
        lead
    }
}

/// When the early probe is repeated: this many times as long as the first one took after it
/// began (so that the two take at most about a fifth of the time by then, and the first decides
/// no more than the start of the run).
pub const REPROBE_AFTER: f64 = 10.0;

/// How many epochs the early probe's confirmation takes, alternately under the challenger (the
/// candidate whose one epoch beat the lead's rate by more than the noise allows, first) and
/// the lead: even, so that each is measured as often.
pub const CONFIRM_EPOCHS: usize = 6;

/// The ratios of each challenger epoch's rate to each neighbouring lead epoch's in the
/// confirmation's `series` (alternately challenger and lead, the challenger first): `series[k] /
/// series[k + 1]` for even `k`, `series[k + 1] / series[k]` for odd `k`. Each lead epoch is
/// compared with the challenger epochs on either side, half of the pairs with the lead first, so
/// that a rate that drifts over the confirmation favours neither; a pair with a lead epoch
/// without progress reads infinite, one with a challenger epoch without progress 0.
fn neighbour_ratios(series: &[f64]) -> Vec<f64> {
    series
        .windows(2)
        .enumerate()
        .map(|(k, w)| {
            let (challenger, lead) = if k % 2 == 0 { (w[0], w[1]) } else { (w[1], w[0]) };
            if lead > 0.0 {
                challenger / lead
            } else if challenger > 0.0 {
                f64::INFINITY
            } else {
                1.0
            }
        })
        .collect()
}

/// The confirmation's verdict on its neighbour `ratios` ([`neighbour_ratios`], sorted in place):
/// their median (the challenger's rate as a multiple of the lead's; 0 with no ratios), and
/// whether they keep the challenger: all of them, but at most one, above `1 + margin` (a single
/// epoch disturbed by another program, or by the program's own course, does not decide), and
/// their median above `1 + threshold` (the probe's bar). No ratios: not confirmed.
fn confirm(ratios: &mut [f64], threshold: f64, margin: f64) -> (f64, bool) {
    let ratio = median(ratios);
    let losses = ratios.iter().filter(|&&r| r.is_nan() || r <= 1.0 + margin).count();
    (ratio, !ratios.is_empty() && losses <= 1 && ratio > 1.0 + threshold)
}

/// What share of the best median rate a candidate must reach to stay in an exploration: after
/// its first round (a single epoch each, so only a wide gap counts), and after later rounds.
pub const KEEP_AFTER: (f64, f64) = (0.7, 0.9);

/// Leaves in the running (`alive`) the candidates whose median rate over the `rounds` rounds so
/// far is at least the [`KEEP_AFTER`] share of the best one's; a candidate not measured yet stays.
fn drop_the_clearly_worse(samples: &mut [Vec<f64>], alive: &mut [bool], rounds: usize) {
    let keep = if rounds <= 1 { KEEP_AFTER.0 } else { KEEP_AFTER.1 };
    let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
    let best = (0..medians.len()).filter(|&i| alive[i]).map(|i| medians[i]).fold(0.0, f64::max);
    for i in 0..alive.len() {
        if alive[i] && !samples[i].is_empty() && medians[i] < keep * best {
            alive[i] = false;
        }
    }
}

/// The candidate to settle on, given each one's median rate: the highest, unless it beats the
/// first by no more than `margin` (then the first).
fn choose(medians: &[f64], margin: f64) -> usize {
    let mut best = 0;
    for (i, &m) in medians.iter().enumerate() {
        if m > medians[best] {
            best = i;
        }
    }
    if medians[best] <= medians[0] * (1.0 + margin) {
        best = 0;
    }
    best
}

/// Whether an exploration can stop before its last round: every candidate still in the running
/// measured at least twice, and either the best one's slowest epoch beat every other one's
/// fastest (they are apart), or the first candidate is still in the running and no median beats
/// its by more than `margin` (a tie, which the first wins).
fn decided(samples: &mut [Vec<f64>], alive: &[bool], margin: f64) -> bool {
    let running: Vec<usize> = (0..alive.len()).filter(|&i| alive[i]).collect();
    if running.len() < 2 || running.iter().any(|&i| samples[i].len() < 2) {
        return false;
    }
    let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
    if alive[0] && running.iter().all(|&i| medians[i] <= medians[0] * (1.0 + margin)) {
        return true;
    }
    let best = running.iter().copied().fold(running[0], |b, i| if medians[i] > medians[b] { i } else { b });
    let slowest = samples[best].iter().copied().fold(f64::INFINITY, f64::min);
    running.iter().filter(|&&i| i != best).all(|&i| samples[i].iter().all(|&r| r < slowest))
}

/// What a re-check that chose `chosen` puts in force, `incumbent` being in force and `challenger`
/// what the re-check before chose over it (`None` if that one kept it), and the challenger after
/// it. Only two re-checks in a row that choose the same other candidate put it in force: an
/// exploration measures each candidate in a few epochs, and in a program whose rate swings over
/// longer stretches than an epoch (its groups of work, its start, its end) those can favour any
/// one of them. A re-check that chooses another than `incumbent` for the first time keeps
/// `incumbent` and is the new challenger's ([`AutoReason::Unconfirmed`]).
fn confirm_recheck(chosen: usize, incumbent: usize, challenger: Option<usize>) -> (usize, Option<usize>) {
    if chosen == incumbent || challenger == Some(chosen) {
        (chosen, None)
    } else {
        (incumbent, Some(chosen))
    }
}

/// The re-check's back-off after an exploration for `reason` that put `now` in force where
/// `before` was, its own medians choosing `own`: a re-check that keeps the policy doubles the
/// wait before the next (up to 64 times), unless its own medians chose another (the memory's
/// pooled rates outvoted them): that one doubts the choice, and the next re-check, soon,
/// settles it. Any other exploration (an unconfirmed re-check included: the next one confirms or
/// drops its choice) starts the wait over (1).
fn next_backoff(backoff: u32, reason: AutoReason, before: usize, now: usize, own: usize) -> u32 {
    match reason {
        AutoReason::Recheck if now == before && own == now => (backoff * 2).min(64),
        _ => 1,
    }
}

/// How many explorations a memory ([`Auto::remember`]) weighs together: the latest.
pub const REMEMBERED_EXPLORATIONS: usize = 5;

/// What a key of [`Auto::remember`] keeps, for one set of candidates (by name) and processor
/// count.
#[derive(Clone)]
struct Memory {
    key: Arc<str>,
    processors: usize,
    candidates: Vec<&'static str>,
    /// The unit of the explorations.
    unit: ProgressUnit,
    /// The latest explorations: each candidate's median as a fraction of that exploration's
    /// best (`None`: not measured), oldest first. Full explorations once there is one (`full`),
    /// the probes' before (a probe keeps the lead's rate and that of a challenger it alternated
    /// with, nothing else).
    explorations: Vec<Vec<Option<f64>>>,
    /// Whether `explorations` are full explorations rather than probes.
    full: bool,
    /// The candidate settled on last.
    choice: usize,
    /// The candidate the last re-check chose over `choice`, if it did ([`AutoReason::Unconfirmed`]).
    challenger: Option<usize>,
    /// The time under `choice` since the last exploration, summed over the runtimes.
    quiet: Duration,
    /// The re-check's back-off factor then.
    backoff: u32,
    /// The epoch's length then.
    span: Duration,
}

impl Memory {
    /// Adds an exploration's medians (`measured`: whether each candidate was measured) as
    /// fractions of the best measured one, keeping the latest [`REMEMBERED_EXPLORATIONS`]: the
    /// first `full` exploration forgets the probes before it, and a probe after it is not kept.
    fn add(&mut self, medians: &[f64], measured: &[bool], full: bool) {
        let best = medians.iter().zip(measured).filter(|(_, &ok)| ok).map(|(&r, _)| r).fold(0.0, f64::max);
        if best <= 0.0 || (self.full && !full) {
            return;
        }
        if full && !self.full {
            self.explorations.clear();
            self.full = true;
        }
        if self.explorations.len() == REMEMBERED_EXPLORATIONS {
            self.explorations.remove(0);
        }
        let relative = medians.iter().zip(measured).map(|(&r, &ok)| ok.then_some(r / best)).collect();
        self.explorations.push(relative);
    }

    /// Forgets every exploration (a phase change, a change of unit).
    fn forget(&mut self) {
        self.explorations.clear();
        self.full = false;
    }
}

/// Every memory of the process (one per key, candidates and processor count; never freed: a
/// program names few workloads).
static MEMORIES: Mutex<Vec<Memory>> = Mutex::new(Vec::new());

/// Each of `n` candidates' rate pooled over `explorations` (fractions of each one's best): the
/// median of its fractions where it was measured, 0 where it never was.
fn pool(explorations: &[Vec<Option<f64>>], n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let mut v: Vec<f64> = explorations.iter().filter_map(|e| e.get(i).copied().flatten()).collect();
            median(&mut v)
        })
        .collect()
}

/// The median of `v` (0 when empty).
fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Reports `n` units of the calling program's work (iterations, cells relaxed, requests
/// served): the `auto` policy then measures each candidate by these units per second instead
/// of by ULT runs (see [`policy::auto`](crate::policy::auto)). Cheap (an add to a counter of the
/// processor running the caller); outside a ULT it does nothing. Under a fixed policy the units
/// are only counted ([`ProcessorStats::progress`](crate::ProcessorStats::progress)).
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(1).build()?;
/// rt.block_on(|| {
///     for _ in 0..10 {
///         // ... one unit of work ...
///         elite_rt::progress(1);
///     }
/// });
/// assert_eq!(rt.stats().total().progress, 10);
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
#[inline]
pub fn progress(n: u64) {
    if let Some(p) = crate::slot::current_processor() {
        // Only code running on the processor's own thread adds: the counter's owner.
        p.remote().stats.progress.add(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_median_wins_by_more_than_the_margin() {
        assert_eq!(choose(&[100.0, 130.0, 90.0], 0.02), 1);
        assert_eq!(choose(&[100.0, 101.9, 90.0], 0.02), 0, "within the margin: the first");
        assert_eq!(choose(&[100.0, 102.1, 102.5], 0.02), 2);
        assert_eq!(choose(&[0.0, 0.0], 0.02), 0, "nothing measured: the first");
        assert_eq!(choose(&[100.0], 0.02), 0);
        let mut v = [3.0, 1.0, 2.0, 10.0];
        assert_eq!(median(&mut v), 2.5);
        assert_eq!(median(&mut [5.0, 1.0, 9.0]), 5.0);
        assert_eq!(median(&mut []), 0.0);
    }

    #[test]
    fn the_recording_policies_are_explored_only_with_the_locality_signal() {
        let signals = |hardware, declared, data| Signals {
            hardware,
            declared,
            smallest: declared,
            bar: 32 << 10,
            data,
        };
        for name in Policy::NAMES {
            let p: Policy = name.parse().unwrap();
            let first = name == "no-affinity";
            // A hardware counter, or a declaration above the first-level cache: every one, but
            // gravity without a data block.
            for s in [signals(true, 0, true), signals(false, 64 << 10, true)] {
                assert!(plausible(&p, &s), "{name}");
            }
            assert_eq!(plausible(&p, &signals(true, 0, false)), name != "gravity", "{name}");
            // Nothing declared, or only what fits in the first-level cache: the first only.
            for s in [signals(false, 0, true), signals(false, 1 << 10, true), signals(false, 32 << 10, true)]
            {
                assert_eq!(plausible(&p, &s), first, "{name}");
            }
        }
    }

    #[test]
    fn the_lead_is_reload_transient_where_it_can_order_otherwise_than_by_recency() {
        let all =
            [Policy::no_affinity(), Policy::virtual_time(), Policy::reload_transient(), Policy::gravity()];
        // Declarations of different sizes: reload-transient.
        let big =
            Signals { hardware: false, declared: 64 << 10, smallest: 1 << 10, bar: 32 << 10, data: false };
        assert_eq!(lead(&all, &big), Some(2));
        assert_eq!(lead(&all, &Signals { declared: 1 << 10, ..big }), None);
        assert_eq!(lead(&all, &Signals { declared: 0, smallest: 0, hardware: true, ..big }), Some(2));
        // All alike (within UNEVEN_DECLARATIONS times) and no counter: the estimator orders by
        // recency, so the first recording candidate, virtual-time, leads.
        let even = Signals { smallest: 40 << 10, ..big };
        assert_eq!(lead(&all, &even), Some(1));
        assert_eq!(lead(&all, &Signals { smallest: 32 << 10, ..big }), Some(1));
        assert_eq!(lead(&all, &Signals { smallest: (32 << 10) - 1, ..big }), Some(2));
        assert_eq!(lead(&all, &Signals { hardware: true, ..even }), Some(2));
        assert_eq!(lead(&[Policy::no_affinity(), Policy::reload_transient()], &even), Some(1));
        // Without reload-transient, the first recording candidate; never a custom one or the first.
        assert_eq!(lead(&[Policy::no_affinity(), Policy::virtual_time()], &big), Some(1));
        assert_eq!(lead(&[Policy::virtual_time(), Policy::no_affinity()], &big), None);
        assert_eq!(lead(&[Policy::no_affinity(), Policy::gravity()], &big), None, "gravity needs data");
        assert_eq!(lead(&[Policy::no_affinity()], &big), None);
    }

    #[test]
    fn the_probe_sizes_its_epochs_from_the_noise() {
        // Steady ticks: the spread is 0 and one tick resolves any difference.
        assert_eq!(relative_spread(&mut [100.0; 8]), Some(0.0));
        assert_eq!(probe_ticks(0.0), 1);
        // A single disturbed tick barely moves the spread (a median of deviations).
        let mut one_bad = [100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 10.0];
        assert_eq!(relative_spread(&mut one_bad), Some(0.0));
        // Half the ticks 10% off: a spread of about 7.4%, so the epochs grow.
        let mut uneven = [100.0, 110.0, 100.0, 110.0, 100.0, 110.0, 100.0, 110.0];
        let sigma = relative_spread(&mut uneven).unwrap();
        assert!((sigma - 1.4826 * 5.0 / 105.0).abs() < 1e-9, "{sigma}");
        // 2 sigma sqrt(2 / m) <= 5%: m >= 8 sigma^2 / 0.05^2.
        assert_eq!(probe_ticks(0.01), 1);
        assert_eq!(probe_ticks(0.02), 2); // (8 * 4e-4 / 2.5e-3 = 1.28)
        assert_eq!(probe_ticks(0.03), 3);
        assert_eq!(probe_ticks(0.5), PROBE_MAX_TICKS, "capped");
        assert_eq!(probe_ticks(f64::NAN), 1);
        // A tick without progress is one more disturbed tick; most of them without, an idle
        // program: no spread (it is not probed).
        assert_eq!(relative_spread(&mut [100.0, 0.0, 100.0]), Some(0.0));
        assert_eq!(relative_spread(&mut [0.0, 0.0, 100.0]), None);
        assert_eq!(relative_spread(&mut []), None);
    }

    #[test]
    fn the_probe_leaves_the_lead_only_for_a_gain_beyond_the_noise() {
        // Quiet: the bar is the margin.
        assert_eq!(probe_threshold(0.0, 1, 0.02), 0.02);
        // Noisy, with capped epochs: twice the standard error of the difference.
        let bar = probe_threshold(0.1, 8, 0.02);
        assert!((bar - 2.0 * 0.1 * (0.25f64).sqrt()).abs() < 1e-12, "{bar}");
        let rates = [100.0, 104.0, 112.0, 100.0, 0.0];
        assert_eq!(probe_choice(&rates, 3, 0.05), 2, "12% better than the lead");
        assert_eq!(probe_choice(&rates, 3, 0.15), 3, "within the bar: the lead stays");
        assert_eq!(probe_choice(&rates, 2, 0.02), 2, "the lead is the best");
        assert_eq!(probe_choice(&[0.0, 0.0, 0.0], 1, 0.02), 1, "nothing measured: the lead");
    }

    #[test]
    fn the_probe_keeps_a_challenger_only_if_it_beats_the_lead_in_turn() {
        let confirmed =
            |ratios: &[f64], threshold, margin| confirm(&mut ratios.to_vec(), threshold, margin).1;
        // Challenger and lead alternately, the challenger first: each lead epoch against the
        // challenger epochs on either side.
        let ratios = neighbour_ratios(&[120.0, 100.0, 110.0, 100.0, 130.0, 100.0]);
        let expected = [1.2, 1.1, 1.1, 1.3, 1.3];
        assert_eq!(ratios.len(), expected.len());
        for (r, e) in ratios.iter().zip(expected) {
            assert!((r - e).abs() < 1e-12, "{ratios:?}");
        }
        assert!(confirmed(&ratios, 0.1, 0.02), "a gain in every pair, the median beyond the bar");
        assert!(!confirmed(&ratios, 0.25, 0.02), "the median (1.2) within a bar of 25%");
        let (ratio, _) = confirm(&mut ratios.clone(), 0.1, 0.02);
        assert!((ratio - 1.2).abs() < 1e-12, "the median: the challenger's rate over the lead's");
        // A challenger whose one probe epoch fell on a fast stretch of the program (its start):
        // it beats the lead in one pair and loses or ties the others.
        let lucky = neighbour_ratios(&[200.0, 100.0, 100.0, 100.0, 98.0, 100.0]);
        assert!(!confirmed(&lucky, 0.05, 0.02), "{lucky:?}");
        // A rate that drifts upward over the confirmation favours neither: the lead's epochs
        // come later in half of the pairs.
        let drift = neighbour_ratios(&[100.0, 104.0, 108.0, 112.0, 116.0, 120.0]);
        assert!(!confirmed(&drift, 0.02, 0.02), "{drift:?}");
        // One disturbed epoch at the start (the challenger taking over from the probe's last
        // candidate) costs one pair: still kept.
        let settling = neighbour_ratios(&[80.0, 100.0, 120.0, 100.0, 120.0, 100.0]);
        assert!(confirmed(&settling, 0.1, 0.02), "{settling:?}");
        // A lead epoch without progress (the program paused) reads as a gain, a challenger's as
        // a loss; nothing measured confirms nothing.
        assert_eq!(neighbour_ratios(&[100.0, 0.0]), vec![f64::INFINITY]);
        assert_eq!(neighbour_ratios(&[0.0, 100.0]), vec![0.0]);
        assert_eq!(neighbour_ratios(&[0.0, 0.0]), vec![1.0]);
        assert_eq!(confirm(&mut [], 0.0, 0.0), (0.0, false));
        const { assert!(CONFIRM_EPOCHS.is_multiple_of(2) && CONFIRM_EPOCHS >= 4) };
    }

    #[test]
    fn a_phase_change_is_three_epochs_away_from_the_settled_rate() {
        let mut w = PhaseWatch::new(ProgressUnit::Runs, 0.3);
        // Settling: the median of the first three (100).
        for r in [90.0, 100.0, 140.0] {
            assert_eq!(w.observe(r, ProgressUnit::Runs), Watched::Steady);
        }
        // Within 30%, then two away and one back: steady.
        for r in [125.0, 75.0, 140.0, 60.0, 100.0, 110.0] {
            assert_eq!(w.observe(r, ProgressUnit::Runs), Watched::Steady, "{r}");
        }
        // Three away in a row, either way: a phase change, then settling again from scratch.
        assert_eq!(w.observe(200.0, ProgressUnit::Runs), Watched::Steady);
        assert_eq!(w.observe(50.0, ProgressUnit::Runs), Watched::Steady);
        assert_eq!(w.observe(200.0, ProgressUnit::Runs), Watched::PhaseChange);
        for r in [200.0, 210.0, 190.0, 220.0, 180.0] {
            assert_eq!(w.observe(r, ProgressUnit::Runs), Watched::Steady, "settled at 200: {r}");
        }
    }

    #[test]
    fn a_change_of_unit_restarts_the_watch_and_is_no_phase_change() {
        // Runs counted at about 1e6/s, then the program reports its own units at about 1e3/s:
        // every rate from then on is 99.9% "away" from the settled rate in runs.
        let mut w = PhaseWatch::new(ProgressUnit::Runs, 0.3);
        for _ in 0..5 {
            assert_eq!(w.observe(1e6, ProgressUnit::Runs), Watched::Steady);
        }
        for k in 0..10 {
            let r = 1e3 + f64::from(k);
            assert_eq!(w.observe(r, ProgressUnit::Reported), Watched::Steady, "epoch {k} in units");
        }
        // ... and the watch settled on the units: a real change in them is still seen.
        let seen: Vec<Watched> = (0..3).map(|_| w.observe(5e3, ProgressUnit::Reported)).collect();
        assert_eq!(seen, [Watched::Steady, Watched::Steady, Watched::PhaseChange]);
    }

    #[test]
    fn explorations_take_at_most_their_share_of_the_run() {
        let ms = Duration::from_millis;
        // A probe of 100 ms, then a phase change 650 ms into the run: another 100 ms would make
        // explorations 200 of 750 ms, over a 10% share.
        assert!(!affordable(ms(100), ms(650), ms(100), 0.1));
        // Once the run is long enough: 200 of 2100 ms.
        assert!(affordable(ms(100), ms(2000), ms(100), 0.1));
        assert!(!affordable(ms(100), ms(1800), ms(100), 0.1));
        // Nothing explored yet: an exploration of a tenth of the run is allowed at a 10% share.
        assert!(affordable(Duration::ZERO, ms(1000), ms(100), 0.1));
        assert!(!affordable(Duration::ZERO, ms(100), ms(100), 0.1));
        // A share of 100% (the largest budget) always allows one (explorations are part of the run).
        assert!(affordable(ms(500), ms(600), ms(100), 1.0));
    }

    #[test]
    fn the_default_candidates_are_every_fixed_policy() {
        let names: Vec<&str> = Auto::new().candidate_policies().iter().map(Policy::name).collect();
        assert_eq!(names, Policy::NAMES);
    }

    #[test]
    fn the_clearly_worse_drop_out_of_an_exploration() {
        let mut samples = vec![vec![100.0], vec![69.0], vec![71.0], vec![]];
        let mut alive = vec![true; 4];
        drop_the_clearly_worse(&mut samples, &mut alive, 1);
        assert_eq!(alive, [true, false, true, true], "after one round: below 70% of the best");
        samples[2].push(80.0); // median 75.5
        samples[0].push(100.0);
        samples[3].push(95.0);
        drop_the_clearly_worse(&mut samples, &mut alive, 2);
        assert_eq!(alive, [true, false, false, true], "after two: below 90%");
        // The dropped do not count for the best.
        let mut samples = vec![vec![50.0, 50.0], vec![1000.0, 1000.0]];
        let mut alive = vec![true, false];
        drop_the_clearly_worse(&mut samples, &mut alive, 2);
        assert_eq!(alive, [true, false]);
    }

    #[test]
    fn an_exploration_stops_early_when_apart_or_tied() {
        let margin = 0.02;
        // One round each: never decided.
        assert!(!decided(&mut [vec![100.0], vec![150.0]], &[true, true], margin));
        // Apart: the best's slowest epoch beats every other's fastest.
        let mut apart = vec![vec![100.0, 104.0], vec![120.0, 125.0], vec![90.0, 99.0]];
        assert!(decided(&mut apart, &[true, true, true], margin));
        // Overlapping, and not a tie: measure on.
        let mut overlap = vec![vec![100.0, 121.0], vec![120.0, 125.0]];
        assert!(!decided(&mut overlap, &[true, true], margin));
        // A tie with the first: no median beats its by more than the margin.
        let mut tie = vec![vec![100.0, 110.0], vec![104.0, 107.0], vec![80.0, 120.0]];
        assert!(decided(&mut tie, &[true, true, true], margin));
        // ... but not when the first has dropped out (the others overlap).
        let mut tie = vec![vec![10.0, 11.0], vec![104.0, 107.0], vec![100.0, 110.0]];
        assert!(!decided(&mut tie, &[false, true, true], margin));
        // The dropped do not count, and a candidate in the running with one epoch only waits.
        let mut dropped = vec![vec![100.0, 100.0], vec![200.0, 60.0], vec![120.0, 121.0]];
        assert!(decided(&mut dropped, &[true, false, true], margin));
        let mut short = vec![vec![100.0, 100.0], vec![300.0]];
        assert!(!decided(&mut short, &[true, true], margin));
    }

    #[test]
    fn remembered_explorations_are_pooled_by_median_fraction() {
        let explorations = vec![
            vec![Some(1.0), Some(0.8), None],
            vec![Some(0.9), Some(1.0), Some(0.5)],
            vec![Some(0.95), Some(1.0), None],
        ];
        assert_eq!(pool(&explorations, 3), [0.95, 1.0, 0.5]);
        // Never measured: 0; fewer explorations than candidates' slots: the same.
        assert_eq!(pool(&[vec![Some(1.0)]], 2), [1.0, 0.0]);
        assert_eq!(pool(&[], 2), [0.0, 0.0]);
        // A single noisy exploration is outvoted by the others.
        let noisy =
            vec![vec![Some(1.0), Some(0.9)], vec![Some(0.85), Some(1.0)], vec![Some(0.88), Some(1.0)]];
        assert_eq!(choose(&pool(&noisy, 2), 0.02), 1);
    }

    fn empty_memory() -> Memory {
        Memory {
            key: Arc::from("k"),
            processors: 2,
            candidates: vec!["a", "b", "c"],
            unit: ProgressUnit::Runs,
            explorations: Vec::new(),
            full: false,
            choice: 0,
            challenger: None,
            quiet: Duration::ZERO,
            backoff: 1,
            span: Duration::from_millis(5),
        }
    }

    /// A probe's single epochs are pooled only until the first full exploration, which forgets
    /// them; a probe after it adds nothing; the fractions are of the best *measured* rate.
    #[test]
    fn a_full_exploration_outranks_the_probes() {
        let mut m = empty_memory();
        // A probe that kept the lead (0) but read candidate 2 higher in one epoch: only the
        // measured rates count, so 2's unmeasured 50 is no one's best.
        m.add(&[40.0, 0.0, 50.0], &[true, false, false], false);
        assert_eq!(m.explorations, [vec![Some(1.0), None, None]]);
        m.add(&[30.0, 45.0, 0.0], &[true, true, false], false);
        assert_eq!(pool(&m.explorations, 3), [(1.0 + 30.0 / 45.0) / 2.0, 1.0, 0.0]);
        // The first full exploration: the probes are gone, it alone decides.
        m.add(&[90.0, 100.0, 80.0], &[true, true, true], true);
        assert!(m.full && m.explorations.len() == 1);
        assert_eq!(pool(&m.explorations, 3), [0.9, 1.0, 0.8]);
        // A later probe is not kept; a later full exploration is pooled with the first.
        m.add(&[100.0, 10.0, 0.0], &[true, true, false], false);
        assert_eq!(m.explorations.len(), 1);
        m.add(&[100.0, 95.0, 70.0], &[true, true, true], true);
        assert_eq!(m.explorations.len(), 2);
        // Nothing measured above 0: nothing kept.
        m.add(&[0.0, 0.0, 0.0], &[true, true, true], true);
        assert_eq!(m.explorations.len(), 2);
        // At most the latest REMEMBERED_EXPLORATIONS.
        for _ in 0..REMEMBERED_EXPLORATIONS {
            m.add(&[1.0, 2.0, 3.0], &[true, true, true], true);
        }
        assert_eq!(m.explorations.len(), REMEMBERED_EXPLORATIONS);
        assert_eq!(choose(&pool(&m.explorations, 3), 0.02), 2);
    }

    /// A re-check leaves the policy in force only for the candidate the re-check before chose.
    #[test]
    fn a_recheck_leaves_the_policy_only_when_the_one_before_agrees() {
        // Virtual-time (1) in force: a re-check that keeps it has nothing to confirm.
        assert_eq!(confirm_recheck(1, 1, None), (1, None));
        // One that chooses no-affinity (0) keeps virtual-time; the next that chooses it again
        // puts it in force.
        assert_eq!(confirm_recheck(0, 1, None), (1, Some(0)));
        assert_eq!(confirm_recheck(0, 1, Some(0)), (0, None));
        // One that chooses another challenger starts over with it; one that chooses the
        // candidate in force drops the challenger.
        assert_eq!(confirm_recheck(3, 1, Some(0)), (1, Some(3)));
        assert_eq!(confirm_recheck(1, 1, Some(3)), (1, None));
        assert_eq!(confirm_recheck(3, 1, None), (1, Some(3)));
        // The re-check's back-off starts over after an unconfirmed one (the next one is soon).
        assert_eq!(next_backoff(8, AutoReason::Unconfirmed, 1, 1, 0), 1);
    }

    /// A re-check doubles the wait only when it kept the policy *and* its own medians agreed.
    #[test]
    fn a_recheck_that_doubts_the_memory_does_not_back_off() {
        assert_eq!(next_backoff(4, AutoReason::Recheck, 1, 1, 1), 8);
        assert_eq!(next_backoff(64, AutoReason::Recheck, 1, 1, 1), 64);
        // Kept by the pooled rates, but its own medians chose 0: the next re-check comes soon.
        assert_eq!(next_backoff(4, AutoReason::Recheck, 1, 1, 0), 1);
        // Moved, or another reason: start over.
        assert_eq!(next_backoff(4, AutoReason::Recheck, 1, 0, 0), 1);
        assert_eq!(next_backoff(4, AutoReason::PhaseChange, 1, 1, 1), 1);
    }

    /// A runtime of 2 processors under `auto` on a topology with a 32 KiB first-level cache and
    /// no hardware counter.
    fn runtime_under_auto() -> crate::Runtime {
        crate::Runtime::builder()
            .processors(2)
            .no_chaos()
            .counters(crate::CounterChoice::Estimated)
            .topology("1 node x 2 cores, 32 KiB L1d per core, 512 KiB L2 per core")
            .policy(Policy::auto())
            .build()
            .expect("a runtime")
    }

    /// Busy ULTs (each yielding, declaring `footprint` bytes) until `stop`; their joiner.
    fn busy(
        rt: &crate::Runtime,
        footprint: Option<usize>,
        stop: &Arc<std::sync::atomic::AtomicBool>,
    ) -> crate::JoinHandle<()> {
        use std::sync::atomic::Ordering::SeqCst;
        let stop = Arc::clone(stop);
        rt.spawn(move || {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    let stop = Arc::clone(&stop);
                    let b = crate::Builder::new();
                    let b = match footprint {
                        Some(bytes) => b.footprint(bytes),
                        None => b,
                    };
                    b.spawn(move || {
                        while !stop.load(SeqCst) {
                            crate::yield_now();
                        }
                    })
                    .expect("a spawn")
                })
                .collect();
            workers.into_iter().for_each(|w| w.join().expect("a worker"));
        })
    }

    /// Without the locality signal there is nothing to compare, so the selector does not wake
    /// to measure epochs while the program runs (on a 2-core machine each wake-up takes a CPU
    /// from a processor); a declaration that brings the signal later wakes it at once.
    #[test]
    #[cfg_attr(miri, ignore = "builds a runtime: stacks and processors cannot run under Miri")]
    fn without_anything_to_measure_the_selector_sleeps_until_a_declaration() {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        let rt = runtime_under_auto();
        let stop = Arc::new(AtomicBool::new(false));
        let h = busy(&rt, None, &stop);
        let t0 = Instant::now();
        while rt.stats().total().switches < 1000 && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Busy for a while: measuring, 5 ms epochs would have woken the selector a dozen times.
        std::thread::sleep(Duration::from_millis(100));
        // (At most the budget's re-checks, 1.7 s apart and then twice as far each time, on a
        // machine slow enough to take that long.)
        let looks = rt.auto_looks();
        assert!(looks <= 3, "the selector woke {looks} times with nothing to measure");
        // A footprint larger than the first-level cache, declared now: the lead at once.
        let late = busy(&rt, Some(64 << 10), &stop);
        let t0 = Instant::now();
        while !rt.stats().auto.iter().any(|d| d.reason == AutoReason::Locality) {
            assert!(t0.elapsed() < Duration::from_secs(30), "no lead: {}", rt.stats());
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, SeqCst);
        h.join().expect("the busy ULTs");
        late.join().expect("the late ULTs");
        // (Every declaration alike, 64 KiB: the recency order's virtual-time leads.)
        assert_eq!(rt.stats().auto[1].policy, "virtual-time");
    }

    #[test]
    fn settings_out_of_range_say_which_and_why() {
        let e = Auto::new().remember("").unwrap_err();
        assert_eq!(e.to_string(), "auto remember: a key of 0 bytes, expected 1..=256");
        assert!(Auto::new().remember("k".repeat(257)).is_err());
        assert_eq!(Auto::new().remember("k".repeat(256)).unwrap().memory_key().map(str::len), Some(256));
        assert_eq!(Auto::new().memory_key(), None);
        let e = Auto::new().candidates([]).unwrap_err();
        assert_eq!(e.to_string(), "auto candidates: 0 given, expected 1..=16");
        let e = Auto::new().candidates([Policy::auto()]).unwrap_err();
        assert!(e.to_string().contains("`auto` cannot be one of its own candidates"), "{e}");
        let e = Auto::new().epoch(Duration::from_micros(999)).unwrap_err();
        assert_eq!(e.to_string(), "auto epoch: 999µs is out of range, expected 1ms..=10s");
        assert!(Auto::new().rounds(0).is_err() && Auto::new().rounds(16).is_err());
        assert!(Auto::new().margin(-0.1).is_err() && Auto::new().margin(f64::NAN).is_err());
        assert!(Auto::new().phase_change(0.0).is_err() && Auto::new().budget(0.6).is_err());
        assert!(Auto::new().budget(f64::NAN).is_err());
        let ok = Auto::new().rounds(15).and_then(|a| a.budget(0.5)).and_then(|a| a.margin(0.0));
        assert!(ok.is_ok());
    }

    /// The budget's re-check comes once the time under the choice, this runtime's and the
    /// credit from the runtimes before, reaches the wait; a warm start's (with credit) not
    /// before this runtime ran for one exploration's length.
    #[test]
    fn a_warm_starts_recheck_waits_for_one_exploration_of_its_own_runtime() {
        let ms = Duration::from_millis;
        let (quiet, exploration) = (ms(1900), ms(100));
        // Cold: the wait alone decides.
        assert!(!recheck_due(ms(1899), Duration::ZERO, quiet, exploration));
        assert!(recheck_due(ms(1900), Duration::ZERO, quiet, exploration));
        // Warm, the credit short of the wait: the rest of the wait decides.
        assert!(!recheck_due(ms(899), ms(1000), quiet, exploration));
        assert!(recheck_due(ms(900), ms(1000), quiet, exploration));
        // Warm, the credit past the wait: not at the runtime's start, after one exploration.
        assert!(!recheck_due(Duration::ZERO, ms(5000), quiet, exploration));
        assert!(!recheck_due(ms(99), ms(5000), quiet, exploration));
        assert!(recheck_due(ms(100), ms(5000), quiet, exploration));
    }
}
