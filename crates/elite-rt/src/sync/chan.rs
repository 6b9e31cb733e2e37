//! The channel behind [`mpsc`] and [`mpmc`]: a queue, optionally bounded, with blocked receivers
//! and blocked senders bound to it.
//!
//! # Protocol (all under the channel's lock)
//!
//! * A sender hands its value straight to the first blocked receiver (into the receiver's slot,
//!   then notifies it); if none waits, it queues the value if there is room, else it blocks with
//!   the value in a slot of its own (a rendezvous channel, capacity 0, never has room).
//! * A receiver takes the oldest queued value and, if a sender is blocked, moves that sender's
//!   value into the freed place and notifies it; with nothing queued it takes a blocked sender's
//!   value directly; otherwise it blocks with an empty slot.
//! * A notify that fails (the receiver's deadline won) gives the value back to the sender's hand,
//!   and the sender tries the next receiver.
//! * A receiver that pops a blocked sender takes its value even when the notify fails (the
//!   sender's deadline won, `send_timeout`): the sender, once it has the lock again, finds its
//!   slot empty and reports the value sent. So what decides a timed send is its slot, looked at
//!   under the lock: empty, sent; still full, timed out (or disconnected, with no receiver left).
//! * The last sender to go notifies every blocked receiver (their slots stay empty: disconnected);
//!   the last receiver to go notifies every blocked sender (their values stay in their slots and
//!   come back in `SendError`) and drops what was queued.
//!
//! Values are dropped only outside the lock: no user code runs while it is held.
//!
//! Every send and receive charges the running ULT's cooperative budget at its entry, before it
//! takes the lock (`processor::budget`).

