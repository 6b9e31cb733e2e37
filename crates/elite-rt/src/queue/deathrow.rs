//! The deathrow: exited ULTs of one processor whose joiner has not yet let go of them.
//!
//! An intrusive doubly linked list through `Tcb::deathrow_prev/next`, written only by the owning
//! processor: the exit path inserts, the clean-up path (a note from the joiner, or a join on this same
//! processor) removes and recycles. Joiners never touch it (ELiTE section 2.2), which keeps the
//! processor's lines in its own cache.

use crate::tcb::{Tcb, TcbRef};
use std::ptr;

pub(crate) struct Deathrow {
    head: *mut Tcb,
    len: usize,
}

impl Deathrow {
    pub(crate) fn new() -> Deathrow {
        Deathrow { head: ptr::null_mut(), len: 0 }
    }

    /// Puts an exited ULT on the deathrow.
    #[inline]
    pub(crate) fn insert(&mut self, t: TcbRef) {
        let tcb = t.tcb();
        tcb.deathrow_prev.set(ptr::null_mut());
        tcb.deathrow_next.set(self.head);
        if let Some(old) = TcbRef::from_ptr(self.head) {
            old.tcb().deathrow_prev.set(t.as_ptr());
        }
        self.head = t.as_ptr();
        self.len += 1;
    }

    /// Takes a joined ULT off the deathrow.
    #[inline]
    pub(crate) fn remove(&mut self, t: TcbRef) {
        let tcb = t.tcb();
        let (prev, next) = (tcb.deathrow_prev.get(), tcb.deathrow_next.get());
        match TcbRef::from_ptr(prev) {
            Some(p) => p.tcb().deathrow_next.set(next),
            None => self.head = next,
        }
        if let Some(n) = TcbRef::from_ptr(next) {
            n.tcb().deathrow_prev.set(prev);
        }
        tcb.deathrow_prev.set(ptr::null_mut());
        tcb.deathrow_next.set(ptr::null_mut());
        self.len -= 1;
    }
}
