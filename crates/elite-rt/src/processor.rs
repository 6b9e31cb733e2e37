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
//! 2. Run the `next` slot's ULT, else the runqueue's best; but every 64th round (and after a
//!    yield) start one ULT from the start-queues first, and when there is none, every 64th round
//!    run the runqueue's *lowest*-priority ULT first, so that ready ULTs that keep each other
//!    going cannot keep never-started or long-ready ones waiting for ever.
//!    A yield with other ULTs ready skips the loop: the yielder goes behind them and the best
//!    runs at once (`requeue_yielded`, `hand_off`); a round-robin of many yielders takes them
//!    from the runqueue in batches, one lock per batch (`queue::run::YieldBatch`), and looks for
//!    the loop's errands and start-queue entries once per batch (`yield_from_batch`).
//! 3. Otherwise start a ULT from the start-queues: own, node, global (the global and node levels are
//!    also looked at every 61st round so they cannot starve behind a busy local queue).
//! 4. Otherwise steal, nearest distance group first, a random victim inside each group: first its
//!    start-queue (those ULTs have no stack and no cache footprint yet), then the low-affinity part
//!    of its runqueue. Not while ULTs that ran here went to a saturated lock's home since the
//!    last idle step ([`gather_to`], `sync::mutex` "Gathering"): then step 5 pauses first, and
//!    the first steal from a runqueue after a pause takes one ULT, a probe; a probe that stays
//!    ends the pauses.
//! 5. Otherwise spin a little, then park (see `crate::park`). The park is noted for the deadlock
//!    report (with or without a timer), and a processor that leaves it while a report is being
//!    taken waits until it is (`crate::deadlock`). After ULTs went home, instead: park at once
//!    for the pause (50 µs, doubled each such idle step in a row up to 2 ms), woken early only by
//!    work aimed at it (a wake-up onto its stack, a notification of its own slot); a processor
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

use crate::atomics::{AtomicPtr, AtomicUsize, Ordering};
use crate::park::ParkSlot;
use crate::policy::WakeRule;
use crate::pool::{Got, LocalPool};
use crate::queue::cleanup::{CleanupStack, NoteBatch};
use crate::queue::deathrow::Deathrow;
use crate::queue::deque::Deque;
use crate::queue::run::{RunQueue, YieldBatch, REFILL_FROM};
use crate::queue::shared::{SharedStartQueue, TAKE_MAX};
use crate::queue::start::steal_one;
use crate::queue::wakeup::WakeupStack;
use crate::runtime::Shared;
use crate::stack::UltStack;
use crate::stats::{Counter, Counters};
use crate::sync::wait::LinkTo;
use crate::tcb::Context;
use crate::tcb::{JoinState, Life, Tcb, TcbRef, Ult, UltYielder, Waiter};
use crate::timer::{Due, Timers};
use crate::SpawnError;
use corosensei::CoroutineResult;

mod chaos;
pub(crate) use chaos::decision_point;
use crossbeam_utils::CachePadded;
use std::cell::{Cell, UnsafeCell};
use std::ptr;
use std::sync::Arc;
use std::time::Instant;

/// Why a ULT switched back to its processor, in one word: corosensei passes a value of at most
/// a word through the switch in a register, a larger one through memory on the switching stack,
/// which the other side then reads back (a store and a dependent load on every switch). The low
/// three bits are the kind; the kinds that carry something carry the address of a value on the
/// switched-out ULT's frozen stack (aligned to 8 on every target, so those bits are free), valid
/// until the ULT is resumed, which cannot happen before its resumer has dealt with it.
///
/// * Link (`Switch::link`, with a kind of its own for a link at the list's front): block on a
///   synchronization object with an untimed wait (`WaitNode::block_on`): after the switch the
///   resumer links the node into the object's list and releases the object's spin lock, held
///   across the switch, as the `LinkTo` says (`crate::sync::wait::link_after_switch`); what a
///   park would do with a closure, without the closure's indirect call and moves.
/// * Park (`Switch::park`): block; after the switch the resumer (a processor) calls
///   `park.action(park, me, itself)`, which must arrange for someone to wake `me` later (or
///   wake it at once). The action of a blocking call (`crate::blocking::switched`) may also hand
///   the processor to another OS thread: the resumer's thread then touches nothing of the
///   processor after the action returns and leaves the loop at the top of the next round.
/// * Sleep (`Switch::sleep`): sleep until the deadline.
/// * [`Switch::YIELD`]: let others run; stay ready.
/// * [`Switch::EXIT`]: the ULT's task returned and its exit is published: the context is free for
///   another ULT.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Switch(usize);

impl Switch {
    const KIND: usize = 0b111;
    const LINK: usize = 0;
    const LINK_FRONT: usize = 1;
    const PARK: usize = 2;
    const SLEEP: usize = 3;
    /// Let others run; stay ready.
    pub(crate) const YIELD: Switch = Switch(4);
    /// The task returned, its exit published.
    pub(crate) const EXIT: Switch = Switch(5);

    #[inline(always)]
    fn with<T>(at: *const T, kind: usize) -> Switch {
        const { assert!(std::mem::align_of::<T>() > Self::KIND) };
        debug_assert!(!at.is_null());
        Switch(at as usize | kind)
    }

    /// Block with an untimed wait: link as `to` says, then unlock (at the list's front with
    /// `front`).
    #[inline(always)]
    pub(crate) fn link(to: &LinkTo, front: bool) -> Switch {
        Switch::with(to, if front { Self::LINK_FRONT } else { Self::LINK })
    }

    /// Block; the resumer calls `park.action`.
    #[inline(always)]
    pub(crate) fn park(park: *const Park) -> Switch {
        Switch::with(park, Self::PARK)
    }

    /// Sleep until the deadline.
    #[inline(always)]
    pub(crate) fn sleep(deadline: &Deadline) -> Switch {
        Switch::with(deadline, Self::SLEEP)
    }

    #[inline(always)]
    fn kind(self) -> usize {
        self.0 & Self::KIND
    }

    #[inline(always)]
    fn at<T>(self) -> *const T {
        (self.0 & !Self::KIND) as *const T
    }
}

/// What a [`Switch::park`] carries: the action its resumer calls with the `Park`'s own address
/// (the first field of a `#[repr(C)]` value on the blocked ULT's frozen stack that holds what the
/// action needs, `crate::thread::park_ult`), the ULT and the resumer.
#[repr(C, align(8))]
pub(crate) struct Park {
    /// Called once by the resumer after the switch, with this `Park`'s address (that of the
    /// value holding it, alive on the frozen stack until the ULT is resumed), the ULT and itself.
    pub(crate) action: unsafe fn(*const Park, TcbRef, &Processor),
}

/// What a [`Switch::sleep`] carries: the deadline (aligned for the switch's word).
#[repr(align(8))]
pub(crate) struct Deadline(pub(crate) Instant);

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
    pub(crate) park: CachePadded<ParkSlot>,
    pub(crate) stats: CachePadded<Counters>,
    /// Join handles created minus handles released on this processor (see `runtime`, "Handle
    /// accounting"); owner-written, may wrap below zero.
    pub(crate) handles: CachePadded<Counter>,
}

impl Remote {
    pub(crate) fn new(node: usize, start_limit: usize) -> Remote {
        Remote {
            node,
            name: AtomicUsize::new(0),
            start: Deque::new(start_limit),
            wakeup: CachePadded::new(WakeupStack::new()),
            cleanup: CachePadded::new(CleanupStack::new()),
            runq: CachePadded::new(RunQueue::new()),
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
    deathrow: Deathrow,
    timers: Timers,
    /// The ULT to run next, outside the runqueue: set when a ULT becomes ready while nothing else is
    /// (a joiner woken by the exit of the ULT it joined, the other end of a hand-off). Private to
    /// the owner, so the common hand-off costs no atomic operation; not stealable, like Go's runnext.
    next: Option<TcbRef>,
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
    rng: u64,
    /// A reusable buffer (stolen batches, due timers).
    scratch: Vec<TcbRef>,
    /// ULTs this processor sent to a lock's home since it was last idle (`gather_to`).
    sent_home: u32,
    /// How long (microseconds) this processor stops stealing when it goes idle after sending
    /// ULTs home; 0 when it did not last time, or its probe stayed (see `Processor::idle`).
    steal_pause: u32,
    /// A probe (one ULT stolen after a pause) was taken since the last steal.
    probed: bool,
    /// The policy's per-processor part: counter source, run and entry counts (see `affinity`).
    affinity: crate::affinity::Local,
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
}

/// What [`Processor::yield_from_batch`] did with a yield.
#[must_use]
enum FromBatch {
    /// Switch to this ULT now.
    Run(TcbRef),
    /// Go back to the loop (the yielder is queued, the ULT to run next is in the `next` slot).
    Loop,
    /// Nothing: the general yield path takes it.
    Elsewhere,
}

/// How the join fast path ([`Processor::start_inline`]) went.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Inline {
    /// The child was not the newest entry of the start-queue (already taken, or buried).
    NotStarted,
    /// The child started and switched out before finishing; the join protocol goes on as usual.
    Switched,
    /// The child started and returned. Its joiner holds the only handle (being consumed by
    /// value, so no other reference to it exists) and runs on this processor: the join state
    /// was not published, the TCB is not on the deathrow, and the joiner takes the output and
    /// recycles the TCB directly ([`Processor::reclaim_inline`]).
    Finished,
}

/// Ready ULTs in the runqueue from which a yield may take a batch: with the yielder, the
/// [`REFILL_FROM`] that `RunQueue::yield_refill` asks for.
const BATCH_FROM: usize = REFILL_FROM - 1;

/// The first pause of stealing (microseconds) of a processor gone idle after sending ULTs to a
/// lock's home (`gather_to`); each such idle in a row doubles it, up to [`STEAL_PAUSE_MAX`].
const STEAL_PAUSE_MIN: u32 = 50;

/// The longest pause of stealing (microseconds): how long an idle processor may leave ULTs it
/// could steal waiting while a lock's contenders gather elsewhere.
const STEAL_PAUSE_MAX: u32 = 2000;

/// Rounds of the loop between two on which the start-queues go before ready ULTs (`take_ready`).
const START_TURN: u32 = 64;

/// Most entries a full own start-queue moves down a level at once (half its limit, up to this).
const SPILL_MAX: usize = 512;

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
    node_start: *const SharedStartQueue<Tcb>,
    core: UnsafeCell<Core>,
    current: Cell<Option<TcbRef>>,
    // Copies of configuration read on the hot paths (one load instead of two).
    central: bool,
    /// `config.gather_locks && !config.central` (see [`gather_to`]).
    gather_locks: bool,
    check_canary: bool,
    stack_size: usize,
    /// `config.prefetch`: prefetch declared data blocks (see `crate::prefetch`).
    pub(crate) prefetch: bool,
    /// The chaos mode's state (`chaos`); off unless the runtime was built with a seed.
    chaos: chaos::Chaos,
    /// `central || chaos.on`: one test on the wake path for both.
    central_or_chaos: bool,
    /// The policy's wake rule is [`WakeRule::Waker`] and neither `central` nor the chaos mode
    /// is on: a ULT woken by a ULT running here stays here, unless pinned
    /// ([`Processor::wake_from_ult`] decides that without looking the rule up).
    waker_stays: bool,
}

