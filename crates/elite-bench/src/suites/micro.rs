//! Suite `micro`: the cost of the basic operations of a ULT runtime.
//!
//! | bench | what one operation is | processors | systems |
//! | --- | --- | --- | --- |
//! | `yield` | one yield of the only task | 1 | elite, corosensei, go, may, std-thread |
//! | `spawn_join` | spawn one task and join it at once | 1 (elite also 2) | elite, corosensei, go, may, std-thread |
//! | `spawn_bulk` | one of n tasks spawned, then all joined | all CPUs | elite, go, may |
//! | `fib` | one whole naive parallel fib(30) | all CPUs | elite, rayon, go, may |
//!
//! Every workload answers a number that is checked: the yield count, the sum of the values the
//! spawned tasks return, the sum of the fib values. Each system gets as many operations per pass
//! as keeps one pass near 50-100 ms on the 2-core machines (std-thread gets far fewer; the
//! metric is per operation), except `spawn_bulk`, whose n is the workload itself.
//!
//! The Go side of every bench is in `go/micro.go`; the may side is [`may_child`], which runs in
//! a child process because may's worker count is fixed per process. may is left out of
//! `spawn_bulk` (with a line saying so) when `vm.max_map_count` cannot hold two mappings per
//! coroutine: may maps each coroutine's guarded stack at spawn, and 100 000 live coroutines
//! exceed the default 65 530 mappings (elite gives a ULT its stack only when it first runs).
//!
//! In `fib`, the sequential leaves below the cutoff are compiled by rustc for elite, rayon and
//! may, and by Go's compiler for go, so go/elite mixes scheduler and compiler differences;
//! elite/rayon is the like-for-like comparison.
//!
//! The targets are those of the issue that introduced the suite (printed after the table; a miss
//! does not fail the run, a wrong answer does): `yield` within 5x of corosensei's round trip and at
//! least 5x faster than Go's `Gosched`; `spawn_join` within 4x of corosensei's pooled create-run
//! and at least 10x faster than Go; `spawn_bulk` at least 4x faster than Go per ULT; `fib` within
//! 2x of rayon's time and faster than Go.

use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::Context;
use crate::harness::{warm_then_time, Bench, Contender, Metric, Params, Sample, Target};
use crate::machine;
use crate::peers::may::{self as may_peer, ChildArgs};
use crate::peers::PeerArgs;
use crate::workloads::{elite_join, elite_runtime, std_spawn_join, sum_below};

/// This suite's name.
const SUITE: &str = "micro";

/// fib: below or at this argument, recurse sequentially (every system).
const CUTOFF: u64 = 10;

/// Stack size of the pooled corosensei coroutine.
const COROSENSEI_STACK: usize = 64 * 1024;

/// How much work each system gets.
struct Sizes {
    /// yield: operations for elite and corosensei.
    yield_fast: u64,
    /// yield: operations for go and may.
    yield_slow: u64,
    /// yield: operations for std-thread.
    yield_std: u64,
    /// spawn_join: operations for elite and corosensei.
    spawn_fast: u64,
    /// spawn_join: operations for go and may.
    spawn_slow: u64,
    /// spawn_join: operations for std-thread.
    spawn_std: u64,
    /// spawn_bulk: tasks spawned per pass.
    bulk: u64,
    /// fib: the argument.
    fib_n: u64,
    /// fib: whole computations per pass for elite, rayon and go.
    fib_fast: u64,
    /// fib: whole computations per pass for may.
    fib_slow: u64,
}

impl Sizes {
    /// The sizes of a full run.
    const FULL: Sizes = Sizes {
        yield_fast: 5_000_000,
        yield_slow: 1_000_000,
        yield_std: 200_000,
        spawn_fast: 1_000_000,
        spawn_slow: 200_000,
        spawn_std: 2_000,
        bulk: 1_000_000,
        fib_n: 30,
        fib_fast: 20,
        fib_slow: 2,
    };

