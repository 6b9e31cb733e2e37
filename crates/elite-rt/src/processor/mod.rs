//! A processor: one pinned OS thread running ULTs, and the state split by who may touch it.
//!
//! * [`Core`]: written only by the OS thread running the processor (pools, own start-queue end,
//!   deathrow, timers, the current ULT). ULT code running on this processor reaches it too, through
//!   [`Processor::core`], because it runs on the same OS thread while the loop is suspended in
//!   `resume`; the loop never holds a borrow of it across a switch. Which OS thread that is changes
//!   only at a blocking call's handoff, from one round of the loop to the next, under the
//!   hand-over protocol of `crate::blocking` (the processors live in a [`ProcessorSet`] and OS
//!   threads take them over; see there for who owns the `Core` at each moment).
//! * [`Remote`]: what other threads reach: the wake-up and clean-up stacks, the start-queue stealer,
//!   the runqueue (under its own lock), the park slot, the counters.
//!
//! # The loop (DESIGN §4)
//!
//! 1. Drain the wake-up stack into the runqueue, drain the clean-up stack, fire due timers.
//! 2. Run the `next` slot's ULT, else the runqueue's best; but every 64th round, at most once
//!    per 10 ms (`find::START_WAIT`), and after a yield, start one ULT from the start-queues
//!    first, and at the other 64th rounds, or when there is none, run the runqueue's
//!    *lowest*-priority ULT first, so that ready ULTs that keep each other going cannot keep
//!    never-started or long-ready ones waiting for ever.
//!    A yield with other ULTs ready skips the loop: the yielder goes behind them and the best
//!    runs at once (`requeue_yielded`, `hand_off`); a round-robin of many yielders takes them
//!    from the runqueue in batches, one lock per batch (`queue::run::YieldBatch`), and looks for
//!    the loop's errands and start-queue entries once per batch (`yield_from_batch`).
//! 3. Otherwise start a ULT from the start-queues: own, node, global (the global and node levels are
//!    also looked at every 61st round so they cannot starve behind a busy local queue).
//! 4. Otherwise steal, nearest distance group first, a random victim inside each group: first its
//!    start-queue (those ULTs have no stack and no cache footprint yet), then the low-affinity part
//!    of its runqueue. Not while ULTs that ran here went to a saturated lock's home since the
//!    last idle step (`sync::mutex::gather`, whose [`Pauses`] keep the rules): then step 5
//!    pauses first, and the first steal from a runqueue after a pause takes one ULT, a probe; a
//!    probe that stays starts a probation of single steals (probes), and probes that keep
//!    staying for 1 ms end the pauses.
//! 5. Otherwise spin a little, then park (see `crate::park`). The park is noted for the deadlock
//!    report (with or without a timer), and a processor that leaves it while a report is being
//!    taken waits until it is (`crate::deadlock`). After ULTs went home, instead: park at once
//!    for the pause (50 µs, doubled each such idle step in a row up to 2 ms), woken early only by
//!    work aimed at it (a wake-up onto its stack, a notification of its own slot, which a lock's
//!    failed trial sends too: `sync::mutex::gather`); a processor
//!    looking for a helper (`Idle::notify_one`) passes a pausing one by, and what it could steal
//!    does not end the pause. A home that drains such ULTs from its wake-up stack wakes no helper
//!    for them.
//!
//! In chaos mode (`chaos`) step 2 picks at random, a yield migrates the ULT, and a wake-up may
//! go to a random processor; a pinned ULT (`Builder::pinned`) is never stolen (a thief hands it
//! back through its processor's wake-up stack), never sent elsewhere, and starts where spawned.
//!
//! Every transition of a ULT (yield, park, sleep, exit) is finished after the switch by whoever
//! resumed it: the loop, on the processor's own stack, or a joiner running it through the join fast
//! path (`start_inline`), on the joiner's stack; never on the ULT's own stack, so a TCB is never
//! visible to another processor while code runs on its stack. (The one step a ULT takes itself is
//! publishing its exit, `publish_from_ult`, which hands out only its result.)
//!
//! # Files, by the steps of the loop
//!
//! * this file: the processor, its owned [`Core`] and shared [`Remote`] parts, [`ProcessorSet`];
//! * `run`: the loop (step 1 and the dispatch), switching into a ULT and finishing its
//!   transition, the direct hand-off, the yield batch's round-robin, the join fast path;
//! * `find`: steps 2 to 5, finding work (the ready set, the start-queues, stealing, idling);
//! * `wake`: making a ULT ready, here or on another processor;
//! * `exit`: a ULT's exit (publish, settle), clean-up notes, reclaiming joined TCBs;
//! * `alloc`: TCBs, contexts (stacks), ULT ids, start-queue pushes;
//! * `worker`: the OS thread that carries a processor;
//! * `chaos`: the chaos mode's decisions;
//! * `budget`: the cooperative budget (a ULT's operations on the primitives per turn).

