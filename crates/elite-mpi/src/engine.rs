//! The progress engine: the table of outstanding MPI requests of one rank and the batched poll
//! that completes them.
//!
//! # The protocol
//!
//! Every MPI call of this crate is made holding [`Engine::table`]'s lock (a `std` mutex): the
//! runtime's processors are several OS threads, and MPI is initialised at
//! `MPI_THREAD_SERIALIZED`, which allows calls from any thread, one at a time. The lock is held
//! only around calls that do not block (starting a non-blocking operation, `MPI_Test`,
//! `MPI_Testsome`, `MPI_Get_count`), never across a ULT switch, so a processor waits for it at most
//! one such call.
//!
//! Each of those calls runs on the engine's own stack ([`Table::call`], 1 MiB, switched to with
//! `corosensei::on_stack`), not on the calling ULT's: MPICH's progress engine (inside `MPI_Test`,
//! driving a non-blocking collective) needs more stack than a ULT's default 64 KiB, and overflowed
//! it into the guard page. One stack is enough because the calls are serialized by the lock.
//!
//! An operation is started under the lock and tested once at once, under the same hold; if it is
//! complete, its buffers and outcome go back to the caller as they are ([`Started::Done`]): no
//! allocation, and the table never sees it. Otherwise:
//!
//! - for the operations a user starts (`isend`, `irecv`, `ibarrier`), the buffers move into a
//!   [`Pending`] (the operation's one allocation), shared by the request and the table, and the
//!   request handle goes on the table ([`Started::Pending`]);
//! - for the blocking operations (`send`, `recv`, `barrier`, `broadcast`, `all_reduce`, which wait
//!   at once) the request stays in the waiter's hands ([`Active`]): the waiter tests its own
//!   request (`MPI_Test`) for up to [`WAIT_SPIN`], and only when it must park does it move the
//!   request and buffers onto the table. An `Active` dropped before completion (its ULT unwound)
//!   puts itself on the table the same way, so MPI never writes into freed memory.
//!
//! [`Engine::poll`] (`MPI_Testsome` over the whole table, one call for every outstanding request)
//! takes the completed ones off the table under the lock, and completes their `Pending`s after
//! letting it go: each outcome is written once, its `done` flag set (release), and its semaphore
//! given one permit. A waiter reads `done` (acquire) and, when it is not set, acquires the
//! semaphore (its ULT parks there); the permit given after `done` is set cannot be lost, and one
//! given to a `Pending` nobody waits on is dropped with it.
//!
//! The count of a receive (`MPI_Get_count`) is asked under the same hold of the lock that saw the
//! receive complete, and travels in its [`Outcome`].
//!
//! The poll is driven by one *progress ULT* per rank ([`progress_loop`]): while the table holds
//! requests it polls and yields, so it polls once per turn it gets among the ready ULTs of its
//! processor; when the table is empty it parks on [`Engine::work`], which the start that makes
//! the table non-empty releases. A waiter also polls once itself before parking, and
//! `Request::test` polls once, so that a ULT spinning on `test` makes progress even when the
//! progress ULT cannot run.
//!
//! The buffers of an operation on the table belong to its `Pending`, kept alive by the table's
//! reference: a request dropped before its operation completed leaves the buffers alive until MPI
//! is done with them. MPI is only given addresses inside heap memory the buffers own (a `Vec`'s
//! elements), which stay put when the buffers move from the caller to an `Active` or a `Pending`. Requests still outstanding when the rank shuts down are cancelled where MPI can, and
//! their buffers leaked rather than freed under MPI's feet.

use crate::handshake::Handshake;
use crate::{mpi_error, Error};
use elite_rt::sync::Semaphore;
use mpi::ffi;
use smallvec::SmallVec;
use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The outcome of a completed operation: MPI's status, the error it reported, if any, and for a
/// receive the number of elements received.
#[derive(Clone, Copy)]
pub(crate) struct Outcome {
    pub(crate) status: ffi::MPI_Status,
    /// `MPI_SUCCESS` or the error class MPI gave for this operation.
    pub(crate) code: c_int,
    /// For an operation started with a count type ([`Engine::start`]): `MPI_Get_count` of the
    /// status in that type, asked under the same hold of the MPI lock that saw the operation
    /// complete (`MPI_UNDEFINED` when it was not a whole number, or when `MPI_Get_count` failed);
    /// else 0.
    pub(crate) count: c_int,
}

