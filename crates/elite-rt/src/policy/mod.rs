//! Scheduling policies: the narrow trait the processor loop consults, one file per policy.
//!
//! The queues, pools and switch code never ask which policy is active; they call these hooks at the
//! points DESIGN §5 names: where a new ULT starts, the key of a ULT entering a runqueue, what to
//! record when a run ends, where a woken ULT goes, and how much a thief takes. A policy is chosen at
//! run time on [`RuntimeBuilder::policy`](crate::RuntimeBuilder::policy).
//!
//! This release ships [`NoAffinity`]; the cache-affinity policies of ELiTE section 3.1 come next.

mod no_affinity;

pub use no_affinity::NoAffinity;

use std::fmt::Debug;

/// What a policy may read about a ULT.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct UltInfo {
    /// The ULT's id.
    pub id: u64,
    /// The processor it last ran on (its spawner's, before its first run).
    pub last_processor: usize,
}

/// A scheduling policy.
///
/// Every hook has a cheap default except [`Policy::priority`]; hooks run on the scheduler's hot
/// paths and must not block.
pub trait Policy: Send + Sync + Debug + 'static {
    /// The policy's name, as accepted by the bench command (for example `"no-affinity"`).
    fn name(&self) -> &'static str;

    /// The runqueue key of `ult` entering `processor`'s runqueue: higher keys run first. `seq` counts
    /// the entries this processor's runqueue has taken so far (strictly increasing).
    fn priority(&self, ult: &UltInfo, processor: usize, seq: u64) -> u64;

    /// The runqueue key of `ult` after it called `yield_now` with other work ready. Default 0: behind
    /// every other ready ULT (equal keys leave in arrival order, so yielders take turns).
    fn yield_priority(&self, ult: &UltInfo, processor: usize, seq: u64) -> u64 {
        let _ = (ult, processor, seq);
        0
    }

    /// The processor whose wake-up stack receives `ult` when `waker` (a processor, or `None` for a
    /// thread outside the runtime) makes it ready. Default: where it last ran.
    fn wake_target(&self, ult: &UltInfo, waker: Option<usize>) -> usize {
        let _ = waker;
        ult.last_processor
    }

    /// The processor whose start-queue receives a ULT spawned on `spawner`. Default: the spawner.
    fn placement(&self, spawner: usize) -> usize {
        spawner
    }

    /// How many of a victim's `len` ready ULTs a thief takes (from the low-key end). Default: half.
    fn steal_count(&self, len: usize) -> usize {
        len.div_ceil(2)
    }

    /// Whether [`Policy::record_run`] does anything; the processor loop skips the call when it
    /// does not (asked once, when the runtime is built). Default: true.
    fn records_runs(&self) -> bool {
        true
    }

    /// Called by `processor` when a run of `ult` ends (yield, block, sleep or exit).
    fn record_run(&self, ult: &UltInfo, processor: usize) {
        let _ = (ult, processor);
    }
}
