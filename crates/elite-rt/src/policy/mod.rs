//! Scheduling policies: which ready ULT a processor runs next, and where a woken ULT goes.
//!
//! A [`Policy`] is a value: pick one of ELiTE's four, or `gravity` (section 3.3), by name or by constructor, or wrap your own
//! [`Hooks`], and hand it to [`RuntimeBuilder::policy`](crate::RuntimeBuilder::policy).
//!
//! ```
//! use elite_rt::policy::Policy;
//!
//! let policy: Policy = "virtual-time".parse()?;
//! let rt = elite_rt::Runtime::builder().processors(1).policy(policy).build()?;
//! assert_eq!(rt.policy_name(), "virtual-time");
//!
//! // An unknown name is an error that lists the valid ones.
//! let err = "fifo".parse::<Policy>().unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "unknown policy `fifo`: expected one of no-affinity, virtual-time, minimum-misses, reload-transient, gravity, auto"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The four policies of ELiTE (section 3.1)
//!
//! | name | basis of decision | runs first | needs | cost per run |
//! | --- | --- | --- | --- | --- |
//! | `no-affinity` ([`NoAffinity`]) | processor location | the ULT made ready last (LIFO) | nothing | none |
//! | `virtual-time` ([`VirtualTime`]) | sequence numbers | the ULT whose last run ended most recently *here* | a stamp per run | a counter increment and a store |
//! | `minimum-misses` ([`MinimumMisses`]) | cache misses | the ULT with the fewest misses in its last run | a counter source | one estimator pass (or two source calls) and the cache model's update |
//! | `reload-transient` ([`ReloadTransient`]) | cache misses | the ULT with the smallest expected reload transient here | a counter source | as `minimum-misses`, plus a model lookup per enqueue |
//! | `gravity` ([`Gravity`]) | synchronization and shared data | as `virtual-time`; a woken ULT may move to its waker's processor | a counter source, the wakers, declared data blocks | as `minimum-misses`, plus an overlap of two blocks per wake-up by a ULT |
//!
//! - **No Affinity** keys each runqueue entry with the processor's entry sequence number: the
//!   newest entry runs first. A hand-off chain (wake one, block) then stays hot by itself, but a
//!   batch of ULTs made ready together runs in the reverse of the order they were made ready,
//!   whatever their caches hold. A ULT woken by a hand-off (an unlock, a release, a send) goes to
//!   its waker's processor. The other policies send it back where it last ran, unless the
//!   [hand-off rule](hand_off) finds that little of its data is still cached there (at most
//!   [`hand_off_lines`](hand_off::hand_off_lines), derived from the host's measured line costs: a
//!   small declared footprint, or, with a cache model, one the home's
//!   misses have since evicted), or the policy is quiet (below): then it follows its waker too.
//! - **Virtual Time**: each processor counts the runs that end on it; when a run ends the ULT is
//!   stamped with that count. The key is the stamp when the ULT last ran on the processor whose
//!   runqueue it enters, and the lowest such key (behind every such ULT) when it last ran
//!   elsewhere: the most recently run ULT, whose data is most likely still cached, runs first.
//!   It needs no counters and works on any hardware. ULTs that yield take turns in rounds with
//!   the ULTs they ran with, behind every woken ULT ([`rounds`]; also under Reload Transient and
//!   Gravity).
//! - **Gravity** (section 3.3): when a ULT wakes another, the data their declared blocks share
//!   draws the woken ULT to the waker's processor (at once when the shared part outweighs its
//!   private cached lines, after enough wake-ups otherwise), and compute-heavy partners on one
//!   processor are keyed lowest so that a thief separates them (see [`Gravity`]).
//! - **Minimum Misses**: the key is `u64::MAX - misses of the last run`, so the ULT that missed
//!   least runs first. It favours ULTs that block often (short runs, few misses); with uniform
//!   ULTs its keys carry no information about what is cached *now*, and ties run in the order
//!   the ULTs were made ready (oldest first).
//! - **Reload Transient**: the cache model ([`elite_affinity::CacheModel`], the Markov chain of
//!   section 3.1) gives each ULT's expected footprint after its last run and the lines of it
//!   still valid after the misses counted on its processor since then; the key orders by the
//!   expected misses to rebuild the footprint (lowest first), computed once when the ULT enters
//!   the runqueue (as the paper notes, later misses shrink every waiting ULT's footprint by the
//!   same factor, so the order need not be revised). Where the model cannot tell ULTs apart
//!   (a reload transient of 0: no miss counted here since their runs ended here, often the
//!   case where working sets stay cached) the key adds the processor's count of entries, so
//!   those run newest entry first, as under No Affinity, rather than in the order they entered
//!   the runqueue, which ran the coldest first.
//!
//! ## When there is nothing to act on: the quiet mode
//!
//! The affinity policies order by what the runtime knows of the ULTs' data, and where the ULTs
//! said how much data they touch ([`Builder::footprint`](crate::Builder::footprint),
//! [`set_footprint`](crate::set_footprint), [`Builder::data`](crate::Builder::data),
//! [`set_data_block`](crate::set_data_block)) and all of it is *little data*, there is nothing
//! in the cache for an order to keep. Then **Virtual Time**, and **Minimum Misses** and
//! **Reload Transient** on a processor that counts misses with the estimator (which derives them
//! from those same declarations), go *quiet*: they behave as No Affinity does. They key, yield
//! and end runs as it does (the newest entry first, no stamps, no estimator pass, no
//! cache-model update), and a ULT woken by a hand-off from a ULT on another processor follows
//! its waker, as under No Affinity (little data has nothing at home worth the trip); a ULT woken
//! otherwise (a timer, an exit, a thread outside the runtime) goes home. They cost what No
//! Affinity costs.
//!
//! *Little data* is a declaration of at most a sixteenth of the first-level data cache (of
//! processor 0 in the runtime's topology, the cache [`auto`]'s locality signal is measured
//! against; 32 KiB where the topology describes none): 48 lines of 64 bytes with a 48 KiB L1d,
//! 32 with 32 KiB. It is a share of a cache every host describes, and reads nothing the runtime
//! measures, so a process goes quiet on the same declarations whether or not it could measure
//! the host's line costs (`sync/host.rs` in the sources). The bound was once the
//! [hand-off rule](hand_off)'s line count ([`hand_off_lines`](hand_off::hand_off_lines)), which
//! falls to its fewest, 4 lines, where the line costs are unmeasured (a busy host at start, a
//! single CPU, valgrind): 1 KiB declarations then went quiet in one process and not in the
//! next, and where they did not the affinity policies paid their bookkeeping and sent woken
//! ULTs home for nothing (`elite-bench affinity-probe no_locality`). The sixteenth is chosen
//! so that where the line costs are measured the two bounds are of one size on the hosts
//! measured (`docs/benchmarks.md` in the repository): the mode engages on the declarations it
//! did where they were measured. What it gives up is the same as before: the
//! ULTs' data together may outgrow the cache even when each ULT's is little (a thousand ULTs of
//! 1 KiB each and a 512 KiB L2), and an order could then keep some of it cached.
//! `ELITE_LINE_COSTS=unmeasured` in the environment leaves a process's line costs unmeasured,
//! to compare the two cases on any host.
//!
//! The signal is the largest declaration the runtime has seen, and each processor looks at it at
//! its safe points (every 64th round of its loop, and before it parks): a declaration above the
//! little data ends the mode there, the runqueue is re-keyed under the policy's own order, and its
//! records start again from where they were (stamps and footprints are then those of before the
//! quiet spell: the first runs find little cached, as after a long wait). A runtime where nothing
//! was declared, a hardware counter or a scripted source (real counts), [`Gravity`] (its forces act
//! on small shared blocks) and the aggregation modifier never go quiet.
//! `elite-bench affinity --bench no_locality` (1 KiB working sets, declared) measures the mode: every
//! policy there runs as No Affinity does.
//!
//! ## Which to pick
//!
//! ELiTE's measurements (section 3.2) found that every locality-aware policy beats No Affinity;
//! that Virtual Time never behaves anomalously and, with the least overhead, is the choice for
//! machines of moderate size without cache-miss counters; that Minimum Misses does well when all
//! threads behave alike but can misbehave when some block often and others do not; and that
//! Reload Transient pays for its bookkeeping only where memory latency really strikes (large
//! NUMA machines). `cargo run --release -p elite-bench -- affinity` measures the same on the
//! machine at hand (no PMU: misses come from the estimator and the footprints ULTs declare), on
//! ELiTE's synthetic workload (1024 ULTs with private data, released in batches) and on one
//! where nothing can be cached better, which shows what each policy's bookkeeping costs
//! (`docs/benchmarks.md` in the repository has the tables, each with its host). Minimum
//! Misses gains nothing on the synthetic workload: its key, the last run's misses, does not
//! tell which ULT is cached now. In short:
//!
//! - ULTs that hand work to each other one at a time (ping-pong, pipelines): `no-affinity`; LIFO
//!   is already local there and costs nothing.
//! - Many ULTs with private data released in batches (iterative solvers, phases, broadcast
//!   wake-ups): `virtual-time`.
//! - Known, uneven footprints (declared with [`Builder::footprint`](crate::Builder::footprint) or
//!   [`set_footprint`](crate::set_footprint)) or a hardware counter: `reload-transient`.
//! - `minimum-misses` mainly as ELiTE's baseline.
//! - Pairs or small groups of ULTs that synchronize over shared data declared with
//!   [`Builder::data`](crate::Builder::data), started on different processors: `gravity`
//!   (`elite-bench affinity --bench pairs` measures how soon the pairs are co-located). On the
//!   adaptive grid, whose
//!   patches' blocks do not overlap, it orders like `virtual-time` and costs more
//!   (`crates/elite-grid/examples/adaptive_grid.rs`).
//!
//! # Where to put a thread: places, homes and stealing
//!
//! A policy orders the ULTs of one processor and says where a woken ULT goes; *where* a ULT
//! runs can also be said by the program ([`place`](mod@crate::place)), and the runtime decides
//! the rest through the same door (`policy/places.rs` in the sources: placement and
//! stealing, composable with every policy above; the processor loop never asks which rule is
//! active).
//!
//! - **Let the runtime decide** (no hint) when ULTs share little data with each other, or
//!   when what they share is made ready by a hand-off (a channel, a lock): the wake rules above
//!   already bring a woken ULT to its data, and stealing balances the load. This is the default
//!   and costs nothing.
//! - **Give a place hint** ([`Builder::place`](crate::Builder::place),
//!   [`spawn_at`](crate::spawn_at)) when you know which ULTs work on the same data and the
//!   runtime cannot see it: put ULTs that touch one array in one cache's place (LASSI's best
//!   locality), the two halves of a merge where their sorters ran, a block row of a matrix
//!   where its blocks are. A hint keeps its ULT in its place at its start and its wake-ups, but
//!   an idle processor elsewhere may still take it: load balance is kept.
//!   [`PlaceMode::Strict`](crate::PlaceMode::Strict) only where running elsewhere is wrong, not
//!   slow: a strict ULT waits for its place even while other processors idle.
//! - **Give a home** ([`Builder::home`](crate::Builder::home), or every ULT with
//!   [`RuntimeBuilder::soft_pinning`](crate::RuntimeBuilder::soft_pinning)) to long-lived ULTs
//!   that keep state of their own (actors, servers behind channels): each goes back to its home
//!   when woken, unless home is overloaded, so its state stays in one cache. One exception: a
//!   ULT woken again by the ULT that woke it last (its partner in a request and its reply)
//!   goes where that partner runs (however loaded that processor is: thieves balance the
//!   load, measuring whether it pays, see steal trials below), so that an exchange does not cross processors twice
//!   (`policy/places.rs`, "The partner rule"; counted in
//!   [`ProcessorStats::partner_stays`](crate::ProcessorStats::partner_stays), beside the
//!   wake-ups that sent a ULT home, [`home_goings`](crate::ProcessorStats::home_goings)).
//! - **Stealing**: [`StealOrder::Groups`](crate::StealOrder::Groups) (the default) robs the
//!   nearest processors first (a shared cache, the node, then farther nodes); it matters on
//!   machines of several caches or nodes. [`StealAmount`](crate::StealAmount) sets how much a
//!   thief takes: one ULT when ULTs are long and few, half when they are many and short.
//! - **Steal avoidance** ([`RuntimeBuilder::avoid_costly_steals`](crate::RuntimeBuilder::avoid_costly_steals))
//!   when ULTs carry working sets that fill a core's cache and run in short slices (they
//!   yield, or block briefly): a thief then leaves a ULT whose reload would take longer than
//!   its wait behind the victim's ULTs, as measured on the host, so that a processor idle for a
//!   moment does not pull a ULT away from its data only to have both caches reload. It needs
//!   the cache model (a policy that counts misses) or declared footprints
//!   ([`Builder::footprint`](crate::Builder::footprint)) to see any cost; without them it
//!   changes nothing.
//! - **Steal trials** ([`RuntimeBuilder::steal_trials`](crate::RuntimeBuilder::steal_trials),
//!   on by default): a processor that keeps stealing stops for a moment and compares the
//!   runtime's rate of ULT runs without its steals with the rate with them; when its steals do
//!   not pay it holds off for a while (a spawn anywhere ends the hold). This is what keeps
//!   short ULTs that talk to a ULT on another processor (workers waiting on a server's replies)
//!   beside their partner instead of stolen back and forth; where steals add up to parallel
//!   work it changes nothing but a short trial now and then. Turn it off only to compare.
//! - **Round-robin** starts ([`RuntimeBuilder::round_robin`](crate::RuntimeBuilder::round_robin))
//!   spread the ULTs of one spawner at once, without waiting for thieves; for batches of equal,
//!   long ULTs spawned by one ULT.
//!
//! Hints, homes, soft pinning and round-robin cost nothing where they cannot change anything:
//! on a runtime of one processor they are checked (a place the runtime lacks is still an
//! error) and then dropped, so its ULTs take the wake paths of ULTs without them (a pin is
//! kept). Elsewhere a soft-pinned ULT woken at home, or by its partner, by a ULT running there
//! takes a short road to that processor's ready set; the other wake-ups ask the full rule.
//!
//! What each choice is worth on the machine at hand is measured by `cargo run --release -p
//! elite-bench -- places` (LASSI's and CAF's experiments, beside rayon and Go; `docs/benchmarks.md`
//! in the repository has figures with their hosts): `cache_stress` (one place per shared array
//! against mixed placements and none), `merge_sort` and `block_matmul` (hints by range against
//! none, and against the same code on rayon), `matrix_search` (the steal orders, also on an
//! emulated 2-node topology) and `concdict`/`concsll` (soft pinning for a server behind a
//! channel: every request is a hand-off between two ULTs; the partner rule keeps the pair
//! together, and the side rows `home_goings`, `partner_stays` and `remote_wakes` count, per
//! request, where the woken ULTs went).
//!
//! # Choosing while the program runs: `set_policy` and `auto`
//!
//! [`Runtime::set_policy`](crate::Runtime::set_policy) replaces the policy of a running
//! runtime: each processor takes the new one up at a safe point of its loop and re-keys the ULTs
//! waiting in its runqueue (the protocol is written down in `policy/board.rs`). [`Policy::auto`] (the name `auto`) lets
//! the runtime do it: it measures the program's progress (ULT runs per second, or the units the
//! program reports with [`progress`](crate::progress)) under each candidate policy in short
//! epochs, settles on the best, and checks again when the workload changes phase;
//! [`RuntimeStats::auto`](crate::RuntimeStats::auto) lists what it chose, when and why. The
//! [`auto`](mod@auto) module says how it decides and where it can be fooled.
//!
//! ```
//! use elite_rt::policy::Policy;
//!
//! let rt = elite_rt::Runtime::builder().processors(1).policy("auto".parse::<Policy>()?).build()?;
//! rt.block_on(|| {
//!     for _ in 0..100 {
//!         elite_rt::progress(1);
//!         elite_rt::yield_now();
//!     }
//! });
//! rt.set_policy(Policy::virtual_time())?; // a fixed policy again: `auto` stops
//! assert_eq!(rt.stats().policy, "virtual-time");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Hooks, and writing a policy
//!
//! The runtime calls the [`Hooks`] of the policy at fixed points; the queues and the switch code
//! never ask which policy is active. (For the built-in policies the runtime computes the keys
//! of [`priority`](Hooks::priority) and [`yield_priority`](Hooks::yield_priority), and the wake
//! targets (gravity's where no force acts), itself, with the functions their hooks call: no
//! call through the policy per enqueue, yield or wake-up; tests check the two agree.) What the runtime gathers for the hooks is declared once, by
//! [`Hooks::needs`], when the runtime is built: a policy that needs no stamps or misses pays for
//! none (the counter source is not even opened).
//!
//! | hook | called | by |
//! | --- | --- | --- |
//! | [`priority`](Hooks::priority) | a ready ULT enters a runqueue | the runqueue's owner |
//! | [`yield_priority`](Hooks::yield_priority) | a ULT yielded while others are ready | the runqueue's owner |
//! | [`record_run`](Hooks::record_run) (with [`Needs::with_run_hook`]) | a run ends | the processor that ran it |
//! | [`wake_target`](Hooks::wake_target) | a blocked ULT is made ready | the waker (any thread) |
//! | [`steal_count`](Hooks::steal_count) | a thief takes from a runqueue (lowest keys first) | the thief |
//!
//! Where a spawned ULT starts is not a hook: on its spawner's processor (a spawn from outside
//! the runtime: the first processor to take it), unless it was given a place, a home or a pin
//! ([`Builder::place`](crate::Builder::place), [`Builder::home`](crate::Builder::home),
//! [`Builder::pinned`](crate::Builder::pinned)).
//!
//! A policy may keep one word of its own per ULT ([`UltInfo::state`], 0 at spawn), which
//! [`record_run`](Hooks::record_run) and [`wake_target`](Hooks::wake_target) may change; the
//! waker's processor and, when the waker is a ULT and the policy asks for it
//! ([`Needs::with_wakers`]), its [`UltInfo`] are in [`WakerInfo`]: what a policy that adjusts
//! affinities on synchronization events (ELiTE 3.3) needs.
//!
//! ```
//! use elite_rt::policy::{Hooks, Needs, Policy, ProcessorView, UltInfo, WakerInfo};
//!
//! /// Runs the ULT woken most often first, and keeps it where it was woken.
//! #[derive(Debug)]
//! struct Popular;
//!
//! impl Hooks for Popular {
//!     fn name(&self) -> &'static str {
//!         "popular"
//!     }
//!     fn needs(&self) -> Needs {
//!         Needs::STAMPS // keeps the per-ULT record (and its state word)
//!     }
//!     fn priority(&self, ult: &UltInfo, _here: &ProcessorView<'_>) -> u64 {
//!         ult.state
//!     }
//!     fn wake_target(&self, ult: &UltInfo, waker: &WakerInfo, state: &mut u64) -> usize {
//!         *state += 1;
//!         waker.processor.unwrap_or(ult.last_processor)
//!     }
//! }
//!
//! let rt = elite_rt::Runtime::builder().processors(1).policy(Policy::new(Popular)).build()?;
//! assert_eq!(rt.block_on(|| elite_rt::spawn(|| 7).join().unwrap()), 7);
//! assert_eq!(rt.policy_name(), "popular");
//! # Ok::<(), elite_rt::BuildError>(())
//! ```

