//! Suite `grid`: the adaptive-grid solver of ELiTE section 3.2 (figure 3.2.2) under every
//! scheduling policy, with and without prefetch (section 2.3.5), beside the sequential loop and a
//! rayon peer.
//!
//! | bench | one operation | metric | processors | systems |
//! | --- | --- | --- | --- | --- |
//! | `adaptive_grid` | one smoothing operation (the relaxation of one unknown) | ops_per_sec | 1, 2 (`sequential`: 1) | `sequential`, `rayon`, `elite/<policy>`, `elite/<policy>+prefetch` (`auto` among the policies), `elite/auto+warm` |
//! | `adaptive_grid` (side rows) | the solve's time and its relaxations per cell, per run | `solve_s`, `relaxations_per_cell` | the same | the same |
//! | `adaptive_grid` (`--cachegrind`) | simulated last-level misses of one solve | ll_misses | 1 | the elite systems |
//!
//! Every elite sample is one call of [`elite_grid::experiment::measure`], the very procedure that
//! `crates/elite-grid/examples/adaptive_grid.rs` runs: a fresh runtime built with the policy, one
//! ULT per patch, the solve timed from the start of the first sweep to the end of the last, the
//! answer checked (residual and error within what the solver's termination guarantees; a run
//! outside them fails its row). `sequential` is [`elite_grid::experiment::measure_sequential`]
//! (Gauss-Seidel in Morton order on a plain `f64` slice), `rayon` is
//! [`elite_grid::experiment::measure_rayon`] (the same multicolour sweeps over `par_iter`, one pool
//! per thread count built with the suite and reused by every run), checked the same way. The
//! problem is the example's at `--size 13` (171 000 cells; `--quick`: size 9), built once per
//! invocation, and the patch size is chosen once from costs measured when the suite starts
//! ([`elite_grid::experiment::choose_patch`], for the largest processor count), the same for every
//! system; `params.patch` records it. `elite/<policy>+prefetch` runs the same solve with every
//! patch's ULT declaring its data block (`elite_rt::set_data_block`), which the runtime then
//! prefetches before it switches to the ULT; `elite/<policy>` declares nothing.
//!
//! Besides the rate, each contender gets two side rows, the median of its runs' solve time
//! (`solve_s`) and relaxations per cell (`relaxations_per_cell`). The ULT solver's work does not
//! depend on the schedule (see `elite_grid::active`), so every elite row has the same relaxations
//! per cell, and rate ratios between elite rows are ratios of solve times; the rayon peer stops
//! after the first sweep within the tolerance, as the ULTs do when their solve closes in time
//! (`elite_grid::active`, "Closing"; otherwise at most three sweeps later), and the sequential
//! reference's Morton order converges in about as many sweeps.
//!
//! `--policy NAME` (repeatable) keeps only the named policies (no-affinity, the baseline, is
//! always kept); `--bench NAME` as for every suite.
//!
//! ## Simulated misses (`--cachegrind`)
//!
//! With `--cachegrind`, for each policy with and without prefetch, `valgrind --tool=cachegrind
//! --cache-sim=yes --LL=2097152,16,64` runs `elite-bench grid-probe <policy> [--prefetch]
//! --size 12 --patch 256` (one solve at 1 processor, 334 ULTs; `--quick`: size 9) and the row reports the
//! `LL misses` of the whole process (building the mesh included, the same for every policy). A
//! solve at one processor does the same work in the same order on every run, so each runs once
//! (about two minutes each). Cachegrind models no prefetching, hardware or software: prefetch
//! rows show its instructions and the misses it cannot remove, not its benefit. By hand:
//!
//! ```text
//! cargo build --release -p elite-bench
//! valgrind --tool=cachegrind --cache-sim=yes --LL=2097152,16,64 --cachegrind-out-file=/dev/null \
//!     target/release/elite-bench grid-probe virtual-time --size 12
//! ```
//!
//! ## Targets
//!
//! Those of issue 19, on the rates, which with the same work are the inverse ratios of the solve
//! times (the rayon and sequential rows within three sweeps at most): the best elite system at least
//! 1/1.15 of the sequential reference's rate at 1 processor and 1/0.75 at 2, and at least the
//! rayon peer's at 2; and those of issue 5, the best affinity policy at least 1.3x
//! `no-affinity`'s at 1 and at 2 processors (printed with and without prefetch counted); and
//! `elite/auto` and `elite/auto+warm` each within 5% of each fixed policy's rate and at least
//! 0.97 of `no-affinity`'s, at each processor count (the solve reports its relaxations to
//! `auto` with `elite_rt::progress`).
//!
//! `elite/auto` starts cold in every sample (a fresh runtime: the patches' footprints, larger
//! than a first-level cache, bring the lead, `virtual-time` or `reload-transient` (see
//! `elite_rt::policy::auto`), in force at the first progress, and the
//! probe measures the other candidates against it in epochs of a few milliseconds at once; a
//! solve of a few tenths of a second ends before the budget allows a full exploration).
//! `elite/auto+warm` (without
//! prefetch only) remembers its explorations under a key naming the bench, size and patch
//! (`elite_rt::policy::Auto::remember`, kept apart per processor count): from the sample after
//! its first exploration on, a sample starts from the choice of the samples before it.
//! `params.auto_memory` tells the two apart; both carry the side rows `auto_explorations`,
//! `auto_choice` and `auto_warm_start` (1 for a sample that started warm); see
//! `elite-bench`'s `workloads::record_auto`.
//! A miss does not fail the run, a wrong answer does.

