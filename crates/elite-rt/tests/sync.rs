//! Synchronization primitives: stress tests that assert nothing is lost, on 1 and 2 processors and
//! on a synthetic 2-node topology, plus the semantics users rely on (disconnection, timeouts,
//! poisoning, OS threads mixed with ULTs, shutdown while blocked).

mod common;

use common::hang_guard;
use elite_rt::sync::{mpmc, mpsc, Barrier, Condvar, Mutex, RwLock, Semaphore, SpinPolicy, WaitGroup};
use elite_rt::Runtime;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The runtimes every stress test runs on.
fn runtimes() -> Vec<(&'static str, Runtime)> {
    vec![
        ("1 processor", Runtime::builder().processors(1).build().unwrap()),
        ("2 processors", Runtime::builder().processors(2).build().unwrap()),
        ("2 nodes x 2 processors", Runtime::builder().topology("2x2").build().unwrap()),
        ("central, 2 processors", Runtime::builder().processors(2).central(true).build().unwrap()),
    ]
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn bank_transfers_keep_the_total() {
    const ACCOUNTS: usize = 64;
    const ULTS: u64 = 10_000;
    const START: i64 = 1_000;
    for (name, rt) in runtimes() {
        let total = hang_guard(60, name, move || {
            rt.block_on(|| {
                let accounts: Arc<Vec<Mutex<i64>>> =
                    Arc::new((0..ACCOUNTS).map(|_| Mutex::new(START)).collect());
                let hs: Vec<_> = (0..ULTS)
                    .map(|i| {
                        let accounts = accounts.clone();
                        elite_rt::spawn(move || {
                            let mut rng = Rng::new(i);
                            for _ in 0..4 {
                                let a = rng.below(ACCOUNTS as u64) as usize;
                                let b = rng.below(ACCOUNTS as u64) as usize;
                                if a == b {
                                    continue;
                                }
                                let (lo, hi) = (a.min(b), a.max(b));
                                let mut x = accounts[lo].lock().unwrap();
                                if rng.below(4) == 0 {
                                    elite_rt::yield_now(); // hold a lock across a switch: others block
                                }
                                let mut y = accounts[hi].lock().unwrap();
                                let amount = rng.below(100) as i64;
                                *x -= amount;
                                *y += amount;
                            }
                        })
                    })
                    .collect();
                hs.into_iter().for_each(|h| h.join().unwrap());
                accounts.iter().map(|m| *m.lock().unwrap()).sum::<i64>()
            })
        });
        assert_eq!(total, START * ACCOUNTS as i64, "{name}");
    }
}

/// `senders` ULTs each send `per` tagged messages; checks exactly-once and per-sender order.
fn check_channel(name: &str, rt: &Runtime, kind: &'static str) {
    const SENDERS: usize = 8;
    const PER: usize = 2_000;
    let received = rt.block_on(move || {
        enum Tx {
            Unbounded(mpsc::Sender<(usize, usize)>),
            Bounded(mpsc::SyncSender<(usize, usize)>),
        }
        let (tx, rx) = match kind {
            "channel" => {
                let (t, r) = mpsc::channel();
                (Tx::Unbounded(t), r)
            }
            "sync_channel(0)" => {
                let (t, r) = mpsc::sync_channel(0);
                (Tx::Bounded(t), r)
            }
            _ => {
                let (t, r) = mpsc::sync_channel(4);
                (Tx::Bounded(t), r)
            }
        };
        for s in 0..SENDERS {
            let tx = match &tx {
                Tx::Unbounded(t) => Tx::Unbounded(t.clone()),
                Tx::Bounded(t) => Tx::Bounded(t.clone()),
            };
            elite_rt::spawn(move || {
                let mut rng = Rng::new(s as u64);
                for k in 0..PER {
                    match &tx {
                        Tx::Unbounded(t) => t.send((s, k)).unwrap(),
                        Tx::Bounded(t) => t.send((s, k)).unwrap(),
                    }
                    if rng.below(8) == 0 {
                        elite_rt::yield_now();
                    }
                }
            });
        }
        drop(tx);
        let mut next = [0usize; SENDERS];
        let mut n = 0;
        for (s, k) in rx.iter() {
            assert_eq!(k, next[s], "message out of order or duplicated");
            next[s] += 1;
            n += 1;
        }
        assert!(next.iter().all(|&k| k == PER), "messages lost: {next:?}");
        n
    });
    assert_eq!(received, SENDERS * PER, "{name} {kind}");
}

#[test]
fn channels_deliver_everything_once_in_order() {
    for (name, rt) in runtimes() {
        for kind in ["channel", "sync_channel(0)", "sync_channel(4)"] {
            let rt = &rt;
            std::thread::scope(|s| {
                s.spawn(|| check_channel(name, rt, kind));
            });
        }
    }
}

#[test]
fn mpmc_hands_each_value_to_exactly_one_receiver() {
    const SENDERS: usize = 4;
    const RECEIVERS: usize = 4;
    const PER: usize = 3_000;
    for (name, rt) in runtimes() {
        let seen = hang_guard(60, name, move || {
            rt.block_on(|| {
                let (tx, rx) = mpmc::bounded::<(usize, usize)>(2);
                let receivers: Vec<_> = (0..RECEIVERS)
                    .map(|_| {
                        let rx = rx.clone();
                        elite_rt::spawn(move || {
                            let mut got = Vec::new();
                            let mut last = [None::<usize>; SENDERS];
                            for (s, k) in rx.iter() {
                                // One receiver sees each sender's values in increasing order.
                                assert!(last[s].is_none_or(|l| l < k), "order broken for sender {s}");
                                last[s] = Some(k);
                                got.push((s, k));
                            }
                            got
                        })
                    })
                    .collect();
                drop(rx);
                for s in 0..SENDERS {
                    let tx = tx.clone();
                    elite_rt::spawn(move || {
                        for k in 0..PER {
                            tx.send((s, k)).unwrap();
                        }
                    });
                }
                drop(tx);
                let mut seen = vec![0u8; SENDERS * PER];
                for h in receivers {
                    for (s, k) in h.join().unwrap() {
                        seen[s * PER + k] += 1;
                    }
                }
                seen
            })
        });
        assert!(seen.iter().all(|&c| c == 1), "{name}: a value was lost or duplicated");
    }
}

#[test]
fn condvar_queue_with_random_yields() {
    const PRODUCERS: usize = 8;
    const PER: usize = 2_000;
    for (name, rt) in runtimes() {
        let sum = hang_guard(60, name, move || {
            rt.block_on(|| {
                let q = Arc::new((Mutex::new((VecDeque::new(), 0usize)), Condvar::new()));
                for p in 0..PRODUCERS {
                    let q = q.clone();
                    elite_rt::spawn(move || {
                        let mut rng = Rng::new(p as u64 + 100);
                        for k in 1..=PER {
                            q.0.lock().unwrap().0.push_back(k);
                            if rng.below(2) == 0 {
                                q.1.notify_one();
                            } else {
                                q.1.notify_all();
                            }
                            if rng.below(4) == 0 {
                                elite_rt::yield_now();
                            }
                        }
                        q.0.lock().unwrap().1 += 1;
                        q.1.notify_all();
                    });
                }
                let consumers: Vec<_> = (0..3)
                    .map(|_| {
                        let q = q.clone();
                        elite_rt::spawn(move || {
                            let mut sum = 0usize;
                            loop {
                                let g = q.0.lock().unwrap();
                                let mut g =
                                    q.1.wait_while(g, |(v, done)| v.is_empty() && *done < PRODUCERS).unwrap();
                                match g.0.pop_front() {
                                    Some(k) => sum += k,
                                    None => return sum, // empty and every producer done
                                }
                            }
                        })
                    })
                    .collect();
                consumers.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
            })
        });
        assert_eq!(sum, PRODUCERS * PER * (PER + 1) / 2, "{name}");
    }
}

#[test]
fn barrier_rounds_with_random_yields() {
    const N: usize = 50;
    const ROUNDS: usize = 200;
    for (name, rt) in runtimes() {
        let leaders = hang_guard(60, name, move || {
            rt.block_on(|| {
                let b = Arc::new(Barrier::new(N));
                let phase = Arc::new(AtomicUsize::new(0));
                let hs: Vec<_> = (0..N)
                    .map(|i| {
                        let (b, phase) = (b.clone(), phase.clone());
                        elite_rt::spawn(move || {
                            let mut rng = Rng::new(i as u64 + 7);
                            let mut leaders = 0;
                            for r in 0..ROUNDS {
                                phase.fetch_add(1, Ordering::Relaxed);
                                if rng.below(3) == 0 {
                                    elite_rt::yield_now();
                                }
                                if b.wait().is_leader() {
                                    leaders += 1;
                                }
                                // Everyone of round r has arrived before anyone leaves it.
                                assert!(phase.load(Ordering::Relaxed) >= (r + 1) * N);
                                b.wait();
                            }
                            leaders
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
            })
        });
        assert_eq!(leaders, ROUNDS, "{name}: one leader per round");
    }
}

#[test]
fn rwlock_readers_never_see_a_half_write() {
    for (name, rt) in runtimes() {
        let (a, reads) = hang_guard(60, name, move || {
            rt.block_on(|| {
                let l = Arc::new(RwLock::new((0u64, 0u64)));
                let reads = Arc::new(AtomicUsize::new(0));
                let mut hs = Vec::new();
                for i in 0..40u64 {
                    let (l, reads) = (l.clone(), reads.clone());
                    hs.push(elite_rt::spawn(move || {
                        let mut rng = Rng::new(i + 1);
                        for _ in 0..300 {
                            if i % 4 == 0 {
                                let mut g = l.write().unwrap();
                                g.0 += 1;
                                if rng.below(4) == 0 {
                                    elite_rt::yield_now(); // readers and writers queue meanwhile
                                }
                                g.1 += 1;
                            } else {
                                let g = l.read().unwrap();
                                assert_eq!(g.0, g.1, "a reader saw a half-done write");
                                if rng.below(8) == 0 {
                                    elite_rt::yield_now();
                                }
                                reads.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }));
                }
                hs.into_iter().for_each(|h| h.join().unwrap());
                let v = *l.read().unwrap();
                assert_eq!(v.0, v.1);
                (v.0, reads.load(Ordering::Relaxed))
            })
        });
        assert_eq!(a, 10 * 300, "{name}");
        assert_eq!(reads, 30 * 300, "{name}");
    }
}

#[test]
fn semaphore_ring_passes_every_token() {
    const N: usize = 256;
    const LAPS: usize = 50;
    for (name, rt) in runtimes() {
        let total = hang_guard(60, name, move || {
            rt.block_on(|| {
                let sems: Arc<Vec<Semaphore>> =
                    Arc::new((0..N).map(|i| Semaphore::new(usize::from(i % 4 == 0))).collect());
                let hs: Vec<_> = (0..N)
                    .map(|i| {
                        let sems = sems.clone();
                        elite_rt::Builder::new()
                            .stack_size(16 * 1024)
                            .spawn(move || {
                                for _ in 0..LAPS {
                                    sems[i].acquire();
                                    sems[(i + 1) % N].release();
                                }
                                LAPS
                            })
                            .unwrap()
                    })
                    .collect();
                let done: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
                // The tokens are all still there.
                let left: usize = sems.iter().map(|s| s.available_permits()).sum();
                assert_eq!(left, N / 4);
                done
            })
        });
        assert_eq!(total, N * LAPS, "{name}");
    }
}

#[test]
fn waitgroup_waits_for_every_done() {
    for (name, rt) in runtimes() {
        let n = rt.block_on(|| {
            let wg = Arc::new(WaitGroup::new());
            let hits = Arc::new(AtomicUsize::new(0));
            for i in 0..500 {
                wg.add(1);
                let (wg, hits) = (wg.clone(), hits.clone());
                elite_rt::spawn(move || {
                    if i % 3 == 0 {
                        elite_rt::yield_now();
                    }
                    hits.fetch_add(1, Ordering::Relaxed);
                    wg.done();
                });
            }
            wg.wait();
            assert_eq!(wg.count(), 0);
            hits.load(Ordering::Relaxed)
        });
        assert_eq!(n, 500, "{name}");
    }
}

#[test]
fn os_threads_and_ults_mix() {
    let rt = Runtime::builder().processors(2).build().unwrap();
    let m = Arc::new(Mutex::new(0u64));
    let (to_ult, from_os) = mpsc::channel::<u64>();
    let (to_os, from_ult) = mpsc::sync_channel::<u64>(0);
    let sem = Arc::new(Semaphore::new(0));
    // ULTs: take numbers from OS threads, bump the shared counter, answer on a rendezvous channel.
    let worker = {
        let (m, sem) = (m.clone(), sem.clone());
        rt.spawn(move || {
            for v in from_os.iter() {
                *m.lock().unwrap() += v;
                to_os.send(v * 2).unwrap();
            }
            sem.release();
        })
    };
    let os_threads: Vec<_> = (0..3)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    *m.lock().unwrap() += 1; // contends with the ULT from an OS thread
                }
                t
            })
        })
        .collect();
    let mut answers = 0;
    for v in 1..=200u64 {
        to_ult.send(v).unwrap();
        answers += from_ult.recv().unwrap();
    }
    drop(to_ult);
    sem.acquire(); // an OS thread waits for a ULT's release
    worker.join().unwrap();
    for t in os_threads {
        t.join().unwrap();
    }
    assert_eq!(answers, 2 * 200 * 201 / 2);
    assert_eq!(*m.lock().unwrap(), 200 * 201 / 2 + 3000);
}

#[test]
fn disconnection_follows_std() {
    let rt = Runtime::builder().processors(2).build().unwrap();
    rt.block_on(|| {
        // Receiver gone: send gives the value back.
        let (tx, rx) = mpsc::channel::<String>();
        drop(rx);
        assert_eq!(tx.send("back".into()).unwrap_err().0, "back");
        // Senders gone: queued values still arrive, then Err.
        let (tx, rx) = mpsc::channel();
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        drop(tx);
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.recv(), Err(mpsc::RecvError));
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
        // A blocked receiver is woken by the last sender leaving.
        let (tx, rx) = mpsc::channel::<u8>();
        let h = elite_rt::spawn(move || rx.recv());
        elite_rt::sleep(Duration::from_millis(5));
        drop(tx);
        assert_eq!(h.join().unwrap(), Err(mpsc::RecvError));
        // A blocked sender is woken by the receiver leaving and gets its value back.
        let (tx, rx) = mpsc::sync_channel::<u8>(0);
        let h = elite_rt::spawn(move || tx.send(7));
        elite_rt::sleep(Duration::from_millis(5));
        drop(rx);
        assert_eq!(h.join().unwrap(), Err(mpsc::SendError(7)));
        // try_send on a full channel.
        let (tx, _rx) = mpsc::sync_channel(1);
        tx.try_send(1).unwrap();
        assert_eq!(tx.try_send(2), Err(mpsc::TrySendError::Full(2)));
    });
}

/// A channel's lock biases itself towards the processor that keeps taking it (`sync::bias`):
/// a channel used long enough from one processor, then from an OS thread, from a processor of
/// another runtime, and from two processors at once (the first one biasing it again, the other
/// revoking) still delivers every value once and in order.
#[test]
fn a_channel_biased_to_one_processor_serves_everyone_else_too() {
    hang_guard(60, "biased channel", || {
        let rt1 = Runtime::builder().processors(1).build().unwrap();
        let rt2 = Runtime::builder().processors(1).build().unwrap();
        let (tx, rx) = mpsc::channel::<u64>();
        // Phase 1: one processor, far past the bias threshold.
        let (tx, rx) = rt1.block_on(move || {
            for round in 0..4u64 {
                for i in 0..300 {
                    tx.send(round * 300 + i).unwrap();
                }
                for i in 0..300 {
                    assert_eq!(rx.recv(), Ok(round * 300 + i));
                }
            }
            (tx, rx)
        });
        // Phase 2: an OS thread (no processor) revokes the bias.
        for i in 0..100 {
            tx.send(i).unwrap();
            assert_eq!(rx.recv(), Ok(i));
        }
        // Phase 3: another runtime's processor, far past the threshold (unbiased all along: a
        // revoked lock is biased again only to its first owner, `sync::bias`).
        let (tx, rx) = rt2.block_on(move || {
            for i in 0..2000 {
                tx.send(i).unwrap();
                assert_eq!(rx.recv(), Ok(i));
            }
            (tx, rx)
        });
        // Phase 4: a sender on rt1 and a receiver on rt2 at once, in bursts (so that the sender,
        // on the lock's first owner, may take it many times in a row and bias it again, and the
        // receiver revoke it).
        const N: u64 = 20_000;
        std::thread::scope(|s| {
            let rt1 = &rt1;
            let sender = s.spawn(move || {
                rt1.block_on(move || {
                    for i in 0..N {
                        tx.send(i).unwrap();
                        if i % 512 == 0 {
                            elite_rt::yield_now();
                        }
                    }
                })
            });
            rt2.block_on(move || {
                for i in 0..N {
                    assert_eq!(rx.recv(), Ok(i), "value {i} lost, repeated or out of order");
                }
                assert!(rx.recv().is_err(), "the sender is gone");
            });
            sender.join().unwrap();
        });
    });
}

#[test]
fn rendezvous_send_returns_only_once_received() {
    let rt = Runtime::builder().processors(2).build().unwrap();
    rt.block_on(|| {
        let (tx, rx) = mpsc::sync_channel::<u32>(0);
        let taken = Arc::new(AtomicBool::new(false));
        let t2 = taken.clone();
        let h = elite_rt::spawn(move || {
            tx.send(5).unwrap();
            assert!(t2.load(Ordering::SeqCst), "send returned before the value was taken");
        });
        elite_rt::sleep(Duration::from_millis(10));
        taken.store(true, Ordering::SeqCst);
        assert_eq!(rx.recv(), Ok(5));
        h.join().unwrap();
    });
}

#[test]
fn timeouts_expire_and_race_safely() {
    for (name, rt) in runtimes() {
        hang_guard(60, name, move || {
            rt.block_on(|| {
                let (tx, rx) = mpsc::channel::<u32>();
                let t0 = Instant::now();
                assert_eq!(rx.recv_timeout(Duration::from_millis(20)), Err(mpsc::RecvTimeoutError::Timeout));
                assert!(t0.elapsed() >= Duration::from_millis(20));
                let pair = (Mutex::new(()), Condvar::new());
                let (_g, r) = pair.1.wait_timeout(pair.0.lock().unwrap(), Duration::from_millis(5)).unwrap();
                assert!(r.timed_out());
                let sem = Semaphore::new(0);
                assert!(!sem.acquire_timeout(Duration::from_millis(5)));
                let wg = WaitGroup::new();
                wg.add(1);
                assert!(!wg.wait_timeout(Duration::from_millis(5)));
                // Receivers with short timeouts racing a sender: every value arrives exactly once.
                let got = Arc::new(Mutex::new(Vec::new()));
                let rx = Arc::new(Mutex::new(rx));
                let receivers: Vec<_> = (0..1)
                    .map(|_| {
                        let (rx, got) = (rx.clone(), got.clone());
                        elite_rt::spawn(move || {
                            let rx = rx.lock().unwrap();
                            loop {
                                match rx.recv_timeout(Duration::from_micros(50)) {
                                    Ok(v) => got.lock().unwrap().push(v),
                                    Err(mpsc::RecvTimeoutError::Timeout) => elite_rt::yield_now(),
                                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                                }
                            }
                        })
                    })
                    .collect();
                for v in 0..3000 {
                    tx.send(v).unwrap();
                    if v % 16 == 0 {
                        elite_rt::sleep(Duration::from_micros(30));
                    }
                }
                drop(tx);
                receivers.into_iter().for_each(|h| h.join().unwrap());
                let mut got = got.lock().unwrap().clone();
                got.sort_unstable();
                assert_eq!(got, (0..3000).collect::<Vec<_>>());
            })
        });
    }
}

#[test]
fn a_panicking_holder_poisons_the_mutex() {
    let rt = Runtime::builder().processors(2).build().unwrap();
    rt.block_on(|| {
        let m = Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let r = elite_rt::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("boom");
        })
        .join();
        assert!(r.is_err());
        assert!(m.is_poisoned());
        let g = m.lock().unwrap_err().into_inner();
        assert_eq!(*g, 1);
        drop(g);
        m.clear_poison();
        assert!(m.lock().is_ok());
    });
}

