//! Property tests of every command line this command parses: the suites' (`parse_args`), the
//! probes' (`affinity-probe`, `grid-probe`, `blocking-probe`) and the may child's `-name=value`
//! parameters. Any argument list gives options within their ranges or an error that names the
//! argument at fault; none panics.
//!
//! Cases per property: 256, times `ELITE_FUZZ_SCALE` (`.ci/run` raises it), or `PROPTEST_CASES`.
//! A failing case is printed (shrunk) by proptest; it belongs, as a plain test, in the
//! regressions at the end.

use crate::peers::may::ChildArgs;
use crate::suites::{self, affinity, blocking, grid};
use crate::workloads::sum_below;
use elite_grid::experiment::{Model, POLICIES};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn config() -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u32>().ok());
    let cases =
        env("PROPTEST_CASES").unwrap_or_else(|| 256u32.saturating_mul(env("ELITE_FUZZ_SCALE").unwrap_or(1)));
    Config { cases, failure_persistence: None, ..Config::default() }
}

/// One argument: the words these commands know, values of every kind, near misses and anything.
fn word() -> impl Strategy<Value = String> {
    let known: Vec<&str> = suites::SUITES
        .iter()
        .map(|s| s.name)
        .chain(elite_rt::policy::Policy::NAMES)
        .chain(affinity::SHAPES.iter().map(|s| s.bench))
        .chain(blocking::PROBE_OPS.map(|(name, _)| name))
        .chain([
            "--json",
            "--json=",
            "--json=out.json",
            "--quick",
            "--bench",
            "--policy",
            "--cachegrind",
            "--help",
            "-h",
            "--prefetch",
            "--positions",
            "--size",
            "--processors",
            "--patch",
            "-",
            "--",
            "",
            " ",
            "-x",
            "--verbose",
            "yield",
            "micro",
            "fifo",
            "0",
            "1",
            "5",
            "20",
            "21",
            "255",
            "256",
            "4096",
            "4097",
            "-1",
            "+5",
            "1.5",
            "18446744073709551615",
            "18446744073709551616",
            "-n=1",
            "-procs=2",
            "-n=0",
            "-procs=0",
            "-procs=4097",
            "-n=x",
            "-=",
            "n=1",
            "-group=3",
            "out.json",
            "é",
            "\0",
        ])
        .collect();
    prop_oneof![
        6 => prop::sample::select(known).prop_map(str::to_string),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => (prop::sample::select(vec!["-n=", "-procs=", "-x=", "--json=", "--size="]), any::<u64>())
            .prop_map(|(flag, n)| format!("{flag}{n}")),
        1 => any::<String>(),
    ]
}

fn args() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(word(), 0..7)
}

/// `-name=value` parameters as the may child takes them, the names it needs among others.
fn parameters() -> impl Strategy<Value = Vec<String>> {
    let name = prop::sample::select(vec!["n", "procs", "group", "", "-n"]);
    let value = prop_oneof![
        (0u64..=5).prop_map(|n| n.to_string()),
        (4094u64..=4098).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        prop::sample::select(vec!["", "x", "-1", "+3", "18446744073709551616", " 1"])
            .prop_map(str::to_string),
    ];
    prop::collection::vec((name, value).prop_map(|(name, value)| format!("-{name}={value}")), 0..5)
}

/// Whether an error message quotes one of `args`, or the name or the value of a `name=value` one
/// (in backticks, or in single quotes as clap quotes them), or starts as one of `fixed`, or
/// refuses a flag given more than once that `args` does give more than once (clap's "the
/// argument '--flag <VALUE>' cannot be used multiple times").
fn names_the_fault(message: &str, args: &[String], fixed: &[&str]) -> bool {
    let quotes =
        |text: &str| message.contains(&format!("`{text}`")) || message.contains(&format!("'{text}'"));
    let repeated = message
        .strip_prefix("the argument '")
        .filter(|_| message.contains("cannot be used multiple times"))
        .and_then(|rest| rest.split([' ', '\'']).next())
        .is_some_and(|flag| {
            let given = |a: &&String| *a == flag || a.strip_prefix(flag).is_some_and(|v| v.starts_with('='));
            args.iter().filter(given).count() > 1
        });
    repeated
        || fixed.iter().any(|f| message.starts_with(f))
        || args.iter().any(|a| {
            quotes(a) || a.split_once('=').is_some_and(|(name, value)| quotes(name) || quotes(value))
        })
}

