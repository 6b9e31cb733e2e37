//! Idle processors: spin briefly, then park the OS thread; wake-ups are never lost.
//!
//! # States of a processor ([`ParkSlot::state`])
//!
//! ```text
//! RUNNING --(idle, nothing found)--> PARKED --(notify: CAS PARKED->NOTIFIED, unpark)--> NOTIFIED
//!    ^                                  |                                                    |
//!    +------(timeout / re-check found work / shutdown: store RUNNING)-----------------------+
//! ```
//!
//! # Why no wake-up is lost
//!
//! A wake-up is "publish work, then look for a parked processor"; parking is "announce PARKED, then
//! look for work". Both sides use sequentially consistent operations for the announce and the look
//! (the pusher's publication is followed by `fence(SeqCst)`, the parker's announcement is a SeqCst
//! store followed by `fence(SeqCst)`), so in the single total order of SeqCst operations one of them
//! comes first and the other sees it: either the pusher sees PARKED (and unparks the thread), or the
//! parker's re-check sees the work (and does not sleep). `std::thread::park` keeps an unpark token,
//! so an unpark that lands between the re-check and the `park` call is not lost either.
//!
//! `num_parked` lets a spawner skip the scan in the common case where nobody sleeps; it is raised
//! before the parker's re-check and lowered after it wakes, so it is never low while a processor
//! could be asleep with work pending.
//!
//! A wake-up directed at one processor (its wake-up stack) unparks exactly that processor; work any
//! processor may take (a start-queue, a runqueue with more than one entry) unparks one parked
//! processor, if any.
//!
//! A spawner notifies after every push (one fence and one load while nobody is parked). A processor
//! that takes from a queue that still holds more (a steal, or a node or global take) passes a
//! wake-up on to another parked processor, so a burst of entries spreads over the idle processors.
//!
//! The loom model of this protocol is `loom_models::park` (no wake-up lost, with one and two wakers).

