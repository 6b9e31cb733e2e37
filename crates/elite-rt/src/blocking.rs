//! Blocking calls: [`blocking`] runs a call that may sleep in the kernel without taking a
//! processor out of service (ELiTE section 2.3.4; Go's `entersyscall`/`handoffp`/`exitsyscall` is
//! the modern form of the same idea).
//!
//! # The design: the processor is handed over, the call stays on its thread
//!
//! ELiTE parks spare kernel threads; when a kernel thread blocks, a parked one is released to keep
//! the number of running kernel threads equal to the number of processors. Here a *worker* is an OS
//! thread of the runtime, and a processor (its owned [`Core`](crate::processor) and its loop) is a
//! thing workers pass among themselves:
//!
//! 1. A ULT calls [`blocking`]`(f)`. It blocks like any waiting ULT (`park_current`, a
//!    `Switch::park` whose action is [`switched`]: the loop's run of a ULT is not touched); `f`
//!    and the slot for its outcome stay in the ULT's frozen frame.
//! 2. The loop's bottom frame, in the park's action ([`switched`]), on the worker's own stack,
//!    hands the processor to a parked spare worker (starting one if none is parked and the cap
//!    allows), then runs `f` right there, on its own native stack, as a plain OS thread: it is no
//!    processor's thread while `f` runs (`current_processor()` is `None`), so `elite_rt::sync`
//!    objects park it, `yield_now` yields the OS thread, and spawns go to the runtime from outside.
//! 3. The spare wakes, takes the processor over (pins itself to the processor's CPU, registers as
//!    the thread to unpark, sets its current processor, `processor::current`) and runs the loop from the top of a round.
//! 4. When `f` returns, the calling worker takes its processor back if the spare has not taken it
//!    over yet (a short call: the spare goes back to sleep), and the ULT runs next on it.
//!    Otherwise the worker becomes a spare (or takes the next call queued at the cap) and only then
//!    gives the ULT back to a processor, the one the policy's wake target names (by default the one
//!    it ran on), through that processor's wake-up stack: a call the ULT makes at once finds this
//!    worker rather than starting a thread. Its stack still holds the frames of the loop of the
//!    processor it handed over: it runs the queued calls it took, then leaves those frames without
//!    touching that processor (`Worker::stop`, checked at the top of every round instead of the
//!    shutdown flag: no extra work on the loop), and waits, parked, to take over whichever
//!    processor is handed to it next. A spare left without an offer for the keep-alive exits.
//!
//! Why this rather than handing the *ULT* to a spare thread that runs `f` while the processor stays
//! on its thread: `f` starts at once on the thread that was running the ULT, without waiting for
//! another thread to wake up (which takes far longer than a short call when that thread's CPU
//! had halted, above all in a virtual machine), and a short call finishes without any other
//! thread having run: the wake-up of the
//! spare is off the call's path. It is also the paper's model: "the runtime system parks spare
//! kernel threads ... to maintain a fixed number of running kernel threads". Only a call queued at
//! the cap is run by another thread than its caller's (the next worker whose own call ends): its
//! processor never stopped, so there is nothing to hand over.
//!
//! # Pinned ULTs
//!
//! A processor on which a pinned ULT lives ([`Builder::pinned`](crate::Builder::pinned): started
//! there, not exited; the processor counts them) is never handed over: a call made there, by the
//! pinned ULT or any other, runs in [`switched`] on the processor's own thread and the processor
//! is out of service until it returns (`BlockingStats::pinned_inline`). Handing it to a spare
//! would move the pinned ULTs to the spare's OS thread. Pin only what must stay on one thread.
//!
//! The join fast path (`Processor::start_inline`) runs a child on its joiner's stack; a child
//! that calls `blocking` there switches out to a *nested* resumer, whose thread is in the middle
//! of the joiner's run. That resumer does not hand the processor over: it makes the child ready
//! (`running_inline` tells it apart), the joiner goes on (and blocks in its join), and the child,
//! resumed by the bottom frame, blocks with its call once more.
//!
//! # States (all under the registry's lock, [`State`])
//!
//! Per worker ([`Slot`]): its `role` and a pending `offer`. A processor's offer names its giver
//! `g` (the worker whose call handed it over; none for the start-up offers).
//!
//! ```text
//! role   Running(p) --ULT's call; offer p to a spare (parked, or started)--> InCall
//!        Running(p) --ULT's call, no spare and `extra >= cap`: queue it--> Running(p)
//!        Running(p) --ULT anchors after the close: p counted stopped--> InCall (see "Anchored ULTs")
//!        InCall --call done, its own offer of p (giver: it) still pending: revoke it--> Running(p)
//!                                                                                  (reclaim)
//!        InCall --call done, p taken: ULT to a wake-up stack; next queued call--> InCall
//!        InCall --call done, p taken, queue empty--> Spare (on `spares`)
//!        Spare --takes offer Processor(p, g)--> Running(p)
//!        Spare --takes offer Call(q)--> InCall
//!        Spare --no offer for the keep-alive--> Exited (slot freed, `extra - 1`)
//!        Running(p) --loop stopped by shutdown: p counted stopped--> Exited
//!        Spare, InCall (its call done) --closed--> Exited
//! offer  None --handoff by g, or a revoked spare given the queue's head--> Processor(p, g) | Call(q)
//!        Processor(p, g) | Call(q) --taken by the worker, or revoked (g's reclaim, close)--> None
//! ```
//!
//! Why the giver: between a handoff and the end of its call, the taker may take p, hand it on
//! with a call of its own, end that call (a spare again, on `spares`), and be offered p once more
//! by whoever runs p now. That offer is the newer giver's: it alone may revoke it (its reclaim),
//! and the first giver, whose call ends, finds no offer of its own and becomes a spare. Taking it
//! back instead would leave p running on a thread that p's park slot does not name (see "Why no
//! wake-up is lost"); `a_reclaim_takes_back_only_its_own_handoff` in `tests/blocking.rs` is that
//! interleaving. A giver makes no other offer while in its call, so `(p, giver)` names one
//! handoff.
//!
//! Invariants: each processor is, at every moment, either the `Running` role of exactly one
//! worker, or the pending `Processor` offer of exactly one worker, or stopped (shutdown); a worker
//! on the `spares` list has role `Spare` and no offer; the queue is non-empty only while every
//! spare thread allowed is inside a call (`extra >= cap`, nobody on `spares`); `extra`, the workers
//! beyond the processors, exceeds the cap only by spares started for anchored ULTs (below), so at
//! most `cap` calls run at once.
//!
//! # Who owns a processor's `Core`
//!
//! The worker whose role is `Running(p)`, and nobody while p is offered. Every change of owner
//! happens under the registry's lock (the old owner's last write to the core comes before its
//! unlock, the new owner's first after its lock), which carries the core's plain writes, the
//! owner-written counters and the `handles` count from one thread to the next. The giving thread
//! gives p away only from the bottom frame of p's loop, after the ULT switched out and the round's
//! bookkeeping (`current`, the run's end, the canary) is done, so the taker starts p between two
//! rounds; after the offer the giver writes nothing of p (it runs `f`, then either takes p back
//! under the lock, or only pushes on p's wake-up stack, a shared structure, and leaves p's frames
//! through `Worker::stop`). So p is never run by two threads at once.
//!
//! # Why no wake-up is lost
//!
//! * Work pushed for p while it changes hands: p's park slot names the thread to unpark. The taker
//!   registers itself before it can park for p, and a waker reads the registration only after its
//!   CAS saw PARKED (`crate::park`), so it unparks the thread that parked. A handoff happens only
//!   while p's thread is running (in the loop, not parked), so the old registration is never the
//!   one a parked p needs. A reclaim does not register again: the giver revokes only its own
//!   offer, still pending, so no thread took p over since the giver last ran it, and the slot still
//!   names the giver.
//! * A spare waits for an offer with `std::thread::park` in a loop that checks its offer under the
//!   lock; whoever makes the offer unparks it after the unlock, and the park token covers an unpark
//!   that comes before the park.
//! * The ULT after its call: pushed on a wake-up stack with the runtime's usual wake path
//!   (`Shared::wake`, which unparks the target), or, after a reclaim, made ready on p by its owner.
//! * A queued call: the worker that ends its call looks at the queue under the same lock that
//!   queued it, so a call queued while it ran is taken before it parks; and a call queues only
//!   when no spare is parked (a spare takes the queue's head, under the lock, before it parks).
//!
//! # Shutdown
//!
//! `close` (under the lock): every worker's `stop` is raised, pending offers are revoked (an
//! offered processor counts as stopped; a call offered or queued is dropped from the queue, its
//! ULT left suspended for the shutdown walk to cancel), every worker is unparked. A running loop
//! stops at its next round and its worker counts the processor stopped. The drop waits until every
//! processor is stopped, joins every worker that is not inside a call, and cancels the unfinished
//! ULTs except those whose call is running (`in_call`): their stacks are in use by their calls.
//! A worker inside a call is not waited for (the call may sleep for as long as it likes); when the
//! call returns it finds the runtime closed, cancels its ULT itself (the ULT's handle gets
//! [`Cancelled`](crate::Cancelled), its stack is unwound on that thread and freed) and exits. It
//! holds the runtime's shared state and processors until then, and that is all that outlives the
//! drop.
//!
//! # In flight
//!
//! `in_flight` counts calls from the moment their ULT leaves its processor in `switched` (before
//! the lock is released) until it is back on a wake-up stack or ready on a processor (or cancelled
//! at shutdown). A ULT in a call is neither ready nor blocked on any runtime object: a deadlock
//! detector must not report a deadlock while [`Registry::in_flight`] is not zero. Before it parks
//! for its call, the ULT records [`WaitKind::BlockingCall`](crate::deadlock::WaitKind) as what it
//! waits on (`deadlock::note_wait`), so its TCB never shows what it last blocked on before. An
//! anchored ULT counts the same way, except while it waits without a deadline in an elite object
//! or a join ([`Registry::wait_aside`]): it is blocked then, and its TCB says on what.
//!
//! # Anchored ULTs
//!
//! A ULT that would block, yield or sleep while it unwinds a panic must keep its OS thread, and
//! that thread must run nothing else, until its unwinding is over: std counts panics per OS thread
//! (`crate::anchor` says why and how). It goes through this protocol as a call whose function is
//! the ULT itself (`CallRef::anchor`, `crate::anchor::run`: the thread resumes the ULT's coroutine,
//! with no processor, until the ULT switches back to rejoin), so its processor is handed over and
//! taken back exactly as for a call, with these differences in [`switched`]:
//!
//! * never queued at the cap (a queued call runs on another worker, and the ULT must stay on this
//!   one): with no spare parked it starts one whatever `extra` is;
//! * counted in `BlockingStats::anchored` (and `anchored_inline` when it runs on a processor that is
//!   not handed over: a pinned ULT lives there, or no thread could be started), not in `calls`;
//! * under the join fast path's nested resumer it is not made ready (it must run again on this
//!   thread, and nothing else before it): the processor notes it (`Core::pending_anchor`), and the
//!   joiner's wait, which goes on below, anchors it from the bottom frame after its own switch
//!   (`crate::anchor::join_while_unwinding`);
//! * after the close (shutdown) no offer can be made: the thread leaves its processor, counted as
//!   stopped, and runs the ULT as a call in flight at the close (`anchor_after_close`): the drop does
//!   not wait for it, and `finish_call` cancels the ULT on this thread when it rejoins.

