//! Bench `pairs` of suite `affinity`: producer/consumer pairs spawned on different processors,
//! for the `gravity` policy (ELiTE section 3.3) against `no-affinity` and `virtual-time`.
//!
//! [`PAIRS`] pairs; each pair shares a buffer of [`BUFFER_BYTES`] that both declare as their
//! data block (`elite_rt::Builder::data`). In each of `rounds` rounds the producer writes the
//! buffer and releases the consumer's semaphore; the consumer sums the buffer and releases the
//! producer's. All producers are spawned by a ULT on processor 0 and all consumers by one on
//! processor 1, so every pair starts split over the two processors. At each hand-over the
//! consumer notes whether it runs on the processor its producer last ran on.
//!
//! Rows (metric `ops_per_sec`, one operation = one hand-over, producer to consumer and back):
//! `elite/no-affinity`, `elite/virtual-time`, `elite/gravity`, `elite/auto` (the runtime
//! choosing among its candidates while it runs, cold in every sample) and `elite/auto+warm`
//! (the same remembering its explorations from sample to sample: `params.auto_memory`; see the
//! `affinity` suite's docs) at 2 processors (at 1 every pair is trivially together). Side rows: `colocated_first` and `colocated_last`, the fraction of
//! hand-overs with both sides on one processor in the first and the last tenth of the rounds
//! (higher: the pairs came together). Where the pairs end up is the point of gravity: a shared
//! buffer larger than either side's private data aggregates them at once.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use elite_rt::policy::Policy;
use elite_rt::sync::Semaphore;

use super::Context;
use crate::harness::{record_side, Bench, Contender, Metric, Params, Sample};
use crate::workloads::{build_runtime, warm_auto, AUTO_WARM};

/// Pairs of ULTs.
pub const PAIRS: usize = 64;
/// Bytes of each pair's shared buffer (64 lines).
pub const BUFFER_BYTES: usize = 4096;
/// Rounds per pair (full, `--quick`).
const ROUNDS: (u64, u64) = (2000, 200);

/// The systems compared.
const SYSTEMS: [(&str, &str); 4] = [
    ("no-affinity", "elite/no-affinity"),
    ("virtual-time", "elite/virtual-time"),
    ("gravity", "elite/gravity"),
    ("auto", "elite/auto"),
];

/// The fixed policies' systems (what `auto` is compared with).
const FIXED: &[&str] = &["elite/no-affinity", "elite/virtual-time", "elite/gravity"];

/// The bench, at 2 processors; `None` (with a note) on a one-CPU machine.
pub fn bench(ctx: &mut Context) -> Option<Bench> {
    if ctx.cpus < 2 {
        ctx.notes.push("affinity: pairs needs 2 CPUs: left out".into());
        return None;
    }
    let rounds = if ctx.quick { ROUNDS.1 } else { ROUNDS.0 };
    let mut contenders = Vec::new();
    for (name, system) in SYSTEMS {
        if !(name == "no-affinity"
            || ctx.policies.is_empty()
            || ctx.policies.iter().any(|p| p.name() == name))
        {
            continue;
        }
        let policy: Policy = name.parse().unwrap_or_default();
        let mut runs = vec![(policy, system)];
        if name == "auto" {
            runs.push((warm_auto("elite-bench affinity pairs".into()), AUTO_WARM));
        }
        for (policy, system) in runs {
            let mut params = Params::new(2)
                .with("pairs", PAIRS as u64)
                .with("buffer_bytes", BUFFER_BYTES as u64)
                .with("rounds", rounds);
            if policy.is_auto() {
                params = params.with_flag("auto_memory", system == AUTO_WARM);
            }
            contenders
                .push(Contender::new(system, params, PAIRS as u64 * rounds, move || run(&policy, rounds)));
        }
    }
    let targets = match contenders.iter().any(|c| c.system == "elite/auto") {
        true => super::affinity::auto_targets(FIXED, &[2]),
        false => Vec::new(),
    };
    Some(Bench { name: "pairs", metric: Metric::OpsPerSec, contenders, targets })
}

/// One pair's shared state.
struct Pair {
    buffer: Box<[u64]>,
    to_consumer: Semaphore,
    to_producer: Semaphore,
    /// The processor the producer last wrote the buffer on.
    producer_at: AtomicUsize,
}

