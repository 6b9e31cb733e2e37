//! What `std::sync` promises, checked on elite's versions: the traits and variance std's types
//! have (code that compiles with std compiles here), and the semantics std documents for each
//! type and method, from ULTs and from OS threads.

mod common;

use elite_rt::sync::mpsc::SendTimeoutError;
use elite_rt::sync::{
    mpmc, mpsc, Barrier, Condvar, Mutex, ReentrantLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Semaphore,
    WaitGroup,
};
use elite_rt::{Policy, Runtime};
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, RefUnwindSafe, UnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, TryLockError};
use std::time::{Duration, Instant};

fn unwind_safe<T: UnwindSafe + ?Sized>() {}
fn ref_unwind_safe<T: RefUnwindSafe + ?Sized>() {}

/// std's locks poison, so they are `UnwindSafe` and `RefUnwindSafe` whatever they hold (a
/// `RefCell` included, which is neither): a closure that only borrows one may be passed to
/// `catch_unwind` without `AssertUnwindSafe`. The same closures compile with elite's, and with
/// its `Semaphore` and `WaitGroup`.
#[test]
fn locks_condvar_and_barrier_are_unwind_safe_as_std_s() {
    use std::cell::RefCell;
    unwind_safe::<Mutex<RefCell<u32>>>();
    ref_unwind_safe::<Mutex<RefCell<u32>>>();
    unwind_safe::<RwLock<RefCell<u32>>>();
    ref_unwind_safe::<RwLock<RefCell<u32>>>();
    unwind_safe::<Condvar>();
    ref_unwind_safe::<Condvar>();
    unwind_safe::<Barrier>();
    ref_unwind_safe::<Barrier>();
    // elite's own blocking types, likewise.
    unwind_safe::<Semaphore>();
    ref_unwind_safe::<Semaphore>();
    unwind_safe::<WaitGroup>();
    ref_unwind_safe::<WaitGroup>();
    // Unsized contents too, as std's `impl<T: ?Sized>`.
    ref_unwind_safe::<Mutex<[RefCell<u8>]>>();
    ref_unwind_safe::<RwLock<[RefCell<u8>]>>();

    let m = Mutex::new(RefCell::new(1));
    let rw = RwLock::new(RefCell::new(2));
    let cv = Condvar::new();
    let b = Barrier::new(1);
    assert!(catch_unwind(|| {
        let _ = &m;
    })
    .is_ok());
    assert!(catch_unwind(|| {
        let _ = &rw;
    })
    .is_ok());
    assert!(catch_unwind(|| {
        let _ = &cv;
    })
    .is_ok());
    assert!(catch_unwind(|| {
        let _ = &b;
    })
    .is_ok());
    // And what catch_unwind is for: a panic inside leaves the lock poisoned, which says so.
    let r = catch_unwind(|| {
        let _g = m.lock().unwrap();
        panic!("inside the critical section");
    });
    assert!(r.is_err());
    assert!(m.is_poisoned());
    assert_eq!(*m.lock().unwrap_err().into_inner().borrow(), 1);
}

/// Shortens the lifetime of the reference a read guard gives: compiles only if
/// `RwLockReadGuard<'a, T>` is covariant in `T` (as std's is, `test_read_guard_covariance`).
fn shorten<'g, 'short, T: ?Sized>(g: RwLockReadGuard<'g, &'static T>) -> RwLockReadGuard<'g, &'short T> {
    g
}

/// The longer of the guarded string and `other`: the guard's `&'static str` must shorten to `'a`.
fn longer<'a>(g: RwLockReadGuard<'_, &'a str>, other: &'a str) -> &'a str {
    if g.len() >= other.len() {
        *g
    } else {
        other
    }
}

#[test]
fn a_read_guard_is_covariant_in_its_value() {
    static GREETING: &str = "hello";
    let lock = RwLock::new(GREETING);
    {
        let local = String::from("hello, world");
        assert_eq!(longer(lock.read().unwrap(), &local), "hello, world");
        let g = shorten(lock.read().unwrap());
        assert_eq!(*g, "hello");
    }
    assert!(lock.try_write().is_ok(), "the guards unlocked");
}

