//! [`WaitGroup`]: wait until a count of outstanding tasks drops to zero.

use super::wait::{OnUnwind, SpinLock, WaitList, WaitNode, Wakes};
use crate::deadlock::WaitKind;
use std::fmt;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::time::Duration;

struct State {
    count: usize,
    waiters: WaitList,
}

/// A counter of outstanding work, like Go's `sync.WaitGroup`: [`add`](WaitGroup::add) raises it,
/// [`done`](WaitGroup::done) lowers it, and [`wait`](WaitGroup::wait) blocks the calling ULT (or
/// parks the OS thread) until it is zero.
///
/// ```
/// use elite_rt::sync::WaitGroup;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
/// rt.block_on(|| {
///     let wg = Arc::new(WaitGroup::new());
///     let hits = Arc::new(AtomicUsize::new(0));
///     for _ in 0..100 {
///         wg.add(1);
///         let (wg, hits) = (wg.clone(), hits.clone());
///         elite_rt::spawn(move || {
///             hits.fetch_add(1, Ordering::Relaxed);
///             wg.done();
///         });
///     }
///     wg.wait();
///     assert_eq!(hits.load(Ordering::Relaxed), 100);
/// });
/// ```
pub struct WaitGroup {
    state: SpinLock<State>,
}

impl WaitGroup {
    /// A wait group with count zero.
    pub const fn new() -> WaitGroup {
        WaitGroup { state: SpinLock::new(State { count: 0, waiters: WaitList::of(WaitKind::WaitGroup) }) }
    }

    /// Raises the count by `n`.
    ///
    /// # Panics
    /// If the count would overflow `usize`.
    pub fn add(&self, n: usize) {
        let mut s = self.state.lock();
        match s.count.checked_add(n) {
            Some(c) => s.count = c,
            None => {
                drop(s);
                panic!("WaitGroup::add: the count overflows usize");
            }
        }
    }

    /// Lowers the count by one; at zero every waiter is released.
    ///
    /// # Panics
    /// If the count is already zero (more `done` than `add`): that is a bug in the caller, and
    /// going on would release waiters too early.
    pub fn done(&self) {
        let mut s = self.state.lock();
        if s.count == 0 {
            drop(s);
            panic!("WaitGroup::done called more times than the count added with WaitGroup::add");
        }
        s.count -= 1;
        if s.count > 0 {
            return;
        }
        let mut wakes = Wakes::default();
        while let Some(n) = s.waiters.pop_front() {
            if let Some(w) = n.notify() {
                wakes.push(w);
            }
        }
        drop(s);
        wakes.wake_all();
    }

    /// The current count (a snapshot).
    pub fn count(&self) -> usize {
        self.state.lock().count
    }

    /// Blocks until the count is zero (returns at once if it is).
    #[inline]
    pub fn wait(&self) {
        self.wait_until(None);
    }

    /// Like [`wait`](WaitGroup::wait) but gives up after `dur`; true if the count reached zero.
    pub fn wait_timeout(&self, dur: Duration) -> bool {
        self.wait_until(super::deadline(dur))
    }

    /// Inlined: a shallow wait (see "Switch depth" in `sync::wait`).
    #[inline(always)]
    fn wait_until(&self, deadline: Option<std::time::Instant>) -> bool {
        super::charge_budget(|| self.state.lock().count > 0);
        let s = self.state.lock();
        if s.count == 0 {
            return true;
        }
        let node = WaitNode::new();
        let unwind = OnUnwind::new(|| self.state.lock().waiters.remove(&node));
        let notified = node.block(s, deadline, |s, n| s.waiters.push_back(n));
        unwind.disarm();
        if !notified {
            let mut s = self.state.lock();
            s.waiters.remove(&node);
            return s.count == 0;
        }
        true
    }
}

impl Default for WaitGroup {
    fn default() -> WaitGroup {
        WaitGroup::new()
    }
}

// As the `std::sync` types: its state is a count and a queue of waiters, which a panic anywhere leaves consistent (a waiter unwound
// while queued leaves the queue).
impl UnwindSafe for WaitGroup {}
impl RefUnwindSafe for WaitGroup {}

impl fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroup").field("count", &self.count()).finish()
    }
}
