//! Suite `places`: where a ULT runs and whom an idle processor robs (issue 20): LASSI's locality
//! hints and CAF's locality-guided scheduling (LGS), on their own experiments, beside the peers a
//! user would pick instead.
//!
//! | bench | one operation | metric | processors | systems |
//! | --- | --- | --- | --- | --- |
//! | `cache_stress` | one pass over an array | ops_per_sec | 1, 2 | elite/best, elite/worst, elite/ignorant, elite/random, go, rayon |
//! | `cache_stress_fixed` | the same with arrays of a fixed 384 KiB on every host | ops_per_sec | 1, 2 | the four elite variants |
//! | `merge_sort` | one element sorted | ops_per_sec | 1, 2 | elite/hinted, elite/unhinted, rayon, rayon/par_sort_unstable |
//! | `block_matmul` | one multiply-add | ops_per_sec | 1, 2 | elite/hinted, elite/unhinted, rayon |
//! | `place_level_merge_sort`, `place_level_cache_stress` | as `merge_sort` (unhinted), `cache_stress` (ignorant) | ops_per_sec | 2 | elite/per-processor, elite/per-l3 (where every processor has an L3), elite/per-machine |
//! | `steal_avoidance_gaps`, `steal_avoidance_imbalance` | one pass over an array | ops_per_sec | 2 | elite/avoid-costly, elite/steal-all |
//! | `matrix_search` (`emulated` false) | one cache line scanned by a searcher | ops_per_sec | 1, 2 | elite/lgs, elite/node-then-all, elite/random |
//! | `matrix_search` (`emulated` true) | the same on an emulated 2-node topology | ops_per_sec | 4 (on the host's CPUs) | the same |
//! | `concdict`, `concsll` | one request served | ops_per_sec | 1, 2 | elite/pinned, elite/unpinned |
//!
//! Every answer is checked (a sum of passes, a hash of the sorted array, a weighted sum of the
//! product, the number of matches, the final contents of the dictionary or list).
//!
//! Side rows say what the placement did, whatever the machine's load does to the times (they
//! depend on the schedule, not on the clock): `array_switches` (`cache_stress`, elite rows): the
//! fraction of passes whose processor had last run a pass over the other array, each of them a
//! reload of the array from the shared cache when two arrays do not fit in the private one;
//! `passes_away` (`cache_stress`, the placed elite rows): the fraction of passes run on a
//! processor other than the ULT's place;
//! `steals` (`matrix_search`): ULTs stolen during the timed pass; `idle_fraction`: the share of
//! processor time (elapsed time times processors) in which no puzzle was being solved (the
//! searchers time their puzzles; a processor that shares its CPU counts as busy while its
//! puzzle waits for the CPU); with `emulated` also `steals_remote` (those taken from the other
//! synthetic node) and `remote_line_fraction` (the fraction of lines scanned from a node other
//! than the home of the searcher's grid, each paying the emulated delay); per request served (`concdict`, `concsll`): `home_goings` (wake-ups that sent a
//! soft-pinned ULT to its home on another processor), `partner_stays` (those that kept it with
//! the ULT that woke it, away from home: the partner rule of `RuntimeBuilder::soft_pinning`),
//! `remote_wakes` (ULTs made ready through a wake-up stack, that is woken from another
//! processor), `unparks` (processors unparked by another thread) and `steals`.
//!
//! # `cache_stress` (LASSI's Cache Stress Test)
//!
//! Two arrays of pseudo-random `u32`, each sized to **3/4 of the cache private to a core** (the
//! runtime's cache model, `Topology::model_cache`: on a host with a 512 KiB L2, 384 KiB each;
//! recorded as `params.array_bytes` and `params.cache_bytes`), and 8 ULTs per processor: the even
//! ones work on array 0, the odd ones on array 1. Each ULT makes `passes` passes over its array,
//! adding and multiplying every element (32-bit wrapping sum and product of odd factors; built
//! for the widest vectors the CPU has, AVX-512 or AVX2, since with narrower ones the pass is
//! bound by its multiplies and the caches show less), and yields between two passes, as LASSI's threads were time-sliced. One array fits in a core's
//! private cache, two do not. The variants differ only in where each ULT is placed:
//!
//! - `elite/best`: the ULTs of array 0 on the first half of the processors, those of array 1 on
//!   the other half: each private cache holds one array, and the ULTs sharing it prefetch for
//!   each other.
//! - `elite/worst`: every processor gets ULTs of both arrays, interleaved: each pass reloads its
//!   array from the shared cache.
//! - `elite/ignorant`: no hint; the runtime places them (spawned by the root, spread by stealing).
//! - `elite/random`: each ULT on a processor drawn at random (a fresh draw per sample).
//! - `go`: the same goroutines with `runtime.Gosched` between passes (the ignorant variant). Go
//!   does not vectorize the loop, so its passes are bound by the multiplies: compare its rows
//!   across processor counts, not with elite's.
//! - `rayon`: the same tasks on a `rayon::ThreadPool` (the ignorant variant). A rayon task cannot
//!   yield to another task (it runs to its end), so its passes are not interleaved: each thread
//!   runs one task's passes after another's, which is kind to the cache by construction.
//!
//! At 1 processor the placements coincide. Hints are the default `PlaceMode::Hint`: an idle
//! processor may still steal at the end. `cache_stress_fixed` runs the elite variants with arrays
//! of 384 KiB on every host, so that hosts with different caches can be compared on one workload
//! (where two arrays fit in one private cache, best and worst coincide).
//!
//! What `elite/best` can gain: a pass streams its array, and where the next level (an L3) feeds
//! a sequential stream nearly as fast as the pass consumes it, reloading the array costs a pass
//! little. Each run measures this before its rounds, on one thread: `params.reload_permille`
//! (and a note) is a thousand times the ratio of a pass right after a pass over the other array
//! (its array reloaded from the next level) to a pass right after one over the same array (its
//! array in the private cache), medians of 31 each. That ratio `r` bounds what best can gain per
//! pass over a placement that reloads every time (worst); over ignorant, whose fraction
//! `array_switches` = `s` of passes reload, the bound is about `1 + s (r - 1)`, less what the
//! spawns, joins and wake-ups cost either way. The side row `passes_away` (placed variants) is
//! the fraction of passes run on a processor other than the one the ULT was placed on (an idle
//! processor stealing at the end): with `array_switches` it says whether the placement held.
//! `docs/benchmarks.md` has the measurements on the build VM.
//!
//! # `place_level_merge_sort`, `place_level_cache_stress` (LASSI's work-stealing places)
//!
//! `merge_sort` unhinted and `cache_stress` ignorant, at 2 processors, with a runqueue per
//! processor (`elite/per-processor`, the default), one per L3 cache (`elite/per-l3`,
//! `RuntimeBuilder::place_level(PlaceKind::Cache { level: 3 })`, left out where a processor has
//! no L3) and one for the machine (`elite/per-machine`): measured, not assumed better. A shared
//! queue balances fork-join work without steals, and moves yielding ULTs between the processors
//! sharing it (`array_switches`).
//!
//! # `steal_avoidance_gaps`, `steal_avoidance_imbalance` (`RuntimeBuilder::avoid_costly_steals`)
//!
//! `cache_stress`'s arrays and passes, every ULT declaring its array as its footprint
//! (`Builder::footprint`), at 2 processors, with steal avoidance (`elite/avoid-costly`) and
//! without (`elite/steal-all`). `gaps`, where it should help: 3 ULTs per array, those of
//! array k hinted to processor k (the best placement); those of array 1 sleep 20 µs after each
//! pass, so processor 1 is idle for moments while processor 0 has ULTs waiting, which a thief
//! would pull away from their array. `imbalance`, where it must not hurt: 8 ULTs per processor,
//! all hinted to processor 0, so processor 1 must steal (never-started ULTs have nothing cached
//! and are taken; later steals meet the idle-spell rule). Side rows of the timed pass:
//! `array_switches` (as in `cache_stress`), `steals`, `steals_declined`.
//!
//! # `merge_sort` (LASSI)
//!
//! 4 194 304 pseudo-random `u32` (`--quick`: 262 144), sorted by a recursive merge sort: below a
//! leaf size (16 384 elements, 64 KiB) `sort_unstable`, above it the two halves sorted in
//! parallel (the right half forked, the left one run by the forking task) and merged into a
//! scratch buffer, then copied back. `elite/hinted` forks each right half with a place hint by
//! range (the processor that owns the range's first element when the array is cut into equal
//! parts, one per processor); `elite/unhinted` forks it without a hint; `rayon` runs the same code
//! with `rayon::join`; `rayon/par_sort_unstable` is the call a user would make. The answer is
//! a position-weighted hash of the sorted array, compared with `sort_unstable`'s.
//!
//! What the hints can change: without them an idle processor steals the oldest fork in the
//! other's start-queue, the biggest range, and every fork below goes to the start-queue of the
//! processor its parent runs on, to run there unless an idle one takes it; so each processor
//! still sorts one contiguous half (perhaps the other one than
//! the hints would give it), and the leaves and the merges below the top find their data where
//! it was sorted either way. The hints save that first steal and the later ones at the end,
//! and keep the halves from trading places; the top merges, larger than a private cache, stream
//! from the shared cache in both. `elite-bench places-probe merge_sort` runs this algorithm
//! instrumented and prints, per level, where its leaf sorts and merges ran, how many merges ran
//! away from their halves and their time per element, beside LASSI's worst placement
//! (`elite/worst`: every merge held on another processor than its left half's) and a merge
//! without a data-dependent branch (`merge_probe`'s docs).
//!
//! # `block_matmul` (LASSI)
//!
//! C = A B for 1024 x 1024 `f64` matrices (`--quick`: 256) of small integers, so that every
//! product is exact. The blocks are square, sized from the private cache (the largest power of
//! two whose three blocks, of A, B and C, fill at most half of it: 64 with a 512 KiB L2, 128 with
//! 1 MiB; `params.block`); one ULT per tile of C, which multiplies its block row of A by its
//! block column of B. `elite/hinted` places the tiles of each block row on the processor owning
//! that row (rows cut into equal parts, one per processor), so a processor reuses its rows of A;
//! `elite/unhinted` spawns them without hints; `rayon` runs the same tiles as tasks of a
//! `rayon::scope`. The answer is `sum_ij C_ij u_i v_j` (exact integers) for fixed weights,
//! compared with `(u^T A)(B v)`.
//!
//! What the hints can change: a block row of A is `block` whole rows (`n * block * 8` bytes:
//! 512 KiB for `n` 1024 and `block` 64, the size of the private cache that chose the block), so
//! the next tile of the same block row does not find it in the private cache whatever runs it.
//! And without hints the spawner's processor runs its start-queue from the newest tile (the last
//! block row) while the thief takes the oldest (the first), so each processor still works
//! through whole block rows, as with the hints.
//!
//! # `matrix_search` (CAF's LGS)
//!
//! CAF's matrix search, as LGS measured it: searcher actors, each with a grid of its own,
//! solve word puzzles that a coordinator sends them. Here a searcher is a ULT that owns a grid
//! of letters (each row a multiple of 64 bytes, so every step down a column is a new cache line
//! and row-wise prefetching does not help, as in CAF's benchmark) and counts the occurrences of
//! 4-letter words read down its columns. Each processor is the home of 8 searchers (`--quick`:
//! 4), searcher `s` of processor `s % processors`, spawned with a place hint to it (the default
//! `PlaceMode::Hint`: a thief may take it). The searchers start and wait on their inboxes
//! (channels); once all have started, the coordinator (the root ULT) deals the puzzles out, one
//! to each searcher in turn, so that each searcher wakes at home with its first (a searcher an
//! idle processor took before it first ran goes home then, instead of working through a full
//! inbox where it was taken). A searcher yields after each puzzle, as an actor
//! goes back to its worker's queue between messages: there a thief may take it, and then it
//! works through the rest of its inbox where the thief runs it, with its grid where it was.
//! The work is uneven on purpose, as CAF's puzzles were: the searchers homed on even
//! processors get puzzles of 1 to 4 columns, the others of 8 to 23, so the lighter processors
//! run dry and steal. The answer is the number of matches. The variants differ only in the
//! order in which an idle processor picks its victims: `elite/lgs` (the nearest distance group
//! first, at random inside a group, outward after as many failures as the group has members),
//! `elite/node-then-all` (the order elite had before: its node, then anyone) and `elite/random`
//! (any processor, uniformly).
//!
//! **Emulated distance** (`params.emulated` true). This host has one node and two cores, so the
//! distance groups collapse. The emulated rows run 4 processors on a synthetic topology of 2
//! nodes x 2 cores, mapped onto the host's CPUs (`RuntimeBuilder::topology`: processors 0 and 2
//! on one CPU, 1 and 3 on the other, so each node has a light and a heavy processor and the
//! heavy ones share a CPU), and a searcher's grid lives on the synthetic node of its home
//! processor: a searcher running on the other node pays, for every cache line it touches, a
//! delay of `(distance - 10) / 10` times the measured cost of a local line (SLIT distances are
//! relative latencies: 20, the synthetic default between two nodes, doubles the cost). A steal
//! inside a node keeps the data local; a steal across nodes pays for every puzzle the searcher
//! solves before it is stolen back or its inbox runs dry. The local cost per line is measured
//! when the suite builds its benches (the fastest of 5 scans of the grids on one thread) and
//! recorded as `params.local_line_ps`; the delay is a spin calibrated the same way, paid once
//! per column for the column's lines. What the emulation does not capture: remote memory
//! bandwidth and the interconnect's contention (the delay is a fixed latency per line, paid
//! whatever else is in flight), the remote line staying cached after its first touch (every
//! touch pays again), the cost of migrating the ULT's own stack and of remote wake-ups, and the
//! OS: 4 processors share 2 CPUs, so a processor's spin also delays the processor sharing its
//! CPU, and an idle processor lends its CPU to its neighbour. (The emulated samples run under the
//! OS's normal policy even where the suite runs under a real-time one, `chrt`: two real-time
//! FIFO threads of one priority on a CPU do not take turns, and half the processors would
//! wait.) So only the heavy CPU's surplus has to move (the heavy searchers' processors share
//! one CPU): about a third of the work (5/14), which LGS can move inside the nodes (each node
//! has a processor on the light CPU).
//! Random stealing takes from the other node about half the time and pays double there; a
//! fluid estimate (perfect balance, no idle time) puts its pass at about 1.15x LGS's, so the
//! 1.2x target sits at the edge of what this emulation can show. The real-host rows (`emulated` false, 1 and 2 processors, no
//! delay) check that LGS costs nothing where groups collapse.
//!
//! What separates the three orders here, and what the side rows show. On 2 nodes x 2 cores the
//! distance groups of processor `p` are its node-mate, then the two processors of the other node:
//! the same sets as node-then-all's. LGS differs from it only in drawing its two attempts on the
//! other node at random (the same victim may come twice), and both differ from random, whose
//! first attempt is on the other node two times in three. Once the searchers have their puzzles
//! they never block, so a searcher taken across the nodes solves the rest of its inbox there
//! (soft pinning's way home is a wake-up), and a steal takes half of the victim's ready searchers
//! (the policy's amount): one steal across the nodes early in a pass moves a few heavy searchers
//! for the rest of it, so `remote_line_fraction` of one pass is lumpy (near 0 in some passes,
//! several tenths in others) and only medians over many rounds compare the orders. LGS goes to
//! the other node when its node has no ready searcher left, or when its mate looks empty while
//! searchers woken there wait on the mate's wake-up stack (out of a thief's reach until the mate
//! switches; the processors that share a CPU are preempted by the kernel in turn). The two heavy
//! processors share a CPU and the kernel's time slices need not split it evenly, so one node can
//! fall behind the other, and the node ahead then takes the other's searchers, as LGS would on a
//! real machine, where the idle cores had nothing else to run. Here the thief's CPU would
//! otherwise have gone to the processor sharing it, so such a steal only costs.
//!
//! # `concdict` and `concsll` (Savina, as CAF measured LGS)
//!
//! A server ULT owns a dictionary (`HashMap`, `concdict`) or a sorted singly linked list
//! (`concsll`); 20 worker ULTs send it requests over a channel and wait for each reply on a
//! channel of their own: 10% writes, the rest reads (`concsll`: 1% size queries). Writes store
//! `f(key)` for `key`, so the final contents do not depend on the interleaving: the answer is
//! the number of requests served plus a checksum of the final contents (and every read value is
//! checked to be `f(key)`). `elite/pinned` runs with soft pinning (each ULT goes home when woken,
//! unless home is overloaded or the ULT that woke it last wakes it again: then it goes to that
//! ULT's processor), `elite/unpinned` without.
//!
//! # Targets (issue 20)
//!
//! At 2 processors: `cache_stress` best at least 1.3x ignorant; `merge_sort` hinted at least
//! 1.05x unhinted and at least 1/1.1 of rayon's rate (the same algorithm); `block_matmul` hinted
//! at least unhinted and at least 1/1.05 of rayon; `matrix_search` LGS at least 1.2x random under
//! emulation and at least node-then-all on the real host; `concdict`, `concsll` pinned at least
//! unpinned (also at 1 processor).

