//! Criterion benchmarks of elite's core operations (`cargo bench --bench core`), with criterion's
//! statistics, its comparison with the previous run, and its HTML report
//! (`target/criterion/report/index.html`).
//!
//! | benchmark | one iteration |
//! | --- | --- |
//! | `yield` | `yield_now` in the root ULT of a one-processor runtime |
//! | `spawn_join/<processors>` | spawn one ULT and join it at once, 1 and 2 processors |
//! | `spawn_bulk` | spawn 10 000 ULTs returning their index, then join them all |
//! | `fib` | naive parallel fib(20), a ULT per call above the cutoff 10 |
//! | `ping_pong` | one round trip of a counter between two ULTs over rendezvous channels |
//! | `mutex_contended` | 64 ULTs each do 100 times {lock, increment, unlock, yield} |
//! | `sync_peak` | a ring of 256 ULTs passing 64 semaphore permits, 100 acquires each |
//! | `synthetic_1024/<policy>` | 64 ULTs in groups of 16 each walk a 16 KiB working set 4 times, synchronizing with their group after each walk, under `no-affinity` and `virtual-time` |
//! | `grid_solve` | the adaptive-grid solver at level 8, answer checked against its bounds |
//!
//! Every iteration checks its answer (a sum, a count, a fib value, the solver's residual and
//! error) and panics on a wrong one, so a benchmark never times a broken runtime. Each benchmark
//! builds its runtime once (the grid solve builds its own per solve); the root ULT times its
//! iterations itself (`iter_custom`), so entering and leaving the runtime is not part of one.
//!
//! `cargo test --bench core` (or `cargo bench --bench core -- --test`) runs each benchmark once,
//! unmeasured: a quick check that every answer is right.
//!
//! criterion measures elite alone, repeatably, for before/after comparisons while working on the
//! runtime; the `elite-bench` command measures elite against its peers (corosensei, Go, may,
//! rayon, std threads) interleaved in one run, at the suites' full sizes, and writes the JSON
//! documents that `docs/benchmarks.md` is made from.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use elite_rt::policy::Policy;
use elite_rt::sync::{mpsc, Mutex, Semaphore};
use elite_rt::Runtime;

/// A runtime with `processors` processors (and `policy`, if given); benchmarks cannot run
/// without one.
fn runtime(processors: usize, policy: Option<Policy>) -> Runtime {
    let mut builder = Runtime::builder().processors(processors);
    if let Some(policy) = policy {
        builder = builder.policy(policy);
    }
    builder
        .build()
        .unwrap_or_else(|e| panic!("cannot build an elite runtime with {processors} processors: {e}"))
}

/// The processor counts to measure: 1, and 2 where the machine has two CPUs.
fn processor_counts() -> Vec<usize> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    [1, 2].into_iter().filter(|&p| p <= cpus).collect()
}

/// Times `iters` runs of `op` inside the root ULT of `rt`.
fn timed(rt: &Runtime, iters: u64, op: impl Fn() + Send + Sync + 'static) -> Duration {
    rt.block_on(move || {
        let start = Instant::now();
        for _ in 0..iters {
            op();
        }
        start.elapsed()
    })
}

fn yield_now(c: &mut Criterion) {
    let rt = runtime(1, None);
    c.bench_function("yield", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let start = Instant::now();
                let mut count = 0u64;
                for _ in 0..iters {
                    elite_rt::yield_now();
                    count += 1;
                }
                let elapsed = start.elapsed();
                assert_eq!(count, iters, "yield loop miscounted");
                elapsed
            })
        });
    });
}

fn spawn_join(c: &mut Criterion) {
    let mut group = c.benchmark_group("spawn_join");
    for processors in processor_counts() {
        let rt = runtime(processors, None);
        group.bench_function(BenchmarkId::from_parameter(processors), |b| {
            b.iter_custom(|iters| {
                rt.block_on(move || {
                    let start = Instant::now();
                    for i in 0..iters {
                        let value = elite_rt::spawn(move || black_box(i)).join();
                        assert!(matches!(value, Ok(v) if v == i), "a ULT returned a wrong value");
                    }
                    start.elapsed()
                })
            });
        });
    }
    group.finish();
}

fn spawn_bulk(c: &mut Criterion) {
    const N: u64 = 10_000;
    let rt = runtime(*processor_counts().last().unwrap_or(&1), None);
    let mut group = c.benchmark_group("spawn_bulk");
    group.sample_size(20);
    group.bench_function(BenchmarkId::from_parameter(N), |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || {
                let handles: Vec<_> = (0..N).map(|i| elite_rt::spawn(move || black_box(i))).collect();
                let sum: u64 = handles.into_iter().map(|h| h.join().expect("a ULT panicked")).sum();
                assert_eq!(sum, N * (N - 1) / 2, "wrong sum of the spawned ULTs' values");
            })
        });
    });
    group.finish();
}

