//! The adaptive-grid problem of `elite-grid` solved across MPI ranks (`mpiexec -n N`), with the
//! one-machine answer check on the gathered solution.
//!
//! What it does (a first version: `elite-grid`'s multicolour sweeps per rank, boundary exchange
//! between colours):
//!
//! - every rank builds the same problem (`experiment::Model`) and the same patches
//!   (`layout::Patches`, contiguous runs of cells in the mesh's Morton order); rank `r` owns a
//!   contiguous range of patches holding about `cells / N` cells (balanced by cells);
//! - a sweep relaxes the colours in turn, as `elite-grid`'s `rayon_peer` does: for each colour,
//!   each rank relaxes its patches of that colour, one ULT per patch, then sends each
//!   neighbouring rank the cells of that colour the neighbour reads (found from the matrix's
//!   rows: exactly the couplings across the cut) and receives the ones it reads, before the next
//!   colour. Every value a relaxation reads is the one the multicolour iteration prescribes, so
//!   the result is bit for bit that of one machine running the same sweeps;
//! - convergence is global: after each sweep, an `all_reduce` (max) of the ranks' largest change;
//!   the ranks stop after the first sweep whose global largest change is at most the tolerance
//!   (the rule of `rayon_peer`);
//! - rank 0 gathers the solution and checks it as `elite-grid`'s experiments do (residual and
//!   error within the bounds the tolerance gives), and that it equals, bit for bit, the same
//!   number of multicolour sweeps run on rank 0 alone.
//!
//! ```sh
//! export UCX_TLS=self,sm UCX_NET_DEVICES=lo HWLOC_COMPONENTS=-gl HYDRA_IFACE=lo   # loopback only
//! cargo build --release --example adaptive_grid_mpi
//! mpiexec -n 2 target/release/examples/adaptive_grid_mpi --level 9 --json grid-mpi.json
//! ```
//!
//! Only rank 0 prints and writes the JSON document (suite `mpi`, bench `adaptive_grid_mpi`, system
//! `elite-mpi`, metric `solve_s`: the median over `--runs` of the solve's time on rank 0, from a
//! barrier to the convergence; `docs/bench-json.md`). The exit status is 1 when the answer is
//! wrong, 2 for a command-line mistake.

use elite_grid::experiment::Model;
use elite_grid::layout::{Patches, Values};
use elite_grid::matrix::Problem;
use elite_mpi::{Op, World};
use serde_json::json;
use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: adaptive_grid_mpi [--level L] [--patch N] [--tolerance T] \
[--processors N] [--runs N] [--max-sweeps N] [--json FILE]
  --level L        the mesh's finest level (default 9)
  --patch N        cells per patch, i.e. per ULT (default 128)
  --tolerance T    stop after the first sweep that moves no unknown by more (default 1e-8)
  --processors N   processors of each rank's runtime (default 1)
  --runs N         solves, timed; the median is reported (default 1)
  --max-sweeps N   give up after this many sweeps (default 100000)
  --json FILE      write the JSON document (rank 0)";

struct Args {
    level: u8,
    patch: usize,
    tolerance: f64,
    processors: usize,
    runs: usize,
    max_sweeps: u64,
    json: Option<String>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        level: 9,
        patch: 128,
        tolerance: 1e-8,
        processors: 1,
        runs: 1,
        max_sweeps: 100_000,
        json: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_string());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}\n{USAGE}");
        match flag.as_str() {
            "--level" => a.level = value.parse().map_err(|e| bad(&e))?,
            "--patch" => a.patch = value.parse().map_err(|e| bad(&e))?,
            "--tolerance" => a.tolerance = value.parse().map_err(|e| bad(&e))?,
            "--processors" => a.processors = value.parse().map_err(|e| bad(&e))?,
            "--runs" => a.runs = value.parse().map_err(|e| bad(&e))?,
            "--max-sweeps" => a.max_sweeps = value.parse().map_err(|e| bad(&e))?,
            "--json" => a.json = Some(value.clone()),
            _ => return Err(format!("unknown argument {flag}\n{USAGE}")),
        }
    }
    if a.patch == 0 || a.processors == 0 || a.runs == 0 || a.tolerance.is_nan() || a.tolerance <= 0.0 {
        return Err(format!("--patch, --processors, --runs and --tolerance must be positive\n{USAGE}"));
    }
    Ok(a)
}

