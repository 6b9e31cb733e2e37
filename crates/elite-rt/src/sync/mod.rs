//! Synchronization that blocks ULTs, not processors.
//!
//! The names and semantics follow `std::sync`: [`Mutex`], [`RwLock`], [`Condvar`], [`Barrier`],
//! [`Once`], [`OnceLock`], [`LazyLock`], [`ReentrantLock`], plus a [`Semaphore`], a [`WaitGroup`],
//! the channels of [`mpsc`] (`channel`, `sync_channel`, with std's disconnection rules) and the
//! multi-consumer channels of [`mpmc`], with [`Select`] and [`select!`](crate::select) (in
//! crossbeam-channel's style) to receive from whichever of several channels is ready first.
//!
//! * Every blocking call blocks only the calling ULT: its processor runs other ULTs meanwhile.
//! * Every primitive also works from a plain OS thread outside the runtime, which then parks; a
//!   program may mix both freely (an OS thread can wait for a ULT and the other way round).
//! * A blocked ULT is bound to the object it waits on (ELiTE section 2.2, figure 2.4). Whoever
//!   releases it pushes it on the wake-up stack of the processor the scheduling policy picks
//!   ([`Hooks::wake_target`](crate::policy::Hooks::wake_target)) and unparks that processor if
//!   it sleeps; when the policy picks the waker's own processor no atomic operation is needed.
//! * Locks are two-phase (ELiTE section 2.3.2): see [`SpinPolicy`].
//! * Every call that takes something (a value, a lock, a permit), blocking or not, charges the
//!   calling ULT's cooperative budget, and yields first when the budget is spent, unless it is
//!   about to block anyway ([`RuntimeBuilder::coop_budget`](crate::RuntimeBuilder::coop_budget));
//!   releases never do.
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
pub(crate) mod bias;
mod chan;
mod condvar;
pub(crate) mod host;
pub(crate) mod lock_word;
pub(crate) mod mutex;
mod once;
mod once_lock;
mod reentrant;
mod rwlock;
mod select;
mod semaphore;
pub(crate) mod wait;
mod waitgroup;

pub use barrier::{Barrier, BarrierWaitResult};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use host::{host_costs, line_measurements, switch_cost, HostCosts, SwitchCost, LINE_COSTS_MAX_AGE};
pub use mutex::{Mutex, MutexGuard, MAX_LOSSES};
pub use once::{Once, OnceState};
pub use once_lock::{LazyLock, OnceLock};
pub use reentrant::{ReentrantLock, ReentrantLockGuard};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use select::{Select, SelectReceiver, SelectTimeoutError, SelectedOperation, TrySelectError};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use waitgroup::WaitGroup;

/// Multi-producer, single-consumer channels with `std::sync::mpsc`'s interface and semantics.
pub mod mpsc {
    pub use super::chan::mpsc::{
        channel, sync_channel, IntoIter, Iter, Receiver, RecvError, RecvTimeoutError, SendError, Sender,
        SyncSender, TryIter, TryRecvError, TrySendError,
    };
    pub use super::chan::SendTimeoutError;
}

/// Multi-producer, multi-consumer channels, unbounded ([`channel`](mpmc::channel)) or bounded
/// ([`sync_channel`](mpmc::sync_channel), [`bounded`](mpmc::bounded)): both ends can be cloned,
/// and each value goes to one receiver. The interface of std's (unstable) `std::sync::mpmc`.
pub mod mpmc {
    pub use super::chan::mpmc::{bounded, channel, sync_channel, IntoIter, Iter, Receiver, Sender, TryIter};
    pub use super::chan::mpsc::{RecvError, RecvTimeoutError, SendError, TryRecvError, TrySendError};
    pub use super::chan::SendTimeoutError;
}

use crate::slot::current_processor;
use std::time::{Duration, Instant};

/// Charges one operation to the running ULT's cooperative budget (`processor::budget`), at the
/// entry of an operation that takes something (a value, a lock, a permit), before it takes any
/// lock of its own; yields first when the budget is spent, unless `would_block` (asked only
/// then) says the operation is about to block anyway.
#[inline(always)]
pub(crate) fn charge_budget(would_block: impl FnOnce() -> bool) {
    let _ = crate::processor::budget::charge(current_processor(), would_block);
}

