//! The suites: each is one module that turns a [`Context`] into [`Bench`]es.

pub mod affinity;
pub mod blocking;
pub mod cosched;
pub mod grid;
pub mod micro;
pub mod pairs;
pub mod places;
pub mod sync;

use crate::harness::{Bench, Contender, Params};
use crate::peers::go::GoPeer;
use crate::peers::may::MayWorkload;
use crate::peers::PeerArgs;

/// A suite of benches, as named on the command line.
pub struct Suite {
    /// The suite's name on the command line and in the JSON document.
    pub name: &'static str,
    /// Builds the suite's benches (peers that cannot run are left out, with a note).
    pub benches: fn(&mut Context) -> Vec<Bench>,
    /// Runs one `may` workload of the suite inside a `may` child process, by bench name.
    pub may_child: Option<MayWorkload>,
}

/// Every suite; the command line accepts exactly these names.
pub static SUITES: &[Suite] = &[
    Suite { name: "micro", benches: micro::benches, may_child: Some(micro::may_child) },
    Suite { name: "sync", benches: sync::benches, may_child: Some(sync::may_child) },
    Suite { name: "affinity", benches: affinity::benches, may_child: None },
    Suite { name: "grid", benches: grid::benches, may_child: None },
    Suite { name: "blocking", benches: blocking::benches, may_child: None },
    Suite { name: "places", benches: places::benches, may_child: None },
    Suite { name: "cosched", benches: cosched::benches, may_child: None },
];

/// The may workloads of the suite called `name`, if it has any (for the may child process).
pub fn may_workloads(name: &str) -> Option<MayWorkload> {
    SUITES.iter().find(|s| s.name == name).and_then(|s| s.may_child)
}

/// What a suite may know about the invocation while building its benches.
pub struct Context {
    /// `--quick`: shrunken sizes.
    pub quick: bool,
    /// The CPUs of the machine: the processor count of "every CPU working" benches.
    pub cpus: usize,
    /// Lines for the report, such as peers that were skipped and why.
    pub notes: Vec<String>,
    /// `--policy`: the scheduling policies to run (suites `affinity` and `grid`); empty: all.
    pub policies: Vec<elite_rt::policy::Policy>,
    /// `--cachegrind`: add the simulated-cache-miss benches (suites `affinity`, `grid` and
    /// `cosched`).
    pub cachegrind: bool,
    /// The Go program, once a suite asked for it: built, or why not.
    go: Option<Result<GoPeer, String>>,
}

impl Context {
    /// A context for a run with these settings.
    pub fn new(quick: bool, cpus: usize) -> Context {
        Context { quick, cpus, notes: Vec::new(), policies: Vec::new(), cachegrind: false, go: None }
    }

    /// The Go program, built on first use; `None` (with a note saying why) when Go cannot run.
    pub fn go(&mut self) -> Option<GoPeer> {
        let built = self.go.get_or_insert_with(GoPeer::build);
        match built {
            Ok(go) => Some(go.clone()),
            Err(why) => {
                let note = format!("go: skipped: {why}");
                if !self.notes.contains(&note) {
                    self.notes.push(note);
                }
                None
            }
        }
    }

    /// The processor counts of a suite measured at 1 and at 2 processors: both on a machine with
    /// more than one CPU; only 1 on a machine with one, where `note` (saying what is left out)
    /// goes to the report.
    pub fn processor_counts(&mut self, note: Option<&str>) -> Vec<usize> {
        if self.cpus > 1 {
            vec![1, 2]
        } else {
            self.notes.extend(note.map(String::from));
            vec![1]
        }
    }

    /// Adds the contender `go` running `peer` to `contenders`, when Go can run here.
    pub fn add_go(
        &mut self,
        contenders: &mut Vec<Contender>,
        peer: &PeerArgs,
        params: Params,
        expected: u64,
    ) {
        if let Some(go) = self.go() {
            contenders.push(go.contender(peer, params, expected));
        }
    }
}
