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
//! A thread of the runtime (the *selector*) works in epochs of [`Auto::epoch`] (default 5 ms):
//!
//! 1. **Explore.** It puts each candidate ([`Auto::candidates`]; default `no-affinity`,
//!    `virtual-time`, `reload-transient`, `gravity`) in force in turn with
//!    [`Runtime::set_policy`](crate::Runtime::set_policy), lets the processors take it up and
//!    settle for a fifth of an epoch, then measures the *progress rate* over one epoch. It goes
//!    round the candidates [`Auto::rounds`] times (default 3), each round starting one candidate
//!    later, so that a drift of the machine's speed (other programs, frequency) falls on every
//!    candidate alike.
//! 2. **Settle.** The candidate with the highest median rate is put in force, unless it beats
//!    the first candidate (the cheapest, `no-affinity` by default) by less than
//!    [`Auto::margin`] (default 2%): a difference that small is within the noise of a few
//!    epochs, and the first candidate costs least when the others gain nothing.
//! 3. **Watch.** It goes on measuring one epoch at a time. When the rate moves away from the
//!    settled rate (the median of the first epochs after settling) by more than
//!    [`Auto::phase_change`] (default 30%, either way) for 3 epochs in a row, the workload
//!    changed phase: back to 1. Independently, it explores again after
//!    [`Auto::recheck`] epochs (default 200), and the wait doubles each time a re-check keeps
//!    the same policy (up to 64 times the first), so a steady program pays for exploring less
//!    and less often.
//!
//! Every decision is kept ([`RuntimeStats::auto`](crate::RuntimeStats::auto), the last
//! [`DECISIONS_KEPT`]): when, which policy, why, and the median rate measured for each
//! candidate.
//!
//! The *progress* is, by default, the ULT runs that ended (switches out of ULTs, over all
//! processors) per second of wall-clock time. A program that counts its own units of work with
//! [`progress`](crate::progress) (iterations, cells relaxed, requests served) is measured in
//! those instead, from the first unit reported on.
//!
//! # Where it can be fooled
//!
//! * **Runs are not work.** A policy that makes ULTs run more often for the same work (more
//!   yields, shorter runs between blocks, a lock handed back and forth) scores higher on runs
//!   per second. Report real units with [`progress`](crate::progress) where runs and work
//!   differ.
//! * **Idle time counts against a policy.** Rates are per wall-clock second: a program that
//!   waits (on I/O, on timers, on a thread outside the runtime) for part of an epoch measures
//!   low in it, whatever the policy. Epochs with no progress at all are measured again, but a
//!   half-idle epoch is not told apart.
//! * **Short programs.** Exploring takes `candidates × rounds × 1.2 × epoch` (60 ms by default),
//!   three quarters of it under policies that are not the best; a program that runs for a few
//!   tenths of a second pays a visible share of that, and one shorter than an exploration runs
//!   mostly under whichever candidate the selector is trying.
//! * **Effects longer than an epoch.** A policy whose benefit builds up over many epochs (a
//!   placement that gathers ULTs, as `gravity` does, and survives a switch away) is credited
//!   partly to whichever candidate follows it; the rotation of the order spreads that credit,
//!   the median discards the extreme epochs, but neither removes it.
//! * **Noise.** On a shared machine an epoch can lose a few milliseconds to another program; the
//!   median of the rounds and the margin keep a single bad epoch from deciding, not a sustained
//!   disturbance during one candidate's epochs. Longer epochs ([`Auto::epoch`]) and more rounds
//!   trade exploration time for steadier choices.
//! * **A phase shorter than the watch.** A change of workload that lasts less than three epochs
//!   is not seen; one that keeps alternating faster than an exploration makes every choice
//!   stale.

