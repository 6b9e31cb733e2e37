//! The measurement of ELiTE's figure 3.2.2: the solver's smoothing rate under each scheduling
//! policy, with and without prefetch, at each processor count, every run checked.
//!
//! This is the one procedure that both this crate's `examples/adaptive_grid.rs` and the
//! `elite-bench grid` suite run; they differ only in how they repeat it and report it.
//!
//! ## Where the runtime's features plug in
//!
//! * **Policies.** [`POLICIES`] lists every policy the measurement tries, in the figure's
//!   order. [`runtime_builder`] turns a name into a [`RuntimeBuilder`] with that policy, or says
//!   the runtime does not have it ([`RunError::Unavailable`]); callers print that and go on.
//! * **Prefetch.** [`SolveOptions::prefetch`] makes each ULT declare its patch's block (one
//!   contiguous block, see [`crate::layout`]) through [`declare_data_block`]
//!   (`elite_rt::set_data_block`); [`PREFETCH_AVAILABLE`] tells callers whether a run with
//!   prefetch differs from one without, so that they can leave the prefetch runs out where it
//!   does not.

use crate::active::{measure_costs, ActiveSolver, Costs, Monitor, Solution, SolveError, SolveOptions};
use crate::matrix::{Layer, Problem};
use crate::quadtree::{Feature, Quadtree, Refinement, RefinementError};
use crate::rayon_peer::RayonSolver;
use elite_rt::{BuildError, ProcessorStats, RuntimeBuilder};
use std::fmt;
use std::time::{Duration, Instant};

/// Every scheduling policy the measurement tries, in the order of ELiTE's figure 3.2.2 (plus
/// section 3.3's `gravity`). The first is the baseline the others are compared with.
pub const POLICIES: &[&str] =
    &["no-affinity", "virtual-time", "minimum-misses", "reload-transient", "gravity", "auto"];

/// The policy every rate is compared with.
pub const BASELINE: &str = "no-affinity";

/// Whether the runtime can prefetch a ULT's declared data (ELiTE section 2.3.5): it can
/// (`elite_rt::set_data_block`, `RuntimeBuilder::prefetch`).
pub const PREFETCH_AVAILABLE: bool = true;

pub use crate::active::declare_data_block;

/// The stack size of the solver's ULTs. A patch's ULT needs little stack (its frames and two
/// arrays of up to 64 `f64`), but debug builds need more for the same code.
pub const STACK_SIZE: usize = if cfg!(debug_assertions) { 32 * 1024 } else { 16 * 1024 };

/// The problem the measurement solves, by its finest level.
///
/// `-ε² Δu + u = f` on the unit square, `u = 0` on the boundary, with `ε = 2 · 2^-level`: the
/// solution has an interior layer of width `ε` across a circle (centre `(0.52, 0.47)`, radius
/// `0.3`), and the mesh is refined towards the circle from a uniform `8 × 8` grid until the cells
/// are `ε / 2` wide, in a band `ε` plus one cell side wide on each side. `u*` is [`Layer`] with
/// width `ε`, and `f` is manufactured (`b = A u*`, see [`crate::matrix`]).
///
/// The reaction term makes the matrix strictly diagonally dominant, by `h² / ε²` in a row of
/// side `h`, so `||A⁻¹||_inf <= 4` at every level and a relaxation converges in a number of
/// sweeps that does not grow with the level; without it (a pure Poisson problem) single-level
/// relaxation needs a number of sweeps proportional to the number of cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    /// The finest level, `MIN_LEVEL..=MAX_LEVEL`.
    pub level: u8,
}

impl Model {
    /// The smallest level accepted.
    pub const MIN_LEVEL: u8 = 5;
    /// The largest level accepted (about 30 million cells; the ULT limit of guarded stacks comes
    /// much earlier, see [`max_guarded_ults`]).
    pub const MAX_LEVEL: u8 = 20;

    /// The layer's width, `ε`.
    pub fn epsilon(&self) -> f64 {
        2.0 / (1u64 << self.level) as f64
    }

    /// The circle the mesh is refined towards: centre and radius.
    const CIRCLE: (f64, f64, f64) = (0.52, 0.47, 0.3);

    /// The mesh's refinement, if the level is in range.
    fn refinement(&self) -> Result<Refinement, RefinementError> {
        if !(Self::MIN_LEVEL..=Self::MAX_LEVEL).contains(&self.level) {
            return Err(RefinementError::Levels { base_level: 3, max_level: self.level });
        }
        let (cx, cy, r) = Self::CIRCLE;
        Ok(Refinement {
            base_level: 3,
            max_level: self.level,
            feature: Feature::Circle { cx, cy, r },
            band: 1.0,
            halo: self.epsilon(),
        })
    }

