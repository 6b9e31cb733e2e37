//! Blocking a ULT (or an OS thread) on a synchronization object, and waking it exactly once.
//!
//! Every primitive of [`crate::sync`] is a small state protected by a [`SpinLock`] (the channels':
//! a [`BiasedSpinLock`], which the processor that keeps taking it takes without an atomic
//! read-modify-write, `sync::bias`) plus one or more [`WaitList`]s of [`WaitNode`]s. A node lives
//! on the waiter's own stack (ELiTE binds a blocked thread to the object it waits on, figure 2.4):
//! linking it costs no allocation, and the list is intrusive and FIFO.
//!
//! # The wait protocol (ELiTE's scheduler model, DESIGN §3 step 4)
//!
//! A waiter decides to wait under the object's lock and keeps holding that lock while it switches
//! out; its node is linked, and the lock released, only after the switch, on the processor's
//! stack. So a node is never visible to a notifier while code still runs on its waiter's stack,
//! and a notifier that finds a node can make its ULT ready at once: there is no race between the
//! waiter's switch and the notifier to settle.
//!
//! ```text
//! waiter (ULT code)      lock object; decide to wait; node = WaitNode::new() (wait = seq << 2)
//!                        node.block(guard, deadline, link): switch out holding the lock; then,
//!                        on the processor's stack: link node; arm a timer entry (seq) if there is
//!                        a deadline; unlock object (an untimed wait whose link only puts the node
//!                        into a list: node.block_on(guard, list, front), the same steps done by
//!                        the processor itself, `Switch::link`)
//! notifier               lock object; unlink node; node.notify():
//!                          untimed wait -> store wait = seq << 2 | NOTIFIED (nobody else can
//!                                          resolve it: the node is reachable only through the
//!                                          object, under its lock)
//!                          timed wait   -> CAS wait: seq, unresolved -> | NOTIFIED (fails: the
//!                                          deadline won; notify someone else)
//!                        then, after unlocking, make the ULT ready (Wake)
//! timer (processor)      CAS wait: seq, unresolved -> | TIMED_OUT; won -> make ready
//! waiter, resumed        NOTIFIED: go on; TIMED_OUT: lock object, unlink the node if linked
//! ```
//! Exactly one of notifier and timer resolves a timed wait (the CAS); an untimed wait has only one
//! possible resolver, the notifier that unlinked the node under the object's lock. The waiter
//! runs again only after it was made ready, through the `next` slot or runqueue of the notifier's
//! own processor (the notifier's OS thread: No Affinity's rule for hand-offs, or any policy whose
//! target is the notifier's processor) or a wake-up stack (`Release` push, `Acquire` drain), so
//! whatever the notifier wrote into the object or the node is visible to it then. Woken on the
//! notifier's processor, it may run there while the processor it blocked on is still finishing
//! the switch's tail: that tail touches neither the node nor the ULT once it has released the
//! object's lock (it returns to the loop, `tests/sync_handoff`). The lock held across the switch costs
//! other parties a wait of one coroutine switch at most; it is the "spin lock that guarded it"
//! of DESIGN §3 step 4.
//!
//! An OS thread waits the same way with a state word in its node instead of the TCB word: it
//! links the node, unlocks, and parks in `std::thread::park` (whose token makes an early unpark
//! harmless).
//!
//! # One wait in several lists (`Select`)
//!
//! A select waits on several channels at once: one node per channel, the first made by
//! [`WaitNode::new`], the others its siblings ([`WaitNode::sibling`]), all of the same wait (a
//! ULT's: the same sequence number; an OS thread's: the first node's state byte). Siblings make
//! the wait one that several notifiers may race for, so every notify of it is a CAS, as for a
//! timed wait: the first wins, a later one fails (and its notifier goes on as when a deadline
//! won). The waiter holds every channel's lock across the switch; after it, the processor links
//! each node and releases the locks; once resumed, the waiter unlinks every node under its
//! channel's lock before its frame goes (`sync::select`).
//!
//! A ULT that would block while it unwinds a panic waits as its OS thread instead, anchored to it
//! (`crate::anchor`: std counts panics per OS thread). Its node, made as a ULT's, becomes its OS
//! thread's before it is linked ([`WaitNode::become_anchored`]; the node's state word then also
//! names the ULT, for the deadlock report): in `block_on` its processor sees the `Switch::link`
//! while `std::thread::panicking()` and links it so ([`anchor_link`]), then its OS thread waits on
//! it before it resumes the ULT; in `block` the ULT does it itself before it would switch
//! (`WaitNode::block_unwinding`). Notifiers see an OS thread's node and unpark that thread.
//!
//! # Who may wake after the object's lock is released
//!
//! A notifier unlinks the node under the object's lock, but making a ULT ready may happen after
//! the lock is released (the common case; the lock stays short). That is safe when the notifier
//! is a ULT of the waiter's own runtime: the runtime cannot be torn down while one of its
//! processors runs code. Any other notifier (an OS thread, a ULT of another runtime) wakes while
//! it still holds the object's lock: the shutdown of the waiter's runtime unwinds the blocked
//! waiter, and the waiter's unwind guard takes the same lock before its stack (and the node) go
//! away, so the wake finishes while the TCB and the runtime are still alive.
//!
//! # What the deadlock report and the chaos mode read here
//!
//! Each list knows what kind of object it belongs to ([`WaitList::of`]); linking a ULT's node
//! records that kind and the list's address in the ULT's TCB (`deadlock::note_wait`, one relaxed
//! store), which the deadlock report reads while the ULT stays blocked (with the processors
//! frozen, see `crate::deadlock`). An OS thread's wait is counted for that report, timed or not.
//! [`Wake::wake`] ends with the chaos mode's decision point (a random yield, only in chaos mode),
//! after the wake-up was delivered and the object's lock released; never between linking a node
//! and blocking (`has_unresolved_wait`).
//!
//! # Switch depth
//!
//! Every call frame between a primitive's entry point and the coroutine switch costs twice per
//! wait: the switch leaves the return-stack buffer full of the other context's return
//! addresses, so when the waiter resumes, each `ret` back out of those frames is mispredicted
//! (and the notifier's frames on the way in were pushed for nothing). In a ping-pong between two
//! ULTs every operation blocks, so these mispredictions are most of what a round trip costs
//! above the bare switch. Hence the blocking paths are shallow: [`WaitNode::block`],
//! [`WaitNode::block_on`] and [`crate::switch::park_ult`] are `#[inline(always)]`, and each
//! primitive inlines its common blocking wait (an untimed one) into its entry point, keeping only
//! what is rare (timed waits, disconnection, lost races) out of line. The untimed waits that only
//! link their node (channels, mutex, rwlock, barrier) use `block_on`: the processor links the node
//! and unlocks itself (`Switch::link`, matched in its `run_ult`) instead of calling a closure
//! through a pointer, a call that cannot be inlined on every such wait (`blocking-probe
//! ping_pong` under callgrind counts the difference). Keep it so when changing a primitive: a
//! new helper between `lock`/`send`/`recv`/`acquire` and `block` should be `#[inline]`, or out
//! of the wait's path; and keep [`crate::processor::Processor::wake`] small enough to inline
//! (rare wake rules out of line), as it sits on every notifier's path; a ULT notifier's deferred wake-up
//! ([`Wake::wake`]) goes through `Processor::follow_ult_waker` (then `Processor::wake`), which settles No Affinity's rule
//! (the default) with one flag before falling back on `wake` (fewer instructions on every
//! round trip of `blocking-probe ping_pong`).
//!
//! # Shutdown
//!
//! A ULT blocked at shutdown is force-unwound where it blocked. Each primitive arms an
//! [`OnUnwind`] guard for the time its node may be linked: on unwind it takes the object's lock,
//! unlinks the node if it is still linked, and gives back what a notifier may have handed over
//! (a lock, a permit).

