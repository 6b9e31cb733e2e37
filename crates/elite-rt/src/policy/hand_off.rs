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
//! between cores, or when the policy is in its quiet mode at home (every ULT declared only
//! little data: [`policy`](super), "When there is nothing to act on"). Otherwise, and when a
//! timer, an exit or a thread outside the runtime wakes it, it goes home.
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
//!   in cache lines, less what the declared footprints of the runs that ended at home since its
//!   own would have pushed out of the model cache were it least recently used first: each
//!   processor sums the declared lines of the runs that end there (its *lines clock*, published
//!   as the miss clock is), the ULT's record keeps the home's sum at the end of its run, and the
//!   expectation is `min(declared, cache lines - (home's sum now - the record's))`, at least 0.
//!   A ULT with a large declared working set goes home while less than the cache's worth of
//!   declared data ran there since, and follows its waker after more; one with a small or no
//!   declared working set always follows. So the members of a group that synchronizes (a
//!   barrier's release) that steals have split over two processors gather on the releaser's
//!   processor once the data run at their homes since has pushed theirs out, as the cache
//!   model's decay gathers them for the policies that have one, instead of going home at every
//!   release and keeping the group split, with each processor running parts of several groups
//!   between their rounds. The sums are hints read without ordering: a ULT a thief took reads
//!   its new home's sum against its old home's, an answer that only chooses where it runs.
//!
//! # Balance
//!
//! The line count weighs what going home saves against what the trip costs, and leaves out
//! what the woken ULT does at home: wait. Home may be busy with a queue of ready ULTs while the
//! waker's processor is about to have nothing to run (its ULT blocks after the wake-up, as a
//! patch of a dataflow does after it signals its neighbours): the woken ULT then waits at home
//! for runs that the waker's processor could have spent running it, and that processor idles or
//! steals, moving some ULT away from its data anyway. So a ULT that a hand-off from another
//! processor would send home (under the line count above, or Gravity's rule where no force
//! acts) follows its waker instead when going home costs more time than reloading its lines
//! beside its waker:
//!
//! ```text
//! ahead_home × run_home + 3 round trips − ahead_here × run_here  >  home_lines × fetch per line
//! ```
//!
//! each term measured on the host while the runtime runs, none tuned:
//!
//! * `ahead`: the runs before its own, read when it is woken. At home: the run in progress,
//!   the ready ULTs of the runqueue home serves and of its `next` slot, and one more if its
//!   wake-up stack holds ULTs not drained yet. Beside the waker: the ready ULTs of the
//!   runqueue the waker's processor serves and of its `next` slot. The runqueue a processor
//!   serves is its own, or under [`RuntimeBuilder::place_level`](crate::RuntimeBuilder::place_level)
//!   the one its work-stealing place shares (counted whole, as if that processor alone drained
//!   it). The waker's own run is taken to end with the hand-off, as the
//!   direct hand-off takes it (the waker blocks next; one that runs on leaves the woken ULT
//!   stranded in the slot, where an idle processor takes it: `processor::find` in the source,
//!   "Stranded ULTs");
//! * `run`: each processor's expected run length, in time-stamp ticks, as the waker's
//!   processor measures it from that processor's switch counter between its looks, and at
//!   least as long as the run in progress has lasted (the estimate steal avoidance uses:
//!   `policy/places.rs` in the source, "Costly steals"); 0 until a look has seen the counter
//!   move, and the clause is then the line count alone;
//! * the round trips: the trip home as the line count above prices it,
//!   [`HAND_OFF_ROUND_TRIPS`] of the host's measured
//!   [`line_round_trip_ns`](crate::sync::HostCosts::line_round_trip_ns);
//! * `home_lines`: the lines of the ULT's data expected still cached at home, as for the line
//!   count;
//! * the fetch per line: the host's measured time per line to read a block another core has
//!   just written ([`HostCosts::line_fetch_ns`](crate::sync::HostCosts::line_fetch_ns)).
//!
//! Where the waits are equal the inequality is the line count's (follow when the lines cost
//! less to fetch than the round trips take), so the clause only adds what the queues add. It
//! decides nothing while the line costs are unmeasured
//! ([`HostCosts::lines_measured`](crate::sync::HostCosts::lines_measured)), nor when home is
//! parked (a parked processor is no queue: the push wakes it and it runs the ULT at once), nor
//! for a pinned ULT, nor under a custom policy's hook. It is the counterpart of steal
//! avoidance's test: a ready ULT whose wait in its queue has grown past its move cost is worth
//! stealing, so one woken into such a wait is worth keeping where it is. A ULT that follows
//! its waker this way runs there, and that processor is its home at its next wake-up: the
//! partition of ULTs between processors follows the load.
//!
//! On one processor the rule changes nothing: the waker is always at home.

