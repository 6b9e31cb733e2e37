//! [`Select`] and [`select!`](crate::select): receive from whichever of several channels is ready
//! first, blocking the ULT (or parking the OS thread) until one is.
//!
//! # Protocol
//!
//! A select is a receive on several channels at once, with one outcome.
//!
//! ```text
//! 1. try:    try_recv on each channel (from a rotating start); a value, or a channel with
//!            no sender left, is the outcome (the value goes into that operation's slot)
//! 2. lock:   lock the distinct channels in address order (two selects over the same channels
//!            cannot deadlock; other operations hold one channel lock at a time); a channel
//!            where a receive would not block (a value queued, a sender blocked, no sender
//!            left) -> unlock them all, back to 1
//! 3. block:  one node per operation: the first made for this wait, the others its siblings
//!            (`WaitNode::sibling`: one wait, resolved through whichever node first); switch
//!            out holding every lock; after the switch the processor links each node into its
//!            channel's receive list, then releases the locks (the wait protocol, `sync::wait`,
//!            with several lists)
//! 4. notify: a sender pops one of the nodes, writes its value into that operation's slot and
//!            notifies: the first notify resolves the wait (a CAS); a later one, through a
//!            sibling, fails, and that sender takes its value back and goes on (to the next
//!            receiver, or the queue), as it does for a receiver whose deadline won. The last
//!            sender's drop notifies with the slot left empty.
//! 5. woken:  unlink every node under its channel's lock (after which no sender can reach a
//!            slot); at most one slot is full (the one notify that won): that is the outcome;
//!            none (the deadline won, or a channel lost its senders) -> back to 1
//! ```
//!
//! No wake-up is lost: every channel was seen idle under its lock, and the locks are released
//! only once the nodes are in the lists, so a value sent after that finds a node. No value is
//! lost or duplicated: a value is either in the channel, or in exactly one slot whose notify won,
//! and the selector reads slots only after unlinking their nodes. Shutdown unwinds a blocked
//! select at its switch: it unlinks every node, and a value a sender handed over just before is
//! dropped with the `Select`.

use super::wait::{HeldLock, OnUnwind, SpinLock, WaitNode};
use std::fmt;
use std::time::{Duration, Instant};

/// What an operation found when it tried without blocking.
pub(crate) enum Ready {
    /// A value, now in the operation's slot.
    Value,
    /// No sender left and nothing queued: a receive would fail at once.
    Disconnected,
    /// A receive would block.
    Not,
}

/// A channel as a [`Select`] sees it, its element type `T` erased; `slot` is always a pointer to
/// the operation's `Option<T>` of that channel's `T`.
pub(crate) trait SelectChan {
    /// Receives into `slot` if that needs no waiting.
    ///
    /// # Safety
    /// `slot` points to a live `Option<T>` of this channel's `T`, empty, touched by nobody else.
    unsafe fn try_take(&self, slot: *mut ()) -> Ready;

    /// Locks the channel if a receive would block now (step 2 of the protocol); `None`, with the
    /// lock released, if it would not.
    fn lock_if_idle(&self) -> Option<HeldLock<'_>>;

    /// Appends `node` to the channel's receive list.
    ///
    /// # Safety
    /// The caller holds the channel's lock (a `HeldLock` from `lock_if_idle`).
    unsafe fn link_locked(&self, node: &WaitNode);

    /// Removes `node` from the channel's receive list if it is still there, under its lock.
    fn unlink(&self, node: &WaitNode);

    /// Whether the slot holds a value.
    ///
    /// # Safety
    /// As for `try_take`, except that it may be full; no node pointing to it is linked.
    unsafe fn slot_is_full(&self, slot: *mut ()) -> bool;
}

/// A receiver a [`Select`] can wait on: elite's [`mpsc::Receiver`](super::mpsc::Receiver) and
/// [`mpmc::Receiver`](super::mpmc::Receiver) (the trait is sealed).
pub trait SelectReceiver<T>: sealed::Sealed {
    /// The receiver's channel, for `Select`.
    #[doc(hidden)]
    fn select_chan(&self) -> ChanRef<'_>;
}

impl<R: sealed::Sealed + ?Sized> sealed::Sealed for &R {}

/// A reference to a receiver is one too (so that `select!` takes either).
impl<T, R: SelectReceiver<T> + ?Sized> SelectReceiver<T> for &R {
    fn select_chan(&self) -> ChanRef<'_> {
        (**self).select_chan()
    }
}

