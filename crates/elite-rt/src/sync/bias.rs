//! A spin lock's bias towards one processor: while a lock is biased to processor `p`, code running
//! on `p`'s OS thread takes and releases it with plain stores, no atomic read-modify-write; anyone
//! else first revokes the bias, which costs a system-wide memory barrier (`membarrier(2)`).
//!
//! A ping-pong between two ULTs over two rendezvous channels takes four channel locks per round
//! trip, and four `lock cmpxchg` are a large part of such a round trip's time. When both ends
//! run on one processor, which No Affinity's
//! wake rule arranges, the lock only ever sees one OS thread: the bias removes the atomics there.
//!
//! # The protocol (an asymmetric Dekker)
//!
//! The lock has its usual word (the unbiased lock, a CAS) and, here, `owner` (0: unbiased, else the
//! id of the processor the lock is biased to) and `held` (the owner's lock flag).
//!
//! ```text
//! owner p, to lock     held = 1; light barrier; if owner == p: locked (through `held`)
//!                                                 else: held = 0; take the unbiased lock
//! owner p, to unlock   held = 0 (Release)
//! anyone, holding the  if owner != 0: owner = 0; heavy barrier; wait until held == 0 (Acquire)
//!   unbiased lock        (the revocation; then go on as the holder)
//! holder, to bias      owner = p (only the holder of the unbiased lock, which is on p; its
//!                        unlock publishes it)
//! ```
//!
//! The light barrier is a compiler fence; the heavy one is `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`,
//! which runs a full barrier on every CPU running a thread of the process, so that the pair acts as
//! two `SeqCst` fences (and loom models them so): either the owner's `held = 1` is visible to the
//! revoker after its barrier (the revoker waits for the owner to leave), or the owner's read of
//! `owner` after its barrier sees the revocation (it backs off to the unbiased lock, which the
//! revoker holds). So at most one of them is inside. What the owner wrote inside is visible to the
//! revoker through `held`'s Release/Acquire; what the revoker (or any holder of the unbiased lock)
//! wrote is visible to the owner because the owner biases the lock again only while holding the
//! unbiased lock.
//!
//! The owner is a processor, not an OS thread: its id names one `Processor` (never reused), and
//! only the OS thread running that processor takes the owner's path (the thread that runs a
//! processor changes only at a blocking call's hand-over, which synchronizes the two threads).
//!
//! # When a lock is biased
//!
//! The holder of the unbiased lock biases it to its processor after `threshold` acquisitions in a
//! row from that processor (64 at first); each revocation doubles the threshold (up to 2^20), so a
//! lock that moves between processors pays at most one heavy barrier per `threshold` acquisitions.
//! Only the processor of a lock's first bias is ever biased again: `held` is written by whoever
//! passed the check `owner == p`, and a former owner preempted between that check and its store
//! to `held` would store (and, seeing the revocation, clear) `held` while a new owner holds the
//! lock through it, so that the new owner's revoker would not wait for that holder (two holders;
//! the loom model `a_former_owner_is_stale`). With one owner ever, such a stale entry runs on
//! that owner's thread, never while it holds the lock through `held`.
//! The process registers for `membarrier` once, when its first runtime starts, on the starting
//! thread (microseconds in a process of one thread, else an RCU grace period, milliseconds);
//! no lock is biased before it is done, and none ever without `membarrier` (another OS, an old
//! kernel).
//!
//! # The mutex's bias
//!
//! [`Mutex`](super::Mutex) uses the same barriers ([`light_barrier`], [`heavy_barrier`],
//! [`wait_a_little`]) with a protocol of its own (`sync::lock_word`, "The bias"): its holder may
//! hold for long, block, or unlock on another processor, so there the owner's Dekker section
//! covers one transition of the state word rather than the whole hold, and a revoker waits for
//! that section only.

use crate::atomics::{AtomicBool, AtomicUsize, Ordering};
use std::hint::cold_path;

/// Acquisitions in a row from one processor before a lock is biased to it (at first).
pub(crate) const FIRST_THRESHOLD: u32 = 64;

/// The most a threshold grows to after revocations.
const MAX_THRESHOLD: u32 = 1 << 20;

/// The bias of one lock (see the module docs).
pub(crate) struct Bias {
    /// 0: unbiased; else the id of the processor the lock is biased to.
    owner: AtomicUsize,
    /// The owner's lock flag while biased.
    held: AtomicBool,
}

/// The unbiased lock holder's bookkeeping: which processor took the lock last and how many times
/// in a row, and the one processor the lock may be biased to. Touched only while holding the
/// unbiased lock.
pub(crate) struct Streak {
    last: usize,
    count: u32,
    threshold: u32,
    /// The processor of the first bias (0: none yet): the only one biased again after a
    /// revocation (module docs, "When a lock is biased").
    home: usize,
}

impl Streak {
    /// A streak that biases after [`FIRST_THRESHOLD`] acquisitions in a row, with no home yet.
    pub(crate) fn new() -> Streak {
        Streak::with_threshold(FIRST_THRESHOLD)
    }

