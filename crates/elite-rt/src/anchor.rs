//! Anchored ULTs: a ULT that would switch while it unwinds a panic stays on its OS thread, and
//! runs there alone, until its unwinding is over.
//!
//! # Why
//!
//! std counts panics per OS thread: a panic raises the count of the thread it starts on, and the
//! `catch_unwind` that ends it lowers the count of the thread it ends on. `std::thread::panicking()`
//! reads that count, and so do the guards that decide poisoning (std's, and ours in `sync`). A ULT
//! that switches in the middle of its unwinding (a destructor that locks, receives, joins, yields
//! or sleeps) would leave its count on the OS thread while other ULTs run there (they would see
//! `panicking() == true`, and a lock they hold across a panic of their own would not be poisoned),
//! and could go on on another OS thread, whose count does not include its panic (its guards would
//! not poison; catching the panic there would leave both threads' counts wrong for the rest of the
//! process). So the runtime keeps this invariant:
//!
//! > An OS thread whose panic count is not zero runs only the ULT that is unwinding on it, and that
//! > ULT does not leave the OS thread before its unwinding is over.
//!
//! Then what `panicking()` answers inside a ULT is the ULT's own state, and poisoning follows the
//! ULT that panicked.
//!
//! # How
//!
//! Before a ULT would switch, the runtime asks `std::thread::panicking()` on the ULT's OS thread:
//!
//! * a wait in a [`sync`](crate::sync) object that only links its node (`WaitNode::block_on`:
//!   channels, `Mutex`, `RwLock`, `Barrier`, an untimed `Semaphore` acquire): on the processor's
//!   side, after the switch, where the node would be linked (`processor::run`,
//!   `sync::wait::anchor_link`): the node becomes the OS thread's and is linked as such, and the
//!   ULT is anchored, its thread waiting for the node's notification before it resumes the ULT;
//! * any other wait in a `sync` object (`WaitNode::block`: timed waits, `Condvar`, `WaitGroup`): on
//!   the ULT's side, before the switch (`WaitNode::block_unwinding`: the node becomes the OS
//!   thread's, the ULT anchors once it is linked and the object unlocked, then waits as its
//!   thread);
//! * [`yield_now`](crate::yield_now): on the processor's side, after the switch, where the yield is
//!   handled (`processor::run`, `Switch::ANCHOR`): the yielder is anchored instead of requeued;
//! * [`sleep`](crate::sleep), a join's wait, [`blocking`](crate::blocking()): on the ULT's side; and
//!   the join fast path is not taken by an unwinding joiner (the child would run on the joiner's
//!   thread, whose count is the joiner's).
//!
//! std answers from its process-wide count of panics first: while no thread of the process
//! panics, the question is a load of that count through the GOT, a mask and a branch. The hot
//! paths pay it once per wait or yield, on the processor's side where they can (one copy of the
//! code, not one per call site of a primitive); `scripts/hot-paths.sh` tracks them.
//!
//! When the answer is yes, the ULT *anchors* ([`anchor`]; from the yield's side the processor
//! does the same for the ULT that switched out): it switches out to its processor with a park
//! whose action is `blocking::switched`, as a blocking call does, and the processor is handed to a
//! spare OS thread by the blocking hand-off protocol (`crate::blocking`, "Anchored ULTs", with its
//! differences). The "call" that this OS thread then runs, on its own stack and with no processor,
//! is the ULT itself: it resumes the ULT's coroutine ([`run`]), so that the ULT goes on where it
//! switched out, on the same OS thread, with the thread-local [`anchored`] naming it. From then on
//! the ULT is a plain OS thread to the runtime: its waits park the thread (its wait nodes are an
//! OS thread's), `yield_now` and `sleep` act on the thread, `blocking` calls its function, spawns
//! go to its runtime. What names it stays: [`current`](crate::current), `ult_local!` values, the
//! stack-overflow report and the deadlock report find it through [`anchored`].
//!
//! It *rejoins* a processor at its next wait, join, `yield_now`, `sleep` or `blocking` once `panicking()` is
//! false again (its panic was caught, by the ULT's own `catch_unwind`), and at its end (the runtime
//! caught the panic): it switches back to [`run`] ([`Switch::REJOIN`]), which ends the "call", and
//! the thread takes its processor back if the spare has not taken it over yet, or else gives the
//! ULT to a processor as a blocking call that returns does, and becomes a spare. Where it looks:
//! after each of its waits in a `sync` object ([`after_wait`]: the wait is over, its node in no
//! list, or timed out, which no notifier can resolve any more), before a `sleep` or `blocking`
//! ([`at_switch_point`]), before and after a join's wait, and at its exit (the trampoline,
//! `processor::alloc`: its exit is published from a processor), and at a `yield_now` (`thread`'s
//! `yield_thread`). A `yield_now` of an anchored ULT that still unwinds only yields its OS thread.
//!
//! # Where the invariant costs something else
//!
//! * A processor on which a pinned ULT lives is not handed over (its pinned ULTs would change OS
//!   thread), nor one for which no thread can be started: the ULT runs anchored on the
//!   processor's own thread, and the processor is out of service until the ULT rejoins, as with a
//!   blocking call made there. The ULT's waits then must not depend on ULTs that only that
//!   processor runs (with one processor: on any other ULT), or they never end.
//! * A ULT started by the join fast path runs on its joiner's stack, whose resumer is in the middle
//!   of the joiner's run and cannot hand the processor over. It notes the child in the processor
//!   (`Core::pending_anchor`) and returns to the joiner, which goes on to its join's wait (the
//!   child has not finished) running only runtime code; that wait, which asks `panicking()` too
//!   (the child's count is on the thread), finds the note ([`join_while_unwinding`]): the joiner
//!   blocks as usual, and after its switch the loop's bottom frame anchors the child.
//! * A mutex's gathering does not move an unwinding ULT (`sync::mutex::gather`), and the chaos
//!   mode's decision points do not yield in one (`processor::chaos`).
//! * At shutdown no hand-over is possible any more: an anchoring thread leaves its processor,
//!   counted as stopped, runs the ULT as a call in flight at the close, and cancels it itself once
//!   it rejoins (`blocking::switched`).
//!
//! Shutdown's forced unwinding of cancelled ULTs needs no anchor: it runs on the thread that drops
//! the runtime (or on the thread of a call that returns after the close), which runs no processor
//! and nothing else meanwhile; the walk never unwinds an anchored ULT (it is in the registry's
//! `in_call`, as a ULT whose call runs).
//!
//! # What the deadlock report sees
//!
//! An anchored ULT counts as a blocking call in flight (`blocking::Registry::in_flight`), so the
//! report does not fire while it runs; while it waits without a deadline in an elite object or a
//! join it is taken off that count ([`wait`], [`unwatched`]) and its TCB records what it waits on,
//! marked as anchored (`deadlock::note_anchored_wait`): the report lists it as a blocked ULT, in
//! the middle of unwinding a panic (`BlockedUlt::unwinding`). Its timed waits keep it counted (it
//! runs again by itself). A ULT anchored on a processor that was not handed over (pinned) keeps
//! that processor from parking, so no report comes while it waits.

