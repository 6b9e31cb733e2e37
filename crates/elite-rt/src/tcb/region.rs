//! Where a runtime's TCB chunks live: the heap while they are few, huge-page regions once they
//! are many, while huge pages cost no more than base pages to bring in.
//!
//! A runtime that holds many ULTs at once (a million spawned before any is joined: hundreds of
//! megabytes of TCBs) touches a TCB on another page at every spawn and every join, and with
//! 4 KiB pages nearly every such touch misses the TLB and walks the page tables. So once the
//! chunks a runtime allocated on the heap fill a huge page ([`Chunks::push_new`]), its next
//! chunks are carved from regions of one huge page each, mapped aligned to it and advised for
//! transparent huge pages (`MADV_HUGEPAGE`): one TLB entry then covers 85 chunks. A runtime
//! with few ULTs never maps a region, so it costs no huge page. Where the kernel has no
//! transparent huge pages (or the advice is refused) a region is plain memory, no worse than the
//! heap; where no region can be mapped (or under Miri and loom, which model no `mmap`), chunks
//! stay on the heap, as they do in a runtime built with `RuntimeBuilder::huge_page_tcbs(false)`.
//! Regions are unmapped with the runtime's shared state, after every chunk.
//!
//! # When huge pages cost more than they save
//!
//! The kernel zeroes a huge page whole at its first touch, which costs about what the base
//! pages it replaces would cost one by one, and saves their page faults. Some virtual machines
//! differ: a huge page the guest has not used before is backed anew by the host, page by page,
//! at that first touch, while base pages come from memory the guest freed recently; there a
//! region's first touch can take several times what its bytes cost in base pages, and a program
//! that spawns a million ULTs once would pay that on every region. So each new region's first touch is timed ([`Regions::chunk_memory`])
//! against what the same bytes cost in base pages on this host ([`base_page_cost`], measured
//! once per process, at the first region, on a scratch mapping): when the region cost more than
//! [`HUGE_PAGE_MARGIN`] times that, the runtime maps no further regions, and its later chunks go
//! on the heap. It keeps the regions it has, so at most one slow region is paid for per runtime;
//! a later runtime in the process looks again (huge pages freed by an earlier one come back
//! cheap). `Runtime::stats` reports the TCBs in regions and the region that stopped them
//! (`TcbStats`).

use super::{Chunk, Tcb, TcbRef, CHUNK_TCBS};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bytes of one chunk's TCBs.
const CHUNK_BYTES: usize = CHUNK_TCBS * std::mem::size_of::<Tcb>();

/// The largest huge page a region is made of: a host whose transparent huge pages are larger
/// (512 MiB with 64 KiB base pages on some ARM hosts) keeps its chunks on the heap.
const MOST_HUGE_PAGE: usize = 32 << 20;

/// How many times what its bytes cost in base pages a new region's first touch may take
/// before the runtime maps no further regions (module docs, "When huge pages cost more than they
/// save"): its TLB savings pay for a region that costs somewhat more to bring in, not for one
/// that costs several times as much.
const HUGE_PAGE_MARGIN: f64 = 2.0;

/// Base pages touched to measure what a base page costs to bring in ([`base_page_cost`]).
const BASE_PAGE_SAMPLE: usize = 128;

/// Every chunk of a runtime, and the regions that hold those not on the heap. The chunks come
/// first so that they drop before the regions holding their TCBs.
pub(crate) struct Chunks {
    /// Boxed so that each chunk keeps its address: its TCBs point back to it.
    #[allow(clippy::vec_box)]
    list: Vec<Box<Chunk>>,
    regions: Regions,
}

impl Chunks {
    /// The chunks of a new runtime: huge-page regions after the first huge page's worth when
    /// `regions` (`RuntimeBuilder::huge_page_tcbs`) and the host has transparent huge pages.
    pub(crate) fn new(regions: bool) -> Chunks {
        Chunks { list: Vec::new(), regions: Regions::new(if regions { huge_page_size() } else { None }) }
    }

    /// Allocates a chunk of TCBs for the runtime whose shared state is `shared`, keeps it, and
    /// returns its TCBs: on the heap until the chunks there fill a huge page, then in a region.
    pub(crate) fn push_new<S: Send + Sync>(&mut self, shared: &Arc<S>) -> Vec<TcbRef> {
        let chunk = match self.regions.chunk_memory(self.list.len() * CHUNK_BYTES) {
            // SAFETY: the memory is a region's, aligned for TCBs, large enough for a chunk, given
            // out once, and the region outlives the chunk (unmapped after `list` drops).
            Some(memory) => unsafe { Chunk::allocate_at(shared, memory) },
            None => Chunk::allocate(shared),
        };
        let tcbs = chunk.tcbs().collect();
        self.list.push(chunk);
        tcbs
    }