/// std: `RwLockWriteGuard::downgrade` turns a write lock into a read lock atomically, so no
/// writer can come between and what the downgraded reader reads is what it wrote; other readers
/// may then read alongside it. Here, on one processor (so that each waiter has blocked once it
/// says it arrived), two readers and a writer queue during a write: after the downgrade both
/// readers read (the value written) while the downgraded guard is still held, and the writer
/// still waits; it gets in only when the last reader has left.
#[test]
fn downgrade_lets_the_queued_readers_in_and_no_writer_between() {
    common::hang_guard(60, "downgrade", || {
        let rt = Runtime::builder().processors(1).no_chaos().build().unwrap();
        rt.block_on(|| {
            let lock = Arc::new(RwLock::new(0u32));
            let arrived = Arc::new(AtomicUsize::new(0));
            let read = Arc::new(AtomicUsize::new(0));
            let reader = || {
                let (lock, arrived, read) = (lock.clone(), arrived.clone(), read.clone());
                elite_rt::spawn(move || {
                    arrived.fetch_add(1, SeqCst);
                    let v = *lock.read().unwrap();
                    read.fetch_add(1, SeqCst);
                    v
                })
            };
            let mut w = lock.write().unwrap();
            let first = reader();
            let writer = {
                let (lock, arrived) = (lock.clone(), arrived.clone());
                elite_rt::spawn(move || {
                    arrived.fetch_add(1, SeqCst);
                    *lock.write().unwrap() = 99;
                })
            };
            let second = reader();
            common::ult_sleep_until(10, "two readers and a writer queued", || arrived.load(SeqCst) == 3);
            *w = 7;
            let r = RwLockWriteGuard::downgrade(w);
            common::ult_sleep_until(10, "both queued readers read", || read.load(SeqCst) == 2);
            assert_eq!(*r, 7, "no writer came between the write and the downgraded read");
            assert!(!writer.is_finished(), "the writer waits while the downgraded guard reads");
            assert_eq!((first.join().unwrap(), second.join().unwrap()), (7, 7));
            drop(r);
            writer.join().unwrap();
            assert_eq!(*lock.read().unwrap(), 99);
        })
    });
}

/// The same from an OS thread (no runtime): the downgraded guard shares the lock with readers and
/// keeps writers out until it goes.
#[test]
fn downgrade_from_an_os_thread() {
    let lock = RwLock::new(vec![1]);
    let mut w = lock.write().unwrap();
    w.push(2);
    let r = RwLockWriteGuard::downgrade(w);
    assert_eq!(*r, [1, 2]);
    assert_eq!(*lock.try_read().unwrap(), [1, 2], "a reader shares the lock");
    assert!(matches!(lock.try_write(), Err(TryLockError::WouldBlock)), "a writer waits");
    drop(r);
    lock.try_write().unwrap().push(3);
    assert_eq!(lock.into_inner().unwrap(), [1, 2, 3]);
}

/// Writers that each downgrade and then read back what they wrote, among plain readers, on every
/// kind of runtime: no downgraded reader ever sees another writer's value, and no reader sees a
/// half-written pair.
#[test]
fn downgraded_writers_read_their_own_writes_under_contention() {
    for (name, rt) in [
        ("1 processor", Runtime::builder().processors(1).build().unwrap()),
        ("2 processors", Runtime::builder().processors(2).build().unwrap()),
    ] {
        common::hang_guard(60, name, move || {
            rt.block_on(|| {
                let lock = Arc::new(RwLock::new((0u64, 0u64)));
                let hs: Vec<_> = (1..=200u64)
                    .map(|i| {
                        let lock = lock.clone();
                        elite_rt::spawn(move || {
                            if i % 3 == 0 {
                                let g = lock.read().unwrap();
                                elite_rt::yield_now();
                                assert_eq!(g.0, g.1, "a reader saw a half-written pair");
                            } else {
                                let mut w = lock.write().unwrap();
                                w.0 = i;
                                elite_rt::yield_now();
                                w.1 = i;
                                let r = RwLockWriteGuard::downgrade(w);
                                elite_rt::yield_now();
                                assert_eq!(*r, (i, i), "a writer came between the downgrade and the read");
                            }
                        })
                    })
                    .collect();
                hs.into_iter().for_each(|h| h.join().unwrap());
            })
        });
    }
}

