//! Simulated cache misses: a probe of this executable run under `valgrind --tool=cachegrind`, for
//! the `ll_misses` benches of suites `affinity` and `grid` (`--cachegrind`), with a simulated
//! last level of 1 MiB or 2 MiB ([`LL_BYTES`]).
//!
//! The probe checks its own answer and prints it on a sample line (see
//! [`crate::peers::sample_line`]); [`sample`] reads that answer back, and the `LL misses` of
//! valgrind's summary, as one [`Sample`] of metric `ll_misses`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::harness::Sample;

/// This executable, to run under cachegrind; `Err` says why there is none to run (no
/// `valgrind` on the PATH, or this executable cannot be found).
pub fn executable() -> Result<PathBuf, String> {
    let valgrind =
        Command::new("valgrind").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !matches!(valgrind, Ok(status) if status.success()) {
        return Err("no `valgrind` on the PATH".into());
    }
    std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))
}

/// The simulated last levels of the `ll_misses` benches: 16-way, 64-byte lines, of these sizes
/// (the L2 of the two kinds of hosts the project runs on; the rows record theirs in
/// `params.ll_bytes`).
pub const LL_BYTES: [u64; 2] = [1 << 20, 2 << 20];

/// Runs `exe args` under cachegrind with a 16-way last level of 64-byte lines and `ll_bytes`
/// bytes, and reads back the probe's checked answer (its `ns_per_op=… answer=…` line) and the
/// simulated LL misses, as one sample.
pub fn sample(exe: &Path, args: &[&str], ll_bytes: u64) -> Result<Sample, String> {
    let output = Command::new("valgrind")
        .args(["--tool=cachegrind", "--cache-sim=yes", "--cachegrind-out-file=/dev/null"])
        .arg(format!("--LL={ll_bytes},16,64"))
        .arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("(no message)");
        return Err(format!("valgrind {}: {}", output.status, last.trim()));
    }
    let answer = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("ns_per_op=").and_then(|rest| rest.split_once(" answer=")))
        .and_then(|(_, answer)| answer.trim().parse::<u64>().ok())
        .ok_or_else(|| format!("the probe printed no sample line: {:?}", stdout.trim()))?;
    let misses = ll_misses(&stderr).ok_or("no `LL misses` line in valgrind's summary")?;
    Ok(Sample::count(misses, answer))
}

/// The total of cachegrind's `LL misses:` summary line (`==1== LL misses:  1,234  (...)`).
fn ll_misses(summary: &str) -> Option<u64> {
    let line = summary.lines().find(|l| l.contains("LL misses:"))?;
    let after = line.split("LL misses:").nth(1)?;
    let number: String = after.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == ',').collect();
    number.replace(',', "").parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cachegrind_summaries() {
        let summary = "==12== I   refs:      1,000\n==12== LL refs:   2,000  ( 1 rd + 1 wr)\n\
                       ==12== LL misses:      1,234,567  (  1,000,000 rd   +     234,567 wr)\n";
        assert_eq!(ll_misses(summary), Some(1_234_567));
        assert_eq!(ll_misses("nothing"), None);
    }
}
