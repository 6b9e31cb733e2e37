//! # elite-grid: an adaptive-grid solver on ULTs ("active threads", ELiTE sections 2.3.5, 3.2)
//!
//! A reaction-diffusion problem on a locally refined quadtree, solved by multicolour Gauss-Seidel
//! with one ULT per patch of cells: a ULT sweeps its patch as soon as the neighbours it reads have
//! finished the sweeps it needs, and signals its neighbours when it is done, so the work and the
//! answer are the same under every schedule. Beside it, [`rayon_peer`] runs the same sweeps the
//! way a rayon user would (colour by colour over `par_iter`), and
//! [`matrix::Problem::gauss_seidel`] is the sequential reference. This crate is the solver;
//! `examples/adaptive_grid.rs` of this crate is its command line (and its docs explain the
//! method at length), and the `elite-bench grid` suite runs [`experiment::measure`] the same way.
//!
//! ```
//! use elite_grid::active::SolveOptions;
//! use elite_grid::experiment::{measure, Config, Model};
//!
//! let problem = Model { level: 6 }.problem()?;
//! let config = Config { policy: "no-affinity".into(), prefetch: false, processors: 2 };
//! // The patch size would be chosen by `experiment::choose_patch`; 64 cells suit this small mesh.
//! let options = SolveOptions { patch_size: 64, ..SolveOptions::default() };
//! let m = measure(&problem, &options, &config, |_monitor| {})?;
//! assert!(m.ok(), "{:?}", m.failure());
//! println!("{:.1} M smoothing operations/s", m.rate() / 1e6);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Modules, bottom up: [`quadtree`] (the mesh), [`matrix`] (the discretisation, `b = A u*`, the
//! sequential Gauss-Seidel reference), [`layout`] (the unknowns, the patches' data blocks in
//! memory, their colouring), [`active`] (the ULTs, their dataflow and termination, the costs that
//! choose the patch size), [`rayon_peer`] (the same sweeps on rayon), [`experiment`] (policies,
//! prefetch, checked measurements of all three).

// Under `cfg(loom)` (the model checker's build, in which elite-rt has no runtime) only the
// counting protocols are built, with their models (see `counts`).
#[cfg(not(loom))]
pub mod active;
mod counts;
#[cfg(not(loom))]
pub mod experiment;
#[cfg(not(loom))]
pub mod layout;
#[cfg(not(loom))]
pub mod matrix;
#[cfg(not(loom))]
pub mod quadtree;
#[cfg(not(loom))]
pub mod rayon_peer;
