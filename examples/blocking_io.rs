//! Blocking calls beside computing ULTs: `cargo run --release --example blocking_io`.
//!
//! One processor, 64 ULTs that each read a file and sleep 20 ms through `elite_rt::blocking` (as
//! a slow disk or a foreign library would), and 10 000 ULTs that compute meanwhile. The readers'
//! sleeps overlap on the runtime's spare threads (at most `max_spare_threads`, here 8), and the
//! one processor keeps running the computing ULTs the whole time: the program ends after about
//! 64 / 8 x 20 ms = 160 ms of sleeping, not 64 x 20 ms, and without stopping the computation.
//! It prints the runtime's blocking counters.

use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = elite_rt::Runtime::builder().processors(1).max_spare_threads(8).build()?;
    let path = std::env::current_exe()?;
    let start = Instant::now();
    let (bytes, sum) = rt.block_on(move || {
        let readers: Vec<_> = (0..64)
            .map(|_| {
                let path = path.clone();
                elite_rt::spawn(move || {
                    elite_rt::blocking(|| {
                        std::thread::sleep(Duration::from_millis(20)); // the slow part of the call
                        std::fs::read(&path).map(|b| b.len() as u64)
                    })
                })
            })
            .collect();
        let workers: Vec<_> = (0..10_000u64)
            .map(|i| {
                elite_rt::spawn(move || {
                    (0..1000u64).fold(i, |a, k| a.wrapping_mul(6364136223846793005).wrapping_add(k))
                })
            })
            .collect();
        let sum = workers.into_iter().fold(0u64, |a, h| a.wrapping_add(h.join().expect("worker")));
        let bytes: u64 = readers.into_iter().map(|h| h.join().expect("reader").expect("read")).sum();
        (bytes, sum)
    });
    println!("read {bytes} bytes in 64 calls and computed {sum:#x} in {:?}", start.elapsed());
    let b = rt.stats().blocking;
    println!(
        "blocking calls {}: {} handoffs ({} taken back at once), {} queued at the cap; spare threads: {} started, {} now",
        b.calls, b.handoffs, b.reclaimed, b.queued, b.spares_started, b.threads
    );
    Ok(())
}
