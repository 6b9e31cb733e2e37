//! Blocking calls (`elite_rt::blocking`): the processor stays in service while a ULT's call sleeps,
//! the cap on spare threads queues calls, the join fast path, calls from outside a ULT and from
//! inside a call, panics, shutdown with calls in flight (nothing leaks), and a mixed stress test.

mod common;

use common::{hang_guard, payload_str, wait_until};
use elite_rt::sync::{mpsc, Mutex as UltMutex};
use elite_rt::{blocking, spawn, Cancelled, Runtime};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc as std_mpsc, Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The mapping-count test takes this exclusively: no other test of this file may create or drop
/// runtimes while it counts `/proc/self/maps` lines and threads.
static EXCLUSIVE: RwLock<()> = RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner())
}

fn rt(processors: usize, cap: usize) -> Runtime {
    Runtime::builder().processors(processors).max_spare_threads(cap).build().expect("build runtime")
}

/// Sleeps the calling OS thread until `cond` holds; panics with `what` after `secs` seconds.
fn os_wait(secs: u64, what: &str, cond: impl FnMut() -> bool) {
    wait_until(secs, what, cond)
}

/// Waits until no blocking call of `rt` is in flight. The count drops just after a call's ULT is
/// back on a wake-up stack, so a ULT may have run on, even ended, an instant before.
fn settled(rt: &Runtime) {
    wait_until(20, "no blocking call in flight", || rt.stats().blocking.in_flight == 0);
}

/// The test: with one processor, a ULT inside `blocking(|| sleep(200 ms))` does not stop
/// 1000 other ULTs from finishing their work first. (The call keeps sleeping, 200 ms at a time,
/// while fewer than 1000 have finished, up to 60 s, so that a slow machine cannot fail it; with
/// the processor out of service none of them could finish before the call returns.)
#[test]
fn one_processor_runs_1000_ults_while_one_sleeps_in_a_blocking_call() {
    let _g = shared();
    hang_guard(90, "1000 ULTs beside a blocking call", || {
        let rt = rt(1, 4);
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        let (seen, sum) = rt.block_on(move || {
            let hs: Vec<_> = (0..1000u64)
                .map(|i| {
                    let d = d.clone();
                    spawn(move || {
                        let v = (0..100).fold(i, |a, k| a.wrapping_mul(31).wrapping_add(k)) % 7 + i;
                        elite_rt::yield_now();
                        d.fetch_add(1, SeqCst);
                        v
                    })
                })
                .collect();
            // None of them has run yet: this ULT has not switched since it spawned them.
            assert_eq!(d.load(SeqCst), 0);
            let seen = blocking(|| {
                let deadline = Instant::now() + Duration::from_secs(60);
                std::thread::sleep(Duration::from_millis(200));
                while d.load(SeqCst) < 1000 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(200));
                }
                d.load(SeqCst)
            });
            let sum: u64 = hs.into_iter().map(|h| h.join().expect("worker")).sum();
            (seen, sum)
        });
        assert_eq!(seen, 1000, "the other ULTs did not all finish while the call slept");
        let expected: u64 =
            (0..1000u64).map(|i| (0..100).fold(i, |a, k| a.wrapping_mul(31).wrapping_add(k)) % 7 + i).sum();
        assert_eq!(sum, expected);
        settled(&rt);
        let b = rt.stats().blocking;
        assert_eq!(b.calls, 1);
        assert_eq!(b.handoffs, 1);
        assert_eq!(
            b.reclaimed, 0,
            "a call that waited for others cannot have taken its processor back first"
        );
        assert_eq!(b.spares_started, 1);
        assert!(b.threads <= 4, "{b:?}");
        assert_eq!(b.in_flight, 0);
    });
}

