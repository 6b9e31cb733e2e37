//! The cache model of ELiTE (section 3.1; DESIGN.md §5): how many of a ULT's cache lines a run
//! brings in, how many survive other ULTs' runs, and what it costs to bring them back.
//!
//! A cache of `N` lines is a Markov chain per ULT whose state `k` is the number of the ULT's lines
//! in the cache (`0..=N`). Each miss places one line in a slot chosen uniformly at random:
//!
//! - a miss of the running ULT gains it a line with probability `(N - k) / N` (the slot held
//!   someone else's line) and otherwise replaces one of its own; from `v` lines, after `m` misses
//!   it expects the *footprint* `f = N - (N - v)(1 - 1/N)^m`;
//! - a miss of another ULT evicts one of a waiting ULT's lines with probability `k / N`; after
//!   `o` such *foreign* misses a footprint `f` expects `v = f (1 - 1/N)^o` lines still valid;
//! - the *reload transient* is the expected number of misses that grow `v` lines back to `f`:
//!   leaving state `k` takes `N / (N - k)` misses on average, so it is the sum of `N / (N - k)`
//!   over `k = v .. f - 1`, which is `N (H(N - v) - H(N - f))` with `H` the harmonic numbers.
//!
//! The expectations of the first two are exact because each step is linear in `k`. For
//! fractional `v` and `f` (expectations are not integers) the reload transient takes the standard
//! continuous harmonic numbers `H(x) = ψ(x + 1) + γ`, which equal the sum at integers.
//! [`closed_form`] evaluates all three in `f64`; the tests check them against powers of the
//! explicit transition matrices for `N = 4..=16`.
//!
//! # Tables
//!
//! The scheduler needs these at every end of a run and every wake-up, so [`CacheModel::new`]
//! builds two small tables once and the methods only look up, multiply and add:
//!
//! - **decay** `(1 - 1/N)^m` is not quantized at all: `m` is split into three 10-bit digits and
//!   `(1 - 1/N)^m` is the product of one entry per digit from three tables of 1024 `f32` (12 KiB);
//!   beyond `2^30` misses it is 0 (less than `e^-64` for every allowed `N`). Relative error
//!   `≤ 4e-7` from `f32` rounding, so [`footprint_after_run`](CacheModel::footprint_after_run) and
//!   [`still_valid`](CacheModel::still_valid) are within `1e-6 N` lines of the closed forms.
//! - **harmonic numbers** `H(x)` for `x` in `[0, N]` on a log-linear grid: steps of `1/64` below
//!   1, then 64 steps per power of two (the exponent and top six mantissa bits of `x` as an `f32`
//!   are the index), linearly interpolated; about `64 log2(N) + 128` entries (4.4 KiB for
//!   `N = 32768`). Interpolation error `≤ h² |H''| / 8`, at most `7.4e-5` below 1 and `3.1e-5`
//!   above, so [`reload_transient`](CacheModel::reload_transient) is within
//!   [`RELOAD_ERROR_BOUND`]` · N` misses of the closed form (5.2 misses for a 2 MiB cache of 64-byte
//!   lines). The interpolated `H` is increasing, so the table keeps the order of the closed form
//!   where it matters: more footprint or fewer valid lines never lowers the reload transient.
//!
//! Building both is a few thousand table entries, once per model (`cargo run --release -p
//! elite-affinity --example costs` times it on the host at hand).

use std::fmt;

/// Bound on `|table - closed form| / N` for [`CacheModel::reload_transient`]: `2 × 7.4e-5`
/// interpolation plus `f32` rounding, rounded up (checked by a test over `N` up to `2^24`).
pub const RELOAD_ERROR_BOUND: f64 = 1.6e-4;

/// Euler–Mascheroni constant γ.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Grid points per power of two (and per unit below 1) of the harmonic table.
const STEPS: usize = 64;
/// `log2(STEPS)`.
const STEP_BITS: u32 = 6;
/// Bits of each digit of a miss count in the decay tables.
const DIGIT_BITS: u32 = 10;
const DIGIT: usize = 1 << DIGIT_BITS;
/// Miss counts at or beyond this decay to 0.
const DECAY_LIMIT: u64 = 1 << (3 * DIGIT_BITS);

/// The closed forms of the model, in `f64`, for a cache of `lines` lines (`N`). Reference
/// implementations: the scheduler uses [`CacheModel`], which tabulates them.
pub mod closed_form {
    use super::EULER_GAMMA;

