//! The owner's yield batch: ULTs of key 0 taken out of the runqueue's zero lane a batch at a
//! time, so that a round-robin of yields takes the runqueue's lock once per batch.

use crate::tcb::TcbRef;

/// Most ULTs a [`YieldBatch`] takes from the runqueue at once.
pub(crate) const BATCH: usize = 8;

/// Entries a refill ([`RunQueue::yield_refill`]) needs in the zero lane, and nowhere else, to
/// take a batch: it leaves at least [`BATCH`] of them for thieves.
///
/// [`RunQueue::yield_refill`]: super::RunQueue::yield_refill
pub(crate) const REFILL_FROM: usize = 2 * BATCH;

/// The owner's yield batch: ready ULTs of key 0 (yields under No Affinity and Minimum Misses)
/// taken from the zero lane [`BATCH`] at a time, and the ULTs that yielded since, which go back
/// to the zero lane with the next refill. So a round-robin of many yielding ULTs takes the
/// runqueue's lock once per [`BATCH`] yields instead of once per yield (the lock's atomic
/// exchange weighs much in the cost of a yield).
///
/// The entries are the owner's alone, like the processor's `next` slot: not in the runqueue,
/// not counted in its `len`, invisible to thieves. So a refill takes a batch only when it
/// leaves at least [`BATCH`] entries for thieves (the zero lane holds [`REFILL_FROM`] or more, and
/// nothing else is queued: the batch is then the runqueue's best), and the owner puts the batch
/// back ([`RunQueue::flush_batch`], [`RunQueue::push_flushing`]) before anything else enters its
/// runqueue and whenever it leaves its chain of switches (a return to the loop, a blocking
/// call's hand-over): the runqueue's order is then exactly what one lock per yield would have
/// made, and the loop, the idle check and the shutdown see every ready ULT in the runqueue.
///
/// [`RunQueue::flush_batch`]: super::RunQueue::flush_batch
/// [`RunQueue::push_flushing`]: super::RunQueue::push_flushing
pub(crate) struct YieldBatch {
    /// The batch, oldest first: `slots[head..end]` were taken and have not run yet;
    /// `slots[..head]` yielded since the refill (each yield takes the place of the ULT it
    /// passes the processor to, so the yielded ones stay in the order they yielded).
    pub(super) slots: [Option<TcbRef>; BATCH],
    /// The next taken ULT to run; the yielded ones before it.
    pub(super) head: usize,
    /// One past the last taken ULT; 0 when the batch is empty.
    pub(super) end: usize,
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
