//! The hardware source: a cache-miss counter of the calling thread through `perf_event_open`.
//!
//! # Opening and reading: the `perf-event2` crate; `rdpmc`: by hand
//!
//! The event is opened with `perf-event2`'s `Builder` for the calling thread on any CPU
//! (`observe_self`, `any_cpu`), counting user space only (`exclude_kernel`, `exclude_hv`, which
//! `perf_event_paranoid <= 2` allows), enabled at once, with the read format `{value,
//! time_enabled, time_running}`; the system-call read is the crate's `read_count_and_time`. The
//! crate has a user-space read too (`Sampler::read_user`), but it reads the time fields and the
//! time-stamp counter on every call; the runtime reads its counter twice per ULT run and needs
//! only the count, so the fast path below stays by hand, over the counter's file descriptor. That
//! reason is an expectation, not a measurement: no machine here has a PMU, so neither read has
//! been timed (`docs/architecture.md`, "Hand-written parts", says what would settle it).
//!
//! The event's first page is mapped read-only. The kernel keeps in that page (`struct perf_event_mmap_page`,
//! whose first fields [`PageHead`] mirrors) a sequence `lock`, the hardware counter `index` (0
//! while the event is not on a counter), an `offset`, the counter width and the capability bits.
//! Where `cap_user_rdpmc` is set (and `cap_bit0_is_deprecated`, so that the bit is meaningful),
//! a read is the kernel's documented self-monitoring loop, with no system call:
//!
//! 1. read `lock`, then (after a compiler fence) `index`, `offset`, `pmc_width`;
//! 2. if `index` is 0, fall back to `read`;
//! 3. `count = offset + sign_extend(rdpmc(index - 1), pmc_width)`;
//! 4. if `lock` changed meanwhile (the kernel rescheduled the event), start again.
//!
//! The page is written by the kernel only when this thread is switched out or in on its own CPU,
//! so a read that straddles such an update sees `lock` change. Otherwise (no `rdpmc`, no page,
//! or not x86-64) the source reads `{value, time_enabled, time_running}` with `read(2)` and
//! scales the value by `enabled / running` when the counter was multiplexed.
//!
//! # Tested only for its fallback here
//!
//! The machines this crate is built and tested on have no PMU: opening the hardware event fails
//! (the test checks that it fails cleanly and says why). The decoding of the mmap page and of
//! the read format is unit-tested on synthetic pages and buffers, and the open / mmap / `read`
//! path is exercised with a software event ([`CounterEvent::SoftwarePageFaults`]), whose page
//! never allows `rdpmc`. The `rdpmc` instruction itself has not run in any test here.

use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{compiler_fence, Ordering};

use super::{CounterSource, ReadAccess, RunInfo, SourceKind};

/// What a [`HardwareSource`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterEvent {
    /// `PERF_COUNT_HW_CACHE_MISSES`: misses of the last-level cache (as the CPU vendor maps the
    /// generic event), user space only. What the runtime uses.
    CacheMisses,
    /// `PERF_COUNT_SW_PAGE_FAULTS`, a software event every Linux kernel provides: not cache
    /// misses, but it exercises the same open / mmap / read path on machines without a PMU.
    SoftwarePageFaults,
}

impl CounterEvent {
    /// The event's builder and its name in the kernel's headers.
    fn builder(self) -> (perf_event::Builder<'static>, &'static str) {
        use perf_event::events::{Hardware, Software};
        match self {
            CounterEvent::CacheMisses => {
                (perf_event::Builder::new(Hardware::CACHE_MISSES), "PERF_COUNT_HW_CACHE_MISSES")
            }
            CounterEvent::SoftwarePageFaults => {
                (perf_event::Builder::new(Software::PAGE_FAULTS), "PERF_COUNT_SW_PAGE_FAULTS")
            }
        }
    }
}

/// `capabilities` bits of the mmap page (include/uapi/linux/perf_event.h).
const CAP_BIT0_IS_DEPRECATED: u64 = 1 << 1;
const CAP_USER_RDPMC: u64 = 1 << 2;

