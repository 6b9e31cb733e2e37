//! Heap cells for the one value of a blocking `send` or `recv`, reused through a per-thread pool
//! so that those operations make no heap allocation once the pool is warm.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};

/// The storage of one cell: room and alignment for any value that [`Cell::fits`].
#[repr(C, align(16))]
pub(crate) struct Storage([MaybeUninit<u8>; CELL_BYTES]);

/// The size of a cell's storage.
const CELL_BYTES: usize = 64;
/// The most cells each OS thread keeps for reuse; more are freed.
const POOL_MAX: usize = 32;

thread_local! {
    // The boxes themselves are the point: their addresses are what MPI is given.
    #[allow(clippy::vec_box)]
    static POOL: RefCell<Vec<Box<Storage>>> = const { RefCell::new(Vec::new()) };
}

/// A heap cell holding (room for) one `T`: its address does not change when the `Cell` moves,
/// so MPI may read or write it while the cell is owned by an operation in flight.
pub(crate) struct Cell<T> {
    storage: ManuallyDrop<Box<Storage>>,
    _value: PhantomData<T>,
}

impl<T: Copy> Cell<T> {
    /// Whether a `T` fits a cell.
    pub(crate) const fn fits() -> bool {
        size_of::<T>() <= CELL_BYTES && align_of::<T>() <= align_of::<Storage>()
    }

    /// A cell from this thread's pool (or a new one), holding `value` if given.
    ///
    /// # Panics
    /// When a `T` does not [`fit`](Cell::fits) (callers check first).
    pub(crate) fn new(value: Option<T>) -> Cell<T> {
        assert!(Self::fits(), "a value too large for a cell");
        let storage = POOL
            .try_with(|p| p.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_else(|| Box::new(Storage([MaybeUninit::uninit(); CELL_BYTES])));
        let mut cell: Cell<T> = Cell { storage: ManuallyDrop::new(storage), _value: PhantomData };
        if let Some(v) = value {
            // SAFETY: the storage has room and alignment for a T (`fits`).
            unsafe { cell.as_mut_ptr().write(v) };
        }
        cell
    }

    /// The address of the value, for MPI.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut T {
        self.storage.0.as_mut_ptr().cast::<T>()
    }

    /// The value.
    ///
    /// # Safety
    /// A whole `T` must have been written to the cell (by `new` or by MPI).
    pub(crate) unsafe fn read(&self) -> T {
        // SAFETY: aligned and initialised (the caller's promise).
        unsafe { self.storage.0.as_ptr().cast::<T>().read() }
    }
}

impl<T> Drop for Cell<T> {
    fn drop(&mut self) {
        // SAFETY: the storage is taken once, here, and not touched after.
        let storage = unsafe { ManuallyDrop::take(&mut self.storage) };
        // Back to this thread's pool (dropped instead when it is full or being torn down).
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                if p.len() < POOL_MAX {
                    p.push(storage);
                }
            }
        });
    }
}