pub mod aggregate;
pub mod auto;
mod gravity;
pub mod hand_off;
mod minimum_misses;
mod no_affinity;
mod reload_transient;
pub mod rounds;
mod virtual_time;

pub use aggregate::{Aggregate, AggregateError};
pub use auto::{Auto, AutoDecision, AutoError, AutoReason, ProgressUnit};
pub use gravity::{Gravity, REPEL_FACTOR};
pub use minimum_misses::MinimumMisses;
pub use no_affinity::NoAffinity;
pub use reload_transient::ReloadTransient;
pub use rounds::{ROUND_GROUP, ROUND_RUNS};
pub use virtual_time::VirtualTime;

pub(crate) mod board;
pub(crate) mod engine;
pub(crate) mod places;

/// The key of a yield under a policy without a yield rule of its own ([`Hooks::yield_priority`]'s
/// default): behind every other ready ULT.
pub(crate) const DEFAULT_YIELD_KEY: u64 = 0;

use elite_affinity::{CacheModel, Footprint};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A scheduling policy, chosen at run time: one of ELiTE's four, by name or constructor, or a
/// custom one wrapping [`Hooks`]. Cheap to clone (a shared pointer).
///
/// ```
/// use elite_rt::policy::Policy;
///
/// for name in Policy::NAMES {
///     let policy: Policy = name.parse().unwrap();
///     assert_eq!(policy.name(), name);
/// }
/// assert_eq!(Policy::default().name(), "no-affinity");
/// assert_eq!(Policy::reload_transient().to_string(), "reload-transient");
/// ```
#[derive(Clone)]
pub struct Policy {
    hooks: Arc<dyn Hooks>,
    /// Which built-in policy this is, if any: the runtime computes a built-in policy's keys
    /// (enqueue and yield) itself, from the same functions its hooks call, without a call
    /// through the hooks per enqueue; a custom policy's hooks are called.
    kind: Kind,
    /// How the runtime answers [`Hooks::wake_target`].
    wake: WakeRule,
    /// The `auto` policy's settings (then the fields above are its first candidate's).
    auto: Option<Arc<Auto>>,
    /// The aggregation modifier ([`Policy::aggregate`]), if any.
    aggregate: Option<Aggregate>,
}

