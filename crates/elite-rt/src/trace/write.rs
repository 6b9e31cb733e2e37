//! The trace file: events turned into the Trace Event Format's JSON (the format Perfetto and
//! `chrome://tracing` open), one process (`pid` 1) with a track (`tid`) per processor and one
//! for the threads outside them.
//!
//! * A run is a complete event (`"ph":"X"`) on its processor's track, named by the ULT (its name,
//!   else `ULT <id>`), with `args` `ult`, `end` (why it ended) and, for a block, `on` (the address
//!   of the object's wait list). Runs nest when a joiner runs its child on its own stack (the join
//!   fast path).
//! * Idle spans are complete events named `parked` (the thread slept) or `idle` (it found work
//!   while it spun).
//! * Spawns, wake-ups, steals, blocking calls' hand-offs and the policies taken up are instant
//!   events (`"ph":"i"`) with their parties in `args`.
//! * Who woke (or spawned) whom is a flow (`"ph":"s"` at the wake-up, `"ph":"f"` at the woken
//!   ULT's next run), which Perfetto draws as an arrow.
//! * Dropped events are a counter (`"ph":"C"`, `dropped events`) per track, and the totals are in
//!   `otherData` at the end.
//!
//! Each processor flushes its own ring, so the file holds the tracks' events in batches, not in
//! time order (both viewers sort). A wake-up and the run it caused may be on two tracks flushed
//! in either order: the writer pairs them by ULT and time (the run is the woken ULT's first one
//! at or after the wake-up, among the last few runs of it seen without one; when that run may
//! be among older ones let go, no arrow is drawn rather than a wrong one).

use super::{End, Event, Handoff, Kind};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Runs of one ULT kept without a wake-up while they wait for one that may come later from
/// another track.
const UNMATCHED_KEPT: usize = 8;

/// A wake-up or spawn waiting for the run it caused.
#[derive(Clone, Copy)]
struct Cause {
    ts: u64,
    track: u32,
    spawn: bool,
}

pub(super) struct Writer {
    out: BufWriter<File>,
    /// The first write error; nothing more is written after one.
    error: Option<io::Error>,
    /// Per track: runs begun and not yet ended (ULT, begin), innermost last.
    open: Vec<Vec<(u64, u64)>>,
    /// Per track: when its idle span began.
    idle: Vec<Option<u64>>,
    /// Per track: dropped events last written.
    dropped: Vec<u64>,
    /// Wake-ups and spawns whose run is not seen yet, by ULT.
    causes: HashMap<u64, Cause>,
    /// Runs seen without a wake-up, by ULT: the latest few (begin, track), and the begin of the
    /// latest one let go to keep them few.
    unmatched: HashMap<u64, (Vec<(u64, u32)>, u64)>,
    names: HashMap<u64, String>,
    flows: u64,
    finished: bool,
}

/// Microseconds, with the nanoseconds as decimals.
struct Micros(u64);

impl std::fmt::Display for Micros {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// A string as a JSON string literal.
struct Json<'a>(&'a str);

impl std::fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"")?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                c => write!(f, "{c}")?,
            }
        }
        f.write_str("\"")
    }
}

fn end_name(c: u32) -> &'static str {
    match c {
        x if x == End::Block as u32 => "block",
        x if x == End::Park as u32 => "park",
        x if x == End::Sleep as u32 => "sleep",
        x if x == End::Yield as u32 => "yield",
        x if x == End::Exit as u32 => "exit",
        _ => "anchor",
    }
}

fn handoff_name(c: u32) -> &'static str {
    match c {
        x if x == Handoff::Spare as u32 => "to a spare thread",
        x if x == Handoff::Queued as u32 => "queued",
        x if x == Handoff::Inline as u32 => "inline",
        _ => "reclaimed",
    }
}

