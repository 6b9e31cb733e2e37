//! Measurement: interleaved repetitions, answer checks, the report table and the JSON document.
//!
//! A suite hands the harness a list of [`Bench`]es. Each bench has [`Contender`]s (one system
//! at one set of parameters) whose workload produces a [`Sample`]: the time per operation and
//! the workload's answer. [`run_suite`] runs, bench by bench, one warm-up round and then
//! [`REPS`] measured rounds, each round running every contender once in the bench's order, so
//! that drift of the machine touches all systems alike. A contender whose answer is wrong, or
//! whose workload errs or panics, is marked failed and not run again; its row reports the
//! failure and no time. A bench's [`Metric`] turns each sample into the number its rows report
//! (a time per operation, or a rate), and a [`Target::WithinOfBest`] adds a row derived from the
//! others, round by round, after the rounds.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::machine::Machine;

/// Measured rounds per bench, after the warm-up round.
pub const REPS: usize = 5;

/// How long one run of a workload may take before the command gives up on it: a hung runtime
/// ends the command with a message naming the run instead of hanging CI.
const RUN_TIME_LIMIT: Duration = Duration::from_secs(300);

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

/// Runs `pass` once untimed (warming caches, pools and allocators of a fresh instance) and
/// once more for the sample; `pass` returns the time its `ops` operations took and its answer.
pub fn warm_then_time<F>(ops: u64, mut pass: F) -> Result<Sample, String>
where
    F: FnMut() -> Result<(Duration, u64), String>,
{
    pass()?;
    let (elapsed, answer) = pass()?;
    Ok(Sample::per_op(elapsed, ops, answer))
}

thread_local! {
    /// Side values of the run in progress (see [`record_side`]).
    static SIDE: std::cell::RefCell<Vec<(&'static str, f64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Records a side value of the run in progress, besides its sample: a workload whose run also
/// yields other figures worth reporting (the grid's solve time and relaxations per cell) calls
/// this before it returns its sample. Each name becomes a row of its own next to the
/// contender's, metric [`Metric::Count`]`(name)` (lower is better), with the values of the
/// measured rounds; a row whose contender failed fails too.
pub fn record_side(name: &'static str, value: f64) {
    SIDE.with(|s| s.borrow_mut().push((name, value)));
}

/// Takes the side values recorded since the last call.
fn take_sides() -> Vec<(&'static str, f64)> {
    SIDE.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// A workload: one call is one sample.
pub type Workload = Box<dyn FnMut() -> Result<Sample, String>>;

/// The parameters of a row; `processors` is always present.
#[derive(Clone, Debug)]
pub struct Params {
    /// Processors (elite), worker threads (may, rayon) or `GOMAXPROCS` (go) given to the system.
    pub processors: usize,
    /// The other parameters, in the order they were added.
    values: Vec<(&'static str, Value)>,
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

    /// The text parameters as `name=value` words, for the report.
    fn text_words(&self) -> Vec<String> {
        self.values.iter().filter_map(|(n, v)| v.as_str().map(|v| format!("{n}={v}"))).collect()
    }

    /// The JSON object of the parameters.
    fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("processors".into(), json!(self.processors));
        for (name, value) in &self.values {
            object.insert((*name).into(), value.clone());
        }
        Value::Object(object)
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
}

impl Metric {
    /// The metric's name in the JSON document.
    pub fn name(self) -> &'static str {
        match self {
            Metric::NsPerOp => "ns_per_op",
            Metric::OpsPerSec | Metric::OpsPerSecPerProcessor => "ops_per_sec",
            Metric::Ratio(name) | Metric::Count(name) => name,
        }
    }

    /// The value a row records for `sample`, measured with `processors` processors.
    fn value(self, sample: &Sample, processors: usize) -> f64 {
        match self {
            Metric::NsPerOp | Metric::Ratio(_) | Metric::Count(_) => sample.ns_per_op,
            Metric::OpsPerSec => 1e9 / sample.ns_per_op,
            Metric::OpsPerSecPerProcessor => 1e9 / sample.ns_per_op / processors.max(1) as f64,
        }
    }

    /// `value` as a cost: lower is better whatever the metric (a time, or the inverse of a rate).
    fn cost(self, value: f64) -> f64 {
        match self {
            Metric::NsPerOp | Metric::Ratio(_) | Metric::Count(_) => value,
            Metric::OpsPerSec | Metric::OpsPerSecPerProcessor => 1.0 / value,
        }
    }

    /// How to show values near `value`: the divisor and the unit (`ns`, `Mop/s`, ...).
    fn unit(self, value: f64) -> (f64, &'static str) {
        match self {
            Metric::NsPerOp => time_unit(value),
            Metric::OpsPerSec => rate_unit(value, ["op/s", "kop/s", "Mop/s", "Gop/s"]),
            Metric::OpsPerSecPerProcessor => {
                rate_unit(value, ["op/s/proc", "kop/s/proc", "Mop/s/proc", "Gop/s/proc"])
            }
            Metric::Ratio(_) => (1.0, "x"),
            Metric::Count(_) => rate_unit(value, ["", "k", "M", "G"]),
        }
    }

    /// The unit column of the report for values near `value` (`ns/op`, `Mop/s`, `x`, `M
    /// ll_misses`).
    fn column_unit(self, value: f64) -> String {
        match self {
            Metric::NsPerOp => format!("{}/op", time_unit(value).1),
            Metric::Count(name) => format!("{} {name}", self.unit(value).1).trim_start().to_string(),
            _ => self.unit(value).1.to_string(),
        }
    }

    /// `value` with its unit, such as `9.10 ns`, `25.3 Mop/s/proc` or `1.04x`.
    fn format(self, value: f64) -> String {
        match self {
            Metric::Ratio(_) => format_ratio(value),
            Metric::Count(name) => {
                let (scale, unit) = self.unit(value);
                format!("{}{unit} {name}", three_digits(value / scale))
            }
            _ => {
                let (scale, unit) = self.unit(value);
                format!("{} {unit}", three_digits(value / scale))
            }
        }
    }
}

/// A claim about elite's median, checked and printed after the table. A target that compares
/// elite with a peer uses the peer's row at the same processor count when there is one, else
/// the peer's first row.
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
    /// The median of `subject` divided by the median of `baseline`, in the bench's metric (a
    /// rate's ratio for a rate, a count's for a count), rows at `processors` only, is within
    /// `bound`: `best of a, b: a = 1.45x base (target >= 1.3x: met)`.
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
    /// The best of these systems (by median, in the bench's metric).
    Best(&'static [&'static str]),
    /// Each of these systems.
    Each(&'static [&'static str]),
}

