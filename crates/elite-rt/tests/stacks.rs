//! Stacks: unguarded stacks for more live ULTs than guarded ones could comfortably map, per-ULT
//! stack sizes, and the pooling rules for odd sizes.

mod common;

use common::hang_guard;
use elite_rt::{spawn, yield_now, Builder, Runtime, MAX_STACK_SIZE, MIN_STACK_SIZE};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// The tests holding tens of thousands of stacks take this exclusively, so they never overlap.
static MEMORY: RwLock<()> = RwLock::new(());

/// Two processors with unguarded stacks. The runtime's default stack stays at 64 KiB for the roots
/// (which spawn thousands of ULTs); the many ULTs of the tests ask for `MIN_STACK_SIZE` (8 KiB)
/// through `Builder`. Those ULTs must never panic: the panic hook's formatting (and a backtrace)
/// needs far more than 8 KiB in a debug build, and on an unguarded stack the overflow writes into
/// the heap below it before any canary check (seen as "malloc(): smallbin double linked list
/// corrupted" and as an ASAN heap-buffer-overflow when a barrier's deadline ran out under load).
fn unguarded_rt() -> Runtime {
    // SAFETY: the ULTs of these tests use a few KiB of their stacks and never panic.
    unsafe { Runtime::builder().processors(2).unguarded_stacks() }.build().expect("build runtime")
}

fn small<F, T>(f: F) -> elite_rt::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new().stack_size(MIN_STACK_SIZE).spawn(f).expect("spawn a small ULT")
}

/// 30 000 ULTs alive at once, each holding an 8 KiB unguarded stack, released by a barrier they
/// wait on by sleeping (which frees their processor); all finish. 30 000 guarded stacks would need
/// 60 000 of the 65 530 mappings `vm.max_map_count` allows.
#[test]
fn thirty_thousand_live_ults_on_unguarded_stacks() {
    let _g = MEMORY.write().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "30k live ULTs", || {
        const N: usize = 30_000;
        let rt = unguarded_rt();
        let arrived = Arc::new(AtomicUsize::new(0));
        let a = arrived.clone();
        let sum = rt.block_on(move || {
            let hs: Vec<_> = (0..N)
                .map(|i| {
                    let a = a.clone();
                    small(move || {
                        a.fetch_add(1, SeqCst);
                        // No ULT leaves before all have arrived: all N are alive at once. The poll
                        // is slow so that waking pollers leave the processors time to start the rest.
                        // Gives up with `None` rather than panicking on its small stack (see
                        // `unguarded_rt`); the root's thread asserts.
                        let deadline = Instant::now() + Duration::from_secs(50);
                        while a.load(SeqCst) < N {
                            if Instant::now() >= deadline {
                                return None;
                            }
                            elite_rt::sleep(Duration::from_millis(100));
                        }
                        Some(i as u64)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().expect("ULT")).sum::<Option<u64>>()
        });
        let sum = sum.expect("hang guard: the barrier never filled within 50 s");
        assert_eq!(sum, (N as u64) * (N as u64 - 1) / 2);
        assert_eq!(arrived.load(SeqCst), N);
        let t = rt.stats().total();
        // Odd-sized (8 KiB) stacks are never pooled: every worker got a fresh one.
        assert!(t.stack_fresh >= N as u64, "{}", rt.stats());
        assert_eq!(t.stack_failures, 0);
    });
}

static CHAIN_ALIVE: AtomicUsize = AtomicUsize::new(0);

/// A chain where each link spawns the next and blocks joining it: when the last link runs, every
/// link is alive and blocked, holding its stack.
fn link(left: usize) -> usize {
    let alive = CHAIN_ALIVE.fetch_add(1, SeqCst) + 1;
    let seen = if left == 0 { alive } else { small(move || link(left - 1)).join().expect("link") };
    CHAIN_ALIVE.fetch_sub(1, SeqCst);
    seen
}

#[test]
#[cfg_attr(
    feature = "sanitizer",
    ignore = "frames with AddressSanitizer's redzones do not fit this test's small stacks"
)]
fn chain_of_30_000_blocked_ults_on_unguarded_stacks() {
    let _g = MEMORY.write().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "30k chain", || {
        const N: usize = 30_000;
        let rt = unguarded_rt();
        let alive_at_bottom = rt.block_on(|| link(N - 1));
        assert_eq!(alive_at_bottom, N);
        assert_eq!(CHAIN_ALIVE.load(SeqCst), 0);
    });
}

