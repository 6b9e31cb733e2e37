//! Suite `cosched`: which ULTs share a cache at the same time (issue 21), one experiment per
//! module, each a bench named after it (`--bench NAME` runs only those named):
//!
//! * [`aggregation`]: IAS's sysbench-memory sweep scaled to the host: groups of ULTs over one
//!   shared block each, `elite/plain` against `elite/aggregated` (`Policy::aggregate`).
//! * [`contention`]: LCN's class mix (gemm, atax, triad, stencil, spin) under the coscheduler's
//!   modes, `elite/default`, `elite/lcn`, `elite/gang`, `elite/miss-balance` (metric
//!   `completions`).
//!
//! Adding an experiment: a module with a `benches(&mut Context) -> Vec<Bench>` function, and
//! one entry in [`EXPERIMENTS`].

pub mod aggregation;
pub mod contention;

use super::Context;
use crate::harness::Bench;

/// An experiment: its name and the function building its benches.
pub type Experiment = (&'static str, fn(&mut Context) -> Vec<Bench>);

/// The experiments of the suite, in the order they run: each name is its benches' prefix.
pub static EXPERIMENTS: &[Experiment] =
    &[("aggregation", aggregation::benches), ("contention", contention::benches)];

/// Every experiment's benches.
pub fn benches(ctx: &mut Context) -> Vec<Bench> {
    EXPERIMENTS.iter().flat_map(|(_, benches)| benches(ctx)).collect()
}
