//! Property tests of what users hand the runtime as strings and numbers: policy names, every
//! [`RuntimeBuilder`] setting and every [`Builder`] (ULT) setting. A setting out of its range is
//! a [`BuildError`] (or [`SpawnError`]) that names the field, the value and the range; any other
//! configuration builds a runtime that runs ULTs, makes a blocking call and shuts down. Each case
//! that builds or runs something does so under a hang guard.
//!
//! Cases per property: the default given with it, times `ELITE_FUZZ_SCALE` (`.ci/run` raises
//! it), or `PROPTEST_CASES` for every property. A failing case is printed (shrunk) by proptest;
//! it belongs, as a plain test, in the regressions at the end. `ELITE_CHAOS` (the parsing of its
//! value) is a unit property of `config.rs`: setting it here would reach the other tests.

mod common;

use common::hang_guard;
use elite_rt::deadlock::OnDeadlock;
use elite_rt::policy::Policy;
use elite_rt::sync::SpinPolicy;
use elite_rt::{
    BuildError, Builder, CounterChoice, DataBlock, Runtime, RuntimeBuilder, SpawnError, MAX_PROCESSORS,
    MAX_SPARE_THREADS, MAX_STACK_SIZE, MIN_STACK_SIZE,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::Arc;
use std::time::Duration;

/// `default` cases, scaled as the module docs say.
fn config(default: u32) -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u32>().ok());
    let cases =
        env("PROPTEST_CASES").unwrap_or_else(|| default.saturating_mul(env("ELITE_FUZZ_SCALE").unwrap_or(1)));
    // Shrinking a case that builds runtimes is slow: a bounded number of steps.
    Config { cases, failure_persistence: None, max_shrink_iters: 256, ..Config::default() }
}

/// Seconds a case may take before the hang guard fails it (building, running and dropping a
/// runtime takes milliseconds; this is for a hang, never a timing).
const GUARD_SECS: u64 = 60;

/// The smallest stack a ULT of these tests runs on: AddressSanitizer's redzones do not fit the
/// smallest valid stacks, so with the `sanitizer` feature valid smaller sizes are raised to this
/// (invalid ones are still checked as given).
const RUN_STACK: usize = if cfg!(feature = "sanitizer") { 256 << 10 } else { MIN_STACK_SIZE };

/// A `usize` for a setting whose range is `lo..=hi`: around both ends, a few in between, and
/// anything at all (nearly always far out of range); with `valid`, only values in the range.
fn setting(lo: usize, hi: usize, valid: bool) -> BoxedStrategy<usize> {
    if valid {
        return prop_oneof![lo..=lo.saturating_add(4).min(hi), hi.saturating_sub(2).max(lo)..=hi, lo..=hi]
            .boxed();
    }
    prop_oneof![
        3 => lo.saturating_sub(2)..=lo.saturating_add(4).min(hi),
        1 => hi.saturating_sub(2)..=hi.saturating_add(2),
        2 => lo..=hi,
        1 => any::<usize>(),
        1 => Just(usize::MAX),
    ]
    .boxed()
}

/// A duration around a range of `lo_ms..=hi_ms` milliseconds, nanoseconds either side included;
/// with `valid`, only durations in the range (whole milliseconds, or the lowest plus less than
/// one).
fn duration(lo_ms: u64, hi_ms: u64, valid: bool) -> BoxedStrategy<Duration> {
    let ms = Duration::from_millis;
    let inside = prop_oneof![
        (0u64..1_000_000).prop_map(move |n| ms(lo_ms) + Duration::from_nanos(n)),
        (lo_ms..=hi_ms).prop_map(ms),
        Just(ms(hi_ms)),
    ];
    if valid {
        return inside.boxed();
    }
    prop_oneof![
        Just(Duration::ZERO),
        (0u64..2_000_000).prop_map(Duration::from_nanos),
        inside,
        (1u64..=2_000_000).prop_map(move |n| ms(hi_ms) + Duration::from_nanos(n)),
        any::<u64>().prop_map(Duration::from_millis),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        Just(Duration::MAX),
    ]
    .boxed()
}

