//! The `may` peer, run in a child process of this command.
//!
//! `may` fixes its number of worker threads when its scheduler first starts, for the whole
//! process, while our benches need one worker for some and every CPU for others. So each
//! sample re-runs this executable as
//!
//! ```text
//! elite-bench __may-peer <suite> <bench> -n=N -procs=P [-name=value ...]
//! ```
//!
//! ([`CHILD_COMMAND`], not a suite and not listed in the usage). The child sets the worker
//! count, looks the workload up by suite name (the caller of [`child_main`] says where: the
//! suite's `may_child` function), runs it once untimed and once timed, and prints one sample line
//! (see [`super::sample_line`]).

use std::collections::BTreeMap;
use std::process::{Command, ExitCode};
use std::time::Duration;

use super::{run_child, sample_line, PeerArgs};
use crate::harness::{panic_message, Contender, Params, Sample};

/// The first argument that makes this executable a `may` child process.
pub const CHILD_COMMAND: &str = "__may-peer";

/// Runs one bench of a suite, by name, on may inside a may child process.
pub type MayWorkload = fn(&str, &ChildArgs) -> Result<Sample, String>;

/// Runs one sample of `args` in a child process.
pub fn run(args: &PeerArgs) -> Result<Sample, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    run_child(Command::new(exe).arg(CHILD_COMMAND).arg(args.suite).arg(args.bench).args(args.flags()))
}

/// The contender `may` of a bench: each sample runs `peer` in a child process.
pub fn contender(peer: &PeerArgs, params: Params, expected: u64) -> Contender {
    let args = peer.clone();
    Contender::new("may", params, expected, move || run(&args))
}

/// The workload parameters as the child process received them.
#[derive(Debug)]
pub struct ChildArgs {
    /// Operations per timed pass.
    pub n: u64,
    /// Worker threads.
    pub procs: usize,
    /// The other `-name=value` parameters.
    extra: BTreeMap<String, u64>,
}

impl ChildArgs {
    /// The parameter `name`, which the parent must have passed.
    pub fn get(&self, name: &str) -> Result<u64, String> {
        self.extra.get(name).copied().ok_or_else(|| format!("missing parameter -{name}"))
    }

    /// Parses `-name=value` arguments; `n` and `procs` are required and positive, `procs` at
    /// most [`elite_rt::MAX_PROCESSORS`].
    pub(crate) fn parse(flags: &[String]) -> Result<ChildArgs, String> {
        let mut values = BTreeMap::new();
        for flag in flags {
            let (name, value) = flag
                .strip_prefix('-')
                .and_then(|f| f.split_once('='))
                .ok_or_else(|| format!("expected -name=value, got `{flag}`"))?;
            let value: u64 =
                value.parse().map_err(|_| format!("-{name} wants a whole number, got `{value}`"))?;
            values.insert(name.to_string(), value);
        }
        let n = values.remove("n").filter(|&n| n > 0);
        let procs = values.remove("procs").filter(|&p| p > 0);
        match (n, procs) {
            (Some(n), Some(procs)) => {
                // may starts that many worker threads: as many as an elite runtime may have.
                let max = elite_rt::MAX_PROCESSORS;
                match usize::try_from(procs) {
                    Ok(procs) if procs <= max => Ok(ChildArgs { n, procs, extra: values }),
                    _ => Err(format!("-procs must be 1..={max}, got {procs}")),
                }
            }
            _ => Err("-n and -procs are required and must be positive".into()),
        }
    }
}

/// The child process: `args` are `<suite> <bench> -name=value ...`; `workloads` gives a suite's
/// may workloads by the suite's name (`None`: the suite has none).
pub fn child_main(args: &[String], workloads: impl Fn(&str) -> Option<MayWorkload>) -> ExitCode {
    let (suite, bench, flags) = match args {
        [suite, bench, flags @ ..] => (suite, bench, flags),
        _ => {
            eprintln!("usage: elite-bench {CHILD_COMMAND} <suite> <bench> -n=N -procs=P ...");
            return ExitCode::from(2);
        }
    };
    let params = match ChildArgs::parse(flags) {
        Ok(params) => params,
        Err(message) => {
            eprintln!("elite-bench {CHILD_COMMAND}: {message}");
            return ExitCode::from(2);
        }
    };
    let Some(workload) = workloads(suite) else {
        eprintln!("elite-bench {CHILD_COMMAND}: suite `{suite}` has no may workloads");
        return ExitCode::from(2);
    };
    may::config().set_workers(params.procs);
    match workload(bench, &params) {
        Ok(sample) => {
            println!("{}", sample_line(&sample));
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("elite-bench {CHILD_COMMAND}: {suite}/{bench}: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Starts a `may` coroutine running `f`.
pub fn spawn<F, T>(f: F) -> may::coroutine::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: may's two conditions: the closures of our workloads keep no reference to a
    // thread-local across a switch (they only compute, allocate, and spawn or join), and their
    // recursion is shallow (fib's at most its argument deep, a few dozen bytes a frame), far
    // inside may's default 32 KiB stacks.
    unsafe { may::coroutine::spawn(f) }
}

/// Waits for `handle`; a panic of the coroutine becomes an error.
pub fn join<T>(handle: may::coroutine::JoinHandle<T>) -> Result<T, String> {
    handle.join().map_err(|payload| format!("a may coroutine panicked: {}", panic_message(&*payload)))
}

/// Runs a pass as a may coroutine (the root task) and waits for it from this thread.
pub fn root<F>(pass: F) -> Result<(Duration, u64), String>
where
    F: FnOnce() -> Result<(Duration, u64), String> + Send + 'static,
{
    join(spawn(pass))?
}
