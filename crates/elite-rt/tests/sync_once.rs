//! `Once`, `OnceLock` and `LazyLock`: std's semantics (as std documents them: one initialiser
//! runs, everyone sees its writes, poisoning, `call_once_force`, the cells' methods), and what
//! std's cannot do inside ULTs: let a ULT wait for an initialiser that runs on its own processor.
//!
//! The std half of that comparison runs in a child process (this test binary re-executed with
//! the scenario in `CHILD_ENV`): there it deadlocks the processor, and a watchdog thread ends the
//! child with `DEADLOCK_EXIT` instead of letting it hang.

mod common;

use common::{describe, hang_guard, payload_str};
use elite_rt::sync::{LazyLock, Once, OnceLock, Semaphore};
use elite_rt::Runtime;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

const CHILD_ENV: &str = "ELITE_ONCE_CHILD";
const DEADLOCK_EXIT: i32 = 3;

/// A one-time initialised `u32`, over each of std's and elite's three types.
trait InitCell: Send + Sync + 'static {
    /// A cell whose initialiser is `init`.
    fn make(init: fn() -> u32) -> Self;
    /// The value, running `init` if nobody has.
    fn value(&self) -> u32;
}

/// A `Once` guarding a plain atomic.
struct OnceCell<O> {
    once: O,
    value: AtomicUsize,
    init: fn() -> u32,
}

impl InitCell for OnceCell<Once> {
    fn make(init: fn() -> u32) -> Self {
        OnceCell { once: Once::new(), value: AtomicUsize::new(0), init }
    }
    fn value(&self) -> u32 {
        self.once.call_once(|| self.value.store((self.init)() as usize, SeqCst));
        self.value.load(SeqCst) as u32
    }
}

impl InitCell for OnceCell<std::sync::Once> {
    fn make(init: fn() -> u32) -> Self {
        OnceCell { once: std::sync::Once::new(), value: AtomicUsize::new(0), init }
    }
    fn value(&self) -> u32 {
        self.once.call_once(|| self.value.store((self.init)() as usize, SeqCst));
        self.value.load(SeqCst) as u32
    }
}

impl InitCell for (OnceLock<u32>, fn() -> u32) {
    fn make(init: fn() -> u32) -> Self {
        (OnceLock::new(), init)
    }
    fn value(&self) -> u32 {
        *self.0.get_or_init(self.1)
    }
}

impl InitCell for (std::sync::OnceLock<u32>, fn() -> u32) {
    fn make(init: fn() -> u32) -> Self {
        (std::sync::OnceLock::new(), init)
    }
    fn value(&self) -> u32 {
        *self.0.get_or_init(self.1)
    }
}

impl InitCell for LazyLock<u32> {
    fn make(init: fn() -> u32) -> Self {
        LazyLock::new(init)
    }
    fn value(&self) -> u32 {
        **self
    }
}

impl InitCell for std::sync::LazyLock<u32> {
    fn make(init: fn() -> u32) -> Self {
        std::sync::LazyLock::new(init)
    }
    fn value(&self) -> u32 {
        **self
    }
}

/// Whether the initialiser may go on: set by the ULT that runs it, once it has started the
/// waiters. (A `fn` initialiser reaches the scenario's state through statics.)
static WAITERS_STARTED: AtomicUsize = AtomicUsize::new(0);

/// The initialiser of the scenario: it sleeps (a ULT sleep: its processor is free meanwhile)
/// until both waiters have asked for the value, then returns it.
fn slow_init() -> u32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while WAITERS_STARTED.load(SeqCst) < 2 && std::time::Instant::now() < deadline {
        elite_rt::sleep(Duration::from_millis(1));
    }
    elite_rt::sleep(Duration::from_millis(5)); // and a little more, while they wait
    42
}

/// One processor: ULT A starts the initialiser; ULTs B and C, on the same processor, ask for the
/// value while it runs (and sleeps). Returns what the three saw.
fn scenario<C: InitCell>() -> Vec<u32> {
    WAITERS_STARTED.store(0, SeqCst);
    let rt = Runtime::builder().processors(1).no_chaos().build().unwrap();
    rt.block_on(|| {
        let cell = Arc::new(C::make(slow_init));
        let a = {
            let cell = cell.clone();
            elite_rt::spawn(move || cell.value())
        };
        // Let A enter the initialiser first (it sleeps in it), then start the waiters.
        elite_rt::sleep(Duration::from_millis(1));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let cell = cell.clone();
                elite_rt::spawn(move || {
                    WAITERS_STARTED.fetch_add(1, SeqCst);
                    cell.value()
                })
            })
            .collect();
        let mut seen = vec![a.join().unwrap()];
        seen.extend(waiters.into_iter().map(|h| h.join().unwrap()));
        seen
    })
}