/// A datatype handle (an integer in MPICH, a pointer in Open MPI).
#[derive(Clone, Copy)]
pub(crate) struct Datatype(pub(crate) ffi::MPI_Datatype);
// SAFETY: a predefined or committed datatype handle may be used from any thread at
// MPI_THREAD_SERIALIZED; it is only passed to MPI under the engine's lock.
unsafe impl Send for Datatype {}
// SAFETY: as above; the handle is never written.
unsafe impl Sync for Datatype {}

/// The status, code and count of an operation that just completed; called under the MPI lock on
/// the engine's stack.
fn outcome_of(status: ffi::MPI_Status, code: c_int, count_type: Option<Datatype>) -> Outcome {
    let count = match count_type {
        None => 0,
        Some(_) if code != ffi::MPI_SUCCESS as c_int => 0,
        Some(dt) => {
            let mut count: c_int = 0;
            // SAFETY: the status is the one MPI wrote for this completed operation; the datatype
            // is the one it was started with.
            let rc = unsafe { ffi::MPI_Get_count(&status, dt.0, &mut count) };
            if rc == ffi::MPI_SUCCESS as c_int {
                count
            } else {
                // SAFETY: reading a link-time constant.
                unsafe { ffi::RSMPI_UNDEFINED }
            }
        }
    };
    Outcome { status, code, count }
}

/// How long a waiter polls before it parks (see [`Pending::wait`]), while spinning pays off: each
/// spin that ended with the operation complete adds one to the rank's spin credit (at most
/// [`SPIN_CREDIT_MAX`]), each that did not takes [`SPIN_FAILURE_COST`]; with no credit left only
/// one wait in [`SPIN_PROBE_EVERY`] spins, to find out whether it pays again. Waits that take far
/// longer than the spin (a peer busy computing) so stop costing their processor 2 µs each.
pub(crate) const WAIT_SPIN: std::time::Duration = std::time::Duration::from_micros(2);
/// See [`WAIT_SPIN`].
pub(crate) const SPIN_CREDIT_MAX: u32 = 8;
/// See [`WAIT_SPIN`].
pub(crate) const SPIN_FAILURE_COST: u32 = 2;
/// See [`WAIT_SPIN`].
pub(crate) const SPIN_PROBE_EVERY: u32 = 16;

/// What an operation is, for the stall report ([`crate::MpiStall`]): its name, and its peer rank
/// and tag as given to MPI (`MPI_ANY_SOURCE`/`MPI_ANY_TAG` included; `None` for a collective's).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpInfo {
    pub(crate) op: &'static str,
    pub(crate) peer: Option<c_int>,
    pub(crate) tag: Option<c_int>,
}

impl OpInfo {
    pub(crate) fn p2p(op: &'static str, peer: c_int, tag: c_int) -> OpInfo {
        OpInfo { op, peer: Some(peer), tag: Some(tag) }
    }

    pub(crate) fn collective(op: &'static str) -> OpInfo {
        OpInfo { op, peer: None, tag: None }
    }
}

/// What the table holds of an operation in flight: how to complete it.
pub(crate) trait Completable: Send + Sync {
    /// Records the outcome and wakes the waiter; called once, after the operation completed.
    fn complete(&self, outcome: Outcome);
    /// The datatype the outcome's count is asked in, if any.
    fn count_type(&self) -> Option<Datatype>;
    /// What the operation is (for the stall report).
    fn info(&self) -> OpInfo;
    /// The ULT parked on it, if one is.
    fn waiter(&self) -> Option<elite_rt::Thread>;
}

/// An operation that did not complete as it started: its buffers, kept at their heap addresses
/// by the table's reference until it completes, and how its waiter learns that it did.
///
/// The one heap allocation of an operation, made only when it is still in flight after the
/// test at its start: one complete at once needs no allocation besides its buffers.
pub(crate) struct Pending<B> {
    /// The outcome, and the semaphore the waiter parks on (`crate::handshake`, loom-checked).
    handshake: Handshake<Outcome, Semaphore>,
    count_type: Option<Datatype>,
    info: OpInfo,
    /// The ULT that parked on it (set once, by its waiter, before it parks; read by the stall
    /// report).
    waiter: std::sync::OnceLock<elite_rt::Thread>,
    /// The buffers MPI reads or writes until the operation completes. Only the request's owner
    /// touches them, and only to take them after `done` (the table never does; at shutdown it
    /// leaks the whole `Pending`).
    buffers: UnsafeCell<Option<B>>,
}

// SAFETY: `buffers` (B: Send) are moved out by the single owner of the request, after the
// handshake says done; the handshake is Sync (see `crate::handshake`), the rest Sync by itself.
unsafe impl<B: Send> Sync for Pending<B> {}

