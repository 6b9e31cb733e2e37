//! Models of start-queue overflow between the levels: a spawner's own deque (`queue::deque`, its
//! limit shrunk to 2) spills its oldest half down to its node's level (`queue::shared`, bounded
//! to 1 by `queue::bound`), which overflows to the global level (unbounded); concurrent spawners
//! and takers (own pop, node and global batch takes, steals from the other's deque). Every entry
//! is taken exactly once, with its spawner's payload, and the node level never holds more than
//! its limit.
//!
//! The deque, the shared levels and the bound are the runtime's own code; the glue around them
//! mirrors `Processor::push_start`, `push_start_overflow` and `take_start_shared` step for step.

use super::{check, Node, NodeRef, Nodes, Tally};
use crate::queue::deque::{Deque, Stolen};
use crate::queue::shared::{SharedStartQueue, TAKE_MAX};
use crate::queue::wakeup::Link;
use loom::sync::Arc;
use loom::thread;

/// Each own deque's limit (its oldest half, one entry, spills).
const LIMIT: usize = 2;
/// The node level's limit.
const NODE_LIMIT: usize = 1;

/// The shared levels: one node and the global queue.
struct Levels {
    node: SharedStartQueue<Node>,
    global: SharedStartQueue<Node>,
}

impl Levels {
    fn new() -> Arc<Levels> {
        Arc::new(Levels {
            node: SharedStartQueue::new(Some(NODE_LIMIT)),
            global: SharedStartQueue::new(None),
        })
    }

    /// Everything left on both levels, for the end of a model.
    fn drain(&self) -> Vec<NodeRef> {
        let mut all = Vec::new();
        for q in [&self.node, &self.global] {
            let mut buf = [std::ptr::null_mut(); TAKE_MAX];
            loop {
                let n = q.take_batch(TAKE_MAX, &mut buf);
                if n == 0 {
                    break;
                }
                all.extend(buf[..n].iter().map(|&p| NodeRef::from_ptr(p).unwrap()));
            }
        }
        all
    }
}

/// A spawner-taker: the owner of `own`, on node 0.
struct Processor {
    own: Arc<Deque<Node>>,
    levels: Arc<Levels>,
}

impl Processor {
    /// `Processor::push_start`: the own deque within its limit, else `push_start_overflow`.
    fn push_start(&self, n: *mut Node) {
        if let Err(n) = self.own.push_within(n, LIMIT) {
            self.push_start_overflow(n);
        }
    }

    /// `Processor::push_start_overflow`: the oldest half down to the node in one batch, what the
    /// node cannot hold on to the global level, then the new entry on the own deque (or down too).
    fn push_start_overflow(&self, n: *mut Node) {
        let mut spill = [std::ptr::null_mut(); LIMIT / 2];
        let k = self.own.take_oldest(&mut spill);
        let to_node = self.levels.node.push_batch(&spill[..k]);
        assert!(self.levels.global.push_batch(&spill[to_node..k]) == k - to_node);
        if let Err(n) = self.own.push_within(n, LIMIT) {
            if let Err(n) = self.levels.node.push(n) {
                self.levels.global.push(n).unwrap();
            }
        }
    }

    /// `Processor::take_start` and a steal: own pop, a node batch (the rest onto the own deque,
    /// as room allows), a global batch likewise, then the other processor's deque.
    fn take(&self, victim: &Deque<Node>) -> Option<NodeRef> {
        if let Some(p) = self.own.pop() {
            return NodeRef::from_ptr(p);
        }
        let room = LIMIT.saturating_sub(self.own.len()).clamp(1, TAKE_MAX);
        let mut batch = [std::ptr::null_mut(); TAKE_MAX];
        let mut n = self.levels.node.take_batch(room, &mut batch);
        if n == 0 {
            n = self.levels.global.take_batch(room, &mut batch);
        }
        if n > 0 {
            for &e in batch[1..n].iter().rev() {
                if let Err(e) = self.own.push(e) {
                    self.push_start_overflow(e);
                }
            }
            return NodeRef::from_ptr(batch[0]);
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
    let deques = [Arc::new(Deque::<Node>::new(LIMIT, true)), Arc::new(Deque::<Node>::new(LIMIT, true))];
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let p = Processor { own: Arc::clone(&deques[i]), levels: Arc::clone(&levels) };
            let victim = Arc::clone(&deques[1 - i]);
            let nodes = Arc::clone(&nodes);
            let (mine, takes) = (spawns[i], takes[i]);
            thread::spawn(move || {
                for &id in mine {
                    nodes.publish(id, 0);
                    p.push_start(nodes.get(id).as_ptr());
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
    for n in levels.drain() {
        tally.take(n);
    }
    tally.assert_each(1);
}

/// Two spawners, three entries each: each spawner's third entry makes its deque spill its oldest;
/// the node takes one of the two spilled and the other goes global. No takes until the end.
#[test]
fn start_levels_two_spawners_overflow() {
    check("start_levels_two_spawners_overflow", || levels([&[0, 1, 2], &[3, 4, 5]], [0, 0]));
}

/// A spawner of four entries (its deque spills once to the node, once more to the node or to
/// the global level) against a taker that takes twice (node, global, steals) meanwhile.
#[test]
fn start_levels_spawner_against_taker() {
    check("start_levels_spawner_against_taker", || levels([&[0, 1, 2, 3], &[]], [0, 2]));
}

/// Both spawn and both take: a node slot freed by a take is reserved again by the other
/// spawner's spill while its own entry is still being pushed.
#[test]
fn start_levels_spawners_and_takers() {
    check("start_levels_spawners_and_takers", || levels([&[0, 1, 2], &[3]], [1, 1]));
}
