//! Reports of detached ULTs that failed: a panic (or a start that never happened) whose payload no
//! `join` will ever see.
//!
//! A joined ULT's panic reaches its joiner as `Err(payload)`. A ULT whose [`JoinHandle`] was
//! dropped would lose its panic silently, so the moment its outcome is freed unread (by the exiting
//! ULT itself when the handle was dropped first, or by the handle's drop when the ULT finished
//! first; see the join protocol in `tcb`), the payload goes to the runtime's hook
//! ([`RuntimeBuilder::detached_panic_hook`]) before it is dropped. Cancellations at shutdown
//! ([`Cancelled`]) are not reported: the program asked for them by dropping the runtime.
//!
//! # What std already printed
//!
//! std's panic hook runs when the panic happens, inside the ULT, and prints the location and the
//! message under the name of the OS thread (the processor's, `elite-p0`, ...):
//! `thread 'elite-p0' (1234) panicked at src/main.rs:7:9:` then the message. The default report
//! therefore adds what std could not know, the ULT, and repeats the message so the line stands
//! alone, but not the location: `ULT 'worker' (id 5) panicked and was never joined: boom`.
//!
//! [`JoinHandle`]: crate::JoinHandle
//! [`RuntimeBuilder::detached_panic_hook`]: crate::RuntimeBuilder::detached_panic_hook
//! [`Cancelled`]: crate::Cancelled

use crate::tcb::{Cancelled, Tcb, TcbRef};
use crate::{SpawnError, Thread};
use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

/// A detached ULT's failure, as the hook of [`RuntimeBuilder::detached_panic_hook`] sees it: which
/// ULT, and the payload its `join` would have returned as `Err`.
///
/// Its `Display` is the line the default hook prints.
///
/// [`RuntimeBuilder::detached_panic_hook`]: crate::RuntimeBuilder::detached_panic_hook
pub struct DetachedPanic<'a> {
    thread: Thread,
    payload: &'a (dyn Any + Send),
}

impl<'a> DetachedPanic<'a> {
    /// The ULT that failed (id, name, and the processor it last ran on).
    pub fn thread(&self) -> &Thread {
        &self.thread
    }

    /// The panic payload: what `panic!` was given, or a [`SpawnError`] for a ULT that never ran
    /// because no stack could be allocated for it.
    pub fn payload(&self) -> &'a (dyn Any + Send) {
        self.payload
    }

    /// The payload as text when it is a `&str` or a `String` (what `panic!` with a message makes),
    /// like std's `PanicHookInfo::payload_as_str`.
    pub fn payload_as_str(&self) -> Option<&'a str> {
        let p = self.payload;
        p.downcast_ref::<&str>().copied().or_else(|| p.downcast_ref::<String>().map(String::as_str))
    }
}

impl fmt::Display for DetachedPanic<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.thread.name().unwrap_or("<unnamed>");
        let id = self.thread.id().as_u64();
        if let Some(e) = self.payload.downcast_ref::<SpawnError>() {
            return write!(f, "ULT '{name}' (id {id}) never ran and was never joined: {e}");
        }
        let message = self.payload_as_str().unwrap_or("Box<dyn Any>");
        write!(f, "ULT '{name}' (id {id}) panicked and was never joined: {message}")
    }
}

impl fmt::Debug for DetachedPanic<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DetachedPanic")
            .field("thread", &self.thread)
            .field("payload", &self.payload_as_str().unwrap_or("Box<dyn Any>"))
            .finish()
    }
}

/// The hook a runtime calls for each [`DetachedPanic`] (see
/// [`RuntimeBuilder::detached_panic_hook`](crate::RuntimeBuilder::detached_panic_hook)).
#[derive(Clone)]
pub(crate) struct DetachedPanicHook(Arc<dyn Fn(&DetachedPanic<'_>) + Send + Sync>);

impl DetachedPanicHook {
    pub(crate) fn new(f: impl Fn(&DetachedPanic<'_>) + Send + Sync + 'static) -> Self {
        DetachedPanicHook(Arc::new(f))
    }

    /// The default: one line on stderr.
    pub(crate) fn print() -> Self {
        DetachedPanicHook::new(|p| eprintln!("{p}"))
    }
}

impl fmt::Debug for DetachedPanicHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DetachedPanicHook")
    }
}

/// The outcome of a detached ULT was freed unread and held `payload`: report it through the hook of
/// the runtime owning `tcb` (unless it is a shutdown's [`Cancelled`]), then drop it.
///
/// Called by [`Tcb::drop_task`] while that runtime's shared state is alive (the caller runs on one
/// of its processors, holds a handle, or is its shutdown). A hook that panics, or a payload whose
/// destructor panics, aborts the process: there is nobody left to hand that panic to.
#[cold]
#[inline(never)]
pub(crate) fn report_unjoined(tcb: &Tcb, payload: Box<dyn Any + Send>) {
    if payload.is::<Cancelled>() {
        return;
    }
    let t = TcbRef::from_ptr(tcb as *const Tcb as *mut Tcb)
        .unwrap_or_else(|| crate::fatal("a TCB at address zero"));
    let shared = t.chunk().shared() as *const crate::runtime::Shared;
    // SAFETY: per this function's contract the runtime's shared state is alive.
    let hook = unsafe { &*shared }.config.detached_panic_hook.clone();
    let report = DetachedPanic { thread: crate::thread::thread_of(t), payload: &*payload };
    if panic::catch_unwind(AssertUnwindSafe(|| (hook.0)(&report))).is_err() {
        crate::fatal("the detached-panic hook panicked");
    }
    if let Err(nested) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(nested);
        crate::fatal("dropping a detached ULT's panic payload panicked");
    }
}