use super::wait::{BiasedSpinLock, OnUnwind, SpinGuard, WaitList, WaitNode, Wakes};
use crate::deadlock::WaitKind;
use crate::processor::{budget, Processor};
use crate::slot::current_processor;
use std::collections::VecDeque;
use std::fmt;
use std::sync::mpsc::{RecvError, RecvTimeoutError, SendError, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Inner<T> {
    queue: VecDeque<T>,
    /// `None`: unbounded.
    cap: Option<usize>,
    senders: usize,
    receivers: usize,
    recv_waiters: WaitList,
    send_waiters: WaitList,
}

struct Chan<T> {
    /// Biased towards the processor that keeps taking it (`sync::bias`): a ping-pong whose two
    /// ends run on one processor takes it without an atomic read-modify-write.
    inner: BiasedSpinLock<Inner<T>>,
}

/// What a blocked sender or receiver finds in its slot.
type Slot<T> = Option<T>;

/// # Safety
/// `n` is a node just popped under the channel's lock, whose `slot` points to a live `Slot<T>`
/// (its waiter is blocked until notified).
unsafe fn slot<'a, T>(n: &WaitNode) -> &'a mut Slot<T> {
    // SAFETY: per the contract.
    unsafe { &mut *(n.slot.get() as *mut Slot<T>) }
}

enum Try<T> {
    Sent,
    Full(T),
    Disconnected(T),
}

impl<T> Chan<T> {
    fn new(cap: Option<usize>, receivers: usize) -> Arc<Chan<T>> {
        Arc::new(Chan {
            inner: BiasedSpinLock::new(Inner {
                queue: VecDeque::new(),
                cap,
                senders: 1,
                receivers,
                recv_waiters: WaitList::of(WaitKind::ChannelRecv),
                send_waiters: WaitList::of(WaitKind::ChannelSend),
            }),
        })
    }

    /// Sends without blocking, under the lock `g`.
    fn try_send_locked(g: &mut SpinGuard<'_, Inner<T>>, mut value: T) -> (Try<T>, Option<super::wait::Wake>) {
        if g.receivers == 0 {
            return (Try::Disconnected(value), None);
        }
        while let Some(n) = g.recv_waiters.pop_front() {
            // SAFETY: a popped receiver node's slot is its live `Slot<T>`.
            let s = unsafe { slot::<T>(n) };
            *s = Some(value);
            if let Some(w) = n.notify() {
                return (Try::Sent, Some(w));
            }
            value = s.take().unwrap_or_else(|| crate::fatal("a channel slot lost its value"));
        }
        if g.cap.is_none_or(|c| g.queue.len() < c) {
            g.queue.push_back(value);
            return (Try::Sent, None);
        }
        (Try::Full(value), None)
    }

    /// Sends `value`; with `block`, waits while the channel is full. The common cases (hand the
    /// value to a waiting receiver, queue it) inline, and so is the wait of a full channel
    /// (`send_blocking`: see "Switch depth" in `sync::wait`); the rest in [`Chan::send_slow`].
    #[inline(always)]
    fn send(&self, value: T, block: bool) -> Try<T> {
        // Looked up once for the lock, the notify and the node (no switch in between, but the
        // budget's yield: then again).
        let here = budget::charge(current_processor(), || block && self.would_block_send());
        let mut g = self.inner.lock_on(here);
        if g.receivers > 0 {
            if let Some(n) = g.recv_waiters.pop_front() {
                // SAFETY: a popped receiver node's slot is its live `Slot<T>`.
                let s = unsafe { slot::<T>(n) };
                *s = Some(value);
                match n.notify_unlock(g, here) {
                    Ok(()) => return Try::Sent,
                    Err(g) => {
                        // Its deadline won: take the value back and go the long way.
                        let value = s.take().unwrap_or_else(|| crate::fatal("a channel slot lost its value"));
                        return self.send_slow(g, value, block);
                    }
                }
            }
            if g.cap.is_none_or(|c| g.queue.len() < c) {
                g.queue.push_back(value);
                return Try::Sent;
            }
            if block {
                // Full, a receiver alive and none waiting: what `try_send_locked` would find.
                return self.send_blocking(g, value, here);
            }
        }
        self.send_slow(g, value, block)
    }

    /// [`Chan::send`] past its common cases: no receiver left, a receiver whose deadline won, a
    /// full channel.
    #[cold]
    fn send_slow(&self, mut g: SpinGuard<'_, Inner<T>>, value: T, block: bool) -> Try<T> {
        let (r, wake) = Self::try_send_locked(&mut g, value);
        let value = match r {
            Try::Full(v) if block => v,
            other => {
                drop(g);
                if let Some(w) = wake {
                    w.wake();
                }
                return other;
            }
        };
        self.send_blocking(g, value, current_processor())
    }

    /// Blocks with `value` in our slot, under the lock `g` of a full channel, until a receiver
    /// takes it or the last one leaves. Inlined into [`Chan::send`] (a shallow wait).
    /// `here`: the caller's `current_processor()`, looked up since its last switch.
    #[inline(always)]
    fn send_blocking(&self, g: SpinGuard<'_, Inner<T>>, value: T, here: Option<&Processor>) -> Try<T> {
        let mut mine: Slot<T> = Some(value);
        let node = WaitNode::new_on(here);
        node.slot.set(&mut mine as *mut Slot<T> as *mut ());
        let unwind = OnUnwind::new(|| self.inner.lock().send_waiters.remove(&node));
        node.block_on(g, |inner| &mut inner.send_waiters, false);
        unwind.disarm();
        match mine {
            None => Try::Sent,
            Some(v) => Try::Disconnected(v),
        }
    }

    /// Sends `value`, waiting while the channel is full until `deadline` (`None`: as long as it
    /// takes). Out of line: `send_timeout` only.
    #[inline(never)]
    fn send_until(&self, value: T, deadline: Option<Instant>) -> Result<(), SendTimeoutError<T>> {
        let mut g = self.inner.lock();
        let (r, wake) = Self::try_send_locked(&mut g, value);
        let value = match r {
            Try::Full(v) => v,
            Try::Sent => {
                drop(g);
                if let Some(w) = wake {
                    w.wake();
                }
                return Ok(());
            }
            Try::Disconnected(v) => return Err(SendTimeoutError::Disconnected(v)),
        };
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(SendTimeoutError::Timeout(value));
        }
        let mut mine: Slot<T> = Some(value);
        let node = WaitNode::new();
        node.slot.set(&mut mine as *mut Slot<T> as *mut ());
        let unwind = OnUnwind::new(|| self.inner.lock().send_waiters.remove(&node));
        let notified = node.block(g, deadline, |inner, n| inner.send_waiters.push_back(n));
        unwind.disarm();
        if notified {
            // A receiver took the value, or the last one left (the value is still ours).
            return match mine {
                None => Ok(()),
                Some(v) => Err(SendTimeoutError::Disconnected(v)),
            };
        }
        // The deadline won. A receiver may still have popped us and taken the value before we
        // had the lock again (module docs): the slot, read under the lock, decides.
        let mut g = self.inner.lock();
        g.send_waiters.remove(&node);
        let receivers = g.receivers;
        let left = mine.take();
        drop(g);
        match left {
            None => Ok(()),
            Some(v) if receivers == 0 => Err(SendTimeoutError::Disconnected(v)),
            Some(v) => Err(SendTimeoutError::Timeout(v)),
        }
    }

    /// Takes a value without blocking, under the lock `g`.
    fn try_recv_locked(g: &mut SpinGuard<'_, Inner<T>>) -> (Option<T>, Option<super::wait::Wake>) {
        if let Some(v) = g.queue.pop_front() {
            // Room freed: let the first blocked sender in.
            if let Some(n) = g.send_waiters.pop_front() {
                // SAFETY: a popped sender node's slot is its live `Slot<T>`, holding its value.
                if let Some(x) = unsafe { slot::<T>(n) }.take() {
                    g.queue.push_back(x);
                }
                return (Some(v), n.notify());
            }
            return (Some(v), None);
        }
        if let Some(n) = g.send_waiters.pop_front() {
            // SAFETY: as above.
            let v = unsafe { slot::<T>(n) }.take();
            return (v, n.notify());
        }
        (None, None)
    }

    /// Receives; `deadline`: `None` for `try_recv`, `Some(None)` to wait as long as it takes. The
    /// common cases (a queued value and no blocked sender, or a blocked sender's value on a
    /// rendezvous channel) inline, and so is the untimed wait of an empty channel
    /// ([`Chan::recv_blocking`]: see "Switch depth" in `sync::wait`); the rest, timed waits
    /// included, in [`Chan::recv_slow`].
    #[inline(always)]
    fn recv(&self, deadline: Option<Option<Instant>>) -> Result<T, RecvTimeoutError> {
        // Looked up once for the lock, the notify and the node (no switch in between, but the
        // budget's yield: then again).
        let here = budget::charge(current_processor(), || deadline.is_some() && self.would_block_recv());
        let mut g = self.inner.lock_on(here);
        if g.send_waiters.is_empty() {
            if let Some(v) = g.queue.pop_front() {
                return Ok(v);
            }
            if matches!(deadline, Some(None)) && g.senders > 0 {
                return self.recv_blocking(g, here);
            }
        } else if g.queue.is_empty() {
            if let Some(n) = g.send_waiters.pop_front() {
                // SAFETY: a popped sender node's slot is its live `Slot<T>`, holding its value.
                if let Some(v) = unsafe { slot::<T>(n) }.take() {
                    // (A sender whose deadline won keeps no claim on it: it finds its slot
                    // empty and reports the value sent, module docs.)
                    if let Err(g) = n.notify_unlock(g, here) {
                        drop(g);
                    }
                    return Ok(v);
                }
                crate::fatal("a blocked sender had no value");
            }
        }
        self.recv_slow(g, deadline)
    }

    /// The untimed wait of [`Chan::recv`], under the lock `g` of an empty channel that has a
    /// sender and no blocked sender: what [`Chan::recv_slow`] would do, minus its checks, and
    /// inlined into `recv`. Woken without a value (the last sender left), it looks again the long
    /// way.
    /// `here`: the caller's `current_processor()`, looked up since its last switch.
    #[inline(always)]
    fn recv_blocking(
        &self,
        g: SpinGuard<'_, Inner<T>>,
        here: Option<&Processor>,
    ) -> Result<T, RecvTimeoutError> {
        let mut mine: Slot<T> = None;
        let node = WaitNode::new_on(here);
        node.slot.set(&mut mine as *mut Slot<T> as *mut ());
        let unwind = OnUnwind::new(|| self.inner.lock().recv_waiters.remove(&node));
        // Untimed: only a notify resolves it.
        node.block_on(g, |inner| &mut inner.recv_waiters, false);
        unwind.disarm();
        match mine {
            Some(v) => Ok(v),
            None => self.recv_slow(self.inner.lock(), Some(None)),
        }
    }

    /// [`Chan::recv`] past its common cases, starting under the lock `g`.
    #[cold]
    fn recv_slow(
        &self,
        g: SpinGuard<'_, Inner<T>>,
        deadline: Option<Option<Instant>>,
    ) -> Result<T, RecvTimeoutError> {
        let mut first = Some(g);
        loop {
            let mut g = match first.take() {
                Some(g) => g,
                None => self.inner.lock(),
            };
            let (v, wake) = Self::try_recv_locked(&mut g);
            if let Some(v) = v {
                drop(g);
                if let Some(w) = wake {
                    w.wake();
                }
                return Ok(v);
            }
            if g.senders == 0 {
                return Err(RecvTimeoutError::Disconnected);
            }
            let deadline = match deadline {
                None => return Err(RecvTimeoutError::Timeout), // try_recv
                Some(d) => d,
            };
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(RecvTimeoutError::Timeout);
            }
            let mut mine: Slot<T> = None;
            let node = WaitNode::new();
            node.slot.set(&mut mine as *mut Slot<T> as *mut ());
            let unwind = OnUnwind::new(|| self.inner.lock().recv_waiters.remove(&node));
            let notified = node.block(g, deadline, |inner, n| inner.recv_waiters.push_back(n));
            unwind.disarm();
            if !notified {
                // Our deadline won: a sender that popped us took its value back.
                self.inner.lock().recv_waiters.remove(&node);
            }
            if let Some(v) = mine.take() {
                return Ok(v);
            }
            // Notified empty (the last sender left) or timed out: look again (a value may have
            // been queued meanwhile), and report the timeout if that still finds nothing.
            if !notified {
                let mut g = self.inner.lock();
                let (v, wake) = Self::try_recv_locked(&mut g);
                let senders = g.senders;
                drop(g);
                if let Some(w) = wake {
                    w.wake();
                }
                return match v {
                    Some(v) => Ok(v),
                    None if senders == 0 => Err(RecvTimeoutError::Disconnected),
                    None => Err(RecvTimeoutError::Timeout),
                };
            }
        }
    }

    /// Whether a blocking send would wait now: full, a receiver alive and none waiting (a hint
    /// for the budget's yield, `processor::budget`).
    #[cold]
    fn would_block_send(&self) -> bool {
        let g = self.inner.lock();
        g.receivers > 0 && g.recv_waiters.is_empty() && g.cap.is_some_and(|c| g.queue.len() >= c)
    }

    /// Whether a blocking receive would wait now: nothing queued, no blocked sender, a sender
    /// alive (a hint for the budget's yield, `processor::budget`).
    #[cold]
    fn would_block_recv(&self) -> bool {
        let g = self.inner.lock();
        g.senders > 0 && g.queue.is_empty() && g.send_waiters.is_empty()
    }

    fn add_sender(&self) {
        self.inner.lock().senders += 1;
    }

    fn add_receiver(&self) {
        self.inner.lock().receivers += 1;
    }

    fn drop_sender(&self) {
        let mut g = self.inner.lock();
        g.senders -= 1;
        if g.senders > 0 {
            return;
        }
        let mut wakes = Wakes::default();
        while let Some(n) = g.recv_waiters.pop_front() {
            if let Some(w) = n.notify() {
                wakes.push(w);
            }
        }
        drop(g);
        wakes.wake_all();
    }

    fn drop_receiver(&self) {
        let mut g = self.inner.lock();
        g.receivers -= 1;
        if g.receivers > 0 {
            return;
        }
        let mut wakes = Wakes::default();
        while let Some(n) = g.send_waiters.pop_front() {
            if let Some(w) = n.notify() {
                wakes.push(w);
            }
        }
        let queued = std::mem::take(&mut g.queue);
        drop(g);
        wakes.wake_all();
        drop(queued); // user destructors, outside the lock
    }

    fn len(&self) -> usize {
        self.inner.lock().queue.len()
    }
}

