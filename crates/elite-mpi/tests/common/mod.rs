//! Launching a test binary on several ranks: the test runs `mpiexec -n N` on its own executable
//! with `ELITE_MPI_CHILD=1`, loopback and shared memory only.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether this process is one of the ranks (else it is the launcher).
pub fn is_child() -> bool {
    std::env::var_os("ELITE_MPI_CHILD").is_some()
}

/// The environment that keeps MPICH over UCX on shared memory and loopback.
/// `HYDRA_IFACE=lo`: the launcher's proxies connect back to it over `lo` whatever the host name
/// resolves to.
pub const LOOPBACK: [(&str, &str); 4] =
    [("UCX_TLS", "self,sm"), ("UCX_NET_DEVICES", "lo"), ("HWLOC_COMPONENTS", "-gl"), ("HYDRA_IFACE", "lo")];

/// What a launch ended with.
pub struct Outcome {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs this executable on `ranks` ranks, killing the job after `limit`.
pub fn launch(ranks: usize, limit: Duration) -> Outcome {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new("mpiexec")
        .arg("-n")
        .arg(ranks.to_string())
        .arg(exe)
        .envs(LOOPBACK)
        .env("ELITE_MPI_CHILD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpiexec runs (install mpich: see the crate's README)");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    match status {
        Some(s) => Outcome { success: s.success(), stdout, stderr },
        None => panic!(
            "the job on {ranks} ranks did not end within {limit:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        ),
    }
}
