//! ULT-local storage: statics declared with [`ult_local!`](crate::ult_local) whose values belong to
//! the running ULT, not to the OS thread it happens to run on.
//!
//! # Where the values live
//!
//! Each ULT that uses a key gets a [`LocalMap`], reached through one pointer field of its TCB
//! (`Tcb::locals`). A ULT that never uses ULT-local storage pays nothing at spawn: the field is
//! null in every free TCB (fresh TCBs start null, and a ULT's end leaves it null again), and its
//! end costs one load and test of that field. The map is created by the ULT's first access and
//! holds one slot per key, found by the key's index (assigned on the key's first use in the
//! process). Values are boxed, so a reference handed to `with` stays valid while the map grows,
//! and they move with the ULT: after a yield or a block that resumed the ULT on another processor,
//! `with` finds the same values (the map is reached through the TCB, never through a thread-local).
//!
//! # Lifetime of a value
//!
//! * Created lazily by the first `with` (or `set`) of its key in the ULT.
//! * Destroyed when the ULT ends: after its closure returned or panicked and before its exit is
//!   published, so a joiner sees every destructor's effects, as `join` on an OS thread sees its
//!   thread-locals' destructors. Values created after that (by the destructor of a detached ULT's
//!   result) are destroyed right after it. A ULT cancelled by the runtime's shutdown has its values
//!   destroyed as its stack is unwound, on the thread that drops the runtime.
//! * Destroyed in the reverse order of creation. While they are destroyed, a destructor may use
//!   keys that have not been destroyed yet (or create fresh values, which are destroyed in turn);
//!   a key already destroyed gives [`AccessError`] (and `with` panics). A destructor that panics
//!   aborts the process, as std does for thread-locals.
//!
//! Outside a ULT (a plain OS thread, or code a processor runs outside any ULT), a key falls back to
//! one value per OS thread, destroyed when the thread exits, like `thread_local!`.

use crate::slot::current_processor;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A ULT-local key: the static that [`ult_local!`](crate::ult_local) declares. Each ULT that
/// accesses it sees its own value, created lazily by the key's initializer and dropped when the ULT
/// ends.
///
/// ```
/// use std::cell::{Cell, RefCell};
///
/// elite_rt::ult_local! {
///     static DEPTH: Cell<u32> = Cell::new(0);
///     static LOG: RefCell<Vec<String>> = RefCell::new(Vec::new());
/// }
///
/// let rt = elite_rt::Runtime::builder().processors(2).build().unwrap();
/// let counts = rt.block_on(|| {
///     let hs: Vec<_> = (0..4u32)
///         .map(|i| {
///             elite_rt::spawn(move || {
///                 for _ in 0..=i {
///                     DEPTH.set(DEPTH.get() + 1);
///                     elite_rt::yield_now(); // may resume on another processor: same value
///                 }
///                 LOG.with_borrow_mut(|log| log.push(format!("ULT {i}")));
///                 (DEPTH.get(), LOG.with_borrow(|log| log.len()))
///             })
///         })
///         .collect();
///     hs.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
/// });
/// // Every ULT counted its own iterations and saw only its own log.
/// assert_eq!(counts, [(1, 1), (2, 1), (3, 1), (4, 1)]);
/// ```
pub struct UltLocalKey<T: 'static> {
    init: fn() -> T,
    /// The key's slot in every map, `UNASSIGNED` until its first use.
    index: AtomicUsize,
    _value: PhantomData<fn() -> T>,
}

const UNASSIGNED: usize = usize::MAX;
/// Indices handed out to keys so far.
static KEYS: AtomicUsize = AtomicUsize::new(0);

/// A ULT-local value was accessed after (or while) it was destroyed at the end of its ULT (or its
/// OS thread, for the per-thread fallback).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessError;

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("cannot access a ULT-local value during or after its destruction")
    }
}

impl std::error::Error for AccessError {}

impl<T: 'static> fmt::Debug for UltLocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UltLocalKey").finish_non_exhaustive()
    }
}

