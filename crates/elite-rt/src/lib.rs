//! # elite-rt: user-level lightweight threads on per-processor structures
//!
//! A runtime of cheap stackful threads (ULTs) in the architecture of the Erlangen Lightweight Thread
//! Environment (ELiTE): one pinned OS thread per processor, per-processor pools of thread control
//! blocks and stacks in a hierarchy that follows the memory hierarchy, bounded start-queues per
//! processor and per node, local runqueues ordered by a scheduling policy, a deathrow and clean-up
//! stack per processor, and lock-free wake-up stacks.
//!
//! ```
//! let rt = elite_rt::Runtime::builder()
//!     .processors(2)              // default: one per CPU of the detected topology
//!     .stack_size(64 * 1024)      // per-ULT stack; validated
//!     .build()?;                  // Result<Runtime, BuildError>
//! let sum = rt.block_on(|| {      // runs the closure as the root ULT, returns its value
//!     let hs: Vec<_> = (0..1000).map(|i| elite_rt::spawn(move || i)).collect();
//!     hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
//! });
//! assert_eq!(sum, 499_500);
//! # Ok::<(), elite_rt::BuildError>(())
//! ```
//!
//! The names mirror `std::thread`: [`spawn`], [`Builder`], [`JoinHandle::join`] (a panic arrives as
//! `Err(payload)` and the runtime runs on), [`yield_now`], [`sleep`], [`current()`]. Dropping a
//! [`JoinHandle`] detaches the ULT; a detached ULT's panic goes to
//! [`RuntimeBuilder::detached_panic_hook`] (by default one line on stderr naming the ULT). A
//! `JoinHandle` may be joined from a ULT (which blocks, letting its processor run others) or from
//! any OS thread (which parks).
//!
//! ## Life of a ULT
//!
//! `spawn` takes a TCB from the spawning processor's pool and puts it on that processor's bounded
//! start-queue (overflowing to the node's, then to the global one). The ULT has no stack yet: the
//! processor that first runs it takes a stack from *its own* pool, so stack memory is touched by the
//! processor that uses it. A ULT runs until it yields, blocks, sleeps or returns; each is a switch back
//! to the processor's loop, which finishes the transition on its own stack. (One shortcut: a ULT
//! that joins a child still waiting at the top of its processor's start-queue starts the child
//! itself, on the child's own stack, and finishes the child's first switch just as the loop would;
//! a spawn followed at once by a join then costs no blocking of the joiner.) On exit the stack goes back
//! to the local pool at once and the TCB waits on the deathrow until the joiner lets go of it; a joiner
//! on another processor pushes a note on the exiting processor's clean-up stack rather than touching
//! its pools.
//!
//! A processor runs the ready ULTs already started before it starts a new one from its
//! start-queue (but for one after a yield, which lets a newcomer in), so a program that spawns
//! its ULTs ahead of the work that gives them something to do runs the started ones on a cache
//! they keep to themselves. While ready ULTs keep a processor busy, it still starts one of its
//! spawned ULTs about every 10 ms (the loop's starvation turn); an idle processor takes them
//! sooner. Idle processors take work from start-queues (own, node, global),
//! then steal from the processors of their node, then from all others, and finally park;
//! [`Runtime::stats`] counts every one of these paths.
//!
//! ## Scheduling policies and cache affinity
//!
//! Which ready ULT a processor runs next is the [`policy`]'s choice, made at run time on the
//! builder ([`RuntimeBuilder::policy`], by value or by name: `"virtual-time".parse::<Policy>()`):
//! ELiTE's `no-affinity` (LIFO, the default), `virtual-time` (the most recently run here first),
//! `minimum-misses` (the fewest cache misses in the last run first) and `reload-transient` (the
//! smallest expected reload transient of the cache model first), or custom [`policy::Hooks`].
//! [`Runtime::set_policy`] switches the policy of a running runtime, and [`Policy::auto`] (the
//! name `auto`) lets the runtime pick one while the program runs, from the progress it measures
//! (or the units the program reports with [`progress`]) under each candidate.
//! Each runqueue is a treap ordered by the policy's keys: O(1) at its ends (LIFO, yields),
//! O(log n) in the middle, and a thief takes its low-affinity end.
//!
//! The policies that need cache misses get them from a counter source on each processor
//! ([`RuntimeBuilder::counters`]): the hardware counter where the machine has one, else an
//! estimate from the data each ULT declares it works on ([`Builder::footprint`],
//! [`set_footprint`]) and the cache model of `elite_affinity`; the runtime then says once per
//! process, on stderr, that it estimates, and [`RuntimeStats::counter_sources`] names each
//! processor's source. Policies that need no misses open no source and pay nothing per run.
//!
//! ```
//! use elite_rt::policy::Policy;
//!
//! let rt = elite_rt::Runtime::builder().processors(1).policy("virtual-time".parse::<Policy>()?).build()?;
//! let sum = rt.block_on(|| {
//!     let hs: Vec<_> = (0..8u64)
//!         .map(|i| elite_rt::Builder::new().footprint(64 << 10).spawn(move || i).unwrap())
//!         .collect();
//!     hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
//! });
//! assert_eq!(sum, 28);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Synchronization and the two-phase rule
//!
//! [`sync`] has std's `Mutex`, `RwLock`, `Condvar`, `Barrier`, `Once`, `OnceLock`, `LazyLock`,
//! `ReentrantLock` and channels (with a `Select` over receivers), plus a `Semaphore` and a
//! `WaitGroup`; each blocks only the calling ULT. Locks are two-phase (ELiTE section 2.3.2): a
//! [`sync::Mutex`] averages the hold times of its last 8 measured acquisitions, and a waiter
//! *blocks at once* when that average exceeds half the cost of a context switch; otherwise it
//! *spins* (exponential backoff) for as long as a context switch costs, then blocks. The cost of a
//! context switch is what a waiter pays by blocking instead of spinning: switching out, having the
//! wake-up delivered, and switching back in, where the delivery wakes its processor from its park
//! when the processor had nothing else to run. [`sync::switch_cost`] is a coroutine round trip
//! (measured when the first runtime starts; a few nanoseconds) plus the wake-up of a parked
//! processor: measured at start as the median of nine, then the running average of the wake-ups
//! the runtime makes, since it moves with the host's load (in a virtual machine a wake-up takes
//! far longer when the hypervisor must first reschedule the sleeper's halted virtual CPU than
//! when the machine is busy enough that it had not halted). Every threshold of the runtime that
//! depends on the host is derived from such measurements: see [`sync::HostCosts`]. The spin
//! budget is Lim and Agarwal's competitive rule, which ELiTE cites: spinning as long as blocking
//! would cost never waits more than twice as long as the better choice. A spinner also stops
//! when an unlock has handed the lock to a blocked waiter, which may need the spinner's
//! processor. [`sync::SpinPolicy`] chooses another rule per runtime.
//!
//! ## The cooperative budget
//!
//! ULTs are not preempted, so a ULT looping on `sync` calls that never block (a `try_recv` poll,
//! sends on an unbounded channel) would keep the ULTs it makes ready on its processor from
//! running: on one processor the loop never ends when it waits for them, and an unbounded channel
//! grows until memory runs out. Each ULT therefore has a budget of such calls per turn on its
//! processor ([`RuntimeBuilder::coop_budget`], default [`DEFAULT_COOP_BUDGET`], 1024): channel
//! sends and receives, lock and semaphore acquisitions, their `try_` forms. The call that finds it
//! spent yields first, as [`yield_now`] does (unless it is about to block anyway), and the ULT
//! starts its next turn with a full budget; a switch of any kind (a block, a yield) refills it. A
//! ULT alone on its processor pays a switch out and straight back in once per budget; the charge
//! itself is a decrement and a branch on the processor the call looks up.
//! `coop_budget(None)` turns it off. A loop that makes no such call still holds its processor
//! ([`caveats`]).
//!
//! ```
//! use elite_rt::sync::mpsc;
//!
//! // One processor. The poller never blocks; the root answers its requests.
//! let rt = elite_rt::Runtime::builder().processors(1).build()?;
//! let got = rt.block_on(|| {
//!     let (ask, asked) = mpsc::channel();
//!     let (answer, answers) = mpsc::channel();
//!     let poller = elite_rt::spawn(move || loop {
//!         if let Ok(v) = answers.try_recv() {
//!             return v;
//!         }
//!         ask.send(()).unwrap(); // every 1024th `sync` call yields first: the root answers
//!     });
//!     for () in asked.iter() {
//!         if answer.send(42).is_err() {
//!             break; // the poller got its answer and left
//!         }
//!     }
//!     poller.join().unwrap()
//! });
//! assert_eq!(got, 42);
//! # Ok::<(), elite_rt::BuildError>(())
//! ```
//!
//! ## Stacks
//!
//! Stacks are guarded (a `PROT_NONE` page below each) and pooled; the default is 64 KiB, and a ULT
//! that spawns or panics needs about 32 KiB in debug builds (see [`MIN_STACK_SIZE`]). Each guarded stack costs two kernel
//! mappings, so `vm.max_map_count` (65530 by default) limits a program to roughly 32 000 ULTs that
//! hold a stack at once (ULTs waiting on a start-queue hold none). Past that, the ULT that could not
//! get a stack reports a [`SpawnError`] through its join, spawns fail with it until a stack is freed,
//! and the runtime runs on. Programs that need more live ULTs opt into
//! [`RuntimeBuilder::unguarded_stacks`]: heap stacks with a canary checked at every switch.
//!
//! A ULT that overflows its guarded stack touches the guard page. The runtime's `SIGSEGV`/`SIGBUS`
//! handler (installed when the first runtime starts, running on an alternate signal stack of each
//! processor thread) then writes which ULT overflowed to stderr, for example
//! `ULT 'worker' (id 17) has overflowed its stack of 32768 bytes`, and aborts the process. Faults
//! that are not a ULT's overflow go to the handler that was installed before (std's, which reports
//! OS threads' overflows) or to the default action. On unguarded stacks a smashed canary is
//! reported the same way at the ULT's next switch.
//!
//! ## Blocking calls
//!
//! A ULT that blocks its OS thread in the kernel (file I/O, a foreign library, `std::thread::sleep`)
//! would stop its processor and every ULT waiting there. [`blocking`]`(f)` runs such a call without
//! taking the processor out of service (ELiTE section 2.3.4): the processor is handed to a parked
//! *spare* OS thread of the runtime, which goes on running its ULTs, while `f` runs on the thread
//! that was running the calling ULT, as a plain OS thread. When `f` returns, that thread takes its
//! processor back if the spare has not started on it yet (a short call), and otherwise gives the
//! ULT back to a processor (by default the one it ran on, through its wake-up stack) and parks as
//! a spare itself. So the number of OS threads running ULTs stays the number of processors, and
//! spare threads wait parked to take a processor over.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//!
//! let rt = elite_rt::Runtime::builder().processors(1).max_spare_threads(4).build()?;
//! let done = Arc::new(AtomicUsize::new(0));
//! let d = done.clone();
//! let bytes = rt.block_on(move || {
//!     let others: Vec<_> = (0..100)
//!         .map(|_| {
//!             let d = d.clone();
//!             elite_rt::spawn(move || d.fetch_add(1, Ordering::SeqCst))
//!         })
//!         .collect();
//!     // A read that may sleep in the kernel: the 100 others run meanwhile on the one processor.
//!     let bytes = elite_rt::blocking(|| std::fs::read(std::env::current_exe()?).map(|b| b.len()));
//!     others.into_iter().for_each(|h| { h.join().unwrap(); });
//!     bytes
//! })?;
//! assert!(bytes > 0);
//! assert_eq!(done.load(Ordering::SeqCst), 100);
//! let stats = rt.stats().blocking;
//! assert_eq!(stats.calls, 1);
//! assert!(stats.threads <= 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Spare threads are started as calls need them, at most
//! [`RuntimeBuilder::max_spare_threads`] (default 64) beyond the processors, and leave after
//! [`RuntimeBuilder::spare_keep_alive`] (default 10 s) without work; at the cap a call waits in a
//! queue (its processor runs other ULTs) until a thread is free. Inside `f`, elite acts as on a plain
//! OS thread: `sync` objects and joins park it, `yield_now` and `sleep` act on it, `spawn` goes to
//! the calling ULT's runtime. A panic in `f` reaches the caller of `blocking`. [`RuntimeStats::blocking`]
//! counts calls, handoffs, reclaims, queued calls and spare threads. The protocol (who owns a
//! processor at each moment, why it never runs on two threads, why no wake-up is lost) is written
//! down in `src/blocking.rs`.
//!
//! What it costs: a call whose spare thread is asleep pays a futex wake-up of the spare and two
//! lock round trips (some such calls lose their processor to the woken spare and go on on its
//! thread); calls back to back find the spare awake. `cargo run --release -p elite-bench --
//! blocking` measures it against spawning a thread per call (`docs/benchmarks.md` has the
//! figures with their host), and `elite-bench blocking-probe blocking N` under callgrind counts
//! its instructions. A program that makes no blocking call pays nothing for the module on its
//! yields, spawns, joins and channel operations. With a hardware cache-miss counter (many
//! virtual machines expose none) a processor's counter keeps counting the thread that opened it
//! after a handoff: the policies that need misses would see wrong counts on processors that changed
//! threads.
//!
//! ## Panics
//!
//! A panic in a ULT unwinds the ULT's stack and arrives at its joiner as `Err(payload)`; the
//! runtime runs on. A ULT's panic state is its own, as a thread's is with std:
//! `std::thread::panicking()` inside a ULT is true exactly while that ULT unwinds, and a lock
//! (elite's or std's) held across a panic is poisoned by the ULT that panicked. std counts panics
//! per OS thread, so a ULT that blocks, yields or sleeps in the middle of its unwinding (in a
//! destructor) *anchors*: it keeps its OS thread, which runs nothing else until the unwinding is
//! over, while its processor is handed to a spare thread as for a [`blocking`] call and runs the
//! other ULTs. Its waits park that thread; it goes back to a processor once its panic is caught.
//! On a processor where a [pinned](Builder::pinned) ULT lives the processor cannot change
//! threads: it stays out of service until the unwinding is over, so a destructor there must not
//! wait for a ULT that only that processor runs. [`RuntimeStats::blocking`] counts anchored ULTs;
//! the [`caveats`] page has the details and an example.
//!
//! ## Shutdown
//!
//! Dropping the [`Runtime`] stops its processors and cancels every ULT that has not finished,
//! whatever state it is in: its `join` returns `Err` with a [`Cancelled`] payload, its closure is
//! dropped, and a started ULT's stack is unwound (the destructors of its values run on the thread
//! that drops the runtime, where a `join` returns at once and `yield_now` or `sleep` act on that OS
//! thread) and freed. A ULT that runs without ever yielding, blocking or returning holds its
//! processor, and the drop waits for it: user-level threads are not preemptible (the cooperative
//! budget makes a loop of `sync` calls yield now and then, see below; a loop without any does
//! not). The drop does not
//! wait for [`blocking`] calls in flight: the thread of such a call cancels its ULT when the call
//! returns (the ULT's stack is unwound there), then exits; a call queued at the cap never runs.
//!
//! ## Pinned ULTs
//!
//! A ULT may continue on another processor, hence another OS thread, after any switch. One that
//! must not (it keeps OS-thread-bound state across switches) is spawned with
//! [`Builder::pinned(true)`](Builder::pinned): it starts on the spawner's processor and stays on
//! that processor's OS thread. Thieves hand it back, and every wake-up brings it home whatever the
//! policy or the chaos mode says; it gives up load balancing, so pin only such ULTs.
//!
//! ## Deadlock reports
//!
//! While [`Runtime::block_on`] waits, its thread watches the runtime. When every ULT is blocked and
//! nothing can wake one — no processor has work or a timer, no OS thread is inside a call that can
//! wake a ULT or waits in a timed elite wait, every other runtime of the process is idle too —
//! for a grace period ([`RuntimeBuilder::deadlock_grace`], 1 s by default), it reports each blocked
//! ULT's id, name and what it waits on (the kind of object and the address of its wait queue, or
//! the ULT it joins):
//!
//! ```text
//! elite-rt: deadlock: every ULT of the runtime is blocked, and for 1.000 s nothing could wake one (...); 3 blocked:
//!   ULT 2 'left' waits on a Mutex (wait queue at 0x7f44cc000be0)
//!   ULT 4 'right' waits on a Mutex (wait queue at 0x7f44cc000c60)
//!   ULT 1099511627776 'root' waits on a join of ULT 2 'left'
//! ```
//!
//! An OS thread that is not inside any elite call (computing, sleeping, blocked elsewhere) but will
//! wake a ULT later is invisible to the runtime, so the default
//! ([`OnDeadlock::Report`](deadlock::OnDeadlock)) prints the report and waits on;
//! [`RuntimeBuilder::on_deadlock`] can make it abort instead, and [`Runtime::try_block_on`]
//! returns the report as an error. The [`deadlock`] module says exactly when the report fires and
//! why it cannot misfire on a program whose wakers the runtime can see.
//!
//! ## Testing: chaos mode, random schedules, stress and soak
//!
//! [`RuntimeBuilder::chaos`] (or `ELITE_CHAOS=<seed>` in the environment, for every runtime that
//! does not choose) runs the scheduler on dice: every yield migrates the ULT to another processor,
//! wake-ups go to random processors, the next ULT to run is picked at random, and the
//! synchronization primitives yield at random where they decide. A seed fixes each processor's
//! decisions; on one processor (no timers, no outside threads acting meanwhile) it replays the same
//! schedule exactly, on more the operating system's interleaving of the processors' threads still
//! varies. Off, it costs one predictable branch on the yield, wake and pick paths. `.ci/run` runs the
//! whole test suite once under it. The crate's tests use it for random schedules of the `sync`
//! primitives on 2 to 4 processors (`tests/schedules.rs`, `ELITE_SCHEDULE_SEEDS=<n>`; a failure
//! prints the seed and the command that replays it), bounded mixed-load stress on one and two
//! processors and multi-node topologies (`tests/stress.rs`, `ELITE_STRESS_ROUNDS=<n>`), and a soak
//! (`tests/soak.rs`, `ELITE_SOAK_MINUTES=<m>`) that checks resident memory, mappings and TCBs
//! stay flat after a warm-up.
//!
//! ## Tracing the schedule
//!
//! [`RuntimeBuilder::trace`] (or `ELITE_TRACE=<path>`, for programs you do not rebuild) writes a
//! trace in the Trace Event Format that [Perfetto](https://ui.perfetto.dev) and
//! `chrome://tracing` open: a track per processor with the runs of ULTs and why each ended (the
//! object a blocked one waits on), idle and parked spans, spawns, wake-ups with who woke whom
//! (arrows) and where the policy sent them, steals, and blocking calls' hand-offs. Each
//! processor records into a bounded ring of its own, flushed off the switch path; what a full
//! ring drops is counted in the trace. [`RuntimeBuilder::schedtrace`] (or
//! `ELITE_SCHEDTRACE=<ms>`) prints a line per processor on stderr every period, as Go's
//! `GODEBUG=schedtrace` does. Both are off by default and cost nothing on the switch and wake
//! paths while off; `docs/tracing.md` in the repository says what each event means and what
//! tracing costs when on.
//!
//! ## What not to do inside a ULT
//!
//! A ULT may continue on another OS thread after any switch (yield, join, sleep, blocking
//! synchronization). Do not hold `std::sync` guards, references to `thread_local!` values, or other
//! OS-thread-bound handles across such a call (use [`sync`] and [`ult_local!`] instead), do not call
//! blocking OS primitives (`std::thread::sleep`, blocking I/O, a `std::sync::Mutex` held by another
//! ULT) that stop the whole processor (put them in [`blocking`]), and do not recurse without bound
//! on a small stack. The
//! [`caveats`] page explains each, with the right way to do it and what the compiler already
//! refuses.

