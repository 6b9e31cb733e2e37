//! The bound of a node's start-queue: a count of reserved slots that lets at most `limit` entries
//! in, under any number of concurrent spawners and takers, without a lock. Apart from the queue
//! itself (`queue::shared`) so that the loom model
//! (`loom_models::start_levels`) runs this very code.
//!
//! # Protocol
//!
//! ```text
//! reserve (spawner): len >= limit (load)      -> full: the entry goes one level up
//!                    len.fetch_add(1) >= limit -> len.fetch_sub(1); full
//!                    otherwise the slot is ours: push the entry
//! reserve_many(n) (spawner moving a batch): c = len (load); c >= limit -> none
//!                    k = min(n, limit - c); prev = len.fetch_add(k)
//!                    prev >= limit -> len.fetch_sub(k); none
//!                    prev + k > limit -> len.fetch_sub(prev + k - limit); limit - prev are ours
//!                    otherwise all k are ours
//! release(n) (taker): after taking n entries: len.fetch_sub(n)
//! ```
//!
//! A reservation succeeds only when the count it found was below `limit`, and the count is never
//! below the number of reserved slots not yet released (a failed reservation adds one for a
//! moment, which only makes others see the queue full a little longer): so at most `limit` slots
//! are held at once, and an entry is pushed only into a held slot and released only after it was
//! taken. A batch reservation keeps only the slots its `fetch_add` found below `limit` (giving
//! the rest back at once), so the same holds for it. Relaxed suffices: a taker releases after its take in program order, and a spawner that
//! reads the released count cannot push before that take in the queue's own order (its push would
//! then happen before the release it read). The first load keeps a spawner that keeps overflowing
//! while the queue stays full from writing the line that takers update.

use crate::atomics::{AtomicUsize, Ordering};

/// The reserved-slot count of a bounded queue.
pub(crate) struct Bound {
    len: AtomicUsize,
    limit: usize,
}

impl Bound {
    /// A bound of `limit` entries, none reserved.
    pub(crate) fn new(limit: usize) -> Bound {
        Bound { len: AtomicUsize::new(0), limit }
    }

    /// Reserves a slot for one push; false when the queue is full.
    #[inline]
    pub(crate) fn reserve(&self) -> bool {
        if self.len.load(Ordering::Relaxed) >= self.limit {
            return false;
        }
        if self.len.fetch_add(1, Ordering::Relaxed) >= self.limit {
            self.len.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Reserves slots for up to `n` pushes; returns how many it got (0 when the queue is full).
    #[inline]
    pub(crate) fn reserve_many(&self, n: usize) -> usize {
        let c = self.len.load(Ordering::Relaxed);
        if c >= self.limit || n == 0 {
            return 0;
        }
        let k = n.min(self.limit - c);
        let prev = self.len.fetch_add(k, Ordering::Relaxed);
        if prev >= self.limit {
            self.len.fetch_sub(k, Ordering::Relaxed);
            return 0;
        }
        if prev + k > self.limit {
            self.len.fetch_sub(prev + k - self.limit, Ordering::Relaxed);
            return self.limit - prev;
        }
        k
    }

    /// The most entries the queue may hold.
    #[inline]
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Gives back the slots of `n` entries the caller took.
    #[inline]
    pub(crate) fn release(&self, n: usize) {
        self.len.fetch_sub(n, Ordering::Relaxed);
    }
}
