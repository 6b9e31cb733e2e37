//! The bound of a node's start-queue: a count of reserved slots that lets at most `limit` entries
//! in, under any number of concurrent spawners and takers, without a lock. Apart from the queue
//! itself (`queue::shared`) so that the loom model (`loom_models::start_levels`) runs this very
//! code.
//!
//! # Protocol
//!
//! ```text
//! reserve_many(n) (spawner, of one entry or a batch): c = len (load); c >= limit -> none
//!                    k = min(n, limit - c); prev = len.fetch_add(k)
//!                    prev >= limit -> len.fetch_sub(k); none
//!                    prev + k > limit -> len.fetch_sub(prev + k - limit); limit - prev are ours
//!                    otherwise all k are ours; the entries left over go one level up
//! release(n) (taker): after taking n entries: len.fetch_sub(n)
//! ```
//!
//! A reservation succeeds only when the count it found was below `limit`, and the count is never
//! below the number of reserved slots not yet released (a reservation's excess is added for a
//! moment, which only makes others see the queue full a little longer): a reservation keeps only
//! the slots its `fetch_add` found below `limit`, giving the rest back at once, so at most `limit`
//! slots are held at once, and an entry is pushed only into a held slot and released only after it
//! was taken. Relaxed suffices: a taker releases after its take in program order, and a spawner that
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
