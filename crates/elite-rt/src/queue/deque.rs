//! A processor's own start-queue: a fixed-capacity work-stealing deque (Chase and Lev's, on a ring
//! that never grows), the owner pushing and popping at the bottom (LIFO), thieves taking the oldest
//! entry at the top.
//!
//! # Protocol
//!
//! `top` and `bottom` are ever-growing indices (wrapping `usize`); slot `i & mask` holds entry `i`
//! for `top <= i < bottom`. Only the owner writes `bottom` and the slots; anyone advances `top`, and
//! only by a CAS, so every entry leaves through exactly one successful CAS on `top` or through the
//! owner's private pop below the top.
//!
//! ```text
//! push (owner):  b = bottom; full if b - top >= limit (reading `top` only when a cached reading
//!                says so); slot[b] = t; bottom = b + 1 (Release)
//! pop (owner):   b = bottom; t = top
//!                b - t == 0          -> empty
//!                b - t == 1          -> take entry t like a thief: CAS top t -> t + 1 (no fence)
//!                b - t >= 2          -> bottom = b - 1; fence(SeqCst); t = top
//!                                       t <  b - 1 -> entry b - 1 is ours (no thief can reach it)
//!                                       t == b - 1 -> the last one: CAS top t -> t + 1; bottom = b
//!                                       t >  b - 1 -> a thief took it: bottom = b; empty
//! steal (thief): t = top (Acquire); fence(SeqCst); b = bottom (Acquire); t >= b -> empty
//!                e = slot[t]; CAS top t -> t + 1: won -> e, lost -> retry
//! a deque made without thieves (the only processor's; `stealable` false):
//!   pop (owner): b = bottom; t = top; b - t == 0 -> empty; bottom = b - 1; entry b - 1
//!   steal:       empty, always
//! take_oldest (owner, a full deque spilling down a level):
//!                t = top; b = bottom; k = min(b - t, max); k == 0 -> none
//!                e[0..k] = slot[t..t + k]; CAS top t -> t + k: won -> e[0..k], lost -> retry
//! ```
//!
//! `take_oldest` is k steals in one: it claims entries `t..t + k` by the one CAS on `top` that
//! every thief's claim of entry `t` also needs, so either it wins and no thief gets any of them
//! (a thief's CAS from `t`, or from any later `top` it read before, fails), or a thief won and
//! the owner reads afresh. Only the owner calls it, so no pop runs meanwhile, and it takes no
//! more than `b - t` entries from a `bottom` only it writes.
//!
//! The classic pop's `fence(SeqCst)` orders the owner's claim of entry `b - 1` (the lowered bottom)
//! against a thief's read of `bottom`: either the thief sees the lowered bottom and does not take
//! `b - 1`, or the owner's read of `top` after the fence sees the thief's claim. The pop of a single
//! entry, the common case of a spawn joined at once, needs no fence: the owner claims it by the same
//! CAS on `top` a thief uses, and exactly one CAS wins. A thief may read a slot that the owner is
//! overwriting with a newer entry only when its `top` is stale, and then its CAS fails; the slots are
//! atomics so that such a read is not a data race. A push's `Release` store of `bottom` publishes
//! the entry (and everything the spawner wrote into the TCB) to the thief whose `Acquire` load sees
//! it; the pop's stores of `bottom` (lowering it, restoring it) are `Release` too, since a thief
//! may read those values instead and must still see the entries below them (with `Relaxed` there,
//! the loom model `loom_models::deque` loses an entry). The owner's own pop needs no ordering.
//!
//! A runtime of one processor has no thieves: its start-queue is made without them
//! (`Deque::new` with `stealable` false), and its pop claims nothing (only the owner moves `top` and `bottom`
//! there), saving the CAS that is most of a spawn-join's pop; a steal from it finds it empty, so
//! no caller can break that, as the `next` slot's `stealable` does for its take.
//!
//! Unlike `crossbeam_deque::Worker`: no fence on a pop of the last entry (the spawn-join case), no
//! buffer growth or epoch reclamation (the queue is bounded anyway).

