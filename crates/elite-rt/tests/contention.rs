//! The coscheduler's modes on a real runtime: which groups' units run at once, and the classes
//! it reports (scripted signals: deterministic classes on any machine).

use elite_rt::contention::{Class, Coscheduler, Mode, ScriptedSignals, Signals};
use elite_rt::{Builder, Group, Runtime};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const GB: f64 = 1e9;

fn sig(memory: f64, llc: f64, l2: f64) -> Signals {
    Signals { memory: memory * GB, llc: llc * GB, l2: l2 * GB, scaling2: None }
}

/// An LCN coscheduler of two cores with a 10 GB/s link, its quantum `ms`, reading `script`.
fn lcn(ms: u64, script: ScriptedSignals) -> Coscheduler {
    Coscheduler::builder(Mode::Lcn)
        .quantum(Duration::from_millis(ms))
        .cores(2)
        .bandwidth(10.0 * GB)
        .signals(script)
        .build()
}

/// Groups named `names`, each added to `cs` (no declared bytes, no footprint).
fn groups_of<const N: usize>(cs: &Coscheduler, names: [&str; N]) -> [Group; N] {
    let groups = names.map(Group::new);
    for g in &groups {
        cs.add_group(g, 0, 0);
    }
    groups
}

/// The longest a mix runs while waiting for what its test needs: far longer than any quiet run
/// takes, so that a starved test process reaches the same state rather than failing on time.
const PATIENCE: Duration = Duration::from_secs(20);

/// When a group's ULTs start.
#[derive(Clone, Copy, Default)]
enum Start {
    /// With the run.
    #[default]
    Now,
    /// This long after the run began.
    After(Duration),
    /// Once the coscheduler has made its first plan (every probe is over).
    AfterPlan,
}

/// Runs `ULTS` ULTs per group, each repeating a unit of about 100 us through the gate, for at
/// least `least` and then until `done` holds of the coscheduler and of the pairs seen so far
/// (or [`PATIENCE`] has passed); returns, per pair of groups, whether units of both were ever
/// inside at once. Group `i`'s ULTs start as `start[i]` says ([`Start::Now`] if absent).
fn run_mix(
    cs: &Coscheduler,
    groups: &[Group],
    start: &[Start],
    least: Duration,
    done: impl Fn(&Coscheduler, &[Vec<bool>]) -> bool + Sync,
) -> Vec<Vec<bool>> {
    const ULTS: usize = 2;
    let rt = Runtime::builder().processors(2).no_chaos().build().unwrap();
    let n = groups.len();
    let inside: Arc<Vec<AtomicUsize>> = Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect());
    let together: Arc<Vec<AtomicBool>> = Arc::new((0..n * n).map(|_| AtomicBool::new(false)).collect());
    let pairs = |together: &[AtomicBool]| -> Vec<Vec<bool>> {
        (0..n).map(|a| (0..n).map(|b| together[a * n + b].load(Ordering::Relaxed)).collect()).collect()
    };
    let over = Arc::new(AtomicBool::new(false));
    cs.start();
    let began = Instant::now();
    rt.block_on(|| {
        let mut ults = Vec::new();
        for (g, group) in groups.iter().enumerate() {
            for _ in 0..ULTS {
                let (cs, inside, together, over) =
                    (cs.clone(), inside.clone(), together.clone(), over.clone());
                let start = start.get(g).copied().unwrap_or_default();
                let ult = Builder::new().group(group).spawn(move || {
                    match start {
                        Start::Now => {}
                        Start::After(delay) => elite_rt::sleep(delay),
                        Start::AfterPlan => {
                            while cs.plan().is_empty() && !over.load(Ordering::SeqCst) {
                                elite_rt::sleep(Duration::from_millis(1));
                            }
                        }
                    }
                    while !over.load(Ordering::SeqCst) {
                        cs.run(g, 1 << 20, || {
                            inside[g].fetch_add(1, Ordering::SeqCst);
                            let until = Instant::now() + Duration::from_micros(100);
                            while Instant::now() < until {
                                for (o, count) in inside.iter().enumerate() {
                                    if o != g && count.load(Ordering::SeqCst) > 0 {
                                        together[g * inside.len() + o].store(true, Ordering::Relaxed);
                                    }
                                }
                            }
                            inside[g].fetch_sub(1, Ordering::SeqCst);
                        });
                        elite_rt::yield_now();
                    }
                });
                ults.push(ult.unwrap());
            }
        }
        while began.elapsed() < least || (!done(cs, &pairs(&together)) && began.elapsed() < PATIENCE) {
            elite_rt::sleep(Duration::from_millis(1));
        }
        over.store(true, Ordering::SeqCst);
        for u in ults {
            u.join().unwrap();
        }
    });
    cs.stop();
    let classes: Vec<Option<&str>> = rt.stats().groups.iter().map(|s| s.class).collect();
    let expected: Vec<Option<&str>> = cs.report().iter().map(|r| r.class.map(|c| c.name())).collect();
    // A class reaches the runtime's stats at the group's next unit after it was decided, so a
    // class decided in the last window may not be there yet; any that is there agrees.
    for (seen, expected) in classes.iter().zip(&expected) {
        assert!(seen.is_none() || seen == expected, "stats {classes:?}, coscheduler {expected:?}");
    }
    pairs(&together)
}

