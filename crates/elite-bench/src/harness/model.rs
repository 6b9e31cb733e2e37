//! The data model of a measurement: what a workload produces ([`Sample`]), who runs it
//! ([`Contender`], with its [`Params`]), what a bench reports ([`Metric`]) and claims
//! ([`Target`]), and what comes out ([`Row`], [`BenchResult`], [`SuiteResults`]).

use std::time::Duration;

use serde_json::{json, Value};

/// Measured rounds per bench, after the warm-up round, unless `--reps` asks for another count:
/// the most samples a row holds.
pub const REPS: usize = 5;

/// The most measured rounds `--reps` and `--max-reps` accept.
pub const MAX_REPS: usize = 50;

/// The coverage of the intervals the target lines print: 95%.
pub const COVERAGE: f64 = 0.95;

/// What one run of a workload produced.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Nanoseconds per operation of the timed pass.
    pub ns_per_op: f64,
    /// The workload's answer (a sum, a count), compared with [`Contender::expected`].
    pub answer: u64,
}

impl Sample {
    /// A sample of a [`Metric::Count`] bench: `count` (for example simulated cache misses)
    /// travels in the `ns_per_op` field.
    pub fn count(count: u64, answer: u64) -> Sample {
        Sample { ns_per_op: count as f64, answer }
    }

    /// The sample of a pass of `ops` operations that took `elapsed` and answered `answer`.
    pub fn per_op(elapsed: Duration, ops: u64, answer: u64) -> Sample {
        Sample { ns_per_op: elapsed.as_nanos() as f64 / ops.max(1) as f64, answer }
    }
}

/// A workload: one call is one sample.
pub type Workload = Box<dyn FnMut() -> Result<Sample, String>>;

/// The parameters of a row; `processors` is always present.
#[derive(Clone, Debug)]
pub struct Params {
    /// Processors (elite), worker threads (may, rayon) or `GOMAXPROCS` (go) given to the system.
    pub processors: usize,
    /// The other parameters, in the order they were added.
    pub(super) values: Vec<(&'static str, Value)>,
}

impl Params {
    /// Parameters with only `processors`.
    pub fn new(processors: usize) -> Params {
        Params { processors, values: Vec::new() }
    }

    /// Adds the parameter `name`.
    pub fn with(mut self, name: &'static str, value: u64) -> Params {
        self.values.push((name, json!(value)));
        self
    }

    /// Adds the boolean parameter `name`.
    pub fn with_flag(mut self, name: &'static str, value: bool) -> Params {
        self.values.push((name, json!(value)));
        self
    }

    /// Adds the text parameter `name` (such as `regime: "short"`); text parameters also tell
    /// rows apart in the report's bench column.
    pub fn with_text(mut self, name: &'static str, value: &'static str) -> Params {
        self.values.push((name, json!(value)));
        self
    }

    /// The text parameter `name`, if there is one.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.values.iter().find(|(n, _)| *n == name).and_then(|(_, v)| v.as_str())
    }
}

/// One system at one set of parameters, within a bench.
pub struct Contender {
    /// `elite`, `elite/<variant>`, or a peer's name.
    pub system: &'static str,
    /// The parameters, reported with the row.
    pub params: Params,
    /// The right answer.
    pub expected: u64,
    /// The workload; each call is one sample.
    pub workload: Workload,
    /// Run once, in the first measured round only (no warm-up): for deterministic measurements
    /// such as simulated cache misses, which repetition would only make slower.
    pub once: bool,
}

impl Contender {
    /// A contender running `workload`, whose answer must be `expected`.
    pub fn new(
        system: &'static str,
        params: Params,
        expected: u64,
        workload: impl FnMut() -> Result<Sample, String> + 'static,
    ) -> Contender {
        Contender { system, params, expected, workload: Box::new(workload), once: false }
    }

    /// This contender, run only once (see [`Contender::once`](Contender#structfield.once)).
    pub fn run_once_only(mut self) -> Contender {
        self.once = true;
        self
    }
}

