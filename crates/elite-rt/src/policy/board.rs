//! The switch board of a live policy change ([`Runtime::set_policy`](crate::Runtime::set_policy)):
//! the value every thread reads now, and a generation number that tells a processor its copy is
//! out of date.
//!
//! # Protocol
//!
//! * A setter (one at a time: under `kept`'s lock) finds or boxes the new value in `kept`, stores
//!   its address in `current` (Release), then adds one to `generation` (Release), still under
//!   the lock, so that generations and values go up together.
//! * A reader on any thread (a waker asking where a ULT goes, a thief asking how many to take, a
//!   spawner) loads `current` (Acquire) and reads the value it points to: the old one or the
//!   new one, each whole (its fields were written before the Release store that published it).
//!   Either answer is one the runtime copes with during a switch: it only decides where a ULT
//!   goes or how many a thief takes.
//! * A processor keeps its own copy of what the value implies (its runqueue's keys) and the
//!   generation it copied at. At a safe point of its loop it loads `generation` (Acquire); when
//!   it differs from its own, it loads `current` (Acquire), which is at least as new as the
//!   value published before that generation (the setter stored `current` first), rebuilds its
//!   copy, and re-keys its runqueue under the runqueue's lock. A setter racing with this leaves
//!   a newer generation behind, and the next safe point rebuilds again: the processors converge
//!   on the last value set.
//! * Values are never freed while the board lives: a reader may hold a reference to an old one
//!   for as long as it likes, and the setter reuses a kept value that `same` finds equal, so a
//!   selector that switches among a few values keeps only those.
//!
//! `loom_models::board` checks it: a setter against a processor that re-keys its queue and a
//! reader on a third thread; every entry is keyed once by the last value after the final safe
//! point, none lost, and every value read is read whole.

use crate::atomics::{AtomicPtr, AtomicU64, Ordering};
#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use std::sync::Mutex;

/// The value in force and its generation; see the module docs.
pub(crate) struct Board<T> {
    current: AtomicPtr<T>,
    generation: AtomicU64,
    /// Every value ever set, each moved out of its box (`Box::into_raw`) so that its address
    /// holds and nothing but `Drop` ever borrows it uniquely again (a moved or `&mut`-borrowed
    /// box would invalidate the shared references readers hold); freed when the board drops.
    kept: Mutex<Vec<*mut T>>,
}

// SAFETY: the board hands out shared references to its values to any thread (`current`), and
// moves them in from the setter's thread: `T` must be `Send + Sync`, and nothing else is shared
// (the raw pointers of `kept` are the board's own boxes).
unsafe impl<T: Send + Sync> Sync for Board<T> {}
// SAFETY: as above; the boxes move with the board.
unsafe impl<T: Send + Sync> Send for Board<T> {}

impl<T> Board<T> {
    /// A board holding `first`, at generation 0.
    pub(crate) fn new(first: T) -> Board<T> {
        let at = Box::into_raw(Box::new(first));
        Board { current: AtomicPtr::new(at), generation: AtomicU64::new(0), kept: Mutex::new(vec![at]) }
    }

    /// The value in force.
    #[inline]
    pub(crate) fn current(&self) -> &T {
        // SAFETY: `current` always points into a box of `kept`, which never drops one while the
        // board lives (`set` only pushes), and the Acquire load pairs with the Release store
        // that published it, after its fields were written.
        unsafe { &*self.current.load(Ordering::Acquire) }
    }

    /// The generation: how many values were set after the first.
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Puts `value` in force (or the kept value `same` finds equal to it) and returns the new
    /// generation. `prepare` runs on `value`, in its box, under the lock, before it is first
    /// published; not on a kept value, which readers may be reading.
    pub(crate) fn set(&self, value: T, same: impl Fn(&T, &T) -> bool, prepare: impl FnOnce(&T)) -> u64 {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: every pointer of `kept` is a live box of this board (freed only by `Drop`), and
        // only shared references to its value are ever made.
        let found = kept.iter().copied().find(|&k| same(unsafe { &*k }, &value));
        let at = match found {
            Some(k) => k,
            None => {
                let k = Box::into_raw(Box::new(value));
                // SAFETY: just boxed, not published yet: nobody else sees it.
                prepare(unsafe { &*k });
                kept.push(k);
                k
            }
        };
        self.current.store(at, Ordering::Release);
        self.generation.fetch_add(1, Ordering::Release) + 1
    }

    /// How many values are kept.
    #[cfg(test)]
    pub(crate) fn kept_len(&self) -> usize {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// When the generation moved past `*seen`: the value in force now, `*seen` brought up to
    /// date (the processor's side of the protocol).
    #[inline]
    pub(crate) fn changed(&self, seen: &mut u64) -> Option<&T> {
        let generation = self.generation();
        if generation == *seen {
            return None;
        }
        *seen = generation;
        Some(self.current())
    }
}

impl<T> Drop for Board<T> {
    fn drop(&mut self) {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        for &k in kept.iter() {
            // SAFETY: each was made by `Box::into_raw` in `new` or `set` and is freed only here;
            // `&mut self`: no reference into the board is left.
            drop(unsafe { Box::from_raw(k) });
        }
    }
}