/// The child half: runs the scenario with std's type named in `CHILD_ENV`, under a watchdog that
/// ends the process with `DEADLOCK_EXIT` if it has not finished in 2 s (it takes milliseconds).
#[test]
#[ignore = "run by std_s_once_types_deadlock_a_processor_where_elite_s_do_not in a child process"]
fn once_child() {
    let Ok(kind) = std::env::var(CHILD_ENV) else { return };
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(2));
        println!("DEADLOCKED");
        std::process::exit(DEADLOCK_EXIT);
    });
    let seen = match kind.as_str() {
        "Once" => scenario::<OnceCell<std::sync::Once>>(),
        "OnceLock" => scenario::<(std::sync::OnceLock<u32>, fn() -> u32)>(),
        "LazyLock" => scenario::<std::sync::LazyLock<u32>>(),
        other => panic!("unknown scenario {other}"),
    };
    println!("COMPLETED {seen:?}");
}

/// With std's `Once`, `OnceLock` and `LazyLock` a ULT that waits for another ULT's initialiser
/// on the same processor blocks that processor's OS thread, so the initialiser never runs again:
/// the child deadlocks (its watchdog ends it). With elite's, the waiters block their ULTs, the
/// initialiser finishes, and all three see its value.
#[test]
fn std_s_once_types_deadlock_a_processor_where_elite_s_do_not() {
    for kind in ["Once", "OnceLock", "LazyLock"] {
        // (Under AddressSanitizer, its leak check would turn the deadlocked child's deliberate exit,
        // with ULTs still blocked, into a failure of its own: off for the child.)
        let asan = "detect_leaks=0:detect_stack_use_after_return=0";
        let out = common::run_child("once_child", &[(CHILD_ENV, kind), ("ASAN_OPTIONS", asan)]);
        assert_eq!(
            out.status.code(),
            Some(DEADLOCK_EXIT),
            "std's {kind} should deadlock\n{}",
            describe(&out)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("DEADLOCKED"), "{}", describe(&out));
    }
    assert_eq!(hang_guard(30, "Once", scenario::<OnceCell<Once>>), [42, 42, 42]);
    assert_eq!(hang_guard(30, "OnceLock", scenario::<(OnceLock<u32>, fn() -> u32)>), [42, 42, 42]);
    assert_eq!(hang_guard(30, "LazyLock", scenario::<LazyLock<u32>>), [42, 42, 42]);
}

/// std (`Once`): a panicking initialiser poisons the `Once`: later `call_once`s panic (so do the
/// callers that were waiting for it); `call_once_force` runs its closure, told the `Once` is
/// poisoned, and on success completes it; after that nothing runs again.
#[test]
fn a_panicking_initialiser_poisons_a_once_and_call_once_force_recovers() {
    let once = Once::new();
    let r = catch_unwind(|| once.call_once(|| panic!("the initialiser fails")));
    assert_eq!(r.map_err(|p| payload_str(&*p).map(str::to_owned)), Err(Some("the initialiser fails".into())));
    assert!(!once.is_completed());
    let r = catch_unwind(|| once.call_once(|| unreachable!("a poisoned Once runs nothing")));
    assert_eq!(
        r.map_err(|p| payload_str(&*p).map(str::to_owned)),
        Err(Some("Once instance has previously been poisoned".into()))
    );
    let r = catch_unwind(|| once.wait());
    assert!(r.is_err(), "wait panics on a poisoned Once");
    // A forced initialiser that panics too leaves it poisoned.
    let r = catch_unwind(|| once.call_once_force(|_| panic!("again")));
    assert!(r.is_err());
    assert!(!once.is_completed());
    let mut told = None;
    once.call_once_force(|state| told = Some(state.is_poisoned()));
    assert_eq!(told, Some(true));
    assert!(once.is_completed());
    once.call_once(|| unreachable!("complete: nothing runs again"));
    once.call_once_force(|_| unreachable!("complete: nothing runs again"));
    once.wait();
    once.wait_force();
    let mut fresh = false;
    Once::new().call_once_force(|state| fresh = !state.is_poisoned());
    assert!(fresh, "a fresh Once is not poisoned");
}

