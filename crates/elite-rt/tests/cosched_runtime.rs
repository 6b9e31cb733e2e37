//! The runtime's own coscheduling gate (`RuntimeBuilder::coschedule`): groups admitted to
//! processors by the coscheduler's plan, with no `Coscheduler::run` around the units; the ULTs
//! only yield between units and report them with `unit_done`.

use elite_rt::contention::{
    unit_done, Class, Coscheduler, Mode, ScriptedSignals, SignalSource, Signals, Window,
};
use elite_rt::{Builder, Group, Runtime};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const GB: f64 = 1e9;

/// Taken by every test of this file: each runs a 2-processor runtime whose ULTs spin through
/// their units, and what they check (which processors ran a group, and when) needs the CPUs
/// the runtime's processors run on, not shared with another such test's.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// [`SERIAL`], whether or not a test that held it failed.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn sig(memory: f64, llc: f64, l2: f64) -> Signals {
    Signals { memory: memory * GB, llc: llc * GB, l2: l2 * GB, scaling2: None }
}

/// Groups named `names`, each added to `cs` (no footprint).
fn groups_of<const N: usize>(cs: &Coscheduler, names: [&str; N]) -> [Group; N] {
    let groups = names.map(Group::new);
    for g in &groups {
        cs.add_group(g, 0, 0);
    }
    groups
}

/// Runs two ULTs of each of `groups` on `rt` (built with a co-scheduler), each calling
/// `unit(g)` with its group's index, reporting every unit it ran with `unit_done` and yielding
/// after it, until `unit` says it ran none (false); returns once all ended.
fn run_units(rt: &Runtime, groups: &[Group], unit: impl Fn(usize) -> bool + Clone + Send + Sync + 'static) {
    rt.block_on(|| {
        let mut ults = Vec::new();
        for (g, group) in groups.iter().enumerate() {
            for _ in 0..2 {
                let unit = unit.clone();
                let ult = Builder::new().group(group).spawn(move || {
                    while unit(g) {
                        unit_done(1 << 20);
                        elite_rt::yield_now();
                    }
                });
                ults.push(ult.unwrap());
            }
        }
        for u in ults {
            u.join().unwrap();
        }
    });
}

/// What [`run_gated`] saw.
struct Seen {
    /// `together[d][a][b]`: a unit of group `a` ran in domain `d` while one of group `b` did.
    together: Vec<Vec<Vec<bool>>>,
    /// Units each group's ULTs counted themselves.
    units: Vec<u64>,
    /// `domains[g][d]`: group `g` ran in domain `d`.
    domains: Vec<Vec<bool>>,
}

/// Runs two ULTs per group on `rt` (built with `cs`) for `run`, each repeating a unit of about
/// 100 us, reporting it with `unit_done` and yielding; `domain_size` processors per domain.
/// On a loaded host it goes on (up to 20 s) until every group completed 20 units in every
/// domain, so that what the tests look for had its chance.
fn run_gated(rt: &Runtime, cs: &Coscheduler, groups: &[Group], run: Duration, domain_size: usize) -> Seen {
    let n = groups.len();
    let domains = rt.processors() / domain_size;
    let inside: Arc<Vec<AtomicUsize>> = Arc::new((0..domains * n).map(|_| AtomicUsize::new(0)).collect());
    let together: Arc<Vec<AtomicBool>> =
        Arc::new((0..domains * n * n).map(|_| AtomicBool::new(false)).collect());
    let ran_in: Arc<Vec<AtomicBool>> = Arc::new((0..domains * n).map(|_| AtomicBool::new(false)).collect());
    let units: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let done_in: Arc<Vec<AtomicU64>> = Arc::new((0..domains * n).map(|_| AtomicU64::new(0)).collect());
    cs.start();
    let began = Instant::now();
    let go_on = {
        let done_in = done_in.clone();
        move || {
            let t = began.elapsed();
            t < Duration::from_secs(20) && (t < run || done_in.iter().any(|u| u.load(Ordering::Relaxed) < 20))
        }
    };
    let unit = {
        let (inside, together, ran_in, units) =
            (inside.clone(), together.clone(), ran_in.clone(), units.clone());
        let done_in = done_in.clone();
        move |g: usize| {
            if !go_on() {
                return false;
            }
            let d = elite_rt::current().processor() / domain_size;
            ran_in[d * n + g].store(true, Ordering::Relaxed);
            inside[d * n + g].fetch_add(1, Ordering::SeqCst);
            let until = Instant::now() + Duration::from_micros(100);
            while Instant::now() < until {
                for o in (0..n).filter(|&o| o != g) {
                    if inside[d * n + o].load(Ordering::SeqCst) > 0 {
                        together[(d * n + g) * n + o].store(true, Ordering::Relaxed);
                    }
                }
            }
            inside[d * n + g].fetch_sub(1, Ordering::SeqCst);
            units[g].fetch_add(1, Ordering::Relaxed);
            done_in[d * n + g].fetch_add(1, Ordering::Relaxed);
            true
        }
    };
    run_units(rt, groups, unit);
    cs.stop();
    Seen {
        together: (0..domains)
            .map(|d| {
                (0..n)
                    .map(|a| (0..n).map(|b| together[(d * n + a) * n + b].load(Ordering::Relaxed)).collect())
                    .collect()
            })
            .collect(),
        units: units.iter().map(|u| u.load(Ordering::Relaxed)).collect(),
        domains: (0..n)
            .map(|g| (0..domains).map(|d| ran_in[d * n + g].load(Ordering::Relaxed)).collect())
            .collect(),
    }
}

