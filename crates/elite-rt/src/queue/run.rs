//! The runqueue of one processor: ready ULTs that have run before, best priority first.
//!
//! # Structure
//!
//! A treap (a binary search tree by key that is also a max-heap by a random priority per entry,
//! hence balanced in expectation) and two lists beside it, all linked through the entries' own
//! TCBs ([`RunLink`]): no allocation; and a ring of pointers, the zero lane, which allocates only
//! when it grows.
//!
//! * The *zero lane* holds the entries of key 0 (every yield under the default `yield_priority`,
//!   and whatever a policy keys 0) in arrival order, in a ring ([`ZeroLane`]: a round-robin of
//!   yields reads no control block to find the next ULT). Key 0 is the lowest key there is, so
//!   the lane is the low end of the whole order: it serves only when the rest is empty, oldest
//!   first, and a thief takes from it first, newest first.
//! * The *top lane* holds entries whose keys lie above the tree's and the bottom lane's, sorted,
//!   highest last: the high end of the whole order, served first, highest first. A push above
//!   it goes on its high end (No Affinity's entry numbers always do), a push between it and the
//!   rest on its low end (a batch made ready in falling order, once its first entry went above
//!   everything); a push within its range first moves its entries below the new key out of
//!   the way: onto the bottom lane's high end in one piece when there is no tree and they lie
//!   strictly above the bottom lane (a falling batch with a higher key among it); with a tree
//!   it takes its place in the lane when a few entries lead there, and moves them into the
//!   tree (each at its best end) otherwise.
//! * The *bottom lane* holds entries whose keys lie at or below the tree's, sorted, lowest and
//!   newest last: served after the tree, highest (and oldest) first, and a thief's first pick
//!   after the zero lane. A push at or below everything else goes on its low end (falling keys,
//!   and equal keys: Minimum Misses' ties), a push between it and the tree on its high end; a
//!   push within its range takes its place in the lane when a few entries lead there, and
//!   otherwise first moves its entries at or above the new key into the tree (each at the
//!   tree's worst end).
//!
//! * The tree holds the rest, and keeps pointers to its two ends:
//!
//! * **best** (`max`): the highest key; equal keys keep their order of arrival, the oldest
//!   nearest the best end, so equal keys run oldest first;
//! * **worst** (`min`): the lowest key, where a thief takes from: what the victim loses least by
//!   giving away (DESIGN §4 step 4, ELiTE 2.3.3: a tree, unlike a heap, splits into its high- and
//!   low-affinity parts).
//!
//! So a batch made ready in rising or falling order of keys (No Affinity's entries; Virtual
//! Time's and Reload Transient's, whose order each round reverses the last one's) or with
//! equal keys costs O(1) per entry, and every entry moves into the tree, and from the top lane to
//! the bottom lane, at most once per stay.
//!
//! Costs, in expectation over the random priorities, with `n` entries:
//!
//! | operation | cost |
//! | --- | --- |
//! | push or pop in the zero lane (yields under the default key 0) | O(1) amortized: a pointer in a ring (which doubles when full) |
//! | push or pop in a lane (No Affinity's entries) | O(1): a few pointer writes |
//! | push outside the tree's range (rising, falling or equal keys) | O(1): at an end of a lane |
//! | a push within a lane's range | O(1): its place in the lane after a walk past at most `WALK` (8) entries; or it moves the part of the lane beyond the key into the tree (the top lane's part onto the bottom lane in one piece, where there is no tree): O(1) amortized per entry moved |
//! | push into the tree (a move from a lane, at its end) | O(1): hung under that end, then fewer than 2 rotations on average |
//! | push, key within the tree's range | O(log n) descent, fewer than 2 rotations on average |
//! | pop the best | O(1) amortized (unlink the end; the next best is its in-order neighbour) |
//! | a thief takes `k` from the worst end | O(k) amortized |
//!
//! Each removal at an end is O(1) because an end has no child on its outer side: it is replaced
//! by its one inner child, which keeps both the search order and the heap order. The zero lane
//! exists because a round-robin of yields among many ULTs (a yield behind everyone, the oldest
//! yielder next) paid the treap's random-priority rotations on every yield, the top lane because
//! No Affinity's LIFO paid them on every wake-up, the bottom lane and the top lane's low end
//! because the affinity policies' batches paid them on every other round (callgrind,
//! `elite-bench`'s `examples/probe` and `affinity-probe`: see the commits that added them);
//! the zero lane is a ring rather than a list because walking a list's links cost a yield
//! round-robin a cache miss per ULT ([`ZeroLane`]).
//!
//! # Protocol
//!
//! The owner and thieves serialize on a test-and-test-and-set spin lock held for a handful of
//! instructions (no user code under it, and no allocation but the zero lane's rare growth and a
//! thief's room for its take). The [`RunLink`] of a TCB is written only
//! under the lock of the runqueue holding it (or before it is pushed, by the pusher, which owns
//! it). `len` is updated under the lock and read without it by thieves and by the idle check, as
//! a hint only.
//!
//! The owner's [`YieldBatch`] holds ready ULTs of key 0 outside the runqueue, like the
//! processor's `next` slot: up to [`BATCH`] of them, taken and put back under the lock, and
//! otherwise touched by the owner alone (its docs say when they go back).

use crate::atomics::{AtomicBool, AtomicUsize, Ordering};
use crate::tcb::TcbRef;
use crossbeam_utils::Backoff;
use std::cell::{Cell, UnsafeCell};

/// The links of a TCB in a runqueue's tree or in its top or bottom lane; meaningful only while
/// it is in one (an entry of the zero lane has none: see [`ZeroLane`]).
pub(crate) struct RunLink {
    /// Tree: the left child. Lane: the next lower entry.
    left: Cell<Option<TcbRef>>,
    /// Tree: the right child. Lane: the next higher entry.
    right: Cell<Option<TcbRef>>,
    parent: Cell<Option<TcbRef>>,
    key: Cell<u64>,
    /// The treap priority: a parent's is at least its children's.
    prio: Cell<u32>,
}

impl RunLink {
    pub(crate) const fn new() -> RunLink {
        RunLink {
            left: Cell::new(None),
            right: Cell::new(None),
            parent: Cell::new(None),
            key: Cell::new(0),
            prio: Cell::new(0),
        }
    }
}

#[inline]
fn link<'a>(t: TcbRef) -> &'a RunLink {
    &t.tcb().run_link
}

#[inline]
fn key(t: TcbRef) -> u64 {
    link(t).key.get()
}

/// The most entries a push within a lane's range walks past to take its place in the lane,
/// before it moves them out of the way instead (see [`Tree::push_in_top_range`] and
/// [`Tree::push_in_bottom_range`]): a bound on the walk, which visits one control block per
/// entry, and keeps a push O(1).
const WALK: usize = 8;