use std::cell::Cell;
use std::collections::HashMap;
use std::hint::black_box;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Context;
use crate::harness::{warm_then_time, Bench, Bound, Contender, Metric, Params, Sample, Subject, Target};
use crate::peers::PeerArgs;
use crate::workloads::{build_runtime, elite_join, time_shared};

mod merge_probe;

/// This suite's name.
const SUITE: &str = "places";

/// Where a variant asks for a ULT to be started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Where {
    /// No hint: the runtime decides.
    Anywhere,
    /// A hint to this processor of the runtime.
    Processor(usize),
}

/// Spawns `f` on the runtime of the caller, hinted as `at` says.
fn spawn_at<F, T>(at: Where, f: F) -> Result<elite_rt::JoinHandle<T>, String>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let builder = elite_rt::Builder::new();
    let builder = match at {
        Where::Anywhere => builder,
        Where::Processor(p) => builder.place(elite_rt::Place::processor(p)),
    };
    builder.spawn(f).map_err(|e| format!("cannot spawn a ULT: {e}"))
}

/// `builder` with the stealing order of the `matrix_search` system `system`.
fn steal_order(builder: elite_rt::RuntimeBuilder, system: &str) -> Result<elite_rt::RuntimeBuilder, String> {
    let order = match system {
        "elite/lgs" => elite_rt::StealOrder::Groups,
        "elite/node-then-all" => elite_rt::StealOrder::NodeThenAll,
        "elite/random" => elite_rt::StealOrder::Random,
        _ => return Err(format!("unknown system {system}")),
    };
    Ok(builder.steal_order(order))
}

/// `builder` with soft pinning on or off.
fn soft_pinning(builder: elite_rt::RuntimeBuilder, on: bool) -> elite_rt::RuntimeBuilder {
    builder.soft_pinning(on)
}

/// A small deterministic generator (xorshift64), the same sequence as the Go peer's.
struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (any value).
    fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next state.
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value below `bound` (> 0).
    fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }
}

/// The benches of the suite.
pub fn benches(ctx: &mut Context) -> Vec<Bench> {
    let processors =
        ctx.processor_counts(Some("places: this machine has 1 CPU: the 2-processor rows are left out"));
    let cache = elite_affinity::Topology::detect().model_cache();
    ctx.notes.push(format!(
        "places: private cache {} KiB{} (the cache model's): cache_stress arrays of {} KiB, block_matmul blocks of {}",
        cache.size >> 10,
        cache.level.map(|l| format!(", L{l}")).unwrap_or_default(),
        stress_array_bytes(cache.size) >> 10,
        matmul_block(cache.size, if ctx.quick { MATMUL_QUICK } else { MATMUL_FULL }),
    ));
    let mut benches = vec![
        cache_stress(ctx, "cache_stress", stress_array_bytes(cache.size), &cache, &processors, true),
        cache_stress(ctx, "cache_stress_fixed", FIXED_ARRAY_BYTES, &cache, &processors, false),
        merge_sort_bench(ctx, &processors),
        block_matmul(ctx, &cache, &processors),
    ];
    if let Some(p) = at_two(&processors) {
        benches.push(place_level(ctx, PlaceLevelWork::MergeSort, p));
        benches.push(place_level(ctx, PlaceLevelWork::CacheStress(stress_array_bytes(cache.size)), p));
        let bytes = stress_array_bytes(cache.size);
        benches.push(steal_avoidance(ctx, Avoidance::Gaps, bytes, p));
        benches.push(steal_avoidance(ctx, Avoidance::Imbalance, bytes, p));
    }
    benches.push(matrix_search(ctx, &processors, false));
    benches.push(matrix_search(ctx, &processors, true));
    benches.push(served(ctx, Served::Dict, &processors));
    benches.push(served(ctx, Served::SortedList, &processors));
    benches
}

/// The rows of `targets` at 2 processors, when the run has them.
fn at_two(processors: &[usize]) -> Option<usize> {
    processors.contains(&2).then_some(2)
}

/// A [`Target::Relative`]: each of `subject` at least `times` the rate of `baseline`.
fn at_least(
    subject: &'static [&'static str],
    baseline: &'static str,
    processors: usize,
    times: f64,
) -> Target {
    Target::Relative { subject: Subject::Each(subject), baseline, processors, bound: Bound::AtLeast(times) }
}

// ---------------------------------------------------------------------------------------------
// cache_stress

/// Bytes of each array of `cache_stress_fixed`.
const FIXED_ARRAY_BYTES: u64 = 384 << 10;

/// ULTs per processor.
const STRESS_ULTS_PER_PROCESSOR: usize = 8;

/// Passes per ULT (full, `--quick`).
const STRESS_PASSES: (u64, u64) = (100, 8);

/// Bytes of each array: 3/4 of the private cache, in whole cache lines.
fn stress_array_bytes(cache_bytes: u64) -> u64 {
    (cache_bytes * 3 / 4 / 64 * 64).max(64)
}

/// The placements of `cache_stress`, with their system names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stress {
    /// The ULTs of one array on one half of the processors.
    Best,
    /// Both arrays on every processor, interleaved.
    Worst,
    /// No hints.
    Ignorant,
    /// A processor drawn at random for each ULT.
    Random,
}

impl Stress {
    /// Every placement, in the order the rows run.
    const ALL: [Stress; 4] = [Stress::Best, Stress::Worst, Stress::Ignorant, Stress::Random];

