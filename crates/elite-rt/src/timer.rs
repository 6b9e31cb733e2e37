//! Sleeping ULTs of one processor, earliest deadline first. Owned by the processor; no atomics.

use crate::tcb::TcbRef;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

struct Entry {
    deadline: Instant,
    seq: u64,
    tcb: TcbRef,
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

pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl Timers {
    pub(crate) fn new() -> Timers {
        Timers { heap: BinaryHeap::new(), seq: 0 }
    }

    pub(crate) fn insert(&mut self, deadline: Instant, tcb: TcbRef) {
        self.seq += 1;
        self.heap.push(Reverse(Entry { deadline, seq: self.seq, tcb }));
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.0.deadline)
    }

    /// Removes and returns one ULT whose deadline is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<TcbRef> {
        if self.heap.peek()?.0.deadline <= now {
            self.heap.pop().map(|e| e.0.tcb)
        } else {
            None
        }
    }
}
