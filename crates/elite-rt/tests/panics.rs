//! Panics: inside ULTs (reported through `join`), in `block_on` (resumed on the caller), and the
//! misuse panics and errors of the API outside a runtime.

mod common;

use common::{describe, hang_guard, payload_str, wait_until};
use elite_rt::{current, spawn, try_current, Builder, Runtime, SpawnError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

fn rt(processors: usize) -> Runtime {
    Runtime::builder().processors(processors).build().expect("build runtime")
}

#[test]
fn panicking_ult_reports_its_payload_through_join() {
    hang_guard(60, "panicking ULTs", || {
        let rt = rt(2);
        rt.block_on(|| {
            let e = spawn(|| -> u32 { panic!("boom") }).join().unwrap_err();
            assert_eq!(e.downcast_ref::<&str>(), Some(&"boom"));

            // A runtime argument, so the message is formatted at run time into a `String` payload.
            let n = std::hint::black_box(7);
            let e = spawn(move || -> u32 { panic!("formatted {n}") }).join().unwrap_err();
            assert_eq!(e.downcast_ref::<String>().map(String::as_str), Some("formatted 7"));

            let e = spawn(|| std::panic::panic_any(42u64)).join().unwrap_err();
            assert_eq!(e.downcast_ref::<u64>(), Some(&42));

            // A panic after the ULT switched (slept), so it unwinds on a resumed stack.
            let e = spawn(|| {
                elite_rt::sleep(Duration::from_millis(1));
                elite_rt::yield_now();
                panic!("after a switch")
            })
            .join()
            .unwrap_err();
            assert_eq!(payload_str(&*e), Some("after a switch"));
        });
        // The runtime runs on: more ULTs, correct sums, from inside and outside.
        let sum = rt.block_on(|| {
            (0..1000u64)
                .map(|i| spawn(move || i))
                .collect::<Vec<_>>()
                .into_iter()
                .map(|h| h.join().unwrap())
                .sum::<u64>()
        });
        assert_eq!(sum, 499_500);
        assert_eq!(rt.spawn(|| 5).join().unwrap(), 5);
    });
}

#[test]
fn many_panics_interleaved_with_successes() {
    hang_guard(60, "many panics", || {
        let rt = rt(2);
        let (ok_sum, panics) = rt.block_on(|| {
            let hs: Vec<_> = (0..2000u64)
                .map(|i| {
                    spawn(move || {
                        if i % 3 == 0 {
                            panic!("ult {i}");
                        }
                        i
                    })
                })
                .collect();
            let mut ok_sum = 0;
            let mut panics = 0;
            for (i, h) in hs.into_iter().enumerate() {
                match h.join() {
                    Ok(v) => ok_sum += v,
                    Err(e) => {
                        assert_eq!(payload_str(&*e), Some(format!("ult {i}").as_str()));
                        panics += 1;
                    }
                }
            }
            (ok_sum, panics)
        });
        let expected: u64 = (0..2000u64).filter(|i| i % 3 != 0).sum();
        assert_eq!(ok_sum, expected);
        assert_eq!(panics, (0..2000).filter(|i| i % 3 == 0).count());
    });
}

/// A panic unwinds on a 32 KiB stack, the size `MIN_STACK_SIZE`'s docs give for ULTs that panic in
/// debug builds (the default hook formats and prints the message; 16 KiB overflows there).
#[test]
fn panics_unwind_on_small_stacks() {
    hang_guard(60, "panics on small stacks", || {
        let rt = Runtime::builder().processors(2).stack_size(32 * 1024).build().unwrap();
        let n = rt.block_on(|| {
            let hs: Vec<_> = (0..20).map(|i| spawn(move || -> u32 { panic!("small {i}") })).collect();
            hs.into_iter().map(|h| h.join().is_err() as usize).sum::<usize>()
        });
        assert_eq!(n, 20);
    });
}

#[test]
fn detached_panicking_ults_do_not_disturb_the_runtime() {
    hang_guard(60, "detached panics", || {
        let rt = rt(2);
        let done = Arc::new(AtomicUsize::new(0));
        for i in 0..100 {
            let d = done.clone();
            drop(rt.spawn(move || {
                d.fetch_add(1, SeqCst);
                if i % 2 == 0 {
                    panic!("detached {i}");
                }
            }));
        }
        wait_until(30, "the detached ULTs", || done.load(SeqCst) == 100);
        assert_eq!(rt.block_on(|| spawn(|| 3).join().unwrap()), 3);
    });
}

#[test]
fn panic_in_a_ult_joined_from_an_os_thread() {
    hang_guard(60, "panic joined outside", || {
        let rt = rt(2);
        let h = rt.spawn(|| {
            elite_rt::sleep(Duration::from_millis(10));
            panic!("outside join")
        });
        let e = std::thread::spawn(move || h.join().unwrap_err()).join().unwrap();
        assert_eq!(payload_str(&*e), Some("outside join"));
    });
}

#[test]
fn block_on_resumes_the_panic_on_the_caller() {
    hang_guard(60, "block_on panic", || {
        let rt = rt(2);
        let e =
            catch_unwind(AssertUnwindSafe(|| rt.block_on(|| -> u32 { panic!("root boom") }))).unwrap_err();
        assert_eq!(e.downcast_ref::<&str>(), Some(&"root boom"));

        // A panic of a child, re-raised by the root with `resume_unwind`, arrives the same way.
        let e = catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(|| match spawn(|| -> u32 { panic!("child boom") }).join() {
                Ok(v) => v,
                Err(p) => std::panic::resume_unwind(p),
            })
        }))
        .unwrap_err();
        assert_eq!(e.downcast_ref::<&str>(), Some(&"child boom"));

        // Still usable.
        assert_eq!(rt.block_on(|| 1 + 1), 2);
        let sum = rt.block_on(|| {
            (1..=100u64)
                .map(|i| spawn(move || i))
                .collect::<Vec<_>>()
                .into_iter()
                .map(|h| h.join().unwrap())
                .sum::<u64>()
        });
        assert_eq!(sum, 5050);
    });
}

