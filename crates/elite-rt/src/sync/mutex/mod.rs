//! [`Mutex`]: a two-phase lock (ELiTE 2.3.2) that blocks ULTs, not processors.
//!
//! # The state word
//!
//! `LOCKED`, `WAITERS`, `HANDOFF` and `BIASED`, with every transition in [`super::lock_word`]
//! (its module docs give the states, the orderings, the bias, and why no wake-up is lost;
//! `loom_models::mutex` checks them). The uncontended paths are one CAS each: `0 -> LOCKED` to
//! lock, `LOCKED -> 0` to unlock; on the processor the word is biased to (the first that took it
//! 64 times in a row through that path; after a revocation only that one again), a load and a
//! plain store each, and no RMW (in `mutex_contended`'s loop at one processor the lock and the
//! unlock took 8 ns of CPU time per turn with the two RMWs, 2.7 ns without:
//! `examples/hot_path_probe mutex`, against its `--no-lock`). Every transition names the
//! caller's processor, looked up again each time (a ULT may have moved since the last one: a
//! holder that moved unlocks as a stranger, revoking the bias). Anything else goes to the slow
//! paths:
//!
//! ```text
//! lock, slow:   spin phase (the spin policy's, exponential backoff): try_lock; stop spinning
//!               early when HANDOFF is set (the new owner may need this processor)
//!               block phase, under the list lock: lock_or_enqueue; free -> own it. Else block:
//!               switch out holding the list lock; after the switch the processor links the node
//!               (at the back; at the front after a lost race) and releases the list (sync::wait)
//!               woken with the lock handed over -> accept_hand_over, own it; woken plain -> again
//! unlock, slow: under the list lock: pop the first waiter;
//!               it lost MAX_LOSSES races already -> hand_over (LOCKED stays set) else release;
//!               notify the waiter (after the list lock is released)
//! ```
//!
//! # Fairness
//!
//! Waiters queue in FIFO order. A woken waiter competes with ULTs that arrive meanwhile (which
//! keeps the lock busy instead of idle while the waiter is scheduled), but it keeps its place at the
//! head of the queue, and after losing [`MAX_LOSSES`] such races the lock is handed to it directly
//! at the next unlock. So a waiter is served after at most the waiters queued before it plus
//! `MAX_LOSSES` newcomers per waiter ahead of it and itself: it cannot starve.
//!
//! # Hold times
//!
//! The lock keeps the hold times (in time-stamp ticks) of its last 8 measured acquisitions. Only
//! acquisitions that waited (those of `lock_contended`) are counted, and one in eight of them is
//! measured; an uncontended lock neither counts nor measures: a time stamp costs more than the
//! lock itself on some machines (7 to 9 ns on the build VMs, two per measured hold, where a lock
//! and an unlock cost about 10 ns): measuring one uncontended acquisition in eight was a tenth of
//! `mutex_contended` at one processor, for an average that only waiters read. Their average
//! drives the adaptive spin policy: above the threshold (half a measured context switch) a waiter
//! blocks at once. After a quiet spell it is that of the last contended one, until new samples
//! replace it.
//!
//! # Gathering
//!
//! A lock taken from two processors with little work between two acquisitions moves its cache
//! line between the cores at nearly every acquisition (a bounce, about 100 ns on the build VMs),
//! and two processors then do less than one: `mutex_contended`'s loop (lock, increment, unlock,
//! yield) took 35-48 ns per operation at 2 processors against 16 at 1. Such a lock gathers its
//! contenders on one processor, in the spirit of ELiTE's synchronization-driven forces (3.3)
//! ([`RuntimeBuilder::gather_locks`](crate::RuntimeBuilder::gather_locks) turns it off):
//!
//! * **Saturation.** `LockWord::lock_fast` reports every bounce: an acquisition through the
//!   unbiased fast path from another processor than the one before (acquisitions after a wait,
//!   by `try_lock` or by hand-over are not looked at, and two processors whose streak tags alias
//!   never bounce). Every [`BOUNCES_PER_SAMPLE`]-th (16) the holder takes a time stamp and
//!   updates a moving average (3/4 old, 1/4 new) of the time between bounces. The lock is
//!   saturated once that falls below [`GATHER_GAP_NS`] (200 ns), and stays so until it rises
//!   above four times that. A sample spanning a quiet spell (more than 16 times the threshold a
//!   bounce) is skipped; a sample that finds the last counted one older than 10 ms starts
//!   over (the average forgotten, not saturated), and so does `saturated()` say no after 10 ms
//!   without a counted sample: saturation must be shown again by dense bounces, not kept alive by
//!   moves or by slow bounces. Measured with
//!   work between two acquisitions (a `black_box` loop of 0 / 200 / 1000 / 3000 iterations, 1024
//!   ULTs, this VM): the bounces came 50, 60, 150 and 370 ns apart, and the first three ran
//!   faster on one processor than on two.
//! * **Home.** The processor the word is biased to, else the one it was first biased to (the only
//!   one it can be biased to again, "The bias" in `sync::lock_word`), else the holder's when
//!   saturation was first seen (kept for the lock's life). A first owner, or such a holder, of
//!   another runtime (a `static` lock used by runtimes in turn) names no processor of the
//!   caller's: no move, for the lock's life.
//! * **The move.** A ULT that enters the contended path of a saturated lock that is biased to
//!   another processor, or held while its home is another processor, switches out and is pushed
//!   on the home's wake-up stack (`processor::gather_to`), then takes the lock there (an
//!   acquisition neither counted nor measured as one that waited): instead of spinning on a line
//!   that moves, or revoking a bias. At most once per `lock` call and per 100 µs per ULT (two
//!   saturated locks with two homes would otherwise move a ULT that takes them in turn at every
//!   call); never an OS thread, a pinned ULT, in a `central` runtime, or to a parked home (the
//!   lock is not busy there, and waking it costs more). The move bypasses the policy's wake
//!   target. The fairness bound below is untouched: a mover is a newcomer at the home, not a
//!   queued waiter (a woken waiter that moves keeps its count of lost races).
//! * **Thieves.** A processor whose ULTs went home does not steal at once when it runs dry: it
//!   parks for a pause (50 µs, doubled each time in a row up to 2 ms; any work of its own, a
//!   wake-up or a spawn ends it), then steals one ULT as a probe (which may move home at once);
//!   a probe that stays ends the pauses. The home's drain of such ULTs wakes no helper. So the
//!   other processor keeps running whatever does not contend, and is back within 2 ms of the
//!   lock no longer saturating.
//!
//! Between threads: the gathering's state (`Cold`'s `gap`, `saturated`, `recent`, `home`, and the
//! bounce count on the hot line) is written only by the lock's holder, so the lock orders its
//! writers; contenders read it as hints (`Relaxed`): a stale read moves a contender once too
//! often or too rarely, and never touches exclusion, which stays the state word's alone. A
//! processor's name in `Remote::name` is written once, before the processor runs anything, and
//! a reader that misses it finds no home: no move.
//!
//! What it gives up: the parallelism of the work between two acquisitions of a saturated lock
//! (which the bounces were eating), up to a pause of stealing for work queued behind a gathered
//! lock's contenders, and every 10 ms a revocation of the home's bias by a probe, to measure
//! the bounces again.
//!
//! # Layout
//!
//! What every lock and unlock touches is one cache line: the state word with its bias (16 bytes,
//! `sync::lock_word`), the poison flag, the holder's acquisition counter (a `u8`: it only picks
//! one acquisition in eight), its `measuring` flag and its count of bounces, and the data right
//! after them, when it fits in the line's other 40 bytes (and its alignment is at most 8). The wait list, the hold-time
//! samples and their average, and the gathering's state, which only contended locks, measured
//! acquisitions and bounces touch, live in lines of their own in front of it (`Cold`, 64-aligned;
//! the data, possibly unsized, must come last). Uncontended, a lock and an unlock touch that one line; contended between processors, it
//! is the one line that moves. A unit test checks the layout.

