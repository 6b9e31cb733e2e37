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

/// The calling thread's affinity mask as it was when saved, put back when this is dropped: for
/// code that pins a thread for a while (a measurement between two CPUs) and must leave it as it
/// found it. Not `Send`: it is dropped on the thread whose mask it saved. A restore the OS
/// refuses (none of the saved CPUs is left to the process, its CPU set having shrunk meanwhile)
/// leaves the thread's mask as the drop found it.
///
/// ```
/// std::thread::spawn(|| {
///     let Some(saved) = elite_affinity::SavedMask::save() else { return }; // (not Linux)
///     let first = saved.cpus()[0];
///     elite_affinity::pin_current_thread(first).unwrap();
///     drop(saved); // the thread may run on every CPU of its mask again
/// })
/// .join()
/// .unwrap();
/// ```
pub struct SavedMask {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    mask: libc::cpu_set_t,
    cpus: Vec<usize>,
    /// Not `Send`: restored on the thread that saved it.
    _here: std::marker::PhantomData<*const ()>,
}

impl SavedMask {
    /// The calling thread's mask now; `None` where the platform cannot read and set it (only
    /// Linux and Android can), or the OS refuses.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn save() -> Option<SavedMask> {
        // SAFETY: `cpu_set_t` is a plain bit array, for which all zeroes is the empty set.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 names the calling thread; the size is that of the set written.
        if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut mask) } != 0 {
            return None;
        }
        // SAFETY: every index is below the set's size in bits.
        let cpus = (0..PINNABLE_CPUS).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &mask) }).collect();
        Some(SavedMask { mask, cpus, _here: std::marker::PhantomData })
    }

    /// The calling thread's mask now: `None` on this platform, which cannot set it back.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub fn save() -> Option<SavedMask> {
        None
    }

    /// The OS ids of the CPUs in the saved mask, ascending.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }
}

impl Drop for SavedMask {
    fn drop(&mut self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        // SAFETY: pid 0 names the calling thread, the one that saved the mask (`SavedMask` is
        // not `Send`); the set is initialized, its size given.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.mask)
        };
    }
}

/// The OS id of the CPU the calling thread runs on now (it may move at any time unless pinned),
/// or `None` where the platform does not say.
///
/// ```
/// if let Some(cpu) = elite_affinity::current_cpu() {
///     assert!(cpu < 1 << 20);
/// }
/// ```
pub fn current_cpu() -> Option<usize> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: no arguments; it returns the CPU the calling thread runs on, or -1.
    return usize::try_from(unsafe { libc::sched_getcpu() }).ok();
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    None
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

    /// A thread pinned while a `SavedMask` lives runs on every CPU of its old mask again once
    /// the mask is dropped; where the platform cannot save it, nothing is saved.
    #[test]
    fn a_saved_mask_is_put_back_when_dropped() {
        std::thread::spawn(|| {
            let before = allowed_cpus();
            let Some(saved) = SavedMask::save() else {
                let saves = cfg!(any(target_os = "linux", target_os = "android"));
                assert!(!saves, "Linux and Android can save a thread's mask");
                return;
            };
            assert_eq!(Some(saved.cpus().to_vec()), before);
            let first = saved.cpus()[0];
            pin_current_thread(first).unwrap();
            assert_eq!(allowed_cpus(), Some(vec![first]));
            if let Some(cpu) = current_cpu() {
                assert_eq!(cpu, first, "a pinned thread runs on its CPU");
            }
            drop(saved);
            assert_eq!(allowed_cpus(), before);
        })
        .join()
        .unwrap();
    }

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
