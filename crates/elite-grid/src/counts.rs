//! The two counting protocols of the dataflow solver (`crate::active`), apart so that loom can
//! check them (`RUSTFLAGS="--cfg loom" cargo test -p elite-grid --lib --profile loom
//! --target-dir target/loom loom_models`).
//!
//! * **Signals** ([`signal`]): a patch's count of signals still missing before its next sweep.
//!   Each neighbour that finishes a sweep the patch reads decrements it; the decrement that takes
//!   it to zero returns `true`, and its caller wakes the patch (releases its semaphore). The
//!   patch sets the count back to its number of neighbours when its sweep starts: every signal
//!   for the following sweep comes after the patch's own signals of this one (a neighbour's next
//!   sweep needs them), so no signal is lost or counted for the wrong sweep. Decrements are
//!   `AcqRel`: the waker's decrement reads every earlier one (they form a release sequence), so
//!   the values every signaller stored before signalling happen before the patch's sweep.
//! * **Sweep counts** ([`Counts`]): per open sweep, how many members (patches of a group, or
//!   groups) finished it and their largest change. The member whose increment completes the
//!   count gets the largest change and resets the slot for the sweep `N` later, which no member
//!   starts before this sweep's completion is published (the solver's gate keeps at most `N - 1`
//!   sweeps open).

#[cfg(loom)]
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// One signal to the owner of `missing`: `true` when it was the last one missing, and the caller
/// must wake the owner.
#[inline]
pub(crate) fn signal(missing: &AtomicU32) -> bool {
    missing.fetch_sub(1, Ordering::AcqRel) == 1
}

/// How many members finished a sweep, and the largest change among them.
struct SweepCount {
    done: AtomicU32,
    /// The largest change, as the bits of a non-negative `f64` (ordered like the numbers).
    drift: AtomicU64,
}

/// The counts of one group of members, one slot per open sweep (`N` slots, sweep `k` in slot
/// `k % N`).
#[repr(align(64))]
pub(crate) struct Counts<const N: usize>([SweepCount; N]);

impl<const N: usize> Counts<N> {
    pub(crate) fn new() -> Self {
        Counts(std::array::from_fn(|_| SweepCount { done: AtomicU32::new(0), drift: AtomicU64::new(0) }))
    }

    /// Adds one member's `drift` (the bits of a non-negative `f64`) to sweep `k`'s count; when it
    /// makes `members`, resets the slot and returns the members' largest change.
    pub(crate) fn finish(&self, k: u64, drift: u64, members: usize) -> Option<u64> {
        let slot = &self.0[(k % N as u64) as usize];
        slot.drift.fetch_max(drift, Ordering::AcqRel);
        if slot.done.fetch_add(1, Ordering::AcqRel) as usize + 1 != members {
            return None;
        }
        // Every member added its change before its increment, which ours read after.
        let largest = slot.drift.swap(0, Ordering::AcqRel);
        slot.done.store(0, Ordering::Release);
        Some(largest)
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Waits for a permit (the model's semaphore).
    fn acquire(permits: &AtomicU32) {
        loop {
            let n = permits.load(Ordering::Acquire);
            if n > 0 && permits.compare_exchange(n, n - 1, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return;
            }
            thread::yield_now();
        }
    }

    /// Two neighbouring patches, `a` (colour 0) and `b` (colour 1), three sweeps each: `a`'s
    /// sweep `k` reads `b`'s sweep `k - 1`, `b`'s sweep `k` reads `a`'s sweep `k`. Every read
    /// sees exactly that value, whatever the interleaving: no signal is lost or early.
    #[test]
    fn signals_order_the_sweeps() {
        loom::model(|| {
            const SWEEPS: u64 = 3;
            // Per patch: its value, its missing count, its permits.
            let value = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
            // `a` has no lower neighbour (started by the root: one permit); `b` waits for `a`.
            let missing = Arc::new([AtomicU32::new(0), AtomicU32::new(1)]);
            let permits = Arc::new([AtomicU32::new(1), AtomicU32::new(0)]);
            let patch = |me: usize| {
                let (value, missing, permits) = (value.clone(), missing.clone(), permits.clone());
                move || {
                    let other = 1 - me;
                    for k in 1..=SWEEPS {
                        acquire(&permits[me]);
                        missing[me].store(1, Ordering::Relaxed);
                        let read = value[other].load(Ordering::Relaxed);
                        // a_k = b_(k-1) + 1, b_k = a_k + 1: a_k = 2k - 1, b_k = 2k.
                        let expected = if me == 0 { 2 * (k - 1) } else { 2 * k - 1 };
                        assert_eq!(read, expected, "patch {me}, sweep {k}");
                        value[me].store(read + 1, Ordering::Relaxed);
                        if signal(&missing[other]) {
                            permits[other].fetch_add(1, Ordering::Release);
                        }
                    }
                }
            };
            let b = thread::spawn(patch(1));
            patch(0)();
            b.join().unwrap();
            assert_eq!(value[1].load(Ordering::Relaxed), 2 * SWEEPS);
        });
    }

    /// Two members, three slots (two sweeps open at once, as the solver's gate allows with a lag
    /// of 2), four sweeps, the last one behind the closing gate (a lag of 1, `active`'s
    /// "Closing"): every sweep is completed by exactly one member, who gets the larger change, and
    /// a slot's reuse never mixes two sweeps; each publisher reads the previous sweep's largest
    /// change, stored relaxed before the previous publication (the solver's `last_largest`).
    #[test]
    fn each_sweep_is_completed_once_with_the_largest_change() {
        loom::model(|| {
            const SWEEPS: u64 = 4;
            const LAG: u64 = 2;
            let counts = Arc::new(Counts::<3>::new());
            // The newest sweep whose completion is published, and how many completions each
            // sweep got (published in order, as the solver does).
            let complete = Arc::new(AtomicU64::new(0));
            let last = Arc::new(AtomicU64::new(0));
            let member = |me: u64| {
                let (counts, complete, last) = (counts.clone(), complete.clone(), last.clone());
                move || {
                    for k in 1..=SWEEPS {
                        // The gate: sweep k runs once sweep k - LAG is complete; the closed
                        // solve's last sweep once sweep k - 1 is.
                        let lag = if k == SWEEPS { 1 } else { LAG };
                        while complete.load(Ordering::Acquire) + lag < k {
                            thread::yield_now();
                        }
                        if let Some(largest) = counts.finish(k, 10 * k + me, 2) {
                            assert_eq!(largest, 10 * k + 1, "sweep {k}");
                            while complete.load(Ordering::Acquire) + 1 < k {
                                thread::yield_now();
                            }
                            let previous = if k == 1 { 0 } else { 10 * (k - 1) + 1 };
                            assert_eq!(last.load(Ordering::Relaxed), previous, "sweep {k}");
                            last.store(largest, Ordering::Relaxed);
                            assert_eq!(
                                complete.swap(k, Ordering::AcqRel),
                                k - 1,
                                "sweep {k} published twice"
                            );
                        }
                    }
                }
            };
            let other = thread::spawn(member(1));
            member(0)();
            other.join().unwrap();
            assert_eq!(complete.load(Ordering::Relaxed), SWEEPS);
        });
    }
}