/// The bound of a [`Target::Relative`] on the ratio of medians.
#[derive(Clone, Copy, Debug)]
pub enum Bound {
    /// At least this ratio.
    AtLeast(f64),
    /// At most this ratio.
    AtMost(f64),
}

impl Bound {
    /// Whether `ratio` is within the bound.
    fn holds(self, ratio: f64) -> bool {
        match self {
            Bound::AtLeast(b) => ratio >= b,
            Bound::AtMost(b) => ratio <= b,
        }
    }

    /// `>= 1.3x`, `<= 0.7x`.
    fn describe(self) -> String {
        match self {
            Bound::AtLeast(b) => format!(">= {}", format_ratio(b)),
            Bound::AtMost(b) => format!("<= {}", format_ratio(b)),
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
    samples: Vec<f64>,
    /// Why the row failed, if it did.
    failure: Option<String>,
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

    /// The bench column of the report: the bench's name, the metric's for a derived row, and the
    /// text parameters, e.g. `spin_regimes ratio_to_best_fixed regime=short best=elite/spin`.
    fn label(&self) -> String {
        let metric = match self.metric {
            Metric::Ratio(name) => Some(name.to_string()),
            _ => None,
        };
        let words: Vec<String> =
            std::iter::once(self.bench.to_string()).chain(metric).chain(self.params.text_words()).collect();
        words.join(" ")
    }

    /// The smallest sample, or `None` for a failed row.
    pub fn min(&self) -> Option<f64> {
        self.ok().then(|| self.samples[0])
    }

    /// The largest sample, or `None` for a failed row.
    pub fn max(&self) -> Option<f64> {
        self.ok().then(|| self.samples[self.samples.len() - 1])
    }
}

/// The median of a sorted, non-empty slice.
fn median_of_sorted(s: &[f64]) -> f64 {
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
    fn elite(&self, processors: usize) -> Option<&Row> {
        self.rows.iter().find(|r| r.system == "elite" && r.params.processors == processors)
    }

    /// The row of `system` at `processors`, else its first row.
    fn system_at(&self, system: &str, processors: usize) -> Option<&Row> {
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

/// The progress line on stderr, drawn only when stderr is a terminal.
pub struct Progress {
    /// Whether to draw at all.
    enabled: bool,
    /// Runs in the whole suite.
    total: usize,
    /// Runs finished.
    done: usize,
}

impl Progress {
    /// A progress line that draws when `enabled`.
    pub fn new(enabled: bool) -> Progress {
        Progress { enabled, total: 0, done: 0 }
    }

    /// Draws the line for the run about to start.
    fn show(&mut self, bench: &str, system: &str, round: usize) {
        if !self.enabled {
            return;
        }
        const WIDTH: usize = 24;
        let filled = (self.done * WIDTH).checked_div(self.total).unwrap_or(0);
        let stage = match round {
            0 => "warm-up".to_string(),
            r => format!("rep {r}/{REPS}"),
        };
        eprint!(
            "\r\x1b[2K[{}{}] {}/{} {bench} {system} {stage}",
            "#".repeat(filled),
            ".".repeat(WIDTH - filled),
            self.done,
            self.total
        );
        let _ = io::stderr().flush();
    }

    /// Erases the line.
    fn finish(&mut self) {
        if self.enabled {
            eprint!("\r\x1b[2K");
            let _ = io::stderr().flush();
        }
    }
}

/// Ends the command when one run goes past [`RUN_TIME_LIMIT`]: a run in progress cannot be
/// cancelled (it may be an in-process runtime that hangs), so the process exits, status 1.
struct Watchdog {
    /// The run in progress, if any: when it started and what it is.
    current: Arc<Mutex<Option<(Instant, String)>>>,
}

impl Watchdog {
    /// Starts the watching thread, which lives as long as the process.
    fn start() -> Watchdog {
        let current: Arc<Mutex<Option<(Instant, String)>>> = Arc::default();
        let watched = Arc::clone(&current);
        thread::spawn(move || loop {
            thread::sleep(Duration::from_secs(1));
            let current = watched.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((started, what)) = &*current {
                if started.elapsed() > RUN_TIME_LIMIT {
                    eprintln!(
                        "\nelite-bench: {what} has run for more than {} s; giving up (a hang?)",
                        RUN_TIME_LIMIT.as_secs()
                    );
                    std::process::exit(1);
                }
            }
        });
        Watchdog { current }
    }

    /// Marks the start of the run `what`.
    fn enter(&self, what: String) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), what));
    }

