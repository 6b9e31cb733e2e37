//! Validation of the runtime builder ([`BuildError`]) and of per-ULT stack sizes
//! ([`SpawnError::InvalidStackSize`]).

use elite_rt::{
    BuildError, Builder, Runtime, RuntimeBuilder, SpawnError, MAX_PROCESSORS, MAX_STACK_SIZE, MIN_STACK_SIZE,
};
use std::error::Error as _;

/// Builds and expects an `OutOfRange` error on `field`; returns the error's Display.
fn out_of_range(b: RuntimeBuilder, field: &str, value: usize, min: usize, max: usize) -> String {
    let e = b.build().expect_err("the configuration must be rejected");
    match &e {
        BuildError::OutOfRange { field: f, value: v, min: lo, max: hi } => {
            assert_eq!((*f, *v, *lo, *hi), (field, value, min, max), "{e}");
        }
        other => panic!("expected OutOfRange on `{field}`, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(msg.contains(&format!("`{field}`")), "Display does not name the field: {msg}");
    assert!(msg.contains(&value.to_string()), "Display does not give the value: {msg}");
    assert!(e.source().is_none());
    msg
}

#[test]
fn processors_out_of_range() {
    let msg = out_of_range(Runtime::builder().processors(0), "processors", 0, 1, MAX_PROCESSORS);
    assert!(msg.contains("1..=4096"), "{msg}");
    let msg = out_of_range(Runtime::builder().processors(5000), "processors", 5000, 1, MAX_PROCESSORS);
    assert!(msg.contains("1..=4096"), "{msg}");
    assert_eq!(MAX_PROCESSORS, 4096);
}

#[test]
fn stack_size_out_of_range() {
    let range = format!("{MIN_STACK_SIZE}..={MAX_STACK_SIZE}");
    let msg =
        out_of_range(Runtime::builder().stack_size(1024), "stack_size", 1024, MIN_STACK_SIZE, MAX_STACK_SIZE);
    assert!(msg.contains(&range), "{msg}");
    let msg = out_of_range(
        Runtime::builder().stack_size(2 << 30),
        "stack_size",
        2 << 30,
        MIN_STACK_SIZE,
        MAX_STACK_SIZE,
    );
    assert!(msg.contains(&range), "{msg}");
    // Just outside the bounds.
    out_of_range(
        Runtime::builder().stack_size(MIN_STACK_SIZE - 1),
        "stack_size",
        MIN_STACK_SIZE - 1,
        MIN_STACK_SIZE,
        MAX_STACK_SIZE,
    );
    out_of_range(
        Runtime::builder().stack_size(MAX_STACK_SIZE + 1),
        "stack_size",
        MAX_STACK_SIZE + 1,
        MIN_STACK_SIZE,
        MAX_STACK_SIZE,
    );
}

#[test]
fn queue_and_pool_limits_out_of_range() {
    let cases: [(RuntimeBuilder, &str, usize, usize); 5] = [
        (Runtime::builder().start_queue_limit(0), "start_queue_limit", 0, 1),
        (Runtime::builder().node_start_queue_limit(0), "node_start_queue_limit", 0, 1),
        (Runtime::builder().tcb_pool_limit(1), "tcb_pool_limit", 1, 2),
        (Runtime::builder().stack_pool_limit(0), "stack_pool_limit", 0, 2),
        (Runtime::builder().node_stack_pool_limit(0), "node_stack_pool_limit", 0, 1),
    ];
    for (b, field, value, min) in cases {
        let msg = out_of_range(b, field, value, min, usize::MAX);
        // No upper bound: the message gives the lower one only.
        assert!(msg.contains(&format!("at least {min}")), "{msg}");
    }
    out_of_range(Runtime::builder().stack_pool_limit(1), "stack_pool_limit", 1, 2, usize::MAX);
    let msg = out_of_range(Runtime::builder().spin_rounds(1_000_001), "spin_rounds", 1_000_001, 0, 1_000_000);
    assert!(msg.contains("0..=1000000"), "{msg}");
}

#[test]
#[cfg_attr(
    feature = "sanitizer",
    ignore = "frames with AddressSanitizer's redzones do not fit this test's small stacks"
)]
fn smallest_valid_settings_build_and_run() {
    let rt = Runtime::builder()
        .processors(1)
        .stack_size(MIN_STACK_SIZE)
        .start_queue_limit(1)
        .node_start_queue_limit(1)
        .tcb_pool_limit(2)
        .stack_pool_limit(2)
        .node_stack_pool_limit(1)
        .spin_rounds(0)
        .pin_threads(false)
        .build()
        .expect("the smallest valid settings");
    let sum = rt.block_on(|| {
        (0..100u64)
            .map(|i| elite_rt::spawn(move || i))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum::<u64>()
    });
    assert_eq!(sum, 4950);
    assert_eq!(rt.pin_failures(), 0, "pinning was turned off");
}

