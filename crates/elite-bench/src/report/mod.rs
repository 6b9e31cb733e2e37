//! `elite-bench report`: `docs/benchmarks.md`'s tables and plots, written from the suites' JSON
//! documents.
//!
//! ```text
//! elite-bench report [--data DIR] [--out FILE] [--check]
//! elite-bench report --run [--quick] [--data DIR] [--out FILE]
//! ```
//!
//! The report reads `DIR/<suite>.json` for every suite whose document is there (`DIR` defaults to
//! the newest folder under `docs/data/`; other files in it, such as `before-<suite>.json`, are kept
//! as data but not reported) and writes, into `FILE` (default `docs/benchmarks.md`), the part
//! between the markers [`BEGIN`] and [`END`] (the rest of the file is left as it is; a file
//! without the markers gets the part appended), and the SVG charts into `plots/` beside `FILE`
//! (that folder belongs to the report: charts it no longer draws are removed). Nothing is run:
//! the same documents always give the same bytes, so `--check` can compare the committed page
//! with what the committed data gives, and fails (exit 1) naming each file that differs. `--run`
//! first runs every suite (`--quick` sizes with `--quick`; affinity with `--cachegrind` when
//! `valgrind` is on the PATH), writing the documents into `DIR` (default `docs/data/<today>`).
//!
//! Per suite it writes a table of the rows and, where the suite's document has targets (the field
//! `targets`; documents written before it have none, and their section is what it always was), a
//! table of them after it: the bench, the target as its line printed it, and the verdict.
//!
//! What it draws, per suite:
//!
//! - per bench and metric, every system's median with a whisker from min to max, a row per
//!   processor count (logarithmic when the values span more than 20 times);
//! - for the policy suites (`affinity`, `grid`), each policy's speed relative to
//!   `elite/no-affinity` (and its `+prefetch` variants to `elite/no-affinity+prefetch`), and
//!   simulated misses relative to no-affinity's;
//! - the processor-count scaling: each system at N processors relative to itself at 1;
//!
//! and, on top, a headline chart: how many times longer than `elite` each peer takes per
//! operation in `micro` and `sync`. Each chart's footer names the data file, the command that
//! wrote it, the CPU model and cache sizes, and the date of the data (the data folder's name).
//!
//! A chart of ratios (policies, scaling, headline) pairs its two rows round by round where the
//! documents have each row's `rounds`: the dot is the median of the per-round ratios and the
//! whiskers their min and max, as the harness's target lines compute them. For documents
//! without `rounds` (written before the field) it falls back to the subject's median, min and
//! max over the baseline's median, and the chart's axis says which it drew.

mod plot;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use plot::{number, Chart, Mark};

/// The subcommand's name.
pub const COMMAND: &str = "report";

/// The line before the generated part of the page.
pub const BEGIN: &str = "<!-- elite-bench report: begin. Generated from the JSON documents by \
                         `elite-bench report`; edit the data or the generator, not this part. -->";
/// The line after it.
pub const END: &str = "<!-- elite-bench report: end -->";

const USAGE: &str = "usage: elite-bench report [--data DIR] [--out FILE] [--check]\n       \
                     elite-bench report --run [--quick] [--data DIR] [--out FILE]";

/// One row of a document's `results`.
#[derive(Clone, Debug)]
struct Row {
    bench: String,
    system: String,
    metric: String,
    median: f64,
    min: f64,
    max: f64,
    runs: u64,
    /// The samples in the order of their rounds (the field `rounds`; `None` in documents
    /// written before it was added).
    rounds: Option<Vec<f64>>,
    processors: u64,
    /// The row's label in tables: the bench, with the params that tell its rows apart.
    label: String,
}

impl Row {
    fn mark(&self) -> Mark {
        (self.min, self.median, self.max)
    }
}

/// `ratio(r's sample, base's sample)` in each round, as (min, median, max), when both rows have
/// their samples in round order and as many rounds: the harness's estimator (the two samples of
/// a round were measured side by side, so they share the host's phase). `None` when the rounds
/// cannot be paired (a document without `rounds`, or rows of different counts).
fn paired(r: &Row, base: &Row, ratio: impl Fn(f64, f64) -> f64) -> Option<Mark> {
    crate::harness::model::paired(r.rounds.as_ref()?, base.rounds.as_ref()?, ratio)
}

/// One suite's JSON document, as the report reads it.
#[derive(Debug)]
struct Document {
    suite: String,
    /// The file, relative to the page.
    file: String,
    command: String,
    machine: String,
    /// CPU model and caches, for the charts' footers.
    host: String,
    date: String,
    rows: Vec<Row>,
    /// `bench system` of each failed row.
    failed: Vec<String>,
    /// The document's targets (the field `targets`; empty in documents written before it was
    /// added, and in suites without targets).
    targets: Vec<TargetLine>,
}

/// One target of a document, as the report lists it.
#[derive(Clone, Debug, PartialEq)]
struct TargetLine {
    bench: String,
    /// The target's part of its bench's target line, as the command printed it.
    text: String,
    /// `met` or `MISSED`, with `, undecided at 95%` or `, no 95% interval from 5 rounds` as the
    /// target line says it; or `failed`, `skipped`.
    verdict: String,
}

impl TargetLine {
    /// A target of the document's `targets`; `None` without `bench` or `text`.
    fn read(target: &Value) -> Option<TargetLine> {
        let bench = target["bench"].as_str()?.to_string();
        let text = target["text"].as_str()?.to_string();
        let verdict = match (target["state"].as_str(), target["met"].as_bool()) {
            (Some("judged") | None, Some(met)) => {
                let met = if met { "met" } else { "MISSED" };
                match target["certainty"].as_str() {
                    Some("undecided") => format!("{met}, undecided at 95%"),
                    Some("too_few_rounds") => {
                        // The fewest rounds among the subjects with too few, as the line says.
                        let fewest = target["subjects"].as_array().and_then(|subjects| {
                            subjects
                                .iter()
                                .filter(|s| s["certainty"].as_str() == Some("too_few_rounds"))
                                .filter_map(|s| s["rounds"].as_u64())
                                .min()
                        });
                        match fewest {
                            Some(1) => format!("{met}, no 95% interval from 1 round"),
                            Some(n) => format!("{met}, no 95% interval from {n} rounds"),
                            None => format!("{met}, too few rounds for a 95% interval"),
                        }
                    }
                    _ => met.to_string(),
                }
            }
            (Some(state), _) => state.to_string(),
            (None, None) => "?".to_string(),
        };
        Some(TargetLine { bench, text, verdict })
    }
}