    /// Builds the mesh and the linear system.
    pub fn problem(&self) -> Result<Problem, RefinementError> {
        let tree = Quadtree::build(&self.refinement()?)?;
        let eps = self.epsilon();
        let (cx, cy, r) = Self::CIRCLE;
        let layer = Layer { cx, cy, r, width: eps };
        Ok(Problem::manufactured(tree, 1.0 / (eps * eps), |x, y| layer.value(x, y)))
    }

    /// At most the cells of [`problem`](Self::problem), counted in a fraction of the time it
    /// takes (see [`Refinement::leaves_at_least`]).
    pub fn cells_at_least(&self) -> Result<u64, RefinementError> {
        self.refinement()?.leaves_at_least()
    }
}

/// Refuses, before the problem is built, a `model` cut into patches of `patch` cells that makes
/// more ULTs than guarded stacks allow ([`max_guarded_ults`]): building the largest meshes takes
/// minutes and gigabytes that [`measure`] would refuse afterwards. `Ok` when the limit is
/// unknown or the level out of range (for [`Model::problem`] to refuse).
pub fn check_ults(model: &Model, patch: usize) -> Result<(), RunError> {
    let (Some(max), Ok(cells)) = (max_guarded_ults(), model.cells_at_least()) else {
        return Ok(());
    };
    let ults = usize::try_from(cells).unwrap_or(usize::MAX).div_ceil(patch.max(1));
    if ults > max {
        return Err(RunError::TooManyUlts { ults, max, at_least: true });
    }
    Ok(())
}

/// The most ULTs with guarded stacks this process can keep alive: each costs two kernel mappings
/// of the `vm.max_map_count` allowed (65530 by default), less 2000 left for everything else.
/// `None` if the limit cannot be read.
pub fn max_guarded_ults() -> Option<usize> {
    let limit: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count").ok()?.trim().parse().ok()?;
    Some(limit.saturating_sub(2000) / 2)
}

/// One configuration of the measurement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The scheduling policy's name (one of [`POLICIES`]).
    pub policy: String,
    /// Whether ULTs declare their data for prefetching.
    pub prefetch: bool,
    /// Processors of the runtime.
    pub processors: usize,
}

/// The [`Config::policy`] of the sequential reference's measurements.
pub const SEQUENTIAL: &str = "sequential";

/// The [`Config::policy`] of the rayon peer's measurements.
pub const RAYON: &str = "rayon";

impl Config {
    /// The system's name in reports: `elite/<policy>`, with `+prefetch` when prefetching;
    /// `sequential` and `rayon` for the peers.
    pub fn system(&self) -> String {
        match self.policy.as_str() {
            SEQUENTIAL | RAYON => self.policy.clone(),
            _ => format!("elite/{}{}", self.policy, if self.prefetch { "+prefetch" } else { "" }),
        }
    }
}

/// The patch size of a run: given, or chosen from costs measured on this machine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PatchChoice {
    /// Cells per patch.
    pub size: usize,
    /// The measured costs it was chosen from (`None` when it was given).
    pub costs: Option<Costs>,
}

/// Chooses the patch size for `problem` at up to `processors` processors from costs measured
/// now ([`measure_costs`], [`Costs::patch_size`]), made larger where needed for the patches to
/// fit the guarded stacks ([`max_guarded_ults`]).
pub fn choose_patch(problem: &Problem, processors: usize) -> Result<PatchChoice, RunError> {
    let costs = measure_costs(problem).map_err(RunError::Build)?;
    let mut size = costs.patch_size(problem.len(), processors);
    if let Some(max) = max_guarded_ults() {
        size = size.max(problem.len().div_ceil(max.max(1)));
    }
    Ok(PatchChoice { size: size.min(crate::layout::MAX_PATCH), costs: Some(costs) })
}

