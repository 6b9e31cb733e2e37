//! The policy engine: the one door through which the mechanism (the processor loop, the wake
//! paths, spawns) asks the scheduling policy, and what the policy learns from each run.
//!
//! The mechanism asks, and never which policy is active:
//!
//! | question | asked by | answered by |
//! | --- | --- | --- |
//! | the key of a ULT entering a runqueue | the runqueue's owner | [`Local::priority`], [`Local::yield_priority`] |
//! | does a ULT woken here stay here? | the waker's processor | [`Local::wakes_here`] |
//! | where does a woken ULT go? | any waker | [`Engine::wake_target`] |
//! | how many ULTs does a thief take? | the thief | [`Engine::steal_count`] |
//! | a run begins / ends | the processor running it | [`Local::begin_run`], [`Local::end_run`] |
//! | a ULT is spawned | its spawner | [`Engine::on_spawn`] |
//!
//! For the built-in policies the engine answers without a call through their [`Hooks`](super::Hooks): it
//! computes their keys with the same functions their hooks call (each policy's key is written
//! once, in its file), and their wake targets by their [`WakeRule`]. A custom policy's hooks are
//! called. This is where the second wave's decisions (places, groups, the online selector)
//! plug in: each a new answer behind these questions, not a branch in the loop.
//!
//! # Where things live, and who writes them
//!
//! * Per ULT, in its TCB: an [`UltRecord`] — the stamp of its last run (the run count of its
//!   processor when the run ended), the misses of that run, its cache [`Footprint`], the bytes
//!   of data it declared, and the policy's own word. Written by the processor holding the ULT
//!   (after each run, on that processor's stack), by the ULT itself for its declared footprint
//!   ([`set_footprint`]), and by the waker in
//!   [`Hooks::wake_target`](crate::policy::Hooks::wake_target) (the policy word) while it owns
//!   the wake-up of the blocked ULT (the wait and join protocols give one waker at a time;
//!   its push on a wake-up stack, or the loop itself, carries the writes to the next owner).
//! * Per processor, in its owned core: a [`Local`] — its counter source, opened on the
//!   processor's own thread (a hardware counter counts the thread that opened it), its run count
//!   (virtual time) and runqueue entry count, and a copy of the policy.
//! * Per runtime: [`Engine`] — the policy, its needs, the cache model (built once, when the policy needs misses) and
//!   the kind of source each processor opened, for [`Runtime::stats`](crate::Runtime::stats).
//!
//! A blocked ULT's record is complete before anyone can wake it: the loop updates it at the end
//! of the run (`end_run`), before the switch's transition (the park action of the wait or join
//! protocol) publishes the ULT with a release RMW; the waker reads it after the matching
//! acquire. A ready ULT's record travels with it through the wake-up stack (release push,
//! acquire drain) or a runqueue's lock.
//!
//! # Runs
//!
//! The processor loop calls [`Local::begin_run`] just before it resumes a ULT and
//! [`Local::end_run`] just after the ULT switched back; the two alternate strictly. The join fast
//! path runs a child on the joiner's stack in the middle of the joiner's run: it ends the
//! joiner's run before the child's begins and begins a new one after the child's ends
//! ([`Local::pause`], [`Local::resume`]), so that each run is measured on its own.
//!
//! What a run costs depends on the policy's [`Needs`], decided once when the runtime is built:
//! nothing at all (No Affinity: `begin_run` and `end_run` are one predictable branch), a counter
//! increment and a store (stamps: Virtual Time), or the misses and the cache model's update
//! (misses: Minimum Misses, Reload Transient, Gravity). With the estimator (every machine
//! without a PMU) the latter is one pass at the end of the run
//! ([`EstimatedSource::count_run`]), in a version of the run's end made for the policy's needs
//! and chosen once per processor (`Local::record_estimated`); `begin_run` reads only a hardware
//! counter, the one clock that moves between runs. Keys and run hooks read a copy of the clock
//! kept in [`Local`], not the source.
//!
//! # No PMU
//!
//! With [`CounterChoice::Detect`] (the default) each processor opens a hardware cache-miss
//! counter and falls back to the estimator where it cannot ([`elite_affinity::AnySource::detect`]).
//! The first fallback in a process prints one line on stderr saying so and why; the runtime runs
//! on, and [`RuntimeStats::counter_sources`](crate::RuntimeStats::counter_sources) names every
//! processor's source. Choosing [`CounterChoice::Estimated`] (or a script) prints nothing.

use super::board::Board;
use super::{
    gravity, hand_off, minimum_misses, no_affinity, reload_transient, rounds, virtual_time, Kind, Needs,
    Policy, ProcessorView, UltInfo, WakeRule, WakerInfo,
};
use crate::atomics::Ordering as Order;
use crate::prefetch::UltBlock;
use crate::slot::current_processor;
use crate::tcb::TcbRef;
use crossbeam_utils::CachePadded;
use elite_affinity::{
    AnySource, CacheModel, CounterSource, EstimatedSource, Footprint, ModelCache, RunInfo, ScriptedSource,
    SourceKind,
};
use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Once, OnceLock};

/// The policy's record of one ULT (see the module docs for who writes it).
pub(crate) struct UltRecord {
    stamp: Cell<u64>,
    misses: Cell<u64>,
    footprint: Cell<Footprint>,
    /// The bytes of data the ULT declared.
    bytes: Cell<usize>,
    /// `bytes` in lines of [`Engine`]'s line size (the model's, where there is one), rounded
    /// up: kept with `bytes` ([`UltRecord::declare`]), so that the estimator's run end and the
    /// hand-off rule read them without a conversion.
    lines: Cell<u64>,
    state: Cell<u64>,
    /// The lines clock ([`Engine`]'s `lines_clocks`) of the processor its last run ended on, as
    /// of that end, under a policy without a cache model that keeps stamps (Virtual Time): the
    /// hand-off rule reads how much declared data ran there since ([`Engine::home_lines`]).
    lines_clock: Cell<u64>,
}

impl UltRecord {
    pub(crate) const fn new() -> UltRecord {
        UltRecord {
            stamp: Cell::new(0),
            misses: Cell::new(0),
            footprint: Cell::new(Footprint::EMPTY),
            bytes: Cell::new(0),
            lines: Cell::new(0),
            state: Cell::new(0),
            lines_clock: Cell::new(0),
        }
    }

    /// Declares `bytes` of data, in lines of `line_size` bytes.
    #[inline]
    fn declare(&self, bytes: usize, line_size: LineSize) {
        self.bytes.set(bytes);
        self.lines.set(line_size.lines(bytes));
    }
}

/// A cache line's size, and how to convert bytes to lines of it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineSize {
    bytes: u64,
    /// `log2(bytes)` when it is a power of two: a shift instead of a division.
    shift: Option<u32>,
}

impl LineSize {
    fn new(bytes: u32) -> LineSize {
        let bytes = u64::from(bytes.max(1));
        LineSize { bytes, shift: bytes.is_power_of_two().then(|| bytes.trailing_zeros()) }
    }

    /// The lines `bytes` of data occupy, rounded up (as the estimator counts them:
    /// [`EstimatedSource::lines`]).
    #[inline]
    fn lines(self, bytes: usize) -> u64 {
        let bytes = bytes as u64;
        match self.shift {
            Some(shift) => (bytes >> shift) + u64::from(bytes & (self.bytes - 1) != 0),
            None => bytes.div_ceil(self.bytes),
        }
    }
}

impl Engine {
    /// Resets the record of `t`, about to be published as a new ULT that declared `footprint`
    /// bytes, when the policy keeps records; otherwise it only stores a declared footprint (so
    /// a runtime whose policy keeps nothing touches no record on a plain spawn).
    #[inline]
    pub(crate) fn on_spawn(&self, t: TcbRef, footprint: Option<usize>) {
        let rec = &t.tcb().sched.record;
        if self.spawn_resets.load(Ordering::Relaxed) {
            rec.stamp.set(0);
            rec.misses.set(0);
            rec.footprint.set(Footprint::EMPTY);
            rec.state.set(0);
            rec.lines_clock.set(0);
            match footprint {
                Some(bytes) => {
                    rec.declare(bytes, self.line_size);
                    self.note_declared(bytes);
                }
                None => {
                    rec.bytes.set(0);
                    rec.lines.set(0);
                }
            }
        } else if let Some(bytes) = footprint {
            rec.declare(bytes, self.line_size);
            self.note_declared(bytes);
        }
    }
}

