//! The runtime: its shared state, the processors' threads, `block_on`, and shutdown.
//!
//! # Shutdown
//!
//! Dropping a [`Runtime`]:
//!
//! 1. closes the registry of worker threads (`crate::blocking`: every worker is told to stop,
//!    offers of processors and queued blocking calls are revoked), raises the shutdown flag and
//!    unparks every processor and worker;
//! 2. waits until every processor's loop has stopped: each finishes the switch it is in and leaves
//!    its loop (a ULT that never yields, blocks or returns keeps its processor and therefore the
//!    drop waiting: user-level threads cannot be preempted); then joins every worker thread except
//!    those inside a blocking call, which may sleep for as long as their call does: such a thread
//!    cancels its ULT itself when the call returns, then exits;
//! 3. walks every TCB the runtime ever allocated and cancels each ULT that had not finished,
//!    whatever it was doing (queued, ready, blocked, sleeping, queued for a blocking call; not
//!    one whose blocking call runs, see step 2): its
//!    [`JoinHandle`](crate::JoinHandle) returns `Err` with a [`Cancelled`](crate::Cancelled) payload,
//!    its closure is dropped, and a started ULT's stack is unwound (its values dropped, on the
//!    thread dropping the runtime) and unmapped;
//! 4. frees pooled stacks. TCB memory is freed when the last join handle is gone (and the last
//!    thread inside a blocking call has exited).
//!
//! A runtime dropped on a processor (by one of its own ULTs, or a ULT of another runtime) raises the
//! flag and returns; steps 2 to 4 run on a thread of their own (a processor of this runtime leaves
//! its loop at that ULT's next switch).
//! A destructor that panics while step 3 unwinds a cancelled ULT aborts the process (a panic
//! during unwinding).
//!
//! # Handle accounting
//!
//! A [`JoinHandle`] reaches its TCB (in a chunk owned by [`Shared`]) and the clean-up stacks (in
//! `Shared`), so `Shared` must outlive every handle, including handles that outlive the runtime.
//! Counting handles with one shared atomic would cost two contended read-modify-writes per spawn,
//! so the count is split:
//!
//! * each processor keeps an owner-written counter: +1 for a handle created by a spawn on it, -1
//!   for a handle released by code running on it (plain load and store, no RMW);
//! * `outside_handles` (atomic) takes +1 / -1 for handles created or released on other threads, and
//!   for the claim a ULT takes while it waits in a join on another runtime's ULT (released by the
//!   waker, `wake_foreign`); it starts at a large `BIAS` that the runtime holds while it lives, so
//!   it never reaches zero then.
//!
//! When the runtime is dropped (processors joined, so their counters are final), it takes one extra
//! reference on `Shared` for the handles, then folds the processors' counters and removes the bias
//! in one `fetch_add`: the result is the number of live handles. If it is zero, the extra
//! reference is dropped at once; otherwise the outside release that brings the counter to zero
//! drops it. The extra reference is taken before the fold so that a release racing with the fold
//! always finds it.

use crate::atomics::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use crate::config::Config;
use crate::park::Idle;
use crate::policy::Policy;
use crate::pool::NodePool;
use crate::processor::{served_runq, ProcessorSet, Remote};
use crate::queue::run::RunQueue;
use crate::queue::start::{GlobalStart, NodeStart};
use crate::slot::current_processor;
use crate::stats::{Counter, ProcessorStats, RuntimeStats};
use crate::tcb::region::Chunks;
use crate::tcb::{Cancelled, JoinState, Life, TcbRef, Waiter};
use crate::thread::{JoinHandle, UltSpec};
use crate::{BuildError, RuntimeBuilder};
use std::sync::{Arc, Mutex};
use std::thread;

/// One node of the hierarchy: a bounded start-queue and the second level of the pools.
pub(crate) struct Node {
    pub(crate) start: NodeStart,
    pub(crate) tcbs: NodePool<TcbRef>,
    pub(crate) stacks: NodePool<Box<crate::tcb::Context>>,
}

