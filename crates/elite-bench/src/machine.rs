//! The machine a run was measured on, recorded in every report and JSON document.

use serde_json::{json, Value};

/// What we know about the machine.
#[derive(Clone, Debug)]
pub struct Machine {
    /// CPUs this process may run on.
    pub cpus: usize,
    /// The CPU's model name (`/proc/cpuinfo`), or `unknown`.
    pub cpu_model: String,
    /// Whether hardware performance counters can be opened (a CPU-cycles counter).
    pub pmu: bool,
    /// The kernel release (`/proc/sys/kernel/osrelease`), or `unknown`.
    pub kernel: String,
    /// Bytes of the L2 cache of processor 0, from the topology (`None`: not known).
    pub l2_bytes: Option<u64>,
    /// Bytes of the L3 cache of processor 0 (`None`: none, or not known).
    pub l3_bytes: Option<u64>,
    /// The line costs elite's runtime measured on this host and the hand-off rule's line count
    /// derived from them, as they stood when the suite's runs ended ([`Machine::with_line_costs`];
    /// `None`: not read, or the line costs unmeasured: then the rule allows its fewest lines and
    /// no lock gathers).
    pub line_costs: Option<LineCosts>,
    /// The OS scheduling policy the run started under ([`sched_policy`]): `normal`, or a
    /// real-time one with its priority (`fifo 10` under `chrt -f 10`).
    pub sched_policy: String,
}

/// What `elite_rt::sync::host_costs` and `elite_rt::policy::hand_off::hand_off_lines` said.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LineCosts {
    /// A cache line's round trip between two cores, in nanoseconds.
    pub round_trip_ns: f64,
    /// The time per line to read a block another core just wrote, in nanoseconds.
    pub fetch_ns: f64,
    /// The most lines a woken ULT may have expected at home and still follow its waker.
    pub hand_off_lines: f32,
}

impl Machine {
    /// Looks at the machine we run on.
    pub fn detect() -> Machine {
        let topology = elite_affinity::Topology::detect();
        let cache = |level: u8| topology.caches_of(0).find(|c| c.level == level).map(|c| c.size);
        Machine {
            l2_bytes: cache(2),
            l3_bytes: cache(3),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model: cpu_model().unwrap_or_else(|| "unknown".into()),
            pmu: pmu_available(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            line_costs: None,
            sched_policy: sched_policy(),
        }
    }

    /// The machine with the runtime's line costs as they stand now (measured at the first
    /// runtime's start, or at a later one's where the first could not: read after the runs, so
    /// the document says what the runs used; measured now if no runtime started yet).
    pub fn with_line_costs(self) -> Machine {
        let costs = elite_rt::sync::host_costs();
        let line_costs = costs.lines_measured.then(|| LineCosts {
            round_trip_ns: costs.line_round_trip_ns,
            fetch_ns: costs.line_fetch_ns,
            hand_off_lines: elite_rt::policy::hand_off::hand_off_lines(),
        });
        Machine { line_costs, ..self }
    }

    /// A made-up machine for the tests of the documents written about it.
    #[cfg(test)]
    pub fn for_tests() -> Machine {
        Machine {
            cpus: 2,
            cpu_model: "x".into(),
            pmu: false,
            kernel: "k".into(),
            l2_bytes: None,
            l3_bytes: None,
            line_costs: None,
            sched_policy: "normal".into(),
        }
    }

    /// One line for the report's header.
    pub fn describe(&self) -> String {
        format!(
            "{} cpus, {}, L2 {}, L3 {}, kernel {}, pmu {}, scheduling {}",
            self.cpus,
            self.cpu_model,
            kib(self.l2_bytes),
            kib(self.l3_bytes),
            self.kernel,
            if self.pmu { "yes" } else { "no" },
            self.sched_policy
        )
    }

    /// The `machine` object of the JSON document.
    pub fn to_json(&self) -> Value {
        json!({
            "cpus": self.cpus,
            "cpu_model": self.cpu_model,
            "pmu": self.pmu,
            "kernel": self.kernel,
            "l2_bytes": self.l2_bytes,
            "l3_bytes": self.l3_bytes,
            "line_round_trip_ns": self.line_costs.map(|c| c.round_trip_ns),
            "line_fetch_ns": self.line_costs.map(|c| c.fetch_ns),
            "hand_off_lines": self.line_costs.map(|c| c.hand_off_lines),
            "sched_policy": self.sched_policy,
        })
    }
}

/// A cache size for the report's header: `1024 KiB`, or `unknown`.
fn kib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "unknown".into(), |b| format!("{} KiB", b / 1024))
}