/// What a bench reports. Every workload measures nanoseconds per operation ([`Sample`]); the
/// metric says how a row turns that into the number it reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// Nanoseconds per operation (lower is better).
    NsPerOp,
    /// Operations per second (higher is better).
    OpsPerSec,
    /// Operations per second divided by the row's `processors` (higher is better); named
    /// `ops_per_sec` in the JSON document, whose `params.processors` says what it was divided by.
    OpsPerSecPerProcessor,
    /// A ratio of two rows of the same bench, derived after the run (see
    /// [`Target::WithinOfBest`]); lower is better; the name is the JSON metric.
    Ratio(&'static str),
    /// A count per run, such as simulated cache misses (see [`Sample::count`]); lower is
    /// better; the name is the JSON metric (`ll_misses`).
    Count(&'static str),
    /// Seconds a whole run took (a sample of one operation, [`Sample::per_op`] with `ops` 1);
    /// lower is better; named `seconds` in the JSON document.
    Seconds,
}

impl Metric {
    /// The metric's name in the JSON document.
    pub fn name(self) -> &'static str {
        match self {
            Metric::NsPerOp => "ns_per_op",
            Metric::OpsPerSec | Metric::OpsPerSecPerProcessor => "ops_per_sec",
            Metric::Seconds => "seconds",
            Metric::Ratio(name) | Metric::Count(name) => name,
        }
    }

    /// The value a row records for `sample`, measured with `processors` processors.
    pub(super) fn value(self, sample: &Sample, processors: usize) -> f64 {
        match self {
            Metric::NsPerOp | Metric::Ratio(_) | Metric::Count(_) => sample.ns_per_op,
            Metric::OpsPerSec => 1e9 / sample.ns_per_op,
            Metric::OpsPerSecPerProcessor => 1e9 / sample.ns_per_op / processors.max(1) as f64,
            Metric::Seconds => sample.ns_per_op / 1e9,
        }
    }

    /// `value` as a cost: lower is better whatever the metric (a time, or the inverse of a rate).
    pub(super) fn cost(self, value: f64) -> f64 {
        match self {
            Metric::NsPerOp | Metric::Ratio(_) | Metric::Count(_) | Metric::Seconds => value,
            Metric::OpsPerSec | Metric::OpsPerSecPerProcessor => 1.0 / value,
        }
    }
}

/// A claim about elite's median, checked and printed after the table. A target that compares
/// elite with a peer uses the peer's row at the same processor count when there is one, else
/// the peer's first row. A target that compares two rows compares them round by round (see
/// [`Row::ratio_to`]): its ratio is the median of the per-round ratios, printed with their
/// range and, from 6 rounds on, the 95% interval of the median, `2.14x (1.90-2.60, 95%:
/// 1.95-2.40)`. The verdict is the median's, `met` or `MISSED`, followed by `undecided at 95%`
/// when the interval contains the bound, or `no 95% interval from 5 rounds` when the rounds are
/// too few for one (see [`Ratio::verdict`]).
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// elite (at `processors`) takes at most `times` the peer's time: `elite = 2.14x peer`.
    EliteAtMost {
        /// The peer's system name.
        peer: &'static str,
        /// The processor count of the elite row compared.
        processors: usize,
        /// The largest acceptable elite/peer ratio.
        times: f64,
    },
    /// The peer takes at least `times` elite's time (at `processors`): `peer/elite = 18x`; with a
    /// rate metric, elite's rate is at least `times` the peer's: `elite = 1.30x the rate of peer`.
    PeerAtLeast {
        /// The peer's system name.
        peer: &'static str,
        /// The processor count of the elite row compared.
        processors: usize,
        /// The smallest acceptable peer/elite ratio of times.
        times: f64,
    },
    /// elite's median (at `processors`) is at least `value`, in the bench's metric (a rate).
    EliteAtLeast {
        /// The processor count of the elite row.
        processors: usize,
        /// The smallest acceptable median.
        value: f64,
    },
    /// `system` costs at most `times` what the best of `others` (the one with the lowest median
    /// cost) costs, among the rows whose text parameter `tag.0` is `tag.1`. Besides its line,
    /// this target adds a row to the bench: `system`, metric [`Metric::Ratio`]`(metric)`, the
    /// params of `system`'s row plus `best` (the best other's name), and as samples the ratio
    /// of `system`'s cost to the best's cost in each round (the rounds are interleaved, so each
    /// ratio compares runs made side by side). The row fails when a row it is made of failed.
    WithinOfBest {
        /// The system judged.
        system: &'static str,
        /// The systems it is judged against.
        others: &'static [&'static str],
        /// The text parameter that selects the rows compared.
        tag: (&'static str, &'static str),
        /// The largest acceptable ratio.
        times: f64,
        /// The JSON metric name of the derived row.
        metric: &'static str,
    },
    /// `subject` divided by `baseline`, in the bench's metric (a rate's ratio for a rate, a
    /// count's for a count), rows at `processors` only, is within `bound`:
    /// `best of a, b: a = 1.45x (1.30-1.60) base (target >= 1.3x: met)`. The ratio is the median
    /// over the rounds of the ratio of the two rows' samples of each round, and the line shows
    /// their min and max; where the rows' rounds cannot be paired (a row measured once against
    /// one measured every round), the ratio of their medians, and the line says so (see
    /// [`Row::ratio_to`]). A baseline with one row only (a sequential reference at 1 processor)
    /// is compared at every processor count, round by round too.
    Relative {
        /// The rows judged.
        subject: Subject,
        /// The system they are compared with.
        baseline: &'static str,
        /// The processor count of every row compared.
        processors: usize,
        /// The bound on each ratio.
        bound: Bound,
    },
}

