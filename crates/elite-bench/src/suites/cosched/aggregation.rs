//! Experiment `aggregation` of suite `cosched`: IAS's sysbench-memory sweep (`global` mode),
//! scaled to the host, for the aggregation modifier (`Policy::aggregate`).
//!
//! [`GROUPS`] groups of [`ULTS`] ULTs each ([`elite_rt::Group`]), spawned interleaved (one ULT
//! of each group in turn, as the seed's modified sysbench makes its threads mingle), on one
//! processor. Each group has one shared block of `block_bytes`; each ULT, in each of `passes`
//! runs, reads (mode `read`: sums one word per cache line) or writes (mode `write`: increments
//! one word per line) its group's whole block, then yields: the seed's second modification, a
//! yield after each access of `block_size`. (A yield after each chunk of a block, chunks much
//! smaller than the block, would let plain round-robin reuse each chunk across all groups, so
//! that the order of groups would not matter.) Every ULT declares the block as its footprint.
//! `passes` is chosen so that every sample touches about the same bytes in all.
//!
//! Systems: `elite/plain` (No Affinity, the groups without the modifier) and `elite/aggregated`
//! (No Affinity with `aggregate(Aggregate::ALWAYS)`), interleaved round by round; metric
//! `seconds` (the run, from the first spawn to the last join). A derived row `ratio_to_plain`
//! per mode and size gives `elite/aggregated`'s time over `elite/plain`'s, round by round.
//!
//! Block sizes: a fixed 1 MiB in every run, and half of each data cache of processor 0 (clamped
//! to 16 KiB..8 MiB); the full run adds the sweep's ends, 16 KiB and 8 MiB. A size *fits* when
//! one block takes at most three quarters of a cache (the rest holds the run's other lines) and
//! the [`GROUPS`] blocks together exceed it: there aggregation should
//! win (target: `ratio_to_plain` <= 1/1.2), elsewhere it should cost nothing (<= 1/0.97).
//!
//! With `--cachegrind`, bench `aggregation_ll_misses` runs the same workload (smaller: 2 ULTs a
//! group, 8 passes) in a probe of this executable under cachegrind with a simulated 16-way last
//! level of 1 MiB and of 2 MiB, at a block of 512 KiB (fitting both) and, in the full run, 4 MiB
//! (fitting neither); metric `ll_misses`, and `misses_ratio_to_plain` (target at the fitting
//! size: <= 0.7, 30% fewer misses).

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use elite_rt::policy::{Aggregate, Policy};
use elite_rt::{Builder, Group, Runtime};

use super::Context;
use crate::cachegrind;
use crate::harness::{Bench, Contender, Metric, Params, Sample, Target};
use crate::workloads::build_runtime;

/// Groups of ULTs.
pub const GROUPS: usize = 8;
/// ULTs per group.
pub const ULTS: usize = 4;
/// Bytes every sample touches in all (full, `--quick`).
const TOTAL_BYTES: (u64, u64) = (1 << 30, 1 << 27);
/// The block size of every run, whatever the host.
const FIXED_BLOCK: usize = 1 << 20;
/// The largest block of `--quick`.
const QUICK_MAX_BLOCK: usize = 1 << 20;
/// Passes per ULT at least: the first pass of a run of a group's ULTs loads the block, the others
/// find it cached when aggregated.
const MIN_PASSES: usize = 4;
/// The sweep's range.
const BLOCKS: (usize, usize) = (16 << 10, 8 << 20);
/// The systems, and whether each aggregates.
const SYSTEMS: [(&str, bool); 2] = [("elite/plain", false), ("elite/aggregated", true)];
/// What the derived rows compare with.
const PLAIN: &[&str] = &["elite/plain"];
/// The probe's command: `elite-bench cosched-probe <system> <block_bytes> <read|write> <groups> <ults> <passes>`.
pub const PROBE_COMMAND: &str = "cosched-probe";

/// Reading or writing the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Sum one word per line.
    Read,
    /// Increment one word per line.
    Write,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::Write => "write",
        }
    }
}

/// One run's shape.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Bytes of each group's block.
    pub block: usize,
    /// Reads or writes.
    pub mode: Mode,
    /// Groups.
    pub groups: usize,
    /// ULTs per group.
    pub ults: usize,
    /// Passes over the block per ULT, one per run.
    pub passes: usize,
}

