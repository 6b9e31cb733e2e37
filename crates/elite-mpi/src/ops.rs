//! The world communicator's operations: point-to-point and collectives, each started
//! non-blocking and waited on by parking the calling ULT (see the engine's protocol).

use crate::cell::Cell;
use crate::engine::{Datatype, Engine, Mode, OpInfo, Outcome, ProgressStats, Started, LAZY_BYTES};
use crate::{mpi_error, Error};
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::traits::AsRaw;
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// Where a receive takes its message from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// This rank only.
    Rank(usize),
    /// Any rank (`MPI_ANY_SOURCE`).
    Any,
}

impl From<usize> for Source {
    fn from(rank: usize) -> Source {
        Source::Rank(rank)
    }
}

/// Which tags a receive accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagMatch {
    /// This tag only.
    Tag(i32),
    /// Any tag (`MPI_ANY_TAG`).
    Any,
}

impl From<i32> for TagMatch {
    fn from(tag: i32) -> TagMatch {
        TagMatch::Tag(tag)
    }
}

/// What a receive got: from whom, with which tag, how many elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    source: usize,
    tag: i32,
    count: usize,
}

impl Status {
    /// The sender's rank.
    pub fn source(&self) -> usize {
        self.source
    }

    /// The message's tag.
    pub fn tag(&self) -> i32 {
        self.tag
    }

    /// The number of elements received.
    pub fn count(&self) -> usize {
        self.count
    }
}

type Finish<O> = fn(&Engine, <O as Completion>::Buffers, Outcome) -> Result<O, Error>;

mod sealed {
    /// What a [`Request`](super::Request) gives back, and the buffers its operation runs on.
    pub trait Completion: Sized {
        /// The buffers MPI reads or writes while the operation is in flight.
        type Buffers: Send + 'static;
    }
}
use sealed::Completion;

impl<T: Send + 'static> Completion for Vec<T> {
    type Buffers = Vec<T>;
}

impl<T: Send + 'static> Completion for (Vec<T>, Status) {
    type Buffers = Vec<T>;
}

impl Completion for () {
    type Buffers = ();
}

/// The result of a blocking send of one value (its buffer, a pooled [`Cell`]).
struct SentOne;

impl<T: Send + 'static> Completion for (SentOne, PhantomData<T>) {
    type Buffers = Cell<T>;
}

/// The result of a blocking receive of one value (into a pooled [`Cell`]).
struct One<T>(T, Status);

impl<T: Send + 'static> Completion for One<T> {
    type Buffers = Cell<T>;
}

/// The result of an all-reduce: its receive buffer (its buffers are both).
struct Reduced<T>(Vec<T>);

impl<T: Send + 'static> Completion for Reduced<T> {
    type Buffers = (Vec<T>, Vec<T>);
}

/// An operation in flight, started by one of [`World`]'s `i` methods. [`wait`](Request::wait)
/// parks the calling ULT until it completes; [`test`](Request::test) asks without blocking.
///
/// Dropping a request before its operation completed does not cancel it: the operation goes on,
/// its buffers kept alive by the rank until MPI is done with them.
///
/// A request whose operation completed as it started (a small send, a receive whose message had
/// arrived) holds its buffers and outcome inline; only one still in flight then shares a heap
/// record with the rank's table of outstanding requests.
#[must_use = "an operation's result and errors come from `wait`"]
pub struct Request<O: Completion> {
    engine: Arc<Engine>,
    /// `None` once `wait` took it.
    state: Option<Started<O::Buffers>>,
    finish: Finish<O>,
}

impl<O: Completion> Drop for Request<O> {
    fn drop(&mut self) {
        if let Some(Started::Pending(p)) = &self.state {
            if !p.is_done() {
                // Nobody will wait on it: the progress ULT completes it (and frees its buffers).
                self.engine.kick();
            }
        }
    }
}

impl<O: Completion> fmt::Debug for Request<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let done = match &self.state {
            Some(Started::Done(..)) | None => true,
            Some(Started::Pending(p)) => p.is_done(),
            Some(Started::Active(_)) => false,
        };
        f.debug_struct("Request").field("done", &done).finish()
    }
}

