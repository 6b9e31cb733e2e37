//! Peers that run in a process of their own: the Go program ([`go`]) and `may` ([`may`]).
//!
//! Both take a workload on their command line as a suite, a bench and `-name=value`
//! parameters ([`PeerArgs`]), run it once untimed and once timed, and print one line per timed
//! pass, `ns_per_op=<float> answer=<integer>`, which [`run_child`] reads back as a
//! [`Sample`]. A fresh process per sample keeps the peers interleaved with the in-process
//! systems and gives each sample a fresh instance, as the in-process systems get.

pub mod go;
pub mod may;

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::Sample;

/// A workload for a peer process: which one, and its parameters.
#[derive(Clone, Debug)]
pub struct PeerArgs {
    /// The suite the bench belongs to.
    pub suite: &'static str,
    /// The bench's name.
    pub bench: &'static str,
    /// Operations per timed pass.
    pub n: u64,
    /// Worker threads (may) or `GOMAXPROCS` (go).
    pub procs: usize,
    /// Further parameters (`cutoff`, `fib`, ...).
    pub extra: Vec<(&'static str, u64)>,
}

impl PeerArgs {
    /// A workload of `n` operations on `procs` worker threads.
    pub fn new(suite: &'static str, bench: &'static str, n: u64, procs: usize) -> PeerArgs {
        PeerArgs { suite, bench, n, procs, extra: Vec::new() }
    }

    /// Adds the parameter `name`.
    pub fn with(mut self, name: &'static str, value: u64) -> PeerArgs {
        self.extra.push((name, value));
        self
    }

    /// The parameters as `-name=value` arguments, `n` and `procs` first.
    pub fn flags(&self) -> Vec<String> {
        let mut flags = vec![format!("-n={}", self.n), format!("-procs={}", self.procs)];
        flags.extend(self.extra.iter().map(|(k, v)| format!("-{k}={v}")));
        flags
    }
}

/// The line a peer prints for one timed pass.
pub fn sample_line(sample: &Sample) -> String {
    format!("ns_per_op={} answer={}", sample.ns_per_op, sample.answer)
}

/// Reads a line written by [`sample_line`] (or by the Go program).
fn parse_sample_line(line: &str) -> Option<Sample> {
    let mut ns_per_op = None;
    let mut answer = None;
    for field in line.split_whitespace() {
        match field.split_once('=')? {
            ("ns_per_op", v) => ns_per_op = v.parse().ok(),
            ("answer", v) => answer = v.parse().ok(),
            _ => {}
        }
    }
    Some(Sample { ns_per_op: ns_per_op?, answer: answer? })
}

/// How long a peer process may take for one sample before it is killed and the row failed.
const CHILD_TIME_LIMIT: Duration = Duration::from_secs(120);

/// Runs a peer process that prints one sample line, and returns that sample. A process that
/// runs past [`CHILD_TIME_LIMIT`] is killed, so a hung peer fails its row instead of the run.
pub fn run_child(command: &mut Command) -> Result<Sample, String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    // Drain both pipes on their own threads so a chatty child cannot block on a full pipe.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + CHILD_TIME_LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(2)),
            Ok(None) => {
                // Killing a child that has just exited is harmless; wait() reaps it either way.
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("peer process ran past {} s and was killed", CHILD_TIME_LIMIT.as_secs()));
            }
            Err(e) => return Err(format!("cannot wait for {program}: {e}")),
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if !status.success() {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!("peer process {status}: {}", last.unwrap_or("(no message)").trim()));
    }
    stdout
        .lines()
        .rev()
        .find_map(parse_sample_line)
        .ok_or_else(|| format!("peer process printed no sample line: {:?}", stdout.trim()))
}

/// Reads `pipe` to its end on a thread of its own; the thread returns the text read.
fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            // A read error leaves what was read so far, which is all a report needs.
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_lines_round_trip() {
        let sample = Sample { ns_per_op: 12.5, answer: 832040 };
        let back = parse_sample_line(&sample_line(&sample)).expect("parses");
        assert_eq!((back.ns_per_op, back.answer), (12.5, 832040));
        // The Go program prints floats with %g.
        let go = parse_sample_line("ns_per_op=1.94016898e+07 answer=4160200").expect("parses");
        assert_eq!((go.ns_per_op, go.answer), (1.94016898e7, 4160200));
        assert!(parse_sample_line("ns_per_op=1").is_none());
        assert!(parse_sample_line("hello").is_none());
    }

    #[cfg(unix)]
    #[test]
    fn child_processes_report_samples_and_failures() {
        let sh = |script: &str| {
            let mut command = Command::new("sh");
            command.arg("-c").arg(script);
            command
        };
        let sample = run_child(&mut sh("echo noise; echo ns_per_op=3.5 answer=4")).expect("a sample");
        assert_eq!((sample.ns_per_op, sample.answer), (3.5, 4));
        let failed = run_child(&mut sh("echo boom >&2; exit 3")).expect_err("exit status 3");
        assert!(failed.contains("boom"), "{failed}");
        assert!(run_child(&mut sh("echo nothing")).is_err());
    }
}
