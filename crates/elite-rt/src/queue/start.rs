//! Start-queues: ULTs that have never run and therefore own no stack yet.
//!
//! Three levels mirror the memory hierarchy (ELiTE figure 2.2):
//!
//! * each processor's own queue: a bounded LIFO deque ([`super::deque`]), pushed and popped by its
//!   owner, stolen from the oldest end by idle processors;
//! * each node's queue: bounded, shared by the processors of the node;
//! * the global queue: unbounded.
//!
//! The node and global levels are one structure ([`super::shared`]): a FIFO under a lock with a
//! length hint read without it, taken from up to [`super::shared::TAKE_MAX`] entries at a time.
//! A spawn that finds its own queue full moves the queue's oldest half down to the node in one
//! batch ([`super::deque::Deque::take_oldest`], one claim against the thieves), and what the node
//! cannot hold on to the global level. A node's bound is a count of reserved slots
//! ([`super::bound`]): reserve, then push, so concurrent spawners never overshoot it.

use crate::queue::deque::{Deque, Stolen};
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