use crate::atomics::AtomicUsize;
use crate::processor::Processor;
use crate::slot::current_processor;
use crate::switch::Switch;
use crate::tcb::{Tcb, TcbRef};
use corosensei::CoroutineResult;
use std::cell::Cell;
use std::ptr;

thread_local! {
    /// The ULT anchored to this OS thread (null: none): set by [`run`] while it runs the ULT.
    static ANCHORED: Cell<*mut Tcb> = const { Cell::new(ptr::null_mut()) };
}

/// The ULT anchored to the calling OS thread, if any: the ULT calling this, when it runs with no
/// processor because it switched while it unwound.
///
/// Never inlined: the thread-local's address must be looked up again after every switch (as for
/// `slot::current_processor`), and an anchored ULT switches when it rejoins.
#[inline(never)]
pub(crate) fn anchored() -> Option<TcbRef> {
    TcbRef::from_ptr(ANCHORED.with(|a| a.get()))
}

/// Anchors `me`, the ULT running this on a processor, which is unwinding: switches out to the
/// processor, which hands itself over (see the module docs) and resumes `me` on this same OS
/// thread, anchored, with no processor. Returns there.
///
/// # Safety
/// `me` is the ULT running the caller, on a processor.
#[cold]
#[inline(never)]
pub(crate) unsafe fn anchor(me: TcbRef) {
    let call = crate::blocking::CallRef::anchor(me, ptr::null());
    // SAFETY: `me` runs this code (contract); the action runs on the processor's stack after the
    // switch.
    unsafe { crate::switch::park_ult(me, move |t, p| crate::blocking::switched(p, t, call)) };
    debug_assert!(current_processor().is_none() && anchored() == Some(me));
}