    /// A streak that biases after `threshold` acquisitions in a row (the loom models shrink it).
    pub(crate) fn with_threshold(threshold: u32) -> Streak {
        Streak { last: 0, count: 0, threshold, home: 0 }
    }

    /// The streak of a lock revoked from processor `home` that processor `next` biases (or
    /// would) at its next acquisition (a loom model).
    #[cfg(loom)]
    pub(crate) fn revoked_from(home: usize, next: usize, threshold: u32) -> Streak {
        Streak { last: next, count: threshold - 1, threshold, home }
    }
}

impl Bias {
    /// No bias: every acquisition goes through the unbiased lock until a streak biases it.
    pub(crate) fn new() -> Bias {
        Bias::biased_to(0)
    }

    /// A bias to processor `owner` from the start (0: none; the loom models start biased).
    pub(crate) fn biased_to(owner: usize) -> Bias {
        Bias { owner: AtomicUsize::new(owner), held: AtomicBool::new(false) }
    }

    /// The owner's flag: the lock's flag to release when [`Bias::try_owner`] succeeded.
    #[inline]
    pub(crate) fn held(&self) -> &AtomicBool {
        &self.held
    }

    /// [`Bias::try_owner`] past its first check: `me`'s thread saw `owner == me`, then was
    /// preempted until the bias was revoked (a loom model).
    #[cfg(loom)]
    pub(crate) fn stale_try_owner(&self, me: usize) -> bool {
        self.held.store(true, Ordering::Relaxed);
        light_barrier();
        if self.owner.load(Ordering::Relaxed) == me {
            return true;
        }
        self.held.store(false, Ordering::Release);
        false
    }

    /// The owner's path: true if the lock is biased to `me` (a processor id, never 0) and is now
    /// held through [`Bias::held`]; false if the caller must take the unbiased lock.
    #[inline(always)]
    pub(crate) fn try_owner(&self, me: usize) -> bool {
        debug_assert!(me != 0);
        if self.owner.load(Ordering::Relaxed) != me {
            // (Laid out of the owner's way: the unbiased lock costs an atomic anyway.)
            cold_path();
            return false;
        }
        self.held.store(true, Ordering::Relaxed);
        light_barrier();
        if self.owner.load(Ordering::Relaxed) == me {
            return true;
        }
        // Revoked meanwhile: the revoker may be waiting for us to leave.
        cold_path();
        self.held.store(false, Ordering::Release);
        false
    }

    /// For the holder of the unbiased lock, taken from processor `me` (0: from no processor):
    /// revokes the bias if the lock has one (waiting until its owner's holder, if any, has left),
    /// then counts the acquisition and biases the lock to `me` when `me` took it `threshold`
    /// times in a row. Either way the caller then holds the lock alone.
    #[inline]
    pub(crate) fn after_lock(&self, streak: &mut Streak, me: usize) {
        if self.owner.load(Ordering::Relaxed) != 0 {
            self.revoke(streak);
        }
        if me == 0 {
            streak.last = 0;
            return;
        }
        if streak.last == me {
            streak.count += 1;
            if streak.count >= streak.threshold {
                // Only to the first owner (module docs, "When a lock is biased").
                if heavy_barrier_available() && (streak.home == 0 || streak.home == me) {
                    streak.home = me;
                    // Published by the caller's unlock (Release); only `me` acts on it.
                    self.owner.store(me, Ordering::Relaxed);
                }
                // (Without the barrier yet: count another streak, never past the threshold.)
                streak.count = 0;
            }
        } else {
            streak.last = me;
            streak.count = 1;
        }
    }

    /// Takes the bias away (the caller holds the unbiased lock) and waits until the owner is out.
    #[cold]
    #[inline(never)]
    fn revoke(&self, streak: &mut Streak) {
        self.owner.store(0, Ordering::Relaxed);
        heavy_barrier();
        let mut spins = 0u32;
        while self.held.load(Ordering::Acquire) {
            wait_a_little(&mut spins);
        }
        streak.threshold = (streak.threshold * 2).min(MAX_THRESHOLD);
        streak.count = 0;
    }
}

/// One round of a wait for another OS thread (a revoker's for the owner, a spin lock's for its
/// holder): a pause hint, or after 128 of them a yield of the OS thread (the other OS thread may
/// have been preempted).
pub(crate) fn wait_a_little(spins: &mut u32) {
    *spins += 1;
    if *spins < 128 {
        spin_hint();
    } else {
        yield_hint();
    }
}

#[cfg(not(loom))]
fn spin_hint() {
    std::hint::spin_loop();
}

#[cfg(not(loom))]
fn yield_hint() {
    std::thread::yield_now();
}

#[cfg(loom)]
fn spin_hint() {
    loom::thread::yield_now();
}

#[cfg(loom)]
fn yield_hint() {
    loom::thread::yield_now();
}

/// The owner's side of the asymmetric barrier: keeps the compiler from moving the read of `owner`
/// above the store to `held`; the revoker's [`heavy_barrier`] orders them on the CPU.
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn light_barrier() {
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
}

