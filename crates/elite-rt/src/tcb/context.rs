//! An execution context: a ULT stack with the coroutine that runs ULTs on it, pooled with the
//! stack.

use crate::stack::UltStack;
use crate::switch::Switch;
use corosensei::{Coroutine, Yielder};

/// The coroutine of an execution [`Context`]: resumed with nothing (the processor resuming it
/// has named the ULT to run as its `current`), suspends with a [`Switch`] reason.
pub(crate) type Ult = Coroutine<(), Switch, (), UltStack>;
pub(crate) type UltYielder = Yielder<(), Switch>;

/// An execution context: a ULT stack with a coroutine on it that runs ULTs one after another.
///
/// The coroutine's function (the processor's trampoline) loops: it runs the task of the ULT its
/// resumer names as current, publishes the exit, and suspends with [`Switch::EXIT`]; the next
/// resume, for another ULT, starts that one. So a context is made once per stack and pooled with it (the
/// stack pools hold contexts), and starting a ULT costs a resume instead of building a coroutine.
/// While a context is pooled its coroutine is *at rest*: suspended at the top of its trampoline,
/// with nothing on its stack that needs dropping.
pub(crate) struct Context {
    pub(crate) co: Ult,
    /// Low end of an unguarded stack's canary (0: guarded stack).
    pub(crate) canary_at: usize,
    /// Low end of a guarded stack's guard page (0: unguarded stack).
    pub(crate) guard_at: usize,
    /// Usable bytes of the stack.
    pub(crate) usable: usize,
    /// Set while the coroutine is at rest (see above).
    pub(crate) at_rest: bool,
}

impl Drop for Context {
    fn drop(&mut self) {
        if self.at_rest {
            // SAFETY: at rest the coroutine is suspended in its trampoline between two ULTs, where
            // no live value on its stack has drop glue; resetting it leaks nothing.
            unsafe { self.co.force_reset() };
        }
        // Otherwise dropping `co` unwinds whatever runs on it (corosensei's `Drop`).
    }
}

// SAFETY: this and `Tcb`'s impl below are the audited place that lets a suspended coroutine (which
// corosensei marks !Send because of thread-locals) move between OS threads: a pooled context is at
// rest (its stack holds nothing of any ULT), and a ULT's context moves with its TCB under the
// argument given at `Tcb`'s impl.
unsafe impl Send for Context {}
