//! Deadlock reports: when every ULT is blocked and nothing can wake one, `try_block_on` returns
//! the report (each blocked ULT's id, name and what it waits on), `OnDeadlock::Abort` aborts
//! with it, and the default prints it and waits on; programs that only wait on something the
//! runtime can see (a timer, a busy processor, an OS thread in a timed wait) get no report.
//!
//! The aborting and printing cases run in a child process (this test binary re-executed with the
//! scenario in `CHILD_ENV`), whose death and stderr the parent inspects.

mod common;

use common::{describe, hang_guard};
use elite_rt::deadlock::{Deadlock, OnDeadlock, WaitKind};
use elite_rt::sync::{mpsc, Barrier, Condvar, Mutex, RwLock, Semaphore, WaitGroup};
use elite_rt::{BuildError, Builder, JoinHandle, Runtime};
use std::os::unix::process::ExitStatusExt;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

const CHILD_ENV: &str = "ELITE_DEADLOCK_CHILD";

/// The grace period of these tests: short, so that reports come quickly.
const GRACE: Duration = Duration::from_millis(30);

fn runtime(processors: usize) -> Runtime {
    Runtime::builder().processors(processors).deadlock_grace(GRACE).build().expect("runtime")
}

/// Spawns a named ULT.
fn named<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    Builder::new().name(name.into()).spawn(f).expect("spawn")
}

/// Two ULTs take two mutexes in opposite orders (a barrier makes sure each holds its first);
/// the root joins both.
fn lock_order_inversion() {
    let (a, b) = (Arc::new(Mutex::new(0)), Arc::new(Mutex::new(0)));
    let both = Arc::new(Barrier::new(2));
    let left = {
        let (a, b, both) = (a.clone(), b.clone(), both.clone());
        named("left", move || {
            let _a = a.lock().unwrap();
            both.wait();
            let _b = b.lock().unwrap();
        })
    };
    let right = named("right", move || {
        let _b = b.lock().unwrap();
        both.wait();
        let _a = a.lock().unwrap();
    });
    left.join().unwrap();
    right.join().unwrap();
}

fn find<'a>(d: &'a Deadlock, name: &str) -> &'a elite_rt::deadlock::BlockedUlt {
    d.blocked()
        .iter()
        .find(|u| u.name() == Some(name))
        .unwrap_or_else(|| panic!("{name} is not in the report:\n{d}"))
}

#[test]
fn try_block_on_reports_a_lock_order_inversion() {
    hang_guard(60, "lock-order inversion", || {
        let rt = runtime(2);
        let d = rt.try_block_on(lock_order_inversion).expect_err("a deadlock");
        let (left, right, root) = (find(&d, "left"), find(&d, "right"), find(&d, "root"));
        assert_eq!(left.waits_on(), WaitKind::Mutex, "{d}");
        assert_eq!(right.waits_on(), WaitKind::Mutex, "{d}");
        assert_ne!(left.address(), right.address(), "two different mutexes:\n{d}");
        assert_eq!(root.waits_on(), WaitKind::Join, "{d}");
        assert_eq!(root.joins(), Some(left.id()), "the root joins `left` first:\n{d}");
        assert_eq!(d.blocked().len(), 3, "{d}");
        assert!(d.quiet_for() >= GRACE);
        assert!(d.os_waiters() >= 1, "the caller of try_block_on waits: {d}");
        let text = d.to_string();
        assert!(text.contains(&format!("ULT {} 'left' waits on a Mutex", left.id().as_u64())), "{text}");
        assert!(text.contains("'root' waits on a join of ULT"), "{text}");
        // Dropping the runtime cancels the blocked ULTs (and unwinds their guards).
    });
}

