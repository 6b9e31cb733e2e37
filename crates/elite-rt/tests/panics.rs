//! Panics: inside ULTs (reported through `join`), in `block_on` (resumed on the caller), and the
//! misuse panics and errors of the API outside a runtime.

mod common;

use common::{hang_guard, payload_str, wait_until};
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