/// The "call" an anchoring thread runs for the ULT `t`: resumes its coroutine on this thread,
/// which runs no processor, until it rejoins. With `wait` (not null), `t` switched out blocked on
/// an OS thread's node of this thread (its wait word is `wait`: `sync::wait::anchor_link`): the
/// thread first waits, as `t`, until the node is notified.
///
/// # Safety
/// `t` is a started ULT suspended on this OS thread to anchor there, and this thread holds it under
/// the blocking protocol (`InCall`, the ULT in `in_call`) and runs no processor; `wait`, if not
/// null, is the wait word of a node on `t`'s frozen stack.
pub(crate) unsafe fn run(t: TcbRef, wait: *const AtomicUsize) {
    let outer = ANCHORED.with(|a| a.replace(t.as_ptr()));
    if !wait.is_null() {
        // SAFETY: per the contract, the node lives until `t` resumes, below.
        unwatched(|| unsafe { crate::sync::wait::park_anchored(wait) });
    }
    // SAFETY: per the contract the ULT is suspended and this thread alone may resume it; its
    // context is Some from its start until its exit (which it reaches only on a processor).
    let ctx = unsafe { (*t.tcb().exec.context.get()).as_mut() }
        .unwrap_or_else(|| crate::fatal("an anchored ULT without a context"));
    match ctx.co.resume(()) {
        CoroutineResult::Yield(why) if why == Switch::REJOIN => {}
        CoroutineResult::Yield(_) => crate::fatal("an anchored ULT switched but to rejoin"),
        CoroutineResult::Return(()) => crate::fatal("a ULT context returned"),
    }
    ANCHORED.with(|a| a.set(outer));
}

/// Rejoins: the anchored ULT `t`, running this and no longer unwinding, switches back to [`run`],
/// which gives it back to a processor. Returns on a processor.
#[cold]
#[inline(never)]
fn rejoin(t: TcbRef) {
    debug_assert!(!std::thread::panicking() && current_processor().is_none());
    let y = t.tcb().exec.yielder.get();
    // SAFETY: `t` runs this code, so its yielder, set when it started on its context, lives on its
    // stack; the resumer is `run`, on this thread.
    unsafe { (*y).suspend(Switch::REJOIN) };
}

/// At a switch point outside a processor: an anchored ULT whose unwinding is over rejoins a
/// processor (true; it returns on one), anyone else is left alone (false).
#[cold]
pub(crate) fn rejoin_if_done() -> bool {
    match anchored() {
        Some(t) if !std::thread::panicking() => {
            rejoin(t);
            true
        }
        _ => false,
    }
}

/// At a switch point that is not on a hot path (`sleep`, `blocking`, a join's OS-thread wait): a
/// ULT on a processor that unwinds anchors; an anchored ULT whose unwinding is over rejoins. The
/// caller then looks `current_processor()` up again.
#[cold]
pub(crate) fn at_switch_point() {
    match current_processor().and_then(|p| p.current_ult()) {
        Some(me) if std::thread::panicking() => {
            // SAFETY: `me` is the processor's current ULT, the one running this.
            unsafe { anchor(me) }
        }
        Some(_) => {}
        None => {
            rejoin_if_done();
        }
    }
}

