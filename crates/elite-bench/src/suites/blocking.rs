//! Suite `blocking`: what [`elite_rt::blocking`] costs.
//!
//! | bench | what one operation is | processors | systems |
//! | --- | --- | --- | --- |
//! | `blocking_call` | one call of a function that returns at once | 1, 2 | elite, elite/isolated, std-thread |
//! | `blocking_sleep` | one call that sleeps 1 ms | 1, 2 | elite, std-thread |
//!
//! - `blocking_call`, `elite`: the root ULT calls `blocking(move || i)` back to back. Each call
//!   hands the processor to the runtime's spare thread and (the call being over before that
//!   thread has woken up) takes it back; the spare, unparked by every call, seldom gets to sleep
//!   between two of them. `elite/isolated`: each call comes after 200 µs of busy work on the
//!   processor, long enough for the spare to go back to sleep, and only the call is timed: the
//!   cost of a call that must wake the spare (a futex wake-up), sometimes losing the processor to
//!   it (the ULT then goes on on the spare's thread). `std-thread`: `std::thread::spawn(move ||
//!   i).join()`, what a program without spare threads would do to keep its thread free.
//!   Answer: the sum of the returned values.
//! - `blocking_sleep`: the call is `std::thread::sleep(1 ms)`; `std-thread` sleeps 1 ms on a plain
//!   thread. The difference is what getting back to a processor costs after a call that really
//!   slept (the spare took the processor over, so the ULT comes back through its wake-up stack).
//!   Answer: the number of calls.
//!
//! No targets: the issue that introduced `blocking` asked for these figures in the docs.

use std::time::{Duration, Instant};

use super::Context;
use crate::harness::{warm_then_time, Bench, Contender, Metric, Params, Sample};
use crate::workloads::{elite_runtime, std_spawn_join, sum_below};

/// How much work each system gets.
struct Sizes {
    /// blocking_call: back-to-back calls per pass.
    calls: u64,
    /// blocking_call: isolated calls per pass (each after 200 µs of busy work).
    isolated: u64,
    /// blocking_call: thread spawns per pass (std-thread).
    threads: u64,
    /// blocking_sleep: 1 ms calls per pass.
    sleeps: u64,
}

impl Sizes {
    const FULL: Sizes = Sizes { calls: 200_000, isolated: 500, threads: 2_000, sleeps: 100 };
    const QUICK: Sizes = Sizes { calls: 20_000, isolated: 100, threads: 200, sleeps: 20 };
}

/// The busy work before each isolated call.
const ISOLATION: Duration = Duration::from_micros(200);

/// The sleep of `blocking_sleep`.
const SLEEP: Duration = Duration::from_millis(1);

/// The benches of the suite.
pub fn benches(ctx: &mut Context) -> Vec<Bench> {
    let sizes = if ctx.quick { &Sizes::QUICK } else { &Sizes::FULL };
    let procs = ctx.processor_counts(None);
    let params = |processors: usize, n: u64| Params::new(processors).with("n", n);

    let mut call = Vec::new();
    for &p in &procs {
        let n = sizes.calls;
        call.push(Contender::new("elite", params(p, n), sum_below(n), move || elite_calls(p, n)));
    }
    for &p in &procs {
        let n = sizes.isolated;
        call.push(Contender::new("elite/isolated", params(p, n), sum_below(n), move || elite_isolated(p, n)));
    }
    let n = sizes.threads;
    call.push(Contender::new("std-thread", params(1, n), sum_below(n), move || std_spawn_join(n)));

    let mut sleep = Vec::new();
    for &p in &procs {
        let n = sizes.sleeps;
        sleep.push(Contender::new("elite", params(p, n), n, move || elite_sleeps(p, n)));
    }
    let n = sizes.sleeps;
    sleep.push(Contender::new("std-thread", params(1, n), n, move || std_sleeps(n)));

    vec![
        Bench { name: "blocking_call", metric: Metric::NsPerOp, contenders: call, targets: Vec::new() },
        Bench { name: "blocking_sleep", metric: Metric::NsPerOp, contenders: sleep, targets: Vec::new() },
    ]
}

