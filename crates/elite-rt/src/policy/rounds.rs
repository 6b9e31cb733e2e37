//! Rounds: how the recency-based policies (Virtual Time, Reload Transient, gravity) order ULTs
//! that yield. Not a policy of its own: a helper that keeps a round in a ULT's policy word.
//!
//! ELiTE defines the order of ULTs made ready; a ULT that yields asks for something else: to let
//! the others run before it runs again. Keyed by its recency it would run again at once (it is
//! the most recently run), and keyed behind everything (the default yield key) it waits for
//! every other ready ULT, so that among many ULTs that keep yielding (an iterative solver's
//! active patches, each yielding after a sweep so that its neighbours sweep before it sweeps
//! again) each one's data has long left the cache when it runs again. Rounds let yielding ULTs
//! take turns instead:
//!
//! * when a ULT ends a round (its [`ROUND_RUNS`]-th run of the round, or its first run after a
//!   wake-up or after its spawn, or a run on another processor than the round's), it starts a
//!   new one in the *group* of the ULTs whose rounds ended around the same time on this
//!   processor: the group is the processor's run count at that moment divided by
//!   [`ROUND_GROUP`], so a group has at most that many members, ULTs that ran one after another;
//! * a ULT that yields is keyed by its group, the oldest group first, and within a group in the
//!   order the members yielded: the oldest group's members run in turn, each up to
//!   [`ROUND_RUNS`] times, while the groups formed after it wait; then it is the next group's
//!   turn;
//! * ULTs made ready by a wake-up run before every yielder (their keys, in the policy's own
//!   order, lie at and above `WOKEN_KEYS`).
//!
//! A group's members ran together in their last round, so each runs again within about
//! `ROUND_GROUP × ROUND_RUNS` runs of its previous run with its data, its stack and its control
//! block still cached, instead of after every other ready ULT; and since each runs at most
//! `ROUND_RUNS` times before the others, no yielder waits more than a bounded number of runs (a
//! ULT that spin-waits by yielding on a ULT outside its group waits up to `ROUND_GROUP ×
//! ROUND_RUNS` runs of others). The constants were chosen on the adaptive-grid solver
//! (`crates/elite-grid/examples/adaptive_grid.rs`, "Why the policies differ"): 512 ULTs' stack
//! tops, control blocks and a few lines of data each are about a quarter of a 2 MiB L2; 4 runs a
//! round balanced the rate against the extra relaxations of sweeping against staler neighbours.
//!
//! The runtime keeps the round itself at the end of every run, for the policies whose needs
//! include rounds ([`Needs::rounds`](super::Needs)): no call through the policy per run. Their
//! [`record_run`](super::Hooks::record_run) does the same when called directly.
//!
//! The policy word: bits 0-2 the runs so far in the round, bit 3 the wake-up mark, bits 4-11 the
//! processor of the round (modulo 256: a ULT that moves between two processors whose indices
//! differ by a multiple of 256 keeps its round), bits 12-43 its group (wrapping after 2^41 runs
//! of one processor); bits 44-63 are left to the policy (`ROUND_BITS`).

use super::ProcessorView;

/// Most ULTs in one round group (see the [module docs](self)).
pub const ROUND_GROUP: u64 = 512;

/// Runs each ULT of a round group gets before the group goes behind the others (see the
/// [module docs](self)); at most 8.
pub const ROUND_RUNS: u64 = 4;

/// Keys of ULTs made ready by a wake-up lie at and above this; keys of ULTs that yielded below.
pub(crate) const WOKEN_KEYS: u64 = 1 << 63;

const RUNS_BITS: u32 = 3;
const WOKEN: u64 = 1 << RUNS_BITS;
const PROCESSOR_SHIFT: u32 = RUNS_BITS + 1;
const PROCESSOR_BITS: u32 = 8;
const PROCESSOR_MASK: u64 = (1 << PROCESSOR_BITS) - 1;
const GROUP_SHIFT: u32 = PROCESSOR_SHIFT + PROCESSOR_BITS;
const GROUP_BITS: u32 = 32;
/// The low bits of the policy word that a round takes; the policy may keep its own above them.
pub(crate) const ROUND_BITS: u32 = GROUP_SHIFT + GROUP_BITS;
const ROUND_MASK: u64 = (1 << ROUND_BITS) - 1;