/// A receiver's channel, as [`SelectReceiver`] hands it to [`Select`] (opaque).
#[doc(hidden)]
pub struct ChanRef<'a>(pub(crate) &'a dyn SelectChan);

pub(crate) mod sealed {
    /// Only elite's receivers are [`SelectReceiver`](super::SelectReceiver)s.
    pub trait Sealed {}
}

/// One operation of a [`Select`]: its channel and the slot its value arrives in.
struct Op<'a> {
    chan: &'a dyn SelectChan,
    /// A boxed `Option<T>` of the channel's `T`, freed by `free`.
    slot: *mut (),
    free: unsafe fn(*mut ()),
}

/// Frees an operation's slot (and drops a value left in it).
///
/// # Safety
/// `p` came from `Box::into_raw(Box<Option<T>>)` and is freed once.
unsafe fn free_slot<T>(p: *mut ()) {
    // SAFETY: per the contract.
    drop(unsafe { Box::from_raw(p as *mut Option<T>) });
}

/// Waits on several receive operations at once and completes the first that is ready, like
/// crossbeam-channel's `Select` (receive operations): add receivers with
/// [`recv`](Select::recv), which gives each operation its index, then
/// [`select`](Select::select) blocks the calling ULT (not its processor; an OS thread parks)
/// until one of them can complete, and returns it as a [`SelectedOperation`], whose
/// [`recv`](SelectedOperation::recv) gives its result.
///
/// An operation is ready when a receive would not block: a value is there, or no sender is left
/// (then its result is `Err(RecvError)`). If several are ready, the one chosen varies from call to
/// call (a rotating start), so that none starves. The selected operation has already taken its
/// value: complete it with `recv` on the same receiver. One that is dropped without that keeps
/// its value in the `Select`, and the next `select` (or `try_select`, `select_timeout`) returns
/// it again first; dropping the `Select` drops it.
///
/// [`select!`](crate::select) is the same with crossbeam's macro syntax, for a fixed list of
/// receivers.
///
/// ```
/// use elite_rt::sync::{mpmc, mpsc, Select};
/// use std::time::Duration;
///
/// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
/// rt.block_on(|| {
///     let (tx_words, words) = mpsc::channel::<&str>();
///     let (tx_numbers, numbers) = mpmc::channel::<u32>();
///     let sender = elite_rt::spawn(move || {
///         elite_rt::sleep(Duration::from_millis(5));
///         tx_numbers.send(7).unwrap();
///         (tx_words, tx_numbers)
///     });
///     let mut sel = Select::new();
///     let w = sel.recv(&words);
///     let n = sel.recv(&numbers);
///     // Blocks this ULT (the sender runs meanwhile) until one of them has a value.
///     let op = sel.select();
///     assert_eq!(op.index(), n);
///     assert_eq!(op.recv(&numbers), Ok(7));
///     let (tx_words, tx_numbers) = sender.join().unwrap();
///     // With no sender left, an operation is ready too, with an error.
///     drop(tx_numbers);
///     let op = sel.select();
///     assert_eq!(op.index(), n);
///     assert!(op.recv(&numbers).is_err());
///     tx_words.send("hello").unwrap();
///     // (`numbers` is still ready: `try_select` may choose either.)
///     let op = sel.try_select().unwrap();
///     if op.index() == w {
///         assert_eq!(op.recv(&words), Ok("hello"));
///     } else {
///         assert!(op.recv(&numbers).is_err());
///     }
/// });
/// ```
pub struct Select<'a> {
    ops: Vec<Op<'a>>,
    /// An operation that took its value but was not completed (returned first next time).
    pending: Option<usize>,
    /// Where the next try starts (rotating, so that no ready operation starves).
    start: usize,
}

// A `Select` is neither `Send` nor `Sync` (its erased slots and channels cannot say whether their
// `T` is `Send`): it stays with the ULT or thread that made it.

