//! Deadlock reports: when every ULT is blocked and nothing can wake one, say so, naming each
//! blocked ULT and what it waits on, instead of hanging.
//!
//! ```
//! use elite_rt::deadlock::{OnDeadlock, WaitKind};
//! use elite_rt::sync::mpsc;
//! use std::time::Duration;
//!
//! let rt = elite_rt::Runtime::builder()
//!     .processors(2)
//!     .deadlock_grace(Duration::from_millis(50))
//!     .build()?;
//! // The receiver waits for a value that the only sender, blocked itself, will never send.
//! let err = rt
//!     .try_block_on(|| {
//!         let (tx, rx) = mpsc::channel::<u32>();
//!         let (_keep, never) = mpsc::channel::<()>();
//!         let sender = elite_rt::Builder::new()
//!             .name("sender".into())
//!             .spawn(move || {
//!                 let _ = never.recv(); // waits for ever: `_keep` stays alive in the root
//!                 tx.send(1).unwrap();
//!             })
//!             .unwrap();
//!         let got = rx.recv();
//!         drop(sender);
//!         got
//!     })
//!     .unwrap_err();
//! let sender = err.blocked().iter().find(|u| u.name() == Some("sender")).unwrap();
//! assert_eq!(sender.waits_on(), WaitKind::ChannelRecv);
//! assert!(err.to_string().contains("ULT"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # When the report fires
//!
//! The thread that waits in [`Runtime::block_on`](crate::Runtime::block_on) (or
//! [`Runtime::try_block_on`](crate::Runtime::try_block_on)) for the root ULT watches the runtime
//! while it waits: it wakes every quarter of the grace period
//! ([`RuntimeBuilder::deadlock_grace`](crate::RuntimeBuilder::deadlock_grace), default one second)
//! and takes a snapshot. The runtime is *quiet* in a snapshot when all of this holds:
//!
//! 1. every processor of the runtime is parked, and parked without a deadline: no ULT sleeps
//!    and no timed wait is pending (a processor parks with the deadline of its earliest timer);
//! 2. no ULT is ready: every start-queue (own, node, global), runqueue and wake-up stack is
//!    empty;
//! 3. no thread outside the processors is inside a call that can make a ULT ready: waking a
//!    blocked ULT (a notify, send, unlock or join completion from an OS thread or from a ULT of
//!    another runtime), spawning onto the runtime, or a blocking call
//!    (`external_wakers_possible` in the source); a ULT that keeps its OS thread while it unwinds
//!    a panic (see the crate docs, [Panics](crate#panics)) counts as such a call while it runs,
//!    not while it waits without a timeout in an elite primitive or join;
//! 4. no OS thread waits in an elite primitive with a timeout (it will run again by itself);
//! 5. every other runtime in the process is quiet by 1 to 4 too (its ULTs may wake ours), or shut
//!    down.
//!
//! When two snapshots a grace period apart are quiet and identical (no processor of any runtime
//! left its park in between: each park is counted), the watcher freezes the runtime's processors
//! (a processor that leaves its park waits until the report is taken, so no ULT runs meanwhile),
//! checks the snapshot once more, and walks the ULTs: each one that has started and not finished
//! is blocked, and its TCB says on what (the synchronization objects record it when a ULT
//! blocks: the kind of object and the address of its wait queue, which lies inside the object;
//! a join records the ULT it joins; a [`blocking`](crate::blocking) call records itself, so a ULT
//! in a call never shows what it blocked on before; a ULT blocked in the middle of unwinding a
//! panic, on its own OS thread, is marked so: [`BlockedUlt::unwinding`]). Then the configured
//! action runs ([`OnDeadlock`]), or
//! `try_block_on` returns the report as its error.
//!
//! # Why it cannot misfire on a program the runtime can see
//!
//! A parked processor wakes only when someone publishes work for it and notifies it (the idle
//! protocol, `crate::park`, loses no wake-up), when its timer fires, or at shutdown. Conditions
//! 1 and 2 say no processor has work or a timer; a ULT can then become ready only through a
//! wake-up or a spawn by someone who is not a processor of this runtime. Inside the process those
//! are: a processor of another runtime (condition 5 says none runs), an OS thread in a timed wait
//! (condition 4), an OS thread or a blocking call in the middle of such a call (condition 3), or
//! an OS thread that is not inside any elite call now.
//!
//! # The residual risk, and why the default only reports
//!
//! The last kind is invisible: an OS thread that computes, sleeps, or waits in std's or the
//! kernel's primitives while holding a sender, a lock guard or the runtime itself can make a ULT
//! ready whenever it gets there. If it takes longer than the grace period while everything else
//! stands still, the report comes early. So the default action, [`OnDeadlock::Report`], only
//! prints the report (once per stall) and goes on waiting; if a ULT is woken after all, a line
//! says so. [`OnDeadlock::Abort`] and `try_block_on` act on the report: use them where ULTs are
//! woken only by ULTs, timers, blocking calls, and outside threads that act within the grace
//! period. OS threads blocked in elite primitives without a timeout (the thread in `block_on`
//! among them) cannot act until someone wakes them, so they do not hold the report back; the
//! report counts them.

