//! Bench `contention` of suite `cosched`: LCN's mix of contention classes, scaled to this host
//! (the seed's section IV experiment).
//!
//! Five groups ([`elite_rt::Group`]) of [`ULTS`] ULTs each, one kernel per group, each ULT
//! repeating *units* of its kernel for a fixed wall time (3 s; 0.5 s with `--quick`) and
//! checking every run's answer against the answer computed once before the rounds. A unit is as
//! many runs of the kernel (each over the next chunk of the ULT's data) as take about [`UNIT`]
//! alone on one core, measured before the rounds, so that units of different groups weigh alike:
//!
//! | group | kernel (one run) | data | expected class here |
//! | --- | --- | --- | --- |
//! | `gemm` | a 128 x 128 matrix product (compute-bound, L2-resident) | 384 KiB per ULT | N |
//! | `atax` | `y = A^T (A x)` over 64 rows of a shared 2304 x 2304 matrix | 40.5 MiB shared | L |
//! | `triad` | a stream triad `a = b + s c` over 1/8 of 3 x 8 MiB | 24 MiB per ULT | L |
//! | `stencil` | a 5-point Jacobi sweep of a 512 x 512 grid (L3-resident) | 4 MiB per ULT | C |
//! | `spin` | a xorshift chain (pure compute) | none | N |
//!
//! The expected classes are for a host of 512 KiB of L2 per core and a 32 MiB L3: the
//! classifier judges the declared footprints by the host topology's caches
//! ([`elite_rt::contention::cache_sizes`], recorded as the rows' params `l2_bytes` and
//! `llc_bytes`), so on a host whose last-level cache holds a group's data (a 300 MiB L3 holds
//! `triad`'s 48 MiB and `atax`'s matrix) that group is C there, not L.
//!
//! Systems, one [`elite_rt::contention::Coscheduler`] mode each on a 2-processor runtime
//! (quantum 20 ms; 10 ms with `--quick`): `elite/default` (no gate: the runtime's policy runs
//! every ULT), `elite/lcn` (probe, classify, predict, pair), `elite/gang` (one group at a time on
//! both processors), `elite/miss-balance` (pairs by memory intensity, Distributed-Intensity
//! style). The three gated systems run with the runtime's own gate
//! ([`elite_rt::RuntimeBuilder::coschedule`]): each ULT reports a unit with
//! [`elite_rt::contention::unit_done`] and yields after it, and the runtime admits the groups.
//! With `ELITE_COSCHED_COOPERATIVE=1` in the environment the bench also runs each of them with
//! the cooperative gate (each ULT passes [`Coscheduler::run`] around each unit), as
//! `elite/lcn+cooperative`, `elite/gang+cooperative` and `elite/miss-balance+cooperative`,
//! interleaved with the others: the comparison of the two paths.
//!
//! Rows: metric `completions` (units completed before the deadline, all groups; higher is
//! better although the harness lists counts as costs), side rows `completions_<group>` per
//! group and `cv_progress`: the coefficient of variation over the groups of their normalized
//! progress, each group's units per second here over its units per second alone on the
//! 2-processor runtime (measured before the rounds; lower is fairer); `idle_share`, the share
//! of the two processors' time in which no kernel ULT ran (gaps the gate leaves, the probe's
//! idle processor); per group `unit_ms_<group>`, its busy milliseconds per completed unit (how
//! much contention and descheduling stretched its units beyond [`UNIT`]); `cpu_share`, the CPU
//! time the process got over the two processors' time ([`process_cpu_time`], every thread's;
//! below `1 - idle_share` by the time the OS held the processors' threads off their CPUs while
//! they had a ULT to run, such as the real-time throttling of a run under `chrt -f`, or other
//! load; the section below), and under the gated systems `class_<group>`, the class it ended
//! with (1 L, 2 LC, 3 C, 4 N, 0 unclassified); under LCN `reprobes`, the groups' re-probes in
//! the run (`GroupReport::reprobes`);
//! `weighted_speedup`, the sum over the groups of their normalized progress (completions
//! counted by what each group's units cost it alone, so that a group of short units does not
//! outweigh the others: about 1 for a schedule that keeps both processors busy and changes no
//! unit's cost, above 1 where co-running helps); `completions_ceiling`, the most units the run's
//! processor time could have held at the cheapest group's unit cost as run
//! ([`completions_ceiling`]: what any schedule that does not make units cheaper can reach).
//! Targets: LCN at least
//! 1.05x the default's completions and at least gang's (the fairness target, LCN's
//! `cv_progress` within 1.5x the default's, is read from the side rows).
//!
//! # LCN against gang where every group is C or N
//!
//! Where the classifier finds no L or LC group (a last-level cache that holds every group's
//! data) and each C group scales to both processors, LCN's plan gives every group gang's share:
//! each C group alone on both processors, the N groups halved and paired
//! ([`elite_rt::contention::pair_lcn`]). What then parts the two is processor time, not the
//! shares, and the rows show where it goes:
//!
//! - Gang leaves a processor idle at each slot change until the last slot's straggler finishes
//!   its unit (no group may run beside another): up to a unit per change. LCN lets the
//!   next group start beside a straggler of a class it may pair with and lets N groups fill an
//!   idle processor, so its only gap is the probe's: the first group's one-core phase, before
//!   any N group is classified to fill the other processor. `idle_share` shows both.
//! - Under a real-time policy (`chrt -f`, as the suites are run) Linux throttles a CPU's
//!   real-time threads once they have run `sched_rt_runtime_us` of a `sched_rt_period_us`
//!   (95% by default), whatever the schedule, and a processor asleep in a straggler wait does
//!   not use that budget: gang's gaps partly replace throttling that every system meets anyway.
//!   The throttled time lands inside whichever units were running (it stretches their
//!   `unit_ms_<group>`, not `idle_share`); `cpu_share` is what each system was left. LCN's
//!   gain over gang is the difference of the two `cpu_share` rows, less whatever the N halves
//!   cost (the seed takes halving an N group as free; a compute group whose two ULTs share one
//!   core may lose a little to it).
//!
//! On a host where some group is L or LC the plans differ (an L group is never paired with a
//! memory- or cache-bound one), and co-running is where LCN gains or loses; docs/contention.md
//! has the model.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use elite_grid::active::process_cpu_time;
use elite_rt::contention::{Class, Coscheduler, Mode};

