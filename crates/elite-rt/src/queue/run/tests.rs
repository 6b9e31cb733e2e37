//! Unit tests of the runqueue: its order against a model, the treap's shape, the lanes and the
//! zero lane's ring, the yield batch.

use super::lanes::{Lane, ZeroLane};
use super::*;
use crate::queue::tcbs;
use std::collections::HashSet;
use std::sync::Arc;

/// Checks the search order, the heap order, the parent links, the ends and the length.
fn check(q: &RunQueue) {
    q.with(|tree| {
        fn walk(t: Option<TcbRef>, parent: Option<TcbRef>, out: &mut Vec<TcbRef>) {
            let Some(t) = t else { return };
            let l = link(t);
            assert_eq!(l.parent.get(), parent, "parent link");
            if let Some(p) = parent {
                assert!(link(p).prio.get() >= l.prio.get(), "heap order");
            }
            walk(l.left.get(), Some(t), out);
            out.push(t);
            walk(l.right.get(), Some(t), out);
        }
        let mut order = Vec::new();
        walk(tree.root, None, &mut order);
        assert_eq!(order.len(), tree.tree_len);
        assert!(order.windows(2).all(|w| key(w[0]) <= key(w[1])), "search order");
        assert!(order.iter().all(|&t| key(t) > 0), "key 0 only in the zero lane");
        assert_eq!(tree.min, order.first().copied());
        assert_eq!(tree.max, order.last().copied());
        // The lanes: linked both ways; the top lane rising strictly and above the tree.
        fn walk_lane(lane: &Lane) -> Vec<TcbRef> {
            let mut out = Vec::new();
            let (mut at, mut below) = (lane.lo, None);
            while let Some(t) = at {
                assert_eq!(link(t).left.get(), below, "lane back link");
                out.push(t);
                below = Some(t);
                at = link(t).right.get();
            }
            assert_eq!(lane.hi, below);
            out
        }
        let zeros: Vec<TcbRef> = tree.zeros.iter().collect();
        let top = walk_lane(&tree.top);
        assert!(top.windows(2).all(|w| key(w[0]) <= key(w[1])), "top lane rises");
        if let (Some(&first), Some(&m)) = (top.first(), order.last()) {
            // (Equal only to newer tree entries, moved from the bottom lane.)
            assert!(key(first) >= key(m), "top lane above the tree");
        }
        let bottom = walk_lane(&tree.bottom);
        assert!(bottom.windows(2).all(|w| key(w[0]) <= key(w[1])), "bottom lane falls");
        assert!(bottom.iter().all(|&t| key(t) > 0), "key 0 only in the zero lane");
        if let Some(&last) = bottom.last() {
            if let Some(&m) = order.first().or(top.first()) {
                assert!(key(last) <= key(m), "bottom lane at or below the rest");
            }
        }
        assert_eq!(tree.tree_len + zeros.len() + top.len() + bottom.len(), tree.len);
    });
}