/// What every processor, every join handle and the runtime handle share.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) processors: Box<[Remote]>,
    pub(crate) nodes: Box<[Node]>,
    pub(crate) global_start: GlobalStart,
    /// The one runqueue of a `central` runtime (the ablation of `RuntimeBuilder::central`); unused
    /// otherwise.
    pub(crate) central_runq: RunQueue,
    /// The cache model and each processor's counter source (see `affinity`).
    pub(crate) engine: crate::policy::engine::Engine,
    /// The places, their rules and the thieves' victims (`policy::places`).
    pub(crate) places: crate::policy::places::Places,
    /// The groups ULTs of this runtime belong to, numbered (`crate::group`).
    pub(crate) groups: crate::group::Groups,
    /// The coscheduling gate, when the runtime was built with a coscheduler in a mode that
    /// gates (`contention::gate`).
    pub(crate) cosched: Option<crate::contention::gate::Gate<crate::tcb::TcbRef>>,
    /// The round-robin turn of spawns from outside the processors (`policy::places`).
    outside_turn: Mutex<usize>,
    /// The policy the runtime was built with or last given ([`Runtime::set_policy`]): the one in
    /// force in `engine`, or `auto` (whose selector puts its candidates in force there).
    chosen: crate::policy::board::Board<Policy>,
    /// The running selector of `auto`, if `chosen` is `auto`; its decisions in `auto_log`.
    selector: Mutex<Option<crate::policy::auto::Selector>>,
    auto_log: Arc<crate::policy::auto::Log>,
    pub(crate) idle: Idle,
    /// The worker threads, spare threads and queue of blocking calls (`crate::blocking`).
    pub(crate) blocking: crate::blocking::Registry,
    shutdown: AtomicBool,
    /// Set when a stack allocation failed, cleared when a stack comes back; spawns fail fast while set.
    pub(crate) stacks_exhausted: AtomicBool,
    pub(crate) pin_failures: AtomicUsize,
    /// Every TCB chunk, on the heap or in huge-page regions.
    chunks: Mutex<Chunks>,
    outside_spawns: Counter,
    outside_ids: AtomicUsize,
    /// Handles created minus released outside the processors, plus `HANDLE_BIAS` while the runtime lives.
    outside_handles: AtomicI64,
    /// What the deadlock report reads besides the queues (see `crate::deadlock`).
    pub(crate) watch: crate::deadlock::Watch,
    /// The trace of the schedule, if one is written (`crate::trace`).
    pub(crate) tracer: Option<Arc<crate::trace::Tracer>>,
    /// The periodic summary on stderr, if asked for (`crate::trace::sched`).
    schedtrace: Mutex<Option<crate::trace::sched::SchedTrace>>,
}

/// The runtime's own share of `outside_handles` while it lives.
const HANDLE_BIAS: i64 = 1 << 48;

/// Wakes `w`, a ULT of another runtime that joined a ULT of ours, on its own runtime, then gives
/// up the claim it took on that runtime when it registered (see `thread::wait_for_exit`).
///
/// # Safety
/// `w` registered as a foreign waiter with a claim that has not been released yet.
pub(crate) unsafe fn wake_foreign(w: TcbRef) {
    let shared = w.chunk().shared() as *const Shared;
    // SAFETY: the waiter's claim keeps its runtime's shared state alive until the release below.
    unsafe { &*shared }.wake(w, None);
    // SAFETY: this is the claim the waiter took; nothing touches `shared` after it.
    unsafe { release_outside_claim(shared) };
}

/// Takes a claim on `shared` for a reference the processors' counters do not track (a handle made
/// or released outside them, a foreign waiter), given up by [`release_outside_claim`].
pub(crate) fn claim_outside(shared: &Shared) {
    shared.outside_handles.fetch_add(1, Ordering::Relaxed);
}

/// Gives up one claim on `shared` taken by [`claim_outside`] (or by a spawn from outside).
///
/// # Safety
/// `shared` is the `Arc::as_ptr` of a live `Shared` on which the caller holds a handle claim.
pub(crate) unsafe fn release_outside_claim(shared: *const Shared) {
    // SAFETY: the caller's claim keeps `shared` alive until this decrement.
    let s = unsafe { &*shared };
    if s.outside_handles.fetch_sub(1, Ordering::AcqRel) == 1 {
        // The runtime is gone and this was the last handle: drop the reference it left for us.
        // SAFETY: taken in `Runtime::drop` before the fold (see "Handle accounting").
        unsafe { Arc::decrement_strong_count(shared) };
    }
}

