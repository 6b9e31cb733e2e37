//! Reading the CPU and NUMA layout from Linux sysfs.
//!
//! The files read, all below a root that is `/sys/devices/system` on a real machine:
//!
//! - `cpu/online`: the online CPUs, as a CPU list (`0-3,8,10-11`);
//! - `node/node<N>/cpulist`: the CPUs of NUMA node `N` (absent on kernels without NUMA support,
//!   empty for a node that has memory but no CPU);
//! - `cpu/cpu<C>/topology/core_id` and `physical_package_id`: which physical core CPU `C` is.
//!
//! Only the online list is required. A missing node directory puts every CPU in one node; a missing
//! core file makes the CPU a core of its own. The functions here only read and parse: turning the
//! result into a [`Topology`](crate::Topology) (dense node and core numbers) is the caller's job.

use std::fs;
use std::path::Path;

/// The largest CPU id accepted from a CPU list. Kernels name at most a few thousand CPUs; the cap
/// keeps a corrupt range such as `0-4294967295` from allocating gigabytes.
const MAX_CPU_ID: usize = 1 << 16;

/// One online CPU as sysfs describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SysfsCpu {
    /// The OS CPU id.
    pub(crate) cpu: usize,
    /// The OS NUMA node id, `None` where no node lists this CPU.
    pub(crate) node: Option<usize>,
    /// `(physical_package_id, core_id)`, `None` where the files are missing or unreadable.
    pub(crate) core: Option<(usize, usize)>,
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
/// is `None`), in ascending CPU order.
///
/// Returns `None` when the online list cannot be read or parsed, or when no online CPU is allowed:
/// the caller then falls back to a topology that does not come from sysfs.
pub(crate) fn read_cpus(root: &Path, allowed: Option<&[usize]>) -> Option<Vec<SysfsCpu>> {
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
            node: node_lists.iter().find(|(_, cpus)| cpus.binary_search(&cpu).is_ok()).map(|&(node, _)| node),
            core: read_core(root, cpu),
        })
        .collect();
    Some(cpus)
}

/// `(node id, its CPUs)` for every `node/node<N>/cpulist` that can be read and parsed, in
/// ascending node order. Empty when the directory is missing.
fn read_node_lists(root: &Path) -> Vec<(usize, Vec<usize>)> {
    let Ok(entries) = fs::read_dir(root.join("node")) else {
        return Vec::new();
    };
    let mut nodes: Vec<(usize, Vec<usize>)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let id = name.to_str()?.strip_prefix("node")?;
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let id: usize = id.parse().ok()?;
            let list = fs::read_to_string(entry.path().join("cpulist")).ok()?;
            Some((id, parse_cpu_list(&list)?))
        })
        .collect();
    nodes.sort_unstable_by_key(|&(id, _)| id);
    nodes
}

/// `(physical_package_id, core_id)` of `cpu`, or `None` if either file is missing or does not
/// hold a non-negative number.
fn read_core(root: &Path, cpu: usize) -> Option<(usize, usize)> {
    let dir = root.join(format!("cpu/cpu{cpu}/topology"));
    let read = |file: &str| -> Option<usize> { fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok() };
    Some((read("physical_package_id")?, read("core_id")?))
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
        let cpus = read_cpus(&fake.root, None).expect("fake sysfs is readable");
        assert_eq!(
            cpus,
            vec![
                SysfsCpu { cpu: 0, node: Some(0), core: Some((0, 0)) },
                SysfsCpu { cpu: 1, node: Some(0), core: Some((0, 0)) },
                SysfsCpu { cpu: 2, node: Some(1), core: Some((1, 0)) },
                SysfsCpu { cpu: 3, node: Some(1), core: None },
            ]
        );
        let cpus = read_cpus(&fake.root, Some(&[3, 1, 7])).expect("two CPUs allowed");
        assert_eq!(
            cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(),
            vec![1, 3],
            "only allowed online CPUs are kept"
        );
    }

    #[test]
    fn missing_files() {
        let fake = FakeSysfs::new();
        assert_eq!(read_cpus(&fake.root, None), None, "no online list");
        fake.write("cpu/online", "0-1");
        let cpus = read_cpus(&fake.root, None).expect("online list alone is enough");
        assert!(cpus.iter().all(|c| c.node.is_none() && c.core.is_none()));
        assert_eq!(read_cpus(&fake.root, Some(&[5])), None, "nothing allowed");
        fake.write("cpu/online", "garbage");
        assert_eq!(read_cpus(&fake.root, None), None, "unparsable online list");
    }
}