/// fib(n), a ULT for fib(n - 1) above `cutoff`.
fn fib(n: u64, cutoff: u64) -> u64 {
    if n <= cutoff {
        return fib_seq(n);
    }
    let left = elite_rt::spawn(move || fib(n - 1, cutoff));
    let right = fib(n - 2, cutoff);
    left.join().expect("a fib ULT panicked") + right
}

fn fib_seq(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

fn fib_bench(c: &mut Criterion) {
    let rt = runtime(*processor_counts().last().unwrap_or(&1), None);
    let mut group = c.benchmark_group("fib");
    group.sample_size(20);
    group.bench_function(BenchmarkId::from_parameter(20), |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || assert_eq!(fib(black_box(20), 10), 6765, "wrong fib(20)"))
        });
    });
    group.finish();
}

fn ping_pong(c: &mut Criterion) {
    let mut group = c.benchmark_group("ping_pong");
    for processors in processor_counts() {
        let rt = runtime(processors, None);
        group.bench_function(BenchmarkId::from_parameter(processors), |b| {
            b.iter_custom(|iters| {
                rt.block_on(move || {
                    let (ping_tx, ping_rx) = mpsc::sync_channel::<u64>(0);
                    let (pong_tx, pong_rx) = mpsc::sync_channel::<u64>(0);
                    let partner = elite_rt::spawn(move || {
                        while let Ok(value) = ping_rx.recv() {
                            if pong_tx.send(value + 1).is_err() {
                                break;
                            }
                        }
                    });
                    let start = Instant::now();
                    let mut counter = 0u64;
                    for _ in 0..iters {
                        ping_tx.send(counter).expect("the partner ULT is gone");
                        counter = pong_rx.recv().expect("the partner ULT is gone");
                    }
                    let elapsed = start.elapsed();
                    drop(ping_tx);
                    partner.join().expect("the partner ULT panicked");
                    assert_eq!(counter, iters, "wrong counter after the round trips");
                    elapsed
                })
            });
        });
    }
    group.finish();
}

fn mutex_contended(c: &mut Criterion) {
    const ULTS: u64 = 64;
    const EACH: u64 = 100;
    let mut group = c.benchmark_group("mutex_contended");
    group.sample_size(20);
    for processors in processor_counts() {
        let rt = runtime(processors, None);
        group.bench_function(BenchmarkId::from_parameter(processors), |b| {
            b.iter_custom(|iters| {
                timed(&rt, iters, || {
                    let counter = Arc::new(Mutex::new(0u64));
                    let handles: Vec<_> = (0..ULTS)
                        .map(|_| {
                            let counter = Arc::clone(&counter);
                            elite_rt::spawn(move || {
                                for _ in 0..EACH {
                                    *counter.lock().expect("poisoned") += 1;
                                    elite_rt::yield_now();
                                }
                            })
                        })
                        .collect();
                    for h in handles {
                        h.join().expect("a ULT panicked");
                    }
                    assert_eq!(*counter.lock().expect("poisoned"), ULTS * EACH, "lost increments");
                })
            });
        });
    }
    group.finish();
}

fn sync_peak(c: &mut Criterion) {
    const RING: usize = 256;
    const PERMITS_EVERY: usize = 4;
    const EACH: u64 = 100;
    let mut group = c.benchmark_group("sync_peak");
    group.sample_size(20);
    for processors in processor_counts() {
        let rt = runtime(processors, None);
        group.bench_function(BenchmarkId::from_parameter(processors), |b| {
            b.iter_custom(|iters| {
                timed(&rt, iters, || {
                    let ring: Arc<Vec<Semaphore>> = Arc::new(
                        (0..RING).map(|i| Semaphore::new(usize::from(i % PERMITS_EVERY == 0))).collect(),
                    );
                    let handles: Vec<_> = (0..RING)
                        .map(|i| {
                            let ring = Arc::clone(&ring);
                            elite_rt::spawn(move || {
                                let mut count = 0u64;
                                for _ in 0..EACH {
                                    ring[i].acquire();
                                    count += 1;
                                    ring[(i + 1) % RING].release();
                                }
                                count
                            })
                        })
                        .collect();
                    let total: u64 = handles.into_iter().map(|h| h.join().expect("a ULT panicked")).sum();
                    assert_eq!(total, RING as u64 * EACH, "wrong number of acquires");
                })
            });
        });
    }
    group.finish();
}

