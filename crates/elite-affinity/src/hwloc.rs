//! [`Topology::detect_hwloc`]: the same [`Topology`] as [`Topology::detect`], built through the
//! hwloc library (cargo feature `hwloc`, the `hwloc2` crate, system `libhwloc` 2.x).
//!
//! What is read: the PUs (OS CPU ids), each PU's core and caches (its ancestors in hwloc's
//! tree: the level, kind, size and line size of each cache, and which PUs share it by identity of
//! the cache object), and the NUMA node of each PU (the first node of its nodeset).
//! Processors are restricted to the calling thread's affinity mask and ordered by node, then CPU
//! id, as in [`Topology::detect`].
//!
//! Differences from sysfs, reported as [`Assumption`]s:
//!
//! - hwloc filters instruction caches out by default, so a hwloc topology has none;
//! - `hwloc2` 2.2 does not bind `hwloc_distances_get`, so NUMA distances are 10 within a node and
//!   20 between nodes ([`Assumption::HwlocDistances`], only with more than one node).
//!
//! `hwloc2` 2.2 was written against hwloc 2.0; its `hwloc_obj` mirror lacks the
//! `symmetric_subtree` field added later, which shifts only the `memory_arity` field this module
//! never reads (the fields after it keep their offsets because of alignment). The cache type is
//! read from the attribute struct as the C `int` it is, as `hwloc2` does not export its enum.

use std::collections::HashMap;
use std::fmt;

use hwloc2::{ObjectType, TopologyObject};

use crate::pin::allowed_cpus;
use crate::topology::{Assumption, CacheDesc, CacheKind, Place, Raw, Topology, TopologySource};

/// The line size assumed where hwloc reports 0.
const ASSUMED_LINE_SIZE: u32 = 64;

/// Why hwloc gave no topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HwlocError {
    reason: &'static str,
}

impl fmt::Display for HwlocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hwloc topology unavailable: {}", self.reason)
    }
}

impl std::error::Error for HwlocError {}

impl Topology {
    /// The topology of this machine through hwloc, restricted to the calling thread's affinity
    /// mask: the same shape as [`Topology::detect`] (processors, cores, data and unified caches,
    /// nodes) with source [`TopologySource::Hwloc`]. Requires the cargo feature `hwloc`.
    ///
    /// ```
    /// let machine = elite_affinity::Topology::detect_hwloc()?;
    /// assert_eq!(machine.num_processors(), elite_affinity::Topology::detect().num_processors());
    /// # Ok::<(), elite_affinity::HwlocError>(())
    /// ```
    pub fn detect_hwloc() -> Result<Topology, HwlocError> {
        let hwloc = hwloc2::Topology::new().ok_or(HwlocError { reason: "hwloc_topology_load failed" })?;
        let pus = hwloc
            .objects_with_type(&ObjectType::PU)
            .map_err(|_| HwlocError { reason: "hwloc reports no processing units" })?;
        let allowed = allowed_cpus();
        let mut pus: Vec<&TopologyObject> = pus
            .into_iter()
            .filter(|pu| allowed.as_ref().is_none_or(|mask| mask.contains(&(pu.os_index() as usize))))
            .collect();
        if pus.is_empty() {
            return Err(HwlocError { reason: "no processing unit in the thread's affinity mask" });
        }
        // A PU's nodeset holds the NUMA nodes local to it: its own node, the first one set. (hwloc2
        // 2.2 cannot list NUMA nodes, which hwloc 2 keeps at a virtual depth.)
        let node_of = |pu: &TopologyObject| {
            pu.nodeset().map(|set| set.first()).and_then(|first| usize::try_from(first).ok())
        };
        let has_nodes = pus.iter().any(|pu| node_of(pu).is_some());
        let node_of = |pu: &TopologyObject| node_of(pu).unwrap_or(usize::MAX);
        pus.sort_by_key(|pu| (node_of(pu), pu.os_index()));

        let mut assumptions = Vec::new();
        if !has_nodes {
            assumptions.push(Assumption::OneNode);
        }
        let mut core_keys: HashMap<u32, usize> = HashMap::new();
        let mut cache_keys: HashMap<(u32, u32), usize> = HashMap::new();
        let mut caches: Vec<CacheDesc> = Vec::new();
        let mut own_cores = Vec::new();
        let mut no_caches = Vec::new();
        let mut line_assumed = false;
        let places: Vec<Place> = pus
            .iter()
            .map(|pu| {
                let cpu = pu.os_index() as usize;
                let mut core = None;
                let mut mine = Vec::new();
                let mut ancestor = pu.parent();
                while let Some(object) = ancestor {
                    let kind = object.object_type();
                    if kind == ObjectType::Core && core.is_none() {
                        let next = core_keys.len();
                        core = Some(*core_keys.entry(object.logical_index()).or_insert(next));
                    } else if let Some(desc) = cache_desc(object) {
                        line_assumed |= desc.line_size == 0;
                        let desc = CacheDesc {
                            line_size: if desc.line_size == 0 { ASSUMED_LINE_SIZE } else { desc.line_size },
                            ..desc
                        };
                        let key = (object.depth(), object.logical_index());
                        mine.push(*cache_keys.entry(key).or_insert_with(|| {
                            caches.push(desc);
                            caches.len() - 1
                        }));
                    }
                    ancestor = object.parent();
                }
                if mine.is_empty() {
                    no_caches.push(cpu);
                }
                let core = core.unwrap_or_else(|| {
                    own_cores.push(cpu);
                    // Distinct from every hwloc core: past the keys handed out so far and the PU.
                    usize::MAX / 2 + cpu
                });
                Place { cpu, core, node: node_of(pu), caches: mine }
            })
            .collect();
        if !own_cores.is_empty() {
            own_cores.sort_unstable();
            assumptions.push(Assumption::OwnCores(own_cores));
        }
        if !no_caches.is_empty() {
            no_caches.sort_unstable();
            assumptions.push(Assumption::NoCaches(no_caches));
        }
        if line_assumed {
            assumptions.push(Assumption::LineSize);
        }
        let used_nodes = {
            let mut ids: Vec<usize> = places.iter().map(|p| p.node).collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len()
        };
        if used_nodes > 1 {
            assumptions.push(Assumption::HwlocDistances);
        }
        Ok(Topology::assemble(Raw {
            places,
            caches,
            distances: None,
            assumptions,
            source: TopologySource::Hwloc,
        }))
    }
}

