//! Models of a live policy switch (`policy::board`): a setter puts a new policy in force while a
//! processor keys the ULTs woken to it and re-keys its runqueue at its safe points, and a waker
//! on a third thread reads the policy in force. Every ULT ends in the runqueue once, keyed by
//! the last policy set after the processor's next safe point; each policy a reader sees is
//! whole (what its setter wrote before publishing it).

use super::check;
use crate::policy::board::Board;
use loom::cell::UnsafeCell;
use loom::sync::{Arc, Mutex};
use loom::thread;

/// A policy: its keys are a ULT's id times `factor`, which the setter writes before publishing
/// it (in `Board::set`'s `prepare`) and readers read: a loom cell, so a read that does not
/// happen after the write is a reported race.
struct Keys {
    id: usize,
    factor: UnsafeCell<u64>,
}

// SAFETY: `factor` is written only before the board publishes the value (or, for the first, before
// the board is shared), and read after; loom checks that those reads happen after the write.
unsafe impl Sync for Keys {}

impl Keys {
    fn new(id: usize) -> Keys {
        Keys { id, factor: UnsafeCell::new(0) }
    }

    fn factor(&self) -> u64 {
        // SAFETY: written only by `prepare`, before the board published the value (loom checks it).
        self.factor.with(|f| unsafe { *f })
    }

    fn set(&self, factor: u64) {
        // SAFETY: `prepare` runs before the value is published: no reader yet (loom checks it).
        self.factor.with_mut(|f| unsafe { *f = factor });
    }
}

/// The factor of policy `id`.
fn factor(id: usize) -> u64 {
    10 + id as u64
}

fn set(board: &Board<Keys>, id: usize) -> u64 {
    board.set(Keys::new(id), |a, b| a.id == b.id, |k| k.set(factor(id)))
}

/// A processor: its copy of the policy (the generation and factor it keyed by), its runqueue
/// (ids and keys, under a lock, as `RunQueue`'s) and its wake-up list.
struct Processor {
    seen: u64,
    factor: u64,
    runq: Arc<Mutex<Vec<(usize, u64)>>>,
    wakeups: Arc<Mutex<Vec<usize>>>,
}

impl Processor {
    fn new(board: &Board<Keys>) -> Processor {
        let seen = board.generation();
        let factor = board.current().factor();
        Processor { seen, factor, runq: Arc::default(), wakeups: Arc::default() }
    }

    /// Step 1 of the loop: woken ULTs keyed by the policy this processor has.
    fn drain(&self) {
        let woken: Vec<usize> = std::mem::take(&mut *self.wakeups.lock().unwrap());
        let mut q = self.runq.lock().unwrap();
        q.extend(woken.into_iter().map(|id| (id, id as u64 * self.factor)));
    }

    /// The safe point (`Processor::follow_policy`): a new generation rebuilds the copy and
    /// re-keys every entry under the runqueue's lock.
    fn follow(&mut self, board: &Board<Keys>) {
        if let Some(keys) = board.changed(&mut self.seen) {
            self.factor = keys.factor();
            let mut q = self.runq.lock().unwrap();
            for (id, key) in q.iter_mut() {
                *key = *id as u64 * self.factor;
            }
        }
    }
}

/// A setter switches from policy 0 to 1 while the processor drains a wake-up and passes a safe
/// point, and a waker pushes a ULT after reading the policy in force. After a last drain and
/// safe point, the three ULTs are queued once each, keyed by policy 1.
#[test]
fn a_switch_against_a_processor_and_a_waker() {
    check("a_switch_against_a_processor_and_a_waker", || {
        let board = Arc::new(Board::new(Keys::new(0)));
        board.current().set(factor(0)); // (before any other thread sees the board)
        let mut p = Processor::new(&board);
        p.runq.lock().unwrap().extend([(0, 0), (1, factor(0))]);
        let setter = {
            let board = Arc::clone(&board);
            thread::spawn(move || assert_eq!(set(&board, 1), 1))
        };
        let waker = {
            let (board, wakeups) = (Arc::clone(&board), Arc::clone(&p.wakeups));
            thread::spawn(move || {
                // Where the ULT goes is the policy's answer: read it, whole.
                let keys = board.current();
                assert_eq!(keys.factor(), factor(keys.id));
                wakeups.lock().unwrap().push(2);
            })
        };
        p.drain();
        p.follow(&board);
        setter.join().unwrap();
        waker.join().unwrap();
        p.drain();
        p.follow(&board);
        assert_eq!(p.seen, 1);
        let mut q = p.runq.lock().unwrap().clone();
        q.sort();
        assert_eq!(q, [(0, 0), (1, factor(1)), (2, 2 * factor(1))]);
    });
}

/// Two setters race (policies 1 and 2, then the kept policy 1 again from the first, which is
/// not prepared again): the processor's safe points converge on whichever was set last, and the
/// board keeps each policy once.
#[test]
fn racing_setters_converge_on_the_last() {
    check("racing_setters_converge_on_the_last", || {
        let board = Arc::new(Board::new(Keys::new(0)));
        board.current().set(factor(0));
        let mut p = Processor::new(&board);
        p.runq.lock().unwrap().push((1, factor(0)));
        let setters: Vec<_> = [vec![1, 1], vec![2]]
            .into_iter()
            .map(|ids| {
                let board = Arc::clone(&board);
                thread::spawn(move || {
                    for id in ids {
                        set(&board, id);
                    }
                })
            })
            .collect();
        p.follow(&board);
        for s in setters {
            s.join().unwrap();
        }
        p.follow(&board);
        let last = board.current();
        assert_eq!(p.seen, 3);
        assert_eq!(p.factor, factor(last.id));
        assert_eq!(*p.runq.lock().unwrap(), [(1, factor(last.id))]);
        assert_eq!(board.kept_len(), 3);
    });
}
