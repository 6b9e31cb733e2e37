//! Models of the mutex state word (`sync::lock_word`): mutual exclusion, no lost wake-up, the
//! hand-over to a waiter that lost `max_losses` races, and the bias: the owner's plain-store path
//! against revokers (another processor, an OS thread, a holder that moved), and the biasing itself.
//!
//! Every thread of a model names the processor it runs as (`me`: an even number, or 0 for an OS
//! thread), as the runtime's callers do with their processor's address; two threads never run as
//! one processor at once. A holder that moves to another processor is a lock on one thread and an
//! unlock on another, the guard passed between them through a flag (the runtime's switch and
//! resumption elsewhere synchronize the same way). The light and heavy barriers are `SeqCst`
//! fences, which loom models exactly.
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
    /// A model of the unbiased protocol (its word is never biased).
    fn new(max_losses: usize) -> Arc<Model> {
        Model::with_word(LockWord::new(), max_losses)
    }

    fn with_word(word: LockWord, max_losses: usize) -> Arc<Model> {
        Arc::new(Model {
            word,
            list: Mutex::new(VecDeque::new()),
            data: UnsafeCell::new(0),
            holders: AtomicUsize::new(0),
            max_losses,
        })
    }

    /// `Mutex::lock` and `lock_contended`, from processor `me`.
    fn lock(&self, me: usize) {
        if self.word.lock_fast(me, || {}) {
            return;
        }
        let mut losses = 0;
        loop {
            // The spin phase, shrunk to one attempt.
            if !self.word.handing_over() && self.word.try_lock(me) {
                return;
            }
            // The block phase.
            let waiter = Arc::new(Waiter {
                losses,
                handed: UnsafeCell::new(false),
                woken: AtomicBool::new(false),
                thread: thread::current(),
            });
            {
                let mut list = self.list.lock().unwrap();
                if self.word.lock_or_enqueue(me) {
                    return;
                }
                if losses > 0 {
                    list.push_front(Arc::clone(&waiter));
                } else {
                    list.push_back(Arc::clone(&waiter));
                }
            }
            while !waiter.woken.load(Ordering::Acquire) {
                thread::park();
            }
            // SAFETY: a loom cell access; the unlocker wrote it before setting `woken` (Release).
            if waiter.handed.with(|h| unsafe { *h }) {
                self.word.accept_hand_over(me);
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

    /// `Mutex::unlock` and `unlock_slow`, from processor `me`.
    fn unlock(&self, me: usize) {
        if self.word.unlock_fast(me) {
            return;
        }
        let mut list = self.list.lock().unwrap();
        let Some(w) = list.pop_front() else {
            self.word.release(me, true);
            return;
        };
        let last = list.is_empty();
        if w.losses >= self.max_losses {
            // SAFETY: a loom cell access; the waiter reads it only after `woken`.
            w.handed.with_mut(|h| unsafe { *h = true });
            self.word.hand_over(me, last);
        } else {
            self.word.release(me, last);
        }
        w.woken.store(true, Ordering::Release);
        drop(list);
        w.thread.unpark();
    }

    /// The first half of a critical section, from processor `me`: lock, check exclusion,
    /// increment the data.
    fn enter(&self, me: usize) {
        self.lock(me);
        assert_eq!(self.holders.fetch_add(1, Ordering::Relaxed), 0, "two holders at once");
        // SAFETY: a loom cell access; loom reports one that races with another holder's.
        self.data.with_mut(|d| unsafe { *d += 1 });
    }

    /// The second half, from processor `me` (not necessarily the one that entered).
    fn leave(&self, me: usize) {
        self.holders.fetch_sub(1, Ordering::Relaxed);
        self.unlock(me);
    }

    /// One critical section from processor `me`.
    fn critical_section(&self, me: usize) {
        self.enter(me);
        self.leave(me);
    }

    fn total(&self) -> usize {
        // SAFETY: a loom cell access after every other thread of the model was joined.
        self.data.with(|d| unsafe { *d })
    }
}

/// `threads` threads (the main one among them, as processor 2; the others as processors 4, 6)
/// run `rounds` critical sections each; at the end the data counts them all and the lock is free.
fn exclusion_and_no_lost_wakeup(threads: usize, rounds: usize, max_losses: usize) {
    let m = Model::new(max_losses);
    let others: Vec<_> = (1..threads)
        .map(|i| {
            let m = Arc::clone(&m);
            thread::spawn(move || (0..rounds).for_each(|_| m.critical_section(2 + 2 * i)))
        })
        .collect();
    (0..rounds).for_each(|_| m.critical_section(2));
    others.into_iter().for_each(|h| h.join().unwrap());
    assert_eq!(m.total(), threads * rounds, "critical sections lost");
    assert!(m.word.is_free(), "the lock is not free at the end");
}

/// The word starts biased to processor 2, which takes `owner_rounds` sections through the
/// owner's path while a spawned thread as `other` (another processor, or 0: an OS thread) takes
/// one, revoking the bias (before, during or after a section of the owner's).
fn owner_against(other: usize, owner_rounds: usize) {
    let m = Model::with_word(LockWord::with_bias(2, 0), MAX_LOSSES);
    let t = {
        let m = Arc::clone(&m);
        thread::spawn(move || m.critical_section(other))
    };
    (0..owner_rounds).for_each(|_| m.critical_section(2));
    t.join().unwrap();
    assert_eq!(m.total(), owner_rounds + 1, "critical sections lost");
    assert!(m.word.is_free(), "the lock is not free at the end");
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

/// The owner's plain-store path against another processor's revocation (the revoker may find
/// the lock held by the owner and wait for it, or revoke between the owner's sections).
#[test]
fn mutex_bias_owner_against_a_processor() {
    check("mutex_bias_owner_against_a_processor", || owner_against(4, 2));
}

/// The owner against an OS thread (no processor: it always revokes).
#[test]
fn mutex_bias_owner_against_an_os_thread() {
    check("mutex_bias_owner_against_an_os_thread", || owner_against(0, 1));
}

/// A holder that locked through the owner's path on processor 2 moves to processor 4 (the guard
/// passed to another thread) and unlocks there, revoking, while processor 2 goes on taking the
/// lock through the owner's path (waiting for the moved holder).
#[test]
fn mutex_bias_holder_moves() {
    check("mutex_bias_holder_moves", || {
        let m = Model::with_word(LockWord::with_bias(2, 0), MAX_LOSSES);
        let moved = Arc::new(AtomicBool::new(false));
        let t = {
            let (m, moved) = (Arc::clone(&m), Arc::clone(&moved));
            thread::spawn(move || {
                // Processor 4 resumes the holder once processor 2 switched it out.
                while !moved.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                m.leave(4);
            })
        };
        m.enter(2);
        moved.store(true, Ordering::Release);
        m.critical_section(2);
        t.join().unwrap();
        assert_eq!(m.total(), 2, "critical sections lost");
        assert!(m.word.is_free(), "the lock is not free at the end");
    });
}

/// Unbiased at first: processor 2 biases the word at its second acquisition in a row (the
/// threshold of the models) and unlocks it through the owner's path, while processor 4 takes
/// the lock once (before, between or after, revoking whatever bias it finds).
#[test]
fn mutex_bias_biasing_against_a_processor() {
    check("mutex_bias_biasing_against_a_processor", || {
        let m = Model::with_word(LockWord::with_bias(0, 0), MAX_LOSSES);
        let t = {
            let m = Arc::clone(&m);
            thread::spawn(move || m.critical_section(4))
        };
        (0..2).for_each(|_| m.critical_section(2));
        t.join().unwrap();
        assert_eq!(m.total(), 3, "critical sections lost");
        assert!(m.word.is_free(), "the lock is not free at the end");
    });
}

/// A word revoked from processor 2 and about to be biased by processor 4's next acquisition
/// (which `bias_to` refuses: only the first owner is biased again), against processor 2's stale
/// section (its thread passed the check `owner == 2` before the revocation and enters only now)
/// and an OS thread's section. Were 4 biased, 2's section would clear `inside` while 4 is inside
/// and the OS thread's revocation would clear `BIASED` under 4's store (`sync::lock_word`, "Why
/// a word is biased to one processor only").
#[test]
fn mutex_bias_a_former_owner_is_stale() {
    check("mutex_bias_a_former_owner_is_stale", || {
        let m = Model::with_word(LockWord::revoked_from(2, 4), MAX_LOSSES);
        let stale = {
            let m = Arc::clone(&m);
            thread::spawn(move || m.word.stale_section(2))
        };
        let os = {
            let m = Arc::clone(&m);
            thread::spawn(move || m.critical_section(0))
        };
        (0..2).for_each(|_| m.critical_section(4));
        stale.join().unwrap();
        os.join().unwrap();
        assert_eq!(m.total(), 3, "critical sections lost");
        assert!(m.word.is_free(), "the lock is not free at the end");
    });
}
