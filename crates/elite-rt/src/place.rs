//! Places: where a ULT runs, as sets of processors taken from the runtime's topology (LASSI's
//! locality hints), and how an idle processor chooses whom to rob (CAF's locality-guided
//! stealing).
//!
//! A [`Place`] names one processor, the processors sharing one of a processor's caches, a NUMA
//! node, or the whole machine. [`Runtime::places`](crate::Runtime::places) lists every place of a
//! runtime with its processors. A place is a description: it is checked against the runtime's
//! topology when it is used (a spawn, [`Runtime::processors_of`](crate::Runtime::processors_of)),
//! and naming a processor, cache or node the runtime does not have is a [`PlaceError`] that says
//! what exists.
//!
//! ```
//! use elite_rt::{Place, PlaceKind, PlaceMode};
//!
//! // A synthetic topology: 2 nodes of 2 cores, each core with its own L2, each node one L3.
//! let rt = elite_rt::Runtime::builder()
//!     .topology("2 nodes x 2 cores, 512 KiB L2 per core, 16 MiB L3 per node")
//!     .build()?;
//! assert_eq!(rt.processors_of(&Place::cache(3, 2))?, [2, 3]);
//! assert_eq!(rt.processors_of(&Place::node(0))?, [0, 1]);
//! let l3s = rt.places().into_iter().filter(|p| p.place.kind() == PlaceKind::Cache { level: 3 }).count();
//! assert_eq!(l3s, 2);
//!
//! // Strictly on node 1 (a hint, `spawn_at`, would let an idle processor elsewhere take it).
//! let on = rt.block_on(|| {
//!     elite_rt::Builder::new()
//!         .place(Place::node(1))
//!         .place_mode(PlaceMode::Strict)
//!         .spawn(|| elite_rt::current().processor())
//! })?;
//! assert!([2, 3].contains(&on.join().unwrap()));
//!
//! // There is no L4 here: the error says which levels there are.
//! let err = rt.processors_of(&Place::cache(4, 0)).unwrap_err();
//! assert_eq!(err.to_string(), "processor 0 has no L4 cache: its data caches are L2, L3");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Hints, strict places and homes
//!
//! [`Builder::place`](crate::Builder::place) (or [`spawn_at`]) gives a ULT a place. Under
//! [`PlaceMode::Hint`] (the default) it starts on a processor of its place and is woken there,
//! but an idle processor elsewhere may steal it while it waits (a hint, not a prison; when it
//! wakes up next it goes back into its place). Under [`PlaceMode::Strict`] it runs inside its
//! place only: a thief outside the place hands it back.
//!
//! [`Builder::home`](crate::Builder::home) and [`RuntimeBuilder::soft_pinning`](crate::RuntimeBuilder::soft_pinning)
//! give a ULT a *home* processor (CAF's soft pinning): a woken ULT goes home unless home is
//! overloaded, and a stolen ULT goes back home at its next wake-up.
//!
//! # Stealing
//!
//! [`RuntimeBuilder::steal_order`](crate::RuntimeBuilder::steal_order) chooses whom an idle
//! processor robs ([`StealOrder`]), [`RuntimeBuilder::steal`](crate::RuntimeBuilder::steal) how
//! much it takes ([`StealAmount`]), and
//! [`RuntimeBuilder::avoid_costly_steals`](crate::RuntimeBuilder::avoid_costly_steals) whether a
//! thief leaves a ULT whose move would cost more (the reload of its cached lines) than its wait.

use elite_affinity::{CacheKind, Topology};
use std::fmt;

/// What a [`Place`] is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PlaceKind {
    /// One processor.
    Processor,
    /// The processors sharing one data (or unified) cache of this level.
    Cache {
        /// The cache's level: 1 for L1, 2 for L2, ...
        level: u8,
    },
    /// The processors of one NUMA node.
    Node,
    /// Every processor of the runtime.
    Machine,
}

impl fmt::Display for PlaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlaceKind::Processor => f.write_str("processor"),
            PlaceKind::Cache { level } => write!(f, "L{level} cache"),
            PlaceKind::Node => f.write_str("node"),
            PlaceKind::Machine => f.write_str("machine"),
        }
    }
}

/// A set of processors of a runtime's topology: where a ULT is hinted (or held) to run.
///
/// A place is a description, checked when it is used. See the [module docs](crate::place).
///
/// ```
/// use elite_rt::{Place, PlaceKind};
///
/// assert_eq!(Place::processor(3).kind(), PlaceKind::Processor);
/// assert_eq!(Place::cache(2, 0).kind(), PlaceKind::Cache { level: 2 });
/// assert_eq!(Place::node(1).to_string(), "node 1");
/// assert_eq!(Place::cache(3, 5).to_string(), "the L3 cache of processor 5");
/// assert_eq!(Place::machine().to_string(), "the machine");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    kind: PlaceKind,
    /// The processor (`Processor`, `Cache`), the node (`Node`), 0 (`Machine`).
    index: usize,
}

