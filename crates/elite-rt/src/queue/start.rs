//! Start-queues: ULTs that have never run and therefore own no stack yet.
//!
//! Three levels mirror the memory hierarchy (ELiTE figure 2.2):
//!
//! * each processor's own queue: a bounded LIFO deque ([`super::deque`]), pushed and popped by its
//!   owner, stolen from the oldest end by idle processors;
//! * each node's queue: bounded, shared by the processors of the node;
//! * the global queue: unbounded.
//!
//! A spawn that finds a level full goes to the next one. A node's bound is a count of reserved
//! slots ([`super::bound`]): reserve, then push, so concurrent spawners never overshoot it.

use crate::queue::bound::Bound;
use crate::queue::deque::{Deque, Stolen};
use crate::tcb::{Tcb, TcbRef};
use crossbeam_deque::{Injector, Steal, Worker};

/// A node's bounded start-queue.
pub(crate) struct NodeStartQueue {
    queue: Injector<TcbRef>,
    bound: Bound,
}

impl NodeStartQueue {
    pub(crate) fn new(limit: usize) -> NodeStartQueue {
        NodeStartQueue { queue: Injector::new(), bound: Bound::new(limit) }
    }

    /// Pushes `t` unless the queue is full; gives it back if it is.
    #[inline]
    pub(crate) fn try_push(&self, t: TcbRef) -> Result<(), TcbRef> {
        if !self.bound.reserve() {
            return Err(t);
        }
        self.queue.push(t);
        Ok(())
    }

    /// Takes the oldest entry and moves up to `room - 1` more into `staging` (a deque nobody else
    /// can reach, so its length counts them exactly); returns the entry and how many were taken.
    #[inline]
    pub(crate) fn take_batch(&self, staging: &Worker<TcbRef>, room: usize) -> Option<(TcbRef, usize)> {
        if room <= 1 {
            return self.take().map(|t| (t, 1));
        }
        let (t, n) = take_global_batch(&self.queue, staging, room)?;
        self.bound.release(n);
        Some((t, n))
    }

    /// Takes the oldest entry.
    #[inline]
    pub(crate) fn take(&self) -> Option<TcbRef> {
        if self.queue.is_empty() {
            return None;
        }
        loop {
            match self.queue.steal() {
                Steal::Success(t) => {
                    self.bound.release(1);
                    return Some(t);
                }
                Steal::Empty => return None,
                Steal::Retry => std::hint::spin_loop(),
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// Takes the oldest entry of an injector and moves up to `room - 1` more into `staging`, which must
/// be empty and private to the caller (no stealer of it is handed out), so that its length counts
/// the moved entries exactly; returns the entry and how many were taken in all.
#[inline]
pub(crate) fn take_global_batch(
    q: &Injector<TcbRef>,
    staging: &Worker<TcbRef>,
    room: usize,
) -> Option<(TcbRef, usize)> {
    if q.is_empty() {
        return None;
    }
    if room <= 1 {
        return take_global(q).map(|t| (t, 1));
    }
    debug_assert!(staging.is_empty());
    loop {
        match q.steal_batch_with_limit_and_pop(staging, room) {
            Steal::Success(t) => return Some((t, 1 + staging.len())),
            Steal::Empty => return None,
            Steal::Retry => std::hint::spin_loop(),
        }
    }
}

/// Takes the oldest entry of an unbounded injector.
#[inline]
pub(crate) fn take_global(q: &Injector<TcbRef>) -> Option<TcbRef> {
    if q.is_empty() {
        return None;
    }
    loop {
        match q.steal() {
            Steal::Success(t) => return Some(t),
            Steal::Empty => return None,
            Steal::Retry => std::hint::spin_loop(),
        }
    }
}

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