    /// The system name.
    fn system(self) -> &'static str {
        match self {
            Stress::Best => "elite/best",
            Stress::Worst => "elite/worst",
            Stress::Ignorant => "elite/ignorant",
            Stress::Random => "elite/random",
        }
    }

    /// Where ULT `i` (of array `i % 2`) goes on `processors` processors; `rng` draws for
    /// [`Stress::Random`].
    fn place(self, i: usize, processors: usize, rng: &mut XorShift) -> Where {
        let half = (processors / 2).max(1);
        match self {
            Stress::Best if processors == 1 => Where::Processor(0),
            // Array k on processors k*half .. k*half + half, round-robin inside.
            Stress::Best => Where::Processor((i % 2) * half + (i / 2) % half),
            // Pairs (one ULT of each array) round-robin over the processors.
            Stress::Worst => Where::Processor((i / 2) % processors),
            Stress::Ignorant => Where::Anywhere,
            Stress::Random => Where::Processor(rng.below(processors as u64) as usize),
        }
    }
}

/// `n` pseudo-random words from `seed` (the Go peer's `stressArray`).
fn stress_array(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = XorShift::new(seed);
    (0..n).map(|_| rng.next_u64() as u32).collect()
}

/// One pass of [`stress_pass`] over `array` (array number `which`) by the ULT running it,
/// counting in `switches` a pass that finds the other array last used on its processor
/// (`last`, per processor).
fn counted_pass(array: &[u32], which: usize, last: &[AtomicUsize], switches: &AtomicU64) -> u64 {
    let here = elite_rt::current().processor();
    if last[here].swap(which, Ordering::Relaxed) != which {
        switches.fetch_add(1, Ordering::Relaxed);
    }
    stress_pass(black_box(array))
}

/// One pass: the wrapping sum (high half) and product of odd factors (low half) of `a`.
///
/// Built for the widest vectors the CPU has (AVX-512, else AVX2): without a vector multiply of
/// 32-bit lanes (baseline x86-64 has none) a pass is bound by the multiplies at a few GB/s, and
/// where the array sits (private or shared cache) would hardly show; with AVX2's 8 lanes a pass
/// over an array in the L1 still runs at about the rate the L2 feeds it on a Xeon with a 2 MiB
/// L2, so that a reload from the L3 costs it less than it costs the stream.
fn stress_pass(a: &[u32]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked just above), the only requirement of the call.
        return unsafe { stress_pass_avx512(a) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), the only requirement of the call.
        return unsafe { stress_pass_avx2(a) };
    }
    stress_pass_portable(a)
}

/// [`stress_pass`] for any CPU.
#[inline(never)]
fn stress_pass_portable(a: &[u32]) -> u64 {
    stress_pass_body(a)
}

/// [`stress_pass`] compiled with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn stress_pass_avx2(a: &[u32]) -> u64 {
    stress_pass_body(a)
}

/// [`stress_pass`] compiled with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn stress_pass_avx512(a: &[u32]) -> u64 {
    stress_pass_body(a)
}

/// The loop of [`stress_pass`], inlined into each build of it.
#[inline(always)]
fn stress_pass_body(a: &[u32]) -> u64 {
    let mut sum = 0u32;
    let mut prod = 1u32;
    for &v in a {
        sum = sum.wrapping_add(v);
        prod = prod.wrapping_mul(v | 1);
    }
    (u64::from(sum) << 32) | u64::from(prod)
}

/// Passes of each kind that [`reload_ratio`] times.
const RELOAD_PASSES: usize = 31;

/// How much longer a pass over an array takes when the pass before it (on the same thread) ran
/// over the other array than when it ran over the same one: the median of [`RELOAD_PASSES`]
/// of each kind, interleaved, on the calling thread. Where two arrays do not fit in the private
/// cache, the first kind reloads its array from the next level and the second finds it in the
/// private cache, so this is the most a pass can gain from `elite/best`'s placement over one
/// that reloads every time (`elite/worst`); where both fit, it is about 1.
fn reload_ratio(arrays: &[Vec<u32>; 2]) -> f64 {
    let timed = |a: &[u32]| {
        let start = Instant::now();
        black_box(stress_pass(black_box(a)));
        start.elapsed()
    };
    let (mut reloaded, mut kept) = (Vec::with_capacity(RELOAD_PASSES), Vec::with_capacity(RELOAD_PASSES));
    for _ in 0..RELOAD_PASSES {
        black_box(stress_pass(black_box(&arrays[1])));
        reloaded.push(timed(&arrays[0]));
        kept.push(timed(&arrays[0]));
    }
    reloaded.sort_unstable();
    kept.sort_unstable();
    let median = |v: &[Duration]| v[v.len() / 2].as_secs_f64();
    median(&reloaded) / median(&kept).max(1e-12)
}

/// A `cache_stress` bench with arrays of `array_bytes`; `peers`: with Go, rayon and the target.
fn cache_stress(
    ctx: &mut Context,
    name: &'static str,
    array_bytes: u64,
    cache: &elite_affinity::ModelCache,
    processors: &[usize],
    peers: bool,
) -> Bench {
    let passes = if ctx.quick { STRESS_PASSES.1 } else { STRESS_PASSES.0 };
    let len = (array_bytes / 4) as usize;
    let arrays: Arc<[Vec<u32>; 2]> = Arc::new([stress_array(len, 1), stress_array(len, 2)]);
    let per_pass = [stress_pass(&arrays[0]), stress_pass(&arrays[1])];
    let expected =
        |ults: usize| (0..ults).fold(0u64, |sum, i| sum.wrapping_add(per_pass[i % 2].wrapping_mul(passes)));
    let reload = reload_ratio(&arrays);
    ctx.notes.push(format!(
        "places: {name}: a pass over a {} KiB array right after one over the other array takes {reload:.2}x one right after one over the same array (one thread, median of {RELOAD_PASSES}): the most elite/best can gain per pass",
        array_bytes >> 10
    ));
    let params = |p: usize| {
        Params::new(p)
            .with("ults", (STRESS_ULTS_PER_PROCESSOR * p) as u64)
            .with("passes", passes)
            .with("array_bytes", array_bytes)
            .with("cache_bytes", cache.size)
            .with("cache_level", cache.level.map_or(0, u64::from))
            .with("reload_permille", (reload * 1000.0).round() as u64)
    };
    let mut contenders = Vec::new();
    for &p in processors {
        let ults = STRESS_ULTS_PER_PROCESSOR * p;
        for variant in Stress::ALL {
            let arrays = Arc::clone(&arrays);
            let draws = Cell::new(0u64);
            contenders.push(Contender::new(variant.system(), params(p), expected(ults), move || {
                draws.set(draws.get() + 1);
                elite_cache_stress(variant, elite_rt::PlaceKind::Processor, p, &arrays, passes, draws.get())
            }));
        }
    }
    let mut targets = Vec::new();
    if peers {
        for &p in processors {
            let ults = STRESS_ULTS_PER_PROCESSOR * p;
            let arrays = Arc::clone(&arrays);
            contenders.push(Contender::new("rayon", params(p), expected(ults), move || {
                rayon_cache_stress(p, &arrays, passes)
            }));
            let args = PeerArgs::new(SUITE, "cache_stress", ults as u64 * passes, p)
                .with("threads", ults as u64)
                .with("ws", array_bytes);
            ctx.add_go(&mut contenders, &args, params(p), expected(ults));
        }
        if let Some(p) = at_two(processors) {
            targets.push(at_least(&["elite/best"], "elite/ignorant", p, 1.3));
        }
    }
    Bench { name, metric: Metric::OpsPerSec, contenders, targets }
}

/// One elite sample of `cache_stress` (placement `variant`, random draws from `seed`).
fn elite_cache_stress(
    variant: Stress,
    level: elite_rt::PlaceKind,
    processors: usize,
    arrays: &Arc<[Vec<u32>; 2]>,
    passes: u64,
    seed: u64,
) -> Result<Sample, String> {
    let rt = build_runtime(elite_rt::Runtime::builder().processors(processors).place_level(level))?;
    let ults = STRESS_ULTS_PER_PROCESSOR * processors;
    let mut rng = XorShift::new(seed);
    let places: Vec<Where> = (0..ults).map(|i| variant.place(i, processors, &mut rng)).collect();
    // Per processor, the array of the last pass it ran (2: none yet); passes after one over the
    // other array; passes run on a processor other than the one the ULT was placed on.
    let last: Arc<Vec<AtomicUsize>> = Arc::new((0..processors).map(|_| AtomicUsize::new(2)).collect());
    let switches = Arc::new(AtomicU64::new(0));
    let away = Arc::new(AtomicU64::new(0));
    let sample = warm_then_time(ults as u64 * passes, || {
        switches.store(0, Ordering::Relaxed);
        away.store(0, Ordering::Relaxed);
        rt.block_on(|| {
            let start = Instant::now();
            let mut handles = Vec::with_capacity(ults);
            for (i, &at) in places.iter().enumerate() {
                let (arrays, last, switches, away) =
                    (Arc::clone(arrays), Arc::clone(&last), Arc::clone(&switches), Arc::clone(&away));
                handles.push(spawn_at(at, move || {
                    let array = &arrays[i % 2];
                    let mut sum = 0u64;
                    for _ in 0..passes {
                        if let Where::Processor(p) = at {
                            if elite_rt::current().processor() != p {
                                away.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        sum = sum.wrapping_add(counted_pass(array, i % 2, &last, &switches));
                        elite_rt::yield_now();
                    }
                    sum
                })?);
            }
            let mut total = 0u64;
            for handle in handles {
                total = total.wrapping_add(elite_join(handle)?);
            }
            Ok((start.elapsed(), total))
        })
    })?;
    let passes_run = (ults as u64 * passes) as f64;
    crate::harness::record_side("array_switches", switches.load(Ordering::Relaxed) as f64 / passes_run);
    if variant != Stress::Ignorant {
        crate::harness::record_side("passes_away", away.load(Ordering::Relaxed) as f64 / passes_run);
    }
    Ok(sample)
}

/// A rayon pool of `threads` threads.
fn rayon_pool(threads: usize) -> Result<rayon::ThreadPool, String> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| format!("cannot build the rayon pool: {e}"))
}

/// One rayon sample of `cache_stress`: the same tasks in a scope (each runs its passes to the end).
fn rayon_cache_stress(threads: usize, arrays: &Arc<[Vec<u32>; 2]>, passes: u64) -> Result<Sample, String> {
    let pool = rayon_pool(threads)?;
    let ults = STRESS_ULTS_PER_PROCESSOR * threads;
    warm_then_time(ults as u64 * passes, || {
        let total = std::sync::atomic::AtomicU64::new(0);
        let start = Instant::now();
        pool.scope(|s| {
            for i in 0..ults {
                let (array, total) = (&arrays[i % 2], &total);
                s.spawn(move |_| {
                    let mut sum = 0u64;
                    for _ in 0..passes {
                        sum = sum.wrapping_add(stress_pass(black_box(array)));
                    }
                    total.fetch_add(sum, std::sync::atomic::Ordering::Relaxed);
                });
            }
        });
        Ok((start.elapsed(), total.into_inner()))
    })
}

// ---------------------------------------------------------------------------------------------
// place_level

/// The workloads of the `place_level` benches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PlaceLevelWork {
    /// `merge_sort`, unhinted: fork-join.
    MergeSort,
    /// `cache_stress`'s ignorant variant with arrays of this many bytes: yielding ULTs that
    /// keep to their data.
    CacheStress(u64),
}

/// The queue levels a `place_level` bench compares, with their system names: a runqueue per
/// processor (the default), one per L3 cache (where every processor has one), one for the
/// machine.
fn place_levels() -> Vec<(&'static str, elite_rt::PlaceKind)> {
    let mut levels = vec![("elite/per-processor", elite_rt::PlaceKind::Processor)];
    let l3 = elite_rt::PlaceKind::Cache { level: 3 };
    if elite_rt::Runtime::builder().processors(1).place_level(l3).build().is_ok() {
        levels.push(("elite/per-l3", l3));
    }
    levels.push(("elite/per-machine", elite_rt::PlaceKind::Machine));
    levels
}

