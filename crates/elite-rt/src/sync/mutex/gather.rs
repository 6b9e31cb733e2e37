//! Gathering: a saturated [`Mutex`] brings its contenders to one processor.
//!
//! A lock taken from two processors with little work between two acquisitions moves its cache
//! line between the cores at nearly every acquisition (a bounce: a transfer of the line, which
//! costs far more than the lock's own instructions), and two processors then do less than one:
//! a loop such as `mutex_contended`'s (lock, increment, unlock, yield) can run slower on two
//! processors than on one (`docs/benchmarks.md` in the repository has figures with their hosts).
//! Such a lock gathers its contenders on one processor, in the spirit of ELiTE's
//! synchronization-driven forces (3.3)
//! ([`RuntimeBuilder::gather_locks`](crate::RuntimeBuilder::gather_locks) turns it off):
//!
//! * **Saturation.** `LockWord::lock_fast` reports every bounce: an acquisition through the
//!   unbiased fast path from another processor than the one before (acquisitions after a wait,
//!   by `try_lock` or by hand-over are not looked at, and two processors whose streak tags alias
//!   never bounce). Out of every [`BOUNCES_PER_SAMPLE`] (16) the holder times one gap: it takes
//!   a time stamp at the 15th and another at the 16th, and the time between the two, the gap
//!   between two bounces in a row, updates a moving average (3/4 old, 1/4 new) of the time
//!   between bounces. (One gap, not the span of the 16 over 16: a lock bounces only while both
//!   its processors' threads run, and on a host whose CPUs are shared the OS takes one of them
//!   off for milliseconds at a time; a span of 16 bounces would take in such a spell and show
//!   the bounces sparse while, whenever both run, nearly every acquisition bounces. Two bounces
//!   in a row have a spell between them only when it falls exactly there.) The lock is a
//!   *candidate* once that falls below the threshold, [`GATHER_ROUND_TRIPS`](crate::sync::host::GATHER_ROUND_TRIPS)
//!   (8) round trips of a cache line between two cores as currently measured on this host (the
//!   median of the last five measurements: at the first runtime's start, and again while the
//!   process runs once the last is a second old; no lock saturates while it is unmeasured:
//!   `sync::host`) ([`HostCosts::gather_gap_ns`]). A wide band: how far apart
//!   bounces come does not tell whether gathering pays (bounces a few round trips apart come
//!   both from a loop that runs far faster gathered and from one with some work between
//!   acquisitions that runs faster spread over two processors); the candidate's *trial* does.
//!   A candidate is saturated (its
//!   contenders gather) if a trial may start, and that saturation is the trial:
//!   * *The periods.* The holder counts every acquisition (a `u8` on the hot line, however the
//!     lock was taken) and at every [`ACQUISITIONS_PER_CHECKPOINT`] (256), a *checkpoint*,
//!     takes a time stamp: the lock's period per 256 acquisitions, timed over a span
//!     ([`TRIAL_SPAN_NS`], 1 ms) of checkpoints. While the lock is not saturated it is timed
//!     over and over, after a settling time when it was saturated before ([`SPREAD_SETTLE_NS`],
//!     3 ms: the longest pause of stealing and the probation, after which the thieves steal as
//!     usual again), and the *spread period* is the least of the spans since the lock was last
//!     saturated that saw it bounce (one sample of bounces, 16, per checkpoint at least: a
//!     span in which one processor's thread was off its CPU, or the contenders were not spread
//!     yet, shows the lock as fast as on one processor, and says nothing of its spread cost;
//!     nor does a span of fewer than 2 checkpoints or longer than 4 spans, which took in a
//!     quiet spell, or a lock too slow to gather).
//!   * *The start.* A candidate saturates only with a spread period timed over two spans at
//!     least ([`SPREAD_SPANS`]: one may be slow for a cause that passes, such as the program
//!     starting, and a trial against it would pass wrongly), but for a trusted one (below),
//!     and not within a hold-off; its contenders then gather as below.
//!   * *The verdict.* After [`TRIAL_SETTLE_NS`] (0.5 ms: the contenders move) the holder times
//!     the gathered lock's period over a span; the trial passes if it is at most 5 % above
//!     the spread period ([`TRIAL_MARGIN_TWENTIETHS`]), else a second span is timed (one may
//!     take in a spell when the OS took the home's thread off its CPU), and fails if that one
//!     is worse too. It fails at the first span when that one is clearly worse: its period
//!     more than 1.5 times the spread one ([`TRIAL_CLEAR_FAIL_HALVES`]), and so without its
//!     longest time between two checkpoints in a row (where a spell, if one fell in the span,
//!     is). A passed trial leaves the lock saturated, as below, and resets the count
//!     of failures. A failed trial ends the saturation (the contenders spread again, as after
//!     a lapse), wakes the processors of the holder's runtime that pause their stealing
//!     (below), so that their probes come back at once, and holds the lock off saturating for
//!     [`HOLD_OFF_NS`] (10 ms), four times as long each failure in a row, up to 640 ms: a
//!     lock gathering does not pay for is tried again less and less often, and a lock whose
//!     load changed is found out within 640 ms.
//!
//!   A saturation within [`TRIAL_TRUST_NS`] (640 ms) of a trial that passed is none: the lock
//!   saturates at once, as a candidate, with no spread period needed (a gathered lock lapses
//!   every window, and a trial each time would cost it a few milliseconds spread); later, it
//!   is a trial again, so a lock whose load changed is found out within about 1.3 s. A
//!   saturated lock stays so until its
//!   bounces come more than four times the threshold apart on average (the hysteresis: a
//!   ratio, so it moves with the threshold), or its trial fails. A gap spanning a quiet spell
//!   (more than 16 times the threshold) is skipped; a sample that finds the last counted one
//!   older than the lock's *window* starts over (the average forgotten, not saturated, the
//!   sample itself not counted), and so does `saturated()` say no after a window without a
//!   counted sample: saturation must be shown again by dense bounces, not kept alive by moves
//!   or by slow bounces. The window is 10 ms, multiplied by four (up to
//!   [`MAX_WINDOW_DOUBLINGS`] doublings: 40, 160, 640 ms) each time the lock, its saturation
//!   lapsed, is saturated again within 10 ms of the lapse, and back to 10 ms once its bounces
//!   are slow (the average above four times the threshold), it saturates again later than
//!   that, or a trial fails. (A gathered lock bounces no more, so no sample renews its
//!   saturation, and it lapses a window after its contenders gathered; each lapse costs a
//!   revocation of the home's bias, and a thief's probe that takes the lock where it stands and
//!   bounces it (and, once a trial is due again, the settling and a span of the spread lock,
//!   and the trial). A lock that is
//!   saturated again at once each time is re-checked less and less often, as the thieves'
//!   pauses grow; a lock whose load changed is found out within a window, at most 640 ms.)
//! * **Home.** The processor the word is biased to, else the one it was first biased to (the only
//!   one it can be biased to again, "The bias" in `sync::lock_word`), else the holder's when
//!   saturation was first seen (kept for the lock's life). A first owner, or such a holder, of
//!   another runtime (a `static` lock used by runtimes in turn) names no processor of the
//!   caller's: no move, for the lock's life.
//! * **The move.** A ULT on another processor than the home of a saturated lock, whether it
//!   finds the lock held, biased to the home, or free, switches out and is pushed on the home's
//!   wake-up stack ([`gather_to`]), then takes the lock there (an acquisition neither counted
//!   nor measured as one that waited): instead of spinning on a line that moves, revoking a
//!   bias, or moving the line once more. A free lock counts too: a saturated lock's critical
//!   sections are short, so it is mostly found free, and a contender that took it where it
//!   stands would never move (so `Mutex::lock` asks [`Mutex::gathers_elsewhere`] before its
//!   unbiased CAS, and takes the contended path to move). At most once per `lock` call and per 100 µs per ULT (two saturated
//!   locks with two homes would otherwise move a ULT that takes them in turn at every call);
//!   never an OS thread, a pinned ULT, in a `central` runtime, or to a parked home (the lock is
//!   not busy there, and waking it costs more). The move bypasses the policy's wake target. The
//!   fairness bound ("Fairness" in `sync::mutex`) is untouched: a mover is a newcomer at the
//!   home, not a queued waiter (a woken waiter that moves keeps its count of lost races).
//! * **Thieves.** A processor whose ULTs went home does not steal at once when it runs dry: it
//!   parks for a pause (50 µs, doubled each time in a row up to 2 ms; any work of its own, a
//!   wake-up, a spawn or a lock's failed trial ends it), then steals one ULT as a probe (which may
//!   move home at once). A probe that stays starts a probation: the processor goes on stealing one
//!   ULT at a time, each a probe, and only once probes have stayed for [`PROBATION_US`] (1 ms) does
//!   it steal as usual again; a probe that goes home meanwhile brings the pauses back, as long as
//!   before. (One probe that stays says little: a gathered lock is taken at its home only, so it
//!   bounces no more, no sample renews its saturation, and a window after the last one it lapses;
//!   the next probe then finds it unsaturated, takes it where it stands, and stays while its
//!   bounces with the home show the saturation again, within a few dozen bounces. When the first
//!   probe that stayed ended the pauses, the next steal took half the home's runqueue back at every
//!   lapse, hundreds of contenders that bounced the lock for milliseconds until all had moved home
//!   again.) The home's drain of such ULTs wakes no helper. So the other processor keeps running
//!   whatever does not contend (one ULT at a time for the first millisecond), and steals as usual
//!   again within 3 ms of the lock no longer saturating.
//!
//! Who keeps what: the lock its [`Saturation`] (in its cold lines, its [`Trial`] among it) and
//! its counts of bounces and of acquisitions (on its hot line, `Mutex::bounces` and
//! `Mutex::acquisitions`); each processor its [`Pauses`] (a field of its owned part,
//! which the loop asks at steps 4 and 5: `processor::find`); each ULT its [`UltMarks`] (a field
//! of its TCB, on the execution line). The processor side of the move is [`gather_to`] and
//! `Processor::send_home`, here.
//!
//! Between threads: the lock's state (its `Saturation`, the holder-only `last_sample`,
//! `lapsed_at` and `trial` among it, and the counts) is written only by the lock's holder, so
//! the lock orders its writers, but for one store: a contender that finds the `saturated` mark
//! set and its last sign older than the window clears it (`Mutex::home_elsewhere`), as the next
//! sample would; racing with a sample that sets it, it may undo that one (and end the trial it
//! started, without a verdict, at the next checkpoint), and the sample after sets it again. Contenders
//! read it all as hints (`Relaxed`): a stale read moves a contender once too often or too
//! rarely, and never touches exclusion, which stays the state word's alone. A processor's name
//! in `Remote::name` is written once, before the processor runs anything, and a reader that
//! misses it finds no home: no move. `Pauses` is its processor's alone; `UltMarks` belong to the
//! processor holding the ULT, like the rest of its execution line.
//!
//! What it gives up: the parallelism of the work between two acquisitions of a saturated lock
//! (which the bounces were eating, as its trial measured; a trial that fails gives it up for
//! its 1.5 ms, 2.5 ms when its first span was not clearly worse, and the contenders' way
//! back), up to a pause of stealing and a probation of single steals for work queued behind a
//! gathered lock's contenders, and every window (10 ms, growing to 640 ms while the lock stays
//! saturated) a revocation of the home's bias by a probe, to measure the bounces again, and, at
//! a lapse more than 640 ms after the last trial, a few milliseconds spread and a trial, to
//! measure the periods again.

