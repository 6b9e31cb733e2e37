//! The chaos mode: a processor that makes its scheduling decisions at random, from a seed, so
//! that tests meet interleavings the usual decisions never produce
//! ([`RuntimeBuilder::chaos`](crate::RuntimeBuilder::chaos), or `ELITE_CHAOS=<seed>`).
//!
//! # What it changes
//!
//! * **Every yield migrates** the yielding ULT to another processor, chosen at random (through
//!   that processor's wake-up stack), instead of requeueing it here (but a yield in the middle of
//!   unwinding a panic, which anchors the ULT to its OS thread instead: `crate::anchor`).
//! * **Wake-ups go astray**: one in two wake-ups from a processor sends the woken ULT to a random
//!   processor instead of the one the policy chose.
//! * **Runqueue picks are random**: the `next` slot is skipped half of the time, and the next ULT
//!   is the runqueue's best, its worst (a thief's end), or a never-started ULT from the
//!   start-queues, one in three each.
//! * **Extra yields at the synchronization primitives' decision points**: one in three times when
//!   a lock is found contended (before the spin phase, `Spinner::new`) and after a notifier
//!   delivered a wake-up (`Wake::wake`, after the object's lock is released), so that the woken
//!   waiter, newcomers and the notifier meet in every order. (Never while the ULT has a wait in
//!   progress that is not yet resolved: between linking its wait node and blocking, a switch would
//!   break the wait protocol's rule that a waiter is either running or suspended; nor while it
//!   panics.)
//!
//! Placed ULTs (`Builder::pinned`, `Builder::place`, `Builder::home`, soft pinning: `policy::places`)
//! are never migrated nor sent astray.
//!
//! # Cost when off
//!
//! The processor's hot paths test one `bool` copied into the processor (`Chaos::on`): a
//! predictable branch on the yield path, the wake path and the runqueue pick. The primitives'
//! decision points test one process-wide flag, set when the first chaos runtime starts.
//!
//! # What a seed reproduces
//!
//! Each processor draws from its own generator, seeded from the runtime's seed and its index, so a
//! seed fixes the sequence of decisions *each processor* makes. It does not fix how the
//! operating system interleaves the processors' threads, nor timer expiries or when threads
//! outside the runtime act: on two processors or more a seed gives a different schedule from run to
//! run, and a failure found with it may take several runs to recur. On one processor, with no
//! timers (`sleep`, timed waits) and no outside threads acting while ULTs run, the schedule is a
//! function of the seed and the program: the same seed gives the same interleaving (a test in
//! `tests/chaos.rs` checks that the order of events is the same from run to run).

use super::Processor;
use crate::atomics::{AtomicBool, Ordering};
use crate::tcb::TcbRef;
use std::cell::Cell;

/// Set once a runtime in chaos mode has started, for the primitives' decision points.
static CHAOS_ANY: AtomicBool = AtomicBool::new(false);

/// A processor's chaos state.
pub(crate) struct Chaos {
    /// Whether the processor runs in chaos mode.
    pub(crate) on: bool,
    /// The processor's generator (splitmix64); used by its own thread only.
    state: Cell<u64>,
}

impl Chaos {
    /// The chaos state of processor `index` for the runtime's `seed` (`None`: off).
    pub(crate) fn new(seed: Option<u64>, index: usize) -> Chaos {
        if seed.is_some() {
            CHAOS_ANY.store(true, Ordering::Relaxed);
        }
        let s = seed.unwrap_or(0) ^ (index as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F);
        Chaos { on: seed.is_some(), state: Cell::new(s) }
    }

    fn next(&self) -> u64 {
        // splitmix64
        let s = self.state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.state.set(s);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&self, n: u64) -> u64 {
        self.next() % n
    }

    /// True one time in `n`.
    fn one_in(&self, n: u64) -> bool {
        self.below(n) == 0
    }
}

