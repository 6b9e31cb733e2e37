//! The cooperative budget ([`RuntimeBuilder::coop_budget`](crate::RuntimeBuilder::coop_budget)):
//! how many operations on the synchronization primitives a ULT may make in one turn on its
//! processor before the next one yields.
//!
//! A ULT is never preempted. One that loops on operations that never block (a `try_recv` poll,
//! sends on an unbounded channel, a lock nobody else holds) would otherwise keep its processor
//! for as long as the loop lasts, and the ULTs it made ready there (the receiver it sent to,
//! waiting in the `next` slot) would never run: on one processor the loop never ends when it
//! waits for them, and an unbounded channel grows until memory runs out.
//!
//! # The rule
//!
//! * The budget is the running ULT's, kept by its processor (`Processor::budget`, a `Cell` the
//!   owner alone touches): `run_ult` sets it to the configured size at every switch into a ULT,
//!   whatever the ULT switched out for, so a ULT that blocked, yielded or slept starts its turn
//!   with a full budget; the reset is one store on the switch path (of a value read once per
//!   chain of switches).
//! * Each budgeted operation, at its entry and before it does anything, charges one
//!   ([`charge`]): a test that there is a processor, a decrement in memory and a branch, on the
//!   processor that the channels and the mutex look up anyway (the other primitives look it up
//!   for this: two loads). The operations: a channel's `send`, `try_send`, `recv`, `try_recv`,
//!   `recv_timeout` (and so every step of `iter` and `try_iter`); `Mutex::lock` and `try_lock`;
//!   `RwLock::read`, `write`, `try_read`, `try_write`; `Semaphore::acquire`, `try_acquire`,
//!   `acquire_timeout`, `access`; `WaitGroup::wait`; and through these, `ReentrantLock::lock`
//!   and `try_lock` (its mutex, when the caller does not hold it yet) and a `Select` (each
//!   channel it tries, a `try_recv`). Releases (unlocks, sends of permits, notifies, drops) are
//!   never charged: they are what lets others go on.
//! * An operation that finds the budget spent yields first ([`budget_spent`]), as
//!   [`yield_now`](crate::yield_now) does: the ULT goes behind the other ready ULTs of its
//!   processor, and the operation proceeds once it runs again, as the first of its new turn.
//!   Alone on its processor (nothing ready, woken, due or waiting to start), the yield's fast
//!   path resumes it at once. Except when the operation is about to block anyway (a receive
//!   from an empty channel, an acquire with no permit, a lock that is held: each primitive says
//!   so, looking at its state without changing it, and only then): its block is the switch, so
//!   a yield first would only be a second one. Operations that never block (`try_` forms, a
//!   send on an unbounded channel) always yield.
//! * When other ULTs are ready beside it, the yield also wakes a parked processor, if there is
//!   one, which can then steal from the runqueue (the yielder goes there): a processor whose
//!   ULTs keep it busy should not run them one after the other while another sleeps. (A thief
//!   takes a ULT from the `next` slot only once it is stranded there, `queue::next`; after the
//!   yield the slot holds the ULT that runs next, and the others, the yielder among them, are in
//!   the runqueue.)
//!
//! # Where it never yields
//!
//! The yield is skipped, and the budget left spent so that the first operation where a yield is
//! allowed makes it, while the ULT has a wait in progress that is not resolved
//! (`sync::wait::has_unresolved_wait`: between making its wait node and blocking, it may switch
//! only to block) and while it panics (a destructor's operation during an unwind), the two
//! rules of the chaos mode's decision points. Operations of code that is not a ULT's (the loop's
//! own, an OS thread outside the runtime, a [`blocking`](crate::blocking()) call, which runs
//! with no processor) charge nothing or never yield. No operation is charged while a spin lock
//! of the primitives is held: the charge comes before the operation takes its lock, and a
//! primitive's `would_block` takes that lock and lets go of it before any yield. The join
//! fast path runs no primitive itself; a child it starts is a ULT like any other, whose yield
//! ends that run of the fast path as any yield of the child does.
//!
//! # Off
//!
//! With `coop_budget(None)` the budget is set to `u32::MAX` at each switch: the hot path is the
//! same, and a ULT that gets through that many operations without a switch finds it spent, and
//! [`budget_spent`] fills it again without a yield.