use crate::atomics::{fence, AtomicPtr, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::ptr;

/// The most entries a processor's start-queue holds, whatever its configured limit (the ring is
/// allocated at its full capacity up front).
pub(crate) const MAX_CAPACITY: usize = 1 << 16;

/// What a [`Deque::steal`] found.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stolen<N> {
    Empty,
    /// Another thief (or the owner) won the race for the oldest entry: try again.
    Retry,
    Success(*mut N),
}

/// A bounded work-stealing deque of node pointers (never null).
pub(crate) struct Deque<N> {
    /// Advanced by thieves and by the owner's pop of a last entry.
    top: CachePadded<AtomicUsize>,
    /// Written by the owner only.
    bottom: CachePadded<AtomicUsize>,
    /// The owner's last reading of `top` (which only grows), so that a push reads the thieves'
    /// line only when the deque looks full.
    top_seen: Cell<usize>,
    mask: usize,
    slots: Box<[AtomicPtr<N>]>,
    /// Whether a thief may come at all (fixed when the deque is made): without, the owner's pop
    /// claims nothing and a steal finds nothing.
    stealable: bool,
}

// SAFETY: the deque holds addresses only; what may be done with the nodes is the caller's protocol
// (a TCB moves to whoever takes it).
unsafe impl<N> Send for Deque<N> {}
// SAFETY: as above; all shared state is atomic, and `top_seen` is touched by the owner only (in
// `push_within`, which only the owner calls).
unsafe impl<N> Sync for Deque<N> {}

impl<N> Deque<N> {
    /// A deque holding up to `limit` entries (at most [`MAX_CAPACITY`]; see [`Deque::capacity`]),
    /// with thieves or without (`stealable` false: a steal finds it empty, and the owner's pop
    /// claims nothing; the start-queue of a runtime's only processor).
    pub(crate) fn new(limit: usize, stealable: bool) -> Deque<N> {
        let cap = limit.clamp(1, MAX_CAPACITY).next_power_of_two();
        Deque {
            top: CachePadded::new(AtomicUsize::new(0)),
            bottom: CachePadded::new(AtomicUsize::new(0)),
            top_seen: Cell::new(0),
            mask: cap - 1,
            slots: (0..cap).map(|_| AtomicPtr::new(ptr::null_mut())).collect(),
            stealable,
        }
    }