    /// How many TCBs were allocated, how many sit in regions, and why regions stopped, if they
    /// did (for `Runtime::stats`).
    pub(crate) fn stats(&self) -> crate::TcbStats {
        crate::TcbStats {
            allocated: (self.list.len() * CHUNK_TCBS) as u64,
            in_regions: (self.list.iter().filter(|c| c.in_region).count() * CHUNK_TCBS) as u64,
            regions_stopped: self.regions.stopped,
        }
    }

    /// The chunks allocated so far.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Chunk> {
        self.list.iter().map(|c| &**c)
    }

    /// How many regions hold chunks (for tests).
    #[cfg(test)]
    pub(crate) fn regions(&self) -> usize {
        self.regions.mapped.len()
    }

    /// The same chunks with `cost` taken as what a region's bytes cost in base pages, instead of
    /// measuring it (for tests: `Duration::MAX` keeps every region, zero ends them at the first).
    #[cfg(test)]
    fn with_base_page_cost(mut self, cost: Duration) -> Chunks {
        self.regions.base_pages = Some(cost);
        self
    }
}

/// The size of the host's transparent huge pages, when it has them and they are no larger than
/// [`MOST_HUGE_PAGE`]; `None` under Miri and loom.
fn huge_page_size() -> Option<usize> {
    if cfg!(any(miri, loom)) {
        return None;
    }
    static SIZE: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").ok()?;
        let size: usize = text.trim().parse().ok()?;
        (size.is_power_of_two() && (CHUNK_BYTES..=MOST_HUGE_PAGE).contains(&size)).then_some(size)
    })
}

/// The regions of one runtime and the free part of the newest.
struct Regions {
    /// The huge page size, and so each region's; `None`: no regions (or no further ones).
    size: Option<usize>,
    mapped: Vec<Region>,
    /// The next chunk's place in the newest region, and that region's end (equal: none free).
    next: usize,
    end: usize,
    /// What a region's bytes cost to bring in as base pages ([`base_page_cost`]), once a region
    /// is about to be mapped.
    base_pages: Option<Duration>,
    /// The region that cost too much, once one did: its first touch and its base-page cost.
    stopped: Option<crate::RegionsStopped>,
}

impl Regions {
    fn new(size: Option<usize>) -> Regions {
        Regions { size, mapped: Vec::new(), next: 0, end: 0, base_pages: None, stopped: None }
    }

    /// Memory for one more chunk, when `heap_bytes` (the chunks allocated so far, all on the heap
    /// while no region is mapped) fill a huge page: from the newest region, or a new one, unless
    /// the last new one cost too much to bring in (module docs). `None`: the chunk goes on the
    /// heap.
    fn chunk_memory(&mut self, heap_bytes: usize) -> Option<NonNull<Tcb>> {
        if self.end - self.next < CHUNK_BYTES {
            let size = self.size?;
            if self.mapped.is_empty() && heap_bytes < size {
                return None;
            }
            let base_pages = self.base_pages.get_or_insert_with(|| base_page_cost(size));
            let region = Region::map(size)?;
            let took = region.first_touch();
            if !huge_pages_pay(took, *base_pages) {
                self.size = None; // (this region is used up first)
                self.stopped = Some(crate::RegionsStopped { first_touch: took, base_pages: *base_pages });
            }
            (self.next, self.end) = (region.base.as_ptr() as usize, region.base.as_ptr() as usize + size);
            self.mapped.push(region);
        }
        let at = self.next;
        self.next += CHUNK_BYTES;
        NonNull::new(at as *mut Tcb)
    }
}

/// Whether a region whose first touch took `took` pays for itself against `base_pages`, what
/// its bytes cost to bring in as base pages (module docs): at most [`HUGE_PAGE_MARGIN`] times that.
fn huge_pages_pay(took: Duration, base_pages: Duration) -> bool {
    took.as_secs_f64() <= HUGE_PAGE_MARGIN * base_pages.as_secs_f64()
}