    /// The sizes of `--quick`.
    const QUICK: Sizes = Sizes {
        yield_fast: 500_000,
        yield_slow: 100_000,
        yield_std: 20_000,
        spawn_fast: 100_000,
        spawn_slow: 20_000,
        spawn_std: 200,
        bulk: 100_000,
        fib_n: 25,
        fib_fast: 20,
        fib_slow: 5,
    };
}

/// The benches of the suite.
pub fn benches(ctx: &mut Context) -> Vec<Bench> {
    let sizes = if ctx.quick { &Sizes::QUICK } else { &Sizes::FULL };
    vec![
        yield_bench(ctx, sizes),
        spawn_join_bench(ctx, sizes),
        spawn_bulk_bench(ctx, sizes),
        fib_bench(ctx, sizes),
    ]
}

/// `yield`: one task yields in a loop, one processor.
fn yield_bench(ctx: &mut Context, sizes: &Sizes) -> Bench {
    let params = |n: u64| Params::new(1).with("n", n);
    let (fast, slow, std) = (sizes.yield_fast, sizes.yield_slow, sizes.yield_std);
    let mut contenders = vec![
        Contender::new("elite", params(fast), fast, move || elite_yield(fast)),
        Contender::new("corosensei", params(fast), fast, move || corosensei_yield(fast)),
    ];
    let peer = PeerArgs::new(SUITE, "yield", slow, 1);
    add_peers(ctx, &mut contenders, &peer, params(slow), slow);
    contenders.push(Contender::new("std-thread", params(std), std, move || std_yield(std)));
    Bench {
        name: "yield",
        metric: Metric::NsPerOp,
        contenders,
        targets: vec![
            Target::EliteAtMost { peer: "corosensei", processors: 1, times: 5.0 },
            Target::PeerAtLeast { peer: "go", processors: 1, times: 5.0 },
        ],
    }
}

/// `spawn_join`: spawn one task and join it at once, over and over.
fn spawn_join_bench(ctx: &mut Context, sizes: &Sizes) -> Bench {
    let params = |processors: usize, n: u64| Params::new(processors).with("n", n);
    let (fast, slow, std) = (sizes.spawn_fast, sizes.spawn_slow, sizes.spawn_std);
    let mut contenders =
        vec![Contender::new("elite", params(1, fast), sum_below(fast), move || elite_spawn_join(1, fast))];
    if ctx.cpus > 1 {
        contenders.push(Contender::new("elite", params(2, fast), sum_below(fast), move || {
            elite_spawn_join(2, fast)
        }));
    }
    contenders.push(Contender::new("corosensei", params(1, fast), sum_below(fast), move || {
        corosensei_spawn_join(fast)
    }));
    let peer = PeerArgs::new(SUITE, "spawn_join", slow, 1);
    add_peers(ctx, &mut contenders, &peer, params(1, slow), sum_below(slow));
    contenders
        .push(Contender::new("std-thread", params(1, std), sum_below(std), move || std_spawn_join(std)));
    Bench {
        name: "spawn_join",
        metric: Metric::NsPerOp,
        contenders,
        targets: vec![
            Target::EliteAtMost { peer: "corosensei", processors: 1, times: 4.0 },
            Target::PeerAtLeast { peer: "go", processors: 1, times: 10.0 },
        ],
    }
}

