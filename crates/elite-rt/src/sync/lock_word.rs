//! The state word of [`Mutex`](super::Mutex): every transition of its `LOCKED`, `WAITERS`,
//! `HANDOFF` and `BIASED` bits, apart from the wait list and the blocking that need the runtime,
//! so that the loom model (`loom_models::mutex`) runs this very code.
//!
//! # States and transitions
//!
//! * `LOCKED`: someone owns the lock.
//! * `WAITERS`: the wait list is not empty. Set and cleared only under the list's lock.
//! * `HANDOFF`: an unlock handed the lock to a blocked waiter that has not run yet (only with
//!   `LOCKED`). Spinners stop spinning when they see it: the new owner may need their processor.
//! * `BIASED`: the word belongs to one processor (see "The bias" below); the other bits mean what
//!   they always mean.
//!
//! ```text
//! lock_fast          0 -> LOCKED                                          CAS, Acquire
//! try_lock           s -> s | LOCKED, if s has no LOCKED                  CAS loop, Acquire
//! lock_or_enqueue    under the list lock: free -> take it (as try_lock), else set WAITERS
//!                    (the caller then links its node before releasing the list lock)
//! unlock_fast        LOCKED -> 0                                          CAS, Release
//! release(last)      under the list lock, a waiter popped (or none):
//!                    clear LOCKED, and WAITERS if the list is empty now   RMW, Release
//! hand_over(last)    under the list lock, the popped waiter lost MAX_LOSSES races: LOCKED stays,
//!                    set HANDOFF, clear WAITERS if the list is empty now  CAS loop, Release
//! accept_hand_over   the new owner, when it runs: clear HANDOFF           RMW, Acquire
//! clear_waiters      under the list lock, the list emptied otherwise (a waiter left)   RMW
//! ```
//!
//! Each transition is a function of the other bits: on a biased word, its owner applies the same
//! function with a plain load and store, and everyone else revokes the bias first (then a single
//! RMW where no biasing can race: the caller holds the lock, or `WAITERS` stays set).
//!
//! # Why no wake-up is lost
//!
//! A waiter sets `WAITERS` (or finds it set) under the list lock and links its node before it
//! releases that lock; `WAITERS` is cleared only under the same lock, when the list is empty. The
//! unlock fast path succeeds only from exactly `LOCKED` (`BIASED | LOCKED` on its owner's path),
//! so while a waiter is linked every unlock takes the slow path, which pops a waiter under the list
//! lock and wakes it. A waiter that finds the lock free under the list lock takes it instead of
//! waiting, so an unlock that ran just before cannot leave it waiting for nobody.
//!
//! # Why the data is published
//!
//! Unbiased, every transition that takes the lock is an `Acquire` RMW, and every one that lets it
//! go a `Release` RMW, on this word; the owner of a handed-over lock reads the word with the
//! `Acquire` RMW of `accept_hand_over`, after the `hand_over` RMW that follows the last owner's
//! critical section in the list lock's order (and the runtime's wake-up adds its own `AcqRel`).
//! Biased, every transition runs on one OS thread (the owner processor's), in program order; the
//! revocation hands everything over (see below).
//!
//! # The bias
//!
//! A mutex that one processor keeps taking (1024 ULTs of one processor taking turns, say) is
//! biased to it, as the channels' spin locks are (`sync::bias`, whose barriers this uses): that
//! processor then takes and releases it with a plain load and store, without a locked RMW. Unlike
//! a spin lock, a mutex may stay held for long (its holder yields, blocks, moves to another
//! processor, or an OS thread holds it), so the owner's Dekker section covers one transition, not
//! the hold: its flag `inside` says "the owner is between reading and writing the word", and a
//! revoker waits only for that.
//!
//! Fields: `owner` (even: the processor the word is biased to; odd: unbiased, 1 if never biased,
//! else the name of its first owner with bit 0 set), `inside` (the owner's flag), and
//! the streak (holder-only: a tag of the processor that took the last `lock_fast` acquisitions in
//! a row, how many, and the threshold's doubling count; a tag two processors share only makes
//! one of them biased early). A caller names itself by its processor's address (`me`: even, and
//! 0 on an OS thread, which never owns a bias), so an unbiased `owner`, odd, equals no caller.
//!
//! ```text
//! owner p, any         if owner == p: inside = 1; light barrier; if owner == p:
//!   transition           s = load; store f(s); inside = 0 (Release); done
//!                      (else inside = 0 and go on as anyone else)
//! anyone else          CAS loop of f over words without BIASED; a word with BIASED -> revoke
//! revoke               1. wait until BIASED is clear (done) or owner is even;
//!                         CAS owner: o -> o | 1 (Acquire); lost -> back to 1
//!                      2. heavy barrier
//!                      3. wait until inside == 0 (Acquire)
//!                      4. the streak: threshold doubled, count 0
//!                      5. clear BIASED (RMW, Release)
//! bias to p            the holder of an unbiased acquisition by lock_fast on p, the threshold-th
//!   (holder, on p)       in a row from p, if owner is 1 or p | 1 (never biased, or to p):
//!                        1. CAS LOCKED -> LOCKED | BIASED (only then: no waiter);
//!                        2. owner = p (Release)
//! ```
//!
//! Why it is exclusive: an even `owner` implies `BIASED` (set before it, cleared after), so
//! whoever wins the CAS of step 1 revokes a bias that is there, and only it; between the two
//! steps of a biasing or of a revocation (`BIASED` with an odd owner) everyone else waits. While
//! `BIASED` is set no CAS of anyone else succeeds (none expects the bit), so the word changes only
//! by the owner's stores or the revoker's step 5. The owner's section and the revoker's steps 1-3
//! are an asymmetric Dekker (the barriers act as two `SeqCst` fences, `sync::bias`): either the
//! revoker's wait sees the owner's `inside = 1` (and waits until that section ends), or the owner's
//! second read of `owner` sees the revocation (and its section writes nothing). So after step 3 no
//! owner store is in flight or to come, and step 3's `Acquire` makes every owner store (and what
//! the owner's holders wrote in the critical sections before them) visible to the revoker, whose
//! step 5 passes it on to every later `Acquire` RMW.
//!
//! Why a word is biased to one processor only, its first owner, however often revoked: `inside`
//! is written by whoever passed the check `owner == me`, and a thread may pass it, be preempted
//! (by the OS, for milliseconds), and enter its section when the word is biased to someone else
//! now; it leaves at once, but clears `inside` on the way, maybe while the new owner is inside,
//! whose revoker then finds the flag clear and clears `BIASED` under the new owner's store (two
//! holders, and a word left `BIASED` with an odd owner). With one owner ever, such a stale
//! section runs on that owner's thread, between its real ones, never during one (the loom model
//! `mutex_bias_a_former_owner_is_stale` wedges the lock without this rule; the unit test is
//! `a_revoked_word_is_biased_again_only_to_its_first_owner`). A lock whose users move to another
//! processor for good stays unbiased there.
//!
//! Why the owner's processor is one OS thread: only the thread running a processor names itself
//! by its address; a processor's thread changes only at a blocking call's hand-over, which
//! synchronizes the two. A processor's address is reused only after the processor was freed,
//! which follows the end of every thread that ran it, and an allocation synchronizes with the free
//! before it (C11 7.22.3): a new processor at the address of a word's dead owner inherits the bias
//! with everything the dead one wrote. A holder that moved to another processor (or an OS thread)
//! unlocks as anyone else: by revoking.
//!
//! Why the streak is touched by one party at a time: the holder of an unbiased `lock_fast`
//! acquisition counts it (the word has no `BIASED` then, and nobody revokes); the revoker writes
//! it between its step 1 (whose `Acquire` follows the biasing's `Release`, the biaser's last
//! touch) and its step 5 (whose `Release` precedes the next unbiased acquisition's `Acquire`).
//! The streak is not atomic on purpose: the loom models of the unbiased protocol would explore
//! every value a load of it may see (18 times their executions, when it lived in `owner`).
//!
//! Costs: a revocation is one heavy barrier (microseconds, `membarrier`), and each doubles the
//! threshold (64 at first, at most 2^15), so a lock taken from several processors pays at most one
//! per threshold acquisitions. No word is biased without `membarrier`.