/// A blocking call made in the middle of a long round-robin of yields (which one processor
/// serves in batches taken from its runqueue, `queue::run::YieldBatch`): the processor goes to
/// another OS thread with every ready ULT where that thread finds it, and every ULT finishes.
#[test]
fn a_blocking_call_in_a_round_robin_of_yields() {
    let _g = shared();
    hang_guard(60, "a blocking call among yielders", || {
        let rt = rt(1, 4);
        let yields = rt.block_on(|| {
            let yields = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..64)
                .map(|i| {
                    let yields = yields.clone();
                    spawn(move || {
                        for r in 0..200 {
                            if i == 0 && r == 100 {
                                blocking(|| std::thread::sleep(Duration::from_millis(10)));
                            }
                            yields.fetch_add(1, SeqCst);
                            elite_rt::yield_now();
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().expect("yielder"));
            yields.load(SeqCst)
        });
        assert_eq!(yields, 64 * 200);
        settled(&rt);
        assert_eq!(rt.stats().blocking.calls, 1);
    });
}

/// The OS threads of elite runtimes in this process (named `elite-p<i>` or `elite-spare<k>`).
fn elite_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("elite-p") || name.starts_with("elite-spare"))
        .count()
}

/// A cap of one spare thread, ten ULTs calling at once: the first call holds the only spare
/// thread until the nine others have queued behind it; each then runs in turn on that thread,
/// never two at once, and all finish, with never more threads than processors + 1.
#[test]
fn a_cap_of_one_queues_calls_and_never_runs_two_at_once() {
    // Exclusive: it counts the process's elite threads.
    let _g = EXCLUSIVE.write().unwrap_or_else(|e| e.into_inner());
    for processors in [1, 2] {
        hang_guard(60, "cap of one", move || {
            // Threads of runtimes of earlier tests may still be on their way out.
            let before = elite_threads();
            // Shared with the calls, which watch the queue through the runtime's counters.
            let rt = Arc::new(rt(processors, 1));
            let running = Arc::new(AtomicUsize::new(0));
            let most = Arc::new(AtomicUsize::new(0));
            let most_threads = Arc::new(AtomicUsize::new(0));
            let results: Vec<usize> = rt.block_on(|| {
                let hs: Vec<_> = (0..10usize)
                    .map(|i| {
                        let (r, m, rt) = (running.clone(), most.clone(), rt.clone());
                        let mt = most_threads.clone();
                        spawn(move || {
                            let v = blocking(|| {
                                let now = r.fetch_add(1, SeqCst) + 1;
                                m.fetch_max(now, SeqCst);
                                mt.fetch_max(elite_threads(), SeqCst);
                                let deadline = Instant::now() + Duration::from_secs(30);
                                while rt.stats().blocking.queued < 9 && Instant::now() < deadline {
                                    std::thread::sleep(Duration::from_millis(1));
                                }
                                r.fetch_sub(1, SeqCst);
                                i * 10
                            });
                            assert!(elite_rt::try_current().is_some(), "back on a processor after the call");
                            v
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().expect("caller")).collect()
            });
            assert_eq!(results, (0..10).map(|i| i * 10).collect::<Vec<_>>());
            assert_eq!(most.load(SeqCst), 1, "two calls ran at once under a cap of one");
            let threads = most_threads.load(SeqCst);
            assert!(
                threads <= before + processors + 1,
                "{threads} OS threads for {processors} processors and a cap of 1 ({before} before)"
            );
            settled(&rt);
            let b = rt.stats().blocking;
            assert_eq!(b.calls, 10);
            assert_eq!(b.queued, 9, "{b:?}");
            assert_eq!(b.spares_started, 1, "{b:?}");
            assert!(b.threads <= 1, "more threads than processors + cap: {b:?}");
            assert_eq!(b.in_flight, 0);
        });
    }
}

/// Many calls on two processors and on a synthetic two-node topology: every ULT gets a processor
/// back after its call, the results are right, and the thread count stays within the cap.
#[test]
fn blocking_calls_on_two_processors_and_two_nodes() {
    let _g = shared();
    for spec in [None, Some("2x2")] {
        hang_guard(60, "two processors, two nodes", move || {
            let mut b = Runtime::builder().max_spare_threads(3);
            b = match spec {
                Some(s) => b.topology(s),
                None => b.processors(2),
            };
            let rt = b.build().expect("runtime");
            let processors = rt.processors();
            let total: u64 = rt.block_on(move || {
                let hs: Vec<_> = (0..64u64)
                    .map(|i| {
                        spawn(move || {
                            let mut acc = 0;
                            for k in 0..5 {
                                acc += blocking(move || {
                                    assert!(
                                        elite_rt::try_current().is_none(),
                                        "the call runs as a plain thread"
                                    );
                                    if (i + k) % 3 == 0 {
                                        std::thread::sleep(Duration::from_micros(300));
                                    }
                                    i * k
                                });
                                let here = elite_rt::current().processor();
                                assert!(here < processors);
                                elite_rt::yield_now();
                            }
                            acc
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().expect("caller")).sum()
            });
            assert_eq!(total, (0..64u64).map(|i| i * 10).sum::<u64>());
            settled(&rt);
            let s = rt.stats();
            assert_eq!(s.blocking.calls, 64 * 5);
            assert!(s.blocking.threads <= 3, "{:?}", s.blocking);
            assert!(s.blocking.spares_started <= 3, "{:?}", s.blocking);
            assert_eq!(s.blocking.in_flight, 0);
            assert_eq!(s.blocking.calls, s.blocking.handoffs + s.blocking.queued + s.blocking.unserved);
        });
    }
}

/// A child started by its joiner through the join fast path (it runs on the joiner's stack) calls
/// `blocking`: the call still runs without taking the processor out of service (another ULT runs
/// meanwhile), and the joiner gets the result.
#[test]
fn a_call_in_a_ult_started_by_the_join_fast_path() {
    let _g = shared();
    hang_guard(60, "join fast path", || {
        let rt = rt(1, 2);
        let (v, saw_other) = rt.block_on(|| {
            let other_ran = Arc::new(AtomicBool::new(false));
            let o = other_ran.clone();
            let other = spawn(move || o.store(true, SeqCst));
            let o = other_ran.clone();
            // Spawned last: the top of the start-queue, so the join below starts it inline.
            let child = spawn(move || {
                blocking(move || {
                    let deadline = Instant::now() + Duration::from_secs(30);
                    while !o.load(SeqCst) && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    (7, o.load(SeqCst))
                })
            });
            let out = child.join().expect("child");
            other.join().expect("other");
            out
        });
        assert_eq!(v, 7);
        assert!(saw_other, "the processor ran nothing else while the inline child's call slept");
        let b = rt.stats().blocking;
        assert_eq!((b.calls, b.handoffs), (1, 1), "{b:?}");
    });
}

/// Outside a ULT `blocking` just calls its function; inside a call, elite behaves as on a plain OS
/// thread: nested `blocking`, `yield_now`, `sleep`, `sync` objects, and spawns (which go to the
/// calling ULT's runtime) all work.
#[test]
fn outside_a_ult_and_inside_a_call() {
    let _g = shared();
    assert_eq!(blocking(|| 5), 5);
    assert!(blocking(elite_rt::try_current).is_none());
    hang_guard(60, "inside a call", || {
        let rt = rt(1, 2);
        let lock = Arc::new(UltMutex::new(0u32));
        let l = lock.clone();
        let r = rt.block_on(move || {
            let l2 = l.clone();
            let spawned_sum = blocking(move || {
                assert!(elite_rt::try_current().is_none());
                assert_eq!(blocking(|| 3), 3, "nested blocking");
                elite_rt::yield_now();
                elite_rt::sleep(Duration::from_millis(1));
                *l2.lock().unwrap() += 1;
                // Spawns from inside the call go to the runtime; joining parks this OS thread.
                let hs: Vec<_> = (0..10u32).map(|i| spawn(move || i * 2)).collect();
                let built = elite_rt::Builder::new()
                    .name("from-call".into())
                    .spawn(|| elite_rt::current().name().map(str::to_owned));
                let name = built.expect("Builder::spawn inside a call").join().expect("named");
                assert_eq!(name.as_deref(), Some("from-call"));
                hs.into_iter().map(|h| h.join().expect("spawned from a call")).sum::<u32>()
            });
            *l.lock().unwrap() += 1;
            spawned_sum
        });
        assert_eq!(r, 90);
        assert_eq!(*lock.lock().unwrap(), 2);
    });
    // A spawn outside any runtime and call still reports the lack of a runtime.
    let err = elite_rt::Builder::new().spawn(|| ()).map(|_| ()).unwrap_err();
    assert_eq!(err, elite_rt::SpawnError::NoRuntime);
}

/// A panic in the call reaches the caller of `blocking` like a panic of any function; the
/// processor stays in service, and an uncaught one reaches `join`.
#[test]
fn a_panic_in_the_call_reaches_the_caller() {
    let _g = shared();
    hang_guard(60, "panicking call", || {
        let rt = rt(1, 2);
        let (caught, after) = rt.block_on(|| {
            let caught = std::panic::catch_unwind(|| blocking(|| -> u32 { panic!("boom in a call") }));
            let msg = caught.err().and_then(|p| payload_str(&*p).map(str::to_owned));
            let after: u32 = (0..20u32).map(|i| spawn(move || i).join().unwrap()).sum();
            (msg, after)
        });
        assert_eq!(caught.as_deref(), Some("boom in a call"));
        assert_eq!(after, 190);
        let h = rt.spawn(|| blocking(|| -> u8 { panic!("uncaught in a call") }));
        let err = h.join().expect_err("the panic reaches join");
        assert_eq!(payload_str(&*err), Some("uncaught in a call"));
        // The processor runs on.
        assert_eq!(rt.block_on(|| spawn(|| 5).join().unwrap()), 5);
    });
}

/// Dropping the runtime while a call sleeps returns without waiting for it; the call's thread
/// cancels its ULT when the call returns (the handle reports `Cancelled`, the values on its stack
/// are dropped) and exits. A call queued at the cap never runs; its ULT is cancelled at once.
#[test]
fn shutdown_with_calls_in_flight_neither_hangs_nor_leaks() {
    let _g = shared();
    hang_guard(60, "shutdown with calls in flight", || {
        let rt = rt(1, 1);
        let (release_tx, release_rx) = std_mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let (exit_tx, exit_rx) = std_mpsc::channel::<()>();
        let witness = Arc::new(());
        let in_call = Arc::new(AtomicBool::new(false));
        let queued_ran = Arc::new(AtomicBool::new(false));
        let (w, ic, rx) = (witness.clone(), in_call.clone(), release_rx.clone());
        let sleeper = rt.spawn(move || {
            let _kept = w; // on the ULT's stack across the call: dropped when the ULT is unwound
            blocking(move || {
                // Told when this thread exits (thread-local destructors run at thread exit).
                struct OnExit(std_mpsc::Sender<()>);
                impl Drop for OnExit {
                    fn drop(&mut self) {
                        let _ = self.0.send(());
                    }
                }
                thread_local! { static ON_EXIT: std::cell::RefCell<Option<OnExit>> = const { std::cell::RefCell::new(None) }; }
                ON_EXIT.with(|c| *c.borrow_mut() = Some(OnExit(exit_tx)));
                ic.store(true, SeqCst);
                let _ = rx.lock().unwrap().recv();
            });
            "finished"
        });
        wait_until(30, "the call to start", || in_call.load(SeqCst));
        // A second call, queued behind the first at the cap of one spare thread.
        let q = queued_ran.clone();
        let queued = rt.spawn(move || blocking(move || q.store(true, SeqCst)));
        wait_until(30, "the second call to queue", || rt.stats().blocking.queued == 1);
        assert_eq!(rt.stats().blocking.in_flight, 2);
        // The drop returns while the first call still waits (it is released only afterwards).
        let (dropped_tx, dropped_rx) = std_mpsc::channel();
        std::thread::spawn(move || {
            drop(rt);
            let _ = dropped_tx.send(());
        });
        dropped_rx.recv_timeout(Duration::from_secs(20)).expect("the drop waited for a sleeping call");
        let queued_out = queued.join();
        assert!(queued_out.expect_err("cancelled").downcast_ref::<Cancelled>().is_some());
        assert!(!queued_ran.load(SeqCst), "a call queued at shutdown ran");
        assert!(!sleeper.is_finished(), "cancelled before its call returned");
        assert_eq!(Arc::strong_count(&witness), 2, "the sleeping ULT's stack was unwound under its call");
        release_tx.send(()).expect("release the call");
        let out = sleeper.join();
        assert!(out.expect_err("cancelled").downcast_ref::<Cancelled>().is_some());
        exit_rx.recv_timeout(Duration::from_secs(20)).expect("the call's thread exited");
        os_wait(20, "the ULT's stack to be unwound", || Arc::strong_count(&witness) == 1);
    });
}

fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps").lines().count()
}

fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").expect("read /proc/self/task").count()
}

/// Forty runtimes, each dropped while one of its ULTs sleeps in a blocking call that returns
/// afterwards: threads, mappings (stacks) and memory come back.
#[test]
#[cfg_attr(feature = "sanitizer", ignore = "AddressSanitizer's own mappings hide the runtime's figures")]
fn forty_runtimes_dropped_with_calls_in_flight_leave_nothing_behind() {
    let _g = EXCLUSIVE.write().unwrap_or_else(|e| e.into_inner());
    hang_guard(120, "forty runtimes", || {
        let one = || {
            let rt = rt(2, 2);
            let (tx, rx) = std_mpsc::channel::<()>();
            let rx = Arc::new(Mutex::new(rx));
            let started = Arc::new(AtomicBool::new(false));
            let s = started.clone();
            let h = rt.spawn(move || {
                let spawned: Vec<_> = (0..100u64).map(|i| spawn(move || i)).collect();
                let sum: u64 = spawned.into_iter().map(|h| h.join().unwrap()).sum();
                blocking(move || {
                    s.store(true, SeqCst);
                    let _ = rx.lock().unwrap().recv();
                });
                sum
            });
            wait_until(30, "the call", || started.load(SeqCst));
            drop(rt);
            tx.send(()).expect("release");
            assert!(h.join().expect_err("cancelled").downcast_ref::<Cancelled>().is_some());
        };
        let settle = |threads: usize| {
            os_wait(20, "the runtimes' threads to exit", || thread_count() <= threads);
        };
        for _ in 0..3 {
            one();
        }
        settle(thread_count());
        let (threads0, maps0) = (thread_count(), map_count());
        for _ in 0..40 {
            one();
        }
        settle(threads0);
        let maps1 = map_count();
        assert!(maps1 <= maps0 + 40, "mappings grew from {maps0} to {maps1} over 40 runtimes");
    });
}

/// A spare thread idle for longer than the keep-alive exits; the next call starts another.
#[test]
fn idle_spares_exit_after_the_keep_alive() {
    let _g = shared();
    hang_guard(60, "keep-alive", || {
        let rt = Runtime::builder()
            .processors(1)
            .spare_keep_alive(Duration::from_millis(20))
            .build()
            .expect("runtime");
        assert_eq!(rt.block_on(|| blocking(|| 1)), 1);
        wait_until(30, "the idle spare to exit", || {
            let b = rt.stats().blocking;
            b.threads == 0 && b.spares_exited >= 1
        });
        assert_eq!(rt.block_on(|| blocking(|| 2)), 2);
        let b = rt.stats().blocking;
        assert!(b.spares_started >= 2 && b.threads <= 1, "{b:?}");
    });
}

/// Settings out of range are build errors that name the field and the range.
#[test]
fn spare_thread_settings_are_validated() {
    for n in [0, elite_rt::MAX_SPARE_THREADS + 1] {
        let err = Runtime::builder().max_spare_threads(n).build().expect_err("out of range");
        let msg = err.to_string();
        assert!(msg.contains("max_spare_threads") && msg.contains("1..=4096"), "{msg}");
    }
    let err = Runtime::builder().spare_keep_alive(Duration::from_micros(10)).build().expect_err("under 1 ms");
    assert!(err.to_string().contains("spare_keep_alive"), "{err}");
}

/// Stress on two processors: spawns, joins, channels and a mutex beside blocking calls (short and
/// sleeping) with a cap of two spare threads, so that calls queue. Nothing is lost.
#[test]
fn stress_blocking_calls_mixed_with_everything_else() {
    let _g = shared();
    hang_guard(120, "blocking stress", || {
        let rt = rt(2, 2);
        let counter = Arc::new(UltMutex::new(0u64));
        let c = counter.clone();
        let (total, received) = rt.block_on(move || {
            let (tx, rx) = mpsc::channel::<u64>();
            let hs: Vec<_> = (0..200u64)
                .map(|i| {
                    let (tx, c) = (tx.clone(), c.clone());
                    spawn(move || {
                        let mut acc = 0u64;
                        for k in 0..10u64 {
                            match (i + k) % 5 {
                                0 => acc += blocking(move || i + k),
                                1 => {
                                    acc += blocking(move || {
                                        std::thread::sleep(Duration::from_micros(200));
                                        i * k
                                    })
                                }
                                2 => acc += spawn(move || i ^ k).join().expect("child"),
                                3 => {
                                    *c.lock().unwrap() += 1;
                                    acc += 1;
                                }
                                _ => {
                                    tx.send(i + k).expect("send");
                                    elite_rt::yield_now();
                                }
                            }
                        }
                        acc
                    })
                })
                .collect();
            drop(tx);
            let total: u64 = hs.into_iter().map(|h| h.join().expect("worker")).sum();
            let received: u64 = rx.iter().sum();
            (total, received)
        });
        let mut want_total = 0u64;
        let mut want_received = 0u64;
        let mut want_count = 0u64;
        for i in 0..200u64 {
            for k in 0..10u64 {
                match (i + k) % 5 {
                    0 => want_total += i + k,
                    1 => want_total += i * k,
                    2 => want_total += i ^ k,
                    3 => {
                        want_total += 1;
                        want_count += 1;
                    }
                    _ => want_received += i + k,
                }
            }
        }
        assert_eq!(total, want_total);
        assert_eq!(received, want_received);
        assert_eq!(*counter.lock().unwrap(), want_count);
        settled(&rt);
        let b = rt.stats().blocking;
        assert_eq!(b.calls, 800);
        assert!(b.threads <= 2 && b.spares_started <= 2, "{b:?}");
        assert_eq!(b.in_flight, 0);
    });
}

/// Pinned ULTs never leave their OS thread, blocking calls or not: on a processor where a pinned
/// ULT lives, a call (the pinned ULT's own, or another ULT's) runs on the processor's thread
/// instead of handing the processor to a spare; without a pinned ULT the same calls hand off.
#[test]
fn blocking_calls_keep_pinned_ults_on_their_os_thread() {
    let _g = shared();
    hang_guard(60, "pinned ULTs and blocking calls", || {
        let rt = rt(1, 4);
        let (stayed, inside_same) = rt.block_on(|| {
            let pinned = elite_rt::Builder::new()
                .pinned(true)
                .spawn(|| {
                    let home = std::thread::current().id();
                    let mut stayed = true;
                    let mut inside_same = true;
                    for _ in 0..20 {
                        // Its own call runs on its own thread.
                        let inside = blocking(|| {
                            std::thread::sleep(Duration::from_millis(1));
                            std::thread::current().id()
                        });
                        inside_same &= inside == home;
                        elite_rt::yield_now();
                        stayed &= std::thread::current().id() == home;
                    }
                    (stayed, inside_same)
                })
                .unwrap();
            // Another ULT's calls on the same (only) processor.
            let other = spawn(|| {
                for _ in 0..20 {
                    blocking(|| std::thread::sleep(Duration::from_millis(1)));
                    elite_rt::yield_now();
                }
            });
            other.join().unwrap();
            pinned.join().unwrap()
        });
        assert!(stayed, "a pinned ULT moved to another OS thread around blocking calls");
        assert!(inside_same, "a pinned ULT's blocking call ran on another OS thread");
        let b = rt.stats().blocking;
        assert_eq!(b.calls, 40);
        assert!(b.pinned_inline >= 20, "{b:?}");
        assert_eq!(b.calls, b.pinned_inline + b.handoffs + b.queued + b.unserved, "{b:?}");
        // Once the pinned ULT has exited, calls hand the processor off again.
        rt.block_on(|| blocking(|| std::thread::sleep(Duration::from_millis(1))));
        settled(&rt);
        assert_eq!(rt.stats().blocking.handoffs, b.handoffs + 1);
    });
}

/// The reclaim after a call takes back only the handoff its own caller made. Three workers share
/// one processor p, each handing it on in turn: W runs p and hands it to spare S1 with call A; S1
/// runs p and hands it to spare S2 with call B; B returns (S1 becomes a spare again) and S2 hands
/// p to S1 with call C. When A returns while that second offer to S1 is still pending, W must not
/// take it for the offer of its own handoff: W would run p while p's park slot still names S2, the
/// last thread that took p over, so the next wake-up of p, once idle, would unpark S2 and p would
/// sleep for ever (the hang of the mixed stress load). A's call spins on the handoff count to
/// return the instant C's offer is made, before S1 can wake and take it; each round then lets p
/// park and wakes it from outside, which hangs (the guard fails) if the slot names the wrong
/// thread.
#[test]
fn a_reclaim_takes_back_only_its_own_handoff() {
    let _g = shared();
    for pin in [false, true] {
        hang_guard(60, "reclaim of another worker's handoff", move || {
            let rt = Arc::new(
                Runtime::builder()
                    .processors(1)
                    .max_spare_threads(2)
                    .pin_threads(pin)
                    .build()
                    .expect("build runtime"),
            );
            let r = rt.clone();
            rt.block_on(move || {
                for round in 0..20u64 {
                    let b_in = Arc::new(AtomicBool::new(false));
                    let b_go = Arc::new(AtomicBool::new(false));
                    let handoffs = r.stats().blocking.handoffs;
                    // A: the first handoff; returns as soon as a third one (C's) is made.
                    let ra = r.clone();
                    let a = spawn(move || {
                        blocking(move || {
                            let deadline = Instant::now() + Duration::from_secs(20);
                            while ra.stats().blocking.handoffs < handoffs + 3 {
                                assert!(Instant::now() < deadline, "C's handoff never came");
                                std::hint::spin_loop();
                            }
                            round
                        })
                    });
                    elite_rt::yield_now(); // A calls, p goes to another thread
                                           // B: the second handoff; returns when told, once p runs on a third thread.
                    let (bi, bg) = (b_in.clone(), b_go.clone());
                    let b = spawn(move || {
                        blocking(move || {
                            bi.store(true, SeqCst);
                            os_wait(20, "B's release", || bg.load(SeqCst));
                            round + 1
                        })
                    });
                    let deadline = Instant::now() + Duration::from_secs(20);
                    while !b_in.load(SeqCst) {
                        assert!(Instant::now() < deadline, "B's call never started");
                        elite_rt::yield_now();
                    }
                    // p runs here on the third thread; B's thread becomes a spare again.
                    let parked = r.stats().blocking.spares_parked;
                    b_go.store(true, SeqCst);
                    while r.stats().blocking.spares_parked == parked {
                        assert!(Instant::now() < deadline, "B's thread never became a spare");
                        elite_rt::yield_now();
                    }
                    // C: the third handoff, to B's thread, made while A spins for it.
                    let c = blocking(|| round + 2);
                    assert_eq!(a.join().expect("A"), round);
                    assert_eq!(b.join().expect("B"), round + 1);
                    assert_eq!(c, round + 2);
                    // Let p park, then wake it from outside: lost if its slot names another thread.
                    let (tx, rx) = mpsc::channel::<u64>();
                    let waker = std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(5));
                        tx.send(round).expect("send from outside");
                    });
                    assert_eq!(rx.recv().expect("the outside send"), round);
                    waker.join().expect("waker thread");
                }
            });
            settled(&rt);
            assert_eq!(rt.stats().blocking.in_flight, 0);
        });
    }
}