/// One sample: a fresh 2-processor runtime under `policy`, [`PAIRS`] pairs of `rounds` rounds.
/// The answer is the hand-overs checked (every consumer saw every round's values).
fn run(policy: &Policy, rounds: u64) -> Result<Sample, String> {
    let rt = build_runtime(elite_rt::Runtime::builder().processors(2).policy(policy.clone()))?;
    let words = BUFFER_BYTES / 8;
    let pairs: Arc<Vec<Pair>> = Arc::new(
        (0..PAIRS)
            .map(|_| Pair {
                buffer: (0..words).map(|_| 0u64).collect(),
                to_consumer: Semaphore::new(0),
                to_producer: Semaphore::new(0),
                producer_at: AtomicUsize::new(usize::MAX),
            })
            .collect(),
    );
    // Co-located hand-overs in the first and the last tenth of the rounds, and in all.
    let tenth = (rounds / 10).max(1);
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let (pairs2, counts2) = (pairs.clone(), counts.clone());
    let outcome = rt.block_on(move || -> Result<(u64, std::time::Duration), String> {
        let start = Instant::now();
        // Two spawners, one per processor: each yields until it runs on its own processor.
        let spawners: Vec<_> = (0..2)
            .map(|side| {
                let (pairs, counts) = (pairs2.clone(), counts2.clone());
                elite_rt::spawn(move || {
                    for _ in 0..100_000 {
                        if elite_rt::current().processor() == side {
                            break;
                        }
                        elite_rt::yield_now();
                    }
                    let handles: Vec<_> = (0..PAIRS)
                        .map(|i| {
                            let (pairs, counts) = (pairs.clone(), counts.clone());
                            let block = elite_rt::DataBlock::of(&pairs[i].buffer[..]);
                            elite_rt::Builder::new().data(block).spawn(move || {
                                let pair = &pairs[i];
                                let ptr = pair.buffer.as_ptr() as *mut u64;
                                let mut checked = 0u64;
                                for r in 0..rounds {
                                    if side == 0 {
                                        for k in 0..words {
                                            // SAFETY: the producer writes the buffer only between
                                            // its acquire of `to_producer` (or the start) and its
                                            // release of `to_consumer`; the consumer reads it only
                                            // between those: the semaphores order the accesses.
                                            unsafe { ptr.add(k).write(r + k as u64) };
                                        }
                                        pair.producer_at
                                            .store(elite_rt::current().processor(), Ordering::Relaxed);
                                        pair.to_consumer.release();
                                        pair.to_producer.acquire();
                                    } else {
                                        pair.to_consumer.acquire();
                                        let here = elite_rt::current().processor();
                                        if pair.producer_at.load(Ordering::Relaxed) == here {
                                            counts[2].fetch_add(1, Ordering::Relaxed);
                                            if r < tenth {
                                                counts[0].fetch_add(1, Ordering::Relaxed);
                                            } else if r >= rounds - tenth {
                                                counts[1].fetch_add(1, Ordering::Relaxed);
                                            }
                                        }
                                        let sum: u64 = pair.buffer.iter().sum();
                                        let n = words as u64;
                                        if sum == n * r + n * (n - 1) / 2 {
                                            checked += 1;
                                        }
                                        pair.to_producer.release();
                                    }
                                }
                                checked
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| {
                            h.map_err(|e| e.to_string())?
                                .join()
                                .map_err(|_| "a pair's ULT panicked".to_string())
                        })
                        .sum::<Result<u64, String>>()
                })
            })
            .collect();
        let mut checked = 0;
        for s in spawners {
            checked += s.join().map_err(|_| "a spawner panicked".to_string())??;
        }
        Ok((checked, start.elapsed()))
    });
    let (checked, elapsed) = outcome?;
    crate::workloads::record_auto(&rt);
    let tenth_total = (PAIRS as u64 * tenth) as f64;
    record_side("colocated_first", counts[0].load(Ordering::Relaxed) as f64 / tenth_total);
    record_side("colocated_last", counts[1].load(Ordering::Relaxed) as f64 / tenth_total);
    record_side("colocated_all", counts[2].load(Ordering::Relaxed) as f64 / (PAIRS as u64 * rounds) as f64);
    Ok(Sample::per_op(elapsed, PAIRS as u64 * rounds, checked))
}
