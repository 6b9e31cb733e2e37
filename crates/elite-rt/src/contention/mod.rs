//! Contention classes (LCN): which groups of ULTs should run at the same time.
//!
//! After Raptis's LCN scheduler: each group of ULTs ([`Group`](crate::Group)) is classified by
//! where its memory traffic contends ([`Class`]: L for the memory link, LC for the link and the
//! last-level cache, C for the last-level cache, N for neither) from [`Signals`] a
//! [`SignalSource`] gives; a prediction model ([`predict_cores`]) says how many cores each class
//! should get; and a pairing ([`pair_lcn`]) decides which groups share a cache domain for a
//! quantum, never a memory-link group with another memory- or cache-bound one. The two
//! comparison modes the experiment uses are here too ([`gang`], [`miss_balance`]).
//!
//! The pieces are plain functions of their inputs, usable on their own (on synthetic
//! topologies, with scripted signals) and tested so; `docs/contention.md` in the repository has
//! the decision tree, how far the software signals can be trusted, and what the model predicts
//! for the seed's larger machines.
//!
//! ```
//! use elite_rt::contention::*;
//!
//! let t = Thresholds::seed(12e9); // the host's stream bandwidth: 12 GB/s
//! let mut classifier = Classifier::new(t);
//! let stream = Signals { memory: 8e9, llc: 8e9, l2: 8e9, scaling2: None };
//! let spin = Signals::default();
//! assert_eq!(classifier.observe(0, &stream), Some(Class::L));
//! assert_eq!(classifier.observe(1, &spin), Some(Class::N));
//! let members = classifier.members(&[(0, stream), (1, spin)], 2);
//! let plan = pair_lcn(&members, 2);
//! assert_eq!(plan[0].runs, [(1, 1), (0, 1)]); // the spin beside the stream, one core each
//! ```

mod class;
mod cosched;
pub(crate) mod gate;
mod plan;
mod predict;
mod signals;
#[cfg(test)]
mod tests;

pub use class::{classify, Class, Signals, Thresholds};
pub use cosched::{unit_done, Coscheduler, CoschedulerBuilder, GateStats, GroupReport, Mode};
pub use gate::MAX_GATED_GROUPS;
pub use plan::{gang, miss_balance, pair_lcn, Member, Slot};
pub use predict::{factor_from_scaling, predict_cores, predicted_scaling, L_THRESHOLD, SCALING_THRESHOLD};
pub use signals::{
    cache_sizes, stream_bandwidth, ScriptedSignals, SignalSource, SoftwareSignals, Window, DEFAULT_L2,
    DEFAULT_LLC,
};

use std::collections::HashMap;

/// How many consecutive windows must agree on a new class before a classified group changes
/// class (so that one odd window does not reshuffle the plan).
pub const RECLASSIFY_AFTER: u32 = 2;

/// Online classification with re-classification: each group's class is the decision tree's
/// answer for its first window, and changes when [`RECLASSIFY_AFTER`] consecutive windows say
/// another class (the seed's future work: behaviour that changes over a run).
///
/// ```
/// use elite_rt::contention::{Class, Classifier, Signals, Thresholds};
///
/// let mut c = Classifier::new(Thresholds::seed(10e9));
/// let stream = Signals { memory: 6e9, llc: 6e9, l2: 6e9, scaling2: None };
/// let spin = Signals::default();
/// assert_eq!(c.observe(7, &stream), Some(Class::L)); // first window: classified
/// assert_eq!(c.observe(7, &spin), None); // one window of another class: kept
/// assert_eq!(c.observe(7, &spin), Some(Class::N)); // two in a row: changed
/// assert_eq!(c.class(7), Some(Class::N));
/// ```
#[derive(Clone, Debug)]
pub struct Classifier {
    thresholds: Thresholds,
    groups: HashMap<usize, (Class, Option<Class>, u32)>,
}

impl Classifier {
    /// A classifier with these thresholds and no group classified yet.
    pub fn new(thresholds: Thresholds) -> Classifier {
        Classifier { thresholds, groups: HashMap::new() }
    }

    /// The thresholds.
    pub fn thresholds(&self) -> &Thresholds {
        &self.thresholds
    }

    /// The class of `group`, if classified.
    pub fn class(&self, group: usize) -> Option<Class> {
        self.groups.get(&group).map(|g| g.0)
    }

    /// One window's signals of `group`: its new class when this window classified it or
    /// changed its class, `None` when its class stands.
    pub fn observe(&mut self, group: usize, s: &Signals) -> Option<Class> {
        let now = classify(s, &self.thresholds);
        match self.groups.get_mut(&group) {
            None => {
                self.groups.insert(group, (now, None, 0));
                Some(now)
            }
            Some((class, _, streak)) if *class == now => {
                *streak = 0;
                None
            }
            Some((class, pending, streak)) => {
                if *pending == Some(now) {
                    *streak += 1;
                } else {
                    *pending = Some(now);
                    *streak = 1;
                }
                if *streak >= RECLASSIFY_AFTER {
                    *class = now;
                    *pending = None;
                    *streak = 0;
                    Some(now)
                } else {
                    None
                }
            }
        }
    }

    /// The planners' view of classified groups, each with its latest signals: class, predicted
    /// cores out of `cores`, and memory intensity. Unclassified groups are left out.
    pub fn members(&self, latest: &[(usize, Signals)], cores: usize) -> Vec<Member> {
        latest
            .iter()
            .filter_map(|&(group, s)| {
                let class = self.class(group)?;
                Some(Member {
                    group,
                    class,
                    cores: predict_cores(class, &s, &self.thresholds, cores),
                    intensity: s.memory,
                })
            })
            .collect()
    }
}
