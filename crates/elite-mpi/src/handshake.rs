//! The completion handshake of an operation in flight, between the thread that completes it (the
//! progress ULT's poll, or a waiter's own poll) and the ULT that waits for it; apart so that loom
//! can check it (`RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=4 cargo test --lib --profile loom
//! --target-dir ../../target/loom loom_models` in `crates/elite-mpi`).
//!
//! The completer writes the outcome once, then sets `done` (release), then gives the waiter's
//! semaphore one permit. The waiter reads `done` (acquire); while it is not set, it takes a permit
//! (its ULT parks on the semaphore) and reads `done` again. The outcome is read only after `done`
//! was seen set, so it was written before (release/acquire on `done`). No wake-up is lost: the
//! permit is given after `done` is set, and a semaphore keeps a permit given before its waiter
//! arrives, so a waiter that saw `done` unset and then parks finds the permit or gets it later. A
//! permit nobody takes (the waiter saw `done` set first) is dropped with the handshake.
//!
//! Before a waiter parks on an operation the progress ULT may not be polling (a lazy start, or a
//! blocking operation that its waiter was testing itself): the waiter puts the operation on the
//! table (under the MPI lock) and then gives the progress ULT's `work` semaphore a permit, so that
//! the progress ULT, parked on `work` while the table was empty, polls until the table is empty
//! again. The second model checks that pairing too.

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, Ordering};
use std::mem::MaybeUninit;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, Ordering};

/// A counting semaphore as the handshake uses it: elite-rt's `Semaphore` in the crate, a model
/// one under loom.
pub(crate) trait Permits {
    /// Gives one permit.
    fn release(&self);
    /// Takes one permit, blocking the caller until one is there.
    fn acquire(&self);
}

#[cfg(not(loom))]
impl Permits for elite_rt::sync::Semaphore {
    fn release(&self) {
        elite_rt::sync::Semaphore::release(self);
    }

    fn acquire(&self) {
        elite_rt::sync::Semaphore::acquire(self);
    }
}

/// `UnsafeCell` with loom's access API (`with`, `with_mut`), so that the same code runs under
/// loom, which tracks the accesses.
#[cfg(not(loom))]
struct Slot<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> Slot<T> {
    fn new(value: T) -> Slot<T> {
        Slot(std::cell::UnsafeCell::new(value))
    }

    fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
use loom::cell::UnsafeCell as Slot;

/// One operation's completion: its outcome once written, whether it is, and the semaphore its
/// waiter parks on (see the module docs).
pub(crate) struct Handshake<T, S> {
    done: AtomicBool,
    /// Written once before `done` is set (release); read only after `done` is seen (acquire).
    outcome: Slot<MaybeUninit<T>>,
    wake: S,
}

// SAFETY: `outcome` is written by one completer before the release store of `done` and read only
// after an acquire load of `done` saw it set (T: Send moves it across); `done` is atomic and the
// semaphore is shared by design (S: Sync).
unsafe impl<T: Send, S: Sync> Sync for Handshake<T, S> {}

impl<T: Copy, S: Permits> Handshake<T, S> {
    pub(crate) fn new(wake: S) -> Handshake<T, S> {
        Handshake { done: AtomicBool::new(false), outcome: Slot::new(MaybeUninit::uninit()), wake }
    }

    /// Records the outcome and wakes the waiter.
    ///
    /// # Safety
    /// Called at most once per handshake.
    pub(crate) unsafe fn complete(&self, outcome: T) {
        // SAFETY: the only write (the caller's contract), and nobody reads before `done` is set.
        self.outcome.with_mut(|p| unsafe { (*p).write(outcome) });
        self.done.store(true, Ordering::Release);
        self.wake.release();
    }

    /// Whether the outcome is there (acquire: it can be read after `true`).
    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Blocks the caller until the outcome is there, and returns it.
    pub(crate) fn park(&self) -> T {
        while !self.is_done() {
            self.wake.acquire();
        }
        // SAFETY: `done` was seen set (acquire), so the outcome was written before it.
        self.outcome.with(|p| unsafe { (*p).assume_init_read() })
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::{Arc, Condvar, Mutex};
    use loom::thread;

    /// A counting semaphore of loom's primitives.
    struct ModelSemaphore {
        permits: Mutex<usize>,
        given: Condvar,
    }

    impl ModelSemaphore {
        fn new() -> ModelSemaphore {
            ModelSemaphore { permits: Mutex::new(0), given: Condvar::new() }
        }
    }

    impl Permits for ModelSemaphore {
        fn release(&self) {
            *self.permits.lock().unwrap() += 1;
            self.given.notify_one();
        }

        fn acquire(&self) {
            let mut permits = self.permits.lock().unwrap();
            while *permits == 0 {
                permits = self.given.wait(permits).unwrap();
            }
            *permits -= 1;
        }
    }

    /// The completer (the progress ULT's poll) against the waiter: the waiter always gets the
    /// outcome written, and never parks for ever.
    #[test]
    fn the_waiter_gets_the_outcome_and_is_woken() {
        loom::model(|| {
            let h = Arc::new(Handshake::<u64, _>::new(ModelSemaphore::new()));
            let completer = {
                let h = h.clone();
                // SAFETY: the only completion of this handshake.
                thread::spawn(move || unsafe { h.complete(42) })
            };
            assert_eq!(h.park(), 42);
            completer.join().unwrap();
        });
    }

    /// A waiter that puts its operation on the table and kicks the progress ULT, which parks on
    /// `work` whenever it finds the table empty: the progress ULT always finds the operation, and
    /// the waiter always gets its outcome.
    #[test]
    fn registering_then_kicking_reaches_a_parked_progress_ult() {
        loom::model(|| {
            type Op = Arc<Handshake<u64, ModelSemaphore>>;
            let table: Arc<Mutex<Vec<Op>>> = Arc::new(Mutex::new(Vec::new()));
            let work = Arc::new(ModelSemaphore::new());
            let progress = {
                let (table, work) = (table.clone(), work.clone());
                thread::spawn(move || loop {
                    let op = table.lock().unwrap().pop();
                    match op {
                        // SAFETY: taken off the table under its lock: completed once.
                        Some(op) => break unsafe { op.complete(7) },
                        None => work.acquire(),
                    }
                })
            };
            let op: Op = Arc::new(Handshake::new(ModelSemaphore::new()));
            table.lock().unwrap().push(op.clone());
            work.release();
            assert_eq!(op.park(), 7);
            progress.join().unwrap();
        });
    }
}
