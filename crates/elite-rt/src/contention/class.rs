//! The classes and the decision tree (the seed's section II).

use std::fmt;

/// Where a group's contention lies: LCN's four classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// High use of the memory link, little reuse in the last-level cache: streams.
    L,
    /// Considerable use of the memory link together with much last-level cache activity.
    LC,
    /// Heavy use of the last-level cache, little of the memory link.
    C,
    /// Activity in the private caches or within the core.
    N,
}

impl Class {
    /// The four classes, in the order of the seed's lists.
    pub const ALL: [Class; 4] = [Class::L, Class::LC, Class::C, Class::N];

    /// `"L"`, `"LC"`, `"C"`, `"N"`.
    pub const fn name(self) -> &'static str {
        match self {
            Class::L => "L",
            Class::LC => "LC",
            Class::C => "C",
            Class::N => "N",
        }
    }

    /// Whether two groups of these classes may run at once on one shared cache and memory link:
    /// every pair but L–L, L–LC and L–C (the seed's avoided pairs).
    pub const fn may_pair(self, other: Class) -> bool {
        !matches!(
            (self, other),
            (Class::L, Class::L)
                | (Class::L, Class::LC)
                | (Class::LC, Class::L)
                | (Class::L, Class::C)
                | (Class::C, Class::L)
        )
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a signal source measured of one group over a window, in bytes per second: the seed's
/// three bandwidths (lines brought into each level times the line size, per second).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Signals {
    /// Bytes per second brought from memory (the seed's *memory bandwidth*: last-level misses).
    pub memory: f64,
    /// Bytes per second brought into the private L2 (the seed's *LLC bandwidth*: L2 lines in).
    pub llc: f64,
    /// Bytes per second brought into L1 (the seed's *L2 bandwidth*: L1 lines in).
    pub l2: f64,
    /// The group's time on two processors over its time on one for the same work (the seed's
    /// *scaling*, 0.5 when ideal), where a probe measured it; `None` otherwise.
    pub scaling2: Option<f64>,
}

impl Signals {
    /// The seed's *L3 reuse*: LLC bandwidth over memory bandwidth (infinite with no memory
    /// traffic, 0 with none at all).
    pub fn l3_reuse(&self) -> f64 {
        ratio(self.llc, self.memory)
    }

    /// The seed's *L2 reuse*: L2 bandwidth over LLC bandwidth.
    pub fn l2_reuse(&self) -> f64 {
        ratio(self.l2, self.llc)
    }
}

fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        num / den
    } else if num > 0.0 {
        f64::INFINITY
    } else {
        0.0
    }
}

/// The decision tree's thresholds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// The host's maximum memory bandwidth in bytes per second (a stream kernel's, see
    /// [`stream_bandwidth`](super::stream_bandwidth)).
    pub max_bandwidth: f64,
    /// The share of it above which a group uses the memory link heavily: the seed's `g` is
    /// `0.35 x max_bandwidth`.
    pub g_share: f64,
    /// The reuse threshold, the seed's `d` (0.25).
    pub d: f64,
}

impl Thresholds {
    /// The seed's thresholds for a host whose memory bandwidth is `max_bandwidth` bytes per
    /// second: `g = 0.35 x max_bandwidth`, `d = 0.25`.
    pub const fn seed(max_bandwidth: f64) -> Thresholds {
        Thresholds { max_bandwidth, g_share: 0.35, d: 0.25 }
    }

    /// `g` in bytes per second.
    pub fn g(&self) -> f64 {
        self.g_share * self.max_bandwidth
    }
}

/// Classifies a group by the decision tree.
///
/// The seed prints the tree as a figure that its text lacks; this is the tree its relations and
/// class definitions give (`docs/contention.md` in the repository says so):
///
/// 1. memory bandwidth `> g`: the memory link is used heavily. Of the lines entering the L2,
///    the share the last-level cache served is `1 - 1 / L3 reuse`; when that share is below
///    `d` the LLC is only a pass-through: **L**; otherwise **LC**.
/// 2. otherwise the link is not the bottleneck. A group whose LLC bandwidth exceeds `g` as
///    well and at least `d` of whose L1 refills come from beyond its L2 (`1 / L2 reuse >= d`)
///    lives in the shared cache: **C**; anything else works in its private caches or its core:
///    **N** (the seed's C+, data split between the shared and private levels, is counted as C).
///
/// ```
/// use elite_rt::contention::{classify, Class, Signals, Thresholds};
///
/// let t = Thresholds::seed(10e9); // a 10 GB/s host: g = 3.5 GB/s
/// let stream = Signals { memory: 6e9, llc: 6.2e9, l2: 6.5e9, scaling2: None };
/// let blocked = Signals { memory: 4e9, llc: 16e9, l2: 20e9, scaling2: None };
/// let stencil = Signals { memory: 0.2e9, llc: 8e9, l2: 12e9, scaling2: None };
/// let spin = Signals::default();
/// assert_eq!(
///     [stream, blocked, stencil, spin].map(|s| classify(&s, &t)),
///     [Class::L, Class::LC, Class::C, Class::N]
/// );
/// ```
pub fn classify(s: &Signals, t: &Thresholds) -> Class {
    if s.memory > t.g() {
        let llc_share = 1.0 - 1.0 / s.l3_reuse();
        if llc_share < t.d {
            Class::L
        } else {
            Class::LC
        }
    } else {
        let beyond_l2 = 1.0 / s.l2_reuse();
        if s.llc > t.g() && beyond_l2 >= t.d {
            Class::C
        } else {
            Class::N
        }
    }
}