/// The report: the page's generated part and the charts (file name, SVG).
pub struct Report {
    /// The text between the markers.
    pub section: String,
    /// `(file name in plots/, SVG text)`.
    pub plots: Vec<(String, String)>,
}

/// Metrics that get a chart of their own (the others, counts the benches keep beside their
/// measurement, stay in the tables).
const CHARTED: &[&str] = &["ns_per_op", "ops_per_sec", "ll_misses"];

/// Whether a larger value of `metric` is better.
fn higher_is_better(metric: &str) -> bool {
    metric.starts_with("ops_per") || metric.ends_with("per_sec")
}

fn unit(metric: &str) -> &'static str {
    match metric {
        "ns_per_op" => "ns per operation (lower is better)",
        "ops_per_sec" => "operations per second (higher is better)",
        "ll_misses" => "simulated last-level misses (lower is better)",
        "solve_s" => "seconds per solve (lower is better)",
        _ => "value",
    }
}

fn kib(bytes: Option<u64>, unit: u32, name: &str) -> String {
    bytes.map_or(String::new(), |b| {
        format!(", {name} {} {}", b >> unit, if unit == 10 { "KiB" } else { "MiB" })
    })
}

fn read_document(path: &Path, page_dir: &Path, date: &str) -> Result<Document, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| format!("`{}` is not a JSON document: {e}", path.display()))?;
    let bad = |what: &str| format!("`{}`: {what}", path.display());
    let suite = doc["suite"].as_str().ok_or_else(|| bad("no `suite`"))?.to_string();
    let m = &doc["machine"];
    let text_of = |v: &Value| v.as_str().map_or_else(|| "?".to_string(), str::to_string);
    let cpus = m["cpus"].as_u64().map_or_else(|| "?".to_string(), |c| c.to_string());
    let (l2, l3) = (m["l2_bytes"].as_u64(), m["l3_bytes"].as_u64());
    let machine = format!(
        "{}, {cpus} CPUs{}{}, kernel {}, PMU {}",
        text_of(&m["cpu_model"]),
        kib(l2, 10, "L2"),
        kib(l3, 20, "L3"),
        text_of(&m["kernel"]),
        if m["pmu"].as_bool() == Some(true) { "yes" } else { "no" }
    );
    // (Documents from before `sched_policy` do not say.)
    let machine = match m["sched_policy"].as_str() {
        Some(policy) => format!("{machine}, scheduling {policy}"),
        None => machine,
    };
    let host = format!("{}, {cpus} CPUs{}{}", text_of(&m["cpu_model"]), kib(l2, 10, "L2"), kib(l3, 20, "L3"));
    let results = doc["results"].as_array().ok_or_else(|| bad("no `results`"))?;
    let mut ok_rows = Vec::new();
    let mut failed = Vec::new();
    for r in results {
        let field = |name: &str| {
            r[name].as_str().map(str::to_string).ok_or_else(|| bad(&format!("a row without `{name}`")))
        };
        let (bench, system, metric) = (field("bench")?, field("system")?, field("metric")?);
        if r["ok"].as_bool() != Some(true) {
            failed.push(format!("{bench} {system}"));
            continue;
        }
        let number = |name: &str| r[name].as_f64().ok_or_else(|| bad(&format!("an ok row without `{name}`")));
        ok_rows.push((
            Row {
                median: number("median")?,
                min: number("min")?,
                max: number("max")?,
                runs: r["runs"].as_u64().unwrap_or(1),
                rounds: r["rounds"].as_array().and_then(|a| a.iter().map(Value::as_f64).collect()),
                processors: r["params"]["processors"].as_u64().unwrap_or(1),
                label: String::new(),
                bench,
                system,
                metric,
            },
            r["params"].as_object().cloned().unwrap_or_default(),
        ));
    }
    // Params besides `processors` that take more than one value among the rows of one bench,
    // metric and system (a regime, a prefetch flag) name the row too.
    let mut values: std::collections::HashMap<(String, String, String, String), BTreeSet<String>> =
        std::collections::HashMap::new();
    for (row, params) in &ok_rows {
        for (name, value) in params {
            values
                .entry((row.bench.clone(), row.metric.clone(), row.system.clone(), name.clone()))
                .or_default()
                .insert(value.to_string());
        }
    }
    let rows = ok_rows
        .into_iter()
        .map(|(mut row, params)| {
            let mut names: Vec<&String> = params.keys().collect();
            names.sort();
            let extra: Vec<String> = names
                .into_iter()
                .filter(|n| {
                    *n != "processors"
                        && values[&(row.bench.clone(), row.metric.clone(), row.system.clone(), (*n).clone())]
                            .len()
                            > 1
                })
                .map(|n| match &params[n] {
                    Value::String(text) => format!("{n}={text}"),
                    other => format!("{n}={other}"),
                })
                .collect();
            row.label = if extra.is_empty() {
                row.bench.clone()
            } else {
                format!("{} ({})", row.bench, extra.join(", "))
            };
            row
        })
        .collect::<Vec<_>>();
    let command = match doc["command"].as_str() {
        Some(c) => c.to_string(),
        None => {
            let cachegrind = rows.iter().any(|r| r.metric == "ll_misses");
            format!(
                "elite-bench {suite}{} --json {suite}.json",
                if cachegrind { " --cachegrind" } else { "" }
            )
        }
    };
    let targets = match doc.get("targets") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(targets)) => targets
            .iter()
            .map(|t| TargetLine::read(t).ok_or_else(|| bad("a target without `bench` or `text`")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("`targets` is not an array")),
    };
    let file = relative(path, page_dir);
    Ok(Document { suite, file, command, machine, host, date: date.to_string(), rows, failed, targets })
}