impl<T: 'static> UltLocalKey<T> {
    /// A key whose values start as `init()`. Use [`ult_local!`](crate::ult_local) rather than this.
    #[doc(hidden)]
    pub const fn new(init: fn() -> T) -> UltLocalKey<T> {
        UltLocalKey { init, index: AtomicUsize::new(UNASSIGNED), _value: PhantomData }
    }

    /// Calls `f` with a reference to the calling ULT's value, creating it first if needed.
    ///
    /// # Panics
    ///
    /// Panics if the value was already destroyed (from the destructor of another ULT-local value at
    /// the end of the ULT); [`try_with`](Self::try_with) returns an error instead.
    pub fn with<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        match self.try_with(f) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Calls `f` with a reference to the calling ULT's value, creating it first if needed, or
    /// returns [`AccessError`] when the value was already destroyed.
    pub fn try_with<F, R>(&'static self, f: F) -> Result<R, AccessError>
    where
        F: FnOnce(&T) -> R,
    {
        let value = self.get_or_init(self.init)?;
        // SAFETY: the value is boxed in the caller's map and is dropped only when the caller (its
        // ULT or OS thread) ends, after this call returns; it is never moved, and only shared
        // references to it are ever made.
        Ok(f(unsafe { &*value }))
    }

    /// Like `try_with`, but a value that does not exist yet is created with `make` instead of the
    /// key's initializer; `found` tells `f` whether the value existed before.
    fn with_made<F, R>(&'static self, make: impl FnOnce() -> T, f: F) -> R
    where
        F: FnOnce(&T, bool) -> R,
    {
        let made = Cell::new(false);
        let value = self.get_or_init(|| {
            made.set(true);
            make()
        });
        match value {
            // SAFETY: as in `try_with`.
            Ok(v) => f(unsafe { &*v }, !made.get()),
            Err(e) => panic!("{e}"),
        }
    }

    fn index(&'static self) -> usize {
        let i = self.index.load(Ordering::Relaxed);
        if i != UNASSIGNED {
            return i;
        }
        let fresh = KEYS.fetch_add(1, Ordering::Relaxed);
        // A key raced by another thread keeps the index that was stored first.
        match self.index.compare_exchange(UNASSIGNED, fresh, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => fresh,
            Err(stored) => stored,
        }
    }

    /// The caller's value, created by `make` if it does not exist.
    fn get_or_init(&'static self, make: impl FnOnce() -> T) -> Result<*const T, AccessError> {
        let index = self.index();
        let map = current_map()?;
        // SAFETY: `map` is the caller's live map; `lookup` borrows it only for the call.
        if let Some(p) = unsafe { LocalMap::lookup(map, index) }? {
            return Ok(p as *const T);
        }
        // Runs user code, which may use other keys (or this one), yield, or move to another
        // processor: look the map up again afterwards.
        let value = make();
        let map = current_map()?;
        let raw = Box::into_raw(Box::new(value));
        // SAFETY: `raw` is a fresh box of a `T`, and `drop_boxed::<T>` frees exactly that.
        match unsafe { LocalMap::store(map, index, raw as *mut (), drop_boxed::<T>) } {
            Ok(()) => Ok(raw),
            Err(e) => {
                // SAFETY: `raw` was not stored: still ours alone.
                drop(unsafe { Box::from_raw(raw) });
                Err(e)
            }
        }
    }
}

impl<T: 'static> UltLocalKey<Cell<T>> {
    /// Sets the calling ULT's value to `value`, without running the initializer if the value did
    /// not exist yet.
    pub fn set(&'static self, value: T) {
        let pending = Cell::new(Some(value));
        self.with_made(
            || Cell::new(pending.take().unwrap_or_else(|| unreachable!())),
            |cell, existed| {
                if existed {
                    if let Some(v) = pending.take() {
                        cell.set(v);
                    }
                }
            },
        );
    }

    /// A copy of the calling ULT's value.
    pub fn get(&'static self) -> T
    where
        T: Copy,
    {
        self.with(Cell::get)
    }

    /// Takes the calling ULT's value, leaving `T::default()`.
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(Cell::take)
    }

    /// Replaces the calling ULT's value, returning the old one.
    pub fn replace(&'static self, value: T) -> T {
        self.with(|cell| cell.replace(value))
    }
}

