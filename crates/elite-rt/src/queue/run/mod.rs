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
//!   and whatever a policy keys 0) in arrival order, in a ring ([`ZeroLane`](lanes::ZeroLane): a
//!   round-robin of yields reads no control block to find the next ULT). Key 0 is the lowest key
//!   there is, so the lane is the low end of the whole order: it serves only when the rest is
//!   empty, oldest first, and a thief takes from it first, newest first.
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
//! The lanes are there for the orders the policies actually produce, which the treap alone would
//! serve with its random-priority rotations on every operation: the zero lane for a round-robin
//! of yields among many ULTs (a yield goes behind everyone, the oldest yielder runs next), the
//! top lane for No Affinity's LIFO of wake-ups, the bottom lane and the top lane's low end for
//! the affinity policies' batches, made ready in rising or falling order round after round.
//!
//! The code is in four parts:
//!
//! * this file: the [`RunQueue`], its lock and the operations the processor calls;
//! * [`treap`]: the tree with its top and bottom lanes, and where a push goes among them;
//! * [`lanes`]: the two kinds of lane, a sorted list through the entries' [`RunLink`]s and the
//!   zero lane's ring;
//! * [`batch`]: the owner's [`YieldBatch`].
//!
//! # Protocol
//!
//! The owner and thieves serialize on a test-and-test-and-set spin lock held for a handful of
//! instructions (no user code under it, and no allocation but the zero lane's rare growth and a
//! thief's room for its take). The [`RunLink`] of a TCB is written only under the lock of the
//! runqueue holding it (or before it is pushed, by the pusher, which owns it). `len` is updated
//! under the lock and read without it by thieves and by the idle check, as a hint only.
//!
//! The owner's [`YieldBatch`] holds ready ULTs of key 0 outside the runqueue, like the
//! processor's `next` slot: up to [`BATCH`] of them, taken and put back under the lock, and
//! otherwise touched by the owner alone (its docs say when they go back).

use crate::atomics::{AtomicBool, AtomicUsize, Ordering};
use crate::tcb::TcbRef;
use crossbeam_utils::Backoff;
use std::cell::{Cell, UnsafeCell};
use treap::Tree;

mod batch;
mod lanes;
#[cfg(test)]
mod tests;
mod treap;

pub(crate) use batch::{YieldBatch, BATCH, REFILL_FROM};

/// The links of a TCB in a runqueue's tree or in its top or bottom lane; meaningful only while
/// it is in one (an entry of the zero lane has none: see [`ZeroLane`](lanes::ZeroLane)).
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
    &t.tcb().sched.run_link
}

#[inline]
fn key(t: TcbRef) -> u64 {
    link(t).key.get()
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

    #[inline(always)]
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
    #[inline(always)]
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

    /// Gives every entry a new key, under one acquisition of the lock (a policy switch:
    /// `Processor::follow_policy`): the zero lane's entries (yielders behind everyone) keep
    /// key 0 and their order; each other entry gets `key(t)`, asked lowest key first (so a
    /// policy that numbers its entries, as No Affinity does, keeps their order). `buf` is room
    /// the caller lends, left empty. Nothing enters or leaves the queue.
    pub(crate) fn rekey(&self, mut key: impl FnMut(TcbRef) -> u64, buf: &mut Vec<TcbRef>) {
        if self.len() == 0 {
            return;
        }
        self.with(|tree| {
            let (len, zeros) = (tree.len, tree.zeros.len);
            buf.clear();
            buf.reserve(len);
            while let Some(t) = tree.pop_min() {
                buf.push(t); // the zero lane's first, newest first; then the rest, lowest first
            }
            debug_assert_eq!((buf.len(), tree.len), (len, 0));
            buf[..zeros].reverse();
            for (i, &t) in buf.iter().enumerate() {
                tree.push(if i < zeros { 0 } else { key(t) }, t);
            }
            buf.clear();
        });
    }

    /// [`steal`](Self::steal), but an entry for which `spare(t, ahead)` is true stays, with
    /// its key (`ahead`: the entries left that run before it); `kept` is room the caller lends,
    /// left empty. Returns how many stayed.
    pub(crate) fn steal_sparing(
        &self,
        want: impl FnOnce(usize) -> usize,
        mut spare: impl FnMut(TcbRef, usize) -> bool,
        into: &mut Vec<TcbRef>,
        kept: &mut Vec<(u64, TcbRef)>,
    ) -> usize {
        if self.len() == 0 {
            return 0;
        }
        self.with(|tree| {
            let n = want(tree.len).min(tree.len);
            kept.clear();
            for _ in 0..n {
                let Some((k, t)) = tree.pop_min_keyed() else { break };
                if spare(t, tree.len) {
                    kept.push((k, t));
                } else {
                    into.push(t);
                }
            }
            let spared = kept.len();
            // Back in the reverse order of their taking: each where it was.
            for (k, t) in kept.drain(..).rev() {
                tree.push(k, t);
            }
            spared
        })
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
