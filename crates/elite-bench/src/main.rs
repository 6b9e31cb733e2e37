//! # elite-bench: elite and its peers, measured in the same run
//!
//! ```text
//! cargo run --release -p elite-bench -- <suite> [--json FILE|-] [--quick] [--reps N] [--max-reps M] [--bench NAME]...
//! cargo run --release -p elite-bench -- affinity [--policy NAME]... [--cachegrind]
//! cargo run -p elite-bench -- report [--data DIR] [--out FILE] [--check] [--run [--quick]]
//! ```
//!
//! `report` ([`report`]) writes `docs/benchmarks.md`'s tables and SVG charts from the suites' JSON
//! documents, without running anything (or, with `--run`, after running every suite).
//!
//! The machines we build on are shared 2-core virtual machines whose absolute speed drifts, so
//! every claim this command supports is a *ratio measured in one run* (`docs/bench-json.md` in
//! the repository is the contract for the command line and the JSON document). For each bench of a suite the harness ([`harness`]) runs every system interleaved
//! (A B C A B C ...): one warm-up round, then [`harness::model::REPS`] measured rounds (`--reps N` asks for
//! another count, up to [`harness::model::MAX_REPS`]: more rounds for a steadier median; `--max-reps M`
//! then adds rounds, up to M, while a target of the bench is undecided at 95%, and says on stderr
//! how many each bench ran and why it stopped). Each sample
//! starts a fresh instance of the system (a runtime, a thread pool, a process), runs the workload
//! once untimed and once timed, and returns the time per operation together with the workload's
//! *answer* (a sum, a count, a fib value); a bench whose metric is a rate reports the inverse. A
//! target that is a ratio of two rows of one round can also add a derived row to its bench (see
//! [`harness::Target::WithinOfBest`]). A wrong answer, an error or a panic marks the row failed
//! (`ok: false`, no time reported) and the command exits with status 1 once everything has run.
//! A contender whose measurement is deterministic (simulated cache misses, metric `ll_misses`)
//! runs once, in the first measured round, without a warm-up.
//!
//! The output is a table on stdout (bench, system, processors, median, min, max, unit, ok), one
//! line per bench comparing elite with its peers against the bench's targets (a missed target
//! prints `MISSED` but does not change the exit status; a verdict whose 95% interval contains the
//! bound adds `undecided at 95%`), and with `--json FILE` the JSON document, which records the
//! rows and each target with its line's text, its verdict and the ratios behind it
//! (`--json -` writes it to stdout and moves the human report to stderr). `--quick` shrinks the
//! sizes so a suite ends well within a minute. A progress line is drawn on stderr when stderr is a
//! terminal. Exit status: 0 when every answer was right, 1 when one was not (or the JSON file could
//! not be written), 2 for a command-line mistake.
//!
//! ## Systems
//!
//! - `elite`: this workspace's runtime ([`elite_rt`]); a fresh `Runtime` per sample, the workload
//!   runs as the root ULT of `block_on`. `elite/<variant>` is the same runtime with one setting
//!   changed: `elite/central` is built with `.central(true)`; `elite/adaptive`, `elite/spin` and
//!   `elite/block` with the spin policies `Adaptive`, `Fixed(large)` and `Block`.
//! - `corosensei`: the raw stack switch elite is built on, without any scheduler: the physical
//!   limit of our stack.
//! - `go`: the Go runtime, from the program in `crates/elite-bench/go` ([`peers::go`]), built with
//!   the `go` on the PATH once per invocation and run once per sample with `GOMAXPROCS` set. Skipped,
//!   with a line saying so, when there is no `go` or the build fails.
//! - `may`: the `may` 0.3 coroutine library. Its worker count is a process-wide setting fixed at
//!   first use, so each sample runs in a child process of this command ([`peers::may`]).
//! - `rayon`: `rayon::join` on a `rayon::ThreadPool`, the fork-join reference.
//! - `std-thread`: the operating system's threads through `std::thread`.
//!
//! Every system times the same loop from inside its own root task (root ULT, coroutine, goroutine,
//! pool thread), so start-up and shut-down are never part of an operation.
//!
//! ## Suite `micro`
//!
//! All benches report `ns_per_op`. See [`suites::micro`] for sizes and targets.
//!
//! - `yield`: one task yields in a loop on one processor. elite: `yield_now` in the root ULT of a
//!   one-processor runtime. corosensei: resume a coroutine that loops on `suspend`, one round trip
//!   per operation. go: `runtime.Gosched` with `GOMAXPROCS=1`. may: `coroutine::yield_now` with
//!   one worker. std-thread: `std::thread::yield_now`. Answer: the number of yields.
//! - `spawn_join`: spawn one task and join it at once, over and over, on one processor (elite is
//!   also measured with two). corosensei: "pooled create-run": one stack reused by a new
//!   `Coroutine::with_stack` per operation, resumed to completion and taken back with
//!   `into_stack`. go: a goroutine that sends its value on a channel, then a receive. may:
//!   `go!(..).join()` from inside a coroutine. std-thread: `thread::spawn(..).join()` (fewer
//!   iterations). Answer: the sum of the returned values.
//! - `spawn_bulk`: spawn n tasks (1 000 000; `--quick` 100 000) that each return their index, then
//!   join them all, with every CPU working. go: goroutines storing into a slice, and a
//!   `sync.WaitGroup`. may: join handles in a `Vec`, when `vm.max_map_count` allows (see
//!   [`suites::micro`]). Answer: the sum.
//! - `fib`: naive parallel fib(30) (`--quick` fib(25)), a new task for fib(n-1) above the cutoff
//!   (10) and a sequential recursion below it, with every CPU working. rayon: `rayon::join`. One
//!   operation is one whole fib computation. Answer: the sum of the computed values.
//!
//! ## Suite `sync`
//!
//! Synchronization between ULTs, and the runtime variants that serve it. See [`suites::sync`]
//! for sizes, targets and the derived `ratio_to_best_fixed` rows.
//!
//! - `ping_pong` (`ns_per_op`): two tasks pass a counter back and forth through channels; one
//!   operation is one round trip. elite (1 and 2 processors), go (unbuffered channels), may,
//!   std-thread. Answer: the final counter.
//! - `mutex_contended` (`ns_per_op`): 1024 tasks each do 2000 times {lock, increment, unlock,
//!   yield}. elite and go, 1 and 2 processors. Answer: the counter.
//! - `sync_peak` (`ops_per_sec` per processor, ELiTE figure 2.5): 4096 ULTs with 8 KiB stacks
//!   in a ring of semaphores with 1024 circulating permits; one operation is one acquire.
//!   elite, elite/central, go, at 1 and 2 processors. Answer: the number of acquires.
//! - `fork_join_rate` (`ops_per_sec`, ELiTE figure 2.3): the root forks and joins batches of 64
//!   trivial ULTs; one operation is one ULT. elite and elite/central, 1 and 2 processors.
//!   Answer: the sum of the returned values.
//! - `spin_regimes` (`ns_per_op`): 64 ULTs on 2 processors take a mutex around a short (~50 ns)
//!   or long (~5 µs) critical section, under each spin policy: elite/adaptive, elite/spin,
//!   elite/block; plus, per regime, a `ratio_to_best_fixed` row. Answer: the counter.
//!
//! ## Suite `affinity`
//!
//! The cache-affinity policies of ELiTE section 3.1 on the synthetic workload of section 3.2;
//! systems `elite/no-affinity`, `elite/virtual-time`, `elite/minimum-misses`,
//! `elite/reload-transient` (the runtime built with that policy) and `go`. See
//! [`suites::affinity`] for the workload, why each policy wins or loses on it, and the targets.
//!
//! - `synthetic_1024` (`ops_per_sec`, 1 and 2 processors): 1024 ULTs in groups of twice the
//!   64 KiB working sets a core's private cache holds (32 with a 1 MiB L2), each
//!   walking a private 64 KiB working set (dependent loads) between synchronizations with its
//!   group. Answer: the sum of every walk. Its `elite/<policy>+data` rows run the same ULTs
//!   each declaring its working set as its data block, which the runtime prefetches.
//! - `no_locality` (`ops_per_sec`, 1 and 2 processors): the same with 1 KiB working sets; what
//!   each policy's bookkeeping costs.
//! - with `--cachegrind`, `synthetic_1024` (`ll_misses`, 1 processor): the last-level misses
//!   cachegrind simulates for a 2 MiB cache (`--LL=2097152,16,64`) while
//!   `elite-bench affinity-probe synthetic_1024 <policy>` runs one pass; skipped, with a line
//!   saying so, without `valgrind`.
//!
//! `--policy NAME` (repeatable) keeps only the named policies; an unknown name is an error that
//! lists the valid ones. `elite-bench affinity-probe <bench> <policy> [--group N] [--iterations N]
//! [--processors N] [--quick]` runs one pass of an affinity workload (at 1 processor unless
//! `--processors` says otherwise), prints its sample line, and on stderr each processor's
//! switches, steals, wake-ups and parks: the command to run under cachegrind (or callgrind) by
//! hand; two runs at different `--iterations` give the cost of one round without the start's.
//!
//! ## Suite `blocking`
//!
//! What [`elite_rt::blocking`] costs; see [`suites::blocking`]. No peers but the operating
//! system's threads, no targets.
//!
//! - `blocking_call` (`ns_per_op`, 1 and 2 processors): `blocking(move || i)`; `elite` back to
//!   back, `elite/isolated` one call after every 200 µs of busy work (the spare thread asleep),
//!   `std-thread` a thread spawned and joined per call. Answer: the sum of the values.
//! - `blocking_sleep` (`ns_per_op`, 1 and 2 processors): a call that sleeps 1 ms; `std-thread`
//!   the same sleep on a plain thread. Answer: the number of calls.
//!
//! `elite-bench blocking-probe <op> <n> [--processors N]` runs `n` operations (`yield`,
//! `spawn_join`, `spawn_bulk` (all `n` spawned, then joined), `ping_pong` over unbounded channels, `ping_pong_sync` over rendezvous channels as
//! the sync suite's `ping_pong`, `blocking`) in the root ULT of a one-processor runtime (or one of
//! `N`) and prints its answer: the
//! program to count instructions per operation of with callgrind (two values of `n`, difference).
//!
//! ## Suite `places`
//!
//! Where a ULT runs and whom an idle processor robs (issue 20): LASSI's locality hints and CAF's
//! locality-guided stealing on their own experiments; see [`suites::places`] for the workloads,
//! the variants, the emulated-distance mode and the targets. All benches report `ops_per_sec`.
//!
//! - `cache_stress` (1 and 2 processors): two arrays of 3/4 of a core's private cache, 8 ULTs
//!   per processor making passes over one of them and yielding between passes; `elite/best`,
//!   `elite/worst`, `elite/ignorant`, `elite/random` placements, `go` and `rayon` (ignorant).
//!   `cache_stress_fixed`: the elite variants with 384 KiB arrays on every host. Answer: the sum
//!   of every pass's result.
//! - `merge_sort` (1 and 2 processors): 4 194 304 `u32` by a parallel merge sort, `elite/hinted`
//!   (place hints by range), `elite/unhinted`, `rayon` (the same code on `rayon::join`),
//!   `rayon/par_sort_unstable`. Answer: a hash of the sorted array.
//! - `block_matmul` (1 and 2 processors): 1024 x 1024 `f64`, blocks from the private cache, a ULT
//!   per tile; `elite/hinted`, `elite/unhinted`, `rayon`. Answer: a weighted sum of the product.
//! - `matrix_search`: searcher ULTs, each owning a grid, reading words down its columns for
//!   the puzzles a coordinator sends them over channels (CAF's actors), the work uneven;
//!   `elite/lgs`, `elite/node-then-all`, `elite/random` stealing, on the host (`emulated`
//!   false, 1 and 2 processors) and on an emulated 2-node topology (`emulated` true, 4
//!   processors). Answer: the number of matches.
//! - `concdict`, `concsll` (1 and 2 processors): Savina's dictionary and sorted list served by a
//!   ULT behind a channel to 20 workers; `elite/pinned` (soft pinning) and `elite/unpinned`.
//!   Answer: requests served plus a checksum of the final contents.
//!
//! `elite-bench places-probe <concdict|concsll> <pinned|unpinned> <processors> <requests>` runs
//! one pass of `concdict` or `concsll` with `requests` requests per worker and prints its time
//! per request and answer: the program to count instructions per request of with callgrind.
//! `elite-bench places-probe merge_sort <system> <processors> <runs> [branchless]` sorts
//! `merge_sort`'s input with its algorithm, instrumented, and prints per run where each leaf
//! sort and merge ran and each level's time per element (`elite/hinted`, `elite/unhinted`,
//! `elite/worst`, `rayon`, `sequential`).
//!
//! ## Adding a suite
//!
//! A suite is one module under `src/suites/` with a `benches` function returning
//! [`harness::Bench`]es (plus, if it has Go peers, one file in `go/` registering its workloads, and
//! if it has may peers, a `may_child` dispatch), and one entry in [`suites::SUITES`].
//!
//! ## Modules
//!
//! [`harness`] runs benches and reports them; [`peers`] runs the peers that live in processes of
//! their own (Go, may) and makes their contenders; [`workloads`] holds the pieces of workloads
//! that several suites share, [`cachegrind`] the runs under valgrind, [`machine`] what is known
//! of the machine; [`suites`] builds the benches from all of these. Imports go one way: a suite
//! may use any of the others, and none of the others uses a suite (the may child process finds
//! its suite's workloads through the lookup `main` hands it).