fn recv_error(e: RecvTimeoutError) -> RecvError {
    match e {
        RecvTimeoutError::Disconnected | RecvTimeoutError::Timeout => RecvError,
    }
}

fn try_recv_error(e: RecvTimeoutError) -> TryRecvError {
    match e {
        RecvTimeoutError::Disconnected => TryRecvError::Disconnected,
        RecvTimeoutError::Timeout => TryRecvError::Empty,
    }
}

/// Why [`SyncSender::send_timeout`](mpsc::SyncSender::send_timeout) (or an `mpmc` sender's)
/// gave its value back: std's `SendTimeoutError` (unstable in std, hence elite's own type, with
/// std's variants, messages and conversions).
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// The channel stayed full (for a rendezvous channel: no receiver came) until the timeout.
    Timeout(T),
    /// Every receiver is gone: the value can never be received.
    Disconnected(T),
}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendTimeoutError(..)") // as std: the value need not be `Debug`
    }
}

impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendTimeoutError::Timeout(_) => "timed out waiting on send operation",
            SendTimeoutError::Disconnected(_) => "sending on a disconnected channel",
        })
    }
}

impl<T> std::error::Error for SendTimeoutError<T> {}

impl<T> From<SendError<T>> for SendTimeoutError<T> {
    /// A failed `send` is a disconnection.
    fn from(e: SendError<T>) -> SendTimeoutError<T> {
        SendTimeoutError::Disconnected(e.0)
    }
}

