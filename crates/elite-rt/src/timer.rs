//! Sleeping ULTs of one processor, earliest deadline first. Owned by the processor; no atomics.
//!
//! Two kinds of entry: a plain sleep (`elite_rt::sleep`), which always fires, and the deadline of a
//! timed blocking wait (`sync::wait`), which fires only if the wait is still unresolved when the
//! deadline comes (the processor checks that with the wait word of the TCB). A wait that was notified
//! first leaves a stale entry behind; stale entries are dropped when they come due, and the heap is
//! compacted when it has grown to twice its size after the last compaction, so a program that keeps
//! waiting with long timeouts that never expire does not grow it without bound.

use crate::tcb::TcbRef;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

struct Entry {
    deadline: Instant,
    seq: u64,
    tcb: TcbRef,
    /// 0 for a sleep; otherwise the sequence number of the timed wait this deadline belongs to.
    wait: u64,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.deadline, self.seq) == (o.deadline, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(o.deadline, o.seq))
    }
}

/// What came due.
pub(crate) enum Due {
    Sleep(TcbRef),
    /// The deadline of timed wait number `.1` of the ULT.
    Wait(TcbRef, u64),
}

pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    /// Heap size at which the next compaction runs.
    compact_at: usize,
}

/// Smallest heap that is ever compacted.
const COMPACT_MIN: usize = 1024;

impl Timers {
    pub(crate) fn new() -> Timers {
        Timers { heap: BinaryHeap::new(), seq: 0, compact_at: COMPACT_MIN }
    }

    pub(crate) fn insert(&mut self, deadline: Instant, tcb: TcbRef) {
        self.push(deadline, tcb, 0);
    }

    /// Adds the deadline of timed wait `wait` (non-zero) of `tcb`.
    pub(crate) fn insert_wait(&mut self, deadline: Instant, tcb: TcbRef, wait: u64) {
        debug_assert_ne!(wait, 0);
        if self.heap.len() >= self.compact_at {
            self.compact();
        }
        self.push(deadline, tcb, wait);
    }

    fn push(&mut self, deadline: Instant, tcb: TcbRef, wait: u64) {
        self.seq += 1;
        self.heap.push(Reverse(Entry { deadline, seq: self.seq, tcb, wait }));
    }

    /// Drops the entries of waits that were resolved before their deadline.
    #[cold]
    fn compact(&mut self) {
        let heap = std::mem::take(&mut self.heap);
        self.heap = heap
            .into_iter()
            .filter(|e| e.0.wait == 0 || crate::sync::wait::is_pending(e.0.tcb, e.0.wait))
            .collect();
        self.compact_at = (self.heap.len() * 2).max(COMPACT_MIN);
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.0.deadline)
    }

    /// Removes and returns one entry whose deadline is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Due> {
        if self.heap.peek()?.0.deadline <= now {
            self.heap.pop().map(|e| match e.0.wait {
                0 => Due::Sleep(e.0.tcb),
                w => Due::Wait(e.0.tcb, w),
            })
        } else {
            None
        }
    }

    /// Number of entries, stale ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::atomics::Ordering;
    use crate::tcb::Chunk;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn stale_wait_deadlines_are_compacted_and_live_ones_kept() {
        let chunk = Chunk::allocate(&Arc::new(()));
        let mut tcbs = chunk.tcbs();
        let (stale, live) = (tcbs.next().unwrap(), tcbs.next().unwrap());
        // `stale` is on wait 2 (waits 1 and 2 were notified); `live` waits in wait 5.
        stale.tcb().exec.wait.store(crate::sync::wait::word(2, true), Ordering::Relaxed);
        live.tcb().exec.wait.store(crate::sync::wait::word(5, false), Ordering::Relaxed);
        let mut timers = Timers::new();
        let later = Instant::now() + Duration::from_secs(3600);
        timers.insert_wait(later, live, 5);
        timers.insert(later, live);
        for _ in 0..10 * COMPACT_MIN {
            timers.insert_wait(later, stale, 2);
        }
        assert!(timers.len() <= 2 * COMPACT_MIN + 2, "stale entries pile up: {}", timers.len());
        timers.compact();
        assert_eq!(timers.len(), 2, "the live wait and the sleep stay");
        let now = later + Duration::from_secs(1);
        let mut due = Vec::new();
        while let Some(d) = timers.pop_due(now) {
            due.push(match d {
                Due::Sleep(_) => 0,
                Due::Wait(t, seq) => {
                    assert_eq!(t, live);
                    seq
                }
            });
        }
        due.sort_unstable();
        assert_eq!(due, [0, 5]);
    }
    #[test]
    fn timers_fire_in_deadline_order_and_only_when_due() {
        let chunk = Chunk::allocate(&Arc::new(()));
        let t: Vec<TcbRef> = chunk.tcbs().take(4).collect();
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
}
