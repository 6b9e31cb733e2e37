//! Stack overflow reports: a `SIGSEGV`/`SIGBUS` handler, run on an alternate signal stack, that names
//! the ULT whose guard page was hit.
//!
//! A ULT that overflows its guarded stack touches the `PROT_NONE` page below it (Rust's stack
//! probes make even a large frame touch it first) and the kernel raises `SIGSEGV`. Without help the
//! process dies with a bare "Segmentation fault"; std's own handler only knows the OS thread's
//! stack, not ours. This module adds the help:
//!
//! * [`install`], once per process (when the first runtime starts): remembers the actions that
//!   `SIGSEGV` and `SIGBUS` had (std's overflow handler, a sanitizer's, or the default), then
//!   installs [`on_fault`] with `SA_SIGINFO | SA_ONSTACK`.
//! * [`AltStack`], once per processor thread (when the thread starts, dropped when it ends): the
//!   thread's own alternate signal stack, so the handler has a stack to run on when the ULT's is
//!   exhausted.
//! * [`on_fault`]: if the fault address lies in the guard page of the ULT running on this OS thread,
//!   writes one message naming the ULT (id, name) and its stack size to stderr and aborts.
//!   Any other fault goes to the action that was there before: a handler installed before ours
//!   is called as it would have been; a default or ignored action is restored, and returning
//!   re-executes the faulting instruction, which now faults with the default action (the process
//!   dies of the signal, as it would have without us).
//!
//! # What the handler reads, and why that is async-signal-safe
//!
//! The handler allocates nothing, takes no lock and calls only `write(2)`, `sigaction(2)` and
//! `abort(3)`. Its facts are all reachable without running anything: the processor of this OS
//! thread (a constant-initialized thread-local pointer, a plain load), that processor's current
//! ULT (set at every switch already, so the switch path pays nothing for the report), and in
//! that ULT's TCB the guard page address (`Tcb::guard_at`, written once when the ULT gets its
//! stack), id, name bytes and stack size, all written before the ULT first ran and not changed
//! while it runs. The message is formatted into a buffer on the alternate stack.
//!
//! The previous actions are written before ours is installed and never again, so a handler that
//! can run has them; `INSTALLED` (release/acquire) says so explicitly.

use crate::slot::current_processor;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Once;

/// The signals a guard-page hit raises: `SIGSEGV` on Linux, `SIGBUS` on some other systems.
const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// The actions the signals had before [`install`], in the order of [`SIGNALS`].
struct PreviousActions(UnsafeCell<[MaybeUninit<libc::sigaction>; 2]>);

// SAFETY: written once inside `INSTALL` before `INSTALLED` is set (release) and before our handler
// is installed; read only by the handler after it saw `INSTALLED` (acquire).
unsafe impl Sync for PreviousActions {}

static PREVIOUS: PreviousActions = PreviousActions(UnsafeCell::new([MaybeUninit::uninit(); 2]));
static INSTALLED: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();
/// The page size, read once at install (`sysconf` is not async-signal-safe).
static PAGE: AtomicUsize = AtomicUsize::new(0);

/// Bytes of each processor thread's alternate signal stack (plus a guard page below it). The
/// handler needs well under 1 KiB; the rest is for a chained handler and large signal frames.
const ALT_STACK_BYTES: usize = 64 * 1024;

/// Installs the overflow handler for `SIGSEGV` and `SIGBUS`, once per process. A signal whose
/// action cannot be read or set keeps the action it has.
pub(crate) fn install() {
    INSTALL.call_once(|| {
        PAGE.store(crate::stack::page_size(), Ordering::Relaxed);
        let slots = PREVIOUS.0.get();
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY: `Once` runs this closure on one thread, and no handler of ours exists yet, so
            // nothing reads the slot; sigaction with a null new action only reads the current one.
            unsafe {
                let slot = (*slots)[i].as_mut_ptr();
                if libc::sigaction(sig, ptr::null(), slot) != 0 {
                    // Cannot read it: act as if it were the default (a sigaction of zeros).
                    slot.write(std::mem::zeroed());
                }
            }
        }
        INSTALLED.store(true, Ordering::Release);
        for &sig in &SIGNALS {
            // SAFETY: a zeroed sigaction is a valid value; the fields are then set to our handler, a
            // full mask of nothing blocked beyond the signal itself, and the flags we need.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_fault as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(sig, &action, ptr::null_mut());
            }
        }
    });
}

