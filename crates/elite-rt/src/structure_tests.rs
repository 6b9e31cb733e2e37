//! Tests of the runtime's data structures on their own, without processors, stacks or switches:
//! the wake-up/clean-up stack, the deathrow, the runqueue, the timers, the pools, the wait list and
//! the spin lock of `sync`. They use real TCBs (a chunk of them) and plain OS threads, so they also
//! run under Miri (`cargo +nightly miri test -p elite-rt --lib`, a step of `.ci/run`), which checks
//! them for undefined behaviour, data races and leaks. Sizes are small for that reason.

use crate::pool::{Got, LocalPool, NodePool};
use crate::queue::deathrow::Deathrow;
use crate::queue::run::RunQueue;
use crate::queue::wakeup::WakeupStack;
use crate::sync::wait::{SpinLock, WaitList, WaitNode};
use crate::tcb::{Chunk, Life, TcbRef};
use crate::timer::{Due, Timers};
use std::collections::HashSet;
use std::ptr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A chunk of fresh TCBs (owned by a dummy runtime state) and its first `n` TCBs.
fn tcbs(n: usize) -> (Arc<()>, Box<Chunk>, Vec<TcbRef>) {
    let owner = Arc::new(());
    let chunk = Chunk::allocate(&owner);
    let t = chunk.tcbs().take(n).collect();
    (owner, chunk, t)
}

#[test]
fn wakeup_stack_drains_newest_first() {
    let (_owner, _chunk, t) = tcbs(5);
    let s = WakeupStack::new();
    assert!(s.is_empty());
    assert_eq!(s.drain().count(), 0);
    for &x in &t {
        s.push(x);
    }
    assert!(!s.is_empty());
    let got: Vec<TcbRef> = s.drain().collect();
    assert_eq!(got, [t[4], t[3], t[2], t[1], t[0]]);
    assert!(s.is_empty());
    // Drained entries may be pushed again at once (the iterator read each link before yielding).
    for x in s.drain() {
        s.push(x);
    }
    s.push(t[0]);
    assert_eq!(s.drain().collect::<Vec<_>>(), [t[0]]);
}

