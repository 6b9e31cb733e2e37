//! The clean-up stack of a processor: clean-up notes from joiners, in batches.
//!
//! A joiner that lets go of a ULT which exited on another processor owes that processor a note
//! (ELiTE 2.2): the exiting processor takes the TCB off its deathrow and frees it into its own
//! pool; the joiner never writes another processor's deathrow or pools. A joiner collects its
//! notes per exiting processor in a [`NoteBatch`], a small buffer of TCB pointers of its own, and
//! pushes a full batch (or, when it runs out of work or every so often, a partial one) onto the
//! exiting processor's [`CleanupStack`] with one CAS.
//!
//! Notes travel as pointers in a buffer, not linked through the TCBs: a link in the TCB would have
//! the joiner write one more line of each TCB it joined and the exiting processor read it back,
//! and in a bulk join (many TCBs spawned, then joined in order) those lines are long out of every
//! cache, so the join and its clean-up would each pay a miss per ULT for nothing but the link. The
//! drain reads a batch's buffer and pools the pointers, touching no line of the TCBs.
//!
//! # Protocol
//!
//! The stack is a [`LinkStack`] of batches (see `queue::wakeup`: any thread pushes with a
//! `Release` CAS, the owner drains with an `Acquire` swap, so a batch's contents, written by its
//! joiner before the push, are visible to the owner). A batch belongs to its joiner until pushed,
//! to the stack's owner after the drain that took it; the owner frees it. A joiner outside the
//! runtime (an OS thread) pushes a batch of one. Batches left on the stack when the runtime is
//! dropped are freed with it (the TCBs they name are freed with their chunks).

use crate::atomics::AtomicPtr;
use crate::queue::wakeup::{Link, LinkStack};
use crate::tcb::{Tcb, TcbRef};
use std::ptr::{self, NonNull};

/// Notes a joiner holds back per exiting processor before pushing them as one batch.
pub(crate) const NOTE_BATCH: usize = 32;

/// Up to [`NOTE_BATCH`] TCBs that joiners let go of, bound for the processor they exited on.
pub(crate) struct NoteBatch {
    /// The stack's link (see [`LinkStack`]).
    next: AtomicPtr<NoteBatch>,
    len: usize,
    tcbs: [*mut Tcb; NOTE_BATCH],
}

impl NoteBatch {
    /// An empty batch.
    pub(crate) fn new() -> Box<NoteBatch> {
        Box::new(NoteBatch {
            next: AtomicPtr::new(ptr::null_mut()),
            len: 0,
            tcbs: [ptr::null_mut(); NOTE_BATCH],
        })
    }

    /// A batch of the one note `t`.
    pub(crate) fn one(t: TcbRef) -> Box<NoteBatch> {
        let mut b = NoteBatch::new();
        b.add(t);
        b
    }

    /// Adds a note for `t`; true when the batch is full now.
    #[inline]
    pub(crate) fn add(&mut self, t: TcbRef) -> bool {
        self.tcbs[self.len] = t.as_ptr();
        self.len += 1;
        self.len == NOTE_BATCH
    }

    /// Notes in the batch.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The TCBs noted.
    pub(crate) fn tcbs(&self) -> impl Iterator<Item = TcbRef> + '_ {
        self.tcbs[..self.len].iter().filter_map(|&p| TcbRef::from_ptr(p))
    }
}

/// A batch on a [`CleanupStack`]: the address of a leaked `Box<NoteBatch>`.
#[derive(Clone, Copy)]
pub(crate) struct BatchRef(NonNull<NoteBatch>);

impl Link for BatchRef {
    type Node = NoteBatch;

    #[inline]
    fn as_ptr(self) -> *mut NoteBatch {
        self.0.as_ptr()
    }

    #[inline]
    fn from_ptr(p: *mut NoteBatch) -> Option<BatchRef> {
        NonNull::new(p).map(BatchRef)
    }

    #[inline]
    fn next<'a>(self) -> &'a AtomicPtr<NoteBatch> {
        // SAFETY: a batch on the stack (or being pushed) is a live leaked box, freed only by the
        // owner after the drain that took it, once its link was read (see `Drain`).
        unsafe { &(*self.0.as_ptr()).next }
    }
}

/// The clean-up stack of one processor: note batches pushed by joiners, drained by the owner.
pub(crate) struct CleanupStack {
    stack: LinkStack<BatchRef>,
}

impl CleanupStack {
    pub(crate) fn new() -> CleanupStack {
        CleanupStack { stack: LinkStack::new() }
    }

    /// Pushes a batch of notes. Any thread may push.
    #[inline]
    pub(crate) fn push(&self, batch: Box<NoteBatch>) {
        let p = Box::into_raw(batch);
        // SAFETY: `Box::into_raw` never returns null.
        self.stack.push(BatchRef(unsafe { NonNull::new_unchecked(p) }));
    }

    /// True if no batch is on the stack (a hint: a push may land right after).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }

    /// Takes every batch, newest first. Only the owner calls this.
    #[inline]
    pub(crate) fn drain(&self) -> impl Iterator<Item = Box<NoteBatch>> {
        self.stack.drain().map(|b| {
            // SAFETY: every batch on the stack came from `Box::into_raw` in `push`; the drain took
            // it from the stack (and read its link) before handing it out, so it is ours alone.
            unsafe { Box::from_raw(b.as_ptr()) }
        })
    }
}

impl Drop for CleanupStack {
    fn drop(&mut self) {
        // Batches nobody drained (the runtime is going away): free the buffers; the TCBs they
        // name are freed with their chunks.
        for b in self.drain() {
            drop(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcb::Chunk;
    use std::collections::HashSet;
    use std::sync::Arc;

    #[test]
    fn batches_fill_up_and_every_note_is_drained_once() {
        let owner = Arc::new(());
        let chunk = Chunk::allocate(&owner);
        let t: Vec<TcbRef> = chunk.tcbs().collect();
        let stack = Arc::new(CleanupStack::new());
        assert!(stack.is_empty());
        // Two joiners push their notes in batches (the last one partial) while the owner drains.
        let joiners: Vec<_> = t
            .chunks(NOTE_BATCH + 8) // one joiner fills a batch and starts another, one does not
            .map(|mine| {
                let (stack, mine) = (stack.clone(), mine.to_vec());
                std::thread::spawn(move || {
                    let mut batch = NoteBatch::new();
                    for (i, &x) in mine.iter().enumerate() {
                        let full = batch.add(x);
                        assert_eq!(full, (i + 1) % NOTE_BATCH == 0);
                        if full {
                            stack.push(std::mem::replace(&mut batch, NoteBatch::new()));
                        }
                    }
                    if batch.len() > 0 {
                        stack.push(batch);
                    }
                })
            })
            .collect();
        let mut seen = HashSet::new();
        while seen.len() < t.len() {
            for batch in stack.drain() {
                for x in batch.tcbs() {
                    assert!(seen.insert(x.as_ptr() as usize), "a note came out twice");
                }
            }
            std::thread::yield_now();
        }
        joiners.into_iter().for_each(|j| j.join().unwrap());
        assert!(stack.is_empty());
        // A batch nobody drains is freed with the stack (the leak checks of `.ci/run` see it).
        stack.push(NoteBatch::one(t[0]));
        drop(stack);
    }
}