/// Which policy's keys the runtime computes itself (see [`Policy`]'s `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Custom hooks: the runtime calls them.
    Custom,
    NoAffinity,
    VirtualTime,
    MinimumMisses,
    ReloadTransient,
    Gravity,
}

/// How the runtime answers [`Hooks::wake_target`] (the built-in policies' answers need no call,
/// but where gravity's forces act).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WakeRule {
    /// Call the hook (a custom policy).
    Hook,
    /// The [hand-off rule](hand_off) ([`MinimumMisses`]): where the ULT last ran, or its
    /// waker's processor after a hand-off when little of its data is cached where it last ran.
    HandOff,
    /// The hand-off rule, after marking the wake-up in the ULT's round ([`rounds`]: Virtual
    /// Time, Reload Transient).
    HandOffInRounds,
    /// The waker's processor when a ULT hands off to it from its own code, else where it last
    /// ran ([`NoAffinity`]).
    Waker,
    /// [`Gravity`]'s: after marking the wake-up in the round, the hand-off rule when the waker
    /// is no ULT or shares no declared data with the woken ULT (no force acts), the hook
    /// otherwise.
    Gravity,
}

impl Policy {
    /// The names [`FromStr`] accepts, in the order of ELiTE's table.
    pub const NAMES: [&'static str; 5] =
        ["no-affinity", "virtual-time", "minimum-misses", "reload-transient", "gravity"];

    /// Every name [`FromStr`] accepts: [`NAMES`](Self::NAMES) and `auto`.
    pub const ALL_NAMES: [&'static str; 6] =
        ["no-affinity", "virtual-time", "minimum-misses", "reload-transient", "gravity", "auto"];

    /// A policy made of custom hooks.
    pub fn new(hooks: impl Hooks) -> Policy {
        Policy {
            hooks: Arc::new(hooks),
            kind: Kind::Custom,
            wake: WakeRule::Hook,
            auto: None,
            aggregate: None,
        }
    }

    /// `auto` with the default settings ([`Auto::new`]): the runtime measures its progress
    /// under candidate policies while the program runs and keeps the best, checking again
    /// when the workload changes phase (see [`auto`](mod@auto) for how it decides, and where it
    /// can be fooled). Until its first decision the first candidate (`no-affinity`) is in
    /// force; [`RuntimeStats::auto`](crate::RuntimeStats::auto) lists its decisions.
    ///
    /// ```
    /// use elite_rt::policy::Policy;
    ///
    /// let auto: Policy = "auto".parse()?;
    /// assert!(auto.is_auto());
    /// assert_eq!(auto.name(), "auto");
    /// # Ok::<(), elite_rt::policy::UnknownPolicy>(())
    /// ```
    pub fn auto() -> Policy {
        Policy::auto_with(Auto::new())
    }

    /// `auto` with the settings `auto`.
    pub fn auto_with(auto: Auto) -> Policy {
        let first = auto.candidate_policies()[0].clone();
        Policy { auto: Some(Arc::new(auto)), ..first }
    }

    /// This policy with the aggregation modifier, `bonus` in the units of its keys: the ULTs of
    /// the [`Group`](crate::Group) that runs on a processor (and, where processors share a
    /// cache, that the first of them runs) get `bonus` added to their keys there, so that a
    /// group's ULTs run back to back while its data is cached (IAS's aggregation). At most
    /// [`Aggregate::DEFAULT_MAX_RUN`] runs of one group in a row on a processor are favoured;
    /// ULTs whose declared footprint exceeds the processor's largest cache are not. The
    /// [`aggregate`](mod@aggregate) module says what the bonus means under each policy, and how
    /// it can be fooled. Composes with every policy, `auto` included (each candidate gets it);
    /// ULTs in no group are ordered as without it.
    ///
    /// ```
    /// use elite_rt::policy::{Aggregate, Policy};
    /// use elite_rt::{Builder, Group};
    ///
    /// let rt = elite_rt::Runtime::builder()
    ///     .processors(1)
    ///     .policy(Policy::no_affinity().aggregate(Aggregate::ALWAYS))
    ///     .build()?;
    /// let (a, b) = (Group::new("a"), Group::new("b"));
    /// rt.block_on(|| {
    ///     let hs: Vec<_> = (0..4)
    ///         .flat_map(|_| [&a, &b])
    ///         .map(|g| Builder::new().group(g).spawn(|| (0..10).for_each(|_| elite_rt::yield_now())).unwrap())
    ///         .collect();
    ///     hs.into_iter().for_each(|h| h.join().unwrap());
    /// });
    /// let stats = rt.stats();
    /// assert!(stats.groups.iter().all(|g| g.aggregated > 0)); // both groups had favoured runs
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn aggregate(self, bonus: u64) -> Policy {
        self.aggregate_with(Aggregate::new(bonus))
    }

    /// [`aggregate`](Self::aggregate) with all its settings.
    pub fn aggregate_with(self, settings: Aggregate) -> Policy {
        let auto = self.auto.as_ref().map(|a| Arc::new(a.with_candidates_aggregated(settings)));
        Policy { aggregate: Some(settings), auto, ..self }
    }

    /// The aggregation modifier's settings, if the policy has it.
    pub fn aggregation(&self) -> Option<Aggregate> {
        self.aggregate
    }

    /// Whether this is `auto` ([`Policy::auto`]).
    pub fn is_auto(&self) -> bool {
        self.auto.is_some()
    }

    /// The settings of `auto`; `None` for any other policy.
    pub fn auto_settings(&self) -> Option<&Auto> {
        self.auto.as_deref()
    }

    /// The policy the engine puts in force for this one: itself, or `auto`'s first candidate.
    pub(crate) fn initial(&self) -> Policy {
        Policy { auto: None, ..self.clone() }
    }

    /// The built-in policy `kind`, whose wake target is `wake`.
    fn builtin(hooks: impl Hooks, kind: Kind, wake: WakeRule) -> Policy {
        Policy { kind, wake, ..Policy::new(hooks) }
    }

    /// [`NoAffinity`]: LIFO, the default.
    pub fn no_affinity() -> Policy {
        Policy::builtin(NoAffinity, Kind::NoAffinity, WakeRule::Waker)
    }

    /// [`VirtualTime`]: the most recently run here first.
    pub fn virtual_time() -> Policy {
        Policy::builtin(VirtualTime, Kind::VirtualTime, WakeRule::HandOffInRounds)
    }

    /// [`MinimumMisses`]: the fewest misses in the last run first.
    pub fn minimum_misses() -> Policy {
        Policy::builtin(MinimumMisses, Kind::MinimumMisses, WakeRule::HandOff)
    }

    /// [`ReloadTransient`]: the smallest expected reload transient first.
    pub fn reload_transient() -> Policy {
        Policy::builtin(ReloadTransient, Kind::ReloadTransient, WakeRule::HandOffInRounds)
    }

    /// Which built-in policy's keys the runtime computes itself ([`Kind::Custom`]: none).
    #[inline]
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// How the runtime answers [`Hooks::wake_target`] for this policy.
    #[inline]
    pub(crate) fn wake_rule(&self) -> WakeRule {
        self.wake
    }

    /// [`Gravity`]: synchronization partners that share data drawn together (ELiTE 3.3).
    pub fn gravity() -> Policy {
        Policy::builtin(Gravity, Kind::Gravity, WakeRule::Gravity)
    }

    /// The policy's name (its hooks' [`Hooks::name`]; `auto` for [`Policy::auto`]).
    pub fn name(&self) -> &'static str {
        match self.auto {
            Some(_) => "auto",
            None => self.hooks.name(),
        }
    }

    /// The hooks the runtime calls (for `auto`, its first candidate's).
    #[inline]
    pub fn hooks(&self) -> &dyn Hooks {
        &*self.hooks
    }

    /// Whether `self` and `other` are the same policy: the same built-in policy, or clones of
    /// one custom policy (the same hooks).
    pub(crate) fn same_as(&self, other: &Policy) -> bool {
        match (&self.auto, &other.auto) {
            (Some(a), Some(b)) => return Arc::ptr_eq(a, b),
            (None, None) => {}
            _ => return false,
        }
        if self.aggregate != other.aggregate {
            return false;
        }
        match (self.kind, other.kind) {
            (Kind::Custom, Kind::Custom) => Arc::ptr_eq(&self.hooks, &other.hooks),
            (a, b) => a == b,
        }
    }
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::no_affinity()
    }
}

