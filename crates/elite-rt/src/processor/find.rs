//! Finding work, steps 2 to 5 of the loop: the `next` slot and the runqueue, the start-queues
//! (own, node, global), stealing (nearest distance group first), and going idle (spin, then
//! park; or pause stealing after ULTs went to a lock's home).
//!
//! # Stranded ULTs
//!
//! A ULT made ready by a ULT that goes on running (a send, an unlock, a notify) waits in its
//! processor's `next` slot until the running ULT switches. Usually that is at once (the waker
//! blocks next), but a ULT that runs on without a switch would keep it waiting beside an idle
//! processor for as long as it runs. So an idle processor, before it parks, looks at the others'
//! slots ([`Processor::rescue_stranded`]): a ULT it saw in a slot at its last look, still there
//! while its processor has been running (not parked, nor woken and on its way back) and has not
//! switched since, at least [`STRANDED_AFTER`] later, is stranded,
//! and the idle processor takes it (`queue::next`: the thief's side of the slot's protocol)
//! and runs it. The same for a processor's wake-up stack, which its owner drains only from its
//! loop: the idle processor drains it (`queue::wakeup`, `drain_stranded`), but for the ULTs sent
//! there to be gathered with a saturated mutex's contenders (`sync::mutex::gather`), which it
//! puts back. And while another processor of the runtime runs ULTs, an idle one parks for at
//! most a watch period ([`WATCH_FIRST`], doubled at each look that finds nothing, up to
//! [`WATCH_MAX`]) rather than until notified, so that it looks again: a stranded ULT waits at
//! most about twice the watch period. A processor that goes back to work after a park while
//! every other one parked without a watch (nobody ran ULTs when they parked) wakes one of them,
//! so that someone watches (`ensure_watcher`). A hand-off whose waker switches at once (a ping-pong)
//! never counts as stranded, and costs the owner's path of the slot's protocol (two loads of
//! the thieves' generation around the take's own load and store: no atomic read-modify-write, no
//! fence instruction). A processor whose OS thread the kernel preempted looks
//! stranded too, and rightly: its ULTs run sooner elsewhere. A processor whose thread has not
//! reached its loop yet, or that has never switched into a ULT, runs nothing a ULT could wait
//! behind: it is left alone (else a ULT spawned from outside with a place hint right after the
//! runtime was built started outside its place while the place's processor was only starting
//! up). The chaos mode, which places ULTs at random itself, takes no stranded ULTs.

use super::Processor;
use super::Remote;
use crate::queue::run::RunQueue;
use crate::queue::shared::TAKE_MAX;
use crate::queue::start::steal_one;
use crate::tcb::TcbRef;
use std::ptr;
use std::time::{Duration, Instant};

/// How long a ULT must be seen waiting in another processor's `next` slot, that processor not
/// having switched meanwhile, before an idle processor takes it (module docs).
pub(super) const STRANDED_AFTER: Duration = Duration::from_micros(100);

/// The first watch period of an idle processor while another runs ULTs (module docs).
const WATCH_FIRST: Duration = Duration::from_micros(200);

/// The longest watch period.
const WATCH_MAX: Duration = Duration::from_millis(2);

/// Where a ULT may be stranded on a processor: the index of its place in [`StrandWatch::seen`].
const IN_NEXT_SLOT: usize = 0;
const ON_WAKEUP_STACK: usize = 1;

/// What an idle processor saw of the other processors' `next` slots at its last look (module
/// docs, "Stranded ULTs"): the processor's own, in its `Core`.
pub(crate) struct StrandWatch {
    /// Per processor, for its `next` slot and its wake-up stack: the ULT seen there (the
    /// stack's newest), the processor's switch count then, and when.
    seen: Vec<[Option<(usize, u64, Instant)>; 2]>,
    /// How long the next park lasts at most while another processor runs ULTs.
    period: Duration,
}

impl StrandWatch {
    pub(crate) fn new(processors: usize) -> StrandWatch {
        StrandWatch { seen: vec![[None; 2]; processors], period: WATCH_FIRST }
    }
}

