//! The machine as the runtime sees it: processors (one pinned worker thread each) on cores,
//! grouped into NUMA nodes, the caches they share, and the order in which a processor visits the
//! others when it steals.
//!
//! A [`Topology`] is built once, by [`Topology::detect`] from Linux sysfs, by
//! `Topology::detect_hwloc` (cargo feature `hwloc`), or by [`Topology::synthetic`] /
//! [`Topology::single_node`] / [`Topology::with_processors`] for a shape that differs from the
//! machine (tests and experiments). Every constructor precomputes what the scheduler asks for on
//! its hot path ([`Topology::distance_groups`], [`Topology::node_of`]), so the accessors only
//! index.
//!
//! Processor indices `0..num_processors()`, core indices `0..num_cores()`, node indices
//! `0..num_nodes()` and cache indices `0..caches().len()` are always dense. A processor's
//! [`cpu`](ProcessorInfo::cpu) is the OS CPU id to pin its worker thread to; in a synthetic
//! topology several processors may share a CPU.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::pin::allowed_cpus;
use crate::synthetic::{parse_shape, ByteSize, Scope, Shape, SYNTHETIC_LINE_SIZE};
use crate::sysfs::{read_machine, SysfsMachine};

/// The most processors [`Topology::synthetic`], [`Topology::single_node`] and
/// [`Topology::with_processors`] accept (a detected topology may be larger).
pub const MAX_PROCESSORS: usize = 4096;

/// Where sysfs lives on a Linux machine.
const SYSFS_ROOT: &str = "/sys/devices/system";

/// The NUMA distance of a node to itself, and between two nodes, where nothing says otherwise
/// (the values Linux reports on a machine without a distance table).
const LOCAL_DISTANCE: u32 = 10;
const REMOTE_DISTANCE: u32 = 20;

/// The line size assumed for a cache whose line size is not reported.
const ASSUMED_LINE_SIZE: u32 = 64;

/// One processor of a [`Topology`]: a worker thread's place in the machine.
///
/// Marked `#[non_exhaustive]` so that later versions can describe more of the place without
/// breaking code that reads these fields. Its caches are [`Topology::caches_of`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ProcessorInfo {
    /// This processor's index in [`Topology::processors`], `0..num_processors()`.
    pub index: usize,
    /// The OS CPU id to pin this processor's worker thread to (see
    /// [`pin_current_thread`](crate::pin_current_thread)).
    pub cpu: usize,
    /// The core of this processor, `0..num_cores()`, numbered in order of first appearance.
    /// Processors with equal `core` are SMT siblings (in a synthetic topology: threads of one
    /// synthetic core; two processors that [`with_processors`](Topology::with_processors) put on
    /// one CPU also share its core).
    pub core: usize,
    /// The node of this processor, `0..num_nodes()`.
    pub node: usize,
}

/// What a cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CacheKind {
    /// Data only.
    Data,
    /// Instructions only. Ignored by [`Topology::distance_groups`] and
    /// [`Topology::model_cache`].
    Instruction,
    /// Data and instructions.
    Unified,
}

/// One cache of a [`Topology`] and the processors that share it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CacheInfo {
    /// 1 for L1, 2 for L2, ...
    pub level: u8,
    /// What it holds.
    pub kind: CacheKind,
    /// Capacity in bytes.
    pub size: u64,
    /// Line size in bytes.
    pub line_size: u32,
    /// The processors of the topology that use this cache, ascending, never empty.
    pub processors: Vec<usize>,
}

impl CacheInfo {
    /// The number of lines: `size / line_size`.
    pub fn lines(&self) -> u64 {
        self.size / u64::from(self.line_size)
    }
}

impl fmt::Display for CacheInfo {
    /// `"L2 2 MiB (64-byte lines)"`, `"L1d 48 KiB (64-byte lines)"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            CacheKind::Data => "d",
            CacheKind::Instruction => "i",
            CacheKind::Unified => "",
        };
        write!(f, "L{}{kind} {} ({}-byte lines)", self.level, ByteSize(self.size), self.line_size)
    }
}

/// The cache the cache model describes by default: see [`Topology::model_cache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ModelCache {
    /// Capacity in bytes.
    pub size: u64,
    /// Line size in bytes.
    pub line_size: u32,
    /// Its level, `None` when it was assumed.
    pub level: Option<u8>,
    /// How it was chosen.
    pub choice: ModelCacheChoice,
}

/// How [`Topology::model_cache`] chose its cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ModelCacheChoice {
    /// The largest data or unified cache private to a core, the smallest such over all cores.
    PrivateToCore,
    /// No core has a private cache: the smallest data or unified cache of the lowest level.
    NearestShared,
    /// The topology describes no data or unified cache: [`ModelCache::ASSUMED`].
    Assumed,
}

impl ModelCache {
    /// What [`Topology::model_cache`] assumes when the topology has no cache: 1 MiB of 64-byte
    /// lines, the order of a core's private L2 on current x86 and Arm servers.
    pub const ASSUMED: ModelCache =
        ModelCache { size: 1 << 20, line_size: 64, level: None, choice: ModelCacheChoice::Assumed };