use crate::atomics::{AtomicPtr, AtomicUsize, Ordering};
use crate::park::ParkSlot;
use crate::pool::LocalPool;
use crate::queue::cleanup::{CleanupStack, NoteBatch};
use crate::queue::deathrow::DeathrowCount;
use crate::queue::deque::Deque;
use crate::queue::next::NextSlot;
use crate::queue::run::{RunQueue, YieldBatch};
use crate::queue::start::NodeStart;
use crate::queue::wakeup::WakeupStack;
use crate::runtime::Shared;
use crate::stats::{Counter, Counters};
use crate::sync::mutex::gather::Pauses;
use crate::tcb::{Context, Tcb, TcbRef};
use crate::timer::Timers;
use crossbeam_utils::CachePadded;
use std::cell::{Cell, UnsafeCell};
use std::ptr;
use std::sync::Arc;

mod alloc;
pub(crate) mod budget;
mod chaos;
mod cosched;
mod exit;
mod find;
mod run;
mod trace;
mod trial;
mod wake;
pub(crate) mod worker;

pub(crate) use chaos::decision_point;
#[cfg(test)]
pub(crate) use find::next_random_of; // (the prefetch measurement's tests draw with it)
pub(crate) use run::Inline;

/// The shared part of a processor.
///
/// Fields written by different parties sit on separate cache lines: the wake-up and clean-up
/// stacks (pushed by others), the runqueue (owner and thieves), the park slot (wakers), and the
/// owner-written counters, so that counting on the hot path never invalidates a line that idle
/// processors poll.
pub(crate) struct Remote {
    pub(crate) node: usize,
    /// The processor's name (its address, as `sync::lock_word` names a bias owner), set once when
    /// the processor is made; 0 before.
    pub(crate) name: AtomicUsize,
    /// The own start-queue: pushed and popped by the owner, stolen from by others.
    pub(crate) start: Deque<Tcb>,
    pub(crate) wakeup: CachePadded<WakeupStack>,
    pub(crate) cleanup: CachePadded<CleanupStack>,
    pub(crate) runq: CachePadded<RunQueue>,
    /// The ULT to run next, outside the runqueue: set when a ULT becomes ready while nothing
    /// else here is (a joiner woken by the exit of the ULT it joined, the other end of a
    /// hand-off), like Go's runnext. The owner's path costs no atomic read-modify-write; a thief
    /// takes it only when it is stranded (`queue::next`, `Processor::rescue_stranded`).
    pub(crate) next: CachePadded<NextSlot<Tcb>>,
    pub(crate) park: CachePadded<ParkSlot>,
    pub(crate) stats: CachePadded<Counters>,
    /// Join handles created minus handles released on this processor (see `runtime`, "Handle
    /// accounting"); owner-written, may wrap below zero.
    pub(crate) handles: CachePadded<Counter>,
}