/// `path` as a link from a page in `page_dir` (both under one root).
fn relative(path: &Path, page_dir: &Path) -> String {
    let path: PathBuf = path.components().collect();
    let base: PathBuf = page_dir.components().collect();
    match path.strip_prefix(&base) {
        Ok(rest) => rest.to_string_lossy().into_owned(),
        Err(_) => path.to_string_lossy().into_owned(),
    }
}

/// Keys in first-seen order.
fn unique<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

impl Document {
    fn footer(&self) -> Vec<String> {
        vec![
            format!("data: {} ({}), written by `{}`", self.file, self.date, self.command),
            format!("host: {}", self.host),
        ]
    }

    /// The table: a row per bench label, metric and processor count, a column per system.
    fn table(&self, out: &mut String) {
        let systems = unique(self.rows.iter().map(|r| r.system.clone()));
        let keys = unique(self.rows.iter().map(|r| (r.label.clone(), r.metric.clone(), r.processors)));
        let _ = writeln!(out, "| bench | metric | procs | {} |", systems.join(" | "));
        let _ = writeln!(
            out,
            "| --- | --- | --- | {} |",
            systems.iter().map(|_| "---").collect::<Vec<_>>().join(" | ")
        );
        for (label, metric, procs) in &keys {
            let mut line = format!("| `{label}` | {metric} | {procs} |");
            for system in &systems {
                // The last row of a key wins, as a later run of the same row would.
                let cell = self.rows.iter().rev().find(|r| {
                    &r.label == label && &r.metric == metric && r.processors == *procs && &r.system == system
                });
                match cell {
                    None => line.push_str("  |"),
                    Some(r) if r.runs > 1 && r.min != r.max => {
                        let _ = write!(line, " {} ({}-{}) |", number(r.median), number(r.min), number(r.max));
                    }
                    Some(r) => {
                        let _ = write!(line, " {} |", number(r.median));
                    }
                }
            }
            out.push_str(&line);
            out.push('\n');
        }
        if !self.failed.is_empty() {
            let _ = writeln!(out, "\nFailed rows: {}", self.failed.join(", "));
        }
    }

    /// The targets, a row each: the bench, the target as its line printed it, the verdict.
    /// Nothing for a document without targets.
    fn targets_table(&self, out: &mut String) {
        if self.targets.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "Targets, as the command's target lines printed them (the document's `targets`):\n"
        );
        let _ = writeln!(out, "| bench | target | verdict |");
        let _ = writeln!(out, "| --- | --- | --- |");
        for t in &self.targets {
            let _ = writeln!(out, "| `{}` | {} | {} |", t.bench, cell(&t.text), cell(&t.verdict));
        }
        out.push('\n');
    }

    /// A chart per bench and charted metric: every system, a row per processor count.
    fn bench_charts(&self) -> Vec<(String, String, Chart)> {
        let mut charts = Vec::new();
        let pairs = unique(
            self.rows
                .iter()
                .filter(|r| CHARTED.contains(&r.metric.as_str()))
                .map(|r| (r.bench.clone(), r.metric.clone())),
        );
        for (bench, metric) in pairs {
            let rows: Vec<&Row> =
                self.rows.iter().filter(|r| r.bench == bench && r.metric == metric).collect();
            let categories = unique(rows.iter().map(|r| (r.label.clone(), r.processors)));
            let systems = unique(rows.iter().map(|r| r.system.clone()));
            let series = systems
                .iter()
                .map(|s| {
                    let marks = categories
                        .iter()
                        .map(|(label, procs)| {
                            rows.iter()
                                .rev()
                                .find(|r| &r.system == s && &r.label == label && r.processors == *procs)
                                .map(|r| r.mark())
                        })
                        .collect();
                    (s.clone(), marks)
                })
                .collect();
            let name = format!("{}-{}-{}.svg", self.suite, bench, metric);
            let caption = format!("`{bench}`, {}", unit(&metric));
            charts.push((
                name,
                caption,
                Chart {
                    title: format!("{} / {bench}: median, whiskers min to max", self.suite),
                    axis: unit(&metric).into(),
                    footer: self.footer(),
                    categories: categories.iter().map(|(l, p)| category(l, &bench, *p)).collect(),
                    series,
                    reference: None,
                },
            ));
        }
        charts
    }

    /// Each policy relative to no-affinity; `None` when the suite has no `elite/no-affinity`.
    fn policy_charts(&self) -> Vec<(String, String, Chart)> {
        let baseline_of = |system: &str| -> Option<&'static str> {
            if !system.starts_with("elite/") {
                None
            } else if system.ends_with("+prefetch") {
                Some("elite/no-affinity+prefetch")
            } else {
                Some("elite/no-affinity")
            }
        };
        let mut charts = Vec::new();
        for (kind, metrics) in [("speed", &["ops_per_sec", "ns_per_op"][..]), ("misses", &["ll_misses"][..])]
        {
            let rows: Vec<&Row> = self.rows.iter().filter(|r| metrics.contains(&r.metric.as_str())).collect();
            let base = |r: &Row| {
                let name = baseline_of(&r.system)?;
                rows.iter()
                    .rev()
                    .find(|b| {
                        b.system == name
                            && b.label == r.label
                            && b.metric == r.metric
                            && b.processors == r.processors
                    })
                    .copied()
            };
            let policies: Vec<&Row> =
                rows.iter().copied().filter(|r| base(r).is_some_and(|b| b.system != r.system)).collect();
            if policies.is_empty() {
                continue;
            }
            let (categories, series, pairing) = relative_series(&policies, base);
            let (title, axis) = if kind == "speed" {
                (
                    format!("{}: each policy's speed relative to elite/no-affinity", self.suite),
                    format!(
                        "times the speed of elite/no-affinity (> 1: faster); {}",
                        pairing.whiskers("the policy", "no-affinity")
                    ),
                )
            } else {
                (
                    format!("{}: simulated last-level misses relative to elite/no-affinity", self.suite),
                    "times the misses of elite/no-affinity (< 1: fewer)".to_string(),
                )
            };
            charts.push((
                format!("{}-policies-{kind}.svg", self.suite),
                if kind == "speed" {
                    "each policy against no-affinity".into()
                } else {
                    "simulated misses against no-affinity".into()
                },
                Chart {
                    title,
                    axis,
                    footer: self.footer(),
                    categories: categories
                        .iter()
                        .map(|(l, m, p)| format!("{l} {m}, {}", procs(*p)))
                        .collect(),
                    series,
                    reference: Some(1.0),
                },
            ));
        }
        charts
    }

    /// Each system at N processors relative to itself at 1, for the rows measured at both.
    fn scaling_chart(&self) -> Option<(String, String, Chart)> {
        let rows: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| CHARTED.contains(&r.metric.as_str()) && r.metric != "ll_misses")
            .collect();
        let one = |r: &Row| {
            rows.iter()
                .rev()
                .find(|o| {
                    o.processors == 1 && o.system == r.system && o.label == r.label && o.metric == r.metric
                })
                .copied()
        };
        let scaled: Vec<&Row> =
            rows.iter().copied().filter(|r| r.processors > 1 && one(r).is_some()).collect();
        if scaled.is_empty() {
            return None;
        }
        let (categories, series, pairing) = relative_series(&scaled, one);
        let whiskers = match pairing {
            Pairing::Medians => "whiskers: min to max over the 1-processor median".to_string(),
            other => other.whiskers("the row", "the 1-processor row"),
        };
        Some((
            format!("{}-scaling.svg", self.suite),
            "processor-count scaling".into(),
            Chart {
                title: format!("{}: each system at N processors relative to itself at 1", self.suite),
                axis: format!(
                    "times its speed at 1 processor (> 1: faster with more processors); {whiskers}"
                ),
                footer: self.footer(),
                categories: categories.iter().map(|(l, m, p)| format!("{l} {m}, {}", procs(*p))).collect(),
                series,
                reference: Some(1.0),
            },
        ))
    }
}

