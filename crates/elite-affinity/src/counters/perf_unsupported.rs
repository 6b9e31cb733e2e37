//! The hardware source on systems without `perf_event_open`: it never opens.

use std::fmt;
use std::marker::PhantomData;

use super::{CounterSource, ReadAccess, RunInfo, SourceKind};

/// What a [`HardwareSource`] counts (see the Linux build for the meaning of each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterEvent {
    /// Last-level cache misses.
    CacheMisses,
    /// Page faults, a software event.
    SoftwarePageFaults,
}

/// Why the hardware counter could not be opened: here, always that the system has no perf events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenError {
    event: CounterEvent,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "perf_event_open({:?}) failed (perf events exist only on Linux)", self.event)
    }
}

impl std::error::Error for OpenError {}

/// A hardware counter; on this system [`open`](Self::open) always fails.
#[derive(Debug)]
pub struct HardwareSource {
    kind: SourceKind,
    _thread_bound: PhantomData<*const ()>,
}

impl HardwareSource {
    /// Fails: this system has no perf events.
    pub fn open(event: CounterEvent) -> Result<HardwareSource, OpenError> {
        Err(OpenError { event })
    }

    /// How this source reads its counter.
    pub fn access(&self) -> ReadAccess {
        ReadAccess::Syscall
    }

    /// The count since the source was opened.
    pub fn read(&mut self) -> u64 {
        0
    }
}

impl CounterSource for HardwareSource {
    fn kind(&self) -> &SourceKind {
        &self.kind
    }

    fn begin_run(&mut self) -> u64 {
        0
    }

    fn end_run(&mut self, _run: &RunInfo) -> u64 {
        0
    }

    fn clock(&self) -> u64 {
        0
    }
}
