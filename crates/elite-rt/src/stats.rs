//! Per-processor counters and the snapshot [`Runtime::stats`](crate::Runtime::stats) returns.
//!
//! Counters are written by their owning processor only (a relaxed load and store, no read-modify-write
//! on the hot path) and read by anyone. A reader may see a counter a few events old; it never sees a
//! torn value.

use crate::atomics::{AtomicU64, Ordering};
use std::fmt;

/// One owner-written counter.
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds one. Only the owning processor calls this.
    #[inline]
    pub(crate) fn bump(&self) {
        self.add(1);
    }

    /// Adds `n`. Only the owning processor calls this.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        // Owner-only writes: a plain load and store cannot lose an update.
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Subtracts one (wrapping: a counter may go "negative" and is summed with others). Only the
    /// owning processor calls this.
    #[inline]
    pub(crate) fn drop_one(&self) {
        self.add(u64::MAX);
    }

    /// Adds one from any thread (for the rare events that are not the owner's).
    #[inline]
    pub(crate) fn bump_shared(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// Live counters of one processor.
        #[derive(Default)]
        pub(crate) struct Counters { $( pub(crate) $name: Counter, )* }

        impl Counters {
            pub(crate) fn snapshot(&self) -> ProcessorStats {
                ProcessorStats { processor: 0, node: 0, $( $name: self.$name.get(), )* }
            }
        }

        /// What happened on one processor since the runtime started.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct ProcessorStats {
            /// Index of the processor.
            pub processor: usize,
            /// Node the processor belongs to.
            pub node: usize,
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl std::ops::AddAssign<&ProcessorStats> for ProcessorStats {
            fn add_assign(&mut self, other: &ProcessorStats) {
                $( self.$name += other.$name; )*
            }
        }

        impl ProcessorStats {
            fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$( (stringify!($name), self.$name), )*]
            }
        }
    };
}