impl<'a> Select<'a> {
    /// A `Select` with no operations.
    pub fn new() -> Select<'a> {
        Select { ops: Vec::new(), pending: None, start: 0 }
    }

    /// Adds a receive operation on `r` and returns its index (0 for the first added, then 1...).
    pub fn recv<T, R: SelectReceiver<T>>(&mut self, r: &'a R) -> usize {
        let slot = Box::into_raw(Box::new(None::<T>)) as *mut ();
        self.ops.push(Op { chan: r.select_chan().0, slot, free: free_slot::<T> });
        self.ops.len() - 1
    }

    /// Completes an operation that is ready now, if any.
    pub fn try_select(&mut self) -> Result<SelectedOperation<'_, 'a>, TrySelectError> {
        match self.run(None) {
            Some((index, full)) => Ok(SelectedOperation { sel: self, index, full, done: false }),
            None => Err(TrySelectError),
        }
    }

    /// Blocks until an operation is ready and completes it. With no operations, blocks forever.
    pub fn select(&mut self) -> SelectedOperation<'_, 'a> {
        loop {
            if let Some((index, full)) = self.run(Some(None)) {
                return SelectedOperation { sel: self, index, full, done: false };
            }
        }
    }

    /// As [`select`](Select::select), giving up after `timeout`.
    pub fn select_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<SelectedOperation<'_, 'a>, SelectTimeoutError> {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.select_deadline(deadline),
            None => Ok(self.select()),
        }
    }

    /// As [`select`](Select::select), giving up at `deadline`.
    pub fn select_deadline(
        &mut self,
        deadline: Instant,
    ) -> Result<SelectedOperation<'_, 'a>, SelectTimeoutError> {
        match self.run(Some(Some(deadline))) {
            Some((index, full)) => Ok(SelectedOperation { sel: self, index, full, done: false }),
            None => Err(SelectTimeoutError),
        }
    }

    /// The protocol (module docs): `deadline` `None` to only try, `Some(None)` to wait as long as
    /// it takes. The selected operation's index, and whether its slot holds a value (else its
    /// channel has no sender left); `None` when nothing was ready in time.
    fn run(&mut self, deadline: Option<Option<Instant>>) -> Option<(usize, bool)> {
        if let Some(i) = self.pending.take() {
            return Some((i, true));
        }
        loop {
            let n = self.ops.len();
            let start = self.start;
            self.start = self.start.wrapping_add(1);
            for k in 0..n {
                let i = (start + k) % n;
                let op = &self.ops[i];
                // SAFETY: the slot is this operation's `Option<T>`, empty (a full one is
                // `pending`, handled above, or was taken by `SelectedOperation::recv`).
                match unsafe { op.chan.try_take(op.slot) } {
                    Ready::Value => return Some((i, true)),
                    Ready::Disconnected => return Some((i, false)),
                    Ready::Not => {}
                }
            }
            let deadline = deadline?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            if n == 0 {
                idle_until(deadline);
                return None;
            }
            if let Some(i) = self.wait(deadline) {
                return Some((i, true));
            }
            // Woken empty-handed (a channel lost its senders, or the deadline passed): look again.
        }
    }

    /// Steps 2, 3 and 5 of the protocol: `Some(i)` when operation `i`'s slot got a value; `None`
    /// when a channel was not idle, the deadline passed, or a channel lost its senders.
    fn wait(&self, deadline: Option<Instant>) -> Option<usize> {
        let n = self.ops.len();
        // Everything allocated before the first lock is taken (no allocator call under a
        // channel's lock). One node per operation: the first, then its siblings (one wait).
        let first = WaitNode::new();
        first.slot.set(self.ops[0].slot);
        let mut nodes: Vec<WaitNode> = Vec::with_capacity(n - 1);
        for op in &self.ops[1..] {
            // SAFETY: `first` stays in this frame, alive and unmoved, until every node is
            // unlinked below (or by the unwind guard).
            let sibling = unsafe { first.sibling() };
            sibling.slot.set(op.slot);
            nodes.push(sibling);
        }
        let node = |i: usize| if i == 0 { &first } else { &nodes[i - 1] };
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| chan_addr(self.ops[i].chan));
        let mut locked: Vec<HeldLock<'a>> = Vec::with_capacity(n);
        // The distinct channels in address order (a channel added twice is locked once).
        let mut last = None;
        for &i in &order {
            let addr = chan_addr(self.ops[i].chan);
            if last != Some(addr) {
                last = Some(addr);
                match self.ops[i].chan.lock_if_idle() {
                    Some(held) => locked.push(held),
                    None => return None, // ready after all: `locked` unlocks as it drops
                }
            }
        }
        let unlink_all = || {
            for (i, op) in self.ops.iter().enumerate() {
                op.chan.unlink(node(i));
            }
        };
        // Shutdown unwinds us: leave every list (a value handed over stays in its slot).
        let unwind = OnUnwind::new(unlink_all);
        // The locks are the channels'; `block` wants one of its own to hold across the switch.
        let own = SpinLock::new(());
        first.block(own.lock(), deadline, |_, _| {
            for (i, op) in self.ops.iter().enumerate() {
                // SAFETY: every operation's channel is locked, in `locked`.
                unsafe { op.chan.link_locked(node(i)) };
            }
            locked // unlocked once every node is linked
        });
        unwind.disarm();
        unlink_all();
        // No sender can reach a slot now: at most one is full.
        (0..n).find(|&i| {
            let op = &self.ops[i];
            // SAFETY: the slot is this operation's `Option<T>`; its node is unlinked.
            unsafe { op.chan.slot_is_full(op.slot) }
        })
    }
}

