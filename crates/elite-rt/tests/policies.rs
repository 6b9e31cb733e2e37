//! The scheduling policies: each picks the ULT ELiTE section 3.1 says it picks (deterministic
//! scenarios on one processor with scripted cache misses), a ULT woken by a hand-off from another
//! processor follows its waker when little of its data is at home (two processors, scripted), a
//! thief takes the low-affinity part of a runqueue, and no ULT is lost under stress with any
//! policy.

mod common;

use common::{hang_guard, spin_until};
use elite_affinity::{CacheModel, ScriptedSource, SourceKind};
use elite_rt::policy::{Hooks, Needs, Policy, ProcessorView, UltInfo, WakerInfo};
use elite_rt::sync::{mpsc, Mutex, Semaphore};
use elite_rt::{CounterChoice, Runtime};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// Bytes per cache line in the scenarios.
const LINE: usize = 64;

/// One processor with a 1024-line model cache, and a script in which every run misses once on
/// each line its ULT declared: the misses of a run are chosen by `set_footprint` before it ends.
fn scripted_runtime(policy: Policy) -> Runtime {
    Runtime::builder()
        // These scenarios check which ULT each policy picks; the chaos mode (`ELITE_CHAOS`, which
        // `.ci/run` sets for one run of the suite) replaces those picks with random ones.
        .no_chaos()
        .topology("1 node x 1 core, 64 KiB L2 per core")
        .policy(policy)
        .counters(CounterChoice::scripted(|_| {
            ScriptedSource::from_fn(|run, _| (run.footprint_bytes / LINE) as u64)
        }))
        .build()
        .expect("build the scripted runtime")
}

/// A candidate of the main scenario: its name, the misses of its runs before it blocks (the last
/// one is the run that ends as it blocks).
struct Candidate {
    name: &'static str,
    runs: &'static [u64],
}

/// The main scenario. On one processor, in this order, each of five ULTs has its history, then
/// blocks (each run misses the lines listed, see [`scripted_runtime`]):
///
/// | ULT | runs (misses) | then, until the release |
/// | --- | --- | --- |
/// | Z | 600, then 5 | every other ULT's history: 1140 foreign misses |
/// | W | 100 | 1040 foreign misses |
/// | X | 40 | 1000 foreign misses |
/// | Y | 300 | 700 foreign misses |
/// | D | 700 (a disturber, never released) | |
///
/// The root then releases Y, X, Z, W, in this order, all at once, and records the order in which
/// they run. With a 1024-line cache the model expects footprints of about 457, 93, 39 and 258
/// lines for Z, W, X, Y and reload transients of about 443, 63, 25 and 158 misses. So:
///
/// - No Affinity (LIFO) runs the last released first: W, Z, X, Y;
/// - Virtual Time runs the most recently run first: Y, X, W, Z;
/// - Minimum Misses runs the fewest misses in the last run first: Z (5), X, W, Y;
/// - Reload Transient runs the smallest expected reload transient first: X, W, Y, Z.
fn release_order(policy: Policy) -> Vec<&'static str> {
    in_policy_order(|| release_scenario(&scripted_runtime(policy.clone())))
}