#[cfg(not(loom))]
use std::cell::UnsafeCell;

#[cfg(loom)]
use loom::cell::UnsafeCell;

use super::bias;
use crate::atomics::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::hint::cold_path;

/// Someone owns the lock.
pub(crate) const LOCKED: u16 = 1;
/// The wait list is not empty.
pub(crate) const WAITERS: u16 = 2;
/// The lock was handed to a blocked waiter that has not run yet.
pub(crate) const HANDOFF: u16 = 4;
/// The word is biased to the processor `owner` names (or its bias is being set up or revoked).
pub(crate) const BIASED: u16 = 8;

/// `owner` of a word never biased (module docs, "The bias"): odd, so no caller's name. A revoked
/// word's `owner` is its first owner's name with this bit set: odd too, and it remembers which
/// processor alone may be biased again.
const UNBIASED: usize = 1;

/// Races a woken waiter may lose to newcomers before the lock is handed to it directly.
pub const MAX_LOSSES: usize = 2;

/// `lock_fast` acquisitions in a row from one processor before the word is biased to it, at
/// first; a revocation doubles it (a few under loom, so that the models reach it).
#[cfg(not(loom))]
const FIRST_STREAK: u16 = bias::FIRST_THRESHOLD as u16;
#[cfg(loom)]
const FIRST_STREAK: u16 = 2;

