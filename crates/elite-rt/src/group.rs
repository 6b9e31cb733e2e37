//! Groups of ULTs: named sets of ULTs that share data or form one application ([`Group`]).
//!
//! A ULT belongs to at most one group, fixed at its spawn: the group its [`Builder`](crate::Builder) names
//! ([`Builder::group`](crate::Builder::group)), else its spawner's (a ULT spawned by a grouped
//! ULT is grouped with it; one spawned from outside the runtime is in none). What the runtime
//! does with groups: [`Runtime::stats`](crate::Runtime::stats) counts per group
//! ([`GroupStats`]), and a policy with [`aggregate`](crate::policy::Policy::aggregate) runs the
//! ULTs of one group back to back while its data is cached (`docs/cosched.md` in the
//! repository).
//!
//! # Where things live
//!
//! * The [`Group`] is the user's handle: a name and an id, shared (`Arc`) by its clones.
//! * Each runtime numbers the groups it has seen, 1 up, in its `Groups` table, at the first
//!   spawn into each (a lock, on the spawn path of a builder that names a group only). A TCB
//!   carries its group's number in the head line (`Head::group`, 0: none); the number is
//!   written by the spawner before the spawn is published, so whoever runs the ULT reads it
//!   after the start-queue's acquire.
//! * Per group and processor: the counters of [`GroupStats`], written only by that processor
//!   (relaxed load and store; the snapshot sums them with relaxed loads, each value one the
//!   counter had). Slots are never freed before the runtime: a TCB's number stays valid.

use crate::atomics::{AtomicU64, AtomicU8, Ordering};
use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// A named set of ULTs that share data or form one application.
///
/// Cheap to clone (a shared pointer); clones are the same group (equal, same [`id`](Self::id)).
/// Give it to [`Builder::group`](crate::Builder::group); a ULT spawned by a grouped ULT joins its
/// spawner's group unless its builder names another. [`Thread::group`](crate::Thread::group)
/// tells the group of a ULT, and [`RuntimeStats::groups`](crate::RuntimeStats::groups) what each
/// group did.
///
/// ```
/// use elite_rt::{Builder, Group};
///
/// let rt = elite_rt::Runtime::builder().processors(1).build()?;
/// let db = Group::new("db");
/// let names = rt.block_on(|| {
///     Builder::new()
///         .group(&db)
///         .spawn(|| {
///             // A child joins its spawner's group.
///             let child = elite_rt::spawn(|| elite_rt::current().group().map(|g| g.name().to_owned()));
///             (elite_rt::current().group(), child.join().unwrap())
///         })
///         .unwrap()
///         .join()
///         .unwrap()
/// });
/// assert_eq!(names, (Some(db.clone()), Some("db".to_owned())));
/// let stats = rt.stats();
/// let db_stats = stats.groups.iter().find(|s| s.group == db).unwrap();
/// assert!(db_stats.runs >= 2); // the parent and its child ran at least once each
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Group {
    inner: Arc<Inner>,
}

struct Inner {
    id: u64,
    name: Box<str>,
}

impl Group {
    /// A new group named `name` (names need not be unique: the [`id`](Self::id) tells groups
    /// apart).
    pub fn new(name: impl Into<String>) -> Group {
        static IDS: StdAtomicU64 = StdAtomicU64::new(1);
        let id = IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Group { inner: Arc::new(Inner { id, name: name.into().into_boxed_str() }) }
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The group's id: unique in the process, 1 up in the order the groups were made.
    pub fn id(&self) -> u64 {
        self.inner.id
    }
}

impl PartialEq for Group {
    fn eq(&self, other: &Group) -> bool {
        self.inner.id == other.inner.id
    }
}

impl Eq for Group {}

impl Hash for Group {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.id.hash(state);
    }
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group").field("id", &self.inner.id).field("name", &self.name()).finish()
    }
}

impl fmt::Display for Group {
    /// The group's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the ULTs of one group did since the runtime started ([`RuntimeStats::groups`](crate::RuntimeStats::groups)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupStats {
    /// The group.
    pub group: Group,
    /// Runs of its ULTs (each resumption of one of them, from a switch in to the next switch out).
    pub runs: u64,
    /// Time its ULTs ran, summed over their runs (wall-clock time from each switch in to the
    /// switch out, which includes time the OS thread was descheduled meanwhile).
    pub busy: Duration,
    /// Runs of its ULTs on another processor than their previous run's.
    pub migrations: u64,
    /// Runs of its ULTs that the aggregation modifier ordered ahead
    /// ([`Policy::aggregate`](crate::policy::Policy::aggregate)): they entered a runqueue with
    /// the bonus.
    pub aggregated: u64,
    /// The group's contention class, where the runtime classifies groups; `None` until then.
    pub class: Option<&'static str>,
}

/// The most groups one runtime numbers (the TCB keeps the number in 16 bits, 0 for none).
pub const MAX_GROUPS: usize = u16::MAX as usize;

/// Slots per chunk of the table.
const CHUNK: usize = 64;

