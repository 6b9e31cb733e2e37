//! Models of the idle protocol (`park`): a processor that finds its wake-up stack empty announces
//! PARKED, re-checks the stack and parks; wakers push onto the stack and then notify. No wake-up is
//! lost: the processor takes every node (a lost wake-up leaves it parked for good, which loom reports
//! as a deadlock), each exactly once.

use super::{check, NodeRef, Nodes, Tally};
use crate::park::{Idle, ParkSlot};
use crate::queue::wakeup::LinkStack;
use loom::sync::Arc;
use loom::thread;

/// What a waker touches: the one processor of the model and its wake-up stack.
struct Processor {
    idle: Idle,
    slot: ParkSlot,
    wakeup: LinkStack<NodeRef>,
}

/// How a waker notifies after its push.
#[derive(Clone, Copy)]
enum Notify {
    /// `ParkSlot::notify`: a wake-up directed at this processor.
    Directed,
    /// `Idle::notify_one`: work that any parked processor may take.
    AnyParked,
}

/// The processor runs on the model's main thread, one waker per entry of `wakers` beside it.
fn no_lost_wakeup(wakers: &'static [Notify]) {
    let n = wakers.len();
    let nodes = Nodes::new(n);
    let p = Arc::new(Processor { idle: Idle::new(), slot: ParkSlot::new(), wakeup: LinkStack::new() });
    // As in the runtime, the processor registers its thread at start-up, before it can be seen parked.
    p.slot.register(thread::current());

    let handles: Vec<_> = wakers
        .iter()
        .enumerate()
        .map(|(id, &how)| {
            let (nodes, p) = (Arc::clone(&nodes), Arc::clone(&p));
            thread::spawn(move || {
                // Publish the work, then notify.
                nodes.publish(id, 0);
                p.wakeup.push(nodes.get(id));
                match how {
                    Notify::Directed => p.slot.notify(),
                    Notify::AnyParked => p.idle.notify_one(std::iter::once(&p.slot)),
                };
            })
        })
        .collect();

    // The processor's loop, shrunk: take the wake-up stack; with nothing there, park (announce,
    // re-check the stack, sleep until notified) and look again.
    let mut tally = Tally::new(n);
    loop {
        p.wakeup.drain().for_each(|t| tally.take(t));
        if tally.total() == n {
            break;
        }
        let _ = p.idle.park(&p.slot, None, || !p.wakeup.is_empty());
    }
    handles.into_iter().for_each(|h| h.join().unwrap());
    tally.assert_each(1);
}

#[test]
fn park_one_waker() {
    check("park_one_waker", || no_lost_wakeup(&[Notify::Directed]));
}

#[test]
fn park_one_waker_any_parked() {
    check("park_one_waker_any_parked", || no_lost_wakeup(&[Notify::AnyParked]));
}

#[test]
fn park_two_wakers() {
    check("park_two_wakers", || no_lost_wakeup(&[Notify::Directed, Notify::AnyParked]));
}