/// Why a configuration did not produce a measurement.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// The runtime has no such feature yet: not an error of the run, callers report and go on.
    Unavailable(String),
    /// A policy name that is not in [`POLICIES`].
    UnknownPolicy(String),
    /// The runtime refused its configuration.
    Build(BuildError),
    /// More ULTs than guarded stacks fit under `vm.max_map_count`.
    TooManyUlts {
        /// ULTs the solve needs (at least, when `at_least`).
        ults: usize,
        /// The most that fit.
        max: usize,
        /// Whether `ults` is a lower bound, counted before the problem was built ([`check_ults`]).
        at_least: bool,
    },
    /// The solve failed.
    Solve(SolveError),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Unavailable(what) => write!(f, "not available yet: {what}"),
            RunError::UnknownPolicy(name) => {
                write!(f, "unknown policy {name:?}, expected one of {}", POLICIES.join(", "))
            }
            RunError::Build(e) => write!(f, "runtime: {e}"),
            RunError::TooManyUlts { ults, max, at_least } => write!(
                f,
                "{}{ults} ULTs (patches) but only {max} guarded stacks fit under vm.max_map_count: \
                 use a smaller size or larger patches",
                if *at_least { "at least " } else { "" }
            ),
            RunError::Solve(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RunError {}

impl From<SolveError> for RunError {
    fn from(e: SolveError) -> Self {
        RunError::Solve(e)
    }
}

/// A runtime builder with `policy`, or why there is none.
pub fn runtime_builder(policy: &str) -> Result<RuntimeBuilder, RunError> {
    let builder = elite_rt::Runtime::builder();
    match policy.parse::<elite_rt::Policy>() {
        Ok(p) => Ok(builder.policy(p)),
        Err(_) if POLICIES.contains(&policy) => {
            Err(RunError::Unavailable(format!("elite-rt has no policy {policy:?} yet")))
        }
        Err(_) => Err(RunError::UnknownPolicy(policy.to_string())),
    }
}

/// One checked solve.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// What ran: a [`Config`], or the sequential reference (policy `"sequential"`).
    pub config: Config,
    /// Unknowns.
    pub cells: usize,
    /// ULTs (patches); 0 for the sequential reference.
    pub ults: usize,
    /// Smoothing operations (relaxations of one unknown).
    pub relaxations: u64,
    /// Patch sweeps.
    pub sweeps: u64,
    /// Patch sweeps that waited for a neighbour.
    pub sleeps: u64,
    /// Waits at the gate (see [`Solution::gate_waits`]).
    pub gate_waits: u64,
    /// Waits of the closing sweeps (see [`Solution::closing_waits`]).
    pub closing_waits: u64,
    /// Sweeps of the whole mesh.
    pub iterations: u64,
    /// Time of the solve proper.
    pub elapsed: Duration,
    /// The process's CPU time over the solve (see [`Solution::cpu`]).
    pub cpu: Option<Duration>,
    /// `||b - A u||_inf`.
    pub residual: f64,
    /// What the termination guarantees for it.
    pub residual_bound: f64,
    /// `||u - u*||_inf`.
    pub error: f64,
    /// What that residual bound guarantees for it: `||A⁻¹||_inf` (bounded by the strict diagonal
    /// dominance) times the residual bound.
    pub error_bound: f64,
    /// The runtime's counters over the whole run (spawn to join), all processors added.
    pub stats: ProcessorStats,
    /// Under `auto`, its decisions ([`elite_rt::RuntimeStats::auto`]); empty otherwise.
    pub auto: Vec<elite_rt::policy::AutoDecision>,
}