/// A `place_level` bench (LASSI's work-stealing places, `RuntimeBuilder::place_level`): the
/// workload on per-processor runqueues against runqueues shared by the processors of a cache
/// or of the machine, at `processors` (2).
fn place_level(ctx: &mut Context, work: PlaceLevelWork, processors: usize) -> Bench {
    let mut contenders = Vec::new();
    let name = match work {
        PlaceLevelWork::MergeSort => {
            let n = if ctx.quick { SORT_N.1 } else { SORT_N.0 };
            let input: Arc<Vec<u32>> = Arc::new(stress_array(n, 7));
            let mut sorted = input.to_vec();
            sorted.sort_unstable();
            let expected = sorted_hash(&sorted);
            let params = Params::new(processors).with("n", n as u64).with("leaf", SORT_LEAF as u64);
            for (system, level) in place_levels() {
                let input = Arc::clone(&input);
                contenders.push(Contender::new(system, params.clone(), expected, move || {
                    elite_merge_sort(processors, false, level, &input)
                }));
            }
            "place_level_merge_sort"
        }
        PlaceLevelWork::CacheStress(array_bytes) => {
            let passes = if ctx.quick { STRESS_PASSES.1 } else { STRESS_PASSES.0 };
            let len = (array_bytes / 4) as usize;
            let arrays: Arc<[Vec<u32>; 2]> = Arc::new([stress_array(len, 1), stress_array(len, 2)]);
            let per_pass = [stress_pass(&arrays[0]), stress_pass(&arrays[1])];
            let ults = STRESS_ULTS_PER_PROCESSOR * processors;
            let expected =
                (0..ults).fold(0u64, |sum, i| sum.wrapping_add(per_pass[i % 2].wrapping_mul(passes)));
            let params = Params::new(processors)
                .with("ults", ults as u64)
                .with("passes", passes)
                .with("array_bytes", array_bytes);
            for (system, level) in place_levels() {
                let arrays = Arc::clone(&arrays);
                contenders.push(Contender::new(system, params.clone(), expected, move || {
                    elite_cache_stress(Stress::Ignorant, level, processors, &arrays, passes, 0)
                }));
            }
            "place_level_cache_stress"
        }
    };
    Bench { name, metric: Metric::OpsPerSec, contenders, targets: Vec::new() }
}

// ---------------------------------------------------------------------------------------------
// steal_avoidance

/// The two workloads of `steal_avoidance`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Avoidance {
    /// Where steal avoidance should help: the ULTs of each array on their own processor (the
    /// best placement), those of array 1 pausing briefly after each pass, so that processor 1
    /// is idle for moments while processor 0 has one ULT waiting.
    Gaps,
    /// Where it must not hurt: every ULT hinted to processor 0 (a lasting imbalance the other
    /// processor must steal away).
    Imbalance,
}

impl Avoidance {
    fn name(self) -> &'static str {
        match self {
            Avoidance::Gaps => "steal_avoidance_gaps",
            Avoidance::Imbalance => "steal_avoidance_imbalance",
        }
    }
}

/// ULTs per array in `steal_avoidance_gaps` (few: processor 0's queue is short, but a thief takes one).
const GAPS_ULTS_PER_ARRAY: usize = 3;

/// The pause of the array-1 ULTs after each pass in `steal_avoidance_gaps`.
const GAPS_PAUSE: Duration = Duration::from_micros(20);

/// A `steal_avoidance` bench: `cache_stress`'s arrays and passes, every ULT declaring its
/// array as its footprint, with `RuntimeBuilder::avoid_costly_steals` (`elite/avoid-costly`)
/// and without (`elite/steal-all`), at `processors` (2).
fn steal_avoidance(ctx: &mut Context, case: Avoidance, array_bytes: u64, processors: usize) -> Bench {
    let passes = if ctx.quick { STRESS_PASSES.1 } else { STRESS_PASSES.0 };
    let len = (array_bytes / 4) as usize;
    let arrays: Arc<[Vec<u32>; 2]> = Arc::new([stress_array(len, 1), stress_array(len, 2)]);
    let per_pass = [stress_pass(&arrays[0]), stress_pass(&arrays[1])];
    let ults = match case {
        Avoidance::Gaps => 2 * GAPS_ULTS_PER_ARRAY,
        Avoidance::Imbalance => STRESS_ULTS_PER_PROCESSOR * processors,
    };
    let expected = (0..ults).fold(0u64, |sum, i| sum.wrapping_add(per_pass[i % 2].wrapping_mul(passes)));
    let params = Params::new(processors)
        .with("ults", ults as u64)
        .with("passes", passes)
        .with("array_bytes", array_bytes);
    let mut contenders = Vec::new();
    for (system, avoid) in [("elite/avoid-costly", true), ("elite/steal-all", false)] {
        let arrays = Arc::clone(&arrays);
        contenders.push(Contender::new(system, params.clone(), expected, move || {
            elite_steal_avoidance(case, avoid, processors, ults, &arrays, passes)
        }));
    }
    Bench { name: case.name(), metric: Metric::OpsPerSec, contenders, targets: Vec::new() }
}

/// One elite sample of a `steal_avoidance` bench.
fn elite_steal_avoidance(
    case: Avoidance,
    avoid: bool,
    processors: usize,
    ults: usize,
    arrays: &Arc<[Vec<u32>; 2]>,
    passes: u64,
) -> Result<Sample, String> {
    let rt = build_runtime(elite_rt::Runtime::builder().processors(processors).avoid_costly_steals(avoid))?;
    let last: Arc<Vec<AtomicUsize>> = Arc::new((0..processors).map(|_| AtomicUsize::new(2)).collect());
    let switches = Arc::new(AtomicU64::new(0));
    let count =
        |f: fn(&elite_rt::ProcessorStats) -> u64| -> u64 { rt.stats().processors.iter().map(f).sum() };
    let steals = || count(|p| p.steals_node + p.steals_remote);
    let declined = || count(|p| p.steals_declined);
    // The steals and declined steals of the last pass (the timed one).
    let mut moved = (0, 0);
    let sample = warm_then_time(ults as u64 * passes, || {
        switches.store(0, Ordering::Relaxed);
        let before = (steals(), declined());
        let outcome = rt.block_on(|| {
            let start = Instant::now();
            let mut handles = Vec::with_capacity(ults);
            for i in 0..ults {
                let (arrays, last, switches) = (Arc::clone(arrays), Arc::clone(&last), Arc::clone(&switches));
                let at = match case {
                    Avoidance::Gaps => i % 2,
                    Avoidance::Imbalance => 0,
                };
                let array_bytes = std::mem::size_of_val(&arrays[0][..]);
                let handle = elite_rt::Builder::new()
                    .place(elite_rt::Place::processor(at))
                    .footprint(array_bytes)
                    .spawn(move || {
                        let array = &arrays[i % 2];
                        let mut sum = 0u64;
                        for _ in 0..passes {
                            sum = sum.wrapping_add(counted_pass(array, i % 2, &last, &switches));
                            if case == Avoidance::Gaps && i % 2 == 1 {
                                elite_rt::sleep(GAPS_PAUSE);
                            } else {
                                elite_rt::yield_now();
                            }
                        }
                        sum
                    })
                    .map_err(|e| format!("cannot spawn: {e}"))?;
                handles.push(handle);
            }
            let mut total = 0u64;
            for handle in handles {
                total = total.wrapping_add(elite_join(handle)?);
            }
            Ok((start.elapsed(), total))
        });
        moved = (steals() - before.0, declined() - before.1);
        outcome
    })?;
    let runs = (ults as u64 * passes) as f64;
    crate::harness::record_side("array_switches", switches.load(Ordering::Relaxed) as f64 / runs);
    crate::harness::record_side("steals", moved.0 as f64);
    crate::harness::record_side("steals_declined", moved.1 as f64);
    Ok(sample)
}

// ---------------------------------------------------------------------------------------------
// merge_sort

/// Elements sorted (full, `--quick`).
const SORT_N: (usize, usize) = (4_194_304, 262_144);

/// Below this many elements a range is sorted sequentially.
const SORT_LEAF: usize = 16_384;

/// Forks two closures and waits for both: elite (with or without hints) or rayon.
trait Fork: Sync {
    /// Runs `a` and `b` in parallel, `b` hinted to the processor owning element `b_start` of `n`.
    fn fork<A, B>(&self, a: A, b: B, b_start: usize, n: usize)
    where
        A: FnOnce() + Send,
        B: FnOnce() + Send;
}

/// `rayon::join`.
struct RayonFork;

impl Fork for RayonFork {
    fn fork<A, B>(&self, a: A, b: B, _b_start: usize, _n: usize)
    where
        A: FnOnce() + Send,
        B: FnOnce() + Send,
    {
        rayon::join(a, b);
    }
}

/// An elite ULT for `b`, joined after `a`; hinted by range on `processors` processors when
/// `hinted`.
struct EliteFork {
    /// Whether `b` gets a place hint.
    hinted: bool,
    /// The runtime's processors.
    processors: usize,
}

impl Fork for EliteFork {
    fn fork<A, B>(&self, a: A, b: B, b_start: usize, n: usize)
    where
        A: FnOnce() + Send,
        B: FnOnce() + Send,
    {
        let builder = elite_rt::Builder::new();
        let builder = if self.hinted {
            let p = (b_start * self.processors / n.max(1)).min(self.processors - 1);
            builder.place(elite_rt::Place::processor(p))
        } else {
            builder
        };
        join_spawned(builder, a, b);
    }
}

/// Runs `b` in a ULT that `builder` spawns and `a` on the caller meanwhile, and returns once
/// both ended (resuming the panic of either, `a`'s first); `b` may borrow from the caller's
/// frame, as with `std::thread::scope`. Panics if the spawn fails.
fn join_spawned<A, B>(builder: elite_rt::Builder, a: A, b: B)
where
    A: FnOnce() + Send,
    B: FnOnce() + Send,
{
    let b: Box<dyn FnOnce() + Send + '_> = Box::new(b);
    // SAFETY: only the lifetime changes. `b` may borrow from the caller's frame; the ULT that
    // runs it is joined below before this function returns, whether `a` returns or panics
    // (its panic is caught and resumed after the join), so nothing `b` borrows is used after
    // it ends. If the spawn fails, `b` was dropped unrun and the panic leaves nothing running.
    let b: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(b) };
    let handle = builder.spawn(b).unwrap_or_else(|e| panic!("cannot spawn a ULT: {e}"));
    let a_result = panic::catch_unwind(AssertUnwindSafe(a));
    let b_result = handle.join();
    if let Err(payload) = a_result {
        panic::resume_unwind(payload);
    }
    if let Err(payload) = b_result {
        panic::resume_unwind(payload);
    }
}

/// Sorts `data` (which starts at element `offset` of `n`) with `buf` (as long) as scratch.
fn merge_sort<F: Fork>(fork: &F, data: &mut [u32], buf: &mut [u32], offset: usize, n: usize) {
    let len = data.len();
    if len <= SORT_LEAF {
        data.sort_unstable();
        return;
    }
    let mid = len / 2;
    {
        let (left, right) = data.split_at_mut(mid);
        let (left_buf, right_buf) = buf.split_at_mut(mid);
        fork.fork(
            || merge_sort(fork, left, left_buf, offset, n),
            || merge_sort(fork, right, right_buf, offset + mid, n),
            offset + mid,
            n,
        );
    }
    merge(&data[..mid], &data[mid..], buf);
    data.copy_from_slice(buf);
}

