//! The current-processor slot: which processor the calling OS thread runs (DESIGN §8). A ULT may
//! resume on another OS thread after any switch, so every read finds the slot of the thread
//! running it at that moment.

use crate::processor::Processor;
use std::ptr;

/// The processor running on this OS thread (null: none), behind [`current_processor`].
///
/// Where a ULT may resume on another OS thread after any switch (DESIGN §8), the compiler must
/// not reuse a thread-local's address computed before a switch; a Rust `thread_local!` gives
/// no such promise (LLVM takes a thread-local's address to be the same all through a function).
/// So on x86-64 Linux the slot is a thread-local word of our own, defined in assembly, and every
/// read and write is an `asm!` block (not `pure`: the compiler runs each one where it is written,
/// never hoisting, merging or caching it) that finds the word from the thread pointer `%fs` of
/// the OS thread running it at that moment: the accessor inlines, a ULT's channel operation pays
/// two loads instead of a call through the GOT. The word is reached with the initial-exec
/// model (its offset from the thread pointer, read from the GOT; the linker turns that into a
/// constant in an executable): valid in every thread of the process. Limits: a shared library
/// holding this crate that is loaded by `dlopen` needs static TLS space for its whole TLS
/// segment (its other thread-locals too), of which glibc keeps a small reserve, so the load may
/// fail; and a Rust `dylib` build of this crate does not link (the word is hidden, and generic
/// code inlined into other crates names it). Elsewhere (and under
/// loom and Miri, which run no inline assembly), a `thread_local!` behind an `#[inline(never)]`
/// accessor.
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64", target_os = "linux", not(loom), not(miri)))]
mod word {
    use super::Processor;

    // One 8-byte thread-local word, zero (null) in every new thread. Global but hidden: it is
    // reached from the crates that inline the accessors (generic code instantiated there), all
    // linked into one module with this crate. Its name carries the crate's semver-compatible
    // version, so that two incompatible versions linked into one program keep two words (two
    // copies under one name would fail to link, never share a word).
    std::arch::global_asm!(
        ".pushsection .tbss.elite_rt_current_processor,\"awT\",@nobits",
        ".p2align 3",
        ".globl elite_rt_current_processor_0_1",
        ".hidden elite_rt_current_processor_0_1",
        ".type elite_rt_current_processor_0_1,@object",
        ".size elite_rt_current_processor_0_1,8",
        "elite_rt_current_processor_0_1:",
        ".zero 8",
        ".popsection",
    );

    #[inline(always)]
    pub(super) fn get() -> *const Processor {
        let p: *const Processor;
        // SAFETY: reads this thread's word (8 bytes, aligned, in the thread's static TLS block
        // at the offset the GOT holds); writes only the output register.
        unsafe {
            std::arch::asm!(
                "mov {p}, qword ptr [rip + elite_rt_current_processor_0_1@GOTTPOFF]",
                "mov {p}, qword ptr fs:[{p}]",
                p = out(reg) p,
                options(nostack, preserves_flags, readonly),
            );
        }
        p
    }

    #[inline]
    pub(super) fn set(p: *const Processor) {
        // SAFETY: writes this thread's word (as `get` reads it), nothing else.
        unsafe {
            std::arch::asm!(
                "mov {o}, qword ptr [rip + elite_rt_current_processor_0_1@GOTTPOFF]",
                "mov qword ptr fs:[{o}], {p}",
                o = out(reg) _,
                p = in(reg) p,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// [`word`] elsewhere: a `thread_local!`, read only by a never-inlined function.
#[cfg(not(all(
    target_arch = "x86_64",
    target_pointer_width = "64",
    target_os = "linux",
    not(loom),
    not(miri)
)))]
mod word {
    use super::Processor;
    use std::cell::Cell;
    use std::ptr;

    thread_local! {
        static CURRENT: Cell<*const Processor> = const { Cell::new(ptr::null()) };
    }

    /// Never inlined: an inlined thread-local access could let the compiler reuse the address
    /// it computed before a switch (DESIGN §8).
    #[inline(never)]
    pub(super) fn get() -> *const Processor {
        CURRENT.with(|c| c.get())
    }

    #[inline]
    pub(super) fn set(p: *const Processor) {
        CURRENT.with(|c| c.set(p));
    }
}

/// The processor running on this OS thread, if any.
///
/// A ULT may resume on another OS thread after any switch (DESIGN §8): each call reads the slot
/// of the OS thread running it at that moment ([`word`]: an inline `asm!` read on x86-64
/// Linux, a never-inlined function elsewhere), but the reference it returns is only good until
/// the caller's next switch. Call it again after every switch; never keep the reference across
/// one.
#[inline(always)]
pub(crate) fn current_processor<'a>() -> Option<&'a Processor> {
    let p = word::get();
    // SAFETY: the pointer is set by `Processor::run` (and the blocking handoff) while this thread
    // runs the processor, and cleared before it stops running it; a processor lives in its
    // `ProcessorSet` as long as any thread that may run it. ULTs only run inside the loop.
    unsafe { p.as_ref() }
}

/// Names `p` (or none) as the processor running on this OS thread: at a take-over, and around a
/// blocking call, during which the thread runs none.
#[inline]
pub(crate) fn set_current_processor(p: Option<&Processor>) {
    word::set(p.map_or(ptr::null(), |p| p as *const Processor));
}
