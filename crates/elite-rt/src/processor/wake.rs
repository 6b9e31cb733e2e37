//! Making a ULT ready: into this processor's ready set (the `next` slot or the runqueue, with the
//! policy's key), or onto another processor's wake-up stack, as the policy's wake rule says.

use super::Processor;
use crate::atomics::Ordering;
use crate::policy::WakeRule;
use crate::tcb::TcbRef;

impl Processor {
    /// Puts a ready ULT in the runqueue with the policy's key (never in the `next` slot), after
    /// the yield batch's ULTs (if any), so that the policy orders it among all of them.
    #[inline]
    pub(super) fn enqueue(&self, t: TcbRef) {
        let core = self.core();
        let key = core.affinity.priority(t);
        if core.batch.is_empty() {
            self.runq().push(key, t);
        } else {
            self.runq().push_flushing(key, t, &mut core.batch);
        }
    }

    /// Puts the yield batch's ULTs back in the runqueue (see [`YieldBatch`]): when a chain of
    /// switches returns to the loop, and before a blocking call's action hands the processor to
    /// another OS thread (`crate::blocking::switched`), whose loop must find them there.
    #[inline]
    pub(crate) fn flush_batch(&self) {
        let core = self.core();
        if !core.batch.is_empty() {
            self.runq().flush_batch(&mut core.batch);
        }
    }

    /// Puts a ready ULT in this processor's runqueue with the policy's key, or in the `next` slot
    /// when nothing else here is ready (then it is the best by any policy). A second ready ULT
    /// sends the one in the slot to the runqueue first, so that the policy orders the two.
    #[inline]
    pub(crate) fn make_ready(&self, t: TcbRef) {
        let core = self.core();
        if core.next.is_none() && self.runq().len() == 0 && !self.central {
            core.next = Some(t);
            return;
        }
        if let Some(n) = core.next.take() {
            self.enqueue(n);
        }
        self.enqueue(t);
    }

    /// Makes a blocked ULT ready, waking it from this processor: straight into this processor's
    /// ready set when the policy sends it here (no atomic operation), else through the target's
    /// wake-up stack. Only code running on this processor's OS thread calls this.
    #[inline]
    pub(crate) fn wake(&self, t: TcbRef) {
        // The common case inline: a built-in policy sends `t` here (No Affinity: a hand-off from
        // a ULT running here; the hand-off rule: where it last ran, when that is here).
        let here = match self.shared.config.policy.wake_rule() {
            // (A pinned ULT goes back where it ran, whatever the rule.)
            WakeRule::Waker if self.current_ult().is_some() && !t.tcb().pinned.get() => true,
            WakeRule::Waker | WakeRule::HandOff => t.tcb().processor.load(Ordering::Relaxed) == self.index,
            WakeRule::HandOffInRounds => {
                let home = t.tcb().processor.load(Ordering::Relaxed) == self.index;
                if home && !t.tcb().pinned.get() {
                    crate::affinity::mark_woken(t); // (as `wake_target` does, but for a pinned ULT)
                }
                home
            }
            WakeRule::Gravity => self.gravity_wakes_here(t),
            WakeRule::Hook => false,
        };
        if here && !self.central_or_chaos && self.ready_here(t) {
            return;
        }
        self.wake_slow(t);
    }

    /// The common cases of making `t` ready on this processor, shared by the wake paths: the
    /// prefetch hook (`crate::prefetch`: the woken ULT's data, while the waker goes on), then
    /// behind a non-empty runqueue, or into an empty `next` slot (`make_ready`'s first case: the
    /// runqueue stays empty, so no idle processor needs telling). False, having done nothing
    /// but the prefetch, when the slot is taken and the runqueue empty: the caller's slow path.
    #[inline(always)]
    fn ready_here(&self, t: TcbRef) -> bool {
        let _ = crate::prefetch::ult(t);
        if self.remote().runq.len() != 0 {
            self.make_ready_queued(t);
            return true;
        }
        let core = self.core();
        if core.next.is_none() {
            core.next = Some(t);
            return true;
        }
        false
    }