/// The wait of an OS thread's node in a `sync` object, its node linked and the object unlocked:
/// `park` until it is over, by a thread that may be a ULT's: `ult` is the ULT that made the node
/// (while unwinding, on a processor: it anchors first, now that the object's lock is released;
/// or anchored already). Counted for the deadlock report as the waiter is: an OS thread's wait in
/// `OsWait`, an anchored ULT's untimed wait by leaving the calls in flight (see the module docs).
/// Afterwards an anchored ULT that no longer unwinds rejoins a processor.
#[inline]
pub(crate) fn wait<R>(ult: Option<TcbRef>, timed: bool, park: impl FnOnce() -> R) -> R {
    match ult {
        None => crate::deadlock::OsWait::during(timed, park),
        Some(t) => anchored_wait(t, timed, park),
    }
}

#[cold]
#[inline(never)]
fn anchored_wait<R>(t: TcbRef, timed: bool, park: impl FnOnce() -> R) -> R {
    if current_processor().is_some() {
        // SAFETY: a node names the ULT that made it, which then blocks on it: `t` runs this, and
        // has not switched since it made the node on its processor.
        unsafe { anchor(t) };
    }
    let r = if timed { park() } else { unwatched(park) };
    after_wait();
    r
}

/// Runs `wait`, an anchored ULT's wait that only someone else can end, with the ULT taken off the
/// calls in flight meanwhile (the deadlock report may then list it).
#[cold]
pub(crate) fn unwatched<R>(wait: impl FnOnce() -> R) -> R {
    let Some(shared) = crate::blocking::calling_runtime() else {
        return wait(); // (not reached: an anchored ULT's thread runs it as its call)
    };
    let _aside = shared.blocking.wait_aside();
    wait()
}

/// After an anchored ULT's wait in a `sync` object: rejoin if the unwinding is over.
#[cold]
pub(crate) fn after_wait() {
    rejoin_if_done();
}

/// The wait of `me`'s join of `t` while `panicking()` says yes on `me`'s processor `p`: either a
/// child that the join fast path started below `me` is unwinding (`Core::pending_anchor`, see the
/// module docs: `me` joins it, blocks as usual, and the child anchors after the switch), or `me`
/// itself unwinds: it anchors, then waits as an OS thread. `register` is the join's usual action
/// after the switch (it registers `me` as `t`'s joiner).
///
/// # Safety
/// `me` is the ULT running the caller, on `p`.
#[cold]
#[inline(never)]
pub(crate) unsafe fn join_while_unwinding(
    p: &Processor,
    me: TcbRef,
    t: TcbRef,
    register: impl FnOnce(TcbRef, &Processor),
    wait_off_processor: impl FnOnce(TcbRef),
) {
    if let Some(call) = p.take_pending_anchor() {
        let crate::blocking::CallRef::Anchor { ult: child, .. } = call else {
            crate::fatal("a pending anchor that anchors nothing");
        };
        debug_assert!(child == t, "a pending anchor that is not the joined child");
        let after = move |me, q: &Processor| {
            register(me, q);
            crate::blocking::switched(q, child, call);
        };
        // SAFETY: `me` runs this (contract).
        unsafe { crate::switch::park_ult(me, after) };
        return;
    }
    // SAFETY: per the contract.
    unsafe { anchor(me) };
    wait_off_processor(t);
}

/// At the end of ULT `t` off a processor: `t` is anchored, its unwinding over (the runtime caught
/// its panic), and rejoins a processor to publish its exit there. Returns that processor.
#[cold]
#[inline(never)]
pub(crate) fn rejoin_at_exit<'a>(t: TcbRef) -> &'a Processor {
    if anchored() != Some(t) || std::thread::panicking() {
        crate::fatal("a ULT exited off its processor");
    }
    rejoin(t);
    current_processor().unwrap_or_else(|| crate::fatal("a ULT rejoined no processor"))
}
