//! Suite `cosched`: which ULTs share a cache at the same time (issue 21), one experiment per
//! module, each a bench named after it (`--bench NAME` runs only those named):
//!
//! * [`aggregation`]: IAS's sysbench-memory sweep scaled to the host: groups of ULTs over one
//!   shared block each, `elite/plain` against `elite/aggregated` (`Policy::aggregate`).
//!
//! Adding an experiment: a module with a `benches(&mut Context) -> Vec<Bench>` function, and
//! one entry in [`EXPERIMENTS`].

pub mod aggregation;

use super::Context;
use crate::harness::Bench;

/// An experiment: its name (its benches' prefix) and what builds its benches.
pub type Experiment = (&'static str, fn(&mut Context) -> Vec<Bench>);

/// The experiments of the suite, in the order they run.
pub static EXPERIMENTS: &[Experiment] = &[("aggregation", aggregation::benches)];

/// Every experiment's benches.
pub fn benches(ctx: &mut Context) -> Vec<Bench> {
    EXPERIMENTS.iter().flat_map(|(_, benches)| benches(ctx)).collect()
}