/// Declares that the calling ULT works on `bytes` of data from now on: the estimator of cache
/// misses (on machines without a hardware counter) takes each of its runs to touch that many
/// bytes, missing on what the cache model does not expect cached. Outside a ULT it does nothing.
///
/// [`Builder::footprint`](crate::Builder::footprint) declares it at spawn.
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(1).policy(elite_rt::policy::Policy::reload_transient()).build()?;
/// rt.block_on(|| {
///     let data = vec![0u64; 8192]; // 64 KiB
///     elite_rt::set_footprint(std::mem::size_of_val(&data[..]));
///     // ... work on `data` between synchronizations ...
/// });
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
pub fn set_footprint(bytes: usize) {
    if let Some(p) = current_processor() {
        if let Some(t) = p.current_ult() {
            t.tcb().sched.record.declare(bytes, p.shared.engine.line_size);
            p.shared.engine.note_declared(bytes);
        }
    }
}

/// What the policy sees of `t`: the record only when the policy keeps it.
#[inline]
pub(crate) fn ult_info(t: TcbRef, needs: Needs) -> UltInfo {
    let tcb = t.tcb();
    let info = UltInfo::new(tcb.head.id.get(), tcb.head.processor.load(crate::atomics::Ordering::Relaxed));
    if !needs.records() {
        return info;
    }
    let rec = &tcb.sched.record;
    UltInfo {
        stamp: rec.stamp.get(),
        misses: rec.misses.get(),
        footprint: rec.footprint.get(),
        footprint_bytes: rec.bytes.get(),
        state: rec.state.get(),
        ..info
    }
}

impl Engine {
    /// The processor whose wake-up stack receives `t`, woken from `waker` (a processor, `None`
    /// outside the runtime) by the ULT `by` (if a ULT wakes it from its own code). The caller
    /// owns the wake-up of `t`.
    #[inline]
    pub(crate) fn wake_target(&self, t: TcbRef, waker: Option<usize>, by: Option<TcbRef>) -> usize {
        let home = t.tcb().head.processor.load(Order::Relaxed);
        if t.tcb().head.pinned.get() {
            // A pinned ULT goes back to its own processor; the policy is not asked (`Builder::pinned`).
            return home;
        }
        // A hand-off from a ULT on another processor than `t`'s home: what the hand-off rule reads.
        let crossing = match waker {
            Some(x) if by.is_some() && x != home => Some(x),
            _ => None,
        };
        // The hand-off rule on the home lines, computed only for a crossing hand-off; a home
        // in the quiet mode has nothing worth the trip (little data), as under No Affinity.
        let hand_off = |x: usize| {
            let quiet = self.quiet_at(home);
            match quiet || hand_off::cached_little(self.lines_at_home(t, home, quiet)) {
                true => x,
                false => home,
            }
        };
        let selected = self.selected();
        match selected.policy.wake_rule() {
            // The hand-off rule's answer (the hooks' of Minimum Misses, and after the round's mark,
            // of Virtual Time and Reload Transient).
            rule @ (WakeRule::HandOff | WakeRule::HandOffInRounds) => {
                if rule == WakeRule::HandOffInRounds {
                    mark_woken(t);
                }
                return crossing.map_or(home, hand_off);
            }
            // No Affinity's hook's answer.
            WakeRule::Waker => return no_affinity::target(home, waker, by.is_some()),
            // Gravity's hook's answer where no force acts.
            WakeRule::Gravity if gravity_has_no_force(t, by) => {
                mark_woken(t);
                return crossing.map_or(home, hand_off);
            }
            WakeRule::Gravity | WakeRule::Hook => {}
        }
        self.wake_target_by_hook(selected, t, waker, by, crossing.map(|_| self.home_lines(t, home)))
    }

    /// [`wake_target`](Self::wake_target) by the policy's hook (a custom policy, or gravity's
    /// forces): what it sees of `t` and of its waker, and the policy word it leaves.
    fn wake_target_by_hook(
        &self,
        selected: &Selected,
        t: TcbRef,
        waker: Option<usize>,
        by: Option<TcbRef>,
        home_lines: Option<f32>,
    ) -> usize {
        let needs = selected.needs;
        let info = ult_info(t, needs);
        let mut waker_info = WakerInfo::new(waker);
        if by.is_some() {
            waker_info = waker_info.handing_off();
        }
        if let Some(lines) = home_lines {
            waker_info = waker_info.with_home_lines(lines);
        }
        if needs.wakers {
            if let Some(by) = by {
                waker_info = waker_info.with_ult(ult_info(by, needs));
                if needs.data {
                    let shared = UltBlock::block(by).overlap(&UltBlock::block(t));
                    waker_info = waker_info.with_shared_bytes(shared);
                }
            }
        }
        let mut state = info.state;
        let target = selected.policy.hooks().wake_target(&info, &waker_info, &mut state);
        if state != info.state {
            t.tcb().sched.record.state.set(state);
        }
        target
    }

    /// How many of a victim's `len` ready ULTs a thief takes (the policy's
    /// [`steal_count`](super::Hooks::steal_count)).
    #[inline]
    pub(crate) fn steal_count(&self, len: usize) -> usize {
        self.selected().policy.hooks().steal_count(len)
    }
}

/// Whether no force of [`Gravity`](crate::policy::Gravity) acts on `t` woken by `by`: the waker
/// is no ULT, or their declared data blocks do not overlap (then its hook marks the round and
/// applies the hand-off rule, which the engine does itself).
#[inline]
fn gravity_has_no_force(t: TcbRef, by: Option<TcbRef>) -> bool {
    by.is_none_or(|by| UltBlock::block(by).overlap(&UltBlock::block(t)) == 0)
}

/// [`Local::wakes_here`]'s answer for Gravity: whether `t`, woken on processor `here` by `by`,
/// stays. Out of line, so that the wake path stays small enough to inline into the blocking
/// paths of the other rules.
#[inline(never)]
fn gravity_wakes_here(t: TcbRef, here: usize, by: Option<TcbRef>) -> bool {
    // Home, and no force acts: the hand-off rule's answer is home.
    let home = t.tcb().head.processor.load(Order::Relaxed) == here;
    let stays = home && gravity_has_no_force(t, by);
    if stays && !t.tcb().head.pinned.get() {
        mark_woken(t); // (as `wake_target` does, but for a pinned ULT)
    }
    stays
}

/// Marks in `t`'s round that a wake-up made it ready ([`rounds`]); the caller owns the wake-up
/// of `t`.
#[inline]
fn mark_woken(t: TcbRef) {
    let state = &t.tcb().sched.record.state;
    let mut word = state.get();
    rounds::mark_woken(&mut word);
    state.set(word);
}

/// The counter source each processor opens, when the policy needs cache misses
/// ([`RuntimeBuilder::counters`](crate::RuntimeBuilder::counters)).
///
/// ```
/// use elite_affinity::ScriptedSource;
/// use elite_rt::{policy::Policy, CounterChoice};
///
/// // Every run of ULT 3 takes 500 misses, every other run 20, on each processor.
/// let rt = elite_rt::Runtime::builder()
///     .processors(1)
///     .policy(Policy::minimum_misses())
///     .counters(CounterChoice::scripted(|_processor| ScriptedSource::new(20).per_ult(3, 500)))
///     .build()?;
/// rt.block_on(|| ());
/// assert_eq!(rt.stats().counter_sources[0].as_ref().map(|k| k.to_string()).as_deref(), Some("scripted"));
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum CounterChoice {
    /// The hardware cache-miss counter where the machine has one, the estimator otherwise (the
    /// runtime says so once per process, on stderr). The default.
    #[default]
    Detect,
    /// The estimator ([`EstimatedSource`]) everywhere, without trying the hardware.
    Estimated,
    /// A script per processor, made on the processor's own thread by calling the function with
    /// the processor's index: deterministic misses for tests.
    Scripted(Arc<dyn Fn(usize) -> ScriptedSource + Send + Sync>),
}

impl CounterChoice {
    /// [`CounterChoice::Scripted`] with `script` making each processor's source.
    pub fn scripted(script: impl Fn(usize) -> ScriptedSource + Send + Sync + 'static) -> CounterChoice {
        CounterChoice::Scripted(Arc::new(script))
    }
}

impl fmt::Debug for CounterChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CounterChoice::Detect => f.write_str("Detect"),
            CounterChoice::Estimated => f.write_str("Estimated"),
            CounterChoice::Scripted(_) => f.write_str("Scripted(..)"),
        }
    }
}

/// A policy as the engine holds it: the policy and its needs.
pub(crate) struct Selected {
    pub(crate) policy: Policy,
    /// `policy.hooks().needs()` (asked once, when it was set).
    pub(crate) needs: Needs,
}

