//! Models of start-queue overflow between the levels: a spawner's own deque (`queue::deque`, its
//! limit shrunk to 1) overflows to its node's bounded queue (the reserve-then-push bound of
//! `queue::bound`, limit 1), which overflows to the global queue; concurrent spawners and takers
//! (own pop, node and global takes, steals from the other's deque). Every entry is taken exactly
//! once, with its spawner's payload, and the node queue never holds more than its limit.
//!
//! The deque and the bound are the runtime's own code. The node's and the global queue are
//! crossbeam `Injector`s in the runtime, which loom cannot see into; here each is a loom `Mutex`
//! over a `VecDeque` (a linearizable FIFO, as the injector is), and the glue around them mirrors
//! `NodeStartQueue::try_push`, `take` and `take_batch` and `Processor::push_start` and
//! `take_start` step for step.

use super::{check, Node, NodeRef, Nodes, Tally};
use crate::queue::bound::Bound;
use crate::queue::deque::{Deque, Stolen};
use crate::queue::tcb_stack::Link;
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::collections::VecDeque;

/// The node queue's limit, and each own deque's.
const LIMIT: usize = 1;

/// The shared levels: one node and the global queue.
struct Levels {
    node_bound: Bound,
    node: Mutex<VecDeque<NodeRef>>,
    global: Mutex<VecDeque<NodeRef>>,
}

// SAFETY: the queues hold addresses of nodes that every thread of the model keeps alive (`Nodes`
// in an `Arc`); what may be done with a node is the model's protocol, as for a TCB.
unsafe impl Send for Levels {}
// SAFETY: as above; all shared state is behind loom's atomics and mutexes.
unsafe impl Sync for Levels {}

impl Levels {
    fn new() -> Arc<Levels> {
        Arc::new(Levels {
            node_bound: Bound::new(LIMIT),
            node: Mutex::new(VecDeque::new()),
            global: Mutex::new(VecDeque::new()),
        })
    }

    /// `NodeStartQueue::try_push`.
    fn node_try_push(&self, n: NodeRef) -> Result<(), NodeRef> {
        if !self.node_bound.reserve() {
            return Err(n);
        }
        let mut q = self.node.lock().unwrap();
        q.push_back(n);
        assert!(q.len() <= LIMIT, "the node queue holds {} entries, its limit is {LIMIT}", q.len());
        Ok(())
    }

    /// `NodeStartQueue::take_batch` with room for `room` (`take` when `room` is 1): the oldest
    /// entry and up to `room - 1` more, then the bound gives back their slots.
    fn node_take_batch(&self, room: usize) -> Vec<NodeRef> {
        let taken: Vec<NodeRef> = {
            let mut q = self.node.lock().unwrap();
            let n = q.len().min(room);
            q.drain(..n).collect()
        };
        if !taken.is_empty() {
            self.node_bound.release(taken.len());
        }
        taken
    }

    fn global_take(&self) -> Option<NodeRef> {
        self.global.lock().unwrap().pop_front()
    }
}

/// A spawner-taker: the owner of `own`, on node 0.
struct Processor {
    own: Arc<Deque<Node>>,
    levels: Arc<Levels>,
}

impl Processor {
    /// `Processor::push_start`: the own deque within its limit, else the node, else global.
    fn push_start(&self, n: NodeRef) {
        if self.own.push_within(n.as_ptr(), LIMIT).is_err() {
            if let Err(n) = self.levels.node_try_push(n) {
                self.levels.global.lock().unwrap().push_back(n);
            }
        }
    }

    /// `Processor::take_start` and a steal: own pop, a node batch (moved into the own deque as
    /// room allows, as `unstage` does), global, then the other processor's deque.
    fn take(&self, victim: &Deque<Node>) -> Option<NodeRef> {
        if let Some(p) = self.own.pop() {
            return NodeRef::from_ptr(p);
        }
        let room = LIMIT.saturating_sub(self.own.len()).max(1);
        let mut batch = self.levels.node_take_batch(room).into_iter();
        if let Some(first) = batch.next() {
            for rest in batch {
                if let Err(p) = self.own.push(rest.as_ptr()) {
                    // `unstage`'s fallback: back up a level.
                    self.push_start(NodeRef::from_ptr(p).unwrap());
                }
            }
            return Some(first);
        }
        if let Some(n) = self.levels.global_take() {
            return Some(n);
        }
        loop {
            match victim.steal() {
                Stolen::Success(p) => return NodeRef::from_ptr(p),
                Stolen::Empty => return None,
                Stolen::Retry => thread::yield_now(),
            }
        }
    }
}

/// Two processors of one node; processor `i` spawns the entries `spawns[i]` (ids), then takes
/// `takes[i]` times; the main thread then takes what is left. Every entry is taken once.
fn levels(spawns: [&'static [usize]; 2], takes: [usize; 2]) {
    let count = spawns.iter().map(|s| s.len()).sum();
    let nodes = Nodes::new(count);
    let levels = Levels::new();
    let deques = [Arc::new(Deque::<Node>::new(LIMIT)), Arc::new(Deque::<Node>::new(LIMIT))];
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let p = Processor { own: Arc::clone(&deques[i]), levels: Arc::clone(&levels) };
            let victim = Arc::clone(&deques[1 - i]);
            let nodes = Arc::clone(&nodes);
            let (mine, takes) = (spawns[i], takes[i]);
            thread::spawn(move || {
                for &id in mine {
                    nodes.publish(id, 0);
                    p.push_start(nodes.get(id));
                }
                (0..takes).filter_map(|_| p.take(&victim)).map(|n| n.id()).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut tally = Tally::new(count);
    for h in handles {
        for id in h.join().unwrap() {
            tally.take(nodes.get(id));
        }
    }
    // The processors are done: take the rest from every level (as a thief, for the deques).
    for d in &deques {
        while let Stolen::Success(p) = d.steal() {
            tally.take(NodeRef::from_ptr(p).unwrap());
        }
    }
    for n in levels.node_take_batch(usize::MAX) {
        tally.take(n);
    }
    while let Some(n) = levels.global_take() {
        tally.take(n);
    }
    tally.assert_each(1);
}

/// Two spawners, two entries each: each spawner's second entry overflows its deque; the node
/// takes one of them and the other goes global. No takes until the end.
#[test]
fn start_levels_two_spawners_overflow() {
    check("start_levels_two_spawners_overflow", || levels([&[0, 1], &[2, 3]], [0, 0]));
}

/// A spawner of three entries (one in its deque, one in the node, one global) against a taker
/// that takes twice (node, global, steals) while the spawner is pushing.
#[test]
fn start_levels_spawner_against_taker() {
    check("start_levels_spawner_against_taker", || levels([&[0, 1, 2], &[]], [0, 2]));
}

/// Both spawn and both take: a node slot freed by a take is reserved again by the other
/// spawner while its own entry is still being pushed.
#[test]
fn start_levels_spawners_and_takers() {
    check("start_levels_spawners_and_takers", || levels([&[0, 1], &[2]], [1, 1]));
}
