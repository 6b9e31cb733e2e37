//! The operations across ranks: run by `cargo test`, this binary launches itself with
//! `mpiexec -n 2` and `-n 3`; each rank runs every scenario and prints one line per scenario.

mod common;

use elite_mpi::{Error, Op, PeerRank, Source, TagMatch, World};
use elite_rt::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// This rank's partner for pairwise scenarios (0-1, 2-3, ...), if it has one.
fn partner(w: &World) -> Option<usize> {
    let p = w.rank() ^ 1;
    (p < w.size()).then_some(p)
}

fn ping_pong(w: &World) {
    let Some(p) = partner(w) else { return };
    for i in 0..100u64 {
        if w.rank() < p {
            w.send(&i, p, 1).unwrap();
            let (back, st) = w.recv::<u64>(p, 1).unwrap();
            assert_eq!(back, i + 1);
            assert_eq!((st.source(), st.tag(), st.count()), (p, 1, 1));
        } else {
            let (v, _) = w.recv::<u64>(p, 1).unwrap();
            w.send(&(v + 1), p, 1).unwrap();
        }
    }
}

fn slices(w: &World) {
    let Some(p) = partner(w) else { return };
    let data: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5 + w.rank() as f64).collect();
    let send = w.isend(data.clone(), p, 2).unwrap();
    let mut buf = vec![0.0f64; 1500];
    let st = w.recv_into(&mut buf, p, 2).unwrap();
    assert_eq!(st.count(), 1000);
    let expected: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5 + p as f64).collect();
    assert_eq!(&buf[..1000], &expected[..]);
    assert_eq!(send.wait().unwrap(), data);
}

