//! The trace file: events turned into the Trace Event Format's JSON (the format Perfetto and
//! `chrome://tracing` open), one process (`pid` 1) with a track (`tid`) per processor and one
//! for the threads outside them.
//!
//! * A run is a complete event (`"ph":"X"`) on its processor's track, named by the ULT (its name,
//!   else `ULT <id>`), with `args` `ult`, `end` (why it ended) and, for a block, `on` (the address
//!   of the object's wait list). Runs nest when a joiner runs its child on its own stack (the join
//!   fast path). A run whose end the ring dropped ends at the last event its track kept, with
//!   `end` `dropped` (flows bind to it).
//! * Idle spans are complete events named `parked` (the thread slept) or `idle` (it found work
//!   while it spun).
//! * Spawns, wake-ups, steals, blocking calls' hand-offs and the policies taken up are instant
//!   events (`"ph":"i"`) with their parties in `args`.
//! * Who woke (or spawned) whom is a flow (`"ph":"s"` at the wake-up, `"ph":"f"` at the woken
//!   ULT's next run), which Perfetto draws as an arrow. A flow starts in the slice that encloses
//!   it on its thread, so only a wake-up or spawn made inside a run has one: those from outside
//!   the processors, or from a processor's loop between runs (a timer, the exit of a ULT waking
//!   its joiner), are instants only.
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
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};
use std::path::Path;

/// Runs of one ULT kept without a wake-up while they wait for one that may come later from
/// another track.
const UNMATCHED_KEPT: usize = 8;

/// Bytes of JSON gathered before a write to the file.
const SPILL_AT: usize = 1 << 20;

/// A wake-up or spawn waiting for the run it caused.
#[derive(Clone, Copy)]
struct Cause {
    ts: u64,
    track: u32,
    spawn: bool,
    /// Whether a run on `track` encloses it: a flow starts in the slice enclosing it on its
    /// thread (the format's binding of `"ph":"s"`), so one without is paired with its run but
    /// drawn as no arrow.
    enclosed: bool,
}

/// A hasher for ULT ids (a multiply; the ids are distinct integers, not attacker-chosen).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
}

type ById<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

pub(super) struct Writer {
    file: File,
    /// JSON not yet written to the file.
    buf: Vec<u8>,
    /// The first write error; nothing more is written after one.
    error: Option<io::Error>,
    /// Per track: runs begun and not yet ended (ULT, begin), innermost last.
    open: Vec<Vec<(u64, u64)>>,
    /// Per track: when its idle span began.
    idle: Vec<Option<u64>>,
    /// Per track: dropped events last written.
    dropped: Vec<u64>,
    /// Wake-ups and spawns whose run is not seen yet, by ULT.
    causes: ById<Cause>,
    /// Runs seen without a wake-up, by ULT: the latest few (begin, track), and the begin of the
    /// latest one let go to keep them few.
    unmatched: ById<(Vec<(u64, u32)>, u64)>,
    names: ById<String>,
    flows: u64,
    finished: bool,
}

/// JSON text appended to a buffer, without `fmt`'s machinery (the writer's cost is most of a
/// traced program's overhead).
trait Put {
    fn s(&mut self, s: &str) -> &mut Self;
    fn u(&mut self, n: u64) -> &mut Self;
    /// Nanoseconds as microseconds with three decimals.
    fn us(&mut self, ns: u64) -> &mut Self;
    fn hex(&mut self, n: u64) -> &mut Self;
    /// A JSON string literal.
    fn js(&mut self, s: &str) -> &mut Self;
}

