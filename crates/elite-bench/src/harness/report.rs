//! The human report: the table of rows, the failures, the target lines, and the progress line
//! drawn on a terminal while a suite runs.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::model::{
    BenchResult, Bound, Certainty, Judged, Judgement, Metric, Outcome, Params, Ratio, Row, Subject,
    SuiteResults, Target, Verdict, REPS,
};

/// The progress line on stderr (an `indicatif` bar), drawn only when stderr is a terminal.
pub struct Progress {
    /// Whether to draw at all.
    enabled: bool,
    /// Runs in the whole suite.
    pub(super) total: usize,
    /// Runs finished.
    pub(super) done: usize,
    /// Measured rounds per bench.
    pub(super) reps: usize,
    /// The most measured rounds per bench (`--max-reps`), if more may follow `reps`.
    pub(super) max_reps: Option<usize>,
    /// The bar, made at the first run (once `total` is known).
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    /// A progress line that draws when `enabled`.
    pub fn new(enabled: bool) -> Progress {
        Progress { enabled, total: 0, done: 0, reps: REPS, max_reps: None, bar: None }
    }

    /// Draws the line for the run about to start.
    pub(super) fn show(&mut self, bench: &str, system: &str, round: usize) {
        if !self.enabled {
            return;
        }
        let total = self.total as u64;
        let bar = self.bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total),
                indicatif::ProgressDrawTarget::stderr(),
            );
            let style = indicatif::ProgressStyle::with_template("[{bar:24}] {pos}/{len} {msg}")
                .expect("the template is valid")
                .progress_chars("#>.");
            bar.set_style(style);
            bar
        });
        let stage = match (round, self.max_reps) {
            (0, _) => "warm-up".to_string(),
            (r, Some(max)) if r > self.reps => format!("rep {r} (undecided; at most {max})"),
            (r, _) => format!("rep {r}/{}", self.reps),
        };
        bar.set_length(total);
        bar.set_position(self.done as u64);
        bar.set_message(format!("{bench} {system} {stage}"));
    }

    /// Prints `line` on stderr, above the progress line if there is one.
    pub(super) fn note(&mut self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// Erases the line.
    pub(super) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Params {
    /// The text parameters as `name=value` words, for the report.
    fn text_words(&self) -> Vec<String> {
        self.values.iter().filter_map(|(n, v)| v.as_str().map(|v| format!("{n}={v}"))).collect()
    }
}

impl Metric {
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
            Metric::Seconds => {
                let (scale, unit) = time_unit(value * 1e9);
                (scale / 1e9, unit)
            }
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

impl Bound {
    /// `>= 1.3x`, `<= 0.7x`.
    fn describe(self) -> String {
        match self {
            Bound::AtLeast(b) => format!(">= {}", format_ratio(b)),
            Bound::AtMost(b) => format!("<= {}", format_ratio(b)),
        }
    }
}

impl Row {
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

/// A ratio without its `x`: `1.30`, `18`.
fn ratio_number(ratio: f64) -> String {
    format_ratio(ratio).trim_end_matches('x').to_string()
}

/// How two rows compare, as a target line says it: the median of the per-round ratios with
/// their range and, from 6 rounds on, the 95% interval of the median, `1.02x (0.95-1.07, 95%:
/// 0.97-1.05)` (the range left out when every round gave the same ratio, as one round does), or
/// `1.02x (ratio of medians)` when the rounds could not be paired.
fn format_estimate(ratio: Ratio) -> String {
    match ratio {
        Ratio::Paired { median, min, max, interval, .. } if min != max => {
            let confidence = interval.map_or_else(String::new, |(lo, hi)| {
                format!(", 95%: {}-{}", ratio_number(lo), ratio_number(hi))
            });
            format!("{} ({}-{}{confidence})", format_ratio(median), ratio_number(min), ratio_number(max))
        }
        Ratio::Paired { median, .. } | Ratio::Once(median) => format_ratio(median),
        Ratio::OfMedians(ratio) => format!("{} (ratio of medians)", format_ratio(ratio)),
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
pub(super) fn target_line(bench: &BenchResult) -> String {
    let parts: Vec<String> = judge(bench).into_iter().map(|judgement| judgement.text).collect();
    format!("{}: {}", bench.name, parts.join("; "))
}

/// Each of the bench's targets judged on its rows, in the bench's order: the part of the target
/// line each prints, and the figures behind it (which the JSON document records).
pub(crate) fn judge(bench: &BenchResult) -> Vec<Judgement> {
    bench.targets.iter().map(|target| target_part(bench, target)).collect()
}

/// How many of the bench's targets are undecided at 95% (see [`Verdict::undecided`]): their
/// interval contains the bound, or the rounds are too few for an interval. A target that
/// failed or was skipped is not undecided: more rounds would not judge it.
pub(super) fn undecided_targets(bench: &BenchResult) -> usize {
    judge(bench).iter().filter(|j| j.outcome.verdict().is_some_and(Verdict::undecided)).count()
}

/// The words of a target's verdict: `met` or `MISSED` as the median says, and, when the 95%
/// interval contains the bound, `, undecided at 95%`; when the rounds are too few for an
/// interval, `, no 95% interval from 5 rounds`.
fn verdict(verdict: Verdict) -> String {
    let met = if verdict.met { "met" } else { "MISSED" };
    match verdict.certainty {
        Certainty::Straddles => format!("{met}, undecided at 95%"),
        Certainty::TooFew(1) => format!("{met}, no 95% interval from 1 round"),
        Certainty::TooFew(n) => format!("{met}, no 95% interval from {n} rounds"),
        Certainty::Decided | Certainty::NoInterval => met.to_string(),
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

/// A target not judged, with its text.
fn unjudged(text: String, outcome: Outcome) -> Judgement {
    Judgement { text, outcome, subjects: Vec::new(), best: None }
}

/// A target judged on one system, with its text.
fn judged_one(
    text: String,
    system: &'static str,
    baseline: Option<&str>,
    ratio: Ratio,
    v: Verdict,
) -> Judgement {
    Judgement {
        text,
        outcome: Outcome::Judged(v),
        subjects: vec![Judged { system, baseline: baseline.map(str::to_string), ratio, verdict: v }],
        best: None,
    }
}

/// One target judged on a bench's rows: its part of the target line, its outcome (not judged
/// when a row it needs failed or is missing) and the estimates behind the verdict.
fn target_part(bench: &BenchResult, target: &Target) -> Judgement {
    let metric = bench.metric;
    let failed = |text: String| unjudged(text, Outcome::Failed);
    let skipped = |text: String| unjudged(text, Outcome::Skipped);
    match *target {
        Target::EliteAtMost { peer, processors, times } | Target::PeerAtLeast { peer, processors, times } => {
            let (elite, other) = match (bench.elite(processors), bench.system_at(peer, processors)) {
                (None, _) => return failed(format!("elite (processors {processors}) failed")),
                (Some(elite), _) if !elite.ok() => {
                    return failed(format!("elite (processors {processors}) failed"))
                }
                (_, None) => return skipped(format!("{peer} skipped")),
                (_, Some(other)) if !other.ok() => return failed(format!("{peer} failed")),
                (Some(elite), Some(other)) => (elite, other),
            };
            let at = at_processors(processors);
            match *target {
                Target::EliteAtMost { .. } => {
                    let Some(ratio) = elite.ratio_to(other, |e, o| metric.cost(e) / metric.cost(o)) else {
                        return failed(format!("{peer} failed"));
                    };
                    let v = ratio.verdict(|r| r <= times);
                    let text = format!(
                        "elite{at} {} = {} {peer} (target <= {times}x: {})",
                        elite.median().map_or_else(String::new, |m| metric.format(m)),
                        format_estimate(ratio),
                        verdict(v)
                    );
                    judged_one(text, "elite", Some(peer), ratio, v)
                }
                _ => {
                    let Some(ratio) = elite.ratio_to(other, |e, o| metric.cost(o) / metric.cost(e)) else {
                        return failed(format!("{peer} failed"));
                    };
                    let v = ratio.verdict(|r| r >= times);
                    let met = verdict(v);
                    let text = if metric == Metric::NsPerOp {
                        format!("{peer}/elite{at} = {} (target >= {times}x: {met})", format_estimate(ratio))
                    } else {
                        format!(
                            "elite{at} = {} the rate of {peer} (target >= {times}x: {met})",
                            format_estimate(ratio)
                        )
                    };
                    judged_one(text, "elite", Some(peer), ratio, v)
                }
            }
        }
        Target::EliteAtLeast { processors, value } => {
            let at = at_processors(processors);
            match bench.elite(processors).map(|row| (row.median(), row.estimate())) {
                None => skipped(format!("elite{at} skipped")),
                Some((Some(elite), Some(estimate))) => {
                    let v = estimate.verdict(|x| metric.cost(x) <= metric.cost(value));
                    let confidence = match estimate {
                        Ratio::Paired { interval: Some((lo, hi)), min, max, .. } if min != max => {
                            let (scale, _) = metric.unit(elite);
                            format!(" (95%: {}-{})", three_digits(lo / scale), three_digits(hi / scale))
                        }
                        _ => String::new(),
                    };
                    let text = format!(
                        "elite{at} {}{confidence} (target >= {}: {})",
                        metric.format(elite),
                        metric.format(value),
                        verdict(v)
                    );
                    judged_one(text, "elite", None, estimate, v)
                }
                Some(_) => failed(format!("elite{at} failed")),
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
                return skipped(format!("{scope}: {system} skipped"));
            };
            match (row.estimate(), row.params.text("best")) {
                (Some(ratio), Some(best)) => {
                    let v = ratio.verdict(|r| r <= times);
                    let text = format!(
                        "{scope}: {system} = {} {best}, the best of {} (target <= {}x: {})",
                        format_estimate(ratio),
                        others.join(", "),
                        three_digits(times),
                        verdict(v)
                    );
                    judged_one(text, system, Some(best), ratio, v)
                }
                _ => failed(format!("{scope}: {system} failed")),
            }
        }
    }
}

/// A [`Target::Relative`] judged: each subject's ratio to the baseline is the median of the
/// per-round ratios where the rows pair round by round (see [`Row::ratio_to`]), shown with their
/// range and 95% interval. The best of several is decided when one subject's interval lies
/// wholly within the bound or every subject's wholly outside it; each of several when one lies
/// wholly outside or every one wholly within (see [`Verdict::any`], [`Verdict::all`]).
fn relative_part(
    bench: &BenchResult,
    subject: Subject,
    baseline: &str,
    processors: usize,
    bound: Bound,
) -> Judgement {
    let metric = bench.metric;
    let row = |system: &str| {
        bench
            .rows
            .iter()
            .find(|r| r.system == system && r.metric == metric && r.params.processors == processors)
    };
    let at = at_processors(processors);
    let target = format!("target {}", bound.describe());
    // A baseline that runs at one processor count only (a sequential reference) is compared
    // with the subjects at every count: it ran in the same rounds, so it pairs round by round.
    let rows: Vec<&Row> = bench.rows.iter().filter(|r| r.system == baseline && r.metric == metric).collect();
    let base = match rows.iter().find(|r| r.params.processors == processors) {
        Some(r) => *r,
        None if rows.len() == 1 => rows[0],
        None => return unjudged(format!("{baseline}{at} skipped"), Outcome::Skipped),
    };
    if !base.ok() {
        return unjudged(format!("{baseline}{at} failed"), Outcome::Failed);
    }
    let (names, best) = match subject {
        Subject::Best(names) => (names, true),
        Subject::Each(names) => (names, false),
    };
    let mut judged: Vec<Judged> = Vec::new();
    for &name in names {
        let Some(r) = row(name) else { continue };
        match r.ratio_to(base, |s, b| s / b) {
            None => return unjudged(format!("{name}{at} failed"), Outcome::Failed),
            Some(ratio) => judged.push(Judged {
                system: name,
                baseline: Some(baseline.to_string()),
                ratio,
                verdict: ratio.verdict(|r| bound.holds(r)),
            }),
        }
    }
    let verdicts: Vec<Verdict> = judged.iter().map(|j| j.verdict).collect();
    let skipped = || unjudged(format!("{}{at} skipped", names.join(", ")), Outcome::Skipped);
    if best {
        // The best subject is the one whose ratio to the baseline is best in the metric's sense.
        let Some(shown) = judged
            .iter()
            .min_by(|a, b| metric.cost(a.ratio.value()).total_cmp(&metric.cost(b.ratio.value())))
        else {
            return skipped();
        };
        let Some(v) = Verdict::any(&verdicts) else { unreachable!("judged is not empty") };
        let text = format!(
            "best of {}{at}: {} = {} {baseline} ({target}: {})",
            names.join(", "),
            shown.system,
            format_estimate(shown.ratio),
            verdict(v)
        );
        let best = Some(shown.system);
        Judgement { text, outcome: Outcome::Judged(v), subjects: judged, best }
    } else {
        let Some(v) = Verdict::all(&verdicts) else {
            return skipped();
        };
        let ratios: Vec<String> =
            judged.iter().map(|j| format!("{} = {}", j.system, format_estimate(j.ratio))).collect();
        let text = format!("vs {baseline}{at}: {} ({target} each: {})", ratios.join(", "), verdict(v));
        Judgement { text, outcome: Outcome::Judged(v), subjects: judged, best: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::model::{row, Sample, Stop};

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
            rounds: 1,
            stop: Stop::Reps,
            core_round_trip_ns: [None, None],
        };
        assert_eq!(
            target_line(&bench),
            "yield: elite 10.0 ns = 2.50x corosensei (target <= 2x: MISSED, no 95% interval from 1 round); \
             go/elite = 20x (target >= 5x: met, no 95% interval from 1 round); may skipped"
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
            rounds: 1,
            stop: Stop::Reps,
            core_round_trip_ns: [None, None],
        };
        assert_eq!(
            target_line(&bench),
            "ping_pong: go/elite = 100x (target >= 10x: met, no 95% interval from 1 round); \
             go/elite (processors 2) = 5.00x (target >= 10x: MISSED, no 95% interval from 1 round)"
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
            rounds: 1,
            stop: Stop::Reps,
            core_round_trip_ns: [None, None],
        };
        assert_eq!(
            target_line(&bench),
            "sync_peak: elite (processors 2) 20.0 Mop/s/proc (target >= 20.0 Mop/s/proc: met, no 95% \
             interval from 1 round); elite (processors 2) = 2.00x the rate of elite/central (target >= \
             1x: met, no 95% interval from 1 round)"
        );
    }

    /// A baseline with one row (the grid's sequential reference, at 1 processor) is compared
    /// with the subjects at every processor count; one with rows at other counts only is not.
    #[test]
    fn a_single_row_baseline_is_compared_at_every_count() {
        let metric = Metric::OpsPerSec;
        let at = |system: &'static str, processors: usize, value: f64| {
            let mut r = row(&[value]);
            (r.system, r.params, r.metric) = (system, Params::new(processors), metric);
            r
        };
        let bench = BenchResult {
            name: "adaptive_grid",
            metric,
            rows: vec![
                at("sequential", 1, 100.0),
                at("rayon", 1, 90.0),
                at("rayon", 4, 200.0),
                at("elite/a", 1, 95.0),
                at("elite/a", 2, 150.0),
            ],
            targets: vec![
                Target::Relative {
                    subject: Subject::Best(&["elite/a"]),
                    baseline: "sequential",
                    processors: 2,
                    bound: Bound::AtLeast(1.33),
                },
                Target::Relative {
                    subject: Subject::Best(&["elite/a"]),
                    baseline: "rayon",
                    processors: 2,
                    bound: Bound::AtLeast(1.0),
                },
            ],
            rounds: 1,
            stop: Stop::Reps,
            core_round_trip_ns: [None, None],
        };
        let line = target_line(&bench);
        assert!(
            line.contains("elite/a = 1.50x sequential (target >= 1.33x: met, no 95% interval from 1 round)"),
            "{line}"
        );
        assert!(line.contains("rayon (processors 2) skipped"), "{line}");
    }

    /// Rates in rounds that fell in a slow phase (rounds 1-3 of the sequential row, 1-2 of
    /// `b`'s): by the ratio of medians `b` would be the best at 2.10x; round by round it is
    /// 1.05x, and `a`, 1.10x in its median round, is the best.
    #[test]
    fn relative_targets_pair_rounds_and_say_when_they_cannot() {
        let metric = Metric::OpsPerSec;
        let at = |system: &'static str, processors: usize, rounds: &[f64]| {
            let mut r = row(rounds);
            (r.system, r.params, r.metric) = (system, Params::new(processors), metric);
            r
        };
        let bench = BenchResult {
            name: "adaptive_grid",
            metric,
            rows: vec![
                at("sequential", 1, &[1.0, 1.0, 1.0, 2.0, 2.0]),
                at("b", 2, &[1.05, 1.05, 2.1, 2.1, 2.1]),
                at("a", 2, &[1.1, 1.0, 1.1, 2.4, 2.2]),
                at("once", 2, &[1.0]),
            ],
            targets: vec![
                Target::Relative {
                    subject: Subject::Best(&["b", "a"]),
                    baseline: "sequential",
                    processors: 2,
                    bound: Bound::AtLeast(1.08),
                },
                Target::Relative {
                    subject: Subject::Each(&["a"]),
                    baseline: "once",
                    processors: 2,
                    bound: Bound::AtLeast(1.0),
                },
            ],
            rounds: 1,
            stop: Stop::Reps,
            core_round_trip_ns: [None, None],
        };
        assert_eq!(
            target_line(&bench),
            "adaptive_grid: best of b, a (processors 2): a = 1.10x (1.00-1.20) sequential \
             (target >= 1.08x: met, no 95% interval from 5 rounds); vs once (processors 2): a = 1.10x (ratio of medians) \
             (target >= 1.00x each: met)"
        );
    }

    /// Nine rounds of rates against a baseline of 1 in every round: `hi` lies wholly above 1.3 (95%:
    /// 1.40-1.60), `lo` wholly below (0.95-1.05), `mid`'s interval (1.15-1.45) contains both 1.3
    /// and 1.35.
    #[test]
    fn target_lines_say_when_the_interval_leaves_the_verdict_undecided() {
        let metric = Metric::OpsPerSec;
        let at = |system: &'static str, rounds: &[f64]| {
            let mut r = row(rounds);
            (r.system, r.metric) = (system, metric);
            r
        };
        let targets = vec![
            Target::Relative {
                subject: Subject::Best(&["lo", "mid"]),
                baseline: "base",
                processors: 1,
                bound: Bound::AtLeast(1.3),
            },
            Target::Relative {
                subject: Subject::Best(&["lo", "hi"]),
                baseline: "base",
                processors: 1,
                bound: Bound::AtLeast(1.3),
            },
            Target::Relative {
                subject: Subject::Each(&["lo", "hi"]),
                baseline: "base",
                processors: 1,
                bound: Bound::AtLeast(1.3),
            },
            Target::Relative {
                subject: Subject::Each(&["mid"]),
                baseline: "base",
                processors: 1,
                bound: Bound::AtLeast(1.35),
            },
        ];
        let bench = BenchResult {
            name: "b",
            metric,
            rows: vec![
                at("base", &[1.0; 9]),
                at("lo", &[0.9, 1.0, 1.1, 0.95, 1.05, 1.0, 0.98, 1.02, 1.0]),
                at("mid", &[1.1, 1.2, 1.3, 1.4, 1.5, 1.25, 1.35, 1.45, 1.15]),
                at("hi", &[1.5, 1.4, 1.6, 1.5, 1.45, 1.55, 1.5, 1.35, 1.65]),
            ],
            targets,
            rounds: 9,
            stop: Stop::Reps,
            core_round_trip_ns: [None, None],
        };
        assert_eq!(
            target_line(&bench),
            "b: best of lo, mid: mid = 1.30x (1.10-1.50, 95%: 1.15-1.45) base \
             (target >= 1.30x: met, undecided at 95%); \
             best of lo, hi: hi = 1.50x (1.35-1.65, 95%: 1.40-1.60) base (target >= 1.30x: met); \
             vs base: lo = 1.00x (0.90-1.10, 95%: 0.95-1.05), hi = 1.50x (1.35-1.65, 95%: 1.40-1.60) \
             (target >= 1.30x each: MISSED); \
             vs base: mid = 1.30x (1.10-1.50, 95%: 1.15-1.45) (target >= 1.35x each: MISSED, undecided at 95%)"
        );
        assert_eq!(undecided_targets(&bench), 2);
    }

    #[test]
    fn verdict_words() {
        let v = |met, certainty| verdict(Verdict { met, certainty });
        assert_eq!(v(true, Certainty::Decided), "met");
        assert_eq!(v(false, Certainty::Decided), "MISSED");
        assert_eq!(v(false, Certainty::NoInterval), "MISSED");
        assert_eq!(v(false, Certainty::Straddles), "MISSED, undecided at 95%");
        assert_eq!(v(true, Certainty::Straddles), "met, undecided at 95%");
        assert_eq!(v(true, Certainty::TooFew(5)), "met, no 95% interval from 5 rounds");
        assert_eq!(v(false, Certainty::TooFew(1)), "MISSED, no 95% interval from 1 round");
    }
}
