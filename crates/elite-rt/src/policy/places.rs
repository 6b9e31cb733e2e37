//! The placement and stealing decisions of places (LASSI) and locality-guided stealing (CAF's
//! LGS): where a ULT with a place, a home or a pin starts and is woken, whether a thief may take
//! it, and in which order a thief visits its victims. The processor loop asks these functions
//! and never which rule is active (DESIGN section 5: one door for placement and stealing).
//!
//! # Rules
//!
//! A ULT is *placed* (`Head::placed`) when it has a [`PlaceRule`]: a place (its processors, by
//! index into [`Places::infos`]), a home processor, and whether it is strict. A ULT spawned with
//! [`Builder::pinned`](crate::Builder::pinned) is placed strictly on its spawner; one spawned
//! with a place on a processor of that place (the spawner, if it is one, else the place's
//! processors in turn); one with a home only ([`Builder::home`](crate::Builder::home), or every
//! ULT under [`RuntimeBuilder::soft_pinning`](crate::RuntimeBuilder::soft_pinning)) has no place.
//! On a runtime of one processor no ULT is placed but a pinned one ([`Places::inert`]): every
//! rule would answer that processor, and an unplaced ULT skips the placed wake path.
//! Placed ULTs never enter a start-queue (a thief takes start-queue entries without asking): a
//! placed spawn goes into the ready set of its processor, through that processor's wake-up stack
//! when it is another.
//!
//! At a wake-up ([`Places::wake_target`]): a ULT with a place goes to the processor it last ran
//! on when that is in its place, else home; a ULT with a home only goes home. Unless strict, if
//! that processor is overloaded (at least [`OVERLOADED`] ready ULTs) and another candidate (the
//! least loaded processor of its place; for a home only, where it last ran) has fewer, it goes
//! there.
//!
//! The partner rule, where this departs from CAF's soft pinning: a ULT with a home only (not
//! pinned) woken by the ULT that woke it last (no other ULT woke it between; its *partner*: the
//! other end of a request and its reply, a server answering a client) goes to the processor where its
//! partner runs, however many ULTs wait there; its home is kept for every other wake-up. (Load
//! is balanced by thieves, whose steal trials find out whether moving such ULTs pays:
//! `processor::trial`. Sending a partner home from an overloaded processor was the same move,
//! unmeasured: on Savina's concurrent dictionary, with twenty clients beside one server, it
//! sent them to the other processor one reply after another.)
//! Sending it home would make every exchange between two ULTs homed on different processors
//! cross between them twice (the request, the reply), each a push on a remote wake-up stack and
//! the cache lines of the message, the channel and the ULT moving over: the cost that made CAF's
//! LGS lose on Savina's concurrent dictionary. So a stolen ULT goes home at its next wake-up
//! unless its partner wakes it, and a consumer fed by one producer follows the producer (a
//! pipeline keeps its stages together rather than at their homes). The wake-ups that send a ULT
//! home to another processor, and those that keep it with its partner away from home, are
//! counted in [`ProcessorStats::home_goings`](crate::ProcessorStats::home_goings) and
//! [`partner_stays`](crate::ProcessorStats::partner_stays), per waking processor. A thief ([`Places::may_take`]) may take any placed ULT but a strict one whose place it
//! is not in: that one it hands back at once, to its wake target. Among the ULTs one steal takes
//! from a runqueue, when some are away from their homes, those at home (placed, with a home, last
//! run there) are left there, back through their home's wake-up stack (CAF's soft pinning: thieves
//! take ULTs away from home first; a ULT further down the victim's queue is not looked for).
//!
//! # The rule's protocol
//!
//! The rule is written by the spawner before the ULT is published (a start, a wake-up stack, a
//! runqueue: each publishes with a release its taker acquires). Afterwards only a soft-pinned
//! ULT's home and partner change: its first wake-up's waker fixes its home to the processor the
//! ULT last ran on, and each wake-up by a ULT records that ULT as its partner. A waker is the only thread touching a blocked ULT (the wait protocol hands each wake-up to
//! one waker), and it publishes the ULT, rule included, by the push that makes it ready; thieves
//! read the rule of a ULT they took from a runqueue, under its lock. So every access is ordered
//! by the ULT's own hand-overs and `Cell` suffices.
//!
//! # Victims
//!
//! [`Places::victims`] are the groups a thief visits in order, built once from the topology
//! for the runtime's [`StealOrder`]; [`visit`] walks them: under [`StealOrder::Groups`] and
//! [`StealOrder::Random`] a victim drawn at random in the group, as many draws as the group has
//! members, then the next group; under [`StealOrder::NodeThenAll`] each group once in a random
//! rotation. Each steal starts again at the nearest group.
//!
//! A victim is a processor, and a visit takes from two of its queues: its start-queue (one per
//! processor at every place level), then the ready ULTs of the runqueue it serves
//! ([`Places::ready_queue`]). Under
//! [`RuntimeBuilder::place_level`](crate::RuntimeBuilder::place_level) that runqueue is its
//! work-stealing place's, kept by the place's first processor ([`Places::runq_of`]): a visit of
//! any processor of another place tries that place's shared queue (the visited processor's own
//! runqueue stays empty: reading it would spend one of the group's attempts on nothing, and a
//! thief could move outward or give up before trying the queue that holds the work), and a
//! visit of a processor of the thief's own place tries only its start-queue (the runqueue it
//! serves is the thief's own, which the thief took from before it stole). So an empty place
//! steals from its victim places, each of their processors standing for its place's queue and
//! keeping its own start-queue. With a runqueue per processor a visit tries the victim's own
//! runqueue, as it always did.
//!
//! # Costly steals
//!
//! Under [`RuntimeBuilder::avoid_costly_steals`](crate::RuntimeBuilder::avoid_costly_steals) a
//! thief leaves in the runqueue the victim serves a ready ULT whose move would cost more than
//! its wait there (LASSI's future work, avoiding counter-productive steals). For each ULT a
//! steal would take ([`RunQueue::steal_sparing`](crate::queue::run::RunQueue::steal_sparing),
//! under that queue's lock):
//!
//! * its **move** costs the reload of the lines it can expect still cached where it last ran
//!   (the cache model's decayed footprint of its last run, or where the policy keeps no model
//!   its declared footprint less what the data declared by the runs ended there since would
//!   have evicted: [`Engine::home_lines`](crate::policy::engine::Engine::home_lines)),
//!   each at the thief's [`ReloadCosts::per_line`]: nothing when the thief shares that
//!   processor's model cache (the cache the lines are in), else the host's measured cost of
//!   fetching a line another core wrote ([`HostCosts::line_fetch_ns`](crate::sync::HostCosts::line_fetch_ns)),
//!   times the NUMA distance between the two processors' nodes over the distance within a node
//!   (SLIT distances are relative latencies);
//! * its **wait** is the victim's ULTs that run before it (those left in the runqueue at its
//!   turn, which have higher keys, and the one running) times the victim's expected run length
//!   ([`RunLengths`]: measured by the thief from the victim's switch counter between its looks,
//!   and at least as long as the victim has now been in one run; under `place_level` the
//!   visited processor's run length stands for its place's shared queue, counted as if it
//!   served the queue alone); and at least as long as the thief has been idle so far (since
//!   its own switch counter last moved). The second term is
//!   the rule of renting skis: a thief idle for a moment (its own ULTs blocked briefly) does
//!   not pull a ULT away from its data only to have both caches reload, but one idle for as
//!   long as the reload takes steals, so a lasting imbalance (a victim whose ULTs keep coming
//!   back to its queue after each short run) costs at most one reload time of idleness more.
//!
//! A ULT whose move costs more than its wait stays (counted in
//! [`ProcessorStats::steals_declined`](crate::ProcessorStats::steals_declined)); the thief
//! tries its next victims, and when it goes idle it pauses stealing until the earliest moment
//! a declined ULT's wait could have grown past its cost (at most the watch period of an idle
//! processor). Never-started ULTs (in start-queues, or placed ones in a runqueue) have nothing
//! cached and are taken as before. A
//! victim stuck in a long run makes its waiting ULTs worth moving: their wait grows with it.

