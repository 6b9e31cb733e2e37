//! `elite-bench places-probe merge_sort <system> <processors> <runs> [branchless]`: where the
//! phases of `merge_sort` run and what each level of the recursion costs.
//!
//! The probe sorts the bench's input (4 194 304 pseudo-random `u32`, the same seed) with the
//! bench's algorithm ([`super::merge_sort`]: leaves of [`SORT_LEAF`] sorted by `sort_unstable`,
//! halves forked, merged into the scratch buffer and copied back), instrumented: every leaf
//! sort and every merge records its depth, its range, the processor it ran on (for a merge
//! also the processors on which its two halves finished) and how long it took. After one
//! warm-up run it prints one line per run:
//!
//! ```text
//! run=1 ms=140.5 steals=1 | d8 leaf ns=13.73 on=128,128 | d7 merge ns=5.65 on=64,64 away=0 | ... | d0 merge ns=6.15 on=1,0 away=1
//! ```
//!
//! `ms`: the sort's time; `steals`: ULTs stolen during the run (elite systems); per depth
//! (`d0` the top merge, the deepest the leaves): `ns`, the summed time of that depth's leaf
//! sorts or merges (merge and copy back) per element; `on`, how many ran on each processor;
//! `away`, how many merges ran on a processor other than the one (or ones) on which their
//! halves finished. Systems: `elite/hinted` and `elite/unhinted` (the bench's), `elite/worst`
//! (LASSI's worst locality: forks hinted by range as in `elite/hinted`, and every merge run by a
//! ULT held with `PlaceMode::Strict` on another processor than the one on which its left half
//! finished, so that it reads halves written elsewhere), `rayon` (the bench's rayon peer, thread
//! index as processor) and `sequential` (one thread, no fork). `branchless` replaces the bench's
//! merge by one without a data-dependent branch, to see what the merge's mispredictions cost.
//! The timings include the recording (two clock reads and a lock per leaf or merge: 767 per
//! sort).

use std::sync::Mutex;
use std::time::Instant;

use super::{merge, rayon_pool, sorted_hash, stress_array, EliteFork, Fork, RayonFork, SORT_LEAF, SORT_N};
use crate::workloads::build_runtime;

/// The probe's systems.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ProbeSystem {
    /// `elite/hinted`.
    Hinted,
    /// `elite/unhinted`.
    Unhinted,
    /// `elite/worst`: hinted forks, every merge held on another processor than its left half's.
    Worst,
    /// The bench's rayon peer.
    Rayon,
    /// One thread, the halves one after the other.
    Sequential,
}

impl ProbeSystem {
    /// The system named `name`.
    fn parse(name: &str) -> Option<ProbeSystem> {
        Some(match name {
            "elite/hinted" | "hinted" => ProbeSystem::Hinted,
            "elite/unhinted" | "unhinted" => ProbeSystem::Unhinted,
            "elite/worst" | "worst" => ProbeSystem::Worst,
            "rayon" => ProbeSystem::Rayon,
            "sequential" => ProbeSystem::Sequential,
            _ => return None,
        })
    }

    /// Whether it runs on an elite runtime.
    fn is_elite(self) -> bool {
        matches!(self, ProbeSystem::Hinted | ProbeSystem::Unhinted | ProbeSystem::Worst)
    }
}

/// One leaf sort or merge, as recorded.
#[derive(Clone, Copy, Debug)]
pub(super) struct Phase {
    /// Depth in the recursion (0: the top merge).
    depth: u32,
    /// A leaf sort (else a merge).
    leaf: bool,
    /// Elements.
    len: usize,
    /// The processor it ran on.
    processor: usize,
    /// The processors on which its two halves finished (a leaf: its own).
    halves: [usize; 2],
    /// Its time.
    ns: u64,
}

/// What an instrumented sort shares between its tasks.
pub(super) struct Recorder {
    /// The processor the caller runs on.
    whoami: fn() -> usize,
    /// Merges without a data-dependent branch.
    branchless: bool,
    /// With `Some(p)`, every merge runs in a ULT held on another of the runtime's `p`
    /// processors than the one on which its left half finished (`elite/worst`).
    worst: Option<usize>,
    /// The phases so far.
    phases: Mutex<Vec<Phase>>,
}