/// The most memory mappings a process may have (`vm.max_map_count`), if known.
pub fn max_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count").ok()?.trim().parse().ok()
}

/// The calling thread's OS scheduling policy: `normal` (Linux's `SCHED_OTHER`, also where the
/// policy cannot be read or the OS is not Linux), `batch`, `idle`, or `fifo P` / `rr P` with
/// the real-time priority `P`.
pub fn sched_policy() -> String {
    #[cfg(target_os = "linux")]
    if let Some((policy, param)) = thread_sched() {
        let priority = param.sched_priority;
        match policy {
            libc::SCHED_FIFO => return format!("fifo {priority}"),
            libc::SCHED_RR => return format!("rr {priority}"),
            libc::SCHED_BATCH => return "batch".into(),
            libc::SCHED_IDLE => return "idle".into(),
            _ => {}
        }
    }
    "normal".into()
}

/// The calling thread's scheduling policy and its parameters (the priority), or `None` where
/// the OS does not say.
#[cfg(target_os = "linux")]
pub(crate) fn thread_sched() -> Option<(libc::c_int, libc::sched_param)> {
    // SAFETY: reads the calling thread's policy; takes no pointers.
    let policy = unsafe { libc::sched_getscheduler(0) };
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, writable `sched_param`.
    (policy >= 0 && unsafe { libc::sched_getparam(0, &mut param) } == 0).then_some((policy, param))
}

/// Round trips [`core_round_trip_ns`] times: enough to average over the host's jitter, and a
/// few milliseconds even where a round trip takes hundreds of nanoseconds.
const ROUND_TRIPS: u64 = 20_000;

/// How long [`core_round_trip_ns`] waits for its helper thread before it gives up.
const ROUND_TRIP_PATIENCE: std::time::Duration = std::time::Duration::from_millis(200);

/// A cache line's round trip between the first two CPUs this process may run on, now, in
/// nanoseconds: this thread, pinned to the first, and a helper thread pinned to the second pass
/// a counter back and forth through one atomic word, [`ROUND_TRIPS`] times, and the mean is
/// returned. `None` with fewer than two CPUs, where the mask cannot be read and set (only Linux
/// can), where pinning fails, or when the helper did not answer within [`ROUND_TRIP_PATIENCE`]
/// (a busy host). The thread's own CPU mask is restored before it returns.
///
/// Some virtual machines place their virtual CPUs nearer to or farther from each other from one
/// minute to the next (a host of this project's measured 45 to 51 ns in some minutes, 350 to
/// 430 ns in others), and whatever moves data between processors slows with it; the suites
/// record this before and after each bench ([`crate::harness`]) so that a reader can tell.
pub fn core_round_trip_ns() -> Option<f64> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    // Put back when dropped, at the end (`None` where the mask cannot be read and set).
    let saved = elite_affinity::SavedMask::save()?;
    let &[first, second, ..] = saved.cpus() else { return None };
    let pin = |cpu: usize| elite_affinity::pin_current_thread(cpu).is_ok();
    // The counter: odd values are this thread's, even ones the helper's answers; `u64::MAX`
    // tells the helper to stop. (A helper that cannot pin answers nothing: the patience ends
    // the measurement.)
    let word = Arc::new(AtomicU64::new(0));
    let helper = {
        let word = Arc::clone(&word);
        std::thread::Builder::new()
            .name("elite-bench-round-trip".into())
            .spawn(move || {
                if !pin(second) {
                    return;
                }
                loop {
                    match word.load(Ordering::Acquire) {
                        u64::MAX => return,
                        now if now % 2 == 1 => word.store(now + 1, Ordering::Release),
                        _ => std::hint::spin_loop(),
                    }
                }
            })
            .ok()?
    };
    let measured = (|| {
        if !pin(first) {
            return None;
        }
        let deadline = Instant::now() + ROUND_TRIP_PATIENCE;
        let mut start = None;
        // Round 0 is a warm-up, which also waits for the helper to start.
        for i in 0..=ROUND_TRIPS {
            if i == 1 {
                start = Some(Instant::now());
            }
            word.store(2 * i + 1, Ordering::Release);
            let mut spins = 0u32;
            loop {
                let now = word.load(Ordering::Acquire);
                if now == 2 * i + 2 {
                    break;
                }
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(1024) && Instant::now() > deadline {
                    return None;
                }
                std::hint::spin_loop();
            }
        }
        Some(start?.elapsed().as_secs_f64() * 1e9 / ROUND_TRIPS as f64)
    })();
    word.store(u64::MAX, Ordering::Release);
    let _ = helper.join();
    drop(saved); // this thread's mask as it was
    measured
}