impl Shared {
    #[inline]
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }

    /// Wakes one parked processor, if any, after a processor published work any of them may take.
    /// With a single processor there is nobody else to wake: the publisher is that processor.
    #[inline]
    pub(crate) fn notify_any(&self) {
        if self.processors.len() > 1 {
            self.notify_any_from_outside();
        }
    }

    /// Wakes one parked processor, if any, after a thread outside the runtime published work.
    #[inline]
    pub(crate) fn notify_any_from_outside(&self) {
        self.idle.notify_one(self.processors.iter().map(|p| &*p.park));
    }

    /// Puts `policy` (no `auto`) in force in the engine; the processors take it up at their
    /// next safe points (`Processor::follow_policy`).
    pub(crate) fn put_in_force(&self, policy: &Policy) {
        self.engine.set_policy(policy);
    }

    /// Starts `auto`'s selector with `auto`'s settings (none runs).
    fn start_selector(self: &Arc<Self>, auto: &crate::policy::Auto) -> std::io::Result<()> {
        let selector = crate::policy::auto::Selector::start(self, auto, Arc::clone(&self.auto_log))?;
        *self.selector.lock().unwrap_or_else(|e| e.into_inner()) = Some(selector);
        Ok(())
    }

    /// Makes a blocked ULT ready: onto the wake-up stack of the processor the policy picks.
    ///
    /// On a processor of this runtime this defers to
    /// [`Processor::wake`](crate::processor::Processor::wake), which skips the stack when the
    /// target is the waker itself.
    #[inline]
    pub(crate) fn wake(&self, t: TcbRef, waker: Option<usize>) {
        if let Some(p) = current_processor() {
            if std::ptr::eq(&*p.shared, self) {
                return p.wake(t);
            }
        }
        let _outside = self.watch.outside_call(); // see `deadlock::external_wakers_possible`
        let target = if t.tcb().head.placed.get() {
            self.placed_wake_target(t, None)
        } else {
            self.engine.wake_target(t, waker, None)
        };
        if let Some(tracer) = &self.tracer {
            tracer.outside(crate::trace::Kind::Wake, crate::trace::id(t), 0, target as u32);
        }
        self.wake_remote(t, target);
    }

    /// Where the placed ULT `t` goes when it is woken (`policy::places`), the processors'
    /// ready counts at hand; `by`: the processor of the ULT that wakes it, if a ULT does.
    /// Inlined: into `Processor::placed_target` on the wake path of placed ULTs that
    /// `follow_placed` does not keep with their waker, and into the cold callers.
    #[inline]
    pub(crate) fn placed_wake_target(&self, t: TcbRef, by: Option<crate::policy::places::Waker>) -> usize {
        self.places.wake_target(t, by, |p| served_runq(&self.processors, &self.places, p).len())
    }

    /// Pushes `t` on `target`'s wake-up stack and unparks `target` if it sleeps
    /// ([`Shared::push_wakeup`]); when `target` is busy and has other ready work (in the runqueue
    /// it serves: [`has_other_ready_work`]), also wakes an idle processor to help.
    #[inline]
    pub(crate) fn wake_remote(&self, t: TcbRef, target: usize) {
        let target = target.min(self.processors.len() - 1);
        if !self.push_wakeup(t, target) && has_other_ready_work(&self.processors, &self.places, target) {
            // The target is busy and already has other ready work: let an idle one help.
            self.notify_any();
        }
    }

    /// Pushes `t` on processor `target`'s wake-up stack and unparks that processor if it
    /// sleeps; whether it did.
    #[inline]
    pub(crate) fn push_wakeup(&self, t: TcbRef, target: usize) -> bool {
        let remote = &self.processors[target];
        remote.wakeup.push(t);
        remote.park.notify()
    }

    /// Whether `t` is a TCB of this runtime.
    #[inline]
    pub(crate) fn is_own(&self, t: TcbRef) -> bool {
        std::ptr::eq(t.chunk().shared(), self as *const Shared as *const ())
    }

    /// Wakes whoever waited in a join on one of our ULTs, except a ULT of this runtime: that one a
    /// processor wakes itself (`Processor::wake_joiner`), and at shutdown it is cancelled with us.
    /// An OS thread is unparked; a ULT of another runtime is woken there and gives up its claim.
    pub(crate) fn wake_joiner(&self, w: Waiter) {
        match w {
            Waiter::Thread(th) => th.unpark(),
            // SAFETY: a foreign waiter holds its claim until woken (see `thread::wait_for_exit`).
            Waiter::Ult(u) if !self.is_own(u) => unsafe { wake_foreign(u) },
            Waiter::Ult(_) | Waiter::None => {}
        }
    }

    /// Allocates a chunk of TCBs and registers it for the shutdown walk.
    pub(crate) fn new_chunk(self: &Arc<Self>) -> Vec<TcbRef> {
        self.chunks.lock().unwrap_or_else(|e| e.into_inner()).push_new(self)
    }

    /// Every TCB the runtime allocated so far (for the deadlock report's walk).
    pub(crate) fn tcbs(&self) -> Vec<TcbRef> {
        let chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        chunks.iter().flat_map(|c| c.tcbs()).collect()
    }

    /// A TCB for a spawn from outside the runtime (no local pool there): from a node's pool, node
    /// 0 first, before a fresh chunk (otherwise TCBs that flow from node 0 to another node and
    /// end there would make every spawn from outside allocate a chunk: the soak test found it).
    fn outside_tcb(self: &Arc<Self>) -> TcbRef {
        if let Some(t) = self.nodes.iter().find_map(|n| n.tcbs.take_one()) {
            return t;
        }
        let mut tcbs = self.new_chunk();
        let first = tcbs.pop().unwrap_or_else(|| crate::fatal("empty TCB chunk"));
        for t in tcbs {
            self.nodes[0].tcbs.put_one(t);
        }
        first
    }

    /// Spawns from a thread that is not one of this runtime's processors.
    pub(crate) fn spawn_outside<F, T>(self: &Arc<Self>, spec: UltSpec, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        let _outside = self.watch.outside_call(); // see `deadlock::external_wakers_possible`
        let t = self.outside_tcb();
        self.engine.on_spawn(t, spec.footprint);
        let id = (self.outside_ids.fetch_add(1, Ordering::Relaxed) as u64 + 1) << 40;
        let (pinned, place) = (spec.pinned, spec.place);
        crate::thread::init_tcb(t, spec, id, 0, &self.engine, f);
        if let Some(tracer) = &self.tracer {
            tracer.outside(crate::trace::Kind::Spawn, id, 0, u32::MAX);
        }
        self.outside_spawns.bump_shared();
        claim_outside(self);
        if place.is_some() || self.places.spawn_rules {
            // (A pinned ULT without a place starts wherever it is taken first: its home then.)
            let mut turn = self.outside_turn.lock().unwrap_or_else(|e| e.into_inner());
            let (start, rule) = self.places.on_spawn(usize::MAX, false, place, &mut turn);
            drop(turn);
            let rule = match rule {
                Some(r) if pinned => Some(crate::policy::places::PlaceRule { strict: true, ..r }),
                Some(r) => Some(r),
                None if pinned => Some(crate::policy::places::PlaceRule::PINNED_WHERE_STARTED),
                None => None,
            };
            if let Some(rule) = rule {
                t.tcb().sched.place.set(rule);
                t.tcb().head.placed.set(true);
            }
            if start < self.processors.len() {
                t.tcb().head.processor.store(start, Ordering::Relaxed);
                self.wake_remote(t, start);
                return JoinHandle::new(t);
            }
        } else if pinned {
            t.tcb().sched.place.set(crate::policy::places::PlaceRule::PINNED_WHERE_STARTED);
            t.tcb().head.placed.set(true);
        }
        self.global_start.push(t.as_ptr());
        self.notify_any_from_outside();
        JoinHandle::new(t)
    }

    /// Cancels every ULT that has not finished (shutdown step 3). Processors must be stopped.
    ///
    /// Phase one completes every unfinished ULT with a [`Cancelled`] outcome, so that no join can
    /// block any more. Phase two unwinds the stacks of the ULTs that had started: their destructors
    /// run on this thread (outside any processor, so a join there returns at once, a yield or sleep
    /// acts on this OS thread), and the stacks are freed.
    ///
    /// `in_call` are the ULTs whose blocking call still runs: their threads cancel them (see
    /// [`Shared::cancel_late`]).
    fn cancel_unfinished(&self, in_call: &[TcbRef]) {
        let chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        let unfinished: Vec<TcbRef> = chunks
            .iter()
            .flat_map(|c| c.tcbs())
            .filter(|t| matches!(t.tcb().head.life.get(), Life::Queued | Life::Started))
            .filter(|t| !in_call.contains(t))
            .collect();
        drop(chunks);
        for &t in &unfinished {
            // SAFETY: every processor has stopped, so this thread owns every unfinished ULT but
            // those in `in_call`, left to their calls' threads.
            unsafe { self.cancel(t) };
        }
        crate::tcb::FORCED_UNWIND.with(|f| f.set(true));
        for &t in &unfinished {
            // SAFETY: as above, this thread owns the suspended context.
            unsafe { Self::unwind(t) };
        }
        crate::tcb::FORCED_UNWIND.with(|f| f.set(false));
    }

    /// Cancels `t`, a ULT whose blocking call returned after the runtime shut down (the walk of
    /// step 3 left it to the thread that ran its call, which calls this): what the walk does to
    /// every other unfinished ULT.
    pub(crate) fn cancel_late(&self, t: TcbRef) {
        // SAFETY: the call's thread owns `t`: the walk skipped it (it was in `in_call`), no
        // processor runs any more, and its call has returned.
        unsafe { self.cancel(t) };
        let outer = crate::tcb::FORCED_UNWIND.with(|f| f.replace(true));
        // SAFETY: as above.
        unsafe { Self::unwind(t) };
        crate::tcb::FORCED_UNWIND.with(|f| f.set(outer));
    }

    /// Shutdown, phase one for `t`: completes it with a [`Cancelled`] outcome, so that no join
    /// of it blocks any more.
    ///
    /// # Safety
    /// The caller owns the unfinished ULT `t` (no processor runs, nobody else will touch it).
    unsafe fn cancel(&self, t: TcbRef) {
        let tcb = t.tcb();
        if !tcb.head.task.get().is_null() {
            // SAFETY: per the contract the task never completed and nobody else can run it now.
            // (A null task: a detached ULT cancelled while dropping its own result.)
            unsafe { (tcb.head.vtable.get().fail)(tcb.head.task.get(), Box::new(Cancelled)) };
        }
        tcb.head.life.set(Life::Exited);
        tcb.head.exit_processor.set(0);
        let prev = tcb.head.join.publish_complete();
        if prev & JoinState::DETACHED != 0 {
            // SAFETY: detached and complete: this thread is the last owner of the task.
            unsafe { tcb.drop_task() };
        } else if prev & JoinState::WAITER != 0 {
            // SAFETY: WAITER seen through the AcqRel RMW: the waiter field is published.
            self.wake_joiner(unsafe { std::mem::replace(&mut *tcb.links.waiter.get(), Waiter::None) });
        }
    }

    /// Shutdown, phase two for `t`: unwinds its stack, if it has one (its values are dropped on
    /// the calling thread, which has `FORCED_UNWIND` set), and frees it.
    ///
    /// # Safety
    /// As for [`Shared::cancel`], and `t` was cancelled.
    unsafe fn unwind(t: TcbRef) {
        // SAFETY: per the contract the caller owns the suspended context.
        if let Some(mut ctx) = unsafe { (*t.tcb().exec.context.get()).take() } {
            ctx.co.force_unwind(); // the ULT's values are dropped here
            drop(ctx); // and its stack freed
        }
    }
}