    /// The number of lines: `size / line_size`.
    ///
    /// ```
    /// assert_eq!(elite_affinity::ModelCache::ASSUMED.lines(), 16384);
    /// ```
    pub fn lines(&self) -> u64 {
        self.size / u64::from(self.line_size)
    }
}

impl fmt::Display for ModelCache {
    /// `"L2 2 MiB, 64-byte lines (32768 lines), private to a core"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(level) = self.level {
            write!(f, "L{level} ")?;
        }
        write!(f, "{}, {}-byte lines ({} lines), ", ByteSize(self.size), self.line_size, self.lines())?;
        f.write_str(match self.choice {
            ModelCacheChoice::PrivateToCore => "private to a core",
            ModelCacheChoice::NearestShared => "the nearest cache (no cache is private to a core)",
            ModelCacheChoice::Assumed => "assumed (the topology describes no cache)",
        })
    }
}

/// Something [`Topology::detect`] (or the hwloc source) could not find out and assumed instead.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Assumption {
    /// sysfs could not be read: one node, every allowed CPU its own core, no caches.
    NoSysfs,
    /// No NUMA node information: every processor in one node.
    OneNode,
    /// No NUMA distances: 10 within a node, 20 between nodes.
    NodeDistances,
    /// No core information for these OS CPU ids: each is a core of its own.
    OwnCores(Vec<usize>),
    /// No cache information for these OS CPU ids (a VM may show none): they share no cache.
    NoCaches(Vec<usize>),
    /// Caches without a line size: 64 bytes assumed.
    LineSize,
    /// hwloc gave no NUMA distances through the bindings used: 10 within a node, 20 between.
    HwlocDistances,
}

impl fmt::Display for Assumption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Assumption::NoSysfs => f.write_str(
                "sysfs unreadable: one node, every allowed CPU its own core, no cache information",
            ),
            Assumption::OneNode => f.write_str("no NUMA node information: every processor in one node"),
            Assumption::NodeDistances => f.write_str("no NUMA distances: 10 within a node, 20 between nodes"),
            Assumption::OwnCores(cpus) => {
                f.write_str("no core information for CPU")?;
                f.write_str(if cpus.len() == 1 { " " } else { "s " })?;
                write_cpu_list(f, cpus)?;
                f.write_str(": each its own core")
            }
            Assumption::NoCaches(cpus) => {
                f.write_str("no cache information for CPU")?;
                f.write_str(if cpus.len() == 1 { " " } else { "s " })?;
                write_cpu_list(f, cpus)?;
                f.write_str(": no shared caches")
            }
            Assumption::LineSize => f.write_str("caches without a line size: 64 bytes"),
            Assumption::HwlocDistances => {
                f.write_str("hwloc gave no NUMA distances: 10 within a node, 20 between nodes")
            }
        }
    }
}

/// Where a [`Topology`] came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TopologySource {
    /// Read from Linux sysfs and restricted to the calling thread's affinity mask.
    Sysfs,
    /// Built by hwloc (cargo feature `hwloc`) and restricted to the calling thread's affinity
    /// mask.
    Hwloc,
    /// sysfs could not be read: one node with one processor per CPU the thread may run on.
    Fallback,
    /// Built from a spec, written here in canonical form, itself a valid spec: `"2x2"`, `"1x4"`
    /// for `"4 processors"` or [`Topology::single_node(4)`](Topology::single_node),
    /// `"2x4x2, 2 MiB L2 per core, 32 MiB L3 per node"`.
    Synthetic(String),
}

impl fmt::Display for TopologySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologySource::Sysfs => f.write_str("sysfs"),
            TopologySource::Hwloc => f.write_str("hwloc"),
            TopologySource::Fallback => f.write_str("fallback"),
            TopologySource::Synthetic(_) => f.write_str("synthetic"),
        }
    }
}

/// Processors on cores, grouped into nodes, with their caches and the victim order of each.
///
/// ```
/// use elite_affinity::Topology;
///
/// let topology = Topology::synthetic("2 nodes x 2 cores x 2 threads, 2 MiB L2 per core")?;
/// assert_eq!((topology.num_nodes(), topology.num_cores(), topology.num_processors()), (2, 4, 8));
/// assert_eq!(topology.processors_in_node(1), &[4, 5, 6, 7]);
/// // Processor 0 steals from its core's L2 sibling, then its node, then the other node.
/// assert_eq!(topology.distance_groups(0), &[vec![1], vec![2, 3], vec![4, 5, 6, 7]]);
/// assert_eq!(topology.model_cache().lines(), 32768);
/// # Ok::<(), elite_affinity::TopologyError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Indexed by processor.
    processors: Vec<ProcessorInfo>,
    /// The processors of each node, ascending.
    nodes: Vec<Vec<usize>>,
    /// Row-major `num_nodes x num_nodes`.
    node_distances: Vec<u32>,
    num_cores: usize,
    /// Ordered by level, kind, then first processor.
    caches: Vec<CacheInfo>,
    /// Per processor: indices into `caches`, by level then kind.
    processor_caches: Vec<Vec<usize>>,
    /// Per processor: its victims, nearest group first, itself excluded, no empty group.
    distance_groups: Vec<Vec<Vec<usize>>>,
    assumptions: Vec<Assumption>,
    source: TopologySource,
}

