//! Models of a processor's own start-queue (`queue::deque`): the owner pushes and pops at the
//! bottom while thieves steal at the top; every entry is taken exactly once, with what its pusher
//! wrote before the push (a thief's `Acquire` of `bottom` must see the owner's `Release`).
//!
//! The capacity is shrunk to 2 so that the ring wraps and a push can meet a full deque.

use super::{check, Node, NodeRef, Nodes, Tally};
use crate::queue::deque::{Deque, Stolen};
use crate::queue::wakeup::Link;
use loom::sync::Arc;
use loom::thread;

/// Steals until the deque looks empty; what it took.
fn steal_all(d: &Deque<Node>) -> Vec<NodeRef> {
    let mut got = Vec::new();
    loop {
        match d.steal() {
            Stolen::Success(p) => got.extend(NodeRef::from_ptr(p)),
            Stolen::Retry => thread::yield_now(),
            Stolen::Empty => return got,
        }
    }
}

/// The owner pushes `pushes` nodes (popping one whenever the deque is full, and one after every
/// second push), while `thieves` threads steal; then the owner pops the rest.
fn owner_and_thieves(pushes: usize, thieves: usize) {
    let nodes = Nodes::new(pushes);
    let d = Arc::new(Deque::<Node>::new(2, true));
    let handles: Vec<_> = (0..thieves)
        .map(|_| {
            let d = Arc::clone(&d);
            thread::spawn(move || steal_all(&d).into_iter().map(|t| t.id()).collect::<Vec<_>>())
        })
        .collect();

    let mut tally = Tally::new(pushes);
    for id in 0..pushes {
        nodes.publish(id, 0);
        let mut n = nodes.get(id).as_ptr();
        while let Err(back) = d.push(n) {
            n = back;
            if let Some(p) = d.pop() {
                tally.take(NodeRef::from_ptr(p).unwrap());
            }
        }
        if id % 2 == 1 {
            if let Some(p) = d.pop() {
                tally.take(NodeRef::from_ptr(p).unwrap());
            }
        }
    }
    while let Some(p) = d.pop() {
        tally.take(NodeRef::from_ptr(p).unwrap());
    }
    for h in handles {
        for id in h.join().unwrap() {
            tally.take(nodes.get(id));
        }
    }
    assert!(d.is_empty());
    tally.assert_each(1);
}

/// The pop of a last entry (one CAS, no fence) racing a thief for it.
#[test]
fn deque_last_entry_pop_against_a_steal() {
    check("deque_last_entry_pop_against_a_steal", || owner_and_thieves(1, 1));
}

/// Pops of several entries (the fenced path) and wrap-around of the ring, against one thief.
#[test]
fn deque_three_pushes_one_thief() {
    check("deque_three_pushes_one_thief", || owner_and_thieves(3, 1));
}

/// Two thieves racing each other and the owner.
#[test]
fn deque_two_pushes_two_thieves() {
    check("deque_two_pushes_two_thieves", || owner_and_thieves(2, 2));
}

/// Two entries already in the deque when a thief starts: the owner pops both (the first through
/// the fenced path, where lowering `bottom` races the thief's read of it; the second, if the thief
/// took the other one, as the last entry by CAS), against one steal or two.
fn pops_against_steals(steals: usize) {
    let (nodes, d) = filled(2, 2, 2);
    let thief = thief_stealing(&d, steals);
    let mut tally = Tally::new(2);
    for _ in 0..2 {
        if let Some(p) = d.pop() {
            tally.take(NodeRef::from_ptr(p).unwrap());
        }
    }
    for id in thief.join().unwrap() {
        tally.take(nodes.get(id));
    }
    assert!(d.is_empty());
    tally.assert_each(1);
}

/// The owner's pop of two entries (fenced path, then the last one) against one steal.
#[test]
fn deque_pops_of_two_against_a_steal() {
    check("deque_pops_of_two_against_a_steal", || pops_against_steals(1));
}

