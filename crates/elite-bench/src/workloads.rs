//! Pieces of workloads that more than one suite uses: the answer of the spawn benches, building
//! and joining on an elite runtime, and the std-thread spawn-and-join loop.

use std::time::Instant;

use crate::harness::{panic_message, warm_then_time, Sample};

/// 0 + 1 + ... + (n - 1), modulo 2^64: the answer of a workload whose tasks return their index.
pub fn sum_below(n: u64) -> u64 {
    // In 128 bits: n (n - 1) overflows 64 from n = 2^32 + 1 on (a count a probe's user may give),
    // while the sum itself wraps as the workloads' sums do in a release build.
    (u128::from(n) * u128::from(n.saturating_sub(1)) / 2) as u64
}

/// Builds the elite runtime `builder` describes; a refusal becomes an error.
pub fn build_runtime(builder: elite_rt::RuntimeBuilder) -> Result<elite_rt::Runtime, String> {
    builder.build().map_err(|e| format!("cannot build the elite runtime: {e}"))
}

/// Runs `sample` on this thread under the OS's normal time-shared policy, even where this thread
/// runs under a real-time one (`chrt -f 10 elite-bench ...`), and returns this thread to its own
/// policy after it. For samples with more threads than CPUs (a runtime of more processors than
/// CPUs), which must take turns on a CPU: real-time FIFO threads of one priority do not (each
/// keeps its CPU until it blocks), so half of an emulated topology's processors would wait
/// while the other half runs. A runtime built inside `sample` gets the normal policy too (its
/// processors inherit the policy of the thread that builds it).
pub fn time_shared<T>(sample: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    #[cfg(target_os = "linux")]
    {
        let sched = crate::machine::thread_sched();
        if let Some((policy, param)) = sched.filter(|(p, _)| *p == libc::SCHED_FIFO || *p == libc::SCHED_RR) {
            let normal = libc::sched_param { sched_priority: 0 };
            // SAFETY: a valid `sched_param`; pid 0 is the calling thread.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &normal) } != 0 {
                return Err(format!(
                    "cannot leave the real-time policy for a sample whose threads share CPUs: {}",
                    std::io::Error::last_os_error()
                ));
            }
            // (Back to the real-time policy also when the sample panics.)
            let back = BackToRealTime { policy, param };
            let result = sample();
            back.now()?;
            return result;
        }
    }
    sample()
}

/// Puts the calling thread back under the real-time `policy` at `param`'s priority when
/// dropped ([`time_shared`]'s way back, also on a panic) or told to ([`BackToRealTime::now`]).
#[cfg(target_os = "linux")]
struct BackToRealTime {
    policy: libc::c_int,
    param: libc::sched_param,
}

#[cfg(target_os = "linux")]
impl BackToRealTime {
    /// Goes back now, saying whether the OS let it. (Going back needs the right to set a
    /// real-time policy, which a thread put under one by a privileged parent may lack.)
    fn now(self) -> Result<(), String> {
        let back = self.back();
        std::mem::forget(self);
        back.map_err(|e| format!("cannot return to the real-time policy after a sample: {e}"))
    }