/// The zero lane's ring keeps arrival order at both ends while it wraps around and grows
/// (growing while wrapped, and in a batch push), checked against a `VecDeque`.
#[test]
fn the_zero_lane_ring_keeps_order_across_wraps_and_growth() {
    use std::collections::VecDeque;
    let (_chunks, t) = tcbs(300);
    let (mut lane, mut model) = (ZeroLane::new(), VecDeque::new());
    let mut next = t.iter().copied();
    let same = |lane: &ZeroLane, model: &VecDeque<TcbRef>| {
        assert!(lane.iter().eq(model.iter().copied()));
        assert_eq!(lane.front(), model.front().copied());
        assert!(lane.slots.len().is_power_of_two() && lane.len <= lane.slots.len());
    };
    // Fill 50 of 64 slots, take 40 from the front: the head is past the middle.
    for _ in 0..50 {
        let e = next.next().unwrap();
        lane.push_back(e);
        model.push_back(e);
    }
    for _ in 0..40 {
        assert_eq!(lane.pop_front(), model.pop_front());
    }
    same(&lane, &model);
    // Wrap around and grow while wrapped (to 128), then at the front.
    for i in 0..70 {
        let e = next.next().unwrap();
        if i % 3 == 0 {
            lane.push_front(e);
            model.push_front(e);
        } else {
            lane.push_back(e);
            model.push_back(e);
        }
        same(&lane, &model);
    }
    assert_eq!(lane.pop_back(), model.pop_back());
    // Batches: 7 and a last entry in, and every other round BATCH out, until the ring grows
    // within a batch push.
    for round in 0.. {
        if lane.slots.len() > 128 {
            break;
        }
        let mut first: Vec<Option<TcbRef>> = (0..BATCH - 1).map(|_| next.next()).collect();
        first.insert(3, None); // (a slot already empty is skipped)
        let last = next.next().unwrap();
        model.extend(first.iter().flatten().copied());
        model.push_back(last);
        assert_eq!(lane.push_back_batch(&mut first, last), BATCH);
        assert!(first.iter().all(Option::is_none), "the batch push takes its entries out");
        same(&lane, &model);
        let mut into = [None; BATCH];
        if round % 2 == 1 {
            lane.pop_front_batch(&mut into);
            assert!(into.iter().copied().eq(model.drain(..BATCH).map(Some)));
            same(&lane, &model);
        }
    }
    while let Some(e) = model.pop_front() {
        assert_eq!(lane.pop_front(), Some(e));
    }
    assert!(lane.is_empty() && lane.pop_front().is_none() && lane.pop_back().is_none());
}

#[test]
fn orders_by_key_and_thieves_take_the_lowest() {
    let (_chunks, t) = tcbs(5);
    let q = RunQueue::new();
    for (key, &tcb) in [3u64, 1, 4, 1, 5].iter().zip(&t) {
        // t[1] and t[3] share key 1: t[1] arrived first and leaves the best end first.
        q.push(*key, tcb);
        check(&q);
    }
    assert_eq!(q.len(), 5);
    assert_eq!(q.pop_best(), Some(t[4]));
    let mut stolen = Vec::new();
    q.steal(|n| n / 2, &mut stolen);
    // The thief takes from the low end: the newer of the two key-1 entries first.
    assert_eq!(stolen, vec![t[3], t[1]]);
    check(&q);
    assert_eq!(q.pop_best(), Some(t[2]));
    assert_eq!(q.pop_best(), Some(t[0]));
    assert_eq!(q.pop_best(), None);
    assert_eq!(q.len(), 0);
}

#[test]
fn equal_keys_leave_oldest_first() {
    let (_chunks, t) = tcbs(8);
    let q = RunQueue::new();
    for &tcb in &t {
        q.push(7, tcb);
    }
    check(&q);
    let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
    assert_eq!(out, t);
}

#[test]
fn lifo_and_yield_keys() {
    // No Affinity: increasing entry numbers (a stack), and yields keyed 0 that queue up
    // behind everything in arrival order.
    let (_chunks, t) = tcbs(6);
    let q = RunQueue::new();
    q.push(1, t[0]);
    q.push(2, t[1]);
    q.push(0, t[2]);
    q.push(0, t[3]);
    q.push(3, t[4]);
    q.push(4, t[5]);
    check(&q);
    let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
    assert_eq!(out, vec![t[5], t[4], t[1], t[0], t[2], t[3]]);
}