/// The data caches of processor 0 from level 2 on (bytes), smallest first: the caches whose
/// misses cost a trip beyond the core's nearest cache (an L1 miss that hits the L2 costs a few
/// nanoseconds, which no order of groups changes much).
fn caches() -> Vec<u64> {
    let topology = elite_affinity::Topology::detect();
    let mut sizes: Vec<u64> = topology
        .caches_of(0)
        .filter(|c| c.kind != elite_affinity::CacheKind::Instruction && c.level >= 2)
        .map(|c| c.size)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The block sizes of the run: the fixed one, half of each cache, and (full run) the ends;
/// `--quick` keeps those up to [`QUICK_MAX_BLOCK`].
fn block_sizes(quick: bool, caches: &[u64]) -> Vec<usize> {
    let mut sizes = vec![FIXED_BLOCK];
    sizes.extend(caches.iter().map(|&c| (c as usize / 2).clamp(BLOCKS.0, BLOCKS.1)));
    if quick {
        sizes.retain(|&b| b <= QUICK_MAX_BLOCK);
    } else {
        sizes.extend([BLOCKS.0, BLOCKS.1]);
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// Whether one block of `block` bytes fits one of `caches` and `groups` blocks do not. A block
/// fits a cache when it takes at most [`FIT_SHARE`] of it: the cache also holds the run's other
/// lines (the ULTs' stacks and control blocks, the runtime's queues, and code where the cache is
/// unified), and a block as large as the whole cache is evicted in part by them on every pass.
fn fits(block: usize, groups: usize, caches: &[u64]) -> bool {
    let room = |c: u64| (c as f64 * FIT_SHARE) as u64;
    caches.iter().any(|&c| block as u64 <= room(c) && (block * groups) as u64 > c)
}

/// The share of a cache one block may take and still fit it.
const FIT_SHARE: f64 = 0.75;

/// A label of a mode and size, for the derived rows' tag (`read 256 KiB`).
fn case(mode: Mode, block: usize) -> &'static str {
    let size = if block >= 1 << 20 { format!("{} MiB", block >> 20) } else { format!("{} KiB", block >> 10) };
    // (A handful per run of the command.)
    Box::leak(format!("{} {size}", mode.name()).into_boxed_str())
}

/// The benches: `aggregation`, and with `--cachegrind` `aggregation_ll_misses`.
pub fn benches(ctx: &mut Context) -> Vec<Bench> {
    let caches = caches();
    let total = if ctx.quick { TOTAL_BYTES.1 } else { TOTAL_BYTES.0 };
    let mut contenders = Vec::new();
    let mut targets = Vec::new();
    for block in block_sizes(ctx.quick, &caches) {
        for mode in [Mode::Read, Mode::Write] {
            let passes = ((total / (GROUPS * ULTS * block) as u64) as usize).max(MIN_PASSES);
            let shape = Shape { block, mode, groups: GROUPS, ults: ULTS, passes };
            let label = case(mode, block);
            for (system, aggregated) in SYSTEMS {
                let params = params(&shape).with_text("case", label);
                contenders
                    .push(Contender::new(system, params, expected(&shape), move || run(&shape, aggregated)));
            }
            let fitting = fits(block, GROUPS, &caches);
            targets.push(Target::WithinOfBest {
                system: "elite/aggregated",
                others: PLAIN,
                tag: ("case", label),
                times: if fitting { 1.0 / 1.2 } else { 1.0 / 0.97 },
                metric: "ratio_to_plain",
            });
        }
    }
    let mut benches = vec![Bench { name: "aggregation", metric: Metric::Seconds, contenders, targets }];
    if ctx.cachegrind {
        benches.extend(ll_bench(ctx));
    }
    benches
}

fn params(shape: &Shape) -> Params {
    Params::new(1)
        .with("block_bytes", shape.block as u64)
        .with_text("mode", shape.mode.name())
        .with("groups", shape.groups as u64)
        .with("ults", shape.ults as u64)
        .with("passes", shape.passes as u64)
}

/// The simulated-miss bench, or nothing (with a note) where valgrind cannot run.
fn ll_bench(ctx: &mut Context) -> Option<Bench> {
    let exe = match cachegrind::executable() {
        Ok(exe) => exe,
        Err(why) => {
            ctx.notes.push(format!("cosched: aggregation_ll_misses left out: {why}"));
            return None;
        }
    };
    let blocks: &[usize] = if ctx.quick { &[512 << 10] } else { &[512 << 10, 4 << 20] };
    let mut contenders = Vec::new();
    let mut targets = Vec::new();
    for &ll in &cachegrind::LL_BYTES {
        for &block in blocks {
            let shape = Shape { block, mode: Mode::Read, groups: GROUPS, ults: 2, passes: 8 };
            let label: &'static str =
                Box::leak(format!("{} LL {} MiB", case(Mode::Read, block), ll >> 20).into_boxed_str());
            for (system, _) in SYSTEMS {
                let exe = exe.clone();
                let params = params(&shape).with("ll_bytes", ll).with_text("case", label);
                let args: Vec<String> = vec![
                    PROBE_COMMAND.into(),
                    system.into(),
                    block.to_string(),
                    shape.mode.name().into(),
                    shape.groups.to_string(),
                    shape.ults.to_string(),
                    shape.passes.to_string(),
                ];
                contenders.push(
                    Contender::new(system, params, expected(&shape), move || {
                        let args: Vec<&str> = args.iter().map(String::as_str).collect();
                        cachegrind::sample(&exe, &args, ll)
                    })
                    .run_once_only(),
                );
            }
            if fits(block, GROUPS, &[ll]) {
                targets.push(Target::WithinOfBest {
                    system: "elite/aggregated",
                    others: PLAIN,
                    tag: ("case", label),
                    times: 0.7,
                    metric: "misses_ratio_to_plain",
                });
            }
        }
    }
    Some(Bench { name: "aggregation_ll_misses", metric: Metric::Count("ll_misses"), contenders, targets })
}

/// Word `i` of group `g`'s block at the start.
fn initial(g: usize, i: usize) -> u64 {
    (i as u64).wrapping_mul(0x9E37_79B9).wrapping_add(g as u64)
}

/// The words one pass touches: one per 64-byte line.
const STRIDE: usize = 8;

/// The right answer of `shape`: for `read`, the sum of every pass's sum; for `write`, the sum
/// of the touched words after the run.
pub fn expected(shape: &Shape) -> u64 {
    let words = shape.block / 8;
    let runs = (shape.ults * shape.passes) as u64;
    let mut answer = 0u64;
    for g in 0..shape.groups {
        let sum = (0..words).step_by(STRIDE).fold(0u64, |s, i| s.wrapping_add(initial(g, i)));
        answer = match shape.mode {
            Mode::Read => answer.wrapping_add(sum.wrapping_mul(runs)),
            Mode::Write => answer.wrapping_add(sum).wrapping_add(runs * words.div_ceil(STRIDE) as u64),
        };
    }
    answer
}

/// One pass over `block`: the sum of the touched words (read), or 0 after incrementing them.
fn pass(block: &[AtomicU64], mode: Mode) -> u64 {
    let mut sum = 0u64;
    for w in block.iter().step_by(STRIDE) {
        // (Relaxed loads and stores: plain moves; the ULTs of a block run on one processor.)
        match mode {
            Mode::Read => sum = sum.wrapping_add(w.load(Ordering::Relaxed)),
            Mode::Write => w.store(w.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed),
        }
    }
    sum
}

/// One sample of `shape`, aggregated or plain: the time from the first spawn to the last join.
pub fn run(shape: &Shape, aggregated: bool) -> Result<Sample, String> {
    let policy = match aggregated {
        true => Policy::no_affinity().aggregate(Aggregate::ALWAYS),
        false => Policy::no_affinity(),
    };
    let rt: Runtime = build_runtime(Runtime::builder().processors(1).policy(policy))?;
    let words = shape.block / 8;
    let blocks: Vec<Arc<[AtomicU64]>> =
        (0..shape.groups).map(|g| (0..words).map(|i| AtomicU64::new(initial(g, i))).collect()).collect();
    let groups: Vec<Group> = (0..shape.groups).map(|g| Group::new(format!("block{g}"))).collect();
    let (mode, passes, block_bytes) = (shape.mode, shape.passes, shape.block);
    let ults = shape.ults;
    let spawned = blocks.clone();
    let (elapsed, sums) = rt.block_on(move || {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(ults * groups.len());
        for _ in 0..ults {
            for (g, group) in groups.iter().enumerate() {
                let block = Arc::clone(&spawned[g]);
                let h = Builder::new().group(group).footprint(block_bytes).spawn(move || {
                    let mut sum = 0u64;
                    for _ in 0..passes {
                        sum = sum.wrapping_add(pass(&block, mode));
                        elite_rt::yield_now();
                    }
                    sum
                });
                handles.push(h.map_err(|e| e.to_string())?);
            }
        }
        let mut sums = 0u64;
        for h in handles {
            sums = sums.wrapping_add(h.join().map_err(|_| "a ULT panicked".to_string())?);
        }
        Ok::<_, String>((start.elapsed(), sums))
    })?;
    let answer = match mode {
        Mode::Read => sums,
        Mode::Write => blocks.iter().fold(0u64, |a, b| {
            b.iter().step_by(STRIDE).fold(a, |a, w| a.wrapping_add(w.load(Ordering::Relaxed)))
        }),
    };
    Ok(Sample::per_op(elapsed, 1, answer))
}

/// `elite-bench cosched-probe <system> <block_bytes> <read|write> <groups> <ults> <passes>`:
/// one run, printing `ns_per_op=<ns> answer=<answer>` (the line `cachegrind::sample` reads);
/// exit status 1 on a wrong answer, 2 on a bad command line.
pub fn probe_main(args: &[String]) -> ExitCode {
    let usage = format!(
        "usage: elite-bench {PROBE_COMMAND} <elite/plain|elite/aggregated> <block_bytes> <read|write> <groups> <ults> <passes>"
    );
    let parse = || -> Result<(bool, Shape), String> {
        let [system, block, mode, groups, ults, passes] = args else {
            return Err(format!("expected 6 arguments, got {}", args.len()));
        };
        let aggregated = match system.as_str() {
            "elite/plain" => false,
            "elite/aggregated" => true,
            other => return Err(format!("unknown system `{other}`")),
        };
        let number = |name: &str, v: &str| -> Result<usize, String> {
            v.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{name}: expected a positive number, got `{v}`"))
        };
        let mode = match mode.as_str() {
            "read" => Mode::Read,
            "write" => Mode::Write,
            other => return Err(format!("mode: expected read or write, got `{other}`")),
        };
        let shape = Shape {
            block: number("block_bytes", block)?.max(64),
            mode,
            groups: number("groups", groups)?,
            ults: number("ults", ults)?,
            passes: number("passes", passes)?,
        };
        Ok((aggregated, shape))
    };
    let (aggregated, shape) = match parse() {
        Ok(v) => v,
        Err(message) => {
            eprintln!("elite-bench {PROBE_COMMAND}: {message}\n{usage}");
            return ExitCode::from(2);
        }
    };
    match run(&shape, aggregated) {
        Ok(sample) if sample.answer == expected(&shape) => {
            println!("ns_per_op={} answer={}", sample.ns_per_op, sample.answer);
            ExitCode::SUCCESS
        }
        Ok(sample) => {
            eprintln!(
                "elite-bench {PROBE_COMMAND}: wrong answer {} (expected {})",
                sample.answer,
                expected(&shape)
            );
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("elite-bench {PROBE_COMMAND}: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_systems_answer_right_in_both_modes() {
        for mode in [Mode::Read, Mode::Write] {
            let shape = Shape { block: 16 << 10, mode, groups: 3, ults: 2, passes: 3 };
            for aggregated in [false, true] {
                assert_eq!(
                    run(&shape, aggregated).unwrap().answer,
                    expected(&shape),
                    "{mode:?} {aggregated}"
                );
            }
        }
    }

    #[test]
    fn sizes_follow_the_caches_and_keep_the_fixed_one() {
        let caches = [512 << 10, 32 << 20];
        assert_eq!(block_sizes(true, &caches), [256 << 10, 1 << 20]);
        assert_eq!(block_sizes(false, &caches), [16 << 10, 256 << 10, 1 << 20, 8 << 20]);
        assert_eq!(block_sizes(true, &[]), [1 << 20]);
        assert!(fits(256 << 10, 8, &caches) && fits(8 << 20, 8, &caches));
        assert!(!fits(1 << 20, 8, &caches) && !fits(16 << 10, 8, &caches) && !fits(64 << 10, 8, &caches));
        // A block the size of the whole cache leaves no room for the run's other lines.
        let epyc = [1 << 20, 32 << 20];
        assert!(!fits(1 << 20, 8, &epyc) && fits(768 << 10, 8, &epyc) && !fits(800 << 10, 8, &epyc));
        assert!(fits(1 << 20, 8, &[2 << 20, 300 << 20]));
    }
}
