//! Shutdown: dropping a runtime with ULTs in every state, cancellation seen through join handles,
//! handles that outlive their runtime, and many runtimes created and dropped.

mod common;

use common::{hang_guard, ult_sleep_until, wait_until};
use elite_rt::{spawn, Builder, Cancelled, JoinHandle, Runtime, SpawnError};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

/// The mapping-count test takes this exclusively: no other test of this file may create or drop
/// runtimes (thread stacks, ULT stacks) while it counts `/proc/self/maps` lines.
static MAPS: RwLock<()> = RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    MAPS.read().unwrap_or_else(|e| e.into_inner())
}

fn rt(processors: usize) -> Runtime {
    Runtime::builder().processors(processors).build().expect("build runtime")
}

fn assert_cancelled<T: std::fmt::Debug>(r: std::thread::Result<T>, what: &str) {
    match r {
        Ok(v) => panic!("{what}: expected Cancelled, got Ok({v:?})"),
        Err(p) => assert!(p.downcast_ref::<Cancelled>().is_some(), "{what}: payload is not Cancelled"),
    }
}

/// Drops `rt` on another thread and fails the test if that takes more than 20 s.
fn drop_with_hang_guard(rt: Runtime) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("dropping the runtime hung");
}

/// Two processors: a ULT blocked forever in a join (of a ULT sleeping an hour), detached ULTs
/// sleeping an hour, a ULT blocked in a join from an OS thread. The drop returns, and every handle
/// reports `Cancelled`.
#[test]
fn drop_with_blocked_and_sleeping_ults_returns_promptly() {
    let _g = shared();
    let rt = rt(2);
    let started = Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    let joiner = rt.spawn(move || {
        s.fetch_add(1, SeqCst);
        let s2 = s.clone();
        let sleeper = spawn(move || {
            s2.fetch_add(1, SeqCst);
            elite_rt::sleep(HOUR);
            1u32
        });
        sleeper.join().map_err(|_| ()).unwrap() // blocks for an hour
    });
    for _ in 0..10 {
        let s = started.clone();
        drop(rt.spawn(move || {
            s.fetch_add(1, SeqCst);
            elite_rt::sleep(HOUR);
        }));
    }
    let s = started.clone();
    let long = rt.spawn(move || {
        s.fetch_add(1, SeqCst);
        elite_rt::sleep(HOUR);
        "never"
    });
    wait_until(30, "every ULT to start", || started.load(SeqCst) == 13);
    // An OS thread blocked in a join when the runtime goes away.
    let os_joiner = std::thread::spawn(move || long.join());
    std::thread::sleep(Duration::from_millis(20));

    drop_with_hang_guard(rt);

    assert_cancelled(joiner.join(), "ULT blocked in a join");
    assert_cancelled(os_joiner.join().expect("joiner thread"), "join from an OS thread");
}

/// One processor held by a ULT that keeps spawning until it sees `ShuttingDown`, so the ULTs it
/// spawned can never start: they are still queued when the runtime is dropped. Their closures are
/// dropped, they never run, their handles report `Cancelled`, and spawning during the shutdown is
/// refused with `SpawnError::ShuttingDown`.
#[test]
fn drop_cancels_queued_ults_and_refuses_spawns() {
    let _g = shared();
    let rt = rt(1);
    let ran = Arc::new(AtomicUsize::new(0));
    let witness = Arc::new(()); // cloned into every queued closure
    let queued: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::new(Mutex::new(Vec::new()));
    let refusal: Arc<Mutex<Option<SpawnError>>> = Arc::new(Mutex::new(None));
    let spinning = Arc::new(AtomicBool::new(false));

    // The spinner holds only a weak reference: values on the stack of a ULT cancelled at shutdown
    // are leaked (documented), and a strong one there would keep the count up.
    let weak = Arc::downgrade(&witness);
    let (r, q, f, sp) = (ran.clone(), queued.clone(), refusal.clone(), spinning.clone());
    let spinner = rt.spawn(move || {
        sp.store(true, SeqCst);
        loop {
            let (r, w) = (r.clone(), weak.upgrade().expect("the test holds the witness"));
            match Builder::new().spawn(move || {
                let _keep = w;
                r.fetch_add(1, SeqCst);
            }) {
                Ok(h) => {
                    let mut q = q.lock().unwrap();
                    if q.len() < 1000 {
                        q.push(h);
                    }
                }
                Err(e) => {
                    *f.lock().unwrap() = Some(e);
                    break;
                }
            }
            // Hold the only processor (an OS sleep, deliberately), so nothing queued can start.
            std::thread::sleep(Duration::from_millis(1));
        }
        elite_rt::sleep(HOUR); // switch out, so the processor can stop
    });
    wait_until(30, "the spinner", || spinning.load(SeqCst) && queued.lock().unwrap().len() >= 20);

    drop_with_hang_guard(rt);

    assert_eq!(*refusal.lock().unwrap(), Some(SpawnError::ShuttingDown));
    assert_eq!(ran.load(SeqCst), 0, "a queued ULT ran although its processor was never free");
    assert_cancelled(spinner.join(), "the sleeping spinner");
    let handles = std::mem::take(&mut *queued.lock().unwrap());
    assert!(handles.len() >= 20);
    for h in handles {
        assert!(h.is_finished(), "a cancelled ULT counts as finished");
        assert_cancelled(h.join(), "a queued ULT");
    }
    // Every queued closure (all holding a clone of the witness) was dropped by the shutdown.
    assert_eq!(Arc::strong_count(&witness), 1, "closures of cancelled, never-started ULTs were not dropped");
}

