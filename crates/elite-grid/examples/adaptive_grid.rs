//! # The adaptive-grid solver: active threads on a locally refined mesh
//!
//! ELiTE's flagship workload (sections 2.3.5 and 3.2, figure 3.2.2): a full-adaptive iterative
//! solver in which every piece of an irregular grid is a user-level thread that relaxes its
//! unknowns as soon as its neighbours' values are there, tells its neighbours when it is done,
//! and sleeps in between. This program runs it under every scheduling policy of the runtime, with
//! and without prefetch, at one and at all processors, beside the sequential loop and a rayon
//! peer, checks every answer, and prints each one's time to solution, then its smoothing rate and
//! its work.
//!
//! ```sh
//! cargo run --release -p elite-grid --example adaptive_grid         # everything, defaults
//! cargo run --release -p elite-grid --example adaptive_grid -- --policy no-affinity --processors 2 --size 11 --stats
//! cargo run --release -p elite-grid --example adaptive_grid -- --reps 9 --patch 1024 --json grid.json
//! ```
//!
//! The solver itself lives in the `elite-grid` crate (`crates/elite-grid`), so that the
//! `elite-bench grid` suite runs the very same code (`elite_grid::experiment::measure`); this
//! file is its command line: flags, progress bar, report and JSON.
//!
//! ## The problem
//!
//! `-ε² Δu + u = f` on the unit square with `u = 0` on the boundary, where `ε = 2 · 2^-size`.
//! The solution `u*` has an interior layer of width `ε` across a circle (centre `(0.52, 0.47)`,
//! radius `0.3`): `u* = 16 x(1-x) y(1-y) · (1 + tanh((0.3 - r) / ε)) / 2`. Resolving such a layer
//! needs cells of about `ε / 2` near the circle but nowhere else, which is what local refinement
//! is for. `f` is manufactured: the right-hand side is `b = A u*`, so the discrete solution is
//! `u*` at the cell centres, exactly, and the error of a run is measured against it.
//!
//! Why a reaction term and not the pure Poisson problem: relaxation alone (which is what active
//! threads do; the paper's solver adds multilevel corrections) needs a number of sweeps
//! proportional to the number of cells on a Poisson problem (measured: about 2.3 sweeps per cell
//! on these meshes, 124 000 sweeps at 55 000 cells: hours at the default size). With the reaction
//! term every row is strictly diagonally dominant by `h²/ε²`, relaxation converges in about 130
//! sweeps whatever the size, and `||A⁻¹||_inf <= 4`, which turns the residual check below into an
//! error bound.
//!
//! ## The discretisation
//!
//! Cell-centred finite volumes on a quadtree. The mesh starts as a uniform 8 × 8 grid; a cell is
//! split while its centre lies within `ε` plus one of its own sides of the circle, down to level
//! `size` (cells of side `2^-size = ε/2`); then it is *2:1 balanced*: cells that share a face
//! differ by at most one level, so a cell has one or two neighbours through each face, 4 to 8 in
//! all. The flux through a face is the two-point formula `a_ij (u_i - u_j)` with
//! `a_ij = |face| / |c_i - c_j|` (the face is the smaller cell's side, `c` the cell centres,
//! rounded to `f32` so the solver can store a coupling in half a word); a boundary face of a cell
//! of side `h` has `a = h / (h/2) = 2` to the boundary value 0; the reaction adds `h²/ε²` to the
//! diagonal. `A` is symmetric, with positive diagonal and non-positive off-diagonals, strictly
//! diagonally dominant: an M-matrix, for which Gauss-Seidel converges in any order of the unknowns.
//!
//! | `--size` | cells | ULTs with `--patch 8` | ULTs, one per cell |
//! | --- | --- | --- | --- |
//! | 9 | 10 606 | 1 326 | 10 606 |
//! | 10 | 21 292 | 2 662 | 21 292 |
//! | 11 | 42 781 | 5 348 | too many (see below) |
//! | 12 | 85 336 | 10 667 | too many |
//! | 13 (default) | 170 998 | 21 375 | too many |
//! | 14 | 341 590 | too many: `--patch 16` gives 21 350 | too many |
//!
//! By default the patch size is chosen at the start (see "The patch size"): on a 2-core machine
//! about 1 800 cells, about 96 ULTs at the default size.
//!
//! Every mesh has cells from level 3 (side 1/8) to level `size`, 4.2 couplings per cell on
//! average.
//!
//! ## Active threads
//!
//! The cells, in Morton order, are cut into *patches* of consecutive cells, and each patch is one
//! ULT. The patches are coloured so that no two neighbours (patches with a coupling between their
//! cells) share a colour, and the solve is **multicolour Gauss-Seidel**: in sweep `k`, a patch
//! relaxes its cells once, in order, `u_i = (b_i + Σ_j a_ij u_j) / a_ii`, reading its
//! lower-coloured neighbours' values of sweep `k` and its higher-coloured neighbours' of sweep
//! `k - 1`. There is no barrier between colours or sweeps: a ULT
//!
//! 1. sleeps on its semaphore until every value it reads is there: its lower-coloured neighbours
//!    finished sweep `k`, its higher-coloured ones sweep `k - 1` (each finished sweep *signals*
//!    the neighbours, a decrement of their count of missing signals; the signal that takes a
//!    count to zero releases that neighbour's semaphore);
//! 2. sweeps its patch, then signals its neighbours and adds its sweep's largest change to the
//!    convergence count;
//! 3. goes on with the next sweep, or returns if the solve is over.
//!
//! A neighbour can neither run with it nor run ahead of it (its next sweep needs this patch's),
//! so every value a sweep reads is exactly the one the iteration prescribes: **the answer and the
//! work are the same under every policy, at every processor count**, bit for bit (a test checks
//! it), and a policy can change only how fast that work is done. The solver this replaces relaxed
//! chaotically (a patch swept whenever a neighbour had moved by more than the tolerance, in
//! whatever order the scheduler picked), and its policies changed the work: 161 to 218
//! relaxations per cell where sequential Gauss-Seidel does 124, so a policy that raised the rate
//! could lengthen the solve.
//!
//! ## Termination
//!
//! Each patch adds its sweep's largest change to a count of its group of 64 patches, and the
//! group's last one to the solve's: when every patch finished sweep `k`, sweep `k` is complete.
//! The first complete sweep that moved no unknown by more than the tolerance `τ = 1e-9` is `S`.
//! To start sweep `k + 1`, a patch needs sweep `k - 3` complete to know whether `S` came already:
//! patches far apart in the mesh are a few sweeps apart in the dataflow, and with less slack
//! (sweep `k - 1`) most patches waited at that gate for most of the solve; with three sweeps of
//! slack a wait is rare (`--stats`: gate waits). That slack alone would run every patch to sweep
//! `S + 3`, about 2% more work than the sequential loop. Near the end the largest change shrinks
//! by a steady factor a sweep, so the complete sweeps predict `S`: once the prediction puts `S`
//! within a few sweeps, the solve *closes*, and a patch starts sweep `k + 1` only once sweep `k`
//! is complete and not `S`. The last sweeps then wait for each other as behind a barrier
//! (`--stats`: closing waits), and every patch stops at `S`, or at most three sweeps later when
//! the prediction comes late. Either way every patch runs the same sweeps, under every schedule.
//!
//! What that guarantees, and what the program checks: with a strictly diagonally dominant matrix
//! the Gauss-Seidel iteration (in any order) contracts in the max norm, so the sweeps after `S` moved no
//! unknown by more than `τ` either; in it every unknown read its neighbours at their final
//! values or one sweep before, so `||b - A u||_inf <= τ max_i Σ_j a_ij`, within the bound checked,
//! `2τ max_i Σ_j a_ij` (plus room for rounding), and `||u - u*||_inf <= ||A⁻¹||_inf` times that. A
//! run whose residual or error exceeds these bounds, which is what a lost signal or a sweep run
//! too early would cause, is reported as failed and the program exits with status 1. (The
//! protocol, with its orderings, is written down in `crates/elite-grid/src/active.rs`.)
//!
//! ## The patch size
//!
//! A sweep of a patch costs its cells' relaxations plus a fixed part: the semaphore hand-off, the
//! switch, the signals, mostly cache misses on the ULT's control block and stack and on the
//! neighbours' counters when many patches take turns. At the start the program measures both on
//! the machine (`elite_grid::active::measure_costs`: a sequential sweep per cell, and a token
//! passed around a ring of 1024 ULTs that each signal eight cold lines) and picks the patch that
//! keeps the fixed part under 3% of a sweep, in whole lines of 8 unknowns, but no larger than
//! leaves 48 patches per processor, so that every colour has work for every processor. The line
//! `patches:` says what was measured and chosen; `--patch` overrides it (up to 4096 cells). With
//! patches of 8 (the old default) the fixed part is several times the relaxations, and the
//! program runs far slower than the sequential loop.
//!
//! ## The peers
//!
//! * **sequential**: Gauss-Seidel in Morton order on one OS thread, a plain `f64` slice, no ULTs,
//!   until a sweep moves nothing by more than `τ` (`Problem::gauss_seidel`): the arithmetic
//!   without any scheduling.
//! * **rayon** (`elite_grid::rayon_peer`): the same patches, colours and sweeps, colour after
//!   colour with `par_iter` (a join between colours), on one pool per thread count, built once;
//!   it stops after sweep `S` (it can: each sweep ends with a join), as the ULTs do once the
//!   solve closed in time.
//!   Multicolour Gauss-Seidel rather than block Jacobi, which needs no colours but converges more
//!   slowly.
//!
//! ## Data layout, ULT count and stacks
//!
//! *For locality.* Morton order puts cells that are near in the square near in memory, so a patch
//! is a compact piece of the mesh and the neighbours a sweep reads lie mostly in the same or the
//! adjacent patches. The unknowns are an array of 64-byte lines of 8 values. Everything else a
//! patch's ULT reads (its neighbour patches, and per cell `b_i`, `1/a_ii` and one word per
//! coupling with `j` and `a_ij`) is one contiguous block, the blocks in patch order, about 60 bytes
//! per cell. One block per ULT is what ELiTE's application interface declares as a thread's data,
//! for the runtime to prefetch before it runs the thread. Each patch's signal count, semaphore and
//! progress counter sit on a cache line of their own.
//!
//! *ULT count.* Every ULT is alive for the whole solve, each with a guarded stack, and each
//! guarded stack costs two kernel mappings: `vm.max_map_count` (65 530 by default) allows about
//! 31 700 of them after what the process needs otherwise. The chosen patch is made larger if
//! needed to fit, and a `--size`/`--patch` pair that would not fit is refused before the mesh is
//! built, with a message saying so. (`--patch 1`, ELiTE's one thread per grid point, fits up to
//! `--size 10`.)
//!
//! *Stack size.* 16 KiB (32 KiB in debug builds): a patch's ULT keeps nothing per cell on its
//! stack, only its frames and the runtime's switch frames, well under a page. Only the pages a
//! ULT touches are backed by memory.
//!
//! ## Policies and prefetch
//!
//! For each processor count, the program tries every policy of `elite_grid::experiment::POLICIES`
//! (`no-affinity`, `virtual-time`, `minimum-misses`, `reload-transient`, `gravity`), each without
//! and with prefetch. A policy the runtime does not have yet, or prefetch while the runtime cannot
//! prefetch, is listed as "not available yet" and skipped; adding one to the runtime makes it run
//! here with a one-line change in `elite_grid::experiment`. Each solve time is compared with the
//! sequential reference's and with `no-affinity`'s without prefetch at the same processor count.
//!
//! ## What the policies can change
//!
//! The work is fixed, so a policy changes only the order in which ready patches run, and with it
//! what is still cached and which processor runs what. With patches of a thousand cells or more,
//! a patch's block (tens of KiB) is streamed through the cache in every order, and the policies
//! differ little at one processor. At two processors the policies that send a woken ULT back to
//! the processor it last ran on (`virtual-time`, and the counting policies after it) make many
//! wake-ups remote (`--stats`: remote wake-ups per 1000 sweeps), which the dataflow pays for in
//! latency. `elite-bench grid` runs the same solves under the bench harness (interleaved
//! repetitions, medians, answers checked) and `docs/benchmarks.md` has its tables, each with its
//! host. The repeatable count of what each order does to the cache is `valgrind --tool=cachegrind
//! --cache-sim=yes --LL=2097152,16,64 target/release/elite-bench grid-probe POLICY --size 12`
//! (one processor, patches of 256 unless `--patch` says otherwise).
//!
//! ## Output
//!
//! A table, one row per system and processor count, repeated `--reps` times (default 5),
//! interleaved (each repetition runs the sequential reference and every row once, in the table's
//! order and in reverse in turn): the median
//! solve time (the clock starts when every ULT has its stack and sleeps, after spawning, and stops
//! when the last ULT is done; min and max in brackets), the process's CPU time over the solve (at
//! one processor, what the solve took without the time other programs had the CPU), the speed-up
//! over the sequential reference (`vs seq`) and over `no-affinity` at the same processor count
//! (`vs no-a`), the smoothing rate (relaxations of one unknown per second), the relaxations per
//! cell (the same for every elite row), the fraction of sweeps that had to wait for a neighbour,
//! and the check. `--stats` adds the runtime's counters per 1000 sweeps.
//!
//! A speed-up is paired by repetition: in each repetition, the other row's solve time over this
//! row's in the same repetition (above 1: faster), and the column shows the median of these
//! ratios with their min and max, `1.02x (0.95-1.07)`. Not the ratio of the two
//! medians: a shared machine can run in phases (the same solve half as long again in one minute as
//! in the next), and the two runs of one repetition, seconds apart, share a phase far more often
//! than two medians do, so a ratio of medians can read a policy at parity as 0.7x because its
//! middle repetitions fell in a slow phase. The range says how far the median can be trusted: one
//! that straddles 1 by a wide margin says more repetitions (`--reps`) are needed before the row
//! ranks the policies.
//!
//! With `--json FILE` (`-`: stdout) the benches' JSON document (docs/bench-json.md): suite `grid`, bench
//! `adaptive_grid`, systems `sequential` (processors 1), `rayon` and `elite/<policy>` or
//! `elite/<policy>+prefetch`, each with the metrics `solve_s` (seconds), `ops_per_sec` (smoothing
//! operations per second) and `relaxations_per_cell`; params `processors`, `size`, `cells`,
//! `ults` (0 for the peers), `patch` and `prefetch`; each row's `rounds` has its values in the
//! order of the repetitions. Plus, for every elite row with a `no-affinity` row to compare with, a
//! row of metric `ratio_to_no_affinity`: per repetition, its rate over no-affinity's (without
//! prefetch, at the same processor count) in the same repetition, in `rounds`, and their median,
//! min and max (with the work fixed, also the ratio of their solve times' inverses).
//!
//! Exit status: 0 when every run that could run was right, 1 when one failed its check or could
//! not run, 2 for a command-line mistake.