use crate::atomics::thread::{self, Thread};
use crate::atomics::{fence, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

const RUNNING: u8 = 0;
const PARKED: u8 = 1;
const NOTIFIED: u8 = 2;

/// The part of a processor that wakers touch to unpark it.
pub(crate) struct ParkSlot {
    state: AtomicU8,
    /// The OS thread running the processor: set by each thread that takes the processor over (at
    /// start-up, and at a blocking call's handoff, see `crate::blocking`) before it can announce
    /// PARKED; a waker reads it only after its CAS saw PARKED, which that thread stored after
    /// registering, so it finds the thread that parked. A waker that reads it without seeing PARKED
    /// (shutdown) may unpark a thread that ran the processor before: a spurious wake-up, which every
    /// park of the runtime re-checks. (It lies outside the protocol above, which is why it stays a
    /// `std` lock under loom; the lock is never held across a loom operation.)
    thread: Mutex<Option<Thread>>,
    /// Whether the processor parks for a pause of its stealing (`Processor::pause_stealing`): a
    /// hint that [`Idle::notify_one`] skips such a slot when it looks for a helper (the pause
    /// ends by itself within 2 ms); a notification aimed at the slot ([`ParkSlot::notify`])
    /// still wakes it. Outside the protocol above: a stale read only picks another slot or none
    /// (so a `std` atomic under loom too: the models' state space stays as it was).
    pausing: std::sync::atomic::AtomicBool,
    /// Whether the processor parks for a watch period, looking for stranded ULTs when it ends
    /// (`processor::find`, "Stranded ULTs"). A hint outside the protocol above, as `pausing`.
    watching: std::sync::atomic::AtomicBool,
    /// When a waker last unparked the processor (a time stamp, `sync::ticks`; 0: not since the
    /// processor took it): the processor, back from its park, measures the wake-up with it for
    /// the spin budget's running average (`sync::host`). A hint outside the protocol above, as
    /// `pausing`: a stamp read late or left over only makes one sample wrong, and samples too
    /// long to be a wake-up are dropped.
    notified_at: std::sync::atomic::AtomicU64,
    /// Whether a thread has taken the processor over yet ([`ParkSlot::register`]): until the
    /// first has, the slot reads RUNNING though no thread runs the processor's loop, and
    /// [`ParkSlot::is_running`] says no. A hint outside the protocol above, as `pausing`.
    started: std::sync::atomic::AtomicBool,
}

impl ParkSlot {
    pub(crate) fn new() -> ParkSlot {
        ParkSlot {
            state: AtomicU8::new(RUNNING),
            thread: Mutex::new(None),
            pausing: std::sync::atomic::AtomicBool::new(false),
            watching: std::sync::atomic::AtomicBool::new(false),
            notified_at: std::sync::atomic::AtomicU64::new(0),
            started: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Marks the slot as parking for a watch period, or not (see `watching`).
    pub(crate) fn set_watching(&self, watching: bool) {
        self.watching.store(watching, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the slot parks for a watch period (a hint).
    pub(crate) fn is_watching(&self) -> bool {
        self.watching.load(std::sync::atomic::Ordering::Relaxed) && self.is_parked()
    }

    /// Marks the slot as parking for a pause of stealing, or not (see `pausing`).
    pub(crate) fn set_pausing(&self, pausing: bool) {
        self.pausing.store(pausing, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the slot is parked for a pause of stealing (a hint, as `pausing`).
    pub(crate) fn is_pausing(&self) -> bool {
        self.pausing.load(std::sync::atomic::Ordering::Relaxed) && self.is_parked()
    }

    /// Records the OS thread that runs this processor from now on.
    pub(crate) fn register(&self, t: Thread) {
        *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
        self.started.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The registered thread (a clone, so that no lock is held while unparking it).
    fn thread(&self) -> Option<Thread> {
        self.thread.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Wakes this processor if it is parked. Call after publishing work it should see.
    /// Returns true if it was parked and this call unparked it.
    #[inline]
    pub(crate) fn notify(&self) -> bool {
        fence(Ordering::SeqCst);
        if self.state.load(Ordering::SeqCst) != PARKED {
            return false;
        }
        self.notify_slow()
    }

    #[cold]
    fn notify_slow(&self) -> bool {
        if self.state.compare_exchange(PARKED, NOTIFIED, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
            #[cfg(not(loom))]
            self.notified_at.store(crate::sync::ticks(), std::sync::atomic::Ordering::Relaxed);
            if let Some(t) = self.thread() {
                t.unpark();
            }
            return true;
        }
        false
    }

    /// Unparks unconditionally (shutdown). Call after publishing the shutdown flag: the fence
    /// makes this a waker like any other (the flag is the published work, which the parker's
    /// re-check reads after its own fence), so no ordering between the flag and this slot's state
    /// word has to be derived from their `SeqCst` stores alone (which loom cannot check; the model
    /// `loom_models::shutdown` can with the fence).
    pub(crate) fn force_unpark(&self) {
        fence(Ordering::SeqCst);
        self.state.store(NOTIFIED, Ordering::SeqCst);
        if let Some(t) = self.thread() {
            t.unpark();
        }
    }

    fn announce(&self, idle: &Idle) {
        idle.num_parked.fetch_add(1, Ordering::SeqCst);
        self.state.store(PARKED, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    fn retract(&self, idle: &Idle) {
        self.state.store(RUNNING, Ordering::SeqCst);
        idle.num_parked.fetch_sub(1, Ordering::SeqCst);
    }

    /// The waker's stamp not yet taken by the processor (0: none).
    #[cfg(test)]
    pub(crate) fn notified_at_for_tests(&self) -> u64 {
        self.notified_at.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the processor is parked (announced PARKED and not yet woken).
    pub(crate) fn is_parked(&self) -> bool {
        self.still_parked()
    }

    /// Whether the processor runs (a thread has taken it over, and it is neither parked nor woken
    /// and on its way back): a hint, read outside the protocol above (Relaxed) by a processor
    /// looking for stranded ULTs (`processor::find`), which skips one that is not running. A
    /// processor whose thread has not started yet runs no ULT that anything could wait behind.
    pub(crate) fn is_running(&self) -> bool {
        self.started.load(std::sync::atomic::Ordering::Relaxed)
            && self.state.load(Ordering::Relaxed) == RUNNING
    }

    fn still_parked(&self) -> bool {
        self.state.load(Ordering::SeqCst) == PARKED
    }
}

/// Runtime-wide idle bookkeeping.
pub(crate) struct Idle {
    num_parked: AtomicUsize,
}

impl Idle {
    pub(crate) fn new() -> Idle {
        Idle { num_parked: AtomicUsize::new(0) }
    }

    /// Wakes one parked processor among `slots`, if any. Call after publishing work any processor
    /// may take.
    #[inline]
    pub(crate) fn notify_one<'a>(&self, slots: impl Iterator<Item = &'a ParkSlot>) -> bool {
        fence(Ordering::SeqCst);
        if self.num_parked.load(Ordering::SeqCst) == 0 {
            return false;
        }
        Self::notify_one_slow(slots)
    }

    #[cold]
    fn notify_one_slow<'a>(mut slots: impl Iterator<Item = &'a ParkSlot>) -> bool {
        slots.any(|s| {
            s.still_parked() && !s.pausing.load(std::sync::atomic::Ordering::Relaxed) && s.notify_slow()
        })
    }

    /// Parks the calling processor's thread until notified, `deadline` passes, or `has_work`
    /// (re-checked after announcing PARKED) says there is something to do.
    pub(crate) fn park(
        &self,
        slot: &ParkSlot,
        deadline: Option<std::time::Instant>,
        has_work: impl Fn() -> bool,
    ) -> Parked {
        // 1. Announce, 2. re-check, 3. sleep until notified or timed out.
        slot.announce(self);
        if has_work() {
            slot.retract(self);
            return Parked::Cancelled;
        }
        loop {
            match deadline {
                Some(d) => {
                    let now = std::time::Instant::now();
                    if now >= d {
                        break;
                    }
                    thread::park_timeout(d - now);
                }
                None => thread::park(),
            }
            if !slot.still_parked() {
                break;
            }
        }
        slot.retract(self);
        // The wake-up's latency, for the spin budget (a stamp left by a waker that found this
        // processor parked; none after a timed-out park).
        let _stamp = slot.notified_at.swap(0, std::sync::atomic::Ordering::Relaxed);
        #[cfg(not(loom))]
        crate::sync::host::note_wake(_stamp);
        Parked::Slept
    }
}

/// How a call to [`Idle::park`] ended.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parked {
    /// The re-check found work; the thread never slept.
    Cancelled,
    /// The thread slept and woke up.
    Slept,
}