/// The rows a [`Target::Relative`] judges.
#[derive(Clone, Copy, Debug)]
pub enum Subject {
    /// The best of these systems: the one whose ratio to the baseline (the median of the
    /// per-round ratios, see [`Target::Relative`]) is best in the bench's metric.
    Best(&'static [&'static str]),
    /// Each of these systems.
    Each(&'static [&'static str]),
}

/// The bound of a [`Target::Relative`] on its ratio (and, see [`Target::bound`], of every target
/// on what it judges).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// At least this ratio.
    AtLeast(f64),
    /// At most this ratio.
    AtMost(f64),
}

impl Bound {
    /// Whether `ratio` is within the bound.
    pub(super) fn holds(self, ratio: f64) -> bool {
        match self {
            Bound::AtLeast(b) => ratio >= b,
            Bound::AtMost(b) => ratio <= b,
        }
    }
}

impl Target {
    /// The target's kind in the JSON document: `elite_at_most`, `peer_at_least`,
    /// `elite_at_least`, `within_of_best`, `best_of` or `each_of` (a [`Target::Relative`] with
    /// [`Subject::Best`] or [`Subject::Each`]).
    pub fn kind(&self) -> &'static str {
        match self {
            Target::EliteAtMost { .. } => "elite_at_most",
            Target::PeerAtLeast { .. } => "peer_at_least",
            Target::EliteAtLeast { .. } => "elite_at_least",
            Target::WithinOfBest { .. } => "within_of_best",
            Target::Relative { subject: Subject::Best(_), .. } => "best_of",
            Target::Relative { subject: Subject::Each(_), .. } => "each_of",
        }
    }

    /// The bound on what the target judges: a ratio for every kind but
    /// [`Target::EliteAtLeast`], whose bound is a value in the bench's metric.
    pub fn bound(&self) -> Bound {
        match *self {
            Target::EliteAtMost { times, .. } | Target::WithinOfBest { times, .. } => Bound::AtMost(times),
            Target::PeerAtLeast { times, .. } => Bound::AtLeast(times),
            Target::EliteAtLeast { value, .. } => Bound::AtLeast(value),
            Target::Relative { bound, .. } => bound,
        }
    }

    /// What selects the rows the target compares, as the JSON object of its `params`:
    /// `{"processors": n}`, or for a [`Target::WithinOfBest`] its text parameter
    /// (`{"regime": "short"}`).
    pub fn params(&self) -> Value {
        match *self {
            Target::EliteAtMost { processors, .. }
            | Target::PeerAtLeast { processors, .. }
            | Target::EliteAtLeast { processors, .. }
            | Target::Relative { processors, .. } => json!({ "processors": processors }),
            Target::WithinOfBest { tag: (name, value), .. } => json!({ name: value }),
        }
    }
}

/// A target judged on its bench's rows (see `report::judge`): its part of the target line, its
/// outcome, and the estimate behind the verdict of each system it judged.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// The target's part of the bench's target line, as printed.
    pub text: String,
    /// The verdict, or why there is none.
    pub outcome: Outcome,
    /// Each subject judged, in the target's order; empty when the target was not judged.
    pub subjects: Vec<Judged>,
    /// For the best of several ([`Subject::Best`]): the subject the line shows, whose ratio is
    /// the best.
    pub best: Option<&'static str>,
}

/// What became of a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Judged: the verdict.
    Judged(Verdict),
    /// Not judged: a row it compares failed (a wrong answer, an error, a panic).
    Failed,
    /// Not judged: a row it compares is absent (a peer that could not run, a system that
    /// `--policy` left out).
    Skipped,
}

impl Outcome {
    /// The verdict, for a judged target.
    pub fn verdict(self) -> Option<Verdict> {
        match self {
            Outcome::Judged(v) => Some(v),
            Outcome::Failed | Outcome::Skipped => None,
        }
    }
}

/// One system a target judged: the estimate its bound applies to, and that estimate's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    /// The system judged.
    pub system: &'static str,
    /// The system it was compared with (a peer, a baseline, the best of the others); `None` for
    /// a target on the system's own value ([`Target::EliteAtLeast`]).
    pub baseline: Option<String>,
    /// The ratio (or the value) and its spread, oriented as the target's bound reads it.
    pub ratio: Ratio,
    /// This system's verdict on its own (a target on several combines them).
    pub verdict: Verdict,
}

/// One workload measured on several systems.
pub struct Bench {
    /// The bench's name in the JSON document (`yield`, `spawn_join`, ...).
    pub name: &'static str,
    /// What the samples measure.
    pub metric: Metric,
    /// The systems, run in this order within each round.
    pub contenders: Vec<Contender>,
    /// The targets printed after the table.
    pub targets: Vec<Target>,
}