    /// Expected footprint after a run: a ULT with `valid` of its lines cached that takes
    /// `misses` misses expects `N - (N - valid)(1 - 1/N)^misses` lines in the cache.
    ///
    /// ```
    /// use elite_affinity::closed_form::footprint_after_run;
    /// assert_eq!(footprint_after_run(4.0, 0.0, 1.0), 1.0);
    /// assert!((footprint_after_run(4.0, 0.0, 2.0) - 1.75).abs() < 1e-12);
    /// ```
    pub fn footprint_after_run(lines: f64, valid: f64, misses: f64) -> f64 {
        lines - (lines - valid) * decay(lines, misses)
    }

    /// Expected lines still valid: a ULT whose footprint was `footprint` lines expects
    /// `footprint (1 - 1/N)^foreign_misses` of them cached after `foreign_misses` misses of
    /// others.
    ///
    /// ```
    /// use elite_affinity::closed_form::still_valid;
    /// assert!((still_valid(4.0, 2.0, 1.0) - 1.5).abs() < 1e-12);
    /// ```
    pub fn still_valid(lines: f64, footprint: f64, foreign_misses: f64) -> f64 {
        footprint * decay(lines, foreign_misses)
    }

    /// Expected reload transient: the misses that grow `valid` lines back to `footprint`,
    /// `N (H(N - valid) - H(N - footprint))`, which for integers is the sum of `N / (N - k)` over
    /// `k = valid .. footprint - 1`. 0 when `valid >= footprint`.
    ///
    /// ```
    /// use elite_affinity::closed_form::reload_transient;
    /// // 4 / 4 + 4 / 3 misses to go from 0 to 2 lines of a 4-line cache.
    /// assert!((reload_transient(4.0, 0.0, 2.0) - (1.0 + 4.0 / 3.0)).abs() < 1e-12);
    /// ```
    pub fn reload_transient(lines: f64, valid: f64, footprint: f64) -> f64 {
        if valid >= footprint {
            return 0.0;
        }
        lines * (harmonic(lines - valid) - harmonic(lines - footprint))
    }

    /// `(1 - 1/N)^m`, computed as `exp(m ln(1 - 1/N))` with `ln_1p` for precision.
    pub fn decay(lines: f64, misses: f64) -> f64 {
        (misses * (-1.0 / lines).ln_1p()).exp()
    }

    /// The harmonic number `H(x) = ψ(x + 1) + γ` for real `x >= 0` (`H(n) = 1 + 1/2 + ... +
    /// 1/n`), to about 1e-14: the recurrence `ψ(y) = ψ(y + 1) - 1/y` up to `y >= 10`, then the
    /// asymptotic series of ψ.
    ///
    /// ```
    /// use elite_affinity::closed_form::harmonic;
    /// assert!((harmonic(3.0) - (1.0 + 0.5 + 1.0 / 3.0)).abs() < 1e-13);
    /// assert_eq!(harmonic(0.0), 0.0);
    /// ```
    pub fn harmonic(x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        let mut y = x + 1.0;
        let mut shift = 0.0;
        while y < 10.0 {
            shift -= 1.0 / y;
            y += 1.0;
        }
        let r = 1.0 / (y * y);
        // ψ(y) ~ ln y - 1/2y - 1/12y² + 1/120y⁴ - 1/252y⁶ + 1/240y⁸ - 1/132y¹⁰
        let series = r * (1.0 / 12.0 - r * (1.0 / 120.0 - r * (1.0 / 252.0 - r * (1.0 / 240.0 - r / 132.0))));
        shift + y.ln() - 0.5 / y - series + EULER_GAMMA
    }
}

