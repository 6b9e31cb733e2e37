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
//! * `run_link` belongs to the runqueue holding the TCB (under its lock); `record`, the policy's
//!   per-ULT record, to the processor holding the ULT, and to its waker while it is being woken
//!   (see `policy::engine`).
//! * `gather`, the gathering's marks, to the processor holding the ULT, which hands it over with
//!   the ULT (a move to a lock's home, a steal): `sync::mutex::gather`.
//!
//! The fields sit in parts by line and writer ([`Tcb`]: [`Head`], the inline task, [`Exec`],
//! [`Links`], [`Sched`]); the task's storage and operations are in `task`, the execution context
//! (a stack with its coroutine) in `context`.
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
use crate::sync::mutex::gather::UltMarks;
use std::cell::{Cell, UnsafeCell};
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::thread;

mod context;
pub(crate) mod join_state;
pub(crate) mod region;
mod task;

pub(crate) use context::{Context, Ult, UltYielder};
pub(crate) use join_state::{JoinState, JoinWord};
pub use task::Cancelled;
use task::EMPTY_VTABLE;
pub(crate) use task::{new_task, take_output, InlineTask, TaskVTable, FORCED_UNWIND};

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

/// A thread control block, aligned to a cache line so that neighbours in a chunk, often in use on
/// different processors, share no line.
///
/// It is split into parts by phase and by who writes them (as tokio splits a task into header,
/// core and trailer), one part per cache line (two for the last), so that each step of a ULT's
/// life touches as few lines as possible, and as few as possible travel between processors when
/// a ULT is spawned on one, run on another and joined on the first:
///
/// 1. [`Head`]: the join protocol, the task's handle and the ULT's identity: spawner, starter,
///    exiter and joiner (the joiner also resets the TCB here for its next use, see
///    [`Tcb::reset`]);
/// 2. `inline`: the task itself, inline (closure, then outcome): the spawner writes it, the
///    processor running the ULT runs it, the join protocol hands the outcome over;
/// 3. [`Exec`]: execution, the processor holding the ULT's (context, wait word), and the
///    gathering's marks (`sync::mutex::gather`);
/// 4. [`Links`]: links and rarities: the wake-up stack's link (written by a waker, read by the
///    owner), the join waiter (only a joiner that blocks), the name (only a named ULT), and the
///    declared data block with its prefetch word (only a ULT that declares one; the head's flags
///    say whether there is one, see `prefetch`);
/// 5. and 6. [`Sched`]: scheduling by policy: the runqueue's links (touched when the ULT enters
///    or leaves a runqueue) and the policy's per-ULT record (touched at the end of a run and at
///    enqueue, only under a policy that keeps records).
#[repr(C, align(64))]
pub(crate) struct Tcb {
    pub(crate) head: Head,
    pub(crate) inline: UnsafeCell<InlineTask>,
    pub(crate) exec: Exec,
    pub(crate) links: Links,
    pub(crate) sched: Sched,
}