use crate::place::{places_of, Place, PlaceError, PlaceInfo, PlaceSettings, StealAmount, StealOrder};
use crate::tcb::TcbRef;
use elite_affinity::Topology;
use std::collections::HashMap;

/// No place, or no home yet.
pub(crate) const NONE: u32 = u32::MAX;

/// A processor with this many ready ULTs or more is overloaded: a woken ULT whose target it is
/// goes to a less loaded candidate, unless strict (module docs).
pub(crate) const OVERLOADED: usize = 8;

/// Where a placed ULT may run (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlaceRule {
    /// Its place: an index into [`Places::infos`], or [`NONE`].
    pub(crate) place: u32,
    /// Its home processor, or [`NONE`] until its first wake-up (soft pinning).
    pub(crate) home: u32,
    /// Whether it never runs outside its place ([`PlaceMode::Strict`](crate::PlaceMode::Strict),
    /// or pinned).
    pub(crate) strict: bool,
    /// The ULT that woke it last (its TCB's address), or 0: a home-only ULT woken twice in a
    /// row by the same ULT follows it (module docs, "Rules"). An address, not a reference: a
    /// TCB recycled for another ULT can pass for the partner once, which only moves a wake-up.
    pub(crate) partner: usize,
}

/// A ULT waking a placed ULT: the processor it runs on and its TCB's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Waker {
    pub(crate) processor: usize,
    pub(crate) ult: usize,
}

impl PlaceRule {
    /// No rule.
    pub(crate) const NONE: PlaceRule = PlaceRule { place: NONE, home: NONE, strict: false, partner: 0 };
    /// Pinned where it first runs: a pinned ULT spawned from outside the processors.
    pub(crate) const PINNED_WHERE_STARTED: PlaceRule =
        PlaceRule { place: NONE, home: NONE, strict: true, partner: 0 };
}

/// What a spawn asks for, resolved against the runtime's places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlaceReq {
    /// Its place, or [`NONE`].
    pub(crate) place: u32,
    /// The place its home is chosen in, or [`NONE`]: the processor it starts on.
    pub(crate) home: u32,
    /// Strict.
    pub(crate) strict: bool,
}

/// Steal avoidance's cost of a line moved between two processors ([module docs](self),
/// "Costly steals"), fixed when the runtime is built.
pub(crate) struct ReloadCosts {
    n: usize,
    /// Per (processor the lines are cached on, thief), row-major: ticks to reload one line.
    ticks: Vec<f32>,
}

impl ReloadCosts {
    /// The costs on `topology` whose model cache is `model` (its level, if known), with a line
    /// fetched from another core in `fetch_ns` nanoseconds and `ticks_per_ns` time-stamp ticks
    /// to the nanosecond.
    pub(crate) fn new(
        topology: &Topology,
        model: &elite_affinity::ModelCache,
        fetch_ns: f64,
        ticks_per_ns: f64,
    ) -> ReloadCosts {
        let n = topology.num_processors();
        let mut ticks = vec![0.0; n * n];
        for from in 0..n {
            // The processors sharing `from`'s model cache reach its lines there.
            let sharing = match model.level {
                Some(level) => Place::cache(level, from).processors(topology).unwrap_or_else(|_| vec![from]),
                None => vec![from],
            };
            let node = topology.node_of(from);
            let local = f64::from(topology.node_distance(node, node));
            for thief in 0..n {
                if sharing.contains(&thief) {
                    continue;
                }
                let distance = f64::from(topology.node_distance(node, topology.node_of(thief)));
                let ratio = (distance / local.max(1.0)).max(1.0);
                ticks[from * n + thief] = (fetch_ns * ratio * ticks_per_ns) as f32;
            }
        }
        ReloadCosts { n, ticks }
    }

    /// Ticks to reload at `thief` one line cached at `from`.
    #[inline]
    pub(crate) fn per_line(&self, from: usize, thief: usize) -> f32 {
        self.ticks.get(from * self.n + thief).copied().unwrap_or(0.0)
    }

