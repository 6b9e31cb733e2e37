//! Steal trials: a thief that keeps stealing finds out, by measuring, whether its steals make
//! the runtime progress faster, and stops stealing for a while when they do not.
//!
//! # The problem
//!
//! Stealing assumes that a ready ULT run by an idle processor is work done in parallel. For
//! ULTs that run briefly and talk to a ULT on the victim (workers sending requests to a
//! server and waiting for each reply, Savina's concurrent dictionary), a stolen ULT runs
//! a few hundred nanoseconds, its message and its reply cross between the cores, and at its
//! next wake-up it follows its waker back to the victim, where the thief, idle again, steals
//! the next one. Each such steal moves a control block, a stack top, a channel's lines and the
//! victim's runqueue lock across, and slows the victim down more than the thief's run gained
//! (`elite-bench places`' `concdict` ran several times slower on two processors than on one).
//! Nothing the thief sees of a single steal tells this apart from a worker pool whose short
//! runs do pay (`elite-bench affinity`'s `no_locality`, faster on two processors than on
//! one): the difference is only in the rate of the whole.
//!
//! # The trial
//!
//! So the processor measures it. Progress is the runtime's ULT runs that ended in a block or
//! an exit (every processor's switches less its yields), read from the counters at a thief's
//! idle steps; an idle step happens only when the processor ran out of work, so a processor
//! busy with its own ULTs pays nothing.
//!
//! 1. **Watching.** The idle steps count this processor's steals over a window of at least
//!    [`WINDOW`]. A window that saw at least [`CHURN_STEALS`] steals, and ended within
//!    [`WINDOW_LONGEST`] (a processor that steals now and then from a long busy stretch is
//!    not churning), gives the rate of progress *with* stealing, and the trial starts.
//! 2. **Trial.** The processor stops stealing for as long as the window lasted (runs only
//!    work sent to it, parks otherwise), and measures the rate *without* its steals.
//! 3. **Verdict.** If the rate without is at least [`PAYS_BY`] below the rate with, stealing
//!    pays: the processor steals as before and starts no trial for a cool-down of
//!    [`COOL_FIRST`] trials' lengths, doubled at each verdict in a row that stealing pays, up
//!    to [`COOL_MAX`] (a trial costs at most its own length of this processor's help, so the
//!    cost of trials where stealing pays is bounded by the inverse of the cool-down). Otherwise
//!    it **holds**: it does not steal for [`HOLD_FIRST`], doubled at each such verdict in a
//!    row up to [`HOLD_MAX`], then watches again (the next churning window starts another
//!    trial).
//!
//! While it holds or tries, an idle processor parks for at most the watch period of stranded
//! ULTs (`find`, "Stranded ULTs") and rescues those as before: a ready ULT waiting behind a
//! long run is not churn. A start-queue entry anywhere (a never-started ULT: new work, often a
//! new parallel phase) ends a hold at the processor's next idle step (a trial runs to its end,
//! at most [`WINDOW_LONGEST`], parked like a hold): a spawn's notification
//! passes a parked holder by, as it passes a processor pausing its stealing
//! (`Idle::notify_one`), so the holder sees the entry when its park ends, within the watch
//! period (2 ms at most).
//!
//! The trial's time constants are measurement windows, not tuned costs: long enough that the
//! rates count hundreds of runs at the rates where churn costs anything (a run of a microsecond
//! or less), short next to what a hold saves. The verdict itself is a measurement on the host
//! it runs on.
//!
//! # Where it can be fooled
//!
//! A program whose useful work does not end runs (a ULT that loops without blocking) reads as no
//! progress either way: no verdict moves it (equal rates hold, and a held processor still runs
//! what is sent to it, and is woken by new work). A program that spawns its parallel phases
//! ends holds at each spawn. Ready ULTs that become stealable during a hold without a spawn (a
//! barrier releasing many long runs at once) wait for the hold to end, at most [`HOLD_MAX`],
//! or for the watch period's rescue when they are stranded in a `next` slot.

use std::time::{Duration, Instant};

/// The shortest watching window.
const WINDOW: Duration = Duration::from_micros(100);

/// A window longer than this when an idle step closes it says the processor was busy, not
/// churning: no trial.
const WINDOW_LONGEST: Duration = Duration::from_micros(800);

/// Steals in a window that start a trial.
const CHURN_STEALS: u32 = 8;

/// Stealing pays when the rate without it is lower by at least this share of the rate with it.
const PAYS_BY: f64 = 0.03;

/// The first hold.
const HOLD_FIRST: Duration = Duration::from_millis(1);

/// The longest hold.
const HOLD_MAX: Duration = Duration::from_millis(16);