/// The same against a thief that tries twice.
#[test]
fn deque_pops_of_two_against_two_steals() {
    check("deque_pops_of_two_against_two_steals", || pops_against_steals(2));
}

/// The join fast path's probe (`Processor::start_inline`): the owner pops the newest entry and,
/// when it is not the child it looks for, pushes it back; a thief steals meanwhile. Nothing is
/// lost or taken twice, and a pushed-back entry keeps its payload.
#[test]
fn deque_pop_and_push_back_against_a_steal() {
    check("deque_pop_and_push_back_against_a_steal", || {
        let (nodes, d) = filled(2, 2, 2);
        let thief = {
            let d = Arc::clone(&d);
            thread::spawn(move || steal_all(&d).into_iter().map(|t| t.id()).collect::<Vec<_>>())
        };
        if let Some(p) = d.pop() {
            // Not the child looked for: back on top (there is room, nothing was pushed since).
            d.push(p).unwrap();
        }
        let mut tally = Tally::new(2);
        for id in thief.join().unwrap() {
            tally.take(nodes.get(id));
        }
        while let Some(p) = d.pop() {
            tally.take(NodeRef::from_ptr(p).unwrap());
        }
        tally.assert_each(1);
    });
}

/// A full own start-queue spilling down a level (`Processor::push_start_overflow`): the owner
/// takes the oldest entries in one claim (`Deque::take_oldest`), pushes two more (the second into
/// the slot of the oldest, wrapping the ring) and pops, while a thief steals, once or twice.
/// Every entry is taken once, with its payload, and a thief never gets one that the owner's claim
/// took, nor a newer entry written into a slot the claim freed.
fn take_oldest_against_steals(steals: usize) {
    let (nodes, d) = filled(5, 4, 3);
    let thief = thief_stealing(&d, steals);
    let mut tally = Tally::new(5);
    let mut spill = [std::ptr::null_mut(); 2];
    let k = d.take_oldest(&mut spill);
    for &p in &spill[..k] {
        tally.take(NodeRef::from_ptr(p).unwrap());
    }
    for id in 3..5 {
        nodes.publish(id, 0);
        d.push(nodes.get(id).as_ptr()).unwrap();
    }
    while let Some(p) = d.pop() {
        tally.take(NodeRef::from_ptr(p).unwrap());
    }
    for id in thief.join().unwrap() {
        tally.take(nodes.get(id));
    }
    assert!(d.is_empty());
    tally.assert_each(1);
}

/// The owner's batch claim of the two oldest against one steal of the oldest.
#[test]
fn deque_take_oldest_against_a_steal() {
    check("deque_take_oldest_against_a_steal", || take_oldest_against_steals(1));
}

/// The same against a thief that steals twice.
#[test]
fn deque_take_oldest_against_two_steals() {
    check("deque_take_oldest_against_two_steals", || take_oldest_against_steals(2));
}

/// A thief that tries `steals` steals (retrying a lost race, giving up on an empty deque) and
/// returns the ids it got.
fn thief_stealing(d: &Arc<Deque<Node>>, steals: usize) -> thread::JoinHandle<Vec<usize>> {
    let d = Arc::clone(d);
    thread::spawn(move || {
        let mut got = Vec::new();
        for _ in 0..steals {
            loop {
                match d.steal() {
                    Stolen::Success(p) => got.extend(NodeRef::from_ptr(p).map(|t| t.id())),
                    Stolen::Retry => {
                        thread::yield_now();
                        continue;
                    }
                    Stolen::Empty => {}
                }
                break;
            }
        }
        got
    })
}

/// `nodes` nodes and a deque of capacity `cap` holding the first `pushed` of them (published, in
/// order), as a model's owner finds them before the thieves start.
fn filled(nodes: usize, cap: usize, pushed: usize) -> (Arc<Nodes>, Arc<Deque<Node>>) {
    let all = Nodes::new(nodes);
    let d = Arc::new(Deque::<Node>::new(cap, true));
    for id in 0..pushed {
        all.publish(id, 0);
        d.push(all.get(id).as_ptr()).unwrap();
    }
    (all, d)
}