impl Put for Vec<u8> {
    #[inline]
    fn s(&mut self, s: &str) -> &mut Self {
        self.extend_from_slice(s.as_bytes());
        self
    }
    fn u(&mut self, mut n: u64) -> &mut Self {
        // Two digits a step, from a table.
        const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
            2021222324252627282930313233343536373839\
            4041424344454647484950515253545556575859\
            6061626364656667686970717273747576777879\
            8081828384858687888990919293949596979899";
        let mut d = [0u8; 20];
        let mut i = d.len();
        while n >= 100 {
            let r = (n % 100) as usize * 2;
            n /= 100;
            i -= 2;
            d[i..i + 2].copy_from_slice(&PAIRS[r..r + 2]);
        }
        if n >= 10 {
            let r = n as usize * 2;
            i -= 2;
            d[i..i + 2].copy_from_slice(&PAIRS[r..r + 2]);
        } else {
            i -= 1;
            d[i] = b'0' + n as u8;
        }
        self.extend_from_slice(&d[i..]);
        self
    }
    #[inline]
    fn us(&mut self, ns: u64) -> &mut Self {
        let frac = ns % 1000;
        self.u(ns / 1000);
        self.extend_from_slice(&[
            b'.',
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ]);
        self
    }
    fn hex(&mut self, n: u64) -> &mut Self {
        self.extend_from_slice(b"0x");
        let digits = (64 - n.leading_zeros()).div_ceil(4).max(1);
        for k in (0..digits).rev() {
            self.push(b"0123456789abcdef"[((n >> (4 * k)) & 15) as usize]);
        }
        self
    }
    fn js(&mut self, s: &str) -> &mut Self {
        self.push(b'"');
        for c in s.chars() {
            match c {
                '"' => self.extend_from_slice(b"\\\""),
                '\\' => self.extend_from_slice(b"\\\\"),
                c if (c as u32) < 0x20 => {
                    self.extend_from_slice(b"\\u00");
                    self.push(b"0123456789abcdef"[(c as u32 >> 4) as usize]);
                    self.push(b"0123456789abcdef"[(c as u32 & 15) as usize]);
                }
                c => {
                    let mut b = [0u8; 4];
                    self.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                }
            }
        }
        self.push(b'"');
        self
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
        let file = File::create(path)?;
        let mut b = Vec::with_capacity(SPILL_AT + 4096);
        b.s("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        b.s("{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"elite runtime\"}}");
        for p in 0..=processors {
            let name =
                if p < processors { format!("processor {p}") } else { "outside the processors".into() };
            let p = p as u64;
            b.s(",\n{\"ph\":\"M\",\"pid\":1,\"tid\":")
                .u(p)
                .s(",\"name\":\"thread_name\",\"args\":{\"name\":");
            b.js(&name).s("}}");
            b.s(",\n{\"ph\":\"M\",\"pid\":1,\"tid\":").u(p);
            b.s(",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":").u(p).s("}}");
        }
        let tracks = processors + 1;
        let mut w = Writer {
            file,
            buf: b,
            error: None,
            open: vec![Vec::new(); tracks],
            idle: vec![None; tracks],
            dropped: vec![0; tracks],
            causes: ById::default(),
            unmatched: ById::default(),
            names: ById::default(),
            flows: 0,
            finished: false,
        };
        w.policy(0, 0, policy);
        Ok(w)
    }

    /// The buffer, after the separator of a new event.
    fn next(&mut self) -> &mut Vec<u8> {
        self.buf.extend_from_slice(b",\n");
        &mut self.buf
    }

