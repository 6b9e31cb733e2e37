//! Models of the mutex state word (`sync::lock_word`): mutual exclusion, no lost wake-up, and the
//! hand-over to a waiter that lost `max_losses` races.
//!
//! The state word's transitions are the runtime's own code; around them the model puts the glue of
//! `sync::Mutex` in miniature, step for step: the list lock is a loom `Mutex` over a queue of
//! waiters (the runtime's `SpinLock<WaitList>`), a waiter blocks by parking its loom thread until
//! its `woken` flag is set (the runtime blocks the ULT and resolves its wait word), and the spin
//! phase is a single `try_lock` that gives up on `HANDOFF`. The critical section increments a loom
//! `UnsafeCell`: two holders at once, or a holder that does not see the previous one's write, is a
//! race loom reports; a lost wake-up leaves a waiter parked for good, which loom reports as a
//! deadlock; a waiter woken without the lock after `max_losses` lost races fails an assertion.

use super::check;
use crate::atomics::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::lock_word::{LockWord, MAX_LOSSES};
use loom::cell::UnsafeCell;
use loom::sync::{Arc, Mutex};
use loom::thread::{self, Thread};
use std::collections::VecDeque;

/// One blocked waiter (the runtime's `WaitNode`, on the waiter's stack).
struct Waiter {
    /// Races this waiter lost before it linked this node (the node's `tag`).
    losses: usize,
    /// Set by the unlocker, under the list lock, when it hands the lock over (`HANDED_OVER`).
    handed: UnsafeCell<bool>,
    /// The wake-up: set after the unlocker is done with the node.
    woken: AtomicBool,
    thread: Thread,
}

/// The mutex of the model.
struct Model {
    word: LockWord,
    list: Mutex<VecDeque<Arc<Waiter>>>,
    /// The protected data: how many critical sections ran.
    data: UnsafeCell<usize>,
    /// Threads inside a critical section (must never exceed 1).
    holders: AtomicUsize,
    max_losses: usize,
}

impl Model {
    fn new(max_losses: usize) -> Arc<Model> {
        Arc::new(Model {
            word: LockWord::new(),
            list: Mutex::new(VecDeque::new()),
            data: UnsafeCell::new(0),
            holders: AtomicUsize::new(0),
            max_losses,
        })
    }

    /// `Mutex::lock` and `lock_contended`.
    fn lock(&self) {
        if self.word.lock_fast() {
            return;
        }
        let mut losses = 0;
        loop {
            // The spin phase, shrunk to one attempt.
            if !self.word.handing_over() && self.word.try_lock() {
                return;
            }
            // The block phase.
            let me = Arc::new(Waiter {
                losses,
                handed: UnsafeCell::new(false),
                woken: AtomicBool::new(false),
                thread: thread::current(),
            });
            {
                let mut list = self.list.lock().unwrap();
                if self.word.lock_or_enqueue() {
                    return;
                }
                if losses > 0 {
                    list.push_front(Arc::clone(&me));
                } else {
                    list.push_back(Arc::clone(&me));
                }
            }
            while !me.woken.load(Ordering::Acquire) {
                thread::park();
            }
            // SAFETY: a loom cell access; the unlocker wrote it before setting `woken` (Release).
            if me.handed.with(|h| unsafe { *h }) {
                self.word.accept_hand_over();
                return;
            }
            losses += 1;
            assert!(
                losses <= self.max_losses,
                "a waiter lost {losses} races: the lock should have been handed to it after {}",
                self.max_losses
            );
        }
    }

    /// `Mutex::unlock` and `unlock_slow`.
    fn unlock(&self) {
        if self.word.unlock_fast() {
            return;
        }
        let mut list = self.list.lock().unwrap();
        let Some(w) = list.pop_front() else {
            self.word.release(true);
            return;
        };
        let last = list.is_empty();
        if w.losses >= self.max_losses {
            // SAFETY: a loom cell access; the waiter reads it only after `woken`.
            w.handed.with_mut(|h| unsafe { *h = true });
            self.word.hand_over(last);
        } else {
            self.word.release(last);
        }
        w.woken.store(true, Ordering::Release);
        drop(list);
        w.thread.unpark();
    }

    /// One critical section: lock, check exclusion, increment the data, unlock.
    fn critical_section(&self) {
        self.lock();
        assert_eq!(self.holders.fetch_add(1, Ordering::Relaxed), 0, "two holders at once");
        // SAFETY: a loom cell access; loom reports one that races with another holder's.
        self.data.with_mut(|d| unsafe { *d += 1 });
        self.holders.fetch_sub(1, Ordering::Relaxed);
        self.unlock();
    }
}

/// `threads` threads (the main one among them) run `rounds` critical sections each; at the end
/// the data counts them all and the lock is free.
fn exclusion_and_no_lost_wakeup(threads: usize, rounds: usize, max_losses: usize) {
    let m = Model::new(max_losses);
    let others: Vec<_> = (1..threads)
        .map(|_| {
            let m = Arc::clone(&m);
            thread::spawn(move || (0..rounds).for_each(|_| m.critical_section()))
        })
        .collect();
    (0..rounds).for_each(|_| m.critical_section());
    others.into_iter().for_each(|h| h.join().unwrap());
    // SAFETY: a loom cell access after every other thread was joined.
    let n = m.data.with(|d| unsafe { *d });
    assert_eq!(n, threads * rounds, "critical sections lost");
    assert!(m.word.lock_fast(), "the lock is not free at the end");
}

#[test]
fn mutex_two_threads() {
    check("mutex_two_threads", || exclusion_and_no_lost_wakeup(2, 2, MAX_LOSSES));
}

#[test]
fn mutex_three_threads() {
    check("mutex_three_threads", || exclusion_and_no_lost_wakeup(3, 1, MAX_LOSSES));
}

/// Every slow unlock hands the lock over: the `HANDOFF` transitions under every interleaving.
#[test]
fn mutex_hand_over_at_once() {
    check("mutex_hand_over_at_once", || exclusion_and_no_lost_wakeup(3, 1, 0));
}

/// A waiter may lose one race, then gets the lock handed over (the assertion in `lock`).
#[test]
fn mutex_hand_over_after_a_loss() {
    check("mutex_hand_over_after_a_loss", || exclusion_and_no_lost_wakeup(2, 3, 1));
}
