//! When stacks cannot be had, the runtime reports a `SpawnError` and runs on (never a crash), and
//! nothing leaks: repeated rounds of exhaustion leave the same mappings, address space and TCB
//! count as the first.
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
#[cfg_attr(
    feature = "sanitizer",
    ignore = "AddressSanitizer's own mappings and quarantine hide the runtime's memory figures"
)]
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

/// Memory mappings of this process now.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps").lines().count()
}

/// Fresh TCBs allocated so far, over all processors.
fn fresh_tcbs(rt: &Runtime) -> u64 {
    rt.stats().processors.iter().map(|p| p.tcb_fresh).sum()
}

/// What one round of exhaustion saw.
#[derive(Debug)]
struct Round {
    /// ULTs that got a stack and ran.
    running: usize,
    /// Joined ULTs whose join reported `SpawnError::Stack`.
    failed: usize,
    /// Detached ULTs reported to the hook as never run.
    reported: usize,
    /// What a spawn returned while stacks were exhausted.
    refused: Option<SpawnError>,
    /// A spawn after the stacks came back, joined.
    again: Option<u32>,
}

/// Spawns `JOINED` + `DETACHED` ULTs on 8 MiB stacks under a cap that fits a few, and lets them all
/// start or fail. The detached ones are spawned first, so (the start-queue being LIFO) they start
/// last, when stacks have run out.
fn exhaust_once(rt: &Runtime, reports: &Arc<AtomicUsize>) -> Round {
    const JOINED: usize = 64;
    const DETACHED: usize = 8;
    let before = reports.load(SeqCst);
    rt.block_on(|| {
        let release = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicUsize::new(0));
        let spawn_one = || {
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
        };
        for _ in 0..DETACHED {
            drop(spawn_one());
        }
        let hs: Vec<_> = (0..JOINED).map(|_| spawn_one()).collect();
        // Let every ULT either start (and get a stack) or fail to.
        let settled = || {
            started.load(SeqCst)
                + hs.iter().filter(|h| h.is_finished()).count()
                + (reports.load(SeqCst) - before)
        };
        while settled() < JOINED + DETACHED {
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
        let reported = reports.load(SeqCst) - before;
        assert_eq!(running + failed + reported, JOINED + DETACHED, "every ULT ran or was reported");
        Round { running, failed, reported, refused, again: again.ok() }
    })
}

#[test]
#[ignore = "child half of stack_exhaustion_gives_spawn_error_and_the_runtime_runs_on"]
fn exhaustion_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let reports = Arc::new(AtomicUsize::new(0));
    let hook_reports = reports.clone();
    let rt = Runtime::builder()
        .processors(1)
        .pin_threads(false)
        .detached_panic_hook(move |p| {
            let e = p.payload().downcast_ref::<SpawnError>();
            assert!(matches!(e, Some(SpawnError::Stack { size: BIG_STACK, .. })), "{p}");
            assert!(p.to_string().contains("never ran and was never joined: could not allocate"), "{p}");
            hook_reports.fetch_add(1, SeqCst);
        })
        .build()
        .expect("runtime");
    // Warm up: the processor's thread gets its malloc arena before the cap.
    assert_eq!(rt.block_on(|| spawn(|| 1).join().expect("warm-up")), 1);

    // Room for a few 8 MiB stacks, not for 72.
    let cap = mapped_bytes() + 48 * (1 << 20);
    let limit = libc::rlimit { rlim_cur: cap as libc::rlim_t, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads the struct we pass; lowering the soft limit is always allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0, "setrlimit");

    // Three rounds: the first may leave pools and the malloc heap bigger; every later round must
    // leave the process exactly where the first did (no stack mapping, TCB or memory kept).
    let mut after = Vec::new();
    for round in 0..3 {
        let r = exhaust_once(&rt, &reports);
        println!("round {round}: {r:?}");
        assert!(r.running >= 1, "some ULTs got a stack");
        assert!(r.failed + r.reported >= 1, "some ULTs could not get one");
        match &r.refused {
            Some(e @ SpawnError::Stack { .. }) => assert!(e.to_string().contains("vm.max_map_count"), "{e}"),
            other => panic!("spawn while exhausted returned {other:?}"),
        }
        assert_eq!(r.again, Some(5));
        after.push((mappings(), mapped_bytes(), fresh_tcbs(&rt)));
    }
    println!("mappings, mapped bytes, fresh TCBs after each round: {after:?}");
    assert!(reports.load(SeqCst) >= 1, "detached ULTs that never ran were reported");
    assert_eq!(after[1], after[0], "round 2 kept something");
    assert_eq!(after[2], after[0], "round 3 kept something");
    drop(rt);
    println!("EXHAUSTION-OK");
}