/// The processor running on this OS thread (null: none), behind [`current_processor`].
///
/// Where a ULT may resume on another OS thread after any switch (DESIGN §8), the compiler must
/// not reuse a thread-local's address computed before a switch; a Rust `thread_local!` gives
/// no such promise (LLVM takes a thread-local's address to be the same all through a function).
/// So on x86-64 Linux the slot is a thread-local word of our own, defined in assembly, and every
/// read and write is an `asm!` block (not `pure`: the compiler runs each one where it is written,
/// never hoisting, merging or caching it) that finds the word from the thread pointer `%fs` of
/// the OS thread running it at that moment: the accessor inlines, a ULT's channel operation pays
/// two loads instead of a call through the GOT (the 4 lookups of a `ping_pong` round trip were
/// about 3 ns of 23.5 at 2 processors, 2026-11-25). The word is reached with the initial-exec
/// model (its offset from the thread pointer, read from the GOT; the linker turns that into a
/// constant in an executable): valid in every thread of the process. Limits: a shared library
/// holding this crate that is loaded by `dlopen` needs static TLS space for its whole TLS
/// segment (its other thread-locals too), of which glibc keeps a small reserve, so the load may
/// fail; and a Rust `dylib` build of this crate does not link (the word is hidden, and generic
/// code inlined into other crates names it). Elsewhere (and under
/// loom and Miri, which run no inline assembly), a `thread_local!` behind an `#[inline(never)]`
/// accessor.
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64", target_os = "linux", not(loom), not(miri)))]
mod current {
    use super::Processor;

    // One 8-byte thread-local word, zero (null) in every new thread. Global but hidden: it is
    // reached from the crates that inline the accessors (generic code instantiated there), all
    // linked into one module with this crate. Its name carries the crate's semver-compatible
    // version, so that two incompatible versions linked into one program keep two words (two
    // copies under one name would fail to link, never share a word).
    std::arch::global_asm!(
        ".pushsection .tbss.elite_rt_current_processor,\"awT\",@nobits",
        ".p2align 3",
        ".globl elite_rt_current_processor_0_1",
        ".hidden elite_rt_current_processor_0_1",
        ".type elite_rt_current_processor_0_1,@object",
        ".size elite_rt_current_processor_0_1,8",
        "elite_rt_current_processor_0_1:",
        ".zero 8",
        ".popsection",
    );

    #[inline(always)]
    pub(super) fn get() -> *const Processor {
        let p: *const Processor;
        // SAFETY: reads this thread's word (8 bytes, aligned, in the thread's static TLS block
        // at the offset the GOT holds); writes only the output register.
        unsafe {
            std::arch::asm!(
                "mov {p}, qword ptr [rip + elite_rt_current_processor_0_1@GOTTPOFF]",
                "mov {p}, qword ptr fs:[{p}]",
                p = out(reg) p,
                options(nostack, preserves_flags, readonly),
            );
        }
        p
    }

    #[inline]
    pub(super) fn set(p: *const Processor) {
        // SAFETY: writes this thread's word (as `get` reads it), nothing else.
        unsafe {
            std::arch::asm!(
                "mov {o}, qword ptr [rip + elite_rt_current_processor_0_1@GOTTPOFF]",
                "mov qword ptr fs:[{o}], {p}",
                o = out(reg) _,
                p = in(reg) p,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// [`current`] elsewhere: a `thread_local!`, read only by a never-inlined function.
#[cfg(not(all(
    target_arch = "x86_64",
    target_pointer_width = "64",
    target_os = "linux",
    not(loom),
    not(miri)
)))]
mod current {
    use super::Processor;
    use std::cell::Cell;
    use std::ptr;

    thread_local! {
        static CURRENT: Cell<*const Processor> = const { Cell::new(ptr::null()) };
    }

    /// Never inlined: an inlined thread-local access could let the compiler reuse the address
    /// it computed before a switch (DESIGN §8).
    #[inline(never)]
    pub(super) fn get() -> *const Processor {
        CURRENT.with(|c| c.get())
    }

    #[inline]
    pub(super) fn set(p: *const Processor) {
        CURRENT.with(|c| c.set(p));
    }
}

/// The gathering rule of a contended mutex (`sync::mutex`, "Gathering"): moves the running ULT to
/// the processor named `home` (a processor's address, as a mutex's bias names its owner), where
/// it goes on after the switch (`now`: the time stamp of the call). True if it moved; false, with
/// nothing done, outside a ULT, for a pinned ULT or one that moved less than `min_gap` ticks ago
/// (two saturated locks with two homes would otherwise move it at every call), in a `central`
/// runtime or one built with `gather_locks(false)`, or when `home` is the caller's processor,
/// none of its runtime's, or parked.
#[cold]
#[inline(never)]
pub(crate) fn gather_to(home: usize, now: u64, min_gap: u64) -> bool {
    let Some(p) = current_processor() else { return false };
    if !p.gather_locks || std::ptr::eq(p, home as *const Processor) {
        return false;
    }
    let Some(me) = p.current_ult() else { return false };
    let tcb = me.tcb();
    if tcb.pinned.get() || (now.wrapping_sub(tcb.moved_at.get()) as i64) < min_gap as i64 {
        return false;
    }
    let Some(target) = p.shared.processors.iter().position(|r| r.name.load(Ordering::Relaxed) == home) else {
        return false;
    };
    if p.shared.processors[target].park.is_parked() {
        return false; // the lock is not busy there; waking its home would cost more
    }
    tcb.moved_at.set(now);
    // SAFETY: `me` is the ULT running this code.
    unsafe { crate::thread::park_ult(me, move |t, q| q.send_home(t, target)) };
    true
}

/// The processor running on this OS thread, if any.
///
/// A ULT may resume on another OS thread after any switch (DESIGN §8): each call reads the slot
/// of the OS thread running it at that moment ([`current`]: an inline `asm!` read on x86-64
/// Linux, a never-inlined function elsewhere), but the reference it returns is only good until
/// the caller's next switch. Call it again after every switch; never keep the reference across
/// one.
#[inline(always)]
pub(crate) fn current_processor<'a>() -> Option<&'a Processor> {
    let p = current::get();
    // SAFETY: the pointer is set by `Processor::run` (and the blocking handoff) while this thread
    // runs the processor, and cleared before it stops running it; a processor lives in its
    // `ProcessorSet` as long as any thread that may run it. ULTs only run inside the loop.
    unsafe { p.as_ref() }
}

/// Names `p` (or none) as the processor running on this OS thread: at a take-over, and around a
/// blocking call, during which the thread runs none.
#[inline]
pub(crate) fn set_current_processor(p: Option<&Processor>) {
    current::set(p.map_or(ptr::null(), |p| p as *const Processor));
}

