//! Reading the CPU, cache and NUMA layout from Linux sysfs.
//!
//! The files read, all below a root that is `/sys/devices/system` on a real machine:
//!
//! - `cpu/online`: the online CPUs, as a CPU list (`0-3,8,10-11`);
//! - `node/node<N>/cpulist`: the CPUs of NUMA node `N` (absent on kernels without NUMA support,
//!   empty for a node that has memory but no CPU);
//! - `node/node<N>/distance`: node `N`'s distances to every node, in ascending node order;
//! - `cpu/cpu<C>/topology/core_id` and `physical_package_id`: which physical core CPU `C` is;
//! - `cpu/cpu<C>/cache/index<K>/{level,type,size,coherency_line_size,shared_cpu_list}`: the
//!   caches CPU `C` uses, and which CPUs share each.
//!
//! Only the online list is required. What else is missing is reported in [`SysfsMachine`] for the
//! caller to say what it assumed instead. The functions here only read and parse: turning the
//! result into a [`Topology`](crate::Topology) (dense node and core numbers) is the caller's job.

use std::fs;
use std::path::Path;

use crate::topology::CacheKind;

/// The largest CPU id accepted from a CPU list. Kernels name at most a few thousand CPUs; the cap
/// keeps a corrupt range such as `0-4294967295` from allocating gigabytes.
const MAX_CPU_ID: usize = 1 << 16;

/// What sysfs says about the CPUs the caller may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SysfsMachine {
    /// The usable CPUs, ascending.
    pub(crate) cpus: Vec<SysfsCpu>,
    /// Whether the `node` directory could be read at all.
    pub(crate) has_nodes: bool,
    /// `(node ids, row-major distance matrix)` when every node's distance row could be read and
    /// has one entry per node.
    pub(crate) distances: Option<(Vec<usize>, Vec<u32>)>,
}

/// One online CPU as sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SysfsCpu {
    /// The OS CPU id.
    pub(crate) cpu: usize,
    /// The OS NUMA node id, `None` where no node lists this CPU.
    pub(crate) node: Option<usize>,
    /// `(physical_package_id, core_id)`, `None` where the files are missing or unreadable.
    pub(crate) core: Option<(usize, usize)>,
    /// The caches of this CPU that could be read, in `index<K>` order.
    pub(crate) caches: Vec<SysfsCache>,
}

/// One `cache/index<K>` directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SysfsCache {
    pub(crate) level: u8,
    pub(crate) kind: CacheKind,
    /// Bytes.
    pub(crate) size: u64,
    /// `None` where `coherency_line_size` is missing or zero.
    pub(crate) line_size: Option<u32>,
    /// The OS CPU ids sharing this cache, ascending (offline and masked CPUs included).
    pub(crate) shared_with: Vec<usize>,
}
/// Parses a kernel CPU list such as `"0-3,8,10-11"` into sorted, distinct CPU ids.
///
/// Surrounding whitespace (the trailing newline of a sysfs file) is ignored and an empty list is
/// valid (a memory-only node). Returns `None` for anything else that is not a comma-separated list
/// of ids and ascending `a-b` ranges, or that names an id above [`MAX_CPU_ID`].
pub(crate) fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let list = list.trim();
    let mut cpus = Vec::new();
    if list.is_empty() {
        return Some(cpus);
    }
    for item in list.split(',') {
        let (first, last) = match item.split_once('-') {
            Some((a, b)) => (parse_cpu_id(a)?, parse_cpu_id(b)?),
            None => {
                let id = parse_cpu_id(item)?;
                (id, id)
            }
        };
        if first > last {
            return None;
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// One CPU id of a CPU list: decimal digits only, at most [`MAX_CPU_ID`].
fn parse_cpu_id(text: &str) -> Option<usize> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|&id| id <= MAX_CPU_ID)
}