/// Line 1 of a [`Tcb`]: read by everyone who handles the ULT.
#[repr(C, align(64))]
pub(crate) struct Head {
    /// The join protocol's state word: the exiter, the joiner and the handle's release.
    pub(crate) join: JoinWord,
    /// The task: written by the spawner, consumed per the join protocol.
    pub(crate) task: Cell<*mut ()>,
    /// The task's operations, with `task`.
    pub(crate) vtable: Cell<&'static TaskVTable>,
    /// The chunk this TCB lives in (fixed).
    pub(crate) chunk: *const Chunk,
    /// The ULT's id: written by the spawner before publication.
    pub(crate) id: Cell<u64>,
    /// Processor the ULT last ran on: written by the processor that runs it, read by wakers on
    /// any thread.
    pub(crate) processor: AtomicUsize,
    /// Processor whose deathrow holds the exited ULT; written by it before COMPLETE is published.
    pub(crate) exit_processor: Cell<u32>,
    /// Usable stack bytes the ULT asked for (at most `MAX_STACK_SIZE`, 1 GiB): the spawner's.
    pub(crate) stack_size: Cell<u32>,
    /// Where the TCB is in its life: the holding processor's (see [`LifeCell`]).
    pub(crate) life: LifeCell,
    /// Whether the name is set (so that a reset reads the name's line only then): the spawner's.
    pub(crate) named: Cell<bool>,
    /// Whether the ULT is pinned to the processor it starts on (`Builder::pinned`): written at
    /// every spawn, read by wakers (the wake target), thieves and the chaos mode.
    pub(crate) pinned: Cell<bool>,
    /// Whether `sched.place` holds a rule for where the ULT runs (a place, a home, or pinned:
    /// `policy::places`); written at every spawn (and set while the spawn is unpublished), read
    /// by wakers, thieves and the chaos mode: the one test they make before asking the rule.
    pub(crate) placed: Cell<bool>,
    /// Whether `links.data` holds a block the ULT declared (see `prefetch`); written at spawn.
    pub(crate) has_data: Cell<bool>,
    /// The rare cases a switch into the ULT must see, one bit each ([`Rare`]): whether
    /// `links.prefetch` holds a word to prefetch ([`Rare::PREFETCHING`]: a block, and the runtime
    /// prefetches), whether the ULT is in a group ([`Rare::GROUPED`]), and whether it waits
    /// with the aggregation modifier's bonus in its key ([`Rare::FAVOURED`]). One test of the byte,
    /// on this line, which the loop touches anyway, covers them all where the loop switches from
    /// ULT to ULT (`Processor::chosen`); the wakers test the prefetch bit. Written by the
    /// spawner before publication (the group bit, the prefetch bit cleared: [`Head::set_group`]),
    /// then by the ULT's holder only (the prefetch bit: [`Head::set_prefetching`]; the favoured
    /// bit: [`Head::set_favoured`], [`Head::take_favoured`]), so a load and a store keep the
    /// other bits. Relaxed atomic (plain moves on x86-64 and AArch64): the
    /// loop also reads it for the runqueue's next entry, which another processor may take and
    /// run meanwhile (see `prefetch`).
    pub(crate) rare: AtomicU8,
    /// The ULT's group's number in its runtime's `group::Groups` (0: none): written by the
    /// spawner before publication ([`Head::set_group`]), read by the processors that run it.
    pub(crate) group: Cell<u16>,
}

/// The bits of [`Head::rare`].
pub(crate) struct Rare;

impl Rare {
    /// `links.prefetch` holds a word to prefetch (see `prefetch`).
    pub(crate) const PREFETCHING: u8 = 1;
    /// The ULT is in a group (`Head::group` is not 0).
    pub(crate) const GROUPED: u8 = 2;
    /// The ULT waits with the aggregation modifier's bonus in its key (`policy::aggregate`):
    /// set by its holder when it keys the entry, cleared by the processor that begins its run.
    pub(crate) const FAVOURED: u8 = 4;
}

impl Head {
    /// Whether `links.prefetch` holds a word to prefetch ([`Rare::PREFETCHING`]), for a reader
    /// that does not hold the ULT (a relaxed load).
    #[inline]
    pub(crate) fn prefetching(&self) -> bool {
        self.rare.load(Ordering::Relaxed) & Rare::PREFETCHING != 0
    }

    /// [`Head::rare`], read by the ULT's holder: a plain load, which the compiler folds into the
    /// test of it (a relaxed load it does not: one instruction more at each switch and wake-up).
    ///
    /// # Safety
    ///
    /// The caller holds the ULT: it runs it or is about to (the processor that took it), or
    /// owns its wake-up (the ULT is blocked). The byte's writers are the spawner before
    /// publication and then the holder, each ordered before this read by the protocol that
    /// handed the ULT over, so no write races it (the relaxed loads of other readers are
    /// reads).
    #[inline]
    pub(crate) unsafe fn rare_held(&self) -> u8 {
        // SAFETY: no write races this read (the caller's contract); the pointer is the atomic's
        // own, valid and aligned.
        unsafe { *self.rare.as_ptr() }
    }

    /// Sets or clears [`Rare::PREFETCHING`]; the ULT's holder only (the ULT itself, or the
    /// processor starting it), the only writer of the byte once the ULT is published.
    #[inline]
    pub(crate) fn set_prefetching(&self, on: bool) {
        self.set_rare(Rare::PREFETCHING, on);
    }

    /// Sets [`Rare::FAVOURED`]: the ULT's holder only, keying its entry with the bonus.
    #[inline]
    pub(crate) fn set_favoured(&self) {
        self.set_rare(Rare::FAVOURED, true);
    }

    /// Clears [`Rare::FAVOURED`] and says whether it was set: the ULT's holder only, beginning
    /// a run of it.
    #[inline]
    pub(crate) fn take_favoured(&self) -> bool {
        let rare = self.rare.load(Ordering::Relaxed);
        let was = rare & Rare::FAVOURED != 0;
        if was {
            self.rare.store(rare & !Rare::FAVOURED, Ordering::Relaxed);
        }
        was
    }