/// Topology specs small enough to build quickly, with their processor counts.
const GOOD_SPECS: [(&str, usize); 6] = [
    ("1", 1),
    ("2x2", 4),
    ("1x3", 3),
    ("2 nodes x 1 core x 2 threads, 64 KiB L2 per core", 4),
    ("3 processors, 1 MiB L3 shared", 3),
    ("4 cores, 32 KiB L1d per core", 4),
];

/// Specs that are refused.
const BAD_SPECS: [&str; 9] =
    ["0", "0x2", "2x0", "4097", "2y2", "", "x", "2x2, 100 L2 per core", "99999999999999999999999x2"];

/// One value per builder setting; `None`: the builder's default.
#[derive(Clone, Debug)]
struct Settings {
    processors: Option<usize>,
    topology: Option<String>,
    stack_size: Option<usize>,
    start_queue_limit: Option<usize>,
    node_start_queue_limit: Option<usize>,
    tcb_pool_limit: Option<usize>,
    stack_pool_limit: Option<usize>,
    node_stack_pool_limit: Option<usize>,
    spin_rounds: Option<usize>,
    spin_policy: Option<SpinPolicy>,
    max_spare_threads: Option<usize>,
    spare_keep_alive: Option<Duration>,
    deadlock_grace: Option<Duration>,
    on_deadlock: Option<OnDeadlock>,
    /// `Some(None)`: `no_chaos()`; `Some(Some(seed))`: `chaos(seed)`.
    chaos: Option<Option<u64>>,
    policy: Option<&'static str>,
    estimated_counters: bool,
    pin_threads: Option<bool>,
    gather_locks: Option<bool>,
    central: Option<bool>,
    prefetch: Option<bool>,
    unguarded_stacks: bool,
    /// `Some(b)`: `coop_budget(b)`.
    coop_budget: Option<Option<u32>>,
}