use super::lock_word::LockWord;
use super::wait::{OnUnwind, SpinLock, WaitList, WaitNode};
use super::{ticks, Spinner};
use crate::atomics::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::current::current_processor;
use crate::deadlock::WaitKind;
use crate::processor::Processor;
use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};

pub use super::lock_word::MAX_LOSSES;

/// Bounces must come closer than this on average (nanoseconds) for a lock to count as
/// saturated, and so gather its contenders ("Gathering").
const GATHER_GAP_NS: f64 = 200.0;

/// Bounces per sample of a lock's bounces ("Gathering").
const BOUNCES_PER_SAMPLE: u8 = 16;

/// How long (nanoseconds) the last sign of saturation counts.
const GATHER_WINDOW_NS: f64 = 10_000_000.0;

/// The least time (nanoseconds) between two moves of one ULT.
const MOVE_GAP_NS: f64 = 100_000.0;

/// [`GATHER_GAP_NS`], [`GATHER_WINDOW_NS`] and [`MOVE_GAP_NS`] in time-stamp ticks.
fn gather_ticks() -> (u64, u64, u64) {
    static TICKS: std::sync::OnceLock<(u64, u64, u64)> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let c = super::switch_cost();
        let per_ns = c.switch_ticks as f64 / c.switch_ns.max(1.0);
        let ticks = |ns: f64| (ns * per_ns) as u64;
        (ticks(GATHER_GAP_NS), ticks(GATHER_WINDOW_NS), ticks(MOVE_GAP_NS))
    })
}

/// `WaitNode::tag` of a waiter to whom an unlock handed the lock.
const HANDED_OVER: usize = usize::MAX;

/// Holder-only bookkeeping of hold times (of the measured acquisitions only).
struct Holds {
    /// Time stamp of the current acquisition, when it is measured.
    since: u64,
    samples: [u64; 8],
    next: usize,
    /// Time stamp of the last sample of bounces (0: none yet), for `Cold::gap`.
    prev: u64,
}

/// What only contended locks and measured acquisitions touch, on cache lines of its own (see
/// "Layout" in the module docs).
#[repr(C, align(64))]
struct Cold {
    /// Average of the last 8 measured hold times, published for waiters deciding to spin.
    avg_hold: AtomicU64,
    /// Ticks between two bounces (acquisitions from another processor than the one before), on
    /// average (a moving average over samples of [`BOUNCES_PER_SAMPLE`]); `u64::MAX` before two
    /// samples. Read by waiters deciding whether the lock is saturated ("Gathering").
    gap: AtomicU64,
    /// Whether `gap` last crossed below the threshold rather than above four times it.
    saturated: AtomicBool,
    /// Time stamp of the last counted sample of bounces (not one spanning a quiet spell):
    /// saturation lapses when it is older than the window.
    recent: AtomicU64,
    /// Where a word never biased gathers its contenders (a processor's name, `sync::lock_word`;
    /// 0: nowhere yet): the holder's processor when the lock was first found saturated.
    home: AtomicUsize,
    holds: UnsafeCell<Holds>,
    waiters: SpinLock<WaitList>,
}

