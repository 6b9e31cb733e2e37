//! No Affinity (ELiTE section 3.1): the runqueue is a stack, the ULT made ready last runs first.

use super::{Hooks, ProcessorView, UltInfo};

/// LIFO scheduling without regard for caches; the baseline the affinity policies are measured
/// against. The key of a ULT is the processor's runqueue entry number, so the newest entry runs
/// first and a thief takes the oldest. It gathers nothing, so a run costs no bookkeeping, and
/// every push lands at the top of the runqueue in O(1).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoAffinity;

impl Hooks for NoAffinity {
    fn name(&self) -> &'static str {
        "no-affinity"
    }

    #[inline]
    fn priority(&self, _ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
        here.seq
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
