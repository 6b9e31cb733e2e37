//! Making a ULT ready: into this processor's ready set (the `next` slot, or the runqueue with the
//! policy's key), or onto another processor's wake-up stack, where the policy engine says.
//!
//! Who makes a ULT ready, from where, and the function that does it:
//!
//! | who | from where | function |
//! | --- | --- | --- |
//! | a waker on this processor's OS thread (a ULT's notify, the loop settling an exit) | here | [`Processor::wake`] |
//! | a notifier ULT, under No Affinity's rule (the woken ULT follows it) | here | [`Processor::follow_ult_waker`], else `wake` |
//! | a waker off the runtime, or one without a processor | anywhere | `Shared::wake` (`crate::runtime`) |
//! | the loop: a drained wake-up, a stolen batch, a blocking call's return | here | [`Processor::make_ready`] |
//!
//! Under them: [`wake_to_target`](Processor::wake_to_target) asks the engine for the target
//! ([`Engine::wake_target`](crate::policy::engine::Engine::wake_target)),
//! [`deliver`](Processor::deliver) puts the ULT in this processor's ready set or on the
//! target's wake-up stack, [`try_ready_here`](Processor::try_ready_here) is the inline common
//! case of a ULT made ready here, and [`enqueue`](Processor::enqueue) keys it into the
//! runqueue. The wake paths never ask which policy is active: the engine answers
//! ([`Local::wakes_here`](crate::policy::engine::Local::wakes_here)). One question the engine
//! cannot answer alone, since it needs this processor's and the target's queues: whether a ULT
//! the hand-off rule sends home from a ULT running here would wait there so long that it should
//! follow its waker instead ([`balanced_target`](Processor::balanced_target), the rule's
//! balance clause: `policy::hand_off`, "Balance").

use super::{Processor, Remote};
use crate::policy::places::Places;
use crate::tcb::TcbRef;

impl Processor {
    /// Puts a ready ULT in the runqueue with the policy's key (never in the `next` slot), after
    /// the yield batch's ULTs (if any), so that the policy orders it among all of them.
    #[inline]
    pub(super) fn enqueue(&self, t: TcbRef) {
        let core = self.core();
        let key = core.engine.priority(t);
        if core.batch.is_empty() {
            self.runq().push(key, t);
        } else {
            self.runq().push_flushing(key, t, &mut core.batch);
        }
    }