use crate::runtime::Shared;
use crate::slot::current_processor;
use crate::tcb::{Life, TcbRef};
use crate::thread::{thread_of, JoinHandle, Thread, ThreadId};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// What the runtime does when the thread in [`Runtime::block_on`](crate::Runtime::block_on)
/// finds every ULT blocked with nothing able to wake one (see the [module docs](self)).
/// [`Runtime::try_block_on`](crate::Runtime::try_block_on) returns the report as its error
/// instead, whatever this says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnDeadlock {
    /// Print the report to stderr once per stall and go on waiting (the default: a thread
    /// outside the runtime that the runtime cannot see may still wake a ULT).
    #[default]
    Report,
    /// Print the report and abort the process.
    Abort,
    /// Do not watch: `block_on` waits silently.
    Ignore,
}

/// What a blocked ULT waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum WaitKind {
    /// Nothing recorded (a ULT that has not blocked on anything the runtime knows).
    Other = 0,
    /// [`sync::Mutex::lock`](crate::sync::Mutex::lock).
    Mutex,
    /// [`sync::RwLock::read`](crate::sync::RwLock::read).
    RwLockRead,
    /// [`sync::RwLock::write`](crate::sync::RwLock::write).
    RwLockWrite,
    /// A [`sync::Condvar`](crate::sync::Condvar) wait.
    Condvar,
    /// [`sync::Barrier::wait`](crate::sync::Barrier::wait).
    Barrier,
    /// [`sync::Semaphore`](crate::sync::Semaphore)'s acquire.
    Semaphore,
    /// [`sync::WaitGroup::wait`](crate::sync::WaitGroup::wait).
    WaitGroup,
    /// A send on a full channel (`sync::mpsc`, `sync::mpmc`).
    ChannelSend,
    /// A receive on an empty channel.
    ChannelRecv,
    /// [`JoinHandle::join`] of another ULT.
    Join,
    /// A [`blocking`](crate::blocking) call: the ULT waits for its call, which runs on an OS
    /// thread. (Never part of a report: the watcher sees calls in flight as possible wakers.)
    BlockingCall,
    /// A [`sync::Once`](crate::sync::Once) (or a `OnceLock`, `LazyLock`) another thread is
    /// initialising.
    Once,
}

impl WaitKind {
    const ALL: [WaitKind; 13] = [
        WaitKind::Other,
        WaitKind::Mutex,
        WaitKind::RwLockRead,
        WaitKind::RwLockWrite,
        WaitKind::Condvar,
        WaitKind::Barrier,
        WaitKind::Semaphore,
        WaitKind::WaitGroup,
        WaitKind::ChannelSend,
        WaitKind::ChannelRecv,
        WaitKind::Join,
        WaitKind::BlockingCall,
        WaitKind::Once,
    ];

