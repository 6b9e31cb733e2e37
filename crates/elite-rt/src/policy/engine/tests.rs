//! Tests of the policy engine: records per needs, the keys and wake targets it computes against the built-in hooks.
use super::*;
use crate::tcb::Chunk;

#[test]
fn records_follow_the_needs() {
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let t = chunk.tcbs().next().expect("a TCB");
    let cache = ModelCache::ASSUMED;
    // Nothing: no record, no source, no model.
    let policy = Policy::no_affinity();
    let nothing = Engine::new(&policy, Needs::NOTHING, &cache, 1);
    let mut local = Local::new(0, &CounterChoice::Detect, &nothing);
    assert!(local.counting.is_none() && nothing.model.get().is_none());
    nothing.on_spawn(t, None);
    local.begin_run();
    local.end_run(t);
    assert_eq!(ult_info(t, Needs::NOTHING).stamp, 0);
    assert_eq!(nothing.sources(), vec![None]);
    // Misses, scripted: 100 misses a run; the record and the clock follow.
    let needs = Needs::MISSES;
    let policy = Policy::reload_transient();
    let affinity = Engine::new(&policy, needs, &cache, 1);
    let script = CounterChoice::scripted(|_| ScriptedSource::new(100));
    let mut local = Local::new(0, &script, &affinity);
    affinity.on_spawn(t, Some(64 << 10));
    for _ in 0..2 {
        local.begin_run();
        local.end_run(t);
    }
    let info = ult_info(t, needs);
    assert_eq!((info.stamp, info.misses, info.footprint_bytes), (2, 100, 64 << 10));
    assert!(info.footprint.lines() > 190.0, "{:?}", info.footprint);
    assert_eq!(local.view().clock, 200);
    assert_eq!(affinity.sources(), vec![Some(SourceKind::Scripted)]);
    // A respawn resets the record.
    affinity.on_spawn(t, None);
    assert_eq!(ult_info(t, needs), UltInfo::new(info.id, info.last_processor));
}

/// No Affinity's keys and a custom policy's view count every entry, yields included;
/// Reload Transient's count the entries of woken ULTs; the other built-in policies, which
/// never read the count, leave it.
#[test]
fn the_entry_count_is_kept_for_those_who_read_it() {
    #[derive(Debug)]
    struct Counting;
    impl crate::policy::Hooks for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn priority(&self, _ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
            here.seq
        }
        fn yield_priority(&self, _ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
            here.seq
        }
    }
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let t = chunk.tcbs().next().expect("a TCB");
    let cache = ModelCache::ASSUMED;
    for policy in [Policy::no_affinity(), Policy::new(Counting), Policy::reload_transient()] {
        let needs = policy.hooks().needs();
        let affinity = Engine::new(&policy, needs, &cache, 1);
        let mut local = Local::new(0, &CounterChoice::Estimated, &affinity);
        affinity.on_spawn(t, None);
        let keys = [local.priority(t), local.yield_priority(t), local.priority(t)];
        match policy.kind() {
            Kind::NoAffinity => assert_eq!(keys, [1, 0, 3]),
            Kind::Custom => assert_eq!(keys, [1, 2, 3]),
            // Reload Transient orders its ties by the entries of woken ULTs.
            Kind::ReloadTransient => assert_eq!(local.seq, 2, "{policy}"),
            _ => assert_eq!(local.seq, 0, "{policy}"),
        }
    }
}

/// `yield_at_zero` answers whether the yield key is 0 for every ULT, and keeps the count as
/// `yield_priority` does (the yield batch's fast path takes one for the other).
#[test]
fn yield_at_zero_is_yield_priority_of_a_zero_key() {
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let t = chunk.tcbs().next().expect("a TCB");
    let cache = ModelCache::ASSUMED;
    for (policy, zero) in
        [(Policy::no_affinity(), true), (Policy::minimum_misses(), true), (Policy::reload_transient(), false)]
    {
        let needs = policy.hooks().needs();
        let affinity = Engine::new(&policy, needs, &cache, 1);
        let mut by_priority = Local::new(0, &CounterChoice::Estimated, &affinity);
        let mut by_zero = Local::new(0, &CounterChoice::Estimated, &affinity);
        affinity.on_spawn(t, None);
        assert_eq!(by_zero.yield_at_zero(), zero, "{policy}");
        if zero {
            assert_eq!(by_priority.yield_priority(t), 0, "{policy}");
            assert_eq!(by_zero.seq, by_priority.seq, "{policy}");
        } else {
            assert_eq!(by_zero.seq, 0, "{policy}: nothing done");
        }
    }
}

