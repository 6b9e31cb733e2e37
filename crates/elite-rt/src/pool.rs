//! Bounded pools of reusable memory objects (TCBs, stacks) in a two-level hierarchy.
//!
//! Each processor owns a [`LocalPool`] (a plain `Vec`, no atomics: only its processor touches it).
//! When it overflows, half of it moves up to the node's [`NodePool`] in one batch; when it runs dry it
//! refills half its capacity from the node in one batch. Only when the node is empty too does the
//! caller allocate fresh memory (ELiTE section 2.2: "global pools are not useful"), except for
//! TCBs, which are never returned to the system: a processor whose node has none left refills from
//! another node's pool first (`Processor::tcb_from_other_nodes`), so that ULTs spawned on one node
//! and ending on another cannot pile TCBs up there for ever. Batching keeps the node's lock off the
//! common path.

use std::sync::Mutex;

/// What a [`LocalPool::get`] had to do.
#[must_use]
pub(crate) enum Got<T> {
    /// Served from the local pool.
    Hit(T),
    /// Refilled from the node first, then served.
    Underflow(T),
    /// Neither level had one: allocate fresh.
    Empty,
}

/// A processor's pool.
pub(crate) struct LocalPool<T> {
    items: Vec<T>,
    capacity: usize,
}

/// Most entries a [`LocalPool`] allocates room for up front (the default TCB pool limit): a larger
/// limit grows the pool as it fills, so that a limit meaning "keep everything"
/// ([`RuntimeBuilder::tcb_pool_limit`](crate::RuntimeBuilder::tcb_pool_limit) has no upper bound)
/// costs nothing until used.
const PREALLOCATED: usize = 256;

impl<T> LocalPool<T> {
    pub(crate) fn new(capacity: usize) -> LocalPool<T> {
        LocalPool { items: Vec::with_capacity(capacity.min(PREALLOCATED)), capacity }
    }

    /// Takes an object, refilling from `node` when empty.
    #[inline]
    pub(crate) fn get(&mut self, node: &NodePool<T>) -> Got<T> {
        match self.items.pop() {
            Some(t) => Got::Hit(t),
            None => self.underflow(node),
        }
    }

    #[cold]
    fn underflow(&mut self, node: &NodePool<T>) -> Got<T> {
        node.take_batch(self.capacity.div_ceil(2), &mut self.items);
        match self.items.pop() {
            Some(t) => Got::Underflow(t),
            None => Got::Empty,
        }
    }

    /// The object the `k`-th [`LocalPool::get`] from now would hand out (0: the next), if the pool
    /// holds that many and nothing is put back meanwhile (for a prefetch of it).
    #[inline]
    pub(crate) fn peek(&self, k: usize) -> Option<&T> {
        self.items.len().checked_sub(k + 1).map(|i| &self.items[i])
    }

    /// Returns an object; returns true when this overflowed a batch to `node`.
    #[inline]
    pub(crate) fn put(&mut self, t: T, node: &NodePool<T>) -> bool {
        if self.items.len() < self.capacity {
            self.items.push(t);
            return false;
        }
        self.overflow(t, node);
        true
    }

    #[cold]
    fn overflow(&mut self, t: T, node: &NodePool<T>) {
        let keep = self.capacity / 2;
        node.put_batch(self.items.drain(keep..));
        self.items.push(t);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.items.len()
    }
}

/// A node's pool, shared by its processors; bounded when `limit` is set (what exceeds it is
/// dropped, i.e. returned to the system).
pub(crate) struct NodePool<T> {
    items: Mutex<Vec<T>>,
    limit: usize,
}

impl<T> NodePool<T> {
    pub(crate) fn new(limit: usize) -> NodePool<T> {
        NodePool { items: Mutex::new(Vec::new()), limit }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        // A panic cannot happen while the lock is held (only Vec moves), so poisoning is impossible;
        // recover the data anyway rather than propagate.
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take_batch(&self, n: usize, into: &mut Vec<T>) {
        let mut items = self.lock();
        let from = items.len().saturating_sub(n);
        into.extend(items.drain(from..));
    }

    fn put_batch(&self, batch: impl Iterator<Item = T>) {
        let mut items = self.lock();
        let mut excess = Vec::new();
        for t in batch {
            if items.len() < self.limit {
                items.push(t);
            } else {
                excess.push(t);
            }
        }
        drop(items);
        drop(excess);
    }

    /// Takes one object (used by threads outside the runtime, which have no local pool).
    pub(crate) fn take_one(&self) -> Option<T> {
        self.lock().pop()
    }

    /// Returns one object from outside the runtime.
    pub(crate) fn put_one(&self, t: T) {
        let mut items = self.lock();
        if items.len() < self.limit {
            items.push(t);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Drops everything pooled here.
    pub(crate) fn clear(&self) {
        let items = std::mem::take(&mut *self.lock());
        drop(items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_moves_half_up_and_underflow_takes_half_back() {
        let node = NodePool::new(usize::MAX);
        let mut local = LocalPool::new(4);
        for i in 0..4 {
            assert!(!local.put(i, &node));
        }
        assert!(local.put(4, &node));
        assert_eq!((local.len(), node.len()), (3, 2));
        let mut got = Vec::new();
        for _ in 0..3 {
            match local.get(&node) {
                Got::Hit(x) => got.push(x),
                _ => panic!("expected hits"),
            }
        }
        assert!(matches!(local.get(&node), Got::Underflow(_)));
        assert!(matches!(local.get(&node), Got::Hit(_)));
        assert!(matches!(local.get(&node), Got::Empty));
        assert_eq!(got, vec![4, 1, 0]);
    }

    #[test]
    fn peek_names_what_the_kth_get_from_now_hands_out() {
        let node = NodePool::new(usize::MAX);
        let mut local = LocalPool::new(8);
        for i in 0..5 {
            assert!(!local.put(i, &node));
        }
        let ahead: Vec<Option<i32>> = (0..6).map(|k| local.peek(k).copied()).collect();
        assert_eq!(ahead, [Some(4), Some(3), Some(2), Some(1), Some(0), None]);
        for (k, expected) in ahead.iter().take(5).enumerate() {
            match local.get(&node) {
                Got::Hit(x) => assert_eq!(Some(x), *expected, "the get {k} from the first peek"),
                _ => panic!("expected hits"),
            }
        }
        assert_eq!(local.peek(0), None);
    }

    /// A limit too large to allocate up front (any `usize`, which the builder accepts) only
    /// bounds the pool: it allocated `capacity` entries at once, a capacity overflow or an
    /// allocation failure that aborted the processor's thread.
    #[test]
    fn an_unbounded_limit_allocates_as_it_fills() {
        let node = NodePool::new(usize::MAX);
        for capacity in [usize::MAX, 1 << 40, PREALLOCATED + 1] {
            let mut local = LocalPool::new(capacity);
            let fill = capacity.min(1000);
            for i in 0..fill {
                assert!(!local.put(i, &node), "capacity {capacity}");
            }
            assert_eq!(local.len(), fill);
        }
    }

    #[test]
    fn bounded_node_pool_drops_excess() {
        let node = NodePool::new(1);
        let mut local = LocalPool::new(2);
        for i in 0..3 {
            let _ = local.put(i, &node);
        }
        assert_eq!(node.len(), 1);
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
}