/// Steal avoidance's part of a processor (`policy::places`, "Costly steals"): the victims' run
/// lengths as this processor sees them (which the hand-off rule's balance clause reads too:
/// `policy::hand_off`, "Balance"), the ULTs a steal left (room lent to the runqueue), and
/// by how many ticks the least costly of them exceeded its wait at the last steal (0: none).
pub(crate) struct Avoidance {
    /// (Also read by `wake::balanced_target`.)
    pub(super) runs: crate::policy::places::RunLengths,
    spared: Vec<(u64, TcbRef)>,
    declined_by: f64,
}

impl Avoidance {
    pub(crate) fn new(processors: usize) -> Avoidance {
        Avoidance {
            runs: crate::policy::places::RunLengths::new(processors),
            spared: Vec::new(),
            declined_by: 0.0,
        }
    }
}

/// Rounds of the loop between two starvation turns (`take_ready`): at each, a start-queue entry
/// goes first if [`START_WAIT`] has passed since the last turn that took one, else the
/// runqueue's lowest ULT.
const START_TURN: u32 = 64;

/// The least time between two starvation turns that start a never-started ULT (`take_ready`):
/// on a processor that ready ULTs keep busy without a pause, its never-started ULTs start one
/// per this period (another processor that runs dry steals them sooner). A bound on a wait, not
/// a cost traded against another, so one figure serves every host: Go's scheduler preempts a
/// goroutine that ran this long.
pub(super) const START_WAIT: Duration = Duration::from_millis(10);

impl Processor {
    /// Step 2: the `next` slot, then the runqueue's best (after one start-queue entry if a yield
    /// asked for it); every [`START_TURN`]-th round a start-queue entry first (at most once per
    /// [`START_WAIT`]), else the runqueue's worst.
    #[inline]
    pub(super) fn take_ready(&self) -> Option<TcbRef> {
        if self.chaos.on {
            return self.chaos_take_ready();
        }
        let core = self.core();
        // Every START_TURN-th round, the starvation turns. (`rounds` counts the loop's rounds
        // in `maintain`, which runs just before.)
        if core.rounds.is_multiple_of(START_TURN) {
            // A start-queue entry first, at most once per START_WAIT (one time stamp per
            // START_TURN rounds): ULTs that keep each other ready without ever yielding (a
            // ping-pong through the `next` slot, sleepers woken by timers on a saturated
            // processor) would otherwise keep never-started ULTs from starting for ever
            // (`tests/regressions.rs`, `ready_ults_that_never_let_up_do_not_starve_a_spawned_one`).
            // Not at every turn, as it once was: ULTs spawned ahead of the work that gives them
            // something to do (1024 ULTs in groups that synchronize, `elite-bench affinity`)
            // were then started one per 64 runs into the running group's cache, each to read its
            // data, block for its group, and find that data evicted when its group got going
            // (`the_starvation_turn_starts_spawned_ults_at_most_once_per_wait`).
            if core.starvation_turn_due() {
                if let Some(t) = self.take_start() {
                    return Some(t);
                }
            }
            // Otherwise the ready ULT of lowest priority, at every turn: two ULTs that keep
            // waking each other would otherwise keep it waiting for ever, through the `next`
            // slot or, under No Affinity's LIFO order, from above it in the runqueue
            // (`a_hand_off_pair_does_not_starve_a_ready_ult_in_the_runqueue`). Not gated by
            // START_WAIT: a ring of ULTs passing tokens under LIFO (`elite-bench sync`,
            // `sync_peak`) moves its tokens past the ULTs at the runqueue's bottom only through
            // this turn, and ran at about half its rate with the turn once per 10 ms. The
            // slot's ULT stays where it is and runs in the next round.
            if let Some(t) = self.runq().pop_worst() {
                self.remote().stats.worst_turns.bump();
                return Some(t);
            }
        }
        if let Some(t) = self.take_next() {
            return Some(t);
        }
        if core.admit_one {
            core.admit_one = false;
            if let Some(t) = self.take_start() {
                return Some(t);
            }
        }
        self.runq().pop_best()
    }

