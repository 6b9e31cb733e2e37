//! The mutex's unit tests, by what they protect: the layout of its hot line and the sampling
//! of hold times, the owner's path of a biased word, and the gathering.

use super::Mutex;

/// Takes `m` through the uncontended path until it is biased to the calling processor (or
/// gives up after far more acquisitions than any threshold: no `membarrier` here). Returns
/// whether it is biased.
fn bias_here(m: &Mutex<u64>) -> bool {
    for _ in 0..100_000 {
        if m.state.is_biased() {
            return true;
        }
        *m.lock().unwrap() += 1;
    }
    m.state.is_biased()
}

fn one_processor() -> crate::Runtime {
    crate::Runtime::builder().processors(1).build().unwrap()
}

mod layout_and_holds {
    //! The hot line's layout ("Layout" in `sync::mutex`) and the sampling of hold times (`hold`).

    use super::super::Mutex;
    use std::mem::{align_of, offset_of};

    /// The hot line of "Layout" (module docs): the state word starts a cache line, and the flags,
    /// the counters and up to 40 bytes of data share it.
    #[test]
    fn state_and_data_share_one_cache_line() {
        fn check<T>() {
            let state = offset_of!(Mutex<T>, state);
            assert_eq!(state % 64, 0, "the state word starts a line");
            assert!(offset_of!(Mutex<T>, poison) - state < 64);
            assert!(offset_of!(Mutex<T>, count) - state < 64);
            assert!(offset_of!(Mutex<T>, measuring) - state < 64);
            assert!(offset_of!(Mutex<T>, bounces) - state < 64);
            assert!(offset_of!(Mutex<T>, acquisitions) - state < 64);
            let data = offset_of!(Mutex<T>, data);
            assert!(data + std::mem::size_of::<T>() - state <= 64, "the data ends within the line");
            assert_eq!(align_of::<Mutex<T>>(), 64);
        }
        check::<u64>();
        check::<()>();
        check::<[u8; 40]>();
        check::<(u64, u64, u64, u64, u64)>();
    }

    /// Only acquisitions that waited are measured, one in eight by the count: uncontended ones
    /// take no time stamp.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri fails compare_exchange_weak at random: a free lock may take the contended path"
    )]
    fn only_contended_acquisitions_are_measured() {
        let m = Mutex::new(0u32);
        for _ in 0..64 {
            let mut g = m.lock().unwrap();
            *g += 1;
            std::hint::black_box(&mut *g);
        }
        assert_eq!(m.holds().next, 0, "uncontended: nothing measured");
        // Acquisitions through the contended path (the lock is free: they take it at once).
        for _ in 0..24 {
            m.lock_contended();
            let mut g = m.guard().unwrap();
            *g += 1;
            std::hint::black_box(&mut *g);
        }
        assert_eq!(*m.lock().unwrap(), 88);
        assert_eq!(m.holds().next, 3, "one contended acquisition in eight measured");
    }
}

mod owner_path {
    //! The bias (`sync::lock_word`, "The bias"): exclusion, revocation and poisoning on the owner's
    //! path, against OS threads, other processors and holders that move.

    use super::super::Mutex;
    use super::{bias_here, one_processor};
    use crate::sync::bias::heavy_barrier_available;
    use std::sync::Arc;
    use std::time::Duration;

    /// A mutex one processor keeps taking becomes biased (where `membarrier` exists), and its
    /// owner's path keeps std's semantics: try_lock fails while held, a second ULT of the same
    /// processor waits for the holder (which yields while holding) and gets the lock after it.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn the_owner_path_keeps_exclusion_on_one_processor() {
        let rt = one_processor();
        let total = rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            let biased = bias_here(&m);
            assert_eq!(biased, heavy_barrier_available(), "biased exactly when membarrier works");
            let base = *m.lock().unwrap();
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    let m = m.clone();
                    crate::spawn(move || {
                        for _ in 0..500 {
                            let mut g = m.lock().unwrap();
                            assert!(m.try_lock().is_err(), "try_lock on a held mutex");
                            let v = *g;
                            crate::yield_now(); // the others run, and wait for this holder
                            *g = v + 1;
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
            let n = *m.lock().unwrap();
            n - base
        });
        assert_eq!(total, 8 * 500);
    }

