//! Stack overflows explain themselves: a ULT that runs off its guarded stack is named (id, name,
//! stack size) by the runtime's signal handler before the process aborts; other faults keep the
//! behaviour they had without the runtime; on unguarded stacks a smashed canary is reported at the
//! ULT's next switch.
//!
//! Each scenario runs in a child process (this test binary re-executed with the scenario in
//! `CHILD_ENV`), whose death the parent inspects.

mod common;

use common::describe;
use elite_rt::{Builder, Runtime};
use std::os::unix::process::ExitStatusExt;
use std::process::Output;

const CHILD_ENV: &str = "ELITE_OVERFLOW_CHILD";

/// Runs `scenario` in a child process and returns what it left behind.
fn run_child(scenario: &str) -> Output {
    common::run_child("overflow_child", &[(CHILD_ENV, scenario)])
}

/// The word the child printed after `key=` on stdout (libtest may have begun the line).
fn printed(out: &Output, key: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let prefix = format!("{key}=");
    stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&prefix).map(str::to_owned))
        .unwrap_or_else(|| panic!("the child did not print {key}\n{}", describe(out)))
}

#[test]
fn a_named_ult_that_overflows_its_guarded_stack_is_reported_and_aborts() {
    let out = run_child("named");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", describe(&out));
    let id = printed(&out, "ULT_ID");
    let expected = format!("ULT 'deep-diver' (id {id}) has overflowed its stack of 32768 bytes");
    assert!(stderr.contains(&expected), "expected {expected:?}\n{}", describe(&out));
    assert!(stderr.contains("fatal runtime error: stack overflow in a ULT"), "{}", describe(&out));
    assert!(!stdout_has(&out, "UNREACHABLE"), "{}", describe(&out));
}

#[test]
fn an_unnamed_ult_on_the_default_stack_is_reported_too() {
    let out = run_child("unnamed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", describe(&out));
    let id = printed(&out, "ULT_ID");
    let expected = format!(
        "ULT '<unnamed>' (id {id}) has overflowed its stack of {} bytes",
        elite_rt::DEFAULT_STACK_SIZE
    );
    assert!(stderr.contains(&expected), "expected {expected:?}\n{}", describe(&out));
}

/// Under AddressSanitizer (the `sanitizer` feature, `.ci/run`), the handler installed before the
/// runtime's is the sanitizer's, not std's: it reports the fault itself and exits.
const UNDER_ASAN: bool = cfg!(feature = "sanitizer");

#[test]
fn other_faults_in_a_ult_die_of_the_signal_as_before() {
    let out = run_child("other-fault");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if UNDER_ASAN {
        assert!(stderr.contains("ERROR: AddressSanitizer: SEGV"), "{}", describe(&out));
    } else {
        assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{}", describe(&out));
    }
    assert!(!stderr.contains("overflowed"), "{}", describe(&out));
    assert!(stdout_has(&out, "FAULTING"), "{}", describe(&out));
}

#[test]
fn an_os_thread_overflow_still_reaches_stds_handler() {
    let out = run_child("os-thread");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("ULT '"), "{}", describe(&out));
    if UNDER_ASAN {
        assert!(stderr.contains("ERROR: AddressSanitizer: stack-overflow"), "{}", describe(&out));
        return;
    }
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", describe(&out));
    // std's own report, reached through the handler installed before the runtime's.
    let std_report = stderr.lines().find(|l| l.contains("thread 'small-os-thread'"));
    assert!(std_report.is_some_and(|l| l.contains("has overflowed its stack")), "{}", describe(&out));
}

#[test]
fn a_smashed_canary_is_reported_at_the_next_switch() {
    let out = run_child("canary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", describe(&out));
    let id = printed(&out, "ULT_ID");
    let expected = format!(
        "stack overflow in ULT {id} (smasher): the canary of its 32768-byte unguarded stack was overwritten"
    );
    assert!(stderr.contains(&expected), "expected {expected:?}\n{}", describe(&out));
    assert!(stdout_has(&out, "CANARY_SMASHED"), "{}", describe(&out));
    assert!(!stdout_has(&out, "UNREACHABLE"), "{}", describe(&out));
}

fn stdout_has(out: &Output, s: &str) -> bool {
    String::from_utf8_lossy(&out.stdout).contains(s)
}

