use super::*;

const GB: f64 = 1e9;

fn sig(memory: f64, llc: f64, l2: f64) -> Signals {
    Signals { memory: memory * GB, llc: llc * GB, l2: l2 * GB, scaling2: None }
}

fn m(group: usize, class: Class, cores: usize) -> Member {
    Member { group, class, cores, intensity: 0.0 }
}

#[test]
fn the_decision_tree_at_its_thresholds() {
    let t = Thresholds::seed(10.0 * GB); // g = 3.5 GB/s, d = 0.25
                                         // Memory traffic just above g: L when the LLC serves under a quarter of the L2's refills.
    assert_eq!(classify(&sig(3.6, 4.7, 5.0), &t), Class::L); // share 0.234
    assert_eq!(classify(&sig(3.6, 4.9, 5.0), &t), Class::LC); // share 0.265
                                                              // At g exactly the link is not heavy: the L2 test decides.
    assert_eq!(classify(&sig(3.5, 4.0, 10.0), &t), Class::C); // 0.4 of L1 refills beyond L2
    assert_eq!(classify(&sig(3.5, 4.0, 20.0), &t), Class::N); // 0.2: private caches
                                                              // LLC traffic at or under g is not heavy use of the LLC.
    assert_eq!(classify(&sig(0.0, 3.5, 3.5), &t), Class::N);
    assert_eq!(classify(&sig(0.0, 3.6, 3.6), &t), Class::C);
    assert_eq!(classify(&Signals::default(), &t), Class::N);
}

#[test]
fn scripted_signals_drive_classification_and_reclassification() {
    let t = Thresholds::seed(10.0 * GB);
    let mut source = ScriptedSignals::new()
        .group(0, [sig(6.0, 6.0, 6.0)])
        .group(1, [sig(0.1, 8.0, 9.0), sig(0.1, 8.0, 9.0), sig(6.0, 6.0, 6.0), sig(6.0, 6.0, 6.0)]);
    let mut c = Classifier::new(t);
    let mut seen = Vec::new();
    for _ in 0..4 {
        for g in 0..2 {
            let s = source.signals(&Window { group: g, ..Window::default() });
            if let Some(class) = c.observe(g, &s) {
                seen.push((g, class));
            }
        }
    }
    // Group 1 starts as C and becomes L after two windows that say L.
    assert_eq!(seen, [(0, Class::L), (1, Class::C), (1, Class::L)]);
}

#[test]
fn l_groups_get_the_cores_the_link_allows() {
    let t = Thresholds::seed(10.0 * GB);
    let at = |mem: f64, cores| predict_cores(Class::L, &sig(mem, mem, mem), &t, cores);
    assert_eq!(at(2.0, 8), 5); // 5 x 2 = 10 <= 11.5; 6 x 2 = 12 > 11.5
    assert_eq!(at(5.0, 8), 2);
    assert_eq!(at(12.0, 8), 1); // never below one
    assert_eq!(at(2.0, 2), 2); // never above the domain
}

#[test]
fn cache_groups_follow_the_seed_relations_from_the_probe() {
    let t = Thresholds::seed(10.0 * GB);
    let probe = |s2: f64| Signals { scaling2: Some(s2), ..Signals::default() };
    // Scaling 0.6 on two cores: 83% of ideal at 2; the 3-core relation predicts 68%.
    assert_eq!(predict_cores(Class::C, &probe(0.6), &t, 8), 2);
    // Scaling 0.75: 67% of ideal already at two cores.
    assert_eq!(predict_cores(Class::C, &probe(0.75), &t, 8), 1);
    assert_eq!(predict_cores(Class::LC, &probe(0.75), &t, 2), 1);
    // An LC group at its relation's intercept scales to all 8 cores of the seed's machine.
    let f = factor_from_scaling(Class::LC, 0.50119).unwrap();
    assert!(f.abs() < 1e-9);
    assert_eq!(predict_cores(Class::LC, &probe(0.50119), &t, 8), 8);
    // Without a probe: at most two cores.
    assert_eq!(predict_cores(Class::C, &Signals::default(), &t, 8), 2);
    assert_eq!(predicted_scaling(Class::N, 1.0, 2), None);
    assert_eq!(predicted_scaling(Class::C, 0.0, 9), None);
}

fn check_plan(members: &[Member], plan: &[Slot], cores: usize) {
    let class_of = |g: usize| members.iter().find(|m| m.group == g).unwrap().class;
    for slot in plan {
        assert!(!slot.runs.is_empty() && slot.runs.len() <= 2, "{plan:?}");
        assert_eq!(slot.runs.iter().map(|r| r.1).sum::<usize>(), cores, "{plan:?}");
        if let [(a, _), (b, _)] = slot.runs[..] {
            assert_ne!(a, b);
            assert!(class_of(a).may_pair(class_of(b)), "{plan:?}");
        }
    }
    for mm in members {
        assert!(
            plan.iter().any(|s| s.groups().any(|g| g == mm.group)),
            "group {} missing: {plan:?}",
            mm.group
        );
    }
}

#[test]
fn lcn_pairs_on_two_cores() {
    // The experiment's mix: gemm (N), triad (L, 1 core), stencil (C, 2 cores), spin (N).
    let members = [m(0, Class::N, 2), m(1, Class::L, 1), m(2, Class::C, 2), m(3, Class::N, 2)];
    let plan = pair_lcn(&members, 2);
    check_plan(&members, &plan, 2);
    let runs: Vec<_> = plan.iter().map(|s| s.runs.clone()).collect();
    // gemm's halves take the triad and the spin's second half; the spin's first half finds no
    // partner (the stencil's two cores do not fit beside it) and runs alone, as does the stencil.
    assert_eq!(runs, [vec![(0, 1), (1, 1)], vec![(0, 1), (3, 1)], vec![(3, 2)], vec![(2, 2)]]);
}