    /// The runqueue this processor serves: its own, its work-stealing place's
    /// (`RuntimeBuilder::place_level`), or the one global queue of a `central` runtime.
    #[inline]
    pub(super) fn runq(&self) -> &RunQueue {
        // SAFETY: `runq` points into `shared` (a processor's `Remote`, or `central_runq`), which
        // this processor holds.
        unsafe { &*self.runq }
    }

    /// Step 3: own start-queue, then node, then global.
    #[inline]
    pub(super) fn take_start(&self) -> Option<TcbRef> {
        if self.central {
            // The ablation keeps taking one entry at a time.
            let t = TcbRef::from_ptr(self.shared.global_start.take()?);
            self.remote().stats.start_global.bump();
            return t;
        }
        let core = self.core();
        let shared_turn = core.step();
        let remote = self.remote();
        if !shared_turn && !remote.start.is_empty() {
            if let Some(t) = self.pop_start() {
                remote.stats.start_local.bump();
                return Some(t);
            }
        }
        let node = &self.shared.nodes[remote.node];
        if shared_turn || !node.start.is_empty() || !self.shared.global_start.is_empty() {
            return self.take_start_shared(shared_turn);
        }
        None
    }

    /// Step 3 past the own start-queue: a batch from the node or global level, or the own queue
    /// after all on the rounds when the shared levels go first.
    #[cold]
    fn take_start_shared(&self, shared_turn: bool) -> Option<TcbRef> {
        let remote = self.remote();
        if shared_turn {
            self.flush_notes();
        }
        // From the shared levels take a batch into the own start-queue (room permitting): one
        // lock of the shared queue serves several starts.
        let room = self.core().start_limit.saturating_sub(remote.start.len()).clamp(1, TAKE_MAX);
        let node = &self.shared.nodes[remote.node];
        let mut batch = [ptr::null_mut(); TAKE_MAX];
        let mut n = node.start.take_batch(room, &mut batch);
        let global = n == 0;
        if global {
            n = self.shared.global_start.take_batch(room, &mut batch);
        }
        if n > 0 {
            // The first runs now; the rest go on the own queue, the oldest on top, so that they
            // start in the order they were spawned (and thieves take the newest of them).
            for &e in batch[1..n].iter().rev() {
                // Their TCBs were written by their spawners, most likely on another processor:
                // their lines come while the taker starts the first of the batch.
                crate::prefetch::start_lines(e);
                // Room was checked before the take (`room`), and only this owner pushes.
                if let Err(e) = remote.start.push(e) {
                    self.push_start_overflow(e);
                }
            }
            let (stat, level_left) = if global {
                (&remote.stats.start_global, !self.shared.global_start.is_empty())
            } else {
                (&remote.stats.start_node, !node.start.is_empty())
            };
            stat.add(n as u64);
            remote.stats.start_moved.add(n as u64 - 1);
            if level_left || n > 1 {
                self.shared.notify_any(); // pass the wake-up on (see `crate::park`)
            }
            return TcbRef::from_ptr(batch[0]);
        }
        let t = self.pop_start()?;
        remote.stats.start_local.bump();
        Some(t)
    }

    /// Pops the newest entry of the own start-queue.
    #[inline]
    pub(super) fn pop_start(&self) -> Option<TcbRef> {
        let start = &self.remote().start;
        let t = TcbRef::from_ptr(start.pop()?);
        // The entry the next pop would take: its lines arrive while this one starts (a burst of
        // spawns is started newest first, one after the other).
        if let Some(n) = start.peek_newest() {
            crate::prefetch::start_lines(n);
        }
        t
    }

    /// Whether any start-queue this processor takes from (own, node, global) shows an entry.
    #[inline]
    pub(super) fn start_work_visible(&self) -> bool {
        // SAFETY: `node_start` points into `shared.nodes`, a boxed slice that lives as long as
        // `shared`, which this processor holds.
        let node_start = unsafe { &*self.node_start };
        !self.remote().start.is_empty() || !node_start.is_empty() || !self.shared.global_start.is_empty()
    }

