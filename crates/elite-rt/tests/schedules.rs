//! Random schedules for the synchronization primitives: each scenario (many ULTs on a mutex, an
//! rwlock, a condvar queue, a barrier, a semaphore, wait groups, channels of every kind) runs under
//! the chaos mode (`RuntimeBuilder::chaos`) with many seeds on 2, 3 and 4 processors, and asserts
//! its invariants (exclusion, counts, sums, exactly-once and in-order delivery). A hang becomes a
//! failure too: the runtime's deadlock report (`try_block_on`), or a watchdog that names the seed
//! and aborts the process when a run takes too long.
//!
//! A failure names its seed and processor count and the command that replays it:
//!
//! ```text
//! ELITE_SCHEDULE_SEED=<seed> ELITE_SCHEDULE_PROCESSORS=<n> cargo test -p elite-rt --test schedules <scenario>
//! ```
//!
//! What a seed reproduces: the decisions of each processor (which ULT runs next, where a yield or
//! a wake-up sends a ULT, where a primitive yields). The operating system's interleaving of the
//! processors' threads is not under the seed's control, so a failure may need a few replays to
//! recur; on one processor a seed fixes the whole schedule (see `tests/chaos.rs`).
//!
//! `ELITE_SCHEDULE_SEEDS=<n>` sets how many seeds each scenario tries per processor count
//! (default 4; `.ci/run` sets more).

use elite_rt::sync::{mpmc, mpsc, Barrier, Condvar, Mutex, RwLock, Semaphore, WaitGroup};
use elite_rt::{spawn, yield_now, Runtime};
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SEEDS_ENV: &str = "ELITE_SCHEDULE_SEEDS";
const SEED_ENV: &str = "ELITE_SCHEDULE_SEED";
const PROCESSORS_ENV: &str = "ELITE_SCHEDULE_PROCESSORS";
const DEFAULT_SEEDS: u64 = 4;
/// A run that takes longer than this is taken for a hang (livelock): the watchdog aborts.
const RUN_LIMIT: Duration = Duration::from_secs(30);

fn env_number(var: &str) -> Option<u64> {
    let v = std::env::var(var).ok()?;
    match v.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{var}={v:?} is not a number"),
    }
}

/// The seeds and processor counts to try for `name`: one replayed seed, or `ELITE_SCHEDULE_SEEDS`
/// seeds (derived from the scenario's name, so that scenarios differ) on 2, 3 and 4 processors.
fn plan(name: &str) -> (Vec<u64>, Vec<usize>) {
    let processors = match env_number(PROCESSORS_ENV) {
        Some(n) => vec![n as usize],
        None => vec![2, 3, 4],
    };
    if let Some(seed) = env_number(SEED_ENV) {
        return (vec![seed], processors);
    }
    let n = env_number(SEEDS_ENV).unwrap_or(DEFAULT_SEEDS);
    let base =
        name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    ((0..n).map(|i| base.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))).collect(), processors)
}

/// Aborts the process, naming the run, unless dropped (which disarms it) within [`RUN_LIMIT`].
struct Watchdog(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

impl Watchdog {
    fn arm(what: String) -> Watchdog {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(RUN_LIMIT) {
                eprintln!("schedule watchdog: {what} ran for more than {RUN_LIMIT:?}: taken for a hang");
                std::process::abort(); // the handler names every run in flight
            }
        });
        Watchdog(tx)
    }
}

/// The runs in flight, for a process that dies by `abort` (the runtime's fatal errors, the
/// watchdog): a signal handler prints them. Each slot holds a NUL-terminated line that is never
/// freed (see `keep`), so that the handler can read it at any moment.
static IN_FLIGHT: [AtomicPtr<u8>; 64] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 64];

extern "C" fn print_in_flight(_: libc::c_int) {
    for slot in &IN_FLIGHT {
        let line = slot.load(SeqCst);
        if !line.is_null() {
            // SAFETY: a slot holds null or a NUL-terminated line that is never freed; `write` and `strlen` are
            // async-signal-safe.
            unsafe { libc::write(2, line as *const libc::c_void, libc::strlen(line as *const libc::c_char)) };
        }
    }
    // Returning from the handler lets `abort` go on (it restores the default action and raises
    // the signal again).
}

