//! Tests of topology assembly, detection from a fake sysfs, synthetic shapes and caches.

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
    let topology = Topology::shaped_on(&base, &Shape::plain(2, 3));
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
        assert_eq!(p.core, i, "a synthetic processor without threads is a core of its own");
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
    assert_eq!(
        err.to_string(),
        "cannot parse topology \"2y2\": expected \"nodes\", \"cores\", \"processors\" or \"threads\" \
         after a count, found \"y\" at byte 1 (specs look like \"2x2\", \"2 nodes x 4 cores x 2 threads\" or \
         \"2 nodes x 2 cores, 2 MiB L2 per core, 32 MiB L3 per node\")"
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
    let base = Topology::shaped_on(&base_on(&[0, 1]), &Shape::plain(2, 2));
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
    let base = Topology::shaped_on(&base_on(&[0, 1]), &Shape::plain(2, 1)).with_processors(4).expect("valid");
    assert_eq!(nodes_of(&base), vec![0, 1, 0, 1]);
    let two = base.with_processors(2).expect("valid");
    assert_eq!(nodes_of(&two), vec![0, 1]);
}

#[test]
fn with_processors_grows_round_robin() {
    let base = Topology::shaped_on(&base_on(&[2, 5, 7]), &Shape::plain(3, 1));
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
    let one = Topology::shaped_on(&base_on(&[0]), &Shape::plain(1, 1));
    assert_eq!(one.to_string(), "1 node x 1 processor (synthetic on CPU 0)");
    let wide = Topology::shaped_on(&base_on(&[0, 1, 2, 3, 8, 10, 11]), &Shape::plain(1, 7));
    assert_eq!(wide.to_string(), "1 node x 7 processors (synthetic on CPUs 0-3,8,10,11)");
    assert_eq!(TopologySource::Fallback.to_string(), "fallback");
}