    /// A holder that locks through the owner's path and unlocks elsewhere (its guard dropped on
    /// an OS thread, as after a move to another processor) revokes the bias on the way; the
    /// lock then works from both sides, and the owner biases it again later.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_guard_dropped_elsewhere_revokes_the_bias() {
        let rt = one_processor();
        rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            if !bias_here(&m) {
                return; // no membarrier: nothing biased to revoke
            }
            let mut g = m.lock().unwrap();
            *g += 1;
            // The guard is `Send`: an OS thread unlocks (this processor waits for it).
            std::thread::scope(|s| {
                s.spawn(|| {
                    *g += 1;
                    drop(g);
                    assert!(!m.state.is_biased(), "the unlock from elsewhere revoked the bias");
                    *m.lock().unwrap() += 1;
                });
            });
            let before = *m.lock().unwrap();
            assert!(bias_here(&m), "biased again after a longer streak");
            assert!(*m.lock().unwrap() >= before);
        });
    }

    /// OS threads and the ULTs of the owner processor take the lock at once: every revocation
    /// (the threshold doubling each time) and re-biasing keeps the count exact.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn os_threads_contend_with_the_owner() {
        const ULTS: u64 = 16;
        const THREADS: u64 = 3;
        const ROUNDS: u64 = 2000;
        let rt = one_processor();
        let m = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..ROUNDS {
                        *m.lock().unwrap() += 1;
                        if i % 64 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let m2 = m.clone();
        rt.block_on(move || {
            let hs: Vec<_> = (0..ULTS)
                .map(|_| {
                    let m = m2.clone();
                    crate::spawn(move || {
                        for i in 0..ROUNDS {
                            *m.lock().unwrap() += 1;
                            if i % 4 == 0 {
                                crate::yield_now();
                            }
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
        });
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*m.lock().unwrap(), (ULTS + THREADS) * ROUNDS);
    }

    /// An OS thread revokes the bias while the owner's ULT holds the lock (and sleeps): it
    /// waits, and gets the lock with the holder's writes once the holder unlocks (through the
    /// slow path: the owner's path is gone).
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_revocation_while_held_waits_for_the_holder() {
        let rt = one_processor();
        rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            if !bias_here(&m) {
                return;
            }
            let base = *m.lock().unwrap();
            let mut g = m.lock().unwrap();
            let m2 = m.clone();
            let t = std::thread::spawn(move || {
                let v = *m2.lock().unwrap();
                assert!(!m2.state.is_biased());
                v
            });
            // Let the thread revoke and block while this ULT holds the lock.
            while m.state.is_biased() {
                crate::yield_now();
            }
            crate::sleep(Duration::from_millis(20));
            *g += 7;
            drop(g);
            assert_eq!(t.join().unwrap(), base + 7, "the waiter saw the holder's write");
        });
    }

    /// A holder that panics on the owner's path poisons the lock, as with std; the poison is
    /// seen by the owner's next lock and from elsewhere.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_panic_on_the_owner_path_poisons() {
        let rt = one_processor();
        rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            let biased = bias_here(&m);
            let m2 = m.clone();
            let r = crate::spawn(move || {
                let _g = m2.lock().unwrap();
                panic!("poison it");
            })
            .join();
            assert!(r.is_err());
            assert_eq!(m.state.is_biased(), biased, "the same processor: still biased");
            assert!(m.is_poisoned());
            assert!(m.lock().is_err(), "the owner's lock reports the poison");
            let m3 = m.clone();
            std::thread::spawn(move || assert!(m3.lock().is_err(), "and so does an OS thread's"))
                .join()
                .unwrap();
            m.clear_poison();
            assert!(m.lock().is_ok());
        });
    }

    /// On 2 processors, a holder that locked through the owner's path yields until it resumes
    /// on the other processor (busy ULTs give that one a reason to steal), and unlocks there,
    /// revoking; ULTs of both processors take the lock meanwhile. The count stays exact.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_biased_holder_that_moves_unlocks_by_revoking() {
        const TRIALS: u64 = 12;
        let rt = crate::Runtime::builder().processors(2).build().unwrap();
        let (total, expected) = rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            let mut expected = 0u64;
            for _ in 0..TRIALS {
                let before = *m.lock().unwrap();
                // Biased again only on the processor of its first bias (`sync::lock_word`): after
                // a move, the trial runs unbiased.
                if !bias_here(&m) && !heavy_barrier_available() {
                    return (0, 0); // no membarrier
                }
                expected += *m.lock().unwrap() - before;
                let mut g = m.lock().unwrap();
                let t0 = std::thread::current().id();
                let busy: Vec<_> = (0..4)
                    .map(|_| {
                        let m = m.clone();
                        crate::spawn(move || {
                            for _ in 0..50 {
                                crate::yield_now();
                            }
                            *m.lock().unwrap() += 1; // waits for the holder
                        })
                    })
                    .collect();
                for _ in 0..10_000 {
                    if std::thread::current().id() != t0 {
                        break;
                    }
                    crate::yield_now();
                }
                *g += 1;
                drop(g);
                busy.into_iter().for_each(|h| h.join().unwrap());
                expected += 1 + 4;
            }
            let n = *m.lock().unwrap();
            (n, expected)
        });
        // Most trials move (8 to 10 of 12 on the build VMs, each a revocation); the count
        // holds whatever moved.
        assert_eq!(total, expected);
    }
}