/// A mutual exclusion lock with `std::sync::Mutex`'s interface (poisoning included) whose `lock`
/// blocks the calling ULT instead of its processor, and parks an OS thread that calls it from
/// outside the runtime.
///
/// ```
/// use elite_rt::sync::Mutex;
/// use std::sync::Arc;
///
/// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
/// let total = rt.block_on(|| {
///     let m = Arc::new(Mutex::new(0u64));
///     let hs: Vec<_> = (0..100)
///         .map(|_| {
///             let m = m.clone();
///             elite_rt::spawn(move || {
///                 for _ in 0..100 {
///                     *m.lock().unwrap() += 1;
///                     elite_rt::yield_now();
///                 }
///             })
///         })
///         .collect();
///     hs.into_iter().for_each(|h| h.join().unwrap());
///     let n = *m.lock().unwrap();
///     n
/// });
/// assert_eq!(total, 10_000);
/// ```
///
/// Contended, it is a two-phase lock (ELiTE section 2.3.2): a waiter spins a bounded number of
/// rounds with exponential backoff, then blocks; with the default [`SpinPolicy::Adaptive`] it
/// blocks at once while the lock's recent hold times exceed half the cost of a context switch.
/// Waiters are served in FIFO order and cannot starve: see [`MAX_LOSSES`].
///
/// A lock its ULTs keep taking from several processors with little work in between spends its
/// time moving between the cores' caches; once it does (its line changes processors less than
/// 200 ns apart on average), its contenders **gather** on one processor: a ULT that finds it
/// held, or biased to another processor, moves to the lock's home processor and takes it there,
/// and the processor it left pauses its stealing (at most 2 ms at a time) rather than take such
/// ULTs back. The lock stays saturated until its bounces come more than 800 ns apart, or none
/// came for 10 ms. [`RuntimeBuilder::gather_locks`](crate::RuntimeBuilder::gather_locks)`(false)`
/// turns this off; pinned ULTs and OS threads never move.
///
/// [`SpinPolicy::Adaptive`]: super::SpinPolicy::Adaptive
#[repr(C)] // the hot line: `state` starts it (after `Cold`), `data` follows (module docs)
pub struct Mutex<T: ?Sized> {
    cold: Cold,
    state: LockWord,
    poison: AtomicBool,
    /// Acquisitions that waited, holder-only: one whose count is a multiple of 8 is measured.
    count: UnsafeCell<u8>,
    /// Whether the current acquisition is measured; holder-only.
    measuring: UnsafeCell<bool>,
    /// Bounces since the last sample ("Gathering"); holder-only.
    bounces: UnsafeCell<u8>,
    data: UnsafeCell<T>,
}

