//! [`Coscheduler`]: several groups run as separate applications in one runtime, admitted per
//! quantum by a plan (LCN, gang, miss balancing) or not at all (the default).
//!
//! The mechanism is cooperative, as everything in a ULT runtime: a group's ULTs pass the gate
//! ([`Coscheduler::run`]) around each unit of their work (a kernel, a chunk of one), and the gate
//! lets at most as many of a group's ULTs through at once as the current slot gives the group
//! cores (none when the slot does not hold it), and none before the units of the previous slot's
//! other groups are done (under LCN: those of classes it may not pair with): groups that may
//! not run together never do. Waiting ULTs block on the runtime's
//! [`Condvar`](crate::sync::Condvar), so their processors run the admitted groups. A quantum
//! takes effect at the next unit boundary: units much shorter than the quantum make it exact.
//!
//! A controller thread (an OS thread the coscheduler starts, asleep between quanta) first
//! probes each group for the LCN and miss-balancing modes (alone on two cores, then alone on one,
//! each phase measured after the group's first unit on each of its cores, in whole units from
//! one unit's completion to a later one's, for a few units and at most a quantum: the progress
//! ratio is the scaling signal), classifies it from the [`SoftwareSignals`] of its probe
//! window against the host's measured bandwidth, plans, and
//! then turns the plan's slots one per quantum, re-observing every group that ran (with its
//! latest probe's scaling): a group whose class changes ([`Classifier`]) is re-planned.
//!
//! Under LCN one probe is not final (the seed's second approach, adapting a group's resources
//! to what the runtime sees of it after its start): a group of class LC or C, whose predicted
//! cores follow from its probe's scaling, that the plan gives fewer cores than the domain has
//! is probed again, the same way, between two quanta, once it waited 2 rounds of the plan
//! (the plan's slots, a quantum each) and ran in no slot of the last quantum (unless it runs in
//! every slot), so that its ULTs are held and the two-core phase spreads them. The re-probe's
//! rates, where it measured both, replace the probe's (`GroupReport::probe`;
//! `GroupReport::reprobes` counts the re-probes); its one-core window is then one more window
//! of the group for the classifier. A
//! re-probe that changes the group's class or predicted cores re-plans and the next waits 2
//! rounds again; one that confirms them doubles the wait before the next, up to 32 rounds. A
//! group the plan gives every core is not probed again: a reading that overstates its scaling
//! stays. Like the probe, a re-probe runs in the first domain, the others idle; the
//! processors its one-core phase leaves free run N groups under the runtime's gate and idle
//! under [`Coscheduler::run`]'s.

use super::{
    gang, miss_balance, pair_lcn, stream_bandwidth, Class, Classifier, SignalSource, Signals, Slot,
    SoftwareSignals, Thresholds, Window,
};
use crate::runtime::Shared;
use crate::sync::{Condvar, Mutex};
use crate::Group;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// Which groups run at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// No gate: every group's ULTs run whenever the runtime's policy runs them (the gate only
    /// counts).
    Default,
    /// LCN: classify, predict cores, pair ([`pair_lcn`]).
    Lcn,
    /// One group at a time on every core ([`gang`]).
    Gang,
    /// Pairs by memory intensity, most with least ([`miss_balance`]).
    MissBalance,
}

impl Mode {
    /// `"default"`, `"lcn"`, `"gang"`, `"miss-balance"`.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Lcn => "lcn",
            Mode::Gang => "gang",
            Mode::MissBalance => "miss-balance",
        }
    }
}

/// What one group did under a [`Coscheduler`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GroupReport {
    /// The group.
    pub group: Group,
    /// Units completed through the gate.
    pub completions: u64,
    /// Time spent inside units, summed over its ULTs.
    pub busy: Duration,
    /// Its class when last classified (`None` in the default and gang modes).
    pub class: Option<Class>,
    /// Its latest signals.
    pub signals: Signals,
    /// Times its class changed after the first classification.
    pub reclassified: u32,
    /// Its units per second on one core and on two in its latest probe (LCN and miss
    /// balancing; under LCN a re-probe's, once one measured both), `None` where no probe ran or
    /// the probe saw none of its units (the group then runs alone until a window of the plan
    /// classifies it).
    pub probe: Option<(f64, f64)>,
    /// Times LCN probed it again after its first probe (a group the plan gave fewer cores than
    /// the domain has, see the module docs), whether or not the re-probe saw its units.
    pub reprobes: u32,
}

/// What a runtime's coscheduling gate did ([`Coscheduler::gate_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GateStats {
    /// ULTs a processor that did not admit their group sent to one that did.
    pub sent: u64,
    /// ULTs held because no processor admitted their group.
    pub held: u64,
    /// ULTs held now.
    pub held_now: usize,
}

struct GroupState {
    group: Group,
    /// The class code last written to the runtime's stats for the group (0: none yet).
    published: u8,
    footprint: u64,
    group_footprint: u64,
    allowed: usize,
    in_use: usize,
    completions: u64,
    busy: Duration,
    window_busy: Duration,
    window_bytes: u64,
    window_units: u64,
    /// When the group's latest unit was counted.
    last_unit: Option<Instant>,
    probe: (f64, f64),
    /// Under a runtime's gate: the group's busy time in the runtime's stats when its window
    /// began.
    busy_mark: Duration,
    class: Option<Class>,
    signals: Signals,
    reclassified: u32,
    reprobes: u32,
}

struct State {
    groups: Vec<GroupState>,
    plan: Vec<Slot>,
}

