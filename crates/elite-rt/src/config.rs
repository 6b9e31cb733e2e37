//! Building a runtime: the [`RuntimeBuilder`], its validation, and [`BuildError`].

use crate::panics::{DetachedPanic, DetachedPanicHook};
use crate::policy::engine::CounterChoice;
use crate::policy::{Needs, Policy};
pub use crate::processor::budget::DEFAULT_COOP_BUDGET;
use crate::stack::{StackKind, DEFAULT_STACK_SIZE, MAX_STACK_SIZE, MIN_STACK_SIZE};
use crate::sync::SpinPolicy;
use crate::Runtime;
use elite_affinity::{ModelCache, Topology, TopologyError};
use std::fmt;
use std::time::Duration;

/// Most processors a runtime may have.
pub const MAX_PROCESSORS: usize = 4096;

/// Configures and builds a [`Runtime`].
///
/// ```
/// let rt = elite_rt::Runtime::builder()
///     .processors(2)
///     .stack_size(64 * 1024)
///     .build()
///     .expect("a valid configuration");
/// assert_eq!(rt.processors(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct RuntimeBuilder {
    processors: Option<usize>,
    topology: Option<String>,
    stack_size: usize,
    start_queue_limit: usize,
    node_start_queue_limit: usize,
    tcb_pool_limit: usize,
    huge_page_tcbs: bool,
    stack_pool_limit: usize,
    node_stack_pool_limit: usize,
    spin_rounds: usize,
    stack_kind: StackKind,
    policy: Policy,
    counters: CounterChoice,
    pin: bool,
    spin_policy: SpinPolicy,
    gather_locks: bool,
    steal_trials: bool,
    central: bool,
    prefetch: bool,
    detached_panic_hook: DetachedPanicHook,
    chaos: ChaosSetting,
    deadlock: crate::deadlock::DeadlockConfig,
    max_spare_threads: usize,
    spare_keep_alive: Duration,
    coop_budget: Option<u32>,
    places: crate::place::PlaceSettings,
    trace: crate::trace::TraceSetting,
    trace_buffer: usize,
    /// The summary's period: `None` as `ELITE_SCHEDTRACE` says, `Some(None)` off.
    schedtrace: Option<Option<Duration>>,
    coschedule: Option<crate::contention::Coscheduler>,
}

/// Whether the chaos mode is on: as `ELITE_CHAOS` says (the default), off, or with a seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChaosSetting {
    FromEnv,
    Off,
    Seed(u64),
}

/// The environment variable that turns the chaos mode on for every runtime whose builder did
/// not choose ([`RuntimeBuilder::chaos`]): a seed, decimal or `0x` hexadecimal.
pub const CHAOS_ENV: &str = "ELITE_CHAOS";

/// Default of [`RuntimeBuilder::max_spare_threads`].
pub(crate) const DEFAULT_MAX_SPARE_THREADS: usize = 64;

/// Largest [`RuntimeBuilder::max_spare_threads`].
pub const MAX_SPARE_THREADS: usize = 4096;

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            processors: None,
            topology: None,
            stack_size: DEFAULT_STACK_SIZE,
            start_queue_limit: 256,
            node_start_queue_limit: 4096,
            tcb_pool_limit: 256,
            huge_page_tcbs: true,
            stack_pool_limit: 64,
            node_stack_pool_limit: 1024,
            spin_rounds: 64,
            stack_kind: StackKind::Guarded,
            policy: Policy::no_affinity(),
            counters: CounterChoice::Detect,
            pin: true,
            spin_policy: SpinPolicy::Adaptive,
            gather_locks: true,
            steal_trials: true,
            central: false,
            prefetch: true,
            detached_panic_hook: DetachedPanicHook::print(),
            chaos: ChaosSetting::FromEnv,
            deadlock: crate::deadlock::DeadlockConfig::default(),
            max_spare_threads: DEFAULT_MAX_SPARE_THREADS,
            spare_keep_alive: Duration::from_secs(10),
            coop_budget: Some(DEFAULT_COOP_BUDGET),
            places: crate::place::PlaceSettings::default(),
            trace: crate::trace::TraceSetting::FromEnv,
            trace_buffer: crate::trace::DEFAULT_TRACE_BUFFER,
            schedtrace: None,
            coschedule: None,
        }
    }
}

/// A validated configuration, as the runtime uses it.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) topology: Topology,
    /// The cache the cache model describes (see `validate`).
    pub(crate) model_cache: ModelCache,
    pub(crate) stack_size: usize,
    pub(crate) start_queue_limit: usize,
    pub(crate) node_start_queue_limit: usize,
    pub(crate) tcb_pool_limit: usize,
    /// Whether TCB chunks may go into huge-page regions ([`RuntimeBuilder::huge_page_tcbs`]).
    pub(crate) huge_page_tcbs: bool,
    pub(crate) stack_pool_limit: usize,
    pub(crate) node_stack_pool_limit: usize,
    pub(crate) spin_rounds: usize,
    pub(crate) stack_kind: StackKind,
    pub(crate) policy: Policy,
    /// `policy.hooks().needs()`, asked once.
    pub(crate) needs: Needs,
    pub(crate) counters: CounterChoice,
    pub(crate) pin: bool,
    pub(crate) spin_policy: SpinPolicy,
    /// Whether a saturated [`Mutex`](crate::sync::Mutex) gathers its contenders on one processor.
    pub(crate) gather_locks: bool,
    /// Whether a thief that keeps stealing measures whether its steals pay
    /// ([`RuntimeBuilder::steal_trials`]).
    pub(crate) steal_trials: bool,
    pub(crate) central: bool,
    /// Whether processors prefetch the data blocks ULTs declare (`crate::prefetch`).
    pub(crate) prefetch: bool,
    pub(crate) detached_panic_hook: DetachedPanicHook,
    /// The chaos mode's seed, if it is on (see `processor::chaos`).
    pub(crate) chaos: Option<u64>,
    pub(crate) deadlock: crate::deadlock::DeadlockConfig,
    pub(crate) max_spare_threads: usize,
    pub(crate) spare_keep_alive: Duration,
    /// Operations on the primitives per turn of a ULT (`processor::budget`); `None`: no budget.
    pub(crate) coop_budget: Option<u32>,
    /// Places and stealing (`crate::place`, `policy::places`).
    pub(crate) places: crate::place::PlaceSettings,
    /// Where the trace goes (`crate::trace`); `None`: no trace.
    pub(crate) trace: Option<std::path::PathBuf>,
    /// Events a processor's trace ring holds.
    pub(crate) trace_buffer: usize,
    /// The period of the summary on stderr (`trace::sched`); `None`: none.
    pub(crate) schedtrace: Option<Duration>,
    /// The coscheduler whose plan the runtime's gate follows (`contention::gate`), if any.
    pub(crate) coschedule: Option<crate::contention::Coscheduler>,
}

