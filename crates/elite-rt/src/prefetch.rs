//! Data blocks and prefetching: getting the data of the ULT that runs next into the cache before
//! it runs (ELiTE section 2.3.5, the application interface of the "active threads" strategy).
//!
//! A ULT may declare one *data block*, the memory it mostly works on: at spawn
//! ([`Builder::data`](crate::Builder::data)) or from inside ([`set_data_block`]). When the runtime
//! prefetches ([`RuntimeBuilder::prefetch`](crate::RuntimeBuilder::prefetch), on by default), it
//! issues prefetch instructions for the lines a ULT that declared a block will touch first, at two
//! points:
//!
//! * **the processor loop**, when it has chosen a ULT that declared a block: for that ULT, the
//!   lines of its stack and context, whose addresses are in its control block, by then cached;
//!   and for the ULT that the runqueue would hand out after it (its best entry, peeked), the
//!   lines of its control block and, while the processor's measurement says it pays ("Whether
//!   it pays", below), its declared block, whose lines then arrive while the chosen ULT runs
//!   (the next one's flag and prefetch word are read from that control block, which the loop
//!   waits for when it is not cached: a block is worth it);
//! * **a waker**, when a ULT running here makes another ready on this same processor (a release,
//!   an unlock, a send): for the woken ULT, the lines of its stack and context, which arrive
//!   while the waker goes on.
//!
//! What is prefetched for a ULT: the first bytes of its block, up to the runtime's *prefetch
//! window* (a quarter of the cache its cache model describes, the largest cache private to a
//! core, `elite_affinity::Topology::model_cache`: 128 KiB with a 512 KiB L2, 512 KiB with a 2 MiB
//! one; at least [`PREFETCH_MAX_BYTES`] when the cache is smaller or unknown), one run ahead, as
//! the runqueue's next; the top lines of its stack (the parent link the switch writes there, and
//! the frames and saved registers of a ULT suspended near its stack's top); its execution
//! context; and the lines of its control block that the switch touches. The block of the ULT
//! about to run, chosen or woken, is never asked for then: the burst would hold up the switch
//! for about as long as the lines take to arrive (a core keeps only so many misses in flight,
//! and the prefetch instructions wait for a free slot), right before the ULT would have loaded
//! them itself. Prefetch instructions are hints: they never fault and never change memory.
//! So a [`DataBlock`] is only an address range, never dereferenced: declaring memory that is
//! freed later, or was never valid, is harmless (it only wastes the prefetch), and needs no
//! `unsafe`.
//!
//! A ULT that declares nothing, and every ULT while prefetch is off, costs one load and one
//! predictable branch where the loop chooses it and where a waker makes it ready, on a line
//! both touch anyway: its `prefetching` flag is false then (it is only set when the runtime
//! prefetches). Where the loop goes from one ULT to the next without a round, that test is the
//! one test of the head's rare-case bits, which cover a ULT's group too (`tcb::Rare`). The
//! suspension path is untouched.
//!
//! # Whether it pays
//!
//! A block's prefetch is a burst of up to a window of prefetch instructions, issued before the
//! chosen ULT runs; what it saves is the misses of the next ULT on its block. Which is larger
//! depends on how that ULT walks its block, which the runtime cannot see: a walk of dependent
//! loads in no order the hardware prefetchers follow waits out every miss, and gains from
//! having the block cached (`elite-bench affinity`'s `synthetic_1024` rows with `+data`); a
//! sequential walk is streamed by the hardware prefetchers anyway, and then the burst is mostly
//! cost (the adaptive grid's patches, `crates/elite-grid/examples/adaptive_grid.rs`: every
//! `+prefetch` row was slower than without while each choice prefetched the next ULT's block
//! and the chosen one's again, and each waker the woken one's; `docs/benchmarks.md` in the
//! repository has the rows with their host).
//!
//! So each processor measures it while it runs (`Payoff`), as the runtime measures its other
//! costs on the host it runs on (`sync::host`). At each choice of a ULT with a block it decides
//! whether to prefetch the next ULT's block: by the arm that has measured better, or, one choice
//! in 16 drawn at random, by the other one, so that both arms are sampled all along, through the
//! same stretches of the program. A decision's sample is the time its burst took plus the time
//! the ULT chosen next then took, up to the choice after it (the `rdtsc` ticks), dropped when
//! the processor idled, started or stole a ULT between the two choices. After every 128 samples
//! the two arms' means give `(on - off) / (on + off)`, and a running average of those (3/4 old,
//! 1/4 new) decides: prefetch while it is not positive. There is no threshold to tune: the rule
//! compares two times measured on the same processor, and a runtime starts out prefetching. The
//! 16 and the 128 set how fast it learns and how much the exploring costs (a sixteenth of the
//! choices under the worse arm), not where it decides.
//!
//! # What it costs
//!
//! For ULTs without a block, a test of one flag on a line the waker and the loop touch anyway
//! (`examples/hot_path_probe.rs` counts the instructions of spawn, yield and wake under
//! callgrind, with and without `prefetch(false)`); for a choice of a ULT with a block, two
//! `rdtsc`, the measurement's few instructions, and the prefetch instructions themselves.
//! `docs/benchmarks.md` has the figures, each with its host. Prefetch stays on by default.
//!
//! # Where it lives in the control block
//!
//! * line 1 (identity, touched by every choice and every wake-up): whether a block was declared
//!   at spawn, and the `prefetching` flag (a prefetch word is set: a block, and the runtime
//!   prefetches; a bit of the head's rare-case byte, `tcb::Rare`), cleared at spawn, set when
//!   the ULT gets its stack and by [`set_data_block`];
//! * line 4 (links and rarities): the block itself, as declared, for the policies (the bytes a
//!   waker shares with the ULT it wakes,
//!   [`WakerInfo::shared_bytes`](crate::policy::WakerInfo::shared_bytes)), and the *prefetch
//!   word*, the block's first line and its length in lines packed in one word, read only when
//!   the flag is set.
//!
//! The block and the word are written by the ULT itself or by its spawner before publication,
//! and read by the processor holding the ULT or by a waker that owns its wake-up (see
//! `affinity`); the wake-up and runqueue protocols carry them like the rest of the TCB. One
//! reader holds nothing: the loop reads the flag and the word of its runqueue's next entry,
//! which another processor may take meanwhile, so both are relaxed atomics, and a word read
//! while its ULT declares another block only wastes prefetches.