use crate::atomics::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::deadlock::WaitKind;
use crate::processor::Processor;
use crate::runtime::Shared;
use crate::slot::current_processor;
use crate::tcb::{Tcb, TcbRef};
use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
use std::ptr;
use std::sync::Arc;
use std::thread::Thread;
use std::time::Instant;

const NOTIFIED: u64 = 1;
const TIMED_OUT: u64 = 2;
const RESOLVED: u64 = NOTIFIED | TIMED_OUT;
/// The wait word is `seq << SEQ_SHIFT | outcome`.
const SEQ_SHIFT: u32 = 2;
/// In a ULT's node, its copy of the wait word (`seq << SEQ_SHIFT`, unresolved) has this bit set
/// when the wait has a deadline: the outcome bits are free there (the node never records one).
const NODE_TIMED: u64 = TIMED_OUT;

// An OS thread's wait word (`Who::Thread`): its state in the low bits, and above them the address
// of the ULT that waits as this OS thread, if any (`crate::anchor`), fixed when the node is made.
// One word, so that `Who` stays the size of a ULT's variant (its discriminant in the ULT's
// non-null TCB pointer, no tag of its own).
const T_WAITING: usize = 0;
const T_NOTIFIED: usize = 1;
const T_TIMED_OUT: usize = 2;
const T_STATE: usize = 3;
const _: () = assert!(std::mem::align_of::<Tcb>() > T_STATE);

/// An OS thread's wait word, waiting, for a thread that is `ult`'s if it is a ULT's.
fn thread_wait(ult: Option<TcbRef>) -> AtomicUsize {
    AtomicUsize::new(ult.map_or(0, |t| t.as_ptr() as usize) | T_WAITING)
}

/// The ULT whose OS thread waits with the wait word `w`, if any.
fn waiting_ult(w: &AtomicUsize) -> Option<TcbRef> {
    TcbRef::from_ptr((w.load(Ordering::Relaxed) & !T_STATE) as *mut Tcb)
}

/// The wait word of wait `seq`, notified or not yet resolved (for tests that set one up).
#[cfg(test)]
pub(crate) fn word(seq: u64, notified: bool) -> u64 {
    seq << SEQ_SHIFT | if notified { NOTIFIED } else { 0 }
}

/// True while wait `seq` of `t` is neither notified nor timed out (used to drop stale timers).
pub(crate) fn is_pending(t: TcbRef, seq: u64) -> bool {
    let w = t.tcb().exec.wait.load(Ordering::Acquire);
    w >> SEQ_SHIFT == seq && w & RESOLVED == 0
}

/// True while `t` has started a wait (made its `WaitNode`) that is not resolved yet: from then
/// until it is notified or times out it must not switch but to block (the chaos mode asks).
pub(crate) fn has_unresolved_wait(t: TcbRef) -> bool {
    let w = t.tcb().exec.wait.load(Ordering::Relaxed);
    w >> SEQ_SHIFT != 0 && w & RESOLVED == 0
}

/// The processor's timer for wait `seq` of `t` came due: resolve the wait as timed out. Returns
/// true if this won the race against any notifier (the caller then makes `t` ready).
pub(crate) fn time_out(t: TcbRef, seq: u64) -> bool {
    resolve(&t.tcb().exec.wait, seq, TIMED_OUT).is_some()
}

/// CAS the wait word from "wait `seq`, unresolved" to `| how`; the previous word if this won.
#[inline]
fn resolve(w: &AtomicU64, seq: u64, how: u64) -> Option<u64> {
    let mut cur = w.load(Ordering::Relaxed);
    loop {
        if cur >> SEQ_SHIFT != seq || cur & RESOLVED != 0 {
            return None;
        }
        match w.compare_exchange_weak(cur, cur | how, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Some(cur),
            Err(now) => cur = now,
        }
    }
}

