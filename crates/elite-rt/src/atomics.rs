//! The one place the runtime takes its atomics (and the parking of OS threads) from.
//!
//! Every lock-free protocol in the crate names its atomics through this module, so the model checker
//! loom can be swapped in without touching the protocols themselves: built with
//! `RUSTFLAGS="--cfg loom"`, the names below come from `loom` and the models in `loom_models` explore
//! every interleaving (up to a preemption bound) of the protocols that use them. The normal build
//! takes them from `std` at no cost.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU16, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

// Under loom only the protocols are built (see `lib.rs`), so some of these names go unused there.
#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU16, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// Parking and unparking of OS threads (the idle protocol in `park`).
pub(crate) mod thread {
    #[cfg(not(loom))]
    pub(crate) use std::thread::{park, park_timeout, Thread};

    #[cfg(loom)]
    pub(crate) use loom::thread::{park, Thread};

    /// Loom has no timed park. `park_timeout` may return at any moment (a timeout or a spurious
    /// wake-up), which a yield models: the caller must re-check its state either way.
    #[cfg(loom)]
    pub(crate) fn park_timeout(_timeout: std::time::Duration) {
        loom::thread::yield_now();
    }
}