/// The outcome of one contender (or a row derived from others, see [`Target::WithinOfBest`]).
#[derive(Clone, Debug)]
pub struct Row {
    /// The bench's name.
    pub bench: &'static str,
    /// The system's name.
    pub system: &'static str,
    /// What the samples measure.
    pub metric: Metric,
    /// The contender's parameters.
    pub params: Params,
    /// The measured samples (the warm-up round excluded), sorted.
    pub(super) samples: Vec<f64>,
    /// The same samples in the order of the rounds that measured them: the `k`-th is from the
    /// `k`-th measured round in which the row ran, so two rows' `k`-th samples were measured side
    /// by side, and [`Row::ratio_to`] pairs them.
    pub(super) rounds: Vec<f64>,
    /// Why the row failed, if it did.
    pub(super) failure: Option<String>,
    /// Whether the row's contender runs once (see [`Contender::once`](Contender#structfield.once)):
    /// its one value is a deterministic count, which more rounds would not change.
    pub(super) once: bool,
}

impl Row {
    /// Whether every answer was right and every run succeeded.
    pub fn ok(&self) -> bool {
        self.failure.is_none() && !self.samples.is_empty()
    }

    /// The median sample, or `None` for a failed row.
    pub fn median(&self) -> Option<f64> {
        self.ok().then(|| median_of_sorted(&self.samples))
    }

    /// The smallest sample, or `None` for a failed row.
    pub fn min(&self) -> Option<f64> {
        self.ok().then(|| self.samples[0])
    }

    /// The largest sample, or `None` for a failed row.
    pub fn max(&self) -> Option<f64> {
        self.ok().then(|| self.samples[self.samples.len() - 1])
    }

    /// This row compared with `base`, `ratio(this row's value, base's value)`: the median over
    /// the rounds of the ratio of the two samples of each round, when both rows have every
    /// sample in round order and as many rounds; else the ratio of the medians. `None` when
    /// either row failed.
    ///
    /// Why per round: a shared host runs in phases (the same run can take half as long again in
    /// one minute as in the next), and the rounds interleave the systems, so two samples of one
    /// round share a phase far more often than two medians do. The ratio of medians compares
    /// whichever rounds each row's median fell in, and reads a system at parity as 0.7x when its
    /// middle rounds came in a slow phase; the median of per-round ratios does not.
    pub fn ratio_to(&self, base: &Row, ratio: impl Fn(f64, f64) -> f64) -> Option<Ratio> {
        let (subject, baseline) = (self.median()?, base.median()?);
        if self.once && base.once {
            return Some(Ratio::Once(ratio(subject, baseline)));
        }
        let in_order = |r: &Row| r.rounds.len() == r.samples.len();
        let ratios = if in_order(self) && in_order(base) {
            paired_sorted(&self.rounds, &base.rounds, &ratio)
        } else {
            None
        };
        Some(match ratios {
            Some(sorted) => Ratio::of_sorted(&sorted),
            None => Ratio::OfMedians(ratio(subject, baseline)),
        })
    }

    /// The row's own median as an estimate, with its range and its [`COVERAGE`] interval, for a
    /// target on one row (a value to reach, or a derived row of per-round ratios); `None` for a
    /// failed row.
    pub fn estimate(&self) -> Option<Ratio> {
        let median = self.median()?;
        Some(if self.once { Ratio::Once(median) } else { Ratio::of_sorted(&self.samples) })
    }
}

/// `ratio(a, b)` of the two samples of each round, `a` and `b` in round order, as (min,
/// median, max) over the rounds; `None` when they cannot be paired (no rounds, different
/// counts, or a ratio that is not finite). [`Row::ratio_to`] and the report's charts use it.
pub(crate) fn paired(a: &[f64], b: &[f64], ratio: impl Fn(f64, f64) -> f64) -> Option<(f64, f64, f64)> {
    let ratios = paired_sorted(a, b, ratio)?;
    Some((ratios[0], median_of_sorted(&ratios), ratios[ratios.len() - 1]))
}