#[test]
fn wakeup_stack_takes_every_concurrent_push_exactly_once() {
    const PUSHERS: usize = 3;
    const EACH: usize = 8;
    let (_owner, _chunk, t) = tcbs(PUSHERS * EACH);
    let s = Arc::new(WakeupStack::new());
    let pushers: Vec<_> = t
        .chunks(EACH)
        .enumerate()
        .map(|(p, mine)| {
            let (s, mine) = (s.clone(), mine.to_vec());
            std::thread::spawn(move || {
                for (i, &x) in mine.iter().enumerate() {
                    s.push(x);
                    if (i + p) % 3 == 0 {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    // The owner drains while the pushers push.
    let mut seen = HashSet::new();
    while seen.len() < PUSHERS * EACH {
        for x in s.drain() {
            assert!(seen.insert(x.as_ptr() as usize), "a TCB came out twice");
        }
        std::thread::yield_now();
    }
    for p in pushers {
        p.join().unwrap();
    }
    assert!(s.is_empty());
    assert_eq!(seen, t.iter().map(|x| x.as_ptr() as usize).collect());
}

/// The deathrow is a count (nothing walks it: see `queue::deathrow`): it counts exits in and
/// clean-ups out.
#[test]
fn deathrow_counts_exits_in_and_cleanups_out() {
    let (_owner, _chunk, t) = tcbs(6);
    for x in &t {
        x.tcb().life.set(Life::Exited);
    }
    let mut d = Deathrow::new();
    for &x in &t {
        d.enter(x);
    }
    assert_eq!(d.len(), 6);
    for _ in 0..3 {
        d.leave();
    }
    assert_eq!(d.len(), 3);
    d.enter(t[5]);
    assert_eq!(d.len(), 4);
    for _ in 0..4 {
        d.leave();
    }
    assert_eq!(d.len(), 0);
}

/// In a debug build, a clean-up of a ULT that is on no deathrow is caught.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "a ULT left a deathrow it was not on")]
fn deathrow_catches_a_leave_without_an_enter() {
    let (_owner, _chunk, t) = tcbs(1);
    t[0].tcb().life.set(Life::Exited);
    let mut d = Deathrow::new();
    d.enter(t[0]);
    d.leave();
    d.leave();
}

#[test]
fn runqueue_owner_and_thief_take_every_entry_once() {
    const N: usize = 24;
    let (_owner, _chunk, t) = tcbs(N);
    let q = Arc::new(RunQueue::new());
    let thief = {
        let q = q.clone();
        std::thread::spawn(move || {
            let mut stolen = Vec::new();
            for _ in 0..50 {
                q.steal(|n| n.div_ceil(2), &mut stolen);
                std::thread::yield_now();
            }
            stolen
        })
    };
    let mut mine = Vec::new();
    for (i, &x) in t.iter().enumerate() {
        // Rising keys (No Affinity's sequence numbers) with a yielder's key 0 now and then.
        q.push(if i % 5 == 4 { 0 } else { i as u64 + 1 }, x);
        if i % 3 == 2 {
            mine.extend(q.pop_best());
        }
    }
    let stolen = thief.join().unwrap();
    while let Some(x) = q.pop_best() {
        mine.push(x);
    }
    assert_eq!(q.len(), 0);
    let all: Vec<usize> = mine.iter().chain(&stolen).map(|x| x.as_ptr() as usize).collect();
    let unique: HashSet<usize> = all.iter().copied().collect();
    assert_eq!(all.len(), N, "every entry left exactly once");
    assert_eq!(unique, t.iter().map(|x| x.as_ptr() as usize).collect());
}

#[test]
fn timers_fire_in_deadline_order_and_only_when_due() {
    let (_owner, _chunk, t) = tcbs(4);
    let mut timers = Timers::new();
    let base = Instant::now();
    timers.insert(base + Duration::from_millis(30), t[0]);
    timers.insert_wait(base + Duration::from_millis(10), t[1], 7);
    timers.insert(base + Duration::from_millis(20), t[2]);
    timers.insert(base + Duration::from_millis(20), t[3]); // same deadline: arrival order
    assert_eq!(timers.next_deadline(), Some(base + Duration::from_millis(10)));
    assert!(timers.pop_due(base).is_none(), "nothing is due yet");
    let mut order = Vec::new();
    while let Some(d) = timers.pop_due(base + Duration::from_millis(25)) {
        order.push(match d {
            Due::Sleep(x) => (x, 0),
            Due::Wait(x, seq) => (x, seq),
        });
    }
    assert_eq!(order, [(t[1], 7), (t[2], 0), (t[3], 0)]);
    assert!(!timers.is_empty());
    assert!(matches!(timers.pop_due(base + Duration::from_secs(1)), Some(Due::Sleep(x)) if x == t[0]));
    assert!(timers.is_empty());
    assert_eq!(timers.next_deadline(), None);
}

#[test]
fn pools_keep_or_free_every_object_exactly_once() {
    // Boxes, so that a lost object is a leak and a duplicated one a double free: Miri reports both.
    let node = NodePool::new(6);
    let mut a = LocalPool::new(4);
    let mut b = LocalPool::new(4);
    for i in 0..20u32 {
        let _ = a.put(Box::new(i), &node);
    }
    // `a` overflowed batches to the node, which kept at most its limit and dropped the rest.
    let mut taken = Vec::new();
    while let Got::Hit(x) | Got::Underflow(x) = b.get(&node) {
        taken.push(*x);
    }
    assert!(!taken.is_empty() && taken.len() <= 6, "{taken:?}");
    let mut from_a = 0;
    while let Got::Hit(_) | Got::Underflow(_) = a.get(&node) {
        from_a += 1;
    }
    assert_eq!(from_a, 4, "the local pool kept its capacity");
    node.put_one(Box::new(99));
    assert_eq!(node.take_one().map(|x| *x), Some(99));
    node.put_one(Box::new(100));
    node.clear();
    assert!(node.take_one().is_none());
}

#[test]
fn wait_list_is_fifo_with_front_insertion_and_removal_anywhere() {
    // Nodes of the calling OS thread (not a ULT), as `sync` makes them outside a runtime.
    let n: Vec<WaitNode> = (0..5).map(|_| WaitNode::new()).collect();
    let mut list = WaitList::new();
    assert!(list.is_empty());
    list.push_back(&n[0]);
    list.push_back(&n[1]);
    list.push_back(&n[2]);
    list.push_front(&n[3]); // a waiter that lost a race keeps its place
    assert_eq!(list.len(), 4);
    list.remove(&n[1]);
    assert!(!n[1].is_linked());
    list.remove(&n[1]); // unlinked already: nothing happens
    list.push_back(&n[4]);
    let order: Vec<*const WaitNode> =
        std::iter::from_fn(|| list.pop_front().map(|x| x as *const WaitNode)).collect();
    let expect: Vec<*const WaitNode> = [3, 0, 2, 4].iter().map(|&i| ptr::addr_of!(n[i])).collect();
    assert_eq!(order, expect);
    assert!(list.is_empty());
    assert_eq!(list.len(), 0, "the count follows the links");
    assert!(n.iter().all(|x| !x.is_linked()));
}

#[test]
fn spin_lock_serializes_its_holders() {
    const THREADS: usize = 3;
    const EACH: usize = 20;
    let lock = Arc::new(SpinLock::new(Vec::new()));
    let hs: Vec<_> = (0..THREADS)
        .map(|i| {
            let lock = lock.clone();
            std::thread::spawn(move || {
                for k in 0..EACH {
                    let mut v = lock.lock();
                    // A non-atomic read-modify-write: a data race here would be caught by Miri.
                    let len = v.len();
                    v.push((i, k));
                    assert_eq!(v.len(), len + 1);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(lock.lock().len(), THREADS * EACH);
}