impl RuntimeBuilder {
    /// A builder with the defaults: one processor per CPU of the detected topology, 64 KiB guarded
    /// stacks, the No Affinity policy, counters detected (used only by policies that need misses).
    pub fn new() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// Number of processors (OS worker threads), `1..=4096`. Default: one per CPU of the detected
    /// topology. More processors than CPUs share CPUs round-robin.
    pub fn processors(mut self, n: usize) -> Self {
        self.processors = Some(n);
        self
    }

    /// A synthetic topology such as `"2x2"` or `"2 nodes x 2 processors"`, mapped onto the real
    /// CPUs, so the node level of the hierarchy is exercised on any machine. When
    /// [`processors`](Self::processors) is also set it must match.
    pub fn topology(mut self, spec: &str) -> Self {
        self.topology = Some(spec.to_string());
        self
    }

    /// Default stack size of ULTs in bytes, `8 KiB..=1 GiB` (see [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE)
    /// for what fits in small stacks), rounded up to whole pages.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// Entries a processor's start-queue holds before a spawn moves its oldest half to the node
    /// (default 256, at least 1).
    pub fn start_queue_limit(mut self, n: usize) -> Self {
        self.start_queue_limit = n;
        self
    }

    /// Entries a node's start-queue holds before what spills into it goes to the global queue
    /// (default 4096, at least 1).
    pub fn node_start_queue_limit(mut self, n: usize) -> Self {
        self.node_start_queue_limit = n;
        self
    }

    /// TCBs a processor keeps in its pool before a batch moves to the node (default 256, at least 2).
    ///
    /// A runtime keeps every TCB it allocated until it is dropped (384 bytes each, allocated 64 at
    /// a time): on the heap until they fill a huge page, then, unless
    /// [`huge_page_tcbs`](Self::huge_page_tcbs) says otherwise, in regions of one huge page each.
    pub fn tcb_pool_limit(mut self, n: usize) -> Self {
        self.tcb_pool_limit = n;
        self
    }