impl State {
    /// Whether a ULT of `group` may enter now: its group has a core left in the current slot,
    /// and no ULT of a group outside the slot is still inside a unit (a slot starts once the
    /// last one's units are done, so that groups of two slots never overlap).
    ///
    /// Under LCN a group of a class that may pair with every such unfinished group's class
    /// ([`Class::may_pair`]) need not wait: a slot change then idles no core between two
    /// groups that may run together anyway.
    fn admits(&self, group: usize, mode: Mode) -> bool {
        let g = &self.groups[group];
        let compatible = |o: &GroupState| {
            mode == Mode::Lcn && matches!((g.class, o.class), (Some(a), Some(b)) if a.may_pair(b))
        };
        g.in_use < g.allowed && self.groups.iter().all(|o| o.allowed > 0 || o.in_use == 0 || compatible(o))
    }
}

struct Inner {
    mode: Mode,
    quantum: Duration,
    /// The cores of a domain (a runtime's gate sets its domain size when it takes the
    /// coscheduler over).
    cores: AtomicUsize,
    /// The runtime whose gate admits the groups, when one took the coscheduler over
    /// ([`RuntimeBuilder::coschedule`](crate::RuntimeBuilder::coschedule)).
    runtime: OnceLock<Weak<Shared>>,
    state: Mutex<State>,
    admitted: Condvar,
    stop: AtomicBool,
    bandwidth: f64,
    /// Whether the builder was given the cache sizes ([`CoschedulerBuilder::caches`]): then no
    /// topology replaces them.
    caches_given: bool,
    /// The private L2's and the last-level cache's sizes, once known: the builder's, the
    /// attaching runtime's topology's, or (first needed without either) the host's
    /// ([`Coscheduler::caches`]).
    caches: std::sync::Mutex<Option<(u64, u64)>>,
    /// The signal source, until the controller takes it (`None`: software signals).
    source: std::sync::Mutex<Option<Box<dyn SignalSource>>>,
}

/// Runs groups as separate applications with a [`Mode`] and a quantum (see the module docs).
///
/// ```
/// use elite_rt::contention::{Coscheduler, Mode};
/// use std::time::Duration;
///
/// let rt = elite_rt::Runtime::builder().processors(2).build()?;
/// let cs = Coscheduler::builder(Mode::Gang).quantum(Duration::from_millis(2)).cores(2).build();
/// let a = cs.add_group(&elite_rt::Group::new("a"), 0, 0);
/// let b = cs.add_group(&elite_rt::Group::new("b"), 0, 0);
/// cs.start();
/// rt.block_on(|| {
///     let ults: Vec<_> = [a, a, b, b]
///         .into_iter()
///         .map(|g| {
///             let cs = cs.clone();
///             elite_rt::spawn(move || {
///                 for _ in 0..20 {
///                     cs.run(g, 0, || std::hint::black_box((0..1000u64).sum::<u64>()));
///                 }
///             })
///         })
///         .collect();
///     ults.into_iter().for_each(|u| u.join().unwrap());
/// });
/// cs.stop();
/// assert_eq!(cs.report().iter().map(|g| g.completions).collect::<Vec<_>>(), [40, 40]);
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
#[derive(Clone)]
pub struct Coscheduler {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Coscheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coscheduler")
            .field("mode", &self.inner.mode)
            .field("quantum", &self.inner.quantum)
            .field("cores", &self.inner.cores.load(Ordering::Relaxed))
            .field("in_runtime", &self.inner.runtime.get().is_some())
            .finish()
    }
}

/// Builds a [`Coscheduler`].
pub struct CoschedulerBuilder {
    mode: Mode,
    quantum: Duration,
    cores: usize,
    bandwidth: Option<f64>,
    caches: Option<(u64, u64)>,
    source: Option<Box<dyn SignalSource>>,
}

impl std::fmt::Debug for CoschedulerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoschedulerBuilder")
            .field("mode", &self.mode)
            .field("quantum", &self.quantum)
            .field("cores", &self.cores)
            .field("bandwidth", &self.bandwidth)
            .field("caches", &self.caches)
            .field("source", &self.source.as_ref().map(|s| s.name()))
            .finish()
    }
}

impl CoschedulerBuilder {
    /// The quantum: how long one slot of the plan runs (default 20 ms; the seed used 1 s).
    pub fn quantum(mut self, quantum: Duration) -> Self {
        self.quantum = quantum.max(Duration::from_micros(100));
        self
    }

    /// The cores of the cache domain the groups share (default: the host's available
    /// parallelism).
    pub fn cores(mut self, cores: usize) -> Self {
        self.cores = cores.max(1);
        self
    }

    /// The host's memory bandwidth in bytes per second, instead of measuring it at
    /// [`build`](Self::build) (a stream triad of a few milliseconds).
    pub fn bandwidth(mut self, bytes_per_second: f64) -> Self {
        self.bandwidth = Some(bytes_per_second);
        self
    }