impl Processor {
    /// A processor other than this one, at random (this one if it is alone).
    fn chaos_other(&self) -> usize {
        let n = self.shared.processors.len();
        if n == 1 {
            return self.index;
        }
        (self.index + 1 + self.chaos.below(n as u64 - 1) as usize) % n
    }

    /// Chaos when the processor runs out of work: the loop's round counters start again from 0,
    /// so that how long it idled (which depends on timing) does not shift the rounds on which
    /// the loop looks at the shared start-queues first: on one processor, a seed then fixes
    /// every decision.
    pub(super) fn chaos_idle(&self) {
        let core = self.core();
        core.tick = super::TICK_PERIOD;
        core.rounds = 0;
    }

    /// Chaos on a yield: sends `t` to another processor (true), unless it is pinned or this
    /// processor is alone (false: requeue it as usual).
    pub(super) fn chaos_migrate(&self, t: TcbRef) -> bool {
        if self.shared.processors.len() == 1 || t.tcb().head.placed.get() {
            return false;
        }
        let target = self.chaos_other();
        self.shared.wake_remote(t, target);
        true
    }

    /// Chaos on a wake-up from this processor: one in two goes to a random processor instead of
    /// `target`, unless `t` is pinned.
    pub(super) fn chaos_wake_target(&self, t: TcbRef, target: usize) -> usize {
        if self.shared.processors.len() == 1 || t.tcb().head.placed.get() || !self.chaos.one_in(2) {
            return target;
        }
        self.chaos.below(self.shared.processors.len() as u64) as usize
    }

    /// Chaos in step 2 of the loop: the `next` slot half of the time, then the runqueue's best,
    /// its worst, or a never-started ULT first.
    pub(super) fn chaos_take_ready(&self) -> Option<TcbRef> {
        if let Some(n) = self.take_next() {
            if self.runq().len() == 0 || self.chaos.one_in(2) {
                return Some(n);
            }
            self.enqueue(n);
        }
        if self.core().admit_one {
            self.core().admit_one = false;
            if let Some(t) = self.take_start() {
                return Some(t);
            }
        }
        if self.runq().len() == 0 {
            return None; // no choice to make (and no draw: the loop goes on to the start-queues)
        }
        match self.chaos.below(3) {
            0 => self.runq().pop_best(),
            1 => {
                let mut buf = std::mem::take(&mut self.core().scratch);
                self.runq().steal(|_| 1, &mut buf);
                let t = buf.pop();
                self.core().scratch = buf;
                t.or_else(|| self.runq().pop_best())
            }
            _ => self.take_start().or_else(|| self.runq().pop_best()),
        }
    }
}

/// A decision point of a synchronization primitive (a lock found contended, a wake-up delivered):
/// in chaos mode the running ULT yields there one time in three. One load and a branch when no
/// chaos runtime ever started.
#[inline]
pub(crate) fn decision_point() {
    if CHAOS_ANY.load(Ordering::Relaxed) {
        decision_point_slow();
    }
}

#[cold]
#[inline(never)]
pub(super) fn decision_point_slow() {
    let Some(p) = crate::slot::current_processor() else {
        return;
    };
    let Some(me) = p.current_ult() else {
        return;
    };
    if !p.chaos.on || crate::sync::wait::has_unresolved_wait(me) || std::thread::panicking() {
        return;
    }
    if p.chaos.one_in(3) {
        crate::thread::yield_now();
    }
}

impl crate::Runtime {
    /// The chaos mode's seed, if the runtime runs in chaos mode
    /// ([`RuntimeBuilder::chaos`](crate::RuntimeBuilder::chaos), or `ELITE_CHAOS`).
    pub fn chaos_seed(&self) -> Option<u64> {
        self.shared().config.chaos
    }
}

impl Processor {
    /// The chaos mode's decision point (`chaos::decision_point`) for code running on this
    /// processor: one test of this processor's flag.
    #[inline]
    pub(crate) fn decision_point(&self) {
        if self.chaos.on {
            decision_point_slow();
        }
    }
}
