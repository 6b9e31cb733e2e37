//! A ULT's panic state is its own: `std::thread::panicking()` answers for the ULT that asks, and
//! poisoning follows the ULT that panicked, also when a ULT blocks, yields, sleeps, joins or makes
//! a blocking call while it unwinds (in a `Drop`). std counts panics per OS thread; the runtime
//! keeps such a ULT on its OS thread, and runs nothing else there, until its unwinding ends.
//!
//! Each scenario checks four things: (a) the ULTs that run while one is blocked mid-unwind see
//! `panicking() == false`, and the unwinding ULT still sees `true` after its wait; (b) an elite
//! `Mutex` and (c) a `std::sync::Mutex` held across the panic are poisoned; (d) afterwards every
//! OS thread of the runtime says `panicking() == false` ([`assert_every_thread_calm`]: a ULT that
//! went on on another OS thread in the middle of its unwinding leaves std's per-thread counts
//! wrong on both threads).

mod common;

use common::hang_guard;
use elite_rt::sync::{mpsc, Mutex as UltMutex};
use elite_rt::{blocking, spawn, Builder, Runtime};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc as std_mpsc, Arc, Mutex as StdMutex};
use std::time::Duration;

fn rt(processors: usize) -> Runtime {
    Runtime::builder().processors(processors).build().expect("build runtime")
}

/// Runs its closure when dropped: in these tests, while its ULT unwinds a panic.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// What the ULTs that ran beside an unwinding one saw.
#[derive(Default)]
struct Tally {
    calm: AtomicUsize,
    troubled: AtomicUsize,
}

impl Tally {
    /// Records what `std::thread::panicking()` says to the calling ULT.
    fn look(&self) {
        if std::thread::panicking() {
            self.troubled.fetch_add(1, SeqCst);
        } else {
            self.calm.fetch_add(1, SeqCst);
        }
    }

    fn seen(&self) -> usize {
        self.calm.load(SeqCst) + self.troubled.load(SeqCst)
    }
}

/// The ULTs spawned beside the unwinding one in each scenario.
const BESIDE: usize = 4;

/// How the unwinding ULT waits for the ULTs it spawned beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// Receives their reports on an elite channel.
    Recv,
    /// Locks an elite mutex that the root holds until their reports are in.
    Lock,
    /// Sleeps (elite's `sleep`) until they have looked.
    Sleep,
    /// Yields until they have looked.
    Yield,
    /// Joins them, the newest first (the join fast path would start it on the joiner's stack).
    Join,
    /// Waits for their reports inside a blocking call.
    Blocking,
    /// Receives their reports with `select!`, the report channel its second case (a wait in
    /// several lists, resolved through a sibling node).
    Select,
}

const WAITS: [Wait; 7] =
    [Wait::Recv, Wait::Lock, Wait::Sleep, Wait::Yield, Wait::Join, Wait::Blocking, Wait::Select];

/// An OS thread outside the runtime stopped in the middle of a panic (in a destructor), until
/// the witness is dropped. std answers `std::thread::panicking()` from a process-wide count first
/// and looks at the calling thread's own count only when that is not zero: so a thread whose own
/// count went wrong gives itself away only while some thread panics, which this one does.
struct PanicWitness {
    release: Option<std_mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PanicWitness {
    fn new() -> PanicWitness {
        let (release, rx) = std_mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std_mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let _ = catch_unwind(AssertUnwindSafe(move || {
                let _d = OnDrop(move || {
                    let _ = ready_tx.send(());
                    let _ = rx.recv();
                });
                // A panic without the hook's message.
                std::panic::resume_unwind(Box::new("the witness"));
            }));
        });
        ready_rx.recv().expect("the witness panics");
        PanicWitness { release: Some(release), thread: Some(thread) }
    }
}

