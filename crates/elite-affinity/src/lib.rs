//! Where the elite runtime's processors live and what their caches hold: the machine's topology,
//! pinning worker threads to CPUs, the cache model of ELiTE (section 3.1), and per-processor
//! sources of cache-miss counts.
//!
//! ```
//! use elite_affinity::{pin_current_thread, AnySource, CacheModel, CounterSource, Footprint, RunInfo, Topology};
//!
//! // The machine as this thread may use it, read from sysfs: CPUs on cores in NUMA nodes, and
//! // the caches they share.
//! let machine = Topology::detect();
//! println!("{machine:#}"); // "1 node x 2 processors (sysfs on CPUs 0,1)", then caches, ...
//!
//! // A made-up shape for experiments, laid round-robin over the machine's CPUs.
//! let topology: Topology = "2 nodes x 2 cores, 2 MiB L2 per core, 32 MiB L3 per node".parse()?;
//! assert_eq!((topology.num_processors(), topology.node_of(3)), (4, 1));
//! // Processor 0 steals from the processors sharing a cache with it, its node, then the rest.
//! assert_eq!(topology.distance_groups(0), &[vec![1], vec![2, 3]]);
//!
//! // The cache model of the largest cache private to a core: tables built once.
//! let model = CacheModel::for_cache(&topology.model_cache())?;
//! assert_eq!(model.lines(), 32768);
//!
//! // One pinned worker thread per processor, each with its own counter source.
//! let workers: Vec<_> = topology
//!     .processors()
//!     .iter()
//!     .map(|p| {
//!         let (cpu, index, model) = (p.cpu, p.index, model.clone());
//!         std::thread::spawn(move || {
//!             pin_current_thread(cpu)?;
//!             // Opened on the thread it counts: the hardware counter where there is a PMU,
//!             // the estimator otherwise ("estimated (no PMU: ...)").
//!             let mut source = AnySource::detect(&model);
//!             // The processor loop, for each run of a ULT (here one ULT with 64 KiB of data):
//!             let mut ult = Footprint::EMPTY;
//!             for _ in 0..3 {
//!                 let clock = source.begin_run();
//!                 let valid = ult.valid_on(&model, index, clock);
//!                 // ... resume the ULT until it switches back ...
//!                 let misses = source.end_run(&RunInfo::new(1, 64 << 10, valid));
//!                 ult.record_run(&model, index, valid, misses, source.clock());
//!             }
//!             Ok::<_, elite_affinity::PinError>(source.kind().to_string())
//!         })
//!     })
//!     .collect();
//! for worker in workers {
//!     println!("{}", worker.join().unwrap()?);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Topology
//!
//! [`Topology::detect`] reads Linux sysfs (`/sys/devices/system`): online CPUs restricted to the
//! calling thread's affinity mask, their cores (SMT siblings), caches (`cpu*/cache/index*`: level,
//! kind, size, line size, sharers), NUMA nodes and their distance matrix. What sysfs lacks (a VM
//! may show no cache or node directory) is assumed and said in
//! [`assumptions`](Topology::assumptions); where sysfs cannot be read at all the result is one
//! node of the allowed CPUs ([`TopologySource::Fallback`]). With the cargo feature `hwloc`,
//! `Topology::detect_hwloc` builds the same topology through the hwloc library (the `hwloc2`
//! crate; needs `libhwloc-dev` 2.x). [`Topology::synthetic`] builds a shape from a spec such as
//! `"2 nodes x 2 cores x 2 threads, 2 MiB L2 per core, 32 MiB L3 per node"`; a spec that does not
//! parse is an error that says what was expected where.
//!
//! What the scheduler asks on its hot path is precomputed and only indexed:
//! [`distance_groups`](Topology::distance_groups) (the victims of a thief, nearest first: sharers
//! of each cache from the lowest level up, the rest of the node, then the other nodes by NUMA
//! distance), [`node_of`](Topology::node_of), [`processor`](Topology::processor).
//! [`model_cache`](Topology::model_cache) picks the cache the cache model describes: the largest
//! private to a core, with a stated fallback.
//!
//! # The cache model
//!
//! [`CacheModel`] implements the Markov model of ELiTE section 3.1 for a cache of `N` lines: the
//! footprint after a run, the lines still valid after foreign misses, and the reload transient.
//! [`closed_form`] has the exact expressions (checked in the tests against powers of the explicit
//! transition matrices); `CacheModel` tabulates them once (a few thousand entries) so that
//! each call on the hot path is a few loads and multiplications, with the error bounds its docs
//! state. [`Footprint`] is what a ULT carries for it (16 bytes).
//!
//! # Counter sources
//!
//! A [`CounterSource`] per processor gives the misses of each run and a miss clock:
//! [`HardwareSource`] (`perf_event_open` through the `perf-event2` crate; `rdpmc` through the mmap page where the
//! kernel allows it, `read(2)` otherwise), [`EstimatedSource`] (from the footprint a ULT declared
//! and the cache model), [`ScriptedSource`] (for tests). [`AnySource::detect`] picks the hardware
//! counter when it opens and the estimator otherwise; [`CounterSource::kind`] says which, for the
//! runtime's `stats()`. **The machines this crate is developed on have no PMU**: the hardware path
//! is tested here only for its fallback (opening fails cleanly and says why), its decoding on
//! synthetic data, and its open / mmap / read path with a software event.
//!
//! Types that later versions may extend ([`ProcessorInfo`], [`CacheInfo`], [`Assumption`],
//! [`TopologySource`], [`SourceKind`], ...) are `#[non_exhaustive]`.

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
pub use pin::{current_cpu, online_cpus, pin_current_thread, PinError, SavedMask};
pub use topology::{
    Assumption, CacheInfo, CacheKind, ModelCache, ModelCacheChoice, ProcessorInfo, Topology, TopologyError,
    TopologySource, MAX_PROCESSORS,
};