/// A running set of processors that execute ULTs.
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
/// let sum = rt.block_on(|| {
///     let hs: Vec<_> = (0..1000u64).map(|i| elite_rt::spawn(move || i)).collect();
///     hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
/// });
/// assert_eq!(sum, 499_500);
/// ```
///
/// Dropping the runtime shuts it down; see the module `runtime` docs in the crate documentation
/// ([Shutdown](crate#shutdown)).
pub struct Runtime {
    shared: Arc<Shared>,
    /// The processors, which worker threads pass among themselves (`crate::blocking`).
    set: Arc<ProcessorSet>,
}

impl Runtime {
    /// A builder to configure a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::new()
    }

    /// A runtime with the default configuration (one processor per CPU).
    pub fn new() -> Result<Runtime, BuildError> {
        RuntimeBuilder::new().build()
    }

    pub(crate) fn start(config: Config) -> Result<Runtime, BuildError> {
        let chunks = Chunks::new(config.huge_page_tcbs);
        // The host's costs, which the thresholds derive from (`sync::host`): measured once per
        // process, before any ULT contends.
        crate::sync::host_costs();
        // The line costs again if they could not be measured so far (a busy moment, a process that
        // started with runtimes of one processor) or their measurement is old: this runtime's
        // locks can bounce.
        crate::sync::host::measure_lines_if_due(config.topology.num_processors());
        // Stack overflows in ULTs are reported by name (once per process; see `crate::fault`).
        crate::fault::install();
        // The barrier a biased lock's revoker needs (once per process; see `crate::sync::bias`).
        crate::sync::bias::prepare();
        let topo = &config.topology;
        let processors = (0..topo.num_processors())
            .map(|i| Remote::new(topo.node_of(i), config.start_queue_limit, topo.num_processors() > 1))
            .collect();
        let nodes = (0..topo.num_nodes())
            .map(|_| Node {
                start: NodeStart::new(Some(config.node_start_queue_limit)),
                tcbs: NodePool::new(usize::MAX),
                stacks: NodePool::new(config.node_stack_pool_limit),
            })
            .collect();
        let chosen = crate::policy::board::Board::new(config.policy.clone());
        let mut engine = crate::policy::engine::Engine::new(
            &config.policy.initial(),
            config.needs,
            &config.model_cache,
            topo.num_processors(),
        );
        engine.place_aggregation(topo);
        engine.place_little_data(topo);
        let mut places = crate::policy::places::Places::new(topo, config.places);
        if config.places.avoid_costly {
            let costs = crate::sync::host_costs();
            places = places.with_reload(crate::policy::places::ReloadCosts::new(
                topo,
                &config.model_cache,
                costs.line_fetch_ns,
                costs.ticks_per_ns,
            ));
        }
        let num_processors = topo.num_processors();
        let (n, cap, keep_alive) = (topo.num_processors(), config.max_spare_threads, config.spare_keep_alive);
        let tracer = match &config.trace {
            Some(path) => Some(Arc::new(
                crate::trace::Tracer::create(path, n, config.trace_buffer, engine.selected().policy.name())
                    .map_err(|error| BuildError::Trace { path: path.clone(), error })?,
            )),
            None => None,
        };
        let cosched = match &config.coschedule {
            Some(cs) if cs.mode() != crate::contention::Mode::Default => {
                // Bandwidth domains: the topology's nodes.
                let mut domains = vec![Vec::new(); topo.num_nodes()];
                for p in 0..topo.num_processors() {
                    domains[topo.node_of(p)].push(p);
                }
                domains.retain(|d| !d.is_empty());
                Some(crate::contention::gate::Gate::new(topo.num_processors(), domains))
            }
            _ => None,
        };
        let shared = Arc::new(Shared {
            cosched,
            config,
            engine,
            places,
            groups: crate::group::Groups::new(num_processors),
            outside_turn: Mutex::new(0),
            chosen,
            selector: Mutex::new(None),
            auto_log: Arc::default(),
            processors,
            nodes,
            global_start: GlobalStart::new(),
            central_runq: RunQueue::new(),
            idle: Idle::new(),
            blocking: crate::blocking::Registry::new(n, cap, keep_alive),
            shutdown: AtomicBool::new(false),
            stacks_exhausted: AtomicBool::new(false),
            pin_failures: AtomicUsize::new(0),
            chunks: Mutex::new(chunks),
            outside_spawns: Counter::default(),
            outside_ids: AtomicUsize::new(0),
            outside_handles: AtomicI64::new(HANDLE_BIAS),
            watch: crate::deadlock::Watch::new(num_processors),
            tracer,
            schedtrace: Mutex::new(None),
        });
        if let Some(cs) = &shared.config.coschedule {
            cs.attach(&shared).map_err(|reason| BuildError::Conflict { field: "coschedule", reason })?;
        }
        crate::deadlock::register(&shared);
        let rt = Runtime { set: Arc::new(ProcessorSet::new(shared.processors.len())), shared };
        // One worker thread per processor, each offered its processor.
        rt.shared.blocking.start(&rt.shared, &rt.set).map_err(BuildError::Thread)?; // `rt` is dropped here and stops what started
        if let Some(auto) = rt.shared.config.policy.auto_settings() {
            rt.shared.start_selector(auto).map_err(BuildError::Thread)?;
        }
        if let Some(period) = rt.shared.config.schedtrace {
            let summary =
                crate::trace::sched::SchedTrace::start(&rt.shared, period).map_err(BuildError::Thread)?;
            *rt.shared.schedtrace.lock().unwrap_or_else(|e| e.into_inner()) = Some(summary);
        }
        Ok(rt)
    }

    /// How many times `auto`'s selectors woke so far (for tests).
    #[cfg(test)]
    pub(crate) fn auto_looks(&self) -> u64 {
        self.shared.auto_log.looks()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Number of processors.
    pub fn processors(&self) -> usize {
        self.shared.processors.len()
    }

    /// Every place of this runtime with its processors: the machine, each node, each data (or
    /// unified) cache (named by its first processor), each processor; in that order.
    ///
    /// ```
    /// use elite_rt::{Place, PlaceKind};
    /// let rt = elite_rt::Runtime::builder().topology("2 nodes x 2 cores, 1 MiB L2 per core").build()?;
    /// let places = rt.places();
    /// assert_eq!(places[0].place, Place::machine());
    /// assert_eq!(places.iter().filter(|p| p.place.kind() == PlaceKind::Node).count(), 2);
    /// assert_eq!(places.iter().filter(|p| p.place.kind() == PlaceKind::Cache { level: 2 }).count(), 4);
    /// assert_eq!(places.last().unwrap().processors, [3]);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn places(&self) -> Vec<crate::PlaceInfo> {
        self.shared.places.infos.clone()
    }

    /// The processors of `place` in this runtime, ascending; an error that says what exists when
    /// the runtime has no such place.
    pub fn processors_of(&self, place: &crate::Place) -> Result<Vec<usize>, crate::PlaceError> {
        place.processors(&self.shared.config.topology)
    }

    /// The kind of the work-stealing places ([`RuntimeBuilder::place_level`](crate::RuntimeBuilder::place_level)).
    pub fn place_level(&self) -> crate::PlaceKind {
        self.shared.config.places.level
    }

    /// The topology the processors are laid out on.
    pub fn topology(&self) -> &elite_affinity::Topology {
        &self.shared.config.topology
    }

    /// Name of the scheduling policy: the one it was built with, or last given to
    /// [`set_policy`](Self::set_policy) (`auto` for [`Policy::auto`]; what `auto` put in force is
    /// [`RuntimeStats::policy`]).
    pub fn policy_name(&self) -> &'static str {
        self.shared.chosen.current().name()
    }

    /// The scheduling policy: the one it was built with, or last given to
    /// [`set_policy`](Self::set_policy).
    pub fn policy(&self) -> &Policy {
        self.shared.chosen.current()
    }

    /// Switches the scheduling policy of the running runtime to `policy` (or, for
    /// [`Policy::auto`], to `auto`'s selection among its candidates; a previous `auto` stops).
    ///
    /// Each processor takes the new policy up at a safe point of its loop (between two runs of
    /// ULTs: at least every 64 rounds of its loop, and whenever it runs out of work) and gives
    /// every ULT waiting in its runqueue the key the new policy gives it there; until then it
    /// keeps scheduling by the old one, and a ULT woken meanwhile goes wherever either policy
    /// sends it. No ULT is lost or run twice: the re-keying moves entries within one
    /// runqueue, under its lock. A policy that needs cache misses gets its counter sources
    /// opened by each processor as it takes the policy up, and from then on each run that ends
    /// there is recorded as the policy needs (stamps, misses), whatever the policy before it
    /// recorded; records a policy keeps per ULT start from what the ULT's earlier runs left, or
    /// nothing. Every value
    /// given is kept until the runtime is dropped (a value equal to one given before, the same
    /// built-in policy or a clone of the same custom one, is not kept twice). While `auto` runs,
    /// this call first stops its selector thread and waits for it to end (it wakes at once from
    /// its wait); called from a ULT, that wait holds the ULT's processor.
    ///
    /// ```
    /// use elite_rt::policy::Policy;
    ///
    /// let rt = elite_rt::Runtime::builder().processors(2).build()?;
    /// assert_eq!(rt.policy_name(), "no-affinity");
    /// rt.set_policy(Policy::virtual_time())?;
    /// assert_eq!(rt.policy_name(), "virtual-time");
    /// let sum: u64 = rt.block_on(|| (0..100).map(|i| elite_rt::spawn(move || i)).map(|h| h.join().unwrap()).sum());
    /// assert_eq!(sum, 4950);
    /// assert_eq!(rt.stats().policy, "virtual-time");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`BuildError::Thread`] when `policy` is `auto` and the operating system refused the
    /// thread of its selector (the policy in force is then `auto`'s first candidate).
    pub fn set_policy(&self, policy: Policy) -> Result<(), BuildError> {
        let shared = &self.shared;
        let mut selector = shared.selector.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = selector.take() {
            old.stop();
        }
        shared.put_in_force(&policy.initial());
        shared.chosen.set(policy.clone(), Policy::same_as, |_| {});
        drop(selector);
        if let Some(auto) = policy.auto_settings() {
            shared.start_selector(auto).map_err(BuildError::Thread)?;
        }
        Ok(())
    }

    /// Times a thread taking a processor over could not pin itself to the processor's CPU (the
    /// runtime runs on regardless): once per processor at start-up, and once more for each failed
    /// pin of a spare thread taking a processor over at a [`blocking`](crate::blocking) call.
    pub fn pin_failures(&self) -> usize {
        self.shared.pin_failures.load(Ordering::Relaxed)
    }

    /// Runs `f` as the root ULT and blocks the calling thread until it returns its value.
    ///
    /// A panic in `f` is resumed on the caller. Called from a ULT, it blocks that ULT only.
    ///
    /// While it waits, the calling thread watches for a deadlock: when every ULT is blocked and
    /// nothing can wake one for the grace period, it reports each blocked ULT and what it waits
    /// on, as [`RuntimeBuilder::on_deadlock`] says (by default on stderr, waiting on); see
    /// [`deadlock`](crate::deadlock), and [`try_block_on`](Self::try_block_on) for the report
    /// as an error.
    pub fn block_on<F, R>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        let h = self.spawn_with(UltSpec::named("root"), f);
        // The caller's wait watches for a deadlock (`crate::deadlock`): never an `Err` here.
        let out = crate::deadlock::join_root(&self.shared, h, false)
            .unwrap_or_else(|_| crate::fatal("block_on's watch gave up"));
        match out {
            Ok(r) => r,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }

    /// Spawns a ULT on this runtime from any thread; see [`spawn`](crate::spawn) for the inside version.
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_with(UltSpec::default(), f)
    }

    /// Spawns without the `'static` bound; callers guarantee the borrow outlives the ULT (block_on
    /// joins before returning).
    pub(crate) fn spawn_with<F, T>(&self, spec: UltSpec, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        let spec = spec.with_default_stack(self.shared.config.stack_size);
        match current_processor() {
            Some(p) if Arc::ptr_eq(&p.shared, &self.shared) => crate::thread::spawn_on(p, spec, f),
            _ => self.shared.spawn_outside(spec, f),
        }
    }

    /// A snapshot of every processor's counters.
    pub fn stats(&self) -> RuntimeStats {
        let topo = &self.shared.config.topology;
        RuntimeStats {
            processors: self
                .shared
                .processors
                .iter()
                .enumerate()
                .map(|(i, r)| ProcessorStats { processor: i, node: topo.node_of(i), ..r.stats.snapshot() })
                .collect(),
            outside_spawns: self.shared.outside_spawns.get(),
            policy: self.shared.engine.selected().policy.name(),
            policy_generation: self.shared.engine.generation(),
            auto: self.shared.auto_log.snapshot(),
            counter_sources: self.shared.engine.sources(),
            blocking: self.shared.blocking.stats(),
            groups: self.shared.groups.stats(),
            tcbs: self.shared.chunks.lock().unwrap_or_else(|e| e.into_inner()).stats(),
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // `auto`'s selector first: it switches policies while it runs.
        if let Some(selector) = self.shared.selector.lock().unwrap_or_else(|e| e.into_inner()).take() {
            selector.stop();
        }
        // The summary too (it reads the processors' counters).
        drop(self.shared.schedtrace.lock().unwrap_or_else(|e| e.into_inner()).take());
        // The coscheduler's gate: closed, its controller stopped (held ULTs are cancelled below
        // with every other unfinished one).
        if let Some(gate) = &self.shared.cosched {
            gate.close();
        }
        if let Some(cs) = &self.shared.config.coschedule {
            cs.stop();
        }
        let shared = self.shared.clone();
        let set = self.set.clone();
        // 1. close the registry (every worker's loop stops at its next round), raise the flag,
        //    unpark everyone.
        shared.blocking.close();
        shared.shutdown.store(true, Ordering::SeqCst);
        for p in shared.processors.iter() {
            p.park.force_unpark();
        }
        if current_processor().is_none() {
            finish_shutdown(shared, set);
            return;
        }
        // Dropped on a processor (by a ULT, or by code its loop runs): joining its own processor
        // here would wait forever, and unwinding another runtime's ULTs here would run their
        // destructors inside this processor's context. Finish on a thread of its own; a processor
        // of this runtime leaves its loop at the ULT's next switch.
        let spawned =
            thread::Builder::new().name("elite-shutdown".into()).spawn(move || finish_shutdown(shared, set));
        if spawned.is_err() {
            crate::fatal("could not start a thread to shut the runtime down (dropped from its own ULT)");
        }
    }
}