    fn describe(self) -> &'static str {
        match self {
            WaitKind::Other => "something the runtime did not record",
            WaitKind::Mutex => "a Mutex",
            WaitKind::RwLockRead => "an RwLock (to read)",
            WaitKind::RwLockWrite => "an RwLock (to write)",
            WaitKind::Condvar => "a Condvar",
            WaitKind::Barrier => "a Barrier",
            WaitKind::Semaphore => "a Semaphore",
            WaitKind::WaitGroup => "a WaitGroup",
            WaitKind::ChannelSend => "a channel (to send)",
            WaitKind::ChannelRecv => "a channel (to receive)",
            WaitKind::Join => "a join",
            WaitKind::BlockingCall => "its blocking call",
            WaitKind::Once => "a Once (its initialisation, by another thread)",
        }
    }
}

/// Records in `t`'s TCB that it blocks on `kind` at `address` (a wait queue inside the object,
/// or for [`WaitKind::Join`] the joined ULT's TCB): one relaxed store, on the TCB line that the
/// wait itself writes. Read only by the report, while the ULT stays blocked.
#[inline]
pub(crate) fn note_wait(t: TcbRef, kind: WaitKind, address: usize) {
    t.tcb().exec.waits_on.store(address << 8 | kind as usize, Ordering::Relaxed);
}

/// In a TCB's wait record, beside the kind: the ULT waits anchored to its OS thread, in the middle
/// of unwinding a panic (`crate::anchor`).
const ANCHORED: usize = 0x80;

/// [`note_wait`] for a ULT that waits anchored to its OS thread while it unwinds (`crate::anchor`).
#[cold]
pub(crate) fn note_anchored_wait(t: TcbRef, kind: WaitKind, address: usize) {
    t.tcb().exec.waits_on.store(address << 8 | ANCHORED | kind as usize, Ordering::Relaxed);
}

/// One blocked ULT of a [`Deadlock`] report.
#[derive(Clone, Debug)]
pub struct BlockedUlt {
    thread: Thread,
    kind: WaitKind,
    address: usize,
    joins: Option<Thread>,
    unwinding: bool,
}

impl BlockedUlt {
    /// The ULT's id.
    pub fn id(&self) -> ThreadId {
        self.thread.id()
    }

    /// The ULT's name, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.thread.name()
    }

    /// What kind of object it waits on.
    pub fn waits_on(&self) -> WaitKind {
        self.kind
    }

    /// The address of the object's wait queue (inside the object: the same for every ULT waiting
    /// on the same object in the same direction), or 0 for a join or when nothing was recorded.
    pub fn address(&self) -> usize {
        self.address
    }

    /// For a [`WaitKind::Join`]: the id of the ULT it joins.
    pub fn joins(&self) -> Option<ThreadId> {
        self.joins.as_ref().map(Thread::id)
    }

    /// Whether it blocked in the middle of unwinding a panic (in a destructor). Such a ULT waits
    /// on its OS thread, which runs nothing else until its unwinding is over (see the crate docs,
    /// "Panics").
    pub fn unwinding(&self) -> bool {
        self.unwinding
    }
}

impl fmt::Display for BlockedUlt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_ult(f, &self.thread)?;
        match (&self.joins, self.kind) {
            (Some(j), _) => {
                f.write_str(" waits on a join of ")?;
                write_ult(f, j)?;
            }
            (None, WaitKind::Join) => f.write_str(" waits on a join")?,
            (None, WaitKind::Other) => write!(f, " waits on {}", self.kind.describe())?,
            (None, k) => write!(f, " waits on {} (wait queue at {:#x})", k.describe(), self.address)?,
        }
        if self.unwinding {
            f.write_str(", in the middle of unwinding a panic (on an OS thread of its own)")?;
        }
        Ok(())
    }
}

fn write_ult(f: &mut fmt::Formatter<'_>, t: &Thread) -> fmt::Result {
    write!(f, "ULT {}", t.id().as_u64())?;
    match t.name() {
        Some(n) => write!(f, " '{n}'"),
        None => Ok(()),
    }
}

