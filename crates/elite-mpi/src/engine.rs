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
//! An operation is started under the lock and tested once at once; if it is complete, its
//! [`Slot`] is completed before the start returns and the table never sees it. Otherwise its
//! request and slot are pushed on the table. [`Engine::poll`] (`MPI_Testsome` over the whole
//! table, one call for every outstanding request) takes the completed ones off the table under
//! the lock, and completes their slots after letting it go: each slot's outcome is written once,
//! its `done` flag set (release), and its semaphore given one permit. A waiter reads `done`
//! (acquire) and, when it is not set, acquires the semaphore (its ULT parks there); the permit
//! given after `done` is set cannot be lost, and one given to a slot nobody waits on is dropped
//! with the slot.
//!
//! The poll is driven by one *progress ULT* per rank ([`progress_loop`]): while the table holds
//! requests it polls and yields, so it polls once per turn it gets among the ready ULTs of its
//! processor; when the table is empty it parks on [`Engine::work`], which the start that makes
//! the table non-empty releases. A waiter also polls once itself before parking, and
//! `Request::test` polls once, so that a ULT spinning on `test` makes progress even when the
//! progress ULT cannot run.
//!
//! The buffers of an operation belong to its slot, not to the request the user holds: a request
//! dropped before its operation completed leaves the buffer alive in the table until MPI is done
//! with it. Requests still outstanding when the rank shuts down are cancelled where MPI can, and
//! their buffers leaked rather than freed under MPI's feet.

use crate::{mpi_error, Error};
use elite_rt::sync::Semaphore;
use mpi::ffi;
use smallvec::SmallVec;
use std::any::Any;
use std::mem::MaybeUninit;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The outcome of a completed operation: MPI's status and the error it reported, if any.
#[derive(Clone, Copy)]
pub(crate) struct Outcome {
    pub(crate) status: ffi::MPI_Status,
    /// `MPI_SUCCESS` or the error class MPI gave for this operation.
    pub(crate) code: c_int,
}

/// How long a waiter polls before it parks (see [`Slot::wait`]), while spinning pays off: each
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

/// One operation in flight: how its waiter learns that it completed, and its buffers.
pub(crate) struct Slot {
    done: AtomicBool,
    outcome: OnceLock<Outcome>,
    wake: Semaphore,
    /// The buffers MPI reads or writes until the operation completes (the request's owner takes
    /// them back after `done`).
    pub(crate) buffers: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Slot {
    pub(crate) fn new(buffers: Box<dyn Any + Send>) -> Arc<Slot> {
        Arc::new(Slot {
            done: AtomicBool::new(false),
            outcome: OnceLock::new(),
            wake: Semaphore::new(0),
            buffers: Mutex::new(Some(buffers)),
        })
    }

    fn complete(&self, outcome: Outcome) {
        let _ = self.outcome.set(outcome);
        self.done.store(true, Ordering::Release);
        self.wake.release();
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Blocks the calling ULT (or OS thread) until the operation completed. Polls for at most
    /// [`WAIT_SPIN`] first while spinning has been paying off on this rank (two-phase waiting, as
    /// elite's locks do: parking and being woken by the progress ULT costs a few switches and
    /// semaphore operations, about as long), else polls once; then parks.
    pub(crate) fn wait(&self, engine: &Engine) -> Outcome {
        if !self.is_done() {
            if engine.should_spin() {
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
        while !self.is_done() {
            self.wake.acquire();
        }
        *self.outcome.get().expect("a done slot has its outcome")
    }
}

/// The requests in flight, in parallel arrays as `MPI_Testsome` wants them, and the stack MPI
/// calls run on.
pub(crate) struct Table {
    stack: corosensei::stack::DefaultStack,
    reqs: Vec<ffi::MPI_Request>,
    slots: Vec<Arc<Slot>>,
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

    /// Starts an operation: `start` makes the MPI call that fills in the request, under the MPI
    /// lock. The operation's buffers must already be in `slot`.
    ///
    /// # Safety
    /// `start` must start one non-blocking MPI operation whose buffers are those owned by `slot`
    /// (so they live until the slot is completed) and return its error code.
    pub(crate) unsafe fn start(
        &self,
        slot: &Arc<Slot>,
        start: impl FnOnce(&mut ffi::MPI_Request) -> c_int,
    ) -> Result<(), Error> {
        let mut table = self.lock();
        // SAFETY: a null request is a valid initial value; `start` overwrites it.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        let mut flag: c_int = 0;
        let mut status = MaybeUninit::<ffi::MPI_Status>::zeroed();
        let started = table.call(|| {
            let rc = start(&mut req);
            if rc != ffi::MPI_SUCCESS as c_int {
                return Err(mpi_error(rc));
            }
            // SAFETY: `req` is the active request just started; flag and status are outputs.
            Ok(unsafe { ffi::MPI_Test(&mut req, &mut flag, status.as_mut_ptr()) })
        });
        let rc = started?;
        self.started.fetch_add(1, Ordering::Relaxed);
        if rc != ffi::MPI_SUCCESS as c_int || flag != 0 {
            drop(table);
            // SAFETY: MPI_Test wrote the status (zeroed before, in case it did not on an error).
            let status = unsafe { status.assume_init() };
            slot.complete(Outcome { status, code: rc });
            return Ok(());
        }
        table.reqs.push(req);
        table.slots.push(slot.clone());
        let first = table.reqs.len() == 1;
        drop(table);
        if first {
            self.work.release();
        }
        Ok(())
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
        let mut done: SmallVec<[(Arc<Slot>, Outcome); 8]> = SmallVec::new();
        let mut completed: SmallVec<[usize; 8]> = SmallVec::new();
        for k in 0..outcount as usize {
            let i = t.indices[k] as usize;
            // SAFETY: MPI_Testsome wrote the first `outcount` statuses.
            let status = unsafe { t.statuses[k].assume_init() };
            let code = if in_status { status.MPI_ERROR } else { rc };
            done.push((t.slots[i].clone(), Outcome { status, code }));
            completed.push(i);
        }
        completed.sort_unstable_by(|a, b| b.cmp(a));
        for i in completed {
            t.reqs.swap_remove(i);
            t.slots.swap_remove(i);
        }
        let left = t.reqs.len();
        drop(table);
        self.completed_in_polls.fetch_add(done.len() as u64, Ordering::Relaxed);
        for (slot, outcome) in done {
            slot.complete(outcome);
        }
        Some(left)
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
            let buffers = slot.buffers.lock().unwrap_or_else(|e| e.into_inner()).take();
            std::mem::forget(buffers);
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
/// on its time slice would hold it off for a whole slice (milliseconds per message, measured).
pub(crate) fn progress_loop(engine: Arc<Engine>) {
    let mut fruitless = 0u32;
    while !engine.stop.load(Ordering::Acquire) {
        let before = engine.completed_in_polls.load(Ordering::Relaxed);
        match engine.poll() {
            Some(0) => {
                fruitless = 0;
                engine.work.acquire();
            }
            _ => {
                if engine.completed_in_polls.load(Ordering::Relaxed) == before {
                    fruitless += 1;
                    if fruitless >= POLLS_BEFORE_OS_YIELD {
                        fruitless = 0;
                        std::thread::yield_now();
                    }
                } else {
                    fruitless = 0;
                }
                elite_rt::yield_now();
            }
        }
    }
}
