//! Groups of ULTs (`elite_rt::Group`): membership at spawn, inheritance, and the per-group
//! counters of `Runtime::stats`.

use elite_rt::{Builder, Group, Runtime};

#[test]
fn a_spawned_ult_joins_its_spawners_group_unless_its_builder_names_another() {
    let rt = Runtime::builder().processors(2).build().unwrap();
    let (a, b) = (Group::new("a"), Group::new("b"));
    let (a2, b2) = (a.clone(), b.clone());
    let seen = rt.block_on(move || {
        let root = elite_rt::current().group();
        let in_a = Builder::new()
            .group(&a2)
            .spawn(move || {
                let own = elite_rt::current().group();
                let child = elite_rt::spawn(|| elite_rt::current().group()).join().unwrap();
                let named = Builder::new().group(&b2).spawn(|| elite_rt::current().group()).unwrap();
                let grandchild =
                    elite_rt::spawn(|| elite_rt::spawn(|| elite_rt::current().group()).join().unwrap());
                (own, child, named.join().unwrap(), grandchild.join().unwrap())
            })
            .unwrap()
            .join()
            .unwrap();
        let plain = elite_rt::spawn(|| elite_rt::current().group()).join().unwrap();
        (root, in_a, plain)
    });
    assert_eq!(seen.0, None, "the root ULT of block_on is in no group");
    assert_eq!(seen.1, (Some(a.clone()), Some(a.clone()), Some(b.clone()), Some(a.clone())));
    assert_eq!(seen.2, None, "a ULT spawned by an ungrouped ULT is in no group");
    // From outside the runtime: only what the builder names.
    let h = Builder::new().group(&b).spawn_on(&rt, || elite_rt::current().group()).unwrap();
    assert_eq!(h.join().unwrap(), Some(b.clone()));
    assert_eq!(rt.spawn(|| elite_rt::current().group()).join().unwrap(), None);
    // The handle's description names the group too.
    let h = Builder::new().group(&a).spawn_on(&rt, || ()).unwrap();
    assert_eq!(h.thread().group(), Some(a.clone()));
    h.join().unwrap();
}

#[test]
fn groups_are_equal_by_identity_not_by_name() {
    let (x, y) = (Group::new("same"), Group::new("same"));
    assert_ne!(x, y);
    assert_eq!(x, x.clone());
    assert_eq!(x.name(), "same");
    assert!(y.id() > x.id());
    assert_eq!(x.to_string(), "same");
}

#[test]
fn stats_count_every_run_of_each_groups_ults() {
    // One processor, no chaos: every resumption of a ULT is one run, counted exactly.
    const ULTS: usize = 3;
    const YIELDS: usize = 10;
    let rt = Runtime::builder().processors(1).no_chaos().build().unwrap();
    let (a, b) = (Group::new("a"), Group::new("b"));
    let (a2, b2) = (a.clone(), b.clone());
    rt.block_on(move || {
        let hs: Vec<_> = (0..ULTS)
            .flat_map(|_| [&a2, &b2])
            .map(|g| {
                Builder::new()
                    .group(g)
                    .spawn(|| {
                        for _ in 0..YIELDS {
                            elite_rt::yield_now();
                        }
                    })
                    .unwrap()
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    let stats = rt.stats();
    assert_eq!(stats.groups.len(), 2, "{:?}", stats.groups);
    for (s, g) in stats.groups.iter().zip([&a, &b]) {
        assert_eq!(&s.group, g);
        assert_eq!(s.runs, (ULTS * (YIELDS + 1)) as u64, "{s:?}");
        assert_eq!(s.migrations, 0, "one processor: nothing migrates");
        assert!(!s.busy.is_zero());
        assert_eq!(s.class, None);
    }
}

#[test]
fn a_group_used_on_two_runtimes_is_counted_on_each_alone() {
    let g = Group::new("shared");
    let one = Runtime::builder().processors(1).no_chaos().build().unwrap();
    let two = Runtime::builder().processors(1).no_chaos().build().unwrap();
    Builder::new().group(&g).spawn_on(&one, elite_rt::yield_now).unwrap().join().unwrap();
    Builder::new().group(&g).spawn_on(&two, || ()).unwrap().join().unwrap();
    assert_eq!(one.stats().groups[0].runs, 2);
    assert_eq!(two.stats().groups[0].runs, 1);
}