/// How the marks of a chart of ratios were made: from paired rounds (see [`paired`]), from the
/// rows' medians, or some of each.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pairing {
    Rounds,
    Medians,
    Mixed,
}

impl Pairing {
    /// The pairing of a chart whose marks so far were made as `so_far` says (`None`: no mark
    /// yet) and whose next mark was made `by_rounds` or not.
    fn and_then(so_far: Option<Pairing>, by_rounds: bool) -> Pairing {
        match (so_far, by_rounds) {
            (None | Some(Pairing::Rounds), true) => Pairing::Rounds,
            (None | Some(Pairing::Medians), false) => Pairing::Medians,
            _ => Pairing::Mixed,
        }
    }

    /// What a chart's dots and whiskers are, for its axis: `subject` over `base`.
    fn whiskers(self, subject: &str, base: &str) -> String {
        match self {
            Pairing::Rounds => "dots: the median of the per-round ratios; whiskers: their min to max".into(),
            Pairing::Medians => format!("whiskers: {subject}'s min to max over {base}'s median"),
            Pairing::Mixed => format!(
                "dots and whiskers: median and min to max of the per-round ratios where the rounds pair, \
                 else {subject}'s median, min and max over {base}'s median"
            ),
        }
    }
}

/// The categories (label, metric, processors) of `rows` and a series per system, each mark the
/// system's latest row of the category relative to the row `base` pairs it with (none where
/// either is missing), and how the marks were made.
#[allow(clippy::type_complexity)]
fn relative_series<'r>(
    rows: &[&'r Row],
    base: impl Fn(&Row) -> Option<&'r Row>,
) -> (Vec<(String, String, u64)>, Vec<(String, Vec<Option<Mark>>)>, Pairing) {
    let categories = unique(rows.iter().map(|r| (r.label.clone(), r.metric.clone(), r.processors)));
    let mut pairing = None::<Pairing>;
    let series = unique(rows.iter().map(|r| r.system.clone()))
        .into_iter()
        .map(|s| {
            let marks = categories
                .iter()
                .map(|(label, metric, procs)| {
                    let r = rows.iter().rev().find(|r| {
                        r.system == s && &r.label == label && &r.metric == metric && r.processors == *procs
                    })?;
                    let (mark, by_rounds) = relative_mark(r, base(r)?);
                    pairing = Some(Pairing::and_then(pairing, by_rounds));
                    Some(mark)
                })
                .collect();
            (s, marks)
        })
        .collect();
    (categories, series, pairing.unwrap_or(Pairing::Medians))
}

/// `r` relative to `base`, oriented so that more than 1 is better (speed), except for misses,
/// which stay a plain ratio: the per-round ratios' median, min and max where the rounds pair
/// (then `true`), else `r`'s median, min and max over `base`'s median.
fn relative_mark(r: &Row, base: &Row) -> (Mark, bool) {
    let plain = higher_is_better(&r.metric) || r.metric == "ll_misses";
    let by_rounds = paired(r, base, |a, b| if plain { a / b } else { b / a });
    if let Some(mark) = by_rounds {
        (mark, true)
    } else if plain {
        ((r.min / base.median, r.median / base.median, r.max / base.median), false)
    } else {
        ((base.median / r.max, base.median / r.median, base.median / r.min), false)
    }
}

/// `text` for a cell of a Markdown table: `|` escaped, no line breaks.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn procs(n: u64) -> String {
    if n == 1 {
        "1 processor".into()
    } else {
        format!("{n} processors")
    }
}

/// A chart row's name: the label's params, if any, and the processors.
fn category(label: &str, bench: &str, processors: u64) -> String {
    let rest = label.strip_prefix(bench).unwrap_or(label).trim();
    if rest.is_empty() {
        procs(processors)
    } else {
        format!("{rest}, {}", procs(processors))
    }
}

