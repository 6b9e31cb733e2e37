//! The runqueue of one processor: ready ULTs that have run before, best priority first.
//!
//! Entries are kept sorted by the key the policy gave them (ascending; the best is at the back), so
//! `pop_best` is O(1) and a thief takes from the front, where the lowest-affinity ULTs sit: what the
//! victim loses least by giving away (DESIGN §4 step 4). A push whose key is above the back key
//! (No Affinity's sequence numbers) or at or below the front key (its yield key, 0) is O(1); other
//! keys are placed by binary search, before entries of equal key, so equal keys leave in arrival
//! order.
//!
//! # Protocol
//!
//! The owner and thieves serialize on a test-and-test-and-set spin lock held for a handful of
//! instructions (no allocation, no user code under it). `len` is updated under the lock and read
//! without it by thieves and by the idle check, as a hint only.

use crate::atomics::{AtomicBool, AtomicUsize, Ordering};
use crate::tcb::TcbRef;
use crossbeam_utils::Backoff;
use std::cell::UnsafeCell;
use std::collections::VecDeque;

pub(crate) struct RunQueue {
    lock: AtomicBool,
    len: AtomicUsize,
    entries: UnsafeCell<VecDeque<(u64, TcbRef)>>,
}

// SAFETY: `entries` is only touched while `lock` is held (see `with`).
unsafe impl Sync for RunQueue {}

impl RunQueue {
    pub(crate) fn new() -> RunQueue {
        RunQueue {
            lock: AtomicBool::new(false),
            len: AtomicUsize::new(0),
            entries: UnsafeCell::new(VecDeque::with_capacity(64)),
        }
    }

    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut VecDeque<(u64, TcbRef)>) -> R) -> R {
        if self.lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
        // SAFETY: the lock is held, so no other thread touches `entries`.
        let entries = unsafe { &mut *self.entries.get() };
        let r = f(entries);
        self.len.store(entries.len(), Ordering::Relaxed);
        self.lock.store(false, Ordering::Release);
        r
    }

    #[cold]
    fn lock_contended(&self) {
        let backoff = Backoff::new();
        loop {
            while self.lock.load(Ordering::Relaxed) {
                backoff.snooze();
            }
            if self.lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return;
            }
        }
    }

    /// Number of entries (a hint when read by another thread).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Adds a ready ULT with the policy's key (higher runs sooner).
    #[inline]
    pub(crate) fn push(&self, key: u64, t: TcbRef) {
        self.with(|q| Self::insert(q, key, t));
    }

    #[inline]
    fn insert(q: &mut VecDeque<(u64, TcbRef)>, key: u64, t: TcbRef) {
        match (q.front(), q.back()) {
            (_, Some(&(back, _))) if key > back => q.push_back((key, t)),
            // At or below the lowest key: first out of the front, after the equal keys already
            // there (a yielded ULT under No Affinity, whose yield key is 0).
            (Some(&(front, _)), _) if key <= front => q.push_front((key, t)),
            (Some(_), Some(_)) => {
                let at = q.partition_point(|&(k, _)| k < key);
                q.insert(at, (key, t));
            }
            _ => q.push_back((key, t)),
        }
    }

    /// Adds `t` with `key`, then takes the ULT with the highest key (maybe `t`), under one
    /// acquisition of the lock.
    #[inline]
    pub(crate) fn push_pop_best(&self, key: u64, t: TcbRef) -> Option<TcbRef> {
        self.with(|q| {
            Self::insert(q, key, t);
            q.pop_back().map(|(_, t)| t)
        })
    }

    /// Takes the ULT with the highest key.
    #[inline]
    pub(crate) fn pop_best(&self) -> Option<TcbRef> {
        if self.len() == 0 {
            return None;
        }
        self.with(|q| q.pop_back().map(|(_, t)| t))
    }

    /// Takes up to `want(len)` entries of lowest key for a thief.
    pub(crate) fn steal(&self, want: impl FnOnce(usize) -> usize, into: &mut Vec<TcbRef>) {
        if self.len() == 0 {
            return;
        }
        self.with(|q| {
            let n = want(q.len()).min(q.len());
            into.extend(q.drain(..n).map(|(_, t)| t));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcb::Chunk;
    use std::sync::Arc;

    #[test]
    fn orders_by_key_and_thieves_take_the_lowest() {
        let shared = Arc::new(());
        let chunk = Chunk::allocate(&shared);
        let t: Vec<TcbRef> = chunk.tcbs().take(5).collect();
        let q = RunQueue::new();
        for (key, &tcb) in [3u64, 1, 4, 1, 5].iter().zip(&t) {
            // t[1] and t[3] share key 1: t[1] arrived first and leaves first.
            q.push(*key, tcb);
        }
        assert_eq!(q.len(), 5);
        assert_eq!(q.pop_best(), Some(t[4]));
        let mut stolen = Vec::new();
        q.steal(|n| n / 2, &mut stolen);
        assert_eq!(stolen, vec![t[3], t[1]]);
        assert_eq!(q.pop_best(), Some(t[2]));
        assert_eq!(q.pop_best(), Some(t[0]));
        assert_eq!(q.pop_best(), None);
    }
}