use elite_grid::active::{Monitor, SolveOptions};
use elite_grid::experiment::{
    check_ults, choose_patch, max_guarded_ults, measure, measure_rayon, measure_sequential, runtime_builder,
    Config, Measurement, Model, PatchChoice, RunError, BASELINE, POLICIES, PREFETCH_AVAILABLE, RAYON,
    SEQUENTIAL, STACK_SIZE,
};
use elite_grid::layout::MAX_PATCH;
use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// The finest level at the default size.
const DEFAULT_SIZE: u8 = 13;
/// Repetitions of every run by default.
const DEFAULT_REPS: usize = 5;
/// Most repetitions accepted.
const MAX_REPS: usize = 100;

const USAGE: &str =
    "usage: adaptive_grid [--policy NAME[,NAME..]]... [--size LEVEL] [--processors N[,N..]]... \
[--patch CELLS] [--prefetch on|off|both] [--reps N] [--stats] [--json FILE|-] [--help]";

/// What the command line asked for.
#[derive(Clone, Debug, PartialEq)]
struct Options {
    /// Policies to try, in the order of `POLICIES`.
    policies: Vec<String>,
    /// The finest refinement level.
    size: u8,
    /// Processor counts, ascending.
    processors: Vec<usize>,
    /// Cells per ULT (`None`: chosen from measured costs).
    patch: Option<usize>,
    /// Prefetch settings to try: off, on, or both.
    prefetch: Vec<bool>,
    /// Repetitions of every run (interleaved).
    reps: usize,
    /// Print the runtime's counters per run.
    stats: bool,
    /// Where to write the JSON document.
    json: Option<String>,
}