/// `spawn_bulk`: spawn n tasks, then join them all, every CPU working.
fn spawn_bulk_bench(ctx: &mut Context, sizes: &Sizes) -> Bench {
    let (n, cpus) = (sizes.bulk, ctx.cpus);
    let params = Params::new(cpus).with("n", n);
    let mut contenders =
        vec![Contender::new("elite", params.clone(), sum_below(n), move || elite_spawn_bulk(cpus, n))];
    let peer = PeerArgs::new(SUITE, "spawn_bulk", n, cpus);
    ctx.add_go(&mut contenders, &peer, params.clone(), sum_below(n));
    // may maps each coroutine's stack at spawn, with a guard page: two kernel mappings per
    // live coroutine, and the spawner outruns the workers, so most of the n are live at once.
    match machine::max_map_count() {
        Some(limit) if 2 * n > limit => ctx.notes.push(format!(
            "may: skipped for spawn_bulk: may maps every coroutine's stack at spawn (2 kernel \
             mappings each), so {n} coroutines need up to {} mappings, and vm.max_map_count \
             is {limit}",
            2 * n
        )),
        _ => contenders.push(may_peer::contender(&peer, params, sum_below(n))),
    }
    Bench {
        name: "spawn_bulk",
        metric: Metric::NsPerOp,
        contenders,
        targets: vec![Target::PeerAtLeast { peer: "go", processors: cpus, times: 4.0 }],
    }
}

/// `fib`: naive parallel fib with a sequential cutoff, every CPU working.
fn fib_bench(ctx: &mut Context, sizes: &Sizes) -> Bench {
    let (fib_n, cpus) = (sizes.fib_n, ctx.cpus);
    let params = |reps: u64| Params::new(cpus).with("n", reps).with("fib", fib_n).with("cutoff", CUTOFF);
    let expected = |reps: u64| reps * fib_seq(fib_n);
    let (fast, slow) = (sizes.fib_fast, sizes.fib_slow);
    let mut contenders = vec![
        Contender::new("elite", params(fast), expected(fast), move || elite_fib(cpus, fast, fib_n)),
        Contender::new("rayon", params(fast), expected(fast), move || rayon_fib(cpus, fast, fib_n)),
    ];
    let peer = |reps: u64| PeerArgs::new(SUITE, "fib", reps, cpus).with("fib", fib_n).with("cutoff", CUTOFF);
    ctx.add_go(&mut contenders, &peer(fast), params(fast), expected(fast));
    contenders.push(may_peer::contender(&peer(slow), params(slow), expected(slow)));
    Bench {
        name: "fib",
        metric: Metric::NsPerOp,
        contenders,
        targets: vec![
            Target::EliteAtMost { peer: "rayon", processors: cpus, times: 2.0 },
            Target::PeerAtLeast { peer: "go", processors: cpus, times: 1.0 },
        ],
    }
}

/// Adds the out-of-process peers, go (when it can run) and may, running `peer`.
fn add_peers(
    ctx: &mut Context,
    contenders: &mut Vec<Contender>,
    peer: &PeerArgs,
    params: Params,
    expected: u64,
) {
    ctx.add_go(contenders, peer, params.clone(), expected);
    contenders.push(may_peer::contender(peer, params, expected));
}