/// Merges the sorted `a` and `b` into `out` (`a.len() + b.len()` long).
fn merge(a: &[u32], b: &[u32], out: &mut [u32]) {
    let (mut i, mut j) = (0, 0);
    for slot in out.iter_mut() {
        if j >= b.len() || (i < a.len() && a[i] <= b[j]) {
            *slot = a[i];
            i += 1;
        } else {
            *slot = b[j];
            j += 1;
        }
    }
}

/// A position-weighted hash of `sorted`: `sum (i + 1) x_i`, wrapping.
fn sorted_hash(sorted: &[u32]) -> u64 {
    sorted
        .iter()
        .enumerate()
        .fold(0u64, |h, (i, &x)| h.wrapping_add((i as u64 + 1).wrapping_mul(u64::from(x))))
}

/// The `merge_sort` bench.
fn merge_sort_bench(ctx: &mut Context, processors: &[usize]) -> Bench {
    let n = if ctx.quick { SORT_N.1 } else { SORT_N.0 };
    let input: Arc<Vec<u32>> = Arc::new(stress_array(n, 7));
    let mut sorted = input.to_vec();
    sorted.sort_unstable();
    let expected = sorted_hash(&sorted);
    let params = |p: usize| Params::new(p).with("n", n as u64).with("leaf", SORT_LEAF as u64);
    let mut contenders = Vec::new();
    for &p in processors {
        for (system, hinted) in [("elite/hinted", true), ("elite/unhinted", false)] {
            let input = Arc::clone(&input);
            contenders.push(Contender::new(system, params(p), expected, move || {
                elite_merge_sort(p, hinted, elite_rt::PlaceKind::Processor, &input)
            }));
        }
        let input_rayon = Arc::clone(&input);
        contenders.push(Contender::new("rayon", params(p), expected, move || {
            rayon_sort(p, &input_rayon, |data, buf| merge_sort(&RayonFork, data, buf, 0, data.len()))
        }));
        let input_par = Arc::clone(&input);
        contenders.push(Contender::new("rayon/par_sort_unstable", params(p), expected, move || {
            rayon_sort(p, &input_par, |data, _| {
                use rayon::slice::ParallelSliceMut;
                data.par_sort_unstable();
            })
        }));
    }
    let mut targets = Vec::new();
    if let Some(p) = at_two(processors) {
        targets.push(at_least(&["elite/hinted"], "elite/unhinted", p, 1.05));
        targets.push(at_least(&["elite/hinted"], "rayon", p, 1.0 / 1.1));
    }
    Bench { name: "merge_sort", metric: Metric::OpsPerSec, contenders, targets }
}

/// One elite sample of `merge_sort`.
fn elite_merge_sort(
    processors: usize,
    hinted: bool,
    level: elite_rt::PlaceKind,
    input: &[u32],
) -> Result<Sample, String> {
    let rt = build_runtime(elite_rt::Runtime::builder().processors(processors).place_level(level))?;
    let fork = EliteFork { hinted, processors };
    let mut data = input.to_vec();
    let mut buf = vec![0u32; input.len()];
    warm_then_time(input.len() as u64, || {
        data.copy_from_slice(input);
        let (sorted, scratch, fork) = (&mut data[..], &mut buf[..], &fork);
        let elapsed = rt.block_on(move || {
            let start = Instant::now();
            let n = sorted.len();
            merge_sort(fork, sorted, scratch, 0, n);
            start.elapsed()
        });
        Ok((elapsed, sorted_hash(&data[..])))
    })
}

/// One rayon sample of a sort: `sort(data, scratch)` inside a pool of `threads` threads.
fn rayon_sort(
    threads: usize,
    input: &[u32],
    sort: impl Fn(&mut [u32], &mut [u32]) + Sync,
) -> Result<Sample, String> {
    let pool = rayon_pool(threads)?;
    let mut data = input.to_vec();
    let mut buf = vec![0u32; input.len()];
    warm_then_time(input.len() as u64, || {
        data.copy_from_slice(input);
        let start = Instant::now();
        pool.install(|| sort(&mut data, &mut buf));
        let elapsed = start.elapsed();
        Ok((elapsed, sorted_hash(&data)))
    })
}

// ---------------------------------------------------------------------------------------------
// block_matmul

/// Matrix order (full, `--quick`).
const MATMUL_FULL: usize = 1024;
/// Matrix order under `--quick`.
const MATMUL_QUICK: usize = 256;

/// The block order: the largest power of two (at least 8, at most `n`) whose three `f64` blocks
/// fill at most half of `cache_bytes`.
fn matmul_block(cache_bytes: u64, n: usize) -> usize {
    let mut block = 8usize;
    while block * 2 <= n && 3 * (block * 2) * (block * 2) * 8 <= (cache_bytes / 2) as usize {
        block *= 2;
    }
    block.min(n)
}

/// A matrix of small integers (-4..=4) as `f64`, row-major, from `seed`.
fn int_matrix(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = XorShift::new(seed);
    (0..n * n).map(|_| rng.below(9) as f64 - 4.0).collect()
}

/// The weights of the answer: `u_i = i % 5 + 1`, `v_j = j % 3 + 1`.
fn weights(n: usize) -> (Vec<i64>, Vec<i64>) {
    ((0..n).map(|i| (i % 5 + 1) as i64).collect(), (0..n).map(|j| (j % 3 + 1) as i64).collect())
}

/// `sum_ij C_ij u_i v_j` of a computed product (its entries are exact integers).
fn product_answer(c: &[f64], n: usize) -> u64 {
    let (u, v) = weights(n);
    let mut sum = 0i64;
    for i in 0..n {
        for j in 0..n {
            sum = sum.wrapping_add((c[i * n + j] as i64).wrapping_mul(u[i] * v[j]));
        }
    }
    sum as u64
}

/// The same from A and B alone: `(u^T A)(B v)`.
fn expected_product_answer(a: &[f64], b: &[f64], n: usize) -> u64 {
    let (u, v) = weights(n);
    let mut sum = 0i64;
    for k in 0..n {
        let x: i64 = (0..n).map(|i| u[i] * a[i * n + k] as i64).sum();
        let y: i64 = (0..n).map(|j| b[k * n + j] as i64 * v[j]).sum();
        sum = sum.wrapping_add(x.wrapping_mul(y));
    }
    sum as u64
}

/// The matrices of a `block_matmul` run.
struct Matrices {
    /// Order.
    n: usize,
    /// Block order.
    block: usize,
    /// A, row-major.
    a: Vec<f64>,
    /// B, row-major.
    b: Vec<f64>,
}

/// The pointer to C that every tile writes its own part of.
#[derive(Clone, Copy)]
struct Out(*mut f64);

// SAFETY: each task writes a distinct tile of C through the pointer (see `tile`), and the owner of
// C reads it only after every task has been joined.
unsafe impl Send for Out {}
// SAFETY: as for `Send`: the tiles written through shared copies never overlap.
unsafe impl Sync for Out {}

impl Matrices {
    /// Computes tile (`ti`, `tj`) of C = A B into `c`.
    ///
    /// # Safety
    ///
    /// `c` points to `n * n` writable `f64`s that nothing else reads or writes in this tile's
    /// rows `ti*block..` and columns `tj*block..` while the call runs.
    unsafe fn tile(&self, ti: usize, tj: usize, c: Out) {
        let (n, bs) = (self.n, self.block);
        let mut acc = vec![0.0f64; bs * bs];
        for tk in 0..n / bs {
            for i in 0..bs {
                let a_row = &self.a[(ti * bs + i) * n + tk * bs..][..bs];
                let c_row = &mut acc[i * bs..][..bs];
                for (k, &aik) in a_row.iter().enumerate() {
                    let b_row = &self.b[(tk * bs + k) * n + tj * bs..][..bs];
                    for (cij, &bkj) in c_row.iter_mut().zip(b_row) {
                        *cij += aik * bkj;
                    }
                }
            }
        }
        for i in 0..bs {
            // SAFETY: the row segment lies inside C (`ti*bs + i < n`, `tj*bs + bs <= n`) and is
            // this tile's own, per the function's contract.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    acc[i * bs..].as_ptr(),
                    c.0.add((ti * bs + i) * n + tj * bs),
                    bs,
                );
            }
        }
    }

    /// Tiles per side.
    fn tiles(&self) -> usize {
        self.n / self.block
    }
}

/// The `block_matmul` bench.
fn block_matmul(ctx: &mut Context, cache: &elite_affinity::ModelCache, processors: &[usize]) -> Bench {
    let n = if ctx.quick { MATMUL_QUICK } else { MATMUL_FULL };
    let block = matmul_block(cache.size, n);
    let m = Arc::new(Matrices { n, block, a: int_matrix(n, 11), b: int_matrix(n, 12) });
    let expected = expected_product_answer(&m.a, &m.b, n);
    let params = |p: usize| {
        Params::new(p).with("n", n as u64).with("block", block as u64).with("cache_bytes", cache.size)
    };
    let mut contenders = Vec::new();
    for &p in processors {
        for (system, hinted) in [("elite/hinted", true), ("elite/unhinted", false)] {
            let m = Arc::clone(&m);
            contenders.push(Contender::new(system, params(p), expected, move || elite_matmul(p, hinted, &m)));
        }
        let m = Arc::clone(&m);
        contenders.push(Contender::new("rayon", params(p), expected, move || rayon_matmul(p, &m)));
    }
    let mut targets = Vec::new();
    if let Some(p) = at_two(processors) {
        targets.push(at_least(&["elite/hinted"], "elite/unhinted", p, 1.0));
        targets.push(at_least(&["elite/hinted"], "rayon", p, 1.0 / 1.05));
    }
    Bench { name: "block_matmul", metric: Metric::OpsPerSec, contenders, targets }
}

/// One elite sample of `block_matmul`: a ULT per tile, hinted by block row when `hinted`.
fn elite_matmul(processors: usize, hinted: bool, m: &Arc<Matrices>) -> Result<Sample, String> {
    let rt = build_runtime(elite_rt::Runtime::builder().processors(processors))?;
    let n = m.n;
    let mut c = vec![0.0f64; n * n];
    let tiles = m.tiles();
    warm_then_time((n * n * n) as u64, || {
        let out = Out(c.as_mut_ptr());
        let elapsed = rt.block_on(|| {
            let start = Instant::now();
            let mut handles = Vec::with_capacity(tiles * tiles);
            for ti in 0..tiles {
                let at = if hinted { Where::Processor(ti * processors / tiles) } else { Where::Anywhere };
                for tj in 0..tiles {
                    let m = Arc::clone(m);
                    // SAFETY: tile (ti, tj) is written by this ULT alone; `c` outlives every ULT
                    // (all are joined below, before `c` is read or dropped).
                    handles.push(spawn_at(at, move || unsafe { m.tile(ti, tj, out) })?);
                }
            }
            for handle in handles {
                elite_join(handle)?;
            }
            Ok::<_, String>(start.elapsed())
        })?;
        Ok((elapsed, product_answer(&c, n)))
    })
}