#![doc(html_root_url = "https://docs.rs/elite-rt/0.1.0")]

// Built with `RUSTFLAGS="--cfg loom"` (`.ci/run`'s loom step), the crate is only its lock-free
// protocols, on loom's atomics, and their models in `loom_models`; the runtime around them (stacks,
// switching, statics, thread-locals) is left out, since loom can neither build nor run it. A new
// module gets `#[cfg(not(loom))]` too, unless a model needs it (see `loom_models`).

#[cfg(not(loom))]
mod anchor;
#[cfg_attr(loom, allow(dead_code))]
mod atomics;
#[cfg(not(loom))]
mod blocking;
#[cfg(not(loom))]
#[doc = include_str!("../docs/caveats.md")]
pub mod caveats {}
#[cfg(not(loom))]
mod config;
#[cfg(not(loom))]
pub mod contention;
#[cfg(loom)]
#[allow(dead_code)]
mod contention {
    //! Under loom: only the runtime's coscheduling gate.
    pub(crate) mod gate;
}
#[cfg(not(loom))]
pub mod deadlock;
#[cfg(not(loom))]
mod fault;
#[cfg(not(loom))]
pub mod group;
#[cfg(not(loom))]
mod helper;
#[cfg(not(loom))]
mod local;
#[cfg(all(test, loom))]
mod loom_models;
#[cfg(not(loom))]
mod panics;
#[cfg_attr(loom, allow(dead_code))]
mod park;
#[cfg(not(loom))]
pub mod place;
#[cfg(not(loom))]
pub mod policy;
#[cfg(not(loom))]
mod pool;
#[cfg(not(loom))]
mod prefetch;
#[cfg(not(loom))]
mod processor;
#[cfg(not(loom))]
mod queue;
#[cfg(not(loom))]
mod slot;
#[cfg(not(loom))]
mod switch;
#[cfg(loom)]
#[allow(dead_code)]
mod queue {
    //! Under loom: only the wake-up and clean-up stacks, the own start-queue and the shared
    //! start-queue levels with a node level's bound, and the `next` slot.
    pub(crate) mod bound;
    pub(crate) mod deque;
    pub(crate) mod next;
    pub(crate) mod shared;
    pub(crate) mod wakeup;
}
#[cfg(not(loom))]
mod runtime;
#[cfg(not(loom))]
mod stack;
#[cfg(not(loom))]
mod stats;
#[cfg(not(loom))]
pub mod sync;
#[cfg(loom)]
#[allow(dead_code)]
mod policy {
    //! Under loom: only the switch board of a live policy change.
    pub(crate) mod board;
}
#[cfg(loom)]
#[allow(dead_code)]
mod sync {
    //! Under loom: only the mutex's state word and the spin locks' bias.
    pub(crate) mod bias;
    pub(crate) mod lock_word;
}
#[cfg(not(loom))]
mod tcb;
#[cfg(loom)]
#[allow(dead_code)]
mod tcb {
    //! Under loom: only the join state word.
    pub(crate) mod join_state;
}
#[cfg(not(loom))]
mod thread;
#[cfg(not(loom))]
mod timer;
#[cfg(not(loom))]
mod trace;