/// What bringing in `bytes` of fresh memory costs here in base pages: [`BASE_PAGE_SAMPLE`] pages
/// of a scratch mapping advised against huge pages, each touched once and timed (once per
/// process), then unmapped, scaled to `bytes`. [`Duration::MAX`] where the scratch mapping fails:
/// regions are then kept, as before any measurement.
fn base_page_cost(bytes: usize) -> Duration {
    static SAMPLE: std::sync::OnceLock<Option<(Duration, usize)>> = std::sync::OnceLock::new();
    let sample = SAMPLE.get_or_init(|| {
        let page = crate::stack::page_size();
        let span = BASE_PAGE_SAMPLE * page;
        let at = map_anonymous(span)?;
        // SAFETY: the range is the mapping just made; advice only (refused: the sample may take
        // a huge page, and reads cheaper, which only keeps regions).
        unsafe { libc::madvise(at, span, libc::MADV_NOHUGEPAGE) };
        let began = Instant::now();
        for i in 0..BASE_PAGE_SAMPLE {
            // SAFETY: inside the mapping, writable, and nothing else refers to it.
            unsafe { std::ptr::write_volatile((at as *mut u8).add(i * page), 1) };
        }
        let took = began.elapsed();
        // SAFETY: the mapping made above; nothing refers to it any more.
        unsafe { libc::munmap(at, span) };
        Some((took, span))
    });
    sample.map_or(Duration::MAX, |(took, span)| took.mul_f64(bytes as f64 / span as f64))
}

/// A private anonymous read-write mapping of `len` bytes at an address the kernel picks; `None`
/// when the kernel refuses it.
fn map_anonymous(len: usize) -> Option<*mut libc::c_void> {
    // SAFETY: an anonymous private mapping at an address the kernel picks; no memory of ours is
    // involved.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (at != libc::MAP_FAILED).then_some(at)
}

/// One huge page of memory, mapped at an address aligned to its size; unmapped on drop.
struct Region {
    base: NonNull<u8>,
    size: usize,
}

impl Region {
    /// Maps `size` bytes (a power of two) aligned to `size` and advises them for transparent huge
    /// pages; `None` when the mapping fails.
    fn map(size: usize) -> Option<Region> {
        // Twice the size, then the unaligned ends are given back: what is left is aligned.
        let span = 2 * size;
        let at = map_anonymous(span)?;
        let start = at as usize;
        let base = (start + size - 1) & !(size - 1);
        let (head, tail) = (base - start, start + span - (base + size));
        // SAFETY: both ranges lie in the mapping just made, outside the aligned part kept, and
        // nothing refers to them. (A failure leaves them mapped: address space, no memory.)
        unsafe {
            if head > 0 {
                libc::munmap(start as *mut libc::c_void, head);
            }
            if tail > 0 {
                libc::munmap((base + size) as *mut libc::c_void, tail);
            }
            // Advice only: refused (no transparent huge pages), the region is plain memory.
            libc::madvise(base as *mut libc::c_void, size, libc::MADV_HUGEPAGE);
        }
        Some(Region { base: NonNull::new(base as *mut u8)?, size })
    }
}

impl Region {
    /// Touches the region for the first time (a byte written at its start: the kernel brings in
    /// the huge page, or a base page where it gave none); how long that took.
    fn first_touch(&self) -> Duration {
        let began = Instant::now();
        // SAFETY: the region is mapped, writable and not yet handed out; chunks overwrite it.
        unsafe { std::ptr::write_volatile(self.base.as_ptr(), 0) };
        began.elapsed()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the region was mapped by `map` and nothing in it is used any more: `Chunks`
        // drops its chunks (and with them their TCBs) before its regions.
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.size) };
    }
}

