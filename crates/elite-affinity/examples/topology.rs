//! Prints the topology of this machine as `Topology::detect` (and, with `--features hwloc`, hwloc)
//! sees it, or of a synthetic spec given as the argument:
//!
//! ```text
//! cargo run -p elite-affinity --example topology
//! cargo run -p elite-affinity --example topology -- "2 nodes x 2 cores, 2 MiB L2 per core"
//! ```

use elite_affinity::Topology;

fn main() {
    let topology = match std::env::args().nth(1) {
        Some(spec) => match Topology::synthetic(&spec) {
            Ok(topology) => topology,
            Err(err) => {
                eprintln!("{err}");
                std::process::exit(2);
            }
        },
        None => Topology::detect(),
    };
    println!("{topology:#}");
    #[cfg(feature = "hwloc")]
    match Topology::detect_hwloc() {
        Ok(hwloc) => println!("through hwloc:\n{hwloc:#}"),
        Err(err) => println!("{err}"),
    }
    for p in topology.processors() {
        println!(
            "  processor {} (CPU {}, core {}, node {}): steals from {:?}",
            p.index,
            p.cpu,
            p.core,
            p.node,
            topology.distance_groups(p.index)
        );
    }
}
