//! ULT stacks: guarded (the default) or unguarded with a canary, and the size rules for both.
//!
//! A **guarded** stack is one anonymous mapping whose lowest page is `PROT_NONE`: an overflow faults
//! instead of corrupting memory. It costs two kernel mappings, so `vm.max_map_count` (65530 by
//! default) caps live guarded stacks near 32 000; stacks are therefore pooled and reused, and only a
//! ULT that runs ever gets one.
//!
//! An **unguarded** stack comes from the heap with no guard page; a canary (a few words of a known
//! pattern at its lowest addresses) is checked after every switch out of the ULT, and a corrupted
//! canary aborts the process with a message naming the ULT. The check finds an overflow late (after it
//! happened), which is why the mode is opt-in and `unsafe` on the builder.
//!
//! # Colours
//!
//! Every stack gets a *colour*: its top (the base corosensei starts from) lies `colour × 64`
//! bytes below the top of its memory, for one of [`STACK_COLOURS`] colours given out in turn.
//! Without it every ULT stack's top would sit at the same offset within a page, and so would
//! the lines every switch touches there (the parent link corosensei writes at each resume, and
//! the saved registers of ULTs suspended at the same depth): those lines would all fall in the
//! cache sets of one page offset, 1/64 of the sets of a cache indexed by the address bits below
//! the page number (a 16-way 2 MiB cache could then hold the top lines of only 512 stacks, a
//! 12-way 48 KiB L1 those of 12). Coloured, they spread over 32 times as many sets. The colour
//! room comes on top of the usable size (one more page of address space, which stays
//! untouched and unbacked beyond the colour's offset), so a ULT always gets at least the stack
//! it asked for.

use corosensei::stack::{Stack, StackPointer};
use std::alloc::{self, Layout};
use std::io;

/// Smallest stack a ULT may ask for, in bytes.
///
/// Enough for small leaf ULTs (the ELiTE synchronization experiments run on 8 KiB stacks). A ULT
/// that spawns, panics (the default panic hook formats a message, and a backtrace under
/// `RUST_BACKTRACE=1`) or formats text needs about 32 KiB in debug builds; overflowing a guarded
/// stack faults in its guard page rather than corrupting memory.
pub const MIN_STACK_SIZE: usize = 8 * 1024;
/// Largest stack a ULT may ask for, in bytes.
pub const MAX_STACK_SIZE: usize = 1 << 30;
/// Stack size used when neither the runtime nor the spawn names one.
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;

/// Colours of stack tops (see the module docs): tops are spread over this many cache lines.
pub(crate) const STACK_COLOURS: usize = 32;
/// Bytes between two colours: one cache line.
const COLOUR_STEP: usize = 64;
/// Room reserved above the usable part for the colour offset: a page (at least
/// `STACK_COLOURS × COLOUR_STEP`), where an unguarded stack's base may need any page offset.
fn colour_room() -> usize {
    round_to_pages(STACK_COLOURS * COLOUR_STEP).max(page_size())
}

/// The colour of the next stack allocated: stacks take the colours in turn.
fn next_colour() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: any spread will do; allocating a stack is a cold path.
    NEXT.fetch_add(1, Ordering::Relaxed) % STACK_COLOURS
}

const CANARY_WORDS: usize = 8;
const CANARY: u64 = 0xE11E_57AC_CA4A_121E;

/// Rounds a requested size up to whole pages.
pub(crate) fn round_to_pages(size: usize) -> usize {
    let page = page_size();
    size.div_ceil(page) * page
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions; it returns -1 only for unknown names.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        page as usize
    } else {
        4096
    }
}

/// Which kind of stack the runtime hands out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StackKind {
    Guarded,
    Unguarded,
}

/// One ULT stack, owned. Dropping it returns the memory to the system.
pub(crate) struct UltStack {
    /// Lowest address of the whole allocation (the guard page for a guarded stack).
    low: usize,
    /// Bytes in the allocation, guard page and colour room included.
    len: usize,
    /// Usable bytes (what the ULT asked for, rounded to pages).
    usable: usize,
    /// The stack's base (where corosensei starts it): the top of the allocation less the
    /// colour's offset (less than a page), which puts the base at its colour's offset within its
    /// page. Kept, not recomputed: corosensei asks for it at every resume.
    base: usize,
    kind: StackKind,
}

