//! [`Mutex`]: a two-phase lock (ELiTE 2.3.2) that blocks ULTs, not processors.
//!
//! # The state word
//!
//! `LOCKED`, `WAITERS`, `HANDOFF` and `BIASED`, with every transition in [`super::lock_word`]
//! (its module docs give the states, the orderings, the bias, and why no wake-up is lost;
//! `loom_models::mutex` checks them). The uncontended paths are one CAS each: `0 -> LOCKED` to
//! lock, `LOCKED -> 0` to unlock; on the processor the word is biased to (the first that took it
//! 64 times in a row through that path; after a revocation only that one again), a load and a
//! plain store each, and no RMW, but the owner's section around them (`lock_word`, "The bias"):
//! a dozen plain instructions each. `examples/hot_path_probe` runs `mutex_contended`'s loop at
//! one processor with this lock (`mutex`), with `std::sync::Mutex`'s two RMWs (`std-mutex`),
//! with a bare load and store of the shared counter (`bare`) and with nothing (`yields`), so
//! that the costs can be told apart on the host at hand. Every transition names the caller's
//! processor, looked up again each time (a ULT may have moved since the last one: a
//! holder that moved unlocks as a stranger, revoking the bias). `lock` and `try_lock` charge the
//! cooperative budget (`processor::budget`) before any of this, with the processor they look up
//! for the word anyway (again after the budget's yield). Off the owner's path, `lock` asks
//! the gathering first (one relaxed load while the lock is not saturated): a saturated lock whose
//! home is another processor is not taken there, even free; the caller takes the slow path, to
//! move (`gather`). Anything else goes to the slow paths:
//!
//! ```text
//! lock, slow:   spin phase (the spin policy's, exponential backoff): try_lock; stop spinning
//!               early when HANDOFF is set (the new owner may need this processor)
//!               block phase, under the list lock: lock_or_enqueue; free -> own it. Else block:
//!               switch out holding the list lock; after the switch the processor links the node
//!               (at the back; at the front after a lost race) and releases the list (sync::wait)
//!               woken with the lock handed over -> accept_hand_over, own it; woken plain -> again
//! unlock, slow: under the list lock: pop the first waiter;
//!               it lost MAX_LOSSES races already -> hand_over (LOCKED stays set) else release;
//!               notify the waiter (after the list lock is released)
//! ```
//!
//! # Fairness
//!
//! Waiters queue in FIFO order. A woken waiter competes with ULTs that arrive meanwhile (which
//! keeps the lock busy instead of idle while the waiter is scheduled), but it keeps its place at the
//! head of the queue, and after losing [`MAX_LOSSES`] such races the lock is handed to it directly
//! at the next unlock. So a waiter is served after at most the waiters queued before it plus
//! `MAX_LOSSES` newcomers per waiter ahead of it and itself: it cannot starve.
//!
//! # Hold times
//!
//! One acquisition in eight of those that waited is measured, and the average of the last 8
//! measured hold times drives the adaptive spin policy (`hold`).
//!
//! # Gathering
//!
//! A lock whose line keeps moving between processors with little work in between (saturated)
//! gathers its contenders on one processor, its home: the rules, and the state they keep in the
//! lock, the processors and the ULTs, are in `gather`.
//!
//! # Layout
//!
//! What every lock and unlock touches is one cache line: the state word with its bias (16 bytes,
//! `sync::lock_word`), the poison flag, the holder's counter of acquisitions that waited (a
//! `u8`: it only picks one in eight), its `measuring` flag, its count of bounces and its count
//! of all acquisitions (a `u8`: its wraps are the gathering's checkpoints), and the data right
//! after them, when it fits in the line's other 40 bytes (and its alignment is at most 8). The
//! wait list, the hold-time samples and their average, and the gathering's state, which only
//! contended locks, measured acquisitions and bounces touch, live in lines of their own in front
//! of it (`Cold`, 64-aligned; the data, possibly unsized, must come last). Uncontended, a lock
//! and an unlock touch that one line; contended between processors, it is the one line that
//! moves. A unit test checks the layout.