/// The classes the coscheduler reports, in the order of its groups.
fn classes(cs: &Coscheduler) -> Vec<Option<Class>> {
    cs.report().iter().map(|r| r.class).collect()
}

#[test]
fn lcn_never_runs_the_memory_link_group_beside_the_cache_group() {
    // Group 0: L (a stream), group 1: C (an L3-resident stencil), group 2: N (a spin).
    let script = ScriptedSignals::new()
        .group(0, [sig(8.0, 8.0, 8.0)])
        .group(1, [sig(0.1, 6.0, 9.0)])
        .group(2, [Signals::default()]);
    let cs = lcn(3, script);
    let groups = groups_of(&cs, ["stream", "stencil", "spin"]);
    let all = [Some(Class::L), Some(Class::C), Some(Class::N)];
    let together = run_mix(&cs, &groups, &[], Duration::from_millis(300), |cs, together| {
        classes(cs) == all && together[0][2] && cs.report().iter().all(|r| r.completions > 0)
    });
    let report = cs.report();
    assert_eq!(classes(&cs), all);
    assert!(!together[0][1] && !together[1][0], "L and C ran at once");
    // The plan: the spin's halves beside the stream, and the rest alone.
    let plan: Vec<Vec<(usize, usize)>> = cs.plan().into_iter().map(|s| s.runs).collect();
    assert_eq!(plan, [vec![(2, 1), (0, 1)], vec![(2, 2)], vec![(1, 2)]]);
    assert!(together[0][2], "the spin never ran beside the stream");
    assert!(report.iter().all(|r| r.completions > 0), "{report:?}");
}

#[test]
fn gang_runs_one_group_at_a_time() {
    let cs = Coscheduler::builder(Mode::Gang).quantum(Duration::from_millis(3)).cores(2).build();
    let groups = groups_of(&cs, ["a", "b", "c"]);
    let together = run_mix(&cs, &groups, &[], Duration::from_millis(150), |cs, _| {
        cs.report().iter().all(|r| r.completions > 0)
    });
    assert!(together.iter().flatten().all(|&t| !t), "{together:?}");
    assert!(cs.report().iter().all(|r| r.completions > 0 && r.class.is_none()));
}

#[test]
fn a_group_whose_behaviour_changes_is_reclassified_and_replanned() {
    // Group 0 looks like a cache group for its probe and first window, then like a stream.
    let script = ScriptedSignals::new()
        .group(0, [sig(0.1, 6.0, 9.0), sig(0.1, 6.0, 9.0), sig(8.0, 8.0, 8.0)])
        .group(1, [sig(0.1, 6.0, 9.0)]);
    let cs = lcn(3, script);
    let groups = groups_of(&cs, ["phased", "stencil"]);
    run_mix(&cs, &groups, &[], Duration::from_millis(200), |cs, _| {
        classes(cs) == [Some(Class::L), Some(Class::C)]
    });
    let report = cs.report();
    assert_eq!(report[0].class, Some(Class::L));
    assert_eq!(report[0].reclassified, 1);
    assert_eq!(report[1].class, Some(Class::C));
    // An L group and a C group: never paired, each alone.
    let plan: Vec<Vec<(usize, usize)>> = cs.plan().into_iter().map(|s| s.runs).collect();
    assert_eq!(plan, [vec![(0, 2)], vec![(1, 2)]]);
}

