//! The aggregation modifier (`Policy::aggregate`, IAS): a group's ULTs run back to back, under
//! every policy, within the fairness bound, not past the footprint cut-off, and following the
//! master of a shared cache.

use elite_rt::policy::{Aggregate, Policy};
use elite_rt::{Builder, Group, Place, PlaceMode, Runtime};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The order of runs: `(processor, group's tag)` pushed by each ULT at the start of each run.
type Log = Arc<Mutex<Vec<(usize, u8)>>>;

fn note(log: &Log, tag: u8) {
    log.lock().unwrap().push((elite_rt::current().processor(), tag));
}

/// `groups` groups of `ults` ULTs, spawned interleaved (a b a b ...), each noting `yields + 1`
/// runs on one processor under `policy`; returns the order of the runs and the stats.
fn interleaved(
    policy: Policy,
    groups: u8,
    ults: usize,
    yields: usize,
    footprint: usize,
) -> (Vec<u8>, elite_rt::RuntimeStats) {
    let rt = Runtime::builder().topology("1x1, 1 MiB L2 per core").no_chaos().policy(policy).build().unwrap();
    let log: Log = Arc::default();
    let gs: Vec<Group> = (0..groups).map(|g| Group::new(format!("g{g}"))).collect();
    let l = log.clone();
    rt.block_on(move || {
        let hs: Vec<_> = (0..ults)
            .flat_map(|_| gs.iter().enumerate())
            .map(|(tag, g)| {
                let l = l.clone();
                Builder::new()
                    .group(g)
                    .footprint(footprint)
                    .spawn(move || {
                        for _ in 0..yields {
                            note(&l, tag as u8);
                            elite_rt::yield_now();
                        }
                        note(&l, tag as u8);
                    })
                    .unwrap()
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    let order = log.lock().unwrap().iter().map(|&(_, tag)| tag).collect();
    (order, rt.stats())
}

/// How often the group changes from one run to the next.
fn group_changes(order: &[u8]) -> usize {
    order.windows(2).filter(|w| w[0] != w[1]).count()
}

#[test]
fn every_policy_with_aggregation_runs_a_groups_ults_back_to_back() {
    for name in Policy::NAMES {
        let plain: Policy = name.parse().unwrap();
        let (order, stats) = interleaved(plain.clone(), 4, 4, 40, 64 << 10);
        let plain_changes = group_changes(&order);
        assert!(stats.groups.iter().all(|g| g.aggregated == 0), "{name}: no bonus without the modifier");
        let (order, stats) = interleaved(plain.aggregate(Aggregate::ALWAYS), 4, 4, 40, 64 << 10);
        let changes = group_changes(&order);
        assert_eq!(order.len(), 4 * 4 * 41);
        assert!(
            changes * 4 <= plain_changes,
            "{name}: {changes} group changes aggregated, {plain_changes} without: {order:?}"
        );
        assert!(stats.groups.iter().all(|g| g.aggregated > 0), "{name}: {:?}", stats.groups);
    }
}

#[test]
fn a_groups_ults_take_turns_together_after_an_interleaved_start() {
    // Every ULT's first run comes from the start-queue, interleaved (a b c d a b c d ...), and
    // each enters the runqueue favoured (its own group is the one running). After that the
    // group followed runs its ULTs in turn, all of them, before the next group: one block of
    // runs per group, not one per ULT (each ULT running all its turns back to back while its
    // siblings wait behind the other groups).
    const GROUPS: u8 = 4;
    const ULTS: usize = 4;
    let (order, _) =
        interleaved(Policy::no_affinity().aggregate(Aggregate::ALWAYS), GROUPS, ULTS, 3, 64 << 10);
    assert_eq!(order.len(), usize::from(GROUPS) * ULTS * 4);
    let start = usize::from(GROUPS) * ULTS;
    assert!(group_changes(&order[..start]) >= start - 1, "the start is interleaved: {order:?}");
    let after = &order[start..];
    assert!(group_changes(after) < usize::from(GROUPS), "one block of runs per group: {order:?}");
    for g in 0..GROUPS {
        assert_eq!(after.iter().filter(|&&t| t == g).count(), ULTS * 3, "{order:?}");
    }
}

#[test]
fn auto_takes_the_modifier_to_each_candidate() {
    let policy = Policy::auto().aggregate(Aggregate::ALWAYS);
    let auto = policy.auto_settings().unwrap();
    assert!(auto.candidate_policies().iter().all(|c| c.aggregation() == Some(Aggregate::new(u64::MAX))));
    let (order, _) = interleaved(policy, 4, 4, 40, 64 << 10);
    let (plain, _) = interleaved(Policy::auto(), 4, 4, 40, 64 << 10);
    assert!(group_changes(&order) * 4 <= group_changes(&plain), "{order:?}");
}

#[test]
fn a_footprint_larger_than_the_cache_gets_no_bonus() {
    // The runtime's topology has 1 MiB of cache: a 2 MiB footprint is cut off.
    let (order, stats) = interleaved(Policy::no_affinity().aggregate(Aggregate::ALWAYS), 4, 4, 40, 2 << 20);
    let (plain, _) = interleaved(Policy::no_affinity(), 4, 4, 40, 2 << 20);
    assert!(stats.groups.iter().all(|g| g.aggregated == 0), "{:?}", stats.groups);
    assert_eq!(order, plain, "past the cut-off the order is the plain policy's");
}

#[test]
fn no_ult_starves_behind_a_group_that_keeps_its_bonus() {
    // A group of 4 ULTs that yields until told to stop, with the largest bonus, and a lone
    // ungrouped ULT that shares with nobody: the streak bound lets the lone ULT run every
    // `max_run` + a few runs.
    const MAX_RUN: u32 = 8;
    let rt = Runtime::builder()
        .processors(1)
        .no_chaos()
        .policy(
            Policy::no_affinity().aggregate_with(Aggregate::new(Aggregate::ALWAYS).max_run(MAX_RUN).unwrap()),
        )
        .build()
        .unwrap();
    let log: Log = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let greedy = Group::new("greedy");
    let (l, s) = (log.clone(), stop.clone());
    rt.block_on(move || {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let (l, s) = (l.clone(), s.clone());
                Builder::new()
                    .group(&greedy)
                    .spawn(move || {
                        while !s.load(Ordering::Relaxed) {
                            note(&l, 1);
                            elite_rt::yield_now();
                        }
                    })
                    .unwrap()
            })
            .collect();
        let lone = {
            let l = l.clone();
            elite_rt::spawn(move || {
                for _ in 0..50 {
                    note(&l, 0);
                    elite_rt::yield_now();
                }
            })
        };
        lone.join().unwrap();
        s.store(true, Ordering::Relaxed);
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    let order: Vec<u8> = log.lock().unwrap().iter().map(|&(_, t)| t).collect();
    let lone_at: Vec<usize> = order.iter().enumerate().filter(|(_, &t)| t == 0).map(|(i, _)| i).collect();
    assert_eq!(lone_at.len(), 50);
    let longest_wait = lone_at.windows(2).map(|w| w[1] - w[0] - 1).max().unwrap();
    // (Without the bound, `max_run(u32::MAX)`, the lone ULT waited thousands of runs at a time:
    // only the loop's own starvation turns let it run.)
    assert!(longest_wait <= 2 * MAX_RUN as usize, "the lone ULT waited {longest_wait} runs: {order:?}");
    let greedy = &rt.stats().groups[0];
    assert!(greedy.aggregated > 0);
}

#[test]
fn processors_sharing_a_cache_follow_the_group_their_master_runs() {
    // Two processors sharing their only cache: processor 0 (the master) runs a ULT of group A
    // all along; processor 1 runs two ULTs of A and two of B. With the modifier processor 1
    // runs A's first, while the master runs A; without it, in turn.
    fn run(topology: &str, policy: Policy) -> Vec<u8> {
        let rt = Runtime::builder().topology(topology).no_chaos().policy(policy).build().unwrap();
        let log: Log = Arc::default();
        let (a, b) = (Group::new("a"), Group::new("b"));
        let master_runs = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, m, s) = (log.clone(), master_runs.clone(), stop.clone());
        rt.block_on(move || {
            let anchor = {
                let (m, s) = (m.clone(), s.clone());
                Builder::new()
                    .group(&a)
                    .place(Place::processor(0))
                    .place_mode(PlaceMode::Strict)
                    .spawn(move || {
                        while !s.load(Ordering::Relaxed) {
                            m.store(true, Ordering::Relaxed);
                            elite_rt::yield_now();
                        }
                    })
                    .unwrap()
            };
            while !m.load(Ordering::Relaxed) {
                elite_rt::yield_now();
            }
            let hs: Vec<_> = (0..2)
                .flat_map(|_| [(&a, 0u8), (&b, 1u8)])
                .map(|(g, tag)| {
                    let l = l.clone();
                    Builder::new()
                        .group(g)
                        .place(Place::processor(1))
                        .place_mode(PlaceMode::Strict)
                        .spawn(move || {
                            for _ in 0..30 {
                                note(&l, tag);
                                elite_rt::yield_now();
                            }
                        })
                        .unwrap()
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
            s.store(true, Ordering::Relaxed);
            anchor.join().unwrap();
        });
        let order = log.lock().unwrap().iter().filter(|&&(p, _)| p == 1).map(|&(_, t)| t).collect();
        order
    }
    // B's runs on processor 1 before A's last run there.
    let b_before_last_a = |order: &[u8]| {
        let last_a = order.iter().rposition(|&t| t == 0).unwrap();
        order[..last_a].iter().filter(|&&t| t == 1).count()
    };
    // The master's streak never ends here (`max_run` above the runs of the test), and processor
    // 1's own streaks give way to the master's group.
    let policy =
        Policy::no_affinity().aggregate_with(Aggregate::new(Aggregate::ALWAYS).max_run(1 << 20).unwrap());
    let aggregated = run("1x2, 1 MiB L2 shared", policy.clone());
    let plain = run("1x2, 1 MiB L2 shared", Policy::no_affinity());
    // Without a shared cache each processor aggregates on its own: processor 1 runs the group
    // it started first (B, the newest start), whatever processor 0 runs.
    let apart = run("1x2, 1 MiB L2 per core", policy);
    assert!(b_before_last_a(&aggregated) <= 4, "{aggregated:?}");
    assert!(b_before_last_a(&plain) >= 30, "{plain:?}");
    assert!(b_before_last_a(&apart) >= 30, "no domain, and processor 1 started B first: {apart:?}");
}
