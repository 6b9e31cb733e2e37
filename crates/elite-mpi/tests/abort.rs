//! A ULT that panics in one rank ends the job with its report (MPI_Abort) while another rank
//! waits for a message that will never come.

mod common;

use std::time::Duration;

fn main() {
    if common::is_child() {
        let mpi = elite_mpi::init(elite_rt::Runtime::builder().processors(1)).unwrap();
        let world = mpi.world();
        mpi.block_on(move || {
            if world.rank() == 1 {
                let h = elite_rt::spawn(|| -> u64 { panic!("deliberate panic in a ULT of rank 1") });
                let _ = h.join();
            } else {
                // Never sent: without the abort this rank would wait forever.
                let _ = world.recv::<u64>(1, 5);
            }
        });
        eprintln!("rank {} returned (it should have been aborted)", mpi.rank());
        return;
    }
    let out = common::launch(2, Duration::from_secs(60));
    print!("{}", out.stdout);
    assert!(!out.success, "the job succeeded although a ULT panicked:\n{}", out.stderr);
    assert!(
        out.stderr.contains("deliberate panic in a ULT of rank 1"),
        "the panic's report is missing:\n{}",
        out.stderr
    );
    assert!(out.stderr.contains("MPI_Abort"), "no abort notice:\n{}", out.stderr);
    assert!(!out.stderr.contains("should have been aborted"), "{}", out.stderr);
    println!("abort: ok");
}
