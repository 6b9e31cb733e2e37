//! Property tests of what users hand elite-affinity as text or numbers: the synthetic topology
//! spec ([`Topology::synthetic`]), processor counts ([`Topology::single_node`],
//! [`Topology::with_processors`]), CPU ids ([`pin_current_thread`]) and cache model sizes
//! ([`CacheModel::new`]). Every input gives a value or an error that names the input and what was
//! expected; none panics.
//!
//! Cases per property: the default below, times `ELITE_FUZZ_SCALE` (`.ci/run` raises it), or
//! `PROPTEST_CASES` for every property. A failing case is printed (shrunk) by proptest; it
//! belongs, as a plain test, in the regressions at the end.

use elite_affinity::{pin_current_thread, CacheKind, CacheModel, Topology, TopologySource};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// `default` cases, scaled as the module docs say.
fn config(default: u32) -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u32>().ok());
    let cases =
        env("PROPTEST_CASES").unwrap_or_else(|| default.saturating_mul(env("ELITE_FUZZ_SCALE").unwrap_or(1)));
    Config { cases, failure_persistence: None, ..Config::default() }
}

const MAX_PROCESSORS: usize = 4096;

/// What every topology error must say about the spec it came from: the spec itself, and either a
/// position with what was found there (or "at the end") or the count that is out of range.
fn check_spec_error(spec: &str, message: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        message.contains(&format!("{spec:?}")),
        "the error does not quote the spec {spec:?}: {message}"
    );
    if let Some(rest) = message.strip_prefix(&format!("cannot parse topology {spec:?}: expected ")) {
        // "..., found \"X\" at byte N (specs look like ...)" or "... at the end (specs look like ...)".
        if let Some(found) = rest.rfind(", found ") {
            let tail = &rest[found + ", found ".len()..];
            let at = tail.rfind(" at byte ").expect("a position");
            let quoted = &tail[..at];
            let byte: usize = tail[at + " at byte ".len()..]
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .expect("a byte offset");
            prop_assert!(
                spec.is_char_boundary(byte),
                "byte {byte} of {spec:?} is inside a character: {message}"
            );
            prop_assert!(
                format!("{:?}", &spec[byte..]).starts_with(quoted.trim_end_matches('"')),
                "{quoted} is not what {spec:?} holds at byte {byte}: {message}"
            );
        } else {
            prop_assert!(rest.contains(" at the end"), "no position: {message}");
        }
        prop_assert!(message.ends_with("\")"), "no examples: {message}");
    } else {
        prop_assert!(
            message.starts_with("topology needs 1..=4096 processors, got ")
                || message.starts_with("topology needs at least 1 node, got 0"),
            "unexpected error for {spec:?}: {message}"
        );
    }
    Ok(())
}

/// Parses `spec` and checks what every spec must give: an error as [`check_spec_error`] wants,
/// or a topology of 1..=4096 processors whose canonical spec parses to the same topology.
fn check_spec(spec: &str) -> Result<Option<Topology>, TestCaseError> {
    match Topology::synthetic(spec) {
        Err(e) => {
            check_spec_error(spec, &e.to_string())?;
            Ok(None)
        }
        Ok(t) => {
            prop_assert!(
                (1..=MAX_PROCESSORS).contains(&t.num_processors()),
                "{spec:?}: {}",
                t.num_processors()
            );
            prop_assert!(t.num_nodes() >= 1 && t.num_nodes() <= t.num_processors());
            let TopologySource::Synthetic(canonical) = t.source() else {
                return Err(TestCaseError::fail(format!("{spec:?}: source {:?}", t.source())));
            };
            let again = Topology::synthetic(canonical).map_err(|e| {
                TestCaseError::fail(format!(
                    "the canonical form {canonical:?} of {spec:?} does not parse: {e}"
                ))
            })?;
            prop_assert_eq!(again.source(), t.source(), "{:?} is not canonical", canonical);
            prop_assert_eq!(again.num_processors(), t.num_processors());
            prop_assert_eq!(again.num_nodes(), t.num_nodes());
            prop_assert_eq!(again.num_cores(), t.num_cores());
            prop_assert_eq!(again.caches().len(), t.caches().len());
            Ok(Some(t))
        }
    }
}