enum Who {
    /// `word`: the unresolved wait word of this wait, `seq << SEQ_SHIFT`, plus [`NODE_TIMED`]
    /// for a timed wait (set before the node is linked: only then can a timer race the
    /// notifier). `runtime`: the ULT's runtime (the shared state of the processor it blocks on),
    /// which a notifier compares with its own without reaching into the TCB's chunk.
    Ult { tcb: TcbRef, word: Cell<u64>, runtime: *const Shared },
    /// An OS thread's wait: `state` is its wait word, which also names the ULT whose thread it
    /// is, when a ULT waits as its OS thread (`crate::anchor`: one that unwinds and made the node
    /// on its processor, anchoring before it parks, or one anchored already).
    Thread { thread: Thread, state: AtomicUsize },
    /// Another node of the wait of an OS thread whose first node, a `Thread`, this points to
    /// ([`WaitNode::sibling`]): it is resolved through that node's state.
    ThreadOf(*const WaitNode),
}

/// One waiter, on its own stack, linked into a [`WaitList`] of the object it waits on.
///
/// `tag` and `slot` carry what the object and its notifier exchange (a handed-over lock, a
/// permit count, a pointer to a value being sent); they are read and written under the object's
/// lock, or by the waiter after it was notified.
pub(crate) struct WaitNode {
    prev: Cell<*const WaitNode>,
    /// The next node in the list, null for the last; [`UNLINKED`] while the node is in no list.
    next: Cell<*const WaitNode>,
    /// Written only before the node is linked: the node of a ULT that must not switch (it unwinds
    /// a panic) becomes an OS thread's ([`WaitNode::become_anchored`]).
    who: UnsafeCell<Who>,
    pub(crate) tag: Cell<usize>,
    pub(crate) slot: Cell<*mut ()>,
}

impl WaitNode {
    /// A node for the calling ULT (which starts a new wait in its TCB), or for the calling OS
    /// thread when it is not a ULT.
    #[inline]
    pub(crate) fn new() -> WaitNode {
        WaitNode::new_on(current_processor())
    }

    /// [`WaitNode::new`] with the caller's `current_processor()`, looked up since its last switch
    /// (a channel looks it up once per operation, for its lock and its node).
    #[inline]
    pub(crate) fn new_on(here: Option<&Processor>) -> WaitNode {
        let who = match here.and_then(|p| Some((p.current_ult()?, p))) {
            Some((tcb, p)) => {
                let w = &tcb.tcb().exec.wait;
                // Only this ULT starts its waits; earlier ones are all resolved (it runs), and a
                // stale timer's CAS fails on the new sequence number.
                let seq = (w.load(Ordering::Relaxed) >> SEQ_SHIFT) + 1;
                w.store(seq << SEQ_SHIFT, Ordering::Relaxed);
                Who::Ult { tcb, word: Cell::new(seq << SEQ_SHIFT), runtime: Arc::as_ptr(&p.shared) }
            }
            None => {
                std::hint::cold_path(); // (an OS thread's wait costs a park anyway)
                Who::Thread { thread: std::thread::current(), state: thread_wait(crate::anchor::anchored()) }
            }
        };
        WaitNode::of(who)
    }

    /// An unlinked node of the waiter `who`.
    #[inline(always)]
    fn of(who: Who) -> WaitNode {
        WaitNode {
            prev: Cell::new(ptr::null()),
            next: Cell::new(UNLINKED),
            who: UnsafeCell::new(who),
            tag: Cell::new(0),
            slot: Cell::new(ptr::null_mut()),
        }
    }

    /// Another node of this node's wait, for a waiter that waits in several lists at once (a
    /// `Select` over several channels): whichever node a notifier (or the deadline) resolves
    /// first resolves the wait, and a notify through any other fails, as a notify of a timed
    /// wait whose deadline won. A ULT's nodes share its wait's sequence number, and all of them
    /// are resolved by compare-and-swap on its wait word (as a timed wait is, `NODE_TIMED`); an
    /// OS thread's refer to the first node's state. Only the first node blocks ([`block`]).
    ///
    /// A ULT that unwinds a panic waits as its OS thread (`crate::anchor`): its first node becomes
    /// its OS thread's here, before any sibling is made, so that every sibling refers to it.
    ///
    /// # Safety
    /// `self` stays where it is, alive, for as long as the returned node (or any other sibling)
    /// may be linked or notified.
    ///
    /// [`block`]: WaitNode::block
    pub(crate) unsafe fn sibling(&self) -> WaitNode {
        if let Who::Ult { tcb, .. } = self.who() {
            if std::thread::panicking() {
                std::hint::cold_path();
                let t = *tcb;
                self.become_anchored(t); // (no reference into `who` is held across this)
            }
        }
        let who = match self.who() {
            Who::Ult { tcb, word, runtime } => {
                // Several notifiers may race for this wait now: they must CAS. (Set before any
                // node is linked: the wait has no notifier yet.)
                word.set(word.get() | NODE_TIMED);
                Who::Ult { tcb: *tcb, word: Cell::new(word.get()), runtime: *runtime }
            }
            Who::Thread { .. } => Who::ThreadOf(self),
            Who::ThreadOf(first) => Who::ThreadOf(*first),
        };
        WaitNode::of(who)
    }

    #[inline(always)]
    fn who(&self) -> &Who {
        // SAFETY: written only before the node is linked (`become_anchored`), by its waiter or by
        // its processor while the waiter is switched out, and no reference taken here before that
        // write is used after it (`block` copies the TCB out and goes to `block_unwinding`;
        // `block_on` copies it out before it switches).
        unsafe { &*self.who.get() }
    }

    /// [`WaitNode::block`] of `t`, the ULT that made this node, while it unwinds a panic: the
    /// node becomes an OS thread's (its wait in `t`'s TCB is resolved: nothing will resolve it
    /// there), then `t` waits as an OS thread does, anchored to this OS thread first
    /// (`crate::anchor::wait`, once the node is linked and the object unlocked).
    #[cold]
    #[inline(never)]
    fn block_unwinding<S, R>(
        &self,
        t: TcbRef,
        guard: SpinGuard<'_, S>,
        deadline: Option<Instant>,
        link: impl FnOnce(&mut S, &WaitNode) -> R,
    ) -> bool {
        self.become_anchored(t);
        let Who::Thread { state, .. } = self.who() else {
            crate::fatal("a node made an OS thread's is not");
        };
        let mut g = guard;
        let after = link(&mut g, self);
        drop(g);
        drop(after);
        crate::anchor::wait(Some(t), deadline.is_some(), || Self::park_thread(state, deadline))
    }

