//! # elite-grid: an adaptive-grid solver on ULTs ("active threads", ELiTE sections 2.3.5, 3.2)
//!
//! A reaction-diffusion problem on a locally refined quadtree, solved by chaotic relaxation with
//! one ULT per patch of cells: a ULT relaxes its patch when a neighbour wakes it, and wakes its
//! neighbours when its values moved. This crate is the solver; `examples/adaptive_grid.rs` of the
//! workspace is its command line (and its docs explain the method at length), and the
//! `elite-bench grid` suite runs [`experiment::measure`] the same way.
//!
//! ```
//! use elite_grid::active::SolveOptions;
//! use elite_grid::experiment::{measure, Config, Model};
//!
//! let problem = Model { level: 6 }.problem()?;
//! let config = Config { policy: "no-affinity".into(), prefetch: false, processors: 2 };
//! let m = measure(&problem, &SolveOptions::default(), &config, |_monitor| {})?;
//! assert!(m.ok(), "{:?}", m.failure());
//! println!("{:.1} M smoothing operations/s", m.rate() / 1e6);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Modules, bottom up: [`quadtree`] (the mesh), [`matrix`] (the discretisation, `b = A u*`, the
//! sequential Gauss-Seidel reference), [`layout`] (the unknowns and the patches' data blocks in
//! memory), [`activation`] (the doorbell each ULT sleeps on, and the termination detection),
//! [`active`] (the ULTs), [`experiment`] (policies, prefetch, checked measurements).

pub mod activation;
pub mod active;
pub mod experiment;
pub mod layout;
pub mod matrix;
pub mod quadtree;
pub mod rayon_peer;