impl<B: Send> Completable for Pending<B> {
    fn complete(&self, outcome: Outcome) {
        // SAFETY: the table completes an operation once (it is taken off the table under the
        // lock as it is found complete).
        unsafe { self.handshake.complete(outcome) };
    }

    fn count_type(&self) -> Option<Datatype> {
        self.count_type
    }

    fn info(&self) -> OpInfo {
        self.info
    }

    fn waiter(&self) -> Option<elite_rt::Thread> {
        self.waiter.get().cloned()
    }
}

impl<B: Send> Pending<B> {
    pub(crate) fn is_done(&self) -> bool {
        self.handshake.is_done()
    }

    /// Blocks the calling ULT (or OS thread) until the operation completed. Polls for at most
    /// [`WAIT_SPIN`] first while spinning has been paying off on this rank (two-phase waiting, as
    /// elite's locks do: parking and being woken by the progress ULT costs a few switches and
    /// semaphore operations, about as long), else polls once; then parks.
    pub(crate) fn wait(&self, engine: &Engine, spin: bool) -> Outcome {
        if !self.is_done() {
            if spin && engine.should_spin() {
                let start = std::time::Instant::now();
                loop {
                    engine.poll();
                    if self.is_done() || start.elapsed() >= WAIT_SPIN {
                        break;
                    }
                    std::hint::spin_loop();
                }
                engine.spun(self.is_done());
            } else {
                engine.poll();
            }
        }
        if !self.is_done() {
            // The progress ULT may be parked with this operation on the table (a lazy start, or
            // a blocking waiter's that gave up spinning): one permit makes it poll until the
            // table is empty. A surplus permit costs it one poll of an empty table.
            engine.kick();
            // Named in the stall report while it waits (one clone of its handle, on the path
            // that parks only).
            if let Some(me) = elite_rt::try_current() {
                let _ = self.waiter.set(me);
            }
        }
        self.handshake.park()
    }

    /// Takes the buffers back once the operation is done.
    ///
    /// # Safety
    /// Called by the request's owner only, after [`is_done`](Pending::is_done) returned true.
    pub(crate) unsafe fn take_buffers(&self) -> Option<B> {
        // SAFETY: after `done` MPI and the table no longer touch the buffers; the caller is the
        // only other party (see the field's note).
        unsafe { (*self.buffers.get()).take() }
    }
}

/// How an operation that is not complete at its start is kept (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// A blocking operation: its waiter holds it ([`Active`]) and waits at once.
    Blocking,
    /// A small point-to-point operation a user started: on the table, without waking the progress
    /// ULT; its waiter polls, and wakes the progress ULT before it parks (as does dropping its
    /// request unfinished).
    Lazy,
    /// Any other operation a user started (a large message, a collective): on the table, the
    /// progress ULT woken at once, so that it moves on while its starter computes.
    Woken,
}

/// The largest message, in bytes, a user's `isend`/`irecv` starts [`Mode::Lazy`]: messages up to
/// this size go eagerly (the sender's MPI copies them out at once, and the receiver's copies
/// them in at its next call into MPI, whoever makes it), so nothing waits on this rank's
/// progress ULT for them.
pub(crate) const LAZY_BYTES: usize = 4096;

/// An operation just started: complete at once, its buffers and outcome in hand; in flight and
/// on the table; or in flight and in the hands of a waiter about to wait for it.
pub(crate) enum Started<B: Send + 'static> {
    Done(B, Outcome),
    Pending(Arc<Pending<B>>),
    Active(Active<B>),
}

/// A request handle held outside the table.
struct RawRequest(ffi::MPI_Request);
// SAFETY: a request handle may be used from any thread at MPI_THREAD_SERIALIZED; it is only
// passed to MPI under the engine's lock.
unsafe impl Send for RawRequest {}

/// An operation in flight that is not on the table: its waiter tests it itself (`MPI_Test` on
/// this one request, not `MPI_Testsome` over the table), with no allocation besides its buffers
/// and without waking the progress ULT. Made only for the blocking operations, which wait at once.
///
/// Dropped before it completed (its waiter unwound, say), it puts itself on the table, buffers
/// and all, so that MPI never writes into freed memory: the table keeps them until MPI is done.
pub(crate) struct Active<B: Send + 'static> {
    engine: Arc<Engine>,
    req: RawRequest,
    count_type: Option<Datatype>,
    info: OpInfo,
    /// `Some` until the operation is complete or handed to the table.
    buffers: Option<B>,
}