/// The runtime-wide part of the policy engine: the policy in force and its needs (on a
/// [`Board`]: [`Runtime::set_policy`](crate::Runtime::set_policy) replaces them while the runtime
/// runs), the cache model, what each processor opened, and each processor's published miss clock.
pub(crate) struct Engine {
    /// The policy in force, and its generation (see [`Board`]'s protocol).
    board: Board<Selected>,
    /// Whether a spawn resets the record of its ULT: the policy in force keeps records, or one
    /// that did was in force since the runtime was built (a record left over from a TCB's
    /// earlier ULT under a policy that keeps none would then be read). Relaxed: set before the
    /// board publishes the policy that needs it, read as a hint of which a stale `false` only
    /// leaves a record unreset, the case every policy already copes with after a switch.
    spawn_resets: AtomicBool,
    /// The model of the topology's model cache, made when the first policy that needs misses
    /// is set (at build, or by `set_policy` before it publishes that policy).
    model: OnceLock<Arc<CacheModel>>,
    /// The cache the model describes.
    cache: ModelCache,
    sources: Box<[OnceLock<SourceKind>]>,
    /// Each processor's miss clock as of the end of its last run, while the policy needs misses:
    /// what a waker on another processor reads to tell how much of a woken ULT's footprint its
    /// home still holds (the hand-off rule, [`Engine::home_lines`]).
    ///
    /// Protocol: written only by its processor (a relaxed store at the end of each run, in
    /// `Local::record*`), read by any waker (a relaxed load). A hint, not a synchronization:
    /// whatever value a reader sees is one the clock had (a single word, stored whole) or 0, at
    /// worst a few runs old, and it only chooses where a ULT runs; nothing else is published
    /// through it, so no ordering is needed.
    clocks: Box<[Arc<CachePadded<AtomicU64>>]>,
    /// Each processor's *lines clock*, under a policy without a cache model that keeps stamps
    /// (Virtual Time): the declared lines ([`UltRecord`]'s `lines`) of the runs that ended
    /// there, summed. The hand-off rule's estimate of a woken ULT's lines still cached at home
    /// for such a policy ([`Engine::home_lines`]): its declared lines, less what the declared
    /// data of the runs ended at home since its own would have pushed out of the model cache.
    ///
    /// Protocol: as `clocks` (written only by its processor, a relaxed store at the end of each
    /// run, in `Local::end_run`; read by any waker with a relaxed load; a hint that only chooses
    /// where a ULT runs, nothing published through it).
    lines_clocks: Box<[Arc<CachePadded<AtomicU64>>]>,
    /// The model cache's capacity in lines of `line_size` (at least 1): what `lines_clocks`
    /// decay the declared lines against.
    cache_lines: u64,
    /// The line size declared footprints are counted in ([`UltRecord::declare`]): the model's,
    /// where there is one (the estimator counts in its lines), else the cache's (the hand-off
    /// rule of policies without a model).
    line_size: LineSize,
    /// Per processor, what the aggregation modifier needs of the topology
    /// ([`Engine::place_aggregation`]).
    aggregation: Box<[AggregationPlace]>,
    /// Whether any ULT of the runtime declared a data block ([`Builder::data`](crate::Builder::data),
    /// [`set_data_block`](crate::set_data_block)): the input of gravity's forces, which `auto`
    /// looks at before it explores gravity ([`Engine::data_declared`]).
    ///
    /// Protocol: set (never cleared) by the declaring thread with a relaxed store, after a relaxed
    /// load saw it clear (so that the ULTs that keep declaring do not write a shared line each
    /// time); read by `auto`'s selector with a relaxed load. A hint: a declaration the selector
    /// does not see yet counts from its next exploration; nothing is published through it.
    data_declared: AtomicBool,
    /// The largest footprint ([`Builder::footprint`](crate::Builder::footprint),
    /// [`set_footprint`]) or data block any ULT of the runtime declared, in bytes: the signal
    /// by which `auto` tells whether the order of the ULTs can matter to the cache
    /// ([`Engine::largest_declared`]).
    ///
    /// Protocol: raised (never lowered) by a declaring thread with a relaxed store after a
    /// relaxed load saw it smaller (declarations of a size already seen write nothing shared);
    /// read by `auto`'s selector with a relaxed load. A hint, like `data_declared`: two
    /// declaring threads racing may leave the smaller of their two sizes until one of them
    /// declares again, and `auto` only reads it to decide what to try; nothing is published
    /// through it.
    declared: AtomicUsize,
    /// The smallest footprint or data block any ULT declared, in bytes (`usize::MAX`: none):
    /// with `declared`, whether the declarations differ ([`Engine::declared_range`]), which
    /// tells `auto` whether `reload-transient`'s estimate can order otherwise than recency.
    ///
    /// Protocol: lowered (never raised) like `declared` is raised: a relaxed store after a
    /// relaxed load saw it larger, by the declaring thread *before* it raises `declared` and
    /// rings the bell (whose lock then carries both stores to the selector it wakes); read by
    /// `auto`'s selector with a relaxed load, and a largest read without its smallest counts as
    /// both. A hint, as `declared` is.
    smallest_declared: AtomicUsize,
    /// The most lines a declaration may hold and be *little data*, the quiet mode's signal
    /// ([`Engine::small_declarations`]): [`little_data_lines`] of the first-level data cache
    /// ([`Engine::place_little_data`]; of [`DEFAULT_BAR`](super::auto::DEFAULT_BAR) until
    /// then). Fixed once the runtime is built.
    little_lines: u64,
    /// The bell of `auto`'s selector, if one started, and the size of a declaration that brings
    /// its locality signal: rung when a declaration crosses that size or declares the first data
    /// block, so that a selector with nothing to measure sleeps instead of looking (see
    /// [`Bell`](super::auto::Bell)'s protocol).
    bell: std::sync::Mutex<Option<(usize, std::sync::Weak<super::auto::Bell>)>>,
}

/// What the aggregation modifier needs to know of one processor's place in the topology
/// (`policy::aggregate`).
#[derive(Clone, Default)]
pub(crate) struct AggregationPlace {
    /// The largest cache the processor uses, in bytes: the footprint cut-off.
    cutoff: usize,
    /// The word of its cache domain, and whether it is the domain's master (its lowest
    /// processor); `None` where it shares no cache.
    domain: Option<(Arc<CachePadded<AtomicU32>>, bool)>,
}

/// The model of `cache`, or of the assumed cache when `cache` is outside the model's range.
fn model_of(cache: &ModelCache) -> Arc<CacheModel> {
    let model = CacheModel::for_cache(cache).or_else(|_| CacheModel::for_cache(&ModelCache::ASSUMED));
    Arc::new(model.unwrap_or_else(|e| crate::fatal(&format!("the assumed cache has no model: {e}"))))
}

/// A declaration is *little data* when the first-level data cache holds it this many times over
/// (the `policy` module docs, "When there is nothing to act on").
pub(crate) const LITTLE_DATA_SHARE: usize = 16;

/// The most lines of `line_size` a declaration may hold and be little data, on a processor
/// whose first-level data cache holds `first_level_bytes`: a [`LITTLE_DATA_SHARE`]th of it
/// (48 lines of 64 bytes for a 48 KiB cache, 32 for 32 KiB), at least one.
pub(crate) fn little_data_lines(first_level_bytes: usize, line_size: LineSize) -> u64 {
    ((first_level_bytes / LITTLE_DATA_SHARE) as u64 / line_size.bytes).max(1)
}

impl Engine {
    pub(crate) fn new(policy: &Policy, needs: Needs, cache: &ModelCache, processors: usize) -> Engine {
        let model = OnceLock::new();
        if needs.misses {
            let _ = model.set(model_of(cache));
        }
        let line_size = LineSize::new(model.get().map_or(cache.line_size, |m| m.line_size()));
        Engine {
            board: Board::new(Selected { policy: policy.clone(), needs }),
            // (The aggregation modifier reads declared footprints: they must not be stale.)
            spawn_resets: AtomicBool::new(needs.records() || policy.aggregation().is_some()),
            sources: (0..processors).map(|_| OnceLock::new()).collect(),
            clocks: (0..processors).map(|_| Arc::new(CachePadded::new(AtomicU64::new(0)))).collect(),
            lines_clocks: (0..processors).map(|_| Arc::new(CachePadded::new(AtomicU64::new(0)))).collect(),
            cache_lines: (cache.size / line_size.bytes).max(1),
            line_size,
            model,
            cache: *cache,
            aggregation: (0..processors)
                .map(|_| AggregationPlace { cutoff: usize::MAX, domain: None })
                .collect(),
            data_declared: AtomicBool::new(false),
            declared: AtomicUsize::new(0),
            smallest_declared: AtomicUsize::new(usize::MAX),
            little_lines: little_data_lines(super::auto::DEFAULT_BAR, line_size),
            bell: std::sync::Mutex::new(None),
        }
    }