use super::{here, Mutex};
use crate::atomics::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use crate::processor::Processor;
use crate::slot::current_processor;
use crate::sync::host::{host_costs, HostCosts};
use crate::sync::ticks;
use crate::tcb::TcbRef;
use std::cell::{Cell, UnsafeCell};

/// Bounces per sample of a lock's bounces.
pub(super) const BOUNCES_PER_SAMPLE: u8 = 16;

/// How long (nanoseconds) the last sign of saturation counts.
const GATHER_WINDOW_NS: f64 = 10_000_000.0;

/// Acquisitions between two checkpoints of a lock's trial (module docs, "Saturation"): the
/// wrap of the holder's `u8` count of acquisitions (`Mutex::acquisitions`).
pub(super) const ACQUISITIONS_PER_CHECKPOINT: u64 = 256;

/// How long (nanoseconds) a trial lets the contenders gather before it times the gathered lock.
const TRIAL_SETTLE_NS: f64 = 500_000.0;

/// How long (nanoseconds) a trial times the gathered lock, and how long the spread lock's period
/// is timed each time.
const TRIAL_SPAN_NS: f64 = 1_000_000.0;

/// How long (nanoseconds) after its saturation ended a lock is left before its spread period is
/// timed: the longest pause of stealing ([`STEAL_PAUSE_MAX`]) and the probation
/// ([`PROBATION_US`]), after which the thieves steal as usual again and the contenders are spread.
const SPREAD_SETTLE_NS: f64 = 3_000_000.0;

/// A trial fails when the gathered lock's period per acquisition exceeds the spread one's by
/// more than this fraction (in twentieths: 21/20, 5 %).
const TRIAL_MARGIN_TWENTIETHS: u64 = 21;