/// One group's slot in a runtime.
pub(crate) struct Slot {
    pub(crate) group: Group,
    /// Per processor, written only by it.
    counters: Box<[CachePadded<Counters>]>,
    /// The contention class's code, 0 for none (written by the classifier, read by the stats).
    pub(crate) class: AtomicU8,
    /// Its index in the runtime's coscheduler plus one, 0 for none (`contention::gate`; written
    /// when the group is added to the coscheduler or the coscheduler to the runtime).
    pub(crate) cosched: AtomicU8,
}

#[derive(Default)]
struct Counters {
    runs: AtomicU64,
    busy_ns: AtomicU64,
    migrations: AtomicU64,
    aggregated: AtomicU64,
}

/// Adds `n` to a counter only its processor writes.
#[inline]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl Slot {
    /// A run of one of the group's ULTs ended on `processor` after `busy`; it ran on another
    /// processor before when `migrated`. Only `processor`'s thread calls it.
    #[inline]
    pub(crate) fn ran(&self, processor: usize, busy: Duration, migrated: bool) {
        let c = &self.counters[processor];
        bump(&c.runs, 1);
        bump(&c.busy_ns, busy.as_nanos() as u64);
        if migrated {
            bump(&c.migrations, 1);
        }
    }

    /// One of the group's ULTs entered `processor`'s runqueue with the aggregation bonus. Only
    /// `processor`'s thread calls it.
    #[inline]
    pub(crate) fn aggregated(&self, processor: usize) {
        bump(&self.counters[processor].aggregated, 1);
    }

    /// The busy time of the group's runs so far, over every processor.
    pub(crate) fn busy(&self) -> Duration {
        Duration::from_nanos(
            self.counters.iter().map(|c| c.busy_ns.load(Ordering::Relaxed)).fold(0u64, u64::wrapping_add),
        )
    }

    fn stats(&self) -> GroupStats {
        let sum = |f: fn(&Counters) -> &AtomicU64| {
            self.counters.iter().map(|c| f(c).load(Ordering::Relaxed)).fold(0u64, u64::wrapping_add)
        };
        GroupStats {
            group: self.group.clone(),
            runs: sum(|c| &c.runs),
            busy: Duration::from_nanos(sum(|c| &c.busy_ns)),
            migrations: sum(|c| &c.migrations),
            aggregated: sum(|c| &c.aggregated),
            class: class_name(self.class.load(Ordering::Relaxed)),
        }
    }
}

/// The name of a contention class's code (0: unclassified).
fn class_name(code: u8) -> Option<&'static str> {
    match code {
        0 => None,
        1 => Some("L"),
        2 => Some("LC"),
        3 => Some("C"),
        4 => Some("N"),
        _ => Some("?"),
    }
}

/// [`CHUNK`] slots of the table, made when the first of them is numbered.
type Chunk = OnceLock<Box<[OnceLock<Slot>]>>;

/// A runtime's groups, numbered 1 up (see the module docs).
pub(crate) struct Groups {
    chunks: Box<[Chunk]>,
    /// Group id to number; the lock orders the numbering.
    numbers: Mutex<HashMap<u64, u16>>,
    processors: usize,
}

/// Too many groups for one runtime.
#[derive(Debug)]
pub(crate) struct TooManyGroups;

impl Groups {
    pub(crate) fn new(processors: usize) -> Groups {
        Groups {
            chunks: (0..MAX_GROUPS.div_ceil(CHUNK) + 1).map(|_| OnceLock::new()).collect(),
            numbers: Mutex::new(HashMap::new()),
            processors,
        }
    }

    /// The number of `group` in this runtime, given it at its first use.
    pub(crate) fn number(&self, group: &Group) -> Result<u16, TooManyGroups> {
        let mut numbers = self.numbers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&n) = numbers.get(&group.id()) {
            return Ok(n);
        }
        let n = numbers.len() + 1;
        if n > MAX_GROUPS {
            return Err(TooManyGroups);
        }
        let chunk = self.chunks[n / CHUNK].get_or_init(|| (0..CHUNK).map(|_| OnceLock::new()).collect());
        let slot = Slot {
            group: group.clone(),
            counters: (0..self.processors).map(|_| CachePadded::new(Counters::default())).collect(),
            class: AtomicU8::new(0),
            cosched: AtomicU8::new(0),
        };
        let _ = chunk[n % CHUNK].set(slot);
        numbers.insert(group.id(), n as u16);
        Ok(n as u16)
    }

    /// The slot of group number `n` (not 0), numbered before any TCB carried it.
    #[inline]
    pub(crate) fn slot(&self, n: u16) -> &Slot {
        let n = usize::from(n);
        match self.chunks[n / CHUNK].get().and_then(|c| c[n % CHUNK].get()) {
            Some(slot) => slot,
            None => crate::fatal("a ULT carries a group number its runtime never gave"),
        }
    }

    /// Every group's counters, in the order the runtime first saw them.
    pub(crate) fn stats(&self) -> Vec<GroupStats> {
        let count = self.numbers.lock().unwrap_or_else(|e| e.into_inner()).len();
        (1..=count).map(|n| self.slot(n as u16).stats()).collect()
    }
}