/// The per-round ratios of [`paired`], sorted.
fn paired_sorted(a: &[f64], b: &[f64], ratio: impl Fn(f64, f64) -> f64) -> Option<Vec<f64>> {
    if a.is_empty() || a.len() != b.len() {
        return None;
    }
    let mut ratios: Vec<f64> = a.iter().zip(b).map(|(&a, &b)| ratio(a, b)).collect();
    if !ratios.iter().all(|r| r.is_finite()) {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    Some(ratios)
}

/// The rank `k` (1-based) of the distribution-free [`COVERAGE`] interval for the median of `n`
/// independent values: the `k`-th smallest and the `k`-th largest value, `X(k)` and
/// `X(n+1-k)`, with the largest `k` whose coverage `P(X(k) <= median <= X(n+1-k))` is at least
/// 95%. The coverage holds whatever the values' distribution: the count of values below the
/// median is binomial `(n, 1/2)`, and the interval misses the median when fewer than `k` lie on
/// one side of it, so the coverage is `1 - 2 P(B <= k-1)`, `B ~ Bin(n, 1/2)`. `None` when `n`
/// is too small for 95% even with the min and the max (`n <= 5`; at `n = 5` the min-max covers
/// `1 - 2/32 = 93.75%`). For example `n = 9` gives `k = 2` (coverage `1 - 2 (1+9)/512 = 96.1%`),
/// `n = 25` gives `k = 8`.
///
/// The values here are the per-round ratios of two rows: the interleaved rounds aim at making
/// them independent, but a host whose speed changes in phases makes neighbouring rounds alike,
/// so the interval is as good as the rounds are independent.
pub fn median_interval_rank(n: usize) -> Option<usize> {
    // Exact in integers: coverage >= 19/20 <=> 20 (2^n - 2 tail) >= 19 2^n, with tail =
    // sum_{i<k} C(n, i). u128 holds 20 2^n up to n = 123; past that, floats (no row has that
    // many rounds: MAX_REPS is 50).
    if n > 120 {
        return median_interval_rank_float(n);
    }
    let total: u128 = 1 << n;
    let (mut tail, mut choose, mut best) = (0u128, 1u128, None);
    for k in 1..=n.div_ceil(2) {
        // Here choose = C(n, k-1); tail becomes sum_{i <= k-1} C(n, i).
        tail += choose;
        if 2 * tail > total || 20 * (total - 2 * tail) < 19 * total {
            break;
        }
        best = Some(k);
        choose = choose * (n - (k - 1)) as u128 / k as u128;
    }
    best
}

/// [`median_interval_rank`] in floating point, for counts past the integers' range.
fn median_interval_rank_float(n: usize) -> Option<usize> {
    let (mut tail, mut p, mut best) = (0.0f64, 0.5f64.powi(n as i32), None);
    for k in 1..=n.div_ceil(2) {
        tail += p;
        if 1.0 - 2.0 * tail < COVERAGE {
            break;
        }
        best = Some(k);
        p = p * (n - (k - 1)) as f64 / k as f64;
    }
    best
}

/// The [`COVERAGE`] interval for the median of the values in `sorted` (see
/// [`median_interval_rank`]): `(X(k), X(n+1-k))`, or `None` when there are too few values.
pub fn median_interval(sorted: &[f64]) -> Option<(f64, f64)> {
    let k = median_interval_rank(sorted.len())?;
    Some((sorted[k - 1], sorted[sorted.len() - k]))
}

/// How two rows of one bench compare (see [`Row::ratio_to`]), or a row's own median as an
/// estimate (see [`Row::estimate`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ratio {
    /// The median, min and max over the rounds of the per-round ratio (or of a row's samples),
    /// with the [`COVERAGE`] interval of the median.
    Paired {
        /// The median of the per-round ratios.
        median: f64,
        /// The smallest per-round ratio.
        min: f64,
        /// The largest per-round ratio.
        max: f64,
        /// The distribution-free 95% interval for the median (see [`median_interval`]); `None`
        /// when the rounds are too few for one (5 or fewer).
        interval: Option<(f64, f64)>,
        /// How many rounds (ratios) there were.
        rounds: usize,
    },
    /// The ratio of the two rows' medians: their rounds could not be paired (a row measured
    /// once against one measured every round, or samples whose rounds are not known). No
    /// interval.
    OfMedians(f64),
    /// The ratio of two rows measured once each (deterministic counts such as simulated misses),
    /// or the one value of such a row: more rounds would not change it. No interval.
    Once(f64),
}

impl Ratio {
    /// The estimate of `sorted` values: their median, min, max and 95% interval.
    pub(super) fn of_sorted(sorted: &[f64]) -> Ratio {
        Ratio::Paired {
            median: median_of_sorted(sorted),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            interval: median_interval(sorted),
            rounds: sorted.len(),
        }
    }

    /// The estimate: the median of per-round ratios, or the ratio of medians.
    pub fn value(self) -> f64 {
        match self {
            Ratio::Paired { median, .. } => median,
            Ratio::OfMedians(ratio) | Ratio::Once(ratio) => ratio,
        }
    }

    /// The verdict of a bound on this estimate: met when `holds` holds of the median, and
    /// decided when it holds of both ends of the 95% interval or of neither (`holds` is a bound,
    /// `x >= b` or `x <= b`, so it then holds of every value in between, or of none).
    pub fn verdict(self, holds: impl Fn(f64) -> bool) -> Verdict {
        let certainty = match self {
            Ratio::Paired { interval: Some((lo, hi)), .. } if holds(lo) == holds(hi) => Certainty::Decided,
            Ratio::Paired { interval: Some(_), .. } => Certainty::Straddles,
            Ratio::Paired { interval: None, rounds, .. } => Certainty::TooFew(rounds),
            Ratio::OfMedians(_) | Ratio::Once(_) => Certainty::NoInterval,
        };
        Verdict { met: holds(self.value()), certainty }
    }
}

/// A target's verdict: met or missed, as its median says, and how sure that is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the median is within the bound.
    pub met: bool,
    /// Whether the 95% interval says the same.
    pub certainty: Certainty,
}