/// Who owns what, and what crosses the cut.
struct Partition {
    /// The patches of this rank, by colour.
    mine_by_colour: Vec<Vec<usize>>,
    /// The cells of each rank: `cells[r]..cells[r + 1]`.
    cells: Vec<usize>,
    /// Per neighbouring rank: the cells this rank sends it, and the ones it receives from it, by
    /// colour (ascending cell order on both sides).
    links: Vec<Link>,
}

struct Link {
    rank: usize,
    send: Vec<Vec<usize>>,
    recv: Vec<Vec<usize>>,
}

fn partition(problem: &Problem, patches: &Patches, rank: usize, size: usize) -> Partition {
    let n = problem.len();
    // Patches are contiguous runs of cells, in order; cut between patches near r * n / size.
    let mut cells = vec![0usize];
    let mut patch_cut = vec![0usize];
    let mut next = 1;
    for p in 0..patches.count() {
        let patch = patches.patch(p);
        assert_eq!(
            patch.first(),
            if p == 0 { 0 } else { patches.patch(p - 1).first() + patches.patch(p - 1).len() }
        );
        let end = patch.first() + patch.len();
        while next < size && end >= next * n / size {
            cells.push(end);
            patch_cut.push(p + 1);
            next += 1;
        }
    }
    while cells.len() <= size {
        cells.push(n);
        patch_cut.push(patches.count());
    }
    let owner_of_cell = |i: usize| cells.partition_point(|&c| c <= i) - 1;
    let mut cell_colour = vec![0usize; n];
    for p in 0..patches.count() {
        let patch = patches.patch(p);
        for c in &mut cell_colour[patch.first()..patch.first() + patch.len()] {
            *c = patches.colour(p);
        }
    }
    let colours = patches.colours();
    let mut mine_by_colour = vec![Vec::new(); colours];
    for p in patch_cut[rank]..patch_cut[rank + 1] {
        mine_by_colour[patches.colour(p)].push(p);
    }
    // send[q]: my cells that a row of q reads; recv[q]: q's cells that a row of mine reads.
    let mut send: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); size];
    let mut recv: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); size];
    for k in 0..n {
        let q = owner_of_cell(k);
        for (l, _) in problem.matrix.row(k) {
            let o = owner_of_cell(l);
            if q != rank && o == rank {
                send[q].insert(l);
            }
            if q == rank && o != rank {
                recv[o].insert(l);
            }
        }
    }
    let by_colour = |set: &BTreeSet<usize>| {
        let mut v = vec![Vec::new(); colours];
        for &i in set {
            v[cell_colour[i]].push(i);
        }
        v
    };
    let links = (0..size)
        .filter(|&q| q != rank && (!send[q].is_empty() || !recv[q].is_empty()))
        .map(|q| Link { rank: q, send: by_colour(&send[q]), recv: by_colour(&recv[q]) })
        .collect();
    Partition { mine_by_colour, cells, links }
}

/// The outcome of one solve on this rank.
struct Solved {
    sweeps: u64,
    elapsed: Duration,
    messages: u64,
}