#[test]
fn handle_of_an_unfinished_ult_joined_after_drop_is_cancelled() {
    let _g = shared();
    let rt = rt(2);
    let started = Arc::new(AtomicBool::new(false));
    let s = started.clone();
    let h = rt.spawn(move || {
        s.store(true, SeqCst);
        elite_rt::sleep(HOUR);
        42
    });
    // A handle made inside a ULT and carried out of block_on.
    let inner: JoinHandle<u8> = rt.block_on(|| {
        spawn(|| loop {
            elite_rt::sleep(HOUR);
        })
    });
    wait_until(30, "the sleeper", || started.load(SeqCst));
    assert!(!h.is_finished());
    drop_with_hang_guard(rt);
    assert!(h.is_finished());
    assert_cancelled(h.join(), "a ULT sleeping at shutdown");
    // Joined from another OS thread as well.
    let r = std::thread::spawn(move || inner.join()).join().unwrap();
    assert_cancelled(r, "an inner ULT sleeping at shutdown");
}

#[test]
fn finished_handles_outlive_the_runtime() {
    let _g = shared();
    let rt = rt(2);
    let outside: Vec<JoinHandle<String>> =
        (0..50).map(|i| rt.spawn(move || format!("outside {i}"))).collect();
    let inside: Vec<JoinHandle<Vec<u64>>> =
        rt.block_on(|| (0..50u64).map(|i| spawn(move || vec![i; 3])).collect());
    let to_drop: Vec<JoinHandle<u64>> = (0..50).map(|i| rt.spawn(move || i)).collect();
    wait_until(30, "every ULT to finish", || {
        outside.iter().all(|h| h.is_finished())
            && inside.iter().all(|h| h.is_finished())
            && to_drop.iter().all(|h| h.is_finished())
    });
    drop_with_hang_guard(rt);
    for (i, h) in outside.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), format!("outside {i}"));
    }
    // Joined on another thread, after the runtime is gone.
    let vs = std::thread::spawn(move || inside.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>())
        .join()
        .unwrap();
    for (i, v) in vs.into_iter().enumerate() {
        assert_eq!(v, vec![i as u64; 3]);
    }
    drop(to_drop); // dropped unjoined, after the runtime
}

/// A ULT detached while blocked in `join`: the runtime still shuts down.
#[test]
fn drop_while_ults_wait_on_each_other() {
    let _g = shared();
    hang_guard(60, "chains at shutdown", || {
        let rt = rt(2);
        let depth = Arc::new(AtomicUsize::new(0));
        let d = depth.clone();
        fn link(n: usize, d: Arc<AtomicUsize>) {
            d.fetch_add(1, SeqCst);
            if n == 0 {
                elite_rt::sleep(HOUR);
            } else {
                let d2 = d.clone();
                let _ = spawn(move || link(n - 1, d2)).join();
            }
        }
        drop(rt.spawn(move || link(100, d)));
        wait_until(30, "the chain", || depth.load(SeqCst) == 101);
        drop_with_hang_guard(rt);
    });
}

fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps").lines().count()
}