/// A processor before assembly. Its core, node and caches are keys of any value, renumbered
/// densely by first appearance; `caches` index [`Raw::caches`].
pub(crate) struct Place {
    pub(crate) cpu: usize,
    pub(crate) core: usize,
    pub(crate) node: usize,
    pub(crate) caches: Vec<usize>,
}

/// One cache before assembly; who shares it is said by the places that name it.
#[derive(Clone, Copy)]
pub(crate) struct CacheDesc {
    pub(crate) level: u8,
    pub(crate) kind: CacheKind,
    pub(crate) size: u64,
    pub(crate) line_size: u32,
}

/// A topology before assembly, as each source builds it.
pub(crate) struct Raw {
    /// At least one.
    pub(crate) places: Vec<Place>,
    pub(crate) caches: Vec<CacheDesc>,
    /// `(node keys, row-major matrix)`; nodes missing from it get 10/20.
    pub(crate) distances: Option<(Vec<usize>, Vec<u32>)>,
    pub(crate) assumptions: Vec<Assumption>,
    pub(crate) source: TopologySource,
}

impl Topology {
    /// The topology of this machine as far as the calling thread may use it.
    ///
    /// Reads the online CPUs, their NUMA nodes and distances, physical cores and caches from
    /// Linux sysfs and keeps the CPUs in the calling thread's affinity mask (call it before
    /// pinning the thread, or it sees one CPU). Processors are ordered by node, then by CPU id;
    /// nodes left without a CPU are dropped and the rest renumbered `0..n`. Never panics: where
    /// sysfs lacks something the result says what it assumed instead
    /// ([`assumptions`](Self::assumptions)); where sysfs cannot be read at all it is one node with
    /// a processor per allowed CPU (or per
    /// [`available_parallelism`](std::thread::available_parallelism) CPU when the mask is unknown
    /// too), with source [`TopologySource::Fallback`].
    ///
    /// ```
    /// let machine = elite_affinity::Topology::detect();
    /// assert!(machine.num_processors() >= 1);
    /// println!("{machine:#}"); // the shape, then caches, distances and assumptions
    /// ```
    pub fn detect() -> Topology {
        detect_in(Path::new(SYSFS_ROOT), allowed_cpus().as_deref())
    }

    /// A topology of the shape `spec` names, its processors pinned round-robin onto the CPUs of
    /// [`Topology::detect`] (processor `i` on detected processor `i % n`'s CPU).
    ///
    /// A spec is a shape and any number of caches after commas:
    ///
    /// - shapes: `"4"` or `"4 processors"` (one node), `"2x2"` or `"2 nodes x 2 processors"`
    ///   (nodes times processors per node; `cores` works as `processors`), `"2 nodes x 4 cores x
    ///   2 threads"` or `"2x4x2"` (SMT threads per core), `"2 cores x 2 threads"`; `X` and `×`
    ///   work as `x`, the words are optional and case-insensitive;
    /// - caches: `"<size> L<level>[d|i] per <processor|thread|core|node|machine>"` or
    ///   `"<size> L<level> shared"`, sizes in `B`, `KiB`, `MiB` or `GiB` (`K`, `KB`, ... read as
    ///   binary), each with 64-byte lines: `"2 nodes x 2 cores, 2 MiB L2 per core, 32 MiB L3 per
    ///   node"`.
    ///
    /// The total must be `1..=`[`MAX_PROCESSORS`]. Nodes are 10 apart from themselves and 20 from
    /// each other. A spec without caches gives a topology without caches (its
    /// [`model_cache`](Self::model_cache) is [`ModelCache::ASSUMED`]). A spec that does not parse
    /// is an error that says what was expected where.
    ///
    /// ```
    /// use elite_affinity::{Topology, TopologySource};
    ///
    /// let topology = Topology::synthetic("2 nodes × 3 processors")?;
    /// assert_eq!(topology.num_processors(), 6);
    /// assert_eq!(topology.node_of(4), 1);
    /// assert_eq!(topology.source(), &TopologySource::Synthetic("2x3".to_string()));
    ///
    /// let cached = Topology::synthetic("2 nodes x 2 cores, 2 MiB L2 per core, 32 MiB L3 per node")?;
    /// assert_eq!(cached.caches().len(), 6);
    /// assert_eq!(cached.distance_groups(0), &[vec![1], vec![2, 3]]);
    ///
    /// let err = Topology::synthetic("2x2, 2 MiB L9 per core").unwrap_err();
    /// assert!(err.to_string().starts_with(
    ///     "cannot parse topology \"2x2, 2 MiB L9 per core\": expected a cache level \"L1\"..\"L4\", \
    ///      optionally followed by \"d\" or \"i\", found \"L9\" at byte 11 (specs look like \"2x2\""
    /// ));
    /// # Ok::<(), elite_affinity::TopologyError>(())
    /// ```
    pub fn synthetic(spec: &str) -> Result<Topology, TopologyError> {
        let shape = parse_shape(spec)?;
        Ok(Topology::shaped_on(&Topology::detect(), &shape))
    }