    /// Whether moving `lines` cached at `from` to `thief` costs more than waiting behind `ahead`
    /// ULTs and the running one, each `run` ticks long, or than the `idle` ticks the thief has
    /// been idle, whichever is longer ([module docs](self), "Costly steals"); by how many ticks,
    /// when it does.
    #[inline]
    pub(crate) fn excess(
        &self,
        from: usize,
        thief: usize,
        lines: f32,
        ahead: usize,
        run: f64,
        idle: f64,
    ) -> Option<f64> {
        let cost = f64::from(lines.max(0.0)) * f64::from(self.per_line(from, thief));
        let wait = ((ahead as f64 + 1.0) * run).max(idle);
        (cost > wait).then_some(cost - wait)
    }
}

/// A thief's estimates of its victims' run lengths ([module docs](self), "Costly steals"),
/// from their switch counters as it sees them at its looks.
pub(crate) struct RunLengths {
    /// Per victim: its switch count at the last look that saw it change, when (ticks; 0: never
    /// looked), and the estimate (ticks; 0: none yet).
    seen: Vec<(u64, u64, f64)>,
    /// The thief's own switch count when its idle spell began, and when (ticks; 0: none yet).
    idle: (u64, u64),
}

impl RunLengths {
    pub(crate) fn new(processors: usize) -> RunLengths {
        RunLengths { seen: vec![(0, 0, 0.0); processors], idle: (0, 0) }
    }

    /// How long the thief has been idle at `now`, its own switch counter reading `switches`:
    /// since the first look that saw the counter at this value (0 at that look).
    pub(crate) fn idle(&mut self, switches: u64, now: u64) -> f64 {
        let (count, since) = &mut self.idle;
        if *since == 0 || *count != switches {
            (*count, *since) = (switches, now.max(1));
        }
        now.saturating_sub(*since) as f64
    }

    /// Victim `v`'s expected run length in ticks, its switch counter reading `switches` at
    /// `now`: the time per switch between the looks that saw the counter move (averaged with
    /// the estimate before, half and half), and at least the time since the counter last moved
    /// (the run in progress has lasted that long). 0 at the first look.
    pub(crate) fn look(&mut self, v: usize, switches: u64, now: u64) -> f64 {
        let (count, since, run) = &mut self.seen[v];
        if *since == 0 {
            (*count, *since) = (switches, now.max(1));
            return 0.0;
        }
        if switches != *count {
            let sample = now.saturating_sub(*since) as f64 / switches.wrapping_sub(*count) as f64;
            *run = if *run == 0.0 { sample } else { (*run + sample) / 2.0 };
            (*count, *since) = (switches, now.max(1));
        }
        run.max(now.saturating_sub(*since) as f64)
    }
}

/// A runtime's places and its thieves' victims.
pub(crate) struct Places {
    /// Every place ([`places_of`]); the last `processors` are the processors, in order.
    pub(crate) infos: Vec<PlaceInfo>,
    /// The index in `infos` of each set of processors.
    index: HashMap<Vec<usize>, u32>,
    /// Per processor, its victims' groups, nearest first (module docs, "Victims").
    victims: Vec<Vec<Vec<usize>>>,
    pub(crate) settings: PlaceSettings,
    /// Whether every spawn asks [`Places::on_spawn`] (round-robin, soft pinning; never when
    /// [`inert`](Self::inert)).
    pub(crate) spawn_rules: bool,
    /// Whether no rule can change where a ULT runs: the runtime has one processor. Then no ULT
    /// is placed but a pinned one (module docs, "Rules"): a place, a home, round-robin and soft
    /// pinning would all answer that one processor, at the price of the placed wake path.
    pub(crate) inert: bool,
    /// Per processor, the processor whose runqueue it serves: the first of its work-stealing
    /// place (`RuntimeBuilder::place_level`), itself by default.
    runq_of: Vec<usize>,
    /// Per place, whether it is made of whole work-stealing places (its processors share a
    /// runqueue with none outside it): what a strict place must be.
    whole: Vec<bool>,
    /// Steal avoidance's costs, when it is on (module docs, "Costly steals").
    pub(crate) reload: Option<ReloadCosts>,
}

impl Places {
    pub(crate) fn new(topology: &Topology, settings: PlaceSettings) -> Places {
        let infos = places_of(topology);
        let mut index = HashMap::new();
        for (i, info) in infos.iter().enumerate() {
            index.entry(info.processors.clone()).or_insert(i as u32);
        }
        let n = topology.num_processors();
        let victims = (0..n)
            .map(|p| {
                let groups: Vec<Vec<usize>> = match settings.order {
                    StealOrder::Groups => topology.distance_groups(p).to_vec(),
                    StealOrder::NodeThenAll => {
                        let node = topology.node_of(p);
                        let (mates, rest): (Vec<usize>, Vec<usize>) =
                            (0..n).filter(|&v| v != p).partition(|&v| topology.node_of(v) == node);
                        vec![mates, rest]
                    }
                    StealOrder::Random => vec![(0..n).filter(|&v| v != p).collect()],
                };
                groups.into_iter().filter(|g| !g.is_empty()).collect()
            })
            .collect();
        let inert = n == 1;
        let spawn_rules = (settings.round_robin || settings.soft_pinning) && !inert;
        // (Validated by the builder: every processor has a place of the level's kind.)
        let runq_of = (0..n)
            .map(|p| match Place::of_kind(settings.level, p, topology).processors(topology) {
                Ok(procs) => procs[0],
                Err(_) => p,
            })
            .collect();
        let runq_of: Vec<usize> = runq_of;
        let whole = infos
            .iter()
            .map(|info| {
                (0..n).all(|r| {
                    info.processors.binary_search(&r).is_ok() || !info.processors.contains(&runq_of[r])
                }) && info.processors.iter().all(|&p| info.processors.contains(&runq_of[p]))
            })
            .collect();
        Places { infos, index, victims, settings, spawn_rules, inert, runq_of, whole, reload: None }
    }

    /// These places with steal avoidance's `costs` (module docs, "Costly steals").
    pub(crate) fn with_reload(mut self, costs: ReloadCosts) -> Places {
        self.reload = Some(costs);
        self
    }

    /// Whether place `place` can be strict: made of whole work-stealing places
    /// (`RuntimeBuilder::place_level`; every place can with a queue per processor).
    pub(crate) fn can_be_strict(&self, place: u32) -> bool {
        self.whole[place as usize]
    }