/// Recurses until the stack runs out (each frame keeps 256 bytes alive).
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let mut frame = [0u8; 256];
    frame[depth as usize % 256] = depth as u8;
    std::hint::black_box(&mut frame);
    if std::hint::black_box(true) {
        recurse(depth + 1) + frame[(depth as usize + 1) % 256] as u64
    } else {
        0
    }
}

fn print_own_id() {
    println!("ULT_ID={}", elite_rt::current().id().as_u64());
}

#[test]
#[ignore = "child half of the overflow tests"]
fn overflow_child() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else {
        return;
    };
    match scenario.as_str() {
        "named" => {
            let rt = Runtime::builder().processors(1).pin_threads(false).build().unwrap();
            rt.block_on(|| {
                let h = Builder::new()
                    .name("deep-diver".into())
                    .stack_size(32 * 1024)
                    .spawn(|| {
                        print_own_id();
                        recurse(0)
                    })
                    .unwrap();
                let _ = h.join();
            });
        }
        "unnamed" => {
            let rt = Runtime::builder().processors(2).pin_threads(false).build().unwrap();
            rt.block_on(|| {
                let _ = elite_rt::spawn(|| {
                    print_own_id();
                    elite_rt::yield_now(); // the overflow may happen after a switch, too
                    recurse(0)
                })
                .join();
            });
        }
        "other-fault" => {
            let rt = Runtime::builder().processors(1).pin_threads(false).build().unwrap();
            rt.block_on(|| {
                elite_rt::spawn(|| {
                    // SAFETY: a fresh PROT_NONE mapping; the write below faults on purpose, outside any
                    // guard page of a ULT stack.
                    let page = unsafe {
                        libc::mmap(
                            std::ptr::null_mut(),
                            4096,
                            libc::PROT_NONE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                            -1,
                            0,
                        )
                    };
                    assert_ne!(page, libc::MAP_FAILED);
                    println!("FAULTING");
                    // SAFETY: deliberately faults (the page is PROT_NONE): the test is about that.
                    unsafe { (page as *mut u8).write_volatile(1) };
                })
                .join()
                .ok();
            });
        }
        "os-thread" => {
            let _rt = Runtime::builder().processors(1).pin_threads(false).build().unwrap();
            let t = std::thread::Builder::new()
                .name("small-os-thread".into())
                .stack_size(64 * 1024)
                .spawn(|| recurse(0))
                .unwrap();
            let _ = t.join();
        }
        "canary" => {
            // SAFETY: the ULT below overflows only into its own canary (the point of the test).
            let rt = unsafe { Runtime::builder().processors(1).pin_threads(false).unguarded_stacks() }
                .build()
                .unwrap();
            rt.block_on(|| {
                Builder::new()
                    .name("smasher".into())
                    .stack_size(32 * 1024)
                    .spawn(|| {
                        print_own_id();
                        smash_own_canary();
                        println!("CANARY_SMASHED");
                        elite_rt::yield_now(); // the check runs here, after the switch
                        println!("UNREACHABLE");
                    })
                    .unwrap()
                    .join()
                    .ok();
            });
        }
        other => panic!("unknown scenario {other}"),
    }
    println!("UNREACHABLE");
}

/// Overwrites one word of the canary at the low end of the calling ULT's unguarded stack, as a too
/// deep frame would. The canary's pattern is found by scanning down from 2 KiB below a local
/// variable (below this function's own frame, which may hold the pattern in a temporary); every
/// word read lies between the canary and the local, inside the stack's allocation.
fn smash_own_canary() {
    const CANARY: u64 = 0xE11E_57AC_CA4A_121E;
    let local = 0u64;
    let mut at = (std::ptr::addr_of!(local) as usize - 2048) & !7;
    for _ in 0..(32 * 1024 / 8) {
        at -= 8;
        // SAFETY: `at` lies below a live local of this ULT and above the canary (the scan stops at
        // the canary's first word from the top), so inside this ULT's own stack allocation.
        let word = unsafe { (at as *const u64).read_volatile() };
        if word == CANARY {
            // SAFETY: as above; the canary words are part of the allocation and unused by the ULT.
            unsafe { (at as *mut u64).write_volatile(0) };
            return;
        }
    }
    panic!("no canary found below the stack");
}