use crate::atomics::{AtomicBool, AtomicUsize, Ordering};
use crate::processor::worker::Worker;
use crate::processor::{Processor, ProcessorSet};
use crate::runtime::Shared;
use crate::slot::{current_processor, set_current_processor};
use crate::stats::BlockingStats;
use crate::tcb::TcbRef;
use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

/// Runs `f`, a call that may block its OS thread in the kernel (file or network I/O, a foreign
/// library, `std::thread::sleep`, a `std::sync` lock), without taking the calling ULT's processor
/// out of service, and returns its result.
///
/// The processor is handed to a spare OS thread of the runtime while `f` runs on the thread that
/// was running the ULT; the ULT then goes back to a processor (by default the one it ran on). So
/// other ULTs keep running while `f` sleeps: with one processor, a ULT sleeping in `blocking` does
/// not hold up any other. Spare threads are started as calls need them, up to
/// [`RuntimeBuilder::max_spare_threads`](crate::RuntimeBuilder::max_spare_threads); at that cap a
/// call waits in a queue until a thread is free (its processor runs other ULTs meanwhile).
///
/// `f` runs as a plain OS thread, not as a ULT: inside it [`current`](crate::current) and
/// [`try_current`](crate::try_current) see no ULT, [`sync`](crate::sync) objects and
/// [`JoinHandle::join`](crate::JoinHandle::join) park the OS thread, [`yield_now`](crate::yield_now)
/// and [`sleep`](crate::sleep) act on the OS thread, [`spawn`](crate::spawn) spawns on the
/// calling ULT's runtime (as [`Runtime::spawn`](crate::Runtime::spawn) does from outside), and
/// `ult_local!` values are the OS thread's, not the calling ULT's (capture what `f` needs). A nested
/// `blocking` inside `f` just calls its function.
///
/// A panic in `f` propagates to the caller of `blocking`, as from any function call; the
/// processor stays in service. Called outside a ULT, `blocking(f)` is `f()`; called by a ULT in
/// the middle of unwinding a panic (in a destructor), it runs `f` on the ULT's own OS thread, which
/// the ULT keeps, with nothing else running there, until its unwinding is over (the crate docs,
/// [Panics](crate#panics)).
///
/// What it costs (see the crate docs, "Blocking calls"): a switch out and back, two lock round
/// trips and the unpark of a spare thread, whose futex wake-up makes a call that finds the spare
/// asleep several times as costly as calls back to back, which find it awake
/// (`docs/benchmarks.md` in the repository, `blocking`, has figures with their hosts); a call
/// pays that whether it sleeps or not, so keep short non-blocking work out of it.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let rt = elite_rt::Runtime::builder().processors(1).build()?;
/// let done = Arc::new(AtomicUsize::new(0));
/// let d = done.clone();
/// let seen_by_sleeper = rt.block_on(move || {
///     // 100 ULTs that have work to do, on the one processor.
///     let workers: Vec<_> = (0..100)
///         .map(|_| {
///             let d = d.clone();
///             elite_rt::spawn(move || { d.fetch_add(1, Ordering::SeqCst); })
///         })
///         .collect();
///     // Sleeps its OS thread, not the processor: the 100 run meanwhile.
///     let seen = elite_rt::blocking(|| {
///         std::thread::sleep(Duration::from_millis(100));
///         d.load(Ordering::SeqCst)
///     });
///     workers.into_iter().for_each(|h| h.join().unwrap());
///     seen
/// });
/// assert_eq!(done.load(Ordering::SeqCst), 100);
/// # let _ = seen_by_sleeper; // usually 100 already (not asserted: a loaded machine may be slower)
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
pub fn blocking<F, R>(f: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    // An unwinding ULT anchors (and then calls `f` here, as a plain OS thread); an anchored one
    // whose unwinding is over rejoins a processor (`crate::anchor`).
    crate::anchor::at_switch_point();
    let Some(me) = current_processor().and_then(|p| p.current_ult()) else {
        return f(); // not a ULT: nothing to keep in service
    };
    // What it waits on from now, for the deadlock report: not what it last blocked on before.
    crate::deadlock::note_wait(me, crate::deadlock::WaitKind::BlockingCall, 0);
    let mut call = Call::<F, R> { f: Some(f), out: None };
    loop {
        let call_ref = CallRef::Call { data: &mut call as *mut Call<F, R> as *mut (), run: run_call::<F, R> };
        // Block: after the switch, the processor that resumed us calls `switched` on its stack.
        crate::switch::park_current(move |me, p| switched(p, me, call_ref));
        // Back on a processor: after the call ran, or made ready without it (the join fast path's
        // nested resumer; or a runtime shutting down, which will cancel this ULT where it is).
        if let Some(out) = call.out.take() {
            return match out {
                Ok(r) => r,
                Err(payload) => panic::resume_unwind(payload),
            };
        }
    }
}

