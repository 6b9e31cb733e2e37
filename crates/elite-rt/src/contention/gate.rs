//! The runtime's own gate for a [`Coscheduler`](super::Coscheduler) given to
//! [`RuntimeBuilder::coschedule`](crate::RuntimeBuilder::coschedule): which coscheduled groups
//! each processor may run now, and the ULTs held back meanwhile.
//!
//! # The protocol
//!
//! Each processor has a word, `admitted[p]`: bit `i` set means the `i`-th group added to the
//! coscheduler may run on `p`. A second word, `fill`, has the bits of the groups that may also
//! run on a processor that has nothing else to run (N groups under LCN). The controller thread
//! writes the words once a quantum ([`Gate::admit`]); processors read them.
//!
//! A processor about to resume a ULT of coscheduled group `i` (in the copy of its loop that
//! runs grouped ULTs, `processor/cosched.rs`) reads its word. Admitted: it runs the ULT. Not
//! admitted: it sends the ULT to a processor whose word admits `i`, or, where none does, holds it
//! in the gate's list for `i`. The choice between sending and holding is made under the gate's
//! lock, and the controller writes the words under that lock too, before it releases the lists
//! of the groups the new words admit: a ULT is therefore either sent to a processor that admitted
//! its group when the lock was held, or held in a list that the next [`Gate::admit`] admitting its
//! group empties. Nothing is lost: a held ULT is in exactly one list and leaves it once, into
//! one wake-up stack; a processor that reads a stale word only sends or holds a ULT that it could
//! have run, or runs one for at most one more run (the words are hints outside the lock, as a
//! quantum takes effect at switch points anyway).
//!
//! At shutdown the gate closes first: the controller's later [`Gate::admit`] calls do nothing,
//! and the held ULTs are cancelled with every other unfinished ULT (the shutdown walks all
//! TCBs).
//!
//! When the coscheduler stops, the gate opens for good ([`Gate::open`]): every processor admits
//! every group, the held ULTs go back to the processors, and the controller's later admissions
//! do nothing either (it may have read the stop flag just before the stop, and an admission
//! after the opening would hold ULTs that nothing releases any more).
//!
//! The gate is generic over what it holds (`T`: a `TcbRef` in the runtime) and over where it
//! hands the ULTs it lets go ([`Dispatch`]: the runtime's `Shared`), so that its loom model
//! (`loom_models/gate.rs`) runs this very code on loom's atomics and `Mutex`.

use crate::atomics::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
use crate::runtime::Shared;
#[cfg(not(loom))]
use crate::tcb::TcbRef;
#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use std::sync::Mutex;

/// The most groups one runtime's gate can tell apart (bits of a word); groups added to the
/// coscheduler beyond these run ungated.
pub const MAX_GATED_GROUPS: usize = 64;

/// What [`Gate::enter`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Run the ULT.
    Run,
    /// The processor does not admit the ULT's group: send or hold it.
    Refused,
    /// Admitted, but a straggler of another quantum still runs in the domain: try again soon.
    Wait,
}

/// Where the gate hands the ULTs it lets go (the runtime's `Shared`; a loom model's record).
pub(crate) trait Dispatch<T> {
    /// A processor sends `t`, refused by its own word, to processor `q` (outside the gate's lock).
    fn send(&self, t: T, q: usize);
    /// The controller releases the held ULTs an admission admits, each to its processor
    /// (outside the gate's lock; never empty).
    fn release(&self, batch: Vec<(T, usize)>);
}

#[cfg(not(loom))]
impl Dispatch<TcbRef> for Shared {
    fn send(&self, t: TcbRef, q: usize) {
        self.wake_remote(t, q);
    }

    fn release(&self, batch: Vec<(TcbRef, usize)>) {
        let _outside = self.watch.outside_call(); // a waker outside the processors
        for (t, q) in batch {
            self.wake_remote(t, q);
        }
    }
}