    /// Takes the bound of little data ([`little_data_lines`]) from the first-level data cache
    /// of processor 0 in `topology` (the cache `auto`'s locality signal is measured against;
    /// [`DEFAULT_BAR`](super::auto::DEFAULT_BAR) where the topology describes none).
    pub(crate) fn place_little_data(&mut self, topology: &elite_affinity::Topology) {
        self.little_lines = little_data_lines(super::auto::first_level_bytes(topology), self.line_size);
    }

    /// Places each processor for the aggregation modifier in `topology`: its footprint cut-off
    /// (the largest data cache it uses; none where the topology describes none) and its cache
    /// domain (the processors sharing its lowest-level data cache that more than one
    /// processor uses), whose lowest processor is the master.
    pub(crate) fn place_aggregation(&mut self, topology: &elite_affinity::Topology) {
        use elite_affinity::CacheKind;
        let mut words: Vec<(Vec<usize>, Arc<CachePadded<AtomicU32>>)> = Vec::new();
        for (p, place) in self.aggregation.iter_mut().enumerate() {
            let data = || topology.caches_of(p).filter(|c| c.kind != CacheKind::Instruction);
            place.cutoff = data().map(|c| c.size as usize).max().unwrap_or(usize::MAX);
            place.domain = data().find(|c| c.processors.len() > 1).map(|c| {
                let word = match words.iter().find(|(ps, _)| *ps == c.processors) {
                    Some((_, w)) => Arc::clone(w),
                    None => {
                        let w = Arc::new(CachePadded::new(AtomicU32::new(0)));
                        words.push((c.processors.clone(), Arc::clone(&w)));
                        w
                    }
                };
                (word, c.processors[0] == p)
            });
        }
    }

    /// Notes that a ULT declared a (non-empty) data block of `bytes` (see `data_declared`'s
    /// protocol).
    #[inline]
    pub(crate) fn note_data(&self, bytes: usize) {
        if !self.data_declared.load(Ordering::Relaxed) {
            self.data_declared.store(true, Ordering::Relaxed);
            self.ring(|_| true);
        }
        self.note_declared(bytes);
    }

    /// Notes that a ULT declared a footprint or data block of `bytes` (see `declared`'s
    /// protocol).
    #[inline]
    pub(crate) fn note_declared(&self, bytes: usize) {
        // The smallest first: a selector woken by the bell below reads both (the bell's lock
        // orders this thread's stores before its reads), and one that found a largest without
        // a smallest would take the declaration for none and sleep on.
        if bytes > 0 && bytes < self.smallest_declared.load(Ordering::Relaxed) {
            self.smallest_declared.store(bytes, Ordering::Relaxed);
        }
        let was = self.declared.load(Ordering::Relaxed);
        if was < bytes {
            self.declared.store(bytes, Ordering::Relaxed);
            self.ring(|bar| was <= bar && bytes > bar);
        }
    }

    /// Rings `auto`'s bell, if a selector hung one, when `crosses` its bar (see
    /// [`Bell`](super::auto::Bell)'s protocol): after a store that raised the largest declaration
    /// (rare: it only grows) or set `data_declared` (once).
    #[cold]
    fn ring(&self, crosses: impl FnOnce(usize) -> bool) {
        let bell = self.bell.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((bar, bell)) = &*bell {
            if crosses(*bar) {
                if let Some(bell) = bell.upgrade() {
                    bell.ring();
                }
            }
        }
    }

    /// Hangs the bell of a starting `auto` selector, rung when a declaration crosses `bar` bytes
    /// (the size that brings the locality signal) or the first data block is declared; replaces
    /// the bell of an earlier selector.
    pub(crate) fn hang_bell(&self, bar: usize, bell: &Arc<super::auto::Bell>) {
        *self.bell.lock().unwrap_or_else(|e| e.into_inner()) = Some((bar, Arc::downgrade(bell)));
    }

    /// The largest footprint or data block any ULT declared so far, in bytes (0: none).
    pub(crate) fn largest_declared(&self) -> usize {
        self.declared.load(Ordering::Relaxed)
    }

    /// The smallest and the largest footprint or data block (of more than 0 bytes) any ULT
    /// declared so far, in bytes; `None` before the first. (Relaxed hints: a largest read
    /// without the smallest of another thread's declaration counts as the smallest too.)
    pub(crate) fn declared_range(&self) -> Option<(usize, usize)> {
        let largest = self.largest_declared();
        let smallest = self.smallest_declared.load(Ordering::Relaxed).min(largest);
        (largest > 0).then_some((smallest, largest))
    }

    /// Whether the ULTs declared footprints or data blocks, and every one of them is *little
    /// data*: some declaration, and none of more lines than [`little_data_lines`] of the
    /// first-level data cache (`little_lines`; the `policy` module docs, "When there is
    /// nothing to act on", say why). The signal by which a processor's part goes quiet (see
    /// [`Local`]'s `quiet`). It reads nothing the host measures (the line costs may be
    /// unmeasured: `sync/host.rs` in the source), so a process goes quiet on the same
    /// declarations wherever the measurement failed. A relaxed load: a hint (see `declared`'s
    /// protocol).
    #[inline]
    pub(crate) fn small_declarations(&self) -> bool {
        let declared = self.declared.load(Ordering::Relaxed);
        declared != 0 && self.line_size.lines(declared) <= self.little_lines
    }

    /// Whether any ULT of the runtime declared a data block so far.
    pub(crate) fn data_declared(&self) -> bool {
        self.data_declared.load(Ordering::Relaxed)
    }

    /// The policy in force and its needs.
    #[inline]
    pub(crate) fn selected(&self) -> &Selected {
        self.board.current()
    }

    /// The generation of the policy in force (see [`Board`]).
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.board.generation()
    }

    /// Puts `policy` in force: what [`Runtime::set_policy`](crate::Runtime::set_policy) does
    /// to the engine. Each processor takes it up at its next safe point ([`Local::follow`]);
    /// returns the new generation.
    pub(crate) fn set_policy(&self, policy: &Policy) -> u64 {
        let needs = policy.hooks().needs();
        if needs.misses {
            let _ = self.model.get_or_init(|| model_of(&self.cache));
        }
        if needs.records() || policy.aggregation().is_some() {
            self.spawn_resets.store(true, Ordering::Relaxed);
        }
        let selected = Selected { policy: policy.clone(), needs };
        self.board.set(selected, |a, b| a.policy.same_as(&b.policy), |_| {})
    }

    /// The lines of `t`'s data expected still cached on its home processor `home` (the one it
    /// last ran on), as [`WakerInfo::home_lines`] gives them to the hand-off rule: with a cache
    /// model, its footprint decayed by the misses `home` published since its run ended; without
    /// one, its declared footprint in lines less what the declared data of the runs ended at
    /// `home` since its own would have pushed out of the model cache (`lines_clocks`; see
    /// [`hand_off`](crate::policy::hand_off)); in the quiet mode, its declared footprint. Any
    /// thread may ask; the caller owns the wake-up of `t`, so its record is settled.
    #[inline]
    pub(crate) fn home_lines(&self, t: TcbRef, home: usize) -> f32 {
        self.lines_at_home(t, home, self.quiet_at(home))
    }

    /// [`Engine::home_lines`] with `quiet`, whether `home` is quiet ([`Engine::quiet_at`]),
    /// already known to the caller.
    #[inline]
    fn lines_at_home(&self, t: TcbRef, home: usize, quiet: bool) -> f32 {
        let rec = &t.tcb().sched.record;
        match self.model.get() {
            Some(model) if self.selected().needs.misses && !quiet => {
                // (Relaxed: a hint, see `clocks`.)
                let clock = self.clocks.get(home).map_or(0, |c| c.load(Ordering::Relaxed));
                rec.footprint.get().valid_on(model, home, clock)
            }
            // Without a model: its declared lines, less what the declared data of the runs
            // ended at home since its own (the home's lines clock moved on from the record's)
            // would have pushed out of the model cache, were it least recently used first.
            _ if !quiet => {
                // (Relaxed: a hint, see `lines_clocks`.)
                let clock = self.lines_clocks.get(home).map_or(0, |c| c.load(Ordering::Relaxed));
                let since = clock.wrapping_sub(rec.lines_clock.get());
                rec.lines.get().min(self.cache_lines.saturating_sub(since)) as f32
            }
            _ => rec.lines.get() as f32,
        }
    }

    /// Whether processor `home` is in the quiet mode of the policy in force, as far as the
    /// hand-off rule is concerned (see [`Local`]'s `quiet`): a policy that may go quiet (one
    /// that counts misses with the estimator there), and only small declarations. A ULT woken
    /// by a crossing hand-off to a quiet home follows its waker ([`Engine::wake_target`]); its
    /// footprints and lines clocks are not kept while quiet, so the other readers of
    /// [`Engine::home_lines`] read the declared lines.
    fn quiet_at(&self, home: usize) -> bool {
        let estimated =
            matches!(self.sources.get(home).and_then(|s| s.get()), Some(SourceKind::Estimated { .. }));
        may_quiet(&self.selected().policy, estimated) && self.small_declarations()
    }

    /// This engine (its model and published clocks) answering for `policy` with `needs`: for
    /// tests that compare a built-in policy with its hooks called as a custom policy's.
    #[cfg(test)]
    fn with_policy(&self, policy: &Policy, needs: Needs) -> Engine {
        Engine {
            board: Board::new(Selected { policy: policy.clone(), needs }),
            spawn_resets: AtomicBool::new(needs.records()),
            model: self.model.clone(),
            cache: self.cache,
            sources: (0..self.sources.len()).map(|_| OnceLock::new()).collect(),
            clocks: self.clocks.clone(),
            lines_clocks: self.lines_clocks.clone(),
            cache_lines: self.cache_lines,
            line_size: self.line_size,
            aggregation: self.aggregation.clone(),
            data_declared: AtomicBool::new(self.data_declared()),
            declared: AtomicUsize::new(self.largest_declared()),
            smallest_declared: AtomicUsize::new(self.smallest_declared.load(Ordering::Relaxed)),
            little_lines: self.little_lines,
            bell: std::sync::Mutex::new(None),
        }
    }

    /// How many policies the board keeps (for tests).
    #[cfg(test)]
    fn board_len(&self) -> usize {
        self.board.kept_len()
    }

    /// The source each processor opened (`None`: none, or not yet started).
    pub(crate) fn sources(&self) -> Vec<Option<SourceKind>> {
        self.sources.iter().map(|s| s.get().cloned()).collect()
    }
}

