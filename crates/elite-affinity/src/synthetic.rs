//! Parsing of synthetic topology specs.
//!
//! A spec is a shape, then any number of cache clauses after commas:
//!
//! ```text
//! spec    = shape { "," cache }
//! shape   = factor [ "x" factor [ "x" factor ] ]
//! factor  = count [ unit ]
//! cache   = count [ size-unit ] level ( "per" scope | "shared" )
//! level   = "L" digit [ "d" | "i" ]            (no space inside: "L2", "L1d")
//! scope   = processor | thread | core | node | machine    (singular or plural)
//! ```
//!
//! `x` may be written `X` or `×`; words are case-insensitive and spaces between tokens optional
//! (`"2nodesx2cores"` reads as `"2 nodes x 2 cores"`).
//! The factors of a shape are, by position: one factor counts processors (`"4"`, `"4 cores"`);
//! two count nodes and processors (or cores) per node (`"2 nodes x 2 processors"`), or, when the
//! first says `cores`, cores and threads per core (`"2 cores x 2 threads"`); three count nodes,
//! cores per node and threads per core (`"2 nodes x 4 cores x 2 threads"`). A unit, where given,
//! must name what its position counts. Without threads every processor is a core of its own.
//!
//! Sizes take `B`, `K`/`KB`/`KiB`, `M`/`MB`/`MiB`, `G`/`GB`/`GiB`, all binary as CPU vendors write
//! cache sizes; a bare number is bytes. Every synthetic cache has [`SYNTHETIC_LINE_SIZE`]-byte
//! lines, so its size must be a positive multiple of that. `L<n>` is a unified cache, `L<n>d` a
//! data cache and `L<n>i` an instruction cache.

use std::fmt;

use crate::topology::{CacheKind, TopologyError, MAX_PROCESSORS};

/// The line size of every cache in a synthetic topology, in bytes.
pub(crate) const SYNTHETIC_LINE_SIZE: u32 = 64;

/// The highest cache level a spec may name.
const MAX_LEVEL: u8 = 4;

/// Which processors one synthetic cache serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Scope {
    Processor,
    Core,
    Node,
    Machine,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Scope::Processor => "processor",
            Scope::Core => "core",
            Scope::Node => "node",
            Scope::Machine => "machine",
        }
    }
}

/// One cache clause: `2 MiB L2 per core`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheSpec {
    pub(crate) size: u64,
    pub(crate) level: u8,
    pub(crate) kind: CacheKind,
    pub(crate) scope: Scope,
}

/// The shape a spec asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) nodes: usize,
    pub(crate) cores_per_node: usize,
    pub(crate) threads_per_core: usize,
    pub(crate) caches: Vec<CacheSpec>,
}

impl Shape {
    /// A shape without caches: `nodes` nodes of `per_node` single-thread cores.
    pub(crate) fn plain(nodes: usize, per_node: usize) -> Shape {
        Shape { nodes, cores_per_node: per_node, threads_per_core: 1, caches: Vec::new() }
    }

    /// Processors per node.
    pub(crate) fn per_node(&self) -> usize {
        self.cores_per_node * self.threads_per_core
    }

    /// The canonical spec of this shape, itself a valid spec: `"2x2"`, `"2x4x2"`,
    /// `"2x2, 2 MiB L2 per core, 32 MiB L3 per node"`.
    pub(crate) fn canonical(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.nodes, self.cores_per_node)?;
        if self.threads_per_core > 1 {
            write!(f, "x{}", self.threads_per_core)?;
        }
        for cache in &self.caches {
            let kind = match cache.kind {
                CacheKind::Data => "d",
                CacheKind::Instruction => "i",
                CacheKind::Unified => "",
            };
            write!(f, ", {} L{}{kind} per {}", ByteSize(cache.size), cache.level, cache.scope.name())?;
        }
        Ok(())
    }
}