    /// Whether a ULT can be pinned: each processor serves a runqueue of its own.
    pub(crate) fn can_pin(&self) -> bool {
        self.runq_of.iter().enumerate().all(|(p, &q)| p == q)
    }

    /// The processor whose runqueue processor `p` serves (its work-stealing place's first).
    #[inline]
    pub(crate) fn runq_of(&self, p: usize) -> usize {
        self.runq_of[p]
    }

    /// The runqueue (by its processor, as [`Places::runq_of`] names it) a thief that serves
    /// runqueue `own` steals ready ULTs from when it visits victim `v`: the one `v` serves, or
    /// `None` when that is `own` (a victim of the thief's own work-stealing place: only its
    /// start-queue is taken from; module docs, "Victims"). With a runqueue per processor, `v`'s
    /// own: a victim is never the thief.
    #[inline]
    pub(crate) fn ready_queue(&self, v: usize, own: usize) -> Option<usize> {
        let q = self.runq_of[v];
        (q != own).then_some(q)
    }

    /// The index of `place` in [`Places::infos`].
    pub(crate) fn resolve(&self, place: &Place, topology: &Topology) -> Result<u32, PlaceError> {
        let processors = place.processors(topology)?;
        // Every place of the topology is listed (`places_of`), so the lookup finds it.
        Ok(self.index.get(&processors).copied().unwrap_or(0))
    }

    fn processors(&self, place: u32) -> &[usize] {
        &self.infos[place as usize].processors
    }

    /// A processor of place `place` for a ULT spawned on `spawner`: the spawner when it is one,
    /// else the place's processors in turn (`turn`, the spawner's own counter).
    fn choose(&self, place: u32, spawner: usize, turn: &mut usize) -> usize {
        let procs = self.processors(place);
        if procs.binary_search(&spawner).is_ok() {
            return spawner;
        }
        *turn = turn.wrapping_add(1);
        procs[*turn % procs.len()]
    }

    /// Where a ULT spawned on `spawner` starts, and its rule if it is placed. `pinned`: by
    /// `Builder::pinned`; `req`: its place and home; `turn`: the spawner's round-robin counter.
    pub(crate) fn on_spawn(
        &self,
        spawner: usize,
        pinned: bool,
        req: Option<PlaceReq>,
        turn: &mut usize,
    ) -> (usize, Option<PlaceRule>) {
        if pinned {
            return (
                spawner,
                Some(PlaceRule { place: NONE, home: spawner as u32, strict: true, partner: 0 }),
            );
        }
        if let Some(req) = req {
            let start = if req.place != NONE {
                self.choose(req.place, spawner, turn)
            } else {
                self.choose(req.home, spawner, turn)
            };
            // (A home without a place: the processor it starts on, chosen in its home place.)
            let home = match req.home {
                NONE => start,
                _ if req.place == NONE => start,
                h => self.choose(h, start, turn),
            };
            return (
                start,
                Some(PlaceRule { place: req.place, home: home as u32, strict: req.strict, partner: 0 }),
            );
        }
        let n = self.victims.len();
        let start = if self.settings.round_robin {
            *turn = turn.wrapping_add(1);
            *turn % n
        } else {
            spawner
        };
        let rule = self.settings.soft_pinning.then_some(PlaceRule {
            place: NONE,
            home: NONE,
            strict: false,
            partner: 0,
        });
        (start, rule)
    }

    /// Where the placed ULT `t` goes when it is woken (module docs); `by`: the processor of the
    /// ULT that wakes it, if a ULT does (a hand-off); `load(p)`: the ready ULTs of processor
    /// `p`. Fixes a soft-pinned ULT's home at its first wake-up.
    #[inline]
    pub(crate) fn wake_target(&self, t: TcbRef, by: Option<Waker>, load: impl Fn(usize) -> usize) -> usize {
        let cell = &t.tcb().sched.place;
        let mut rule = cell.get();
        let last = t.tcb().head.processor.load(crate::atomics::Ordering::Relaxed);
        if rule.home == NONE {
            rule.home = last as u32;
            cell.set(rule);
        }
        let home = rule.home as usize;
        if rule.place == NONE {
            if rule.strict {
                return home;
            }
            // The partner rule (module docs): woken by the same ULT as at its last wake-up, it
            // goes where that ULT runs, however loaded (thieves balance the load).
            if let Some(waker) = by {
                let partner = rule.partner == waker.ult;
                if !partner {
                    rule.partner = waker.ult;
                    cell.set(rule);
                }
                if partner {
                    return waker.processor;
                }
            }
            if load(home) >= OVERLOADED && load(last) < load(home) {
                return last;
            }
            return home;
        }
        let procs = self.processors(rule.place);
        let target = if procs.binary_search(&last).is_ok() { last } else { home };
        if rule.strict || procs.len() == 1 || load(target) < OVERLOADED {
            return target;
        }
        let best = procs.iter().copied().min_by_key(|&p| load(p)).unwrap_or(target);
        if load(best) < load(target) {
            best
        } else {
            target
        }
    }

    /// [`Places::wake_target`]'s common case under soft pinning, decided from the waker's
    /// processor alone: whether the placed ULT `t`, woken by the ULT at address `by` running on
    /// processor `here` (whose ready ULTs number `here_load`), goes to `here`. It does when `t`
    /// has a home only (soft pinning, fixed already) and either `by` is its partner (the partner
    /// rule), or `here` is its home and not overloaded, or its home and where it last ran (no
    /// other candidate); then `by` is recorded as its partner, as `wake_target` does, and the answer
    /// says whether `here` is away from home. `None`: `wake_target` decides (nothing changed).
    #[inline(always)]
    pub(crate) fn stays_with_waker(
        &self,
        t: TcbRef,
        here: usize,
        by: usize,
        here_load: usize,
    ) -> Option<bool> {
        let cell = &t.tcb().sched.place;
        let rule = cell.get();
        if rule.place != NONE || rule.strict || rule.home == NONE {
            return None;
        }
        let partner = rule.partner == by;
        let at_home = rule.home as usize == here;
        let stays = partner
            || (at_home
                && (here_load < OVERLOADED
                    || t.tcb().head.processor.load(crate::atomics::Ordering::Relaxed) == here));
        if !stays {
            return None;
        }
        if !partner {
            cell.set(PlaceRule { partner: by, ..rule });
        }
        Some(!at_home)
    }

