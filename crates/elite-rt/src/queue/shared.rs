//! A start-queue level shared by several processors (a node's, or the runtime's global one): a
//! FIFO under a lock, with a length hint readable without it, taken from in batches.
//!
//! # Protocol
//!
//! ```text
//! push_batch (spawner): k = bound.reserve_many(n)      (unbounded level: k = n)
//!                       lock; push the k oldest at the back; hint = len; unlock
//!                       the n - k left over go one level up
//! take_batch (taker):   hint == 0 (Relaxed)            -> nothing, without the lock
//!                       lock; pop up to `max` at the front; hint = len; unlock
//!                       bound.release(taken)
//! ```
//!
//! Every entry moves under the lock, so each is taken exactly once, and a taker gets the entries
//! in the order they were pushed (oldest first), one synchronization for up to [`TAKE_MAX`] of
//! them. The lock also orders what a spawner wrote into a TCB before its push before what the
//! taker reads after its take. The hint is written under the lock and read without it: a reader
//! that sees 0 while a push is in flight misses that entry only for the moment. Whoever pushed
//! goes on to notify an idle processor (`Shared::notify_any`), whose idle check reads the hint
//! after its own fence (see `crate::park`): a store before the waker's `SeqCst` fence and a load
//! after the parker's fence, so either the parker sees the entry or the waker sees it parked. The
//! bound (`queue::bound`) keeps a node's level within its limit without the lock: reserve, then
//! push; take, then release.

use crate::atomics::{AtomicUsize, Ordering};
use crate::queue::bound::Bound;
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use std::sync::Mutex;

/// Most entries one take moves out of a shared level.
pub(crate) const TAKE_MAX: usize = 16;

/// Entries' room a level keeps when a take empties it (more is given back to the allocator).
const KEEP_CAPACITY: usize = 4096;

/// A shared start-queue level of node pointers (never null).
pub(crate) struct SharedStartQueue<N> {
    /// Entries queued, written under the lock: a hint for whoever reads it without the lock.
    hint: CachePadded<AtomicUsize>,
    queue: Mutex<VecDeque<*mut N>>,
    /// The level's limit (a node's level); `None`: unbounded (the global level).
    bound: Option<Bound>,
}

// SAFETY: the queue holds addresses only; what may be done with the nodes is the caller's protocol
// (a TCB moves to whoever takes it).
unsafe impl<N> Send for SharedStartQueue<N> {}
// SAFETY: as above; the entries are reached only under the lock, the hint is atomic.
unsafe impl<N> Sync for SharedStartQueue<N> {}

impl<N> SharedStartQueue<N> {
    /// A level holding at most `limit` entries at once; `None`: unbounded.
    pub(crate) fn new(limit: Option<usize>) -> SharedStartQueue<N> {
        SharedStartQueue {
            hint: CachePadded::new(AtomicUsize::new(0)),
            queue: Mutex::new(VecDeque::new()),
            bound: limit.map(Bound::new),
        }
    }

    fn lock(&self) -> impl std::ops::DerefMut<Target = VecDeque<*mut N>> + '_ {
        // Nothing under the lock panics (pushes and pops of addresses; an allocation failure
        // aborts), so a poisoned lock cannot happen; take the data anyway rather than propagate.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bound's promise (checked in debug builds, hence by the loom models): never more
    /// entries queued than the limit.
    #[inline]
    fn check_bound(&self, len: usize) {
        if let Some(b) = &self.bound {
            debug_assert!(len <= b.limit(), "{len} entries queued, the limit is {}", b.limit());
        }
    }