    /// Makes this node, made by the ULT `t` and not linked yet, the node of the calling OS thread
    /// (`t`'s, to which `t` anchors), and resolves `t`'s wait in its TCB (nothing will resolve it
    /// there now). Called by `t` itself, or by its processor after `t` switched out to link it.
    fn become_anchored(&self, t: TcbRef) {
        let w = &t.tcb().exec.wait;
        w.store(w.load(Ordering::Relaxed) | NOTIFIED, Ordering::Release);
        let thread = Who::Thread { thread: std::thread::current(), state: thread_wait(Some(t)) };
        // SAFETY: the node is in no list, and the object's lock is held (by its waiter, or on its
        // behalf): nobody else reads it; no reference to `who` taken before is used after this.
        unsafe { *self.who.get() = thread };
    }

    /// Whether the node is in a list. Read under the object's lock.
    #[inline]
    pub(crate) fn is_linked(&self) -> bool {
        self.next.get() != UNLINKED
    }

    /// Blocks on the object whose lock `guard` holds, until a notifier resolves the wait (true) or
    /// `deadline` passes first (false). `link` links the node into the object's state; what it
    /// returns is dropped once the object's lock is released (a condition variable's mutex guard,
    /// released only when the node is linked).
    ///
    /// Called by the ULT or thread that made the node. A ULT switches out still holding the lock;
    /// `link`, the timer and the unlock run after the switch, on its processor's stack (module
    /// docs). An OS thread links, unlocks and parks.
    /// After `false` the node may still be linked: the caller unlinks it under the object's lock.
    ///
    /// Always inlined, as [`crate::switch::park_ult`] under it: see "Switch depth" in the module
    /// docs.
    #[inline(always)]
    pub(crate) fn block<S, R>(
        &self,
        guard: SpinGuard<'_, S>,
        deadline: Option<Instant>,
        link: impl FnOnce(&mut S, &WaitNode) -> R,
    ) -> bool {
        match self.who() {
            Who::Ult { tcb, word, .. } => {
                if std::thread::panicking() {
                    // It must not switch while it unwinds (`crate::anchor`).
                    return self.block_unwinding(*tcb, guard, deadline, link);
                }
                let (t, seq) = (*tcb, word.get() >> SEQ_SHIFT);
                if deadline.is_some() {
                    word.set(word.get() | NODE_TIMED);
                }
                debug_assert!(current_processor().and_then(|p| p.current_ult()) == Some(t));
                match deadline {
                    // Two closures, so that an untimed wait (the common one, its `None` known where
                    // `block` is inlined) saves and reads back nothing of a timer.
                    None => {
                        let after_switch = move |_, _: &Processor| {
                            let mut g = guard;
                            let after = link(&mut g, self);
                            drop(g);
                            drop(after);
                        };
                        // SAFETY: a node is made by the ULT that then blocks on it, `t`, which runs
                        // this.
                        unsafe { crate::switch::park_ult(t, after_switch) };
                    }
                    Some(d) => {
                        let after_switch = move |me, p: &Processor| {
                            let mut g = guard;
                            let after = link(&mut g, self);
                            p.add_wait_timer(d, me, seq);
                            drop(g);
                            drop(after);
                        };
                        // SAFETY: as above.
                        unsafe { crate::switch::park_ult(t, after_switch) };
                    }
                }
                t.tcb().exec.wait.load(Ordering::Acquire) & NOTIFIED != 0
            }
            Who::Thread { state, .. } => {
                let mut g = guard;
                let after = link(&mut g, self);
                drop(g);
                drop(after);
                // Counted for the deadlock report (`crate::deadlock`): a timed wait of an OS
                // thread runs again by itself, an untimed one only when someone wakes it (an
                // anchored ULT's: `crate::anchor::wait`).
                crate::anchor::wait(waiting_ult(state), deadline.is_some(), || {
                    Self::park_thread(state, deadline)
                })
            }
            Who::ThreadOf(_) => crate::fatal("a wait blocks through its first node"),
        }
    }

    /// An untimed [`WaitNode::block`] whose link is "put the node into `list(state)`" (at its
    /// front with `front`): returns once a notifier resolved the wait. A ULT switches out with a
    /// [`Switch::link`](crate::switch::Switch) that its processor handles directly
    /// ([`link_after_switch`]), with no closure to move and call behind the switch.
    ///
    /// Always inlined, as `block`: see "Switch depth" in the module docs.
    #[inline(always)]
    pub(crate) fn block_on<S>(
        &self,
        guard: SpinGuard<'_, S>,
        list: impl FnOnce(&mut S) -> &mut WaitList,
        front: bool,
    ) {
        let mut g = guard;
        match self.who() {
            Who::Ult { tcb, .. } => {
                // (A ULT that unwinds is anchored by its processor after the switch, instead of
                // linked: `anchor_link`.)
                let t = *tcb;
                debug_assert!(current_processor().and_then(|p| p.current_ult()) == Some(t));
                let list: *mut WaitList = list(&mut g);
                // Held across the switch; the processor releases it once the node is linked.
                let lock = g.into_held();
                // On this frozen stack while the processor reads it: the switch carries one
                // word, its address and `front` (it crosses the switch in a register).
                let to = LinkTo { node: self, list, lock };
                // SAFETY: a node is made by the ULT that then blocks on it, `t`, which runs this.
                unsafe { crate::switch::switch_out(t, crate::switch::Switch::link(&to, front)) };
            }
            Who::Thread { state, .. } => {
                std::hint::cold_path();
                let l = list(&mut g);
                if front {
                    l.push_front(self);
                } else {
                    l.push_back(self);
                }
                drop(g);
                crate::anchor::wait(waiting_ult(state), false, || Self::park_thread(state, None));
            }
            Who::ThreadOf(_) => crate::fatal("a wait blocks through its first node"),
        }
    }

