//! Models of a spin lock's bias (`sync::bias`): the owner's plain-store path against a holder of
//! the unbiased lock that revokes the bias, and the biasing itself against a second party.
//!
//! The lock around the bias is the runtime's in miniature (`sync::wait::BiasedSpinLock`): a CAS
//! word for the unbiased path, the bias's owner path first when the caller is the owner. The
//! light and heavy barriers are `SeqCst` fences here, which loom models exactly. The critical
//! section increments a loom `UnsafeCell`: two holders at once, or a holder that does not see the
//! previous one's write, is a race loom reports; a holder count asserts exclusion as well.

use super::check;
use crate::atomics::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::bias::{Bias, Streak};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

struct Model {
    locked: AtomicBool,
    bias: Bias,
    streak: UnsafeCell<Streak>,
    data: UnsafeCell<usize>,
    holders: AtomicUsize,
}

/// Which flag a holder took the lock through.
enum Held {
    Owner,
    Word,
}

impl Model {
    fn new(owner: usize, threshold: u32) -> Arc<Model> {
        Arc::new(Model {
            locked: AtomicBool::new(false),
            bias: Bias::biased_to(owner),
            streak: UnsafeCell::new(Streak::with_threshold(threshold)),
            data: UnsafeCell::new(0),
            holders: AtomicUsize::new(0),
        })
    }

    /// `BiasedSpinLock::lock` from processor `me`.
    fn lock(&self, me: usize) -> Held {
        if me != 0 && self.bias.try_owner(me) {
            return Held::Owner;
        }
        while self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            thread::yield_now();
        }
        // SAFETY: a loom cell access under the unbiased lock; loom reports one that races.
        self.streak.with_mut(|s| self.bias.after_lock(unsafe { &mut *s }, me));
        Held::Word
    }

    fn unlock(&self, h: Held) {
        match h {
            Held::Owner => self.bias.held().store(false, Ordering::Release),
            Held::Word => self.locked.store(false, Ordering::Release),
        }
    }

    /// One critical section from processor `me`.
    fn section(&self, me: usize) {
        let h = self.lock(me);
        assert_eq!(self.holders.fetch_add(1, Ordering::Relaxed), 0, "two holders at once");
        // SAFETY: a loom cell access; loom itself reports one that races with another holder's.
        self.data.with_mut(|d| unsafe { *d += 1 });
        self.holders.fetch_sub(1, Ordering::Relaxed);
        self.unlock(h);
    }

    fn total(&self) -> usize {
        // SAFETY: a loom cell access after every thread of the model was joined.
        self.data.with(|d| unsafe { *d })
    }
}

/// Processor `me` takes `lock` sections while a spawned thread as `other` takes one: exclusion,
/// and each section sees the one before (the total counts them all).
fn race(lock: Arc<Model>, me: usize, sections: usize, other: usize) {
    let thread = {
        let lock = lock.clone();
        thread::spawn(move || lock.section(other))
    };
    for _ in 0..sections {
        lock.section(me);
    }
    thread.join().unwrap();
    assert_eq!(lock.total(), sections + 1);
}

/// The lock starts biased to processor 1, which takes it twice with plain stores while
/// processor 2 takes it once, revoking the bias (the heavy barrier, then the wait for the owner's
/// holder to leave).
#[test]
fn owner_against_a_revoker() {
    check("bias: owner against a revoker", || race(Model::new(1, 1000), 1, 2, 2));
}

/// Unbiased at first: processor 1 biases the lock at its second acquisition in a row and goes on
/// through the owner's path, while processor 2 takes the lock once (before, between or after,
/// revoking whatever bias it finds).
#[test]
fn biasing_against_another_processor() {
    check("bias: biasing against another processor", || race(Model::new(0, 2), 1, 3, 2));
}

/// A holder that is no processor (an OS thread, `me` 0) against the owner: it always takes the
/// unbiased lock, revoking the bias.
#[test]
fn owner_against_an_os_thread() {
    check("bias: owner against an OS thread", || race(Model::new(1, 1000), 1, 1, 0));
}

/// A lock revoked from processor 1 that processor 2 would bias at its next acquisition (refused:
/// only the first owner is biased again, `sync::bias`), against processor 1's stale owner path
/// (its thread saw `owner == 1` before the revocation and stores `held` only now) and an OS
/// thread's section. Were 2 biased, 1's stale entry would clear `held` while 2 holds the lock
/// through it, and the OS thread's revocation would not wait for 2's holder.
#[test]
fn a_former_owner_is_stale() {
    check("bias: a former owner is stale", || {
        let lock = Arc::new(Model {
            locked: AtomicBool::new(false),
            bias: Bias::biased_to(0),
            streak: UnsafeCell::new(Streak::revoked_from(1, 2, 2)),
            data: UnsafeCell::new(0),
            holders: AtomicUsize::new(0),
        });
        let stale = {
            let lock = lock.clone();
            thread::spawn(move || {
                if lock.bias.stale_try_owner(1) {
                    unreachable!("the bias was revoked from processor 1");
                }
            })
        };
        race(lock, 2, 2, 0);
        stale.join().unwrap();
    });
}
