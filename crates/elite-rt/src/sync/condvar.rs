//! [`Condvar`]: waits for a condition under a [`Mutex`](super::Mutex), blocking the ULT.

use super::wait::{OnUnwind, SpinLock, WaitList, WaitNode, Wakes};
use super::MutexGuard;
use crate::deadlock::WaitKind;
use std::fmt;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::{LockResult, PoisonError};
use std::time::{Duration, Instant};

/// A condition variable with `std::sync::Condvar`'s interface: `wait` releases the mutex, blocks
/// the calling ULT (or parks the OS thread) until notified, and takes the mutex again.
///
/// As with std, a wait may return without a notification (for example when a waiter that was
/// notified is cancelled by a shutdown and passes its notification on), so wait in a loop or use
/// [`Condvar::wait_while`].
///
/// ```
/// use elite_rt::sync::{Condvar, Mutex};
/// use std::sync::Arc;
///
/// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
/// rt.block_on(|| {
///     let pair = Arc::new((Mutex::new(false), Condvar::new()));
///     let p2 = pair.clone();
///     elite_rt::spawn(move || {
///         *p2.0.lock().unwrap() = true;
///         p2.1.notify_one();
///     });
///     let (lock, cvar) = &*pair;
///     let ready = cvar.wait_while(lock.lock().unwrap(), |ready| !*ready).unwrap();
///     assert!(*ready);
/// });
/// ```
pub struct Condvar {
    waiters: SpinLock<WaitList>,
}

/// Whether a timed wait on a [`Condvar`] returned because its timeout elapsed.
#[derive(Debug, PartialEq, Eq, Copy, Clone)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// True if the wait ended because the timeout elapsed.
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

impl Condvar {
    /// A condition variable with no waiters.
    pub const fn new() -> Condvar {
        Condvar { waiters: SpinLock::new(WaitList::of(WaitKind::Condvar)) }
    }

    /// Releases the guard's mutex, blocks until notified, and locks the mutex again.
    #[inline]
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        self.wait_until(guard, None).map(|(g, _)| g).map_err(|e| PoisonError::new(e.into_inner().0))
    }

    /// Waits while `condition` holds for the protected value (checked before the first wait and
    /// after every wake-up).
    pub fn wait_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> LockResult<MutexGuard<'a, T>>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut *guard) {
            guard = self.wait(guard)?;
        }
        Ok(guard)
    }

    /// Like [`wait`](Condvar::wait), but gives up after `dur`.
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        dur: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        self.wait_until(guard, super::deadline(dur))
    }

    /// Like [`wait_while`](Condvar::wait_while), but gives up after `dur` in total; the result
    /// says whether it timed out (the condition may still hold then).
    pub fn wait_timeout_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        dur: Duration,
        mut condition: F,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)>
    where
        F: FnMut(&mut T) -> bool,
    {
        let deadline = super::deadline(dur);
        loop {
            if !condition(&mut *guard) {
                return Ok((guard, WaitTimeoutResult(false)));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok((guard, WaitTimeoutResult(true)));
            }
            guard = match self.wait_until(guard, deadline) {
                Ok((g, _)) => g,
                Err(e) => return Err(PoisonError::new((e.into_inner().0, WaitTimeoutResult(true)))),
            };
        }
    }

    /// The wait of every `wait*` method; inlined, so that the untimed one is a shallow wait (see
    /// "Switch depth" in `sync::wait`).
    #[inline(always)]
    fn wait_until<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Option<Instant>,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let mutex = guard.mutex();
        let node = WaitNode::new();
        let unwind = OnUnwind::new(|| self.abandon(&node));
        // Linked before the mutex is released (the guard is dropped after the link, and after the
        // list's lock): a notify after our caller's check cannot be lost.
        let notified = node.block(self.waiters.lock(), deadline, move |list, n| {
            list.push_back(n);
            guard
        });
        unwind.disarm();
        if !notified {
            self.waiters.lock().remove(&node);
        }
        let timed_out = WaitTimeoutResult(!notified);
        match mutex.lock() {
            Ok(g) => Ok((g, timed_out)),
            Err(e) => Err(PoisonError::new((e.into_inner(), timed_out))),
        }
    }

    /// A waiter is unwound (shutdown): leave the queue, or pass a notification it consumed on.
    #[cold]
    fn abandon(&self, node: &WaitNode) {
        let mut list = self.waiters.lock();
        let was_linked = node.is_linked();
        list.remove(node);
        drop(list);
        if !was_linked {
            self.notify_one();
        }
    }

    /// Wakes one waiter, if any.
    pub fn notify_one(&self) {
        let mut list = self.waiters.lock();
        while let Some(n) = list.pop_front() {
            if let Some(w) = n.notify() {
                drop(list);
                w.wake();
                return;
            }
        }
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        let mut wakes = Wakes::default();
        let mut list = self.waiters.lock();
        while let Some(n) = list.pop_front() {
            if let Some(w) = n.notify() {
                wakes.push(w);
            }
        }
        drop(list);
        wakes.wake_all();
    }
}

// As std's `Condvar`: its state is only its queue of waiters, which a panic anywhere leaves
// consistent (a waiter unwound while queued leaves the queue).
impl UnwindSafe for Condvar {}
impl RefUnwindSafe for Condvar {}

impl Default for Condvar {
    fn default() -> Condvar {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}