counters! {
    /// Switches into a ULT (every resume of a ULT's context).
    switches,
    /// ULTs spawned by code running on this processor.
    spawns,
    /// `yield_now` calls that reached the processor loop, and the yields of the cooperative
    /// budget (`budget_yields`).
    yields,
    /// Yields made because a ULT had spent its cooperative budget
    /// ([`RuntimeBuilder::coop_budget`](crate::RuntimeBuilder::coop_budget)); counted in
    /// `yields` too.
    budget_yields,
    /// ULTs taken from this processor's own start-queue.
    start_local,
    /// ULTs taken from this processor's node start-queue (a take starts one and moves up to 15 more
    /// into the own start-queue, see `start_moved`).
    start_node,
    /// ULTs taken from the global start-queue (in batches, as for `start_node`; one at a time
    /// in a `central` runtime).
    start_global,
    /// ULTs a node or global take moved into the own start-queue; they count again under
    /// `start_local` when they start, so starts = local + node + global - moved.
    start_moved,
    /// Never-started ULTs moved from this processor's full own start-queue to the node
    /// start-queue: one count per ULT moved (a spawn that finds the own queue full moves its
    /// oldest half down in one batch, so one such spawn may count up to half the queue's limit).
    start_overflow_node,
    /// Never-started ULTs of such a batch that found the node start-queue full and went to the
    /// global start-queue, one count per ULT.
    start_overflow_global,
    /// ULTs stolen from processors of the same node (start-queues and runqueues).
    steals_node,
    /// ULTs stolen from processors of other nodes.
    steals_remote,
    /// Ready ULTs this processor, stealing, left in the victim's runqueue because their move
    /// would cost more than their wait there
    /// ([`RuntimeBuilder::avoid_costly_steals`](crate::RuntimeBuilder::avoid_costly_steals)).
    steals_declined,
    /// Ready ULTs this processor, idle, took from the `next` slot of a processor that had been
    /// running one ULT all the while since they became ready (stranded there).
    rescued,
    /// TCBs served by the local TCB pool.
    tcb_pool_hits,
    /// TCBs the local pool could not serve (an underflow or a fresh allocation followed).
    tcb_pool_misses,
    /// Batches of TCBs moved from the local pool up to the node pool.
    tcb_pool_overflows,
    /// Batches of TCBs taken from the node pool into the local pool (from another node's pool
    /// when the own node had none).
    tcb_pool_underflows,
    /// TCBs served by a freshly allocated chunk (no pool of any node had one; the chunk's other
    /// TCBs go to the pools).
    tcb_fresh,
    /// Stacks served by the local stack pool.
    stack_pool_hits,
    /// Stacks the local pool could not serve.
    stack_pool_misses,
    /// Batches of stacks moved from the local pool to the node pool.
    stack_pool_overflows,
    /// Batches of stacks taken from the node pool.
    stack_pool_underflows,
    /// Stacks freshly mapped.
    stack_fresh,
    /// Stack allocations that failed (the ULT's join reports a `SpawnError`).
    stack_failures,
    /// Times this processor parked its OS thread.
    parks,
    /// ULTs this processor sent to the home processor of a contended mutex (`sync::Mutex`'s
    /// gathering).
    gathered,
    /// Times this processor, gone idle after sending ULTs home that way, or after steal
    /// avoidance left ULTs in their victims' runqueues (`steals_declined`), or during a steal
    /// trial or a hold (`steal_trials`), paused stealing (counted in `parks` too).
    steal_pauses,
    /// Steal trials this processor finished: after a stretch of idle steps in which it stole
    /// ULTs again and again, it stopped stealing for as long and compared the runtime's rate of
    /// ULT runs without its steals with the rate with them
    /// ([`RuntimeBuilder::steal_trials`](crate::RuntimeBuilder::steal_trials)).
    steal_trials,
    /// Those of its steal trials whose rate without steals was not at least 3% lower: the
    /// processor then stole nothing for a hold.
    steal_holds,
    /// Wake-ups of placed ULTs (with a place, a home or a pin) made by code on this processor
    /// that sent the ULT to its home on another processor.
    home_goings,
    /// Wake-ups of placed ULTs made by code on this processor that kept the woken ULT here,
    /// away from its home: with its partner (the partner rule of
    /// [`RuntimeBuilder::soft_pinning`](crate::RuntimeBuilder::soft_pinning)), because its
    /// home is overloaded, or, for a ULT with a place, because it last ran here in its place.
    partner_stays,
    /// Times another thread unparked this processor.
    wakeups,
    /// ULTs made ready through this processor's wake-up stack.
    wakeup_drained,
    /// Exited ULTs put on this processor's deathrow.
    deathrow_in,
    /// Clean-up notes (joins by other processors) drained from this processor's clean-up stack.
    cleanup_notes,
    /// Exited ULTs recycled here without a note (detached, or joined on this same processor).
    reclaimed_local,
    /// ULTs started by their joiner (the join fast path) that finished in that run: recycled at
    /// once, without the deathrow.
    joined_inline,
    /// Policies this processor took up after [`Runtime::set_policy`](crate::Runtime::set_policy)
    /// (or the `auto` policy's selector) replaced the one in force.
    policy_switches,
    /// Ready ULTs this processor's runqueue re-keyed when it took up a new policy.
    rekeyed,
    /// Ready ULTs this processor ran out of the policy's order: taken from the runqueue's worst
    /// end by the turn, every 64th round of the loop, that keeps the ULT of lowest priority from
    /// waiting for ever behind ULTs that keep each other ready.
    worst_turns,
    /// Units of work ULTs on this processor reported with [`progress`](crate::progress).
    progress,
}