    /// The private L2's and the last-level cache's sizes the software signals judge footprints
    /// by, instead of reading them from a topology.
    ///
    /// Without this call the sizes come from the topology of the runtime that takes the
    /// coscheduler over ([`RuntimeBuilder::coschedule`](crate::RuntimeBuilder::coschedule)), or,
    /// where none does before the sizes are first needed ([`start`](Coscheduler::start) or
    /// [`Coscheduler::caches`]), from the host's ([`Topology::detect`](elite_affinity::Topology::detect)),
    /// as [`cache_sizes`](super::cache_sizes) reads them: the L2 is the largest data cache
    /// private to a core, the last-level cache the highest-level data cache of a processor
    /// (each the smallest over the processors). A size the topology does not describe is
    /// taken as [`DEFAULT_L2`](super::DEFAULT_L2) (at most the last-level cache) or
    /// [`DEFAULT_LLC`](super::DEFAULT_LLC).
    ///
    /// ```
    /// use elite_rt::contention::{Coscheduler, Mode};
    ///
    /// let given = Coscheduler::builder(Mode::Gang).caches(1 << 20, 16 << 20).build();
    /// let _rt = elite_rt::Runtime::builder().topology("1x2, 2 MiB L2 per core").coschedule(&given).build()?;
    /// assert_eq!(given.caches(), (1 << 20, 16 << 20)); // the given sizes win over the runtime's
    ///
    /// let read = Coscheduler::builder(Mode::Gang).build();
    /// let spec = "1x2, 2 MiB L2 per core, 64 MiB L3 shared";
    /// let _rt = elite_rt::Runtime::builder().topology(spec).coschedule(&read).build()?;
    /// assert_eq!(read.caches(), (2 << 20, 64 << 20)); // the runtime's topology's
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn caches(mut self, l2_bytes: u64, llc_bytes: u64) -> Self {
        self.caches = Some((l2_bytes, llc_bytes));
        self
    }

    /// Where the signals come from (default: [`SoftwareSignals`] for the configured caches):
    /// a [`ScriptedSignals`](super::ScriptedSignals) in tests, a counter-based source where the
    /// machine has one.
    pub fn signals(mut self, source: impl SignalSource + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The coscheduler, not started.
    pub fn build(self) -> Coscheduler {
        let needs = matches!(self.mode, Mode::Lcn | Mode::MissBalance);
        let bandwidth = match self.bandwidth {
            Some(b) => b,
            None if needs => stream_bandwidth(96 << 20, Duration::from_millis(5)),
            None => 0.0,
        };
        Coscheduler {
            inner: Arc::new(Inner {
                mode: self.mode,
                quantum: self.quantum,
                cores: AtomicUsize::new(self.cores),
                runtime: OnceLock::new(),
                state: Mutex::new(State { groups: Vec::new(), plan: Vec::new() }),
                admitted: Condvar::new(),
                stop: AtomicBool::new(false),
                bandwidth,
                caches_given: self.caches.is_some(),
                caches: std::sync::Mutex::new(self.caches),
                source: std::sync::Mutex::new(self.source),
            }),
        }
    }
}

impl Coscheduler {
    /// A builder for `mode`.
    pub fn builder(mode: Mode) -> CoschedulerBuilder {
        CoschedulerBuilder {
            mode,
            quantum: Duration::from_millis(20),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            bandwidth: None,
            caches: None,
            source: None,
        }
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.inner.mode
    }

    /// The host bandwidth the thresholds use (bytes per second; 0 where the mode needs none).
    pub fn bandwidth(&self) -> f64 {
        self.inner.bandwidth
    }

    /// The private L2's and the last-level cache's sizes in bytes that the software signals
    /// judge footprints by (where [`CoschedulerBuilder::caches`] says they come from). Called
    /// before a runtime took the coscheduler over, it fixes them to the host's.
    pub fn caches(&self) -> (u64, u64) {
        self.inner.caches()
    }

    /// Adds `group`, each of whose ULTs works on at most `ult_footprint` bytes and all of whose
    /// ULTs together on `group_footprint` (shared data counted once); returns its index for
    /// [`run`](Self::run). Add every group before [`start`](Self::start). The group's class, once
    /// known, also shows in [`Runtime::stats`](crate::Runtime::stats) (`GroupStats::class`) of the
    /// runtime its ULTs run on, written at the group's first unit after it was decided.
    pub fn add_group(&self, group: &Group, ult_footprint: u64, group_footprint: u64) -> usize {
        let mut st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        let allowed = if self.inner.mode == Mode::Default { usize::MAX } else { 0 };
        st.groups.push(GroupState {
            group: group.clone(),
            published: 0,
            footprint: ult_footprint,
            group_footprint,
            allowed,
            in_use: 0,
            completions: 0,
            busy: Duration::ZERO,
            window_busy: Duration::ZERO,
            window_bytes: 0,
            window_units: 0,
            last_unit: None,
            probe: (0.0, 0.0),
            busy_mark: Duration::ZERO,
            class: None,
            signals: Signals::default(),
            reclassified: 0,
            reprobes: 0,
        });
        let index = st.groups.len() - 1;
        drop(st);
        if let Some(shared) = self.inner.shared() {
            number_in(&shared, group, index);
        }
        index
    }

    /// Takes the coscheduler over for the runtime `shared` (its gate admits the groups from
    /// now on); an error when another runtime took it already.
    pub(crate) fn attach(&self, shared: &Arc<Shared>) -> Result<(), String> {
        if self.inner.runtime.set(Arc::downgrade(shared)).is_err() {
            return Err("this coscheduler already serves another runtime".into());
        }
        if let Some(gate) = &shared.cosched {
            let cores = gate.domains().iter().map(Vec::len).max().unwrap_or(1);
            self.inner.cores.store(cores.max(1), Ordering::Relaxed);
        }
        if !self.inner.caches_given {
            let sizes = super::cache_sizes(&shared.config.topology);
            *self.inner.caches.lock().unwrap_or_else(|e| e.into_inner()) = Some(sizes);
        }
        let st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        for (index, g) in st.groups.iter().enumerate() {
            number_in(shared, &g.group, index);
        }
        Ok(())
    }

