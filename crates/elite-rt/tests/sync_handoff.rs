//! Stress tests of the wait protocol's hand-offs (`sync::wait`): a waiter switches out holding its
//! object's lock and its processor links the node after the switch; a notifier resolves an
//! untimed wait with a store and a timed one with a CAS against the timer; a woken ULT may run
//! at once through the processor's direct hand-off. Each test would lose, duplicate or reorder a
//! message, a permit or an increment if a node were published too early (a notifier waking a
//! ULT still on its stack), a notification were lost, or a timed-out waiter kept a value.
//!
//! Bounded in time (hang guards, no timing assertions), on 1 and 2 processors and a synthetic
//! 2-node topology. Under the default policy (No Affinity) a ULT woken by a hand-off goes to its
//! waker's processor, the only kind of wake under which a node published before its waiter is off
//! its stack can be resumed by another processor; under a policy that wakes a ULT where it last
//! ran, wake-ups go through other processors' wake-up stacks.

mod common;

use common::hang_guard;
use elite_rt::policy::{Hooks, Policy, ProcessorView, UltInfo};
use elite_rt::sync::{mpmc, mpsc, Mutex, Semaphore, SpinPolicy};
use elite_rt::Runtime;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// No Affinity's order, but a woken ULT goes where it last ran (the default wake hook): a wake
/// from another processor goes through that processor's wake-up stack.
#[derive(Debug)]
struct WakeWhereItRan;

impl Hooks for WakeWhereItRan {
    fn name(&self) -> &'static str {
        "wake-where-it-ran"
    }
    fn priority(&self, _ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
        here.seq
    }
}

fn runtimes_with(spin: SpinPolicy) -> Vec<(&'static str, Runtime)> {
    let b = || Runtime::builder().spin_policy(spin);
    vec![
        ("1 processor", b().processors(1).build().unwrap()),
        ("2 processors", b().processors(2).build().unwrap()),
        ("2 nodes x 2", b().topology("2x2").build().unwrap()),
        (
            "2 processors, woken where it ran",
            b().processors(2).policy(Policy::new(WakeWhereItRan)).build().unwrap(),
        ),
        (
            "2 nodes x 2, woken where it ran",
            b().topology("2x2").policy(Policy::new(WakeWhereItRan)).build().unwrap(),
        ),
    ]
}

fn runtimes() -> Vec<(&'static str, Runtime)> {
    runtimes_with(SpinPolicy::Adaptive)
}