/// The cache model's tables for one cache size; build once (at runtime start-up), share by
/// reference, and call its methods on the hot path: each is a few loads, multiplications and
/// additions, allocation-free.
///
/// Lines are `f32` expectations. Every method clamps its line arguments to `[0, N]` (NaN counts
/// as 0), so the results are always in range.
///
/// ```
/// use elite_affinity::{CacheModel, ModelCache, Topology};
///
/// let topology = Topology::synthetic("2 cores, 2 MiB L2 per core")?;
/// let model = CacheModel::for_cache(&topology.model_cache())?;
/// assert_eq!(model.lines(), 32768);
///
/// // A ULT with nothing cached takes 1024 misses: almost all of them stay.
/// let footprint = model.footprint_after_run(0.0, 1024);
/// assert!((footprint - 1008.18).abs() < 0.01);
/// // Others then miss 32768 times (a whole cache's worth): about 1/e of it survives...
/// let valid = model.still_valid(footprint, 32768);
/// assert!((valid - 370.88).abs() < 0.01);
/// // ...and bringing the rest back costs a few more misses than the 637 lines lost, as some
/// // misses land on lines it already has (the closed form says 651.007).
/// let reload = model.reload_transient(valid, footprint);
/// assert!((reload - 651.007).abs() < 32768.0 * elite_affinity::RELOAD_ERROR_BOUND as f32);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CacheModel {
    lines: u32,
    line_size: u32,
    /// `lines` as `f32`.
    n: f32,
    /// Three tables of `DIGIT` entries: `(1 - 1/N)^(d << (10 i))` for digit `d` of table `i`.
    /// A fixed-size array, so that the masked indices of [`decay`](Self::decay) need no bounds
    /// checks, and in place (12 KiB; the runtime keeps the model behind one `Arc`), so that a
    /// lookup does not first load a pointer to it.
    decay: [f32; 3 * DIGIT],
    /// `H(x)` at the grid points of [`harmonic_index`].
    harmonic: Box<[f32]>,
}

impl CacheModel {
    /// The fewest lines a model accepts.
    pub const MIN_LINES: u64 = 2;
    /// The most lines a model accepts: 2^24, a 1 GiB cache of 64-byte lines.
    pub const MAX_LINES: u64 = 1 << 24;

    /// The tables for a cache of `lines` lines of `line_size` bytes.
    ///
    /// `lines` must be in `MIN_LINES..=MAX_LINES` and `line_size` at least 1.
    ///
    /// ```
    /// let model = elite_affinity::CacheModel::new(16384, 64)?;
    /// assert_eq!((model.lines(), model.line_size()), (16384, 64));
    /// assert!(elite_affinity::CacheModel::new(1, 64).is_err());
    /// # Ok::<(), elite_affinity::ModelError>(())
    /// ```
    pub fn new(lines: u64, line_size: u32) -> Result<CacheModel, ModelError> {
        if !(Self::MIN_LINES..=Self::MAX_LINES).contains(&lines) {
            return Err(ModelError {
                field: "lines",
                got: lines,
                min: Self::MIN_LINES,
                max: Self::MAX_LINES,
            });
        }
        if line_size == 0 {
            return Err(ModelError { field: "line_size", got: 0, min: 1, max: u64::from(u32::MAX) });
        }
        let n = lines as f64;
        let ln_q = (-1.0 / n).ln_1p();
        let mut decay = [0f32; 3 * DIGIT];
        for (i, entry) in decay.iter_mut().enumerate() {
            let (table, digit) = (i / DIGIT, i % DIGIT);
            let unit = (1u64 << (DIGIT_BITS as usize * table)) as f64;
            *entry = (digit as f64 * unit * ln_q).exp() as f32;
        }
        let top = 63 - lines.leading_zeros() as usize; // floor(log2 N)
        let len = STEPS * (top + 2) + 1;
        let harmonic = (0..len).map(|i| closed_form::harmonic(grid_point(i)) as f32).collect();
        Ok(CacheModel { lines: lines as u32, line_size, n: lines as f32, decay, harmonic })
    }

    /// The model of `cache` (its [`lines`](crate::ModelCache::lines) and line size), usually
    /// [`Topology::model_cache`](crate::Topology::model_cache). Fails only for a cache outside
    /// `MIN_LINES..=MAX_LINES` lines.
    pub fn for_cache(cache: &crate::ModelCache) -> Result<CacheModel, ModelError> {
        CacheModel::new(cache.lines(), cache.line_size)
    }

    /// `N`, the number of lines of the modelled cache.
    #[inline]
    pub fn lines(&self) -> u32 {
        self.lines
    }

    /// The line size in bytes.
    #[inline]
    pub fn line_size(&self) -> u32 {
        self.line_size
    }

    /// The lines that `bytes` of data occupy: `bytes / line_size`, rounded up. Not capped at `N`:
    /// data larger than the cache is still that many lines to load.
    ///
    /// ```
    /// let model = elite_affinity::CacheModel::new(16384, 64)?;
    /// assert_eq!((model.lines_for(0), model.lines_for(1), model.lines_for(64 << 10)), (0, 1, 1024));
    /// # Ok::<(), elite_affinity::ModelError>(())
    /// ```
    #[inline]
    pub fn lines_for(&self, bytes: usize) -> u64 {
        (bytes as u64).div_ceil(u64::from(self.line_size))
    }

