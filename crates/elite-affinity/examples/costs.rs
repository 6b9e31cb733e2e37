//! Measures what the cache model and the counter sources cost: the time to build the model's
//! tables for several cache sizes, the hot-path lookups, and one `begin_run` + `end_run` pair of
//! each counter source that opens here (the hardware source with a software event where the
//! machine has no PMU: the cost of its `read(2)` path).
//!
//! ```text
//! cargo run --release -p elite-affinity --example costs
//! ```
//!
//! Wall-clock figures on a shared machine: each is the best of several rounds.

use std::hint::black_box;
use std::time::Instant;

use elite_affinity::{
    AnySource, CacheModel, CounterEvent, CounterSource, EstimatedSource, Footprint, HardwareSource, RunInfo,
    ScriptedSource, Topology,
};

/// The best over `rounds` of the seconds per iteration of `f` run `iterations` times.
fn best_per_iteration(rounds: usize, iterations: u64, mut f: impl FnMut(u64)) -> f64 {
    (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for i in 0..iterations {
                f(i);
            }
            start.elapsed().as_secs_f64() / iterations as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn ns(seconds: f64) -> String {
    format!("{:.1} ns", seconds * 1e9)
}

fn source_pair(source: &mut dyn CounterSource, iterations: u64) -> f64 {
    best_per_iteration(5, iterations, |i| {
        source.begin_run();
        black_box(source.end_run(&RunInfo::new(i & 7, 64 << 10, 300.0)));
    })
}

fn main() {
    let topology = Topology::detect();
    println!("machine: {topology}\nmodel cache: {}", topology.model_cache());

    println!("\nCacheModel::new (best of 20):");
    for lines in [16_384u64, 32_768, 1 << 20, 1 << 24] {
        let built = best_per_iteration(20, 1, |_| {
            black_box(CacheModel::new(black_box(lines), 64).expect("valid"));
        });
        println!("  N = {lines:>8} lines: {:.1} µs", built * 1e6);
    }

    let model = CacheModel::new(32_768, 64).expect("valid");
    let iterations = 10_000_000;
    println!("\nhot path, N = 32768 (best of 5 x {iterations}):");
    let t = best_per_iteration(5, iterations, |i| {
        black_box(model.footprint_after_run(black_box((i & 1023) as f32), black_box(i & 0xFFFF)));
    });
    println!("  footprint_after_run: {}", ns(t));
    let t = best_per_iteration(5, iterations, |i| {
        black_box(model.reload_transient(black_box((i & 1023) as f32), black_box(((i >> 3) & 4095) as f32)));
    });
    println!("  reload_transient: {}", ns(t));
    let mut ult = Footprint::EMPTY;
    ult.record_run(&model, 0, 0.0, 1000, 1000);
    let t = best_per_iteration(5, iterations, |i| {
        black_box(black_box(&ult).reload_transient_on(&model, 0, black_box(1000 + (i & 0xFFFF))));
    });
    println!("  Footprint::reload_transient_on: {}", ns(t));

    println!("\none begin_run + end_run pair:");
    let mut detected = AnySource::detect(&model);
    println!("  AnySource::detect -> {}", detected.kind());
    println!("    {}", ns(source_pair(&mut detected, iterations)));
    println!("  estimated: {}", ns(source_pair(&mut EstimatedSource::new(&model), iterations)));
    let mut scripted = ScriptedSource::new(5).per_ult(3, 100);
    println!("  scripted (per ULT): {}", ns(source_pair(&mut scripted, iterations)));
    match HardwareSource::open(CounterEvent::CacheMisses) {
        Ok(mut hw) => {
            let t = source_pair(&mut hw, 1_000_000);
            println!("  hardware cache misses, {}: {}", hw.kind(), ns(t));
        }
        Err(err) => println!("  hardware cache misses: {err}"),
    }
    match HardwareSource::open(CounterEvent::SoftwarePageFaults) {
        Ok(mut sw) => {
            let t = source_pair(&mut sw, 1_000_000);
            println!("  software page faults (same open/mmap/read path), {}: {}", sw.kind(), ns(t));
        }
        Err(err) => println!("  software page faults: {err}"),
    }
}
