//! The OS thread that carries a processor: a worker of the runtime runs one processor's loop at
//! a time, or a queued blocking call, or waits parked as a spare, as the hand-off protocol of
//! `crate::blocking` offers it (one per processor at start-up, spares started for blocking
//! calls). The protocol's state, who runs which processor, lives in that module's `Registry`.

use crate::atomics::AtomicBool;
use crate::processor::ProcessorSet;
use crate::runtime::Shared;
use std::cell::Cell;
use std::sync::Arc;

pub(crate) use crate::blocking::Job;

thread_local! {
    /// The worker this OS thread is (set once, by `worker_main`).
    static WORKER: Cell<*const Worker> = const { Cell::new(std::ptr::null()) };
}

/// An OS thread of the runtime (see `crate::blocking`). What only the lock guards lives in its
/// `Slot` (`crate::blocking`); this part is read without it.
pub(crate) struct Worker {
    /// Index of its slot.
    pub(crate) id: usize,
    /// Leave the processor loop at the top of its next round: raised by shutdown, and by the
    /// worker itself when it has handed its processor over.
    pub(crate) stop: AtomicBool,
}

/// The worker the calling thread is: a thread running a processor's loop is always one. Its
/// `stop` flag tells whether it was told to leave the loop it runs (its blocking handoff gave the
/// processor to another thread, or shutdown); the processor reads it after a park's action, which
/// may be [`switched`](crate::blocking::switched), before the loop's bottom frame touches the processor again.
pub(crate) fn current_worker<'a>() -> &'a Worker {
    let w = WORKER.with(|c| c.get());
    if w.is_null() {
        crate::fatal("a processor's loop on a thread that is not a worker of the runtime");
    }
    // SAFETY: set by `worker_main` to the `Arc<Worker>` it holds for the thread's whole life.
    unsafe { &*w }
}

/// An OS thread of the runtime: takes over processors and runs queued calls as they are offered,
/// parked as a spare in between, until shutdown.
pub(crate) fn worker_main(w: Arc<Worker>, shared: Arc<Shared>, set: Arc<ProcessorSet>) {
    let guard = crate::AbortOnPanic("a worker thread of the runtime");
    WORKER.with(|c| c.set(Arc::as_ptr(&w)));
    let registry = &shared.blocking;
    let mut pinned = None;
    loop {
        match registry.next_job(&w) {
            Job::Run(p) => {
                set.take(p, &shared).run(&w, &mut pinned);
                if registry.after_loop(&w) {
                    break;
                }
            }
            Job::Serve(q) => registry.serve(&shared, &w, q),
            Job::Exit => break,
        }
    }
    std::mem::forget(guard);
}