    /// `(1 - 1/N)^misses`: the fraction of a ULT's lines expected to survive `misses` foreign
    /// misses, and of the other lines expected to stay foreign through `misses` of its own.
    #[inline]
    pub fn decay(&self, misses: u64) -> f32 {
        if misses < DIGIT as u64 {
            // The common case on a scheduler's hot path (a run's misses, the foreign misses of
            // a short wait): one lookup.
            return self.decay[misses as usize];
        }
        if misses >= DECAY_LIMIT {
            return 0.0;
        }
        let m = misses as usize;
        let mask = DIGIT - 1;
        self.decay[m & mask]
            * self.decay[DIGIT + ((m >> DIGIT_BITS) & mask)]
            * self.decay[2 * DIGIT + (m >> (2 * DIGIT_BITS))]
    }

    /// The expected footprint after a run that began with `valid` lines cached and took `misses`
    /// misses: `N - (N - valid)(1 - 1/N)^misses`.
    #[inline]
    pub fn footprint_after_run(&self, valid: f32, misses: u64) -> f32 {
        self.grow_in_range(self.clamp(valid), misses)
    }

    /// The expected lines of a `footprint` still cached after `foreign_misses` misses of others:
    /// `footprint (1 - 1/N)^foreign_misses`.
    #[inline]
    pub fn still_valid(&self, footprint: f32, foreign_misses: u64) -> f32 {
        self.clamp(footprint) * self.decay(foreign_misses)
    }

    /// The expected misses to grow `valid` lines back to `footprint`, `N (H(N - valid) - H(N -
    /// footprint))`; 0 when `valid >= footprint`. Within [`RELOAD_ERROR_BOUND`]` · N` of
    /// [`closed_form::reload_transient`].
    #[inline]
    pub fn reload_transient(&self, valid: f32, footprint: f32) -> f32 {
        self.reload_transient_in_range(self.clamp(valid), self.clamp(footprint))
    }

    /// [`reload_transient`](Self::reload_transient) for arguments already in `[0, N]` (not NaN):
    /// the path of a [`Footprint`], whose lines the model keeps in range.
    #[inline]
    fn reload_transient_in_range(&self, valid: f32, footprint: f32) -> f32 {
        if valid >= footprint {
            return 0.0;
        }
        let high = self.harmonic_at(self.n - valid);
        let low = self.harmonic_at(self.n - footprint);
        // Not NaN (in-range arguments, a table of finite values): a comparison for `max`.
        let reload = self.n * (high - low);
        if reload < 0.0 {
            0.0
        } else {
            reload
        }
    }

    /// [`footprint_after_run`](Self::footprint_after_run) for `valid` already in `[0, N]` (not
    /// NaN): the same result, without clamping the argument again.
    #[inline]
    pub(crate) fn grow_in_range(&self, valid: f32, misses: u64) -> f32 {
        if misses == 0 {
            // The decay of 0 misses is exactly 1 (the table's first entry, `exp(0)`), and `x *
            // 1.0` is `x`: the general case below without the lookup and the product. Nor can
            // the result exceed `N`: `N - (N - valid)` rounds to at most `N`, and `valid` is at
            // most `N`. (Runs of no misses are the common case where working sets stay
            // cached: 99% of the runs of `elite-bench affinity --bench no_locality`.)
            let grown = self.n - (self.n - valid);
            return if grown < valid { valid } else { grown };
        }
        // Nothing here is NaN (`valid` in range, the decay in `[0, 1]`), so plain comparisons
        // (one instruction each) stand in for `max` and `min`, which also order NaNs.
        let grown = self.n - (self.n - valid) * self.decay(misses);
        let grown = if grown < valid { valid } else { grown };
        if grown > self.n {
            self.n
        } else {
            grown
        }
    }

    /// The reload transient of a `footprint` after `foreign_misses` misses of others: what
    /// [`reload_transient`](Self::reload_transient) gives for the lines
    /// [`still_valid`](Self::still_valid).
    #[inline]
    pub fn reload_transient_after(&self, footprint: f32, foreign_misses: u64) -> f32 {
        self.reload_transient(self.still_valid(footprint, foreign_misses), footprint)
    }

    /// `lines` clamped to `[0, N]`, NaN to 0.
    #[inline]
    pub(crate) fn clamp(&self, lines: f32) -> f32 {
        lines.max(0.0).min(self.n)
    }