    /// One unit of group `group`'s work, moving about `bytes` bytes, completed outside
    /// [`run`](Self::run) (under a runtime's gate): counted as `run` counts it, with the busy
    /// time the runtime measures.
    pub(crate) fn count_unit(&self, group: usize, bytes: u64) {
        let st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if group < st.groups.len() {
            count(st, group, bytes);
        }
    }

    /// Runs one unit of group `group`'s work, `f`, which moves about `bytes` bytes, once the
    /// group is admitted; counts it. Call it from the group's ULTs.
    ///
    /// # Panics
    ///
    /// If `group` is not an index [`add_group`](Self::add_group) returned.
    pub fn run<R>(&self, group: usize, bytes: u64, f: impl FnOnce() -> R) -> R {
        let inner = &*self.inner;
        {
            let mut st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
            assert!(group < st.groups.len(), "no group {group}: {} groups were added", st.groups.len());
            // (Under a runtime's gate the runtime admits the ULTs; this only counts.)
            while inner.runtime.get().is_none()
                && !st.admits(group, inner.mode)
                && !inner.stop.load(Ordering::Relaxed)
            {
                st = inner.admitted.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            st.groups[group].in_use += 1;
        }
        let began = Instant::now();
        let r = f();
        let took = began.elapsed();
        let mut st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
        let g = &mut st.groups[group];
        g.in_use -= 1;
        if inner.runtime.get().is_none() {
            // (Under a runtime's gate the runtime measures the busy time: `take_window`.)
            g.busy += took;
            g.window_busy += took;
        }
        count(st, group, bytes);
        inner.admitted.notify_all();
        r
    }

    /// Starts the controller thread (nothing to do in the default mode). It runs, waking once
    /// a quantum, until [`stop`](Self::stop): stop every coscheduler you start. Under a
    /// runtime's gate ([`RuntimeBuilder::coschedule`](crate::RuntimeBuilder::coschedule)) the
    /// groups' ULTs run ungated before this, and from this on only where admitted.
    pub fn start(&self) {
        if self.inner.mode == Mode::Default {
            return;
        }
        // Under a runtime's gate: nothing is admitted until the controller's first admission,
        // so that no two groups run at once before it (held ULTs go on then).
        self.inner.admit_runtime(&[], 0);
        let inner = self.inner.clone();
        // (Ranked above the processors under a real-time policy: `crate::helper`.)
        crate::helper::spawn("elite-cosched", move || control(&inner))
            .expect("spawning the coscheduler's controller thread");
    }

    /// Stops the controller and opens every gate (waiting ULTs go on).
    pub fn stop(&self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        let mut st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        for g in &mut st.groups {
            g.allowed = usize::MAX;
        }
        drop(st);
        self.inner.admitted.notify_all();
        if let Some(shared) = self.inner.shared() {
            if let Some(gate) = &shared.cosched {
                gate.open(&*shared);
            }
        }
    }

    /// What the gate of the runtime that took this coscheduler over did so far (`None` without
    /// such a runtime, or in the default mode): ULTs sent from a processor that did not admit
    /// their group to one that did, ULTs held until their group was admitted, and ULTs held
    /// now.
    pub fn gate_stats(&self) -> Option<GateStats> {
        let shared = self.inner.shared()?;
        let (sent, held, held_now) = shared.cosched.as_ref()?.counts();
        Some(GateStats { sent, held, held_now })
    }

    /// The current plan's slots (empty before the first plan).
    pub fn plan(&self) -> Vec<Slot> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner()).plan.clone()
    }

    /// What each group did, in the order they were added.
    pub fn report(&self) -> Vec<GroupReport> {
        let shared = self.inner.shared();
        let st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        // Under a runtime's gate, the busy time is the runtime's measure.
        let busy = |g: &GroupState| match &shared {
            Some(shared) => shared.groups.number(&g.group).map_or(g.busy, |n| shared.groups.slot(n).busy()),
            None => g.busy,
        };
        st.groups
            .iter()
            .map(|g| GroupReport {
                group: g.group.clone(),
                completions: g.completions,
                busy: busy(g),
                class: g.class,
                signals: g.signals,
                reclassified: g.reclassified,
                probe: (g.probe.0 > 0.0 && g.probe.1 > 0.0).then_some(g.probe),
                reprobes: g.reprobes,
            })
            .collect()
    }
}

/// The code of `class` in the runtime's group stats (`GroupStats::class`).
fn class_code(class: Class) -> u8 {
    match class {
        Class::L => 1,
        Class::LC => 2,
        Class::C => 3,
        Class::N => 4,
    }
}

/// One unit of group `group` (an index of `st.groups`) done, moving about `bytes` bytes: counted
/// in its completions and window, and its class, once decided or changed, published into the
/// runtime's group stats (after the lock is released).
fn count(mut st: crate::sync::MutexGuard<'_, State>, group: usize, bytes: u64) {
    let g = &mut st.groups[group];
    g.completions += 1;
    g.window_bytes += bytes;
    g.window_units += 1;
    g.last_unit = Some(Instant::now());
    let code = g.class.map_or(0, class_code);
    if code != g.published {
        g.published = code;
        let group = g.group.clone();
        drop(st);
        publish_class(&group, code);
    }
}

/// Writes class code `code` into the stats slot of `group` in the runtime of the calling ULT
/// (nothing outside a runtime, or when the runtime cannot number another group).
fn publish_class(group: &Group, code: u8) {
    if let Some(p) = crate::slot::current_processor() {
        if let Ok(n) = p.shared.groups.number(group) {
            p.shared.groups.slot(n).class.store(code, crate::atomics::Ordering::Relaxed);
        }
    }
}