#[test]
fn gang_under_the_runtime_runs_one_group_at_a_time() {
    let _serial = serial();
    let cs = Coscheduler::builder(Mode::Gang).quantum(Duration::from_millis(3)).build();
    let rt = Runtime::builder().processors(2).no_chaos().coschedule(&cs).build().unwrap();
    let groups = groups_of(&cs, ["a", "b", "c"]);
    let seen = run_gated(&rt, &cs, &groups, Duration::from_millis(200), 2);
    assert!(seen.together[0].iter().flatten().all(|&t| !t), "{:?}", seen.together);
    let report = cs.report();
    // Every unit counted once, by the ULTs and by the coscheduler.
    assert_eq!(report.iter().map(|r| r.completions).collect::<Vec<_>>(), seen.units);
    assert!(seen.units.iter().all(|&u| u > 0), "{:?}", seen.units);
    let gate = cs.gate_stats().unwrap();
    assert!(gate.sent + gate.held > 0, "{gate:?}");
    assert_eq!(gate.held_now, 0, "{gate:?}");
}

#[test]
fn lcn_under_the_runtime_keeps_the_link_group_from_the_cache_group() {
    let _serial = serial();
    // Group 0: L (a stream), group 1: C (an L3-resident stencil), group 2: N (a spin).
    let script = ScriptedSignals::new()
        .group(0, [sig(8.0, 8.0, 8.0)])
        .group(1, [sig(0.1, 6.0, 9.0)])
        .group(2, [Signals::default()]);
    let cs = Coscheduler::builder(Mode::Lcn)
        .quantum(Duration::from_millis(3))
        .bandwidth(10.0 * GB)
        .signals(script)
        .build();
    let rt = Runtime::builder().processors(2).no_chaos().coschedule(&cs).build().unwrap();
    let groups = groups_of(&cs, ["stream", "stencil", "spin"]);
    let seen = run_gated(&rt, &cs, &groups, Duration::from_millis(300), 2);
    let report = cs.report();
    assert_eq!(
        report.iter().map(|r| r.class).collect::<Vec<_>>(),
        [Some(Class::L), Some(Class::C), Some(Class::N)],
        "{report:?} {:?} {:?}",
        seen.units,
        cs.plan()
    );
    // The classes reach the runtime's stats with the groups' units (a class decided in the
    // last window may not be there yet; any that is there agrees).
    let stats: Vec<Option<&str>> = rt.stats().groups.iter().map(|g| g.class).collect();
    assert!(
        stats.iter().zip(&report).all(|(s, r)| s.is_none() || *s == r.class.map(|c| c.name())),
        "{stats:?}"
    );
    assert!(stats.iter().any(|s| s.is_some()), "{stats:?}");
    let together = &seen.together[0];
    assert!(!together[0][1] && !together[1][0], "L and C ran at once");
    let plan: Vec<Vec<(usize, usize)>> = cs.plan().into_iter().map(|s| s.runs).collect();
    assert_eq!(plan, [vec![(2, 1), (0, 1)], vec![(2, 2)], vec![(1, 2)]]);
    assert_eq!(report.iter().map(|r| r.completions).collect::<Vec<_>>(), seen.units);
    assert!(seen.units.iter().all(|&u| u > 0), "{:?}", seen.units);
}

