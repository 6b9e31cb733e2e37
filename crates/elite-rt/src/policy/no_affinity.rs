//! No Affinity (ELiTE section 3.1): the runqueue is a stack, the ULT made ready last runs first.

use super::{Hooks, ProcessorView, UltInfo, WakerInfo};

/// LIFO scheduling without regard for caches; the baseline the affinity policies are measured
/// against. The key of a ULT is the processor's runqueue entry number, so the newest entry runs
/// first and a thief takes the oldest. It gathers nothing, so a run costs no bookkeeping, and
/// every push lands at the top of the runqueue in O(1).
///
/// A ULT woken by a hand-off (another ULT's unlock, release or send) goes to the waker's
/// processor: with no cache to return to, it follows the data its waker just handed over (the
/// object's line, a value, a lock), partners in a hand-off stay on one processor, and the wake
/// needs no other processor's wake-up stack; idle processors even the load by stealing. Woken
/// otherwise (a join, a timer, a thread outside the runtime), it goes where it last ran.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoAffinity;

impl Hooks for NoAffinity {
    fn name(&self) -> &'static str {
        "no-affinity"
    }

    #[inline]
    fn priority(&self, _ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
        key(here.seq)
    }

    #[inline]
    fn wake_target(&self, ult: &UltInfo, waker: &WakerInfo, _state: &mut u64) -> usize {
        target(ult.last_processor, waker.processor, waker.hand_off)
    }
}

/// The key of the processor's `seq`-th runqueue entry: [`NoAffinity::priority`] on plain values
/// (the policy engine computes it with this too).
#[inline(always)]
pub(crate) fn key(seq: u64) -> u64 {
    seq
}

/// Where a ULT last run on `home` goes when made ready from processor `waker` (`None`: outside
/// the runtime), by a hand-off from a ULT's own code when `hand_off`: [`NoAffinity::wake_target`]
/// on plain values.
#[inline(always)]
pub(crate) fn target(home: usize, waker: Option<usize>, hand_off: bool) -> usize {
    match waker {
        Some(p) if hand_off => p,
        _ => home,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_entry_has_the_highest_key() {
        let u = UltInfo::new(1, 0);
        let p = NoAffinity;
        assert!(p.priority(&u, &ProcessorView::new(0, 8)) > p.priority(&u, &ProcessorView::new(0, 7)));
        // Where and how recently it ran does not matter.
        let ran_here = UltInfo::new(2, 0).with_stamp(1000);
        assert_eq!(p.priority(&ran_here, &ProcessorView::new(0, 3)), 3);
    }
}