/// The most doublings of the threshold (64 << 9 = 2^15, what the count holds).
const MAX_SHIFT: u8 = 9;

/// A field only one party touches at a time (the streak, see "The bias"); under loom, loom's cell,
/// so that the models check that claim.
struct HolderCell<T: Copy>(UnsafeCell<T>);

impl<T: Copy> HolderCell<T> {
    #[cfg(not(loom))]
    const fn new(v: T) -> HolderCell<T> {
        HolderCell(UnsafeCell::new(v))
    }

    #[cfg(loom)]
    fn new(v: T) -> HolderCell<T> {
        HolderCell(UnsafeCell::new(v))
    }

    /// # Safety
    ///
    /// The caller is the field's one party now (see "The bias" in the module docs).
    #[cfg(not(loom))]
    #[inline(always)]
    unsafe fn get(&self) -> T {
        // SAFETY: no one else touches the field now (the caller's contract).
        unsafe { *self.0.get() }
    }

    /// # Safety
    ///
    /// As for `get`.
    #[cfg(not(loom))]
    #[inline(always)]
    unsafe fn set(&self, v: T) {
        // SAFETY: no one else touches the field now (the caller's contract).
        unsafe { *self.0.get() = v }
    }

    /// # Safety
    ///
    /// As above.
    #[cfg(loom)]
    unsafe fn get(&self) -> T {
        // SAFETY: the caller's contract; loom reports an access that races.
        self.0.with(|p| unsafe { *p })
    }

    /// # Safety
    ///
    /// As above.
    #[cfg(loom)]
    unsafe fn set(&self, v: T) {
        // SAFETY: the caller's contract; loom reports an access that races.
        self.0.with_mut(|p| unsafe { *p = v })
    }
}