impl<T: 'static> UltLocalKey<RefCell<T>> {
    /// Calls `f` with a shared borrow of the calling ULT's value.
    ///
    /// # Panics
    ///
    /// Panics if the value is mutably borrowed.
    pub fn with_borrow<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        self.with(|cell| f(&cell.borrow()))
    }

    /// Calls `f` with a mutable borrow of the calling ULT's value.
    ///
    /// # Panics
    ///
    /// Panics if the value is borrowed.
    pub fn with_borrow_mut<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&mut T) -> R,
    {
        self.with(|cell| f(&mut cell.borrow_mut()))
    }

    /// Sets the calling ULT's value to `value`, without running the initializer if the value did
    /// not exist yet.
    ///
    /// # Panics
    ///
    /// Panics if the value is borrowed.
    pub fn set(&'static self, value: T) {
        let pending = Cell::new(Some(value));
        self.with_made(
            || RefCell::new(pending.take().unwrap_or_else(|| unreachable!())),
            |cell, existed| {
                if existed {
                    if let Some(v) = pending.take() {
                        *cell.borrow_mut() = v;
                    }
                }
            },
        );
    }

    /// Takes the calling ULT's value, leaving `T::default()`.
    ///
    /// # Panics
    ///
    /// Panics if the value is borrowed.
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(RefCell::take)
    }

    /// Replaces the calling ULT's value, returning the old one.
    ///
    /// # Panics
    ///
    /// Panics if the value is borrowed.
    pub fn replace(&'static self, value: T) -> T {
        self.with(|cell| cell.replace(value))
    }
}

