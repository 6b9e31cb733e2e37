//! Small probes of the sync and micro workloads, for `valgrind --tool=callgrind` (instructions per
//! operation) and `--tool=cachegrind` (simulated misses), and for quick wall-clock checks.
//!
//! ```text
//! cargo build --release -p elite-bench --example probe
//! valgrind --tool=callgrind target/release/examples/probe ping_pong 1 100000
//! target/release/examples/probe mutex 2 1024 2000
//! ```
//!
//! `probe <workload> <processors> [sizes...]`; each prints the wall time per operation and the
//! runtime's counters (`PROBE_STATS=1`); `PROBE_SPIN_ROUNDS=n` sets the idle spin rounds. Workloads (the same as the benches of the same name, without the harness):
//! `yield N`, `spawn_join N`, `spawn_bulk N` (after an untimed pass, as the bench; `PROBE_COLD=1`: without, `PROBE_WARM_N`: its size; `PROBE_EXTRA_PASSES=k`: k more untimed passes;
//! `PROBE_PHASES=1`: the spawn and the join phases' times), `ping_pong N`, `mutex THREADS ITERS`,
//! `sync_peak ITERS` (4096 ULTs, 8 KiB stacks; `PROBE_PLACEMENT=1`: how many ring edges join ULTs
//! on different processors at their first and last acquire). `PROBE_POLICY=waker|steal1|waker-steal1`
//! runs a custom No Affinity whose woken ULTs go to the waker's processor on every wake and/or
//! whose thieves take one ULT (experiments on placement). A callgrind run divides the instructions of the
//! whole program by the operations; run two sizes and take the difference to drop the start-up.