#[test]
fn gang_on_two_bandwidth_domains_runs_a_group_per_domain() {
    let _serial = serial();
    // Two nodes of two processors: each node runs one slot of the plan, the nodes' slots in
    // turn, so both groups run at once, each alone in its domain, and each in both over time.
    let cs = Coscheduler::builder(Mode::Gang).quantum(Duration::from_millis(3)).build();
    let rt =
        Runtime::builder().topology("2 nodes x 2 processors").no_chaos().coschedule(&cs).build().unwrap();
    let groups = groups_of(&cs, ["a", "b"]);
    assert_eq!((0..4).map(|p| rt.topology().node_of(p)).collect::<Vec<_>>(), [0, 0, 1, 1]);
    let seen = run_gated(&rt, &cs, &groups, Duration::from_millis(200), 2);
    for d in &seen.together {
        assert!(d.iter().flatten().all(|&t| !t), "{:?}", seen.together);
    }
    assert!(seen.domains.iter().flatten().all(|&r| r), "{:?}", seen.domains);
    let report = cs.report();
    assert_eq!(report.iter().map(|r| r.completions).collect::<Vec<_>>(), seen.units);
}

#[test]
fn nothing_is_lost_or_run_twice_under_a_fast_quantum() {
    let _serial = serial();
    // Many ULTs per group, each a fixed number of units, some taking a shared lock, with a
    // quantum of 1 ms (the chaos mode may move them too): every unit runs exactly once.
    const GROUPS: usize = 4;
    const ULTS: usize = 12;
    const UNITS: u64 = 150;
    for mode in [Mode::Gang, Mode::MissBalance, Mode::Lcn] {
        let cs = Coscheduler::builder(mode).quantum(Duration::from_millis(1)).bandwidth(10.0 * GB).build();
        let rt = Runtime::builder().processors(2).coschedule(&cs).build().unwrap();
        let groups: Vec<Group> = (0..GROUPS).map(|g| Group::new(format!("g{g}"))).collect();
        for g in &groups {
            cs.add_group(g, 0, 0);
        }
        cs.start();
        let locked = Arc::new(elite_rt::sync::Mutex::new(0u64));
        let done: Vec<u64> = rt.block_on(|| {
            let ults: Vec<_> = groups
                .iter()
                .flat_map(|g| std::iter::repeat_n(g, ULTS))
                .enumerate()
                .map(|(i, g)| {
                    let locked = locked.clone();
                    Builder::new()
                        .group(g)
                        .spawn(move || {
                            let mut mine = 0;
                            for u in 0..UNITS {
                                if (i as u64 + u).is_multiple_of(7) {
                                    *locked.lock().unwrap() += 1;
                                }
                                std::hint::black_box((0..200u64).sum::<u64>());
                                mine += 1;
                                unit_done(0);
                                elite_rt::yield_now();
                            }
                            mine
                        })
                        .unwrap()
                })
                .collect();
            ults.into_iter().map(|u| u.join().unwrap()).collect()
        });
        cs.stop();
        assert!(done.iter().all(|&d| d == UNITS), "{mode:?}: {done:?}");
        let expected_locked = (0..GROUPS * ULTS)
            .map(|i| (0..UNITS).filter(|u| (i as u64 + u).is_multiple_of(7)).count() as u64)
            .sum::<u64>();
        assert_eq!(*locked.lock().unwrap(), expected_locked, "{mode:?}");
        let report = cs.report();
        assert!(report.iter().all(|r| r.completions == ULTS as u64 * UNITS), "{mode:?}: {report:?}");
        assert_eq!(cs.gate_stats().unwrap().held_now, 0, "{mode:?}");
    }
}