impl<O: Completion> Request<O> {
    /// Whether the operation has completed (then [`wait`](Request::wait) returns at once). Polls
    /// the rank's outstanding requests once when it has not, so a ULT looping on `test` makes
    /// progress by itself.
    pub fn test(&self) -> bool {
        match &self.state {
            Some(Started::Done(..)) | None => true,
            Some(Started::Pending(p)) => {
                if p.is_done() {
                    return true;
                }
                self.engine.poll();
                p.is_done()
            }
            // Only the blocking operations make active requests, and wait on them at once.
            Some(Started::Active(_)) => false,
        }
    }

    /// Blocks the calling ULT until the operation completes and returns its result: the buffer
    /// sent, or the buffer received with its [`Status`].
    ///
    /// # Errors
    /// What MPI reported for the operation (for a receive: [`Error::Truncated`] when the message
    /// was longer than the buffer, [`Error::TypeMismatch`] when it was not a whole number of
    /// elements).
    pub fn wait(mut self) -> Result<O, Error> {
        let state = self.state.take().expect("a request is waited on once (wait takes it)");
        let (buffers, outcome) = match state {
            Started::Done(buffers, outcome) => (buffers, outcome),
            Started::Pending(p) => {
                let outcome = p.wait(&self.engine, true);
                // SAFETY: this request owns the operation (it is consumed here) and `wait`
                // returned only once the operation was done.
                let buffers = unsafe { p.take_buffers() };
                (buffers.expect("a request's buffers are taken once, by its wait"), outcome)
            }
            Started::Active(active) => active.wait(),
        };
        (self.finish)(&self.engine, buffers, outcome)
    }
}

/// A handle on the world communicator of this rank, for any ULT of its runtime: made by
/// [`Mpi::world`](crate::Mpi::world), cheap to clone.
///
/// The element types are `mpi`'s [`Equivalence`] types that are `Copy` (numbers, `bool`, arrays
/// and `#[derive(Equivalence)]` structs of them). Every blocking method blocks only the calling
/// ULT; it may also be called from an OS thread outside the runtime, which then blocks.
#[derive(Clone)]
pub struct World {
    engine: Arc<Engine>,
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World").field("rank", &self.rank()).field("size", &self.size()).finish()
    }
}

fn count_of(len: usize) -> Result<c_int, Error> {
    c_int::try_from(len).map_err(|_| Error::TooLong { len })
}

/// `Ok` for `MPI_SUCCESS`, else the error with MPI's text (asked under the MPI lock).
fn check_code(engine: &Engine, code: c_int) -> Result<(), Error> {
    if code == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(engine.lock().call(|| mpi_error(code)))
    }
}

/// How a point-to-point operation of `len` elements is kept if not complete at its start.
fn p2p_mode<T>(len: usize, blocking: bool) -> Mode {
    if blocking {
        Mode::Blocking
    } else if len.saturating_mul(std::mem::size_of::<T>()) <= LAZY_BYTES {
        Mode::Lazy
    } else {
        Mode::Woken
    }
}

fn datatype<T: Equivalence>() -> ffi::MPI_Datatype {
    T::equivalent_datatype().as_raw()
}

impl World {
    pub(crate) fn new(engine: Arc<Engine>) -> World {
        World { engine }
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.engine.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.engine.size
    }

    /// The largest tag MPI accepts (`MPI_TAG_UB`, at least 32767).
    pub fn max_tag(&self) -> i32 {
        self.engine.tag_ub
    }

    /// What the rank's progress engine has done so far.
    pub fn progress_stats(&self) -> ProgressStats {
        self.engine.stats()
    }

    fn check_rank(&self, rank: usize) -> Result<c_int, Error> {
        if rank < self.size() {
            Ok(rank as c_int)
        } else {
            Err(Error::RankOutOfRange { rank, size: self.size() })
        }
    }

    fn source_of(&self, source: Source) -> Result<c_int, Error> {
        match source {
            Source::Rank(r) => self.check_rank(r),
            // SAFETY: reading a link-time constant.
            Source::Any => Ok(unsafe { ffi::RSMPI_ANY_SOURCE }),
        }
    }

