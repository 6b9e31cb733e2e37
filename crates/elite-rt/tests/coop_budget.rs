//! The cooperative budget (`RuntimeBuilder::coop_budget`): a ULT that keeps calling the
//! synchronization primitives without ever blocking yields every so often, so that the ULTs it
//! made ready on its processor get to run.
//!
//! The first two tests are the shapes of two tests of std's channels that hung (the first) or
//! grew a channel until memory ran out (the second) on one processor before the budget existed.
//! Each loop here carries a cap, so that without the budget the test fails with a message
//! instead of hanging or exhausting memory, and each runs under a hang guard besides.

mod common;

use common::hang_guard;
use elite_rt::sync::mpsc;
use elite_rt::{spawn, Runtime};

/// How many rounds the looping ULT of each scenario makes before it gives up: far more than any
/// budget lets pass without a yield, few enough to end in well under a second.
const CAP: u64 = 2_000_000;

fn runtime(processors: usize) -> Runtime {
    Runtime::builder().processors(processors).build().expect("build runtime")
}

/// std's `test_recv_try_iter`, in the small: a poller that never blocks (it drains the replies
/// that arrived with `try_iter`, then asks for more with a send on an unbounded channel) and the
/// root, which waits in `recv` for requests and answers each with 2. The poller is done once it
/// has collected 6, so it needs the root to run while it polls. Returns how many requests it
/// made, or why it gave up.
fn poller_and_answerer(rt: &Runtime) -> Result<u64, String> {
    rt.block_on(|| {
        let (ask, asked) = mpsc::channel::<()>();
        let (answer, answers) = mpsc::channel::<u32>();
        let poller = spawn(move || {
            let mut collected = 0;
            for requests in 0..CAP {
                for two in answers.try_iter() {
                    collected += two;
                    if collected >= 6 {
                        return Ok(requests);
                    }
                }
                ask.send(()).map_err(|_| "the root stopped listening".to_string())?;
            }
            Err(format!("the poller asked {CAP} times without an answer: the root never ran beside it"))
        });
        // Ends when the poller is gone (its sender with it), or when it stopped reading.
        for () in asked.iter() {
            if answer.send(2).is_err() {
                break;
            }
        }
        poller.join().expect("the poller panicked")
    })
}

