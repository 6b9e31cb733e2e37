//! Pinning OS threads to CPUs and reading the calling thread's affinity mask.

use std::fmt;
use std::io;

/// How many CPU ids the platform's affinity call can name: ids at or above this are refused
/// before they reach `core_affinity`, whose `CPU_SET` would index out of bounds on them.
#[cfg(any(target_os = "linux", target_os = "android"))]
const PINNABLE_CPUS: usize = 8 * std::mem::size_of::<libc::cpu_set_t>();
/// How many CPU ids the platform's affinity call can name (one bit of a 64-bit mask each).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const PINNABLE_CPUS: usize = 64;

/// Pins the calling OS thread to the CPU with OS id `cpu` (a [`ProcessorInfo::cpu`]).
///
/// Never panics. Fails when `cpu` is beyond what the platform's affinity mask can name, or when
/// the OS refuses, typically because the CPU is offline or outside this process's affinity mask.
///
/// ```
/// let cpu = elite_affinity::Topology::detect().processor(0).cpu;
/// std::thread::spawn(move || {
///     elite_affinity::pin_current_thread(cpu).expect("a detected CPU can be pinned to");
/// })
/// .join()
/// .unwrap();
/// assert!(elite_affinity::pin_current_thread(100_000).is_err());
/// ```
///
/// [`ProcessorInfo::cpu`]: crate::ProcessorInfo::cpu
pub fn pin_current_thread(cpu: usize) -> Result<(), PinError> {
    if cpu >= PINNABLE_CPUS {
        return Err(PinError { cpu, cause: PinCause::OutOfRange });
    }
    if core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
        Ok(())
    } else {
        // `set_for_current` only compares the return value after the system call, so errno is
        // still the one the call left.
        Err(PinError { cpu, cause: PinCause::Refused(io::Error::last_os_error().raw_os_error()) })
    }
}

/// The number of CPUs the calling thread may run on: the size of its affinity mask, or
/// [`std::thread::available_parallelism`] where the mask cannot be read. At least 1.
///
/// ```
/// assert!(elite_affinity::online_cpus() >= 1);
/// ```
pub fn online_cpus() -> usize {
    match allowed_cpus() {
        Some(cpus) if !cpus.is_empty() => cpus.len(),
        _ => std::thread::available_parallelism().map_or(1, usize::from),
    }
}

/// The OS ids of the CPUs in the calling thread's affinity mask, ascending, or `None` where the
/// platform does not say.
pub(crate) fn allowed_cpus() -> Option<Vec<usize>> {
    let mut cpus: Vec<usize> = core_affinity::get_core_ids()?.into_iter().map(|core| core.id).collect();
    cpus.sort_unstable();
    Some(cpus)
}

/// The error of [`pin_current_thread`]: which CPU was refused, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinError {
    cpu: usize,
    cause: PinCause,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PinCause {
    /// The id does not fit the platform's affinity mask.
    OutOfRange,
    /// The OS call failed, with this errno where one was left.
    Refused(Option<i32>),
}

impl PinError {
    /// The OS CPU id that the thread could not be pinned to.
    pub fn cpu(&self) -> usize {
        self.cpu
    }
}

impl fmt::Display for PinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot pin the current thread to CPU {}: ", self.cpu)?;
        match self.cause {
            PinCause::OutOfRange => write!(
                f,
                "CPU ids on this platform are 0..{PINNABLE_CPUS} (use a `cpu` from Topology::detect())"
            ),
            PinCause::Refused(errno) => {
                write!(f, "the OS refused")?;
                if let Some(errno) = errno.filter(|&e| e != 0) {
                    write!(f, " ({})", io::Error::from_raw_os_error(errno))?;
                }
                write!(f, "; the CPU may be offline or outside this process's affinity mask")
            }
        }
    }
}

impl std::error::Error for PinError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Topology;

    #[test]
    fn pin_to_every_detected_cpu() {
        let topology = Topology::detect();
        for info in topology.processors() {
            let cpu = info.cpu;
            let pinned = std::thread::spawn(move || {
                pin_current_thread(cpu)?;
                Ok::<_, PinError>(allowed_cpus())
            })
            .join()
            .expect("pinning thread does not panic");
            let mask = pinned.unwrap_or_else(|e| panic!("{e}"));
            if let Some(mask) = mask {
                assert_eq!(mask, vec![cpu], "thread runs only on the CPU it was pinned to");
            }
        }
    }

    #[test]
    fn pin_to_absurd_cpu_fails() {
        let result = std::thread::spawn(|| pin_current_thread(100_000)).join().expect("pinning never panics");
        let err = result.expect_err("CPU 100000 does not exist");
        assert_eq!(err.cpu(), 100_000);
        let message = err.to_string();
        assert!(message.contains("CPU 100000"), "{message}");
    }

    #[test]
    fn pin_to_missing_cpu_below_mask_size_fails() {
        // Just below the mask size: the id fits the mask but names no CPU on a small machine.
        let cpu = PINNABLE_CPUS - 1;
        if allowed_cpus().is_some_and(|cpus| cpus.contains(&cpu)) {
            return;
        }
        let result =
            std::thread::spawn(move || pin_current_thread(cpu)).join().expect("pinning never panics");
        let message = result.expect_err("no such CPU").to_string();
        assert!(message.contains("the OS refused"), "{message}");
    }

    #[test]
    fn online_cpus_matches_mask() {
        let n = online_cpus();
        assert!(n >= 1);
        if let Some(mask) = allowed_cpus() {
            assert_eq!(n, mask.len());
        }
    }
}
