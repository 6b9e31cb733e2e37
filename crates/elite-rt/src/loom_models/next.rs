//! Models of a processor's `next` slot (`queue::next`) against a thief, and of the wake-up stack
//! drained by two processors (`queue::wakeup`, `drain_stranded`): every ULT leaves once, with what
//! its waker wrote.

use super::{check, NodeRef, Nodes, Tally};
use crate::queue::next::NextSlot;
use crate::queue::wakeup::{Link, LinkStack};
use loom::sync::Arc;
use loom::thread;

/// The owner takes from its slot, puts a second node and takes again while a thief steals twice:
/// each node leaves the slot once, and whoever takes it sees its payload (the put's Release, the
/// owner's program order or the thief's Acquire).
#[test]
fn next_slot_owner_against_a_thief() {
    check("next_slot_owner_against_a_thief", || {
        let nodes = Nodes::new(2);
        let slot = Arc::new(NextSlot::<super::Node>::new(true));
        nodes.publish(0, 0);
        slot.put(nodes.get(0).as_ptr());
        let thief = {
            let slot = Arc::clone(&slot);
            let nodes = Arc::clone(&nodes);
            thread::spawn(move || {
                let mut tally = Tally::new(2);
                let mut log = Vec::new();
                for _ in 0..2 {
                    let p = slot.steal();
                    log.push(NodeRef::from_ptr(p).map(|t| t.id()));
                    if let Some(t) = NodeRef::from_ptr(p) {
                        tally.take(t);
                    }
                }
                ((0..2).map(|id| tally.count(nodes.get(id))).collect::<Vec<_>>(), log)
            })
        };
        let mut tally = Tally::new(2);
        let mut log = Vec::new();
        let p = slot.take();
        log.push(NodeRef::from_ptr(p).map(|t| t.id()));
        if let Some(t) = NodeRef::from_ptr(p) {
            tally.take(t);
        }
        assert!(slot.is_empty(), "a take leaves the slot empty, whoever took the node");
        nodes.publish(1, 0);
        slot.put(nodes.get(1).as_ptr());
        let p = slot.take();
        log.push(NodeRef::from_ptr(p).map(|t| t.id()));
        if let Some(t) = NodeRef::from_ptr(p) {
            tally.take(t);
        }
        let (stolen, thief_log) = thief.join().unwrap();
        for id in 0..2 {
            let n = tally.count(nodes.get(id)) + stolen[id];
            assert_eq!(n, 1, "node {id} left the slot {n} times (owner took {log:?}, thief {thief_log:?})");
        }
    });
}

/// Two drainers of one wake-up stack (its owner, and an idle processor taking stranded
/// wake-ups) while a waker pushes two nodes: every push is taken once, by one of them.
#[test]
fn wakeup_stack_two_drainers() {
    check("wakeup_stack_two_drainers", || {
        let nodes = Nodes::new(2);
        let stack = Arc::new(LinkStack::<NodeRef>::new());
        let waker = {
            let (nodes, stack) = (Arc::clone(&nodes), Arc::clone(&stack));
            thread::spawn(move || {
                for id in 0..2 {
                    nodes.publish(id, 0);
                    stack.push(nodes.get(id));
                }
            })
        };
        let thief = {
            let (nodes, stack) = (Arc::clone(&nodes), Arc::clone(&stack));
            thread::spawn(move || {
                let mut tally = Tally::new(2);
                thread::yield_now(); // see `loom_models`
                stack.drain_stranded().for_each(|t| tally.take(t));
                (0..2).map(|id| tally.count(nodes.get(id))).collect::<Vec<_>>()
            })
        };
        let mut tally = Tally::new(2);
        thread::yield_now(); // see `loom_models`
        stack.drain().for_each(|t| tally.take(t));
        waker.join().unwrap();
        let stolen = thief.join().unwrap();
        stack.drain().for_each(|t| tally.take(t));
        for id in 0..2 {
            let n = tally.count(nodes.get(id)) + stolen[id];
            assert_eq!(n, 1, "node {id} taken {n} times");
        }
    });
}