/// A byte count written with the largest binary unit that divides it: `2 MiB`, `48 KiB`, `96 B`.
pub(crate) struct ByteSize(pub(crate) u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if self.0 != 0 && self.0.is_multiple_of(1 << shift) {
                return write!(f, "{} {unit}", self.0 >> shift);
            }
        }
        write!(f, "{} B", self.0)
    }
}

/// A token of a spec and where it starts and ends (byte offsets).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Token {
    kind: TokenKind,
    start: usize,
    end: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum TokenKind {
    /// Decimal digits; `None` when they overflow `u64`.
    Number(Option<u64>),
    /// ASCII letters, lowercased.
    Word(String),
    /// `x`, `X` or `×` standing alone.
    Times,
    Comma,
    /// Any other character.
    Other,
}

fn tokenize(spec: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = spec.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let take_while = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>, p: fn(char) -> bool| {
            let mut end = start;
            while let Some(&(i, c)) = chars.peek() {
                if !p(c) {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            end
        };
        let (kind, end) = if c.is_ascii_digit() {
            let end = take_while(&mut chars, |c| c.is_ascii_digit());
            (TokenKind::Number(spec[start..end].parse().ok()), end)
        } else if c.is_ascii_alphabetic() {
            let end = take_while(&mut chars, |c| c.is_ascii_alphabetic());
            let word = spec[start..end].to_ascii_lowercase();
            // A unit written against its `x` ("2 nodesx2"): the unit, then the times sign.
            if let Some(unit) = word.strip_suffix('x').filter(|w| unit_of(w).is_some()) {
                tokens.push(Token { kind: TokenKind::Word(unit.to_string()), start, end: end - 1 });
                tokens.push(Token { kind: TokenKind::Times, start: end - 1, end });
                continue;
            }
            (if word == "x" { TokenKind::Times } else { TokenKind::Word(word) }, end)
        } else {
            chars.next();
            let end = start + c.len_utf8();
            let kind = match c {
                '×' => TokenKind::Times,
                ',' => TokenKind::Comma,
                _ => TokenKind::Other,
            };
            (kind, end)
        };
        tokens.push(Token { kind, start, end });
    }
    tokens
}

/// What a shape factor's unit says it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Nodes,
    Cores,
    Processors,
    Threads,
}

fn unit_of(word: &str) -> Option<Unit> {
    match word {
        "node" | "nodes" => Some(Unit::Nodes),
        "core" | "cores" => Some(Unit::Cores),
        "processor" | "processors" => Some(Unit::Processors),
        "thread" | "threads" => Some(Unit::Threads),
        _ => None,
    }
}

/// A recursive-descent parser over the tokens of one spec.
struct Parser<'a> {
    spec: &'a str,
    tokens: Vec<Token>,
    next: usize,
}