use crate::harness::{record_side, Bench, Bound, Contender, Metric, Params, Sample, Subject, Target};
use crate::suites::Context;
use crate::workloads::{build_runtime, elite_runtime};

/// ULTs per group.
pub const ULTS: usize = 2;
/// Wall time of one sample (full, `--quick`).
const RUN: (Duration, Duration) = (Duration::from_millis(3000), Duration::from_millis(500));
/// The coscheduler's quantum (full, `--quick`).
const QUANTUM: (Duration, Duration) = (Duration::from_millis(20), Duration::from_millis(10));

const GEMM_N: usize = 128;
const ATAX_N: usize = 2304;
/// Rows of the atax matrix one run covers.
const ATAX_ROWS: usize = 64;
const TRIAD_N: usize = 1 << 20;
/// Elements of the triad's arrays one run covers.
const TRIAD_CHUNK: usize = 1 << 17;
const STENCIL_N: usize = 512;
const SPIN_STEPS: u64 = 200_000;
/// What one unit of work (one pass through the gate) should take alone on one core: each group's
/// unit is as many runs of its kernel as come nearest (measured before the rounds), so that
/// completions of different groups weigh alike.
const UNIT: Duration = Duration::from_millis(2);

/// The systems and their modes.
const SYSTEMS: [(&str, Mode); 4] = [
    ("elite/default", Mode::Default),
    ("elite/lcn", Mode::Lcn),
    ("elite/gang", Mode::Gang),
    ("elite/miss-balance", Mode::MissBalance),
];

/// The gated systems run through the cooperative gate as well (`ELITE_COSCHED_COOPERATIVE=1`).
const COOPERATIVE: [(&str, Mode); 3] = [
    ("elite/lcn+cooperative", Mode::Lcn),
    ("elite/gang+cooperative", Mode::Gang),
    ("elite/miss-balance+cooperative", Mode::MissBalance),
];

/// Which gate admits the groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    /// The runtime's ([`elite_rt::RuntimeBuilder::coschedule`]).
    Runtime,
    /// The coscheduler's, around each unit ([`Coscheduler::run`]).
    Cooperative,
}