/// The first `model name` of `/proc/cpuinfo`.
fn cpu_model() -> Option<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    cpuinfo
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim() == "model name")
        .map(|(_, value)| value.trim().to_string())
}

/// Whether `perf_event_open` gives us a CPU-cycles counter for this thread.
#[cfg(target_os = "linux")]
fn pmu_available() -> bool {
    // `struct perf_event_attr` of <linux/perf_event.h> as 64-bit words, in its 128-byte
    // (PERF_ATTR_SIZE_VER7) layout; all fields we do not set are zero.
    const ATTR_WORDS: usize = 16;
    const PERF_TYPE_HARDWARE: u64 = 0;
    const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
    const DISABLED: u64 = 1 << 0;
    const EXCLUDE_KERNEL: u64 = 1 << 5;
    const EXCLUDE_HV: u64 = 1 << 6;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
    let mut attr = [0u64; ATTR_WORDS];
    // Word 0 holds the u32 fields `type` (bytes 0..4) and `size` (bytes 4..8); build it from
    // their bytes so the layout is right on either endianness.
    let size = (ATTR_WORDS * 8) as u32;
    let mut head = [0u8; 8];
    head[..4].copy_from_slice(&(PERF_TYPE_HARDWARE as u32).to_ne_bytes());
    head[4..].copy_from_slice(&size.to_ne_bytes());
    attr[0] = u64::from_ne_bytes(head);
    attr[1] = PERF_COUNT_HW_CPU_CYCLES; // config
    attr[5] = DISABLED | EXCLUDE_KERNEL | EXCLUDE_HV; // the flag bits after read_format
                                                      // SAFETY: `attr` is a zero-initialised, properly aligned 128-byte perf_event_attr whose
                                                      // `size` field says 128, and it outlives the call; pid 0 / cpu -1 / group -1 ask for a
                                                      // counter on the calling thread; the kernel only reads `attr`.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` is a file descriptor the kernel just gave us and nothing else owns.
    unsafe { libc::close(fd as libc::c_int) };
    true
}

/// Hardware counters are only probed on Linux.
#[cfg(not(target_os = "linux"))]
fn pmu_available() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_a_real_time_one_with_its_priority() {
        assert_eq!(std::thread::spawn(sched_policy).join().unwrap(), sched_policy());
        #[cfg(target_os = "linux")]
        {
            let seen = std::thread::spawn(|| {
                let fifo = libc::sched_param { sched_priority: 3 };
                // SAFETY: a valid `sched_param`; pid 0 is this thread.
                let set = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } == 0;
                set.then(sched_policy) // (not permitted here: nothing to check)
            })
            .join()
            .unwrap();
            if let Some(seen) = seen {
                assert_eq!(seen, "fifo 3");
            }
        }
        let json = Machine::for_tests().to_json();
        assert_eq!(json["sched_policy"], "normal");
    }

    /// The measurement pins the calling thread for its duration only: the thread's CPU mask is
    /// the same after it, and a measured round trip is a positive time (a busy host may leave it
    /// unmeasured; fewer than two CPUs always do).
    #[test]
    #[cfg(target_os = "linux")]
    fn a_round_trip_leaves_the_threads_mask_as_it_was() {
        std::thread::spawn(|| {
            let mask = || {
                // SAFETY: all zeroes is the empty `cpu_set_t`.
                let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                let size = std::mem::size_of::<libc::cpu_set_t>();
                // SAFETY: `set` is a valid, writable `cpu_set_t` of `size` bytes; pid 0 is this thread.
                assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
                // SAFETY: `CPU_ISSET` reads indices below `CPU_SETSIZE`.
                (0..libc::CPU_SETSIZE as usize)
                    .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
                    .collect::<Vec<_>>()
            };
            let before = mask();
            let measured = core_round_trip_ns();
            assert_eq!(mask(), before, "the thread's CPU mask changed");
            if before.len() < 2 {
                assert_eq!(measured, None, "a round trip measured on one CPU");
            }
            if let Some(ns) = measured {
                assert!(ns.is_finite() && ns > 0.0, "a round trip of {ns} ns");
            }
        })
        .join()
        .unwrap();
    }
}