    /// Sets or clears `bit` of [`Head::rare`], keeping the others: a load and a store, so the
    /// ULT's holder only (the byte's one writer once the ULT is published).
    #[inline]
    fn set_rare(&self, bit: u8, on: bool) {
        let rare = self.rare.load(Ordering::Relaxed) & !bit;
        self.rare.store(if on { rare | bit } else { rare }, Ordering::Relaxed);
    }

    /// The spawner's part, before publication: the ULT's group number `group` (0: none) and
    /// its bit; the favoured and prefetch bits clear (a former ULT's of this TCB), until the ULT
    /// starts (`prefetch::UltBlock::on_start`).
    #[inline]
    pub(crate) fn set_group(&self, group: u16) {
        self.group.set(group);
        self.rare.store(if group != 0 { Rare::GROUPED } else { 0 }, Ordering::Relaxed);
    }
}

/// Line 3 of a [`Tcb`]: owned by the processor holding the ULT, which hands it on with the ULT.
#[repr(C, align(64))]
pub(crate) struct Exec {
    /// The context the ULT runs on, from its first run to its exit.
    pub(crate) context: UnsafeCell<Option<Box<Context>>>,
    /// The ULT's yielder, set when it starts on its context.
    pub(crate) yielder: Cell<*const UltYielder>,
    /// The blocking-wait word of the synchronization objects (`sync::wait`): the wait's sequence
    /// number in the high bits, its outcome in the low two; written under the wait protocol by
    /// the waiter and its notifier. Never reset, so a stale timer entry of an earlier wait (even
    /// of an earlier ULT in this TCB) cannot match.
    pub(crate) wait: AtomicU64,
    /// The join state `publish` found, for `settle` after the last switch.
    pub(crate) exit_prev: Cell<usize>,
    /// Low end of a guarded stack's guard page (0: unguarded), read by the overflow report
    /// (`crate::fault`) from a signal handler; set when the ULT gets its context.
    pub(crate) guard_at: Cell<usize>,
    /// The ULT's ULT-local values (`crate::local`): null until its first access, and null again
    /// after its end, so a spawn never writes it. The ULT's own.
    pub(crate) locals: Cell<*mut crate::local::LocalMap>,
    /// What the ULT last blocked on (`deadlock::note_wait`: kind and address), for the deadlock
    /// report; written when it blocks, read by the report while it stays blocked.
    pub(crate) waits_on: AtomicUsize,
    /// The mutex's part: the gathering's marks (`sync::mutex::gather`), the time stamp of the
    /// ULT's last move to a lock's home and whether it is on its way to one. (Also keeps line 4,
    /// written by wakers on other processors, off this owner's line.)
    pub(crate) gather: UltMarks,
}

/// Line 4 of a [`Tcb`]: written by others than the holding processor, or rarely.
#[repr(C, align(64))]
pub(crate) struct Links {
    /// The link of the wake-up stack while the TCB is on one: written by the waker that pushes
    /// it, read by the owner that drains it.
    pub(crate) next: AtomicPtr<Tcb>,
    /// Who waits in a join: the joiner's, per the join protocol.
    pub(crate) waiter: UnsafeCell<Waiter>,
    /// The ULT's name: the spawner's (a named ULT only); cleared by [`Tcb::reset`].
    pub(crate) name: UnsafeCell<Option<Arc<str>>>,
    /// The data block the ULT declared, when `head.has_data` (see `prefetch`): the spawner's or
    /// the ULT's.
    pub(crate) data: Cell<crate::prefetch::DataBlock>,
    /// The prefetch word of the ULT's data block, when `head.prefetching()` (see `prefetch`);
    /// relaxed atomic, as `head.rare`.
    pub(crate) prefetch: AtomicUsize,
}

/// Lines 5 and 6 of a [`Tcb`]: scheduling by policy.
#[repr(C, align(64))]
pub(crate) struct Sched {
    /// Links in the runqueue holding the ULT, under its lock (see `queue::run`).
    pub(crate) run_link: crate::queue::run::RunLink,
    /// What the policy keeps per ULT (see `policy::engine`): the holding processor's, and its
    /// waker's while it is being woken.
    pub(crate) record: crate::policy::engine::UltRecord,
    /// Where the ULT may run, read only while `head.placed` is set (`policy::places`, "The
    /// rule's protocol"): the spawner's before publication; its home is fixed by the waker of
    /// its first wake-up under soft pinning.
    pub(crate) place: Cell<crate::policy::places::PlaceRule>,
}