/// The cache `object` is, if it is one.
fn cache_desc(object: &TopologyObject) -> Option<CacheDesc> {
    let instruction = match object.object_type() {
        ObjectType::L1Cache
        | ObjectType::L2Cache
        | ObjectType::L3Cache
        | ObjectType::L4Cache
        | ObjectType::L5Cache => false,
        ObjectType::L1iCache | ObjectType::L2iCache | ObjectType::L3iCache => true,
        _ => return None,
    };
    let attributes = object.cache_attributes()?;
    // SAFETY: `_type` is hwloc2's `#[repr(C)]` mirror of the C enum `hwloc_obj_cache_type_e`,
    // which has the size and representation of a C `int`; reading it as one reads the value hwloc
    // stored (0 unified, 1 data, 2 instruction) without naming the unexported Rust enum.
    let raw_type = unsafe { std::ptr::addr_of!(attributes._type).cast::<std::os::raw::c_int>().read() };
    let kind = match (instruction, raw_type) {
        (true, _) | (_, 2) => CacheKind::Instruction,
        (false, 1) => CacheKind::Data,
        _ => CacheKind::Unified,
    };
    Some(CacheDesc {
        level: u8::try_from(attributes.depth()).ok().filter(|&l| l >= 1)?,
        kind,
        size: attributes.size(),
        line_size: attributes.linesize,
    })
}

#[cfg(test)]
mod tests {
    use crate::{CacheKind, Topology, TopologySource};

    #[test]
    fn hwloc_topology_is_well_formed() {
        let t = Topology::detect_hwloc().expect("hwloc loads on this machine");
        assert_eq!(t.source(), &TopologySource::Hwloc);
        assert!(t.num_processors() >= 1);
        for p in 0..t.num_processors() {
            for cache in t.caches_of(p) {
                assert!(cache.processors.contains(&p));
                assert!(cache.size > 0 && cache.line_size > 0 && cache.level >= 1);
                assert_ne!(cache.kind, CacheKind::Instruction, "hwloc filters instruction caches by default");
            }
            let mut all: Vec<usize> = t.distance_groups(p).iter().flatten().copied().collect();
            all.sort_unstable();
            assert_eq!(all, (0..t.num_processors()).filter(|&q| q != p).collect::<Vec<_>>());
        }
    }

    /// hwloc and sysfs describe this machine the same way: processors (CPU, core, node), nodes,
    /// and the data and unified caches (level, kind, size, line size, sharers).
    #[test]
    fn hwloc_agrees_with_sysfs() {
        let sysfs = Topology::detect();
        if sysfs.source() != &TopologySource::Sysfs {
            return; // nothing to compare with
        }
        let hwloc = Topology::detect_hwloc().expect("hwloc loads on this machine");
        assert_eq!(
            hwloc.processors(),
            sysfs.processors(),
            "processors (CPU, core, node)\n{hwloc:#}\n{sysfs:#}"
        );
        assert_eq!(hwloc.num_nodes(), sysfs.num_nodes());
        for node in 0..sysfs.num_nodes() {
            assert_eq!(hwloc.processors_in_node(node), sysfs.processors_in_node(node));
        }
        let data = |t: &Topology| {
            t.caches()
                .iter()
                .filter(|c| c.kind != CacheKind::Instruction)
                .map(|c| (c.level, c.kind, c.size, c.line_size, c.processors.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(data(&hwloc), data(&sysfs), "caches\n{hwloc:#}\n{sysfs:#}");
        for p in 0..sysfs.num_processors() {
            assert_eq!(hwloc.distance_groups(p), sysfs.distance_groups(p), "processor {p}");
        }
        assert_eq!(hwloc.model_cache(), sysfs.model_cache());
    }
}
