//! [`Once`]: one-time initialisation whose waiters block their ULT, not their processor.
//!
//! # Protocol
//!
//! A state byte, `INCOMPLETE`, `RUNNING`, `COMPLETE` or `POISONED`, and a list of waiters, both
//! changed only under the list's spin lock; the state is also read without it, by the fast path
//! (an `Acquire` load that sees `COMPLETE` pairs with the `Release` store that set it, after the
//! initialiser's writes).
//!
//! ```text
//! call (state not COMPLETE), under the lock:
//!   COMPLETE                      -> return
//!   POISONED, poison not ignored  -> unlock; panic
//!   INCOMPLETE, or POISONED with poison ignored (call_once_force)
//!                                 -> state = RUNNING; unlock; run the initialiser; then, under
//!                                    the lock: state = COMPLETE (returned) or POISONED (panicked,
//!                                    or unwound at shutdown); pop and notify every waiter; unlock;
//!                                    wake them
//!   RUNNING (or, for `wait`, anything but COMPLETE)
//!                                 -> block on the list (the wait protocol, `sync::wait`), and
//!                                    look again when woken
//! ```
//!
//! Every state change out of `RUNNING` wakes every waiter (each looks again: after `COMPLETE`
//! all return; after `POISONED` a `call_once` or `wait` panics, a `wait_force` waits on, and the
//! first `call_once_force` to take the lock runs its initialiser while the others wait again).
//! A waiter is never lost: it decides to wait and links its node under the same lock that every
//! state change out of `RUNNING` is made under. A waiter unwound at shutdown leaves the list
//! (nothing was handed to it).

use super::wait::{OnUnwind, SpinLock, WaitList, WaitNode, Wakes};
use crate::atomics::{AtomicU8, Ordering};
use crate::deadlock::WaitKind;
use std::fmt;
use std::panic::{RefUnwindSafe, UnwindSafe};

const INCOMPLETE: u8 = 0;
const RUNNING: u8 = 1;
const COMPLETE: u8 = 2;
const POISONED: u8 = 3;

/// Runs an initialiser exactly once, with `std::sync::Once`'s interface and semantics (poisoning
/// included); a caller that finds another one initialising blocks its ULT (or parks its OS
/// thread) until that one is done, so the processor runs other ULTs, the initialiser among them,
/// meanwhile.
///
/// Use it (and [`OnceLock`](super::OnceLock), [`LazyLock`](super::LazyLock)) instead of std's
/// inside ULTs: std's blocks the OS thread, so a ULT that waits on an initialiser that yields,
/// sleeps or blocks holds up that initialiser's processor, and when both are on the same
/// processor neither ever runs again.
///
/// ```
/// use elite_rt::sync::Once;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// static INIT: Once = Once::new();
/// static RUNS: AtomicUsize = AtomicUsize::new(0);
///
/// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
/// rt.block_on(|| {
///     let ults: Vec<_> = (0..10)
///         .map(|_| {
///             elite_rt::spawn(|| {
///                 INIT.call_once(|| {
///                     // The others wait here without holding up the processor.
///                     elite_rt::sleep(std::time::Duration::from_millis(5));
///                     RUNS.fetch_add(1, Ordering::Relaxed);
///                 });
///                 assert!(INIT.is_completed());
///             })
///         })
///         .collect();
///     ults.into_iter().for_each(|h| h.join().unwrap());
/// });
/// assert_eq!(RUNS.load(Ordering::Relaxed), 1);
/// ```
pub struct Once {
    /// `INCOMPLETE`, `RUNNING`, `COMPLETE` or `POISONED`: written under `waiters`' lock.
    state: AtomicU8,
    waiters: SpinLock<WaitList>,
}

/// What [`Once::call_once_force`] tells its initialiser.
#[derive(Debug)]
pub struct OnceState {
    poisoned: bool,
}

impl OnceState {
    /// Whether an earlier initialiser panicked (so the `Once` was poisoned).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }
}

// As std's `Once`: a panicking initialiser poisons it, and later calls say so (or, with
// `call_once_force`, are told so), so it may be used across `catch_unwind`.
impl UnwindSafe for Once {}
impl RefUnwindSafe for Once {}

impl Once {
    /// A `Once` whose initialiser has not run.
    #[allow(clippy::new_without_default)] // as std's
    pub const fn new() -> Once {
        Once { state: AtomicU8::new(INCOMPLETE), waiters: SpinLock::new(WaitList::of(WaitKind::Once)) }
    }

