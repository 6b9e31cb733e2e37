//! The thread control block (TCB): one per ULT, pooled and reused, allocated in chunks.
//!
//! # Who writes what
//!
//! * The spawner fills identity and task fields before the TCB is published on a start-queue (the
//!   queue's release/acquire carries them to the processor that starts it).
//! * The processor holding the ULT (running it, or having it in its runqueue or timers) owns the
//!   coroutine, the yielder and `life`; ownership moves with the TCB through queues and stacks.
//! * `join` and `waiter` follow the join protocol below; `next` is the link of the wake-up stack
//!   (clean-up notes travel as pointers in batches, `queue::cleanup`).
//! * `life` says whether the TCB is on a deathrow (`Exited`); that processor alone owns it then.
//! * `pinned` is the spawner's, before publication (read by wakers, thieves and the chaos mode);
//!   `waits_on` is written by the ULT (or its processor, after the switch) when it blocks, and
//!   read by the deadlock report while it stays blocked (`crate::deadlock`).
//! * `run_link` belongs to the runqueue holding the TCB (under its lock); `affinity`, the policy's
//!   per-ULT record, to the processor holding the ULT, and to its waker while it is being woken
//!   (see `affinity`).
//! * `gather`, the gathering's marks, to the processor holding the ULT, which hands it over with
//!   the ULT (a move to a lock's home, a steal): `sync::mutex::gather`.
//!
//! # The join protocol (one state word, [`JoinWord`]; its transitions in `join_state`)
//!
//! ```text
//! exit, publish (the ULT itself, last thing on its stack): result stored; prev = fetch_or(COMPLETE)
//!     prev has DETACHED -> nobody will read: drop the result right there (user code, ULT context)
//! exit, settle (processor loop, after the last switch):
//!     prev has DETACHED -> recycle the TCB at once
//!     otherwise         -> TCB goes on this processor's deathrow; prev has WAITER -> wake the waiter
//! join (handle):   COMPLETE set? take the result : register waiter, prev = fetch_or(WAITER),
//!                  block unless prev has COMPLETE (then the exiter did not see WAITER: go on)
//! release (handle dropped):   prev = fetch_or(DETACHED)
//!     prev has COMPLETE -> drop what is left of the task, reset the TCB (`Tcb::reset`), push a
//!                          clean-up note on the exiting processor (or pool it directly when
//!                          running on that processor)
//!     otherwise         -> the exiter sees DETACHED and recycles
//! release after join took the result: as "prev has COMPLETE", without the RMW (below)
//! ```
//! Whoever drops an outcome that no join took (the two "drop" steps above) hands a panic payload in
//! it to the runtime's detached-panic hook first (`crate::panics`); a join consumes the outcome, so
//! a joined ULT's panic is never reported twice.
//!
//! Each side's `fetch_or` is `AcqRel`: whoever comes second sees the first one's bit and everything
//! it wrote before, so exactly one party recycles the TCB and the waiter is woken exactly once.
//! The exiter's COMPLETE RMW is its last access to the state word (`settle` works from the value it
//! returned), so a joiner that has seen COMPLETE with `Acquire` owns the word and the TCB: it
//! skips DETACHED and resets the word with a plain store (one fewer RMW on a line the exiting
//! processor wrote last).