    /// An OS thread's wait, its node linked: park until notified (true) or the deadline (false).
    fn park_thread(state: &AtomicUsize, deadline: Option<Instant>) -> bool {
        let ult = state.load(Ordering::Relaxed) & !T_STATE;
        loop {
            match state.load(Ordering::Acquire) & T_STATE {
                T_NOTIFIED => return true,
                T_TIMED_OUT => return false,
                _ => {}
            }
            match deadline {
                None => std::thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        if state
                            .compare_exchange(
                                ult | T_WAITING,
                                ult | T_TIMED_OUT,
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            )
                            .is_ok()
                        {
                            return false;
                        }
                    } else {
                        std::thread::park_timeout(d - now);
                    }
                }
            }
        }
    }

    /// Resolves the wait as notified; called under the object's lock, with the node unlinked.
    /// `None`: the waiter timed out first (it is gone; notify someone else). `Some(w)`: the waiter
    /// is notified; call [`Wake::wake`] once the object's lock is released.
    #[inline(always)]
    pub(crate) fn notify(&self) -> Option<Wake> {
        self.notify_on(current_processor())
    }

    /// [`WaitNode::notify`] with the caller's `current_processor()`, looked up since its last
    /// switch (see [`WaitNode::new_on`]).
    #[inline(always)]
    pub(crate) fn notify_on(&self, here: Option<&Processor>) -> Option<Wake> {
        if let Who::Ult { tcb, word, runtime } = self.who() {
            let w = word.get();
            if w & NODE_TIMED == 0 {
                // Untimed, and linked only after its ULT switched out: nobody but us, under the
                // object's lock, can resolve it (module docs), so a store does.
                tcb.tcb().exec.wait.store(w | NOTIFIED, Ordering::Release);
                return Some(Self::wake_ult(*tcb, *runtime, here));
            }
        }
        self.notify_slow()
    }

    /// [`WaitNode::notify_on`] and the wake-up, for a notifier holding the object's lock `g`:
    /// `Ok` once the waiter is notified, the lock released and the wake-up delivered; `Err(g)`
    /// (nothing done, the lock still held) when the waiter's deadline won. Its common case inline
    /// (an untimed wait of a ULT of the runtime of the ULT notifying it, running on `here`: a store,
    /// the unlock, and the wake-up from here), the others out of line.
    #[inline(always)]
    pub(crate) fn notify_unlock<'a, S>(
        &self,
        g: SpinGuard<'a, S>,
        here: Option<&Processor>,
    ) -> Result<(), SpinGuard<'a, S>> {
        if let (Some(p), Who::Ult { tcb, word, runtime }) = (here, self.who()) {
            let w = word.get();
            if w & NODE_TIMED == 0 && ptr::eq(*runtime, Arc::as_ptr(&p.shared)) && p.current_ult().is_some() {
                // As in `notify_on`: untimed, so the store resolves it.
                tcb.tcb().exec.wait.store(w | NOTIFIED, Ordering::Release);
                let t = *tcb;
                drop(g);
                Wake::Ult(t, p).wake();
                return Ok(());
            }
        }
        std::hint::cold_path();
        match self.notify_general(here) {
            Some(w) => {
                drop(g);
                w.wake();
                Ok(())
            }
            None => Err(g),
        }
    }

    /// [`WaitNode::notify_on`], out of line: [`WaitNode::notify_unlock`] past its common case.
    #[inline(never)]
    fn notify_general(&self, here: Option<&Processor>) -> Option<Wake> {
        self.notify_on(here)
    }

    /// [`WaitNode::notify`] of a timed wait or of an OS thread.
    #[cold]
    fn notify_slow(&self) -> Option<Wake> {
        match self.who() {
            Who::Ult { tcb, word, runtime } => {
                let t = *tcb;
                resolve(&t.tcb().exec.wait, word.get() >> SEQ_SHIFT, NOTIFIED)?; // fails: the deadline won
                Some(Self::wake_ult(t, *runtime, current_processor()))
            }
            Who::Thread { thread, state, .. } => {
                let th = thread.clone(); // the node may be gone once the state says NOTIFIED
                let ult = state.load(Ordering::Relaxed) & !T_STATE; // (fixed for the node's life)
                state
                    .compare_exchange(ult | T_WAITING, ult | T_NOTIFIED, Ordering::AcqRel, Ordering::Relaxed)
                    .ok()?;
                Some(Wake::Thread(th))
            }
            // SAFETY: the first node outlives its siblings (`sibling`'s contract).
            Who::ThreadOf(first) => unsafe { &**first }.notify_slow(),
        }
    }

    /// The wake-up of a notified ULT `t` of the runtime `runtime`: deferred past the object's
    /// lock when we are a ULT of that runtime, done now otherwise (module docs).
    #[inline(always)]
    fn wake_ult(t: TcbRef, runtime: *const Shared, here: Option<&Processor>) -> Wake {
        match here.filter(|p| p.current_ult().is_some() && ptr::eq(runtime, Arc::as_ptr(&p.shared))) {
            Some(p) => Wake::Ult(t, p),
            None => Self::wake_foreign(t, runtime),
        }
    }

    /// [`WaitNode::wake_ult`] by anyone but a ULT of `t`'s runtime: wakes now, under the object's
    /// lock (module docs).
    #[cold]
    #[inline(never)]
    fn wake_foreign(t: TcbRef, runtime: *const Shared) -> Wake {
        // SAFETY: the waiter cannot be unwound (and its runtime freed) before its guard takes the
        // object's lock, which our caller holds.
        unsafe { &*runtime }.wake(t, None);
        Wake::Nothing
    }
}

/// A wake-up to deliver after the object's lock is released (before the notifier switches).
#[must_use]
pub(crate) enum Wake {
    Nothing,
    /// A ULT to make ready from `Processor`, the notifier's processor (valid until the notifier
    /// switches, which it does not do before delivering).
    Ult(TcbRef, *const Processor),
    Thread(Thread),
}

impl Wake {
    /// Always inlined: it is on every notifier's path ("Switch depth", module docs).
    #[inline(always)]
    pub(crate) fn wake(self) {
        match self {
            Wake::Ult(t, p) => {
                // SAFETY: the processor runs the notifier, which has not switched since `notify`.
                let p = unsafe { &*p };
                if !p.follow_ult_waker(t) {
                    p.wake(t);
                    p.decision_point(); // (no switch since: still the processor running us)
                }
            }
            other => {
                other.deliver();
                crate::processor::decision_point();
            }
        }
    }

