//! A ULT's task: the spawned closure and, once it ran, its outcome, stored inline in the TCB when
//! it fits, with the type-erased operations the runtime calls on it.

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::thread;

/// Type-erased operations on a spawned closure and its result.
///
/// A task is a [`Task<F, T>`] whose first field, at offset 0 whatever `F` is, is the outcome
/// `Option<thread::Result<T>>`: a join handle, which knows `T`, reads it there directly.
pub(crate) struct TaskVTable {
    /// Runs the closure under `catch_unwind` and stores the outcome in place.
    pub(crate) run: unsafe fn(*mut ()),
    /// Stores `payload` as a failed outcome (the ULT never finished: cancelled, or no stack).
    pub(crate) fail: unsafe fn(*mut (), Box<dyn Any + Send>),
    /// Frees the task, whatever it still holds, except the payload of a failed outcome that nobody
    /// took (no join moved it out), which it returns for the report of `crate::panics`.
    pub(crate) drop: unsafe fn(*mut ()) -> Option<Box<dyn Any + Send>>,
}

/// A spawned closure and, once it ran, its outcome.
#[repr(C)]
pub(crate) struct Task<F, T> {
    /// The outcome; first, so that its offset does not depend on `F`.
    out: Option<thread::Result<T>>,
    /// The closure until it runs.
    f: Option<F>,
}

/// Moves the outcome out of a task made by [`new_task`] for a closure returning `T`.
///
/// # Safety
/// `task` is live, made for this `T`, and the caller has exclusive access to its outcome (the join
/// protocol's COMPLETE, observed with `Acquire`).
#[inline]
pub(crate) unsafe fn take_output<T>(task: *mut ()) -> Option<thread::Result<T>> {
    // SAFETY: `Task` is `repr(C)` with the outcome first, so `task` points at it (contract).
    unsafe { (*(task as *mut Option<thread::Result<T>>)).take() }
}

/// The panic payload a join returns for a ULT that the runtime's shutdown cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the runtime shut down before this ULT finished")
    }
}

impl std::error::Error for Cancelled {}

thread_local! {
    /// Set on the thread that unwinds cancelled ULTs at shutdown, while it does so.
    pub(crate) static FORCED_UNWIND: Cell<bool> = const { Cell::new(false) };
}

/// Bytes of task state a TCB stores inline (closure, later its result) without a heap allocation.
pub(crate) const INLINE_TASK_BYTES: usize = 64;

/// Inline storage for a small task.
#[repr(C, align(16))]
pub(crate) struct InlineTask(std::mem::MaybeUninit<[u8; INLINE_TASK_BYTES]>);

impl InlineTask {
    /// Storage that holds no task yet.
    pub(crate) const fn empty() -> InlineTask {
        InlineTask(std::mem::MaybeUninit::uninit())
    }
}

/// Stores a closure as a task, inline in `slot` when it fits, boxed otherwise; returns the task
/// pointer and its vtable.
pub(crate) fn new_task<F, T>(f: F, slot: *mut InlineTask) -> (*mut (), &'static TaskVTable)
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    unsafe fn run<F: FnOnce() -> T, T>(p: *mut ()) {
        // SAFETY: `p` came from `new_task::<F, T>` and only the processor running the ULT calls `run`.
        let task = unsafe { &mut *(p as *mut Task<F, T>) };
        let Some(f) = task.f.take() else {
            crate::fatal("a ULT's task ran twice");
        };
        let out = panic::catch_unwind(AssertUnwindSafe(f));
        if out.is_err() && FORCED_UNWIND.with(|c| c.get()) {
            // Shutdown is unwinding this ULT (see `runtime`): let the unwind reach corosensei's
            // root instead of recording it as the ULT's panic.
            if let Err(payload) = out {
                panic::resume_unwind(payload);
            }
        }
        // SAFETY: re-borrow after the closure ran; nothing else touches the task while it runs.
        unsafe { (*(p as *mut Task<F, T>)).out = Some(out) };
    }
    unsafe fn fail<F, T>(p: *mut (), payload: Box<dyn Any + Send>) {
        // SAFETY: called with exclusive access to a task that never ran to completion.
        let task = unsafe { &mut *(p as *mut Task<F, T>) };
        task.f = None;
        task.out = Some(Err(payload));
    }
    fn unjoined_payload<F, T>(task: Task<F, T>) -> Option<Box<dyn Any + Send>> {
        match task.out {
            Some(Err(payload)) => Some(payload),
            _ => None,
        }
    }
    unsafe fn drop_boxed<F, T>(p: *mut ()) -> Option<Box<dyn Any + Send>> {
        // SAFETY: `p` is the Box made in `new_task`, dropped exactly once by whoever recycles.
        unjoined_payload(*unsafe { Box::from_raw(p as *mut Task<F, T>) })
    }
    unsafe fn drop_inline<F, T>(p: *mut ()) -> Option<Box<dyn Any + Send>> {
        // SAFETY: `p` is the TCB's inline slot written in `new_task`, moved out exactly once (the
        // slot is then dead until the next `new_task` writes it).
        unjoined_payload(unsafe { ptr::read(p as *mut Task<F, T>) })
    }
    struct VTables<F, T>(std::marker::PhantomData<(F, T)>);
    impl<F: FnOnce() -> T, T> VTables<F, T> {
        const FITS: bool = std::mem::size_of::<Task<F, T>>() <= INLINE_TASK_BYTES
            && std::mem::align_of::<Task<F, T>>() <= std::mem::align_of::<InlineTask>();
        const BOXED: TaskVTable =
            TaskVTable { run: run::<F, T>, fail: fail::<F, T>, drop: drop_boxed::<F, T> };
        const INLINE: TaskVTable =
            TaskVTable { run: run::<F, T>, fail: fail::<F, T>, drop: drop_inline::<F, T> };
    }
    let task = Task::<F, T> { out: None, f: Some(f) };
    if VTables::<F, T>::FITS {
        let p = slot as *mut Task<F, T>;
        // SAFETY: the slot is the free TCB's inline storage, owned by the spawner, large and aligned
        // enough for the task (checked by FITS), and holds no live task (the last one was dropped).
        unsafe { p.write(task) };
        (p as *mut (), &VTables::<F, T>::INLINE)
    } else {
        let p = Box::into_raw(Box::new(task)) as *mut ();
        (p, &VTables::<F, T>::BOXED)
    }
}

/// The operations of a free TCB's empty task: nothing to run, fail or drop.
pub(super) static EMPTY_VTABLE: TaskVTable = {
    unsafe fn run_nothing(_: *mut ()) {}
    unsafe fn fail_nothing(_: *mut (), _: Box<dyn Any + Send>) {}
    unsafe fn drop_nothing(_: *mut ()) -> Option<Box<dyn Any + Send>> {
        None
    }
    TaskVTable { run: run_nothing, fail: fail_nothing, drop: drop_nothing }
};