/// The headline: per `ns_per_op` bench of `micro` and `sync`, each peer's time per operation
/// over elite's.
fn headline(docs: &[Document]) -> Option<Chart> {
    let mut categories = Vec::new();
    let mut per_peer: Vec<(String, Vec<(usize, Mark)>)> = Vec::new();
    let mut footer = Vec::new();
    let mut pairing = None::<Pairing>;
    for doc in docs.iter().filter(|d| d.suite == "micro" || d.suite == "sync") {
        footer.extend(doc.footer().into_iter().take(1));
        let keys = unique(
            doc.rows.iter().filter(|r| r.metric == "ns_per_op").map(|r| (r.label.clone(), r.processors)),
        );
        for (label, p) in keys {
            let at = |system: &str| {
                doc.rows.iter().rev().find(|r| {
                    r.system == system && r.label == label && r.processors == p && r.metric == "ns_per_op"
                })
            };
            let Some(elite) = at("elite") else { continue };
            let peers: Vec<&Row> = doc
                .rows
                .iter()
                .filter(|r| {
                    !r.system.starts_with("elite")
                        && r.label == label
                        && r.processors == p
                        && r.metric == "ns_per_op"
                })
                .collect();
            if peers.is_empty() {
                continue;
            }
            let index = categories.len();
            categories.push(format!("{label}, {}", procs(p)));
            for peer in peers {
                let by_rounds = paired(peer, elite, |p, e| p / e);
                pairing = Some(Pairing::and_then(pairing, by_rounds.is_some()));
                let mark = by_rounds.unwrap_or((
                    peer.min / elite.median,
                    peer.median / elite.median,
                    peer.max / elite.median,
                ));
                match per_peer.iter_mut().find(|(name, _)| *name == peer.system) {
                    Some((_, marks)) => marks.push((index, mark)),
                    None => per_peer.push((peer.system.clone(), vec![(index, mark)])),
                }
            }
        }
    }
    if categories.is_empty() {
        return None;
    }
    if let Some(doc) = docs.iter().find(|d| d.suite == "micro" || d.suite == "sync") {
        footer.push(format!("host: {}", doc.host));
    }
    let series = per_peer
        .into_iter()
        .map(|(name, marks)| {
            let mut row = vec![None; categories.len()];
            for (i, m) in marks {
                row[i] = Some(m);
            }
            (name, row)
        })
        .collect();
    let (title, axis) = match pairing.unwrap_or(Pairing::Medians) {
        Pairing::Medians => (
            "Each peer's time per operation, in multiples of elite's (medians, whiskers min to max)",
            "times elite's median time per operation (> 1: the peer is slower)".to_string(),
        ),
        other => (
            "Each peer's time per operation, in multiples of elite's in the same round",
            format!(
                "times elite's time per operation (> 1: the peer is slower); {}",
                other.whiskers("the peer", "elite")
            ),
        ),
    };
    Some(Chart { title: title.into(), axis, footer, categories, series, reference: Some(1.0) })
}

/// The newest folder under `data` (folder names are dates, so the largest name).
fn newest_data_dir(data: &Path) -> Result<PathBuf, String> {
    let entries = std::fs::read_dir(data).map_err(|e| format!("cannot list `{}`: {e}", data.display()))?;
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.path())
        .max()
        .ok_or_else(|| format!("`{}` has no data folder", data.display()))
}

/// Builds the report from the documents in `data_dir`, for a page in `page_dir`.
pub fn generate(data_dir: &Path, page_dir: &Path) -> Result<Report, String> {
    let date = data_dir.file_name().map_or_else(|| "?".to_string(), |n| n.to_string_lossy().into_owned());
    let mut names: Vec<String> = crate::suites::SUITES.iter().map(|s| s.name.to_string()).collect();
    // Documents of suites this command does not run (the MPI examples' `mpi`) come after, by name.
    let mut others: Vec<String> = std::fs::read_dir(data_dir)
        .map_err(|e| format!("cannot list `{}`: {e}", data_dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".json")).map(str::to_string))
        .filter(|n| !names.contains(n) && !n.starts_with("before-"))
        .collect();
    others.sort();
    names.extend(others);
    let mut docs = Vec::new();
    for name in names {
        let path = data_dir.join(format!("{name}.json"));
        if path.is_file() {
            let doc = read_document(&path, page_dir, &date)?;
            if doc.suite != name {
                return Err(format!("`{}` holds suite `{}`, not `{name}`", path.display(), doc.suite));
            }
            docs.push(doc);
        }
    }
    if docs.is_empty() {
        return Err(format!("`{}` holds no suite's document (`<suite>.json`)", data_dir.display()));
    }

    let mut out = String::new();
    let mut plots = Vec::new();
    let data_link = relative(data_dir, page_dir);
    let _ = writeln!(out, "## The suites' latest data, as tables and charts: {date}\n");
    let _ = writeln!(
        out,
        "Written by `elite-bench report` from the JSON documents in [`{data_link}/`]({data_link}) \
         (`<suite>.json`), so these tables and charts never drift from the data. Regenerate them \
         from the documents, or run the suites first:\n"
    );
    let _ = writeln!(out, "```sh");
    let _ = writeln!(
        out,
        "cargo run -p elite-bench -- report                   # from the committed JSON, nothing run"
    );
    let _ = writeln!(
        out,
        "cargo run --release -p elite-bench -- report --run   # every suite, into docs/data/<today>/"
    );
    let _ = writeln!(out, "```\n");
    let _ = writeln!(
        out,
        "Every chart shows medians as dots with whiskers from min to max over the measured rounds, \
         on a logarithmic axis where the values span more than 20 times, and names its data file, \
         command, host and date underneath. A table cell is the median with (min-max).\n"
    );
    if docs.iter().flat_map(|d| &d.rows).any(|r| r.rounds.is_some()) {
        let _ = writeln!(
            out,
            "A chart of ratios (a policy against no-affinity, a peer against elite, N processors \
             against 1) pairs the two rows round by round where the documents have each row's \
             samples in round order (`rounds`): its dot is the median of the per-round ratios, its \
             whiskers their min and max, which say how far the ratio can be trusted on a host \
             whose speed changes from minute to minute. Documents without `rounds` give the ratio \
             of medians, with the subject's min and max over the baseline's median.\n"
        );
    }
    if let Some(chart) = headline(&docs) {
        plots.push(("headline.svg".to_string(), chart.to_svg()?));
        let _ =
            writeln!(out, "![Each peer's time per operation in multiples of elite's](plots/headline.svg)\n");
    }
    for doc in &docs {
        let _ = writeln!(out, "### `{}`\n", doc.suite);
        let _ = writeln!(out, "`{}` on {}; data [`{}`]({}).\n", doc.command, doc.machine, doc.file, doc.file);
        doc.table(&mut out);
        out.push('\n');
        doc.targets_table(&mut out);
        let mut charts = doc.bench_charts();
        charts.extend(doc.policy_charts());
        charts.extend(doc.scaling_chart());
        for (name, caption, chart) in charts {
            let _ = writeln!(out, "![{}: {caption}](plots/{name})\n", doc.suite);
            plots.push((name, chart.to_svg()?));
        }
    }
    // The page ends with one newline.
    while out.ends_with("\n\n") {
        out.pop();
    }
    Ok(Report { section: out, plots })
}

