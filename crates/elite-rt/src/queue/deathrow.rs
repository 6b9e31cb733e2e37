//! The deathrow of a processor: the ULTs that exited on it and whose joiner has not let go of them
//! yet.
//!
//! The exit path puts an exited ULT on it ([`DeathrowCount::enter`], from the exit's `settle`); the
//! clean-up path takes it off ([`DeathrowCount::leave`]): a clean-up note from a joiner on another
//! processor (`queue::cleanup`), or a join on this same processor. Only the owning processor
//! touches its deathrow; joiners never do (ELiTE section 2.2), which keeps it in that processor's
//! cache.
//!
//! # A count, not a list
//!
//! Nothing walks the deathrow: a joiner names the TCB it let go of, and the shutdown walks the TCB
//! chunks. So whether a ULT is on it is the TCB's own state (its `life` says `Exited` from the
//! exit's publication until the joiner resets it, `Tcb::reset`, which may come before `enter`),
//! and the deathrow links nothing: a list's insert and remove would write the neighbours' links,
//! one or two more TCB lines per exit (and in a bulk join, cache misses). What is left to keep is
//! how many ULTs are on it: an add and a subtract on the processor's own line. Debug builds check
//! with it that nothing leaves that did not enter (a clean-up note sent twice, say), and tests read
//! it ([`DeathrowCount::len`]).

use crate::tcb::{Life, TcbRef};

/// The deathrow of one processor, kept as the count of ULTs on it (see the module docs).
pub(crate) struct DeathrowCount {
    /// Exited ULTs on this deathrow: entered and not yet left.
    len: usize,
}

impl DeathrowCount {
    pub(crate) fn new() -> DeathrowCount {
        DeathrowCount { len: 0 }
    }

    /// An exited ULT goes on the deathrow.
    #[inline]
    pub(crate) fn enter(&mut self, t: TcbRef) {
        // Exited, or already reset by a joiner that saw COMPLETE before this call.
        debug_assert!(matches!(t.tcb().head.life.get(), Life::Exited | Life::Free));
        self.len += 1;
    }

    /// A joined ULT leaves the deathrow (its joiner reset it already: no line of it is read).
    #[inline]
    pub(crate) fn leave(&mut self) {
        debug_assert!(self.len > 0, "a ULT left a deathrow it was not on");
        self.len -= 1;
    }

    /// Exited ULTs on the deathrow.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::tcbs;

    /// The deathrow is a count (nothing walks it: see `queue::deathrow`): it counts exits in and
    /// clean-ups out.
    #[test]
    fn counts_exits_in_and_cleanups_out() {
        let (_chunks, t) = tcbs(6);
        for x in &t {
            x.tcb().head.life.set(Life::Exited);
        }
        let mut d = DeathrowCount::new();
        for &x in &t {
            d.enter(x);
        }
        assert_eq!(d.len(), 6);
        for _ in 0..3 {
            d.leave();
        }
        assert_eq!(d.len(), 3);
        d.enter(t[5]);
        assert_eq!(d.len(), 4);
        for _ in 0..4 {
            d.leave();
        }
        assert_eq!(d.len(), 0);
    }

    /// In a debug build, a clean-up of a ULT that is on no deathrow is caught.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "a ULT left a deathrow it was not on")]
    fn catches_a_leave_without_an_enter() {
        let (_chunks, t) = tcbs(1);
        t[0].tcb().head.life.set(Life::Exited);
        let mut d = DeathrowCount::new();
        d.enter(t[0]);
        d.leave();
        d.leave();
    }
}