/// The same with waiters: ULTs that wait for an initialiser that then panics are woken; a
/// `call_once` waiter panics, a `wait_force` waiter goes on waiting, a `call_once_force` waiter
/// runs its own initialiser (told of the poisoning), which completes the `Once` and releases the
/// `wait_force` waiter.
#[test]
fn waiters_of_a_panicking_initialiser_see_the_poisoning() {
    hang_guard(30, "poisoned waiters", || {
        let rt = Runtime::builder().processors(1).no_chaos().build().unwrap();
        rt.block_on(|| {
            let once = Arc::new(Once::new());
            let started = Arc::new(AtomicUsize::new(0));
            let first = {
                let (once, started) = (once.clone(), started.clone());
                elite_rt::spawn(move || {
                    once.call_once(|| {
                        common::ult_sleep_until(10, "three waiters", || started.load(SeqCst) == 3);
                        elite_rt::sleep(Duration::from_millis(5));
                        panic!("the first initialiser fails");
                    })
                })
            };
            elite_rt::sleep(Duration::from_millis(1));
            let plain = {
                let (once, started) = (once.clone(), started.clone());
                elite_rt::spawn(move || {
                    started.fetch_add(1, SeqCst);
                    once.call_once(|| unreachable!("the first initialiser is running"));
                })
            };
            let forced = {
                let (once, started) = (once.clone(), started.clone());
                elite_rt::spawn(move || {
                    started.fetch_add(1, SeqCst);
                    let mut poisoned = None;
                    once.call_once_force(|state| poisoned = Some(state.is_poisoned()));
                    poisoned
                })
            };
            let patient = {
                let (once, started) = (once.clone(), started.clone());
                elite_rt::spawn(move || {
                    started.fetch_add(1, SeqCst);
                    once.wait_force();
                    once.is_completed()
                })
            };
            assert!(first.join().is_err());
            let e = plain.join().expect_err("a call_once waiter panics on the poisoning");
            assert_eq!(payload_str(&*e), Some("Once instance has previously been poisoned"));
            assert_eq!(forced.join().unwrap(), Some(true), "the forced waiter ran, told of the poisoning");
            assert!(patient.join().unwrap(), "wait_force returned once the forced initialiser completed");
            assert!(once.is_completed());
        })
    });
}

/// Many ULTs on two processors and OS threads race for one `Once`: its initialiser runs once,
/// and every caller, when `call_once` returns, sees what it wrote.
#[test]
fn one_initialiser_runs_and_every_caller_sees_its_writes() {
    for round in 0..20 {
        let once = Arc::new(Once::new());
        let runs = Arc::new(AtomicUsize::new(0));
        let value = Arc::new(AtomicUsize::new(0));
        let call = {
            let (once, runs, value) = (once.clone(), runs.clone(), value.clone());
            move || {
                once.call_once(|| {
                    runs.fetch_add(1, SeqCst);
                    if elite_rt::try_current().is_some() {
                        elite_rt::yield_now();
                    }
                    value.store(round + 1, std::sync::atomic::Ordering::Relaxed);
                });
                value.load(std::sync::atomic::Ordering::Relaxed)
            }
        };
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let call = call.clone();
                std::thread::spawn(call)
            })
            .collect();
        let rt = Runtime::builder().processors(2).build().unwrap();
        let seen: Vec<usize> = hang_guard(30, "race", move || {
            rt.block_on(|| {
                let hs: Vec<_> = (0..20).map(|_| elite_rt::spawn(call.clone())).collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            })
        });
        let from_threads: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(runs.load(SeqCst), 1);
        assert!(seen.iter().chain(&from_threads).all(|&v| v == round + 1), "{seen:?} {from_threads:?}");
    }
}

