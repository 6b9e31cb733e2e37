//! The one place the runtime takes its atomics from.
//!
//! Every lock-free protocol in the crate names its atomics through this module, so a model checker
//! (loom, behind `cfg(loom)`) can be swapped in without touching the protocols themselves.

pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