/// The gate (see the module docs), holding ULTs of type `T`.
pub(crate) struct Gate<T> {
    /// Per processor: the bits of the groups it may run now.
    admitted: Box<[AtomicU64]>,
    /// Per processor: the bit of the gated group whose ULT runs there now (0: none).
    running: Box<[AtomicU64]>,
    /// Per domain: the groups some processor of it admits now, and the filling groups.
    allowed: Box<[AtomicU64]>,
    /// Each processor's domain.
    domain_of: Box<[usize]>,
    /// The admission's sequence number: odd while the controller writes the words, even
    /// between (a sequence lock: `enter` reads one admission's words and sets, or retries).
    epoch: AtomicU64,
    /// The groups that may run on a processor with nothing else to run.
    fill: AtomicU64,
    /// Per group: the groups that may run beside it whatever the admission (under LCN, those
    /// of a class it may pair with), so that a straggler of one of them is not waited for.
    compat: Box<[AtomicU64]>,
    /// Per group, the ULTs held back; the lock also orders the controller's writes of the words
    /// against a processor's choice between holding and sending.
    held: Mutex<Vec<Vec<T>>>,
    /// How many ULTs the lists hold (read without the lock by idle processors).
    held_count: AtomicUsize,
    /// The processors of each bandwidth domain, in order.
    domains: Vec<Vec<usize>>,
    /// Set at shutdown, and by the opening when the coscheduler stops: admissions no longer
    /// change anything.
    closed: AtomicBool,
    /// Where the next sent ULT starts looking for a processor, so that sends spread.
    turn: AtomicUsize,
    /// ULTs sent to another processor, and ULTs held (counted for the docs' figures and tests).
    pub(crate) sent: AtomicU64,
    pub(crate) holds: AtomicU64,
}

impl<T> Gate<T> {
    /// A gate for `processors` processors in `domains`; every processor admits every group until
    /// the first admission.
    pub(crate) fn new(processors: usize, domains: Vec<Vec<usize>>) -> Gate<T> {
        let mut domain_of = vec![0; processors].into_boxed_slice();
        for (d, members) in domains.iter().enumerate() {
            for &p in members {
                domain_of[p] = d;
            }
        }
        Gate {
            admitted: (0..processors).map(|_| AtomicU64::new(u64::MAX)).collect(),
            running: (0..processors).map(|_| AtomicU64::new(0)).collect(),
            allowed: (0..domains.len()).map(|_| AtomicU64::new(u64::MAX)).collect(),
            domain_of,
            epoch: AtomicU64::new(0),
            fill: AtomicU64::new(0),
            compat: (0..MAX_GATED_GROUPS).map(|_| AtomicU64::new(0)).collect(),
            held: Mutex::new((0..MAX_GATED_GROUPS).map(|_| Vec::new()).collect()),
            held_count: AtomicUsize::new(0),
            domains,
            closed: AtomicBool::new(false),
            turn: AtomicUsize::new(0),
            sent: AtomicU64::new(0),
            holds: AtomicU64::new(0),
        }
    }

    /// The processors of each domain.
    pub(crate) fn domains(&self) -> &[Vec<usize>] {
        &self.domains
    }

    /// Whether processor `p` may run group `bit` (a single bit) now, by its word; `alone`: `p`
    /// has nothing else to run (then a filling group may run too).
    #[inline]
    pub(crate) fn admits(&self, p: usize, bit: u64, alone: impl FnOnce() -> bool) -> bool {
        self.admitted[p].load(Ordering::SeqCst) & bit != 0
            || (self.fill.load(Ordering::SeqCst) & bit != 0 && alone())
    }