/// Gives group `group`, the coscheduler's `index`-th, its index in the runtime's numbering
/// (for the gate); groups beyond the gate's word, or beyond the runtime's numbering, stay
/// ungated.
fn number_in(shared: &Shared, group: &Group, index: usize) {
    if index >= super::MAX_GATED_GROUPS {
        return;
    }
    if let Ok(n) = shared.groups.number(group) {
        shared.groups.slot(n).cosched.store(index as u8 + 1, crate::atomics::Ordering::Relaxed);
    }
}

/// Counts one unit of work of the calling ULT's group, which moved about `bytes` bytes, for the
/// coscheduler of its runtime
/// ([`RuntimeBuilder::coschedule`](crate::RuntimeBuilder::coschedule)): the group's completions
/// in [`Coscheduler::report`] and the progress its classification measures. Does nothing
/// outside such a runtime, or for a ULT of no coscheduled group. Under a runtime's gate, call it
/// after each unit instead of wrapping the unit in [`Coscheduler::run`].
pub fn unit_done(bytes: u64) {
    let Some(p) = crate::slot::current_processor() else {
        return;
    };
    let Some(cs) = &p.shared.config.coschedule else {
        return;
    };
    let Some(t) = p.current_ult() else {
        return;
    };
    let group = t.tcb().head.group.get();
    if group == 0 {
        return;
    }
    let index = p.shared.groups.slot(group).cosched.load(crate::atomics::Ordering::Relaxed);
    if index > 0 {
        cs.count_unit(usize::from(index - 1), bytes);
    }
}

impl Inner {
    /// The cache sizes, the host's where nothing fixed them yet.
    fn caches(&self) -> (u64, u64) {
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        *caches.get_or_insert_with(|| super::cache_sizes(&elite_affinity::Topology::detect()))
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The runtime whose gate admits the groups, if any and still alive.
    fn shared(&self) -> Option<Arc<Shared>> {
        self.runtime.get().and_then(Weak::upgrade)
    }

    /// The cache domains the plan's slots run on at once: the runtime's gate's, else one.
    fn domains(&self) -> usize {
        self.shared()
            .and_then(|shared| shared.cosched.as_ref().map(|g| g.domains().len()))
            .unwrap_or(1)
            .max(1)
    }

    /// The runtime's gate takes slot `turn` of `plan` (domain `d` slot `turn + d`): each slot's
    /// groups get their cores' worth of the domain's processors, in order. N groups fill under
    /// LCN. Nothing without a runtime.
    fn admit_runtime(&self, plan: &[Slot], turn: usize) {
        let Some(shared) = self.shared() else {
            if self.runtime.get().is_some() {
                self.stop.store(true, Ordering::Relaxed); // (the runtime is gone)
            }
            return;
        };
        let Some(gate) = &shared.cosched else {
            return;
        };
        let mut words = vec![0u64; shared.processors.len()];
        for (d, processors) in gate.domains().iter().enumerate() {
            let Some(slot) = plan.get((turn + d) % plan.len().max(1)) else {
                continue;
            };
            let mut free = processors.iter();
            for &(group, cores) in &slot.runs {
                for &p in free.by_ref().take(cores) {
                    if group < super::MAX_GATED_GROUPS {
                        words[p] |= 1 << group;
                    }
                }
            }
        }
        // Under LCN: N groups fill idle processors, and a group need not wait for a straggler
        // of a class it may pair with.
        let (mut fill, mut compat) = (0u64, Vec::new());
        if self.mode == Mode::Lcn {
            let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let classes: Vec<Option<Class>> =
                st.groups.iter().take(super::MAX_GATED_GROUPS).map(|g| g.class).collect();
            drop(st);
            for (i, class) in classes.iter().enumerate() {
                if *class == Some(Class::N) {
                    fill |= 1 << i;
                }
                compat.push(classes.iter().enumerate().fold(0u64, |w, (j, other)| match (class, other) {
                    (Some(a), Some(b)) if a.may_pair(*b) => w | 1 << j,
                    _ => w,
                }));
            }
        }
        gate.admit(&*shared, &words, fill, &compat);
    }

    /// Gives each group `allowed` cores (groups absent from it: none) and opens the gates.
    fn admit(&self, allowed: &[(usize, usize)]) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.stopped() {
            return;
        }
        for g in &mut st.groups {
            g.allowed = 0;
        }
        for &(group, cores) in allowed {
            st.groups[group].allowed = cores;
        }
        drop(st);
        self.admitted.notify_all();
    }

    /// The probe's admission: `allowed` alone, in the first domain only (the others idle, so
    /// that the group's rate is its own).
    fn admit_probe(&self, allowed: &[(usize, usize)]) {
        self.admit(allowed);
        if self.runtime.get().is_some() {
            let mut plan = vec![Slot { runs: allowed.to_vec() }];
            if let Some(shared) = self.shared() {
                if let Some(gate) = &shared.cosched {
                    plan.extend((1..gate.domains().len()).map(|_| Slot { runs: Vec::new() }));
                }
            }
            self.admit_runtime(&plan, 0);
        }
    }

    /// Takes group `g`'s window (and resets it): (busy, bytes, units).
    fn take_window(&self, g: usize) -> (Duration, u64, u64) {
        self.take_window_at(g).0
    }

