//! [`ReentrantLock`]: a lock its owner may take again, the owner being the ULT (not the OS thread
//! it happens to run on).
//!
//! # Protocol
//!
//! The lock is a [`Mutex<()>`](super::Mutex) (two-phase, blocking the ULT) plus the owner's token
//! and a count. The caller's token ([`current_token`]) is unique in the process for as long as
//! the process runs: each ULT draws one on its first use of any `ReentrantLock` (a ULT-local
//! value, so it follows the ULT to any processor and dies with it), and each OS thread outside a
//! ULT one of its own (a thread-local). Tokens are never reused, so a token left behind by an
//! owner that ended without unlocking (a leaked guard) matches nobody.
//!
//! ```text
//! lock:    owner == my token?  yes -> count += 1 (only the owner touches the count)
//!                              no  -> lock the mutex (waits as a ULT); owner = my token; count = 1
//! unlock:  count -= 1; at 0 -> owner = 0; unlock the mutex
//! ```
//!
//! `owner` is read without the mutex: only the holder of the mutex writes it, so a caller reads
//! its own token there only if it wrote it itself (and still holds the lock); any other value
//! (another owner's token, 0, a stale one) sends it to the mutex. Relaxed suffices for that
//! comparison; the mutex orders the owners' accesses to the value.

use super::Mutex;
use crate::atomics::{AtomicU64, Ordering};
use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::panic::{RefUnwindSafe, UnwindSafe};

/// A mutual exclusion lock that its owner may lock again while it holds it, with
/// `std::sync::ReentrantLock`'s interface (unstable in std): `lock` gives a guard to `&T` (use a
/// `Cell` or `RefCell` inside for mutation), and the lock is free again once every guard of its
/// owner is gone. It does not poison.
///
/// The owner is the calling **ULT**: another ULT on the same processor (the same OS thread) that
/// asks for it waits, as a ULT, until the owner lets go, and the owner keeps it when it moves to
/// another processor. An OS thread outside the runtime is an owner of its own. (A
/// [`blocking`](crate::blocking) call's closure runs on another OS thread, so it is not the ULT
/// that called it.)
///
/// Each ULT that locks a `ReentrantLock` keeps a ULT-local token for it (one per ULT, whatever
/// the number of locks: the first lock of a ULT allocates its ULT-local storage if nothing else
/// did). A waiter is a waiter of the [`Mutex`](super::Mutex) inside: two-phase, and named "a
/// Mutex" by the deadlock report.
///
/// ```
/// use elite_rt::sync::ReentrantLock;
/// use std::cell::RefCell;
/// use std::sync::Arc;
///
/// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
/// let log = rt.block_on(|| {
///     let log = Arc::new(ReentrantLock::new(RefCell::new(Vec::new())));
///     fn record(log: &ReentrantLock<RefCell<Vec<String>>>, line: String) {
///         log.lock().borrow_mut().push(line); // re-enters when the caller holds it
///     }
///     let ults: Vec<_> = (0..3)
///         .map(|i| {
///             let log = log.clone();
///             elite_rt::spawn(move || {
///                 let held = log.lock(); // keep our lines together
///                 record(&log, format!("{i}: start"));
///                 elite_rt::yield_now(); // the others, on this processor, wait for us
///                 record(&log, format!("{i}: end"));
///                 drop(held);
///             })
///         })
///         .collect();
///     ults.into_iter().for_each(|h| h.join().unwrap());
///     let lines = log.lock().borrow().clone();
///     lines
/// });
/// for pair in log.chunks(2) {
///     assert_eq!(pair[0].replace("start", "end"), pair[1]);
/// }
/// ```
pub struct ReentrantLock<T: ?Sized> {
    mutex: Mutex<()>,
    /// The owner's token; 0 when free (module docs).
    owner: AtomicU64,
    /// How many guards the owner holds; the owner's alone.
    count: UnsafeCell<u32>,
    data: T,
}

// SAFETY: as std's: one owner at a time reaches `&T`, so `T: Send` suffices (the owner may be
// any thread, or a ULT on any OS thread); the count is the owner's alone.
unsafe impl<T: ?Sized + Send> Send for ReentrantLock<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for ReentrantLock<T> {}

// As std's: no poisoning, so it is as unwind-safe as what it holds.
impl<T: ?Sized + UnwindSafe> UnwindSafe for ReentrantLock<T> {}
impl<T: ?Sized + RefUnwindSafe> RefUnwindSafe for ReentrantLock<T> {}

impl<T> ReentrantLock<T> {
    /// A new unlocked lock holding `value`.
    pub const fn new(value: T) -> ReentrantLock<T> {
        ReentrantLock {
            mutex: Mutex::new(()),
            owner: AtomicU64::new(0),
            count: UnsafeCell::new(0),
            data: value,
        }
    }

    /// Consumes the lock and returns its value.
    pub fn into_inner(self) -> T {
        self.data
    }
}

