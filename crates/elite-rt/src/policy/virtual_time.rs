//! Virtual Time (ELiTE section 3.1): the ULT whose last run ended most recently here runs first.

use super::{Hooks, Needs, ProcessorView, UltInfo};

/// Each processor counts the runs that end on it and stamps the ULT with that count; a ULT
/// entering the runqueue of the processor it last ran on is keyed by its stamp (higher: more
/// recent: more of its data likely still cached), one that last ran elsewhere by 0, behind all of
/// those (ties run oldest entry first).
///
/// It needs no cache-miss information, so it works on any hardware, and costs a counter
/// increment and one store per run. ELiTE recommends it for machines of moderate size without
/// miss counters: it never behaves anomalously.
#[derive(Clone, Copy, Debug, Default)]
pub struct VirtualTime;

impl Hooks for VirtualTime {
    fn name(&self) -> &'static str {
        "virtual-time"
    }

    fn needs(&self) -> Needs {
        Needs::STAMPS
    }

    #[inline]
    fn priority(&self, ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
        if ult.last_processor == here.processor {
            ult.stamp
        } else {
            0
        }
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
        assert_eq!(p.priority(&elsewhere, &here), 0);
    }
}