impl<H: Hooks> From<H> for Policy {
    fn from(hooks: H) -> Policy {
        Policy::new(hooks)
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.auto {
            Some(auto) => f.debug_tuple("Policy").field(auto).finish(),
            None => f.debug_tuple("Policy").field(&self.hooks).finish(),
        }
    }
}

impl fmt::Display for Policy {
    /// The policy's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = UnknownPolicy;

    /// One of [`Policy::ALL_NAMES`].
    fn from_str(name: &str) -> Result<Policy, UnknownPolicy> {
        match name {
            "no-affinity" => Ok(Policy::no_affinity()),
            "virtual-time" => Ok(Policy::virtual_time()),
            "minimum-misses" => Ok(Policy::minimum_misses()),
            "reload-transient" => Ok(Policy::reload_transient()),
            "gravity" => Ok(Policy::gravity()),
            "auto" => Ok(Policy::auto()),
            other => Err(UnknownPolicy { name: other.to_string() }),
        }
    }
}

/// A policy name that [`Policy::from_str`] does not know; its message lists the valid names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPolicy {
    name: String,
}

impl UnknownPolicy {
    /// The name that was given.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown policy `{}`: expected one of {}", self.name, Policy::ALL_NAMES.join(", "))
    }
}

impl std::error::Error for UnknownPolicy {}