/// The order of the first of up to eight runs of `scenario` in which every released ULT ran in
/// the policy's order: one in which the loop's turn for the runqueue's worst ULT (every 64th
/// round, `ProcessorStats::worst_turns`) did not fall among the released ULTs' runs. Which
/// round that turn falls on depends on how many rounds the processor went round before (idle
/// rounds included, which a loaded machine changes), so a run may see it; the turn itself is
/// `reload_transient_still_runs_a_tie_that_newer_ties_overtake`'s subject.
fn in_policy_order(scenario: impl Fn() -> (Vec<&'static str>, u64)) -> Vec<&'static str> {
    let mut turns = Vec::new();
    for _ in 0..8 {
        let (order, worst_turns) = scenario();
        if worst_turns == 0 {
            return order;
        }
        turns.push((order, worst_turns));
    }
    panic!("the worst-priority turn fell among the released ULTs' runs in eight runs in a row: {turns:?}");
}

/// The candidates of [`release_order`], in the order of their histories.
const CANDIDATES: [Candidate; 5] = [
    Candidate { name: "Z", runs: &[600, 5] },
    Candidate { name: "W", runs: &[100] },
    Candidate { name: "X", runs: &[40] },
    Candidate { name: "Y", runs: &[300] },
    Candidate { name: "D", runs: &[700] },
];

/// The order of [`release_order`]'s release.
const RELEASE: [&str; 4] = ["Y", "X", "Z", "W"];

/// [`release_order`] on a runtime built under No Affinity, its processor started, that takes
/// `policy` up through `set_policy` before the scenario: the policy's bookkeeping of runs must
/// follow, not only its keys.
fn release_order_after_set_policy(policy: Policy) -> Vec<&'static str> {
    in_policy_order(|| release_scenario(&runtime_after_set_policy(policy.clone())))
}

/// A scripted runtime built under No Affinity that took `policy` up through `set_policy`.
fn runtime_after_set_policy(policy: Policy) -> Runtime {
    let rt = scripted_runtime(Policy::no_affinity());
    // The processor is made (and has run a ULT) under No Affinity, which records nothing.
    assert_eq!(rt.block_on(|| elite_rt::spawn(|| 1).join().unwrap()), 1);
    rt.set_policy(policy).unwrap();
    // The processor takes the policy up at a safe point of its loop (every 64th round): go
    // round it until it did.
    for _ in 0..10_000 {
        if rt.stats().total().policy_switches > 0 {
            break;
        }
        rt.block_on(|| elite_rt::spawn(|| ()).join().unwrap());
    }
    assert_eq!(rt.stats().total().policy_switches, 1, "the processor took the policy up");
    rt
}

/// The scenario of [`release_order`] on `rt`: the histories, then the release; the order in
/// which the released ULTs ran, and the turns for the runqueue's worst ULT taken meanwhile.
fn release_scenario(rt: &Runtime) -> (Vec<&'static str>, u64) {
    rt.block_on(|| {
        let go: Arc<Vec<Semaphore>> = Arc::new((0..5).map(|_| Semaphore::new(0)).collect());
        let wake: Arc<Vec<Semaphore>> = Arc::new((0..5).map(|_| Semaphore::new(0)).collect());
        let done = Arc::new(Semaphore::new(0));
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let handles: Vec<_> = CANDIDATES
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (go, wake, done, log) = (go.clone(), wake.clone(), done.clone(), log.clone());
                let (name, runs) = (c.name, c.runs);
                elite_rt::spawn(move || {
                    go[i].acquire();
                    for (k, &misses) in runs.iter().enumerate() {
                        elite_rt::set_footprint(misses as usize * LINE);
                        if k + 1 < runs.len() {
                            elite_rt::yield_now(); // nothing else is ready: just ends the run
                        }
                    }
                    done.release();
                    wake[i].acquire(); // the run that ends here misses `runs.last()`
                    elite_rt::set_footprint(0);
                    log.lock().unwrap().push(name);
                })
            })
            .collect();
        // The histories, one after the other.
        for i in 0..CANDIDATES.len() {
            go[i].release();
            done.acquire();
        }
        // The release.
        let turns_before = rt.stats().total().worst_turns;
        for name in RELEASE {
            let i = CANDIDATES.iter().position(|c| c.name == name).unwrap();
            wake[i].release();
        }
        for h in handles.into_iter().take(4) {
            h.join().unwrap();
        }
        let worst_turns = rt.stats().total().worst_turns - turns_before;
        wake[4].release(); // let the disturber finish
        let order = log.lock().unwrap().clone();
        (order.into_iter().filter(|&n| n != "D").collect(), worst_turns)
    })
}