/// Declares ULT-local statics, like `std::thread_local!`: each ULT that uses one sees its own
/// value, created by the initializer on first use and dropped when the ULT ends; on an OS thread
/// outside any ULT the value is per OS thread. See [`UltLocalKey`].
///
/// ```
/// use std::cell::Cell;
///
/// elite_rt::ult_local!(static CALLS: Cell<u64> = Cell::new(0));
///
/// fn count_call() -> u64 {
///     CALLS.set(CALLS.get() + 1);
///     CALLS.get()
/// }
///
/// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
/// let (a, b) = rt.block_on(|| {
///     let a = elite_rt::spawn(|| (count_call(), count_call()).1);
///     let b = elite_rt::spawn(count_call);
///     (a.join().unwrap(), b.join().unwrap())
/// });
/// assert_eq!((a, b), (2, 1)); // per ULT
/// assert_eq!(count_call(), 1); // this OS thread's own value
/// ```
#[macro_export]
macro_rules! ult_local {
    () => {};
    // `const { .. }` initializers, accepted for symmetry with `thread_local!`: the value is still
    // made on first use.
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const $init:block; $($rest:tt)*) => {
        $crate::ult_local!($(#[$attr])* $vis static $name: $t = $init);
        $crate::ult_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const $init:block) => {
        $crate::ult_local!($(#[$attr])* $vis static $name: $t = $init);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $crate::ult_local!($(#[$attr])* $vis static $name: $t = $init);
        $crate::ult_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $(#[$attr])* $vis static $name: $crate::UltLocalKey<$t> = {
            fn __elite_ult_local_init() -> $t {
                $init
            }
            $crate::UltLocalKey::new(__elite_ult_local_init)
        };
    };
}

/// Frees a value stored by `get_or_init`.
///
/// # Safety
/// `p` came from `Box::into_raw(Box<T>)` and is freed once.
unsafe fn drop_boxed<T>(p: *mut ()) {
    // SAFETY: per the contract.
    drop(unsafe { Box::from_raw(p as *mut T) });
}

/// A stored value and the function that frees it.
type Value = (*mut (), unsafe fn(*mut ()));

/// One key's place in a map.
#[derive(Clone, Copy)]
enum Slot {
    Empty,
    Full {
        value: *mut (),
        drop: unsafe fn(*mut ()),
    },
    /// Destroyed at the end of the owner; stays so until the map is freed.
    Destroyed,
}

/// The ULT-local values of one ULT (or one OS thread), by key index.
///
/// Always used through a raw pointer and borrowed only inside its own short methods: user code
/// (initializers, destructors) runs between them and may reach the same map again.
pub(crate) struct LocalMap {
    slots: Vec<Slot>,
    /// Indices of full slots in creation order (destruction goes backwards).
    order: Vec<usize>,
}

impl LocalMap {
    fn new() -> LocalMap {
        LocalMap { slots: Vec::new(), order: Vec::new() }
    }

    /// The value stored for `index`: `Ok(None)` when there is none yet.
    ///
    /// # Safety
    /// `map` is live and not borrowed elsewhere during the call.
    unsafe fn lookup(map: *mut LocalMap, index: usize) -> Result<Option<*mut ()>, AccessError> {
        // SAFETY: per the contract.
        let map = unsafe { &*map };
        match map.slots.get(index) {
            Some(Slot::Full { value, .. }) => Ok(Some(*value)),
            Some(Slot::Destroyed) => Err(AccessError),
            Some(Slot::Empty) | None => Ok(None),
        }
    }

    /// Stores `value` for `index`. A value stored meanwhile (by an initializer that used its own
    /// key) is replaced and dropped, as std does; a destroyed slot refuses.
    ///
    /// # Safety
    /// `map` is live and not borrowed elsewhere; `drop` frees `value` (once).
    unsafe fn store(
        map: *mut LocalMap,
        index: usize,
        value: *mut (),
        drop: unsafe fn(*mut ()),
    ) -> Result<(), AccessError> {
        let old = {
            // SAFETY: per the contract; the borrow ends before any user code runs below.
            let map = unsafe { &mut *map };
            if map.slots.len() <= index {
                map.slots.resize(index + 1, Slot::Empty);
            }
            let old = std::mem::replace(&mut map.slots[index], Slot::Full { value, drop });
            match old {
                Slot::Destroyed => {
                    map.slots[index] = Slot::Destroyed;
                    return Err(AccessError);
                }
                Slot::Empty => map.order.push(index),
                Slot::Full { .. } => {}
            }
            old
        };
        if let Slot::Full { value, drop } = old {
            // SAFETY: the replaced value was stored with its own drop function; nobody refers to
            // it any more (the initializer that stored it has returned).
            unsafe { drop(value) };
        }
        Ok(())
    }

    /// Takes the most recently created full slot's value, marking the slot destroyed.
    ///
    /// # Safety
    /// `map` is live and not borrowed elsewhere during the call.
    unsafe fn pop_newest(map: *mut LocalMap) -> Option<Value> {
        // SAFETY: per the contract.
        let map = unsafe { &mut *map };
        let index = map.order.pop()?;
        match std::mem::replace(&mut map.slots[index], Slot::Destroyed) {
            Slot::Full { value, drop } => Some((value, drop)),
            _ => crate::fatal("ULT-local map: an ordered slot was not full"),
        }
    }

    /// Destroys every value of `map`, newest first (values created meanwhile included), then frees
    /// the map. A destructor that panics aborts the process.
    ///
    /// # Safety
    /// `map` came from [`LocalMap::create`], is reachable only by its owner (the caller), and is
    /// freed only here, once.
    unsafe fn destroy(map: *mut LocalMap) {
        // SAFETY: per the contract, between the destructors' own (re-entrant) uses.
        while let Some((value, drop)) = unsafe { LocalMap::pop_newest(map) } {
            let dropped = std::panic::catch_unwind(|| {
                // SAFETY: the value was stored with this drop function and was just unlinked.
                unsafe { drop(value) }
            });
            if let Err(payload) = dropped {
                std::mem::forget(payload);
                crate::fatal("the destructor of a ULT-local value panicked");
            }
        }
        // SAFETY: per the contract; no slot is full any more and nobody else holds the map.
        drop(unsafe { Box::from_raw(map) });
    }

    fn create() -> *mut LocalMap {
        Box::into_raw(Box::new(LocalMap::new()))
    }
}

/// The map of the caller: its ULT's (created if needed, also for a ULT anchored to its OS thread
/// while it unwinds, `crate::anchor`), or its OS thread's outside a ULT.
fn current_map() -> Result<*mut LocalMap, AccessError> {
    if let Some(t) = current_processor().and_then(|p| p.current_ult()).or_else(crate::anchor::anchored) {
        let field = &t.tcb().exec.locals;
        let mut map = field.get();
        if map.is_null() {
            map = LocalMap::create();
            field.set(map);
        }
        return Ok(map);
    }
    OS_THREAD_LOCALS.try_with(OsThreadLocals::map).map_err(|_| AccessError)
}

/// The ULT-local values of an OS thread that used keys outside any ULT.
struct OsThreadLocals(Cell<*mut LocalMap>);

impl OsThreadLocals {
    fn map(&self) -> *mut LocalMap {
        let mut map = self.0.get();
        if map.is_null() {
            map = LocalMap::create();
            self.0.set(map);
        }
        map
    }
}

impl Drop for OsThreadLocals {
    fn drop(&mut self) {
        let map = self.0.replace(ptr::null_mut());
        if !map.is_null() {
            // SAFETY: created by `map` for this thread, now unreachable (this thread-local is being
            // destroyed, so `try_with` fails for any destructor that tries to reach it).
            unsafe { LocalMap::destroy(map) };
        }
    }
}

thread_local! {
    static OS_THREAD_LOCALS: OsThreadLocals = const { OsThreadLocals(Cell::new(ptr::null_mut())) };
}

/// Destroys the ULT-local values of the ULT `t`: a guard in the ULT's root frame, dropped when
/// the runtime's shutdown unwinds the ULT; a ULT that returns calls [`UltLocals::destroy`] before
/// publishing its exit (and once more after dropping its own result when it was detached).
pub(crate) struct UltLocals(pub(crate) crate::tcb::TcbRef);

impl UltLocals {
    /// Destroys the ULT's values now, if it has any. Called on the ULT itself (its root frame, or
    /// its exit's publication), or on the thread unwinding it at shutdown.
    #[inline]
    pub(crate) fn destroy(&self) {
        if !self.0.tcb().exec.locals.get().is_null() {
            self.destroy_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn destroy_slow(&self) {
        let field = &self.0.tcb().exec.locals;
        let map = field.get();
        // SAFETY: the map was created for this ULT by `current_map` and only this ULT reaches it
        // (it is the caller, at the end of its life); a value created by a destructor meanwhile
        // lands in the same map and is destroyed by the same loop.
        unsafe { LocalMap::destroy(map) };
        field.set(ptr::null_mut());
    }
}

impl Drop for UltLocals {
    #[inline]
    fn drop(&mut self) {
        self.destroy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// Counts drops of values it is part of.
    struct Noted(Rc<RefCell<Vec<&'static str>>>, &'static str);

    impl Drop for Noted {
        fn drop(&mut self) {
            self.0.borrow_mut().push(self.1);
        }
    }

    /// Boxes `v` into slot `index` of `map`.
    ///
    /// # Safety
    /// `map` is live and not borrowed elsewhere (as [`LocalMap::store`] requires).
    unsafe fn put<T>(map: *mut LocalMap, index: usize, v: T) -> Result<(), AccessError> {
        let raw = Box::into_raw(Box::new(v)) as *mut ();
        // SAFETY: a fresh box and its matching drop function.
        let r = unsafe { LocalMap::store(map, index, raw, drop_boxed::<T>) };
        if r.is_err() {
            // SAFETY: refused, so still ours.
            unsafe { drop_boxed::<T>(raw) };
        }
        r
    }

    #[test]
    fn map_stores_replaces_and_destroys_newest_first() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let map = LocalMap::create();
        // SAFETY: the map is live and used by this thread only.
        unsafe {
            assert_eq!(LocalMap::lookup(map, 3), Ok(None));
            put(map, 3, Noted(log.clone(), "a")).unwrap();
            put(map, 0, Noted(log.clone(), "b")).unwrap();
            put(map, 7, Noted(log.clone(), "c")).unwrap();
            // Replacing drops the old value at once and keeps the creation order.
            put(map, 0, Noted(log.clone(), "b2")).unwrap();
            assert_eq!(*log.borrow(), ["b"]);
            let p = LocalMap::lookup(map, 7).unwrap().unwrap() as *const Noted;
            assert_eq!((*p).1, "c");
            LocalMap::destroy(map);
        }
        assert_eq!(*log.borrow(), ["b", "c", "b2", "a"]);
    }

    thread_local! {
        static REENTRANT_MAP: Cell<*mut LocalMap> = const { Cell::new(ptr::null_mut()) };
    }

    /// On drop, looks at slot 0 (destroyed before it: an error) and fills slot 5 (a fresh value,
    /// destroyed by the same loop).
    struct Reentrant(Rc<RefCell<Vec<&'static str>>>);

    impl Drop for Reentrant {
        fn drop(&mut self) {
            let map = REENTRANT_MAP.with(Cell::get);
            // SAFETY: the map is live (being destroyed) and not borrowed during a destructor.
            unsafe {
                assert_eq!(LocalMap::lookup(map, 0).err(), Some(AccessError));
                assert_eq!(put(map, 0, 1u8), Err(AccessError));
                put(map, 5, Noted(self.0.clone(), "late")).unwrap();
            }
            self.0.borrow_mut().push("reentrant");
        }
    }

    #[test]
    fn destructors_may_use_the_map_being_destroyed() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let map = LocalMap::create();
        REENTRANT_MAP.with(|m| m.set(map));
        // SAFETY: as above.
        unsafe {
            put(map, 1, Reentrant(log.clone())).unwrap();
            put(map, 0, Noted(log.clone(), "first-destroyed")).unwrap();
            LocalMap::destroy(map);
        }
        assert_eq!(*log.borrow(), ["first-destroyed", "reentrant", "late"]);
    }

    crate::ult_local! {
        static COUNTER: Cell<u32> = Cell::new(10);
        static NAMES: RefCell<Vec<&'static str>> = RefCell::new(vec!["init"]);
        static UNTOUCHED: Cell<u8> = const { Cell::new(1) };
    }

    #[test]
    fn outside_a_ult_each_os_thread_has_its_own_value() {
        COUNTER.set(COUNTER.get() + 1);
        assert_eq!(COUNTER.get(), 11);
        assert_eq!(COUNTER.replace(3), 11);
        assert_eq!(COUNTER.take(), 3);
        assert_eq!(COUNTER.get(), 0);
        NAMES.with_borrow_mut(|v| v.push("main"));
        assert_eq!(NAMES.with_borrow(|v| v.clone()), ["init", "main"]);
        let other = std::thread::spawn(|| {
            // `set` first: the initializer does not run.
            NAMES.set(vec!["other"]);
            (COUNTER.get(), NAMES.take())
        })
        .join()
        .unwrap();
        assert_eq!(other, (10, vec!["other"]));
        assert_eq!(NAMES.replace(vec![]), ["init", "main"]);
        assert_eq!(UNTOUCHED.get(), 1);
    }

    thread_local! {
        static LEVEL: Cell<u32> = const { Cell::new(0) };
    }

    crate::ult_local! {
        /// An initializer that uses its own key, twice deep: each level's value replaces the one
        /// stored by the level it started, so the outermost initializer's value is kept (as std does).
        static DEPTHED: Cell<u32> = {
            let level = LEVEL.with(|l| {
                l.set(l.get() + 1);
                l.get()
            });
            if level < 3 {
                DEPTHED.with(|v| assert_eq!(v.get(), level + 1));
            }
            Cell::new(level)
        };
    }

    #[test]
    fn an_initializer_that_uses_its_own_key_keeps_the_outermost_value() {
        assert_eq!(DEPTHED.get(), 1);
        assert_eq!(LEVEL.with(Cell::get), 3);
    }
}