/// The most spans a trial times the gathered lock: it passes at the first whose period is
/// within the margin, and fails only when none of them was (one span may take in a spell when
/// the OS took the home's thread off its CPU).
const TRIAL_SPANS: u8 = 2;

/// Spans of the spread lock a trial needs timed first (its spread period the least of them): one
/// may be slow for a cause that passes (the program starting, its ULTs being spawned and stolen),
/// and a trial against it would pass where gathering does not pay, and be trusted for
/// [`TRIAL_TRUST_NS`].
const SPREAD_SPANS: u8 = 2;

/// A trial fails at its first span, without timing another, when the gathered lock's period
/// exceeds the spread one's by more than this fraction (in halves: 3/2, 50 %), both as timed and
/// without the span's longest time between two checkpoints (which holds a spell when the OS took
/// the home's thread off its CPU, if one fell in the span).
const TRIAL_CLEAR_FAIL_HALVES: u64 = 3;

/// How long (nanoseconds) a lock whose trial failed may not saturate again, after its first
/// failure in a row; four times as long each failure in a row after that, up to
/// [`MAX_WINDOW_DOUBLINGS`] doublings (10, 40, 160, 640 ms).
const HOLD_OFF_NS: f64 = 10_000_000.0;

/// How long (nanoseconds) after a trial passed the lock saturates again without one (after a
/// lapse, or slow bounces): as long as the longest window, so that a gathered lock's lapses,
/// which come sooner, re-check its bounces only, and one whose load changed is tried again
/// within two of its longest windows.
const TRIAL_TRUST_NS: f64 = 640_000_000.0;

/// The most doublings of a lock's saturation window (module docs, "Saturation"; two at a time):
/// 10 ms at first, at most 640 ms.
pub(super) const MAX_WINDOW_DOUBLINGS: u8 = 6;

/// The least time (nanoseconds) between two moves of one ULT.
const MOVE_GAP_NS: f64 = 100_000.0;

/// The first pause of stealing (microseconds) of a processor gone idle after sending ULTs to a
/// lock's home; each such idle step in a row doubles it, up to [`STEAL_PAUSE_MAX`].
const STEAL_PAUSE_MIN: u32 = 50;

/// How long (microseconds) the probes stolen after a pause must keep staying, none of them going
/// home, before the thief steals as usual again ([`Pauses::before_steal`], module docs,
/// "Thieves"): longer than a probe takes to show a lapsed lock saturated again (a few dozen
/// bounces), shorter than the longest pause.
const PROBATION_US: u32 = 1000;

/// The longest pause of stealing (microseconds): how long an idle processor may leave ULTs it
/// could steal waiting while a lock's contenders gather elsewhere.
const STEAL_PAUSE_MAX: u32 = 2000;

/// The saturation threshold (bounces closer than this on average: [`HostCosts::gather_gap_ns`];
/// 0, which no average is below, while the host's line round trip is unmeasured),
/// [`GATHER_WINDOW_NS`] and [`MOVE_GAP_NS`], in time-stamp ticks. The threshold is derived again
/// at each call (the line round trip is measured again while the process runs: `sync::host`);
/// it is read at one bounce in [`BOUNCES_PER_SAMPLE`].
pub(super) fn gather_ticks() -> (u64, u64, u64) {
    let t = times();
    (threshold_of(&host_costs()), t.window, t.move_gap)
}

/// The gathering's fixed times in ticks ([`times`]).
#[derive(Clone, Copy)]
pub(super) struct Times {
    /// [`GATHER_WINDOW_NS`].
    pub(super) window: u64,
    /// [`MOVE_GAP_NS`].
    pub(super) move_gap: u64,
    /// [`PROBATION_US`].
    pub(super) probation: u64,
    /// [`TRIAL_SETTLE_NS`].
    pub(super) settle: u64,
    /// [`TRIAL_SPAN_NS`].
    pub(super) span: u64,
    /// [`SPREAD_SETTLE_NS`].
    pub(super) spread_settle: u64,
    /// [`HOLD_OFF_NS`].
    pub(super) hold_off: u64,
    /// [`TRIAL_TRUST_NS`].
    pub(super) trust: u64,
}

/// [`Times`]: the gathering's windows, gaps and trial times in ticks (the clock's rate is
/// measured once, so they are converted once).
#[inline]
pub(super) fn times() -> Times {
    static TICKS: std::sync::OnceLock<Times> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let costs = host_costs();
        let (_, window, move_gap) = gather_ticks_of(&costs);
        let ticks = |ns: f64| (ns * costs.ticks_per_ns) as u64;
        Times {
            window,
            move_gap,
            probation: ticks(f64::from(PROBATION_US) * 1000.0),
            settle: ticks(TRIAL_SETTLE_NS),
            span: ticks(TRIAL_SPAN_NS),
            spread_settle: ticks(SPREAD_SETTLE_NS),
            hold_off: ticks(HOLD_OFF_NS),
            trust: ticks(TRIAL_TRUST_NS),
        }
    })
}

/// The saturation threshold in ticks on a host with `costs`.
fn threshold_of(costs: &HostCosts) -> u64 {
    (costs.gather_gap_ns() * costs.ticks_per_ns) as u64
}

/// [`gather_ticks`] on a host with `costs`.
fn gather_ticks_of(costs: &HostCosts) -> (u64, u64, u64) {
    let ticks = |ns: f64| (ns * costs.ticks_per_ns) as u64;
    (threshold_of(costs), ticks(GATHER_WINDOW_NS), ticks(MOVE_GAP_NS))
}

// The lock's part.

/// A lock's gathering state, in its cold lines (`Cold`, "Layout" in `sync::mutex`): how fast it
/// bounces, whether it is saturated, and where it gathers its contenders.
pub(super) struct Saturation {
    /// Ticks between two bounces (acquisitions from another processor than the one before), on
    /// average (a moving average of one gap timed out of every [`BOUNCES_PER_SAMPLE`] bounces);
    /// `u64::MAX` before the first. Read by waiters deciding whether the lock is saturated.
    pub(super) gap: AtomicU64,
    /// Whether `gap` last crossed below the threshold rather than above four times it.
    pub(super) saturated: AtomicBool,
    /// Time stamp of the last counted sample of bounces (not one spanning a quiet spell), or of
    /// the sample that found saturation lapsed and started over: saturation lapses when it is
    /// older than the window.
    pub(super) recent: AtomicU64,
    /// Doublings of the window (at most [`MAX_WINDOW_DOUBLINGS`]): one each time saturation,
    /// lapsed, was shown again within a (base) window of the lapse; none once the bounces are
    /// slow (the average above four times the threshold) or saturation comes later than that.
    pub(super) doublings: AtomicU8,
    /// Time stamp of the last lapse (0: none yet); holder-only.
    lapsed_at: UnsafeCell<u64>,
    /// Where a word never biased gathers its contenders (a processor's name, `sync::lock_word`;
    /// 0: nowhere yet): the holder's processor when the lock was first found saturated.
    pub(super) home: AtomicUsize,
    /// Time stamp of the bounce that opens the timed gap of the current sample (the
    /// `BOUNCES_PER_SAMPLE - 1`-th; 0: not taken yet), for `gap`; holder-only.
    last_sample: UnsafeCell<u64>,
    /// The lock's periods, spread and gathered, and its trials; holder-only.
    pub(super) trial: UnsafeCell<Trial>,
}