#[test]
fn spawn_outside_a_runtime_panics_naming_runtime_spawn() {
    let e = catch_unwind(|| {
        let _ = spawn(|| 1);
    })
    .unwrap_err();
    let msg = payload_str(&*e).expect("a string payload");
    assert!(msg.contains("Runtime::spawn"), "message: {msg}");
}

#[test]
fn current_outside_a_runtime_panics() {
    let e = catch_unwind(current).unwrap_err();
    let msg = payload_str(&*e).expect("a string payload");
    assert!(msg.contains("outside a ULT"), "message: {msg}");
}

#[test]
fn try_current_is_none_outside_and_some_inside() {
    assert!(try_current().is_none());
    // Also on an OS thread that is not the test's main thread.
    assert!(std::thread::spawn(try_current).join().unwrap().is_none());
    let rt = rt(1);
    let inside = rt.block_on(try_current).expect("inside a ULT");
    assert_eq!(inside.processor(), 0);
    // Another runtime's existence does not make the caller a ULT.
    assert!(try_current().is_none());
}

#[test]
fn builder_spawn_outside_a_runtime_is_no_runtime() {
    let e = Builder::new().spawn(|| 1).unwrap_err();
    assert_eq!(e, SpawnError::NoRuntime);
    assert!(e.to_string().contains("Runtime::spawn"), "{e}");
    // Even while a runtime exists: only ULTs are inside it.
    let _rt = rt(1);
    assert_eq!(Builder::new().name("x".into()).spawn(|| 1).unwrap_err(), SpawnError::NoRuntime);
}

/// What a test's detached-panic hook saw: ULT id, name, message.
type Seen = Arc<std::sync::Mutex<Vec<(u64, Option<String>, Option<String>)>>>;

fn recording_runtime(processors: usize) -> (Runtime, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let rt = Runtime::builder()
        .processors(processors)
        .detached_panic_hook(move |p| {
            let t = p.thread();
            let entry = (t.id().as_u64(), t.name().map(str::to_owned), p.payload_as_str().map(str::to_owned));
            log.lock().unwrap().push(entry);
        })
        .build()
        .expect("build runtime");
    (rt, seen)
}

#[test]
fn detached_panics_reach_the_hook_once_each_and_the_runtime_runs_on() {
    hang_guard(60, "detached panic hook", || {
        let (rt, seen) = recording_runtime(2);
        let mut expected = Vec::new();

        // Handles dropped before the ULTs finish: each panicking ULT reports as it exits.
        let gate = Arc::new(std::sync::atomic::AtomicBool::new(false));
        for i in 0..20 {
            let g = gate.clone();
            let h = Builder::new()
                .name(format!("early-{i}"))
                .spawn_on(&rt, move || {
                    while !g.load(SeqCst) {
                        elite_rt::yield_now();
                    }
                    if i % 2 == 0 {
                        panic!("early {i}");
                    }
                })
                .unwrap();
            if i % 2 == 0 {
                expected.push((
                    h.thread().id().as_u64(),
                    Some(format!("early-{i}")),
                    Some(format!("early {i}")),
                ));
            }
            drop(h);
        }
        gate.store(true, SeqCst);
        wait_until(30, "the early reports", || seen.lock().unwrap().len() == 10);

        // Handles dropped after the ULTs finished: the drop reports, on the dropping thread.
        let late: Vec<_> = (0..20)
            .map(|i| {
                Builder::new()
                    .name(format!("late-{i}"))
                    .spawn_on(&rt, move || {
                        if i % 2 == 0 {
                            panic!("late {i}");
                        }
                    })
                    .unwrap()
            })
            .collect();
        wait_until(30, "the late ULTs", || late.iter().all(|h| h.is_finished()));
        assert_eq!(seen.lock().unwrap().len(), 10, "a finished ULT whose handle lives is not reported");
        for (i, h) in late.into_iter().enumerate() {
            if i % 2 == 0 {
                expected.push((
                    h.thread().id().as_u64(),
                    Some(format!("late-{i}")),
                    Some(format!("late {i}")),
                ));
            }
            drop(h);
        }
        assert_eq!(seen.lock().unwrap().len(), 20, "dropping the handles reported at once");

        // Joined panics are the joiner's, not the hook's; a non-string payload has no text.
        let e = rt.block_on(|| spawn(|| std::panic::panic_any(7u8)).join()).unwrap_err();
        assert_eq!(e.downcast_ref::<u8>(), Some(&7));
        let h = rt.spawn(|| std::panic::panic_any(9u8));
        let id = h.thread().id().as_u64();
        wait_until(30, "the unnamed ULT", || h.is_finished());
        drop(h);
        expected.push((id, None, None));

        let mut got = seen.lock().unwrap().clone();
        got.sort();
        expected.sort();
        assert_eq!(got, expected);

        // The runtime runs on.
        let sum =
            rt.block_on(|| (1..=100u64).map(|i| spawn(move || i)).map(|h| h.join().unwrap()).sum::<u64>());
        assert_eq!(sum, 5050);
    });
}

