//! Running a suite: bench by bench, one warm-up round and [`REPS`](super::model::REPS) measured rounds, every
//! contender once per round, in the bench's order in odd rounds and in reverse in even ones (with
//! `--max-reps`, more rounds while a target is undecided at 95%); answers checked, failed contenders not run
//! again, side values gathered, derived rows made, and a watchdog for runs that hang.

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::model::{
    median_of_sorted, Bench, BenchResult, Contender, Metric, Row, Sample, Stop, SuiteResults, Target,
};
use super::report::{undecided_targets, Progress};

/// How long one run of a workload may take before the command gives up on it: a hung runtime
/// ends the command with a message naming the run instead of hanging CI.
const RUN_TIME_LIMIT: Duration = Duration::from_secs(300);

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

/// Runs every bench: one warm-up round and `reps` measured rounds ([`REPS`](super::model::REPS) by default),
/// contenders interleaved; with `max_reps` (`--max-reps`), more rounds while a target is
/// undecided, up to `max_reps` in all (see [`run_bench`]), each bench's count and why it stopped
/// said on stderr.
pub fn run_suite(
    benches: Vec<Bench>,
    reps: usize,
    max_reps: Option<usize>,
    progress: &mut Progress,
) -> SuiteResults {
    progress.reps = reps;
    progress.max_reps = max_reps;
    progress.total = benches.iter().map(|b| b.contenders.len() * (reps + 1)).sum();
    let watchdog = Watchdog::start();
    let results = benches
        .into_iter()
        .map(|bench| {
            let result = run_bench(bench, reps, max_reps, progress, &watchdog);
            if let Some(max_reps) = max_reps {
                progress.note(&rounds_note(&result, max_reps));
            }
            result
        })
        .collect();
    progress.finish();
    SuiteResults { benches: results }
}

/// How many rounds a bench ran and why it stopped, for stderr.
fn rounds_note(result: &BenchResult, max_reps: usize) -> String {
    let why = match result.stop {
        Stop::Reps => "the rounds --reps asked for".to_string(),
        Stop::Decided => "no target undecided at 95%".to_string(),
        Stop::MaxReps => {
            let open = undecided_targets(result);
            let targets = if open == 1 { "target" } else { "targets" };
            format!("--max-reps {max_reps} reached, {open} {targets} undecided at 95%")
        }
    };
    format!("elite-bench: {}: {} measured rounds, stopped: {why}", result.name, result.rounds)
}