/// The first cool-down after stealing paid, in trial lengths.
const COOL_FIRST: u32 = 16;

/// The longest cool-down, in trial lengths.
const COOL_MAX: u32 = 1024;

/// What an idle step does about stealing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Steal as usual.
    Steal,
    /// No stealing until this instant (a trial or a hold): park for it.
    Wait(Instant),
}

/// What a verdict decided, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Stealing paid.
    Pays,
    /// Stealing did not pay: a hold began.
    Holds,
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// Counting steals since `since`, when progress was `progress`.
    Watching { since: Instant, progress: u64 },
    /// No steals from `since` (progress `progress`) to `until`; the rate with steals was
    /// `with` (runs per second).
    Trying { since: Instant, progress: u64, until: Instant, with: f64 },
    /// No steals until `until`.
    Holding { until: Instant },
}

/// A processor's steal trials (module docs), in its `Core`.
pub(crate) struct StealTrials {
    state: State,
    /// Steals since the window began.
    steals: u32,
    /// No trial before this instant.
    cool_until: Option<Instant>,
    /// The next hold's length.
    hold: Duration,
    /// The next cool-down, in trial lengths.
    cool: u32,
}

impl StealTrials {
    /// Trials of a processor made at `now`, before any ULT ran (progress 0).
    pub(crate) fn new(now: Instant) -> StealTrials {
        StealTrials {
            state: State::Watching { since: now, progress: 0 },
            steals: 0,
            cool_until: None,
            hold: HOLD_FIRST,
            cool: COOL_FIRST,
        }
    }

    /// Whether steals are off now (a trial or a hold).
    #[inline]
    pub(crate) fn blocked(&self) -> bool {
        !matches!(self.state, State::Watching { .. })
    }

    /// Whether a hold is on (which new work ends: [`StealTrials::new_work`]).
    pub(crate) fn holding(&self) -> bool {
        matches!(self.state, State::Holding { .. })
    }

    /// Holds from `now` for `length`, as a verdict would (tests).
    #[cfg(test)]
    pub(crate) fn hold_for(&mut self, now: Instant, length: Duration) {
        self.state = State::Holding { until: now + length };
    }

    /// Tries from `now` until `length` later, as a churning window would start it (tests).
    #[cfg(test)]
    pub(crate) fn try_for(&mut self, now: Instant, length: Duration) {
        self.state = State::Trying { since: now, progress: 0, until: now + length, with: f64::MAX };
    }

    /// A steal succeeded.
    #[inline]
    pub(crate) fn note_steal(&mut self) {
        self.steals = self.steals.saturating_add(1);
    }

    /// New work appeared (a start-queue entry): a hold ends now, `progress` read for the new
    /// window. A trial goes on (its rate is measured whatever runs meanwhile).
    pub(crate) fn new_work(&mut self, now: Instant, progress: impl FnOnce() -> u64) {
        if self.holding() {
            self.watch(now, progress());
        }
    }

    /// An idle step at `now`, `progress` reading the runtime's progress (module docs; read only
    /// when a window or a trial ends: it touches every processor's counters): what to do about
    /// stealing, and a verdict if one was reached.
    pub(crate) fn on_idle(
        &mut self,
        now: Instant,
        progress: impl FnOnce() -> u64,
    ) -> (Step, Option<Verdict>) {
        match self.state {
            State::Watching { since, progress: p0 } => {
                let age = now.saturating_duration_since(since);
                if age < WINDOW {
                    return (Step::Steal, None);
                }
                let progress = progress();
                let cool = self.cool_until.is_some_and(|c| now < c);
                if self.steals >= CHURN_STEALS && age <= WINDOW_LONGEST && !cool {
                    let with = rate(progress.wrapping_sub(p0), age);
                    let until = now + age;
                    self.state = State::Trying { since: now, progress, until, with };
                    self.steals = 0;
                    return (Step::Wait(until), None);
                }
                self.watch(now, progress);
                (Step::Steal, None)
            }
            State::Trying { since, progress: p0, until, with } => {
                if now < until {
                    return (Step::Wait(until), None);
                }
                let progress = progress();
                let length = now.saturating_duration_since(since);
                let without = rate(progress.wrapping_sub(p0), length);
                if without < with * (1.0 - PAYS_BY) {
                    self.cool_until = Some(now + length * self.cool);
                    self.cool = (self.cool * 2).min(COOL_MAX);
                    self.hold = HOLD_FIRST;
                    self.watch(now, progress);
                    (Step::Steal, Some(Verdict::Pays))
                } else {
                    let until = now + self.hold;
                    self.hold = (self.hold * 2).min(HOLD_MAX);
                    self.cool = COOL_FIRST;
                    self.state = State::Holding { until };
                    (Step::Wait(until), Some(Verdict::Holds))
                }
            }
            State::Holding { until } => {
                if now < until {
                    return (Step::Wait(until), None);
                }
                self.watch(now, progress());
                (Step::Steal, None)
            }
        }
    }