/// The runqueue processor `p` serves: its own, or under
/// [`RuntimeBuilder::place_level`](crate::RuntimeBuilder::place_level) the one its work-stealing
/// place shares, kept by the place's first processor
/// ([`Places::runq_of`](crate::policy::places::Places::runq_of)). Every reader of "the ready
/// ULTs at `p`" reads this one: a processor that is not its place's first never fills its own.
#[inline]
pub(crate) fn served_runq<'a>(
    processors: &'a [Remote],
    places: &crate::policy::places::Places,
    p: usize,
) -> &'a RunQueue {
    &processors[places.runq_of(p)].runq
}

impl Remote {
    /// The shared part of a processor of node `node`; `stealable`: the runtime has other
    /// processors, which may take a ULT stranded in its `next` slot or steal from its
    /// start-queue.
    pub(crate) fn new(node: usize, start_limit: usize, stealable: bool) -> Remote {
        Remote {
            node,
            name: AtomicUsize::new(0),
            start: Deque::new(start_limit, stealable),
            wakeup: CachePadded::new(WakeupStack::new()),
            cleanup: CachePadded::new(CleanupStack::new()),
            runq: CachePadded::new(RunQueue::new()),
            next: CachePadded::new(NextSlot::new(stealable)),
            park: CachePadded::new(ParkSlot::new()),
            stats: CachePadded::new(Counters::default()),
            handles: CachePadded::new(Counter::default()),
        }
    }
}

/// The owned part of a processor.
pub(crate) struct Core {
    /// The configured start-queue limit, capped at the deque's capacity.
    start_limit: usize,
    tcb_pool: LocalPool<TcbRef>,
    /// Pooled contexts (a stack each, see [`Context`]): the stack pool.
    stack_pool: LocalPool<Box<Context>>,
    deathrow: DeathrowCount,
    timers: Timers,
    /// Set by a yield: the loop starts one ULT from the start-queue before going back to the
    /// runqueue, so a yielding ULT cannot keep a freshly spawned one from ever starting.
    admit_one: bool,
    /// Yielding ULTs taken from and going back to the runqueue's zero lane, one lock per
    /// batch (see [`YieldBatch`]): empty except inside a chain of switches of `run_ult`.
    batch: YieldBatch,
    /// The oldest half of a full own start-queue on its way down a level (`push_start_overflow`):
    /// a buffer kept here, not on the spawning ULT's (possibly small) stack.
    spill: Vec<*mut Tcb>,
    /// The child a joiner is running through the join fast path, if any (see `start_inline`).
    inline_child: Option<TcbRef>,
    /// A child of the join fast path that switched while unwinding, to anchor after its joiner's
    /// switch (`crate::anchor`, "Where the invariant costs something else").
    pending_anchor: Option<crate::blocking::CallRef>,
    /// Join fast paths in progress on this OS thread's stack (no hand-off inside one), plus one
    /// for good in chaos mode (whose loop picks the next ULT at random): no direct hand-off while
    /// non-zero, one test on the hand-off path for both.
    no_hand_off: u32,
    /// Pinned ULTs started here and not exited (`Builder::pinned`): while there are any, blocking
    /// calls made here run on this thread instead of handing the processor, and with it the
    /// pinned ULTs, to another OS thread (`crate::blocking::switched`).
    pinned_here: u32,
    /// Clean-up notes for other processors, batched per exiting processor (see `note_joined`).
    notes: Vec<Option<Box<NoteBatch>>>,
    id_seq: u64,
    /// Steps left until the next 61st (see [`Core::step`]).
    tick: u32,
    rounds: u32,
    /// When the next starvation turn that starts a never-started ULT is due (`sync::ticks`), and
    /// the least time between two in ticks (`find::START_WAIT`; see `take_ready`).
    starvation_due: u64,
    starvation_wait: u64,
    rng: u64,
    /// The round-robin turn of this processor's spawns (`policy::places`).
    pub(crate) turn: usize,
    /// What this processor, idle, last saw of the others' `next` slots (`find`, "Stranded ULTs").
    strands: find::StrandWatch,
    /// A reusable buffer (stolen batches, due timers).
    scratch: Vec<TcbRef>,
    /// Steal avoidance's part (`policy::places`, "Costly steals"), boxed: thieves under
    /// `avoid_costly_steals` touch it, and the hand-off rule's balance clause its run lengths
    /// (`policy::hand_off`, "Balance": `wake::balanced_target`).
    pub(super) avoid: Box<find::Avoidance>,
    /// The gathering's part (`sync::mutex::gather`): ULTs sent to a lock's home, and the pauses
    /// of stealing that follow.
    pauses: Pauses,
    /// Whether this processor runs steal trials (`trial`): configured, more than one
    /// processor, neither `central` nor the chaos mode.
    trials_on: bool,
    /// Its steal trials (`trial`): whether its steals pay.
    trials: trial::StealTrials,
    /// The policy's per-processor part: counter source, run and entry counts (see `affinity`).
    engine: crate::policy::engine::Local,
    /// Whether prefetching declared blocks pays here, measured (`crate::prefetch`).
    payoff: crate::prefetch::Payoff,
}