// SAFETY: the lock gives one holder at a time access to `data` and `holds`; T: Send suffices, as
// for std's Mutex.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `value`.
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            cold: Cold {
                avg_hold: AtomicU64::new(0),
                gap: AtomicU64::new(u64::MAX),
                saturated: AtomicBool::new(false),
                recent: AtomicU64::new(0),
                home: AtomicUsize::new(0),
                holds: UnsafeCell::new(Holds { since: 0, samples: [0; 8], next: 0, prev: 0 }),
                waiters: SpinLock::new(WaitList::of(WaitKind::Mutex)),
            },
            state: LockWord::new(),
            poison: AtomicBool::new(false),
            count: UnsafeCell::new(0),
            measuring: UnsafeCell::new(false),
            bounces: UnsafeCell::new(0),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the mutex and returns its value (`Err` if it is poisoned, with the value inside).
    pub fn into_inner(self) -> LockResult<T> {
        let poisoned = self.poison.load(Ordering::Relaxed);
        let v = self.data.into_inner();
        if poisoned {
            Err(PoisonError::new(v))
        } else {
            Ok(v)
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Acquires the lock, blocking the calling ULT (or parking the calling OS thread) until it is
    /// free. `Err` if a holder panicked (the guard is inside, as with std).
    ///
    /// Locking a mutex the caller already holds deadlocks, as with std.
    #[inline]
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        if !self.state.lock_fast(here(), || self.bounced()) {
            self.lock_contended();
        }
        self.guard()
    }

    /// Acquires the lock if it is free right now.
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        if !self.state.try_lock(here()) {
            return Err(TryLockError::WouldBlock);
        }
        self.guard().map_err(TryLockError::from)
    }

    /// Whether a holder panicked while holding the lock.
    pub fn is_poisoned(&self) -> bool {
        self.poison.load(Ordering::Relaxed)
    }

    /// Clears the poisoned state.
    pub fn clear_poison(&self) {
        self.poison.store(false, Ordering::Relaxed);
    }

    /// The value, through exclusive access (no locking needed).
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        let poisoned = self.poison.load(Ordering::Relaxed);
        let v = self.data.get_mut();
        if poisoned {
            Err(PoisonError::new(v))
        } else {
            Ok(v)
        }
    }

    #[inline]
    fn guard(&self) -> LockResult<MutexGuard<'_, T>> {
        let g = MutexGuard { lock: self, panicking: std::thread::panicking() };
        if self.poison.load(Ordering::Relaxed) {
            Err(PoisonError::new(g))
        } else {
            Ok(g)
        }
    }

    #[inline]
    #[allow(clippy::mut_from_ref)]
    fn holds(&self) -> &mut Holds {
        // SAFETY: only the holder of the lock calls this, and not across another call to it.
        unsafe { &mut *self.cold.holds.get() }
    }

    /// Counts this acquisition, one that waited (`lock_contended`), and starts measuring its
    /// hold time if it is one of the sampled ones.
    #[inline]
    fn begin_contended_hold(&self) {
        // SAFETY: only the holder of the lock reads or writes the counter.
        let c = unsafe { &mut *self.count.get() };
        *c = c.wrapping_add(1);
        if c.is_multiple_of(8) {
            // SAFETY: only the holder of the lock reads or writes the flag.
            unsafe { *self.measuring.get() = true };
            self.holds().since = ticks();
        }
    }

    /// A bounce (`LockWord::lock_fast`: the caller holds the lock, taken from another processor
    /// than the acquisition before): counted, and every [`BOUNCES_PER_SAMPLE`]-th sampled.
    #[inline(always)]
    fn bounced(&self) {
        // SAFETY: only the holder of the lock reads or writes the counter.
        let n = unsafe { &mut *self.bounces.get() };
        *n += 1;
        if *n == BOUNCES_PER_SAMPLE {
            *n = 0;
            self.sample_bounces();
        }
    }

    /// Every [`BOUNCES_PER_SAMPLE`]-th bounce: the moving average of the time between bounces,
    /// and the last sign of saturation. The caller holds the lock.
    #[cold]
    #[inline(never)]
    fn sample_bounces(&self) {
        let now = ticks();
        let h = self.holds();
        let gap = now.wrapping_sub(h.prev) / u64::from(BOUNCES_PER_SAMPLE);
        // A sample that spans a quiet spell (bounces 16 times the threshold apart and more: its
        // contenders gathered, or it is seldom taken) says nothing about how fast it bounces
        // when it does.
        let (threshold, window, _) = gather_ticks();
        if now.wrapping_sub(self.cold.recent.load(Ordering::Relaxed)) as i64 >= window as i64 {
            // Saturation lapsed (no sample counted for the window): it must be shown again.
            self.cold.gap.store(u64::MAX, Ordering::Relaxed);
            self.cold.saturated.store(false, Ordering::Relaxed);
        }
        if h.prev != 0 && gap < threshold * 16 {
            let old = self.cold.gap.load(Ordering::Relaxed);
            let avg = if old == u64::MAX { gap } else { (old / 4) * 3 + gap / 4 };
            self.cold.gap.store(avg, Ordering::Relaxed);
            // Saturated below the threshold, no longer above four times it (between the two,
            // as before: the average moves about while contenders gather and thieves probe).
            if avg < threshold {
                self.cold.saturated.store(true, Ordering::Relaxed);
            } else if avg > threshold * 4 {
                self.cold.saturated.store(false, Ordering::Relaxed);
            }
            // Only a counted sample renews saturation: bounces that keep coming, but slower
            // than 16 times the threshold, let it lapse.
            self.cold.recent.store(now, Ordering::Relaxed);
        }
        h.prev = now;
        if self.cold.home.load(Ordering::Relaxed) == 0 && self.saturated() {
            // A home for a word never biased: the holder's processor, where the bias will
            // then form.
            self.cold.home.store(here(), Ordering::Relaxed);
        }
    }

    /// Whether the lock is saturated (module docs, "Gathering"): it bounced between processors
    /// less than [`GATHER_GAP_NS`] apart on average, and the last sign of it is recent.
    #[inline(never)]
    fn saturated(&self) -> bool {
        if !self.cold.saturated.load(Ordering::Relaxed) {
            return false;
        }
        // (`recent` first: a later store, or another core's clock, then reads as a small
        // negative age, not as a huge one.)
        let recent = self.cold.recent.load(Ordering::Relaxed);
        (ticks().wrapping_sub(recent) as i64) < gather_ticks().1 as i64
    }

    /// The average hold time (ticks) of the last 8 measured acquisitions.
    pub(crate) fn average_hold(&self) -> u64 {
        self.cold.avg_hold.load(Ordering::Relaxed)
    }

    #[cold]
    fn lock_contended(&self) {
        // Gathering (module docs): only for a saturated lock, and at most one move per call
        // (its home may change while the mover travels).
        let mut may_move = self.saturated();
        if self.move_and_take(&mut may_move) {
            return;
        }
        let mut losses = 0usize;
        loop {
            // After a plain wake-up this ULT holds the turn to retry: unwound (shutdown) before it
            // takes the lock or queues again, at a move's switch or the chaos mode's decision
            // point, it passes the turn on, as `abandon` does for a queued waiter.
            let retry = losses > 0;
            let turn = OnUnwind::new(move || {
                if retry {
                    self.wake_next_if_free();
                }
            });
            let acquired = self.spin_phase(&mut may_move);
            turn.disarm();
            if acquired {
                return;
            }
            // Block phase.
            let node = WaitNode::new();
            let list = self.cold.waiters.lock();
            if self.state.lock_or_enqueue(here()) {
                drop(list);
                self.begin_contended_hold();
                return;
            }
            // WAITERS is set: no unlock can take the fast path until the node is linked and the
            // list released (which `block` does after our switch).
            node.tag.set(losses);
            let guard = OnUnwind::new(|| self.abandon(&node));
            // A waiter that lost a race for the lock keeps its place at the front.
            node.block_on(list, |list| list, losses > 0);
            guard.disarm();
            if node.tag.get() == HANDED_OVER {
                self.state.accept_hand_over(here());
                self.begin_contended_hold();
                return;
            }
            losses += 1;
        }
    }

    /// The spin phase of [`Mutex::lock_contended`] (with its one move, while `may_move`); true if
    /// it took the lock.
    #[inline]
    fn spin_phase(&self, may_move: &mut bool) -> bool {
        let mut spin = Spinner::new(self.average_hold());
        while spin.again() {
            // The word may have been biased to another processor meanwhile: move rather than
            // revoke.
            if self.move_and_take(may_move) {
                return true;
            }
            if self.state.try_lock(here()) {
                self.begin_contended_hold();
                return true;
            }
            if self.state.handing_over() {
                break; // its new owner may be waiting for this processor
            }
        }
        false
    }

    /// The one move of a `lock` call, while `may_move` (cleared once the rule has decided,
    /// whichever way): moves as [`Mutex::gather`] says, and takes the lock at the home if it is
    /// free there. True if it took it.
    #[inline]
    fn move_and_take(&self, may_move: &mut bool) -> bool {
        if !*may_move {
            return false;
        }
        let Some(moved) = self.gather(here()) else { return false };
        *may_move = false;
        moved && self.state.lock_fast(here(), || self.bounced())
    }

    /// The gathering rule of a saturated lock (module docs, "Gathering"), for a caller on
    /// processor `me`: if the lock is biased to another processor, or held while its home is
    /// another processor, move there. `None`: no reason to move now; `Some(true)`: moved (the
    /// caller runs on the home now); `Some(false)`: no move for the rest of this call (an OS
    /// thread, a pinned ULT, one that moved less than 100 µs ago, gathering off, or a home that
    /// is parked or no processor of the caller's runtime).
    #[inline]
    fn gather(&self, me: usize) -> Option<bool> {
        let (home, biased) = self.state.home().or_else(|| match self.cold.home.load(Ordering::Relaxed) {
            0 => None,
            h => Some((h, false)),
        })?;
        if home == me || !(biased || self.state.is_held()) {
            return None;
        }
        let (_, _, min_gap) = gather_ticks();
        Some(me != 0 && crate::processor::gather_to(home, ticks(), min_gap))
    }

    /// A blocked waiter is being unwound (shutdown): leave the queue, and pass on whatever an
    /// unlock gave it (the lock itself, or the turn to retry).
    #[cold]
    fn abandon(&self, node: &WaitNode) {
        let mut list = self.cold.waiters.lock();
        if node.is_linked() {
            list.remove(node);
            if list.is_empty() {
                self.state.clear_waiters(here());
            }
            return;
        }
        drop(list);
        if node.tag.get() == HANDED_OVER {
            self.state.accept_hand_over(here());
            self.unlock();
        } else {
            // Woken to retry: the lock may be free with others queued, who would wait for an
            // unlock that is not coming. Wake the next one instead.
            self.wake_next_if_free();
        }
    }

    #[cold]
    fn wake_next_if_free(&self) {
        let mut list = self.cold.waiters.lock();
        if self.state.is_locked(here()) {
            return; // its holder will unlock and wake
        }
        let wake = list.pop_front().and_then(|n| n.notify());
        if list.is_empty() {
            self.state.clear_waiters(here());
        }
        drop(list);
        if let Some(w) = wake {
            w.wake();
        }
    }

    /// Records the hold time if this acquisition was measured.
    #[inline]
    fn record_hold(&self) {
        // SAFETY: only the holder of the lock reads or writes the flag.
        if unsafe { *self.measuring.get() } {
            self.record_measured_hold();
        }
    }

    /// [`Mutex::record_hold`] of a measured acquisition, out of line.
    #[inline(never)]
    fn record_measured_hold(&self) {
        // SAFETY: only the holder of the lock reads or writes the flag.
        unsafe { *self.measuring.get() = false };
        let h = self.holds();
        let held = ticks().wrapping_sub(h.since);
        h.samples[h.next] = held;
        h.next = (h.next + 1) % 8;
        self.cold.avg_hold.store(h.samples.iter().sum::<u64>() / 8, Ordering::Relaxed);
    }

    #[inline]
    fn unlock(&self) {
        self.record_hold();
        if !self.state.unlock_fast(here()) {
            self.unlock_slow();
        }
    }

    #[cold]
    fn unlock_slow(&self) {
        let me = here();
        let mut list = self.cold.waiters.lock();
        let Some(n) = list.pop_front() else {
            // Another processor's bias (this holder moved), or WAITERS without waiters, which
            // cannot stay set (it is cleared with the last unlink), but losing a wake-up would be
            // worse than a wasted RMW.
            self.state.release(me, true);
            return;
        };
        let last = list.is_empty();
        if n.tag.get() >= MAX_LOSSES {
            n.tag.set(HANDED_OVER);
            // LOCKED stays set: the waiter owns the lock now; the wake-up below publishes the
            // critical section (AcqRel on its wait word) besides the word's own Release/Acquire.
            self.state.hand_over(me, last);
        } else {
            self.state.release(me, last);
        }
        let wake = n.notify();
        drop(list);
        match wake {
            Some(w) => w.wake(),
            None => crate::fatal("a mutex waiter timed out"),
        }
    }
}

