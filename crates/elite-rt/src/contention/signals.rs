//! Where a group's [`Signals`] come from: a [`SignalSource`], fed one [`Window`] of the group's
//! behaviour at a time.

use super::Signals;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What the runtime saw of one group over one observation window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Window {
    /// The caller's index of the group.
    pub group: usize,
    /// Time the group's ULTs ran in the window, summed over processors.
    pub busy: Duration,
    /// Bytes the group's ULTs declared they move in the window (each run's declared footprint,
    /// [`Builder::footprint`](crate::Builder::footprint) or
    /// [`set_footprint`](crate::set_footprint), summed over the runs).
    pub bytes: u64,
    /// The largest footprint one of its ULTs declared, in bytes: what one core's private caches
    /// must hold between its runs.
    pub footprint: u64,
    /// The data of all its ULTs together, in bytes (shared data counted once): what the
    /// last-level cache must hold while the group runs.
    pub group_footprint: u64,
    /// The group's progress per second on one processor and on two, where a probe measured
    /// both (`(one, two)`).
    pub probe: Option<(f64, f64)>,
}

/// A source of [`Signals`]: hardware counters, software estimates, or a script.
pub trait SignalSource: Send {
    /// The signals of the window `w`.
    fn signals(&mut self, w: &Window) -> Signals;

    /// `"software"`, `"scripted"`, ...
    fn name(&self) -> &'static str;
}

/// Signals from a script, per group: each window of a group takes the next entry of its list,
/// the last entry repeating. Reproduces the decision tree (and re-classification) in tests.
///
/// ```
/// use elite_rt::contention::{ScriptedSignals, SignalSource, Signals, Window};
///
/// let stream = Signals { memory: 6e9, llc: 6e9, l2: 6e9, scaling2: None };
/// let mut s = ScriptedSignals::new().group(0, [stream, Signals::default()]);
/// let w = Window { group: 0, ..Window::default() };
/// assert_eq!(s.signals(&w), stream);
/// assert_eq!(s.signals(&w), Signals::default());
/// assert_eq!(s.signals(&w), Signals::default()); // the last repeats
/// assert_eq!(s.signals(&Window { group: 9, ..w }), Signals::default()); // none scripted
/// ```
#[derive(Clone, Debug, Default)]
pub struct ScriptedSignals {
    script: HashMap<usize, (Vec<Signals>, usize)>,
}

impl ScriptedSignals {
    /// An empty script: every group's signals are all zero (class N).
    pub fn new() -> ScriptedSignals {
        ScriptedSignals::default()
    }

    /// Group `group`'s windows take `signals` in turn.
    pub fn group(mut self, group: usize, signals: impl IntoIterator<Item = Signals>) -> ScriptedSignals {
        self.script.insert(group, (signals.into_iter().collect(), 0));
        self
    }
}

impl SignalSource for ScriptedSignals {
    fn signals(&mut self, w: &Window) -> Signals {
        match self.script.get_mut(&w.group) {
            Some((list, next)) if !list.is_empty() => {
                let s = list[(*next).min(list.len() - 1)];
                *next += 1;
                s
            }
            _ => Signals::default(),
        }
    }

    fn name(&self) -> &'static str {
        "scripted"
    }
}

/// Signals a machine without a PMU can estimate from what ULTs declare: the bytes a window's
/// runs declared, over its busy time, are the group's traffic per core-second; where that
/// traffic is served follows from the declared footprints against the cache sizes (the group's
/// data beyond the last-level cache: memory; one ULT's beyond the L2: the last-level cache;
/// else the L2). The
/// one-versus-two probe gives the scaling.
///
/// How far to trust it: the traffic is what the program says, not what it does (an
/// undeclared or wrong footprint misclassifies, and hardware prefetching, reuse inside a
/// run and sharing between a group's ULTs are invisible), and busy time is wall-clock time
/// (load from other processes inflates it, deflating the traffic). The probe measures real
/// progress but over a short window, under whatever else the machine runs.
///
/// ```
/// use elite_rt::contention::{classify, Class, SignalSource, SoftwareSignals, Thresholds, Window};
/// use std::time::Duration;
///
/// let mut s = SoftwareSignals::new(512 << 10, 32 << 20);
/// let t = Thresholds::seed(15e9); // g = 5.25 GB/s
/// // 64 MiB streamed in 10 ms per core: 6.7 GB/s from memory.
/// let triad = Window {
///     busy: Duration::from_millis(10),
///     bytes: 64 << 20,
///     footprint: 24 << 20,
///     group_footprint: 48 << 20,
///     ..Window::default()
/// };
/// assert_eq!(classify(&s.signals(&triad), &t), Class::L);
/// // A 4 MiB stencil swept 20 times in 10 ms: served by the L3.
/// let stencil = Window { bytes: 80 << 20, footprint: 4 << 20, group_footprint: 8 << 20, ..triad };
/// assert_eq!(classify(&s.signals(&stencil), &t), Class::C);
/// // A spin that declares nothing.
/// assert_eq!(classify(&s.signals(&Window::default()), &t), Class::N);
/// ```
#[derive(Clone, Debug)]
pub struct SoftwareSignals {
    l2: u64,
    llc: u64,
}

impl SoftwareSignals {
    /// For a host whose private L2 holds `l2_bytes` and whose last-level cache `llc_bytes`.
    pub fn new(l2_bytes: u64, llc_bytes: u64) -> SoftwareSignals {
        SoftwareSignals { l2: l2_bytes, llc: llc_bytes.max(l2_bytes) }
    }
}