    /// `processors` processors in one node, pinned round-robin onto the CPUs of
    /// [`Topology::detect`]. The same as [`Topology::synthetic`] with spec `"<processors>"`.
    ///
    /// ```
    /// let topology = elite_affinity::Topology::single_node(3)?;
    /// assert_eq!((topology.num_nodes(), topology.num_processors()), (1, 3));
    /// assert!(elite_affinity::Topology::single_node(0).is_err());
    /// # Ok::<(), elite_affinity::TopologyError>(())
    /// ```
    pub fn single_node(processors: usize) -> Result<Topology, TopologyError> {
        if !(1..=MAX_PROCESSORS).contains(&processors) {
            return Err(TopologyError::processor_count(processors, MAX_PROCESSORS));
        }
        Ok(Topology::shaped_on(&Topology::detect(), &Shape::plain(1, processors)))
    }

    /// The first `n` processors of this topology, keeping their CPUs, cores, nodes and caches
    /// (renumbered densely; caches and nodes left without a processor are dropped). When `n`
    /// exceeds [`num_processors`](Self::num_processors), processor `i` beyond the end takes the
    /// CPU, core, node and caches of processor `i % num_processors()`. The source, distances and
    /// assumptions stay those of `self`.
    ///
    /// `n` must be at least 1 and at most [`MAX_PROCESSORS`] or `self.num_processors()`,
    /// whichever is larger.
    ///
    /// ```
    /// let topology = elite_affinity::Topology::synthetic("2x2")?;
    /// let one_node = topology.with_processors(2)?;
    /// assert_eq!(one_node.num_nodes(), 1);
    /// let wrapped = topology.with_processors(6)?;
    /// assert_eq!(wrapped.node_of(5), topology.node_of(1));
    /// # Ok::<(), elite_affinity::TopologyError>(())
    /// ```
    pub fn with_processors(&self, n: usize) -> Result<Topology, TopologyError> {
        let max = MAX_PROCESSORS.max(self.num_processors());
        if !(1..=max).contains(&n) {
            return Err(TopologyError::processor_count(n, max));
        }
        let places = (0..n)
            .map(|i| {
                let host = &self.processors[i % self.num_processors()];
                Place {
                    cpu: host.cpu,
                    core: host.core,
                    node: host.node,
                    caches: self.processor_caches[host.index].clone(),
                }
            })
            .collect();
        let caches = self
            .caches
            .iter()
            .map(|c| CacheDesc { level: c.level, kind: c.kind, size: c.size, line_size: c.line_size })
            .collect();
        Ok(Topology::assemble(Raw {
            places,
            caches,
            distances: Some(((0..self.num_nodes()).collect(), self.node_distances.clone())),
            assumptions: self.assumptions.clone(),
            source: self.source.clone(),
        }))
    }

    /// The number of processors, at least 1.
    #[inline]
    pub fn num_processors(&self) -> usize {
        self.processors.len()
    }

    /// The number of nodes, at least 1. Every node has at least one processor.
    #[inline]
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The number of cores, at least 1 (see [`ProcessorInfo::core`]).
    #[inline]
    pub fn num_cores(&self) -> usize {
        self.num_cores
    }

    /// All processors, indexed by processor.
    #[inline]
    pub fn processors(&self) -> &[ProcessorInfo] {
        &self.processors
    }

    /// Processor `p`.
    ///
    /// # Panics
    ///
    /// If `p >= self.num_processors()`.
    #[inline]
    pub fn processor(&self, p: usize) -> &ProcessorInfo {
        &self.processors[p]
    }

    /// The node of processor `p`.
    ///
    /// # Panics
    ///
    /// If `p >= self.num_processors()`.
    #[inline]
    pub fn node_of(&self, p: usize) -> usize {
        self.processors[p].node
    }

    /// The processors of `node`, ascending.
    ///
    /// # Panics
    ///
    /// If `node >= self.num_nodes()`.
    #[inline]
    pub fn processors_in_node(&self, node: usize) -> &[usize] {
        &self.nodes[node]
    }

    /// The NUMA distance from node `a` to node `b` as the firmware reports it (10 to itself by
    /// convention; larger is farther). Where the source had no distances: 10 and 20.
    ///
    /// ```
    /// let topology = elite_affinity::Topology::synthetic("3x1")?;
    /// assert_eq!((topology.node_distance(0, 0), topology.node_distance(0, 2)), (10, 20));
    /// # Ok::<(), elite_affinity::TopologyError>(())
    /// ```
    ///
    /// # Panics
    ///
    /// If `a` or `b` is not below `self.num_nodes()`.
    #[inline]
    pub fn node_distance(&self, a: usize, b: usize) -> u32 {
        assert!(a < self.num_nodes() && b < self.num_nodes(), "node out of range");
        self.node_distances[a * self.num_nodes() + b]
    }

    /// Every cache, by level, then kind, then first processor.
    #[inline]
    pub fn caches(&self) -> &[CacheInfo] {
        &self.caches
    }