use crate::atomics::Ordering;
use crate::policy::engine::Engine;
use crate::slot::current_processor;
use crate::tcb::TcbRef;
use std::fmt;

/// The least bytes of a block prefetched for one switch (64 cache lines): the prefetch window of
/// a runtime whose cache model describes a cache of 16 KiB or less, or none. A runtime's window is
/// a quarter of its cache model's cache (the largest cache private to a core,
/// `elite_affinity::Topology::model_cache`), at least this: the first bytes of a larger block are
/// prefetched, the rest is left to the hardware prefetchers (a sequential walk).
pub const PREFETCH_MAX_BYTES: usize = 4096;

/// The share of the cache model's cache one block's prefetch may fill (a divisor): a quarter,
/// so that the block of the ULT about to run arrives while the data of the one before it stays,
/// and half of the cache is left to what neither declared (stacks, control blocks, shared data).
const WINDOW_SHARE: u64 = 4;

/// The bits of a prefetch word that hold its length in lines (the rest: the first line's number).
const LEN_BITS: u32 = 20;

/// The prefetch window, in lines, of a runtime whose cache model describes a cache of
/// `cache_bytes` (see [`PREFETCH_MAX_BYTES`]): a quarter of it, at least 64 lines, at most what a
/// prefetch word can hold.
pub(crate) fn window_lines(cache_bytes: u64) -> usize {
    let share = usize::try_from(cache_bytes / WINDOW_SHARE / LINE as u64).unwrap_or(usize::MAX);
    share.clamp(PREFETCH_MAX_BYTES / LINE, (1 << LEN_BITS) - 1)
}

/// Bytes of a cache line (the prefetch step).
const LINE: usize = 64;

/// The stack lines prefetched below the line of a ULT's stack top (its yielder): the frames of a
/// ULT suspended near the top of its stack, as one that waits in its main loop is, and the
/// registers the switch saved below them. (Noting the depth at each suspension would cover deep
/// suspensions too, but adds instructions to every ULT's suspension path, which every switch
/// takes.)
const STACK_LINES: usize = 8;

/// A ULT's data block: the start and length of the memory it mostly works on, for the runtime to
/// prefetch before the ULT runs (see [`RuntimeBuilder::prefetch`](crate::RuntimeBuilder::prefetch)).
///
/// Only an address range: the runtime never reads or writes through it (prefetch instructions
/// cannot fault), so any range is safe to declare, even one that is freed later.
///
/// ```
/// use elite_rt::DataBlock;
///
/// let data = vec![0u64; 64];
/// let block = DataBlock::of(&data[..]);
/// assert_eq!(block.len(), 512);
/// assert_eq!(block.addr(), data.as_ptr() as usize);
/// // The bytes two blocks share (what the `gravity` policy weighs).
/// let half = DataBlock::of(&data[32..]);
/// assert_eq!(block.overlap(&half), 256);
/// assert!(DataBlock::NONE.is_empty());
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DataBlock {
    addr: usize,
    len: usize,
}

impl DataBlock {
    /// No block.
    pub const NONE: DataBlock = DataBlock { addr: 0, len: 0 };