/// How sure a [`Verdict`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Certainty {
    /// The 95% interval lies wholly on the verdict's side of the bound.
    Decided,
    /// The 95% interval contains the bound: the verdict can go either way in another run.
    Straddles,
    /// This many rounds give no 95% interval (5 or fewer).
    TooFew(usize),
    /// The estimate has no interval and more rounds would not give it one: a ratio of medians,
    /// or of values measured once.
    NoInterval,
}

impl Certainty {
    /// The name in the JSON document: `decided`, `undecided` (the interval contains the bound),
    /// `too_few_rounds`, `no_interval`.
    pub fn name(self) -> &'static str {
        match self {
            Certainty::Decided => "decided",
            Certainty::Straddles => "undecided",
            Certainty::TooFew(_) => "too_few_rounds",
            Certainty::NoInterval => "no_interval",
        }
    }
}

impl Verdict {
    /// Whether more rounds could settle the verdict: its interval contains the bound, or there
    /// are too few rounds for an interval.
    pub fn undecided(self) -> bool {
        matches!(self.certainty, Certainty::Straddles | Certainty::TooFew(_))
    }

    /// The verdict of "every one of `verdicts` is met" (a target on each of several systems):
    /// met when each is met; decided as missed when one is decided as missed, as met when every
    /// one is decided as met. An estimate without an interval counts as decided here: more
    /// rounds would not change it. `None` for no verdicts.
    pub fn all(verdicts: &[Verdict]) -> Option<Verdict> {
        let first = verdicts.first()?;
        let met = verdicts.iter().all(|v| v.met);
        let sure = |v: &&Verdict| !v.undecided();
        let certainty = if let Some(missed) = verdicts.iter().filter(sure).find(|v| !v.met) {
            missed.certainty
        } else if verdicts.iter().all(|v| sure(&v)) {
            if verdicts.iter().any(|v| v.certainty == Certainty::Decided) {
                Certainty::Decided
            } else {
                first.certainty
            }
        } else if verdicts.iter().any(|v| v.certainty == Certainty::Straddles) {
            Certainty::Straddles
        } else {
            // Every undecided one has too few rounds; the fewest say how few.
            let fewest = verdicts.iter().filter_map(|v| match v.certainty {
                Certainty::TooFew(n) => Some(n),
                _ => None,
            });
            Certainty::TooFew(fewest.min().unwrap_or(0))
        };
        Some(Verdict { met, certainty })
    }

    /// The verdict of "at least one of `verdicts` is met" (a target on the best of several
    /// systems): met when one is met; decided as met when one is decided as met, as missed when
    /// every one is decided as missed. `None` for no verdicts.
    pub fn any(verdicts: &[Verdict]) -> Option<Verdict> {
        let negated: Vec<Verdict> = verdicts.iter().map(|v| Verdict { met: !v.met, ..*v }).collect();
        Verdict::all(&negated).map(|v| Verdict { met: !v.met, ..v })
    }
}

/// The median of a sorted, non-empty slice.
pub(crate) fn median_of_sorted(s: &[f64]) -> f64 {
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The rows of one bench, with its targets.
pub struct BenchResult {
    /// The bench's name.
    pub name: &'static str,
    /// What the contenders' samples measure.
    pub metric: Metric,
    /// One row per contender, in the bench's order.
    pub rows: Vec<Row>,
    /// The bench's targets.
    pub targets: Vec<Target>,
    /// How many measured rounds the bench ran.
    pub rounds: usize,
    /// Why it ran no more.
    pub stop: Stop,
    /// A cache line's round trip between the first two CPUs just before the bench's warm-up
    /// round and just after its last round, in nanoseconds
    /// ([`core_round_trip_ns`](crate::machine::core_round_trip_ns); `None`: not measured).
    pub core_round_trip_ns: [Option<f64>; 2],
}

/// Why a bench ran no more rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// It ran the rounds `--reps` asked for; no `--max-reps` was given.
    Reps,
    /// After at least `--reps` rounds, none of its targets was undecided at 95% (see
    /// [`Verdict::undecided`]).
    Decided,
    /// It ran `--max-reps` rounds with a target still undecided.
    MaxReps,
}

impl Stop {
    /// The name in the JSON document: `reps`, `decided`, `max_reps`.
    pub fn name(self) -> &'static str {
        match self {
            Stop::Reps => "reps",
            Stop::Decided => "decided",
            Stop::MaxReps => "max_reps",
        }
    }
}

impl BenchResult {
    /// The elite row at `processors`.
    pub(super) fn elite(&self, processors: usize) -> Option<&Row> {
        self.rows.iter().find(|r| r.system == "elite" && r.params.processors == processors)
    }

    /// The row of `system` at `processors`, else its first row.
    pub(super) fn system_at(&self, system: &str, processors: usize) -> Option<&Row> {
        let mut rows = self.rows.iter().filter(|r| r.system == system && r.metric == self.metric);
        let first = rows.clone().next();
        rows.find(|r| r.params.processors == processors).or(first)
    }
}