    /// The caches processor `p` uses, nearest (lowest level) first.
    ///
    /// ```
    /// let topology = elite_affinity::Topology::synthetic("1x2, 32 KiB L1d per core, 1 MiB L2 shared")?;
    /// let levels: Vec<u8> = topology.caches_of(1).map(|c| c.level).collect();
    /// assert_eq!(levels, [1, 2]);
    /// # Ok::<(), elite_affinity::TopologyError>(())
    /// ```
    ///
    /// # Panics
    ///
    /// If `p >= self.num_processors()`.
    pub fn caches_of(&self, p: usize) -> impl Iterator<Item = &CacheInfo> + '_ {
        self.processor_caches[p].iter().map(|&c| &self.caches[c])
    }

    /// The processors that processor `p` steals from, in groups nearest first: those sharing a
    /// data or unified cache with it (a group per cache, the lowest level first), then the rest of
    /// its node, then the other nodes (a group per NUMA distance, nearest first). `p` is in no
    /// group, no processor is in two, empty groups are left out (a one-processor topology has
    /// none), and each group is ascending.
    ///
    /// Precomputed by the constructor; this only indexes. It costs memory quadratic in the number
    /// of processors (about 128 MiB at [`MAX_PROCESSORS`]).
    ///
    /// # Panics
    ///
    /// If `p >= self.num_processors()`.
    #[inline]
    pub fn distance_groups(&self, p: usize) -> &[Vec<usize>] {
        &self.distance_groups[p]
    }

    /// The cache the cache model should describe by default: the largest data or unified cache
    /// private to one core (used by no processor of another core; with SMT a core's threads
    /// share all its caches), the smallest such over all cores. Where some core has no private
    /// cache, the smallest data or unified cache of the lowest level
    /// ([`ModelCacheChoice::NearestShared`]); where the topology has no data or unified cache at
    /// all, [`ModelCache::ASSUMED`].
    ///
    /// ```
    /// use elite_affinity::{ModelCacheChoice, Topology};
    ///
    /// let t = Topology::synthetic("2 nodes x 2 cores, 2 MiB L2 per core, 32 MiB L3 per node")?;
    /// let cache = t.model_cache();
    /// assert_eq!((cache.size, cache.line_size, cache.lines()), (2 << 20, 64, 32768));
    /// assert_eq!((cache.level, cache.choice), (Some(2), ModelCacheChoice::PrivateToCore));
    /// # Ok::<(), elite_affinity::TopologyError>(())
    /// ```
    pub fn model_cache(&self) -> ModelCache {
        let data = |c: &&CacheInfo| c.kind != CacheKind::Instruction;
        let mut smallest_private: Option<&CacheInfo> = None;
        let mut every_core_has_one = true;
        for p in &self.processors {
            let private = self
                .caches_of(p.index)
                .filter(data)
                .filter(|c| c.processors.iter().all(|&q| self.processors[q].core == p.core))
                .max_by_key(|c| c.size);
            match private {
                Some(c) => {
                    if smallest_private.is_none_or(|s| c.size < s.size) {
                        smallest_private = Some(c);
                    }
                }
                None => every_core_has_one = false,
            }
        }
        let (cache, choice) = match smallest_private {
            Some(c) if every_core_has_one => (c, ModelCacheChoice::PrivateToCore),
            _ => match self.caches.iter().filter(data).min_by_key(|c| (c.level, c.size)) {
                Some(c) => (c, ModelCacheChoice::NearestShared),
                None => return ModelCache::ASSUMED,
            },
        };
        ModelCache { size: cache.size, line_size: cache.line_size, level: Some(cache.level), choice }
    }

    /// What the source could not find out and assumed instead; empty when it found everything
    /// (and always for a synthetic topology, which says everything it means).
    #[inline]
    pub fn assumptions(&self) -> &[Assumption] {
        &self.assumptions
    }

    /// Where this topology came from.
    #[inline]
    pub fn source(&self) -> &TopologySource {
        &self.source
    }

    /// The distinct OS CPU ids the processors run on, ascending.
    fn cpus(&self) -> Vec<usize> {
        let mut cpus: Vec<usize> = self.processors.iter().map(|p| p.cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        cpus
    }

    /// `shape` laid round-robin over the processors of `base`.
    fn shaped_on(base: &Topology, shape: &Shape) -> Topology {
        let per_node = shape.per_node();
        let total = shape.nodes * per_node;
        let mut caches: Vec<CacheDesc> = Vec::new();
        // (clause, instance) -> index in `caches`.
        let mut instances: HashMap<(usize, usize), usize> = HashMap::new();
        let places = (0..total)
            .map(|i| {
                let host = &base.processors[i % base.num_processors()];
                let core = i / shape.threads_per_core;
                let node = i / per_node;
                let caches = shape
                    .caches
                    .iter()
                    .enumerate()
                    .map(|(clause, spec)| {
                        let instance = match spec.scope {
                            Scope::Processor => i,
                            Scope::Core => core,
                            Scope::Node => node,
                            Scope::Machine => 0,
                        };
                        *instances.entry((clause, instance)).or_insert_with(|| {
                            caches.push(CacheDesc {
                                level: spec.level,
                                kind: spec.kind,
                                size: spec.size,
                                line_size: SYNTHETIC_LINE_SIZE,
                            });
                            caches.len() - 1
                        })
                    })
                    .collect();
                Place { cpu: host.cpu, core, node, caches }
            })
            .collect();
        Topology::assemble(Raw {
            places,
            caches,
            distances: None,
            assumptions: Vec::new(),
            source: TopologySource::Synthetic(shape.canonical()),
        })
    }

    /// Numbers the processors, renumbers cores, nodes and caches densely in order of first
    /// appearance, and precomputes the node lists, distances, cache lists and distance groups.
    pub(crate) fn assemble(raw: Raw) -> Topology {
        debug_assert!(!raw.places.is_empty(), "a topology has at least one processor");
        let mut node_keys: Vec<usize> = Vec::new();
        let mut core_keys: HashMap<usize, usize> = HashMap::new();
        let mut nodes: Vec<Vec<usize>> = Vec::new();
        // Per raw cache: its dense processors (filled below).
        let mut sharers: Vec<Vec<usize>> = vec![Vec::new(); raw.caches.len()];
        let processors: Vec<ProcessorInfo> = raw
            .places
            .iter()
            .enumerate()
            .map(|(index, place)| {
                let node = match node_keys.iter().position(|&key| key == place.node) {
                    Some(node) => node,
                    None => {
                        node_keys.push(place.node);
                        nodes.push(Vec::new());
                        nodes.len() - 1
                    }
                };
                nodes[node].push(index);
                let next_core = core_keys.len();
                let core = *core_keys.entry(place.core).or_insert(next_core);
                for &c in &place.caches {
                    if sharers[c].last() != Some(&index) {
                        sharers[c].push(index);
                    }
                }
                ProcessorInfo { index, cpu: place.cpu, core, node }
            })
            .collect();

        // Caches in use, ordered; `dense[raw index]` is the new index.
        let mut order: Vec<usize> = (0..raw.caches.len()).filter(|&c| !sharers[c].is_empty()).collect();
        order.sort_by_key(|&c| (raw.caches[c].level, raw.caches[c].kind, sharers[c][0]));
        let mut dense = vec![usize::MAX; raw.caches.len()];
        let caches: Vec<CacheInfo> = order
            .iter()
            .enumerate()
            .map(|(new, &c)| {
                dense[c] = new;
                let d = raw.caches[c];
                CacheInfo {
                    level: d.level,
                    kind: d.kind,
                    size: d.size,
                    line_size: d.line_size,
                    processors: std::mem::take(&mut sharers[c]),
                }
            })
            .collect();
        let processor_caches: Vec<Vec<usize>> = raw
            .places
            .iter()
            .map(|place| {
                let mut mine: Vec<usize> = place.caches.iter().map(|&c| dense[c]).collect();
                mine.sort_unstable();
                mine.dedup();
                mine
            })
            .collect();

        let n = nodes.len();
        let mut node_distances = Vec::with_capacity(n * n);
        for a in 0..n {
            for b in 0..n {
                let given = raw.distances.as_ref().and_then(|(keys, matrix)| {
                    let i = keys.iter().position(|&k| k == node_keys[a])?;
                    let j = keys.iter().position(|&k| k == node_keys[b])?;
                    matrix.get(i * keys.len() + j).copied()
                });
                let default = if a == b { LOCAL_DISTANCE } else { REMOTE_DISTANCE };
                node_distances.push(given.unwrap_or(default));
            }
        }

        let distance_groups = processors
            .iter()
            .map(|me| {
                let mut seen = vec![false; processors.len()];
                seen[me.index] = true;
                let mut groups: Vec<Vec<usize>> = Vec::new();
                let mut push = |members: &mut dyn Iterator<Item = usize>, seen: &mut Vec<bool>| {
                    let group: Vec<usize> =
                        members.filter(|&q| !std::mem::replace(&mut seen[q], true)).collect();
                    if !group.is_empty() {
                        groups.push(group);
                    }
                };
                for &c in &processor_caches[me.index] {
                    if caches[c].kind != CacheKind::Instruction {
                        push(&mut caches[c].processors.iter().copied(), &mut seen);
                    }
                }
                push(&mut nodes[me.node].iter().copied(), &mut seen);
                let mut tiers: Vec<u32> =
                    (0..n).filter(|&b| b != me.node).map(|b| node_distances[me.node * n + b]).collect();
                tiers.sort_unstable();
                tiers.dedup();
                for tier in tiers {
                    let mut far: Vec<usize> = (0..n)
                        .filter(|&b| b != me.node && node_distances[me.node * n + b] == tier)
                        .flat_map(|b| nodes[b].iter().copied())
                        .collect();
                    far.sort_unstable();
                    push(&mut far.into_iter(), &mut seen);
                }
                groups
            })
            .collect();
        Topology {
            num_cores: core_keys.len(),
            processors,
            nodes,
            node_distances,
            caches,
            processor_caches,
            distance_groups,
            assumptions: raw.assumptions,
            source: raw.source,
        }
    }
}