    /// Puts the yield batch's ULTs back in the runqueue (see [`YieldBatch`](crate::queue::run::YieldBatch)): when a chain of
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
        if self.next_is_empty() && self.runq().len() == 0 && !self.central {
            self.put_next(t);
            return;
        }
        if let Some(n) = self.take_next() {
            self.enqueue(n);
        }
        self.enqueue(t);
    }

    /// Makes a blocked ULT ready, waking it from this processor: straight into this processor's
    /// ready set when the policy keeps it here (no atomic operation), else through the target's
    /// wake-up stack. Only code running on this processor's OS thread calls this.
    #[inline]
    pub(crate) fn wake(&self, t: TcbRef) {
        // The common case inline: the policy keeps `t` here (No Affinity: a hand-off from a ULT
        // running here; the hand-off rule: where it last ran, when that is here).
        let here = self.core().engine.wakes_here(t, self.current_ult());
        if here && !self.central_or_chaos && self.try_ready_here(t) {
            return;
        }
        self.wake_to_target(t);
    }

    /// The common cases of making `t` ready on this processor, shared by the wake paths: the
    /// prefetch hook (`crate::prefetch`: the woken ULT's data, while the waker goes on), then
    /// behind a non-empty runqueue, or into an empty `next` slot (`make_ready`'s first case: the
    /// runqueue stays empty, so no idle processor needs telling). False, having done nothing
    /// but the prefetch, when the slot is taken and the runqueue empty: the caller's slow path.
    #[inline(always)]
    fn try_ready_here(&self, t: TcbRef) -> bool {
        let _ = crate::prefetch::ult(t);
        if self.runq().len() != 0 {
            self.queue_ready(t);
            return true;
        }
        if self.next_is_empty() {
            self.put_next(t);
            return true;
        }
        false
    }

    /// [`Processor::wake`] by the ULT running on this processor (a notifier's wake-up deferred
    /// past the object's lock, `sync::wait::Wake`) under No Affinity's wake rule, decided by one
    /// flag instead of the engine's answer and the check that a ULT is running, which the caller
    /// guarantees: `t` follows its waker. True if it made `t` ready (here, or through
    /// `wake_to_target`); false, with nothing done, under another rule or for a pinned ULT: the
    /// caller calls `wake`. True only without the chaos mode, so a caller that gets true has no
    /// chaos decision point to take. Always inlined, as `wake`, into the notifiers' paths
    /// (`sync::wait`, "Switch depth").
    #[inline(always)]
    pub(crate) fn follow_ult_waker(&self, t: TcbRef) -> bool {
        debug_assert!(self.current_ult().is_some());
        if !self.waker_stays.get() {
            std::hint::cold_path(); // (another wake rule: `wake` decides)
            return false;
        }
        if t.tcb().head.placed.get() {
            return self.follow_placed(t);
        }
        if !self.try_ready_here(t) {
            self.wake_to_target(t);
        }
        true
    }

    /// [`Processor::follow_ult_waker`] for a placed ULT: true, having made `t` ready here, when
    /// the places keep it here (a soft-pinned ULT woken at home, or by its partner:
    /// `Places::stays_with_waker`), the common case of a request and its reply; false, with
    /// nothing done, otherwise (`wake` decides).
    #[inline(never)]
    fn follow_placed(&self, t: TcbRef) -> bool {
        let Some(u) = self.current_ult() else { return false };
        let load = self.runq().len();
        let Some(away) = self.shared.places.stays_with_waker(t, self.index, u.as_ptr() as usize, load) else {
            return false;
        };
        if away {
            self.remote().stats.partner_stays.bump();
        }
        self.deliver(t, self.index);
        true
    }

    /// [`Processor::make_ready`] with the runqueue known non-empty (so not into the `next` slot).
    #[inline(never)]
    fn queue_ready(&self, t: TcbRef) {
        if let Some(n) = self.take_next() {
            self.enqueue(n);
        }
        self.enqueue(t);
    }

    /// [`Processor::wake`] past its common case: where the engine sends `t`.
    #[inline(never)]
    fn wake_to_target(&self, t: TcbRef) {
        let target = if t.tcb().head.placed.get() {
            self.placed_target(t)
        } else {
            let by = self.current_ult();
            match self.shared.engine.wake_target(t, Some(self.index), by) {
                target if target != self.index && by.is_some() => self.balanced_target(t, target),
                target => target,
            }
        };
        if self.central_or_chaos {
            return self.deliver_central_or_chaos(t, target);
        }
        self.deliver(t, target);
    }

    /// [`wake_to_target`](Self::wake_to_target) for a ULT the engine sends to `target`, another
    /// processor, woken by the ULT running here: the hand-off rule's balance clause
    /// ([`policy::hand_off`](crate::policy::hand_off), "Balance"). Keeps `t` here instead when
    /// the engine sent it home under a built-in affinity rule and going home (its wait there and
    /// the trip) would cost more time than its wait here and the reload of its lines; `target`
    /// otherwise. What it reads of the other processor (the length of the queue it serves, its
    /// `next` slot, its wake-up stack, its switch counter) are hints read without
    /// synchronization: whichever
    /// processor they choose, `deliver` makes `t` ready there exactly once.
    #[inline(never)]
    fn balanced_target(&self, t: TcbRef, target: usize) -> usize {
        use crate::policy::hand_off::{waits_too_long_at_home, Wait};
        let home = t.tcb().head.processor.load(crate::atomics::Ordering::Relaxed);
        if target != home || t.tcb().head.pinned.get() || !self.core().engine.balances() {
            return target; // (not sent home by the hand-off rule: the policy's own choice)
        }
        let costs = crate::sync::host_costs();
        let remote = &self.shared.processors[home];
        if !costs.lines_measured || remote.park.is_parked() {
            // Unmeasured line costs decide nothing; a parked home runs `t` as soon as the push
            // below wakes it (an idle processor is no queue to wait in).
            return target;
        }
        let now = crate::sync::ticks();
        let runs = &mut self.core().avoid.runs;
        // Here: the ready ULTs only (the queue this processor serves), the waker's run taken
        // to end with the hand-off.
        let there = Wait {
            ahead: runs_ahead_at_home(&self.shared.processors, &self.shared.places, home),
            run: runs.look(home, remote.stats.switches.get(), now),
        };
        let here = Wait {
            ahead: self.runq().len() + usize::from(!self.next_is_empty()),
            run: runs.look(self.index, self.remote().stats.switches.get(), now),
        };
        let lines = self.shared.engine.home_lines(t, home);
        let ticks = costs.ticks_per_ns;
        let trip = crate::policy::hand_off::HAND_OFF_ROUND_TRIPS * costs.line_round_trip_ns * ticks;
        if waits_too_long_at_home(there, here, trip, lines, costs.line_fetch_ns * ticks) {
            self.index
        } else {
            target
        }
    }

    /// Where the placed ULT `t`, woken from this processor, goes (`policy::places`), counting
    /// the wake-ups that send it home elsewhere or keep it here away from home. Inlined into
    /// `wake_to_target`: the wake-ups of placed ULTs that `follow_placed` does not keep here.
    #[inline(always)]
    fn placed_target(&self, t: TcbRef) -> usize {
        let by = self
            .current_ult()
            .map(|u| crate::policy::places::Waker { processor: self.index, ult: u.as_ptr() as usize });
        let target = self.shared.placed_wake_target(t, by);
        let home = t.tcb().sched.place.get().home as usize;
        if target != home {
            if target == self.index {
                self.remote().stats.partner_stays.bump();
            }
        } else if target != self.index {
            self.remote().stats.home_goings.bump();
        }
        target
    }

    /// Puts `t` in the ready set of processor `target`: this one's, or through `target`'s
    /// wake-up stack.
    #[inline]
    fn deliver(&self, t: TcbRef, target: usize) {
        if target == self.index {
            // Idle processors are told when the runqueue turns non-empty (they may steal from
            // it), not at every entry: one that parks later sees the entries in its re-check
            // (`crate::park`), and one parked before was woken by the first entry.
            if self.try_ready_here(t) {
                return;
            }
            self.make_ready(t);
            if self.runq().len() > 0 {
                self.shared.notify_any();
            }
        } else {
            self.shared.wake_remote(t, target);
        }
    }

    /// Publishes `t`, a ULT just spawned here with a pin, a place or a home, or under a
    /// runtime-wide rule (round-robin, soft pinning), where the places say
    /// (`policy::places`): this processor's start-queue, or its ready set when the ULT is strict
    /// (thieves take start-queue entries without asking), or another processor's wake-up stack.
    #[cold]
    #[inline(never)]
    pub(crate) fn spawn_placed(
        &self,
        t: TcbRef,
        pinned: bool,
        place: Option<crate::policy::places::PlaceReq>,
    ) {
        let (start, rule) = self.shared.places.on_spawn(self.index, pinned, place, &mut self.core().turn);
        let strict = rule.is_some_and(|r| r.strict);
        if let Some(rule) = rule {
            t.tcb().sched.place.set(rule);
            t.tcb().head.placed.set(true);
        }
        if start != self.index {
            t.tcb().head.processor.store(start, crate::atomics::Ordering::Relaxed);
            self.shared.wake_remote(t, start);
        } else if strict {
            self.make_ready(t);
        } else {
            self.push_start(t);
        }
    }

    /// [`Processor::deliver`] on a `central` runtime (one runqueue), in chaos mode (a random
    /// target one time in two), or on a tracing processor (the wake-up recorded first,
    /// `crate::trace`), out of line: the usual wake-up pays one test for the three.
    #[cold]
    #[inline(never)]
    fn deliver_central_or_chaos(&self, t: TcbRef, target: usize) {
        self.trace_wake(t, target);
        if self.central {
            self.enqueue(t);
            self.shared.notify_any();
        } else if self.chaos.on {
            self.deliver(t, self.chaos_wake_target(t, target));
        } else {
            self.deliver(t, target);
        }
    }
}

