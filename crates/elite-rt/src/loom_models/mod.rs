//! Loom models of the lock-free protocols, built only with `RUSTFLAGS="--cfg loom"` (`.ci/run`'s loom
//! step runs them: `cargo test -p elite-rt --release --lib loom_models`).
//!
//! Each model runs the protocol's own code, whose atomics and thread parking come from
//! `crate::atomics` and are loom's in this build, on capacities shrunk to two or three threads of one
//! to three nodes each, and loom runs it under every interleaving and every value a load may see, up
//! to `LOOM_MAX_PREEMPTIONS` preemptions, as far as loom models C11 (it takes a `SeqCst` access for
//! an `AcqRel` one, which errs on the side of false alarms, and models `fence(SeqCst)`, on which the
//! idle protocol rests, exactly). The models assert exactly-once delivery (every node pushed is
//! taken once, none lost, none twice) and no lost wake-up (a lost one leaves the parker asleep, which
//! loom reports as a deadlock). What a pusher writes before a push is a loom `UnsafeCell` that the owner
//! reads after the drain, so a publication that does not happen-before the read is a reported race.
//!
//! * [`wakeup`]: the wake-up stack (the same stack carries the clean-up notes' batches),
//!   drained by the owner while others push, and nodes pushed again after the drain that took
//!   them.
//! * [`deque`]: a processor's own start-queue (`queue::deque`), the owner pushing and popping
//!   while thieves steal: every entry taken once, with its pusher's payload; the owner's pops of
//!   the last entries (the fenced path and the single-entry CAS) against one and two steals, the
//!   join fast path's pop-and-push-back against a steal, and a full queue's claim of its oldest
//!   entries (`take_oldest`, a spill down a level) against one and two steals.
//! * [`start_levels`]: a processor's full own start-queue spilling its oldest half to its node's
//!   shared level (`queue::shared`, bounded by `queue::bound`) and on to the global one, with
//!   concurrent spawners and batch takers: every entry taken once, and the node never holds more
//!   than its limit.
//! * [`join`]: the join state word (`tcb::join_state`): an exit against a join, a detach, and a
//!   waiter that gives up: the TCB recycled once, the result taken or dropped once, a waiter
//!   woken at most once.
//! * [`shutdown`]: a runtime's shutdown against a wake-up from outside: the ULT run or
//!   cancelled exactly once, never lost, its wait node never read after its stack is freed.
//! * [`mutex`]: the mutex state word (`sync::lock_word`) with the mutex's list-and-park glue in
//!   miniature: mutual exclusion, no lost wake-up, the hand-over after `max_losses` lost races;
//!   and its bias: the owner's plain-store path against a revoking processor and an OS thread, a
//!   holder that locks on the owner's path and unlocks elsewhere, the biasing itself, and a
//!   former owner's stale section against a word revoked from it (only the first owner is
//!   biased again).
//! * [`bias`]: a spin lock's bias (`sync::bias`): the owner's plain-store path against a
//!   revoker (heavy barrier, then a wait for the owner's holder), the biasing itself against a
//!   second processor, an OS thread against the owner, and a former owner's stale entry against
//!   a lock revoked from it (only the first owner is biased again): exclusion, each holder sees
//!   the last.
//! * [`board`]: a live policy switch (`policy::board`): a setter against a processor that keys
//!   woken ULTs and re-keys its runqueue at safe points and a waker reading the policy in force,
//!   and two racing setters: every ULT queued once, keyed by the last policy after the next safe
//!   point, every policy read whole.
//! * [`gate`]: the runtime's coscheduling gate (`contention::gate`): a processor's `enter`
//!   against the controller's admission decides from one admission's words (the sequence lock),
//!   and a ULT refused during an admission that admits its group is sent to an admitting
//!   processor or held and released, exactly once; and two groups that no admission pairs
//!   never run at once in one domain.
//! * [`park`]: the idle protocol (announce PARKED, re-check, park / publish, notify) with one and two
//!   wakers, over the wake-up stack.
//!
//! # What loom cannot check
//!
//! Loom takes `SeqCst` loads and stores for `Acquire`/`Release` ones: it does not order two
//! `SeqCst` stores to different words in one total order with the fences of other threads (C++20
//! [atomics.order] p4), so a protocol whose correctness rests on that alone looks broken under
//! loom. The shutdown's unpark did (the flag and the park slot's state, both `SeqCst` stores, read
//! by a parker after its fence); it now fences before its store, like every other waker, which
//! both C++ and loom order (`park::ParkSlot::force_unpark`). So did the coscheduling gate's
//! straggler check (each entering processor stores its `running` group, then loads the others'):
//! it now fences between the two (`contention::gate::Gate::enter`), and [`gate`] checks it.
//!
//! # Why an owner yields before a drain that races with pushes
//!
//! Loom's partial-order reduction relates an access to an atomic only to the *last* access of it.
//! A pusher loads the head before its CAS, so by the time of the CAS the owner's relaxed `is_empty`
//! load that ran first is forgotten, and loom never tries the owner's drain after a push: the drains
//! that race with pushes took nothing in any execution, and a deliberately non-atomic drain passed.
//! A `yield_now` before such a drain makes loom's first schedule run the pushers first; the owner's
//! load is then related to the push before it, and loom goes back to try the drain before each
//! push as well (the same drains then take every possible number of nodes, and the non-atomic drain
//! fails).
//!
//! # Adding a model (the mutex state word, say)
//!
//! 1. Build the protocol under loom. Its file takes every atomic (and `park`/`Thread`, if it parks OS
//!    threads) from `crate::atomics`, has no `const fn` that makes an atomic (loom's are not
//!    `const`), spins through a hint that is `loom::thread::yield_now` under loom (loom needs a spin
//!    loop to yield), and uses nothing that is `cfg(not(loom))`. In `lib.rs`, a top-level module gets
//!    `#[cfg_attr(loom, allow(dead_code))]` instead of `#[cfg(not(loom))]`; a file inside a module
//!    directory is declared alone under `cfg(loom)`, as `queue::wakeup` is:
//!    `#[cfg(loom)] #[allow(dead_code)] mod sync { pub(crate) mod lock_word; }` beside the
//!    `#[cfg(not(loom))] pub mod sync;`. For `sync::Mutex` that means moving the state word (the
//!    `LOCKED`/`WAITERS` bits and the lock, unlock and hand-over transitions) into such a file, apart
//!    from what needs the runtime (`WaitNode` blocking a ULT, time stamps), or making those parts a
//!    small trait the model implements with loom threads, as [`Link`] is for the stacks.
//! 2. Add `loom_models/mutex.rs` with `#[test]` functions that call [`check`] (two or three threads,
//!    a lock or two each; a loom `UnsafeCell` as the protected data makes a missing `Acquire` or
//!    `Release` a reported race; count holders to assert exclusion, and assert that every waiter
//!    wakes), and add `mod mutex;` below.
//! 3. Nothing else: `.ci/run` runs every test under `loom_models`.