/// The same barrier with `yield_now` instead of sleeping (the barrier of the issue): every ULT must
/// get to start although the started ones keep yielding.
#[test]
fn thirty_thousand_live_ults_with_a_yield_barrier() {
    let _g = MEMORY.write().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "30k yield barrier", || {
        const N: usize = 30_000;
        let rt = unguarded_rt();
        rt.block_on(|| {
            let arrived = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..N)
                .map(|_| {
                    let a = arrived.clone();
                    small(move || {
                        a.fetch_add(1, SeqCst);
                        while a.load(SeqCst) < N {
                            yield_now();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().expect("ULT");
            }
        });
    });
}

/// A ULT on a 32 KiB stack (the size `MIN_STACK_SIZE`'s docs give for ULTs that spawn or panic in
/// debug builds) may spawn many: spilling a full local start-queue to the shared levels runs on the
/// spawning ULT's stack (when the start-queue was a `crossbeam_deque::Worker`, growing it ran
/// crossbeam-epoch's `Guard::flush` there, which needed more than 24 KiB).
#[test]
#[cfg_attr(
    feature = "sanitizer",
    ignore = "frames with AddressSanitizer's redzones do not fit this test's small stacks"
)]
fn a_small_stack_ult_can_spawn_many() {
    let _g = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "spawning from a small stack", || {
        let rt = Runtime::builder().processors(2).stack_size(32 * 1024).build().unwrap();
        let sum = rt.block_on(|| {
            let hs: Vec<_> = (0..1000u64).map(|i| spawn(move || i)).collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        assert_eq!(sum, 499_500);
    });
}

/// Recursion `frames` deep, each frame holding a 1 KiB buffer; returns the bytes of stack between
/// the first frame and the deepest one.
#[inline(never)]
fn use_stack(frames: usize, top: usize) -> usize {
    let buf = [frames as u8; 1024];
    let here = std::hint::black_box(&buf) as *const _ as usize;
    let top = if top == 0 { here } else { top };
    let used = if frames <= 1 { top - here } else { use_stack(frames - 1, top) };
    std::hint::black_box(&buf);
    used
}

#[test]
fn larger_builder_stack_holds_deep_recursion() {
    let _g = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "deep recursion", || {
        let rt = Runtime::builder().processors(2).build().unwrap(); // 64 KiB default stacks
        let used = rt.block_on(|| {
            let h = Builder::new().stack_size(512 * 1024).spawn(|| use_stack(100, 0)).unwrap();
            h.join().expect("the recursion fits in 512 KiB")
        });
        assert!(used >= 100 * 1024, "the recursion used only {used} bytes");
        // Several at once, spawned from outside, with the runtime's default stacks still working.
        let hs: Vec<_> = (0..8)
            .map(|_| Builder::new().stack_size(512 * 1024).spawn_on(&rt, || use_stack(100, 0)).unwrap())
            .collect();
        for h in hs {
            assert!(h.join().unwrap() >= 100 * 1024);
        }
        assert!(rt.block_on(|| spawn(|| use_stack(8, 0) > 0).join().unwrap()));
    });
}

#[test]
fn runtime_default_stack_size_applies_to_every_ult() {
    let _g = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "runtime stack size", || {
        let rt = Runtime::builder().processors(2).stack_size(512 * 1024).build().unwrap();
        let used = rt.block_on(|| {
            let hs: Vec<_> = (0..8).map(|_| spawn(|| use_stack(100, 0))).collect();
            hs.into_iter().map(|h| h.join().unwrap()).min().unwrap()
        });
        assert!(used >= 100 * 1024);
        assert!(rt.spawn(|| use_stack(100, 0)).join().unwrap() >= 100 * 1024);
    });
}

/// Stacks of a size other than the runtime's default are not pooled: each start maps a fresh one,
/// and they do not go through the pool counters.
#[test]
fn odd_sized_stacks_are_not_pooled() {
    let _g = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "odd sizes", || {
        let rt = Runtime::builder().processors(2).build().unwrap();
        let before = rt.block_on(|| 0); // one default-sized root
        assert_eq!(before, 0);
        let t0 = rt.stats().total();
        rt.block_on(|| {
            for i in 0..10 {
                let h = Builder::new().stack_size(128 * 1024).spawn(move || i).unwrap();
                assert_eq!(h.join().unwrap(), i);
            }
        });
        let t1 = rt.stats().total();
        // 11 starts: the root (default size, through the pool) and 10 odd ones (always fresh).
        assert_eq!(t1.stack_pool_hits + t1.stack_pool_misses - t0.stack_pool_hits - t0.stack_pool_misses, 1);
        assert!(t1.stack_fresh - t0.stack_fresh >= 10, "{}", rt.stats());
    });
}

#[test]
fn maximum_stack_size_is_usable() {
    let _g = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "1 GiB stack", || {
        let rt = Runtime::builder().processors(1).build().unwrap();
        // A guarded 1 GiB stack is reserved, not committed: only the touched pages cost memory.
        let used = rt.block_on(|| {
            Builder::new().stack_size(MAX_STACK_SIZE).spawn(|| use_stack(300, 0)).unwrap().join().unwrap()
        });
        assert!(used >= 300 * 1024);
    });
}

#[test]
fn unguarded_stacks_hold_their_size() {
    let _g = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    hang_guard(60, "unguarded deep", || {
        // SAFETY: the recursion below uses ~100 KiB plus frames of a 512 KiB stack.
        let rt = unsafe { Runtime::builder().processors(2).stack_size(512 * 1024).unguarded_stacks() }
            .build()
            .unwrap();
        let used = rt.block_on(|| {
            let hs: Vec<_> = (0..16)
                .map(|_| {
                    spawn(|| {
                        let u = use_stack(100, 0);
                        yield_now(); // a switch: the canary is checked
                        u
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).min().unwrap()
        });
        assert!(used >= 100 * 1024);
    });
}