    /// Writes the buffer to the file once it is large (or `all` of it), keeping the first error.
    fn spill(&mut self, all: bool) {
        if self.buf.len() < SPILL_AT && !all {
            return;
        }
        if self.error.is_none() {
            if let Err(e) = self.file.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
        self.buf.clear();
    }

    fn slice_name(b: &mut Vec<u8>, names: &ById<String>, ult: u64) {
        match names.get(&ult) {
            Some(n) => {
                // `name (id)`, as a JSON string.
                b.js(n);
                b.pop();
                b.s(" (").u(ult).s(")\"");
            }
            None => {
                b.s("\"ULT ").u(ult).s("\"");
            }
        }
    }

    pub(super) fn name(&mut self, ult: u64, name: &str) {
        self.names.insert(ult, name.to_string());
    }

    pub(super) fn policy(&mut self, track: u32, ts: u64, policy: &str) {
        let b = self.next();
        b.s("{\"ph\":\"i\",\"s\":\"p\",\"pid\":1,\"tid\":").u(track.into()).s(",\"ts\":").us(ts);
        b.s(",\"name\":\"policy\",\"args\":{\"policy\":").js(policy).s("}}");
    }

    /// The events of one track's ring, in the order it recorded them; `dropped`: the events the
    /// ring dropped so far.
    pub(super) fn events(&mut self, track: u32, events: &[Event], dropped: u64) {
        if self.finished {
            return;
        }
        let t = track as usize;
        for e in events {
            self.event(t, e);
            self.spill(false);
        }
        if dropped != self.dropped[t] {
            // The ring filled in this batch and kept its first events: what is still open (a
            // processor flushes from its loop, between runs) lost its end with the rest. Runs end
            // at the last event kept; an idle span begun there is forgotten (its end was lost).
            if let Some(last) = events.last() {
                self.cut_short(t, 0, last.ts);
            }
            self.idle[t] = None;
            self.dropped[t] = dropped;
            let ts = events.last().map_or(0, |e| e.ts);
            let b = self.next();
            b.s("{\"ph\":\"C\",\"pid\":1,\"tid\":").u(track.into()).s(",\"ts\":").us(ts);
            b.s(",\"name\":\"dropped events\",\"args\":{\"processor ")
                .u(track.into())
                .s("\":")
                .u(dropped)
                .s("}}");
        }
    }

    /// The head of an event on track `t` at `ts`: `{"ph":"<ph>",...,"ts":<ts>`.
    fn head(&mut self, ph: &str, cat: &str, t: usize, ts: u64) -> &mut Vec<u8> {
        let b = self.next();
        b.s("{\"ph\":\"").s(ph).s("\",\"cat\":\"").s(cat).s("\",\"pid\":1,\"tid\":").u(t as u64);
        b.s(",\"ts\":").us(ts)
    }

    fn event(&mut self, t: usize, e: &Event) {
        match e.kind {
            Kind::RunBegin => {
                self.open[t].push((e.a, e.ts));
                self.run_begun(e.a, e.ts, t as u32);
            }
            Kind::RunEnd => {
                // Its begin, if the ring kept it. Runs above it whose end was dropped end with it
                // (see `cut_short`).
                let Some(i) = self.open[t].iter().rposition(|&(u, _)| u == e.a) else {
                    return;
                };
                self.cut_short(t, i + 1, e.ts);
                let begin = self.open[t][i].1;
                self.open[t].truncate(i);
                self.run_slice(t, e.a, begin, e.ts, end_name(e.c), e.b);
                if e.c == End::Exit as u32 {
                    // (So the writer's maps hold only live ULTs.)
                    self.causes.remove(&e.a);
                    self.unmatched.remove(&e.a);
                    self.names.remove(&e.a);
                }
            }
            Kind::Spawn | Kind::Wake => {
                let spawn = e.kind == Kind::Spawn;
                let what = if spawn { "spawn" } else { "wake" };
                let b = self.head("i", what, t, e.ts);
                b.s(",\"s\":\"t\",\"name\":\"")
                    .s(what)
                    .s("\",\"args\":{\"ult\":")
                    .u(e.a)
                    .s(",\"by\":")
                    .u(e.b);
                b.s(if spawn { ",\"queued_on\":" } else { ",\"target\":" });
                // (A spawn from outside the processors goes to the global start-queue.)
                if e.c == u32::MAX {
                    b.s("\"global\"");
                } else {
                    b.u(e.c.into());
                }
                b.s("}}");
                let enclosed = !self.open[t].is_empty();
                self.caused(e.a, Cause { ts: e.ts, track: t as u32, spawn, enclosed });
            }
            Kind::Steal => {
                let b = self.head("i", "steal", t, e.ts);
                b.s(",\"s\":\"t\",\"name\":\"steal\",\"args\":{\"ult\":")
                    .u(e.a)
                    .s(",\"from\":")
                    .u(e.c.into());
                b.s("}}");
            }
            Kind::IdleBegin => self.idle[t] = Some(e.ts),
            Kind::IdleEnd => {
                if let Some(begin) = self.idle[t].take() {
                    let b = self.head("X", "idle", t, begin);
                    b.s(",\"dur\":").us(e.ts.saturating_sub(begin));
                    b.s(if e.c != 0 { ",\"name\":\"parked\"}" } else { ",\"name\":\"idle\"}" });
                }
            }
            Kind::Handoff => {
                let b = self.head("i", "blocking", t, e.ts);
                b.s(",\"s\":\"t\",\"name\":\"blocking call\",\"args\":{\"ult\":").u(e.a);
                b.s(",\"processor\":\"").s(handoff_name(e.c)).s("\"}}");
            }
        }
    }

    /// The complete event of a run of `ult` on track `t` from `begin` to `end`; `on`: the
    /// object it blocked on, 0 for none.
    fn run_slice(&mut self, t: usize, ult: u64, begin: u64, end: u64, why: &str, on: u64) {
        let b = self.head("X", "run", t, begin);
        b.s(",\"dur\":").us(end.saturating_sub(begin)).s(",\"name\":");
        Self::slice_name(&mut self.buf, &self.names, ult);
        let b = &mut self.buf;
        b.s(",\"args\":{\"ult\":").u(ult).s(",\"end\":\"").s(why).s("\"");
        if on != 0 {
            b.s(",\"on\":\"").hex(on).s("\"");
        }
        b.s("}}");
    }

    /// Ends the runs of track `t` from the `from`-th open one up, whose ends the ring dropped,
    /// at `at`: the last time the track is known to have been in them. Each is written, as
    /// `"end":"dropped"`, because the flows of wake-ups and spawns already paired with it (its
    /// begin, or a wake-up made inside it) bind to its slice: a run left out would leave them
    /// pointing at no slice, which viewers reject.
    fn cut_short(&mut self, t: usize, from: usize, at: u64) {
        while self.open[t].len() > from {
            let (ult, begin) = self.open[t].pop().expect("more open runs than `from`");
            self.run_slice(t, ult, begin, at.max(begin), "dropped", 0);
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

    /// The flow from `cause` to the run that began at `begin` on `track`; none when no run
    /// encloses the cause (see [`Cause::enclosed`]).
    fn flow(&mut self, cause: Cause, begin: u64, track: u32) {
        if !cause.enclosed {
            return;
        }
        self.flows += 1;
        let id = self.flows;
        let name = if cause.spawn { "spawn" } else { "wake" };
        let b = self.head("s", name, cause.track as usize, cause.ts);
        b.s(",\"name\":\"").s(name).s("\",\"id\":").u(id).s("}");
        let b = self.head("f", name, track as usize, begin);
        b.s(",\"bp\":\"e\",\"name\":\"").s(name).s("\",\"id\":").u(id).s("}");
    }

    /// Writes the tail; the first error met, if any.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        let total: u64 = self.dropped.iter().sum();
        let b = &mut self.buf;
        b.s("\n],\"otherData\":{\"producer\":\"elite-rt\",\"dropped_events\":").u(total);
        b.s(",\"dropped_per_track\":[");
        for (i, d) in self.dropped.iter().enumerate() {
            if i > 0 {
                b.s(",");
            }
            b.u(*d);
        }
        b.s("]}}\n");
        self.spill(true);
        match self.error.take() {
            Some(e) => Err(e),
            None => self.file.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Put;

    #[test]
    fn numbers_and_strings_are_json() {
        let mut b = Vec::new();
        b.u(0)
            .s(" ")
            .u(18_446_744_073_709_551_615)
            .s(" ")
            .us(1_234_567)
            .s(" ")
            .us(5)
            .s(" ")
            .hex(0x7f0a)
            .s(" ");
        b.hex(0).s(" ").js("a\"b\\c\n\u{1}é");
        assert_eq!(
            String::from_utf8(b).unwrap(),
            "0 18446744073709551615 1234.567 0.005 0x7f0a 0x0 \"a\\\"b\\\\c\\u000a\\u0001é\""
        );
    }

    #[test]
    fn every_number_is_its_decimal() {
        for n in (0..2000u64).chain([9_999, 10_000, 123_456_789, u64::MAX / 3, 1 << 40]) {
            let mut b = Vec::new();
            b.u(n);
            assert_eq!(String::from_utf8(b).unwrap(), n.to_string());
        }
    }
}
