//! Steal trials (`RuntimeBuilder::steal_trials`): a thief that keeps stealing short ULTs that
//! talk to a server measures whether its steals pay, and holds off when they do not. What these
//! tests assert does not depend on the verdicts (which are measurements of the host): every
//! request is answered, the counters agree with each other and with the setting, and work
//! made ready after a phase of churn still runs on every processor.

mod common;

use common::{hang_guard, spin_until};
use elite_rt::sync::mpsc;
use elite_rt::Runtime;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// Workers in the churn phase.
const WORKERS: u64 = 20;

/// A server ULT answering `WORKERS` workers, each sending `requests` requests over one channel
/// and waiting for each reply on its own: the pattern whose steals do not pay. Returns the sum
/// of the replies, checked against the sum of the requests.
fn serve_requests(requests: u64) -> u64 {
    let (to_server, inbox) = mpsc::channel::<(u64, mpsc::SyncSender<u64>)>();
    let server = elite_rt::spawn(move || {
        let mut served = 0u64;
        for (x, reply) in inbox.iter() {
            served += 1;
            reply.send(x * 2).expect("the worker waits for its reply");
        }
        served
    });
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let to_server = to_server.clone();
            elite_rt::spawn(move || {
                let (reply_to, replies) = mpsc::sync_channel(1);
                let mut sum = 0u64;
                for i in 0..requests {
                    to_server.send((w * requests + i, reply_to.clone())).expect("the server runs");
                    sum += replies.recv().expect("a reply");
                }
                sum
            })
        })
        .collect();
    drop(to_server);
    let sum: u64 = workers.into_iter().map(|h| h.join().expect("a worker")).sum();
    assert_eq!(server.join().expect("the server"), WORKERS * requests, "requests served");
    let n = WORKERS * requests;
    assert_eq!(sum, n * (n - 1), "every reply is twice its request");
    sum
}

fn trial_counts(rt: &Runtime) -> (u64, u64) {
    let stats = rt.stats();
    let trials = stats.processors.iter().map(|p| p.steal_trials).sum();
    let holds = stats.processors.iter().map(|p| p.steal_holds).sum();
    (trials, holds)
}

#[test]
fn a_server_and_its_workers_get_every_reply_with_trials_on_and_off() {
    for on in [true, false] {
        let (trials, holds) = hang_guard(120, "the requests", move || {
            let rt = Runtime::builder().processors(2).steal_trials(on).build().expect("build runtime");
            rt.block_on(|| serve_requests(10000));
            trial_counts(&rt)
        });
        assert!(holds <= trials, "a hold is a trial's verdict: {holds} holds, {trials} trials");
        if !on {
            assert_eq!((trials, holds), (0, 0), "no trials when they are off");
        }
    }
}

#[test]
fn no_trials_in_a_runtime_of_one_processor_or_in_chaos_mode() {
    let one = Runtime::builder().processors(1).build().expect("build runtime");
    one.block_on(|| serve_requests(500));
    assert_eq!(trial_counts(&one), (0, 0));
    let chaos = Runtime::builder().processors(2).chaos(7).build().expect("build runtime");
    chaos.block_on(|| serve_requests(500));
    assert_eq!(trial_counts(&chaos), (0, 0));
}

/// After a phase of churn (in which the idle processor may have come to hold), two ULTs made
/// ready by one waker must come to run at once, one on each processor: a hold ends, and the
/// ready ULT is stolen (or rescued from the `next` slot). Each spins, keeping its processor,
/// until both have arrived; a processor that held for good would leave the test hanging.
#[test]
fn work_made_ready_after_churn_runs_on_both_processors() {
    // (Not under the chaos mode, which places ULTs at random and rescues no stranded ones.)
    let rt = Runtime::builder().processors(2).no_chaos().build().expect("build runtime");
    hang_guard(120, "two ULTs at once after churn", move || {
        rt.block_on(|| {
            for round in 0..3 {
                let arrived = Arc::new(AtomicUsize::new(0));
                let (starts, waiters): (Vec<_>, Vec<_>) = (0..2)
                    .map(|_| {
                        let (go, wait) = mpsc::channel::<()>();
                        let arrived = arrived.clone();
                        let h = elite_rt::spawn(move || {
                            wait.recv().expect("the go");
                            arrived.fetch_add(1, SeqCst);
                            // Keeps this processor until the other ULT runs too.
                            spin_until(60, "the other ULT to run beside this one", || {
                                arrived.load(SeqCst) == 2
                            });
                        });
                        (go, h)
                    })
                    .unzip();
                serve_requests(3000);
                for go in &starts {
                    go.send(()).expect("the ULT waits");
                }
                for h in waiters {
                    h.join().unwrap_or_else(|_| panic!("round {round}: a ULT panicked"));
                }
            }
        })
    });
}