/// A ULT that blocks in a destructor while it unwinds a panic waits on its own OS thread (the
/// thread's panic count is its own); the report still names it, with what it waits on and that it
/// unwinds: here it locks a mutex that the root holds while the root joins it.
#[test]
fn a_ult_blocked_while_it_unwinds_is_named_in_the_report() {
    struct LockOnDrop(Arc<Mutex<()>>);
    impl Drop for LockOnDrop {
        fn drop(&mut self) {
            let _g = self.0.lock();
        }
    }
    for processors in [1, 2] {
        hang_guard(60, "a deadlock while unwinding", move || {
            let rt = runtime(processors);
            let d = rt
                .try_block_on(|| {
                    let m = Arc::new(Mutex::new(()));
                    let held = m.lock().unwrap();
                    let (tx, rx) = mpsc::channel::<()>();
                    let m2 = m.clone();
                    let unwinding = named("unwinding", move || {
                        let _d = LockOnDrop(m2);
                        tx.send(()).unwrap();
                        panic!("unwinds into a lock the root holds");
                    });
                    rx.recv().unwrap();
                    let _ = unwinding.join(); // waits for ever: the root holds the lock
                    drop(held);
                })
                .expect_err("a deadlock");
            let (u, root) = (find(&d, "unwinding"), find(&d, "root"));
            assert_eq!(u.waits_on(), WaitKind::Mutex, "{d}");
            assert!(u.unwinding(), "{d}");
            assert!(!root.unwinding(), "{d}");
            assert_eq!(root.joins(), Some(u.id()), "{d}");
            assert_eq!(d.blocked().len(), 2, "{d}");
            let text = d.to_string();
            assert!(
                text.contains(&format!("ULT {} 'unwinding' waits on a Mutex", u.id().as_u64()))
                    && text.contains("in the middle of unwinding a panic"),
                "{text}"
            );
            assert_eq!(rt.stats().blocking.anchored, 1, "{d}");
            // Dropping the runtime cancels the root, whose guard then lets the unwinding ULT go
            // on, on its own thread, which cancels it when it is done.
        });
    }
}

/// One ULT blocked on each kind of object; every one is named with its kind.
#[test]
fn every_kind_of_wait_is_named() {
    hang_guard(60, "every kind of wait", || {
        let rt = runtime(2);
        let d = rt
            .try_block_on(|| {
                // Holders keep objects taken by blocking on `never`, whose sender stays here.
                let (keep, never) = mpsc::channel::<()>();
                let never = Arc::new(Mutex::new(never));
                let hold = move || {
                    let never = never.clone();
                    move || {
                        let _ = never.lock().unwrap().recv();
                    }
                };
                let m = Arc::new(Mutex::new(()));
                let rw = Arc::new(RwLock::new(()));
                let mut hs = Vec::new();
                {
                    let (m, rw, hold) = (m.clone(), rw.clone(), hold.clone());
                    hs.push(named("holder", move || {
                        let _g = m.lock().unwrap();
                        let _r = rw.read().unwrap();
                        hold()(); // waits on the channel (its mutex is free: nobody else takes it first)
                    }));
                }
                // Let the holder take both before the others try.
                while m.try_lock().is_ok() {
                    elite_rt::yield_now();
                }
                {
                    let m = m.clone();
                    hs.push(named("on-mutex", move || drop(m.lock().unwrap())));
                }
                {
                    let rw = rw.clone();
                    hs.push(named("on-rwlock-write", move || drop(rw.write().unwrap())));
                }
                hs.push(named("on-condvar", || {
                    let (m, cv) = (Mutex::new(false), Condvar::new());
                    let g = m.lock().unwrap();
                    let _g = cv.wait_while(g, |ready| !*ready).unwrap();
                }));
                hs.push(named("on-barrier", || {
                    let _ = Barrier::new(2).wait();
                }));
                hs.push(named("on-semaphore", || Semaphore::new(0).acquire()));
                hs.push(named("on-waitgroup", || {
                    let wg = WaitGroup::new();
                    wg.add(1);
                    wg.wait();
                }));
                let (tx, rx) = mpsc::sync_channel::<u8>(0);
                hs.push(named("on-send", move || {
                    let _ = tx.send(1);
                }));
                let mut ok = 0; // the root blocks in the first join: the holder's
                for h in hs {
                    ok += h.join().is_ok() as usize;
                }
                drop((rx, keep));
                ok
            })
            .expect_err("a deadlock");
        for (name, kind) in [
            ("holder", WaitKind::ChannelRecv),
            ("on-mutex", WaitKind::Mutex),
            ("on-rwlock-write", WaitKind::RwLockWrite),
            ("on-condvar", WaitKind::Condvar),
            ("on-barrier", WaitKind::Barrier),
            ("on-semaphore", WaitKind::Semaphore),
            ("on-waitgroup", WaitKind::WaitGroup),
            ("on-send", WaitKind::ChannelSend),
            ("root", WaitKind::Join),
        ] {
            assert_eq!(find(&d, name).waits_on(), kind, "{name}:\n{d}");
        }
        assert_eq!(find(&d, "root").joins(), Some(find(&d, "holder").id()), "{d}");
    });
}