/// A ULT's round, as its policy word holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Round {
    /// Runs so far in the round.
    pub(crate) runs: u64,
    /// Made ready by a wake-up since its last run.
    pub(crate) woken: bool,
    /// The processor the round is on (modulo 256).
    pub(crate) processor: u64,
    /// The round's group.
    pub(crate) group: u64,
}

impl Round {
    pub(crate) fn unpack(word: u64) -> Round {
        Round {
            runs: word & (WOKEN - 1),
            woken: word & WOKEN != 0,
            processor: (word >> PROCESSOR_SHIFT) & PROCESSOR_MASK,
            group: (word & ROUND_MASK) >> GROUP_SHIFT,
        }
    }

    #[cfg(test)]
    pub(crate) fn pack(self) -> u64 {
        self.runs
            | if self.woken { WOKEN } else { 0 }
            | (self.processor & PROCESSOR_MASK) << PROCESSOR_SHIFT
            | (self.group & ((1 << GROUP_BITS) - 1)) << GROUP_SHIFT
    }
}

/// The end of a run of a ULT whose policy word is `state` on `here` (whose `vtime` counts this
/// run): the round goes on, or a new one begins. The bits above [`ROUND_BITS`] are kept.
#[inline]
pub(crate) fn record_run(here: &ProcessorView<'_>, state: &mut u64) {
    *state = end_run(here.processor, here.vtime, *state);
}

/// [`record_run`] on plain values: the policy word after a run on `processor` whose run count,
/// this run included, is `vtime`. The runtime calls it itself for policies that need rounds
/// ([`Needs::rounds`](super::Needs)).
#[inline(always)]
pub(crate) fn end_run(processor: usize, vtime: u64, word: u64) -> u64 {
    // On the bits of the word rather than through `Round` (the same transitions, fewer
    // instructions on every run's end): the round goes on when the ULT is not fresh (a fresh
    // ULT's round is 0: its first run begins a round, like one after a wake-up), not woken, on
    // the round's processor, and short of `ROUND_RUNS` runs.
    let processor = processor as u64 & PROCESSOR_MASK;
    // The runs, the mark and the round's processor are the word's low 12 bits, `runs + 8 woken
    // + 16 its processor`: less `16 processor` (wrapping) that is `runs` exactly when the mark
    // is clear and the processors are the same, and at least 8 (the mark, or a processor
    // above) or, wrapped, above 2^63 (a processor below) otherwise. So one comparison tells
    // all three (`record_run_follows_the_round_transitions` checks it against the docs' rules).
    const LOW: u64 = (1 << (PROCESSOR_SHIFT + PROCESSOR_BITS)) - 1;
    let goes_on =
        word & ROUND_MASK != 0 && (word & LOW).wrapping_sub(processor << PROCESSOR_SHIFT) < ROUND_RUNS - 1;
    if goes_on {
        word + 1 // `runs + 1 < ROUND_RUNS <= 8`: no carry out of the runs' bits
    } else {
        let group = (vtime / ROUND_GROUP) & ((1 << GROUP_BITS) - 1);
        (word & !ROUND_MASK) | processor << PROCESSOR_SHIFT | group << GROUP_SHIFT
    }
}

/// The key of a ULT that yielded, its policy word `state` updated by its run's end.
#[inline]
pub(crate) fn yield_key(state: u64) -> u64 {
    WOKEN_KEYS - 1 - Round::unpack(state).group
}