use crate::atomics::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use crate::stack::UltStack;
use crate::switch::Switch;
use crate::sync::mutex::gather::UltMarks;
use corosensei::{Coroutine, Yielder};
use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::panic::{self, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::thread;

/// The coroutine of an execution [`Context`]: resumed with nothing (the processor resuming it
/// has named the ULT to run as its `current`), suspends with a [`Switch`] reason.
pub(crate) type Ult = Coroutine<(), Switch, (), UltStack>;
pub(crate) type UltYielder = Yielder<(), Switch>;

/// An execution context: a ULT stack with a coroutine on it that runs ULTs one after another.
///
/// The coroutine's function (the processor's trampoline) loops: it runs the task of the ULT its
/// resumer names as current, publishes the exit, and suspends with [`Switch::EXIT`]; the next
/// resume, for another ULT, starts that one. So a context is made once per stack and pooled with it (the
/// stack pools hold contexts), and starting a ULT costs a resume instead of building a coroutine.
/// While a context is pooled its coroutine is *at rest*: suspended at the top of its trampoline,
/// with nothing on its stack that needs dropping.
pub(crate) struct Context {
    pub(crate) co: Ult,
    /// Low end of an unguarded stack's canary (0: guarded stack).
    pub(crate) canary_at: usize,
    /// Low end of a guarded stack's guard page (0: unguarded stack).
    pub(crate) guard_at: usize,
    /// Usable bytes of the stack.
    pub(crate) usable: usize,
    /// Set while the coroutine is at rest (see above).
    pub(crate) at_rest: bool,
}

impl Drop for Context {
    fn drop(&mut self) {
        if self.at_rest {
            // SAFETY: at rest the coroutine is suspended in its trampoline between two ULTs, where
            // no live value on its stack has drop glue; resetting it leaks nothing.
            unsafe { self.co.force_reset() };
        }
        // Otherwise dropping `co` unwinds whatever runs on it (corosensei's `Drop`).
    }
}

// SAFETY: this and `Tcb`'s impl below are the audited place that lets a suspended coroutine (which
// corosensei marks !Send because of thread-locals) move between OS threads: a pooled context is at
// rest (its stack holds nothing of any ULT), and a ULT's context moves with its TCB under the
// argument given at `Tcb`'s impl.
unsafe impl Send for Context {}

pub(crate) mod join_state;
pub(crate) use join_state::{JoinState, JoinWord};

/// Where a TCB is in its life; written by the processor holding it, read by the shutdown walk after
/// every processor thread has been joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Life {
    /// In a pool, or reset by its joiner and waiting for a clean-up note to reach the pool.
    Free,
    /// Spawned, waiting on a start-queue; no stack yet.
    Queued,
    /// Has a stack: running, ready, blocked or sleeping.
    Started,
    /// Returned; result waiting for the joiner (or already recycled when detached).
    Exited,
}

/// A TCB's [`Life`], atomic (relaxed) because a joiner on another thread resets it (`Tcb::reset`)
/// while the shutdown walk may read it; every other access is the holding processor's.
pub(crate) struct LifeCell(AtomicU8);

impl LifeCell {
    fn new(l: Life) -> LifeCell {
        LifeCell(AtomicU8::new(l as u8))
    }

    #[inline]
    pub(crate) fn get(&self) -> Life {
        match self.0.load(Ordering::Relaxed) {
            0 => Life::Free,
            1 => Life::Queued,
            2 => Life::Started,
            _ => Life::Exited,
        }
    }

    #[inline]
    pub(crate) fn set(&self, l: Life) {
        self.0.store(l as u8, Ordering::Relaxed);
    }
}

/// Who waits in `join`.
pub(crate) enum Waiter {
    None,
    Ult(TcbRef),
    Thread(thread::Thread),
}

/// Type-erased operations on a spawned closure and its result.
///
/// A task is a [`Task<F, T>`] whose first field, at offset 0 whatever `F` is, is the outcome
/// `Option<thread::Result<T>>`: a join handle, which knows `T`, reads it there directly.
pub(crate) struct TaskVTable {
    /// Runs the closure under `catch_unwind` and stores the outcome in place.
    pub(crate) run: unsafe fn(*mut ()),
    /// Stores `payload` as a failed outcome (the ULT never finished: cancelled, or no stack).
    pub(crate) fail: unsafe fn(*mut (), Box<dyn Any + Send>),
    /// Frees the task, whatever it still holds, except the payload of a failed outcome that nobody
    /// took (no join moved it out), which it returns for the report of `crate::panics`.
    pub(crate) drop: unsafe fn(*mut ()) -> Option<Box<dyn Any + Send>>,
}

/// A spawned closure and, once it ran, its outcome.
#[repr(C)]
pub(crate) struct Task<F, T> {
    /// The outcome; first, so that its offset does not depend on `F`.
    out: Option<thread::Result<T>>,
    /// The closure until it runs.
    f: Option<F>,
}