    /// Whether the TCBs allocated after the first huge page's worth go into regions of one huge
    /// page each, advised for transparent huge pages where the kernel has them (default `true`).
    ///
    /// A program holding many ULTs at once (hundreds of thousands spawned before they are
    /// joined) then touches a TCB at every spawn and join without missing the TLB. The cost is
    /// the kernel's: a huge page is zeroed whole at its first touch, which some virtual machines
    /// make several times slower than the same bytes in base pages (the host backing the page
    /// anew). So the runtime times each new region's first touch against what the same bytes
    /// cost in base pages (measured once per process) and maps no further regions once one cost
    /// more than twice that: its later TCBs go on the heap, as with `false`, which keeps every
    /// TCB there from the start. A runtime with fewer ULTs never maps a region either way.
    /// [`Runtime::stats`](crate::Runtime::stats) says how many TCBs are in regions and, if the
    /// runtime stopped mapping them, what the costly region took ([`TcbStats`](crate::TcbStats)).
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(1).huge_page_tcbs(false).build()?;
    /// let sum: u64 = rt.block_on(|| {
    ///     let handles: Vec<_> = (0..10_000u64).map(|i| elite_rt::spawn(move || i)).collect();
    ///     handles.into_iter().map(|h| h.join().unwrap()).sum()
    /// });
    /// assert_eq!(sum, 10_000 * 9_999 / 2);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn huge_page_tcbs(mut self, on: bool) -> Self {
        self.huge_page_tcbs = on;
        self
    }

    /// Stacks a processor keeps in its pool before a batch moves to the node (default 64, at least 2).
    pub fn stack_pool_limit(mut self, n: usize) -> Self {
        self.stack_pool_limit = n;
        self
    }

    /// Stacks a node keeps before returning memory to the system (default 1024, at least 1).
    pub fn node_stack_pool_limit(mut self, n: usize) -> Self {
        self.node_stack_pool_limit = n;
        self
    }

    /// Rounds an idle processor looks for work before it parks its OS thread (default 64, `0..=1_000_000`).
    pub fn spin_rounds(mut self, n: usize) -> Self {
        self.spin_rounds = n;
        self
    }

    /// Whether processors pin their OS threads to their CPUs (default true). A refused pin is
    /// counted, never fatal.
    pub fn pin_threads(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// How waiters on a contended [`Mutex`](crate::sync::Mutex) or
    /// [`RwLock`](crate::sync::RwLock) of ULTs of this runtime wait (default
    /// [`SpinPolicy::Adaptive`], ELiTE's two-phase rule). A [`SpinPolicy::Fixed`] count above
    /// 1 000 000 is an error.
    pub fn spin_policy(mut self, policy: SpinPolicy) -> Self {
        self.spin_policy = policy;
        self
    }

    /// Whether a [`Mutex`](crate::sync::Mutex) that its ULTs keep taking from several processors
    /// gathers them on one processor (default `true`; see "Gathering" in
    /// [`Mutex`](crate::sync::Mutex)'s docs): a ULT that meets such a saturated lock held, or
    /// biased to another processor, moves to the lock's home processor instead of spinning or
    /// revoking, and a processor whose ULTs went home pauses its stealing. With `false` a lock's
    /// contenders stay where they are.
    pub fn gather_locks(mut self, gather: bool) -> Self {
        self.gather_locks = gather;
        self
    }

    /// Whether an idle processor that keeps stealing finds out whether its steals pay (default
    /// `true`). A processor that stole at least 8 ULTs within 100 to 800 µs of idle steps stops
    /// stealing for as long again and compares the runtime's rate of ULT runs without its steals
    /// with the rate with them; when the rate without is not at least 3% lower, it steals nothing
    /// for a hold (1 ms, doubling at each such verdict in a row up to 16 ms; a ULT spawned
    /// anywhere ends it within 2 ms), else it steals as before and tries again only after a cool-down (16
    /// trials' lengths, doubling up to 1024). Short ULTs that talk to a ULT on another processor
    /// (workers waiting on a server's replies) then stay where their partner runs instead of
    /// being stolen back and forth; ULTs whose runs add up to parallel work keep being stolen.
    /// The trials and holds are counted in
    /// [`ProcessorStats::steal_trials`](crate::ProcessorStats::steal_trials) and
    /// [`steal_holds`](crate::ProcessorStats::steal_holds). Off in the chaos mode and in a
    /// `central` runtime. The rule and where it can be fooled: `docs/architecture.md`, "Steal
    /// trials".
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(2).steal_trials(false).build()?;
    /// assert_eq!(rt.block_on(|| elite_rt::spawn(|| 6 * 7).join().unwrap()), 42);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn steal_trials(mut self, on: bool) -> Self {
        self.steal_trials = on;
        self
    }

    /// **An ablation switch for experiments, not for production**: with `true` the runtime keeps
    /// one global set of structures instead of ELiTE's per-processor hierarchy — every spawn goes
    /// to the one global start-queue, every ready ULT to one global runqueue (no `next` slot, no
    /// stealing), and every TCB and stack comes from and goes back to one global pool, each behind
    /// its lock. The topology becomes a single node. ELiTE's figures 2.3 and 2.5 compare exactly
    /// this against the distributed structures (`elite-bench sync` reports it as `elite/central`).
    /// Wake-ups from outside the runtime still pass through a processor's wake-up stack. Default
    /// `false`.
    pub fn central(mut self, central: bool) -> Self {
        self.central = central;
        self
    }

    /// Whether the runtime prefetches the data blocks ULTs declare (default `true`; ELiTE 2.3.5):
    /// the processor loop, once it has chosen a ULT with a block to run, prefetches the stack
    /// lines the switch into it touches, and the control block of the ULT its runqueue would
    /// hand out next and, while the processor measures that this pays, that ULT's declared block
    /// (one run ahead, see `prefetch.rs`'s module docs, "Whether it pays"); a ULT that makes
    /// another ready on its own processor prefetches the woken one's stack lines. ULTs that
    /// declare no block ([`Builder::data`](crate::Builder::data),
    /// [`set_data_block`](crate::set_data_block)) cost one predictable branch either way; `false`
    /// turns the prefetches off for the ones that do (for measuring what they bring).
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(1).prefetch(false).build()?;
    /// assert_eq!(rt.block_on(|| elite_rt::Builder::new().data(&[0u8; 64][..]).spawn(|| 1).unwrap().join().unwrap()), 1);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn prefetch(mut self, prefetch: bool) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// The scheduling policy (default [`Policy::no_affinity`]): a [`Policy`], for example parsed
    /// from its name, or a policy type such as [`VirtualTime`](crate::policy::VirtualTime). See
    /// [`policy`](crate::policy) for what each does and when to pick which.
    ///
    /// ```
    /// use elite_rt::policy::{Policy, VirtualTime};
    ///
    /// let by_name: Policy = "reload-transient".parse()?;
    /// let rt = elite_rt::Runtime::builder().processors(1).policy(by_name).build()?;
    /// assert_eq!(rt.policy_name(), "reload-transient");
    /// let rt = elite_rt::Runtime::builder().processors(1).policy(VirtualTime).build()?;
    /// assert_eq!(rt.policy_name(), "virtual-time");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn policy(mut self, policy: impl Into<Policy>) -> Self {
        self.policy = policy.into();
        self
    }

    /// Where the cache misses of each run come from when the policy needs them (default
    /// [`CounterChoice::Detect`]: the hardware counter, else the estimator). Ignored by policies
    /// that need no misses: they open no source.
    pub fn counters(mut self, counters: CounterChoice) -> Self {
        self.counters = counters;
        self
    }

    /// What to do with the failure of a *detached* ULT: a panic (or a [`SpawnError`](crate::SpawnError)
    /// for a ULT that never got a stack) that no [`join`](crate::JoinHandle::join) will see,
    /// because the ULT's handle was dropped. The hook is called once per such ULT, when its
    /// outcome is freed: by the ULT itself as it exits when the handle was dropped first, or
    /// by the handle's drop when the ULT finished first. It may run on any processor, or on
    /// the thread that dropped the handle, concurrently with itself; keep it short.
    ///
    /// The default prints [`DetachedPanic`]'s `Display` line to stderr, for example
    /// `ULT 'worker' (id 5) panicked and was never joined: boom`, without the location: std's panic
    /// hook printed it when the panic happened (naming the processor's OS thread, `elite-p0`, ...).
    /// Joined ULTs and ULTs cancelled by the runtime's shutdown are never reported. A hook that
    /// panics aborts the process.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let rt = elite_rt::Runtime::builder()
    ///     .processors(1)
    ///     .detached_panic_hook(move |p| {
    ///         let who = p.thread().name().unwrap_or("?").to_owned();
    ///         log.lock().unwrap().push((who, p.payload_as_str().map(str::to_owned)));
    ///     })
    ///     .build()?;
    /// # std::panic::set_hook(Box::new(|_| {})); // keep the doctest's output quiet
    /// rt.block_on(|| {
    ///     let h = elite_rt::Builder::new().name("fire-and-forget".into()).spawn(|| panic!("oops"))?;
    ///     drop(h); // detached: the panic goes to the hook
    ///     Ok::<(), elite_rt::SpawnError>(())
    /// })?;
    /// // The report comes when the ULT exits, on its processor: wait for it.
    /// # let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    /// # while seen.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
    /// #     std::thread::sleep(std::time::Duration::from_millis(1));
    /// # }
    /// assert_eq!(*seen.lock().unwrap(), [("fire-and-forget".to_owned(), Some("oops".to_owned()))]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detached_panic_hook<F>(mut self, hook: F) -> Self
    where
        F: Fn(&DetachedPanic<'_>) + Send + Sync + 'static,
    {
        self.detached_panic_hook = DetachedPanicHook::new(hook);
        self
    }

    /// Runs the runtime in **chaos mode** with `seed`: a testing aid that makes the scheduler's
    /// decisions at random, so that a test meets interleavings the usual decisions never
    /// produce. Every yield migrates the ULT to another processor, one wake-up in two goes to a
    /// random processor instead of the policy's choice, the next ULT to run is picked at random
    /// (the runqueue's best or worst, or a never-started ULT), and ULTs yield at random at the
    /// synchronization primitives' decision points (a lock found contended, a wake-up
    /// delivered). [Pinned](crate::Builder::pinned) ULTs still never move. Programs stay
    /// correct under it, only slower; statistics and placement are what the dice made them.
    ///
    /// Without this call (or [`no_chaos`](Self::no_chaos)) the environment decides: with
    /// `ELITE_CHAOS=<seed>` set (decimal, or hexadecimal after `0x`), every runtime built runs in
    /// chaos mode with that seed; a value that is not a number fails [`build`](Self::build) with
    /// [`BuildError::Environment`]. `.ci/run` runs the test suite once that way.
    ///
    /// A seed fixes the decisions each processor makes, not how the operating system interleaves
    /// the processors' threads: on one processor, with no timers and no threads outside the
    /// runtime acting while ULTs run, a seed replays the same schedule; on more, a failure found
    /// with a seed may need several runs to recur. The cost when off is one predictable branch
    /// on the yield, wake and pick paths.
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(2).chaos(42).build()?;
    /// assert_eq!(rt.chaos_seed(), Some(42));
    /// let sum = rt.block_on(|| {
    ///     let hs: Vec<_> = (0..100u64)
    ///         .map(|i| elite_rt::spawn(move || { elite_rt::yield_now(); i }))
    ///         .collect();
    ///     hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    /// });
    /// assert_eq!(sum, 4950);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn chaos(mut self, seed: u64) -> Self {
        self.chaos = ChaosSetting::Seed(seed);
        self
    }

    /// Writes a trace of the schedule to the file at `path`, in the Trace Event Format that
    /// [Perfetto](https://ui.perfetto.dev) and `chrome://tracing` open: one track per processor
    /// with the runs of ULTs (and why each ended: a yield, a block with the object blocked on, a
    /// park, a sleep, an exit), the idle and parked spans, spawns, wake-ups with who woke whom
    /// (drawn as arrows) and the processor the policy chose, steals, and blocking calls'
    /// hand-offs. The file is written while the runtime runs and completed when it drops
    /// (a program that exits without dropping its runtime leaves the events flushed so far, in
    /// a file without its closing brackets, which Perfetto still opens).
    ///
    /// Without this call (or [`no_trace`](Self::no_trace)) the environment decides: with
    /// `ELITE_TRACE=<path>` set, the first runtime of the process writes there and every later
    /// one to `<stem>.<n>.<extension>` beside it (n = 2, 3, ...); a blank value fails
    /// [`build`](Self::build) with [`BuildError::Environment`]. A file that cannot be created
    /// fails it with [`BuildError::Trace`].
    ///
    /// Each processor records into a ring of [`trace_buffer`](Self::trace_buffer) events that it
    /// flushes at its loop's cold steps (every 64th round and before it idles); an event that
    /// finds the ring full is dropped and counted in the trace. Off, tracing costs nothing on the
    /// switch and wake paths; on, each event costs a clock read and a store (see
    /// `docs/tracing.md` in the repository for the measured cost and how to read a trace).
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("elite-doc-trace-{}.json", std::process::id()));
    /// let rt = elite_rt::Runtime::builder().processors(2).trace(&path).build()?;
    /// rt.block_on(|| elite_rt::spawn(|| elite_rt::yield_now()).join().unwrap());
    /// drop(rt); // completes the file
    /// let json = std::fs::read_to_string(&path).unwrap();
    /// assert!(json.contains("\"traceEvents\"") && json.contains("\"ph\":\"X\""));
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn trace(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.trace = crate::trace::TraceSetting::At(path.into());
        self
    }

    /// Keeps the trace off even when `ELITE_TRACE` is set.
    pub fn no_trace(mut self) -> Self {
        self.trace = crate::trace::TraceSetting::Off;
        self
    }

    /// Events each processor's trace ring holds between two flushes, `16..=16777216` (default
    /// 32768, 32 bytes each). Only used while tracing ([`trace`](Self::trace)).
    pub fn trace_buffer(mut self, events: usize) -> Self {
        self.trace_buffer = events;
        self
    }

    /// Prints a summary of the schedule on stderr every `period` (`1 ms..=1 h`, whole
    /// milliseconds), as Go's `GODEBUG=schedtrace=<ms>` does: a line for the runtime (processors
    /// parked, spare threads, blocking calls) and one per processor (runs, ULTs started, yields,
    /// queue lengths, wake-ups, steals, parks, whether it is parked). Without this call,
    /// `ELITE_SCHEDTRACE=<ms>` sets it; a value that is not a whole number of milliseconds from
    /// 1 to 3600000 fails [`build`](Self::build) with [`BuildError::Environment`]. The
    /// processors do nothing for it: a thread of the runtime reads their counters.
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder()
    ///     .processors(1)
    ///     .schedtrace(std::time::Duration::from_millis(100))
    ///     .build()?;
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn schedtrace(mut self, period: Duration) -> Self {
        self.schedtrace = Some(Some(period));
        self
    }

    /// Runs the groups of `coscheduler` as separate applications in this runtime: the runtime
    /// itself admits each group's ULTs to processors by the coscheduler's mode and quantum (LCN
    /// pairs, gang, miss balancing), so the program needs no
    /// [`Coscheduler::run`](crate::contention::Coscheduler::run) around its units.
    ///
    /// At each quantum the coscheduler's controller gives every bandwidth domain (a node of the
    /// topology: the processors that share a memory link and last-level cache) one slot of its
    /// plan, the domains' slots in turn, and each slot's groups their share of the domain's
    /// processors. A ULT of a coscheduled group that a processor does not admit when it is about
    /// to resume is not run there: it goes to a processor that admits its group, or waits until
    /// one does. Under LCN, N groups also fill processors that have nothing else to run. ULTs of
    /// other groups, or of none, run as usual. A quantum takes effect at the ULTs' switch
    /// points, so a group's ULTs should yield (or block) between units of work, and report each
    /// unit with [`contention::unit_done`](crate::contention::unit_done) so that the classes
    /// see their progress. At most
    /// [`MAX_GATED_GROUPS`](crate::contention::MAX_GATED_GROUPS) groups are gated.
    ///
    /// The coscheduler's `cores` becomes the size of a domain; start it after adding its groups
    /// (as without a runtime) and stop it when done; dropping the runtime stops it too. The
    /// default mode ([`Mode::Default`](crate::contention::Mode::Default)) gates nothing. A
    /// coscheduler serves one runtime: building a second runtime with it fails.
    ///
    /// ```
    /// use elite_rt::contention::{unit_done, Coscheduler, Mode};
    /// use std::time::Duration;
    ///
    /// let cs = Coscheduler::builder(Mode::Gang).quantum(Duration::from_millis(2)).build();
    /// let rt = elite_rt::Runtime::builder().processors(2).coschedule(&cs).build()?;
    /// let groups = [elite_rt::Group::new("a"), elite_rt::Group::new("b")];
    /// for g in &groups {
    ///     cs.add_group(g, 0, 0);
    /// }
    /// cs.start();
    /// rt.block_on(|| {
    ///     let ults: Vec<_> = groups
    ///         .iter()
    ///         .flat_map(|g| [g, g])
    ///         .map(|g| {
    ///             elite_rt::Builder::new().group(g).spawn(|| {
    ///                 for _ in 0..20 {
    ///                     std::hint::black_box((0..1000u64).sum::<u64>());
    ///                     unit_done(0);
    ///                     elite_rt::yield_now(); // a switch point: where the gate acts
    ///                 }
    ///             })
    ///         })
    ///         .collect::<Result<_, _>>()
    ///         .unwrap();
    ///     ults.into_iter().for_each(|u| u.join().unwrap());
    /// });
    /// cs.stop();
    /// assert_eq!(cs.report().iter().map(|g| g.completions).collect::<Vec<_>>(), [40, 40]);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn coschedule(mut self, coscheduler: &crate::contention::Coscheduler) -> Self {
        self.coschedule = Some(coscheduler.clone());
        self
    }

    pub(crate) fn deadlock_mut(&mut self) -> &mut crate::deadlock::DeadlockConfig {
        &mut self.deadlock
    }

    /// Keeps the chaos mode off even when `ELITE_CHAOS` is set: for a test that checks placement
    /// or exact counts, which the chaos mode randomizes on purpose.
    pub fn no_chaos(mut self) -> Self {
        self.chaos = ChaosSetting::Off;
        self
    }

    /// OS threads the runtime may keep beyond its processors for [`blocking`](crate::blocking)
    /// calls, `1..=4096` (default 64): spare threads parked until a call hands them a processor,
    /// plus threads inside a call. The runtime starts them as calls need them, never more than
    /// this; a call that finds every one of them inside a call waits in a queue (its processor
    /// runs other ULTs meanwhile) until one finishes, which then runs it. So at most this many
    /// blocking calls run at once, and the process has at most `processors + max_spare_threads`
    /// threads of this runtime, plus one for each ULT that waits in the middle of unwinding a
    /// panic while the others are taken (such a ULT keeps its own thread and cannot wait in the
    /// queue: the crate docs, [Panics](crate#panics)).
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(1).max_spare_threads(2).build()?;
    /// let v = rt.block_on(|| elite_rt::blocking(|| 6 * 7));
    /// assert_eq!(v, 42);
    /// let err = elite_rt::Runtime::builder().max_spare_threads(0).build().unwrap_err();
    /// assert!(err.to_string().contains("max_spare_threads"));
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn max_spare_threads(mut self, n: usize) -> Self {
        self.max_spare_threads = n;
        self
    }

    /// How long a spare thread of [`blocking`](crate::blocking) calls waits, parked, for a
    /// processor or a call before it exits, in `1 ms..=1 day` (default 10 s): a burst of calls
    /// leaves no more threads behind than this keeps. Whole milliseconds count.
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = elite_rt::Runtime::builder().spare_keep_alive(Duration::from_millis(500)).build()?;
    /// # drop(rt);
    /// let err = elite_rt::Runtime::builder().spare_keep_alive(Duration::ZERO).build().unwrap_err();
    /// assert!(err.to_string().contains("spare_keep_alive"));
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn spare_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.spare_keep_alive = keep_alive;
        self
    }

    /// The **cooperative budget**: how many operations on the [`sync`](crate::sync) primitives a
    /// ULT may make in one turn on its processor (from one switch into it to the next) before
    /// the next such operation yields first, as [`yield_now`](crate::yield_now) does (unless
    /// it is about to block anyway: its block is then the switch); `None` turns it off. Default `Some(`[`DEFAULT_COOP_BUDGET`]`)` (1024); `Some(n)` takes
    /// `1..=4294967295`.
    ///
    /// ULTs are not preempted: without a budget, a ULT that keeps calling operations that never
    /// block (polling a channel with `try_recv`, sending on an unbounded channel, taking a lock
    /// nobody else wants) holds its processor for as long as the loop lasts, and a ULT it made
    /// ready there (say, the receiver it sends to) does not run meanwhile; when the loop waits
    /// for that ULT it never ends, and an unbounded channel grows until memory runs out. With
    /// it, the loop makes way every `n` operations; alone on its processor, the yield costs a
    /// switch out and straight back in.
    ///
    /// Charged: a channel's sends and receives of every kind (`send`, `try_send`, `recv`,
    /// `try_recv`, `recv_timeout`, each step of `iter` and `try_iter`), `Mutex::lock` and
    /// `try_lock`, the `RwLock`'s `read`, `write`, `try_read` and `try_write`, the `Semaphore`'s
    /// acquires, `WaitGroup::wait`, and through them a `ReentrantLock`'s first `lock` or
    /// `try_lock` and each channel a `Select` tries. Releases, notifies and drops are not. So
    /// with the budget on, each charged call is a switch point (see [`caveats`](crate::caveats)),
    /// even one that never blocks. A loop that calls none of them still holds its processor: it
    /// yields on its own.
    ///
    /// ```
    /// use elite_rt::sync::mpsc;
    ///
    /// // One processor: the receiver runs only when the sending loop makes way.
    /// let rt = elite_rt::Runtime::builder().processors(1).coop_budget(Some(64)).build()?;
    /// let sent = rt.block_on(|| {
    ///     let (tx, rx) = mpsc::channel();
    ///     let receiver = elite_rt::spawn(move || rx.recv().unwrap()); // takes one, then leaves
    ///     let mut sent = 0u64;
    ///     while tx.send(1u8).is_ok() {
    ///         sent += 1; // until the receiver is gone: after at most one budget's worth
    ///     }
    ///     receiver.join().unwrap();
    ///     sent
    /// });
    /// assert!(sent <= 64);
    /// let err = elite_rt::Runtime::builder().coop_budget(Some(0)).build().unwrap_err();
    /// assert!(err.to_string().contains("coop_budget"));
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn coop_budget(mut self, budget: Option<u32>) -> Self {
        self.coop_budget = budget;
        self
    }

    /// **Work-stealing places** (LASSI): the processors of each place of this kind share one
    /// queue of ready ULTs, and a place whose queue is empty steals from a victim place.
    /// Default [`PlaceKind::Processor`](crate::PlaceKind::Processor): a queue per processor.
    ///
    /// The processors of a place take ready ULTs from its one runqueue (by the policy's keys,
    /// as a processor from its own) and put woken ULTs there; an idle processor whose place's
    /// queue is empty steals as usual ([`steal_order`](Self::steal_order)), from the other
    /// places' queues and every processor's start-queue. Start-queues, `next` slots and
    /// wake-up stacks stay per processor. Checked when the runtime is built: a cache level some
    /// processor lacks is an error. On a `central` runtime it changes nothing (one queue
    /// already). A strict place ([`PlaceMode::Strict`](crate::PlaceMode::Strict)) must then be
    /// made of whole work-stealing places, and a ULT cannot be
    /// [pinned](crate::Builder::pinned): such spawns return
    /// [`SpawnError::Unsupported`](crate::SpawnError::Unsupported).
    ///
    /// ```
    /// use elite_rt::PlaceKind;
    /// let rt = elite_rt::Runtime::builder()
    ///     .topology("2 nodes x 2 cores, 16 MiB L3 per node")
    ///     .place_level(PlaceKind::Cache { level: 3 })
    ///     .build()?;
    /// assert_eq!(rt.place_level(), PlaceKind::Cache { level: 3 });
    /// let err = elite_rt::Runtime::builder()
    ///     .topology("1x2, 1 MiB L2 per core")
    ///     .place_level(PlaceKind::Cache { level: 3 })
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.to_string(), "invalid `place_level`: processor 0 has no L3 cache: its data caches are L2");
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn place_level(mut self, kind: crate::PlaceKind) -> Self {
        self.places.level = kind;
        self
    }

    /// LASSI's round-robin assignment of work without a place: each ULT spawned without a
    /// place hint (nor pinned, nor with a home) starts on the next processor in turn (each
    /// spawning processor keeps its own turn) rather than where it was spawned. Default off.
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(2).round_robin(true).build()?;
    /// let sum: usize = rt.block_on(|| {
    ///     // Started on processors 1, 0, 1, 0 (where idle processors do not take them first).
    ///     let hs: Vec<_> = (0..4).map(|i| elite_rt::spawn(move || i)).collect();
    ///     hs.into_iter().map(|h| h.join().unwrap()).sum()
    /// });
    /// assert_eq!(sum, 6);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn round_robin(mut self, on: bool) -> Self {
        self.places.round_robin = on;
        self
    }

    /// How many of a victim's ready ULTs a thief takes. Default
    /// [`StealAmount::Policy`](crate::StealAmount::Policy).
    ///
    /// ```
    /// use elite_rt::{StealAmount, StealOrder};
    /// // CAF's locality-guided stealing of one ULT at a time, on a synthetic 2-node machine.
    /// let rt = elite_rt::Runtime::builder()
    ///     .topology("2 nodes x 2 cores, 1 MiB L2 per core")
    ///     .steal_order(StealOrder::Groups)
    ///     .steal(StealAmount::One)
    ///     .build()?;
    /// let sum: u64 = rt.block_on(|| {
    ///     let hs: Vec<_> = (0..16u64).map(|i| elite_rt::spawn(move || i)).collect();
    ///     hs.into_iter().map(|h| h.join().unwrap()).sum()
    /// });
    /// assert_eq!(sum, 120);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn steal(mut self, amount: crate::StealAmount) -> Self {
        self.places.amount = amount;
        self
    }

    /// Whom an idle processor robs, in which order. Default
    /// [`StealOrder::Groups`](crate::StealOrder::Groups) (locality-guided stealing).
    pub fn steal_order(mut self, order: crate::StealOrder) -> Self {
        self.places.order = order;
        self
    }

    /// Steal avoidance (LASSI's counter-productive steals): a thief leaves in the victim's
    /// runqueue a ready ULT whose move would cost more than its wait there. Default off.
    ///
    /// The move costs the reload of the ULT's lines expected still cached where it last ran
    /// (the cache model's decayed footprint of its last run under a policy with a model, else
    /// its declared [footprint](crate::Builder::footprint)), each line at the host's measured
    /// cost of fetching a line another core wrote, times the NUMA distance between the two
    /// processors over the distance within a node; nothing when the thief shares the cache
    /// those lines are in. The wait is the ULTs the victim runs before it (those ahead in its
    /// runqueue and the one running) times the victim's run length, which the thief measures
    /// from the victim's switch counter between its looks (at least as long as the victim's
    /// current run has lasted), and at least as long as the thief has been idle so far: a
    /// thief idle for a moment leaves the ULT with its data, one idle for as long as the
    /// reload takes steals it (a lasting imbalance costs one reload time). A ULT left is counted in
    /// [`ProcessorStats::steals_declined`](crate::ProcessorStats::steals_declined), and the
    /// thief pauses stealing until its wait may have caught up with its cost (at most a
    /// watch period). ULTs that never ran have nothing cached and are taken as
    /// before; without declared footprints (and without a cache model) nothing is costly.
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(2).avoid_costly_steals(true).build()?;
    /// let sum: u64 = rt.block_on(|| {
    ///     let hs: Vec<_> = (0..8u64)
    ///         .map(|i| elite_rt::Builder::new().footprint(256 << 10).spawn(move || i).unwrap())
    ///         .collect();
    ///     hs.into_iter().map(|h| h.join().unwrap()).sum()
    /// });
    /// assert_eq!(sum, 28);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn avoid_costly_steals(mut self, on: bool) -> Self {
        self.places.avoid_costly = on;
        self
    }

    /// CAF's soft pinning for every ULT: a ULT's home is the processor it ran on before its
    /// first wake-up (or its [`Builder::home`](crate::Builder::home)); a woken ULT goes home
    /// unless home is overloaded, and a ULT stolen away goes back home at its next wake-up,
    /// except that a ULT woken by the ULT that woke it last (its partner in a request and its
    /// reply) goes to where that ULT runs, however loaded that processor is: thieves balance
    /// the load, and their [steal trials](Self::steal_trials) find out whether that pays (the
    /// partner rule: see the policy guide, "Where to put a thread"). Default off.
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(2).soft_pinning(true).build()?;
    /// assert_eq!(rt.block_on(|| elite_rt::spawn(|| 1).join().unwrap()), 1);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn soft_pinning(mut self, on: bool) -> Self {
        self.places.soft_pinning = on;
        self
    }

    /// Use heap stacks without guard pages, with a canary checked at every switch, so a program can
    /// keep more ULTs alive than `vm.max_map_count` allows guarded stacks (about 32 000 by default).
    ///
    /// # Safety
    ///
    /// Without a guard page, a ULT that overflows its stack writes into whatever memory lies below
    /// it before the canary check notices (at its next switch) and aborts. The caller promises that
    /// its ULTs fit in their stacks.
    pub unsafe fn unguarded_stacks(mut self) -> Self {
        self.stack_kind = StackKind::Unguarded;
        self
    }

    /// Validates the configuration and starts the processors.
    ///
    /// ```
    /// let err = elite_rt::Runtime::builder().processors(0).build().unwrap_err();
    /// assert!(err.to_string().contains("processors"));
    /// ```
    pub fn build(self) -> Result<Runtime, BuildError> {
        let config = self.validate()?;
        Runtime::start(config)
    }

    pub(crate) fn validate(self) -> Result<Config, BuildError> {
        fn range(field: &'static str, value: usize, lo: usize, hi: usize) -> Result<(), BuildError> {
            if (lo..=hi).contains(&value) {
                Ok(())
            } else {
                Err(BuildError::OutOfRange { field, value, min: lo, max: hi })
            }
        }
        if let Some(n) = self.processors {
            range("processors", n, 1, MAX_PROCESSORS)?;
        }
        range("stack_size", self.stack_size, MIN_STACK_SIZE, MAX_STACK_SIZE)?;
        range("start_queue_limit", self.start_queue_limit, 1, usize::MAX)?;
        range("node_start_queue_limit", self.node_start_queue_limit, 1, usize::MAX)?;
        range("tcb_pool_limit", self.tcb_pool_limit, 2, usize::MAX)?;
        range("stack_pool_limit", self.stack_pool_limit, 2, usize::MAX)?;
        range("node_stack_pool_limit", self.node_stack_pool_limit, 1, usize::MAX)?;
        range("spin_rounds", self.spin_rounds, 0, 1_000_000)?;
        range("max_spare_threads", self.max_spare_threads, 1, MAX_SPARE_THREADS)?;
        // In milliseconds (the error's unit).
        let keep_alive_ms = usize::try_from(self.spare_keep_alive.as_millis()).unwrap_or(usize::MAX);
        range("spare_keep_alive (in milliseconds)", keep_alive_ms, 1, 86_400_000)?;
        if let Some(n) = self.coop_budget {
            range("coop_budget", n as usize, 1, u32::MAX as usize)?;
        }
        if let SpinPolicy::Fixed(n) = self.spin_policy {
            range("spin_policy", n as usize, 0, 1_000_000)?;
        }
        let chaos = match self.chaos {
            ChaosSetting::Off => None,
            ChaosSetting::Seed(seed) => Some(seed),
            ChaosSetting::FromEnv => chaos_from_env()?,
        };
        self.deadlock.validate()?;
        range(
            "trace_buffer",
            self.trace_buffer,
            crate::trace::TRACE_BUFFER_RANGE.0,
            crate::trace::TRACE_BUFFER_RANGE.1,
        )?;
        let schedtrace = match self.schedtrace {
            Some(Some(period)) => {
                let ms = usize::try_from(period.as_millis()).unwrap_or(usize::MAX);
                range("schedtrace (in milliseconds)", ms, 1, crate::trace::SCHEDTRACE_MAX_MS as usize)?;
                Some(Duration::from_millis(ms as u64))
            }
            Some(None) => None,
            None => crate::trace::schedtrace_from_env()?,
        };
        let trace = crate::trace::trace_path(&self.trace)?;
        let mut model_cache = None;
        let topology = match (&self.topology, self.processors) {
            (Some(spec), n) => {
                let t = Topology::synthetic(spec).map_err(BuildError::Topology)?;
                if let Some(n) = n {
                    if n != t.num_processors() {
                        return Err(BuildError::Conflict {
                            field: "processors",
                            reason: format!(
                                "{n} processors asked for, but topology \"{spec}\" has {}",
                                t.num_processors()
                            ),
                        });
                    }
                }
                t
            }
            (None, Some(n)) => {
                let machine = Topology::detect();
                model_cache = Some(machine.model_cache());
                machine.with_processors(n).map_err(BuildError::Topology)?
            }
            (None, None) => Topology::detect(),
        };
        // The cache the policies' cache model describes: that of the topology, except that a
        // subset of the machine's CPUs (`processors(n)`) would see a cache it shares with the
        // rest of the machine (an L3) as private to it; the whole machine's choice holds.
        let model_cache = model_cache.unwrap_or_else(|| topology.model_cache());
        // The ablation keeps one set of structures: one node holds every processor.
        let topology = if self.central && topology.num_nodes() > 1 {
            Topology::single_node(topology.num_processors()).map_err(BuildError::Topology)?
        } else {
            topology
        };
        if self.places.level != crate::PlaceKind::Processor {
            for p in 0..topology.num_processors() {
                let place = crate::place::Place::of_kind(self.places.level, p, &topology);
                place
                    .processors(&topology)
                    .map_err(|e| BuildError::Place { field: "place_level", error: e })?;
            }
        }
        Ok(Config {
            places: self.places,
            topology,
            model_cache,
            stack_size: crate::stack::round_to_pages(self.stack_size),
            start_queue_limit: self.start_queue_limit,
            node_start_queue_limit: self.node_start_queue_limit,
            tcb_pool_limit: self.tcb_pool_limit,
            huge_page_tcbs: self.huge_page_tcbs,
            stack_pool_limit: self.stack_pool_limit,
            node_stack_pool_limit: self.node_stack_pool_limit,
            spin_rounds: self.spin_rounds,
            stack_kind: self.stack_kind,
            needs: self.policy.hooks().needs(),
            policy: self.policy,
            counters: self.counters,
            pin: self.pin,
            spin_policy: self.spin_policy,
            gather_locks: self.gather_locks,
            steal_trials: self.steal_trials,
            central: self.central,
            prefetch: self.prefetch,
            detached_panic_hook: self.detached_panic_hook,
            chaos,
            deadlock: self.deadlock,
            max_spare_threads: self.max_spare_threads,
            spare_keep_alive: Duration::from_millis(keep_alive_ms as u64),
            coop_budget: self.coop_budget,
            trace,
            trace_buffer: self.trace_buffer,
            schedtrace,
            coschedule: self.coschedule,
        })
    }
}