/// Everything a suite measured.
pub struct SuiteResults {
    /// One entry per bench, in the suite's order.
    pub benches: Vec<BenchResult>,
}

impl SuiteResults {
    /// Whether every row is ok.
    pub fn all_ok(&self) -> bool {
        self.benches.iter().flat_map(|b| &b.rows).all(Row::ok)
    }
}

/// A row of `elite` at 1 processor with these samples, measured in this order of rounds, for
/// the tests of the harness.
#[cfg(test)]
pub(super) fn row(samples: &[f64]) -> Row {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    Row {
        bench: "b",
        system: "elite",
        metric: Metric::NsPerOp,
        params: Params::new(1),
        samples: sorted,
        rounds: samples.to_vec(),
        failure: None,
        once: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(row(&[1.0, 2.0, 9.0]).median(), Some(2.0));
        assert_eq!(row(&[1.0, 2.0, 4.0, 9.0]).median(), Some(3.0));
        assert_eq!(row(&[]).median(), None);
    }

    /// Two systems at parity on a host with a slow phase: per round the two take the same
    /// time, but the slow phase holds three of `a`'s five rounds and two of `b`'s (it began
    /// between `b`'s and `a`'s run of round 3). The ratio of medians reads 2x; every round
    /// reads between 1x and 2x, and their median 1x.
    #[test]
    fn per_round_ratios_see_through_a_slow_phase() {
        let a = row(&[1.0, 1.0, 2.0, 2.0, 2.0]);
        let b = row(&[1.0, 1.0, 1.0, 2.0, 2.0]);
        assert_eq!(a.median().unwrap() / b.median().unwrap(), 2.0);
        assert_eq!(
            a.ratio_to(&b, |a, b| a / b),
            Some(Ratio::Paired { median: 1.0, min: 1.0, max: 2.0, interval: None, rounds: 5 })
        );
        // Oriented by the caller: b's time over a's.
        assert_eq!(b.ratio_to(&a, |b, a| a / b).map(Ratio::value), Some(1.0));
    }

    #[test]
    fn rows_whose_rounds_cannot_be_paired_fall_back_to_the_ratio_of_medians() {
        let a = row(&[1.0, 1.0, 2.0, 2.0, 2.0]);
        // Measured once (a deterministic count): as many rounds as samples, but not a's.
        let once = row(&[1.0]);
        assert_eq!(a.ratio_to(&once, |a, b| a / b), Some(Ratio::OfMedians(2.0)));
        // Samples whose rounds are not known.
        let mut unknown = row(&[1.0, 1.0, 1.0, 2.0, 2.0]);
        unknown.rounds.clear();
        assert_eq!(a.ratio_to(&unknown, |a, b| a / b), Some(Ratio::OfMedians(2.0)));
        // A failed row has no ratio at all.
        let mut failed = row(&[1.0, 1.0, 1.0, 2.0, 2.0]);
        failed.failure = Some("wrong answer".into());
        assert_eq!(a.ratio_to(&failed, |a, b| a / b), None);
        assert_eq!(failed.ratio_to(&a, |a, b| a / b), None);
    }

    /// The ranks against the binomial sums by hand: coverage of (X(k), X(n+1-k)) is
    /// `1 - 2 sum_{i<k} C(n,i) / 2^n`.
    #[test]
    fn interval_ranks_are_the_widest_symmetric_pair_with_95_percent() {
        // n <= 5: even the min-max covers too little (n = 5: 1 - 2/32 = 0.9375).
        for n in 0..=5 {
            assert_eq!(median_interval_rank(n), None, "n = {n}");
        }
        // n = 6: k = 1 covers 1 - 2/64 = 0.969; k = 2 would cover 1 - 2 * 7/64 = 0.781.
        assert_eq!(median_interval_rank(6), Some(1));
        // n = 8: k = 1 covers 0.992; k = 2 covers 1 - 2 * 9/256 = 0.930.
        assert_eq!(median_interval_rank(8), Some(1));
        // n = 9: k = 2 covers 1 - 2 * 10/512 = 0.961; k = 3 covers 1 - 2 * 46/512 = 0.820.
        assert_eq!(median_interval_rank(9), Some(2));
        // n = 10: k = 2 covers 1 - 2 * 11/1024 = 0.979; k = 3, 1 - 2 * 56/1024 = 0.891.
        assert_eq!(median_interval_rank(10), Some(2));
        // n = 17: k = 5 covers 1 - 2 * 3214/131072 = 0.951; k = 6, 1 - 2 * 9402/131072 = 0.857.
        assert_eq!(median_interval_rank(17), Some(5));
        // n = 25: k = 8 covers 1 - 2 * 726206/2^25 = 0.957; k = 9, 1 - 2 * 1807781/2^25 = 0.892.
        assert_eq!(median_interval_rank(25), Some(8));
        // The integer and the floating-point computations agree wherever both apply.
        for n in 0..=120 {
            assert_eq!(median_interval_rank(n), median_interval_rank_float(n), "n = {n}");
        }
        // Large n: about n/2 - 0.98 sqrt(n) (the normal approximation), and still a rank.
        let k = median_interval_rank(400).expect("a rank");
        assert!((179..=181).contains(&k), "{k}");
    }

    #[test]
    fn the_interval_is_the_kth_smallest_and_kth_largest() {
        let nine: Vec<f64> = (1..=9).map(f64::from).collect();
        assert_eq!(median_interval(&nine), Some((2.0, 8.0)));
        assert_eq!(median_interval(&nine[..6]), Some((1.0, 6.0)));
        assert_eq!(median_interval(&nine[..5]), None);
        let r = row(&[9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0]).estimate();
        assert_eq!(
            r,
            Some(Ratio::Paired { median: 5.0, min: 1.0, max: 9.0, interval: Some((2.0, 8.0)), rounds: 9 })
        );
    }

    #[test]
    fn verdicts_are_decided_when_the_interval_is_on_one_side() {
        let ratio = |interval, rounds| Ratio::Paired { median: 1.2, min: 0.9, max: 1.6, interval, rounds };
        let at_least = |b: f64| move |r: f64| r >= b;
        // Wholly above 1.1: met, decided; wholly below 1.5: missed, decided.
        assert_eq!(
            ratio(Some((1.15, 1.3)), 9).verdict(at_least(1.1)),
            Verdict { met: true, certainty: Certainty::Decided }
        );
        assert_eq!(
            ratio(Some((1.15, 1.3)), 9).verdict(at_least(1.5)),
            Verdict { met: false, certainty: Certainty::Decided }
        );
        // Contains the bound: the median's verdict, undecided either way.
        let v = ratio(Some((1.0, 1.3)), 9).verdict(at_least(1.1));
        assert_eq!(v, Verdict { met: true, certainty: Certainty::Straddles });
        assert!(v.undecided());
        let v = ratio(Some((1.0, 1.3)), 9).verdict(at_least(1.25));
        assert_eq!(v, Verdict { met: false, certainty: Certainty::Straddles });
        // An end on the bound is within it.
        assert!(!ratio(Some((1.1, 1.3)), 9).verdict(at_least(1.1)).undecided());
        // Too few rounds, or no interval to be had.
        let v = ratio(None, 5).verdict(at_least(1.1));
        assert_eq!(v, Verdict { met: true, certainty: Certainty::TooFew(5) });
        assert!(v.undecided());
        let v = Ratio::OfMedians(0.9).verdict(at_least(1.0));
        assert_eq!(v, Verdict { met: false, certainty: Certainty::NoInterval });
        assert!(!v.undecided());
    }

    #[test]
    fn verdicts_combine_for_the_best_and_for_each() {
        let v = |met, certainty| Verdict { met, certainty };
        let (decided, straddles, few, none) =
            (Certainty::Decided, Certainty::Straddles, Certainty::TooFew(5), Certainty::NoInterval);
        // Best of: one decided as met decides it, whatever the others.
        assert_eq!(Verdict::any(&[v(false, straddles), v(true, decided)]), Some(v(true, decided)));
        // Met by a median whose interval straddles, the others missed: undecided.
        assert_eq!(Verdict::any(&[v(true, straddles), v(false, decided)]), Some(v(true, straddles)));
        // Every one decided as missed (or without interval): decided.
        assert_eq!(Verdict::any(&[v(false, decided), v(false, none)]), Some(v(false, decided)));
        assert_eq!(Verdict::any(&[v(false, none)]), Some(v(false, none)));
        // Missed, one too few rounds to tell.
        assert_eq!(Verdict::any(&[v(false, decided), v(false, few)]), Some(v(false, few)));
        // Each: one decided as missed decides it; all met but one straddling is undecided.
        assert_eq!(Verdict::all(&[v(true, straddles), v(false, decided)]), Some(v(false, decided)));
        assert_eq!(Verdict::all(&[v(true, decided), v(true, straddles)]), Some(v(true, straddles)));
        assert_eq!(Verdict::all(&[v(true, decided), v(true, decided)]), Some(v(true, decided)));
        assert_eq!(Verdict::all(&[v(true, few), v(true, straddles)]), Some(v(true, straddles)));
        assert_eq!(Verdict::all(&[]), None);
    }

    #[test]
    fn rows_measured_once_compare_exactly() {
        let mut a = row(&[3.0]);
        let mut b = row(&[4.0]);
        (a.once, b.once) = (true, true);
        assert_eq!(a.ratio_to(&b, |a, b| a / b), Some(Ratio::Once(0.75)));
        assert_eq!(a.estimate(), Some(Ratio::Once(3.0)));
        assert!(!Ratio::Once(0.75).verdict(|r| r <= 0.7).undecided());
    }
}