/// Runs the multicolour sweeps on this rank's patches, exchanging boundary cells between colours,
/// until the global largest change of a sweep is at most `tolerance`.
fn solve(
    world: &World,
    patches: &Arc<Patches>,
    part: &Partition,
    values: &Arc<Values>,
    tolerance: f64,
    max_sweeps: u64,
) -> Result<Solved, String> {
    let start = Instant::now();
    let mut sweeps = 0u64;
    let mut messages = 0u64;
    loop {
        let mut drift = 0.0f64;
        for (colour, mine) in part.mine_by_colour.iter().enumerate() {
            // One ULT per patch of this colour (patches of one colour are not neighbours).
            let hs: Vec<_> = mine
                .iter()
                .map(|&p| {
                    let (patches, values) = (patches.clone(), values.clone());
                    elite_rt::spawn(move || patches.patch(p).relax(&values))
                })
                .collect();
            for h in hs {
                drift = drift.max(h.join().map_err(|_| "a patch's ULT panicked".to_string())?);
            }
            // The boundary cells of this colour, to and from each neighbouring rank.
            let tag = colour as i32;
            let mut sends = Vec::new();
            for link in &part.links {
                let cells = &link.send[colour];
                if !cells.is_empty() {
                    let data: Vec<f64> = cells.iter().map(|&i| values.get(i)).collect();
                    sends.push(world.isend(data, link.rank, tag).map_err(|e| e.to_string())?);
                    messages += 1;
                }
            }
            for link in &part.links {
                let cells = &link.recv[colour];
                if !cells.is_empty() {
                    let mut buf = vec![0.0f64; cells.len()];
                    let st = world.recv_into(&mut buf, link.rank, tag).map_err(|e| e.to_string())?;
                    if st.count() != cells.len() {
                        return Err(format!(
                            "rank {} sent {} cells, {} expected",
                            link.rank,
                            st.count(),
                            cells.len()
                        ));
                    }
                    for (&i, &v) in cells.iter().zip(&buf) {
                        values.set(i, v);
                    }
                }
            }
            for s in sends {
                s.wait().map_err(|e| e.to_string())?;
            }
        }
        sweeps += 1;
        let mut global = [0.0f64];
        world.all_reduce(&[drift], &mut global, Op::max()).map_err(|e| e.to_string())?;
        if global[0] <= tolerance {
            return Ok(Solved { sweeps, elapsed: start.elapsed(), messages });
        }
        if sweeps >= max_sweeps {
            return Err(format!("no convergence in {max_sweeps} sweeps (largest change {:.3e})", global[0]));
        }
    }
}

/// The same multicolour sweeps on one process, for `sweeps` sweeps: the reference.
fn sweep_alone(problem: &Problem, patches: &Patches, sweeps: u64) -> Vec<f64> {
    let values = Values::new(&vec![0.0; problem.len()]);
    let mut by_colour = vec![Vec::new(); patches.colours()];
    for p in 0..patches.count() {
        by_colour[patches.colour(p)].push(p);
    }
    for _ in 0..sweeps {
        for colour in &by_colour {
            for &p in colour {
                patches.patch(p).relax(&values);
            }
        }
    }
    values.to_vec()
}