/// Said once per process: the first processor that falls back to the estimator.
static NO_PMU: Once = Once::new();

/// A processor's part, owned by its thread.
pub(crate) struct Local {
    /// `needs.records()`: whether a run's end does anything ([`run_hooks`](Self::run_hooks)).
    records: bool,
    /// The counter source is a hardware counter: the only one whose clock moves between runs,
    /// so the only one a run's beginning must read (see [`begin_run`](Self::begin_run)).
    hardware: bool,
    /// What a run's end does, chosen once from the needs: one test per run's end (see [`End`]).
    end: End,
    /// The counter source and the model, when the policy needs misses.
    counting: Option<Counting>,
    /// `counting`'s model, apart: what Reload Transient's key reads at every enqueue, tested
    /// as a pointer (where `counting`'s presence is a test on the kind of its source).
    model: Option<Arc<CacheModel>>,
    /// The source's [`clock`](CounterSource::clock), copied after each call that moves it: what
    /// [`ProcessorView::clock`] shows, without a dispatch on the kind of source per key (0
    /// without a source).
    clock: u64,
    /// The end of a run that is more than a stamp: [`Local::record`], or a version of it made
    /// for the policy's needs with the estimator (chosen once, in [`Local::new`]).
    record: fn(&mut Local, TcbRef),
    policy: Policy,
    /// Whose keys to compute: `policy.kind()`, but [`Kind::Custom`] under the aggregation
    /// modifier too, so that the built-in policies' keys test nothing for the modifier (the
    /// custom arm, out of line, tells the two apart).
    kind: Kind,
    /// `policy.kind()`: whose keys the aggregation modifier adds its bonus to, or to ask the hooks
    /// for.
    base: Kind,
    /// `policy.wake_rule()`: how [`wakes_here`](Self::wakes_here) answers.
    wake: WakeRule,
    needs: Needs,
    processor: usize,
    /// Runs ended here (the stamps of Virtual Time), while the policy needs stamps.
    vtime: u64,
    /// This processor's lines clock (see [`Engine`]'s `lines_clocks`), moved with the stamps by
    /// the runs' ends that stamp inline ([`End::StampAndRound`], [`End::Stamp`]).
    lines_clock: u64,
    /// This processor's slot of [`Engine`]'s `lines_clocks`, where `lines_clock` is published.
    lines_published: Arc<CachePadded<AtomicU64>>,
    /// Runqueue entries so far, counted only for the policies that read the count: No
    /// Affinity's keys, Reload Transient's (entries of woken ULTs: its ties' order) and a
    /// custom policy's [`ProcessorView::seq`] (the other built-in policies' keys and hooks never
    /// read it, so their enqueues skip the count).
    seq: u64,
    /// The [`Board`] generation of `policy` (see [`follow`](Self::follow)).
    generation: u64,
    /// Whether the policy can go quiet here: Virtual Time, or Minimum Misses or Reload
    /// Transient counting with the estimator (see [`Local::quiet`]).
    may_quiet: bool,
    /// The quiet mode: the policy has nothing to act on here, so this part keys, yields and
    /// ends runs as No Affinity does (its keys, no records), and its wake rule marks no
    /// rounds. A processor is quiet while it [`may_quiet`](Self::may_quiet) and the ULTs'
    /// declarations are all small ([`Engine::small_declarations`]): some ULT declared a
    /// footprint or data block and none holds more than little data. Its
    /// counts stop while quiet (the estimator's clock, the stamps, the footprints); when the
    /// signal appears (a larger declaration) the next look ([`follow`](Self::follow)) leaves
    /// the mode and re-keys the runqueue, and the records start again from where they were.
    quiet: bool,
    /// The aggregation modifier's state, when the policy has it (`policy::aggregate`).
    aggregating: Option<Aggregating>,
}

/// The aggregation modifier's state on one processor (`policy::aggregate`).
struct Aggregating {
    bonus: u64,
    max_run: u64,
    /// Declared footprints above this get no bonus: the largest cache the processor uses.
    cutoff: usize,
    /// The group of the last grouped run begun here, favoured while `streak <= max_run`.
    last: u16,
    /// Runs of `last` begun back to back here.
    streak: u64,
    /// The processor's switch count when the last grouped run began.
    at: u64,
    /// The domain's word, and whether this processor is its master (the word's only writer).
    domain: Option<(Arc<CachePadded<AtomicU32>>, bool)>,
    /// Epochs handed out here: a group followed anew gets the next one, added to its favoured
    /// keys, so that the ULTs of the group followed now run before those favoured earlier
    /// (whose keys stay as they entered).
    epoch: u64,
    /// The group whose favoured keys were made last.
    epoch_group: u16,
    /// Per group number: the epoch its favoured keys carry, and how many of its favoured
    /// entries are waiting here (see [`Aggregating::favour`]). Grown to the largest group
    /// number favoured here.
    keyed: Vec<Keyed>,
}

/// A group's favoured keys on one processor ([`Aggregating::keyed`]).
#[derive(Clone, Copy, Default)]
struct Keyed {
    /// The epoch its favoured keys carry.
    epoch: u64,
    /// Its favoured entries not yet begun here: counted up at each favoured entry, down when a
    /// run of a favoured ULT of the group begins here (`Rare::FAVOURED`). A hint: an entry
    /// taken by a thief is not counted down here, which keeps the group's old epoch until the
    /// count falls back to 0 (its favoured runs here count it down, not below 0).
    waiting: u32,
}

/// The low bits of a favoured key that hold the favour's epoch ([`Aggregating::epoch`]).
const EPOCH_MASK: u64 = (1 << 40) - 1;

impl Aggregating {
    /// The group favoured here in time (0: none).
    #[inline]
    fn favoured(&self) -> u16 {
        if self.streak <= self.max_run {
            self.last
        } else {
            0
        }
    }

    /// The group whose ULTs get the bonus here: the domain master's while it favours one (IAS's
    /// slave follows its master), else the one favoured here in time.
    #[inline]
    fn followed(&self) -> u16 {
        match &self.domain {
            // (Relaxed: a hint, see the protocol in `policy::aggregate`.)
            Some((word, false)) => match word.load(Ordering::Relaxed) {
                0 => self.favoured(),
                master => master as u16,
            },
            _ => self.favoured(),
        }
    }

