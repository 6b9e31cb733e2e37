//! The primitives of `elite_rt::sync` used by plain OS threads only (no runtime): every waiter parks
//! its thread, through the same wait lists, spin locks and exactly-once notification as ULTs use.
//!
//! No coroutine is involved, so these also run under Miri (`.ci/run`), which checks the protocols
//! for data races, undefined behaviour and leaks; the sizes are small for that reason.

use elite_rt::sync::{mpmc, mpsc, Barrier, Condvar, Mutex, RwLock, Semaphore, WaitGroup};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const THREADS: usize = 3;

fn on_threads<T: Send + 'static>(n: usize, f: impl Fn(usize) -> T + Send + Sync + 'static) -> Vec<T> {
    let f = Arc::new(f);
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let f = f.clone();
            thread::spawn(move || f(i))
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn mutex_increments_are_not_lost() {
    let m = Arc::new(Mutex::new(0u64));
    let m2 = m.clone();
    on_threads(THREADS, move |_| {
        for _ in 0..10 {
            let mut g = m2.lock().unwrap();
            let v = *g;
            thread::yield_now(); // hold it a while: others queue up
            *g = v + 1;
        }
    });
    assert_eq!(*m.lock().unwrap(), (THREADS * 10) as u64);
}

#[test]
fn condvar_hands_over_and_times_out() {
    let pair = Arc::new((Mutex::new(None::<u32>), Condvar::new()));
    let p2 = pair.clone();
    let consumer = thread::spawn(move || {
        let (m, cv) = &*p2;
        let g = cv.wait_while(m.lock().unwrap(), |v| v.is_none()).unwrap();
        g.unwrap()
    });
    {
        let (m, cv) = &*pair;
        *m.lock().unwrap() = Some(42);
        cv.notify_one();
    }
    assert_eq!(consumer.join().unwrap(), 42);
    let (m, cv) = &*pair;
    let (_g, r) = cv.wait_timeout(m.lock().unwrap(), Duration::from_millis(5)).unwrap();
    assert!(r.timed_out(), "nobody notified");
}

#[test]
fn rwlock_readers_share_and_writers_exclude() {
    let l = Arc::new(RwLock::new(0u32));
    let l2 = l.clone();
    let sums = on_threads(THREADS, move |i| {
        if i == 0 {
            for _ in 0..5 {
                *l2.write().unwrap() += 2;
            }
            0
        } else {
            (0..5).map(|_| *l2.read().unwrap()).filter(|v| v % 2 == 1).count()
        }
    });
    assert_eq!(sums.iter().sum::<usize>(), 0, "a reader saw a half-done write");
    assert_eq!(*l.read().unwrap(), 10);
}

#[test]
fn semaphore_bounds_the_holders() {
    let sem = Arc::new(Semaphore::new(2));
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (s2, i2, m2) = (sem.clone(), inside.clone(), most.clone());
    on_threads(THREADS + 1, move |_| {
        for _ in 0..4 {
            s2.acquire();
            let now = i2.fetch_add(1, SeqCst) + 1;
            m2.fetch_max(now, SeqCst);
            thread::yield_now();
            i2.fetch_sub(1, SeqCst);
            s2.release();
        }
    });
    assert!(most.load(SeqCst) <= 2);
    assert_eq!(sem.available_permits(), 2);
}

#[test]
fn barrier_releases_everyone_with_one_leader() {
    let b = Arc::new(Barrier::new(THREADS));
    let b2 = b.clone();
    let leaders = on_threads(THREADS, move |_| (0..3).filter(|_| b2.wait().is_leader()).count());
    assert_eq!(leaders.iter().sum::<usize>(), 3, "one leader per generation");
}

#[test]
fn waitgroup_waits_for_every_done() {
    let wg = Arc::new(WaitGroup::new());
    let done = Arc::new(AtomicUsize::new(0));
    wg.add(THREADS);
    let hs: Vec<_> = (0..THREADS)
        .map(|_| {
            let (wg, done) = (wg.clone(), done.clone());
            thread::spawn(move || {
                done.fetch_add(1, SeqCst);
                wg.done();
            })
        })
        .collect();
    wg.wait();
    assert_eq!(done.load(SeqCst), THREADS);
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(wg.count(), 0);
}

#[test]
fn mpsc_delivers_everything_once_and_disconnects() {
    let (tx, rx) = mpsc::channel::<usize>();
    let senders: Vec<_> = (0..THREADS)
        .map(|i| {
            let tx = tx.clone();
            thread::spawn(move || (0..5).for_each(|k| tx.send(i * 100 + k).unwrap()))
        })
        .collect();
    drop(tx);
    let mut got: Vec<usize> = rx.iter().collect(); // ends when every sender is gone
    got.sort_unstable();
    let mut want: Vec<usize> = (0..THREADS).flat_map(|i| (0..5).map(move |k| i * 100 + k)).collect();
    want.sort_unstable();
    assert_eq!(got, want);
    for s in senders {
        s.join().unwrap();
    }
}

#[test]
fn rendezvous_channel_hands_over_in_order() {
    let (tx, rx) = mpsc::sync_channel::<u32>(0);
    let sender = thread::spawn(move || (0..5).for_each(|i| tx.send(i).unwrap()));
    assert_eq!(rx.iter().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    sender.join().unwrap();
}

#[test]
fn mpmc_consumers_share_the_items() {
    let (tx, rx) = mpmc::bounded::<usize>(2);
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || rx.iter().collect::<Vec<_>>())
        })
        .collect();
    drop(rx);
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || (0..6).for_each(|k| tx.send(p * 10 + k).unwrap()))
        })
        .collect();
    drop(tx);
    for p in producers {
        p.join().unwrap();
    }
    let mut got: Vec<usize> = consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, (0..6).chain(10..16).collect::<Vec<_>>());
}