/// Moves the outcome out of a task made by [`new_task`] for a closure returning `T`.
///
/// # Safety
/// `task` is live, made for this `T`, and the caller has exclusive access to its outcome (the join
/// protocol's COMPLETE, observed with `Acquire`).
#[inline]
pub(crate) unsafe fn take_output<T>(task: *mut ()) -> Option<thread::Result<T>> {
    // SAFETY: `Task` is `repr(C)` with the outcome first, so `task` points at it (contract).
    unsafe { (*(task as *mut Option<thread::Result<T>>)).take() }
}

/// The panic payload a join returns for a ULT that the runtime's shutdown cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the runtime shut down before this ULT finished")
    }
}

impl std::error::Error for Cancelled {}

thread_local! {
    /// Set on the thread that unwinds cancelled ULTs at shutdown, while it does so.
    pub(crate) static FORCED_UNWIND: Cell<bool> = const { Cell::new(false) };
}

/// Bytes of task state a TCB stores inline (closure, later its result) without a heap allocation.
pub(crate) const INLINE_TASK_BYTES: usize = 64;

/// Inline storage for a small task.
#[repr(C, align(16))]
pub(crate) struct InlineTask(std::mem::MaybeUninit<[u8; INLINE_TASK_BYTES]>);

/// Stores a closure as a task, inline in `slot` when it fits, boxed otherwise; returns the task
/// pointer and its vtable.
pub(crate) fn new_task<F, T>(f: F, slot: *mut InlineTask) -> (*mut (), &'static TaskVTable)
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    unsafe fn run<F: FnOnce() -> T, T>(p: *mut ()) {
        // SAFETY: `p` came from `new_task::<F, T>` and only the processor running the ULT calls `run`.
        let task = unsafe { &mut *(p as *mut Task<F, T>) };
        let Some(f) = task.f.take() else {
            crate::fatal("a ULT's task ran twice");
        };
        let out = panic::catch_unwind(AssertUnwindSafe(f));
        if out.is_err() && FORCED_UNWIND.with(|c| c.get()) {
            // Shutdown is unwinding this ULT (see `runtime`): let the unwind reach corosensei's
            // root instead of recording it as the ULT's panic.
            if let Err(payload) = out {
                panic::resume_unwind(payload);
            }
        }
        // SAFETY: re-borrow after the closure ran; nothing else touches the task while it runs.
        unsafe { (*(p as *mut Task<F, T>)).out = Some(out) };
    }
    unsafe fn fail<F, T>(p: *mut (), payload: Box<dyn Any + Send>) {
        // SAFETY: called with exclusive access to a task that never ran to completion.
        let task = unsafe { &mut *(p as *mut Task<F, T>) };
        task.f = None;
        task.out = Some(Err(payload));
    }
    fn unjoined_payload<F, T>(task: Task<F, T>) -> Option<Box<dyn Any + Send>> {
        match task.out {
            Some(Err(payload)) => Some(payload),
            _ => None,
        }
    }
    unsafe fn drop_boxed<F, T>(p: *mut ()) -> Option<Box<dyn Any + Send>> {
        // SAFETY: `p` is the Box made in `new_task`, dropped exactly once by whoever recycles.
        unjoined_payload(*unsafe { Box::from_raw(p as *mut Task<F, T>) })
    }
    unsafe fn drop_inline<F, T>(p: *mut ()) -> Option<Box<dyn Any + Send>> {
        // SAFETY: `p` is the TCB's inline slot written in `new_task`, moved out exactly once (the
        // slot is then dead until the next `new_task` writes it).
        unjoined_payload(unsafe { ptr::read(p as *mut Task<F, T>) })
    }
    struct VTables<F, T>(std::marker::PhantomData<(F, T)>);
    impl<F: FnOnce() -> T, T> VTables<F, T> {
        const FITS: bool = std::mem::size_of::<Task<F, T>>() <= INLINE_TASK_BYTES
            && std::mem::align_of::<Task<F, T>>() <= std::mem::align_of::<InlineTask>();
        const BOXED: TaskVTable =
            TaskVTable { run: run::<F, T>, fail: fail::<F, T>, drop: drop_boxed::<F, T> };
        const INLINE: TaskVTable =
            TaskVTable { run: run::<F, T>, fail: fail::<F, T>, drop: drop_inline::<F, T> };
    }
    let task = Task::<F, T> { out: None, f: Some(f) };
    if VTables::<F, T>::FITS {
        let p = slot as *mut Task<F, T>;
        // SAFETY: the slot is the free TCB's inline storage, owned by the spawner, large and aligned
        // enough for the task (checked by FITS), and holds no live task (the last one was dropped).
        unsafe { p.write(task) };
        (p as *mut (), &VTables::<F, T>::INLINE)
    } else {
        let p = Box::into_raw(Box::new(task)) as *mut ();
        (p, &VTables::<F, T>::BOXED)
    }
}