#[test]
fn each_policy_picks_what_elite_says() {
    hang_guard(60, "the release scenario", || {
        assert_eq!(release_order(Policy::no_affinity()), ["W", "Z", "X", "Y"], "no-affinity: LIFO");
        assert_eq!(release_order(Policy::virtual_time()), ["Y", "X", "W", "Z"], "virtual-time: most recent");
        assert_eq!(release_order(Policy::minimum_misses()), ["Z", "X", "W", "Y"], "minimum-misses");
        assert_eq!(release_order(Policy::reload_transient()), ["X", "W", "Y", "Z"], "reload-transient");
    });
}

/// The same picks when the policy is put in force by `set_policy` on a runtime whose processor
/// was made under No Affinity (as `auto` does from its first candidate): the processor takes up
/// the new policy's bookkeeping of runs (stamps, misses), not only its keys.
#[test]
fn each_policy_picks_what_elite_says_after_set_policy() {
    hang_guard(60, "the release scenario after set_policy", || {
        let order = release_order_after_set_policy;
        assert_eq!(order(Policy::virtual_time()), ["Y", "X", "W", "Z"], "virtual-time: most recent");
        assert_eq!(order(Policy::minimum_misses()), ["Z", "X", "W", "Y"], "minimum-misses");
        assert_eq!(order(Policy::reload_transient()), ["X", "W", "Y", "Z"], "reload-transient");
        assert_eq!(order(Policy::no_affinity()), ["W", "Z", "X", "Y"], "no-affinity: LIFO");
    });
}

/// Reload Transient runs the newest entry of the ULTs whose reload transient is 0 first, so a ULT
/// among them is overtaken by every one made ready after it; the processor loop's turn for the
/// runqueue's worst ULT (every 64th round) must still reach it. Here no run misses (no
/// footprint declared: every reload transient is 0), three ULTs pass two tokens around a ring
/// (so one of them is always ready, and newer), and a ULT woken from a sleep, in the runqueue
/// below them once the next of them enters, ends the ring when it runs.
#[test]
fn reload_transient_still_runs_a_tie_that_newer_ties_overtake() {
    hang_guard(30, "a ring against an old tie", || {
        let rt = scripted_runtime(Policy::reload_transient());
        rt.block_on(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let sleeper = {
                let stop = stop.clone();
                elite_rt::spawn(move || {
                    elite_rt::sleep(std::time::Duration::from_millis(5));
                    stop.store(true, SeqCst);
                })
            };
            let (senders, receivers): (Vec<_>, Vec<_>) = (0..3).map(|_| mpsc::channel::<()>()).unzip();
            // Two tokens in the ring.
            senders[0].send(()).unwrap();
            senders[1].send(()).unwrap();
            let mut senders: Vec<_> = senders.into_iter().map(Some).collect();
            let ring: Vec<_> = receivers
                .into_iter()
                .enumerate()
                .map(|(i, rx)| {
                    // ULT i receives on channel i and passes the token on to channel i + 1: when
                    // it stops it drops that sender, and the next one stops after it.
                    let tx = senders[(i + 1) % 3].take().unwrap();
                    let stop = stop.clone();
                    elite_rt::spawn(move || {
                        let mut passes = 0u64;
                        while rx.recv().is_ok() && !stop.load(SeqCst) && tx.send(()).is_ok() {
                            passes += 1;
                        }
                        passes
                    })
                })
                .collect();
            sleeper.join().unwrap();
            let passes: u64 = ring.into_iter().map(|h| h.join().unwrap()).sum();
            assert!(passes > 0);
        });
        // The sleeper ran through the turn for the runqueue's worst ULT, which the stats count.
        assert!(rt.stats().total().worst_turns > 0, "{}", rt.stats());
    });
}