/// One rayon sample of `block_matmul`: the same tiles as tasks of a scope.
fn rayon_matmul(threads: usize, m: &Arc<Matrices>) -> Result<Sample, String> {
    let pool = rayon_pool(threads)?;
    let n = m.n;
    let mut c = vec![0.0f64; n * n];
    let tiles = m.tiles();
    warm_then_time((n * n * n) as u64, || {
        let out = Out(c.as_mut_ptr());
        let start = Instant::now();
        pool.scope(|s| {
            for ti in 0..tiles {
                for tj in 0..tiles {
                    let m = &**m;
                    // SAFETY: tile (ti, tj) is written by this task alone; the scope ends
                    // before `c` is read.
                    s.spawn(move |_| unsafe { m.tile(ti, tj, out) });
                }
            }
        });
        let elapsed = start.elapsed();
        Ok((elapsed, product_answer(&c, n)))
    })
}

// ---------------------------------------------------------------------------------------------
// matrix_search

/// The sizes of `matrix_search`.
#[derive(Clone, Copy, Debug)]
struct SearchSizes {
    /// Searchers per processor.
    searchers: usize,
    /// Rows per grid.
    rows: usize,
    /// Puzzles per searcher.
    puzzles: usize,
}

/// Columns per grid (bytes per row: four cache lines).
const SEARCH_COLS: usize = 256;

impl SearchSizes {
    const FULL: SearchSizes = SearchSizes { searchers: 8, rows: 1024, puzzles: 48 };
    const QUICK: SearchSizes = SearchSizes { searchers: 4, rows: 256, puzzles: 12 };
}

/// The emulated topology: 2 nodes of 2 cores (4 processors on the host's CPUs).
const EMULATED_TOPOLOGY: &str = "2 nodes x 2 cores";

/// The processors of [`EMULATED_TOPOLOGY`].
const EMULATED_PROCESSORS: usize = 4;

/// The stealing orders of `matrix_search`, with their system names.
const SEARCH_SYSTEMS: [&str; 3] = ["elite/lgs", "elite/node-then-all", "elite/random"];

/// One puzzle, a message to a searcher: a word, read down `cols` columns of the searcher's grid
/// from column `first`.
#[derive(Clone, Copy, Debug)]
struct Puzzle {
    /// The first column (the columns wrap around).
    first: usize,
    /// How many columns.
    cols: usize,
    /// The word, 4 letters, the first in the highest byte.
    word: u32,
}

/// The grids and puzzles of a `matrix_search` run on `processors` processors.
struct Search {
    /// Processors of the run; searcher `s` is homed on processor `s % processors`.
    processors: usize,
    /// One grid of `rows x SEARCH_COLS` letters per searcher, row-major.
    grids: Vec<Vec<u8>>,
    /// Rows per grid.
    rows: usize,
    /// Per searcher, its puzzles in the order the coordinator sends them.
    puzzles: Vec<Vec<Puzzle>>,
}

impl Search {
    /// `sizes.searchers` searchers per processor, each with a grid of letters `a..=d` and
    /// puzzles whose column counts are uneven on purpose: the searchers of even index (those
    /// homed on even processors) get about a sixth of the columns of the others.
    fn new(sizes: SearchSizes, processors: usize) -> Search {
        let mut rng = XorShift::new(21);
        let searchers = sizes.searchers * processors;
        let grids = (0..searchers)
            .map(|_| (0..sizes.rows * SEARCH_COLS).map(|_| b'a' + rng.below(4) as u8).collect())
            .collect();
        let puzzles = (0..searchers)
            .map(|s| {
                (0..sizes.puzzles)
                    .map(|_| {
                        let cols = if s % 2 == 0 { 1 + rng.below(4) } else { 8 + rng.below(16) } as usize;
                        let letters: [u8; 4] = std::array::from_fn(|_| b'a' + rng.below(4) as u8);
                        Puzzle {
                            first: rng.below(SEARCH_COLS as u64) as usize,
                            cols,
                            word: u32::from_be_bytes(letters),
                        }
                    })
                    .collect()
            })
            .collect();
        Search { processors, grids, rows: sizes.rows, puzzles }
    }

    /// Searcher `s`'s home processor.
    fn home(&self, s: usize) -> usize {
        s % self.processors
    }

    /// Cache lines a puzzle touches (one per row of every column searched).
    fn puzzle_lines(&self, puzzle: &Puzzle) -> u64 {
        (puzzle.cols * self.rows) as u64
    }

    /// Cache lines one pass touches.
    fn lines(&self) -> u64 {
        self.puzzles.iter().flatten().map(|p| self.puzzle_lines(p)).sum()
    }

    /// The matches of every puzzle, solved here.
    fn expected(&self) -> u64 {
        (0..self.grids.len()).map(|s| self.puzzles[s].iter().map(|p| self.solve(s, p, 0)).sum::<u64>()).sum()
    }

    /// Solves `puzzle` on searcher `s`'s grid, paying `delay` spin iterations per column (for
    /// its `rows` lines, in one spin at the column's end, finer than a spin per line can be);
    /// returns its matches.
    fn solve(&self, s: usize, puzzle: &Puzzle, delay: u64) -> u64 {
        let grid = &self.grids[s];
        let mut matches = 0;
        for c in 0..puzzle.cols {
            let col = (puzzle.first + c) % SEARCH_COLS;
            let mut window = 0u32;
            for r in 0..self.rows {
                window = (window << 8) | u32::from(grid[r * SEARCH_COLS + col]);
                if r >= 3 && window == puzzle.word {
                    matches += 1;
                }
            }
            if delay > 0 {
                spin(delay);
            }
        }
        matches
    }
}

/// Spins `iterations` rounds of a loop the compiler cannot remove.
#[inline(never)]
fn spin(iterations: u64) {
    let mut x = 0u64;
    for i in 0..iterations {
        x = black_box(x.wrapping_add(i));
    }
    black_box(x);
}

/// Picoseconds of one [`spin`] iteration, and of one local line of a search, measured here.
fn calibrate(search: &Search) -> (f64, f64) {
    // The fastest of several tries: on a loaded machine the others include time not running.
    let iterations = 200_000u64;
    let mut spin_best = Duration::MAX;
    for _ in 0..10 {
        let start = Instant::now();
        spin(iterations);
        spin_best = spin_best.min(start.elapsed());
    }
    let spin_ps = spin_best.as_secs_f64() * 1e12 / iterations as f64;
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        black_box(search.expected());
        best = best.min(start.elapsed());
    }
    let line_ps = best.as_secs_f64() * 1e12 / search.lines() as f64;
    (spin_ps.max(1e-3), line_ps)
}

/// A `matrix_search` bench: on the host's topology, or on the emulated one.
fn matrix_search(ctx: &mut Context, processors: &[usize], emulated: bool) -> Bench {
    let sizes = if ctx.quick { SearchSizes::QUICK } else { SearchSizes::FULL };
    let counts: Vec<usize> = if emulated { vec![EMULATED_PROCESSORS] } else { processors.to_vec() };
    // Spin iterations per remote column per 10 of distance (a local column's cost).
    let (spin_ps, line_ps) =
        if emulated { calibrate(&Search::new(sizes, EMULATED_PROCESSORS)) } else { (1.0, 0.0) };
    let delay_per_10 = (line_ps * sizes.rows as f64 / spin_ps).round() as u64;
    if emulated {
        ctx.notes.push(format!(
            "places: matrix_search emulated: a local line costs {:.2} ns here; a remote one pays {:.2} ns more per 10 of distance ({} spin iterations per column of {} lines)",
            line_ps / 1000.0,
            delay_per_10 as f64 * spin_ps / 1000.0 / sizes.rows as f64,
            delay_per_10,
            sizes.rows
        ));
    }
    let mut contenders = Vec::new();
    for &p in &counts {
        let search = Arc::new(Search::new(sizes, p));
        let (expected, lines) = (search.expected(), search.lines());
        let mut params = Params::new(p)
            .with_flag("emulated", emulated)
            .with_text("topology", if emulated { EMULATED_TOPOLOGY } else { "host" })
            .with("searchers", search.grids.len() as u64)
            .with("rows", sizes.rows as u64)
            .with("puzzles", (search.grids.len() * sizes.puzzles) as u64);
        if emulated {
            params = params.with("local_line_ps", line_ps.round() as u64);
        }
        for system in SEARCH_SYSTEMS {
            let search = Arc::clone(&search);
            let delay = if emulated { delay_per_10 } else { 0 };
            contenders.push(Contender::new(system, params.clone(), expected, move || {
                let sample = || elite_search(system, p, emulated, &search, delay, lines);
                // Two processors on each CPU: they take turns even where the suite runs under a
                // real-time policy.
                if emulated {
                    time_shared(sample)
                } else {
                    sample()
                }
            }));
        }
    }
    let targets = if emulated {
        vec![at_least(&["elite/lgs"], "elite/random", EMULATED_PROCESSORS, 1.2)]
    } else {
        at_two(processors)
            .map(|p| at_least(&["elite/lgs"], "elite/node-then-all", p, 1.0))
            .into_iter()
            .collect()
    };
    Bench { name: "matrix_search", metric: Metric::OpsPerSec, contenders, targets }
}

/// What the searchers of one pass saw: lines scanned away from their grid's node, and the
/// time they spent solving (nanoseconds), both summed over the searchers.
#[derive(Default)]
struct SearchTally {
    remote_lines: AtomicU64,
    busy_ns: AtomicU64,
}

