//! Per-message software cost, without a peer: a rank sends one u64 to itself and receives it,
//! n times, raw MPI (MPI_Isend + MPI_Recv on the main thread) against a ULT (World::isend +
//! World::recv). Prints ns per message, median of 5 rounds. Loopback only, from this directory:
//!
//! ```sh
//! export UCX_TLS=self,sm UCX_NET_DEVICES=lo HWLOC_COMPONENTS=-gl HYDRA_IFACE=lo
//! cargo build --release --example self_ping && mpiexec -n 1 target/release/examples/self_ping
//! ```
//!
//! Arguments: `[N] [raw|ult|both] [ROUNDS]` (default 200000 both 6; the first round is a warm-up
//! unless there is only one; `--help` lists them). With one mode and one round it is the probe counted under callgrind
//! (instructions per message: the difference of two runs' totals over the difference of their N):
//!
//! ```sh
//! mpiexec -n 1 valgrind --tool=callgrind target/release/examples/self_ping 20000 ult 1
//! ```
use elite_mpi::mpi::traits::{Communicator, Destination, Source};
use std::process::ExitCode;
use std::time::Instant;

/// The command line, as clap parses it: three optional positional values, each checked.
fn command() -> clap::Command {
    use clap::builder::PossibleValuesParser;
    use clap::{value_parser, Arg};
    clap::Command::new("self_ping")
        .about("Per-message software cost: a rank sends one u64 to itself, raw MPI against a ULT")
        .arg(
            Arg::new("N")
                .help("messages per round")
                .default_value("200000")
                .value_parser(value_parser!(u64).range(1..=1 << 40)),
        )
        .arg(
            Arg::new("MODE")
                .help("which paths to time")
                .default_value("both")
                .value_parser(PossibleValuesParser::new(["raw", "ult", "both"])),
        )
        .arg(
            Arg::new("ROUNDS")
                .help("rounds per path; the first is a warm-up unless there is only one")
                .default_value("6")
                .value_parser(value_parser!(u64).range(1..=1000)),
        )
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> ExitCode {
    let m = match command().try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            // The help (exit 0), or what was wrong with which value and the usage line (exit 2).
            let _ = e.print();
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    let n = *m.get_one::<u64>("N").expect("a default");
    let rounds = *m.get_one::<u64>("ROUNDS").expect("a default") as usize;
    let (do_raw, do_ult) = match m.get_one::<String>("MODE").map(String::as_str) {
        Some("raw") => (true, false),
        Some("ult") => (false, true),
        _ => (true, true),
    };
    let mpi = match elite_mpi::init(elite_rt::Runtime::builder().processors(1)) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("self_ping: elite_mpi::init: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (mut raw, mut ult) = (vec![0.0], vec![0.0]);
    for _ in 0..rounds {
        if !do_raw {
            break;
        }
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
    }
    for _ in 0..rounds {
        if !do_ult {
            break;
        }
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
    // The first measured round is a warm-up when there are several.
    for v in [&mut raw, &mut ult] {
        v.remove(0);
        if v.len() > 1 {
            v.remove(0);
        }
    }
    let (r, u) = (median(raw), median(ult));
    println!("self-ping: raw MPI {r:.0} ns, elite-mpi ULT {u:.0} ns per message (ratio {:.2})", u / r);
    ExitCode::SUCCESS
}
