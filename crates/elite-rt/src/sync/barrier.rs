//! [`Barrier`]: lets a fixed number of threads meet; the last to arrive is the leader.

use super::wait::{OnUnwind, SpinGuard, SpinLock, WaitList, WaitNode, Wakes};
use crate::deadlock::WaitKind;
use std::fmt;
use std::panic::{RefUnwindSafe, UnwindSafe};

struct State {
    arrived: usize,
    generation: u64,
    waiters: WaitList,
}

/// A barrier with `std::sync::Barrier`'s interface: [`wait`](Barrier::wait) blocks the calling
/// ULT (or parks the OS thread) until `n` callers have arrived, then releases all of them; exactly
/// one of each round is told it is the leader. The barrier can be used again at once.
///
/// ```
/// use elite_rt::sync::Barrier;
/// use std::sync::Arc;
///
/// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
/// let leaders = rt.block_on(|| {
///     let b = Arc::new(Barrier::new(10));
///     let hs: Vec<_> = (0..10)
///         .map(|_| {
///             let b = b.clone();
///             elite_rt::spawn(move || b.wait().is_leader())
///         })
///         .collect();
///     hs.into_iter().map(|h| h.join().unwrap() as usize).sum::<usize>()
/// });
/// assert_eq!(leaders, 1);
/// ```
pub struct Barrier {
    n: usize,
    state: SpinLock<State>,
}

/// What [`Barrier::wait`] tells each caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// True for exactly one caller of each round: the last to arrive.
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl Barrier {
    /// A barrier for `n` threads (0 acts as 1, as with std).
    pub const fn new(n: usize) -> Barrier {
        Barrier {
            n,
            state: SpinLock::new(State {
                arrived: 0,
                generation: 0,
                waiters: WaitList::of(WaitKind::Barrier),
            }),
        }
    }

    /// Waits until all `n` have arrived.
    ///
    /// Inlined, with the leader's release out of line: the others' wait is a shallow one (see
    /// "Switch depth" in `sync::wait`).
    #[inline]
    pub fn wait(&self) -> BarrierWaitResult {
        let mut s = self.state.lock();
        s.arrived += 1;
        if s.arrived >= self.n {
            Self::release_round(s);
            return BarrierWaitResult(true);
        }
        let node = WaitNode::new();
        let unwind = OnUnwind::new(|| {
            // Shutdown unwinds us: leave the round we had joined.
            let mut s = self.state.lock();
            if node.is_linked() {
                s.waiters.remove(&node);
                s.arrived -= 1;
            }
        });
        node.block_on(s, |s| &mut s.waiters, false);
        unwind.disarm();
        BarrierWaitResult(false)
    }
}

impl Barrier {
    /// The last arrival (the leader), under the lock `s`: start the next round and wake every
    /// waiter of this one.
    #[inline(never)]
    fn release_round(mut s: SpinGuard<'_, State>) {
        s.arrived = 0;
        s.generation += 1;
        let mut wakes = Wakes::default();
        while let Some(node) = s.waiters.pop_front() {
            // Barrier waits have no deadline, so every notify succeeds.
            if let Some(w) = node.notify() {
                wakes.push(w);
            }
        }
        drop(s);
        wakes.wake_all();
    }
}

// As std's `Barrier`: its state is a count and a queue of waiters, which a panic anywhere leaves
// consistent (a waiter unwound while queued leaves its round).
impl UnwindSafe for Barrier {}
impl RefUnwindSafe for Barrier {}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier").field("n", &self.n).finish_non_exhaustive()
    }
}