/// Every ULT of a runtime is blocked and nothing the runtime can see can wake one: the report
/// (see the [module docs](self) for exactly when it is made). Its `Display` is the text
/// [`OnDeadlock::Report`] prints.
#[derive(Clone, Debug)]
pub struct Deadlock {
    blocked: Vec<BlockedUlt>,
    quiet_for: Duration,
    os_waiters: usize,
}

impl Deadlock {
    /// The blocked ULTs, oldest id first.
    pub fn blocked(&self) -> &[BlockedUlt] {
        &self.blocked
    }

    /// How long the runtime stood still before the report (at least the grace period).
    pub fn quiet_for(&self) -> Duration {
        self.quiet_for
    }

    /// OS threads that were waiting in elite joins or primitives without a timeout (the thread
    /// in `block_on` among them).
    pub fn os_waiters(&self) -> usize {
        self.os_waiters
    }
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "deadlock: every ULT of the runtime is blocked, and for {:.3} s nothing could wake one \
             (no ready ULT, no timer, no blocking call, no thread outside the runtime inside one of \
             its calls); {} blocked:",
            self.quiet_for.as_secs_f64(),
            self.blocked.len()
        )?;
        for u in &self.blocked {
            writeln!(f, "  {u}")?;
        }
        write!(f, "  ({} OS thread(s) wait in elite joins or primitives too)", self.os_waiters)
    }
}

impl std::error::Error for Deadlock {}

/// The deadlock settings of a runtime.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeadlockConfig {
    pub(crate) on: OnDeadlock,
    pub(crate) grace: Duration,
}

impl Default for DeadlockConfig {
    fn default() -> Self {
        DeadlockConfig { on: OnDeadlock::Report, grace: Duration::from_secs(1) }
    }
}

/// Shortest grace period [`RuntimeBuilder::deadlock_grace`](crate::RuntimeBuilder::deadlock_grace)
/// accepts.
pub const MIN_GRACE: Duration = Duration::from_millis(1);
/// Longest grace period accepted.
pub const MAX_GRACE: Duration = Duration::from_secs(3600);

impl DeadlockConfig {
    pub(crate) fn validate(&self) -> Result<(), crate::BuildError> {
        if (MIN_GRACE..=MAX_GRACE).contains(&self.grace) {
            return Ok(());
        }
        // The value shown is rounded away from the range, so that it is outside it too
        // (3600 s + 1 ns shows 3600001, not the upper bound itself).
        let ms = self.grace.as_millis()
            + u128::from(self.grace > MAX_GRACE && !self.grace.subsec_nanos().is_multiple_of(1_000_000));
        Err(crate::BuildError::OutOfRange {
            field: "deadlock_grace (milliseconds)",
            value: ms.min(usize::MAX as u128) as usize,
            min: MIN_GRACE.as_millis() as usize,
            max: MAX_GRACE.as_millis() as usize,
        })
    }
}

impl crate::RuntimeBuilder {
    /// What [`Runtime::block_on`](crate::Runtime::block_on) does when every ULT is blocked and
    /// nothing can wake one (default [`OnDeadlock::Report`]: print the report, go on waiting).
    /// See [`deadlock`](crate::deadlock) for exactly when that is decided, and its limits.
    pub fn on_deadlock(mut self, on: OnDeadlock) -> Self {
        self.deadlock_mut().on = on;
        self
    }

    /// How long the runtime must stand still, with nothing able to wake a ULT, before the
    /// deadlock report (default 1 s, `1 ms..=1 h`). Longer periods give threads outside the
    /// runtime, which it cannot see, more time to act before the report comes (see
    /// [`deadlock`](crate::deadlock)).
    pub fn deadlock_grace(mut self, grace: Duration) -> Self {
        self.deadlock_mut().grace = grace;
        self
    }
}

