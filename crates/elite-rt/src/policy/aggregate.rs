//! The aggregation modifier (IAS's time and inter-core aggregation): the ULTs of the
//! [`Group`](crate::Group) that runs on a processor get a bonus on their runqueue keys there, so
//! that a group's ULTs run back to back while its data is cached, under any policy
//! ([`Policy::aggregate`](super::Policy::aggregate)).
//!
//! # The bonus, in the key's units
//!
//! A ULT entering a runqueue (made ready, or yielding) whose group is *favoured* on that
//! processor has the bonus added to its key (saturating at `u64::MAX`); the higher key runs
//! sooner. The bonus is in the units of the policy's key, which differ:
//!
//! | policy | key | a bonus of `b` means |
//! | --- | --- | --- |
//! | `no-affinity` | the processor's entry count (a yield: 0) | as if it entered `b` entries later |
//! | `virtual-time`, `gravity` | the run count of its last run here (a yield: its round) | as if its last run ended `b` runs later |
//! | `minimum-misses` | `u64::MAX` minus its last run's misses | `b` fewer misses |
//! | `reload-transient` | its expected reload transient, scaled (`2^20` per miss), from the top | `b / 2^20` fewer expected misses |
//! | custom | the hooks' | whatever the hooks' keys mean |
//!
//! [`Aggregate::ALWAYS`] (`u64::MAX`) puts every favoured ULT at the top, where equal keys run
//! oldest first: the group's ready ULTs run in turn before any other, as IAS's large priority
//! bonus does. Keys are fixed when a ULT enters a runqueue: a ULT that was waiting when its
//! group became favoured keeps the key it entered with, and one that entered favoured keeps its
//! bonus after its group stopped being favoured (until it runs).
//!
//! Favoured keys also carry an *epoch* in their low bits, so that among favoured ULTs those of
//! the group followed now run first: a group followed anew gets a new epoch, above every
//! earlier one, unless favoured entries of it still wait on the processor; then its new
//! entries take the epoch of those and queue behind them. That is what keeps a group's
//! siblings together when they entered favoured at different times: ULTs spawned interleaved
//! (a b c a b c ...) each start from the start-queue and enter the runqueue favoured at their
//! first yield, each with its own group's epoch of that moment; when group `a` runs again, its
//! yielding ULT joins its waiting siblings' epoch, so that `a`'s ULTs take turns until the
//! group is done (or its streak ends), where a fresh epoch would put the yielder above its
//! siblings and run each ULT's turns back to back, the siblings waiting behind the other
//! groups. The count of a group's favoured entries waiting on a processor is a hint: a thief
//! that takes one leaves it counted there, which keeps the group's old epoch until the group's
//! favoured runs there count it down.
//!
//! # Which group is favoured
//!
//! * **In time** (IAS's TAS): the group of the run that began last on the processor, while its
//!   *streak*, the runs of that group begun back to back there, is at most
//!   [`max_run`](Aggregate::max_run) long. The streak is the fairness bound: past it the group's
//!   ULTs enter with their plain keys, so that the others get their turn; a run of another
//!   group (or of an ungrouped ULT) ends the streak.
//! * **Across cores** (IAS's master and slave): the processors that share a cache (the lowest
//!   level of data cache that more than one processor of the topology uses) form a domain; the
//!   lowest processor of the domain (the master) publishes the group it favours in a word of
//!   the domain, and every other processor of the domain also favours that group, so that
//!   processors sharing a cache run the same group's ULTs at the same time. On a machine whose
//!   processors share no cache there are no domains.
//! * **The footprint cut-off** (beyond IAS): a ULT whose declared footprint
//!   ([`Builder::footprint`](crate::Builder::footprint), [`set_footprint`](crate::set_footprint))
//!   exceeds the largest cache its processor uses gets no bonus: its group's data would not
//!   stay cached between the runs the bonus puts together, so aggregating would only cost
//!   fairness.
//!
//! # The published word's protocol
//!
//! One `AtomicU32` per domain (`Domain`): written only by the master, with a relaxed store
//! when a grouped run begins there (the group's number, or 0 past its streak), read by the
//! others with a relaxed load when a ULT enters their runqueue. A hint: a stale value only
//! gives one ULT a key it would not have had; nothing else is published through it.

use std::fmt;

/// The settings of the aggregation modifier: the bonus and the longest streak
/// ([`Policy::aggregate_with`](super::Policy::aggregate_with); the module docs say what they
/// mean).
///
/// ```
/// use elite_rt::policy::{Aggregate, Policy};
///
/// let policy = Policy::virtual_time().aggregate_with(Aggregate::new(Aggregate::ALWAYS).max_run(16)?);
/// assert_eq!(policy.aggregation(), Some(Aggregate::new(u64::MAX).max_run(16)?));
/// assert_eq!(Aggregate::new(5).max_run(0).unwrap_err().to_string(), "aggregate max_run: 0 given, expected at least 1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Aggregate {
    bonus: u64,
    max_run: u32,
}

impl Aggregate {
    /// The bonus that puts the favoured group's ULTs ahead of every other ULT, as IAS's large
    /// priority bonus does.
    pub const ALWAYS: u64 = u64::MAX;

    /// The longest streak by default: runs of one group back to back on one processor before
    /// its ULTs enter with their plain keys.
    pub const DEFAULT_MAX_RUN: u32 = 64;

    /// `bonus` in the key's units, the streak at most [`DEFAULT_MAX_RUN`](Self::DEFAULT_MAX_RUN).
    pub fn new(bonus: u64) -> Aggregate {
        Aggregate { bonus, max_run: Aggregate::DEFAULT_MAX_RUN }
    }

    /// The longest streak: runs of one group begun back to back on one processor while it is
    /// favoured; at least 1.
    pub fn max_run(self, runs: u32) -> Result<Aggregate, AggregateError> {
        if runs == 0 {
            return Err(AggregateError { message: "aggregate max_run: 0 given, expected at least 1".into() });
        }
        Ok(Aggregate { max_run: runs, ..self })
    }

    /// The bonus.
    pub fn bonus(&self) -> u64 {
        self.bonus
    }

    /// The longest streak.
    pub fn run_limit(&self) -> u32 {
        self.max_run
    }
}

/// A setting of [`Aggregate`] out of its range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggregateError {
    message: String,
}

impl fmt::Display for AggregateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AggregateError {}
