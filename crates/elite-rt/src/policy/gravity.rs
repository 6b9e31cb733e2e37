//! Gravity (ELiTE section 3.3, "Towards Optimal Affinity Scheduling"): forces between ULTs that
//! synchronize draw those that share data onto one processor and push compute-heavy ones apart.

use super::rounds::{self, ROUND_BITS};
use super::{hand_off, Hooks, Needs, ProcessorView, UltInfo, WakerInfo};

/// A synchronization partner that streams more than this many times the lines it shares with its
/// waker through the cache in one run is *compute-heavy* (see [`Gravity`]).
pub const REPEL_FACTOR: u64 = 8;

/// Bytes of a cache line: shared data is counted in lines.
const LINE: usize = 64;

// The policy's bits of the word, above the round's (`rounds`).
const REPELLED: u64 = 1 << ROUND_BITS;
const CANDIDATE_SHIFT: u32 = ROUND_BITS + 1;
const CANDIDATE_BITS: u32 = 8; // the processor pulling, modulo 256
const PULL_SHIFT: u32 = CANDIDATE_SHIFT + CANDIDATE_BITS;
const PULL_MAX: u64 = (1 << (64 - PULL_SHIFT)) - 1; // 11 bits: the pull, in lines, saturating

/// Synchronization-driven affinity: when a ULT `A` running on processor `X` makes a blocked ULT
/// `B` ready (a release, an unlock, a send), the data they share decides where `B` runs next.
///
/// # The force model
///
/// The data two ULTs share is the overlap of the data blocks they declared
/// ([`Builder::data`](crate::Builder::data), [`set_data_block`](crate::set_data_block)), in cache
/// lines: `shared` (the runtime hands it over as [`WakerInfo::shared_bytes`]). (ELiTE used the cache misses taken while modifying the shared region; a
/// counter that tells shared misses from private ones does not exist on the machines this runs
/// on, so the declaration stands in for it.) `B`'s affinity to the processor `Y` it last ran on
/// is its *private* part there: the lines of its footprint the cache model expects cached at the
/// end of its last run ([`UltInfo::footprint`], from the counter source, a hardware counter or
/// the estimator driven by [`Builder::footprint`](crate::Builder::footprint)), less `shared`.
/// Each wake-up of `B` by `A` applies one of these forces:
///
/// * **aggregation** (`X ≠ Y`, `shared ≥ private`): low-affinity ULTs sharing a region large
///   relative to their private working set: `B` moves to `X` at once;
/// * **gravity** (`X ≠ Y`, `shared < private`): `A` pulls `B` towards `X` by `shared` lines; the
///   pulls of successive synchronizations from the same processor add up (in `B`'s policy word,
///   up to 2047 lines), and when they reach `private`, `B` moves to `X` (a ULT with much cached
///   data of its own needs many synchronizations to be drawn away from it; one pulled from
///   another processor starts over);
/// * **repulsion** (`X = Y`, `B` compute-heavy): a partner that streamed more than
///   [`REPEL_FACTOR`] times `shared` lines through the cache in its last run (its misses) gains
///   little from running beside `A` and competes with it for the cache: it is marked *repelled*
///   and keyed below every other ready ULT, so that an idle processor's thief takes it first
///   (thieves take the lowest keys) and the pair spreads over two processors;
/// * none otherwise (no shared data, a waker that is no ULT, or a partner already beside `A`
///   that is not compute-heavy: its pull is reset). Without shared data, `B` goes where the
///   other affinity policies send it: home, or after its waker by the
///   [hand-off rule](super::hand_off) when little of its data is still cached at home.
///
/// Since each side of a pair pulls the other when it wakes it, the partner with the smaller
/// private working set is the one that moves: ELiTE's "a thread with a great cache affinity
/// exerts a gravitational force on a thread with a small cache affinity". Load balance comes
/// from stealing: a thief takes one side of a pair, and the next wake-up between the two draws
/// the other side after it.
///
/// Within a processor, ULTs run in the order of [`VirtualTime`](super::VirtualTime) (most
/// recently run here first, yielders in rounds). Its bookkeeping is that of the counting
/// policies (two counter-source calls and the cache model's update per run) plus reading the
/// waker's and the woken ULT's blocks at each wake-up.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gravity;

/// `B`'s forces, as the bits of its policy word above the round hold them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Forces {
    /// Keyed below every other ready ULT.
    repelled: bool,
    /// The processor pulling it (modulo 256).
    candidate: u64,
    /// The lines pulled so far.
    pull: u64,
}

impl Forces {
    fn unpack(word: u64) -> Forces {
        Forces {
            repelled: word & REPELLED != 0,
            candidate: (word >> CANDIDATE_SHIFT) & ((1 << CANDIDATE_BITS) - 1),
            pull: word >> PULL_SHIFT,
        }
    }