    /// Back to watching, a new window from `now`.
    fn watch(&mut self, now: Instant, progress: u64) {
        self.state = State::Watching { since: now, progress };
        self.steals = 0;
    }
}

/// Runs per second: `runs` in `time`.
fn rate(runs: u64, time: Duration) -> f64 {
    runs as f64 / time.as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// Steals `n` times, then an idle step at `at` with progress `progress`.
    fn churn(t: &mut StealTrials, n: u32, at: Instant, progress: u64) -> (Step, Option<Verdict>) {
        for _ in 0..n {
            t.note_steal();
        }
        t.on_idle(at, || progress)
    }

    #[test]
    fn a_churning_window_starts_a_trial_as_long_as_itself() {
        let t0 = Instant::now();
        let mut t = StealTrials::new(t0);
        // Too early to close the window: steal on.
        assert_eq!(churn(&mut t, 20, t0 + 50 * US, 10), (Step::Steal, None));
        assert!(!t.blocked());
        let (step, verdict) = churn(&mut t, 0, t0 + 120 * US, 100);
        assert_eq!(step, Step::Wait(t0 + 240 * US));
        assert_eq!(verdict, None);
        assert!(t.blocked(), "no steals during a trial");
        // An idle step inside the trial waits for its end.
        assert_eq!(t.on_idle(t0 + 200 * US, || 500), (Step::Wait(t0 + 240 * US), None));
    }

    #[test]
    fn too_few_steals_or_a_long_busy_window_start_no_trial() {
        let t0 = Instant::now();
        let mut t = StealTrials::new(t0);
        assert_eq!(churn(&mut t, CHURN_STEALS - 1, t0 + 150 * US, 100), (Step::Steal, None));
        // The next window: enough steals, but it lasted past WINDOW_LONGEST.
        let late = t0 + 150 * US + WINDOW_LONGEST + US;
        assert_eq!(churn(&mut t, 50, late, 200), (Step::Steal, None));
        assert!(!t.blocked());
    }

    #[test]
    fn a_trial_that_runs_faster_without_steals_holds_and_holds_double() {
        let t0 = Instant::now();
        let mut t = StealTrials::new(t0);
        // Window: 100 runs in 100 µs (1 M/s); trial: 1000 runs in 100 µs (10 M/s).
        churn(&mut t, 20, t0 + 100 * US, 100);
        let end = t0 + 200 * US;
        let (step, verdict) = t.on_idle(end, || 1100);
        assert_eq!(verdict, Some(Verdict::Holds));
        assert_eq!(step, Step::Wait(end + HOLD_FIRST));
        assert!(t.blocked());
        // After the hold: watching again; the same outcome doubles the hold.
        let after = end + HOLD_FIRST;
        assert_eq!(t.on_idle(after, || 5000), (Step::Steal, None));
        assert!(!t.blocked());
        churn(&mut t, 20, after + 100 * US, 5100);
        let (step, verdict) = t.on_idle(after + 200 * US, || 6100);
        assert_eq!(verdict, Some(Verdict::Holds));
        assert_eq!(step, Step::Wait(after + 200 * US + 2 * HOLD_FIRST));
    }

    #[test]
    fn equal_rates_hold_too() {
        let t0 = Instant::now();
        let mut t = StealTrials::new(t0);
        churn(&mut t, 20, t0 + 100 * US, 1000);
        // 2.5% slower without steals: within PAYS_BY, so stealing does not pay.
        let (_, verdict) = t.on_idle(t0 + 200 * US, || 1975);
        assert_eq!(verdict, Some(Verdict::Holds));
    }

    #[test]
    fn a_trial_that_runs_slower_without_steals_goes_back_to_stealing_and_cools_down() {
        let t0 = Instant::now();
        let mut t = StealTrials::new(t0);
        // Window 2000 runs in 100 µs; trial 1200 (the thief's help was worth 40%).
        churn(&mut t, 20, t0 + 100 * US, 2000);
        let end = t0 + 200 * US;
        assert_eq!(t.on_idle(end, || 3200), (Step::Steal, Some(Verdict::Pays)));
        assert!(!t.blocked());
        // Churning windows inside the cool-down (16 trial lengths) start no trial...
        let mut now = end;
        for i in 1..=15u64 {
            now += 100 * US;
            assert_eq!(churn(&mut t, 20, now, 3200 + i * 2000), (Step::Steal, None), "window {i}");
        }
        // ...and the first one after it does.
        now += 200 * US;
        assert!(matches!(churn(&mut t, 20, now, 40_000), (Step::Wait(_), None)));
    }

    #[test]
    fn new_work_ends_a_hold_not_a_trial() {
        let t0 = Instant::now();
        let mut t = StealTrials::new(t0);
        churn(&mut t, 20, t0 + 100 * US, 100);
        t.new_work(t0 + 150 * US, || 600);
        assert!(t.blocked(), "a trial goes on");
        let (_, verdict) = t.on_idle(t0 + 200 * US, || 1100);
        assert_eq!(verdict, Some(Verdict::Holds));
        t.new_work(t0 + 300 * US, || 1200);
        assert!(!t.blocked(), "a hold ends");
        assert_eq!(t.on_idle(t0 + 310 * US, || 1210), (Step::Steal, None));
    }
}