#[test]
fn unparsable_topology() {
    let e = Runtime::builder().topology("2y2").build().expect_err("\"2y2\" is not a topology");
    assert!(matches!(e, BuildError::Topology(_)), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("`topology`"), "{msg}");
    assert!(msg.contains("2y2"), "Display does not quote the spec: {msg}");
    assert!(msg.contains("expected"), "Display does not say what was expected: {msg}");
    assert!(msg.contains("2x2"), "Display does not give an example of the expected form: {msg}");
    assert!(e.source().is_some(), "the topology error is the source");

    let e = Runtime::builder().topology("0x2").build().expect_err("no nodes");
    assert!(matches!(e, BuildError::Topology(_)), "{e:?}");
}

#[test]
fn processors_conflicting_with_topology() {
    let e = Runtime::builder().topology("2x2").processors(3).build().expect_err("3 != 2x2");
    match &e {
        BuildError::Conflict { field, reason } => {
            assert_eq!(*field, "processors");
            assert!(reason.contains('3') && reason.contains('4'), "{reason}");
        }
        other => panic!("expected a Conflict, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(msg.contains("`processors`") && msg.contains("2x2"), "{msg}");
    // The order of the builder calls does not matter.
    let e = Runtime::builder().processors(3).topology("2x2").build().expect_err("3 != 2x2");
    assert!(matches!(e, BuildError::Conflict { field: "processors", .. }), "{e:?}");
    // A matching count is fine.
    let rt = Runtime::builder().processors(4).topology("2x2").build().expect("4 == 2x2");
    assert_eq!(rt.processors(), 4);
}

#[test]
fn synthetic_topology_shapes_the_runtime() {
    let rt = Runtime::builder().topology("2x2").build().unwrap();
    assert_eq!(rt.processors(), 4);
    assert_eq!(rt.topology().num_nodes(), 2);
    assert_eq!(rt.policy_name(), "no-affinity");
    let s = rt.stats();
    let nodes: Vec<usize> = s.processors.iter().map(|p| p.node).collect();
    let indices: Vec<usize> = s.processors.iter().map(|p| p.processor).collect();
    assert_eq!(nodes, vec![0, 0, 1, 1]);
    assert_eq!(indices, vec![0, 1, 2, 3]);
    // The long form names the same shape.
    let rt = Runtime::builder().topology("2 nodes x 3 processors").build().unwrap();
    assert_eq!((rt.processors(), rt.topology().num_nodes()), (6, 2));
}

#[test]
fn invalid_ult_stack_sizes() {
    let rt = Runtime::builder().processors(1).build().unwrap();
    let errs = rt.block_on(|| {
        [100, MIN_STACK_SIZE - 1, MAX_STACK_SIZE + 1]
            .map(|size| Builder::new().stack_size(size).spawn(|| ()).unwrap_err())
    });
    for (e, size) in errs.iter().zip([100, MIN_STACK_SIZE - 1, MAX_STACK_SIZE + 1]) {
        assert_eq!(
            *e,
            SpawnError::InvalidStackSize { requested: size, min: MIN_STACK_SIZE, max: MAX_STACK_SIZE }
        );
        let msg = e.to_string();
        assert!(msg.contains("`stack_size`") && msg.contains(&size.to_string()), "{msg}");
    }
    // From outside too, through `spawn_on`.
    let e = Builder::new().stack_size(100).spawn_on(&rt, || ()).unwrap_err();
    assert!(matches!(e, SpawnError::InvalidStackSize { requested: 100, .. }), "{e:?}");
    // Outside a runtime, a bad size is reported (or the missing runtime: both are errors).
    assert!(Builder::new().stack_size(100).spawn(|| ()).is_err());
    // The bounds themselves are accepted.
    let ok = rt.block_on(|| {
        let a = Builder::new().stack_size(MIN_STACK_SIZE).spawn(|| 1).unwrap();
        let b = Builder::new().stack_size(MIN_STACK_SIZE + 1).spawn(|| 2).unwrap(); // rounded up to pages
        a.join().unwrap() + b.join().unwrap()
    });
    assert_eq!(ok, 3);
}

#[test]
fn coop_budget_out_of_range() {
    let msg = out_of_range(Runtime::builder().coop_budget(Some(0)), "coop_budget", 0, 1, u32::MAX as usize);
    assert!(msg.contains("1..=4294967295"), "{msg}");
    // The bounds, and off, are accepted.
    for budget in [Some(1), Some(u32::MAX), None] {
        let rt = Runtime::builder().processors(1).coop_budget(budget).build();
        assert!(rt.is_ok(), "coop_budget({budget:?}) was rejected: {:?}", rt.err());
    }
}