/// Per group, the side rows of what a run saw of it: busy milliseconds per completed unit (its
/// units' length as run, contention and descheduling included; alone on a quiet core about
/// [`UNIT`]) and its class code under the gated systems (1 L, 2 LC, 3 C, 4 N, 0 none).
const GROUP_ROWS: [(&str, &str); 5] = [
    ("unit_ms_gemm", "class_gemm"),
    ("unit_ms_atax", "class_atax"),
    ("unit_ms_triad", "class_triad"),
    ("unit_ms_stencil", "class_stencil"),
    ("unit_ms_spin", "class_spin"),
];

/// The groups, in order; their side-row names.
const GROUPS: [(&str, &str); 5] = [
    ("gemm", "completions_gemm"),
    ("atax", "completions_atax"),
    ("triad", "completions_triad"),
    ("stencil", "completions_stencil"),
    ("spin", "completions_spin"),
];

/// One ULT's data and its kernel; a run covers one chunk (`chunk` turns round).
struct Ult {
    kernel: Kernel,
    chunk: usize,
}

/// The kernels.
enum Kernel {
    Gemm { a: Vec<f64>, b: Vec<f64>, c: Vec<f64> },
    Atax { m: Arc<Vec<f64>>, rows: std::ops::Range<usize>, x: Vec<f64>, tmp: Vec<f64>, y: Vec<f64> },
    Triad { a: Vec<f64>, b: Vec<f64>, c: Vec<f64> },
    Stencil { input: Vec<f64>, out: Vec<f64> },
    Spin,
}

fn fill(n: usize, seed: u64) -> Vec<f64> {
    (0..n).map(|i| ((i as u64 * 2654435761 + seed) % 1000) as f64 / 1000.0).collect()
}

fn checksum(v: &[f64]) -> u64 {
    v.iter().sum::<f64>().to_bits()
}

impl Kernel {
    fn new(group: usize, ult: usize, atax: &Arc<Vec<f64>>) -> Kernel {
        match group {
            0 => Kernel::Gemm {
                a: fill(GEMM_N * GEMM_N, 1),
                b: fill(GEMM_N * GEMM_N, 2),
                c: vec![0.0; GEMM_N * GEMM_N],
            },
            1 => {
                let half = ATAX_N / ULTS;
                Kernel::Atax {
                    m: atax.clone(),
                    rows: ult * half..(ult + 1) * half,
                    x: fill(ATAX_N, 3),
                    tmp: vec![0.0; ATAX_ROWS],
                    y: vec![0.0; ATAX_N],
                }
            }
            2 => Kernel::Triad { a: vec![0.0; TRIAD_N], b: fill(TRIAD_N, 4), c: fill(TRIAD_N, 5) },
            3 => Kernel::Stencil {
                input: fill(STENCIL_N * STENCIL_N, 6),
                out: vec![0.0; STENCIL_N * STENCIL_N],
            },
            _ => Kernel::Spin,
        }
    }

    /// Bytes one run moves (what the ULT declares per run).
    fn bytes(&self) -> u64 {
        let f = std::mem::size_of::<f64>() as u64;
        match self {
            Kernel::Gemm { .. } => 3 * (GEMM_N * GEMM_N) as u64 * f,
            Kernel::Atax { .. } => 2 * (ATAX_ROWS * ATAX_N) as u64 * f,
            Kernel::Triad { .. } => 3 * TRIAD_CHUNK as u64 * f,
            Kernel::Stencil { .. } => 2 * (STENCIL_N * STENCIL_N) as u64 * f,
            Kernel::Spin => 0,
        }
    }

    /// Bytes of data one ULT works on (its declared footprint; atax's shared matrix counted as
    /// the half it reads).
    fn data_bytes(&self) -> u64 {
        let f = std::mem::size_of::<f64>() as u64;
        match self {
            Kernel::Gemm { .. } => 3 * (GEMM_N * GEMM_N) as u64 * f,
            Kernel::Atax { rows, .. } => (rows.len() * ATAX_N) as u64 * f,
            Kernel::Triad { .. } => 3 * TRIAD_N as u64 * f,
            Kernel::Stencil { .. } => 2 * (STENCIL_N * STENCIL_N) as u64 * f,
            Kernel::Spin => 0,
        }
    }

    /// Chunks a ULT's data is run in.
    fn chunks(&self) -> usize {
        match self {
            Kernel::Atax { rows, .. } => rows.len() / ATAX_ROWS,
            Kernel::Triad { .. } => TRIAD_N / TRIAD_CHUNK,
            _ => 1,
        }
    }