    /// Runs `f` if no initialiser of this `Once` has completed yet; returns once one has
    /// (waiting, without holding up the processor, while another caller's runs). What the
    /// initialiser wrote is visible to every caller once this returns.
    ///
    /// # Panics
    ///
    /// If the `Once` is poisoned (an initialiser panicked, before this call or while it waited),
    /// with std's message; a panic of `f` poisons it and goes on to the caller. An `f` that calls
    /// `call_once` on the same `Once` waits for itself: the runtime's deadlock report names it.
    #[inline]
    pub fn call_once<F: FnOnce()>(&self, f: F) {
        if self.is_completed() {
            return;
        }
        let mut f = Some(f);
        self.call(false, &mut |_| {
            if let Some(f) = f.take() {
                f()
            }
        });
    }

    /// As [`call_once`](Once::call_once), but a poisoned `Once` runs `f` too, telling it so
    /// ([`OnceState::is_poisoned`]); when `f` returns, the `Once` is complete (no longer poisoned).
    ///
    /// ```
    /// use elite_rt::sync::Once;
    ///
    /// let once = Once::new();
    /// let r = std::panic::catch_unwind(|| once.call_once(|| panic!("first try fails")));
    /// assert!(r.is_err());
    /// // `call_once` would panic now; `call_once_force` tries again.
    /// once.call_once_force(|state| assert!(state.is_poisoned()));
    /// assert!(once.is_completed());
    /// ```
    #[inline]
    pub fn call_once_force<F: FnOnce(&OnceState)>(&self, f: F) {
        if self.is_completed() {
            return;
        }
        let mut f = Some(f);
        self.call(true, &mut |state| {
            if let Some(f) = f.take() {
                f(state)
            }
        });
    }

    /// Whether an initialiser has completed (false while poisoned). When true, what it wrote is
    /// visible to the caller.
    #[inline]
    pub fn is_completed(&self) -> bool {
        self.state.load(Ordering::Acquire) == COMPLETE
    }

    /// Waits, without running anything, until an initialiser has completed.
    ///
    /// # Panics
    ///
    /// If the `Once` is poisoned, or becomes so while this waits.
    pub fn wait(&self) {
        if !self.is_completed() {
            self.wait_for_completion(false);
        }
    }

    /// As [`wait`](Once::wait), ignoring poisoning: waits until some initialiser (a
    /// `call_once_force`'s, after a poisoning) has completed.
    pub fn wait_force(&self) {
        if !self.is_completed() {
            self.wait_for_completion(true);
        }
    }

    /// Whether the `Once` is poisoned (for `LazyLock`'s message).
    pub(crate) fn is_poisoned(&self) -> bool {
        self.state.load(Ordering::Acquire) == POISONED
    }

    /// The slow path of `call_once` and `call_once_force` (module docs), not generic.
    #[cold]
    fn call(&self, ignore_poison: bool, f: &mut dyn FnMut(&OnceState)) {
        loop {
            let list = self.waiters.lock();
            let state = self.state.load(Ordering::Relaxed);
            match state {
                COMPLETE => return,
                POISONED if !ignore_poison => {
                    drop(list);
                    panic!("Once instance has previously been poisoned");
                }
                INCOMPLETE | POISONED => {
                    self.state.store(RUNNING, Ordering::Relaxed);
                    drop(list);
                    // Unwinding out of `f` (its panic, or a shutdown that unwinds this ULT)
                    // poisons; returning completes.
                    let mut end = Finish { once: self, to: POISONED };
                    f(&OnceState { poisoned: state == POISONED });
                    end.to = COMPLETE;
                    return;
                }
                _ => self.block(list),
            }
        }
    }

    /// The slow path of `wait` and `wait_force`.
    #[cold]
    fn wait_for_completion(&self, ignore_poison: bool) {
        loop {
            let list = self.waiters.lock();
            match self.state.load(Ordering::Relaxed) {
                COMPLETE => return,
                POISONED if !ignore_poison => {
                    drop(list);
                    panic!("Once instance has previously been poisoned");
                }
                _ => self.block(list),
            }
        }
    }

    /// Waits, under the list's lock `list`, for the next state change (module docs).
    fn block(&self, list: super::wait::SpinGuard<'_, WaitList>) {
        let node = WaitNode::new();
        // Shutdown unwinds us: leave the list (a wake-up is never handed on: every waiter gets one).
        let unwind = OnUnwind::new(|| self.waiters.lock().remove(&node));
        node.block_on(list, |l| l, false);
        unwind.disarm();
    }
}

/// Ends an initialiser's run: sets the state it says and wakes every waiter, also when the
/// initialiser unwinds.
struct Finish<'a> {
    once: &'a Once,
    to: u8,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let mut list = self.once.waiters.lock();
        self.once.state.store(self.to, Ordering::Release);
        let mut wakes = Wakes::default();
        while let Some(n) = list.pop_front() {
            // Untimed waits: every notify succeeds.
            if let Some(w) = n.notify() {
                wakes.push(w);
            }
        }
        drop(list);
        wakes.wake_all();
    }
}

impl fmt::Debug for Once {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Once").finish_non_exhaustive()
    }
}