use std::process::ExitCode;
use std::rc::Rc;

use elite_grid::active::SolveOptions;
use elite_grid::experiment::{
    check_ults, choose_patch, measure, measure_rayon, measure_sequential, measure_with, runtime_builder,
    Config, Measurement, Model, BASELINE, POLICIES, PREFETCH_AVAILABLE, RAYON, SEQUENTIAL,
};
use elite_grid::layout::MAX_PATCH;
use elite_grid::matrix::Problem;

use super::Context;
use crate::cachegrind;
use crate::harness::{record_side, Bench, Bound, Contender, Metric, Params, Sample, Subject, Target};
use crate::peers::sample_line;
use crate::workloads::{record_auto_decisions, warm_auto, AUTO_WARM};
use elite_rt::policy::Policy;

/// The child command that runs one solve (for cachegrind).
pub const PROBE_COMMAND: &str = "grid-probe";

/// The refinement level of a full run (the example's default) and of `--quick`.
const SIZE: (u8, u8) = (13, 9);

/// The refinement level of the cachegrind probe (full, `--quick`).
const PROBE_SIZE: (u8, u8) = (12, 9);

/// Cells per patch of the cachegrind probe by default: fixed, so that its simulated counts
/// repeat (the suite's own runs choose theirs from measured costs).
const PROBE_PATCH: usize = 256;

/// The system name of each policy, without and with prefetch, in [`POLICIES`]' order.
const SYSTEMS: [(&str, &str, &str); 6] = [
    ("no-affinity", "elite/no-affinity", "elite/no-affinity+prefetch"),
    ("virtual-time", "elite/virtual-time", "elite/virtual-time+prefetch"),
    ("minimum-misses", "elite/minimum-misses", "elite/minimum-misses+prefetch"),
    ("reload-transient", "elite/reload-transient", "elite/reload-transient+prefetch"),
    ("gravity", "elite/gravity", "elite/gravity+prefetch"),
    ("auto", "elite/auto", "elite/auto+prefetch"),
];

/// The fixed policies, without prefetch (what `elite/auto` is held against).
const FIXED: &[&str] = &[
    "elite/no-affinity",
    "elite/virtual-time",
    "elite/minimum-misses",
    "elite/reload-transient",
    "elite/gravity",
];

/// The affinity policies, without prefetch.
const AFFINITY: &[&str] =
    &["elite/virtual-time", "elite/minimum-misses", "elite/reload-transient", "elite/gravity"];