proptest! {
    #![proptest_config(config())]

    /// `elite-bench <suite> [flags]`.
    #[test]
    fn suite_command_lines(args in args()) {
        match crate::parse_args(&args) {
            Ok(None) => prop_assert!(args.iter().any(|a| a == "--help" || a == "-h")),
            Ok(Some(o)) => {
                prop_assert!(args.iter().any(|a| a == o.suite.name), "{:?}", args);
                prop_assert_eq!(o.quick, args.iter().any(|a| a == "--quick"));
                prop_assert_eq!(o.cachegrind, args.iter().any(|a| a == "--cachegrind"));
                if let Some(json) = &o.json {
                    prop_assert!(!json.is_empty(), "{:?}", args);
                }
                if !o.policies.is_empty() {
                    prop_assert!(["affinity", "grid"].contains(&o.suite.name), "{:?}", args);
                }
                if o.cachegrind {
                    prop_assert!(["affinity", "grid", "cosched"].contains(&o.suite.name), "{:?}", args);
                }
                prop_assert!(o.benches.iter().all(|b| !b.starts_with('-')), "{:?}", args);
            }
            Err(message) => prop_assert!(
                names_the_fault(&message, &args, &[
                    // clap's: a flag without its value, no suite.
                    "a value is required for '--bench <NAME>'",
                    "a value is required for '--policy <NAME>'",
                    "a value is required for '--json <FILE|->'",
                    "the following required arguments were not provided: <SUITE>",
                    "a value is required for '<SUITE>'",
                    "--policy belongs to suites",
                    "--cachegrind belongs to suites",
                ]),
                "{:?}: {}", args, message
            ),
        }
    }

    /// `elite-bench affinity-probe <bench> <policy> [--group N] [--iterations N] [--processors N] [--quick] [--data] [--positions]`.
    #[test]
    fn affinity_probe_command_lines(args in args()) {
        match affinity::parse_probe_args(&args) {
            Ok(None) => prop_assert!(args.iter().any(|a| a == "--help" || a == "-h")),
            Ok(Some(affinity::ProbeArgs { shape, policy, quick, group, iterations, processors, data, positions })) => {
                prop_assert!(args.iter().any(|a| a == shape.bench));
                prop_assert!(args.iter().any(|a| a == policy.name()));
                prop_assert_eq!(quick, args.iter().any(|a| a == "--quick"));
                prop_assert_eq!(data, args.iter().any(|a| a == "--data"));
                prop_assert_eq!(positions, args.iter().any(|a| a == "--positions"));
                if let Some(n) = group {
                    prop_assert!(args.iter().any(|a| a == &n.to_string()));
                }
                if let Some(n) = iterations {
                    prop_assert!(args.iter().any(|a| a == &n.to_string()));
                }
                if processors != 1 {
                    prop_assert!(args.iter().any(|a| a == &processors.to_string()));
                }
            }
            Err(message) => prop_assert!(
                names_the_fault(
                    &message,
                    &args,
                    &[
                        // clap's: a flag without its value, no bench or policy.
                        "a value is required for '--group <N>'",
                        "a value is required for '--iterations <N>'",
                        "a value is required for '--processors <N>'",
                        "the following required arguments were not provided:",
                        "a value is required for '<BENCH>'",
                        "a value is required for '<POLICY>'",
                    ]
                ),
                "{:?}: {}", args, message
            ),
        }
    }

    /// `elite-bench grid-probe <policy> [--prefetch] [--size LEVEL] [--processors N] [--patch CELLS]`.
    #[test]
    fn grid_probe_command_lines(args in args()) {
        match grid::parse_probe_args(&args) {
            Ok(None) => prop_assert!(args.iter().any(|a| a == "--help" || a == "-h")),
            Ok(Some(p)) => {
                prop_assert!(POLICIES.contains(&p.policy.as_str()));
                prop_assert!((Model::MIN_LEVEL..=Model::MAX_LEVEL).contains(&p.size));
                prop_assert!((1..=elite_rt::MAX_PROCESSORS).contains(&p.processors));
                prop_assert_eq!(p.prefetch, args.iter().any(|a| a == "--prefetch"));
                prop_assert!((1..=elite_grid::layout::MAX_PATCH).contains(&p.patch));
            }
            Err(message) => prop_assert!(
                names_the_fault(&message, &args, &[
                    "a value is required for '--size <LEVEL>'",
                    "a value is required for '--processors <N>'",
                    "a value is required for '--patch <CELLS>'",
                    "the following required arguments were not provided: <POLICY>",
                    "a value is required for '<POLICY>'",
                ]),
                "{:?}: {}", args, message
            ),
        }
    }

    /// `elite-bench blocking-probe <op> <n> [--processors N]`.
    #[test]
    fn blocking_probe_command_lines(args in args()) {
        match blocking::parse_probe_args(&args) {
            Ok(None) => prop_assert!(args.iter().any(|a| a == "--help" || a == "-h")),
            Ok(Some((op, n, processors))) => {
                // The words: without `--processors N` (or `--processors=N`) and the `--` that
                // may end the flags.
                let mut words = Vec::new();
                let mut given = None;
                let mut rest = args.iter();
                let mut flags = true;
                while let Some(a) = rest.next() {
                    if flags && a == "--" {
                        flags = false;
                    } else if flags && a == "--processors" {
                        given = rest.next().and_then(|v| v.parse::<usize>().ok());
                    } else if let Some(v) = a.strip_prefix("--processors=").filter(|_| flags) {
                        given = v.parse::<usize>().ok();
                    } else {
                        words.push(a.clone());
                    }
                }
                prop_assert_eq!(words.len(), 2);
                prop_assert!(blocking::PROBE_OPS.iter().any(|&(name, o)| name == words[0] && o == op));
                prop_assert_eq!(Some(n), words[1].parse::<u64>().ok());
                prop_assert_eq!(processors, given.unwrap_or(1));
                prop_assert!((1..=elite_rt::MAX_PROCESSORS).contains(&processors));
                // The probe's expected answer, whatever the count.
                let _ = sum_below(n);
            }
            Err(message) => prop_assert!(
                names_the_fault(
                    &message,
                    &args,
                    &[
                        "the following required arguments were not provided:",
                        "a value is required for '<OP>'",
                        "a value is required for '<N>'",
                        "a value is required for '--processors <N>'",
                    ]
                ),
                "{:?}: {}", args, message
            ),
        }
    }

    /// The may child's `-name=value` parameters.
    #[test]
    fn may_child_parameters(args in prop_oneof![args(), parameters()]) {
        match ChildArgs::parse(&args) {
            Ok(p) => {
                prop_assert!(p.n > 0);
                prop_assert!((1..=elite_rt::MAX_PROCESSORS).contains(&p.procs));
            }
            Err(message) => prop_assert!(
                names_the_fault(&message, &args, &["-n and -procs are required", "-procs must be 1..="]),
                "{:?}: {}", args, message
            ),
        }
    }

    /// The answer of the spawn probes, for any count: the sum of the indices, wrapping as the
    /// workloads' sums do in a release build.
    #[test]
    fn sum_below_any_count(n in prop_oneof![0u64..=100, (1u64 << 32) - 2..=(1 << 32) + 2, any::<u64>()]) {
        prop_assume!(n < u64::MAX);
        prop_assert_eq!(sum_below(n + 1), sum_below(n).wrapping_add(n));
    }
}

