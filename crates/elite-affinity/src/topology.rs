//! The machine as the runtime sees it: processors (one pinned worker thread each), grouped into
//! nodes, with the order in which a processor visits the others when it steals.
//!
//! A [`Topology`] is built once, by [`Topology::detect`] from Linux sysfs, or by
//! [`Topology::synthetic`] / [`Topology::single_node`] / [`Topology::with_processors`] for a shape
//! that differs from the machine (tests and experiments). Every constructor precomputes what the
//! scheduler asks for on its hot path ([`Topology::distance_groups`]), so the accessors only index.
//!
//! Processor indices `0..num_processors()` and node indices `0..num_nodes()` are always dense.
//! A processor's [`cpu`](ProcessorInfo::cpu) is the OS CPU id to pin its worker thread to; in a
//! synthetic topology several processors may share a CPU.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::pin::allowed_cpus;
use crate::synthetic::{parse_shape, Shape};
use crate::sysfs::{read_cpus, SysfsCpu};

/// The most processors [`Topology::synthetic`], [`Topology::single_node`] and
/// [`Topology::with_processors`] accept (a detected topology may be larger).
pub const MAX_PROCESSORS: usize = 4096;

/// Where sysfs lives on a Linux machine.
const SYSFS_ROOT: &str = "/sys/devices/system";

/// One processor of a [`Topology`]: a worker thread's place in the machine.
///
/// Marked `#[non_exhaustive]` so that later versions can describe more of the place (cache
/// domains, for one) without breaking code that reads these fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ProcessorInfo {
    /// This processor's index in [`Topology::processors`], `0..num_processors()`.
    pub index: usize,
    /// The OS CPU id to pin this processor's worker thread to (see
    /// [`pin_current_thread`](crate::pin_current_thread)).
    pub cpu: usize,
    /// The physical core of [`cpu`](Self::cpu). In a detected topology cores are numbered densely
    /// from 0 and processors with equal `core` are SMT siblings; in a synthetic one `core` is that
    /// of the machine CPU the processor runs on.
    pub core: usize,
    /// The node of this processor, `0..num_nodes()`.
    pub node: usize,
}

/// Where a [`Topology`] came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TopologySource {
    /// Read from Linux sysfs and restricted to the calling thread's affinity mask.
    Sysfs,
    /// sysfs could not be read: one node with one processor per CPU the thread may run on.
    Fallback,
    /// Built from a spec, written here in canonical form `"<nodes>x<processors per node>"`
    /// (`"2x2"`; `"1x4"` for `"4 processors"` or [`Topology::single_node(4)`](Topology::single_node)).
    Synthetic(String),
}

impl fmt::Display for TopologySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologySource::Sysfs => f.write_str("sysfs"),
            TopologySource::Fallback => f.write_str("fallback"),
            TopologySource::Synthetic(_) => f.write_str("synthetic"),
        }
    }
}

/// Processors grouped into nodes, with the victim order of each processor.
///
/// ```
/// use elite_affinity::Topology;
///
/// let topology = Topology::synthetic("2 nodes x 2 processors")?;
/// assert_eq!(topology.num_nodes(), 2);
/// assert_eq!(topology.processors_in_node(1), &[2, 3]);
/// // Processor 0 steals from its node first, then from the other node.
/// assert_eq!(topology.distance_groups(0), &[vec![1], vec![2, 3]]);
/// # Ok::<(), elite_affinity::TopologyError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Indexed by processor.
    processors: Vec<ProcessorInfo>,
    /// The processors of each node, ascending.
    nodes: Vec<Vec<usize>>,
    /// Per processor: its victims, nearest group first, itself excluded, no empty group.
    distance_groups: Vec<Vec<Vec<usize>>>,
    source: TopologySource,
}

/// A processor before assembly: its node is any key, renumbered densely by first appearance.
struct Place {
    cpu: usize,
    core: usize,
    node: usize,
}