/// Under loom the pair of barriers is a pair of `SeqCst` fences, which is what they guarantee.
#[cfg(loom)]
pub(crate) fn light_barrier() {
    crate::atomics::fence(Ordering::SeqCst);
}

#[cfg(loom)]
pub(crate) fn heavy_barrier() {
    crate::atomics::fence(Ordering::SeqCst);
}

#[cfg(loom)]
pub(crate) fn heavy_barrier_available() -> bool {
    true
}

#[cfg(all(not(loom), target_os = "linux"))]
mod membarrier {
    use std::sync::atomic::{AtomicU8, Ordering};

    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    const IDLE: u8 = 0;
    const READY: u8 = 1;
    const UNAVAILABLE: u8 = 2;

    /// Where the process's registration for private expedited barriers stands.
    static STATE: AtomicU8 = AtomicU8::new(IDLE);

    fn call(cmd: libc::c_long) -> bool {
        // SAFETY: membarrier takes two integers (command, flags) and touches no memory of ours.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long) == 0 }
    }

    /// Registers, once per process, on the calling thread: a few microseconds while the process
    /// has a single thread, else the wait for an RCU grace period (milliseconds). Synchronous
    /// on purpose: a thread of its own would come and go at a moment
    /// nobody chose (the exhaustion test counts mappings), and it is paid once.
    pub(super) fn prepare() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let ok = call(CMD_REGISTER_PRIVATE_EXPEDITED);
            STATE.store(if ok { READY } else { UNAVAILABLE }, Ordering::Release);
        });
    }

    /// Whether the registration is done (until then no lock is biased).
    pub(super) fn available() -> bool {
        STATE.load(Ordering::Acquire) == READY
    }

    /// A full barrier on every CPU running a thread of this process.
    pub(super) fn barrier() {
        if call(CMD_PRIVATE_EXPEDITED) {
            return;
        }
        // Registered, or no lock would be biased; but a forked child's address space starts
        // unregistered (with our state copied): register it now, then try again. Should that
        // fail, nothing would order the owner's store: stop rather than lose exclusion.
        if !(call(CMD_REGISTER_PRIVATE_EXPEDITED) && call(CMD_PRIVATE_EXPEDITED)) {
            crate::fatal("membarrier(PRIVATE_EXPEDITED) failed after registration");
        }
    }
}

/// Gets the heavy barrier ready, once per process (`Runtime::start` calls it, before its threads
/// start: only code on a processor can own a bias).
#[cfg(all(not(loom), target_os = "linux"))]
pub(crate) fn prepare() {
    membarrier::prepare();
}

/// Whether the heavy barrier is ready ([`prepare`] registered the process): until it is, and
/// without it, no lock is biased.
#[cfg(all(not(loom), target_os = "linux"))]
pub(crate) fn heavy_barrier_available() -> bool {
    membarrier::available()
}

/// The revoker's side of the asymmetric barrier: a full barrier on every CPU running a thread of
/// this process, so that an owner's store to its flag before its [`light_barrier`] is visible
/// after it (module docs).
#[cfg(all(not(loom), target_os = "linux"))]
pub(crate) fn heavy_barrier() {
    membarrier::barrier();
}

#[cfg(all(not(loom), not(target_os = "linux")))]
pub(crate) fn prepare() {}

#[cfg(all(not(loom), not(target_os = "linux")))]
pub(crate) fn heavy_barrier_available() -> bool {
    false
}

#[cfg(all(not(loom), not(target_os = "linux")))]
pub(crate) fn heavy_barrier() {
    // Never biased without membarrier: nothing to order.
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{heavy_barrier_available, prepare, Bias, Streak, FIRST_THRESHOLD};
    use std::sync::atomic::Ordering;

    /// Once revoked, a lock is biased again only to the processor of its first bias (module docs,
    /// "When a lock is biased"): the streak of another processor runs past any threshold unbiased.
    #[test]
    #[cfg_attr(miri, ignore = "membarrier")]
    fn a_revoked_lock_is_biased_again_only_to_its_first_owner() {
        prepare();
        if !heavy_barrier_available() {
            return; // never biased
        }
        let (bias, mut streak) = (Bias::new(), Streak::new());
        let owner = |b: &Bias| b.owner.load(Ordering::Relaxed);
        // (Each call stands for an acquisition of the unbiased lock, whose holder calls it.)
        (0..FIRST_THRESHOLD).for_each(|_| bias.after_lock(&mut streak, 1));
        assert_eq!(owner(&bias), 1, "biased to its first processor");
        bias.after_lock(&mut streak, 0); // an OS thread revokes
        assert_eq!(owner(&bias), 0);
        for _ in 0..FIRST_THRESHOLD * 8 {
            bias.after_lock(&mut streak, 2);
            assert_eq!(owner(&bias), 0, "biased to another processor after a revocation");
        }
        (0..FIRST_THRESHOLD * 2).for_each(|_| bias.after_lock(&mut streak, 1));
        assert_eq!(owner(&bias), 1, "biased to its first processor again");
    }
}