use super::Policy;
use crate::runtime::Shared;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// How many decisions [`RuntimeStats::auto`](crate::RuntimeStats::auto) keeps (the newest).
pub const DECISIONS_KEPT: usize = 256;

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
///     .rounds(5)?;
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
    recheck: u32,
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
    /// The default settings: candidates `no-affinity`, `virtual-time`, `reload-transient`,
    /// `gravity`; epochs of 5 ms; 3 rounds; a margin of 2%; a phase change at 30%; a re-check
    /// after 200 epochs.
    pub fn new() -> Auto {
        Auto {
            candidates: vec![
                Policy::no_affinity(),
                Policy::virtual_time(),
                Policy::reload_transient(),
                Policy::gravity(),
            ],
            epoch: Duration::from_millis(5),
            rounds: 3,
            margin: 0.02,
            phase_change: 0.3,
            recheck: 200,
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

    /// The length of an epoch, the time each measurement takes: 1 ms to 10 s.
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

    /// Epochs after settling before the first re-check (doubling after each re-check that keeps
    /// the policy, up to 64 times this): 1 to 1 000 000.
    pub fn recheck(mut self, epochs: u32) -> Result<Auto, AutoError> {
        if !(1..=1_000_000).contains(&epochs) {
            return refuse(format!("auto recheck: {epochs} is out of range, expected 1..=1000000"));
        }
        self.recheck = epochs;
        Ok(self)
    }

    /// The candidates, the first put in force at start.
    pub fn candidate_policies(&self) -> &[Policy] {
        &self.candidates
    }
}

/// Why `auto` put a policy in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AutoReason {
    /// The first candidate, at start, before any measurement.
    Start,
    /// The best of the first exploration.
    Explored,
    /// The best of an exploration started because the rate moved (a phase change).
    PhaseChange,
    /// The best of a periodic re-check.
    Recheck,
}

impl fmt::Display for AutoReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AutoReason::Start => "start",
            AutoReason::Explored => "explored",
            AutoReason::PhaseChange => "phase change",
            AutoReason::Recheck => "re-check",
        })
    }
}

/// What `auto` progress is counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProgressUnit {
    /// ULT runs that ended (switches out of ULTs).
    Runs,
    /// Units the program reported with [`progress`](crate::progress).
    Reported,
}

impl fmt::Display for ProgressUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProgressUnit::Runs => "runs",
            ProgressUnit::Reported => "units",
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
    /// order of the candidates; empty for [`AutoReason::Start`].
    pub rates: Vec<(&'static str, f64)>,
    /// How long the exploration took.
    pub explored_for: Duration,
}

impl fmt::Display for AutoDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>9.3} s  {:<16} ({})", self.at.as_secs_f64(), self.policy, self.reason)?;
        if !self.rates.is_empty() {
            write!(f, " after {:.0} ms:", self.explored_for.as_secs_f64() * 1e3)?;
            for (name, rate) in &self.rates {
                write!(f, " {name} {rate:.4e}")?;
            }
            write!(f, " {}/s", self.unit)?;
        }
        Ok(())
    }
}

/// A running selector: its thread, the flag that stops it, and the decisions it made.
pub(crate) struct Selector {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The decisions of the runtime's selectors (kept across a stop and a restart).
#[derive(Default)]
pub(crate) struct Log {
    decisions: Mutex<Vec<AutoDecision>>,
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
}

impl Selector {
    /// Starts a selector on `shared` with `auto`'s settings, after its first candidate was put in
    /// force. It holds `shared` weakly: the runtime stops it before shutting down.
    pub(crate) fn start(shared: &Arc<Shared>, auto: &Auto, log: Arc<Log>) -> std::io::Result<Selector> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let (weak, settings, flag) = (Arc::downgrade(shared), auto.clone(), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("elite-auto".into())
            .spawn(move || Run::new(weak, settings, flag, log).run())?;
        Ok(Selector { stop, thread: Some(thread) })
    }

    /// Stops the selector and waits for its thread (at most one epoch's wait).
    pub(crate) fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
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
    stop: Arc<(Mutex<bool>, Condvar)>,
    log: Arc<Log>,
    began: Instant,
    /// Whether any unit was reported with `progress` (then rates are in those).
    reported: bool,
}

/// A count of progress at an instant.
#[derive(Clone, Copy)]
struct Mark {
    at: Instant,
    runs: u64,
    units: u64,
}

impl Run {
    fn new(shared: Weak<Shared>, auto: Auto, stop: Arc<(Mutex<bool>, Condvar)>, log: Arc<Log>) -> Run {
        Run { shared, auto, stop, log, began: Instant::now(), reported: false }
    }