/// What the deadlock watcher reads of a runtime besides its queues and park slots; written by
/// its processors and by threads outside it.
pub(crate) struct Watch {
    /// Per processor: whether its current (or last) park has a deadline (a timer).
    timed: Box<[AtomicBool]>,
    /// Threads outside the processors inside a call that can make a ULT ready (see
    /// [`external_wakers_possible`]).
    outside_calls: AtomicUsize,
    /// Set while a report is being taken: processors that leave their park wait.
    frozen: AtomicBool,
    /// Set when the runtime's shutdown finished: nothing of it runs any more.
    finished: AtomicBool,
}

impl Watch {
    pub(crate) fn new(processors: usize) -> Watch {
        Watch {
            timed: (0..processors).map(|_| AtomicBool::new(false)).collect(),
            outside_calls: AtomicUsize::new(0),
            frozen: AtomicBool::new(false),
            finished: AtomicBool::new(false),
        }
    }

    /// A processor is about to park, with a deadline or not. (Published by the park's own
    /// `SeqCst` announcement, which the watcher reads first.)
    #[inline]
    pub(crate) fn note_park(&self, processor: usize, timed: bool) {
        self.timed[processor].store(timed, Ordering::Relaxed);
    }

    /// A processor left its park: while a report is being taken it waits here, running no ULT.
    #[inline]
    pub(crate) fn after_park(&self) {
        while self.frozen.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }

    /// Marks a call from outside the processors that can make a ULT ready, until the guard drops.
    #[inline]
    pub(crate) fn outside_call(&self) -> OutsideCall<'_> {
        self.outside_calls.fetch_add(1, Ordering::SeqCst);
        OutsideCall(&self.outside_calls)
    }

    /// The runtime's shutdown is over.
    pub(crate) fn finish(&self) {
        self.finished.store(true, Ordering::SeqCst);
    }
}

/// A thread outside the processors is inside a call that can make a ULT ready (see
/// [`Watch::outside_call`]).
pub(crate) struct OutsideCall<'a>(&'a AtomicUsize);

impl Drop for OutsideCall<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// OS threads waiting in elite primitives or joins (process-wide): with a timeout, and without.
static OS_TIMED_WAITS: AtomicUsize = AtomicUsize::new(0);
static OS_WAITS: AtomicUsize = AtomicUsize::new(0);

