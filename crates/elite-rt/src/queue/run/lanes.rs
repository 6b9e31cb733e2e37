//! The lanes of a runqueue: sorted lists beside its tree, and the zero lane's ring.
//!
//! A [`Lane`] (the top and the bottom lane) is linked through its entries' [`RunLink`]s, with
//! both ends at hand; the [`Tree`](super::treap::Tree) decides which entries go on it and where.
//! The [`ZeroLane`] holds the entries of key 0 in arrival order, in a ring of pointers rather than
//! a list.
//!
//! [`RunLink`]: super::RunLink

use super::batch::BATCH;
use super::link;
use crate::tcb::TcbRef;

/// The zero lane: a ring of pointers to the entries of key 0 (all equal: arrival order alone),
/// oldest at the front, not a list through their [`RunLink`]s. A round-robin of yields takes
/// the lane's oldest entries, and a list would hand them out one dependent load at a time, each
/// the link of a control block untouched since that ULT's last yield (with `n` ULTs taking
/// turns, `n - 1` yields ago): with the yield batch, a cache miss per entry in a row, under the
/// lock. The ring hands out a batch of pointers from one or two lines, and a yield touches no
/// link of any control block. It grows under the lock when full (by doubling, so rarely: its
/// capacity settles at the most entries the lane held) and never shrinks. (Not a `VecDeque`: a
/// power-of-two mask is less index arithmetic than its general one.)
///
/// [`RunLink`]: super::RunLink
pub(super) struct ZeroLane {
    /// The ring; its length is a power of two (or 0), and `slots[(head + i) & mask]` holds the
    /// `i`-th oldest entry for `i < len` (the other slots hold nothing or stale copies).
    pub(super) slots: Vec<Option<TcbRef>>,
    /// The slot of the oldest entry.
    head: usize,
    /// Entries in the lane.
    pub(super) len: usize,
}

impl ZeroLane {
    pub(super) const fn new() -> ZeroLane {
        ZeroLane { slots: Vec::new(), head: 0, len: 0 }
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// The slot of the `i`-th oldest entry (`i` may be one past the newest, or `usize::MAX`: one
    /// before the oldest), in a ring that has slots.
    #[inline]
    fn slot(&mut self, i: usize) -> &mut Option<TcbRef> {
        debug_assert!(!self.slots.is_empty());
        let at = self.head.wrapping_add(i) & self.mask();
        // SAFETY: the ring has slots (every caller holds an entry or has just grown it) and their
        // number is a power of two, so `at`, masked by that number less one, is below it.
        unsafe { self.slots.get_unchecked_mut(at) }
    }

    /// Adds `t` as the newest entry.
    #[inline]
    pub(super) fn push_back(&mut self, t: TcbRef) {
        if self.len == self.slots.len() {
            return self.grow_and_push_back(t); // (a tail call: no frame on the common path)
        }
        *self.slot(self.len) = Some(t);
        self.len += 1;
    }

    #[cold]
    #[inline(never)]
    fn grow_and_push_back(&mut self, t: TcbRef) {
        self.grow();
        self.push_back(t);
    }

    /// Adds `t` as the oldest entry.
    #[inline]
    pub(super) fn push_front(&mut self, t: TcbRef) {
        if self.len == self.slots.len() {
            self.grow();
        }
        *self.slot(usize::MAX) = Some(t);
        self.head = self.head.wrapping_sub(1) & self.mask();
        self.len += 1;
    }

    /// Adds the ULTs of `first` (taking them out), then `last`, as the newest entries; how many.
    #[inline]
    pub(super) fn push_back_batch(&mut self, first: &mut [Option<TcbRef>], last: TcbRef) -> usize {
        if self.len + first.len() >= self.slots.len() {
            self.grow();
        }
        let len = self.len;
        let mut added = 0;
        for e in first.iter_mut() {
            if let Some(e) = e.take() {
                *self.slot(len + added) = Some(e);
                added += 1;
            }
        }
        *self.slot(len + added) = Some(last);
        self.len += added + 1;
        added + 1
    }

    /// Moves the [`BATCH`] oldest entries (there are as many) into `into`, oldest first. (The
    /// ring's slots keep stale copies: only the `len` from `head` on mean anything.)
    #[inline]
    pub(super) fn pop_front_batch(&mut self, into: &mut [Option<TcbRef>; BATCH]) {
        debug_assert!(self.len >= BATCH);
        for (i, e) in into.iter_mut().enumerate() {
            *e = *self.slot(i);
        }
        self.head = self.head.wrapping_add(BATCH) & self.mask();
        self.len -= BATCH;
    }

    /// Takes the oldest entry (leaving a stale copy in its slot).
    #[inline]
    pub(super) fn pop_front(&mut self) -> Option<TcbRef> {
        if self.len == 0 {
            return None;
        }
        let t = *self.slot(0);
        self.head = self.head.wrapping_add(1) & self.mask();
        self.len -= 1;
        t
    }

    /// Takes the newest entry (leaving a stale copy in its slot).
    #[inline]
    pub(super) fn pop_back(&mut self) -> Option<TcbRef> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        *self.slot(self.len)
    }

