//! # elite-mpi: ULTs that communicate over MPI
//!
//! One elite runtime per MPI rank. [`init`] initialises MPI, builds the rank's runtime and starts
//! its *progress ULT*; the [`World`] handle it gives then sends, receives and reduces across ranks
//! from any ULT, blocking only the calling ULT: a ULT waiting on MPI parks like a ULT waiting on
//! an `elite_rt::sync` primitive, and its processor runs the other ready ULTs meanwhile.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mpi = elite_mpi::init(elite_rt::Runtime::builder().processors(2))?;
//! let world = mpi.world();
//! let sum = mpi.block_on(move || {
//!     let (rank, size) = (world.rank(), world.size());
//!     // A ring: each rank sends its number to the next while a second ULT computes beside it.
//!     let sender = {
//!         let world = world.clone();
//!         elite_rt::spawn(move || world.send(&(rank as u64), (rank + 1) % size, 7))
//!     };
//!     let (left, _status) = world.recv::<u64>((rank + size - 1) % size, 7).unwrap();
//!     sender.join().unwrap().unwrap();
//!     let mut total = [0u64];
//!     world.all_reduce(&[left], &mut total, elite_mpi::Op::sum()).unwrap();
//!     total[0]
//! });
//! assert_eq!(sum, (0..mpi.size() as u64).sum::<u64>());
//! # Ok(())
//! # }
//! ```
//!
//! ## The progress rule
//!
//! MPI completes non-blocking operations only while some thread calls into it. Here:
//!
//! - every operation is non-blocking underneath (`MPI_Isend`, `MPI_Irecv`, `MPI_Ibarrier`,
//!   `MPI_Ibcast`, `MPI_Iallreduce`), tested once as it starts, under the same hold of the MPI
//!   lock; one complete at once (a small send, a receive whose message had arrived) is finished
//!   there, with no allocation besides its buffers (the user's `Vec` for `isend`/`irecv`, a copy
//!   for the slice operations and collectives, a pooled heap cell for `send`/`recv` of one value)
//!   and nothing left for the progress ULT;
//! - a blocking operation (`send`, `recv`, `barrier`, `broadcast`, `all_reduce`) not complete at
//!   its start stays with its ULT, which tests that one request itself (`MPI_Test`) for up to
//!   2 µs (below) and only then puts it on the rank's table of outstanding requests and parks;
//! - an `isend`/`irecv` of at most 4 KiB not complete at its start goes on the table without
//!   waking the progress ULT: its waiter (or `test`) polls, and wakes the progress ULT when it
//!   parks, as does dropping the request unfinished. Such messages go eagerly (the sender's MPI
//!   copies them out at once, the receiver's copies them in at its next call into MPI), so no peer
//!   waits on this rank's progress ULT for them. A larger one, and an `ibarrier`, wakes the progress
//!   ULT at once, so that it moves on while its ULT computes;
//! - the progress ULT polls the whole table with one `MPI_Testsome` per turn, and yields after
//!   each poll: it polls once per turn it gets among its processor's ready ULTs, so with `k` other
//!   ULTs ready there, once every `k` of their turns; with none ready, in a tight loop. While the
//!   table is empty, or holds only small operations whose waiters have not parked, it is parked
//!   and costs nothing;
//! - a ULT that waits polls itself for up to 2 µs before it parks (two-phase waiting, as elite's
//!   locks do: parking, and being woken by the progress ULT, costs a few switches and semaphore
//!   operations, about as long), as long as such spins keep ending with the operation complete;
//!   once they stop paying (a peer busy computing answers late), only one wait in 16 spins, the
//!   others poll once; [`Request::test`] polls once;
//! - after 64 polls in a row that completed nothing, the progress ULT also yields its OS thread
//!   (`sched_yield`, as MPICH's blocking calls do after `MPIR_CVAR_POLLS_BEFORE_YIELD` polls), so
//!   that a peer rank waiting for a CPU on a busy machine gets one.
//!
//! So no processor ever sits inside MPI while ULTs are ready, and the cost of progress is one
//! `MPI_Testsome` and one ULT switch per turn of the progress ULT while requests are outstanding.
//! The latency a message sees is at most one turn of the ULTs ready on the progress ULT's
//! processor: a ULT that computes for a long time without a switch delays every message of its
//! rank that long (ULTs are not preempted; see elite-rt's `caveats`).
//!
//! A processor with nothing to run does not park while requests are outstanding (it runs the
//! progress ULT): a rank waiting on messages spins one CPU, as MPI's own blocking calls do.
//!
//! Ranks sharing a machine would all pin their processor `i` to CPU `i`; [`init`] therefore
//! turns pinning off (`RuntimeBuilder::pin_threads(false)`) when several ranks of the world run on
//! this machine (`MPI_COMM_TYPE_SHARED`), and leaves the builder's choice alone otherwise.
//!
//! ## MPI's threading level
//!
//! The processors are several OS threads, and a processor may even change OS thread (elite-rt's
//! blocking-call hand-off), so MPI must allow calls from any thread. Every MPI call of this crate
//! is made under one lock and none of them blocks, so `MPI_THREAD_SERIALIZED` is enough: [`init`]
//! asks for it and refuses to start ([`InitError::Threading`]) when MPI grants less. Code that calls
//! MPI directly (through the re-exported [`mpi`] crate) while ULTs communicate breaks that rule.
//!
//! ## Errors and faults
//!
//! The world communicator's error handler is `MPI_ERRORS_RETURN`: a rank or tag out of range, a
//! message longer than the receive buffer, a message that is not a whole number of the receiver's
//! elements come back as an [`Error`], not as undefined behaviour or an abort. A ULT that panics
//! ends the whole job (`MPI_Abort`) once its report is printed, so that the other ranks do not
//! wait forever on a message it will never send ([`set_abort_on_panic`] turns that off).
//!
//! ## Stalls and deadlocks across ranks
//!
//! A ULT waiting on MPI parks on a semaphore of its operation, and while operations are
//! outstanding the progress ULT keeps polling, so elite-rt's own deadlock report neither fires
//! nor could say what such a ULT waits for. The rank reports instead: when no MPI operation of
//! the rank has completed for a grace period (default [`DEFAULT_STALL_GRACE`], set with
//! [`World::set_stall_report`]) while some are outstanding, the progress ULT prints an
//! [`MpiStall`] to stderr, once per stall: every outstanding operation (`send`, `recv`,
//! `barrier`, `broadcast`, `all_reduce`), its peer rank and tag, and the ULT parked on it, by id
//! and name. [`World::last_stall`] returns it. A stall is not proof of a deadlock (a peer may
//! compute for longer than the grace period), so the job goes on.
//!
//! ```text
//! elite-mpi: rank 0: no MPI operation completed for 0.101 s; 1 outstanding:
//!   ULT 9 'stalled-recv' waits on MPI recv from rank 1, tag 61
//! ```
//!
//! ## Loopback only on shared machines
//!
//! MPICH over UCX opens listeners on the machine's network interfaces by default. To keep a run on
//! shared memory and loopback, set
//! `UCX_TLS=self,sm UCX_NET_DEVICES=lo HWLOC_COMPONENTS=-gl HYDRA_IFACE=lo` (the crate's tests and
//! `.ci/run` do), or run inside `unshare -n`.