impl Measurement {
    /// Smoothing operations per second.
    pub fn rate(&self) -> f64 {
        self.relaxations as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Smoothing operations per second of the process's CPU time (see [`Solution::cpu`]).
    pub fn cpu_rate(&self) -> Option<f64> {
        self.cpu.map(|cpu| self.relaxations as f64 / cpu.as_secs_f64().max(1e-9))
    }

    /// Whether the answer is right: residual and error within what the solver guarantees.
    pub fn ok(&self) -> bool {
        self.residual <= self.residual_bound && self.error <= self.error_bound
    }

    /// Why the answer is wrong, if it is.
    pub fn failure(&self) -> Option<String> {
        (!self.ok()).then(|| {
            format!(
                "residual {:.3e} (bound {:.3e}), error {:.3e} (bound {:.3e})",
                self.residual, self.residual_bound, self.error, self.error_bound
            )
        })
    }

    fn checked(
        problem: &Problem,
        config: Config,
        ults: usize,
        s: Solution,
        stats: ProcessorStats,
        tolerance: f64,
    ) -> Self {
        let residual_bound = problem.residual_bound(tolerance);
        Measurement {
            config,
            cells: problem.len(),
            ults,
            relaxations: s.relaxations,
            sweeps: s.sweeps,
            sleeps: s.sleeps,
            gate_waits: s.gate_waits,
            closing_waits: s.closing_waits,
            iterations: s.iterations,
            elapsed: s.elapsed,
            cpu: s.cpu,
            residual: problem.residual(&s.values),
            residual_bound,
            error: problem.error(&s.values),
            error_bound: problem.inverse_norm_bound().map_or(f64::INFINITY, |n| n * residual_bound),
            stats,
            auto: Vec::new(),
        }
    }
}

/// Solves `problem` under `config` on a fresh runtime and checks the answer. `on_start` gets a
/// [`Monitor`] of the solve before it starts (for a progress display).
pub fn measure(
    problem: &Problem,
    options: &SolveOptions,
    config: &Config,
    on_start: impl FnOnce(Monitor),
) -> Result<Measurement, RunError> {
    let policy = runtime_builder(&config.policy)?;
    measure_with(problem, options, config, policy, on_start)
}

/// [`measure`] on a runtime built from `builder` (such as one of `auto` with settings of its
/// own, [`elite_rt::policy::Auto::remember`]) instead of from `config.policy`, which then only
/// names what ran; the other settings of `config` (processors, prefetch) are applied as in
/// [`measure`].
pub fn measure_with(
    problem: &Problem,
    options: &SolveOptions,
    config: &Config,
    builder: elite_rt::RuntimeBuilder,
    on_start: impl FnOnce(Monitor),
) -> Result<Measurement, RunError> {
    if config.prefetch && !PREFETCH_AVAILABLE {
        return Err(RunError::Unavailable("elite-rt has no prefetch of declared data yet".into()));
    }
    let options = SolveOptions { prefetch: config.prefetch, ..options.clone() };
    let solver = ActiveSolver::new(problem, &options)?;
    if let Some(max) = max_guarded_ults() {
        if solver.patches() > max {
            return Err(RunError::TooManyUlts { ults: solver.patches(), max, at_least: false });
        }
    }
    let rt = builder
        .prefetch(config.prefetch)
        .processors(config.processors)
        .stack_size(STACK_SIZE)
        .build()
        .map_err(RunError::Build)?;
    let ults = solver.patches();
    on_start(solver.monitor());
    let solution = solver.solve(&rt)?;
    let all = rt.stats();
    drop(rt);
    let stats = all.total();
    let mut m = Measurement::checked(problem, config.clone(), ults, solution, stats, options.tolerance);
    m.auto = all.auto;
    Ok(m)
}

/// The sequential reference: Gauss-Seidel sweeps in Morton order on one OS thread, without ULTs,
/// until no unknown moves by more than `tolerance` in a sweep. Checked like [`measure`].
pub fn measure_sequential(problem: &Problem, tolerance: f64) -> Measurement {
    let mut u = vec![0.0; problem.len()];
    let (start, cpu_start) = (Instant::now(), crate::active::process_cpu_time());
    let sweeps = problem.gauss_seidel(&mut u, tolerance, usize::MAX);
    let elapsed = start.elapsed();
    let cpu = crate::active::process_cpu_time().zip(cpu_start).map(|(end, start)| end.saturating_sub(start));
    let solution = Solution {
        values: u,
        relaxations: (sweeps * problem.len()) as u64,
        sweeps: sweeps as u64,
        sleeps: 0,
        gate_waits: 0,
        closing_waits: 0,
        iterations: sweeps as u64,
        ults: 0,
        elapsed,
        cpu,
    };
    let config = Config { policy: SEQUENTIAL.into(), prefetch: false, processors: 1 };
    Measurement::checked(problem, config, 0, solution, ProcessorStats::default(), tolerance)
}

/// The rayon peer ([`crate::rayon_peer`]) on `pool`, with the patches of `options`. Checked like
/// [`measure`]; `processors` is the pool's thread count. Build one pool per thread count and
/// reuse it: a pool's threads start when it is built, not at each solve.
pub fn measure_rayon(
    problem: &Problem,
    options: &SolveOptions,
    pool: &rayon::ThreadPool,
) -> Result<Measurement, RunError> {
    let solution = RayonSolver::new(problem, options)?.solve(pool)?;
    let config = Config { policy: RAYON.into(), prefetch: false, processors: pool.current_num_threads() };
    Ok(Measurement::checked(problem, config, 0, solution, ProcessorStats::default(), options.tolerance))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_refined_and_strictly_dominant() {
        let p = Model { level: 7 }.problem().unwrap();
        assert_eq!(p.tree.finest_level(), 7);
        // ||A^-1|| <= 1 / min margin = 1 / (h_min² / ε²) = 4.
        let bound = p.inverse_norm_bound().unwrap();
        assert!((bound - 4.0).abs() < 1e-9, "{bound}");
        assert!(Model { level: 4 }.problem().is_err());
        assert!(Model { level: 21 }.problem().is_err());
    }

    /// The count before the build is a lower bound of the cells, close to them.
    #[test]
    fn cells_at_least_bounds_the_problem() {
        for level in Model::MIN_LEVEL..=10 {
            let model = Model { level };
            let (bound, cells) = (model.cells_at_least().unwrap(), model.problem().unwrap().len() as u64);
            assert!(bound <= cells && bound * 10 >= cells * 8, "level {level}: {bound} of {cells}");
        }
        assert!(Model { level: 21 }.cells_at_least().is_err());
    }

    /// A mesh that makes too many ULTs is refused before it is built (`--size 20` took minutes
    /// and gigabytes of building before the refusal).
    #[test]
    fn too_many_ults_are_refused_before_the_build() {
        let model = Model { level: 14 };
        let bound = model.cells_at_least().unwrap() as usize;
        match (check_ults(&model, 1), max_guarded_ults()) {
            (Err(e @ RunError::TooManyUlts { ults, max, at_least: true }), Some(limit)) => {
                assert_eq!((ults, max), (bound, limit));
                assert!(ults > max);
                assert!(
                    e.to_string().starts_with(&format!("at least {bound} ULTs (patches) but only {max}")),
                    "{e}"
                );
            }
            (Ok(()), Some(limit)) => assert!(bound <= limit, "{bound} ULTs passed a limit of {limit}"),
            (Ok(()), None) => {}
            (other, limit) => panic!("{other:?} with a limit of {limit:?}"),
        }
        assert!(check_ults(&Model { level: 5 }, 64).is_ok());
        assert!(check_ults(&Model { level: 99 }, 1).is_ok(), "for problem() to refuse");
        assert!(check_ults(&Model { level: 5 }, 0).is_ok(), "a patch of 0 counts as 1");
    }

    #[test]
    fn policies_are_tried_by_name() {
        assert_eq!(POLICIES[0], BASELINE);
        assert!(runtime_builder("no-affinity").is_ok());
        for name in &POLICIES[1..] {
            // Each either builds (once elite-rt has it) or says it is not available yet.
            match runtime_builder(name) {
                Ok(_) | Err(RunError::Unavailable(_)) => {}
                Err(e) => panic!("{name}: {e}"),
            }
        }
        let e = runtime_builder("lifo").unwrap_err();
        assert!(matches!(e, RunError::UnknownPolicy(_)));
        assert!(e.to_string().contains("no-affinity"), "{e}");
    }

    #[test]
    fn measurements_are_checked() {
        let p = Model { level: 6 }.problem().unwrap();
        let options = SolveOptions::default();
        let config = Config { policy: BASELINE.into(), prefetch: false, processors: 2 };
        let mut watched = false;
        let m = measure(&p, &options, &config, |_| watched = true).unwrap();
        assert!(watched);
        assert!(m.ok(), "{:?}", m.failure());
        assert_eq!(m.config.system(), "elite/no-affinity");
        assert!(m.rate() > 0.0 && m.stats.switches > 0);
        let s = measure_sequential(&p, options.tolerance);
        assert!(s.ok(), "{:?}", s.failure());
        assert_eq!(s.config.system(), "sequential");
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let r = measure_rayon(&p, &options, &pool).unwrap();
            assert!(r.ok(), "rayon at {threads}: {:?}", r.failure());
            assert_eq!((r.config.system(), r.config.processors), ("rayon".to_string(), threads));
            // The rayon peer stops at `S`; the ULT solver at `S` or at most `LAG - 1` sweeps
            // later (see `active`, "Closing"), on the same patches.
            let extra = m.iterations.checked_sub(r.iterations).expect("the ULT solver stops at S or later");
            assert!(extra < crate::active::LAG, "{} sweeps past S", extra);
            assert_eq!(r.relaxations + extra * r.cells as u64, m.relaxations);
        }
        // A wrong answer is caught.
        let wrong = Measurement { residual: s.residual_bound * 2.0, ..s };
        assert!(!wrong.ok() && wrong.failure().is_some());
        let prefetch = Config { prefetch: true, ..config };
        if !PREFETCH_AVAILABLE {
            assert!(matches!(measure(&p, &options, &prefetch, |_| {}), Err(RunError::Unavailable(_))));
        }
    }
}