    /// [`take_window`](Self::take_window), with when the group's latest unit was counted (read
    /// under the same lock, so that the window's units are those counted up to that instant).
    fn take_window_at(&self, g: usize) -> ((Duration, u64, u64), Option<Instant>) {
        // Under a runtime's gate, the busy time is the runtime's measure of the group's runs.
        let busy_now = self.shared().and_then(|shared| {
            let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let n = shared.groups.number(&st.groups[g].group).ok()?;
            Some(shared.groups.slot(n).busy())
        });
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let g = &mut st.groups[g];
        if let Some(now) = busy_now {
            let window = now.saturating_sub(g.busy_mark);
            g.busy += window;
            g.window_busy += window;
            g.busy_mark = now;
        }
        let w = (g.window_busy, g.window_bytes, g.window_units);
        (g.window_busy, g.window_bytes, g.window_units) = (Duration::ZERO, 0, 0);
        (w, g.last_unit)
    }

    /// Units of group `g` in its window so far.
    fn window_units(&self, g: usize) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).groups[g].window_units
    }

    /// One phase of group `g`'s probe on `cores` cores, admitted already: the seconds it
    /// measured and the group's window over them (busy, bytes, units).
    ///
    /// First it waits for as many units of the group as the phase has cores, one per core
    /// where its ULTs spread over them (its ULTs finishing units begun before, starting late,
    /// or reloading their data onto the phase's cores: the first unit on a core is the
    /// slowest), for at most [`probe_patience`]: none by then, the phase ends, its window
    /// empty; fewer, it measures from there. Then it resets the group's window and measures
    /// until the group has completed [`PROBE_UNITS`] more units and a quarter of a quantum has
    /// passed, or a whole quantum once it has completed one (the patience again while it has
    /// none), so that the rate is of the group running, not of its start. A group that stops
    /// completing units so holds a phase for about twice the patience at most (each wait ends
    /// at the polling step after it). The seconds run from the completion of the last unit
    /// before the window to that of the last unit in it, so that the rate counts whole units
    /// over the time they took, not over the controller's polling steps (an eighth of a
    /// quantum, as long as a few units); with no unit in the window, the phase's length.
    fn probe_phase(&self, g: usize, cores: usize) -> (f64, (Duration, u64, u64)) {
        let step = (self.quantum / 8).max(Duration::from_micros(100));
        let patience = probe_patience(self.quantum);
        let waited = Instant::now();
        while self.window_units(g) < cores.max(1) as u64 {
            if waited.elapsed() >= patience || self.stopped() {
                if self.window_units(g) == 0 {
                    // No unit: the phase ends, its window empty.
                    return (waited.elapsed().as_secs_f64(), self.take_window(g));
                }
                break;
            }
            std::thread::sleep(step);
        }
        let (_, from) = self.take_window_at(g);
        let began = Instant::now();
        loop {
            std::thread::sleep(step);
            let (elapsed, units) = (began.elapsed(), self.window_units(g));
            let enough = units >= PROBE_UNITS && elapsed >= self.quantum / 4;
            let some = units > 0 && elapsed >= self.quantum;
            if enough || some || elapsed >= patience || self.stopped() {
                let (w, last) = self.take_window_at(g);
                return (window_seconds(from, last, w.2, elapsed), w);
            }
        }
    }

    fn sleep_quantum(&self) -> f64 {
        let began = Instant::now();
        std::thread::sleep(self.quantum);
        began.elapsed().as_secs_f64()
    }
}

/// The seconds a probe window of `units` units measured: from `from`, when the last unit
/// before the window was counted, to `last`, when the last one in it was (whole units over the
/// time they took); `elapsed`, the window's length as polled, where the window holds no unit or
/// either instant is missing.
fn window_seconds(from: Option<Instant>, last: Option<Instant>, units: u64, elapsed: Duration) -> f64 {
    match (from, last) {
        (Some(from), Some(last)) if units > 0 && last > from => (last - from).as_secs_f64(),
        _ => elapsed.as_secs_f64(),
    }
}

/// The units a phase of a group's probe waits for before it may end ahead of its quantum
/// (`Inner::probe_phase`): enough for a rate, few enough that the phase on one core, which
/// leaves the domain's other processors idle, stays short.
const PROBE_UNITS: u64 = 4;

/// How long a phase of a group's probe waits for a unit of the group before it gives up (the
/// group then runs alone until a window of the plan classifies it): 10 quanta, and at least
/// 100 ms, for a machine so busy that the runtime's threads wait tens of milliseconds for a CPU.
fn probe_patience(quantum: Duration) -> Duration {
    (quantum * 10).max(Duration::from_millis(100))
}

/// Plan rounds (the plan's slots, a quantum each) a group waits under LCN before its first
/// re-probe, and again after a re-probe that changed its class or its predicted cores.
const REPROBE_ROUNDS: usize = 2;

/// The most plan rounds between two re-probes of a group: each re-probe that confirms the
/// group's class and predicted cores doubles the wait, up to this.
const REPROBE_MAX_ROUNDS: usize = 32;

/// When a group is probed again under LCN (a group of class LC or C, whose predicted cores
/// follow from its probe's scaling, that the plan gives fewer cores than the domain has): after
/// [`REPROBE_ROUNDS`] rounds of the plan; then twice as long after each re-probe that confirms
/// its class and predicted cores (at most [`REPROBE_MAX_ROUNDS`]), and [`REPROBE_ROUNDS`] again
/// after one that changes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reprobe {
    /// The rounds the next wait lasts.
    rounds: usize,
    /// The quantum of the plan from which the re-probe is due (`None`: none is waited for).
    due: Option<usize>,
}

impl Reprobe {
    const fn new() -> Reprobe {
        Reprobe { rounds: REPROBE_ROUNDS, due: None }
    }

    /// The group needs a re-probe: due `rounds` rounds of a plan of `slots` slots after quantum
    /// `now`, unless one is due already.
    fn wait(&mut self, now: usize, slots: usize) {
        if self.due.is_none() {
            self.due = Some(now + self.rounds * slots.max(1));
        }
    }

