//! A trace of the schedule ([`RuntimeBuilder::trace`](crate::RuntimeBuilder::trace), or
//! `ELITE_TRACE=<path>`), and the periodic summary on stderr (`ELITE_SCHEDTRACE=<ms>`, `sched`).
//!
//! # What is recorded, and where
//!
//! Each processor records its events in its own [`Ring`], a buffer of fixed capacity that only
//! the OS thread running the processor touches (the processor's owned state, like `Core`: no
//! atomics, no lock). The hooks are few and sit where the mechanism already decides:
//!
//! | event | recorded by | where |
//! | --- | --- | --- |
//! | a run of a ULT (begin, end with its reason and, for a block, the object) | the processor | `processor/run.rs`, the copy of `run_ult_as` with every hook |
//! | a spawn | the spawner's processor | `thread.rs`, `spawn_on` (outside ones: `Shared::spawn_outside`) |
//! | a wake-up (who woke whom, the processor the policy chose) | the waker's processor | `processor/wake.rs`, `deliver_central_or_chaos` (outside ones: `Shared::wake`) |
//! | a steal (from which processor) | the thief | `processor/find.rs`, `steal` |
//! | idle and park | the processor | `processor/run.rs`, the loop's idle step |
//! | a blocking call's hand-off, queueing, inline run, reclaim | the processor handed over | `blocking.rs`, `switched` |
//! | the policy taken up | the processor | `Processor::follow_policy` |
//!
//! Events of threads that are not processors (a wake-up or spawn from an OS thread) go to one
//! ring of the tracer under a lock (`outside`); they are rare.
//!
//! # Free when off
//!
//! With tracing off no hook costs an instruction on the switch and wake paths: the run hooks are
//! in the copy of `run_ult_as` that runs only on a processor with every hook
//! (`Processor::hooked`, set when the processor is made and when it takes up a policy), and a tracing processor's wake-ups take the detour that the
//! central and chaos modes take already (`Processor::central_or_chaos`, one flag tested on the
//! wake path whatever the mode). The spawn path tests one field of the processor (in the line its
//! neighbours are read from); the loop's flush and idle hooks sit on its cold steps.
//!
//! # Bounded memory, flushed off the hot path
//!
//! A ring holds [`RuntimeBuilder::trace_buffer`](crate::RuntimeBuilder::trace_buffer) events.
//! The processor flushes it to the trace file at its loop's every 64th round (with the clean-up
//! notes' flush), before it idles, and its last contents at shutdown: the events are turned into
//! JSON and written under the writer's lock (`write`). An event that finds the ring full is
//! dropped and counted; the counts are in the trace (a counter track per processor, and
//! `otherData.dropped_events` at the end).

use crate::tcb::TcbRef;
use std::cell::{Cell, UnsafeCell};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

pub(crate) mod sched;
mod write;

/// The environment variable that turns the trace on for runtimes whose builder did not
/// ([`RuntimeBuilder::trace`](crate::RuntimeBuilder::trace)): the path of the file to write.
pub const TRACE_ENV: &str = "ELITE_TRACE";

/// The environment variable that turns the periodic summary on: its period in milliseconds.
pub const SCHEDTRACE_ENV: &str = "ELITE_SCHEDTRACE";

/// Default of [`RuntimeBuilder::trace_buffer`](crate::RuntimeBuilder::trace_buffer): events a
/// processor holds between two flushes (32 bytes each).
pub const DEFAULT_TRACE_BUFFER: usize = 1 << 15;

/// Smallest and largest [`RuntimeBuilder::trace_buffer`](crate::RuntimeBuilder::trace_buffer).
pub(crate) const TRACE_BUFFER_RANGE: (usize, usize) = (16, 1 << 24);

/// Largest period of `ELITE_SCHEDTRACE` and `RuntimeBuilder::schedtrace`, in milliseconds.
pub(crate) const SCHEDTRACE_MAX_MS: u64 = 3_600_000;