/// An OS thread waits for a ULT's initialiser and the other way round.
#[test]
fn os_threads_and_ults_wait_for_each_other_s_initialisers() {
    let cell = Arc::new(OnceLock::new());
    let gate = Arc::new(Semaphore::new(0));
    let rt = Runtime::builder().processors(1).build().unwrap();
    // The ULT initialises, held up by the gate; an OS thread waits for it.
    let in_init = Arc::new(AtomicUsize::new(0));
    let ult = {
        let (cell, gate, in_init) = (cell.clone(), gate.clone(), in_init.clone());
        rt.spawn(move || {
            *cell.get_or_init(|| {
                in_init.store(1, SeqCst);
                gate.acquire();
                "from the ULT"
            })
        })
    };
    common::wait_until(10, "the ULT in its initialiser", || in_init.load(SeqCst) == 1);
    let waiter = {
        let cell = cell.clone();
        std::thread::spawn(move || *cell.wait())
    };
    std::thread::sleep(Duration::from_millis(5));
    gate.release();
    assert_eq!(waiter.join().unwrap(), "from the ULT");
    assert_eq!(ult.join().unwrap(), "from the ULT");

    // An OS thread initialises (slowly); ULTs wait for it.
    let lazy: Arc<LazyLock<u32, Box<dyn FnOnce() -> u32 + Send>>> = Arc::new(LazyLock::new(Box::new({
        let gate = gate.clone();
        move || {
            gate.acquire();
            7
        }
    })));
    let initialiser = {
        let lazy = lazy.clone();
        std::thread::spawn(move || *LazyLock::force(&lazy))
    };
    std::thread::sleep(Duration::from_millis(5));
    let sum = hang_guard(30, "ULTs wait for an OS thread", move || {
        rt.block_on(|| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let lazy = lazy.clone();
                    elite_rt::spawn(move || **lazy)
                })
                .collect();
            elite_rt::sleep(Duration::from_millis(5));
            gate.release();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u32>()
        })
    });
    assert_eq!((sum, initialiser.join().unwrap()), (28, 7));
}

/// std (`OnceLock`): `get` before and after; `set` stores once and gives a second value back;
/// `get_or_init` runs its closure only on an empty cell; a panicking closure leaves the cell empty
/// for the next one; `take` empties it; `get_mut`, `into_inner`, `Clone`, `From`, `PartialEq`,
/// `Default` and `Debug` as std's.
#[test]
fn once_lock_follows_std() {
    let cell = OnceLock::new();
    assert_eq!(cell.get(), None);
    assert_eq!(format!("{cell:?}"), "OnceLock(<uninit>)");
    let r = catch_unwind(AssertUnwindSafe(|| cell.get_or_init(|| panic!("no value"))));
    assert!(r.is_err());
    assert_eq!(cell.get(), None, "a panicking initialiser leaves the cell empty");
    assert_eq!(cell.set(1), Ok(()));
    assert_eq!(cell.set(2), Err(2));
    assert_eq!(*cell.get_or_init(|| unreachable!("the cell has a value")), 1);
    assert_eq!(cell.get(), Some(&1));
    assert_eq!(*cell.wait(), 1);
    assert_eq!(format!("{cell:?}"), "OnceLock(1)");
    let copy = cell.clone();
    assert_eq!(copy, cell);
    assert_ne!(OnceLock::<i32>::new(), cell);
    assert_eq!(OnceLock::<i32>::default(), OnceLock::new());
    let mut cell = OnceLock::from(5);
    *cell.get_mut().unwrap() += 1;
    assert_eq!(cell.take(), Some(6));
    assert_eq!(cell.take(), None);
    assert_eq!(cell.get(), None);
    assert_eq!(*cell.get_or_init(|| 8), 8, "a taken cell can be initialised again");
    assert_eq!(cell.into_inner(), Some(8));
    assert_eq!(OnceLock::<u8>::new().into_inner(), None);

    // The value is dropped with the cell, once; an empty cell drops nothing.
    let drops = Arc::new(AtomicUsize::new(0));
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let cell = OnceLock::new();
    assert!(cell.set(Counted(drops.clone())).is_ok());
    let refused = cell.set(Counted(drops.clone()));
    assert_eq!(drops.load(SeqCst), 0);
    drop(refused);
    assert_eq!(drops.load(SeqCst), 1, "the refused value is given back, then dropped by us");
    drop(cell);
    assert_eq!(drops.load(SeqCst), 2);
    drop(OnceLock::<Counted>::new());
    assert_eq!(drops.load(SeqCst), 2);
}