/// Pieces specs are made of, good and bad: counts (small, at the limits, overflowing), the words
/// of the grammar and near misses, separators, and characters it has no use for.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0u64..10).prop_map(|n| n.to_string()),
        1 => prop::sample::select(vec![
            "0", "1", "64", "4095", "4096", "4097", "65536", "4294967296", "18446744073709551615",
            "18446744073709551616", "99999999999999999999999", "0002",
        ])
        .prop_map(str::to_string),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        6 => prop::sample::select(vec![
            "x", "X", "×", "*", ",", ", ", " ", "  ", "\t", "node", "nodes", "core", "cores", "processor",
            "processors", "thread", "threads", "cpus", "socket", "per", "shared", "machine", "L", "L1", "L1d",
            "L1i", "L2", "L3", "L4", "L5", "L0", "L2x", "l3", "d", "i", "B", "K", "KB", "KiB", "M", "MB",
            "MiB", "G", "GB", "GiB", "TiB", "-", ".", "+", "=", "é", "ß", "\u{0}", "\u{feff}", "🙂",
        ])
        .prop_map(str::to_string),
        1 => any::<char>().prop_map(|c| c.to_string()),
    ]
}

/// A spec of 0 to 16 pieces, with or without spaces between them.
fn token_spec() -> impl Strategy<Value = String> {
    (prop::collection::vec(token(), 0..16), any::<bool>())
        .prop_map(|(tokens, spaced)| tokens.join(if spaced { " " } else { "" }))
}

/// A shape and caches that follow the grammar, with the counts they must give.
#[derive(Clone, Debug)]
struct GoodSpec {
    text: String,
    nodes: usize,
    cores: usize,
    threads: usize,
    /// (level, kind, size, instances expected)
    caches: Vec<(u8, CacheKind, u64, usize)>,
}

fn good_spec() -> impl Strategy<Value = GoodSpec> {
    let shape = (1usize..=4, 1usize..=6, 1usize..=3, 0usize..4, any::<bool>(), any::<bool>());
    let cache = (1u8..=4, 0usize..3, 1u64..=4096, 0usize..4, 0usize..6, any::<bool>());
    (shape, prop::collection::vec(cache, 0..5)).prop_map(|((n, c, t, form, words, times), caches)| {
        let x = if times { " × " } else { "x" };
        let (text, nodes, cores, threads) = match form {
            // "P" or "P processors": one node of single-thread cores.
            0 => (if words { format!("{c} processors") } else { c.to_string() }, 1, c, 1),
            // "N x P".
            1 => (if words { format!("{n} nodes{x}{c} cores") } else { format!("{n}{x}{c}") }, n, c, 1),
            // "C cores x T threads".
            2 => (format!("{c} cores{x}{t} threads"), 1, c, t),
            // "N x C x T".
            _ => (
                if words {
                    format!("{n} nodes{x}{c} cores{x}{t} threads")
                } else {
                    format!("{n}{x}{c}{x}{t}")
                },
                n,
                c,
                t,
            ),
        };
        let mut text = text;
        let mut seen = Vec::new();
        let mut expected = Vec::new();
        for (level, kind, lines, unit, scope, shared) in caches {
            let (kind, suffix) =
                [(CacheKind::Unified, ""), (CacheKind::Data, "d"), (CacheKind::Instruction, "i")][kind];
            if seen.contains(&(level, suffix)) {
                continue;
            }
            seen.push((level, suffix));
            let bytes = lines * 64;
            let size = match unit {
                1 if bytes % 1024 == 0 => format!("{} KiB", bytes / 1024),
                2 if bytes % 1024 == 0 => format!("{}K", bytes / 1024),
                3 => format!("{bytes} B"),
                _ => bytes.to_string(),
            };
            let (clause, instances) = match (shared, scope) {
                (true, _) => ("shared", 1),
                (_, 0) => ("per processor", nodes * cores * threads),
                (_, 1) => ("per thread", nodes * cores * threads),
                (_, 2) => ("per core", nodes * cores),
                (_, 3) => ("per cores", nodes * cores),
                (_, 4) => ("per node", nodes),
                _ => ("per machine", 1),
            };
            text.push_str(&format!(", {size} L{level}{suffix} {clause}"));
            expected.push((level, kind, bytes, instances));
        }
        GoodSpec { text, nodes, cores, threads, caches: expected }
    })
}