/// Settings around their ranges, or (`valid`) inside them, the extremes included.
fn settings(valid: bool) -> impl Strategy<Value = Settings> {
    // Processors: valid counts small enough to start quickly (4096 is checked once, below).
    let processors = if valid {
        (1usize..=6).boxed()
    } else {
        prop_oneof![3 => 1usize..=6, 1 => Just(0usize), 1 => MAX_PROCESSORS + 1..=usize::MAX].boxed()
    };
    // A spec, and whether the count must match it.
    let topology = if valid {
        (prop::sample::select(GOOD_SPECS.to_vec()), any::<bool>())
            .prop_map(|((spec, n), give_count)| (spec.to_string(), give_count.then_some(n)))
            .boxed()
    } else {
        prop_oneof![
            prop::sample::select(GOOD_SPECS.to_vec()).prop_map(|(spec, _)| spec.to_string()),
            prop::sample::select(BAD_SPECS.to_vec()).prop_map(str::to_string),
        ]
        .prop_map(|spec| (spec, None))
        .boxed()
    };
    // Stacks: valid ones no larger than a few MiB but for the largest, 1 GiB (address space
    // only: stacks are mapped without reserve).
    let stack_size = if valid {
        prop_oneof![MIN_STACK_SIZE..=MIN_STACK_SIZE + 4096, MIN_STACK_SIZE..=4 << 20, Just(MAX_STACK_SIZE)]
            .boxed()
    } else {
        prop_oneof![
            3 => MIN_STACK_SIZE - 2..=MIN_STACK_SIZE + 4096,
            2 => MIN_STACK_SIZE..=4 << 20,
            1 => MAX_STACK_SIZE - 1..=MAX_STACK_SIZE + 1,
            1 => Just(0usize),
            1 => any::<usize>(),
        ]
        .boxed()
    };
    let fixed = if valid {
        (0u32..=1_000_000).boxed()
    } else {
        prop_oneof![0u32..=64, 999_998u32..=1_000_002, any::<u32>()].boxed()
    };
    let spin_policy =
        prop_oneof![Just(SpinPolicy::Adaptive), Just(SpinPolicy::Block), fixed.prop_map(SpinPolicy::Fixed)];
    let on_deadlock = prop_oneof![Just(OnDeadlock::Report), Just(OnDeadlock::Ignore)];
    let chaos = prop::option::of(any::<u64>());
    let limits = (
        prop::option::of(setting(1, usize::MAX, valid)),
        prop::option::of(setting(1, usize::MAX, valid)),
        prop::option::of(setting(2, usize::MAX, valid)),
        prop::option::of(setting(2, usize::MAX, valid)),
        prop::option::of(setting(1, usize::MAX, valid)),
        prop::option::of(setting(0, 1_000_000, valid)),
        prop::option::of(setting(1, MAX_SPARE_THREADS, valid)),
    );
    let times =
        (prop::option::of(duration(1, 86_400_000, valid)), prop::option::of(duration(1, 3_600_000, valid)));
    let shape = (prop::option::of(processors), prop::option::of(topology), prop::option::of(stack_size));
    let choices = (
        prop::option::of(spin_policy),
        prop::option::of(on_deadlock),
        prop::option::of(chaos),
        prop::option::of(prop::sample::select(Policy::ALL_NAMES.to_vec())),
        any::<bool>(),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        any::<bool>(),
    );
    // The budget: off, around the bounds of `1..=u32::MAX`, anywhere; 0 is refused.
    let coop_budget = if valid {
        prop_oneof![
            Just(None),
            (1u32..=4).prop_map(Some),
            (u32::MAX - 2..=u32::MAX).prop_map(Some),
            any::<u32>().prop_map(|n| Some(n.max(1)))
        ]
        .boxed()
    } else {
        prop_oneof![
            Just(None),
            (0u32..=4).prop_map(Some),
            (u32::MAX - 2..=u32::MAX).prop_map(Some),
            any::<u32>().prop_map(Some)
        ]
        .boxed()
    };
    (shape, limits, times, choices, prop::option::of(coop_budget)).prop_map(
        move |(
            (processors, topology, stack_size),
            (
                start_queue_limit,
                node_start_queue_limit,
                tcb_pool_limit,
                stack_pool_limit,
                node_stack_pool_limit,
                spin_rounds,
                max_spare_threads,
            ),
            (spare_keep_alive, deadlock_grace),
            (
                spin_policy,
                on_deadlock,
                chaos,
                policy,
                estimated_counters,
                pin_threads,
                gather_locks,
                central,
                prefetch,
                unguarded_stacks,
            ),
            coop_budget,
        )| {
            // A valid spec decides the count: none, or its own.
            let (topology, processors) = match topology {
                Some((spec, count)) if valid => (Some(spec), count),
                Some((spec, _)) => (Some(spec), processors),
                None => (None, processors),
            };
            Settings {
                processors,
                topology,
                stack_size,
                start_queue_limit,
                node_start_queue_limit,
                tcb_pool_limit,
                stack_pool_limit,
                node_stack_pool_limit,
                spin_rounds,
                spin_policy,
                max_spare_threads,
                spare_keep_alive,
                deadlock_grace,
                on_deadlock,
                chaos,
                policy,
                estimated_counters,
                pin_threads,
                gather_locks,
                central,
                prefetch,
                unguarded_stacks,
                coop_budget,
            }
        },
    )
}

impl Settings {
    /// The builder these settings make.
    fn builder(&self) -> RuntimeBuilder {
        let mut b = Runtime::builder();
        macro_rules! set {
            ($($field:ident),*) => {$(
                if let Some(v) = self.$field.clone() {
                    b = b.$field(v);
                }
            )*};
        }
        set!(
            processors,
            stack_size,
            start_queue_limit,
            node_start_queue_limit,
            tcb_pool_limit,
            stack_pool_limit
        );
        set!(
            node_stack_pool_limit,
            spin_rounds,
            spin_policy,
            max_spare_threads,
            spare_keep_alive,
            deadlock_grace
        );
        set!(on_deadlock, pin_threads, gather_locks, central, prefetch, coop_budget);
        if let Some(spec) = &self.topology {
            b = b.topology(spec);
        }
        match self.chaos {
            Some(Some(seed)) => b = b.chaos(seed),
            Some(None) => b = b.no_chaos(),
            None => {}
        }
        if let Some(name) = self.policy {
            b = b.policy(name.parse::<Policy>().expect("a valid name"));
        }
        if self.estimated_counters {
            b = b.counters(CounterChoice::Estimated);
        }
        if self.unguarded_stacks {
            // SAFETY: the ULTs of these tests (a sum, a blocking call) fit in the smallest stack.
            b = unsafe { b.unguarded_stacks() };
        }
        b
    }