/// Sequential naive fib, the leaves of every parallel fib.
fn fib_seq(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

// ---- elite ----

/// elite `yield`: `yield_now` n times in the root ULT of a one-processor runtime.
fn elite_yield(n: u64) -> Result<Sample, String> {
    let rt = elite_runtime(1)?;
    warm_then_time(n, || {
        rt.block_on(move || {
            let start = Instant::now();
            let mut count = 0u64;
            for _ in 0..n {
                elite_rt::yield_now();
                count += 1;
            }
            Ok((start.elapsed(), count))
        })
    })
}

/// elite `spawn_join`: spawn a ULT returning i and join it, for i in 0..n.
fn elite_spawn_join(processors: usize, n: u64) -> Result<Sample, String> {
    let rt = elite_runtime(processors)?;
    warm_then_time(n, || {
        rt.block_on(move || {
            let start = Instant::now();
            let mut sum = 0u64;
            for i in 0..n {
                sum += elite_join(elite_rt::spawn(move || i))?;
            }
            Ok((start.elapsed(), sum))
        })
    })
}

/// elite `spawn_bulk`: spawn n ULTs returning their index, then join them all.
fn elite_spawn_bulk(processors: usize, n: u64) -> Result<Sample, String> {
    let rt = elite_runtime(processors)?;
    warm_then_time(n, || {
        rt.block_on(move || {
            let start = Instant::now();
            let handles: Vec<_> = (0..n).map(|i| elite_rt::spawn(move || i)).collect();
            let mut sum = 0u64;
            for handle in handles {
                sum += elite_join(handle)?;
            }
            Ok((start.elapsed(), sum))
        })
    })
}

/// elite parallel fib: fib(n-1) in a new ULT, fib(n-2) in this one.
fn elite_fib_par(n: u64) -> Result<u64, String> {
    if n <= CUTOFF {
        return Ok(fib_seq(n));
    }
    let left = elite_rt::spawn(move || elite_fib_par(n - 1));
    let right = elite_fib_par(n - 2);
    let left = elite_join(left)??;
    Ok(left + right?)
}

/// elite `fib`: `reps` whole computations of fib(fib_n).
fn elite_fib(processors: usize, reps: u64, fib_n: u64) -> Result<Sample, String> {
    let rt = elite_runtime(processors)?;
    warm_then_time(reps, || {
        rt.block_on(move || {
            let start = Instant::now();
            let mut sum = 0u64;
            for _ in 0..reps {
                sum += elite_fib_par(fib_n)?;
            }
            Ok((start.elapsed(), sum))
        })
    })
}

// ---- corosensei: the raw switch ----

/// corosensei `yield`: resume a coroutine that suspends n times; one round trip per operation.
fn corosensei_yield(n: u64) -> Result<Sample, String> {
    warm_then_time(n, || {
        let mut coroutine = Coroutine::new(move |yielder: &Yielder<(), ()>, ()| {
            for _ in 0..n {
                yielder.suspend(());
            }
        });
        let start = Instant::now();
        let mut count = 0u64;
        while let CoroutineResult::Yield(()) = coroutine.resume(()) {
            count += 1;
        }
        Ok((start.elapsed(), count))
    })
}

/// corosensei `spawn_join`, "pooled create-run": one stack, and for each operation a new
/// coroutine on it, resumed to completion, its stack taken back.
fn corosensei_spawn_join(n: u64) -> Result<Sample, String> {
    let mut stack = Some(
        DefaultStack::new(COROSENSEI_STACK)
            .map_err(|e| format!("cannot allocate a corosensei stack: {e}"))?,
    );
    warm_then_time(n, || {
        let mut pooled = stack.take().ok_or("the pooled stack was lost")?;
        let start = Instant::now();
        let mut sum = 0u64;
        for i in 0..n {
            let mut coroutine = Coroutine::with_stack(pooled, move |_: &Yielder<(), ()>, ()| i);
            match coroutine.resume(()) {
                CoroutineResult::Return(value) => sum += value,
                CoroutineResult::Yield(()) => return Err("the coroutine yielded".into()),
            }
            pooled = coroutine.into_stack();
        }
        let elapsed = start.elapsed();
        stack = Some(pooled);
        Ok((elapsed, sum))
    })
}

// ---- rayon ----

/// rayon parallel fib: `rayon::join` of fib(n-1) and fib(n-2).
fn rayon_fib_par(n: u64) -> u64 {
    if n <= CUTOFF {
        return fib_seq(n);
    }
    let (left, right) = rayon::join(|| rayon_fib_par(n - 1), || rayon_fib_par(n - 2));
    left + right
}

/// rayon `fib`: `reps` whole computations on a fresh pool of `threads` threads.
fn rayon_fib(threads: usize, reps: u64, fib_n: u64) -> Result<Sample, String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| format!("cannot build the rayon pool: {e}"))?;
    warm_then_time(reps, || {
        pool.install(|| {
            let start = Instant::now();
            let sum = (0..reps).map(|_| rayon_fib_par(fib_n)).sum();
            Ok((start.elapsed(), sum))
        })
    })
}

// ---- std-thread (its `spawn_join` is `workloads::std_spawn_join`) ----