/// The first fields of `struct perf_event_mmap_page`, at their ABI offsets.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PageHead {
    version: u32,
    compat_version: u32,
    lock: u32,
    index: u32,
    offset: i64,
    time_enabled: u64,
    time_running: u64,
    capabilities: u64,
    pmc_width: u16,
}

const _: () = assert!(std::mem::offset_of!(PageHead, capabilities) == 40);
const _: () = assert!(std::mem::offset_of!(PageHead, pmc_width) == 48);

/// Whether the page's capability bits allow `rdpmc`: `cap_user_rdpmc`, valid only where
/// `cap_bit0_is_deprecated` says the bits have their current meaning (kernels since 3.12).
fn page_allows_rdpmc(capabilities: u64) -> bool {
    capabilities & CAP_BIT0_IS_DEPRECATED != 0 && capabilities & CAP_USER_RDPMC != 0
}

/// Sign-extends the low `width` bits of a raw counter value (a width of 0 or above 64 leaves it
/// as it is).
fn sign_extend(raw: u64, width: u16) -> i64 {
    if width == 0 || width >= 64 {
        return raw as i64;
    }
    let shift = 64 - u32::from(width);
    ((raw << shift) as i64) >> shift
}

/// The count per the page at `page`, reading the hardware counter with `rdpmc(counter)`; `None`
/// when the page does not allow `rdpmc` or the event is not on a counter now (`index == 0`).
///
/// # Safety
///
/// `page` must point to a `PageHead` readable for the whole call (it may change concurrently, as
/// the kernel's page does).
unsafe fn read_page(page: NonNull<PageHead>, mut rdpmc: impl FnMut(u32) -> u64) -> Option<u64> {
    let page = page.as_ptr();
    loop {
        // SAFETY: the caller guarantees `page` is readable; volatile because the kernel writes
        // these fields behind the compiler's back.
        let lock = unsafe { std::ptr::addr_of!((*page).lock).read_volatile() };
        compiler_fence(Ordering::SeqCst);
        // SAFETY: as above.
        let (capabilities, index, offset, width) = unsafe {
            (
                std::ptr::addr_of!((*page).capabilities).read_volatile(),
                std::ptr::addr_of!((*page).index).read_volatile(),
                std::ptr::addr_of!((*page).offset).read_volatile(),
                std::ptr::addr_of!((*page).pmc_width).read_volatile(),
            )
        };
        if !page_allows_rdpmc(capabilities) || index == 0 {
            return None;
        }
        let count = offset.wrapping_add(sign_extend(rdpmc(index - 1), width));
        compiler_fence(Ordering::SeqCst);
        // SAFETY: as above.
        if unsafe { std::ptr::addr_of!((*page).lock).read_volatile() } == lock {
            return Some(count as u64);
        }
    }
}

/// The count from a `read(2)` of `{value, time_enabled, time_running}`: the value scaled by
/// `enabled / running` when the event was multiplexed (`0 < running < enabled`), the value as it
/// is otherwise.
fn decode_read(values: [u64; 3]) -> u64 {
    let [value, enabled, running] = values;
    if running == 0 || running >= enabled {
        return value;
    }
    let scaled = u128::from(value) * u128::from(enabled) / u128::from(running);
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// The `rdpmc` instruction: hardware counter `counter` of this CPU.
#[cfg(target_arch = "x86_64")]
#[inline]
fn rdpmc(counter: u32) -> u64 {
    let (low, high): (u32, u32);
    // SAFETY: only reached when the kernel set `cap_user_rdpmc` in the event's page, which it
    // does only after enabling user-space `rdpmc` (CR4.PCE) for this task, and `counter` is the
    // page's `index - 1`; the instruction reads registers only.
    unsafe {
        std::arch::asm!("rdpmc", in("ecx") counter, out("eax") low, out("edx") high, options(nomem, nostack, preserves_flags));
    }
    (u64::from(high) << 32) | u64::from(low)
}

/// Why the hardware counter could not be opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenError {
    event: &'static str,
    errno: Option<i32>,
    paranoid: Option<i32>,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "perf_event_open({}) failed", self.event)?;
        let Some(errno) = self.errno else {
            return f.write_str(" (perf events exist only on Linux)");
        };
        write!(f, ": {}", io::Error::from_raw_os_error(errno))?;
        let hint = match errno {
            libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV | libc::EINVAL => {
                "; this machine (or VM) exposes no hardware counter for the event".to_string()
            }
            libc::EACCES | libc::EPERM => match self.paranoid {
                Some(level) => format!("; not permitted (kernel.perf_event_paranoid = {level})"),
                None => "; not permitted".to_string(),
            },
            libc::ENOSYS => "; the kernel has no perf events".to_string(),
            _ => String::new(),
        };
        f.write_str(&hint)
    }
}