    /// The `len` bytes from `ptr`. The pointer is never dereferenced (see the type's docs), so
    /// it need not be valid.
    pub fn new(ptr: *const u8, len: usize) -> DataBlock {
        let addr = ptr as usize;
        // A range that would wrap around the address space is cut at its end.
        DataBlock { addr, len: len.min(usize::MAX - addr) }
    }

    /// The memory of `data`.
    pub fn of<T>(data: &[T]) -> DataBlock {
        DataBlock::new(data.as_ptr() as *const u8, std::mem::size_of_val(data))
    }

    /// The memory of `value`.
    pub fn of_val<T: ?Sized>(value: &T) -> DataBlock {
        DataBlock::new(value as *const T as *const u8, std::mem::size_of_val(value))
    }

    /// The first byte's address.
    pub fn addr(&self) -> usize {
        self.addr
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes this block and `other` have in common.
    #[inline]
    pub fn overlap(&self, other: &DataBlock) -> usize {
        let start = self.addr.max(other.addr);
        let end = (self.addr + self.len).min(other.addr + other.len);
        end.saturating_sub(start)
    }

    /// The prefetch word of this block under a window of `window` lines (1 to 2^20 - 1, see
    /// [`window_lines`]): its first line's number (address / 64) shifted left by 20, or'ed with
    /// the lines to prefetch (1 to `window`); 0 for an empty block or a window of 0 (the runtime
    /// does not prefetch).
    fn word(&self, window: usize) -> usize {
        if self.is_empty() || window == 0 {
            return 0;
        }
        let first = self.addr / LINE;
        let last = (self.addr + self.len - 1) / LINE;
        let lines = (last - first + 1).min(window).min((1 << LEN_BITS) - 1);
        // User-space addresses lie far below 2^50, whose line numbers fit in 44 bits; a block
        // above that is no memory of this process: nothing to prefetch.
        if first >> (usize::BITS - LEN_BITS) != 0 {
            return 0;
        }
        (first << LEN_BITS) | lines
    }
}

impl fmt::Debug for DataBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DataBlock({:#x}, {} bytes)", self.addr, self.len)
    }
}

impl<T> From<&[T]> for DataBlock {
    fn from(data: &[T]) -> DataBlock {
        DataBlock::of(data)
    }
}

impl<T> From<&Vec<T>> for DataBlock {
    fn from(data: &Vec<T>) -> DataBlock {
        DataBlock::of(&data[..])
    }
}

/// Declares `block` as the calling ULT's data block from now on (replacing any earlier one; an
/// empty block withdraws it), for the runtime to prefetch while the ULT before it runs (see
/// [`RuntimeBuilder::prefetch`](crate::RuntimeBuilder::prefetch)). Outside a ULT it does
/// nothing. [`Builder::data`](crate::Builder::data) declares it at spawn.
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(1).build()?;
/// let sum = rt.block_on(|| {
///     let data = vec![1u64; 1024];
///     let h = elite_rt::spawn(move || {
///         elite_rt::set_data_block(&data);
///         let mut sum = 0;
///         for chunk in data.chunks(128) {
///             sum += chunk.iter().sum::<u64>();
///             elite_rt::yield_now(); // the block stays declared across switches
///         }
///         sum
///     });
///     h.join().unwrap()
/// });
/// assert_eq!(sum, 1024);
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
pub fn set_data_block(block: impl Into<DataBlock>) {
    let block = block.into();
    if let Some(p) = current_processor() {
        if let Some(t) = p.current_ult() {
            let tcb = t.tcb();
            tcb.links.data.set(block);
            tcb.head.has_data.set(!block.is_empty());
            if !block.is_empty() {
                p.shared.engine.note_data(block.len());
            }
            let word = block.word(p.prefetch_lines);
            tcb.links.prefetch.store(word, Ordering::Relaxed);
            tcb.head.set_prefetching(word != 0);
        }
    }
}

/// The per-TCB fields of this module, as `Tcb` holds them (see the module docs for the lines).
pub(crate) struct UltBlock;

impl UltBlock {
    /// A spawn: the block declared at spawn (`None`: none). Writes line 4 only when declared,
    /// and then tells `engine` that a ULT declared data ([`Engine::note_data`]).
    #[inline]
    pub(crate) fn on_spawn(t: TcbRef, block: Option<DataBlock>, engine: &Engine) {
        let tcb = t.tcb();
        match block {
            Some(b) if !b.is_empty() => {
                tcb.links.data.set(b);
                tcb.head.has_data.set(true);
                engine.note_data(b.len());
            }
            _ => tcb.head.has_data.set(false),
        }
    }

