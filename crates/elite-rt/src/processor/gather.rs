//! The processor's side of a contended mutex's gathering (`sync::mutex`, "Gathering"): moving
//! the running ULT to a saturated lock's home processor.

use super::Processor;
use crate::atomics::Ordering;
use crate::current::current_processor;
use crate::tcb::TcbRef;

/// The gathering rule of a contended mutex (`sync::mutex`, "Gathering"): moves the running ULT to
/// the processor named `home` (a processor's address, as a mutex's bias names its owner), where
/// it goes on after the switch (`now`: the time stamp of the call). True if it moved; false, with
/// nothing done, outside a ULT, for a pinned ULT or one that moved less than `min_gap` ticks ago
/// (two saturated locks with two homes would otherwise move it at every call), in a `central`
/// runtime or one built with `gather_locks(false)`, or when `home` is the caller's processor,
/// none of its runtime's, or parked.
#[cold]
#[inline(never)]
pub(crate) fn gather_to(home: usize, now: u64, min_gap: u64) -> bool {
    let Some(p) = current_processor() else { return false };
    if !p.gather_locks || std::ptr::eq(p, home as *const Processor) {
        return false;
    }
    let Some(me) = p.current_ult() else { return false };
    let tcb = me.tcb();
    if tcb.pinned.get() || (now.wrapping_sub(tcb.moved_at.get()) as i64) < min_gap as i64 {
        return false;
    }
    let Some(target) = p.shared.processors.iter().position(|r| r.name.load(Ordering::Relaxed) == home) else {
        return false;
    };
    if p.shared.processors[target].park.is_parked() {
        return false; // the lock is not busy there; waking its home would cost more
    }
    tcb.moved_at.set(now);
    // SAFETY: `me` is the ULT running this code.
    unsafe { crate::switch::park_ult(me, move |t, q| q.send_home(t, target)) };
    true
}

impl Processor {
    /// After `t` switched out to move to processor `target` (`gather_to`): onto its wake-up
    /// stack, marked as homing (so that its drain wakes no helper), waking `target` if it sleeps.
    fn send_home(&self, t: TcbRef, target: usize) {
        self.remote().stats.gathered.bump();
        self.core().sent_home += 1;
        t.tcb().homing.set(true);
        self.shared.push_wakeup(t, target); // (no helper wanted: see `maintain`)
    }
}