/// The caller's name for the state word's bias (`sync::lock_word`): its processor's address, or
/// 0 on an OS thread. Looked up at each transition: a ULT may have moved since the last one.
#[inline(always)]
fn here() -> usize {
    current_processor().map_or(0, |p| p as *const Processor as usize)
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(v: T) -> Mutex<T> {
        Mutex::new(v)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Ok(g) => d.field("data", &&*g),
            Err(TryLockError::Poisoned(e)) => d.field("data", &&**e.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.is_poisoned()).finish_non_exhaustive()
    }
}

/// Access to a [`Mutex`]'s value; unlocks when dropped. Do not hold one across a call that may
/// block the ULT on something the next holder must do (as with any lock).
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized> {
    lock: &'a Mutex<T>,
    panicking: bool,
}

// SAFETY: a guard gives `&T` to whoever holds `&guard`: Sync when T is Sync, as for std.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}
// A MutexGuard may be sent to another OS thread (unlike std's): the lock does not belong to an OS
// thread, and a ULT moves between OS threads while holding one anyway.
// SAFETY: unlocking from any thread is part of this lock's protocol.
unsafe impl<T: ?Sized + Send> Send for MutexGuard<'_, T> {}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    pub(crate) fn mutex(&self) -> &'a Mutex<T> {
        self.lock
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if !self.panicking && std::thread::panicking() {
            self.lock.poison.store(true, Ordering::Relaxed);
        }
        self.lock.unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::Mutex;
    use crate::sync::bias::heavy_barrier_available;
    use std::mem::{align_of, offset_of};
    use std::sync::Arc;
    use std::time::Duration;

    /// Takes `m` through the uncontended path until it is biased to the calling processor (or
    /// gives up after far more acquisitions than any threshold: no `membarrier` here). Returns
    /// whether it is biased.
    fn bias_here(m: &Mutex<u64>) -> bool {
        for _ in 0..100_000 {
            if m.state.is_biased() {
                return true;
            }
            *m.lock().unwrap() += 1;
        }
        m.state.is_biased()
    }