#[test]
fn a_runtime_dropped_while_ults_are_held_shuts_down() {
    let _serial = serial();
    // Gang with a long quantum: the other group's ULTs are held when the runtime goes.
    let cs = Coscheduler::builder(Mode::Gang).quantum(Duration::from_secs(10)).build();
    let rt = Runtime::builder().processors(2).no_chaos().coschedule(&cs).build().unwrap();
    let groups = groups_of(&cs, ["a", "b"]);
    cs.start();
    let ran = Arc::new(AtomicU64::new(0));
    for g in &groups {
        for _ in 0..2 {
            let ran = ran.clone();
            let _ = Builder::new().group(g).spawn_on(&rt, move || loop {
                ran.fetch_add(1, Ordering::Relaxed);
                elite_rt::sleep(Duration::from_millis(1));
            });
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(ran.load(Ordering::Relaxed) > 0);
    assert!(cs.gate_stats().unwrap().held_now > 0, "{:?}", cs.gate_stats());
    drop(rt);
    let gate = cs.gate_stats();
    assert!(gate.is_none(), "the runtime is gone: {gate:?}");
}

#[test]
fn a_coscheduler_serves_one_runtime() {
    let _serial = serial();
    let cs = Coscheduler::builder(Mode::Gang).build();
    let _rt = Runtime::builder().processors(1).coschedule(&cs).build().unwrap();
    let err = Runtime::builder().processors(1).coschedule(&cs).build().unwrap_err();
    assert!(err.to_string().contains("coschedule"), "{err}");
}

#[test]
fn the_probe_runs_a_group_on_both_processors_before_one() {
    let _serial = serial();
    // Two cache groups (no filling), two ULTs each, units of 1 ms; a 40 ms quantum makes each
    // probe phase at least 10 ms, some 10 units. The probe admits group 1 only once group 0's
    // is over: its ULTs are held until then. Its two-core phase comes first, and the gate
    // releases the held ULTs to both processors, so both run the group's first units; a
    // one-core phase first would run its first ten or so units on one processor.
    let script = ScriptedSignals::new().group(0, [sig(0.1, 6.0, 9.0)]).group(1, [sig(0.1, 6.0, 9.0)]);
    let cs = Coscheduler::builder(Mode::Lcn)
        .quantum(Duration::from_millis(40))
        .bandwidth(10.0 * GB)
        .signals(script)
        .build();
    let rt = Runtime::builder().processors(2).no_chaos().coschedule(&cs).build().unwrap();
    let groups = groups_of(&cs, ["a", "b"]);
    let ran_on: Arc<std::sync::Mutex<Vec<usize>>> = Arc::default();
    cs.start();
    let began = Instant::now();
    let unit = {
        let ran_on = ran_on.clone();
        move |g: usize| {
            let seen = ran_on.lock().unwrap().len();
            if seen >= 8 || began.elapsed() > Duration::from_secs(20) {
                return false;
            }
            let until = Instant::now() + Duration::from_millis(1);
            while Instant::now() < until {}
            if g == 1 {
                ran_on.lock().unwrap().push(elite_rt::current().processor());
            }
            true
        }
    };
    run_units(&rt, &groups, unit);
    cs.stop();
    let ran_on = ran_on.lock().unwrap().clone();
    assert!(ran_on.len() >= 8, "group 1 did not get 8 units in 20 s: {ran_on:?}");
    let first = &ran_on[..8];
    assert!(first.contains(&0) && first.contains(&1), "group 1's first units ran on {first:?}");
}

/// A cache group's signals (C) for group 0 and a spin's (N) for the others; group 0's first
/// probe reads as no scaling at all (1.0: a probe that misread the group), every later one as
/// ideal scaling (0.5: what its independent units measure where both processors get a CPU,
/// scripted so that the test does not depend on the host's load).
struct FirstProbeMisread {
    first: Option<(f64, f64)>,
}

impl SignalSource for FirstProbeMisread {
    fn signals(&mut self, w: &Window) -> Signals {
        if w.group != 0 {
            return Signals::default();
        }
        let probe = w.probe.unwrap_or_default();
        let first = *self.first.get_or_insert(probe);
        let scaling2 = Some(if probe == first { 1.0 } else { 0.5 });
        Signals { scaling2, ..sig(0.1, 6.0, 9.0) }
    }

    fn name(&self) -> &'static str {
        "first probe misread"
    }
}

/// Runs two ULTs each of a cache group (group 0, whose units scale) and a spin (group 1) on a
/// 2-processor runtime under `cs` (LCN, quantum 3 ms), units of 1 ms, until `done(&cs)` and at
/// least `at_least` passed (at most 20 s); the time it ran.
fn run_reprobed(
    cs: &Coscheduler,
    at_least: Duration,
    done: impl Fn(&Coscheduler) -> bool + Send + Sync + 'static,
) -> Duration {
    let rt = Runtime::builder().processors(2).no_chaos().coschedule(cs).build().unwrap();
    let groups = groups_of(cs, ["cache", "spin"]);
    let finished = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (cs, finished) = (cs.clone(), finished.clone());
        std::thread::spawn(move || {
            let began = Instant::now();
            while began.elapsed() < Duration::from_secs(20) && (began.elapsed() < at_least || !done(&cs)) {
                std::thread::sleep(Duration::from_millis(1));
            }
            finished.store(true, Ordering::Relaxed);
        })
    };
    cs.start();
    let began = Instant::now();
    run_units(&rt, &groups, move |_| {
        if finished.load(Ordering::Relaxed) {
            return false;
        }
        let until = Instant::now() + Duration::from_millis(1);
        while Instant::now() < until {}
        true
    });
    let ran = began.elapsed();
    cs.stop();
    watcher.join().unwrap();
    ran
}