/// One parsed shape factor: its count (`None`: overflow), unit, and where the factor starts.
struct Factor {
    count: Option<u64>,
    unit: Option<(Unit, usize)>,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next)
    }

    fn error(&self, expected: &str) -> TopologyError {
        match self.peek() {
            Some(token) => TopologyError::syntax(
                self.spec,
                token.start,
                Some(&self.spec[token.start..token.end]),
                expected,
            ),
            None => TopologyError::syntax(self.spec, self.spec.len(), None, expected),
        }
    }

    fn error_at(&self, token: usize, expected: &str) -> TopologyError {
        let t = &self.tokens[token];
        TopologyError::syntax(self.spec, t.start, Some(&self.spec[t.start..t.end]), expected)
    }

    /// An error showing the token at `token` together with the tokens that follow it without a
    /// space (`"L5"`, `"L2x"`).
    fn error_joined(&self, token: usize, expected: &str) -> TopologyError {
        let start = self.tokens[token].start;
        let mut end = self.tokens[token].end;
        for t in &self.tokens[token + 1..] {
            if t.start != end {
                break;
            }
            end = t.end;
        }
        TopologyError::syntax(self.spec, start, Some(&self.spec[start..end]), expected)
    }

    /// Takes the next token if it is a word among `words`.
    fn eat_word(&mut self, words: &[&str]) -> Option<String> {
        match self.peek() {
            Some(Token { kind: TokenKind::Word(w), .. }) if words.contains(&w.as_str()) => {
                let w = w.clone();
                self.next += 1;
                Some(w)
            }
            _ => None,
        }
    }

    fn eat(&mut self, kind: &TokenKind) -> bool {
        if self.peek().is_some_and(|t| &t.kind == kind) {
            self.next += 1;
            true
        } else {
            false
        }
    }

    fn number(&mut self, expected: &str) -> Result<Option<u64>, TopologyError> {
        match self.peek() {
            Some(Token { kind: TokenKind::Number(n), .. }) => {
                let n = *n;
                self.next += 1;
                Ok(n)
            }
            _ => Err(self.error(expected)),
        }
    }

    fn factor(&mut self) -> Result<Factor, TopologyError> {
        let count = self.number("a count such as \"2\"")?;
        let unit = match self.peek() {
            Some(Token { kind: TokenKind::Word(w), start, .. }) => match unit_of(w) {
                Some(unit) => {
                    let start = *start;
                    self.next += 1;
                    Some((unit, start))
                }
                None => {
                    return Err(
                        self.error("\"nodes\", \"cores\", \"processors\" or \"threads\" after a count")
                    )
                }
            },
            _ => None,
        };
        Ok(Factor { count, unit })
    }

    /// The shape's factors, checked against what each position counts.
    fn shape(&mut self) -> Result<(usize, [Option<u64>; 3]), TopologyError> {
        let mut factors = vec![self.factor()?];
        while factors.len() < 3 && self.eat(&TokenKind::Times) {
            factors.push(self.factor()?);
        }
        // Positions: what each factor counts, and the units allowed there.
        use Unit::*;
        let positions: &[(&[Unit], &str)] = match factors.as_slice() {
            [_] => &[(&[Processors, Cores], "\"processors\" or \"cores\" (one count is processors)")],
            [Factor { unit: Some((Cores, _)), .. }, _] => {
                &[(&[Cores], ""), (&[Threads, Processors], "\"threads\" (threads per core)")]
            }
            [_, _] => &[
                (&[Nodes], "\"nodes\" (of two counts the first is nodes, or \"cores\" with \"threads\")"),
                (&[Processors, Cores], "\"processors\" or \"cores\" (per node)"),
            ],
            _ => &[
                (&[Nodes], "\"nodes\" (of three counts the first is nodes)"),
                (&[Cores], "\"cores\" (of three counts the second is cores per node)"),
                (&[Threads, Processors], "\"threads\" (of three counts the third is threads per core)"),
            ],
        };
        for (factor, (allowed, expected)) in factors.iter().zip(positions) {
            if let Some((unit, start)) = factor.unit {
                if !allowed.contains(&unit) {
                    let token = self.tokens.iter().position(|t| t.start == start).unwrap_or(0);
                    return Err(self.error_at(token, expected));
                }
            }
        }
        let counts: Vec<Option<u64>> = factors.iter().map(|f| f.count).collect();
        let counts = match (counts.as_slice(), factors[0].unit) {
            ([p], _) => [Some(1), *p, Some(1)],
            ([c, t], Some((Cores, _))) => [Some(1), *c, *t],
            ([n, p], _) => [*n, *p, Some(1)],
            ([n, c, t, ..], _) => [*n, *c, *t],
            // `factors` holds one to three entries.
            ([], _) => [None; 3],
        };
        Ok((factors.len(), counts))
    }

    fn cache(&mut self) -> Result<CacheSpec, TopologyError> {
        let size_at = self.next;
        let count = self.number("a cache size such as \"2 MiB\" after \",\"")?;
        let multiplier = match self.eat_word(&["b", "k", "kb", "kib", "m", "mb", "mib", "g", "gb", "gib"]) {
            None => 1u64,
            Some(unit) => match unit.as_bytes()[0] {
                b'k' => 1 << 10,
                b'm' => 1 << 20,
                b'g' => 1 << 30,
                _ => 1,
            },
        };
        let size = count.and_then(|c| c.checked_mul(multiplier));
        let line = u64::from(SYNTHETIC_LINE_SIZE);
        let size = match size {
            Some(size) if size > 0 && size.is_multiple_of(line) && size <= 1 << 40 => size,
            _ => {
                return Err(self.error_at(
                    size_at,
                    "a cache size that is a positive multiple of the 64-byte line, at most 1 TiB",
                ))
            }
        };
        // The level: "l" then, adjacent, a digit, then optionally an adjacent "d" or "i".
        let level_expected = "a cache level \"L1\"..\"L4\", optionally followed by \"d\" or \"i\"";
        let level_at = self.next;
        let Some(Token { kind: TokenKind::Word(l), end: l_end, .. }) = self.peek().cloned() else {
            return Err(self.error(level_expected));
        };
        // "L2" tokenizes as a word "l" and a number; "L1d" adds a word "d". A word like "l1x" is
        // refused with the level message.
        if l != "l" {
            return Err(self.error_joined(level_at, level_expected));
        }
        self.next += 1;
        let level = match self.peek() {
            Some(Token { kind: TokenKind::Number(Some(n)), start, .. })
                if *start == l_end && (1..=u64::from(MAX_LEVEL)).contains(n) =>
            {
                let n = *n as u8;
                self.next += 1;
                n
            }
            _ => return Err(self.error_joined(level_at, level_expected)),
        };
        let digit_end = self.tokens[self.next - 1].end;
        let kind = match self.peek() {
            Some(Token { kind: TokenKind::Word(w), start, .. }) if *start == digit_end => {
                let kind = match w.as_str() {
                    "d" => CacheKind::Data,
                    "i" => CacheKind::Instruction,
                    _ => return Err(self.error_joined(level_at, level_expected)),
                };
                self.next += 1;
                kind
            }
            _ => CacheKind::Unified,
        };
        let scope_expected = "\"per processor\", \"per core\", \"per node\", \"per machine\" or \"shared\"";
        let scope = if self.eat_word(&["shared"]).is_some() {
            Scope::Machine
        } else if self.eat_word(&["per"]).is_some() {
            match self.eat_word(&[
                "processor",
                "processors",
                "thread",
                "threads",
                "core",
                "cores",
                "node",
                "nodes",
                "machine",
            ]) {
                Some(w) if w.starts_with('p') || w.starts_with('t') => Scope::Processor,
                Some(w) if w.starts_with('c') => Scope::Core,
                Some(w) if w.starts_with('n') => Scope::Node,
                Some(_) => Scope::Machine,
                None => return Err(self.error(scope_expected)),
            }
        } else {
            return Err(self.error(scope_expected));
        };
        Ok(CacheSpec { size, level, kind, scope })
    }
}