impl std::error::Error for OpenError {}

/// A hardware counter of the calling thread, read with `rdpmc` where the kernel allows it and
/// with `read(2)` otherwise (see the module docs for the protocol). Counts only the thread that
/// opened it, so it is not `Send`: open it on the worker thread it measures.
///
/// On a machine without a PMU (many virtual machines expose none), [`open`](Self::open) with
/// [`CounterEvent::CacheMisses`] fails; [`AnySource::detect`](crate::AnySource::detect) then
/// uses the estimator.
///
/// ```
/// use elite_affinity::{CounterEvent, CounterSource, HardwareSource};
///
/// match HardwareSource::open(CounterEvent::CacheMisses) {
///     Ok(source) => println!("{}", source.kind()), // "hardware (rdpmc)" or "hardware (read)"
///     Err(err) => println!("{err}"), // "perf_event_open(PERF_COUNT_HW_CACHE_MISSES) failed: ..."
/// }
/// ```
pub struct HardwareSource {
    counter: perf_event::Counter,
    /// The first page of the event's mapping, when the mapping succeeded.
    page: Option<NonNull<PageHead>>,
    page_len: usize,
    kind: SourceKind,
    /// The counter at open, subtracted so the clock starts at 0.
    base: u64,
    /// The last value read, relative to `base`.
    last: u64,
    started: u64,
    /// Counts the opening thread only: not `Send`, not `Sync`.
    _thread_bound: PhantomData<*const ()>,
}

impl HardwareSource {
    /// Opens `event` for the calling thread.
    pub fn open(event: CounterEvent) -> Result<HardwareSource, OpenError> {
        let (mut builder, name) = event.builder();
        let counter = builder
            .observe_self()
            .any_cpu()
            .exclude_kernel(true)
            .exclude_hv(true)
            .read_format(
                perf_event::ReadFormat::TOTAL_TIME_ENABLED | perf_event::ReadFormat::TOTAL_TIME_RUNNING,
            )
            .enabled(true)
            .build();
        let counter = match counter {
            Ok(counter) => counter,
            Err(err) => {
                let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                    .ok()
                    .and_then(|text| text.trim().parse().ok());
                return Err(OpenError { event: name, errno: err.raw_os_error(), paranoid });
            }
        };
        // SAFETY: `sysconf` has no preconditions.
        let page_len = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        // SAFETY: maps `page_len` bytes of the event's fd read-only at an address the kernel
        // picks; the result is checked before use.
        let mapped = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page_len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                counter.as_raw_fd(),
                0,
            )
        };
        let page = if mapped == libc::MAP_FAILED { None } else { NonNull::new(mapped.cast::<PageHead>()) };
        let mut source = HardwareSource {
            counter,
            page,
            page_len,
            kind: SourceKind::Hardware(ReadAccess::Syscall),
            base: 0,
            last: 0,
            started: 0,
            _thread_bound: PhantomData,
        };
        if source.rdpmc_allowed() {
            source.kind = SourceKind::Hardware(ReadAccess::Rdpmc);
        }
        source.base = source.read_raw();
        Ok(source)
    }

    /// How this source reads its counter.
    pub fn access(&self) -> ReadAccess {
        match self.kind {
            SourceKind::Hardware(access) => access,
            _ => ReadAccess::Syscall,
        }
    }

    /// The count since the source was opened; also what [`clock`](CounterSource::clock) will
    /// say until the next read.
    #[inline]
    pub fn read(&mut self) -> u64 {
        let now = self.read_raw().wrapping_sub(self.base);
        // A failed read returns the base: keep the clock monotonic.
        self.last = self.last.max(now);
        self.last
    }

    fn rdpmc_allowed(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Some(page) = self.page {
            // SAFETY: the page is mapped readable for the life of `self`.
            let capabilities = unsafe { std::ptr::addr_of!((*page.as_ptr()).capabilities).read_volatile() };
            return page_allows_rdpmc(capabilities);
        }
        false
    }

    #[inline]
    fn read_raw(&mut self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if let (SourceKind::Hardware(ReadAccess::Rdpmc), Some(page)) = (&self.kind, self.page) {
            // SAFETY: the page stays mapped readable for the life of `self`.
            if let Some(count) = unsafe { read_page(page, rdpmc) } {
                return count;
            }
        }
        self.read_syscall()
    }

    #[cold]
    fn read_syscall(&mut self) -> u64 {
        match self.counter.read_count_and_time() {
            Ok(read) => decode_read([read.count, read.time_enabled, read.time_running]),
            Err(_) => self.base.wrapping_add(self.last),
        }
    }
}