/// The scenario's expectations for Reload Transient, from the cache model itself: the footprints
/// and reload transients the docs of [`release_order`] quote.
#[test]
fn the_scenario_matches_the_model() {
    let model = CacheModel::new(1024, 64).expect("valid");
    // (footprint after the history, foreign misses until the release)
    let z = model.footprint_after_run(model.footprint_after_run(0.0, 600), 5);
    let cases = [("Z", z, 1140), ("W", model.footprint_after_run(0.0, 100), 1040)];
    let cases = cases.into_iter().chain([
        ("X", model.footprint_after_run(0.0, 40), 1000),
        ("Y", model.footprint_after_run(0.0, 300), 700),
    ]);
    let mut reloads: Vec<(&str, f32)> = cases
        .map(|(name, footprint, foreign)| (name, model.reload_transient_after(footprint, foreign)))
        .collect();
    for (name, expected) in [("Z", 443.0), ("W", 63.0), ("X", 25.0), ("Y", 158.0)] {
        let got = reloads.iter().find(|(n, _)| *n == name).unwrap().1;
        assert!((got - expected).abs() < 3.0, "{name}: {got}");
    }
    reloads.sort_by(|a, b| a.1.total_cmp(&b.1));
    let order: Vec<&str> = reloads.iter().map(|(n, _)| *n).collect();
    assert_eq!(order, ["X", "W", "Y", "Z"]);
}

/// Virtual Time keys a ULT that last ran on another processor behind those that ran here, and
/// a thief takes the low-affinity part of a runqueue: with 8 ULTs ready on one processor (the
/// other one busy), ran there in a known order, the idle processor's first steal takes the 4
/// least recently run ones (half, rounded up), and runs them oldest first.
#[test]
fn a_thief_takes_the_least_recently_run_half() {
    hang_guard(120, "the steal scenario", || {
        // Which ULTs a thief takes is what this checks: not under the chaos mode's random picks.
        let rt = Runtime::builder()
            .no_chaos()
            .processors(2)
            .policy(Policy::virtual_time())
            .build()
            .expect("runtime");
        rt.block_on(|| {
            const N: usize = 8;
            let release = Arc::new(AtomicBool::new(false));
            let blocker_runs = Arc::new(AtomicBool::new(false));
            // 1. A blocker holds the other processor: it spins, never switching, until released.
            let blocker = {
                let (release, runs) = (release.clone(), blocker_runs.clone());
                elite_rt::spawn(move || {
                    runs.store(true, SeqCst);
                    spin_until(60, "the blocker's release", || release.load(SeqCst));
                    elite_rt::current().processor()
                })
            };
            spin_until(60, "the blocker to start", || blocker_runs.load(SeqCst));
            let root = elite_rt::current().processor();
            // 2. Workers start here (the other processor is held), then each runs once more, in
            //    index order, so that worker 7 ran most recently.
            let started = Arc::new(Semaphore::new(0));
            let go: Arc<Vec<Semaphore>> = Arc::new((0..N).map(|_| Semaphore::new(0)).collect());
            let back = Arc::new(Semaphore::new(0));
            let ready: Arc<Vec<Semaphore>> = Arc::new((0..N).map(|_| Semaphore::new(0)).collect());
            let log = Arc::new(std::sync::Mutex::new(Vec::<(usize, usize)>::new()));
            let workers: Vec<_> = (0..N)
                .map(|i| {
                    let (started, go, back, ready, log) =
                        (started.clone(), go.clone(), back.clone(), ready.clone(), log.clone());
                    elite_rt::spawn(move || {
                        started.release();
                        go[i].acquire();
                        back.release();
                        ready[i].acquire();
                        log.lock().unwrap().push((i, elite_rt::current().processor()));
                    })
                })
                .collect();
            for _ in 0..N {
                started.acquire();
            }
            for i in 0..N {
                go[i].release();
                back.acquire();
            }
            // 3. All ready at once on this processor, keyed by their stamps; the root keeps the
            //    processor (spinning) while the other one, released, steals.
            for r in ready.iter() {
                r.release();
            }
            release.store(true, SeqCst);
            let thief = 1 - root;
            spin_until(60, "the thief to run its first batch", || {
                log.lock().unwrap().iter().filter(|&&(_, p)| p == thief).count() >= N / 2
            });
            assert_eq!(blocker.join().unwrap(), thief);
            for w in workers {
                w.join().unwrap();
            }
            let log = log.lock().unwrap().clone();
            let first_batch: Vec<usize> =
                log.iter().filter(|&&(_, p)| p == thief).map(|&(i, _)| i).take(N / 2).collect();
            assert_eq!(first_batch, [0, 1, 2, 3], "the thief's first batch, in the order it ran: {log:?}");
        });
    });
}