/// Installs the handler (once) and takes a slot for one `explore`.
fn in_flight_slot() -> &'static AtomicPtr<u8> {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let handler: extern "C" fn(libc::c_int) = print_in_flight;
        // SAFETY: installs a handler that only calls async-signal-safe functions.
        unsafe { libc::signal(libc::SIGABRT, handler as libc::sighandler_t) };
    });
    let mine = keep(std::ffi::CString::default()); // a placeholder until the first line
    IN_FLIGHT
        .iter()
        .find(|s| s.compare_exchange(std::ptr::null_mut(), mine, SeqCst, SeqCst).is_ok())
        .expect("more than 64 explorations at once")
}

/// Puts `line` in `slot` for the abort handler.
fn announce(slot: &AtomicPtr<u8>, line: String) {
    let c = std::ffi::CString::new(line).expect("no NUL in the line");
    slot.store(keep(c), SeqCst);
}

/// Keeps `line` alive (and reachable, so that LeakSanitizer sees no leak) for the rest of the
/// process, and returns where its bytes lie (they never move: the `CString` owns a heap buffer).
fn keep(line: std::ffi::CString) -> *mut u8 {
    static KEEP: std::sync::Mutex<Vec<std::ffi::CString>> = std::sync::Mutex::new(Vec::new());
    let at = line.as_ptr() as *mut u8;
    KEEP.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    at
}

/// Runs `scenario` as the root ULT under every planned seed and processor count; panics, naming
/// the seed and the replay command, at the first run that fails (or, if the process aborts
/// meanwhile, prints the runs in flight from a `SIGABRT` handler).
fn explore(name: &str, scenario: fn()) {
    let slot = in_flight_slot();
    let (seeds, processors) = plan(name);
    let t0 = Instant::now();
    let mut runs = 0;
    for &p in &processors {
        for &seed in &seeds {
            let replay = format!(
                "{SEED_ENV}={seed} {PROCESSORS_ENV}={p} cargo test -p elite-rt --test schedules {name}"
            );
            announce(slot, format!("schedule run in flight at the abort: `{name}` with seed {seed} on {p} processors\nreplay: {replay}\n"));
            let watchdog = Watchdog::arm(format!("`{name}` with seed {seed} on {p} processors ({replay})"));
            let rt = Runtime::builder()
                .processors(p)
                .chaos(seed)
                .deadlock_grace(Duration::from_millis(500))
                .build()
                .expect("runtime");
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| rt.try_block_on(scenario)));
            drop(rt);
            drop(watchdog);
            let failure = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(deadlock)) => Some(format!("{deadlock}")),
                Err(payload) => Some(
                    payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "a panic".into()),
                ),
            };
            if let Some(why) = failure {
                panic!(
                    "schedule `{name}` failed with seed {seed} on {p} processors: {why}\nreplay: {replay}"
                );
            }
            runs += 1;
        }
    }
    announce(slot, String::new());
    eprintln!(
        "schedules `{name}`: {runs} runs ({} seeds x {processors:?} processors) in {:.2} s",
        seeds.len(),
        t0.elapsed().as_secs_f64()
    );
}

/// Spawns `n` ULTs running `f(i)` and joins them all, propagating a panic.
fn fan_out<T: Send + 'static>(n: usize, f: impl Fn(usize) -> T + Send + Sync + 'static) -> Vec<T> {
    let f = Arc::new(f);
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let f = f.clone();
            spawn(move || f(i))
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
}

#[test]
fn mutex_excludes_and_counts() {
    explore("mutex_excludes_and_counts", || {
        const ULTS: usize = 24;
        const ROUNDS: usize = 40;
        let m = Arc::new(Mutex::new(0usize));
        let inside = Arc::new(AtomicUsize::new(0));
        let (m2, inside2) = (m.clone(), inside.clone());
        fan_out(ULTS, move |i| {
            for r in 0..ROUNDS {
                let mut g = m2.lock().unwrap();
                assert_eq!(inside2.fetch_add(1, SeqCst), 0, "two holders of the mutex");
                let v = *g;
                if (i + r) % 3 == 0 {
                    yield_now(); // inside the critical section
                }
                *g = v + 1;
                inside2.fetch_sub(1, SeqCst);
            }
        });
        assert_eq!(*m.lock().unwrap(), ULTS * ROUNDS);
    });
}

