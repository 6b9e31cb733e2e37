//! The estimator: misses from declared footprints and the cache model.

use super::{CounterSource, RunInfo, SourceKind};
use crate::{CacheModel, Footprint};

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

    /// The lines `bytes` of data occupy, rounded up: [`CacheModel::lines_for`] of the model this
    /// estimator was made for.
    #[inline]
    pub fn lines(&self, bytes: usize) -> u64 {
        let bytes = bytes as u64;
        match self.line_shift {
            Some(shift) => (bytes >> shift) + u64::from(bytes & (self.line_size - 1) != 0),
            None => bytes.div_ceil(self.line_size),
        }
    }

    /// The estimate for one run, without counting it.
    #[inline]
    pub fn estimate(&self, run: &RunInfo) -> u64 {
        let lines = self.lines(run.footprint_bytes);
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

impl EstimatedSource {
    /// A whole run of a ULT on `processor` that declared `footprint_bytes`, in one pass: the
    /// same as [`begin_run`](CounterSource::begin_run), [`Footprint::valid_on`] with the clock
    /// it returns, [`end_run`](CounterSource::end_run) and [`Footprint::record_run`] with the
    /// clock after it (the estimator's clock moves only at the end of a run, so the clock at
    /// the start is the clock now). Updates `footprint` and returns the run's misses.
    ///
    /// It gives what the four calls give, with less work: the lines of a [`Footprint`] are in
    /// range, so nothing is clamped twice, and the estimate is rounded in integers.
    ///
    /// ```
    /// use elite_affinity::{CacheModel, CounterSource, EstimatedSource, Footprint, RunInfo};
    ///
    /// let model = CacheModel::new(32768, 64)?;
    /// let (mut fused, mut apart) = (EstimatedSource::new(&model), EstimatedSource::new(&model));
    /// let (mut a, mut b) = (Footprint::EMPTY, Footprint::EMPTY);
    /// for run in 0..4 {
    ///     let bytes = 1000 * (run + 1);
    ///     let misses = fused.count_run(&model, &mut a, 0, bytes);
    ///     let valid = b.valid_on(&model, 0, apart.begin_run());
    ///     assert_eq!(misses, apart.end_run(&RunInfo::new(1, bytes, valid)));
    ///     b.record_run(&model, 0, valid, misses, apart.clock());
    ///     assert_eq!(a, b);
    /// }
    /// # Ok::<(), elite_affinity::ModelError>(())
    /// ```
    // Always inlined: a call would pass the footprint through memory, on every run's end.
    #[inline(always)]
    pub fn count_run(
        &mut self,
        model: &CacheModel,
        footprint: &mut Footprint,
        processor: usize,
        footprint_bytes: usize,
    ) -> u64 {
        self.count_run_of_lines(model, footprint, processor, self.lines(footprint_bytes))
    }

    /// [`count_run`](Self::count_run) of a ULT whose declared footprint is `lines` lines
    /// ([`lines`](Self::lines) of its bytes, which a caller that runs the ULT many times can
    /// keep instead of converting the bytes at every run).
    ///
    /// ```
    /// use elite_affinity::{CacheModel, CounterSource, EstimatedSource, Footprint};
    ///
    /// let model = CacheModel::new(32768, 64)?;
    /// let (mut bytes, mut lines) = (EstimatedSource::new(&model), EstimatedSource::new(&model));
    /// let (mut a, mut b) = (Footprint::EMPTY, Footprint::EMPTY);
    /// for run in 0..4 {
    ///     let size = 1000 * (run + 1);
    ///     let misses = bytes.count_run(&model, &mut a, 0, size);
    ///     assert_eq!(lines.count_run_of_lines(&model, &mut b, 0, lines.lines(size)), misses);
    ///     assert_eq!((a, bytes.clock()), (b, lines.clock()));
    /// }
    /// # Ok::<(), elite_affinity::ModelError>(())
    /// ```
    #[inline(always)]
    pub fn count_run_of_lines(
        &mut self,
        model: &CacheModel,
        footprint: &mut Footprint,
        processor: usize,
        lines: u64,
    ) -> u64 {
        let valid = footprint.valid_on(model, processor, self.clock);
        // `valid` is in `[0, N]` with `N <= 2^24` and not NaN (a footprint's lines decayed), so
        // its whole part fits a `u32` exactly and `valid - whole` is exact. With `lines - whole
        // = d >= 1`, `lines - valid = d - frac` rounds half up to `d` when `frac <= 0.5` and to
        // `d - 1` otherwise: the value `estimate` computes in `f64`, in integers. One saturating
        // subtraction gives it, and 0 when `lines <= whole` (`d <= 0`), as `estimate` does.
        debug_assert!((0.0..=CacheModel::MAX_LINES as f32).contains(&valid));
        // SAFETY: `valid` is finite and in `[0, 2^24]` (above), within `u32`'s range.
        let whole = unsafe { valid.to_int_unchecked::<u32>() };
        let frac = valid - whole as f32;
        let misses = lines.saturating_sub(u64::from(whole) + u64::from(frac > 0.5));
        if misses != 0 {
            self.clock = self.clock.saturating_add(misses);
            footprint.record_in_range(model, processor, valid, misses, self.clock);
        } else {
            // The clock stays (most runs, where the working sets stay cached); the model's
            // update of a run of no misses has a path of its own (`grow_in_range`).
            footprint.record_in_range(model, processor, valid, 0, self.clock);
        }
        misses
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

    /// `count_run` gives what `begin_run`, `valid_on`, `end_run` and `record_run` give, run
    /// after run, for ULTs of many sizes (below, around and above the cache, and bytes that are
    /// not whole lines) moving between processors, with line sizes a power of two or not.
    #[test]
    fn count_run_is_the_four_calls_in_one() {
        let mut x = 0x2545_F491_4F6C_DD1D_u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (lines, line_size) in [(1024, 64), (32768, 64), (100, 48), (2, 64)] {
            let model = CacheModel::new(lines, line_size).expect("valid");
            let (mut fused, mut apart) = (EstimatedSource::new(&model), EstimatedSource::new(&model));
            let mut ults = [(Footprint::EMPTY, Footprint::EMPTY); 8];
            for _ in 0..20_000 {
                let i = (next() % 8) as usize;
                let processor = (next() % 3 == 0) as usize;
                let bytes = match next() % 4 {
                    0 => 0,
                    1 => (next() % 64) as usize,
                    _ => (next() % (4 * lines * u64::from(line_size))) as usize,
                };
                let (a, b) = &mut ults[i];
                let misses = fused.count_run(&model, a, processor, bytes);
                let valid = b.valid_on(&model, processor, apart.begin_run());
                assert_eq!(
                    misses,
                    apart.end_run(&RunInfo::new(i as u64, bytes, valid)),
                    "{bytes} bytes, {valid} valid"
                );
                b.record_run(&model, processor, valid, misses, apart.clock());
                assert_eq!(a, b);
                assert_eq!(fused.clock(), apart.clock());
            }
        }
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