/// Checks that every call of the passes counted as one, and that none is left in flight (the
/// count drops an instant after the last call's ULT is back: waited for, up to a second).
fn check_stats(rt: &elite_rt::Runtime, calls: u64) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let b = rt.stats().blocking;
        if b.calls == calls && b.in_flight == 0 {
            return Ok(());
        }
        if b.calls != calls || Instant::now() > deadline {
            return Err(format!("expected {calls} blocking calls, none in flight: {b:?}"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// elite `blocking_call`: `blocking(move || i)` for i in 0..n, back to back.
fn elite_calls(processors: usize, n: u64) -> Result<Sample, String> {
    let rt = elite_runtime(processors)?;
    let sample = warm_then_time(n, || {
        rt.block_on(move || {
            let start = Instant::now();
            let mut sum = 0u64;
            for i in 0..n {
                sum += elite_rt::blocking(move || i);
            }
            Ok((start.elapsed(), sum))
        })
    })?;
    check_stats(&rt, 2 * n)?;
    Ok(sample)
}

/// elite/isolated `blocking_call`: each call after `ISOLATION` of busy work; only calls timed.
fn elite_isolated(processors: usize, n: u64) -> Result<Sample, String> {
    let rt = elite_runtime(processors)?;
    let sample = warm_then_time(n, || {
        rt.block_on(move || {
            let mut spent = Duration::ZERO;
            let mut sum = 0u64;
            for i in 0..n {
                let busy = Instant::now();
                while busy.elapsed() < ISOLATION {
                    std::hint::spin_loop();
                }
                let start = Instant::now();
                sum += elite_rt::blocking(move || i);
                spent += start.elapsed();
            }
            Ok((spent, sum))
        })
    })?;
    check_stats(&rt, 2 * n)?;
    Ok(sample)
}

/// elite `blocking_sleep`: `blocking(|| sleep(1 ms))` n times.
fn elite_sleeps(processors: usize, n: u64) -> Result<Sample, String> {
    let rt = elite_runtime(processors)?;
    let sample = warm_then_time(n, || {
        rt.block_on(move || {
            let start = Instant::now();
            let mut count = 0u64;
            for _ in 0..n {
                elite_rt::blocking(|| std::thread::sleep(SLEEP));
                count += 1;
            }
            Ok((start.elapsed(), count))
        })
    })?;
    check_stats(&rt, 2 * n)?;
    Ok(sample)
}

/// std-thread `blocking_sleep`: the same sleeps on a plain thread.
fn std_sleeps(n: u64) -> Result<Sample, String> {
    warm_then_time(n, || {
        let start = Instant::now();
        let mut count = 0u64;
        for _ in 0..n {
            std::thread::sleep(SLEEP);
            count += 1;
        }
        Ok((start.elapsed(), count))
    })
}

/// The probe's command: `elite-bench blocking-probe <op> <n> [--processors N]`.
pub const PROBE_COMMAND: &str = "blocking-probe";

/// `elite-bench blocking-probe <op> <n> [--processors N]`: `n` operations in the root ULT of a
/// runtime of one processor (or `N`), for counting instructions per operation with
/// `valgrind --tool=callgrind` (run it with
/// two values of `n`; the difference of the totals over the difference of `n` leaves start-up and
/// shut-down out). `op`: `yield` (`yield_now`), `spawn_join` (spawn a ULT and join it),
/// `spawn_bulk` (spawn all `n` ULTs, then join them all, as the micro suite's `spawn_bulk` but in
/// one pass of a fresh runtime, no warm-up: the whole process's time, `time elite-bench
/// blocking-probe spawn_bulk 1000000 --processors 2`, is what a program that does that once pays),
/// `ping_pong` (a round trip with a second ULT over two unbounded elite channels),
/// `ping_pong_sync` (the same over two rendezvous channels, `sync_channel(0)`, as the sync
/// suite's `ping_pong`: there every send blocks until the other side takes it), `blocking`
/// (`blocking(move || i)`). Prints `ops=<n> answer=<checked sum>`. With `--processors 2` the
/// operations of `ping_pong` and `ping_pong_sync` still run on one processor (a hand-off keeps
/// the woken ULT beside its waker) while the other idles: what a runtime of more than one
/// processor adds to the path.
pub fn probe_main(args: &[String]) -> std::process::ExitCode {
    let (op, n, processors) = match parse_probe_args(args) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => {
            println!("{}", probe_command().render_help());
            return std::process::ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("elite-bench {PROBE_COMMAND}: {message}\n{PROBE_USAGE}");
            return std::process::ExitCode::from(2);
        }
    };
    let expected = match op {
        ProbeOp::Blocking | ProbeOp::SpawnJoin | ProbeOp::SpawnBulk => sum_below(n),
        ProbeOp::Yield | ProbeOp::PingPong | ProbeOp::PingPongSync => n,
    };
    let rt = match elite_runtime(processors) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("elite-bench: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let answer = match op {
        ProbeOp::Yield => Some(rt.block_on(move || probe_yield(n))),
        ProbeOp::SpawnJoin => rt.block_on(move || probe_spawn_join(n)),
        ProbeOp::SpawnBulk => rt.block_on(move || probe_spawn_bulk(n)),
        ProbeOp::PingPong => rt.block_on(move || probe_ping_pong(n)),
        ProbeOp::PingPongSync => rt.block_on(move || probe_ping_pong_sync(n)),
        ProbeOp::Blocking => Some(rt.block_on(move || probe_blocking(n))),
    };
    match answer {
        Some(a) if a == expected => {
            println!("ops={n} answer={a}");
            std::process::ExitCode::SUCCESS
        }
        Some(a) => {
            eprintln!("elite-bench: wrong answer {a}, expected {expected}");
            std::process::ExitCode::FAILURE
        }
        None => {
            eprintln!("elite-bench: a ULT of the probe panicked");
            std::process::ExitCode::FAILURE
        }
    }
}

const PROBE_USAGE: &str =
    "usage: elite-bench blocking-probe <yield|spawn_join|spawn_bulk|ping_pong|ping_pong_sync|blocking> <n> [--processors N]";

/// The operations of the probe, by name.
pub(crate) const PROBE_OPS: [(&str, ProbeOp); 6] = [
    ("yield", ProbeOp::Yield),
    ("spawn_join", ProbeOp::SpawnJoin),
    ("spawn_bulk", ProbeOp::SpawnBulk),
    ("ping_pong", ProbeOp::PingPong),
    ("ping_pong_sync", ProbeOp::PingPongSync),
    ("blocking", ProbeOp::Blocking),
];

/// An operation the probe repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProbeOp {
    Yield,
    SpawnJoin,
    SpawnBulk,
    PingPong,
    PingPongSync,
    Blocking,
}

/// The probe's command line, as clap parses it.
fn probe_command() -> clap::Command {
    use clap::builder::PossibleValuesParser;
    use clap::Arg;
    clap::Command::new("elite-bench blocking-probe")
        .about("n operations in the root ULT of a runtime of one processor (or N); for counting instructions with callgrind")
        .no_binary_name(true)
        .allow_negative_numbers(true)
        .arg(
            Arg::new("op")
                .value_name("OP")
                .required(true)
                .value_parser(PossibleValuesParser::new(PROBE_OPS.map(|(name, _)| name))),
        )
        .arg(
            Arg::new("n")
                .value_name("N")
                .required(true)
                .value_parser(crate::number_in("a count of operations", 0, u64::MAX))
                .help("how many operations"),
        )
        .arg(crate::processors_arg())
}

/// The probe's arguments: `<op> <n> [--processors N]` (processors 1 unless given); `Ok(None)`
/// for `--help`; an error says which is wrong and what was expected.
pub(crate) fn parse_probe_args(args: &[String]) -> Result<Option<(ProbeOp, u64, usize)>, String> {
    crate::refuse_single_dash(args, "--processors N, --help", true)?;
    let matches = match probe_command().try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => return Ok(None),
        Err(e) => return Err(crate::clap_message(&e)),
    };
    let name = matches.get_one::<String>("op").ok_or("expected an operation and a count")?;
    let op = PROBE_OPS.iter().find(|(known, _)| known == name).map(|&(_, op)| op);
    let processors = matches.get_one::<usize>("processors").copied().unwrap_or(1);
    match (op, matches.get_one::<u64>("n")) {
        (Some(op), Some(&n)) => Ok(Some((op, n, processors))),
        _ => Err("expected an operation and a count".into()),
    }
}