/// What an event records (the meaning of its fields `a`, `b`, `c`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum Kind {
    /// A run begins: `a` the ULT.
    RunBegin,
    /// A run ends: `a` the ULT, `c` its reason ([`End`]), `b` the object it blocks on (0: none).
    RunEnd,
    /// A spawn: `a` the new ULT, `b` the spawner (0: none), `c` the processor it was queued on.
    Spawn,
    /// A wake-up: `a` the ULT woken, `b` the waker (0: none), `c` the processor the policy chose.
    Wake,
    /// A steal: `a` the ULT (the first of a batch), `c` the victim.
    Steal,
    /// The processor goes idle.
    IdleBegin,
    /// The processor found work again: `c` 1 if it parked meanwhile.
    IdleEnd,
    /// A blocking call's hand-off: `a` the ULT, `c` what became of its processor ([`Handoff`]).
    Handoff,
}

/// Why a run ended, as recorded (`c` of [`Kind::RunEnd`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum End {
    /// Blocked on a synchronization object (`b`: the address of its wait list, inside it).
    Block,
    /// Parked: a join, a timed wait, a blocking call, or another park.
    Park,
    Sleep,
    Yield,
    Exit,
    /// Anchored or rejoining (`crate::anchor`).
    Other,
}

/// What a blocking call did with the processor of its ULT (`c` of [`Kind::Handoff`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum Handoff {
    /// Handed to a spare OS thread while the call runs.
    Spare,
    /// Every spare is inside a call: the call waits in the queue, the processor goes on here.
    Queued,
    /// Run on the processor's own thread, the processor out of service meanwhile.
    Inline,
    /// The call ended before the spare took the processor: taken back.
    Reclaimed,
}

/// One event: 32 bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    /// Nanoseconds since the tracer's epoch.
    pub(crate) ts: u64,
    pub(crate) a: u64,
    pub(crate) b: u64,
    pub(crate) c: u32,
    pub(crate) kind: Kind,
}

/// The events' clock: the time-stamp counter where it ticks at a constant rate on every core
/// (x86-64 with `constant_tsc` and `nonstop_tsc`, as the kernel's `tsc` clocksource requires),
/// calibrated against `Instant` when the tracer is made; else `Instant`. An event stores the raw
/// reading; the flush turns it into nanoseconds since the tracer was made. (Where `Instant::now`
/// is a system call, on hosts whose clock source the vDSO cannot read, it costs many times the
/// counter read, a single instruction; `docs/tracing.md` in the repository has figures.)
struct Clock {
    epoch: Instant,
    /// The counter at `epoch`, and nanoseconds per tick; `None`: read `Instant`.
    tsc: Option<(u64, f64)>,
}

impl Clock {
    fn new() -> Clock {
        #[cfg(target_arch = "x86_64")]
        if constant_tsc() {
            let (epoch, t0) = Self::pair();
            // A millisecond against `Instant`, each end a pair of readings of the same moment
            // (`pair`), so that both clocks measure the same span. (Reading `/proc/cpuinfo`
            // between the epoch and the first counter reading, as this once did, made the
            // trace's time run fast by that read's share of the millisecond: several percent
            // on a loaded machine.)
            while epoch.elapsed() < std::time::Duration::from_millis(1) {
                std::hint::spin_loop();
            }
            let (end, t1) = Self::pair();
            if t1 > t0 {
                let per_tick = end.duration_since(epoch).as_nanos() as f64 / (t1 - t0) as f64;
                return Clock { epoch, tsc: Some((t0, per_tick)) };
            }
        }
        Clock { epoch: Instant::now(), tsc: None }
    }

    /// An `Instant` and a counter reading of (nearly) the same moment: the counter read on both
    /// sides of the `Instant`, its midpoint kept, the closest of a few tries.
    #[cfg(target_arch = "x86_64")]
    fn pair() -> (Instant, u64) {
        let mut best: Option<(u64, Instant, u64)> = None;
        for _ in 0..5 {
            let a = read_tsc();
            let now = Instant::now();
            let b = read_tsc();
            let width = b.wrapping_sub(a);
            if best.is_none_or(|(w, _, _)| width < w) {
                best = Some((width, now, a + width / 2));
            }
        }
        let (_, now, tsc) = best.expect("five tries");
        (now, tsc)
    }