#![warn(missing_docs)]
// Under loom only the handshake and its models are built (see `handshake`).
#![cfg_attr(loom, allow(dead_code))]

#[cfg(not(loom))]
mod cell;
#[cfg(not(loom))]
mod engine;
// Built under `cfg(loom)` too, alone (with its models): see its docs.
mod handshake;
#[cfg(not(loom))]
mod ops;

#[cfg(not(loom))]
pub use engine::{MpiStall, MpiWait, PeerRank, ProgressStats, DEFAULT_STALL_GRACE};
#[cfg(not(loom))]
pub use mpi;
#[cfg(not(loom))]
pub use mpi::collective::SystemOperation as Op;
#[cfg(not(loom))]
pub use mpi::datatype::Equivalence;
#[cfg(not(loom))]
pub use mpi::Threading;
#[cfg(not(loom))]
pub use ops::{Request, Source, Status, TagMatch, World};

#[cfg(not(loom))]
use engine::{Comm, Engine};
#[cfg(not(loom))]
use mpi::ffi;
#[cfg(not(loom))]
use mpi::traits::AsRaw;
#[cfg(not(loom))]
use std::fmt;
#[cfg(not(loom))]
use std::os::raw::{c_char, c_int};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(not(loom))]
use std::sync::{Arc, Once};

