//! Start-queues: ULTs that have never run and therefore own no stack yet.
//!
//! Three levels mirror the memory hierarchy (ELiTE figure 2.2):
//!
//! * each processor's own queue (`Remote::start`): a bounded LIFO deque ([`super::deque`]), pushed
//!   and popped by its owner; idle processors steal its oldest entry ([`steal_one`]);
//! * each node's queue ([`NodeStart`], `Shared::nodes[i].start`): bounded, shared by the
//!   processors of the node;
//! * the global queue ([`GlobalStart`], `Shared::global_start`): unbounded, shared by every
//!   processor and by spawns from outside the runtime.
//!
//! The node and global levels are one structure ([`super::shared`]): a FIFO under a lock with a
//! length hint read without it, taken from up to [`TAKE_MAX`] entries at a time. A node's bound
//! is a count of reserved slots ([`super::bound`]): reserve, then push, so concurrent spawners
//! never overshoot it.
//!
//! # Spill rule
//!
//! A spawn pushes on its processor's own queue. One that finds the queue full moves the queue's
//! oldest half down to the node in one batch ([`super::deque::Deque::take_oldest`], one claim
//! against the thieves), and what the node cannot hold goes on to the global level
//! ([`GlobalStart::push_batch`]); then the new ULT goes on the own queue. The newest entries stay
//! where their spawner starts them next; the oldest, which it would start last, go where other
//! processors take them. (The processor's `push_start_overflow` carries this out, counting what
//! went where.)
//!
//! # Taking
//!
//! A processor looks at its own queue first, then its node's, then the global level; from a
//! shared level it takes a batch, runs the oldest entry and puts the rest on its own queue (as
//! much as that has room for). Every so many steps the shared levels go first, so that a
//! processor busy with its own spawns still serves them.

use crate::queue::deque::{Deque, Stolen};
use crate::queue::shared::{SharedStartQueue, TAKE_MAX};
use crate::tcb::{Tcb, TcbRef};

/// Steals the oldest entry of a processor's start-queue.
#[inline]
pub(crate) fn steal_one(d: &Deque<Tcb>) -> Option<TcbRef> {
    loop {
        match d.steal() {
            Stolen::Success(t) => return TcbRef::from_ptr(t),
            Stolen::Empty => return None,
            Stolen::Retry => std::hint::spin_loop(),
        }
    }
}

/// A node's start-queue: bounded (`RuntimeBuilder`'s node start-queue limit); a push that finds
/// it full gets its entry back, for the global level.
pub(crate) type NodeStart = SharedStartQueue<Tcb>;

/// The global start-queue: unbounded, so a push always goes in.
pub(crate) struct GlobalStart(SharedStartQueue<Tcb>);

impl GlobalStart {
    pub(crate) fn new() -> GlobalStart {
        GlobalStart(SharedStartQueue::new(None))
    }

    /// Pushes a never-started ULT.
    #[inline]
    pub(crate) fn push(&self, t: *mut Tcb) {
        let pushed = self.0.push(t).is_ok();
        debug_assert!(pushed, "the global start-queue is unbounded");
    }

    /// Pushes never-started ULTs (oldest first) under one lock.
    pub(crate) fn push_batch(&self, batch: &[*mut Tcb]) {
        let pushed = self.0.push_batch(batch);
        debug_assert_eq!(pushed, batch.len(), "the global start-queue is unbounded");
    }

    /// True when no entry looks queued (a hint: without the lock).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Takes up to `max` (at most [`TAKE_MAX`]) of the oldest entries into `into`, oldest first;
    /// returns how many.
    #[inline]
    pub(crate) fn take_batch(&self, max: usize, into: &mut [*mut Tcb; TAKE_MAX]) -> usize {
        self.0.take_batch(max, into)
    }

    /// Takes the oldest entry.
    #[inline]
    pub(crate) fn take(&self) -> Option<*mut Tcb> {
        self.0.take()
    }
}