    /// A reading (raw: ticks, or nanoseconds since the epoch).
    #[inline]
    fn read(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.tsc.is_some() {
            return read_tsc();
        }
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A reading in nanoseconds since the epoch.
    #[inline]
    fn to_ns(&self, raw: u64) -> u64 {
        match self.tsc {
            Some((t0, per_tick)) => (raw.saturating_sub(t0) as f64 * per_tick) as u64,
            None => raw,
        }
    }
}

/// Whether the time-stamp counter ticks at one constant rate on every core, whatever the power
/// state (`constant_tsc` and `nonstop_tsc` on every processor of `/proc/cpuinfo`).
#[cfg(target_arch = "x86_64")]
fn constant_tsc() -> bool {
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flag = |f: &str| {
        flags.lines().filter(|l| l.starts_with("flags")).all(|l| l.split_whitespace().any(|w| w == f))
    };
    flags.contains("flags") && flag("constant_tsc") && flag("nonstop_tsc")
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn read_tsc() -> u64 {
    // SAFETY: `rdtsc` exists on every x86-64 processor and has no effect besides its result.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// The trace of one runtime: the file's writer, the clock of its timestamps, and the ring of the
/// threads that are not processors.
pub(crate) struct Tracer {
    clock: Clock,
    capacity: usize,
    writer: Mutex<write::Writer>,
    /// Events of threads outside the processors, and how many found it full.
    outside: Mutex<(Vec<Event>, u64)>,
    /// Track (`tid`) of the outside events: the number of processors.
    outside_track: u32,
}

impl Tracer {
    /// Creates (truncates) the file at `path` and writes the trace's head.
    pub(crate) fn create(
        path: &Path,
        processors: usize,
        capacity: usize,
        policy: &str,
    ) -> std::io::Result<Tracer> {
        let writer = write::Writer::create(path, processors, policy)?;
        Ok(Tracer {
            clock: Clock::new(),
            capacity,
            writer: Mutex::new(writer),
            outside: Mutex::new((Vec::new(), 0)),
            outside_track: processors as u32,
        })
    }

    /// A raw reading of the clock (see [`Clock`]; turned into nanoseconds at the flush).
    #[inline]
    fn now(&self) -> u64 {
        self.clock.read()
    }

    /// `events`' readings turned into nanoseconds since the tracer was made.
    fn to_ns(&self, events: &mut [Event]) {
        for e in events {
            e.ts = self.clock.to_ns(e.ts);
        }
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, write::Writer> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an event of a thread outside the processors.
    pub(crate) fn outside(&self, kind: Kind, a: u64, b: u64, c: u32) {
        let ts = self.now();
        let mut o = self.outside.lock().unwrap_or_else(|e| e.into_inner());
        if o.0.len() < self.capacity {
            o.0.push(Event { ts, a, b, c, kind });
        } else {
            o.1 += 1;
        }
    }

    /// Writes `events` of track `track` (a processor), with the count of events it dropped so far,
    /// and whatever the outside ring holds.
    fn write(&self, track: u32, events: &mut [Event], dropped: u64) {
        self.to_ns(events);
        let outside = self.take_outside();
        let mut w = self.writer();
        // The outside events first: they are older, mostly (a spawn from outside comes before
        // the runs it causes).
        if !outside.0.is_empty() || outside.1 != 0 {
            w.events(self.outside_track, &outside.0, outside.1);
        }
        w.events(track, events, dropped);
    }

    /// The outside ring's events, taken, and the count it dropped so far.
    fn take_outside(&self) -> (Vec<Event>, u64) {
        let mut o = self.outside.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = (std::mem::take(&mut o.0), o.1);
        drop(o);
        self.to_ns(&mut taken.0);
        taken
    }

    /// Records that processor `track` took up `policy` (rare: written at once).
    pub(crate) fn policy(&self, track: u32, policy: &str) {
        let ts = self.clock.to_ns(self.now());
        self.writer().policy(track, ts, policy);
    }

    /// Notes the name of ULT `ult`, for its runs' slices.
    pub(crate) fn name(&self, ult: u64, name: &str) {
        self.writer().name(ult, name);
    }

    /// Writes the trace's tail (after every processor's last flush); the first write error, if
    /// any, goes to stderr (the runtime has no caller to return it to at shutdown).
    pub(crate) fn finish(&self) {
        let outside = self.take_outside();
        let mut w = self.writer();
        if !outside.0.is_empty() || outside.1 != 0 {
            w.events(self.outside_track, &outside.0, outside.1);
        }
        drop(w);
        if let Err(e) = self.writer().finish() {
            eprintln!("elite-rt: the trace could not be written: {e}");
        }
    }
}

/// A processor's ring of events: written and flushed only by the OS thread running the processor
/// (it moves with the processor at a blocking call's hand-off, as `Core` does).
pub(crate) struct Ring {
    tracer: std::sync::Arc<Tracer>,
    track: u32,
    events: UnsafeCell<Vec<Event>>,
    dropped: Cell<u64>,
    /// The ULT whose run ended last here (the waker of what the loop wakes between runs: a
    /// joiner woken by an exit).
    last: Cell<u64>,
}

impl Ring {
    pub(crate) fn new(tracer: std::sync::Arc<Tracer>, track: usize) -> Ring {
        let capacity = tracer.capacity;
        Ring {
            tracer,
            track: track as u32,
            events: UnsafeCell::new(Vec::with_capacity(capacity)),
            dropped: Cell::new(0),
            last: Cell::new(0),
        }
    }

    /// The tracer this ring flushes to.
    pub(crate) fn tracer(&self) -> &Tracer {
        &self.tracer
    }

    /// Records an event, or counts it dropped when the ring is full.
    #[inline]
    pub(crate) fn push(&self, kind: Kind, a: u64, b: u64, c: u32) {
        let ts = self.tracer.now();
        // SAFETY: only the OS thread running the ring's processor calls `push` and `flush` (the
        // ring is part of the processor's owned state), and neither holds the borrow beyond
        // the call.
        let events = unsafe { &mut *self.events.get() };
        if events.len() < self.tracer.capacity {
            events.push(Event { ts, a, b, c, kind });
        } else {
            self.dropped.set(self.dropped.get() + 1);
        }
    }

    /// A run of `t` begins.
    #[inline]
    pub(crate) fn run_begin(&self, t: TcbRef) {
        self.push(Kind::RunBegin, id(t), 0, 0);
    }

    /// The run of `t` ended with `why` (the switch's word).
    ///
    /// # Safety
    /// `why` is the word `t` just switched out with, and nothing has acted on it yet.
    #[inline]
    pub(crate) unsafe fn run_end(&self, t: TcbRef, why: crate::switch::Switch) {
        use crate::switch::Switch;
        let (end, on) = match why.kind() {
            Switch::LINK | Switch::LINK_FRONT => {
                // SAFETY: a link's `LinkTo` lives on `t`'s frozen stack until the processor acts
                // on it (contract).
                let on = unsafe { crate::sync::wait::LinkTo::object(why.at()) };
                (End::Block, on)
            }
            Switch::PARK => (End::Park, 0),
            Switch::SLEEP => (End::Sleep, 0),
            _ if why == Switch::YIELD => (End::Yield, 0),
            _ if why == Switch::EXIT => (End::Exit, 0),
            _ => (End::Other, 0),
        };
        let u = id(t);
        self.last.set(u);
        self.push(Kind::RunEnd, u, on as u64, end as u32);
    }

    /// The ULT whose run ended last on this processor.
    pub(crate) fn last_run(&self) -> u64 {
        self.last.get()
    }

    /// Writes the ring's events to the trace and empties it.
    pub(crate) fn flush(&self) {
        // SAFETY: as in `push`: the owner's thread, no borrow outstanding.
        let events = unsafe { &mut *self.events.get() };
        if events.is_empty() && self.dropped.get() == 0 {
            return;
        }
        self.tracer.write(self.track, events, self.dropped.get());
        events.clear();
    }
}

/// The id of ULT `t`, as the trace names it.
#[inline]
pub(crate) fn id(t: TcbRef) -> u64 {
    t.tcb().head.id.get()
}

/// Where the trace goes: a file the builder named, or the environment's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TraceSetting {
    FromEnv,
    Off,
    At(PathBuf),
}

/// The trace file of a runtime built with `setting`: `None` when tracing is off. The path
/// `ELITE_TRACE` names goes to the first runtime of the process that takes it; later ones write
/// `<stem>.<n>.<extension>` beside it (n = 2, 3, ...), so that a program that builds several
/// runtimes (the adaptive-grid example builds one per policy) leaves one trace of each; a path
/// to something other than a file (`/dev/null`, a pipe) is taken as it is by every runtime.
pub(crate) fn trace_path(setting: &TraceSetting) -> Result<Option<PathBuf>, crate::BuildError> {
    match setting {
        TraceSetting::Off => Ok(None),
        TraceSetting::At(p) => Ok(Some(p.clone())),
        TraceSetting::FromEnv => {
            let Some(value) = std::env::var_os(TRACE_ENV) else {
                return Ok(None);
            };
            let path = parse_trace_env(value)?;
            // (Something other than a file, such as /dev/null or a pipe, is written as it is.)
            if std::fs::metadata(&path).is_ok_and(|m| !m.is_file()) {
                return Ok(Some(path));
            }
            static TAKEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Some(if n == 0 { path } else { numbered(&path, n + 1) }))
        }
    }
}

/// The path in a value of `ELITE_TRACE`: any non-blank path.
pub(crate) fn parse_trace_env(value: std::ffi::OsString) -> Result<PathBuf, crate::BuildError> {
    if value.to_string_lossy().trim().is_empty() {
        return Err(crate::BuildError::Environment {
            var: TRACE_ENV,
            value: value.to_string_lossy().into_owned(),
            expected: "the path of a file to write the trace to (Trace Event JSON), not blank; unset it to trace nothing",
        });
    }
    Ok(PathBuf::from(value))
}

/// `path` with `.n` before its extension.
fn numbered(path: &Path, n: usize) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{n}"),
    };
    path.with_file_name(name)
}