// ---- regressions, as plain tests ----

/// `blocking-probe spawn_join 4294967297`: the expected answer overflowed (a panic in a debug
/// build, a wrong expected answer in a release one).
#[test]
fn sum_below_past_two_to_the_32() {
    assert_eq!(sum_below((1 << 32) + 1), (1 << 63) + (1 << 31));
    assert_eq!(sum_below(u64::MAX), (u128::from(u64::MAX) * u128::from(u64::MAX - 1) / 2) as u64);
}

/// `-procs=100000000`: the may child started that many worker threads (it hung).
#[test]
fn the_may_child_refuses_more_workers_than_processors() {
    let args = |procs: &str| vec!["-n=1".to_string(), format!("-procs={procs}")];
    let e = ChildArgs::parse(&args("100000000")).expect_err("refused");
    assert_eq!(e, "-procs must be 1..=4096, got 100000000");
    assert_eq!(ChildArgs::parse(&args("4096")).expect("the largest").procs, 4096);
}

/// `grid-probe lifo`: an unknown policy was found only after the problem was built, and failed
/// with status 1 as a wrong run; it is a command-line mistake now.
#[test]
fn the_grid_probe_checks_its_policy_first() {
    let e = grid::parse_probe_args(&["lifo".to_string()]).expect_err("refused");
    assert_eq!(e, format!("invalid value 'lifo' for '<POLICY>'; [possible values: {}]", POLICIES.join(", ")));
    let e = grid::parse_probe_args(&["gravity".into(), "--size".into(), "99".into()]).expect_err("refused");
    assert_eq!(e, "invalid value '99' for '--size <LEVEL>': expected a level in 5..=20, got `99`");
}