/// Runs `body` (a processor thread's whole life) with an [`AltStack`] installed on the calling
/// thread.
pub(crate) fn with_alt_stack(body: impl FnOnce()) {
    let _alt = AltStack::install();
    run_outlined(body);
}

/// Calls `body` from a frame of its own, so the processor loop inside is compiled as it would be
/// without the guard above (a guard live across an inlined loop takes registers from it, and
/// costs it instructions on every iteration).
#[inline(never)]
fn run_outlined(body: impl FnOnce()) {
    body()
}

/// A processor thread's alternate signal stack: installed by [`AltStack::install`] on the calling
/// thread, and when dropped (on the same thread) the one it replaced is reinstated and the memory
/// unmapped.
pub(crate) struct AltStack {
    /// The mapping (guard page included), or null when none could be made.
    low: *mut libc::c_void,
    len: usize,
    /// The thread's alternate stack before ours (std gives its threads one).
    previous: libc::stack_t,
}

impl AltStack {
    /// Gives the calling thread an alternate signal stack of its own. When memory or the call fails,
    /// the thread keeps whatever it had (std's threads have a small one) and nothing is undone.
    pub(crate) fn install() -> AltStack {
        let page = crate::stack::page_size();
        let len = ALT_STACK_BYTES + page;
        let mut alt = AltStack {
            low: ptr::null_mut(),
            len,
            // SAFETY: stack_t is plain data; all zeros is a valid (if meaningless) value.
            previous: unsafe { std::mem::zeroed() },
        };
        // SAFETY: a fresh anonymous private mapping touches no existing memory; checked below.
        let low = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if low == libc::MAP_FAILED {
            return alt;
        }
        // SAFETY: the first page lies inside the mapping just made; turning it into a guard page
        // keeps a handler that overflows the alternate stack from writing below it.
        unsafe { libc::mprotect(low, page, libc::PROT_NONE) };
        let stack = libc::stack_t {
            // SAFETY: `low + page` is inside the mapping.
            ss_sp: unsafe { (low as *mut u8).add(page) } as *mut libc::c_void,
            ss_flags: 0,
            ss_size: ALT_STACK_BYTES,
        };
        // SAFETY: `stack` describes live memory owned by `alt` until it is dropped, and the
        // previous stack is written to a valid stack_t.
        if unsafe { libc::sigaltstack(&stack, &mut alt.previous) } != 0 {
            // SAFETY: the mapping made above, not in use by anyone.
            unsafe { libc::munmap(low, len) };
            return alt;
        }
        alt.low = low;
        alt
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        if self.low.is_null() {
            return;
        }
        // Reinstate the previous alternate stack (or none): its owner (std) frees it at thread exit.
        let mut previous = self.previous;
        if previous.ss_sp.is_null() || previous.ss_flags & libc::SS_DISABLE != 0 {
            previous = libc::stack_t { ss_sp: ptr::null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 };
        } else {
            previous.ss_flags = 0;
        }
        // SAFETY: `previous` is what sigaltstack reported for this thread (still alive: its owner
        // frees it only after this drop), or a disable request; we are not running on the alternate
        // stack (a drop is ordinary thread code).
        unsafe { libc::sigaltstack(&previous, ptr::null_mut()) };
        // SAFETY: our mapping is no longer the thread's alternate stack.
        unsafe { libc::munmap(self.low, self.len) };
    }
}

/// The signal handler (see the module docs). Never unwinds.
extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // A positive code means the kernel raised it for a fault; `kill` and friends use codes <= 0.
    if code > 0 {
        report_if_overflow(addr);
    }
    // SAFETY: we run as the handler of `sig` with the kernel's `info` and `context`.
    unsafe { chain(sig, info, context) };
}