/// std (`LazyLock`): the closure runs on first access only; `force` and `Deref` give the value;
/// a panicking closure poisons the `LazyLock` and every later access panics; dropping one that
/// never ran drops the closure, one that ran drops the value; `Debug` and `Default` as std's.
#[test]
fn lazy_lock_follows_std() {
    let runs = AtomicUsize::new(0);
    let lazy = LazyLock::new(|| {
        runs.fetch_add(1, SeqCst);
        String::from("computed")
    });
    assert_eq!(format!("{lazy:?}"), "LazyLock(<uninit>)");
    assert_eq!(runs.load(SeqCst), 0, "nothing runs before the first access");
    assert_eq!(LazyLock::force(&lazy), "computed");
    assert_eq!(lazy.len(), 8);
    assert_eq!(runs.load(SeqCst), 1);
    assert_eq!(format!("{lazy:?}"), "LazyLock(\"computed\")");
    let d: LazyLock<Vec<u8>> = LazyLock::default();
    assert!(d.is_empty());

    let poisoned: LazyLock<u32> = LazyLock::new(|| panic!("cannot compute"));
    let r = catch_unwind(|| *poisoned);
    assert_eq!(r.map_err(|p| payload_str(&*p).map(str::to_owned)), Err(Some("cannot compute".into())));
    for _ in 0..2 {
        let r = catch_unwind(|| LazyLock::force(&poisoned));
        assert_eq!(
            r.map_err(|p| payload_str(&*p).map(str::to_owned)),
            Err(Some("LazyLock instance has previously been poisoned".into()))
        );
    }
    drop(poisoned); // nothing left to drop

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let never = {
        let c = Counted(drops.clone());
        LazyLock::new(move || c.0.load(SeqCst))
    };
    drop(never);
    assert_eq!(drops.load(SeqCst), 1, "the unused closure (and what it captured) is dropped");
    let used = {
        let d = drops.clone();
        LazyLock::new(move || Counted(d))
    };
    LazyLock::force(&used);
    drop(used);
    assert_eq!(drops.load(SeqCst), 2, "the value is dropped");
}

/// A shutdown that unwinds a ULT inside an initialiser poisons the `Once` (as a panic would) and
/// wakes its waiters; ULTs waiting on it are unwound too and leave it consistent: afterwards,
/// `call_once_force` completes it from outside.
#[test]
fn shutdown_unwinds_an_initialiser_and_its_waiters() {
    let once = Arc::new(Once::new());
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    {
        let rt = Runtime::builder().processors(2).build().unwrap();
        let (once2, gate2, started2) = (once.clone(), gate.clone(), started.clone());
        rt.block_on(move || {
            for i in 0..4 {
                let (once, gate, started) = (once2.clone(), gate2.clone(), started2.clone());
                elite_rt::spawn(move || {
                    if i > 0 {
                        common::ult_sleep_until(10, "the initialiser", || started.load(SeqCst) >= 1);
                    }
                    started.fetch_add(1, SeqCst);
                    once.call_once(|| gate.acquire()); // never released
                });
            }
            common::ult_sleep_until(10, "all four", || started2.load(SeqCst) == 4);
            elite_rt::sleep(Duration::from_millis(20)); // let the waiters block
        });
        hang_guard(30, "drop with an initialiser and its waiters blocked", move || drop(rt));
    }
    assert!(!once.is_completed());
    let mut poisoned = None;
    once.call_once_force(|state| poisoned = Some(state.is_poisoned()));
    assert_eq!(poisoned, Some(true), "the unwound initialiser poisoned it");
    assert!(once.is_completed());
}

/// An initialiser that asks its own `OnceLock` for the value waits for itself (std: "may
/// deadlock"): the runtime's deadlock report names what it waits on.
#[test]
fn an_initialiser_that_waits_for_itself_is_reported() {
    hang_guard(60, "self-waiting initialiser", || {
        let rt = Runtime::builder().processors(1).deadlock_grace(Duration::from_millis(30)).build().unwrap();
        let d = rt
            .try_block_on(|| {
                let lazy: Arc<OnceLock<u32>> = Arc::new(OnceLock::new());
                let inner = lazy.clone();
                let h = elite_rt::Builder::new()
                    .name("recursive".into())
                    .spawn(move || *lazy.get_or_init(|| *inner.get_or_init(|| 1)))
                    .unwrap();
                h.join().unwrap()
            })
            .expect_err("a deadlock");
        let ult = d.blocked().iter().find(|u| u.name() == Some("recursive")).expect("reported");
        assert_eq!(ult.waits_on(), elite_rt::deadlock::WaitKind::Once, "{d}");
        assert!(d.to_string().contains("'recursive' waits on a Once"), "{d}");
    });
}