/// Parses and checks a spec: at least one node, at least one processor per node, at most
/// [`MAX_PROCESSORS`] in all, and no cache level and kind named twice.
pub(crate) fn parse_shape(spec: &str) -> Result<Shape, TopologyError> {
    let mut parser = Parser { spec, tokens: tokenize(spec), next: 0 };
    let (factors, [nodes, cores, threads]) = parser.shape()?;
    let mut caches: Vec<CacheSpec> = Vec::new();
    while parser.peek().is_some() {
        if !parser.eat(&TokenKind::Comma) {
            let expected = if caches.is_empty() && factors < 3 {
                "\"x\", \",\" or the end"
            } else if caches.is_empty() {
                "\",\" or the end (a shape has at most three counts)"
            } else {
                "\",\" or the end"
            };
            return Err(parser.error(expected));
        }
        let at = parser.next;
        let cache = parser.cache()?;
        if caches.iter().any(|c| c.level == cache.level && c.kind == cache.kind) {
            return Err(parser.error_at(at, "each cache level and kind at most once"));
        }
        caches.push(cache);
    }
    caches.sort_by_key(|c| (c.level, c.kind));
    if nodes == Some(0) {
        return Err(TopologyError::no_nodes(spec));
    }
    let to_usize = |n: Option<u64>| n.and_then(|n| usize::try_from(n).ok());
    let (nodes, cores, threads) = (to_usize(nodes), to_usize(cores), to_usize(threads));
    let total = nodes.zip(cores).zip(threads).and_then(|((n, c), t)| n.checked_mul(c)?.checked_mul(t));
    match (nodes, cores, threads, total) {
        (Some(nodes), Some(cores), Some(threads), Some(total)) if (1..=MAX_PROCESSORS).contains(&total) => {
            Ok(Shape { nodes, cores_per_node: cores, threads_per_core: threads, caches })
        }
        (_, Some(0), _, _) | (_, _, Some(0), _) => Err(TopologyError::processor_count_in(Some(0), spec)),
        (_, _, _, total) => Err(TopologyError::processor_count_in(total, spec)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(nodes: usize, per_node: usize) -> Shape {
        Shape::plain(nodes, per_node)
    }

    #[test]
    fn accepted_short_forms() {
        for spec in [
            "2x2",
            "2 x 2",
            "2X2",
            "2×2",
            " 2 x 2 ",
            "2 nodes x 2 processors",
            "2 nodes × 2 processors",
            "2 Nodes X 2 Processors",
            "2 nodes x 2",
            "2 x 2 processors",
            "2nodes x 2processors",
            "2 nodes x 2 cores",
        ] {
            assert_eq!(parse_shape(spec), Ok(shape(2, 2)), "{spec:?}");
        }
        assert_eq!(parse_shape("4"), Ok(shape(1, 4)));
        assert_eq!(parse_shape("4 processors"), Ok(shape(1, 4)));
        assert_eq!(parse_shape("4 cores"), Ok(shape(1, 4)));
        assert_eq!(parse_shape("1 processor"), Ok(shape(1, 1)));
        assert_eq!(parse_shape("1 node x 1 processor"), Ok(shape(1, 1)));
        assert_eq!(parse_shape("3x5"), Ok(shape(3, 5)));
        assert_eq!(parse_shape("1x4096"), Ok(shape(1, 4096)));
        assert_eq!(parse_shape("4096"), Ok(shape(1, 4096)));
        assert_eq!(parse_shape("0002x02"), Ok(shape(2, 2)));
    }

    /// Spaces between tokens are optional, also between a unit and the `x` after it (found by the
    /// property tests: `"1 coresx1 threads"` read `coresx` as one unknown word).
    #[test]
    fn a_unit_and_its_x_without_a_space() {
        for spec in ["2 nodesx2 processors", "2 NODESX2", "2nodesx2cores", "2 nodes×2", "2nodex2corex1thread"]
        {
            assert_eq!(parse_shape(spec), Ok(shape(2, 2)), "{spec:?}");
        }
        let one_node = Shape { nodes: 1, cores_per_node: 2, threads_per_core: 2, caches: vec![] };
        assert_eq!(parse_shape("2 coresx2 threads"), Ok(one_node));
        // Only a unit gives up its `x`: other words ending in x stay whole.
        assert_eq!(
            error("2 boxx2"),
            "cannot parse topology \"2 boxx2\": expected \"nodes\", \"cores\", \"processors\" or \"threads\" after \
             a count, found \"boxx\" at byte 2"
                .to_string()
                + crate::topology::SPEC_EXAMPLES
        );
        assert_eq!(
            error("2 nodesx"),
            format!(
                "cannot parse topology \"2 nodesx\": expected a count such as \"2\" at the end{}",
                crate::topology::SPEC_EXAMPLES
            )
        );
    }

    #[test]
    fn threads_per_core() {
        let smt = Shape { nodes: 2, cores_per_node: 4, threads_per_core: 2, caches: vec![] };
        assert_eq!(parse_shape("2x4x2"), Ok(smt.clone()));
        assert_eq!(parse_shape("2 nodes x 4 cores x 2 threads"), Ok(smt.clone()));
        assert_eq!(smt.per_node(), 8);
        assert_eq!(smt.canonical(), "2x4x2");
        let one_node = Shape { nodes: 1, cores_per_node: 2, threads_per_core: 2, caches: vec![] };
        assert_eq!(parse_shape("2 cores x 2 threads"), Ok(one_node));
    }

    #[test]
    fn caches() {
        let parsed = parse_shape("2 nodes x 2 cores, 2 MiB L2 per core, 32 MiB L3 per node").expect("valid");
        assert_eq!(
            parsed.caches,
            vec![
                CacheSpec { size: 2 << 20, level: 2, kind: CacheKind::Unified, scope: Scope::Core },
                CacheSpec { size: 32 << 20, level: 3, kind: CacheKind::Unified, scope: Scope::Node },
            ]
        );
        assert_eq!(parsed.canonical(), "2x2, 2 MiB L2 per core, 32 MiB L3 per node");
        assert_eq!(parse_shape(&parsed.canonical()), Ok(parsed));

        let smt =
            parse_shape("1x2x2,48K L1d per thread,32kib L1i per processors,1MB L2 per core,8 GiB L4 shared")
                .expect("valid");
        assert_eq!(
            smt.caches.iter().map(|c| (c.size, c.level, c.kind, c.scope)).collect::<Vec<_>>(),
            vec![
                (48 << 10, 1, CacheKind::Data, Scope::Processor),
                (32 << 10, 1, CacheKind::Instruction, Scope::Processor),
                (1 << 20, 2, CacheKind::Unified, Scope::Core),
                (8 << 30, 4, CacheKind::Unified, Scope::Machine),
            ]
        );
        assert_eq!(
            smt.canonical(),
            "1x2x2, 48 KiB L1d per processor, 32 KiB L1i per processor, 1 MiB L2 per core, 8 GiB L4 per machine"
        );
        assert_eq!(parse_shape("4, 4096 L1 per machine").expect("bytes").caches[0].size, 4096);
    }

    fn error(spec: &str) -> String {
        match parse_shape(spec) {
            Ok(shape) => panic!("{spec:?} parsed as {shape:?}"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn errors_say_what_was_expected_where() {
        for (spec, message) in [
            ("", "expected a count such as \"2\" at the end"),
            (" ", "expected a count such as \"2\" at the end"),
            ("2y2", "expected \"nodes\", \"cores\", \"processors\" or \"threads\" after a count, found \"y\" at byte 1"),
            ("x", "expected a count such as \"2\", found \"x\" at byte 0"),
            ("2x", "expected a count such as \"2\" at the end"),
            ("2x2x2x2", "expected \",\" or the end (a shape has at most three counts), found \"x\" at byte 5"),
            ("two x two", "expected a count such as \"2\", found \"two\" at byte 0"),
            ("-2x2", "expected a count such as \"2\", found \"-\" at byte 0"),
            ("2.5x2", "expected \"x\", \",\" or the end, found \".\" at byte 1"),
            ("2 nodes", "expected \"processors\" or \"cores\" (one count is processors), found \"nodes\" at byte 2"),
            (
                "2 processors x 2 nodes",
                "expected \"nodes\" (of two counts the first is nodes, or \"cores\" with \"threads\"), found \
                 \"processors\" at byte 2",
            ),
            ("2 x 2 nodes", "expected \"processors\" or \"cores\" (per node), found \"nodes\" at byte 6"),
            ("2 cpus", "expected \"nodes\", \"cores\", \"processors\" or \"threads\" after a count, found \"cpus\" at byte 2"),
            ("2 2", "expected \"x\", \",\" or the end, found \"2\" at byte 2"),
            ("2x2 2 MiB L2 per core", "expected \"x\", \",\" or the end, found \"2\" at byte 4"),
            ("2x2, L2 per core", "expected a cache size such as \"2 MiB\" after \",\", found \"L\" at byte 5"),
            (
                "2 nodes x 2 cores, 2 MiB L5 per core",
                "expected a cache level \"L1\"..\"L4\", optionally followed by \"d\" or \"i\", found \"L5\" at byte 25",
            ),
            (
                "2x2, 2 MiB L 2 per core",
                "expected a cache level \"L1\"..\"L4\", optionally followed by \"d\" or \"i\", found \"L\" at byte 11",
            ),
            (
                "2x2, 2 MiB cache per core",
                "expected a cache level \"L1\"..\"L4\", optionally followed by \"d\" or \"i\", found \"cache\" at byte 11",
            ),
            (
                "2x2, 2 MiB L2",
                "expected \"per processor\", \"per core\", \"per node\", \"per machine\" or \"shared\" at the end",
            ),
            (
                "2x2, 2 MiB L2 per socket",
                "expected \"per processor\", \"per core\", \"per node\", \"per machine\" or \"shared\", found \
                 \"socket\" at byte 18",
            ),
            (
                "2x2, 100 L2 per core",
                "expected a cache size that is a positive multiple of the 64-byte line, at most 1 TiB, found \
                 \"100\" at byte 5",
            ),
            (
                "2x2, 2 MiB L2 per core, 4 MiB L2 per node",
                "expected each cache level and kind at most once, found \"4\" at byte 24",
            ),
        ] {
            assert_eq!(
                error(spec),
                format!("cannot parse topology {spec:?}: {message}{}", crate::topology::SPEC_EXAMPLES),
                "{spec:?}"
            );
        }
    }

    #[test]
    fn zero_nodes_or_processors() {
        assert_eq!(error("0x2"), "topology needs at least 1 node, got 0 (from \"0x2\")");
        assert_eq!(
            error("0 nodes x 0 processors"),
            "topology needs at least 1 node, got 0 (from \"0 nodes x 0 processors\")"
        );
        assert_eq!(error("2x0"), "topology needs 1..=4096 processors, got 0 (from \"2x0\")");
        assert_eq!(error("2x2x0"), "topology needs 1..=4096 processors, got 0 (from \"2x2x0\")");
        assert_eq!(error("0"), "topology needs 1..=4096 processors, got 0 (from \"0\")");
        assert_eq!(
            error("99999999999999999999999x0"),
            "topology needs 1..=4096 processors, got 0 (from \"99999999999999999999999x0\")"
        );
    }

    #[test]
    fn too_many_processors() {
        assert_eq!(error("4097"), "topology needs 1..=4096 processors, got 4097 (from \"4097\")");
        assert_eq!(error("64x65"), "topology needs 1..=4096 processors, got 4160 (from \"64x65\")");
        assert_eq!(error("16x16x17"), "topology needs 1..=4096 processors, got 4352 (from \"16x16x17\")");
        let huge = format!("{}x2", usize::MAX);
        assert_eq!(
            error(&huge),
            format!("topology needs 1..=4096 processors, got more than {MAX_PROCESSORS} (from {huge:?})")
        );
        assert_eq!(
            error("99999999999999999999999"),
            "topology needs 1..=4096 processors, got more than 4096 (from \"99999999999999999999999\")"
        );
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(ByteSize(2 << 20).to_string(), "2 MiB");
        assert_eq!(ByteSize(48 << 10).to_string(), "48 KiB");
        assert_eq!(ByteSize(1 << 30).to_string(), "1 GiB");
        assert_eq!(ByteSize(96).to_string(), "96 B");
        assert_eq!(ByteSize(0).to_string(), "0 B");
    }
}