    /// The oldest entry.
    #[inline]
    pub(super) fn front(&self) -> Option<TcbRef> {
        if self.len == 0 {
            return None;
        }
        self.slots.get(self.head).copied().flatten()
    }

    /// The entries, oldest first.
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = TcbRef> + '_ {
        (0..self.len).map(|i| self.slots[self.head.wrapping_add(i) & self.mask()].expect("a live slot"))
    }

    /// Doubles the ring (at least 64 slots, and room for [`BATCH`] more entries than it holds),
    /// the entries oldest first from slot 0.
    #[cold]
    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(64).max((self.len + BATCH + 1).next_power_of_two());
        let mut slots = vec![None; cap];
        for (i, s) in slots.iter_mut().enumerate().take(self.len) {
            *s = self.slot(i).take();
        }
        (self.slots, self.head) = (slots, 0);
    }
}

/// A list of entries linked through their [`RunLink`]s (`left`: the next lower, `right`: the next
/// higher), with O(1) access at both ends.
///
/// [`RunLink`]: super::RunLink
pub(super) struct Lane {
    /// The lowest entry.
    pub(super) lo: Option<TcbRef>,
    /// The highest entry.
    pub(super) hi: Option<TcbRef>,
}

impl Lane {
    pub(super) const fn new() -> Lane {
        Lane { lo: None, hi: None }
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.hi.is_none()
    }

    /// Adds `t` (with its key set) below every entry.
    #[inline]
    pub(super) fn push_lo(&mut self, t: TcbRef) {
        let n = link(t);
        n.left.set(None);
        n.right.set(self.lo);
        match self.lo {
            Some(l) => link(l).left.set(Some(t)),
            None => self.hi = Some(t),
        }
        self.lo = Some(t);
    }

    /// Links `t` (with its key set) between `below` and `above`, neighbours in a lane.
    #[inline]
    pub(super) fn insert_between(below: TcbRef, t: TcbRef, above: TcbRef) {
        debug_assert_eq!(link(below).right.get(), Some(above));
        let n = link(t);
        n.left.set(Some(below));
        n.right.set(Some(above));
        link(below).right.set(Some(t));
        link(above).left.set(Some(t));
    }

    /// Adds `t` (with its key set) above every entry.
    #[inline]
    pub(super) fn push_hi(&mut self, t: TcbRef) {
        let n = link(t);
        n.right.set(None);
        n.left.set(self.hi);
        match self.hi {
            Some(h) => link(h).right.set(Some(t)),
            None => self.lo = Some(t),
        }
        self.hi = Some(t);
    }

    #[inline]
    pub(super) fn pop_hi(&mut self) -> Option<TcbRef> {
        let t = self.hi?;
        let below = link(t).left.get();
        match below {
            Some(b) => link(b).right.set(None),
            None => self.lo = None,
        }
        self.hi = below;
        Some(t)
    }

    #[inline]
    pub(super) fn pop_lo(&mut self) -> Option<TcbRef> {
        let t = self.lo?;
        let above = link(t).right.get();
        match above {
            Some(a) => link(a).left.set(None),
            None => self.hi = None,
        }
        self.lo = above;
        Some(t)
    }
}
