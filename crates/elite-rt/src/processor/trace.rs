//! The processor's trace hooks (`crate::trace`): each tests the processor's ring and records
//! one event. The run hooks are in `run.rs` (the copy of `run_ult_as` with every hook); these are the
//! others, called from the places the table in `crate::trace` names.

use super::Processor;
use crate::tcb::TcbRef;
use crate::trace::{id, Handoff, Kind};

impl Processor {
    /// A spawn of `t` by the ULT running here (one test of a field when tracing is off).
    #[inline(always)]
    pub(crate) fn trace_spawn(&self, t: TcbRef) {
        if self.trace.is_some() {
            self.trace_spawn_slow(t);
        }
    }

    #[cold]
    #[inline(never)]
    fn trace_spawn_slow(&self, t: TcbRef) {
        let Some(r) = &self.trace else { return };
        let by = self.current_ult().map_or(0, id);
        r.push(Kind::Spawn, id(t), by, self.index as u32);
        if t.tcb().head.named.get() {
            // SAFETY: the name was written at spawn, by this thread, and is immutable afterwards.
            if let Some(name) = unsafe { (*t.tcb().links.name.get()).as_deref() } {
                r.tracer().name(id(t), name);
            }
        }
    }

    /// A wake-up of `t` that the policy sends to processor `target` (on the detour a tracing
    /// processor's wake-ups take: `wake::deliver_central_or_chaos`). The waker is the ULT
    /// running here or, between runs (the loop settling an exit), the one that ran last.
    #[cold]
    pub(super) fn trace_wake(&self, t: TcbRef, target: usize) {
        let Some(r) = &self.trace else { return };
        let by = self.current_ult().map_or_else(|| r.last_run(), id);
        r.push(Kind::Wake, id(t), by, target as u32);
    }

    /// A steal of `t` (the first ULT of what was taken) from processor `victim`.
    #[inline]
    pub(super) fn trace_steal(&self, t: TcbRef, victim: usize) {
        if let Some(r) = &self.trace {
            r.push(Kind::Steal, id(t), 0, victim as u32);
        }
    }

    /// A blocking call of `t` did `what` with this processor (`crate::blocking::switched`).
    #[inline]
    pub(crate) fn trace_handoff(&self, t: TcbRef, what: Handoff) {
        if let Some(r) = &self.trace {
            r.push(Kind::Handoff, id(t), 0, what as u32);
        }
    }

    /// The loop's idle step, traced: flushes the ring first (off the run path), then records the
    /// idle span and whether the processor parked in it.
    #[cold]
    pub(super) fn idle_traced(&self) {
        let Some(r) = &self.trace else { return self.idle() };
        r.flush();
        let parks = self.remote().stats.parks.get();
        r.push(Kind::IdleBegin, 0, 0, 0);
        self.idle();
        let parked = self.remote().stats.parks.get() != parks;
        r.push(Kind::IdleEnd, 0, 0, u32::from(parked));
    }

    /// Writes the ring's events to the trace (the loop's every 64th round, shutdown).
    #[cold]
    pub(crate) fn flush_trace(&self) {
        if let Some(r) = &self.trace {
            r.flush();
        }
    }

    /// This processor took up the policy now in force.
    #[cold]
    pub(super) fn trace_policy(&self) {
        if let Some(r) = &self.trace {
            r.flush(); // (its events so far ran under the previous one)
            r.tracer().policy(self.index as u32, self.shared.engine.selected().policy.name());
        }
    }
}
