//! A ready ULT is never left waiting behind a running one while another processor idles: a ULT
//! that runs on without a switch after making another ready (std's `test_recv_try_iter` has that
//! shape: a loop of `try_iter` and `send`s, neither a switch point) used to keep it in its
//! processor's `next` slot, or on its wake-up stack, for as long as it ran, with the other
//! processor parked: a hang. An idle processor now takes such a ULT (`processor::find`,
//! "Stranded ULTs").

mod common;

use common::hang_guard;
use elite_rt::sync::mpsc;
use elite_rt::{Builder, Runtime};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Two processors; no chaos mode, whose random wake-up targets would decide some rounds for it.
fn two_processors() -> Runtime {
    Runtime::builder().processors(2).no_chaos().build().expect("build runtime")
}

/// ULTs rescued from where they were stranded, on every processor.
fn rescued(rt: &Runtime) -> u64 {
    rt.stats().processors.iter().map(|p| p.rescued).sum()
}

/// The root ULT waits in `recv`; a ULT on its processor sends (the root goes to that processor's
/// `next` slot: a hand-off keeps the woken ULT with its waker) and then spins, without a switch,
/// until the root has run. The other processor must take the root from the slot.
#[test]
fn a_ult_woken_into_a_busy_processors_next_slot_runs_elsewhere() {
    for round in 0..5 {
        hang_guard(30, "the woken root runs while its waker spins", move || {
            let rt = two_processors();
            rt.block_on(|| {
                let (tx, rx) = mpsc::channel();
                let ran = Arc::new(AtomicBool::new(false));
                let spinner = {
                    let ran = ran.clone();
                    // Pinned: it starts on the root's processor, where the root last ran.
                    Builder::new()
                        .pinned(true)
                        .spawn(move || {
                            tx.send(round).unwrap();
                            while !ran.load(Ordering::Acquire) {
                                std::hint::spin_loop(); // no switch point
                            }
                        })
                        .unwrap()
                };
                assert_eq!(rx.recv().unwrap(), round);
                ran.store(true, Ordering::Release);
                spinner.join().unwrap();
            });
            assert!(rescued(&rt) >= 1, "the root was taken from the slot: {}", rt.stats());
        });
    }
}

/// The root ULT waits in `recv` and a thread outside the runtime sends: the root goes onto the
/// wake-up stack of the processor it last ran on, where a ULT spins without a switch until the
/// root has run. The other processor must take it from that stack.
#[test]
fn a_ult_woken_onto_a_busy_processors_wakeup_stack_runs_elsewhere() {
    for round in 0..5 {
        hang_guard(30, "the woken root runs while its home spins", move || {
            let rt = two_processors();
            rt.block_on(|| {
                let (tx, rx) = mpsc::channel();
                let ran = Arc::new(AtomicBool::new(false));
                let spinning = Arc::new(AtomicBool::new(false));
                let spinner = {
                    let (ran, spinning) = (ran.clone(), spinning.clone());
                    Builder::new()
                        .pinned(true)
                        .spawn(move || {
                            spinning.store(true, Ordering::Release);
                            while !ran.load(Ordering::Acquire) {
                                std::hint::spin_loop(); // no switch point
                            }
                        })
                        .unwrap()
                };
                let sender = std::thread::spawn(move || {
                    while !spinning.load(Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                    tx.send(round).unwrap();
                });
                assert_eq!(rx.recv().unwrap(), round);
                ran.store(true, Ordering::Release);
                spinner.join().unwrap();
                sender.join().unwrap();
            });
            assert!(rescued(&rt) >= 1, "the root was taken from the wake-up stack: {}", rt.stats());
        });
    }
}
