//! Models of the runtime's coscheduling gate (`contention::gate`), on its own code: `Gate` is
//! generic over what it holds (here a ULT's number) and over where it hands the ULTs it lets go
//! (here a [`Record`] of them), and under loom its words are loom atomics and its lock a loom
//! `Mutex`.
//!
//! * An `enter` against an admission decides from one admission's words: its answer is one the
//!   old words alone or the new words alone give, or `Wait` (the sequence lock's "try again").
//!   The admissions are chosen so that the words a reader may mix (the controller writes `fill`,
//!   `compat` and `allowed` before `admitted`; a reader loads `admitted` first, then `fill`,
//!   `compat` and `allowed`) give `Run` where neither admission does.
//! * A ULT refused concurrently with an admission that admits its group elsewhere, beside one
//!   held before: each is sent to a processor that admits its group, or held and released by
//!   that admission or the next one, exactly once (never lost, never released twice), and the
//!   gate's count of held ULTs ends at zero.
//! * Two processors of one domain entering groups that no admission pairs, while the admission
//!   changes from one to the other, never run at once (the straggler check: each stores its
//!   `running`, fences, and loads the other's; without the fence loom finds them running at
//!   once, see `Gate::enter`).

use super::check;
use crate::contention::gate::{Dispatch, Entry, Gate};
use loom::sync::Arc;
use loom::thread;

/// Group bits: the gate's groups 0, 1 and 2.
const X: u64 = 1;
const Y: u64 = 2;
const Z: u64 = 4;

/// Where the ULTs the gate lets go went: `(ult, processor)`, in order.
///
/// A std `Mutex` on purpose: it is not part of the protocol (the runtime's wake-up stacks, which
/// have their own models), and loom runs one model thread at a time, so it never blocks.
#[derive(Default)]
struct Record(std::sync::Mutex<Vec<(usize, usize)>>);

impl Record {
    fn taken(&self) -> Vec<(usize, usize)> {
        self.0.lock().unwrap().clone()
    }
}

impl Dispatch<usize> for Record {
    fn send(&self, t: usize, q: usize) {
        self.0.lock().unwrap().push((t, q));
    }

    fn release(&self, batch: Vec<(usize, usize)>) {
        assert!(!batch.is_empty(), "an empty release");
        self.0.lock().unwrap().extend(batch);
    }
}

/// An admission: each processor's word, the filling groups, `compat` by group.
struct Admission {
    words: [u64; 2],
    fill: u64,
    compat: &'static [u64],
}

/// Two processors in one domain; processor 1 runs a ULT of `Y` (entered under the first
/// admission, which admits every group) when `old` is admitted. Processor 0 enters a ULT of `X`
/// (`alone`: it has nothing else to run) while the controller admits `new`. The answer is
/// `Wait`, or the answer of `old` alone or `new` alone (each taken sequentially, by the same
/// `enter`, before and after the race), and never `Run` (which `old` and `new` must both refuse,
/// so that a mix of their words is seen).
fn enter_against_admit(name: &str, old: Admission, new: Admission, alone: bool) {
    check(name, move || {
        let gate: Arc<Gate<usize>> = Arc::new(Gate::new(2, vec![vec![0, 1]]));
        let record = Arc::new(Record::default());
        assert_eq!(gate.enter(1, Y, || false), Entry::Run);
        gate.admit(&*record, &old.words, old.fill, old.compat);
        let before = gate.enter(0, X, || alone);
        assert_ne!(before, Entry::Run, "the old admission must refuse X");
        let controller = {
            let (gate, record) = (Arc::clone(&gate), Arc::clone(&record));
            thread::spawn(move || gate.admit(&*record, &new.words, new.fill, new.compat))
        };
        let during = gate.enter(0, X, || alone);
        controller.join().unwrap();
        let after = gate.enter(0, X, || alone);
        assert_ne!(after, Entry::Run, "the new admission must refuse X");
        assert!(
            during == Entry::Wait || during == before || during == after,
            "enter answered {during:?} against an admission: {before:?} under the old words, \
             {after:?} under the new ones: it decided from a mix of both"
        );
        assert!(record.taken().is_empty());
    });
}

/// Admitted on processor 0 with `Y`'s ULT on processor 1 a straggler (`Wait`), then refused
/// there (`Refused`); `compat` and `allowed` of the new admission with the old `admitted` would
/// run it.
#[test]
fn enter_reads_one_admission_admitted_then_refused() {
    enter_against_admit(
        "enter_reads_one_admission_admitted_then_refused",
        Admission { words: [X, X], fill: 0, compat: &[] },
        Admission { words: [Y, Y], fill: 0, compat: &[Y] },
        false,
    );
}

/// Refused on processor 0 (`Refused`), then admitted there as a filling group with `Y`'s ULT on
/// processor 1 a straggler (`Wait`); the new `fill` with the old `allowed` would run it.
#[test]
fn enter_reads_one_admission_refused_then_filling() {
    enter_against_admit(
        "enter_reads_one_admission_refused_then_filling",
        Admission { words: [Y, Y], fill: 0, compat: &[] },
        Admission { words: [Z, Z], fill: X, compat: &[] },
        true,
    );
}