/// What a policy needs the runtime to gather for it, declared once by [`Hooks::needs`].
///
/// ```
/// use elite_rt::policy::Needs;
/// assert!(!Needs::NOTHING.records());
/// assert!(Needs::STAMPS.stamps && !Needs::STAMPS.misses);
/// assert!(Needs::MISSES.stamps && Needs::MISSES.misses);
/// assert!(Needs::NOTHING.with_run_hook().records());
/// assert!(Needs::STAMPS.with_wakers().wakers);
/// assert!(Needs::NOTHING.with_wakers().with_data().data);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Needs {
    /// Keep each ULT's record ([`UltInfo`]'s stamp, misses, footprint and state) and stamp it
    /// with its processor's run count ([`ProcessorView::vtime`]) when a run ends. A policy that
    /// needs [`misses`](Needs::misses) but reads neither stamps nor the run count (Minimum
    /// Misses) leaves it off: its records are kept, and no run is counted.
    pub stamps: bool,
    /// Open a counter source on every processor and record each run's misses and the ULT's
    /// cache footprint ([`UltInfo::misses`], [`UltInfo::footprint`]); builds the cache model.
    pub misses: bool,
    /// Call [`Hooks::record_run`] when a run ends.
    pub run_hook: bool,
    /// Show the waking ULT to [`Hooks::wake_target`] ([`WakerInfo::ult`]).
    pub wakers: bool,
    /// At a wake-up by a ULT (with [`wakers`](Needs::wakers)), the bytes the waker's and the woken
    /// ULT's declared data blocks have in common ([`WakerInfo::shared_bytes`]; read from the two
    /// control blocks only for policies that ask).
    pub data: bool,
    /// Keep a round for yielders in the low bits of the policy word ([`rounds`]), updated by the
    /// runtime itself at each run's end, with the run count (the built-in policies that order
    /// yielders in rounds: Virtual Time, Reload Transient, Gravity). The same transitions as
    /// calling the rounds' update from [`Hooks::record_run`], without the call through the
    /// policy and the ULT's record it is handed on every run.
    pub(crate) rounds: bool,
}

