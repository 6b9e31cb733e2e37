//! A ULT's exit (DESIGN §3, step 6): publish its outcome, then settle it (recycle a detached
//! TCB, or put it on the deathrow and wake its joiner); clean-up notes from joiners, and the
//! TCBs they give back.

use super::Processor;
use crate::queue::cleanup::NoteBatch;
use crate::tcb::{JoinState, Life, TcbRef, Waiter};

impl Processor {
    /// The ULT's task returned: free its context (and stack) at once, then hand the TCB to the
    /// join protocol.
    #[inline(always)]
    pub(super) fn exit(&self, t: TcbRef) {
        let tcb = t.tcb();
        // SAFETY: the ULT switched out for good (`Switch::EXIT`); this processor owns its context.
        let ctx = unsafe { (*tcb.exec.context.get()).take() };
        if let Some(ctx) = ctx {
            self.put_context(ctx);
        }
        if tcb.head.pinned.get() {
            self.core().pinned_here -= 1; // it started here (pinned ULTs never move)
        }
        if self.core().inline_child == Some(t) {
            // Its joiner started it inline and is waiting right below us on this OS thread with
            // the only handle: nobody else can observe the join state (see `Inline::Finished`).
            self.core().inline_child = None;
            tcb.head.life.set(Life::Exited);
            self.remote().stats.joined_inline.bump();
            return;
        }
        self.settle(t, tcb.exec.exit_prev.get());
    }

    /// The joiner's end of [`Inline::Finished`](super::Inline::Finished): the output was taken, give the TCB back.
    pub(crate) fn reclaim_inline(&self, t: TcbRef) {
        // SAFETY: the joiner owns the finished task and took its outcome (see `Inline::Finished`).
        unsafe { t.tcb().drop_spent_task() };
        // SAFETY: as above, the TCB is the joiner's alone.
        unsafe { t.tcb().reset() };
        self.pool_tcb(t);
        self.remote().handles.drop_one();
    }

    /// Publishes COMPLETE from the exiting ULT itself (its last act, on its own stack), remembering
    /// what the join state held for `settle` on the loop. Skipped when the joiner runs the ULT
    /// through the join fast path (see `exit`).
    pub(crate) fn publish_from_ult(&self, t: TcbRef) {
        if self.core().inline_child == Some(t) {
            return;
        }
        let prev = self.publish(t);
        t.tcb().exec.exit_prev.set(prev);
    }

    /// The exit's step one: publish COMPLETE; a detached ULT's result is dropped at once, by the
    /// caller (the ULT itself, except for a ULT that never got a stack).
    ///
    /// Once COMPLETE is out, a joiner elsewhere may take the result and send a clean-up note; the
    /// note is drained by this processor's loop only after `settle`, which follows on the same
    /// thread, has put the TCB on the deathrow.
    pub(super) fn publish(&self, t: TcbRef) -> usize {
        let tcb = t.tcb();
        tcb.head.exit_processor.set(self.index as u32);
        // Before COMPLETE: once it is out, a joiner elsewhere may reset the TCB (`Tcb::reset`), so
        // nothing of this processor's writes to the TCB may follow it (`settle` writes none).
        tcb.head.life.set(Life::Exited);
        let prev = tcb.head.join.publish_complete();
        if prev & JoinState::DETACHED != 0 {
            // SAFETY: detached and complete: nobody else will read the task.
            unsafe { tcb.drop_task() };
            // Dropping the result ran user code on the ULT, which may have made ULT-local values
            // again: they die now too.
            crate::local::UltLocals(t).destroy();
        }
        prev
    }

    /// The exit's step two, on the loop after the last switch: recycle a detached TCB, or put it on
    /// the deathrow and wake its joiner. Writes nothing to a TCB that a joiner may already have
    /// reset (only the registered waiter, which its joiner does not touch until woken).
    pub(super) fn settle(&self, t: TcbRef, prev: usize) {
        let tcb = t.tcb();
        let waiter = if prev & JoinState::WAITER != 0 {
            // SAFETY: the waiter was written before WAITER was set, and the AcqRel RMW in
            // `publish` saw WAITER.
            unsafe { std::mem::replace(&mut *tcb.links.waiter.get(), Waiter::None) }
        } else {
            Waiter::None
        };
        if prev & JoinState::DETACHED != 0 {
            // (A waiter here registered and then detached: a foreign joiner unwound by its
            // runtime's shutdown; waking it gives up its claim.)
            self.remote().stats.reclaimed_local.bump();
            self.recycle(t);
        } else {
            self.core().deathrow.enter(t);
            self.remote().stats.deathrow_in.bump();
        }
        self.wake_joiner(waiter);
    }

    /// Wakes whoever waited in a join: a ULT of this runtime from here (see `wake`), anyone else
    /// through [`Shared::wake_joiner`](crate::runtime::Shared::wake_joiner).
    #[inline]
    fn wake_joiner(&self, w: Waiter) {
        match w {
            Waiter::None => {}
            Waiter::Ult(u) if self.shared.is_own(u) => self.wake(u),
            other => self.shared.wake_joiner(other),
        }
    }

    /// A joiner running here let go of `t`, which exited on processor `exit` (another one): note it
    /// for that processor (`queue::cleanup`). Notes go out in batches of `NOTE_BATCH`, and all of
    /// them whenever this processor runs out of work, every 61st start-queue take and every 64th
    /// loop round, so a note waits a bounded time.
    #[inline]
    pub(crate) fn note_joined(&self, t: TcbRef, exit: usize) {
        let batch = self.core().notes[exit].get_or_insert_with(NoteBatch::new);
        if batch.add(t) {
            self.flush_notes_to(exit);
        }
    }

    fn flush_notes_to(&self, exit: usize) {
        if let Some(batch) = self.core().notes[exit].take() {
            self.shared.processors[exit].cleanup.push(batch);
        }
    }

    /// Pushes every held-back clean-up note.
    #[cold]
    pub(super) fn flush_notes(&self) {
        for exit in 0..self.shared.processors.len() {
            if self.core().notes[exit].is_some() {
                self.flush_notes_to(exit);
            }
        }
    }

    /// A joiner on this same processor let go of `t`: take it off the deathrow and recycle it.
    /// The TCB was reset by its joiner (see `Tcb::reset`).
    pub(crate) fn reclaim_joined(&self, t: TcbRef) {
        self.core().deathrow.leave();
        self.remote().stats.reclaimed_local.bump();
        self.pool_tcb(t);
    }

    /// Resets a finished TCB and returns it to this processor's pool.
    fn recycle(&self, t: TcbRef) {
        // SAFETY: callers own the finished TCB (detached at exit, or never started and failed).
        unsafe { t.tcb().reset() };
        self.pool_tcb(t);
    }
}
