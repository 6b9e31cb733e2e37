//! The scripted source: misses chosen by a test.

use std::fmt;

use super::{CounterSource, RunInfo, SourceKind};

/// A script as a function of the run and its number.
type ScriptFn = dyn FnMut(&RunInfo, u64) -> u64 + Send;

/// Misses from a script, so that policy scenarios are deterministic.
///
/// The misses of a run are, in this order of precedence: the entry of [`per_run`](Self::per_run)
/// for this run's number on this source (counting from 0), the entry of
/// [`per_ult`](Self::per_ult) for the ULT, or the default given to [`new`](Self::new). For
/// anything else, [`from_fn`](Self::from_fn). A source belongs to one processor: give each
/// processor its own script to script per processor.
///
/// ```
/// use elite_affinity::{CounterSource, RunInfo, ScriptedSource};
///
/// let mut source = ScriptedSource::new(5).per_ult(1, 100).per_run([7, 8]);
/// let mut run = |ult| {
///     source.begin_run();
///     source.end_run(&RunInfo::new(ult, 0, 0.0))
/// };
/// assert_eq!([run(1), run(1), run(1), run(2)], [7, 8, 100, 5]);
/// ```
pub struct ScriptedSource {
    default: u64,
    /// Sorted by ULT id, one entry per id.
    per_ult: Vec<(u64, u64)>,
    per_run: Vec<u64>,
    function: Option<Box<ScriptFn>>,
    runs: u64,
    clock: u64,
}

impl ScriptedSource {
    /// A script where every run takes `misses` misses.
    pub fn new(misses: u64) -> ScriptedSource {
        ScriptedSource {
            default: misses,
            per_ult: Vec::new(),
            per_run: Vec::new(),
            function: None,
            runs: 0,
            clock: 0,
        }
    }

    /// Every run of ULT `ult` takes `misses` (replacing an earlier entry for `ult`).
    pub fn per_ult(mut self, ult: u64, misses: u64) -> ScriptedSource {
        match self.per_ult.binary_search_by_key(&ult, |&(id, _)| id) {
            Ok(i) => self.per_ult[i].1 = misses,
            Err(i) => self.per_ult.insert(i, (ult, misses)),
        }
        self
    }

    /// Run `i` on this source takes the `i`-th of `misses`, whatever the ULT (then the other
    /// rules apply).
    pub fn per_run(mut self, misses: impl IntoIterator<Item = u64>) -> ScriptedSource {
        self.per_run = misses.into_iter().collect();
        self
    }

    /// Every run takes `script(run, i)` misses, with `i` the run's number on this source.
    ///
    /// ```
    /// use elite_affinity::{CounterSource, RunInfo, ScriptedSource};
    ///
    /// let mut source = ScriptedSource::from_fn(|run, i| run.ult * 10 + i);
    /// source.begin_run();
    /// assert_eq!(source.end_run(&RunInfo::new(3, 0, 0.0)), 30);
    /// source.begin_run();
    /// assert_eq!(source.end_run(&RunInfo::new(3, 0, 0.0)), 31);
    /// ```
    pub fn from_fn(script: impl FnMut(&RunInfo, u64) -> u64 + Send + 'static) -> ScriptedSource {
        ScriptedSource { function: Some(Box::new(script)), ..ScriptedSource::new(0) }
    }

    /// The runs ended so far.
    pub fn runs(&self) -> u64 {
        self.runs
    }
}

impl CounterSource for ScriptedSource {
    #[inline]
    fn kind(&self) -> &SourceKind {
        &SourceKind::Scripted
    }

    #[inline]
    fn begin_run(&mut self) -> u64 {
        self.clock
    }

    fn end_run(&mut self, run: &RunInfo) -> u64 {
        let n = self.runs;
        self.runs += 1;
        let misses = if let Some(function) = &mut self.function {
            function(run, n)
        } else if let Some(&m) = usize::try_from(n).ok().and_then(|i| self.per_run.get(i)) {
            m
        } else {
            match self.per_ult.binary_search_by_key(&run.ult, |&(id, _)| id) {
                Ok(i) => self.per_ult[i].1,
                Err(_) => self.default,
            }
        };
        self.clock = self.clock.saturating_add(misses);
        misses
    }

    #[inline]
    fn clock(&self) -> u64 {
        self.clock
    }
}

impl fmt::Debug for ScriptedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedSource")
            .field("default", &self.default)
            .field("per_ult", &self.per_ult)
            .field("per_run", &self.per_run)
            .field("function", &self.function.is_some())
            .field("runs", &self.runs)
            .field("clock", &self.clock)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(source: &mut ScriptedSource, ult: u64) -> u64 {
        let before = source.begin_run();
        let misses = source.end_run(&RunInfo::new(ult, 0, 0.0));
        assert_eq!(source.clock(), before + misses, "the clock adds the run's misses");
        misses
    }

    #[test]
    fn precedence_run_then_ult_then_default() {
        let mut source = ScriptedSource::new(1).per_ult(9, 90).per_ult(4, 40).per_ult(9, 99).per_run([0, 5]);
        assert_eq!(run(&mut source, 9), 0);
        assert_eq!(run(&mut source, 4), 5);
        assert_eq!(run(&mut source, 9), 99, "the later entry for 9 wins");
        assert_eq!(run(&mut source, 4), 40);
        assert_eq!(run(&mut source, 3), 1);
        assert_eq!(source.runs(), 5);
        assert_eq!(source.clock(), 145);
        assert!(format!("{source:?}").contains("per_ult: [(4, 40), (9, 99)]"));
    }

    #[test]
    fn function_sees_the_run() {
        let mut source = ScriptedSource::from_fn(|run, i| run.footprint_bytes as u64 + i);
        source.begin_run();
        assert_eq!(source.end_run(&RunInfo::new(0, 100, 0.0)), 100);
        source.begin_run();
        assert_eq!(source.end_run(&RunInfo::new(0, 100, 0.0)), 101);
        assert_eq!(source.clock(), 201);
    }

    #[test]
    fn is_send() {
        fn send<T: Send>(_: &T) {}
        send(&ScriptedSource::new(0));
    }
}
