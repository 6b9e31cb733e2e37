//! The runtime's periodic helper threads (`auto`'s selector, the co-scheduler's controller, the
//! schedule trace) and the one thing they share: under a real-time scheduling policy they rank
//! above the processors.
//!
//! A thread inherits its creator's scheduling policy, so where a program runs under
//! `SCHED_FIFO` or `SCHED_RR` (`chrt -f 10 ./program`, or a thread that set its own policy before
//! building the runtime) the processors and these helpers share one real-time priority. A
//! `SCHED_FIFO` thread keeps its CPU until it blocks, and a processor with work does not block,
//! so while every processor is busy a helper of the same priority never runs: `auto` would
//! never leave its first candidate and the co-scheduler would never admit a second group. (Under
//! `SCHED_RR` it would run, a time slice late.) So each helper, as it starts, moves itself one
//! priority above the one it inherited. It wakes once per period and works for microseconds,
//! so ranking above the processors costs them that much of a CPU.
//!
//! The move needs the right to raise a real-time priority (`CAP_SYS_NICE`, or an
//! `RLIMIT_RTPRIO` at least the new priority); without it the helper runs at the inherited
//! priority, as before ([`Rank::Refused`]), and may not run while every processor is busy. A
//! helper at the highest priority stays there ([`Rank::AtMaximum`]). Under the normal policies
//! nothing changes.

use std::io;
use std::thread::{Builder, JoinHandle};

/// What a helper thread's start did to its scheduling priority.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Rank {
    /// The thread did not inherit a real-time policy: nothing to do.
    NotRealTime,
    /// Moved one priority up within its real-time policy.
    Raised,
    /// It inherited the policy's highest priority: it stays there.
    AtMaximum,
    /// The OS refused the move (or the policy could not be read).
    Refused,
}

/// The calling thread's scheduling policy and priority, or `None` where the OS does not say.
#[cfg(target_os = "linux")]
fn thread_sched() -> Option<(libc::c_int, libc::c_int)> {
    // SAFETY: `sched_getscheduler(0)` reads the calling thread's policy; it takes no pointers.
    let policy = unsafe { libc::sched_getscheduler(0) };
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, writable `sched_param` for the call to fill.
    (policy >= 0 && unsafe { libc::sched_getparam(0, &mut param) } == 0)
        .then_some((policy, param.sched_priority))
}

/// Moves the calling thread one priority above the real-time priority it runs at, if it runs
/// under `SCHED_FIFO` or `SCHED_RR`.
#[cfg(target_os = "linux")]
pub(crate) fn outrank_inherited_realtime() -> Rank {
    let Some((policy, from)) = thread_sched() else {
        return Rank::Refused;
    };
    if policy != libc::SCHED_FIFO && policy != libc::SCHED_RR {
        return Rank::NotRealTime;
    }
    // SAFETY: `sched_get_priority_max` takes a policy number and no pointers.
    let max = unsafe { libc::sched_get_priority_max(policy) };
    if from >= max {
        return Rank::AtMaximum;
    }
    let raised = libc::sched_param { sched_priority: from + 1 };
    // SAFETY: `raised` is a valid `sched_param`; pid 0 names the calling thread (on Linux the
    // call applies to one thread, not the whole process).
    if unsafe { libc::sched_setscheduler(0, policy, &raised) } != 0 {
        return Rank::Refused;
    }
    Rank::Raised
}

/// Elsewhere there is no real-time policy to outrank.
#[cfg(not(target_os = "linux"))]
pub(crate) fn outrank_inherited_realtime() -> Rank {
    Rank::NotRealTime
}

/// Spawns a helper thread named `name` that ranks above the processors under a real-time policy
/// (see the module docs), then runs `f`.
pub(crate) fn spawn<F>(name: &str, f: F) -> io::Result<JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    Builder::new().name(name.into()).spawn(move || {
        // (Refused or not real-time: it runs as its creator does, as before.)
        let _ = outrank_inherited_realtime();
        f()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "system calls")]
    fn a_normal_thread_is_left_alone() {
        let rank = std::thread::spawn(outrank_inherited_realtime).join().unwrap();
        // The test harness's threads run under the normal policy unless the whole test run was
        // started under a real-time one.
        #[cfg(target_os = "linux")]
        let here = thread_sched().map(|(policy, _)| policy);
        #[cfg(not(target_os = "linux"))]
        let here: Option<i32> = None;
        if !matches!(here, Some(libc::SCHED_FIFO | libc::SCHED_RR)) {
            assert_eq!(rank, Rank::NotRealTime);
        }
    }

    /// A thread that sets `SCHED_FIFO` at priority 1 (where the OS lets it: as root, or with an
    /// `RLIMIT_RTPRIO`) spawns a helper: the helper runs at priority 2 of the same policy, and a
    /// plain thread it spawns at 1.
    #[test]
    #[cfg(target_os = "linux")]
    #[cfg_attr(miri, ignore = "system calls")]
    fn a_helper_under_fifo_runs_one_priority_above_its_creator() {
        let priority = || thread_sched().expect("the thread's policy");
        let seen = std::thread::spawn(move || {
            let fifo = libc::sched_param { sched_priority: 1 };
            // SAFETY: a valid `sched_param`; pid 0 is this thread.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } != 0 {
                return None; // not permitted here: nothing to check
            }
            let (tx, rx) = std::sync::mpsc::channel();
            let helper = spawn("elite-test-helper", move || tx.send(priority()).unwrap()).unwrap();
            helper.join().unwrap();
            let plain = std::thread::spawn(priority).join().unwrap();
            Some((rx.recv().unwrap(), plain))
        })
        .join()
        .unwrap();
        if let Some((helper, plain)) = seen {
            assert_eq!(helper, (libc::SCHED_FIFO, 2));
            assert_eq!(plain, (libc::SCHED_FIFO, 1));
        }
    }
}
