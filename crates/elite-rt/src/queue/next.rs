//! The `next` slot of a processor: the one ready ULT that runs before the runqueue (Go's
//! `runnext`), where a ULT goes when it becomes ready while nothing else here is: a joiner woken
//! by its child's exit, the other end of a hand-off.
//!
//! The owner fills and empties it on every hand-off, so its path has no atomic read-modify-write
//! and no fence. A thief may still take the slot's ULT, but only rarely: when the owner has been
//! running one ULT for a while with a ready ULT waiting in the slot while another processor idles
//! (a *stranded* ULT; see `Processor::rescue_stranded`). Without the thief's side a ready ULT would
//! wait for the running one to switch, however long that takes, beside an idle processor.
//!
//! # The protocol (an asymmetric Dekker, as `sync::bias`)
//!
//! `claim` is a generation count: even while no thief is at the slot, odd while one is. The owner
//! announces nothing before its take: its store of null to the slot is the announcement, and the
//! generation it read before its load tells it whether a thief came between.
//!
//! ```text
//! owner, put t      (the slot is empty)        ult = t (Release)
//! owner, take       g0 = claim (Acquire)
//!                   if g0 odd: t = swap(ult, null) (AcqRel)           (a thief is at it)
//!                   t = ult; if t == null: none
//!                   ult = null; light barrier                         (plain load and store)
//!                   if claim (Acquire) == g0: t                       (no thief came)
//!                   else: wait until claim is even (Acquire);
//!                         t, unless stolen == t and stolen_by > g0 (then none)
//! thief, steal      g = claim; if g odd: give up; claim: g -> g + 1 (CAS; lost: give up)
//!                   heavy barrier; t = swap(ult, null) (AcqRel)
//!                   if t != null: stolen = t, stolen_by = g + 1
//!                   claim = g + 2 (Release)
//! ```
//!
//! The light barrier is a compiler fence and the heavy one `membarrier(2)`, a full barrier on every
//! CPU running a thread of the process: the pair acts as two `SeqCst` fences (and the loom model
//! `loom_models::next` models them so). Against a thief whose claim the owner's second read of
//! `claim` does not see, the owner's store of null comes before that thief's swap, which then
//! finds null (or a ULT the owner put after): the owner's plain take is the only one. A thief
//! whose claim it does see (the generation moved since `g0`) may have swapped the slot's ULT out
//! between the owner's load and store: the owner waits until that thief is done and reads what
//! it took. Only thieves that claimed after `g0` can have raced with the plain take, and of those
//! only one can have found the ULT (the owner puts nothing while it waits), so `stolen_by > g0`
//! with `stolen == t` says the thief has it; a thief whose claim the second read did not see
//! finds null and records nothing. `g0` is read with Acquire before the load of the slot: a
//! thief done before it (an even `g0` that follows its claim) is seen with its swap, so the
//! plain load does not find the ULT that thief took (a `g0` read after the load could be that
//! thief's release, equal to the second read, and the loom model found the double take). Only
//! the owner puts, and only into an empty slot; a thief only empties it, so a put never races
//! with anything. The Release of the put and the Acquire of the thief's swap carry what the
//! waker wrote to the ULT before making it ready (as the wake-up stack's push and drain do).
//!
//! Without `membarrier` (another OS, an old kernel), and in a runtime of one processor, nothing is
//! ever stolen from the slot ([`NextSlot::steal`] gives up), and the owner's take is a plain load
//! and store.

use crate::atomics::{AtomicPtr, AtomicUsize, Ordering};
use crate::sync::bias::{heavy_barrier, heavy_barrier_available, light_barrier, wait_a_little};
use std::ptr;

/// A processor's `next` slot (see the module docs).
pub(crate) struct NextSlot<T> {
    ult: AtomicPtr<T>,
    /// Whether a thief may come at all: the runtime has another processor and the machine a
    /// heavy barrier. Fixed when the slot is made; without it the owner's take is a load and a
    /// store.
    stealable: bool,
    /// The thieves' generation: odd while a thief is at the slot.
    claim: AtomicUsize,
    /// The last ULT a thief took, and that thief's (odd) generation: how an owner whose take
    /// raced with a thief learns which of the two has the ULT.
    stolen: AtomicPtr<T>,
    stolen_by: AtomicUsize,
}