/// [`Topology::detect`] with sysfs at `root` and `allowed` as the affinity mask (`None`: unknown).
fn detect_in(root: &Path, allowed: Option<&[usize]>) -> Topology {
    match read_machine(root, allowed) {
        Some(machine) => from_sysfs(machine),
        None => fallback(allowed),
    }
}

/// Orders the CPUs by node then id, and keys cores by `(package, core)` and caches by level, kind
/// and sharing set. CPUs that no node lists form a node of their own, after the others.
fn from_sysfs(machine: SysfsMachine) -> Topology {
    let SysfsMachine { mut cpus, has_nodes, distances } = machine;
    cpus.sort_unstable_by_key(|c| (c.node.unwrap_or(usize::MAX), c.cpu));
    let mut assumptions = Vec::new();
    if !has_nodes {
        assumptions.push(Assumption::OneNode);
    }
    let own_cores: Vec<usize> = sorted(cpus.iter().filter(|c| c.core.is_none()).map(|c| c.cpu));
    if !own_cores.is_empty() {
        assumptions.push(Assumption::OwnCores(own_cores));
    }
    let no_caches: Vec<usize> = sorted(cpus.iter().filter(|c| c.caches.is_empty()).map(|c| c.cpu));
    if !no_caches.is_empty() {
        assumptions.push(Assumption::NoCaches(no_caches));
    }
    if cpus.iter().flat_map(|c| &c.caches).any(|c| c.line_size.is_none()) {
        assumptions.push(Assumption::LineSize);
    }
    let node_count = {
        let mut ids: Vec<Option<usize>> = cpus.iter().map(|c| c.node).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    };
    if has_nodes && node_count > 1 && distances.is_none() {
        assumptions.push(Assumption::NodeDistances);
    }

    // Cores: `(package, core)`, or the CPU alone where core files are missing.
    let mut core_keys: HashMap<Result<(usize, usize), usize>, usize> = HashMap::new();
    // Caches: (level, kind, size, line size, sharing set).
    type CacheKey = (u8, CacheKind, u64, u32, Vec<usize>);
    let mut cache_keys: HashMap<CacheKey, usize> = HashMap::new();
    let mut caches: Vec<CacheDesc> = Vec::new();
    let places = cpus
        .iter()
        .map(|c| {
            let next_core = core_keys.len();
            let core = *core_keys.entry(c.core.ok_or(c.cpu)).or_insert(next_core);
            let caches = c
                .caches
                .iter()
                .map(|sc| {
                    let line_size = sc.line_size.unwrap_or(ASSUMED_LINE_SIZE);
                    let key = (sc.level, sc.kind, sc.size, line_size, sc.shared_with.clone());
                    *cache_keys.entry(key).or_insert_with(|| {
                        caches.push(CacheDesc { level: sc.level, kind: sc.kind, size: sc.size, line_size });
                        caches.len() - 1
                    })
                })
                .collect();
            Place { cpu: c.cpu, core, node: c.node.unwrap_or(usize::MAX), caches }
        })
        .collect();
    Topology::assemble(Raw { places, caches, distances, assumptions, source: TopologySource::Sysfs })
}