    /// The group needs none (the plan gives it every core, or its cores do not follow from a
    /// probe): none is due; the back-off stays.
    fn cancel(&mut self) {
        self.due = None;
    }

    /// Whether the re-probe is due at quantum `now`.
    fn is_due(&self, now: usize) -> bool {
        self.due.is_some_and(|due| now >= due)
    }

    /// A re-probe ran at quantum `now`: `confirmed`, it found the class and the predicted cores
    /// of before (the wait doubles), else they changed (the wait starts again); the next is due
    /// after that wait.
    fn done(&mut self, now: usize, slots: usize, confirmed: bool) {
        self.rounds = if confirmed { (self.rounds * 2).min(REPROBE_MAX_ROUNDS) } else { REPROBE_ROUNDS };
        self.due = None;
        self.wait(now, slots);
    }
}

/// Group `g`'s probe: alone on `cores.min(2)` cores, then alone on one, each phase measured by
/// `Inner::probe_phase`. Its units per second on one core and on two, and its window alone on
/// one core (busy, bytes, units); `None` once the coscheduler stopped.
///
/// Two cores first: the group's ULTs are held when its probe begins (no admission before it
/// admitted the group), and the gate releases held ULTs to the processors that admit them in
/// turn, so both processors run the group at once; after the one-core phase both ULTs would
/// wait in that processor's queue, and the other processor would run the group only once it
/// stole one (it often did not for the whole phase, and the two-core rate then read as the
/// one-core rate).
fn probe(inner: &Inner, g: usize, cores: usize) -> Option<([f64; 2], (Duration, u64, u64))> {
    let mut rates = [0.0; 2];
    let mut alone = (Duration::ZERO, 0, 0);
    for (i, cores) in [(1, cores.min(2)), (0, 1)] {
        inner.admit_probe(&[(g, cores)]);
        let _ = inner.take_window(g);
        let (secs, w) = inner.probe_phase(g, cores);
        rates[i] = w.2 as f64 / secs;
        if i == 0 {
            alone = w;
        }
        if inner.stopped() {
            return None;
        }
    }
    Some((rates, alone))
}

/// Group `g`'s window `w` seen: its signals from `source` (its latest, in `latest` and the
/// report), and the class `classifier` gives it, counted as a re-classification when it
/// changes a class given before. Whether the class changed (or was given first).
fn observe(
    inner: &Inner,
    source: &mut dyn SignalSource,
    classifier: &mut Classifier,
    latest: &mut Signals,
    w: &Window,
) -> bool {
    let s = source.signals(w);
    *latest = s;
    let changed = classifier.observe(w.group, &s);
    let mut st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
    let g = &mut st.groups[w.group];
    g.signals = s;
    if let Some(class) = changed {
        if g.class.is_some() {
            g.reclassified += 1;
        }
        g.class = Some(class);
    }
    changed.is_some()
}