    /// Sets how long no MPI operation of this rank may complete, while some are outstanding,
    /// before the progress ULT prints a [`MpiStall`](crate::MpiStall) report naming them and the
    /// ULTs parked on them (default [`DEFAULT_STALL_GRACE`](crate::DEFAULT_STALL_GRACE); `None`:
    /// no report). For the whole rank, whichever `World` handle sets it.
    pub fn set_stall_report(&self, grace: Option<std::time::Duration>) {
        self.engine.set_stall_grace(grace);
    }

    /// The stall reports this rank made so far, and the latest one.
    pub fn last_stall(&self) -> (u64, Option<crate::MpiStall>) {
        self.engine.last_stall()
    }

    fn tag_of(&self, tag: TagMatch) -> Result<c_int, Error> {
        match tag {
            TagMatch::Tag(t) => self.check_tag(t),
            // SAFETY: reading a link-time constant.
            TagMatch::Any => Ok(unsafe { ffi::RSMPI_ANY_TAG }),
        }
    }

    fn check_tag(&self, tag: i32) -> Result<c_int, Error> {
        if (0..=self.engine.tag_ub).contains(&tag) {
            Ok(tag)
        } else {
            Err(Error::TagOutOfRange { tag, max: self.engine.tag_ub })
        }
    }

    /// Starts an operation on `buffers`.
    ///
    /// # Safety
    /// As [`Engine::start`]: `start` starts one operation whose buffers lie in heap memory owned
    /// by `buffers`.
    unsafe fn start<O: Completion>(
        &self,
        buffers: O::Buffers,
        count_type: Option<Datatype>,
        info: OpInfo,
        mode: Mode,
        finish: Finish<O>,
        start: impl FnOnce(&mut O::Buffers, &mut ffi::MPI_Request) -> c_int,
    ) -> Result<Request<O>, Error> {
        // SAFETY: passed on from the caller.
        let state = unsafe { self.engine.start(buffers, count_type, info, mode, start)? };
        Ok(Request { engine: self.engine.clone(), state: Some(state), finish })
    }

