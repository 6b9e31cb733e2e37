//! Soak: the mixed load of the stress tests (`common::load`), round after round on one runtime
//! of two nodes of two processors, for `ELITE_SOAK_MINUTES` minutes (a number, fractions allowed;
//! default: 200 rounds, about a second), checking that memory stays flat once warmed up:
//! resident memory (`/proc/self/statm`), kernel mappings (`/proc/self/maps`: each guarded stack
//! is two) and the TCBs the runtime allocated (its pools stay bounded and every TCB is reused).
//! The warm-up is the first fifth of a timed run (at least 5 rounds), or the first 100 rounds of
//! the default run: the blocking calls of the load move ULTs between processors, so the bounded
//! stack pools fill over tens of rounds before the mappings settle. Alone in its test binary, so
//! that no other test's memory counts.
//!
//! It found two ways memory grew for ever on a multi-node topology, both from ULTs spawned on one
//! node and ending on another: TCBs piled up in the second node's pool while the first allocated
//! fresh ones (now a processor refills from another node before allocating), and every spawn from
//! outside the runtime (`block_on`'s root) allocated a fresh chunk of 64 TCBs when node 0's pool
//! was empty (now it takes from any node first).

mod common;

use common::hang_guard;
use common::load::{counting_builder, mixed_round, Load};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Resident memory of this process, in bytes.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("resident pages");
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// Memory mappings of this process.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps").lines().count()
}

/// TCBs allocated fresh so far (never freed while the runtime lives: pooled).
fn fresh_tcbs(rt: &elite_rt::Runtime) -> u64 {
    rt.stats().processors.iter().map(|p| p.tcb_fresh).sum()
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    round: usize,
    resident: u64,
    mappings: usize,
    tcbs: u64,
}

#[test]
#[cfg_attr(feature = "sanitizer", ignore = "AddressSanitizer's quarantine keeps freed memory resident")]
fn memory_stays_flat_under_a_long_mixed_load() {
    let minutes: Option<f64> = std::env::var("ELITE_SOAK_MINUTES").ok().map(|v| {
        v.trim().parse().unwrap_or_else(|_| panic!("ELITE_SOAK_MINUTES={v:?} is not a number of minutes"))
    });
    let limit = minutes.map_or(300, |m| (m * 60.0) as u64 + 300);
    hang_guard(limit, "soak", move || {
        let reports = Arc::new(AtomicUsize::new(0));
        // Small stack pools (at most 4 x 16 + 2 x 64 stacks kept), so that they fill during the
        // warm-up: with the defaults (64 per processor, 1024 per node) a steady flow of ULTs that
        // start on one node and end on the other fills the second node's pool for minutes before
        // it reaches its bound, which would look like growth here.
        let rt = counting_builder(&reports)
            .topology("2x2")
            .stack_pool_limit(16)
            .node_stack_pool_limit(64)
            // The load makes 4 blocking calls at once: with at most 4 spare threads, the threads
            // (a stack, a guard and an alternate signal stack each) are all there after a few
            // rounds instead of appearing whenever calls happen to overlap more than before.
            .max_spare_threads(4)
            // Chaos scatters the ULTs at random, so the bounded pools fill towards their bounds
            // for far longer than any warm-up (+94 mappings after 100 rounds in one run): the
            // stress tests run the same load under chaos; this one measures a steady state.
            .no_chaos()
            .build()
            .expect("runtime");
        let t0 = Instant::now();
        let deadline = minutes.map(|m| t0 + Duration::from_secs_f64(m * 60.0));
        let done = |round: usize| match deadline {
            Some(d) => Instant::now() >= d && round >= 10,
            None => round >= 200,
        };
        let warm_until = |round: usize| match deadline {
            Some(_) => t0.elapsed() < Duration::from_secs_f64(minutes.unwrap_or(0.0) * 12.0) || round < 5,
            None => round < 100,
        };
        let sample =
            |round| Sample { round, resident: resident_bytes(), mappings: mappings(), tcbs: fresh_tcbs(&rt) };
        let mut warm: Option<Sample> = None;
        let mut peak: Option<Sample> = None;
        let mut round = 0;
        while !done(round) {
            mixed_round(&rt, &Load::SMALL, &reports);
            round += 1;
            let s = sample(round);
            match warm {
                None if !warm_until(round) => warm = Some(s),
                None => {}
                Some(_) => {
                    let p = peak.get_or_insert(s);
                    p.resident = p.resident.max(s.resident);
                    p.mappings = p.mappings.max(s.mappings);
                    p.tcbs = p.tcbs.max(s.tcbs);
                    p.round = round;
                }
            }
        }
        let (warm, peak) = (warm.expect("a warm-up"), peak.unwrap_or(warm.expect("a warm-up")));
        eprintln!(
            "soak: {round} rounds in {:.1} s; after warm-up (round {}): resident {} KiB -> peak {} KiB, \
             mappings {} -> {}, fresh TCBs {} -> {}",
            t0.elapsed().as_secs_f64(),
            warm.round,
            warm.resident / 1024,
            peak.resident / 1024,
            warm.mappings,
            peak.mappings,
            warm.tcbs,
            peak.tcbs
        );
        // Flat: within 8 MiB (allocator and kernel slack) of the warm figure, whatever the length.
        assert!(
            peak.resident <= warm.resident + (8 << 20),
            "resident memory grew after warm-up: {warm:?} -> {peak:?}"
        );
        // Mappings: the bounded pools can still be filling after the warm-up (which processor
        // frees a stack decides which pool takes it), by at most the four local pools' 64 stacks,
        // two mappings each; a leak would pass that within seconds. (A bound of 64, one pool's
        // worth, was seen exceeded on a loaded machine.)
        assert!(peak.mappings <= warm.mappings + 128, "mappings grew after warm-up: {warm:?} -> {peak:?}");
        // Every TCB is reused: a round needs no more than the ones the warm-up allocated, save for
        // one chunk (64) when a round happens to have more ULTs alive at once than any before.
        assert!(peak.tcbs <= warm.tcbs + 64, "TCBs keep being allocated: {warm:?} -> {peak:?}");
    });
}