/// std (`SyncSender::send_timeout`, `SendTimeoutError`): on a full channel the send waits at most
/// the timeout and then gives the value back as `Timeout`; with room made in time it succeeds; on a
/// rendezvous channel it needs a receiver within the timeout; with the receiver gone (before or
/// during the wait) it gives the value back as `Disconnected`. The waiting sender blocks only its
/// ULT: on one processor, the receiver that makes room runs meanwhile.
#[test]
fn send_timeout_follows_std() {
    common::hang_guard(60, "send_timeout", || {
        let rt = Runtime::builder().processors(1).build().unwrap();
        rt.block_on(|| {
            let (tx, rx) = mpsc::sync_channel(1);
            tx.send_timeout(1, Duration::from_millis(5)).unwrap();
            let t0 = Instant::now();
            assert_eq!(tx.send_timeout(2, Duration::from_millis(20)), Err(SendTimeoutError::Timeout(2)));
            assert!(t0.elapsed() >= Duration::from_millis(20), "it waited the whole timeout");
            // Room made in time, by a ULT of the same processor.
            let taker = elite_rt::spawn(move || {
                elite_rt::sleep(Duration::from_millis(5));
                let first = rx.recv().unwrap();
                (first, rx)
            });
            tx.send_timeout(3, Duration::from_secs(30)).unwrap();
            let (first, rx) = taker.join().unwrap();
            assert_eq!((first, rx.recv().unwrap()), (1, 3));
            // The receiver leaves while a sender waits on the full channel.
            tx.send(4).unwrap();
            let dropper = elite_rt::spawn(move || {
                elite_rt::sleep(Duration::from_millis(5));
                drop(rx);
            });
            assert_eq!(tx.send_timeout(5, Duration::from_secs(30)), Err(SendTimeoutError::Disconnected(5)));
            dropper.join().unwrap();
            // Gone before: at once.
            assert_eq!(tx.send_timeout(6, Duration::from_secs(30)), Err(SendTimeoutError::Disconnected(6)));

            // A rendezvous channel: no receiver, a timeout; a receiver that comes, a hand-over.
            let (tx, rx) = mpsc::sync_channel::<u32>(0);
            assert_eq!(tx.send_timeout(7, Duration::from_millis(5)), Err(SendTimeoutError::Timeout(7)));
            let receiver = elite_rt::spawn(move || rx.recv().unwrap());
            tx.send_timeout(8, Duration::from_secs(30)).unwrap();
            assert_eq!(receiver.join().unwrap(), 8);

            // The error type as std's.
            let e = SendTimeoutError::Timeout(1u8);
            assert_eq!(format!("{e:?}"), "SendTimeoutError(..)");
            assert_eq!(e.to_string(), "timed out waiting on send operation");
            assert_eq!(SendTimeoutError::Disconnected(1u8).to_string(), "sending on a disconnected channel");
            let from: SendTimeoutError<u8> = mpsc::SendError(9).into();
            assert_eq!(from, SendTimeoutError::Disconnected(9));
            let _: &dyn std::error::Error = &e;
        })
    });
}