    fn one_processor() -> crate::Runtime {
        crate::Runtime::builder().processors(1).build().unwrap()
    }

    /// The hot line of "Layout" (module docs): the state word starts a cache line, and the flags,
    /// the counter and up to 40 bytes of data share it.
    #[test]
    fn state_and_data_share_one_cache_line() {
        fn check<T>() {
            let state = offset_of!(Mutex<T>, state);
            assert_eq!(state % 64, 0, "the state word starts a line");
            assert!(offset_of!(Mutex<T>, poison) - state < 64);
            assert!(offset_of!(Mutex<T>, count) - state < 64);
            assert!(offset_of!(Mutex<T>, measuring) - state < 64);
            assert!(offset_of!(Mutex<T>, bounces) - state < 64);
            let data = offset_of!(Mutex<T>, data);
            assert!(data + std::mem::size_of::<T>() - state <= 64, "the data ends within the line");
            assert_eq!(align_of::<Mutex<T>>(), 64);
        }
        check::<u64>();
        check::<()>();
        check::<[u8; 40]>();
        check::<(u64, u64, u64, u64, u64)>();
    }

    /// Only acquisitions that waited are measured, one in eight by the count: uncontended ones
    /// take no time stamp.
    #[test]
    fn only_contended_acquisitions_are_measured() {
        let m = Mutex::new(0u32);
        for _ in 0..64 {
            let mut g = m.lock().unwrap();
            *g += 1;
            std::hint::black_box(&mut *g);
        }
        assert_eq!(m.holds().next, 0, "uncontended: nothing measured");
        // Acquisitions through the contended path (the lock is free: they take it at once).
        for _ in 0..24 {
            m.lock_contended();
            let mut g = m.guard().unwrap();
            *g += 1;
            std::hint::black_box(&mut *g);
        }
        assert_eq!(*m.lock().unwrap(), 88);
        assert_eq!(m.holds().next, 3, "one contended acquisition in eight measured");
    }

    /// A mutex one processor keeps taking becomes biased (where `membarrier` exists), and its
    /// owner's path keeps std's semantics: try_lock fails while held, a second ULT of the same
    /// processor waits for the holder (which yields while holding) and gets the lock after it.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn the_owner_path_keeps_exclusion_on_one_processor() {
        let rt = one_processor();
        let total = rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            let biased = bias_here(&m);
            assert_eq!(biased, heavy_barrier_available(), "biased exactly when membarrier works");
            let base = *m.lock().unwrap();
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    let m = m.clone();
                    crate::spawn(move || {
                        for _ in 0..500 {
                            let mut g = m.lock().unwrap();
                            assert!(m.try_lock().is_err(), "try_lock on a held mutex");
                            let v = *g;
                            crate::yield_now(); // the others run, and wait for this holder
                            *g = v + 1;
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
            let n = *m.lock().unwrap();
            n - base
        });
        assert_eq!(total, 8 * 500);
    }

