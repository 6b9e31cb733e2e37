//! Round trips of one `u64` between ranks 0 and 1, three ways:
//!
//! - `mpi`: raw MPI (rsmpi's blocking `send`/`receive`) on each rank's main OS thread;
//! - `elite-mpi`: a ULT on each rank, through `World::send`/`World::recv`;
//! - `elite-mpi/overlap`: the same while `--workers` ULTs per processor compute in chunks (a
//!   chunk, then `yield_now`) on every processor of both ranks. Its side rows are the computing
//!   ULTs' rate (chunks per second, both ranks together) with the messages, and, per round, that
//!   rate over their rate in a phase of the same length without messages (`ratio_to_no_messages`).
//!
//! A derived row `ratio_to_mpi` gives, per round, `elite-mpi`'s round trip over `mpi`'s.
//!
//! ```sh
//! export UCX_TLS=self,sm UCX_NET_DEVICES=lo HWLOC_COMPONENTS=-gl HYDRA_IFACE=lo   # loopback only
//! cargo run --release --example mpi_ping_pong -- --json mpi.json
//! ```
//!
//! Started without `mpiexec`, the example starts `mpiexec -n 2` on itself with the loopback
//! settings above. Only rank 0 prints and writes the JSON document (suite `mpi`, bench
//! `mpi_ping_pong`; `docs/bench-json.md`). The exit status is 1 when an answer was wrong.

use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the command line asked for.
#[derive(Clone, Debug)]
struct Args {
    round_trips: u64,
    runs: usize,
    processors: usize,
    workers: usize,
    chunk: u64,
    phase: Duration,
    json: Option<String>,
}

/// The command line, as clap parses it: each value is checked by its parser, so an error names
/// the flag, the value and what is allowed.
fn command() -> clap::Command {
    use clap::builder::NonEmptyStringValueParser;
    use clap::{value_parser, Arg};
    let count = |name: &'static str,
                 value_name: &'static str,
                 default: &'static str,
                 max: u64,
                 help: &'static str| {
        Arg::new(name)
            .long(name)
            .value_name(value_name)
            .help(help)
            .default_value(default)
            .value_parser(value_parser!(u64).range(1..=max))
    };
    clap::Command::new("mpi_ping_pong")
        .about("Round trips of one u64 between 2 ranks: raw MPI, a ULT, and a ULT beside computing ULTs")
        .args_override_self(true)
        .arg(count("round-trips", "N", "20000", 1 << 40, "round trips per run of `mpi` and `elite-mpi`"))
        .arg(count("runs", "N", "5", 1000, "measured rounds after one warm-up round"))
        .arg(count(
            "processors",
            "N",
            "1",
            elite_rt::MAX_PROCESSORS as u64,
            "processors of each rank's runtime",
        ))
        .arg(count("workers", "N", "2", 1 << 16, "computing ULTs per processor in `elite-mpi/overlap`"))
        .arg(count("chunk", "N", "20000", 1 << 40, "iterations of a computing ULT between yields"))
        .arg(count(
            "phase-ms",
            "MS",
            "300",
            600_000,
            "length of each overlap phase, with and without messages",
        ))
        .arg(
            Arg::new("json")
                .long("json")
                .value_name("FILE|-")
                .help("write the JSON document (rank 0; `-`: stdout)")
                .value_parser(NonEmptyStringValueParser::new()),
        )
}

/// Parses `args` (without the program's name); `Err` is clap's error, which prints itself with
/// the usage line (or the help, for `--help`) and knows its exit status.
fn parse(args: &[String]) -> Result<Args, clap::Error> {
    let m = command().no_binary_name(true).try_get_matches_from(args)?;
    let n = |name: &str| *m.get_one::<u64>(name).expect("every count has a default");
    Ok(Args {
        round_trips: n("round-trips"),
        runs: n("runs") as usize,
        processors: n("processors") as usize,
        workers: n("workers") as usize,
        chunk: n("chunk"),
        phase: Duration::from_millis(n("phase-ms")),
        json: m.get_one::<String>("json").cloned(),
    })
}

/// Starts `mpiexec -n 2` on this executable, loopback only.
fn launch(args: &[String]) -> ExitCode {
    let exe = std::env::current_exe().expect("the example's path");
    let status = std::process::Command::new("mpiexec")
        .args(["-n", "2"])
        .arg(exe)
        .args(args)
        .envs([
            ("UCX_TLS", "self,sm"),
            ("UCX_NET_DEVICES", "lo"),
            ("HWLOC_COMPONENTS", "-gl"),
            ("HYDRA_IFACE", "lo"),
        ])
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("could not run mpiexec ({e}); install MPICH (see crates/elite-mpi/README.md)");
            ExitCode::from(2)
        }
    }
}