impl<T> NextSlot<T> {
    /// A slot that a thief may take from when `stealable` (see [`NextSlot::steal`]).
    pub(crate) fn new(stealable: bool) -> NextSlot<T> {
        NextSlot {
            ult: AtomicPtr::new(ptr::null_mut()),
            stealable: stealable && heavy_barrier_available(),
            claim: AtomicUsize::new(0),
            stolen: AtomicPtr::new(ptr::null_mut()),
            stolen_by: AtomicUsize::new(0),
        }
    }

    /// Whether the slot is empty. Exact for the owner but for a thief emptying it meanwhile; a
    /// hint for anyone else.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.ult.load(Ordering::Relaxed).is_null()
    }

    /// The slot's ULT, left in place (null: none). The owner's look before a take; for others a
    /// hint.
    #[inline]
    pub(crate) fn peek(&self) -> *mut T {
        self.ult.load(Ordering::Relaxed)
    }

    /// Puts `t` in the slot. Only the owner calls this, and only when the slot is empty.
    #[inline]
    pub(crate) fn put(&self, t: *mut T) {
        debug_assert!(self.is_empty(), "a put into a full next slot");
        self.set(t, Ordering::Release);
    }

    /// The owner's store to the slot. Under loom a swap whose result is dropped: loom lets a
    /// read-modify-write read an older store than the latest one in the location's modification
    /// order when that latest is a plain store of another thread (its swap here could read the
    /// owner's store of null before a put that follows it, an execution no hardware allows),
    /// which an all-RMW history avoids; the owner's load and this store stay two steps, so the
    /// model still checks a thief that comes between them.
    #[inline(always)]
    fn set(&self, t: *mut T, order: Ordering) {
        #[cfg(not(loom))]
        self.ult.store(t, order);
        #[cfg(loom)]
        let _ =
            self.ult.swap(t, if order == Ordering::Relaxed { Ordering::Relaxed } else { Ordering::AcqRel });
    }

    /// Takes the slot's ULT, if any. Only the owner calls this.
    #[inline]
    pub(crate) fn take(&self) -> *mut T {
        if !self.stealable {
            let t = self.ult.load(Ordering::Relaxed);
            if !t.is_null() {
                self.set(ptr::null_mut(), Ordering::Relaxed); // (no thief: the owner's alone)
            }
            return t;
        }
        // The thieves' generation before the load (Acquire: a thief done by now is seen with
        // its swap).
        let before = self.claim.load(Ordering::Acquire);
        if before & 1 == 1 {
            return self.take_claimed();
        }
        let t = self.ult.load(Ordering::Relaxed);
        if t.is_null() {
            return t;
        }
        // The store is the announcement: a thief whose claim the look below misses finds null.
        self.set(ptr::null_mut(), Ordering::Relaxed);
        light_barrier();
        if self.claim.load(Ordering::Acquire) == before {
            return t;
        }
        self.take_raced(t, before)
    }

    /// [`take`](Self::take) while a thief is at the slot: as the thief takes.
    #[cold]
    #[inline(never)]
    fn take_claimed(&self) -> *mut T {
        self.ult.swap(ptr::null_mut(), Ordering::AcqRel)
    }

    /// [`take`](Self::take) of `t` by the plain load and store when a thief claimed the slot
    /// since generation `before`: `t`, unless that thief swapped it out first (module docs).
    #[cold]
    #[inline(never)]
    fn take_raced(&self, t: *mut T, before: usize) -> *mut T {
        let mut spins = 0;
        while self.claim.load(Ordering::Acquire) & 1 == 1 {
            wait_a_little(&mut spins);
        }
        let by = self.stolen_by.load(Ordering::Relaxed);
        if by > before && self.stolen.load(Ordering::Relaxed) == t {
            return ptr::null_mut(); // the thief has it
        }
        t
    }

    /// Takes the slot's ULT from another processor (null: none, another thief is at it, or this
    /// machine has no heavy barrier). Costs a process-wide barrier: for a ULT stranded in the
    /// slot, not for work-stealing at large.
    #[cold]
    pub(crate) fn steal(&self) -> *mut T {
        if self.is_empty() || !self.stealable {
            return ptr::null_mut();
        }
        let generation = self.claim.load(Ordering::Relaxed);
        if generation & 1 == 1
            || self
                .claim
                .compare_exchange(generation, generation + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return ptr::null_mut();
        }
        heavy_barrier();
        let t = self.ult.swap(ptr::null_mut(), Ordering::AcqRel);
        if !t.is_null() {
            // For an owner whose plain take raced with this swap (read after the release below).
            self.stolen.store(t, Ordering::Relaxed);
            self.stolen_by.store(generation + 1, Ordering::Relaxed);
        }
        self.claim.store(generation + 2, Ordering::Release);
        t
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::NextSlot;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    #[test]
    fn the_owner_puts_and_takes_one_at_a_time() {
        let slot = NextSlot::<u32>::new(true);
        let mut x = 1u32;
        assert!(slot.is_empty() && slot.take().is_null());
        slot.put(&mut x);
        assert_eq!(slot.peek(), &mut x as *mut u32);
        assert_eq!(slot.take(), &mut x as *mut u32);
        assert!(slot.is_empty() && slot.take().is_null());
    }

    /// An owner putting and taking against a thief: every value leaves the slot exactly once.
    /// The owner goes on until the thief has taken some (or its values run out), so that the test
    /// checks the race it is about.
    #[test]
    #[cfg_attr(miri, ignore = "membarrier: Miri runs no system calls of that kind")]
    fn a_thief_and_the_owner_take_every_value_once() {
        crate::sync::bias::prepare();
        if !crate::sync::bias::heavy_barrier_available() {
            return; // nothing is ever stolen without the barrier
        }
        const N: usize = 1 << 20;
        const ENOUGH: usize = 64;
        let values: Arc<Vec<AtomicUsize>> = Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
        let slot = Arc::new(NextSlot::<AtomicUsize>::new(true));
        let stolen = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let start = Arc::new(Barrier::new(2));
        let thief = {
            let (slot, stolen, done, start) = (slot.clone(), stolen.clone(), done.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                while !done.load(Ordering::Acquire) {
                    let t = slot.steal();
                    if !t.is_null() {
                        // SAFETY: the pointers are into `values`, alive for the test.
                        unsafe { (*t).fetch_add(1, Ordering::Relaxed) };
                        stolen.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        start.wait();
        let (mut taken, mut put) = (0, 0);
        let mut take = |slot: &NextSlot<AtomicUsize>| {
            let t = slot.take();
            if !t.is_null() {
                // SAFETY: the pointers are into `values`, alive for the test.
                unsafe { (*t).fetch_add(1, Ordering::Relaxed) };
                taken += 1;
            }
        };
        for (i, v) in values.iter().enumerate() {
            if slot.is_empty() {
                slot.put(v as *const AtomicUsize as *mut AtomicUsize);
                put += 1;
            }
            if i % 4096 == 4095 && stolen.load(Ordering::Relaxed) == 0 {
                // On a loaded machine the thief's thread may wait for a CPU for longer than this
                // loop takes (the test then failed with nothing stolen, even when this thread
                // yielded its CPU now and then): while it has stolen nothing, leave it the CPU
                // for a millisecond, the slot full.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            if i % 4 == 3 {
                take(&slot); // (meanwhile the slot stays full: the thief's chance)
                if stolen.load(Ordering::Relaxed) >= ENOUGH {
                    break;
                }
            }
        }
        take(&slot);
        done.store(true, Ordering::Release);
        thief.join().unwrap();
        let stolen = stolen.load(Ordering::Relaxed);
        assert!(stolen > 0, "the thief took nothing in {put} puts: the race went untested");
        assert!(slot.steal().is_null() && slot.is_empty());
        assert!(values.iter().all(|v| v.load(Ordering::Relaxed) <= 1), "a value left the slot twice");
        assert_eq!(taken + stolen, put, "every value put left the slot once");
    }
}