    /// Marks the end of the run in progress.
    fn leave(&self) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// Runs every bench: one warm-up round and [`REPS`] measured rounds, contenders interleaved.
pub fn run_suite(benches: Vec<Bench>, progress: &mut Progress) -> SuiteResults {
    progress.total = benches.iter().map(|b| b.contenders.len() * (REPS + 1)).sum();
    let watchdog = Watchdog::start();
    let results = benches.into_iter().map(|bench| run_bench(bench, progress, &watchdog)).collect();
    progress.finish();
    SuiteResults { benches: results }
}

/// Runs one bench's rounds.
fn run_bench(bench: Bench, progress: &mut Progress, watchdog: &Watchdog) -> BenchResult {
    let Bench { name, metric, mut contenders, targets } = bench;
    let mut rows: Vec<Row> = contenders
        .iter()
        .map(|c| Row {
            bench: name,
            system: c.system,
            metric,
            params: c.params.clone(),
            samples: Vec::with_capacity(REPS),
            failure: None,
        })
        .collect();
    // Rows of side values (see `record_side`), by contender, in the order their names came.
    let mut sides: Vec<Vec<Row>> = contenders.iter().map(|_| Vec::new()).collect();
    for round in 0..=REPS {
        for ((contender, row), side_rows) in contenders.iter_mut().zip(&mut rows).zip(&mut sides) {
            progress.show(name, contender.system, round);
            progress.done += 1;
            if row.failure.is_some() || (contender.once && round != 1) {
                continue;
            }
            watchdog.enter(format!(
                "{name} {} (processors {}, round {round})",
                contender.system, contender.params.processors
            ));
            take_sides();
            let outcome = run_once(contender).and_then(|sample| {
                // A pass timed at zero would be an infinite rate.
                let value = metric.value(&sample, row.params.processors);
                if value.is_finite() {
                    Ok(value)
                } else {
                    Err(format!("{} is {value}", metric.name()))
                }
            });
            watchdog.leave();
            let side_values = take_sides();
            match outcome {
                Ok(value) if round > 0 => {
                    row.samples.push(value);
                    for (name, value) in side_values {
                        let at = match side_rows.iter().position(|r| r.metric == Metric::Count(name)) {
                            Some(at) => at,
                            None => {
                                side_rows.push(Row {
                                    bench: row.bench,
                                    system: row.system,
                                    metric: Metric::Count(name),
                                    params: row.params.clone(),
                                    samples: Vec::with_capacity(REPS),
                                    failure: None,
                                });
                                side_rows.len() - 1
                            }
                        };
                        side_rows[at].samples.push(value);
                    }
                }
                Ok(_) => {}
                Err(failure) => row.failure = Some(failure),
            }
        }
    }
    for (row, side_rows) in rows.iter().zip(&mut sides) {
        for side in side_rows.iter_mut() {
            if let Some(why) = &row.failure {
                side.failure = Some(format!("its contender failed: {why}"));
            }
        }
    }
    // Each contender's side rows follow its own row.
    let rows: Vec<Row> = rows
        .into_iter()
        .zip(sides)
        .flat_map(|(row, side_rows)| std::iter::once(row).chain(side_rows))
        .collect();
    // The derived rows pair samples by round, so they are made before the samples are sorted.
    let mut rows = rows;
    let derived: Vec<Row> =
        targets.iter().filter_map(|target| derived_row(name, metric, &rows, target)).collect();
    rows.extend(derived);
    for row in &mut rows {
        row.samples.sort_by(f64::total_cmp);
    }
    BenchResult { name, metric, rows, targets }
}

/// The row a [`Target::WithinOfBest`] adds to its bench, made from `rows` (whose samples are
/// still in round order); `None` for other targets, or when the judged system has no row.
fn derived_row(bench: &'static str, metric: Metric, rows: &[Row], target: &Target) -> Option<Row> {
    let Target::WithinOfBest { system, others, tag, metric: name, .. } = *target else {
        return None;
    };
    let tagged = |system: &str| {
        rows.iter().find(|r| r.system == system && r.metric == metric && r.params.text(tag.0) == Some(tag.1))
    };
    let judged = tagged(system)?;
    let candidates: Vec<&Row> = others.iter().filter_map(|other| tagged(other)).collect();
    let mut row = Row {
        bench,
        system,
        metric: Metric::Ratio(name),
        params: judged.params.clone(),
        samples: Vec::new(),
        failure: None,
    };
    let failed: Vec<&str> = std::iter::once(judged)
        .chain(candidates.iter().copied())
        .filter(|r| !r.ok())
        .map(|r| r.system)
        .collect();
    if candidates.is_empty() {
        row.failure = Some(format!("none of {} has a row", others.join(", ")));
    } else if !failed.is_empty() {
        row.failure = Some(format!("made from failed rows: {}", failed.join(", ")));
    } else {
        let median_cost = |r: &Row| {
            let mut sorted = r.samples.clone();
            sorted.sort_by(f64::total_cmp);
            metric.cost(median_of_sorted(&sorted))
        };
        let best = candidates.iter().min_by(|a, b| median_cost(a).total_cmp(&median_cost(b)))?;
        row.params = row.params.with_text("best", best.system);
        row.samples = judged
            .samples
            .iter()
            .zip(&best.samples)
            .map(|(&j, &b)| metric.cost(j) / metric.cost(b))
            .collect();
    }
    Some(row)
}

/// Runs the contender's workload once and checks its answer.
fn run_once(contender: &mut Contender) -> Result<Sample, String> {
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| (contender.workload)()));
    let sample = match outcome {
        Ok(result) => result?,
        Err(payload) => return Err(format!("panicked: {}", panic_message(&*payload))),
    };
    if sample.answer != contender.expected {
        return Err(format!("wrong answer {} (expected {})", sample.answer, contender.expected));
    }
    if !sample.ns_per_op.is_finite() {
        return Err(format!("time per operation is {}", sample.ns_per_op));
    }
    Ok(sample)
}

