//! [`RwLock`]: many readers or one writer, blocking ULTs.
//!
//! # Protocol (all under the internal lock)
//!
//! * `read`: granted if no writer holds the lock and none waits; otherwise the reader queues.
//! * `write`: granted if nobody holds the lock; otherwise the writer queues.
//! * The last reader out hands the lock to the first queued writer.
//! * A writer's unlock hands the lock to every queued reader if there are any, else to the next
//!   writer.
//! * A writer's downgrade (`RwLockWriteGuard::downgrade`) makes it a reader in the same critical
//!   section of the internal lock (no writer can come between) and hands the lock to every queued
//!   reader, as an unlock would; queued writers go on waiting for the last reader out.
//!
//! Handing over (the waiter is granted the lock before it is woken; `tag` says so) keeps the order
//! fair: readers that arrive while a writer waits queue behind it, and the readers queued during a
//! write all go before the next writer. Neither side can starve.

use super::wait::{OnUnwind, SpinLock, WaitList, WaitNode, Wakes};
use super::Spinner;
use crate::atomics::{AtomicBool, Ordering};
use crate::deadlock::WaitKind;
use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::ptr::NonNull;
use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};

const GRANTED: usize = 1;

struct State {
    readers: usize,
    writer: bool,
    read_waiters: WaitList,
    write_waiters: WaitList,
}

/// A reader-writer lock with `std::sync::RwLock`'s interface (poisoning by a panicking writer
/// included), blocking the calling ULT (or parking the OS thread) while it waits.
///
/// Contended, a caller first spins for the lock as the runtime's
/// [`SpinPolicy`](super::SpinPolicy) says (the lock keeps no hold times, so
/// `Adaptive` spins its short default), then queues. See the module source for the fair
/// hand-over protocol.
///
/// ```
/// use elite_rt::sync::RwLock;
/// use std::sync::Arc;
///
/// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
/// rt.block_on(|| {
///     let lock = Arc::new(RwLock::new(vec![1, 2, 3]));
///     let l2 = lock.clone();
///     elite_rt::spawn(move || l2.write().unwrap().push(4)).join().unwrap();
///     assert_eq!(lock.read().unwrap().len(), 4);
/// });
/// ```
pub struct RwLock<T: ?Sized> {
    raw: Raw,
    data: UnsafeCell<T>,
}

/// The lock without its value: the queueing state and the poison flag. Not generic, so that a
/// read guard can hold it beside a pointer to the value (which makes the guard covariant in `T`,
/// as std's is) and its code is not repeated for every `T`.
struct Raw {
    state: SpinLock<State>,
    poison: AtomicBool,
}

// SAFETY: as std's RwLock: writers need T: Send, concurrent readers share &T (T: Sync).
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

// As std's: a writer that panics poisons the lock, and every later `read` or `write` says so, so
// a broken invariant cannot be observed by mistake after `catch_unwind`; whatever `T` is, the lock
// may be used across that boundary.
impl<T: ?Sized> UnwindSafe for RwLock<T> {}
impl<T: ?Sized> RefUnwindSafe for RwLock<T> {}

impl<T> RwLock<T> {
    /// A new unlocked lock holding `value`.
    pub const fn new(value: T) -> RwLock<T> {
        RwLock {
            raw: Raw {
                state: SpinLock::new(State {
                    readers: 0,
                    writer: false,
                    read_waiters: WaitList::of(WaitKind::RwLockRead),
                    write_waiters: WaitList::of(WaitKind::RwLockWrite),
                }),
                poison: AtomicBool::new(false),
            },
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the lock and returns its value (`Err` with the value if poisoned).
    pub fn into_inner(self) -> LockResult<T> {
        let poisoned = self.raw.poison.load(Ordering::Relaxed);
        let v = self.data.into_inner();
        if poisoned {
            Err(PoisonError::new(v))
        } else {
            Ok(v)
        }
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Shared access; waits while a writer holds the lock or waits for it.
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        super::charge_budget(|| {
            let s = self.raw.state.lock();
            s.writer || !s.write_waiters.is_empty()
        });
        self.raw.read();
        self.read_guard()
    }

    /// Exclusive access; waits while anyone holds the lock.
    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        super::charge_budget(|| {
            let s = self.raw.state.lock();
            s.writer || s.readers > 0
        });
        self.raw.write();
        self.write_guard()
    }

    /// Shared access if it can be had right now.
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        super::charge_budget(|| false);
        self.try_read_uncharged()
    }