/// Runs one bench's rounds: a warm-up round, then `reps` measured ones; then, with `max_reps`,
/// one more round at a time while one of the bench's targets is undecided at 95% (its interval
/// contains its bound, or the rounds are too few for an interval: [`undecided_targets`]) and
/// fewer than `max_reps` were measured. An added round is like the others (every contender,
/// in the order of its parity), so the rows stay paired by round.
fn run_bench(
    bench: Bench,
    reps: usize,
    max_reps: Option<usize>,
    progress: &mut Progress,
    watchdog: &Watchdog,
) -> BenchResult {
    let Bench { name, metric, mut contenders, targets } = bench;
    let mut rows: Vec<Row> = contenders
        .iter()
        .map(|c| Row {
            bench: name,
            system: c.system,
            metric,
            params: c.params.clone(),
            samples: Vec::with_capacity(max_reps.unwrap_or(reps)),
            rounds: Vec::new(),
            failure: None,
            once: c.once,
        })
        .collect();
    // Where the host placed its CPUs, as the bench starts (see `core_round_trip_ns`).
    let before = crate::machine::core_round_trip_ns();
    // Rows of side values (see `record_side`), by contender, in the order their names came.
    let mut sides: Vec<Vec<Row>> = contenders.iter().map(|_| Vec::new()).collect();
    let mut round = 0;
    let stop = loop {
        // `round - 1` rounds have been measured (round 0 is the warm-up).
        if round > reps {
            let Some(max_reps) = max_reps else { break Stop::Reps };
            let so_far = BenchResult {
                name,
                metric,
                rows: assemble(name, metric, rows.clone(), sides.clone(), &targets),
                targets: targets.clone(),
                rounds: round - 1,
                stop: Stop::Reps,
                core_round_trip_ns: [None, None],
            };
            if undecided_targets(&so_far) == 0 {
                break Stop::Decided;
            }
            if round > max_reps {
                break Stop::MaxReps;
            }
            progress.total += contenders.len();
        }
        // Odd rounds (the first measured one among them) run the contenders in the bench's order,
        // even rounds (the warm-up among them) in reverse: a machine whose speed drifts within a
        // round then favours no place in the order, over two rounds, where a fixed order would
        // give the first contender the same share of the drift in every round.
        let order: Vec<usize> = if round % 2 == 1 {
            (0..contenders.len()).collect()
        } else {
            (0..contenders.len()).rev().collect()
        };
        for i in order {
            let (contender, row, side_rows) = (&mut contenders[i], &mut rows[i], &mut sides[i]);
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
                                    samples: Vec::with_capacity(reps),
                                    rounds: Vec::new(),
                                    failure: None,
                                    once: row.once,
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
        round += 1;
    };
    let after = crate::machine::core_round_trip_ns();
    let rows = assemble(name, metric, rows, sides, &targets);
    BenchResult { name, metric, rows, targets, rounds: round - 1, stop, core_round_trip_ns: [before, after] }
}

/// The rows of a bench from its contenders' rows and their side rows, whose samples are in
/// round order: each contender's side rows after its own (failed with it), then the rows the
/// targets derive; every row's samples kept in round order in `rounds` and sorted in `samples`.
fn assemble(
    name: &'static str,
    metric: Metric,
    rows: Vec<Row>,
    mut sides: Vec<Vec<Row>>,
    targets: &[Target],
) -> Vec<Row> {
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
    // The derived rows pair samples by round, so they are made before the samples are sorted;
    // every row keeps its samples in round order too (the targets pair them).
    let mut rows = rows;
    let derived: Vec<Row> =
        targets.iter().filter_map(|target| derived_row(name, metric, &rows, target)).collect();
    rows.extend(derived);
    for row in &mut rows {
        row.rounds = row.samples.clone();
        row.samples.sort_by(f64::total_cmp);
    }
    rows
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
        rounds: Vec::new(),
        failure: None,
        once: judged.once,
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

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::harness::json::json_document;
    use crate::harness::model::{median_interval_rank, Bound, Params, Subject, REPS};
    use crate::harness::report::target_line;
    use crate::machine::Machine;

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
        let result = run_bench(bench, 7, None, &mut Progress::new(false), &Watchdog::start());
        assert!(result.rows[0].ok());
        assert_eq!(result.rows[0].samples.len(), 7);
        assert!(!result.rows[1].ok());
        assert!(result.rows[2].failure.as_deref() == Some("panicked: boom"));
        let results = SuiteResults { benches: vec![result] };
        assert!(!results.all_ok());
        let machine = Machine::for_tests();
        let doc = json_document("micro", &machine, &results);
        assert_eq!(doc["results"][1]["ok"], json!(false));
        assert_eq!(doc["results"][1]["median"], Value::Null);
        assert_eq!(doc["results"][0]["params"]["processors"], json!(1));
    }

    #[test]
    fn rounds_alternate_the_order_of_the_contenders() {
        let calls = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let contender = |system: &'static str| {
            let calls = calls.clone();
            Contender::new(system, Params::new(1), 1, move || {
                calls.borrow_mut().push(system);
                Ok(Sample { ns_per_op: 1.0, answer: 1 })
            })
        };
        let bench = Bench {
            name: "b",
            metric: Metric::NsPerOp,
            contenders: vec![contender("a"), contender("b"), contender("c")],
            targets: vec![],
        };
        let result = run_bench(bench, 3, None, &mut Progress::new(false), &Watchdog::start());
        assert!(result.rows.iter().all(Row::ok));
        // The warm-up and the second measured round in reverse, the first and third in order.
        assert_eq!(*calls.borrow(), ["c", "b", "a", "a", "b", "c", "c", "b", "a", "a", "b", "c"]);
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
        let result = run_bench(bench, REPS, None, &mut Progress::new(false), &Watchdog::start());
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
            "spin_regimes: regime short: adaptive = 1.10x (1.00-2.00) block, the best of spin, block \
             (target <= 1.10x: met, no 95% interval from 5 rounds); regime long: adaptive failed"
        );
        let machine = Machine::for_tests();
        let doc = json_document("sync", &machine, &SuiteResults { benches: vec![result] });
        assert_eq!(doc["results"][4]["metric"], json!("ratio_to_best"));
        assert_eq!(doc["results"][4]["params"], json!({"processors": 2, "regime": "short", "best": "block"}));
        assert_eq!(doc["results"][4]["median"], json!(1.1));
    }

    /// A contender whose sample in measured round `r` (from 1) is `value(r)`; its warm-up
    /// sample is `value(1)`.
    fn scripted(system: &'static str, value: impl Fn(usize) -> f64 + 'static) -> Contender {
        let mut calls = 0;
        Contender::new(system, Params::new(1), 1, move || {
            let round = calls.max(1);
            calls += 1;
            Ok(Sample { ns_per_op: value(round), answer: 1 })
        })
    }

    /// `subject` at least 1.3 times `base`, at 1 processor.
    fn at_least_13(subject: &'static [&'static str]) -> Target {
        Target::Relative {
            subject: Subject::Best(subject),
            baseline: "base",
            processors: 1,
            bound: Bound::AtLeast(1.3),
        }
    }

    /// A bench of `base` (10 in every round) and `s` (10 times `ratio(r)` in round `r`), its
    /// target `s >= 1.3x base`.
    fn ratio_bench(ratio: impl Fn(usize) -> f64 + 'static) -> Bench {
        Bench {
            name: "b",
            metric: Metric::NsPerOp,
            contenders: vec![scripted("base", |_| 10.0), scripted("s", move |r| 10.0 * ratio(r))],
            targets: vec![at_least_13(&["s"])],
        }
    }

    /// Runs `bench` with `--reps reps --max-reps max`.
    fn adaptive(bench: Bench, reps: usize, max: usize) -> BenchResult {
        run_bench(bench, reps, Some(max), &mut Progress::new(false), &Watchdog::start())
    }

    #[test]
    fn a_target_decided_at_once_adds_no_round() {
        let result = adaptive(ratio_bench(|_| 2.0), 9, 25);
        assert_eq!((result.rounds, result.stop), (9, Stop::Decided));
        assert!(result.rows.iter().all(|r| r.samples.len() == 9));
        assert_eq!(
            rounds_note(&result, 25),
            "elite-bench: b: 9 measured rounds, stopped: no target undecided at 95%"
        );
        // Without --max-reps, the rounds --reps asked for, whatever the targets.
        let result = run_bench(ratio_bench(|_| 2.0), 5, None, &mut Progress::new(false), &Watchdog::start());
        assert_eq!((result.rounds, result.stop), (5, Stop::Reps));
        // Five rounds give no interval: a sixth is run, and decides.
        let result = adaptive(ratio_bench(|_| 2.0), 5, 25);
        assert_eq!((result.rounds, result.stop), (6, Stop::Decided));
        // Rows measured once (deterministic counts) need no more rounds, nor do failed rows.
        let bench = Bench {
            name: "once",
            metric: Metric::Count("misses"),
            contenders: vec![
                scripted("base", |_| 10.0).run_once_only(),
                scripted("s", |_| 13.5).run_once_only(),
                Contender::new("failed", Params::new(1), 1, || Err("no".into())),
            ],
            targets: vec![at_least_13(&["s"]), at_least_13(&["failed"])],
        };
        let result = adaptive(bench, 1, 25);
        assert_eq!((result.rounds, result.stop), (1, Stop::Decided));
        assert_eq!(
            target_line(&result),
            "once: best of s: s = 1.35x base (target >= 1.30x: met); failed failed"
        );
    }

    /// The first nine ratios straddle 1.3 (four at 1.2, X(2) = 1.2, X(8) = 1.4), every later one is
    /// 1.5: the interval's lower end X(k) passes 1.3 when k reaches 5, first at 17 rounds.
    #[test]
    fn an_undecided_target_adds_rounds_until_it_is_decided() {
        let first = [1.2, 1.4, 1.2, 1.4, 1.2, 1.4, 1.2, 1.4, 1.35];
        let result = adaptive(ratio_bench(move |r| if r <= 9 { first[r - 1] } else { 1.5 }), 9, 25);
        assert_eq!((result.rounds, result.stop), (17, Stop::Decided));
        // Still paired round by round: every row holds the 17 rounds, in order.
        assert!(result.rows.iter().all(|r| r.rounds.len() == 17));
        assert_eq!(result.rows[1].rounds[8..10], [13.5, 15.0]);
        assert_eq!(
            target_line(&result),
            "b: best of s: s = 1.40x (1.20-1.50, 95%: 1.35-1.50) base (target >= 1.30x: met)"
        );
        // Only the extra rounds needed: at 16 rounds X(4) = 1.2 still straddled.
        assert_eq!(median_interval_rank(16), Some(4));
    }

    /// Every target of a run travels in the document: its line's text, its verdict and how sure
    /// it is, its bound, and each judged system's ratio; a target that could not be judged says
    /// why. `s` takes `10 + r` in round `r` against `base`'s 10: ratios 1.1 to 1.9, whose 95%
    /// interval (1.2-1.8) contains the bound 1.3.
    #[test]
    fn targets_travel_in_the_document() {
        let bench = Bench {
            name: "b",
            metric: Metric::NsPerOp,
            contenders: vec![
                scripted("base", |_| 10.0),
                scripted("s", |r| 10.0 + r as f64),
                Contender::new("bad", Params::new(1), 1, || Err("no".into())),
            ],
            targets: vec![
                at_least_13(&["s", "absent"]),
                at_least_13(&["absent"]),
                Target::Relative {
                    subject: Subject::Each(&["bad"]),
                    baseline: "base",
                    processors: 1,
                    bound: Bound::AtMost(2.0),
                },
                Target::EliteAtMost { peer: "base", processors: 2, times: 1.5 },
            ],
        };
        let result = run_bench(bench, 9, None, &mut Progress::new(false), &Watchdog::start());
        let line = target_line(&result);
        let doc = json_document("micro", &Machine::for_tests(), &SuiteResults { benches: vec![result] });
        let targets = doc["targets"].as_array().expect("an array of targets");
        // The text of each is its part of the line, in the bench's order.
        let texts: Vec<&str> = targets.iter().map(|t| t["text"].as_str().unwrap()).collect();
        assert_eq!(format!("b: {}", texts.join("; ")), line);
        assert_eq!(
            targets[0],
            json!({
                "bench": "b",
                "kind": "best_of",
                "metric": "ns_per_op",
                "params": {"processors": 1},
                "bound": {"kind": "at_least", "value": 1.3},
                "text": "best of s, absent: s = 1.50x (1.10-1.90, 95%: 1.20-1.80) base (target >= 1.30x: met, undecided at 95%)",
                "state": "judged",
                "met": true,
                "certainty": "undecided",
                "best": "s",
                "subjects": [{
                    "system": "s",
                    "baseline": "base",
                    "estimate": "paired",
                    "median": 1.5,
                    "min": 1.1,
                    "max": 1.9,
                    "interval": [1.2, 1.8],
                    "rounds": 9,
                    "met": true,
                    "certainty": "undecided",
                }],
            })
        );
        let unjudged = |t: &Value| {
            let text = |name: &str| t[name].as_str().map(str::to_string);
            (text("kind"), text("state"), text("text"), t["met"].clone(), t["subjects"].clone())
        };
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            unjudged(&targets[1]),
            (some("best_of"), some("skipped"), some("absent skipped"), Value::Null, json!([]))
        );
        assert_eq!(targets[1]["certainty"], Value::Null);
        assert_eq!(
            unjudged(&targets[2]),
            (some("each_of"), some("failed"), some("bad failed"), Value::Null, json!([]))
        );
        assert_eq!(targets[2]["bound"], json!({"kind": "at_most", "value": 2.0}));
        assert_eq!(
            unjudged(&targets[3]),
            (
                some("elite_at_most"),
                some("failed"),
                some("elite (processors 2) failed"),
                Value::Null,
                json!([])
            )
        );
        assert_eq!(targets[3]["params"], json!({"processors": 2}));
    }

    /// A target's ratio without an interval: too few rounds, a ratio of medians, values measured
    /// once; and a target on several systems, each with its own verdict.
    #[test]
    fn targets_record_each_subject_and_estimate() {
        let bench = Bench {
            name: "b",
            metric: Metric::NsPerOp,
            contenders: vec![
                scripted("base", |_| 10.0),
                scripted("s", |r| 10.0 + r as f64),
                scripted("t", |_| 20.0),
                scripted("once", |_| 13.0).run_once_only(),
            ],
            targets: vec![
                Target::Relative {
                    subject: Subject::Each(&["s", "t"]),
                    baseline: "base",
                    processors: 1,
                    bound: Bound::AtLeast(1.2),
                },
                at_least_13(&["once"]),
            ],
        };
        let result = run_bench(bench, 5, None, &mut Progress::new(false), &Watchdog::start());
        let doc = json_document("micro", &Machine::for_tests(), &SuiteResults { benches: vec![result] });
        let each = &doc["targets"][0];
        assert_eq!(
            (each["kind"].as_str(), each["met"].as_bool(), each["certainty"].as_str(), each["best"].clone()),
            (Some("each_of"), Some(true), Some("too_few_rounds"), Value::Null)
        );
        // s: 1.1 to 1.5 over 5 rounds, no interval; t: 2 in every round.
        let s = &each["subjects"][0];
        assert_eq!(
            (s["median"].clone(), s["interval"].clone(), s["rounds"].clone()),
            (json!(1.3), Value::Null, json!(5))
        );
        assert_eq!(s["certainty"], json!("too_few_rounds"));
        assert_eq!(
            (each["subjects"][1]["system"].as_str(), each["subjects"][1]["median"].as_f64()),
            (Some("t"), Some(2.0))
        );
        // A row measured once against one measured every round: the ratio of medians.
        let once = &doc["targets"][1]["subjects"][0];
        assert_eq!(
            (once["estimate"].as_str(), once["median"].as_f64(), once["min"].clone(), once["rounds"].clone()),
            (Some("ratio_of_medians"), Some(1.3), Value::Null, Value::Null)
        );
        assert_eq!(doc["targets"][1]["certainty"], json!("no_interval"));
    }

    #[test]
    fn a_target_never_decided_stops_at_max_reps() {
        let result = adaptive(ratio_bench(|r| if r % 2 == 0 { 1.2 } else { 1.4 }), 9, 12);
        assert_eq!((result.rounds, result.stop), (12, Stop::MaxReps));
        assert!(result.rows.iter().all(|r| r.samples.len() == 12));
        let line = target_line(&result);
        assert!(line.ends_with(", undecided at 95%)"), "{line}");
        assert_eq!(
            rounds_note(&result, 12),
            "elite-bench: b: 12 measured rounds, stopped: --max-reps 12 reached, 1 target undecided at 95%"
        );
        // The added rounds keep alternating the order: round 10 in reverse, 11 in order.
        let calls = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let contender = |system: &'static str, value: f64| {
            let calls = calls.clone();
            Contender::new(system, Params::new(1), 1, move || {
                calls.borrow_mut().push(system);
                Ok(Sample { ns_per_op: value, answer: 1 })
            })
        };
        let bench = Bench {
            name: "b",
            metric: Metric::NsPerOp,
            contenders: vec![contender("base", 10.0), contender("s", 13.0)],
            targets: vec![at_least_13(&["s"])],
        };
        // One round, then two more (too few for an interval either way).
        let result = adaptive(bench, 1, 3);
        assert_eq!((result.rounds, result.stop), (3, Stop::MaxReps));
        assert_eq!(*calls.borrow(), ["s", "base", "base", "s", "s", "base", "base", "s"]);
    }
}