/// The receive operations of a receiver, the same for `mpsc` and `mpmc` (both receivers hold
/// their channel in `chan`).
macro_rules! receiver_methods {
    () => {
        impl<T> Receiver<T> {
            /// Waits for a value; `Err` once every sender is gone and the channel is empty.
            #[inline]
            pub fn recv(&self) -> Result<T, RecvError> {
                self.chan.recv(Some(None)).map_err(recv_error)
            }

            /// Takes a value if one is ready.
            pub fn try_recv(&self) -> Result<T, TryRecvError> {
                self.chan.recv(None).map_err(try_recv_error)
            }

            /// Waits at most `timeout` for a value.
            pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
                self.chan.recv(Some(super::super::deadline(timeout)))
            }

            /// Waits until `deadline` for a value.
            pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
                self.chan.recv(Some(Some(deadline)))
            }

            /// Values as they arrive, until every sender is gone and the channel is empty.
            pub fn iter(&self) -> Iter<'_, T> {
                Iter { rx: self }
            }

            /// The values ready now, without waiting.
            pub fn try_iter(&self) -> TryIter<'_, T> {
                TryIter { rx: self }
            }
        }
    };
}

/// The iterators of a channel module's `Receiver` (its `recv`, `try_recv` and `iter` in scope):
/// `Iter`, `TryIter`, `IntoIter` and the `IntoIterator` impls, the same for `mpsc` and `mpmc`.
macro_rules! receiver_iterators {
    () => {
        /// Iterator of [`Receiver::iter`].
        #[derive(Debug)]
        pub struct Iter<'a, T> {
            rx: &'a Receiver<T>,
        }

        /// Iterator of [`Receiver::try_iter`].
        #[derive(Debug)]
        pub struct TryIter<'a, T> {
            rx: &'a Receiver<T>,
        }

        /// Iterator of a [`Receiver`] taken by value.
        #[derive(Debug)]
        pub struct IntoIter<T> {
            rx: Receiver<T>,
        }

        impl<T> Iterator for Iter<'_, T> {
            type Item = T;
            fn next(&mut self) -> Option<T> {
                self.rx.recv().ok()
            }
        }

        impl<T> Iterator for TryIter<'_, T> {
            type Item = T;
            fn next(&mut self) -> Option<T> {
                self.rx.try_recv().ok()
            }
        }

        impl<T> Iterator for IntoIter<T> {
            type Item = T;
            fn next(&mut self) -> Option<T> {
                self.rx.recv().ok()
            }
        }

        impl<'a, T> IntoIterator for &'a Receiver<T> {
            type Item = T;
            type IntoIter = Iter<'a, T>;
            fn into_iter(self) -> Iter<'a, T> {
                self.iter()
            }
        }

        impl<T> IntoIterator for Receiver<T> {
            type Item = T;
            type IntoIter = IntoIter<T>;
            fn into_iter(self) -> IntoIter<T> {
                IntoIter { rx: self }
            }
        }
    };
}

