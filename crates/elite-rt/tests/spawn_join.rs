//! Spawning and joining: many ULTs, deep trees and chains, joins across processors and from OS
//! threads, detaching, `is_finished`, names and ids, `yield_now` and `sleep`.

mod common;

use common::{hang_guard, spin_until, ult_sleep_until, wait_until};
use elite_rt::{current, spawn, yield_now, Builder, Runtime, MIN_STACK_SIZE};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Tests whose assertions depend on a processor not being starved of CPU (deadline order of
/// sleepers) take this lock exclusively; every other test of this file takes it shared.
static CPU: RwLock<()> = RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    CPU.read().unwrap_or_else(|e| e.into_inner())
}

fn exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    CPU.write().unwrap_or_else(|e| e.into_inner())
}

fn rt(processors: usize) -> Runtime {
    Runtime::builder().processors(processors).build().expect("build runtime")
}

#[test]
fn spawn_and_join_100k() {
    let _g = shared();
    hang_guard(60, "100k spawns", || {
        const N: u64 = 100_000;
        let rt = rt(2);
        // ULTs that wait on a start-queue hold no stack, so all 100k may be spawned before joining.
        let sum = rt.block_on(|| {
            let hs: Vec<_> = (0..N).map(|i| spawn(move || i * 3)).collect();
            hs.into_iter().map(|h| h.join().expect("no panic")).sum::<u64>()
        });
        assert_eq!(sum, 3 * N * (N - 1) / 2);
        let s = rt.stats();
        assert_eq!(s.total().spawns, N, "{s}");
        assert_eq!(s.outside_spawns, 1, "{s}");
    });
}

/// A binary tree of ULTs: each inner ULT spawns its two children and joins them; a leaf returns
/// its heap-numbering id, so the sum checks that every leaf ran exactly once.
fn tree(id: u64, depth: u32) -> (u64, u64) {
    if depth == 0 {
        return (id, 1);
    }
    let l = spawn(move || tree(2 * id, depth - 1));
    let r = spawn(move || tree(2 * id + 1, depth - 1));
    let (ls, lc) = l.join().expect("left subtree");
    let (rs, rc) = r.join().expect("right subtree");
    (ls + rs, lc + rc)
}

#[test]
fn binary_spawn_tree_depth_14() {
    let _g = shared();
    hang_guard(60, "spawn tree", || {
        const DEPTH: u32 = 14;
        let rt = rt(2);
        let (sum, leaves) = rt.block_on(|| tree(1, DEPTH));
        let first = 1u64 << DEPTH;
        let last = (1u64 << (DEPTH + 1)) - 1;
        assert_eq!(leaves, 1 << DEPTH);
        assert_eq!(sum, (first + last) * (last - first + 1) / 2);
        // Every ULT of the tree (2^15 - 2 of them, the root being the block_on ULT) was spawned inside.
        assert_eq!(rt.stats().total().spawns, (1 << (DEPTH + 1)) - 2);
    });
}

static CHAIN_ALIVE: AtomicUsize = AtomicUsize::new(0);

/// Each link spawns the next and joins it; the last link reports how many links were alive.
fn chain(left: u32) -> (u32, usize) {
    let alive = CHAIN_ALIVE.fetch_add(1, SeqCst) + 1;
    let out = if left == 0 {
        (0, alive)
    } else {
        let h = Builder::new().stack_size(MIN_STACK_SIZE).spawn(move || chain(left - 1)).expect("spawn link");
        let (depth, seen) = h.join().expect("link");
        (depth + 1, seen)
    };
    CHAIN_ALIVE.fetch_sub(1, SeqCst);
    out
}

#[test]
#[cfg_attr(
    feature = "sanitizer",
    ignore = "frames with AddressSanitizer's redzones do not fit this test's small stacks"
)]
fn chain_of_2000_with_small_stacks() {
    let _g = shared();
    hang_guard(60, "chain", || {
        const DEPTH: u32 = 2000;
        // Small stacks for every ULT of the runtime, and the chain's links ask for the minimum too.
        let rt = Runtime::builder().processors(2).stack_size(MIN_STACK_SIZE).build().unwrap();
        let (depth, alive_at_bottom) = rt.block_on(|| chain(DEPTH));
        assert_eq!(depth, DEPTH);
        // When the last link ran, every link above it was blocked in a join, holding its stack.
        assert_eq!(alive_at_bottom, DEPTH as usize + 1);
        assert_eq!(CHAIN_ALIVE.load(SeqCst), 0);
    });
}