#[test]
fn a_sparing_steal_leaves_the_spared_where_they_were() {
    // Keys 1..=4 and two yielders (key 0): a thief wanting 4 takes the lowest four, the
    // yielders first, sparing the newer yielder and key 1.
    let (_chunks, t) = tcbs(6);
    let q = RunQueue::new();
    for (i, &tcb) in t[..4].iter().enumerate() {
        q.push(i as u64 + 1, tcb);
    }
    q.push(0, t[4]);
    q.push(0, t[5]);
    let (mut into, mut kept) = (Vec::new(), Vec::new());
    let mut asked = Vec::new();
    let spared = q.steal_sparing(
        |n| n - 2,
        |u, ahead| {
            asked.push((u, ahead));
            u == t[5] || u == t[0]
        },
        &mut into,
        &mut kept,
    );
    assert_eq!(spared, 2);
    // Asked lowest first, each with the entries left that run before it.
    assert_eq!(asked, [(t[5], 5), (t[4], 4), (t[0], 3), (t[1], 2)]);
    assert_eq!(into, [t[4], t[1]]);
    assert!(kept.is_empty());
    check(&q);
    let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
    assert_eq!(out, [t[3], t[2], t[0], t[5]], "the spared back with their keys");
}

/// Random pushes, pops and steals against a model (a list sorted by key, then arrival).
#[test]
fn matches_a_model_under_random_operations() {
    let (_chunks, t) = tcbs(300);
    let q = RunQueue::new();
    let mut model: Vec<(u64, u64, TcbRef)> = Vec::new(); // (key, arrival, tcb)
    let mut free: Vec<TcbRef> = t.clone();
    let mut arrival = 0u64;
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // Best first: highest key, then oldest arrival.
    let best = |m: &Vec<(u64, u64, TcbRef)>| {
        m.iter().enumerate().max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1))).map(|(i, _)| i)
    };
    let worst = |m: &Vec<(u64, u64, TcbRef)>| {
        m.iter().enumerate().min_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1))).map(|(i, _)| i)
    };
    // Miri interprets every step slowly: fewer steps still cover every operation many times.
    let steps = if cfg!(miri) { 1_500 } else { 20_000 };
    for step in 0..steps {
        match next() % 10 {
            0..=5 if !free.is_empty() => {
                let tcb = free.pop().unwrap();
                // A mix of key patterns: small ranges (many ties), increasing, zero,
                // decreasing (with some jitter), ties at the top, the top keys rising
                // (Reload Transient's reload transients of 0, ordered by the entry count;
                // some jitter as well).
                let key = match next() % 7 {
                    0 => next() % 8,
                    1 => arrival + 100,
                    2 => 0,
                    3 => 1_000_000 - 2 * arrival + next() % 5,
                    4 => u64::MAX,
                    5 => (u64::MAX << 61) | (arrival + next() % 4),
                    _ => next() % 1000,
                };
                q.push(key, tcb);
                model.push((key, arrival, tcb));
                arrival += 1;
            }
            6..=8 => {
                let expect = best(&model).map(|i| model.remove(i).2);
                let got = q.pop_best();
                assert_eq!(got, expect, "pop at step {step}");
                free.extend(got);
            }
            _ => {
                let mut stolen = Vec::new();
                q.steal(|n| n.div_ceil(3), &mut stolen);
                for &s in &stolen {
                    let expect = worst(&model).map(|i| model.remove(i).2);
                    assert_eq!(Some(s), expect, "steal at step {step}");
                }
                free.extend(stolen);
            }
        }
        assert_eq!(q.len(), model.len());
        if step % 7 == 0 {
            check(&q);
        }
    }
}

/// The tree stays shallow: a sorted insertion order (the worst case of a plain search tree)
/// gives a depth of a small multiple of log2(n). Falling keys stay in the top lane (the
/// first went above everything); with a tree below them (one entry), a key just below the
/// highest moves the rest into the tree, one after the other, in sorted order.
#[test]
fn stays_balanced_for_sorted_keys() {
    let n = if cfg!(miri) { 512 } else { 4096 };
    let (_chunks, t) = tcbs(n + 1);
    let q = RunQueue::new();
    q.with(|tree| {
        tree.len += 1;
        tree.push_tree(1, t[n]);
    });
    for (i, &tcb) in t[..n - 1].iter().enumerate() {
        q.push(10_000 - 2 * i as u64, tcb);
    }
    q.with(|tree| assert_eq!((tree.tree_len, tree.len), (1, n), "falling keys in the top lane"));
    q.push(9_999, t[n - 1]);
    check(&q);
    let depth = q.with(|tree| {
        assert_eq!(tree.tree_len, n - 1, "falling keys but the highest in the tree");
        fn depth(t: Option<TcbRef>) -> usize {
            t.map_or(0, |t| 1 + depth(link(t).left.get()).max(depth(link(t).right.get())))
        }
        depth(tree.root)
    });
    assert!(depth <= 40, "depth {depth} for {n} sorted keys (log2 <= 12)");
}