#[test]
fn cancelled_detached_ults_are_not_reported() {
    hang_guard(60, "cancelled detached ULTs", || {
        let (rt, seen) = recording_runtime(1);
        let never = Arc::new(elite_rt::sync::Semaphore::new(0));
        let started = Arc::new(AtomicUsize::new(0));
        for _ in 0..10 {
            let (never, started) = (never.clone(), started.clone());
            drop(rt.spawn(move || {
                started.fetch_add(1, SeqCst);
                never.acquire(); // blocks until the runtime is dropped
            }));
        }
        wait_until(30, "the blocked ULTs", || started.load(SeqCst) == 10);
        drop(rt);
        assert!(seen.lock().unwrap().is_empty(), "{:?}", seen.lock().unwrap());
    });
}

const CHILD_ENV: &str = "ELITE_PANICS_CHILD";

fn run_child(scenario: &str) -> std::process::Output {
    common::run_child("panics_child", &[(CHILD_ENV, scenario)])
}

/// The default hook prints one line naming the ULT; std's hook printed the location once, at the
/// panic; nothing prints it twice.
#[test]
fn the_default_hook_names_the_ult_and_leaves_the_location_to_std() {
    let out = run_child("default-hook");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ULT_ID="))
        .unwrap_or_else(|| panic!("no id printed\n{}", describe(&out)));
    let ours = format!("ULT 'loose' (id {id}) panicked and was never joined: detached boom");
    assert_eq!(stderr.lines().filter(|l| *l == ours).count(), 1, "{}", describe(&out));
    // std's report: the processor's OS thread, the location, the message.
    let std_line = stderr.lines().find(|l| l.starts_with("thread 'elite-p0'") && l.contains("panicked at"));
    assert!(std_line.is_some(), "{}", describe(&out));
    assert_eq!(stderr.matches("tests/panics.rs:").count(), 1, "location printed once\n{}", describe(&out));
}

/// A panic in the runtime's own loop (here a user policy's hook, which the loop calls) aborts
/// with a message rather than limping on.
#[test]
fn a_panic_inside_the_processor_loop_aborts_with_a_message() {
    use std::os::unix::process::ExitStatusExt;
    let out = run_child("loop-panic");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", describe(&out));
    assert!(stderr.contains("policy hook failed on purpose"), "{}", describe(&out));
    assert!(stderr.contains("fatal runtime error: panic inside the processor loop"), "{}", describe(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("UNREACHABLE"), "{}", describe(&out));
}

/// A policy whose runqueue keys panic once `ARMED` is set.
#[derive(Debug)]
struct PanickingPolicy;

static ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl elite_rt::policy::Hooks for PanickingPolicy {
    fn name(&self) -> &'static str {
        "panicking"
    }
    fn priority(&self, _: &elite_rt::policy::UltInfo, here: &elite_rt::policy::ProcessorView<'_>) -> u64 {
        assert!(!ARMED.load(SeqCst), "policy hook failed on purpose");
        here.seq
    }
    fn yield_priority(&self, _: &elite_rt::policy::UltInfo, _: &elite_rt::policy::ProcessorView<'_>) -> u64 {
        assert!(!ARMED.load(SeqCst), "policy hook failed on purpose");
        0
    }
}

#[test]
#[ignore = "child half of the panic-report tests"]
fn panics_child() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else {
        return;
    };
    match scenario.as_str() {
        "default-hook" => {
            let rt = rt(1);
            let h = Builder::new()
                .name("loose".into())
                .spawn_on(&rt, || -> () { panic!("detached boom") })
                .unwrap();
            println!("ULT_ID={}", h.thread().id().as_u64());
            wait_until(30, "the ULT", || h.is_finished());
            drop(h); // the report is written here, before `drop` returns
            drop(rt);
        }
        "loop-panic" => {
            let rt = Runtime::builder()
                .processors(1)
                .policy(elite_rt::Policy::new(PanickingPolicy))
                .build()
                .unwrap();
            rt.block_on(|| {
                let other = spawn(|| ());
                ARMED.store(true, SeqCst);
                // Another ULT waits in the start-queue, so the yield goes through the policy.
                elite_rt::yield_now();
                let _ = other.join();
            });
            println!("UNREACHABLE");
        }
        other => panic!("unknown scenario {other}"),
    }
}
