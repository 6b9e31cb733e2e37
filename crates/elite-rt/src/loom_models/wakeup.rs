//! Models of the wake-up and clean-up stacks (`queue::wakeup`): pushers on other threads, the
//! owner draining while they push; every node taken exactly once, with its pusher's payload.

use super::{check, NodeRef, Nodes, Tally};
use crate::queue::wakeup::LinkStack;
use loom::sync::Arc;
use loom::thread::{self, JoinHandle};
use std::ops::Range;

/// A waker on a thread of its own: publishes and pushes the nodes `ids`, one `push` at a time.
pub(super) fn waker(
    nodes: &Arc<Nodes>,
    stack: &Arc<LinkStack<NodeRef>>,
    ids: Range<usize>,
) -> JoinHandle<()> {
    let (nodes, stack) = (Arc::clone(nodes), Arc::clone(stack));
    thread::spawn(move || {
        for id in ids {
            nodes.publish(id, 0);
            stack.push(nodes.get(id));
        }
    })
}

/// The wake-up stack: two wakers push `per_waker` nodes each, one `push` at a time, while the owner
/// drains twice; after they finish, the owner's last drain must have left nothing behind.
fn wakeup_stack(per_waker: usize) {
    let nodes = Nodes::new(2 * per_waker);
    let stack = Arc::new(LinkStack::<NodeRef>::new());
    let wakers: Vec<_> = (0..2).map(|w| waker(&nodes, &stack, w * per_waker..(w + 1) * per_waker)).collect();

    let mut tally = Tally::new(2 * per_waker);
    for _ in 0..2 {
        thread::yield_now(); // see `loom_models`: without it loom tries no drain after a push
        stack.drain().for_each(|t| tally.take(t));
    }
    wakers.into_iter().for_each(|w| w.join().unwrap());
    stack.drain().for_each(|t| tally.take(t));
    assert!(stack.is_empty());
    tally.assert_each(1);
}

#[test]
fn wakeup_stack_one_node_per_waker() {
    check("wakeup_stack_one_node_per_waker", || wakeup_stack(1));
}

#[test]
fn wakeup_stack_two_nodes_per_waker() {
    check("wakeup_stack_two_nodes_per_waker", || wakeup_stack(2));
}

/// No ABA: the owner pushes what it drained back onto its own stack (a ULT woken again right away)
/// while a waker pushes; a node reappears only after the drain that took it, and each push is taken
/// once.
#[test]
fn wakeup_stack_push_again_after_drain() {
    check("wakeup_stack_push_again_after_drain", || {
        let nodes = Nodes::new(2);
        let stack = Arc::new(LinkStack::<NodeRef>::new());
        let waker = waker(&nodes, &stack, 0..2);

        // The owner's drain: take each node, and push it again the first time.
        let drain = |tally: &mut Tally| {
            thread::yield_now(); // see `loom_models`
            for t in stack.drain() {
                tally.take(t);
                if tally.count(t) == 1 {
                    // The iterator has already read the node's link, so it may go back at once.
                    nodes.publish(t.id(), 1);
                    stack.push(t);
                }
            }
        };
        let mut tally = Tally::new(2);
        drain(&mut tally);
        drain(&mut tally);
        waker.join().unwrap();
        // Now every waker's push is on the stack or taken; a node taken the first time here is back
        // on the stack for the second drain.
        drain(&mut tally);
        drain(&mut tally);
        assert!(stack.is_empty());
        tally.assert_each(2);
    });
}
