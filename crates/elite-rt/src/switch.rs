//! Where a ULT leaves its stack: the reason it switches back to its resumer ([`Switch`]), what a
//! park carries ([`Park`]), and the calls that switch out ([`park_current`], [`park_ult`],
//! [`switch_out`], [`suspend`]). The synchronization objects, timers and ULT-local values block
//! and yield through here without reaching into the processor loop, which finishes each
//! transition after the switch (`processor::run`). A ULT in the middle of unwinding a panic does
//! not switch to another ULT's turn: it anchors to its OS thread (`crate::anchor`), through a park
//! whose action hands the processor over (`crate::blocking::switched`).

use crate::processor::Processor;
use crate::slot::current_processor;
use crate::sync::wait::LinkTo;
use crate::tcb::TcbRef;
use std::time::Instant;

/// Why a ULT switched back to its processor, in one word: corosensei passes a value of at most
/// a word through the switch in a register, a larger one through memory on the switching stack,
/// which the other side then reads back (a store and a dependent load on every switch). The low
/// three bits are the kind; the kinds that carry something carry the address of a value on the
/// switched-out ULT's frozen stack (aligned to 8 on every target, so those bits are free), valid
/// until the ULT is resumed, which cannot happen before its resumer has dealt with it.
///
/// * Link (`Switch::link`, with a kind of its own for a link at the list's front): block on a
///   synchronization object with an untimed wait (`WaitNode::block_on`): after the switch the
///   resumer links the node into the object's list and releases the object's spin lock, held
///   across the switch, as the `LinkTo` says (`crate::sync::wait::link_after_switch`); what a
///   park would do with a closure, without the closure's indirect call and moves.
/// * Park (`Switch::park`): block; after the switch the resumer (a processor) calls
///   `park.action(park, me, itself)`, which must arrange for someone to wake `me` later (or
///   wake it at once). The action of a blocking call (`crate::blocking::switched`) may also hand
///   the processor to another OS thread: the resumer's thread then touches nothing of the
///   processor after the action returns and leaves the loop at the top of the next round.
/// * Sleep (`Switch::sleep`): sleep until the deadline.
/// * [`Switch::YIELD`]: let others run; stay ready.
/// * [`Switch::EXIT`]: the ULT's task returned and its exit is published: the context is free for
///   another ULT.
/// * [`Switch::REJOIN`]: an anchored ULT whose unwinding is over goes back to a processor; only
///   the thread it is anchored to sees it (`crate::anchor::run`), never a processor.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Switch(usize);

impl Switch {
    const KIND: usize = 0b111;
    pub(crate) const LINK: usize = 0;
    pub(crate) const LINK_FRONT: usize = 1;
    pub(crate) const PARK: usize = 2;
    pub(crate) const SLEEP: usize = 3;
    /// Let others run; stay ready.
    pub(crate) const YIELD: Switch = Switch(4);
    /// The task returned, its exit published.
    pub(crate) const EXIT: Switch = Switch(5);
    /// An anchored ULT rejoins a processor (`crate::anchor`).
    pub(crate) const REJOIN: Switch = Switch(6);
    /// Not a reason a ULT gives: what the processor makes of a [`Switch::YIELD`] of a ULT that
    /// unwinds a panic (anchor it, `crate::anchor`).
    pub(crate) const ANCHOR: Switch = Switch(7);

    #[inline(always)]
    fn with<T>(at: *const T, kind: usize) -> Switch {
        const { assert!(std::mem::align_of::<T>() > Self::KIND) };
        debug_assert!(!at.is_null());
        Switch(at as usize | kind)
    }

    /// Block with an untimed wait: link as `to` says, then unlock (at the list's front with
    /// `front`).
    #[inline(always)]
    pub(crate) fn link(to: &LinkTo, front: bool) -> Switch {
        Switch::with(to, if front { Self::LINK_FRONT } else { Self::LINK })
    }

    /// Block; the resumer calls `park.action`.
    #[inline(always)]
    pub(crate) fn park(park: *const Park) -> Switch {
        Switch::with(park, Self::PARK)
    }

    /// Sleep until the deadline.
    #[inline(always)]
    pub(crate) fn sleep(deadline: &Deadline) -> Switch {
        Switch::with(deadline, Self::SLEEP)
    }

