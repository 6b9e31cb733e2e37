//! `Select` and `select!` over elite's channels, checked against what crossbeam-channel documents
//! for its `Select` and `select!` (receive operations): an operation is ready when a receive
//! would not block (a value, or no sender left: then its result is an error); `select` blocks
//! until one is ready and completes it; `try_select` and a `default` case do not block;
//! `select_timeout` and `default(timeout)` wait at most the timeout; ready operations are chosen
//! fairly; and every value is received exactly once, also while other receivers and other
//! selects compete for the same channels.

mod common;

use common::hang_guard;
use elite_rt::sync::{mpmc, mpsc, Select, SelectTimeoutError, TrySelectError};
use elite_rt::Runtime;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// crossbeam: `select` blocks until an operation is ready. Here the selecting ULT and the senders
/// share one processor: the root lets one sender go (in the order 4, 3, 2, 1, 0), then selects;
/// the select blocks the ULT only, so that sender runs, and the select returns its value, on the
/// operation of the channel it used. (Each sender waits for its go on a channel of its own, so
/// that whatever the timing, or the chaos mode, only one operation is ready at each select.)
#[test]
fn select_blocks_the_ult_until_a_channel_has_a_value() {
    hang_guard(30, "select blocks", || {
        let rt = Runtime::builder().processors(1).build().unwrap();
        rt.block_on(|| {
            let (txs, rxs): (Vec<_>, Vec<_>) = (0..5).map(|_| mpsc::channel::<usize>()).unzip();
            let (gos, senders): (Vec<_>, Vec<_>) = txs
                .into_iter()
                .enumerate()
                .map(|(i, tx)| {
                    let (go, wait) = mpsc::channel::<()>();
                    let sender = elite_rt::spawn(move || {
                        wait.recv().unwrap();
                        tx.send(i * 10).unwrap();
                        tx // kept alive by the joiner
                    });
                    (go, sender)
                })
                .unzip();
            let mut sel = Select::new();
            for rx in &rxs {
                sel.recv(rx);
            }
            for expected in (0..5).rev() {
                gos[expected].send(()).unwrap();
                let op = sel.select();
                assert_eq!(op.index(), expected);
                assert_eq!(op.recv(&rxs[expected]), Ok(expected * 10));
            }
            drop(senders.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>());
        })
    });
}

/// crossbeam: "an operation is ready ... even when it will simply return an error because the
/// channel is disconnected"; `try_select` fails when none is ready (an empty `Select` too), and
/// `select_timeout` waits at most its timeout (an empty `Select` the whole timeout).
#[test]
fn readiness_try_select_and_timeouts() {
    hang_guard(30, "readiness", || {
        let rt = Runtime::builder().processors(1).build().unwrap();
        rt.block_on(|| {
            let (tx1, rx1) = mpsc::channel::<u8>();
            let (tx2, rx2) = mpmc::sync_channel::<u8>(0);
            let mut sel = Select::new();
            let o1 = sel.recv(&rx1);
            let o2 = sel.recv(&rx2);
            assert_eq!((o1, o2), (0, 1));
            assert_eq!(sel.try_select().map(|op| op.index()).unwrap_err(), TrySelectError);
            let t0 = Instant::now();
            assert_eq!(
                sel.select_timeout(Duration::from_millis(20)).map(|op| op.index()).unwrap_err(),
                SelectTimeoutError
            );
            assert!(t0.elapsed() >= Duration::from_millis(20));
            // A blocked sender on the rendezvous channel makes its receive ready.
            let s = elite_rt::spawn(move || tx2.send(5));
            elite_rt::yield_now();
            let op = sel.select_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!(op.index(), o2);
            assert_eq!(op.recv(&rx2), Ok(5));
            s.join().unwrap().unwrap();
            // `rx2` has no sender left: ready, with an error, every time.
            for _ in 0..3 {
                let op = sel.try_select().unwrap();
                assert_eq!(op.index(), o2);
                assert_eq!(op.recv(&rx2), Err(mpsc::RecvError));
            }
            drop(tx1);
            let op = sel.select();
            assert!(op.index() == o1 || op.index() == o2);
            // An empty select: nothing is ever ready.
            let mut empty = Select::new();
            assert!(empty.try_select().is_err());
            let t0 = Instant::now();
            assert!(empty.select_timeout(Duration::from_millis(10)).is_err());
            assert!(t0.elapsed() >= Duration::from_millis(10));
        })
    });
}

