//! The wake-up stack of a processor: a lock-free stack of TCBs onto which whoever unblocks a ULT
//! pushes it (onto the stack of the processor the policy picks), and which only the owning
//! processor drains.
//!
//! The stack underneath, [`LinkStack`], also carries the **clean-up stack** (a joiner pushes its
//! clean-up notes onto the stack of the processor whose deathrow holds the TCBs, in batches:
//! `queue::cleanup`). ELiTE (section 2.2) chose stacks because a push touches a single cache line
//! of the owner.
//!
//! # Protocol
//!
//! * `push(t)`: `t.next = head` then `compare_exchange(head, t)` with `Release` on success, retrying
//!   with the freshly read head. The `Release` publishes everything the pusher wrote before (the TCB's
//!   fields, the reason it was woken).
//! * `drain()`: `swap(head, null)` with `Acquire` takes the whole list at once; the owner then walks
//!   it privately. Because nobody pops single entries, there is no ABA: a TCB can reappear on the
//!   stack only after the drain that took it.
//! * `drain_stranded()`: the same swap, by an idle processor that takes the wake-ups of one that
//!   has been running one ULT all the while since they were pushed (`processor::find`, "Stranded
//!   ULTs"). Two drains are two swaps: each takes what was pushed before it and after the other,
//!   so every entry is taken once, whoever drains (the loom model `wakeup_stack_two_drainers`).
//!
//! [`LinkStack`] is generic over [`Link`] (a pointer to a node that carries the stack's `next`
//! field), so that the loom model (`loom_models::wakeup`) runs this very code on light test nodes;
//! the runtime uses [`WakeupStack`], its instance for [`TcbRef`], for wake-ups, and an instance for
//! note batches for clean-up notes (`queue::cleanup`), at no cost.

use crate::atomics::{AtomicPtr, Ordering};
#[cfg(not(loom))]
use crate::tcb::{Tcb, TcbRef};
use std::ptr;

/// A pointer to a node that a [`LinkStack`] can hold: a copyable address whose node has a `next` link
/// that only the stack touches while the node is on it, and that outlives every holder of the pointer
/// (as a TCB outlives every [`TcbRef`]).
pub(crate) trait Link: Copy {
    /// The node pointed to.
    type Node;

    /// The node's address.
    fn as_ptr(self) -> *mut Self::Node;

    /// The pointer back from an address taken by [`Link::as_ptr`]; `None` for null.
    fn from_ptr(p: *mut Self::Node) -> Option<Self>;

    /// The node's `next` link.
    fn next<'a>(self) -> &'a AtomicPtr<Self::Node>;
}

#[cfg(not(loom))]
impl Link for TcbRef {
    type Node = Tcb;

    #[inline]
    fn as_ptr(self) -> *mut Tcb {
        TcbRef::as_ptr(self)
    }

    #[inline]
    fn from_ptr(p: *mut Tcb) -> Option<TcbRef> {
        TcbRef::from_ptr(p)
    }

    #[inline]
    fn next<'a>(self) -> &'a AtomicPtr<Tcb> {
        &self.tcb().links.next
    }
}

/// The wake-up stack of a processor: TCBs linked through `Tcb::next`.
#[cfg(not(loom))]
pub(crate) type WakeupStack = LinkStack<TcbRef>;

/// A Treiber stack of nodes linked through [`Link::next`].
pub(crate) struct LinkStack<L: Link> {
    head: AtomicPtr<L::Node>,
}

impl<L: Link> LinkStack<L> {
    pub(crate) fn new() -> LinkStack<L> {
        LinkStack { head: AtomicPtr::new(ptr::null_mut()) }
    }

    /// Pushes `t`. Any thread may push.
    #[inline]
    pub(crate) fn push(&self, t: L) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            t.next().store(head, Ordering::Relaxed);
            match self.head.compare_exchange_weak(head, t.as_ptr(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// True if nothing is on the stack (a hint: a push may land right after).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed).is_null()
    }

    /// Takes every entry, newest first. Only the owner calls this.
    #[inline]
    pub(crate) fn drain(&self) -> Drain<L> {
        if self.is_empty() {
            return Drain { next: ptr::null_mut() };
        }
        Drain { next: self.head.swap(ptr::null_mut(), Ordering::Acquire) }
    }

    /// The newest entry, left in place (null: none): a hint for a processor watching for
    /// stranded wake-ups.
    #[inline]
    pub(crate) fn peek(&self) -> *mut L::Node {
        self.head.load(Ordering::Relaxed)
    }

    /// Takes every entry, newest first, from another processor than the owner: the wake-ups of
    /// an owner that has not drained them for a while (module docs).
    #[cold]
    pub(crate) fn drain_stranded(&self) -> Drain<L> {
        Drain { next: self.head.swap(ptr::null_mut(), Ordering::Acquire) }
    }
}

/// The entries taken by one [`LinkStack::drain`].
pub(crate) struct Drain<L: Link> {
    next: *mut L::Node,
}

impl<L: Link> Iterator for Drain<L> {
    type Item = L;

    #[inline]
    fn next(&mut self) -> Option<L> {
        let t = L::from_ptr(self.next)?;
        // Read the link before the caller reuses the node (it may push it elsewhere at once).
        self.next = t.next().load(Ordering::Relaxed);
        Some(t)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::queue::tcbs;
    use std::collections::HashSet;
    use std::sync::Arc;

    #[test]
    fn drains_newest_first() {
        let (_chunks, t) = tcbs(5);
        let s = WakeupStack::new();
        assert!(s.is_empty());
        assert_eq!(s.drain().count(), 0);
        for &x in &t {
            s.push(x);
        }
        assert!(!s.is_empty());
        let got: Vec<TcbRef> = s.drain().collect();
        assert_eq!(got, [t[4], t[3], t[2], t[1], t[0]]);
        assert!(s.is_empty());
        // Drained entries may be pushed again at once (the iterator read each link before yielding).
        for x in s.drain() {
            s.push(x);
        }
        s.push(t[0]);
        assert_eq!(s.drain().collect::<Vec<_>>(), [t[0]]);
    }

    #[test]
    fn takes_every_concurrent_push_exactly_once() {
        const PUSHERS: usize = 3;
        const EACH: usize = 8;
        let (_chunks, t) = tcbs(PUSHERS * EACH);
        let s = Arc::new(WakeupStack::new());
        let pushers: Vec<_> = t
            .chunks(EACH)
            .enumerate()
            .map(|(p, mine)| {
                let (s, mine) = (s.clone(), mine.to_vec());
                std::thread::spawn(move || {
                    for (i, &x) in mine.iter().enumerate() {
                        s.push(x);
                        if (i + p) % 3 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        // The owner drains while the pushers push.
        let mut seen = HashSet::new();
        while seen.len() < PUSHERS * EACH {
            for x in s.drain() {
                assert!(seen.insert(x.as_ptr() as usize), "a TCB came out twice");
            }
            std::thread::yield_now();
        }
        for p in pushers {
            p.join().unwrap();
        }
        assert!(s.is_empty());
        assert_eq!(seen, t.iter().map(|x| x.as_ptr() as usize).collect());
    }
}