impl Place {
    /// Processor `p` alone.
    pub const fn processor(p: usize) -> Place {
        Place { kind: PlaceKind::Processor, index: p }
    }

    /// The processors sharing processor `p`'s data (or unified) cache of level `level`.
    pub const fn cache(level: u8, p: usize) -> Place {
        Place { kind: PlaceKind::Cache { level }, index: p }
    }

    /// The processors of NUMA node `node`.
    pub const fn node(node: usize) -> Place {
        Place { kind: PlaceKind::Node, index: node }
    }

    /// Every processor.
    pub const fn machine() -> Place {
        Place { kind: PlaceKind::Machine, index: 0 }
    }

    /// What the place is made of.
    pub const fn kind(&self) -> PlaceKind {
        self.kind
    }

    /// The processors of this place in `topology`, ascending; an error that says what exists
    /// when `topology` has no such processor, cache or node.
    ///
    /// ```
    /// use elite_rt::Place;
    /// let t = elite_affinity::Topology::synthetic("2x2, 1 MiB L2 per node")?;
    /// assert_eq!(Place::cache(2, 3).processors(&t)?, [2, 3]);
    /// assert_eq!(
    ///     Place::processor(4).processors(&t).unwrap_err().to_string(),
    ///     "there is no processor 4: the runtime has processors 0..4"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn processors(&self, topology: &Topology) -> Result<Vec<usize>, PlaceError> {
        let n = topology.num_processors();
        match self.kind {
            PlaceKind::Machine => Ok((0..n).collect()),
            PlaceKind::Node if self.index < topology.num_nodes() => {
                Ok(topology.processors_in_node(self.index).to_vec())
            }
            PlaceKind::Node => Err(PlaceError::NoNode { node: self.index, nodes: topology.num_nodes() }),
            _ if self.index >= n => Err(PlaceError::NoProcessor { processor: self.index, processors: n }),
            PlaceKind::Processor => Ok(vec![self.index]),
            PlaceKind::Cache { level } => {
                let data: Vec<_> =
                    topology.caches_of(self.index).filter(|c| c.kind != CacheKind::Instruction).collect();
                match data.iter().find(|c| c.level == level) {
                    Some(c) => Ok(c.processors.clone()),
                    None => {
                        let mut levels: Vec<u8> = data.iter().map(|c| c.level).collect();
                        levels.dedup();
                        Err(PlaceError::NoCache { level, processor: self.index, levels })
                    }
                }
            }
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            PlaceKind::Processor => write!(f, "processor {}", self.index),
            PlaceKind::Cache { level } => write!(f, "the L{level} cache of processor {}", self.index),
            PlaceKind::Node => write!(f, "node {}", self.index),
            PlaceKind::Machine => f.write_str("the machine"),
        }
    }
}

/// One place of a runtime, as [`Runtime::places`](crate::Runtime::places) lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlaceInfo {
    /// The place (a cache place is named by its first processor).
    pub place: Place,
    /// Its processors, ascending.
    pub processors: Vec<usize>,
}

/// How firmly a ULT keeps to its place ([`Builder::place_mode`](crate::Builder::place_mode)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PlaceMode {
    /// Starts and is woken inside its place; a thief outside the place may take it while it
    /// waits there (its next wake-up takes it back). LASSI's semantics.
    #[default]
    Hint,
    /// Runs inside its place only: a thief outside the place hands it back.
    Strict,
}

/// How many of a victim's ready ULTs a thief takes ([`RuntimeBuilder::steal`](crate::RuntimeBuilder::steal)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StealAmount {
    /// The policy's answer ([`Hooks::steal_count`](crate::policy::Hooks::steal_count); half
    /// for the built-in policies).
    #[default]
    Policy,
    /// One ULT.
    One,
    /// Half of the victim's ready ULTs, rounded up.
    Half,
}

/// Whom an idle processor robs ([`RuntimeBuilder::steal_order`](crate::RuntimeBuilder::steal_order)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StealOrder {
    /// Locality-guided stealing (CAF's LGS): the thief's distance groups from the topology
    /// (the processors sharing its core or a cache, nearest level first, then the rest of its
    /// node, then the other nodes by NUMA distance; [`Topology::distance_groups`]); it tries a
    /// victim drawn at random in the nearest group, moves to the next group after as many
    /// attempts as the group has members, and starts again at the nearest after a success.
    #[default]
    Groups,
    /// The rest of the thief's node in a random rotation, then every other processor in a
    /// random rotation: the order of a topology known only by its nodes.
    NodeThenAll,
    /// A victim drawn uniformly at random among all other processors, as many attempts as
    /// there are of them.
    Random,
}