impl<T: ?Sized> ReentrantLock<T> {
    /// Locks it: at once if the calling ULT (or OS thread) owns it already, else once it is free
    /// (blocking the ULT, or parking the OS thread, meanwhile). The lock is released when the
    /// last of the owner's guards is dropped.
    ///
    /// # Panics
    ///
    /// If the owner already holds `u32::MAX` guards of it (std's limit and message).
    pub fn lock(&self) -> ReentrantLockGuard<'_, T> {
        let me = current_token();
        if self.owner.load(Ordering::Relaxed) == me {
            self.enter_again();
        } else {
            // Never poisoned: its guard is forgotten before any user code runs, and the unlock
            // goes through `force_unlock`.
            std::mem::forget(self.mutex.lock());
            self.enter_first(me);
        }
        ReentrantLockGuard { lock: self, _not_send: PhantomData }
    }

    /// Locks it if that needs no waiting: always when the caller owns it already, otherwise when
    /// it is free. `None` if another owner holds it.
    pub fn try_lock(&self) -> Option<ReentrantLockGuard<'_, T>> {
        let me = current_token();
        if self.owner.load(Ordering::Relaxed) == me {
            self.enter_again();
        } else {
            std::mem::forget(self.mutex.try_lock().ok()?);
            self.enter_first(me);
        }
        Some(ReentrantLockGuard { lock: self, _not_send: PhantomData })
    }

    /// The value, through exclusive access (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.data
    }

    /// The owner `me` took the mutex.
    fn enter_first(&self, me: u64) {
        self.owner.store(me, Ordering::Relaxed);
        // SAFETY: we hold the mutex: the count is ours.
        unsafe { *self.count.get() = 1 };
    }

    /// The owner takes it once more.
    fn enter_again(&self) {
        // SAFETY: the owner token is ours, so we hold the lock: the count is ours.
        let count = unsafe { &mut *self.count.get() };
        *count = count.checked_add(1).unwrap_or_else(|| panic!("lock count overflow in reentrant mutex"));
    }

    /// A guard of the owner goes.
    fn leave(&self) {
        // SAFETY: a guard exists, so its owner (the caller: guards are not `Send`) holds the
        // lock, and the count is its.
        let count = unsafe { &mut *self.count.get() };
        *count -= 1;
        if *count == 0 {
            self.owner.store(0, Ordering::Relaxed);
            // SAFETY: the mutex was locked by this owner's first `lock`, whose guard was forgotten.
            unsafe { self.mutex.force_unlock() };
        }
    }
}

impl<T: Default> Default for ReentrantLock<T> {
    fn default() -> ReentrantLock<T> {
        ReentrantLock::new(T::default())
    }
}

impl<T> From<T> for ReentrantLock<T> {
    fn from(value: T) -> ReentrantLock<T> {
        ReentrantLock::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for ReentrantLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ReentrantLock");
        match self.try_lock() {
            Some(g) => d.field("data", &&*g),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

/// Shared access to a [`ReentrantLock`]'s value; the lock is released when the owner's last
/// guard is dropped. Not `Send`: it belongs to the ULT (or OS thread) that locked.
#[must_use = "if unused the ReentrantLock will immediately unlock"]
pub struct ReentrantLockGuard<'a, T: ?Sized> {
    lock: &'a ReentrantLock<T>,
    /// Not `Send`: the owner is who locked (module docs).
    _not_send: PhantomData<*const ()>,
}

// SAFETY: `&guard` gives `&T` only: shareable when `T` is `Sync`, as std's guard.
unsafe impl<T: ?Sized + Sync> Sync for ReentrantLockGuard<'_, T> {}

impl<T: ?Sized> Deref for ReentrantLockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.lock.data
    }
}

impl<T: ?Sized> Drop for ReentrantLockGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.leave();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for ReentrantLockGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for ReentrantLockGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// The next token; 0 is "no owner".
static NEXT_TOKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn fresh_token() -> u64 {
    NEXT_TOKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

crate::ult_local!(static ULT_TOKEN: u64 = fresh_token());

std::thread_local!(static THREAD_TOKEN: Cell<u64> = const { Cell::new(0) });

/// The caller's owner token (module docs): the running ULT's, or, outside a ULT, the OS thread's.
///
/// In the destructor of a ULT-local value destroyed after the ULT's token (at the ULT's end), a
/// fresh token is drawn for each call: the lock still works there, but does not recognise the
/// ULT as its owner again.
fn current_token() -> u64 {
    let in_ult = crate::slot::current_processor().is_some_and(|p| p.current_ult().is_some());
    if in_ult {
        ULT_TOKEN.try_with(|t| *t).unwrap_or_else(|_| fresh_token())
    } else {
        // A thread-local without a destructor: there in every thread's destructors too.
        THREAD_TOKEN.with(|t| {
            if t.get() == 0 {
                t.set(fresh_token());
            }
            t.get()
        })
    }
}