static EMPTY_VTABLE: TaskVTable = {
    unsafe fn nop(_: *mut ()) {}
    unsafe fn nop2(_: *mut (), _: Box<dyn Any + Send>) {}
    unsafe fn nop3(_: *mut ()) -> Option<Box<dyn Any + Send>> {
        None
    }
    TaskVTable { run: nop, fail: nop2, drop: nop3 }
};

/// A thread control block, aligned to a cache line so that neighbours in a chunk, often in use on
/// different processors, share no line.
///
/// Its lines are laid out by who touches them when (`repr(C)` keeps the order), so that each
/// step of a ULT's life touches as few lines as possible, and as few as possible travel between
/// processors when a ULT is spawned on one, run on another and joined on the first:
///
/// 1. the join protocol, the task's handle and the ULT's identity: spawner, starter, exiter and
///    joiner (the joiner also resets the TCB here for its next use, see [`Tcb::reset`]);
/// 2. the task itself, inline (closure, then outcome);
/// 3. execution: the processor running the ULT (context, wait word), and the gathering's marks
///    (`sync::mutex::gather`, written by the processor holding the ULT);
/// 4. links and rarities: the wake-up stack's link (written by a waker, read by the owner), the
///    join waiter (only a joiner that blocks), the name (only a named ULT), and the declared data
///    block with its prefetch word (only a ULT that declares one; line 1's flags say whether there
///    is one, see `prefetch`);
/// 5. and 6. scheduling by policy: the runqueue's links (touched when the ULT enters or leaves a
///    runqueue) and the policy's per-ULT record (touched at the end of a run and at enqueue, only
///    under a policy that keeps records).
#[repr(C, align(64))]
pub(crate) struct Tcb {
    // Line 1.
    /// The join protocol's state word.
    pub(crate) join: JoinWord,
    // Task: written by the spawner, consumed per the join protocol.
    pub(crate) task: Cell<*mut ()>,
    pub(crate) vtable: Cell<&'static TaskVTable>,
    /// The chunk this TCB lives in.
    pub(crate) chunk: *const Chunk,
    // Identity: written by the spawner before publication.
    pub(crate) id: Cell<u64>,
    /// Processor the ULT last ran on (read by wakers on any thread).
    pub(crate) processor: AtomicUsize,
    /// Processor whose deathrow holds the exited ULT; written before COMPLETE is published.
    pub(crate) exit_processor: Cell<u32>,
    /// Usable stack bytes the ULT asked for (at most `MAX_STACK_SIZE`, 1 GiB).
    pub(crate) stack_size: Cell<u32>,
    pub(crate) life: LifeCell,
    /// Whether `name` is set (so that a reset reads the name's line only then).
    pub(crate) named: Cell<bool>,
    /// Whether the ULT is pinned to the processor it starts on (`Builder::pinned`): written at
    /// every spawn, read by wakers (the wake target), thieves and the chaos mode.
    pub(crate) pinned: Cell<bool>,
    /// Whether `data` holds a block the ULT declared (see `prefetch`); written at spawn.
    pub(crate) has_data: Cell<bool>,
    /// Whether `prefetch` holds a word to prefetch (a block, and the runtime prefetches): the
    /// one test the loop and the wakers make, on this line, which both touch anyway.
    pub(crate) prefetching: Cell<bool>,
    // Line 2.
    pub(crate) inline: UnsafeCell<InlineTask>,
    // Line 3. Execution: owned by the processor holding the ULT.
    /// The context the ULT runs on, from its first run to its exit.
    pub(crate) context: UnsafeCell<Option<Box<Context>>>,
    pub(crate) yielder: Cell<*const UltYielder>,
    /// The blocking-wait word of the synchronization objects (`sync::wait`): the wait's sequence
    /// number in the high bits, its outcome in the low two. Never reset,
    /// so a stale timer entry of an earlier wait (even of an earlier ULT in this TCB) cannot match.
    pub(crate) wait: AtomicU64,
    /// The join state `publish` found, for `settle` after the last switch.
    pub(crate) exit_prev: Cell<usize>,
    /// Low end of a guarded stack's guard page (0: unguarded), read by the overflow report
    /// (`crate::fault`) from a signal handler; set when the ULT gets its context.
    pub(crate) guard_at: Cell<usize>,
    /// The ULT's ULT-local values (`crate::local`): null until its first access, and null again
    /// after its end, so a spawn never writes it.
    pub(crate) locals: Cell<*mut crate::local::LocalMap>,
    /// What the ULT last blocked on (`deadlock::note_wait`: kind and address), for the deadlock
    /// report; written when it blocks, read by the report while it stays blocked.
    pub(crate) waits_on: AtomicUsize,
    /// The gathering's marks (`sync::mutex::gather`): the time stamp of the ULT's last move to
    /// a lock's home, and whether it is on its way to one. (Also keeps line 4, written by wakers
    /// on other processors, off this owner's line.)
    pub(crate) gather: UltMarks,
    // Line 4.
    /// The link of the wake-up stack while the TCB is on one.
    pub(crate) next: AtomicPtr<Tcb>,
    pub(crate) waiter: UnsafeCell<Waiter>,
    pub(crate) name: UnsafeCell<Option<Arc<str>>>,
    /// The data block the ULT declared, when `has_data` (see `prefetch`).
    pub(crate) data: Cell<crate::prefetch::DataBlock>,
    /// The prefetch word of the ULT's data block, when `prefetching` (see `prefetch`).
    pub(crate) prefetch: Cell<usize>,
    // Lines 5 and 6.
    /// Links in the runqueue holding the ULT (see `queue::run`).
    pub(crate) run_link: crate::queue::run::RunLink,
    /// What the policy keeps per ULT (see `policy::engine`).
    pub(crate) record: crate::policy::engine::UltRecord,
}