    /// Starts sending `data` to rank `dest` with tag `tag`; the request's `wait` gives the buffer
    /// back.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`], [`Error::TagOutOfRange`], [`Error::TooLong`], or what MPI
    /// reports.
    pub fn isend<T>(&self, data: Vec<T>, dest: usize, tag: i32) -> Result<Request<Vec<T>>, Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        self.isend_impl(data, dest, tag, false)
    }

    /// [`isend`](World::isend); `blocking`: the caller waits at once (see `start`).
    fn isend_impl<T>(
        &self,
        data: Vec<T>,
        dest: usize,
        tag: i32,
        blocking: bool,
    ) -> Result<Request<Vec<T>>, Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        let dest = self.check_rank(dest)?;
        let tag = self.check_tag(tag)?;
        let count = count_of(data.len())?;
        let comm = self.engine.comm.0;
        // SAFETY: MPI reads the vector's elements (heap memory it owns); count and datatype
        // describe them.
        unsafe {
            self.start(
                data,
                None,
                OpInfo::p2p("send", dest, tag),
                p2p_mode::<T>(count as usize, blocking),
                finish_send::<T>,
                |data, req| {
                    ffi::MPI_Isend(
                        data.as_ptr().cast::<c_void>(),
                        count,
                        datatype::<T>(),
                        dest,
                        tag,
                        comm,
                        req,
                    )
                },
            )
        }
    }

    /// Sends one value to rank `dest` with tag `tag`, blocking the calling ULT until MPI no
    /// longer needs it.
    ///
    /// # Errors
    /// As [`isend`](World::isend).
    pub fn send<T>(&self, value: &T, dest: usize, tag: i32) -> Result<(), Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        if !Cell::<T>::fits() {
            return self.isend_impl(vec![*value], dest, tag, true)?.wait().map(drop);
        }
        let dest = self.check_rank(dest)?;
        let tag = self.check_tag(tag)?;
        let comm = self.engine.comm.0;
        // SAFETY: MPI reads the cell's value (heap memory the cell owns).
        let request: Request<(SentOne, PhantomData<T>)> = unsafe {
            self.start(
                Cell::new(Some(*value)),
                None,
                OpInfo::p2p("send", dest, tag),
                Mode::Blocking,
                finish_send_one::<T>,
                |cell, req| {
                    ffi::MPI_Isend(
                        cell.as_mut_ptr().cast::<c_void>(),
                        1,
                        datatype::<T>(),
                        dest,
                        tag,
                        comm,
                        req,
                    )
                },
            )?
        };
        request.wait().map(drop)
    }

    /// Sends a slice (copied once) to rank `dest` with tag `tag`, blocking the calling ULT until
    /// the send completes.
    ///
    /// # Errors
    /// As [`isend`](World::isend).
    pub fn send_slice<T>(&self, data: &[T], dest: usize, tag: i32) -> Result<(), Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        self.isend_impl(data.to_vec(), dest, tag, true)?.wait().map(drop)
    }

    /// Starts receiving a message of at most `capacity` elements; the request's `wait` gives the
    /// elements received and their [`Status`].
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`], [`Error::TagOutOfRange`], [`Error::TooLong`], or what MPI
    /// reports; `wait` also gives [`Error::Truncated`] and [`Error::TypeMismatch`].
    pub fn irecv<T>(
        &self,
        capacity: usize,
        source: impl Into<Source>,
        tag: impl Into<TagMatch>,
    ) -> Result<Request<(Vec<T>, Status)>, Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        self.irecv_impl(Vec::with_capacity(capacity), source.into(), tag.into(), false)
    }

    /// [`irecv`](World::irecv) into `buf`'s allocation: its contents are dropped and the message
    /// may fill its whole capacity. The request's `wait` gives the vector back holding the
    /// elements received, so that a loop receiving again and again reuses one allocation.
    ///
    /// ```no_run
    /// # fn f(world: elite_mpi::World) -> Result<(), elite_mpi::Error> {
    /// let mut buf: Vec<f64> = Vec::with_capacity(64);
    /// for _ in 0..10 {
    ///     let (got, status) = world.irecv_into(buf, 1, 7)?.wait()?;
    ///     assert_eq!(got.len(), status.count());
    ///     buf = got;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`irecv`](World::irecv), with `buf.capacity()` as the capacity.
    pub fn irecv_into<T>(
        &self,
        mut buf: Vec<T>,
        source: impl Into<Source>,
        tag: impl Into<TagMatch>,
    ) -> Result<Request<(Vec<T>, Status)>, Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        buf.clear();
        self.irecv_impl(buf, source.into(), tag.into(), false)
    }

    /// [`irecv`](World::irecv) into `buf` (empty; its capacity is the message's limit);
    /// `blocking`: the caller waits at once (see `start`).
    fn irecv_impl<T>(
        &self,
        buf: Vec<T>,
        source: Source,
        tag: TagMatch,
        blocking: bool,
    ) -> Result<Request<(Vec<T>, Status)>, Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        debug_assert!(buf.is_empty());
        let source = self.source_of(source)?;
        let tag = self.tag_of(tag)?;
        let capacity = buf.capacity();
        let count = count_of(capacity)?;
        let comm = self.engine.comm.0;
        // SAFETY: MPI writes at most `capacity` elements into the vector's allocation (heap
        // memory it owns).
        unsafe {
            self.start(
                buf,
                Some(Datatype(datatype::<T>())),
                OpInfo::p2p("recv", source, tag),
                p2p_mode::<T>(capacity, blocking),
                finish_recv::<T>,
                |buf, req| {
                    ffi::MPI_Irecv(
                        buf.as_mut_ptr().cast::<c_void>(),
                        count,
                        datatype::<T>(),
                        source,
                        tag,
                        comm,
                        req,
                    )
                },
            )
        }
    }

    /// Receives one value, blocking the calling ULT until it arrives.
    ///
    /// # Errors
    /// As [`irecv`](World::irecv); [`Error::Truncated`] for a message of more than one element,
    /// [`Error::TypeMismatch`] for an empty one.
    pub fn recv<T>(&self, source: impl Into<Source>, tag: impl Into<TagMatch>) -> Result<(T, Status), Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        if !Cell::<T>::fits() {
            let (v, status) =
                self.irecv_impl::<T>(Vec::with_capacity(1), source.into(), tag.into(), true)?.wait()?;
            return match v.first() {
                Some(&x) => Ok((x, status)),
                None => Err(Error::TypeMismatch { expected: std::any::type_name::<T>() }),
            };
        }
        let source = self.source_of(source.into())?;
        let tag = self.tag_of(tag.into())?;
        let comm = self.engine.comm.0;
        // SAFETY: MPI writes at most one T into the cell (heap memory the cell owns).
        let request: Request<One<T>> = unsafe {
            self.start(
                Cell::new(None),
                Some(Datatype(datatype::<T>())),
                OpInfo::p2p("recv", source, tag),
                Mode::Blocking,
                finish_recv_one::<T>,
                |cell, req| {
                    ffi::MPI_Irecv(
                        cell.as_mut_ptr().cast::<c_void>(),
                        1,
                        datatype::<T>(),
                        source,
                        tag,
                        comm,
                        req,
                    )
                },
            )?
        };
        let One(value, status) = request.wait()?;
        Ok((value, status))
    }

    /// Receives a message into `buf` (its first [`Status::count`] elements), blocking the calling
    /// ULT until it arrives.
    ///
    /// # Errors
    /// As [`irecv`](World::irecv) with `buf.len()` as the capacity.
    pub fn recv_into<T>(
        &self,
        buf: &mut [T],
        source: impl Into<Source>,
        tag: impl Into<TagMatch>,
    ) -> Result<Status, Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        let (v, status) =
            self.irecv_impl::<T>(Vec::with_capacity(buf.len()), source.into(), tag.into(), true)?.wait()?;
        buf[..v.len()].copy_from_slice(&v);
        Ok(status)
    }

    /// Starts a barrier (`MPI_Ibarrier`).
    ///
    /// # Errors
    /// What MPI reports.
    pub fn ibarrier(&self) -> Result<Request<()>, Error> {
        self.ibarrier_impl(false)
    }

    /// [`ibarrier`](World::ibarrier); `blocking`: the caller waits at once (see `start`).
    fn ibarrier_impl(&self, blocking: bool) -> Result<Request<()>, Error> {
        let comm = self.engine.comm.0;
        // SAFETY: a barrier has no buffers.
        unsafe {
            self.start(
                (),
                None,
                OpInfo::collective("barrier"),
                if blocking { Mode::Blocking } else { Mode::Woken },
                finish_unit,
                |_, req| ffi::MPI_Ibarrier(comm, req),
            )
        }
    }

    /// Blocks the calling ULT until every rank has entered the barrier.
    ///
    /// # Errors
    /// What MPI reports.
    pub fn barrier(&self) -> Result<(), Error> {
        self.ibarrier_impl(true)?.wait()
    }

    /// Broadcasts `buf` from rank `root` to every rank: on `root` it is sent, elsewhere it is
    /// overwritten. Every rank must pass the same length. Blocks the calling ULT.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`] for `root`, [`Error::TooLong`], or what MPI reports.
    pub fn broadcast<T>(&self, buf: &mut [T], root: usize) -> Result<(), Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        let root = self.check_rank(root)?;
        let count = count_of(buf.len())?;
        let comm = self.engine.comm.0;
        // SAFETY: MPI reads or writes the vector's `count` elements (heap memory it owns).
        let request = unsafe {
            self.start(
                buf.to_vec(),
                None,
                OpInfo { op: "broadcast", peer: Some(root), tag: None },
                Mode::Blocking,
                finish_send::<T>,
                |data, req| {
                    ffi::MPI_Ibcast(
                        data.as_mut_ptr().cast::<c_void>(),
                        count,
                        datatype::<T>(),
                        root,
                        comm,
                        req,
                    )
                },
            )?
        };
        let out = request.wait()?;
        buf.copy_from_slice(&out);
        Ok(())
    }

    /// Reduces `send` element-wise over every rank with `op` into `recv` on every rank
    /// (`MPI_Iallreduce`). Blocks the calling ULT.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when `send` and `recv` differ in length, [`Error::TooLong`], or
    /// what MPI reports (an operation that does not apply to the type, for one).
    pub fn all_reduce<T>(&self, send: &[T], recv: &mut [T], op: SystemOperation) -> Result<(), Error>
    where
        T: Equivalence + Copy + Send + 'static,
    {
        if send.len() != recv.len() {
            return Err(Error::LengthMismatch { send: send.len(), recv: recv.len() });
        }
        let count = count_of(send.len())?;
        let comm = self.engine.comm.0;
        let op = op.as_raw();
        let bufs = (send.to_vec(), recv.to_vec());
        // SAFETY: MPI reads the first vector's and writes the second's `count` elements (heap
        // memory they own).
        let request = unsafe {
            self.start(
                bufs,
                None,
                OpInfo::collective("all_reduce"),
                Mode::Blocking,
                finish_reduce::<T>,
                |(s, r), req| {
                    ffi::MPI_Iallreduce(
                        s.as_ptr().cast::<c_void>(),
                        r.as_mut_ptr().cast::<c_void>(),
                        count,
                        datatype::<T>(),
                        op,
                        comm,
                        req,
                    )
                },
            )?
        };
        let Reduced(out) = request.wait()?;
        recv.copy_from_slice(&out);
        Ok(())
    }
}

