//! The trace of the schedule (`RuntimeBuilder::trace`, `ELITE_TRACE`) read back: its events, their
//! parties and order; the ring's overflow count; the summary (`ELITE_SCHEDTRACE`); and the errors
//! for values the environment or the builder cannot use.

mod common;

use elite_rt::sync::Mutex;
use elite_rt::{BuildError, Runtime};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

const CHILD_ENV: &str = "ELITE_TRACE_TEST_CHILD";

/// A fresh path in the temporary directory for trace `what`.
fn trace_path(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("elite-trace-test-{}-{what}.json", std::process::id()))
}

/// The trace at `path`, parsed, checked against the Trace Event Format ([`breaches`], with
/// timestamps bounded by a generous 10 minutes); the file removed.
fn read_trace(path: &PathBuf) -> Value {
    let text = std::fs::read_to_string(path).expect("the trace file");
    let _ = std::fs::remove_file(path);
    let trace = serde_json::from_str(&text).unwrap_or_else(|e| panic!("the trace is not JSON: {e}\n{text}"));
    assert_conforms(&trace, 600e6);
    trace
}

fn events(trace: &Value) -> Vec<Value> {
    trace["traceEvents"].as_array().expect("traceEvents").clone()
}

/// Timestamp in nanoseconds (the file has microseconds with three decimals).
fn ts(e: &Value) -> u64 {
    (e["ts"].as_f64().expect("ts") * 1000.0).round() as u64
}

fn dur(e: &Value) -> u64 {
    (e["dur"].as_f64().expect("dur") * 1000.0).round() as u64
}

/// The runs (complete events of category `run`) of ULT `ult`, in time order.
fn runs_of(evs: &[Value], ult: u64) -> Vec<Value> {
    let mut runs: Vec<Value> =
        evs.iter().filter(|e| e["cat"] == "run" && e["args"]["ult"].as_u64() == Some(ult)).cloned().collect();
    runs.sort_by_key(ts);
    runs
}

fn instants(evs: &[Value], name: &str) -> Vec<Value> {
    let mut v: Vec<Value> = evs.iter().filter(|e| e["ph"] == "i" && e["name"] == name).cloned().collect();
    v.sort_by_key(ts);
    v
}