    /// The wake-up without the chaos mode's decision point (a batch has one, after its last).
    #[inline(always)]
    fn deliver(self) {
        match self {
            Wake::Nothing => {}
            Wake::Ult(t, p) => {
                // SAFETY: the processor runs the notifier, which has not switched since `notify`.
                let p = unsafe { &*p };
                if !p.follow_ult_waker(t) {
                    p.wake(t);
                }
            }
            Wake::Thread(th) => th.unpark(),
        }
    }
}

/// Wake-ups collected under a lock, delivered after it (`notify_all`, a barrier's release).
#[derive(Default)]
pub(crate) struct Wakes(Vec<Wake>);

impl Wakes {
    pub(crate) fn push(&mut self, w: Wake) {
        if !matches!(w, Wake::Nothing) {
            self.0.push(w);
        }
    }

    pub(crate) fn wake_all(self) {
        for w in self.0 {
            w.deliver(); // no switch between two: each `Wake::Ult` names the notifier's processor
        }
        crate::processor::decision_point();
    }
}

/// A node's `next` while it is in no list: an address no node has (nor null, the last node's).
const UNLINKED: *const WaitNode = ptr::dangling();

/// An intrusive FIFO of [`WaitNode`]s, kept under the object's [`SpinLock`].
///
/// It keeps no count: linking and unlinking are on every blocking path, counting is not
/// ([`WaitList::len`] walks the list).
pub(crate) struct WaitList {
    head: *const WaitNode,
    tail: *const WaitNode,
    /// What its waiters wait on, for the deadlock report (`crate::deadlock`).
    kind: WaitKind,
}

// SAFETY: the list only holds addresses of nodes whose waiters keep them alive while linked; it
// is only touched under its object's lock.
unsafe impl Send for WaitList {}