impl<B: Send + 'static> Active<B> {
    /// `MPI_Test` on this request, under the MPI lock; its outcome once complete.
    fn test(&mut self) -> Option<Outcome> {
        let mut table = self.engine.lock();
        let (req, count_type) = (&mut self.req.0, self.count_type);
        table.call(|| {
            let mut flag: c_int = 0;
            let mut status = MaybeUninit::<ffi::MPI_Status>::zeroed();
            // SAFETY: `req` is this operation's active request; flag and status are outputs.
            let rc = unsafe { ffi::MPI_Test(req, &mut flag, status.as_mut_ptr()) };
            // SAFETY: MPI_Test wrote the status, or left it zeroed.
            (rc != ffi::MPI_SUCCESS as c_int || flag != 0)
                .then(|| outcome_of(unsafe { status.assume_init() }, rc, count_type))
        })
    }

    /// Blocks the calling ULT until the operation completes: tests its own request for at most
    /// [`WAIT_SPIN`] while spinning pays off on this rank (else once); then puts it on the table
    /// and parks until the progress ULT completes it.
    pub(crate) fn wait(mut self) -> (B, Outcome) {
        let engine = self.engine.clone();
        let outcome = if engine.should_spin() {
            let start = std::time::Instant::now();
            let outcome = loop {
                let outcome = self.test();
                if outcome.is_some() || start.elapsed() >= WAIT_SPIN {
                    break outcome;
                }
                std::hint::spin_loop();
            };
            engine.spun(outcome.is_some());
            outcome
        } else {
            self.test()
        };
        if let Some(outcome) = outcome {
            let buffers = self.buffers.take().expect("an active operation holds its buffers");
            return (buffers, outcome);
        }
        let pending = self.register();
        let outcome = pending.wait(&engine, false);
        // SAFETY: this waiter owns the operation and `wait` returned once it was done.
        let buffers = unsafe { pending.take_buffers() };
        (buffers.expect("the buffers are taken once"), outcome)
    }

    /// Moves the operation onto the table.
    fn register(&mut self) -> Arc<Pending<B>> {
        let buffers = self.buffers.take().expect("an active operation holds its buffers");
        // SAFETY: reading a link-time constant.
        let req = std::mem::replace(&mut self.req.0, unsafe { ffi::RSMPI_REQUEST_NULL });
        let mut table = self.engine.lock();
        self.engine.push(&mut table, req, self.count_type, self.info, buffers, false)
    }
}

impl<B: Send + 'static> Drop for Active<B> {
    fn drop(&mut self) {
        if self.buffers.is_some() {
            // Not complete: the table takes the request and keeps the buffers alive until MPI
            // is done with them; the progress ULT polls until it is.
            drop(self.register());
            self.engine.kick();
        }
    }
}

/// The requests in flight, in parallel arrays as `MPI_Testsome` wants them, and the stack MPI
/// calls run on.
pub(crate) struct Table {
    stack: corosensei::stack::DefaultStack,
    reqs: Vec<ffi::MPI_Request>,
    slots: Vec<Arc<dyn Completable>>,
    indices: Vec<c_int>,
    statuses: Vec<MaybeUninit<ffi::MPI_Status>>,
}

// SAFETY: an `MPI_Request` is a handle (an integer in MPICH, a pointer in Open MPI) that MPI lets
// any thread use at MPI_THREAD_SERIALIZED; the stack is a mapping used by one thread at a time;
// the table is only reached under its mutex.
unsafe impl Send for Table {}

/// The size of the stack MPI calls run on.
const MPI_STACK_BYTES: usize = 1 << 20;

impl Table {
    /// Runs `f` (MPI calls) on the engine's stack.
    pub(crate) fn call<R>(&mut self, f: impl FnOnce() -> R) -> R {
        corosensei::on_stack(&mut self.stack, f)
    }
}

/// A rank's progress engine (see the module docs).
pub(crate) struct Engine {
    pub(crate) comm: Comm,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) tag_ub: i32,
    table: Mutex<Table>,
    /// Released when the table goes from empty to not; the progress ULT parks on it.
    work: Semaphore,
    stop: AtomicBool,
    /// Spin credit and probe counter of the waiters (see [`WAIT_SPIN`]); relaxed, a heuristic.
    spin_credit: AtomicU32,
    spin_probe: AtomicU32,
    polls: AtomicU64,
    completed_in_polls: AtomicU64,
    started: AtomicU64,
    /// The stall report's grace period in nanoseconds (0: off); see [`MpiStall`].
    stall_grace_ns: AtomicU64,
    /// Stall reports made so far, and the latest one.
    stalls: AtomicU64,
    last_stall: Mutex<Option<MpiStall>>,
}

