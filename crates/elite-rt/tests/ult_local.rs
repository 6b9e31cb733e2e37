//! ULT-local storage (`ult_local!`): one value per ULT, made on first use, dropped when the ULT
//! ends (before its join returns, or when the shutdown cancels it), never seen by another ULT, and
//! the same after the ULT moved to another processor.

mod common;

use common::{hang_guard, wait_until, Alternate};
use elite_rt::policy::Policy;
use elite_rt::{spawn, ult_local, yield_now, Runtime};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

ult_local! {
    static MINE: Cell<u64> = Cell::new(u64::MAX);
    static TRAIL: RefCell<Vec<u64>> = RefCell::new(Vec::new());
}

#[test]
fn each_ult_keeps_its_own_value_across_blocks_and_processors() {
    hang_guard(60, "ULT-locals across migration", || {
        let rt = Runtime::builder().processors(2).policy(Policy::new(Alternate)).build().unwrap();
        let moves = rt.block_on(|| {
            const PAIRS: u64 = 8;
            const ROUNDS: u64 = 50;
            let mut hs = Vec::new();
            for pair in 0..PAIRS {
                // Two ULTs play ping-pong: each receive blocks, and the policy wakes the receiver on
                // the other processor.
                let (to_b, from_a) = elite_rt::sync::mpsc::channel::<u64>();
                let (to_a, from_b) = elite_rt::sync::mpsc::channel::<u64>();
                for (me, tx, rx) in [(2 * pair, to_b, from_b), (2 * pair + 1, to_a, from_a)] {
                    hs.push(spawn(move || {
                        assert_eq!(MINE.get(), u64::MAX, "a fresh ULT sees the initial value");
                        MINE.set(me);
                        let mut moves = 0;
                        let mut at = elite_rt::current().processor();
                        if me % 2 == 0 {
                            tx.send(0).unwrap();
                        }
                        for _ in 0..ROUNDS {
                            let Ok(n) = rx.recv() else { break };
                            // The value follows the ULT wherever it resumed.
                            assert_eq!(MINE.get(), me);
                            TRAIL.with_borrow_mut(|t| t.push(n));
                            let now = elite_rt::current().processor();
                            moves += (now != at) as u64;
                            at = now;
                            if tx.send(n + 1).is_err() {
                                break;
                            }
                        }
                        let trail = TRAIL.take();
                        assert!(trail.windows(2).all(|w| w[1] == w[0] + 2), "only this ULT's own values");
                        moves
                    }));
                }
            }
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        // The point of the test: values were read after moves between processors.
        assert!(moves > 0, "no ULT changed processor");
    });
}

/// Pushes its id to a shared log when dropped.
struct Recorded(u64, Arc<Mutex<Vec<u64>>>);

impl Drop for Recorded {
    fn drop(&mut self) {
        self.1.lock().unwrap().push(self.0);
    }
}

ult_local! {
    static RECORDED: RefCell<Option<Recorded>> = RefCell::new(None);
}

/// A ULT's result that, when dropped, stores a `Recorded` in the dropping ULT's `RECORDED`.
struct MakesLocalsWhenDropped(u64, Arc<Mutex<Vec<u64>>>);

impl Drop for MakesLocalsWhenDropped {
    fn drop(&mut self) {
        RECORDED.set(Some(Recorded(self.0, self.1.clone())));
    }
}

static INITS: AtomicUsize = AtomicUsize::new(0);

ult_local! {
    static COUNTED: Cell<u32> = {
        INITS.fetch_add(1, SeqCst);
        Cell::new(0)
    };
}

#[test]
fn values_are_made_lazily_and_dropped_before_join_returns() {
    hang_guard(60, "ULT-local lifetimes", || {
        let rt = Runtime::builder().processors(2).build().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        rt.block_on(|| {
            let before = INITS.load(SeqCst);
            // ULTs that never touch a key do not make a value.
            let idle: Vec<_> = (0..50).map(|_| spawn(yield_now)).collect();
            idle.into_iter().for_each(|h| h.join().unwrap());
            assert_eq!(INITS.load(SeqCst), before);
            // ULTs that do make one each, once.
            let users: Vec<_> = (0..50)
                .map(|_| {
                    spawn(|| {
                        COUNTED.set(COUNTED.get() + 1);
                        yield_now();
                        COUNTED.set(COUNTED.get() + 1);
                        COUNTED.get()
                    })
                })
                .collect();
            assert!(users.into_iter().all(|h| h.join().unwrap() == 2));
            assert_eq!(INITS.load(SeqCst), before + 50);

            for i in 0..20u64 {
                let l = log.clone();
                let h = spawn(move || {
                    RECORDED.set(Some(Recorded(i, l)));
                    yield_now();
                    if i % 2 == 1 {
                        panic!("a panicking ULT's values are dropped too");
                    }
                });
                let _ = h.join();
                // Dropped at the ULT's end, before its exit was published.
                assert_eq!(log.lock().unwrap().last(), Some(&i));
            }
        });
        assert_eq!(*log.lock().unwrap(), (0..20).collect::<Vec<_>>());
    });
}

#[test]
fn reused_tcbs_start_with_fresh_values() {
    hang_guard(60, "ULT-locals in reused TCBs", || {
        let rt = Runtime::builder().processors(1).build().unwrap();
        rt.block_on(|| {
            // One at a time, so each ULT reuses the TCB (and stack) the previous one left.
            for i in 0..500u64 {
                let seen = spawn(move || {
                    let seen = MINE.get();
                    MINE.set(i);
                    seen
                })
                .join()
                .unwrap();
                assert_eq!(seen, u64::MAX, "ULT {i} saw a previous ULT's value");
            }
        });
    });
}

#[test]
fn detached_and_cancelled_ults_drop_their_values() {
    hang_guard(60, "ULT-locals of detached and cancelled ULTs", || {
        let rt = Runtime::builder().processors(2).build().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        for i in 0..10u64 {
            let l = log.clone();
            drop(rt.spawn(move || RECORDED.set(Some(Recorded(i, l)))));
        }
        wait_until(30, "the detached ULTs' values", || log.lock().unwrap().len() == 10);

        // A detached ULT's result is dropped by the ULT after its values were destroyed; values that
        // the result's destructor makes are destroyed right after.
        let gate = Arc::new(std::sync::atomic::AtomicBool::new(false));
        for i in 50..55u64 {
            let (l, g) = (log.clone(), gate.clone());
            drop(rt.spawn(move || {
                while !g.load(SeqCst) {
                    yield_now();
                }
                MakesLocalsWhenDropped(i, l)
            }));
        }
        gate.store(true, SeqCst);
        wait_until(30, "values made by dropping results", || log.lock().unwrap().len() == 15);

        let never = Arc::new(elite_rt::sync::Semaphore::new(0));
        let blocked = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (100..110u64)
            .map(|i| {
                let (l, never, blocked) = (log.clone(), never.clone(), blocked.clone());
                rt.spawn(move || {
                    RECORDED.set(Some(Recorded(i, l)));
                    blocked.fetch_add(1, SeqCst);
                    never.acquire(); // until the shutdown cancels it
                })
            })
            .collect();
        wait_until(30, "the blocked ULTs", || blocked.load(SeqCst) == 10);
        drop(rt);
        for h in hs {
            assert!(h.join().unwrap_err().is::<elite_rt::Cancelled>());
        }
        let mut got = log.lock().unwrap().clone();
        got.sort_unstable();
        assert_eq!(got, (0..10).chain(50..55).chain(100..110).collect::<Vec<_>>());
    });
}

/// On drop, uses another key that is still alive, and the key being destroyed.
struct Inspecting(Arc<Mutex<Vec<String>>>);

impl Drop for Inspecting {
    fn drop(&mut self) {
        let mine = MINE.try_with(Cell::get);
        let own = INSPECTING.try_with(|_| ());
        self.0.lock().unwrap().push(format!("{mine:?} {own:?}"));
    }
}

ult_local! {
    static INSPECTING: RefCell<Option<Inspecting>> = RefCell::new(None);
}

#[test]
fn destructors_see_older_values_and_not_their_own() {
    hang_guard(60, "ULT-local destructors", || {
        let rt = Runtime::builder().processors(1).build().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        rt.block_on(move || {
            spawn(move || {
                MINE.set(7); // made first, so destroyed after INSPECTING
                INSPECTING.set(Some(Inspecting(l)));
            })
            .join()
            .unwrap()
        });
        assert_eq!(*log.lock().unwrap(), ["Ok(7) Err(AccessError)"]);
    });
}

#[test]
fn outside_a_ult_the_value_belongs_to_the_os_thread() {
    let rt = Runtime::builder().processors(1).build().unwrap();
    MINE.set(1);
    let inside = rt.block_on(|| MINE.get());
    assert_eq!(inside, u64::MAX, "the root ULT has its own value");
    assert_eq!(MINE.get(), 1);
    assert_eq!(std::thread::spawn(|| MINE.get()).join().unwrap(), u64::MAX);
}