    /// Whether processor `thief` may take the placed ULT `t` (module docs).
    #[inline]
    pub(crate) fn may_take(&self, t: TcbRef, thief: usize) -> bool {
        let rule = t.tcb().sched.place.get();
        if !rule.strict {
            return true;
        }
        if rule.place == NONE {
            // Pinned (before its first wake-up, where it runs: where it was taken from).
            let home = match rule.home {
                NONE => t.tcb().head.processor.load(crate::atomics::Ordering::Relaxed),
                h => h as usize,
            };
            return home == thief;
        }
        self.processors(rule.place).binary_search(&thief).is_ok()
    }

    /// Whether the placed ULT `t` has a home and last ran elsewhere.
    #[inline]
    pub(crate) fn is_away(&self, t: TcbRef) -> bool {
        let home = t.tcb().sched.place.get().home;
        home != NONE && home as usize != t.tcb().head.processor.load(crate::atomics::Ordering::Relaxed)
    }

    /// `t`'s home, when `t` is placed, has one, and last ran there.
    #[inline]
    pub(crate) fn at_home(&self, t: TcbRef) -> Option<usize> {
        if !t.tcb().head.placed.get() {
            return None;
        }
        let home = t.tcb().sched.place.get().home;
        (home != NONE && home as usize == t.tcb().head.processor.load(crate::atomics::Ordering::Relaxed))
            .then_some(home as usize)
    }

    /// How many of a victim's `len` ready ULTs a thief takes; `policy`: the policy's answer.
    #[inline]
    pub(crate) fn steal_count(&self, len: usize, policy: impl FnOnce(usize) -> usize) -> usize {
        match self.settings.amount {
            StealAmount::Policy => policy(len),
            StealAmount::One => 1.min(len),
            StealAmount::Half => len.div_ceil(2),
        }
    }

    /// Processor `p`'s victims' groups, nearest first.
    pub(crate) fn victims(&self, p: usize) -> &[Vec<usize>] {
        &self.victims[p]
    }
}

/// Visits the victims of `groups` (module docs, "Victims") under `order`, drawing from `random`,
/// until `try_steal` succeeds (true) or every group had its attempts (false).
#[inline]
pub(crate) fn visit(
    groups: &[Vec<usize>],
    order: StealOrder,
    mut random: impl FnMut() -> u64,
    mut try_steal: impl FnMut(usize) -> bool,
) -> bool {
    for group in groups {
        let len = group.len();
        match order {
            StealOrder::Groups | StealOrder::Random => {
                for _ in 0..len {
                    if try_steal(group[random() as usize % len]) {
                        return true;
                    }
                }
            }
            StealOrder::NodeThenAll => {
                let start = random() as usize % len;
                for i in 0..len {
                    if try_steal(group[(start + i) % len]) {
                        return true;
                    }
                }
            }
        }
    }
    false
}