use super::Processor;
use crate::slot::current_processor;

/// The budget of a turn unless the builder sets another
/// ([`RuntimeBuilder::coop_budget`](crate::RuntimeBuilder::coop_budget)): 1024 operations of a
/// few to a few tens of nanoseconds each, a turn of microseconds. Smaller budgets make way more
/// often than that needs, and each budget yield reorders the processor's ready ULTs: ULTs that
/// pass work along in a convoy (a ring of semaphores, each ULT taking every permit its
/// neighbour handed it before it blocks) then block and switch more often.
pub const DEFAULT_COOP_BUDGET: u32 = 1024;

/// Charges one operation to the budget of the ULT running on `here` (the caller's
/// `current_processor()`, looked up since its last switch), and returns the processor the
/// operation goes on with: `here`, or when the budget was spent and the ULT yielded, the one it
/// runs on now (looked up again: it may have moved). `would_block`, asked only when the budget
/// is found spent, says whether the operation is about to block anyway (a hint, taken without
/// changing anything): then it does not yield, since its block is a switch, which starts the
/// next turn.
#[inline(always)]
pub(crate) fn charge(here: Option<&Processor>, would_block: impl FnOnce() -> bool) -> Option<&Processor> {
    if let Some(p) = here {
        // One decrement in memory and a branch on its borrow: spent when it was 0 (then it
        // wrapped, and `budget_spent` puts it right).
        let (left, spent) = p.budget.get().overflowing_sub(1);
        p.budget.set(left);
        if spent {
            return budget_spent(would_block);
        }
    }
    here
}

impl Processor {
    /// A full budget, for the ULT being switched in.
    #[inline(always)]
    pub(super) fn refill_budget(&self) {
        self.budget.set(self.budget_turn);
    }

    /// Whether a ULT is ready here besides the running one (in the `next` slot, the yield batch or
    /// the runqueue).
    fn others_ready(&self) -> bool {
        let core = self.core();
        !self.next_is_empty() || !core.batch.is_empty() || self.runq().len() > 0
    }
}

/// The running ULT found its budget spent: yield, unless it may not switch now (see "Where it
/// never yields"). Looks the processor up itself, and returns it as [`charge`] does.
#[cold]
#[inline(never)]
fn budget_spent<'a>(would_block: impl FnOnce() -> bool) -> Option<&'a Processor> {
    let p = current_processor()?;
    if !p.budget_on {
        p.refill_budget(); // off: it only counted down from `u32::MAX`
        return Some(p);
    }
    // Spent: it stays so (0) until a switch refills it, or this yields.
    p.budget.set(0);
    let Some(me) = p.current_ult() else {
        return Some(p); // the loop's own code: the next switch into a ULT refills
    };
    if crate::sync::wait::has_unresolved_wait(me) || std::thread::panicking() {
        return Some(p); // the next operation where a switch is allowed yields
    }
    if would_block() {
        return Some(p); // it blocks: that switch starts the next turn
    }
    p.remote().stats.budget_yields.bump();
    if p.others_ready() {
        p.shared.notify_any();
    }
    // The switch of `yield_now`, for `me`, looked up above.
    // SAFETY: `me` is the processor's current ULT, the one running this code.
    unsafe { crate::switch::switch_out(me, crate::switch::Switch::YIELD) };
    // Resumed with a full budget, perhaps on another processor: the operation that yielded is
    // the first of the turn.
    let p = current_processor()?;
    p.budget.set(p.budget.get().saturating_sub(1));
    Some(p)
}