/// The default grace period of the stall report ([`crate::World::set_stall_report`]).
pub const DEFAULT_STALL_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// One operation outstanding in a [`MpiStall`] report.
#[derive(Clone, Debug)]
pub struct MpiWait {
    op: &'static str,
    peer: Option<PeerRank>,
    tag: Option<i32>,
    waiter: Option<elite_rt::Thread>,
}

/// The peer of a point-to-point operation, or a collective's root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerRank {
    /// That rank.
    Rank(usize),
    /// `MPI_ANY_SOURCE`.
    Any,
}

impl MpiWait {
    /// The operation: `"send"`, `"recv"`, `"barrier"`, `"broadcast"` or `"all_reduce"`.
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// The peer rank of a send or receive, or a broadcast's root; `None` for the other
    /// collectives.
    pub fn peer(&self) -> Option<PeerRank> {
        self.peer
    }

    /// The tag of a send or receive (`None` for a collective, or a receive of any tag).
    pub fn tag(&self) -> Option<i32> {
        self.tag
    }

    /// The ULT parked on the operation, if one is (an `isend`/`irecv` nobody waits on yet has
    /// none).
    pub fn waiter(&self) -> Option<&elite_rt::Thread> {
        self.waiter.as_ref()
    }
}

impl fmt::Display for MpiWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.waiter {
            Some(t) => {
                write!(f, "ULT {}", t.id().as_u64())?;
                if let Some(n) = t.name() {
                    write!(f, " '{n}'")?;
                }
                write!(f, " waits on MPI {}", self.op)?;
            }
            None => write!(f, "no ULT waits yet on MPI {}", self.op)?,
        }
        let dir = if self.op == "send" { "to" } else { "from" };
        match (self.op, self.peer) {
            ("broadcast", Some(PeerRank::Rank(r))) => write!(f, " from root {r}")?,
            (_, Some(PeerRank::Rank(r))) => write!(f, " {dir} rank {r}")?,
            (_, Some(PeerRank::Any)) => write!(f, " {dir} any rank")?,
            (_, None) => {}
        }
        match (self.tag, self.peer) {
            (Some(t), _) => write!(f, ", tag {t}"),
            (None, Some(_)) if self.op != "broadcast" => f.write_str(", any tag"),
            _ => Ok(()),
        }
    }
}

/// The stall report of a rank: no MPI operation of the rank completed for the grace period
/// ([`crate::World::set_stall_report`]) while operations were outstanding. It names every
/// outstanding operation on the rank's table (a blocking operation goes there when its ULT
/// parks), what it is, its peer rank and tag, and the ULT parked on it. Printed to stderr by the
/// progress ULT once per stall, and kept ([`crate::World::last_stall`]).
///
/// A stall is not proof of a deadlock (a peer may be computing for longer than the grace
/// period): the report says what this rank waits for, and the job goes on.
#[derive(Clone, Debug)]
pub struct MpiStall {
    rank: usize,
    quiet_for: std::time::Duration,
    waits: Vec<MpiWait>,
}

impl MpiStall {
    /// The rank that stalled.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How long nothing had completed when the report was made.
    pub fn quiet_for(&self) -> std::time::Duration {
        self.quiet_for
    }

    /// The operations outstanding, in the order of the table.
    pub fn waits(&self) -> &[MpiWait] {
        &self.waits
    }
}

impl fmt::Display for MpiStall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "elite-mpi: rank {}: no MPI operation completed for {:.3} s; {} outstanding:",
            self.rank,
            self.quiet_for.as_secs_f64(),
            self.waits.len()
        )?;
        for w in &self.waits {
            write!(f, "\n  {w}")?;
        }
        Ok(())
    }
}

/// The world communicator's handle.
#[derive(Clone, Copy)]
pub(crate) struct Comm(pub(crate) ffi::MPI_Comm);
// SAFETY: a communicator handle may be used from any thread at MPI_THREAD_SERIALIZED; every use
// is under the engine's lock.
unsafe impl Send for Comm {}
// SAFETY: as above; the handle itself is never written after initialisation.
unsafe impl Sync for Comm {}

/// What the engine has done so far (see [`crate::World::progress_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgressStats {
    /// Operations started.
    pub started: u64,
    /// Batched polls (`MPI_Testsome` calls) over a non-empty table.
    pub polls: u64,
    /// Operations those polls completed (the rest completed at their start).
    pub completed_in_polls: u64,
}