/// Every how many steps (start-queue takes, hand-offs, yields that found nothing else) the
/// processor looks past its fast paths: the shared start-queue levels first, the loop's round.
const TICK_PERIOD: u32 = 61;

impl Core {
    /// Counts one step; true at every [`TICK_PERIOD`]-th (a countdown: cheaper than a modulo on
    /// the switch path).
    #[inline]
    fn step(&mut self) -> bool {
        self.tick -= 1;
        if self.tick == 0 {
            self.tick = TICK_PERIOD;
            return true;
        }
        false
    }

    /// Whether the starvation turn that starts a never-started ULT is due (`find::START_WAIT`
    /// since the last one); if so, the next one is due that long from now.
    #[cold]
    fn starvation_turn_due(&mut self) -> bool {
        let now = crate::sync::ticks();
        if now < self.starvation_due {
            return false;
        }
        self.starvation_due = now.saturating_add(self.starvation_wait);
        true
    }
}

/// A processor as its OS thread sees it.
pub(crate) struct Processor {
    pub(crate) index: usize,
    /// Unique among all processors of all runtimes of the process, never reused, never 0: what a
    /// biased spin lock names its owner by (`sync::bias`).
    pub(crate) uid: usize,
    pub(crate) shared: Arc<Shared>,
    /// `&shared.processors[index]`, resolved once (it is on every hot path).
    remote: *const Remote,
    /// The start-queue level of this processor's node, resolved once (every yield looks at it).
    node_start: *const NodeStart,
    /// The runqueue this processor serves, resolved once: its own; the one its work-stealing
    /// place shares (`RuntimeBuilder::place_level`: the first processor's of the place); or the
    /// one global queue of a `central` runtime.
    runq: *const crate::queue::run::RunQueue,
    core: UnsafeCell<Core>,
    current: Cell<Option<TcbRef>>,
    /// Operations the running ULT may still make before the next one yields (`budget`); set
    /// at every switch into a ULT. Only this processor's OS thread touches it.
    pub(super) budget: Cell<u32>,
    /// What `budget` is set to at a switch: the configured budget, or `u32::MAX` when it is off.
    pub(super) budget_turn: u32,
    /// `config.coop_budget.is_some()`.
    budget_on: bool,
    // Copies of configuration read on the hot paths (one load instead of two).
    central: bool,
    /// `config.gather_locks && !config.central` (see `sync::mutex::gather`).
    pub(crate) gather_locks: bool,
    check_canary: bool,
    /// What runs at every switch of a ULT here: nothing, the policy's end of a run only, or
    /// every hook (a hardware counter's beginning of a run, the canary check of unguarded
    /// stacks, the trace); `run_ult` has a copy of its loop for each answer. Owner-only: set
    /// when the processor is made and again whenever it takes up another policy
    /// (`follow_policy`, between runs), so that a policy put in force by `set_policy` (or
    /// `auto`) records its runs even where the one before recorded nothing.
    hooked: Cell<Hooked>,
    stack_size: usize,
    /// The prefetch window in lines (see `crate::prefetch`): from the cache model's cache when
    /// `config.prefetch`, 0 (no prefetching of declared blocks) otherwise.
    pub(crate) prefetch_lines: usize,
    /// The chaos mode's state (`chaos`); off unless the runtime was built with a seed.
    chaos: chaos::Chaos,
    /// `central || chaos.on || tracing`: one test on the wake path for the three (a tracing
    /// processor's wake-ups take the detour to record themselves, `crate::trace`).
    central_or_chaos: bool,
    /// Every ULT woken by a ULT running here stays here, unless pinned (the policy engine's
    /// `woken_stay_with_ult_wakers`), and neither `central` nor the chaos mode is on
    /// ([`Processor::follow_ult_waker`] decides on this flag without asking the engine).
    waker_stays: Cell<bool>,
    /// The ring this processor records its trace events in, when the runtime writes a trace
    /// (`crate::trace`); owner-only, like [`Core`].
    pub(crate) trace: Option<Box<crate::trace::Ring>>,
}

