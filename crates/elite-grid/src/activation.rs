//! Waking a patch's ULT, and knowing when no ULT has work left.
//!
//! ## The doorbell: coalescing wake-ups
//!
//! Each patch has a [`Doorbell`]: a state word and an [`elite_rt::sync::Semaphore`]. Any ULT may
//! [`ring`](Doorbell::ring) it; only the patch's own ULT (the *owner*) calls
//! [`begin_sweep`](Doorbell::begin_sweep) and [`wait`](Doorbell::wait).
//!
//! The state word holds two bits, `PENDING` (a ring has not been answered by a sweep yet) and
//! `SLEEPING` (the owner gave up its token and blocks, or is about to block, on the semaphore):
//!
//! | state | meaning | transitions |
//! | --- | --- | --- |
//! | `0` | owner running, nothing pending | ring: → `PENDING`; owner's `wait`: CAS → `SLEEPING` |
//! | `PENDING` | owner running, must sweep again | ring: no change; `begin_sweep`: → `0`; `wait` returns at once |
//! | `SLEEPING` | owner asleep | ring: → `SLEEPING|PENDING` **and that ringer releases the semaphore** |
//! | `SLEEPING|PENDING` | owner woken, not yet running | ring: no change; owner after `acquire`: → `PENDING` |
//!
//! A ring is one `fetch_or(PENDING)`; exactly one ringer finds `SLEEPING` without `PENDING`, so the
//! semaphore gets exactly one permit per sleep, whatever number of rings arrive (repeated wakes
//! coalesce into one). Every change of the state word is a read-modify-write, so the ring's
//! release and the owner's acquire in `begin_sweep` always synchronize, even when the ring changed
//! nothing: **a sweep that starts after a ring (in the state word's modification order) sees every
//! value the ringer stored before ringing.** A ring that comes during a sweep leaves `PENDING`
//! set, so `wait` returns at once and the owner sweeps again: no ring is lost.
//!
//! ## Termination: a token count
//!
//! [`Quiescence`] counts *tokens*: one per ULT that is running or woken (state `SLEEPING|PENDING`),
//! plus one held by the root while it starts the solve. A running owner that rings a running
//! neighbour creates no token (the neighbour holds its own and will see `PENDING`); the ringer
//! that wakes a sleeper adds one (`fetch_add`) before it releases the semaphore, and hands it to
//! the sleeper; an owner going to sleep removes its own (`fetch_sub`) after its CAS to
//! `SLEEPING`. A ringer holds a token while it rings, and a sleeper's decrement happens after the
//! wake that created its token, so the count reaches zero only when no ULT runs and none is woken
//! or pending: the solve is over. The ULT whose decrement reaches zero releases the
//! [`Quiescence`]'s semaphore, which the root waits on. Nobody can ring after that (only running
//! ULTs ring, and none runs), so it happens once; the root then sets the stop flag and rings every
//! doorbell, and each owner, on waking, sees the flag and returns. A watchdog (time limit) or a
//! panicking ULT may [`interrupt`](Quiescence::interrupt) the root's wait early; the root then
//! tells from its own flags that the solve did not converge.
//!
//! Orderings: rings are `Release` (they publish the ringer's relaxed stores of unknowns),
//! `begin_sweep` and the wake-up are `Acquire`; the token count is `AcqRel`, and the root learns of
//! quiescence through the semaphore, which orders everything before the last decrement before
//! the root's return from its wait.

use elite_rt::sync::Semaphore;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

/// A ring has not been answered by a sweep yet.
const PENDING: u32 = 1;
/// The owner sleeps (or is about to) on the semaphore.
const SLEEPING: u32 = 2;

/// A patch's wake-up: a state word and a semaphore (see the module docs).
pub struct Doorbell {
    state: AtomicU32,
    sleeper: Semaphore,
}

impl Default for Doorbell {
    fn default() -> Self {
        Doorbell::new()
    }
}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doorbell").field("state", &self.state.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

/// What [`Doorbell::wait`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Waited {
    /// A ring was pending: the owner did not sleep.
    Pending,
    /// The owner slept and a ring woke it.
    Woken,
}

impl Doorbell {
    /// A doorbell whose owner is running with nothing pending.
    pub const fn new() -> Doorbell {
        Doorbell { state: AtomicU32::new(0), sleeper: Semaphore::new(0) }
    }

    /// Asks the owner to sweep (again). Called by a ULT that holds a token (it is running) or by
    /// the root while it holds its own.
    #[inline]
    pub fn ring(&self, quiescence: &Quiescence) {
        // 1. Mark pending; `Release` publishes the unknowns this ringer stored.
        let old = self.state.fetch_or(PENDING, Ordering::Release);
        // 2. Only the ring that finds the owner asleep and nothing pending wakes it, handing it
        //    a new token; every other ring is coalesced into that one or into a running owner's
        //    next sweep.
        if old == SLEEPING {
            quiescence.add_token();
            self.sleeper.release();
        }
    }

    /// The owner is about to sweep: answers every ring so far. The sweep sees everything the
    /// ringers stored before ringing.
    #[inline]
    pub fn begin_sweep(&self) {
        self.state.fetch_and(!PENDING, Ordering::Acquire);
    }

    /// The owner has nothing to do: returns at once if a ring came since `begin_sweep`; otherwise
    /// gives up the owner's token (the last token out reports quiescence) and blocks until a ring
    /// wakes it with a new one.
    pub fn wait(&self, quiescence: &Quiescence) -> Waited {
        // 1. Announce the sleep unless a ring is pending (then sweep again, token kept).
        if self.state.compare_exchange(0, SLEEPING, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return Waited::Pending;
        }
        // 2. Give up our token.
        quiescence.drop_token();
        // 3. Block until the ringer that found us asleep releases the semaphore.
        self.sleeper.acquire();
        // 4. Running again, with that ringer's token; `PENDING` stays for `begin_sweep`.
        self.state.fetch_and(!SLEEPING, Ordering::Acquire);
        Waited::Woken
    }
}