    /// True when no entry looks queued (a hint: without the lock).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.hint.load(Ordering::Relaxed) == 0
    }

    /// Pushes `n` unless the level is full; gives it back if it is.
    #[inline]
    pub(crate) fn push(&self, n: *mut N) -> Result<(), *mut N> {
        if self.push_batch(&[n]) == 1 {
            Ok(())
        } else {
            Err(n)
        }
    }

    /// Pushes the entries of `batch` (oldest first) under one lock, as many as the bound lets in;
    /// returns how many went in (the first ones): the rest belong one level up.
    pub(crate) fn push_batch(&self, batch: &[*mut N]) -> usize {
        let k = match &self.bound {
            Some(b) => b.reserve_many(batch.len()),
            None => batch.len(),
        };
        if k > 0 {
            let mut q = self.lock();
            q.extend(&batch[..k]);
            self.check_bound(q.len());
            self.hint.store(q.len(), Ordering::Relaxed);
        }
        k
    }

    /// Takes up to `max` (at most [`TAKE_MAX`]) of the oldest entries into `into`, oldest first;
    /// returns how many. `max` 0 takes nothing.
    #[inline]
    pub(crate) fn take_batch(&self, max: usize, into: &mut [*mut N; TAKE_MAX]) -> usize {
        if self.is_empty() || max == 0 {
            return 0;
        }
        let n = {
            let mut q = self.lock();
            let n = q.len().min(max).min(TAKE_MAX);
            for (slot, e) in into.iter_mut().zip(q.drain(..n)) {
                *slot = e;
            }
            if q.is_empty() && q.capacity() > KEEP_CAPACITY {
                // Drained after a burst (a million spawns leave 8 MB of ring here): give the
                // memory back, keeping room for ordinary overflow.
                q.shrink_to(KEEP_CAPACITY);
            }
            self.hint.store(q.len(), Ordering::Relaxed);
            n
        };
        if n > 0 {
            if let Some(b) = &self.bound {
                b.release(n);
            }
        }
        n
    }

    /// Takes the oldest entry.
    #[inline]
    pub(crate) fn take(&self) -> Option<*mut N> {
        let mut one = [std::ptr::null_mut(); TAKE_MAX];
        (self.take_batch(1, &mut one) == 1).then_some(one[0])
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn p(i: usize) -> *mut u8 {
        i as *mut u8
    }

    #[test]
    fn fifo_in_batches_within_the_bound() {
        let q: SharedStartQueue<u8> = SharedStartQueue::new(Some(3));
        assert!(q.is_empty());
        assert_eq!(q.push(p(1)), Ok(()));
        assert_eq!(q.push_batch(&[p(2), p(3), p(4)]), 2);
        assert_eq!(q.push(p(5)), Err(p(5)));
        let mut buf = [std::ptr::null_mut(); TAKE_MAX];
        assert_eq!(q.take_batch(2, &mut buf), 2);
        assert_eq!(&buf[..2], &[p(1), p(2)]);
        assert!(!q.is_empty());
        assert_eq!(q.push_batch(&[p(6), p(7), p(8)]), 2);
        assert_eq!(q.take(), Some(p(3)));
        assert_eq!(q.take_batch(TAKE_MAX, &mut buf), 2);
        assert_eq!(&buf[..2], &[p(6), p(7)]);
        assert!(q.is_empty());
        assert_eq!(q.take(), None);
    }

    #[test]
    fn unbounded_takes_at_most_take_max() {
        let q: SharedStartQueue<u8> = SharedStartQueue::new(None);
        let all: Vec<_> = (1..=40).map(p).collect();
        assert_eq!(q.push_batch(&all), 40);
        let mut buf = [std::ptr::null_mut(); TAKE_MAX];
        assert_eq!(q.take_batch(usize::MAX, &mut buf), TAKE_MAX);
        assert_eq!(&buf[..], &all[..TAKE_MAX]);
    }

    #[test]
    fn a_drained_level_gives_back_what_a_burst_grew() {
        let q: SharedStartQueue<u8> = SharedStartQueue::new(None);
        let all: Vec<_> = (1..=3 * KEEP_CAPACITY).map(p).collect();
        assert_eq!(q.push_batch(&all), all.len());
        let mut buf = [std::ptr::null_mut(); TAKE_MAX];
        let mut taken = 0;
        while q.take_batch(TAKE_MAX, &mut buf) > 0 {
            taken += 1;
        }
        assert_eq!(taken, all.len().div_ceil(TAKE_MAX));
        assert!(q.lock().capacity() <= 2 * KEEP_CAPACITY, "{}", q.lock().capacity());
    }
}
