//! Models of shutdown racing a wake-up (the shutdown of `runtime` against the notifier side of
//! `sync::wait`): a ULT is blocked on a synchronization object; an OS thread outside the runtime
//! notifies it (under the object's lock: unlink the wait node, resolve the wait word, push the TCB
//! on its processor's wake-up stack and unpark the processor) while the runtime is dropped (raise
//! the flag, unpark, join the processor thread, then the walk: cancel every unfinished ULT, and
//! unwind its stack, whose wait guard takes the object's lock and unlinks the node, before the
//! stack is freed).
//!
//! Each execution ends with the ULT either run to its end by its processor or cancelled by the
//! walk, exactly once (never both, never neither); pushed on the wake-up stack at most once; its
//! join state COMPLETE; and the notifier never reads the wait node (which lives on the blocked
//! ULT's stack) after that stack was freed: the node is a loom `UnsafeCell` that the unwind (or
//! the ULT's own return) writes when the stack goes, so a read that does not happen before it is
//! a race loom reports. A processor left parked for good is a deadlock loom reports.
//!
//! The pieces with atomics are the runtime's own: the wake-up stack (`LinkStack`), the idle
//! protocol (`Idle`, `ParkSlot`) and the join word (`JoinWord`). The shutdown flag, `Life`, and the
//! wait word's resolution (`sync::wait::resolve`, a CAS loop) are written out here as the runtime
//! has them, and the object's `SpinLock` is a loom `Mutex` over the node's `linked` flag.

use super::{check, NodeRef, Nodes};
use crate::atomics::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use crate::park::{Idle, ParkSlot};
use crate::queue::wakeup::LinkStack;
use crate::tcb::join_state::JoinWord;
use loom::cell::UnsafeCell;
use loom::sync::{Arc, Mutex};
use loom::thread;

// `Life`, as `tcb::Life` numbers it.
const STARTED: u8 = 2;
const EXITED: u8 = 3;

// The wait word's low bits, as `sync::wait` has them, and the wait's sequence number.
const NOTIFIED: u64 = 1;
const TIMED_OUT: u64 = 2;
const SUSPENDED: u64 = 4;
const RESOLVED: u64 = NOTIFIED | TIMED_OUT;
const SEQ: u64 = 7;

/// What the wait node on the blocked ULT's stack holds while the stack lives; then `FREED`.
const NODE_LIVE: u64 = 1;
const FREED: u64 = 0;

/// `sync::wait::resolve`: CAS the wait word from "wait `seq`, unresolved" to `| how`.
fn resolve(w: &AtomicU64, seq: u64, how: u64) -> Option<u64> {
    let mut cur = w.load(Ordering::Relaxed);
    loop {
        if cur >> 3 != seq || cur & RESOLVED != 0 {
            return None;
        }
        match w.compare_exchange_weak(cur, cur | how, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Some(cur),
            Err(now) => cur = now,
        }
    }
}

/// The runtime with one processor and one blocked ULT (node 0 of `nodes`: its TCB).
struct World {
    /// `Shared::shutdown`.
    shutdown: AtomicBool,
    idle: Idle,
    slot: ParkSlot,
    wakeup: LinkStack<NodeRef>,
    nodes: Arc<Nodes>,
    /// The TCB's `life`, `wait` and `join`.
    life: AtomicU8,
    wait: AtomicU64,
    join: JoinWord,
    /// The object's lock, over whether the ULT's wait node is linked in its list.
    object: Mutex<bool>,
    /// The wait node, on the blocked ULT's stack.
    node: UnsafeCell<u64>,
    ran: AtomicUsize,
    cancelled: AtomicUsize,
    pushed: AtomicUsize,
}

// SAFETY: the loom cells are accessed under the model's protocol, which loom checks; the rest is
// loom's atomics and mutexes and the runtime's own lock-free structures.
unsafe impl Send for World {}
// SAFETY: as above.
unsafe impl Sync for World {}

impl World {
    fn new() -> Arc<World> {
        Arc::new(World {
            shutdown: AtomicBool::new(false),
            idle: Idle::new(),
            slot: ParkSlot::new(),
            wakeup: LinkStack::new(),
            nodes: Nodes::new(1),
            life: AtomicU8::new(STARTED),
            // Blocked: the wait is `SEQ`, unresolved, and its processor finished the switch.
            wait: AtomicU64::new(SEQ << 3 | SUSPENDED),
            join: JoinWord::new(),
            object: Mutex::new(true),
            node: UnsafeCell::new(NODE_LIVE),
            ran: AtomicUsize::new(0),
            cancelled: AtomicUsize::new(0),
            pushed: AtomicUsize::new(0),
        })
    }