impl Processor {
    pub(crate) fn new(index: usize, shared: Arc<Shared>) -> Processor {
        let c = &shared.config;
        let core = Core {
            start_limit: c.start_queue_limit.min(shared.processors[index].start.capacity()),
            tcb_pool: LocalPool::new(c.tcb_pool_limit),
            stack_pool: LocalPool::new(c.stack_pool_limit),
            deathrow: Deathrow::new(),
            timers: Timers::new(),
            next: None,
            admit_one: false,
            batch: YieldBatch::new(),
            spill: Vec::new(),
            inline_child: None,
            no_hand_off: u32::from(c.chaos.is_some()),
            pinned_here: 0,
            notes: (0..shared.processors.len()).map(|_| None).collect(),
            id_seq: 0,
            tick: TICK_PERIOD,
            rounds: 0,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
            scratch: Vec::new(),
            sent_home: 0,
            steal_pause: 0,
            probed: false,
            // Opened here, on the processor's own thread (a hardware counter counts its opener).
            affinity: crate::affinity::Local::new(index, &c.policy, c.needs, &c.counters, &shared.affinity),
        };
        let remote: *const Remote = &shared.processors[index];
        let node_start: *const SharedStartQueue<Tcb> = &shared.nodes[shared.processors[index].node].start;
        static UIDS: AtomicUsize = AtomicUsize::new(1);
        Processor {
            index,
            uid: UIDS.fetch_add(1, Ordering::Relaxed),
            remote,
            node_start,
            core: UnsafeCell::new(core),
            current: Cell::new(None),
            central: c.central,
            gather_locks: c.gather_locks && !c.central,
            check_canary: c.stack_kind == crate::stack::StackKind::Unguarded,
            stack_size: c.stack_size,
            prefetch: c.prefetch,
            chaos: chaos::Chaos::new(c.chaos, index),
            central_or_chaos: c.central || c.chaos.is_some(),
            waker_stays: c.policy.wake_rule() == WakeRule::Waker && !c.central && c.chaos.is_none(),
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

    #[inline]
    pub(crate) fn remote(&self) -> &Remote {
        // SAFETY: `remote` points into `shared.processors`, a boxed slice that lives as long as
        // `shared`, which this processor holds.
        unsafe { &*self.remote }
    }

    /// The ULT running on this processor.
    #[inline]
    pub(crate) fn current_ult(&self) -> Option<TcbRef> {
        self.current.get()
    }

    /// Runs the processor on the calling OS thread, the worker `w`, until `w.stop` is raised (by
    /// shutdown, or by this thread's own blocking handoff). `pinned` is the CPU the thread is
    /// pinned to, if any: a thread that takes over another processor pins itself to its CPU.
    pub(crate) fn run(&self, w: &crate::blocking::Worker, pinned: &mut Option<usize>) {
        let cpu = self.shared.config.topology.processor(self.index).cpu;
        if self.shared.config.pin && *pinned != Some(cpu) {
            if elite_affinity::pin_current_thread(cpu).is_ok() {
                *pinned = Some(cpu);
            } else {
                self.shared.pin_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.remote().park.register(std::thread::current());
        set_current_processor(Some(self));
        // A panic in the loop is a runtime bug: abort rather than limp on.
        let guard = crate::AbortOnPanic("the processor loop");
        self.run_loop(w);
        std::mem::forget(guard);
        set_current_processor(None);
    }

    /// Whether the ULT that just switched out was resumed by the join fast path (a joiner's stack)
    /// rather than by the loop's bottom frame.
    #[inline]
    pub(crate) fn running_inline(&self) -> bool {
        self.core().inline_child.is_some()
    }

    fn run_loop(&self, w: &crate::blocking::Worker) {
        loop {
            // Raised by shutdown, and by a blocking handoff of this thread (the processor then
            // belongs to another thread: this one leaves without touching it).
            if w.stop.load(Ordering::Relaxed) {
                return;
            }
            self.maintain();
            if let Some(t) = self.take_ready() {
                // Prefetch hook (`crate::prefetch`): the chosen ULT's data, and the next one's.
                self.prefetch_chosen(t);
                self.dispatch(t, w);
                continue;
            }
            if let Some(t) = self.take_start() {
                self.start_ult(t, w);
                continue;
            }
            if let Some(t) = self.steal() {
                self.dispatch(t, w);
                continue;
            }
            self.idle();
        }
    }

    /// Runs `t`, giving it a stack first if it never ran; `w` is the calling thread's worker.
    #[inline]
    fn dispatch(&self, t: TcbRef, w: &crate::blocking::Worker) {
        if t.tcb().life.get() == Life::Queued {
            self.start_ult(t, w);
        } else {
            self.run_ult(t, w);
        }
    }

    /// Prefetches what `t`, chosen to run now, will touch first and, when it declared a block,
    /// the control block of the ULT the runqueue would hand out after it (see `crate::prefetch`).
    /// For ULTs without a block, and whenever prefetch is off (no ULT has a prefetch word then):
    /// one load of a line the switch reads anyway, and a branch.
    #[inline]
    fn prefetch_chosen(&self, t: TcbRef) {
        if crate::prefetch::ult(t) {
            if let Some(next) = self.runq().peek_best() {
                crate::prefetch::control_block(next);
            }
        }
    }

    /// Step 1: wake-ups into the runqueue, clean-up notes, due timers.
    #[inline]
    fn maintain(&self) {
        let core = self.core();
        core.rounds = core.rounds.wrapping_add(1);
        if core.rounds.is_multiple_of(64) {
            self.flush_notes(); // held-back clean-up notes wait at most 64 rounds
        }
        let remote = self.remote();
        if !remote.wakeup.is_empty() {
            let (mut n, mut homing) = (0, 0);
            for t in remote.wakeup.drain() {
                if t.tcb().homing.get() {
                    t.tcb().homing.set(false);
                    homing += 1;
                }
                self.make_ready(t);
                n += 1;
            }
            remote.stats.wakeup_drained.add(n);
            // More than one woken: let an idle processor help, unless they were sent here to be
            // gathered (`gather_to`), which a helper would only send back.
            if n - homing > 1 {
                self.shared.notify_any();
            }
        }
        if !remote.cleanup.is_empty() {
            for batch in remote.cleanup.drain() {
                remote.stats.cleanup_notes.add(batch.len() as u64);
                for t in batch.tcbs() {
                    // The joiner reset the TCB: count it off and pool the pointer.
                    self.core().deathrow.leave();
                    self.pool_tcb(t);
                }
            }
        }
        if !self.core().timers.is_empty() {
            self.fire_timers();
        }
    }

    /// Makes every sleeper whose deadline passed ready, so that they run in deadline order.
    #[cold]
    fn fire_timers(&self) {
        let now = Instant::now();
        let mut due = std::mem::take(&mut self.core().scratch);
        while let Some(d) = self.core().timers.pop_due(now) {
            match d {
                Due::Sleep(t) => due.push(t),
                // A timed wait's deadline: the ULT is ours to run only if the deadline won the race
                // against a notifier (see `sync::wait`).
                Due::Wait(t, seq) => {
                    if crate::sync::wait::time_out(t, seq) {
                        due.push(t);
                    }
                }
            }
        }
        // Enter the runqueue latest deadline first: with equal priorities the runqueue hands out
        // the newest entry first, so the earliest deadline runs first.
        for t in due.drain(..).rev() {
            self.enqueue(t);
        }
        self.core().scratch = due;
    }

    /// Puts a ready ULT in the runqueue with the policy's key (never in the `next` slot), after
    /// the yield batch's ULTs (if any), so that the policy orders it among all of them.
    #[inline]
    fn enqueue(&self, t: TcbRef) {
        let core = self.core();
        let key = core.affinity.priority(t);
        if core.batch.is_empty() {
            self.runq().push(key, t);
        } else {
            self.runq().push_flushing(key, t, &mut core.batch);
        }
    }

    /// Puts the yield batch's ULTs back in the runqueue (see [`YieldBatch`]): when a chain of
    /// switches returns to the loop, and before a blocking call's action hands the processor to
    /// another OS thread (`crate::blocking::switched`), whose loop must find them there.
    #[inline]
    pub(crate) fn flush_batch(&self) {
        let core = self.core();
        if !core.batch.is_empty() {
            self.runq().flush_batch(&mut core.batch);
        }
    }

    /// Puts a ready ULT in this processor's runqueue with the policy's key, or in the `next` slot
    /// when nothing else here is ready (then it is the best by any policy). A second ready ULT
    /// sends the one in the slot to the runqueue first, so that the policy orders the two.
    #[inline]
    pub(crate) fn make_ready(&self, t: TcbRef) {
        let core = self.core();
        if core.next.is_none() && self.runq().len() == 0 && !self.central {
            core.next = Some(t);
            return;
        }
        if let Some(n) = core.next.take() {
            self.enqueue(n);
        }
        self.enqueue(t);
    }

    /// Step 2: the `next` slot, then the runqueue's best (after one start-queue entry if a yield
    /// asked for it); every [`START_TURN`]-th round a start-queue entry first.
    #[inline]
    fn take_ready(&self) -> Option<TcbRef> {
        if self.chaos.on {
            return self.chaos_take_ready();
        }
        let core = self.core();
        // Every START_TURN-th round a start-queue entry goes first: ULTs that keep each other
        // ready without ever yielding (a ping-pong through the `next` slot, sleepers woken by
        // timers on a saturated processor) would otherwise keep never-started ULTs from starting
        // for ever (`tests/regressions.rs`, `ready_ults_that_never_let_up_do_not_starve_a_spawned_one`).
        // (`rounds` counts the loop's rounds in `maintain`, which runs just before.)
        if core.rounds.is_multiple_of(START_TURN) {
            if let Some(t) = self.take_start() {
                return Some(t);
            }
            // The same turn for the ready ULT of lowest priority: two ULTs that keep waking each
            // other would otherwise keep it waiting for ever, through the `next` slot or, under
            // No Affinity's LIFO order, from above it in the runqueue
            // (`a_hand_off_pair_does_not_starve_a_ready_ult_in_the_runqueue`). The slot's ULT
            // stays where it is and runs in the next round.
            if let Some(t) = self.runq().pop_worst() {
                return Some(t);
            }
        }
        if let Some(t) = core.next.take() {
            return Some(t);
        }
        if core.admit_one {
            core.admit_one = false;
            if let Some(t) = self.take_start() {
                return Some(t);
            }
        }
        self.runq().pop_best()
    }

    /// The runqueue this processor serves: its own, or the one global queue of a `central` runtime.
    #[inline]
    fn runq(&self) -> &RunQueue {
        if self.central {
            &self.shared.central_runq
        } else {
            &self.remote().runq
        }
    }

    /// Step 3: own start-queue, then node, then global.
    #[inline]
    fn take_start(&self) -> Option<TcbRef> {
        if self.central {
            // The ablation keeps taking one entry at a time.
            let t = TcbRef::from_ptr(self.shared.global_start.take()?);
            self.remote().stats.start_global.bump();
            return t;
        }
        let core = self.core();
        let shared_turn = core.step();
        let remote = self.remote();
        if !shared_turn && !remote.start.is_empty() {
            if let Some(t) = self.pop_start() {
                remote.stats.start_local.bump();
                return Some(t);
            }
        }
        let node = &self.shared.nodes[remote.node];
        if shared_turn || !node.start.is_empty() || !self.shared.global_start.is_empty() {
            return self.take_start_shared(shared_turn);
        }
        None
    }

    /// Step 3 past the own start-queue: a batch from the node or global level, or the own queue
    /// after all on the rounds when the shared levels go first.
    #[cold]
    fn take_start_shared(&self, shared_turn: bool) -> Option<TcbRef> {
        let remote = self.remote();
        if shared_turn {
            self.flush_notes();
        }
        // From the shared levels take a batch into the own start-queue (room permitting): one
        // lock of the shared queue serves several starts.
        let room = self.core().start_limit.saturating_sub(remote.start.len()).clamp(1, TAKE_MAX);
        let node = &self.shared.nodes[remote.node];
        let mut batch = [ptr::null_mut(); TAKE_MAX];
        let mut n = node.start.take_batch(room, &mut batch);
        let global = n == 0;
        if global {
            n = self.shared.global_start.take_batch(room, &mut batch);
        }
        if n > 0 {
            // The first runs now; the rest go on the own queue, the oldest on top, so that they
            // start in the order they were spawned (and thieves take the newest of them).
            for &e in batch[1..n].iter().rev() {
                // Their TCBs were written by their spawners, most likely on another processor:
                // their lines come while the taker starts the first of the batch.
                crate::prefetch::start_lines(e);
                // Room was checked before the take (`room`), and only this owner pushes.
                if let Err(e) = remote.start.push(e) {
                    self.push_start_overflow(e);
                }
            }
            let (stat, level_left) = if global {
                (&remote.stats.start_global, !self.shared.global_start.is_empty())
            } else {
                (&remote.stats.start_node, !node.start.is_empty())
            };
            stat.add(n as u64);
            remote.stats.start_moved.add(n as u64 - 1);
            if level_left || n > 1 {
                self.shared.notify_any(); // pass the wake-up on (see `crate::park`)
            }
            return TcbRef::from_ptr(batch[0]);
        }
        let t = self.pop_start()?;
        remote.stats.start_local.bump();
        Some(t)
    }

    /// Pops the newest entry of the own start-queue.
    #[inline]
    fn pop_start(&self) -> Option<TcbRef> {
        let start = &self.remote().start;
        let t = TcbRef::from_ptr(start.pop()?);
        // The entry the next pop would take: its lines arrive while this one starts (a burst of
        // spawns is started newest first, one after the other).
        if let Some(n) = start.peek_newest() {
            crate::prefetch::start_lines(n);
        }
        t
    }

    /// Step 4: steal, nearest group first, random victim inside a group.
    fn steal(&self) -> Option<TcbRef> {
        let core = self.core();
        if core.sent_home > 0 {
            core.probed = false; // (went home, or others did)
            return None; // ULTs went home from here: pause first (`idle`)
        }
        if std::mem::take(&mut core.probed) {
            core.steal_pause = 0; // the probe stayed: steal as usual again
        }
        let topo = &self.shared.config.topology;
        for group in topo.distance_groups(self.index) {
            let start = self.next_random() as usize % group.len().max(1);
            for i in 0..group.len() {
                let v = group[(start + i) % group.len()];
                let victim = &self.shared.processors[v];
                let got = steal_one(&victim.start).or_else(|| self.steal_ready(victim));
                if let Some(t) = got {
                    if !victim.start.is_empty() || victim.runq.len() > 0 {
                        self.shared.notify_any(); // more to take there: pass the wake-up on
                    }
                    let stats = &self.remote().stats;
                    if victim.node == self.remote().node {
                        stats.steals_node.bump();
                    } else {
                        stats.steals_remote.bump();
                    }
                    return Some(t);
                }
            }
        }
        None
    }

    /// After `t` switched out to move to processor `target` (`gather_to`): onto its wake-up
    /// stack, marked as homing (so that its drain wakes no helper), waking `target` if it sleeps.
    fn send_home(&self, t: TcbRef, target: usize) {
        self.remote().stats.gathered.bump();
        self.core().sent_home += 1;
        t.tcb().homing.set(true);
        self.shared.push_wakeup(t, target); // (no helper wanted: see `maintain`)
    }

    /// Takes the low-key part of `victim`'s runqueue: runs the first, keeps the rest here.
    fn steal_ready(&self, victim: &Remote) -> Option<TcbRef> {
        if victim.runq.len() == 0 {
            return None;
        }
        let mut buf = std::mem::take(&mut self.core().scratch);
        let policy = &self.shared.config.policy;
        // After a pause of stealing (`idle`), one ULT: a probe whether they still go home.
        let probing = self.core().steal_pause > 0;
        victim.runq.steal(|n| if probing { 1 } else { policy.hooks().steal_count(n) }, &mut buf);
        let mut first = None;
        for t in buf.drain(..) {
            if t.tcb().pinned.get() {
                // Pinned to the victim (`Builder::pinned`): straight back, through its wake-up stack.
                self.shared.wake_remote(t, t.tcb().processor.load(Ordering::Relaxed));
            } else if first.is_none() {
                if probing {
                    // The probe may go home at once, however recently it came (`gather_to`).
                    t.tcb().moved_at.set(0);
                }
                first = Some(t);
            } else {
                self.make_ready(t);
            }
        }
        self.core().scratch = buf;
        self.core().probed = probing && first.is_some(); // (not a pinned ULT sent back)
        first
    }

    fn next_random(&self) -> u64 {
        let core = self.core();
        // xorshift64*
        let mut x = core.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        core.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Step 5: look for work a few rounds, then park.
    #[cold]
    fn idle(&self) {
        if self.chaos.on {
            self.chaos_idle();
        }
        self.flush_notes();
        let core = self.core();
        if std::mem::take(&mut core.sent_home) > 0 {
            // What ran here last went to a lock's home (`gather_to`): what it would steal now
            // may well go the same way. Pause stealing, longer each time in a row.
            core.steal_pause = (core.steal_pause * 2).clamp(STEAL_PAUSE_MIN, STEAL_PAUSE_MAX);
            self.pause_stealing(core.steal_pause);
            return;
        }
        core.steal_pause = 0;
        let remote = self.remote();
        for _ in 0..self.shared.config.spin_rounds {
            // A wake-up directed here (a woken waiter, often one a lock was handed to) is looked
            // for after every pause: the latency of a hand-over to an idle processor is a pause,
            // not a round.
            for _ in 0..32 {
                std::hint::spin_loop();
                if !remote.wakeup.is_empty() {
                    return;
                }
            }
            if self.has_work() || self.shared.is_shutting_down() {
                return;
            }
        }
        remote.stats.parks.bump();
        let deadline = self.core().timers.next_deadline();
        self.shared.watch.note_park(self.index, deadline.is_some()); // for the deadlock report
        let parked = self
            .shared
            .idle
            .park(&remote.park, deadline, || self.has_work() || self.shared.is_shutting_down());
        self.shared.watch.after_park(); // waits while a deadlock report is being taken
        if parked == crate::park::Parked::Slept {
            remote.stats.wakeups.bump();
        }
    }

    /// Parks until there is work of this processor's own (nothing to steal counts), a
    /// notification, or `micros` pass: the pause of [`Processor::idle`] after ULTs went home.
    #[cold]
    fn pause_stealing(&self, micros: u32) {
        let remote = self.remote();
        remote.stats.parks.bump();
        remote.stats.steal_pauses.bump();
        let mut deadline = Instant::now() + std::time::Duration::from_micros(u64::from(micros));
        if let Some(d) = self.core().timers.next_deadline() {
            deadline = deadline.min(d);
        }
        self.shared.watch.note_park(self.index, true); // for the deadlock report
        remote.park.set_pausing(true); // no helper wanted from here meanwhile
        let parked = self
            .shared
            .idle
            .park(&remote.park, Some(deadline), || self.has_own_work() || self.shared.is_shutting_down());
        remote.park.set_pausing(false);
        self.shared.watch.after_park();
        if parked == crate::park::Parked::Slept {
            remote.stats.wakeups.bump();
        }
    }

    /// Whether anything this processor could run is visible now.
    fn has_work(&self) -> bool {
        if self.has_own_work() {
            return true;
        }
        let shared = &*self.shared;
        shared.processors.iter().any(|p| !p.start.is_empty() || p.runq.len() > 0)
    }

    /// Whether anything is visible that this processor would run without stealing: its own
    /// queues, a due timer, the node and global start-queues.
    fn has_own_work(&self) -> bool {
        let shared = &*self.shared;
        let remote = self.remote();
        let core = self.core();
        if core.next.is_some()
            || !remote.wakeup.is_empty()
            || self.runq().len() > 0
            || !remote.start.is_empty()
        {
            return true;
        }
        if let Some(d) = self.core().timers.next_deadline() {
            if d <= Instant::now() {
                return true;
            }
        }
        !shared.nodes[remote.node].start.is_empty() || !shared.global_start.is_empty()
    }

    /// The join fast path: if `t` is the newest entry of this processor's start-queue, start it
    /// now, from the joining ULT, instead of blocking the joiner and letting the loop start it.
    ///
    /// The child still gets its own stack and runs as itself (`current` names it); its coroutine is
    /// resumed from the joiner's stack rather than the loop's. When it returns or switches out
    /// (yield, block, sleep), control comes back here and the transition is finished exactly as
    /// the loop would finish it, on the joiner's stack, never the child's. The joiner then reads
    /// the join state as usual and blocks only if the child has not finished. Popping the entry is
    /// what proves this processor owns `t`; an entry that is not `t` is pushed back on top, which
    /// restores the queue's order.
    ///
    /// Only the ULT currently running on this processor calls this.
    pub(crate) fn start_inline(&self, t: TcbRef) -> Inline {
        match self.pop_start() {
            Some(top) if top == t => {}
            Some(top) => {
                // It came from there, and nothing was pushed since: there is room.
                let _ = self.remote().start.push(top.as_ptr());
                return Inline::NotStarted;
            }
            None => return Inline::NotStarted,
        }
        self.remote().stats.start_local.bump();
        let joiner = self.current.get();
        let outer = self.core().inline_child.replace(t);
        // Scheduler code runs here on the joiner's stack: a panic in it is a runtime bug, as in the
        // loop, not something for the joiner to catch.
        let guard = crate::AbortOnPanic("the join fast path");
        if let Some(j) = joiner {
            self.core().affinity.pause(j);
        }
        self.core().no_hand_off += 1;
        self.start_ult(t, crate::blocking::current_worker());
        self.core().no_hand_off -= 1;
        if joiner.is_some() {
            self.core().affinity.resume();
        }
        std::mem::forget(guard);
        // `exit` clears the mark when the child returned during this run.
        let finished = self.core().inline_child != Some(t);
        self.core().inline_child = outer;
        self.current.set(joiner);
        if finished {
            Inline::Finished
        } else {
            Inline::Switched
        }
    }

    /// Gives a never-run ULT a context (a stack) from this processor's pool and runs it; `w` is
    /// the calling thread's worker.
    fn start_ult(&self, t: TcbRef, w: &crate::blocking::Worker) {
        let tcb = t.tcb();
        let ctx = match self.get_context(tcb.stack_size()) {
            Ok(c) => c,
            Err(e) => return self.fail_start(t, e),
        };
        // SAFETY: this processor owns the TCB (it took it from a start-queue); a never-started
        // ULT has no context, so the write overwrites a `None` (nothing to drop).
        unsafe { ptr::write(tcb.context.get(), Some(ctx)) };
        // SAFETY: as above; the context holds its stack until the ULT exits.
        tcb.guard_at.set(unsafe { (*tcb.context.get()).as_ref() }.map_or(0, |c| c.guard_at));
        crate::prefetch::UltBlock::on_start(t, self.prefetch);
        tcb.life.set(Life::Started);
        if tcb.pinned.get() {
            self.core().pinned_here += 1;
        }
        self.run_ult(t, w);
    }

    /// Whether a pinned ULT lives on this processor (started here, not exited).
    pub(crate) fn hosts_pinned(&self) -> bool {
        self.core().pinned_here > 0
    }

    /// A context on a new stack: its coroutine's function is the trampoline that runs one ULT
    /// after another (see [`Context`]).
    #[cold]
    fn new_context(stack: UltStack) -> Box<Context> {
        let (canary_at, guard_at, usable) = (stack.canary_addr(), stack.guard_addr(), stack.usable());
        // Resumed with nothing (a zero-sized value crosses the switch in a register, with
        // corosensei's unwind flag): the trampoline looks its processor up when a ULT starts and
        // when it exits, not at every switch.
        let co = Ult::with_stack(stack, |y: &UltYielder, ()| loop {
            // A context is resumed only by a processor, on the OS thread running it.
            let Some(t) = current_processor().and_then(|p| p.current_ult()) else {
                crate::fatal("a context started with no current ULT");
            };
            let tcb = t.tcb();
            tcb.yielder.set(y);
            // ULT-local values die with the ULT, also when shutdown unwinds it (`crate::local`).
            let locals = crate::local::UltLocals(t);
            // SAFETY: the task is live (set at spawn, consumed only after COMPLETE) and only
            // the processor running this ULT calls `run`.
            unsafe { (tcb.vtable.get().run)(tcb.task.get()) };
            locals.destroy(); // before the exit is published: the joiner sees their destructors
            std::mem::forget(locals);
            // Publish the exit here, on the ULT's own stack: dropping a detached ULT's result
            // runs user code, which may join, yield or sleep like any ULT code. The task may
            // have switched: the processor running us now is the last one that resumed us.
            let Some(p) = current_processor() else {
                crate::fatal("a ULT exited off its processor");
            };
            p.publish_from_ult(t);
            // At rest until the next ULT: nothing with drop glue lives in this frame here.
            y.suspend(Switch::EXIT);
        });
        Box::new(Context { co, canary_at, guard_at, usable, at_rest: false })
    }

    #[cold]
    fn fail_start(&self, t: TcbRef, e: std::io::Error) {
        self.remote().stats.stack_failures.bump();
        self.shared.stacks_exhausted.store(true, Ordering::Relaxed);
        let err = SpawnError::Stack { size: t.tcb().stack_size(), error: e.to_string() };
        let tcb = t.tcb();
        // SAFETY: this processor owns the never-started task.
        unsafe { (tcb.vtable.get().fail)(tcb.task.get(), Box::new(err)) };
        // Never started: no ULT stack to publish from; a detached one's closure is dropped here, on
        // the loop (where join, yield and sleep act like on a plain OS thread).
        let prev = self.publish(t);
        self.settle(t, prev);
    }

    /// A context for a ULT with a `size`-byte stack: pooled when `size` is the runtime's default.
    #[inline]
    fn get_context(&self, size: usize) -> std::io::Result<Box<Context>> {
        let shared = &*self.shared;
        let stats = &self.remote().stats;
        if size == self.stack_size && self.central {
            if let Some(c) = shared.nodes[0].stacks.take_one() {
                return Ok(c);
            }
        } else if size == self.stack_size {
            match self.core().stack_pool.get(&shared.nodes[self.remote().node].stacks) {
                Got::Hit(c) => {
                    stats.stack_pool_hits.bump();
                    return Ok(c);
                }
                Got::Underflow(c) => {
                    stats.stack_pool_misses.bump();
                    stats.stack_pool_underflows.bump();
                    return Ok(c);
                }
                Got::Empty => stats.stack_pool_misses.bump(),
            }
        }
        stats.stack_fresh.bump();
        UltStack::allocate(size, shared.config.stack_kind).map(Self::new_context)
    }

    /// Returns the context of an exited ULT to the pool (at rest).
    #[inline]
    fn put_context(&self, mut c: Box<Context>) {
        c.at_rest = true;
        let shared = &*self.shared;
        if shared.stacks_exhausted.load(Ordering::Relaxed) {
            shared.stacks_exhausted.store(false, Ordering::Relaxed); // memory is coming back
        }
        if c.usable != self.stack_size {
            return; // odd sizes are not pooled: dropping `c` unmaps its stack
        }
        if self.central {
            shared.nodes[0].stacks.put_one(c);
        } else if self.core().stack_pool.put(c, &shared.nodes[self.remote().node].stacks) {
            self.remote().stats.stack_pool_overflows.bump();
        }
    }

    /// Switches into `t` and finishes whatever transition it switched out with; then, when the
    /// transition left a ULT in the `next` slot and nothing else waits here, switches into that one
    /// at once (see [`Processor::hand_off`]), and so on.
    ///
    /// `w` is the calling OS thread's worker (`crate::blocking`), passed down from the loop (or
    /// looked up once by the join fast path) rather than read from a thread-local after every
    /// park.
    fn run_ult(&self, mut t: TcbRef, w: &crate::blocking::Worker) {
        let stats = &self.remote().stats;
        let check_canary = self.check_canary;
        // Fixed for the processor's life: read once here, not at every resume.
        let (begin_hook, end_hook) = self.core().affinity.run_hooks();
        // Whether anything at all runs after a switch out (rare: a recording or hardware-counting
        // policy, unguarded stacks): one test per switch when nothing does.
        let after_hooks = end_hook || check_canary;
        'chain: loop {
            let tcb = t.tcb();
            tcb.processor.store(self.index, Ordering::Relaxed);
            // SAFETY: this processor owns the started ULT; the context is Some from `start_ult`
            // until `exit` takes it, after this borrow ends. The ULT's own code never touches the
            // field.
            let ctx = unsafe { (*tcb.context.get()).as_mut() }
                .unwrap_or_else(|| crate::fatal("ULT without a context"));
            let why = loop {
                self.current.set(Some(t));
                stats.switches.bump();
                if begin_hook {
                    std::hint::cold_path();
                    self.core().affinity.begin_run();
                }
                let why = match ctx.co.resume(()) {
                    CoroutineResult::Yield(why) => why,
                    // The trampoline never returns; only a forced unwind (shutdown) ends it.
                    CoroutineResult::Return(()) => crate::fatal("a ULT context returned"),
                };
                self.current.set(None);
                if after_hooks {
                    std::hint::cold_path();
                    if end_hook {
                        self.core().affinity.end_run(t);
                    }
                    if check_canary {
                        self.check_canary(t);
                    }
                }
                if why == Switch::YIELD {
                    stats.yields.bump();
                    match self.yield_from_batch(t) {
                        FromBatch::Run(n) => {
                            t = n;
                            continue 'chain;
                        }
                        FromBatch::Loop => {
                            // The step's turn for the loop (shutdown, the shared levels, the
                            // starvation turns): the batch goes back, the chosen ULT waits in
                            // the `next` slot.
                            self.flush_batch();
                            return;
                        }
                        FromBatch::Elsewhere => {}
                    }
                    // Nothing else to run here: resume at once without touching any queue (unless
                    // the chaos mode moves the ULT).
                    if self.nothing_else_local() && !self.chaos.on {
                        continue;
                    }
                }
                break why;
            };
            // The kinds by how often they come: a blocking wait on a synchronization object
            // first (tested alone, so that it is not one case of a jump table).
            if why.kind() <= Switch::LINK_FRONT {
                // SAFETY: the ULT switched out holding the object's lock, the `LinkTo` and its
                // node on its frozen stack, the object alive and untouched by anyone else until
                // the node is linked and the lock released, which this does (`Switch::link`).
                unsafe {
                    crate::sync::wait::link_after_switch(why.at(), why.kind() == Switch::LINK_FRONT, t)
                };
            } else if why == Switch::YIELD {
                self.requeue_yielded(t);
            } else if why.kind() == Switch::PARK {
                let park: *const Park = why.at();
                // SAFETY: `park` points into the blocked ULT's frozen stack, valid until it is
                // resumed, which cannot happen before `action` publishes it.
                unsafe { ((*park).action)(park, t, self) };
                // A blocking call's action may have handed this processor to another OS
                // thread (`crate::blocking::switched`), or shutdown began: leave the loop's
                // frames without touching the processor again (the loop checks the same flag).
                if w.stop.load(Ordering::Relaxed) {
                    return;
                }
            } else if why == Switch::EXIT {
                self.exit(t);
            } else {
                debug_assert!(why.kind() == Switch::SLEEP);
                // SAFETY: the deadline lives on the sleeping ULT's frozen stack.
                let deadline = unsafe { (*why.at::<Deadline>()).0 };
                self.core().timers.insert(deadline, t);
                self.flush_batch();
                return;
            }
            match self.hand_off() {
                Some(n) => t = n,
                None => {
                    // Back to the loop: every ready ULT in the runqueue (see `YieldBatch`).
                    self.flush_batch();
                    return;
                }
            }
        }
    }

    /// The direct hand-off: after a transition, the ULT in the `next` slot (the one the
    /// transition made ready: a woken receiver, a joiner, the next yielder in line) runs at once,
    /// without a round of the loop, when the loop would pick it anyway: no wake-up, clean-up note
    /// or timer waits, and this is not the 61st step in a row (then the loop runs, and with it
    /// the shutdown check and the shared start-queue levels). Never inside the join fast path,
    /// whose caller waits on this stack for its child's switch.
    #[inline]
    fn hand_off(&self) -> Option<TcbRef> {
        let core = self.core();
        let n = core.next?;
        if core.step() || core.no_hand_off > 0 {
            return None; // (a join fast path waits below us; the chaos mode's loop picks at random)
        }
        if self.loop_has_errands() {
            return None;
        }
        if n.tcb().life.get() != Life::Started {
            return None; // (never in the slot today; the loop's dispatch starts such a one)
        }
        core.next = None;
        self.prefetch_chosen(n); // as the loop does for the ULT it picks
        Some(n)
    }

    /// The yield of `t` in a round-robin served from the yield batch, in one step: what
    /// `requeue_yielded` and `hand_off` would do when the batch holds a taken ULT (`t` takes its
    /// place, and it runs next), with their tests once each, except those of the loop's
    /// errands and the start-queues, made at the batch's first yield only (see below).
    /// [`FromBatch::Loop`] on the step that is the loop's turn (`t` is in the batch then, the
    /// ULT to run next in the `next` slot); [`FromBatch::Elsewhere`] (and nothing done) when
    /// they would do anything else.
    ///
    /// Wake-ups, clean-up notes, timers and start-queue entries are looked for at the yield that
    /// refilled the batch (`requeue_yielded`, `hand_off`) and at the batch's first yield, not at
    /// the six after it: what arrives meanwhile waits at most `BATCH` - 1 yields of ULTs of
    /// this processor (tens of nanoseconds) longer for the loop, or for its admission
    /// (`admit_one`). Those six loads of five lines were a tenth of a yield's instructions
    /// (`hot_path_probe yields`, 1024 ULTs: 156 -> 139 per yield, task-clock 8.8 -> 8.4 ns).
    /// Under No Affinity and Minimum Misses only (their yield key is always 0; the batch is
    /// never filled under the others, nor in the central or chaos mode).
    #[inline]
    fn yield_from_batch(&self, t: TcbRef) -> FromBatch {
        let core = self.core();
        let Some(n) = core.batch.peek_taken() else {
            return FromBatch::Elsewhere;
        };
        // (`yield_at_zero` last: it does `yield_priority`'s bookkeeping.)
        if core.next.is_some()
            || core.no_hand_off > 0
            || (core.batch.at_first() && (self.loop_has_errands() || self.start_work_visible()))
            || n.tcb().life.get() != Life::Started
            || !core.affinity.yield_at_zero()
        {
            return FromBatch::Elsewhere;
        }
        let Ok(n) = core.batch.swap(t) else {
            return FromBatch::Elsewhere; // (not reached: `n` was peeked)
        };
        if core.step() {
            core.next = Some(n);
            return FromBatch::Loop;
        }
        if n.tcb().prefetching.get() {
            self.prefetch_chosen(n); // as `hand_off` does (the test inline: most ULTs have no block)
        }
        FromBatch::Run(n)
    }

    /// Whether a wake-up, a clean-up note or a timer waits for the loop: then the fast paths
    /// (`hand_off`, `yield_from_batch`) go back to it.
    #[inline]
    fn loop_has_errands(&self) -> bool {
        let remote = self.remote();
        !remote.wakeup.is_empty() || !remote.cleanup.is_empty() || !self.core().timers.is_empty()
    }

    /// True when no ready ULT, wake-up, start-queue entry or timer waits here (the yield fast path).
    /// Only such a yield counts a step here; one that finds other work counts its step in
    /// [`Processor::hand_off`], so that every yield counts one and the loop's turn (every
    /// [`TICK_PERIOD`]-th step) is never spent on a yield that goes on to the hand-off anyway.
    #[inline]
    fn nothing_else_local(&self) -> bool {
        let core = self.core();
        let alone = core.next.is_none()
            && self.runq().len() == 0
            && core.batch.is_empty()
            && self.remote().wakeup.is_empty()
            && self.remote().start.is_empty()
            && core.timers.is_empty();
        // On the loop's turn the yielder is queued and the loop runs (shutdown, the shared levels).
        alone && !core.step()
    }

    /// A ULT yielded while other work waits: it goes behind the other ready ULTs (the policy's
    /// yield key) and one never-started ULT is admitted first.
    fn requeue_yielded(&self, t: TcbRef) {
        if self.chaos.on && self.chaos_migrate(t) {
            return;
        }
        let core = self.core();
        if let Some(n) = core.next.take() {
            self.make_ready(n);
        }
        let key = core.affinity.yield_priority(t);
        if !self.central && core.next.is_none() && !self.start_work_visible() {
            // Nothing to admit: queue `t` and take the best ready ULT; the best runs next.
            if key == 0 && !self.chaos.on && (!core.batch.is_empty() || self.runq().len() >= BATCH_FROM) {
                // The zero lane's round-robin (see `YieldBatch`): the batch's next ULT, without
                // the lock, or a refill under one acquisition. (A runqueue too short for a batch
                // takes the plain path below: fewer instructions.)
                core.next = match core.batch.swap(t) {
                    Ok(n) => Some(n),
                    Err(t) => self.runq().yield_refill(t, &mut core.batch),
                };
                return;
            }
            // In one critical section (one lock round trip instead of two).
            self.flush_batch();
            core.next = self.runq().push_pop_best(key, t);
            return;
        }
        self.runq().push_flushing(key, t, &mut core.batch);
        core.admit_one = true;
    }

    /// Whether any start-queue this processor takes from (own, node, global) shows an entry.
    #[inline]
    fn start_work_visible(&self) -> bool {
        // SAFETY: `node_start` points into `shared.nodes`, a boxed slice that lives as long as
        // `shared`, which this processor holds.
        let node_start = unsafe { &*self.node_start };
        !self.remote().start.is_empty() || !node_start.is_empty() || !self.shared.global_start.is_empty()
    }

    /// Checked after every switch out of a ULT on an unguarded stack.
    #[inline]
    fn check_canary(&self, t: TcbRef) {
        // SAFETY: the ULT just switched out, so its context is still in the TCB; only this
        // processor touches it.
        let at = unsafe { (*t.tcb().context.get()).as_ref() }.map_or(0, |c| c.canary_at);
        // SAFETY: `at` is the low end of the ULT's unguarded stack (0: guarded), recorded when the
        // context was made; the context holds the stack, so the memory is live.
        if !unsafe { crate::stack::canary_intact_at(at) } {
            self.canary_overwritten(t);
        }
    }

    #[cold]
    fn canary_overwritten(&self, t: TcbRef) -> ! {
        let tcb = t.tcb();
        crate::fatal(&format!(
            "stack overflow in ULT {} ({}): the canary of its {}-byte unguarded stack was overwritten",
            tcb.id.get(),
            self.ult_name(t),
            tcb.stack_size()
        ));
    }

    fn ult_name(&self, t: TcbRef) -> String {
        // SAFETY: the name is written at spawn and immutable afterwards.
        unsafe { (*t.tcb().name.get()).as_deref().unwrap_or("unnamed").to_string() }
    }

    /// The ULT's task returned: free its context (and stack) at once, then hand the TCB to the
    /// join protocol.
    fn exit(&self, t: TcbRef) {
        let tcb = t.tcb();
        // SAFETY: the ULT switched out for good (`Switch::EXIT`); this processor owns its context.
        let ctx = unsafe { (*tcb.context.get()).take() };
        if let Some(ctx) = ctx {
            self.put_context(ctx);
        }
        if tcb.pinned.get() {
            self.core().pinned_here -= 1; // it started here (pinned ULTs never move)
        }
        if self.core().inline_child == Some(t) {
            // Its joiner started it inline and is waiting right below us on this OS thread with
            // the only handle: nobody else can observe the join state (see `Inline::Finished`).
            self.core().inline_child = None;
            tcb.life.set(Life::Exited);
            self.remote().stats.joined_inline.bump();
            return;
        }
        self.settle(t, tcb.exit_prev.get());
    }

    /// The joiner's end of [`Inline::Finished`]: the output was taken, give the TCB back.
    pub(crate) fn reclaim_inline(&self, t: TcbRef) {
        // SAFETY: the joiner owns the finished task and took its outcome (see `Inline::Finished`).
        unsafe { t.tcb().drop_spent_task() };
        // SAFETY: as above, the TCB is the joiner's alone.
        unsafe { t.tcb().reset() };
        self.pool_tcb(t);
        self.remote().handles.drop_one();
    }

    /// Publishes COMPLETE from the exiting ULT itself (its last act, on its own stack), remembering
    /// what the join state held for `settle` on the loop. Skipped when the joiner runs the ULT
    /// through the join fast path (see `exit`).
    pub(crate) fn publish_from_ult(&self, t: TcbRef) {
        if self.core().inline_child == Some(t) {
            return;
        }
        let prev = self.publish(t);
        t.tcb().exit_prev.set(prev);
    }

    /// The exit's step one: publish COMPLETE; a detached ULT's result is dropped at once, by the
    /// caller (the ULT itself, except for a ULT that never got a stack).
    ///
    /// Once COMPLETE is out, a joiner elsewhere may take the result and send a clean-up note; the
    /// note is drained by this processor's loop only after `settle`, which follows on the same
    /// thread, has put the TCB on the deathrow.
    fn publish(&self, t: TcbRef) -> usize {
        let tcb = t.tcb();
        tcb.exit_processor.set(self.index as u32);
        // Before COMPLETE: once it is out, a joiner elsewhere may reset the TCB (`Tcb::reset`), so
        // nothing of this processor's writes to the TCB may follow it (`settle` writes none).
        tcb.life.set(Life::Exited);
        let prev = tcb.join.publish_complete();
        if prev & JoinState::DETACHED != 0 {
            // SAFETY: detached and complete: nobody else will read the task.
            unsafe { tcb.drop_task() };
            // Dropping the result ran user code on the ULT, which may have made ULT-local values
            // again: they die now too.
            crate::local::UltLocals(t).destroy();
        }
        prev
    }

    /// The exit's step two, on the loop after the last switch: recycle a detached TCB, or put it on
    /// the deathrow and wake its joiner. Writes nothing to a TCB that a joiner may already have
    /// reset (only the registered waiter, which its joiner does not touch until woken).
    fn settle(&self, t: TcbRef, prev: usize) {
        let tcb = t.tcb();
        let waiter = if prev & JoinState::WAITER != 0 {
            // SAFETY: the waiter was written before WAITER was set, and the AcqRel RMW in
            // `publish` saw WAITER.
            unsafe { std::mem::replace(&mut *tcb.waiter.get(), Waiter::None) }
        } else {
            Waiter::None
        };
        if prev & JoinState::DETACHED != 0 {
            // (A waiter here registered and then detached: a foreign joiner unwound by its
            // runtime's shutdown; waking it gives up its claim.)
            self.remote().stats.reclaimed_local.bump();
            self.recycle(t);
        } else {
            self.core().deathrow.enter(t);
            self.remote().stats.deathrow_in.bump();
        }
        self.wake_joiner(waiter);
    }

    /// Wakes whoever waited in a join: a ULT of this runtime from here (see `wake`), anyone else
    /// through [`Shared::wake_joiner`].
    #[inline]
    fn wake_joiner(&self, w: Waiter) {
        match w {
            Waiter::None => {}
            Waiter::Ult(u) if self.shared.is_own(u) => self.wake(u),
            other => self.shared.wake_joiner(other),
        }
    }

    /// Makes a blocked ULT ready, waking it from this processor: straight into this processor's
    /// ready set when the policy sends it here (no atomic operation), else through the target's
    /// wake-up stack. Only code running on this processor's OS thread calls this.
    #[inline]
    pub(crate) fn wake(&self, t: TcbRef) {
        // The common case inline: a built-in policy sends `t` here (No Affinity: a hand-off from
        // a ULT running here; the hand-off rule: where it last ran, when that is here).
        let here = match self.shared.config.policy.wake_rule() {
            // (A pinned ULT goes back where it ran, whatever the rule.)
            WakeRule::Waker if self.current_ult().is_some() && !t.tcb().pinned.get() => true,
            WakeRule::Waker | WakeRule::HandOff => t.tcb().processor.load(Ordering::Relaxed) == self.index,
            WakeRule::HandOffInRounds => {
                let home = t.tcb().processor.load(Ordering::Relaxed) == self.index;
                if home && !t.tcb().pinned.get() {
                    crate::affinity::mark_woken(t); // (as `wake_target` does, but for a pinned ULT)
                }
                home
            }
            WakeRule::Gravity => self.gravity_wakes_here(t),
            WakeRule::Hook => false,
        };
        if here && !self.central_or_chaos && self.ready_here(t) {
            return;
        }
        self.wake_slow(t);
    }

    /// The common cases of making `t` ready on this processor, shared by the wake paths: the
    /// prefetch hook (`crate::prefetch`: the woken ULT's data, while the waker goes on), then
    /// behind a non-empty runqueue, or into an empty `next` slot (`make_ready`'s first case: the
    /// runqueue stays empty, so no idle processor needs telling). False, having done nothing
    /// but the prefetch, when the slot is taken and the runqueue empty: the caller's slow path.
    #[inline(always)]
    fn ready_here(&self, t: TcbRef) -> bool {
        let _ = crate::prefetch::ult(t);
        if self.remote().runq.len() != 0 {
            self.make_ready_queued(t);
            return true;
        }
        let core = self.core();
        if core.next.is_none() {
            core.next = Some(t);
            return true;
        }
        false
    }

    /// [`Processor::wake`] by the ULT running on this processor (a notifier's wake-up deferred
    /// past the object's lock, `sync::wait::Wake`): the same outcome, with No Affinity's rule
    /// (the default) decided by one flag instead of the rule's lookup and the check that a ULT
    /// is running, which the caller guarantees. Always inlined, as `wake`, into the notifiers'
    /// paths (`sync::wait`, "Switch depth").
    #[inline(always)]
    pub(crate) fn wake_from_ult(&self, t: TcbRef) {
        if !self.wake_here_from_ult(t) {
            self.wake(t);
        }
    }

    /// [`Processor::wake_from_ult`]'s No Affinity case: true if it made `t` ready (here, or
    /// through `wake_slow`); false if the caller must call `wake`. True only without the chaos
    /// mode, so a caller that gets true has no chaos decision point to take.
    #[inline(always)]
    pub(crate) fn wake_here_from_ult(&self, t: TcbRef) -> bool {
        debug_assert!(self.current_ult().is_some());
        if !self.waker_stays || t.tcb().pinned.get() {
            std::hint::cold_path(); // (another wake rule, or a pinned ULT: `wake` decides)
            return false;
        }
        if !self.ready_here(t) {
            self.wake_slow(t);
        }
        true
    }

    /// The chaos mode's decision point (`chaos::decision_point`) for code running on this
    /// processor: one test of this processor's flag.
    #[inline]
    pub(crate) fn decision_point(&self) {
        if self.chaos.on {
            chaos::decision_point_slow();
        }
    }

    /// [`Processor::wake`]'s answer for Gravity: whether `t` stays here. Out of line, so that
    /// `wake` stays small enough to inline into the blocking paths of the other rules.
    #[inline(never)]
    fn gravity_wakes_here(&self, t: TcbRef) -> bool {
        // Home, and no force acts: the hand-off rule's answer is home.
        let home = t.tcb().processor.load(Ordering::Relaxed) == self.index;
        let stays = home && crate::affinity::gravity_has_no_force(t, self.current_ult());
        if stays && !t.tcb().pinned.get() {
            crate::affinity::mark_woken(t); // (as `wake_target` does, but for a pinned ULT)
        }
        stays
    }

    /// [`Processor::make_ready`] with the runqueue known non-empty (so not into the `next` slot).
    #[inline(never)]
    fn make_ready_queued(&self, t: TcbRef) {
        if let Some(n) = self.core().next.take() {
            self.enqueue(n);
        }
        self.enqueue(t);
    }

    /// [`Processor::wake`] past its common case.
    #[inline(never)]
    fn wake_slow(&self, t: TcbRef) {
        let config = &self.shared.config;
        let target = crate::affinity::wake_target(
            &config.policy,
            config.needs,
            &self.shared.affinity,
            t,
            Some(self.index),
            self.current_ult(),
        );
        if self.central_or_chaos {
            return self.wake_central_or_chaos(t, target);
        }
        self.wake_to(t, target);
    }

    /// [`Processor::wake`]'s delivery to `target`.
    #[inline]
    fn wake_to(&self, t: TcbRef, target: usize) {
        if target == self.index {
            // Idle processors are told when the runqueue turns non-empty (they may steal from
            // it), not at every entry: one that parks later sees the entries in its re-check
            // (`crate::park`), and one parked before was woken by the first entry.
            if self.ready_here(t) {
                return;
            }
            self.make_ready(t);
            if self.remote().runq.len() > 0 {
                self.shared.notify_any();
            }
        } else {
            self.shared.wake_remote(t, target);
        }
    }

    /// [`Processor::wake`] on a `central` runtime (one runqueue) or in chaos mode (a random target
    /// one time in two), out of line: the usual wake-up pays one test for both.
    #[cold]
    #[inline(never)]
    fn wake_central_or_chaos(&self, t: TcbRef, target: usize) {
        if self.central {
            self.enqueue(t);
            self.shared.notify_any();
        } else {
            self.wake_to(t, self.chaos_wake_target(t, target));
        }
    }

    /// Arms the deadline of timed wait `seq` of `t`, a ULT that just blocked on this processor.
    #[inline]
    pub(crate) fn add_wait_timer(&self, deadline: Instant, t: TcbRef, seq: u64) {
        self.core().timers.insert_wait(deadline, t, seq);
    }

    /// A joiner running here let go of `t`, which exited on processor `exit` (another one): note it
    /// for that processor (`queue::cleanup`). Notes go out in batches of `NOTE_BATCH`, and all of
    /// them whenever this processor runs out of work, every 61st start-queue take and every 64th
    /// loop round, so a note waits a bounded time.
    #[inline]
    pub(crate) fn note_joined(&self, t: TcbRef, exit: usize) {
        let batch = self.core().notes[exit].get_or_insert_with(NoteBatch::new);
        if batch.add(t) {
            self.flush_notes_to(exit);
        }
    }

    fn flush_notes_to(&self, exit: usize) {
        if let Some(batch) = self.core().notes[exit].take() {
            self.shared.processors[exit].cleanup.push(batch);
        }
    }

    /// Pushes every held-back clean-up note.
    #[cold]
    fn flush_notes(&self) {
        for exit in 0..self.shared.processors.len() {
            if self.core().notes[exit].is_some() {
                self.flush_notes_to(exit);
            }
        }
    }

    /// A joiner on this same processor let go of `t`: take it off the deathrow and recycle it.
    /// The TCB was reset by its joiner (see `Tcb::reset`).
    pub(crate) fn reclaim_joined(&self, t: TcbRef) {
        self.core().deathrow.leave();
        self.remote().stats.reclaimed_local.bump();
        self.pool_tcb(t);
    }

    /// Resets a finished TCB and returns it to this processor's pool.
    fn recycle(&self, t: TcbRef) {
        // SAFETY: callers own the finished TCB (detached at exit, or never started and failed).
        unsafe { t.tcb().reset() };
        self.pool_tcb(t);
    }

    /// Returns a reset TCB to this processor's pool (touching only the pointer).
    #[inline]
    fn pool_tcb(&self, t: TcbRef) {
        // A free TCB names no waiter: `settle` (which ran on this processor before anything could
        // bring the TCB here) took a registered one, and a joiner that registered after the exit
        // cleared its own (see `Tcb::reset`).
        // SAFETY: the TCB is finished and this processor pools it: nobody else accesses it.
        debug_assert!(matches!(unsafe { &*t.tcb().waiter.get() }, Waiter::None));
        let shared = &*self.shared;
        if self.central {
            shared.nodes[0].tcbs.put_one(t);
        } else if self.core().tcb_pool.put(t, &shared.nodes[self.remote().node].tcbs) {
            self.remote().stats.tcb_pool_overflows.bump();
        }
    }

    /// Takes a TCB from the pool hierarchy, allocating a fresh chunk only when both levels are empty.
    #[inline]
    pub(crate) fn alloc_tcb(&self) -> TcbRef {
        let shared = &*self.shared;
        let stats = &self.remote().stats;
        if self.central {
            return shared.nodes[0].tcbs.take_one().unwrap_or_else(|| self.alloc_chunk());
        }
        let pool = &mut self.core().tcb_pool;
        match pool.get(&shared.nodes[self.remote().node].tcbs) {
            Got::Hit(t) => {
                stats.tcb_pool_hits.bump();
                // The next spawn's TCB (pooled TCBs were last touched by their joiners, often
                // long ago or on another processor).
                if let Some(n) = pool.peek() {
                    crate::prefetch::start_lines(n.as_ptr());
                }
                t
            }
            Got::Underflow(t) => {
                stats.tcb_pool_misses.bump();
                stats.tcb_pool_underflows.bump();
                t
            }
            Got::Empty => {
                stats.tcb_pool_misses.bump();
                match self.tcb_from_other_nodes() {
                    Some(t) => {
                        stats.tcb_pool_underflows.bump();
                        t
                    }
                    None => {
                        stats.tcb_fresh.bump();
                        self.alloc_chunk()
                    }
                }
            }
        }
    }

    /// This processor's pool and its node's are empty: refill from another node's pool before
    /// allocating fresh TCBs. TCBs are never returned to the system (they live in chunks), so
    /// without this a steady flow of ULTs spawned on one node and ending on another (stolen, or
    /// woken there) would pile TCBs up in the second node's pool while the first allocates for
    /// ever (the soak test found it on a 2x2 topology).
    #[cold]
    fn tcb_from_other_nodes(&self) -> Option<TcbRef> {
        let nodes = &self.shared.nodes;
        let here = self.remote().node;
        (1..nodes.len()).find_map(|k| match self.core().tcb_pool.get(&nodes[(here + k) % nodes.len()].tcbs) {
            Got::Hit(t) | Got::Underflow(t) => Some(t),
            Got::Empty => None,
        })
    }

    #[cold]
    fn alloc_chunk(&self) -> TcbRef {
        let mut tcbs = self.shared.new_chunk();
        let first = tcbs.pop().unwrap_or_else(|| crate::fatal("empty TCB chunk"));
        let node = &self.shared.nodes[self.remote().node].tcbs;
        for t in tcbs {
            if self.central {
                node.put_one(t);
            } else {
                let _ = self.core().tcb_pool.put(t, node);
            }
        }
        first
    }

    /// Next ULT id of this processor: unique runtime-wide without a shared counter.
    #[inline]
    pub(crate) fn next_id(&self) -> u64 {
        let core = self.core();
        core.id_seq += 1;
        core.id_seq * self.shared.processors.len() as u64 + self.index as u64
    }

    /// Puts a new ULT on this processor's start-queue, overflowing to the node and global levels.
    #[inline]
    pub(crate) fn push_start(&self, t: TcbRef) {
        let shared = &*self.shared;
        let core = self.core();
        if self.central {
            shared.global_start.push(t.as_ptr());
        } else if let Err(t) = self.remote().start.push_within(t.as_ptr(), core.start_limit) {
            self.push_start_overflow(t);
        }
        shared.notify_any();
    }

    /// The own start-queue is full: its oldest half moves down to the node's level in one batch
    /// (what the node cannot hold goes on to the global level), then `t` goes on the own queue.
    /// The newest entries stay here, where this processor starts them next; the oldest, which it
    /// would start last, go where other processors of the node take them in batches.
    #[cold]
    fn push_start_overflow(&self, t: *mut Tcb) {
        let shared = &*self.shared;
        let remote = self.remote();
        let core = self.core();
        let half = (core.start_limit / 2).clamp(1, SPILL_MAX);
        let mut spill = std::mem::take(&mut core.spill);
        spill.resize(half, ptr::null_mut());
        let k = remote.start.take_oldest(&mut spill);
        let to_node = shared.nodes[remote.node].start.push_batch(&spill[..k]);
        remote.stats.start_overflow_node.add(to_node as u64);
        if to_node < k {
            remote.stats.start_overflow_global.add((k - to_node) as u64);
            shared.global_start.push_batch(&spill[to_node..k]);
        }
        self.core().spill = spill;
        // There is room now: the claim took at least one entry, or thieves emptied the queue
        // before it. (Should `t` still not fit, it goes down a level too.)
        if let Err(t) = remote.start.push_within(t, core.start_limit) {
            match shared.nodes[remote.node].start.push(t) {
                Ok(()) => remote.stats.start_overflow_node.bump(),
                Err(t) => {
                    remote.stats.start_overflow_global.bump();
                    shared.global_start.push(t);
                }
            }
        }
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