/// Rising keys stay in the top lane until a lower one comes, which moves those below it to
/// the bottom lane (there is no tree).
#[test]
fn rising_keys_use_the_top_lane_until_a_lower_key_comes() {
    let (_chunks, t) = tcbs(6);
    let q = RunQueue::new();
    for (i, &tcb) in t[..4].iter().enumerate() {
        q.push(10 + i as u64, tcb);
    }
    q.with(|tree| assert_eq!((tree.tree_len, tree.len), (0, 4)));
    q.push(11, t[4]); // not above 13: the entry below 11 moves to the bottom lane (no tree)
    q.with(|tree| assert_eq!((tree.tree_len, tree.len, tree.bottom.hi), (0, 5, Some(t[0]))));
    q.push(20, t[5]); // above everything again
    q.with(|tree| assert_eq!(tree.tree_len, 0));
    check(&q);
    let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
    // 11 twice: t[1] (pushed first) before t[4].
    assert_eq!(out, vec![t[5], t[3], t[2], t[1], t[4], t[0]]);
}

/// Falling keys stay in the lanes (here the top lane: they began above everything), an
/// equal lowest key goes to the bottom lane, served last, and a thief takes its newest
/// first; a key within a lane's range moves the lane's part beyond it into the tree.
#[test]
fn falling_and_equal_keys_stay_in_the_lanes() {
    let (_chunks, t) = tcbs(7);
    let q = RunQueue::new();
    for (i, &tcb) in t[..4].iter().enumerate() {
        q.push(20 - 2 * i as u64, tcb); // 20, 18, 16, 14
    }
    q.push(14, t[4]); // equal to the lowest: below it, newer
    q.with(|tree| assert_eq!((tree.tree_len, tree.len), (0, 5)));
    q.push(30, t[5]); // above everything: the top lane
    q.with(|tree| assert_eq!((tree.tree_len, tree.len), (0, 6)));
    check(&q);
    let mut stolen = Vec::new();
    q.steal(|_| 1, &mut stolen);
    assert_eq!(stolen, vec![t[4]], "the newest of the lowest");
    q.push(19, t[6]); // within the top lane: its entries below move to the bottom lane
    q.with(|tree| assert_eq!((tree.tree_len, tree.bottom.lo, tree.bottom.hi), (0, Some(t[3]), Some(t[1]))));
    check(&q);
    let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
    assert_eq!(out, vec![t[5], t[0], t[6], t[1], t[2], t[3]]);
}