#[test]
fn rwlock_readers_never_see_a_half_write() {
    explore("rwlock_readers_never_see_a_half_write", || {
        let state = Arc::new(RwLock::new((0i64, 0i64)));
        let writers_in = Arc::new(AtomicUsize::new(0));
        let (s, w) = (state.clone(), writers_in.clone());
        let reads = fan_out(16, move |i| {
            let mut reads = 0;
            for r in 0..30i64 {
                if i < 4 {
                    let mut g = s.write().unwrap();
                    assert_eq!(w.fetch_add(1, SeqCst), 0, "two writers at once");
                    g.0 += r + 1;
                    yield_now(); // half-way through the write
                    g.1 -= r + 1;
                    w.fetch_sub(1, SeqCst);
                } else {
                    let g = s.read().unwrap();
                    assert_eq!(w.load(SeqCst), 0, "a reader beside a writer");
                    assert_eq!(g.0 + g.1, 0, "a half-done write");
                    reads += 1;
                    if r % 4 == 0 {
                        yield_now();
                    }
                }
            }
            reads
        });
        assert_eq!(reads.iter().sum::<usize>(), 12 * 30);
        let g = state.read().unwrap();
        assert_eq!(g.0, 4 * (1..=30).sum::<i64>());
    });
}

#[test]
fn condvar_queue_delivers_each_item_once() {
    explore("condvar_queue_delivers_each_item_once", || {
        const PRODUCERS: usize = 6;
        const ITEMS: usize = 40;
        const CONSUMERS: usize = 4;
        const CAP: usize = 4;
        struct Q {
            m: Mutex<(VecDeque<usize>, usize)>, // (items, producers done)
            not_empty: Condvar,
            not_full: Condvar,
        }
        let q = Arc::new(Q {
            m: Mutex::new((VecDeque::new(), 0)),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
        });
        let q2 = q.clone();
        let got = fan_out(PRODUCERS + CONSUMERS, move |i| {
            let mut got = Vec::new();
            if i < PRODUCERS {
                for k in 0..ITEMS {
                    let mut g = q2.not_full.wait_while(q2.m.lock().unwrap(), |s| s.0.len() >= CAP).unwrap();
                    g.0.push_back(i * ITEMS + k);
                    drop(g);
                    q2.not_empty.notify_one();
                }
                q2.m.lock().unwrap().1 += 1;
                q2.not_empty.notify_all();
            } else {
                loop {
                    let mut g = q2
                        .not_empty
                        .wait_while(q2.m.lock().unwrap(), |s| s.0.is_empty() && s.1 < PRODUCERS)
                        .unwrap();
                    match g.0.pop_front() {
                        Some(x) => {
                            drop(g);
                            q2.not_full.notify_one();
                            got.push(x);
                        }
                        None => break, // every producer is done and the queue is empty
                    }
                }
            }
            got
        });
        let mut all: Vec<usize> = got.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, (0..PRODUCERS * ITEMS).collect::<Vec<_>>(), "items lost or delivered twice");
    });
}

#[test]
fn barrier_rounds_release_everyone_together() {
    explore("barrier_rounds_release_everyone_together", || {
        const ULTS: usize = 16;
        const ROUNDS: usize = 8;
        let b = Arc::new(Barrier::new(ULTS));
        let arrived: Arc<Vec<AtomicUsize>> = Arc::new((0..ROUNDS).map(|_| AtomicUsize::new(0)).collect());
        let leaders: Arc<Vec<AtomicUsize>> = Arc::new((0..ROUNDS).map(|_| AtomicUsize::new(0)).collect());
        let (b2, a2, l2) = (b.clone(), arrived.clone(), leaders.clone());
        fan_out(ULTS, move |i| {
            for r in 0..ROUNDS {
                if (i + r) % 5 == 0 {
                    yield_now();
                }
                a2[r].fetch_add(1, SeqCst);
                if b2.wait().is_leader() {
                    l2[r].fetch_add(1, SeqCst);
                }
                assert_eq!(a2[r].load(SeqCst), ULTS, "released before everyone arrived");
            }
        });
        for r in 0..ROUNDS {
            assert_eq!(leaders[r].load(SeqCst), 1, "round {r}: not exactly one leader");
        }
    });
}

#[test]
fn semaphore_bounds_its_holders() {
    explore("semaphore_bounds_its_holders", || {
        const PERMITS: usize = 3;
        let s = Arc::new(Semaphore::new(PERMITS));
        let inside = Arc::new(AtomicUsize::new(0));
        let (s2, in2) = (s.clone(), inside.clone());
        let done = fan_out(20, move |i| {
            for r in 0..20 {
                let _permit = s2.access();
                assert!(in2.fetch_add(1, SeqCst) < PERMITS, "more holders than permits");
                if (i + r) % 2 == 0 {
                    yield_now();
                }
                in2.fetch_sub(1, SeqCst);
            }
            20
        });
        assert_eq!(done.iter().sum::<usize>(), 400);
        assert_eq!(s.available_permits(), PERMITS);
    });
}