    /// `H(x)` for `x` in `[0, N]` (not NaN), linearly interpolated between grid points. Its
    /// only callers pass `N` minus lines in `[0, N]`.
    #[inline]
    fn harmonic_at(&self, x: f32) -> f32 {
        debug_assert!((0.0..=self.n).contains(&x), "{x} outside [0, {}]", self.n);
        let (i, t) = harmonic_index(x);
        debug_assert!(i + 1 < self.harmonic.len());
        // SAFETY: for `x` in `[0, N]`, `harmonic_index` gives `i <= 64 + 64 floor(log2 N) + 63`
        // (below 1: `i < 64`; from `2^e` to `2^(e + 1)` with `e <= floor(log2 N)`: `64 + 64 e
        // + k`, `k < 64`), and the table has `64 (floor(log2 N) + 2) + 1` entries (`new`), so
        // `i + 1` is in bounds.
        let (low, high) = unsafe { (*self.harmonic.get_unchecked(i), *self.harmonic.get_unchecked(i + 1)) };
        low + t * (high - low)
    }
}

/// The grid point below `x >= 0` and how far `x` is towards the next (`0 <= t < 1`). Below 1 the
/// points are `j / 64`; from `2^e` to `2^(e + 1)` they are `2^e (1 + k / 64)`, at index
/// `64 + 64 e + k`, which are the exponent and the top six mantissa bits of `x` as an `f32`.
#[inline]
fn harmonic_index(x: f32) -> (usize, f32) {
    if x < 1.0 {
        let scaled = x * STEPS as f32;
        let i = scaled as usize;
        (i, scaled - i as f32)
    } else {
        const MANTISSA_BITS: u32 = 23;
        const LOW_BITS: u32 = MANTISSA_BITS - STEP_BITS;
        const BIAS: usize = 127;
        let bits = x.to_bits();
        // `x >= 1` is positive: `bits >> LOW_BITS` is the biased exponent `e + 127` times 64
        // plus the top six mantissa bits `k`, so `64 + 64 e + k` is it less `64 × 126` (two
        // instructions where taking the fields apart takes seven).
        let i = (bits >> LOW_BITS) as usize - STEPS * (BIAS - 1);
        let t = (bits & ((1 << LOW_BITS) - 1)) as f32 * (1.0 / (1u32 << LOW_BITS) as f32);
        (i, t)
    }
}

/// The `x` of grid point `i` (the inverse of [`harmonic_index`] at `t = 0`).
fn grid_point(i: usize) -> f64 {
    if i < STEPS {
        i as f64 / STEPS as f64
    } else {
        let exponent = (i - STEPS) / STEPS;
        let k = (i - STEPS) % STEPS;
        (1u64 << exponent) as f64 * (1.0 + k as f64 / STEPS as f64)
    }
}

impl fmt::Debug for CacheModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheModel")
            .field("lines", &self.lines)
            .field("line_size", &self.line_size)
            .field("table_entries", &(self.decay.len() + self.harmonic.len()))
            .finish()
    }
}

/// A [`CacheModel`] parameter out of range: which one, what it was, and the allowed range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelError {
    field: &'static str,
    got: u64,
    min: u64,
    max: u64,
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cache model needs `{}` in {}..={}, got {}", self.field, self.min, self.max, self.got)
    }
}

impl std::error::Error for ModelError {}

/// What the cache model knows of one ULT: its expected lines in the cache of the processor it last
/// ran on, and that processor's miss clock (the total misses counted there, see
/// [`CounterSource::clock`](crate::CounterSource::clock)) when the run ended. 16 bytes, `Copy`:
/// keep one in each ULT.
///
/// The processor loop, per run (see the crate docs for the whole loop with a counter source):
///
/// ```
/// use elite_affinity::{CacheModel, Footprint};
///
/// let model = CacheModel::new(32768, 64)?;
/// let mut ult = Footprint::EMPTY;
/// // Run 1 on processor 0, whose clock reads 0: nothing cached; it takes 1000 misses.
/// let valid = ult.valid_on(&model, 0, 0);
/// ult.record_run(&model, 0, valid, 1000, 1000);
/// assert!((ult.lines() - 985.0).abs() < 1.0);
/// // Others take 5000 misses on processor 0 (clock 6000): what would it cost to run it now?
/// let on_0 = ult.reload_transient_on(&model, 0, 6000);
/// let on_1 = ult.reload_transient_on(&model, 1, 123);
/// assert!(on_0 < on_1, "processor 0 still holds some of its lines");
/// # Ok::<(), elite_affinity::ModelError>(())
/// ```
///
/// Its lines are always in `[0, N]` and never NaN: only [`Footprint::EMPTY`] and the model's own
/// results (clamped) are stored in it, which lets the hot paths skip clamping them again.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Footprint {
    pub(crate) lines: f32,
    /// `NONE` before the first run.
    pub(crate) processor: u32,
    pub(crate) clock: u64,
}

