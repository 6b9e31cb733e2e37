//! Hold times: what a lock's recent holders held it for, which its waiters read to decide
//! whether to spin.
//!
//! The lock keeps the hold times (in time-stamp ticks) of its last 8 measured acquisitions. Only
//! acquisitions that waited (those of `lock_contended`) are counted, and one in eight of them is
//! measured; an uncontended lock neither counts nor measures: a time stamp costs about as much as
//! the lock itself (a time-stamp counter read takes tens of cycles, and a measured hold takes
//! two, where an uncontended lock and unlock are one CAS each, or a dozen plain instructions on
//! the processor the lock is biased to): measuring even one uncontended acquisition in eight
//! would slow every uncontended loop, for an average that only waiters read. Their average
//! drives the adaptive spin policy: above the threshold (half a measured context switch) a
//! waiter blocks at once. After a quiet spell it is that of the last contended one, until new
//! samples replace it.
//!
//! The counter and the `measuring` flag sit on the lock's hot line (`Mutex::count`,
//! `Mutex::measuring`), the samples and their average in its cold lines (`Cold`).

use super::Mutex;
use crate::atomics::Ordering;
use crate::sync::ticks;

/// Holder-only bookkeeping of hold times (of the measured acquisitions only).
pub(super) struct Holds {
    /// Time stamp of the current acquisition, when it is measured.
    since: u64,
    samples: [u64; 8],
    pub(super) next: usize,
}

impl Holds {
    pub(super) const fn new() -> Holds {
        Holds { since: 0, samples: [0; 8], next: 0 }
    }
}

impl<T: ?Sized> Mutex<T> {
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub(super) fn holds(&self) -> &mut Holds {
        // SAFETY: only the holder of the lock calls this, and not across another call to it.
        unsafe { &mut *self.cold.holds.get() }
    }

    /// Counts this acquisition, one that waited (`lock_contended`), and starts measuring its
    /// hold time if it is one of the sampled ones.
    #[inline]
    pub(super) fn begin_contended_hold(&self) {
        // SAFETY: only the holder of the lock reads or writes the counter.
        let c = unsafe { &mut *self.count.get() };
        *c = c.wrapping_add(1);
        if c.is_multiple_of(8) {
            // SAFETY: only the holder of the lock reads or writes the flag.
            unsafe { *self.measuring.get() = true };
            self.holds().since = ticks();
        }
    }

    /// The average hold time (ticks) of the last 8 measured acquisitions.
    pub(crate) fn average_hold(&self) -> u64 {
        self.cold.avg_hold.load(Ordering::Relaxed)
    }

    /// Records the hold time if this acquisition was measured.
    #[inline]
    pub(super) fn record_hold(&self) {
        // SAFETY: only the holder of the lock reads or writes the flag.
        if unsafe { *self.measuring.get() } {
            self.record_measured_hold();
        }
    }

    /// [`Mutex::record_hold`] of a measured acquisition, out of line.
    #[inline(never)]
    fn record_measured_hold(&self) {
        // SAFETY: only the holder of the lock reads or writes the flag.
        unsafe { *self.measuring.get() = false };
        let h = self.holds();
        let held = ticks().wrapping_sub(h.since);
        h.samples[h.next] = held;
        h.next = (h.next + 1) % 8;
        self.cold.avg_hold.store(h.samples.iter().sum::<u64>() / 8, Ordering::Relaxed);
    }
}