#[cfg(not(loom))]
pub use blocking::blocking;
#[cfg(not(loom))]
pub use config::{
    BuildError, RuntimeBuilder, CHAOS_ENV, DEFAULT_COOP_BUDGET, MAX_PROCESSORS, MAX_SPARE_THREADS,
};
#[cfg(not(loom))]
pub use group::{Group, GroupStats};
#[cfg(not(loom))]
pub use local::{AccessError, UltLocalKey};
#[cfg(not(loom))]
pub use panics::DetachedPanic;
#[cfg(not(loom))]
pub use place::{spawn_at, Place, PlaceError, PlaceInfo, PlaceKind, PlaceMode, StealAmount, StealOrder};
#[cfg(not(loom))]
pub use policy::auto::progress;
#[cfg(not(loom))]
pub use policy::engine::{set_footprint, CounterChoice};
#[cfg(not(loom))]
pub use policy::Policy;
#[cfg(not(loom))]
pub use prefetch::{set_data_block, DataBlock, PREFETCH_MAX_BYTES};
#[cfg(not(loom))]
pub use runtime::Runtime;
#[cfg(not(loom))]
pub use stack::{DEFAULT_STACK_SIZE, MAX_STACK_SIZE, MIN_STACK_SIZE};
#[cfg(not(loom))]
pub use stats::{BlockingStats, ProcessorStats, RegionsStopped, RuntimeStats, TcbStats};
#[cfg(not(loom))]
pub use tcb::Cancelled;
#[cfg(not(loom))]
pub use thread::{
    current, sleep, spawn, try_current, yield_now, Builder, JoinHandle, SpawnError, Thread, ThreadId,
};
#[cfg(not(loom))]
pub use trace::{DEFAULT_TRACE_BUFFER, SCHEDTRACE_ENV, TRACE_ENV};

/// Aborts the process with a message: for runtime bugs, never for user errors.
#[cfg(not(loom))]
#[cold]
#[inline(never)]
pub(crate) fn fatal(msg: &str) -> ! {
    eprintln!("elite-rt: fatal runtime error: {msg}");
    std::process::abort()
}

/// Aborts if dropped during a panic: put it around runtime code that must never unwind.
#[cfg(not(loom))]
pub(crate) struct AbortOnPanic(pub(crate) &'static str);

#[cfg(not(loom))]
impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        fatal(&format!("panic inside {}", self.0));
    }
}