// One function per operation, never inlined: each loop is compiled on its own, whatever else the
// probe does (so a probe built against another version of elite-rt without one of them counts the
// others alike).

#[inline(never)]
fn probe_yield(n: u64) -> u64 {
    let mut count = 0;
    for _ in 0..n {
        elite_rt::yield_now();
        count += 1;
    }
    count
}

#[inline(never)]
fn probe_spawn_join(n: u64) -> Option<u64> {
    let mut sum = 0;
    for i in 0..n {
        sum += elite_rt::spawn(move || i).join().ok()?;
    }
    Some(sum)
}

#[inline(never)]
fn probe_spawn_bulk(n: u64) -> Option<u64> {
    let handles: Vec<_> = (0..n).map(|i| elite_rt::spawn(move || i)).collect();
    let mut sum = 0;
    for handle in handles {
        sum += handle.join().ok()?;
    }
    Some(sum)
}

#[inline(never)]
fn probe_ping_pong(n: u64) -> Option<u64> {
    let (to_echo, echo_in) = elite_rt::sync::mpsc::channel::<u64>();
    let (echo_out, back) = elite_rt::sync::mpsc::channel::<u64>();
    echo_round_trips(
        n,
        (move |v| to_echo.send(v).is_ok(), back),
        (move |v| echo_out.send(v).is_ok(), echo_in),
    )
}