/// The controller: probe, classify and plan where the mode needs it, then turn the slots;
/// under LCN, probe again a group whose predicted cores may have come from a bad reading.
fn control(inner: &Inner) {
    let n = inner.state.lock().unwrap_or_else(|e| e.into_inner()).groups.len();
    let cores = inner.cores.load(Ordering::Relaxed);
    let mut classifier = Classifier::new(Thresholds::seed(inner.bandwidth));
    let mut source: Box<dyn SignalSource> =
        match inner.source.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(s) => s,
            None => {
                let (l2, llc) = inner.caches();
                Box::new(SoftwareSignals::new(l2, llc))
            }
        };
    let classify = matches!(inner.mode, Mode::Lcn | Mode::MissBalance);
    let mut latest = vec![Signals::default(); n];
    // Group `g`'s window of (busy, bytes, units), with its footprints and its latest probe's
    // rates.
    let window = |g: usize, (busy, bytes, _): (Duration, u64, u64)| {
        let st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
        let gs = &st.groups[g];
        let (footprint, group_footprint, probe) = (gs.footprint, gs.group_footprint, Some(gs.probe));
        Window { group: g, busy, bytes, footprint, group_footprint, probe }
    };
    if classify {
        // The probe (`probe`): each group alone on two cores, then on one, each phase measured
        // from the group's first unit on each of its cores until it has seen a few more, in
        // whole units (`Inner::probe_phase`); its first signals from the window alone on one
        // core (the seed's Mem_1).
        for (g, latest) in latest.iter_mut().enumerate() {
            let Some((rates, alone)) = probe(inner, g, cores) else {
                return;
            };
            inner.state.lock().unwrap_or_else(|e| e.into_inner()).groups[g].probe = (rates[0], rates[1]);
            if alone.2 > 0 {
                observe(inner, &mut *source, &mut classifier, latest, &window(g, alone));
            }
        }
    }
    // Under LCN, the re-probes (`Reprobe`): the probe is one short reading, and a scaling read
    // too high would give an LC or C group fewer cores for the whole run.
    let reprobing = inner.mode == Mode::Lcn && cores >= 2;
    let mut reprobe = vec![Reprobe::new(); n];
    // The groups of the slots that ran in the last quantum, in any domain.
    let mut ran: Vec<usize> = Vec::new();
    let domains = inner.domains();
    let mut plan = Vec::new();
    let mut replan = true;
    let mut turn = 0usize;
    // Quanta of the plan so far (every plan's).
    let mut quanta = 0usize;
    while !inner.stopped() {
        if replan {
            let members = if classify {
                let pairs: Vec<(usize, Signals)> = latest.iter().copied().enumerate().collect();
                classifier.members(&pairs, cores)
            } else {
                (0..n).map(|group| super::Member { group, class: Class::N, cores, intensity: 0.0 }).collect()
            };
            plan = match inner.mode {
                Mode::Lcn => pair_lcn(&members, cores),
                Mode::MissBalance => miss_balance(&members, cores),
                _ => gang(&members, cores),
            };
            // A group not classified yet (its probe saw no unit: the machine was busy, or it
            // had not started) runs alone on every core until a window classifies it: planned
            // as anything, it could meet a group it must not.
            if classify {
                for group in (0..n).filter(|&g| classifier.class(g).is_none()) {
                    plan.push(Slot { runs: vec![(group, cores)] });
                }
            }
            inner.state.lock().unwrap_or_else(|e| e.into_inner()).plan = plan.clone();
            replan = false;
            turn = 0;
        }
        if reprobing {
            for (g, r) in reprobe.iter_mut().enumerate() {
                let from_probe = matches!(classifier.class(g), Some(Class::LC | Class::C));
                // The most cores the plan gives the group in a slot (0: none); read only for
                // the groups whose cores came from a probe.
                let given = || plan.iter().flat_map(|s| &s.runs).filter(|r| r.0 == g).map(|r| r.1).max();
                if from_probe && given().is_some_and(|c| c > 0 && c < cores) {
                    r.wait(quanta, plan.len());
                } else {
                    r.cancel();
                }
            }
            // A group due whose ULTs are held now (it ran in no slot of the last quantum, unless
            // it runs in every slot), so that the probe's two-core phase spreads them.
            let everywhere = |g: usize| plan.iter().all(|s| s.groups().any(|x| x == g));
            let due = (0..n).find(|&g| reprobe[g].is_due(quanta) && (!ran.contains(&g) || everywhere(g)));
            if let Some(g) = due {
                let predicted = |classifier: &Classifier, s: &Signals| {
                    let class = classifier.class(g);
                    (class, class.map(|c| super::predict_cores(c, s, classifier.thresholds(), cores)))
                };
                let before = predicted(&classifier, &latest[g]);
                let Some((rates, alone)) = probe(inner, g, cores) else {
                    return;
                };
                ran = vec![g];
                let measured = rates[0] > 0.0 && rates[1] > 0.0;
                {
                    let mut st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
                    st.groups[g].reprobes += 1;
                    if measured {
                        st.groups[g].probe = (rates[0], rates[1]);
                    }
                }
                let mut confirmed = true;
                if alone.2 > 0 && measured {
                    observe(inner, &mut *source, &mut classifier, &mut latest[g], &window(g, alone));
                    confirmed = predicted(&classifier, &latest[g]) == before;
                }
                reprobe[g].done(quanta, plan.len(), confirmed);
                if !confirmed {
                    replan = true;
                    continue;
                }
            }
        }
        if let Some(slot) = plan.get(turn % plan.len().max(1)) {
            inner.admit(&slot.runs);
        }
        inner.admit_runtime(&plan, turn);
        ran = (0..domains)
            .filter_map(|d| plan.get((turn + d) % plan.len().max(1)))
            .flat_map(|s| s.groups())
            .collect();
        if classify {
            for g in 0..n {
                let _ = inner.take_window(g);
            }
        }
        inner.sleep_quantum();
        if classify {
            // Every group that ran this quantum: its signals, perhaps a new class.
            for (g, latest) in latest.iter_mut().enumerate() {
                let (busy, bytes, units) = inner.take_window(g);
                if units == 0 {
                    continue;
                }
                if observe(inner, &mut *source, &mut classifier, latest, &window(g, (busy, bytes, units))) {
                    replan = true;
                }
            }
        }
        turn += 1;
        quanta += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reprobe_backs_off_while_it_confirms_and_starts_over_when_it_changes() {
        let mut r = Reprobe::new();
        assert!(!r.is_due(usize::MAX)); // not waiting
        r.wait(10, 5); // 2 rounds of a 5-slot plan
        assert!(!r.is_due(19) && r.is_due(20));
        r.wait(15, 5); // waiting already: unchanged
        assert_eq!(r.due, Some(20));
        let mut at = 20;
        for rounds in [4, 8, 16, 32, 32] {
            r.done(at, 5, true); // confirmed: twice the wait, at most 32 rounds
            assert_eq!(r.due, Some(at + rounds * 5));
            at += rounds * 5;
        }
        r.done(at, 5, false); // changed: 2 rounds again
        assert_eq!(r.due, Some(at + 10));
        r.cancel(); // given every core: none due, the back-off kept
        assert!(!r.is_due(usize::MAX));
        r.wait(at, 3);
        assert_eq!(r.due, Some(at + 6));
    }

    #[test]
    fn a_probe_window_counts_the_time_between_unit_completions() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        // Four units completed between the one at t and the last at t + 7 ms, polled 10 ms
        // after the window began: 7 ms, not the polling's 10.
        assert_eq!(window_seconds(Some(t), Some(t + ms(7)), 4, ms(10)), 0.007);
        // No unit in the window, or no instant to measure from: the polled length.
        assert_eq!(window_seconds(Some(t), Some(t + ms(7)), 0, ms(10)), 0.010);
        assert_eq!(window_seconds(None, Some(t + ms(7)), 4, ms(10)), 0.010);
        assert_eq!(window_seconds(Some(t), None, 4, ms(10)), 0.010);
        // The last unit no later than the first: the polled length.
        assert_eq!(window_seconds(Some(t + ms(7)), Some(t), 4, ms(10)), 0.010);
    }
}
