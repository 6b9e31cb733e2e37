//! The state word of [`Mutex`](super::Mutex): every transition of its `LOCKED`, `WAITERS` and
//! `HANDOFF` bits, apart from the wait list and the blocking that need the runtime, so that the
//! loom model (`loom_models::mutex`) runs this very code.
//!
//! # States and transitions
//!
//! * `LOCKED`: someone owns the lock.
//! * `WAITERS`: the wait list is not empty. Set and cleared only under the list's lock.
//! * `HANDOFF`: an unlock handed the lock to a blocked waiter that has not run yet (only with
//!   `LOCKED`). Spinners stop spinning when they see it: the new owner may need their processor.
//!
//! ```text
//! lock_fast          0 -> LOCKED                                          CAS, Acquire
//! try_lock           s -> s | LOCKED, if s has no LOCKED                  CAS loop, Acquire
//! lock_or_enqueue    under the list lock: free -> take it (as try_lock), else set WAITERS
//!                    (the caller then links its node before releasing the list lock)
//! unlock_fast        LOCKED -> 0                                          CAS, Release
//! release(last)      under the list lock, a waiter popped (or none):
//!                    clear LOCKED, and WAITERS if the list is empty now   RMW, Release
//! hand_over(last)    under the list lock, the popped waiter lost MAX_LOSSES races: LOCKED stays,
//!                    set HANDOFF, clear WAITERS if the list is empty now  RMW
//! accept_hand_over   the new owner, when it runs: clear HANDOFF           RMW, Acquire
//! clear_waiters      under the list lock, the list emptied otherwise (a waiter left)
//! ```
//!
//! # Why no wake-up is lost
//!
//! A waiter sets `WAITERS` (or finds it set) under the list lock and links its node before it
//! releases that lock; `WAITERS` is cleared only under the same lock, when the list is empty. The
//! unlock fast path succeeds only from exactly `LOCKED`, so while a waiter is linked every unlock
//! takes the slow path, which pops a waiter under the list lock and wakes it. A waiter that finds
//! the lock free under the list lock takes it instead of waiting, so an unlock that ran just before
//! cannot leave it waiting for nobody.
//!
//! # Why the data is published
//!
//! Every transition that takes the lock is an `Acquire` RMW, and every one that lets it go a
//! `Release` RMW, on this word; the owner of a handed-over lock reads the word with the `Acquire`
//! RMW of `accept_hand_over`, after the `hand_over` RMW that follows the last owner's critical
//! section in the list lock's order (and the runtime's wake-up adds its own `AcqRel`).

use crate::atomics::{AtomicU32, Ordering};

/// Someone owns the lock.
pub(crate) const LOCKED: u32 = 1;
/// The wait list is not empty.
pub(crate) const WAITERS: u32 = 2;
/// The lock was handed to a blocked waiter that has not run yet.
pub(crate) const HANDOFF: u32 = 4;

/// Races a woken waiter may lose to newcomers before the lock is handed to it directly.
pub const MAX_LOSSES: usize = 2;

/// The state word of a mutex.
pub(crate) struct LockWord {
    state: AtomicU32,
}

impl LockWord {
    /// An unlocked word.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> LockWord {
        LockWord { state: AtomicU32::new(0) }
    }

    /// An unlocked word (loom's atomics have no `const` constructor).
    #[cfg(loom)]
    pub(crate) fn new() -> LockWord {
        LockWord { state: AtomicU32::new(0) }
    }

    /// Takes a free lock nobody waits for, in one CAS.
    #[inline]
    pub(crate) fn lock_fast(&self) -> bool {
        self.state.compare_exchange_weak(0, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Takes the lock if it is free now, whatever else is set.
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & LOCKED != 0 {
                return false;
            }
            match self.state.compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    /// Whether the lock was handed to a waiter that has not run yet (spinners stop).
    #[inline]
    pub(crate) fn handing_over(&self) -> bool {
        self.state.load(Ordering::Relaxed) & HANDOFF != 0
    }

    /// Under the list lock: takes the lock if it is free (true), or makes sure `WAITERS` is set
    /// (false: the caller links its node before releasing the list lock, then blocks).
    #[inline]
    pub(crate) fn lock_or_enqueue(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let (new, order) = if s & LOCKED == 0 {
                (s | LOCKED, Ordering::Acquire)
            } else if s & WAITERS == 0 {
                (s | WAITERS, Ordering::Relaxed)
            } else {
                return false;
            };
            match self.state.compare_exchange_weak(s, new, order, Ordering::Relaxed) {
                Ok(_) => return s & LOCKED == 0,
                Err(now) => s = now,
            }
        }
    }

    /// Lets go of a lock nobody waits for, in one CAS; false: the slow path must run.
    #[inline]
    pub(crate) fn unlock_fast(&self) -> bool {
        self.state.compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed).is_ok()
    }

    /// Under the list lock, after popping a waiter (or finding none): lets go of the lock; `last`:
    /// the list is empty now.
    #[inline]
    pub(crate) fn release(&self, last: bool) {
        let clear = if last { LOCKED | WAITERS } else { LOCKED };
        self.state.fetch_and(!clear, Ordering::Release);
    }

    /// Under the list lock, after popping a waiter: hands the lock to it (LOCKED stays set);
    /// `last`: the list is empty now.
    #[inline]
    pub(crate) fn hand_over(&self, last: bool) {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let new = if last { (s & !WAITERS) | HANDOFF } else { s | HANDOFF };
            match self.state.compare_exchange_weak(s, new, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }

    /// The owner of a handed-over lock, when it runs: spinners may spin again.
    #[inline]
    pub(crate) fn accept_hand_over(&self) {
        self.state.fetch_and(!HANDOFF, Ordering::Acquire);
    }

    /// Under the list lock, when the list emptied without an unlock (a waiter left it).
    #[inline]
    pub(crate) fn clear_waiters(&self) {
        self.state.fetch_and(!WAITERS, Ordering::Relaxed);
    }

    /// Whether someone owns the lock (under the list lock, or a hint).
    #[inline]
    pub(crate) fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & LOCKED != 0
    }
}