/// A cheap per-ULT random source (xorshift).
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Pairs of ULTs pass a counter back and forth through two rendezvous channels (the ping-pong of
/// `elite-bench sync`), with random yields so that either side may arrive first; every round trip
/// must add exactly two.
#[test]
fn rendezvous_pairs_pass_every_token() {
    const PAIRS: u64 = 24;
    const ROUNDS: u64 = 1000;
    for (name, rt) in runtimes() {
        hang_guard(120, name, move || {
            let total = rt.block_on(|| {
                let pairs: Vec<_> = (0..PAIRS)
                    .map(|p| {
                        let (ping_tx, ping_rx) = mpsc::sync_channel::<u64>(0);
                        let (pong_tx, pong_rx) = mpsc::sync_channel::<u64>(0);
                        let partner = elite_rt::spawn(move || {
                            let mut r = rng(p + 1000);
                            for _ in 0..ROUNDS {
                                let v = ping_rx.recv().unwrap();
                                if r().is_multiple_of(4) {
                                    elite_rt::yield_now();
                                }
                                pong_tx.send(v + 1).unwrap();
                            }
                            assert!(ping_rx.recv().is_err(), "the pinger is gone: disconnected");
                        });
                        let pinger = elite_rt::spawn(move || {
                            let mut r = rng(p);
                            let mut c = 0u64;
                            for _ in 0..ROUNDS {
                                ping_tx.send(c + 1).unwrap();
                                if r().is_multiple_of(4) {
                                    elite_rt::yield_now();
                                }
                                c = pong_rx.recv().unwrap();
                            }
                            c
                        });
                        (pinger, partner)
                    })
                    .collect();
                pairs
                    .into_iter()
                    .map(|(pinger, partner)| {
                        let c = pinger.join().unwrap();
                        partner.join().unwrap();
                        c
                    })
                    .sum::<u64>()
            });
            assert_eq!(total, PAIRS * ROUNDS * 2, "{name}");
        });
    }
}

/// Senders on a rendezvous mpmc channel against receivers that mostly time out: a value is either
/// taken by exactly one receiver or still held by its sender, never both and never lost; per
/// sender the values arrive in order.
#[test]
fn timed_receivers_racing_rendezvous_senders_lose_nothing() {
    const SENDERS: u64 = 6;
    const RECEIVERS: u64 = 4;
    const PER_SENDER: u64 = 600;
    for (name, rt) in runtimes() {
        hang_guard(120, name, move || {
            rt.block_on(|| {
                let (tx, rx) = mpmc::bounded::<(u64, u64)>(0);
                let seen = Arc::new(Mutex::new(Vec::new()));
                let receivers: Vec<_> = (0..RECEIVERS)
                    .map(|i| {
                        let (rx, seen) = (rx.clone(), seen.clone());
                        elite_rt::spawn(move || {
                            let mut r = rng(i + 77);
                            let mut last = vec![None::<u64>; SENDERS as usize];
                            loop {
                                match rx.recv_timeout(Duration::from_micros(1 + r() % 40)) {
                                    Ok((s, v)) => {
                                        // In order per sender, as far as this receiver sees.
                                        let l = &mut last[s as usize];
                                        assert!(l.is_none_or(|l| l < v), "sender {s}: {v} after {l:?}");
                                        *l = Some(v);
                                        seen.lock().unwrap().push((s, v));
                                    }
                                    Err(mpsc::RecvTimeoutError::Timeout) => {
                                        if r().is_multiple_of(2) {
                                            elite_rt::yield_now();
                                        }
                                    }
                                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                                }
                            }
                        })
                    })
                    .collect();
                drop(rx);
                let senders: Vec<_> = (0..SENDERS)
                    .map(|s| {
                        let tx = tx.clone();
                        elite_rt::spawn(move || {
                            let mut r = rng(s + 5);
                            for v in 0..PER_SENDER {
                                tx.send((s, v)).unwrap();
                                if r().is_multiple_of(8) {
                                    elite_rt::yield_now();
                                }
                            }
                        })
                    })
                    .collect();
                drop(tx);
                senders.into_iter().for_each(|h| h.join().unwrap());
                receivers.into_iter().for_each(|h| h.join().unwrap());
                let mut seen = seen.lock().unwrap().clone();
                seen.sort_unstable();
                let expected: Vec<_> =
                    (0..SENDERS).flat_map(|s| (0..PER_SENDER).map(move |v| (s, v))).collect();
                assert_eq!(seen, expected, "{name}: every value exactly once");
            })
        });
    }
}

/// Many ULTs block on one mutex (the spin policy `Block`: every contended lock blocks, so every
/// unlock with waiters hands over through the wait protocol) and on semaphores that pass a few
/// tokens around a ring; the counts are exact.
#[test]
fn blocking_mutex_and_semaphore_ring_keep_exact_counts() {
    const ULTS: u64 = 64;
    const ITERS: u64 = 300;
    for (name, rt) in runtimes_with(SpinPolicy::Block) {
        hang_guard(120, name, move || {
            let (count, acquires) = rt.block_on(|| {
                let m = Arc::new(Mutex::new(0u64));
                let ring: Arc<Vec<Semaphore>> =
                    Arc::new((0..ULTS).map(|i| Semaphore::new(usize::from(i % 8 == 0))).collect());
                let acquires = Arc::new(AtomicU64::new(0));
                let hs: Vec<_> = (0..ULTS)
                    .map(|i| {
                        let (m, ring, acquires) = (m.clone(), ring.clone(), acquires.clone());
                        elite_rt::spawn(move || {
                            let mut r = rng(i + 31);
                            for _ in 0..ITERS {
                                ring[i as usize].acquire();
                                acquires.fetch_add(1, Ordering::Relaxed);
                                {
                                    let mut g = m.lock().unwrap();
                                    *g += 1;
                                    if r().is_multiple_of(4) {
                                        elite_rt::yield_now(); // hold it across a switch: others block
                                    }
                                }
                                ring[((i + 1) % ULTS) as usize].release();
                            }
                        })
                    })
                    .collect();
                hs.into_iter().for_each(|h| h.join().unwrap());
                let count = *m.lock().unwrap();
                (count, acquires.load(Ordering::Relaxed))
            });
            assert_eq!(count, ULTS * ITERS, "{name}: mutex count");
            assert_eq!(acquires, ULTS * ITERS, "{name}: semaphore acquires");
        });
    }
}