impl Drop for Tcb {
    fn drop(&mut self) {
        // Only reached when the runtime's shared state is freed: nobody else can reach the task, and
        // there is no hook left to report to.
        let task = self.task.replace(ptr::null_mut());
        if !task.is_null() {
            // SAFETY: exclusive access (`&mut self`); non-null `task` is live for this vtable.
            drop(unsafe { (self.vtable.get().drop)(task) });
        }
    }
}

// SAFETY: every field is either atomic or accessed under the ownership rules in the module docs
// (spawner before publication, holding processor afterwards, join protocol for the task). This is
// the one audited place that lets a suspended ULT (its coroutine, which corosensei marks !Send
// because of thread-locals) move between OS threads: the runtime never holds a thread-local
// reference across a switch (DESIGN §8) and users are told not to (docs/caveats.md).
unsafe impl Send for Tcb {}
// SAFETY: as above; shared access goes through atomics or the protocols named in the module docs.
unsafe impl Sync for Tcb {}

impl Tcb {
    fn empty(chunk: *const Chunk) -> Tcb {
        Tcb {
            join: JoinWord::new(),
            task: Cell::new(ptr::null_mut()),
            vtable: Cell::new(&EMPTY_VTABLE),
            chunk,
            id: Cell::new(0),
            processor: AtomicUsize::new(0),
            exit_processor: Cell::new(0),
            stack_size: Cell::new(0),
            life: LifeCell::new(Life::Free),
            named: Cell::new(false),
            pinned: Cell::new(false),
            has_data: Cell::new(false),
            prefetching: Cell::new(false),
            inline: UnsafeCell::new(InlineTask(std::mem::MaybeUninit::uninit())),
            context: UnsafeCell::new(None),
            yielder: Cell::new(ptr::null()),
            wait: AtomicU64::new(0),
            exit_prev: Cell::new(0),
            guard_at: Cell::new(0),
            locals: Cell::new(ptr::null_mut()),
            waits_on: AtomicUsize::new(0),
            gather: UltMarks::new(),
            next: AtomicPtr::new(ptr::null_mut()),
            waiter: UnsafeCell::new(Waiter::None),
            name: UnsafeCell::new(None),
            data: Cell::new(crate::prefetch::DataBlock::NONE),
            prefetch: Cell::new(0),
            run_link: crate::queue::run::RunLink::new(),
            record: crate::policy::engine::UltRecord::new(),
        }
    }