/// A processor count: small, just past the limit, or anything (nearly always far too large).
fn count() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..=40, 1 => 4097usize..=4100, 1 => any::<usize>()]
}

/// Edits a string: deletes, duplicates or replaces one character, or inserts one.
fn mutated(spec: String) -> impl Strategy<Value = String> {
    let len = spec.chars().count();
    (0..=len, 0usize..4, any::<char>()).prop_map(move |(at, how, c)| {
        let mut chars: Vec<char> = spec.chars().collect();
        match how {
            0 if at < chars.len() => {
                chars.remove(at);
            }
            1 if at < chars.len() => chars.insert(at, chars[at]),
            2 if at < chars.len() => chars[at] = c,
            _ => chars.insert(at, c),
        }
        chars.into_iter().collect()
    })
}

proptest! {
    #![proptest_config(config(256))]

    /// Specs made of the grammar's pieces, in any order: a topology or an error that says where.
    #[test]
    fn any_arrangement_of_spec_pieces(spec in token_spec()) {
        check_spec(&spec)?;
    }

    /// Any string at all.
    #[test]
    fn any_string(spec in any::<String>()) {
        check_spec(&spec)?;
    }

    /// Specs that follow the grammar give exactly the shape and caches they describe.
    #[test]
    fn specs_that_follow_the_grammar(good in good_spec()) {
        let t = check_spec(&good.text)?
            .ok_or_else(|| TestCaseError::fail(format!("{:?} was refused", good.text)))?;
        prop_assert_eq!(t.num_processors(), good.nodes * good.cores * good.threads, "{:?}", good.text);
        prop_assert_eq!(t.num_nodes(), good.nodes, "{:?}", good.text);
        prop_assert_eq!(t.num_cores(), good.nodes * good.cores, "{:?}", good.text);
        for &(level, kind, size, instances) in &good.caches {
            let found: Vec<_> = t.caches().iter().filter(|c| c.level == level && c.kind == kind).collect();
            prop_assert_eq!(found.len(), instances, "L{} {:?} of {:?}", level, kind, good.text);
            prop_assert!(found.iter().all(|c| c.size == size && c.line_size == 64), "{:?}", good.text);
        }
        prop_assert_eq!(t.caches().len(), good.caches.iter().map(|c| c.3).sum::<usize>());
    }

    /// A valid spec with one character deleted, doubled, replaced or inserted.
    #[test]
    fn one_character_off(spec in good_spec().prop_flat_map(|good| mutated(good.text))) {
        check_spec(&spec)?;
    }

    /// A processor count for one node: a topology of exactly that many, or an error with the
    /// count and the range. (Large valid counts are slow in a debug build: the plain test
    /// `counts_at_the_limits` has 4096.)
    #[test]
    fn single_node_counts(n in count()) {
        match Topology::single_node(n) {
            Ok(t) => {
                prop_assert!((1..=MAX_PROCESSORS).contains(&n));
                prop_assert_eq!((t.num_nodes(), t.num_processors()), (1, n));
            }
            Err(e) => {
                prop_assert!(!(1..=MAX_PROCESSORS).contains(&n));
                prop_assert_eq!(e.to_string(), format!("topology needs 1..=4096 processors, got {n}"));
            }
        }
    }

    /// The first `n` processors of a synthetic topology.
    #[test]
    fn with_processors_counts(
        base in 1usize..=8,
        n in count(),
    ) {
        let topology = Topology::synthetic(&format!("2x{base}")).expect("a valid spec");
        match topology.with_processors(n) {
            Ok(t) => {
                prop_assert!((1..=MAX_PROCESSORS).contains(&n));
                prop_assert_eq!(t.num_processors(), n);
            }
            Err(e) => {
                prop_assert!(!(1..=MAX_PROCESSORS).contains(&n));
                prop_assert_eq!(e.to_string(), format!("topology needs 1..=4096 processors, got {n}"));
            }
        }
    }

    /// Cache model sizes: a model, or an error that names the field, its range and the value.
    #[test]
    fn cache_model_sizes(
        lines in prop_oneof![0u64..=4, (1u64 << 24) - 2..=(1 << 24) + 2, any::<u64>()],
        line_size in prop_oneof![0u32..=2, Just(64), any::<u32>()],
    ) {
        match CacheModel::new(lines, line_size) {
            Ok(m) => {
                prop_assert_eq!((u64::from(m.lines()), m.line_size()), (lines, line_size));
                prop_assert_eq!(m.lines_for(usize::MAX), (usize::MAX as u64).div_ceil(u64::from(line_size)));
            }
            Err(e) => {
                let message = e.to_string();
                let wanted = if !(2..=1 << 24).contains(&lines) {
                    format!("cache model needs `lines` in 2..=16777216, got {lines}")
                } else {
                    prop_assert_eq!(line_size, 0);
                    format!("cache model needs `line_size` in 1..={}, got 0", u32::MAX)
                };
                prop_assert_eq!(message, wanted);
            }
        }
    }
}