impl Processor {
    pub(crate) fn new(index: usize, shared: Arc<Shared>) -> Processor {
        let c = &shared.config;
        let core = Core {
            start_limit: c.start_queue_limit.min(shared.processors[index].start.capacity()),
            tcb_pool: LocalPool::new(c.tcb_pool_limit),
            stack_pool: LocalPool::new(c.stack_pool_limit),
            deathrow: DeathrowCount::new(),
            timers: Timers::new(),
            admit_one: false,
            batch: YieldBatch::new(),
            spill: Vec::new(),
            inline_child: None,
            pending_anchor: None,
            no_hand_off: u32::from(c.chaos.is_some()),
            pinned_here: 0,
            notes: (0..shared.processors.len()).map(|_| None).collect(),
            id_seq: 0,
            tick: TICK_PERIOD,
            rounds: 0,
            starvation_due: 0,
            starvation_wait: (find::START_WAIT.as_nanos() as f64 * crate::sync::host_costs().ticks_per_ns)
                as u64,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
            turn: index,
            scratch: Vec::new(),
            avoid: Box::new(find::Avoidance::new(shared.processors.len())),
            strands: find::StrandWatch::new(shared.processors.len()),
            pauses: Pauses::new(),
            trials_on: c.steal_trials && !c.central && c.chaos.is_none() && shared.processors.len() > 1,
            trials: trial::StealTrials::new(std::time::Instant::now()),
            // Opened here, on the processor's own thread (a hardware counter counts its opener).
            engine: crate::policy::engine::Local::new(index, &c.counters, &shared.engine),
            payoff: crate::prefetch::Payoff::new(),
        };
        let woken_stay = core.engine.woken_stay_with_ult_wakers();
        let check_canary = c.stack_kind == crate::stack::StackKind::Unguarded;
        let trace = shared.tracer.as_ref().map(|t| Box::new(crate::trace::Ring::new(Arc::clone(t), index)));
        let hooked = hooked(&core.engine, check_canary, trace.is_some());
        let remote: *const Remote = &shared.processors[index];
        let node_start: *const NodeStart = &shared.nodes[shared.processors[index].node].start;
        let runq: *const crate::queue::run::RunQueue = if c.central {
            &shared.central_runq
        } else {
            served_runq(&shared.processors, &shared.places, index)
        };
        static UIDS: AtomicUsize = AtomicUsize::new(1);
        Processor {
            index,
            uid: UIDS.fetch_add(1, Ordering::Relaxed),
            remote,
            node_start,
            runq,
            core: UnsafeCell::new(core),
            current: Cell::new(None),
            budget: Cell::new(c.coop_budget.unwrap_or(u32::MAX)),
            budget_turn: c.coop_budget.unwrap_or(u32::MAX),
            budget_on: c.coop_budget.is_some(),
            central: c.central,
            gather_locks: c.gather_locks && !c.central,
            check_canary,
            hooked: Cell::new(hooked),
            stack_size: c.stack_size,
            prefetch_lines: if c.prefetch { crate::prefetch::window_lines(c.model_cache.size) } else { 0 },
            chaos: chaos::Chaos::new(c.chaos, index),
            central_or_chaos: c.central || c.chaos.is_some() || trace.is_some(),
            waker_stays: Cell::new(woken_stay && !c.central && c.chaos.is_none() && trace.is_none()),
            trace,
            shared,
        }
    }