/// A negative count reaches the probes' value parsers (which name what is allowed), a single-dash
/// word is refused whole, and `--help` is asked for, not an unknown word.
#[test]
fn the_probes_name_a_negative_count_and_take_help() {
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let e = blocking::parse_probe_args(&words(&["yield", "-1"])).expect_err("refused");
    assert_eq!(
        e,
        format!("invalid value '-1' for '<N>': expected a count of operations in 0..={}, got `-1`", u64::MAX)
    );
    let e = grid::parse_probe_args(&words(&["gravity", "--size", "-1"])).expect_err("refused");
    assert_eq!(e, "invalid value '-1' for '--size <LEVEL>': expected a level in 5..=20, got `-1`");
    let e = affinity::parse_probe_args(&words(&["no_locality", "gravity", "-procs=2"])).expect_err("refused");
    assert!(e.starts_with("unknown flag `-procs=2`; the flags are --group N"), "{e}");
    assert!(blocking::parse_probe_args(&words(&["--help"])).expect("help").is_none());
    assert!(grid::parse_probe_args(&words(&["-h"])).expect("help").is_none());
    assert!(affinity::parse_probe_args(&words(&["no_locality", "--help"])).expect("help").is_none());
    let p = grid::parse_probe_args(&words(&["gravity"])).expect("defaults").expect("not help");
    assert_eq!((p.prefetch, p.size, p.processors, p.patch), (false, 12, 1, 256));
    let ping = |args: &[&str]| blocking::parse_probe_args(&words(args)).expect("parsed").expect("not help");
    assert_eq!(ping(&["ping_pong_sync", "10"]), (blocking::ProbeOp::PingPongSync, 10, 1));
    assert_eq!(
        ping(&["ping_pong_sync", "10", "--processors", "2"]),
        (blocking::ProbeOp::PingPongSync, 10, 2)
    );
    let e = blocking::parse_probe_args(&words(&["yield", "10", "--processors", "0"])).expect_err("refused");
    assert!(e.contains("'--processors <N>'") && e.contains("got `0`"), "{e}");
    // A flag given twice is refused by name (a case the fuzzing found).
    let twice = words(&["--processors", "1", "--processors", "yield"]);
    let e = blocking::parse_probe_args(&twice).expect_err("refused");
    assert!(names_the_fault(&e, &twice, &[]), "{e}");
    assert!(!names_the_fault(&e, &words(&["--processors", "1", "yield"]), &[]), "{e}");
}