/// Timed sends racing receivers on small channels, from ULTs on one and two processors and from
/// OS threads: each value is either received exactly once or given back exactly once, never both
/// and never lost (a receiver may take a value from a sender whose deadline has just passed; that
/// send then succeeds).
#[test]
fn timed_sends_racing_receivers_lose_and_duplicate_nothing() {
    /// A sender's or receiver's work, to run on a ULT or an OS thread.
    type Work = Box<dyn FnOnce() -> Vec<u64> + Send>;
    const SENDERS: u64 = 4;
    const EACH: u64 = 300;
    fn run(cap: usize, spawn: &dyn Fn(Work) -> Box<dyn FnOnce() -> Vec<u64>>) {
        let (tx, rx) = mpmc::bounded::<u64>(cap);
        let senders: Vec<_> = (0..SENDERS)
            .map(|s| {
                let tx = tx.clone();
                spawn(Box::new(move || {
                    let mut back = Vec::new();
                    for i in 0..EACH {
                        let v = s * EACH + i;
                        match tx.send_timeout(v, Duration::from_micros(1 + (v % 7) * 20)) {
                            Ok(()) => {}
                            Err(SendTimeoutError::Timeout(x)) => back.push(x),
                            Err(SendTimeoutError::Disconnected(x)) => {
                                panic!("receivers alive, yet {x} disconnected")
                            }
                        }
                    }
                    back
                }))
            })
            .collect();
        drop(tx);
        let receivers: Vec<_> = (0..2)
            .map(|_| {
                let rx = rx.clone();
                spawn(Box::new(move || {
                    let mut got = Vec::new();
                    while let Ok(v) = rx.recv_timeout(Duration::from_secs(30)) {
                        got.push(v);
                        if v % 5 == 0 {
                            std::hint::spin_loop();
                        }
                    }
                    got
                }))
            })
            .collect();
        drop(rx);
        let mut all: Vec<u64> = senders.into_iter().flat_map(|h| h()).collect();
        all.extend(receivers.into_iter().flat_map(|h| h()));
        all.sort_unstable();
        assert_eq!(all, (0..SENDERS * EACH).collect::<Vec<_>>(), "capacity {cap}");
    }
    for (name, rt) in [
        ("1 processor", Runtime::builder().processors(1).build().unwrap()),
        ("2 processors", Runtime::builder().processors(2).build().unwrap()),
    ] {
        common::hang_guard(120, name, move || {
            rt.block_on(|| {
                for cap in [0, 1, 3] {
                    run(cap, &|f| {
                        let h = elite_rt::spawn(f);
                        Box::new(move || h.join().unwrap())
                    });
                }
            })
        });
    }
    common::hang_guard(120, "OS threads", || {
        for cap in [0, 2] {
            run(cap, &|f| {
                let h = std::thread::spawn(f);
                Box::new(move || h.join().unwrap())
            });
        }
    });
}

/// std (`ReentrantLock`): the owner may lock again while it holds the lock, and the lock is free
/// once every guard of the owner is gone. Here the owner is the ULT: on one processor (so every
/// ULT runs on the same OS thread), a second ULT that asks for the lock while the first holds it
/// (twice, across a sleep and a yield) waits until both of the first's guards are gone; with an
/// owner per OS thread it would walk in.
#[test]
fn a_reentrant_lock_belongs_to_the_ult_not_to_its_os_thread() {
    common::hang_guard(60, "ReentrantLock per ULT", || {
        let rt = Runtime::builder().processors(1).no_chaos().build().unwrap();
        rt.block_on(|| {
            let lock = Arc::new(ReentrantLock::new(Cell::new(0u32)));
            let inside = Arc::new(AtomicUsize::new(0));
            let holder = {
                let (lock, inside) = (lock.clone(), inside.clone());
                elite_rt::spawn(move || {
                    let outer = lock.lock();
                    assert_eq!(inside.fetch_add(1, SeqCst), 0);
                    let inner = lock.lock(); // re-entry
                    inner.set(inner.get() + 1);
                    elite_rt::sleep(Duration::from_millis(10)); // the other ULT runs, on this OS thread
                    drop(inner);
                    elite_rt::yield_now(); // one guard left: still ours
                    assert_eq!(outer.get(), 1);
                    inside.fetch_sub(1, SeqCst);
                    std::thread::current().id()
                })
            };
            elite_rt::yield_now(); // the holder takes the lock first
            let other = {
                let (lock, inside) = (lock.clone(), inside.clone());
                elite_rt::spawn(move || {
                    let g = lock.lock();
                    assert_eq!(inside.fetch_add(1, SeqCst), 0, "entered while another ULT held the lock");
                    g.set(g.get() + 10);
                    inside.fetch_sub(1, SeqCst);
                    std::thread::current().id()
                })
            };
            let (a, b) = (holder.join().unwrap(), other.join().unwrap());
            assert_eq!(a, b, "one processor: both ran on the same OS thread");
            assert_eq!(lock.lock().get(), 11);
        })
    });
}