fn vm_rss_kib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn one_runtime_lifetime(round: u64) {
    let rt = rt(2);
    let sum = rt.block_on(move || {
        let hs: Vec<_> = (0..100u64)
            .map(|i| {
                spawn(move || {
                    if i % 10 == 0 {
                        elite_rt::sleep(Duration::from_micros(100)); // hold a stack across a switch
                    }
                    i + round
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(sum, 4950 + 100 * round);
    // Some ULTs left behind at the drop: detached sleepers and a queued-or-sleeping handle.
    drop(rt.spawn(|| elite_rt::sleep(HOUR)));
    let h = rt.spawn(|| elite_rt::sleep(HOUR));
    drop(rt);
    assert_cancelled(h.join(), "left behind");
}

#[test]
#[cfg_attr(
    feature = "sanitizer",
    ignore = "AddressSanitizer's quarantine keeps freed memory resident, so RSS grows without a leak (LeakSanitizer checks leaks there)"
)]
fn two_hundred_runtimes_do_not_leak_mappings_or_memory() {
    let _g = MAPS.write().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "200 runtimes", || {
        // Warm up: thread-stack caches and allocator arenas reach their steady state.
        for round in 0..5 {
            one_runtime_lifetime(round);
        }
        let (maps0, rss0) = (map_count(), vm_rss_kib());
        for round in 0..200 {
            one_runtime_lifetime(round);
        }
        let (maps1, rss1) = (map_count(), vm_rss_kib());
        assert!(maps1 <= maps0 + 200, "mappings grew from {maps0} to {maps1} over 200 runtimes");
        assert!(rss1 <= rss0 + 64 * 1024, "RSS grew from {rss0} KiB to {rss1} KiB over 200 runtimes");
    });
}

/// Runtimes dropped while a ULT of theirs sits in `ult_sleep_until` on a flag that never flips.
#[test]
fn drop_with_ults_polling_forever() {
    let _g = shared();
    let rt = rt(2);
    let flag = Arc::new(AtomicBool::new(false));
    let polling = Arc::new(AtomicUsize::new(0));
    for _ in 0..4 {
        let (f, p) = (flag.clone(), polling.clone());
        drop(rt.spawn(move || {
            p.fetch_add(1, SeqCst);
            ult_sleep_until(3600, "never", || f.load(SeqCst));
        }));
    }
    wait_until(30, "the pollers", || polling.load(SeqCst) == 4);
    drop_with_hang_guard(rt);
}

/// One processor, 64 ULTs yielding to each other for ever (served in batches taken from the
/// runqueue, `queue::run::YieldBatch`): the processor still goes back to its loop now and then,
/// so the drop returns, and a ULT spawned meanwhile from outside starts.
#[test]
fn drop_with_ults_yielding_forever() {
    let _g = shared();
    let rt = rt(1);
    let yielding = Arc::new(AtomicUsize::new(0));
    for _ in 0..64 {
        let y = yielding.clone();
        drop(rt.spawn(move || {
            y.fetch_add(1, SeqCst);
            loop {
                elite_rt::yield_now();
            }
        }));
    }
    wait_until(30, "the yielders", || yielding.load(SeqCst) == 64);
    let started = Arc::new(AtomicBool::new(false));
    let s = started.clone();
    drop(rt.spawn(move || s.store(true, SeqCst)));
    wait_until(30, "a ULT spawned beside the yielders", || started.load(SeqCst));
    drop_with_hang_guard(rt);
}

/// Handles of every origin, released in every way after their runtime is gone: joined or dropped on
/// OS threads, dropped inside ULTs of another runtime, dropped while the runtime is being dropped.
#[test]
fn handles_released_after_and_during_the_drop() {
    let _g = shared();
    hang_guard(60, "late releases", || {
        for round in 0..20 {
            let rt = rt(2);
            let outside: Vec<JoinHandle<usize>> = (0..20).map(|i| rt.spawn(move || i)).collect();
            let inside: Vec<JoinHandle<usize>> = rt.block_on(|| (0..20).map(|i| spawn(move || i)).collect());
            let sleeping: Vec<JoinHandle<()>> = (0..5).map(|_| rt.spawn(|| elite_rt::sleep(HOUR))).collect();
            wait_until(30, "the short ULTs", || outside.iter().chain(&inside).all(|h| h.is_finished()));
            // Some handles are dropped by another thread while the runtime is being dropped.
            let (racing, outside) = {
                let mut o = outside;
                let rest = o.split_off(10);
                (o, rest)
            };
            let racer = std::thread::spawn(move || {
                for h in racing {
                    if round % 2 == 0 {
                        drop(h);
                    } else {
                        assert!(h.join().is_ok());
                    }
                }
            });
            drop(rt);
            racer.join().unwrap();
            // The rest inside a ULT of a new runtime.
            let other = self::rt(1);
            let sum = other.block_on(move || {
                let mut sum = 0;
                for h in outside {
                    sum += h.join().unwrap();
                }
                for h in sleeping {
                    assert!(h.join().unwrap_err().downcast_ref::<Cancelled>().is_some());
                }
                drop(inside);
                sum
            });
            assert_eq!(sum, (10..20).sum::<usize>());
        }
    });
}

/// A runtime's memory (TCB chunks and all) is freed once the last handle that outlived it is gone:
/// 40 runtimes of 5000 ULTs each, with handles released after the drop, leave the resident set
/// about where it was after the first few.
#[test]
#[cfg_attr(
    feature = "sanitizer",
    ignore = "AddressSanitizer's own mappings and quarantine hide the runtime's memory figures"
)]
fn runtime_memory_is_freed_when_outliving_handles_go() {
    let _g = MAPS.write().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "memory freed after handles", || {
        let one = || {
            let rt = rt(2);
            let kept: Vec<JoinHandle<u64>> = rt.block_on(|| {
                let hs: Vec<_> = (0..5000u64).map(|i| spawn(move || i)).collect();
                let mut kept = Vec::new();
                for (i, h) in hs.into_iter().enumerate() {
                    if i % 500 == 0 {
                        kept.push(h);
                    } else {
                        h.join().unwrap();
                    }
                }
                kept
            });
            drop(rt);
            let s: u64 = kept.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(s, (0..10).map(|k| k * 500).sum::<u64>());
        };
        for _ in 0..5 {
            one();
        }
        let rss0 = vm_rss_kib();
        for _ in 0..40 {
            one();
        }
        let rss1 = vm_rss_kib();
        assert!(rss1 <= rss0 + 24 * 1024, "RSS grew from {rss0} KiB to {rss1} KiB over 40 runtimes");
    });
}