/// Shutdown steps 2 to 5 (see the module docs); the flag is raised and processors unparked.
fn finish_shutdown(shared: Arc<Shared>, set: Arc<ProcessorSet>) {
    // 2. wait for every processor to stop, join the threads not inside a blocking call.
    let in_call = shared.blocking.stop_all();
    // 3. cancel what did not finish; 4. free pooled stacks now rather than with the last handle.
    shared.cancel_unfinished(&in_call);
    // SAFETY: every processor's loop has stopped (step 2), and nothing runs them any more.
    unsafe { set.retire() };
    // The processors' last trace events were flushed by `retire`: the trace is complete.
    if let Some(tracer) = &shared.tracer {
        tracer.finish();
    }
    for n in shared.nodes.iter() {
        n.stacks.clear();
    }
    // 5. hand `Shared` over to the handles still alive (see "Handle accounting").
    let for_handles = Arc::into_raw(shared.clone());
    let on_processors =
        shared.processors.iter().fold(0u64, |sum, p| sum.wrapping_add(p.handles.get())) as i64;
    let delta = on_processors - HANDLE_BIAS;
    shared.watch.finish(); // nothing of this runtime runs any more (for `crate::deadlock`)
    let live = shared.outside_handles.fetch_add(delta, Ordering::AcqRel) + delta;
    if live == 0 {
        // SAFETY: `for_handles` came from `Arc::into_raw` just above and no handle is left to use it.
        unsafe { drop(Arc::from_raw(for_handles)) };
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("processors", &self.processors())
            .field("topology", &self.shared.config.topology.to_string())
            .field("policy", &self.policy_name())
            .finish()
    }
}