/// An OS thread waits in an elite primitive or join, until the guard drops.
pub(crate) struct OsWait(&'static AtomicUsize);

impl OsWait {
    /// Starts counting a wait, `timed` if it has a deadline.
    #[inline]
    pub(crate) fn enter(timed: bool) -> OsWait {
        let c = if timed { &OS_TIMED_WAITS } else { &OS_WAITS };
        c.fetch_add(1, Ordering::SeqCst);
        OsWait(c)
    }

    /// Runs `wait`, counted as a wait (`timed` if it has a deadline).
    #[inline]
    pub(crate) fn during<R>(timed: bool, wait: impl FnOnce() -> R) -> R {
        let _counted = OsWait::enter(timed);
        wait()
    }
}

impl Drop for OsWait {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Every runtime started in this process, for condition 5 (dead entries are dropped as new ones
/// come).
static RUNTIMES: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// Registers a runtime that starts (see condition 5 of the module docs).
pub(crate) fn register(shared: &Arc<Shared>) {
    let mut all = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|w| w.strong_count() > 0);
    all.push(Arc::downgrade(shared));
}

/// Whether something outside the processors could make a ULT of this runtime ready without a
/// processor of some runtime running first: a thread that is in the middle of waking one of its
/// ULTs or spawning onto it (an OS thread, or a ULT of another runtime: `Shared::wake` and
/// `Shared::spawn_outside` hold an [`OutsideCall`]), or an OS thread that waits in an elite
/// primitive with a timeout (it runs again when the timeout expires).
///
/// A blocking call in flight counts too: its closure runs on an OS thread outside the processors,
/// its ULT becomes ready when it returns, and it may wake any other ULT. The blocking registry
/// counts calls from the moment their ULT leaves its processor until it is made ready again
/// (queued calls included: `blocking::Registry::in_flight`), and this function reads that count.
pub(crate) fn external_wakers_possible(shared: &Shared) -> bool {
    shared.watch.outside_calls.load(Ordering::SeqCst) > 0
        || shared.blocking.in_flight() > 0
        || OS_TIMED_WAITS.load(Ordering::SeqCst) > 0
}

/// The park counts of one quiet runtime, in registry order.
type Snapshot = Vec<(usize, Vec<u64>)>;

/// The processors' park counts of every live runtime, if each is quiet (conditions 1 to 5).
fn quiet_snapshot() -> Option<Snapshot> {
    let all: Vec<Arc<Shared>> = {
        let all = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
        all.iter().filter_map(Weak::upgrade).collect()
    };
    let mut snap = Vec::with_capacity(all.len());
    for s in &all {
        if s.watch.finished.load(Ordering::SeqCst) {
            continue;
        }
        snap.push((Arc::as_ptr(s) as usize, quiet_processors(s)?));
    }
    Some(snap)
}

/// Conditions 1 to 4 for one runtime: its processors' park counts if it is quiet.
fn quiet_processors(s: &Shared) -> Option<Vec<u64>> {
    if s.is_shutting_down() || external_wakers_possible(s) {
        return None;
    }
    let mut parks = Vec::with_capacity(s.processors.len());
    for (i, p) in s.processors.iter().enumerate() {
        // The park state first (`SeqCst`, after the count and the deadline flag were written).
        if !p.park.is_parked() || s.watch.timed[i].load(Ordering::Relaxed) {
            return None;
        }
        if !p.wakeup.is_empty() || !p.start.is_empty() || p.runq.len() > 0 {
            return None;
        }
        parks.push(p.stats.parks.get());
    }
    let queued =
        s.global_start.is_empty() && s.central_runq.len() == 0 && s.nodes.iter().all(|n| n.start.is_empty());
    queued.then_some(parks)
}

/// The watcher of one `block_on`: snapshots, the grace period, the report.
struct Watcher<'a> {
    shared: &'a Arc<Shared>,
    grace: Duration,
    /// The first of a run of identical quiet snapshots, and when it was taken.
    quiet: Option<(Snapshot, Instant)>,
    /// A report was made for the current stall (`Report` prints once per stall).
    reported: bool,
}

impl Watcher<'_> {
    /// One look: a report when the runtime has been quiet, unchanged, for the grace period.
    fn tick(&mut self) -> Option<Deadlock> {
        let Some(snap) = quiet_snapshot() else {
            self.quiet = None;
            self.progress();
            return None;
        };
        match &self.quiet {
            Some((first, since)) if *first == snap => {
                let quiet_for = since.elapsed();
                if self.reported || quiet_for < self.grace {
                    return None;
                }
                let report = self.take_report(&snap, quiet_for)?;
                self.reported = true;
                Some(report)
            }
            _ => {
                self.quiet = Some((snap, Instant::now()));
                None
            }
        }
    }

    /// After a printed report, something moved: say so, once.
    fn progress(&mut self) {
        if self.reported {
            self.reported = false;
            eprintln!("elite-rt: the ULTs reported blocked above made progress: something woke one");
        }
    }

    /// Freezes the processors, checks that the snapshot still holds, and walks the ULTs.
    fn take_report(&self, snap: &Snapshot, quiet_for: Duration) -> Option<Deadlock> {
        let watch = &self.shared.watch;
        watch.frozen.store(true, Ordering::SeqCst);
        // A processor that left its park after this store waits in `after_park`; one that left
        // it before shows here as not parked, or with another park count.
        let report = (quiet_snapshot().as_ref() == Some(snap)).then(|| Deadlock {
            blocked: blocked_ults(self.shared),
            quiet_for,
            os_waiters: OS_WAITS.load(Ordering::SeqCst),
        });
        watch.frozen.store(false, Ordering::SeqCst);
        report
    }
}

