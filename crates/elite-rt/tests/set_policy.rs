//! `Runtime::set_policy` on a running runtime: every ready ULT re-keyed, none lost or run twice,
//! under the stress load (and, in CI, the chaos mode), and the `auto` policy's selector.

mod common;

use common::hang_guard;
use common::load::{counting_builder, mixed_round, Load};
use elite_rt::policy::{AutoReason, Hooks, Policy, ProcessorView, UltInfo};
use elite_rt::sync::Barrier;
use elite_rt::{CounterChoice, Runtime};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// Oldest entry first: a custom policy among the switches.
#[derive(Debug)]
struct Fifo;

impl Hooks for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }
    fn priority(&self, _ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
        u64::MAX - here.seq
    }
}

/// Every built-in policy, a custom one and `auto`, in turn.
fn policies() -> Vec<Policy> {
    let mut all: Vec<Policy> = Policy::NAMES.iter().map(|n| n.parse().unwrap()).collect();
    all.push(Policy::new(Fifo));
    all.push(Policy::auto());
    all
}

/// The stress load's rounds (each checks its sums, counts and exactly-once deliveries) while
/// another thread switches the policy every few hundred microseconds, through every policy.
fn mixed_load_while_switching(shape: &'static str, builder: fn() -> elite_rt::RuntimeBuilder) {
    hang_guard(300, shape, move || {
        let reports = Arc::new(AtomicUsize::new(0));
        let _ = counting_builder(&reports); // (quiets the load's deliberate panics)
        let reports2 = reports.clone();
        let rt = builder()
            .counters(CounterChoice::Estimated)
            .detached_panic_hook(move |_| {
                reports2.fetch_add(1, SeqCst);
            })
            .build()
            .expect("runtime");
        let done = AtomicBool::new(false);
        let switches = std::thread::scope(|s| {
            let switcher = s.spawn(|| {
                let mut n = 0u64;
                for p in policies().into_iter().cycle() {
                    if done.load(SeqCst) {
                        break;
                    }
                    rt.set_policy(p).expect("set_policy");
                    n += 1;
                    std::thread::sleep(Duration::from_micros(300));
                }
                n
            });
            for _ in 0..8 {
                mixed_round(&rt, &Load::SMALL, &reports);
            }
            done.store(true, SeqCst);
            switcher.join().unwrap()
        });
        let stats = rt.stats();
        // (`auto`'s selector switches too.)
        assert!(stats.policy_generation >= switches, "{shape}: a generation per switch");
        assert!(stats.total().policy_switches > 0, "{shape}: the processors took policies up");
    });
}

#[test]
fn switching_under_the_mixed_load_on_one_processor() {
    mixed_load_while_switching("switching, 1 processor", || Runtime::builder().processors(1));
}

#[test]
fn switching_under_the_mixed_load_on_two_processors() {
    mixed_load_while_switching("switching, 2 processors", || Runtime::builder().processors(2));
}

#[test]
fn switching_under_the_mixed_load_on_two_nodes_of_two() {
    mixed_load_while_switching("switching, 2x2", || Runtime::builder().topology("2x2"));
}