/// Every elite system, prefetch included.
const ALL_ELITE: &[&str] = &[
    "elite/no-affinity",
    "elite/no-affinity+prefetch",
    "elite/virtual-time",
    "elite/virtual-time+prefetch",
    "elite/minimum-misses",
    "elite/minimum-misses+prefetch",
    "elite/reload-transient",
    "elite/reload-transient+prefetch",
    "elite/gravity",
    "elite/gravity+prefetch",
    "elite/auto",
    "elite/auto+warm",
    "elite/auto+prefetch",
];

/// The affinity policies with prefetch.
const AFFINITY_PREFETCH: &[&str] = &[
    "elite/virtual-time+prefetch",
    "elite/minimum-misses+prefetch",
    "elite/reload-transient+prefetch",
    "elite/gravity+prefetch",
];

/// The benches of the suite.
pub fn benches(ctx: &mut Context) -> Vec<Bench> {
    let processors =
        ctx.processor_counts(Some("grid: this machine has 1 CPU: the 2-processor rows are left out"));
    let size = if ctx.quick { SIZE.1 } else { SIZE.0 };
    let problem = match (Model { level: size }).problem() {
        Ok(p) => Rc::new(p),
        Err(e) => {
            ctx.notes.push(format!("grid: cannot build the problem of size {size}: {e}"));
            return Vec::new();
        }
    };
    // One patch size for every system, chosen once from costs measured now.
    let most = processors.iter().copied().max().unwrap_or(1);
    let patch = match choose_patch(&problem, most) {
        Ok(choice) => choice.size,
        Err(e) => {
            ctx.notes.push(format!("grid: cannot measure the costs that choose the patch size: {e}"));
            return Vec::new();
        }
    };
    let options = Rc::new(SolveOptions { patch_size: patch, ..SolveOptions::default() });
    let systems = chosen_systems(ctx);
    let prefetch: &[bool] = if PREFETCH_AVAILABLE {
        &[false, true]
    } else {
        ctx.notes.push("grid: elite-rt cannot prefetch: the +prefetch rows are left out".into());
        &[false]
    };
    let ults = problem.len().div_ceil(patch);
    let params = |p: usize, ults: usize, pf: bool| {
        Params::new(p)
            .with("size", size as u64)
            .with("cells", problem.len() as u64)
            .with("ults", ults as u64)
            .with("patch", patch as u64)
            .with_flag("prefetch", pf)
    };
    let mut contenders = Vec::new();
    {
        let (problem, options) = (Rc::clone(&problem), Rc::clone(&options));
        contenders.push(Contender::new(SEQUENTIAL, params(1, 0, false), problem.len() as u64, move || {
            checked(measure_sequential(&problem, options.tolerance))
        }));
    }
    for &p in &processors {
        // One pool per thread count, built once and reused by every run.
        match rayon::ThreadPoolBuilder::new().num_threads(p).build() {
            Ok(pool) => {
                let (problem, options) = (Rc::clone(&problem), Rc::clone(&options));
                contenders.push(Contender::new(
                    RAYON,
                    params(p, 0, false),
                    problem.len() as u64,
                    move || checked(measure_rayon(&problem, &options, &pool).map_err(|e| e.to_string())?),
                ));
            }
            Err(e) => ctx.notes.push(format!("grid: rayon at {p} threads left out: {e}")),
        }
        for &(policy, plain, with_prefetch) in &systems {
            for &pf in prefetch {
                let config = Config { policy: policy.to_string(), prefetch: pf, processors: p };
                let system = if pf { with_prefetch } else { plain };
                let mut row = params(p, ults, pf);
                if policy == "auto" {
                    row = row.with_flag("auto_memory", false);
                }
                {
                    let (problem, options, config) =
                        (Rc::clone(&problem), Rc::clone(&options), config.clone());
                    contenders.push(Contender::new(system, row, problem.len() as u64, move || {
                        solve_once(&problem, &options, &config, None)
                    }));
                }
                if policy == "auto" && !pf {
                    // `auto` started warm: it remembers its explorations from sample to sample.
                    let (problem, options) = (Rc::clone(&problem), Rc::clone(&options));
                    let row = params(p, ults, pf).with_flag("auto_memory", true);
                    let warm = warm_auto(format!("elite-bench grid adaptive_grid size {size} patch {patch}"));
                    contenders.push(Contender::new(AUTO_WARM, row, problem.len() as u64, move || {
                        solve_once(&problem, &options, &config, Some(&warm))
                    }));
                }
            }
        }
    }
    let mut targets = Vec::new();
    for &p in &processors {
        targets.push(Target::Relative {
            subject: Subject::Best(ALL_ELITE),
            baseline: SEQUENTIAL,
            processors: p,
            bound: Bound::AtLeast(if p == 1 { 1.0 / 1.15 } else { 1.0 / 0.75 }),
        });
        if p > 1 {
            targets.push(Target::Relative {
                subject: Subject::Best(ALL_ELITE),
                baseline: RAYON,
                processors: p,
                bound: Bound::AtLeast(1.0),
            });
        }
        targets.push(Target::Relative {
            subject: Subject::Best(AFFINITY),
            baseline: BASELINE_SYSTEM,
            processors: p,
            bound: Bound::AtLeast(1.3),
        });
        if PREFETCH_AVAILABLE {
            targets.push(Target::Relative {
                subject: Subject::Best(AFFINITY_PREFETCH),
                baseline: "elite/no-affinity+prefetch",
                processors: p,
                bound: Bound::AtLeast(1.3),
            });
        }
    }
    targets.extend(super::affinity::auto_targets(FIXED, &processors));
    let mut benches = vec![Bench { name: "adaptive_grid", metric: Metric::OpsPerSec, contenders, targets }];
    if ctx.cachegrind {
        if let Some(bench) = cachegrind_bench(ctx, &systems, prefetch) {
            benches.push(bench);
        }
    }
    benches
}