/// A blocking call in its ULT's frame: the function until it runs, then its outcome.
struct Call<F, R> {
    f: Option<F>,
    out: Option<thread::Result<R>>,
}

/// Runs the call at `data` and stores its outcome there.
///
/// # Safety
/// `data` is a `Call<F, R>` in the frame of a ULT suspended in [`blocking`], and the caller is the
/// one thread that runs it (the ULT is not resumed before the outcome is stored).
unsafe fn run_call<F: FnOnce() -> R, R>(data: *mut ()) {
    // SAFETY: per the contract; the ULT's frame is frozen and nobody else touches the call.
    let call = unsafe { &mut *(data as *mut Call<F, R>) };
    let Some(f) = call.f.take() else {
        crate::fatal("a blocking call ran twice");
    };
    let out = panic::catch_unwind(AssertUnwindSafe(f));
    call.out = Some(out);
}

/// A call waiting in a suspended ULT's frame, or an anchoring ULT (see "Anchored ULTs").
#[derive(Clone, Copy)]
pub(crate) enum CallRef {
    /// `run(data)` runs the call in the ULT's frame at `data`.
    Call { data: *mut (), run: unsafe fn(*mut ()) },
    /// The "call" is the ULT itself, anchored to the calling thread (`crate::anchor::run`); with
    /// `wait` (not null), the wait word of the OS thread's node it switched out blocked on: the
    /// thread waits until that node is notified before it resumes the ULT.
    Anchor { ult: TcbRef, wait: *const AtomicUsize },
}