#[test]
fn waitgroup_waits_for_every_worker() {
    explore("waitgroup_waits_for_every_worker", || {
        for wave in 0..3usize {
            let n = 8 + 4 * wave;
            let wg = Arc::new(WaitGroup::new());
            let done = Arc::new(AtomicUsize::new(0));
            wg.add(n);
            for i in 0..n {
                let (wg, done) = (wg.clone(), done.clone());
                spawn(move || {
                    if i % 2 == 0 {
                        yield_now();
                    }
                    done.fetch_add(1, SeqCst);
                    wg.done();
                }); // detached: the wait group is the only join
            }
            wg.wait();
            assert_eq!(done.load(SeqCst), n, "wave {wave}: the wait ended early");
        }
    });
}

#[test]
fn mpsc_delivers_exactly_once_in_order() {
    explore("mpsc_delivers_exactly_once_in_order", || {
        const PRODUCERS: usize = 8;
        const ITEMS: usize = 40;
        for bound in [None, Some(0), Some(2)] {
            let (tx, rx) = match bound {
                None => {
                    let (tx, rx) = mpsc::channel::<(usize, usize)>();
                    (Sender::Unbounded(tx), rx)
                }
                Some(b) => {
                    let (tx, rx) = mpsc::sync_channel::<(usize, usize)>(b);
                    (Sender::Bounded(tx), rx)
                }
            };
            let hs: Vec<_> = (0..PRODUCERS)
                .map(|p| {
                    let tx = tx.clone();
                    spawn(move || {
                        for k in 0..ITEMS {
                            tx.send((p, k));
                            if k % 7 == p % 7 {
                                yield_now();
                            }
                        }
                    })
                })
                .collect();
            drop(tx);
            let mut next = [0usize; PRODUCERS];
            for (p, k) in rx.iter() {
                assert_eq!(k, next[p], "bound {bound:?}: producer {p}'s items out of order or twice");
                next[p] += 1;
            }
            assert!(next.iter().all(|&n| n == ITEMS), "bound {bound:?}: items lost: {next:?}");
            for h in hs {
                h.join().unwrap();
            }
        }
    });
}

/// Either kind of mpsc sender, for the scenario above.
#[derive(Clone)]
enum Sender {
    Unbounded(mpsc::Sender<(usize, usize)>),
    Bounded(mpsc::SyncSender<(usize, usize)>),
}

impl Sender {
    fn send(&self, v: (usize, usize)) {
        match self {
            Sender::Unbounded(tx) => tx.send(v).unwrap(),
            Sender::Bounded(tx) => tx.send(v).unwrap(),
        }
    }
}

#[test]
fn mpmc_hands_each_item_to_one_receiver() {
    explore("mpmc_hands_each_item_to_one_receiver", || {
        const PRODUCERS: usize = 4;
        const ITEMS: usize = 40;
        let (tx, rx) = mpmc::bounded::<usize>(3);
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let tx = tx.clone();
                spawn(move || {
                    for k in 0..ITEMS {
                        tx.send(p * ITEMS + k).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                let rx = rx.clone();
                spawn(move || {
                    let mut got = Vec::new();
                    while let Ok(x) = rx.recv() {
                        got.push(x);
                        if x % 5 == 0 {
                            yield_now();
                        }
                    }
                    got
                })
            })
            .collect();
        drop(rx);
        for p in producers {
            p.join().unwrap();
        }
        let mut all: Vec<usize> = consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..PRODUCERS * ITEMS).collect::<Vec<_>>(), "items lost or received twice");
    });
}

/// Not a primitive, but what the others stand on: spawn and join trees, with yields and joins
/// of children that finished, run, or wait.
#[test]
fn spawn_join_trees_add_up() {
    explore("spawn_join_trees_add_up", || {
        fn tree(depth: u32, id: u64) -> u64 {
            if depth == 0 {
                if id.is_multiple_of(3) {
                    yield_now();
                }
                return id;
            }
            let l = spawn(move || tree(depth - 1, 2 * id));
            let r = spawn(move || tree(depth - 1, 2 * id + 1));
            if id.is_multiple_of(2) {
                yield_now();
            }
            l.join().unwrap() + r.join().unwrap()
        }
        // Leaves of a depth-7 tree rooted at id 1 are 128..256.
        assert_eq!(tree(7, 1), (128..256).sum::<u64>());
    });
}
