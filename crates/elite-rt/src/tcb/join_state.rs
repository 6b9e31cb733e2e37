//! The join state word of a TCB: every transition of its `COMPLETE`, `WAITER` and `DETACHED` bits,
//! apart from what needs the runtime (the result, the waiter, recycling), so that the loom model
//! (`loom_models::join`) runs this very code. Who does what around the word is the join protocol
//! in the `tcb` module docs.
//!
//! # States and transitions
//!
//! The word starts at 0 for every spawn (a free TCB's word is 0: [`JoinWord::reset`]). Each bit
//! is set once, by one party, with an `AcqRel` read-modify-write that returns the word before it:
//!
//! ```text
//! publish_complete   the exiting ULT, after storing its result:        | COMPLETE  (AcqRel RMW)
//! register_waiter    a joiner that found no COMPLETE, after writing
//!                    the waiter field:                                  | WAITER    (AcqRel RMW)
//! detach             the handle, when dropped without a join:           | DETACHED  (AcqRel RMW)
//! is_complete        a joiner's check                                   load, Acquire
//! reset              whoever ends the TCB's use (nobody else reads it): store 0, Relaxed
//! ```
//!
//! # Why exactly one party recycles and the waiter is woken once
//!
//! The exiter and the handle side each set their bit with one RMW, so in the word's modification
//! order one of them comes second and sees the other's bit, with everything written before it
//! (`AcqRel`): whoever sees COMPLETE (the handle's `detach`, a joiner's `register_waiter` or its
//! `Acquire` load) owns the result and the TCB; the exiter that sees DETACHED owns them instead.
//! The exiter's RMW is its last access to the word, so the owner may reset the word with a plain
//! store. A joiner's WAITER is seen by the exiter (which then wakes it) exactly when the joiner's
//! RMW came first; otherwise the joiner sees COMPLETE in what its own RMW returns and does not
//! block. The loom model asserts both facts under every interleaving of an exit with a join, a
//! detach, and a joiner that registers and then gives up.

use crate::atomics::{AtomicUsize, Ordering};

/// Bits of the join state word.
pub(crate) struct JoinState;
impl JoinState {
    /// The ULT's result (or its failure) is stored and visible.
    pub(crate) const COMPLETE: usize = 1;
    /// A joiner registered in the TCB's waiter field and waits to be woken.
    pub(crate) const WAITER: usize = 2;
    /// The handle was dropped: nobody will read the result.
    pub(crate) const DETACHED: usize = 4;
}

/// The join state word of a TCB.
#[repr(transparent)]
pub(crate) struct JoinWord(AtomicUsize);

impl JoinWord {
    /// A word with no bit set (a free TCB's).
    #[cfg(not(loom))]
    pub(crate) const fn new() -> JoinWord {
        JoinWord(AtomicUsize::new(0))
    }

    /// A word with no bit set (loom's atomics have no `const` constructor).
    #[cfg(loom)]
    pub(crate) fn new() -> JoinWord {
        JoinWord(AtomicUsize::new(0))
    }

    /// The exit's publication: sets COMPLETE after the result was stored; returns the word before.
    /// The exiter's last access to the word.
    #[inline]
    pub(crate) fn publish_complete(&self) -> usize {
        self.0.fetch_or(JoinState::COMPLETE, Ordering::AcqRel)
    }

    /// Whether COMPLETE is set; with `Acquire`, so that a true answer makes the result visible.
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        self.0.load(Ordering::Acquire) & JoinState::COMPLETE != 0
    }

    /// A joiner's registration: sets WAITER after the waiter field was written; returns the word
    /// before (with COMPLETE in it the exiter did not see WAITER: the joiner must not block).
    #[inline]
    pub(crate) fn register_waiter(&self) -> usize {
        self.0.fetch_or(JoinState::WAITER, Ordering::AcqRel)
    }

    /// The handle's release without a join: sets DETACHED; returns the word before (with COMPLETE
    /// in it the handle owns the result and the TCB, otherwise the exiter does).
    #[inline]
    pub(crate) fn detach(&self) -> usize {
        self.0.fetch_or(JoinState::DETACHED, Ordering::AcqRel)
    }

    /// Clears the word for the TCB's next spawn. Only the party that ended the TCB's use calls
    /// this, when nobody else accesses the word any more.
    #[inline]
    pub(crate) fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}
