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
            thread::spawn(move || {
                let mut tally = Tally::new(2);
                for _ in 0..2 {
                    tally.take_ptr(slot.steal());
                }
                tally.counts()
            })
        };
        let mut tally = Tally::new(2);
        tally.take_ptr(slot.take());
        assert!(slot.is_empty(), "a take leaves the slot empty, whoever took the node");
        nodes.publish(1, 0);
        slot.put(nodes.get(1).as_ptr());
        tally.take_ptr(slot.take());
        tally.assert_once_with(&thief.join().unwrap());
    });
}

/// The owner takes its slot's node while two thieves steal: the node leaves once, also when a
/// thief swaps it out between the owner's load and store and another thief comes after (the
/// owner's take then reads the first thief's record, which the second, finding null, leaves).
#[test]
fn next_slot_owner_against_two_thieves() {
    check("next_slot_owner_against_two_thieves", || {
        let nodes = Nodes::new(1);
        let slot = Arc::new(NextSlot::<super::Node>::new(true));
        nodes.publish(0, 0);
        slot.put(nodes.get(0).as_ptr());
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let slot = Arc::clone(&slot);
                thread::spawn(move || {
                    let mut tally = Tally::new(1);
                    tally.take_ptr(slot.steal());
                    tally.counts()
                })
            })
            .collect();
        let mut tally = Tally::new(1);
        tally.take_ptr(slot.take());
        let mut stolen = vec![0; 1];
        for thief in thieves {
            for (i, n) in thief.join().unwrap().into_iter().enumerate() {
                stolen[i] += n;
            }
        }
        tally.assert_once_with(&stolen);
    });
}

/// Two drainers of one wake-up stack (its owner, and an idle processor taking stranded
/// wake-ups) while a waker pushes two nodes: every push is taken once, by one of them.
#[test]
fn wakeup_stack_two_drainers() {
    check("wakeup_stack_two_drainers", || {
        let nodes = Nodes::new(2);
        let stack = Arc::new(LinkStack::<NodeRef>::new());
        let waker = super::wakeup::waker(&nodes, &stack, 0..2);
        let thief = {
            let stack = Arc::clone(&stack);
            thread::spawn(move || {
                let mut tally = Tally::new(2);
                thread::yield_now(); // see `loom_models`
                stack.drain_stranded().for_each(|t| tally.take(t));
                tally.counts()
            })
        };
        let mut tally = Tally::new(2);
        thread::yield_now(); // see `loom_models`
        stack.drain().for_each(|t| tally.take(t));
        waker.join().unwrap();
        let stolen = thief.join().unwrap();
        stack.drain().for_each(|t| tally.take(t));
        tally.assert_once_with(&stolen);
    });
}