    /// The ULT gets its stack: its prefetch word from the block declared at spawn, under the
    /// runtime's window of `window` lines (0: the runtime does not prefetch, and the flag stays
    /// clear, so that the hooks need not test the setting).
    #[inline]
    pub(crate) fn on_start(t: TcbRef, window: usize) {
        let tcb = t.tcb();
        if window != 0 && tcb.head.has_data.get() {
            let word = tcb.links.data.get().word(window);
            tcb.links.prefetch.store(word, Ordering::Relaxed);
            tcb.head.set_prefetching(word != 0);
        }
        // Otherwise nothing to write: the spawn cleared the flag (`Head::set_group`), and the
        // word is read only while the flag is set.
    }

    /// The block `t` declared, if any (for the policies).
    #[inline]
    pub(crate) fn block(t: TcbRef) -> DataBlock {
        let tcb = t.tcb();
        if tcb.head.has_data.get() {
            tcb.links.data.get()
        } else {
            DataBlock::NONE
        }
    }
}

/// Prefetches what switching into `t` touches first, if it declared a block (one predictable
/// branch otherwise): the top lines of its stack and its execution context, not its block (see
/// the module docs). Reads `t`'s control block (lines 1 and 3), which [`control_block`]
/// prefetched one step earlier when `t` was the runqueue's next. Whether it prefetched (the ULT
/// has a block, has started and the runtime prefetches).
///
/// The flag is false while the runtime does not prefetch and for ULTs without a block, so the
/// test of the setting costs nothing here. The spawn clears a flag left by an earlier life of a
/// reused control block (`Head::set_group`); the out-of-line part still tests the ULT's life.
#[inline]
pub(crate) fn ult(t: TcbRef) -> bool {
    // SAFETY: the callers hold `t` (module docs, "Where it lives in the control block"): the
    // loop, a ULT it chose to run; a waker, a ULT whose wake-up it owns.
    (unsafe { t.tcb().head.rare_held() } & crate::tcb::Rare::PREFETCHING) != 0 && ult_lines(t)
}

/// The body of [`ult`], kept out of line.
#[inline(never)]
fn ult_lines(t: TcbRef) -> bool {
    let tcb = t.tcb();
    if tcb.head.life.get() != crate::tcb::Life::Started {
        return false;
    }
    #[cfg(test)]
    tests::PREFETCHES.with(|n| n.set(n.get() + 1));
    // The stack: the parent link at the top (written by the switch in), and the lines below it
    // (the frames the ULT returns to, the registers the switch restores).
    let top = tcb.exec.yielder.get() as usize;
    if top != 0 {
        let top_line = top & !(LINE - 1);
        for k in 0..=STACK_LINES {
            line(top_line.saturating_sub(k * LINE));
        }
    }
    // The execution context (the coroutine's saved stack pointer), read by the switch.
    // SAFETY: the caller's processor holds `t` (it is about to run it, or is making it ready
    // here), so nobody changes its context meanwhile; only the address is taken.
    if let Some(ctx) = unsafe { (*tcb.exec.context.get()).as_deref() } {
        line(ctx as *const _ as usize);
    }
    true
}

/// Prefetches the lines of `t`'s control block that choosing and switching into it touch (line 1,
/// identity and the flag; 3, execution; 4, the prefetch word; 5, the runqueue's links),
/// without reading any of them: for the ULT the runqueue will hand out next, whose other lines
/// [`ult`] prefetches once these have arrived.
#[inline]
pub(crate) fn control_block(t: TcbRef) {
    let base = t.as_ptr() as usize;
    line(base);
    line(base + 2 * LINE);
    line(base + 3 * LINE);
    line(base + 4 * LINE);
}

/// Prefetches the declared block of `t`, the ULT the runqueue would hand out after the one the
/// loop has just chosen, so that its lines arrive while the chosen one runs (when the
/// processor's [`Payoff`] says it pays). Reads `t`'s flag (line 1) and prefetch word (line 4),
/// which [`control_block`] has just asked for: the loop waits for them when they are not
/// cached. `t` stays in the runqueue, where another
/// processor may take it and run it meanwhile (a steal, a shared runqueue), and it may declare
/// another block then: the two fields are relaxed atomics, and any word read, old or new, only
/// names lines to prefetch, which cannot fault.
#[inline]
pub(crate) fn next_block(t: TcbRef) {
    let tcb = t.tcb();
    if tcb.head.prefetching() {
        #[cfg(test)]
        tests::NEXT_BLOCKS.with(|n| n.set(n.get() + 1));
        block(tcb.links.prefetch.load(Ordering::Relaxed));
    }
}

/// Prefetches the first three lines of the control block at `p` (the join word, identity and
/// flags; the inline task; execution), which starting a never-started ULT, or a spawn reusing a
/// pooled TCB, touches first: for the entry a processor will take next from its start-queue or its
/// TCB pool. Only the address is used (nothing is read): the entry may go to another processor
/// meanwhile, or be null, which only wastes the hint. Independent of the `prefetch` switch, which
/// is about declared data blocks.
#[inline]
pub(crate) fn start_lines(p: *const crate::tcb::Tcb) {
    let base = p as usize;
    line(base);
    line(base + LINE);
    line(base + 2 * LINE);
}

/// The samples of one epoch of a [`Payoff`]: after each, its arms' means update the score.
const EPOCH_SAMPLES: u32 = 128;

/// One choice in this many, drawn at random, takes the arm that has measured worse.
const EXPLORE_ONE_IN: u64 = 16;

/// Whether prefetching the runqueue's next block pays on one processor, measured while it runs
/// (module docs, "Whether it pays"). At each choice of a ULT with a block the processor
/// decides whether to prefetch the next ULT's block (the *on* arm) or not (*off*): the arm that
/// has measured better, or the other one at random one choice in [`EXPLORE_ONE_IN`]. A sample
/// of a decision is the time the prefetch took (its burst) plus the time the next ULT then ran,
/// up to the choice after it: what the prefetch costs where it is issued and what it saves
/// where its lines are used. Both arms are drawn at random through the same stretch of the
/// program, so a phase of it weighs on both alike. After each epoch of [`EPOCH_SAMPLES`]
/// samples, the score, a running average (3/4 old, 1/4 new) of `(on - off) / (on + off)` over
/// the epochs' mean samples, says which arm is better: off when positive. Owned by the
/// processor's thread (its `Core`).
#[derive(Debug)]
pub(crate) struct Payoff {
    /// The decisions of the last two choices, older first: (arm, burst ticks), if any. A
    /// decision's sample completes when the ULT chosen after it has run.
    pending: [Option<(bool, u64)>; 2],
    /// The ticks at the end of the last choice's prefetch (its ULT's run starts then) and the
    /// loop's round then.
    run_from: u64,
    run_round: u32,
    /// This epoch's sums of samples and their counts, per arm (`[off, on]`).
    sum: [u64; 2],
    count: [u32; 2],
    /// See the type's docs; positive: prefetching made things slower.
    score: f64,
    /// The arm of the last choice.
    on: bool,
}

impl Payoff {
    /// A new measurement: it prefetches (explores off one choice in [`EXPLORE_ONE_IN`]) until
    /// an epoch has said otherwise.
    pub(crate) fn new() -> Payoff {
        Payoff {
            pending: [None; 2],
            run_from: 0,
            run_round: 0,
            sum: [0; 2],
            count: [0; 2],
            score: 0.0,
            on: true,
        }
    }

