//! The tree of a runqueue with its top and bottom lanes (the zero lane beside them): where a
//! push goes among them, and the treap beneath.
//!
//! The lanes hold the entries above and below the tree's range, so that a push at either end of
//! the whole order touches no tree node; a push inside a lane's range takes its place there after
//! a short walk ([`WALK`]) or moves the lane's entries beyond its key out of the way (see
//! [`Tree::push`]). Every entry enters the tree at most once per stay in the runqueue, and goes
//! from the top lane to the bottom lane at most once.
//!
//! The treap keeps pointers to its highest and lowest entries. Each removal at an end is O(1)
//! because an end has no child on its outer side: it is replaced by its one inner child, which
//! keeps both the search order and the heap order.

use super::batch::YieldBatch;
use super::lanes::{Lane, ZeroLane};
use super::{key, link};
use crate::tcb::TcbRef;

/// The most entries a push within a lane's range walks past to take its place in the lane,
/// before it moves them out of the way instead (see [`Tree::push_in_top_range`] and
/// [`Tree::push_in_bottom_range`]): a bound on the walk, which visits one control block per
/// entry, and keeps a push O(1).
const WALK: usize = 8;

/// The tree and the three lanes; touched only under the runqueue's lock.
pub(super) struct Tree {
    pub(super) root: Option<TcbRef>,
    /// The lowest key in the tree (the newest of equal lowest keys).
    pub(super) min: Option<TcbRef>,
    /// The highest key in the tree (the oldest of equal highest keys).
    pub(super) max: Option<TcbRef>,
    /// Entries in the tree.
    pub(super) tree_len: usize,
    /// The zero lane: entries of key 0, oldest at the front (see [`ZeroLane`]).
    pub(super) zeros: ZeroLane,
    /// The top lane: entries whose keys rose with each push and lie above the tree's, highest at
    /// `hi`.
    pub(super) top: Lane,
    /// The bottom lane: entries whose keys fell (or stayed) with each push and lie at or below
    /// the tree's, newest and lowest at `lo`.
    pub(super) bottom: Lane,
    /// Entries in the tree and the lanes.
    pub(super) len: usize,
    /// xorshift32 state for the priorities.
    rng: u32,
}

impl Tree {
    pub(super) const fn new() -> Tree {
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
    pub(super) fn push(&mut self, k: u64, t: TcbRef) {
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
            // into the tree, and without a walk first. (A batch whose keys fall with an entry
            // of a higher key among them.)
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
    pub(super) fn pop_max(&mut self) -> Option<TcbRef> {
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
    pub(super) fn pop_min(&mut self) -> Option<TcbRef> {
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

    /// [`pop_min`](Self::pop_min) with the key taken (0 for the zero lane, whose entries keep
    /// no key): what [`push`](Self::push) needs to put it back where it was.
    pub(super) fn pop_min_keyed(&mut self) -> Option<(u64, TcbRef)> {
        let zero = !self.zeros.is_empty();
        let t = self.pop_min()?;
        Some((if zero { 0 } else { key(t) }, t))
    }

    /// Whether every entry is in the zero lane.
    #[inline]
    pub(super) fn only_zeros(&self) -> bool {
        self.top.is_empty() && self.tree_len == 0 && self.bottom.is_empty()
    }

    /// [`RunQueue::flush_batch`](super::RunQueue::flush_batch) under the lock.
    #[cold]
    pub(super) fn put_back(&mut self, batch: &mut YieldBatch) {
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
    pub(super) fn push_tree(&mut self, k: u64, t: TcbRef) {
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