impl Engine {
    pub(crate) fn new(comm: Comm, rank: usize, size: usize, tag_ub: i32) -> Engine {
        Engine {
            comm,
            rank,
            size,
            tag_ub,
            table: Mutex::new(Table {
                stack: corosensei::stack::DefaultStack::new(MPI_STACK_BYTES)
                    .expect("a 1 MiB stack for MPI calls can be mapped"),
                reqs: Vec::new(),
                slots: Vec::new(),
                indices: Vec::new(),
                statuses: Vec::new(),
            }),
            work: Semaphore::new(0),
            stop: AtomicBool::new(false),
            spin_credit: AtomicU32::new(SPIN_CREDIT_MAX),
            spin_probe: AtomicU32::new(0),
            polls: AtomicU64::new(0),
            completed_in_polls: AtomicU64::new(0),
            started: AtomicU64::new(0),
            stall_grace_ns: AtomicU64::new(DEFAULT_STALL_GRACE.as_nanos() as u64),
            stalls: AtomicU64::new(0),
            last_stall: Mutex::new(None),
        }
    }

    /// Whether a waiter should poll for [`WAIT_SPIN`] before it parks.
    fn should_spin(&self) -> bool {
        self.spin_credit.load(Ordering::Relaxed) > 0
            || self.spin_probe.fetch_add(1, Ordering::Relaxed).is_multiple_of(SPIN_PROBE_EVERY)
    }

    /// Records whether a spin ended with its operation complete.
    fn spun(&self, paid_off: bool) {
        let c = self.spin_credit.load(Ordering::Relaxed);
        let c = if paid_off { (c + 1).min(SPIN_CREDIT_MAX) } else { c.saturating_sub(SPIN_FAILURE_COST) };
        self.spin_credit.store(c, Ordering::Relaxed);
    }

