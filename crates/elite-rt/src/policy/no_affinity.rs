//! No Affinity (ELiTE section 3.1): the runqueue is a stack, the ULT made ready last runs first.

use super::{Policy, UltInfo};

/// LIFO scheduling without regard for caches; the baseline the affinity policies are measured
/// against. The key of a ULT is the processor's runqueue sequence number, so the newest entry wins
/// and a thief takes the oldest.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoAffinity;

impl Policy for NoAffinity {
    fn name(&self) -> &'static str {
        "no-affinity"
    }

    #[inline]
    fn priority(&self, _ult: &UltInfo, _processor: usize, seq: u64) -> u64 {
        seq
    }

    fn records_runs(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_entry_has_the_highest_key() {
        let u = UltInfo { id: 1, last_processor: 0 };
        let p = NoAffinity;
        assert!(p.priority(&u, 0, 8) > p.priority(&u, 0, 7));
        assert_eq!(p.wake_target(&u, Some(1)), 0);
        assert_eq!(p.steal_count(5), 3);
    }
}
