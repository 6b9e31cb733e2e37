//! What `std::sync` promises, checked on elite's versions: the traits and variance std's types
//! have (code that compiles with std compiles here), and the semantics std documents for each
//! type and method, from ULTs and from OS threads.

mod common;

use elite_rt::sync::{Barrier, Condvar, Mutex, RwLock, RwLockReadGuard, Semaphore, WaitGroup};
use std::panic::{catch_unwind, RefUnwindSafe, UnwindSafe};

fn unwind_safe<T: UnwindSafe + ?Sized>() {}
fn ref_unwind_safe<T: RefUnwindSafe + ?Sized>() {}

/// std's locks poison, so they are `UnwindSafe` and `RefUnwindSafe` whatever they hold (a
/// `RefCell` included, which is neither): a closure that only borrows one may be passed to
/// `catch_unwind` without `AssertUnwindSafe`. The same closures compile with elite's, and with
/// its `Semaphore` and `WaitGroup`.
#[test]
fn locks_condvar_and_barrier_are_unwind_safe_as_std_s() {
    use std::cell::RefCell;
    unwind_safe::<Mutex<RefCell<u32>>>();
    ref_unwind_safe::<Mutex<RefCell<u32>>>();
    unwind_safe::<RwLock<RefCell<u32>>>();
    ref_unwind_safe::<RwLock<RefCell<u32>>>();
    unwind_safe::<Condvar>();
    ref_unwind_safe::<Condvar>();
    unwind_safe::<Barrier>();
    ref_unwind_safe::<Barrier>();
    // elite's own blocking types, likewise.
    unwind_safe::<Semaphore>();
    ref_unwind_safe::<Semaphore>();
    unwind_safe::<WaitGroup>();
    ref_unwind_safe::<WaitGroup>();
    // Unsized contents too, as std's `impl<T: ?Sized>`.
    ref_unwind_safe::<Mutex<[RefCell<u8>]>>();
    ref_unwind_safe::<RwLock<[RefCell<u8>]>>();

    let m = Mutex::new(RefCell::new(1));
    let rw = RwLock::new(RefCell::new(2));
    let cv = Condvar::new();
    let b = Barrier::new(1);
    assert!(catch_unwind(|| {
        let _ = &m;
    })
    .is_ok());
    assert!(catch_unwind(|| {
        let _ = &rw;
    })
    .is_ok());
    assert!(catch_unwind(|| {
        let _ = &cv;
    })
    .is_ok());
    assert!(catch_unwind(|| {
        let _ = &b;
    })
    .is_ok());
    // And what catch_unwind is for: a panic inside leaves the lock poisoned, which says so.
    let r = catch_unwind(|| {
        let _g = m.lock().unwrap();
        panic!("inside the critical section");
    });
    assert!(r.is_err());
    assert!(m.is_poisoned());
    assert_eq!(*m.lock().unwrap_err().into_inner().borrow(), 1);
}

/// Shortens the lifetime of the reference a read guard gives: compiles only if
/// `RwLockReadGuard<'a, T>` is covariant in `T` (as std's is, `test_read_guard_covariance`).
fn shorten<'g, 'short, T: ?Sized>(g: RwLockReadGuard<'g, &'static T>) -> RwLockReadGuard<'g, &'short T> {
    g
}

/// The longer of the guarded string and `other`: the guard's `&'static str` must shorten to `'a`.
fn longer<'a>(g: RwLockReadGuard<'_, &'a str>, other: &'a str) -> &'a str {
    if g.len() >= other.len() {
        *g
    } else {
        other
    }
}

#[test]
fn a_read_guard_is_covariant_in_its_value() {
    static GREETING: &str = "hello";
    let lock = RwLock::new(GREETING);
    {
        let local = String::from("hello, world");
        assert_eq!(longer(lock.read().unwrap(), &local), "hello, world");
        let g = shorten(lock.read().unwrap());
        assert_eq!(*g, "hello");
    }
    assert!(lock.try_write().is_ok(), "the guards unlocked");
}