#[test]
fn lcn_never_pairs_the_link_with_the_cache_on_synthetic_shapes() {
    use Class::*;
    let classes = [L, L, LC, LC, C, C, N, N, N];
    for cores in [2, 4, 8, 16] {
        for n in 1..=classes.len() {
            // Every rotation of the class list, predicted cores varying with the index.
            for r in 0..classes.len() {
                let members: Vec<Member> =
                    (0..n).map(|i| m(i, classes[(i + r) % classes.len()], 1 + (i * 3 + r) % cores)).collect();
                check_plan(&members, &pair_lcn(&members, cores), cores);
            }
        }
    }
}

#[test]
fn the_seed_shape_eight_cores() {
    use Class::*;
    // An 8-core package: an L group limited to 2 cores, an LC group to 4, a C group to 6 and an
    // N group (all 8, halved to 4 and scheduled twice).
    let members = [m(0, L, 2), m(1, LC, 4), m(2, C, 6), m(3, N, 8)];
    let plan = pair_lcn(&members, 8);
    check_plan(&members, &plan, 8);
    let runs: Vec<_> = plan.iter().map(|s| s.runs.clone()).collect();
    // N's first half takes the L group (C's 6 does not fit beside 4), the pair raised equally
    // to 5 + 3; N's second half takes the LC group; the C group is left alone.
    assert_eq!(runs, [vec![(3, 5), (0, 3)], vec![(3, 4), (1, 4)], vec![(2, 8)]]);
}

#[test]
fn gang_and_miss_balance() {
    use Class::*;
    let mut members = [m(0, L, 1), m(1, C, 2), m(2, N, 2), m(3, C, 2)];
    let g = gang(&members, 4);
    assert_eq!(
        g.iter().map(|s| s.runs.clone()).collect::<Vec<_>>(),
        (0..4).map(|i| vec![(i, 4)]).collect::<Vec<_>>()
    );
    for (i, intensity) in [9.0, 1.0, 0.0, 0.5].into_iter().enumerate() {
        members[i].intensity = intensity;
    }
    let mb = miss_balance(&members, 4);
    // The most intense (0) with the least (2); then 1 with 3: two C groups together, which LCN
    // avoids only because it looks at classes.
    let runs: Vec<_> = mb.iter().map(|s| s.runs.clone()).collect();
    assert_eq!(runs, [vec![(0, 1), (2, 3)], vec![(1, 2), (3, 2)]]);
    // An odd group out runs alone.
    assert_eq!(miss_balance(&members[..3], 4).len(), 2);
}

#[test]
fn software_signals_place_traffic_by_footprint() {
    use std::time::Duration;
    let mut s = SoftwareSignals::new(512 << 10, 32 << 20);
    let w = |bytes: u64, footprint: u64| Window {
        group: 0,
        busy: Duration::from_secs(1),
        bytes,
        footprint,
        group_footprint: 2 * footprint,
        probe: Some((100.0, 160.0)),
    };
    let big = s.signals(&w(8_000_000_000, 24 << 20));
    assert_eq!((big.memory, big.llc, big.l2), (8e9, 8e9, 8e9));
    assert_eq!(big.scaling2, Some(0.625));
    let mid = s.signals(&w(8_000_000_000, 4 << 20));
    // A ULT's data that fits the L2 while the group's does not fit the L3: memory still.
    assert_eq!(s.signals(&Window { group_footprint: 40 << 20, ..w(8_000_000_000, 256 << 10) }).memory, 8e9);
    assert_eq!((mid.memory, mid.llc), (0.0, 8e9));
    let small = s.signals(&w(8_000_000_000, 64 << 10));
    assert_eq!((small.memory, small.llc, small.l2), (0.0, 0.0, 8e9));
    assert_eq!(s.signals(&Window::default()), Signals::default());
}

#[test]
#[cfg_attr(miri, ignore = "a timing kernel: under Miri's interpreter its rate says nothing")]
fn stream_bandwidth_is_positive_and_finite() {
    let bw = stream_bandwidth(3 << 20, std::time::Duration::from_millis(2));
    assert!(bw.is_finite() && bw > 1e6, "{bw}");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "builds runtimes: stacks and processors cannot run under Miri, and the host's topology is read from sysfs"
)]
fn the_coscheduler_takes_its_runtimes_cache_sizes_unless_given_some() {
    // A host unlike the build machine: 2 MiB of L2 per core, a 300 MiB L3.
    let spec = "1 node x 2 cores, 48 KiB L1d per core, 2 MiB L2 per core, 300 MiB L3 shared";
    let read = Coscheduler::builder(Mode::Lcn).bandwidth(10.0 * GB).build();
    let _rt =
        crate::Runtime::builder().topology(spec).coschedule(&read).no_chaos().build().expect("a runtime");
    assert_eq!(read.caches(), (2 << 20, 300 << 20));

    let given = Coscheduler::builder(Mode::Lcn).bandwidth(10.0 * GB).caches(256 << 10, 8 << 20).build();
    let _rt =
        crate::Runtime::builder().topology(spec).coschedule(&given).no_chaos().build().expect("a runtime");
    assert_eq!(given.caches(), (256 << 10, 8 << 20));

    // A topology without caches: the documented defaults.
    let bare = Coscheduler::builder(Mode::Lcn).bandwidth(10.0 * GB).build();
    let _rt =
        crate::Runtime::builder().topology("1x2").coschedule(&bare).no_chaos().build().expect("a runtime");
    assert_eq!(bare.caches(), (DEFAULT_L2, DEFAULT_LLC));
}