/// How a waiter on a contended lock ([`Mutex`], [`RwLock`]) waits: ELiTE's two-phase locking.
///
/// Set per runtime with [`RuntimeBuilder::spin_policy`](crate::RuntimeBuilder::spin_policy); OS
/// threads outside any runtime use the default, `Adaptive`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpinPolicy {
    /// ELiTE's rule (section 2.3.2): each lock remembers how long it was held in its last 8
    /// (measured) acquisitions; when that average exceeds half the cost of a context switch
    /// ([`switch_cost`]: a coroutine round trip measured when the first runtime starts, plus the
    /// running average of the wake-ups of parked processors, see [`HostCosts`]) a waiter blocks at
    /// once, otherwise it spins with exponential backoff for as long as a context switch costs (and
    /// at least [`ADAPTIVE_SPIN_ROUNDS`] rounds), then blocks.
    ///
    /// The spin budget is Lim and Agarwal's two-phase rule that ELiTE cites: polling for as long as
    /// blocking would cost never waits more than twice as long as the better of the two choices.
    ///
    /// In a runtime of one processor a ULT spins only those fewest rounds: a holder that is a ULT
    /// of the same processor cannot run, and so release the lock, while the waiter spins.
    #[default]
    Adaptive,
    /// Always spin this many rounds (exponential backoff, at most 64 pause hints a round), then
    /// block, whatever the hold times.
    Fixed(u32),
    /// Always block at once.
    Block,
}

/// The fewest spin rounds of [`SpinPolicy::Adaptive`] for a lock held briefly (1 + 2 + 4 + 8 pause
/// hints); it spins on past them while its time budget, one context switch, lasts.
pub const ADAPTIVE_SPIN_ROUNDS: u32 = 4;

/// The spin phase of one wait on a two-phase lock.
pub(crate) struct Spinner {
    /// Rounds done so far.
    round: u32,
    /// Rounds allowed (`u32::MAX`: until `until`).
    rounds: u32,
    /// Time stamp after which an adaptive spin stops, taken when it has done
    /// `ADAPTIVE_SPIN_ROUNDS` rounds (0 before).
    until: u64,
}

impl Spinner {
    /// The spin phase for a waiter on a lock whose average hold is `avg_hold` ticks, under the
    /// calling runtime's policy.
    #[inline]
    pub(crate) fn new(avg_hold: u64) -> Spinner {
        crate::processor::decision_point();
        let (policy, alone) = current_processor()
            .map(|p| (p.shared.config.spin_policy, p.shared.processors.len() == 1))
            .unwrap_or_default();
        let rounds = match policy {
            SpinPolicy::Block => 0,
            SpinPolicy::Fixed(n) => n,
            // A ULT holder on the only processor cannot release the lock while this spins.
            SpinPolicy::Adaptive if alone => ADAPTIVE_SPIN_ROUNDS,
            SpinPolicy::Adaptive if avg_hold > host::switch_ticks() / 2 => 0,
            SpinPolicy::Adaptive => u32::MAX,
        };
        Spinner { round: 0, rounds, until: 0 }
    }

    /// Whether to try the lock (again): the first call answers at once, later ones wait one round
    /// of backoff first; false when the spin phase is over (block now).
    #[inline]
    pub(crate) fn again(&mut self) -> bool {
        if self.round >= self.rounds {
            return false;
        }
        if self.round > 0 {
            backoff(self.round - 1);
            if self.rounds == u32::MAX && self.round >= ADAPTIVE_SPIN_ROUNDS {
                // The budget starts after the fewest rounds (most waits end before: no time stamp).
                let now = ticks();
                if self.until == 0 {
                    self.until = now.wrapping_add(host::switch_ticks());
                } else if now > self.until {
                    return false;
                }
            }
        }
        self.round += 1;
        true
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
        // std's cell: its initialiser never switches, so a caller can only wait (a moment) for
        // an initialiser running on another OS thread, never for a ULT of its own processor.
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Converts a timeout into a deadline (saturating: a huge timeout waits "forever").
pub(crate) fn deadline(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}
