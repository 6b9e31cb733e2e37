//! Places, homes and stealing orders (`elite_rt::place`): strict places hold through wake-ups a
//! policy sends elsewhere, steals and the chaos mode; nothing is lost with hints, strict places,
//! homes, soft pinning, round-robin starts and every steal order on; places the runtime lacks
//! are errors that say what exists.

mod common;

use common::hang_guard;
use common::load::{counting_builder, mixed_round, Load};
use elite_rt::policy::Policy;
use elite_rt::sync::{mpsc, Mutex};
use elite_rt::{
    BuildError, Builder, Place, PlaceKind, PlaceMode, Runtime, RuntimeBuilder, SpawnError, StealAmount,
    StealOrder,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// 2 nodes x 2 "L3" x 2 cores, mapped onto the real CPUs (the L3s as caches per synthetic core
/// of 2 threads: a spec names caches per processor, core, node or machine).
const TOPOLOGY: &str = "2 nodes x 2 cores x 2 threads, 512 KiB L2 per processor, 8 MiB L3 per core";

/// The places the load below hands out, in turn.
fn places() -> Vec<Place> {
    vec![
        Place::node(1),
        Place::cache(3, 0),
        Place::processor(5),
        Place::machine(),
        Place::cache(3, 6),
        Place::node(0),
        Place::processor(2),
    ]
}

/// Rings of ULTs passing a token over channels and bumping a shared counter under a mutex, each
/// ring member with a place (hint or strict, in turn), a home, or neither. Every strict member
/// checks its processor at every resumption. Returns the counter, and the resumptions outside a
/// strict place (must be 0).
fn rings(rt: &Runtime, rings: usize, members: usize, laps: usize) -> (usize, usize) {
    let counter = Arc::new(Mutex::new(0usize));
    let astray = Arc::new(AtomicUsize::new(0));
    let topology: Vec<Vec<usize>> = places().iter().map(|p| rt.processors_of(p).unwrap()).collect();
    rt.block_on(|| {
        let mut handles = Vec::new();
        for r in 0..rings {
            let (txs, rxs): (Vec<_>, Vec<_>) = (0..members).map(|_| mpsc::channel::<usize>()).unzip();
            for (m, rx) in rxs.into_iter().enumerate() {
                let tx = txs[(m + 1) % members].clone();
                let k = r * members + m;
                let which = k % places().len();
                let (place, allowed) = (places()[which], topology[which].clone());
                let mut b = Builder::new();
                // (On work-stealing places a strict place must be made of whole ones.)
                let strict = k % 4 == 1
                    && (rt.place_level() == PlaceKind::Processor
                        || rt.processors_of(&place).unwrap().len() >= 4);
                match k % 4 {
                    0 => b = b.place(place),
                    1 if strict => b = b.place(place).place_mode(PlaceMode::Strict),
                    1 => b = b.place(place),
                    2 => b = b.home(place),
                    _ => {}
                }
                let (counter, astray) = (counter.clone(), astray.clone());
                let first = m == 0;
                handles.push(
                    b.spawn(move || {
                        let check = || {
                            if strict && !allowed.contains(&elite_rt::current().processor()) {
                                astray.fetch_add(1, Ordering::Relaxed);
                            }
                        };
                        check();
                        if first {
                            tx.send(0).unwrap();
                        }
                        for _ in 0..laps {
                            let Ok(n) = rx.recv() else { break };
                            check();
                            *counter.lock().unwrap() += 1;
                            elite_rt::yield_now();
                            check();
                            let _ = tx.send(n + 1);
                        }
                    })
                    .unwrap(),
                );
            }
        }
        for h in handles {
            h.join().unwrap();
        }
    });
    let total = *counter.lock().unwrap();
    (total, astray.load(Ordering::Relaxed))
}

fn check_rings(what: &'static str, configure: fn(RuntimeBuilder) -> RuntimeBuilder) {
    hang_guard(120, what, move || {
        let rt = configure(Runtime::builder().topology(TOPOLOGY)).build().unwrap();
        let (rings_n, members, laps) = (6, 5, 40);
        let (total, astray) = rings(&rt, rings_n, members, laps);
        assert_eq!(total, rings_n * members * laps, "{what}: a token or an increment was lost");
        assert_eq!(astray, 0, "{what}: a strict ULT ran outside its place");
    });
}

#[test]
fn strict_places_hold_and_nothing_is_lost_with_hints_and_homes() {
    check_rings("places, default order", |b| b);
}

#[test]
fn strict_places_hold_when_the_policy_moves_every_wakeup() {
    check_rings("places, policy alternating", |b| b.policy(Policy::new(common::Alternate)));
}

#[test]
fn strict_places_hold_under_the_chaos_mode_with_soft_pinning_and_round_robin() {
    check_rings("places, chaos", |b| b.chaos(0x91ACE).soft_pinning(true).round_robin(true));
}

#[test]
fn strict_places_hold_under_every_steal_order_and_amount() {
    check_rings("places, node-then-all, one", |b| {
        b.steal_order(StealOrder::NodeThenAll).steal(StealAmount::One)
    });
    check_rings("places, random, half", |b| b.steal_order(StealOrder::Random).steal(StealAmount::Half));
}

#[test]
fn strict_places_hold_and_nothing_is_lost_with_work_stealing_places() {
    check_rings("places, shared L3 queues", |b| b.place_level(PlaceKind::Cache { level: 3 }));
    check_rings("places, shared node queues, chaos", |b| b.place_level(PlaceKind::Node).chaos(0x1A55));
}

#[test]
fn strict_places_that_split_a_work_stealing_place_are_unsupported() {
    let rt =
        Runtime::builder().topology(TOPOLOGY).place_level(PlaceKind::Cache { level: 3 }).build().unwrap();
    let strict = |place| Builder::new().place(place).place_mode(PlaceMode::Strict).spawn_on(&rt, || ());
    assert!(matches!(strict(Place::processor(5)), Err(SpawnError::Unsupported { .. })));
    assert!(matches!(strict(Place::cache(2, 5)), Err(SpawnError::Unsupported { .. })));
    let err = Builder::new().pinned(true).spawn_on(&rt, || ()).unwrap_err();
    assert!(err.to_string().contains("place_level"), "{err}");
    for place in [Place::cache(3, 5), Place::node(1), Place::machine()] {
        strict(place).unwrap().join().unwrap();
    }
    // A hint may name any place.
    Builder::new().place(Place::processor(5)).spawn_on(&rt, || ()).unwrap().join().unwrap();
}

#[test]
fn mixed_load_on_work_stealing_places() {
    stress("mixed load, shared L3 queues", |b| {
        b.topology(TOPOLOGY).place_level(PlaceKind::Cache { level: 3 })
    });
    stress("mixed load, one shared queue per node, chaos", |b| {
        b.topology(TOPOLOGY).place_level(PlaceKind::Node).soft_pinning(true).chaos(0xB0A7)
    });
}

/// The mixed stress load (`common::load`) with the place rules on.
fn stress(what: &'static str, configure: fn(RuntimeBuilder) -> RuntimeBuilder) {
    hang_guard(300, what, move || {
        let reports = Arc::new(AtomicUsize::new(0));
        let rt = configure(counting_builder(&reports)).build().expect("runtime");
        for _ in 0..5 {
            mixed_round(&rt, &Load::SMALL, &reports);
        }
    });
}

#[test]
fn mixed_load_with_soft_pinning_round_robin_and_lgs() {
    stress("mixed load, soft pinning, round robin, steal avoidance", |b| {
        b.topology(TOPOLOGY).soft_pinning(true).round_robin(true).avoid_costly_steals(true)
    });
}

#[test]
fn mixed_load_with_soft_pinning_under_the_chaos_mode() {
    stress("mixed load, soft pinning, chaos", |b| {
        b.topology(TOPOLOGY).soft_pinning(true).steal(StealAmount::One).chaos(0x50F7)
    });
}

#[test]
fn places_the_runtime_lacks_are_errors_that_say_what_exists() {
    let rt = Runtime::builder().topology("2 nodes x 2 cores, 1 MiB L2 per core").build().unwrap();
    let cases = [
        (Place::processor(4), "there is no processor 4: the runtime has processors 0..4"),
        (Place::node(2), "there is no node 2: the runtime has nodes 0..2"),
        (Place::cache(3, 1), "processor 1 has no L3 cache: its data caches are L2"),
        (Place::cache(2, 9), "there is no processor 9: the runtime has processors 0..4"),
    ];
    for (place, want) in cases {
        assert_eq!(rt.processors_of(&place).unwrap_err().to_string(), want);
        let err = rt.block_on(|| Builder::new().place(place).spawn(|| ()).unwrap_err());
        assert!(matches!(err, SpawnError::Place(_)), "{err:?}");
        assert_eq!(err.to_string(), format!("invalid place: {want}"));
        // A home as well, and from outside the runtime.
        let err = Builder::new().home(place).spawn_on(&rt, || ()).unwrap_err();
        assert_eq!(err.to_string(), format!("invalid place: {want}"));
        assert_eq!(rt.block_on(|| elite_rt::spawn_at(place, || ()).unwrap_err()), err);
    }
    let err =
        Runtime::builder().processors(1).place_level(PlaceKind::Cache { level: 7 }).build().unwrap_err();
    assert!(matches!(err, BuildError::Place { field: "place_level", .. }), "{err:?}");
    assert!(err.to_string().starts_with("invalid `place_level`: processor 0 has no L7 cache"), "{err}");
}

#[test]
fn places_lists_the_machine_nodes_caches_and_processors() {
    let rt = Runtime::builder().topology(TOPOLOGY).build().unwrap();
    let places = rt.places();
    let of = |kind: PlaceKind| -> Vec<Vec<usize>> {
        places.iter().filter(|p| p.place.kind() == kind).map(|p| p.processors.clone()).collect()
    };
    assert_eq!(of(PlaceKind::Machine), [(0..8).collect::<Vec<_>>()]);
    assert_eq!(of(PlaceKind::Node), [vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    assert_eq!(of(PlaceKind::Cache { level: 3 }), [vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
    assert_eq!(of(PlaceKind::Cache { level: 2 }).len(), 8);
    assert_eq!(of(PlaceKind::Processor).len(), 8);
    for p in &places {
        assert_eq!(rt.processors_of(&p.place).unwrap(), p.processors, "{}", p.place);
    }
}

#[test]
fn strict_spawns_from_outside_start_in_their_place() {
    let rt = Runtime::builder().topology("2 nodes x 2 cores").build().unwrap();
    for _ in 0..20 {
        let h = Builder::new()
            .place(Place::node(1))
            .place_mode(PlaceMode::Strict)
            .spawn_on(&rt, || elite_rt::current().processor())
            .unwrap();
        assert!([2, 3].contains(&h.join().unwrap()));
    }
}

/// Steal avoidance (`RuntimeBuilder::avoid_costly_steals`): a ULT declares `footprint` bytes,
/// runs on one processor and yields to a ULT held to that processor that runs on (without a
/// switch) until released. The other processor, idle, finds it alone in the first one's
/// runqueue. Returns whether it resumed where it first ran, and the other processor's declined
/// steals. The hog is released once the other processor declined a steal or the ULT resumed
/// (10 s at most).
fn behind_a_long_run(avoid: bool, footprint: usize) -> (bool, u64) {
    // Two cores with an L2 each (mapped onto the real CPUs): a move between them reloads what
    // the L2 can hold of the footprint, up to 2^30 lines of 64 bytes.
    let rt = Runtime::builder()
        .topology("1x2, 64 GiB L2 per core")
        .avoid_costly_steals(avoid)
        .no_chaos()
        .build()
        .unwrap();
    let release = Arc::new(AtomicBool::new(false));
    const NOT_YET: usize = usize::MAX;
    let first = Arc::new(AtomicUsize::new(NOT_YET));
    let resumed = Arc::new(AtomicUsize::new(NOT_YET));
    let (r, f, at) = (Arc::clone(&release), Arc::clone(&first), Arc::clone(&resumed));
    let ult = Builder::new()
        .footprint(footprint)
        .spawn_on(&rt, move || {
            let here = elite_rt::current().processor();
            let r2 = Arc::clone(&r);
            let hog = Builder::new()
                .place(Place::processor(here))
                .place_mode(PlaceMode::Strict)
                .spawn(move || {
                    while !r2.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                })
                .unwrap();
            f.store(here, Ordering::Release);
            elite_rt::yield_now(); // the hog runs; this ULT waits in the runqueue
            at.store(elite_rt::current().processor(), Ordering::Release);
            r.store(true, Ordering::Release);
            hog.join().unwrap();
        })
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let declined = || {
        let other = 1 - first.load(Ordering::Acquire);
        rt.stats().processors[other].steals_declined
    };
    while first.load(Ordering::Acquire) == NOT_YET
        || (declined() == 0 && resumed.load(Ordering::Acquire) == NOT_YET)
    {
        assert!(std::time::Instant::now() < deadline, "the other processor neither stole nor declined");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    release.store(true, Ordering::Release);
    ult.join().unwrap();
    (resumed.load(Ordering::Acquire) == first.load(Ordering::Acquire), declined())
}

#[test]
fn a_thief_leaves_a_ult_whose_reload_costs_more_than_its_wait() {
    // 1 TiB declared, of which the 64 GiB L2 holds 2^30 lines at most: their reload takes far
    // longer than the hog runs, so it stays.
    let (stayed, declined) = behind_a_long_run(true, 1 << 40);
    assert!(stayed, "stolen though its move costs more than its wait");
    assert!(declined > 0);
    // Without steal avoidance the idle processor takes it.
    assert_eq!(behind_a_long_run(false, 1 << 40), (false, 0));
}

#[test]
fn a_thief_still_takes_a_ult_with_nothing_to_reload() {
    // No declared footprint (and no cache model): nothing to reload, the steal goes ahead.
    assert_eq!(behind_a_long_run(true, 0), (false, 0));
}

/// A ULT with a place on processor 1, spawned from the main OS thread on a runtime just built
/// (its processors' threads may not have reached their loops yet): a strict one never starts
/// elsewhere; a hint starts on processor 1 too, which is free (nothing runs there). Processor 0
/// idles meanwhile and looks for stranded ULTs on processor 1's wake-up stack; a processor whose
/// thread has not started yet runs no ULT, so nothing waits behind one there.
#[test]
fn hinted_spawns_from_outside_start_in_their_place_when_it_is_free() {
    hang_guard(120, "hinted spawns from outside", || {
        for round in 0..40 {
            let rt = Runtime::builder().processors(2).no_chaos().build().unwrap();
            for mode in [PlaceMode::Hint, PlaceMode::Strict] {
                let h = Builder::new()
                    .place(Place::processor(1))
                    .place_mode(mode)
                    .spawn_on(&rt, || elite_rt::current().processor())
                    .unwrap();
                assert_eq!(h.join().unwrap(), 1, "round {round}: a {mode:?} ULT started outside its place");
            }
        }
    });
}

/// The same on a settled runtime whose other processor is busy: a hint for the free processor
/// starts there, whatever the busy one does; a strict ULT for the busy one waits for it.
#[test]
fn hinted_spawns_from_outside_start_on_the_free_processor_beside_a_busy_one() {
    hang_guard(120, "hinted spawns beside a busy processor", || {
        let rt = Runtime::builder().processors(2).no_chaos().build().unwrap();
        let release = Arc::new(AtomicBool::new(false));
        let r = Arc::clone(&release);
        let busy = Builder::new()
            .place(Place::processor(0))
            .place_mode(PlaceMode::Strict)
            .spawn_on(&rt, move || {
                while !r.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                elite_rt::current().processor()
            })
            .unwrap();
        let strict = Builder::new()
            .place(Place::processor(0))
            .place_mode(PlaceMode::Strict)
            .spawn_on(&rt, || elite_rt::current().processor())
            .unwrap();
        for _ in 0..50 {
            let h = Builder::new()
                .place(Place::processor(1))
                .spawn_on(&rt, || elite_rt::current().processor())
                .unwrap();
            assert_eq!(h.join().unwrap(), 1, "a hint started outside its free place");
        }
        release.store(true, Ordering::Release);
        assert_eq!(busy.join().unwrap(), 0);
        assert_eq!(strict.join().unwrap(), 0, "a strict ULT started outside its place");
    });
}

/// Work-stealing places per L3 of 2 processors each (`[0, 1]` and `[2, 3]`): ready ULTs wait in
/// the first place's shared queue (kept by processor 0) while both its processors run ULTs that
/// never switch. The second place's processors, idle, take every one of them: their victims
/// are processors, and a visit of either processor of the first place tries the queue it
/// serves (`policy::places`, "Victims").
#[test]
fn an_idle_place_takes_the_ready_ults_queued_in_a_busy_places_shared_queue() {
    hang_guard(120, "an idle place steals from a busy one", || {
        let rt = Runtime::builder()
            .topology("1 node x 2 cores x 2 threads, 512 KiB L2 per processor, 8 MiB L3 per core")
            .place_level(PlaceKind::Cache { level: 3 })
            .policy(Policy::no_affinity())
            .no_chaos()
            .build()
            .unwrap();
        let busy = Place::cache(3, 0);
        assert_eq!(rt.processors_of(&busy).unwrap(), [0, 1]);
        const WORK: usize = 64;
        // The ready ULTs: blocked until the waker below sends to them. No Affinity sends a ULT
        // woken by a ULT to the waker's processor, so they become ready in the busy place's
        // shared queue (but the last, in the waker's `next` slot).
        let blocked = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let mut senders = Vec::new();
        let mut work = Vec::new();
        for _ in 0..WORK {
            let (tx, rx) = mpsc::channel::<()>();
            senders.push(tx);
            let (b, d) = (Arc::clone(&blocked), Arc::clone(&done));
            work.push(
                Builder::new()
                    .spawn_on(&rt, move || {
                        b.fetch_add(1, Ordering::AcqRel);
                        rx.recv().unwrap();
                        let here = elite_rt::current().processor();
                        d.fetch_add(1, Ordering::AcqRel);
                        here
                    })
                    .unwrap(),
            );
        }
        while blocked.load(Ordering::Acquire) < WORK {
            std::thread::yield_now();
        }
        let strict = || Builder::new().place(busy).place_mode(PlaceMode::Strict);
        let release = Arc::new(AtomicBool::new(false));
        let hog_runs = Arc::new(AtomicBool::new(false));
        // Holds one processor of the busy place until released.
        let (r, h) = (Arc::clone(&release), Arc::clone(&hog_runs));
        let hog = strict()
            .spawn_on(&rt, move || {
                h.store(true, Ordering::Release);
                while !r.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        // Holds the other, once the hog runs: wakes the ULTs, and releases the hog after all ran.
        let (r, h, d) = (Arc::clone(&release), Arc::clone(&hog_runs), Arc::clone(&done));
        let waker = strict()
            .spawn_on(&rt, move || {
                while !h.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                for tx in senders {
                    tx.send(()).unwrap();
                }
                while d.load(Ordering::Acquire) < WORK {
                    std::hint::spin_loop();
                }
                r.store(true, Ordering::Release);
            })
            .unwrap();
        waker.join().unwrap();
        hog.join().unwrap();
        let ran: Vec<usize> = work.into_iter().map(|w| w.join().unwrap()).collect();
        assert!(ran.iter().all(|p| [2, 3].contains(p)), "ran in the busy place: {ran:?}");
        // Through the shared queue (not only the stranded `next` slot): stolen.
        let stats = rt.stats();
        let steals: u64 = stats.processors[2..].iter().map(|p| p.steals_node + p.steals_remote).sum();
        assert!(steals > 0, "the idle place took nothing from the busy place's queue");
    });
}