/// The lines a declaration keeps are the estimator's count of its bytes, for line sizes a
/// power of two or not, and sizes around line boundaries and up to `usize::MAX`.
#[test]
fn declared_lines_are_the_estimators() {
    for line_size in [64, 128, 1, 48, 100] {
        let model = CacheModel::new(1024, line_size).expect("a model");
        let source = EstimatedSource::new(&model);
        let size = LineSize::new(line_size);
        let mut sizes = vec![0, 1, usize::MAX, usize::MAX - 1, 1 << 20];
        for k in 1..40usize {
            sizes.extend([k * line_size as usize - 1, k * line_size as usize, k * line_size as usize + 1]);
        }
        for bytes in sizes {
            assert_eq!(size.lines(bytes), source.lines(bytes), "{bytes} bytes, lines of {line_size}");
            assert_eq!(size.lines(bytes), model.lines_for(bytes), "{bytes} bytes, lines of {line_size}");
        }
    }
    // The runtime counts in the model's lines where there is one.
    let cache = ModelCache::ASSUMED;
    let policy = Policy::reload_transient();
    let affinity = Engine::new(&policy, Needs::MISSES, &cache, 1);
    assert_eq!(affinity.line_size.bytes, u64::from(affinity.model.get().unwrap().line_size()));
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let t = chunk.tcbs().next().expect("a TCB");
    for needs in [Needs::NOTHING, Needs::MISSES] {
        let engine = affinity.with_policy(&policy, needs);
        engine.on_spawn(t, Some(1000));
        assert_eq!(t.tcb().sched.record.lines.get(), 1000u64.div_ceil(u64::from(cache.line_size)));
    }
    affinity.on_spawn(t, None);
    assert_eq!((t.tcb().sched.record.bytes.get(), t.tcb().sched.record.lines.get()), (0, 0));
}

/// With the estimator, each counting policy's run end (`record_estimated`, chosen for its
/// needs) leaves the records that the source's and the model's own calls give, run after
/// run, for two ULTs taking turns.
#[test]
fn the_estimators_run_end_keeps_the_records_of_the_four_calls() {
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let ults: Vec<TcbRef> = chunk.tcbs().take(2).collect();
    let cache = ModelCache::ASSUMED;
    let model = CacheModel::for_cache(&cache).expect("a model");
    let bytes = [40 << 10, 3000];
    for policy in [Policy::minimum_misses(), Policy::reload_transient(), Policy::gravity()] {
        let needs = policy.hooks().needs();
        let affinity = Engine::new(&policy, needs, &cache, 1);
        let mut local = Local::new(0, &CounterChoice::Estimated, &affinity);
        let mut source = EstimatedSource::new(&model);
        let mut expected = [Footprint::EMPTY; 2];
        let mut words = [0u64; 2];
        for (t, b) in ults.iter().zip(bytes) {
            affinity.on_spawn(*t, Some(b));
        }
        for run in 0..12u64 {
            let i = (run % 2) as usize;
            let t = ults[i];
            local.begin_run();
            local.end_run(t);
            let valid = expected[i].valid_on(&model, 0, source.begin_run());
            let misses = source.end_run(&RunInfo::new(0, bytes[i], valid));
            expected[i].record_run(&model, 0, valid, misses, source.clock());
            let info = ult_info(t, needs);
            assert_eq!((info.misses, info.footprint), (misses, expected[i]), "{policy} run {run}");
            assert_eq!(info.stamp, if needs.stamps { run + 1 } else { 0 }, "{policy}");
            assert_eq!(local.view().clock, source.clock(), "{policy}");
            // The round the runtime keeps itself, for the policies that need rounds.
            if needs.rounds {
                words[i] = rounds::end_run(0, run + 1, words[i]);
            }
            assert_eq!(info.state, words[i], "{policy} run {run}");
        }
        assert!(source.clock() > 0);
    }
}