/// Processor `p`'s side (`processor/cosched.rs`'s `cosched_admits`, without the run): enters
/// ULT `t` of group `X` (index 0), retrying while the controller writes; refused, it sends or
/// holds it. Whether it ran.
fn resume(gate: &Gate<usize>, record: &Record, p: usize, t: usize) -> bool {
    loop {
        match gate.enter(p, X, || false) {
            Entry::Run => {
                gate.left(p);
                return true;
            }
            Entry::Refused => {
                gate.hold_or_send(record, t, 0, p);
                return false;
            }
            Entry::Wait => thread::yield_now(),
        }
    }
}

/// Under the old admission no processor admits `X`, and ULT 0 of `X` is held. Processor `from`
/// resumes ULT 1 of `X` while the controller admits `new`, which admits `X` on processor
/// `target` only; then the next quantum admits `new` again. Each ULT goes to `target` exactly
/// once, or (when `from` is `target`) ULT 1 runs there, and nothing stays held. When `from` is
/// not `target`, nothing is held past the concurrent admission already (the gate's lock orders
/// the choice between holding and sending against the admission's words and release); when it
/// is, a stale read of `from`'s own word may hold ULT 1 until the next admission (the module
/// docs allow it: a processor never sends to itself).
fn refused_against_admit(name: &str, from: usize, target: usize) {
    check(name, move || {
        let gate: Arc<Gate<usize>> = Arc::new(Gate::new(2, vec![vec![0], vec![1]]));
        let record = Arc::new(Record::default());
        gate.admit(&*record, &[Y, Y], 0, &[]);
        assert!(!resume(&gate, &record, 1 - from, 0));
        assert_eq!(gate.held(), 1);
        let mut new = [Y, Y];
        new[target] = X;
        let controller = {
            let (gate, record) = (Arc::clone(&gate), Arc::clone(&record));
            thread::spawn(move || gate.admit(&*record, &new, 0, &[]))
        };
        let ran = resume(&gate, &record, from, 1);
        controller.join().unwrap();
        if from != target {
            // Held before the admission's lock section: released by it; chosen after it: the
            // new words, read under the lock, send it. Never held past it.
            assert_eq!(gate.held(), 0, "a ULT held past an admission that admits its group elsewhere");
            assert_eq!(record.taken().len(), 2);
        }
        gate.admit(&*record, &new, 0, &[]); // the next quantum
        let mut taken = record.taken();
        taken.sort();
        let expected: &[(usize, usize)] = if ran { &[(0, target)] } else { &[(0, target), (1, target)] };
        assert_eq!(taken, expected, "ULT 0 held before, ULT 1 refused during the admission (ran: {ran})");
        assert!(!ran || from == target, "processor {from} ran a group it never admitted");
        assert_eq!(gate.held(), 0, "the count of held ULTs");
        assert_eq!(gate.take_filler(), None);
    });
}

/// Processor 0 reads the old word and refuses; the admission admits `X` on processor 1: sent
/// there under the lock, or held and released to it.
#[test]
fn refused_during_admit_is_sent_or_released_once() {
    refused_against_admit("refused_during_admit_is_sent_or_released_once", 0, 1);
}

/// As above, with `X` admitted on the refusing processor itself: it runs the ULT, or (a stale
/// read) holds it, since a processor never sends to itself, and that admission or the next
/// releases it to itself.
#[test]
fn refused_by_the_admitting_processor_is_released_once() {
    refused_against_admit("refused_by_the_admitting_processor_is_released_once", 0, 0);
}

/// Which processors run a ULT they entered, and of which group (a std `Mutex`, as [`Record`]'s):
/// each entry checks, at once, that no other processor of the domain runs a group that no
/// admission pairs with its own.
#[derive(Default)]
struct Inside(std::sync::Mutex<[u64; 2]>);

impl Inside {
    fn enter(&self, p: usize, bit: u64, paired: &[u64]) {
        let mut inside = self.0.lock().unwrap();
        let other = inside[1 - p];
        assert!(
            other == 0 || paired.iter().any(|&w| w & bit != 0 && w & other != 0),
            "processor {p} runs group bit {bit} while processor {} runs {other}, which no admission pairs",
            1 - p
        );
        inside[p] = bit;
    }

    fn leave(&self, p: usize) {
        self.0.lock().unwrap()[p] = 0;
    }
}

/// Two processors of one domain enter `X` and `Y` while the controller replaces an admission of
/// `X` alone with one of `Y` alone: they never run at once (the straggler check of `enter`: each
/// stores its `running` before it loads the other's, under one admission's `allowed`).
#[test]
fn two_groups_no_admission_pairs_never_run_at_once() {
    check("two_groups_no_admission_pairs_never_run_at_once", || {
        let gate: Arc<Gate<usize>> = Arc::new(Gate::new(2, vec![vec![0, 1]]));
        let (record, inside) = (Arc::new(Record::default()), Arc::new(Inside::default()));
        gate.admit(&*record, &[X, X], 0, &[]);
        let processor = |p: usize, bit: u64| {
            let (gate, inside) = (Arc::clone(&gate), Arc::clone(&inside));
            move || {
                if gate.enter(p, bit, || false) == Entry::Run {
                    inside.enter(p, bit, &[X, Y]);
                    thread::yield_now(); // (the ULT runs: the other threads may go on)
                    inside.leave(p);
                    gate.left(p);
                }
            }
        };
        let controller = {
            let (gate, record) = (Arc::clone(&gate), Arc::clone(&record));
            thread::spawn(move || gate.admit(&*record, &[Y, Y], 0, &[]))
        };
        let other = thread::spawn(processor(1, Y));
        processor(0, X)();
        controller.join().unwrap();
        other.join().unwrap();
        assert!(record.taken().is_empty());
    });
}