/// The state word of a mutex, with its bias.
///
/// `repr(C)` and 16 bytes, so that the mutex's own flags and its data share the word's cache line
/// (see "Layout" in `sync::mutex`).
#[repr(C)]
pub(crate) struct LockWord {
    state: AtomicU16,
    /// The tag of the streak's processor ([`streak_tag`]).
    streak_last: HolderCell<u16>,
    /// `lock_fast` acquisitions in a row by the streak's processor.
    streak_count: HolderCell<u16>,
    /// The owner's flag: it is between reading and writing the word.
    inside: AtomicBool,
    /// Doublings of the threshold so far (one per revocation).
    streak_shift: HolderCell<u8>,
    /// Even: the processor the word is biased to; odd: unbiased ([`UNBIASED`], or the first
    /// owner's name with that bit; module docs).
    owner: AtomicUsize,
}

/// A processor's tag for the streak: a few bits of its address (processors are larger than
/// 64 bytes, so neighbours differ).
#[inline(always)]
fn streak_tag(me: usize) -> u16 {
    (me >> 6) as u16
}

// SAFETY: the streak fields are touched by one party at a time, which the word's protocol
// arranges ("The bias" in the module docs); everything else is atomic.
unsafe impl Sync for LockWord {}

impl LockWord {
    /// An unlocked, unbiased word.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> LockWord {
        LockWord {
            state: AtomicU16::new(0),
            streak_last: HolderCell::new(0),
            streak_count: HolderCell::new(0),
            inside: AtomicBool::new(false),
            streak_shift: HolderCell::new(0),
            owner: AtomicUsize::new(UNBIASED),
        }
    }

    /// An unlocked word that is never biased (loom's atomics have no `const` constructor; the
    /// models of the unbiased protocol keep their state space).
    #[cfg(loom)]
    pub(crate) fn new() -> LockWord {
        LockWord::with_bias(0, MAX_SHIFT)
    }

    /// An unlocked word biased to processor `owner` from the start (even, not 0), or unbiased
    /// (0) with its threshold doubled `shift` times (0: biased at the second `lock_fast` in a
    /// row; `MAX_SHIFT`: never in a model).
    #[cfg(loom)]
    pub(crate) fn with_bias(owner: usize, shift: u8) -> LockWord {
        assert!(owner.is_multiple_of(2));
        LockWord {
            state: AtomicU16::new(if owner != 0 { BIASED } else { 0 }),
            streak_last: HolderCell::new(0),
            streak_count: HolderCell::new(0),
            inside: AtomicBool::new(false),
            streak_shift: HolderCell::new(shift),
            owner: AtomicUsize::new(if owner != 0 { owner } else { UNBIASED }),
        }
    }

    /// An unlocked, unbiased word revoked from processor `home` (even, not 0), whose streak
    /// makes `next` biased at its next `lock_fast` (`bias_to` decides whether it may be).
    #[cfg(loom)]
    pub(crate) fn revoked_from(home: usize, next: usize) -> LockWord {
        assert!(home.is_multiple_of(2) && home != 0);
        LockWord {
            state: AtomicU16::new(0),
            streak_last: HolderCell::new(streak_tag(next)),
            streak_count: HolderCell::new(FIRST_STREAK - 1),
            inside: AtomicBool::new(false),
            streak_shift: HolderCell::new(0),
            owner: AtomicUsize::new(home | UNBIASED),
        }
    }

    /// A section of `me`'s owner path entered without the check before it: `me`'s thread
    /// passed the check `owner == me`, then was preempted until the word was revoked.
    #[cfg(loom)]
    pub(crate) fn stale_section(&self, me: usize) {
        let _ = self.owned(me, |_| (None, ()));
    }

    /// Whether the word is free with no waiter and no hand-over left (biased or not; the
    /// models' final check).
    #[cfg(loom)]
    pub(crate) fn is_free(&self) -> bool {
        self.state.load(Ordering::Relaxed) & !BIASED == 0
    }

    /// Takes a free lock nobody waits for: on the owner's path (`me`, the caller's processor,
    /// owns the bias) with a load and a store; else in one CAS, counting the streak (out of line:
    /// the owner's path is the one to inline). Such an unbiased acquisition from another
    /// processor than the one before is a bounce (the lock's line moved between cores): then
    /// `bounced` runs, after the lock is taken.
    #[inline(always)]
    pub(crate) fn lock_fast(&self, me: usize, bounced: impl FnOnce()) -> bool {
        self.lock_fast_unless(me, bounced, || false)
    }

    /// [`LockWord::lock_fast`], but off the owner's path `defer` is asked first, and when it says
    /// so nothing is tried: false, as for a held lock (the caller takes its contended path;
    /// `sync::mutex::gather` moves a saturated lock's contenders there). A refusal changes
    /// nothing in the word, as a spurious failure of the weak CAS would not.
    #[inline(always)]
    pub(crate) fn lock_fast_unless(
        &self,
        me: usize,
        bounced: impl FnOnce(),
        defer: impl FnOnce() -> bool,
    ) -> bool {
        if self.owner.load(Ordering::Relaxed) == me {
            let take = |s: u16| {
                if s & !BIASED == 0 {
                    (Some(s | LOCKED), true)
                } else {
                    cold_path(); // held: the contended path
                    (None, false)
                }
            };
            if let Some(took) = self.owned(me, take) {
                return took;
            }
        }
        // (Laid out of the owner's way: the unbiased lock costs an atomic anyway.)
        cold_path();
        self.lock_unbiased(me, bounced, defer)
    }

    /// [`LockWord::lock_fast_unless`] for anyone but the owner.
    #[inline(never)]
    fn lock_unbiased(&self, me: usize, bounced: impl FnOnce(), defer: impl FnOnce() -> bool) -> bool {
        if defer() {
            return false;
        }
        if self.state.compare_exchange_weak(0, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            if self.count_streak(me) {
                bounced();
            }
            return true;
        }
        false
    }

    /// Takes the lock if it is free now, whatever else is set.
    #[inline]
    pub(crate) fn try_lock(&self, me: usize) -> bool {
        self.update(me, Ordering::Acquire, |s| {
            if s & LOCKED == 0 {
                (Some(s | LOCKED), true)
            } else {
                (None, false)
            }
        })
    }

    /// Whether the lock was handed to a waiter that has not run yet (spinners stop; a hint).
    #[inline]
    pub(crate) fn handing_over(&self) -> bool {
        self.state.load(Ordering::Relaxed) & HANDOFF != 0
    }

    /// Under the list lock: takes the lock if it is free (true), or makes sure `WAITERS` is set
    /// (false: the caller links its node before releasing the list lock, then blocks).
    #[inline]
    pub(crate) fn lock_or_enqueue(&self, me: usize) -> bool {
        self.update(me, Ordering::Acquire, |s| {
            if s & LOCKED == 0 {
                (Some(s | LOCKED), true)
            } else if s & WAITERS == 0 {
                (Some(s | WAITERS), false)
            } else {
                (None, false)
            }
        })
    }

    /// Lets go of a lock nobody waits for: on the owner's path with a load and a store, else in
    /// one CAS; false: the slow path must run (waiters, or another processor's bias).
    #[inline(always)]
    pub(crate) fn unlock_fast(&self, me: usize) -> bool {
        if self.owner.load(Ordering::Relaxed) == me {
            let free = |s: u16| {
                if s & !BIASED == LOCKED {
                    (Some(s & !LOCKED), true)
                } else {
                    cold_path(); // waiters: the slow path
                    (None, false)
                }
            };
            if let Some(freed) = self.owned(me, free) {
                return freed;
            }
        }
        cold_path();
        self.state.compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed).is_ok()
    }

    /// Under the list lock, after popping a waiter (or finding none): lets go of the lock; `last`:
    /// the list is empty now. The caller holds the lock.
    #[inline]
    pub(crate) fn release(&self, me: usize, last: bool) {
        let clear = if last { LOCKED | WAITERS } else { LOCKED };
        self.update_steady(me, |s| s & !clear, |w| w.fetch_and(!clear, Ordering::Release));
    }

    /// Under the list lock, after popping a waiter: hands the lock to it (LOCKED stays set);
    /// `last`: the list is empty now.
    #[inline]
    pub(crate) fn hand_over(&self, me: usize, last: bool) {
        self.update(me, Ordering::Release, |s| {
            (Some(if last { (s & !WAITERS) | HANDOFF } else { s | HANDOFF }), ())
        });
    }

    /// The owner of a handed-over lock, when it runs: spinners may spin again.
    #[inline]
    pub(crate) fn accept_hand_over(&self, me: usize) {
        self.update_steady(me, |s| s & !HANDOFF, |w| w.fetch_and(!HANDOFF, Ordering::Acquire));
    }

    /// Under the list lock, when the list emptied without an unlock (a waiter left it, so
    /// `WAITERS` is set until this clears it).
    #[inline]
    pub(crate) fn clear_waiters(&self, me: usize) {
        self.update_steady(me, |s| s & !WAITERS, |w| w.fetch_and(!WAITERS, Ordering::Relaxed));
    }

    /// Whether someone owns the lock (under the list lock).
    #[inline]
    pub(crate) fn is_locked(&self, me: usize) -> bool {
        self.update(me, Ordering::Relaxed, |s| (None, s & LOCKED != 0))
    }

    /// The processor this word gathers its contenders on (`sync::mutex::gather`): the one
    /// it is biased to (`true`), or the first one it was ever biased to, now revoked (`false`);
    /// none if it was never biased. A hint: the word may change at once.
    #[inline]
    pub(crate) fn home(&self) -> Option<(usize, bool)> {
        match self.owner.load(Ordering::Relaxed) {
            UNBIASED => None,
            o if o & UNBIASED == 0 => Some((o, true)),
            o => Some((o & !UNBIASED, false)),
        }
    }

    /// Whether someone owns the lock now (a hint, read without revoking any bias).
    #[inline]
    pub(crate) fn is_held(&self) -> bool {
        self.state.load(Ordering::Relaxed) & LOCKED != 0
    }

    /// Whether the word is biased (tests; a hint).
    #[cfg(test)]
    pub(crate) fn is_biased(&self) -> bool {
        self.state.load(Ordering::Relaxed) & BIASED != 0
    }

    /// Applies transition `f` (new word or none, and an outcome): on the owner's path if `me`
    /// owns the bias, else by CAS with `order` on success, after revoking any bias.
    #[inline(always)]
    fn update<R>(&self, me: usize, order: Ordering, f: impl Fn(u16) -> (Option<u16>, R)) -> R {
        if self.owner.load(Ordering::Relaxed) == me {
            if let Some(r) = self.owned(me, &f) {
                return r;
            }
        }
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & BIASED != 0 {
                self.revoke();
                s = self.state.load(Ordering::Relaxed);
                continue;
            }
            let (new, r) = f(s);
            let Some(new) = new else { return r };
            match self.state.compare_exchange_weak(s, new, order, Ordering::Relaxed) {
                Ok(_) => return r,
                Err(now) => s = now,
            }
        }
    }

    /// [`LockWord::update`] for a transition that no biasing can race with (its caller holds the
    /// lock, or `WAITERS` is set and stays set until the transition: a biasing needs exactly
    /// `LOCKED`): on the owner's path, `f`; else, once the word is unbiased, the single RMW `rmw`.
    #[inline(always)]
    fn update_steady(&self, me: usize, f: impl Fn(u16) -> u16, rmw: impl FnOnce(&AtomicU16) -> u16) {
        if self.owner.load(Ordering::Relaxed) == me && self.owned(me, |s| (Some(f(s)), ())).is_some() {
            return;
        }
        if self.state.load(Ordering::Relaxed) & BIASED != 0 {
            self.revoke();
        }
        rmw(&self.state);
    }

    /// The owner's path (module docs, "The bias"): `f` applied with a load and a store inside
    /// the owner's Dekker section; `None` if the bias was revoked meanwhile (nothing written).
    /// Called with `me` as the owner seen a moment ago, from the OS thread running `me`.
    #[inline(always)]
    fn owned<R>(&self, me: usize, f: impl FnOnce(u16) -> (Option<u16>, R)) -> Option<R> {
        // 1. Announce, then look again (the revoker takes `owner`, then barriers, then reads
        //    `inside`: one of the two sees the other).
        self.inside.store(true, Ordering::Relaxed);
        bias::light_barrier();
        let mine = self.owner.load(Ordering::Relaxed) == me;
        // 2. Still the owner: nobody else writes the word until `inside` is clear again.
        let r = if mine {
            let s = self.state.load(Ordering::Relaxed);
            let (new, r) = f(s);
            if let Some(new) = new {
                self.state.store(new, Ordering::Relaxed);
            }
            Some(r)
        } else {
            cold_path(); // revoked meanwhile
            None
        };
        // 3. Leave (Release: the revoker's step 3 sees the store, and the critical section).
        self.inside.store(false, Ordering::Release);
        r
    }

    /// Counts an unbiased `lock_fast` acquisition from `me` (the caller holds the lock) and
    /// biases the word to `me` at the threshold-th in a row. True for a bounce (another
    /// processor than the streak's).
    #[inline(always)]
    fn count_streak(&self, me: usize) -> bool {
        let tag = streak_tag(me);
        // SAFETY: the holder of an unbiased acquisition is the streak's one party (module docs).
        unsafe {
            if self.streak_last.get() != tag {
                self.streak_last.set(tag);
                self.streak_count.set(1);
                return true;
            }
            let n = self.streak_count.get() + 1;
            if n < FIRST_STREAK << self.streak_shift.get() {
                self.streak_count.set(n);
                return false;
            }
            self.streak_count.set(0);
        }
        self.bias_to(me);
        false
    }

    /// Biases the word to `me`, whose holder the caller is (module docs, "bias to p"); the
    /// streak's last touch by the caller is before step 2.
    #[cold]
    #[inline(never)]
    fn bias_to(&self, me: usize) {
        if me == 0 || !bias::heavy_barrier_available() {
            return;
        }
        // Only to the processor of the word's first bias, if it had one: a former owner may pass
        // its check `owner == me` and be preempted before its section, which it enters (and
        // leaves, clearing `inside`) whenever it runs again; with every owner that processor,
        // such a stale section runs on the owner's thread, never during a section of another's.
        // (The caller holds the lock, so `owner` stays as it is; the Acquire of its lock follows
        // the revoker's step 5, after its step 1.)
        let o = self.owner.load(Ordering::Relaxed);
        if o != UNBIASED && o != me | UNBIASED {
            return;
        }
        // 1. Only from exactly LOCKED: a waiter would revoke it at once.
        if self.state.compare_exchange(LOCKED, LOCKED | BIASED, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            return;
        }
        // 2. The word is `me`'s now (Release: the streak, for the revoker's step 1).
        self.owner.store(me, Ordering::Release);
    }

    /// Takes the bias away (module docs, "revoke"), or waits until whoever is biasing or revoking
    /// is done; either way the caller then finds the word unbiased or biased anew.
    #[cold]
    #[inline(never)]
    fn revoke(&self) {
        let mut spins = 0u32;
        // 1. Win the owner, or wait for the other party.
        loop {
            if self.state.load(Ordering::Relaxed) & BIASED == 0 {
                return;
            }
            let o = self.owner.load(Ordering::Relaxed);
            if o & UNBIASED == 0
                && self.owner.compare_exchange(o, o | UNBIASED, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                break;
            }
            bias::wait_a_little(&mut spins);
        }
        // 2. Every CPU running a thread of ours: the owner's next section sees the change.
        bias::heavy_barrier();
        // 3. Wait for the section that may have started before (a few instructions).
        spins = 0;
        while self.inside.load(Ordering::Acquire) {
            bias::wait_a_little(&mut spins);
        }
        // 4. The streak: BIASED still keeps everyone else out.
        // SAFETY: the revoker is the streak's one party between steps 1 and 5 (module docs).
        unsafe {
            let shift = self.streak_shift.get();
            self.streak_shift.set((shift + 1).min(MAX_SHIFT));
            self.streak_count.set(0);
        }
        // 5. Unbiased (Release: the owner's stores and the streak, for the next Acquire RMW).
        self.state.fetch_and(!BIASED, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{bias, LockWord};

    /// Two processors' names (even, and apart in the streak's tag).
    const P: usize = 0x1000;
    const Q: usize = 0x2000;

    /// Takes and releases `w` from `me` until it is biased (or far more times than any
    /// threshold); whether it is.
    fn take_until_biased(w: &LockWord, me: usize) -> bool {
        for _ in 0..1 << 17 {
            if w.is_biased() {
                return true;
            }
            while !w.lock_fast(me, || {}) {} // (a weak CAS may fail spuriously)
            assert!(w.unlock_fast(me));
        }
        w.is_biased()
    }

    /// Once revoked, a word is biased again only to the processor it was biased to: the owner's
    /// flag `inside` is written by whoever passed the check `owner == me`, and a former owner
    /// preempted between that check and its section would enter it (and leave, clearing the
    /// flag) while a new owner is inside, so that a revoker of the new owner's bias would not
    /// wait for the new owner's section ("The bias", module docs).
    #[test]
    #[cfg_attr(miri, ignore = "membarrier")]
    fn a_revoked_word_is_biased_again_only_to_its_first_owner() {
        bias::prepare();
        if !bias::heavy_barrier_available() {
            return; // never biased
        }
        let w = LockWord::new();
        assert!(take_until_biased(&w, P));
        assert!(w.try_lock(0), "an OS thread revokes and takes it");
        assert!(!w.is_biased());
        assert!(w.unlock_fast(0));
        assert!(!take_until_biased(&w, Q), "biased to another processor after a revocation");
        assert!(take_until_biased(&w, P), "biased to its first owner again");
    }

    /// `lock_fast` reports a bounce (an unbiased acquisition from another processor than the
    /// one before) and nothing else: not a second acquisition in a row from one processor, not
    /// a failed one, not one on the owner's path; the home is the bias owner, then the first
    /// owner.
    #[test]
    #[cfg_attr(miri, ignore = "membarrier")]
    fn bounces_are_acquisitions_from_another_processor() {
        let w = LockWord::new();
        let take = |me: usize| {
            let mut bounced = false;
            while !w.lock_fast(me, || bounced = true) {} // (a weak CAS may fail spuriously)
            bounced
        };
        assert!(take(P), "the first acquisition ends the empty streak");
        assert!(!w.lock_fast(Q, || panic!("a failed acquisition bounced")), "held");
        assert!(w.is_held());
        assert!(w.unlock_fast(P));
        assert!(!w.is_held());
        assert!(!take(P), "the same processor again");
        assert!(w.unlock_fast(P));
        assert!(take(Q), "another processor");
        assert!(w.unlock_fast(Q));
        assert!(take(P), "and back");
        assert!(w.unlock_fast(P));
        assert_eq!(w.home(), None, "never biased: no home");
        bias::prepare();
        if !bias::heavy_barrier_available() {
            return; // never biased
        }
        assert!(take_until_biased(&w, Q));
        assert_eq!(w.home(), Some((Q, true)));
        assert!(!take(Q), "the owner's path counts no bounce");
        assert!(w.unlock_fast(Q));
        assert!(w.try_lock(0), "an OS thread revokes and takes it");
        assert_eq!(w.home(), Some((Q, false)), "the first owner stays the home");
        assert!(w.unlock_fast(0));
    }
}
