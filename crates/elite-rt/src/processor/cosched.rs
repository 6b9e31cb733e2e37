//! The processor's side of the runtime's coscheduling gate (`contention::gate`): before a ULT of
//! a coscheduled group is resumed, whether this processor admits its group now; and, before an
//! idle processor parks, a held ULT of a group that may fill it.
//!
//! Only the copy of the loop that runs grouped ULTs (`run_ult_as` with every hook) asks, so
//! a runtime without a coscheduler, and every ungrouped ULT, pays nothing for it.

use super::Processor;
use crate::atomics::Ordering;
use crate::contention::gate::Entry;
use crate::tcb::TcbRef;

/// How long a processor that waits for a straggler of the last quantum in its domain sleeps
/// before it looks again (see `contention::gate`): a tenth of a millisecond, small beside a
/// quantum (milliseconds).
const STRAGGLER_PAUSE: std::time::Duration = std::time::Duration::from_micros(100);

impl Processor {
    /// Whether `t`, a ULT of group number `group` (not 0) about to be resumed here, may run here
    /// now. When it may not, it has been sent to a processor that admits its group, or held
    /// until one does (`Gate::hold_or_send`): the caller must not touch it again.
    #[inline(never)]
    pub(super) fn cosched_admits(&self, t: TcbRef, group: u16) -> bool {
        let Some(gate) = &self.shared.cosched else {
            return true;
        };
        let index = self.shared.groups.slot(group).cosched.load(Ordering::Relaxed);
        if index == 0 {
            return true; // (a group the coscheduler does not know)
        }
        let index = usize::from(index - 1);
        match gate.enter(self.index, 1 << index, || self.nothing_else_ready()) {
            Entry::Run => true,
            Entry::Refused => {
                gate.hold_or_send(&*self.shared, t, index, self.index);
                false
            }
            Entry::Wait => {
                // A straggler of the last quantum runs beside: `t` waits here, ready, and the
                // OS thread gives its CPU up for a moment (on a host with more threads than
                // CPUs the straggler's may be waiting for one, and a spin here would take CPU
                // time from it; docs/contention.md). Wake-ups to this processor wait as long.
                std::thread::sleep(STRAGGLER_PAUSE);
                self.make_ready(t);
                false
            }
        }
    }

    /// The ULT that [`cosched_admits`](Self::cosched_admits) let run switched out.
    #[inline(never)]
    pub(super) fn cosched_left(&self) {
        if let Some(gate) = &self.shared.cosched {
            gate.left(self.index);
        }
    }

    /// Whether a lone ULT of group number `group` (not 0) that just yielded here may be resumed
    /// at once: its group is still admitted and no straggler runs beside (entered again, as
    /// [`cosched_admits`](Self::cosched_admits) enters).
    #[inline(never)]
    pub(super) fn cosched_still_admits(&self, group: u16) -> bool {
        let Some(gate) = &self.shared.cosched else {
            return true;
        };
        match self.shared.groups.slot(group).cosched.load(Ordering::Relaxed) {
            0 => true,
            index => gate.enter(self.index, 1 << (index - 1), || true) == Entry::Run,
        }
    }

    /// Whether no other ULT is ready here (the `next` slot, the runqueue, the yield batch and the
    /// wake-up stack are empty).
    fn nothing_else_ready(&self) -> bool {
        self.next_is_empty()
            && self.runq().len() == 0
            && self.core().batch.is_empty()
            && self.remote().wakeup.is_empty()
    }

    /// A held ULT of a group that may fill a processor with nothing else to run, made ready
    /// here; whether there was one. Called before the processor parks.
    pub(super) fn take_filler(&self) -> bool {
        let Some(gate) = &self.shared.cosched else {
            return false;
        };
        match gate.take_filler() {
            Some(t) => {
                self.make_ready(t);
                true
            }
            None => false,
        }
    }
}