/// `std::sync::mpsc` for ULTs.
pub(crate) mod mpsc {
    use super::*;
    pub use std::sync::mpsc::{RecvError, RecvTimeoutError, SendError, TryRecvError, TrySendError};

    /// An unbounded channel: `send` never blocks. Like `std::sync::mpsc::channel`.
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let (tx, rx) = elite_rt::sync::mpsc::channel();
    ///     elite_rt::spawn(move || tx.send("hi").unwrap());
    ///     assert_eq!(rx.recv(), Ok("hi"));
    ///     assert!(rx.recv().is_err()); // the sender is gone
    /// });
    /// ```
    pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
        let c = Chan::new(None, 1);
        (Sender { chan: c.clone() }, Receiver { chan: c })
    }

    /// A channel holding at most `bound` values: `send` blocks while it is full. With `bound` 0
    /// every send waits until a receiver takes the value (a rendezvous). Like
    /// `std::sync::mpsc::sync_channel`.
    pub fn sync_channel<T>(bound: usize) -> (SyncSender<T>, Receiver<T>) {
        let c = Chan::new(Some(bound), 1);
        (SyncSender { chan: c.clone() }, Receiver { chan: c })
    }

    /// The sending half of [`channel`]; clone it for more senders.
    pub struct Sender<T> {
        pub(super) chan: Arc<Chan<T>>,
    }

    /// The sending half of [`sync_channel`]; clone it for more senders.
    pub struct SyncSender<T> {
        pub(super) chan: Arc<Chan<T>>,
    }

    /// The receiving half of a channel.
    pub struct Receiver<T> {
        pub(super) chan: Arc<Chan<T>>,
    }

    impl<T> Sender<T> {
        /// Sends `value`; never blocks. `Err` gives the value back when the receiver is gone.
        #[inline]
        pub fn send(&self, value: T) -> Result<(), SendError<T>> {
            match self.chan.send(value, false) {
                Try::Sent => Ok(()),
                Try::Disconnected(v) | Try::Full(v) => Err(SendError(v)),
            }
        }
    }

    impl<T> SyncSender<T> {
        /// Sends `value`, blocking while the channel is full. `Err` gives the value back when the
        /// receiver is gone (also if it goes while this waits).
        #[inline]
        pub fn send(&self, value: T) -> Result<(), SendError<T>> {
            match self.chan.send(value, true) {
                Try::Sent => Ok(()),
                Try::Disconnected(v) | Try::Full(v) => Err(SendError(v)),
            }
        }

        /// Sends `value` if that needs no waiting.
        pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
            match self.chan.send(value, false) {
                Try::Sent => Ok(()),
                Try::Full(v) => Err(TrySendError::Full(v)),
                Try::Disconnected(v) => Err(TrySendError::Disconnected(v)),
            }
        }

        /// Sends `value`, waiting at most `timeout` while the channel is full (on a rendezvous
        /// channel, for a receiver to take it); blocks the calling ULT, or parks the OS thread.
        /// `Err` gives the value back: [`SendTimeoutError::Timeout`] when the time ran out,
        /// [`SendTimeoutError::Disconnected`] when the receiver is gone (also if it goes while
        /// this waits). As std's (unstable) `SyncSender::send_timeout`.
        ///
        /// ```
        /// use elite_rt::sync::mpsc::{sync_channel, SendTimeoutError};
        /// use std::time::Duration;
        ///
        /// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
        /// rt.block_on(|| {
        ///     let (tx, rx) = sync_channel(1);
        ///     tx.send_timeout(1, Duration::from_millis(10)).unwrap(); // room for one
        ///     // Full: waits 10 ms (other ULTs run meanwhile), then gives the value back.
        ///     assert_eq!(tx.send_timeout(2, Duration::from_millis(10)), Err(SendTimeoutError::Timeout(2)));
        ///     // A receiver that makes room in time lets it through.
        ///     let h = elite_rt::spawn(move || {
        ///         elite_rt::sleep(Duration::from_millis(5));
        ///         (rx.recv().unwrap(), rx.recv().unwrap())
        ///     });
        ///     tx.send_timeout(3, Duration::from_secs(10)).unwrap();
        ///     assert_eq!(h.join().unwrap(), (1, 3));
        ///     // The receiver is gone now.
        ///     assert_eq!(tx.send_timeout(4, Duration::from_millis(10)), Err(SendTimeoutError::Disconnected(4)));
        /// });
        /// ```
        pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
            self.chan.send_until(value, super::super::deadline(timeout))
        }
    }

    receiver_methods!();

    impl<T> Clone for Sender<T> {
        fn clone(&self) -> Self {
            self.chan.add_sender();
            Sender { chan: self.chan.clone() }
        }
    }

    impl<T> Clone for SyncSender<T> {
        fn clone(&self) -> Self {
            self.chan.add_sender();
            SyncSender { chan: self.chan.clone() }
        }
    }

    impl<T> Drop for Sender<T> {
        fn drop(&mut self) {
            self.chan.drop_sender();
        }
    }

    impl<T> Drop for SyncSender<T> {
        fn drop(&mut self) {
            self.chan.drop_sender();
        }
    }

    impl<T> Drop for Receiver<T> {
        fn drop(&mut self) {
            self.chan.drop_receiver();
        }
    }

    impl<T> fmt::Debug for Sender<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Sender").finish_non_exhaustive()
        }
    }

    impl<T> fmt::Debug for SyncSender<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("SyncSender").finish_non_exhaustive()
        }
    }

    impl<T> fmt::Debug for Receiver<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Receiver").field("queued", &self.chan.len()).finish_non_exhaustive()
        }
    }

    receiver_iterators!();
}