/// The runs ahead of a ULT woken to processor `home`, as the balance clause counts them
/// (`policy::hand_off`, "Balance"): the run in progress there, the ready ULTs of the runqueue it
/// serves (its own, or its work-stealing place's: [`Places::runq_of`], the queue
/// `Shared::placed_wake_target` reads too) and of its `next` slot, and one more for a wake-up
/// stack not drained yet. Hints read without synchronization, as `balanced_target` takes them.
#[inline]
fn runs_ahead_at_home(processors: &[Remote], places: &Places, home: usize) -> usize {
    let remote = &processors[home];
    1 + super::served_runq(processors, places, home).len()
        + usize::from(!remote.next.is_empty())
        + usize::from(!remote.wakeup.is_empty())
}

#[cfg(test)]
mod tests {
    use super::{runs_ahead_at_home, Remote};
    use crate::policy::places::two_processors_sharing_an_l3;

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn home_waits_behind_the_queue_it_serves() {
        // Processor 1 serves processor 0's runqueue, and its own stays empty.
        let (places, own) = two_processors_sharing_an_l3();
        let processors: Vec<Remote> = (0..2).map(|_| Remote::new(0, 64, true)).collect();
        let owner = std::sync::Arc::new(());
        let chunk = crate::tcb::Chunk::allocate(&owner);
        let mut tcbs = chunk.tcbs();
        let (a, b) = (tcbs.next().expect("a TCB"), tcbs.next().expect("a TCB"));
        processors[0].runq.push(0, a);
        processors[0].runq.push(1, b);
        // At home on processor 1: its run in progress and the two ready ULTs of the shared
        // queue (not its own empty runqueue's none).
        assert_eq!(runs_ahead_at_home(&processors, &places, 1), 3);
        assert_eq!(runs_ahead_at_home(&processors, &places, 0), 3);
        // Without places each processor serves its own queue.
        assert_eq!(runs_ahead_at_home(&processors, &own, 1), 1);
        assert_eq!(runs_ahead_at_home(&processors, &own, 0), 3);
        while processors[0].runq.pop_best().is_some() {}
    }
}