impl WaitList {
    /// A list of waiters on something the deadlock report names [`WaitKind::Other`].
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) const fn new() -> WaitList {
        WaitList::of(WaitKind::Other)
    }

    /// A list of waiters on a `kind` of object: a ULT linked here is reported as waiting on
    /// `kind`, at this list's address (inside the object), if the runtime deadlocks.
    pub(crate) const fn of(kind: WaitKind) -> WaitList {
        WaitList { head: ptr::null(), tail: ptr::null(), kind }
    }

    /// Records in a linking ULT's TCB what it is about to block on (`deadlock::note_wait`), also
    /// when it waits as its OS thread while it unwinds (`deadlock::note_anchored_wait`).
    #[inline]
    fn note(&self, n: &WaitNode) {
        match n.who() {
            Who::Ult { tcb, .. } => {
                crate::deadlock::note_wait(*tcb, self.kind, self as *const WaitList as usize)
            }
            Who::Thread { state, .. } => {
                if let Some(t) = waiting_ult(state) {
                    crate::deadlock::note_anchored_wait(t, self.kind, self as *const WaitList as usize)
                }
            }
            Who::ThreadOf(_) => {} // (its first node's list is the one reported)
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// The number of linked nodes, by walking the list (for `Debug` output and tests).
    pub(crate) fn len(&self) -> usize {
        let mut n = 0;
        let mut at = self.head;
        while let Some(x) = self.node(at) {
            n += 1;
            at = x.next.get();
        }
        n
    }

    /// Appends `n`. The node must stay alive (its waiter blocked) until it is unlinked.
    #[inline]
    pub(crate) fn push_back(&mut self, n: &WaitNode) {
        self.note(n);
        self.link_back(n);
    }

    /// [`WaitList::push_back`] without the note for the deadlock report (its caller made it).
    #[inline]
    fn link_back(&mut self, n: &WaitNode) {
        debug_assert!(!n.is_linked());
        n.next.set(ptr::null());
        n.prev.set(self.tail);
        if let Some(t) = self.node(self.tail) {
            t.next.set(n);
        } else {
            self.head = n;
        }
        self.tail = n;
    }

    /// Puts `n` first (a waiter that lost a race for the object keeps its place).
    #[inline(never)]
    pub(crate) fn push_front(&mut self, n: &WaitNode) {
        debug_assert!(!n.is_linked());
        self.note(n);
        n.prev.set(ptr::null());
        n.next.set(self.head);
        if let Some(h) = self.node(self.head) {
            h.prev.set(n);
        } else {
            self.tail = n;
        }
        self.head = n;
    }

    /// Unlinks and returns the first node. The reference is not tied to the list's borrow (the
    /// caller goes on updating the object's state), but it is valid only until the caller
    /// notifies the node or releases the object's lock, whichever comes first: after either, the
    /// waiter may return and its stack frame (the node) is gone.
    ///
    /// The first node has no predecessor: only its successor's back link changes (what
    /// [`WaitList::remove`] would do, without its checks; this is on every notifier's path).
    #[inline]
    pub(crate) fn pop_front<'a>(&mut self) -> Option<&'a WaitNode> {
        let n = self.node(self.head)?;
        let next = n.next.get();
        self.head = next;
        match self.node(next) {
            Some(x) => x.prev.set(ptr::null()),
            None => self.tail = ptr::null(),
        }
        n.next.set(UNLINKED);
        Some(n)
    }

    /// Unlinks `n` if it is linked (in this list).
    pub(crate) fn remove(&mut self, n: &WaitNode) {
        if !n.is_linked() {
            return;
        }
        match self.node(n.prev.get()) {
            Some(p) => p.next.set(n.next.get()),
            None => self.head = n.next.get(),
        }
        match self.node(n.next.get()) {
            Some(x) => x.prev.set(n.prev.get()),
            None => self.tail = n.prev.get(),
        }
        n.next.set(UNLINKED);
    }

    #[inline]
    fn node<'a>(&self, p: *const WaitNode) -> Option<&'a WaitNode> {
        // SAFETY: every non-null pointer in the list is a linked node, kept alive by its blocked
        // waiter until a holder of the object's lock unlinks it (see `push_back`).
        unsafe { p.as_ref() }
    }
}

/// What [`WaitNode::block_on`] asks of its processor with a `Switch::link`: link `node` into
/// `list` (at its front when the switch says so), then release the object's spin lock `lock`. It
/// lives on the blocked ULT's frozen stack until the processor has done so (aligned for the
/// switch's word).
#[repr(align(8))]
pub(crate) struct LinkTo {
    node: *const WaitNode,
    list: *mut WaitList,
    lock: *const AtomicBool,
}

impl LinkTo {
    /// The address of the list `to` links into, inside the object blocked on (what the trace
    /// names, `crate::trace`).
    ///
    /// # Safety
    /// `to` comes from a `Switch::link` whose ULT has not been resumed (as for
    /// [`link_after_switch`]).
    pub(crate) unsafe fn object(to: *const LinkTo) -> usize {
        // SAFETY: per the contract, `to` is alive on the blocked ULT's frozen stack.
        unsafe { (*to).list as usize }
    }
}

/// The processor's half of [`WaitNode::block_on`] (a `Switch::link`): links the node of the ULT
/// that just switched out into the object's list (at its front with `front`), then releases the
/// object's lock that the ULT held across the switch (the wait protocol, module docs: from the
/// unlock on, a notifier may pop the node and wake the ULT).
///
/// # Safety
/// `to` comes from a `block_on` whose ULT, `t`, has switched out and not been resumed: it and the node
/// live on its frozen stack, and the list is inside the object whose spin lock `to.lock` is held
/// (for this call to release).
#[inline(always)]
pub(crate) unsafe fn link_after_switch(to: *const LinkTo, front: bool, t: TcbRef) {
    // SAFETY: per the contract, `to` is alive (the ULT stays switched out until the unlock below
    // lets a notifier wake it, and nothing reads `to` after that).
    let LinkTo { node, list, lock } = unsafe { &*to };
    // SAFETY: per the contract, the list is ours under the held lock and the node alive.
    let (list, node) = unsafe { (&mut **list, &**node) };
    if front {
        std::hint::cold_path();
        list.push_front(node); // (rare: a mutex waiter that lost a race; not inlined)
    } else {
        // The node is `t`'s (a ULT's): its note for the deadlock report without looking.
        crate::deadlock::note_wait(t, list.kind, list as *const WaitList as usize);
        list.link_back(node);
    }
    // SAFETY: per the contract, the lock is held (by the switched-out waiter, on our behalf).
    unsafe { (**lock).store(false, Ordering::Release) };
}

/// The processor's half of a [`WaitNode::block_on`] whose ULT, `t`, unwinds a panic (`Switch::link`
/// seen while `std::thread::panicking()`): instead of [`link_after_switch`], the node becomes the
/// node of this OS thread (`t`'s, to which `t` is anchored next, `crate::anchor`), is linked as
/// such, and the object's lock is released. Returns the node's wait word, which this thread waits
/// on, as `t`, before it resumes `t` (`crate::anchor::run`): `t` then returns from `block_on`
/// notified, as usual.
///
/// # Safety
/// As for [`link_after_switch`].
#[cold]
#[inline(never)]
pub(crate) unsafe fn anchor_link(to: *const LinkTo, front: bool, t: TcbRef) -> *const AtomicUsize {
    // SAFETY: per the contract, `to` and the node are alive on `t`'s frozen stack, and the list is
    // ours under the held lock.
    let LinkTo { node, list, lock } = unsafe { &*to };
    // SAFETY: as above.
    let (list, node) = unsafe { (&mut **list, &**node) };
    node.become_anchored(t);
    if front {
        list.push_front(node);
    } else {
        list.push_back(node); // (with its note for the deadlock report, as anchored)
    }
    let Who::Thread { state, .. } = node.who() else {
        crate::fatal("a node made an OS thread's is not");
    };
    let wait: *const AtomicUsize = state;
    // SAFETY: per the contract, the lock is held on the waiter's behalf.
    unsafe { (**lock).store(false, Ordering::Release) };
    wait
}

/// The wait of a ULT anchored by [`anchor_link`], on its OS thread: parks until its node is
/// notified.
///
/// # Safety
/// `wait` is the wait word of a linked node of the calling OS thread, alive until this returns.
pub(crate) unsafe fn park_anchored(wait: *const AtomicUsize) {
    // SAFETY: per the contract.
    WaitNode::park_thread(unsafe { &*wait }, None);
}

/// Runs a closure if dropped while armed: the clean-up of a wait when the waiter is force-unwound
/// at shutdown (module docs). [`OnUnwind::disarm`] on the normal path.
pub(crate) struct OnUnwind<F: FnMut()>(Option<F>);

impl<F: FnMut()> OnUnwind<F> {
    #[inline]
    pub(crate) fn new(f: F) -> Self {
        OnUnwind(Some(f))
    }

    #[inline]
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnMut()> Drop for OnUnwind<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.as_mut() {
            f()
        }
    }
}

/// The short internal lock of a synchronization object: test-and-test-and-set, never held across
/// a call into user code, and across a switch only by a waiter switching out to its processor,
/// which releases it right after (see [`WaitNode::block`]), so a holder always finishes within a
/// few hundred instructions (unless its OS thread is preempted by the kernel; spinners then yield
/// the CPU).
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through the guard, which the lock makes exclusive.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) const fn new(value: T) -> SpinLock<T> {
        SpinLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        acquire(&self.locked);
        SpinGuard { flag: &self.locked, value: &self.value }
    }
}

/// Takes a spin lock's word.
#[inline(always)]
fn acquire(locked: &AtomicBool) {
    if locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        acquire_slow(locked);
    }
}

/// [`acquire`] past a taken word: waits (the holder's OS thread may have been preempted) until
/// the word looks free, then tries again.
#[cold]
fn acquire_slow(locked: &AtomicBool) {
    let mut spins = 0u32;
    loop {
        while locked.load(Ordering::Relaxed) {
            super::bias::wait_a_little(&mut spins);
        }
        if locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            return;
        }
    }
}