/// The period in a value of `ELITE_SCHEDTRACE` (milliseconds): `None` when it is blank.
pub(crate) fn parse_schedtrace_env(value: &str) -> Result<Option<std::time::Duration>, crate::BuildError> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    match v.parse::<u64>() {
        Ok(ms) if (1..=SCHEDTRACE_MAX_MS).contains(&ms) => Ok(Some(std::time::Duration::from_millis(ms))),
        _ => Err(crate::BuildError::Environment {
            var: SCHEDTRACE_ENV,
            value: value.to_string(),
            expected:
                "a period in milliseconds, a whole number from 1 to 3600000 (blank or unset: no summary)",
        }),
    }
}

/// The period `ELITE_SCHEDTRACE` gives, if it is set and not blank.
pub(crate) fn schedtrace_from_env() -> Result<Option<std::time::Duration>, crate::BuildError> {
    match std::env::var(SCHEDTRACE_ENV) {
        Ok(v) => parse_schedtrace_env(&v),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => parse_schedtrace_env(&v.to_string_lossy()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blank_trace_path_is_an_error_that_says_what_is_allowed() {
        let e = parse_trace_env(" ".into()).unwrap_err().to_string();
        assert!(e.contains("ELITE_TRACE") && e.contains("path"), "{e}");
        assert_eq!(parse_trace_env("t.json".into()).unwrap(), PathBuf::from("t.json"));
    }

    #[test]
    fn schedtrace_takes_a_period_in_milliseconds() {
        assert_eq!(parse_schedtrace_env("").unwrap(), None);
        assert_eq!(parse_schedtrace_env(" 250 ").unwrap(), Some(std::time::Duration::from_millis(250)));
        for bad in ["0", "-3", "1.5", "fast", "3600001"] {
            let e = parse_schedtrace_env(bad).unwrap_err().to_string();
            assert!(e.contains("ELITE_SCHEDTRACE") && e.contains("1 to 3600000"), "{bad}: {e}");
        }
    }

    #[test]
    fn later_runtimes_number_their_traces() {
        assert_eq!(numbered(Path::new("/tmp/t.json"), 2), PathBuf::from("/tmp/t.2.json"));
        assert_eq!(numbered(Path::new("trace"), 3), PathBuf::from("trace.3"));
    }
}