    /// The processor's loop, shrunk: leave on shutdown; run what the wake-up stack holds; park.
    fn processor(&self) {
        self.slot.register(thread::current());
        loop {
            if self.shutdown.load(Ordering::Relaxed) {
                return;
            }
            // (Lets loom try the drain both before and after a racing push: see the module docs.)
            thread::yield_now();
            let mut found = false;
            for t in self.wakeup.drain() {
                found = true;
                self.run(t);
            }
            if found {
                continue;
            }
            let _ = self
                .idle
                .park(&self.slot, None, || !self.wakeup.is_empty() || self.shutdown.load(Ordering::Relaxed));
        }
    }

    /// The woken ULT runs to its end: its wait was notified; its stack (with the node) is done.
    fn run(&self, t: NodeRef) {
        assert_eq!(t.id(), 0);
        assert_eq!(self.life.load(Ordering::Relaxed), STARTED, "a processor ran a cancelled ULT");
        assert_ne!(self.wait.load(Ordering::Acquire) & NOTIFIED, 0, "woken without a notification");
        self.ran.fetch_add(1, Ordering::Relaxed);
        // SAFETY: a loom cell access; loom reports one that races with the notifier's read.
        self.node.with_mut(|n| unsafe { *n = FREED });
        self.life.store(EXITED, Ordering::Relaxed);
        self.join.publish_complete();
    }

    /// An OS thread notifies the waiter: under the object's lock, `WaitList::pop_front`,
    /// `WaitNode::notify` (resolve, and wake at once: not a ULT of the waiter's runtime), which
    /// is `Shared::wake` (push on the wake-up stack, unpark the processor).
    fn notify(&self) {
        let mut linked = self.object.lock().unwrap();
        if *linked {
            *linked = false;
            // SAFETY: a loom cell access: the notifier reads the node (its `who`).
            let node = self.node.with(|n| unsafe { *n });
            assert_eq!(node, NODE_LIVE, "the notifier read a wait node whose stack was freed");
            if let Some(prev) = resolve(&self.wait, SEQ, NOTIFIED) {
                if prev & SUSPENDED != 0 {
                    self.pushed.fetch_add(1, Ordering::Relaxed);
                    self.wakeup.push(self.nodes.get(0));
                    self.slot.notify();
                }
            }
        }
        drop(linked);
    }

    /// `Runtime::drop`: the flag and the unpark, the join of the processor thread, then the walk
    /// (`cancel_unfinished`): phase one completes an unfinished ULT as cancelled; phase two
    /// unwinds its stack, whose wait guard (`OnUnwind`, `abandon`) takes the object's lock and
    /// unlinks the node, and frees the stack.
    fn shut_down(&self, processor: thread::JoinHandle<()>) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.slot.force_unpark();
        processor.join().unwrap();
        let unfinished = self.life.load(Ordering::Relaxed) == STARTED;
        if unfinished {
            self.cancelled.fetch_add(1, Ordering::Relaxed);
            self.life.store(EXITED, Ordering::Relaxed);
            self.join.publish_complete();
            {
                let mut linked = self.object.lock().unwrap();
                *linked = false;
            }
            // SAFETY: a loom cell access; loom reports one that races with the notifier's read.
            self.node.with_mut(|n| unsafe { *n = FREED });
        }
    }
}

/// The processor and the notifier on threads of their own, the shutdown on the main thread.
fn shutdown_against_wakeup(notifier_first: bool) {
    let w = World::new();
    let processor = {
        let w = Arc::clone(&w);
        thread::spawn(move || w.processor())
    };
    let notifier = {
        let w = Arc::clone(&w);
        thread::spawn(move || w.notify())
    };
    if notifier_first {
        // Give the processor a chance to run the woken ULT before the drop (loom still tries
        // every interleaving; this only changes which ones the preemption bound reaches).
        thread::yield_now();
    }
    w.shut_down(processor);
    notifier.join().unwrap();
    let (ran, cancelled) = (w.ran.load(Ordering::Relaxed), w.cancelled.load(Ordering::Relaxed));
    assert_eq!(ran + cancelled, 1, "the ULT ran {ran} times and was cancelled {cancelled} times");
    assert!(w.pushed.load(Ordering::Relaxed) <= 1, "the ULT was pushed on the wake-up stack twice");
    assert!(w.join.is_complete(), "the ULT's join would wait for ever");
}

#[test]
fn shutdown_against_an_outside_wakeup() {
    check("shutdown_against_an_outside_wakeup", || shutdown_against_wakeup(false));
}

#[test]
fn shutdown_after_an_outside_wakeup() {
    check("shutdown_after_an_outside_wakeup", || shutdown_against_wakeup(true));
}