/// A custom policy sees the waker, keeps a word per ULT, and is called at the end of each run.
#[test]
fn custom_hooks_see_wakers_and_keep_state() {
    #[derive(Debug)]
    struct Counting {
        wakes_by_ults: Arc<AtomicU64>,
        runs: Arc<AtomicU64>,
        /// Runs whose record was not updated before the hook (must stay 0).
        stale: Arc<AtomicU64>,
        /// The largest state word a run's end saw.
        max_state: Arc<AtomicU64>,
    }
    impl Hooks for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn needs(&self) -> Needs {
            Needs::STAMPS.with_run_hook().with_wakers()
        }
        fn priority(&self, ult: &UltInfo, _here: &ProcessorView<'_>) -> u64 {
            ult.state
        }
        fn record_run(&self, ult: &UltInfo, here: &ProcessorView<'_>, state: &mut u64) {
            if ult.stamp != here.vtime {
                self.stale.fetch_add(1, SeqCst); // the record must be updated before the hook
            }
            self.runs.fetch_add(1, SeqCst);
            self.max_state.fetch_max(*state, SeqCst);
            *state += 1;
        }
        fn wake_target(&self, ult: &UltInfo, waker: &WakerInfo, state: &mut u64) -> usize {
            if waker.ult.is_some() {
                self.wakes_by_ults.fetch_add(1, SeqCst);
            }
            *state += 1000;
            ult.last_processor
        }
    }
    let wakes = Arc::new(AtomicU64::new(0));
    let runs = Arc::new(AtomicU64::new(0));
    let stale = Arc::new(AtomicU64::new(0));
    let max_state = Arc::new(AtomicU64::new(0));
    let policy = Policy::new(Counting {
        wakes_by_ults: wakes.clone(),
        runs: runs.clone(),
        stale: stale.clone(),
        max_state: max_state.clone(),
    });
    let rt = Runtime::builder().processors(1).policy(policy).build().expect("runtime");
    let state_seen = rt.block_on(|| {
        let (tx, rx) = mpsc::sync_channel::<u64>(0);
        let h = elite_rt::spawn(move || rx.iter().sum::<u64>());
        for i in 0..10 {
            tx.send(i).unwrap();
        }
        drop(tx);
        h.join().unwrap()
    });
    assert_eq!(state_seen, 45);
    let (wakes, runs) = (wakes.load(SeqCst), runs.load(SeqCst));
    assert!(wakes >= 10, "rendezvous wakes by ULTs: {wakes}");
    // Every woken ULT runs afterwards, and the root ran before it first blocked.
    assert!(runs > wakes, "runs: {runs}, wakes: {wakes}");
    assert_eq!(stale.load(SeqCst), 0);
    // The words the hooks kept: ULTs that ran after a few wakes (+1000 each) and runs (+1).
    assert!(max_state.load(SeqCst) > 1000, "state: {}", max_state.load(SeqCst));
}