    /// `key` of `t`, entering this processor's runqueue, with the bonus when its group is the
    /// one followed here and its declared footprint fits the cache; `None` without a bonus.
    #[inline]
    fn favour(&mut self, key: u64, t: TcbRef) -> Option<u64> {
        let tcb = t.tcb();
        let group = tcb.head.group.get();
        if group == 0 || tcb.sched.record.bytes.get() > self.cutoff || group != self.followed() {
            return None;
        }
        let index = usize::from(group);
        if self.keyed.len() <= index {
            self.keyed.resize(index + 1, Keyed::default());
        }
        let keyed = &mut self.keyed[index];
        if group != self.epoch_group {
            // Followed anew: a new epoch, above every earlier one, unless favoured entries of
            // the group still wait here (entered while it was followed before, its siblings
            // of an interleaved start among them): the new ones take theirs and queue behind
            // them, so that the group's ULTs take turns together instead of each running its
            // own turns back to back and the group's siblings waiting below newer epochs.
            if keyed.waiting == 0 {
                self.epoch += 1;
                keyed.epoch = self.epoch;
            }
            self.epoch_group = group;
        }
        keyed.waiting = keyed.waiting.saturating_add(1);
        tcb.head.set_favoured();
        Some(key.saturating_add(self.bonus).min(u64::MAX - EPOCH_MASK) + (keyed.epoch & EPOCH_MASK))
    }
}

/// Whether `policy` can go quiet (see [`Local`]'s `quiet`), on a processor that counts misses
/// with the estimator (`estimated`) or not: Virtual Time, whose order reads no counter, and the
/// policies that count misses with the estimator, which derives them from the declarations;
/// never under a hardware counter or a script (real counts), for Gravity (its forces act on
/// small shared blocks) or under the aggregation modifier.
fn may_quiet(policy: &Policy, estimated: bool) -> bool {
    policy.aggregation().is_none()
        && match policy.kind() {
            Kind::VirtualTime => true,
            Kind::MinimumMisses | Kind::ReloadTransient => estimated,
            _ => false,
        }
}

/// What [`Local::follow`] took up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// A policy set on the engine since the last look.
    Policy,
    /// The same policy, into or out of its quiet mode ([`Local::quiet`]).
    Mode,
}

/// What the end of a run does on a processor ([`Local::end_run`]), chosen from the policy's needs
/// when the processor takes the policy up: a test on one byte per run's end, where three flags
/// took three tests before the call of the recording policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// [`Local::record`] or the version of it made for the needs (`Local::record`'s field).
    Record,
    /// A stamp and the round's update, inline (Virtual Time).
    StampAndRound,
    /// A stamp, inline.
    Stamp,
    /// Nothing: the policy keeps no records.
    Nothing,
}

/// What a processor counts misses with.
struct Counting {
    source: AnySource,
    model: Arc<CacheModel>,
    /// The clock when the running ULT's run began (read for a hardware counter only: see
    /// [`Local::begin_run`]).
    began: u64,
    /// This processor's slot of [`Engine`]'s published clocks (see its protocol).
    published: Arc<CachePadded<AtomicU64>>,
}

impl Counting {
    /// Keeps the source's clock after a run in `copy` (`Local::clock`), and publishes it for
    /// wakers elsewhere.
    #[inline(always)]
    fn set_clock(&self, copy: &mut u64, clock: u64) {
        *copy = clock;
        // Relaxed: a hint (see `Engine::clocks`).
        self.published.store(clock, Ordering::Relaxed);
    }
}

impl Local {
    /// The part of `processor`; call it on the processor's own thread (it opens the counter
    /// source there).
    pub(crate) fn new(processor: usize, counters: &CounterChoice, engine: &Engine) -> Local {
        // The generation first, then the policy (the board's order: see `Board`).
        let generation = engine.generation();
        Local::make(processor, counters, engine, engine.selected(), None, generation)
    }

    /// Takes up the policy set since this processor's last look, if any (the processor's side
    /// of the [`Board`] protocol; call it on the processor's own thread, between runs): rebuilds
    /// this part for it, keeping the counts (virtual time, entries, the miss clock) and the
    /// counter source already open. True when it did; the caller then re-keys its runqueue.
    ///
    /// Also where the quiet mode follows its signal ([`quiet`](Self::quiet)): with no new
    /// policy, a part whose mode no longer matches the declarations rebuilds itself for the
    /// same policy, and the caller re-keys as well.
    pub(crate) fn follow(&mut self, counters: &CounterChoice, engine: &Engine) -> Option<Taken> {
        let mut seen = self.generation;
        let own;
        let (selected, taken) = match engine.board.changed(&mut seen) {
            Some(selected) => (selected, Taken::Policy),
            None if self.may_quiet && self.quiet != engine.small_declarations() => {
                own = Selected { policy: self.policy.clone(), needs: self.needs };
                (&own, Taken::Mode)
            }
            None => return None,
        };
        let counting = self.counting.take();
        let mut next = Local::make(self.processor, counters, engine, selected, counting, seen);
        (next.vtime, next.seq, next.clock, next.lines_clock) =
            (self.vtime, self.seq, self.clock, self.lines_clock);
        *self = next;
        Some(taken)
    }

    /// The part of `processor` under `selected`, at `generation`, counting with `counting` when
    /// one is open already (kept even when `selected` needs no misses: the clocks the records
    /// hold stay those of one source), else with a source opened here when it needs misses.
    fn make(
        processor: usize,
        counters: &CounterChoice,
        engine: &Engine,
        selected: &Selected,
        counting: Option<Counting>,
        generation: u64,
    ) -> Local {
        let (policy, needs) = (&selected.policy, selected.needs);
        let counting = match (counting, engine.model.get(), needs.misses) {
            (Some(counting), _, _) => Some(counting),
            (None, Some(model), true) => Some(Counting {
                source: match counters {
                    CounterChoice::Detect => AnySource::detect(model),
                    CounterChoice::Estimated => AnySource::Estimated(EstimatedSource::new(model)),
                    CounterChoice::Scripted(script) => AnySource::Scripted(script(processor)),
                },
                model: Arc::clone(model),
                began: 0,
                published: Arc::clone(&engine.clocks[processor]),
            }),
            _ => None,
        };
        if let Some(Counting { source, .. }) = &counting {
            if let SourceKind::Estimated { no_pmu: Some(reason) } = source.kind() {
                NO_PMU.call_once(|| {
                    eprintln!(
                        "elite-rt: no hardware cache-miss counter here ({reason}); policy `{}` runs on misses \
                         estimated from the footprints ULTs declare (said once per process; \
                         Runtime::stats names each processor's source)",
                        policy.name()
                    )
                });
            }
            let _ = engine.sources[processor].set(source.kind().clone());
        }
        // A source kept from an earlier policy serves only a policy that needs misses.
        let counted = if needs.misses { counting.as_ref() } else { None };
        let estimated = matches!(counted, Some(Counting { source: AnySource::Estimated(_), .. }));
        // The quiet mode (see `Local::quiet` and `may_quiet`).
        let may_quiet = may_quiet(policy, estimated);
        let quiet = may_quiet && engine.small_declarations();
        // (A run hook, for custom policies only, takes the general path.)
        let record: fn(&mut Local, TcbRef) = match (estimated && !needs.run_hook, needs.stamps, needs.rounds)
        {
            (true, false, false) => Local::record_estimated::<false, false>,
            (true, true, false) => Local::record_estimated::<true, false>,
            (true, true, true) => Local::record_estimated::<true, true>,
            _ => Local::record,
        };
        Local {
            records: needs.records() && !quiet,
            end: if !needs.records() || quiet {
                End::Nothing
            } else if needs == Needs::STAMPS {
                End::Stamp
            } else if needs == Needs::STAMPS.with_rounds() {
                End::StampAndRound
            } else {
                End::Record
            },
            record,
            hardware: matches!(counted, Some(Counting { source: AnySource::Hardware(_), .. })),
            model: counted.map(|c| Arc::clone(&c.model)),
            clock: 0,
            counting,
            policy: policy.clone(),
            kind: match policy.aggregation() {
                Some(_) => Kind::Custom,
                None if quiet => Kind::NoAffinity,
                None => policy.kind(),
            },
            base: policy.kind(),
            // (Quiet: the same targets, without the round's mark: no rounds are kept.)
            wake: match policy.wake_rule() {
                WakeRule::HandOffInRounds if quiet => WakeRule::HandOff,
                rule => rule,
            },
            needs,
            processor,
            vtime: 0,
            lines_clock: 0,
            lines_published: Arc::clone(&engine.lines_clocks[processor]),
            seq: 0,
            generation,
            may_quiet,
            quiet,
            aggregating: policy.aggregation().map(|a| {
                let place = &engine.aggregation[processor];
                Aggregating {
                    bonus: a.bonus(),
                    max_run: u64::from(a.run_limit()),
                    cutoff: place.cutoff,
                    last: 0,
                    streak: 0,
                    at: 0,
                    domain: place.domain.clone(),
                    epoch: 0,
                    epoch_group: 0,
                    keyed: Vec::new(),
                }
            }),
        }
    }