    /// A holder that locks through the owner's path and unlocks elsewhere (its guard dropped on
    /// an OS thread, as after a move to another processor) revokes the bias on the way; the
    /// lock then works from both sides, and the owner biases it again later.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_guard_dropped_elsewhere_revokes_the_bias() {
        let rt = one_processor();
        rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            if !bias_here(&m) {
                return; // no membarrier: nothing biased to revoke
            }
            let mut g = m.lock().unwrap();
            *g += 1;
            // The guard is `Send`: an OS thread unlocks (this processor waits for it).
            std::thread::scope(|s| {
                s.spawn(|| {
                    *g += 1;
                    drop(g);
                    assert!(!m.state.is_biased(), "the unlock from elsewhere revoked the bias");
                    *m.lock().unwrap() += 1;
                });
            });
            let before = *m.lock().unwrap();
            assert!(bias_here(&m), "biased again after a longer streak");
            assert!(*m.lock().unwrap() >= before);
        });
    }

    /// OS threads and the ULTs of the owner processor take the lock at once: every revocation
    /// (the threshold doubling each time) and re-biasing keeps the count exact.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn os_threads_contend_with_the_owner() {
        const ULTS: u64 = 16;
        const THREADS: u64 = 3;
        const ROUNDS: u64 = 2000;
        let rt = one_processor();
        let m = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..ROUNDS {
                        *m.lock().unwrap() += 1;
                        if i % 64 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let m2 = m.clone();
        rt.block_on(move || {
            let hs: Vec<_> = (0..ULTS)
                .map(|_| {
                    let m = m2.clone();
                    crate::spawn(move || {
                        for i in 0..ROUNDS {
                            *m.lock().unwrap() += 1;
                            if i % 4 == 0 {
                                crate::yield_now();
                            }
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
        });
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*m.lock().unwrap(), (ULTS + THREADS) * ROUNDS);
    }

    /// An OS thread revokes the bias while the owner's ULT holds the lock (and sleeps): it
    /// waits, and gets the lock with the holder's writes once the holder unlocks (through the
    /// slow path: the owner's path is gone).
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_revocation_while_held_waits_for_the_holder() {
        let rt = one_processor();
        rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            if !bias_here(&m) {
                return;
            }
            let base = *m.lock().unwrap();
            let mut g = m.lock().unwrap();
            let m2 = m.clone();
            let t = std::thread::spawn(move || {
                let v = *m2.lock().unwrap();
                assert!(!m2.state.is_biased());
                v
            });
            // Let the thread revoke and block while this ULT holds the lock.
            while m.state.is_biased() {
                crate::yield_now();
            }
            crate::sleep(Duration::from_millis(20));
            *g += 7;
            drop(g);
            assert_eq!(t.join().unwrap(), base + 7, "the waiter saw the holder's write");
        });
    }

    /// A holder that panics on the owner's path poisons the lock, as with std; the poison is
    /// seen by the owner's next lock and from elsewhere.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_panic_on_the_owner_path_poisons() {
        let rt = one_processor();
        rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            let biased = bias_here(&m);
            let m2 = m.clone();
            let r = crate::spawn(move || {
                let _g = m2.lock().unwrap();
                panic!("poison it");
            })
            .join();
            assert!(r.is_err());
            assert_eq!(m.state.is_biased(), biased, "the same processor: still biased");
            assert!(m.is_poisoned());
            assert!(m.lock().is_err(), "the owner's lock reports the poison");
            let m3 = m.clone();
            std::thread::spawn(move || assert!(m3.lock().is_err(), "and so does an OS thread's"))
                .join()
                .unwrap();
            m.clear_poison();
            assert!(m.lock().is_ok());
        });
    }

    /// On 2 processors, a holder that locked through the owner's path yields until it resumes
    /// on the other processor (busy ULTs give that one a reason to steal), and unlocks there,
    /// revoking; ULTs of both processors take the lock meanwhile. The count stays exact.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_biased_holder_that_moves_unlocks_by_revoking() {
        const TRIALS: u64 = 12;
        let rt = crate::Runtime::builder().processors(2).build().unwrap();
        let (total, expected) = rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            let mut expected = 0u64;
            for _ in 0..TRIALS {
                let before = *m.lock().unwrap();
                // Biased again only on the processor of its first bias (`sync::lock_word`): after
                // a move, the trial runs unbiased.
                if !bias_here(&m) && !heavy_barrier_available() {
                    return (0, 0); // no membarrier
                }
                expected += *m.lock().unwrap() - before;
                let mut g = m.lock().unwrap();
                let t0 = std::thread::current().id();
                let busy: Vec<_> = (0..4)
                    .map(|_| {
                        let m = m.clone();
                        crate::spawn(move || {
                            for _ in 0..50 {
                                crate::yield_now();
                            }
                            *m.lock().unwrap() += 1; // waits for the holder
                        })
                    })
                    .collect();
                for _ in 0..10_000 {
                    if std::thread::current().id() != t0 {
                        break;
                    }
                    crate::yield_now();
                }
                *g += 1;
                drop(g);
                busy.into_iter().for_each(|h| h.join().unwrap());
                expected += 1 + 4;
            }
            let n = *m.lock().unwrap();
            (n, expected)
        });
        // Most trials move (8 to 10 of 12 on the build VMs, each a revocation); the count
        // holds whatever moved.
        assert_eq!(total, expected);
    }

    /// Spins until `ticks` time-stamp ticks have passed.
    fn spin_ticks(ticks: u64) {
        let start = super::ticks();
        while super::ticks().wrapping_sub(start) < ticks {
            std::hint::spin_loop();
        }
    }

    /// One sample of bounces ([`super::BOUNCES_PER_SAMPLE`] of them) about `gap` ticks apart
    /// each, the first after a wait of that long; the caller holds `m`.
    fn sample(m: &Mutex<u64>, gap: u64) {
        spin_ticks(gap * u64::from(super::BOUNCES_PER_SAMPLE));
        for _ in 0..super::BOUNCES_PER_SAMPLE {
            m.bounced();
        }
    }

    /// "Gathering" (module docs): a lock becomes saturated once its bounces come closer than the
    /// threshold on average, stays so between the threshold and four times it, stops above;
    /// a sample that spans a quiet spell leaves the average alone, and saturation lapses after
    /// the window. (Each phase loops until its state is reached, up to far more samples than the
    /// moving average needs: a sample stretched by preemption only delays it.)
    #[test]
    fn saturation_follows_the_time_between_bounces() {
        let (threshold, ..) = super::gather_ticks();
        let m = Mutex::new(0u64);
        let _g = m.lock().unwrap(); // (the counters are the holder's)
        assert!(!m.saturated(), "a new lock is not saturated");
        let fast = (0..1000).position(|_| {
            sample(&m, threshold / 4);
            m.saturated()
        });
        assert!(fast.is_some(), "bounces a quarter of the threshold apart saturate it");
        for _ in 0..8 {
            sample(&m, threshold * 2);
        }
        assert!(m.saturated(), "twice the threshold apart: between the marks, it stays saturated");
        let slow = (0..1000).position(|_| {
            sample(&m, threshold * 8);
            !m.saturated()
        });
        assert!(slow.is_some(), "eight times the threshold apart: no longer saturated");
        let gap = m.cold.gap.load(super::Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(2)); // 2 ms: far more than 16 thresholds a bounce
        sample(&m, 0);
        assert_eq!(m.cold.gap.load(super::Ordering::Relaxed), gap, "a quiet spell is no sample");
        assert!((0..1000).any(|_| {
            sample(&m, threshold / 4);
            m.saturated()
        }));
        std::thread::sleep(Duration::from_millis(15)); // past the 10 ms window
        assert!(!m.saturated(), "saturation lapses when nothing renews it");
        sample(&m, threshold / 4);
        assert!(!m.saturated(), "and must be shown again: the sample after the lapse starts over");
        assert_eq!(m.cold.gap.load(super::Ordering::Relaxed), u64::MAX);
        assert!((0..1000).any(|_| {
            sample(&m, threshold / 4);
            m.saturated()
        }));
        // Bounces that keep coming, but 32 thresholds apart: no sample counts, so it lapses.
        let start = std::time::Instant::now();
        assert!((0..10_000).any(|_| {
            sample(&m, threshold * 32);
            !m.saturated()
        }));
        assert!(start.elapsed() >= Duration::from_millis(9), "not before the window (10 ms)");
    }

    /// The name of the other processor of the calling ULT's 2-processor runtime, once that one
    /// runs something: no move goes to a processor that has not started yet (its name is 0 until
    /// its thread makes it) or is parked. Waits a while (yielding) for it.
    fn other_processor_name() -> usize {
        let p = crate::current::current_processor().unwrap();
        let other = &p.shared.processors[1 - p.index];
        for _ in 0..1_000_000 {
            if other.name.load(super::Ordering::Relaxed) != 0 && !other.park.is_parked() {
                break;
            }
            crate::yield_now();
        }
        other.name.load(super::Ordering::Relaxed)
    }

    /// What a test ULT on processor `from` of a 2-processor runtime finds: `m` saturated, its
    /// home the other processor, held (by the test's OS thread); it locks `m` and returns the
    /// processor it holds the lock on.
    fn contend_from_elsewhere(m: &Mutex<u64>) -> usize {
        m.cold.home.store(other_processor_name(), super::Ordering::Relaxed);
        m.cold.saturated.store(true, super::Ordering::Relaxed);
        m.cold.recent.store(super::ticks(), super::Ordering::Relaxed);
        let mut g = m.lock().unwrap();
        *g += 1;
        crate::current::current_processor().unwrap().index
    }

    /// Runs [`contend_from_elsewhere`] in a ULT spawned by `spawn` on `rt` while this OS thread
    /// holds the lock, releases it once the runtime has counted `moves` moves (or the ULT is
    /// blocked or spinning, after 50 ms, when no move is expected); returns the processor the
    /// ULT started on, the one it took the lock on, and the runtime's counts of moves and of
    /// pauses of stealing. Eight ULTs that only yield keep both processors busy meanwhile (a
    /// parked processor is no home to move to).
    fn run_contender(
        rt: &crate::Runtime,
        moves: u64,
        spawn: impl FnOnce(Box<dyn FnOnce() -> usize + Send>) -> crate::JoinHandle<usize>,
    ) -> (usize, usize, u64, u64) {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let busy: Vec<_> = (0..8)
            .map(|_| {
                let stop = stop.clone();
                rt.spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        crate::yield_now();
                    }
                })
            })
            .collect();
        let m = Arc::new(Mutex::new(0u64));
        let g = m.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let m2 = m.clone();
        let h = spawn(Box::new(move || {
            tx.send(crate::current::current_processor().unwrap().index).unwrap();
            contend_from_elsewhere(&m2)
        }));
        let from = rx.recv().unwrap();
        let gathered = || rt.stats().processors.iter().map(|p| p.gathered).sum::<u64>();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        if moves == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        while gathered() < moves && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(g);
        let at = h.join().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.into_iter().for_each(|b| b.join().unwrap());
        assert_eq!(*m.lock().unwrap(), 1);
        let pauses = rt.stats().processors[from].steal_pauses;
        (from, at, gathered(), pauses)
    }

    /// A ULT that meets a saturated lock held, whose home is another processor, moves there and
    /// takes the lock there; the processor it left pauses its stealing. (Without the chaos mode,
    /// which `.ci/run` turns on for the whole suite: its wake-ups may send the woken mover
    /// anywhere.)
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_contender_of_a_saturated_lock_moves_to_its_home() {
        let rt = crate::Runtime::builder().processors(2).no_chaos().build().unwrap();
        let (from, at, moves, _) = run_contender(&rt, 1, |f| rt.spawn(f));
        assert_eq!(moves, 1, "one move");
        assert_eq!(at, 1 - from, "it holds the lock on the home processor");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while rt.stats().processors[from].steal_pauses == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(rt.stats().processors[from].steal_pauses > 0, "the processor it left paused stealing");
    }

    /// No move for a pinned ULT, in a runtime built with `gather_locks(false)`, or for a lock
    /// that is not saturated; the lock works as always.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn pinned_ults_gathering_off_and_unsaturated_locks_stay() {
        let rt = crate::Runtime::builder().processors(2).no_chaos().build().unwrap();
        let pinned = |f: Box<dyn FnOnce() -> usize + Send>| {
            crate::Builder::new().pinned(true).spawn_on(&rt, f).unwrap()
        };
        let (from, at, moves, _) = run_contender(&rt, 0, pinned);
        assert_eq!((moves, at), (0, from), "a pinned ULT stays");
        let off = crate::Runtime::builder().processors(2).gather_locks(false).no_chaos().build().unwrap();
        let (_, _, moves, pauses) = run_contender(&off, 0, |f| off.spawn(f));
        assert_eq!((moves, pauses), (0, 0), "gathering off");
        let rt = crate::Runtime::builder().processors(2).no_chaos().build().unwrap();
        let m = Arc::new(Mutex::new(0u64));
        let g = m.lock().unwrap();
        let m2 = m.clone();
        let h = rt.spawn(move || {
            m2.cold.home.store(other_processor_name(), super::Ordering::Relaxed);
            *m2.lock().unwrap() += 1; // not saturated
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(g);
        h.join().unwrap();
        assert_eq!(*m.lock().unwrap(), 1);
        assert_eq!(rt.stats().processors.iter().map(|p| p.gathered).sum::<u64>(), 0, "not saturated");
        // A home that names no processor of this runtime (a first owner in another runtime).
        let g = m.lock().unwrap();
        let m2 = m.clone();
        let h = rt.spawn(move || {
            m2.cold.home.store(0x4000, super::Ordering::Relaxed);
            m2.cold.saturated.store(true, super::Ordering::Relaxed);
            m2.cold.recent.store(super::ticks(), super::Ordering::Relaxed);
            *m2.lock().unwrap() += 1;
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(g);
        h.join().unwrap();
        assert_eq!(*m.lock().unwrap(), 2);
        assert_eq!(rt.stats().processors.iter().map(|p| p.gathered).sum::<u64>(), 0, "no such home");
    }
}