    /// Step 4: steal, visiting victims in the order the places give (`policy::places`,
    /// "Victims": by default nearest group first, a random victim inside a group).
    pub(super) fn steal(&self) -> Option<TcbRef> {
        if !self.core().pauses.before_steal() {
            return None; // ULTs went home from here: pause first (`idle`)
        }
        if self.core().trials.blocked() {
            return None; // a steal trial or a hold (`trial`): `idle` parks
        }
        let places = &self.shared.places;
        let processors = &self.shared.processors;
        // The runqueue this processor serves, never stolen from (`Places::ready_queue`).
        let own = places.runq_of(self.index);
        let mut got = None;
        crate::policy::places::visit(
            places.victims(self.index),
            places.settings.order,
            || self.next_random(),
            |v| {
                let victim = &processors[v];
                // `v`'s ready ULTs wait in the runqueue it serves: its own, or its work-stealing
                // place's (`policy::places`, "Victims"); none to take when that is this one's.
                let ready = places.ready_queue(v, own).map(|q| &*processors[q].runq);
                got = self.steal_start(victim).or_else(|| self.steal_ready(v, victim, ready?));
                let Some(t) = got else { return false };
                self.trace_steal(t, v);
                if !victim.start.is_empty() || ready.is_some_and(|q| q.len() > 0) {
                    self.shared.notify_any(); // more to take there: pass the wake-up on
                }
                self.core().trials.note_steal();
                let stats = &self.remote().stats;
                if victim.node == self.remote().node {
                    stats.steals_node.bump();
                } else {
                    stats.steals_remote.bump();
                }
                true
            },
        );
        got
    }

    /// Takes the oldest entry of `victim`'s start-queue; a placed ULT the places do not let this
    /// processor take goes back, to its wake target.
    fn steal_start(&self, victim: &Remote) -> Option<TcbRef> {
        let t = steal_one(&victim.start)?;
        if t.tcb().head.placed.get() && !self.shared.places.may_take(t, self.index) {
            let target = self.shared.placed_wake_target(t, None);
            self.shared.wake_remote(t, target);
            return None;
        }
        Some(t)
    }

    /// Takes the low-key part of `queue`, the runqueue processor `v` (`victim`) serves (its
    /// own, or its work-stealing place's): runs the first, keeps the rest here.
    fn steal_ready(&self, v: usize, victim: &Remote, queue: &RunQueue) -> Option<TcbRef> {
        if queue.len() == 0 {
            return None;
        }
        let mut buf = std::mem::take(&mut self.core().scratch);
        let engine = &self.shared.engine;
        // After a pause of stealing (`idle`), and through the probation after it, one ULT: a
        // probe whether they still go home.
        let probing = self.core().pauses.probing();
        let places = &self.shared.places;
        let want = |n| if probing { 1 } else { places.steal_count(n, |n| engine.steal_count(n)) };
        match &places.reload {
            None => queue.steal(want, &mut buf),
            Some(costs) => self.steal_sparing(v, victim, queue, costs, want, &mut buf),
        }
        let mut first = None;
        // Soft pinning: when the batch holds a ULT away from its home, those at home stay
        // there (`policy::places`, "Rules").
        let away = |t: TcbRef| t.tcb().head.placed.get() && places.is_away(t);
        let leave_home = buf.len() > 1 && buf.iter().any(|&t| away(t));
        for t in buf.drain(..) {
            if t.tcb().head.placed.get() && !places.may_take(t, self.index) {
                // Held to its place (pinned, or strict; `policy::places`): straight back,
                // through its wake target's wake-up stack.
                self.shared.wake_remote(t, self.shared.placed_wake_target(t, None));
            } else if let Some(home) = leave_home.then(|| places.at_home(t)).flatten() {
                self.shared.wake_remote(t, home); // (back where it was, through its wake-up stack)
            } else if first.is_none() {
                if probing {
                    t.tcb().exec.gather.forget_move(); // (it may go home at once)
                }
                first = Some(t);
            } else {
                self.make_ready(t);
            }
        }
        self.core().scratch = buf;
        self.core().pauses.note_probe(probing && first.is_some()); // (not a pinned ULT sent back)
        first
    }