use super::lock_word::LockWord;
use super::wait::{OnUnwind, SpinLock, WaitList, WaitNode};
use super::Spinner;
use crate::atomics::{AtomicBool, AtomicU64, Ordering};
use crate::deadlock::WaitKind;
use crate::processor::{budget, Processor};
use crate::slot::current_processor;
use gather::Saturation;
use hold::Holds;
use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};

pub use super::lock_word::MAX_LOSSES;

pub(crate) mod gather;
mod hold;
#[cfg(test)]
mod tests;

/// `WaitNode::tag` of a waiter to whom an unlock handed the lock.
const HANDED_OVER: usize = usize::MAX;

/// What only contended locks and measured acquisitions touch, on cache lines of its own (see
/// "Layout" in the module docs).
#[repr(C, align(64))]
struct Cold {
    /// Average of the last 8 measured hold times, published for waiters deciding to spin.
    avg_hold: AtomicU64,
    /// The gathering's state (`gather`).
    saturation: Saturation,
    holds: UnsafeCell<Holds>,
    waiters: SpinLock<WaitList>,
}

/// A mutual exclusion lock with `std::sync::Mutex`'s interface (poisoning included) whose `lock`
/// blocks the calling ULT instead of its processor, and parks an OS thread that calls it from
/// outside the runtime.
///
/// ```
/// use elite_rt::sync::Mutex;
/// use std::sync::Arc;
///
/// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
/// let total = rt.block_on(|| {
///     let m = Arc::new(Mutex::new(0u64));
///     let hs: Vec<_> = (0..100)
///         .map(|_| {
///             let m = m.clone();
///             elite_rt::spawn(move || {
///                 for _ in 0..100 {
///                     *m.lock().unwrap() += 1;
///                     elite_rt::yield_now();
///                 }
///             })
///         })
///         .collect();
///     hs.into_iter().for_each(|h| h.join().unwrap());
///     let n = *m.lock().unwrap();
///     n
/// });
/// assert_eq!(total, 10_000);
/// ```
///
/// Contended, it is a two-phase lock (ELiTE section 2.3.2): a waiter spins a bounded number of
/// rounds with exponential backoff, then blocks; with the default [`SpinPolicy::Adaptive`] it
/// blocks at once while the lock's recent hold times exceed half the cost of a context switch.
/// Waiters are served in FIFO order and cannot starve: see [`MAX_LOSSES`].
///
/// A lock its ULTs keep taking from several processors with little work in between spends its
/// time moving between the cores' caches. Once its line changes processors less than eight of
/// the host's line round trips apart on average (as measured on the host when the first runtime
/// started, or a later one where that could not measure it; no lock saturates before: see
/// [`HostCosts`](super::HostCosts)), the lock tries gathering its contenders on one processor,
/// and keeps them there if that pays: a *trial*. Its period per acquisition, timed while it
/// was taken from several processors, is compared with the period timed once its contenders
/// **gather**: a ULT that takes it on another processor moves to the lock's home processor
/// first and takes it there, and the processor it left pauses its stealing (at most 2 ms at a
/// time) rather than take such ULTs back. Gathered more than 5 % slower, the lock spreads again
/// and tries no gathering for 10 ms (four times as long each failure in a row, up to 640 ms);
/// else it stays saturated until its bounces come more than four times the threshold apart, or
/// none came for its window (10 ms, four times as long each time it is saturated again at once
/// after a lapse, up to 640 ms). [`RuntimeBuilder::gather_locks`](crate::RuntimeBuilder::gather_locks)`(false)`
/// turns this off; pinned ULTs and OS threads never move.
///
/// As with std, a holder that panics poisons the lock, so a `Mutex` is `UnwindSafe` and
/// `RefUnwindSafe` whatever it holds (so are [`RwLock`](super::RwLock), [`Condvar`](super::Condvar)
/// and [`Barrier`](super::Barrier)): a closure that borrows one may be given to `catch_unwind`
/// as it is.
///
/// ```
/// use elite_rt::sync::Mutex;
/// use std::cell::RefCell;
///
/// let log = Mutex::new(RefCell::new(vec![1]));
/// let r = std::panic::catch_unwind(|| {
///     let g = log.lock().unwrap();
///     g.borrow_mut().push(2);
///     panic!("half way through");
/// });
/// assert!(r.is_err());
/// // The panic is not hidden: the lock says its value may be half updated.
/// assert!(log.is_poisoned());
/// assert_eq!(*log.lock().unwrap_err().into_inner().borrow(), [1, 2]);
/// ```
///
/// [`SpinPolicy::Adaptive`]: super::SpinPolicy::Adaptive
#[repr(C)] // the hot line: `state` starts it (after `Cold`), `data` follows (module docs)
pub struct Mutex<T: ?Sized> {
    cold: Cold,
    state: LockWord,
    poison: AtomicBool,
    /// Acquisitions that waited, holder-only: one whose count is a multiple of 8 is measured
    /// (`hold`).
    count: UnsafeCell<u8>,
    /// Whether the current acquisition is measured; holder-only.
    measuring: UnsafeCell<bool>,
    /// Bounces since the last sample (`gather`); holder-only.
    bounces: UnsafeCell<u8>,
    /// Acquisitions, modulo 256 (a wrap is a checkpoint of the trial: `gather`); holder-only.
    acquisitions: UnsafeCell<u8>,
    data: UnsafeCell<T>,
}