    /// How many entries fit.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Number of entries (exact for the owner but for concurrent steals; a hint for others).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        let b = self.bottom.load(Ordering::Relaxed);
        let t = self.top.load(Ordering::Relaxed);
        let n = b.wrapping_sub(t) as isize;
        n.max(0) as usize
    }

    /// True if no entry is visible (a hint for anyone but the owner).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pushes `n` at the bottom; gives it back when the deque is full. Only the owner calls this.
    #[inline]
    pub(crate) fn push(&self, n: *mut N) -> Result<(), *mut N> {
        self.push_within(n, self.capacity())
    }

    /// Pushes `n` at the bottom unless `limit` (at most the capacity) entries are there already;
    /// gives it back then. Only the owner calls this.
    #[inline]
    pub(crate) fn push_within(&self, n: *mut N, limit: usize) -> Result<(), *mut N> {
        let b = self.bottom.load(Ordering::Relaxed);
        if b.wrapping_sub(self.top_seen.get()) as isize >= limit as isize {
            // Looks full by the last reading: read `top` afresh (thieves may have taken some).
            let t = self.top.load(Ordering::Relaxed);
            self.top_seen.set(t);
            if b.wrapping_sub(t) as isize >= limit as isize {
                return Err(n);
            }
        }
        self.slots[b & self.mask].store(n, Ordering::Relaxed);
        self.bottom.store(b.wrapping_add(1), Ordering::Release);
        Ok(())
    }

    /// Takes the newest entry. Only the owner calls this.
    #[inline]
    pub(crate) fn pop(&self) -> Option<*mut N> {
        let b = self.bottom.load(Ordering::Relaxed);
        let t = self.top.load(Ordering::Relaxed);
        let len = b.wrapping_sub(t) as isize;
        if len <= 0 {
            return None;
        }
        if !self.stealable {
            // (No thief: the entry below `bottom` is the owner's. Release, as every store of
            // `bottom`; a plain store on x86-64.)
            let b1 = b.wrapping_sub(1);
            self.bottom.store(b1, Ordering::Release);
            return Some(self.slots[b1 & self.mask].load(Ordering::Relaxed));
        }
        if len == 1 {
            // The last entry: claim it as a thief would.
            let n = self.slots[t & self.mask].load(Ordering::Relaxed);
            return self
                .top
                .compare_exchange(t, t.wrapping_add(1), Ordering::SeqCst, Ordering::Relaxed)
                .ok()
                .map(|_| n);
        }
        self.pop_contended(b)
    }

    #[inline]
    fn pop_contended(&self, b: usize) -> Option<*mut N> {
        let b1 = b.wrapping_sub(1);
        // Release, as every store of `bottom`: a thief that reads this value (or the restored one
        // below) must see the entries pushed before it (a plain store on x86-64).
        self.bottom.store(b1, Ordering::Release);
        fence(Ordering::SeqCst);
        let t = self.top.load(Ordering::Relaxed);
        let left = b1.wrapping_sub(t) as isize;
        if left > 0 {
            return Some(self.slots[b1 & self.mask].load(Ordering::Relaxed));
        }
        let won = left == 0
            && self.top.compare_exchange(t, t.wrapping_add(1), Ordering::SeqCst, Ordering::Relaxed).is_ok();
        self.bottom.store(b, Ordering::Release);
        won.then(|| self.slots[b1 & self.mask].load(Ordering::Relaxed))
    }

    /// The newest entry, the one the owner's next pop would take, without taking it: a hint for a
    /// prefetch only (a thief may take it at any moment; the caller must not dereference it).
    /// Only the owner calls this: it alone writes `bottom` and the slots, so the slot below
    /// `bottom` holds the newest entry, unless thieves took it meanwhile (then a stale address).
    #[inline]
    pub(crate) fn peek_newest(&self) -> Option<*mut N> {
        let b = self.bottom.load(Ordering::Relaxed);
        let t = self.top.load(Ordering::Relaxed);
        if b.wrapping_sub(t) as isize <= 0 {
            return None;
        }
        Some(self.slots[b.wrapping_sub(1) & self.mask].load(Ordering::Relaxed))
    }

    /// Takes up to `into.len()` of the oldest entries (oldest first) in one claim, racing thieves;
    /// returns how many. Only the owner calls this.
    pub(crate) fn take_oldest(&self, into: &mut [*mut N]) -> usize {
        loop {
            let t = self.top.load(Ordering::Relaxed);
            let b = self.bottom.load(Ordering::Relaxed);
            let len = b.wrapping_sub(t) as isize;
            if len <= 0 {
                return 0;
            }
            let k = (len as usize).min(into.len());
            for (i, e) in into[..k].iter_mut().enumerate() {
                *e = self.slots[t.wrapping_add(i) & self.mask].load(Ordering::Relaxed);
            }
            let t2 = t.wrapping_add(k);
            if self.top.compare_exchange(t, t2, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
                self.top_seen.set(t2);
                return k;
            }
            // A thief took the oldest meanwhile: read again.
        }
    }

    /// Takes the oldest entry. Any thread may call this.
    #[inline]
    pub(crate) fn steal(&self) -> Stolen<N> {
        if !self.stealable {
            return Stolen::Empty; // (made without thieves: its entries are the owner's)
        }
        let t = self.top.load(Ordering::Acquire);
        fence(Ordering::SeqCst);
        let b = self.bottom.load(Ordering::Acquire);
        if b.wrapping_sub(t) as isize <= 0 {
            return Stolen::Empty;
        }
        let n = self.slots[t & self.mask].load(Ordering::Relaxed);
        match self.top.compare_exchange(t, t.wrapping_add(1), Ordering::SeqCst, Ordering::Relaxed) {
            Ok(_) => Stolen::Success(n),
            Err(_) => Stolen::Retry,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn p(i: usize) -> *mut u8 {
        i as *mut u8
    }

    /// The measurement that keeps this deque instead of `crossbeam_deque` (docs/architecture.md,
    /// "The start-queue deque"): the owner's two patterns, interleaved round by round with
    /// crossbeam's `Worker`/`Stealer`, medians of 9 rounds, on one thread (no thief runs, as in
    /// the common case). Timing, so ignored by default; run it optimized:
    /// `cargo test -p elite-rt --profile loom --lib own_deque_against -- --ignored --nocapture`.
    ///
    /// - `push+pop`: a spawn joined at once: push one entry, pop it (the pop of a last entry).
    /// - `spill`: a full deque spilling its oldest half down a level: push 256, move the oldest
    ///   128 out (`take_oldest` into a buffer; crossbeam: `steal_batch_with_limit` into another
    ///   `Worker`, its only way to move several entries at once), pop the other 128.
    #[test]
    #[ignore = "a timing measurement: run it by hand (see its doc comment)"]
    fn own_deque_against_crossbeam_deque() {
        use std::hint::black_box;
        use std::time::Instant;
        const PUSH_POPS: usize = 2_000_000;
        const SPILLS: usize = 20_000;
        let own: Deque<u8> = Deque::new(256, true);
        let mut buffer = vec![ptr::null_mut::<u8>(); 128];
        let worker = crossbeam_deque::Worker::<usize>::new_lifo();
        let stealer = worker.stealer();
        let spill_target = crossbeam_deque::Worker::<usize>::new_lifo();
        let time = |f: &mut dyn FnMut()| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e9
        };
        let mut samples: [Vec<f64>; 4] = Default::default();
        for _ in 0..9 {
            samples[0].push(
                time(&mut || {
                    for i in 1..=PUSH_POPS {
                        own.push(p(i)).expect("room");
                        black_box(own.pop());
                    }
                }) / PUSH_POPS as f64,
            );
            samples[1].push(
                time(&mut || {
                    for i in 1..=PUSH_POPS {
                        worker.push(i);
                        black_box(worker.pop());
                    }
                }) / PUSH_POPS as f64,
            );
            samples[2].push(
                time(&mut || {
                    for _ in 0..SPILLS {
                        for i in 1..=256 {
                            own.push(p(i)).expect("room");
                        }
                        assert_eq!(own.take_oldest(&mut buffer), 128);
                        black_box(&buffer);
                        while black_box(own.pop()).is_some() {}
                    }
                }) / SPILLS as f64,
            );
            samples[3].push(
                time(&mut || {
                    for _ in 0..SPILLS {
                        for i in 1..=256 {
                            worker.push(i);
                        }
                        let _ = black_box(stealer.steal_batch_with_limit(&spill_target, 128));
                        while black_box(worker.pop()).is_some() {}
                        while black_box(spill_target.pop()).is_some() {}
                    }
                }) / SPILLS as f64,
            );
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let m: Vec<f64> = samples.iter_mut().map(median).collect();
        println!("push+pop, ns per pair: own {:.2}, crossbeam-deque {:.2} ({:.2}x)", m[0], m[1], m[1] / m[0]);
        println!(
            "spill of 256, ns per cycle: own {:.0}, crossbeam-deque {:.0} ({:.2}x)",
            m[2],
            m[3],
            m[3] / m[2]
        );
    }

    #[test]
    fn lifo_for_the_owner_fifo_for_thieves_and_bounded() {
        let d: Deque<u8> = Deque::new(3, true);
        assert_eq!(d.capacity(), 4);
        for i in 1..=4 {
            assert!(d.push(p(i)).is_ok());
        }
        assert_eq!(d.push(p(5)), Err(p(5)));
        assert_eq!(d.steal(), Stolen::Success(p(1)));
        assert_eq!(d.peek_newest(), Some(p(4)));
        assert_eq!(d.pop(), Some(p(4)));
        assert_eq!(d.len(), 2);
        assert_eq!(d.pop(), Some(p(3)));
        assert_eq!(d.pop(), Some(p(2)));
        assert_eq!(d.pop(), None);
        assert_eq!(d.peek_newest(), None);
        assert_eq!(d.steal(), Stolen::Empty);
        assert!(d.is_empty());
    }

    /// The pop of a deque made without thieves: the same entries as a deque with them, newest
    /// first, with pushes and `take_oldest` mixed in, around the ring more than once.
    #[test]
    fn a_deque_without_thieves_pops_what_one_with_them_would() {
        let d: Deque<u8> = Deque::new(4, false);
        let pop = || d.pop();
        for round in 0..3 {
            assert_eq!(pop(), None);
            assert!(d.push(p(1)).is_ok());
            assert_eq!(pop(), Some(p(1)), "round {round}");
            for i in 2..=5 {
                assert!(d.push(p(i)).is_ok());
            }
            assert_eq!(d.push(p(6)), Err(p(6)));
            assert_eq!(pop(), Some(p(5)));
            let mut buf = [ptr::null_mut(); 1];
            assert_eq!(d.take_oldest(&mut buf), 1);
            assert_eq!(buf[0], p(2));
            assert!(d.push(p(7)).is_ok());
            assert_eq!(d.pop(), Some(p(7)));
            assert_eq!(pop(), Some(p(4)));
            assert_eq!(d.len(), 1);
            assert_eq!(pop(), Some(p(3)));
            assert!(d.is_empty());
        }
    }

    #[test]
    fn take_oldest_takes_from_the_thieves_end() {
        let d: Deque<u8> = Deque::new(8, true);
        for i in 1..=6 {
            assert!(d.push(p(i)).is_ok());
        }
        assert_eq!(d.steal(), Stolen::Success(p(1)));
        let mut buf = [ptr::null_mut(); 3];
        assert_eq!(d.take_oldest(&mut buf), 3);
        assert_eq!(buf, [p(2), p(3), p(4)]);
        assert_eq!(d.pop(), Some(p(6)));
        assert_eq!(d.take_oldest(&mut buf), 1);
        assert_eq!(buf[0], p(5));
        assert_eq!(d.take_oldest(&mut buf), 0);
        assert_eq!(d.steal(), Stolen::Empty);
    }

    #[test]
    fn a_stolen_and_popped_stream_loses_and_duplicates_nothing() {
        use std::sync::atomic::AtomicBool;
        let d: std::sync::Arc<Deque<u8>> = std::sync::Arc::new(Deque::new(64, true));
        let done = std::sync::Arc::new(AtomicBool::new(false));
        // Miri runs every interleaving it picks slowly: a shorter stream still wraps the ring.
        const N: usize = if cfg!(miri) { 500 } else { 200_000 };
        let thief = {
            let (d, done) = (d.clone(), done.clone());
            std::thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    match d.steal() {
                        Stolen::Success(n) => got.push(n as usize),
                        Stolen::Retry => {}
                        Stolen::Empty if done.load(Ordering::Acquire) => break,
                        Stolen::Empty => std::hint::spin_loop(),
                    }
                }
                got
            })
        };
        let mut mine = Vec::new();
        for i in 1..=N {
            while d.push(p(i)).is_err() {
                mine.extend(d.pop().map(|n| n as usize));
            }
            if i % 3 == 0 {
                mine.extend(d.pop().map(|n| n as usize));
            }
        }
        while let Some(n) = d.pop() {
            mine.push(n as usize);
        }
        done.store(true, Ordering::Release);
        let mut all = thief.join().unwrap();
        all.extend(mine);
        all.sort_unstable();
        assert_eq!(all, (1..=N).collect::<Vec<_>>());
    }
}