/// Why [`init`] refused to start.
#[derive(Debug)]
#[non_exhaustive]
#[cfg(not(loom))]
pub enum InitError {
    /// MPI was already initialised in this process (one [`Mpi`] per process).
    AlreadyInitialized,
    /// MPI granted a lower threading level than elite-mpi needs.
    Threading {
        /// The level needed (`Serialized`).
        needed: Threading,
        /// The level MPI granted.
        granted: Threading,
    },
    /// The runtime did not build.
    Build(elite_rt::BuildError),
    /// The runtime built but the progress ULT could not be spawned.
    Spawn(elite_rt::SpawnError),
}

#[cfg(not(loom))]
impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::AlreadyInitialized => {
                write!(
                    f,
                    "MPI is already initialised in this process (elite_mpi::init runs once per process)"
                )
            }
            InitError::Threading { needed, granted } => write!(
                f,
                "MPI granted the threading level {granted:?}, but elite-mpi needs at least {needed:?} \
                 (several processors call MPI, one at a time, from different OS threads)"
            ),
            InitError::Build(e) => write!(f, "the rank's runtime did not build: {e}"),
            InitError::Spawn(e) => write!(f, "the progress ULT could not be spawned: {e}"),
        }
    }
}

#[cfg(not(loom))]
impl std::error::Error for InitError {}

/// What went wrong in a communication.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg(not(loom))]
pub enum Error {
    /// A rank not in the communicator.
    RankOutOfRange {
        /// The rank given.
        rank: usize,
        /// The communicator's size (ranks are `0..size`).
        size: usize,
    },
    /// A tag outside `0..=max` (MPI's `MPI_TAG_UB`).
    TagOutOfRange {
        /// The tag given.
        tag: i32,
        /// The largest tag MPI accepts.
        max: i32,
    },
    /// The message was longer than the receive buffer (`MPI_ERR_TRUNCATE`).
    Truncated {
        /// The buffer's length, in elements.
        capacity: usize,
    },
    /// The message's length in bytes is not a whole number of the receiver's elements: it was
    /// sent as another type.
    TypeMismatch {
        /// The receiver's element type.
        expected: &'static str,
    },
    /// A buffer longer than MPI's counts (`i32::MAX` elements).
    TooLong {
        /// Its length.
        len: usize,
    },
    /// Two buffers that must have the same length do not.
    LengthMismatch {
        /// The length of the buffer sent.
        send: usize,
        /// The length of the buffer received into.
        recv: usize,
    },
    /// An error MPI reported.
    Mpi {
        /// MPI's error code.
        code: i32,
        /// `MPI_Error_string`'s text.
        message: String,
    },
}

#[cfg(not(loom))]
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::RankOutOfRange { rank, size } => {
                write!(f, "rank {rank} is out of range: the communicator has ranks 0..{size}")
            }
            Error::TagOutOfRange { tag, max } => {
                write!(f, "tag {tag} is out of range: MPI accepts tags 0..={max}")
            }
            Error::Truncated { capacity } => {
                write!(f, "the message is longer than the receive buffer of {capacity} elements")
            }
            Error::TypeMismatch { expected } => {
                write!(f, "the message is not a whole number of {expected} elements (sent as another type?)")
            }
            Error::TooLong { len } => {
                write!(f, "a buffer of {len} elements is longer than MPI can count (i32::MAX)")
            }
            Error::LengthMismatch { send, recv } => write!(
                f,
                "the send buffer has {send} elements but the receive buffer {recv}; they must be equal"
            ),
            Error::Mpi { code, message } => write!(f, "MPI error {code}: {message}"),
        }
    }
}

#[cfg(not(loom))]
impl std::error::Error for Error {}