// SAFETY: the lock gives one holder at a time access to `data` and to its holder-only cells (the
// counters, `holds`, the gathering's last sample); T: Send suffices, as for std's Mutex.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

// As std's: a holder that panics poisons the lock, and every later `lock` says so, so a broken
// invariant cannot be observed by mistake after `catch_unwind`; whatever `T` is, the lock may be
// used across that boundary.
impl<T: ?Sized> UnwindSafe for Mutex<T> {}
impl<T: ?Sized> RefUnwindSafe for Mutex<T> {}

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `value`.
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            cold: Cold {
                avg_hold: AtomicU64::new(0),
                saturation: Saturation::new(),
                holds: UnsafeCell::new(Holds::new()),
                waiters: SpinLock::new(WaitList::of(WaitKind::Mutex)),
            },
            state: LockWord::new(),
            poison: AtomicBool::new(false),
            count: UnsafeCell::new(0),
            measuring: UnsafeCell::new(false),
            bounces: UnsafeCell::new(0),
            acquisitions: UnsafeCell::new(0),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the mutex and returns its value (`Err` if it is poisoned, with the value inside).
    pub fn into_inner(self) -> LockResult<T> {
        let poisoned = self.poison.load(Ordering::Relaxed);
        let v = self.data.into_inner();
        if poisoned {
            Err(PoisonError::new(v))
        } else {
            Ok(v)
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Acquires the lock, blocking the calling ULT (or parking the calling OS thread) until it is
    /// free. `Err` if a holder panicked (the guard is inside, as with std).
    ///
    /// Locking a mutex the caller already holds deadlocks, as with std.
    #[inline(always)] // (the owner's path is a dozen instructions: a call would add a tenth)
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        let me = here_charged(|| self.state.is_held());
        if !self.state.lock_fast_unless(me, || self.bounced(), || self.gathers_elsewhere(me)) {
            self.lock_contended();
        }
        self.guard()
    }

    /// Acquires the lock if it is free right now.
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        self.try_lock_as(here_charged(|| false))
    }

    /// [`try_lock`](Mutex::try_lock) for `me` (see [`here`]), charging no budget: `Debug` takes
    /// the lock this way, so that formatting (under the lock of `stdout`, say) never yields.
    fn try_lock_as(&self, me: usize) -> TryLockResult<MutexGuard<'_, T>> {
        if !self.state.try_lock(me) {
            return Err(TryLockError::WouldBlock);
        }
        self.guard().map_err(TryLockError::from)
    }

    /// Whether a holder panicked while holding the lock.
    pub fn is_poisoned(&self) -> bool {
        self.poison.load(Ordering::Relaxed)
    }

    /// Clears the poisoned state.
    pub fn clear_poison(&self) {
        self.poison.store(false, Ordering::Relaxed);
    }

    /// The value, through exclusive access (no locking needed).
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        let poisoned = self.poison.load(Ordering::Relaxed);
        let v = self.data.get_mut();
        if poisoned {
            Err(PoisonError::new(v))
        } else {
            Ok(v)
        }
    }

    /// Unlocks a mutex whose guard was forgotten (`ReentrantLock` keeps the lock without one).
    ///
    /// # Safety
    /// The caller locked the mutex through `lock` or `try_lock` and forgot that guard; this
    /// stands for the guard's drop (without its poisoning).
    pub(super) unsafe fn force_unlock(&self) {
        self.unlock();
    }

    /// The guard of an acquisition, after any (the caller holds the lock): counted for the
    /// gathering's trial (`gather`).
    #[inline]
    fn guard(&self) -> LockResult<MutexGuard<'_, T>> {
        self.acquired();
        let g = MutexGuard { lock: self, panicking: std::thread::panicking() };
        if self.poison.load(Ordering::Relaxed) {
            Err(PoisonError::new(g))
        } else {
            Ok(g)
        }
    }

    #[cold]
    fn lock_contended(&self) {
        // Gathering (`gather`): only for a saturated lock, and at most one move per call
        // (its home may change while the mover travels).
        let mut may_move = self.saturated();
        if self.move_and_take(&mut may_move) {
            return;
        }
        let mut losses = 0usize;
        loop {
            // After a plain wake-up this ULT holds the turn to retry: unwound (shutdown) before it
            // takes the lock or queues again, at a move's switch or the chaos mode's decision
            // point, it passes the turn on, as `abandon` does for a queued waiter.
            let retry = losses > 0;
            let turn = OnUnwind::new(move || {
                if retry {
                    self.wake_next_if_free();
                }
            });
            let acquired = self.spin_phase(&mut may_move);
            turn.disarm();
            if acquired {
                return;
            }
            // Block phase.
            let node = WaitNode::new();
            let list = self.cold.waiters.lock();
            if self.state.lock_or_enqueue(here()) {
                drop(list);
                self.begin_contended_hold();
                return;
            }
            // WAITERS is set: no unlock can take the fast path until the node is linked and the
            // list released (which `block` does after our switch).
            node.tag.set(losses);
            let guard = OnUnwind::new(|| self.abandon(&node));
            // A waiter that lost a race for the lock keeps its place at the front.
            node.block_on(list, |list| list, losses > 0);
            guard.disarm();
            if node.tag.get() == HANDED_OVER {
                self.state.accept_hand_over(here());
                self.begin_contended_hold();
                return;
            }
            losses += 1;
        }
    }

    /// The spin phase of [`Mutex::lock_contended`] (with its one move, while `may_move`); true if
    /// it took the lock.
    #[inline]
    fn spin_phase(&self, may_move: &mut bool) -> bool {
        let mut spin = Spinner::new(self.average_hold());
        while spin.again() {
            // The word may have been biased to another processor meanwhile: move rather than
            // revoke.
            if self.move_and_take(may_move) {
                return true;
            }
            if self.state.try_lock(here()) {
                self.begin_contended_hold();
                return true;
            }
            if self.state.handing_over() {
                break; // its new owner may be waiting for this processor
            }
        }
        false
    }

    /// A blocked waiter is being unwound (shutdown): leave the queue, and pass on whatever an
    /// unlock gave it (the lock itself, or the turn to retry).
    #[cold]
    fn abandon(&self, node: &WaitNode) {
        let mut list = self.cold.waiters.lock();
        if node.is_linked() {
            list.remove(node);
            if list.is_empty() {
                self.state.clear_waiters(here());
            }
            return;
        }
        drop(list);
        if node.tag.get() == HANDED_OVER {
            self.state.accept_hand_over(here());
            self.unlock();
        } else {
            // Woken to retry: the lock may be free with others queued, who would wait for an
            // unlock that is not coming. Wake the next one instead.
            self.wake_next_if_free();
        }
    }

    #[cold]
    fn wake_next_if_free(&self) {
        let mut list = self.cold.waiters.lock();
        if self.state.is_locked(here()) {
            return; // its holder will unlock and wake
        }
        let wake = list.pop_front().and_then(|n| n.notify());
        if list.is_empty() {
            self.state.clear_waiters(here());
        }
        drop(list);
        if let Some(w) = wake {
            w.wake();
        }
    }

    #[inline]
    fn unlock(&self) {
        self.record_hold();
        if !self.state.unlock_fast(here()) {
            self.unlock_slow();
        }
    }

    #[cold]
    fn unlock_slow(&self) {
        let me = here();
        let mut list = self.cold.waiters.lock();
        let Some(n) = list.pop_front() else {
            // Another processor's bias (this holder moved), or WAITERS without waiters, which
            // cannot stay set (it is cleared with the last unlink), but losing a wake-up would be
            // worse than a wasted RMW.
            self.state.release(me, true);
            return;
        };
        let last = list.is_empty();
        if n.tag.get() >= MAX_LOSSES {
            n.tag.set(HANDED_OVER);
            // LOCKED stays set: the waiter owns the lock now; the wake-up below publishes the
            // critical section (AcqRel on its wait word) besides the word's own Release/Acquire.
            self.state.hand_over(me, last);
        } else {
            self.state.release(me, last);
        }
        let wake = n.notify();
        drop(list);
        match wake {
            Some(w) => w.wake(),
            None => crate::fatal("a mutex waiter timed out"),
        }
    }
}