impl Footprint {
    const NONE: u32 = u32::MAX;

    /// A ULT that has not run yet: nothing cached anywhere.
    pub const EMPTY: Footprint = Footprint { lines: 0.0, processor: Footprint::NONE, clock: 0 };

    /// The expected lines in the cache at the end of the last run.
    #[inline]
    pub fn lines(&self) -> f32 {
        self.lines
    }

    /// The processor of the last run, `None` before the first.
    #[inline]
    pub fn processor(&self) -> Option<usize> {
        (self.processor != Footprint::NONE).then_some(self.processor as usize)
    }

    /// The miss clock of [`processor`](Self::processor) when the last run ended.
    #[inline]
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// The expected lines still cached for a run on `processor`, whose miss clock now reads
    /// `clock`: the footprint decayed by the misses counted there since the last run ended, or 0
    /// when the last run was on another processor (or none).
    #[inline]
    pub fn valid_on(&self, model: &CacheModel, processor: usize, clock: u64) -> f32 {
        // No test for `NONE`: only `EMPTY` holds it (`record_in_range` stores at most `NONE - 1`),
        // and its 0 lines decay to 0 whatever the clocks, the answer for no processor.
        if self.processor as usize != processor {
            return 0.0;
        }
        // `lines` is in `[0, N]` (only `EMPTY` and the model's own results are stored here), so
        // `still_valid`'s clamp would change nothing.
        match clock.saturating_sub(self.clock) {
            // No miss counted here since the run ended: the decay of 0 misses is exactly 1 (the
            // table's first entry), so this is the product below without the lookup (the common
            // case at a run's start where working sets stay cached).
            0 => self.lines,
            elapsed => self.lines * model.decay(elapsed),
        }
    }

    /// The expected misses to rebuild the footprint in a run on `processor` whose clock reads
    /// `clock`: the Reload Transient policy's priority (lower runs first). Always inlined: the
    /// runtime computes it at every enqueue, where an out-of-line call would add its own
    /// instructions to each.
    #[inline(always)]
    pub fn reload_transient_on(&self, model: &CacheModel, processor: usize, clock: u64) -> f32 {
        // `valid_on`, with a shortcut. Both in `[0, N]`: `valid_on` decays `lines`, which the
        // model keeps in range.
        if self.processor as usize != processor {
            return model.reload_transient_in_range(0.0, self.lines);
        }
        match clock.checked_sub(self.clock) {
            Some(elapsed) if elapsed > 0 => {
                model.reload_transient_in_range(self.lines * model.decay(elapsed), self.lines)
            }
            // No miss counted here since the run ended here: every line is still valid (the
            // decay of 0 misses is exactly 1, so `valid_on` gives `lines`), and the reload
            // transient of all lines valid is 0. A shortcut past the decay's lookup, taken
            // often where runs miss little (about half the enqueues of `elite-bench affinity
            // --bench no_locality`).
            _ => 0.0,
        }
    }

    /// Records a run on `processor` that began with `valid_at_start` lines cached (from
    /// [`valid_on`](Self::valid_on) at its start), took `misses` misses, and ended with the
    /// processor's clock at `clock_after`.
    #[inline]
    pub fn record_run(
        &mut self,
        model: &CacheModel,
        processor: usize,
        valid_at_start: f32,
        misses: u64,
        clock_after: u64,
    ) {
        self.record_in_range(model, processor, model.clamp(valid_at_start), misses, clock_after);
    }

    /// [`record_run`](Self::record_run) with `valid_at_start` already in `[0, N]` (not NaN), as
    /// [`valid_on`](Self::valid_on) returns it.
    #[inline]
    pub(crate) fn record_in_range(
        &mut self,
        model: &CacheModel,
        processor: usize,
        valid_at_start: f32,
        misses: u64,
        clock_after: u64,
    ) {
        self.lines = model.grow_in_range(valid_at_start, misses);
        self.processor = u32::try_from(processor).unwrap_or(Footprint::NONE - 1);
        self.clock = clock_after;
    }
}

impl Default for Footprint {
    fn default() -> Footprint {
        Footprint::EMPTY
    }
}

#[cfg(test)]
mod tests;