    /// [`try_read`](RwLock::try_read) without charging the budget: `Debug` takes the lock this
    /// way, so that formatting (under the lock of `stdout`, say) never yields.
    fn try_read_uncharged(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        if self.raw.try_read_now() {
            self.read_guard().map_err(TryLockError::from)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Exclusive access if it can be had right now.
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        super::charge_budget(|| false);
        if self.raw.try_write_now() {
            self.write_guard().map_err(TryLockError::from)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Whether a writer panicked while holding the lock.
    pub fn is_poisoned(&self) -> bool {
        self.raw.poison.load(Ordering::Relaxed)
    }

    /// Clears the poisoned state.
    pub fn clear_poison(&self) {
        self.raw.poison.store(false, Ordering::Relaxed);
    }

    /// The value, through exclusive access.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        let poisoned = self.raw.poison.load(Ordering::Relaxed);
        let v = self.data.get_mut();
        if poisoned {
            Err(PoisonError::new(v))
        } else {
            Ok(v)
        }
    }

    /// A read guard for the caller, who holds the lock shared.
    fn read_guard(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        // SAFETY: `UnsafeCell::get` never returns null.
        let data = unsafe { NonNull::new_unchecked(self.data.get()) };
        let g = RwLockReadGuard { data, raw: &self.raw };
        if self.is_poisoned() {
            Err(PoisonError::new(g))
        } else {
            Ok(g)
        }
    }

    /// A write guard for the caller, who holds the lock alone.
    fn write_guard(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        let g = RwLockWriteGuard { lock: self, panicking: std::thread::panicking() };
        if self.is_poisoned() {
            Err(PoisonError::new(g))
        } else {
            Ok(g)
        }
    }
}

impl Raw {
    /// Takes the lock shared (see [`RwLock::read`]).
    #[inline]
    fn read(&self) {
        if !self.try_read_now() {
            // No hold times here: spin for as long as a context switch costs (see `Spinner`).
            let mut spin = Spinner::new(0);
            while spin.again() {
                if self.try_read_now() {
                    return;
                }
            }
            self.block(false);
        }
    }

    /// Takes the lock alone (see [`RwLock::write`]).
    #[inline]
    fn write(&self) {
        if !self.try_write_now() {
            // No hold times here: spin for as long as a context switch costs (see `Spinner`).
            let mut spin = Spinner::new(0);
            while spin.again() {
                if self.try_write_now() {
                    return;
                }
            }
            self.block(true);
        }
    }

    fn try_read_now(&self) -> bool {
        let mut s = self.state.lock();
        if !s.writer && s.write_waiters.is_empty() {
            s.readers += 1;
            true
        } else {
            false
        }
    }

    fn try_write_now(&self) -> bool {
        let mut s = self.state.lock();
        if !s.writer && s.readers == 0 {
            s.writer = true;
            true
        } else {
            false
        }
    }

    /// Queues as a reader or writer until an unlock grants the lock.
    fn block(&self, write: bool) {
        let node = WaitNode::new();
        let mut s = self.state.lock();
        if write && !s.writer && s.readers == 0 {
            s.writer = true;
            return;
        }
        if !write && !s.writer && s.write_waiters.is_empty() {
            s.readers += 1;
            return;
        }
        let unwind = OnUnwind::new(|| {
            let mut s = self.state.lock();
            if node.is_linked() {
                if write {
                    s.write_waiters.remove(&node);
                    // Readers queued only because we waited may go now.
                    if !s.writer && s.write_waiters.is_empty() {
                        let wakes = Self::grant_readers(&mut s);
                        drop(s);
                        wakes.wake_all();
                    }
                } else {
                    s.read_waiters.remove(&node);
                }
                return;
            }
            drop(s);
            if node.tag.get() == GRANTED {
                if write {
                    self.write_unlock();
                } else {
                    self.read_unlock();
                }
            }
        });
        node.block_on(s, |s| if write { &mut s.write_waiters } else { &mut s.read_waiters }, false);
        unwind.disarm();
    }

    fn grant_readers(s: &mut State) -> Wakes {
        let mut wakes = Wakes::default();
        while let Some(n) = s.read_waiters.pop_front() {
            n.tag.set(GRANTED);
            s.readers += 1;
            if let Some(w) = n.notify() {
                wakes.push(w);
            }
        }
        wakes
    }

    fn read_unlock(&self) {
        let mut s = self.state.lock();
        s.readers -= 1;
        if s.readers > 0 {
            return;
        }
        if let Some(n) = s.write_waiters.pop_front() {
            n.tag.set(GRANTED);
            s.writer = true;
            let w = n.notify();
            drop(s);
            if let Some(w) = w {
                w.wake();
            }
        }
    }

    fn write_unlock(&self) {
        let mut s = self.state.lock();
        s.writer = false;
        let wakes = if !s.read_waiters.is_empty() {
            Self::grant_readers(&mut s)
        } else if let Some(n) = s.write_waiters.pop_front() {
            n.tag.set(GRANTED);
            s.writer = true;
            let mut wakes = Wakes::default();
            if let Some(w) = n.notify() {
                wakes.push(w);
            }
            wakes
        } else {
            Wakes::default()
        };
        drop(s);
        wakes.wake_all();
    }

    /// The writer becomes a reader, and every queued reader joins it (module docs).
    fn downgrade(&self) {
        let mut s = self.state.lock();
        debug_assert!(s.writer && s.readers == 0);
        s.writer = false;
        s.readers = 1;
        let wakes = Self::grant_readers(&mut s);
        drop(s);
        wakes.wake_all();
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> RwLock<T> {
        RwLock::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read_uncharged() {
            Ok(g) => d.field("data", &&*g),
            Err(TryLockError::Poisoned(e)) => d.field("data", &&**e.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.is_poisoned()).finish_non_exhaustive()
    }
}

/// Shared access to an [`RwLock`]'s value.
///
/// Covariant in `T`, as std's: a guard of an `RwLock<&'static str>` may be used where one of a
/// `&'a str` is expected.
///
/// ```
/// use elite_rt::sync::{RwLock, RwLockReadGuard};
///
/// fn longer<'a>(g: RwLockReadGuard<'_, &'a str>, other: &'a str) -> &'a str {
///     if g.len() >= other.len() { *g } else { other }
/// }
///
/// let lock: RwLock<&'static str> = RwLock::new("static");
/// let local = String::from("a local string");
/// // The guard's `&'static str` shortens to the local string's lifetime.
/// assert_eq!(longer(lock.read().unwrap(), &local), "a local string");
/// ```
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    /// The value, shared while the guard lives (a pointer rather than `&'a RwLock<T>`, which
    /// would make the guard invariant in `T`).
    data: NonNull<T>,
    raw: &'a Raw,
}

/// Exclusive access to an [`RwLock`]'s value.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    panicking: bool,
}

// SAFETY: a read guard hands out &T only.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: as for MutexGuard: unlocking from another OS thread is part of the protocol.
unsafe impl<T: ?Sized + Sync> Send for RwLockReadGuard<'_, T> {}
// SAFETY: &guard gives &T.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}
// SAFETY: as above; moving the guard moves exclusive access to T.
unsafe impl<T: ?Sized + Send + Sync> Send for RwLockWriteGuard<'_, T> {}

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// Turns the write guard into a read guard without unlocking: no writer can take the lock in
    /// between, so the reader sees what it wrote. Readers queued for the lock are let in at once
    /// (they share it with the returned guard); writers queued go on waiting until every reader
    /// has left, and while one waits, readers that arrive after the downgrade queue behind it
    /// (as they would behind any waiting writer). As std's `RwLockWriteGuard::downgrade`: an associated function (call it as
    /// `RwLockWriteGuard::downgrade(guard)`), which cannot fail. A panic since the write guard was
    /// taken poisons the lock, as dropping the write guard would.
    ///
    /// ```
    /// use elite_rt::sync::{RwLock, RwLockWriteGuard};
    /// use std::sync::Arc;
    ///
    /// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
    /// rt.block_on(|| {
    ///     let config = Arc::new(RwLock::new(String::from("old")));
    ///     let mut w = config.write().unwrap();
    ///     // A writer that arrives now waits for us...
    ///     let c2 = config.clone();
    ///     let other = elite_rt::spawn(move || c2.write().unwrap().push_str(", overwritten"));
    ///     *w = String::from("new");
    ///     let r = RwLockWriteGuard::downgrade(w);
    ///     // ...and goes on waiting while we read: what we read is what we wrote.
    ///     elite_rt::yield_now();
    ///     assert_eq!(*r, "new");
    ///     drop(r);
    ///     other.join().unwrap();
    ///     assert_eq!(*config.read().unwrap(), "new, overwritten");
    /// });
    /// ```
    pub fn downgrade(s: Self) -> RwLockReadGuard<'a, T> {
        let lock = s.lock;
        let was_panicking = s.panicking;
        std::mem::forget(s); // its unlock is the downgrade below
        if !was_panicking && std::thread::panicking() {
            lock.raw.poison.store(true, Ordering::Relaxed);
        }
        lock.raw.downgrade();
        // SAFETY: `UnsafeCell::get` never returns null.
        let data = unsafe { NonNull::new_unchecked(lock.data.get()) };
        RwLockReadGuard { data, raw: &lock.raw }
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a read guard means no writer holds the lock, and the lock (with the value)
        // outlives the guard's `'a`.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the write guard holds the lock alone.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the write guard holds the lock alone.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.raw.read_unlock();
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        if !self.panicking && std::thread::panicking() {
            self.lock.raw.poison.store(true, Ordering::Relaxed);
        }
        self.lock.raw.write_unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