/// The same, but each runtime is dropped while one of its ULTs is blocked joining another. The
/// docs say values on a cancelled ULT's stack are leaked; the joiner's `JoinHandle` is such a value,
/// and as the runtime's shared state lives until the last handle is released, the whole runtime
/// (every TCB chunk it ever allocated: ~1.4 MB after 5000 ULTs) leaks with it. 40 such runtimes
/// grow the resident set by ~55 MB.
#[test]
#[cfg_attr(
    feature = "sanitizer",
    ignore = "AddressSanitizer's own mappings and quarantine hide the runtime's memory figures"
)]
fn runtime_memory_is_freed_after_a_drop_with_a_blocked_joiner() {
    let _g = MAPS.write().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "memory after blocked joiners", || {
        let one = || {
            let rt = rt(2);
            rt.block_on(|| {
                let hs: Vec<_> = (0..5000u64).map(|i| spawn(move || i)).collect();
                assert_eq!(hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>(), 4999 * 5000 / 2);
            });
            let blocked = Arc::new(AtomicBool::new(false));
            let b = blocked.clone();
            drop(rt.spawn(move || {
                let h = spawn(|| elite_rt::sleep(HOUR));
                b.store(true, SeqCst);
                let _ = h.join();
            }));
            wait_until(30, "the joiner", || blocked.load(SeqCst));
            drop(rt);
        };
        for _ in 0..5 {
            one();
        }
        let rss0 = vm_rss_kib();
        for _ in 0..40 {
            one();
        }
        let rss1 = vm_rss_kib();
        assert!(rss1 <= rss0 + 24 * 1024, "RSS grew from {rss0} KiB to {rss1} KiB over 40 runtimes");
    });
}

/// A runtime dropped by one of its own ULTs shuts down in the background instead of waiting for
/// itself: the dropping ULT finishes its run, its join (from outside) still gets its value, and the
/// runtime's threads end.
#[test]
fn a_runtime_dropped_by_its_own_ult_shuts_down() {
    hang_guard(30, "drop from inside", || {
        let slot: Arc<std::sync::Mutex<Option<Runtime>>> = Arc::new(std::sync::Mutex::new(None));
        let rt = Runtime::builder().processors(2).build().expect("runtime");
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = {
            let slot = slot.clone();
            rt.spawn(move || {
                // Wait until the runtime is in the slot, take it and drop it right here.
                let rt = loop {
                    if let Some(rt) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
                        break rt;
                    }
                    elite_rt::yield_now();
                };
                drop(rt);
                tx.send(()).expect("report the drop");
                42
            })
        };
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(rt);
        rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the ULT got past its drop");
        assert_eq!(handle.join().expect("the dropping ULT finished"), 42);
    });
}