#[test]
fn a_group_its_probe_did_not_see_runs_alone_until_classified() {
    // The cache group's ULTs start after every probe is over: it is unclassified at the first
    // plan, and must not be paired with the stream meanwhile.
    let script = ScriptedSignals::new().group(0, [sig(8.0, 8.0, 8.0)]).group(1, [sig(0.1, 6.0, 9.0)]);
    let cs = lcn(2, script);
    let groups = groups_of(&cs, ["stream", "late stencil"]);
    // The first plan, made while the stencil has not started (its ULTs wait for that plan;
    // the probe's phases for the stencil each wait 100 ms for a unit, then end empty).
    let watcher = {
        let cs = cs.clone();
        std::thread::spawn(move || {
            let began = Instant::now();
            while cs.plan().is_empty() && began.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(1));
            }
            cs.plan()
        })
    };
    let start = [Start::Now, Start::AfterPlan];
    let together = run_mix(&cs, &groups, &start, Duration::from_millis(200), |cs, _| {
        cs.report()[1].class == Some(Class::C)
    });
    let before: Vec<Vec<(usize, usize)>> = watcher.join().unwrap().into_iter().map(|s| s.runs).collect();
    // Unclassified, the stencil runs alone (and so does the stream, which pairs only with N).
    assert_eq!(before, [vec![(0, 2)], vec![(1, 2)]]);
    assert!(!together[0][1] && !together[1][0], "L and C ran at once");
    assert_eq!(cs.report()[1].class, Some(Class::C));
}

#[test]
fn a_probe_waits_for_the_first_units_of_a_group_that_starts_late() {
    // The stencil's ULTs start four quanta after the stream's: each phase of its probe waits
    // for its units (here up to 100 ms) rather than ending empty, and classifies it.
    let script = ScriptedSignals::new().group(0, [sig(8.0, 8.0, 8.0)]).group(1, [sig(0.1, 6.0, 9.0)]);
    let cs = lcn(3, script);
    let groups = groups_of(&cs, ["stream", "late stencil"]);
    let start = [Start::Now, Start::After(Duration::from_millis(12))];
    let together = run_mix(&cs, &groups, &start, Duration::from_millis(200), |cs, _| {
        classes(cs) == [Some(Class::L), Some(Class::C)]
    });
    let report = cs.report();
    assert!(report.iter().all(|r| r.probe.is_some_and(|(one, two)| one > 0.0 && two > 0.0)), "{report:?}");
    assert_eq!(classes(&cs), [Some(Class::L), Some(Class::C)]);
    assert!(report.iter().all(|r| r.reclassified == 0), "{report:?}");
    assert!(!together[0][1] && !together[1][0], "L and C ran at once");
}

#[test]
fn a_probe_ends_when_a_group_stops_completing_units() {
    // The second group completes one unit and then blocks for the rest of the run: its probe's
    // two-core phase waits for a second unit (one per core) only as long as its patience
    // (100 ms here), measures no more, and the one-core phase sees none; the probe ends, the
    // plan is made, and the group runs alone, unclassified.
    let script = ScriptedSignals::new().group(0, [sig(8.0, 8.0, 8.0)]).group(1, [sig(0.1, 6.0, 9.0)]);
    let cs = lcn(3, script);
    let groups = groups_of(&cs, ["stream", "stuck"]);
    let rt = Runtime::builder().processors(2).no_chaos().build().unwrap();
    let run = Duration::from_secs(3);
    let began = Instant::now();
    let deadline = began + run;
    let one = Arc::new(AtomicUsize::new(0));
    cs.start();
    let planned = rt.block_on(|| {
        let mut ults = Vec::new();
        for (g, group) in groups.iter().enumerate() {
            for _ in 0..2 {
                let (cs, one) = (cs.clone(), one.clone());
                let ult = Builder::new().group(group).spawn(move || {
                    while Instant::now() < deadline {
                        if g == 1 && one.fetch_add(1, Ordering::SeqCst) > 0 {
                            elite_rt::sleep(Duration::from_millis(5)); // blocked: no unit
                            continue;
                        }
                        cs.run(g, 1 << 20, || {
                            let until = Instant::now() + Duration::from_micros(100);
                            while Instant::now() < until {}
                        });
                        elite_rt::yield_now();
                    }
                });
                ults.push(ult.unwrap());
            }
        }
        // The plan appears once the probe is over: well before the run's end.
        let mut planned = None;
        while Instant::now() < deadline {
            if !cs.plan().is_empty() {
                planned = Some(began.elapsed());
                break;
            }
            elite_rt::sleep(Duration::from_millis(1));
        }
        for u in ults {
            u.join().unwrap();
        }
        planned
    });
    cs.stop();
    // Each of the stuck group's two phases lasts about twice its patience (100 ms) at most:
    // the plan came before the run's end, with the stuck group alone.
    assert!(planned.is_some(), "no plan in {run:?}");
    let plan: Vec<Vec<(usize, usize)>> = cs.plan().into_iter().map(|s| s.runs).collect();
    assert_eq!(plan, [vec![(0, 2)], vec![(1, 2)]]);
    let report = cs.report();
    assert_eq!(report[1].completions, 1, "{report:?}");
    assert_eq!(report[1].class, None, "{report:?}");
    assert_eq!(report[0].class, Some(Class::L), "{report:?}");
}