    /// The MPI lock (the table's): every MPI call of the crate is made holding it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn stats(&self) -> ProgressStats {
        ProgressStats {
            started: self.started.load(Ordering::Relaxed),
            polls: self.polls.load(Ordering::Relaxed),
            completed_in_polls: self.completed_in_polls.load(Ordering::Relaxed),
        }
    }

    /// Starts an operation on `buffers`: `start` makes the MPI call that fills in the request,
    /// under the MPI lock, and the request is tested at once under the same hold. Complete, the
    /// buffers and outcome come back as they are ([`Started::Done`]: no allocation besides the buffers, nothing left
    /// for the table); else, with `register`, the buffers move into a [`Pending`] that the table
    /// keeps until MPI is done with them, and without, into an [`Active`] for a caller that waits
    /// at once. With `count_type`, the outcome carries `MPI_Get_count` in that type.
    ///
    /// # Safety
    /// `start` must start one non-blocking MPI operation whose buffers lie in heap memory owned
    /// by `buffers` (a `Vec`'s elements, not the `Vec` itself): memory that stays where it is
    /// when `buffers` is moved, and lives as long as `buffers` is not dropped. It returns MPI's
    /// error code.
    pub(crate) unsafe fn start<B: Send + 'static>(
        self: &Arc<Self>,
        mut buffers: B,
        count_type: Option<Datatype>,
        info: OpInfo,
        mode: Mode,
        start: impl FnOnce(&mut B, &mut ffi::MPI_Request) -> c_int,
    ) -> Result<Started<B>, Error> {
        let mut table = self.lock();
        // SAFETY: a null request is a valid initial value; `start` overwrites it.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        let started = table.call(|| {
            let rc = start(&mut buffers, &mut req);
            if rc != ffi::MPI_SUCCESS as c_int {
                return Err(mpi_error(rc));
            }
            let mut flag: c_int = 0;
            let mut status = MaybeUninit::<ffi::MPI_Status>::zeroed();
            // SAFETY: `req` is the active request just started; flag and status are outputs.
            let rc = unsafe { ffi::MPI_Test(&mut req, &mut flag, status.as_mut_ptr()) };
            if rc != ffi::MPI_SUCCESS as c_int || flag != 0 {
                // SAFETY: MPI_Test wrote the status (zeroed before, in case it did not on an
                // error).
                let status = unsafe { status.assume_init() };
                Ok(Some(outcome_of(status, rc, count_type)))
            } else {
                Ok(None)
            }
        });
        let done = match started {
            Ok(done) => done,
            Err(e) => {
                drop(table);
                return Err(e);
            }
        };
        self.started.fetch_add(1, Ordering::Relaxed);
        if let Some(outcome) = done {
            drop(table);
            return Ok(Started::Done(buffers, outcome));
        }
        // Moving `buffers` leaves the memory MPI uses where it is (the contract above).
        if mode == Mode::Blocking {
            drop(table);
            return Ok(Started::Active(Active {
                engine: self.clone(),
                req: RawRequest(req),
                count_type,
                info,
                buffers: Some(buffers),
            }));
        }
        Ok(Started::Pending(self.push(&mut table, req, count_type, info, buffers, mode == Mode::Woken)))
    }

    /// Puts an operation in flight on the table (under the MPI lock, `table` being its guard),
    /// its buffers in a new [`Pending`]; with `wake`, wakes the progress ULT when the table was
    /// empty.
    fn push<B: Send + 'static>(
        &self,
        table: &mut MutexGuard<'_, Table>,
        req: ffi::MPI_Request,
        count_type: Option<Datatype>,
        info: OpInfo,
        buffers: B,
        wake: bool,
    ) -> Arc<Pending<B>> {
        let pending = Arc::new(Pending {
            handshake: Handshake::new(Semaphore::new(0)),
            count_type,
            info,
            waiter: std::sync::OnceLock::new(),
            buffers: UnsafeCell::new(Some(buffers)),
        });
        table.reqs.push(req);
        table.slots.push(pending.clone());
        if wake && table.reqs.len() == 1 {
            self.work.release();
        }
        pending
    }

    /// One batched poll: `MPI_Testsome` over every outstanding request, completing the slots of
    /// those done. Returns how many remain outstanding, or `None` when another thread held the
    /// MPI lock (nothing was polled).
    pub(crate) fn poll(&self) -> Option<usize> {
        let mut table = match self.table.try_lock() {
            Ok(t) => t,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        let n = table.reqs.len();
        if n == 0 {
            return Some(0);
        }
        let t = &mut *table;
        t.indices.resize(n, 0);
        t.statuses.resize(n, MaybeUninit::zeroed());
        let mut outcount: c_int = 0;
        let (reqs, indices, statuses) = (&mut t.reqs, &mut t.indices, &mut t.statuses);
        // SAFETY: the arrays hold `n` requests (active or null), `n` index and `n` status slots.
        let rc = corosensei::on_stack(&mut t.stack, || unsafe {
            ffi::MPI_Testsome(
                n as c_int,
                reqs.as_mut_ptr(),
                &mut outcount,
                indices.as_mut_ptr(),
                statuses.as_mut_ptr().cast(),
            )
        });
        self.polls.fetch_add(1, Ordering::Relaxed);
        // SAFETY: reading a link-time constant.
        let undefined = unsafe { ffi::RSMPI_UNDEFINED };
        if outcount == undefined || outcount <= 0 {
            return Some(n);
        }
        let in_status = rc == ffi::MPI_ERR_IN_STATUS as c_int;
        // On the stack for the usual few completions per poll (no allocation per poll).
        let mut outcomes: SmallVec<[(usize, Outcome); 8]> = SmallVec::new();
        {
            let (slots, statuses, indices) = (&t.slots, &t.statuses, &t.indices);
            // The counts of receives are asked here, under the hold that saw them complete.
            corosensei::on_stack(&mut t.stack, || {
                for k in 0..outcount as usize {
                    let i = indices[k] as usize;
                    // SAFETY: MPI_Testsome wrote the first `outcount` statuses.
                    let status = unsafe { statuses[k].assume_init() };
                    let code = if in_status { status.MPI_ERROR } else { rc };
                    outcomes.push((i, outcome_of(status, code, slots[i].count_type())));
                }
            });
        }
        outcomes.sort_unstable_by_key(|o| std::cmp::Reverse(o.0));
        let mut done: SmallVec<[(Arc<dyn Completable>, Outcome); 8]> = SmallVec::new();
        for (i, outcome) in outcomes {
            t.reqs.swap_remove(i);
            done.push((t.slots.swap_remove(i), outcome));
        }
        let left = t.reqs.len();
        drop(table);
        self.completed_in_polls.fetch_add(done.len() as u64, Ordering::Relaxed);
        for (slot, outcome) in done {
            slot.complete(outcome);
        }
        Some(left)
    }

    /// Sets the stall report's grace period (`None`: no report).
    pub(crate) fn set_stall_grace(&self, grace: Option<std::time::Duration>) {
        let ns = grace.map_or(0, |g| g.as_nanos().clamp(1, u64::MAX as u128) as u64);
        self.stall_grace_ns.store(ns, Ordering::Relaxed);
    }

    /// The stall reports made so far, and the latest.
    pub(crate) fn last_stall(&self) -> (u64, Option<MpiStall>) {
        let last = self.last_stall.lock().unwrap_or_else(|e| e.into_inner()).clone();
        (self.stalls.load(Ordering::Acquire), last)
    }

    /// Makes the report of a stall `quiet_for` long from the table, prints and keeps it.
    fn report_stall(&self, quiet_for: std::time::Duration) {
        // SAFETY: reading link-time constants.
        let (any_source, any_tag) = unsafe { (ffi::RSMPI_ANY_SOURCE, ffi::RSMPI_ANY_TAG) };
        let waits: Vec<MpiWait> = {
            let table = self.lock();
            table
                .slots
                .iter()
                .map(|s| {
                    let info = s.info();
                    MpiWait {
                        op: info.op,
                        peer: info.peer.map(|p| {
                            if p == any_source {
                                PeerRank::Any
                            } else {
                                PeerRank::Rank(p as usize)
                            }
                        }),
                        tag: info.tag.filter(|&t| t != any_tag),
                        waiter: s.waiter(),
                    }
                })
                .collect()
        };
        let stall = MpiStall { rank: self.rank, quiet_for, waits };
        eprintln!("{stall}");
        *self.last_stall.lock().unwrap_or_else(|e| e.into_inner()) = Some(stall);
        self.stalls.fetch_add(1, Ordering::Release);
    }

    /// Makes the progress ULT poll (once more, and on while the table is not empty): a permit
    /// of the semaphore it parks on.
    pub(crate) fn kick(&self) {
        self.work.release();
    }

    /// Asks the progress ULT to return.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.work.release();
    }

    /// Cancels what is still outstanding at shutdown; buffers MPI may still touch are leaked.
    pub(crate) fn abandon_outstanding(&self) -> usize {
        let mut table = self.lock();
        let t = &mut *table;
        let n = t.reqs.len();
        let reqs = &mut t.reqs;
        corosensei::on_stack(&mut t.stack, || {
            for req in reqs.iter_mut() {
                // SAFETY: each request in the table is active; cancelling then freeing is
                // allowed (the operation completes or is cancelled later, inside MPI).
                unsafe {
                    ffi::MPI_Cancel(req);
                    ffi::MPI_Request_free(req);
                }
            }
        });
        t.reqs.clear();
        for slot in t.slots.drain(..) {
            // The operation's buffers may still be written by MPI: leak them (and their waiter's
            // state) rather than free them.
            std::mem::forget(slot);
        }
        n
    }
}