    /// The owned state. Callers keep the borrow short and never across a switch.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    fn core(&self) -> &mut Core {
        // SAFETY: only the OS thread running this processor calls this (the processor is
        // reachable only through that thread's current-processor slot (`current`), and the blocking handoff passes it
        // from one thread to the next under a lock, between two rounds of the loop), and no caller
        // holds the borrow across a switch or across another call to `core`, so borrows never
        // overlap.
        unsafe { &mut *self.core.get() }
    }

    /// The gathering's part of the owned state (`sync::mutex::gather`), under the rules of
    /// [`Processor::core`].
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub(crate) fn pauses(&self) -> &mut Pauses {
        &mut self.core().pauses
    }

    #[inline]
    pub(crate) fn remote(&self) -> &Remote {
        // SAFETY: `remote` points into `shared.processors`, a boxed slice that lives as long as
        // `shared`, which this processor holds.
        unsafe { &*self.remote }
    }

    /// Takes the ULT in the `next` slot ([`Remote::next`]).
    #[inline]
    pub(super) fn take_next(&self) -> Option<TcbRef> {
        TcbRef::from_ptr(self.remote().next.take())
    }

    /// Puts `t` in the empty `next` slot.
    #[inline]
    pub(super) fn put_next(&self, t: TcbRef) {
        self.remote().next.put(t.as_ptr());
    }

    /// The ULT in the `next` slot, left there.
    #[inline]
    pub(super) fn peek_next(&self) -> Option<TcbRef> {
        TcbRef::from_ptr(self.remote().next.peek())
    }

    /// Whether the `next` slot is empty.
    #[inline]
    pub(super) fn next_is_empty(&self) -> bool {
        self.remote().next.is_empty()
    }

    /// The ULT running on this processor.
    #[inline]
    pub(crate) fn current_ult(&self) -> Option<TcbRef> {
        self.current.get()
    }

    /// Whether a pinned ULT lives on this processor (started here, not exited).
    pub(crate) fn hosts_pinned(&self) -> bool {
        self.core().pinned_here > 0
    }

    /// Notes `anchor`, of a child of the join fast path that switched out while unwinding, for
    /// its joiner's wait to make (`crate::anchor`).
    pub(crate) fn set_pending_anchor(&self, anchor: crate::blocking::CallRef) {
        let prev = self.core().pending_anchor.replace(anchor);
        debug_assert!(prev.is_none(), "two pending anchors");
    }

    /// The anchor noted by [`Processor::set_pending_anchor`], if any.
    pub(crate) fn take_pending_anchor(&self) -> Option<crate::blocking::CallRef> {
        self.core().pending_anchor.take()
    }

    /// A safe point of the loop (between runs, the yield batch back in the runqueue): takes up
    /// the policy [`Runtime::set_policy`](crate::Runtime::set_policy) put in force since the
    /// last look, if any, and re-keys the runqueue for it (the processor's side of the
    /// protocol in `policy::board`). Until then this processor keys, wakes and records runs
    /// under the policy it had; whatever it queued meanwhile is re-keyed here.
    #[cold]
    pub(crate) fn follow_policy(&self) {
        let core = self.core();
        let Some(taken) = core.engine.follow(&self.shared.config.counters, &self.shared.engine) else {
            return;
        };
        // (The only copies of the policy outside the engine's part.)
        self.waker_stays.set(core.engine.woken_stay_with_ult_wakers() && !self.central_or_chaos);
        self.hooked.set(hooked(&core.engine, self.check_canary, self.trace.is_some()));
        debug_assert!(core.batch.is_empty(), "the yield batch is flushed before the loop's round");
        self.flush_batch();
        let stats = &self.remote().stats;
        if taken == crate::policy::engine::Taken::Policy {
            self.trace_policy();
            stats.policy_switches.bump();
        }
        stats.rekeyed.add(self.runq().len() as u64);
        let (engine, scratch) = (&mut core.engine, &mut core.scratch);
        self.runq().rekey(|t| engine.priority(t), scratch);
    }
}