/// For tests elsewhere in the crate: the places of two processors sharing an L3, with a
/// work-stealing place per L3 (processor 1 serves processor 0's runqueue, and its own stays
/// empty), and the same processors each with a runqueue of its own.
#[cfg(test)]
pub(crate) fn two_processors_sharing_an_l3() -> (Places, Places) {
    let topology =
        Topology::synthetic("1 node x 1 core x 2 threads, 512 KiB L2 per processor, 8 MiB L3 per core")
            .unwrap();
    let per_l3 = Places::new(
        &topology,
        PlaceSettings { level: crate::PlaceKind::Cache { level: 3 }, ..PlaceSettings::default() },
    );
    assert_eq!(per_l3.runq_of(1), 0);
    (per_l3, Places::new(&topology, PlaceSettings::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 nodes x 2 "L3" x 2 cores: the synthetic spec says the L3s as caches per synthetic core
    /// (of 2 threads each), since a spec names caches per processor, core, node or machine.
    const SPEC: &str = "2 nodes x 2 cores x 2 threads, 512 KiB L2 per processor, 8 MiB L3 per core";

    fn places(order: StealOrder) -> Places {
        let t = Topology::synthetic(SPEC).unwrap();
        Places::new(&t, PlaceSettings { order, ..PlaceSettings::default() })
    }

    /// A scripted random source: the values in turn, then again.
    fn script(values: &[u64]) -> impl FnMut() -> u64 + '_ {
        let mut i = 0;
        move || {
            i += 1;
            values[(i - 1) % values.len()]
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn lgs_tries_each_group_as_often_as_it_has_members_nearest_first() {
        let p = places(StealOrder::Groups);
        assert_eq!(p.victims(0), &[vec![1], vec![2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(p.victims(5), &[vec![4], vec![6, 7], vec![0, 1, 2, 3]]);
        let mut seen = Vec::new();
        let found = visit(p.victims(0), StealOrder::Groups, script(&[0, 1, 0, 3, 2, 1, 0]), |v| {
            seen.push(v);
            false
        });
        assert!(!found);
        // Group [1] once; [2, 3] twice, drawn 1 then 0; [4..8] four times, drawn 3, 2, 1, 0.
        assert_eq!(seen, [1, 3, 2, 7, 6, 5, 4]);
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn lgs_stops_at_a_success_and_the_next_steal_starts_at_the_nearest_group() {
        let p = places(StealOrder::Groups);
        let mut seen = Vec::new();
        let mut random = script(&[0, 0, 0, 2]);
        assert!(visit(p.victims(0), StealOrder::Groups, &mut random, |v| {
            seen.push(v);
            v == 6
        }));
        assert_eq!(seen, [1, 2, 2, 6]);
        seen.clear();
        assert!(visit(p.victims(0), StealOrder::Groups, &mut random, |v| {
            seen.push(v);
            true
        }));
        assert_eq!(seen, [1], "after a success the nearest group first");
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn node_then_all_and_random_orders() {
        let p = places(StealOrder::NodeThenAll);
        assert_eq!(p.victims(1), &[vec![0, 2, 3], vec![4, 5, 6, 7]]);
        let mut seen = Vec::new();
        visit(p.victims(1), StealOrder::NodeThenAll, script(&[1, 2]), |v| {
            seen.push(v);
            false
        });
        assert_eq!(seen, [2, 3, 0, 6, 7, 4, 5], "each group once, in a rotation");
        let p = places(StealOrder::Random);
        assert_eq!(p.victims(7), &[vec![0, 1, 2, 3, 4, 5, 6]]);
        let mut n = 0;
        visit(p.victims(7), StealOrder::Random, script(&[5]), |v| {
            assert_eq!(v, 5);
            n += 1;
            false
        });
        assert_eq!(n, 7);
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn processors_of_a_work_stealing_place_serve_its_first_processors_queue() {
        let t = Topology::synthetic(SPEC).unwrap();
        let runqs = |level| {
            let p = Places::new(&t, PlaceSettings { level, ..PlaceSettings::default() });
            (0..8).map(|i| p.runq_of(i)).collect::<Vec<_>>()
        };
        assert_eq!(runqs(crate::PlaceKind::Processor), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(runqs(crate::PlaceKind::Cache { level: 3 }), [0, 0, 2, 2, 4, 4, 6, 6]);
        assert_eq!(runqs(crate::PlaceKind::Node), [0, 0, 0, 0, 4, 4, 4, 4]);
        assert_eq!(runqs(crate::PlaceKind::Machine), [0; 8]);
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn a_thief_steals_ready_ults_from_the_queues_its_victims_serve_never_from_its_own() {
        let t = Topology::synthetic(SPEC).unwrap();
        let at = |level| Places::new(&t, PlaceSettings { level, ..PlaceSettings::default() });
        // Work-stealing places per L3 ([0, 1], [2, 3], [4, 5], [6, 7]): processor 3 serves
        // processor 2's queue; its mate's start-queue only, then the other places' queues,
        // whichever of their processors is drawn.
        let p = at(crate::PlaceKind::Cache { level: 3 });
        assert_eq!(p.victims(3), &[vec![2], vec![0, 1], vec![4, 5, 6, 7]]);
        let own = p.runq_of(3);
        assert_eq!(own, 2);
        let mut tried = Vec::new();
        visit(p.victims(3), StealOrder::Groups, script(&[0, 1, 0, 3, 2, 1, 0]), |v| {
            tried.push((v, p.ready_queue(v, own)));
            false
        });
        assert_eq!(
            tried,
            [(2, None), (1, Some(0)), (0, Some(0)), (7, Some(6)), (6, Some(6)), (5, Some(4)), (4, Some(4)),]
        );
        // Every thief: each other processor a victim (its start-queue reachable), each other
        // place's queue tried through every one of its processors, its own queue never.
        for level in [
            crate::PlaceKind::Processor,
            crate::PlaceKind::Cache { level: 3 },
            crate::PlaceKind::Node,
            crate::PlaceKind::Machine,
        ] {
            for order in [StealOrder::Groups, StealOrder::NodeThenAll, StealOrder::Random] {
                let p = Places::new(&t, PlaceSettings { level, order, ..PlaceSettings::default() });
                for thief in 0..8 {
                    let own = p.runq_of(thief);
                    let mut victims: Vec<usize> = p.victims(thief).iter().flatten().copied().collect();
                    victims.sort_unstable();
                    assert_eq!(victims, (0..8).filter(|&v| v != thief).collect::<Vec<_>>());
                    for v in victims {
                        let want = (p.runq_of(v) != own).then_some(p.runq_of(v));
                        assert_eq!(p.ready_queue(v, own), want, "{level:?} {order:?}: {thief} visits {v}");
                    }
                }
            }
        }
        // A runqueue per processor: each victim's own.
        let p = at(crate::PlaceKind::Processor);
        assert!((0..8).all(|thief| p
            .victims(thief)
            .iter()
            .flatten()
            .all(|&v| p.ready_queue(v, thief) == Some(v))));
        // One queue for the machine: nothing to steal but start-queue entries.
        let p = at(crate::PlaceKind::Machine);
        assert!(p.victims(5).iter().flatten().all(|&v| p.ready_queue(v, p.runq_of(5)).is_none()));
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn wake_targets_homes_and_thieves() {
        let t = Topology::synthetic(SPEC).unwrap();
        let p = places(StealOrder::Groups);
        let owner = std::sync::Arc::new(());
        let chunk = crate::tcb::Chunk::allocate(&owner);
        let u = chunk.tcbs().next().expect("a TCB");
        let set = |rule: PlaceRule, last: usize| {
            u.tcb().sched.place.set(rule);
            u.tcb().head.placed.set(true);
            u.tcb().head.processor.store(last, crate::atomics::Ordering::Relaxed);
        };
        let idle = |_: usize| 0;
        // Soft pinning: the first wake-up fixes the home where the ULT last ran.
        set(PlaceRule { place: NONE, home: NONE, strict: false, partner: 0 }, 3);
        assert_eq!(p.wake_target(u, None, idle), 3);
        assert_eq!(u.tcb().sched.place.get().home, 3);
        // Stolen (ran on 5): away from home, and home at its next wake-up ...
        u.tcb().head.processor.store(5, crate::atomics::Ordering::Relaxed);
        assert!(p.is_away(u) && p.at_home(u).is_none());
        assert_eq!(p.wake_target(u, None, idle), 3);
        // ... unless home is overloaded and where it ran is not.
        assert_eq!(p.wake_target(u, None, |q| if q == 3 { OVERLOADED } else { 0 }), 5);
        assert!(p.may_take(u, 0), "a home is no prison");
        u.tcb().head.processor.store(3, crate::atomics::Ordering::Relaxed);
        assert_eq!((p.is_away(u), p.at_home(u)), (false, Some(3)));
        // A hint for node 1 (processors 4..8), home 4: where it last ran when that is in the
        // place, else home; the least loaded of the place when that one is overloaded.
        let node1 = p.resolve(&Place::node(1), &t).unwrap();
        set(PlaceRule { place: node1, home: 4, strict: false, partner: 0 }, 6);
        assert_eq!(p.wake_target(u, None, idle), 6);
        set(PlaceRule { place: node1, home: 4, strict: false, partner: 0 }, 1);
        assert_eq!(p.wake_target(u, None, idle), 4);
        assert_eq!(p.wake_target(u, None, |q| if q == 4 { 9 } else { 1 + q % 2 }), 6);
        assert!(p.may_take(u, 0));
        // Strict: the same targets, whatever the load; only the place's processors may take it.
        set(PlaceRule { place: node1, home: 4, strict: true, partner: 0 }, 1);
        assert_eq!(p.wake_target(u, None, |q| if q == 4 { 9 } else { 0 }), 4);
        assert!(!p.may_take(u, 0) && !p.may_take(u, 3) && p.may_take(u, 7));
        // Pinned where it first ran (spawned from outside): the processor it ran on.
        set(PlaceRule::PINNED_WHERE_STARTED, 2);
        assert!(p.may_take(u, 2) && !p.may_take(u, 1));
        assert_eq!(p.wake_target(u, None, idle), 2);
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn a_soft_pinned_ult_follows_the_ult_that_woke_it_twice_in_a_row() {
        let p = places(StealOrder::Groups);
        let owner = std::sync::Arc::new(());
        let chunk = crate::tcb::Chunk::allocate(&owner);
        let u = chunk.tcbs().next().expect("a TCB");
        u.tcb().sched.place.set(PlaceRule { place: NONE, home: NONE, strict: false, partner: 0 });
        u.tcb().head.placed.set(true);
        u.tcb().head.processor.store(3, crate::atomics::Ordering::Relaxed);
        let (server, other) = (0x1000, 0x2000);
        let on = |processor, ult| Some(Waker { processor, ult });
        let idle = |_: usize| 0;
        // The first wake-up by the server: home (fixed where it last ran), the server recorded.
        assert_eq!(p.wake_target(u, on(5, server), idle), 3);
        assert_eq!(u.tcb().sched.place.get().home, 3);
        assert_eq!(u.tcb().sched.place.get().partner, server);
        // Again by the server, on 5: it follows its partner there ...
        assert_eq!(p.wake_target(u, on(5, server), idle), 5);
        u.tcb().head.processor.store(5, crate::atomics::Ordering::Relaxed);
        assert!(p.is_away(u), "away from home with its partner");
        assert_eq!(p.wake_target(u, on(6, server), idle), 6, "wherever its partner runs");
        // ... also when the partner's processor is overloaded (thieves balance the load) ...
        let five_overloaded = |q| if q == 5 { OVERLOADED } else { 0 };
        assert_eq!(p.wake_target(u, on(5, server), five_overloaded), 5);
        assert_eq!(p.stays_with_waker(u, 5, server, OVERLOADED), Some(true), "the short road agrees");
        // ... while a non-partner waking it there sends it home.
        assert_eq!(p.stays_with_waker(u, 5, 0x3000, OVERLOADED), None, "the full rule decides");
        // Another ULT wakes it: home, and that one is its partner now.
        assert_eq!(p.wake_target(u, on(5, other), idle), 3);
        assert_eq!(p.wake_target(u, on(5, server), idle), 3, "the server is no longer its partner");
        assert_eq!(p.wake_target(u, on(5, server), idle), 5);
        // A wake-up from outside the ULTs: home, the partner kept.
        assert_eq!(p.wake_target(u, None, idle), 3);
        assert_eq!(p.wake_target(u, on(7, server), idle), 7);
        // Pinned, or with a place: no partner rule.
        u.tcb().sched.place.set(PlaceRule { place: NONE, home: 2, strict: true, partner: server });
        assert_eq!(p.wake_target(u, on(5, server), idle), 2);
        let t = Topology::synthetic(SPEC).unwrap();
        let node1 = p.resolve(&Place::node(1), &t).unwrap();
        u.tcb().sched.place.set(PlaceRule { place: node1, home: 4, strict: false, partner: server });
        assert_eq!(p.wake_target(u, on(1, server), idle), 5, "where it last ran, in its place");
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn a_lines_reload_costs_the_measured_fetch_times_the_numa_distance_and_nothing_in_a_shared_cache() {
        // The model cache is the largest private to a core, here the "L3" of each synthetic
        // core, shared by its two threads: moving between them reloads nothing; to another
        // core, the fetch; across the nodes (SLIT 20 against 10 within), twice the fetch.
        // 10 ns a line, 3 ticks a nanosecond.
        let t = Topology::synthetic(SPEC).unwrap();
        let c = ReloadCosts::new(&t, &t.model_cache(), 10.0, 3.0);
        assert_eq!((c.per_line(0, 0), c.per_line(0, 1), c.per_line(0, 3)), (0.0, 0.0, 30.0));
        assert_eq!((c.per_line(0, 4), c.per_line(7, 2)), (60.0, 60.0));
        // A core per processor, an L2 each: every other processor reloads.
        let t = Topology::synthetic("2 nodes x 4 cores, 512 KiB L2 per core").unwrap();
        let c = ReloadCosts::new(&t, &t.model_cache(), 10.0, 3.0);
        assert_eq!((c.per_line(0, 1), c.per_line(0, 2), c.per_line(5, 0)), (30.0, 30.0, 60.0));
        // Costly when the reload exceeds the wait: 100 lines from 0 to 2 cost 3000 ticks; behind
        // 2 ULTs and the running one, 1000 ticks each: 3000, not more; at 999 each: 3 more.
        assert_eq!(c.excess(0, 2, 100.0, 2, 1000.0, 0.0), None);
        assert_eq!(c.excess(0, 2, 100.0, 2, 999.0, 0.0), Some(3.0));
        // A thief idle for as long as the reload takes steals (ski rental).
        assert_eq!(c.excess(0, 2, 100.0, 2, 999.0, 2999.0), Some(1.0));
        assert_eq!(c.excess(0, 2, 100.0, 0, 10.0, 3000.0), None);
        let t = Topology::synthetic(SPEC).unwrap();
        let c = ReloadCosts::new(&t, &t.model_cache(), 10.0, 3.0);
        assert_eq!(c.excess(0, 1, 1e9, 0, 0.0, 0.0), None, "a shared cache: never costly");
        assert_eq!(c.excess(0, 2, 0.0, 0, 0.0, 0.0), None, "nothing cached: never costly");
    }

    #[test]
    fn run_lengths_come_from_the_victims_switches_between_looks() {
        let mut r = RunLengths::new(2);
        assert_eq!(r.look(1, 10, 1000), 0.0, "the first look knows nothing");
        // 4 switches in 400 ticks: 100 a run.
        assert_eq!(r.look(1, 14, 1400), 100.0);
        // No switch for 50 ticks: still 100; for 300: the run in progress has lasted 300.
        assert_eq!(r.look(1, 14, 1450), 100.0);
        assert_eq!(r.look(1, 14, 1700), 300.0);
        // 1 switch since 1400 (300 ticks): averaged with the estimate before, 200.
        assert_eq!(r.look(1, 15, 1700), 200.0);
        assert_eq!(r.look(0, 3, 50), 0.0, "each victim apart");
        // The thief's idle spell: from the first look at its own switch count.
        assert_eq!(r.idle(7, 100), 0.0);
        assert_eq!(r.idle(7, 350), 250.0);
        assert_eq!(r.idle(8, 400), 0.0, "it ran a ULT since: a new spell");
        assert_eq!(r.idle(8, 410), 10.0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn steal_amounts() {
        let mut p = places(StealOrder::Groups);
        assert_eq!(p.steal_count(5, |_| 4), 4);
        p.settings.amount = StealAmount::One;
        assert_eq!((p.steal_count(5, |_| 4), p.steal_count(0, |_| 4)), (1, 0));
        p.settings.amount = StealAmount::Half;
        assert_eq!(p.steal_count(5, |_| 4), 3);
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn spawns_start_in_their_place_or_in_turn() {
        let t = Topology::synthetic(SPEC).unwrap();
        let p = places(StealOrder::Groups);
        let node1 = p.resolve(&Place::node(1), &t).unwrap();
        let mut turn = 0;
        let req = PlaceReq { place: node1, home: NONE, strict: false };
        let starts: Vec<usize> = (0..4).map(|_| p.on_spawn(0, false, Some(req), &mut turn).0).collect();
        assert_eq!(starts, [5, 6, 7, 4]);
        // On a processor of the place: there.
        let (start, rule) = p.on_spawn(6, false, Some(req), &mut turn);
        assert_eq!((start, rule.unwrap().home), (6, 6));
        // Pinned: strictly on the spawner.
        let (_, rule) = p.on_spawn(3, true, None, &mut turn);
        assert_eq!(rule, Some(PlaceRule { place: NONE, home: 3, strict: true, partner: 0 }));
        // Nothing asked: the spawner, no rule.
        assert_eq!(p.on_spawn(2, false, None, &mut turn), (2, None));
        // A cache named by any of its processors is the same place.
        assert_eq!(p.resolve(&Place::cache(3, 4), &t), p.resolve(&Place::cache(3, 5), &t));
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn the_waker_shortcut_agrees_with_the_full_rule() {
        // Every soft-pinning case the shortcut may answer: rules (home, partner, last run),
        // wakers (processor, ULT) and loads; where it answers, `wake_target` answers the same
        // processor and leaves the same rule behind; where it does not, nothing changed.
        let p = places(StealOrder::Groups);
        let owner = std::sync::Arc::new(());
        let chunk = crate::tcb::Chunk::allocate(&owner);
        let u = chunk.tcbs().next().expect("a TCB");
        u.tcb().head.placed.set(true);
        let (server, other) = (0x1000, 0x2000);
        let mut answered = 0;
        for (place, strict) in [(NONE, false), (NONE, true), (3, false)] {
            for home in [NONE, 2, 5] {
                for partner in [0, server] {
                    for last in [2, 5] {
                        for here in [2, 5] {
                            for by in [server, other] {
                                for (here_load, home_load) in
                                    [(0, 0), (OVERLOADED, 0), (OVERLOADED, OVERLOADED), (0, OVERLOADED)]
                                {
                                    let rule = PlaceRule { place, home, strict, partner };
                                    let load = |q: usize| {
                                        if q == here {
                                            here_load
                                        } else if q == home as usize {
                                            home_load
                                        } else {
                                            1
                                        }
                                    };
                                    u.tcb().head.processor.store(last, crate::atomics::Ordering::Relaxed);
                                    u.tcb().sched.place.set(rule);
                                    let short = p.stays_with_waker(u, here, by, here_load);
                                    let after_short = u.tcb().sched.place.get();
                                    u.tcb().sched.place.set(rule);
                                    let full =
                                        p.wake_target(u, Some(Waker { processor: here, ult: by }), load);
                                    let case = (rule, last, here, by, here_load, home_load);
                                    match short {
                                        Some(away) => {
                                            answered += 1;
                                            assert_eq!(full, here, "{case:?}");
                                            assert_eq!(away, home as usize != here, "{case:?}");
                                            assert_eq!(after_short, u.tcb().sched.place.get(), "{case:?}");
                                        }
                                        None => assert_eq!(after_short, rule, "{case:?}"),
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(answered > 0);
    }

    /// Whether the ULT running this closure is placed (has a rule the wake path asks).
    fn running_placed() -> bool {
        let p = crate::slot::current_processor().expect("inside a ULT");
        p.current_ult().expect("a ULT runs").tcb().head.placed.get()
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the machine's topology from sysfs, which Miri's isolation refuses")]
    fn on_one_processor_only_a_pinned_ult_is_placed() {
        use crate::{Builder, PlaceMode, Runtime};
        let placed = |processors: usize| {
            let rt = Runtime::builder()
                .processors(processors)
                .soft_pinning(true)
                .round_robin(true)
                .no_chaos()
                .build()
                .unwrap();
            rt.block_on(|| {
                let run = |b: Builder| b.spawn(running_placed).unwrap().join().unwrap();
                [
                    run(Builder::new()),
                    run(Builder::new().place(Place::processor(0))),
                    run(Builder::new().place(Place::machine()).place_mode(PlaceMode::Strict)),
                    run(Builder::new().home(Place::machine())),
                    run(Builder::new().pinned(true)),
                ]
            })
        };
        // Soft pinning, round-robin, a hint, a strict place, a home: none changes where a ULT of
        // one processor runs, so none makes it pay the placed wake path; a pin still holds.
        assert_eq!(placed(1), [false, false, false, false, true]);
        assert_eq!(placed(2), [true; 5], "with two processors every rule is kept");
    }
}