/// Fruitless polls in a row after which the progress ULT also yields its OS thread.
pub(crate) const POLLS_BEFORE_OS_YIELD: u32 = 64;

/// The progress ULT's body: poll while requests are outstanding, yielding after each poll; park on
/// the engine's `work` semaphore while none are. After [`POLLS_BEFORE_OS_YIELD`] polls in a row
/// that completed nothing it yields its OS thread too (`sched_yield`, as MPICH's own blocking
/// calls do after `MPIR_CVAR_POLLS_BEFORE_YIELD` polls): on a machine with more runnable threads
/// than CPUs, the peer rank this one waits for may be waiting for a CPU, and a processor spinning
/// on its time slice would hold it off for a whole slice (milliseconds per message).
///
/// The stall report ([`MpiStall`]) is checked at the same point, every [`POLLS_BEFORE_OS_YIELD`]
/// fruitless polls: the first such point of a run of fruitless polls notes the time, a later one
/// past the grace period makes the report (once per run; any completion, or an empty table, ends
/// the run). So it costs one clock read per 64 fruitless polls, nothing on a poll that completes.
pub(crate) fn progress_loop(engine: Arc<Engine>) {
    let mut fruitless = 0u32;
    let mut quiet_since: Option<std::time::Instant> = None;
    let mut reported = false;
    while !engine.stop.load(Ordering::Acquire) {
        let before = engine.completed_in_polls.load(Ordering::Relaxed);
        match engine.poll() {
            Some(0) => {
                fruitless = 0;
                (quiet_since, reported) = (None, false);
                engine.work.acquire();
            }
            _ => {
                if engine.completed_in_polls.load(Ordering::Relaxed) == before {
                    fruitless += 1;
                    if fruitless >= POLLS_BEFORE_OS_YIELD {
                        fruitless = 0;
                        let grace = engine.stall_grace_ns.load(Ordering::Relaxed);
                        match quiet_since {
                            None => quiet_since = Some(std::time::Instant::now()),
                            Some(t) if !reported && grace > 0 && t.elapsed().as_nanos() >= grace as u128 => {
                                reported = true;
                                engine.report_stall(t.elapsed());
                            }
                            Some(_) => {}
                        }
                        std::thread::yield_now();
                    }
                } else {
                    fruitless = 0;
                    (quiet_since, reported) = (None, false);
                }
                elite_rt::yield_now();
            }
        }
    }
}