impl Drop for Tcb {
    fn drop(&mut self) {
        // Only reached when the runtime's shared state is freed: nobody else can reach the task, and
        // there is no hook left to report to.
        let task = self.head.task.replace(ptr::null_mut());
        if !task.is_null() {
            // SAFETY: exclusive access (`&mut self`); non-null `task` is live for this vtable.
            drop(unsafe { (self.head.vtable.get().drop)(task) });
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
            head: Head {
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
                placed: Cell::new(false),
                has_data: Cell::new(false),
                rare: AtomicU8::new(0),
                group: Cell::new(0),
            },
            inline: UnsafeCell::new(InlineTask::empty()),
            exec: Exec {
                context: UnsafeCell::new(None),
                yielder: Cell::new(ptr::null()),
                wait: AtomicU64::new(0),
                exit_prev: Cell::new(0),
                guard_at: Cell::new(0),
                locals: Cell::new(ptr::null_mut()),
                waits_on: AtomicUsize::new(0),
                gather: UltMarks::new(),
            },
            links: Links {
                next: AtomicPtr::new(ptr::null_mut()),
                waiter: UnsafeCell::new(Waiter::None),
                name: UnsafeCell::new(None),
                data: Cell::new(crate::prefetch::DataBlock::NONE),
                prefetch: AtomicUsize::new(0),
            },
            sched: Sched {
                run_link: crate::queue::run::RunLink::new(),
                record: crate::policy::engine::UltRecord::new(),
                place: Cell::new(crate::policy::places::PlaceRule::NONE),
            },
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
        self.head.life.set(Life::Free);
        self.head.join.reset();
        if self.head.named.get() {
            self.head.named.set(false);
            // SAFETY: per the contract, nobody else reads the name.
            unsafe { *self.links.name.get() = None };
        }
    }

    /// The processor whose deathrow holds the exited ULT.
    #[inline]
    pub(crate) fn exit_processor(&self) -> usize {
        self.head.exit_processor.get() as usize
    }

    /// The stack size the ULT asked for.
    #[inline]
    pub(crate) fn stack_size(&self) -> usize {
        self.head.stack_size.get() as usize
    }

    /// Drops the task (closure or result) if one is still attached. A failed outcome that no join
    /// took goes to the runtime's detached-panic hook first (`crate::panics`).
    ///
    /// # Safety
    /// The caller owns the task under the join protocol, and the runtime's shared state is alive.
    pub(crate) unsafe fn drop_task(&self) {
        let task = self.head.task.replace(ptr::null_mut());
        if !task.is_null() {
            // SAFETY: non-null `task` is the live box made by `new_task` for this vtable.
            if let Some(payload) = unsafe { (self.head.vtable.get().drop)(task) } {
                crate::panics::report_unjoined(self, payload);
            }
        }
    }

    /// Drops a task whose closure is gone (it ran, or a failure replaced it: a finished ULT's)
    /// and whose outcome was taken: an inline one holds nothing left to drop, so only a boxed one
    /// costs a call (its memory is freed).
    ///
    /// # Safety
    /// As for [`Tcb::drop_task`], and the ULT finished (COMPLETE) and its outcome was taken.
    #[inline]
    pub(crate) unsafe fn drop_spent_task(&self) {
        if self.head.task.get() == self.inline.get() as *mut () {
            self.head.task.set(ptr::null_mut());
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
        unsafe { &*self.tcb().head.chunk }
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
    /// The TCBs: a heap allocation of the chunk's own, or (`in_region`) a part of one of the
    /// runtime's huge-page regions ([`region`]), which outlives the chunk.
    tcbs: NonNull<[Tcb]>,
    in_region: bool,
    /// The runtime's shared state (an `Arc::as_ptr`), reached by join handles.
    shared: *const (),
}

// SAFETY: the chunk owns its TCBs (or its region holds them for it until it drops), which are
// Sync, and `shared` is a plain Arc address.
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// Allocates a chunk of TCBs belonging to the runtime whose shared state is `shared`.
    pub(crate) fn allocate<S: Send + Sync>(shared: &Arc<S>) -> Box<Chunk> {
        let memory = NonNull::from(Box::leak(Box::<[Tcb]>::new_uninit_slice(CHUNK_TCBS))).cast::<Tcb>();
        // SAFETY: a fresh heap allocation for the chunk's TCBs, freed as a `Box<[Tcb]>` of the
        // same length when the chunk drops (`in_region` false).
        unsafe { Chunk::make(shared, memory, false) }
    }

    /// [`Chunk::allocate`] with the TCBs placed at `memory`, a part of a region.
    ///
    /// # Safety
    /// `memory` is valid for writes of [`CHUNK_TCBS`] TCBs, aligned for them, used by nothing
    /// else, and stays mapped until the chunk is dropped.
    pub(crate) unsafe fn allocate_at<S: Send + Sync>(shared: &Arc<S>, memory: NonNull<Tcb>) -> Box<Chunk> {
        // SAFETY: per the contract.
        unsafe { Chunk::make(shared, memory, true) }
    }

    /// The chunk over `memory`, its TCBs written in place one by one: a spawn that finds the
    /// pools empty makes a chunk on the spawning ULT's stack, which may be a small one, so no
    /// frame here holds more than one TCB at a time (`write_empty`).
    ///
    /// # Safety
    /// As for [`Chunk::allocate_at`]; `in_region` says how the memory is freed ([`Chunk`]'s drop).
    unsafe fn make<S: Send + Sync>(shared: &Arc<S>, memory: NonNull<Tcb>, in_region: bool) -> Box<Chunk> {
        let chunk = Box::new(Chunk {
            tcbs: NonNull::slice_from_raw_parts(memory, CHUNK_TCBS),
            in_region,
            shared: Arc::as_ptr(shared) as *const (),
        });
        let at: *const Chunk = &*chunk;
        for i in 0..CHUNK_TCBS {
            // SAFETY: per the contract, slot `i` of the memory is ours to write.
            unsafe { write_empty(memory.add(i), at) };
        }
        chunk
    }

    /// The runtime's shared state this chunk belongs to (an `Arc::as_ptr`).
    pub(crate) fn shared(&self) -> *const () {
        self.shared
    }

    /// The TCBs of this chunk.
    pub(crate) fn tcbs(&self) -> impl Iterator<Item = TcbRef> + '_ {
        // SAFETY: the TCBs were written when the chunk was made and live as long as it does.
        let tcbs = unsafe { self.tcbs.as_ref() };
        tcbs.iter().map(|t| TcbRef(NonNull::from(t)))
    }
}

/// Writes a free TCB of `chunk` at `slot`, in a frame of its own (see [`Chunk::make`]).
///
/// # Safety
/// `slot` is valid for a write of a TCB and aligned for it.
#[inline(never)]
unsafe fn write_empty(slot: NonNull<Tcb>, chunk: *const Chunk) {
    // SAFETY: per the contract.
    unsafe { slot.write(Tcb::empty(chunk)) };
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if self.in_region {
            // SAFETY: the TCBs were written by `make` and are dropped only here; their memory
            // stays the region's, unmapped after the chunk.
            unsafe { ptr::drop_in_place(self.tcbs.as_ptr()) };
        } else {
            // SAFETY: the TCBs were written by `make` into the allocation of `allocate`, a
            // `Box<[Tcb]>` of this length, taken back once.
            drop(unsafe { Box::from_raw(self.tcbs.as_ptr()) });
        }
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
        assert_eq!(at(&t.head.join as *const _ as *const u8), 0);
        assert_eq!(at(&t.head.named as *const _ as *const u8), 0);
        assert_eq!(at(&t.head.pinned as *const _ as *const u8), 0);
        assert_eq!(at(&t.head.placed as *const _ as *const u8), 0);
        assert_eq!(at(&t.head.rare as *const _ as *const u8), 0);
        assert_eq!(at(&t.head.group as *const _ as *const u8), 0);
        assert_eq!(at(&t.links.prefetch as *const _ as *const u8), 3);
        assert_eq!(at(&t.links.data as *const _ as *const u8), 3);
        assert_eq!(at(t.inline.get() as *const u8), 1);
        assert_eq!(at(&t.exec.context as *const _ as *const u8), 2);
        assert_eq!(at(&t.exec.exit_prev as *const _ as *const u8), 2);
        assert_eq!(at(&t.links.next as *const _ as *const u8), 3);
        assert_eq!(at(&t.links.name as *const _ as *const u8), 3);
        assert_eq!(at(&t.exec.locals as *const _ as *const u8), 2);
        assert_eq!(at(&t.exec.waits_on as *const _ as *const u8), 2);
        assert_eq!(at(&t.exec.gather as *const _ as *const u8), 2);
        let gather_end =
            (&t.exec.gather as *const UltMarks as *const u8).wrapping_add(size_of::<UltMarks>() - 1);
        assert_eq!(at(gather_end), 2, "the gathering's marks end on line 3");
        assert_eq!(at(&t.sched.run_link as *const _ as *const u8), 4);
        assert_eq!(at(&t.sched.record as *const _ as *const u8), 4);
    }
}
