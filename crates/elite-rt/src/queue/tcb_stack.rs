//! A lock-free stack of TCBs: any thread pushes, only the owning processor drains.
//!
//! This is the shape of both the **wake-up stack** (whoever unblocks a ULT pushes it onto the stack of
//! the processor the policy picks) and the **clean-up stack** (a joiner pushes the joined TCB onto the
//! stack of the processor whose deathrow holds it). ELiTE (section 2.2) chose stacks because a push
//! touches a single cache line of the owner.
//!
//! # Protocol
//!
//! * `push(t)`: `t.next = head` then `compare_exchange(head, t)` with `Release` on success, retrying
//!   with the freshly read head. The `Release` publishes everything the pusher wrote before (the TCB's
//!   fields, the reason it was woken).
//! * `drain()`: `swap(head, null)` with `Acquire` takes the whole list at once; the owner then walks
//!   it privately. Because the owner never pops single entries, there is no ABA: a TCB can reappear on
//!   the stack only after the drain that took it.
//! * `push_chain(first, last)` publishes a privately linked chain the same way, with one CAS: a
//!   joiner batches its clean-up notes per exiting processor so bulk joins do not bounce the
//!   owner's head line once per ULT.

use crate::atomics::{AtomicPtr, Ordering};
use crate::tcb::{Tcb, TcbRef};
use std::ptr;

/// A Treiber stack of TCBs linked through `Tcb::next`.
pub(crate) struct TcbStack {
    head: AtomicPtr<Tcb>,
}

impl TcbStack {
    pub(crate) const fn new() -> TcbStack {
        TcbStack { head: AtomicPtr::new(ptr::null_mut()) }
    }

    /// Pushes `t`. Any thread may push.
    #[inline]
    pub(crate) fn push(&self, t: TcbRef) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            t.tcb().next.store(head, Ordering::Relaxed);
            match self.head.compare_exchange_weak(head, t.as_ptr(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Pushes a chain `first -> ... -> last` (linked through `Tcb::next`) with one CAS.
    #[inline]
    pub(crate) fn push_chain(&self, first: TcbRef, last: TcbRef) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            last.tcb().next.store(head, Ordering::Relaxed);
            match self.head.compare_exchange_weak(head, first.as_ptr(), Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// True if nothing is on the stack (a hint: a push may land right after).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed).is_null()
    }

    /// Takes every entry, newest first. Only the owner calls this.
    #[inline]
    pub(crate) fn drain(&self) -> Drain {
        if self.is_empty() {
            return Drain { next: ptr::null_mut() };
        }
        Drain { next: self.head.swap(ptr::null_mut(), Ordering::Acquire) }
    }
}

/// The entries taken by one [`TcbStack::drain`].
pub(crate) struct Drain {
    next: *mut Tcb,
}

impl Iterator for Drain {
    type Item = TcbRef;

    #[inline]
    fn next(&mut self) -> Option<TcbRef> {
        let t = TcbRef::from_ptr(self.next)?;
        // Read the link before the caller reuses the TCB (it may push it elsewhere at once).
        self.next = t.tcb().next.load(Ordering::Relaxed);
        Some(t)
    }
}