mod bias;
mod board;
mod deque;
mod gate;
mod join;
mod mutex;
mod next;
mod park;
mod shutdown;
mod start_levels;
mod wakeup;

use crate::atomics::AtomicPtr;
use crate::queue::wakeup::Link;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use std::ptr::{self, NonNull};

/// Runs `model` under loom (every interleaving up to the preemption bound) and prints how many
/// executions it explored.
pub(super) fn check(name: &str, model: impl Fn() + Sync + Send + 'static) {
    // A std atomic on purpose: it counts loom's executions from outside the model.
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&executions);
    let bound = loom::model::Builder::new().preemption_bound;
    loom::model(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    let n = executions.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("loom model {name}: {n} executions (preemption bound {bound:?})");
}

/// A light node for the stacks: its `next` link and a payload its pusher publishes.
pub(super) struct Node {
    id: usize,
    next: AtomicPtr<Node>,
    /// Written by whoever pushes the node, read by the owner that takes it.
    payload: UnsafeCell<usize>,
}

/// A pointer to a [`Node`] of a [`Nodes`], the model's [`Link`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct NodeRef(NonNull<Node>);

impl NodeRef {
    fn node<'a>(self) -> &'a Node {
        // SAFETY: a NodeRef points into a `Nodes` that every thread of the model holds (an `Arc`)
        // until the model ends, so the node is alive whenever a NodeRef is used.
        unsafe { self.0.as_ref() }
    }