/// Which hooks run at every switch of a ULT (`Processor::hooked`), each a copy of
/// `Processor::run_ult_as`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Hooked {
    /// None.
    None = Hooked::NONE,
    /// The policy's end of a run, and nothing else.
    RunEnd = Hooked::RUN_END,
    /// Every hook asked for, each tested at each switch.
    All = Hooked::ALL,
}

impl Hooked {
    /// [`Hooked::None`] as a number (the copies' const parameter).
    pub(crate) const NONE: u8 = 0;
    /// [`Hooked::RunEnd`] as a number.
    pub(crate) const RUN_END: u8 = 1;
    /// [`Hooked::All`] as a number.
    pub(crate) const ALL: u8 = 2;
}

/// What must run at every switch of a ULT on a processor whose policy part is `engine`
/// (`Processor::hooked`): the policy's hooks around a run, the canary check, the trace.
fn hooked(engine: &crate::policy::engine::Local, check_canary: bool, tracing: bool) -> Hooked {
    match engine.run_hooks() {
        (false, end) if !check_canary && !tracing => match end {
            true => Hooked::RunEnd,
            false => Hooked::None,
        },
        _ => Hooked::All,
    }
}

/// The processors of a runtime, where OS threads find them (DESIGN §2, "an owned part moved into
/// the worker thread"): a processor is created by the first thread that runs it (its counter
/// source is opened there) and then passed from thread to thread by the blocking handoff
/// (`crate::blocking`), so it lives here rather than on one thread's stack. Every worker thread
/// and the [`Runtime`](crate::Runtime) hold the set; the processors are freed with the last of
/// them, so a thread's frames that still name a processor it handed over stay valid.
pub(crate) struct ProcessorSet {
    slots: Box<[AtomicPtr<Processor>]>,
}

impl ProcessorSet {
    pub(crate) fn new(n: usize) -> ProcessorSet {
        ProcessorSet { slots: (0..n).map(|_| AtomicPtr::new(ptr::null_mut())).collect() }
    }

    /// Processor `i`, made on the calling thread if it does not exist yet. Only a thread that
    /// holds processor `i` under the hand-over protocol calls this (the first is the thread
    /// started for it).
    pub(crate) fn take(&self, i: usize, shared: &Arc<Shared>) -> &Processor {
        let mut p = self.slots[i].load(Ordering::Acquire);
        if p.is_null() {
            p = Box::into_raw(Box::new(Processor::new(i, shared.clone())));
            shared.processors[i].name.store(p as usize, Ordering::Relaxed);
            self.slots[i].store(p, Ordering::Release);
        }
        // SAFETY: non-null slots hold a live box, freed only when the set is dropped.
        unsafe { &*p }
    }

    /// Shutdown: gives back the memory the processors' pools hold (their pooled stacks) now,
    /// rather than when the last thread holding the set exits.
    ///
    /// # Safety
    /// No thread runs any of the processors any more (every loop has stopped for shutdown).
    pub(crate) unsafe fn retire(&self) {
        for slot in self.slots.iter() {
            let p = slot.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: per the contract nobody else touches the owned part; the box is live.
                let core = unsafe { &mut *(*p).core.get() };
                core.stack_pool = LocalPool::new(0);
                // SAFETY: as above: the processor's owned state, its trace ring included, is ours.
                unsafe { &*p }.flush_trace(); // its last events (`crate::trace`)
            }
        }
    }
}

impl Drop for ProcessorSet {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            let p = slot.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: made by `Box::into_raw` in `take`; the last holder of the set drops it,
                // after every thread that could run a processor has let go of the set. Dropping a
                // processor on another thread than the one that made it is fine: its owned part
                // holds pointers, pooled contexts (sent between threads by design, see `Context`)
                // and the counter source, whose file is closed by any thread.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}
