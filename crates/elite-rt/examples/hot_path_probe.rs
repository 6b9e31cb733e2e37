//! The hot paths (spawn, switch, wake) without a harness, for instruction counts under callgrind:
//! one processor, `N` operations of one kind. Run it at two counts and take the difference over
//! the difference of the counts, which cancels the start-up and shut-down:
//!
//! ```sh
//! cargo build --release -p elite-rt --example hot_path_probe
//! for n in 100000 200000; do
//!   valgrind --tool=callgrind --callgrind-out-file=cg_$n.out \
//!     target/release/examples/hot_path_probe yield $n 2>&1 | grep refs
//! done
//! ```
//!
//! Kinds: `spawn` (spawn and join one ULT), `yield` (two ULTs yield in turn: one switch each),
//! `wake` (two ULTs hand a semaphore permit back and forth: a wake-up and a switch each),
//! `wake-data` (the same, both ULTs having declared a data block, so that the prefetch runs),
//! `mutex` (`elite-bench sync --bench mutex_contended` on one processor: 1024 ULTs each take
//! turns of {lock a shared mutex, increment, unlock, yield}, N turns in all; `--ults K` changes
//! the 1024; `--no-lock` leaves the lock out, so that the difference is what the lock costs) and
//! `yields` (the same as `mutex --no-lock`: 1024 ULTs that only yield, N yields in all). Two
//! more kinds take the place of the lock in that loop, so that what the lock itself costs can be
//! told from what any access to shared data costs there: `bare` (a relaxed load and store of a
//! shared counter, no lock: at one processor every increment counts, at more some are lost) and
//! `std-mutex` (a `std::sync::Mutex`: two atomic read-modify-writes, no bias; at one processor
//! it never blocks the OS thread).
//! `mutex-work` is `mutex`'s loop with `--work K` iterations of a `black_box` loop after each
//! unlock (0 without the flag): work two processors can do side by side, which gathering the
//! lock's contenders on one gives up (its trial, `sync::mutex::gather`, should then fail).
//! `--no-gather` builds the runtime with `gather_locks(false)`;
//! `--no-prefetch` builds the runtime with prefetch off; `--processors P` gives it P processors
//! instead of one. `--rounds R` runs the whole workload R times on the one runtime, each round a
//! `block_on` of its own whose ULTs reuse the stacks and control blocks the earlier rounds left in
//! the runtime's pools (`elite-bench` times a round after a warm-up round; a fresh runtime's
//! first round can differ from the later ones). `--time` prints the wall-clock nanoseconds per
//! operation (of the whole `block_on`, so spawning and joining included) to stderr, one line per
//! round; `--stats` prints the runtime's
//! counters (`Runtime::stats`) there: with `mutex --processors 2`, how many ULTs went to the
//! lock's home (`gathered`), how often the other processor paused or stole; and the host's
//! measured costs with the threshold of bounces below which a mutex is a candidate for saturation.

use elite_rt::sync::{Mutex, Semaphore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};