#[cfg(test)]
mod runtime_tests {
    use crate::{Builder, Place, PlaceMode, Runtime};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// Runs `f` on processor `p` of the caller's runtime (a strict place: never stolen).
    fn on_processor<T: Send + 'static>(p: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
        let b = Builder::new().place(Place::processor(p)).place_mode(PlaceMode::Strict);
        b.spawn(f).expect("spawn").join().expect("the ULT")
    }

    /// Processor 1 is put on a hold far longer than the test, and parks in it. A ULT
    /// spawned on processor 0 while another spins there must still run at once on processor 1:
    /// new work ends the hold (a held processor that ignored spawns would leave the spinner
    /// waiting for ever).
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime of OS threads, which Miri does not model here")]
    fn a_spawn_ends_a_hold_and_the_held_processor_runs_it() {
        spawn_while_blocked(|p| p.core().trials.hold_for(Instant::now(), Duration::from_secs(3600)));
    }

    /// As above for a trial (50 ms, far longer than a window allows): a spawn does not end it,
    /// but it ends when due, and the processor then takes the spawned ULT. (A processor that saw
    /// the entry and went back to its loop without reaching the trial's end spun for ever
    /// between the visible entry and its refused steal: `tests/hierarchy.rs`'s
    /// `counters_add_up` hung so.)
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime of OS threads, which Miri does not model here")]
    fn a_trial_ends_when_due_while_new_work_waits() {
        spawn_while_blocked(|p| p.core().trials.try_for(Instant::now(), Duration::from_millis(50)));
    }

    /// Blocks processor 1's steals with `block` (run there), waits until it parks so blocked,
    /// then spawns two ULTs from processor 0 that must run at once, one on each processor.
    fn spawn_while_blocked(block: fn(&crate::processor::Processor)) {
        // (Not under the chaos mode, which runs no trials: `ELITE_CHAOS` in `.ci/run`.)
        let rt = Runtime::builder().processors(2).no_chaos().build().expect("build runtime");
        let shared = std::sync::Arc::clone(rt.shared());
        rt.block_on(move || {
            on_processor(1, move || {
                let p = crate::slot::current_processor().expect("a processor");
                assert_eq!(p.index, 1);
                block(p);
            });
            let deadline = Instant::now() + Duration::from_secs(30);
            // Its idle steps in the hold park as pauses of stealing.
            while shared.processors[1].stats.steal_pauses.get() == 0 {
                assert!(Instant::now() < deadline, "processor 1 never parked in its hold");
                crate::sleep(Duration::from_millis(1));
            }
            let arrived = Arc::new(AtomicUsize::new(0));
            on_processor(0, move || {
                let both: Vec<_> = (0..2)
                    .map(|_| {
                        let arrived = arrived.clone();
                        crate::spawn(move || {
                            let me = crate::slot::current_processor().expect("a processor").index;
                            arrived.fetch_add(1, SeqCst);
                            let deadline = Instant::now() + Duration::from_secs(30);
                            while arrived.load(SeqCst) < 2 {
                                assert!(Instant::now() < deadline, "the other ULT never ran beside this one");
                                std::thread::yield_now(); // (the OS thread's, not the ULT's)
                            }
                            me
                        })
                    })
                    .collect();
                let mut ran_on: Vec<usize> = both.into_iter().map(|h| h.join().expect("a spinner")).collect();
                ran_on.sort_unstable();
                assert_eq!(ran_on, [0, 1], "one spinner on each processor");
            });
        });
        let stats = rt.stats();
        assert_eq!(
            stats.processors[1].steal_holds, 0,
            "a forced hold is no verdict, nor a trial's verdict a hold"
        );
    }
}
