//! The periodic summary of the schedule on stderr, as Go's `GODEBUG=schedtrace=<ms>` prints
//! ([`RuntimeBuilder::schedtrace`](crate::RuntimeBuilder::schedtrace), or `ELITE_SCHEDTRACE=<ms>`):
//! a thread of the runtime wakes every period and prints a line for the runtime and one per
//! processor, read from the counters every processor keeps anyway (`stats`) and from the queues'
//! lengths; the processors do nothing for it.
//!
//! ```text
//! SCHED 1000ms: processors=2 idle=1 spare_threads=1 blocking_calls=0 handoffs=3 policy=no-affinity
//! SCHED 1000ms P0: runs=81234 (+40015) started=1024 yields=60011 runq=3 startq=12 next=1 wakeups=5 steals=0 parks=2 state=running
//! SCHED 1000ms P1: runs=40110 (+20001) started=512 yields=30002 runq=0 startq=0 next=0 wakeups=0 steals=512 parks=40 state=parked
//! ```
//!
//! * `runs`: switches into ULTs since the start (in parentheses: since the last line);
//!   `started`: ULTs started (taken from a start-queue); `yields`: yields that reached the loop;
//! * `runq`, `startq`, `next`: the ready ULTs in the runqueue, the never-started ones in the own
//!   start-queue, and whether the `next` slot holds one, at the moment of the line;
//! * `wakeups`: ULTs made ready here through the wake-up stack (by other processors or threads);
//!   `steals`: ULTs this processor stole; `parks`: times it parked its thread; `state`: whether it
//!   is parked now;
//! * the runtime's line: processors parked now, spare OS threads (beyond the processors),
//!   blocking calls running now, the blocking calls' hand-offs so far, and the policy in force.

use crate::runtime::Shared;
use std::fmt::Write as _;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// The running summary: its thread and the flag that stops it.
pub(crate) struct SchedTrace {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SchedTrace {
    /// Starts the summary of `shared` every `period`. It holds `shared` weakly: the runtime stops
    /// it before it shuts down.
    pub(crate) fn start(shared: &Arc<Shared>, period: Duration) -> std::io::Result<SchedTrace> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let (weak, flag) = (Arc::downgrade(shared), Arc::clone(&stop));
        // (Ranked above the processors under a real-time policy: `crate::helper`.)
        let thread = crate::helper::spawn("elite-schedtrace", move || run(weak, period, flag))?;
        Ok(SchedTrace { stop, thread: Some(thread) })
    }
}

impl Drop for SchedTrace {
    fn drop(&mut self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(shared: Weak<Shared>, period: Duration, stop: Arc<(Mutex<bool>, Condvar)>) {
    let began = Instant::now();
    let mut last_runs: Vec<u64> = Vec::new();
    let mut next = began + period;
    loop {
        {
            let (flag, wake) = &*stop;
            let mut stopped = flag.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if *stopped {
                    return;
                }
                let now = Instant::now();
                if now >= next {
                    break;
                }
                stopped = wake.wait_timeout(stopped, next - now).unwrap_or_else(|e| e.into_inner()).0;
            }
        }
        next += period;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let lines = summary(&shared, began.elapsed(), &mut last_runs);
        // One write for all the lines, so that they stay together.
        eprint!("{lines}");
    }
}

/// The lines of one summary, `at` after the start; `last_runs`: each processor's runs at the
/// previous summary (updated).
pub(crate) fn summary(shared: &Shared, at: Duration, last_runs: &mut Vec<u64>) -> String {
    let ms = at.as_millis();
    let n = shared.processors.len();
    last_runs.resize(n, 0);
    let blocking = shared.blocking.stats();
    let idle = shared.processors.iter().filter(|p| p.park.is_parked()).count();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "SCHED {ms}ms: processors={n} idle={idle} spare_threads={} blocking_calls={} handoffs={} policy={}",
        blocking.threads,
        blocking.in_flight,
        blocking.handoffs,
        shared.engine.selected().policy.name()
    );
    for (i, p) in shared.processors.iter().enumerate() {
        let st = &p.stats;
        let runs = st.switches.get();
        let started = (st.start_local.get() + st.start_node.get() + st.start_global.get())
            .saturating_sub(st.start_moved.get());
        let _ = writeln!(
            s,
            "SCHED {ms}ms P{i}: runs={runs} (+{}) started={started} yields={} runq={} startq={} next={} wakeups={} steals={} parks={} state={}",
            runs.wrapping_sub(last_runs[i]),
            st.yields.get(),
            p.runq.len(),
            p.start.len(),
            u8::from(!p.next.is_empty()),
            st.wakeup_drained.get(),
            st.steals_node.get() + st.steals_remote.get(),
            st.parks.get(),
            if p.park.is_parked() { "parked" } else { "running" },
        );
        last_runs[i] = runs;
    }
    s
}
