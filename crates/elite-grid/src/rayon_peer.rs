//! The rayon peer: the same multicolour Gauss-Seidel sweeps as [`crate::active`], the way a rayon
//! user writes them.
//!
//! The problem is cut into the same patches and coloured the same way ([`crate::layout`]). A
//! sweep relaxes the patches of colour 0 with `par_iter`, then those of colour 1, and so on: the
//! patches of one colour are never neighbours, so they may run at once, and the join at the end
//! of each colour is the barrier before the next. The sweeps go on until one moves no unknown by
//! more than the tolerance (the largest change is a `reduce` of the patches'), so the peer stops
//! at `S`, as the ULT solver does once its solve closed in time (and at most three sweeps later
//! otherwise: its patches learn of `S` through the gate, see [`crate::active`], "Closing"). Both
//! compute the same values in their common sweeps, bit for bit.
//!
//! Why multicolour Gauss-Seidel and not block Jacobi (each patch a Gauss-Seidel sweep of its own
//! cells against the previous sweep's neighbour values, no colours, one `par_iter` per sweep):
//! Jacobi between patches converges more slowly (it uses no value of the current sweep across a
//! patch boundary) and needs a second copy of the unknowns; a colour costs one more join per
//! sweep, a few microseconds against milliseconds of work.
//!
//! ```
//! use elite_grid::active::SolveOptions;
//! use elite_grid::experiment::Model;
//! use elite_grid::rayon_peer::RayonSolver;
//!
//! let problem = Model { level: 6 }.problem()?;
//! let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build()?;
//! let s = RayonSolver::new(&problem, &SolveOptions::default())?.solve(&pool)?;
//! assert!(problem.residual(&s.values) <= problem.residual_bound(1e-9));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::active::{Solution, SolveError, SolveOptions};
use crate::layout::{Patches, Values};
use crate::matrix::Problem;
use rayon::prelude::*;
use std::time::Instant;

/// Cells a `par_iter` task relaxes at least (patches are grouped up to it), so that small
/// patches do not cost a task each.
const MIN_TASK_CELLS: usize = 512;

/// A multicolour Gauss-Seidel solve, set up and ready to run on a rayon pool.
#[derive(Debug)]
pub struct RayonSolver {
    patches: Patches,
    /// The patches of each colour, in order.
    by_colour: Vec<Vec<usize>>,
    cells: usize,
    options: SolveOptions,
}

impl RayonSolver {
    /// Lays out `problem` in patches of `options.patch_size` cells, coloured.
    pub fn new(problem: &Problem, options: &SolveOptions) -> Result<RayonSolver, SolveError> {
        options.validate()?;
        let patches = Patches::new(problem, options.patch_size);
        let mut by_colour = vec![Vec::new(); patches.colours()];
        for p in 0..patches.count() {
            by_colour[patches.colour(p)].push(p);
        }
        Ok(RayonSolver { patches, by_colour, cells: problem.len(), options: options.clone() })
    }

    /// Number of colours, i.e. of `par_iter` joins per sweep.
    pub fn colours(&self) -> usize {
        self.by_colour.len()
    }

    /// Sweeps from `u = 0` on `pool` until a sweep moves no unknown by more than the tolerance.
    /// `elapsed` covers the sweeps only (as for the ULT solver, the layout is not in it).
    pub fn solve(&self, pool: &rayon::ThreadPool) -> Result<Solution, SolveError> {
        self.sweep(pool, None)
    }

    /// Runs exactly `sweeps` sweeps from `u = 0` (for comparing with the ULT solver).
    pub fn run_sweeps(&self, pool: &rayon::ThreadPool, sweeps: u64) -> Result<Solution, SolveError> {
        self.sweep(pool, Some(sweeps))
    }

    fn sweep(&self, pool: &rayon::ThreadPool, fixed: Option<u64>) -> Result<Solution, SolveError> {
        let values = Values::new(&vec![0.0; self.cells]);
        let min_len = MIN_TASK_CELLS.div_ceil(self.patches.size()).max(1);
        let (start, cpu_start) = (Instant::now(), crate::active::process_cpu_time());
        let mut sweeps = 0u64;
        pool.install(|| loop {
            let mut drift = 0.0f64;
            for colour in &self.by_colour {
                let d = colour
                    .par_iter()
                    .with_min_len(min_len)
                    .map(|&p| self.patches.patch(p).relax(&values))
                    .reduce(|| 0.0, f64::max);
                drift = drift.max(d);
            }
            sweeps += 1;
            let done = match fixed {
                Some(n) => sweeps >= n,
                None => drift <= self.options.tolerance,
            };
            if done {
                return Ok(());
            }
            if start.elapsed() > self.options.time_limit {
                return Err(SolveError::TimeLimit {
                    limit: self.options.time_limit,
                    relaxations: sweeps * self.cells as u64,
                });
            }
        })?;
        let elapsed = start.elapsed();
        let cpu =
            crate::active::process_cpu_time().zip(cpu_start).map(|(end, start)| end.saturating_sub(start));
        Ok(Solution {
            values: values.to_vec(),
            relaxations: sweeps * self.cells as u64,
            sweeps: sweeps * self.patches.count() as u64,
            sleeps: 0,
            gate_waits: 0,
            closing_waits: 0,
            iterations: sweeps,
            ults: 0,
            elapsed,
            cpu,
        })
    }
}