/// Every ULT of the runtime that started and has not finished, with what it waits on. Called
/// with the processors frozen and quiet, so no such ULT runs, and its TCB fields stay as its last
/// block left them.
fn blocked_ults(shared: &Shared) -> Vec<BlockedUlt> {
    let mut blocked: Vec<BlockedUlt> = shared
        .tcbs()
        .into_iter()
        .filter(|t| t.tcb().head.life.get() == Life::Started)
        .map(|t| {
            let w = t.tcb().exec.waits_on.load(Ordering::Relaxed);
            let kind = WaitKind::ALL.get(w & 0xff & !ANCHORED).copied().unwrap_or(WaitKind::Other);
            let unwinding = w & ANCHORED != 0;
            let address = w >> 8;
            let joins = (kind == WaitKind::Join)
                .then(|| TcbRef::from_ptr(address as *mut crate::tcb::Tcb))
                .flatten()
                .filter(|j| shared.is_own(*j) && j.tcb().head.life.get() == Life::Started)
                .map(thread_of);
            let address = if kind == WaitKind::Join { 0 } else { address };
            BlockedUlt { thread: thread_of(t), kind, address, joins, unwinding }
        })
        .collect();
    blocked.sort_by_key(|u| u.thread.id());
    blocked
}

/// `block_on`'s wait for its root ULT, watched (see the module docs). With `give_up` the report
/// ends the wait (`try_block_on`): the root is detached and the report returned; otherwise the
/// runtime's [`OnDeadlock`] decides.
pub(crate) fn join_root<T>(
    shared: &Arc<Shared>,
    root: JoinHandle<T>,
    give_up: bool,
) -> Result<std::thread::Result<T>, Deadlock> {
    let config = shared.config.deadlock;
    if current_processor().is_some() || (config.on == OnDeadlock::Ignore && !give_up) {
        // From a ULT (or a processor's loop), the outermost block_on watches.
        return Ok(root.join());
    }
    let mut watcher = Watcher { shared, grace: config.grace, quiet: None, reported: false };
    let mut found = None;
    let period = (config.grace / 4).max(MIN_GRACE);
    let out = root.join_watched(period, || {
        let Some(report) = watcher.tick() else {
            return false;
        };
        if give_up {
            found = Some(report);
            return true;
        }
        match config.on {
            OnDeadlock::Abort => {
                eprintln!(
                    "elite-rt: {report}\nelite-rt: aborting (RuntimeBuilder::on_deadlock(OnDeadlock::Abort))"
                );
                std::process::abort();
            }
            _ => eprintln!(
                "elite-rt: {report}\nelite-rt: block_on goes on waiting; if a thread outside the runtime is \
                 going to wake one of these ULTs, this report came early (see elite_rt::deadlock)"
            ),
        }
        false
    });
    if out.is_some() && !give_up {
        watcher.progress(); // the root finished after all
    }
    match (out, found) {
        (Some(r), _) => Ok(r),
        (None, Some(report)) => Err(report),
        (None, None) => crate::fatal("a watched join gave up without a report"),
    }
}

impl crate::Runtime {
    /// Runs `f` as the root ULT, like [`block_on`](crate::Runtime::block_on), but returns the
    /// [`Deadlock`] report as an error when every ULT is blocked and nothing can wake one
    /// (see [`deadlock`](crate::deadlock) for exactly when, and its limits), whatever
    /// [`RuntimeBuilder::on_deadlock`](crate::RuntimeBuilder::on_deadlock) says. The root ULT
    /// is left blocked then (its handle dropped: a later result is dropped unseen); dropping
    /// the runtime cancels it with the others.
    ///
    /// A panic in `f` is resumed on the caller. `f` must be `'static` because the root may
    /// outlive the call. Called from a ULT, it blocks that ULT and never returns the error (the
    /// outermost `block_on` watches the runtime).
    pub fn try_block_on<F, R>(&self, f: F) -> Result<R, Deadlock>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let h = self.spawn_with(crate::thread::UltSpec::named("root"), f);
        match join_root(self.shared(), h, true)? {
            Ok(r) => Ok(r),
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }
}