#[test]
fn a_poller_that_never_blocks_lets_its_partner_answer() {
    let mut failed = Vec::new();
    for processors in [1, 2] {
        let what = format!("try_iter poller, {processors} processor(s)");
        if let Err(e) = hang_guard(60, &what.clone(), move || poller_and_answerer(&runtime(processors))) {
            failed.push(format!("{what}: {e}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// std's `port_gone_concurrent`, in the small: a ULT sends on an unbounded channel for as long as
/// the receiver is there; the receiver takes one value and leaves. `root_sends`: the root is the
/// sender and the receiver a spawned ULT (std's arrangement), else the other way round. Returns
/// how many sends succeeded, or why the sender gave up.
fn sender_outlives_receiver(rt: &Runtime, root_sends: bool) -> Result<u64, String> {
    fn send_until_gone(tx: mpsc::Sender<u8>) -> Result<u64, String> {
        let mut sent = 0;
        while tx.send(1).is_ok() {
            sent += 1;
            if sent == CAP {
                return Err(format!(
                    "{CAP} values sent and the receiver still there: it never ran beside the sender"
                ));
            }
        }
        Ok(sent)
    }
    rt.block_on(move || {
        let (tx, rx) = mpsc::channel::<u8>();
        if root_sends {
            let receiver = spawn(move || rx.recv().map(drop).map_err(|_| "nothing came".to_string()));
            let sent = send_until_gone(tx);
            receiver.join().expect("the receiver panicked")?;
            sent
        } else {
            let sender = spawn(move || send_until_gone(tx));
            rx.recv().map_err(|_| "nothing came".to_string())?;
            drop(rx);
            sender.join().expect("the sender panicked")
        }
    })
}

#[test]
fn a_sender_stops_when_its_receiver_leaves() {
    let mut failed = Vec::new();
    for processors in [1, 2] {
        for root_sends in [false, true] {
            let what =
                format!("sender outlives receiver, {processors} processor(s), root sends: {root_sends}");
            if let Err(e) = hang_guard(60, &what.clone(), move || {
                sender_outlives_receiver(&runtime(processors), root_sends)
            }) {
                failed.push(format!("{what}: {e}"));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// One processor and a budget of `budget`, without the chaos mode (these tests count turns).
fn counted(budget: Option<u32>) -> Runtime {
    Runtime::builder().processors(1).no_chaos().coop_budget(budget).build().expect("build runtime")
}

/// The budget of the charged operations, one kind at a time: two ULTs on one processor each make
/// 10 budgets' worth of operations that never block, noting their name after each; every turn
/// then holds exactly one budget of operations (the one that finds the budget spent yields
/// first, and counts as the first of the next turn).
#[test]
fn each_charged_operation_yields_once_the_budget_is_spent() {
    use elite_rt::sync::{mpmc, Mutex, RwLock, Semaphore, WaitGroup};
    use std::sync::Arc;
    use std::time::Duration;

    const BUDGET: u32 = 16;
    const OPS: usize = 10 * BUDGET as usize;
    type Op = Box<dyn FnMut() + Send>;
    type MakeOp = fn() -> Op;
    let kinds: Vec<(&str, MakeOp)> = vec![
        ("mpsc send", || {
            let (tx, rx) = mpsc::channel();
            Box::new(move || {
                tx.send(0u8).unwrap();
                let _ = &rx;
            })
        }),
        ("mpsc try_send", || {
            let (tx, rx) = mpsc::sync_channel(OPS);
            Box::new(move || {
                tx.try_send(0u8).unwrap();
                let _ = &rx;
            })
        }),
        ("mpsc recv", || {
            let (tx, rx) = mpsc::channel();
            (0..OPS).for_each(|_| tx.send(0u8).unwrap());
            Box::new(move || rx.recv().map(drop).unwrap())
        }),
        ("mpsc recv_timeout", || {
            let (tx, rx) = mpsc::channel();
            (0..OPS).for_each(|_| tx.send(0u8).unwrap());
            Box::new(move || rx.recv_timeout(Duration::from_secs(60)).map(drop).unwrap())
        }),
        ("mpsc try_recv", || {
            let (tx, rx) = mpsc::channel::<u8>();
            Box::new(move || {
                assert!(rx.try_recv().is_err());
                let _ = &tx;
            })
        }),
        ("mpmc send", || {
            let (tx, rx) = mpmc::bounded(OPS);
            Box::new(move || {
                tx.send(0u8).unwrap();
                let _ = &rx;
            })
        }),
        ("Mutex::lock", || {
            let m = Mutex::new(0u64);
            Box::new(move || *m.lock().unwrap() += 1)
        }),
        ("Mutex::try_lock", || {
            let m = Mutex::new(0u64);
            Box::new(move || *m.try_lock().unwrap() += 1)
        }),
        ("RwLock::read", || {
            let l = RwLock::new(0u64);
            Box::new(move || drop(l.read().unwrap()))
        }),
        ("RwLock::write", || {
            let l = RwLock::new(0u64);
            Box::new(move || *l.write().unwrap() += 1)
        }),
        ("RwLock::try_read", || {
            let l = RwLock::new(0u64);
            Box::new(move || drop(l.try_read().unwrap()))
        }),
        ("RwLock::try_write", || {
            let l = RwLock::new(0u64);
            Box::new(move || *l.try_write().unwrap() += 1)
        }),
        ("Semaphore::acquire", || {
            let s = Semaphore::new(OPS);
            Box::new(move || s.acquire())
        }),
        ("Semaphore::try_acquire", || {
            let s = Semaphore::new(OPS);
            Box::new(move || assert!(s.try_acquire()))
        }),
        ("Semaphore::access", || {
            let s = Semaphore::new(1);
            Box::new(move || drop(s.access()))
        }),
        ("WaitGroup::wait", || {
            let wg = WaitGroup::new();
            Box::new(move || wg.wait())
        }),
    ];
    let mut wrong = Vec::new();
    for (kind, make) in kinds {
        let log = Arc::new(std::sync::Mutex::new(Vec::with_capacity(2 * OPS)));
        let rt = counted(Some(BUDGET));
        let yields = hang_guard(60, kind, move || {
            let l = log.clone();
            rt.block_on(move || {
                // Made first (some fill a channel), so that the root is blocked in its join
                // while the two ULTs run.
                let ops: Vec<Op> = (0..2).map(|_| make()).collect();
                let ults: Vec<_> = (0..2u8)
                    .zip(ops)
                    .map(|(me, mut op)| {
                        let log = l.clone();
                        spawn(move || {
                            for _ in 0..OPS {
                                op();
                                log.lock().unwrap().push(me);
                            }
                        })
                    })
                    .collect();
                ults.into_iter().for_each(|h| h.join().unwrap());
            });
            let turns: Vec<usize> = log.lock().unwrap().chunk_by(|a, b| a == b).map(<[u8]>::len).collect();
            (turns, rt.stats().total().budget_yields)
        });
        let (turns, budget_yields) = yields;
        if turns.iter().any(|&n| n != BUDGET as usize) {
            wrong.push(format!("{kind}: turns of {turns:?} operations, expected {BUDGET} each"));
        }
        // Each ULT yields before each of its turns but the first (the root may have made more,
        // filling a channel).
        if budget_yields < 2 * (OPS as u64 / u64::from(BUDGET) - 1) {
            wrong.push(format!("{kind}: {budget_yields} budget yields"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `coop_budget(None)`: no yield, ever; the looping sender of the second scenario keeps its
/// processor until the cap (the behaviour the budget exists to end).
#[test]
fn without_a_budget_a_loop_keeps_its_processor() {
    let out = hang_guard(60, "no budget", || {
        let rt = counted(None);
        let out = sender_outlives_receiver(&rt, false);
        (out, rt.stats().total().budget_yields)
    });
    assert!(matches!(&out.0, Err(e) if e.contains("never ran")), "{:?}", out.0);
    assert_eq!(out.1, 0, "budget yields with the budget off");
}

/// A ULT whose budget runs out while it panics (a destructor's operations during the unwind)
/// does not yield there: the other ULT of the processor does not run until the unwind is over.
#[test]
fn no_budget_yield_while_panicking() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
    use std::sync::Arc;

    struct PollsOnDrop {
        rx: mpsc::Receiver<u8>,
        ticks: Arc<AtomicU64>,
        ran_meanwhile: Arc<AtomicBool>,
    }
    impl Drop for PollsOnDrop {
        fn drop(&mut self) {
            let before = self.ticks.load(SeqCst);
            for _ in 0..64 {
                assert!(self.rx.try_recv().is_err());
            }
            self.ran_meanwhile.store(self.ticks.load(SeqCst) != before, SeqCst);
        }
    }

    let ran_meanwhile = hang_guard(60, "budget while panicking", || {
        let rt = counted(Some(4));
        rt.block_on(|| {
            let (ticks, stop, ran_meanwhile) = (
                Arc::new(AtomicU64::new(0)),
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicBool::new(true)),
            );
            let (t, s) = (ticks.clone(), stop.clone());
            let ticker = spawn(move || {
                while !s.load(SeqCst) {
                    t.fetch_add(1, SeqCst);
                    elite_rt::yield_now();
                }
            });
            while ticks.load(SeqCst) == 0 {
                elite_rt::yield_now();
            }
            let (_keep, rx) = mpsc::channel::<u8>();
            let guard = PollsOnDrop { rx, ticks: ticks.clone(), ran_meanwhile: ran_meanwhile.clone() };
            let panicked = spawn(move || {
                let _guard = guard;
                panic!("unwinding through a destructor that polls");
            })
            .join();
            assert!(panicked.is_err());
            stop.store(true, SeqCst);
            ticker.join().unwrap();
            ran_meanwhile.load(SeqCst)
        })
    });
    assert!(!ran_meanwhile, "the other ULT ran while the panicking ULT's destructor polled");
}

/// A call that finds the budget spent but is about to block anyway does not yield first (its
/// block is the switch); one that would go straight on does.
#[test]
fn a_call_about_to_block_does_not_yield_first() {
    use elite_rt::sync::Semaphore;
    use std::sync::Arc;

    // Each scenario spends a budget of 4 with calls that go straight on, then makes a fifth
    // that blocks (`true`) or not (`false`) until a spawned helper runs; the count of budget
    // yields it made.
    let scenarios: Vec<(&str, bool, fn())> = vec![
        ("Semaphore::acquire, no permit left", true, || {
            let sem = Arc::new(Semaphore::new(4));
            let s = sem.clone();
            let helper = spawn(move || s.release());
            (0..5).for_each(|_| sem.acquire());
            helper.join().unwrap();
        }),
        ("Semaphore::acquire, a permit left", false, || {
            let sem = Arc::new(Semaphore::new(5));
            let s = sem.clone();
            let helper = spawn(move || s.release());
            (0..5).for_each(|_| sem.acquire());
            helper.join().unwrap();
        }),
        ("recv on an empty channel", true, || {
            let (tx, rx) = mpsc::channel::<u8>();
            let helper = spawn(move || tx.send(1).unwrap());
            (0..4).for_each(|_| assert!(rx.try_recv().is_err()));
            assert_eq!(rx.recv(), Ok(1));
            helper.join().unwrap();
        }),
        ("send on a full rendezvous channel", true, || {
            let (tx, rx) = mpsc::sync_channel::<u8>(0);
            let helper = spawn(move || rx.recv().unwrap());
            (0..4).for_each(|_| assert!(tx.try_send(1).is_err()));
            tx.send(2).unwrap();
            assert_eq!(helper.join().unwrap(), 2);
        }),
    ];
    let mut wrong = Vec::new();
    for (what, blocks, scenario) in scenarios {
        let budget_yields = hang_guard(60, what, move || {
            let rt = counted(Some(4));
            rt.block_on(scenario);
            rt.stats().total().budget_yields
        });
        let expected = u64::from(!blocks);
        if budget_yields != expected {
            wrong.push(format!("{what}: {budget_yields} budget yields, expected {expected}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