    /// The fields a build must refuse, each with its range (`max` `usize::MAX`: no upper bound),
    /// as `BuildError::OutOfRange` names them; `"topology"` for a spec that is refused, and
    /// `"processors"` also for a count the topology contradicts.
    fn refused(&self) -> Vec<(&'static str, usize, usize)> {
        let mut refused = Vec::new();
        let mut check = |field: &'static str, value: Option<usize>, lo: usize, hi: usize| {
            if value.is_some_and(|v| !(lo..=hi).contains(&v)) {
                refused.push((field, lo, hi));
            }
        };
        check("processors", self.processors, 1, MAX_PROCESSORS);
        check("stack_size", self.stack_size, MIN_STACK_SIZE, MAX_STACK_SIZE);
        check("start_queue_limit", self.start_queue_limit, 1, usize::MAX);
        check("node_start_queue_limit", self.node_start_queue_limit, 1, usize::MAX);
        check("tcb_pool_limit", self.tcb_pool_limit, 2, usize::MAX);
        check("stack_pool_limit", self.stack_pool_limit, 2, usize::MAX);
        check("node_stack_pool_limit", self.node_stack_pool_limit, 1, usize::MAX);
        check("spin_rounds", self.spin_rounds, 0, 1_000_000);
        check("max_spare_threads", self.max_spare_threads, 1, MAX_SPARE_THREADS);
        let ms = |d: Option<Duration>| d.map(|d| usize::try_from(d.as_millis()).unwrap_or(usize::MAX));
        // Whole milliseconds count.
        check("spare_keep_alive (in milliseconds)", ms(self.spare_keep_alive), 1, 86_400_000);
        if let Some(SpinPolicy::Fixed(n)) = self.spin_policy {
            check("spin_policy", Some(n as usize), 0, 1_000_000);
        }
        if let Some(Some(n)) = self.coop_budget {
            check("coop_budget", Some(n as usize), 1, u32::MAX as usize);
        }
        // The grace is compared as a duration: 1 ms..=1 h exactly.
        if let Some(grace) = self.deadlock_grace {
            if !(Duration::from_millis(1)..=Duration::from_secs(3600)).contains(&grace) {
                refused.push(("deadlock_grace (milliseconds)", 1, 3_600_000));
            }
        }
        if let Some(spec) = &self.topology {
            match elite_affinity::Topology::synthetic(spec) {
                Err(_) => refused.push(("topology", 0, 0)),
                Ok(t) if self.processors.is_some_and(|n| n != t.num_processors()) => {
                    refused.push(("processors", 0, 0))
                }
                Ok(_) => {}
            }
        }
        refused
    }
}