/// The token count of the termination detection (see the module docs).
pub struct Quiescence {
    tokens: AtomicUsize,
    reached: Semaphore,
}

impl std::fmt::Debug for Quiescence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quiescence").field("tokens", &self.tokens()).finish_non_exhaustive()
    }
}

impl Quiescence {
    /// A count starting at `tokens`: one per ULT that starts running, plus the root's.
    pub const fn new(tokens: usize) -> Quiescence {
        Quiescence { tokens: AtomicUsize::new(tokens), reached: Semaphore::new(0) }
    }

    /// Tokens now (a snapshot: the number of ULTs running or woken, plus the root's).
    pub fn tokens(&self) -> usize {
        self.tokens.load(Ordering::Relaxed)
    }

    #[inline]
    fn add_token(&self) {
        self.tokens.fetch_add(1, Ordering::AcqRel);
    }

    /// Gives up a token; the one that takes the count to zero reports quiescence. Called by an
    /// owner going to sleep, and once by the root after it started the solve.
    #[inline]
    pub fn drop_token(&self) {
        if self.tokens.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.reached.release();
        }
    }

    /// Waits until quiescence is reached or [`interrupt`](Quiescence::interrupt) is called (the
    /// caller tells which by its own flags).
    pub fn wait(&self) {
        self.reached.acquire();
    }

    /// Waits at most `dur`, as [`wait`](Quiescence::wait); false if neither happened in time.
    pub fn wait_timeout(&self, dur: Duration) -> bool {
        self.reached.acquire_timeout(dur)
    }

    /// Ends a [`wait`](Quiescence::wait) early (a time limit, a failure): callable from any
    /// thread.
    pub fn interrupt(&self) {
        self.reached.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    fn runtime(processors: usize) -> elite_rt::Runtime {
        elite_rt::Runtime::builder().processors(processors).build().unwrap()
    }

    #[test]
    fn rings_coalesce_while_running_and_wake_a_sleeper_once() {
        let rt = runtime(1);
        rt.block_on(|| {
            let q = Quiescence::new(2); // the owner's token and ours
            let bell = Doorbell::new();
            bell.ring(&q);
            bell.ring(&q);
            assert_eq!(q.tokens(), 2, "rings on a running owner create no token");
            assert_eq!(bell.wait(&q), Waited::Pending);
            bell.begin_sweep();
            // Now asleep for real: the owner is a second ULT.
            let q = Arc::new(q);
            let bell = Arc::new(bell);
            let (q2, b2) = (q.clone(), bell.clone());
            let owner = elite_rt::spawn(move || b2.wait(&q2));
            while bell.state.load(Ordering::Acquire) != SLEEPING {
                elite_rt::yield_now();
            }
            assert_eq!(q.tokens(), 1, "the sleeper gave up its token");
            bell.ring(&q);
            bell.ring(&q);
            assert_eq!(q.tokens(), 2, "one wake-up, one token");
            assert_eq!(owner.join().unwrap(), Waited::Woken);
            assert_eq!(bell.state.load(Ordering::Relaxed), PENDING);
            assert_eq!(bell.sleeper.available_permits(), 0, "exactly one permit was released");
        });
    }

    /// A chain of ULTs passes a counter along by ringing; quiescence is reported exactly when the
    /// last one has gone back to sleep, and every ring is answered by a sweep that sees the value.
    #[test]
    fn quiescence_is_reached_only_when_all_work_is_done() {
        for processors in [1, 2] {
            let rt = runtime(processors);
            let n = 64;
            let limit = 50 * n as u64;
            let q = Arc::new(Quiescence::new(n + 1));
            let bells: Arc<Vec<Doorbell>> = Arc::new((0..n).map(|_| Doorbell::new()).collect());
            let seen: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            rt.block_on(|| {
                let handles: Vec<_> = (0..n)
                    .map(|i| {
                        let (q, bells, seen, stop) = (q.clone(), bells.clone(), seen.clone(), stop.clone());
                        elite_rt::spawn(move || {
                            let mut sweeps = 0u64;
                            let _ = bells[i].wait(&q);
                            while !stop.load(Ordering::Relaxed) {
                                bells[i].begin_sweep();
                                sweeps += 1;
                                // Pass the baton: one more than the predecessor's value, until
                                // the value reaches `limit`.
                                let prev = seen[(i + n - 1) % n].load(Ordering::Relaxed);
                                let mine = seen[i].load(Ordering::Relaxed);
                                if prev > mine && prev < limit {
                                    seen[i].store(prev + 1, Ordering::Relaxed);
                                    bells[(i + 1) % n].ring(&q);
                                }
                                let _ = bells[i].wait(&q);
                            }
                            sweeps
                        })
                    })
                    .collect();
                seen[0].store(1, Ordering::Relaxed);
                bells[1].ring(&q);
                q.drop_token();
                assert!(q.wait_timeout(Duration::from_secs(60)), "no quiescence within 60 s");
                assert_eq!(q.tokens(), 0);
                // The baton went all the way: ULT `i` last wrote `limit - n + 1 + i`. A lost
                // ring would have stopped it early.
                for (i, s) in seen.iter().enumerate() {
                    assert_eq!(s.load(Ordering::Relaxed), limit - n as u64 + 1 + i as u64, "ULT {i}");
                }
                stop.store(true, Ordering::Release);
                for b in bells.iter() {
                    b.ring(&q);
                }
                let sweeps: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
                assert!(sweeps >= limit - 1);
            });
        }
    }
}