    /// Waits `d`; false when told to stop (or the runtime is gone).
    fn wait(&self, d: Duration) -> bool {
        let (flag, wake) = &*self.stop;
        let deadline = Instant::now() + d;
        let mut stopped = flag.lock().unwrap_or_else(|e| e.into_inner());
        while !*stopped {
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            stopped = wake.wait_timeout(stopped, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        false
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

    /// One epoch under what is in force: its rate (`None` on a stop, or with no progress).
    fn measure(&mut self, settle: bool) -> Result<Option<f64>, ()> {
        if settle && !self.wait(self.auto.epoch / 5) {
            return Err(());
        }
        let a = self.mark().ok_or(())?;
        if !self.wait(self.auto.epoch) {
            return Err(());
        }
        let b = self.mark().ok_or(())?;
        Ok(self.rate(a, b))
    }

    /// Explores every candidate, puts the best in force and logs why; its index and median rate.
    fn explore(&mut self, reason: AutoReason) -> Result<(usize, f64), ()> {
        let n = self.auto.candidates.len();
        let started = Instant::now();
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut unit = self.unit();
        let mut round = 0;
        while round < self.auto.rounds as usize {
            let mut measured = 0;
            for k in 0..n {
                let i = (k + round) % n;
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
                round = 0;
                continue;
            }
            if measured == 0 {
                // Nothing progressed in a whole round (an idle program): wait for progress
                // under what is in force rather than switching on.
                while self.measure(false)?.is_none() {}
                continue;
            }
            round += 1;
        }
        let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
        let mut best = 0;
        for (i, &m) in medians.iter().enumerate() {
            if m > medians[best] {
                best = i;
            }
        }
        if medians[best] <= medians[0] * (1.0 + self.auto.margin) {
            best = 0;
        }
        if !self.put_in_force(best) {
            return Err(());
        }
        let names = self.auto.candidates.iter().map(Policy::name);
        self.log.push(AutoDecision {
            at: self.began.elapsed(),
            policy: self.auto.candidates[best].name(),
            reason,
            unit: self.unit(),
            rates: names.zip(medians.iter().copied()).collect(),
            explored_for: started.elapsed(),
        });
        Ok((best, medians[best]))
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

    /// Explore, settle, watch; until stopped.
    fn select(&mut self) -> Result<(), ()> {
        let (mut reason, mut recheck, mut last) = (AutoReason::Explored, self.auto.recheck, None);
        loop {
            let (best, _) = self.explore(reason)?;
            // A re-check that kept the policy: wait twice as long for the next one.
            recheck = match (reason, last) {
                (AutoReason::Recheck, Some(l)) if l == best => {
                    recheck.saturating_mul(2).min(self.auto.recheck.saturating_mul(64))
                }
                _ => self.auto.recheck,
            };
            last = Some(best);
            reason = self.watch(recheck)?;
        }
    }

    /// Measures epoch after epoch under the settled policy until the rate moves away from the
    /// settled rate (the median of the first 3 epochs) by more than the phase-change fraction
    /// for 3 epochs in a row, or `recheck` epochs passed: the reason to explore again.
    fn watch(&mut self, recheck: u32) -> Result<AutoReason, ()> {
        let unit = self.unit();
        let mut first = Vec::with_capacity(3);
        let (mut epochs, mut away, mut settled) = (0u32, 0, 0.0);
        loop {
            let Some(rate) = self.measure(false)? else { continue };
            epochs += 1;
            if self.unit() != unit {
                return Ok(AutoReason::PhaseChange); // (now counted in the program's units)
            }
            if first.len() < 3 {
                first.push(rate);
                if first.len() == 3 {
                    settled = median(&mut first);
                }
                continue;
            }
            if (rate - settled).abs() > self.auto.phase_change * settled {
                away += 1;
                if away >= 3 {
                    return Ok(AutoReason::PhaseChange);
                }
            } else {
                away = 0;
            }
            if epochs >= recheck {
                return Ok(AutoReason::Recheck);
            }
        }
    }
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
