//! [`OnceLock`] and [`LazyLock`]: values initialised once, on a [`Once`] whose waiters block their
//! ULT.
//!
//! Both keep the value next to a [`Once`] and write it only inside the `Once`'s initialiser, so
//! the `Once`'s protocol (`sync::once`) is theirs: the value is written before the `Once` is
//! complete (its `Release` store), and read only after it was seen complete (an `Acquire` load,
//! or the spin lock a woken waiter takes).

use super::once::Once;
use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::Deref;
use std::panic::{RefUnwindSafe, UnwindSafe};

/// A cell written once, with `std::sync::OnceLock`'s interface and semantics; a caller that finds
/// another one initialising it blocks its ULT (or parks its OS thread) until that one is done, so
/// the processor runs other ULTs meanwhile (see [`Once`] for why std's would not do inside ULTs).
///
/// A panicking initialiser leaves the cell empty (the panic goes on to its caller), and the next
/// caller's initialiser runs, as with std.
///
/// ```
/// use elite_rt::sync::OnceLock;
///
/// static CONFIG: OnceLock<String> = OnceLock::new();
///
/// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
/// rt.block_on(|| {
///     let readers: Vec<_> = (0..4)
///         .map(|i| {
///             elite_rt::spawn(move || {
///                 CONFIG
///                     .get_or_init(|| {
///                         // Only the first gets here; the others wait for it, on this processor.
///                         elite_rt::sleep(std::time::Duration::from_millis(5));
///                         format!("set by {i}")
///                     })
///                     .clone()
///             })
///         })
///         .collect();
///     let seen: Vec<String> = readers.into_iter().map(|h| h.join().unwrap()).collect();
///     assert!(seen.iter().all(|s| s == &seen[0]));
/// });
/// assert_eq!(CONFIG.set(String::from("too late")), Err(String::from("too late")));
/// ```
pub struct OnceLock<T> {
    once: Once,
    value: UnsafeCell<MaybeUninit<T>>,
    /// The cell owns a `T` (for the drop check; `MaybeUninit` says nothing).
    _owns: PhantomData<T>,
}

// SAFETY: as std's: `&OnceLock` gives `&T` (so `T: Sync`) and lets any thread store the value
// (so `T: Send`).
unsafe impl<T: Sync + Send> Sync for OnceLock<T> {}
// SAFETY: moving the cell moves the value.
unsafe impl<T: Send> Send for OnceLock<T> {}

// As std's: a panicking initialiser leaves the cell empty, never half written.
impl<T: RefUnwindSafe + UnwindSafe> RefUnwindSafe for OnceLock<T> {}
impl<T: UnwindSafe> UnwindSafe for OnceLock<T> {}

impl<T> OnceLock<T> {
    /// An empty cell.
    pub const fn new() -> OnceLock<T> {
        OnceLock { once: Once::new(), value: UnsafeCell::new(MaybeUninit::uninit()), _owns: PhantomData }
    }

    /// The value, if the cell has one (never waits).
    #[inline]
    pub fn get(&self) -> Option<&T> {
        if self.once.is_completed() {
            // SAFETY: complete: the value was written, and is seen (`is_completed` is `Acquire`).
            Some(unsafe { self.get_unchecked() })
        } else {
            None
        }
    }