/// `stats()` names each processor's source: none for policies that need no misses, the script,
/// or (with detection) the hardware counter or the estimator.
#[test]
fn stats_name_the_counter_sources() {
    let rt = Runtime::builder().processors(2).policy(Policy::virtual_time()).build().unwrap();
    rt.block_on(|| ());
    assert_eq!(rt.stats().counter_sources, vec![None, None]);
    let rt = Runtime::builder().processors(2).policy(Policy::reload_transient()).build().unwrap();
    rt.block_on(|| ());
    common::wait_until(30, "both processors to open their sources", || {
        rt.stats().counter_sources.iter().all(Option::is_some)
    });
    for kind in rt.stats().counter_sources.into_iter().flatten() {
        assert!(matches!(kind, SourceKind::Hardware(_) | SourceKind::Estimated { .. }), "{kind}");
    }
    let rt = Runtime::builder()
        .processors(1)
        .policy(Policy::minimum_misses())
        .counters(CounterChoice::Estimated)
        .build()
        .unwrap();
    rt.block_on(|| ());
    assert_eq!(rt.stats().counter_sources, vec![Some(SourceKind::Estimated { no_pmu: None })]);
    assert!(rt.stats().to_string().contains("counter source p0:      estimated"));
}

/// A spawn/join/mutex/channel/yield mix; returns what it counted, which must be everything: the
/// lock count, the values received, the children spawned and the sum of their results.
fn mixed_load(rt: &Runtime, ults: u64, rounds: u64) -> (u64, u64, u64, u64) {
    rt.block_on(move || {
        let counter = Arc::new(Mutex::new(0u64));
        let (tx, rx) = mpsc::channel::<u64>();
        let spawned = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..ults)
            .map(|i| {
                let (counter, tx, spawned) = (counter.clone(), tx.clone(), spawned.clone());
                elite_rt::Builder::new()
                    .footprint(((i % 7) as usize + 1) * 4096)
                    .spawn(move || {
                        let mut sum = 0;
                        for r in 0..rounds {
                            *counter.lock().unwrap() += 1;
                            tx.send(1).unwrap();
                            if (i + r) % 3 == 0 {
                                elite_rt::yield_now();
                            }
                            if (i + r) % 5 == 0 {
                                spawned.fetch_add(1, SeqCst);
                                sum += elite_rt::spawn(move || r).join().unwrap();
                            }
                        }
                        sum
                    })
                    .unwrap()
            })
            .collect();
        drop(tx);
        let received: u64 = rx.iter().sum();
        let sums: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        let count = *counter.lock().unwrap();
        (count, received, spawned.load(SeqCst) as u64, sums)
    })
}

#[test]
fn no_ult_is_lost_under_any_policy() {
    hang_guard(240, "the policy stress", || {
        const ULTS: u64 = 300;
        const ROUNDS: u64 = 40;
        for name in Policy::NAMES {
            for (shape, builder) in [
                ("1 processor", Runtime::builder().processors(1)),
                ("2 processors", Runtime::builder().processors(2)),
                ("2 nodes x 2 processors", Runtime::builder().topology("2x2")),
            ] {
                let policy: Policy = name.parse().unwrap();
                let rt = builder.policy(policy).counters(CounterChoice::Estimated).build().unwrap();
                for _ in 0..3 {
                    let (count, received, spawned, sums) = mixed_load(&rt, ULTS, ROUNDS);
                    assert_eq!(count, ULTS * ROUNDS, "{name}, {shape}: lock count");
                    assert_eq!(received, ULTS * ROUNDS, "{name}, {shape}: channel");
                    let children = || (0..ULTS).flat_map(|i| (0..ROUNDS).filter(move |r| (i + r) % 5 == 0));
                    assert_eq!(spawned, children().count() as u64, "{name}, {shape}: children");
                    assert_eq!(sums, children().sum::<u64>(), "{name}, {shape}: children's results");
                }
                let total = rt.stats().total();
                assert!(total.switches > 0);
            }
        }
    });
}