/// One elite sample of `matrix_search` with the stealing order of `system`.
fn elite_search(
    system: &'static str,
    processors: usize,
    emulated: bool,
    search: &Arc<Search>,
    delay_per_10: u64,
    lines: u64,
) -> Result<Sample, String> {
    let builder = elite_rt::Runtime::builder();
    let builder = if emulated { builder.topology(EMULATED_TOPOLOGY) } else { builder.processors(processors) };
    let rt = build_runtime(steal_order(builder, system)?)?;
    let topology = rt.topology();
    let count = rt.processors();
    if count != search.processors {
        return Err(format!(
            "a runtime of {count} processors for a search laid out for {}",
            search.processors
        ));
    }
    // The spin per column a searcher pays on each processor: by the distance between that
    // processor's node and the node of the searcher's home, where its grid lives.
    let delay: Arc<Vec<Vec<u64>>> = Arc::new(
        (0..count)
            .map(|p| {
                (0..search.grids.len())
                    .map(|s| {
                        let d = topology.node_distance(topology.node_of(p), topology.node_of(search.home(s)));
                        delay_per_10 * u64::from(d.saturating_sub(10)) / 10
                    })
                    .collect()
            })
            .collect(),
    );
    let tally = Arc::new(SearchTally::default());
    let mut steals = (0, 0);
    let mut elapsed = Duration::ZERO;
    let sample = warm_then_time(lines, || {
        tally.remote_lines.store(0, Ordering::Relaxed);
        tally.busy_ns.store(0, Ordering::Relaxed);
        let before = steal_counts(&rt);
        let outcome = rt.block_on(|| {
            let start = Instant::now();
            // The searchers, each with a hint to its home processor (CAF's actors, each with its
            // own grid, started on their home worker), say they started and wait on their
            // inboxes; once all have, the coordinator deals the puzzles out, one to each
            // searcher in turn, so that a searcher wakes at home with its first (not where an
            // idle processor took it before it first ran). A searcher yields after each puzzle, as an actor
            // goes back to its worker's queue between messages, where a thief may take it.
            let mut handles = Vec::with_capacity(search.grids.len());
            let mut inboxes = Vec::with_capacity(search.grids.len());
            let (ready_tx, ready) = elite_rt::sync::mpsc::channel::<()>();
            for s in 0..search.grids.len() {
                let (tx, inbox) = elite_rt::sync::mpsc::channel::<Puzzle>();
                inboxes.push(tx);
                let (search, delay, tally) = (Arc::clone(search), Arc::clone(&delay), Arc::clone(&tally));
                let ready_tx = ready_tx.clone();
                handles.push(spawn_at(Where::Processor(search.home(s)), move || {
                    // Started (where an idle processor may have taken it before it ran): it
                    // waits on its empty inbox, and its first puzzle wakes it at home.
                    let _ = ready_tx.send(());
                    drop(ready_tx);
                    let (mut matches, mut remote, mut busy) = (0u64, 0u64, Duration::ZERO);
                    while let Ok(puzzle) = inbox.recv() {
                        let solving = Instant::now();
                        let delay = delay[elite_rt::current().processor()][s];
                        if delay > 0 {
                            remote += search.puzzle_lines(&puzzle);
                        }
                        matches += search.solve(s, &puzzle, delay);
                        busy += solving.elapsed();
                        elite_rt::yield_now();
                    }
                    tally.remote_lines.fetch_add(remote, Ordering::Relaxed);
                    tally.busy_ns.fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
                    matches
                })?);
            }
            drop(ready_tx);
            for _ in 0..search.grids.len() {
                ready.recv().map_err(|_| "a searcher ended before it was ready".to_string())?;
            }
            let most = search.puzzles.iter().map(Vec::len).max().unwrap_or(0);
            for i in 0..most {
                for (s, tx) in inboxes.iter().enumerate() {
                    if let Some(&puzzle) = search.puzzles[s].get(i) {
                        tx.send(puzzle).map_err(|_| "a searcher's inbox closed early".to_string())?;
                    }
                }
            }
            drop(inboxes);
            let mut matches = 0u64;
            for handle in handles {
                matches += elite_join(handle)?;
            }
            Ok((start.elapsed(), matches))
        });
        let after = steal_counts(&rt);
        steals = (after.0 - before.0, after.1 - before.1);
        if let Ok((time, _)) = &outcome {
            elapsed = *time;
        }
        outcome
    })?;
    crate::harness::record_side("steals", (steals.0 + steals.1) as f64);
    let busy = tally.busy_ns.load(Ordering::Relaxed) as f64 * 1e-9;
    crate::harness::record_side(
        "idle_fraction",
        (1.0 - busy / (elapsed.as_secs_f64() * count as f64)).max(0.0),
    );
    if emulated {
        crate::harness::record_side("steals_remote", steals.1 as f64);
        crate::harness::record_side(
            "remote_line_fraction",
            tally.remote_lines.load(Ordering::Relaxed) as f64 / lines as f64,
        );
    }
    Ok(sample)
}

/// The steals of `rt`'s processors so far: from their node, from other nodes.
fn steal_counts(rt: &elite_rt::Runtime) -> (u64, u64) {
    let stats = rt.stats();
    stats.processors.iter().fold((0, 0), |(node, remote), p| (node + p.steals_node, remote + p.steals_remote))
}

// ---------------------------------------------------------------------------------------------
// concdict, concsll

/// The two served structures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Served {
    /// `concdict`: a `HashMap`.
    Dict,
    /// `concsll`: a sorted singly linked list.
    SortedList,
}

/// Worker ULTs.
const SERVED_WORKERS: usize = 20;

/// Percent of requests that write.
const WRITE_PERCENT: u64 = 10;

/// Percent of `concsll` requests that ask for the size.
const SIZE_PERCENT: u64 = 1;

impl Served {
    /// The bench's name.
    fn name(self) -> &'static str {
        match self {
            Served::Dict => "concdict",
            Served::SortedList => "concsll",
        }
    }

    /// Requests per worker (full, `--quick`).
    fn requests(self, quick: bool) -> u64 {
        match (self, quick) {
            (Served::Dict, false) => 10_000,
            (Served::Dict, true) => 1_000,
            (Served::SortedList, false) => 1_500,
            (Served::SortedList, true) => 300,
        }
    }

    /// The keys a worker's requests use (`concsll`: values below this).
    fn key_space(self) -> u64 {
        match self {
            Served::Dict => 4096,
            Served::SortedList => 1 << 20,
        }
    }
}

/// The value stored for `key`.
fn value_of(key: u64) -> u64 {
    key.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5555
}

/// A request to the server; each carries the worker's reply channel.
enum Request {
    /// Store `value_of(key)` for `key` (`concsll`: insert `key`).
    Write(u64, elite_rt::sync::mpsc::SyncSender<u64>),
    /// Look `key` up: the reply is its value, or `u64::MAX` for none (`concsll`: 1 if present).
    Read(u64, elite_rt::sync::mpsc::SyncSender<u64>),
    /// `concsll`: the list's length.
    Size(elite_rt::sync::mpsc::SyncSender<u64>),
}

/// A sorted singly linked list of `u64` (duplicates kept).
#[derive(Default)]
struct SortedList {
    /// The first node.
    head: Option<Box<ListNode>>,
    /// Nodes.
    len: u64,
}

/// A node of [`SortedList`].
struct ListNode {
    /// Its value.
    value: u64,
    /// The next node.
    next: Option<Box<ListNode>>,
}

impl SortedList {
    /// Inserts `value` after every smaller or equal value.
    fn insert(&mut self, value: u64) {
        let mut at = &mut self.head;
        while at.as_ref().is_some_and(|node| node.value <= value) {
            at = &mut at.as_mut().expect("checked").next;
        }
        let next = at.take();
        *at = Some(Box::new(ListNode { value, next }));
        self.len += 1;
    }

    /// Whether `value` is in the list.
    fn contains(&self, value: u64) -> bool {
        let mut at = &self.head;
        while let Some(node) = at {
            if node.value >= value {
                return node.value == value;
            }
            at = &node.next;
        }
        false
    }

    /// The checksum of the answer (length plus the sum of the values), and whether the list is
    /// sorted.
    fn checksum(&self) -> (u64, bool) {
        let (mut sum, mut sorted, mut last) = (self.len, true, 0u64);
        let mut at = &self.head;
        while let Some(node) = at {
            sorted &= node.value >= last;
            last = node.value;
            sum = sum.wrapping_add(node.value);
            at = &node.next;
        }
        (sum, sorted)
    }
}

impl Drop for SortedList {
    fn drop(&mut self) {
        // Iteratively: a recursive drop of a long list would overflow a ULT's stack.
        let mut at = self.head.take();
        while let Some(mut node) = at {
            at = node.next.take();
        }
    }
}

/// The requests of worker `w`: (kind, key) with kind 0 write, 1 read, 2 size.
fn worker_requests(served: Served, w: usize, requests: u64) -> impl Iterator<Item = (u8, u64)> {
    let mut rng = XorShift::new(1000 + w as u64);
    (0..requests).map(move |_| {
        let roll = rng.below(100);
        let key = rng.below(served.key_space());
        let kind = if roll < WRITE_PERCENT {
            0
        } else if served == Served::SortedList && roll < WRITE_PERCENT + SIZE_PERCENT {
            2
        } else {
            1
        };
        (kind, key)
    })
}

/// The answer: requests served plus the checksum of the final contents.
fn served_expected(served: Served, requests: u64) -> u64 {
    let total = SERVED_WORKERS as u64 * requests;
    match served {
        Served::Dict => {
            let mut keys: Vec<u64> = (0..SERVED_WORKERS)
                .flat_map(|w| worker_requests(served, w, requests).filter(|r| r.0 == 0).map(|r| r.1))
                .collect();
            keys.sort_unstable();
            keys.dedup();
            keys.iter().fold(total, |sum, &k| sum.wrapping_add(k ^ value_of(k)))
        }
        Served::SortedList => {
            let values = (0..SERVED_WORKERS)
                .flat_map(|w| worker_requests(served, w, requests).filter(|r| r.0 == 0).map(|r| r.1));
            let (count, sum) = values.fold((0u64, 0u64), |(c, s), v| (c + 1, s.wrapping_add(v)));
            total.wrapping_add(count).wrapping_add(sum)
        }
    }
}

/// A `concdict` or `concsll` bench.
fn served(ctx: &mut Context, served: Served, processors: &[usize]) -> Bench {
    let requests = served.requests(ctx.quick);
    let expected = served_expected(served, requests);
    let params = |p: usize| {
        Params::new(p)
            .with("workers", SERVED_WORKERS as u64)
            .with("requests_per_worker", requests)
            .with("write_percent", WRITE_PERCENT)
    };
    let mut contenders = Vec::new();
    for &p in processors {
        for (system, pinned) in [("elite/pinned", true), ("elite/unpinned", false)] {
            contenders.push(Contender::new(system, params(p), expected, move || {
                elite_served(served, p, pinned, requests)
            }));
        }
    }
    let targets = processors.iter().map(|&p| at_least(&["elite/pinned"], "elite/unpinned", p, 1.0)).collect();
    Bench { name: served.name(), metric: Metric::OpsPerSec, contenders, targets }
}

/// One elite sample of `concdict` or `concsll`, with or without soft pinning.
fn elite_served(served: Served, processors: usize, pinned: bool, requests: u64) -> Result<Sample, String> {
    let rt = build_runtime(soft_pinning(elite_rt::Runtime::builder().processors(processors), pinned))?;
    let total = SERVED_WORKERS as u64 * requests;
    let mut counts = WakeCounts::default();
    let sample = warm_then_time(total, || {
        let before = WakeCounts::of(&rt);
        let outcome = rt.block_on(|| served_run(served, requests));
        counts = WakeCounts::of(&rt).since(&before);
        outcome
    })?;
    let per_request = |n: u64| n as f64 / total as f64;
    crate::harness::record_side("home_goings", per_request(counts.home_goings));
    crate::harness::record_side("partner_stays", per_request(counts.partner_stays));
    crate::harness::record_side("remote_wakes", per_request(counts.remote_wakes));
    crate::harness::record_side("unparks", per_request(counts.unparks));
    crate::harness::record_side("steals", per_request(counts.steals));
    Ok(sample)
}

/// The probe command of this suite (`elite-bench places-probe`).
pub const PROBE_COMMAND: &str = "places-probe";