/// crossbeam: "If multiple operations are ready at the same time, a random one among them is
/// selected": with three channels that always have values, each is chosen (many times) over 300
/// selects.
#[test]
fn ready_operations_are_chosen_fairly() {
    let chans: Vec<_> = (0..3).map(|_| mpsc::channel::<u32>()).collect();
    for (tx, _) in &chans {
        for v in 0..300 {
            tx.send(v).unwrap();
        }
    }
    let mut sel = Select::new();
    for (_, rx) in &chans {
        sel.recv(rx);
    }
    let mut chosen = [0usize; 3];
    for _ in 0..300 {
        let op = sel.select();
        let i = op.index();
        op.recv(&chans[i].1).unwrap();
        chosen[i] += 1;
    }
    assert!(chosen.iter().all(|&c| c >= 50), "{chosen:?}");
}

/// The selected operation has taken its value. One that is dropped without `recv` keeps it: the
/// next select returns it first. `recv` with another channel's receiver panics (and keeps the
/// value too); a clone of the right receiver is accepted. A receiver added twice works.
#[test]
fn an_uncompleted_operation_keeps_its_value() {
    let (tx, rx) = mpmc::channel::<String>();
    let (_tx_other, other) = mpmc::channel::<String>();
    tx.send("first".into()).unwrap();
    tx.send("second".into()).unwrap();
    let mut sel = Select::new();
    let o = sel.recv(&rx);
    let same = sel.recv(&rx);
    sel.recv(&other);
    let op = sel.select();
    assert!(op.index() == o || op.index() == same);
    drop(op); // not completed
    let op = sel.select();
    let i = op.index();
    let r = catch_unwind(AssertUnwindSafe(|| op.recv(&other)));
    assert!(r.is_err(), "another channel's receiver is refused");
    let op = sel.select();
    assert_eq!(op.index(), i, "the refused operation's value is still there");
    let clone = rx.clone();
    assert_eq!(op.recv(&clone).as_deref(), Ok("first"));
    let op = sel.select();
    let i = op.index();
    assert!(i == o || i == same);
    assert_eq!(op.recv(&rx).as_deref(), Ok("second"));
}

/// Every value sent is received exactly once when selects compete with each other and with plain
/// receivers for the same channels, on bounded, rendezvous and unbounded channels, from ULTs on one
/// and two processors and from OS threads; some selects time out and try again.
#[test]
fn selects_and_receivers_competing_receive_each_value_exactly_once() {
    const CHANNELS: usize = 3;
    const SENDERS_EACH: u64 = 2;
    const EACH: u64 = 400;
    const TOTAL: u64 = CHANNELS as u64 * SENDERS_EACH * EACH;
    type Spawn<'s> = &'s dyn Fn(Box<dyn FnOnce() -> Vec<u64> + Send>) -> Box<dyn FnOnce() -> Vec<u64>>;
    fn run(caps: [Option<usize>; CHANNELS], spawn: Spawn<'_>) {
        let chans: Vec<_> = caps
            .iter()
            .map(|cap| match cap {
                Some(c) => mpmc::sync_channel::<u64>(*c),
                None => mpmc::channel::<u64>(),
            })
            .collect();
        let taken = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for (c, (tx, _)) in chans.iter().enumerate() {
            for s in 0..SENDERS_EACH {
                let tx = tx.clone();
                workers.push(spawn(Box::new(move || {
                    let base = (c as u64 * SENDERS_EACH + s) * EACH;
                    for v in base..base + EACH {
                        tx.send(v).unwrap();
                    }
                    Vec::new()
                })));
            }
        }
        // Three selecting receivers (one with short timeouts), and a plain receiver per channel.
        for w in 0..3 {
            let rxs: Vec<_> = chans.iter().map(|(_, rx)| rx.clone()).collect();
            let taken = taken.clone();
            workers.push(spawn(Box::new(move || {
                let mut got = Vec::new();
                // The channels that still have senders (a closed one would always be ready).
                let mut open: Vec<usize> = (0..CHANNELS).collect();
                while !open.is_empty() {
                    let mut sel = Select::new();
                    for &c in &open {
                        sel.recv(&rxs[c]);
                    }
                    let op = if w == 0 {
                        match sel.select_timeout(Duration::from_micros(200)) {
                            Ok(op) => op,
                            Err(_) => continue,
                        }
                    } else {
                        sel.select()
                    };
                    let k = op.index();
                    match op.recv(&rxs[open[k]]) {
                        Ok(v) => {
                            got.push(v);
                            taken.fetch_add(1, SeqCst);
                        }
                        Err(_) => {
                            open.remove(k);
                        }
                    }
                }
                got
            })));
        }
        // The plain receivers join in once the selects have taken a value (started at once, they
        // could take every value before a select ran: then nothing would test the competition).
        for (_, rx) in &chans {
            let (rx, taken) = (rx.clone(), taken.clone());
            workers.push(spawn(Box::new(move || {
                while taken.load(SeqCst) == 0 {
                    elite_rt::yield_now();
                }
                rx.iter().collect()
            })));
        }
        drop(chans);
        let mut all: Vec<u64> = workers.into_iter().flat_map(|h| h()).collect();
        all.sort_unstable();
        assert_eq!(all.len() as u64, TOTAL, "caps {caps:?}: values lost or duplicated");
        assert_eq!(all, (0..TOTAL).collect::<Vec<_>>(), "caps {caps:?}");
        // (Holds by construction now that the plain receivers wait for it: selects that never
        // took a value would leave them waiting, and the hang guard fails the test.)
        assert!(taken.load(SeqCst) > 0, "the selects took part");
    }
    let caps = [[Some(0), Some(2), None], [Some(1), Some(0), Some(0)]];
    for (name, rt) in [
        ("1 processor", Runtime::builder().processors(1).build().unwrap()),
        ("2 processors", Runtime::builder().processors(2).build().unwrap()),
    ] {
        hang_guard(120, name, move || {
            rt.block_on(|| {
                for c in caps {
                    run(c, &|f| {
                        let h = elite_rt::spawn(f);
                        Box::new(move || h.join().unwrap())
                    });
                }
            })
        });
    }
    hang_guard(120, "OS threads", move || {
        for c in caps {
            run(c, &|f| {
                let h = std::thread::spawn(f);
                Box::new(move || h.join().unwrap())
            });
        }
    });
}

