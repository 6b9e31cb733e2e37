//! The hand-off wake rule of the affinity policies: a woken ULT whose home cache holds little of
//! its data follows its waker. Not a policy of its own: the rule Virtual Time, Minimum Misses,
//! Reload Transient and (where no data is shared) Gravity apply in
//! [`wake_target`](super::Hooks::wake_target).
//!
//! ELiTE sends a woken ULT back to the processor it last ran on, its *home*, where its data is
//! cached. That pays when there is data there to find; when there is little (a ULT with a few
//! lines of its own, or one whose lines the home's cache has since evicted), the way back costs
//! more than it saves: the wake-up crosses to the home's wake-up stack (an atomic push and
//! perhaps an unpark), the woken ULT runs away from the data its waker just handed over (the
//! synchronization object's line, a value, a lock), and partners in a hand-off chain keep
//! crossing between processors. No Affinity's rule, keep a ULT woken by a hand-off beside its
//! waker, wins there.
//!
//! So a ULT made ready by a hand-off from a ULT running on another processor (an unlock, a
//! release, a send: [`WakerInfo::hand_off`]) follows its waker when the lines it can expect
//! still cached at home, [`WakerInfo::home_lines`], are at most [`hand_off_lines`]: the lines
//! that can be fetched from another core's cache in the time going home costs in transfers
//! between cores. Otherwise, and when a timer, an exit or a thread outside the runtime wakes it,
//! it goes home.
//!
//! The line count is derived from two costs the runtime measures on the host when its first
//! runtime starts ([`HostCosts`](crate::sync::HostCosts)): the round trip of a cache line between
//! two cores, and the time per line to read a block another core has just written (many lines in
//! flight at once). Going home costs about [`HAND_OFF_ROUND_TRIPS`] (3) round trips (the push
//! onto the home's wake-up stack, its drain there, and the handed-over data fetched back by the
//! woken ULT), so the count is `3 × round trip / fetch per line`
//! ([`HostCosts::hand_off_lines`](crate::sync::HostCosts::hand_off_lines), kept within 4 and
//! 256): about 30 lines where a round trip takes 100 ns and a line in a stream 10 ns.
//!
//! The runtime fills in `home_lines` for each hand-off that crosses processors:
//!
//! * for a policy that [`Needs::misses`](super::Needs) (Minimum Misses, Reload Transient,
//!   Gravity): the cache model's expectation, the footprint of the ULT's last run decayed by the
//!   misses its home has counted since ([`Footprint::valid_on`](elite_affinity::Footprint::valid_on)
//!   with the home's miss clock, which every processor publishes at the end of each run so that
//!   a waker on another processor reads it without a lock). A ULT with a large working set
//!   follows its waker once the others' misses at home have evicted it;
//! * for the others (Virtual Time: no counter, no model): the footprint the ULT declared
//!   ([`Builder::footprint`](crate::Builder::footprint), [`set_footprint`](crate::set_footprint)),
//!   in cache lines, undecayed: an upper bound, so a ULT with a large declared working set always
//!   goes home, and one with a small or no declared working set always follows.
//!
//! On one processor the rule changes nothing: the waker is always at home.

use super::WakerInfo;
pub use crate::sync::host::HAND_OFF_ROUND_TRIPS;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most lines a woken ULT may expect still cached at home and yet follow its waker (see the
/// [module docs](self)): derived from this host's measured line costs
/// ([`HostCosts::hand_off_lines`](crate::sync::HostCosts::hand_off_lines)), once they are
/// measured (the fewest, 4, until then: `sync/host.rs` in the source says when they are).
///
/// ```
/// let lines = elite_rt::policy::hand_off::hand_off_lines();
/// assert!((4.0..=256.0).contains(&lines));
/// assert_eq!(lines, elite_rt::sync::host_costs().hand_off_lines());
/// ```
pub fn hand_off_lines() -> f32 {
    // The value with MEASURED set once derived from measured line costs; 0: not derived yet.
    static LINES: AtomicU64 = AtomicU64::new(0);
    const MEASURED: u64 = 1 << 32;
    let cached = LINES.load(Ordering::Relaxed);
    if cached & MEASURED != 0 || (cached != 0 && !crate::sync::host::lines_measured_later()) {
        return f32::from_bits(cached as u32);
    }
    let costs = crate::sync::host_costs();
    let lines = costs.hand_off_lines();
    let flag = if costs.lines_measured { MEASURED } else { 0 };
    LINES.store(flag | u64::from(lines.to_bits()), Ordering::Relaxed);
    lines
}

/// Whether the ULT that `waker` makes ready follows it to its processor under the hand-off
/// rule (see the [module docs](self)): a hand-off from inside the runtime, with at most
/// [`hand_off_lines`] of the ULT's lines expected at home.
///
/// ```
/// use elite_rt::policy::{hand_off, WakerInfo};
///
/// let handing_off = WakerInfo::new(Some(1)).handing_off();
/// assert!(hand_off::follows_waker(&handing_off.with_home_lines(2.0)));
/// assert!(!hand_off::follows_waker(&handing_off.with_home_lines(4096.0)));
/// // A timer, an exit or a thread outside the runtime: home.
/// assert!(!hand_off::follows_waker(&WakerInfo::new(Some(1))));
/// assert!(!hand_off::follows_waker(&WakerInfo::new(None).handing_off()));
/// ```
#[inline]
pub fn follows_waker(waker: &WakerInfo) -> bool {
    waker.hand_off && waker.processor.is_some() && cached_little(waker.home_lines)
}

/// Whether `home_lines`, the lines of a woken ULT's data expected still cached at home, are few
/// enough for it to follow a hand-off's waker: at most [`hand_off_lines`].
#[inline(always)]
pub(crate) fn cached_little(home_lines: f32) -> bool {
    home_lines <= hand_off_lines()
}

/// The processor a ULT last run on `home` goes to when `waker` makes it ready: the waker's when
/// it [`follows_waker`], else `home`.
#[inline]
pub fn target(home: usize, waker: &WakerInfo) -> usize {
    match waker.processor {
        Some(x) if follows_waker(waker) => x,
        _ => home,
    }
}