/// Read waiters behind a writer are named as such.
#[test]
fn a_reader_behind_a_writer_is_named() {
    hang_guard(60, "rwlock read", || {
        let rt = runtime(1);
        let d = rt
            .try_block_on(|| {
                let (keep, never) = mpsc::channel::<()>();
                let rw = Arc::new(RwLock::new(()));
                let writer = {
                    let rw = rw.clone();
                    named("writer", move || {
                        let _w = rw.write().unwrap();
                        let _ = never.recv();
                    })
                };
                while rw.try_read().is_ok() {
                    elite_rt::yield_now();
                }
                let reader = named("reader", move || drop(rw.read().unwrap()));
                let _ = (reader.join(), writer.join());
                drop(keep);
            })
            .expect_err("a deadlock");
        assert_eq!(find(&d, "reader").waits_on(), WaitKind::RwLockRead, "{d}");
        assert_eq!(find(&d, "writer").waits_on(), WaitKind::ChannelRecv, "{d}");
    });
}

/// Waiting on something the runtime can see is never reported: a sleeping ULT (a timer), a ULT
/// that computes for many grace periods without switching (a busy processor), a timed wait, and
/// an OS thread in a timed elite wait that then sends.
#[test]
fn waits_the_runtime_can_see_are_not_reported() {
    hang_guard(60, "no misfire", || {
        let rt = runtime(2);
        let long = GRACE * 8;
        // A timer.
        rt.try_block_on(move || elite_rt::sleep(long)).expect("a sleep is no deadlock");
        // A ULT that keeps its processor busy while another waits for it.
        rt.try_block_on(move || {
            let busy = named("busy", move || {
                let t0 = std::time::Instant::now();
                while t0.elapsed() < long {
                    std::hint::spin_loop();
                }
                7
            });
            busy.join().unwrap()
        })
        .expect("a busy processor is no deadlock");
        // A timed wait of a ULT.
        rt.try_block_on(move || {
            let (_tx, rx) = mpsc::channel::<()>();
            rx.recv_timeout(long).is_err()
        })
        .expect("a timed wait is no deadlock");
        // An OS thread waiting in an elite primitive with a timeout, which then sends.
        let (tx, rx) = mpsc::channel::<u32>();
        let (_never_tx, never) = mpsc::channel::<()>();
        let os = std::thread::spawn(move || {
            let _ = never.recv_timeout(long); // a timed elite wait: the runtime counts it
            tx.send(5).unwrap();
        });
        assert_eq!(rt.try_block_on(move || rx.recv().unwrap()).expect("no deadlock"), 5);
        os.join().unwrap();
        // A blocking call in flight (its ULT is neither ready nor blocked on an object), joined
        // by the root, and one whose return sends to a waiting ULT.
        rt.try_block_on(move || {
            let call = named("caller", move || elite_rt::blocking(move || std::thread::sleep(long)));
            call.join().unwrap()
        })
        .expect("a blocking call in flight is no deadlock");
        rt.try_block_on(move || {
            let (tx, rx) = mpsc::channel::<u32>();
            let _caller = named("caller", move || {
                let v = elite_rt::blocking(move || {
                    std::thread::sleep(long);
                    9
                });
                tx.send(v).unwrap();
            });
            assert_eq!(rx.recv().unwrap(), 9);
        })
        .expect("a receiver waiting on a blocking call is no deadlock");
    });
}