/// Whether processor `target`, which a wake-up found awake, already has other ready work
/// waiting: the runqueue it serves holds ULTs. That queue is its own, or under
/// [`RuntimeBuilder::place_level`](crate::RuntimeBuilder::place_level) the one its work-stealing
/// place shares ([`Places::runq_of`](crate::policy::places::Places::runq_of), the queue
/// `Shared::placed_wake_target` and the balance clause read too).
///
/// A hint, read without synchronization as the other readers of a queue's length take it:
/// the wake-up itself is published by the push onto `target`'s wake-up stack and its
/// `ParkSlot::notify` (whose fence orders it before this read), so a stale length only decides
/// whether an idle processor is woken to help (a processor whose own enqueue turns a runqueue
/// non-empty wakes one itself: `Processor::deliver`). Under places the queue read must be the
/// served one: a processor that is not its place's first never fills its own, so reading that
/// one never woke a helper for work queued behind it. Without places `runq_of(target)` is
/// `target`, the same queue as before, at the price of one load from the places' table
/// (read-only after build) on the path where the target was awake.
#[inline]
fn has_other_ready_work(
    processors: &[Remote],
    places: &crate::policy::places::Places,
    target: usize,
) -> bool {
    served_runq(processors, places, target).len() > 0
}

#[cfg(test)]
mod tests {
    use super::{has_other_ready_work, Remote};
    use crate::policy::places::two_processors_sharing_an_l3;

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn a_woken_target_is_busy_with_the_queue_it_serves() {
        // Processor 1 serves processor 0's runqueue, and its own stays empty.
        let (places, own) = two_processors_sharing_an_l3();
        let processors: Vec<Remote> = (0..2).map(|_| Remote::new(0, 64, true)).collect();
        assert!(!has_other_ready_work(&processors, &places, 1), "nothing ready anywhere");
        let owner = std::sync::Arc::new(());
        let chunk = crate::tcb::Chunk::allocate(&owner);
        let a = chunk.tcbs().next().expect("a TCB");
        processors[0].runq.push(0, a);
        // Processor 1's own runqueue is empty, but the shared queue it serves holds a ready ULT.
        assert!(has_other_ready_work(&processors, &places, 1));
        assert!(has_other_ready_work(&processors, &places, 0));
        // Without places each processor serves its own queue.
        assert!(!has_other_ready_work(&processors, &own, 1));
        assert!(has_other_ready_work(&processors, &own, 0));
        while processors[0].runq.pop_best().is_some() {}
    }
}