impl SignalSource for SoftwareSignals {
    fn signals(&mut self, w: &Window) -> Signals {
        let secs = w.busy.as_secs_f64();
        let rate = if secs > 0.0 { w.bytes as f64 / secs } else { 0.0 };
        let scaling2 = w.probe.and_then(|(one, two)| (one > 0.0 && two > 0.0).then(|| one / two));
        let (memory, llc) = if w.group_footprint.max(w.footprint) > self.llc {
            (rate, rate)
        } else if w.footprint > self.l2 {
            (0.0, rate)
        } else {
            (0.0, 0.0)
        };
        Signals { memory, llc, l2: rate, scaling2 }
    }

    fn name(&self) -> &'static str {
        "software"
    }
}

/// The private L2's size [`cache_sizes`] takes where a topology describes no cache private to a
/// core (at most the last-level cache's size): 512 KiB.
pub const DEFAULT_L2: u64 = 512 << 10;

/// The last-level cache's size [`cache_sizes`] takes where a topology describes no data cache:
/// 32 MiB.
pub const DEFAULT_LLC: u64 = 32 << 20;

/// The sizes in bytes of the private L2 and of the last-level cache of `topology`, as the
/// [`Coscheduler`](super::Coscheduler)'s software signals judge footprints by them
/// (`(l2, llc)`).
///
/// The last-level cache is each processor's highest-level data (or unified) cache, the
/// smallest such over the processors; the L2 is the largest data cache private to a processor's
/// core below that level, the smallest such over the processors. Where the topology describes
/// no data cache the last-level cache is [`DEFAULT_LLC`]; where it describes no private cache
/// below the last level the L2 is [`DEFAULT_L2`] (or the last-level cache's size where that is
/// smaller).
///
/// ```
/// use elite_affinity::Topology;
/// use elite_rt::contention::{cache_sizes, DEFAULT_L2, DEFAULT_LLC};
///
/// let xeon = Topology::synthetic("1x4, 48 KiB L1d per core, 2 MiB L2 per core, 300 MiB L3 shared")?;
/// assert_eq!(cache_sizes(&xeon), (2 << 20, 300 << 20));
/// // Two SMT threads of one core: the L3 is theirs alone, but still the last level.
/// let siblings = Topology::synthetic("1 core x 2 threads, 2 MiB L2 per core, 300 MiB L3 shared")?;
/// assert_eq!(cache_sizes(&siblings), (2 << 20, 300 << 20));
/// let bare = Topology::synthetic("1x4")?;
/// assert_eq!(cache_sizes(&bare), (DEFAULT_L2, DEFAULT_LLC));
/// let shared_only = Topology::synthetic("1x4, 256 KiB L2 shared")?;
/// assert_eq!(cache_sizes(&shared_only), (256 << 10, 256 << 10));
/// # Ok::<(), elite_affinity::TopologyError>(())
/// ```
pub fn cache_sizes(topology: &elite_affinity::Topology) -> (u64, u64) {
    use elite_affinity::{CacheInfo, CacheKind};
    let data = |p: usize| topology.caches_of(p).filter(|c| c.kind != CacheKind::Instruction);
    let processors = 0..topology.num_processors();
    let last = |p: usize| data(p).max_by_key(|c| (c.level, c.size));
    let llc = processors.clone().filter_map(last).map(|c| c.size).min();
    let private = |p: usize, c: &CacheInfo| {
        let core = topology.processor(p).core;
        c.processors.iter().all(|&q| topology.processor(q).core == core)
    };
    let l2 = processors
        .filter_map(|p| {
            let top = last(p)?.level;
            data(p).filter(|c| c.level < top && private(p, c)).map(|c| c.size).max()
        })
        .min();
    let llc = llc.unwrap_or(DEFAULT_LLC);
    let l2 = l2.unwrap_or(DEFAULT_L2.min(llc));
    (l2, llc.max(l2))
}

/// The host's memory bandwidth in bytes per second, measured by a stream triad
/// (`a[i] = b[i] + s x c[i]`) over three arrays of `bytes / 3` each, repeated for at least
/// `at_least` on the calling thread: one core's bandwidth, the seed's `Mem_1` scale. Pass
/// arrays well beyond the last-level cache (the runtime uses 3 x 32 MiB and a few
/// milliseconds). The figure is a single sample under whatever else runs: treat it as an
/// estimate within tens of percent.
pub fn stream_bandwidth(bytes: usize, at_least: Duration) -> f64 {
    let n = (bytes / 3 / std::mem::size_of::<f64>()).max(1);
    let b = vec![1.0f64; n];
    let c = vec![2.0f64; n];
    let mut a = vec![0.0f64; n];
    // One sweep untimed: the first touch of `a`'s pages (page faults) is no bandwidth.
    for ((a, b), c) in a.iter_mut().zip(&b).zip(&c) {
        *a = b + 2.0 * c;
    }
    let start = Instant::now();
    let mut sweeps = 0u64;
    loop {
        let s = 3.0 + sweeps as f64;
        for ((a, b), c) in a.iter_mut().zip(&b).zip(&c) {
            *a = b + s * c;
        }
        std::hint::black_box(&mut a);
        sweeps += 1;
        if start.elapsed() >= at_least {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    // Two arrays read and one written each sweep.
    (3 * n * std::mem::size_of::<f64>()) as f64 * sweeps as f64 / secs
}