/// The zero lane: a ring of pointers to the entries of key 0 (all equal: arrival order alone),
/// oldest at the front, not a list through their [`RunLink`]s. A round-robin of yields takes
/// the lane's oldest entries, and a list would hand them out one dependent load at a time, each
/// the link of a control block untouched since that ULT's last yield (1023 yields ago with 1024
/// ULTs taking turns): with the yield batch, eight cache misses in a row under the lock, a third
/// of a yield's time (perf, `hot_path_probe yields`). The ring hands out eight pointers from one
/// or two lines, and a yield touches no link of any control block. It grows under the lock when
/// full (by doubling, so rarely: its capacity settles at the most entries the lane held) and
/// never shrinks. (Not a `VecDeque`: its general index arithmetic cost a yield 19 instructions
/// more than this power-of-two mask, callgrind.)
struct ZeroLane {
    /// The ring; its length is a power of two (or 0), and `slots[(head + i) & mask]` holds the
    /// `i`-th oldest entry for `i < len` (the other slots hold nothing or stale copies).
    slots: Vec<Option<TcbRef>>,
    /// The slot of the oldest entry.
    head: usize,
    /// Entries in the lane.
    len: usize,
}

impl ZeroLane {
    const fn new() -> ZeroLane {
        ZeroLane { slots: Vec::new(), head: 0, len: 0 }
    }