fn finish_unit(engine: &Engine, _: (), outcome: Outcome) -> Result<(), Error> {
    check_code(engine, outcome.code)
}

fn finish_send<T: Send + 'static>(engine: &Engine, data: Vec<T>, outcome: Outcome) -> Result<Vec<T>, Error> {
    check_code(engine, outcome.code)?;
    Ok(data)
}

fn finish_reduce<T: Send + 'static>(
    engine: &Engine,
    (_, recv): (Vec<T>, Vec<T>),
    outcome: Outcome,
) -> Result<Reduced<T>, Error> {
    check_code(engine, outcome.code)?;
    Ok(Reduced(recv))
}

fn finish_send_one<T: Send + 'static>(
    engine: &Engine,
    _: Cell<T>,
    outcome: Outcome,
) -> Result<(SentOne, PhantomData<T>), Error> {
    check_code(engine, outcome.code)?;
    Ok((SentOne, PhantomData))
}

fn finish_recv_one<T: Copy + Send + 'static>(
    engine: &Engine,
    cell: Cell<T>,
    outcome: Outcome,
) -> Result<One<T>, Error> {
    if let Err(e) = check_code(engine, outcome.code) {
        return Err(match e {
            Error::Truncated { .. } => Error::Truncated { capacity: 1 },
            e => e,
        });
    }
    // One whole element, no more and no fewer (the count was asked with the completion).
    if outcome.count != 1 {
        return Err(Error::TypeMismatch { expected: std::any::type_name::<T>() });
    }
    // SAFETY: MPI wrote one whole element of T's datatype into the cell.
    let value = unsafe { cell.read() };
    let status = Status { source: outcome.status.MPI_SOURCE as usize, tag: outcome.status.MPI_TAG, count: 1 };
    Ok(One(value, status))
}

fn finish_recv<T: Equivalence + Send + 'static>(
    engine: &Engine,
    mut buf: Vec<T>,
    outcome: Outcome,
) -> Result<(Vec<T>, Status), Error> {
    let capacity = buf.capacity();
    if let Err(e) = check_code(engine, outcome.code) {
        return Err(match e {
            Error::Truncated { .. } => Error::Truncated { capacity },
            e => e,
        });
    }
    // The count was asked with the completion (see `Outcome::count`).
    let count = outcome.count;
    // SAFETY: reading a link-time constant.
    let undefined = unsafe { ffi::RSMPI_UNDEFINED };
    if count == undefined || count < 0 || count as usize > capacity {
        return Err(Error::TypeMismatch { expected: std::any::type_name::<T>() });
    }
    // SAFETY: MPI wrote `count` whole elements of T's datatype at the start of the allocation
    // (T is Copy, so there is nothing to drop); `count <= capacity`.
    unsafe { buf.set_len(count as usize) };
    let status = Status {
        source: outcome.status.MPI_SOURCE as usize,
        tag: outcome.status.MPI_TAG,
        count: count as usize,
    };
    Ok((buf, status))
}
