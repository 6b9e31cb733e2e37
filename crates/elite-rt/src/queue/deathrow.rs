//! The deathrow: exited ULTs of one processor whose joiner has not yet let go of them.
//!
//! Written only by the owning processor: the exit path inserts, the clean-up path (a note from the
//! joiner, or a join on this same processor) removes and recycles. Joiners never touch it (ELiTE
//! section 2.2), which keeps the processor's lines in its own cache.
//!
//! Nothing ever walks the deathrow (a joiner names the TCB it let go of, and the shutdown walks the
//! TCB chunks), so membership is the TCB's own state (`Life::Exited` from the exit until the joiner
//! resets it, see `Tcb::reset`, or the owner recycles it) and the deathrow keeps only the count. An intrusive list served before; its insert and remove
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
        debug_assert_eq!(t.tcb().life.get(), Life::Exited);
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