// SAFETY: a `CallRef` is handed, with its suspended ULT, to the one thread that runs the call (the
// caller's worker, or the worker that takes it from the queue): `blocking` requires `F: Send` and
// `R: Send`, and the ULT does not run until the outcome is stored. An anchor is only ever run by
// the thread that made it (its ULT's thread), and its wait word lives on the suspended ULT's
// stack.
unsafe impl Send for CallRef {}

impl CallRef {
    /// The "call" of a ULT that anchors to the calling thread: run the ULT itself there
    /// (`crate::anchor::run`) until it rejoins; first, with `wait`, wait for its node (see
    /// [`CallRef::Anchor`]).
    pub(crate) fn anchor(ult: TcbRef, wait: *const AtomicUsize) -> CallRef {
        CallRef::Anchor { ult, wait }
    }

    /// Whether this anchors its ULT rather than runs a call.
    fn anchors(self) -> bool {
        matches!(self, CallRef::Anchor { .. })
    }

    /// Runs the call as a plain OS thread of `shared`'s runtime (see [`blocking`]).
    ///
    /// # Safety
    /// The calling thread holds the call under the protocol (`InCall` for this ULT), and runs no
    /// processor (its current processor is cleared).
    unsafe fn run(self, shared: &Arc<Shared>) {
        let outer = IN_CALL.with(|c| c.replace(shared as *const Arc<Shared>));
        match self {
            // SAFETY: per the contract (see `run_call`).
            CallRef::Call { data, run } => unsafe { run(data) },
            // SAFETY: per the contract (see `crate::anchor::run`): the ULT switched out to anchor
            // on this thread, which made the anchor.
            CallRef::Anchor { ult, wait } => unsafe { crate::anchor::run(ult, wait) },
        }
        IN_CALL.with(|c| c.set(outer));
    }
}

thread_local! {
    /// The runtime whose blocking call this thread is running, if any (for spawns from inside it).
    static IN_CALL: Cell<*const Arc<Shared>> = const { Cell::new(std::ptr::null()) };
}

/// The runtime of the blocking call the calling thread is running, if it is running one: a spawn
/// from inside the call goes to that runtime, as from outside it.
pub(crate) fn calling_runtime<'a>() -> Option<&'a Arc<Shared>> {
    let p = IN_CALL.with(|c| c.get());
    // SAFETY: set by `CallRef::run` to an `Arc` that outlives the call (the processor's, in a set
    // the running worker holds, or the worker's own) and cleared when the call returns.
    unsafe { p.as_ref() }
}

/// What the lock guards of one worker.
struct Slot {
    worker: Arc<Worker>,
    /// The OS thread, to unpark it with an offer (set when it is started).
    thread: Option<Thread>,
    /// Taken by the drop to join the thread (left alone while it is inside a call).
    handle: Option<JoinHandle<()>>,
    role: Role,
    offer: Offer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Running(usize),
    InCall,
    Spare,
    Exited,
}

/// What a worker is asked to do next.
enum Offer {
    None,
    /// Take processor `p` over, handed over by worker `giver` (its slot; [`STARTUP`] for the
    /// first offer of each processor). The giver revokes only an offer that names it.
    Processor {
        p: usize,
        giver: usize,
    },
    /// Run a call taken from the queue.
    Call(Queued),
}

/// The giver of the start-up offers: no worker.
const STARTUP: usize = usize::MAX;

/// A call that waits for a thread: its ULT is suspended, its processor runs others.
pub(crate) struct Queued {
    ult: TcbRef,
    call: CallRef,
}

/// Everything the lock guards.
struct State {
    slots: Vec<Slot>,
    /// Parked spare workers (their slots' indices), the most recently parked last.
    spares: Vec<usize>,
    queue: VecDeque<Queued>,
    /// ULTs whose call is running now: their stacks are in use, the shutdown walk leaves them.
    in_call: Vec<TcbRef>,
    /// Slots of workers that left before shutdown, for the next thread started.
    free: Vec<usize>,
    /// Workers beyond the processors (spares started, minus those that left).
    extra: usize,
    closed: bool,
    /// Processors whose loop has stopped for shutdown.
    stopped: usize,
    stats: BlockingStats,
}

/// The runtime's workers, spares and queue of blocking calls (in `Shared`).
pub(crate) struct Registry {
    state: Mutex<State>,
    /// Signalled when a processor stops for shutdown.
    stopped: Condvar,
    in_flight: AtomicUsize,
    /// `max_spare_threads`.
    cap: usize,
    /// `spare_keep_alive`: how long a spare waits, parked, before it leaves.
    keep_alive: Duration,
    processors: usize,
    /// Where the processors live, for the spares it starts (weak: a processor holds the shared
    /// state this registry is part of).
    set: OnceLock<Weak<ProcessorSet>>,
}