impl Needs {
    /// Nothing: no per-run work at all (No Affinity).
    pub const NOTHING: Needs =
        Needs { stamps: false, misses: false, run_hook: false, wakers: false, data: false, rounds: false };
    /// Run stamps (Virtual Time).
    pub const STAMPS: Needs = Needs { stamps: true, ..Needs::NOTHING };
    /// Stamps and cache misses (Minimum Misses, Reload Transient).
    pub const MISSES: Needs = Needs { stamps: true, misses: true, ..Needs::NOTHING };

    /// These needs, plus a call of [`Hooks::record_run`] after each run.
    pub const fn with_run_hook(self) -> Needs {
        Needs { run_hook: true, ..self }
    }

    /// These needs, plus the waking ULT's record in [`Hooks::wake_target`].
    pub const fn with_wakers(self) -> Needs {
        Needs { wakers: true, ..self }
    }

    /// These needs, plus the data the waker and the woken ULT share, in [`WakerInfo`].
    pub const fn with_data(self) -> Needs {
        Needs { data: true, ..self }
    }

    /// These needs, plus rounds for yielders kept by the runtime (see [`Needs::rounds`]; they
    /// need the run count, so stamps too).
    pub(crate) const fn with_rounds(self) -> Needs {
        Needs { rounds: true, stamps: true, ..self }
    }

    /// Whether the runtime keeps per-ULT records at all.
    pub const fn records(&self) -> bool {
        self.stamps || self.misses || self.run_hook || self.wakers || self.rounds
    }
}

/// What a policy may read about a ULT.
///
/// The record fields (`stamp`, `misses`, `footprint`, `state`) are kept only when the policy's
/// [`Needs::records`]; otherwise they read 0 (and [`Footprint::EMPTY`]). `misses` and
/// `footprint` need [`Needs::misses`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct UltInfo {
    /// The ULT's id.
    pub id: u64,
    /// The processor it last ran on (its spawner's, before its first run).
    pub last_processor: usize,
    /// The run count of `last_processor` when its last run ended ([`ProcessorView::vtime`]);
    /// 0 before its first run.
    pub stamp: u64,
    /// The misses of its last run, from the processor's counter source.
    pub misses: u64,
    /// What the cache model expects of its lines in `last_processor`'s cache.
    pub footprint: Footprint,
    /// The bytes of data it declared ([`Builder::footprint`](crate::Builder::footprint),
    /// [`set_footprint`](crate::set_footprint)); 0 when none.
    pub footprint_bytes: usize,
    /// The policy's own word for this ULT, 0 at spawn (see [`Hooks::record_run`]).
    pub state: u64,
}

