//! Pinned ULTs (`Builder::pinned(true)`) never leave the OS thread they started on: not through a
//! wake-up the policy sends elsewhere, not through a steal, not through the chaos mode; ULTs that
//! are not pinned, in the same runs, do move (so the checks can fail).

mod common;

use common::{hang_guard, Alternate};
use elite_rt::policy::Policy;
use elite_rt::sync::mpsc;
use elite_rt::{Builder, Runtime, SpawnError};
use std::thread::ThreadId;

/// The OS threads a ULT ran on, one entry per resumption.
type Trail = Vec<ThreadId>;

/// Pairs of ULTs play ping-pong over channels for `rounds` rounds (every receive blocks, and
/// the policy wakes the receiver elsewhere); each records its OS thread at every resumption.
/// Returns the trails of the pinned pairs and of the others.
fn ping_pong(rt: &Runtime, pairs: usize, rounds: usize) -> (Vec<Trail>, Vec<Trail>) {
    rt.block_on(|| {
        let mut handles = Vec::new();
        for pair in 0..2 * pairs {
            let pinned = pair % 2 == 0;
            let (to_b, from_a) = mpsc::channel::<usize>();
            let (to_a, from_b) = mpsc::channel::<usize>();
            for (first, tx, rx) in [(true, to_b, from_b), (false, to_a, from_a)] {
                let h = Builder::new()
                    .pinned(pinned)
                    .spawn(move || {
                        let mut trail = vec![std::thread::current().id()];
                        if first {
                            tx.send(0).unwrap();
                        }
                        for _ in 0..rounds {
                            let Ok(n) = rx.recv() else { break };
                            trail.push(std::thread::current().id());
                            elite_rt::yield_now();
                            trail.push(std::thread::current().id());
                            if tx.send(n + 1).is_err() {
                                break;
                            }
                        }
                        trail
                    })
                    .unwrap();
                handles.push((pinned, h));
            }
        }
        let (mut pinned, mut free) = (Vec::new(), Vec::new());
        for (p, h) in handles {
            let trail = h.join().unwrap();
            if p {
                pinned.push(trail)
            } else {
                free.push(trail)
            }
        }
        (pinned, free)
    })
}

fn moves(trail: &Trail) -> usize {
    trail.windows(2).filter(|w| w[0] != w[1]).count()
}

#[test]
fn a_pinned_ult_stays_on_its_thread_when_the_policy_moves_every_wakeup() {
    hang_guard(60, "pinned ping-pong under Alternate", || {
        let rt = Runtime::builder().processors(2).policy(Policy::new(Alternate)).build().unwrap();
        let (pinned, free) = ping_pong(&rt, 4, 100);
        for (i, t) in pinned.iter().enumerate() {
            assert_eq!(moves(t), 0, "pinned ULT {i} changed OS threads: {t:?}");
        }
        let moved: usize = free.iter().map(moves).sum();
        assert!(moved > 0, "the ULTs that are not pinned never moved: the policy did not move anything");
    });
}

#[test]
fn a_pinned_ult_stays_on_its_thread_under_the_chaos_mode() {
    hang_guard(60, "pinned ping-pong under chaos", || {
        let rt = Runtime::builder().processors(2).chaos(0x5EED).build().unwrap();
        let (pinned, free) = ping_pong(&rt, 4, 100);
        for (i, t) in pinned.iter().enumerate() {
            assert_eq!(moves(t), 0, "pinned ULT {i} changed OS threads under chaos: {t:?}");
        }
        let moved: usize = free.iter().map(moves).sum();
        assert!(moved > 0, "the chaos mode moved none of the ULTs that are not pinned");
    });
}

/// Pinned ULTs that yield in a loop on a busy processor, with an idle processor beside it that
/// steals what it can: they never run on the thief's thread.
#[test]
fn thieves_do_not_take_pinned_ults() {
    hang_guard(60, "pinned ULTs against a thief", || {
        let rt = Runtime::builder().processors(2).build().unwrap();
        let runs = rt.block_on(|| {
            let hs: Vec<_> = (0..32)
                .map(|_| {
                    Builder::new()
                        .pinned(true)
                        .spawn(|| {
                            let home = std::thread::current().id();
                            for _ in 0..200 {
                                elite_rt::yield_now();
                                assert_eq!(std::thread::current().id(), home, "a pinned ULT was stolen");
                            }
                            200
                        })
                        .unwrap()
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
        });
        assert_eq!(runs, 32 * 200);
    });
}

#[test]
fn a_pinned_ult_spawned_from_outside_stays_where_it_started() {
    hang_guard(60, "pinned ULT spawned from an OS thread", || {
        let rt = Runtime::builder().processors(2).policy(Policy::new(Alternate)).build().unwrap();
        let (tx, rx) = mpsc::channel::<u32>();
        let h = Builder::new()
            .pinned(true)
            .spawn_on(&rt, move || {
                let home = std::thread::current().id();
                let mut got = 0;
                while let Ok(n) = rx.recv() {
                    assert_eq!(std::thread::current().id(), home, "woken onto another thread");
                    got += n;
                }
                got
            })
            .unwrap();
        for i in 0..200 {
            tx.send(i).unwrap();
            if i % 16 == 0 {
                std::thread::yield_now();
            }
        }
        drop(tx);
        assert_eq!(h.join().unwrap(), (0..200).sum::<u32>());
    });
}

#[test]
fn a_central_runtime_refuses_pinned_ults() {
    let rt = Runtime::builder().processors(2).central(true).build().unwrap();
    let inside = rt.block_on(|| Builder::new().pinned(true).spawn(|| ()).map(|_| ()));
    assert!(matches!(inside, Err(SpawnError::Unsupported { .. })), "{inside:?}");
    let outside = Builder::new().pinned(true).spawn_on(&rt, || ()).map(|_| ());
    let Err(e) = outside else { panic!("a pinned spawn on a central runtime succeeded") };
    assert!(e.to_string().contains("central"), "{e}");
}
