//! The Go peer: the program in `crates/elite-bench/go`, built once per invocation.
//!
//! [`GoPeer::build`] runs `go build` with the `go` on the PATH into the directory of this
//! executable (`<target dir>/release/elite-bench-go`). The module has no dependencies and the
//! build runs with `GOPROXY=off`, `GOTOOLCHAIN=local` and `GOWORK=off`, so it never needs the
//! network; without `HOME`, the Go caches are put beside the binary. A missing `go` or a failed
//! build is not an error of the run: the suite prints why and skips the Go rows.
//!
//! [`GoPeer::run`] starts the program for one sample: `-warmup=1 -reps=1` and the workload's
//! `-name=value` parameters; it prints one `ns_per_op=… answer=…` line.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{run_child, PeerArgs};
use crate::harness::{Contender, Params, Sample};

/// Where the Go sources are: beside this crate's manifest.
const SOURCE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/go");

/// The name of the built program.
const BINARY_NAME: &str = "elite-bench-go";

/// A built Go program, ready to run samples.
#[derive(Clone, Debug)]
pub struct GoPeer {
    /// The built program.
    binary: PathBuf,
}

impl GoPeer {
    /// Builds the Go program; `Err` says why Go cannot take part.
    pub fn build() -> Result<GoPeer, String> {
        let source = Path::new(SOURCE_DIR);
        if !source.join("go.mod").is_file() {
            return Err(format!("the Go sources are not at {SOURCE_DIR}"));
        }
        let out_dir = output_dir();
        let binary = out_dir.join(BINARY_NAME);
        let mut command = Command::new("go");
        command
            .arg("build")
            .arg("-o")
            .arg(&binary)
            .arg(".")
            .current_dir(source)
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("GOWORK", "off")
            .env("GOFLAGS", "")
            .env("CGO_ENABLED", "0");
        if std::env::var_os("HOME").is_none() {
            // Without HOME, Go cannot place its build cache or GOPATH; keep both beside us.
            if std::env::var_os("GOCACHE").is_none() {
                command.env("GOCACHE", out_dir.join("elite-bench-go-cache"));
            }
            if std::env::var_os("GOPATH").is_none() {
                command.env("GOPATH", out_dir.join("elite-bench-gopath"));
            }
        }
        let output = match command.output() {
            Ok(output) => output,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err("no `go` on the PATH".to_string());
            }
            Err(e) => return Err(format!("cannot run `go build`: {e}")),
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!("`go build` failed ({}): {}", output.status, stderr.trim()));
        }
        Ok(GoPeer { binary })
    }

    /// Runs one sample of `args` (one untimed pass, one timed pass, in a fresh process).
    pub fn run(&self, args: &PeerArgs) -> Result<Sample, String> {
        run_child(
            Command::new(&self.binary)
                .arg(format!("-suite={}", args.suite))
                .arg(format!("-bench={}", args.bench))
                .arg("-warmup=1")
                .arg("-reps=1")
                .args(args.flags()),
        )
    }

    /// The contender `go` of a bench: each sample runs `peer` in a fresh process.
    pub fn contender(&self, peer: &PeerArgs, params: Params, expected: u64) -> Contender {
        let (go, args) = (self.clone(), peer.clone());
        Contender::new("go", params, expected, move || go.run(&args))
    }
}

/// The directory of this executable (the cargo target directory's profile folder), or the
/// temporary directory if that is unknown.
fn output_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .unwrap_or_else(std::env::temp_dir)
}