/// The wake targets the runtime computes itself for each built-in policy, and the policy
/// words it leaves, are those of the same policy's hooks called as a custom policy's, for
/// two processors, hand-offs and other wake-ups, small and large footprints (cached at home
/// or evicted), and wakers sharing declared data or not (gravity's forces).
#[test]
fn the_runtime_wakes_where_the_builtin_hooks_send() {
    use crate::policy::{Gravity, MinimumMisses, NoAffinity, ReloadTransient, VirtualTime};
    use crate::prefetch::DataBlock;
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let mut tcbs = chunk.tcbs();
    let (t, by) = (tcbs.next().unwrap(), tcbs.next().unwrap());
    let cache = ModelCache::ASSUMED;
    let pairs = [
        (Policy::no_affinity(), Policy::new(NoAffinity)),
        (Policy::virtual_time(), Policy::new(VirtualTime)),
        (Policy::minimum_misses(), Policy::new(MinimumMisses)),
        (Policy::reload_transient(), Policy::new(ReloadTransient)),
        (Policy::gravity(), Policy::new(Gravity)),
    ];
    let buf = vec![0u8; 1 << 16];
    let block = |at: usize, len: usize| Some(DataBlock::new(buf[at..].as_ptr(), len));
    let mut cases = 0;
    for (builtin, custom) in &pairs {
        assert_ne!(builtin.wake_rule(), WakeRule::Hook, "{builtin}");
        let needs = builtin.hooks().needs();
        let affinity = Engine::new(builtin, needs, &cache, 2);
        // More than little data declared: never quiet (a quiet home sends a hand-off's ULT to
        // its waker, which the hooks, never quiet, do only within the hand-off rule's lines:
        // `a_quiet_home_sends_a_hand_offs_ult_to_its_waker_whatever_the_line_costs`).
        affinity.note_declared(64 << 10);
        // The same engine (model, published clocks) asking the hooks of `custom`.
        let by_hooks = affinity.with_policy(custom, needs);
        let script =
            CounterChoice::scripted(|_| ScriptedSource::from_fn(|run, _| run.footprint_bytes as u64 / 64));
        let mut locals: Vec<Local> = (0..2).map(|p| Local::new(p, &script, &affinity)).collect();
        for bytes in [1 << 10, 64 << 10] {
            for evicted in [false, true] {
                for (overlap, state) in [(0, 0), (4096, 0x0123_4567_89AB_CDEF), (256, 7 << 44)] {
                    for (home, local) in locals.iter_mut().enumerate() {
                        for waker in [None, Some(0), Some(1)] {
                            for by_ult in [false, true] {
                                affinity.on_spawn(t, Some(bytes));
                                affinity.on_spawn(by, Some(1 << 10));
                                UltBlock::on_spawn(t, block(8192, 8192), &affinity);
                                UltBlock::on_spawn(by, block(8192 + 8192 - overlap, 4096), &affinity);
                                t.tcb().head.processor.store(home, crate::atomics::Ordering::Relaxed);
                                local.begin_run();
                                local.end_run(t);
                                if evicted {
                                    // Another ULT's large run at home: its misses evict `t`.
                                    by.tcb().sched.record.declare(4 << 20, affinity.line_size);
                                    local.begin_run();
                                    local.end_run(by);
                                    by.tcb().sched.record.declare(1 << 10, affinity.line_size);
                                }
                                let by = (by_ult && waker.is_some()).then_some(by);
                                let mut results = Vec::new();
                                for engine in [&affinity, &by_hooks] {
                                    t.tcb().sched.record.state.set(state);
                                    let target = engine.wake_target(t, waker, by);
                                    results.push((target, t.tcb().sched.record.state.get()));
                                }
                                assert_eq!(
                                    results[0], results[1],
                                    "{builtin}: {bytes} bytes, evicted {evicted}, overlap {overlap}, home {home}, waker {waker:?}, by a ULT {by_ult}"
                                );
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 5 * 2 * 2 * 3 * 2 * 3 * 2);
}

/// Virtual Time's run end (inline: stamps and rounds) keeps the stamp and the round that
/// the general one (`record`) keeps, run after run, for two ULTs taking turns.
#[test]
fn virtual_times_inline_run_end_keeps_the_general_records() {
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let ults: Vec<TcbRef> = chunk.tcbs().take(4).collect();
    let policy = Policy::virtual_time();
    let needs = policy.hooks().needs();
    let affinity = Engine::new(&policy, needs, &ModelCache::ASSUMED, 1);
    let mut inline = Local::new(0, &CounterChoice::Detect, &affinity);
    let mut general = Local::new(0, &CounterChoice::Detect, &affinity);
    assert_eq!(inline.end, End::StampAndRound);
    for (i, &t) in ults.iter().enumerate() {
        affinity.on_spawn(t, Some((i % 2 + 1) << 12));
    }
    for run in 0..3000usize {
        let (a, b) = (ults[run % 2], ults[2 + run % 2]);
        if run % 7 == 3 {
            mark_woken(a);
            mark_woken(b);
        }
        inline.begin_run();
        inline.end_run(a);
        general.begin_run();
        general.record(b);
        let (x, y) = (ult_info(a, needs), ult_info(b, needs));
        assert_eq!((x.stamp, x.state), (y.stamp, y.state), "run {run}");
        let (x, y) = (&a.tcb().sched.record, &b.tcb().sched.record);
        assert_eq!(x.lines_clock.get(), y.lines_clock.get(), "run {run}");
    }
    assert_eq!(ult_info(ults[0], needs).stamp, 2999);
    // The declared lines of the 3000 runs (64 and 128 lines in turn), summed.
    assert_eq!(ults[3].tcb().sched.record.lines_clock.get(), 1500 * 64 + 1500 * 128);
}

/// The keys the runtime computes itself for each built-in policy (enqueue and yield) are
/// the ones its hooks give, for ULTs with varied records on two processors (runs here and
/// elsewhere, misses, footprints, rounds, gravity's repelled mark).
#[test]
fn the_runtime_computes_the_keys_the_builtin_hooks_give() {
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let ults: Vec<TcbRef> = chunk.tcbs().take(5).collect();
    let cache = ModelCache::ASSUMED;
    for name in Policy::NAMES {
        let policy: Policy = name.parse().unwrap();
        assert_ne!(policy.kind(), Kind::Custom, "{name}");
        let needs = policy.hooks().needs();
        let affinity = Engine::new(&policy, needs, &cache, 2);
        // Misses that vary with the run and the footprint.
        let script = CounterChoice::scripted(|p| {
            ScriptedSource::from_fn(move |run, n| {
                (run.footprint_bytes as u64 / 64) * (1 + (n + p as u64) % 3)
            })
        });
        let mut locals: Vec<Local> = (0..2).map(|p| Local::new(p, &script, &affinity)).collect();
        for (i, t) in ults.iter().enumerate() {
            affinity.on_spawn(*t, Some(1000 << i));
        }
        let mut checked = 0;
        for run in 0..40usize {
            let (i, p) = (run * 3 % ults.len(), run / 7 % 2);
            let t = ults[i];
            t.tcb().head.processor.store(p, crate::atomics::Ordering::Relaxed);
            locals[p].begin_run();
            locals[p].end_run(t);
            if run % 6 == 5 {
                // Gravity's repelled mark (and, for the others, a bit they do not read).
                let state = &t.tcb().sched.record.state;
                state.set(state.get() ^ (1 << rounds::ROUND_BITS));
            }
            for local in &mut locals {
                for &u in &ults {
                    let info = ult_info(u, needs);
                    let key = local.priority(u);
                    assert_eq!(key, policy.hooks().priority(&info, &local.view()), "{name} run {run}");
                    let key = local.yield_priority(u);
                    assert_eq!(key, policy.hooks().yield_priority(&info, &local.view()), "{name} run {run}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 40 * 2 * ults.len());
    }
}

/// A processor's part follows a policy set on the engine at its next look, once per
/// generation: it takes the new policy's keys and wake rule, keeps its counts, opens a counter
/// source when the new policy needs misses and keeps it (and its clock) across a switch to a
/// policy that needs none; spawns reset records from the first policy that keeps them on.
#[test]
fn a_local_part_follows_the_policy_set_on_the_engine() {
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let t = chunk.tcbs().next().expect("a TCB");
    let cache = ModelCache::ASSUMED;
    let engine = Engine::new(&Policy::no_affinity(), Needs::NOTHING, &cache, 1);
    let script = CounterChoice::scripted(|_| ScriptedSource::new(100));
    let mut local = Local::new(0, &script, &engine);
    assert!(local.follow(&script, &engine).is_none(), "nothing set yet");
    engine.on_spawn(t, None);
    assert_eq!((local.priority(t), local.priority(t)), (1, 2), "No Affinity numbers its entries");
    assert!(local.woken_stay_with_ult_wakers());
    // To Reload Transient: a source opened, a model made, stamps and misses recorded.
    assert_eq!(engine.set_policy(&Policy::reload_transient()), 1);
    assert!(engine.model.get().is_some());
    assert_eq!(engine.selected().policy.name(), "reload-transient");
    assert_eq!(local.follow(&script, &engine), Some(Taken::Policy));
    assert!(local.follow(&script, &engine).is_none(), "once per generation");
    assert!(!local.woken_stay_with_ult_wakers());
    assert_eq!(local.kind, Kind::ReloadTransient);
    assert_eq!(local.seq, 2, "the entry count goes on");
    engine.on_spawn(t, Some(64 << 10));
    local.begin_run();
    local.end_run(t);
    assert_eq!(ult_info(t, local.needs).misses, 100);
    assert_eq!(local.view().clock, 100);
    assert_eq!(engine.sources(), vec![Some(SourceKind::Scripted)]);
    // To Virtual Time and back: the source and its clock stay, the stamps go on.
    engine.set_policy(&Policy::virtual_time());
    assert_eq!(local.follow(&script, &engine), Some(Taken::Policy));
    assert!(local.model.is_none() && local.counting.is_some());
    local.begin_run();
    local.end_run(t);
    assert_eq!(ult_info(t, local.needs).stamp, 2);
    assert_eq!(engine.set_policy(&Policy::reload_transient()), 3);
    assert_eq!(local.follow(&script, &engine), Some(Taken::Policy));
    local.begin_run();
    local.end_run(t);
    assert_eq!(local.view().clock, 200, "the same source, its clock where it was");
    // Policies set again are the ones kept: no new value per switch.
    assert_eq!(engine.board_len(), 3);
}

#[test]
#[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
fn aggregation_domains_are_the_processors_sharing_a_data_cache_with_the_lowest_as_master() {
    let policy = Policy::no_affinity().aggregate(1);
    let mut engine = Engine::new(&policy, Needs::NOTHING, &ModelCache::ASSUMED, 4);
    let topology = elite_affinity::Topology::synthetic("1x4, 512 KiB L2 per core, 4 MiB L3 shared").unwrap();
    engine.place_aggregation(&topology);
    let places = &engine.aggregation;
    assert!(places.iter().all(|p| p.cutoff == 4 << 20), "the largest cache each uses");
    let masters: Vec<bool> = places.iter().map(|p| p.domain.as_ref().unwrap().1).collect();
    assert_eq!(masters, [true, false, false, false]);
    let word = |p: usize| Arc::as_ptr(&places[p].domain.as_ref().unwrap().0);
    assert!((1..4).all(|p| word(p) == word(0)), "one word for the domain");

    // Pairs sharing an L2: two domains; no shared cache at all: none.
    let mut engine = Engine::new(&policy, Needs::NOTHING, &ModelCache::ASSUMED, 4);
    engine.place_aggregation(&elite_affinity::Topology::synthetic("1x2x2, 1 MiB L2 per core").unwrap());
    let places = &engine.aggregation;
    let masters: Vec<bool> = places.iter().map(|p| p.domain.as_ref().unwrap().1).collect();
    assert_eq!(masters, [true, false, true, false]);
    let word = |p: usize| Arc::as_ptr(&places[p].domain.as_ref().unwrap().0);
    assert!(word(0) == word(1) && word(2) == word(3) && word(0) != word(2));
    let mut engine = Engine::new(&policy, Needs::NOTHING, &ModelCache::ASSUMED, 2);
    engine.place_aggregation(&elite_affinity::Topology::synthetic("1x2, 1 MiB L2 per core").unwrap());
    assert!(engine.aggregation.iter().all(|p| p.domain.is_none() && p.cutoff == 1 << 20));
}

/// The quiet mode: with the estimator, once the ULTs declared only little data (at most a
/// sixteenth of the first-level cache: 32 lines of the assumed 32 KiB here), Virtual Time, Minimum Misses and Reload Transient key, yield and end
/// runs as No Affinity does, recording nothing; a larger declaration brings the policy back
/// at the next look, its records going on from where they were. Real counts (a script),
/// Gravity and a runtime where nothing was declared never go quiet.
#[test]
fn little_declared_data_makes_the_affinity_policies_quiet_until_more_is_declared() {
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let t = chunk.tcbs().next().expect("a TCB");
    let cache = ModelCache::ASSUMED;
    // Four lines: little data.
    let little = 4 * 64;
    for policy in [Policy::virtual_time(), Policy::minimum_misses(), Policy::reload_transient()] {
        let needs = policy.hooks().needs();
        let engine = Engine::new(&policy, needs, &cache, 1);
        let mut local = Local::new(0, &CounterChoice::Estimated, &engine);
        assert!(local.follow(&CounterChoice::Estimated, &engine).is_none(), "{policy}: nothing declared");
        assert!(!local.quiet && local.run_hooks().1, "{policy}");
        // Little data declared: quiet at the next look, once.
        engine.on_spawn(t, Some(little));
        assert_eq!(local.follow(&CounterChoice::Estimated, &engine), Some(Taken::Mode), "{policy}");
        assert!(local.follow(&CounterChoice::Estimated, &engine).is_none(), "{policy}");
        assert!(local.quiet && local.run_hooks() == (false, false), "{policy}");
        let seq = local.seq;
        assert_eq!(local.priority(t), no_affinity::key(seq + 1), "{policy}: No Affinity's key");
        assert_eq!(local.yield_priority(t), super::super::DEFAULT_YIELD_KEY, "{policy}");
        assert!(local.yield_at_zero(), "{policy}");
        local.begin_run();
        local.end_run(t);
        let info = ult_info(t, needs);
        assert_eq!((info.stamp, info.misses, info.state), (0, 0, 0), "{policy}: nothing recorded");
        assert!(local.woken_stay_with_ult_wakers() == (policy.wake_rule() == WakeRule::Waker));
        // A larger declaration (64 KiB, 1024 lines): the policy's own keys and records again.
        engine.on_spawn(t, Some(64 << 10));
        assert_eq!(local.follow(&CounterChoice::Estimated, &engine), Some(Taken::Mode), "{policy}");
        assert!(!local.quiet && local.run_hooks() == (false, true), "{policy}");
        local.begin_run();
        local.end_run(t);
        let info = ult_info(t, needs);
        match policy.kind() {
            Kind::MinimumMisses => assert_eq!(info.misses, 1024, "{policy}: cold, every line missed"),
            Kind::ReloadTransient => assert_eq!((info.stamp, info.misses), (1, 1024), "{policy}"),
            _ => assert_eq!(info.stamp, 1, "{policy}"),
        }
        assert_eq!(local.priority(t), policy.hooks().priority(&info, &local.view()), "{policy}: its own key");
    }
    // Never quiet: a script's counts (real ones, as a hardware counter's), Gravity's forces,
    // the aggregation modifier.
    for (policy, counters) in [
        (Policy::reload_transient(), CounterChoice::scripted(|_| ScriptedSource::new(0))),
        (Policy::minimum_misses(), CounterChoice::scripted(|_| ScriptedSource::new(0))),
        (Policy::gravity(), CounterChoice::Estimated),
        (Policy::virtual_time().aggregate(1), CounterChoice::Estimated),
    ] {
        let needs = policy.hooks().needs();
        let engine = Engine::new(&policy, needs, &cache, 1);
        let mut local = Local::new(0, &counters, &engine);
        engine.on_spawn(t, Some(little));
        assert!(local.follow(&counters, &engine).is_none(), "{policy}");
        assert!(!local.quiet, "{policy}");
    }
}

/// Little data is a sixteenth of the first-level data cache, whatever the host's line costs:
/// the quiet mode's signal reads nothing measured. The hand-off rule's line count, which the
/// signal was once measured against, moves with the line costs: 54 lines where this host
/// measured them (a round trip of 197 ns, 10.8 ns a line in a stream), 4 where they could
/// not be measured, so `no_locality`'s 16-line declarations went quiet in one process and not
/// in the other.
#[test]
#[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
fn little_data_is_a_sixteenth_of_the_first_level_cache_measured_or_not() {
    let line = LineSize::new(64);
    assert_eq!(little_data_lines(48 << 10, line), 48);
    assert_eq!(little_data_lines(32 << 10, line), 32);
    assert_eq!(little_data_lines(512, line), 1, "at least one line");
    let measured = crate::sync::HostCosts::scripted(2.0, 2000.0, 197.0, 10.8);
    let unmeasured = measured.unmeasured_lines();
    assert_eq!((measured.hand_off_lines(), unmeasured.hand_off_lines()), (54.0, 4.0));
    // The engine of a runtime on a host with a 48 KiB first-level cache (the topology's, not
    // the assumed 32 KiB it starts with).
    let topology =
        elite_affinity::Topology::synthetic("1x2, 48 KiB L1d per core, 2 MiB L2 per core").unwrap();
    let policy = Policy::virtual_time();
    let mut engine = Engine::new(&policy, policy.hooks().needs(), &topology.model_cache(), 2);
    assert_eq!(engine.little_lines, 32);
    engine.place_little_data(&topology);
    assert_eq!(engine.little_lines, 48);
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let t = chunk.tcbs().next().expect("a TCB");
    assert!(!engine.small_declarations(), "nothing declared");
    engine.on_spawn(t, Some(1 << 10));
    assert!(engine.small_declarations(), "16 lines, measured or not");
    assert!(16.0 <= measured.hand_off_lines() && 16.0 > unmeasured.hand_off_lines(), "the old bound");
    engine.on_spawn(t, Some(48 * 64));
    assert!(engine.small_declarations(), "48 lines");
    engine.on_spawn(t, Some(48 * 64 + 1));
    assert!(!engine.small_declarations(), "49 lines");
}

/// A ULT woken by a hand-off from another processor, to a home in the quiet mode, follows its
/// waker as under No Affinity: little data has nothing at home worth the trip. Declarations of
/// 300 lines are little data on a first-level cache of 512 KiB (512 lines) and above any
/// hand-off line count (256 at most), so the answer is the quiet mode's on any host, measured
/// or not. Past little data the hand-off rule decides again.
#[test]
#[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
fn a_quiet_home_sends_a_hand_offs_ult_to_its_waker_whatever_the_line_costs() {
    let topology =
        elite_affinity::Topology::synthetic("1x2, 512 KiB L1d per core, 2 MiB L2 per core").unwrap();
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let mut tcbs = chunk.tcbs();
    let (t, by) = (tcbs.next().unwrap(), tcbs.next().unwrap());
    for policy in [Policy::virtual_time(), Policy::minimum_misses(), Policy::reload_transient()] {
        let needs = policy.hooks().needs();
        let mut engine = Engine::new(&policy, needs, &topology.model_cache(), 2);
        engine.place_little_data(&topology);
        assert_eq!(engine.little_lines, 512);
        // (Opens each processor's source: the estimator, with which the policies may go quiet.)
        let _locals: Vec<Local> = (0..2).map(|p| Local::new(p, &CounterChoice::Estimated, &engine)).collect();
        engine.on_spawn(t, Some(300 * 64));
        engine.on_spawn(by, Some(64));
        t.tcb().head.processor.store(0, crate::atomics::Ordering::Relaxed);
        assert!(engine.quiet_at(0) && engine.quiet_at(1), "{policy}");
        assert_eq!(engine.wake_target(t, Some(1), Some(by)), 1, "{policy}: a hand-off: its waker's");
        assert_eq!(engine.wake_target(t, Some(1), None), 0, "{policy}: no ULT woke it: home");
        assert_eq!(engine.wake_target(t, None, None), 0, "{policy}: from outside: home");
        // More than little data declared somewhere: the hand-off rule's answer.
        engine.on_spawn(by, Some(513 * 64));
        assert!(!engine.quiet_at(0), "{policy}");
        let follows = hand_off::cached_little(engine.home_lines(t, 0));
        assert_eq!(engine.wake_target(t, Some(1), Some(by)), if follows { 1 } else { 0 }, "{policy}");
        if policy.kind() == Kind::VirtualTime {
            // Its declared 300 lines, more than any host's hand-off line count: home.
            assert_eq!(engine.wake_target(t, Some(1), Some(by)), 0, "{policy}");
        }
    }
}

/// Virtual Time keeps no cache model: the hand-off rule reads a woken ULT's declared lines less
/// what the declared data of the runs ended at its home since its own would have pushed out of
/// the model cache (2 MiB here, 32 768 lines). Its 1024 lines stay home while 31 runs of 64 KiB
/// followed it there, half are left after 31.5, none after 32: then a crossing hand-off takes it
/// to its waker, as for a policy whose model has seen its lines evicted. Runs elsewhere do not
/// count, and a run of its own at home starts the count again.
#[test]
#[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
fn virtual_times_home_lines_decay_by_the_data_run_at_home_since() {
    let topology =
        elite_affinity::Topology::synthetic("1x2, 48 KiB L1d per core, 2 MiB L2 per core").unwrap();
    let policy = Policy::virtual_time();
    let mut engine = Engine::new(&policy, policy.hooks().needs(), &topology.model_cache(), 2);
    engine.place_little_data(&topology);
    let shared = Arc::new(());
    let chunk = Chunk::allocate(&shared);
    let mut tcbs = chunk.tcbs();
    let (t, by, other, half) =
        (tcbs.next().unwrap(), tcbs.next().unwrap(), tcbs.next().unwrap(), tcbs.next().unwrap());
    engine.on_spawn(t, Some(64 << 10));
    engine.on_spawn(by, Some(64 << 10));
    engine.on_spawn(other, Some(64 << 10));
    engine.on_spawn(half, Some(32 << 10));
    let mut locals: Vec<Local> = (0..2).map(|p| Local::new(p, &CounterChoice::Estimated, &engine)).collect();
    assert!(!engine.quiet_at(1), "64 KiB is not little data");
    assert!(hand_off::hand_off_lines() < 512.0, "the line count is at most 256");
    let end_on = |locals: &mut Vec<Local>, p: usize, u: TcbRef| {
        u.tcb().head.processor.store(p, crate::atomics::Ordering::Relaxed);
        locals[p].begin_run();
        locals[p].end_run(u);
    };
    end_on(&mut locals, 1, t);
    assert_eq!(engine.home_lines(t, 1), 1024.0);
    for _ in 0..31 {
        end_on(&mut locals, 1, other);
        end_on(&mut locals, 0, by);
    }
    assert_eq!(engine.home_lines(t, 1), 1024.0, "31 sets of 64 KiB since: still all cached");
    assert_eq!(engine.wake_target(t, Some(0), Some(by)), 1, "a crossing hand-off: home");
    end_on(&mut locals, 1, half);
    assert_eq!(engine.home_lines(t, 1), 512.0, "31.5 sets since: half of it");
    end_on(&mut locals, 1, half);
    assert_eq!(engine.home_lines(t, 1), 0.0, "32 sets since: none");
    assert_eq!(engine.wake_target(t, Some(0), Some(by)), 0, "a crossing hand-off: its waker's");
    assert_eq!(engine.wake_target(t, Some(0), None), 1, "no ULT woke it: home");
    end_on(&mut locals, 1, t);
    assert_eq!(engine.home_lines(t, 1), 1024.0, "its own run at home: all cached again");
    assert_eq!(engine.wake_target(t, Some(0), Some(by)), 1);
}

/// The declared range: none before a declaration (0 bytes is none), then the smallest and the
/// largest; a largest whose smallest is not there (another thread's declaration, half seen)
/// counts as both.
#[test]
fn the_declared_range_is_the_smallest_and_the_largest() {
    let policy = Policy::reload_transient();
    let engine = Engine::new(&policy, policy.hooks().needs(), &ModelCache::ASSUMED, 1);
    assert_eq!(engine.declared_range(), None);
    engine.note_declared(0);
    assert_eq!(engine.declared_range(), None);
    engine.note_declared(64 << 10);
    assert_eq!(engine.declared_range(), Some((64 << 10, 64 << 10)));
    engine.note_declared(4 << 10);
    engine.note_declared(16 << 10);
    assert_eq!(engine.declared_range(), Some((4 << 10, 64 << 10)));
    engine.note_declared(1 << 20);
    assert_eq!(engine.declared_range(), Some((4 << 10, 1 << 20)));
    // (A selector that read the largest of a declaration before its smallest.)
    engine.smallest_declared.store(usize::MAX, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(engine.declared_range(), Some((1 << 20, 1 << 20)));
}