/// Reads the online CPUs below `root` that are also in `allowed` (every online CPU when `allowed`
/// is `None`), in ascending CPU order, with their nodes, cores and caches, and the node distances.
///
/// Returns `None` when the online list cannot be read or parsed, or when no online CPU is allowed:
/// the caller then falls back to a topology that does not come from sysfs.
pub(crate) fn read_machine(root: &Path, allowed: Option<&[usize]>) -> Option<SysfsMachine> {
    let online = parse_cpu_list(&fs::read_to_string(root.join("cpu/online")).ok()?)?;
    let usable: Vec<usize> = match allowed {
        Some(allowed) => online.into_iter().filter(|cpu| allowed.contains(cpu)).collect(),
        None => online,
    };
    if usable.is_empty() {
        return None;
    }
    let node_lists = read_node_lists(root);
    let cpus = usable
        .into_iter()
        .map(|cpu| SysfsCpu {
            cpu,
            node: node_lists
                .as_ref()
                .and_then(|lists| lists.iter().find(|(_, cpus)| cpus.binary_search(&cpu).is_ok()))
                .map(|&(node, _)| node),
            core: read_core(root, cpu),
            caches: read_caches(root, cpu),
        })
        .collect();
    let distances = node_lists.as_ref().and_then(|lists| read_distances(root, lists));
    Some(SysfsMachine { cpus, has_nodes: node_lists.is_some(), distances })
}

/// `(node id, its CPUs)` for every `node/node<N>/cpulist` that can be read and parsed, in
/// ascending node order; `None` when the directory is missing.
fn read_node_lists(root: &Path) -> Option<Vec<(usize, Vec<usize>)>> {
    let entries = fs::read_dir(root.join("node")).ok()?;
    let mut nodes: Vec<(usize, Vec<usize>)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let id = parse_number(name.to_str()?.strip_prefix("node")?)?;
            let list = fs::read_to_string(entry.path().join("cpulist")).ok()?;
            Some((id, parse_cpu_list(&list)?))
        })
        .collect();
    nodes.sort_unstable_by_key(|&(id, _)| id);
    Some(nodes)
}

/// The distance matrix of `nodes` (row-major, in the order of `nodes`), from each node's
/// `distance` file: one number per node, in ascending node order. `None` when a row is missing,
/// has the wrong length, or holds something other than positive numbers.
fn read_distances(root: &Path, nodes: &[(usize, Vec<usize>)]) -> Option<(Vec<usize>, Vec<u32>)> {
    if nodes.is_empty() {
        return None;
    }
    let ids: Vec<usize> = nodes.iter().map(|&(id, _)| id).collect();
    let mut matrix = Vec::with_capacity(ids.len() * ids.len());
    for id in &ids {
        let row = fs::read_to_string(root.join(format!("node/node{id}/distance"))).ok()?;
        let row: Vec<u32> =
            row.split_whitespace().map(|d| d.parse().ok().filter(|&d: &u32| d > 0)).collect::<Option<_>>()?;
        if row.len() != ids.len() {
            return None;
        }
        matrix.extend(row);
    }
    Some((ids, matrix))
}

/// `(physical_package_id, core_id)` of `cpu`, or `None` if either file is missing or does not
/// hold a non-negative number.
fn read_core(root: &Path, cpu: usize) -> Option<(usize, usize)> {
    let dir = root.join(format!("cpu/cpu{cpu}/topology"));
    let read = |file: &str| -> Option<usize> { fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok() };
    Some((read("physical_package_id")?, read("core_id")?))
}

/// The caches of `cpu` that can be read completely (level, type, size and sharing list; the line
/// size may be missing), ordered by their `index<K>` number. Empty where `cache/` is missing.
fn read_caches(root: &Path, cpu: usize) -> Vec<SysfsCache> {
    let Ok(entries) = fs::read_dir(root.join(format!("cpu/cpu{cpu}/cache"))) else {
        return Vec::new();
    };
    let mut indexed: Vec<(usize, SysfsCache)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let index = parse_number(entry.file_name().to_str()?.strip_prefix("index")?)?;
            Some((index, read_cache(&entry.path())?))
        })
        .collect();
    indexed.sort_unstable_by_key(|&(index, _)| index);
    indexed.into_iter().map(|(_, cache)| cache).collect()
}