/// The baseline's system name.
const BASELINE_SYSTEM: &str = "elite/no-affinity";

/// The policies to run: those of `--policy` (the baseline always), of those the runtime has.
fn chosen_systems(ctx: &mut Context) -> Vec<(&'static str, &'static str, &'static str)> {
    let mut chosen = Vec::new();
    for &(policy, plain, with_prefetch) in &SYSTEMS {
        let asked =
            policy == BASELINE || ctx.policies.is_empty() || ctx.policies.iter().any(|p| p.name() == policy);
        if !asked {
            continue;
        }
        match runtime_builder(policy) {
            Ok(_) => chosen.push((policy, plain, with_prefetch)),
            Err(e) => ctx.notes.push(format!("grid: {plain} left out: {e}")),
        }
    }
    chosen
}

/// One checked solve under `config`: see [`checked`].
/// One checked solve under `config`, or on a runtime of `policy` where one is given (`config`
/// then only names it); under `auto`, its side rows ([`record_auto_decisions`]).
fn solve_once(
    problem: &Problem,
    options: &SolveOptions,
    config: &Config,
    policy: Option<&Policy>,
) -> Result<Sample, String> {
    let m = match policy {
        Some(policy) => {
            let builder = elite_rt::Runtime::builder().policy(policy.clone());
            measure_with(problem, options, config, builder, |_| {})
        }
        None => measure(problem, options, config, |_| {}),
    }
    .map_err(|e| e.to_string())?;
    if let Some(last) = m.auto.last() {
        // (Decisions only under `auto`: its settings are `policy`'s, or the defaults of `auto`.)
        let auto = policy.and_then(Policy::auto_settings).cloned().unwrap_or_default();
        record_auto_decisions(&auto, &m.auto, last.policy);
    }
    checked(m)
}

/// The sample of a measurement: the time per relaxation, and as the answer the number of cells (a
/// solve outside the residual or error bound fails instead); the solve time and the relaxations
/// per cell go to side rows.
fn checked(m: Measurement) -> Result<Sample, String> {
    if let Some(why) = m.failure() {
        return Err(format!("wrong answer: {why}"));
    }
    record_side("solve_s", m.elapsed.as_secs_f64());
    record_side("relaxations_per_cell", m.relaxations as f64 / m.cells as f64);
    Ok(Sample::per_op(m.elapsed, m.relaxations, m.cells as u64))
}