#[test]
fn a_ult_blocked_on_a_mutex_shows_run_block_wake_run_with_its_parties() {
    let path = trace_path("mutex");
    let rt = Runtime::builder().processors(1).no_chaos().trace(&path).build().unwrap();
    let (root, child, lock_at) = rt.block_on(|| {
        let m = Arc::new(Mutex::new(0u32));
        let lock_at = Arc::as_ptr(&m) as usize;
        let guard = m.lock().unwrap();
        let m2 = m.clone();
        let h = elite_rt::Builder::new()
            .name("waiter".into())
            .spawn(move || {
                *m2.lock().unwrap() += 1; // blocks: the root holds the lock
                elite_rt::current().id().as_u64()
            })
            .unwrap();
        // Let the child run until it blocks (one processor: it runs while the root yields).
        for _ in 0..10 {
            elite_rt::yield_now();
        }
        drop(guard); // wakes the child
        let child = h.join().unwrap();
        (elite_rt::current().id().as_u64(), child, lock_at)
    });
    drop(rt);
    let trace = read_trace(&path);
    let evs = events(&trace);
    let runs = runs_of(&evs, child);
    assert!(runs.len() >= 2, "the child runs twice at least: {runs:#?}");
    // Its first run ends blocked on the mutex (its wait list lies inside the mutex).
    let first = &runs[0];
    assert_eq!(first["args"]["end"], "block", "{first}");
    assert_eq!(first["name"], format!("waiter ({child})"), "a named ULT's runs carry its name");
    let on = u64::from_str_radix(first["args"]["on"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let size = std::mem::size_of::<elite_rt::sync::Mutex<u32>>() as u64;
    assert!((lock_at as u64..lock_at as u64 + 64 + size).contains(&on), "on {on:#x}, mutex at {lock_at:#x}");
    let blocked_at = ts(first) + dur(first);
    // The root wakes it, after it blocked, on the processor the policy chose.
    let wakes: Vec<Value> =
        instants(&evs, "wake").into_iter().filter(|w| w["args"]["ult"].as_u64() == Some(child)).collect();
    assert_eq!(wakes.len(), 1, "one wake-up of the child: {wakes:#?}");
    let wake = &wakes[0];
    assert_eq!(wake["args"]["by"].as_u64(), Some(root), "{wake}");
    assert_eq!(wake["args"]["target"].as_u64(), Some(0), "{wake}");
    assert!(ts(wake) >= blocked_at, "woken at {} before it blocked at {blocked_at}", ts(wake));
    // Then it runs again, and exits.
    let second = &runs[1];
    assert!(ts(second) >= ts(wake), "{second} before {wake}");
    assert_eq!(runs.last().unwrap()["args"]["end"], "exit");
    // The wake-up is a flow from the root's track to the child's next run.
    let flow_start = evs
        .iter()
        .find(|e| e["ph"] == "s" && e["cat"] == "wake" && ts(e) == ts(wake))
        .unwrap_or_else(|| panic!("no flow from the wake-up {wake}"));
    let flow_end = evs
        .iter()
        .find(|e| e["ph"] == "f" && e["id"] == flow_start["id"])
        .unwrap_or_else(|| panic!("no end to the flow {flow_start}"));
    assert_eq!(ts(flow_end), ts(second), "the flow ends at the child's next run");
    // And its spawn: by the root, a flow to its first run.
    let spawn =
        instants(&evs, "spawn").into_iter().find(|s| s["args"]["ult"].as_u64() == Some(child)).unwrap();
    assert_eq!(spawn["args"]["by"].as_u64(), Some(root));
    assert_eq!(trace["otherData"]["dropped_events"], 0);
}

#[test]
fn steals_appear_at_two_processors_one_for_each_counted() {
    let path = trace_path("steals");
    let rt = Runtime::builder().processors(2).no_chaos().trace(&path).build().unwrap();
    let stolen =
        |rt: &Runtime| rt.stats().processors.iter().map(|p| p.steals_node + p.steals_remote).sum::<u64>();
    for _ in 0..50 {
        rt.block_on(|| {
            let hs: Vec<_> = (0..64)
                .map(|_| {
                    elite_rt::spawn(|| {
                        let t = std::time::Instant::now();
                        while t.elapsed() < std::time::Duration::from_micros(100) {
                            std::hint::spin_loop();
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
        });
        if stolen(&rt) > 0 {
            break;
        }
    }
    let counted = stolen(&rt);
    assert!(counted > 0, "nothing was stolen in 50 rounds of 64 ULTs on 2 processors");
    drop(rt);
    let trace = read_trace(&path);
    assert_eq!(trace["otherData"]["dropped_events"], 0);
    let steals = instants(&events(&trace), "steal");
    assert_eq!(steals.len() as u64, counted, "one steal event per steal the counters saw");
    for s in &steals {
        let (thief, victim) = (s["tid"].as_u64().unwrap(), s["args"]["from"].as_u64().unwrap());
        assert!(thief < 2 && victim < 2 && thief != victim, "{s}");
    }
}

#[test]
fn a_full_ring_counts_what_it_drops() {
    let path = trace_path("overflow");
    let rt = Runtime::builder().processors(1).no_chaos().trace(&path).trace_buffer(16).build().unwrap();
    rt.block_on(|| {
        let other = elite_rt::spawn(|| (0..5000).for_each(|_| elite_rt::yield_now()));
        (0..5000).for_each(|_| elite_rt::yield_now());
        other.join().unwrap();
    });
    let switches = rt.stats().processors[0].switches;
    drop(rt);
    let trace = read_trace(&path);
    let dropped = trace["otherData"]["dropped_events"].as_u64().unwrap();
    let runs = events(&trace).iter().filter(|e| e["cat"] == "run").count() as u64;
    assert!(dropped > 0, "a ring of 16 events dropped none over {switches} switches");
    // Every switch is two events (begin and end), each either kept or counted dropped.
    assert!(2 * runs + dropped >= 2 * switches, "runs {runs}, dropped {dropped}, switches {switches}");
    assert!(
        events(&trace).iter().any(|e| e["ph"] == "C" && e["name"] == "dropped events"),
        "the drops are a counter track too"
    );
}

#[test]
fn runs_whose_end_the_ring_dropped_still_hold_their_flows() {
    // A tree of spawns joined through the fast path: each child runs nested in its joiner's run,
    // so the processor does not return to its loop (where it flushes) until the whole tree is
    // done, and a small ring fills in the middle of runs, dropping their ends. The flows of the
    // spawns kept before that bind to those runs: each must still have its slice in the file
    // (`read_trace` checks every flow's binding), as a viewer drops a flow whose end binds to
    // no slice (chrome://tracing: "flow_slice_end_error ... does not end at an actual slice").
    fn tree(depth: u32) -> u64 {
        if depth == 0 {
            return 1;
        }
        let left = elite_rt::spawn(move || tree(depth - 1));
        let right = elite_rt::spawn(move || tree(depth - 1));
        left.join().unwrap() + right.join().unwrap()
    }
    let path = trace_path("dropped-ends");
    let rt = Runtime::builder().processors(1).no_chaos().trace(&path).trace_buffer(64).build().unwrap();
    assert_eq!(rt.block_on(|| tree(8)), 256);
    drop(rt);
    let trace = read_trace(&path);
    assert!(trace["otherData"]["dropped_events"].as_u64().unwrap() > 0, "the ring of 64 dropped nothing");
    let evs = events(&trace);
    assert!(evs.iter().any(|e| e["ph"] == "f"), "no flow was kept");
    let cut: Vec<_> = evs.iter().filter(|e| e["cat"] == "run" && e["args"]["end"] == "dropped").collect();
    assert!(!cut.is_empty(), "no run is marked as cut short by the drops");
}

#[test]
fn a_blocking_call_shows_its_hand_off() {
    let path = trace_path("blocking");
    let rt = Runtime::builder().processors(1).no_chaos().trace(&path).build().unwrap();
    let ult = rt.block_on(|| {
        elite_rt::blocking(|| std::thread::sleep(std::time::Duration::from_millis(2)));
        elite_rt::current().id().as_u64()
    });
    drop(rt);
    let evs = events(&read_trace(&path));
    let calls = instants(&evs, "blocking call");
    assert!(calls.iter().all(|c| c["args"]["ult"].as_u64() == Some(ult)), "{calls:#?}");
    let what: Vec<&str> = calls.iter().map(|c| c["args"]["processor"].as_str().unwrap()).collect();
    // One hand-off, or (when the call ends before the spare thread has started, as on a slow or
    // sanitized build) the hand-off to a spare followed by the processor taken back.
    assert!(
        matches!(what[..], ["to a spare thread" | "inline" | "queued"] | ["to a spare thread", "reclaimed"]),
        "{what:?}"
    );
    assert_eq!(runs_of(&evs, ult)[0]["args"]["end"], "park", "the call parks its ULT");
}

#[test]
fn a_trace_file_that_cannot_be_created_fails_the_build_with_its_path() {
    let path = std::env::temp_dir().join("elite-no-such-directory-for-traces/trace.json");
    match Runtime::builder().processors(1).trace(&path).build() {
        Err(e @ BuildError::Trace { .. }) => {
            assert!(e.to_string().contains("elite-no-such-directory-for-traces"), "{e}");
        }
        other => panic!("expected a trace error, got {other:?}"),
    }
    let e = Runtime::builder().trace_buffer(15).trace(&path).build().unwrap_err();
    assert!(e.to_string().contains("trace_buffer") && e.to_string().contains("16..=16777216"), "{e}");
}

#[test]
fn malformed_environment_values_are_errors_that_say_what_is_allowed() {
    let out = common::run_child("trace_child", &[(CHILD_ENV, "build"), ("ELITE_TRACE", "  ")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(
        stdout.contains(
            "ENV-ERROR invalid environment variable ELITE_TRACE=\"  \": expected the path of a file"
        ),
        "{}",
        common::describe(&out)
    );
    let out = common::run_child("trace_child", &[(CHILD_ENV, "build"), ("ELITE_SCHEDTRACE", "fast")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ENV-ERROR invalid environment variable ELITE_SCHEDTRACE=\"fast\": expected a period in milliseconds, a whole number from 1 to 3600000"),
        "{}",
        common::describe(&out)
    );
}

#[test]
fn the_environment_turns_the_trace_and_the_summary_on() {
    let path = trace_path("env");
    let p = path.to_string_lossy().into_owned();
    let out = common::run_child(
        "trace_child",
        &[(CHILD_ENV, "run"), ("ELITE_TRACE", &p), ("ELITE_SCHEDTRACE", "5")],
    );
    assert!(out.status.success(), "{}", common::describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.lines().any(|l| l.starts_with("SCHED ") && l.contains(": processors=2 ")), "{stderr}");
    for p in 0..2 {
        assert!(
            stderr.lines().any(|l| l.contains(&format!(" P{p}: runs=")) && l.contains(" runq=")),
            "no line for P{p}: {stderr}"
        );
    }
    let evs = events(&read_trace(&path));
    assert!(evs.iter().any(|e| e["cat"] == "run"), "the env's trace has runs");
    // The second runtime of the process writes beside the first.
    let second = path.with_file_name(format!("{}.2.json", path.file_stem().unwrap().to_string_lossy()));
    let evs = events(&read_trace(&second));
    assert!(evs.iter().any(|e| e["cat"] == "run"), "the second runtime's trace has runs");
}

#[test]
#[ignore = "child half of the tests above (run with ELITE_TRACE_TEST_CHILD set)"]
fn trace_child() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else { return };
    match scenario.as_str() {
        "build" => match Runtime::builder().processors(1).build() {
            Err(e @ BuildError::Environment { .. }) => println!("ENV-ERROR {e}"),
            other => panic!("expected an environment error, got {other:?}"),
        },
        "run" => {
            for _ in 0..2 {
                let rt = Runtime::builder().processors(2).build().unwrap();
                rt.block_on(|| {
                    let hs: Vec<_> = (0..16).map(|i| elite_rt::spawn(move || i)).collect();
                    hs.into_iter().for_each(|h| drop(h.join()));
                    elite_rt::sleep(std::time::Duration::from_millis(20)); // a few summaries
                });
            }
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// What the Trace Event Format (its JSON object form, the one chrome://tracing and Perfetto
/// import) asks of the events this runtime writes, checked on `trace`; every breach found, each
/// naming the event and the rule. `span_us` bounds the timestamps: microseconds since the
/// runtime was built, so every `ts` (and `ts + dur`) lies in `0..=span_us` when `span_us` is the
/// time from before the build to after the drop.
///
/// The rules: a top-level object with a `traceEvents` array, `displayTimeUnit` `ms` or `ns`,
/// `otherData` an object; every event has a known phase, an integer `pid` and a name; every
/// event but a process's metadata has an integer `tid` and every timed event a finite `ts`; a
/// complete event (`X`) has a `dur` of at least 0, and the complete events of a thread nest (one
/// lies inside another or after it, never across its end); an instant's scope is `g`, `p` or
/// `t`; a counter (`C`) has numeric arguments (here counts so far: never falling in time);
/// metadata (`M`) is one of the names the viewers know, with its argument; every thread an
/// event is on is named; a flow is one start (`s`) and one end (`f`) with the same id, category
/// and name, the end not before the start; the start binds to the slice enclosing it on its
/// thread and the end (`bp: "e"`) to the slice enclosing it on its own, so each must have one.
fn breaches(trace: &Value, span_us: f64) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut out = Vec::new();
    let Some(top) = trace.as_object() else { return vec!["the trace is not a JSON object".into()] };
    if let Some(unit) = top.get("displayTimeUnit") {
        if unit != "ms" && unit != "ns" {
            out.push(format!("displayTimeUnit {unit} is neither \"ms\" nor \"ns\""));
        }
    }
    if top.get("otherData").is_some_and(|o| !o.is_object()) {
        out.push("otherData is not an object".into());
    }
    let Some(evs) = top.get("traceEvents").and_then(Value::as_array) else {
        out.push("no traceEvents array".into());
        return out;
    };
    // Times in nanoseconds (the file writes microseconds with three decimals).
    let ns = |v: &Value| (v.as_f64().unwrap_or(f64::NAN) * 1000.0).round() as i64;
    let mut slices: BTreeMap<u64, Vec<(i64, i64)>> = BTreeMap::new();
    let mut named: BTreeSet<u64> = BTreeSet::new();
    let mut used: BTreeSet<u64> = BTreeSet::new();
    let mut flows: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    let mut counters: BTreeMap<String, Vec<(i64, f64)>> = BTreeMap::new();
    for e in evs {
        let ph = e["ph"].as_str().unwrap_or("");
        if !["X", "i", "C", "s", "f", "M"].contains(&ph) {
            out.push(format!("unknown or missing phase: {e}"));
            continue;
        }
        if !e["pid"].is_u64() {
            out.push(format!("no integer pid: {e}"));
        }
        if e["name"].as_str().is_none_or(str::is_empty) {
            out.push(format!("no name: {e}"));
        }
        let process_metadata = ph == "M" && e["name"].as_str().is_some_and(|n| n.starts_with("process_"));
        if !process_metadata && !e["tid"].is_u64() {
            out.push(format!("no integer tid: {e}"));
        }
        let tid = e["tid"].as_u64().unwrap_or(u64::MAX);
        if ph != "M" {
            used.insert(tid);
            let ts = e["ts"].as_f64();
            match ts {
                Some(t) if t.is_finite() && (0.0..=span_us).contains(&t) => {}
                _ => out.push(format!("ts not a time in 0..={span_us} us: {e}")),
            }
        }
        match ph {
            "X" => match e["dur"].as_f64() {
                Some(d) if d >= 0.0 && e["ts"].as_f64().unwrap_or(0.0) + d <= span_us => {
                    slices.entry(tid).or_default().push((ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"])));
                }
                _ => out.push(format!("complete event without a dur in 0..=span: {e}")),
            },
            "i" => {
                if !e.get("s").is_none_or(|s| s == "g" || s == "p" || s == "t") {
                    out.push(format!("instant with scope other than g, p, t: {e}"));
                }
            }
            "C" => match e["args"].as_object() {
                Some(args) if !args.is_empty() && args.values().all(Value::is_number) => {
                    for (k, v) in args {
                        let series = format!("{} {k}", e["name"].as_str().unwrap_or(""));
                        counters.entry(series).or_default().push((ns(&e["ts"]), v.as_f64().unwrap()));
                    }
                }
                _ => out.push(format!("counter without numeric arguments: {e}")),
            },
            "s" | "f" => {
                if !(e["id"].is_u64() || e["id"].is_string()) || !e["cat"].is_string() {
                    out.push(format!("flow event without an id or a category: {e}"));
                }
                if ph == "f" && !e.get("bp").is_none_or(|bp| bp == "e") {
                    out.push(format!("flow end with a binding point other than \"e\": {e}"));
                }
                flows.entry(e["id"].to_string()).or_default().push(e);
            }
            _ => {
                let name = e["name"].as_str().unwrap_or("");
                let arg = match name {
                    "process_name" | "thread_name" => e["args"]["name"].is_string(),
                    "process_sort_index" | "thread_sort_index" => e["args"]["sort_index"].is_i64(),
                    "process_labels" => e["args"]["labels"].is_string(),
                    _ => {
                        out.push(format!("metadata of an unknown name: {e}"));
                        true
                    }
                };
                if !arg {
                    out.push(format!("metadata without its argument: {e}"));
                }
                if name == "thread_name" {
                    named.insert(tid);
                }
            }
        }
    }
    for tid in used.difference(&named) {
        if *tid != u64::MAX {
            out.push(format!("thread {tid} has events but no thread_name"));
        }
    }
    // Nesting: sorted by start, longest first, each slice ends before its parent does.
    for (tid, list) in &mut slices {
        list.sort_by_key(|&(b, e)| (b, std::cmp::Reverse(e)));
        let mut stack: Vec<(i64, i64)> = Vec::new();
        for &(b, e) in list.iter() {
            while stack.last().is_some_and(|&(_, pe)| pe <= b) {
                stack.pop();
            }
            if let Some(&(pb, pe)) = stack.last() {
                if e > pe {
                    out.push(format!(
                        "thread {tid}: slice {b}..{e} ns overlaps the end of slice {pb}..{pe} ns"
                    ));
                    continue;
                }
            }
            stack.push((b, e));
        }
    }
    let enclosed =
        |tid: u64, t: i64| slices.get(&tid).is_some_and(|l| l.iter().any(|&(b, e)| b <= t && t <= e));
    for (id, pair) in &flows {
        let starts: Vec<_> = pair.iter().filter(|e| e["ph"] == "s").collect();
        let ends: Vec<_> = pair.iter().filter(|e| e["ph"] == "f").collect();
        if starts.len() != 1 || ends.len() != 1 {
            out.push(format!("flow {id}: {} starts and {} ends", starts.len(), ends.len()));
            continue;
        }
        let (s, f) = (starts[0], ends[0]);
        if s["cat"] != f["cat"] || s["name"] != f["name"] {
            out.push(format!("flow {id}: start and end differ in category or name: {s} {f}"));
        }
        if ns(&f["ts"]) < ns(&s["ts"]) {
            out.push(format!("flow {id} ends before it starts: {s} {f}"));
        }
        for e in [s, f] {
            if !enclosed(e["tid"].as_u64().unwrap_or(u64::MAX), ns(&e["ts"])) {
                out.push(format!("flow {id}: no slice on its thread encloses {e}"));
            }
        }
    }
    for (series, mut points) in counters {
        points.sort_by_key(|p| p.0);
        if points.windows(2).any(|w| w[1].1 < w[0].1) {
            out.push(format!("counter {series} falls in time: {points:?}"));
        }
    }
    out
}

/// `trace` breaks none of the rules of [`breaches`].
fn assert_conforms(trace: &Value, span_us: f64) {
    let found = breaches(trace, span_us);
    assert!(
        found.is_empty(),
        "{} breaches of the Trace Event Format, the first:\n{}",
        found.len(),
        found[..found.len().min(20)].join("\n")
    );
}

#[test]
fn a_mixed_trace_conforms_to_the_trace_event_format_in_microseconds() {
    let path = trace_path("format");
    let start = std::time::Instant::now();
    let rt = Runtime::builder().processors(2).trace(&path).build().unwrap();
    // From outside the processors: a spawn (the root of block_on) and a wake-up (an OS thread
    // sending to a ULT that waits in `recv`).
    let sleeper = rt.block_on(|| {
        let m = Arc::new(Mutex::new(0u64));
        let mut hs = Vec::new();
        for i in 0..32u64 {
            let m = m.clone();
            hs.push(elite_rt::spawn(move || {
                for _ in 0..4 {
                    *m.lock().unwrap() += i;
                    elite_rt::yield_now();
                }
                // A child joined at once: the join fast path nests its run in this one.
                elite_rt::spawn(move || i).join().unwrap()
            }));
        }
        let sleeper = elite_rt::Builder::new()
            .name("sleeper".into())
            .spawn(|| {
                elite_rt::sleep(std::time::Duration::from_millis(30));
                elite_rt::current().id().as_u64()
            })
            .unwrap();
        elite_rt::blocking(|| std::thread::sleep(std::time::Duration::from_millis(2)));
        let (tx, rx) = elite_rt::sync::mpsc::channel();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(5));
            tx.send(7u64).unwrap();
        });
        assert_eq!(rx.recv(), Ok(7));
        let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, (0..32).sum::<u64>());
        sender.join().unwrap();
        sleeper.join().unwrap()
    });
    rt.set_policy(elite_rt::Policy::virtual_time()).unwrap();
    rt.block_on(|| (0..8).map(|i| elite_rt::spawn(move || i)).for_each(|h| drop(h.join())));
    drop(rt);
    // The trace's clock is the time-stamp counter calibrated against `Instant` over a millisecond
    // (`trace::Clock`): 1% of slack for that calibration, far below a wrong unit (1000x) or the
    // several percent a skewed calibration once gave.
    let span_us = start.elapsed().as_secs_f64() * 1e6 * 1.01;
    let trace = read_trace(&path);
    assert_conforms(&trace, span_us);
    // Microseconds, not another unit: the sleeper's run that ended in its 30 ms sleep and its next
    // run lie at least 30 000 apart, and within the runtime's life.
    let evs = events(&trace);
    let runs = runs_of(&evs, sleeper);
    let slept = runs.iter().position(|r| r["args"]["end"] == "sleep").expect("a run ending in the sleep");
    let (before, after) = (&runs[slept], &runs[slept + 1]);
    let gap_us =
        after["ts"].as_f64().unwrap() - before["ts"].as_f64().unwrap() - before["dur"].as_f64().unwrap();
    assert!((30_000.0..span_us).contains(&gap_us), "slept 30 ms, the trace says {gap_us} us");
}