impl Topology {
    /// The topology of this machine as far as the calling thread may use it.
    ///
    /// Reads the online CPUs, their NUMA nodes and physical cores from Linux sysfs and keeps the
    /// CPUs in the calling thread's affinity mask (call it before pinning the thread, or it sees
    /// one CPU). Processors are ordered by node, then by CPU id; nodes left without a CPU are
    /// dropped and the rest renumbered `0..n`. Never panics: where sysfs cannot be read the result
    /// is one node with a processor per allowed CPU (or per
    /// [`available_parallelism`](std::thread::available_parallelism) CPU when the mask is unknown
    /// too), with source [`TopologySource::Fallback`].
    ///
    /// ```
    /// let machine = elite_affinity::Topology::detect();
    /// assert!(machine.num_processors() >= 1);
    /// println!("{machine}");
    /// ```
    pub fn detect() -> Topology {
        detect_in(Path::new(SYSFS_ROOT), allowed_cpus().as_deref())
    }

    /// A topology of the shape `spec` names, its processors pinned round-robin onto the CPUs of
    /// [`Topology::detect`] (processor `i` on detected processor `i % n`'s CPU).
    ///
    /// Accepted specs: `"2x2"`, `"2 x 2"`, `"2 nodes x 2 processors"`, `"2 nodes × 2 processors"`
    /// (nodes times processors per node; `X` and `×` work as `x`, the words are optional), and `"4"`
    /// or `"4 processors"` for one node. The total must be `1..=`[`MAX_PROCESSORS`].
    ///
    /// ```
    /// use elite_affinity::{Topology, TopologySource};
    ///
    /// let topology = Topology::synthetic("2 nodes × 3 processors")?;
    /// assert_eq!(topology.num_processors(), 6);
    /// assert_eq!(topology.node_of(4), 1);
    /// assert_eq!(topology.source(), &TopologySource::Synthetic("2x3".to_string()));
    ///
    /// let err = Topology::synthetic("2y2").unwrap_err();
    /// assert!(err.to_string().starts_with("cannot parse topology \"2y2\": expected"));
    /// # Ok::<(), elite_affinity::TopologyError>(())
    /// ```
    pub fn synthetic(spec: &str) -> Result<Topology, TopologyError> {
        let shape = parse_shape(spec)?;
        Ok(Topology::shaped_on(&Topology::detect(), shape))
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
        let shape = Shape { nodes: 1, per_node: processors };
        Ok(Topology::shaped_on(&Topology::detect(), shape))
    }

    /// The first `n` processors of this topology, keeping their CPUs and nodes (nodes renumbered
    /// densely). When `n` exceeds [`num_processors`](Self::num_processors), processor `i` beyond
    /// the end takes the CPU, core and node of processor `i % num_processors()`. The source stays
    /// that of `self`.
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
        let places = self
            .processors
            .iter()
            .cycle()
            .take(n)
            .map(|p| Place { cpu: p.cpu, core: p.core, node: p.node })
            .collect();
        Ok(Topology::assemble(places, self.source.clone()))
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

    /// The processors that processor `p` steals from, in groups nearest first: the others of its
    /// node, then those of all other nodes. `p` is in no group, empty groups are left out (a
    /// one-processor topology has none), and each group is ascending.
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
    fn shaped_on(base: &Topology, shape: Shape) -> Topology {
        let total = shape.nodes * shape.per_node;
        let places = (0..total)
            .map(|i| {
                let host = &base.processors[i % base.num_processors()];
                Place { cpu: host.cpu, core: host.core, node: i / shape.per_node }
            })
            .collect();
        Topology::assemble(places, TopologySource::Synthetic(shape.canonical()))
    }

