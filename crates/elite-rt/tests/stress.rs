//! Bounded mixed-load stress: spawn and join trees, a contended mutex, a channel pipeline,
//! condvar turn-taking, barrier phases, sleeps, yields, joined and detached panics, all at once,
//! on one and two processors, on synthetic multi-node topologies and on work-stealing places;
//! every part checks its invariant (sums, counts, exactly-once delivery; see `common::load`).
//! `ELITE_STRESS_ROUNDS` sets the rounds per configuration (default 20).

mod common;

use common::hang_guard;
use common::load::{counting_builder, mixed_round, Load};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

fn rounds() -> usize {
    std::env::var("ELITE_STRESS_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20)
}

/// Runs the mixed load `rounds()` times on the runtime `configure` builds.
fn stress(what: &'static str, configure: fn(elite_rt::RuntimeBuilder) -> elite_rt::RuntimeBuilder) {
    hang_guard(300, what, move || {
        let reports = Arc::new(AtomicUsize::new(0));
        let rt = configure(counting_builder(&reports)).build().expect("runtime");
        for _ in 0..rounds() {
            mixed_round(&rt, &Load::SMALL, &reports);
        }
    });
}

#[test]
fn mixed_load_on_one_processor() {
    stress("mixed load, 1 processor", |b| b.processors(1));
}

#[test]
fn mixed_load_on_two_processors() {
    stress("mixed load, 2 processors", |b| b.processors(2));
}

#[test]
fn mixed_load_on_two_nodes_of_two() {
    stress("mixed load, 2x2", |b| b.topology("2x2"));
}

#[test]
fn mixed_load_on_two_nodes_of_two_written_out() {
    // Small start-queues, so that spawns overflow to the node and global levels.
    stress("mixed load, 2 nodes x 2 processors, small queues", |b| {
        b.topology("2 nodes x 2 processors").start_queue_limit(4).node_start_queue_limit(8)
    });
}

#[test]
fn mixed_load_under_the_chaos_mode() {
    stress("mixed load, 2 processors, chaos", |b| b.processors(2).chaos(0xC4A05));
}

#[test]
fn mixed_load_on_work_stealing_places() {
    // Two places sharing a runqueue per L3, of two processors each: thieves of either take
    // from the other's shared queue through any of its processors (`policy::places`, "Victims").
    stress("mixed load, 2 places of 2 sharing an L3 queue", |b| {
        b.topology("1 node x 2 cores x 2 threads, 512 KiB L2 per processor, 8 MiB L3 per core")
            .place_level(elite_rt::PlaceKind::Cache { level: 3 })
    });
}