/// 256 ULTs meet at a barrier 12 times; right after each release the leader switches the
/// policy, with the 255 others ready in the runqueue, so that the processor's next safe point
/// re-keys them. Each ULT runs each of its rounds once: the counts are exact, and every ULT
/// went through every round.
#[test]
fn ready_ults_are_rekeyed_and_run_once() {
    hang_guard(120, "re-keyed ULTs", || {
        const ULTS: usize = 256;
        const ROUNDS: u64 = 12;
        let rt = Arc::new(
            Runtime::builder().processors(1).no_chaos().counters(CounterChoice::Estimated).build().unwrap(),
        );
        let counts: Arc<Vec<AtomicU64>> = Arc::new((0..ULTS).map(|_| AtomicU64::new(0)).collect());
        let order = policies();
        {
            let (rt2, counts) = (rt.clone(), counts.clone());
            rt.block_on(move || {
                let barrier = Arc::new(Barrier::new(ULTS));
                let hs: Vec<_> = (0..ULTS)
                    .map(|i| {
                        let (rt, counts, barrier, order) =
                            (rt2.clone(), counts.clone(), barrier.clone(), order.clone());
                        // (Room for `set_policy(auto)`, which starts a thread, in a debug build.)
                        let ult = elite_rt::Builder::new().stack_size(512 << 10);
                        ult.spawn(move || {
                            for round in 0..ROUNDS {
                                counts[i].fetch_add(1, SeqCst);
                                if barrier.wait().is_leader() {
                                    let p = order[round as usize % order.len()].clone();
                                    rt.set_policy(p).unwrap();
                                }
                            }
                        })
                        .unwrap()
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
            });
        }
        assert!(counts.iter().all(|c| c.load(SeqCst) == ROUNDS), "every ULT ran each round once");
        let stats = rt.stats();
        assert!(stats.policy_generation >= ROUNDS, "(`auto`'s selector switches too)");
        let total = stats.total();
        assert!(total.policy_switches >= ROUNDS / 2, "{total:?}");
        assert!(total.rekeyed > 0, "some switch found ready ULTs: {total:?}");
    });
}

/// `policy`, `policy_name` and the stats follow `set_policy`; `auto` starts its selector,
/// whose first decision is its first candidate, and a fixed policy set after it stops it.
#[test]
fn the_policy_in_force_follows_set_policy() {
    let rt = Runtime::builder().processors(2).build().unwrap();
    assert_eq!(rt.stats().policy, "no-affinity");
    rt.set_policy("gravity".parse().unwrap()).unwrap();
    assert_eq!(
        (rt.policy_name(), rt.stats().policy, rt.stats().policy_generation),
        ("gravity", "gravity", 1)
    );
    rt.set_policy(Policy::auto()).unwrap();
    assert_eq!(rt.policy_name(), "auto");
    assert_eq!(rt.stats().policy, "no-affinity", "auto starts with its first candidate");
    common::wait_until(30, "auto's first decision", || !rt.stats().auto.is_empty());
    assert_eq!(rt.stats().auto[0].reason, AutoReason::Start);
    rt.set_policy(Policy::virtual_time()).unwrap();
    let generation = rt.stats().policy_generation;
    std::thread::sleep(Duration::from_millis(50));
    let stats = rt.stats();
    assert_eq!((stats.policy, stats.policy_generation), ("virtual-time", generation), "auto stopped");
    assert_eq!(rt.block_on(|| elite_rt::spawn(|| 5).join().unwrap()), 5);
}

/// Eight ULTs on `rt` that report a unit of progress and yield until the flag is set; the flag
/// and the handle of the ULT that joins them. With `data`, each declares a data block (the
/// input of gravity's forces); with `footprint`, a footprint: of 1 KiB in the first and every
/// other one, of that many bytes in the others (declarations of different sizes, the smaller
/// first, at spawn: `auto`'s lead is then reload-transient from the signal on, see
/// `policy::auto`).
fn busy_reporters(
    rt: &Runtime,
    data: bool,
    footprint: Option<usize>,
) -> (Arc<AtomicBool>, elite_rt::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let h = rt.spawn(move || {
        let block: Arc<[u64]> = vec![0u64; 512].into();
        let workers: Vec<_> = (0..8)
            .map(|i| {
                let stop = stop2.clone();
                let mut ult = elite_rt::Builder::new();
                if data {
                    ult = ult.data(&block[..]);
                }
                if let Some(bytes) = footprint {
                    ult = ult.footprint(if i % 2 == 0 { 1 << 10 } else { bytes });
                }
                ult.spawn(move || {
                    while !stop.load(SeqCst) {
                        elite_rt::progress(1);
                        elite_rt::yield_now();
                    }
                })
                .unwrap()
            })
            .collect();
        workers.into_iter().for_each(|w| w.join().unwrap());
    });
    (stop, h)
}

/// Under `auto`, a busy program that declares footprints larger than a first-level cache (the
/// locality signal) sees the selector put the lead (reload-transient) in force before measuring
/// anything, then explore (the probe first) and settle on one of the candidates, every fixed
/// policy (gravity only where ULTs declared data blocks: without them it orders as
/// virtual-time does, and is left out, its rate 0); `progress` moves it to the program's units.
#[test]
fn auto_explores_every_candidate_and_settles() {
    hang_guard(120, "auto", || {
        for data in [true, false] {
            // (The largest budget: an exploration after about a tenth of a second.)
            let auto = elite_rt::policy::Auto::new().budget(0.5).unwrap();
            let rt = Runtime::builder().processors(2).policy(Policy::auto_with(auto)).build().unwrap();
            let (stop, h) = busy_reporters(&rt, data, Some(256 << 10));
            let t0 = std::time::Instant::now();
            while !rt.stats().auto.iter().any(|d| d.reason == AutoReason::Explored) {
                assert!(t0.elapsed() < Duration::from_secs(20), "no exploration: {}", rt.stats());
                std::thread::sleep(Duration::from_millis(5));
            }
            stop.store(true, SeqCst);
            h.join().unwrap();
            let stats = rt.stats();
            let reasons: Vec<AutoReason> = stats.auto.iter().map(|d| d.reason).collect();
            assert_eq!(
                reasons[..3],
                [AutoReason::Start, AutoReason::Locality, AutoReason::Explored],
                "{stats}"
            );
            assert_eq!(stats.auto[1].policy, "reload-transient", "the lead: {stats}");
            assert!(stats.auto[1].rates.is_empty(), "nothing measured for the lead: {stats}");
            let d = stats.auto.iter().find(|d| d.reason == AutoReason::Explored).unwrap();
            let names: Vec<&str> = d.rates.iter().map(|r| r.0).collect();
            assert_eq!(names, Policy::NAMES);
            // The first exploration is the probe: the lead's rate is the mean of ticks that
            // each saw progress; another candidate's single epoch may see none on a loaded
            // machine (its workers off their CPUs), so only never-measured is checked: gravity
            // without data blocks.
            assert!(d.rates[3].1 > 0.0, "data {data}: {d}");
            if !data {
                assert_eq!(d.rates[4].1, 0.0, "gravity explored only with data blocks: {d}");
            }
            assert!(names.contains(&d.policy));
            assert!(data || d.policy != "gravity", "{d}");
            assert_eq!(d.unit, elite_rt::policy::ProgressUnit::Reported);
            assert!(stats.total().progress > 0);
            assert!(format!("{stats}").contains("auto "), "the stats print the decisions");
        }
    });
}

/// Under `auto`, a busy program that declares nothing, or only footprints that fit in a
/// first-level cache, never leaves the first candidate on a machine without a hardware counter
/// (the recording policies would order by estimated misses it gives them nothing to estimate
/// from): no candidate is measured, and the budget's re-checks find nothing to explore.
#[test]
fn auto_without_the_locality_signal_stays_on_its_first_candidate() {
    use elite_rt::CounterChoice;
    hang_guard(120, "auto without signal", || {
        for footprint in [None, Some(1 << 10)] {
            let auto = elite_rt::policy::Auto::new().budget(0.5).unwrap();
            let rt = Runtime::builder()
                .processors(2)
                .counters(CounterChoice::Estimated)
                .topology("1 node x 2 cores, 32 KiB L1d per core, 512 KiB L2 per core")
                .policy(Policy::auto_with(auto))
                .build()
                .unwrap();
            let (stop, h) = busy_reporters(&rt, true, footprint);
            // Long enough for the lead and several re-checks' waits (about 50 ms each).
            common::wait_until(60, "progress", || rt.stats().total().progress > 1000);
            std::thread::sleep(Duration::from_millis(400));
            stop.store(true, SeqCst);
            h.join().unwrap();
            let stats = rt.stats();
            assert!(stats.auto.iter().all(|d| d.reason == AutoReason::Start), "{footprint:?}: {stats}");
            assert_eq!(stats.policy, "no-affinity", "{footprint:?}");
            // The same footprint declared larger than the first-level cache brings the lead.
        }
        let rt = Runtime::builder()
            .processors(2)
            .counters(CounterChoice::Estimated)
            .topology("1 node x 2 cores, 32 KiB L1d per core, 512 KiB L2 per core")
            .policy(Policy::auto())
            .build()
            .unwrap();
        let (stop, h) = busy_reporters(&rt, false, Some(33 << 10));
        common::wait_until(60, "the lead", || {
            rt.stats().auto.iter().any(|d| d.reason == AutoReason::Locality)
        });
        stop.store(true, SeqCst);
        h.join().unwrap();
        let stats = rt.stats();
        let lead = stats.auto.iter().find(|d| d.reason == AutoReason::Locality).unwrap();
        assert_eq!(lead.policy, "reload-transient", "{stats}");
    });
}

/// Under `auto`, the locality signal brings the lead and then, long before the budget allows an
/// exploration (here about a minute and a half: the smallest budget), the early probe: every
/// plausible candidate measured once against the lead (gravity, without data blocks, left out),
/// the choice logged as the first exploration.
#[test]
fn auto_probes_the_candidates_early_with_the_locality_signal() {
    use elite_rt::CounterChoice;
    hang_guard(120, "auto probe", || {
        // (The smallest budget, and phase changes only on a rate more than 11 times higher:
        // no exploration but the probe within the test's wait.)
        let auto = elite_rt::policy::Auto::new().budget(0.001).and_then(|a| a.phase_change(10.0)).unwrap();
        let rt = Runtime::builder()
            .processors(2)
            .no_chaos()
            .counters(CounterChoice::Estimated)
            .topology("1 node x 2 cores, 32 KiB L1d per core, 512 KiB L2 per core")
            .policy(Policy::auto_with(auto))
            .build()
            .unwrap();
        // Busy ULTs that report no units of their own: progress in runs (a first unit reported
        // would make the probe measure its noise again).
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let h = rt.spawn(move || {
            let workers: Vec<_> = (0..8)
                .map(|_| {
                    let stop = stop2.clone();
                    elite_rt::Builder::new()
                        .footprint(256 << 10)
                        .spawn(move || {
                            while !stop.load(SeqCst) {
                                elite_rt::yield_now();
                            }
                        })
                        .unwrap()
                })
                .collect();
            workers.into_iter().for_each(|w| w.join().unwrap());
        });
        common::wait_until(60, "the probe", || {
            rt.stats().auto.iter().any(|d| d.reason == AutoReason::Explored)
        });
        stop.store(true, SeqCst);
        h.join().unwrap();
        let stats = rt.stats();
        let reasons: Vec<AutoReason> = stats.auto.iter().map(|d| d.reason).collect();
        // (A phase change may follow, the rate moving as the workers stop.)
        assert_eq!(reasons[..3], [AutoReason::Start, AutoReason::Locality, AutoReason::Explored], "{stats}");
        let d = &stats.auto[2];
        let names: Vec<&str> = d.rates.iter().map(|r| r.0).collect();
        assert_eq!(names, Policy::NAMES);
        // The lead (virtual-time: every ULT declares 256 KiB, so reload-transient's estimate
        // would order by recency too) measured in ticks that each saw progress; the others in
        // one epoch each, which a loaded machine may leave without progress.
        assert_eq!(stats.auto[1].policy, "virtual-time", "{stats}");
        assert!(d.rates[1].1 > 0.0, "{d}");
        assert!(d.rates.iter().all(|r| r.1 >= 0.0 && r.1.is_finite()), "{d}");
        assert_eq!(d.rates[4].1, 0.0, "gravity left out without data blocks: {d}");
        assert_eq!(d.unit, elite_rt::policy::ProgressUnit::Runs);
        if reasons.len() == 3 {
            // (Or the lead again: the second probe starts from it.)
            assert!(
                [d.policy, "virtual-time"].contains(&stats.policy),
                "the probe's choice in force: {stats}"
            );
        }
    });
}

/// `Auto::remember`: once a runtime explored, the next one with the same key, candidates and
/// processor count starts warm, with the remembered choice in force at once and no exploration;
/// another processor count, or another key, starts cold.
#[test]
fn auto_remembers_its_choice_for_the_next_runtime() {
    use elite_rt::policy::{Auto, ProgressUnit};
    hang_guard(120, "auto remember", || {
        let key = "set_policy tests: auto_remembers_its_choice_for_the_next_runtime";
        let auto = Auto::new()
            .candidates([Policy::no_affinity(), Policy::virtual_time()])
            .and_then(|a| a.budget(0.5))
            .and_then(|a| a.remember(key))
            .unwrap();
        assert_eq!(auto.memory_key(), Some(key));
        let build = |processors: usize, auto: &Auto| {
            Runtime::builder()
                .processors(processors)
                .no_chaos()
                .policy(Policy::auto_with(auto.clone()))
                .build()
                .unwrap()
        };
        // A busy first runtime, until it explored.
        let rt = build(2, &auto);
        let (stop, h) = busy_reporters(&rt, false, Some(256 << 10));
        // (A full exploration is always remembered, logged as explored when it is the first,
        // else as a re-check or a phase change; the early probe, logged as explored, only when
        // its choice read the highest rate: one that keeps its lead, never the first candidate,
        // within the noise is not; and the first probe, which the re-probe follows, only when
        // it kept the lead, virtual-time.)
        let remembered = |decisions: &[elite_rt::policy::AutoDecision]| {
            let first_probe = decisions.iter().position(|d| d.reason == AutoReason::Explored);
            decisions
                .iter()
                .enumerate()
                .filter(|&(i, d)| {
                    let top = d.rates.iter().map(|r| r.1).fold(0.0, f64::max);
                    match d.reason {
                        AutoReason::Recheck | AutoReason::Unconfirmed | AutoReason::PhaseChange => true,
                        AutoReason::Explored if Some(i) == first_probe && d.policy != "virtual-time" => false,
                        AutoReason::Explored => {
                            d.policy == "no-affinity" || d.rates.iter().any(|r| r.0 == d.policy && r.1 == top)
                        }
                        _ => false,
                    }
                })
                .map(|(_, d)| d.clone())
                .next_back()
        };
        common::wait_until(60, "a remembered exploration", || remembered(&rt.stats().auto).is_some());
        stop.store(true, SeqCst);
        h.join().unwrap();
        let explored = remembered(&rt.stats().auto).unwrap();
        drop(rt);

        // The next one (idle: nothing to explore on) starts from that choice.
        let rt = build(2, &auto);
        common::wait_until(30, "the remembered decision", || rt.stats().auto.len() >= 2);
        let stats = rt.stats();
        let d = &stats.auto[1];
        assert_eq!((d.reason, d.policy), (AutoReason::Remembered, explored.policy), "{stats}");
        assert_eq!(d.unit, ProgressUnit::Relative);
        let names: Vec<&str> = d.rates.iter().map(|r| r.0).collect();
        assert_eq!(names, ["no-affinity", "virtual-time"]);
        // Fractions of the best, the remembered choice's the largest, or the first candidate's
        // where the largest is within the margin (2% by default) of it: an exploration settles
        // on the best pooled rate, and a tie goes to the first candidate. A candidate whose
        // epochs saw no progress (its workers off their CPUs on a loaded machine) may read 0.
        assert!(d.rates.iter().all(|r| (0.0..=1.0).contains(&r.1)), "fractions of the best: {d}");
        let top = d.rates.iter().map(|r| r.1).fold(0.0, f64::max);
        let chosen = d.rates.iter().find(|r| r.0 == d.policy).map(|r| r.1);
        let first = d.rates[0];
        // The rule's margin: the best is within 2% of the first candidate.
        let within_margin_of_first = top <= first.1 * 1.02;
        let tie_to_the_first = d.policy == first.0 && within_margin_of_first;
        if explored.reason == AutoReason::Unconfirmed {
            // A re-check that chose another candidate kept the one in force, until the next
            // re-check agrees: that one is remembered, and the pooled rates, read by the rule
            // (the best, or the first candidate where the best is within the margin of it),
            // choose another candidate than the one kept.
            let best = d.rates.iter().find(|r| r.1 == top).map(|r| r.0);
            let rule_choice = if within_margin_of_first { Some(first.0) } else { best };
            assert!(
                rule_choice != Some(d.policy),
                "an unconfirmed re-check's pooled rates choose another candidate than the one kept: {d}"
            );
        } else {
            assert!(
                chosen == Some(top) || tie_to_the_first,
                "the remembered choice has the best pooled rate, or ties the first candidate within the margin: {d}"
            );
        }
        assert!(top > 0.0, "{d}");
        assert!(format!("{d}").contains("(remembered)"), "{d}");
        assert_eq!(rt.stats().policy, explored.policy, "in force at once");
        drop(rt);

        // Not for another processor count, nor another key.
        let rt = build(1, &auto);
        std::thread::sleep(Duration::from_millis(100));
        assert!(rt.stats().auto.iter().all(|d| d.reason == AutoReason::Start), "{}", rt.stats());
        drop(rt);
        let other = auto.clone().remember("set_policy tests: another key").unwrap();
        let rt = build(2, &other);
        std::thread::sleep(Duration::from_millis(100));
        assert!(rt.stats().auto.iter().all(|d| d.reason == AutoReason::Start), "{}", rt.stats());
        assert_eq!(rt.stats().policy, "no-affinity");
    });
}