    /// [`Processor::wake`] by the ULT running on this processor (a notifier's wake-up deferred
    /// past the object's lock, `sync::wait::Wake`): the same outcome, with No Affinity's rule
    /// (the default) decided by one flag instead of the rule's lookup and the check that a ULT
    /// is running, which the caller guarantees. Always inlined, as `wake`, into the notifiers'
    /// paths (`sync::wait`, "Switch depth").
    #[inline(always)]
    pub(crate) fn wake_from_ult(&self, t: TcbRef) {
        if !self.wake_here_from_ult(t) {
            self.wake(t);
        }
    }

    /// [`Processor::wake_from_ult`]'s No Affinity case: true if it made `t` ready (here, or
    /// through `wake_slow`); false if the caller must call `wake`. True only without the chaos
    /// mode, so a caller that gets true has no chaos decision point to take.
    #[inline(always)]
    pub(crate) fn wake_here_from_ult(&self, t: TcbRef) -> bool {
        debug_assert!(self.current_ult().is_some());
        if !self.waker_stays || t.tcb().pinned.get() {
            std::hint::cold_path(); // (another wake rule, or a pinned ULT: `wake` decides)
            return false;
        }
        if !self.ready_here(t) {
            self.wake_slow(t);
        }
        true
    }

    /// [`Processor::wake`]'s answer for Gravity: whether `t` stays here. Out of line, so that
    /// `wake` stays small enough to inline into the blocking paths of the other rules.
    #[inline(never)]
    fn gravity_wakes_here(&self, t: TcbRef) -> bool {
        // Home, and no force acts: the hand-off rule's answer is home.
        let home = t.tcb().processor.load(Ordering::Relaxed) == self.index;
        let stays = home && crate::affinity::gravity_has_no_force(t, self.current_ult());
        if stays && !t.tcb().pinned.get() {
            crate::affinity::mark_woken(t); // (as `wake_target` does, but for a pinned ULT)
        }
        stays
    }

    /// [`Processor::make_ready`] with the runqueue known non-empty (so not into the `next` slot).
    #[inline(never)]
    fn make_ready_queued(&self, t: TcbRef) {
        if let Some(n) = self.core().next.take() {
            self.enqueue(n);
        }
        self.enqueue(t);
    }

    /// [`Processor::wake`] past its common case.
    #[inline(never)]
    fn wake_slow(&self, t: TcbRef) {
        let config = &self.shared.config;
        let target = crate::affinity::wake_target(
            &config.policy,
            config.needs,
            &self.shared.affinity,
            t,
            Some(self.index),
            self.current_ult(),
        );
        if self.central_or_chaos {
            return self.wake_central_or_chaos(t, target);
        }
        self.wake_to(t, target);
    }

    /// [`Processor::wake`]'s delivery to `target`.
    #[inline]
    fn wake_to(&self, t: TcbRef, target: usize) {
        if target == self.index {
            // Idle processors are told when the runqueue turns non-empty (they may steal from
            // it), not at every entry: one that parks later sees the entries in its re-check
            // (`crate::park`), and one parked before was woken by the first entry.
            if self.ready_here(t) {
                return;
            }
            self.make_ready(t);
            if self.remote().runq.len() > 0 {
                self.shared.notify_any();
            }
        } else {
            self.shared.wake_remote(t, target);
        }
    }

    /// [`Processor::wake`] on a `central` runtime (one runqueue) or in chaos mode (a random target
    /// one time in two), out of line: the usual wake-up pays one test for both.
    #[cold]
    #[inline(never)]
    fn wake_central_or_chaos(&self, t: TcbRef, target: usize) {
        if self.central {
            self.enqueue(t);
            self.shared.notify_any();
        } else {
            self.wake_to(t, self.chaos_wake_target(t, target));
        }
    }
}