// SAFETY: a stack is plain memory owned by this value; moving ownership between threads is fine.
unsafe impl Send for UltStack {}

impl UltStack {
    /// Allocates a stack with `usable` bytes (already validated and page-rounded).
    pub(crate) fn allocate(usable: usize, kind: StackKind) -> io::Result<UltStack> {
        match kind {
            StackKind::Guarded => Self::map_guarded(usable),
            StackKind::Unguarded => Self::alloc_unguarded(usable),
        }
    }

    fn map_guarded(usable: usize) -> io::Result<UltStack> {
        let page = page_size();
        let room = colour_room();
        let len = usable + room + page;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
        // existing memory; the result is checked for MAP_FAILED.
        let low = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if low == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let colour_offset = next_colour() * COLOUR_STEP;
        let base = low as usize + len - colour_offset;
        let stack = UltStack { low: low as usize, len, usable, base, kind: StackKind::Guarded };
        // SAFETY: the range [low + page, low + len) lies inside the mapping made above.
        let rc = unsafe {
            libc::mprotect(
                (stack.low + page) as *mut libc::c_void,
                usable + room,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            // `stack` is dropped here and unmaps the whole range.
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    fn alloc_unguarded(usable: usize) -> io::Result<UltStack> {
        // Room for any page offset: a heap block's top lies anywhere in a page.
        let len = usable + colour_room();
        let layout =
            Layout::from_size_align(len, 64).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the layout has a non-zero size (usable >= MIN_STACK_SIZE).
        let low = unsafe { alloc::alloc(layout) };
        if low.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        // The base's offset within its page is the colour's, as for a (page-aligned) guarded
        // stack: the highest such address at or below the top.
        let top = low as usize + len;
        let colour_offset = (top + next_colour() * COLOUR_STEP) % page_size();
        let base = top - colour_offset;
        let stack = UltStack { low: low as usize, len, usable, base, kind: StackKind::Unguarded };
        stack.write_canary();
        Ok(stack)
    }

    /// Usable bytes of this stack.
    pub(crate) fn usable(&self) -> usize {
        self.usable
    }

    fn write_canary(&self) {
        let words = self.low as *mut u64;
        for i in 0..CANARY_WORDS {
            // SAFETY: the first CANARY_WORDS words of an unguarded stack belong to its allocation,
            // which is 64-byte aligned and at least MIN_STACK_SIZE long.
            unsafe { words.add(i).write_volatile(CANARY) };
        }
    }

    /// Address of the canary (0 for a guarded stack, which has none).
    pub(crate) fn canary_addr(&self) -> usize {
        match self.kind {
            StackKind::Guarded => 0,
            StackKind::Unguarded => self.low,
        }
    }

    /// Address of the guard page (0 for an unguarded stack, which has none).
    pub(crate) fn guard_addr(&self) -> usize {
        match self.kind {
            StackKind::Guarded => self.low,
            StackKind::Unguarded => 0,
        }
    }

    /// True when the stack has no canary or its canary is intact.
    #[cfg(test)]
    fn canary_intact(&self) -> bool {
        // SAFETY: the stack is owned by `self` and live.
        unsafe { canary_intact_at(self.canary_addr()) }
    }
}

/// Checks the canary at `addr` (0: no canary, always intact).
///
/// # Safety
/// `addr` is 0 or the `canary_addr` of a live unguarded stack that no one writes meanwhile.
#[inline]
pub(crate) unsafe fn canary_intact_at(addr: usize) -> bool {
    if addr == 0 {
        return true;
    }
    let words = addr as *const u64;
    // SAFETY: per the contract, the canary words are live memory of an unguarded stack.
    (0..CANARY_WORDS).all(|i| unsafe { words.add(i).read_volatile() } == CANARY)
}

impl Drop for UltStack {
    fn drop(&mut self) {
        match self.kind {
            StackKind::Guarded => {
                // SAFETY: [low, low + len) is exactly the mapping made in `map_guarded`, unmapped once.
                unsafe { libc::munmap(self.low as *mut libc::c_void, self.len) };
            }
            StackKind::Unguarded => {
                // SAFETY: allocated in `alloc_unguarded` with this very layout, freed once.
                unsafe {
                    alloc::dealloc(self.low as *mut u8, Layout::from_size_align_unchecked(self.len, 64))
                };
            }
        }
    }
}

// SAFETY: `base` is the top of the allocation less the colour's offset (a multiple of 64 smaller
// than the colour room) and `limit` its bottom (guard page included), all page- or 64-byte
// aligned, hence aligned to STACK_ALIGNMENT; at least MIN_STACK_SIZE (> corosensei's minimum)
// usable bytes lie between, since the colour room is allocated on top of the usable size. An
// unguarded stack lacks the guard page corosensei asks for: that is the documented, opt-in
// (`unsafe`) trade, covered by the canary check.
unsafe impl Stack for UltStack {
    #[inline]
    fn base(&self) -> StackPointer {
        // A mapping or heap block never starts at address zero, and the colour's offset is smaller
        // than the colour room above the usable part, so the base is non-zero.
        StackPointer::new(self.base).unwrap_or(StackPointer::MIN)
    }

    #[inline]
    fn limit(&self) -> StackPointer {
        let limit = if self.kind == StackKind::Unguarded {
            // Keep the canary below the usable part.
            self.low + CANARY_WORDS * 8
        } else {
            self.low
        };
        StackPointer::new(limit).unwrap_or(StackPointer::MIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot map PROT_NONE memory")]
    fn guarded_stack_is_writable_and_sized() {
        let s = UltStack::allocate(round_to_pages(MIN_STACK_SIZE), StackKind::Guarded).unwrap();
        assert_eq!(s.usable(), MIN_STACK_SIZE);
        // At least the usable size and the guard page lie below the base, whatever its colour.
        let below = s.base().get() - s.limit().get();
        assert!(below >= MIN_STACK_SIZE + page_size(), "{below}");
        assert!(below <= MIN_STACK_SIZE + page_size() + colour_room(), "{below}");
        // The byte just below the base is writable.
        // SAFETY: the top page of the usable range was made read-write.
        unsafe { ((s.base().get() - 1) as *mut u8).write_volatile(7) };
        assert!(s.canary_intact());
    }

    #[test]
    fn unguarded_canary_detects_corruption() {
        let s = UltStack::allocate(MIN_STACK_SIZE, StackKind::Unguarded).unwrap();
        assert!(s.canary_intact());
        // SAFETY: the first word belongs to the allocation.
        unsafe { (s.low as *mut u64).write_volatile(0) };
        assert!(!s.canary_intact());
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot map PROT_NONE memory")]
    fn stack_tops_take_the_colours_in_turn() {
        for kind in [StackKind::Guarded, StackKind::Unguarded] {
            let stacks: Vec<UltStack> = (0..2 * STACK_COLOURS)
                .map(|_| UltStack::allocate(round_to_pages(MIN_STACK_SIZE), kind).unwrap())
                .collect();
            // Other tests allocate stacks at the same time, so the colours need not be
            // consecutive here; but they are all used, and each is a line of its own.
            let mut offsets: Vec<usize> = stacks.iter().map(|s| s.base().get() % 4096 / 64).collect();
            offsets.sort_unstable();
            offsets.dedup();
            assert!(offsets.len() > STACK_COLOURS / 2, "{kind:?}: {offsets:?}");
            for s in &stacks {
                assert_eq!(s.base().get() % 64, 0);
                assert!(s.base().get() - s.limit().get() >= s.usable());
                // The top byte below the base is writable.
                // SAFETY: it lies in the usable (read-write) part of the stack.
                unsafe { ((s.base().get() - 1) as *mut u8).write_volatile(7) };
                assert!(s.canary_intact());
            }
        }
    }

    #[test]
    fn page_rounding() {
        let p = page_size();
        assert_eq!(round_to_pages(1), p);
        assert_eq!(round_to_pages(p), p);
        assert_eq!(round_to_pages(p + 1), 2 * p);
    }
}