// SAFETY: a region is plain memory owned by the runtime's shared state (in its `Mutex`); the
// TCBs in it are `Sync` and reached through their chunks.
unsafe impl Send for Region {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_move_to_regions_once_the_heap_ones_fill_a_huge_page() {
        let owner = Arc::new(());
        // (However slow this host's huge pages: the fault-cost check has a test of its own.)
        let mut chunks = Chunks::new(true).with_base_page_cost(Duration::MAX);
        let Some(size) = huge_page_size() else {
            // No transparent huge pages here: every chunk stays on the heap.
            for _ in 0..4 {
                chunks.push_new(&owner);
            }
            assert_eq!(chunks.regions(), 0);
            return;
        };
        let on_heap = size.div_ceil(CHUNK_BYTES);
        for _ in 0..on_heap {
            chunks.push_new(&owner);
        }
        assert_eq!(chunks.regions(), 0, "a huge page's worth of chunks goes on the heap first");
        let per_region = size / CHUNK_BYTES;
        let mut tcbs = Vec::new();
        for _ in 0..per_region + 1 {
            tcbs.extend(chunks.push_new(&owner));
        }
        assert_eq!(chunks.regions(), 2, "one region holds {per_region} chunks, the next one more");
        let first = tcbs[0].as_ptr() as usize;
        assert_eq!(first % size, 0, "a region starts on a huge page's boundary");
        for (i, t) in tcbs.iter().enumerate().take(per_region * CHUNK_TCBS) {
            assert_eq!(t.as_ptr() as usize, first + i * std::mem::size_of::<Tcb>(), "TCB {i} in place");
            assert_eq!(t.chunk().tcbs().count(), CHUNK_TCBS);
            // Fresh and usable: every TCB starts free.
            assert_eq!(t.tcb().head.life.get(), super::super::Life::Free);
        }
        assert_eq!(chunks.iter().count(), on_heap + per_region + 1);
        let stats = chunks.stats();
        assert_eq!(stats.allocated, ((on_heap + per_region + 1) * CHUNK_TCBS) as u64);
        assert_eq!(stats.in_regions, ((per_region + 1) * CHUNK_TCBS) as u64);
        assert_eq!(stats.regions_stopped, None);
    }

    #[test]
    fn without_regions_every_chunk_stays_on_the_heap() {
        let owner = Arc::new(());
        let mut chunks = Chunks::new(false);
        let many = huge_page_size().unwrap_or(2 << 20).div_ceil(CHUNK_BYTES) + 2;
        for _ in 0..many {
            chunks.push_new(&owner);
        }
        assert_eq!(chunks.regions(), 0);
        assert_eq!(chunks.iter().count(), many);
    }

    #[test]
    fn a_region_that_costs_more_than_its_base_pages_is_the_last() {
        let Some(size) = huge_page_size() else {
            return; // no regions here at all (the test above covers that)
        };
        let owner = Arc::new(());
        // Base pages that cost nothing: any first touch of a region costs more.
        let mut chunks = Chunks::new(true).with_base_page_cost(Duration::ZERO);
        let (on_heap, per_region) = (size.div_ceil(CHUNK_BYTES), size / CHUNK_BYTES);
        let mut in_region = Vec::new();
        for i in 0..on_heap + 3 * per_region {
            let tcbs = chunks.push_new(&owner);
            if (on_heap..on_heap + per_region).contains(&i) {
                in_region.extend(tcbs);
            }
        }
        assert_eq!(chunks.regions(), 1, "no region after the one that cost too much");
        let first = in_region[0].as_ptr() as usize;
        assert_eq!(first % size, 0, "the costly region is still used up");
        for (i, t) in in_region.iter().enumerate() {
            assert_eq!(t.as_ptr() as usize, first + i * std::mem::size_of::<Tcb>(), "TCB {i} in the region");
        }
        assert_eq!(chunks.iter().count(), on_heap + 3 * per_region);
        let stats = chunks.stats();
        assert_eq!(stats.in_regions, (per_region * CHUNK_TCBS) as u64, "one region's chunks");
        let stop = stats.regions_stopped.expect("the costly region is reported");
        assert_eq!(stop.base_pages, Duration::ZERO);
        assert!(stop.first_touch > Duration::ZERO);
    }

    #[test]
    fn huge_pages_pay_up_to_the_margin() {
        let base = Duration::from_micros(500);
        assert!(huge_pages_pay(Duration::from_micros(90), base), "a recycled huge page: cheaper");
        assert!(huge_pages_pay(base.mul_f64(HUGE_PAGE_MARGIN), base), "at the margin: kept");
        assert!(!huge_pages_pay(Duration::from_micros(4500), base), "one backed anew by the host");
        assert!(huge_pages_pay(Duration::from_secs(1), Duration::MAX), "unmeasured: kept");
    }

    #[test]
    #[cfg_attr(miri, ignore = "mmap and madvise: Miri runs no system calls of that kind")]
    fn base_pages_cost_something_finite() {
        let cost = base_page_cost(2 << 20);
        assert!(cost > Duration::ZERO && cost < Duration::from_secs(10), "{cost:?}");
    }
}
