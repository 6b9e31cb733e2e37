//! [`Semaphore`]: a counting semaphore whose `acquire` blocks the ULT.

use super::wait::{OnUnwind, SpinGuard, SpinLock, WaitList, WaitNode};
use crate::deadlock::WaitKind;
use std::fmt;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::time::{Duration, Instant};

/// A waiter's `tag` once a release handed it a permit.
const GRANTED: usize = 1;

struct State {
    permits: usize,
    waiters: WaitList,
}

/// A counting semaphore. [`acquire`](Semaphore::acquire) takes a permit, blocking the calling ULT
/// (or parking the OS thread) while none is available; [`release`](Semaphore::release) returns
/// one. Waiters are served in FIFO order: a release hands its permit straight to the first
/// waiter, so a newcomer cannot overtake a waiter.
///
/// ```
/// use elite_rt::sync::Semaphore;
/// use std::sync::Arc;
///
/// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
/// rt.block_on(|| {
///     let sem = Arc::new(Semaphore::new(0));
///     let s2 = sem.clone();
///     let h = elite_rt::spawn(move || {
///         s2.acquire(); // waits for the release below
///         42
///     });
///     sem.release();
///     assert_eq!(h.join().unwrap(), 42);
/// });
/// ```
pub struct Semaphore {
    state: SpinLock<State>,
}

impl Semaphore {
    /// A semaphore with `permits` permits available.
    pub const fn new(permits: usize) -> Semaphore {
        Semaphore { state: SpinLock::new(State { permits, waiters: WaitList::of(WaitKind::Semaphore) }) }
    }

    /// Takes a permit, waiting until one is available.
    #[inline]
    pub fn acquire(&self) {
        self.acquire_until(None);
    }

    /// Takes a permit if one is available right now.
    pub fn try_acquire(&self) -> bool {
        super::charge_budget(|| false);
        let mut s = self.state.lock();
        if s.permits > 0 {
            s.permits -= 1;
            true
        } else {
            false
        }
    }

    /// Takes a permit, waiting at most `dur`; false if none came in time.
    pub fn acquire_timeout(&self, dur: Duration) -> bool {
        self.acquire_until(super::deadline(dur))
    }

    /// Takes a permit and returns a guard that releases it when dropped.
    #[inline]
    pub fn access(&self) -> SemaphorePermit<'_> {
        self.acquire();
        SemaphorePermit { sem: self }
    }

    /// Permits available right now (a snapshot).
    pub fn available_permits(&self) -> usize {
        self.state.lock().permits
    }

    /// Returns one permit: to the first waiter if there is one, else to the pool.
    #[inline]
    pub fn release(&self) {
        let mut s = self.state.lock();
        if s.waiters.is_empty() {
            s.permits += 1;
            return;
        }
        Self::release_to_waiter(s);
    }

    /// [`release`](Semaphore::release) with waiters: the permit goes to the first one still waiting.
    #[cold]
    fn release_to_waiter(mut s: SpinGuard<'_, State>) {
        while let Some(n) = s.waiters.pop_front() {
            n.tag.set(GRANTED);
            if let Some(w) = n.notify() {
                drop(s);
                w.wake();
                return;
            }
            n.tag.set(0); // that waiter timed out first; try the next
        }
        s.permits += 1;
    }

    /// Returns `n` permits (as `n` calls of [`release`](Semaphore::release)).
    pub fn add_permits(&self, n: usize) {
        for _ in 0..n {
            self.release();
        }
    }

    #[inline(always)]
    fn acquire_until(&self, deadline: Option<Instant>) -> bool {
        super::charge_budget(|| self.state.lock().permits == 0);
        let mut s = self.state.lock();
        if s.permits > 0 {
            s.permits -= 1;
            return true;
        }
        self.wait_for_permit(s, deadline)
    }

    /// [`acquire_until`](Semaphore::acquire_until) with no permit available: block until a
    /// release hands one over or the deadline passes. Inlined: a shallow wait (see "Switch depth"
    /// in `sync::wait`); an untimed one only links its node (`WaitNode::block_on`).
    #[inline(always)]
    fn wait_for_permit(&self, s: SpinGuard<'_, State>, deadline: Option<Instant>) -> bool {
        let node = WaitNode::new();
        let unwind = OnUnwind::new(|| self.abandon(&node));
        let notified = match deadline {
            None => {
                node.block_on(s, |s| &mut s.waiters, false);
                true // (untimed: only a release resolves it)
            }
            Some(_) => node.block(s, deadline, |s, n| s.waiters.push_back(n)),
        };
        unwind.disarm();
        if !notified {
            // Timed out: the notify that failed on us left the tag alone; leave the queue.
            self.state.lock().waiters.remove(&node);
        }
        notified
    }

    /// A waiter is unwound (shutdown): leave the queue, or give back the permit it was handed.
    #[cold]
    fn abandon(&self, node: &WaitNode) {
        let mut s = self.state.lock();
        s.waiters.remove(node);
        drop(s);
        if node.tag.get() == GRANTED {
            self.release();
        }
    }
}

// As the `std::sync` types: its state is a count of permits and a queue of waiters, which a panic anywhere leaves consistent (a
// waiter unwound while queued leaves the queue, and passes on a permit it was handed).
impl UnwindSafe for Semaphore {}
impl RefUnwindSafe for Semaphore {}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.state.lock();
        f.debug_struct("Semaphore").field("permits", &s.permits).field("waiters", &s.waiters.len()).finish()
    }
}

/// A permit of a [`Semaphore`], released when dropped.
#[must_use = "the permit is released at once if unused"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.release();
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit").finish_non_exhaustive()
    }
}
