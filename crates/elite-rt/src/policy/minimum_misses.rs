//! Minimum Misses (ELiTE section 3.1): the ULT with the fewest cache misses in its last run runs
//! first.

use super::{hand_off, Hooks, Needs, ProcessorView, UltInfo, WakerInfo};

/// The key is `u64::MAX - misses`, with `misses` those of the ULT's last run as its processor's
/// counter source reported them (a hardware counter, or the estimator driven by the footprint
/// the ULT declared).
///
/// It favours ULTs that block often: short runs take few misses. With ULTs that all behave alike
/// it performs well in ELiTE's measurements, but the misses of the *last* run say nothing about
/// what is cached *now*, so where ULTs differ it can keep preferring the ones that block early
/// (ELiTE's "anomalous behaviour"), and where they do not its keys tie and ULTs run oldest entry
/// first. Costs the counter source's estimate (or, with a hardware counter, two reads) and the
/// cache model's update per run; no run count.
#[derive(Clone, Copy, Debug, Default)]
pub struct MinimumMisses;

impl Hooks for MinimumMisses {
    fn name(&self) -> &'static str {
        "minimum-misses"
    }

    fn needs(&self) -> Needs {
        // The misses, without the run count: the key reads neither stamps nor `vtime`.
        Needs { stamps: false, ..Needs::MISSES }
    }

    #[inline]
    fn priority(&self, ult: &UltInfo, _here: &ProcessorView<'_>) -> u64 {
        key(ult.misses)
    }

    /// The hand-off rule ([`hand_off`](super::hand_off)): home, unless a hand-off from another
    /// processor finds little of its data cached there.
    #[inline]
    fn wake_target(&self, ult: &UltInfo, waker: &WakerInfo, _state: &mut u64) -> usize {
        hand_off::target(ult.last_processor, waker)
    }
}

/// The key of a ULT whose last run took `misses`: [`MinimumMisses::priority`] on plain values
/// (the policy engine computes it with this too).
#[inline(always)]
pub(crate) fn key(misses: u64) -> u64 {
    u64::MAX - misses
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewest_misses_win() {
        let p = MinimumMisses;
        let here = ProcessorView::new(0, 1);
        let few = UltInfo::new(1, 0).with_misses(10);
        let many = UltInfo::new(2, 0).with_misses(1000);
        assert!(p.priority(&few, &here) > p.priority(&many, &here));
        assert_eq!(p.priority(&UltInfo::new(3, 0), &here), u64::MAX);
    }
}