/// `elite-bench places-probe <concdict|concsll> <pinned|unpinned> <processors> <requests>`: one
/// pass of `concdict` or `concsll` (each of the 20 workers sending `requests` requests) on a
/// runtime of `processors` processors, with or without soft pinning, printing `ns_per_op=<ns>
/// answer=<answer>`: the program to count instructions per request of with callgrind (two values
/// of `requests`, difference). Exit status 1 on a wrong answer, 2 on a bad command line.
///
/// `elite-bench places-probe merge_sort <system> <processors> <runs> [branchless]`: where the
/// phases of `merge_sort` run and what each level costs (the `merge_probe` module's docs).
pub fn probe_main(args: &[String]) -> std::process::ExitCode {
    use std::process::ExitCode;
    if args.first().map(String::as_str) == Some("merge_sort") {
        return merge_probe::main(&args[1..]);
    }
    let usage = format!(
        "usage: elite-bench {PROBE_COMMAND} <concdict|concsll> <pinned|unpinned> <processors> <requests>"
    );
    let parse = || -> Result<(Served, bool, usize, u64), String> {
        let [bench, system, processors, requests] = args else {
            return Err(format!("expected 4 arguments, got {}", args.len()));
        };
        let served = match bench.as_str() {
            "concdict" => Served::Dict,
            "concsll" => Served::SortedList,
            other => return Err(format!("unknown bench `{other}` (concdict or concsll)")),
        };
        let pinned = match system.as_str() {
            "pinned" | "elite/pinned" => true,
            "unpinned" | "elite/unpinned" => false,
            other => return Err(format!("unknown system `{other}` (pinned or unpinned)")),
        };
        let number = |name: &str, v: &str| -> Result<u64, String> {
            v.parse::<u64>()
                .ok()
                .filter(|&n| n > 0 && n <= 1 << 24)
                .ok_or_else(|| format!("{name}: expected a number from 1 to 16777216, got `{v}`"))
        };
        let processors = number("processors", processors)?.min(1024) as usize;
        Ok((served, pinned, processors, number("requests", requests)?))
    };
    let (served, pinned, processors, requests) = match parse() {
        Ok(v) => v,
        Err(message) => {
            eprintln!("elite-bench {PROBE_COMMAND}: {message}\n{usage}");
            return ExitCode::from(2);
        }
    };
    let expected = served_expected(served, requests);
    match served_pass(served, processors, pinned, requests) {
        Ok((elapsed, answer)) if answer == expected => {
            let ns = elapsed.as_secs_f64() * 1e9 / (SERVED_WORKERS as u64 * requests) as f64;
            println!("ns_per_op={ns:.1} answer={answer}");
            ExitCode::SUCCESS
        }
        Ok((_, answer)) => {
            eprintln!("elite-bench {PROBE_COMMAND}: wrong answer {answer} (expected {expected})");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("elite-bench {PROBE_COMMAND}: {e}");
            ExitCode::from(1)
        }
    }
}

/// One pass of `concdict` or `concsll` on a fresh runtime: its time and answer.
fn served_pass(
    served: Served,
    processors: usize,
    pinned: bool,
    requests: u64,
) -> Result<(Duration, u64), String> {
    let rt = build_runtime(soft_pinning(elite_rt::Runtime::builder().processors(processors), pinned))?;
    rt.block_on(|| served_run(served, requests))
}

/// The body of one pass of `concdict` or `concsll`, in the root ULT: the server and the workers
/// spawned, joined; its time and answer.
fn served_run(served: Served, requests: u64) -> Result<(Duration, u64), String> {
    let start = Instant::now();
    let (to_server, inbox) = elite_rt::sync::mpsc::channel::<Request>();
    let server = spawn_at(Where::Anywhere, move || serve(served, inbox))?;
    let mut workers = Vec::with_capacity(SERVED_WORKERS);
    for w in 0..SERVED_WORKERS {
        let to_server = to_server.clone();
        workers.push(spawn_at(Where::Anywhere, move || work(served, w, requests, &to_server))?);
    }
    drop(to_server);
    let mut served_count = 0u64;
    for worker in workers {
        served_count += elite_join(worker)??;
    }
    let checksum = elite_join(server)??;
    Ok((start.elapsed(), served_count.wrapping_add(checksum)))
}

/// What a runtime's processors did that says where woken ULTs went (`concdict`, `concsll` side
/// rows, per request): summed over the processors.
#[derive(Clone, Copy, Debug, Default)]
struct WakeCounts {
    /// Soft-pinned ULTs woken to their home on another processor.
    home_goings: u64,
    /// Soft-pinned ULTs kept with the ULT that woke them, away from home.
    partner_stays: u64,
    /// ULTs made ready through a wake-up stack (woken from another processor).
    remote_wakes: u64,
    /// Processors unparked by another thread.
    unparks: u64,
    /// ULTs stolen.
    steals: u64,
}

impl WakeCounts {
    /// The counts of `rt` so far.
    fn of(rt: &elite_rt::Runtime) -> WakeCounts {
        rt.stats().processors.iter().fold(WakeCounts::default(), |c, p| WakeCounts {
            home_goings: c.home_goings + p.home_goings,
            partner_stays: c.partner_stays + p.partner_stays,
            remote_wakes: c.remote_wakes + p.wakeup_drained,
            unparks: c.unparks + p.wakeups,
            steals: c.steals + p.steals_node + p.steals_remote,
        })
    }

    /// The counts since `before`.
    fn since(self, before: &WakeCounts) -> WakeCounts {
        WakeCounts {
            home_goings: self.home_goings - before.home_goings,
            partner_stays: self.partner_stays - before.partner_stays,
            remote_wakes: self.remote_wakes - before.remote_wakes,
            unparks: self.unparks - before.unparks,
            steals: self.steals - before.steals,
        }
    }
}

/// A worker: its requests, each waiting for its reply; returns how many were answered.
fn work(
    served: Served,
    w: usize,
    requests: u64,
    to_server: &elite_rt::sync::mpsc::Sender<Request>,
) -> Result<u64, String> {
    let (reply_to, replies) = elite_rt::sync::mpsc::sync_channel(1);
    let mut answered = 0;
    for (kind, key) in worker_requests(served, w, requests) {
        let request = match kind {
            0 => Request::Write(key, reply_to.clone()),
            1 => Request::Read(key, reply_to.clone()),
            _ => Request::Size(reply_to.clone()),
        };
        to_server.send(request).map_err(|_| "the server is gone".to_string())?;
        let reply = replies.recv().map_err(|_| "the server dropped a reply".to_string())?;
        if served == Served::Dict && kind == 1 && reply != u64::MAX && reply != value_of(key) {
            return Err(format!("read of key {key} returned {reply}, not {}", value_of(key)));
        }
        answered += 1;
    }
    Ok(answered)
}

/// The server: answers requests until every worker is gone; returns the checksum of the final
/// contents.
fn serve(served: Served, inbox: elite_rt::sync::mpsc::Receiver<Request>) -> Result<u64, String> {
    let mut dict: HashMap<u64, u64> = HashMap::new();
    let mut list = SortedList::default();
    for request in inbox.iter() {
        let (reply, to) = match request {
            Request::Write(key, to) => {
                match served {
                    Served::Dict => {
                        dict.insert(key, value_of(key));
                    }
                    Served::SortedList => list.insert(key),
                }
                (0, to)
            }
            Request::Read(key, to) => match served {
                Served::Dict => (dict.get(&key).copied().unwrap_or(u64::MAX), to),
                Served::SortedList => (u64::from(list.contains(key)), to),
            },
            Request::Size(to) => (list.len, to),
        };
        // A worker that is gone no longer needs its reply.
        let _ = to.send(reply);
    }
    match served {
        Served::Dict => Ok(dict.iter().fold(0u64, |sum, (&k, &v)| sum.wrapping_add(k ^ v))),
        Served::SortedList => match list.checksum() {
            (sum, true) => Ok(sum),
            (_, false) => Err("the sorted list is out of order".to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_merge_sort_sorts_and_hashes_like_sort_unstable() {
        let input = stress_array(3 * SORT_LEAF + 17, 3);
        let mut expected = input.clone();
        expected.sort_unstable();
        let mut data = input.clone();
        let mut buf = vec![0; data.len()];
        let n = data.len();
        merge_sort(&RayonFork, &mut data, &mut buf, 0, n);
        assert_eq!(data, expected);
        assert_eq!(sorted_hash(&data), sorted_hash(&expected));
    }

    #[test]
    fn every_build_of_the_stress_pass_computes_the_same_answer() {
        // Lengths that leave remainders for every vector width.
        for len in [0, 1, 7, 8, 15, 16, 17, 1000, 4099] {
            let a = stress_array(len, 9);
            let mut sum = 0u32;
            let mut prod = 1u32;
            for &v in &a {
                sum = sum.wrapping_add(v);
                prod = prod.wrapping_mul(v | 1);
            }
            let expected = (u64::from(sum) << 32) | u64::from(prod);
            assert_eq!(stress_pass_portable(&a), expected, "portable, {len} words");
            assert_eq!(stress_pass(&a), expected, "the CPU's widest build, {len} words");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above).
                assert_eq!(unsafe { stress_pass_avx2(&a) }, expected, "AVX2, {len} words");
            }
        }
    }

    #[test]
    fn the_product_answer_matches_its_closed_form() {
        let n = 32;
        let m = Matrices { n, block: 8, a: int_matrix(n, 1), b: int_matrix(n, 2) };
        let mut c = vec![0.0; n * n];
        for ti in 0..m.tiles() {
            for tj in 0..m.tiles() {
                // SAFETY: one tile at a time, on this thread; `c` is n*n long.
                unsafe { m.tile(ti, tj, Out(c.as_mut_ptr())) };
            }
        }
        assert_eq!(product_answer(&c, n), expected_product_answer(&m.a, &m.b, n));
        c[5] += 1.0;
        assert_ne!(product_answer(&c, n), expected_product_answer(&m.a, &m.b, n));
    }

    #[test]
    fn block_sizes_follow_the_private_cache() {
        assert_eq!(matmul_block(512 << 10, 1024), 64);
        assert_eq!(matmul_block(1 << 20, 1024), 128);
        assert_eq!(matmul_block(2 << 20, 1024), 128);
        assert_eq!(matmul_block(1 << 20, 64), 64);
        assert_eq!(stress_array_bytes(512 << 10), 384 << 10);
    }

    #[test]
    fn the_reload_ratio_compares_two_positive_times() {
        let arrays = [stress_array(4096, 1), stress_array(4096, 2)];
        let ratio = reload_ratio(&arrays);
        assert!(ratio.is_finite() && ratio > 0.0, "{ratio}");
    }

    #[test]
    fn placements_split_the_arrays_as_named() {
        let mut rng = XorShift::new(1);
        let on =
            |s: Stress, rng: &mut XorShift| -> Vec<Where> { (0..16).map(|i| s.place(i, 2, rng)).collect() };
        // Best: array 0 (even ULTs) on processor 0, array 1 on processor 1.
        let best = on(Stress::Best, &mut rng);
        assert!(best.iter().enumerate().all(|(i, w)| *w == Where::Processor(i % 2)));
        // Worst: each processor gets as many ULTs of each array.
        let worst = on(Stress::Worst, &mut rng);
        for p in 0..2 {
            for array in 0..2 {
                let n = worst
                    .iter()
                    .enumerate()
                    .filter(|(i, w)| i % 2 == array && **w == Where::Processor(p))
                    .count();
                assert_eq!(n, 4);
            }
        }
        assert!(on(Stress::Ignorant, &mut rng).iter().all(|w| *w == Where::Anywhere));
    }

    #[test]
    fn the_served_answers_do_not_depend_on_the_interleaving() {
        for served in [Served::Dict, Served::SortedList] {
            let rt = elite_rt::Runtime::builder().processors(2).build().expect("runtime");
            let sample = rt.block_on(|| {
                let (to_server, inbox) = elite_rt::sync::mpsc::channel::<Request>();
                let server = elite_rt::spawn(move || serve(served, inbox));
                let workers: Vec<_> = (0..SERVED_WORKERS)
                    .map(|w| {
                        let to_server = to_server.clone();
                        elite_rt::spawn(move || work(served, w, 50, &to_server))
                    })
                    .collect();
                drop(to_server);
                let count: u64 = workers.into_iter().map(|h| h.join().unwrap().unwrap()).sum();
                count.wrapping_add(server.join().unwrap().unwrap())
            });
            assert_eq!(sample, served_expected(served, 50), "{}", served.name());
        }
    }

    #[test]
    fn the_sorted_list_keeps_its_order() {
        let mut list = SortedList::default();
        for v in [5, 1, 9, 1, 7] {
            list.insert(v);
        }
        assert!(list.contains(7) && !list.contains(6));
        assert_eq!(list.checksum(), (5 + 5 + 1 + 9 + 1 + 7, true));
    }
}