impl UltInfo {
    /// A ULT that has not run: the record fields are zero. For tests of hooks.
    pub const fn new(id: u64, last_processor: usize) -> UltInfo {
        UltInfo {
            id,
            last_processor,
            stamp: 0,
            misses: 0,
            footprint: Footprint::EMPTY,
            footprint_bytes: 0,
            state: 0,
        }
    }

    /// With `stamp`.
    pub const fn with_stamp(self, stamp: u64) -> UltInfo {
        UltInfo { stamp, ..self }
    }

    /// With `misses`.
    pub const fn with_misses(self, misses: u64) -> UltInfo {
        UltInfo { misses, ..self }
    }

    /// With `footprint`.
    pub const fn with_footprint(self, footprint: Footprint) -> UltInfo {
        UltInfo { footprint, ..self }
    }

    /// With `state`.
    pub const fn with_state(self, state: u64) -> UltInfo {
        UltInfo { state, ..self }
    }

    /// With `footprint_bytes`.
    pub const fn with_footprint_bytes(self, footprint_bytes: usize) -> UltInfo {
        UltInfo { footprint_bytes, ..self }
    }
}

/// What a policy may read about the processor whose runqueue a ULT enters.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ProcessorView<'a> {
    /// The processor's index.
    pub processor: usize,
    /// Entries its runqueue has taken so far, this one included (strictly increasing). (The
    /// runtime counts them only for the policies that read them: a custom policy's hooks; No
    /// Affinity's and Reload Transient's keys, the latter counting the entries of woken ULTs.)
    pub seq: u64,
    /// Runs that ended on it so far, while the policy [`Needs::stamps`] (0 otherwise).
    pub vtime: u64,
    /// Its miss clock ([`CounterSource::clock`](elite_affinity::CounterSource::clock)), while the
    /// policy [`Needs::misses`] (0 otherwise).
    pub clock: u64,
    /// The cache model of its cache, while the policy [`Needs::misses`].
    pub model: Option<&'a CacheModel>,
}

impl<'a> ProcessorView<'a> {
    /// Processor `processor` after `seq` runqueue entries; no stamps, clock or model. For tests
    /// of hooks.
    pub const fn new(processor: usize, seq: u64) -> ProcessorView<'a> {
        ProcessorView { processor, seq, vtime: 0, clock: 0, model: None }
    }

    /// With the run count `vtime`.
    pub const fn with_vtime(self, vtime: u64) -> ProcessorView<'a> {
        ProcessorView { vtime, ..self }
    }

    /// With the miss clock `clock` and the cache model `model`.
    pub const fn with_clock(self, clock: u64, model: &'a CacheModel) -> ProcessorView<'a> {
        ProcessorView { clock, model: Some(model), ..self }
    }
}

/// Who makes a blocked ULT ready, as [`Hooks::wake_target`] sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct WakerInfo {
    /// The waker's processor; `None` for a thread outside the runtime.
    pub processor: Option<usize>,
    /// The waking ULT, when a ULT wakes another from its own code (not a timer, an exit, or
    /// an OS thread) and the policy [`Needs::wakers`].
    pub ult: Option<UltInfo>,
    /// Whether a ULT wakes it from its own code (a synchronization hand-off: an unlock, a
    /// release, a send), whatever the policy needs; false for a timer, an exit (a join) and a
    /// thread outside the runtime.
    pub hand_off: bool,
    /// The bytes the waking ULT's and the woken ULT's declared data blocks
    /// ([`Builder::data`](crate::Builder::data), [`set_data_block`](crate::set_data_block))
    /// have in common, when the waker is a ULT and the policy [`Needs::data`]; 0 otherwise.
    pub shared_bytes: usize,
    /// At a hand-off from a processor other than the one the woken ULT last ran on (its home),
    /// the lines of its data expected still cached at home: the cache model's expectation for
    /// a policy that [`Needs::misses`], its declared footprint in lines less what the data
    /// declared by the runs ended at home since would have evicted otherwise (see
    /// [`hand_off`]); 0 otherwise (not a hand-off, or a waker at home).
    pub home_lines: f32,
}

impl WakerInfo {
    /// A waker on `processor` (`None`: outside the runtime), not a ULT. For tests of hooks.
    pub const fn new(processor: Option<usize>) -> WakerInfo {
        WakerInfo { processor, ult: None, hand_off: false, shared_bytes: 0, home_lines: 0.0 }
    }

    /// With `home_lines` (see [`hand_off`]).
    pub const fn with_home_lines(self, home_lines: f32) -> WakerInfo {
        WakerInfo { home_lines, ..self }
    }

    /// With `shared_bytes` (see [`DataBlock::overlap`](crate::DataBlock::overlap)).
    pub const fn with_shared_bytes(self, shared_bytes: usize) -> WakerInfo {
        WakerInfo { shared_bytes, ..self }
    }

    /// A waker that is the ULT `ult` (a hand-off).
    pub const fn with_ult(self, ult: UltInfo) -> WakerInfo {
        WakerInfo { ult: Some(ult), hand_off: true, ..self }
    }

    /// A waker that is a ULT waking from its own code (a hand-off), the ULT not described.
    pub const fn handing_off(self) -> WakerInfo {
        WakerInfo { hand_off: true, ..self }
    }
}