/// The positive count after the flag `name`, `default` without the flag, `None` when what
/// follows it is not one.
fn count_flag<T: std::str::FromStr + PartialOrd + Default>(
    args: &[String],
    name: &str,
    default: T,
) -> Option<T> {
    match args.iter().position(|a| a == name) {
        Some(i) => args.get(i + 1)?.parse().ok().filter(|k| *k > T::default()),
        None => Some(default),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: hot_path_probe spawn|yield|wake|wake-data|mutex|mutex-work|yields|bare|std-mutex N [--ults K] [--processors P] [--work K] [--no-lock] [--no-gather] [--no-prefetch] [--rounds R] [--time] [--stats]";
    let (Some(kind), Some(n)) = (args.first(), args.get(1)) else {
        return Err(usage.into());
    };
    let n: u64 = n.parse().map_err(|e| format!("N must be a count: {e}\n{usage}"))?;
    let prefetch = !args.iter().any(|a| a == "--no-prefetch");
    let lock = kind == "mutex" && !args.iter().any(|a| a == "--no-lock");
    let ults: u64 = count_flag(&args, "--ults", 1024).ok_or(usage)?;
    let processors: usize = count_flag(&args, "--processors", 1).ok_or(usage)?;
    let work: u64 = count_flag(&args, "--work", 0).ok_or(usage)?;
    let gather = !args.iter().any(|a| a == "--no-gather");
    let rt = elite_rt::Runtime::builder()
        .processors(processors)
        .prefetch(prefetch)
        .gather_locks(gather)
        .build()?;
    let rounds: usize = count_flag(&args, "--rounds", 1).ok_or(usage)?;
    let time = args.iter().any(|a| a == "--time");
    let mut done = 0;
    for round in 1..=rounds {
        let kind = kind.clone();
        let start = std::time::Instant::now();
        done = rt.block_on(move || match kind.as_str() {
            "spawn" => Ok((0..n).map(|i| elite_rt::spawn(move || i).join().unwrap_or(0)).sum::<u64>() + 1),
            "yield" => {
                let other = elite_rt::spawn(move || {
                    for _ in 0..n {
                        elite_rt::yield_now();
                    }
                    n
                });
                for _ in 0..n {
                    elite_rt::yield_now();
                }
                other.join().map_err(|_| "the other ULT panicked".to_string())
            }
            "wake" | "wake-data" => {
                let data = kind == "wake-data";
                let (ping, pong) = (Arc::new(Semaphore::new(0)), Arc::new(Semaphore::new(0)));
                let (ping2, pong2) = (ping.clone(), pong.clone());
                let block = vec![0u64; 64];
                let mut builder = elite_rt::Builder::new();
                if data {
                    builder = builder.data(&block);
                    elite_rt::set_data_block(&block);
                }
                let other = builder
                    .spawn(move || {
                        for _ in 0..n {
                            ping2.acquire();
                            pong2.release();
                        }
                        n
                    })
                    .map_err(|e| e.to_string())?;
                for _ in 0..n {
                    ping.release();
                    pong.acquire();
                }
                other.join().map_err(|_| "the other ULT panicked".to_string())
            }
            "mutex" | "yields" => {
                let counter = Arc::new(Mutex::new(0u64));
                let turns = n.div_ceil(ults);
                let handles: Vec<_> = (0..ults)
                    .map(|_| {
                        let counter = counter.clone();
                        elite_rt::spawn(move || {
                            let mut mine = 0;
                            for _ in 0..turns {
                                if lock {
                                    *counter.lock().unwrap() += 1;
                                } else {
                                    mine += 1;
                                }
                                elite_rt::yield_now();
                            }
                            mine
                        })
                    })
                    .collect();
                let mut unlocked = 0;
                for h in handles {
                    unlocked += h.join().map_err(|_| "a ULT panicked".to_string())?;
                }
                let total = *counter.lock().unwrap() + unlocked;
                Ok(total)
            }
            "mutex-work" => {
                // (A loop of its own, as `bare`'s.) `work` iterations of a `black_box` loop after
                // each unlock, before the yield: work the processors may do side by side.
                let counter = Arc::new(Mutex::new(0u64));
                let turns = n.div_ceil(ults);
                let handles: Vec<_> = (0..ults)
                    .map(|_| {
                        let counter = counter.clone();
                        elite_rt::spawn(move || {
                            let mut x = 0u64;
                            for _ in 0..turns {
                                *counter.lock().unwrap() += 1;
                                for i in 0..work {
                                    x = std::hint::black_box(x.wrapping_add(i));
                                }
                                elite_rt::yield_now();
                            }
                            std::hint::black_box(x);
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().map_err(|_| "a ULT panicked".to_string())?;
                }
                let total = *counter.lock().unwrap();
                Ok(total)
            }
            "bare" | "std-mutex" => {
                // (A loop of its own, so that the code of `mutex` and `yields`, whose instructions
                // `scripts/hot-paths.sh` tracks, stays as it is.)
                let bare = kind == "bare";
                let shared = Arc::new(AtomicU64::new(0));
                let std_lock = Arc::new(std::sync::Mutex::new(0u64));
                let turns = n.div_ceil(ults);
                let handles: Vec<_> = (0..ults)
                    .map(|_| {
                        let (shared, std_lock) = (shared.clone(), std_lock.clone());
                        elite_rt::spawn(move || {
                            for _ in 0..turns {
                                if bare {
                                    shared.store(shared.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                                } else {
                                    *std_lock.lock().unwrap_or_else(PoisonError::into_inner) += 1;
                                }
                                elite_rt::yield_now();
                            }
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().map_err(|_| "a ULT panicked".to_string())?;
                }
                let locked = *std_lock.lock().unwrap_or_else(PoisonError::into_inner);
                Ok(shared.load(Ordering::Relaxed) + locked)
            }
            other => Err(format!("unknown kind `{other}`\n{usage}")),
        })?;
        let elapsed = start.elapsed();
        if time {
            let per_op = elapsed.as_nanos() as f64 / n.max(1) as f64;
            if rounds == 1 {
                eprintln!("{per_op:.2} ns per op");
            } else {
                eprintln!("{per_op:.2} ns per op (round {round} of {rounds})");
            }
        }
    }
    if args.iter().any(|a| a == "--stats") {
        eprintln!("{}", rt.stats());
        let costs = elite_rt::sync::host_costs();
        eprintln!(
            "{costs:?}; a lock is a candidate for saturation (its trial) below {:.0} ns between bounces",
            costs.gather_gap_ns()
        );
    }
    println!("{done}");
    Ok(())
}