    /// Announces that processor `p` is about to run a ULT of group `bit`, which its word
    /// admitted, and checks that the word still admits it and that no other processor of its
    /// domain still runs a ULT of a group the domain no longer admits (a *straggler*, still in
    /// the unit it began under the last quantum). [`Entry::Run`]: run it (then
    /// [`left`](Self::left) after its switch out).
    ///
    /// Why two groups that no admission pairs never run at once in one domain: the controller
    /// writes an admission's words and sets between two increments of `epoch` (a sequence
    /// lock), so the loads here either belong to one admission or the answer is to try again.
    /// Take two processors of a domain that enter groups X and Y. Each stores its `running`,
    /// then fences (`SeqCst`), before it loads the other's; the two fences are ordered, so at
    /// least one, say the one entering Y, sees the other's X. It runs Y only if its admission
    /// allows X in the domain too, that is, when one admission pairs X and Y, or when X may run
    /// beside Y whatever the admission (`compat`: under LCN, classes that may pair). A ULT that
    /// began under an earlier admission (a straggler, still in the unit it began then) is seen
    /// the same way and waited for.
    ///
    /// The fence, rather than a `SeqCst` store and `SeqCst` loads alone, is what loom can check
    /// (`loom_models/gate.rs`; loom does not put `SeqCst` accesses of different words in one
    /// total order, and found both processors running without it). On x86 it is a plain store
    /// and a locked `or` on the stack in place of the `SeqCst` store's `xchg`: one full barrier
    /// either way.
    pub(crate) fn enter(&self, p: usize, bit: u64, alone: impl Fn() -> bool) -> Entry {
        self.running[p].store(bit, Ordering::Relaxed);
        fence(Ordering::SeqCst); // (see above: before the other processors' `running` is read)
        let epoch = self.epoch.load(Ordering::SeqCst);
        let answer = if epoch & 1 == 1 {
            Entry::Wait // (the controller is writing an admission)
        } else if !self.admits(p, bit, &alone) {
            Entry::Refused
        } else {
            let d = self.domain_of[p];
            let compat = self.compat[bit.trailing_zeros() as usize].load(Ordering::SeqCst);
            let allowed = self.allowed[d].load(Ordering::SeqCst) | compat;
            let members = &self.domains[d];
            if members.iter().any(|&q| q != p && self.running[q].load(Ordering::SeqCst) & !allowed != 0) {
                Entry::Wait
            } else {
                Entry::Run
            }
        };
        // The words and the set read above belong to one admission, or the answer is to try
        // again.
        let answer = if self.epoch.load(Ordering::SeqCst) != epoch { Entry::Wait } else { answer };
        if answer != Entry::Run {
            self.running[p].store(0, Ordering::Relaxed);
        }
        answer
    }

    /// The ULT that processor `p` entered switched out.
    #[inline]
    pub(crate) fn left(&self, p: usize) {
        self.running[p].store(0, Ordering::Release);
    }