mod gathering {
    //! Gathering (`gather`): saturation, and the move of a contender to the lock's home.

    use super::super::gather::{gather_ticks, times, Trial, BOUNCES_PER_SAMPLE};
    use super::super::Mutex;
    use crate::atomics::Ordering;
    use crate::sync;
    use std::sync::Arc;
    use std::time::Duration;

    /// Spins until `ticks` time-stamp ticks have passed.
    fn spin_ticks(ticks: u64) {
        let start = sync::ticks();
        while sync::ticks().wrapping_sub(start) < ticks {
            std::hint::spin_loop();
        }
    }

    /// One sample of bounces ([`BOUNCES_PER_SAMPLE`] of them) `gap` ticks apart each, the
    /// first after a wait of that long; the caller holds `m`. The clock runs on meanwhile (the
    /// sample spins for as long as it spans), but the bounces' time stamps are the sample's own,
    /// so that what is checked is the rule, not how fast the machine running the test counts.
    fn sample(m: &Mutex<u64>, gap: u64) {
        bursts(m, gap, BOUNCES_PER_SAMPLE, 0);
    }

    /// Samples of bounces `gap` ticks apart ([`sample`]) until the lock's saturation reads
    /// `saturated`, at most 1000 of them; whether it came to read so. The caller holds `m`.
    fn sample_until(m: &Mutex<u64>, gap: u64, saturated: bool) -> bool {
        (0..1000).any(|_| {
            sample(m, gap);
            m.saturated() == saturated
        })
    }

    /// One sample of bounces that come in bursts: `burst` bounces `gap` ticks apart, then a
    /// quiet spell of `spell` ticks, and so on (the OS taking one of the two processors'
    /// threads off its CPU now and then); the caller holds `m`. The clock runs on by as much.
    fn bursts(m: &Mutex<u64>, gap: u64, burst: u8, spell: u64) {
        let start = sync::ticks();
        let mut at = start;
        for i in 1..=BOUNCES_PER_SAMPLE {
            at += gap;
            m.bounced_with(|| at);
            if i % burst == 0 && i < BOUNCES_PER_SAMPLE {
                at += spell;
            }
        }
        spin_ticks(at.saturating_sub(start));
    }

    /// The start of a test's scripted time stamps: a thousand windows ahead of the clock, since
    /// the lock's window of saturation is checked against real time, and a sign of it ahead
    /// reads as recent.
    fn script_clock() -> u64 {
        sync::ticks() + 1000 * gather_ticks().1
    }

    /// Gives `m` (held by the caller) a spread period, as a lock whose contenders took it from
    /// two processors for two spans would have: a saturation's trial needs one. The time
    /// stamps are the test's own, from now on.
    fn time_spread(m: &Mutex<u64>) {
        let mut clock = sync::ticks();
        let until = clock + 3 * times().span;
        spread(m, &mut clock, until, times().span / 16);
    }

    /// The lock's trial (the caller holds `m`).
    fn trial(m: &Mutex<u64>) -> &Trial {
        // SAFETY: the caller holds the lock, and writes nothing of it while it reads this.
        unsafe { &*m.cold.saturation.trial.get() }
    }

    /// One sample of bounces at the test's clock: fifteen at `clock`, the sixteenth `gap`
    /// ticks later (the gap the sample times). The caller holds `m`.
    fn sample_at(m: &Mutex<u64>, clock: &mut u64, gap: u64) {
        for _ in 1..BOUNCES_PER_SAMPLE {
            m.bounced_with(|| *clock);
        }
        *clock += gap;
        m.bounced_with(|| *clock);
    }

    /// Checkpoints `period` ticks apart, each after a sample of bounces twice the threshold
    /// apart (neither saturating nor ending a saturation), until `until`: the lock taken from
    /// two processors, spread. The caller holds `m`.
    fn spread(m: &Mutex<u64>, clock: &mut u64, until: u64, period: u64) {
        let (threshold, ..) = gather_ticks();
        assert!(4 * threshold < period, "a sample fits in a checkpoint's period");
        while *clock < until {
            let start = *clock;
            sample_at(m, clock, 2 * threshold);
            *clock = start + period;
            m.checkpoint_with(*clock);
        }
    }

    /// Checkpoints `period` ticks apart and no bounce, until the trial's verdict: the lock
    /// taken on one processor, gathered. The caller holds `m`.
    fn gathered(m: &Mutex<u64>, clock: &mut u64, period: u64) {
        assert!(trial(m).running, "a trial under way");
        for _ in 0..10_000 {
            *clock += period;
            m.checkpoint_with(*clock);
            if !trial(m).running {
                return;
            }
        }
        panic!("no verdict");
    }