/// A place the runtime does not have.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlaceError {
    /// A processor index out of range.
    NoProcessor {
        /// The index given.
        processor: usize,
        /// How many processors the runtime has.
        processors: usize,
    },
    /// A cache level the processor does not have.
    NoCache {
        /// The level asked for.
        level: u8,
        /// The processor.
        processor: usize,
        /// The levels of its data (or unified) caches, ascending.
        levels: Vec<u8>,
    },
    /// A node index out of range.
    NoNode {
        /// The index given.
        node: usize,
        /// How many nodes the runtime has.
        nodes: usize,
    },
}

impl fmt::Display for PlaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlaceError::NoProcessor { processor, processors } => {
                write!(f, "there is no processor {processor}: the runtime has processors 0..{processors}")
            }
            PlaceError::NoNode { node, nodes } => {
                write!(f, "there is no node {node}: the runtime has nodes 0..{nodes}")
            }
            PlaceError::NoCache { level, processor, levels } if levels.is_empty() => {
                write!(f, "processor {processor} has no L{level} cache: its topology names no data cache")
            }
            PlaceError::NoCache { level, processor, levels } => {
                let names: Vec<String> = levels.iter().map(|l| format!("L{l}")).collect();
                write!(
                    f,
                    "processor {processor} has no L{level} cache: its data caches are {}",
                    names.join(", ")
                )
            }
        }
    }
}

impl std::error::Error for PlaceError {}

/// Spawns a ULT with a place hint ([`PlaceMode::Hint`]) on the runtime running the caller:
/// [`Builder::new().place(place).spawn(f)`](crate::Builder::place).
///
/// # Errors
///
/// As [`Builder::spawn`](crate::Builder::spawn), and [`SpawnError::Place`](crate::SpawnError::Place)
/// when the runtime has no such place.
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(2).build()?;
/// let p = rt.block_on(|| elite_rt::spawn_at(elite_rt::Place::processor(1), || 6 * 7))?;
/// assert_eq!(p.join().unwrap(), 42);
/// let err = rt.block_on(|| elite_rt::spawn_at(elite_rt::Place::processor(2), || ())).unwrap_err();
/// assert_eq!(err.to_string(), "invalid place: there is no processor 2: the runtime has processors 0..2");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn spawn_at<F, T>(place: Place, f: F) -> Result<crate::JoinHandle<T>, crate::SpawnError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    crate::Builder::new().place(place).spawn(f)
}

/// Every place of `topology`: the machine, its nodes, each distinct data cache (named by its first
/// processor), each processor; in that order.
pub(crate) fn places_of(topology: &Topology) -> Vec<PlaceInfo> {
    let mut out =
        vec![PlaceInfo { place: Place::machine(), processors: (0..topology.num_processors()).collect() }];
    for node in 0..topology.num_nodes() {
        out.push(PlaceInfo {
            place: Place::node(node),
            processors: topology.processors_in_node(node).to_vec(),
        });
    }
    for c in topology.caches().iter().filter(|c| c.kind != CacheKind::Instruction) {
        let place = Place::cache(c.level, c.processors[0]);
        // (A level with a data and a unified cache on the same processors is listed once.)
        if !out.iter().any(|p| p.place == place) {
            out.push(PlaceInfo { place, processors: c.processors.clone() });
        }
    }
    for p in 0..topology.num_processors() {
        out.push(PlaceInfo { place: Place::processor(p), processors: vec![p] });
    }
    out
}

impl Place {
    /// The place of kind `kind` around processor `p`: itself, its cache of that level, its node,
    /// the machine.
    pub(crate) fn of_kind(kind: PlaceKind, p: usize, topology: &Topology) -> Place {
        match kind {
            PlaceKind::Processor => Place::processor(p),
            PlaceKind::Cache { level } => Place::cache(level, p),
            PlaceKind::Node => Place::node(topology.node_of(p)),
            PlaceKind::Machine => Place::machine(),
        }
    }
}

/// What the runtime builder says about places and stealing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlaceSettings {
    /// `RuntimeBuilder::place_level`.
    pub(crate) level: PlaceKind,
    /// `RuntimeBuilder::round_robin`.
    pub(crate) round_robin: bool,
    /// `RuntimeBuilder::steal`.
    pub(crate) amount: StealAmount,
    /// `RuntimeBuilder::steal_order`.
    pub(crate) order: StealOrder,
    /// `RuntimeBuilder::avoid_costly_steals`.
    pub(crate) avoid_costly: bool,
    /// `RuntimeBuilder::soft_pinning`.
    pub(crate) soft_pinning: bool,
}

impl Default for PlaceSettings {
    fn default() -> PlaceSettings {
        PlaceSettings {
            level: PlaceKind::Processor,
            round_robin: false,
            amount: StealAmount::Policy,
            order: StealOrder::Groups,
            avoid_costly: false,
            soft_pinning: false,
        }
    }
}
