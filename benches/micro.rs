//! Criterion benchmarks of elite's two cheapest operations, for quick before/after comparisons
//! while working on the runtime (`cargo bench --bench micro`).
//!
//! - `elite/yield`: the root ULT of a one-processor runtime calls `yield_now` in a loop.
//! - `elite/spawn_join/<processors>`: the root ULT spawns one ULT and joins it at once, on one
//!   and on two processors.
//!
//! Each benchmark builds its runtime once; every criterion sample is one `block_on` whose root
//! ULT times `iters` operations itself (`iter_custom`), so entering and leaving the runtime is
//! not part of an operation. Comparisons with the peers (corosensei, Go, may, ...) are the job
//! of the `elite-bench` command, which measures them in the same run.

use std::hint::black_box;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion};
use elite_rt::Runtime;

/// A runtime with `processors` processors; benchmarks cannot run without one.
fn runtime(processors: usize) -> Runtime {
    Runtime::builder()
        .processors(processors)
        .build()
        .unwrap_or_else(|e| panic!("cannot build an elite runtime with {processors} processors: {e}"))
}

/// `elite/yield`: one ULT yielding on one processor.
fn yield_now(c: &mut Criterion) {
    let rt = runtime(1);
    c.bench_function("elite/yield", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let start = Instant::now();
                for _ in 0..iters {
                    elite_rt::yield_now();
                }
                start.elapsed()
            })
        });
    });
}

/// `elite/spawn_join/<processors>`: spawn one ULT and join it at once.
fn spawn_join(c: &mut Criterion) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut group = c.benchmark_group("elite/spawn_join");
    for processors in [1, 2].into_iter().filter(|&p| p <= cpus.max(1)) {
        let rt = runtime(processors);
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

/// What `criterion_group!` and `criterion_main!` would generate, with documented items.
fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    yield_now(&mut criterion);
    spawn_join(&mut criterion);
    criterion.final_summary();
}