use super::WakerInfo;
pub use crate::sync::host::HAND_OFF_ROUND_TRIPS;

/// The most lines a woken ULT may expect still cached at home and yet follow its waker (see the
/// [module docs](self)): derived from this host's measured line costs
/// ([`HostCosts::hand_off_lines`](crate::sync::HostCosts::hand_off_lines)) as currently measured
/// (the fewest, 4, until they are: `sync/host.rs` in the source says when they are measured,
/// and again).
///
/// ```
/// let lines = elite_rt::policy::hand_off::hand_off_lines();
/// assert!((4.0..=256.0).contains(&lines));
/// assert_eq!(lines, elite_rt::sync::host_costs().hand_off_lines());
/// ```
pub fn hand_off_lines() -> f32 {
    crate::sync::host::hand_off_lines()
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

/// How long a woken ULT would wait in a processor's ready set (the [module docs](self),
/// "Balance").
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Wait {
    /// The runs before its own (at home the run in progress among them).
    pub(crate) ahead: usize,
    /// The processor's expected run length, in time-stamp ticks.
    pub(crate) run: f64,
}

impl Wait {
    /// The ticks before it runs.
    #[inline]
    fn ticks(self) -> f64 {
        self.ahead as f64 * self.run.max(0.0)
    }
}

/// The balance clause of the hand-off rule (the [module docs](self), "Balance"): whether a ULT
/// woken by a hand-off from another processor, which the line count sends home, loses more time
/// going `home` (its wait there and the `trip`, in ticks) than it would waiting `here`, beside
/// its waker, and reloading its `home_lines` lines at `per_line` ticks each: then it follows its
/// waker.
#[inline]
pub(crate) fn waits_too_long_at_home(
    home: Wait,
    here: Wait,
    trip: f64,
    home_lines: f32,
    per_line: f64,
) -> bool {
    home.ticks() + trip.max(0.0) - here.ticks() > f64::from(home_lines.max(0.0)) * per_line.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::{waits_too_long_at_home, Wait};

    const fn wait(ahead: usize, run: f64) -> Wait {
        Wait { ahead, run }
    }

    /// 400 lines at 5 ticks each: a move costs 2000 ticks; the trip home 300.
    const LINES: f32 = 400.0;
    const PER_LINE: f64 = 5.0;
    const TRIP: f64 = 300.0;

    #[test]
    fn a_woken_ult_follows_its_waker_when_its_wait_at_home_outgrows_its_move() {
        let idle_here = wait(0, 1000.0);
        let follows = |home| waits_too_long_at_home(home, idle_here, TRIP, LINES, PER_LINE);
        // Home runs one ULT and has nobody waiting: 1000 + 300 ticks, less than the move.
        assert!(!follows(wait(1, 1000.0)));
        // One waiting behind it: 2300, more.
        assert!(follows(wait(2, 1000.0)));
        // Runs half as long: 1300, less; twice as long: 2300 with the run in progress alone.
        assert!(!follows(wait(2, 500.0)));
        assert!(follows(wait(1, 2000.0)));
    }

    #[test]
    fn a_busy_waker_keeps_the_woken_ult_going_home() {
        // As long a queue here (the waker's run aside) as at home (with its run in progress).
        assert!(!waits_too_long_at_home(wait(4, 1000.0), wait(4, 1000.0), TRIP, LINES, PER_LINE));
        // One more at home than here: 1300 ticks, less than the move.
        assert!(!waits_too_long_at_home(wait(5, 1000.0), wait(4, 1000.0), TRIP, LINES, PER_LINE));
        // Three more: 3300, more.
        assert!(waits_too_long_at_home(wait(7, 1000.0), wait(4, 1000.0), TRIP, LINES, PER_LINE));
    }

    #[test]
    fn with_equal_waits_the_clause_is_the_line_count() {
        // The same wait at both: it follows when its lines cost less than the trip, i.e. below
        // TRIP / PER_LINE = 60 lines.
        let (home, here) = (wait(3, 1000.0), wait(3, 1000.0));
        assert!(waits_too_long_at_home(home, here, TRIP, 59.0, PER_LINE));
        assert!(!waits_too_long_at_home(home, here, TRIP, 61.0, PER_LINE));
    }

    #[test]
    fn no_run_length_measured_yet_decides_by_the_line_count_alone() {
        // A first look reads 0 ticks: only the trip and the lines count.
        assert!(!waits_too_long_at_home(wait(9, 0.0), wait(0, 0.0), TRIP, LINES, PER_LINE));
        assert!(waits_too_long_at_home(wait(9, 0.0), wait(0, 0.0), TRIP, 10.0, PER_LINE));
    }
}