/// Marks the ULT whose policy word is `state` as made ready by a wake-up: its next run ends its
/// round.
#[inline]
pub(crate) fn mark_woken(state: &mut u64) {
    *state |= WOKEN;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ends one run on `here`; the yield key after it.
    fn run(state: &mut u64, here: &ProcessorView<'_>) -> u64 {
        record_run(here, state);
        yield_key(*state)
    }

    #[test]
    fn yielders_take_turns_in_rounds_of_their_group() {
        let mut state = 0;
        let mut vtime = 3 * ROUND_GROUP + 7;
        let key = run(&mut state, &ProcessorView::new(0, 1).with_vtime(vtime));
        assert_eq!(WOKEN_KEYS - 1 - key, 3, "a fresh ULT begins a round in the group of the run count");
        for _ in 1..ROUND_RUNS {
            vtime += 1000;
            assert_eq!(run(&mut state, &ProcessorView::new(0, 1).with_vtime(vtime)), key, "same round");
        }
        vtime += 1000;
        let later = run(&mut state, &ProcessorView::new(0, 1).with_vtime(vtime));
        assert!(later < key, "the next round's group comes after the older groups");
        assert_eq!(WOKEN_KEYS - 1 - later, vtime / ROUND_GROUP);
    }

    /// The transitions of `record_run` as the module docs state them, through `Round`.
    fn reference(here: &ProcessorView<'_>, word: u64) -> u64 {
        let mut round = Round::unpack(word);
        let processor = here.processor as u64 & PROCESSOR_MASK;
        if word & ROUND_MASK == 0
            || round.woken
            || round.processor != processor
            || round.runs + 1 >= ROUND_RUNS
        {
            round = Round { runs: 0, woken: false, processor, group: here.vtime / ROUND_GROUP };
        } else {
            round.runs += 1;
        }
        (word & !ROUND_MASK) | round.pack()
    }

    #[test]
    fn record_run_follows_the_round_transitions() {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Miri interprets each iteration some thousand times slower: a tenth of the words there
        // still reaches every branch of `record_run` many times over.
        let words: u64 = if cfg!(miri) { 10_000 } else { 100_000 };
        for i in 0..words {
            // Words with few runs, both marks, nearby processors and groups, and random high bits.
            let runs = next() % 8;
            let woken = if next() % 3 == 0 { WOKEN } else { 0 };
            let processor = next() % 4 + if i % 7 == 0 { 256 } else { 0 };
            let word = match i % 5 {
                0 => 0,
                1 => next(),
                _ => {
                    runs | woken
                        | (processor & PROCESSOR_MASK) << PROCESSOR_SHIFT
                        | (next() % 5) << GROUP_SHIFT
                        | (next() >> ROUND_BITS) << ROUND_BITS
                }
            };
            let here = ProcessorView::new((next() % 4) as usize, 1).with_vtime(next() >> (next() % 64));
            let mut state = word;
            record_run(&here, &mut state);
            assert_eq!(
                state,
                reference(&here, word),
                "word {word:#x}, processor {}, vtime {}",
                here.processor,
                here.vtime
            );
        }
    }

    #[test]
    fn a_wake_up_or_a_move_ends_the_round() {
        let here = ProcessorView::new(0, 1).with_vtime(5 * ROUND_GROUP);
        let mut state = 0;
        record_run(&here, &mut state);
        let before = state;
        mark_woken(&mut state);
        assert!(Round::unpack(state).woken);
        record_run(&ProcessorView::new(0, 1).with_vtime(9 * ROUND_GROUP), &mut state);
        assert_eq!(Round::unpack(state), Round { runs: 0, woken: false, processor: 0, group: 9 });
        let mut moved = before;
        record_run(&ProcessorView::new(1, 1).with_vtime(5 * ROUND_GROUP), &mut moved);
        assert_eq!(Round::unpack(moved), Round { runs: 0, woken: false, processor: 1, group: 5 });
        let r = Round { runs: 3, woken: true, processor: 255, group: (1 << 32) - 1 };
        assert_eq!(Round::unpack(r.pack()), r);
        assert!(yield_key(r.pack()) < WOKEN_KEYS);
        // The policy's own bits survive, and do not disturb the round.
        let mut word = 0xABCD_u64 << ROUND_BITS;
        record_run(&ProcessorView::new(2, 1).with_vtime(3 * ROUND_GROUP), &mut word);
        assert_eq!(word >> ROUND_BITS, 0xABCD);
        assert_eq!(Round::unpack(word).group, 3);
        assert_eq!(yield_key(word), WOKEN_KEYS - 1 - 3);
    }
}