    /// [`RunQueue::steal`] of `queue`, the runqueue processor `v` (`victim`) serves, under
    /// steal avoidance (`policy::places`, "Costly steals"): the ULTs whose move from where they
    /// last ran to here would cost more than their wait in `queue` stay there; notes by how much
    /// the least costly of them exceeded its wait, for `idle`'s pause.
    #[cold]
    fn steal_sparing(
        &self,
        v: usize,
        victim: &Remote,
        queue: &RunQueue,
        costs: &crate::policy::places::ReloadCosts,
        want: impl FnOnce(usize) -> usize,
        buf: &mut Vec<TcbRef>,
    ) {
        let core = self.core();
        let now = crate::sync::ticks();
        // The run length that stands for `queue` is the visited processor `v`'s, kept under
        // `v`'s index from `v`'s own switch counter (as `wake::balanced_target` reads it): under
        // `place_level` a shared queue is served by each processor of its place, and any of
        // them (the one visited) is taken for all, not the place's first (whose queue it is).
        // The wait so estimated counts one server; the several of a place serve the queue
        // sooner, so under `place_level` the estimate errs towards stealing.
        let run = core.avoid.runs.look(v, victim.stats.switches.get(), now);
        let idle = core.avoid.runs.idle(self.remote().stats.switches.get(), now);
        let mut kept = std::mem::take(&mut core.avoid.spared);
        let engine = &self.shared.engine;
        let mut least = f64::INFINITY;
        let spared = queue.steal_sparing(
            want,
            |t, ahead| {
                // (Under `queue`'s lock: `t`'s record, life and processor were published
                // with its push there.) A ULT that never ran has nothing cached.
                if t.tcb().head.life.get() != crate::tcb::Life::Started {
                    return false;
                }
                let from = t.tcb().head.processor.load(crate::atomics::Ordering::Relaxed);
                let lines = engine.home_lines(t, from);
                match costs.excess(from, self.index, lines, ahead, run, idle) {
                    Some(by) => {
                        least = least.min(by);
                        true
                    }
                    None => false,
                }
            },
            buf,
            &mut kept,
        );
        let core = self.core();
        core.avoid.spared = kept;
        if spared > 0 {
            self.remote().stats.steals_declined.add(spared as u64);
            core.avoid.declined_by =
                if core.avoid.declined_by == 0.0 { least } else { core.avoid.declined_by.min(least) };
        }
    }

    /// The next number of the processor's generator ([`next_random_of`]).
    pub(super) fn next_random(&self) -> u64 {
        next_random_of(&mut self.core().rng)
    }

    /// Step 5: look for work a few rounds, then park.
    #[cold]
    pub(super) fn idle(&self) {
        if self.chaos.on {
            self.chaos_idle();
        }
        self.flush_notes();
        self.follow_policy(); // before a park: a policy set meanwhile
        if let Some(micros) = self.core().pauses.on_idle() {
            // What ran here last went to a lock's home: pause stealing.
            self.pause_stealing(micros);
            return;
        }
        let declined_by = std::mem::take(&mut self.core().avoid.declined_by);
        if declined_by > 0.0 {
            // Steal avoidance left ULTs whose move costs more than their wait: look again when
            // the least costly one's wait may have caught up (`policy::places`, "Costly steals").
            let ticks_per_us = crate::sync::host_costs().ticks_per_ns * 1000.0;
            let micros = (declined_by / ticks_per_us).ceil().clamp(1.0, WATCH_MAX.as_micros() as f64);
            self.pause_stealing(micros as u32);
            return;
        }
        if self.core().trials_on && self.steal_trial_waits() {
            return;
        }
        if self.spin_for_work() {
            self.ensure_watcher();
            return;
        }
        if let Some(t) = self.rescue_stranded() {
            self.make_ready(t);
            return;
        }
        if self.take_filler() {
            return; // a held ULT of a group that may fill an idle processor (`contention::gate`)
        }
        self.remeasure_lines();
        let remote = self.remote();
        remote.stats.parks.bump();
        let timer = self.core().timers.next_deadline();
        let watch = self.watch_deadline();
        let deadline = match (timer, watch) {
            (Some(t), Some(w)) => Some(t.min(w)),
            (t, w) => t.or(w),
        };
        // For the deadlock report: a timer of a ULT's (the watch is no ULT's progress).
        self.shared.watch.note_park(self.index, timer.is_some());
        remote.park.set_watching(watch.is_some());
        let parked = self
            .shared
            .idle
            .park(&remote.park, deadline, || self.has_work() || self.shared.is_shutting_down());
        remote.park.set_watching(false);
        self.shared.watch.after_park(); // waits while a deadlock report is being taken
        if parked == crate::park::Parked::Slept {
            remote.stats.wakeups.bump();
        }
        if self.has_own_work() {
            self.ensure_watcher();
        }
    }

