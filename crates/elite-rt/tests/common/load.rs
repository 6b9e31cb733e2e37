//! A round of mixed load for the stress and soak tests: spawn and join trees, a contended mutex, a
//! channel pipeline, condvar turn-taking, barrier phases, sleeps, blocking calls, yields, joined
//! and detached panics; every part checks its own invariant (sums, counts, exactly-once delivery).

use super::ult_sleep_until;
use elite_rt::sync::{mpsc, Barrier, Condvar, Mutex};
use elite_rt::{spawn, yield_now, Builder, Runtime, RuntimeBuilder};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Once};
use std::time::Duration;

/// The message of every deliberate panic here (the panic hook keeps them off stderr).
pub const PANIC_MESSAGE: &str = "deliberate panic of the mixed load";

/// Keeps the deliberate panics quiet; any other panic is printed as usual.
pub fn quiet_deliberate_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| info.payload().downcast_ref::<String>().map(|s| s.as_str()));
            if msg != Some(PANIC_MESSAGE) {
                previous(info);
            }
        }));
    });
}

/// A builder whose runtime counts its detached panics in `reports`.
pub fn counting_builder(reports: &Arc<AtomicUsize>) -> RuntimeBuilder {
    quiet_deliberate_panics();
    let reports = reports.clone();
    Runtime::builder().detached_panic_hook(move |p| {
        assert_eq!(p.payload_as_str(), Some(PANIC_MESSAGE), "an unexpected detached panic");
        reports.fetch_add(1, SeqCst);
    })
}

/// Sizes of one round.
pub struct Load {
    /// ULTs in the spawn tree's widest level.
    pub fan: usize,
    /// ULTs on the mutex, and increments each.
    pub lockers: usize,
    pub increments: usize,
    /// Items through the channel pipeline.
    pub items: u64,
}

impl Load {
    pub const SMALL: Load = Load { fan: 64, lockers: 16, increments: 20, items: 300 };
}