/// A lock's trial of its saturation (module docs, "Saturation"), written at its checkpoints
/// (one acquisition in [`ACQUISITIONS_PER_CHECKPOINT`]) and when it saturates; holder-only. The
/// lock's period (ticks per [`ACQUISITIONS_PER_CHECKPOINT`] acquisitions) is timed over a span
/// ([`TRIAL_SPAN_NS`]) in either state, after a settling time: spread (not saturated) over and
/// over, the last span's period kept for the next trial; gathered once, by the trial.
pub(super) struct Trial {
    /// Whether the last checkpoint found the lock saturated (or a trial started since).
    gathered: bool,
    /// Whether the lock was ever saturated: its spread period is then timed only once the
    /// contenders had time to spread again ([`SPREAD_SETTLE_NS`]).
    ever_gathered: bool,
    /// Time stamp of the start of the current state (as the checkpoints see it).
    since: u64,
    /// Time stamp of the checkpoint that opens the current span (0: the state is settling).
    mark: u64,
    /// Spans the trial timed so far, all of them failed.
    spans: u8,
    /// Checkpoints since `mark`.
    checkpoints: u64,
    /// Time stamp of the last checkpoint (0: none yet in the current span).
    last: u64,
    /// The longest time between two checkpoints in a row since `mark`.
    longest: u64,
    /// Samples of bounces (each [`BOUNCES_PER_SAMPLE`] bounces) since `mark`.
    samples: u64,
    /// The spread lock's period, of the last span timed in the current spread state (0: none
    /// yet): a trial needs one.
    pub(super) spread: u64,
    /// Spans that timed `spread` (at most [`SPREAD_SPANS`] counted).
    spread_spans: u8,
    /// Whether a trial is under way (the lock saturated, its gathered period not yet timed;
    /// never for a saturation trusted after a trial that passed).
    pub(super) running: bool,
    /// Trials failed in a row.
    pub(super) failures: u8,
    /// Time stamp before which the lock may not saturate (a failed trial's hold-off; 0: none).
    pub(super) held_off_until: u64,
    /// Time stamp of the last trial that passed (0: none since the last failure): within
    /// [`TRIAL_TRUST_NS`] of it the lock saturates again without a trial.
    pub(super) passed_at: u64,
}

impl Trial {
    /// The lock in another state (`gathered`) from `now` on, as its checkpoints see it: what
    /// was timed was the other state's, a trial under way ends without a verdict, and the new
    /// state settles before its spans are timed.
    fn restart(&mut self, gathered: bool, now: u64) {
        self.gathered = gathered;
        self.ever_gathered |= gathered;
        self.since = now;
        self.mark = 0;
        self.running = false;
        self.spread = 0;
        self.spread_spans = 0;
    }

    /// A span opens at the checkpoint `now`.
    fn open_span(&mut self, now: u64) {
        self.mark = now;
        self.last = now;
        self.longest = 0;
        self.checkpoints = 0;
        self.samples = 0;
    }
}