/// Under No Affinity and Minimum Misses a ULT woken on its processor goes before the ULTs that
/// only yielded, also while the processor serves a long round-robin of yields in batches taken
/// from its runqueue (`queue::run::YieldBatch`): the woken ULT runs at its waker's next yield.
#[test]
fn a_woken_ult_runs_before_a_round_robin_of_yielders() {
    hang_guard(60, "a wake among yielders", || {
        for name in ["no-affinity", "minimum-misses"] {
            let policy: Policy = name.parse().unwrap();
            let rt = Runtime::builder()
                .no_chaos()
                .processors(1)
                .policy(policy)
                .counters(CounterChoice::Estimated)
                .build()
                .unwrap();
            let (released_at, woken_at) = rt.block_on(|| {
                // Yields made so far, by anyone.
                let yields = Arc::new(AtomicU64::new(0));
                let stop = Arc::new(AtomicBool::new(false));
                let sem = Arc::new(Semaphore::new(0));
                let (y, s) = (yields.clone(), sem.clone());
                let sleeper = elite_rt::spawn(move || {
                    s.acquire();
                    y.load(SeqCst)
                });
                let yielders: Vec<_> = (0..64)
                    .map(|_| {
                        let (y, stop) = (yields.clone(), stop.clone());
                        elite_rt::spawn(move || {
                            while !stop.load(SeqCst) {
                                y.fetch_add(1, SeqCst);
                                elite_rt::yield_now();
                            }
                        })
                    })
                    .collect();
                // Deep in the round-robin (every yielder started long ago), release the sleeper.
                for _ in 0..1000 {
                    yields.fetch_add(1, SeqCst);
                    elite_rt::yield_now();
                }
                sem.release();
                let released_at = yields.fetch_add(1, SeqCst) + 1;
                elite_rt::yield_now();
                let woken_at = sleeper.join().unwrap();
                stop.store(true, SeqCst);
                yielders.into_iter().for_each(|h| h.join().unwrap());
                (released_at, woken_at)
            });
            assert_eq!(woken_at, released_at, "{name}: the woken ULT ran at its waker's yield");
        }
    });
}

/// Where a ULT `B` woken by a hand-off from another processor runs, in a scripted two-processor
/// scenario: `B`, declaring `footprint` bytes, runs and blocks on processor `o` while the root
/// spins on the other one, `r` (so that nothing else can run there); optionally a disturber
/// declaring 512 KiB (8192 misses, eight times the 1024-line model cache) then runs on `o`; then
/// the root, a ULT on `r`, releases `B`: a hand-off across processors. Returns whether `B` ran
/// on `r`, its waker's processor, after the release (else it ran at home, on `o`).
fn follows_its_waker(policy: Policy, footprint: usize, disturb: bool) -> bool {
    // Where `B` runs shows the rule's answer unless an idle processor moved it after the
    // hand-off: took it from the waker's `next` slot while the kernel held the root's OS thread
    // between its release and its join (a stranded ULT, rightly rescued), or stole it. Such a
    // run says nothing of the rule, so it is run again (a busy test host, as under a sanitizer).
    for _ in 0..20 {
        if let Some(followed) = hand_off_once(policy.clone(), footprint, disturb) {
            return followed;
        }
    }
    panic!("every hand-off of 20 was moved by a rescue or a steal")
}

