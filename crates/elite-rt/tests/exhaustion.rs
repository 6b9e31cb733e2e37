//! When stacks cannot be had, the runtime reports a `SpawnError` and runs on (never a crash).
//!
//! The scenario runs in a child process (this test binary re-executed) whose address space is
//! capped with `RLIMIT_AS`, so the cap cannot disturb other tests.

use elite_rt::{spawn, yield_now, Builder, Runtime, SpawnError};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

const CHILD_ENV: &str = "ELITE_EXHAUSTION_CHILD";
const BIG_STACK: usize = 8 << 20;

#[test]
fn stack_exhaustion_gives_spawn_error_and_the_runtime_runs_on() {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args(["--exact", "exhaustion_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(
        stdout.contains("EXHAUSTION-OK"),
        "child did not finish its checks\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

/// Address space mapped by this process now, in bytes.
fn mapped_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmSize:")).expect("VmSize");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmSize value");
    kib * 1024
}

#[test]
#[ignore = "child half of stack_exhaustion_gives_spawn_error_and_the_runtime_runs_on"]
fn exhaustion_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let rt = Runtime::builder().processors(1).pin_threads(false).build().expect("runtime");
    // Warm up: the processor's thread gets its malloc arena before the cap.
    assert_eq!(rt.block_on(|| spawn(|| 1).join().expect("warm-up")), 1);

    // Room for a few 8 MiB stacks, not for 64.
    let cap = mapped_bytes() + 48 * (1 << 20);
    let limit = libc::rlimit { rlim_cur: cap as libc::rlim_t, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads the struct we pass; lowering the soft limit is always allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0, "setrlimit");

    let outcome = rt.block_on(|| {
        const K: usize = 64;
        let release = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..K)
            .map(|_| {
                let (release, started) = (release.clone(), started.clone());
                Builder::new()
                    .stack_size(BIG_STACK)
                    .spawn(move || {
                        started.fetch_add(1, SeqCst);
                        while !release.load(SeqCst) {
                            yield_now();
                        }
                    })
                    .expect("spawning needs no stack")
            })
            .collect();
        // Let every ULT either start (and get a stack) or fail to.
        while started.load(SeqCst) + hs.iter().filter(|h| h.is_finished()).count() < K {
            yield_now();
        }
        let running = started.load(SeqCst);
        // While stacks are short, spawning says so instead of queueing more doomed ULTs.
        let refused = Builder::new().stack_size(BIG_STACK).spawn(|| ()).err();
        release.store(true, SeqCst);
        let mut failed = 0;
        for h in hs {
            match h.join() {
                Ok(()) => {}
                Err(payload) => match payload.downcast_ref::<SpawnError>() {
                    Some(SpawnError::Stack { size, .. }) => {
                        assert_eq!(*size, BIG_STACK);
                        failed += 1;
                    }
                    other => panic!("unexpected join error: {other:?}"),
                },
            }
        }
        // Stacks came back: spawning works again.
        let again = Builder::new().stack_size(BIG_STACK).spawn(|| 5).expect("spawn after recovery").join();
        (running, failed, refused, again.ok())
    });
    let (running, failed, refused, again) = outcome;
    assert!(running >= 1, "some ULTs got a stack");
    assert!(failed >= 1, "some ULTs could not get one");
    assert_eq!(running + failed, 64);
    match refused {
        Some(e @ SpawnError::Stack { .. }) => assert!(e.to_string().contains("vm.max_map_count"), "{e}"),
        other => panic!("spawn while exhausted returned {other:?}"),
    }
    assert_eq!(again, Some(5));
    drop(rt);
    println!("EXHAUSTION-OK running={running} failed={failed}");
}