    /// One run over chunk `chunk`; its answer.
    fn run(&mut self, chunk: usize) -> u64 {
        match self {
            Kernel::Gemm { a, b, c } => {
                let n = GEMM_N;
                c.iter_mut().for_each(|v| *v = 0.0);
                for i in 0..n {
                    for k in 0..n {
                        let aik = a[i * n + k];
                        let (row, brow) = (&mut c[i * n..(i + 1) * n], &b[k * n..(k + 1) * n]);
                        for (cv, bv) in row.iter_mut().zip(brow) {
                            *cv += aik * bv;
                        }
                    }
                }
                checksum(c)
            }
            Kernel::Atax { m, rows, x, tmp, y } => {
                let n = ATAX_N;
                let first = rows.start + chunk * ATAX_ROWS;
                let rows = first..first + ATAX_ROWS;
                y.iter_mut().for_each(|v| *v = 0.0);
                for (t, r) in tmp.iter_mut().zip(rows.clone()) {
                    *t = m[r * n..(r + 1) * n].iter().zip(x.iter()).map(|(a, b)| a * b).sum();
                }
                for (t, r) in tmp.iter().zip(rows) {
                    for (yv, a) in y.iter_mut().zip(&m[r * n..(r + 1) * n]) {
                        *yv += a * t;
                    }
                }
                checksum(y)
            }
            Kernel::Triad { a, b, c } => {
                let r = chunk * TRIAD_CHUNK..(chunk + 1) * TRIAD_CHUNK;
                for ((a, b), c) in a[r.clone()].iter_mut().zip(&b[r.clone()]).zip(&c[r.clone()]) {
                    *a = b + 3.0 * c;
                }
                checksum(&a[r.start..r.start + 4096]) ^ a[r.end - 1].to_bits()
            }
            Kernel::Stencil { input, out } => {
                let n = STENCIL_N;
                for i in 1..n - 1 {
                    for j in 1..n - 1 {
                        let k = i * n + j;
                        out[k] = 0.2 * (input[k] + input[k - 1] + input[k + 1] + input[k - n] + input[k + n]);
                    }
                }
                checksum(out)
            }
            Kernel::Spin => {
                let mut x = 0x9E37_79B9_7F4A_7C15u64;
                for _ in 0..SPIN_STEPS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                }
                std::hint::black_box(x)
            }
        }
    }
}

/// What every contender shares, measured once before the rounds: each ULT's answers per
/// chunk, each group's runs per unit, its rate alone on both processors, the host's bandwidth.
struct Setup {
    atax: Arc<Vec<f64>>,
    /// `answers[group][ult][chunk]`.
    answers: Vec<Vec<Vec<u64>>>,
    /// Kernel runs per unit, by group.
    reps: Vec<usize>,
    /// Units per second of each group alone on the 2-processor runtime (no gate).
    alone: Vec<f64>,
    bandwidth: f64,
    /// The private L2's and the last-level cache's sizes the classifier judges footprints by:
    /// the host topology's, as the coscheduler reads them when `caches` is not called.
    caches: (u64, u64),
}

impl Setup {
    fn new(alone_for: Duration) -> Result<Setup, String> {
        let atax = Arc::new(fill(ATAX_N * ATAX_N, 7));
        let mut answers = Vec::new();
        let mut reps = Vec::new();
        for g in 0..GROUPS.len() {
            let mut per_ult = Vec::new();
            let mut best = f64::MAX;
            for u in 0..ULTS {
                let mut k = Kernel::new(g, u, &atax);
                per_ult.push((0..k.chunks()).map(|c| k.run(c)).collect::<Vec<u64>>());
                for c in 0..k.chunks().min(4) {
                    let t = Instant::now();
                    std::hint::black_box(k.run(c));
                    best = best.min(t.elapsed().as_secs_f64());
                }
            }
            answers.push(per_ult);
            reps.push(((UNIT.as_secs_f64() / best.max(1e-9)).round() as usize).max(1));
        }
        let bandwidth = elite_rt::contention::stream_bandwidth(96 << 20, Duration::from_millis(20));
        let caches = elite_rt::contention::cache_sizes(&elite_affinity::Topology::detect());
        let mut setup = Setup { atax, answers, reps, alone: Vec::new(), bandwidth, caches };
        for (g, (name, _)) in GROUPS.iter().enumerate() {
            let Outcome { counts, wrong, .. } = run_groups(
                &setup,
                &[g],
                Mode::Default,
                Gate::Cooperative,
                alone_for,
                Duration::from_millis(10),
            )?;
            if wrong != 0 {
                return Err(format!("{name}: {wrong} wrong answers alone"));
            }
            setup.alone.push(counts[0] as f64 / alone_for.as_secs_f64());
        }
        Ok(setup)
    }
}