impl Writer {
    pub(super) fn create(path: &Path, processors: usize, policy: &str) -> io::Result<Writer> {
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
        write!(out, "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
        write!(
            out,
            "\n{{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{{\"name\":\"elite runtime\"}}}}"
        )?;
        for p in 0..=processors {
            let name =
                if p < processors { format!("processor {p}") } else { "outside the processors".into() };
            write!(
                out,
                ",\n{{\"ph\":\"M\",\"pid\":1,\"tid\":{p},\"name\":\"thread_name\",\"args\":{{\"name\":{}}}}}",
                Json(&name)
            )?;
            write!(
                out,
                ",\n{{\"ph\":\"M\",\"pid\":1,\"tid\":{p},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{p}}}}}"
            )?;
        }
        write!(
            out,
            ",\n{{\"ph\":\"i\",\"s\":\"p\",\"pid\":1,\"tid\":0,\"ts\":0.000,\"name\":\"policy\",\"args\":{{\"policy\":{}}}}}",
            Json(policy)
        )?;
        let tracks = processors + 1;
        Ok(Writer {
            out,
            error: None,
            open: vec![Vec::new(); tracks],
            idle: vec![None; tracks],
            dropped: vec![0; tracks],
            causes: HashMap::new(),
            unmatched: HashMap::new(),
            names: HashMap::new(),
            flows: 0,
            finished: false,
        })
    }

    /// Writes one event's JSON (with its leading comma), remembering the first error.
    fn emit(&mut self, args: std::fmt::Arguments<'_>) {
        if self.error.is_some() || self.finished {
            return;
        }
        if let Err(e) = self.out.write_all(b",\n").and_then(|()| self.out.write_fmt(args)) {
            self.error = Some(e);
        }
    }

    fn slice_name(&self, ult: u64) -> String {
        match self.names.get(&ult) {
            Some(n) => format!("{n} ({ult})"),
            None => format!("ULT {ult}"),
        }
    }

    pub(super) fn name(&mut self, ult: u64, name: &str) {
        self.names.insert(ult, name.to_string());
    }

    pub(super) fn policy(&mut self, track: u32, ts: u64, policy: &str) {
        self.emit(format_args!(
            "{{\"ph\":\"i\",\"s\":\"p\",\"pid\":1,\"tid\":{track},\"ts\":{},\"name\":\"policy\",\"args\":{{\"policy\":{}}}}}",
            Micros(ts),
            Json(policy)
        ));
    }

    /// The events of one track's ring, in the order it recorded them; `dropped`: the events the
    /// ring dropped so far.
    pub(super) fn events(&mut self, track: u32, events: &[Event], dropped: u64) {
        let t = track as usize;
        for e in events {
            self.event(t, e);
        }
        if dropped != self.dropped[t] {
            self.dropped[t] = dropped;
            let ts = events.last().map_or(0, |e| e.ts);
            self.emit(format_args!(
                "{{\"ph\":\"C\",\"pid\":1,\"tid\":{t},\"ts\":{},\"name\":\"dropped events\",\"args\":{{\"processor {t}\":{dropped}}}}}",
                Micros(ts)
            ));
        }
    }

    fn event(&mut self, t: usize, e: &Event) {
        let ts = Micros(e.ts);
        match e.kind {
            Kind::RunBegin => {
                self.open[t].push((e.a, e.ts));
                self.run_begun(e.a, e.ts, t as u32);
            }
            Kind::RunEnd => {
                // Its begin, if the ring kept it (runs above it whose end was dropped are closed
                // with it).
                let Some(i) = self.open[t].iter().rposition(|&(u, _)| u == e.a) else {
                    return;
                };
                let begin = self.open[t][i].1;
                self.open[t].truncate(i);
                let name = self.slice_name(e.a);
                let end = end_name(e.c);
                let on = if e.b != 0 { format!(",\"on\":\"{:#x}\"", e.b) } else { String::new() };
                self.emit(format_args!(
                    "{{\"ph\":\"X\",\"cat\":\"run\",\"pid\":1,\"tid\":{t},\"ts\":{},\"dur\":{},\"name\":{},\"args\":{{\"ult\":{},\"end\":\"{end}\"{on}}}}}",
                    Micros(begin),
                    Micros(e.ts.saturating_sub(begin)),
                    Json(&name),
                    e.a
                ));
                if e.c == End::Exit as u32 {
                    self.causes.remove(&e.a);
                    self.unmatched.remove(&e.a);
                }
            }
            Kind::Spawn | Kind::Wake => {
                let (what, by) = if e.kind == Kind::Spawn { ("spawn", "by") } else { ("wake", "by") };
                let policy_key = if e.kind == Kind::Spawn { "queued_on" } else { "target" };
                // (A spawn from outside the processors goes to the global start-queue.)
                let place = if e.c == u32::MAX { "\"global\"".to_string() } else { e.c.to_string() };
                self.emit(format_args!(
                    "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"{what}\",\"pid\":1,\"tid\":{t},\"ts\":{ts},\"name\":\"{what}\",\"args\":{{\"ult\":{},\"{by}\":{},\"{policy_key}\":{place}}}}}",
                    e.a, e.b
                ));
                self.caused(e.a, Cause { ts: e.ts, track: t as u32, spawn: e.kind == Kind::Spawn });
            }
            Kind::Steal => self.emit(format_args!(
                "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"steal\",\"pid\":1,\"tid\":{t},\"ts\":{ts},\"name\":\"steal\",\"args\":{{\"ult\":{},\"from\":{}}}}}",
                e.a, e.c
            )),
            Kind::IdleBegin => self.idle[t] = Some(e.ts),
            Kind::IdleEnd => {
                if let Some(begin) = self.idle[t].take() {
                    let name = if e.c != 0 { "parked" } else { "idle" };
                    self.emit(format_args!(
                        "{{\"ph\":\"X\",\"cat\":\"idle\",\"pid\":1,\"tid\":{t},\"ts\":{},\"dur\":{},\"name\":\"{name}\"}}",
                        Micros(begin),
                        Micros(e.ts.saturating_sub(begin))
                    ));
                }
            }
            Kind::Handoff => self.emit(format_args!(
                "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"blocking\",\"pid\":1,\"tid\":{t},\"ts\":{ts},\"name\":\"blocking call\",\"args\":{{\"ult\":{},\"processor\":\"{}\"}}}}",
                e.a,
                handoff_name(e.c)
            )),
        }
    }

    /// A wake-up or spawn of `ult`: paired with a run already seen at or after it, else kept for
    /// the next run.
    fn caused(&mut self, ult: u64, cause: Cause) {
        if let Some((runs, let_go)) = self.unmatched.get_mut(&ult) {
            // The run it caused is the ULT's first at or after it (the ULT was blocked from its
            // previous run's end until the wake-up), unless that one was let go: then no flow
            // rather than a wrong one.
            match runs.iter().position(|&(b, _)| b >= cause.ts) {
                Some(i) if *let_go < cause.ts => {
                    let (begin, track) = runs[i];
                    runs.drain(..=i);
                    if runs.is_empty() {
                        self.unmatched.remove(&ult);
                    }
                    self.flow(cause, begin, track);
                }
                Some(_) => {}
                None => {
                    self.unmatched.remove(&ult);
                    self.causes.insert(ult, cause);
                }
            }
            return;
        }
        self.causes.insert(ult, cause);
    }

    /// A run of `ult` began at `ts` on `track`: the end of the flow of its cause, if seen.
    fn run_begun(&mut self, ult: u64, ts: u64, track: u32) {
        match self.causes.get(&ult) {
            Some(&c) if c.ts <= ts => {
                self.causes.remove(&ult);
                self.flow(c, ts, track);
            }
            _ => {
                let (runs, let_go) = self.unmatched.entry(ult).or_default();
                if runs.len() == UNMATCHED_KEPT {
                    *let_go = runs.remove(0).0;
                }
                runs.push((ts, track));
            }
        }
    }

    fn flow(&mut self, cause: Cause, begin: u64, track: u32) {
        self.flows += 1;
        let id = self.flows;
        let name = if cause.spawn { "spawn" } else { "wake" };
        self.emit(format_args!(
            "{{\"ph\":\"s\",\"cat\":\"{name}\",\"name\":\"{name}\",\"id\":{id},\"pid\":1,\"tid\":{},\"ts\":{}}}",
            cause.track,
            Micros(cause.ts)
        ));
        self.emit(format_args!(
            "{{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"{name}\",\"name\":\"{name}\",\"id\":{id},\"pid\":1,\"tid\":{track},\"ts\":{}}}",
            Micros(begin)
        ));
    }

    /// Writes the tail; the first error met, if any.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        if self.finished {
            return Ok(());
        }
        if let Some(e) = self.error.take() {
            self.finished = true;
            return Err(e);
        }
        self.finished = true;
        let per: Vec<String> = self.dropped.iter().map(u64::to_string).collect();
        let total: u64 = self.dropped.iter().sum();
        write!(
            self.out,
            "\n],\"otherData\":{{\"producer\":\"elite-rt\",\"dropped_events\":{total},\"dropped_per_track\":[{}]}}}}\n",
            per.join(",")
        )?;
        self.out.flush()
    }
}