impl Drop for PanicWitness {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// (d): every OS thread of the runtime that runs ULTs says `panicking() == false`, asked while a
/// [`PanicWitness`] panics. Run from a ULT of a runtime where no pinned ULT lives: each round makes
/// a blocking call that lasts until a probe ULT has run, so that the processor goes to a spare
/// thread meanwhile (on one processor the probe cannot run otherwise), and this ULT comes back on
/// whichever thread runs its processor then; over the rounds the processors pass through the
/// runtime's threads.
fn assert_every_thread_calm(rounds: usize) {
    let witness = PanicWitness::new();
    for round in 0..rounds {
        assert!(!std::thread::panicking(), "round {round}: a ULT's OS thread says it is panicking");
        let (tx, rx) = std_mpsc::channel();
        let probe = spawn(move || {
            let _ = tx.send(std::thread::panicking());
        });
        let panicking = blocking(move || rx.recv().expect("the probe's report"));
        assert!(!panicking, "round {round}: a probe ULT's OS thread says it is panicking");
        probe.join().expect("the probe");
    }
    drop(witness);
}

/// A ULT holding an elite and a std mutex panics; while it unwinds, it spawns [`BESIDE`] ULTs that
/// look at `panicking()` and waits for them as `wait` says.
fn unwinding_wait(processors: usize, wait: Wait) {
    let rt = rt(processors);
    rt.block_on(move || {
        let tally = Arc::new(Tally::default());
        let (ult_m, std_m) = (Arc::new(UltMutex::new(0u32)), Arc::new(StdMutex::new(0u32)));
        let gate = Arc::new(UltMutex::new(()));
        let (report_tx, report_rx) = mpsc::channel::<()>();
        // The reports go to the unwinding ULT when it receives them, else to the root.
        let (for_a, for_root) = if matches!(wait, Wait::Recv | Wait::Select) {
            (Some(report_rx), None)
        } else {
            (None, Some(report_rx))
        };
        // Never ready: the first case of the select.
        let (_quiet_tx, quiet_rx) = mpsc::channel::<()>();
        let (std_tx, std_rx) = std_mpsc::channel::<()>();
        let mut std_rx = Some(std_rx);
        let still = Arc::new(AtomicBool::new(false));
        let held = (wait == Wait::Lock).then(|| gate.lock().expect("the gate"));
        let a = {
            let (tally, ult_m, std_m, gate, still) =
                (tally.clone(), ult_m.clone(), std_m.clone(), gate.clone(), still.clone());
            spawn(move || {
                let _u = ult_m.lock().expect("the elite mutex");
                let _s = std_m.lock().expect("the std mutex");
                let _d = OnDrop(move || {
                    let beside: Vec<_> = (0..BESIDE)
                        .map(|_| {
                            let (tally, report_tx, std_tx) =
                                (tally.clone(), report_tx.clone(), std_tx.clone());
                            spawn(move || {
                                tally.look();
                                let _ = report_tx.send(());
                                let _ = std_tx.send(());
                            })
                        })
                        .collect();
                    match wait {
                        Wait::Recv => {
                            let rx = for_a.as_ref().expect("the reports");
                            (0..BESIDE).for_each(|_| rx.recv().expect("a report"))
                        }
                        Wait::Lock => drop(gate.lock()),
                        Wait::Sleep => {
                            while tally.seen() < BESIDE {
                                elite_rt::sleep(Duration::from_millis(1));
                            }
                        }
                        Wait::Yield => {
                            while tally.seen() < BESIDE {
                                elite_rt::yield_now();
                            }
                        }
                        Wait::Join => beside.into_iter().rev().for_each(|h| h.join().expect("a ULT beside")),
                        Wait::Blocking => {
                            let rx = std_rx.take().expect("the reports");
                            blocking(move || (0..BESIDE).for_each(|_| rx.recv().expect("a report")));
                        }
                        Wait::Select => {
                            let rx = for_a.as_ref().expect("the reports");
                            for _ in 0..BESIDE {
                                elite_rt::select! {
                                    recv(quiet_rx) -> _ => panic!("the quiet channel delivered"),
                                    recv(rx) -> r => r.expect("a report"),
                                }
                            }
                        }
                    }
                    still.store(std::thread::panicking(), SeqCst);
                });
                panic!("unwinding");
            })
        };
        if let Some(held) = held {
            // The ULT blocks on the gate until the reports are in.
            let rx = for_root.as_ref().expect("the reports");
            (0..BESIDE).for_each(|_| rx.recv().expect("a report"));
            drop(held);
        }
        assert!(a.join().is_err(), "the ULT did not panic");
        let why = format!("{processors} processor(s), waiting by {wait:?}");
        assert!(still.load(SeqCst), "{why}: the unwinding ULT lost its panic state across its wait");
        assert_eq!(tally.seen(), BESIDE, "{why}: not every ULT beside looked");
        assert_eq!(tally.troubled.load(SeqCst), 0, "{why}: a ULT beside the unwinding one saw panicking()");
        assert!(ult_m.is_poisoned(), "{why}: the elite mutex held across the panic is not poisoned");
        assert!(std_m.is_poisoned(), "{why}: the std mutex held across the panic is not poisoned");
        assert_every_thread_calm(6);
    });
}

#[test]
fn a_ult_waiting_while_it_unwinds_keeps_its_panic_state_to_itself() {
    for processors in [1, 2] {
        for wait in WAITS {
            hang_guard(60, &format!("{wait:?} while unwinding, {processors} processor(s)"), move || {
                unwinding_wait(processors, wait)
            });
        }
    }
}

/// The same with the unwinding ULT pinned: its processor cannot go to another OS thread (its
/// pinned ULT would move), so it stays out of service while the ULT waits, and what releases the
/// wait is an OS thread. The ULTs spawned beside it run afterwards (or, with two processors, on
/// the other one). The OS thread releases the wait once they have looked, or after 50 ms: with
/// one processor they cannot run before the wait ends (whatever the timing, none may see
/// `panicking()`); the 50 ms only give them the chance to run during the wait where the runtime
/// would wrongly let them.
fn pinned_unwinding_wait(processors: usize, wait: Wait) {
    let rt = rt(processors);
    rt.block_on(move || {
        let tally = Arc::new(Tally::default());
        let (ult_m, std_m) = (Arc::new(UltMutex::new(0u32)), Arc::new(StdMutex::new(0u32)));
        let gate = Arc::new(UltMutex::new(()));
        let flag = Arc::new(AtomicBool::new(false));
        let (go_tx, go_rx) = std_mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (std_tx, std_rx) = std_mpsc::channel::<()>();
        let mut std_rx = Some(std_rx);
        let (report_tx, report_rx) = mpsc::channel::<()>();
        let (looked_tx, looked_rx) = std_mpsc::channel::<()>();
        let (locked_tx, locked_rx) = std_mpsc::channel::<()>();
        // The OS thread that releases the wait once the ULT says it is about to wait and the ULTs
        // beside it have looked (or 50 ms have passed).
        let releaser = {
            let (gate, flag) = (gate.clone(), flag.clone());
            std::thread::spawn(move || {
                let held = gate.lock().expect("the gate");
                locked_tx.send(()).expect("say the gate is held");
                go_rx.recv().expect("the go");
                for _ in 0..BESIDE {
                    if looked_rx.recv_timeout(Duration::from_millis(50)).is_err() {
                        break;
                    }
                }
                flag.store(true, SeqCst);
                let _ = release_tx.send(());
                let _ = std_tx.send(());
                drop(held);
            })
        };
        locked_rx.recv().expect("the gate is held");
        let still = Arc::new(AtomicBool::new(false));
        let a = {
            let (tally, ult_m, std_m, still) = (tally.clone(), ult_m.clone(), std_m.clone(), still.clone());
            Builder::new()
                .pinned(true)
                .spawn(move || {
                    let _u = ult_m.lock().expect("the elite mutex");
                    let _s = std_m.lock().expect("the std mutex");
                    let _d = OnDrop(move || {
                        let home = std::thread::current().id();
                        for _ in 0..BESIDE {
                            let (tally, report_tx, looked_tx) =
                                (tally.clone(), report_tx.clone(), looked_tx.clone());
                            spawn(move || {
                                tally.look();
                                let _ = looked_tx.send(());
                                let _ = report_tx.send(());
                            });
                        }
                        go_tx.send(()).expect("the go");
                        match wait {
                            Wait::Recv => release_rx.recv().expect("the release"),
                            Wait::Lock => drop(gate.lock()),
                            Wait::Sleep => {
                                while !flag.load(SeqCst) {
                                    elite_rt::sleep(Duration::from_millis(1));
                                }
                            }
                            Wait::Yield => {
                                while !flag.load(SeqCst) {
                                    elite_rt::yield_now();
                                }
                            }
                            Wait::Blocking => {
                                let rx = std_rx.take().expect("the release");
                                blocking(move || rx.recv().expect("the release"));
                            }
                            Wait::Select => {
                                let (_quiet_tx, quiet_rx) = mpsc::channel::<()>();
                                elite_rt::select! {
                                    recv(quiet_rx) -> _ => panic!("the quiet channel delivered"),
                                    recv(release_rx) -> r => r.expect("the release"),
                                }
                            }
                            Wait::Join => unreachable!("not a pinned scenario"),
                        }
                        assert_eq!(std::thread::current().id(), home, "a pinned ULT left its OS thread");
                        still.store(std::thread::panicking(), SeqCst);
                    });
                    panic!("unwinding, pinned");
                })
                .expect("spawn the pinned ULT")
        };
        assert!(a.join().is_err(), "the pinned ULT did not panic");
        releaser.join().expect("the releaser");
        let why = format!("pinned, {processors} processor(s), waiting by {wait:?}");
        (0..BESIDE).for_each(|_| report_rx.recv().expect("a report"));
        assert!(still.load(SeqCst), "{why}: the unwinding ULT lost its panic state across its wait");
        assert_eq!(tally.troubled.load(SeqCst), 0, "{why}: a ULT beside the unwinding one saw panicking()");
        assert!(ult_m.is_poisoned(), "{why}: the elite mutex held across the panic is not poisoned");
        assert!(std_m.is_poisoned(), "{why}: the std mutex held across the panic is not poisoned");
        assert_every_thread_calm(6);
    });
}

#[test]
fn a_pinned_ult_waiting_while_it_unwinds_keeps_its_panic_state_to_itself() {
    for processors in [1, 2] {
        for wait in [Wait::Recv, Wait::Lock, Wait::Sleep, Wait::Yield, Wait::Blocking, Wait::Select] {
            hang_guard(
                60,
                &format!("pinned, {wait:?} while unwinding, {processors} processor(s)"),
                move || pinned_unwinding_wait(processors, wait),
            );
        }
    }
}

/// A ULT blocked mid-unwind is woken from inside another ULT's blocking call, which lasts until
/// the unwinding ULT has gone on: the unwinding ULT can only go on where its processor went, a
/// spare thread, unless it kept its own thread. `nested`: the wait is inside a second panic,
/// caught inside the destructor.
fn woken_from_a_blocking_call(processors: usize, nested: bool) {
    let rt = rt(processors);
    rt.block_on(move || {
        let (ult_m, std_m) = (Arc::new(UltMutex::new(0u32)), Arc::new(StdMutex::new(0u32)));
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let (wake_tx, wake_rx) = mpsc::channel::<()>();
        let (gone_tx, gone_rx) = std_mpsc::channel::<(bool, bool)>();
        let a = {
            let (ult_m, std_m) = (ult_m.clone(), std_m.clone());
            spawn(move || {
                let _u = ult_m.lock().expect("the elite mutex");
                let _s = std_m.lock().expect("the std mutex");
                let _d = OnDrop(move || {
                    let wait = || {
                        ready_tx.send(()).expect("say it waits");
                        wake_rx.recv().expect("the wake-up");
                        std::thread::panicking()
                    };
                    let during = if nested {
                        let mut during = false;
                        let inner = catch_unwind(AssertUnwindSafe(|| {
                            let _w = OnDrop(|| during = wait());
                            panic!("inner");
                        }));
                        assert!(inner.is_err());
                        during
                    } else {
                        wait()
                    };
                    let _ = gone_tx.send((during, std::thread::panicking()));
                });
                panic!("outer");
            })
        };
        ready_rx.recv().expect("the ULT waits");
        let (during, after) = blocking(move || {
            wake_tx.send(()).expect("wake it");
            gone_rx.recv().expect("it went on")
        });
        assert!(a.join().is_err(), "the ULT did not panic");
        let why = format!("{processors} processor(s), nested: {nested}");
        assert!(during, "{why}: the unwinding ULT lost its panic state across its wait");
        assert!(after, "{why}: the unwinding ULT lost its panic state after its inner panic was caught");
        assert!(ult_m.is_poisoned(), "{why}: the elite mutex held across the panic is not poisoned");
        assert!(std_m.is_poisoned(), "{why}: the std mutex held across the panic is not poisoned");
        assert_every_thread_calm(6);
    });
}

#[test]
fn a_ult_woken_mid_unwind_from_a_blocking_call_keeps_its_panic_state() {
    for processors in [1, 2] {
        for nested in [false, true] {
            hang_guard(
                60,
                &format!("woken from a call, {processors} processor(s), nested: {nested}"),
                move || woken_from_a_blocking_call(processors, nested),
            );
        }
    }
}

/// Many ULTs on two processors panic and wait in their destructors while others look, so that
/// blocked, woken and stolen ULTs meet (under the chaos mode too); afterwards no thread of the
/// runtime says it panics.
#[test]
fn many_unwinding_ults_leave_every_thread_calm() {
    hang_guard(60, "many unwinding ULTs", || {
        let rt = rt(2);
        rt.block_on(|| {
            let tally = Arc::new(Tally::default());
            let lost = Arc::new(AtomicUsize::new(0));
            let m = Arc::new(UltMutex::new(0u64));
            let hs: Vec<_> = (0..64u64)
                .map(|i| {
                    let (tally, lost, m) = (tally.clone(), lost.clone(), m.clone());
                    spawn(move || {
                        if i % 2 == 0 {
                            let _d = OnDrop(|| {
                                *m.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                                elite_rt::yield_now();
                                if !std::thread::panicking() {
                                    lost.fetch_add(1, SeqCst);
                                }
                            });
                            panic!("ult {i}");
                        }
                        for _ in 0..4 {
                            tally.look();
                            *m.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                            elite_rt::yield_now();
                        }
                    })
                })
                .collect();
            let panics = hs.into_iter().filter_map(|h| h.join().err()).count();
            assert_eq!(panics, 32);
            assert_eq!(lost.load(SeqCst), 0, "an unwinding ULT lost its panic state across a switch");
            assert_eq!(tally.troubled.load(SeqCst), 0, "a ULT beside the unwinding ones saw panicking()");
            assert_every_thread_calm(8);
        });
    });
}

/// A child that its joiner's join starts on the joiner's stack (the join fast path: on one
/// processor, a child still at the top of the start-queue) panics and waits while it unwinds. Its
/// resumer, in the middle of the joiner's run, cannot hand the processor over; the child is
/// anchored once its joiner blocks in the join, and the ULTs beside see no panic.
fn started_by_its_joiner(processors: usize) {
    let rt = rt(processors);
    rt.block_on(move || {
        let tally = Arc::new(Tally::default());
        let (ult_m, std_m) = (Arc::new(UltMutex::new(0u32)), Arc::new(StdMutex::new(0u32)));
        let still = Arc::new(AtomicBool::new(false));
        let child = {
            let (tally, ult_m, std_m, still) = (tally.clone(), ult_m.clone(), std_m.clone(), still.clone());
            spawn(move || {
                let _u = ult_m.lock().expect("the elite mutex");
                let _s = std_m.lock().expect("the std mutex");
                let _d = OnDrop(move || {
                    let (report_tx, report_rx) = mpsc::channel::<()>();
                    for _ in 0..BESIDE {
                        let (tally, report_tx) = (tally.clone(), report_tx.clone());
                        spawn(move || {
                            tally.look();
                            let _ = report_tx.send(());
                        });
                    }
                    (0..BESIDE).for_each(|_| report_rx.recv().expect("a report"));
                    still.store(std::thread::panicking(), SeqCst);
                });
                panic!("unwinding, started by the join");
            })
        };
        assert!(child.join().is_err(), "the child did not panic");
        let why = format!("{processors} processor(s)");
        assert!(still.load(SeqCst), "{why}: the unwinding child lost its panic state across its wait");
        assert_eq!(tally.troubled.load(SeqCst), 0, "{why}: a ULT beside the unwinding child saw panicking()");
        assert!(ult_m.is_poisoned(), "{why}: the elite mutex held across the panic is not poisoned");
        assert!(std_m.is_poisoned(), "{why}: the std mutex held across the panic is not poisoned");
        assert_every_thread_calm(6);
    });
}

#[test]
fn a_child_started_by_its_joiner_waiting_while_it_unwinds_keeps_its_panic_state() {
    for processors in [1, 2] {
        hang_guard(60, &format!("started by its joiner, {processors} processor(s)"), move || {
            started_by_its_joiner(processors)
        });
    }
}

elite_rt::ult_local!(static MARK: std::cell::Cell<u32> = std::cell::Cell::new(0));

/// A ULT that waits while it unwinds, then catches its panic, is the same ULT all along (its id,
/// its `ult_local!` values), keeps its OS thread while it unwinds, and goes back to a processor at
/// its next switch once the panic is caught.
#[test]
fn a_ult_that_catches_its_panic_goes_back_to_a_processor() {
    for processors in [1, 2] {
        hang_guard(60, &format!("caught, {processors} processor(s)"), move || {
            let rt = rt(processors);
            let (same, rejoined) = rt.block_on(move || {
                let h = spawn(move || {
                    MARK.set(7);
                    let (me, home) = (elite_rt::current().id(), std::thread::current().id());
                    let same = Arc::new(AtomicBool::new(false));
                    let caught = catch_unwind(AssertUnwindSafe(|| {
                        let same = same.clone();
                        let _d = OnDrop(move || {
                            let (tx, rx) = mpsc::channel::<()>();
                            let beside = spawn(move || tx.send(()).expect("send"));
                            rx.recv().expect("the value"); // waits anchored to its thread
                            beside.join().expect("the ULT beside"); // joins as its thread
                            elite_rt::sleep(Duration::from_millis(1));
                            same.store(
                                std::thread::panicking()
                                    && elite_rt::current().id() == me
                                    && MARK.get() == 7
                                    && std::thread::current().id() == home,
                                SeqCst,
                            );
                        });
                        panic!("caught below");
                    }));
                    assert!(caught.is_err());
                    // The panic is over: it goes back to a processor at its next switch point
                    // (the receive if it waits, else the yield; the ULT spawned now may run on
                    // the spare thread holding the processor before the receive), after which it
                    // runs where that ULT ran: with one processor, on the same OS thread.
                    let (tx, rx) = mpsc::channel();
                    spawn(move || tx.send(std::thread::current().id()).expect("send"));
                    let there = rx.recv().expect("the thread");
                    elite_rt::yield_now();
                    (same.load(SeqCst) && MARK.get() == 7, there == std::thread::current().id())
                });
                h.join().expect("the ULT")
            });
            assert!(same, "{processors} processor(s): the ULT lost its identity while it unwound");
            if processors == 1 {
                assert!(rejoined, "the ULT did not go back to its processor once its panic was caught");
            }
            assert_eq!(rt.stats().blocking.anchored, 1, "{}", rt.stats());
        });
    }
}

/// Shutdown while a ULT waits in the middle of its unwinding: the drop does not wait for it (its
/// OS thread runs it as a blocking call in flight), the cancelled ULTs' unwinding lets it go on,
/// and its thread cancels it when it is done. `after_close`: it begins to wait only once the
/// runtime is closing (it spins, holding its processor, until spawns fail), so it anchors after
/// the close, with no thread to hand its processor to.
fn shutdown_while_anchored(after_close: bool) {
    let rt = rt(1);
    let (tx, rx) = mpsc::channel::<()>();
    let (waits_tx, waits_rx) = std_mpsc::channel::<()>();
    let (runs_tx, runs_rx) = std_mpsc::channel::<()>();
    let (done_tx, done_rx) = std_mpsc::channel::<(bool, bool)>();
    // Holds the only sender until the drop cancels it.
    let keeper = rt.spawn(move || {
        let _tx = tx;
        loop {
            elite_rt::sleep(Duration::from_secs(3600));
        }
    });
    let h = rt.spawn(move || {
        let _d = OnDrop(move || {
            let _ = waits_tx.send(());
            let disconnected = rx.recv().is_err();
            let _ = done_tx.send((disconnected, std::thread::panicking()));
        });
        let _ = runs_tx.send(());
        if after_close {
            while Builder::new().spawn(|| ()).is_ok() {
                std::hint::spin_loop();
            }
        }
        panic!("unwinding at shutdown");
    });
    runs_rx.recv().expect("the ULT runs");
    if !after_close {
        waits_rx.recv().expect("the ULT waits");
    }
    drop(rt);
    let (disconnected, panicking) = done_rx.recv_timeout(Duration::from_secs(30)).expect("the ULT went on");
    assert!(disconnected && panicking, "after_close: {after_close}: {disconnected} {panicking}");
    assert!(h.join().is_err());
    assert!(keeper.join().is_err());
}

#[test]
fn shutdown_leaves_an_anchored_ult_to_its_thread() {
    for after_close in [false, true] {
        hang_guard(60, &format!("shutdown while anchored, after the close: {after_close}"), move || {
            shutdown_while_anchored(after_close)
        });
    }
}