/// `page` with its generated part replaced by `section` (appended when the markers are absent).
pub fn splice(page: &str, section: &str) -> Result<String, String> {
    let block = format!("{BEGIN}\n{section}{END}\n");
    match (page.find(BEGIN), page.find(END)) {
        (Some(b), Some(e)) if b < e => {
            let after = &page[e + END.len()..];
            Ok(format!("{}{block}{}", &page[..b], after.strip_prefix('\n').unwrap_or(after)))
        }
        (None, None) => Ok(if page.is_empty() {
            format!("# Measured figures\n\n{block}")
        } else {
            format!("{}\n{block}", page.trim_end_matches('\n').to_string() + "\n")
        }),
        _ => Err(format!("the page's markers are broken: it needs `{BEGIN}` then `{END}`, once each")),
    }
}

/// What the report would do to the files on disk.
pub struct Plan {
    /// The page and every chart, with their contents.
    pub files: Vec<(PathBuf, String)>,
    /// Charts in `plots/` it would remove.
    pub stale: Vec<PathBuf>,
}

/// The files the report would write, with their contents: the page and every chart; and the
/// charts in `plots/` it would remove.
pub fn planned(data_dir: &Path, out: &Path) -> Result<Plan, String> {
    let page_dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let report = generate(data_dir, page_dir)?;
    let page = match std::fs::read_to_string(out) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read `{}`: {e}", out.display())),
    };
    let plots_dir = page_dir.join("plots");
    let mut files = vec![(out.to_path_buf(), splice(&page, &report.section)?)];
    files.extend(report.plots.into_iter().map(|(name, svg)| (plots_dir.join(name), svg)));
    let stale = match std::fs::read_dir(&plots_dir) {
        Ok(entries) => {
            let mut stale: Vec<PathBuf> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "svg") && !files.iter().any(|(f, _)| f == p))
                .collect();
            stale.sort();
            stale
        }
        Err(_) => Vec::new(),
    };
    Ok(Plan { files, stale })
}

/// The files among `files` whose contents differ from what is on disk, and the stale ones.
pub fn differences(files: &[(PathBuf, String)], stale: &[PathBuf]) -> Vec<String> {
    let mut out: Vec<String> = files
        .iter()
        .filter(|(path, text)| std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str()))
        .map(|(path, _)| format!("{} differs from what the data gives", path.display()))
        .collect();
    out.extend(stale.iter().map(|p| format!("{} is not a chart of this data", p.display())));
    out
}

/// Today's date (UTC) as `YYYY-MM-DD`.
fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// What `report`'s command line asked for.
#[derive(Debug, PartialEq)]
pub(crate) struct Options {
    pub data: Option<PathBuf>,
    pub out: PathBuf,
    pub check: bool,
    pub run: bool,
    pub quick: bool,
}

/// `report`'s command line, as clap parses it.
fn command() -> clap::Command {
    use clap::builder::{NonEmptyStringValueParser, TypedValueParser};
    use clap::{Arg, ArgAction};
    let path = || NonEmptyStringValueParser::new().map(PathBuf::from);
    clap::Command::new("elite-bench report")
        .about("docs/benchmarks.md's tables (the rows, and the targets where a document has them) and charts, from the suites' JSON documents")
        .no_binary_name(true)
        .args_override_self(true)
        .arg(Arg::new("data").long("data").value_name("DIR").value_parser(path()).help(
            "the folder of <suite>.json documents (default: the newest under docs/data/, or docs/data/<today> with --run)",
        ))
        .arg(
            Arg::new("out")
                .long("out")
                .value_name("FILE")
                .value_parser(path())
                .help("the page to write (default docs/benchmarks.md); the charts go to plots/ beside it"),
        )
        .arg(
            Arg::new("check")
                .long("check")
                .action(ArgAction::SetTrue)
                .conflicts_with("run")
                .help("compare the page and charts with what the data gives; exit 1 when they differ"),
        )
        .arg(Arg::new("run").long("run").action(ArgAction::SetTrue).help("run every suite first, writing the documents"))
        .arg(
            Arg::new("quick")
                .long("quick")
                .action(ArgAction::SetTrue)
                .requires("run")
                .help("with --run: the suites' shrunken sizes"),
        )
}

/// Parses `report`'s arguments; `Ok(None)` for `--help`.
pub(crate) fn parse_args(args: &[String]) -> Result<Option<Options>, String> {
    let matches = match command().try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => return Ok(None),
        Err(e) => return Err(crate::clap_message(&e)),
    };
    Ok(Some(Options {
        data: matches.get_one::<PathBuf>("data").cloned(),
        out: matches
            .get_one::<PathBuf>("out")
            .cloned()
            .unwrap_or_else(|| PathBuf::from("docs/benchmarks.md")),
        check: matches.get_flag("check"),
        run: matches.get_flag("run"),
        quick: matches.get_flag("quick"),
    }))
}