/// Writes the report and aborts when `addr` is in the guard page of the ULT running on this thread.
fn report_if_overflow(addr: usize) {
    // (A ULT anchored to its OS thread while it unwinds runs with no processor: `crate::anchor`;
    // the thread-local read is a plain load, safe in a signal handler.)
    let Some(t) = current_processor().and_then(|p| p.current_ult()).or_else(crate::anchor::anchored) else {
        return;
    };
    let tcb = t.tcb();
    let guard = tcb.exec.guard_at.get();
    let page = PAGE.load(Ordering::Relaxed);
    if guard == 0 || addr < guard || addr >= guard + page {
        return;
    }
    // SAFETY: the name is written at spawn, before the ULT first ran, and immutable while it runs;
    // reading the bytes of the `Arc<str>` touches no reference count.
    let name = unsafe { (*tcb.links.name.get()).as_deref() };
    let mut msg = Message::new();
    msg.push(b"\nULT '");
    msg.push_name(name.unwrap_or("<unnamed>"));
    msg.push(b"' (id ");
    msg.push_u64(tcb.head.id.get());
    msg.push(b") has overflowed its stack of ");
    msg.push_u64(tcb.head.stack_size.get() as u64);
    msg.push(b" bytes (guard page hit at 0x");
    msg.push_hex(addr as u64);
    msg.push(b")\nelite-rt: fatal runtime error: stack overflow in a ULT, aborting\n");
    msg.write_to_stderr();
    // SAFETY: abort is async-signal-safe and never returns.
    unsafe { libc::abort() }
}

/// Passes a fault that is not a ULT's overflow to the action that was there before ours.
///
/// # Safety
/// Called only from [`on_fault`], with its arguments.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let Some(i) = SIGNALS.iter().position(|&s| s == sig) else {
        return;
    };
    if !INSTALLED.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: written before INSTALLED was set (acquire above), never written again.
    let previous = unsafe { (*PREVIOUS.0.get())[i].assume_init_ref() };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Restore the default (an ignored fault would re-execute forever) and return: the faulting
        // instruction runs again and the kernel applies the default action.
        // SAFETY: a zeroed sigaction is SIG_DFL with no flags; sigaction is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, ptr::null_mut());
        }
    } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: with SA_SIGINFO the stored address is a three-argument handler, called as the
        // kernel would have called it.
        unsafe {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            f(sig, info, context)
        }
    } else {
        // SAFETY: without SA_SIGINFO the stored address is a one-argument handler.
        unsafe {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(sig)
        }
    }
}

/// The calling thread's `errno` (read directly: no `io::Error` is built in a signal handler).
fn errno() -> libc::c_int {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// A message formatted without allocation, on the (alternate) stack.
struct Message {
    bytes: [u8; 512],
    len: usize,
}

/// Most bytes of a ULT's name the report prints.
const NAME_BYTES: usize = 128;

impl Message {
    fn new() -> Message {
        Message { bytes: [0; 512], len: 0 }
    }

    /// Appends as much of `s` as fits.
    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    /// Appends a name, cut to `NAME_BYTES` at a character boundary.
    fn push_name(&mut self, name: &str) {
        let mut end = name.len().min(NAME_BYTES);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        self.push(&name.as_bytes()[..end]);
        if end < name.len() {
            self.push(b"...");
        }
    }

    fn push_u64(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    fn push_hex(&mut self, mut v: u64) {
        let mut digits = [0u8; 16];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b"0123456789abcdef"[(v & 0xf) as usize];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    /// Writes the message with `write(2)`, retrying short writes and interruptions.
    fn write_to_stderr(&self) {
        let mut done = 0;
        while done < self.len {
            // SAFETY: the range lies inside `bytes`; write is async-signal-safe.
            let n = unsafe {
                libc::write(libc::STDERR_FILENO, self.bytes[done..].as_ptr().cast(), self.len - done)
            };
            if n > 0 {
                done += n as usize;
            } else if n < 0 && errno() == libc::EINTR {
                continue;
            } else {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(m: &Message) -> &str {
        std::str::from_utf8(&m.bytes[..m.len]).unwrap()
    }

    #[test]
    fn formats_numbers_and_names_without_allocating() {
        let mut m = Message::new();
        m.push_u64(0);
        m.push(b" ");
        m.push_u64(u64::MAX);
        m.push(b" 0x");
        m.push_hex(0xdead_beef);
        m.push(b" ");
        m.push_name("worker");
        assert_eq!(text(&m), "0 18446744073709551615 0xdeadbeef worker");
    }

    #[test]
    fn long_names_are_cut_at_a_character_boundary() {
        let name = "é".repeat(100); // 200 bytes, two per character
        let mut m = Message::new();
        m.push_name(&name);
        let t = text(&m);
        assert!(t.ends_with("..."));
        assert_eq!(t.len(), NAME_BYTES + 3);
    }

    #[test]
    fn a_full_buffer_drops_the_rest() {
        let mut m = Message::new();
        for _ in 0..100 {
            m.push(b"0123456789");
        }
        assert_eq!(m.len, 512);
    }
}