/// Checks a refusal against the settings: one of the refused fields, named in the message with
/// the value given and the range.
fn check_refusal(
    s: &Settings,
    refused: &[(&'static str, usize, usize)],
    e: &BuildError,
) -> Result<(), TestCaseError> {
    let message = e.to_string();
    match e {
        BuildError::OutOfRange { field, value, min, max } => {
            prop_assert!(
                refused.iter().any(|(f, lo, hi)| (f, lo, hi) == (field, min, max)),
                "refused `{}` ({}..={}), expected one of {:?}: {}",
                field,
                min,
                max,
                refused,
                message
            );
            prop_assert!(
                !(*min..=*max).contains(value),
                "the value {} is inside its own range: {}",
                value,
                message
            );
            let range = if *max == usize::MAX { format!("at least {min}") } else { format!("{min}..={max}") };
            prop_assert_eq!(
                &message,
                &format!("invalid `{field}`: {value} is out of range, expected {range}"),
                "for {:?}",
                s
            );
        }
        BuildError::Conflict { field: "processors", reason } => {
            prop_assert!(refused.iter().any(|r| r.0 == "processors"), "{}", message);
            let (n, spec) = (s.processors.expect("a count"), s.topology.as_deref().expect("a spec"));
            prop_assert!(
                reason.starts_with(&format!("{n} processors asked for, but topology \"{spec}\" has ")),
                "{}",
                message
            );
        }
        BuildError::Topology(t) => {
            prop_assert!(refused.iter().any(|r| r.0 == "topology"), "{}", message);
            let spec = s.topology.as_deref().expect("a spec");
            prop_assert!(message.starts_with("invalid `topology`: "), "{}", message);
            prop_assert!(t.to_string().contains(&format!("{spec:?}")), "{}", message);
        }
        other => prop_assert!(false, "unexpected error {:?}: {}", other, message),
    }
    Ok(())
}

/// What a runtime built from valid settings must do: run ULTs (spawned inside and from outside,
/// one of them on its own stack size), make a blocking call, and shut down.
fn exercise(rt: Runtime, stack: usize) -> u64 {
    let outside = Builder::new().name("outside".into()).spawn_on(&rt, || 2u64).expect("spawn_on");
    let inside = rt.block_on(move || {
        let h = Builder::new().stack_size(stack).spawn(|| {
            elite_rt::yield_now();
            3u64
        });
        let sum: u64 = (0..4u64).map(|i| elite_rt::spawn(move || i)).map(|h| h.join().unwrap()).sum();
        sum + h.expect("a valid stack size").join().unwrap() + elite_rt::blocking(|| 4)
    });
    let total = inside + outside.join().unwrap();
    drop(rt);
    total
}

proptest! {
    #![proptest_config(config(256))]

    /// Any string as a policy name: one of `Policy::ALL_NAMES` (the fixed policies and `auto`), or an error that quotes it and lists
    /// them.
    #[test]
    fn policy_names(name in prop_oneof![
        any::<String>(),
        prop::sample::select(Policy::ALL_NAMES.to_vec()).prop_map(str::to_string),
        (prop::sample::select(Policy::ALL_NAMES.to_vec()), 0usize..4, any::<char>()).prop_map(|(n, how, c)| match how {
            0 => n.to_uppercase(),
            1 => format!(" {n}"),
            2 => format!("{n}{c}"),
            _ => n.replace('-', "_"),
        }),
    ]) {
        match name.parse::<Policy>() {
            Ok(p) => {
                prop_assert!(Policy::ALL_NAMES.contains(&name.as_str()), "{:?} parsed", name);
                prop_assert_eq!(p.name(), name.as_str());
                prop_assert_eq!(p.to_string(), name);
            }
            Err(e) => {
                prop_assert!(!Policy::ALL_NAMES.contains(&name.as_str()));
                prop_assert_eq!(e.name(), name.as_str());
                prop_assert_eq!(
                    e.to_string(),
                    format!("unknown policy `{name}`: expected one of {}", Policy::ALL_NAMES.join(", "))
                );
            }
        }
    }
}

/// Builds a runtime from `s` under the hang guard and runs [`exercise`] on it; checks a refusal
/// with [`check_refusal`], and a success against the settings.
fn build_and_run(s: &Settings) -> Result<bool, TestCaseError> {
    let refused = s.refused();
    let settings = s.clone();
    let stack = s.stack_size.unwrap_or(MIN_STACK_SIZE).clamp(RUN_STACK, 1 << 20);
    let outcome = hang_guard(GUARD_SECS, &format!("build and run {s:?}"), move || {
        let mut builder = settings.builder();
        if settings.stack_size.is_some_and(|size| (MIN_STACK_SIZE..RUN_STACK).contains(&size)) {
            builder = builder.stack_size(RUN_STACK);
        }
        builder.build().map(|rt| exercise(rt, stack))
    });
    match outcome {
        Ok(total) => {
            prop_assert!(refused.is_empty(), "built, but {:?} should have been refused: {:?}", refused, s);
            prop_assert_eq!(total, 2 + 6 + 3 + 4);
            Ok(true)
        }
        Err(e) => {
            prop_assert!(!refused.is_empty(), "refused valid settings {:?}: {}", s, e);
            check_refusal(s, &refused, &e)?;
            Ok(false)
        }
    }
}

proptest! {
    #![proptest_config(config(48))]

    /// Every builder setting at once, each left alone or set to anything around its range: a
    /// refusal that names a field out of range, or a runtime that works.
    #[test]
    fn runtime_settings(s in settings(false)) {
        build_and_run(&s)?;
    }

    /// Every builder setting in its range, the extremes included: a runtime that works.
    #[test]
    fn valid_runtime_settings(s in settings(true)) {
        prop_assert!(s.refused().is_empty(), "{:?}", s);
        prop_assert!(build_and_run(&s)?, "refused {:?}", s);
    }
}

/// One value per ULT builder setting.
#[derive(Clone, Debug)]
struct UltSettings {
    name: Option<String>,
    stack_size: Option<usize>,
    footprint: Option<usize>,
    data: Option<(usize, usize)>,
    pinned: bool,
    /// Declared again from inside: `set_footprint`, `set_data_block`.
    later: Option<(usize, (usize, usize))>,
    /// Spawned from outside (`spawn_on`) rather than from a ULT.
    outside: bool,
}

fn ult_settings() -> impl Strategy<Value = UltSettings> {
    let name = prop_oneof![
        any::<String>(),
        Just(String::new()),
        Just("nul\0inside".to_string()),
        (any::<char>(), 0usize..20_000).prop_map(|(c, n)| std::iter::repeat_n(c, n).collect()),
    ];
    let stack_size = prop_oneof![
        3 => MIN_STACK_SIZE - 2..=MIN_STACK_SIZE + 4096,
        2 => MIN_STACK_SIZE..=1 << 20,
        1 => MAX_STACK_SIZE - 1..=MAX_STACK_SIZE + 1,
        1 => Just(0usize),
        1 => any::<usize>(),
    ];
    let bytes = prop_oneof![Just(0usize), 1usize..=1 << 20, any::<usize>(), Just(usize::MAX)];
    let block = (prop_oneof![Just(0usize), any::<usize>(), Just(usize::MAX)], bytes.clone());
    (
        prop::option::of(name),
        prop::option::of(stack_size),
        prop::option::of(bytes.clone()),
        prop::option::of(block.clone()),
        any::<bool>(),
        prop::option::of((bytes, block)),
        any::<bool>(),
    )
        .prop_map(|(name, stack_size, footprint, data, pinned, later, outside)| UltSettings {
            name,
            stack_size,
            footprint,
            data,
            pinned,
            later,
            outside,
        })
}

/// Every ULT builder setting, on runtimes whose policies read footprints and data blocks: a
/// spawn refused with the stack size and its range, or a ULT that runs with its name.
#[test]
fn ult_settings_spawn_or_say_why() {
    let runtimes: Arc<Vec<Runtime>> = Arc::new(
        [("reload-transient", true), ("gravity", true), ("no-affinity", false)]
            .into_iter()
            .map(|(policy, prefetch)| {
                Runtime::builder()
                    .processors(2)
                    .policy(policy.parse::<Policy>().unwrap())
                    .counters(CounterChoice::Estimated)
                    .prefetch(prefetch)
                    .stack_size(RUN_STACK.max(64 << 10))
                    .build()
                    .expect("a runtime")
            })
            .collect(),
    );
    let mut runner = TestRunner::new(config(128));
    let result = runner.run(&(ult_settings(), 0usize..3), |(u, which)| {
        let runtimes = runtimes.clone();
        let case = u.clone();
        let outcome = hang_guard(GUARD_SECS, &format!("spawn {u:?}"), move || {
            let rt = &runtimes[which];
            let mut b = Builder::new().pinned(case.pinned);
            if let Some(name) = case.name.clone() {
                b = b.name(name);
            }
            if let Some(size) = case.stack_size {
                // Valid sizes below what the sanitizer's frames need are raised (see RUN_STACK).
                b = b.stack_size(if (MIN_STACK_SIZE..RUN_STACK).contains(&size) { RUN_STACK } else { size });
            }
            if let Some(bytes) = case.footprint {
                b = b.footprint(bytes);
            }
            if let Some((addr, len)) = case.data {
                b = b.data(DataBlock::new(addr as *const u8, len));
            }
            let later = case.later;
            let body = move || {
                if let Some((bytes, (addr, len))) = later {
                    elite_rt::set_footprint(bytes);
                    elite_rt::set_data_block(DataBlock::new(addr as *const u8, len));
                }
                elite_rt::yield_now();
                elite_rt::current().name().map(str::to_owned)
            };
            let handle = if case.outside { b.spawn_on(rt, body) } else { rt.block_on(|| b.spawn(body)) };
            handle.map(|h| h.join().expect("the ULT returns"))
        });
        match outcome {
            Ok(name) => {
                prop_assert!(
                    u.stack_size.is_none_or(|s| (MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&s)),
                    "{:?}",
                    u
                );
                prop_assert_eq!(name, u.name);
            }
            Err(e @ SpawnError::InvalidStackSize { requested, min, max }) => {
                prop_assert_eq!(Some(requested), u.stack_size);
                prop_assert_eq!((min, max), (MIN_STACK_SIZE, MAX_STACK_SIZE));
                prop_assert!(!(min..=max).contains(&requested));
                prop_assert_eq!(
                    e.to_string(),
                    format!(
                        "invalid `stack_size`: {requested} bytes is out of range, expected {min}..={max}"
                    )
                );
            }
            Err(e) => prop_assert!(false, "unexpected error {:?} for {:?}", e, u),
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

// ---- regressions and edges, as plain tests ----

/// Found by `runtime_settings`: a pool limit of `usize::MAX` (or any too large to allocate up
/// front) aborted the process from the processor's thread ("capacity overflow", or a failed
/// allocation of 8 TiB for 2^40) instead of building a runtime whose pools are merely unbounded.
#[test]
fn huge_pool_limits_build_a_working_runtime() {
    for limit in [usize::MAX, 1 << 40, usize::MAX / 2 + 1] {
        let total = hang_guard(GUARD_SECS, &format!("pool limits {limit}"), move || {
            let rt = Runtime::builder()
                .processors(2)
                .tcb_pool_limit(limit)
                .stack_pool_limit(limit)
                .node_stack_pool_limit(limit)
                .start_queue_limit(limit)
                .node_start_queue_limit(limit)
                .build()
                .expect("no upper bound on pool and queue limits");
            exercise(rt, MIN_STACK_SIZE.max(RUN_STACK))
        });
        assert_eq!(total, 15, "limit {limit}");
    }
}

/// Found by `runtime_settings`: a grace just above an hour was refused as "3600000 is out of
/// range, expected 1..=3600000"; the value shown is now rounded away from the range.
#[test]
fn a_grace_just_outside_the_range_says_so() {
    let grace = Duration::from_secs(3600) + Duration::from_nanos(1);
    let e = Runtime::builder().deadlock_grace(grace).build().expect_err("over an hour");
    assert_eq!(
        e.to_string(),
        "invalid `deadlock_grace (milliseconds)`: 3600001 is out of range, expected 1..=3600000"
    );
    let e = Runtime::builder().deadlock_grace(Duration::from_micros(999)).build().expect_err("under 1 ms");
    assert_eq!(
        e.to_string(),
        "invalid `deadlock_grace (milliseconds)`: 0 is out of range, expected 1..=3600000"
    );
    let e = Runtime::builder().deadlock_grace(Duration::MAX).build().expect_err("forever");
    assert!(e.to_string().starts_with("invalid `deadlock_grace (milliseconds)`: "), "{e}");
}

/// The largest processor count builds, runs and shuts down.
#[test]
#[ignore = "4096 OS threads, about 5 s in a debug build: .ci/run's fuzz step runs it"]
fn the_largest_processor_count_works() {
    let total = hang_guard(GUARD_SECS * 2, "4096 processors", || {
        let rt = Runtime::builder()
            .processors(MAX_PROCESSORS)
            .pin_threads(false)
            .stack_size(RUN_STACK.max(64 << 10))
            .build()
            .expect("4096 processors");
        exercise(rt, RUN_STACK)
    });
    assert_eq!(total, 15);
}