/// The error for MPI's code `code`, with MPI's own text. Called under the MPI lock.
#[cfg(not(loom))]
pub(crate) fn mpi_error(code: c_int) -> Error {
    let mut class: c_int = code;
    // SAFETY: MPI_Error_class reads a code and writes one int.
    unsafe { ffi::MPI_Error_class(code, &mut class) };
    if class == ffi::MPI_ERR_TRUNCATE as c_int {
        // The caller knows the capacity and replaces this.
        return Error::Truncated { capacity: 0 };
    }
    let mut buf = vec![0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer has MPI_MAX_ERROR_STRING + 1 chars, as MPI_Error_string requires.
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr(), &mut len) };
    let message = if rc == ffi::MPI_SUCCESS as c_int {
        let bytes: Vec<u8> = buf[..len.max(0) as usize].iter().map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    } else {
        "(no text)".to_string()
    };
    Error::Mpi { code, message }
}

#[cfg(not(loom))]
static ABORT_ON_PANIC: AtomicBool = AtomicBool::new(true);

/// Whether a panic in a ULT of this rank ends the whole job with `MPI_Abort` (the default:
/// `true`). With `false`, a panic is the runtime's business as usual (a joiner gets `Err`), and
/// the other ranks may wait forever on a message the panicking ULT was to send.
#[cfg(not(loom))]
pub fn set_abort_on_panic(abort: bool) {
    ABORT_ON_PANIC.store(abort, Ordering::Relaxed);
}

#[cfg(not(loom))]
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            if ABORT_ON_PANIC.load(Ordering::Relaxed) && elite_rt::try_current().is_some() {
                let abort = || {
                    let mut rank: c_int = -1;
                    // SAFETY: MPI is initialised while a runtime of an `Mpi` runs ULTs; the
                    // calls read the world's rank and end the job. No lock: the job ends
                    // whatever else runs.
                    unsafe {
                        ffi::MPI_Comm_rank(ffi::RSMPI_COMM_WORLD, &mut rank);
                        eprintln!("elite-mpi: a ULT of rank {rank} panicked; ending the job (MPI_Abort)");
                        // The launcher forwards output through its proxies and stops forwarding
                        // once the abort kills them: the notice, last, was lost in 2 of 6 runs
                        // of tests/abort.rs without this pause.
                        std::thread::sleep(std::time::Duration::from_millis(200));
                        ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 1);
                    }
                };
                // On a stack of its own, as every MPI call (see the engine's notes).
                match corosensei::stack::DefaultStack::new(1 << 20) {
                    Ok(stack) => corosensei::on_stack(stack, abort),
                    Err(_) => abort(),
                }
            }
        }));
    });
}

/// One MPI rank with its elite runtime: made by [`init`]; dropping it stops the progress ULT,
/// shuts the runtime down and finalises MPI.
#[cfg(not(loom))]
pub struct Mpi {
    runtime: Option<elite_rt::Runtime>,
    progress: Option<elite_rt::JoinHandle<()>>,
    engine: Arc<Engine>,
    threading: Threading,
    universe: Option<mpi::environment::Universe>,
}