/// A working set of `lines` cache lines holding one cycle through all of them (line k's first
/// word is the next line's index), from `seed`.
fn working_set(lines: usize, seed: u64) -> Vec<[u32; 16]> {
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    // Sattolo's shuffle: a single cycle.
    for i in (1..lines).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % i as u64) as usize);
    }
    let mut set = vec![[0u32; 16]; lines];
    for (k, &next) in order.iter().enumerate() {
        set[k][0] = next;
    }
    set
}

/// One walk around the cycle from line 0: the sum of the line indices visited.
fn walk(set: &[[u32; 16]]) -> u64 {
    let mut at = 0usize;
    let mut sum = 0u64;
    for _ in 0..set.len() {
        at = set[at][0] as usize;
        sum += at as u64;
    }
    black_box(sum)
}

fn synthetic(c: &mut Criterion) {
    const ULTS: usize = 64;
    const GROUP: usize = 16;
    const LINES: usize = 256; // 16 KiB
    const ROUNDS: u64 = 4;
    let sets: Arc<Vec<Vec<[u32; 16]>>> =
        Arc::new((0..ULTS).map(|i| working_set(LINES, i as u64 + 1)).collect());
    let expected = ULTS as u64 * ROUNDS * (LINES as u64 * (LINES as u64 - 1) / 2);
    let processors = *processor_counts().last().unwrap_or(&1);
    let mut group = c.benchmark_group("synthetic_1024");
    group.sample_size(20);
    for name in ["no-affinity", "virtual-time"] {
        let policy: Policy = name.parse().expect("a policy name elite knows");
        let rt = runtime(processors, Some(policy));
        let sets = Arc::clone(&sets);
        group.bench_function(BenchmarkId::from_parameter(name), move |b| {
            let sets = Arc::clone(&sets);
            b.iter_custom(|iters| {
                let sets = Arc::clone(&sets);
                timed(&rt, iters, move || {
                    // Per group: arrivals this round, and a semaphore per member.
                    let groups: Arc<Vec<(AtomicUsize, Vec<Semaphore>)>> = Arc::new(
                        (0..ULTS / GROUP)
                            .map(|_| (AtomicUsize::new(0), (0..GROUP).map(|_| Semaphore::new(0)).collect()))
                            .collect(),
                    );
                    let handles: Vec<_> = (0..ULTS)
                        .map(|i| {
                            let (sets, groups) = (Arc::clone(&sets), Arc::clone(&groups));
                            elite_rt::Builder::new()
                                .footprint(LINES * 64)
                                .spawn(move || {
                                    let (arrived, released) = &groups[i / GROUP];
                                    let me = i % GROUP;
                                    let mut sum = 0u64;
                                    for _ in 0..ROUNDS {
                                        sum += walk(&sets[i]);
                                        if arrived.fetch_add(1, Ordering::AcqRel) == GROUP - 1 {
                                            arrived.store(0, Ordering::Relaxed);
                                            for (k, s) in released.iter().enumerate() {
                                                if k != me {
                                                    s.release();
                                                }
                                            }
                                        } else {
                                            released[me].acquire();
                                        }
                                    }
                                    sum
                                })
                                .expect("cannot spawn a ULT")
                        })
                        .collect();
                    let total: u64 = handles.into_iter().map(|h| h.join().expect("a ULT panicked")).sum();
                    assert_eq!(total, expected, "wrong sum of the walks");
                })
            });
        });
    }
    group.finish();
}

fn grid_solve(c: &mut Criterion) {
    use elite_grid::active::SolveOptions;
    use elite_grid::experiment::{measure, Config, Model};
    let problem = Model { level: 8 }.problem().expect("level 8 is in range");
    let options = SolveOptions::default();
    let config = Config {
        policy: "no-affinity".into(),
        prefetch: false,
        processors: *processor_counts().last().unwrap_or(&1),
    };
    let mut group = c.benchmark_group("grid_solve");
    group.sample_size(10);
    group.bench_function(BenchmarkId::from_parameter(8), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let m = measure(&problem, &options, &config, |_| {}).expect("the solve ran");
                assert!(m.ok(), "wrong solution: {}", m.failure().unwrap_or_default());
                total += m.elapsed;
            }
            total
        });
    });
    group.finish();
}

/// What `criterion_group!` and `criterion_main!` would generate, with documented items.
fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    yield_now(&mut criterion);
    spawn_join(&mut criterion);
    spawn_bulk(&mut criterion);
    fib_bench(&mut criterion);
    ping_pong(&mut criterion);
    mutex_contended(&mut criterion);
    sync_peak(&mut criterion);
    synthetic(&mut criterion);
    grid_solve(&mut criterion);
    criterion.final_summary();
}