/// `elite-bench report ...`: exit 0 when written (or, with `--check`, up to date), 1 when a suite
/// failed, the data could not be read or the page differs, 2 for a command-line mistake.
pub fn main(args: &[String]) -> ExitCode {
    let options = match parse_args(args) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{}", command().render_help());
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("elite-bench report: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let page_dir =
        options.out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let data = match (&options.data, options.run) {
        (Some(dir), _) => dir.clone(),
        (None, true) => page_dir.join("data").join(today()),
        (None, false) => match newest_data_dir(&page_dir.join("data")) {
            Ok(dir) => dir,
            Err(e) => {
                eprintln!("elite-bench report: {e} (name one with --data DIR)");
                return ExitCode::FAILURE;
            }
        },
    };
    let mut status = ExitCode::SUCCESS;
    if options.run {
        if let Err(e) = run_suites(&data, options.quick) {
            eprintln!("elite-bench report: {e}");
            status = ExitCode::FAILURE;
        }
    }
    let Plan { files, stale } = match planned(&data, &options.out) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("elite-bench report: {e}");
            return ExitCode::FAILURE;
        }
    };
    if options.check {
        let differences = differences(&files, &stale);
        if differences.is_empty() {
            println!(
                "{} and its {} charts are what {} gives",
                options.out.display(),
                files.len() - 1,
                data.display()
            );
            return ExitCode::SUCCESS;
        }
        for d in differences {
            eprintln!("elite-bench report --check: {d}");
        }
        eprintln!(
            "rewrite them with: elite-bench report --data {} --out {}",
            data.display(),
            options.out.display()
        );
        return ExitCode::FAILURE;
    }
    for (path, text) in &files {
        let written =
            path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(path, text));
        if let Err(e) = written {
            eprintln!("elite-bench report: cannot write `{}`: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    for path in &stale {
        if let Err(e) = std::fs::remove_file(path) {
            eprintln!("elite-bench report: cannot remove the stale chart `{}`: {e}", path.display());
            status = ExitCode::FAILURE;
        }
    }
    println!("wrote {} and {} charts from {}", options.out.display(), files.len() - 1, data.display());
    status
}