/// Channels with any number of senders and receivers: `std::sync::mpmc`'s (unstable in std).
pub(crate) mod mpmc {
    use super::*;

    /// An unbounded channel: `send` never blocks; both ends can be cloned, and each value goes
    /// to exactly one receiver (the first to ask, in FIFO order of the receivers that wait). Like
    /// std's (unstable) `mpmc::channel`.
    ///
    /// ```
    /// use elite_rt::sync::mpmc;
    ///
    /// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
    /// let (count, sum) = rt.block_on(|| {
    ///     let (tx, rx) = mpmc::channel();
    ///     // A pool of workers sharing one queue of jobs.
    ///     let workers: Vec<_> = (0..4)
    ///         .map(|_| {
    ///             let rx = rx.clone();
    ///             elite_rt::spawn(move || rx.iter().fold((0, 0u64), |(n, s), job: u64| (n + 1, s + job)))
    ///         })
    ///         .collect();
    ///     drop(rx);
    ///     for job in 1..=1000 {
    ///         tx.send(job).unwrap(); // never blocks
    ///     }
    ///     drop(tx); // the workers' `iter` ends once the queue is empty
    ///     workers.into_iter().map(|h| h.join().unwrap()).fold((0, 0), |(n, s), (a, b)| (n + a, s + b))
    /// });
    /// assert_eq!((count, sum), (1000, 500_500));
    /// ```
    pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
        let c = Chan::new(None, 1);
        (Sender { chan: c.clone() }, Receiver { chan: c })
    }

    /// A channel holding at most `cap` values (0: a rendezvous): `send` blocks while it is full;
    /// both ends can be cloned. Like std's (unstable) `mpmc::sync_channel`.
    pub fn sync_channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
        bounded(cap)
    }

    /// A channel holding at most `cap` values (0: a rendezvous); both ends can be cloned, and each
    /// value goes to exactly one receiver. The same as [`sync_channel`].
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
    /// let total = rt.block_on(|| {
    ///     let (tx, rx) = elite_rt::sync::mpmc::bounded(4);
    ///     let workers: Vec<_> = (0..3)
    ///         .map(|_| {
    ///             let rx = rx.clone();
    ///             elite_rt::spawn(move || rx.iter().sum::<u64>())
    ///         })
    ///         .collect();
    ///     drop(rx);
    ///     for i in 1..=100 {
    ///         tx.send(i).unwrap();
    ///     }
    ///     drop(tx);
    ///     workers.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    /// });
    /// assert_eq!(total, 5050);
    /// ```
    pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
        let c = Chan::new(Some(cap), 1);
        (Sender { chan: c.clone() }, Receiver { chan: c })
    }

    /// The sending half of an `mpmc` channel; clone it for more senders.
    pub struct Sender<T> {
        chan: Arc<Chan<T>>,
    }

    /// The receiving half of an `mpmc` channel; clone it for more receivers (each value goes to
    /// one of them).
    pub struct Receiver<T> {
        pub(super) chan: Arc<Chan<T>>,
    }

    impl<T> Sender<T> {
        /// Sends `value`, blocking while a bounded channel is full; `Err` gives the value back
        /// once every receiver is gone.
        #[inline]
        pub fn send(&self, value: T) -> Result<(), SendError<T>> {
            match self.chan.send(value, true) {
                Try::Sent => Ok(()),
                Try::Disconnected(v) | Try::Full(v) => Err(SendError(v)),
            }
        }

        /// Sends `value` if that needs no waiting.
        pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
            match self.chan.send(value, false) {
                Try::Sent => Ok(()),
                Try::Full(v) => Err(TrySendError::Full(v)),
                Try::Disconnected(v) => Err(TrySendError::Disconnected(v)),
            }
        }

        /// Sends `value`, waiting at most `timeout` while the channel is full; as
        /// [`mpsc::SyncSender::send_timeout`](super::mpsc::SyncSender::send_timeout).
        pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
            self.chan.send_until(value, super::super::deadline(timeout))
        }

        /// Sends `value`, waiting until `deadline` at the latest while the channel is full.
        pub fn send_deadline(&self, value: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
            self.chan.send_until(value, Some(deadline))
        }

        /// Whether `other` sends on the same channel.
        pub fn same_channel(&self, other: &Sender<T>) -> bool {
            Arc::ptr_eq(&self.chan, &other.chan)
        }
    }

    receiver_methods!();

    impl<T> Receiver<T> {
        /// Whether `other` receives from the same channel.
        pub fn same_channel(&self, other: &Receiver<T>) -> bool {
            Arc::ptr_eq(&self.chan, &other.chan)
        }
    }

    impl<T> Clone for Sender<T> {
        fn clone(&self) -> Self {
            self.chan.add_sender();
            Sender { chan: self.chan.clone() }
        }
    }

    impl<T> Clone for Receiver<T> {
        fn clone(&self) -> Self {
            self.chan.add_receiver();
            Receiver { chan: self.chan.clone() }
        }
    }

    impl<T> Drop for Sender<T> {
        fn drop(&mut self) {
            self.chan.drop_sender();
        }
    }

    impl<T> Drop for Receiver<T> {
        fn drop(&mut self) {
            self.chan.drop_receiver();
        }
    }

    impl<T> fmt::Debug for Sender<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("mpmc::Sender").finish_non_exhaustive()
        }
    }

    impl<T> fmt::Debug for Receiver<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("mpmc::Receiver").field("queued", &self.chan.len()).finish_non_exhaustive()
        }
    }

    receiver_iterators!();
}