fn sorted(items: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut items: Vec<usize> = items.collect();
    items.sort_unstable();
    items
}

/// One node with a processor per allowed CPU, or per `available_parallelism` CPU numbered from 0
/// when the mask is unknown or empty. Each CPU is its own core.
fn fallback(allowed: Option<&[usize]>) -> Topology {
    let cpus: Vec<usize> = match allowed {
        Some(allowed) if !allowed.is_empty() => allowed.to_vec(),
        _ => (0..std::thread::available_parallelism().map_or(1, usize::from)).collect(),
    };
    let places = cpus.into_iter().map(|cpu| Place { cpu, core: cpu, node: 0, caches: Vec::new() }).collect();
    Topology::assemble(Raw {
        places,
        caches: Vec::new(),
        distances: None,
        assumptions: vec![Assumption::NoSysfs],
        source: TopologySource::Fallback,
    })
}

impl FromStr for Topology {
    type Err = TopologyError;

    /// The same as [`Topology::synthetic`].
    fn from_str(spec: &str) -> Result<Topology, TopologyError> {
        Topology::synthetic(spec)
    }
}

impl fmt::Display for Topology {
    /// `"2 nodes x 2 processors (synthetic on CPUs 0,1)"`; nodes of unequal sizes show as
    /// `"2 nodes, 5 processors (3+2) (sysfs on CPUs 0-4)"`.
    ///
    /// The alternate form (`{:#}`) adds a line per cache level and kind (`"L2 2 MiB (64-byte
    /// lines) x2, each shared by 1 processor"`), the node distances when there are several nodes,
    /// the model cache, and a line per assumption.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let nodes = self.num_nodes();
        let per_node = self.nodes[0].len();
        if self.nodes.iter().all(|node| node.len() == per_node) {
            write!(f, "{nodes} node{} x {per_node} processor{}", plural(nodes), plural(per_node))?;
        } else {
            write!(f, "{nodes} nodes, {} processors (", self.num_processors())?;
            for (i, node) in self.nodes.iter().enumerate() {
                let sep = if i == 0 { "" } else { "+" };
                write!(f, "{sep}{}", node.len())?;
            }
            f.write_str(")")?;
        }
        write!(f, " ({} on CPU", self.source)?;
        let cpus = self.cpus();
        f.write_str(if cpus.len() == 1 { " " } else { "s " })?;
        write_cpu_list(f, &cpus)?;
        f.write_str(")")?;
        if !f.alternate() {
            return Ok(());
        }
        let mut rest: &[CacheInfo] = &self.caches;
        while let Some(first) = rest.first() {
            let run = rest.iter().take_while(|c| (c.level, c.kind) == (first.level, first.kind)).count();
            let sizes: Vec<usize> = rest[..run].iter().map(|c| c.processors.len()).collect();
            let same = rest[..run].iter().all(|c| c.size == first.size);
            write!(f, "\n  {first} x{run}")?;
            if !same {
                f.write_str(" (sizes differ)")?;
            }
            if sizes.iter().all(|&s| s == sizes[0]) {
                write!(f, ", each shared by {} processor{}", sizes[0], plural(sizes[0]))?;
            }
            rest = &rest[run..];
        }
        if nodes > 1 {
            f.write_str("\n  node distances:")?;
            for a in 0..nodes {
                f.write_str(if a == 0 { " " } else { "; " })?;
                for b in 0..nodes {
                    write!(f, "{}{}", if b == 0 { "" } else { " " }, self.node_distance(a, b))?;
                }
            }
        }
        write!(f, "\n  model cache: {}", self.model_cache())?;
        for assumption in &self.assumptions {
            write!(f, "\n  assumed: {assumption}")?;
        }
        Ok(())
    }
}