    /// What the policy sees of this processor, after `self.seq` entries.
    #[inline]
    fn view(&self) -> ProcessorView<'_> {
        let view = ProcessorView::new(self.processor, self.seq).with_vtime(self.vtime);
        match &self.model {
            Some(model) => view.with_clock(self.clock, model),
            None => view,
        }
    }

    /// The key of `t` entering this processor's runqueue: a built-in policy's computed here, from
    /// the record fields it reads (the same functions its hook calls), a custom policy's by its
    /// hook.
    #[inline]
    pub(crate) fn priority(&mut self, t: TcbRef) -> u64 {
        self.priority_as(self.kind, t)
    }

    /// [`priority`](Self::priority) under the policy's hooks or the aggregation modifier (`kind`
    /// is [`Kind::Custom`] for both): out of line, so that neither costs the built-in policies'
    /// keys a test.
    #[inline(never)]
    fn modified_priority(&mut self, t: TcbRef) -> u64 {
        let key = match self.base {
            Kind::Custom => {
                self.seq += 1;
                self.custom_priority(t)
            }
            base => self.priority_as(base, t),
        };
        match self.aggregating {
            None => key,
            Some(_) => self.aggregated(key, t),
        }
    }

    /// `key`, of `t` entering this processor's runqueue, with the aggregation modifier's bonus
    /// when `t`'s group is favoured here (`policy::aggregate`); counts the favoured entries in
    /// the group's slot.
    #[inline(never)]
    fn aggregated(&mut self, key: u64, t: TcbRef) -> u64 {
        let Some(favoured) = self.aggregating.as_mut().and_then(|a| a.favour(key, t)) else {
            return key;
        };
        // SAFETY: a chunk's `shared` is its runtime's `Shared`, alive while its TCBs are used.
        let shared = unsafe { &*(t.chunk().shared() as *const crate::runtime::Shared) };
        shared.groups.slot(t.tcb().head.group.get()).aggregated(self.processor);
        favoured
    }

    /// A run of `t`, a ULT of group number `group` (not 0), begins here, the processor's
    /// `switches`-th switch into a ULT: the aggregation modifier's streak, its count of the
    /// group's favoured entries waiting here (`t`'s, if it waited with the bonus:
    /// `Rare::FAVOURED`, cleared here), and the master's word of its domain
    /// (`policy::aggregate`). Nothing without the modifier.
    #[inline]
    pub(crate) fn group_begins(&mut self, t: TcbRef, group: u16, switches: u64) {
        let Some(a) = &mut self.aggregating else {
            return;
        };
        if t.tcb().head.take_favoured() {
            if let Some(keyed) = a.keyed.get_mut(usize::from(group)) {
                keyed.waiting = keyed.waiting.saturating_sub(1);
            }
        }
        if group == a.last && switches == a.at.wrapping_add(1) {
            a.streak += 1;
        } else {
            (a.last, a.streak) = (group, 1);
        }
        a.at = switches;
        if let Some((word, true)) = &a.domain {
            // (Relaxed: a hint, see the protocol in `policy::aggregate`.)
            word.store(u32::from(a.favoured()), Ordering::Relaxed);
        }
    }

    /// [`priority`](Self::priority) under the built-in policy `kind`; [`Kind::Custom`]: under
    /// the hooks or the aggregation modifier.
    #[inline(always)]
    fn priority_as(&mut self, kind: Kind, t: TcbRef) -> u64 {
        let tcb = t.tcb();
        let rec = &tcb.sched.record;
        let virtual_time = || {
            let last = tcb.head.processor.load(Order::Relaxed);
            virtual_time::key(last, rec.stamp.get(), self.processor)
        };
        match kind {
            Kind::NoAffinity => {
                self.seq += 1;
                no_affinity::key(self.seq)
            }
            Kind::VirtualTime => virtual_time(),
            Kind::MinimumMisses => minimum_misses::key(rec.misses.get()),
            Kind::ReloadTransient => {
                // Its ties' order: the newest entry first (counted only with a model, the only
                // case that reads it).
                if self.model.is_some() {
                    self.seq += 1;
                }
                reload_transient::key(
                    &rec.footprint.get(),
                    self.seq,
                    self.model.as_deref(),
                    self.processor,
                    self.clock,
                )
            }
            Kind::Gravity => gravity::key(rec.state.get(), virtual_time),
            Kind::Custom => self.modified_priority(t),
        }
    }

    /// A custom policy's key for `t` entering here: its hook's answer. Not inlined: the
    /// [`UltInfo`](crate::policy::UltInfo) and the view it builds would give every policy's
    /// enqueue a stack frame.
    #[inline(never)]
    fn custom_priority(&self, t: TcbRef) -> u64 {
        self.policy.hooks().priority(&ult_info(t, self.needs), &self.view())
    }

    /// [`yield_priority`](Self::yield_priority) for a policy whose yield key is 0 for every ULT
    /// (No Affinity, Minimum Misses): its bookkeeping, and true; false, and nothing done, under
    /// the others. The yield batch's fast path (`Processor::yield_from_batch`).
    #[inline]
    pub(crate) fn yield_at_zero(&mut self) -> bool {
        // (Under the aggregation modifier `kind` is `Custom`: its bonus is a key.)
        match self.kind {
            Kind::NoAffinity => {
                self.seq += 1; // (as `yield_priority` counts it)
                true
            }
            Kind::MinimumMisses => true,
            _ => false,
        }
    }

    /// The key of `t` entering this processor's runqueue after a yield: computed here for a
    /// built-in policy, by the hook for a custom one.
    #[inline]
    pub(crate) fn yield_priority(&mut self, t: TcbRef) -> u64 {
        self.yield_priority_as(self.kind, t)
    }

    /// [`yield_priority`](Self::yield_priority) under the policy's hooks or the aggregation
    /// modifier, out of line (as [`modified_priority`](Self::modified_priority)).
    #[inline(never)]
    fn modified_yield_priority(&mut self, t: TcbRef) -> u64 {
        let key = match self.base {
            Kind::Custom => {
                self.seq += 1;
                self.policy.hooks().yield_priority(&ult_info(t, self.needs), &self.view())
            }
            base => self.yield_priority_as(base, t),
        };
        match self.aggregating {
            None => key,
            Some(_) => self.aggregated(key, t),
        }
    }

    /// [`yield_priority`](Self::yield_priority) under the built-in policy `kind`;
    /// [`Kind::Custom`]: under the hooks or the aggregation modifier.
    #[inline(always)]
    fn yield_priority_as(&mut self, kind: Kind, t: TcbRef) -> u64 {
        match kind {
            Kind::NoAffinity => {
                self.seq += 1;
                super::DEFAULT_YIELD_KEY
            }
            Kind::MinimumMisses => super::DEFAULT_YIELD_KEY,
            Kind::VirtualTime | Kind::ReloadTransient | Kind::Gravity => {
                rounds::yield_key(t.tcb().sched.record.state.get())
            }
            Kind::Custom => self.modified_yield_priority(t),
        }
    }

    /// Whether `t`, made ready by code running on this processor (`by`: the ULT running it, if
    /// any), stays here, as the policy's wake rule answers without its hooks: No Affinity keeps a
    /// ULT woken by a ULT here (unless pinned elsewhere); the hand-off rules and Gravity keep it
    /// when it last ran here (Gravity: when no force acts). False sends it to
    /// [`Engine::wake_target`]; a custom policy always goes there. The caller owns the wake-up.
    #[inline]
    pub(crate) fn wakes_here(&self, t: TcbRef, by: Option<TcbRef>) -> bool {
        let here = self.processor;
        match self.wake {
            // (A placed ULT, a pinned one among them, goes where the places say, whatever the
            // rule: `Processor::wake_to_target`.)
            _ if t.tcb().head.placed.get() => false,
            WakeRule::Waker if by.is_some() => true,
            WakeRule::Waker | WakeRule::HandOff => t.tcb().head.processor.load(Order::Relaxed) == here,
            WakeRule::HandOffInRounds => {
                let home = t.tcb().head.processor.load(Order::Relaxed) == here;
                if home {
                    mark_woken(t); // (as `wake_target` does)
                }
                home
            }
            WakeRule::Gravity => gravity_wakes_here(t, here, by),
            WakeRule::Hook => false,
        }
    }

    /// Whether the wake-ups made here are subject to the hand-off rule's balance clause
    /// ([`hand_off`], "Balance"): under the built-in rules that send a woken ULT home (the
    /// hand-off rule, and Gravity's, whose answer without a force is the hand-off rule's), not
    /// under No Affinity's (which keeps a ULT woken by a ULT with its waker anyway) nor a custom
    /// policy's hook.
    #[inline]
    pub(crate) fn balances(&self) -> bool {
        matches!(self.wake, WakeRule::HandOff | WakeRule::HandOffInRounds | WakeRule::Gravity)
    }

    /// Whether every ULT made ready by a ULT running here stays here, pinned ULTs aside (the
    /// wake rule of No Affinity): what lets the notifiers' wake path skip
    /// [`wakes_here`](Self::wakes_here).
    #[inline]
    pub(crate) fn woken_stay_with_ult_wakers(&self) -> bool {
        self.wake == WakeRule::Waker
    }

    /// Whether [`begin_run`](Self::begin_run) and [`end_run`](Self::end_run) do anything here:
    /// fixed when the processor is made, so a caller that resumes ULTs in a loop reads them once
    /// (`Processor::run_ult`) and skips both calls when they would not.
    #[inline(always)]
    pub(crate) fn run_hooks(&self) -> (bool, bool) {
        (self.hardware, self.records)
    }

    /// Adds the declared lines of the run that ended to this processor's lines clock, keeps
    /// the clock in the ULT's record and publishes it for wakers elsewhere (see [`Engine`]'s
    /// `lines_clocks`).
    #[inline(always)]
    fn count_lines(&mut self, rec: &UltRecord) {
        self.lines_clock = self.lines_clock.wrapping_add(rec.lines.get());
        rec.lines_clock.set(self.lines_clock);
        // Relaxed: a hint (see `Engine::lines_clocks`).
        self.lines_published.store(self.lines_clock, Ordering::Relaxed);
    }

    /// A run begins here: the counter source's clock, which the end of the run needs. Only a
    /// hardware counter is read: the estimator's and a script's clocks move only when a run
    /// ends, so at the end of a run the clock of its start is still [`CounterSource::clock`]
    /// before `end_run` (and `begin_run` of theirs does nothing else).
    #[inline(always)]
    pub(crate) fn begin_run(&mut self) {
        if self.hardware {
            if let Some(c) = &mut self.counting {
                c.began = c.source.begin_run();
                self.clock = c.began;
            }
        }
    }

    /// The run of `t` begun by the last [`begin_run`](Self::begin_run) ended.
    #[inline(always)]
    pub(crate) fn end_run(&mut self, t: TcbRef) {
        // One load and a compare per kind on the way (`End`'s order: the recording policies'
        // kinds first, those of a processor whose loop calls this at every switch).
        match self.end {
            End::Record => {
                let record = self.record;
                record(self, t);
            }
            End::StampAndRound => {
                // What `record` does for these needs, without the call and its checks.
                self.vtime += 1;
                let rec = &t.tcb().sched.record;
                rec.stamp.set(self.vtime);
                rec.state.set(rounds::end_run(self.processor, self.vtime, rec.state.get()));
                self.count_lines(rec);
            }
            End::Stamp => {
                self.vtime += 1;
                let rec = &t.tcb().sched.record;
                rec.stamp.set(self.vtime);
                self.count_lines(rec);
            }
            End::Nothing => {}
        }
    }

    /// The run of the joiner `t` pauses while a child runs on its stack (the join fast path).
    #[inline]
    pub(crate) fn pause(&mut self, t: TcbRef) {
        self.end_run(t);
    }

    /// The joiner's run goes on after the child switched back.
    #[inline]
    pub(crate) fn resume(&mut self) {
        self.begin_run();
    }

    /// Updates the record of `t` after a run here: any source (the estimator's processors take
    /// [`record_estimated`](Self::record_estimated) instead).
    #[inline(never)]
    fn record(&mut self, t: TcbRef) {
        let tcb = t.tcb();
        let rec = &tcb.sched.record;
        // (A source kept from an earlier policy counts only for a policy that needs misses.)
        if let (true, Some(c)) = (self.needs.misses, &mut self.counting) {
            // One dispatch on the kind of source, then a path made for it.
            let (model, processor) = (&*c.model, self.processor);
            match &mut c.source {
                AnySource::Estimated(source) => {
                    // The estimator's whole run in one pass (the same values as `count_run`).
                    let mut footprint = rec.footprint.get();
                    let misses = source.count_run_of_lines(model, &mut footprint, processor, rec.lines.get());
                    rec.misses.set(misses);
                    rec.footprint.set(footprint);
                    let clock = source.clock();
                    c.set_clock(&mut self.clock, clock);
                }
                AnySource::Hardware(source) => {
                    let clock = count_run_apart(source, model, (processor, c.began), t);
                    c.set_clock(&mut self.clock, clock);
                }
                AnySource::Scripted(source) => {
                    // Its clock has not moved since the run began (see `begin_run`).
                    let began = source.clock();
                    let clock = count_run_apart(source, model, (processor, began), t);
                    c.set_clock(&mut self.clock, clock);
                }
            }
        }
        if self.needs.stamps {
            self.vtime += 1;
            rec.stamp.set(self.vtime);
            if !self.needs.misses {
                // (No model: the hand-off rule reads the lines clock instead, as after the
                // inline ends.)
                self.count_lines(rec);
            }
        }
        if self.needs.rounds {
            rec.state.set(rounds::end_run(self.processor, self.vtime, rec.state.get()));
        }
        if self.needs.run_hook {
            self.run_hook(t);
        }
    }

    /// [`record`](Self::record) for a processor whose source is the estimator, and a policy
    /// whose needs' `stamps` and `rounds` are `STAMPS` and `ROUNDS`, without a run hook: the checks and the
    /// dispatch on the kind of source are settled once, when [`Local::new`] chooses it (the
    /// machines without a PMU take this path on every run).
    #[inline(never)]
    fn record_estimated<const STAMPS: bool, const ROUNDS: bool>(&mut self, t: TcbRef) {
        let rec = &t.tcb().sched.record;
        let processor = self.processor;
        let clock = &mut self.clock;
        let Some(Counting { source: AnySource::Estimated(source), model, published, .. }) =
            &mut self.counting
        else {
            // SAFETY: `Local::new` chooses this function only when `counting` holds the
            // estimator, and neither `counting` nor its source is replaced afterwards.
            unsafe { std::hint::unreachable_unchecked() }
        };
        let mut footprint = rec.footprint.get();
        // (`lines`: the estimator's count of `bytes`, in the model's lines; see `declare`.)
        let misses = source.count_run_of_lines(model, &mut footprint, processor, rec.lines.get());
        rec.misses.set(misses);
        rec.footprint.set(footprint);
        // `clock` and `published` hold the source's clock as of the last run's end (both start
        // at 0, as the source does, and only this function moves them): a run of no misses
        // (most of them where the working sets stay cached) leaves all three as they are.
        if misses != 0 {
            *clock = source.clock();
            // Relaxed: a hint (see `Engine::clocks`).
            published.store(*clock, Ordering::Relaxed);
        }
        if STAMPS {
            self.vtime += 1;
            rec.stamp.set(self.vtime);
        }
        if ROUNDS {
            rec.state.set(rounds::end_run(processor, self.vtime, rec.state.get()));
        }
        // No run hook: `Local::new` chooses this function only for needs without one.
    }

    /// Calls the policy's [`record_run`](crate::policy::Hooks::record_run) for the run of `t`
    /// that just ended here, and keeps the policy word it leaves. Not inlined: only custom
    /// policies take it, and inlined it would give the records' paths of every other policy
    /// a stack frame for its arguments.
    #[inline(never)]
    fn run_hook(&mut self, t: TcbRef) {
        let info = ult_info(t, self.needs);
        let mut state = info.state;
        self.policy.hooks().record_run(&info, &self.view(), &mut state);
        t.tcb().sched.record.state.set(state);
    }
}

/// Ends the run of `t` on `source`, which began on processor `at.0` with its clock at `at.1`,
/// and updates the misses and the footprint `t` shows to the policy; returns the clock after it.
#[inline]
fn count_run<S: CounterSource>(source: &mut S, model: &CacheModel, at: (usize, u64), t: TcbRef) -> u64 {
    let (processor, began) = at;
    let tcb = t.tcb();
    let rec = &tcb.sched.record;
    // What the model expected cached when the run began, from the clock then.
    let mut footprint = rec.footprint.get();
    let valid = footprint.valid_on(model, processor, began);
    let misses = source.end_run(&RunInfo::new(tcb.head.id.get(), rec.bytes.get(), valid));
    rec.misses.set(misses);
    let clock = source.clock();
    footprint.record_run(model, processor, valid, misses, clock);
    rec.footprint.set(footprint);
    clock
}

/// [`count_run`] in a function of its own, so that the other sources' code does not weigh on
/// the estimator's path (the one machines without a PMU take on every run).
#[inline(never)]
fn count_run_apart<S: CounterSource>(source: &mut S, model: &CacheModel, at: (usize, u64), t: TcbRef) -> u64 {
    count_run(source, model, at, t)
}

#[cfg(test)]
mod tests;