/// The help text.
fn help(cpus: usize) -> String {
    format!(
        "{USAGE}\n\n\
         Solves -eps^2 Lap u + u = f on a quadtree refined towards a circle with one ULT per patch of\n\
         cells (ELiTE's active threads), under each scheduling policy, beside a sequential loop and a\n\
         rayon peer, checks every answer and prints each one's time to solution, smoothing rate and\n\
         relaxations per cell.\n\n\
         flags:\n  \
         --policy NAME     policies to try, repeatable or comma-separated (default: all):\n                    \
         {policies}\n  \
         --size LEVEL      finest refinement level, {min}..={max} (default {DEFAULT_SIZE}: 171 000 cells)\n  \
         --processors N    processor counts, repeatable or comma-separated, 1..={max_p} (default: 1 and {cpus})\n  \
         --patch CELLS     cells per ULT, 1..={MAX_PATCH} (default: chosen from costs measured at start)\n  \
         --prefetch WHEN   on, off or both (default both)\n  \
         --reps N          repetitions of every run, interleaved, 1..={MAX_REPS} (default {DEFAULT_REPS})\n  \
         --stats           also print the runtime's counters per sweep (switches, wake-ups, steals, parks)\n  \
         --json FILE       write the benches' JSON document (docs/bench-json.md) to FILE (`-`: stdout)\n  \
         --help            this text",
        policies = POLICIES.join(", "),
        min = Model::MIN_LEVEL,
        max = Model::MAX_LEVEL,
        max_p = elite_rt::MAX_PROCESSORS,
    )
}

/// The command line, as clap parses it: every value is checked by its parser, so an error names
/// the flag, the value and what is allowed.
fn command() -> clap::Command {
    use clap::builder::{NonEmptyStringValueParser, PossibleValuesParser};
    use clap::{Arg, ArgAction};
    let range = |min: usize, max: usize| move |value: &str| number(value, min, max);
    clap::Command::new("adaptive_grid")
        .no_binary_name(true)
        .args_override_self(true)
        .arg(
            Arg::new("policy")
                .long("policy")
                .value_name("NAME[,NAME..]")
                .action(ArgAction::Append)
                .value_parser(|value: &str| {
                    let names = items(value)?;
                    match names.iter().find(|name| !POLICIES.contains(name)) {
                        Some(name) => {
                            Err(format!("unknown policy `{name}`, expected one of {}", POLICIES.join(", ")))
                        }
                        None => Ok(names.into_iter().map(str::to_string).collect::<Vec<String>>()),
                    }
                }),
        )
        .arg(
            Arg::new("size")
                .long("size")
                .value_name("LEVEL")
                .value_parser(range(Model::MIN_LEVEL as usize, Model::MAX_LEVEL as usize)),
        )
        .arg(
            Arg::new("processors")
                .long("processors")
                .value_name("N[,N..]")
                .action(ArgAction::Append)
                .value_parser(|value: &str| {
                    items(value)?
                        .into_iter()
                        .map(|n| number(n, 1, elite_rt::MAX_PROCESSORS))
                        .collect::<Result<Vec<usize>, String>>()
                }),
        )
        .arg(Arg::new("patch").long("patch").value_name("CELLS").value_parser(range(1, MAX_PATCH)))
        .arg(
            Arg::new("prefetch")
                .long("prefetch")
                .value_name("WHEN")
                .value_parser(PossibleValuesParser::new(["on", "off", "both"])),
        )
        .arg(Arg::new("reps").long("reps").value_name("N").value_parser(range(1, MAX_REPS)))
        .arg(Arg::new("stats").long("stats").action(ArgAction::SetTrue))
        .arg(
            Arg::new("json").long("json").value_name("FILE|-").value_parser(NonEmptyStringValueParser::new()),
        )
}

/// Parses the command line; `Ok(None)` means help was asked for.
fn parse_args(args: &[String], cpus: usize) -> Result<Option<Options>, String> {
    // clap would read `-p4` as the short flag `-p` and name only that: every flag here is long
    // (or `-h`), so a single-dash word other than `-` (stdout, for --json) is refused whole.
    if let Some(arg) =
        args.iter().find(|a| a.starts_with('-') && !a.starts_with("--") && *a != "-" && *a != "-h")
    {
        return Err(format!(
            "unknown flag `{arg}`, expected one of --policy, --size, --processors, --patch, --prefetch, --reps, --json, --stats or --help"
        ));
    }
    let matches = match command().try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => return Ok(None),
        Err(e) => return Err(clap_message(&e)),
    };
    // Repeated --policy names run once, in the order of POLICIES.
    let mut policies: Vec<String> = Vec::new();
    for name in matches.get_many::<Vec<String>>("policy").into_iter().flatten().flatten() {
        if !policies.contains(name) {
            policies.push(name.clone());
        }
    }
    if policies.is_empty() {
        policies = POLICIES.iter().map(|p| p.to_string()).collect();
    } else {
        policies.sort_by_key(|p| POLICIES.iter().position(|q| q == p));
    }
    let mut processors: Vec<usize> =
        matches.get_many::<Vec<usize>>("processors").into_iter().flatten().flatten().copied().collect();
    if processors.is_empty() {
        processors = vec![1, cpus.max(1)];
    }
    processors.sort_unstable();
    processors.dedup();
    let size = matches.get_one::<usize>("size").map_or(DEFAULT_SIZE, |&n| n as u8);
    let prefetch = match matches.get_one::<String>("prefetch").map(String::as_str) {
        Some("on") => vec![true],
        Some("off") => vec![false],
        _ => vec![false, true],
    };
    Ok(Some(Options {
        policies,
        size,
        processors,
        patch: matches.get_one::<usize>("patch").copied(),
        prefetch,
        reps: matches.get_one::<usize>("reps").copied().unwrap_or(DEFAULT_REPS),
        stats: matches.get_flag("stats"),
        json: matches.get_one::<String>("json").cloned(),
    }))
}