/// The seed `ELITE_CHAOS` gives, if it is set and not empty.
fn chaos_from_env() -> Result<Option<u64>, BuildError> {
    match std::env::var(CHAOS_ENV) {
        Ok(value) => chaos_seed(value),
        // Not set, or not Unicode: a value that is no number either way.
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(value)) => chaos_seed(value.to_string_lossy().into_owned()),
    }
}

/// The seed in a value of `ELITE_CHAOS`: `None` when it is empty (or only spaces).
fn chaos_seed(value: String) -> Result<Option<u64>, BuildError> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed.map(Some).map_err(|_| BuildError::Environment {
        var: CHAOS_ENV,
        value,
        expected: "a seed: an unsigned 64-bit number, decimal or hexadecimal after 0x",
    })
}

/// Why a runtime could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A setting outside its allowed range.
    OutOfRange {
        /// The builder method (field) at fault.
        field: &'static str,
        /// The value given.
        value: usize,
        /// Smallest allowed value.
        min: usize,
        /// Largest allowed value.
        max: usize,
    },
    /// Two settings that contradict each other.
    Conflict {
        /// The builder method (field) at fault.
        field: &'static str,
        /// What contradicts what.
        reason: String,
    },
    /// The synthetic topology did not parse.
    Topology(TopologyError),
    /// A setting names a place the topology does not have.
    Place {
        /// The builder method (field) at fault.
        field: &'static str,
        /// What the topology lacks.
        error: crate::PlaceError,
    },
    /// The operating system refused to start a processor's thread.
    Thread(std::io::Error),
    /// An environment variable the builder reads holds something it cannot use.
    Environment {
        /// The variable.
        var: &'static str,
        /// What it holds.
        value: String,
        /// What it should hold.
        expected: &'static str,
    },
    /// The trace file ([`RuntimeBuilder::trace`], `ELITE_TRACE`) could not be created.
    Trace {
        /// The file.
        path: std::path::PathBuf,
        /// Why not.
        error: std::io::Error,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::OutOfRange { field, value, min, max } => {
                if *max == usize::MAX {
                    write!(f, "invalid `{field}`: {value} is out of range, expected at least {min}")
                } else {
                    write!(f, "invalid `{field}`: {value} is out of range, expected {min}..={max}")
                }
            }
            BuildError::Conflict { field, reason } => write!(f, "invalid `{field}`: {reason}"),
            BuildError::Topology(e) => write!(f, "invalid `topology`: {e}"),
            BuildError::Place { field, error } => write!(f, "invalid `{field}`: {error}"),
            BuildError::Thread(e) => write!(f, "could not start a processor thread: {e}"),
            BuildError::Environment { var, value, expected } => {
                write!(f, "invalid environment variable {var}={value:?}: expected {expected}")
            }
            BuildError::Trace { path, error } => {
                write!(f, "could not create the trace file {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Topology(e) => Some(e),
            BuildError::Place { error, .. } => Some(error),
            BuildError::Thread(e) => Some(e),
            BuildError::Trace { error, .. } => Some(error),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Cases: 256, times `ELITE_FUZZ_SCALE`, or `PROPTEST_CASES` (as in `tests/fuzz_inputs.rs`).
    fn fuzz_config() -> proptest::test_runner::Config {
        let env = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u32>().ok());
        let cases = env("PROPTEST_CASES")
            .unwrap_or_else(|| 256u32.saturating_mul(env("ELITE_FUZZ_SCALE").unwrap_or(1)));
        proptest::test_runner::Config { cases, failure_persistence: None, ..Default::default() }
    }

    proptest! {
        #![proptest_config(fuzz_config())]

        /// Any value of `ELITE_CHAOS`: no seed when blank, the number it writes in decimal or
        /// after `0x`, or an error that quotes it and says what a seed looks like.
        #[test]
        #[cfg_attr(miri, ignore = "a parser: nothing for Miri to find that the native run misses")]
        fn any_chaos_value(value in prop_oneof![
            any::<String>(),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| format!(" 0x{n:x}\t")),
            any::<u64>().prop_map(|n| format!("0X{n:X}")),
            Just("18446744073709551616".to_string()),
            Just("0x".to_string()),
            Just("-1".to_string()),
            Just(" \n ".to_string()),
        ]) {
            let v = value.trim();
            let hex = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X"));
            let expected = match hex {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => v.parse::<u64>().ok(),
            };
            match chaos_seed(value.clone()) {
                Ok(None) => prop_assert!(v.is_empty(), "{:?} read as unset", value),
                Ok(Some(seed)) => prop_assert_eq!(Some(seed), expected, "{:?}", value),
                Err(e) => {
                    prop_assert!(expected.is_none() && !v.is_empty(), "{:?} refused: {}", value, e);
                    prop_assert_eq!(
                        e.to_string(),
                        format!(
                            "invalid environment variable ELITE_CHAOS={value:?}: expected a seed: an unsigned \
                             64-bit number, decimal or hexadecimal after 0x"
                        )
                    );
                }
            }
        }
    }

    /// With `processors(1)` the one processor is alone on the machine's shared caches; the cache
    /// model must still describe the cache private to a core of the machine, not its L3.
    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation forbids")]
    fn the_model_cache_is_the_machines() {
        let machine = Topology::detect().model_cache();
        for n in [1, 2, 3] {
            let config = RuntimeBuilder::new().processors(n).validate().expect("valid");
            assert_eq!(config.model_cache, machine, "processors({n})");
        }
        let config =
            RuntimeBuilder::new().topology("1 node x 1 core, 64 KiB L2 per core").validate().expect("valid");
        assert_eq!(config.model_cache.lines(), 1024, "a synthetic topology's own cache");
    }
}