/// The caller's name for the state word's bias (`sync::lock_word`): its processor's address, or
/// 0 on an OS thread. Looked up at each transition: a ULT may have moved since the last one.
#[inline(always)]
fn here() -> usize {
    current_processor().map_or(0, |p| p as *const Processor as usize)
}

/// [`here`] at the entry of `lock` and `try_lock`, after charging the running ULT's cooperative
/// budget (`processor::budget`; `would_block` as there): looked up again when the charge yielded.
#[inline(always)]
fn here_charged(would_block: impl FnOnce() -> bool) -> usize {
    budget::charge(current_processor(), would_block).map_or(0, |p| p as *const Processor as usize)
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(v: T) -> Mutex<T> {
        Mutex::new(v)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock_as(here()) {
            Ok(g) => d.field("data", &&*g),
            Err(TryLockError::Poisoned(e)) => d.field("data", &&**e.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.is_poisoned()).finish_non_exhaustive()
    }
}

/// Access to a [`Mutex`]'s value; unlocks when dropped. Do not hold one across a call that may
/// block the ULT on something the next holder must do (as with any lock).
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized> {
    lock: &'a Mutex<T>,
    panicking: bool,
}

// SAFETY: a guard gives `&T` to whoever holds `&guard`: Sync when T is Sync, as for std.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}
// A MutexGuard may be sent to another OS thread (unlike std's): the lock does not belong to an OS
// thread, and a ULT moves between OS threads while holding one anyway.
// SAFETY: unlocking from any thread is part of this lock's protocol.
unsafe impl<T: ?Sized + Send> Send for MutexGuard<'_, T> {}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    pub(crate) fn mutex(&self) -> &'a Mutex<T> {
        self.lock
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if !self.panicking && std::thread::panicking() {
            self.lock.poison.store(true, Ordering::Relaxed);
        }
        self.lock.unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