/// A ULT keeps its `ReentrantLock` when it moves: under a policy that moves every woken ULT to the
/// other processor, the owner blocks (and moves) four times while holding the lock, re-enters
/// after each move, and a contender gets the lock only after the owner's last guard is gone.
#[test]
fn a_ult_keeps_its_reentrant_lock_when_it_moves() {
    common::hang_guard(60, "ReentrantLock across moves", || {
        let rt = Runtime::builder()
            .processors(2)
            .policy(Policy::new(common::Alternate))
            .no_chaos()
            .build()
            .unwrap();
        rt.block_on(|| {
            let lock = Arc::new(ReentrantLock::new(RefCell::new(Vec::new())));
            let go = Arc::new(Semaphore::new(0));
            let holding = Arc::new(AtomicUsize::new(0));
            let owner = {
                let (lock, go, holding) = (lock.clone(), go.clone(), holding.clone());
                elite_rt::spawn(move || {
                    let _outer = lock.lock();
                    holding.store(1, SeqCst);
                    let mut trail = vec![elite_rt::current().processor()];
                    for _ in 0..4 {
                        go.acquire(); // blocks; woken on the other processor
                        let again = lock.lock(); // re-entry after the move
                        again.borrow_mut().push(elite_rt::current().processor());
                        trail.push(elite_rt::current().processor());
                    }
                    trail
                })
            };
            common::ult_sleep_until(10, "the owner holds the lock", || holding.load(SeqCst) == 1);
            let contender = {
                let lock = lock.clone();
                elite_rt::spawn(move || lock.lock().borrow().len())
            };
            for _ in 0..4 {
                elite_rt::sleep(Duration::from_millis(2));
                go.release();
            }
            let trail = owner.join().unwrap();
            assert!(trail.windows(2).any(|w| w[0] != w[1]), "the owner never moved: {trail:?}");
            assert_eq!(
                contender.join().unwrap(),
                4,
                "the contender got in only after the owner's four entries"
            );
        })
    });
}

/// `ReentrantLock` from OS threads, and its other methods as std's: `try_lock` (the owner always
/// gets it, others only when free), `get_mut`, `into_inner`, `Debug`, `Default`, `From`.
#[test]
fn reentrant_lock_from_os_threads_and_its_methods() {
    let lock = Arc::new(ReentrantLock::new(RefCell::new(String::from("a"))));
    let g = lock.lock();
    let again = lock.try_lock().expect("the owner re-enters with try_lock");
    again.borrow_mut().push('b');
    let other = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            assert!(lock.try_lock().is_none(), "another thread's try_lock fails while it is held");
            lock.lock().borrow_mut().push('c'); // waits for both guards
        })
    };
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(format!("{:?}", *lock), "ReentrantLock { data: RefCell { value: \"ab\" }, .. }");
    drop(again);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(*g.borrow(), "ab", "one guard left: still held");
    drop(g);
    other.join().unwrap();
    let mut lock = Arc::into_inner(lock).unwrap();
    lock.get_mut().borrow_mut().push('d');
    assert_eq!(lock.into_inner().into_inner(), "abcd");
    assert_eq!(*ReentrantLock::<u8>::default().lock(), 0);
    assert_eq!(*ReentrantLock::from(3).lock(), 3);
}