/// Runs one round of the mixed load on `rt`; `reports` is the count its detached-panic hook
/// keeps (see [`counting_builder`]), which the round's 4 detached panics raise by exactly 4.
pub fn mixed_round(rt: &Runtime, load: &Load, reports: &Arc<AtomicUsize>) {
    let (fan, lockers, increments, items) = (load.fan, load.lockers, load.increments, load.items);
    let before = reports.load(SeqCst);
    let reports = reports.clone();
    rt.block_on(move || {
        // 1. A spawn tree: each of `fan` ULTs spawns two children and joins them.
        let trees: Vec<_> = (0..fan as u64)
            .map(|i| {
                spawn(move || {
                    let a = spawn(move || 2 * i);
                    let b = spawn(move || {
                        if i % 3 == 0 {
                            yield_now();
                        }
                        2 * i + 1
                    });
                    a.join().unwrap() + b.join().unwrap()
                })
            })
            .collect();

        // 2. A contended mutex, with yields inside the critical section.
        let counter = Arc::new(Mutex::new(0usize));
        let lock_hs: Vec<_> = (0..lockers)
            .map(|i| {
                let c = counter.clone();
                spawn(move || {
                    for k in 0..increments {
                        let mut g = c.lock().unwrap();
                        *g += 1;
                        if (i + k) % 4 == 0 {
                            yield_now();
                        }
                    }
                })
            })
            .collect();

        // 3. A three-stage channel pipeline: exactly once, in order.
        let (tx1, rx1) = mpsc::channel::<u64>();
        let (tx2, rx2) = mpsc::sync_channel::<u64>(4);
        let stage = spawn(move || {
            for x in rx1 {
                tx2.send(x * 2).unwrap();
            }
        });
        let sink = spawn(move || {
            let mut expected = 0;
            for x in rx2 {
                assert_eq!(x, expected * 2, "the pipeline lost, doubled or reordered an item");
                expected += 1;
            }
            expected
        });
        let source = spawn(move || {
            for x in 0..items {
                tx1.send(x).unwrap();
                if x % 64 == 0 {
                    yield_now();
                }
            }
        });

        // 4. Condvar turn-taking between two ULTs.
        let turn = Arc::new((Mutex::new(0u32), Condvar::new()));
        let turns: Vec<_> = (0..2u32)
            .map(|me| {
                let turn = turn.clone();
                spawn(move || {
                    for _ in 0..50 {
                        let (m, cv) = &*turn;
                        let mut g = cv.wait_while(m.lock().unwrap(), |t| *t % 2 != me).unwrap();
                        *g += 1;
                        drop(g);
                        cv.notify_all();
                    }
                })
            })
            .collect();

        // 5. Barrier phases.
        let barrier = Arc::new(Barrier::new(8));
        let phase_count = Arc::new(AtomicUsize::new(0));
        let phases: Vec<_> = (0..8)
            .map(|_| {
                let (b, n) = (barrier.clone(), phase_count.clone());
                spawn(move || {
                    for phase in 0..5 {
                        n.fetch_add(1, SeqCst);
                        b.wait();
                        assert!(n.load(SeqCst) >= 8 * (phase + 1), "a barrier let a ULT through early");
                        b.wait();
                    }
                })
            })
            .collect();

        // 6. Sleepers.
        let sleepers: Vec<_> = (0..4u64)
            .map(|k| {
                spawn(move || {
                    let t0 = std::time::Instant::now();
                    elite_rt::sleep(Duration::from_millis(1 + k));
                    assert!(t0.elapsed() >= Duration::from_millis(1 + k), "woke too early");
                })
            })
            .collect();

        // 6b. Blocking calls: short sleeps in the kernel, two calls per ULT.
        let ncallers = 4u64;
        let callers: Vec<_> = (0..ncallers)
            .map(|k| {
                spawn(move || {
                    let v = elite_rt::blocking(move || {
                        std::thread::sleep(Duration::from_micros(200 * (k + 1)));
                        k * 10
                    });
                    elite_rt::yield_now();
                    v + elite_rt::blocking(move || k)
                })
            })
            .collect();

        // 7. Panics: joined ones arrive as `Err`, detached ones at the hook.
        let joined_panics: Vec<_> =
            (0..8).map(|_| spawn(|| -> u32 { panic!("{}", PANIC_MESSAGE) })).collect();
        for _ in 0..4 {
            drop(Builder::new().name("detached".into()).spawn(|| panic!("{}", PANIC_MESSAGE)).unwrap());
        }

        let sum: u64 = trees.into_iter().map(|h| h.join().unwrap()).sum();
        let n = 2 * fan as u64;
        assert_eq!(sum, n * (n - 1) / 2, "spawn tree");
        for h in lock_hs {
            h.join().unwrap();
        }
        assert_eq!(*counter.lock().unwrap(), lockers * increments, "mutex count");
        source.join().unwrap();
        stage.join().unwrap();
        assert_eq!(sink.join().unwrap(), items, "pipeline delivered");
        for h in turns {
            h.join().unwrap();
        }
        assert_eq!(*turn.0.lock().unwrap(), 100, "condvar turns");
        for h in phases.into_iter().chain(sleepers) {
            h.join().unwrap();
        }
        let called: u64 = callers.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(called, (0..ncallers).map(|k| k * 11).sum::<u64>(), "blocking calls' results");
        for h in joined_panics {
            let err = h.join().expect_err("a panicking ULT joined as Ok");
            assert_eq!(super::payload_str(&*err), Some(PANIC_MESSAGE));
        }
        // The detached panics are reported as each of those ULTs ends.
        ult_sleep_until(30, "the detached panics' reports", || reports.load(SeqCst) >= before + 4);
        assert_eq!(reports.load(SeqCst), before + 4, "detached panics reported other than once each");
    });
}