    /// About to run work after being idle: if every other processor parked without a watch (none
    /// was running ULTs when it parked), wakes one, which then watches while this one runs
    /// (module docs, "Stranded ULTs"). Once per return to work from idle, not per ULT.
    #[cold]
    fn ensure_watcher(&self) {
        let shared = &*self.shared;
        if shared.processors.len() == 1 || self.chaos.on || !crate::sync::bias::heavy_barrier_available() {
            return;
        }
        // (If another runs, it watches when it idles; if one watches already, nothing to do.)
        let mut others = shared.processors.iter().enumerate().filter(|&(v, _)| v != self.index);
        if others.all(|(_, p)| p.park.is_parked() && !p.park.is_watching()) {
            shared.notify_any();
        }
    }

    /// Takes the ULTs stranded on another processor, if any (module docs, "Stranded ULTs"): in
    /// its `next` slot, or on its wake-up stack, which its owner drains only from its loop. Notes
    /// what the slots and stacks hold for the next look. Returns one to run; the others taken are
    /// ready here. A ULT held to its place (pinned, strict) goes back through its processor's
    /// wake-up stack.
    #[cold]
    fn rescue_stranded(&self) -> Option<TcbRef> {
        let shared = &*self.shared;
        if shared.processors.len() == 1 || self.chaos.on {
            return None; // (the chaos mode places ULTs at random, and its tests count on it)
        }
        let now = Instant::now();
        let mut rescued = None;
        for (v, victim) in shared.processors.iter().enumerate() {
            let switches = victim.stats.switches.get();
            if v == self.index || !victim.park.is_running() || switches == 0 {
                // (Parked, or woken and on its way: it drains its stack and slot itself. Never
                // switched into a ULT: nothing runs there that a ULT could wait behind; its
                // thread is on its way to its loop.)
                self.core().strands.seen[v] = [None; 2];
                continue;
            }
            if self.stranded(v, IN_NEXT_SLOT, victim.next.peek() as usize, switches, now) {
                if let Some(t) = TcbRef::from_ptr(victim.next.steal()) {
                    self.rescue(t, v, &mut rescued);
                }
            }
            if self.stranded(v, ON_WAKEUP_STACK, victim.wakeup.peek() as usize, switches, now) {
                for t in victim.wakeup.drain_stranded() {
                    if t.tcb().exec.gather.is_homing() {
                        // Sent there to be gathered with a saturated lock's other contenders,
                        // whose home is busy by design: back onto its stack.
                        victim.wakeup.push(t);
                        continue;
                    }
                    self.rescue(t, v, &mut rescued);
                }
            }
        }
        if rescued.is_some() {
            self.core().strands.period = WATCH_FIRST;
            if self.runq().len() > 0 {
                self.shared.notify_any(); // more than one: let another idle processor help
            }
        }
        rescued
    }

    /// Whether what processor `v` holds in place `at` ([`IN_NEXT_SLOT`] or [`ON_WAKEUP_STACK`]),
    /// `what` (0: nothing), is stranded: the same was there at this processor's last look,
    /// `v` has not switched since (`switches`), and that look was [`STRANDED_AFTER`] ago or more.
    /// Notes what is there now otherwise.
    fn stranded(&self, v: usize, at: usize, what: usize, switches: u64, now: Instant) -> bool {
        let seen = &mut self.core().strands.seen[v][at];
        match *seen {
            _ if what == 0 => *seen = None,
            Some((w, s, since)) if w == what && s == switches => {
                if now.duration_since(since) >= STRANDED_AFTER {
                    *seen = None;
                    return true;
                }
            }
            _ => *seen = Some((what, switches, now)),
        }
        false
    }