    /// Numbers the processors, renumbers the nodes densely in order of first appearance, and
    /// precomputes the node lists and distance groups. `places` must not be empty.
    fn assemble(places: Vec<Place>, source: TopologySource) -> Topology {
        debug_assert!(!places.is_empty(), "a topology has at least one processor");
        let mut node_keys: Vec<usize> = Vec::new();
        let mut nodes: Vec<Vec<usize>> = Vec::new();
        let processors: Vec<ProcessorInfo> = places
            .into_iter()
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
                ProcessorInfo { index, cpu: place.cpu, core: place.core, node }
            })
            .collect();
        let distance_groups = processors
            .iter()
            .map(|me| {
                let same_node: Vec<usize> =
                    nodes[me.node].iter().copied().filter(|&q| q != me.index).collect();
                let other_nodes: Vec<usize> =
                    processors.iter().filter(|q| q.node != me.node).map(|q| q.index).collect();
                [same_node, other_nodes].into_iter().filter(|group| !group.is_empty()).collect()
            })
            .collect();
        Topology { processors, nodes, distance_groups, source }
    }
}

/// [`Topology::detect`] with sysfs at `root` and `allowed` as the affinity mask (`None`: unknown).
fn detect_in(root: &Path, allowed: Option<&[usize]>) -> Topology {
    match read_cpus(root, allowed) {
        Some(cpus) => from_sysfs(cpus),
        None => fallback(allowed),
    }
}

/// Orders the CPUs by node then id, and numbers cores densely by first appearance. CPUs that no
/// node lists form a node of their own, after the others.
fn from_sysfs(mut cpus: Vec<SysfsCpu>) -> Topology {
    cpus.sort_unstable_by_key(|c| (c.node.unwrap_or(usize::MAX), c.cpu));
    // `None` (core files unreadable) makes a CPU its own core: key it by the CPU id instead.
    let mut core_keys: Vec<Result<(usize, usize), usize>> = Vec::new();
    let places = cpus
        .iter()
        .map(|c| {
            let key = c.core.ok_or(c.cpu);
            let core = core_keys.iter().position(|&k| k == key).unwrap_or_else(|| {
                core_keys.push(key);
                core_keys.len() - 1
            });
            Place { cpu: c.cpu, core, node: c.node.unwrap_or(usize::MAX) }
        })
        .collect();
    Topology::assemble(places, TopologySource::Sysfs)
}