    /// Makes a finished TCB free for its next spawn: life `Free`, join state 0 (which a spawn
    /// relies on), no name. Called by whoever ends the TCB's use: the exiting processor for a
    /// detached ULT or one joined on that same processor, the joiner for one joined elsewhere
    /// (the last party to touch it: the clean-up note's push publishes the reset, and the exiting
    /// processor then only counts it off its deathrow and pools the pointer, touching no line of
    /// the TCB). The waiter field is not touched: a joiner that registered and then gave up (a
    /// ULT of another runtime, unwound by that runtime's shutdown, whose handle is dropped) may
    /// reset the TCB while the exit's `settle` still takes the registration; by the time the TCB
    /// reaches a pool (after `settle`, on the exiting processor) the field is `None` (checked
    /// there in debug builds; the loom model `loom_models::join` found the race when this
    /// function read the field).
    ///
    /// # Safety
    /// The caller is that party: the ULT is finished and nobody else reads the TCB any more.
    #[inline]
    pub(crate) unsafe fn reset(&self) {
        self.life.set(Life::Free);
        self.join.reset();
        if self.named.get() {
            self.named.set(false);
            // SAFETY: per the contract, nobody else reads the name.
            unsafe { *self.name.get() = None };
        }
    }

    /// The processor whose deathrow holds the exited ULT.
    #[inline]
    pub(crate) fn exit_processor(&self) -> usize {
        self.exit_processor.get() as usize
    }

    /// The stack size the ULT asked for.
    #[inline]
    pub(crate) fn stack_size(&self) -> usize {
        self.stack_size.get() as usize
    }

    /// Drops the task (closure or result) if one is still attached. A failed outcome that no join
    /// took goes to the runtime's detached-panic hook first (`crate::panics`).
    ///
    /// # Safety
    /// The caller owns the task under the join protocol, and the runtime's shared state is alive.
    pub(crate) unsafe fn drop_task(&self) {
        let task = self.task.replace(ptr::null_mut());
        if !task.is_null() {
            // SAFETY: non-null `task` is the live box made by `new_task` for this vtable.
            if let Some(payload) = unsafe { (self.vtable.get().drop)(task) } {
                crate::panics::report_unjoined(self, payload);
            }
        }
    }

    /// Drops a task whose closure ran and whose outcome was taken: an inline one holds nothing
    /// left to drop, so only a boxed one costs a call (its memory is freed).
    ///
    /// # Safety
    /// As for [`Tcb::drop_task`], and the task ran and its outcome was taken.
    #[inline]
    pub(crate) unsafe fn drop_spent_task(&self) {
        if self.task.get() == self.inline.get() as *mut () {
            self.task.set(ptr::null_mut());
            return;
        }
        // SAFETY: per the contract.
        unsafe { self.drop_task() }
    }
}

/// A pointer to a TCB, passed between threads by the protocols of the runtime.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct TcbRef(NonNull<Tcb>);

// SAFETY: a TcbRef is an address; what may be done through it is governed by the TCB protocols.
unsafe impl Send for TcbRef {}
// SAFETY: as above.
unsafe impl Sync for TcbRef {}