/// Initialises MPI (threading level `Serialized` at least), builds this rank's runtime from
/// `builder` and starts its progress ULT.
///
/// # Errors
/// [`InitError::AlreadyInitialized`] when MPI was initialised before in this process,
/// [`InitError::Threading`] when MPI grants less than `Serialized` (MPI is finalised again),
/// [`InitError::Build`] when the builder's settings are refused.
#[cfg(not(loom))]
pub fn init(builder: elite_rt::RuntimeBuilder) -> Result<Mpi, InitError> {
    let (universe, granted) =
        mpi::initialize_with_threading(Threading::Serialized).ok_or(InitError::AlreadyInitialized)?;
    if matches!(granted, Threading::Single | Threading::Funneled) {
        drop(universe);
        return Err(InitError::Threading { needed: Threading::Serialized, granted });
    }
    let world = universe.world();
    let comm = world.as_raw();
    let mut rank: c_int = 0;
    let mut size: c_int = 0;
    let mut tag_ub: c_int = 32767;
    // SAFETY: MPI is initialised; these calls read the world's shape and set its error handler;
    // MPI_TAG_UB's value is a pointer to an int that MPI owns.
    unsafe {
        ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN);
        ffi::MPI_Comm_rank(comm, &mut rank);
        ffi::MPI_Comm_size(comm, &mut size);
        let mut value: *mut c_int = std::ptr::null_mut();
        let mut flag: c_int = 0;
        ffi::MPI_Comm_get_attr(
            comm,
            ffi::MPI_TAG_UB as c_int,
            (&mut value as *mut *mut c_int).cast(),
            &mut flag,
        );
        if flag != 0 && !value.is_null() {
            tag_ub = *value;
        }
    }
    let local_ranks = ranks_on_this_machine(comm);
    // Every rank's runtime would pin its processor i to the same CPU i: ranks sharing a machine
    // would time-share the first CPUs while the others idle (measured: two ranks' processors on
    // one CPU took 8 ms per round trip, the length of a time slice).
    let builder = if local_ranks > 1 { builder.pin_threads(false) } else { builder };
    let runtime = builder.build().map_err(InitError::Build)?;
    let engine = Arc::new(Engine::new(Comm(comm), rank as usize, size as usize, tag_ub));
    install_panic_hook();
    let progress = {
        let engine = engine.clone();
        elite_rt::Builder::new()
            .name("elite-mpi progress".to_string())
            .spawn_on(&runtime, move || engine::progress_loop(engine))
            .map_err(InitError::Spawn)?
    };
    Ok(Mpi {
        runtime: Some(runtime),
        progress: Some(progress),
        engine,
        threading: granted,
        universe: Some(universe),
    })
}

/// How many ranks of the world run on this machine (`MPI_COMM_TYPE_SHARED`).
#[cfg(not(loom))]
fn ranks_on_this_machine(comm: ffi::MPI_Comm) -> usize {
    let mut local: ffi::MPI_Comm = comm;
    let mut n: c_int = 1;
    // SAFETY: MPI is initialised; the split makes a communicator of the ranks sharing memory
    // with this one, read and freed at once.
    unsafe {
        let rc =
            ffi::MPI_Comm_split_type(comm, ffi::RSMPI_COMM_TYPE_SHARED, 0, ffi::RSMPI_INFO_NULL, &mut local);
        if rc == ffi::MPI_SUCCESS as c_int {
            ffi::MPI_Comm_size(local, &mut n);
            ffi::MPI_Comm_free(&mut local);
        }
    }
    n.max(1) as usize
}

#[cfg(not(loom))]
impl Mpi {
    /// This process's rank in the world communicator.
    pub fn rank(&self) -> usize {
        self.engine.rank
    }

    /// The number of ranks in the world communicator.
    pub fn size(&self) -> usize {
        self.engine.size
    }

    /// The threading level MPI granted.
    pub fn threading(&self) -> Threading {
        self.threading
    }

    /// The rank's runtime.
    pub fn runtime(&self) -> &elite_rt::Runtime {
        self.runtime.as_ref().expect("the runtime lives as long as the Mpi")
    }

    /// MPI's universe (for what this crate does not wrap; see the threading rule in the crate
    /// docs before calling MPI directly while ULTs communicate).
    pub fn universe(&self) -> &mpi::environment::Universe {
        self.universe.as_ref().expect("the universe lives as long as the Mpi")
    }

    /// A handle on the world communicator, for ULTs (cheap to clone, `Send`).
    pub fn world(&self) -> World {
        World::new(self.engine.clone())
    }

    /// Runs `f` as the root ULT of the rank's runtime and returns its value
    /// ([`elite_rt::Runtime::block_on`]).
    pub fn block_on<F, R>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.runtime().block_on(f)
    }
}

#[cfg(not(loom))]
impl Drop for Mpi {
    fn drop(&mut self) {
        self.engine.stop();
        if let Some(progress) = self.progress.take() {
            let _ = progress.join();
        }
        drop(self.runtime.take());
        let left = self.engine.abandon_outstanding();
        if left > 0 {
            eprintln!(
                "elite-mpi: rank {}: {left} operation(s) still outstanding at shutdown were cancelled",
                self.engine.rank
            );
        }
        drop(self.universe.take());
    }
}