/// A channel's address: the order in which a select locks channels, and their identity.
fn chan_addr(c: &dyn SelectChan) -> usize {
    c as *const dyn SelectChan as *const () as usize
}

/// A select with no operations: waits until `deadline` (forever without one).
fn idle_until(deadline: Option<Instant>) {
    loop {
        let pause = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left,
                _ => return,
            },
            None => Duration::from_secs(3600),
        };
        crate::sleep(pause);
    }
}

impl Default for Select<'_> {
    fn default() -> Self {
        Select::new()
    }
}

impl Drop for Select<'_> {
    fn drop(&mut self) {
        for op in &self.ops {
            // SAFETY: each slot was made by `recv` for its `T` and is freed here once.
            unsafe { (op.free)(op.slot) };
        }
    }
}

impl fmt::Debug for Select<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Select").field("operations", &self.ops.len()).finish_non_exhaustive()
    }
}

/// The operation a [`Select`] chose: complete it with [`recv`](SelectedOperation::recv) on the
/// receiver it was added with.
#[must_use = "the operation has taken its value: complete it with `recv`"]
pub struct SelectedOperation<'s, 'a> {
    sel: &'s mut Select<'a>,
    index: usize,
    /// Whether the slot holds a value (else the channel has no sender left).
    full: bool,
    done: bool,
}

impl SelectedOperation<'_, '_> {
    /// The operation's index (what [`Select::recv`] returned for it).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The operation's result: its value, or `Err(RecvError)` when its channel has no sender
    /// left and nothing queued.
    ///
    /// # Panics
    ///
    /// If `r` is not the receiver (or a clone of the receiver) the operation was added with.
    pub fn recv<T, R: SelectReceiver<T>>(mut self, r: &R) -> Result<T, super::mpsc::RecvError> {
        let op = &self.sel.ops[self.index];
        assert!(
            chan_addr(r.select_chan().0) == chan_addr(op.chan),
            "SelectedOperation::recv was given a receiver of another channel than the selected operation's"
        );
        self.done = true;
        // SAFETY: the same channel, so the slot is an `Option<T>` of this `T` (the channel's
        // allocation decides its element type); no node points to it.
        let v = unsafe { (*(op.slot as *mut Option<T>)).take() };
        v.ok_or(super::mpsc::RecvError)
    }
}

impl Drop for SelectedOperation<'_, '_> {
    fn drop(&mut self) {
        if !self.done && self.full {
            self.sel.pending = Some(self.index); // its value stays for the next select
        }
    }
}

impl fmt::Debug for SelectedOperation<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectedOperation").field("index", &self.index).finish_non_exhaustive()
    }
}

/// No operation of a [`Select::try_select`] was ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrySelectError;

impl fmt::Display for TrySelectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("all operations in select would block")
    }
}

impl std::error::Error for TrySelectError {}

/// No operation of a [`Select::select_timeout`] became ready in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelectTimeoutError;

impl fmt::Display for SelectTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("timed out waiting on select")
    }
}

impl std::error::Error for SelectTimeoutError {}

