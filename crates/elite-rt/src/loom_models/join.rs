//! Models of the join state word (`tcb::join_state`): an exit racing a join, a detach (the handle
//! dropped), and a joiner that registers as waiter and then gives up (a ULT of another runtime
//! unwound by its runtime's shutdown while it waits, whose handle is then dropped).
//!
//! The word's transitions are the runtime's own code; around them the model puts the TCB in
//! miniature, step for step with `Processor::publish` and `settle`, `JoinHandle::join`,
//! `thread::wait_for_exit`, `release_on` and `let_go`: the result and the waiter field are loom
//! `UnsafeCell`s (a read that does not happen after its write, or two parties at once, is a race
//! loom reports), a joiner blocks by parking its loom thread until it sees COMPLETE (a lost wake-up
//! is a deadlock loom reports), and recycling a TCB is `Tcb::reset`. Each execution asserts that
//! the ULT is recycled exactly once, that its result is either taken by a join or dropped unjoined,
//! exactly once, that a waiter is woken at most once, and that the waiter field is clear when the
//! TCB goes back to a pool.

use super::check;
use crate::atomics::{AtomicUsize, Ordering};
use crate::tcb::join_state::{JoinState, JoinWord};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread::{self, Thread};

/// The result the ULT returns.
const RESULT: u32 = 42;

/// Who waits in a join (`tcb::Waiter`).
enum Waiter {
    /// An OS thread: parks, and is unparked.
    Thread(Thread),
    /// A ULT: woken by a push on a wake-up stack (a `Release` RMW here), which it reads only
    /// when it runs again. (Not a loom unpark: loom orders an unpark before everything its target
    /// does next, parked or not, which would hide a race with a waiter that never parks.)
    Ult,
}

/// A TCB in miniature.
struct Ult {
    word: JoinWord,
    /// The task's outcome (`Task::out`), written by the exiting ULT before COMPLETE.
    result: UnsafeCell<Option<u32>>,
    /// The join waiter (`Tcb::waiter`), written by a joiner before WAITER.
    waiter: UnsafeCell<Option<Waiter>>,
    /// Times the TCB was reset for its next use.
    recycled: AtomicUsize,
    /// Results a join took.
    taken: AtomicUsize,
    /// Results dropped unjoined.
    dropped: AtomicUsize,
    /// Wake-ups delivered to a registered waiter.
    woken: AtomicUsize,
    /// The wake-up stack of a waiting ULT (how often it was pushed there).
    wakeup_stack: AtomicUsize,
}

impl Ult {
    fn new() -> Arc<Ult> {
        Arc::new(Ult {
            word: JoinWord::new(),
            result: UnsafeCell::new(None),
            waiter: UnsafeCell::new(None),
            recycled: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
            woken: AtomicUsize::new(0),
            wakeup_stack: AtomicUsize::new(0),
        })
    }

    /// `Tcb::reset`, by whoever ends the TCB's use. It does not read the waiter field: a joiner
    /// that gave up may reset the TCB while the exit's `settle` still takes its registration
    /// (this model found the race when `reset` checked the field; the check is now made when the
    /// TCB reaches a pool, after `settle`: `assert_once` here).
    fn recycle(&self) {
        self.word.reset();
        self.recycled.fetch_add(1, Ordering::Relaxed);
    }