mod cachegrind;
#[cfg(test)]
mod fuzz_inputs;
mod harness;
mod machine;
mod peers;
mod report;
mod suites;
mod workloads;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// What the command line asked for.
struct Options {
    /// The suite to run, one of [`suites::SUITES`].
    suite: &'static suites::Suite,
    /// Where to write the JSON document: a path, `-` for stdout, or nowhere.
    json: Option<String>,
    /// Shrink the sizes (`--quick`).
    quick: bool,
    /// `--policy NAME`, repeatable: the scheduling policies of suites `affinity` and `grid`.
    policies: Vec<elite_rt::policy::Policy>,
    /// `--cachegrind`: suites `affinity` and `grid` add their simulated-cache-miss benches.
    cachegrind: bool,
    /// `--bench NAME`, repeatable: only these benches of the suite.
    benches: Vec<String>,
    /// `--reps N`: measured rounds per bench.
    reps: usize,
    /// `--max-reps M`: at most this many measured rounds per bench, more than `reps` only while
    /// a target is undecided at 95%.
    max_reps: Option<usize>,
}

const USAGE: &str = concat!(
    "usage: elite-bench <suite> [--json FILE|-] [--quick] [--reps N] [--max-reps M] [--bench NAME]... [--policy NAME]... [--cachegrind]\n",
    "       elite-bench affinity-probe <bench> <policy> [--group N] [--iterations N] [--processors N] [--quick] [--data] [--positions]\n",
    "       elite-bench grid-probe <policy> [--prefetch] [--size LEVEL] [--processors N] [--patch CELLS]\n",
    "       elite-bench blocking-probe <yield|spawn_join|spawn_bulk|ping_pong|ping_pong_sync|blocking> <n> [--processors N]\n",
    "       elite-bench cosched-probe <elite/plain|elite/aggregated> <block_bytes> <read|write> <groups> <ults> <passes>\n",
    "       elite-bench places-probe <concdict|concsll> <pinned|unpinned> <processors> <requests>\n",
    "       elite-bench places-probe merge_sort <elite/hinted|elite/unhinted|elite/worst|rayon|sequential> <processors> <runs> [branchless]\n",
    "       elite-bench report [--data DIR] [--out FILE] [--check] [--run [--quick]]"
);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(peers::may::CHILD_COMMAND) {
        return peers::may::child_main(&args[1..], suites::may_workloads);
    }
    if args.first().map(String::as_str) == Some(suites::affinity::PROBE_COMMAND) {
        return suites::affinity::probe_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some(suites::grid::PROBE_COMMAND) {
        return suites::grid::probe_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some(suites::blocking::PROBE_COMMAND) {
        return suites::blocking::probe_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some(suites::cosched::aggregation::PROBE_COMMAND) {
        return suites::cosched::aggregation::probe_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some(suites::places::PROBE_COMMAND) {
        return suites::places::probe_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some(report::COMMAND) {
        return report::main(&args[1..]);
    }
    match parse_args(&args) {
        Ok(Some(options)) => run(&options),
        Ok(None) => {
            println!("{USAGE}\n\n{}", valid_choices());
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("elite-bench: {message}\n{USAGE}\n\n{}", valid_choices());
            ExitCode::from(2)
        }
    }
}

/// The valid suites and flags, for usage and error messages.
fn valid_choices() -> String {
    let names: Vec<&str> = suites::SUITES.iter().map(|s| s.name).collect();
    format!(
        "suites: {}\nflags:  --json FILE   write the JSON document to FILE (`-`: stdout): the rows, and each target\n                      \
         with its line's text and verdict\n        \
         --quick       shrunken sizes, the whole suite in well under a minute\n        \
         --reps N      measured rounds per bench after the warm-up round (default {}, at most {})\n        \
         --max-reps M  then more rounds, up to M in all (more than N, at most {}), while a target's\n                      \
         95% interval contains its bound (`undecided at 95%`) or the rounds are too few for one\n        \
         --bench NAME  only this bench of the suite; repeatable\n        \
         --policy NAME (affinity, grid) only this scheduling policy; repeatable; one of {}\n        \
         --cachegrind  (affinity, grid, cosched) add the simulated last-level misses of each policy (cosched: of the aggregation sweep; needs valgrind)\n        \
         --help        this text",
        names.join(", "),
        harness::REPS,
        harness::MAX_REPS,
        harness::MAX_REPS,
        elite_rt::policy::Policy::ALL_NAMES.join(", ")
    )
}

/// The suite command line, as clap parses it (its errors say what was wrong and what is
/// allowed: the suites, the policies, the flags).
fn command() -> clap::Command {
    use clap::builder::{NonEmptyStringValueParser, PossibleValuesParser};
    use clap::{Arg, ArgAction};
    let suites: Vec<&'static str> = suites::SUITES.iter().map(|s| s.name).collect();
    clap::Command::new("elite-bench")
        .about("elite and its peers, measured in the same run")
        .no_binary_name(true)
        .disable_help_subcommand(true)
        .args_override_self(true)
        .arg(
            Arg::new("suite")
                .value_name("SUITE")
                .required(true)
                .value_parser(PossibleValuesParser::new(suites)),
        )
        .arg(
            Arg::new("json")
                .long("json")
                .value_name("FILE|-")
                .value_parser(NonEmptyStringValueParser::new())
                .help("write the JSON document to FILE (`-`: stdout)"),
        )
        .arg(
            Arg::new("quick")
                .long("quick")
                .action(ArgAction::SetTrue)
                .help("shrunken sizes, the whole suite in well under a minute"),
        )
        .arg(
            Arg::new("reps")
                .long("reps")
                .value_name("N")
                .value_parser(number_in("a count of measured rounds", 1, harness::MAX_REPS))
                .help("measured rounds per bench after the warm-up round"),
        )
        .arg(
            Arg::new("max-reps")
                .long("max-reps")
                .value_name("M")
                .value_parser(number_in("a count of measured rounds", 2, harness::MAX_REPS))
                .help("more rounds, up to M in all, while a target is undecided at 95%"),
        )
        .arg(
            Arg::new("bench")
                .long("bench")
                .value_name("NAME")
                .action(ArgAction::Append)
                .value_parser(NonEmptyStringValueParser::new())
                .help("only this bench of the suite; repeatable"),
        )
        .arg(
            Arg::new("policy")
                .long("policy")
                .value_name("NAME")
                .action(ArgAction::Append)
                .value_parser(|name: &str| {
                    name.parse::<elite_rt::policy::Policy>().map_err(|e| e.to_string())
                })
                .help("(affinity, grid) only this scheduling policy; repeatable"),
        )
        .arg(
            Arg::new("cachegrind")
                .long("cachegrind")
                .action(ArgAction::SetTrue)
                .help("(affinity, grid, cosched) add the simulated last-level misses of each policy (cosched: of the aggregation sweep; needs valgrind)"),
        )
}

/// Parses the command line; `Ok(None)` means help was asked for.
fn parse_args(args: &[String]) -> Result<Option<Options>, String> {
    refuse_single_dash(
        args,
        "--json FILE, --quick, --reps N, --max-reps M, --bench NAME, --policy NAME, --cachegrind, --help",
        false,
    )?;
    let matches = match command().try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => return Ok(None),
        Err(e) => return Err(clap_message(&e)),
    };
    let name = matches.get_one::<String>("suite").expect("a required argument");
    let suite = suites::SUITES.iter().find(|s| s.name == name.as_str()).expect("one of the possible values");
    let json = matches.get_one::<String>("json").cloned();
    let quick = matches.get_flag("quick");
    let cachegrind = matches.get_flag("cachegrind");
    let reps = matches.get_one::<usize>("reps").copied().unwrap_or(harness::REPS);
    let max_reps = matches.get_one::<usize>("max-reps").copied();
    if let Some(max_reps) = max_reps {
        if max_reps <= reps {
            return Err(format!("--max-reps {max_reps} must be more than --reps ({reps})"));
        }
    }
    let benches: Vec<String> = matches.get_many::<String>("bench").into_iter().flatten().cloned().collect();
    let policies: Vec<elite_rt::policy::Policy> =
        matches.get_many::<elite_rt::policy::Policy>("policy").into_iter().flatten().cloned().collect();
    if !policies.is_empty() && !["affinity", "grid"].contains(&suite.name) {
        return Err("--policy belongs to suites `affinity` and `grid`".into());
    }
    if cachegrind && !["affinity", "grid", "cosched"].contains(&suite.name) {
        return Err("--cachegrind belongs to suites `affinity`, `grid` and `cosched`".into());
    }
    Ok(Some(Options { suite, json, quick, policies, cachegrind, benches, reps, max_reps }))
}

/// A clap error as one message: what was wrong and what is allowed, without clap's usage lines
/// (the caller prints the usage).
pub(crate) fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let mut message = String::new();
    for line in text.lines().take_while(|line| !line.starts_with("Usage:")).map(str::trim) {
        if line.is_empty() || line.starts_with("For more information") {
            continue;
        }
        if !message.is_empty() {
            // A line ending in a colon introduces the next one (clap's list of missing arguments).
            message.push_str(if message.ends_with(':') { " " } else { "; " });
        }
        message.push_str(line);
    }
    message
}

/// Refuses a single-dash word (other than `-` and `-h`) whole, listing `flags`: clap would read
/// `-procs=4` as the short flags `-p -r ...` and name only `-p`, and every flag here is long.
/// With `negatives`, a negative integer is let through, for a command built with
/// `allow_negative_numbers` to take as a value and its parser to refuse (`got `-1``).
pub(crate) fn refuse_single_dash(args: &[String], flags: &str, negatives: bool) -> Result<(), String> {
    let negative = |a: &str| negatives && a.len() > 1 && a[1..].bytes().all(|b| b.is_ascii_digit());
    match args
        .iter()
        .find(|a| a.starts_with('-') && !a.starts_with("--") && *a != "-" && *a != "-h" && !negative(a))
    {
        Some(arg) => Err(format!("unknown flag `{arg}`; the flags are {flags}")),
        None => Ok(()),
    }
}

/// A probe's `--processors N` option: `1..=elite_rt::MAX_PROCESSORS`, default 1 (the probe's).
pub(crate) fn processors_arg() -> clap::Arg {
    clap::Arg::new("processors")
        .long("processors")
        .value_name("N")
        .value_parser(number_in("a count", 1, elite_rt::MAX_PROCESSORS))
        .help("the runtime's processors (default 1)")
}

/// A clap value parser of a number in `min..=max`; its error says `expected <what> in
/// min..=max, got `value``.
pub(crate) fn number_in<T>(
    what: &'static str,
    min: T,
    max: T,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy + Send + Sync + 'static,
{
    move |value: &str| match value.parse::<T>() {
        Ok(n) if min <= n && n <= max => Ok(n),
        _ => Err(format!("expected {what} in {min}..={max}, got `{value}`")),
    }
}

/// Runs the suite, prints the report, writes the JSON document; returns the exit status.
fn run(options: &Options) -> ExitCode {
    // With `--json -` stdout carries the document alone, so the human report goes to stderr.
    let json_to_stdout = options.json.as_deref() == Some("-");
    let mut report: Box<dyn Write> =
        if json_to_stdout { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout()) };
    let machine = machine::Machine::detect();
    let mut context = suites::Context::new(options.quick, machine.cpus);
    context.policies = options.policies.clone();
    context.cachegrind = options.cachegrind;
    // Report write errors (a closed pipe) are not worth failing a run for.
    let _ = writeln!(
        report,
        "elite-bench {}{}: {}",
        options.suite.name,
        if options.quick { " --quick" } else { "" },
        machine.describe()
    );
    let mut benches = (options.suite.benches)(&mut context);
    if !options.benches.is_empty() {
        let names: Vec<&str> = benches.iter().map(|b| b.name).collect();
        if let Some(unknown) = options.benches.iter().find(|n| !names.contains(&n.as_str())) {
            eprintln!(
                "elite-bench: suite `{}` has no bench `{unknown}`; it has: {}",
                options.suite.name,
                names.join(", ")
            );
            return ExitCode::from(2);
        }
        benches.retain(|b| options.benches.iter().any(|n| n == b.name));
    }
    for note in &context.notes {
        let _ = writeln!(report, "{note}");
    }
    let _ = report.flush();

    let mut progress = harness::Progress::new(std::io::stderr().is_terminal());
    let results = harness::run_suite(benches, options.reps, options.max_reps, &mut progress);
    let _ = writeln!(report);
    let _ = harness::print_report(&mut report, &results);
    let _ = report.flush();

    let mut status = if results.all_ok() {
        ExitCode::SUCCESS
    } else {
        let _ = writeln!(report, "\nFAILED: some answers were wrong or runs failed");
        ExitCode::FAILURE
    };
    if let Some(path) = &options.json {
        let machine = machine.with_line_costs();
        let document = harness::json_document(options.suite.name, &machine, &results);
        if let Err(e) = write_json(path, &document) {
            eprintln!("elite-bench: cannot write the JSON document to `{path}`: {e}");
            status = ExitCode::FAILURE;
        }
    }
    status
}

/// Writes `document` to `path`, or to stdout when `path` is `-`.
fn write_json(path: &str, document: &serde_json::Value) -> std::io::Result<()> {
    let mut text = serde_json::to_string_pretty(document).map_err(std::io::Error::other)?;
    text.push('\n');
    if path == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()
    } else {
        std::fs::write(path, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn policies_and_benches_are_parsed() {
        let options =
            parse_args(&args(&["affinity", "--policy", "virtual-time", "--bench", "no_locality", "--quick"]))
                .expect("valid")
                .expect("not help");
        assert_eq!(options.suite.name, "affinity");
        assert_eq!(options.policies.iter().map(|p| p.name()).collect::<Vec<_>>(), ["virtual-time"]);
        assert_eq!(options.benches, ["no_locality"]);
        assert!(options.quick && !options.cachegrind);
        assert_eq!(options.reps, harness::REPS);
    }

    #[test]
    fn reps_is_a_count_in_range() {
        let o = parse_args(&args(&["sync", "--reps", "9"])).unwrap().unwrap();
        assert_eq!(o.reps, 9);
        for bad in ["0", "51", "five"] {
            let e = parse_args(&args(&["sync", "--reps", bad])).err().expect("an error");
            assert!(e.contains("1..=50") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn max_reps_is_more_than_reps() {
        let o = parse_args(&args(&["sync", "--reps", "9", "--max-reps", "25"])).unwrap().unwrap();
        assert_eq!((o.reps, o.max_reps), (9, Some(25)));
        let o = parse_args(&args(&["sync", "--max-reps", "12"])).unwrap().unwrap();
        assert_eq!((o.reps, o.max_reps), (harness::REPS, Some(12)));
        assert_eq!(parse_args(&args(&["sync"])).unwrap().unwrap().max_reps, None);
        let e = parse_args(&args(&["sync", "--reps", "9", "--max-reps", "9"])).err().expect("an error");
        assert!(e.contains("--max-reps 9 must be more than --reps (9)"), "{e}");
        let e = parse_args(&args(&["sync", "--max-reps", "51"])).err().expect("an error");
        assert!(e.contains("2..=50") && e.contains("51"), "{e}");
    }

    #[test]
    fn errors_say_what_was_wrong_and_what_is_allowed() {
        let err = |words: &[&str]| parse_args(&args(words)).err().expect("an error");
        let e = err(&["frob"]);
        assert!(e.contains("'frob'") && e.contains("micro") && e.contains("blocking"), "{e}");
        let e = err(&[]);
        assert!(e.contains("<SUITE>"), "{e}");
        let e = err(&["micro", "--bench"]);
        assert!(e.contains("'--bench <NAME>'"), "{e}");
        let e = err(&["micro", "--bench", "--quick"]);
        assert!(e.contains("'--bench <NAME>'"), "{e}");
        let e = err(&["micro", "--json="]);
        assert!(e.contains("--json"), "{e}");
        let e = err(&["micro", "--frob"]);
        assert!(e.contains("'--frob'"), "{e}");
        let e = err(&["micro", "sync"]);
        assert!(e.contains("'sync'"), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
        let o = parse_args(&args(&["micro", "--quick", "--quick", "--json", "-"])).unwrap().unwrap();
        assert!(o.quick);
        assert_eq!(o.json.as_deref(), Some("-"));
        assert!(parse_args(&args(&["--help"])).unwrap().is_none());
        assert!(parse_args(&args(&["micro", "-h"])).unwrap().is_none());
    }

    #[test]
    fn an_unknown_policy_lists_the_valid_ones() {
        let err = parse_args(&args(&["affinity", "--policy", "fifo"])).err().expect("an error");
        assert!(err.contains("unknown policy `fifo`"), "{err}");
        for name in elite_rt::policy::Policy::NAMES {
            assert!(err.contains(name), "{err}");
        }
        let err = parse_args(&args(&["micro", "--policy", "virtual-time"])).err().expect("an error");
        assert!(err.contains("suites `affinity` and `grid`"), "{err}");
        assert!(parse_args(&args(&["affinity", "--policy"])).is_err());
    }
}