    /// The node's index in its [`Nodes`].
    pub(super) fn id(self) -> usize {
        self.node().id
    }
}

impl Link for NodeRef {
    type Node = Node;

    fn as_ptr(self) -> *mut Node {
        self.0.as_ptr()
    }

    fn from_ptr(p: *mut Node) -> Option<NodeRef> {
        NonNull::new(p).map(NodeRef)
    }

    fn next<'a>(self) -> &'a AtomicPtr<Node> {
        &self.node().next
    }
}

/// The nodes of one model execution, shared by its threads.
pub(super) struct Nodes(Vec<Node>);

impl Nodes {
    /// `n` unlinked nodes with ids `0..n`.
    pub(super) fn new(n: usize) -> Arc<Nodes> {
        Arc::new(Nodes(
            (0..n)
                .map(|id| Node { id, next: AtomicPtr::new(ptr::null_mut()), payload: UnsafeCell::new(0) })
                .collect(),
        ))
    }

    /// The node with index `id`.
    pub(super) fn get(&self, id: usize) -> NodeRef {
        NodeRef(NonNull::from(&self.0[id]))
    }

    /// Writes the payload the owner checks after taking the node (its push is the `round`-th).
    /// Only the thread about to push the node calls this: the node is its own until the push.
    pub(super) fn publish(&self, id: usize, round: usize) {
        // SAFETY: a loom cell access; loom itself reports one that races with another.
        self.0[id].payload.with_mut(|p| unsafe { *p = expected(id, round) });
    }
}

/// The payload of node `id` on its `round`-th push.
fn expected(id: usize, round: usize) -> usize {
    1 + id + 100 * round
}

/// How often the owner took each node.
pub(super) struct Tally(Vec<usize>);

impl Tally {
    /// A tally of `n` nodes, none taken yet.
    pub(super) fn new(n: usize) -> Tally {
        Tally(vec![0; n])
    }

    /// Records that the owner took `t`, checking that its pusher's payload is visible.
    pub(super) fn take(&mut self, t: NodeRef) {
        let node = t.node();
        let round = self.0[node.id];
        // SAFETY: a loom cell access; loom itself reports one that races with the pusher's write.
        let payload = node.payload.with(|p| unsafe { *p });
        assert_eq!(
            payload,
            expected(node.id, round),
            "node {} (taken {round} times before) without the payload of its next push: taken before \
             its push was visible, or one push taken twice",
            node.id
        );
        self.0[node.id] += 1;
    }

    /// How often `t` was taken so far.
    pub(super) fn count(&self, t: NodeRef) -> usize {
        self.0[t.id()]
    }

    /// Nodes taken so far, counting each take.
    pub(super) fn total(&self) -> usize {
        self.0.iter().sum()
    }

    /// Records the node at `p`, if any (a take that may find nothing).
    pub(super) fn take_ptr(&mut self, p: *mut Node) {
        if let Some(t) = NodeRef::from_ptr(p) {
            self.take(t);
        }
    }

    /// How often each node was taken, by id: what another thread's tally hands back.
    pub(super) fn counts(&self) -> Vec<usize> {
        self.0.clone()
    }

    /// Asserts that every node was taken exactly once, here or in `others` (another thread's
    /// [`Tally::counts`]).
    pub(super) fn assert_once_with(&self, others: &[usize]) {
        for (id, (&n, &m)) in self.0.iter().zip(others).enumerate() {
            assert_eq!(n + m, 1, "node {id} taken {n} times here and {m} times by the other");
        }
    }

    /// Asserts that every node was taken exactly `times` times.
    pub(super) fn assert_each(&self, times: usize) {
        for (id, &n) in self.0.iter().enumerate() {
            assert_eq!(n, times, "node {id} taken {n} times, pushed {times}");
        }
    }
}
