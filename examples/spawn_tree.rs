//! A divide-and-conquer sum on ULTs: every node of a binary tree is a ULT that spawns its left
//! half, computes its right half itself and joins. Prints the result and the runtime's counters.
//!
//! ```sh
//! cargo run --release --example spawn_tree -- 20    # depth of the tree (default 16)
//! ```

use std::time::Instant;

/// Sums `lo..hi`, splitting into ULTs until a range is `leaf` long.
fn sum(lo: u64, hi: u64, leaf: u64) -> u64 {
    if hi - lo <= leaf {
        return (lo..hi).sum();
    }
    let mid = lo + (hi - lo) / 2;
    let left = elite_rt::spawn(move || sum(lo, mid, leaf));
    let right = sum(mid, hi, leaf);
    left.join().expect("a leaf ULT panicked") + right
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let depth: u32 = match std::env::args().nth(1) {
        Some(arg) => arg.parse().map_err(|e| format!("depth must be a number 1..=24, got {arg:?}: {e}"))?,
        None => 16,
    };
    if !(1..=24).contains(&depth) {
        return Err(format!("depth must be 1..=24, got {depth}").into());
    }
    let rt = elite_rt::Runtime::builder().build()?;
    let leaf = 1_000u64;
    let n = leaf << depth;
    let start = Instant::now();
    let total = rt.block_on(move || sum(0, n, leaf));
    let took = start.elapsed();
    assert_eq!(total, n * (n - 1) / 2, "wrong sum");
    println!(
        "sum of 0..{n} = {total} with {} ULTs on {} processors in {took:?}",
        (1u64 << depth) - 1,
        rt.processors()
    );
    println!("{}", rt.stats());
    Ok(())
}