/// What one run of [`run_groups`] saw.
struct Outcome {
    /// Units completed before the deadline, per group.
    counts: Vec<u64>,
    /// Wrong answers, all groups.
    wrong: u64,
    /// Per group, the time its ULTs ran (the runtime's group stats).
    busy: Vec<Duration>,
    /// Per group, its class when the run ended (gated systems that classify).
    classes: Vec<Option<Class>>,
    /// Re-probes of LCN's, all groups (`GroupReport::reprobes`).
    reprobes: u32,
    /// The share of the processors' time (2 x the wall time from the spawns to the joins) in
    /// which no kernel ULT ran: the gate's gaps, the probe's idle processor, the ends.
    idle: f64,
    /// The process's CPU time over the same processors' time (`None` where the clock cannot
    /// be read).
    cpu: Option<f64>,
}

/// Runs the groups `groups` (indices into [`GROUPS`]) under `mode` with `gate` for `run` on a
/// 2-processor runtime.
fn run_groups(
    setup: &Setup,
    groups: &[usize],
    mode: Mode,
    gate: Gate,
    run: Duration,
    quantum: Duration,
) -> Result<Outcome, String> {
    let cs = Coscheduler::builder(mode).quantum(quantum).cores(2).bandwidth(setup.bandwidth).build();
    let rt = match gate {
        Gate::Runtime => build_runtime(elite_rt::Runtime::builder().processors(2).coschedule(&cs))?,
        Gate::Cooperative => elite_runtime(2)?,
    };
    if cs.caches() != setup.caches {
        return Err(format!(
            "the classifier judges by caches of {:?} bytes, the bench records {:?}",
            cs.caches(),
            setup.caches
        ));
    }
    let mut ults = Vec::new();
    for (i, &g) in groups.iter().enumerate() {
        let kernel = Kernel::new(g, 0, &setup.atax);
        let one = kernel.data_bytes();
        let all = if g == 1 { (ATAX_N * ATAX_N * 8) as u64 } else { ULTS as u64 * one };
        let group = elite_rt::Group::new(GROUPS[g].0);
        let index = cs.add_group(&group, one, all);
        debug_assert_eq!(index, i);
        for u in 0..ULTS {
            ults.push((i, g, u, group.clone(), Ult { kernel: Kernel::new(g, u, &setup.atax), chunk: 0 }));
        }
    }
    let done: Arc<Vec<AtomicU64>> = Arc::new(groups.iter().map(|_| AtomicU64::new(0)).collect());
    let wrong = Arc::new(AtomicU64::new(0));
    cs.start();
    let cpu_began = process_cpu_time();
    let began = Instant::now();
    let deadline = began + run;
    rt.block_on(|| {
        let handles: Vec<_> = ults
            .into_iter()
            .map(|(i, g, u, group, mut ult)| {
                let (cs, done, wrong) = (cs.clone(), done.clone(), wrong.clone());
                let answers = setup.answers[g][u].clone();
                let reps = setup.reps[g];
                let bytes = ult.kernel.bytes() * reps as u64;
                elite_rt::Builder::new().group(&group).spawn(move || {
                    while Instant::now() < deadline {
                        let mut unit = || {
                            let mut bad = 0;
                            for _ in 0..reps {
                                let chunks = ult.kernel.chunks();
                                if ult.kernel.run(ult.chunk) != answers[ult.chunk] {
                                    bad += 1;
                                }
                                ult.chunk = (ult.chunk + 1) % chunks;
                            }
                            bad
                        };
                        let bad = match gate {
                            Gate::Cooperative => cs.run(i, bytes, unit),
                            Gate::Runtime => {
                                let bad = unit();
                                elite_rt::contention::unit_done(bytes);
                                bad
                            }
                        };
                        wrong.fetch_add(bad, Ordering::Relaxed);
                        if Instant::now() <= deadline {
                            done[i].fetch_add(1, Ordering::Relaxed);
                        }
                        elite_rt::yield_now();
                    }
                })
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("cannot spawn a kernel ULT: {e}"))?;
        elite_rt::sleep(deadline.saturating_duration_since(Instant::now()));
        cs.stop();
        for h in handles {
            h.join().map_err(|_| "a kernel ULT panicked".to_string())?;
        }
        Ok::<(), String>(())
    })?;
    let wall = began.elapsed();
    let cpu = cpu_began
        .zip(process_cpu_time())
        .map(|(a, b)| b.saturating_sub(a).as_secs_f64() / (2.0 * wall.as_secs_f64()).max(1e-9));
    cs.stop();
    let stats = rt.stats();
    let busy: Vec<Duration> = groups
        .iter()
        .map(|&g| {
            let name = GROUPS[g].0;
            stats.groups.iter().filter(|s| s.group.name() == name).map(|s| s.busy).sum()
        })
        .collect();
    let ran: f64 = busy.iter().map(Duration::as_secs_f64).sum();
    let idle = (1.0 - ran / (2.0 * wall.as_secs_f64()).max(1e-9)).max(0.0);
    Ok(Outcome {
        counts: done.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
        wrong: wrong.load(Ordering::Relaxed),
        busy,
        classes: cs.report().iter().map(|r| r.class).collect(),
        reprobes: cs.report().iter().map(|r| r.reprobes).sum(),
        idle,
        cpu,
    })
}

/// One sample of `mode`: the total units completed; the per-group counts and the fairness as
/// side values.
fn sample(setup: &Setup, mode: Mode, gate: Gate, run: Duration, quantum: Duration) -> Result<Sample, String> {
    let all: Vec<usize> = (0..GROUPS.len()).collect();
    let Outcome { counts, wrong, busy, classes, reprobes, idle, cpu } =
        run_groups(setup, &all, mode, gate, run, quantum)?;
    for ((_, side), &c) in GROUPS.iter().zip(&counts) {
        record_side(side, c as f64);
    }
    for (((unit_ms, class), busy), (&c, group_class)) in
        GROUP_ROWS.iter().zip(&busy).zip(counts.iter().zip(&classes))
    {
        record_side(unit_ms, busy.as_secs_f64() * 1e3 / (c as f64).max(1.0));
        if mode != Mode::Default {
            record_side(class, group_class.map_or(0.0, class_code));
        }
    }
    if mode == Mode::Lcn {
        record_side("reprobes", f64::from(reprobes));
    }
    record_side("idle_share", idle);
    if let Some(cpu) = cpu {
        record_side("cpu_share", cpu);
    }
    // Normalized progress: each group's rate here over its rate alone on the machine.
    let progress: Vec<f64> = counts
        .iter()
        .zip(&setup.alone)
        .map(|(&c, &alone)| c as f64 / run.as_secs_f64() / alone.max(1e-9))
        .collect();
    record_side("cv_progress", coefficient_of_variation(&progress));
    record_side("weighted_speedup", progress.iter().sum());
    record_side("completions_ceiling", completions_ceiling(2.0 * run.as_secs_f64(), &counts, &busy));
    Ok(Sample::count(counts.iter().sum(), wrong))
}

/// The most units any schedule could have completed in `processor_seconds` of processor time if
/// every unit cost what the cheapest group's units cost as run (`busy[g] / counts[g]`, over the
/// groups that completed any): the total completions cannot exceed it unless co-scheduling
/// makes units cheaper than they ran here. 0 when no group completed a unit.
pub fn completions_ceiling(processor_seconds: f64, counts: &[u64], busy: &[Duration]) -> f64 {
    let cheapest = counts
        .iter()
        .zip(busy)
        .filter(|(&c, _)| c > 0)
        .map(|(&c, b)| b.as_secs_f64() / c as f64)
        .filter(|&unit| unit > 0.0)
        .fold(f64::INFINITY, f64::min);
    if cheapest.is_finite() {
        processor_seconds / cheapest
    } else {
        0.0
    }
}

/// The code of `class` in the `class_<group>` side rows.
fn class_code(class: Class) -> f64 {
    match class {
        Class::L => 1.0,
        Class::LC => 2.0,
        Class::C => 3.0,
        Class::N => 4.0,
    }
}

/// Standard deviation over mean (0 for an empty or all-zero list).
pub fn coefficient_of_variation(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n.max(1.0);
    if mean <= 0.0 {
        return 0.0;
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    var.sqrt() / mean
}

/// The benches of this file (the suite's registration takes them from here).
pub fn benches(ctx: &mut Context) -> Vec<Bench> {
    bench(ctx).into_iter().collect()
}

/// The bench, at 2 processors; `None` (with a note) on a one-CPU machine.
pub fn bench(ctx: &mut Context) -> Option<Bench> {
    if ctx.cpus < 2 {
        ctx.notes.push("cosched: contention needs 2 CPUs: left out".into());
        return None;
    }
    let run = if ctx.quick { RUN.1 } else { RUN.0 };
    let quantum = if ctx.quick { QUANTUM.1 } else { QUANTUM.0 };
    let setup = match Setup::new(if ctx.quick { RUN.1 / 4 } else { RUN.0 / 4 }) {
        Ok(setup) => Arc::new(setup),
        Err(why) => {
            ctx.notes.push(format!("cosched: contention: setup failed: {why}"));
            return None;
        }
    };
    ctx.notes.push(format!(
        "cosched: contention: host bandwidth {:.1} GB/s; classifier's caches L2 {} KiB, LLC {} KiB; kernel runs per unit {:?}; units/s alone {:?}",
        setup.bandwidth / 1e9,
        setup.caches.0 >> 10,
        setup.caches.1 >> 10,
        setup.reps,
        setup.alone.iter().map(|r| r.round()).collect::<Vec<_>>()
    ));
    let cooperative = std::env::var("ELITE_COSCHED_COOPERATIVE").is_ok_and(|v| v == "1");
    let gated = |mode| if mode == Mode::Default { Gate::Cooperative } else { Gate::Runtime };
    let contenders = SYSTEMS
        .iter()
        .map(|&(system, mode)| (system, mode, gated(mode)))
        .chain(
            COOPERATIVE
                .iter()
                .filter(|_| cooperative)
                .map(|&(system, mode)| (system, mode, Gate::Cooperative)),
        )
        .map(|(system, mode, gate)| {
            let setup = setup.clone();
            let params = Params::new(2)
                .with("run_ms", run.as_millis() as u64)
                .with("quantum_ms", quantum.as_millis() as u64)
                .with("l2_bytes", setup.caches.0)
                .with("llc_bytes", setup.caches.1);
            Contender::new(system, params, 0, move || sample(&setup, mode, gate, run, quantum))
        })
        .collect();
    Some(Bench {
        name: "contention",
        metric: Metric::Count("completions"),
        contenders,
        targets: vec![
            Target::Relative {
                subject: Subject::Each(&["elite/lcn"]),
                baseline: "elite/default",
                processors: 2,
                bound: Bound::AtLeast(1.05),
            },
            Target::Relative {
                subject: Subject::Each(&["elite/lcn"]),
                baseline: "elite/gang",
                processors: 2,
                bound: Bound::AtLeast(1.0),
            },
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficient_of_variation_of_equal_and_unequal_progress() {
        assert_eq!(coefficient_of_variation(&[2.0, 2.0, 2.0]), 0.0);
        assert!((coefficient_of_variation(&[1.0, 3.0]) - 0.5).abs() < 1e-12);
        assert_eq!(coefficient_of_variation(&[]), 0.0);
    }

    #[test]
    fn the_ceiling_is_the_processor_time_over_the_cheapest_unit() {
        let ms = Duration::from_millis;
        // Units of 2 ms, 4 ms and 1.5 ms as run: 6 s of processor time hold at most 4000 of the
        // cheapest.
        let c = completions_ceiling(6.0, &[100, 10, 20], &[ms(200), ms(40), ms(30)]);
        assert!((c - 4000.0).abs() < 1e-6, "{c}");
        // A group with no completion says nothing about its unit's cost.
        let c = completions_ceiling(6.0, &[0, 10], &[ms(1), ms(30)]);
        assert!((c - 2000.0).abs() < 1e-6, "{c}");
        assert_eq!(completions_ceiling(6.0, &[0, 0], &[ms(5), ms(5)]), 0.0);
        assert_eq!(completions_ceiling(6.0, &[], &[]), 0.0);
    }

    #[test]
    fn each_kernel_answers_the_same_twice() {
        let atax = Arc::new(fill(ATAX_N * ATAX_N, 7));
        for g in 0..GROUPS.len() {
            let mut k = Kernel::new(g, 0, &atax);
            let last = k.chunks() - 1;
            assert_eq!(k.run(last), k.run(last), "group {g}");
        }
    }
}