/// The text of a panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a non-string payload)".to_string()
    }
}

/// A time in the largest unit that keeps it at or above 1, and that unit's name.
fn time_unit(ns: f64) -> (f64, &'static str) {
    if ns >= 1e9 {
        (1e9, "s")
    } else if ns >= 1e6 {
        (1e6, "ms")
    } else if ns >= 1e3 {
        (1e3, "µs")
    } else {
        (1.0, "ns")
    }
}

/// `value` with about three significant digits.
fn three_digits(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// A rate in the largest of `units` (per second, thousands, millions, billions per second) that
/// keeps it at or above 1, and that unit's name.
fn rate_unit(per_sec: f64, units: [&'static str; 4]) -> (f64, &'static str) {
    if per_sec >= 1e9 {
        (1e9, units[3])
    } else if per_sec >= 1e6 {
        (1e6, units[2])
    } else if per_sec >= 1e3 {
        (1e3, units[1])
    } else {
        (1.0, units[0])
    }
}

/// A ratio such as `2.14x` or `18x` (two decimals below 10, so that a ratio just short of a
/// target such as 2x never prints as `2.0x`).
fn format_ratio(ratio: f64) -> String {
    if ratio >= 10.0 {
        format!("{ratio:.0}x")
    } else {
        format!("{ratio:.2}x")
    }
}

/// Prints the table, the failures and the target lines.
pub fn print_report(out: &mut dyn Write, results: &SuiteResults) -> io::Result<()> {
    let header = ["bench", "system", "procs", "median", "min", "max", "unit", "ok"];
    let mut lines: Vec<[String; 8]> = Vec::new();
    for row in results.benches.iter().flat_map(|b| &b.rows) {
        let cells = match (row.median(), row.min(), row.max()) {
            (Some(median), Some(min), Some(max)) => {
                let (scale, _) = row.metric.unit(median);
                [
                    three_digits(median / scale),
                    three_digits(min / scale),
                    three_digits(max / scale),
                    row.metric.column_unit(median),
                    "ok".into(),
                ]
            }
            _ => ["-".into(), "-".into(), "-".into(), "-".into(), "FAILED".into()],
        };
        let [median, min, max, unit, ok] = cells;
        lines.push([
            row.label(),
            row.system.into(),
            row.params.processors.to_string(),
            median,
            min,
            max,
            unit,
            ok,
        ]);
    }
    let mut widths = header.map(|h| h.chars().count());
    for line in &lines {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header = header.map(String::from);
    for line in std::iter::once(&header).chain(&lines) {
        let mut text = String::new();
        for (i, (cell, width)) in line.iter().zip(widths).enumerate() {
            let pad = width - cell.chars().count();
            // Names left-aligned, numbers right-aligned.
            if (2..6).contains(&i) {
                let _ = write!(text, "{}{cell}  ", " ".repeat(pad));
            } else {
                let _ = write!(text, "{cell}{}  ", " ".repeat(pad));
            }
        }
        writeln!(out, "{}", text.trim_end())?;
    }

    let failures: Vec<&Row> = results.benches.iter().flat_map(|b| &b.rows).filter(|r| !r.ok()).collect();
    if !failures.is_empty() {
        writeln!(out)?;
        for row in failures {
            let why = row.failure.as_deref().unwrap_or("no sample");
            writeln!(
                out,
                "FAILED {} {} (processors {}): {why}",
                row.label(),
                row.system,
                row.params.processors
            )?;
        }
    }

    writeln!(out)?;
    for bench in &results.benches {
        if !bench.targets.is_empty() {
            writeln!(out, "{}", target_line(bench))?;
        }
    }
    Ok(())
}

/// The line comparing elite with its peers, e.g.
/// `yield: elite 9.10 ns = 2.14x corosensei (target <= 5x: met); go/elite = 18x (target >= 5x: met)`.
fn target_line(bench: &BenchResult) -> String {
    let parts: Vec<String> = bench.targets.iter().map(|target| target_part(bench, target)).collect();
    format!("{}: {}", bench.name, parts.join("; "))
}

/// The words of a target's verdict.
fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

/// ` (processors n)` for more than one processor, else nothing.
fn at_processors(processors: usize) -> String {
    if processors > 1 {
        format!(" (processors {processors})")
    } else {
        String::new()
    }
}

/// The part of a bench's target line for one target.
fn target_part(bench: &BenchResult, target: &Target) -> String {
    let metric = bench.metric;
    match *target {
        Target::EliteAtMost { peer, processors, times } | Target::PeerAtLeast { peer, processors, times } => {
            let elite = bench.elite(processors).and_then(Row::median);
            let other = bench.system_at(peer, processors).map(Row::median);
            let (elite, other) = match (elite, other) {
                (None, _) => return format!("elite (processors {processors}) failed"),
                (_, None) => return format!("{peer} skipped"),
                (_, Some(None)) => return format!("{peer} failed"),
                (Some(elite), Some(Some(other))) => (elite, other),
            };
            let at = at_processors(processors);
            match *target {
                Target::EliteAtMost { .. } => {
                    let ratio = metric.cost(elite) / metric.cost(other);
                    format!(
                        "elite{at} {} = {} {peer} (target <= {times}x: {})",
                        metric.format(elite),
                        format_ratio(ratio),
                        verdict(ratio <= times)
                    )
                }
                _ => {
                    let ratio = metric.cost(other) / metric.cost(elite);
                    let met = verdict(ratio >= times);
                    if metric == Metric::NsPerOp {
                        format!("{peer}/elite{at} = {} (target >= {times}x: {met})", format_ratio(ratio))
                    } else {
                        format!(
                            "elite{at} = {} the rate of {peer} (target >= {times}x: {met})",
                            format_ratio(ratio)
                        )
                    }
                }
            }
        }
        Target::EliteAtLeast { processors, value } => {
            let at = at_processors(processors);
            match bench.elite(processors).map(Row::median) {
                None => format!("elite{at} skipped"),
                Some(None) => format!("elite{at} failed"),
                Some(Some(elite)) => format!(
                    "elite{at} {} (target >= {}: {})",
                    metric.format(elite),
                    metric.format(value),
                    verdict(metric.cost(elite) <= metric.cost(value))
                ),
            }
        }
        Target::Relative { subject, baseline, processors, bound } => {
            relative_part(bench, subject, baseline, processors, bound)
        }
        Target::WithinOfBest { system, others, tag, times, metric: name } => {
            let scope = format!("{} {}", tag.0, tag.1);
            let row = bench.rows.iter().find(|r| {
                r.system == system && r.metric == Metric::Ratio(name) && r.params.text(tag.0) == Some(tag.1)
            });
            let Some(row) = row else {
                return format!("{scope}: {system} skipped");
            };
            match (row.median(), row.params.text("best")) {
                (Some(ratio), Some(best)) => format!(
                    "{scope}: {system} = {} {best}, the best of {} (target <= {times}x: {})",
                    format_ratio(ratio),
                    others.join(", "),
                    verdict(ratio <= times)
                ),
                _ => format!("{scope}: {system} failed"),
            }
        }
    }
}

/// The part of a bench's target line for a [`Target::Relative`].
fn relative_part(
    bench: &BenchResult,
    subject: Subject,
    baseline: &str,
    processors: usize,
    bound: Bound,
) -> String {
    let median = |system: &str| {
        bench
            .rows
            .iter()
            .find(|r| r.system == system && r.metric == bench.metric && r.params.processors == processors)
            .map(Row::median)
    };
    let at = at_processors(processors);
    let target = format!("target {}", bound.describe());
    let base = match median(baseline) {
        None => return format!("{baseline}{at} skipped"),
        Some(None) => return format!("{baseline}{at} failed"),
        Some(Some(base)) => base,
    };
    let (names, best) = match subject {
        Subject::Best(names) => (names, true),
        Subject::Each(names) => (names, false),
    };
    let mut judged: Vec<(&str, f64)> = Vec::new();
    for &name in names {
        match median(name) {
            None => {}
            Some(None) => return format!("{name}{at} failed"),
            Some(Some(value)) => judged.push((name, value)),
        }
    }
    if judged.is_empty() {
        return format!("{}{at} skipped", names.join(", "));
    }
    if best {
        let metric = bench.metric;
        let Some(&(name, value)) = judged.iter().min_by(|a, b| metric.cost(a.1).total_cmp(&metric.cost(b.1)))
        else {
            return format!("{}{at} skipped", names.join(", "));
        };
        let ratio = value / base;
        format!(
            "best of {}{at}: {name} = {} {baseline} ({target}: {})",
            names.join(", "),
            format_ratio(ratio),
            verdict(bound.holds(ratio))
        )
    } else {
        let ratios: Vec<String> =
            judged.iter().map(|(name, value)| format!("{name} = {}", format_ratio(value / base))).collect();
        let met = judged.iter().all(|(_, value)| bound.holds(value / base));
        format!("vs {baseline}{at}: {} ({target} each: {})", ratios.join(", "), verdict(met))
    }
}

/// The JSON document of `BENCHMARKS.md`.
pub fn json_document(suite: &str, machine: &Machine, results: &SuiteResults) -> Value {
    let rows: Vec<Value> = results
        .benches
        .iter()
        .flat_map(|b| &b.rows)
        .map(|row| {
            let mut object = json!({
                "bench": row.bench,
                "system": row.system,
                "metric": row.metric.name(),
                "median": row.median(),
                "min": row.min(),
                "max": row.max(),
                "runs": row.samples.len(),
                "ok": row.ok(),
                "params": row.params.to_json(),
            });
            if let (Some(why), Value::Object(map)) = (&row.failure, &mut object) {
                map.insert("error".into(), json!(why));
            }
            object
        })
        .collect();
    json!({
        "suite": suite,
        "machine": machine.to_json(),
        "results": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(samples: &[f64]) -> Row {
        Row {
            bench: "b",
            system: "elite",
            metric: Metric::NsPerOp,
            params: Params::new(1),
            samples: samples.to_vec(),
            failure: None,
        }
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(row(&[1.0, 2.0, 9.0]).median(), Some(2.0));
        assert_eq!(row(&[1.0, 2.0, 4.0, 9.0]).median(), Some(3.0));
        assert_eq!(row(&[]).median(), None);
    }

    #[test]
    fn wrong_answer_fails_the_row_and_stops_it() {
        let mut calls = 0;
        let bench = Bench {
            name: "b",
            metric: Metric::NsPerOp,
            contenders: vec![
                Contender::new("elite", Params::new(1), 3, || Ok(Sample { ns_per_op: 1.0, answer: 3 })),
                Contender::new("go", Params::new(1), 3, move || {
                    calls += 1;
                    assert!(calls == 1, "a failed contender ran again");
                    Ok(Sample { ns_per_op: 1.0, answer: 4 })
                }),
                Contender::new("may", Params::new(1), 3, || panic!("boom")),
            ],
            targets: vec![],
        };
        let result = run_bench(bench, &mut Progress::new(false), &Watchdog::start());
        assert!(result.rows[0].ok());
        assert_eq!(result.rows[0].samples.len(), REPS);
        assert!(!result.rows[1].ok());
        assert!(result.rows[2].failure.as_deref() == Some("panicked: boom"));
        let results = SuiteResults { benches: vec![result] };
        assert!(!results.all_ok());
        let machine = Machine { cpus: 2, cpu_model: "x".into(), pmu: false, kernel: "k".into() };
        let doc = json_document("micro", &machine, &results);
        assert_eq!(doc["results"][1]["ok"], json!(false));
        assert_eq!(doc["results"][1]["median"], Value::Null);
        assert_eq!(doc["results"][0]["params"]["processors"], json!(1));
    }

    #[test]
    fn target_lines_say_met_and_missed() {
        let mut elite = row(&[10.0]);
        elite.params = Params::new(1);
        let mut coro = row(&[4.0]);
        coro.system = "corosensei";
        let mut go = row(&[200.0]);
        go.system = "go";
        let bench = BenchResult {
            name: "yield",
            metric: Metric::NsPerOp,
            rows: vec![elite, coro, go],
            targets: vec![
                Target::EliteAtMost { peer: "corosensei", processors: 1, times: 2.0 },
                Target::PeerAtLeast { peer: "go", processors: 1, times: 5.0 },
                Target::PeerAtLeast { peer: "may", processors: 1, times: 5.0 },
            ],
        };
        assert_eq!(
            target_line(&bench),
            "yield: elite 10.0 ns = 2.50x corosensei (target <= 2x: MISSED); \
             go/elite = 20x (target >= 5x: met); may skipped"
        );
    }

    #[test]
    fn peers_are_compared_at_the_same_processor_count() {
        let mut elite2 = row(&[10.0]);
        elite2.params = Params::new(2);
        let mut go1 = row(&[1000.0]);
        go1.system = "go";
        let mut go2 = row(&[50.0]);
        go2.system = "go";
        go2.params = Params::new(2);
        let bench = BenchResult {
            name: "ping_pong",
            metric: Metric::NsPerOp,
            rows: vec![row(&[10.0]), elite2, go1, go2],
            targets: vec![
                Target::PeerAtLeast { peer: "go", processors: 1, times: 10.0 },
                Target::PeerAtLeast { peer: "go", processors: 2, times: 10.0 },
            ],
        };
        assert_eq!(
            target_line(&bench),
            "ping_pong: go/elite = 100x (target >= 10x: met); \
             go/elite (processors 2) = 5.00x (target >= 10x: MISSED)"
        );
    }

    #[test]
    fn rates_are_reported_per_processor_and_compared_as_rates() {
        let metric = Metric::OpsPerSecPerProcessor;
        // 25 ns per operation with 2 processors: 40 M/s, 20 M/s per processor.
        let value = metric.value(&Sample { ns_per_op: 25.0, answer: 0 }, 2);
        assert!((value - 20e6).abs() < 1.0, "{value}");
        assert_eq!(metric.name(), "ops_per_sec");
        assert_eq!(metric.column_unit(value), "Mop/s/proc");
        let mut elite = row(&[value]);
        elite.params = Params::new(2);
        elite.metric = metric;
        let mut central = row(&[10e6]);
        central.system = "elite/central";
        central.params = Params::new(2);
        central.metric = metric;
        let bench = BenchResult {
            name: "sync_peak",
            metric,
            rows: vec![elite, central],
            targets: vec![
                Target::EliteAtLeast { processors: 2, value: 20e6 },
                Target::PeerAtLeast { peer: "elite/central", processors: 2, times: 1.0 },
            ],
        };
        assert_eq!(
            target_line(&bench),
            "sync_peak: elite (processors 2) 20.0 Mop/s/proc (target >= 20.0 Mop/s/proc: met); \
             elite (processors 2) = 2.00x the rate of elite/central (target >= 1x: met)"
        );
    }

    #[test]
    fn within_of_best_adds_a_ratio_row_paired_by_round() {
        let others: &'static [&'static str] = &["spin", "block"];
        let contender = |system: &'static str, regime: &'static str, times: Vec<f64>| {
            let mut round = 0;
            Contender::new(system, Params::new(2).with_text("regime", regime), 1, move || {
                round += 1;
                Ok(Sample { ns_per_op: times[(round - 1) % times.len()], answer: 1 })
            })
        };
        // Rounds: warm-up, then 5 measured; block is the best (lower median) in regime short.
        let bench = Bench {
            name: "spin_regimes",
            metric: Metric::NsPerOp,
            contenders: vec![
                contender("adaptive", "short", vec![0.0, 11.0, 10.0, 12.0, 10.0, 10.0]),
                contender("spin", "short", vec![0.0, 20.0, 20.0, 20.0, 20.0, 20.0]),
                contender("block", "short", vec![0.0, 10.0, 10.0, 10.0, 5.0, 10.0]),
                contender("adaptive", "long", vec![1.0]),
            ],
            targets: vec![
                Target::WithinOfBest {
                    system: "adaptive",
                    others,
                    tag: ("regime", "short"),
                    times: 1.1,
                    metric: "ratio_to_best",
                },
                Target::WithinOfBest {
                    system: "adaptive",
                    others,
                    tag: ("regime", "long"),
                    times: 1.1,
                    metric: "ratio_to_best",
                },
            ],
        };
        let result = run_bench(bench, &mut Progress::new(false), &Watchdog::start());
        // The long regime has no fixed rows: its ratio row fails and says why.
        assert_eq!(result.rows.len(), 6);
        let ratio = &result.rows[4];
        assert_eq!((ratio.system, ratio.metric.name()), ("adaptive", "ratio_to_best"));
        assert_eq!(ratio.params.text("best"), Some("block"));
        // Per round: 11/10, 10/10, 12/10, 10/5, 10/10.
        assert_eq!(ratio.samples, vec![1.0, 1.0, 1.1, 1.2, 2.0]);
        assert_eq!(ratio.median(), Some(1.1));
        assert_eq!(result.rows[5].failure.as_deref(), Some("none of spin, block has a row"));
        let line = target_line(&result);
        assert_eq!(
            line,
            "spin_regimes: regime short: adaptive = 1.10x block, the best of spin, block \
             (target <= 1.1x: met); regime long: adaptive failed"
        );
        let machine = Machine { cpus: 2, cpu_model: "x".into(), pmu: false, kernel: "k".into() };
        let doc = json_document("sync", &machine, &SuiteResults { benches: vec![result] });
        assert_eq!(doc["results"][4]["metric"], json!("ratio_to_best"));
        assert_eq!(doc["results"][4]["params"], json!({"processors": 2, "regime": "short", "best": "block"}));
        assert_eq!(doc["results"][4]["median"], json!(1.1));
    }
}