fn read_cache(dir: &Path) -> Option<SysfsCache> {
    let read = |file: &str| fs::read_to_string(dir.join(file)).ok();
    let level = read("level")?.trim().parse().ok().filter(|&l: &u8| l >= 1)?;
    let kind = match read("type")?.trim() {
        "Data" => CacheKind::Data,
        "Instruction" => CacheKind::Instruction,
        "Unified" => CacheKind::Unified,
        _ => return None,
    };
    let size = parse_size(&read("size")?)?;
    let line_size = read("coherency_line_size").and_then(|l| l.trim().parse().ok()).filter(|&l: &u32| l > 0);
    let shared_with = parse_cpu_list(&read("shared_cpu_list")?)?;
    Some(SysfsCache { level, kind, size, line_size, shared_with })
}

/// A sysfs cache size: digits with an optional `K`, `M` or `G` (binary), such as `"48K"`.
/// `None` for anything else or a size of zero.
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' => (&text[..text.len() - 1], 10),
        b'M' => (&text[..text.len() - 1], 20),
        b'G' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let value: u64 = parse_number(digits)?.try_into().ok()?;
    value.checked_mul(1 << shift).filter(|&size| size > 0)
}

/// Decimal digits only (no sign, no space) as a number.
fn parse_number(text: &str) -> Option<usize> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn cpu_list_forms() {
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list("0\n"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0-1"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("5-5"), Some(vec![5]));
        assert_eq!(parse_cpu_list("\n"), Some(vec![]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        // Out of order and overlapping lists come back sorted and distinct.
        assert_eq!(parse_cpu_list("8,0-2,1"), Some(vec![0, 1, 2, 8]));
        assert_eq!(parse_cpu_list(" 2 - 3 , 7 "), Some(vec![2, 3, 7]));
    }

    #[test]
    fn cpu_list_rejects_garbage() {
        for bad in [
            "a",
            "0-",
            "-3",
            "3-1",
            "0,,1",
            "0-3:2",
            "1.5",
            "+1",
            "0-1-2",
            ",",
            "0-4294967295",
            "99999999999999999999999",
        ] {
            assert_eq!(parse_cpu_list(bad), None, "{bad:?} should be rejected");
        }
    }

    /// A directory tree under the system temp dir that is removed on drop.
    pub(crate) struct FakeSysfs {
        pub(crate) root: PathBuf,
    }

    impl FakeSysfs {
        pub(crate) fn new() -> FakeSysfs {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let root = std::env::temp_dir().join(format!(
                "elite-affinity-sysfs-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(&root).expect("create fake sysfs root");
            FakeSysfs { root }
        }

        pub(crate) fn write(&self, path: &str, contents: &str) -> &FakeSysfs {
            let path = self.root.join(path);
            fs::create_dir_all(path.parent().expect("file has a parent")).expect("create dirs");
            fs::write(path, contents).expect("write fake sysfs file");
            self
        }

        pub(crate) fn core(&self, cpu: usize, package: usize, core: usize) -> &FakeSysfs {
            self.write(&format!("cpu/cpu{cpu}/topology/physical_package_id"), &format!("{package}\n"))
                .write(&format!("cpu/cpu{cpu}/topology/core_id"), &format!("{core}\n"))
        }
    }

    impl Drop for FakeSysfs {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    impl FakeSysfs {
        /// Writes `cpu/cpu<cpu>/cache/index<index>` with the given fields.
        pub(crate) fn cache(
            &self,
            cpu: usize,
            index: usize,
            level: u8,
            kind: &str,
            size: &str,
            shared: &str,
        ) -> &FakeSysfs {
            let dir = format!("cpu/cpu{cpu}/cache/index{index}");
            self.write(&format!("{dir}/level"), &format!("{level}\n"))
                .write(&format!("{dir}/type"), &format!("{kind}\n"))
                .write(&format!("{dir}/size"), &format!("{size}\n"))
                .write(&format!("{dir}/coherency_line_size"), "64\n")
                .write(&format!("{dir}/shared_cpu_list"), &format!("{shared}\n"))
        }
    }

    fn cpu(cpu: usize, node: Option<usize>, core: Option<(usize, usize)>) -> SysfsCpu {
        SysfsCpu { cpu, node, core, caches: Vec::new() }
    }

    #[test]
    fn reads_nodes_and_cores() {
        let fake = FakeSysfs::new();
        fake.write("cpu/online", "0-3\n")
            .write("node/node0/cpulist", "0-1\n")
            .write("node/node1/cpulist", "2-3\n")
            .write("node/possible", "0-1\n")
            .core(0, 0, 0)
            .core(1, 0, 0)
            .core(2, 1, 0);
        let machine = read_machine(&fake.root, None).expect("fake sysfs is readable");
        assert_eq!(
            machine.cpus,
            vec![
                cpu(0, Some(0), Some((0, 0))),
                cpu(1, Some(0), Some((0, 0))),
                cpu(2, Some(1), Some((1, 0))),
                cpu(3, Some(1), None)
            ]
        );
        assert!(machine.has_nodes);
        assert_eq!(machine.distances, None, "no distance files");
        let machine = read_machine(&fake.root, Some(&[3, 1, 7])).expect("two CPUs allowed");
        assert_eq!(
            machine.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(),
            vec![1, 3],
            "only allowed online CPUs are kept"
        );
    }

    #[test]
    fn reads_caches() {
        let fake = FakeSysfs::new();
        fake.write("cpu/online", "0-1")
            .cache(0, 0, 1, "Data", "48K", "0")
            .cache(0, 1, 1, "Instruction", "32K", "0")
            .cache(0, 2, 2, "Unified", "2048K", "0")
            .cache(0, 10, 3, "Unified", "32M", "0-1")
            .write("cpu/cpu0/cache/index3/level", "3\n") // incomplete: no other file
            .write("cpu/cpu0/cache/uevent", "");
        fake.write("cpu/cpu0/cache/index2/coherency_line_size", "0\n");
        let machine = read_machine(&fake.root, None).expect("readable");
        let caches = &machine.cpus[0].caches;
        assert_eq!(
            caches.iter().map(|c| (c.level, c.kind, c.size, c.line_size)).collect::<Vec<_>>(),
            vec![
                (1, CacheKind::Data, 48 << 10, Some(64)),
                (1, CacheKind::Instruction, 32 << 10, Some(64)),
                (2, CacheKind::Unified, 2 << 20, None),
                (3, CacheKind::Unified, 32 << 20, Some(64)),
            ],
            "index order (10 after 2), the incomplete index3 left out, a zero line size unknown"
        );
        assert_eq!(caches[3].shared_with, vec![0, 1]);
        assert!(machine.cpus[1].caches.is_empty());
        assert!(!machine.has_nodes);
    }

    #[test]
    fn reads_distances() {
        let fake = FakeSysfs::new();
        fake.write("cpu/online", "0-2")
            .write("node/node0/cpulist", "0")
            .write("node/node2/cpulist", "1-2")
            .write("node/node0/distance", "10 21\n")
            .write("node/node2/distance", "21 10\n");
        let machine = read_machine(&fake.root, None).expect("readable");
        assert_eq!(machine.distances, Some((vec![0, 2], vec![10, 21, 21, 10])));
        fake.write("node/node2/distance", "21 10 30\n");
        assert_eq!(read_machine(&fake.root, None).expect("readable").distances, None, "row too long");
        fake.write("node/node2/distance", "21 x\n");
        assert_eq!(read_machine(&fake.root, None).expect("readable").distances, None, "garbage");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("48K\n"), Some(48 << 10));
        assert_eq!(parse_size("2048K"), Some(2 << 20));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("512"), Some(512));
        for bad in ["", "K", "0K", "-1K", "1.5M", "12T", "99999999999999999999K"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn missing_files() {
        let fake = FakeSysfs::new();
        assert_eq!(read_machine(&fake.root, None), None, "no online list");
        fake.write("cpu/online", "0-1");
        let machine = read_machine(&fake.root, None).expect("online list alone is enough");
        assert!(machine.cpus.iter().all(|c| c.node.is_none() && c.core.is_none() && c.caches.is_empty()));
        assert!(!machine.has_nodes);
        assert_eq!(read_machine(&fake.root, Some(&[5])), None, "nothing allowed");
        fake.write("cpu/online", "garbage");
        assert_eq!(read_machine(&fake.root, None), None, "unparsable online list");
    }
}