    /// `Tcb::drop_task` on an outcome nobody took.
    fn drop_result(&self) {
        // SAFETY: a loom cell access; loom reports one that does not happen after the exit's write.
        let r = self.result.with_mut(|r| unsafe { (*r).take() });
        assert_eq!(r, Some(RESULT), "an unjoined result dropped before it was stored, or twice");
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// The join's `take_output`.
    fn take_result(&self) {
        // SAFETY: a loom cell access, as above.
        let r = self.result.with_mut(|r| unsafe { (*r).take() });
        assert_eq!(r, Some(RESULT), "a join read no result, or a result twice");
        self.taken.fetch_add(1, Ordering::Relaxed);
    }

    /// The exit: the ULT's `publish` (store the result, set COMPLETE, drop a detached result),
    /// then the loop's `settle` (recycle a detached TCB, else the deathrow; wake a waiter).
    fn exit(&self) {
        // SAFETY: a loom cell access; the ULT writes its outcome before publishing it.
        self.result.with_mut(|r| unsafe { *r = Some(RESULT) });
        let prev = self.word.publish_complete();
        if prev & JoinState::DETACHED != 0 {
            self.drop_result();
        }
        // settle, after the last switch:
        let waiter = if prev & JoinState::WAITER != 0 {
            // SAFETY: a loom cell access; the joiner wrote it before its WAITER RMW, which the
            // exit's RMW saw.
            self.waiter.with_mut(|w| unsafe { (*w).take() })
        } else {
            None
        };
        if prev & JoinState::DETACHED != 0 {
            self.recycle();
        }
        if let Some(w) = waiter {
            self.woken.fetch_add(1, Ordering::Relaxed);
            match w {
                Waiter::Thread(th) => th.unpark(),
                Waiter::Ult => {
                    self.wakeup_stack.fetch_add(1, Ordering::Release);
                }
            }
        }
    }

    /// Registers `me` as the waiter (`wait_for_exit`); true if it must block.
    fn register(&self, me: Waiter) -> bool {
        // SAFETY: a loom cell access; only this joiner writes the field before WAITER is set.
        self.waiter.with_mut(|w| unsafe { *w = Some(me) });
        let prev = self.word.register_waiter();
        if prev & JoinState::COMPLETE != 0 {
            // The exit did not see WAITER: the field is still ours; a free TCB's is clear.
            // SAFETY: as above.
            self.waiter.with_mut(|w| unsafe { *w = None });
            return false;
        }
        true
    }

    /// `JoinHandle::join`: take the result and let go of the TCB (no DETACHED RMW).
    fn join(&self) {
        if !self.word.is_complete() && self.register(Waiter::Thread(thread::current())) {
            while !self.word.is_complete() {
                thread::park();
            }
        }
        self.take_result();
        self.recycle();
    }

    /// `JoinHandle`'s drop: `release_on` and `let_go`.
    fn detach(&self) {
        let prev = self.word.detach();
        if prev & JoinState::COMPLETE != 0 {
            self.drop_result();
            self.recycle();
        }
    }

    /// A joiner that registers and, if it had to block, is unwound before being woken (its own
    /// runtime shut down): its handle is then dropped.
    fn join_then_give_up(&self) {
        if self.word.is_complete() || !self.register(Waiter::Ult) {
            self.take_result();
            self.recycle();
            return;
        }
        self.detach();
    }

    /// What every execution must end with.
    fn assert_once(&self, joined: bool) {
        assert_eq!(self.recycled.load(Ordering::Relaxed), 1, "the TCB was not recycled exactly once");
        let (taken, dropped) = (self.taken.load(Ordering::Relaxed), self.dropped.load(Ordering::Relaxed));
        assert_eq!(taken + dropped, 1, "the result was taken {taken} and dropped {dropped} times");
        if joined {
            assert_eq!(taken, 1, "a join did not get the result");
        }
        assert!(self.woken.load(Ordering::Relaxed) <= 1, "a waiter was woken twice");
        // SAFETY: a loom cell access after both parties were joined (the pool's side).
        self.waiter.with(|w| assert!(unsafe { (*w).is_none() }, "a pooled TCB still names a waiter"));
    }
}

/// The exit on one thread, `other` on another. (Neither is the main thread, whose join of them
/// would trip over the exit's stray unpark of a waiter that gave up: loom's join parks too.)
fn race(other: fn(&Ult), joined: bool) {
    let u = Ult::new();
    let handles = [Ult::exit, other].map(|f| {
        let u = Arc::clone(&u);
        thread::spawn(move || f(&u))
    });
    for h in handles {
        h.join().unwrap();
    }
    u.assert_once(joined);
}

/// A join (fast check, registration, blocking) against the exit.
#[test]
fn join_state_exit_against_join() {
    check("join_state_exit_against_join", || race(Ult::join, true));
}

/// A dropped handle against the exit: exactly one of them drops the result and recycles.
#[test]
fn join_state_exit_against_detach() {
    check("join_state_exit_against_detach", || race(Ult::detach, false));
}

/// A waiter that gives up (registered, then its handle dropped) against the exit.
#[test]
fn join_state_exit_against_a_waiter_that_gives_up() {
    check("join_state_exit_against_a_waiter_that_gives_up", || race(Ult::join_then_give_up, false));
}