/// Batches where most keys tie at the highest, the others fall below them in any order. With no
/// tree, a key within the top lane's range moves the lane's entries below it to the bottom lane in
/// one piece; a key within the bottom lane's range takes its place there after a short walk.
/// Nothing enters the tree, and the order is the keys', equal keys oldest first.
#[test]
fn ties_at_the_top_after_lower_keys_stay_in_the_lanes() {
    let top = u64::MAX;
    let mut keys = vec![top, top];
    keys.extend((0..12).map(|i| 100 - i)); // falling: the top lane's low end
    keys.push(top); // past 12 entries below it: they go to the bottom lane
    keys.extend([95, 60, 50, top, 120, top, 40, 30, 97, top]);
    let (_chunks, t) = tcbs(keys.len());
    let q = RunQueue::new();
    for (i, (&k, &tcb)) in keys.iter().zip(&t).enumerate() {
        q.push(k, tcb);
        check(&q);
        q.with(|tree| {
            assert_eq!(tree.tree_len, 0, "after key {k}");
            match i {
                // The falling 12 moved to the bottom lane.
                14 => {
                    assert_eq!((tree.bottom.lo.map(key), tree.bottom.hi.map(key)), (Some(89), Some(100)))
                }
                // 95: in its place in the bottom lane, 5 entries from its high end.
                15 => assert_eq!(tree.bottom.hi.map(key), Some(100)),
                // 120 went to the top lane, then to the bottom lane.
                19 => assert_eq!(tree.top.lo, Some(tcb)),
                20 => assert_eq!(tree.bottom.hi, Some(t[19])),
                _ => {}
            }
        });
    }
    let mut want: Vec<(u64, usize)> = keys.iter().copied().zip(0..).collect();
    want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let want: Vec<TcbRef> = want.iter().map(|&(_, i)| t[i]).collect();
    // A thief takes the lowest (newest of equal keys) first; the rest leave best first.
    let mut stolen = Vec::new();
    q.steal(|_| 2, &mut stolen);
    let n = want.len();
    assert_eq!(stolen, [want[n - 1], want[n - 2]]);
    check(&q);
    let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
    assert_eq!(out, want[..n - 2]);
}

/// A falling batch that began above everything stays in the top lane, one low entry among
/// it (a releaser that ran long before the others) goes to the bottom lane, and so does an
/// older entry below the batch, once.
#[test]
fn a_falling_batch_with_an_outlier_stays_in_the_lanes() {
    let (_chunks, t) = tcbs(9);
    let q = RunQueue::new();
    q.push(20, t[8]); // an older entry below the batch: the top lane, then the bottom lane
    for (&k, &tcb) in [90u64, 80, 70, 5, 60, 50, 45, 40].iter().zip(&t) {
        q.push(k, tcb);
        check(&q);
    }
    q.with(|tree| assert_eq!((tree.tree_len, tree.len), (0, 9), "20 moved to the bottom lane"));
    let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
    assert_eq!(out, vec![t[0], t[1], t[2], t[4], t[5], t[6], t[7], t[8], t[3]]);
}

/// One yield of `running` (key 0) through the yield batch, as the processor makes it: the
/// ULT that runs next.
fn yield_batched(q: &RunQueue, batch: &mut YieldBatch, running: TcbRef) -> TcbRef {
    match batch.swap(running) {
        Ok(n) => n,
        Err(t) => q.yield_refill(t, batch).expect("the yielder itself at least"),
    }
}

/// A round-robin of yields through the batch runs the ULTs in the order of one queue (the
/// zero lane), each ULT either held by the batch or in the runqueue; the batch is taken only
/// while it leaves `BATCH` entries for thieves; flushed, the runqueue holds every ULT in that
/// order. (That a refill is the only acquisition of the lock in a batch is not checked here.)
#[test]
fn the_yield_batch_keeps_the_round_robin() {
    for n in [2, BATCH + 1, 2 * BATCH, 2 * BATCH + 1, 5 * BATCH + 3] {
        let (_chunks, t) = tcbs(n);
        let q = RunQueue::new();
        for &tcb in &t[1..] {
            q.push(0, tcb);
        }
        let mut model: std::collections::VecDeque<TcbRef> = t[1..].iter().copied().collect();
        let (mut batch, mut running) = (YieldBatch::new(), t[0]);
        for step in 0..10 * n {
            let next = yield_batched(&q, &mut batch, running);
            model.push_back(running);
            assert_eq!(Some(next), model.pop_front(), "n {n} step {step}: the oldest next");
            running = next;
            let held = if batch.is_empty() { 0 } else { BATCH - 1 }; // (the first runs)
            assert_eq!(q.len() + held, n - 1, "n {n} step {step}: every ULT once");
            if held > 0 {
                assert!(q.len() >= BATCH, "n {n}: thieves keep at least BATCH");
            }
            // Sometimes flush, as the processor does when it leaves its chain of switches.
            if step % 7 == 3 {
                q.flush_batch(&mut batch);
                assert!(batch.is_empty());
                check(&q);
            }
        }
        q.flush_batch(&mut batch);
        check(&q);
        let out: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
        assert_eq!(out, Vec::from(model), "n {n}: the order of one queue");
    }
}