/// `select!` (crossbeam's syntax): receive cases with expression and block bodies, `default`,
/// `default(timeout)`, the chosen body's value as the macro's, and `break` in a body leaving the
/// caller's loop.
#[test]
fn the_select_macro_follows_crossbeam_s() {
    let (tx1, rx1) = mpsc::channel::<i32>();
    let (tx2, rx2) = mpsc::channel::<&str>();
    let none = elite_rt::select! {
        recv(rx1) -> _ => "rx1",
        recv(rx2) -> _ => "rx2",
        default => "nothing ready",
    };
    assert_eq!(none, "nothing ready");
    let t0 = Instant::now();
    let late = elite_rt::select! {
        recv(rx1) -> _ => false,
        default(Duration::from_millis(10)) => true,
    };
    assert!(late && t0.elapsed() >= Duration::from_millis(10));
    tx2.send("two").unwrap();
    let got = elite_rt::select! {
        recv(rx1) -> v => { let v = v.unwrap(); format!("one: {v}") }
        recv(rx2) -> v => { format!("two: {}", v.unwrap()) }
    };
    assert_eq!(got, "two: two");
    for v in 0..5 {
        tx1.send(v).unwrap();
    }
    drop(tx1);
    let mut seen = Vec::new();
    loop {
        elite_rt::select! {
            recv(rx1) -> v => match v {
                Ok(v) => seen.push(v),
                Err(_) => break,
            },
            recv(rx2) -> v => panic!("nothing was sent on rx2: {v:?}"),
        }
    }
    assert_eq!(seen, [0, 1, 2, 3, 4]);
    let receivers = [rx2];
    let mut evaluated = 0;
    let r = elite_rt::select! {
        recv({ evaluated += 1; &receivers[0] }) -> v => v.is_ok(),
        default => false,
    };
    assert!(!r);
    assert_eq!(evaluated, 1, "each receiver expression is evaluated once");
}

/// A ULT blocked in a select when its runtime shuts down is unwound and leaves every channel's
/// list: afterwards the channels work as before.
#[test]
fn shutdown_unwinds_a_blocked_select() {
    let (tx1, rx1) = mpmc::channel::<u32>();
    let (tx2, rx2) = mpmc::sync_channel::<u32>(0);
    let started = Arc::new(AtomicUsize::new(0));
    {
        let rt = Runtime::builder().processors(2).build().unwrap();
        let (rx1, rx2, st) = (rx1.clone(), rx2.clone(), started.clone());
        rt.spawn(move || {
            let mut sel = Select::new();
            sel.recv(&rx1);
            sel.recv(&rx2);
            st.store(1, SeqCst);
            let op = sel.select();
            unreachable!("nothing is sent: {}", op.index());
        });
        common::wait_until(10, "the select", || started.load(SeqCst) == 1);
        std::thread::sleep(Duration::from_millis(20)); // let it block
        hang_guard(30, "drop with a blocked select", move || drop(rt));
    }
    tx1.send(1).unwrap();
    assert_eq!(rx1.recv(), Ok(1));
    let h = std::thread::spawn(move || tx2.send(2));
    assert_eq!(rx2.recv(), Ok(2));
    h.join().unwrap().unwrap();
}