fn lcn_3ms(source: impl SignalSource + 'static) -> Coscheduler {
    Coscheduler::builder(Mode::Lcn)
        .quantum(Duration::from_millis(3))
        .bandwidth(10.0 * GB)
        .signals(source)
        .build()
}

#[test]
#[cfg_attr(miri, ignore = "runs a runtime and spins for wall-clock time")]
fn a_cache_group_its_probe_misread_is_probed_again_and_given_both_cores() {
    let _serial = serial();
    // The first probe reads the cache group as not scaling: the plan gives it one core,
    // beside half the spin. A re-probe, a few rounds later, reads it as scaling, and the plan
    // gives it both cores.
    let cs = lcn_3ms(FirstProbeMisread { first: None });
    // (On a host so loaded that a probe phase sees none of a group's units, the group is first
    // planned alone, unclassified, and classified by a window of the plan: what counts is that a
    // plan gave the cache group one core, and a later one both.)
    let one_core = Arc::new(AtomicBool::new(false));
    let seen = one_core.clone();
    run_reprobed(&cs, Duration::ZERO, move |cs| {
        let plan = cs.plan();
        let classified = cs.report()[0].class.is_some();
        if classified && plan.iter().any(|s| s.runs.contains(&(0, 1))) {
            seen.store(true, Ordering::Relaxed);
        }
        seen.load(Ordering::Relaxed) && plan.iter().any(|s| s.runs == [(0, 2)])
    });
    assert!(one_core.load(Ordering::Relaxed), "no plan gave the cache group one core: {:?}", cs.report());
    let plan: Vec<Vec<(usize, usize)>> = cs.plan().into_iter().map(|s| s.runs).collect();
    assert!(plan.contains(&vec![(0, 2)]), "{plan:?}, {:?}", cs.report());
    let report = cs.report();
    assert!(report[0].reprobes >= 1, "{report:?}");
    assert_eq!(report[0].class, Some(Class::C), "{report:?}");
    // The spin's cores do not follow from a probe: never probed again.
    assert_eq!(report[1].reprobes, 0, "{report:?}");
}

#[test]
#[cfg_attr(miri, ignore = "runs a runtime and spins for wall-clock time")]
fn re_probes_that_confirm_the_reading_back_off() {
    let _serial = serial();
    // The cache group reads as not scaling in every probe: each re-probe confirms its one
    // core, and the wait before the next doubles (2 rounds of the plan's 2 slots, then 4, 8,
    // 16, 32, 32, ...). The plan stays.
    let no_scaling = Signals { scaling2: Some(1.0), ..sig(0.1, 6.0, 9.0) };
    let cs = lcn_3ms(ScriptedSignals::new().group(0, [no_scaling]));
    let ran = run_reprobed(&cs, Duration::from_millis(600), |cs| cs.report()[0].reprobes >= 1);
    let plan: Vec<Vec<(usize, usize)>> = cs.plan().into_iter().map(|s| s.runs).collect();
    assert!(plan.contains(&vec![(1, 1), (0, 1)]), "{plan:?}, {:?}", cs.report());
    // The most re-probes the quanta of the run allow with that back-off (each quantum lasts
    // at least its 3 ms).
    let quanta = (ran.as_millis() / 3) as usize;
    let (mut allowed, mut due, mut rounds) = (0, 0, 2);
    loop {
        due += 2 * rounds;
        if due > quanta {
            break;
        }
        allowed += 1;
        rounds = (rounds * 2).min(32);
    }
    let report = cs.report();
    assert!(report[0].reprobes >= 1, "{report:?}");
    assert!(report[0].reprobes <= allowed, "{} re-probes in {ran:?}, at most {allowed}", report[0].reprobes);
    assert_eq!(report[0].reclassified, 0, "{report:?}");
}