    /// `word` with these forces in place of its own.
    fn pack_into(self, word: u64) -> u64 {
        (word & (REPELLED - 1))
            | if self.repelled { REPELLED } else { 0 }
            | (self.candidate & ((1 << CANDIDATE_BITS) - 1)) << CANDIDATE_SHIFT
            | self.pull.min(PULL_MAX) << PULL_SHIFT
    }
}

impl Gravity {
    /// Where `b`, whose forces are `f`, goes when woken from processor `x` by a ULT, as `waker`
    /// describes the wake-up; updates `f`.
    fn force(b: &UltInfo, waker: &WakerInfo, x: usize, f: &mut Forces) -> usize {
        let y = b.last_processor;
        let shared = waker.shared_bytes.div_ceil(LINE) as u64;
        if shared == 0 {
            // No force: the hand-off rule decides, as under the other affinity policies.
            return hand_off::target(y, waker);
        }
        let resident = b.footprint.lines().max(0.0) as u64;
        let private = resident.saturating_sub(shared);
        if x == y {
            // Beside its partner: bound here, unless compute-heavy.
            f.pull = 0;
            f.repelled = b.misses > REPEL_FACTOR.saturating_mul(shared);
            return y;
        }
        f.repelled = false;
        if shared >= private {
            f.pull = 0;
            return x; // aggregation
        }
        let candidate = x as u64 & ((1 << CANDIDATE_BITS) - 1);
        if f.candidate != candidate {
            *f = Forces { repelled: false, candidate, pull: 0 };
        }
        f.pull = (f.pull + shared).min(PULL_MAX);
        if f.pull >= private.min(PULL_MAX) {
            f.pull = 0;
            return x; // gravity overcame its affinity
        }
        y
    }
}

impl Hooks for Gravity {
    fn name(&self) -> &'static str {
        "gravity"
    }

    fn needs(&self) -> Needs {
        Needs::MISSES.with_wakers().with_rounds().with_data()
    }

    #[inline]
    fn priority(&self, ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
        key(ult.state, || super::VirtualTime.priority(ult, here))
    }

    #[inline]
    fn yield_priority(&self, ult: &UltInfo, _here: &ProcessorView<'_>) -> u64 {
        rounds::yield_key(ult.state)
    }

    #[inline]
    /// The round's update ([`rounds`](super::rounds)); the runtime applies it itself at each
    /// run's end (the policy needs rounds, not the run hook), so this is for direct calls.
    fn record_run(&self, _ult: &UltInfo, here: &ProcessorView<'_>, state: &mut u64) {
        rounds::record_run(here, state);
    }

    fn wake_target(&self, ult: &UltInfo, waker: &WakerInfo, state: &mut u64) -> usize {
        rounds::mark_woken(state);
        let (Some(x), Some(_)) = (waker.processor, waker.ult.as_ref()) else {
            return ult.last_processor;
        };
        let mut forces = Forces::unpack(*state);
        let target = Gravity::force(ult, waker, x, &mut forces);
        *state = forces.pack_into(*state);
        target
    }
}

/// The key of a ULT whose policy word is `state`, with `virtual_time` its key under Virtual Time
/// (within a processor, gravity keeps Virtual Time's order): [`Gravity::priority`] on plain
/// values (the runtime computes it itself).
#[inline(always)]
pub(crate) fn key(state: u64, virtual_time: impl FnOnce() -> u64) -> u64 {
    if state & REPELLED != 0 {
        0
    } else {
        virtual_time()
    }
}

#[cfg(test)]
mod tests {
    use super::rounds::WOKEN_KEYS;
    use super::*;
    use crate::prefetch::DataBlock;
    use elite_affinity::{CacheModel, Footprint};

    fn block(at: usize, bytes: usize) -> DataBlock {
        DataBlock::new(at as *const u8, bytes)
    }

    /// A ULT `id` last run on `processor` with `lines` of footprint cached and `misses` in its
    /// last run, declaring `data`.
    fn ult(id: u64, processor: usize, lines: u64, misses: u64, data: DataBlock) -> (UltInfo, DataBlock) {
        let model = CacheModel::new(32768, 64).expect("valid");
        let mut f = Footprint::EMPTY;
        if lines > 0 {
            f.record_run(&model, processor, 0.0, lines, 1);
        }
        (UltInfo::new(id, processor).with_footprint(f).with_misses(misses), data)
    }