    /// The value, mutably, if the cell has one.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        if self.once.is_completed() {
            // SAFETY: complete: the value was written; `&mut self` is exclusive.
            Some(unsafe { self.value.get_mut().assume_init_mut() })
        } else {
            None
        }
    }

    /// Waits (without running anything) until the cell has a value, and returns it.
    pub fn wait(&self) -> &T {
        self.once.wait_force();
        // SAFETY: `wait_force` returns once the `Once` is complete, so the value was written.
        unsafe { self.get_unchecked() }
    }

    /// Stores `value` if the cell is empty: `Ok(())`, or `Err(value)` if it already had one
    /// (the cell has a value either way once this returns; it waits while another caller
    /// initialises it).
    pub fn set(&self, value: T) -> Result<(), T> {
        let mut value = Some(value);
        if !self.once.is_completed() {
            // (Run only once, with `value` still there: it is ours until this takes it.)
            self.initialize(|| value.take().unwrap_or_else(|| unreachable!("an initialiser ran twice")));
        }
        match value {
            None => Ok(()),
            Some(v) => Err(v),
        }
    }

    /// The value, initialising the cell with `f()` first if it is empty. While another caller's
    /// `f` runs, this waits (blocking the ULT, not its processor) and then returns that value.
    ///
    /// # Panics
    ///
    /// If `f` panics: the panic goes on to the caller and the cell stays empty. An `f` that
    /// initialises the same cell waits for itself: the runtime's deadlock report names it.
    #[inline]
    pub fn get_or_init<F: FnOnce() -> T>(&self, f: F) -> &T {
        if let Some(v) = self.get() {
            return v;
        }
        self.initialize(f);
        // SAFETY: `initialize` returned: the `Once` is complete, so the value was written.
        unsafe { self.get_unchecked() }
    }

    /// Takes the value out, leaving the cell empty.
    pub fn take(&mut self) -> Option<T> {
        if self.once.is_completed() {
            self.once = Once::new();
            // SAFETY: it was complete, so the value was written; the fresh `Once` makes sure it
            // is neither read nor dropped again.
            Some(unsafe { self.value.get_mut().assume_init_read() })
        } else {
            None
        }
    }

    /// The value, if the cell has one.
    pub fn into_inner(mut self) -> Option<T> {
        self.take()
    }

    /// Runs `f` under the `Once` (poisoning ignored: a panicked initialiser left the cell
    /// empty) and stores its value, unless another initialiser completed first.
    #[cold]
    fn initialize<F: FnOnce() -> T>(&self, f: F) {
        let mut f = Some(f);
        let slot = &self.value;
        self.once.call_once_force(|_| {
            if let Some(f) = f.take() {
                let v = f();
                // SAFETY: only the one running initialiser of the `Once` writes the value, and
                // nobody reads it before the `Once` is complete.
                unsafe { (*slot.get()).write(v) };
            }
        });
    }

    /// # Safety
    /// The `Once` is complete, and the caller has seen it so.
    unsafe fn get_unchecked(&self) -> &T {
        // SAFETY: per the contract, the value was written and is never written again while
        // shared.
        unsafe { (*self.value.get()).assume_init_ref() }
    }
}

impl<T> Drop for OnceLock<T> {
    fn drop(&mut self) {
        if self.once.is_completed() {
            // SAFETY: complete: the value was written; this is its last use.
            unsafe { self.value.get_mut().assume_init_drop() };
        }
    }
}

impl<T> Default for OnceLock<T> {
    fn default() -> OnceLock<T> {
        OnceLock::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for OnceLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_tuple("OnceLock");
        match self.get() {
            Some(v) => d.field(v),
            None => d.field(&format_args!("<uninit>")),
        };
        d.finish()
    }
}

impl<T: Clone> Clone for OnceLock<T> {
    fn clone(&self) -> OnceLock<T> {
        let cell = OnceLock::new();
        if let Some(v) = self.get() {
            let _ = cell.set(v.clone()); // a fresh cell: always stored
        }
        cell
    }
}

impl<T> From<T> for OnceLock<T> {
    /// A cell holding `value`.
    fn from(value: T) -> OnceLock<T> {
        let cell = OnceLock::new();
        let _ = cell.set(value); // a fresh cell: always stored
        cell
    }
}

impl<T: PartialEq> PartialEq for OnceLock<T> {
    /// Equal when both are empty, or both hold equal values.
    fn eq(&self, other: &OnceLock<T>) -> bool {
        self.get() == other.get()
    }
}

impl<T: Eq> Eq for OnceLock<T> {}

/// What a [`LazyLock`] holds: the initialiser until it has run, the value after (neither once
/// the initialiser panicked). Which one, the `Once`'s state says.
union Data<T, F> {
    value: ManuallyDrop<T>,
    f: ManuallyDrop<F>,
}