#[test]
fn join_from_the_other_processor() {
    let _g = shared();
    hang_guard(60, "cross-processor join", || {
        let rt = rt(2);
        let (joiner_p, child_p, v) = rt.block_on(|| {
            let started = Arc::new(AtomicBool::new(false));
            let joining = Arc::new(AtomicBool::new(false));
            let (s, j) = (started.clone(), joining.clone());
            let h = spawn(move || {
                s.store(true, SeqCst);
                // Keep this processor (no switch) until the joiner is about to join.
                spin_until(30, "the joiner", || j.load(SeqCst));
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_millis(5) {
                    std::hint::spin_loop();
                }
                (current().processor(), 99)
            });
            // The root keeps its processor while it waits, so the child runs on the other one.
            spin_until(30, "the child to start", || started.load(SeqCst));
            let me = current().processor();
            joining.store(true, SeqCst);
            let (child_p, v) = h.join().expect("child");
            (me, child_p, v)
        });
        assert_eq!(v, 99);
        assert_ne!(joiner_p, child_p, "the child ran on the joiner's processor");

        // Many more joins; the clean-up notes of cross-processor joins are drained by the exiting
        // processor at its next loop round, so keep giving the processors work until one shows up.
        for round in 0.. {
            let sum = rt.block_on(|| {
                (0..200u64)
                    .map(|i| spawn(move || i))
                    .collect::<Vec<_>>()
                    .into_iter()
                    .map(|h| h.join().unwrap())
                    .sum::<u64>()
            });
            assert_eq!(sum, 199 * 200 / 2);
            if rt.stats().total().cleanup_notes > 0 {
                break;
            }
            assert!(round < 500, "no clean-up note after {round} rounds:\n{}", rt.stats());
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

#[test]
fn join_from_a_plain_os_thread() {
    let _g = shared();
    hang_guard(60, "OS-thread join", || {
        let rt = rt(2);
        // Not finished yet when joined: the OS thread parks until the ULT exits.
        let slow = rt.spawn(|| {
            elite_rt::sleep(Duration::from_millis(30));
            String::from("slow")
        });
        // Finished before the join.
        let fast = rt.spawn(|| 6 * 7);
        wait_until(30, "the fast ULT", || fast.is_finished());
        let named = Builder::new()
            .name("from-outside".into())
            .spawn_on(&rt, || current().name().map(str::to_owned))
            .unwrap();
        let t =
            std::thread::spawn(move || (slow.join().unwrap(), fast.join().unwrap(), named.join().unwrap()));
        let (s, f, n) = t.join().expect("joiner thread");
        assert_eq!(s, "slow");
        assert_eq!(f, 42);
        assert_eq!(n.as_deref(), Some("from-outside"));
        assert_eq!(rt.stats().outside_spawns, 3);
    });
}

#[test]
fn detached_ults_all_run() {
    let _g = shared();
    hang_guard(60, "detached ULTs", || {
        const INSIDE: usize = 20_000;
        const OUTSIDE: usize = 1_000;
        let rt = rt(2);
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        rt.block_on(move || {
            for i in 0..INSIDE {
                let c = c.clone();
                drop(spawn(move || {
                    if i % 64 == 0 {
                        yield_now();
                    }
                    c.fetch_add(1, SeqCst);
                }));
            }
        });
        for _ in 0..OUTSIDE {
            let c = count.clone();
            drop(rt.spawn(move || {
                c.fetch_add(1, SeqCst);
            }));
        }
        wait_until(30, "every detached ULT", || count.load(SeqCst) == INSIDE + OUTSIDE);
        assert_eq!(count.load(SeqCst), INSIDE + OUTSIDE);
        // Detached ULTs are recycled without a joiner.
        wait_until(30, "a local reclaim", || rt.stats().total().reclaimed_local > 0);
    });
}

#[test]
fn is_finished_tracks_completion() {
    let _g = shared();
    hang_guard(60, "is_finished", || {
        let rt = rt(2);
        let gate = Arc::new(AtomicBool::new(false));
        let g = gate.clone();
        let h = rt.spawn(move || {
            ult_sleep_until(30, "the gate", || g.load(SeqCst));
            7
        });
        assert!(!h.is_finished(), "finished before its gate opened");
        std::thread::sleep(Duration::from_millis(20));
        assert!(!h.is_finished(), "finished before its gate opened");
        gate.store(true, SeqCst);
        wait_until(30, "is_finished", || h.is_finished());
        assert_eq!(h.join().unwrap(), 7);

        // The same from inside a ULT.
        let ok = rt.block_on(|| {
            let gate = Arc::new(AtomicBool::new(false));
            let g = gate.clone();
            let h = spawn(move || {
                ult_sleep_until(30, "the gate", || g.load(SeqCst));
                1
            });
            let before = h.is_finished();
            gate.store(true, SeqCst);
            ult_sleep_until(30, "is_finished", || h.is_finished());
            !before && h.join().unwrap() == 1
        });
        assert!(ok);
    });
}

#[test]
fn builder_name_and_stack_size_are_applied() {
    let _g = shared();
    hang_guard(60, "builder", || {
        let rt = rt(2);
        rt.block_on(|| {
            let h = Builder::new()
                .name("worker-7".into())
                .stack_size(512 * 1024)
                .spawn(|| {
                    let me = current();
                    (me.name().map(str::to_owned), me.id(), use_stack(100, 0))
                })
                .unwrap();
            assert_eq!(h.thread().name(), Some("worker-7"));
            let expected_id = h.thread().id();
            let (name, id, used) = h.join().unwrap();
            assert_eq!(name.as_deref(), Some("worker-7"));
            assert_eq!(id, expected_id);
            // More live stack than the 64 KiB default could hold.
            assert!(used >= 100 * 1024, "used only {used} bytes of stack");

            let unnamed = spawn(|| current().name().map(str::to_owned));
            assert_eq!(unnamed.thread().name(), None);
            assert_eq!(unnamed.join().unwrap(), None);
        });
    });
}

/// Recursion `frames` deep, each frame holding a 1 KiB buffer; returns the bytes of stack between
/// the first frame and the deepest one.
#[inline(never)]
fn use_stack(frames: usize, top: usize) -> usize {
    let buf = [frames as u8; 1024];
    let here = std::hint::black_box(&buf) as *const _ as usize;
    let top = if top == 0 { here } else { top };
    let used = if frames <= 1 { top - here } else { use_stack(frames - 1, top) };
    std::hint::black_box(&buf);
    used
}

#[test]
fn ids_are_unique_across_10_000_ults() {
    let _g = shared();
    hang_guard(60, "ids", || {
        let rt = rt(2);
        let inside: Vec<(u64, u64)> = rt.block_on(|| {
            let hs: Vec<_> = (0..5_000).map(|_| spawn(|| current().id().as_u64())).collect();
            hs.into_iter()
                .map(|h| {
                    let outer = h.thread().id().as_u64();
                    (outer, h.join().unwrap())
                })
                .collect()
        });
        let outside: Vec<(u64, u64)> = (0..5_000)
            .map(|_| rt.spawn(|| current().id().as_u64()))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| {
                let outer = h.thread().id().as_u64();
                (outer, h.join().unwrap())
            })
            .collect();
        let mut ids = HashSet::new();
        for (outer, inner) in inside.iter().chain(&outside) {
            assert_eq!(outer, inner, "JoinHandle::thread().id() differs from current().id()");
            assert!(ids.insert(*inner), "id {inner} seen twice");
        }
        assert_eq!(ids.len(), 10_000);
    });
}

#[test]
fn yield_now_counts_and_returns() {
    let _g = shared();
    hang_guard(60, "yield", || {
        let rt = rt(1);
        let n = rt.block_on(|| {
            let mut n = 0;
            for _ in 0..100 {
                yield_now();
                n += 1;
            }
            n
        });
        assert_eq!(n, 100);
        // Every yield of a ULT reaches the processor loop, even when nothing else is ready.
        assert_eq!(rt.stats().total().yields, 100);
        // Outside a ULT it yields the OS thread.
        yield_now();
    });
}

/// On one processor, a ULT that waits for a freshly spawned one by yielding must let it start.
#[test]
fn yield_lets_a_queued_ult_start_on_one_processor() {
    let _g = shared();
    hang_guard(20, "yield to a queued ULT", || {
        let rt = rt(1);
        rt.block_on(|| {
            let flag = Arc::new(AtomicBool::new(false));
            let f = flag.clone();
            let h = spawn(move || f.store(true, SeqCst));
            while !flag.load(SeqCst) {
                yield_now();
            }
            h.join().unwrap();
        });
    });
}

/// On one processor, two started ULTs that hand a token back and forth with `yield_now` must both
/// make progress ("lets other ready ULTs of this processor run").
#[test]
fn yield_alternates_between_ready_ults_on_one_processor() {
    let _g = shared();
    hang_guard(20, "yield ping-pong", || {
        let rt = rt(1);
        let order = rt.block_on(|| {
            let turn = Arc::new(AtomicUsize::new(0));
            let log = Arc::new(Mutex::new(Vec::new()));
            let mk = |me: usize| {
                let (turn, log) = (turn.clone(), log.clone());
                spawn(move || {
                    for round in 0..5 {
                        while turn.load(SeqCst) != 2 * round + me {
                            yield_now();
                        }
                        log.lock().unwrap().push(me);
                        turn.fetch_add(1, SeqCst);
                    }
                })
            };
            let (a, b) = (mk(0), mk(1));
            a.join().unwrap();
            b.join().unwrap();
            let v = log.lock().unwrap().clone();
            v
        });
        assert_eq!(order, vec![0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
    });
}

/// A spin-with-yield barrier over more ULTs than a processor's start-queue holds: every ULT must
/// eventually start, including those that overflowed to the node and global start-queues.
///
/// The processor loop only looks at the start-queues (and steals) when its runqueue is empty, and a
/// yield only admits an entry of the processor's *own* start-queue; so once every started ULT
/// yield-waits, the ULTs on the node and global start-queues never start (the "every 61st round"
/// look at the shared levels is inside `take_start`, which a non-empty runqueue never reaches).
#[test]
fn yield_barrier_over_overflowing_start_queues() {
    let _g = shared();
    hang_guard(30, "yield barrier", || {
        const N: usize = 2_000; // > the default start_queue_limit of 256
        let rt = rt(2);
        rt.block_on(|| {
            let arrived = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..N)
                .map(|_| {
                    let a = arrived.clone();
                    spawn(move || {
                        a.fetch_add(1, SeqCst);
                        while a.load(SeqCst) < N {
                            yield_now();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
    });
}

#[test]
fn sleep_lasts_at_least_its_duration() {
    let _g = shared();
    hang_guard(60, "sleep", || {
        let rt = rt(2);
        let elapsed = rt.block_on(|| {
            let t0 = Instant::now();
            elite_rt::sleep(Duration::from_millis(10));
            t0.elapsed()
        });
        assert!(elapsed >= Duration::from_millis(10), "slept only {elapsed:?}");
        // Many sleepers at once: each one sleeps at least its own duration.
        let ok = rt.block_on(|| {
            let hs: Vec<_> = (0..200u64)
                .map(|i| {
                    spawn(move || {
                        let d = Duration::from_millis(1 + i % 17);
                        let t0 = Instant::now();
                        elite_rt::sleep(d);
                        t0.elapsed() >= d
                    })
                })
                .collect();
            hs.into_iter().all(|h| h.join().unwrap())
        });
        assert!(ok);
        // Outside a ULT, sleep sleeps the OS thread.
        let t0 = Instant::now();
        elite_rt::sleep(Duration::from_millis(5));
        assert!(t0.elapsed() >= Duration::from_millis(5));
    });
}

/// Sleepers spawned in a scrambled order on one processor finish in the order of their deadlines
/// (spaced 50 ms apart; no other test of this file runs meanwhile, so the processor is not starved).
#[test]
fn interleaved_sleepers_wake_in_deadline_order() {
    let _g = exclusive();
    hang_guard(60, "sleep order", || {
        let rt = rt(1);
        let order = rt.block_on(|| {
            let log = Arc::new(Mutex::new(Vec::new()));
            let hs: Vec<_> = [5u64, 2, 0, 6, 3, 1, 7, 4]
                .into_iter()
                .map(|k| {
                    let log = log.clone();
                    spawn(move || {
                        let d = Duration::from_millis(50 * (k + 1));
                        let t0 = Instant::now();
                        elite_rt::sleep(d);
                        assert!(t0.elapsed() >= d);
                        log.lock().unwrap().push(k);
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let v = log.lock().unwrap().clone();
            v
        });
        assert_eq!(order, (0..8).collect::<Vec<u64>>());
    });
}

/// Sleepers whose deadlines all passed while their processor was busy must still resume in
/// deadline order. Deterministic: the processor is held (an OS sleep inside the root ULT) until
/// every deadline has passed, so all timers fire in the same loop round.
///
/// The timers pop in deadline order, but each goes through `make_ready`: the first into the
/// `next` slot, the others into the No Affinity runqueue, which is LIFO, so the run order is
/// [0, 3, 2, 1] (without the `next` slot, as in the committed HEAD: [3, 2, 1, 0]).
#[test]
fn sleepers_due_together_resume_in_deadline_order() {
    let _g = shared();
    hang_guard(60, "due-together sleepers", || {
        // The order in which ready ULTs run is what this checks: not under the chaos mode
        // (`ELITE_CHAOS`), whose runqueue picks are random.
        let rt = Runtime::builder().no_chaos().processors(1).build().unwrap();
        let order = rt.block_on(|| {
            let log = Arc::new(Mutex::new(Vec::new()));
            let started = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..4u64)
                .map(|k| {
                    let (log, started) = (log.clone(), started.clone());
                    spawn(move || {
                        started.fetch_add(1, SeqCst);
                        elite_rt::sleep(Duration::from_millis(20 * (k + 1)));
                        log.lock().unwrap().push(k);
                    })
                })
                .collect();
            // Yield (no timer of the root's own) until every sleeper sleeps: a polling sleep of
            // the root could fall due in the same round as the first sleeper on a loaded machine,
            // which then waits in the runqueue behind the later ones (LIFO across rounds).
            let guard = std::time::Instant::now() + Duration::from_secs(30);
            while started.load(SeqCst) < 4 {
                assert!(std::time::Instant::now() < guard, "hang guard: sleepers never started");
                elite_rt::yield_now();
            }
            // Hold the only processor past every deadline (at most 80 ms after the last start).
            std::thread::sleep(Duration::from_millis(200));
            for h in hs {
                h.join().unwrap();
            }
            let v = log.lock().unwrap().clone();
            v
        });
        assert_eq!(order, vec![0, 1, 2, 3], "sleepers due together resumed out of deadline order");
    });
}

#[inline(never)]
fn os_thread() -> std::thread::ThreadId {
    std::thread::current().id()
}

/// A ULT of runtime B that joins a handle of runtime A must stay on B's processors. Each runtime
/// has one processor here, so the joiner must resume on the same OS thread it blocked on.
///
/// A's processor finishes the joined ULT and wakes the waiter with its own `Processor::wake`, which
/// puts B's ULT into A's ready set (the policy's target is an index, and 0 is valid in A): B's ULT
/// then runs, exits and lands on A's deathrow, and its stack goes to A's pool. The clean-up note of
/// B's root later makes B's processor remove from its own deathrow a TCB that is not on it, which
/// underflows the deathrow length (a debug-build panic inside the processor loop: abort).
#[test]
fn joining_a_handle_of_another_runtime_stays_on_own_runtime() {
    let _g = shared();
    hang_guard(60, "cross-runtime join", || {
        let a = rt(1);
        let b = rt(1);
        let h = a.spawn(|| {
            elite_rt::sleep(Duration::from_millis(50));
            7
        });
        let (v, before, after) = b.block_on(move || {
            let before = os_thread();
            let v = h.join().unwrap();
            (v, before, os_thread())
        });
        assert_eq!(v, 7);
        assert_eq!(before, after, "B's ULT was resumed on another OS thread (runtime A's processor)");
    });
}

/// `Runtime::block_on` and `Runtime::spawn` called from a ULT of the same runtime: the ULT blocks
/// (not its processor), and the spawns count as spawns from inside.
#[test]
fn runtime_methods_from_inside_a_ult() {
    let _g = shared();
    hang_guard(60, "nested block_on", || {
        let rt = rt(1); // one processor: a blocked processor would deadlock here
        let v = rt.block_on(|| {
            let h = rt.spawn(|| 20);
            let inner = rt.block_on(|| {
                elite_rt::sleep(Duration::from_millis(1));
                spawn(|| 1).join().unwrap() + 1
            });
            h.join().unwrap() + inner
        });
        assert_eq!(v, 22);
        let s = rt.stats();
        assert_eq!(s.outside_spawns, 1, "only the outer root comes from outside\n{s}");
        assert_eq!(s.total().spawns, 3, "{s}");
    });
}

/// A join starts a child that is still at the top of the joiner's start-queue right away, from
/// the joiner (the join fast path). The child must behave exactly as if the loop had started it:
/// it runs as itself, and its yields, sleeps, blocking joins (which start grandchildren the same
/// way) and panics all work, on one and on two processors.
#[test]
fn joins_that_start_their_child_inline_handle_every_switch() {
    for procs in [1, 2] {
        let rt = rt(procs);
        let out = hang_guard(60, "inline-started children", move || {
            rt.block_on(|| {
                let parent = elite_rt::current().id();
                let mut total = 0u64;
                for round in 0..200u64 {
                    let h = Builder::new()
                        .name(format!("child {round}"))
                        .spawn(move || {
                            let me = elite_rt::current();
                            assert_ne!(me.id(), parent, "the child runs as itself");
                            assert_eq!(me.name(), Some(format!("child {round}").as_str()));
                            for _ in 0..3 {
                                yield_now();
                            }
                            if round % 50 == 0 {
                                elite_rt::sleep(Duration::from_millis(1));
                            }
                            let grandchild = spawn(move || {
                                yield_now();
                                round * 2
                            });
                            let g = grandchild.join().expect("grandchild");
                            if round % 7 == 0 {
                                panic!("child {round} panics on purpose");
                            }
                            g + 1
                        })
                        .expect("spawn");
                    match h.join() {
                        Ok(v) => total += v,
                        Err(payload) => {
                            assert_eq!(round % 7, 0);
                            let msg = payload.downcast_ref::<String>().expect("a String payload");
                            assert!(msg.contains("on purpose"), "{msg}");
                        }
                    }
                    assert_eq!(elite_rt::current().id(), parent, "the joiner is itself again");
                }
                total
            })
        });
        let expected: u64 = (0..200u64).filter(|r| r % 7 != 0).map(|r| r * 2 + 1).sum();
        assert_eq!(out, expected, "processors = {procs}");
    }
}

/// `Runtime::stats().tcbs` counts the TCBs a runtime allocated and those in huge-page regions:
/// none there with `huge_page_tcbs(false)`; with regions allowed, those past the first huge
/// page's worth on the heap may go into regions (where the host has transparent huge pages),
/// and a runtime that stopped mapping them says why, having mapped at least one.
#[test]
fn stats_count_the_tcbs_and_where_they_live() {
    let _cpu = shared();
    const HELD: u64 = 20_000; // 7.5 MB of TCBs: past the first 2 MiB on the heap
    for regions in [false, true] {
        let rt = Runtime::builder().processors(1).huge_page_tcbs(regions).build().expect("build runtime");
        let sum = rt.block_on(|| {
            let handles: Vec<_> = (0..HELD).map(|i| spawn(move || i)).collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        assert_eq!(sum, HELD * (HELD - 1) / 2);
        let stats = rt.stats();
        let tcbs = &stats.tcbs;
        assert!(tcbs.allocated > HELD, "every held ULT and the root have a TCB: {tcbs:?}");
        assert!(tcbs.in_regions < tcbs.allocated, "the first huge page's worth is on the heap: {tcbs:?}");
        if !regions {
            assert_eq!((tcbs.in_regions, tcbs.regions_stopped), (0, None), "regions off");
        } else if let Some(stop) = tcbs.regions_stopped {
            assert!(tcbs.in_regions > 0, "stopped after a region it mapped: {tcbs:?}");
            assert!(stop.first_touch > stop.base_pages * 2, "stopped only for a costly region: {stop:?}");
        }
        let line = format!("{} ({} in huge-page regions", tcbs.allocated, tcbs.in_regions);
        assert!(stats.to_string().lines().any(|l| l.starts_with("tcbs") && l.contains(&line)), "{stats}");
    }
}