    #[inline]
    fn is_empty(&self) -> bool {
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
    fn push_back(&mut self, t: TcbRef) {
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
    fn push_front(&mut self, t: TcbRef) {
        if self.len == self.slots.len() {
            self.grow();
        }
        *self.slot(usize::MAX) = Some(t);
        self.head = self.head.wrapping_sub(1) & self.mask();
        self.len += 1;
    }

    /// Adds the ULTs of `first` (taking them out), then `last`, as the newest entries; how many.
    #[inline]
    fn push_back_batch(&mut self, first: &mut [Option<TcbRef>], last: TcbRef) -> usize {
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
    fn pop_front_batch(&mut self, into: &mut [Option<TcbRef>; BATCH]) {
        debug_assert!(self.len >= BATCH);
        for (i, e) in into.iter_mut().enumerate() {
            *e = *self.slot(i);
        }
        self.head = self.head.wrapping_add(BATCH) & self.mask();
        self.len -= BATCH;
    }

    /// Takes the oldest entry (leaving a stale copy in its slot).
    #[inline]
    fn pop_front(&mut self) -> Option<TcbRef> {
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
    fn pop_back(&mut self) -> Option<TcbRef> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        *self.slot(self.len)
    }

    /// The oldest entry.
    #[inline]
    fn front(&self) -> Option<TcbRef> {
        if self.len == 0 {
            return None;
        }
        self.slots.get(self.head).copied().flatten()
    }

    /// The entries, oldest first.
    #[cfg(test)]
    fn iter(&self) -> impl Iterator<Item = TcbRef> + '_ {
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
struct Lane {
    /// The lowest entry.
    lo: Option<TcbRef>,
    /// The highest entry.
    hi: Option<TcbRef>,
}

impl Lane {
    const fn new() -> Lane {
        Lane { lo: None, hi: None }
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.hi.is_none()
    }

    /// Adds `t` (with its key set) below every entry.
    #[inline]
    fn push_lo(&mut self, t: TcbRef) {
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
    fn insert_between(below: TcbRef, t: TcbRef, above: TcbRef) {
        debug_assert_eq!(link(below).right.get(), Some(above));
        let n = link(t);
        n.left.set(Some(below));
        n.right.set(Some(above));
        link(below).right.set(Some(t));
        link(above).left.set(Some(t));
    }

    /// Adds `t` (with its key set) above every entry.
    #[inline]
    fn push_hi(&mut self, t: TcbRef) {
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
    fn pop_hi(&mut self) -> Option<TcbRef> {
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
    fn pop_lo(&mut self) -> Option<TcbRef> {
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

/// The tree and the three lanes; touched only under the runqueue's lock.
struct Tree {
    root: Option<TcbRef>,
    /// The lowest key in the tree (the newest of equal lowest keys).
    min: Option<TcbRef>,
    /// The highest key in the tree (the oldest of equal highest keys).
    max: Option<TcbRef>,
    /// Entries in the tree.
    tree_len: usize,
    /// The zero lane: entries of key 0, oldest at the front (see [`ZeroLane`]).
    zeros: ZeroLane,
    /// The top lane: entries whose keys rose with each push and lie above the tree's, highest at
    /// `hi`.
    top: Lane,
    /// The bottom lane: entries whose keys fell (or stayed) with each push and lie at or below
    /// the tree's, newest and lowest at `lo`.
    bottom: Lane,
    /// Entries in the tree and the lanes.
    len: usize,
    /// xorshift32 state for the priorities.
    rng: u32,
}

impl Tree {
    const fn new() -> Tree {
        Tree {
            root: None,
            min: None,
            max: None,
            tree_len: 0,
            zeros: ZeroLane::new(),
            top: Lane::new(),
            bottom: Lane::new(),
            len: 0,
            rng: 0x9E37_79B9,
        }
    }

    /// Adds `t` with key `k`: key 0 to the zero lane; a key above the tree's (and the bottom
    /// lane's) to the top lane, a key at or below the tree's to the bottom lane, first moving
    /// into the tree the part of the lane that `k` does not bound (so that the lanes stay
    /// sorted and outside the tree's range); a key within the tree's range to the tree.
    #[inline]
    fn push(&mut self, k: u64, t: TcbRef) {
        self.len += 1;
        if k == 0 {
            // (Not even the key is written: the zero lane never reads a link.)
            self.zeros.push_back(t);
            return;
        }
        link(t).key.set(k);
        if let (Some(lo), Some(hi)) = (self.top.lo, self.top.hi) {
            if k > key(hi) {
                self.top.push_hi(t);
                return;
            }
            if k > key(lo) || (k == key(lo) && !self.above_rest(k)) {
                return self.push_in_top_range(k, t);
            }
            if k == key(lo) {
                // Equal to the lane's lowest (equal keys: Minimum Misses' ties), strictly above
                // the rest: below it, as the newest of them.
                self.top.push_lo(t);
                return;
            }
        }
        // Below the top lane, or no top lane.
        if self.max.is_none_or(|m| k > key(m)) {
            if self.bottom.hi.is_none_or(|b| k > key(b)) {
                // Between the tree (and the bottom lane) and the top lane: the top lane's lowest.
                self.top.push_lo(t);
                return;
            }
        } else if self.min.is_some_and(|m| k > key(m)) {
            self.push_tree(k, t);
            return;
        }
        // At or below the tree's lowest key (or, with no tree, at or below the bottom lane's
        // highest): a newer entry of an equal key goes nearer the worst end.
        match (self.bottom.lo, self.bottom.hi) {
            (Some(l), _) if k <= key(l) => self.bottom.push_lo(t),
            (Some(_), Some(h)) if k <= key(h) => self.push_in_bottom_range(k, h, t),
            // Above the bottom lane (or none), at or below the tree's lowest.
            _ => self.bottom.push_hi(t),
        }
    }

    /// [`push`](Self::push) of a key `k` within the bottom lane's range (above its lowest, at or
    /// below its highest `h`): `t` goes in its place in the lane when a few entries from the
    /// high end lead there ([`WALK`]); otherwise the lane's entries at or above `k` move into
    /// the tree (highest, the oldest of equal keys, first: each at the tree's worst end). (Not
    /// onto the top lane: entries that went from the top lane to this one could then go back
    /// and forth, and a push would no longer be O(1) amortized.)
    #[inline(never)]
    fn push_in_bottom_range(&mut self, k: u64, h: TcbRef, t: TcbRef) {
        if self.place_in_bottom(k, h, t) {
            return;
        }
        while let Some(h) = self.bottom.hi.filter(|&h| key(h) >= k) {
            self.bottom.pop_hi();
            self.push_tree(key(h), h);
        }
        self.bottom.push_hi(t);
    }

    /// Links `t` of key `k` into the bottom lane, whose highest `h` is at or above `k` and whose
    /// lowest is below it, below the entries at or above `k` (equal keys: `t` is newer) and
    /// above the rest, when at most [`WALK`] entries from the high end lead there; whether it
    /// did. (The walk meets an entry below `k` before the lane's end.)
    #[inline]
    fn place_in_bottom(&mut self, k: u64, h: TcbRef, t: TcbRef) -> bool {
        let mut above = h;
        for _ in 0..WALK {
            let Some(below) = link(above).left.get() else { break };
            if key(below) < k {
                Lane::insert_between(below, t, above);
                return true;
            }
            above = below;
        }
        false
    }

    /// [`push`](Self::push) of a key `k` within the top lane's range. With no tree, and the
    /// lane strictly above the bottom lane, the lane's entries below `k` move to the bottom
    /// lane in one piece; with a tree, `t` takes its place in the lane when at most [`WALK`]
    /// entries from the low end lead there, and otherwise the entries below `k` move into the
    /// tree (lowest first: each at the tree's best end). Then `t` becomes the lane's lowest (a
    /// falling batch that began above everything stays in the lane).
    #[inline(never)]
    fn push_in_top_range(&mut self, k: u64, t: TcbRef) {
        let splice =
            self.tree_len == 0 && self.top.lo.is_some_and(|l| self.bottom.hi.is_none_or(|b| key(b) < key(l)));
        if let Some(lo) = self.top.lo.filter(|&l| !splice && key(l) < k) {
            // Above the entries below `k`, below the rest (equal keys: `t` is newer), when a few
            // entries from the low end lead there ([`WALK`]); the highest entry is at or above
            // `k` (a key above it went on the high end), so the walk meets one before the end.
            let mut below = lo;
            for _ in 0..WALK {
                let Some(above) = link(below).right.get() else { break };
                if key(above) >= k {
                    Lane::insert_between(below, t, above);
                    return;
                }
                below = above;
            }
        }
        if splice {
            // Its entries below `k` go on the bottom lane's high end as they are, in one piece
            // (they stay sorted, above the bottom lane's and below the rest), not one by one
            // into the tree. (A batch whose keys fall with an entry of a higher key among them:
            // Reload Transient's releases when most keys tied at the highest, before its ties
            // were ordered newest first; this came out ahead of walking first, callgrind.)
            self.move_top_below_to_bottom(k);
        }
        while let Some(l) = self.top.lo.filter(|&l| key(l) < k) {
            self.top.pop_lo();
            self.push_tree_best(l);
        }
        // Below the lane's entries of equal key (it is newer), and strictly above the rest.
        if self.above_rest(k) {
            self.top.push_lo(t);
        } else if self.tree_len == 0 && self.bottom.lo.is_none_or(|l| k <= key(l)) {
            // Equal to the lowest key queued (equal keys, Minimum Misses' ties): the newest of
            // them, below the others.
            self.bottom.push_lo(t);
        } else {
            // An equal key is queued (rare): the general order, through the tree.
            self.flush_top();
            self.flush_bottom();
            self.push_tree(k, t);
        }
    }

    /// Moves the top lane's entries below `k` to the high end of the bottom lane, whose keys
    /// must lie strictly below them, with no tree between: a splice of the two lists (the
    /// entries keep their order, so equal keys keep their order of arrival), after a walk to
    /// find where the part below `k` ends.
    #[inline]
    fn move_top_below_to_bottom(&mut self, k: u64) {
        debug_assert!(self.tree_len == 0);
        let Some(first) = self.top.lo.filter(|&l| key(l) < k) else { return };
        let mut last = first;
        while let Some(next) = link(last).right.get().filter(|&n| key(n) < k) {
            last = next;
        }
        // Off the top lane...
        let rest = link(last).right.get();
        match rest {
            Some(r) => link(r).left.set(None),
            None => self.top.hi = None,
        }
        self.top.lo = rest;
        // ...onto the bottom lane's high end.
        link(last).right.set(None);
        link(first).left.set(self.bottom.hi);
        match self.bottom.hi {
            Some(h) => link(h).right.set(Some(first)),
            None => self.bottom.lo = Some(first),
        }
        self.bottom.hi = Some(last);
    }

    /// Whether `k` lies strictly above the tree's keys and the bottom lane's.
    #[inline]
    fn above_rest(&self, k: u64) -> bool {
        match self.max {
            Some(m) => k > key(m),
            None => self.bottom.hi.is_none_or(|b| k > key(b)),
        }
    }

    /// Moves the top lane into the tree, lowest first (each lands at the tree's best end).
    #[cold]
    fn flush_top(&mut self) {
        while let Some(t) = self.top.pop_lo() {
            self.push_tree_best(t);
        }
    }

    /// Inserts `t`, the top lane's lowest entry just taken off it, into the tree at its best end:
    /// its key is at least the tree's highest, and of equal keys the lane's lowest is the newest,
    /// so each later one (older) goes nearer the best end.
    #[inline]
    fn push_tree_best(&mut self, t: TcbRef) {
        let k = key(t);
        match self.max {
            Some(max) if k == key(max) => {
                let n = link(t);
                n.left.set(None);
                n.right.set(None);
                n.prio.set(self.next_prio());
                self.tree_len += 1;
                Self::attach(max, t, false);
                self.max = Some(t);
                self.sift_up(t);
            }
            _ => self.push_tree(k, t),
        }
    }

    /// Moves the bottom lane into the tree, highest (oldest) first (each lands at the tree's
    /// worst end, so equal keys keep their order of arrival).
    #[cold]
    fn flush_bottom(&mut self) {
        while let Some(t) = self.bottom.pop_hi() {
            self.push_tree(key(t), t);
        }
    }

    /// Takes the highest key (the oldest of equal highest keys): the top lane's last, else the
    /// tree's best, else the bottom lane's oldest, else the zero lane's oldest.
    #[inline]
    fn pop_max(&mut self) -> Option<TcbRef> {
        let t = if !self.top.is_empty() {
            self.top.pop_hi()
        } else if self.tree_len > 0 {
            self.pop_tree_max()
        } else if !self.bottom.is_empty() {
            self.bottom.pop_hi()
        } else {
            self.zeros.pop_front()
        }?;
        self.len -= 1;
        Some(t)
    }

    /// Takes the lowest key (the newest of equal lowest keys): the zero lane's newest, else the
    /// bottom lane's newest, else the tree's worst, else the top lane's first.
    #[inline]
    fn pop_min(&mut self) -> Option<TcbRef> {
        let t = if !self.zeros.is_empty() {
            self.zeros.pop_back()
        } else if !self.bottom.is_empty() {
            self.bottom.pop_lo()
        } else if self.tree_len > 0 {
            self.pop_tree_min()
        } else {
            self.top.pop_lo()
        }?;
        self.len -= 1;
        Some(t)
    }

    /// Whether every entry is in the zero lane.
    #[inline]
    fn only_zeros(&self) -> bool {
        self.top.is_empty() && self.tree_len == 0 && self.bottom.is_empty()
    }

    /// [`RunQueue::flush_batch`] under the lock.
    #[cold]
    fn put_back(&mut self, batch: &mut YieldBatch) {
        let (head, end) = (batch.head, batch.end);
        for e in batch.slots[head..end].iter_mut().rev() {
            if let Some(e) = e.take() {
                self.zeros.push_front(e);
                self.len += 1;
            }
        }
        for e in batch.slots[..head].iter_mut() {
            if let Some(e) = e.take() {
                self.push(0, e);
            }
        }
        (batch.head, batch.end) = (0, 0);
    }

    #[inline]
    fn next_prio(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }

    /// Inserts `t` with `k` (not 0) into the tree. Among equal keys a newer entry goes nearer the
    /// worst end, so that the best end hands out equal keys oldest first.
    #[inline]
    fn push_tree(&mut self, k: u64, t: TcbRef) {
        let n = link(t);
        n.key.set(k);
        n.left.set(None);
        n.right.set(None);
        n.prio.set(self.next_prio());
        self.tree_len += 1;
        let (Some(min), Some(max), Some(root)) = (self.min, self.max, self.root) else {
            n.parent.set(None);
            (self.root, self.min, self.max) = (Some(t), Some(t), Some(t));
            return;
        };
        if k > key(max) {
            Self::attach(max, t, false);
            self.max = Some(t);
        } else if k <= key(min) {
            Self::attach(min, t, true);
            self.min = Some(t);
        } else {
            let mut at = root;
            loop {
                let go_left = k <= key(at);
                let l = link(at);
                match if go_left { l.left.get() } else { l.right.get() } {
                    Some(next) => at = next,
                    None => {
                        Self::attach(at, t, go_left);
                        break;
                    }
                }
            }
        }
        self.sift_up(t);
    }

    #[inline]
    fn attach(parent: TcbRef, child: TcbRef, left: bool) {
        if left {
            link(parent).left.set(Some(child));
        } else {
            link(parent).right.set(Some(child));
        }
        link(child).parent.set(Some(parent));
    }

    /// Rotates `t` up while its priority beats its parent's.
    #[inline]
    fn sift_up(&mut self, t: TcbRef) {
        while let Some(p) = link(t).parent.get() {
            if link(p).prio.get() >= link(t).prio.get() {
                break;
            }
            self.rotate_up(t, p);
        }
    }

    /// Puts `x` in the place of its parent `p`, `p` becoming `x`'s child (in-order unchanged).
    fn rotate_up(&mut self, x: TcbRef, p: TcbRef) {
        let (lx, lp) = (link(x), link(p));
        let grand = lp.parent.get();
        if lp.left.get() == Some(x) {
            let inner = lx.right.get();
            lp.left.set(inner);
            lx.right.set(Some(p));
            if let Some(i) = inner {
                link(i).parent.set(Some(p));
            }
        } else {
            let inner = lx.left.get();
            lp.right.set(inner);
            lx.left.set(Some(p));
            if let Some(i) = inner {
                link(i).parent.set(Some(p));
            }
        }
        lp.parent.set(Some(x));
        lx.parent.set(grand);
        self.replace_child(grand, p, Some(x));
    }

    /// Makes `new` the child of `parent` (or the root) where `old` was.
    #[inline]
    fn replace_child(&mut self, parent: Option<TcbRef>, old: TcbRef, new: Option<TcbRef>) {
        match parent {
            None => self.root = new,
            Some(g) => {
                let lg = link(g);
                if lg.left.get() == Some(old) {
                    lg.left.set(new);
                } else {
                    lg.right.set(new);
                }
            }
        }
    }

    /// Takes the tree's highest key (the oldest of equal highest keys).
    #[inline]
    fn pop_tree_max(&mut self) -> Option<TcbRef> {
        let m = self.max?;
        let lm = link(m);
        // The maximum has no right child: its left child takes its place.
        let (inner, parent) = (lm.left.get(), lm.parent.get());
        // ... and it is its parent's right child (or the root).
        match parent {
            None => self.root = inner,
            Some(p) => link(p).right.set(inner),
        }
        if let Some(i) = inner {
            link(i).parent.set(parent);
        }
        self.tree_len -= 1;
        self.max = match inner {
            Some(mut at) => {
                while let Some(r) = link(at).right.get() {
                    at = r;
                }
                Some(at)
            }
            None => parent,
        };
        if self.tree_len == 0 {
            self.min = None;
        }
        Some(m)
    }

    /// Takes the tree's lowest key (the newest of equal lowest keys).
    #[inline]
    fn pop_tree_min(&mut self) -> Option<TcbRef> {
        let m = self.min?;
        let lm = link(m);
        // The minimum has no left child: its right child takes its place.
        let (inner, parent) = (lm.right.get(), lm.parent.get());
        // ... and it is its parent's left child (or the root).
        match parent {
            None => self.root = inner,
            Some(p) => link(p).left.set(inner),
        }
        if let Some(i) = inner {
            link(i).parent.set(parent);
        }
        self.tree_len -= 1;
        self.min = match inner {
            Some(mut at) => {
                while let Some(l) = link(at).left.get() {
                    at = l;
                }
                Some(at)
            }
            None => parent,
        };
        if self.tree_len == 0 {
            self.max = None;
        }
        Some(m)
    }
}

/// Most ULTs a [`YieldBatch`] takes from the runqueue at once.
pub(crate) const BATCH: usize = 8;

/// Entries a refill ([`RunQueue::yield_refill`]) needs in the zero lane, and nowhere else, to
/// take a batch: it leaves at least [`BATCH`] of them for thieves.
pub(crate) const REFILL_FROM: usize = 2 * BATCH;

/// The owner's yield batch: ready ULTs of key 0 (yields under No Affinity and Minimum Misses)
/// taken from the zero lane [`BATCH`] at a time, and the ULTs that yielded since, which go back
/// to the zero lane with the next refill. So a round-robin of many yielding ULTs takes the
/// runqueue's lock once per [`BATCH`] yields instead of once per yield: its atomic exchange
/// was a fifth of the time of a yield, lock and unlock round (`mutex_contended` at one
/// processor).
///
/// The entries are the owner's alone, like the processor's `next` slot: not in the runqueue,
/// not counted in its `len`, invisible to thieves. So a refill takes a batch only when it
/// leaves at least [`BATCH`] entries for thieves (the zero lane holds [`REFILL_FROM`] or more, and
/// nothing else is queued: the batch is then the runqueue's best), and the owner puts the batch
/// back ([`RunQueue::flush_batch`], [`RunQueue::push_flushing`]) before anything else enters its
/// runqueue and whenever it leaves its chain of switches (a return to the loop, a blocking
/// call's hand-over): the runqueue's order is then exactly what one lock per yield would have
/// made, and the loop, the idle check and the shutdown see every ready ULT in the runqueue.
pub(crate) struct YieldBatch {
    /// The batch, oldest first: `slots[head..end]` were taken and have not run yet;
    /// `slots[..head]` yielded since the refill (each yield takes the place of the ULT it
    /// passes the processor to, so the yielded ones stay in the order they yielded).
    slots: [Option<TcbRef>; BATCH],
    /// The next taken ULT to run; the yielded ones before it.
    head: usize,
    /// One past the last taken ULT; 0 when the batch is empty.
    end: usize,
}

impl YieldBatch {
    /// An empty batch.
    pub(crate) const fn new() -> YieldBatch {
        YieldBatch { slots: [None; BATCH], head: 0, end: 0 }
    }

    /// Whether it holds no ULT.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.end == 0
    }

    /// Whether the next yield is the first since the batch was taken (the refill's yield
    /// passed the processor to the batch's first ULT).
    #[inline]
    pub(crate) fn at_first(&self) -> bool {
        self.head == 1
    }

    /// The taken ULT that runs at the next yield, if one is left.
    #[inline]
    pub(crate) fn peek_taken(&self) -> Option<TcbRef> {
        if self.head == self.end {
            return None;
        }
        self.slots.get(self.head).copied().flatten()
    }

    /// A yield of `t` with key 0 while taken ULTs wait: `t` joins the yielded ones and the oldest
    /// taken one is returned to run next; `Err(t)` when none is left (refill under the lock).
    #[inline(always)]
    pub(crate) fn swap(&mut self, t: TcbRef) -> Result<TcbRef, TcbRef> {
        if self.head == self.end {
            return Err(t);
        }
        match self.slots.get_mut(self.head) {
            Some(slot) => {
                self.head += 1;
                slot.replace(t).ok_or(t)
            }
            None => Err(t),
        }
    }
}

pub(crate) struct RunQueue {
    lock: AtomicBool,
    len: AtomicUsize,
    tree: UnsafeCell<Tree>,
}

// SAFETY: `tree`, and the links of the TCBs in it, are only touched while `lock` is held (see
// `with`).
unsafe impl Sync for RunQueue {}

impl RunQueue {
    pub(crate) fn new() -> RunQueue {
        RunQueue {
            lock: AtomicBool::new(false),
            len: AtomicUsize::new(0),
            tree: UnsafeCell::new(Tree::new()),
        }
    }

    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut Tree) -> R) -> R {
        if self.lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
        // SAFETY: the lock is held, so no other thread touches the tree.
        let tree = unsafe { &mut *self.tree.get() };
        let r = f(tree);
        self.len.store(tree.len, Ordering::Relaxed);
        self.lock.store(false, Ordering::Release);
        r
    }

    #[cold]
    fn lock_contended(&self) {
        let backoff = Backoff::new();
        loop {
            while self.lock.load(Ordering::Relaxed) {
                backoff.snooze();
            }
            if self.lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return;
            }
        }
    }

    /// Number of entries (a hint when read by another thread).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Adds a ready ULT, owned by the caller and in no other runqueue, with the policy's key
    /// (higher runs sooner).
    #[inline]
    pub(crate) fn push(&self, key: u64, t: TcbRef) {
        self.with(|tree| tree.push(key, t));
    }

    /// Adds `t` with `key`, then takes the ULT with the highest key (maybe `t`), under one
    /// acquisition of the lock.
    #[inline]
    pub(crate) fn push_pop_best(&self, key: u64, t: TcbRef) -> Option<TcbRef> {
        self.with(|tree| {
            tree.push(key, t);
            tree.pop_max()
        })
    }

    /// A yield of `t` with key 0 whose batch ran out ([`YieldBatch::swap`]), under one
    /// acquisition of the lock: the batch's yielded ULTs and then `t` enter the zero lane, and
    /// the best ULT is taken to run next; when that is the zero lane's oldest and at least
    /// [`REFILL_FROM`] wait there (and nothing else), [`BATCH`] are taken, the first runs next and
    /// the others stay in the batch.
    #[inline(never)]
    pub(crate) fn yield_refill(&self, t: TcbRef, batch: &mut YieldBatch) -> Option<TcbRef> {
        debug_assert!(batch.head == batch.end);
        self.with(|tree| {
            tree.len += tree.zeros.push_back_batch(&mut batch.slots[..batch.end], t);
            if tree.len >= REFILL_FROM && tree.only_zeros() {
                tree.zeros.pop_front_batch(&mut batch.slots);
                tree.len -= BATCH;
                (batch.head, batch.end) = (1, BATCH);
                return batch.slots[0].take();
            }
            (batch.head, batch.end) = (0, 0);
            tree.pop_max()
        })
    }

    /// Puts `batch`'s ULTs back (under the lock; nothing to do when it is empty): the taken ones
    /// at the front of the zero lane in their order, the yielded ones at its back.
    #[inline]
    pub(crate) fn flush_batch(&self, batch: &mut YieldBatch) {
        if !batch.is_empty() {
            self.with(|tree| tree.put_back(batch));
        }
    }

    /// [`push`](Self::push) after [`flush_batch`](Self::flush_batch), under one acquisition of
    /// the lock.
    #[inline]
    pub(crate) fn push_flushing(&self, key: u64, t: TcbRef, batch: &mut YieldBatch) {
        self.with(|tree| {
            if !batch.is_empty() {
                tree.put_back(batch);
            }
            tree.push(key, t);
        });
    }

    /// Takes the ULT with the highest key.
    #[inline]
    pub(crate) fn pop_best(&self) -> Option<TcbRef> {
        if self.len() == 0 {
            return None;
        }
        self.with(Tree::pop_max)
    }

    /// Takes the ULT with the lowest key: the processor loop's turn against starvation (under
    /// No Affinity's LIFO order, the one that has waited longest).
    #[inline]
    pub(crate) fn pop_worst(&self) -> Option<TcbRef> {
        if self.len() == 0 {
            return None;
        }
        self.with(Tree::pop_min)
    }

    /// The ULT with the highest key, left in place: a hint for the prefetch of the ULT that will
    /// run next (`crate::prefetch`), stale as soon as the lock is released.
    #[inline]
    pub(crate) fn peek_best(&self) -> Option<TcbRef> {
        if self.len() == 0 {
            return None;
        }
        self.with(|tree| tree.top.hi.or(tree.max).or(tree.bottom.hi).or(tree.zeros.front()))
    }

    /// Takes up to `want(len)` entries of lowest key for a thief, lowest first.
    pub(crate) fn steal(&self, want: impl FnOnce(usize) -> usize, into: &mut Vec<TcbRef>) {
        if self.len() == 0 {
            return;
        }
        self.with(|tree| {
            let n = want(tree.len).min(tree.len);
            into.reserve(n);
            for _ in 0..n {
                if let Some(t) = tree.pop_min() {
                    into.push(t);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcb::Chunk;
    use std::sync::Arc;

    /// `n` TCBs, and the chunks holding them (boxed: each TCB points back to its chunk).
    #[allow(clippy::vec_box)]
    fn tcbs(n: usize) -> (Vec<Box<Chunk>>, Vec<TcbRef>) {
        let shared = Arc::new(());
        let chunks: Vec<Box<Chunk>> =
            (0..n.div_ceil(crate::tcb::CHUNK_TCBS)).map(|_| Chunk::allocate(&shared)).collect();
        let t = chunks.iter().flat_map(|c| c.tcbs()).take(n).collect();
        (chunks, t)
    }

    /// Checks the search order, the heap order, the parent links, the ends and the length.
    fn check(q: &RunQueue) {
        q.with(|tree| {
            fn walk(t: Option<TcbRef>, parent: Option<TcbRef>, out: &mut Vec<TcbRef>) {
                let Some(t) = t else { return };
                let l = link(t);
                assert_eq!(l.parent.get(), parent, "parent link");
                if let Some(p) = parent {
                    assert!(link(p).prio.get() >= l.prio.get(), "heap order");
                }
                walk(l.left.get(), Some(t), out);
                out.push(t);
                walk(l.right.get(), Some(t), out);
            }
            let mut order = Vec::new();
            walk(tree.root, None, &mut order);
            assert_eq!(order.len(), tree.tree_len);
            assert!(order.windows(2).all(|w| key(w[0]) <= key(w[1])), "search order");
            assert!(order.iter().all(|&t| key(t) > 0), "key 0 only in the zero lane");
            assert_eq!(tree.min, order.first().copied());
            assert_eq!(tree.max, order.last().copied());
            // The lanes: linked both ways; the top lane rising strictly and above the tree.
            fn walk_lane(lane: &Lane) -> Vec<TcbRef> {
                let mut out = Vec::new();
                let (mut at, mut below) = (lane.lo, None);
                while let Some(t) = at {
                    assert_eq!(link(t).left.get(), below, "lane back link");
                    out.push(t);
                    below = Some(t);
                    at = link(t).right.get();
                }
                assert_eq!(lane.hi, below);
                out
            }
            let zeros: Vec<TcbRef> = tree.zeros.iter().collect();
            let top = walk_lane(&tree.top);
            assert!(top.windows(2).all(|w| key(w[0]) <= key(w[1])), "top lane rises");
            if let (Some(&first), Some(&m)) = (top.first(), order.last()) {
                // (Equal only to newer tree entries, moved from the bottom lane.)
                assert!(key(first) >= key(m), "top lane above the tree");
            }
            let bottom = walk_lane(&tree.bottom);
            assert!(bottom.windows(2).all(|w| key(w[0]) <= key(w[1])), "bottom lane falls");
            assert!(bottom.iter().all(|&t| key(t) > 0), "key 0 only in the zero lane");
            if let Some(&last) = bottom.last() {
                if let Some(&m) = order.first().or(top.first()) {
                    assert!(key(last) <= key(m), "bottom lane at or below the rest");
                }
            }
            assert_eq!(tree.tree_len + zeros.len() + top.len() + bottom.len(), tree.len);
        });
    }

    /// The zero lane's ring keeps arrival order at both ends while it wraps around and grows
    /// (growing while wrapped, and in a batch push), checked against a `VecDeque`.
    #[test]
    fn the_zero_lane_ring_keeps_order_across_wraps_and_growth() {
        use std::collections::VecDeque;
        let (_chunks, t) = tcbs(300);
        let (mut lane, mut model) = (ZeroLane::new(), VecDeque::new());
        let mut next = t.iter().copied();
        let same = |lane: &ZeroLane, model: &VecDeque<TcbRef>| {
            assert!(lane.iter().eq(model.iter().copied()));
            assert_eq!(lane.front(), model.front().copied());
            assert!(lane.slots.len().is_power_of_two() && lane.len <= lane.slots.len());
        };
        // Fill 50 of 64 slots, take 40 from the front: the head is past the middle.
        for _ in 0..50 {
            let e = next.next().unwrap();
            lane.push_back(e);
            model.push_back(e);
        }
        for _ in 0..40 {
            assert_eq!(lane.pop_front(), model.pop_front());
        }
        same(&lane, &model);
        // Wrap around and grow while wrapped (to 128), then at the front.
        for i in 0..70 {
            let e = next.next().unwrap();
            if i % 3 == 0 {
                lane.push_front(e);
                model.push_front(e);
            } else {
                lane.push_back(e);
                model.push_back(e);
            }
            same(&lane, &model);
        }
        assert_eq!(lane.pop_back(), model.pop_back());
        // Batches: 7 and a last entry in, and every other round BATCH out, until the ring grows
        // within a batch push.
        for round in 0.. {
            if lane.slots.len() > 128 {
                break;
            }
            let mut first: Vec<Option<TcbRef>> = (0..BATCH - 1).map(|_| next.next()).collect();
            first.insert(3, None); // (a slot already empty is skipped)
            let last = next.next().unwrap();
            model.extend(first.iter().flatten().copied());
            model.push_back(last);
            assert_eq!(lane.push_back_batch(&mut first, last), BATCH);
            assert!(first.iter().all(Option::is_none), "the batch push takes its entries out");
            same(&lane, &model);
            let mut into = [None; BATCH];
            if round % 2 == 1 {
                lane.pop_front_batch(&mut into);
                assert!(into.iter().copied().eq(model.drain(..BATCH).map(Some)));
                same(&lane, &model);
            }
        }
        while let Some(e) = model.pop_front() {
            assert_eq!(lane.pop_front(), Some(e));
        }
        assert!(lane.is_empty() && lane.pop_front().is_none() && lane.pop_back().is_none());
    }

    #[test]
    fn orders_by_key_and_thieves_take_the_lowest() {
        let (_chunks, t) = tcbs(5);
        let q = RunQueue::new();
        for (key, &tcb) in [3u64, 1, 4, 1, 5].iter().zip(&t) {
            // t[1] and t[3] share key 1: t[1] arrived first and leaves the best end first.
            q.push(*key, tcb);
            check(&q);
        }
        assert_eq!(q.len(), 5);
        assert_eq!(q.pop_best(), Some(t[4]));
        let mut stolen = Vec::new();
        q.steal(|n| n / 2, &mut stolen);
        // The thief takes from the low end: the newer of the two key-1 entries first.
        assert_eq!(stolen, vec![t[3], t[1]]);
        check(&q);
        assert_eq!(q.pop_best(), Some(t[2]));
        assert_eq!(q.pop_best(), Some(t[0]));
        assert_eq!(q.pop_best(), None);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn equal_keys_leave_oldest_first() {
        let (_chunks, t) = tcbs(8);
        let q = RunQueue::new();
        for &tcb in &t {
            q.push(7, tcb);
        }
        check(&q);
        let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
        assert_eq!(out, t);
    }

    #[test]
    fn lifo_and_yield_keys() {
        // No Affinity: increasing entry numbers (a stack), and yields keyed 0 that queue up
        // behind everything in arrival order.
        let (_chunks, t) = tcbs(6);
        let q = RunQueue::new();
        q.push(1, t[0]);
        q.push(2, t[1]);
        q.push(0, t[2]);
        q.push(0, t[3]);
        q.push(3, t[4]);
        q.push(4, t[5]);
        check(&q);
        let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
        assert_eq!(out, vec![t[5], t[4], t[1], t[0], t[2], t[3]]);
    }

    /// Random pushes, pops and steals against a model (a list sorted by key, then arrival).
    #[test]
    fn matches_a_model_under_random_operations() {
        let (_chunks, t) = tcbs(300);
        let q = RunQueue::new();
        let mut model: Vec<(u64, u64, TcbRef)> = Vec::new(); // (key, arrival, tcb)
        let mut free: Vec<TcbRef> = t.clone();
        let mut arrival = 0u64;
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // Best first: highest key, then oldest arrival.
        let best = |m: &Vec<(u64, u64, TcbRef)>| {
            m.iter().enumerate().max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1))).map(|(i, _)| i)
        };
        let worst = |m: &Vec<(u64, u64, TcbRef)>| {
            m.iter().enumerate().min_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1))).map(|(i, _)| i)
        };
        // Miri interprets every step slowly: fewer steps still cover every operation many times.
        let steps = if cfg!(miri) { 1_500 } else { 20_000 };
        for step in 0..steps {
            match next() % 10 {
                0..=5 if !free.is_empty() => {
                    let tcb = free.pop().unwrap();
                    // A mix of key patterns: small ranges (many ties), increasing, zero,
                    // decreasing (with some jitter), ties at the top, the top keys rising
                    // (Reload Transient's reload transients of 0, ordered by the entry count;
                    // some jitter as well).
                    let key = match next() % 7 {
                        0 => next() % 8,
                        1 => arrival + 100,
                        2 => 0,
                        3 => 1_000_000 - 2 * arrival + next() % 5,
                        4 => u64::MAX,
                        5 => (u64::MAX << 61) | (arrival + next() % 4),
                        _ => next() % 1000,
                    };
                    q.push(key, tcb);
                    model.push((key, arrival, tcb));
                    arrival += 1;
                }
                6..=8 => {
                    let expect = best(&model).map(|i| model.remove(i).2);
                    let got = q.pop_best();
                    assert_eq!(got, expect, "pop at step {step}");
                    free.extend(got);
                }
                _ => {
                    let mut stolen = Vec::new();
                    q.steal(|n| n.div_ceil(3), &mut stolen);
                    for &s in &stolen {
                        let expect = worst(&model).map(|i| model.remove(i).2);
                        assert_eq!(Some(s), expect, "steal at step {step}");
                    }
                    free.extend(stolen);
                }
            }
            assert_eq!(q.len(), model.len());
            if step % 7 == 0 {
                check(&q);
            }
        }
    }

    /// The tree stays shallow: a sorted insertion order (the worst case of a plain search tree)
    /// gives a depth of a small multiple of log2(n). Falling keys stay in the top lane (the
    /// first went above everything); with a tree below them (one entry), a key just below the
    /// highest moves the rest into the tree, one after the other, in sorted order.
    #[test]
    fn stays_balanced_for_sorted_keys() {
        let n = if cfg!(miri) { 512 } else { 4096 };
        let (_chunks, t) = tcbs(n + 1);
        let q = RunQueue::new();
        q.with(|tree| {
            tree.len += 1;
            tree.push_tree(1, t[n]);
        });
        for (i, &tcb) in t[..n - 1].iter().enumerate() {
            q.push(10_000 - 2 * i as u64, tcb);
        }
        q.with(|tree| assert_eq!((tree.tree_len, tree.len), (1, n), "falling keys in the top lane"));
        q.push(9_999, t[n - 1]);
        check(&q);
        let depth = q.with(|tree| {
            assert_eq!(tree.tree_len, n - 1, "falling keys but the highest in the tree");
            fn depth(t: Option<TcbRef>) -> usize {
                t.map_or(0, |t| 1 + depth(link(t).left.get()).max(depth(link(t).right.get())))
            }
            depth(tree.root)
        });
        assert!(depth <= 40, "depth {depth} for {n} sorted keys (log2 <= 12)");
    }

    /// Rising keys stay in the top lane until a lower one comes, which moves those below it to
    /// the bottom lane (there is no tree).
    #[test]
    fn rising_keys_use_the_top_lane_until_a_lower_key_comes() {
        let (_chunks, t) = tcbs(6);
        let q = RunQueue::new();
        for (i, &tcb) in t[..4].iter().enumerate() {
            q.push(10 + i as u64, tcb);
        }
        q.with(|tree| assert_eq!((tree.tree_len, tree.len), (0, 4)));
        q.push(11, t[4]); // not above 13: the entry below 11 moves to the bottom lane (no tree)
        q.with(|tree| assert_eq!((tree.tree_len, tree.len, tree.bottom.hi), (0, 5, Some(t[0]))));
        q.push(20, t[5]); // above everything again
        q.with(|tree| assert_eq!(tree.tree_len, 0));
        check(&q);
        let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
        // 11 twice: t[1] (pushed first) before t[4].
        assert_eq!(out, vec![t[5], t[3], t[2], t[1], t[4], t[0]]);
    }

    /// Falling keys stay in the lanes (here the top lane: they began above everything), an
    /// equal lowest key goes to the bottom lane, served last, and a thief takes its newest
    /// first; a key within a lane's range moves the lane's part beyond it into the tree.
    #[test]
    fn falling_and_equal_keys_stay_in_the_lanes() {
        let (_chunks, t) = tcbs(7);
        let q = RunQueue::new();
        for (i, &tcb) in t[..4].iter().enumerate() {
            q.push(20 - 2 * i as u64, tcb); // 20, 18, 16, 14
        }
        q.push(14, t[4]); // equal to the lowest: below it, newer
        q.with(|tree| assert_eq!((tree.tree_len, tree.len), (0, 5)));
        q.push(30, t[5]); // above everything: the top lane
        q.with(|tree| assert_eq!((tree.tree_len, tree.len), (0, 6)));
        check(&q);
        let mut stolen = Vec::new();
        q.steal(|_| 1, &mut stolen);
        assert_eq!(stolen, vec![t[4]], "the newest of the lowest");
        q.push(19, t[6]); // within the top lane: its entries below move to the bottom lane
        q.with(|tree| {
            assert_eq!((tree.tree_len, tree.bottom.lo, tree.bottom.hi), (0, Some(t[3]), Some(t[1])))
        });
        check(&q);
        let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
        assert_eq!(out, vec![t[5], t[0], t[6], t[1], t[2], t[3]]);
    }

    /// Batches where most keys tie at the highest (Reload Transient's, before its ties were ordered
    /// newest first), the others fall below them in any order. With no tree, a key within the top
    /// lane's range moves the lane's entries below it to the bottom lane in one piece; a key within
    /// the bottom lane's range takes its place there after a short walk. Nothing enters the tree,
    /// and the order is the keys', equal keys oldest first.
    #[test]
    fn ties_at_the_top_after_lower_keys_stay_in_the_lanes() {
        let top = u64::MAX;
        let mut keys = vec![top, top];
        keys.extend((0..12).map(|i| 100 - i)); // falling: the top lane's low end
        keys.push(top); // past 12 entries below it: they go to the bottom lane
        keys.extend([95, 60, 50, top, 120, top, 40, 30, 97, top]);
        let (_chunks, t) = tcbs(keys.len());
        let q = RunQueue::new();
        for (i, (&k, &tcb)) in keys.iter().zip(&t).enumerate() {
            q.push(k, tcb);
            check(&q);
            q.with(|tree| {
                assert_eq!(tree.tree_len, 0, "after key {k}");
                match i {
                    // The falling 12 moved to the bottom lane.
                    14 => {
                        assert_eq!((tree.bottom.lo.map(key), tree.bottom.hi.map(key)), (Some(89), Some(100)))
                    }
                    // 95: in its place in the bottom lane, 5 entries from its high end.
                    15 => assert_eq!(tree.bottom.hi.map(key), Some(100)),
                    // 120 went to the top lane, then to the bottom lane.
                    19 => assert_eq!(tree.top.lo, Some(tcb)),
                    20 => assert_eq!(tree.bottom.hi, Some(t[19])),
                    _ => {}
                }
            });
        }
        let mut want: Vec<(u64, usize)> = keys.iter().copied().zip(0..).collect();
        want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let want: Vec<TcbRef> = want.iter().map(|&(_, i)| t[i]).collect();
        // A thief takes the lowest (newest of equal keys) first; the rest leave best first.
        let mut stolen = Vec::new();
        q.steal(|_| 2, &mut stolen);
        let n = want.len();
        assert_eq!(stolen, [want[n - 1], want[n - 2]]);
        check(&q);
        let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
        assert_eq!(out, want[..n - 2]);
    }

    /// A falling batch that began above everything stays in the top lane, one low entry among
    /// it (a releaser that ran long before the others) goes to the bottom lane, and so does an
    /// older entry below the batch, once.
    #[test]
    fn a_falling_batch_with_an_outlier_stays_in_the_lanes() {
        let (_chunks, t) = tcbs(9);
        let q = RunQueue::new();
        q.push(20, t[8]); // an older entry below the batch: the top lane, then the bottom lane
        for (&k, &tcb) in [90u64, 80, 70, 5, 60, 50, 45, 40].iter().zip(&t) {
            q.push(k, tcb);
            check(&q);
        }
        q.with(|tree| assert_eq!((tree.tree_len, tree.len), (0, 9), "20 moved to the bottom lane"));
        let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
        assert_eq!(out, vec![t[0], t[1], t[2], t[4], t[5], t[6], t[7], t[8], t[3]]);
    }

    /// One yield of `running` (key 0) through the yield batch, as the processor makes it: the
    /// ULT that runs next.
    fn yield_batched(q: &RunQueue, batch: &mut YieldBatch, running: TcbRef) -> TcbRef {
        match batch.swap(running) {
            Ok(n) => n,
            Err(t) => q.yield_refill(t, batch).expect("the yielder itself at least"),
        }
    }

    /// A round-robin of yields through the batch runs the ULTs in the order of one queue (the
    /// zero lane), each ULT either held by the batch or in the runqueue; the batch is taken only
    /// while it leaves `BATCH` entries for thieves; flushed, the runqueue holds every ULT in that
    /// order. (That a refill is the only acquisition of the lock in a batch is not checked here.)
    #[test]
    fn the_yield_batch_keeps_the_round_robin() {
        for n in [2, BATCH + 1, 2 * BATCH, 2 * BATCH + 1, 5 * BATCH + 3] {
            let (_chunks, t) = tcbs(n);
            let q = RunQueue::new();
            for &tcb in &t[1..] {
                q.push(0, tcb);
            }
            let mut model: std::collections::VecDeque<TcbRef> = t[1..].iter().copied().collect();
            let (mut batch, mut running) = (YieldBatch::new(), t[0]);
            for step in 0..10 * n {
                let next = yield_batched(&q, &mut batch, running);
                model.push_back(running);
                assert_eq!(Some(next), model.pop_front(), "n {n} step {step}: the oldest next");
                running = next;
                let held = if batch.is_empty() { 0 } else { BATCH - 1 }; // (the first runs)
                assert_eq!(q.len() + held, n - 1, "n {n} step {step}: every ULT once");
                if held > 0 {
                    assert!(q.len() >= BATCH, "n {n}: thieves keep at least BATCH");
                }
                // Sometimes flush, as the processor does when it leaves its chain of switches.
                if step % 7 == 3 {
                    q.flush_batch(&mut batch);
                    assert!(batch.is_empty());
                    check(&q);
                }
            }
            q.flush_batch(&mut batch);
            check(&q);
            let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
            assert_eq!(out, Vec::from(model), "n {n}: the order of one queue");
        }
    }

    /// A ULT pushed with a key while the batch holds ULTs goes before all of them
    /// (`push_flushing`), and the round-robin resumes in its order behind it.
    #[test]
    fn a_push_during_a_batch_orders_it_among_the_batch() {
        let n = 4 * BATCH;
        let (_chunks, t) = tcbs(n + 1);
        let q = RunQueue::new();
        for &tcb in &t[1..n] {
            q.push(0, tcb);
        }
        let (mut batch, mut running) = (YieldBatch::new(), t[0]);
        let mut order = Vec::new();
        for _ in 0..3 {
            running = yield_batched(&q, &mut batch, running);
            order.push(running);
        }
        assert!(!batch.is_empty());
        q.push_flushing(5, t[n], &mut batch);
        assert!(batch.is_empty());
        check(&q);
        assert_eq!(q.pop_best(), Some(t[n]), "the keyed entry first");
        // Then the ULTs after the three that ran, and those three (and t[0]) at the back.
        let rest: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
        let expected: Vec<TcbRef> = t[4..n].iter().chain(&t[..3]).copied().collect();
        assert_eq!((order, running), (vec![t[1], t[2], t[3]], t[3]));
        assert_eq!(rest, expected);
    }
}
