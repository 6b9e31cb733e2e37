//! Helpers shared by the integration tests: hang guards and polling with a bound.
#![allow(dead_code)]

pub mod load;

use elite_rt::policy::{Hooks, ProcessorView, UltInfo, WakerInfo};
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs `f` on a fresh OS thread and returns its result, failing the test if it has not finished
/// after `secs` seconds (a hang guard, never a timing assertion). A panic in `f` is resumed here.
pub fn hang_guard<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(format!("guard: {what}"))
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(r);
        })
        .expect("spawn the guarded thread");
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(v)) => {
            let _ = worker.join();
            v
        }
        Ok(Err(payload)) => {
            let _ = worker.join();
            std::panic::resume_unwind(payload)
        }
        Err(_) => panic!("hang guard: `{what}` did not finish within {secs} s"),
    }
}

/// Polls `cond` (sleeping the calling OS thread 1 ms between polls) until it holds; panics with
/// `what` after `secs` seconds.
pub fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "hang guard: waited {secs} s for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Busy-waits (without any ULT switch: the calling ULT keeps its processor) until `cond` holds;
/// panics after `secs` seconds. Yields the OS thread between polls so that the other processors'
/// threads get CPU time on a small machine.
pub fn spin_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "hang guard: spun {secs} s waiting for {what}");
        std::thread::yield_now(); // the OS thread's yield, not the ULT's
    }
}

/// Sleeps the calling ULT (elite_rt::sleep, which frees its processor) until `cond` holds, backing
/// off from 1 ms to 32 ms; panics after `secs` seconds.
pub fn ult_sleep_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut pause = Duration::from_millis(1);
    while !cond() {
        assert!(Instant::now() < deadline, "hang guard: slept {secs} s waiting for {what}");
        elite_rt::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(32));
    }
}

/// The message of a panic payload, if it is a `&str` or a `String`.
pub fn payload_str(p: &(dyn std::any::Any + Send)) -> Option<&str> {
    p.downcast_ref::<&str>().copied().or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
}

/// Runs the ignored test `child` of the calling test binary alone in a child process, with `env`
/// set (the scenario the child half reads), and returns what it left behind. Backtraces are off:
/// they would only add noise to the assertions' messages.
pub fn run_child(child: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("the test binary");
    Command::new(exe)
        .args(["--exact", child, "--ignored", "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run the child")
}

/// A child's exit status and output, for an assertion's message.
pub fn describe(out: &Output) -> String {
    format!(
        "status: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A test policy for two processors: every woken ULT goes to the processor it did not last run
/// on, so each block moves it.
#[derive(Debug)]
pub struct Alternate;

impl Hooks for Alternate {
    fn name(&self) -> &'static str {
        "alternate"
    }
    fn priority(&self, _: &UltInfo, here: &ProcessorView<'_>) -> u64 {
        here.seq
    }
    fn wake_target(&self, ult: &UltInfo, _: &WakerInfo, _: &mut u64) -> usize {
        (ult.last_processor + 1) % 2
    }
}