proptest! {
    #![proptest_config(config(32))]

    /// Pinning to any CPU id: done, or refused with the id in the message. Each case runs on a
    /// thread of its own, so the test's threads keep their affinity.
    #[test]
    fn pin_to_any_cpu(cpu in prop_oneof![0usize..=8, 1020usize..=1030, any::<usize>()]) {
        let result = std::thread::spawn(move || pin_current_thread(cpu).map_err(|e| (e.cpu(), e.to_string())))
            .join()
            .expect("pinning never panics");
        if let Err((at, message)) = result {
            prop_assert_eq!(at, cpu);
            prop_assert!(message.starts_with(&format!("cannot pin the current thread to CPU {cpu}: ")), "{}", message);
        }
    }
}

// ---- regressions and edges, as plain tests ----

#[test]
fn counts_at_the_limits() {
    // One 4096-processor topology (about a second to build in a debug build).
    let t = Topology::synthetic("64x64, 64 L1 per processor").expect("valid");
    assert_eq!((t.num_processors(), t.num_nodes(), t.caches().len()), (4096, 64, 4096));
    for spec in [
        "4097",
        "64x65",
        "16x16x17",
        "18446744073709551615",
        "18446744073709551616",
        "4294967296x4294967296",
        "18446744073709551615x18446744073709551615x18446744073709551615",
        "0x99999999999999999999999",
        "1x1, 1099511627840 L1 per core",
        "1x1, 18446744073709551615 GiB L1 per core",
        "1, 64 L18446744073709551616 per core",
        "",
        ",",
        "×",
        "\u{0}",
        "2x2, 64 L1d per core, 64 L1d per node",
    ] {
        assert!(check_spec(spec).expect("checked").is_none(), "{spec:?} was accepted");
    }
    // The largest cache a spec may name.
    let t = check_spec("1x1, 1099511627776 L1 per core").expect("checked").expect("1 TiB is allowed");
    assert_eq!(t.caches()[0].size, 1 << 40);
    assert!(Topology::single_node(4097).is_err() && Topology::single_node(0).is_err());
}

/// Found by `specs_that_follow_the_grammar`: a unit written against its `x` was one unknown word.
#[test]
fn a_unit_against_its_x() {
    let t = check_spec("1 coresx1 threads").expect("checked").expect("valid");
    assert_eq!(t.num_processors(), 1);
    let t = check_spec("2 nodesx3 cores").expect("checked").expect("valid");
    assert_eq!((t.num_nodes(), t.num_processors()), (2, 6));
}