/// std's (unstable) `mpmc::channel`: unbounded, so `send` never blocks (here 10 000 sends on one
/// processor with no receiver running); both ends clone; each value goes to exactly one
/// receiver; receivers see `Err` once every sender is gone and the queue is empty, senders get
/// their value back once every receiver is gone; `try_iter`, `recv_deadline`, `same_channel` and
/// iteration by value as std's.
#[test]
fn unbounded_mpmc_follows_std() {
    common::hang_guard(60, "mpmc::channel", || {
        let rt = Runtime::builder().processors(1).build().unwrap();
        rt.block_on(|| {
            let (tx, rx) = mpmc::channel::<u32>();
            for i in 0..10_000 {
                tx.send(i).unwrap();
            }
            let rx2 = rx.clone();
            assert!(rx.same_channel(&rx2) && tx.same_channel(&tx.clone()));
            assert!(!rx.same_channel(&mpmc::channel::<u32>().1));
            assert_eq!(rx.try_iter().take(3).collect::<Vec<_>>(), [0, 1, 2]);
            assert_eq!(rx2.recv(), Ok(3), "a clone takes the next value: one queue");
            drop(tx);
            // Values still queued are received after the last sender is gone; then Err.
            let rest: Vec<u32> = rx2.into_iter().collect();
            assert_eq!(rest, (4..10_000).collect::<Vec<_>>());
            assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
            assert_eq!(
                rx.recv_deadline(Instant::now() + Duration::from_secs(10)),
                Err(mpsc::RecvTimeoutError::Disconnected)
            );
            let (tx, rx) = mpmc::channel::<String>();
            assert_eq!(
                rx.recv_deadline(Instant::now() + Duration::from_millis(5)),
                Err(mpsc::RecvTimeoutError::Timeout)
            );
            drop(rx);
            assert_eq!(tx.send("back".into()), Err(mpsc::SendError(String::from("back"))));
        })
    });
}

/// Producers and consumers on an unbounded `mpmc` channel, on 1 and 2 processors and between OS
/// threads and ULTs: every value is received exactly once.
#[test]
fn unbounded_mpmc_hands_each_value_to_exactly_one_receiver() {
    const PRODUCERS: u64 = 4;
    const EACH: u64 = 2_000;
    for (name, rt) in [
        ("1 processor", Runtime::builder().processors(1).build().unwrap()),
        ("2 processors", Runtime::builder().processors(2).build().unwrap()),
    ] {
        let got = common::hang_guard(60, name, move || {
            let (tx, rx) = mpmc::channel::<u64>();
            // One OS-thread consumer besides the ULTs.
            let outside = {
                let rx = rx.clone();
                std::thread::spawn(move || rx.iter().collect::<Vec<_>>())
            };
            let mut got = rt.block_on(|| {
                let consumers: Vec<_> = (0..3)
                    .map(|_| {
                        let rx = rx.clone();
                        elite_rt::spawn(move || rx.iter().collect::<Vec<_>>())
                    })
                    .collect();
                drop(rx);
                let producers: Vec<_> = (0..PRODUCERS)
                    .map(|p| {
                        let tx = tx.clone();
                        elite_rt::spawn(move || {
                            for i in 0..EACH {
                                tx.send(p * EACH + i).unwrap();
                                if i % 64 == 0 {
                                    elite_rt::yield_now();
                                }
                            }
                        })
                    })
                    .collect();
                drop(tx);
                producers.into_iter().for_each(|h| h.join().unwrap());
                consumers.into_iter().flat_map(|h| h.join().unwrap()).collect::<Vec<_>>()
            });
            got.extend(outside.join().unwrap());
            got
        });
        let mut got = got;
        got.sort_unstable();
        assert_eq!(got, (0..PRODUCERS * EACH).collect::<Vec<_>>(), "{name}");
    }
}