/// Many ULTs exchange at once, their receives posted in the opposite order of the sends, so
/// that completions arrive out of order and in batches.
fn many_ults(w: &World) {
    let Some(p) = partner(w) else { return };
    const N: i32 = 64;
    let hs: Vec<_> = (0..N)
        .map(|i| {
            let w = w.clone();
            elite_rt::spawn(move || {
                let tag = if w.rank() < p { i } else { N - 1 - i };
                let r = w.irecv::<i64>(4, p, 100 + tag).unwrap();
                let s = w.isend(vec![tag as i64; 3], p, 100 + tag).unwrap();
                while !r.test() {
                    elite_rt::yield_now();
                }
                let (v, st) = r.wait().unwrap();
                s.wait().unwrap();
                assert_eq!(v, vec![tag as i64; 3]);
                assert_eq!(st.tag(), 100 + tag);
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

/// A ULT blocked in `recv` leaves its processor (the runtime has one) to the others: the message
/// it waits for is only sent after another ULT of the same rank ran.
fn blocks_only_the_ult(w: &World) {
    let Some(p) = partner(w) else { return };
    let ran = Arc::new(AtomicU64::new(0));
    let waiter = {
        let (w, ran) = (w.clone(), ran.clone());
        elite_rt::spawn(move || {
            let (v, _) = w.recv::<u64>(p, 11).unwrap();
            assert_eq!(ran.load(Ordering::SeqCst), 1, "the other ULT ran first");
            v
        })
    };
    let other = {
        let (w, ran) = (w.clone(), ran.clone());
        elite_rt::spawn(move || {
            elite_rt::yield_now();
            ran.store(1, Ordering::SeqCst);
            // Tell the partner to send; it answers on tag 11.
            w.send(&7u64, p, 10).unwrap();
        })
    };
    let (x, _) = w.recv::<u64>(p, 10).unwrap();
    w.send(&(x * 6), p, 11).unwrap();
    other.join().unwrap();
    assert_eq!(waiter.join().unwrap(), 42);
}

fn collectives(w: &World) {
    let n = w.size() as u64;
    w.barrier().unwrap();
    let mut v = if w.rank() == 0 { [3u32, 1, 4, 1, 5] } else { [0; 5] };
    w.broadcast(&mut v, 0).unwrap();
    assert_eq!(v, [3, 1, 4, 1, 5]);
    let mut sum = [0u64; 2];
    w.all_reduce(&[w.rank() as u64, 1], &mut sum, Op::sum()).unwrap();
    assert_eq!(sum, [n * (n - 1) / 2, n]);
    let mut max = [0.0f64];
    w.all_reduce(&[w.rank() as f64], &mut max, Op::max()).unwrap();
    assert_eq!(max, [(n - 1) as f64]);
    // Collectives from several ULTs at once are a caller's error in MPI; one after the other
    // from different ULTs is fine.
    let w2 = w.clone();
    elite_rt::spawn(move || w2.barrier().unwrap()).join().unwrap();
}

fn errors(w: &World) {
    let size = w.size();
    assert_eq!(w.send(&1u8, size, 0), Err(Error::RankOutOfRange { rank: size, size }));
    assert!(matches!(w.recv::<u8>(size + 5, 0), Err(Error::RankOutOfRange { .. })));
    let max = w.max_tag();
    assert!(max >= 32767);
    assert_eq!(w.send(&1u8, 0, -1), Err(Error::TagOutOfRange { tag: -1, max }));
    if max < i32::MAX {
        assert!(matches!(w.send(&1u8, 0, max + 1), Err(Error::TagOutOfRange { .. })));
    }
    assert!(matches!(w.irecv::<u8>(1, Source::Any, -3), Err(Error::TagOutOfRange { .. })));
    assert!(matches!(
        w.all_reduce(&[1u8, 2], &mut [0u8], Op::sum()),
        Err(Error::LengthMismatch { send: 2, recv: 1 })
    ));
    assert!(matches!(w.broadcast(&mut [0u8], size), Err(Error::RankOutOfRange { .. })));
    let Some(p) = partner(w) else { return };
    // A message longer than the buffer, then one that is not a whole number of u64.
    w.send_slice(&[1u32, 2, 3, 4], p, 20).unwrap();
    w.send_slice(&[1u8, 2, 3], p, 21).unwrap();
    let mut small = [0u32; 2];
    assert_eq!(w.recv_into(&mut small, p, 20), Err(Error::Truncated { capacity: 2 }));
    let got = w.recv::<u64>(p, 21);
    assert!(matches!(got, Err(Error::TypeMismatch { .. })), "{got:?}");
    // Errors say what was wrong.
    let text = Error::Truncated { capacity: 2 }.to_string();
    assert!(text.contains("longer than the receive buffer of 2"), "{text}");
}

/// A dropped request's operation still completes (its buffer kept alive by the rank), and
/// `ANY_SOURCE`/`ANY_TAG` match. (No collective here: a rank without a partner has returned.)
fn dropped_and_any(w: &World) {
    let Some(p) = partner(w) else { return };
    drop(w.irecv::<u64>(8, p, 30).unwrap());
    w.send_slice(&[9u64; 8], p, 30).unwrap();
    w.send(&(w.rank() as u64), p, 31).unwrap();
    let (v, st) = w.recv::<u64>(Source::Any, TagMatch::Any).unwrap();
    assert_eq!((v, st.source(), st.tag()), (p as u64, p, 31));
}

/// Messages that arrive long after their waiters stopped spinning: a small `irecv` (started
/// without waking the progress ULT), a large one (waking it) and a blocking `recv` (tested by its
/// waiter until it parks). Each waiter must get the progress ULT polling before it parks, or it
/// sleeps forever. The sender sleeps its OS thread (and so its whole rank) first.
fn late_messages(w: &World) {
    let Some(p) = partner(w) else { return };
    if w.rank() < p {
        let small = w.irecv::<u64>(4, p, 40).unwrap();
        let (v, st) = small.wait().unwrap();
        assert_eq!((v, st.count()), (vec![1, 2, 3], 3));
        let large = w.irecv::<f64>(2048, p, 41).unwrap();
        let (v, _) = large.wait().unwrap();
        assert_eq!(v, vec![0.5; 2048]);
        let (x, _) = w.recv::<u64>(p, 42).unwrap();
        assert_eq!(x, 42);
    } else {
        for (tag, f) in [(40, 0), (41, 1), (42, 2)] {
            std::thread::sleep(Duration::from_millis(30));
            match f {
                0 => w.send_slice(&[1u64, 2, 3], p, tag).unwrap(),
                1 => w.send_slice(&[0.5f64; 2048], p, tag).unwrap(),
                _ => w.send(&42u64, p, tag).unwrap(),
            }
        }
    }
}

/// A cross-rank deadlock, resolved after the report: each rank of a pair parks a named ULT in a
/// `recv` that its partner only sends once both ranks made their stall report. The report must
/// name the ULT, the operation, the peer rank and the tag.
fn stall_report(w: &World) {
    let Some(p) = partner(w) else { return };
    let (before, _) = w.last_stall();
    w.set_stall_report(Some(Duration::from_millis(100)));
    let waiter = {
        let w = w.clone();
        elite_rt::Builder::new()
            .name("stalled-recv".into())
            .spawn(move || w.recv::<u64>(p, 61).unwrap().0)
            .unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let stall = loop {
        match w.last_stall() {
            (n, Some(s)) if n > before => break s,
            _ => {
                assert!(std::time::Instant::now() < deadline, "no stall report within 30 s");
                elite_rt::sleep(Duration::from_millis(20));
            }
        }
    };
    w.set_stall_report(Some(elite_mpi::DEFAULT_STALL_GRACE));
    assert_eq!(stall.rank(), w.rank());
    assert!(stall.quiet_for() >= Duration::from_millis(100), "{stall}");
    let wait = stall
        .waits()
        .iter()
        .find(|x| x.waiter().and_then(|t| t.name()) == Some("stalled-recv"))
        .unwrap_or_else(|| panic!("the parked ULT is not named:\n{stall}"));
    assert_eq!((wait.op(), wait.peer(), wait.tag()), ("recv", Some(PeerRank::Rank(p)), Some(61)), "{stall}");
    let text = stall.to_string();
    assert!(text.contains(&format!("'stalled-recv' waits on MPI recv from rank {p}, tag 61")), "{text}");
    // Both ranks must have made their report before either releases the other's waiter (a
    // completion on a rank ends its stall): tell each other first, on another tag.
    w.send(&1u64, p, 62).unwrap();
    w.recv::<u64>(p, 62).unwrap();
    w.send(&7u64, p, 61).unwrap();
    assert_eq!(waiter.join().unwrap(), 7);
}

/// A scenario's name and body.
type Scenario = (&'static str, fn(&World));

fn main() {
    if !common::is_child() {
        for ranks in [2, 3] {
            let out = common::launch(ranks, Duration::from_secs(120));
            print!("{}", out.stdout);
            assert!(out.success, "the job on {ranks} ranks failed:\n{}\n{}", out.stdout, out.stderr);
            assert_eq!(
                out.stdout.matches("all scenarios ok").count(),
                ranks,
                "every rank finishes:\n{}\n{}",
                out.stdout,
                out.stderr
            );
        }
        return;
    }
    let mpi = elite_mpi::init(elite_rt::Runtime::builder().processors(1)).unwrap();
    assert!(matches!(mpi.threading(), elite_mpi::Threading::Serialized | elite_mpi::Threading::Multiple));
    let world = mpi.world();
    let rank = mpi.rank();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    mpi.block_on(move || {
        let scenarios: [Scenario; 9] = [
            ("ping_pong", ping_pong),
            ("slices", slices),
            ("many_ults", many_ults),
            ("blocks_only_the_ult", blocks_only_the_ult),
            ("collectives", collectives),
            ("errors", errors),
            ("dropped_and_any", dropped_and_any),
            ("late_messages", late_messages),
            ("stall_report", stall_report),
        ];
        for (name, f) in scenarios {
            f(&world);
            world.barrier().unwrap();
            log2.lock().unwrap().push(name);
        }
        let stats = world.progress_stats();
        assert!(stats.started > 0 && stats.polls > 0, "{stats:?}");
    });
    println!("rank {rank}: {} all scenarios ok", log.lock().unwrap().join(" "));
}