#[test]
fn a_waiter_is_not_starved_by_newcomers() {
    // Two OS threads relock in a tight loop; a third must still get the lock (it is handed over
    // after MAX_LOSSES lost races). The hang guard is the assertion.
    hang_guard(30, "starvation", || {
        let m = Arc::new(Mutex::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let hammers: Vec<_> = (0..2)
            .map(|_| {
                let (m, stop) = (m.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let mut g = m.lock().unwrap();
                        *g += 1;
                        for _ in 0..200 {
                            std::hint::spin_loop();
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(10));
        for _ in 0..50 {
            drop(m.lock().unwrap());
        }
        stop.store(true, Ordering::Relaxed);
        hammers.into_iter().for_each(|h| h.join().unwrap());
    });
}

#[test]
fn spin_policies_all_keep_the_count() {
    for policy in [SpinPolicy::Adaptive, SpinPolicy::Fixed(64), SpinPolicy::Block] {
        let rt = Runtime::builder().processors(2).spin_policy(policy).build().unwrap();
        let n = hang_guard(60, "spin policy", move || {
            rt.block_on(|| {
                let m = Arc::new(Mutex::new(0u64));
                let hs: Vec<_> = (0..64)
                    .map(|_| {
                        let m = m.clone();
                        elite_rt::spawn(move || {
                            for _ in 0..500 {
                                *m.lock().unwrap() += 1;
                                elite_rt::yield_now();
                            }
                        })
                    })
                    .collect();
                hs.into_iter().for_each(|h| h.join().unwrap());
                let n = *m.lock().unwrap();
                n
            })
        });
        assert_eq!(n, 64 * 500, "{policy:?}");
    }
    let err = Runtime::builder().spin_policy(SpinPolicy::Fixed(2_000_000)).build().unwrap_err();
    assert!(err.to_string().contains("spin_policy"), "{err}");
}

/// `mutex_contended`'s loop, where a lock saturates and its contenders gather on one processor
/// (`Mutex`, "Gathering"): the count stays exact with gathering on and off, with pinned ULTs
/// among the contenders (which never move), with two locks taken in turn (two homes to move
/// between), on 2 processors and on 2 nodes of 2; independent work spawned after it (whose
/// processors may be pausing their stealing) runs to completion with the right answers.
#[test]
fn a_saturated_mutex_gathers_and_keeps_the_count() {
    for (what, gather, topology) in
        [("on, 2", true, "2"), ("off, 2", false, "2"), ("on, 2x2", true, "2x2"), ("off, 2x2", false, "2x2")]
    {
        let rt = Runtime::builder().topology(topology).gather_locks(gather).build().unwrap();
        let (a, b) = hang_guard(120, "gathering", move || {
            rt.block_on(|| {
                let (a, b) = (Arc::new(Mutex::new(0u64)), Arc::new(Mutex::new(0u64)));
                let hs: Vec<_> = (0..256u64)
                    .map(|i| {
                        let (a, b) = (a.clone(), b.clone());
                        let work = move || {
                            for k in 0..1000u64 {
                                // Every other ULT takes the second lock every 8th turn.
                                if i % 2 == 1 && k % 8 == 0 {
                                    *b.lock().unwrap() += 1;
                                } else {
                                    *a.lock().unwrap() += 1;
                                }
                                elite_rt::yield_now();
                            }
                        };
                        elite_rt::Builder::new().pinned(i % 16 == 0).spawn(work).unwrap()
                    })
                    .collect();
                hs.into_iter().for_each(|h| h.join().unwrap());
                let hs: Vec<_> =
                    (0..64).map(|i| elite_rt::spawn(move || (0..10_000u64).sum::<u64>() + i)).collect();
                let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
                assert_eq!(sum, 64 * 49_995_000 + 63 * 32);
                let n = (*a.lock().unwrap(), *b.lock().unwrap());
                n
            })
        });
        assert_eq!(a + b, 256 * 1000, "{what}");
        assert_eq!(b, 128 * 125, "{what}");
    }
}

#[test]
fn shutdown_unwinds_blocked_waiters_and_leaves_objects_usable() {
    let m = Arc::new(Mutex::new(0u32));
    let sem = Arc::new(Semaphore::new(0));
    let cv = Arc::new((Mutex::new(false), Condvar::new()));
    let rw = Arc::new(RwLock::new(0u32));
    let barrier = Arc::new(Barrier::new(100));
    let (tx, rx) = mpsc::sync_channel::<u32>(0);
    let started = Arc::new(AtomicUsize::new(0));
    let outside = {
        let rt = Runtime::builder().processors(2).build().unwrap();
        let (m2, sem2, cv2, rw2, b2, st) =
            (m.clone(), sem.clone(), cv.clone(), rw.clone(), barrier.clone(), started.clone());
        rt.block_on(move || {
            // One ULT holds the mutex and the write lock and blocks on the semaphore forever.
            let (m3, rw3, sem3, st3) = (m2.clone(), rw2.clone(), sem2.clone(), st.clone());
            elite_rt::spawn(move || {
                let _g = m3.lock().unwrap();
                let _w = rw3.write().unwrap();
                st3.fetch_add(1, Ordering::SeqCst);
                sem3.acquire();
            });
            common::ult_sleep_until(10, "holder", || st.load(Ordering::SeqCst) == 1);
            // Others block on everything.
            for i in 0..5 {
                let (m, rw, cv, b, tx) = (m2.clone(), rw2.clone(), cv2.clone(), b2.clone(), tx.clone());
                let st = st.clone();
                elite_rt::spawn(move || {
                    st.fetch_add(1, Ordering::SeqCst);
                    match i {
                        0 => drop(m.lock()),
                        1 => drop(rw.read()),
                        2 => {
                            let g = cv.0.lock().unwrap();
                            drop(cv.1.wait_while(g, |ready| !*ready));
                        }
                        3 => drop(b.wait()),
                        _ => drop(tx.send(1)),
                    }
                });
            }
            common::ult_sleep_until(10, "waiters", || st.load(Ordering::SeqCst) == 6);
            elite_rt::sleep(Duration::from_millis(20)); // let them block
        });
        // An OS thread queues on the mutex the blocked ULT holds.
        let m4 = m.clone();
        let outside = std::thread::spawn(move || {
            *m4.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        });
        std::thread::sleep(Duration::from_millis(20));
        hang_guard(30, "drop with blocked waiters", move || drop(rt));
        outside
    };
    // The unwound holder released the mutex: the OS thread got it.
    hang_guard(30, "outside waiter", move || outside.join().unwrap());
    assert_eq!(*m.lock().unwrap_or_else(|e| e.into_inner()), 1);
    // Released, and poisoned: the cancelled holder's critical section never finished.
    assert!(
        matches!(rw.try_write(), Err(std::sync::TryLockError::Poisoned(_))),
        "the write lock was released"
    );
    assert!(m.is_poisoned());
    assert!(cv.0.try_lock().is_ok());
    drop(rx);
    // The barrier's round was left by the unwound waiter: a full round still works.
    let b = Barrier::new(1);
    assert!(b.wait().is_leader());
    assert_eq!(sem.available_permits(), 0);
}

#[test]
fn the_central_ablation_uses_only_global_structures() {
    let rt = Runtime::builder().topology("2x2").central(true).build().unwrap();
    assert_eq!(rt.topology().num_nodes(), 1, "central: one node");
    let sum = rt.block_on(|| {
        let hs: Vec<_> = (0..2000u64).map(|i| elite_rt::spawn(move || i)).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(sum, 1999 * 2000 / 2);
    let st = rt.stats().total();
    assert!(st.start_global >= 2000, "every spawn went through the global start-queue: {st:?}");
    assert_eq!(st.start_local + st.start_node, 0, "{st:?}");
    assert_eq!(st.tcb_pool_hits + st.stack_pool_hits, 0, "no per-processor pools: {st:?}");
    assert_eq!(st.steals_node + st.steals_remote, 0, "nothing to steal: {st:?}");
}
