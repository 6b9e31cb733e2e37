//! Synchronization that blocks ULTs, not processors.
//!
//! The names and semantics follow `std::sync`: [`Mutex`], [`RwLock`], [`Condvar`], [`Barrier`],
//! plus a [`Semaphore`], a [`WaitGroup`], the channels of [`mpsc`] (`channel`, `sync_channel`, with
//! std's disconnection rules) and a bounded multi-consumer channel in [`mpmc`].
//!
//! * Every blocking call blocks only the calling ULT: its processor runs other ULTs meanwhile.
//! * Every primitive also works from a plain OS thread outside the runtime, which then parks; a
//!   program may mix both freely (an OS thread can wait for a ULT and the other way round).
//! * A blocked ULT is bound to the object it waits on (ELiTE section 2.2, figure 2.4). Whoever
//!   releases it pushes it on the wake-up stack of the processor the scheduling policy picks
//!   ([`Hooks::wake_target`](crate::policy::Hooks::wake_target)) and unparks that processor if
//!   it sleeps; when the policy picks the waker's own processor no atomic operation is needed.
//! * Locks are two-phase (ELiTE section 2.3.2): see [`SpinPolicy`].
//!
//! At shutdown, a ULT blocked in any of these is unwound where it waits and leaves the object
//! consistent (it leaves the queue, and hands on a lock or permit it was given).
//!
//! ```
//! use elite_rt::sync::{mpsc, Mutex};
//! use std::sync::Arc;
//!
//! let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
//! let (sum, n) = rt.block_on(|| {
//!     let (tx, rx) = mpsc::channel();
//!     let count = Arc::new(Mutex::new(0));
//!     for i in 0..10u64 {
//!         let (tx, count) = (tx.clone(), count.clone());
//!         elite_rt::spawn(move || {
//!             *count.lock().unwrap() += 1;
//!             tx.send(i).unwrap();
//!         });
//!     }
//!     drop(tx);
//!     let sum: u64 = rx.iter().sum(); // ends when every sender is gone
//!     let n = *count.lock().unwrap();
//!     (sum, n)
//! });
//! assert_eq!((sum, n), (45, 10));
//! ```

mod barrier;
mod chan;
mod condvar;
mod mutex;
mod rwlock;
mod semaphore;
pub(crate) mod wait;
mod waitgroup;

pub use barrier::{Barrier, BarrierWaitResult};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use mutex::{Mutex, MutexGuard, MAX_LOSSES};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use waitgroup::WaitGroup;

/// Multi-producer, single-consumer channels with `std::sync::mpsc`'s interface and semantics.
pub mod mpsc {
    pub use super::chan::mpsc::{
        channel, sync_channel, IntoIter, Iter, Receiver, RecvError, RecvTimeoutError, SendError, Sender,
        SyncSender, TryIter, TryRecvError, TrySendError,
    };
}

/// A bounded multi-producer, multi-consumer channel: both ends can be cloned.
pub mod mpmc {
    pub use super::chan::mpmc::{bounded, Receiver, Sender};
    pub use super::chan::mpsc::{RecvError, RecvTimeoutError, SendError, TryRecvError, TrySendError};
}

use crate::processor::current_processor;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How a waiter on a contended lock ([`Mutex`], [`RwLock`]) waits: ELiTE's two-phase locking.
///
/// Set per runtime with [`RuntimeBuilder::spin_policy`](crate::RuntimeBuilder::spin_policy); OS
/// threads outside any runtime use the default, `Adaptive`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpinPolicy {
    /// ELiTE's rule: each lock remembers how long it was held in its last 8 (measured)
    /// acquisitions; when that average exceeds half the cost of a context switch (measured once
    /// per process, when the first runtime starts) a waiter blocks at once, otherwise it spins
    /// [`ADAPTIVE_SPIN_ROUNDS`] rounds with exponential backoff and then blocks.
    #[default]
    Adaptive,
    /// Always spin this many rounds (exponential backoff, at most 64 pause hints a round), then
    /// block, whatever the hold times.
    Fixed(u32),
    /// Always block at once.
    Block,
}