/// One node with a processor per allowed CPU, or per `available_parallelism` CPU numbered from 0
/// when the mask is unknown or empty. Each CPU is its own core.
fn fallback(allowed: Option<&[usize]>) -> Topology {
    let cpus: Vec<usize> = match allowed {
        Some(allowed) if !allowed.is_empty() => allowed.to_vec(),
        _ => (0..std::thread::available_parallelism().map_or(1, usize::from)).collect(),
    };
    let places = cpus.into_iter().enumerate().map(|(core, cpu)| Place { cpu, core, node: 0 }).collect();
    Topology::assemble(places, TopologySource::Fallback)
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
        f.write_str(")")
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

/// A topology that cannot be built: a spec that does not parse, or a processor or node count out
/// of range. The message says what was wrong and what is expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyError {
    kind: ErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ErrorKind {
    /// The spec has none of the accepted forms.
    Unparsable { spec: String },
    /// The spec asks for zero nodes.
    NoNodes { spec: String },
    /// The total processor count is not `1..=max`; `got` is `None` when it overflows `usize`.
    ProcessorCount { got: Option<usize>, max: usize, spec: Option<String> },
}

impl TopologyError {
    pub(crate) fn unparsable(spec: &str) -> TopologyError {
        TopologyError { kind: ErrorKind::Unparsable { spec: spec.to_string() } }
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
            ErrorKind::Unparsable { spec } => write!(
                f,
                "cannot parse topology {spec:?}: expected \"<nodes>x<processors per node>\" such \
                 as \"2x2\" or \"2 nodes x 2 processors\", or \"<processors>\" such as \"4\""
            ),
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
mod tests {
    use super::*;
    use crate::sysfs::tests::FakeSysfs;

    /// A fallback-style base on the given CPUs, for deterministic round-robin tests.
    fn base_on(cpus: &[usize]) -> Topology {
        fallback(Some(cpus))
    }

    fn cpus_of(topology: &Topology) -> Vec<usize> {
        topology.processors().iter().map(|p| p.cpu).collect()
    }

    fn nodes_of(topology: &Topology) -> Vec<usize> {
        topology.processors().iter().map(|p| p.node).collect()
    }

    #[test]
    fn round_robin_onto_base_cpus() {
        let base = base_on(&[4, 6]);
        let topology = Topology::shaped_on(&base, Shape { nodes: 2, per_node: 3 });
        assert_eq!(cpus_of(&topology), vec![4, 6, 4, 6, 4, 6]);
        assert_eq!(nodes_of(&topology), vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(topology.processors_in_node(0), &[0, 1, 2]);
        assert_eq!(topology.processors_in_node(1), &[3, 4, 5]);
        assert_eq!(topology.to_string(), "2 nodes x 3 processors (synthetic on CPUs 4,6)");
    }

    #[test]
    fn round_robin_on_this_machine() {
        let machine = Topology::detect();
        let n = machine.num_processors();
        let topology = Topology::synthetic("2x2").expect("2x2 is valid");
        assert_eq!(topology.num_processors(), 4);
        assert_eq!(topology.num_nodes(), 2);
        for (i, p) in topology.processors().iter().enumerate() {
            assert_eq!(p.index, i);
            assert_eq!(p.cpu, machine.processor(i % n).cpu, "processor {i}");
            assert_eq!(p.core, machine.processor(i % n).core, "processor {i}");
            assert_eq!(p.node, i / 2);
        }
        let single = Topology::single_node(2 * n + 1).expect("valid count");
        assert_eq!(single.num_nodes(), 1);
        assert_eq!(single.processor(2 * n).cpu, machine.processor(0).cpu);
        assert_eq!(single, format!("{}", 2 * n + 1).parse().expect("same spec"));
    }

    #[test]
    fn every_form_builds_the_same_topology() {
        let expected = Topology::synthetic("2x2").expect("valid");
        for spec in ["2 x 2", "2 nodes x 2 processors", "2 nodes × 2 processors"] {
            assert_eq!(Topology::synthetic(spec), Ok(expected.clone()), "{spec:?}");
            assert_eq!(spec.parse::<Topology>(), Ok(expected.clone()), "{spec:?}");
        }
        let four = Topology::single_node(4).expect("valid");
        assert_eq!(Topology::synthetic("4"), Ok(four.clone()));
        assert_eq!(Topology::synthetic("4 processors"), Ok(four.clone()));
        assert_eq!(four.source(), &TopologySource::Synthetic("1x4".to_string()));
    }

    #[test]
    fn bad_specs_and_counts() {
        let err = Topology::synthetic("2y2").expect_err("garbage");
        assert!(
            err.to_string().starts_with(
                "cannot parse topology \"2y2\": expected \"<nodes>x<processors per node>\" such as \
                 \"2x2\" or \"2 nodes x 2 processors\""
            ),
            "{err}"
        );
        assert!("".parse::<Topology>().is_err());
        assert_eq!(
            Topology::single_node(0).expect_err("zero").to_string(),
            "topology needs 1..=4096 processors, got 0"
        );
        assert_eq!(
            Topology::single_node(4097).expect_err("too many").to_string(),
            "topology needs 1..=4096 processors, got 4097"
        );
        let topology = Topology::single_node(2).expect("valid");
        assert_eq!(
            topology.with_processors(0).expect_err("zero").to_string(),
            "topology needs 1..=4096 processors, got 0"
        );
        assert!(topology.with_processors(MAX_PROCESSORS + 1).is_err());
        let err: Box<dyn std::error::Error> = Box::new(err);
        assert!(err.to_string().contains("2y2"));
    }

    #[test]
    fn with_processors_shrinks() {
        let base = Topology::shaped_on(&base_on(&[0, 1]), Shape { nodes: 2, per_node: 2 });
        let same = base.with_processors(4).expect("valid");
        assert_eq!(same, base);

        let three = base.with_processors(3).expect("valid");
        assert_eq!(nodes_of(&three), vec![0, 0, 1]);
        assert_eq!(cpus_of(&three), vec![0, 1, 0]);
        assert_eq!(three.distance_groups(2), &[vec![0, 1]]);
        assert_eq!(three.to_string(), "2 nodes, 3 processors (2+1) (synthetic on CPUs 0,1)");

        let two = base.with_processors(2).expect("valid");
        assert_eq!(two.num_nodes(), 1, "the emptied node is dropped");
        assert_eq!(two.processors_in_node(0), &[0, 1]);
        assert_eq!(two.source(), base.source());

        let one = base.with_processors(1).expect("valid");
        assert_eq!(one.num_processors(), 1);
        assert!(one.distance_groups(0).is_empty());
    }

    #[test]
    fn with_processors_shrinking_renumbers_nodes() {
        // Nodes 0,1 of the base are interleaved: dropping the tail may keep any subset.
        let base = Topology::shaped_on(&base_on(&[0, 1]), Shape { nodes: 2, per_node: 1 })
            .with_processors(4)
            .expect("valid");
        assert_eq!(nodes_of(&base), vec![0, 1, 0, 1]);
        let two = base.with_processors(2).expect("valid");
        assert_eq!(nodes_of(&two), vec![0, 1]);
    }

    #[test]
    fn with_processors_grows_round_robin() {
        let base = Topology::shaped_on(&base_on(&[2, 5, 7]), Shape { nodes: 3, per_node: 1 });
        let grown = base.with_processors(7).expect("valid");
        assert_eq!(cpus_of(&grown), vec![2, 5, 7, 2, 5, 7, 2]);
        assert_eq!(nodes_of(&grown), vec![0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(grown.processors_in_node(0), &[0, 3, 6]);
        assert_eq!(grown.distance_groups(3), &[vec![0, 6], vec![1, 2, 4, 5]]);
        assert!(grown.processors().iter().enumerate().all(|(i, p)| p.index == i));
    }

    #[test]
    fn distance_groups_two_by_two() {
        let topology = Topology::synthetic("2x2").expect("valid");
        assert_eq!(topology.distance_groups(0), &[vec![1], vec![2, 3]]);
        assert_eq!(topology.distance_groups(1), &[vec![0], vec![2, 3]]);
        assert_eq!(topology.distance_groups(2), &[vec![3], vec![0, 1]]);
        assert_eq!(topology.distance_groups(3), &[vec![2], vec![0, 1]]);
    }

    #[test]
    fn distance_groups_one_node() {
        let topology = Topology::single_node(3).expect("valid");
        assert_eq!(topology.distance_groups(0), &[vec![1, 2]]);
        assert_eq!(topology.distance_groups(1), &[vec![0, 2]]);
        let one = Topology::single_node(1).expect("valid");
        assert!(one.distance_groups(0).is_empty());
        // One processor per node: only the other-nodes group.
        let spread = Topology::synthetic("3x1").expect("valid");
        assert_eq!(spread.distance_groups(1), &[vec![0, 2]]);
    }

    #[test]
    fn detect_on_this_machine() {
        let machine = Topology::detect();
        assert!(machine.num_processors() >= 1);
        assert!(machine.num_nodes() >= 1);
        if let Some(mask) = allowed_cpus() {
            for p in machine.processors() {
                assert!(mask.contains(&p.cpu), "cpu {} not in mask {mask:?}", p.cpu);
            }
            assert_eq!(machine.num_processors(), mask.len());
        }
        assert_eq!(machine.num_processors(), crate::online_cpus());
        for (node, members) in (0..machine.num_nodes()).map(|n| (n, machine.processors_in_node(n))) {
            assert!(!members.is_empty());
            assert!(members.iter().all(|&p| machine.node_of(p) == node));
        }
        if Path::new(SYSFS_ROOT).join("cpu/online").exists() {
            assert_eq!(machine.source(), &TopologySource::Sysfs);
        }
        let shown = machine.to_string();
        assert!(shown.contains(&format!("{} processor", machine.processors_in_node(0).len())));
    }

    #[test]
    fn detect_from_fake_sysfs() {
        let fake = FakeSysfs::new();
        fake.write("cpu/online", "0-5\n")
            .write("node/node0/cpulist", "0-1\n")
            .write("node/node1/cpulist", "\n")
            .write("node/node2/cpulist", "2-3\n")
            .write("node/node3/cpulist", "4-5\n")
            .core(0, 0, 0)
            .core(1, 0, 0)
            .core(2, 1, 0)
            .core(3, 1, 1)
            .core(4, 1, 0)
            .core(5, 1, 1);
        let all = detect_in(&fake.root, None);
        assert_eq!(all.source(), &TopologySource::Sysfs);
        assert_eq!(all.num_nodes(), 3, "the CPU-less node 1 is dropped");
        assert_eq!(nodes_of(&all), vec![0, 0, 1, 1, 2, 2]);
        assert_eq!(
            all.processors().iter().map(|p| p.core).collect::<Vec<_>>(),
            vec![0, 0, 1, 2, 1, 2],
            "cores are (package, core_id) pairs numbered densely"
        );
        assert_eq!(all.to_string(), "3 nodes x 2 processors (sysfs on CPUs 0-5)");

        // A mask that empties node 0 and half of node 3: renumbered to nodes 0 and 1.
        let some = detect_in(&fake.root, Some(&[2, 3, 5]));
        assert_eq!(cpus_of(&some), vec![2, 3, 5]);
        assert_eq!(nodes_of(&some), vec![0, 0, 1]);
        assert_eq!(some.distance_groups(0), &[vec![1], vec![2]]);
        assert_eq!(some.to_string(), "2 nodes, 3 processors (2+1) (sysfs on CPUs 2,3,5)");
    }

    #[test]
    fn detect_orders_by_node() {
        let fake = FakeSysfs::new();
        fake.write("cpu/online", "0-3").write("node/node0/cpulist", "0,2").write("node/node1/cpulist", "1,3");
        let topology = detect_in(&fake.root, None);
        assert_eq!(cpus_of(&topology), vec![0, 2, 1, 3]);
        assert_eq!(nodes_of(&topology), vec![0, 0, 1, 1]);
        assert_eq!(
            topology.processors().iter().map(|p| p.core).collect::<Vec<_>>(),
            vec![0, 1, 2, 3],
            "without core files every CPU is its own core"
        );
    }

    #[test]
    fn detect_without_sysfs_falls_back() {
        let fake = FakeSysfs::new();
        let missing = fake.root.join("does-not-exist");
        let masked = detect_in(&missing, Some(&[3, 9]));
        assert_eq!(masked.source(), &TopologySource::Fallback);
        assert_eq!(cpus_of(&masked), vec![3, 9]);
        assert_eq!(masked.num_nodes(), 1);
        assert_eq!(masked.to_string(), "1 node x 2 processors (fallback on CPUs 3,9)");

        let unknown = detect_in(&missing, None);
        let expected = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(unknown.num_processors(), expected);
        assert_eq!(cpus_of(&unknown), (0..expected).collect::<Vec<_>>());
    }

    #[test]
    fn display_forms() {
        let one = Topology::shaped_on(&base_on(&[0]), Shape { nodes: 1, per_node: 1 });
        assert_eq!(one.to_string(), "1 node x 1 processor (synthetic on CPU 0)");
        let wide = Topology::shaped_on(&base_on(&[0, 1, 2, 3, 8, 10, 11]), Shape { nodes: 1, per_node: 7 });
        assert_eq!(wide.to_string(), "1 node x 7 processors (synthetic on CPUs 0-3,8,10,11)");
        assert_eq!(TopologySource::Fallback.to_string(), "fallback");
    }
}