impl CounterSource for HardwareSource {
    #[inline]
    fn kind(&self) -> &SourceKind {
        &self.kind
    }

    #[inline]
    fn begin_run(&mut self) -> u64 {
        self.started = self.read();
        self.started
    }

    #[inline]
    fn end_run(&mut self, _run: &RunInfo) -> u64 {
        self.read() - self.started
    }

    #[inline]
    fn clock(&self) -> u64 {
        self.last
    }
}

impl Drop for HardwareSource {
    fn drop(&mut self) {
        if let Some(page) = self.page {
            // SAFETY: `page` is the start of a mapping of `page_len` bytes made in `open` and not
            // unmapped before; nothing borrows it past `self`.
            unsafe {
                libc::munmap(page.as_ptr().cast(), self.page_len);
            }
        }
    }
}

impl fmt::Debug for HardwareSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HardwareSource")
            .field("fd", &self.counter.as_raw_fd())
            .field("kind", &self.kind)
            .field("mapped", &self.page.is_some())
            .field("clock", &self.last)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, UnsafeCell};

    fn page(capabilities: u64, index: u32, offset: i64, width: u16) -> UnsafeCell<PageHead> {
        UnsafeCell::new(PageHead { capabilities, index, offset, pmc_width: width, ..PageHead::default() })
    }

    fn read(page: &UnsafeCell<PageHead>, rdpmc: impl FnMut(u32) -> u64) -> Option<u64> {
        // SAFETY: the cell is alive for the call.
        unsafe { read_page(NonNull::new(page.get()).expect("not null"), rdpmc) }
    }

    const RDPMC: u64 = CAP_BIT0_IS_DEPRECATED | CAP_USER_RDPMC;

    #[test]
    fn page_with_rdpmc_adds_the_offset_to_the_counter() {
        let p = page(RDPMC, 3, 1000, 48);
        let asked = Cell::new(None);
        let count = read(&p, |counter| {
            asked.set(Some(counter));
            234
        });
        assert_eq!(count, Some(1234));
        assert_eq!(asked.get(), Some(2), "rdpmc reads counter index - 1");
    }

    #[test]
    fn counter_is_sign_extended_to_its_width() {
        // A 48-bit counter just below wrapping is negative: the offset carries the total.
        let p = page(RDPMC, 1, 5000, 48);
        assert_eq!(read(&p, |_| (1 << 48) - 10), Some(4990));
        assert_eq!(sign_extend(0xFFFF, 16), -1);
        assert_eq!(sign_extend(0x7FFF, 16), 0x7FFF);
        assert_eq!(sign_extend(u64::MAX, 64), -1);
        assert_eq!(sign_extend(5, 0), 5);
    }

    #[test]
    fn page_without_rdpmc_or_counter_falls_back() {
        assert_eq!(read(&page(0, 1, 0, 48), |_| unreachable!()), None, "no capability");
        assert_eq!(read(&page(CAP_USER_RDPMC, 1, 0, 48), |_| unreachable!()), None, "bit 2 of an old kernel");
        assert_eq!(read(&page(RDPMC, 0, 0, 48), |_| unreachable!()), None, "not on a counter now");
    }

    #[test]
    fn changed_lock_retries() {
        let p = page(RDPMC, 1, 100, 48);
        let calls = Cell::new(0);
        let count = read(&p, |_| {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                // The kernel updates the page mid-read: new lock, new offset.
                // SAFETY: no reference into the cell is alive; `read_page` reads through a raw
                // pointer.
                unsafe {
                    (*p.get()).lock += 2;
                    (*p.get()).offset = 200;
                }
            }
            7
        });
        assert_eq!(count, Some(207), "the second, consistent snapshot");
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn read_format_scales_multiplexed_counts() {
        assert_eq!(decode_read([100, 50, 50]), 100);
        assert_eq!(decode_read([100, 200, 50]), 400, "ran a quarter of the time");
        assert_eq!(decode_read([100, 0, 0]), 100, "never ran: as is");
        assert_eq!(decode_read([u64::MAX, u64::MAX, 1]), u64::MAX, "saturates");
    }

    #[test]
    fn hardware_cache_misses_open_or_fail_cleanly() {
        match HardwareSource::open(CounterEvent::CacheMisses) {
            Ok(mut source) => {
                // A machine with a PMU: the counter runs and the clock follows it.
                let begin = source.begin_run();
                let data: Vec<u64> = (0..1 << 20).collect();
                std::hint::black_box(data.iter().sum::<u64>());
                let misses = source.end_run(&RunInfo::new(0, 0, 0.0));
                assert_eq!(source.clock(), begin + misses);
            }
            Err(err) => {
                let message = err.to_string();
                assert!(
                    message.starts_with("perf_event_open(PERF_COUNT_HW_CACHE_MISSES) failed"),
                    "{message}"
                );
                assert!(err.errno.is_some(), "{message}");
            }
        }
    }

    #[test]
    fn software_event_exercises_open_mmap_and_read() {
        let mut source = match HardwareSource::open(CounterEvent::SoftwarePageFaults) {
            Ok(source) => source,
            // A sandbox that refuses perf_event_open altogether: nothing more to check here.
            Err(err) if matches!(err.errno, Some(libc::EACCES | libc::EPERM | libc::ENOSYS)) => return,
            Err(err) => panic!("software events exist on every Linux kernel: {err}"),
        };
        assert!(source.page.is_some(), "the event's page is mapped");
        assert_eq!(source.access(), ReadAccess::Syscall, "software events never allow rdpmc");
        assert_eq!(source.kind().to_string(), "hardware (read)");
        let begin = source.begin_run();
        // Touch fresh pages: at least some of them fault.
        let mut pages = vec![0u8; 64 << 20];
        for i in (0..pages.len()).step_by(4096) {
            pages[i] = 1;
        }
        std::hint::black_box(&pages);
        let faults = source.end_run(&RunInfo::new(0, 0, 0.0));
        assert!(faults >= 1, "touching 16384 new pages faults");
        assert_eq!(source.clock(), begin + faults);
        assert!(format!("{source:?}").contains("mapped: true"));
    }

    #[test]
    fn errors_say_why() {
        let no_pmu =
            OpenError { event: "PERF_COUNT_HW_CACHE_MISSES", errno: Some(libc::ENOENT), paranoid: Some(2) };
        assert_eq!(
            no_pmu.to_string(),
            format!(
                "perf_event_open(PERF_COUNT_HW_CACHE_MISSES) failed: {}; this machine (or VM) exposes no hardware \
                 counter for the event",
                io::Error::from_raw_os_error(libc::ENOENT)
            )
        );
        let denied = OpenError { event: "X", errno: Some(libc::EACCES), paranoid: Some(3) };
        assert!(denied.to_string().ends_with("; not permitted (kernel.perf_event_paranoid = 3)"));
        let elsewhere = OpenError { event: "X", errno: None, paranoid: None };
        assert_eq!(elsewhere.to_string(), "perf_event_open(X) failed (perf events exist only on Linux)");
    }
}