/// The document's `machine` object (`docs/bench-json.md`).
fn machine() -> serde_json::Value {
    let topology = elite_affinity::Topology::detect();
    let cache_of_level = |level: u8| topology.caches_of(0).find(|c| c.level == level).map(|c| c.size);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(|| "unknown".to_string(), |(_, m)| m.trim().to_string());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".to_string(), |k| k.trim().to_string());
    json!({
        "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "cpu_model": model,
        "kernel": kernel,
        "l2_bytes": cache_of_level(2),
        "l3_bytes": cache_of_level(3),
        "pmu": elite_affinity::HardwareSource::open(elite_affinity::CounterEvent::CacheMisses).is_ok(),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mpi = match elite_mpi::init(elite_rt::Runtime::builder().processors(a.processors)) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("adaptive_grid_mpi: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (rank, size) = (mpi.rank(), mpi.size());
    let problem = match (Model { level: a.level }).problem() {
        Ok(p) => Arc::new(p),
        Err(e) => {
            eprintln!("adaptive_grid_mpi: --level {}: {e}", a.level);
            return ExitCode::from(2);
        }
    };
    let patches = Arc::new(Patches::new(&problem, a.patch.min(elite_grid::layout::MAX_PATCH)));
    let part = Arc::new(partition(&problem, &patches, rank, size));
    let world = mpi.world();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..a.runs {
        let values = Arc::new(Values::new(&vec![0.0; problem.len()]));
        let (w, p, pt, v) = (world.clone(), patches.clone(), part.clone(), values.clone());
        let (tol, max) = (a.tolerance, a.max_sweeps);
        let r = mpi.block_on(move || {
            w.barrier().map_err(|e| e.to_string())?;
            solve(&w, &p, &pt, &v, tol, max)
        });
        match r {
            Ok(s) => {
                times.push(s.elapsed.as_secs_f64());
                last = Some((s, values));
            }
            Err(e) => {
                eprintln!("adaptive_grid_mpi: rank {rank}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let (solved, values) = last.expect("at least one run");
    // Gather the owned ranges on rank 0.
    let (lo, hi) = (part.cells[rank], part.cells[rank + 1]);
    let mine: Vec<f64> = (lo..hi).map(|i| values.get(i)).collect();
    let (w, pt) = (world.clone(), part.clone());
    let gathered = mpi.block_on(move || -> Result<Option<Vec<f64>>, String> {
        if rank != 0 {
            w.send_slice(&mine, 0, 10_000).map_err(|e| e.to_string())?;
            return Ok(None);
        }
        let mut all = vec![0.0f64; *pt.cells.last().unwrap_or(&0)];
        all[lo..hi].copy_from_slice(&mine);
        for r in 1..w.size() {
            let (a, b) = (pt.cells[r], pt.cells[r + 1]);
            w.recv_into(&mut all[a..b], r, 10_000).map_err(|e| e.to_string())?;
        }
        Ok(Some(all))
    });
    let all = match gathered {
        Ok(Some(all)) => all,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("adaptive_grid_mpi: gathering: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The one-machine check (elite-grid's experiments): residual and error within the bounds.
    let residual = problem.residual(&all);
    let residual_bound = problem.residual_bound(a.tolerance);
    let error = problem.error(&all);
    let error_bound = problem.inverse_norm_bound().map_or(f64::INFINITY, |n| n * residual_bound);
    let reference = sweep_alone(&problem, &patches, solved.sweeps);
    let same = reference.iter().zip(&all).all(|(x, y)| x.to_bits() == y.to_bits());
    let ok = residual <= residual_bound && error <= error_bound && same;
    let solve_s = median(times.clone());
    println!(
        "adaptive_grid_mpi: {size} rank(s) x {} processor(s), level {}, {} cells, {} patches ({} colours), \
         {} sweeps, {} messages on rank 0, solve {:.3} s (median of {}), residual {:.3e} (bound {:.3e}), \
         error {:.3e} (bound {:.3e}), same as one process: {same}: {}",
        a.processors,
        a.level,
        problem.len(),
        patches.count(),
        patches.colours(),
        solved.sweeps,
        solved.messages,
        solve_s,
        times.len(),
        residual,
        residual_bound,
        error,
        error_bound,
        if ok { "ok" } else { "WRONG" }
    );
    if let Some(path) = &a.json {
        let (min, max) = times.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
        let doc = json!({
            "suite": "mpi",
            "machine": machine(),
            "results": [{
                "bench": "adaptive_grid_mpi", "system": "elite-mpi", "metric": "solve_s",
                "runs": times.len(), "ok": ok, "median": solve_s, "min": min, "max": max,
                "params": { "ranks": size, "processors": a.processors, "level": a.level,
                    "patch": patches.size(), "cells": problem.len(), "tolerance": a.tolerance,
                    "sweeps": solved.sweeps, "residual": residual, "residual_bound": residual_bound,
                    "error": error, "error_bound": error_bound, "same_as_one_process": same },
            }],
        });
        if let Err(e) = std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap_or_default()) {
            eprintln!("adaptive_grid_mpi: writing {path}: {e}");
            return ExitCode::FAILURE;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