/// Runs every suite with this same program, each writing `<suite>.json` into `data`.
fn run_suites(data: &Path, quick: bool) -> Result<(), String> {
    std::fs::create_dir_all(data).map_err(|e| format!("cannot create `{}`: {e}", data.display()))?;
    let me =
        std::env::current_exe().map_err(|e| format!("cannot find this program to run the suites: {e}"))?;
    let valgrind =
        std::process::Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success());
    let mut failed = Vec::new();
    for suite in crate::suites::SUITES {
        let mut command = std::process::Command::new(&me);
        command.arg(suite.name).arg("--json").arg(data.join(format!("{}.json", suite.name)));
        if quick {
            command.arg("--quick");
        }
        if suite.name == "affinity" && valgrind {
            command.arg("--cachegrind");
        }
        eprintln!("elite-bench report: running {:?}", command);
        match command.status() {
            Ok(s) if s.success() => {}
            Ok(s) => failed.push(format!("{} ({s})", suite.name)),
            Err(e) => failed.push(format!("{} ({e})", suite.name)),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "suites with failed rows or runs: {} (their documents say which rows)",
            failed.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The committed page and charts are what the committed data gives: regenerate them with
    /// `cargo run -p elite-bench -- report` when this fails.
    #[test]
    fn the_committed_report_is_what_the_committed_data_gives() {
        let docs = repo().join("docs");
        let data = newest_data_dir(&docs.join("data")).expect("a data folder");
        let Plan { files, stale } = planned(&data, &docs.join("benchmarks.md")).expect("the report builds");
        let differences = differences(&files, &stale);
        assert!(
            differences.is_empty(),
            "{}\nregenerate with: cargo run -p elite-bench -- report",
            differences.join("\n")
        );
    }

    #[test]
    fn splice_replaces_only_the_generated_part() {
        let page = format!("# T\n\nbefore\n{BEGIN}\nold\n{END}\nafter\n");
        assert_eq!(splice(&page, "new\n").unwrap(), format!("# T\n\nbefore\n{BEGIN}\nnew\n{END}\nafter\n"));
        assert_eq!(splice("", "x\n").unwrap(), format!("# Measured figures\n\n{BEGIN}\nx\n{END}\n"));
        assert!(splice(&format!("{END}\n{BEGIN}\n"), "x").is_err());
    }

    #[test]
    fn the_report_has_a_table_and_charts_per_suite() {
        let dir = std::env::temp_dir().join(format!("elite-report-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let row = |system: &str, procs: u64, median: f64| {
            serde_json::json!({"bench": "yield", "system": system, "metric": "ns_per_op", "median": median,
                "min": median / 2.0, "max": median * 2.0, "runs": 5, "ok": true, "params": {"processors": procs}})
        };
        let doc = serde_json::json!({"suite": "micro", "machine": {"cpus": 2, "cpu_model": "Test CPU", "kernel": "k",
            "l2_bytes": 524288, "l3_bytes": 33554432, "pmu": false},
            "results": [row("elite", 1, 10.0), row("go", 1, 100.0), row("elite", 2, 12.0),
                {"bench": "yield", "system": "may", "metric": "ns_per_op", "ok": false, "runs": 0, "params": {"processors": 1}}]});
        std::fs::write(dir.join("micro.json"), doc.to_string()).unwrap();
        let report = generate(&dir, &std::env::temp_dir()).expect("builds");
        assert!(
            report.section.contains("| `yield` | ns_per_op | 1 | 10 (5-20) | 100 (50-200) |\n| `yield` | ns_per_op | 2 | 12 (6-24) |  |"),
            "{}",
            report.section
        );
        assert!(report.section.contains("Failed rows: yield may"), "{}", report.section);
        let names: Vec<&str> = report.plots.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["headline.svg", "micro-yield-ns_per_op.svg", "micro-scaling.svg"]);
        let (_, svg) = &report.plots[1];
        for text in
            ["Test CPU, 2 CPUs, L2 512 KiB, L3 32 MiB", "elite-bench micro --json micro.json", "micro.json"]
        {
            assert!(svg.contains(text), "{text} missing from the chart");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A document the harness writes has each row's `rounds`, which the report reads back and
    /// pairs round by round; without them (a document from before the field) it falls back to
    /// the medians. The policy is at parity with no-affinity in every round but the third, and
    /// the slow phase (half the rate) held three of no-affinity's rounds and two of its own.
    #[test]
    fn rounds_travel_through_the_document_and_pair_the_ratios() {
        use crate::harness::{json_document, run_suite, Bench, Contender, Metric, Params, Progress, Sample};
        let contender = |system: &'static str, ns: [f64; 6]| {
            let mut round = 0;
            Contender::new(system, Params::new(1), 1, move || {
                round += 1;
                Ok(Sample { ns_per_op: ns[round - 1], answer: 1 })
            })
        };
        // The warm-up round first, then 5 measured ones.
        let bench = Bench {
            name: "b",
            metric: Metric::OpsPerSec,
            contenders: vec![
                contender("elite/no-affinity", [1.0, 2.0, 2.0, 2.0, 1.0, 1.0]),
                contender("elite/virtual-time", [1.0, 2.0, 2.0, 1.0, 1.0, 1.0]),
            ],
            targets: vec![],
        };
        let results = run_suite(vec![bench], 5, None, &mut Progress::new(false));
        let mut doc = json_document("affinity", &crate::machine::Machine::for_tests(), &results);
        assert_eq!(doc["results"][1]["rounds"], serde_json::json!([5e8, 5e8, 1e9, 1e9, 1e9]));
        let dir = std::env::temp_dir().join(format!("elite-report-rounds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("affinity.json");
        let read = |doc: &Value| {
            std::fs::write(&path, doc.to_string()).unwrap();
            let rows = read_document(&path, &dir, "d").expect("reads").rows;
            relative_mark(&rows[1], &rows[0])
        };
        // Per round 1, 1, 2, 1, 1: median 1; the medians' ratio would say 2.
        assert_eq!(read(&doc), ((1.0, 1.0, 2.0), true));
        for row in doc["results"].as_array_mut().unwrap() {
            row.as_object_mut().unwrap().remove("rounds");
        }
        assert_eq!(read(&doc), ((1.0, 2.0, 2.0), false));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A run's targets travel through its document into the suite's section, after the table,
    /// as the target lines printed them with their verdicts; a document without `targets` (from
    /// before the field) or with none gives the section it gave before, without a list.
    #[test]
    fn targets_travel_through_the_document_into_the_section() {
        use crate::harness::model::Subject;
        use crate::harness::{
            json_document, run_suite, Bench, Bound, Contender, Metric, Params, Progress, Sample, Target,
        };
        let contender = |system: &'static str, ns: f64| {
            Contender::new(system, Params::new(1), 1, move || Ok(Sample { ns_per_op: ns, answer: 1 }))
        };
        let relative = |subject, bound| Target::Relative { subject, baseline: "elite", processors: 1, bound };
        let bench = Bench {
            name: "yield",
            metric: Metric::NsPerOp,
            contenders: vec![contender("elite", 10.0), contender("corosensei", 5.0), contender("go", 200.0)],
            targets: vec![
                Target::EliteAtMost { peer: "corosensei", processors: 1, times: 1.5 },
                Target::PeerAtLeast { peer: "go", processors: 1, times: 5.0 },
                Target::PeerAtLeast { peer: "may", processors: 1, times: 5.0 },
                relative(Subject::Each(&["go"]), Bound::AtLeast(10.0)),
            ],
        };
        let results = run_suite(vec![bench], 6, None, &mut Progress::new(false));
        let doc = json_document("micro", &crate::machine::Machine::for_tests(), &results);
        let dir = std::env::temp_dir().join(format!("elite-report-targets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let section = |doc: &Value| {
            std::fs::write(dir.join("micro.json"), doc.to_string()).unwrap();
            generate(&dir, &dir).expect("builds").section
        };
        let with = section(&doc);
        let table = "| bench | target | verdict |\n| --- | --- | --- |\n\
                     | `yield` | elite 10.0 ns = 2.00x corosensei (target <= 1.5x: MISSED) | MISSED |\n\
                     | `yield` | go/elite = 20x (target >= 5x: met) | met |\n\
                     | `yield` | may skipped | skipped |\n\
                     | `yield` | vs elite: go = 20x (target >= 10x each: met) | met |\n";
        assert!(with.contains(table), "{with}");
        // After the rows' table, before the charts.
        let (rows_at, targets_at, chart_at) = (
            with.find("| `yield` | ns_per_op |").unwrap(),
            with.find(table).unwrap(),
            with.find("![micro").unwrap(),
        );
        assert!(rows_at < targets_at && targets_at < chart_at, "{with}");
        // No targets, or no `targets` at all: no list, and the same bytes either way.
        let mut none = doc.clone();
        none["targets"] = serde_json::json!([]);
        let mut old = doc.clone();
        old.as_object_mut().unwrap().remove("targets");
        let (none, old) = (section(&none), section(&old));
        assert!(!old.contains("Targets"), "{old}");
        assert_eq!(none, old);
        assert_eq!(with.replace(&format!("Targets, as the command's target lines printed them (the document's `targets`):\n\n{table}\n"), ""), old);
        // Verdicts the target lines qualify, and a failed one, from their fields.
        let read = |t: Value| TargetLine::read(&t).unwrap().verdict;
        let target = |fields: Value| {
            let mut t = serde_json::json!({"bench": "b", "text": "t", "state": "judged"});
            t.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
            t
        };
        assert_eq!(
            read(target(serde_json::json!({"met": true, "certainty": "undecided"}))),
            "met, undecided at 95%"
        );
        assert_eq!(
            read(target(serde_json::json!({"met": false, "certainty": "too_few_rounds",
                "subjects": [{"certainty": "decided", "rounds": 3}, {"certainty": "too_few_rounds", "rounds": 5}]}))),
            "MISSED, no 95% interval from 5 rounds"
        );
        assert_eq!(read(target(serde_json::json!({"state": "failed", "met": null}))), "failed");
        assert_eq!(cell("a | b"), "a \\| b");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn arguments_say_what_was_wrong() {
        let args = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(parse_args(&args(&["--check"])).unwrap().unwrap().check);
        let err = parse_args(&args(&["--data"])).unwrap_err();
        assert!(err.contains("'--data <DIR>'"), "{err}");
        let err = parse_args(&args(&["--frob"])).unwrap_err();
        assert!(err.contains("'--frob'"), "{err}");
        let err = parse_args(&args(&["--quick"])).unwrap_err();
        assert!(err.contains("--run"), "{err}");
        let err = parse_args(&args(&["--run", "--check"])).unwrap_err();
        assert!(err.contains("'--check'") && err.contains("'--run'"), "{err}");
        assert!(parse_args(&args(&["--help"])).unwrap().is_none());
    }

    #[test]
    fn today_is_a_date() {
        let t = today();
        assert_eq!(t.len(), 10, "{t}");
        assert!(t.starts_with("20"), "{t}");
    }
}
