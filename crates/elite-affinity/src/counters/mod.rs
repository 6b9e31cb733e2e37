//! Where the cache misses of each run come from: a per-processor [`CounterSource`].
//!
//! The processor loop calls [`begin_run`](CounterSource::begin_run) before it resumes a ULT and
//! [`end_run`](CounterSource::end_run) when the ULT switches back, and gets the misses of that
//! run. Every source also keeps a *miss clock*, the misses counted on its processor so far
//! ([`clock`](CounterSource::clock)): the foreign misses a waiting ULT has suffered there are the
//! clock now minus the clock when its run ended ([`Footprint`](crate::Footprint) keeps that
//! stamp).
//!
//! Three sources:
//!
//! - [`HardwareSource`]: a hardware cache-miss counter of the calling thread through
//!   `perf_event_open`, read with `rdpmc` through the event's mmap page where the kernel allows
//!   it, with the `read` system call otherwise;
//! - [`EstimatedSource`]: for machines without a PMU, misses estimated from the footprint a ULT
//!   declared and the lines the cache model says are still cached;
//! - [`ScriptedSource`]: misses from a script, for deterministic tests of policies.
//!
//! [`AnySource::detect`] opens the hardware counter and falls back to the estimator, saying why;
//! [`CounterSource::kind`] says which source runs (for the runtime's `stats()`).
//!
//! Sources are per processor and per thread: create each on the worker thread that uses it (a
//! hardware counter counts the thread that opened it, so [`HardwareSource`] is not `Send`). The
//! hot-path methods do not allocate.

mod estimated;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod perf;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[path = "perf_unsupported.rs"]
mod perf;
mod scripted;

use std::fmt;

pub use estimated::EstimatedSource;
pub use perf::{CounterEvent, HardwareSource, OpenError};
pub use scripted::ScriptedSource;

use crate::CacheModel;

/// What the runtime tells a source about the run that just ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunInfo {
    /// The ULT's id (for [`ScriptedSource::per_ult`]).
    pub ult: u64,
    /// The bytes of data the ULT declared it works on (`Builder::footprint`,
    /// `elite_rt::set_footprint`); 0 when it declared none.
    pub footprint_bytes: usize,
    /// The lines of that data the cache model expected cached when the run began:
    /// [`Footprint::valid_on`](crate::Footprint::valid_on) with the clock
    /// [`begin_run`](CounterSource::begin_run) returned.
    pub valid_at_start: f32,
}

impl RunInfo {
    /// A `RunInfo` with these fields.
    #[inline]
    pub const fn new(ult: u64, footprint_bytes: usize, valid_at_start: f32) -> RunInfo {
        RunInfo { ult, footprint_bytes, valid_at_start }
    }
}

/// Which source a processor uses, as [`CounterSource::kind`] reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SourceKind {
    /// A hardware counter, read this way.
    Hardware(ReadAccess),
    /// Estimated by the cache model; `no_pmu` says why the hardware counter could not be opened
    /// when [`AnySource::detect`] chose it.
    Estimated {
        /// The hardware counter's [`OpenError`], as text.
        no_pmu: Option<String>,
    },
    /// From a script.
    Scripted,
}

/// How a [`HardwareSource`] reads its counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadAccess {
    /// The `rdpmc` instruction, guided by the event's mmap page: no system call.
    Rdpmc,
    /// The `read` system call on the event's file descriptor.
    Syscall,
}

impl fmt::Display for SourceKind {
    /// `"hardware (rdpmc)"`, `"hardware (read)"`, `"estimated (no PMU: <reason>)"`,
    /// `"estimated"`, `"scripted"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceKind::Hardware(ReadAccess::Rdpmc) => f.write_str("hardware (rdpmc)"),
            SourceKind::Hardware(ReadAccess::Syscall) => f.write_str("hardware (read)"),
            SourceKind::Estimated { no_pmu: Some(reason) } => write!(f, "estimated (no PMU: {reason})"),
            SourceKind::Estimated { no_pmu: None } => f.write_str("estimated"),
            SourceKind::Scripted => f.write_str("scripted"),
        }
    }
}

/// A per-processor source of cache-miss counts.
///
/// The protocol, for each run of a ULT on the processor that owns the source:
///
/// 1. `let clock = source.begin_run();` just before resuming the ULT;
/// 2. the ULT runs;
/// 3. `let misses = source.end_run(&run);` just after it switched back.
///
/// `begin_run` and `end_run` alternate, starting with `begin_run`. The clock never decreases:
/// after `end_run` it has grown by at least the run's misses (a hardware counter also counts the
/// scheduler's own misses between runs, which are foreign misses to every waiting ULT).
///
/// ```
/// use elite_affinity::{CacheModel, CounterSource, Footprint, RunInfo, ScriptedSource};
///
/// let model = CacheModel::new(32768, 64)?;
/// let mut source = ScriptedSource::new(0).per_ult(7, 1000); // ULT 7 takes 1000 misses a run
/// let mut ult = Footprint::EMPTY;
/// let processor = 0;
///
/// let clock = source.begin_run();
/// let valid = ult.valid_on(&model, processor, clock);
/// // ... resume ULT 7 until it switches back ...
/// let misses = source.end_run(&RunInfo::new(7, 64 << 10, valid));
/// ult.record_run(&model, processor, valid, misses, source.clock());
/// assert_eq!((misses, source.clock()), (1000, 1000));
/// assert!(ult.lines() > 980.0);
/// # Ok::<(), elite_affinity::ModelError>(())
/// ```
pub trait CounterSource {
    /// Which source this is.
    fn kind(&self) -> &SourceKind;