    /// `t`, taken from processor `v` where it was stranded: the first to run here (`first`), the
    /// others ready here; one held to its place (pinned, strict) back to `v`.
    fn rescue(&self, t: TcbRef, v: usize, first: &mut Option<TcbRef>) {
        if t.tcb().head.placed.get() && !self.shared.places.may_take(t, self.index) {
            self.shared.wake_remote(t, v); // (held there: back through its wake-up stack)
            return;
        }
        self.remote().stats.rescued.bump();
        match first {
            None => *first = Some(t),
            Some(_) => self.make_ready(t),
        }
    }

    /// Until when an idle processor parks at most: while another processor of the runtime runs
    /// ULTs (it is not parked), the watch period, which then doubles (module docs, "Stranded
    /// ULTs"); else no limit (and the next watch starts at its first period).
    #[cold]
    fn watch_deadline(&self) -> Option<Instant> {
        let shared = &*self.shared;
        let strands = &mut self.core().strands;
        let busy = shared.processors.iter().enumerate().any(|(v, p)| v != self.index && !p.park.is_parked());
        if !busy || !crate::sync::bias::heavy_barrier_available() {
            strands.period = WATCH_FIRST;
            return None;
        }
        let period = strands.period;
        strands.period = (period * 2).min(WATCH_MAX);
        Some(Instant::now() + period)
    }

    /// Step 5's spin: looks for work a few rounds; true when there is some (or shutdown began).
    /// A wake-up directed here (a woken waiter, often one a lock was handed to) is looked for
    /// after every pause: the latency of a hand-over to an idle processor is a pause, not a round.
    fn spin_for_work(&self) -> bool {
        let remote = self.remote();
        for _ in 0..self.shared.config.spin_rounds {
            for _ in 0..32 {
                std::hint::spin_loop();
                if !remote.wakeup.is_empty() {
                    return true;
                }
            }
            if self.has_work() || self.shared.is_shutting_down() {
                return true;
            }
        }
        false
    }

    /// Step 5 under steal trials (`trial`): true when this idle step waited (a trial or a
    /// hold: parked without stealing, after looking for stranded ULTs) or found a stranded ULT
    /// to run; false to go on as usual (steal, spin, park).
    #[cold]
    fn steal_trial_waits(&self) -> bool {
        let now = Instant::now();
        // New work (a new phase) ends a hold: steal it. Not a trial, which goes on to its end,
        // which only `on_idle` reaches (returning here during one would leave this processor
        // spinning between the visible entry and its refused steal).
        if self.core().trials.holding() && self.start_work_anywhere() {
            self.core().trials.new_work(now, || self.runs_ended());
            return false;
        }
        let (step, verdict) = self.core().trials.on_idle(now, || self.runs_ended());
        if let Some(verdict) = verdict {
            let stats = &self.remote().stats;
            stats.steal_trials.bump();
            if verdict == super::trial::Verdict::Holds {
                stats.steal_holds.bump();
            }
        }
        let super::trial::Step::Wait(until) = step else { return false };
        // Still the watch for stranded ULTs, which no hold may delay past a watch period.
        if let Some(t) = self.rescue_stranded() {
            self.make_ready(t);
            return true;
        }
        let wait = until.saturating_duration_since(now).min(WATCH_MAX);
        self.pause_stealing(wait.as_micros().max(1) as u32);
        true
    }

    /// The runtime's ULT runs that ended in a block or an exit so far: every processor's
    /// switches less its yields (the progress steal trials compare; counters read without
    /// synchronization, each a recent value).
    fn runs_ended(&self) -> u64 {
        self.shared
            .processors
            .iter()
            .fold(0u64, |sum, p| sum.wrapping_add(p.stats.switches.get()).wrapping_sub(p.stats.yields.get()))
    }