impl TcbRef {
    #[inline]
    pub(crate) fn as_ptr(self) -> *mut Tcb {
        self.0.as_ptr()
    }

    #[inline]
    pub(crate) fn from_ptr(p: *mut Tcb) -> Option<TcbRef> {
        NonNull::new(p).map(TcbRef)
    }

    /// The chunk the TCB lives in.
    #[inline]
    pub(crate) fn chunk<'a>(self) -> &'a Chunk {
        // SAFETY: a chunk outlives its TCBs' users, as for `tcb`.
        unsafe { &*self.tcb().chunk }
    }

    /// The TCB behind the pointer.
    #[inline]
    pub(crate) fn tcb<'a>(self) -> &'a Tcb {
        // SAFETY: TCBs live in chunks that are freed only with the runtime's shared state, after
        // every holder of a TcbRef is gone (processors joined, handles counted by the chunk).
        unsafe { self.0.as_ref() }
    }
}

/// Number of TCBs allocated together.
pub(crate) const CHUNK_TCBS: usize = 64;

/// A block of TCBs allocated at once, freed with the runtime's shared state.
pub(crate) struct Chunk {
    tcbs: Box<[Tcb]>,
    /// The runtime's shared state (an `Arc::as_ptr`), reached by join handles.
    shared: *const (),
}

// SAFETY: the chunk's TCBs are Sync and the pointer is a plain Arc address.
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// Allocates a chunk of TCBs belonging to the runtime whose shared state is `shared`.
    pub(crate) fn allocate<S: Send + Sync>(shared: &Arc<S>) -> Box<Chunk> {
        let mut chunk = Box::new(Chunk { tcbs: Box::new([]), shared: Arc::as_ptr(shared) as *const () });
        let at: *const Chunk = &*chunk;
        chunk.tcbs = (0..CHUNK_TCBS).map(|_| Tcb::empty(at)).collect();
        chunk
    }

    /// The runtime's shared state this chunk belongs to (an `Arc::as_ptr`).
    pub(crate) fn shared(&self) -> *const () {
        self.shared
    }

    /// The TCBs of this chunk.
    pub(crate) fn tcbs(&self) -> impl Iterator<Item = TcbRef> + '_ {
        self.tcbs.iter().map(|t| TcbRef(NonNull::from(t)))
    }
}

#[cfg(test)]
mod layout {
    use super::*;

    #[test]
    fn a_tcb_is_six_lines_and_its_lines_hold_what_the_docs_say() {
        assert_eq!(std::mem::size_of::<Tcb>(), 384);
        let t = Tcb::empty(ptr::null());
        let at = |f: *const u8| (f as usize - &t as *const Tcb as usize) / 64;
        assert_eq!(at(&t.join as *const _ as *const u8), 0);
        assert_eq!(at(&t.named as *const _ as *const u8), 0);
        assert_eq!(at(&t.pinned as *const _ as *const u8), 0);
        assert_eq!(at(&t.prefetching as *const _ as *const u8), 0);
        assert_eq!(at(&t.prefetch as *const _ as *const u8), 3);
        assert_eq!(at(&t.data as *const _ as *const u8), 3);
        assert_eq!(at(t.inline.get() as *const u8), 1);
        assert_eq!(at(&t.context as *const _ as *const u8), 2);
        assert_eq!(at(&t.exit_prev as *const _ as *const u8), 2);
        assert_eq!(at(&t.next as *const _ as *const u8), 3);
        assert_eq!(at(&t.name as *const _ as *const u8), 3);
        assert_eq!(at(&t.locals as *const _ as *const u8), 2);
        assert_eq!(at(&t.waits_on as *const _ as *const u8), 2);
        assert_eq!(at(&t.gather as *const _ as *const u8), 2);
        let gather_end = (&t.gather as *const UltMarks as *const u8).wrapping_add(size_of::<UltMarks>() - 1);
        assert_eq!(at(gather_end), 2, "the gathering's marks end on line 3");
        assert_eq!(at(&t.run_link as *const _ as *const u8), 4);
        assert_eq!(at(&t.record as *const _ as *const u8), 4);
    }
}