/// A snapshot of the counters of every processor.
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(2).build()?;
/// rt.block_on(|| {
///     let handles: Vec<_> = (0..100).map(|i| elite_rt::spawn(move || i)).collect();
///     handles.into_iter().for_each(|h| drop(h.join()));
/// });
/// let stats = rt.stats();
/// assert_eq!(stats.processors.len(), 2);
/// println!("{stats}"); // a table: a row per processor
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct RuntimeStats {
    /// One entry per processor, in processor order.
    pub processors: Vec<ProcessorStats>,
    /// ULTs spawned from outside the runtime (`Runtime::spawn`, `block_on`).
    pub outside_spawns: u64,
    /// The name of the policy in force: the runtime's policy, or the candidate `auto` put in
    /// force (see [`Runtime::set_policy`](crate::Runtime::set_policy)).
    pub policy: &'static str,
    /// How many times the policy in force was replaced since the runtime was built (by
    /// `set_policy` or `auto`); each processor counts the ones it took up in
    /// [`ProcessorStats::policy_switches`].
    pub policy_generation: u64,
    /// The decisions of the `auto` policy, oldest first (the last
    /// [`DECISIONS_KEPT`](crate::policy::auto::DECISIONS_KEPT)): when it put which candidate in
    /// force, why, and the rates it measured; empty when `auto` was never the policy.
    pub auto: Vec<crate::policy::AutoDecision>,
    /// The counter source of each processor, in processor order: `None` where none is open
    /// (the policy needs no cache misses, or the processor has not started yet).
    pub counter_sources: Vec<Option<elite_affinity::SourceKind>>,
    /// Blocking calls and the spare threads that serve them (runtime-wide).
    pub blocking: BlockingStats,
    /// Per [`Group`](crate::Group) whose ULTs ran on this runtime, in the order the runtime
    /// first saw them: runs, busy time, migrations, aggregated runs, class.
    pub groups: Vec<crate::GroupStats>,
    /// Where the runtime's TCBs live: how many it allocated, how many of those are in huge-page
    /// regions, and why it stopped mapping regions, if it did
    /// ([`RuntimeBuilder::huge_page_tcbs`](crate::RuntimeBuilder::huge_page_tcbs)).
    pub tcbs: TcbStats,
}

/// Where a runtime's TCBs (one per ULT it holds at once; kept until the runtime is dropped)
/// live: on the heap, or in huge-page regions once the heap ones fill a huge page
/// ([`RuntimeBuilder::huge_page_tcbs`](crate::RuntimeBuilder::huge_page_tcbs)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcbStats {
    /// TCBs allocated since the runtime was built.
    pub allocated: u64,
    /// Of those, the ones in huge-page regions.
    pub in_regions: u64,
    /// Set when the runtime stopped mapping regions because one cost too much to bring in: its
    /// later TCBs go on the heap.
    pub regions_stopped: Option<RegionsStopped>,
}

/// Why a runtime stopped mapping huge-page regions for its TCBs: a new region's first touch
/// took more than twice what its bytes cost to bring in as base pages on this host (some
/// virtual machines back a fresh huge page anew at its first touch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegionsStopped {
    /// How long the region's first touch took.
    pub first_touch: std::time::Duration,
    /// What the same bytes cost in base pages (measured once per process).
    pub base_pages: std::time::Duration,
}