    /// Samples of bounces a quarter of the threshold apart (a candidate for saturation) at the
    /// test's clock, up to 100; whether the lock came to be saturated.
    fn dense_until_saturated(m: &Mutex<u64>, clock: &mut u64) -> bool {
        let (threshold, ..) = gather_ticks();
        (0..100).any(|_| {
            sample_at(m, clock, threshold / 4);
            m.cold.saturation.saturated.load(Ordering::Relaxed)
        })
    }

    /// "Saturation" (module docs): a candidate's trial. Saturation needs a spread period timed
    /// first; a trial whose gathered period is no worse than the spread one (within the margin)
    /// keeps the lock saturated, and saturations within its trust (640 ms) need no trial; one
    /// whose gathered period is worse ends the saturation and holds it off for 10 ms, four
    /// times as long at the second failure in a row; a trial that passes resets the count, and
    /// the next failure holds off for 10 ms again. (The time
    /// stamps are the test's own: a script, so that what is checked is the rule, not the
    /// speed of the machine running it.)
    #[test]
    #[cfg_attr(
        miri,
        ignore = "time stamps: the lock's window is checked against real time, which Miri's interpreter stretches"
    )]
    fn a_trial_keeps_a_saturation_that_pays_and_holds_off_one_that_does_not() {
        crate::sync::host::measured_lines_for_tests();
        let times = times();
        let (threshold, ..) = gather_ticks();
        let m = Mutex::new(0u64);
        let _g = m.lock().unwrap(); // (the trial is the holder's)
        let mut clock = script_clock();
        let spread_period = times.span / 16;
        assert!(!dense_until_saturated(&m, &mut clock), "no spread period timed: no trial");
        assert!(threshold > 0 && trial(&m).spread == 0);
        // One span timed: a period, but no trial yet (one span may be slow for a cause that
        // passes); a second one makes it.
        let until = clock + times.span + times.span / 2;
        spread(&m, &mut clock, until, spread_period);
        assert_eq!(trial(&m).spread, spread_period, "timed over a span, spread");
        assert!(!dense_until_saturated(&m, &mut clock), "one span: no trial");
        let until = clock + 2 * times.span;
        spread(&m, &mut clock, until, spread_period);
        assert!(!m.cold.saturation.saturated.load(Ordering::Relaxed));
        assert_eq!(trial(&m).spread, spread_period, "timed over a span, spread");
        // A trial whose gathered lock is three times as fast: it passes, and stays saturated.
        assert!(dense_until_saturated(&m, &mut clock), "a candidate with a spread period: a trial");
        assert!(trial(&m).running);
        gathered(&m, &mut clock, spread_period / 3);
        assert!(m.cold.saturation.saturated.load(Ordering::Relaxed), "the trial passed: saturated");
        assert_eq!(trial(&m).failures, 0);
        // Slow bounces end it; dense ones again, within the trust of the trial that passed,
        // saturate it at once, with no trial.
        let end_saturation = |clock: &mut u64| {
            assert!((0..100).any(|_| {
                sample_at(&m, clock, threshold * 8);
                !m.cold.saturation.saturated.load(Ordering::Relaxed)
            }));
            m.checkpoint_with(*clock);
        };
        end_saturation(&mut clock);
        assert!(dense_until_saturated(&m, &mut clock), "trusted: saturated again at once");
        assert!(!trial(&m).running, "with no trial");
        // Ended again; spread, the contenders back on both processors, past the trust.
        end_saturation(&mut clock);
        let start = clock;
        spread(&m, &mut clock, start + times.trust + 1, spread_period);
        // A trial whose gathered lock is twice as slow fails: no longer saturated, held off.
        assert!(trial(&m).spread > 0);
        assert!(dense_until_saturated(&m, &mut clock));
        gathered(&m, &mut clock, 2 * spread_period);
        assert!(!m.cold.saturation.saturated.load(Ordering::Relaxed), "the trial failed");
        assert_eq!(trial(&m).failures, 1);
        let failed = clock;
        assert_eq!(trial(&m).held_off_until | 1, (failed + times.hold_off) | 1);
        // Spread for 9 ms (its period timed again after the settling), then bounces that
        // would saturate it: held off.
        spread(&m, &mut clock, failed + times.hold_off * 9 / 10, spread_period);
        assert!(trial(&m).spread > 0);
        assert!(!dense_until_saturated(&m, &mut clock), "held off for 10 ms");
        // After the hold-off, a second trial; failed again, it holds off four times as long.
        spread(&m, &mut clock, failed + times.hold_off + 1, spread_period);
        assert!(dense_until_saturated(&m, &mut clock), "after the hold-off, another trial");
        gathered(&m, &mut clock, 2 * spread_period);
        assert!(!m.cold.saturation.saturated.load(Ordering::Relaxed), "failed again");
        assert_eq!(trial(&m).failures, 2);
        let failed = clock;
        spread(&m, &mut clock, failed + times.hold_off * 3, spread_period);
        assert!(!dense_until_saturated(&m, &mut clock), "held off for 40 ms: not after 30");
        spread(&m, &mut clock, failed + times.hold_off * 4 + 1, spread_period);
        assert!(dense_until_saturated(&m, &mut clock), "after 40 ms, another trial");
        // This one passes: the failures in a row are reset.
        gathered(&m, &mut clock, spread_period / 3);
        assert!(m.cold.saturation.saturated.load(Ordering::Relaxed), "passed");
        assert_eq!(trial(&m).failures, 0, "a trial that passes resets the count");
        // So the next failure (past the trust) holds off for 10 ms again.
        end_saturation(&mut clock);
        let start = clock;
        spread(&m, &mut clock, start + times.trust + 1, spread_period);
        assert!(dense_until_saturated(&m, &mut clock));
        gathered(&m, &mut clock, 2 * spread_period);
        assert_eq!(trial(&m).failures, 1);
        assert_eq!(trial(&m).held_off_until | 1, (clock + times.hold_off) | 1, "10 ms again");
    }

    /// Checkpoints `period` ticks apart and no bounce, until the trial's verdict, with a spell
    /// of `spell` ticks (the OS took the home's thread off its CPU) before the first checkpoint
    /// a quarter of a span into the timing: the lock gathered. The caller holds `m`. Returns
    /// how long after the trial started (`start`) the verdict came.
    fn gathered_with_spell(m: &Mutex<u64>, clock: &mut u64, period: u64, spell: u64) -> u64 {
        let start = *clock;
        let at = start + times().settle + times().span / 4;
        let mut spelled = false;
        assert!(trial(m).running, "a trial under way");
        for _ in 0..10_000 {
            *clock += period;
            if !spelled && *clock > at {
                *clock += spell;
                spelled = true;
            }
            m.checkpoint_with(*clock);
            if !trial(m).running {
                return *clock - start;
            }
        }
        panic!("no verdict");
    }

    /// "Saturation" (module docs), the verdict: a trial whose gathered lock is clearly worse
    /// (its period more than 1.5 times the spread one) fails at its first span; one a little
    /// worse times a second span before it fails; and a first span made slow by a spell (the
    /// home's thread off its CPU) does not fail a trial that pays, which passes at its second.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "time stamps: the lock's window is checked against real time, which Miri's interpreter stretches"
    )]
    fn a_clearly_worse_trial_fails_at_its_first_span_and_a_spell_fails_none() {
        crate::sync::host::measured_lines_for_tests();
        let times = times();
        let m = Mutex::new(0u64);
        let _g = m.lock().unwrap();
        let mut clock = script_clock();
        let spread_period = times.span / 16;
        let until = clock + 3 * times.span;
        spread(&m, &mut clock, until, spread_period);
        let saturated = |m: &Mutex<u64>| m.cold.saturation.saturated.load(Ordering::Relaxed);
        // Twice as slow gathered: failed after the settling and one span.
        assert!(dense_until_saturated(&m, &mut clock));
        let took = gathered_with_spell(&m, &mut clock, 2 * spread_period, 0);
        assert!(!saturated(&m) && trial(&m).failures == 1, "failed");
        assert!(took < times.settle + times.span + times.span / 2, "at its first span");
        // 1.3 times as slow: within 1.5 times, so a second span is timed, and it fails then.
        let failed = clock;
        spread(&m, &mut clock, failed + times.hold_off + 1, spread_period);
        assert!(dense_until_saturated(&m, &mut clock));
        let took = gathered_with_spell(&m, &mut clock, spread_period * 13 / 10, 0);
        assert!(!saturated(&m) && trial(&m).failures == 2, "failed");
        assert!(took >= times.settle + 2 * times.span, "at its second span");
        // Three times as fast, but a spell of 3 ms in the first span, whose period is then
        // worse than 1.5 times the spread one: without the spell it is not, so a second span
        // is timed, and the trial passes.
        let failed = clock;
        spread(&m, &mut clock, failed + 4 * times.hold_off + 1, spread_period);
        assert!(dense_until_saturated(&m, &mut clock));
        let took = gathered_with_spell(&m, &mut clock, spread_period / 3, 3 * times.span);
        assert!(saturated(&m) && trial(&m).failures == 0, "passed");
        assert!(took >= times.settle + 2 * times.span, "at its second span");
    }

    /// Spans in which the lock did not move between processors (the OS took one processor's
    /// thread off its CPU, or the contenders were not spread yet) time no spread period: the
    /// lock then runs as if gathered, and a trial against such a period would say nothing.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "time stamps: the lock's window is checked against real time, which Miri's interpreter stretches"
    )]
    fn a_span_without_bounces_times_no_spread_period() {
        crate::sync::host::measured_lines_for_tests();
        let times = times();
        let m = Mutex::new(0u64);
        let _g = m.lock().unwrap();
        let mut clock = script_clock();
        for _ in 0..48 {
            clock += times.span / 16; // (no bounce)
            m.checkpoint_with(clock);
        }
        assert_eq!(trial(&m).spread, 0, "no bounce: no spread period");
        assert!(!dense_until_saturated(&m, &mut clock), "and no trial");
    }

    /// "Gathering" (module docs): a lock becomes saturated once its bounces come closer than the
    /// threshold on average, stays so between the threshold and four times it, stops above;
    /// a sample that spans a quiet spell leaves the average alone, and saturation lapses after
    /// the window. (Each phase loops until its state is reached, up to far more samples than the
    /// moving average needs: a sample stretched by preemption only delays it.)
    #[test]
    #[cfg_attr(
        miri,
        ignore = "time stamps: the gaps between samples are real time, which Miri's interpreter stretches"
    )]
    fn saturation_follows_the_time_between_bounces() {
        crate::sync::host::measured_lines_for_tests();
        let (threshold, ..) = gather_ticks();
        let m = Mutex::new(0u64);
        let _g = m.lock().unwrap(); // (the counters are the holder's)
        time_spread(&m); // (a trial needs a spread period)
        assert!(!m.saturated(), "a new lock is not saturated");
        let fast = (0..1000).position(|_| {
            sample(&m, threshold / 4);
            m.saturated()
        });
        assert!(fast.is_some(), "bounces a quarter of the threshold apart saturate it");
        for _ in 0..8 {
            sample(&m, threshold * 2);
        }
        assert!(m.saturated(), "twice the threshold apart: between the marks, it stays saturated");
        let slow = (0..1000).position(|_| {
            sample(&m, threshold * 8);
            !m.saturated()
        });
        assert!(slow.is_some(), "eight times the threshold apart: no longer saturated");
        let gap = m.cold.saturation.gap.load(Ordering::Relaxed);
        // A spell of a fifth of the window (2 ms, far more than 16 thresholds) between the two
        // bounces timed.
        let (_, window, _) = gather_ticks();
        bursts(&m, 0, BOUNCES_PER_SAMPLE - 1, window / 5);
        assert_eq!(m.cold.saturation.gap.load(Ordering::Relaxed), gap, "a quiet spell is no sample");
        assert!(sample_until(&m, threshold / 4, true));
        std::thread::sleep(Duration::from_millis(15)); // past the 10 ms window
        assert!(!m.saturated(), "saturation lapses when nothing renews it");
        sample(&m, threshold / 4);
        assert!(!m.saturated(), "and must be shown again: the sample after the lapse starts over");
        assert_eq!(m.cold.saturation.gap.load(Ordering::Relaxed), u64::MAX);
        assert!(sample_until(&m, threshold / 4, true));
        // Bounces that keep coming, but 32 thresholds apart: no sample counts, so it lapses.
        let start = std::time::Instant::now();
        assert!((0..10_000).any(|_| {
            sample(&m, threshold * 32);
            !m.saturated()
        }));
        assert!(start.elapsed() >= Duration::from_millis(9), "not before the window (10 ms)");
    }

    /// A lock whose bounces come in bursts, dense while both processors' threads run and none
    /// while the OS has taken one of them off its CPU, is saturated as one whose bounces come
    /// dense all along: what saturation weighs is the time between bounces while the line
    /// moves. (It failed before the gap of two bounces in a row was timed, when a sample was the
    /// span of 16 bounces over 16: every such span took in a spell, and was skipped as one.)
    #[test]
    #[cfg_attr(
        miri,
        ignore = "time stamps: the gaps between samples are real time, which Miri's interpreter stretches"
    )]
    fn bounces_in_bursts_saturate() {
        crate::sync::host::measured_lines_for_tests();
        let (threshold, ..) = gather_ticks();
        let m = Mutex::new(0u64);
        let _g = m.lock().unwrap(); // (the counters are the holder's)
        time_spread(&m); // (a trial needs a spread period)

        // Bursts of 4 bounces a quarter of the threshold apart, a tenth of the window (1 ms:
        // far more than 16 thresholds) of quiet after each; two samples (the first after a
        // quiet spell, the window starting with it).
        let (_, window, _) = gather_ticks();
        assert!(
            // Two samples would do on an idle machine; more attempts let one a preemption
            // stretched past the window be followed by others (the old sampling never saturated
            // here, however many).
            (0..20).any(|_| {
                bursts(&m, threshold / 4, 4, window / 10);
                m.saturated()
            }),
            "dense bounces between quiet spells saturate the lock"
        );
    }

    /// "Saturation" (module docs): a lock whose saturation lapsed and that is saturated again at
    /// once (a gathered lock, which bounces no more while gathered) has its window multiplied by
    /// four each time, so that it is re-checked less and less often; slow bounces bring the window back to
    /// 10 ms. (Before the doublings, every lapse came 10 ms after the last sample.)
    #[test]
    #[cfg_attr(
        miri,
        ignore = "time stamps: the gaps between samples are real time, which Miri's interpreter stretches"
    )]
    fn a_lock_saturated_again_at_once_after_a_lapse_is_rechecked_later_each_time() {
        use super::super::gather::MAX_WINDOW_DOUBLINGS;
        crate::sync::host::measured_lines_for_tests();
        let (threshold, ..) = gather_ticks();
        let m = Mutex::new(0u64);
        let _g = m.lock().unwrap(); // (the counters are the holder's)
        time_spread(&m); // (a trial needs a spread period)
        let doublings = || m.cold.saturation.doublings.load(Ordering::Relaxed);
        let saturate = || assert!(sample_until(&m, threshold / 4, true), "dense bounces saturate it");
        saturate();
        assert_eq!(doublings(), 0, "the first saturation: the base window");
        for expected in [2u8, 4] {
            // Nothing renews it for longer than its window (10 ms, then 40), and it lapses.
            std::thread::sleep(Duration::from_millis(12 << (expected - 2)));
            assert!(!m.saturated(), "lapsed after its window");
            sample(&m, threshold / 4); // (the sample that finds the lapse starts over)
            saturate();
            assert_eq!(doublings(), expected, "saturated again at once: four times the window");
        }
        // Now 160 ms: 60 ms without a sample is no lapse.
        std::thread::sleep(Duration::from_millis(60));
        assert!(m.saturated(), "within its lengthened window it stays saturated");
        // Slow bounces end the saturation and the doublings.
        assert!(sample_until(&m, threshold * 8, false));
        assert_eq!(doublings(), 0, "slow bounces: back to the base window");
        const { assert!(MAX_WINDOW_DOUBLINGS >= 4) };
    }

    /// The name of the other processor of the calling ULT's 2-processor runtime, once that one
    /// runs something: no move goes to a processor that has not started yet (its name is 0 until
    /// its thread makes it) or is parked. Waits a while (yielding) for it.
    fn other_processor_name() -> usize {
        let p = crate::slot::current_processor().unwrap();
        let other = &p.shared.processors[1 - p.index];
        for _ in 0..1_000_000 {
            if other.name.load(Ordering::Relaxed) != 0 && !other.park.is_parked() {
                break;
            }
            crate::yield_now();
        }
        other.name.load(Ordering::Relaxed)
    }

    /// What a test ULT on processor `from` of a 2-processor runtime finds: `m` saturated, its
    /// home the other processor (and held by the test's OS thread, or free, as the test chose);
    /// it locks `m` and returns the processor it holds the lock on.
    fn contend_from_elsewhere(m: &Mutex<u64>) -> usize {
        m.cold.saturation.home.store(other_processor_name(), Ordering::Relaxed);
        m.cold.saturation.saturated.store(true, Ordering::Relaxed);
        // The last sign of saturation set a thousand windows ahead (ten seconds): saturation
        // lapses when that sign is older than the window, and on a loaded machine the OS may
        // take this thread off its CPU for longer than a window between here and the lock
        // (CI's chaos step saw no move then). A sign ahead of the clock reads as a negative age.
        let ahead = gather_ticks().1.saturating_mul(1000);
        m.cold.saturation.recent.store(sync::ticks().wrapping_add(ahead), Ordering::Relaxed);
        let mut g = m.lock().unwrap();
        *g += 1;
        crate::slot::current_processor().unwrap().index
    }

    /// Runs [`contend_from_elsewhere`] in a ULT spawned by `spawn` on `rt` while this OS thread
    /// holds the lock (if `held`; else the lock is free all along), releases it once the runtime has counted `moves` moves (or the ULT is
    /// blocked or spinning, after 50 ms, when no move is expected); returns the processor the
    /// ULT started on, the one it took the lock on, and the runtime's counts of moves and of
    /// pauses of stealing. Eight ULTs that only yield keep both processors busy meanwhile (a
    /// parked processor is no home to move to).
    fn run_contender(
        rt: &crate::Runtime,
        held: bool,
        moves: u64,
        spawn: impl FnOnce(Box<dyn FnOnce() -> usize + Send>) -> crate::JoinHandle<usize>,
    ) -> (usize, usize, u64, u64) {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Four busy ULTs held on each processor, so that neither parks (a parked home takes no
        // move); spread by the runtime, all of them could end up on one processor and leave the
        // other parked (the free-lock test saw no move about once in fifteen runs).
        let busy: Vec<_> = (0..8)
            .map(|i| {
                let stop = stop.clone();
                crate::Builder::new()
                    .place(crate::Place::processor(i % 2))
                    .place_mode(crate::PlaceMode::Strict)
                    .spawn_on(rt, move || {
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            crate::yield_now();
                        }
                    })
                    .unwrap()
            })
            .collect();
        let m = Arc::new(Mutex::new(0u64));
        let g = held.then(|| m.lock().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let m2 = m.clone();
        let h = spawn(Box::new(move || {
            tx.send(crate::slot::current_processor().unwrap().index).unwrap();
            contend_from_elsewhere(&m2)
        }));
        let from = rx.recv().unwrap();
        let gathered = || rt.stats().processors.iter().map(|p| p.gathered).sum::<u64>();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        if moves == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        while gathered() < moves && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(g);
        let at = h.join().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.into_iter().for_each(|b| b.join().unwrap());
        assert_eq!(*m.lock().unwrap(), 1);
        let pauses = rt.stats().processors[from].steal_pauses;
        (from, at, gathered(), pauses)
    }

    /// A ULT that meets a saturated lock held, whose home is another processor, moves there and
    /// takes the lock there; the processor it left pauses its stealing. (Without the chaos mode,
    /// which `.ci/run` turns on for the whole suite: its wake-ups may send the woken mover
    /// anywhere.)
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_contender_of_a_saturated_lock_moves_to_its_home() {
        let rt = crate::Runtime::builder().processors(2).no_chaos().build().unwrap();
        let (from, at, moves, _) = run_contender(&rt, true, 1, |f| rt.spawn(f));
        assert_eq!(moves, 1, "one move");
        assert_eq!(at, 1 - from, "it holds the lock on the home processor");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while rt.stats().processors[from].steal_pauses == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(rt.stats().processors[from].steal_pauses > 0, "the processor it left paused stealing");
    }

    /// A saturated lock is mostly found free (its critical sections are short): a ULT that
    /// finds it free, and its home another processor, moves there all the same and takes it
    /// there, rather than move its line once more.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn a_contender_of_a_saturated_lock_moves_even_when_it_is_free() {
        let rt = crate::Runtime::builder().processors(2).no_chaos().build().unwrap();
        let (from, at, moves, _) = run_contender(&rt, false, 1, |f| rt.spawn(f));
        assert_eq!(moves, 1, "one move");
        assert_eq!(at, 1 - from, "it takes the lock on the home processor");
    }

    /// No move for a pinned ULT, in a runtime built with `gather_locks(false)`, or for a lock
    /// that is not saturated; the lock works as always.
    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime: OS threads, mapped stacks, CPU pinning")]
    fn pinned_ults_gathering_off_and_unsaturated_locks_stay() {
        let rt = crate::Runtime::builder().processors(2).no_chaos().build().unwrap();
        let pinned = |f: Box<dyn FnOnce() -> usize + Send>| {
            crate::Builder::new().pinned(true).spawn_on(&rt, f).unwrap()
        };
        let (from, at, moves, _) = run_contender(&rt, true, 0, pinned);
        assert_eq!((moves, at), (0, from), "a pinned ULT stays");
        let off = crate::Runtime::builder().processors(2).gather_locks(false).no_chaos().build().unwrap();
        let (_, _, moves, pauses) = run_contender(&off, true, 0, |f| off.spawn(f));
        assert_eq!((moves, pauses), (0, 0), "gathering off");
        let rt = crate::Runtime::builder().processors(2).no_chaos().build().unwrap();
        let m = Arc::new(Mutex::new(0u64));
        let g = m.lock().unwrap();
        let m2 = m.clone();
        let h = rt.spawn(move || {
            m2.cold.saturation.home.store(other_processor_name(), Ordering::Relaxed);
            *m2.lock().unwrap() += 1; // not saturated
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(g);
        h.join().unwrap();
        assert_eq!(*m.lock().unwrap(), 1);
        assert_eq!(rt.stats().processors.iter().map(|p| p.gathered).sum::<u64>(), 0, "not saturated");
        // A home that names no processor of this runtime (a first owner in another runtime).
        let g = m.lock().unwrap();
        let m2 = m.clone();
        let h = rt.spawn(move || {
            m2.cold.saturation.home.store(0x4000, Ordering::Relaxed);
            m2.cold.saturation.saturated.store(true, Ordering::Relaxed);
            m2.cold.saturation.recent.store(sync::ticks(), Ordering::Relaxed);
            *m2.lock().unwrap() += 1;
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(g);
        h.join().unwrap();
        assert_eq!(*m.lock().unwrap(), 2);
        assert_eq!(rt.stats().processors.iter().map(|p| p.gathered).sum::<u64>(), 0, "no such home");
    }
}