/// One chunk of computing: integer mixing the optimiser cannot drop.
fn chunk(iterations: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    for i in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// Raw MPI on the main thread: nanoseconds per round trip on rank 0; `Err` on a wrong answer.
fn raw_round_trips(mpi: &elite_mpi::Mpi, n: u64) -> Result<f64, String> {
    use elite_mpi::mpi::traits::{Communicator, CommunicatorCollectives, Destination, Source};
    let world = mpi.universe().world();
    let rank = world.rank();
    let peer = world.process_at_rank(1 - rank);
    world.barrier();
    let t0 = Instant::now();
    for i in 0..n {
        if rank == 0 {
            peer.send(&i);
            let (back, _) = peer.receive::<u64>();
            if back != i + 1 {
                return Err(format!("wrong answer {back} (expected {})", i + 1));
            }
        } else {
            let (v, _) = peer.receive::<u64>();
            peer.send(&(v + 1));
        }
    }
    Ok(t0.elapsed().as_nanos() as f64 / n as f64)
}

/// Round trips by one ULT per rank for `n` round trips, or, with `until`, until rank 0 has run
/// that long (then a sentinel ends rank 1's loop). Returns ns per round trip and the count.
fn ult_round_trips(world: &elite_mpi::World, n: u64, until: Option<Duration>) -> Result<(f64, u64), String> {
    const END: u64 = u64::MAX;
    let rank = world.rank();
    let peer = 1 - rank;
    let e = |e: elite_mpi::Error| e.to_string();
    world.barrier().map_err(e)?;
    let t0 = Instant::now();
    let mut done = 0;
    if rank == 0 {
        let mut i = 0;
        loop {
            let stop = match until {
                Some(d) => t0.elapsed() >= d,
                None => i == n,
            };
            if stop {
                world.send(&END, peer, 1).map_err(e)?;
                break;
            }
            world.send(&i, peer, 1).map_err(e)?;
            let (back, _) = world.recv::<u64>(peer, 1).map_err(e)?;
            if back != i + 1 {
                return Err(format!("wrong answer {back} (expected {})", i + 1));
            }
            i += 1;
        }
        done = i;
    } else {
        loop {
            let (v, _) = world.recv::<u64>(peer, 1).map_err(e)?;
            if v == END {
                break;
            }
            world.send(&(v + 1), peer, 1).map_err(e)?;
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / done.max(1) as f64;
    Ok((ns, done))
}

/// What one overlap run measured (rank 0's round trip; both ranks' chunks).
struct Overlap {
    rtt_ns: f64,
    rate_alone: f64,
    rate_with: f64,
}

/// Runs computing ULTs for a phase, with or without the ping-pong beside them; returns the
/// chunks both ranks computed per second and, with messages, rank 0's round trip.
fn overlap(world: &elite_mpi::World, a: &Args) -> Result<Overlap, String> {
    let e = |e: elite_mpi::Error| e.to_string();
    let mut rates = [0.0f64; 2];
    let mut rtt_ns = 0.0;
    for (phase, with_messages) in [false, true].into_iter().enumerate() {
        let stop = Arc::new(AtomicBool::new(false));
        let chunks = Arc::new(AtomicU64::new(0));
        world.barrier().map_err(e)?;
        let workers: Vec<_> = (0..a.workers * a.processors)
            .map(|w| {
                let (stop, chunks, n) = (stop.clone(), chunks.clone(), a.chunk);
                elite_rt::spawn(move || {
                    let mut seed = w as u64;
                    while !stop.load(Ordering::Relaxed) {
                        seed = chunk(n, seed);
                        chunks.fetch_add(1, Ordering::Relaxed);
                        elite_rt::yield_now();
                    }
                })
            })
            .collect();
        let t0 = Instant::now();
        if with_messages {
            let (ns, _) = ult_round_trips(world, 0, Some(a.phase))?;
            rtt_ns = ns;
        } else {
            elite_rt::sleep(a.phase);
        }
        stop.store(true, Ordering::Relaxed);
        let elapsed = t0.elapsed().as_secs_f64();
        for w in workers {
            w.join().map_err(|_| "a computing ULT panicked".to_string())?;
        }
        let mine = chunks.load(Ordering::Relaxed) as f64 / elapsed;
        let mut all = [0.0f64];
        world.all_reduce(&[mine], &mut all, elite_mpi::Op::sum()).map_err(e)?;
        rates[phase] = all[0];
    }
    Ok(Overlap { rtt_ns, rate_alone: rates[0], rate_with: rates[1] })
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (s[s.len() / 2], s[0], s[s.len() - 1])
}

fn row(system: &str, metric: &str, v: &[f64], ok: &Result<(), String>, params: &Value) -> Value {
    let mut r = json!({ "bench": "mpi_ping_pong", "system": system, "metric": metric,
        "runs": v.len(), "ok": ok.is_ok(), "params": params });
    if ok.is_ok() && !v.is_empty() {
        let (median, min, max) = stats(v);
        r["median"] = json!(median);
        r["min"] = json!(min);
        r["max"] = json!(max);
    } else {
        r["median"] = Value::Null;
        r["min"] = Value::Null;
        r["max"] = Value::Null;
        r["error"] = json!(ok.clone().err().unwrap_or_else(|| "no runs".into()));
    }
    r
}

fn machine() -> Value {
    let topology = elite_affinity::Topology::detect();
    let cache = |level: u8| topology.caches_of(0).find(|c| c.level == level).map(|c| c.size);
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == "model name")
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    json!({
        "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "cpu_model": cpu_model,
        // Whether a hardware counter opens (the cache-miss one the runtime would use).
        "pmu": elite_affinity::HardwareSource::open(elite_affinity::CounterEvent::CacheMisses).is_ok(),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string()).unwrap_or_else(|_| "unknown".into()),
        "l2_bytes": cache(2),
        "l3_bytes": cache(3),
    })
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let a = match parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            // The help (exit 0), or what was wrong with which flag and the usage line (exit 2).
            let _ = e.print();
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    if std::env::var_os("PMI_RANK").is_none() {
        return launch(&argv);
    }
    let builder = elite_rt::Runtime::builder().processors(a.processors);
    let mpi = match elite_mpi::init(builder) {
        Ok(m) => m,
        Err(err) => {
            eprintln!("elite_mpi::init: {err}");
            return ExitCode::FAILURE;
        }
    };
    if mpi.size() != 2 {
        eprintln!("mpi_ping_pong runs on 2 ranks, not {}", mpi.size());
        return ExitCode::from(2);
    }
    let rank = mpi.rank();
    let (mut raw, mut ult, mut ratio) = (vec![], vec![], vec![]);
    let (mut ov_rtt, mut ov_rate, mut ov_ratio) = (vec![], vec![], vec![]);
    let (mut ok_raw, mut ok_ult, mut ok_ov) = (Ok(()), Ok(()), Ok(()));
    for round in 0..=a.runs {
        let r = raw_round_trips(&mpi, a.round_trips);
        let (world, n) = (mpi.world(), a.round_trips);
        let u = mpi.block_on(move || ult_round_trips(&world, n, None).map(|(ns, _)| ns));
        let (world, a2) = (mpi.world(), a.clone());
        let o = mpi.block_on(move || overlap(&world, &a2));
        if round == 0 {
            continue; // warm-up
        }
        if let (Ok(r), Ok(u)) = (&r, &u) {
            raw.push(*r);
            ult.push(*u);
            ratio.push(u / r);
        }
        if let Err(e) = r {
            ok_raw = Err(e);
        }
        if let Err(e) = u {
            ok_ult = Err(e);
        }
        match o {
            Ok(o) => {
                ov_rtt.push(o.rtt_ns);
                ov_rate.push(o.rate_with);
                ov_ratio.push(o.rate_with / o.rate_alone);
            }
            Err(e) => ok_ov = Err(e),
        }
    }
    if rank != 0 {
        return ExitCode::SUCCESS;
    }
    let params = json!({ "processors": a.processors, "ranks": 2, "round_trips": a.round_trips });
    let ov_params = json!({ "processors": a.processors, "ranks": 2, "workers": a.workers,
        "chunk": a.chunk, "phase_ms": a.phase.as_millis() as u64 });
    let both = ok_raw.clone().and(ok_ult.clone());
    let results = vec![
        row("mpi", "ns_per_op", &raw, &ok_raw, &params),
        row("elite-mpi", "ns_per_op", &ult, &ok_ult, &params),
        row("elite-mpi", "ratio_to_mpi", &ratio, &both, &params),
        row("elite-mpi/overlap", "ns_per_op", &ov_rtt, &ok_ov, &ov_params),
        row("elite-mpi/overlap", "ops_per_sec", &ov_rate, &ok_ov, &ov_params),
        row("elite-mpi/overlap", "ratio_to_no_messages", &ov_ratio, &ok_ov, &ov_params),
    ];
    println!("mpi_ping_pong: 2 ranks x {} processor(s), medians of {} runs", a.processors, a.runs);
    for r in &results {
        let fmt = |k: &str| r[k].as_f64().map_or("-".to_string(), |v| format!("{v:.3}"));
        println!(
            "  {:<18} {:<21} median {:>12}  min {:>12}  max {:>12}{}",
            r["system"].as_str().unwrap(),
            r["metric"].as_str().unwrap(),
            fmt("median"),
            fmt("min"),
            fmt("max"),
            r.get("error").map_or(String::new(), |e| format!("  FAILED: {e}"))
        );
    }
    if let Some(path) = &a.json {
        let doc = json!({ "suite": "mpi", "machine": machine(), "results": results });
        let text = serde_json::to_string_pretty(&doc).expect("a JSON value serialises");
        if path == "-" {
            println!("{text}");
        } else if let Err(e) = std::fs::write(path, text) {
            eprintln!("could not write {path}: {e}");
            return ExitCode::FAILURE;
        }
    }
    if ok_raw.is_ok() && ok_ult.is_ok() && ok_ov.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