/// What a worker does next.
pub(crate) enum Job {
    /// Run processor `p` (an offer of it).
    Run(usize),
    /// Run a queued blocking call.
    Serve(Queued),
    /// Leave: shutdown, or a spare idle past its keep-alive.
    Exit,
}

impl Registry {
    pub(crate) fn new(processors: usize, cap: usize, keep_alive: Duration) -> Registry {
        Registry {
            state: Mutex::new(State {
                slots: Vec::new(),
                spares: Vec::new(),
                queue: VecDeque::new(),
                in_call: Vec::new(),
                free: Vec::new(),
                extra: 0,
                closed: false,
                stopped: 0,
                stats: BlockingStats::default(),
            }),
            stopped: Condvar::new(),
            in_flight: AtomicUsize::new(0),
            cap,
            keep_alive,
            processors,
            set: OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics under this lock (no user code runs under it).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocking calls in flight now: running, or queued at the cap. Cheap (one relaxed load).
    ///
    /// For a deadlock detector: a ULT inside a blocking call is neither ready nor blocked on any
    /// runtime object, and will be made ready when its call returns, so "no ULT is ready and every
    /// processor is idle" is a deadlock only while this is zero. It is raised before the calling
    /// ULT leaves its processor and lowered only after the ULT is back on a wake-up stack or ready
    /// on a processor (both SeqCst), so it is never zero while a caller is between the two.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Takes an anchored ULT off the calls in flight while it waits without a deadline in an elite
    /// object or a join (`crate::anchor::unwatched`), until the guard drops: only someone else can
    /// end such a wait, so the deadlock report may then count the ULT as blocked.
    pub(crate) fn wait_aside(&self) -> WaitAside<'_> {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        WaitAside(self)
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self) -> BlockingStats {
        let st = self.lock();
        BlockingStats { threads: st.extra as u64, in_flight: self.in_flight() as u64, ..st.stats.clone() }
    }

    /// Starts one worker per processor, each offered its processor (runtime start-up).
    pub(crate) fn start(&self, shared: &Arc<Shared>, set: &Arc<ProcessorSet>) -> std::io::Result<()> {
        let _ = self.set.set(Arc::downgrade(set));
        let mut st = self.lock();
        for p in 0..self.processors {
            let started = self.start_worker(
                &mut st,
                shared,
                set.clone(),
                format!("elite-p{p}"),
                Offer::Processor { p, giver: STARTUP },
            );
            if let Err(e) = started {
                // No thread will ever run the processors from `p` on: they count as stopped for
                // the drop that follows.
                st.stopped += self.processors - p;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Starts a worker thread with `offer` pending (under the lock, so that the offer and the
    /// thread appear together).
    fn start_worker(
        &self,
        st: &mut State,
        shared: &Arc<Shared>,
        set: Arc<ProcessorSet>,
        name: String,
        offer: Offer,
    ) -> std::io::Result<usize> {
        let id = st.free.last().copied().unwrap_or(st.slots.len());
        let worker = Arc::new(Worker { id, stop: AtomicBool::new(false) });
        let (w, s) = (worker.clone(), shared.clone());
        let handle = thread::Builder::new()
            .name(name)
            // With an alternate signal stack for the overflow report (see `crate::fault`).
            .spawn(move || {
                crate::fault::with_alt_stack(|| crate::processor::worker::worker_main(w, s, set))
            })?;
        let thread = Some(handle.thread().clone());
        let slot = Slot { worker, thread, handle: Some(handle), role: Role::Spare, offer };
        if st.free.pop().is_some() {
            st.slots[id] = slot;
        } else {
            st.slots.push(slot);
        }
        Ok(id)
    }

    /// Waits for the next job of worker `w`: an offer, or the end (shutdown, or a spare idle
    /// for longer than the keep-alive).
    pub(crate) fn next_job(&self, w: &Worker) -> Job {
        let mut st = self.lock();
        let idle_since = Instant::now();
        loop {
            let st_ref = &mut *st;
            let slot = &mut st_ref.slots[w.id];
            match std::mem::replace(&mut slot.offer, Offer::None) {
                Offer::Processor { p, .. } => {
                    // An offer is never pending once closed (`close` revokes them), so `stop`
                    // was not raised by shutdown: lower the one of the last handoff.
                    slot.role = Role::Running(p);
                    w.stop.store(false, Ordering::Relaxed);
                    return Job::Run(p);
                }
                Offer::Call(q) => {
                    slot.role = Role::InCall;
                    st_ref.in_call.push(q.ult);
                    return Job::Serve(q);
                }
                Offer::None if st_ref.closed => {
                    slot.role = Role::Exited;
                    st_ref.stats.spares_exited += 1;
                    return Job::Exit;
                }
                Offer::None => {
                    let left = self.keep_alive.saturating_sub(idle_since.elapsed());
                    if left.is_zero() && Self::retire_spare(st_ref, w.id) {
                        return Job::Exit;
                    }
                    drop(st);
                    // Until an offer, `close`, the keep-alive's end (or a stray unpark: look again).
                    thread::park_timeout(left.max(Duration::from_millis(1)));
                    st = self.lock();
                }
            }
        }
    }

    /// A spare idle for the whole keep-alive leaves: off the spares list, its slot free for the
    /// next thread started. False if it is not a parked spare (then it waits on).
    fn retire_spare(st: &mut State, id: usize) -> bool {
        let Some(i) = st.spares.iter().position(|&s| s == id) else {
            return false;
        };
        st.spares.remove(i);
        let slot = &mut st.slots[id];
        slot.role = Role::Exited;
        slot.thread = None;
        slot.handle = None; // detached: the thread is on its way out
        st.free.push(id);
        st.extra -= 1;
        st.stats.spares_exited += 1;
        true
    }

    /// Worker `w`'s loop of processor `p` returned: a shutdown stop if it still runs `p`,
    /// otherwise the end of a handoff. Returns whether the worker is done.
    pub(crate) fn after_loop(&self, w: &Worker) -> bool {
        let mut st = self.lock();
        match st.slots[w.id].role {
            Role::Running(_) => {
                // Only shutdown raises `stop` while a worker runs a processor.
                st.slots[w.id].role = Role::Exited;
                st.stopped += 1;
                if st.stopped == self.processors {
                    self.stopped.notify_all();
                }
                true
            }
            Role::Exited => true,
            Role::Spare | Role::InCall => false,
        }
    }

    /// Runs `first` (a call this worker took under the lock), then the calls queued meanwhile;
    /// the worker is then a parked spare (or, once closed, done).
    pub(crate) fn serve(&self, shared: &Arc<Shared>, w: &Worker, first: Queued) {
        let mut next = Some(first);
        while let Some(q) = next {
            // SAFETY: this worker took the call under the lock (role `InCall`, the ULT in
            // `in_call`) and runs no processor.
            unsafe { q.call.run(shared) };
            next = self.finish_call(self.lock(), shared, w, q.ult);
        }
    }

    /// The call of `t`, run by worker `w`, is over, and `w` runs no processor. Under the lock
    /// (`st`), `w` takes the next queued call, if any, or becomes a parked spare, *before* `t` is
    /// given back: a call `t` makes at once then finds `w` rather than starting a thread. Then
    /// `t` goes back to a processor, the one the policy's wake target names (or, the runtime
    /// closed meanwhile, is cancelled here: the shutdown walk left it to us, it is in `in_call`).
    /// Returns the queued call `w` took.
    fn finish_call(
        &self,
        mut st: MutexGuard<'_, State>,
        shared: &Arc<Shared>,
        w: &Worker,
        t: TcbRef,
    ) -> Option<Queued> {
        if st.closed {
            st.slots[w.id].role = Role::Exited;
            st.stats.spares_exited += 1;
            drop(st);
            shared.cancel_late(t);
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        forget_call(&mut st.in_call, t);
        let next = st.queue.pop_front();
        match &next {
            Some(q) => st.in_call.push(q.ult),
            None => {
                st.slots[w.id].role = Role::Spare;
                st.spares.push(w.id);
                st.stats.spares_parked += 1;
            }
        }
        drop(st);
        shared.wake(t, None); // this thread runs no processor: the policy's wake target
                              // After the push: never zero while `t` is between its processors (see `in_flight`).
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        next
    }

    /// Gives worker `s`, just back from an offer it did not take, the next queued call, or puts
    /// it back on the spares.
    fn rehire(&self, st: &mut State, s: usize) {
        if let Some(q) = st.queue.pop_front() {
            st.slots[s].offer = Offer::Call(q);
        } else {
            st.spares.push(s);
        }
    }

    /// Shutdown, first step (see the module docs): raises every worker's `stop`, revokes pending
    /// offers, drops the queue, and unparks every worker.
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        let mut revoked_calls = st.queue.len();
        st.queue.clear();
        let mut stopped = 0;
        let mut threads = Vec::new();
        for slot in st.slots.iter_mut() {
            slot.worker.stop.store(true, Ordering::Relaxed);
            match std::mem::replace(&mut slot.offer, Offer::None) {
                Offer::Processor { .. } => stopped += 1,
                Offer::Call(_) => revoked_calls += 1,
                Offer::None => {}
            }
            threads.extend(slot.thread.clone());
        }
        st.stopped += stopped;
        if st.stopped == self.processors {
            self.stopped.notify_all();
        }
        drop(st);
        // Revoked calls will not run: their ULTs are cancelled by the shutdown walk.
        self.in_flight.fetch_sub(revoked_calls, Ordering::SeqCst);
        for t in threads {
            t.unpark();
        }
    }

    /// Shutdown, second step: waits until every processor's loop has stopped, then joins every
    /// worker that is not inside a call; returns the ULTs whose call still runs (for the walk to
    /// leave alone).
    pub(crate) fn stop_all(&self) -> Vec<TcbRef> {
        let mut st = self.lock();
        while st.stopped < self.processors {
            st = self.stopped.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        let me = thread::current().id();
        let joinable: Vec<JoinHandle<()>> = st
            .slots
            .iter_mut()
            .filter(|s| s.role != Role::InCall)
            .filter_map(|s| s.handle.take())
            .filter(|h| h.thread().id() != me)
            .collect();
        let in_call = st.in_call.clone();
        drop(st);
        for h in joinable {
            let _ = h.join();
        }
        in_call
    }
}

/// An anchored ULT's wait, off the calls in flight ([`Registry::wait_aside`]).
pub(crate) struct WaitAside<'a>(&'a Registry);

impl Drop for WaitAside<'_> {
    fn drop(&mut self) {
        // Before the ULT runs any code of its own again (it may wake others).
        self.0.in_flight.fetch_add(1, Ordering::SeqCst);
    }
}

/// Removes `t` from the ULTs whose call runs.
fn forget_call(in_call: &mut Vec<TcbRef>, t: TcbRef) {
    if let Some(i) = in_call.iter().position(|&u| u == t) {
        in_call.swap_remove(i);
    }
}

/// The bottom of a blocking call, on the processor `p` that ULT `t` switched out of with its call
/// (see the module docs for the protocol), or of an anchoring ULT (`call.anchors`: "Anchored
/// ULTs"). Cold: never reached without a call or an anchor.
#[cold]
#[inline(never)]
pub(crate) fn switched(p: &Processor, t: TcbRef, call: CallRef) {
    // Whoever runs `p` next finds every ready ULT in its runqueue (see `queue::run::YieldBatch`).
    p.flush_batch();
    if p.running_inline() {
        // A nested resumer (the join fast path) cannot give the processor away in the middle of
        // the joiner's run: let the bottom frame do it when the ULT switches out again; an
        // anchoring child waits for its joiner's switch instead (it must not run again
        // elsewhere, nor anything else run here, before it is anchored).
        if call.anchors() {
            p.set_pending_anchor(call);
        } else {
            p.make_ready(t);
        }
        return;
    }
    let shared = &p.shared;
    let registry = &shared.blocking;
    let w = crate::processor::worker::current_worker();
    // 1. Find a taker for `p`: a parked spare, a new one, or none (queue the call, or run it here
    //    if no thread can be started).
    let mut st = registry.lock();
    if st.closed {
        if call.anchors() {
            anchor_after_close(st, p, w, t, call);
            return;
        }
        drop(st);
        p.make_ready(t); // cancelled where it is, with the rest, by the shutdown walk
        return;
    }
    if call.anchors() {
        st.stats.anchored += 1;
    } else {
        st.stats.calls += 1;
    }
    registry.in_flight.fetch_add(1, Ordering::SeqCst);
    if p.hosts_pinned() {
        // A pinned ULT lives here (maybe the caller): it must never leave this OS thread, so the
        // processor stays on it and the call runs here, the processor out of service meanwhile.
        if call.anchors() {
            st.stats.anchored_inline += 1;
        } else {
            st.stats.pinned_inline += 1;
        }
        drop(st);
        run_inline(p, t, call);
        return;
    }
    let taker = match st.spares.pop() {
        Some(s) => {
            st.slots[s].offer = Offer::Processor { p: p.index, giver: w.id };
            Some(s)
        }
        // An anchoring ULT cannot wait in the queue (a queued call runs on another thread): it
        // takes a thread beyond the cap if it must.
        None if st.extra < registry.cap || call.anchors() => start_spare(&mut st, shared, p.index, w.id),
        None => {
            st.queue.push_back(Queued { ult: t, call });
            st.stats.queued += 1;
            p.trace_handoff(t, crate::trace::Handoff::Queued);
            return; // the next worker to end its call runs it; `p` goes on here
        }
    };
    let Some(s) = taker else {
        // The system refused a thread: run the call here, `p` out of service meanwhile.
        if call.anchors() {
            st.stats.anchored_inline += 1;
        } else {
            st.stats.unserved += 1;
        }
        drop(st);
        run_inline(p, t, call);
        return;
    };
    st.slots[w.id].role = Role::InCall;
    st.in_call.push(t);
    st.stats.handoffs += u64::from(!call.anchors());
    p.trace_handoff(t, crate::trace::Handoff::Spare); // (still ours: the taker waits for the lock)
    let thread = st.slots[s].thread.clone();
    drop(st);
    if let Some(thread) = thread {
        thread.unpark();
    }
    // 2. `p` is the taker's now: this thread writes nothing of it until it takes it back. Run the
    //    call as a plain OS thread.
    set_current_processor(None);
    // SAFETY: this thread holds `t`'s call (`InCall`, `t` in `in_call`) and runs no processor.
    unsafe { call.run(shared) };
    // 3. Take `p` back if the taker has not started; otherwise give `t` back and become a spare.
    let mut st = registry.lock();
    // Only the offer this thread made: `s` may have taken it, left `p` (a spare again), and been
    // offered `p` once more by the worker that ran it last; that offer is not ours to revoke (we
    // would run `p` while its park slot names that worker, see "Why no wake-up is lost").
    if !st.closed
        && matches!(st.slots[s].offer, Offer::Processor { p: q, giver } if q == p.index && giver == w.id)
    {
        st.slots[s].offer = Offer::None; // it wakes, finds nothing, and parks again
        registry.rehire(&mut st, s);
        st.slots[w.id].role = Role::Running(p.index);
        forget_call(&mut st.in_call, t);
        st.stats.reclaimed += u64::from(!call.anchors());
        drop(st);
        set_current_processor(Some(p));
        p.trace_handoff(t, crate::trace::Handoff::Reclaimed);
        p.make_ready(t); // runs next, on this thread
        registry.in_flight.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    if let Some(q) = registry.finish_call(st, shared, w, t) {
        registry.serve(shared, w, q);
    }
    // Leave `p`'s loop (whose frames are below us) without touching `p`: it runs elsewhere.
    w.stop.store(true, Ordering::Relaxed);
}

/// A call (or an anchored ULT) run on `p`'s own thread, `p` out of service meanwhile (a pinned ULT
/// lives on `p`, or no thread could be started); `t` then runs next on `p`. Counted in flight.
fn run_inline(p: &Processor, t: TcbRef, call: CallRef) {
    p.trace_handoff(t, crate::trace::Handoff::Inline);
    set_current_processor(None);
    // SAFETY: this thread holds `t`'s call (nobody else saw it) and, with its current processor
    // cleared, runs no processor.
    unsafe { call.run(&p.shared) };
    set_current_processor(Some(p));
    p.make_ready(t);
    p.shared.blocking.in_flight.fetch_sub(1, Ordering::SeqCst);
}

/// `t` anchors on `p` after the runtime closed (`st`, locked): no offer can be made any more, and
/// `t` must go on on this thread. This thread leaves `p`, counted as stopped (shutdown raised its
/// `stop`: the loop's frames below are left without touching `p`), and runs `t` as a call in flight
/// at the close: when `t` rejoins, `finish_call` finds the runtime closed and cancels it here.
#[cold]
fn anchor_after_close(mut st: MutexGuard<'_, State>, p: &Processor, w: &Worker, t: TcbRef, call: CallRef) {
    let shared = &p.shared;
    let registry = &shared.blocking;
    st.stats.anchored += 1;
    st.slots[w.id].role = Role::InCall;
    st.in_call.push(t);
    st.stopped += 1;
    if st.stopped == registry.processors {
        registry.stopped.notify_all();
    }
    registry.in_flight.fetch_add(1, Ordering::SeqCst);
    drop(st);
    set_current_processor(None);
    // SAFETY: this thread holds `t` (`InCall`, in `in_call`) and runs no processor.
    unsafe { call.run(shared) };
    let next = registry.finish_call(registry.lock(), shared, w, t);
    debug_assert!(next.is_none(), "a queued call after the close");
}

/// Starts a spare worker offered processor `p`; `None` when the system refuses a thread.
fn start_spare(st: &mut State, shared: &Arc<Shared>, p: usize, giver: usize) -> Option<usize> {
    let registry = &shared.blocking;
    let set = registry.set.get().and_then(Weak::upgrade)?;
    let name = format!("elite-spare{}", st.stats.spares_started);
    let id = registry.start_worker(st, shared, set, name, Offer::Processor { p, giver }).ok()?;
    st.extra += 1;
    st.stats.spares_started += 1;
    Some(id)
}

#[cfg(test)]
mod tests {
    use crate::deadlock::WaitKind;
    use crate::tcb::TcbRef;
    use std::sync::atomic::Ordering;
    use std::sync::mpsc as std_mpsc;
    use std::time::{Duration, Instant};

    /// The kind `t`'s TCB records as what it waits on.
    fn kind(t: TcbRef) -> usize {
        t.tcb().exec.waits_on.load(Ordering::Relaxed) & 0xff
    }

    /// A ULT inside a blocking call is recorded as waiting on its call, not on what it blocked on
    /// before (here a channel receive), which a deadlock report would otherwise show.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_call_replaces_the_last_wait_record() {
        let rt = crate::Runtime::builder().processors(1).build().expect("build runtime");
        let (tcb_tx, tcb_rx) = std_mpsc::channel::<usize>();
        let (tx, rx) = crate::sync::mpsc::channel::<u32>();
        let (in_tx, in_rx) = std_mpsc::channel::<()>();
        let (go_tx, go_rx) = std_mpsc::channel::<()>();
        let h = rt.spawn(move || {
            let me = crate::slot::current_processor().and_then(|p| p.current_ult()).expect("a ULT");
            tcb_tx.send(me.as_ptr() as usize).expect("send the TCB");
            let v = rx.recv().expect("the value");
            crate::blocking(move || {
                in_tx.send(()).expect("say the call runs");
                go_rx.recv().expect("the release");
            });
            v
        });
        let t = TcbRef::from_ptr(tcb_rx.recv().expect("the TCB") as *mut crate::tcb::Tcb).expect("non-null");
        // The TCB lives until the handle is joined (below).
        let deadline = Instant::now() + Duration::from_secs(20);
        while kind(t) != WaitKind::ChannelRecv as usize {
            assert!(Instant::now() < deadline, "the receive was never recorded");
            std::thread::sleep(Duration::from_millis(1));
        }
        tx.send(7).expect("send");
        in_rx.recv().expect("the call started");
        assert_eq!(
            kind(t),
            WaitKind::BlockingCall as usize,
            "a ULT in a call recorded as waiting on something else"
        );
        go_tx.send(()).expect("release");
        assert_eq!(h.join().expect("the ULT"), 7);
    }

    /// `current_processor()` reads the slot of the OS thread running the caller at that moment
    /// (`processor::current`, an inline read on x86-64 Linux): a ULT that changes OS threads at
    /// its blocking calls (the caller's thread runs the call, another takes its processor over)
    /// finds, after each switch, the processor whose loop runs it, never the one (or the cleared
    /// slot) of a thread it left.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn the_current_processor_follows_the_os_thread() {
        let rt = crate::Runtime::builder().processors(2).build().expect("build runtime");
        let moves = rt.block_on(|| {
            let ults: Vec<_> = (0..4)
                .map(|i| {
                    crate::spawn(move || {
                        let here = || crate::slot::current_processor().expect("a ULT runs on a processor");
                        let me = here().current_ult().expect("a ULT");
                        let mut moves = 0;
                        let mut thread = std::thread::current().id();
                        for round in 0..200u32 {
                            if (round + i) % 3 == 0 {
                                crate::yield_now();
                            } else {
                                crate::blocking(move || {
                                    std::thread::sleep(std::time::Duration::from_micros(
                                        u64::from(round % 4) * 50,
                                    ))
                                });
                            }
                            // The lookup after the switch: the running processor, whose current
                            // ULT is us.
                            assert_eq!(here().current_ult(), Some(me), "a stale processor after a switch");
                            let now = std::thread::current().id();
                            moves += u32::from(now != thread);
                            thread = now;
                        }
                        moves
                    })
                })
                .collect();
            ults.into_iter().map(|h| h.join().expect("a ULT")).sum::<u32>()
        });
        assert!(moves > 0, "no ULT changed OS threads: the test shows nothing");
    }
}