/// Writes ascending `cpus` as a CPU list, runs of three or more as ranges: `0,1`, `0-3,8`.
fn write_cpu_list(f: &mut fmt::Formatter<'_>, cpus: &[usize]) -> fmt::Result {
    let mut rest = cpus;
    let mut first = true;
    while let Some(&start) = rest.first() {
        let run = rest.iter().enumerate().take_while(|&(i, &cpu)| cpu == start + i).count();
        let sep = if first { "" } else { "," };
        first = false;
        match run {
            1 => write!(f, "{sep}{start}")?,
            2 => write!(f, "{sep}{start},{}", start + 1)?,
            _ => write!(f, "{sep}{start}-{}", start + run - 1)?,
        }
        rest = &rest[run..];
    }
    Ok(())
}

/// What every syntax error ends with: the forms a spec takes.
pub(crate) const SPEC_EXAMPLES: &str =
    " (specs look like \"2x2\", \"2 nodes x 4 cores x 2 threads\" or \"2 nodes x 2 cores, 2 MiB L2 per core, \
     32 MiB L3 per node\")";

/// A topology that cannot be built: a spec that does not parse, or a processor or node count out
/// of range. The message says what was wrong and what is expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyError {
    kind: ErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ErrorKind {
    /// The spec does not follow the grammar: at byte `at`, `found` (`None`: the end) is not what
    /// was `expected`.
    Syntax { spec: String, at: usize, found: Option<String>, expected: String },
    /// The spec asks for zero nodes.
    NoNodes { spec: String },
    /// The total processor count is not `1..=max`; `got` is `None` when it overflows `usize`.
    ProcessorCount { got: Option<usize>, max: usize, spec: Option<String> },
}

impl TopologyError {
    pub(crate) fn syntax(spec: &str, at: usize, found: Option<&str>, expected: &str) -> TopologyError {
        TopologyError {
            kind: ErrorKind::Syntax {
                spec: spec.to_string(),
                at,
                found: found.map(str::to_string),
                expected: expected.to_string(),
            },
        }
    }

    pub(crate) fn no_nodes(spec: &str) -> TopologyError {
        TopologyError { kind: ErrorKind::NoNodes { spec: spec.to_string() } }
    }

    /// A processor total out of `1..=MAX_PROCESSORS` that `spec` asked for.
    pub(crate) fn processor_count_in(got: Option<usize>, spec: &str) -> TopologyError {
        TopologyError {
            kind: ErrorKind::ProcessorCount { got, max: MAX_PROCESSORS, spec: Some(spec.to_string()) },
        }
    }

    /// A processor count out of `1..=max` passed as a number.
    pub(crate) fn processor_count(got: usize, max: usize) -> TopologyError {
        TopologyError { kind: ErrorKind::ProcessorCount { got: Some(got), max, spec: None } }
    }
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Syntax { spec, at, found, expected } => {
                write!(f, "cannot parse topology {spec:?}: expected {expected}")?;
                match found {
                    Some(found) => write!(f, ", found {found:?} at byte {at}")?,
                    None => f.write_str(" at the end")?,
                }
                f.write_str(SPEC_EXAMPLES)
            }
            ErrorKind::NoNodes { spec } => {
                write!(f, "topology needs at least 1 node, got 0 (from {spec:?})")
            }
            ErrorKind::ProcessorCount { got, max, spec } => {
                write!(f, "topology needs 1..={max} processors, got ")?;
                match got {
                    Some(got) => write!(f, "{got}")?,
                    None => write!(f, "more than {max}")?,
                }
                match spec {
                    Some(spec) => write!(f, " (from {spec:?})"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for TopologyError {}

#[cfg(test)]
mod tests;
