//! The queues of a processor and of the hierarchy above it.
//!
//! * [`deque`]: a processor's own start-queue, a bounded work-stealing deque.
//! * [`start`]: the start-queues of ULTs that have not run yet: the three levels (processor,
//!   node, global), the global level's type and the rule by which a full level spills down.
//! * [`shared`]: a start-queue level shared by processors (a node's, the global one): a locked
//!   FIFO with a lock-free length hint, taken from in batches.
//! * [`bound`]: the reserve-then-push bound of a node's start-queue.
//! * [`run`]: the runqueue of ready ULTs, ordered by the policy's priority.
//! * [`next`]: the `next` slot, the one ready ULT that runs before the runqueue; a thief takes it
//!   only when it is stranded.
//! * [`wakeup`]: the lock-free wake-up stack (many pushers, one draining owner), and the stack
//!   the clean-up stack is made of.
//! * [`cleanup`]: the clean-up stack, clean-up notes from joiners in batches.
//! * [`deathrow`]: the count of a processor's exited ULTs waiting for their joiner.
//!
//! Each queue's unit tests sit beside it. They use real TCBs and plain OS threads, without
//! processors, stacks or switches, so that they also run under Miri (`.ci/run`'s step over the lib's
//! unit tests), which checks them for undefined behaviour, data races and leaks: their sizes are
//! small for that reason.

pub(crate) mod bound;
pub(crate) mod cleanup;
pub(crate) mod deathrow;
pub(crate) mod deque;
pub(crate) mod next;
pub(crate) mod run;
pub(crate) mod shared;
pub(crate) mod start;
pub(crate) mod wakeup;

/// `n` fresh TCBs for the queues' tests, and the chunks holding them (boxed: each TCB points back
/// to its chunk).
#[cfg(test)]
#[allow(clippy::vec_box)]
fn tcbs(n: usize) -> (Vec<Box<crate::tcb::Chunk>>, Vec<crate::tcb::TcbRef>) {
    let shared = std::sync::Arc::new(());
    let chunks: Vec<Box<crate::tcb::Chunk>> =
        (0..n.div_ceil(crate::tcb::CHUNK_TCBS)).map(|_| crate::tcb::Chunk::allocate(&shared)).collect();
    let t = chunks.iter().flat_map(|c| c.tcbs()).take(n).collect();
    (chunks, t)
}