use elite_rt::sync::{mpsc, Mutex, Semaphore};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn arg(args: &[String], i: usize, default: u64) -> u64 {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(what) = args.get(1).cloned() else {
        eprintln!(
            "usage: probe <yield|spawn_join|spawn_bulk|ping_pong|mutex|sync_peak> <processors> [sizes]"
        );
        std::process::exit(2);
    };
    let procs = arg(&args, 2, 1) as usize;
    let mut builder = elite_rt::Runtime::builder().processors(procs);
    if let Some(n) = std::env::var("PROBE_SPIN_ROUNDS").ok().and_then(|s| s.parse().ok()) {
        builder = builder.spin_rounds(n);
    }
    if let Ok(name) = std::env::var("PROBE_POLICY") {
        builder = builder.policy(elite_rt::policy::Policy::new(Variant {
            waker: name.contains("waker"),
            steal1: name.contains("steal1"),
        }));
    }
    let rt = builder.build().expect("runtime");
    let (ops, answer, expect, secs) = match what.as_str() {
        "yield" => {
            let n = arg(&args, 3, 1_000_000);
            rt.block_on(move || {
                let t = Instant::now();
                for _ in 0..n {
                    elite_rt::yield_now();
                }
                (n, n, n, t.elapsed().as_secs_f64())
            })
        }
        "spawn_join" => {
            let n = arg(&args, 3, 1_000_000);
            rt.block_on(move || {
                let t = Instant::now();
                let mut sum = 0;
                for i in 0..n {
                    sum += elite_rt::spawn(move || i).join().unwrap();
                }
                (n, sum, n * n.saturating_sub(1) / 2, t.elapsed().as_secs_f64())
            })
        }
        "spawn_bulk" => {
            let n = arg(&args, 3, 1_000_000);
            // A first pass, as the bench's warm-up: the timed pass reuses pooled TCBs.
            if std::env::var_os("PROBE_COLD").is_none() {
                let w = std::env::var("PROBE_WARM_N").ok().and_then(|s| s.parse().ok()).unwrap_or(n);
                rt.block_on(move || {
                    let hs: Vec<_> = (0..w).map(|i| elite_rt::spawn(move || i)).collect();
                    hs.into_iter().for_each(|h| drop(h.join()));
                });
            }
            // More untimed passes (for profilers that cannot leave the warm-up out).
            let extra = std::env::var("PROBE_EXTRA_PASSES").ok().and_then(|s| s.parse().ok()).unwrap_or(0u32);
            for _ in 0..extra {
                rt.block_on(move || {
                    let hs: Vec<_> = (0..n).map(|i| elite_rt::spawn(move || i)).collect();
                    hs.into_iter().for_each(|h| drop(h.join()));
                });
            }
            rt.block_on(move || {
                let t = Instant::now();
                let hs: Vec<_> = (0..n).map(|i| elite_rt::spawn(move || i)).collect();
                let spawned = t.elapsed().as_secs_f64();
                let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
                if std::env::var_os("PROBE_PHASES").is_some() {
                    let all = t.elapsed().as_secs_f64();
                    println!(
                        "spawn phase {:.1} ns/ULT, join phase {:.1} ns/ULT",
                        spawned * 1e9 / n as f64,
                        (all - spawned) * 1e9 / n as f64
                    );
                }
                (n, sum, n * n.saturating_sub(1) / 2, t.elapsed().as_secs_f64())
            })
        }
        "ping_pong" => {
            let n = arg(&args, 3, 1_000_000);
            rt.block_on(move || {
                let (ping_tx, ping_rx) = mpsc::sync_channel::<u64>(0);
                let (pong_tx, pong_rx) = mpsc::sync_channel::<u64>(0);
                let partner = elite_rt::spawn(move || {
                    for _ in 0..n {
                        let v = ping_rx.recv().unwrap();
                        pong_tx.send(v + 1).unwrap();
                    }
                });
                let t = Instant::now();
                let mut c = 0u64;
                for _ in 0..n {
                    ping_tx.send(c + 1).unwrap();
                    c = pong_rx.recv().unwrap();
                }
                let s = t.elapsed().as_secs_f64();
                partner.join().unwrap();
                (n, c, 2 * n, s)
            })
        }
        "mutex" => {
            let threads = arg(&args, 3, 1024);
            let iters = arg(&args, 4, 2000);
            rt.block_on(move || {
                let m = Arc::new(Mutex::new(0u64));
                let t = Instant::now();
                let hs: Vec<_> = (0..threads)
                    .map(|_| {
                        let m = m.clone();
                        elite_rt::spawn(move || {
                            for _ in 0..iters {
                                *m.lock().unwrap() += 1;
                                elite_rt::yield_now();
                            }
                        })
                    })
                    .collect();
                hs.into_iter().for_each(|h| h.join().unwrap());
                let s = t.elapsed().as_secs_f64();
                let c = *m.lock().unwrap();
                (threads * iters, c, threads * iters, s)
            })
        }
        "sync_peak" => {
            const RING: usize = 4096;
            let iters = arg(&args, 3, 1000);
            rt.block_on(move || {
                let sems: Arc<Vec<Semaphore>> =
                    Arc::new((0..RING).map(|i| Semaphore::new(usize::from(i % 4 == 0))).collect());
                let gate = Arc::new(Semaphore::new(0));
                let started = Arc::new(AtomicUsize::new(0));
                let all = Arc::new(Semaphore::new(0));
                // Where each ring ULT ran its first and its last acquire (PROBE_PLACEMENT).
                let at: Arc<Vec<[AtomicUsize; 2]>> =
                    Arc::new((0..RING).map(|_| [AtomicUsize::new(0), AtomicUsize::new(0)]).collect());
                let hs: Vec<_> = (0..RING)
                    .map(|i| {
                        let (sems, gate, started, all, at) =
                            (sems.clone(), gate.clone(), started.clone(), all.clone(), at.clone());
                        elite_rt::Builder::new()
                            .stack_size(8 * 1024)
                            .spawn(move || {
                                if started.fetch_add(1, Ordering::AcqRel) == RING - 1 {
                                    all.release();
                                }
                                gate.acquire();
                                let mut c = 0u64;
                                for _ in 0..iters {
                                    sems[i].acquire();
                                    if c == 0 {
                                        at[i][0].store(elite_rt::current().processor(), Ordering::Relaxed);
                                    }
                                    c += 1;
                                    sems[(i + 1) % RING].release();
                                }
                                at[i][1].store(elite_rt::current().processor(), Ordering::Relaxed);
                                c
                            })
                            .unwrap()
                    })
                    .collect();
                all.acquire();
                let t = Instant::now();
                gate.add_permits(RING);
                let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
                let secs = t.elapsed().as_secs_f64();
                if std::env::var_os("PROBE_PLACEMENT").is_some() {
                    for (k, when) in ["first", "last"].iter().enumerate() {
                        let p = |i: usize| at[i % RING][k].load(Ordering::Relaxed);
                        let cross = (0..RING).filter(|&i| p(i) != p(i + 1)).count();
                        let on0 = (0..RING).filter(|&i| p(i) == 0).count();
                        println!("{when} acquires: {cross} of {RING} ring edges cross processors; {on0} ULTs on processor 0");
                    }
                }
                (RING as u64 * iters, sum, RING as u64 * iters, secs)
            })
        }
        other => {
            eprintln!("unknown workload {other}");
            std::process::exit(2);
        }
    };
    assert_eq!(answer, expect, "wrong answer");
    println!("{what} processors={procs}: {:.1} ns/op ({ops} ops)", secs * 1e9 / ops as f64);
    if std::env::var_os("PROBE_STATS").is_some() {
        println!("{:#?}", rt.stats());
    }
}

/// No Affinity's order with PROBE_POLICY's changes: `waker` sends a woken ULT to its waker's
/// processor, `steal1` makes a thief take one ready ULT instead of half.
#[derive(Debug)]
struct Variant {
    waker: bool,
    steal1: bool,
}

impl elite_rt::policy::Hooks for Variant {
    fn name(&self) -> &'static str {
        "probe-variant"
    }
    fn priority(&self, _ult: &elite_rt::policy::UltInfo, here: &elite_rt::policy::ProcessorView<'_>) -> u64 {
        here.seq
    }
    fn wake_target(
        &self,
        ult: &elite_rt::policy::UltInfo,
        waker: &elite_rt::policy::WakerInfo,
        _state: &mut u64,
    ) -> usize {
        if self.waker {
            waker.processor.unwrap_or(ult.last_processor)
        } else {
            ult.last_processor
        }
    }
    fn steal_count(&self, len: usize) -> usize {
        if self.steal1 {
            len.min(1)
        } else {
            len.div_ceil(2)
        }
    }
}