    /// Wakes `b` (whose word is `state`) by `a` from `a`'s processor, as the runtime does: the
    /// shared bytes are the overlap of their blocks.
    fn wake(b: &(UltInfo, DataBlock), a: &(UltInfo, DataBlock), state: &mut u64) -> usize {
        // Its footprint is all still cached at home (no misses there since its run).
        let waker = WakerInfo::new(Some(a.0.last_processor))
            .with_ult(a.0)
            .with_shared_bytes(a.1.overlap(&b.1))
            .with_home_lines(b.0.footprint.lines());
        Gravity.wake_target(&b.0.with_state(*state), &waker, state)
    }

    #[test]
    fn low_affinity_partners_sharing_their_block_aggregate_at_once() {
        let buf = block(1 << 20, 4096); // 64 lines, both declare it
        let a = ult(1, 0, 64, 64, buf);
        let b = ult(2, 1, 64, 64, buf);
        let mut state = 0;
        assert_eq!(wake(&b, &a, &mut state), 0, "B joins A on processor 0");
        // Without shared data, or woken from outside, nothing moves (1024 lines at home: more
        // than the hand-off rule's count on any host, at most 256)...
        let c = ult(3, 1, 1024, 1024, block(1 << 24, 64 << 10));
        assert_eq!(wake(&c, &a, &mut 0), 1);
        // ... but the hand-off rule: with little of its data at home (2 lines: less than its
        // count on any host, at least 4), it follows its waker.
        let small = ult(5, 1, 2, 2, block(1 << 24, 128));
        assert_eq!(wake(&small, &a, &mut 0), 0);
        let mut s = 0;
        assert_eq!(Gravity.wake_target(&b.0, &WakerInfo::new(Some(0)), &mut s), 1);
        assert_eq!(Gravity.wake_target(&b.0, &WakerInfo::new(None), &mut s), 1);
    }

    #[test]
    fn gravity_overcomes_a_large_private_affinity_after_enough_synchronizations() {
        // B has 2000 lines cached on processor 1; it shares 256 lines (16 KiB) with A.
        let shared = block(1 << 20, 16 << 10);
        let a = ult(1, 0, 256, 256, shared);
        let b = ult(2, 1, 2000, 2000, block((1 << 20) - (100 << 10), 116 << 10));
        let resident = b.0.footprint.lines() as u64;
        let private = resident - 256;
        let wakes_needed = private.div_ceil(256);
        let mut state = 0;
        for k in 1..wakes_needed {
            assert_eq!(wake(&b, &a, &mut state), 1, "wake {k}: still bound to its own data");
            assert_eq!(Forces::unpack(state).pull, 256 * k);
        }
        assert_eq!(wake(&b, &a, &mut state), 0, "the pull reached its private lines");
        assert_eq!(Forces::unpack(state).pull, 0);
        // A pull from another processor starts over.
        let mut state = 0;
        wake(&b, &a, &mut state);
        let from2 = ult(4, 2, 256, 256, shared);
        assert_eq!(wake(&b, &from2, &mut state), 1);
        assert_eq!(Forces::unpack(state), Forces { repelled: false, candidate: 2, pull: 256 });
    }

    #[test]
    fn compute_heavy_partners_on_one_processor_repel() {
        let shared = block(1 << 20, 1024); // 16 lines
        let a = ult(1, 0, 16, 16, shared);
        // B streamed 10 000 lines in its last run: more than 8 x 16.
        let heavy = ult(2, 0, 16, 10_000, shared);
        let mut state = 0;
        assert_eq!(wake(&heavy, &a, &mut state), 0, "stays, but repelled");
        let here = ProcessorView::new(0, 5).with_vtime(100);
        let repelled = heavy.0.with_state(state).with_stamp(99);
        assert_eq!(Gravity.priority(&repelled, &here), 0, "below every other ready ULT");
        let mut yielder_state = 0;
        Gravity.record_run(&a.0, &here, &mut yielder_state);
        assert!(Gravity.yield_priority(&a.0.with_state(yielder_state), &here) > 0);
        // A light partner is bound, not repelled.
        let light = ult(3, 0, 16, 16, shared);
        let mut state = REPELLED;
        assert_eq!(wake(&light, &a, &mut state), 0);
        assert!(!Forces::unpack(state).repelled);
        assert!(Gravity.priority(&light.0.with_state(state).with_stamp(99), &here) > WOKEN_KEYS);
    }

    #[test]
    fn forces_leave_the_round_alone() {
        let f = Forces { repelled: true, candidate: 255, pull: PULL_MAX };
        let round_bits = 0x0000_0ABC_DEF0_1234 & (REPELLED - 1);
        let word = f.pack_into(round_bits);
        assert_eq!(Forces::unpack(word), f);
        assert_eq!(word & (REPELLED - 1), round_bits);
    }
}
