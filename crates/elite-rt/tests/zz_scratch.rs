use elite_rt::*;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

fn run(n: usize, procs: usize) {
    let rt = Arc::new(Runtime::builder().processors(procs).build().unwrap());
    let arrived = Arc::new(AtomicUsize::new(0));
    let (a2, rt2) = (arrived.clone(), rt.clone());
    std::thread::spawn(move || {
        rt2.block_on(move || {
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    let a = a2.clone();
                    spawn(move || {
                        a.fetch_add(1, SeqCst);
                        while a.load(SeqCst) < n {
                            yield_now();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
    });
    std::thread::sleep(Duration::from_secs(3));
    println!("n={n} procs={procs}: arrived {} \n{}", arrived.load(SeqCst), rt.stats());
}

#[test]
fn a200() {
    run(200, 1);
}
#[test]
fn a300() {
    run(300, 1);
}
#[test]
fn b2000() {
    run(2000, 2);
}
