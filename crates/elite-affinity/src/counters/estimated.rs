//! The estimator: misses from declared footprints and the cache model.

use super::{CounterSource, RunInfo, SourceKind};
use crate::CacheModel;

/// Estimated misses for machines without a PMU.
///
/// A ULT that declared `footprint_bytes` of data is taken to touch each of its
/// `footprint_bytes / line_size` lines (rounded up) in a run, missing on every line the cache
/// model did not expect cached when the run began ([`RunInfo::valid_at_start`]):
///
/// `misses = max(0, lines - valid_at_start)`, rounded to the nearest integer.
///
/// A ULT that declared nothing takes 0 misses, so the cache-aware policies see no difference
/// between such ULTs. The clock is the sum of the estimates on this processor, so the foreign
/// misses a waiting ULT suffers are the other ULTs' estimated misses.
///
/// ```
/// use elite_affinity::{CacheModel, CounterSource, EstimatedSource, RunInfo};
///
/// let model = CacheModel::new(32768, 64)?;
/// let mut source = EstimatedSource::new(&model);
/// source.begin_run();
/// // 64 KiB is 1024 lines; the model expected 300 of them cached.
/// assert_eq!(source.end_run(&RunInfo::new(1, 64 << 10, 300.0)), 724);
/// # Ok::<(), elite_affinity::ModelError>(())
/// ```
#[derive(Clone, Debug)]
pub struct EstimatedSource {
    line_size: u64,
    /// `log2(line_size)` when it is a power of two: a shift instead of a division.
    line_shift: Option<u32>,
    kind: SourceKind,
    clock: u64,
}

impl EstimatedSource {
    /// An estimator for the cache `model` describes (its line size).
    pub fn new(model: &CacheModel) -> EstimatedSource {
        let line_size = u64::from(model.line_size());
        EstimatedSource {
            line_size,
            line_shift: line_size.is_power_of_two().then(|| line_size.trailing_zeros()),
            kind: SourceKind::Estimated { no_pmu: None },
            clock: 0,
        }
    }

    /// An estimator chosen because the hardware counter could not be opened, for `reason`; its
    /// kind shows as `"estimated (no PMU: <reason>)"`.
    pub fn without_pmu(model: &CacheModel, reason: impl Into<String>) -> EstimatedSource {
        EstimatedSource {
            kind: SourceKind::Estimated { no_pmu: Some(reason.into()) },
            ..EstimatedSource::new(model)
        }
    }

    /// The estimate for one run, without counting it.
    #[inline]
    pub fn estimate(&self, run: &RunInfo) -> u64 {
        let bytes = run.footprint_bytes as u64;
        let lines = match self.line_shift {
            Some(shift) => (bytes >> shift) + u64::from(bytes & (self.line_size - 1) != 0),
            None => bytes.div_ceil(self.line_size),
        };
        // NaN or negative `valid_at_start` counts as nothing cached. `lines` is below 2^59, so
        // the signed conversions (one instruction each on x86-64, where the unsigned ones take
        // several) are exact.
        let valid = run.valid_at_start.max(0.0);
        let missing = lines as i64 as f64 - f64::from(valid);
        if missing <= 0.0 {
            0
        } else {
            // Rounds half up, as `round` does for positive values, without `round`'s software
            // fallback on baseline x86-64 (about 25 instructions a run).
            (missing + 0.5) as i64 as u64
        }
    }
}

impl CounterSource for EstimatedSource {
    #[inline]
    fn kind(&self) -> &SourceKind {
        &self.kind
    }

    #[inline]
    fn begin_run(&mut self) -> u64 {
        self.clock
    }

    #[inline]
    fn end_run(&mut self, run: &RunInfo) -> u64 {
        let misses = self.estimate(run);
        self.clock = self.clock.saturating_add(misses);
        misses
    }

    #[inline]
    fn clock(&self) -> u64 {
        self.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{closed_form, Footprint};

    #[test]
    fn estimates_the_lines_not_cached() {
        let model = CacheModel::new(1024, 64).expect("valid");
        let source = EstimatedSource::new(&model);
        assert_eq!(source.estimate(&RunInfo::new(0, 0, 0.0)), 0, "nothing declared");
        assert_eq!(source.estimate(&RunInfo::new(0, 1, 0.0)), 1, "a byte is a line");
        assert_eq!(source.estimate(&RunInfo::new(0, 6400, 0.0)), 100);
        assert_eq!(source.estimate(&RunInfo::new(0, 6400, 99.6)), 0, "rounded");
        assert_eq!(source.estimate(&RunInfo::new(0, 6400, 150.0)), 0, "never negative");
        assert_eq!(source.estimate(&RunInfo::new(0, 6400, f32::NAN)), 100);
        assert_eq!(source.estimate(&RunInfo::new(0, usize::MAX, 0.0)), (usize::MAX as u64).div_ceil(64));
        // A line size that is not a power of two divides.
        let odd = EstimatedSource::new(&CacheModel::new(1024, 48).expect("valid"));
        assert_eq!(odd.estimate(&RunInfo::new(0, 96, 0.0)), 2);
        assert_eq!(odd.estimate(&RunInfo::new(0, 97, 0.0)), 3);
    }

    /// Two ULTs of 256 lines alternate on one processor with a 1024-line cache: each run misses
    /// the lines the other's last run evicted, as the model predicts, and the clock adds them up.
    /// Both working sets fit the cache, so the misses shrink run after run.
    #[test]
    fn alternating_ults_follow_the_model() {
        let model = CacheModel::new(1024, 64).expect("valid");
        let mut source = EstimatedSource::without_pmu(&model, "test");
        assert_eq!(source.kind().to_string(), "estimated (no PMU: test)");
        let mut ults = [Footprint::EMPTY; 2];
        let mut misses = Vec::new();
        for round in 0..6 {
            let id = round % 2;
            let clock = source.begin_run();
            let valid = ults[id].valid_on(&model, 0, clock);
            let m = source.end_run(&RunInfo::new(id as u64, 256 * 64, valid));
            ults[id].record_run(&model, 0, valid, m, source.clock());
            misses.push(m);
        }
        assert_eq!(&misses[..2], &[256, 256], "cold");
        // Run 1 left A with the model's footprint, of which B's 256 misses leave a share.
        let footprint = closed_form::footprint_after_run(1024.0, 0.0, 256.0);
        let valid = closed_form::still_valid(1024.0, footprint, 256.0);
        assert_eq!(misses[2], (256.0 - valid).round() as u64, "{misses:?}");
        assert!(misses[2..].windows(2).all(|w| w[1] < w[0] && w[1] > 0), "{misses:?}");
        assert_eq!(source.clock(), misses.iter().sum::<u64>());
    }
}