/// What [`blocking`](crate::blocking) calls did since the runtime started, and where its spare
/// threads are now (see the protocol in the crate docs, "Blocking calls").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockingStats {
    /// Blocking calls made by ULTs of this runtime (calls from outside a ULT, or from inside
    /// another blocking call, just run their function and are not counted).
    pub calls: u64,
    /// Calls whose processor was handed to a spare thread while the call ran.
    pub handoffs: u64,
    /// Handoffs whose call ended before the spare thread had taken the processor over: the
    /// calling thread took its processor back (the short-call path).
    pub reclaimed: u64,
    /// Calls that found every allowed spare thread inside a call and waited in the queue
    /// ([`RuntimeBuilder::max_spare_threads`](crate::RuntimeBuilder::max_spare_threads)).
    pub queued: u64,
    /// Calls run on their processor's own thread, the processor out of service meanwhile,
    /// because the operating system refused a new thread.
    pub unserved: u64,
    /// Calls run on their processor's own thread, the processor out of service meanwhile,
    /// because a pinned ULT lives on that processor ([`Builder::pinned`](crate::Builder::pinned):
    /// handing the processor to another OS thread would move it).
    pub pinned_inline: u64,
    /// ULTs that waited, yielded or slept while unwinding a panic and went on anchored to their
    /// OS thread, which ran nothing else until their unwinding was over (see the crate docs,
    /// [Panics](crate#panics)), their processor handed over meanwhile as for a call. Not counted
    /// in `calls`, `handoffs` nor `reclaimed`.
    pub anchored: u64,
    /// Of those, the ones whose processor stayed on their thread, out of service meanwhile: a
    /// pinned ULT lived there, or the operating system refused a thread.
    pub anchored_inline: u64,
    /// Spare threads started.
    pub spares_started: u64,
    /// Times a thread parked as a spare (after its call, or when started for a call that ended
    /// first).
    pub spares_parked: u64,
    /// Spare threads that exited (at shutdown; a thread inside a call at shutdown exits when its
    /// call returns).
    pub spares_exited: u64,
    /// Threads of this runtime beyond its processors now: parked spares and threads in calls.
    pub threads: u64,
    /// Calls in flight now: running, or queued; and anchored ULTs that are not waiting without
    /// a deadline.
    pub in_flight: u64,
}

impl RuntimeStats {
    /// The counters of all processors added up (`processor` and `node` are 0).
    pub fn total(&self) -> ProcessorStats {
        let mut sum = ProcessorStats::default();
        for p in &self.processors {
            sum += p;
        }
        sum
    }
}

impl fmt::Display for RuntimeStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total();
        write!(f, "{:<24}", "counter")?;
        for p in &self.processors {
            write!(f, " {:>12}", format!("p{} (n{})", p.processor, p.node))?;
        }
        writeln!(f, " {:>12}", "total")?;
        let rows: Vec<Vec<(&str, u64)>> = self.processors.iter().map(|p| p.fields()).collect();
        for (i, (name, sum)) in total.fields().into_iter().enumerate() {
            write!(f, "{name:<24}")?;
            for row in &rows {
                write!(f, " {:>12}", row[i].1)?;
            }
            writeln!(f, " {sum:>12}")?;
        }
        writeln!(f, "outside_spawns          {:>12}", self.outside_spawns)?;
        writeln!(f, "policy in force         {:>12} (generation {})", self.policy, self.policy_generation)?;
        for d in &self.auto {
            writeln!(f, "auto {d}")?;
        }
        let b = &self.blocking;
        write!(
            f,
            "blocking calls          {:>12} (handoffs {}, reclaimed {}, queued {}, unserved {}, pinned inline {}); anchored \
             while unwinding {} ({} inline); spare threads: {} started, {} parks, {} exited, {} now; {} calls in flight",
            b.calls,
            b.handoffs,
            b.reclaimed,
            b.queued,
            b.unserved,
            b.pinned_inline,
            b.anchored,
            b.anchored_inline,
            b.spares_started,
            b.spares_parked,
            b.spares_exited,
            b.threads,
            b.in_flight
        )?;
        let t = &self.tcbs;
        write!(f, "\ntcbs                    {:>12} ({} in huge-page regions", t.allocated, t.in_regions)?;
        if let Some(stop) = t.regions_stopped {
            write!(
                f,
                "; regions stopped: one took {:?} to bring in, {:?} in base pages",
                stop.first_touch, stop.base_pages
            )?;
        }
        write!(f, ")")?;
        for (p, source) in self.counter_sources.iter().enumerate() {
            if let Some(source) = source {
                write!(f, "\ncounter source p{p}:      {source}")?;
            }
        }
        Ok(())
    }
}
