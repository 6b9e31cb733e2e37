//! Virtual Time (ELiTE section 3.1): the ULT whose last run ended most recently here runs first;
//! ULTs that yield take turns in rounds with the ULTs they ran with.

use super::rounds::{self, WOKEN_KEYS};
use super::{hand_off, Hooks, Needs, ProcessorView, UltInfo, WakerInfo};

/// Each processor counts the runs that end on it and stamps the ULT with that count; a ULT
/// entering the runqueue of the processor it last ran on is keyed by its stamp (higher: more
/// recent: more of its data likely still cached), one that last ran elsewhere by the lowest key
/// of those (ties run oldest entry first).
///
/// It needs no cache-miss information, so it works on any hardware, and costs a counter
/// increment, a few operations on the ULT's policy word and two stores per run. ELiTE
/// recommends it for machines of moderate size without miss counters: it never behaves
/// anomalously.
///
/// # Yields
///
/// A ULT that yields takes turns in *rounds* with the ULTs it last ran with (see
/// [`rounds`](super::rounds)): up to [`ROUND_RUNS`](super::ROUND_RUNS) runs each among a group
/// of at most [`ROUND_GROUP`](super::ROUND_GROUP) ULTs, the oldest group first, behind every ULT
/// made ready by a wake-up. On the adaptive-grid solver (21 375 patches that yield after each
/// sweep) this is what makes Virtual Time faster than No Affinity
/// (`crates/elite-grid/examples/adaptive_grid.rs`, "Why the policies differ").
#[derive(Clone, Copy, Debug, Default)]
pub struct VirtualTime;

impl Hooks for VirtualTime {
    fn name(&self) -> &'static str {
        "virtual-time"
    }

    fn needs(&self) -> Needs {
        Needs::STAMPS.with_rounds()
    }

    #[inline]
    fn priority(&self, ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
        key(ult.last_processor, ult.stamp, here.processor)
    }

    #[inline]
    fn yield_priority(&self, ult: &UltInfo, _here: &ProcessorView<'_>) -> u64 {
        rounds::yield_key(ult.state)
    }

    #[inline]
    /// The round's update ([`rounds`](super::rounds)); the runtime applies it itself at each
    /// run's end (the policy needs rounds, not the run hook), so this is for direct calls.
    fn record_run(&self, _ult: &UltInfo, here: &ProcessorView<'_>, state: &mut u64) {
        rounds::record_run(here, state);
    }

    #[inline]
    fn wake_target(&self, ult: &UltInfo, waker: &WakerInfo, state: &mut u64) -> usize {
        rounds::mark_woken(state);
        hand_off::target(ult.last_processor, waker)
    }
}

/// The key of a ULT last run on `last_processor`, stamped `stamp` there, entering the runqueue
/// of `here`: [`VirtualTime::priority`] on plain values (the runtime computes it itself).
#[inline(always)]
pub(crate) fn key(last_processor: usize, stamp: u64, here: usize) -> u64 {
    if last_processor == here {
        WOKEN_KEYS + stamp
    } else {
        WOKEN_KEYS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_recent_stamp_from_this_processor_wins() {
        let p = VirtualTime;
        let here = ProcessorView::new(1, 10).with_vtime(50);
        let recent = UltInfo::new(1, 1).with_stamp(40);
        let older = UltInfo::new(2, 1).with_stamp(12);
        let elsewhere = UltInfo::new(3, 0).with_stamp(49);
        assert!(p.priority(&recent, &here) > p.priority(&older, &here));
        assert!(p.priority(&older, &here) > p.priority(&elsewhere, &here));
    }

    #[test]
    fn yielders_rank_below_every_woken_ult() {
        let p = VirtualTime;
        let here = ProcessorView::new(0, 1).with_vtime(5000);
        let mut state = 0;
        p.record_run(&UltInfo::new(1, 0).with_stamp(5000), &here, &mut state);
        let yielder = UltInfo::new(1, 0).with_stamp(5000).with_state(state);
        let key = p.yield_priority(&yielder, &here);
        assert!(p.priority(&UltInfo::new(2, 0).with_stamp(1), &here) > key);
        assert!(p.priority(&UltInfo::new(3, 1), &here) > key, "also one that ran elsewhere");
        // A wake-up marks the round over.
        let mut woken = state;
        assert_eq!(p.wake_target(&yielder, &WakerInfo::new(Some(1)), &mut woken), 0);
        assert!(rounds::Round::unpack(woken).woken);
    }
}