/// Spin rounds of [`SpinPolicy::Adaptive`] for a lock held briefly: 1 + 2 + 4 + 8 pause hints.
pub const ADAPTIVE_SPIN_ROUNDS: u32 = 4;

/// Spin rounds for a waiter on a lock whose average hold is `avg_hold` ticks, under the calling
/// runtime's policy.
#[inline]
pub(crate) fn spin_rounds(avg_hold: u64) -> u32 {
    let policy = current_processor().map(|p| p.shared.config.spin_policy).unwrap_or_default();
    match policy {
        SpinPolicy::Block => 0,
        SpinPolicy::Fixed(n) => n,
        SpinPolicy::Adaptive => {
            if avg_hold > switch_cost().threshold_ticks {
                0
            } else {
                ADAPTIVE_SPIN_ROUNDS
            }
        }
    }
}

/// Waits `2^round` (at most 64) pause hints.
#[inline]
pub(crate) fn backoff(round: u32) {
    for _ in 0..1u32 << round.min(6) {
        std::hint::spin_loop();
    }
}

/// A cheap time stamp in ticks (the TSC on x86-64; nanoseconds since start-up elsewhere).
#[inline]
pub(crate) fn ticks() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: `rdtsc` has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    // (Miri, which runs the primitives from OS threads in `.ci/run`, has no `rdtsc`.)
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// The measured cost of a context switch, and the spin threshold derived from it.
#[derive(Clone, Copy, Debug)]
pub struct SwitchCost {
    /// One switch to another thread and back to the scheduler's stack (a resume and a suspend of
    /// a stackful coroutine), in nanoseconds.
    pub switch_ns: f64,
    /// The same in time-stamp ticks.
    pub switch_ticks: u64,
    /// Half of `switch_ticks`: the adaptive policy's threshold on a lock's average hold time.
    pub threshold_ticks: u64,
}

/// The context-switch cost measured on this machine (once per process; the first runtime to
/// start measures it, taking well under a millisecond).
pub fn switch_cost() -> SwitchCost {
    static COST: OnceLock<SwitchCost> = OnceLock::new();
    *COST.get_or_init(measure_switch)
}

/// Under Miri, which cannot switch stacks: a nominal cost, so that the primitives run there.
#[cfg(miri)]
fn measure_switch() -> SwitchCost {
    SwitchCost { switch_ns: 5.0, switch_ticks: 5, threshold_ticks: 2 }
}

#[cfg(not(miri))]
fn measure_switch() -> SwitchCost {
    use corosensei::{stack::DefaultStack, Coroutine, CoroutineResult};
    let stack = DefaultStack::new(16 * 1024).expect("a 16 KiB stack for the switch measurement");
    let mut co = Coroutine::with_stack(stack, |y: &corosensei::Yielder<(), ()>, ()| loop {
        y.suspend(());
    });
    let mut best = (f64::MAX, u64::MAX);
    for _ in 0..5 {
        const N: u32 = 2000;
        let (t0, k0) = (Instant::now(), ticks());
        for _ in 0..N {
            if let CoroutineResult::Return(()) = co.resume(()) {
                break;
            }
        }
        let (ns, tk) = (t0.elapsed(), ticks().wrapping_sub(k0));
        let per = (ns.as_nanos() as f64 / f64::from(N), tk / u64::from(N));
        if per.0 < best.0 {
            best = per;
        }
    }
    let switch_ticks = best.1.max(1);
    SwitchCost { switch_ns: best.0, switch_ticks, threshold_ticks: switch_ticks / 2 }
}

/// Converts a timeout into a deadline (saturating: a huge timeout waits "forever").
pub(crate) fn deadline(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}
