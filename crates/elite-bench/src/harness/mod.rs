//! Measurement: interleaved repetitions, answer checks, the report table and the JSON document.
//!
//! A suite hands the harness a list of [`Bench`]es. Each bench has [`Contender`]s (one system
//! at one set of parameters) whose workload produces a [`Sample`]: the time per operation and
//! the workload's answer. [`run_suite`] runs, bench by bench, one warm-up round and then
//! [`REPS`] measured rounds, each round running every contender once, in the bench's
//! order in odd rounds and in reverse in even ones, so that drift of the machine touches all systems alike. A contender whose answer is
//! wrong, or whose workload errs or panics, is marked failed and not run again; its row reports
//! the failure and no time. A bench's [`Metric`] turns each sample into the number its rows report
//! (a time per operation, or a rate), and a [`Target::WithinOfBest`] adds a row derived from the
//! others, round by round, after the rounds. Every row keeps its samples in round order as well
//! as sorted, and a target comparing two rows takes the median of their per-round ratios
//! (the two samples of a round share the host's phase of speed; two medians need not), with a
//! distribution-free 95% interval for that median from the ratios' order statistics
//! ([`model::median_interval`]). A target's verdict is the median's (`met` or `MISSED`); the
//! target line adds `undecided at 95%` when the interval contains the bound. With `--max-reps`
//! a bench runs more rounds after its `--reps` ones while one of its targets is undecided.
//!
//! The parts: [`model`] (samples, parameters, contenders, metrics, targets, benches and their
//! rows, the number of rounds), [`run`] (the rounds: warm-up, repetitions, interleaving, answer checks, side values,
//! derived rows, the watchdog), [`report`] (the terminal table, the target lines and the progress
//! line) and [`json`] (the JSON document: the rows, and each target as `report` judges it, with
//! its line's text, verdict and figures). Every part uses the model; `run` also draws the
//! progress line of `report` and asks it which targets are undecided, and `json` records its
//! judgements of the targets; no part uses `run` or `json`.

pub mod json;
pub mod model;
pub mod report;
pub mod run;

pub use json::json_document;
pub use model::{Bench, Bound, Contender, Metric, Params, Sample, Subject, Target, MAX_REPS, REPS};
pub use report::{print_report, Progress};
pub use run::{panic_message, record_side, run_suite, warm_then_time};