    /// Whether any start-queue of the runtime holds a never-started ULT (new work: it ends a
    /// hold of steal trials).
    fn start_work_anywhere(&self) -> bool {
        let shared = &*self.shared;
        !shared.global_start.is_empty()
            || shared.nodes.iter().any(|n| !n.start.is_empty())
            || shared.processors.iter().any(|p| !p.start.is_empty())
    }

    /// Parks until there is work of this processor's own (nothing to steal counts), a
    /// notification, or `micros` pass: the pause of [`Processor::idle`] after ULTs went home.
    #[cold]
    fn pause_stealing(&self, micros: u32) {
        let remote = self.remote();
        remote.stats.parks.bump();
        remote.stats.steal_pauses.bump();
        let mut deadline = Instant::now() + std::time::Duration::from_micros(u64::from(micros));
        if let Some(d) = self.core().timers.next_deadline() {
            deadline = deadline.min(d);
        }
        self.shared.watch.note_park(self.index, true); // for the deadlock report
        remote.park.set_pausing(true); // no helper wanted from here meanwhile
        let parked = self
            .shared
            .idle
            .park(&remote.park, Some(deadline), || self.has_own_work() || self.shared.is_shutting_down());
        remote.park.set_pausing(false);
        self.shared.watch.after_park();
        if parked == crate::park::Parked::Slept {
            remote.stats.wakeups.bump();
        }
    }

    /// Before a park: measures the host's line costs again when their last measurement is older
    /// than [`LINE_COSTS_MAX_AGE`](crate::sync::LINE_COSTS_MAX_AGE) (`sync::host`), this thread
    /// one side and a helper thread on the CPU of a parked processor of this runtime the other
    /// (a CPU nothing of the runtime needs meanwhile; with none parked, nothing is measured);
    /// given up as soon as work appears for either (a delay of one batch of round trips at
    /// most, a few microseconds; the helper's start can take a millisecond, waited for asleep
    /// and looking for work every 20 µs).
    ///
    /// Cold and out of line: inlined into `idle`, it changed the code generated for the
    /// processor loop of `elite-bench`, whose `sync --bench mutex_contended` then ran a fifth
    /// slower at one processor as at two.
    #[cold]
    #[inline(never)]
    fn remeasure_lines(&self) {
        let shared = &*self.shared;
        if shared.processors.len() < 2 || !crate::sync::host::lines_due() {
            return;
        }
        let parked =
            (0..shared.processors.len()).find(|&v| v != self.index && shared.processors[v].park.is_parked());
        if let Some(v) = parked {
            let cpu = shared.config.topology.processor(v).cpu;
            let other = &shared.processors[v];
            // (Its wake-ups come through its wake-up stack; its stealing and its start-queue are
            // among what `has_work` sees.)
            crate::sync::host::remeasure_lines(Some(cpu), &|| {
                self.has_work() || shared.is_shutting_down() || !other.wakeup.is_empty()
            });
        }
    }

    /// Whether anything this processor could run is visible now.
    fn has_work(&self) -> bool {
        if self.has_own_work() {
            return true;
        }
        let shared = &*self.shared;
        shared.processors.iter().any(|p| !p.start.is_empty() || p.runq.len() > 0)
    }

    /// Whether anything is visible that this processor would run without stealing: its own
    /// queues, a due timer, the node and global start-queues.
    fn has_own_work(&self) -> bool {
        let shared = &*self.shared;
        let remote = self.remote();
        if !self.next_is_empty()
            || !remote.wakeup.is_empty()
            || self.runq().len() > 0
            || !remote.start.is_empty()
        {
            return true;
        }
        if let Some(d) = self.core().timers.next_deadline() {
            if d <= Instant::now() {
                return true;
            }
        }
        !shared.nodes[remote.node].start.is_empty() || !shared.global_start.is_empty()
    }
}

/// The next number of a xorshift64* generator whose (non-zero) state is `state`: a processor's
/// random victims, its prefetch measurement's exploring draws.
pub(crate) fn next_random_of(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}
