//! The deathrow: exited ULTs of one processor whose joiner has not yet let go of them.
//!
//! Written only by the owning processor: the exit path inserts, the clean-up path (a note from the
//! joiner, or a join on this same processor) removes and recycles. Joiners never touch it (ELiTE
//! section 2.2), which keeps the processor's lines in its own cache.
//!
//! Nothing ever walks the deathrow (a joiner names the TCB it let go of, and the shutdown walks the
//! TCB chunks), so the deathrow keeps only the count: a TCB is on it from its exit's `settle` until
//! its clean-up note (or a join on this processor) takes it off. Its `life` says `Exited` from the
//! exit's publication until the joiner resets it (`Tcb::reset`), which may come first. An intrusive list served before; its insert and remove
//! wrote the neighbours' links, one or two more TCB lines (and, in a bulk join, cache misses) per
//! exit.

use crate::tcb::{Life, TcbRef};

pub(crate) struct Deathrow {
    len: usize,
}

impl Deathrow {
    pub(crate) fn new() -> Deathrow {
        Deathrow { len: 0 }
    }

    /// Puts an exited ULT on the deathrow.
    #[inline]
    pub(crate) fn insert(&mut self, t: TcbRef) {
        // Exited, or already reset by a joiner that saw COMPLETE before this insert.
        debug_assert!(matches!(t.tcb().life.get(), Life::Exited | Life::Free));
        self.len += 1;
    }

    /// Takes a joined ULT off the deathrow (its joiner reset it already; its lines are not read).
    #[inline]
    pub(crate) fn remove(&mut self, t: TcbRef) {
        let _ = t;
        self.len -= 1;
    }

    /// Exited ULTs waiting for their joiner.
    #[allow(dead_code)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}
