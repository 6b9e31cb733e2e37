//! Where the elite runtime's processors live: the machine's topology, and pinning worker threads
//! to CPUs.
//!
//! ```
//! use elite_affinity::{pin_current_thread, Topology};
//!
//! // The machine as this thread may use it: CPUs grouped into NUMA nodes, read from sysfs.
//! let machine = Topology::detect();
//! println!("{machine}"); // e.g. "1 node x 2 processors (sysfs on CPUs 0,1)"
//!
//! // A made-up shape for experiments, laid round-robin over the machine's CPUs.
//! let topology: Topology = "2 nodes x 2 processors".parse()?;
//! assert_eq!(topology.num_processors(), 4);
//! assert_eq!(topology.node_of(3), 1);
//! // Processor 0 steals from its own node first, then from the rest.
//! assert_eq!(topology.distance_groups(0), &[vec![1], vec![2, 3]]);
//!
//! // One pinned worker thread per processor.
//! let workers: Vec<_> = topology
//!     .processors()
//!     .iter()
//!     .map(|p| {
//!         let cpu = p.cpu;
//!         std::thread::spawn(move || pin_current_thread(cpu))
//!     })
//!     .collect();
//! for worker in workers {
//!     worker.join().unwrap()?;
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Topology comes from Linux sysfs (`/sys/devices/system`), restricted to the calling thread's
//! affinity mask; on other systems, or where sysfs cannot be read, [`Topology::detect`] falls back
//! to one node of the CPUs the thread may use. Later versions add cache domains, NUMA distances
//! and an hwloc source behind a feature; [`ProcessorInfo`] and [`TopologySource`] are
//! `#[non_exhaustive]` so that this does not break readers.

mod counters;
#[cfg(feature = "hwloc")]
mod hwloc;
mod model;
mod pin;
mod synthetic;
mod sysfs;
mod topology;

pub use counters::{
    AnySource, CounterEvent, CounterSource, EstimatedSource, HardwareSource, OpenError, ReadAccess, RunInfo,
    ScriptedSource, SourceKind,
};
#[cfg(feature = "hwloc")]
pub use hwloc::HwlocError;
pub use model::{closed_form, CacheModel, Footprint, ModelError, RELOAD_ERROR_BOUND};
pub use pin::{online_cpus, pin_current_thread, PinError};
pub use topology::{
    Assumption, CacheInfo, CacheKind, ModelCache, ModelCacheChoice, ProcessorInfo, Topology, TopologyError,
    TopologySource, MAX_PROCESSORS,
};