    #[inline(always)]
    pub(crate) fn kind(self) -> usize {
        self.0 & Self::KIND
    }

    #[inline(always)]
    pub(crate) fn at<T>(self) -> *const T {
        (self.0 & !Self::KIND) as *const T
    }
}

/// What a [`Switch::park`] carries: the action its resumer calls with the `Park`'s own address
/// (the first field of a `#[repr(C)]` value on the blocked ULT's frozen stack that holds what the
/// action needs, `crate::switch::park_ult`), the ULT and the resumer.
#[repr(C, align(8))]
pub(crate) struct Park {
    /// Called once by the resumer after the switch, with this `Park`'s address (that of the
    /// value holding it, alive on the frozen stack until the ULT is resumed), the ULT and itself.
    pub(crate) action: unsafe fn(*const Park, TcbRef, &Processor),
}

/// What a [`Switch::sleep`] carries: the deadline (aligned for the switch's word).
#[repr(align(8))]
pub(crate) struct Deadline(pub(crate) Instant);

/// Suspends the running ULT; after the switch, whoever resumed it (the processor loop, or a joiner
/// running it through the join fast path) calls `after(me, processor)` on its own stack, with the
/// processor that runs that code.
#[inline(always)]
pub(crate) fn park_current<F: FnOnce(TcbRef, &Processor)>(after: F) {
    let Some(me) = current_processor().and_then(|p| p.current_ult()) else {
        crate::fatal("park outside a ULT");
    };
    // SAFETY: `me` is the ULT running this code.
    unsafe { park_ult(me, after) }
}

/// [`park_current`] for a caller that knows which ULT it is (no thread-local lookup).
///
/// Always inlined: its frame would sit between the blocking primitive and the switch (see
/// "Switch depth" in `crate::sync::wait`).
///
/// # Safety
/// `me` is the ULT running the caller.
#[inline(always)]
pub(crate) unsafe fn park_ult<F: FnOnce(TcbRef, &Processor)>(me: TcbRef, after: F) {
    /// The action and the closure, on this frozen stack while the resumer runs them (the
    /// action's `Park` is the first field: its address is the holder's).
    #[repr(C)]
    struct Holder<F> {
        park: Park,
        after: Option<F>,
    }
    /// The `Park`'s action: runs the closure (once, whatever the calls).
    ///
    /// # Safety
    /// `park` is the `park` field of a live `Holder<F>`, derived from a pointer to all of it.
    unsafe fn call<F: FnOnce(TcbRef, &Processor)>(park: *const Park, me: TcbRef, p: &Processor) {
        // SAFETY: `park` is the first field of the `Holder<F>` below, alive on the suspended ULT's
        // stack (and derived from a pointer to all of it); the closure is taken once.
        if let Some(f) = unsafe { (*(park as *mut Holder<F>)).after.take() } {
            f(me, p)
        }
    }
    let mut holder = Holder { park: Park { action: call::<F> }, after: Some(after) };
    let why = Switch::park(&mut holder as *mut Holder<F> as *const Park);
    // SAFETY: `me` runs this code (contract).
    unsafe { switch_out(me, why) };
}

/// Switches the running ULT `me` back to its resumer with `why` (for example a `Switch::link`:
/// its untimed wait's node to link after the switch; see `crate::sync::wait::WaitNode::block_on`).
/// Always inlined, as [`park_ult`].
///
/// # Safety
/// `me` is the ULT running the caller.
#[inline(always)]
pub(crate) unsafe fn switch_out(me: TcbRef, why: Switch) {
    let y = me.tcb().exec.yielder.get();
    // SAFETY: `me` runs this code (contract), so its yielder, set when it started on its context,
    // lives on its stack.
    unsafe { (*y).suspend(why) };
}

/// Switches the running ULT back to its processor with `why`.
#[inline]
pub(crate) fn suspend(why: Switch) {
    let Some(p) = current_processor() else {
        crate::fatal("suspend outside a ULT");
    };
    let Some(me) = p.current_ult() else {
        crate::fatal("no current ULT on a processor");
    };
    // SAFETY: `me` is the processor's current ULT, the one running this code.
    unsafe { switch_out(me, why) };
}