/// A ULT pushed with a key while the batch holds ULTs goes before all of them
/// (`push_flushing`), and the round-robin resumes in its order behind it.
#[test]
fn a_push_during_a_batch_orders_it_among_the_batch() {
    let n = 4 * BATCH;
    let (_chunks, t) = tcbs(n + 1);
    let q = RunQueue::new();
    for &tcb in &t[1..n] {
        q.push(0, tcb);
    }
    let (mut batch, mut running) = (YieldBatch::new(), t[0]);
    let mut order = Vec::new();
    for _ in 0..3 {
        running = yield_batched(&q, &mut batch, running);
        order.push(running);
    }
    assert!(!batch.is_empty());
    q.push_flushing(5, t[n], &mut batch);
    assert!(batch.is_empty());
    check(&q);
    assert_eq!(q.pop_best(), Some(t[n]), "the keyed entry first");
    // Then the ULTs after the three that ran, and those three (and t[0]) at the back.
    let rest: Vec<TcbRef> = std::iter::from_fn(|| q.pop_best()).collect();
    let expected: Vec<TcbRef> = t[4..n].iter().chain(&t[..3]).copied().collect();
    assert_eq!((order, running), (vec![t[1], t[2], t[3]], t[3]));
    assert_eq!(rest, expected);
}

#[test]
fn owner_and_thief_take_every_entry_once() {
    const N: usize = 24;
    let (_chunks, t) = tcbs(N);
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

/// A re-key (a policy switch) keeps every entry once, gives each non-zero entry the new key
/// (asked lowest old key first), leaves the zero lane's entries at key 0 in their order, and
/// leaves a well-formed queue: the new order is the new keys'.
#[test]
fn rekey_gives_every_entry_its_new_key_once() {
    let (_chunks, t) = tcbs(120);
    let q = RunQueue::new();
    // Rising keys (the top lane), falling ones (the bottom lane), the tree, and yielders.
    for (i, &e) in t.iter().enumerate() {
        let k = match i % 4 {
            0 => 0,
            1 => 1000 + i as u64,
            2 => 900 - i as u64,
            _ => 1 + (i as u64 * 7919) % 500,
        };
        q.push(k, e);
    }
    check(&q);
    let zeros: Vec<TcbRef> = t.iter().step_by(4).copied().collect();
    // The new key: the reverse of the entry's index (so the order changes completely).
    let index = |e: TcbRef| t.iter().position(|&x| x == e).unwrap() as u64;
    let mut asked = Vec::new();
    let mut buf = Vec::new();
    q.rekey(
        |e| {
            asked.push(key(e));
            1 + 200 - index(e)
        },
        &mut buf,
    );
    check(&q);
    assert!(buf.is_empty());
    assert_eq!(q.len(), t.len());
    assert_eq!(asked.len(), t.len() - zeros.len(), "asked once per non-zero entry");
    assert!(asked.windows(2).all(|w| w[0] <= w[1]), "asked lowest old key first");
    // Out in the new order: the non-zero entries by falling new key (rising index), then the
    // zero lane's, oldest first.
    let mut out = Vec::new();
    while let Some(e) = q.pop_best() {
        out.push(e);
    }
    let mut want: Vec<TcbRef> = t.iter().enumerate().filter(|(i, _)| i % 4 != 0).map(|(_, &e)| e).collect();
    want.extend(&zeros);
    assert_eq!(out, want);
}