#[inline(never)]
fn probe_ping_pong_sync(n: u64) -> Option<u64> {
    let (to_echo, echo_in) = elite_rt::sync::mpsc::sync_channel::<u64>(0);
    let (echo_out, back) = elite_rt::sync::mpsc::sync_channel::<u64>(0);
    echo_round_trips(
        n,
        (move |v| to_echo.send(v).is_ok(), back),
        (move |v| echo_out.send(v).is_ok(), echo_in),
    )
}

/// `n` round trips of a counter between this ULT and an echo ULT that sends back one more than it
/// gets: `here` sends (a send that reports success) and receives the echo, `echo` receives and
/// sends back. The sum of the increments (`n`), or `None` if a channel closed early.
#[inline(always)]
fn echo_round_trips(
    n: u64,
    here: (impl Fn(u64) -> bool, elite_rt::sync::mpsc::Receiver<u64>),
    echo: (impl Fn(u64) -> bool + Send + 'static, elite_rt::sync::mpsc::Receiver<u64>),
) -> Option<u64> {
    let (send, back) = here;
    let (echo_send, echo_in) = echo;
    let echo = elite_rt::spawn(move || {
        while let Ok(v) = echo_in.recv() {
            if !echo_send(v + 1) {
                break;
            }
        }
    });
    let mut sum = 0;
    for i in 0..n {
        send(i).then_some(())?;
        sum += back.recv().ok()? - i;
    }
    drop(send); // the echo's receive fails: it returns
    echo.join().ok()?;
    Some(sum)
}

#[inline(never)]
fn probe_blocking(n: u64) -> u64 {
    let mut sum = 0;
    for i in 0..n {
        sum += elite_rt::blocking(move || i);
    }
    sum
}