    /// A choice of a ULT with a block at `now` (ticks), in the loop's round `round`: completes
    /// the sample of the decision two choices back (the ULT chosen by the last choice, whose
    /// block that decision was about, has run since), and answers whether to prefetch the
    /// next ULT's block now. The run counts when no round of the loop went by between the two
    /// choices but the one that made this choice (a round more: the processor idled, started
    /// a ULT or stole one meanwhile, which neither arm makes faster); else the sample is
    /// dropped. `draw`: a random number (the processor's generator), which picks the choices
    /// that explore.
    pub(crate) fn choose(&mut self, now: u64, round: u32, draw: u64) -> bool {
        let ran = self.run_from != 0 && round.wrapping_sub(self.run_round) <= 1 && now > self.run_from;
        if let (true, Some((arm, burst))) = (ran, self.pending[0]) {
            self.add(arm, burst + (now - self.run_from));
        }
        self.pending[0] = self.pending[1];
        self.pending[1] = None;
        self.run_round = round;
        let better = self.better_on();
        self.on = if draw.is_multiple_of(EXPLORE_ONE_IN) { !better } else { better };
        self.on
    }

    /// The prefetch of the last choice ended at `now` (ticks), having begun at `began`.
    pub(crate) fn prefetched(&mut self, began: u64, now: u64) {
        self.pending[1] = Some((self.on, now.saturating_sub(began)));
        self.run_from = now;
    }

    /// Adds a sample of `arm`, closing the epoch at its last.
    fn add(&mut self, arm: bool, sample: u64) {
        let a = usize::from(arm);
        self.sum[a] += sample;
        self.count[a] += 1;
        if self.count[0] + self.count[1] < EPOCH_SAMPLES {
            return;
        }
        if self.count[0] > 0 && self.count[1] > 0 {
            let off = self.sum[0] as f64 / f64::from(self.count[0]);
            let on = self.sum[1] as f64 / f64::from(self.count[1]);
            self.score = 0.75 * self.score + 0.25 * (on - off) / (on + off).max(1.0);
        }
        self.sum = [0; 2];
        self.count = [0; 2];
    }