    /// `t`, a ULT of group `index` that processor `from` does not admit: sent to a processor that
    /// admits the group, or held until one does.
    pub(crate) fn hold_or_send(&self, to: &impl Dispatch<T>, t: T, index: usize, from: usize) {
        let bit = 1u64 << index;
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.admitted.len();
        let start = self.turn.fetch_add(1, Ordering::Relaxed);
        let target = (0..n)
            .map(|k| (start + k) % n)
            .find(|&q| q != from && self.admitted[q].load(Ordering::Relaxed) & bit != 0);
        match target {
            Some(q) => {
                drop(held);
                self.sent.fetch_add(1, Ordering::Relaxed);
                to.send(t, q);
            }
            None => {
                held[index].push(t);
                self.held_count.fetch_add(1, Ordering::Relaxed);
                self.holds.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A held ULT of a filling group, for processor `p` that would otherwise idle.
    pub(crate) fn take_filler(&self) -> Option<T> {
        let fill = self.fill.load(Ordering::Relaxed);
        if fill == 0 || self.held_count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let fill = self.fill.load(Ordering::Relaxed);
        let list = held.iter_mut().enumerate().find(|(i, l)| fill & (1 << i) != 0 && !l.is_empty())?.1;
        let t = list.pop()?;
        self.held_count.fetch_sub(1, Ordering::Relaxed);
        Some(t)
    }

    /// A quantum's admission: processor `p` admits the groups of `words[p]`, `fill` the groups
    /// that may fill idle processors, `compat[i]` the groups that may run beside group `i`
    /// anyway (missing entries: none); held ULTs of groups now admitted somewhere go to those
    /// processors, in turn. Called by the controller thread, never by a processor.
    pub(crate) fn admit(&self, to: &impl Dispatch<T>, words: &[u64], fill: u64, compat: &[u64]) {
        self.admit_and(to, words, fill, compat, false);
    }

    /// [`admit`](Self::admit), and with `last` no admission after this one changes anything
    /// (decided under the same lock, so that none comes between).
    fn admit_and(&self, to: &impl Dispatch<T>, words: &[u64], fill: u64, compat: &[u64], last: bool) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        if last {
            self.closed.store(true, Ordering::Relaxed);
        }
        // One admission, under the sequence number (see `enter`).
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.fill.store(fill, Ordering::SeqCst);
        for (i, c) in self.compat.iter().enumerate() {
            c.store(compat.get(i).copied().unwrap_or(0), Ordering::SeqCst);
        }
        for (d, members) in self.domains.iter().enumerate() {
            let union = members.iter().fold(fill, |u, &p| u | words[p]);
            self.allowed[d].store(union, Ordering::SeqCst);
        }
        for (w, &word) in self.admitted.iter().zip(words) {
            w.store(word, Ordering::SeqCst);
        }
        self.epoch.fetch_add(1, Ordering::SeqCst);
        let mut release = Vec::new();
        for (i, list) in held.iter_mut().enumerate() {
            if list.is_empty() {
                continue;
            }
            let targets: Vec<usize> =
                words.iter().enumerate().filter(|(_, &w)| w & (1 << i) != 0).map(|(p, _)| p).collect();
            if targets.is_empty() {
                continue; // still held (a filling group: idle processors take it)
            }
            self.held_count.fetch_sub(list.len(), Ordering::Relaxed);
            release.extend(list.drain(..).enumerate().map(|(k, t)| (t, targets[k % targets.len()])));
        }
        drop(held);
        if !release.is_empty() {
            to.release(release);
        }
    }

    /// Every processor admits every group from now on, and held ULTs go back to the processors
    /// (the coscheduler stopped). For good: an admission the controller makes after this (it
    /// may have checked the stop flag just before the stop) changes nothing, as after
    /// [`close`](Self::close); without that, the ULTs of the groups it left out would be held
    /// with nothing left to release them.
    pub(crate) fn open(&self, to: &impl Dispatch<T>) {
        let all = vec![u64::MAX; self.admitted.len()];
        self.admit_and(to, &all, 0, &[], true);
    }

    /// Shutdown: no admission changes anything any more.
    pub(crate) fn close(&self) {
        let _held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        self.closed.store(true, Ordering::Relaxed);
    }

    /// How many ULTs are held now.
    pub(crate) fn held(&self) -> usize {
        self.held_count.load(Ordering::Relaxed)
    }

    /// Counts of the gate: ULTs sent to another processor, ULTs held, ULTs held now.
    pub(crate) fn counts(&self) -> (u64, u64, usize) {
        (self.sent.load(Ordering::Relaxed), self.holds.load(Ordering::Relaxed), self.held())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Where the ULTs (numbers here) went: `(ULT, processor)`.
    #[derive(Default)]
    struct Record(std::sync::Mutex<Vec<(usize, usize)>>);

    impl Dispatch<usize> for Record {
        fn send(&self, t: usize, q: usize) {
            self.0.lock().unwrap().push((t, q));
        }

        fn release(&self, batch: Vec<(usize, usize)>) {
            self.0.lock().unwrap().extend(batch);
        }
    }

    #[test]
    fn an_admission_after_the_opening_changes_nothing() {
        let gate: Gate<usize> = Gate::new(2, vec![vec![0, 1]]);
        let to = Record::default();
        gate.admit(&to, &[1, 1], 0, &[]); // group 0 only, on both processors
        gate.hold_or_send(&to, 7, 1, 0); // a ULT of group 1: held
        assert_eq!(gate.held(), 1);
        gate.open(&to);
        assert_eq!(gate.held(), 0);
        assert_eq!(*to.0.lock().unwrap(), [(7, 0)]);
        // The controller's admission that comes after the stop changes nothing.
        gate.admit(&to, &[1, 1], 0, &[]);
        assert!(gate.admits(0, 1 << 1, || false) && gate.admits(1, 1 << 1, || false));
        gate.hold_or_send(&to, 8, 1, 0); // sent to the other processor, not held
        assert_eq!(gate.held(), 0);
        assert_eq!(*to.0.lock().unwrap(), [(7, 0), (8, 1)]);
    }
}
