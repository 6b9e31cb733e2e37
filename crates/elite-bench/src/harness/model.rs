//! The data model of a measurement: what a workload produces ([`Sample`]), who runs it
//! ([`Contender`], with its [`Params`]), what a bench reports ([`Metric`]) and claims
//! ([`Target`]), and what comes out ([`Row`], [`BenchResult`], [`SuiteResults`]).

use std::time::Duration;

use serde_json::{json, Value};

/// Measured rounds per bench, after the warm-up round, unless `--reps` asks for another count:
/// the most samples a row holds.
pub const REPS: usize = 5;

/// The most measured rounds `--reps` accepts.
pub const MAX_REPS: usize = 50;

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
/// range, `2.14x (1.90-2.60)`.
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

/// The bound of a [`Target::Relative`] on its ratio.
#[derive(Clone, Copy, Debug)]
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
#[derive(Debug)]
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
        let in_order = |r: &Row| r.rounds.len() == r.samples.len();
        let pairs =
            if in_order(self) && in_order(base) { paired(&self.rounds, &base.rounds, &ratio) } else { None };
        Some(match pairs {
            Some((min, median, max)) => Ratio::Paired { median, min, max },
            None => Ratio::OfMedians(ratio(subject, baseline)),
        })
    }
}

/// `ratio(a, b)` of the two samples of each round, `a` and `b` in round order, as (min,
/// median, max) over the rounds; `None` when they cannot be paired (no rounds, different
/// counts, or a ratio that is not finite). [`Row::ratio_to`] and the report's charts use it.
pub(crate) fn paired(a: &[f64], b: &[f64], ratio: impl Fn(f64, f64) -> f64) -> Option<(f64, f64, f64)> {
    if a.is_empty() || a.len() != b.len() {
        return None;
    }
    let mut ratios: Vec<f64> = a.iter().zip(b).map(|(&a, &b)| ratio(a, b)).collect();
    if !ratios.iter().all(|r| r.is_finite()) {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    Some((ratios[0], median_of_sorted(&ratios), ratios[ratios.len() - 1]))
}

/// How two rows of one bench compare (see [`Row::ratio_to`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ratio {
    /// The median, min and max over the rounds of the per-round ratio.
    Paired {
        /// The median of the per-round ratios.
        median: f64,
        /// The smallest per-round ratio.
        min: f64,
        /// The largest per-round ratio.
        max: f64,
    },
    /// The ratio of the two rows' medians: their rounds could not be paired (a row measured
    /// once against one measured every round, or samples whose rounds are not known).
    OfMedians(f64),
}

impl Ratio {
    /// The estimate: the median of per-round ratios, or the ratio of medians.
    pub fn value(self) -> f64 {
        match self {
            Ratio::Paired { median, .. } => median,
            Ratio::OfMedians(ratio) => ratio,
        }
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
        assert_eq!(a.ratio_to(&b, |a, b| a / b), Some(Ratio::Paired { median: 1.0, min: 1.0, max: 2.0 }));
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
}
