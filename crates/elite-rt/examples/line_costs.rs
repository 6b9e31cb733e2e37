//! Whether the runtime's line costs follow the host: a runtime of two processors idles in steps
//! of 1.1 s (its root ULT sleeps, so that an idle processor measures the line costs again once
//! their measurement is a second old: `sync/host.rs`), and after each step prints the costs
//! the runtime now holds beside a reference measured the plain way: two threads pinned to the
//! first two CPUs pass a counter 20 000 times, the mean round trip.
//!
//! ```sh
//! cargo run --release -p elite-rt --example line_costs -- 60   # seconds (default 30)
//! ```
//!
//! Columns: seconds since start; the runtime's line round trip (ns), its streamed fetch per
//! line (ns), the hand-off rule's line count; how many line measurements succeeded so far; the
//! pinned reference's round trip (ns). The runtime's figures are the medians of its last five
//! measurements, so a reference that reads slow once among fast ones is not expected to move
//! them. Needs two CPUs or more.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Round trips of the reference measurement.
const TRIPS: u64 = 20_000;

/// The mean round trip of a counter passed between threads pinned to CPUs 0 and 1, in ns; `None`
/// where either cannot be pinned.
fn pinned_round_trip() -> Option<f64> {
    let turn = Arc::new(AtomicU64::new(0));
    let answer = {
        let turn = Arc::clone(&turn);
        std::thread::spawn(move || {
            if elite_affinity::pin_current_thread(1).is_err() {
                turn.store(u64::MAX, Ordering::Release);
                return;
            }
            for i in 0..TRIPS {
                loop {
                    match turn.load(Ordering::Acquire) {
                        t if t == 2 * i + 1 => break,
                        u64::MAX => return,
                        _ => std::hint::spin_loop(),
                    }
                }
                turn.store(2 * i + 2, Ordering::Release);
            }
        })
    };
    let ask = std::thread::spawn(move || {
        elite_affinity::pin_current_thread(0).ok()?;
        let t0 = Instant::now();
        for i in 0..TRIPS {
            if turn.compare_exchange(2 * i, 2 * i + 1, Ordering::AcqRel, Ordering::Acquire).is_err() {
                return None; // the other side could not pin
            }
            loop {
                match turn.load(Ordering::Acquire) {
                    t if t == 2 * i + 2 => break,
                    u64::MAX => return None,
                    _ => std::hint::spin_loop(),
                }
            }
        }
        Some(t0.elapsed().as_nanos() as f64 / TRIPS as f64)
    });
    let mean = ask.join().ok()?;
    answer.join().ok()?;
    mean
}

fn main() {
    let secs: u64 = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 30,
        Some(Ok(s)) => s,
        Some(Err(e)) => {
            eprintln!("usage: line_costs [SECONDS]: {e}");
            std::process::exit(2);
        }
    };
    let rt = match elite_rt::Runtime::builder().processors(2).build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("line_costs: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "{:>7} {:>9} {:>8} {:>6} {:>9} {:>10}",
        "s", "rt_ns", "fetch_ns", "lines", "measured", "pinned_ns"
    );
    let t0 = Instant::now();
    while t0.elapsed().as_secs() < secs {
        rt.block_on(|| elite_rt::sleep(Duration::from_millis(1100)));
        let costs = elite_rt::sync::host_costs();
        let (lines, measured) =
            (elite_rt::policy::hand_off::hand_off_lines(), elite_rt::sync::line_measurements());
        let pinned = pinned_round_trip().map_or("-".to_string(), |ns| format!("{ns:.1}"));
        println!(
            "{:>7.1} {:>9.1} {:>8.2} {:>6} {:>9} {:>10}",
            t0.elapsed().as_secs_f64(),
            costs.line_round_trip_ns,
            costs.line_fetch_ns,
            lines,
            measured,
            pinned
        );
    }
}