/// A [`SpinLock`] that biases itself towards the processor that keeps taking it (`sync::bias`):
/// code on that processor then takes and releases it with plain stores. The channels' lock (a
/// ping-pong takes one per operation, usually from a single processor).
pub(crate) struct BiasedSpinLock<T> {
    locked: AtomicBool,
    bias: super::bias::Bias,
    /// Under `locked` (the unbiased lock) only.
    streak: UnsafeCell<super::bias::Streak>,
    value: UnsafeCell<T>,
}

// SAFETY: the value (and the streak) are only reached by the lock's holder, which the lock and
// its bias protocol make exclusive (`sync::bias`).
unsafe impl<T: Send> Sync for BiasedSpinLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for BiasedSpinLock<T> {}

impl<T> BiasedSpinLock<T> {
    /// An unlocked, unbiased lock around `value`.
    pub(crate) fn new(value: T) -> BiasedSpinLock<T> {
        BiasedSpinLock {
            locked: AtomicBool::new(false),
            bias: super::bias::Bias::new(),
            streak: UnsafeCell::new(super::bias::Streak::new()),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock: through the owner's path when it is biased to the caller's processor,
    /// else through the lock word (revoking another processor's bias; `sync::bias`).
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        self.lock_on(current_processor())
    }

    /// [`BiasedSpinLock::lock`] with the caller's `current_processor()`, looked up since its last
    /// switch (see [`WaitNode::new_on`]).
    #[inline(always)]
    pub(crate) fn lock_on(&self, here: Option<&Processor>) -> SpinGuard<'_, T> {
        if let Some(p) = here {
            if self.bias.try_owner(p.uid) {
                return SpinGuard { flag: self.bias.held(), value: &self.value };
            }
            return self.lock_unbiased(p.uid);
        }
        self.lock_unbiased(0)
    }

    /// The value, for a caller holding the lock through a [`HeldLock`].
    ///
    /// # Safety
    /// The caller holds this lock (a [`HeldLock`] of it, alive), and makes no other reference to
    /// the value while the returned one lives.
    #[allow(clippy::mut_from_ref)] // the lock, held by the caller, makes it exclusive
    pub(crate) unsafe fn held_value(&self) -> &mut T {
        // SAFETY: per the contract, the lock makes the access exclusive.
        unsafe { &mut *self.value.get() }
    }

    #[inline(never)]
    fn lock_unbiased(&self, me: usize) -> SpinGuard<'_, T> {
        acquire(&self.locked);
        // SAFETY: the streak is only touched under `locked`, which we hold.
        self.bias.after_lock(unsafe { &mut *self.streak.get() }, me);
        SpinGuard { flag: &self.locked, value: &self.value }
    }
}

/// The holder's access to a locked [`SpinLock`] or [`BiasedSpinLock`]: dropping it releases the
/// flag it was taken through (the lock's word, or a biased lock's owner flag).
pub(crate) struct SpinGuard<'a, T> {
    flag: &'a AtomicBool,
    value: &'a UnsafeCell<T>,
}

impl<'a, T> SpinGuard<'a, T> {
    /// Gives up the guard without unlocking: the lock stays held until someone stores `false`
    /// into the returned flag ([`link_after_switch`]).
    #[inline(always)]
    fn into_held(self) -> *const AtomicBool {
        let l: *const AtomicBool = self.flag;
        std::mem::forget(self);
        l
    }

    /// The guard without the value: the lock stays held until the [`HeldLock`] is dropped (a
    /// `Select` holds the locks of channels of different element types together).
    pub(crate) fn hold(self) -> HeldLock<'a> {
        // SAFETY: the flag is the one this guard holds, and outlives `'a`.
        HeldLock(unsafe { &*self.into_held() })
    }
}

/// A held [`SpinLock`] or [`BiasedSpinLock`] whose value is reached some other way
/// ([`SpinGuard::hold`]); dropping it unlocks.
pub(crate) struct HeldLock<'a>(&'a AtomicBool);

impl Drop for HeldLock<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.flag.store(false, Ordering::Release);
    }
}

/// The wait list and the spin lock on their own, from plain OS threads and with small sizes, so that
/// they also run under Miri (`.ci/run`), which checks them for data races and leaks.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_list_is_fifo_with_front_insertion_and_removal_anywhere() {
        // Nodes of the calling OS thread (not a ULT), as `sync` makes them outside a runtime.
        let n: Vec<WaitNode> = (0..5).map(|_| WaitNode::new()).collect();
        let mut list = WaitList::new();
        assert!(list.is_empty());
        list.push_back(&n[0]);
        list.push_back(&n[1]);
        list.push_back(&n[2]);
        list.push_front(&n[3]); // a waiter that lost a race keeps its place
        assert_eq!(list.len(), 4);
        list.remove(&n[1]);
        assert!(!n[1].is_linked());
        list.remove(&n[1]); // unlinked already: nothing happens
        list.push_back(&n[4]);
        let order: Vec<*const WaitNode> =
            std::iter::from_fn(|| list.pop_front().map(|x| x as *const WaitNode)).collect();
        let expect: Vec<*const WaitNode> = [3, 0, 2, 4].iter().map(|&i| ptr::addr_of!(n[i])).collect();
        assert_eq!(order, expect);
        assert!(list.is_empty());
        assert_eq!(list.len(), 0, "the count follows the links");
        assert!(n.iter().all(|x| !x.is_linked()));
    }

    #[test]
    fn spin_lock_serializes_its_holders() {
        const THREADS: usize = 3;
        const EACH: usize = 20;
        let lock = Arc::new(SpinLock::new(Vec::new()));
        let hs: Vec<_> = (0..THREADS)
            .map(|i| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for k in 0..EACH {
                        let mut v = lock.lock();
                        // A non-atomic read-modify-write: a data race here would be caught by Miri.
                        let len = v.len();
                        v.push((i, k));
                        assert_eq!(v.len(), len + 1);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(lock.lock().len(), THREADS * EACH);
    }
}
