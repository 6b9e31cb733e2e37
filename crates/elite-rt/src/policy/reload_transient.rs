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
        match here.model {
            Some(model) => key(&ult.footprint, model, here.processor, here.clock),
            None => WOKEN_KEYS,
        }
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

/// The key of a ULT whose footprint is `footprint` entering the runqueue of `processor`, whose
/// miss clock reads `clock`: [`ReloadTransient::priority`] on plain values (the runtime computes
/// it itself).
#[inline(always)]
pub(crate) fn key(footprint: &Footprint, model: &CacheModel, processor: usize, clock: u64) -> u64 {
    /// Above every scaled reload transient of a footprint recorded with `model` (below 2^39, see
    /// `key`), and far below `i64::MAX`.
    const LIMIT: f32 = (1u64 << 62) as f32;
    let reload = footprint.reload_transient_on(model, processor, clock);
    if reload == 0.0 {
        // What the conversion below gives for 0 (the common case where working sets stay
        // cached), without it.
        return u64::MAX;
    }
    // The reload transient of a footprint recorded with this model is finite and in `[0, N
    // H(N)]`, below 2^24 × 17 misses for the largest model, so the scaled value is below 2^39
    // and this comparison (one `minss`) keeps it as it is; it only bounds what a footprint of
    // another model could give (and takes NaN, for which `<` is false, to `LIMIT`), so that the
    // conversion below is defined. The key is then at least `u64::MAX - 2^62`, far above every
    // yielder's (below `WOKEN_KEYS`).
    let scaled = reload * SCALE;
    let scaled = if scaled < LIMIT { scaled } else { LIMIT };
    debug_assert!(scaled >= 0.0, "{reload}");
    // SAFETY: `scaled` is not NaN and at most 2^62 (above), and not below 0 (the model's reload
    // transient is clamped at 0), so its whole part fits an `i64`. One `cvttss2si`, where the
    // saturating `as` adds a range check and a NaN check (eight instructions per enqueue).
    let scaled = unsafe { scaled.to_int_unchecked::<i64>() };
    u64::MAX - scaled as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `key` (with its shortcut for a reload transient of 0) is the scaled reload transient,
    /// for footprints on two processors with clocks at and past their runs' ends.
    #[test]
    fn the_key_is_the_scaled_reload_transient() {
        let model = CacheModel::new(32768, 64).expect("valid");
        let mut zeros = 0;
        for (misses, elapsed) in [(0, 0), (16, 0), (16, 1), (1024, 5000), (40_000, 0), (3, 1 << 20)] {
            let mut footprint = Footprint::EMPTY;
            footprint.record_run(&model, 1, 0.0, misses, 100);
            for processor in 0..2 {
                let clock = 100 + elapsed;
                let reload = footprint.reload_transient_on(&model, processor, clock);
                let want = u64::MAX - (reload * SCALE) as u64;
                assert_eq!(key(&footprint, &model, processor, clock), want, "{misses} {elapsed} {processor}");
                zeros += usize::from(reload == 0.0);
            }
        }
        assert!(zeros >= 3);
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
        // A ULT with nothing cached anywhere costs nothing to reload.
        assert_eq!(key(Footprint::EMPTY), u64::MAX);
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