/// Receives from whichever of several receivers is ready first, with crossbeam-channel's
/// `select!` syntax (receive cases, and an optional `default` case last): a [`Select`] written
/// out. Each case `recv(receiver) -> result => body` gets `result`, a `Result<T, RecvError>` (an
/// error once the channel has no sender left); the chosen case's `body` is the value of the
/// whole `select!`. Without a default case it blocks the calling ULT (not its processor) until
/// a case is ready; `default => body` runs `body` if none is ready now; `default(timeout) =>
/// body` if none becomes ready within `timeout`. Each receiver expression is evaluated once.
///
/// ```
/// use elite_rt::sync::mpsc;
/// use std::time::Duration;
///
/// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
/// rt.block_on(|| {
///     let (tx_a, a) = mpsc::channel::<u32>();
///     let (tx_b, b) = mpsc::channel::<&str>();
///     // Nothing is ready yet: the default case runs.
///     let idle = elite_rt::select! {
///         recv(a) -> _ => false,
///         recv(b) -> _ => false,
///         default => true,
///     };
///     assert!(idle);
///     elite_rt::spawn(move || {
///         elite_rt::sleep(Duration::from_millis(5));
///         tx_b.send("b first").unwrap();
///         elite_rt::sleep(Duration::from_millis(5));
///         drop(tx_a);
///     });
///     // Blocks this ULT until a case is ready.
///     let got = elite_rt::select! {
///         recv(a) -> n => format!("a: {n:?}"),
///         recv(b) -> s => format!("b: {}", s.unwrap()),
///     };
///     assert_eq!(got, "b: b first");
///     // `a` loses its sender a little later: its case becomes ready, with an error.
///     let closed = elite_rt::select! {
///         recv(a) -> n => n.is_err(),
///         default(Duration::from_secs(10)) => false,
///     };
///     assert!(closed);
/// });
/// ```
#[macro_export]
macro_rules! select {
    // Internal rules: `@case` binds one receive case at a time (its receiver expression evaluated
    // once, into a binding of its own that outlives the `Select`), collecting
    // `(receiver, index name, pattern, body)`; at the end (a default case, or none) `@select`
    // builds the `Select` and adds the operations in order, and `@run` dispatches on the chosen
    // operation's index.
    (@case [$($done:tt)*] , $($rest:tt)*) => {
        $crate::select!(@case [$($done)*] $($rest)*)
    };
    (@case [$($done:tt)*] recv($rx:expr) -> $res:pat => $body:block $($rest:tt)*) => {{
        let __elite_rx = &$rx;
        $crate::select!(@case [$($done)* (__elite_rx, __elite_op, $res, $body)] $($rest)*)
    }};
    (@case [$($done:tt)*] recv($rx:expr) -> $res:pat => $body:expr $(, $($rest:tt)*)?) => {{
        let __elite_rx = &$rx;
        $crate::select!(@case [$($done)* (__elite_rx, __elite_op, $res, $body)] $($($rest)*)?)
    }};
    (@case [$($done:tt)*] default => $body:expr $(,)?) => {{
        $crate::select!(@select __elite_select [$($done)*]);
        let __elite_attempt = __elite_select.try_select();
        let __elite_value = match __elite_attempt {
            ::core::result::Result::Ok(__elite_selected) => $crate::select!(@run __elite_selected [$($done)*]),
            ::core::result::Result::Err(_) => $body,
        };
        __elite_value
    }};
    (@case [$($done:tt)*] default($timeout:expr) => $body:expr $(,)?) => {{
        $crate::select!(@select __elite_select [$($done)*]);
        let __elite_attempt = __elite_select.select_timeout($timeout);
        let __elite_value = match __elite_attempt {
            ::core::result::Result::Ok(__elite_selected) => $crate::select!(@run __elite_selected [$($done)*]),
            ::core::result::Result::Err(_) => $body,
        };
        __elite_value
    }};
    (@case [$($done:tt)*]) => {{
        $crate::select!(@select __elite_select [$($done)*]);
        let __elite_selected = __elite_select.select();
        let __elite_value = $crate::select!(@run __elite_selected [$($done)*]);
        __elite_value
    }};
    (@select $sel:ident [$(($rx:ident, $index:ident, $res:pat, $body:expr))*]) => {
        let mut $sel = $crate::sync::Select::new();
        $( let $index = $sel.recv($rx); )*
    };
    (@run $op:ident [$(($rx:ident, $index:ident, $res:pat, $body:expr))*]) => {
        match $op.index() {
            $(
                __elite_i if __elite_i == $index => {
                    let $res = $op.recv($rx);
                    $body
                }
            )*
            _ => ::core::unreachable!("select! chose an operation it did not add"),
        }
    };
    ($($cases:tt)+) => {
        $crate::select!(@case [] $($cases)+)
    };
}
