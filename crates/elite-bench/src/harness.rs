//! Measurement: interleaved repetitions, answer checks, the report table and the JSON document.
//!
//! A suite hands the harness a list of [`Bench`]es. Each bench has [`Contender`]s (one system
//! at one set of parameters) whose workload produces a [`Sample`]: the time per operation and
//! the workload's answer. [`run_suite`] runs, bench by bench, one warm-up round and then
//! [`REPS`] measured rounds, each round running every contender once in the bench's order, so
//! that drift of the machine touches all systems alike. A contender whose answer is wrong, or
//! whose workload errs or panics, is marked failed and not run again; its row reports the
//! failure and no time.

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

/// A workload: one call is one sample.
pub type Workload = Box<dyn FnMut() -> Result<Sample, String>>;

/// The parameters of a row; `processors` is always present.
#[derive(Clone, Debug)]
pub struct Params {
    /// Processors (elite), worker threads (may, rayon) or `GOMAXPROCS` (go) given to the system.
    pub processors: usize,
    /// The other parameters, in the order they were added.
    values: Vec<(&'static str, u64)>,
}

impl Params {
    /// Parameters with only `processors`.
    pub fn new(processors: usize) -> Params {
        Params { processors, values: Vec::new() }
    }

    /// Adds the parameter `name`.
    pub fn with(mut self, name: &'static str, value: u64) -> Params {
        self.values.push((name, value));
        self
    }

    /// The JSON object of the parameters.
    fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("processors".into(), json!(self.processors));
        for (name, value) in &self.values {
            object.insert((*name).into(), json!(value));
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
}

impl Contender {
    /// A contender running `workload`, whose answer must be `expected`.
    pub fn new(
        system: &'static str,
        params: Params,
        expected: u64,
        workload: impl FnMut() -> Result<Sample, String> + 'static,
    ) -> Contender {
        Contender { system, params, expected, workload: Box::new(workload) }
    }
}

/// What a bench reports; lower is better for every metric so far.
#[derive(Clone, Copy, Debug)]
pub enum Metric {
    /// Nanoseconds per operation.
    NsPerOp,
}

impl Metric {
    /// The metric's name in the JSON document.
    pub fn name(self) -> &'static str {
        match self {
            Metric::NsPerOp => "ns_per_op",
        }
    }
}

/// A claim about elite's median against a peer's, checked and printed after the table.
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
    /// The peer takes at least `times` elite's time (at `processors`): `peer/elite = 18x`.
    PeerAtLeast {
        /// The peer's system name.
        peer: &'static str,
        /// The processor count of the elite row compared.
        processors: usize,
        /// The smallest acceptable peer/elite ratio.
        times: f64,
    },
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

/// The outcome of one contender.
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
        let s = &self.samples;
        match s.len() {
            _ if !self.ok() => None,
            n if n % 2 == 1 => Some(s[n / 2]),
            n => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
        }
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

/// The rows of one bench, with its targets.
pub struct BenchResult {
    /// The bench's name.
    pub name: &'static str,
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

    /// The first row of `system`.
    fn system(&self, system: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.system == system)
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
    for round in 0..=REPS {
        for (contender, row) in contenders.iter_mut().zip(&mut rows) {
            progress.show(name, contender.system, round);
            progress.done += 1;
            if row.failure.is_some() {
                continue;
            }
            watchdog.enter(format!(
                "{name} {} (processors {}, round {round})",
                contender.system, contender.params.processors
            ));
            let outcome = run_once(contender);
            watchdog.leave();
            match outcome {
                Ok(sample) if round > 0 => row.samples.push(sample.ns_per_op),
                Ok(_) => {}
                Err(failure) => row.failure = Some(failure),
            }
        }
    }
    for row in &mut rows {
        row.samples.sort_by(f64::total_cmp);
    }
    BenchResult { name, rows, targets }
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

/// A time such as `9.10 ns` or `1.23 ms`.
fn format_time(ns: f64) -> String {
    let (scale, unit) = time_unit(ns);
    format!("{} {unit}", three_digits(ns / scale))
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
                let (scale, unit) = time_unit(median);
                [
                    three_digits(median / scale),
                    three_digits(min / scale),
                    three_digits(max / scale),
                    format!("{unit}/op"),
                    "ok".into(),
                ]
            }
            _ => ["-".into(), "-".into(), "-".into(), "-".into(), "FAILED".into()],
        };
        let [median, min, max, unit, ok] = cells;
        lines.push([
            row.bench.into(),
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
                row.bench, row.system, row.params.processors
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
    let verdict = |met: bool| if met { "met" } else { "MISSED" };
    let parts: Vec<String> =
        bench
            .targets
            .iter()
            .map(|target| {
                let (Target::EliteAtMost { peer, processors, .. }
                | Target::PeerAtLeast { peer, processors, .. }) = *target;
                let elite = bench.elite(processors).and_then(Row::median);
                let other = bench.system(peer).map(Row::median);
                let (elite, other) = match (elite, other) {
                    (None, _) => return format!("elite (processors {processors}) failed"),
                    (_, None) => return format!("{peer} skipped"),
                    (_, Some(None)) => return format!("{peer} failed"),
                    (Some(elite), Some(Some(other))) => (elite, other),
                };
                let at = if processors > 1 { format!(" (processors {processors})") } else { String::new() };
                match *target {
                    Target::EliteAtMost { times, .. } => {
                        let ratio = elite / other;
                        format!(
                            "elite{at} {} = {} {peer} (target <= {times}x: {})",
                            format_time(elite),
                            format_ratio(ratio),
                            verdict(ratio <= times)
                        )
                    }
                    Target::PeerAtLeast { times, .. } => {
                        let ratio = other / elite;
                        format!(
                            "{peer}/elite{at} = {} (target >= {times}x: {})",
                            format_ratio(ratio),
                            verdict(ratio >= times)
                        )
                    }
                }
            })
            .collect();
    format!("{}: {}", bench.name, parts.join("; "))
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
}