#[test]
fn detect_caches_and_distances_from_fake_sysfs() {
    // Two nodes of two cores of two threads; L1d/L1i/L2 per core, L3 per node; distances 10/21.
    let fake = FakeSysfs::new();
    fake.write("cpu/online", "0-7\n")
        .write("node/node0/cpulist", "0-1,4-5\n")
        .write("node/node1/cpulist", "2-3,6-7\n")
        .write("node/node0/distance", "10 21\n")
        .write("node/node1/distance", "21 10\n");
    for cpu in 0..8 {
        // SMT siblings are cpu and cpu + 4, as Linux numbers them on x86.
        let core = cpu % 4;
        let sibling = format!("{},{}", core, core + 4);
        let node_cpus = if core < 2 { "0-1,4-5" } else { "2-3,6-7" };
        fake.core(cpu, core / 2, core % 2)
            .cache(cpu, 0, 1, "Data", "48K", &sibling)
            .cache(cpu, 1, 1, "Instruction", "32K", &sibling)
            .cache(cpu, 2, 2, "Unified", "2048K", &sibling)
            .cache(cpu, 3, 3, "Unified", "32M", node_cpus);
    }
    let t = detect_in(&fake.root, None);
    assert_eq!(t.assumptions(), &[], "everything was there");
    assert_eq!(cpus_of(&t), vec![0, 1, 4, 5, 2, 3, 6, 7], "by node, then CPU");
    assert_eq!(nodes_of(&t), vec![0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(t.processors().iter().map(|p| p.core).collect::<Vec<_>>(), vec![0, 1, 0, 1, 2, 3, 2, 3]);
    assert_eq!(t.num_cores(), 4);
    assert_eq!(t.node_distance(0, 1), 21);
    assert_eq!(t.node_distance(1, 1), 10);
    // 4 cores x (L1d, L1i, L2) + 2 L3.
    assert_eq!(t.caches().len(), 14);
    let of0: Vec<(u8, CacheKind, Vec<usize>)> =
        t.caches_of(0).map(|c| (c.level, c.kind, c.processors.clone())).collect();
    assert_eq!(
        of0,
        vec![
            (1, CacheKind::Data, vec![0, 2]),
            (1, CacheKind::Instruction, vec![0, 2]),
            (2, CacheKind::Unified, vec![0, 2]),
            (3, CacheKind::Unified, vec![0, 1, 2, 3]),
        ]
    );
    // CPU 0 (processor 0): its SMT sibling (CPU 4 = processor 2), then the L3 (node), then node 1.
    assert_eq!(t.distance_groups(0), &[vec![2], vec![1, 3], vec![4, 5, 6, 7]]);
    assert_eq!(t.distance_groups(5), &[vec![7], vec![4, 6], vec![0, 1, 2, 3]]);
    let model = t.model_cache();
    assert_eq!((model.size, model.line_size, model.level), (2 << 20, 64, Some(2)));
    assert_eq!(model.choice, ModelCacheChoice::PrivateToCore);
    assert_eq!(
        format!("{t:#}"),
        "2 nodes x 4 processors (sysfs on CPUs 0-7)\n  \
         L1d 48 KiB (64-byte lines) x4, each shared by 2 processors\n  \
         L1i 32 KiB (64-byte lines) x4, each shared by 2 processors\n  \
         L2 2 MiB (64-byte lines) x4, each shared by 2 processors\n  \
         L3 32 MiB (64-byte lines) x2, each shared by 4 processors\n  \
         node distances: 10 21; 21 10\n  \
         model cache: L2 2 MiB, 64-byte lines (32768 lines), private to a core"
    );

    // Masked to CPUs 0, 2 and 4: the L3 of node 1 keeps only CPU 2; caches keep their sizes.
    let masked = detect_in(&fake.root, Some(&[0, 2, 4]));
    assert_eq!(cpus_of(&masked), vec![0, 4, 2]);
    assert_eq!(masked.distance_groups(0), &[vec![1], vec![2]]);
    assert_eq!(masked.caches().iter().filter(|c| c.level == 3).count(), 2);
}

#[test]
fn fake_sysfs_without_caches_or_nodes_says_what_it_assumed() {
    let fake = FakeSysfs::new();
    fake.write("cpu/online", "0-3\n").core(0, 0, 0).core(1, 0, 1);
    fake.cache(0, 0, 2, "Unified", "1024K", "0");
    fake.write("cpu/cpu0/cache/index0/coherency_line_size", "\n");
    let t = detect_in(&fake.root, None);
    assert_eq!(
        t.assumptions(),
        &[
            Assumption::OneNode,
            Assumption::OwnCores(vec![2, 3]),
            Assumption::NoCaches(vec![1, 2, 3]),
            Assumption::LineSize,
        ]
    );
    assert_eq!(
        t.assumptions().iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![
            "no NUMA node information: every processor in one node",
            "no core information for CPUs 2,3: each its own core",
            "no cache information for CPUs 1-3: no shared caches",
            "caches without a line size: 64 bytes",
        ]
    );
    // Only CPU 0 has a private cache: the others have none, so the nearest cache is used.
    let model = t.model_cache();
    assert_eq!((model.size, model.line_size, model.choice), (1 << 20, 64, ModelCacheChoice::NearestShared));

    // Two nodes without distance files.
    let fake = FakeSysfs::new();
    fake.write("cpu/online", "0-1").write("node/node0/cpulist", "0").write("node/node1/cpulist", "1");
    let t = detect_in(&fake.root, None);
    assert!(t.assumptions().contains(&Assumption::NodeDistances), "{:?}", t.assumptions());
    assert_eq!((t.node_distance(0, 1), t.node_distance(1, 1)), (20, 10));
    assert_eq!(t.model_cache(), ModelCache::ASSUMED);
    assert_eq!(
        t.model_cache().to_string(),
        "1 MiB, 64-byte lines (16384 lines), assumed (the topology describes no cache)"
    );
}

#[test]
fn synthetic_caches_and_threads() {
    let t = Topology::shaped_on(
        &base_on(&[0, 1]),
        &parse_shape(
            "2 nodes x 2 cores x 2 threads, 32 KiB L1d per thread, 2 MiB L2 per core, 32 MiB L3 per node",
        )
        .expect("valid"),
    );
    assert_eq!(t.num_processors(), 8);
    assert_eq!(t.num_cores(), 4);
    assert_eq!(t.processors().iter().map(|p| p.core).collect::<Vec<_>>(), vec![0, 0, 1, 1, 2, 2, 3, 3]);
    assert_eq!(cpus_of(&t), vec![0, 1, 0, 1, 0, 1, 0, 1]);
    assert_eq!(t.caches().len(), 8 + 4 + 2);
    // The L1d is private to one processor: no group; the L2 groups the core; the L3 the node.
    assert_eq!(t.distance_groups(0), &[vec![1], vec![2, 3], vec![4, 5, 6, 7]]);
    assert_eq!(t.distance_groups(6), &[vec![7], vec![4, 5], vec![0, 1, 2, 3]]);
    let model = t.model_cache();
    assert_eq!((model.size, model.level, model.choice), (2 << 20, Some(2), ModelCacheChoice::PrivateToCore));
    assert_eq!(
        t.source(),
        &TopologySource::Synthetic(
            "2x2x2, 32 KiB L1d per processor, 2 MiB L2 per core, 32 MiB L3 per node".to_string()
        )
    );
    assert!(t.assumptions().is_empty());

    // A machine-wide cache spanning both nodes comes before the rest of the node.
    let t = Topology::shaped_on(&base_on(&[0]), &parse_shape("2x2, 8 MiB L3 shared").expect("valid"));
    assert_eq!(t.distance_groups(0), &[vec![1, 2, 3]]);
    assert_eq!(t.model_cache().choice, ModelCacheChoice::NearestShared);
    assert_eq!(t.caches()[0].processors, vec![0, 1, 2, 3]);
}

#[test]
fn with_processors_keeps_caches() {
    let t = Topology::shaped_on(
        &base_on(&[0, 1]),
        &parse_shape("2 nodes x 2 cores, 2 MiB L2 per core, 32 MiB L3 per node").expect("valid"),
    );
    let three = t.with_processors(3).expect("valid");
    assert_eq!(three.caches().len(), 3 + 2, "three L2, two L3");
    assert_eq!(three.distance_groups(0), &[vec![1], vec![2]]);
    assert_eq!(three.distance_groups(2), &[vec![0, 1]]);
    // Wrapped: processor 4 runs where processor 0 does and shares all its caches.
    let six = t.with_processors(6).expect("valid");
    assert_eq!(six.caches().len(), 4 + 2);
    assert_eq!(six.processor(4).core, six.processor(0).core);
    assert_eq!(six.distance_groups(0), &[vec![4], vec![1, 5], vec![2, 3]]);
    assert_eq!(six.model_cache().size, 2 << 20, "still private to one core");
    assert_eq!(six.with_processors(4).expect("valid"), t, "shrinking back restores the original");
}

#[test]
fn distance_tiers() {
    // Four nodes in a ring: 0-1 and 2-3 close (12), across far (30).
    let places = (0..4).map(|node| Place { cpu: node, core: node, node, caches: vec![] }).collect();
    #[rustfmt::skip]
    let matrix = vec![
        10, 12, 30, 30,
        12, 10, 30, 30,
        30, 30, 10, 12,
        30, 30, 12, 10,
    ];
    let t = Topology::assemble(Raw {
        places,
        caches: vec![],
        distances: Some(((0..4).collect(), matrix)),
        assumptions: vec![],
        source: TopologySource::Sysfs,
    });
    assert_eq!(t.distance_groups(0), &[vec![1], vec![2, 3]]);
    assert_eq!(t.distance_groups(3), &[vec![2], vec![0, 1]]);
}

#[test]
fn distance_groups_partition_the_others() {
    for spec in [
        "1",
        "3x1",
        "2x2",
        "2 nodes x 3 cores x 2 threads, 1 MiB L2 per core, 8 MiB L3 per node",
        "3x4, 64 KiB L1 per processor, 4 MiB L3 per machine",
    ] {
        let t = Topology::shaped_on(&base_on(&[0, 1]), &parse_shape(spec).expect("valid"));
        for p in 0..t.num_processors() {
            let mut all: Vec<usize> = t.distance_groups(p).iter().flatten().copied().collect();
            assert!(t.distance_groups(p).iter().all(|g| !g.is_empty() && g.windows(2).all(|w| w[0] < w[1])));
            all.sort_unstable();
            let others: Vec<usize> = (0..t.num_processors()).filter(|&q| q != p).collect();
            assert_eq!(all, others, "{spec:?} processor {p}");
        }
    }
}

#[test]
fn detect_on_this_machine_reads_caches() {
    let machine = Topology::detect();
    if machine.source() != &TopologySource::Sysfs {
        return;
    }
    // Every processor's caches name it, and a cache's processors are real.
    for p in 0..machine.num_processors() {
        for cache in machine.caches_of(p) {
            assert!(cache.processors.contains(&p));
            assert!(cache.size > 0 && cache.line_size > 0);
        }
    }
    let has_cache_dir = Path::new(SYSFS_ROOT).join("cpu/cpu0/cache").exists();
    let allowed_cpu0 = machine.processors().iter().any(|p| p.cpu == 0);
    if has_cache_dir && allowed_cpu0 {
        assert!(!machine.caches().is_empty(), "{machine:#}");
        assert_ne!(machine.model_cache().choice, ModelCacheChoice::Assumed);
    }
}