/// The documented limit: an OS thread that waits somewhere the runtime cannot see (here a std
/// channel) before it wakes a ULT is invisible, so the report comes early. The ULT then runs on
/// once the thread acts.
#[test]
fn an_outside_thread_the_runtime_cannot_see_gets_an_early_report() {
    hang_guard(60, "the residual risk", || {
        let rt = runtime(2);
        let (tx, rx) = mpsc::channel::<u32>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<u32>();
        let os = std::thread::spawn(move || {
            go_rx.recv().unwrap(); // invisible to the runtime
            tx.send(9).unwrap();
        });
        let d = rt
            .try_block_on(move || {
                let got = rx.recv().unwrap();
                done_tx.send(got).unwrap();
            })
            .expect_err("the runtime cannot see the OS thread");
        assert_eq!(find(&d, "root").waits_on(), WaitKind::ChannelRecv, "{d}");
        go_tx.send(()).unwrap();
        assert_eq!(done_rx.recv().unwrap(), 9, "the root ran on after the report");
        os.join().unwrap();
    });
}

#[test]
fn the_grace_period_is_validated() {
    for bad in [Duration::ZERO, Duration::from_secs(7200)] {
        let err = Runtime::builder().processors(1).deadlock_grace(bad).build().unwrap_err();
        assert!(matches!(err, BuildError::OutOfRange { .. }), "{err:?}");
        assert!(err.to_string().contains("deadlock_grace"), "{err}");
    }
}

// ---- child processes ----

fn run_child(scenario: &str) -> Output {
    common::run_child("deadlock_child", &[(CHILD_ENV, scenario)])
}

#[test]
fn on_deadlock_abort_prints_the_report_and_aborts() {
    let out = run_child("abort");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", describe(&out));
    for needle in [
        "elite-rt: deadlock: every ULT of the runtime is blocked",
        "'left' waits on a Mutex (wait queue at 0x",
        "'right' waits on a Mutex (wait queue at 0x",
        "'root' waits on a join of ULT",
        "aborting (RuntimeBuilder::on_deadlock(OnDeadlock::Abort))",
    ] {
        assert!(stderr.contains(needle), "expected {needle:?}\n{}", describe(&out));
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains("UNREACHABLE"), "{}", describe(&out));
}

/// The default prints the report once and waits on: an OS thread the runtime cannot see wakes
/// the root later, a line says the stall ended, and the program finishes normally.
#[test]
fn the_default_reports_and_waits_on() {
    let out = run_child("report");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("RESULT=42"), "{}", describe(&out));
    assert_eq!(stderr.matches("elite-rt: deadlock:").count(), 1, "one report per stall\n{}", describe(&out));
    assert!(stderr.contains("'root' waits on a channel (to receive)"), "{}", describe(&out));
    assert!(stderr.contains("block_on goes on waiting"), "{}", describe(&out));
    assert!(stderr.contains("made progress"), "{}", describe(&out));
}

#[test]
#[ignore = "child half of the tests above (run with ELITE_DEADLOCK_CHILD set)"]
fn deadlock_child() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else { return };
    match scenario.as_str() {
        "abort" => {
            let rt = Runtime::builder()
                .processors(2)
                .deadlock_grace(GRACE)
                .on_deadlock(OnDeadlock::Abort)
                .build()
                .unwrap();
            rt.block_on(lock_order_inversion);
            println!("UNREACHABLE");
        }
        "report" => {
            let rt = Runtime::builder().processors(2).deadlock_grace(GRACE).build().unwrap();
            let (tx, rx) = mpsc::channel::<u32>();
            let os = std::thread::spawn(move || {
                // Invisible to the runtime: a std sleep far longer than the grace period.
                std::thread::sleep(Duration::from_secs(2));
                tx.send(42).unwrap();
            });
            let got = rt.block_on(move || rx.recv().unwrap());
            os.join().unwrap();
            println!("RESULT={got}");
        }
        other => panic!("unknown scenario {other}"),
    }
}