/// One hand-off scenario of [`follows_its_waker`]: whether `B` ran beside its waker, or `None`
/// when a processor rescued or stole a ULT between the hand-off and `B`'s end.
fn hand_off_once(policy: Policy, footprint: usize, disturb: bool) -> Option<bool> {
    let rt = Runtime::builder()
        .no_chaos() // which processor runs `B` is what this checks
        .topology("1 node x 2 cores, 64 KiB L2 per core")
        .policy(policy)
        .counters(CounterChoice::scripted(|_| {
            ScriptedSource::from_fn(|run, _| (run.footprint_bytes / LINE) as u64)
        }))
        .build()
        .expect("build the scripted runtime");
    let parks = |p: usize| rt.stats().processors[p].parks;
    let moved =
        || rt.stats().processors.iter().map(|p| p.rescued + p.steals_node + p.steals_remote).sum::<u64>();
    rt.block_on(|| {
        let r = elite_rt::current().processor();
        let o = 1 - r;
        // Spins (keeping `r`) until `ult` reported `started`, then until `o` has parked after
        // that: `ult` blocked or exited. (Up to 200 ms: `o` may have parked before `started` was
        // seen, which is as good.)
        let settle = |started: &AtomicBool, what: &str| {
            spin_until(60, what, || started.load(SeqCst));
            let (before, since) = (parks(o), std::time::Instant::now());
            while parks(o) == before && since.elapsed() < std::time::Duration::from_millis(200) {
                std::thread::yield_now();
            }
        };
        let go = Arc::new(Semaphore::new(0));
        let (started, ran) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(usize::MAX)));
        let b = {
            let (go, started, ran) = (go.clone(), started.clone(), ran.clone());
            elite_rt::Builder::new()
                .footprint(footprint)
                .spawn(move || {
                    let home = elite_rt::current().processor();
                    started.store(true, SeqCst);
                    go.acquire();
                    ran.store(elite_rt::current().processor(), SeqCst);
                    home
                })
                .expect("spawn B")
        };
        settle(&started, "B to start on the other processor");
        if disturb {
            let done = Arc::new(AtomicBool::new(false));
            let d = {
                let done = done.clone();
                elite_rt::Builder::new()
                    .footprint(512 << 10)
                    .spawn(move || {
                        done.store(true, SeqCst);
                        elite_rt::current().processor()
                    })
                    .expect("spawn the disturber")
            };
            settle(&done, "the disturber to run");
            assert_eq!(d.join().unwrap(), o, "the disturber ran beside B");
        }
        assert_eq!(elite_rt::current().processor(), r, "the root kept its processor");
        let moved_before = moved();
        go.release(); // the hand-off, from `r`
        let home = b.join().unwrap();
        assert_eq!(home, o, "B ran on the other processor before it blocked");
        (moved() == moved_before).then(|| ran.load(SeqCst) == r)
    })
}

/// The hand-off wake rule (`elite_rt::policy::hand_off`): a ULT woken by a hand-off from another
/// processor follows its waker when at most `hand_off::hand_off_lines()` of its data are expected at home:
/// by the cache model (the footprint of its last run decayed by the misses its home counted
/// since) for the policies that count misses, by its declared footprint less what the data
/// declared by the runs ended at home since would have evicted for Virtual Time (no model).
/// No Affinity always follows; a timer or an exit is not a hand-off.
#[test]
fn a_woken_ult_follows_its_waker_when_little_of_its_data_is_at_home() {
    hang_guard(120, "the hand-off scenarios", || {
        // The line count is derived from this host's costs (4 to 256 lines), and it may grow
        // while this test runs: 4 while the line costs are unmeasured, the measured count once
        // a runtime's start (this test's or another's in this process) measures them. So the
        // footprints lie below and above it whichever it is at the hand-off: the small one at
        // most half the count read now (which can only grow), the large one 8 times the most
        // the rule allows on any host.
        let lines = elite_rt::policy::hand_off::hand_off_lines() as usize;
        let small = (lines * 64 / 2).min(1 << 10);
        // The most: lines streamed far faster than they round-trip clamp to it.
        let most = elite_rt::sync::HostCosts::scripted(2.0, 2000.0, 1e9, 1.0).hand_off_lines() as usize;
        let large = most * 64 * 8;
        for name in ["no-affinity", "virtual-time", "minimum-misses", "reload-transient", "gravity"] {
            let policy = || name.parse::<Policy>().unwrap();
            // Little data: every policy follows its waker.
            assert!(follows_its_waker(policy(), small, false), "{name}, small footprint");
            // Much data, all still cached at home: the affinity policies send it home.
            assert_eq!(
                follows_its_waker(policy(), large, false),
                name == "no-affinity",
                "{name}, large footprint"
            );
            // Much data, evicted at home by a disturber (512 KiB declared, eight times the
            // 64 KiB cache): the policies with a cache model see it lost by its misses, Virtual
            // Time by its declared lines, and follow the waker.
            assert!(follows_its_waker(policy(), large, true), "{name}, large footprint evicted at home");
        }
    });
}