/// What a [`Select`](super::Select) does on a channel, its element type erased (`select.rs`).
impl<T> super::select::SelectChan for Chan<T> {
    unsafe fn try_take(&self, slot: *mut ()) -> super::select::Ready {
        match self.recv(None) {
            Ok(v) => {
                // SAFETY: per the trait's contract, `slot` is this channel's `Option<T>`.
                unsafe { *(slot as *mut Slot<T>) = Some(v) };
                super::select::Ready::Value
            }
            Err(RecvTimeoutError::Disconnected) => super::select::Ready::Disconnected,
            Err(RecvTimeoutError::Timeout) => super::select::Ready::Not,
        }
    }

    fn lock_if_idle(&self) -> Option<super::wait::HeldLock<'_>> {
        let g = self.inner.lock();
        // A receive would not block: a queued value, a blocked sender's, or no sender left.
        if !g.queue.is_empty() || !g.send_waiters.is_empty() || g.senders == 0 {
            return None;
        }
        Some(g.hold())
    }

    unsafe fn link_locked(&self, node: &WaitNode) {
        // SAFETY: per the trait's contract, the caller holds the lock (and makes no other
        // reference to the channel's state meanwhile).
        unsafe { self.inner.held_value() }.recv_waiters.push_back(node);
    }

    fn unlink(&self, node: &WaitNode) {
        self.inner.lock().recv_waiters.remove(node);
    }

    unsafe fn slot_is_full(&self, slot: *mut ()) -> bool {
        // SAFETY: per the trait's contract, `slot` is this channel's `Option<T>`, touched by no
        // sender now.
        unsafe { (*(slot as *mut Slot<T>)).is_some() }
    }
}

impl<T> super::select::sealed::Sealed for mpsc::Receiver<T> {}

impl<T> super::select::SelectReceiver<T> for mpsc::Receiver<T> {
    fn select_chan(&self) -> super::select::ChanRef<'_> {
        super::select::ChanRef(&*self.chan)
    }
}

impl<T> super::select::sealed::Sealed for mpmc::Receiver<T> {}

impl<T> super::select::SelectReceiver<T> for mpmc::Receiver<T> {
    fn select_chan(&self) -> super::select::ChanRef<'_> {
        super::select::ChanRef(&*self.chan)
    }
}