    /// Whether prefetching has measured better so far (or nothing was measured yet).
    fn better_on(&self) -> bool {
        self.score <= 0.0
    }
}

/// Prefetches the lines of a prefetch word.
#[inline]
fn block(word: usize) {
    let (first, lines) = ((word >> LEN_BITS) * LINE, word & ((1 << LEN_BITS) - 1));
    for k in 0..lines {
        line(first + k * LINE);
    }
}

/// Prefetches the cache line holding `addr` into every level (a hint: never faults).
#[inline(always)]
fn line(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 only hints the cache; it neither faults nor changes memory, whatever the
    // address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8)
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: PRFM only hints the cache; it neither faults nor changes memory, whatever the address.
    unsafe {
        std::arch::asm!("prfm pldl1keep, [{}]", in(reg) addr, options(nostack, preserves_flags, readonly))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = addr;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Hooks, Needs, Policy, ProcessorView, UltInfo, WakerInfo};
    use crate::{Builder, Runtime};
    use std::cell::Cell;
    use std::sync::{Arc, Mutex};

    thread_local! {
        /// Prefetches of a ULT's lines issued by this OS thread (a processor's): counted only in
        /// test builds.
        pub(super) static PREFETCHES: Cell<u64> = const { Cell::new(0) };
        /// Blocks of the runqueue's next ULT prefetched by this OS thread (`next_block`).
        pub(super) static NEXT_BLOCKS: Cell<u64> = const { Cell::new(0) };
    }

    /// The prefetches this processor issued so far (read from a ULT running on it).
    fn prefetches() -> u64 {
        PREFETCHES.with(Cell::get)
    }

    /// A policy that notes the shared bytes of every wake-up by a ULT (No Affinity's order).
    #[derive(Debug, Default)]
    struct SeesShared {
        /// The non-zero shared bytes seen, in order.
        seen: Arc<Mutex<Vec<usize>>>,
        /// Wake-ups by a ULT.
        by_ults: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Hooks for SeesShared {
        fn name(&self) -> &'static str {
            "sees-shared"
        }
        fn needs(&self) -> Needs {
            Needs::NOTHING.with_wakers().with_data()
        }
        fn priority(&self, _ult: &UltInfo, _here: &ProcessorView<'_>) -> u64 {
            0
        }
        fn wake_target(&self, ult: &UltInfo, waker: &WakerInfo, _state: &mut u64) -> usize {
            if waker.ult.is_some() {
                self.by_ults.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if waker.shared_bytes > 0 {
                    self.seen
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(waker.shared_bytes);
                }
            }
            ult.last_processor
        }
    }

    /// Runs `ults` ULTs that declared `block` at spawn and yield `yields` times each (taking
    /// turns), on a one-processor runtime with prefetch `on`; how far `count` moved meanwhile.
    fn yielding(ults: usize, on: bool, block: DataBlock, yields: u64, count: fn() -> u64) -> u64 {
        let rt = Runtime::builder().processors(1).prefetch(on).build().expect("a runtime");
        rt.block_on(move || {
            let before = count();
            let handles: Vec<_> = (0..ults)
                .map(|_| {
                    Builder::new()
                        .data(block)
                        .spawn(move || {
                            for _ in 0..yields {
                                crate::yield_now();
                            }
                        })
                        .expect("spawned")
                })
                .collect();
            for h in handles {
                h.join().expect("no panic");
            }
            count() - before
        })
    }

    /// [`yielding`] with two ULTs: the prefetches their processor issued.
    fn yielding_ults(on: bool, block: DataBlock, yields: u64) -> u64 {
        yielding(2, on, block, yields, prefetches)
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn the_processor_prefetches_a_declared_block_only_when_on() {
        let data = vec![0u64; 512];
        let on = yielding_ults(true, DataBlock::of(&data[..]), 20);
        assert!(on >= 20, "about one prefetch per switch into either ULT, got {on}");
        assert_eq!(yielding_ults(false, DataBlock::of(&data[..]), 20), 0, "prefetch off");
        assert_eq!(yielding_ults(true, DataBlock::NONE, 20), 0, "no block, nothing to prefetch");
    }

    /// [`yielding`] with three ULTs (so that another one is always the runqueue's next): the
    /// next ULTs' blocks their processor prefetched.
    fn next_blocks(on: bool, block: DataBlock, yields: u64) -> u64 {
        yielding(3, on, block, yields, || NEXT_BLOCKS.with(Cell::get))
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn the_loop_prefetches_the_next_ults_block_while_the_chosen_one_runs() {
        let data = vec![0u64; 4096];
        let ahead = next_blocks(true, DataBlock::of(&data[..]), 20);
        assert!(ahead >= 20, "about one block ahead per switch, got {ahead}");
        assert_eq!(next_blocks(false, DataBlock::of(&data[..]), 20), 0, "prefetch off");
        assert_eq!(next_blocks(true, DataBlock::NONE, 20), 0, "no block, nothing to prefetch");
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn empty_huge_and_wild_blocks_run_fine() {
        let data = [0u8; 16];
        for block in [
            DataBlock::NONE,
            DataBlock::new(data.as_ptr(), 0),
            DataBlock::new(data.as_ptr(), 1 << 40),
            DataBlock::new(std::ptr::null(), 1 << 20),
            DataBlock::new(0xdead_0000_0000 as *const u8, 4096),
            DataBlock::new((usize::MAX - 10) as *const u8, usize::MAX),
        ] {
            yielding_ults(true, block, 3);
        }
        // A ULT that declares, changes and withdraws its block from inside.
        let rt = Runtime::builder().processors(1).build().expect("a runtime");
        let sum = rt.block_on(|| {
            let v = vec![1u64; 4096];
            let mut sum = 0;
            for chunk in v.chunks(1024) {
                crate::set_data_block(chunk);
                crate::yield_now();
                sum += chunk.iter().sum::<u64>();
            }
            crate::set_data_block(DataBlock::NONE);
            crate::yield_now();
            sum
        });
        assert_eq!(sum, 4096);
        // Outside a ULT it does nothing.
        crate::set_data_block(&data[..]);
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn the_shared_part_of_declared_blocks_reaches_the_policy() {
        let hooks = SeesShared::default();
        let (seen, by_ults) = (hooks.seen.clone(), hooks.by_ults.clone());
        let rt = Runtime::builder().processors(1).policy(Policy::new(hooks)).build().expect("a runtime");
        rt.block_on(move || {
            let data: Arc<[u64]> = vec![0u64; 100].into();
            let other = vec![0u64; 7];
            let (go, done) =
                (Arc::new(crate::sync::Semaphore::new(0)), Arc::new(crate::sync::Semaphore::new(0)));
            let (go2, done2) = (go.clone(), done.clone());
            // B declares the second half of A's block; after its first wake-up it declares
            // memory of its own, which A's does not overlap.
            let b = Builder::new()
                .data(&data[50..])
                .spawn(move || {
                    go2.acquire();
                    crate::set_data_block(&other);
                    done2.release();
                    go2.acquire();
                    drop(other);
                })
                .expect("spawned");
            let a = Builder::new()
                .data(&data[..])
                .spawn(move || {
                    // One processor: B runs up to its wait meanwhile.
                    for _ in 0..3 {
                        crate::yield_now();
                    }
                    go.release(); // shares 400 bytes with B
                    done.acquire();
                    go.release(); // shares nothing now
                })
                .expect("spawned");
            a.join().expect("no panic");
            b.join().expect("no panic");
        });
        assert!(by_ults.load(std::sync::atomic::Ordering::SeqCst) >= 2, "two wake-ups by ULTs at least");
        let seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        assert_eq!(seen, vec![400], "the overlap of the two blocks, once");
    }

    #[test]
    fn blocks_measure_overlap_and_pack_their_lines() {
        let a = DataBlock::new(1000 as *const u8, 100); // 1000..1100
        let b = DataBlock::new(1050 as *const u8, 100); // 1050..1150
        assert_eq!(a.overlap(&b), 50);
        assert_eq!(b.overlap(&a), 50);
        assert_eq!(a.overlap(&DataBlock::new(2000 as *const u8, 10)), 0);
        assert_eq!(a.overlap(&DataBlock::NONE), 0);
        // 1000..1100 spans lines 15 (960..1024) and 16 (1024..1088) and 17 (1088..1152).
        assert_eq!(a.word(64), 15 << LEN_BITS | 3);
        assert_eq!(DataBlock::NONE.word(64), 0);
        assert_eq!(a.word(0), 0, "no window: the runtime does not prefetch");
        // Large blocks are cut at the window.
        let mib = DataBlock::new(64 as *const u8, 1 << 20);
        let len = |word: usize| word & ((1 << LEN_BITS) - 1);
        assert_eq!(len(mib.word(PREFETCH_MAX_BYTES / 64)), PREFETCH_MAX_BYTES / 64);
        assert_eq!(len(mib.word(window_lines(512 << 10))), 2048, "128 KiB of it");
        assert_eq!(len(mib.word(window_lines(8 << 20))), 16384, "the whole MiB");
        assert_eq!(mib.word(window_lines(8 << 20)) >> LEN_BITS, 1, "from line 1");
        // A range running off the end of the address space is cut there.
        assert_eq!(DataBlock::new(usize::MAX as *const u8, 10).len(), 0);
        assert_eq!(DataBlock::new((usize::MAX - 100) as *const u8, 10).word(64), 0);
        let v = [0u32; 10];
        assert_eq!(DataBlock::of_val(&v), DataBlock::of(&v[..]));
        assert_eq!(format!("{:?}", DataBlock::new(16 as *const u8, 4)), "DataBlock(0x10, 4 bytes)");
    }

    #[test]
    fn the_window_is_a_quarter_of_the_model_cache() {
        // A quarter of the cache, in lines: 512 KiB -> 2048 lines (128 KiB), 2 MiB -> 8192.
        assert_eq!(window_lines(512 << 10), 2048);
        assert_eq!(window_lines(2 << 20), 8192);
        // At least PREFETCH_MAX_BYTES (a small cache, or none found), at most what a word holds.
        assert_eq!(window_lines(0), PREFETCH_MAX_BYTES / 64);
        assert_eq!(window_lines(16 << 10), PREFETCH_MAX_BYTES / 64);
        assert_eq!(window_lines(u64::MAX), (1 << LEN_BITS) - 1);
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_runtime_prefetches_a_window_from_its_cache_model() {
        // A synthetic topology with a 2 MiB L2 per core: a window of 512 KiB, 8192 lines.
        let rt =
            Runtime::builder().topology("1 node x 1 core, 2 MiB L2 per core").build().expect("a runtime");
        let data = vec![0u8; 64 << 20];
        let block = DataBlock::of(&data[..]);
        let lines = rt.block_on(move || {
            set_data_block(block);
            let p = current_processor().expect("on a processor");
            let t = p.current_ult().expect("in a ULT");
            t.tcb().links.prefetch.load(Ordering::Relaxed) & ((1 << LEN_BITS) - 1)
        });
        assert_eq!(lines, 8192);
        let off = Runtime::builder().processors(1).prefetch(false).build().expect("a runtime");
        let word = off.block_on(move || {
            set_data_block(block);
            current_processor()
                .and_then(|p| p.current_ult())
                .map(|t| t.tcb().links.prefetch.load(Ordering::Relaxed))
        });
        assert_eq!(word, Some(0), "prefetch off: no word");
    }

    /// Drives `payoff` through `choices` choices one round of the loop apart, each prefetch
    /// taking `burst(on)` ticks and each run `run(on of the decision two choices back)`; the
    /// choices that prefetched.
    fn drive(
        payoff: &mut Payoff,
        choices: u32,
        burst: impl Fn(bool) -> u64,
        run: impl Fn(bool) -> u64,
    ) -> u32 {
        let (mut now, mut round, mut prefetched, mut rng) = (1_000u64, 0u32, 0, 7u64);
        // The decisions about the ULT that runs next: the last two choices'.
        let mut decisions = [true, true];
        for _ in 0..choices {
            round += 1;
            let on = payoff.choose(now, round, crate::processor::next_random_of(&mut rng));
            prefetched += u32::from(on);
            let began = now;
            now += burst(on);
            payoff.prefetched(began, now);
            // The ULT chosen now runs with its block prefetched if the choice before said so.
            now += run(decisions[1]);
            decisions = [decisions[1], on];
        }
        prefetched
    }

    #[test]
    fn the_payoff_keeps_prefetching_that_pays() {
        // A burst of 100 ticks that saves 1000 of the next run: prefetch, exploring off about
        // one choice in EXPLORE_ONE_IN.
        let mut p = Payoff::new();
        let on = drive(&mut p, 4000, |on| if on { 100 } else { 0 }, |ahead| if ahead { 1000 } else { 2000 });
        assert!(p.better_on(), "score {}", p.score);
        let share = f64::from(on) / 4000.0;
        assert!(share > 0.85 && share < 0.99, "prefetched {share} of the choices");
    }

    #[test]
    fn the_payoff_stops_prefetching_that_costs() {
        // A burst of 1000 ticks that saves nothing (a block the hardware streams anyway): off,
        // exploring on about one choice in EXPLORE_ONE_IN.
        let mut p = Payoff::new();
        let on = drive(&mut p, 4000, |on| if on { 1000 } else { 0 }, |_| 2000);
        assert!(!p.better_on(), "score {}", p.score);
        let share = f64::from(on) / 4000.0;
        assert!(share > 0.02 && share < 0.15, "prefetched {share} of the choices");
        // And it comes back when the program changes so that prefetching pays.
        drive(&mut p, 4000, |on| if on { 100 } else { 0 }, |ahead| if ahead { 1000 } else { 2000 });
        assert!(p.better_on(), "score {}", p.score);
    }

    #[test]
    fn the_payoff_drops_runs_across_idle_rounds() {
        // Every choice comes two rounds after the one before (the loop idled meanwhile): no
        // sample completes, and the measurement keeps its first answer, prefetch.
        let mut p = Payoff::new();
        let mut now = 1_000;
        for k in 0..1000u32 {
            p.choose(now, 2 * k, u64::from(k));
            p.prefetched(now, now + 5_000);
            now += 10_000;
        }
        assert_eq!(p.count, [0, 0]);
        assert!(p.better_on());
    }

    #[test]
    fn prefetching_any_address_is_harmless() {
        for addr in [0usize, 1, 4096, usize::MAX - 63, 0xdead_beef_0000] {
            line(addr);
            block(DataBlock::new(addr as *const u8, 300).word(64));
        }
    }
}