    fn back(&self) -> std::io::Result<()> {
        // SAFETY: `param` is a valid `sched_param`; pid 0 is the calling thread.
        match unsafe { libc::sched_setscheduler(0, self.policy, &self.param) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
}

#[cfg(target_os = "linux")]
impl Drop for BackToRealTime {
    fn drop(&mut self) {
        // (Unwinding from the sample: nothing to report a refusal to.)
        let _ = self.back();
    }
}

/// A fresh elite runtime with `processors` processors and every other setting at its default.
pub fn elite_runtime(processors: usize) -> Result<elite_rt::Runtime, String> {
    build_runtime(elite_rt::Runtime::builder().processors(processors))
}

/// The system of `auto` started warm: [`warm_auto`]'s policy, whose runtimes remember their
/// explorations from one sample to the next (`elite/auto` starts every sample cold).
pub const AUTO_WARM: &str = "elite/auto+warm";

/// `auto` with the default settings, remembering its explorations under `key`
/// ([`elite_rt::policy::Auto::remember`]) for the rest of this process: each sample but those
/// before its first exploration starts from the choice of the samples before it. The key names
/// the bench and its workload; the memory is also kept apart per processor count.
pub fn warm_auto(key: String) -> elite_rt::policy::Policy {
    let auto = elite_rt::policy::Auto::new();
    // (A key of 1..=256 bytes, which the suites' keys are.)
    let auto = auto.clone().remember(key).unwrap_or(auto);
    elite_rt::policy::Policy::auto_with(auto)
}

/// For a runtime under `auto`: records what it did as side values of the sample (nothing for
/// another policy): `auto_explorations`, the explorations it made, `auto_choice`, the index
/// among its candidates of the policy in force at the end (with the default candidates: 0
/// no-affinity, 1 virtual-time, 2 minimum-misses, 3 reload-transient, 4 gravity; -1 for none
/// of them), and
/// `auto_warm_start`, 1 where it started from a remembered choice (`elite/auto+warm` after its
/// first exploration), else 0.
pub fn record_auto(rt: &elite_rt::Runtime) {
    let Some(auto) = rt.policy().auto_settings() else { return };
    let stats = rt.stats();
    record_auto_decisions(auto, &stats.auto, stats.policy);
}

/// [`record_auto`] from `auto`'s settings, its `decisions` and the policy in force at the end.
pub fn record_auto_decisions(
    auto: &elite_rt::policy::Auto,
    decisions: &[elite_rt::policy::AutoDecision],
    in_force: &str,
) {
    use elite_rt::policy::AutoReason;
    let explorations = decisions
        .iter()
        .filter(|d| !matches!(d.reason, AutoReason::Start | AutoReason::Remembered | AutoReason::Locality))
        .count();
    crate::harness::record_side("auto_explorations", explorations as f64);
    let warm = decisions.iter().any(|d| d.reason == AutoReason::Remembered);
    crate::harness::record_side("auto_warm_start", if warm { 1.0 } else { 0.0 });
    let chosen = auto.candidate_policies().iter().position(|p| p.name() == in_force);
    crate::harness::record_side("auto_choice", chosen.map_or(-1.0, |i| i as f64));
}

/// Joins an elite ULT; its panic becomes an error.
pub fn elite_join<T>(handle: elite_rt::JoinHandle<T>) -> Result<T, String> {
    handle.join().map_err(|payload| format!("a ULT panicked: {}", panic_message(&*payload)))
}

/// std-thread `spawn_join`: `std::thread::spawn` of a thread returning i, joined, for i in 0..n
/// (the std-thread peer of micro's `spawn_join` and of blocking's `blocking_call`).
pub fn std_spawn_join(n: u64) -> Result<Sample, String> {
    warm_then_time(n, || {
        let start = Instant::now();
        let mut sum = 0u64;
        for i in 0..n {
            sum += std::thread::spawn(move || i)
                .join()
                .map_err(|payload| format!("a thread panicked: {}", panic_message(&*payload)))?;
        }
        Ok((start.elapsed(), sum))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn a_time_shared_sample_runs_under_the_normal_policy_and_returns() {
        let seen = std::thread::spawn(|| {
            let fifo = libc::sched_param { sched_priority: 2 };
            // SAFETY: a valid `sched_param`; pid 0 is this thread.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } != 0 {
                return None; // not permitted here: nothing to check
            }
            let inside = time_shared(|| Ok(crate::machine::sched_policy())).unwrap();
            let after = crate::machine::sched_policy();
            let panicked = std::panic::catch_unwind(|| time_shared::<()>(|| panic!("a sample's panic")));
            Some((inside, after, panicked.is_err(), crate::machine::sched_policy()))
        })
        .join()
        .unwrap();
        if let Some(seen) = seen {
            assert_eq!(seen, ("normal".into(), "fifo 2".into(), true, "fifo 2".into()));
        }
        assert_eq!(time_shared(|| Ok(7)), Ok(7));
    }
}
