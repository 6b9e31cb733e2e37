//! Reload Transient (ELiTE section 3.1): the ULT expected to take the fewest misses to rebuild its
//! cache footprint runs first.

use super::rounds::{self, WOKEN_KEYS};
use super::{hand_off, Hooks, Needs, ProcessorView, UltInfo, WakerInfo};
use elite_affinity::{CacheModel, Footprint};

/// Fixed-point scale of the key: reload transients (in cache lines, at most a few times the
/// cache's lines) are kept to 1/1024 of a line.
const SCALE: f32 = 1024.0;

/// The Markov model of section 3.1 ([`elite_affinity::CacheModel`]): after each run the runtime
/// records the ULT's expected footprint (the lines it had cached at the start, grown by the
/// misses of the run); when the ULT enters a runqueue, the lines of it still valid are the
/// footprint decayed by the misses counted on that processor since its run ended (none when it
/// last ran elsewhere), and its key orders by the expected reload transient, the misses to grow
/// back from those to the footprint: lower runs first.
///
/// Where the model cannot tell ULTs apart, their reload transient is 0: no miss was counted on
/// the processor since their runs ended there, so the model expects all of each footprint still
/// cached (it saturates: in a real cache the ULT that ran longest ago is the coldest). Those run
/// newest entry first, by the processor's count of entries (No Affinity's order: the ULT made
/// ready last), above every ULT with something to reload: the order between different reload
/// transients is the model's. Where working sets stay cached most keys are such ties (as in
/// `elite-bench affinity --bench no_locality`): run in the order they entered the runqueue, the
/// runqueue's rule for equal keys, they ran oldest first, and the sweeps there took far longer
/// than No Affinity's; ordered by the stamp of the last run (Virtual
/// Time's order) their keys came in no order the runqueue's lanes keep, and its treap's
/// pushes cost more than the sweeps saved.
///
/// The key is computed once, at enqueue: later misses decay every waiting ULT by the same factor,
/// so the order among waiting ULTs changes little (the paper's argument for computing it only
/// then). The lookups are table reads of a few nanoseconds. ELiTE found it best on large NUMA
/// machines where memory latency dominates; its bookkeeping (two counter-source calls and the
/// model's update per run, a lookup per enqueue) is the highest of the four.
///
/// A ULT that yields takes turns in rounds with the ULTs it last ran with, behind every ULT made
/// ready by a wake-up, as under [`VirtualTime`](super::VirtualTime) (see
/// [`rounds`](super::rounds)): its reload transient right after its run is nil, so keyed by it
/// the yielder would run again at once.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReloadTransient;