/// A value computed on first access, with `std::sync::LazyLock`'s interface and semantics; a
/// caller that finds another one computing it blocks its ULT (or parks its OS thread) until that
/// one is done, so the processor runs other ULTs meanwhile (see [`Once`] for why std's would not
/// do inside ULTs).
///
/// If the initialiser panics, the `LazyLock` is poisoned: that access and every later one panic.
///
/// ```
/// use elite_rt::sync::LazyLock;
/// use std::collections::HashMap;
///
/// static SQUARES: LazyLock<HashMap<u32, u32>> = LazyLock::new(|| {
///     elite_rt::yield_now(); // other ULTs run; those that want the map wait for it
///     (0..100).map(|i| (i, i * i)).collect()
/// });
///
/// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
/// let sum = rt.block_on(|| {
///     let ults: Vec<_> = (0..10u32).map(|i| elite_rt::spawn(move || SQUARES[&i])).collect();
///     ults.into_iter().map(|h| h.join().unwrap()).sum::<u32>()
/// });
/// assert_eq!(sum, 285);
/// ```
pub struct LazyLock<T, F = fn() -> T> {
    once: Once,
    data: UnsafeCell<Data<T, F>>,
}

// SAFETY: as std's: `&LazyLock` gives `&T` (so `T: Sync`), and any thread may run the initialiser
// and store the value (so `F: Send`, `T: Send`).
unsafe impl<T: Sync + Send, F: Send> Sync for LazyLock<T, F> {}

// As std's: a panicking initialiser poisons it, and every later access panics.
impl<T: RefUnwindSafe + UnwindSafe, F: UnwindSafe> RefUnwindSafe for LazyLock<T, F> {}
impl<T: UnwindSafe, F: UnwindSafe> UnwindSafe for LazyLock<T, F> {}

impl<T, F: FnOnce() -> T> LazyLock<T, F> {
    /// A `LazyLock` that computes its value with `f` on first access.
    pub const fn new(f: F) -> LazyLock<T, F> {
        LazyLock { once: Once::new(), data: UnsafeCell::new(Data { f: ManuallyDrop::new(f) }) }
    }

    /// The value, computing it first if no access has yet (and waiting, blocking the ULT, while
    /// another caller computes it). The same as `*this`.
    ///
    /// # Panics
    ///
    /// If the initialiser panics (this time, or an earlier time: the `LazyLock` is poisoned).
    #[inline]
    pub fn force(this: &LazyLock<T, F>) -> &T {
        if !this.once.is_completed() {
            this.initialize();
        }
        // SAFETY: the `Once` is complete (seen so, `Acquire`, here or in `initialize`'s
        // `call_once`), so the value was written and `data` holds it.
        unsafe { &(*this.data.get()).value }
    }

    #[cold]
    fn initialize(&self) {
        let data = &self.data;
        let once = &self.once;
        once.call_once_force(|state| {
            if state.is_poisoned() {
                // The initialiser is gone with the earlier panic: nothing can be computed.
                panic!("LazyLock instance has previously been poisoned");
            }
            // SAFETY: not yet initialised, and we are the one running initialiser: `data` holds
            // the initialiser, which we take (a panic in it leaves the `Once` poisoned, and
            // nothing is read or dropped from `data` again).
            let f = unsafe { ManuallyDrop::take(&mut (*data.get()).f) };
            let value = f();
            // SAFETY: as above; the value replaces the initialiser already taken.
            unsafe { (*data.get()).value = ManuallyDrop::new(value) };
        });
    }
}

impl<T, F> Drop for LazyLock<T, F> {
    fn drop(&mut self) {
        let data = self.data.get_mut();
        if self.once.is_completed() {
            // SAFETY: complete: `data` holds the value; this is its last use.
            unsafe { ManuallyDrop::drop(&mut data.value) }
        } else if !self.once.is_poisoned() {
            // SAFETY: never run (no one can be running it: `&mut self`): `data` holds the
            // initialiser.
            unsafe { ManuallyDrop::drop(&mut data.f) }
        }
        // Poisoned: the initialiser was taken and panicked; nothing is left.
    }
}

impl<T, F: FnOnce() -> T> Deref for LazyLock<T, F> {
    type Target = T;

    /// [`LazyLock::force`].
    #[inline]
    fn deref(&self) -> &T {
        LazyLock::force(self)
    }
}

impl<T: Default> Default for LazyLock<T> {
    /// A `LazyLock` computing `T::default()`.
    fn default() -> LazyLock<T> {
        LazyLock::new(T::default)
    }
}

impl<T: fmt::Debug, F> fmt::Debug for LazyLock<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_tuple("LazyLock");
        if self.once.is_completed() {
            // SAFETY: complete (seen so, `Acquire`): `data` holds the value.
            d.field(unsafe { &*(*self.data.get()).value });
        } else {
            d.field(&format_args!("<uninit>"));
        }
        d.finish()
    }
}
