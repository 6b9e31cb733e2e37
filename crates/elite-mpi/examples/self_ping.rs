//! Per-message software cost, without a peer: a rank sends one u64 to itself and receives it,
//! n times, raw MPI (MPI_Isend + MPI_Recv on the main thread) against a ULT (World::isend +
//! World::recv). Prints ns per message, median of 5 rounds. Loopback only, from this directory:
//!
//! ```sh
//! export UCX_TLS=self,sm UCX_NET_DEVICES=lo HWLOC_COMPONENTS=-gl HYDRA_IFACE=lo
//! cargo build --release --example self_ping && mpiexec -n 1 target/release/examples/self_ping
//! ```
use elite_mpi::mpi::traits::{Communicator, Destination, Source};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let mpi = elite_mpi::init(elite_rt::Runtime::builder().processors(1)).unwrap();
    let (mut raw, mut ult) = (vec![], vec![]);
    for _ in 0..6 {
        let world = mpi.universe().world();
        let me = world.this_process();
        let t0 = Instant::now();
        for i in 0..n {
            elite_mpi::mpi::request::scope(|scope| {
                let r = me.immediate_send(scope, &i);
                let (v, _) = me.receive::<u64>();
                r.wait();
                assert_eq!(v, i);
            });
        }
        raw.push(t0.elapsed().as_nanos() as f64 / n as f64);
        let w = mpi.world();
        ult.push(mpi.block_on(move || {
            let t0 = Instant::now();
            for i in 0..n {
                let s = w.isend(vec![i], 0, 3).unwrap();
                let (v, _) = w.recv::<u64>(0, 3).unwrap();
                s.wait().unwrap();
                assert_eq!(v, i);
            }
            t0.elapsed().as_nanos() as f64 / n as f64
        }));
    }
    raw.remove(0);
    ult.remove(0);
    let (r, u) = (median(raw), median(ult));
    println!("self-ping: raw MPI {r:.0} ns, elite-mpi ULT {u:.0} ns per message (ratio {:.2})", u / r);
}