impl Hooks for ReloadTransient {
    fn name(&self) -> &'static str {
        "reload-transient"
    }

    fn needs(&self) -> Needs {
        Needs::MISSES.with_rounds()
    }

    #[inline]
    fn priority(&self, ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
        key(&ult.footprint, here.seq, here.model, here.processor, here.clock)
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

/// Keys of a reload transient of 0 (all of the footprint expected still cached here, or nothing
/// to reload) lie at and above this, ordered by the processor's entry count; keys of a positive
/// reload transient lie below it.
pub(crate) const TIES: u64 = u64::MAX << RECENCY_BITS;

/// The bits of the entry count that order the keys of a reload transient of 0 (the count wraps
/// after 2^61 entries into one runqueue: at a billion a second, after 73 years).
const RECENCY_BITS: u32 = 61;

/// The key of a ULT whose footprint is `footprint` entering the runqueue of `processor` as its
/// `seq`-th entry, the processor's miss clock reading `clock`: [`ReloadTransient::priority`] on
/// plain values (the runtime computes it itself).
///
/// A reload transient of 0 is [`TIES`] plus `seq`: among the ULTs the model cannot tell apart
/// (its expected footprint still entirely valid: no miss counted here since their runs ended
/// here) the one made ready last runs first, as under No Affinity, not the one that entered the
/// runqueue first (in the real cache, the coldest). The keys of ties then rise with each entry,
/// so the runqueue keeps them at the high end of its top lane in O(1), as No Affinity's. A
/// positive reload transient is below `TIES`, lower for a larger one.
#[inline(always)]
pub(crate) fn key(
    footprint: &Footprint,
    seq: u64,
    model: Option<&CacheModel>,
    processor: usize,
    clock: u64,
) -> u64 {
    let Some(model) = model else {
        return WOKEN_KEYS; // (no model: no reload transient to tell ULTs apart)
    };
    /// Above every scaled reload transient of a footprint recorded with `model` (below 2^39, see
    /// `key`), and far below `i64::MAX`.
    const LIMIT: f32 = (1u64 << 62) as f32;
    let reload = footprint.reload_transient_on(model, processor, clock);
    if reload == 0.0 {
        // The common case where working sets stay cached: the newest entry first, above every
        // positive reload transient.
        return TIES | (seq & !TIES);
    }
    // The reload transient of a footprint recorded with this model is finite and in `[0, N
    // H(N)]`, below 2^24 × 17 misses for the largest model, so the scaled value is below 2^39
    // and this comparison (one `minss`) keeps it as it is; it only bounds what a footprint of
    // another model could give (and takes NaN, for which `<` is false, to `LIMIT`), so that the
    // conversion below is defined. The key is then at least `TIES - 1 - 2^62` (above 2^63 +
    // 2^61), far above every yielder's (below `WOKEN_KEYS`, 2^63).
    let scaled = reload * SCALE;
    let scaled = if scaled < LIMIT { scaled } else { LIMIT };
    debug_assert!(scaled >= 0.0, "{reload}");
    // SAFETY: `scaled` is not NaN and at most 2^62 (above), and not below 0 (the model's reload
    // transient is clamped at 0), so its whole part fits an `i64`. One `cvttss2si`, where the
    // saturating `as` adds a range check and a NaN check (eight instructions per enqueue).
    let scaled = unsafe { scaled.to_int_unchecked::<i64>() };
    // Below `TIES` even where the scaled value truncates to 0 (less than 1/1024 of a line).
    (TIES - 1) - scaled as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `key` (with its shortcut for a reload transient of 0) is the scaled reload transient below
    /// `TIES`, or `TIES` plus the entry count for a reload transient of 0, for footprints on two
    /// processors with clocks at and past their runs' ends.
    #[test]
    fn the_key_is_the_scaled_reload_transient_or_the_entry_count() {
        let model = CacheModel::new(32768, 64).expect("valid");
        let mut zeros = 0;
        for (misses, elapsed) in [(0, 0), (16, 0), (16, 1), (1024, 5000), (40_000, 0), (3, 1 << 20)] {
            let mut footprint = Footprint::EMPTY;
            footprint.record_run(&model, 1, 0.0, misses, 100);
            for processor in 0..2 {
                let clock = 100 + elapsed;
                let reload = footprint.reload_transient_on(&model, processor, clock);
                for seq in [0, 1, 77, (1 << 61) - 1, 1 << 61, u64::MAX] {
                    let want = if reload == 0.0 {
                        TIES + seq % (1 << 61)
                    } else {
                        TIES - 1 - (reload * SCALE) as u64
                    };
                    let got = key(&footprint, seq, Some(&model), processor, clock);
                    assert_eq!(got, want, "{misses} {elapsed} {processor} {seq}");
                    assert!(got > WOKEN_KEYS);
                }
                zeros += usize::from(reload == 0.0);
            }
        }
        assert!(zeros >= 3);
    }

    /// Among ULTs whose reload transient is 0 the newest entry runs first, and each of them
    /// before every ULT with something to reload.
    #[test]
    fn ties_run_newest_first() {
        let model = CacheModel::new(32768, 64).expect("valid");
        let p = ReloadTransient;
        // Runs that ended here at clock 5000 (none missed since), entering as the 10th and the
        // 20th entry.
        let mut intact = Footprint::EMPTY;
        intact.record_run(&model, 0, 0.0, 64, 5_000);
        let key = |f, seq| {
            p.priority(
                &UltInfo::new(1, 0).with_footprint(f),
                &ProcessorView::new(0, seq).with_clock(5_000, &model),
            )
        };
        assert!(key(intact, 20) > key(intact, 10));
        // 100 misses here since the run ended: a small reload transient, below every tie.
        let mut missed = Footprint::EMPTY;
        missed.record_run(&model, 0, 0.0, 64, 4_900);
        assert!(missed.reload_transient_on(&model, 0, 5_000) > 0.0);
        assert!(key(intact, 0) > key(missed, u64::MAX));
    }

    #[test]
    fn smallest_reload_transient_wins() {
        let model = CacheModel::new(32768, 64).expect("valid");
        let p = ReloadTransient;
        // Two ULTs of 1024 lines whose runs ended on processor 0 at clocks 1000 and 30000, and one
        // that ended on processor 1; processor 0's clock reads 31000.
        let mut recent = Footprint::EMPTY;
        recent.record_run(&model, 0, 0.0, 1024, 30_000);
        let mut older = Footprint::EMPTY;
        older.record_run(&model, 0, 0.0, 1024, 1_000);
        let mut elsewhere = Footprint::EMPTY;
        elsewhere.record_run(&model, 1, 0.0, 1024, 30_999);
        let here = ProcessorView::new(0, 1).with_clock(31_000, &model);
        let key = |f| p.priority(&UltInfo::new(1, 0).with_footprint(f), &here);
        assert!(key(recent) > key(older));
        assert!(key(older) > key(elsewhere));
        // A ULT with nothing cached anywhere costs nothing to reload: a tie (`here`: entry 1).
        assert_eq!(key(Footprint::EMPTY), TIES + 1);
        // Without a model (a misconfigured caller) every woken ULT gets the lowest woken key.
        assert_eq!(
            p.priority(&UltInfo::new(1, 0).with_footprint(recent), &ProcessorView::new(0, 1)),
            WOKEN_KEYS
        );
        // A yielder ranks below all of them.
        let mut state = 0;
        p.record_run(&UltInfo::new(1, 0), &here.with_vtime(3), &mut state);
        assert!(p.yield_priority(&UltInfo::new(1, 0).with_state(state), &here) < key(elsewhere));
    }
}