impl Saturation {
    pub(super) const fn new() -> Saturation {
        Saturation {
            gap: AtomicU64::new(u64::MAX),
            saturated: AtomicBool::new(false),
            recent: AtomicU64::new(0),
            doublings: AtomicU8::new(0),
            lapsed_at: UnsafeCell::new(0),
            home: AtomicUsize::new(0),
            last_sample: UnsafeCell::new(0),
            trial: UnsafeCell::new(Trial {
                gathered: false,
                ever_gathered: false,
                since: 0,
                mark: 0,
                spans: 0,
                checkpoints: 0,
                last: 0,
                longest: 0,
                samples: 0,
                spread: 0,
                spread_spans: 0,
                running: false,
                failures: 0,
                held_off_until: 0,
                passed_at: 0,
            }),
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    /// A bounce (`LockWord::lock_fast`: the caller holds the lock, taken from another processor
    /// than the acquisition before): counted; of every [`BOUNCES_PER_SAMPLE`], the gap between
    /// the last two is timed.
    #[inline(always)]
    pub(super) fn bounced(&self) {
        self.bounced_with(ticks);
    }

    /// [`Mutex::bounced`] with the clock `now`, read only for the two bounces timed (the tests
    /// give time stamps of their own, so that what they check is the rule, not the speed of
    /// the machine running them).
    #[inline(always)]
    pub(super) fn bounced_with(&self, now: impl FnOnce() -> u64) {
        // SAFETY: only the holder of the lock reads or writes the counter.
        let n = unsafe { &mut *self.bounces.get() };
        *n += 1;
        if *n >= BOUNCES_PER_SAMPLE - 1 {
            self.sample_bounces(n, now());
        }
    }

    /// The last two bounces of every [`BOUNCES_PER_SAMPLE`] (`n`, the count, is at the first of
    /// them or the last; `now`, the time stamp of this one): the first keeps its time stamp;
    /// the last times the gap since, which updates the moving average of the time between
    /// bounces and renews the sign of saturation, and starts the count over. The caller holds
    /// the lock.
    #[cold]
    #[inline(never)]
    fn sample_bounces(&self, n: &mut u8, now: u64) {
        let s = &self.cold.saturation;
        // SAFETY: only the holder of the lock reads or writes the stamp, and this is its only
        // reference.
        let prev = unsafe { &mut *s.last_sample.get() };
        if *n < BOUNCES_PER_SAMPLE {
            *prev = now; // opens the gap the next bounce closes
            return;
        }
        *n = 0;
        // SAFETY: only the holder of the lock reads or writes the trial.
        unsafe { (*s.trial.get()).samples += 1 };
        let gap = now.wrapping_sub(*prev);
        // A gap that spans a quiet spell (16 times the threshold and more: its contenders
        // gathered, it is seldom taken, or the OS took a processor's thread off its CPU between
        // the two) says nothing about how fast it bounces when it does.
        let (threshold, base, _) = gather_ticks();
        let window = self.window(base);
        // SAFETY: only the holder of the lock reads or writes the stamp (as `last_sample`).
        let lapsed_at = unsafe { &mut *s.lapsed_at.get() };
        let lapsed = now.wrapping_sub(s.recent.load(Ordering::Relaxed)) as i64 >= window as i64;
        if lapsed {
            // Saturation lapsed (no sample counted for the window): it must be shown again, by
            // the samples after this one, which starts the window over.
            // (A lapse of saturation only where the average said saturated: not the lock's first
            // sample, nor one after slow bounces.)
            let was = s.gap.swap(u64::MAX, Ordering::Relaxed) < threshold;
            s.saturated.store(false, Ordering::Relaxed);
            s.recent.store(now, Ordering::Relaxed);
            *lapsed_at = if was { now | 1 } else { 0 }; // (never 0 for a lapse)
        } else if *prev != 0 && gap < threshold * 16 {
            let old = s.gap.load(Ordering::Relaxed);
            let avg = if old == u64::MAX { gap } else { (old / 4) * 3 + gap / 4 };
            s.gap.store(avg, Ordering::Relaxed);
            // Saturated below the threshold, no longer above four times it (between the two,
            // as it was: the average moves about while contenders gather and thieves probe).
            if avg < threshold {
                // A candidate: saturated anew if its trial may start (module docs,
                // "Saturation": a spread period timed, no hold-off).
                if !s.saturated.load(Ordering::Relaxed) && self.start_trial(now) {
                    s.saturated.store(true, Ordering::Relaxed);
                    // Saturated anew. Within a window of its lapse: the lapse re-measured what
                    // was known, at the cost of a revoked bias and a thief's probe, and the next
                    // re-check comes four times as late (a run of a fraction of a second reaches
                    // the longest window after three lapses); later, or the first time: at the
                    // base window.
                    let d = s.doublings.load(Ordering::Relaxed);
                    let again = *lapsed_at != 0 && (now.wrapping_sub(*lapsed_at) as i64) < base as i64;
                    let d = if again { (d + 2).min(MAX_WINDOW_DOUBLINGS) } else { 0 };
                    s.doublings.store(d, Ordering::Relaxed);
                }
            } else if avg > threshold * 4 {
                s.saturated.store(false, Ordering::Relaxed);
                s.doublings.store(0, Ordering::Relaxed); // slow bounces: re-check as often as before
                *lapsed_at = 0;
            }
            // Only a counted sample renews saturation: bounces that keep coming, but slower
            // than 16 times the threshold, let it lapse.
            s.recent.store(now, Ordering::Relaxed);
        }
        *prev = 0;
        if s.home.load(Ordering::Relaxed) == 0 && self.saturated() {
            // A home for a word never biased: the holder's processor, where the bias will
            // then form.
            s.home.store(here(), Ordering::Relaxed);
        }
    }

    /// A candidate for saturation (its bounces closer than the threshold): whether its trial
    /// may start at `now`, and if so starts it. Not while held off after a failed trial, nor
    /// before the spread lock's period was timed (module docs, "Saturation"). The caller holds
    /// the lock.
    fn start_trial(&self, now: u64) -> bool {
        // SAFETY: only the holder of the lock reads or writes the trial, and this is its only
        // reference.
        let t = unsafe { &mut *self.cold.saturation.trial.get() };
        if t.held_off_until != 0 && (now.wrapping_sub(t.held_off_until) as i64) < 0 {
            return false;
        }
        let times = times();
        let trusted = t.passed_at != 0 && (now.wrapping_sub(t.passed_at) as i64) < times.trust as i64;
        if t.spread_spans < SPREAD_SPANS && !trusted {
            return false;
        }
        t.held_off_until = 0;
        t.running = !trusted;
        t.spans = 0;
        t.gathered = true;
        t.ever_gathered = true;
        t.since = now;
        t.mark = 0;
        t.checkpoints = 0;
        true
    }

    /// An acquisition (the caller holds the lock, however it took it): counted; one in
    /// [`ACQUISITIONS_PER_CHECKPOINT`] is a checkpoint of the lock's trial.
    #[inline(always)]
    pub(super) fn acquired(&self) {
        const { assert!(ACQUISITIONS_PER_CHECKPOINT == 1 << u8::BITS) };
        // SAFETY: only the holder of the lock reads or writes the counter.
        let n = unsafe { &mut *self.acquisitions.get() };
        *n = n.wrapping_add(1);
        if *n == 0 {
            self.checkpoint();
        }
    }

    /// [`Mutex::checkpoint_with`] now (out of line, clock read included: the acquisition's
    /// inlined part is an increment and a test).
    #[cold]
    #[inline(never)]
    fn checkpoint(&self) {
        self.checkpoint_with(ticks());
    }

    /// A checkpoint of the lock's trial at `now` ([`ACQUISITIONS_PER_CHECKPOINT`] acquisitions
    /// since the last; module docs, "Saturation"): times the lock's period in its state, and
    /// gives a trial's verdict once the gathered period is timed. The tests give time stamps
    /// of their own. The caller holds the lock.
    #[cold]
    #[inline(never)]
    pub(super) fn checkpoint_with(&self, now: u64) {
        let s = &self.cold.saturation;
        // SAFETY: only the holder of the lock reads or writes the trial, and this is its only
        // reference.
        let t = unsafe { &mut *s.trial.get() };
        let times = times();
        let gathered = self.saturated_at(now);
        if gathered != t.gathered {
            // Another state since the last checkpoint (saturation lapsed, slow bounces ended
            // it, or it was marked from outside).
            t.restart(gathered, now);
        }
        if gathered && !t.running {
            return; // a trial passed: nothing to time until the lock is spread again
        }
        let settle = match (gathered, t.ever_gathered) {
            (true, _) => times.settle,
            (false, true) => times.spread_settle,
            (false, false) => 0, // never gathered: its contenders are where they were spread
        };
        if t.mark == 0 {
            if now.wrapping_sub(t.since) as i64 >= settle as i64 {
                t.open_span(now);
            }
            return;
        }
        t.checkpoints += 1;
        t.longest = t.longest.max(now.wrapping_sub(t.last));
        t.last = now;
        let span = now.wrapping_sub(t.mark);
        if (span as i64) < times.span as i64 {
            return;
        }
        let period = span / t.checkpoints;
        let (checkpoints, samples, longest) = (t.checkpoints, t.samples, t.longest);
        t.open_span(now);
        if !gathered {
            // A span of more than four took in a quiet spell (or the lock is too slow to be
            // worth gathering: 256 acquisitions in 4 ms): no period.
            if span / 4 <= times.span && checkpoints >= 2 && samples >= checkpoints {
                t.spread = if t.spread == 0 { period } else { t.spread.min(period) };
                t.spread_spans = (t.spread_spans + 1).min(SPREAD_SPANS);
            }
            return;
        }
        // The verdict: passed at the first span within the margin, failed once none of
        // [`TRIAL_SPANS`] was, or at once when this one is clearly worse: its period above the
        // spread one by [`TRIAL_CLEAR_FAIL_HALVES`], and so without its longest time between two
        // checkpoints (a spell of the home's thread off its CPU, if one fell in the span, is in
        // that one, and would fail a trial that pays).
        if period.saturating_mul(20) <= t.spread.saturating_mul(TRIAL_MARGIN_TWENTIETHS) {
            t.running = false;
            t.failures = 0;
            t.passed_at = now | 1; // (never 0)
            return;
        }
        t.spans += 1;
        let clearly_worse = |p: u64| p.saturating_mul(2) > t.spread.saturating_mul(TRIAL_CLEAR_FAIL_HALVES);
        let without_longest = (span - longest) / (checkpoints - 1).max(1);
        let clear = checkpoints >= 2 && clearly_worse(period) && clearly_worse(without_longest);
        if t.spans < TRIAL_SPANS && !clear {
            return;
        }
        // Failed: spread again, held off for longer each failure in a row.
        t.passed_at = 0;
        t.failures = t.failures.saturating_add(1);
        let shift = (2 * u32::from(t.failures - 1)).min(u32::from(MAX_WINDOW_DOUBLINGS));
        t.held_off_until = now.wrapping_add(times.hold_off << shift) | 1; // (never 0)
        s.saturated.store(false, Ordering::Relaxed);
        s.doublings.store(0, Ordering::Relaxed);
        // SAFETY: only the holder of the lock reads or writes the stamp (as `last_sample`).
        unsafe { *s.lapsed_at.get() = 0 }; // (no lapse: the next saturation is anew)
        t.restart(false, now);
        let _ = end_pauses();
    }

    /// [`Mutex::saturated`] at the time stamp `now` (the holder's checkpoint).
    fn saturated_at(&self, now: u64) -> bool {
        let s = &self.cold.saturation;
        s.saturated.load(Ordering::Relaxed)
            && (now.wrapping_sub(s.recent.load(Ordering::Relaxed)) as i64)
                < self.window(times().window) as i64
    }

    /// Whether the lock is saturated: it bounced between processors less than the threshold
    /// ([`HostCosts::gather_gap_ns`]) apart on average and its trial started (and has not
    /// failed), and the last sign of it is recent.
    #[inline(never)]
    pub(super) fn saturated(&self) -> bool {
        let s = &self.cold.saturation;
        if !s.saturated.load(Ordering::Relaxed) {
            return false;
        }
        // (`recent` first: a later store, or another core's clock, then reads as a small
        // negative age, not as a huge one.)
        let recent = s.recent.load(Ordering::Relaxed);
        (ticks().wrapping_sub(recent) as i64) < self.window(times().window) as i64
    }

    /// The lock's saturation window in ticks: `base` ([`GATHER_WINDOW_NS`] in ticks) multiplied
    /// by four each time saturation was shown again at once after a lapse (module docs, "Saturation").
    #[inline]
    fn window(&self, base: u64) -> u64 {
        base << self.cold.saturation.doublings.load(Ordering::Relaxed)
    }

    /// Whether a caller on processor `me` that found the lock unbiased leaves it alone and takes
    /// the contended path, to move to the lock's home there: the lock is saturated and its home
    /// is another processor. Taking it here, even free, would move its line once more (a
    /// saturated lock is seldom found held: its critical sections are short, and its contenders
    /// would never take the contended path, where they move). One relaxed load while the lock
    /// is not saturated.
    #[inline(always)]
    pub(super) fn gathers_elsewhere(&self, me: usize) -> bool {
        me != 0 && self.cold.saturation.saturated.load(Ordering::Relaxed) && self.home_elsewhere(me)
    }

    /// [`Mutex::gathers_elsewhere`] of a lock marked saturated: whether its saturation is recent,
    /// its home another processor than `me`, and the caller one that may move there (a ULT, not
    /// pinned, of a runtime that gathers).
    #[cold]
    #[inline(never)]
    fn home_elsewhere(&self, me: usize) -> bool {
        if self.home().is_none_or(|(home, _)| home == me) {
            return false;
        }
        // Only a caller that may move ([`gather_to`]'s standing reasons): in a runtime that does
        // not gather, or as a pinned ULT, it takes the lock where it is, without the detour.
        let Some(p) = current_processor() else { return false };
        if !p.gather_locks || p.current_ult().is_none_or(|u| u.tcb().head.pinned.get()) {
            return false;
        }
        if self.saturated() {
            return true;
        }
        // Lapsed: as the next sample would, mark it so, and the callers of the unbiased path
        // stop asking the clock (a hint like the mark itself: a sample that sets it again
        // meanwhile is undone at worst, and shown again by the next).
        self.cold.saturation.saturated.store(false, Ordering::Relaxed);
        false
    }

    /// The lock's home (module docs, "Home"), and whether the word is biased to it; none yet.
    #[inline]
    fn home(&self) -> Option<(usize, bool)> {
        self.state.home().or_else(|| match self.cold.saturation.home.load(Ordering::Relaxed) {
            0 => None,
            h => Some((h, false)),
        })
    }

    /// The one move of a `lock` call, while `may_move` (cleared once the rule has decided,
    /// whichever way): moves as [`Mutex::gather`] says, and takes the lock at the home if it is
    /// free there. True if it took it.
    #[inline]
    pub(super) fn move_and_take(&self, may_move: &mut bool) -> bool {
        if !*may_move {
            return false;
        }
        let Some(moved) = self.gather(here()) else { return false };
        *may_move = false;
        moved && self.state.lock_fast(here(), || self.bounced())
    }

    /// The gathering rule of a saturated lock, for a caller on processor `me`: if its home is
    /// another processor, move there.
    /// `None`: no reason to move now; `Some(true)`: moved (the caller runs on the home now);
    /// `Some(false)`: no move for the rest of this call (an OS thread, a pinned ULT, one that
    /// moved less than 100 µs ago, gathering off, or a home that is parked or no processor of
    /// the caller's runtime).
    #[inline]
    fn gather(&self, me: usize) -> Option<bool> {
        let (home, _) = self.home()?;
        if home == me {
            return None;
        }
        let min_gap = times().move_gap;
        Some(me != 0 && gather_to(home, ticks(), min_gap))
    }
}

// The move.

/// Moves the running ULT to the processor named `home` (a processor's address, as a mutex's bias
/// names its owner), where it goes on after the switch (`now`: the time stamp of the call). True
/// if it moved; false, with nothing done, outside a ULT, for a pinned ULT or one that moved less
/// than `min_gap` ticks ago (two saturated locks with two homes would otherwise move it at every
/// call) or one that unwinds a panic, in a `central` runtime or one built with `gather_locks(false)`, or when `home` is the
/// caller's processor, none of its runtime's, or parked.
#[cold]
#[inline(never)]
fn gather_to(home: usize, now: u64, min_gap: u64) -> bool {
    let Some(p) = current_processor() else { return false };
    if !p.gather_locks || std::ptr::eq(p, home as *const Processor) {
        return false;
    }
    let Some(me) = p.current_ult() else { return false };
    let tcb = me.tcb();
    if tcb.head.placed.get() || (now.wrapping_sub(tcb.exec.gather.moved_at()) as i64) < min_gap as i64 {
        return false;
    }
    if std::thread::panicking() {
        return false; // an unwinding ULT does not leave its OS thread (`crate::anchor`)
    }
    let Some(target) = p.shared.processors.iter().position(|r| r.name.load(Ordering::Relaxed) == home) else {
        return false;
    };
    if p.shared.processors[target].park.is_parked() {
        return false; // the lock is not busy there; waking its home would cost more
    }
    tcb.exec.gather.note_move(now);
    // SAFETY: `me` is the ULT running this code.
    unsafe { crate::switch::park_ult(me, move |t, q| q.send_home(t, target)) };
    true
}

/// A trial failed (`Mutex::checkpoint_with`): the processors of the caller's runtime parked
/// for a pause of stealing (module docs, "Thieves") are woken, so that they steal a probe at
/// once instead of at the end of the pause (up to 2 ms): the contenders they sent home may come
/// back now. A notification like any waker's (`crate::park`): a processor that is not parked
/// yet, or pauses for another reason, wakes for nothing or not at all, and at worst pauses as
/// long as before. Returns how many processors it unparked.
#[cold]
fn end_pauses() -> usize {
    let Some(p) = current_processor() else { return 0 };
    p.shared.processors.iter().filter(|r| r.park.is_pausing() && r.park.notify()).count()
}

impl Processor {
    /// After `t` switched out to move to processor `target` ([`gather_to`]): onto its wake-up
    /// stack, marked as homing (so that its drain wakes no helper), waking `target` if it sleeps.
    fn send_home(&self, t: TcbRef, target: usize) {
        self.remote().stats.gathered.bump();
        self.pauses().note_sent_home();
        t.tcb().exec.gather.set_homing();
        self.shared.push_wakeup(t, target); // (no helper wanted: see `maintain`)
    }
}

// The processor's part: its pauses of stealing.

/// A processor's part of the gathering, in its owned state (`processor::Core`): the ULTs it sent
/// to a lock's home, and its pause of stealing. The loop asks it at step 4 (may it steal, and is
/// the steal a probe: [`Pauses::before_steal`], [`Pauses::probing`], [`Pauses::note_probe`]) and
/// at step 5 (does it pause instead of looking for work: [`Pauses::on_idle`]).
pub(crate) struct Pauses {
    /// ULTs this processor sent to a lock's home since it was last idle ([`gather_to`]).
    sent_home: u32,
    /// How long (microseconds) this processor stops stealing when it goes idle after sending
    /// ULTs home; 0 when it did not last time, or its probes stayed for the probation.
    steal_pause: u32,
    /// A probe (one ULT stolen after a pause) was taken since the last steal.
    probed: bool,
    /// Time stamp of the first steal after a probe that stayed (none went home since; 0: none
    /// since the last pause or idle step): the start of the probation, which ends the pauses
    /// once [`PROBATION_US`] old.
    stayed_since: u64,
}

impl Pauses {
    pub(crate) const fn new() -> Pauses {
        Pauses { sent_home: 0, steal_pause: 0, probed: false, stayed_since: 0 }
    }

    /// A ULT that ran here went to a lock's home (`Processor::send_home`).
    #[inline]
    fn note_sent_home(&mut self) {
        self.sent_home += 1;
    }

    /// Step 4: whether this processor may steal now. Not while ULTs that ran here went home since
    /// its last idle step: it pauses first ([`Pauses::on_idle`]). A probe taken at the last steal
    /// that is still here (it did not go home) starts the probation, or ends the pauses once
    /// the probation is [`PROBATION_US`] old: until then each steal takes one ULT, another
    /// probe.
    #[inline]
    pub(crate) fn before_steal(&mut self) -> bool {
        if self.sent_home > 0 {
            self.probed = false; // (went home, or others did)
            self.stayed_since = 0;
            return false;
        }
        if std::mem::take(&mut self.probed) {
            self.probe_stayed(ticks());
        }
        true
    }

    /// A probe stayed (at `now`): the probation starts, or, once old enough, the pauses end.
    #[cold]
    fn probe_stayed(&mut self, now: u64) {
        if self.stayed_since == 0 {
            self.stayed_since = now | 1; // (never 0)
        } else if (now.wrapping_sub(self.stayed_since) as i64) >= times().probation as i64 {
            self.steal_pause = 0; // the probes stayed: steal as usual again
            self.stayed_since = 0;
        }
    }

    /// Whether a steal from a runqueue now is a probe (after a pause, until the probation is
    /// over): one ULT, to see whether such ULTs still go home. The probe may go home at once, however recently it came
    /// ([`UltMarks::forget_move`]).
    #[inline]
    pub(crate) fn probing(&self) -> bool {
        self.steal_pause > 0
    }

    /// After a steal from a runqueue: whether it took a probe (a ULT to run here, not a pinned
    /// one sent back).
    #[inline]
    pub(crate) fn note_probe(&mut self, taken: bool) {
        self.probed = taken;
    }

    /// Step 5: the pause of stealing (microseconds) when ULTs went home from here since the last
    /// idle step (what it would steal now may well go the same way), longer each time in a row;
    /// `None` (and the pauses over) otherwise.
    #[inline]
    pub(crate) fn on_idle(&mut self) -> Option<u32> {
        self.stayed_since = 0;
        if std::mem::take(&mut self.sent_home) > 0 {
            self.steal_pause = (self.steal_pause * 2).clamp(STEAL_PAUSE_MIN, STEAL_PAUSE_MAX);
            return Some(self.steal_pause);
        }
        self.steal_pause = 0;
        None
    }
}

// The ULT's part: its marks in the TCB.

/// Bit 0 of [`UltMarks`]' word: the ULT is on its way to a lock's home.
const HOMING: u64 = 1;

/// A ULT's part of the gathering, in its TCB (`Tcb::gather`, on the execution line): when it
/// last moved to a lock's home, and whether it is on its way to one now.
///
/// Both in one word, as the execution line has 8 bytes for them (it is full: a flag of its own
/// would push line 4 down, and that line's last word, the prefetch word, onto line 5): the time
/// stamp of the last move (0: none, or a former ULT's of this TCB, which at most delays a move)
/// with bit 0 clear (a stamp is kept to an even tick, nothing next to the 100 µs it is compared
/// with), and the homing flag in bit 0. The stamp is written and read by the ULT itself
/// ([`gather_to`]), and reset by a thief that takes the ULT as a probe (before it runs there);
/// the flag is set by the processor the ULT leaves, before the push onto the home's wake-up
/// stack, and cleared by the home when it drains that stack (whose push and drain order the two).
pub(crate) struct UltMarks(Cell<u64>);

impl UltMarks {
    pub(crate) const fn new() -> UltMarks {
        UltMarks(Cell::new(0))
    }

    /// The time stamp of the ULT's last move (0: none).
    #[inline]
    fn moved_at(&self) -> u64 {
        self.0.get() & !HOMING
    }

    /// The ULT moves now (it runs, so it is not homing).
    #[inline]
    fn note_move(&self, now: u64) {
        self.0.set(now & !HOMING);
    }

    /// A thief took the ULT as a probe: it may move home at once, however recently it came.
    #[inline]
    pub(crate) fn forget_move(&self) {
        self.0.set(0);
    }

    /// The ULT is being sent to a lock's home (`Processor::send_home`).
    #[inline]
    fn set_homing(&self) {
        self.0.set(self.0.get() | HOMING);
    }

    /// Whether the ULT is on its way to a lock's home (left as it is).
    #[inline]
    pub(crate) fn is_homing(&self) -> bool {
        self.0.get() & HOMING != 0
    }

    /// The home drained the ULT from its wake-up stack (`Processor::maintain`): whether it came
    /// to be gathered (the flag, cleared).
    #[inline(always)]
    pub(crate) fn take_homing(&self) -> bool {
        if self.0.get() & HOMING == 0 {
            return false;
        }
        self.clear_homing();
        true
    }

    /// [`UltMarks::take_homing`]'s clearing, out of line: the drain's test of every woken ULT
    /// then reads the word in the test itself, one instruction, as it did a flag of its own.
    #[inline(never)]
    fn clear_homing(&self) {
        self.0.set(self.0.get() & !HOMING);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_saturation_threshold_is_eight_measured_line_round_trips() {
        // A host whose lines cross in 100 ns there and back, 2 ticks a nanosecond: bounces less
        // than 800 ns (1600 ticks) apart make a candidate (saturated if its trial says so), and
        // more than 3200 ns (6400 ticks) end a saturation.
        let mut costs = HostCosts::scripted(2.0, 2000.0, 100.0, 10.0);
        costs.ticks_per_ns = 2.0;
        let (gap, window, move_gap) = gather_ticks_of(&costs);
        assert_eq!((gap, gap * 4), (1600, 6400));
        assert_eq!((window, move_gap), (20_000_000, 200_000));
        // Where lines take 300 ns, bounces 2400 ns apart still make a candidate.
        costs.line_round_trip_ns = 300.0;
        assert_eq!(gather_ticks_of(&costs).0, 4800);
    }

    /// A thief whose probe stays after a pause goes on probing, one ULT per steal, until its
    /// probes have stayed for the probation: one probe that stays (it may only have found the
    /// lock's saturation lapsed, for want of bounces while its contenders were gathered) does
    /// not end the pauses, so the next steal does not take half the home's runqueue back. A
    /// probe that goes home during the probation brings the pauses back, as long as before.
    #[test]
    fn a_thief_probes_one_ult_at_a_time_until_its_probes_stayed_for_the_probation() {
        let mut p = Pauses::new();
        p.note_sent_home();
        assert_eq!(p.on_idle(), Some(STEAL_PAUSE_MIN), "ULTs went home: a pause");
        assert!(p.before_steal() && p.probing(), "after the pause: one ULT, a probe");
        p.note_probe(true);
        // The probe stayed: still one ULT at a time.
        assert!(p.before_steal() && p.probing(), "one probe that stayed does not end the pauses");
        p.note_probe(true);
        assert!(p.before_steal() && p.probing());
        p.note_probe(true);
        // One of them goes home: the pauses resume, longer.
        p.note_sent_home();
        assert!(!p.before_steal());
        assert_eq!(p.on_idle(), Some(2 * STEAL_PAUSE_MIN));
        assert!(p.before_steal() && p.probing());
        p.note_probe(true);
        assert!(p.before_steal() && p.probing(), "the probation starts over");
        p.note_probe(true);
        // Probes that stay for the probation end the pauses: the next steal takes as usual.
        std::thread::sleep(std::time::Duration::from_micros(2 * u64::from(PROBATION_US)));
        assert!(p.before_steal());
        assert!(!p.probing(), "probes stayed for the probation: stealing as usual again");
        // And an idle step with nothing sent home leaves no pause.
        assert_eq!(p.on_idle(), None);
    }

    /// A failed trial's `end_pauses` unparks the processors parked for a pause of stealing, and
    /// only those: another processor parked for want of work stays parked. (The pause is
    /// simulated: the other processor parks as any idle one does, and the test marks its slot
    /// as pausing, as `pause_stealing` does before its park.)
    #[test]
    #[cfg_attr(miri, ignore = "builds a runtime (threads, stacks)")]
    fn a_failed_trial_wakes_the_processors_pausing_their_stealing_and_no_other() {
        let rt = crate::Runtime::builder().processors(2).no_chaos().build().unwrap();
        rt.block_on(|| {
            let here = current_processor().expect("on a processor");
            let other = &here.shared.processors[1 - here.index].park;
            let parked = || {
                let start = std::time::Instant::now();
                while !other.is_parked() {
                    assert!(start.elapsed().as_secs() < 10, "the other processor never parked");
                    std::hint::spin_loop();
                }
            };
            parked();
            assert!(!other.is_pausing());
            assert_eq!(end_pauses(), 0, "a processor parked for want of work is left parked");
            // Parked for a pause: woken. (It may wake by itself between the two steps, for a
            // watch period's end: try again then.)
            let woken = (0..100).any(|_| {
                parked();
                other.set_pausing(true);
                let n = end_pauses();
                other.set_pausing(false);
                n == 1
            });
            assert!(woken, "a processor pausing its stealing is woken");
        });
    }

    /// Where the line round trip could not be measured, the threshold is 0: no average of
    /// bounces is below it, so no lock saturates (the round trip's stand-in decides nothing).
    #[test]
    fn no_lock_saturates_while_the_line_round_trip_is_unmeasured() {
        let costs = HostCosts::scripted(2.0, 2000.0, 100.0, 10.0).unmeasured_lines();
        let (gap, window, move_gap) = gather_ticks_of(&costs);
        assert_eq!(gap, 0);
        assert_eq!((window, move_gap), (10_000_000, 100_000), "the windows are times, measured or not");
    }
}
