//! Parsing of synthetic topology specs: `"2x2"`, `"2 x 2"`, `"2 nodes x 2 processors"`,
//! `"2 nodes × 2 processors"`, `"4"`, `"4 processors"`.
//!
//! Grammar (case-insensitive words, whitespace free around every token):
//!
//! ```text
//! spec      = count [processors] | count [nodes] sep count [processors]
//! sep       = "x" | "X" | "×"
//! nodes     = "node" | "nodes"
//! processors = "processor" | "processors"
//! count     = decimal digits
//! ```

use crate::topology::{TopologyError, MAX_PROCESSORS};

/// The shape a spec asks for: `nodes` nodes of `per_node` processors each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) nodes: usize,
    pub(crate) per_node: usize,
}

impl Shape {
    /// The canonical spec of this shape, `"<nodes>x<per node>"`.
    pub(crate) fn canonical(self) -> String {
        format!("{}x{}", self.nodes, self.per_node)
    }
}

const NODE_WORDS: &[&str] = &["node", "nodes"];
const PROCESSOR_WORDS: &[&str] = &["processor", "processors"];

/// A count as written in a spec: `None` when its digits overflow `usize`.
type Count = Option<usize>;

/// Parses and checks a spec: at least one node and `1..=MAX_PROCESSORS` processors in all.
pub(crate) fn parse_shape(spec: &str) -> Result<Shape, TopologyError> {
    let parts: Vec<&str> = spec.split(['x', 'X', '×']).collect();
    let parsed = match parts.as_slice() {
        [processors] => parse_count(processors, PROCESSOR_WORDS).map(|p| (Some(1), p)),
        [nodes, processors] => {
            parse_count(nodes, NODE_WORDS).and_then(|n| Some((n, parse_count(processors, PROCESSOR_WORDS)?)))
        }
        _ => None,
    };
    let Some((nodes, per_node)) = parsed else {
        return Err(TopologyError::unparsable(spec));
    };
    if nodes == Some(0) {
        return Err(TopologyError::no_nodes(spec));
    }
    let total = nodes.zip(per_node).and_then(|(n, p)| n.checked_mul(p));
    match (nodes, per_node, total) {
        (Some(nodes), Some(per_node), Some(total)) if (1..=MAX_PROCESSORS).contains(&total) => {
            Ok(Shape { nodes, per_node })
        }
        (_, Some(0), _) => Err(TopologyError::processor_count_in(Some(0), spec)),
        (_, _, total) => Err(TopologyError::processor_count_in(total, spec)),
    }
}

/// Parses `"<digits>"` or `"<digits> <word>"` with `word` one of `words`. `None` when the text
/// has another form; `Some(None)` when the digits overflow `usize`.
fn parse_count(text: &str, words: &[&str]) -> Option<Count> {
    let text = text.trim();
    let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, word) = text.split_at(digits_end);
    let word = word.trim_start();
    if digits.is_empty() || !(word.is_empty() || words.iter().any(|w| w.eq_ignore_ascii_case(word))) {
        return None;
    }
    // Only digits remain, so the parse fails only on overflow.
    Some(digits.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(nodes: usize, per_node: usize) -> Shape {
        Shape { nodes, per_node }
    }

    #[test]
    fn accepted_forms() {
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
        ] {
            assert_eq!(parse_shape(spec), Ok(shape(2, 2)), "{spec:?}");
        }
        assert_eq!(parse_shape("4"), Ok(shape(1, 4)));
        assert_eq!(parse_shape("4 processors"), Ok(shape(1, 4)));
        assert_eq!(parse_shape("1 processor"), Ok(shape(1, 1)));
        assert_eq!(parse_shape("1 node x 1 processor"), Ok(shape(1, 1)));
        assert_eq!(parse_shape("3x5"), Ok(shape(3, 5)));
        assert_eq!(parse_shape("1x4096"), Ok(shape(1, 4096)));
        assert_eq!(parse_shape("4096"), Ok(shape(1, 4096)));
        assert_eq!(parse_shape("0002x02"), Ok(shape(2, 2)));
    }

    fn error(spec: &str) -> String {
        match parse_shape(spec) {
            Ok(shape) => panic!("{spec:?} parsed as {shape:?}"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn garbage_is_refused_with_the_expected_form() {
        for spec in [
            "",
            " ",
            "2y2",
            "x",
            "2x",
            "x2",
            "2x2x2",
            "two x two",
            "-2x2",
            "2.5x2",
            "2 nodes",
            "2 processors x 2 nodes",
            "2 cpus",
            "4 processorss",
            "2 x 2 nodes",
            "2 2",
        ] {
            let message = error(spec);
            assert_eq!(
                message,
                format!(
                    "cannot parse topology {spec:?}: expected \"<nodes>x<processors per node>\" \
                     such as \"2x2\" or \"2 nodes x 2 processors\", or \"<processors>\" such as \
                     \"4\""
                )
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
        let huge = format!("{}x2", usize::MAX);
        assert_eq!(
            error(&huge),
            format!("topology needs 1..=4096 processors, got more than {MAX_PROCESSORS} (from {huge:?})")
        );
        assert_eq!(
            error("99999999999999999999999"),
            "topology needs 1..=4096 processors, got more than 4096 (from \"99999999999999999999999\")"
        );
        assert_eq!(
            error("2x99999999999999999999999"),
            "topology needs 1..=4096 processors, got more than 4096 (from \"2x99999999999999999999999\")"
        );
    }
}