/// A clap error as one line: what was wrong and what is allowed, without clap's usage lines
/// (`main` prints [`USAGE`] after it).
fn clap_message(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let rendered = rendered.strip_prefix("error: ").unwrap_or(&rendered);
    let mut parts: Vec<&str> = Vec::new();
    for line in rendered.lines().map(str::trim).take_while(|line| !line.starts_with("Usage:")) {
        if !line.is_empty() && !line.starts_with("For more information") {
            parts.push(line);
        }
    }
    parts.join("; ")
}

/// The items of a comma-separated list, trimmed; an empty one is an error.
fn items(value: &str) -> Result<Vec<&str>, String> {
    let items: Vec<&str> = value.split(',').map(str::trim).collect();
    if items.contains(&"") {
        return Err(format!("empty item in `{value}` (items are separated by commas)"));
    }
    Ok(items)
}

/// Parses `value` as a number in `min..=max`.
fn number(value: &str, min: usize, max: usize) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a number in {min}..={max}, got `{value}`")),
    }
}

/// The machine, as the JSON document records it.
fn machine() -> Value {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == "model name")
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    // A hardware PMU registers a `cpu` (or, on hybrid parts, `cpu_core`) event source.
    let pmu = ["cpu", "cpu_core"]
        .iter()
        .any(|d| std::path::Path::new("/sys/bus/event_source/devices").join(d).exists());
    json!({ "cpus": cpus(), "cpu_model": cpu_model, "pmu": pmu, "kernel": kernel })
}

/// CPUs this process may run on.
fn cpus() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// The progress bar on stderr (`indicatif`): configurations done, and the running solve's
/// relaxations, updated every 200 ms by a thread of its own.
struct Progress {
    state: Arc<Mutex<ProgressState>>,
    stop: Arc<AtomicBool>,
    drawer: Option<thread::JoinHandle<()>>,
}

#[derive(Default)]
struct ProgressState {
    done: usize,
    running: Option<(String, Monitor, Instant)>,
}

impl Progress {
    /// A bar over `total` runs, drawn every 200 ms when `enabled`.
    fn new(enabled: bool, total: usize) -> Progress {
        let state = Arc::new(Mutex::new(ProgressState::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let drawer = enabled.then(|| {
            let (state, stop) = (state.clone(), stop.clone());
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total as u64),
                indicatif::ProgressDrawTarget::stderr(),
            );
            let style = indicatif::ProgressStyle::with_template("[{bar:24}] {pos}/{len} {msg}")
                .expect("the template is valid")
                .progress_chars("#>.");
            bar.set_style(style);
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let (done, message) = status(&state.lock().unwrap_or_else(PoisonError::into_inner));
                    bar.set_position(done as u64);
                    bar.set_message(message);
                    thread::sleep(Duration::from_millis(200));
                }
                bar.finish_and_clear();
            })
        });
        Progress { state, stop, drawer }
    }

    fn start(&self, label: String, monitor: Monitor) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).running =
            Some((label, monitor, Instant::now()));
    }

    fn finish_one(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.running = None;
        s.done += 1;
    }

    fn end(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(d) = self.drawer.take() {
            let _ = d.join();
        }
    }
}

/// Runs done, and the running solve's line.
fn status(s: &ProgressState) -> (usize, String) {
    let line = match &s.running {
        Some((label, monitor, started)) => format!(
            "{label}: {:.1} M relaxations, {} sweeps complete, {} ULTs left, {:.1} s",
            monitor.relaxations() as f64 / 1e6,
            monitor.complete_sweeps(),
            monitor.active(),
            started.elapsed().as_secs_f64()
        ),
        None => String::new(),
    };
    (s.done, line)
}

/// The runs of one system at one processor count, over the repetitions.
struct Row {
    config: Config,
    runs: Vec<Result<Measurement, RunError>>,
}

/// How long a run's solve took, in seconds.
fn solve_seconds(m: &Measurement) -> f64 {
    m.elapsed.as_secs_f64()
}

/// How often a run relaxed each cell.
fn relaxations_per_cell(m: &Measurement) -> f64 {
    m.relaxations as f64 / m.cells as f64
}

/// Median, min and max of `values` (none when empty).
fn spread(mut values: Vec<f64>) -> Option<(f64, f64, f64)> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
    Some((median, values[0], values[n - 1]))
}

impl Row {
    fn new(config: Config) -> Row {
        Row { config, runs: Vec::new() }
    }

    fn measurements(&self) -> impl Iterator<Item = &Measurement> {
        self.runs.iter().filter_map(|r| r.as_ref().ok())
    }

    /// Every run ran and was right.
    fn ok(&self) -> bool {
        self.runs.iter().all(|r| r.as_ref().is_ok_and(Measurement::ok))
    }

    /// `f` of every run, in the order of the repetitions, if every run was right.
    fn per_run(&self, f: impl Fn(&Measurement) -> f64) -> Option<Vec<f64>> {
        self.ok().then(|| self.measurements().map(f).collect())
    }

    /// The median, min and max of `f` over the runs, if every run was right.
    fn stats(&self, f: impl Fn(&Measurement) -> f64) -> Option<(f64, f64, f64)> {
        spread(self.per_run(f)?)
    }

    /// The solve time in seconds: median, min, max.
    fn solve_s(&self) -> Option<(f64, f64, f64)> {
        self.stats(solve_seconds)
    }

    /// The process's CPU time over the solve, in seconds: median, min, max (none where the
    /// system does not say).
    fn cpu_s(&self) -> Option<(f64, f64, f64)> {
        if !self.measurements().all(|m| m.cpu.is_some()) {
            return None;
        }
        self.stats(|m| m.cpu.map_or(0.0, |c| c.as_secs_f64()))
    }

    /// The smoothing rate: median, min, max.
    fn rates(&self) -> Option<(f64, f64, f64)> {
        self.stats(Measurement::rate)
    }

    /// Relaxations per cell: median, min, max.
    fn per_cell(&self) -> Option<(f64, f64, f64)> {
        self.stats(relaxations_per_cell)
    }

    /// The first failure, as text.
    fn failure(&self) -> Option<String> {
        self.runs.iter().find_map(|r| match r {
            Err(e) => Some(e.to_string()),
            Ok(m) => m.failure(),
        })
    }

    fn system(&self) -> String {
        self.config.system()
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse_args(&args, cpus()) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{}", help(cpus()));
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("adaptive_grid: {message}\n{USAGE}\n(--help lists the flags and their ranges)");
            return ExitCode::from(2);
        }
    };
    run(&options)
}