/// The `ll_misses` bench of `--cachegrind`, or `None` (with a note) without valgrind.
fn cachegrind_bench(
    ctx: &mut Context,
    systems: &[(&'static str, &'static str, &'static str)],
    prefetch: &[bool],
) -> Option<Bench> {
    let exe = match cachegrind::executable() {
        Ok(exe) => exe,
        Err(why) => {
            ctx.notes.push(format!("grid --cachegrind: skipped: {why}"));
            return None;
        }
    };
    let size = if ctx.quick { PROBE_SIZE.1 } else { PROBE_SIZE.0 };
    let cells = match (Model { level: size }).problem() {
        Ok(p) => p.len(),
        Err(e) => {
            ctx.notes.push(format!("grid --cachegrind: skipped: {e}"));
            return None;
        }
    };
    let mut contenders = Vec::new();
    // (Not `auto`: what it chooses depends on time, which cachegrind's slowdown distorts.)
    for &(policy, plain, with_prefetch) in systems.iter().filter(|s| s.0 != "auto") {
        for &pf in prefetch {
            let params = Params::new(1)
                .with("size", size as u64)
                .with("cells", cells as u64)
                .with("ults", cells.div_ceil(PROBE_PATCH) as u64)
                .with("patch", PROBE_PATCH as u64)
                .with_flag("prefetch", pf)
                .with("ll_bytes", 2 << 20);
            let exe = exe.clone();
            let system = if pf { with_prefetch } else { plain };
            contenders.push(
                Contender::new(system, params, cells as u64, move || {
                    cachegrind_probe(&exe, policy, pf, size)
                })
                .run_once_only(),
            );
        }
    }
    Some(Bench { name: "adaptive_grid", metric: Metric::Count("ll_misses"), contenders, targets: Vec::new() })
}

/// What `grid-probe` was asked for.
#[derive(Debug, PartialEq)]
pub(crate) struct ProbeArgs {
    /// One of [`POLICIES`].
    pub(crate) policy: String,
    /// `--prefetch`.
    pub(crate) prefetch: bool,
    /// The finest level, `Model::MIN_LEVEL..=Model::MAX_LEVEL`.
    pub(crate) size: u8,
    /// `1..=elite_rt::MAX_PROCESSORS`.
    pub(crate) processors: usize,
    /// Cells per patch, `1..=MAX_PATCH`.
    pub(crate) patch: usize,
}

/// The probe's command line, as clap parses it.
fn probe_command() -> clap::Command {
    use clap::builder::PossibleValuesParser;
    use clap::{Arg, ArgAction};
    clap::Command::new("elite-bench grid-probe")
        .about("one checked solve of the adaptive grid, printing its sample line; for running under cachegrind or callgrind")
        .no_binary_name(true)
        .allow_negative_numbers(true)
        .args_override_self(true)
        .arg(Arg::new("policy").value_name("POLICY").required(true).value_parser(PossibleValuesParser::new(POLICIES)))
        .arg(Arg::new("prefetch").long("prefetch").action(ArgAction::SetTrue).help("with prefetch"))
        .arg(
            Arg::new("size")
                .long("size")
                .value_name("LEVEL")
                .value_parser(crate::number_in("a level", Model::MIN_LEVEL, Model::MAX_LEVEL))
                .help(format!("the finest level (default {})", PROBE_SIZE.0)),
        )
        .arg(crate::processors_arg())
        .arg(
            Arg::new("patch")
                .long("patch")
                .value_name("CELLS")
                .value_parser(crate::number_in("a count", 1, MAX_PATCH))
                .help(format!("cells per ULT (default {PROBE_PATCH})")),
        )
}

/// Parses `<policy> [--prefetch] [--size LEVEL] [--processors N] [--patch CELLS]`; `Ok(None)` for
/// `--help`; an error names the argument at fault and what was expected.
pub(crate) fn parse_probe_args(args: &[String]) -> Result<Option<ProbeArgs>, String> {
    crate::refuse_single_dash(args, "--prefetch, --size LEVEL, --processors N, --patch CELLS, --help", true)?;
    let matches = match probe_command().try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => return Ok(None),
        Err(e) => return Err(crate::clap_message(&e)),
    };
    Ok(Some(ProbeArgs {
        policy: matches.get_one::<String>("policy").cloned().ok_or("no policy given")?,
        prefetch: matches.get_flag("prefetch"),
        size: matches.get_one::<u8>("size").copied().unwrap_or(PROBE_SIZE.0),
        processors: matches.get_one::<usize>("processors").copied().unwrap_or(1),
        patch: matches.get_one::<usize>("patch").copied().unwrap_or(PROBE_PATCH),
    }))
}

/// Runs the probe under cachegrind; the sample carries the LL misses, the answer the cells.
fn cachegrind_probe(exe: &std::path::Path, policy: &str, prefetch: bool, size: u8) -> Result<Sample, String> {
    let size = size.to_string();
    let mut args = vec![PROBE_COMMAND, policy, "--size", &size];
    if prefetch {
        args.push("--prefetch");
    }
    cachegrind::sample(exe, &args, 2 << 20)
}

/// `elite-bench grid-probe <policy> [--prefetch] [--size LEVEL] [--processors N] [--patch CELLS]`: one checked
/// solve, printing its sample line (answer: the cells) and, on stderr, its rate, solve time and
/// relaxations per cell; for running under cachegrind or callgrind.
pub fn probe_main(args: &[String]) -> ExitCode {
    let ProbeArgs { policy, prefetch, size, processors, patch } = match parse_probe_args(args) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => {
            println!("{}", probe_command().render_help());
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!(
                "elite-bench {PROBE_COMMAND}: {message}\n\
                 usage: elite-bench {PROBE_COMMAND} <policy> [--prefetch] [--size LEVEL] [--processors N] [--patch CELLS]\n\
                 policies: {}; LEVEL {}..={}; N 1..={}; CELLS 1..={MAX_PATCH} (default {PROBE_PATCH})",
                POLICIES.join(", "),
                Model::MIN_LEVEL,
                Model::MAX_LEVEL,
                elite_rt::MAX_PROCESSORS
            );
            return ExitCode::from(2);
        }
    };
    // Refused before the build when a lower bound of the cells already makes too many ULTs.
    if let Err(e) = check_ults(&Model { level: size }, patch) {
        eprintln!("elite-bench {PROBE_COMMAND}: --size {size}: {e}");
        return ExitCode::from(2);
    }
    let problem = match (Model { level: size }).problem() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("elite-bench {PROBE_COMMAND}: {e}");
            return ExitCode::from(2);
        }
    };
    let config = Config { policy, prefetch, processors };
    let options = SolveOptions { patch_size: patch, ..SolveOptions::default() };
    match measure(&problem, &options, &config, |_| {}) {
        Ok(m) if m.ok() => {
            eprintln!(
                "{}: {:.2} M relaxations/s ({:.2} per CPU second), solve {:.3} s, {:.2} relaxations per cell, {} ULTs",
                config.system(),
                m.rate() / 1e6,
                m.cpu_rate().unwrap_or(0.0) / 1e6,
                m.elapsed.as_secs_f64(),
                m.relaxations as f64 / m.cells as f64,
                m.ults
            );
            // Under `auto`: what it chose, when and why.
            for decision in &m.auto {
                eprintln!("auto {decision}");
            }
            println!("{}", sample_line(&Sample::per_op(m.elapsed, m.relaxations, m.cells as u64)));
            ExitCode::SUCCESS
        }
        Ok(m) => {
            eprintln!("elite-bench {PROBE_COMMAND}: wrong answer: {}", m.failure().unwrap_or_default());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("elite-bench {PROBE_COMMAND}: {e}");
            ExitCode::FAILURE
        }
    }
}