    /// Starts a run; returns the clock (misses counted on this processor so far).
    fn begin_run(&mut self) -> u64;

    /// Ends the run begun by the last [`begin_run`](Self::begin_run) and returns its misses.
    fn end_run(&mut self, run: &RunInfo) -> u64;

    /// The clock as of the last `begin_run` or `end_run` (0 before the first).
    fn clock(&self) -> u64;
}

/// One of the three sources, chosen at run time; dispatches without a virtual call.
#[derive(Debug)]
pub enum AnySource {
    /// A hardware counter.
    Hardware(HardwareSource),
    /// The estimator.
    Estimated(EstimatedSource),
    /// A script.
    Scripted(ScriptedSource),
}

impl AnySource {
    /// The hardware cache-miss counter of the calling thread where it opens, otherwise the
    /// estimator for `model`, whose [`kind`](CounterSource::kind) then says why the counter did
    /// not open. Call it on the worker thread the source will count.
    ///
    /// ```
    /// use elite_affinity::{AnySource, CacheModel, CounterSource, SourceKind};
    ///
    /// let source = AnySource::detect(&CacheModel::new(32768, 64)?);
    /// match source.kind() {
    ///     SourceKind::Hardware(_) => println!("counting cache misses: {}", source.kind()),
    ///     other => println!("{other}"), // "estimated (no PMU: perf_event_open(...) failed: ...)"
    /// }
    /// # Ok::<(), elite_affinity::ModelError>(())
    /// ```
    pub fn detect(model: &CacheModel) -> AnySource {
        match HardwareSource::open(CounterEvent::CacheMisses) {
            Ok(hardware) => AnySource::Hardware(hardware),
            Err(err) => AnySource::Estimated(EstimatedSource::without_pmu(model, err.to_string())),
        }
    }
}

impl CounterSource for AnySource {
    #[inline]
    fn kind(&self) -> &SourceKind {
        match self {
            AnySource::Hardware(s) => s.kind(),
            AnySource::Estimated(s) => s.kind(),
            AnySource::Scripted(s) => s.kind(),
        }
    }

    #[inline]
    fn begin_run(&mut self) -> u64 {
        match self {
            AnySource::Hardware(s) => s.begin_run(),
            AnySource::Estimated(s) => s.begin_run(),
            AnySource::Scripted(s) => s.begin_run(),
        }
    }

    #[inline]
    fn end_run(&mut self, run: &RunInfo) -> u64 {
        match self {
            AnySource::Hardware(s) => s.end_run(run),
            AnySource::Estimated(s) => s.end_run(run),
            AnySource::Scripted(s) => s.end_run(run),
        }
    }

    #[inline]
    fn clock(&self) -> u64 {
        match self {
            AnySource::Hardware(s) => s.clock(),
            AnySource::Estimated(s) => s.clock(),
            AnySource::Scripted(s) => s.clock(),
        }
    }
}

impl From<HardwareSource> for AnySource {
    fn from(source: HardwareSource) -> AnySource {
        AnySource::Hardware(source)
    }
}

impl From<EstimatedSource> for AnySource {
    fn from(source: EstimatedSource) -> AnySource {
        AnySource::Estimated(source)
    }
}

impl From<ScriptedSource> for AnySource {
    fn from(source: ScriptedSource) -> AnySource {
        AnySource::Scripted(source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_display() {
        assert_eq!(SourceKind::Hardware(ReadAccess::Rdpmc).to_string(), "hardware (rdpmc)");
        assert_eq!(SourceKind::Hardware(ReadAccess::Syscall).to_string(), "hardware (read)");
        assert_eq!(
            SourceKind::Estimated { no_pmu: Some("no counter".into()) }.to_string(),
            "estimated (no PMU: no counter)"
        );
        assert_eq!(SourceKind::Estimated { no_pmu: None }.to_string(), "estimated");
        assert_eq!(SourceKind::Scripted.to_string(), "scripted");
    }

    #[test]
    fn detect_falls_back_to_the_estimator_with_a_reason() {
        let model = CacheModel::new(1024, 64).expect("valid");
        let mut source = AnySource::detect(&model);
        match HardwareSource::open(CounterEvent::CacheMisses) {
            Ok(_) => assert!(matches!(source.kind(), SourceKind::Hardware(_)), "{}", source.kind()),
            Err(err) => {
                // These build machines have no PMU: this is the branch that runs here.
                let shown = source.kind().to_string();
                assert_eq!(shown, format!("estimated (no PMU: {err})"));
                assert!(shown.contains("perf_event_open"), "{shown}");
                assert_eq!(source.begin_run(), 0);
                assert_eq!(source.end_run(&RunInfo::new(1, 64 * 10, 4.0)), 6);
                assert_eq!(source.clock(), 6);
            }
        }
    }

    #[test]
    fn any_source_dispatches() {
        let mut source: AnySource = ScriptedSource::new(3).into();
        assert_eq!(source.kind(), &SourceKind::Scripted);
        assert_eq!(source.begin_run(), 0);
        assert_eq!(source.end_run(&RunInfo::new(0, 0, 0.0)), 3);
        assert_eq!(source.clock(), 3);
    }
}