impl Recorder {
    /// A recorder for `system` on `processors` processors.
    pub(super) fn new(system: ProbeSystem, processors: usize, branchless: bool) -> Recorder {
        let whoami: fn() -> usize = match system {
            ProbeSystem::Hinted | ProbeSystem::Unhinted | ProbeSystem::Worst => {
                || elite_rt::current().processor()
            }
            ProbeSystem::Rayon => || rayon::current_thread_index().unwrap_or(0),
            ProbeSystem::Sequential => || 0,
        };
        let worst = (system == ProbeSystem::Worst).then_some(processors.max(1));
        Recorder { whoami, branchless, worst, phases: Mutex::new(Vec::new()) }
    }

    /// Records `phase`.
    fn push(&self, phase: Phase) {
        self.phases.lock().unwrap_or_else(|e| e.into_inner()).push(phase);
    }

    /// The phases recorded.
    pub(super) fn take(&self) -> Vec<Phase> {
        std::mem::take(&mut *self.phases.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Runs `a` then `b` on the caller's thread.
struct SequentialFork;

impl Fork for SequentialFork {
    fn fork<A, B>(&self, a: A, b: B, _b_start: usize, _n: usize)
    where
        A: FnOnce() + Send,
        B: FnOnce() + Send,
    {
        a();
        b();
    }
}

/// Merges the sorted `a` and `b` into `out` without a branch on the data (a select and two
/// increments per element), then copies the rest of the longer one.
pub(super) fn merge_branchless(a: &[u32], b: &[u32], out: &mut [u32]) {
    let (mut i, mut j, mut k) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        let take_a = x <= y;
        out[k] = if take_a { x } else { y };
        i += usize::from(take_a);
        j += usize::from(!take_a);
        k += 1;
    }
    let rest_a = a.len() - i;
    out[k..k + rest_a].copy_from_slice(&a[i..]);
    out[k + rest_a..].copy_from_slice(&b[j..]);
}

/// Runs `f` in a ULT held (`PlaceMode::Strict`) on processor `processor`, and waits for it.
fn run_held_on(processor: usize, f: impl FnOnce() + Send) {
    let held = elite_rt::Builder::new()
        .place(elite_rt::Place::processor(processor))
        .place_mode(elite_rt::PlaceMode::Strict);
    super::join_spawned(held, || {}, f);
}

/// [`super::merge_sort`], recording its phases in `rec`; returns the processor it finished on.
pub(super) fn recorded_sort<F: Fork>(
    rec: &Recorder,
    fork: &F,
    data: &mut [u32],
    buf: &mut [u32],
    (offset, n, depth): (usize, usize, u32),
) -> usize {
    let len = data.len();
    if len <= SORT_LEAF {
        let (processor, start) = ((rec.whoami)(), Instant::now());
        data.sort_unstable();
        let ns = start.elapsed().as_nanos() as u64;
        rec.push(Phase { depth, leaf: true, len, processor, halves: [processor; 2], ns });
        return processor;
    }
    let mid = len / 2;
    let mut halves = [0, 0];
    {
        let (left, right) = data.split_at_mut(mid);
        let (left_buf, right_buf) = buf.split_at_mut(mid);
        let (left_at, right_at) = halves.split_at_mut(1);
        fork.fork(
            || left_at[0] = recorded_sort(rec, fork, left, left_buf, (offset, n, depth + 1)),
            || right_at[0] = recorded_sort(rec, fork, right, right_buf, (offset + mid, n, depth + 1)),
            offset + mid,
            n,
        );
    }
    let merge_here = |data: &mut [u32], buf: &mut [u32]| {
        let (processor, start) = ((rec.whoami)(), Instant::now());
        if rec.branchless {
            merge_branchless(&data[..mid], &data[mid..], buf);
        } else {
            merge(&data[..mid], &data[mid..], buf);
        }
        data.copy_from_slice(buf);
        rec.push(Phase { depth, leaf: false, len, processor, halves, ns: start.elapsed().as_nanos() as u64 });
        processor
    };
    match rec.worst {
        Some(processors) => {
            let mut finished = 0;
            let at = &mut finished;
            run_held_on((halves[0] + 1) % processors, || *at = merge_here(data, buf));
            finished
        }
        None => merge_here(data, buf),
    }
}

/// One line: the sort's time, its steals and, per depth, the phases' time per element, where
/// they ran and how many merges ran away from their halves.
pub(super) fn summary(phases: &[Phase], processors: usize, ms: f64, steals: u64) -> String {
    let mut line = format!("ms={ms:.1} steals={steals}");
    let deepest = phases.iter().map(|p| p.depth).max().unwrap_or(0);
    for depth in (0..=deepest).rev() {
        let at: Vec<&Phase> = phases.iter().filter(|p| p.depth == depth).collect();
        let Some(first) = at.first() else { continue };
        let elements: usize = at.iter().map(|p| p.len).sum();
        let ns: u64 = at.iter().map(|p| p.ns).sum();
        let mut on = vec![0usize; processors.max(1)];
        for p in &at {
            if let Some(count) = on.get_mut(p.processor) {
                *count += 1;
            }
        }
        let on: Vec<String> = on.iter().map(usize::to_string).collect();
        line += &format!(
            " | d{depth} {} ns={:.2} on={}",
            if first.leaf { "leaf" } else { "merge" },
            ns as f64 / elements.max(1) as f64,
            on.join(",")
        );
        if !first.leaf {
            let away = at.iter().filter(|p| p.halves.iter().any(|&h| h != p.processor)).count();
            line += &format!(" away={away}");
        }
    }
    line
}

/// The probe's entry (module docs); `args` after `merge_sort`.
pub(super) fn main(args: &[String]) -> std::process::ExitCode {
    use std::process::ExitCode;
    let usage = format!(
        "usage: elite-bench {} merge_sort <elite/hinted|elite/unhinted|elite/worst|rayon|sequential> <processors> <runs> [branchless]",
        super::PROBE_COMMAND
    );
    let parse = || -> Result<(ProbeSystem, usize, usize, bool), String> {
        let (system, processors, runs, rest) = match args {
            [s, p, r, rest @ ..] => (s, p, r, rest),
            _ => return Err(format!("expected 3 or 4 arguments, got {}", args.len())),
        };
        let system = ProbeSystem::parse(system).ok_or_else(|| format!("unknown system `{system}`"))?;
        let number = |name: &str, v: &str| -> Result<usize, String> {
            v.parse::<usize>()
                .ok()
                .filter(|&n| (1..=1024).contains(&n))
                .ok_or_else(|| format!("{name}: expected a number from 1 to 1024, got `{v}`"))
        };
        let branchless = match rest {
            [] => false,
            [b] if b == "branchless" => true,
            _ => return Err(format!("unexpected arguments {rest:?}")),
        };
        Ok((system, number("processors", processors)?, number("runs", runs)?, branchless))
    };
    let (system, processors, runs, branchless) = match parse() {
        Ok(v) => v,
        Err(message) => {
            eprintln!("elite-bench {}: {message}\n{usage}", super::PROBE_COMMAND);
            return ExitCode::from(2);
        }
    };
    match probe(system, processors, runs, branchless) {
        Ok(lines) => {
            for (i, line) in lines.iter().enumerate() {
                println!("run={} {line}", i + 1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("elite-bench {}: {e}", super::PROBE_COMMAND);
            ExitCode::from(1)
        }
    }
}

/// `runs` instrumented sorts (after one warm-up) of the bench's input: their summary lines.
fn probe(
    system: ProbeSystem,
    processors: usize,
    runs: usize,
    branchless: bool,
) -> Result<Vec<String>, String> {
    let input = stress_array(SORT_N.0, 7);
    let mut expected = input.clone();
    expected.sort_unstable();
    let expected = sorted_hash(&expected);
    let rt = if system.is_elite() {
        Some(build_runtime(elite_rt::Runtime::builder().processors(processors))?)
    } else {
        None
    };
    let pool = rayon_pool(processors)?;
    let steals = || -> u64 {
        rt.as_ref()
            .map_or(0, |rt| rt.stats().processors.iter().map(|p| p.steals_node + p.steals_remote).sum())
    };
    let (mut data, mut buf) = (input.clone(), vec![0u32; input.len()]);
    let mut lines = Vec::with_capacity(runs);
    for run in 0..=runs {
        data.copy_from_slice(&input);
        let rec = Recorder::new(system, processors, branchless);
        let before = steals();
        let n = data.len();
        let (sorted, scratch, r) = (&mut data[..], &mut buf[..], &rec);
        let elapsed = match (&rt, system) {
            (Some(rt), _) => {
                let fork = EliteFork { hinted: system != ProbeSystem::Unhinted, processors };
                rt.block_on(move || {
                    let start = Instant::now();
                    recorded_sort(r, &fork, sorted, scratch, (0, n, 0));
                    start.elapsed()
                })
            }
            (None, ProbeSystem::Rayon) => {
                let start = Instant::now();
                pool.install(|| recorded_sort(r, &RayonFork, sorted, scratch, (0, n, 0)));
                start.elapsed()
            }
            (None, _) => {
                let start = Instant::now();
                recorded_sort(r, &SequentialFork, sorted, scratch, (0, n, 0));
                start.elapsed()
            }
        };
        if sorted_hash(&data) != expected {
            return Err("wrong answer: the array is not sorted".to_string());
        }
        if run > 0 {
            let shown = if system == ProbeSystem::Sequential { 1 } else { processors };
            lines.push(summary(&rec.take(), shown, elapsed.as_secs_f64() * 1e3, steals() - before));
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_branchless_merge_merges() {
        let a = [1, 3, 3, 9, 12];
        let b = [0, 3, 4, 20, 21, 22];
        let mut out = [0; 11];
        merge_branchless(&a, &b, &mut out);
        assert_eq!(out, [0, 1, 3, 3, 3, 4, 9, 12, 20, 21, 22]);
        let mut out = [0; 5];
        merge_branchless(&a, &[], &mut out);
        assert_eq!(out, a);
    }

    #[test]
    fn the_recorded_sort_sorts_and_records_every_leaf_and_merge() {
        let input = stress_array(4 * SORT_LEAF, 5);
        let mut expected = input.clone();
        expected.sort_unstable();
        for branchless in [false, true] {
            let rec = Recorder::new(ProbeSystem::Sequential, 1, branchless);
            let (mut data, mut buf) = (input.clone(), vec![0; input.len()]);
            let n = data.len();
            recorded_sort(&rec, &SequentialFork, &mut data, &mut buf, (0, n, 0));
            assert_eq!(data, expected);
            let phases = rec.take();
            assert_eq!(phases.iter().filter(|p| p.leaf).count(), 4);
            assert_eq!(phases.iter().filter(|p| !p.leaf).count(), 3);
            let line = summary(&phases, 1, 1.0, 0);
            assert!(
                line.contains("d2 leaf") && line.contains("d0 merge") && line.contains("away=0"),
                "{line}"
            );
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "builds a runtime")]
    fn the_worst_placement_runs_every_merge_away_from_its_left_half() {
        let input = stress_array(4 * SORT_LEAF, 6);
        let mut expected = input.clone();
        expected.sort_unstable();
        let rt = build_runtime(elite_rt::Runtime::builder().processors(2)).expect("a runtime");
        let rec = Recorder::new(ProbeSystem::Worst, 2, false);
        let (mut data, mut buf) = (input.clone(), vec![0; input.len()]);
        let n = data.len();
        let (sorted, scratch, r) = (&mut data[..], &mut buf[..], &rec);
        rt.block_on(move || {
            let fork = EliteFork { hinted: true, processors: 2 };
            recorded_sort(r, &fork, sorted, scratch, (0, n, 0));
        });
        assert_eq!(data, expected);
        let merges: Vec<Phase> = rec.take().into_iter().filter(|p| !p.leaf).collect();
        assert_eq!(merges.len(), 3);
        assert!(merges.iter().all(|p| p.processor != p.halves[0]), "{merges:?}");
    }
}
