//! Facade crate.
pub use elite_affinity;
pub use elite_rt;