/// The hooks of a scheduling policy: implement them for a custom [`Policy`].
///
/// Every hook but [`priority`](Hooks::priority) and [`name`](Hooks::name) has a default. Hooks
/// run on the scheduler's hot paths: they must be cheap and must not block, and
/// [`wake_target`](Hooks::wake_target) may run on any thread.
pub trait Hooks: Send + Sync + fmt::Debug + 'static {
    /// The policy's name (for example `"no-affinity"`).
    fn name(&self) -> &'static str;

    /// What the runtime gathers for this policy, asked once when the runtime is built. Default
    /// [`Needs::NOTHING`].
    fn needs(&self) -> Needs {
        Needs::NOTHING
    }

    /// The runqueue key of `ult` entering the runqueue of `here`: higher keys run first; equal
    /// keys run in the order they entered (oldest first). A thief takes the lowest keys. A
    /// policy that wants another order among the ULTs its measure ties folds it into the key
    /// (Reload Transient adds the entry count [`ProcessorView::seq`] to its keys of a reload
    /// transient of 0: the newest of those first).
    fn priority(&self, ult: &UltInfo, here: &ProcessorView<'_>) -> u64;

    /// The runqueue key of `ult` after it called `yield_now` with other work ready. Default 0:
    /// behind every other ready ULT.
    fn yield_priority(&self, ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
        let _ = (ult, here);
        DEFAULT_YIELD_KEY
    }

    /// Called when a run of `ult` on `here` ends (yield, block, sleep, exit, or a pause while it
    /// runs a child through the join fast path), after the runtime updated the record that
    /// `ult` shows, if the policy's needs include [`Needs::run_hook`]. `state` is the ULT's
    /// policy word.
    fn record_run(&self, ult: &UltInfo, here: &ProcessorView<'_>, state: &mut u64) {
        let _ = (ult, here, state);
    }

    /// The processor whose wake-up stack receives `ult` when `waker` makes it ready. `state` is
    /// the woken ULT's policy word (kept only when the policy [`Needs::records`]). Default: where
    /// it last ran.
    fn wake_target(&self, ult: &UltInfo, waker: &WakerInfo, state: &mut u64) -> usize {
        let _ = (waker, state);
        ult.last_processor
    }

    /// How many of a victim's `len` ready ULTs a thief takes (from the low-key end). Default: half.
    fn steal_count(&self, len: usize) -> usize {
        len.div_ceil(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_valid_ones() {
        for name in Policy::NAMES {
            let p: Policy = name.parse().expect("a valid name");
            assert_eq!(p.name(), name);
            assert_eq!(p.to_string(), name);
        }
        let err = Policy::from_str("lifo").unwrap_err();
        assert_eq!(err.name(), "lifo");
        for name in Policy::NAMES {
            assert!(err.to_string().contains(name), "{err}");
        }
        assert!(format!("{:?}", Policy::virtual_time()).contains("VirtualTime"));
    }

    #[test]
    fn needs_per_policy() {
        assert_eq!(Policy::no_affinity().hooks().needs(), Needs::NOTHING);
        assert_eq!(Policy::virtual_time().hooks().needs(), Needs::STAMPS.with_rounds());
        assert_eq!(Policy::minimum_misses().hooks().needs(), Needs { stamps: false, ..Needs::MISSES });
        assert!(Policy::minimum_misses().hooks().needs().records());
        assert_eq!(Policy::reload_transient().hooks().needs(), Needs::MISSES.with_rounds());
        assert_eq!(Policy::gravity().hooks().needs(), Needs::MISSES.with_wakers().with_rounds().with_data());
    }

    #[test]
    fn the_hooks_agree_with_the_wake_rule_the_runtime_uses() {
        // The runtime skips the wake hook where `wake_rule` says so: check that the hooks each
        // policy carries give the same answers, and leave the same policy word, there. (The keys
        // the runtime computes itself are checked against the hooks in `affinity`'s tests.)
        let u = UltInfo::new(1, 3).with_stamp(9).with_misses(4);
        let mut skipped = Vec::new();
        for name in Policy::NAMES {
            let p: Policy = name.parse().unwrap();
            let waker = WakerInfo::new(Some(1));
            // A hand-off from processor 1 with a large footprint still cached at home (3).
            let hot_home = waker.handing_off().with_home_lines(1000.0);
            // With little at home: the hand-off rule follows the waker.
            let cold_home = waker.handing_off().with_home_lines(hand_off::hand_off_lines());
            let outside = WakerInfo::new(None).handing_off();
            let (want, marks) = match p.wake_rule() {
                WakeRule::HandOff => ([3, 1, 3, 3], false),
                WakeRule::HandOffInRounds => ([3, 1, 3, 3], true),
                WakeRule::Waker => ([1, 1, 3, 3], false),
                WakeRule::Hook | WakeRule::Gravity => continue,
            };
            skipped.push(name);
            // Not a hand-off (a timer, an exit), or from outside the runtime: where it last ran.
            for (waker, want) in [hot_home, cold_home, waker, outside].iter().zip(want) {
                let mut state = 0;
                assert_eq!(p.hooks().wake_target(&u, waker, &mut state), want, "{name} {waker:?}");
                let mut marked = 0;
                if marks {
                    rounds::mark_woken(&mut marked);
                }
                assert_eq!(state, marked, "{name}");
            }
        }
        assert_eq!(skipped, ["no-affinity", "virtual-time", "minimum-misses", "reload-transient"]);
        assert_eq!(Policy::gravity().wake_rule(), WakeRule::Gravity);
        assert_eq!(Policy::new(NoAffinity).wake_rule(), WakeRule::Hook);
        assert_eq!(Policy::new(NoAffinity).kind(), Kind::Custom);
        for (name, kind) in Policy::NAMES.iter().zip([
            Kind::NoAffinity,
            Kind::VirtualTime,
            Kind::MinimumMisses,
            Kind::ReloadTransient,
            Kind::Gravity,
        ]) {
            assert_eq!(name.parse::<Policy>().unwrap().kind(), kind);
        }
    }

    #[test]
    fn default_hooks() {
        /// Only the two hooks a policy must give.
        #[derive(Debug)]
        struct Plain;
        impl Hooks for Plain {
            fn name(&self) -> &'static str {
                "plain"
            }
            fn priority(&self, _ult: &UltInfo, here: &ProcessorView<'_>) -> u64 {
                here.seq
            }
        }
        let p = Policy::new(Plain);
        let u = UltInfo::new(1, 3);
        let mut state = 0;
        assert_eq!(p.hooks().wake_target(&u, &WakerInfo::new(Some(1)), &mut state), 3);
        assert_eq!(p.hooks().yield_priority(&u, &ProcessorView::new(0, 5)), 0);
        assert_eq!(p.hooks().steal_count(5), 3);
        assert_eq!(p.hooks().steal_count(0), 0);
    }
}