/// std-thread `yield`: `std::thread::yield_now` n times.
fn std_yield(n: u64) -> Result<Sample, String> {
    warm_then_time(n, || {
        let start = Instant::now();
        let mut count = 0u64;
        for _ in 0..n {
            std::thread::yield_now();
            count += 1;
        }
        Ok((start.elapsed(), count))
    })
}

// ---- may (runs in the child process) ----

/// Runs `bench` of this suite on may, in a may child process (see [`crate::peers::may`]).
pub fn may_child(bench: &str, args: &ChildArgs) -> Result<Sample, String> {
    let n = args.n;
    match bench {
        "yield" => warm_then_time(n, || may_peer::root(move || may_yield(n))),
        "spawn_join" => warm_then_time(n, || may_peer::root(move || may_spawn_join(n))),
        "spawn_bulk" => warm_then_time(n, || may_peer::root(move || may_spawn_bulk(n))),
        "fib" => {
            let fib_n = args.get("fib")?;
            let cutoff = args.get("cutoff")?;
            if cutoff != CUTOFF {
                return Err(format!("the cutoff is fixed at {CUTOFF}, got {cutoff}"));
            }
            warm_then_time(n, || may_peer::root(move || may_fib(n, fib_n)))
        }
        other => Err(format!("no may workload `{other}`")),
    }
}

/// may `yield`: `may::coroutine::yield_now` n times.
fn may_yield(n: u64) -> Result<(Duration, u64), String> {
    let start = Instant::now();
    let mut count = 0u64;
    for _ in 0..n {
        may::coroutine::yield_now();
        count += 1;
    }
    Ok((start.elapsed(), count))
}

/// may `spawn_join`: spawn a coroutine returning i and join it, for i in 0..n.
fn may_spawn_join(n: u64) -> Result<(Duration, u64), String> {
    let start = Instant::now();
    let mut sum = 0u64;
    for i in 0..n {
        sum += may_peer::join(may_peer::spawn(move || i))?;
    }
    Ok((start.elapsed(), sum))
}

/// may `spawn_bulk`: spawn n coroutines returning their index, then join them all.
fn may_spawn_bulk(n: u64) -> Result<(Duration, u64), String> {
    let start = Instant::now();
    let handles: Vec<_> = (0..n).map(|i| may_peer::spawn(move || i)).collect();
    let mut sum = 0u64;
    for handle in handles {
        sum += may_peer::join(handle)?;
    }
    Ok((start.elapsed(), sum))
}

/// may parallel fib: fib(n-1) in a new coroutine, fib(n-2) in this one.
fn may_fib_par(n: u64) -> Result<u64, String> {
    if n <= CUTOFF {
        return Ok(fib_seq(n));
    }
    let left = may_peer::spawn(move || may_fib_par(n - 1));
    let right = may_fib_par(n - 2);
    let left = may_peer::join(left)??;
    Ok(left + right?)
}

/// may `fib`: `reps` whole computations of fib(fib_n).
fn may_fib(reps: u64, fib_n: u64) -> Result<(Duration, u64), String> {
    let start = Instant::now();
    let mut sum = 0u64;
    for _ in 0..reps {
        sum += may_fib_par(fib_n)?;
    }
    Ok((start.elapsed(), sum))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        assert_eq!(fib_seq(30), 832_040);
        assert_eq!(sum_below(4), 6);
        assert_eq!(sum_below(0), 0);
    }

    #[test]
    fn in_process_peers_answer_right() {
        let sample = corosensei_yield(1000).expect("corosensei yield runs");
        assert_eq!(sample.answer, 1000);
        let sample = corosensei_spawn_join(1000).expect("corosensei spawn_join runs");
        assert_eq!(sample.answer, sum_below(1000));
        let sample = rayon_fib(2, 2, 20).expect("rayon fib runs");
        assert_eq!(sample.answer, 2 * 6765);
        let sample = std_spawn_join(10).expect("std spawn_join runs");
        assert_eq!(sample.answer, 45);
    }
}