fn run(options: &Options) -> ExitCode {
    let json_to_stdout = options.json.as_deref() == Some("-");
    let mut out: Box<dyn Write> =
        if json_to_stdout { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout()) };
    let started = Instant::now();
    let machine = machine();
    let model = Model { level: options.size };
    // Refused before the build when a lower bound of the cells already makes too many ULTs: the
    // largest meshes take minutes and gigabytes to build.
    if let Err(e) = check_ults(&model, options.patch.unwrap_or(MAX_PATCH)) {
        let patch = options.patch.map_or("the largest patch".to_string(), |p| format!("--patch {p}"));
        eprintln!("adaptive_grid: --size {} with {patch}: {e}", options.size);
        return ExitCode::from(2);
    }
    let problem = match model.problem() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("adaptive_grid: --size {}: {e}", options.size);
            return ExitCode::from(2);
        }
    };
    let most_processors = options.processors.iter().copied().max().unwrap_or(1);
    let patch = match options.patch {
        Some(size) => PatchChoice { size, costs: None },
        None => match choose_patch(&problem, most_processors) {
            Ok(choice) => choice,
            Err(e) => {
                eprintln!("adaptive_grid: cannot measure the costs that choose the patch size: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let ults = problem.len().div_ceil(patch.size);
    if let Some(max) = max_guarded_ults() {
        if ults > max {
            eprintln!(
                "adaptive_grid: --size {} with --patch {} makes {ults} ULTs, but only {max} guarded stacks fit \
                 under vm.max_map_count; use a smaller --size or a larger --patch",
                options.size, patch.size
            );
            return ExitCode::from(2);
        }
    }
    let coarsest = problem.tree.leaves().iter().map(|c| c.level).min().unwrap_or(0);
    let solve = SolveOptions { patch_size: patch.size, ..SolveOptions::default() };
    let _ = writeln!(
        out,
        "adaptive_grid: {} cpus, {}, kernel {}, pmu {}",
        machine["cpus"],
        machine["cpu_model"].as_str().unwrap_or("unknown"),
        machine["kernel"].as_str().unwrap_or("unknown"),
        if machine["pmu"] == json!(true) { "yes" } else { "no" }
    );
    let chosen = match patch.costs {
        None => "given".to_string(),
        Some(c) => format!(
            "chosen: a cell {:.1} ns, a sweep's hand-off and signals {:.0} ns, kept under {:.0}% of a sweep",
            c.cell_ns,
            c.sweep_ns,
            elite_grid::active::OVERHEAD_SHARE * 100.0
        ),
    };
    let _ = writeln!(
        out,
        "mesh: size {} (eps = 2^-{}), {} cells, levels {coarsest}..{}, {:.2} couplings per cell; \
         tolerance {:e}\npatches: {ults} ULTs of {} cells ({chosen}), {} KiB stacks; {} interleaved repetitions",
        options.size,
        options.size - 1,
        problem.len(),
        problem.tree.finest_level(),
        problem.matrix.couplings() as f64 / problem.len() as f64,
        solve.tolerance,
        patch.size,
        STACK_SIZE / 1024,
        options.reps,
    );

    // Which configurations can run; what cannot gets one line.
    let mut notes = Vec::new();
    let mut configs = Vec::new();
    for policy in &options.policies {
        if let Err(e) = runtime_builder(policy) {
            notes.push(format!("elite/{policy}: {e}"));
        }
    }
    if options.prefetch.contains(&true) && !PREFETCH_AVAILABLE {
        notes.push(
            "elite/*+prefetch: not available yet: elite-rt cannot prefetch a ULT's declared data".into(),
        );
    }
    // One rayon pool per thread count, built once: its threads start with it.
    let mut pools = Vec::new();
    for &processors in &options.processors {
        match rayon::ThreadPoolBuilder::new().num_threads(processors).build() {
            Ok(pool) => {
                pools.push(pool);
                configs.push(Config { policy: RAYON.into(), prefetch: false, processors });
            }
            Err(e) => notes.push(format!("rayon at {processors} threads: cannot build its pool: {e}")),
        }
        for policy in &options.policies {
            for &prefetch in &options.prefetch {
                if runtime_builder(policy).is_ok() && (PREFETCH_AVAILABLE || !prefetch) {
                    configs.push(Config { policy: policy.clone(), prefetch, processors });
                }
            }
        }
    }
    for note in &notes {
        let _ = writeln!(out, "{note}");
    }
    let _ = out.flush();

    let mut sequential = Row::new(Config { policy: SEQUENTIAL.into(), prefetch: false, processors: 1 });
    let mut rows: Vec<Row> = configs.into_iter().map(Row::new).collect();
    let progress = Progress::new(std::io::stderr().is_terminal(), options.reps * (rows.len() + 1));
    let run_sequential = |sequential: &mut Row| {
        sequential.runs.push(Ok(measure_sequential(&problem, solve.tolerance)));
        progress.finish_one();
    };
    for rep in 0..options.reps {
        // The first repetition runs the sequential reference and then the rows in order, the
        // next the rows in reverse and then the sequential reference, and so on: a machine whose
        // speed drifts within a repetition then favours no place in the order over two of them.
        let forward = rep % 2 == 0;
        if forward {
            run_sequential(&mut sequential);
        }
        let order: Vec<usize> =
            if forward { (0..rows.len()).collect() } else { (0..rows.len()).rev().collect() };
        for i in order {
            let row = &mut rows[i];
            let result = if row.config.policy == RAYON {
                let pool = pools.iter().find(|p| p.current_num_threads() == row.config.processors);
                measure_rayon(&problem, &solve, pool.expect("a pool per rayon row"))
            } else {
                let label = format!("{} on {} processor(s)", row.config.system(), row.config.processors);
                measure(&problem, &solve, &row.config, |monitor| progress.start(label, monitor))
            };
            progress.finish_one();
            row.runs.push(result);
        }
        if !forward {
            run_sequential(&mut sequential);
        }
    }
    progress.end();

    let _ = writeln!(out);
    let _ = print_table(&mut out, &sequential, &rows);
    if options.stats {
        let _ = print_stats(&mut out, &rows);
    }
    let _ = writeln!(out, "\ntotal time {:.1} s", started.elapsed().as_secs_f64());
    let all_ok = sequential.ok() && rows.iter().all(Row::ok);
    let mut status = if all_ok {
        ExitCode::SUCCESS
    } else {
        let _ = writeln!(out, "FAILED: some runs were wrong or could not run");
        ExitCode::FAILURE
    };
    let _ = out.flush();
    if let Some(path) = &options.json {
        let document = json_document(
            machine,
            &problem_params(options, problem.len(), ults, patch.size),
            &sequential,
            &rows,
        );
        if let Err(e) = write_json(path, &document) {
            eprintln!("adaptive_grid: cannot write the JSON document to `{path}`: {e}");
            status = ExitCode::FAILURE;
        }
    }
    status
}

/// Per repetition, `f` of `num`'s run over `f` of `den`'s run of the same repetition, in the
/// order of the repetitions; none unless both rows ran as many repetitions, every run right.
///
/// The repetitions interleave the rows, so the two runs of one repetition were measured within
/// seconds of each other, and on a host whose speed changes in phases (the same solve taking
/// half as long again in one minute as in the next) they share a phase far more often than two
/// rows' medians do: the median of these ratios is the estimate the table and the JSON report,
/// and their min and max say how far it can be trusted.
fn paired_ratios(num: &Row, den: &Row, f: impl Fn(&Measurement) -> f64) -> Option<Vec<f64>> {
    if num.runs.len() != den.runs.len() {
        return None;
    }
    let (num, den) = (num.per_run(&f)?, den.per_run(&f)?);
    let ratios: Vec<f64> = num.iter().zip(&den).map(|(a, b)| a / b).collect();
    ratios.iter().all(|r| r.is_finite()).then_some(ratios)
}

/// The row of `no-affinity` without prefetch at `processors`, the ratios' denominator.
fn baseline(rows: &[Row], processors: usize) -> Option<&Row> {
    rows.iter()
        .find(|r| r.config.policy == BASELINE && !r.config.prefetch && r.config.processors == processors)
}

/// The table: solve time first (what a user waits for), its speed-up over the sequential
/// reference and over no-affinity (medians of per-repetition ratios, see [`paired_ratios`]),
/// then the rate and the work.
fn print_table(out: &mut dyn Write, sequential: &Row, rows: &[Row]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<31} {:>5} {:>22} {:>7} {:>17} {:>17} {:>20} {:>10} {:>10}  check",
        "system",
        "procs",
        "solve ms (min-max)",
        "cpu ms",
        "vs seq (min-max)",
        "vs no-a (min-max)",
        "M ops/s (min-max)",
        "relax/cell",
        "waits/sweep"
    )?;
    for row in std::iter::once(sequential).chain(rows) {
        let range = |v: Option<(f64, f64, f64)>, scale: f64, digits: usize| match v {
            Some((median, min, max)) => {
                format!("{:.digits$} ({:.digits$}-{:.digits$})", median * scale, min * scale, max * scale)
            }
            None => "-".into(),
        };
        // The base's time over this row's, per repetition: above 1, this row is faster.
        let faster = |base: &Row| paired_ratios(base, row, solve_seconds).and_then(spread);
        let ratio = |v: Option<(f64, f64, f64)>| {
            v.map_or("-".into(), |(median, min, max)| format!("{median:.2}x ({min:.2}-{max:.2})"))
        };
        let vs_seq = ratio(faster(sequential));
        let vs_no_affinity = match baseline(rows, row.config.processors) {
            Some(base) if row.config.policy != SEQUENTIAL && row.config.policy != RAYON => {
                ratio(faster(base))
            }
            _ => "-".into(),
        };
        let ms: Vec<&Measurement> = row.measurements().collect();
        let waits = if row.config.policy == SEQUENTIAL || row.config.policy == RAYON || ms.is_empty() {
            "-".to_string()
        } else {
            format!(
                "{:.2}",
                ms.iter().map(|m| m.sleeps as f64 / m.sweeps.max(1) as f64).sum::<f64>() / ms.len() as f64
            )
        };
        let check = match row.failure() {
            None => "ok".to_string(),
            Some(why) => format!("FAILED: {why}"),
        };
        writeln!(
            out,
            "{:<31} {:>5} {:>22} {:>7} {:>17} {:>17} {:>20} {:>10} {:>10}  {check}",
            row.system(),
            row.config.processors,
            range(row.solve_s(), 1e3, 1),
            row.cpu_s().map_or("-".into(), |(median, _, _)| format!("{:.1}", median * 1e3)),
            vs_seq,
            vs_no_affinity,
            range(row.rates(), 1e-6, 1),
            row.per_cell().map_or("-".into(), |(median, _, _)| format!("{median:.1}")),
            waits,
        )?;
    }
    writeln!(
        out,
        "solve: median over the repetitions (min-max); cpu: the process's CPU time over the solve \
         (median; at 1 processor, solve minus cpu is time other programs took); vs seq, vs no-a: in \
         each repetition, the sequential reference's, no-affinity's solve time over this row's (above \
         1: faster), the median over the repetitions, with their min-max: how far it can be trusted"
    )
}

/// The runtime's counters per 1000 sweeps, averaged over the runs of each row.
fn print_stats(out: &mut dyn Write, rows: &[Row]) -> std::io::Result<()> {
    writeln!(
        out,
        "\n{:<31} {:>5} {:>10} {:>10} {:>9} {:>11} {:>14} {:>16} {:>8} {:>8}",
        "per 1000 sweeps:",
        "procs",
        "switches",
        "yields",
        "waits",
        "gate waits",
        "closing waits",
        "remote wake-ups",
        "steals",
        "parks"
    )?;
    for row in rows {
        let ms: Vec<&Measurement> = row.measurements().collect();
        let sweeps: u64 = ms.iter().map(|m| m.sweeps).sum();
        if sweeps == 0 || row.config.policy == RAYON {
            continue;
        }
        let per = |f: &dyn Fn(&Measurement) -> u64| {
            ms.iter().map(|m| f(m)).sum::<u64>() as f64 * 1000.0 / sweeps as f64
        };
        writeln!(
            out,
            "{:<31} {:>5} {:>10.0} {:>10.0} {:>9.0} {:>11.1} {:>14.1} {:>16.1} {:>8.2} {:>8.2}",
            row.system(),
            row.config.processors,
            per(&|m| m.stats.switches),
            per(&|m| m.stats.yields),
            per(&|m| m.sleeps),
            per(&|m| m.gate_waits),
            per(&|m| m.closing_waits),
            per(&|m| m.stats.wakeup_drained),
            per(&|m| m.stats.steals_node + m.stats.steals_remote),
            per(&|m| m.stats.parks),
        )?;
    }
    Ok(())
}

/// The parameters every row shares.
fn problem_params(options: &Options, cells: usize, ults: usize, patch: usize) -> Value {
    json!({ "size": options.size, "cells": cells, "ults": ults, "patch": patch })
}

/// The benches' JSON document, described in docs/bench-json.md (see the module docs).
fn json_document(machine: Value, shared: &Value, sequential: &Row, rows: &[Row]) -> Value {
    let mut results = Vec::new();
    let row_json = |row: &Row, metric: &str, rounds: Option<Vec<f64>>| {
        let values = rounds.clone().and_then(spread);
        let mut params = shared.clone();
        params["processors"] = json!(row.config.processors);
        params["prefetch"] = json!(row.config.prefetch);
        if row.config.policy == SEQUENTIAL {
            params["ults"] = json!(0);
        }
        let (median, min, max) = match values {
            Some((a, b, c)) => (json!(a), json!(b), json!(c)),
            None => (Value::Null, Value::Null, Value::Null),
        };
        let mut object = json!({
            "bench": "adaptive_grid",
            "system": row.system(),
            "metric": metric,
            "median": median,
            "min": min,
            "max": max,
            "runs": row.runs.len(),
            "rounds": rounds.unwrap_or_default(),
            "ok": values.is_some(),
            "params": params,
        });
        if let Some(why) = row.failure() {
            object["error"] = json!(why);
        }
        object
    };
    for row in std::iter::once(sequential).chain(rows) {
        results.push(row_json(row, "solve_s", row.per_run(solve_seconds)));
        results.push(row_json(row, "ops_per_sec", row.per_run(Measurement::rate)));
        results.push(row_json(row, "relaxations_per_cell", row.per_run(relaxations_per_cell)));
    }
    for row in rows.iter().filter(|r| r.config.policy != RAYON) {
        let ratios =
            baseline(rows, row.config.processors).and_then(|b| paired_ratios(row, b, Measurement::rate));
        if let Some(ratios) = ratios {
            let mut object = row_json(row, "ratio_to_no_affinity", Some(ratios));
            object["params"]["baseline"] = json!(format!("elite/{BASELINE}"));
            results.push(object);
        }
    }
    json!({ "suite": "grid", "machine": machine, "results": results })
}

/// Writes `document` to `path`, or to stdout when `path` is `-`.
fn write_json(path: &str, document: &Value) -> std::io::Result<()> {
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

    fn parse(args: &[&str]) -> Result<Option<Options>, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse_args(&args, 2)
    }

    #[test]
    fn defaults() {
        let o = parse(&[]).unwrap().unwrap();
        assert_eq!(o.policies, POLICIES.iter().map(|p| p.to_string()).collect::<Vec<_>>());
        assert_eq!((o.size, o.patch, o.reps), (DEFAULT_SIZE, None, DEFAULT_REPS));
        assert_eq!(o.processors, vec![1, 2]);
        assert_eq!(o.prefetch, vec![false, true]);
        assert_eq!(o.json, None);
        assert!(!o.stats);
        assert_eq!(parse_args(&[], 1).unwrap().unwrap().processors, vec![1]);
    }

    #[test]
    fn flags_repeat_and_split_on_commas() {
        let o = parse(&[
            "--policy",
            "virtual-time,no-affinity",
            "--policy=virtual-time",
            "--processors",
            "2",
            "--processors=1,2",
            "--size",
            "9",
            "--patch=4",
            "--prefetch",
            "off",
            "--reps",
            "3",
            "--json",
            "-",
            "--stats",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(o.policies, vec!["no-affinity", "virtual-time"]);
        assert_eq!(o.processors, vec![1, 2]);
        assert_eq!((o.size, o.patch, o.reps), (9, Some(4), 3));
        assert_eq!(o.prefetch, vec![false]);
        assert_eq!(o.json.as_deref(), Some("-"));
        assert!(o.stats);
        assert_eq!(parse(&["--help"]).unwrap(), None);
    }

    #[test]
    fn bad_flags_say_what_was_expected() {
        for (args, expect) in [
            (
                &["--policy", "lifo"][..],
                "'--policy <NAME[,NAME..]>': unknown policy `lifo`, expected one of no-affinity",
            ),
            (&["--size", "99"], "'--size <LEVEL>': expected a number in 5..=20, got `99`"),
            (&["--size"], "a value is required for '--size <LEVEL>'"),
            (&["--processors", "0"], "'--processors <N[,N..]>': expected a number in 1..=4096, got `0`"),
            (&["--processors", "1,x"], "got `x`"),
            (&["--patch", "4097"], "'--patch <CELLS>': expected a number in 1..=4096"),
            (
                &["--prefetch", "maybe"],
                "invalid value 'maybe' for '--prefetch <WHEN>'; [possible values: on, off, both]",
            ),
            (&["--reps", "0"], "'--reps <N>': expected a number in 1..=100"),
            (&["--json", "--size"], "a value is required for '--json <FILE|->'"),
            (&["--json="], "'--json <FILE|->'"),
            (&["--verbose"], "unexpected argument '--verbose'"),
            (&["12"], "unexpected argument '12'"),
            (&["--stats=yes"], "'--stats'"),
            // A single-dash word is refused whole, with the flags there are.
            (&["-p4"], "unknown flag `-p4`, expected one of --policy"),
            (&["--size", "-1"], "unknown flag `-1`"),
            // Found by `fuzz::any_command_line`: an empty item of a list was reported as the
            // policy or count `` (nothing), without the list it came from.
            (&["--policy=,A"], "'--policy <NAME[,NAME..]>': empty item in `,A`"),
            (&["--processors", "1,,2"], "'--processors <N[,N..]>': empty item in `1,,2`"),
            (&["--policy", ""], "empty item in ``"),
        ] {
            let e = parse(args).unwrap_err();
            assert!(e.contains(expect), "{args:?}: {e}");
        }
    }

    #[test]
    fn json_rows_follow_the_contract() {
        let p = Model { level: 6 }.problem().unwrap();
        let options =
            parse(&["--size", "6", "--processors", "1", "--policy", "no-affinity"]).unwrap().unwrap();
        let solve = SolveOptions { patch_size: 16, ..SolveOptions::default() };
        let config = Config { policy: BASELINE.into(), prefetch: false, processors: 1 };
        let m = measure(&p, &solve, &config, |_| {}).unwrap();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let r = measure_rayon(&p, &solve, &pool).unwrap();
        let rows =
            vec![Row { config: r.config.clone(), runs: vec![Ok(r)] }, Row { config, runs: vec![Ok(m)] }];
        let seq = Row::new(Config { policy: SEQUENTIAL.into(), prefetch: false, processors: 1 });
        let seq = Row { runs: vec![Ok(measure_sequential(&p, solve.tolerance))], ..seq };
        let doc = json_document(machine(), &problem_params(&options, p.len(), 7, 16), &seq, &rows);
        assert_eq!(doc["suite"], json!("grid"));
        assert!(doc["machine"]["cpus"].as_u64().unwrap() >= 1);
        let results = doc["results"].as_array().unwrap();
        assert_eq!(results.len(), 10);
        let systems = ["sequential", "rayon", "elite/no-affinity"];
        for (k, r) in results[..9].iter().enumerate() {
            assert_eq!(r["system"], json!(systems[k / 3]));
            assert_eq!(r["metric"], json!(["solve_s", "ops_per_sec", "relaxations_per_cell"][k % 3]));
            assert_eq!(r["bench"], json!("adaptive_grid"));
            assert_eq!(r["ok"], json!(true));
            assert!(r["median"].as_f64().unwrap() > 0.0);
            assert_eq!(r["params"]["processors"], json!(1));
            assert_eq!(r["params"]["size"], json!(6));
            assert_eq!(r["params"]["patch"], json!(16));
        }
        assert_eq!(results[9]["system"], json!("elite/no-affinity"));
        assert_eq!(results[9]["metric"], json!("ratio_to_no_affinity"));
        assert_eq!(results[9]["median"], json!(1.0));
        assert_eq!(results[9]["rounds"], json!([1.0]));
        assert_eq!(results[0]["rounds"].as_array().map(Vec::len), Some(1));
    }

    /// A policy at parity with no-affinity in every repetition but the third, on a host with a
    /// slow phase (240 ms instead of 160) that held three of the policy's five repetitions and
    /// two of no-affinity's: the medians' ratio would say 0.67x, the repetitions say 1x, and the
    /// range shows the repetition that differed.
    #[test]
    fn speed_ups_pair_the_runs_of_one_repetition() {
        let p = Model { level: 6 }.problem().unwrap();
        let m = measure_sequential(&p, SolveOptions::default().tolerance);
        let row = |policy: &str, times: &[u64]| Row {
            config: Config { policy: policy.into(), prefetch: false, processors: 1 },
            runs: times
                .iter()
                .map(|&t| Ok(Measurement { elapsed: Duration::from_millis(t), ..m.clone() }))
                .collect(),
        };
        let sequential = row(SEQUENTIAL, &[160, 160, 160, 240, 240]);
        let base = row(BASELINE, &[160, 160, 160, 240, 240]);
        let policy = row("virtual-time", &[160, 160, 240, 240, 240]);
        let (b, t) = (base.solve_s().unwrap().0, policy.solve_s().unwrap().0);
        assert!((b / t - 2.0 / 3.0).abs() < 1e-12, "the medians' ratio, {}", b / t);
        let ratios = paired_ratios(&base, &policy, solve_seconds).unwrap();
        let slow = 0.16 / 0.24;
        assert_eq!(ratios, [1.0, 1.0, slow, 1.0, 1.0]);
        assert_eq!(spread(ratios), Some((1.0, slow, 1.0)));
        // The JSON's ratio of rates, the policy's over no-affinity's: the same work, so the same
        // ratios.
        let rates = paired_ratios(&policy, &base, Measurement::rate).unwrap();
        let (median, min, max) = spread(rates).unwrap();
        assert_eq!((median, max), (1.0, 1.0));
        assert!((min - 160.0 / 240.0).abs() < 1e-12, "{min}");
        // Rows that did not run as many repetitions, or with a failed run, have no ratio.
        assert_eq!(paired_ratios(&row(BASELINE, &[160, 160]), &policy, solve_seconds), None);
        let mut failed = row(BASELINE, &[160, 160, 160, 240, 240]);
        failed.runs[1] = Err(RunError::Unavailable("no".into()));
        assert_eq!(paired_ratios(&failed, &policy, solve_seconds), None);

        let rows = [base, policy];
        let mut out = Vec::new();
        print_table(&mut out, &sequential, &rows).unwrap();
        let table = String::from_utf8(out).unwrap();
        let line = table.lines().find(|l| l.starts_with("elite/virtual-time")).unwrap();
        assert!(line.contains(" 1.00x (0.67-1.00) 1.00x (0.67-1.00) "), "{table}");
        let doc = json_document(json!({}), &json!({}), &sequential, &rows);
        let ratio = &doc["results"].as_array().unwrap()[10];
        assert_eq!(
            (&ratio["system"], &ratio["metric"], &ratio["median"]),
            (&json!("elite/virtual-time"), &json!("ratio_to_no_affinity"), &json!(1.0))
        );
        let rounds: Vec<f64> =
            ratio["rounds"].as_array().unwrap().iter().map(|r| r.as_f64().unwrap()).collect();
        assert_eq!(rounds.len(), 5);
        assert!((rounds[2] - 160.0 / 240.0).abs() < 1e-12, "{rounds:?}");
    }

    /// Property tests of the flags: any argument list gives options within their ranges or an
    /// error that quotes the flag or value at fault. Cases: 256, times `ELITE_FUZZ_SCALE`, or
    /// `PROPTEST_CASES`.
    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        fn config() -> proptest::test_runner::Config {
            let env = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u32>().ok());
            let cases = env("PROPTEST_CASES")
                .unwrap_or_else(|| 256u32.saturating_mul(env("ELITE_FUZZ_SCALE").unwrap_or(1)));
            proptest::test_runner::Config { cases, failure_persistence: None, ..Default::default() }
        }

        /// A flag, a value, or both in one argument (`--flag=value`).
        fn arg() -> impl Strategy<Value = String> {
            let flags = vec![
                "--policy",
                "--size",
                "--processors",
                "--patch",
                "--prefetch",
                "--reps",
                "--json",
                "--stats",
                "--help",
                "-h",
                "--verbose",
                "-",
                "--",
                "-p",
            ];
            let values = prop_oneof![
                prop::sample::select(POLICIES.to_vec()).prop_map(str::to_string),
                prop::sample::select(vec![
                    "on",
                    "off",
                    "both",
                    "maybe",
                    "",
                    " ",
                    ",",
                    "1,2",
                    "2, 1",
                    "1,,2",
                    "0",
                    "1",
                    "4",
                    "5",
                    "20",
                    "21",
                    "64",
                    "65",
                    "100",
                    "101",
                    "4096",
                    "4097",
                    "+5",
                    "-1",
                    "1.5",
                    "18446744073709551616",
                    "out.json",
                    "-",
                    "no-affinity,gravity",
                    "gravity,lifo",
                    "é",
                    "\0",
                ])
                .prop_map(str::to_string),
                any::<u64>().prop_map(|n| n.to_string()),
                any::<String>(),
            ];
            let flag = prop::sample::select(flags).prop_map(str::to_string);
            prop_oneof![
                2 => flag.clone(),
                2 => values.clone(),
                1 => (flag, values).prop_map(|(f, v)| format!("{f}={v}")),
            ]
        }

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn any_command_line(args in prop::collection::vec(arg(), 0..8), cpus in 0usize..=8) {
                match parse_args(&args, cpus) {
                    Ok(None) => prop_assert!(args.iter().any(|a| a == "--help" || a == "-h")),
                    Ok(Some(o)) => {
                        prop_assert!(!o.policies.is_empty());
                        let order: Vec<usize> =
                            o.policies.iter().map(|p| POLICIES.iter().position(|q| q == p).expect("known")).collect();
                        prop_assert!(order.windows(2).all(|w| w[0] < w[1]), "{:?}", o.policies);
                        prop_assert!((Model::MIN_LEVEL..=Model::MAX_LEVEL).contains(&o.size));
                        prop_assert!(!o.processors.is_empty());
                        prop_assert!(o.processors.windows(2).all(|w| w[0] < w[1]));
                        prop_assert!(o.processors.iter().all(|p| (1..=elite_rt::MAX_PROCESSORS).contains(p)));
                        prop_assert!(o.patch.is_none_or(|p| (1..=MAX_PATCH).contains(&p)));
                        prop_assert!((1..=MAX_REPS).contains(&o.reps));
                        prop_assert!(!o.prefetch.is_empty());
                        prop_assert!(o.json.as_ref().is_none_or(|j| !j.is_empty()));
                        prop_assert_eq!(o.stats, args.iter().any(|a| a == "--stats"));
                    }
                    Err(message) => {
                        // The message quotes an argument, or a part of one (ours quote with
                        // backticks, clap's with single quotes, a flag as `'--size <LEVEL>'`).
                        let quotes = |text: &str| {
                            message.contains(&format!("`{text}`")) || message.contains(&format!("'{text}'"))
                        };
                        let quoted: Vec<&str> = message
                            .split('`')
                            .skip(1)
                            .step_by(2)
                            .chain(message.split('\'').skip(1).step_by(2))
                            .map(|q| q.split(' ').next().unwrap_or_default())
                            .collect();
                        let from_args = |text: &str| args.iter().any(|a| a.contains(text));
                        let value_of = |a: &String| a.split_once('=').map_or(a.as_str(), |(_, v)| v).to_string();
                        prop_assert!(
                            args.iter().any(|a| quotes(a) || quotes(&value_of(a)))
                                || quoted.iter().any(|q| !q.is_empty() && from_args(q)),
                            "{:?}: {}", args, message
                        );
                        // One line, without clap's usage (main prints its own).
                        prop_assert!(!message.contains('\n') && !message.contains("Usage:"), "{}", message);
                    }
                }
            }
        }
    }
}
