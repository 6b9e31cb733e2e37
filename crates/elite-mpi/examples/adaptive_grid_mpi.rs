//! The adaptive-grid problem of `elite-grid` solved across MPI ranks (`mpiexec -n N`), with the
//! one-machine answer check on the gathered solution.
//!
//! What it does (the dataflow of `elite-grid`'s `active` solver, across ranks):
//!
//! - **Partition.** Every rank builds the same problem (`experiment::Model`) and the same patches
//!   (`layout::Patches`, contiguous runs of cells in the mesh's Morton order); rank `r` owns the
//!   contiguous range of patches up to the first patch boundary at or past `(r + 1)·cells/N`
//!   (balanced by cells; 3 ranks cut unevenly). The pairs of neighbouring patches on different
//!   ranks come from the matrix's rows: pair `(X, p)` carries the cells of `X` that the rows of
//!   `p` read, and has a tag both ranks compute alike.
//! - **Patches as ULTs.** Each rank runs one ULT per patch of its range. A patch runs sweep
//!   `k + 1` once its neighbours have run the sweeps it reads (multicolour Gauss-Seidel: lower
//!   colours' sweep `k + 1`, higher colours' sweep `k`): neighbours on its rank signal it as in
//!   `elite-grid`'s `active` solver (a count of missing signals, a semaphore); a neighbour on
//!   another rank sends, after each sweep, the cells the patch reads (one `isend` per pair and
//!   sweep: the remote doorbell is the message), and the patch receives it before the sweep that
//!   reads it, writing the cells into its rank's copy of the unknowns. So every value a
//!   relaxation reads is the one the multicolour iteration prescribes, and the result is bit for
//!   bit that of one process running the same sweeps. Several patches of a rank may write the
//!   same received cell; that is safe when the couplings are symmetric (`docs/distributed.md`
//!   says why), which the partition checks.
//! - **Global convergence** (reductions of the sweeps' changes): each rank counts its patches'
//!   finished sweeps per sweep; a coordinator ULT per rank takes sweep 1, 2, ... in order, waits
//!   until all its rank's patches finished it, and all-reduces (max) the ranks' largest changes
//!   of it; every rank so learns the same sequence, and the first sweep `S` within the tolerance.
//!   A patch runs sweep `k + 1` only once sweep `k + 1 - LAG` is complete on every rank (`LAG` is
//!   `elite-grid`'s, 4) and stops after sweep `S + LAG - 1`, as the one-machine solver does: the
//!   reduction of a sweep overlaps the next sweeps' work. A patch's last message to a
//!   lower-coloured neighbour is not read; the neighbour drains it.
//! - **The answer check.** Rank 0 gathers the owned ranges and checks them as `elite-grid`'s
//!   experiments do (residual and error within the bounds the tolerance gives), and that they
//!   equal, bit for bit, `S + LAG - 1` multicolour sweeps run on rank 0 alone.
//!
//! Every rank still builds the whole mesh and holds a full-length copy of the unknowns (it writes
//! its own cells and the boundary cells it receives): memory and set-up time do not shrink with
//! the ranks.
//!
//! ```sh
//! export UCX_TLS=self,sm UCX_NET_DEVICES=lo HWLOC_COMPONENTS=-gl HYDRA_IFACE=lo   # loopback only
//! cargo build --release --example adaptive_grid_mpi
//! mpiexec -n 2 target/release/examples/adaptive_grid_mpi --level 9 --json grid-mpi.json
//! ```
//!
//! Only rank 0 prints and writes the JSON document (suite `mpi`, bench `adaptive_grid_mpi`, system
//! `elite-mpi`, metric `solve_s`: the median over `--runs` of the solve's time on rank 0, from a
//! barrier to the convergence; `docs/bench-json.md`). The exit status is 1 when the answer is
//! wrong, 2 for a command-line mistake.

use elite_grid::experiment::Model;
use elite_grid::layout::{Patches, Values};
use elite_grid::matrix::Problem;
use elite_mpi::{Op, World};
use elite_rt::sync::{Condvar, Mutex, Semaphore};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the command line asked for.
struct Args {
    level: u8,
    patch: usize,
    tolerance: f64,
    processors: usize,
    runs: usize,
    max_sweeps: u64,
    json: Option<String>,
    boundaries: Option<usize>,
}

/// The command line, as clap parses it: each value is checked by its parser, so an error names
/// the flag, the value and what is allowed.
fn command() -> clap::Command {
    use clap::builder::NonEmptyStringValueParser;
    use clap::{value_parser, Arg};
    clap::Command::new("adaptive_grid_mpi")
        .about("The adaptive-grid problem of elite-grid solved across MPI ranks (run it under mpiexec -n N)")
        .args_override_self(true)
        .arg(
            Arg::new("level")
                .long("level")
                .value_name("L")
                .help("the mesh's finest level")
                .default_value("9")
                .value_parser(value_parser!(u8).range(Model::MIN_LEVEL as i64..=Model::MAX_LEVEL as i64)),
        )
        .arg(
            Arg::new("patch")
                .long("patch")
                .value_name("N")
                .help("cells per patch, i.e. per ULT")
                .default_value("128")
                .value_parser(value_parser!(u64).range(1..=elite_grid::layout::MAX_PATCH as u64)),
        )
        .arg(
            Arg::new("tolerance")
                .long("tolerance")
                .value_name("T")
                .help("stop 3 sweeps (LAG - 1) after the first that moves no unknown by more")
                .default_value("1e-8")
                .allow_negative_numbers(true)
                .value_parser(|value: &str| match value.parse::<f64>() {
                    Ok(t) if t.is_finite() && t > 0.0 => Ok(t),
                    _ => Err(format!("expected a positive finite number, got `{value}`")),
                }),
        )
        .arg(
            Arg::new("processors")
                .long("processors")
                .value_name("N")
                .help("processors of each rank's runtime")
                .default_value("1")
                .value_parser(value_parser!(u64).range(1..=elite_rt::MAX_PROCESSORS as u64)),
        )
        .arg(
            Arg::new("runs")
                .long("runs")
                .value_name("N")
                .help("solves, timed; the median is reported")
                .default_value("1")
                .value_parser(value_parser!(u64).range(1..=1000)),
        )
        .arg(
            Arg::new("max-sweeps")
                .long("max-sweeps")
                .value_name("N")
                .help("give up (exit 1) after this many sweeps complete on every rank")
                .default_value("100000")
                .value_parser(value_parser!(u64).range(1..)),
        )
        .arg(
            Arg::new("json")
                .long("json")
                .value_name("FILE|-")
                .help("write the JSON document (rank 0; `-`: stdout)")
                .value_parser(NonEmptyStringValueParser::new()),
        )
        .arg(
            Arg::new("boundaries")
                .long("boundaries")
                .value_name("N")
                .help(
                    "solve nothing: print the partition into N ranks (cells, pairs of patches and boundary \
                     cells per rank) and exit; needs no mpiexec",
                )
                .value_parser(value_parser!(u64).range(1..=1 << 16)),
        )
}

/// Parses `args` (without the program's name); `Err` is clap's error, which prints itself with
/// the usage line (or the help, for `--help`) and knows its exit status.
fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, clap::Error> {
    let m = command().no_binary_name(true).try_get_matches_from(args)?;
    let count = |name: &str| *m.get_one::<u64>(name).expect("a default or a required value") as usize;
    Ok(Args {
        level: *m.get_one::<u8>("level").expect("a default"),
        patch: count("patch"),
        tolerance: *m.get_one::<f64>("tolerance").expect("a default"),
        processors: count("processors"),
        runs: count("runs"),
        max_sweeps: *m.get_one::<u64>("max-sweeps").expect("a default"),
        json: m.get_one::<String>("json").cloned(),
        boundaries: m.get_one::<u64>("boundaries").map(|&n| n as usize),
    })
}

/// The tag of the gathering messages (the pairs' tags start at 1).
const GATHER_TAG: i32 = 0;

/// A pair of neighbouring patches on different ranks: the cells of `from` that the rows of `to`
/// read. One message per sweep of `from` carries them (the remote doorbell).
struct Pair {
    /// The sending patch.
    from: usize,
    /// The other rank: the receiver's for an outgoing pair, the sender's for an incoming one.
    peer: usize,
    /// The message tag: 1 + the pair's index among the pairs of its (sender, receiver) ranks in
    /// (from, to) order, computed alike on both sides.
    tag: i32,
    /// The cells carried, ascending.
    cells: Vec<usize>,
}

/// What one rank owns, and what crosses the cut.
struct Partition {
    /// The cells of each rank: `cells[r]..cells[r + 1]`.
    cells: Vec<usize>,
    /// This rank's patches: `mine.start..mine.end`.
    mine: std::ops::Range<usize>,
    /// Per patch of this rank (indexed from `mine.start`): the pairs into it, with whether the
    /// sender has a lower colour (then every sweep of the patch waits for its message; else the
    /// first sweep reads the sender's initial values).
    incoming: Vec<Vec<(Pair, bool)>>,
    /// Per patch of this rank: the pairs out of it.
    outgoing: Vec<Vec<Pair>>,
    /// Per patch of this rank: its neighbours on this rank.
    local: Vec<Vec<usize>>,
    /// Cross-rank pairs in either direction, summed over this rank's patches.
    pairs: usize,
    /// Cells this rank sends per sweep of all its patches (the boundary, counted per pair).
    boundary_cells: usize,
}

/// Cuts the patches (contiguous runs of cells in Morton order) into `size` contiguous ranges
/// balanced by cells, and finds the pairs of neighbouring patches across the cuts from the
/// matrix's rows.
fn partition(
    problem: &Problem,
    patches: &Patches,
    rank: usize,
    size: usize,
    max_tag: i32,
) -> Result<Partition, String> {
    let n = problem.len();
    let patch_size = patches.size();
    // Patches are contiguous runs of cells, in order; cut between patches near r * n / size.
    let mut cells = vec![0usize];
    let mut patch_cut = vec![0usize];
    let mut next = 1;
    for p in 0..patches.count() {
        let end = patches.patch(p).first() + patches.patch(p).len();
        while next < size && end >= next * n / size {
            cells.push(end);
            patch_cut.push(p + 1);
            next += 1;
        }
    }
    while cells.len() <= size {
        cells.push(n);
        patch_cut.push(patches.count());
    }
    let owner_of_cell = |i: usize| cells.partition_point(|&c| c <= i) - 1;
    // (peer, from, to) -> cells of `from` read by `to`.
    let mut into: BTreeMap<(usize, usize, usize), BTreeSet<usize>> = BTreeMap::new();
    let mut out_of: BTreeMap<(usize, usize, usize), BTreeSet<usize>> = BTreeMap::new();
    for k in 0..n {
        let reader = owner_of_cell(k);
        for (l, _) in problem.matrix.row(k) {
            let owner = owner_of_cell(l);
            if reader == rank && owner != rank {
                into.entry((owner, l / patch_size, k / patch_size)).or_default().insert(l);
            }
            if owner == rank && reader != rank {
                out_of.entry((reader, l / patch_size, k / patch_size)).or_default().insert(l);
            }
        }
    }
    // The dataflow needs symmetric couplings across the cut (see the module docs): `p` reads `X`
    // exactly when `X` reads `p`.
    if let Some((peer, x, p)) = into.keys().find(|&&(peer, x, p)| !out_of.contains_key(&(peer, p, x))) {
        return Err(format!(
            "patch {p} reads patch {x} of rank {peer}, which does not read it: couplings not symmetric"
        ));
    }
    if let Some((peer, p, y)) = out_of.keys().find(|&&(peer, p, y)| !into.contains_key(&(peer, y, p))) {
        return Err(format!(
            "patch {y} of rank {peer} reads patch {p}, which does not read it: couplings not symmetric"
        ));
    }
    let mine = patch_cut[rank]..patch_cut[rank + 1];
    let slot = |p: usize| p - mine.start;
    let mut incoming: Vec<Vec<(Pair, bool)>> = mine.clone().map(|_| Vec::new()).collect();
    let mut outgoing: Vec<Vec<Pair>> = mine.clone().map(|_| Vec::new()).collect();
    let mut boundary_cells = 0;
    let (mut tag, mut last_peer) = (0i32, usize::MAX);
    for ((peer, from, to), set) in into.iter() {
        (tag, last_peer) = if *peer == last_peer { (tag + 1, last_peer) } else { (1, *peer) };
        let lower = patches.colour(*from) < patches.colour(*to);
        let pair = Pair { from: *from, peer: *peer, tag, cells: set.iter().copied().collect() };
        incoming[slot(*to)].push((pair, lower));
    }
    let (mut tag, mut last_peer) = (0i32, usize::MAX);
    for ((peer, from, _to), set) in out_of.iter() {
        (tag, last_peer) = if *peer == last_peer { (tag + 1, last_peer) } else { (1, *peer) };
        boundary_cells += set.len();
        outgoing[slot(*from)].push(Pair {
            from: *from,
            peer: *peer,
            tag,
            cells: set.iter().copied().collect(),
        });
    }
    let most = into.len().max(out_of.len());
    if most > max_tag as usize {
        return Err(format!(
            "{most} pairs of patches across one cut, more than MPI's largest tag ({max_tag})"
        ));
    }
    let local =
        mine.clone().map(|p| patches.patch(p).neighbours().filter(|q| mine.contains(q)).collect()).collect();
    Ok(Partition { cells, mine, incoming, outgoing, local, pairs: into.len() + out_of.len(), boundary_cells })
}

/// How far a patch may run ahead of the global count of complete sweeps (as in `elite-grid`'s
/// `active` solver): it runs sweep `k + 1` only once sweep `k + 1 - LAG` is complete on every
/// rank, and every patch runs sweeps `1..=S + LAG - 1`, `S` the first sweep whose global largest
/// change is within the tolerance.
const LAG: u64 = elite_grid::active::LAG;

/// Sweeps whose local counts may be open at once (see `Rank::finish`).
const SLOTS: usize = LAG as usize + 1;

/// No sweep within the tolerance yet.
const NOT_YET: u64 = u64::MAX;

/// A patch of this rank: its count of local signals still missing, and its doorbell.
struct Local {
    missing: AtomicU32,
    ready: Semaphore,
}

/// Sweep `k`'s count on this rank, in slot `k % SLOTS`.
struct Slot {
    done: AtomicU32,
    /// The largest change so far, as the bits of a non-negative `f64` (ordered like the numbers).
    drift: AtomicU64,
    /// Released by the patch whose finish completes the count.
    complete: Semaphore,
}

/// What the ULTs of one rank share during a solve.
struct Rank {
    world: World,
    patches: Arc<Patches>,
    part: Arc<Partition>,
    values: Values,
    locals: Box<[Local]>,
    slots: [Slot; SLOTS],
    /// The newest sweep complete on every rank.
    complete: AtomicU64,
    /// `S`, or `NOT_YET`.
    converged: AtomicU64,
    /// Whether `S` was forced by `--max-sweeps`.
    gave_up: AtomicBool,
    gate: Mutex<()>,
    opened: Condvar,
    tolerance: f64,
    max_sweeps: u64,
    messages: AtomicU64,
}

/// An MPI failure inside the solve's ULTs: a bug or a broken job, not user input. The panic ends
/// the whole job with its report (`MPI_Abort`, elite-mpi's default for a panicking ULT).
fn must<T>(r: Result<T, elite_mpi::Error>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("adaptive_grid_mpi: {what}: {e}"),
    }
}

impl Rank {
    /// Patch `p` of this rank finished sweep `k` with largest change `drift`: the patch whose
    /// count completes the sweep on this rank hands it to the coordinator. Slot `k % SLOTS` is
    /// free again by then: the coordinator resets it before it publishes sweep `k` complete, and
    /// no patch runs sweep `k + SLOTS` before sweep `k + 1` is complete (the gate).
    fn finish(&self, k: u64, drift: f64) {
        let slot = &self.slots[(k % SLOTS as u64) as usize];
        slot.drift.fetch_max(drift.to_bits(), Ordering::AcqRel);
        if slot.done.fetch_add(1, Ordering::AcqRel) as usize + 1 == self.part.mine.len() {
            slot.complete.release();
        }
    }

    /// The coordinator ULT: for sweep 1, 2, ... in order, waits until this rank's patches all
    /// finished it, all-reduces (max) the ranks' largest changes of it, and publishes it complete
    /// and, when within the tolerance, converged. Every rank reduces the same sweeps in the same
    /// order and so decides the same `S`; it stops after publishing `S`.
    fn coordinate(&self) {
        let mut k = 0u64;
        loop {
            k += 1;
            let slot = &self.slots[(k % SLOTS as u64) as usize];
            if !self.part.mine.is_empty() {
                slot.complete.acquire();
            }
            let mine = f64::from_bits(slot.drift.swap(0, Ordering::AcqRel));
            slot.done.store(0, Ordering::Release);
            let mut global = [0.0f64];
            must(self.world.all_reduce(&[mine], &mut global, Op::max()), "all_reduce of a sweep's change");
            let done = global[0] <= self.tolerance || k >= self.max_sweeps;
            if done {
                self.gave_up.store(global[0] > self.tolerance, Ordering::Relaxed);
                self.converged.store(k, Ordering::Release);
            }
            {
                let _gate = self.gate.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                self.complete.store(k, Ordering::Release);
            }
            self.opened.notify_all();
            if done {
                return;
            }
        }
    }

    /// Waits until sweep `k` is complete on every rank.
    fn wait_complete(&self, k: u64) {
        if self.complete.load(Ordering::Acquire) >= k {
            return;
        }
        let mut gate = self.gate.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while self.complete.load(Ordering::Acquire) < k {
            gate = self.opened.wait(gate).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Receives pair `pair`'s next message into `buf` (the pair's buffer, reused) and, with
    /// `write`, writes its cells into this rank's copy.
    fn receive(&self, pair: &Pair, buf: &mut Vec<f64>, write: bool) {
        let (v, status) = must(
            self.world.irecv_into(std::mem::take(buf), pair.peer, pair.tag).and_then(|r| r.wait()),
            "receiving boundary cells",
        );
        assert_eq!(status.count(), pair.cells.len(), "patch {} sent the wrong number of cells", pair.from);
        if write {
            for (&i, &x) in pair.cells.iter().zip(&v) {
                self.values.set(i, x);
            }
        }
        *buf = v;
    }

    /// The life of patch `p`'s ULT: the dataflow of `elite-grid`'s `active` solver, with the
    /// neighbours on other ranks signalled by messages.
    fn run_patch(&self, p: usize) -> u64 {
        let me = p - self.part.mine.start;
        let patch = self.patches.patch(p);
        let local = &self.locals[me];
        let neighbours = &self.part.local[me];
        let incoming = &self.part.incoming[me];
        let outgoing = &self.part.outgoing[me];
        let degree = neighbours.len() as u32;
        // One send in flight per outgoing pair; its buffer comes back for the next.
        let mut sends: Vec<Option<elite_mpi::Request<Vec<f64>>>> = outgoing.iter().map(|_| None).collect();
        let mut spare: Vec<Vec<f64>> = outgoing.iter().map(|o| Vec::with_capacity(o.cells.len())).collect();
        let mut inbox: Vec<Vec<f64>> =
            incoming.iter().map(|(i, _)| Vec::with_capacity(i.cells.len())).collect();
        let mut sent = 0u64;
        let mut k = 0u64;
        loop {
            // Sweep `k + 1` reads: this rank's neighbours (their signals), and the other ranks'
            // (their messages; a higher-coloured sender's initial values for sweep 1).
            if (k == 0 || degree > 0) && !local.ready.try_acquire() {
                local.ready.acquire();
            }
            for ((pair, lower), buf) in incoming.iter().zip(&mut inbox) {
                if *lower || k > 0 {
                    self.receive(pair, buf, true);
                }
            }
            k += 1;
            // Every local signal for sweep `k + 1` comes after this sweep's own signals below.
            local.missing.store(degree, Ordering::Relaxed);
            let drift = patch.relax(&self.values);
            for &q in neighbours {
                let state = &self.locals[q - self.part.mine.start];
                if state.missing.fetch_sub(1, Ordering::AcqRel) == 1 {
                    state.ready.release();
                }
            }
            for (i, pair) in outgoing.iter().enumerate() {
                let mut buf = match sends[i].take() {
                    Some(r) => must(r.wait(), "sending boundary cells"),
                    None => std::mem::take(&mut spare[i]),
                };
                buf.clear();
                buf.extend(pair.cells.iter().map(|&c| self.values.get(c)));
                sends[i] = Some(must(self.world.isend(buf, pair.peer, pair.tag), "sending boundary cells"));
                sent += 1;
            }
            self.finish(k, drift);
            // Sweep `k + 1` runs unless `S` is at most `k + 1 - LAG`: the last sweep is
            // `S + LAG - 1`.
            if let Some(decisive) = (k + 1).checked_sub(LAG).filter(|&d| d > 0) {
                self.wait_complete(decisive);
                if self.converged.load(Ordering::Acquire) <= decisive {
                    break;
                }
            }
        }
        // The higher-coloured senders' last sweep is not read: take its message off the wire,
        // so that the next solve's messages match theirs.
        for ((pair, lower), buf) in incoming.iter().zip(&mut inbox) {
            if !*lower {
                self.receive(pair, buf, false);
            }
        }
        for r in sends.into_iter().flatten() {
            must(r.wait(), "sending boundary cells");
        }
        self.messages.fetch_add(sent, Ordering::Relaxed);
        k
    }
}

/// The outcome of one solve on this rank.
struct Solved {
    sweeps: u64,
    elapsed: Duration,
    messages: u64,
    gave_up: bool,
}

/// Runs the dataflow solve on this rank's patches, as ULTs of the calling ULT's runtime, until
/// every patch ran `S + LAG - 1` sweeps; returns this rank's values with the outcome.
fn solve(
    world: &World,
    patches: &Arc<Patches>,
    part: &Arc<Partition>,
    cells: usize,
    tolerance: f64,
    max_sweeps: u64,
) -> (Solved, Arc<Rank>) {
    let locals: Box<[Local]> = part
        .mine
        .clone()
        .map(|p| {
            let lower = part.local[p - part.mine.start]
                .iter()
                .filter(|&&q| patches.colour(q) < patches.colour(p))
                .count();
            // No lower-coloured neighbour on this rank: sweep 1 needs no local signal.
            Local { missing: AtomicU32::new(lower as u32), ready: Semaphore::new(usize::from(lower == 0)) }
        })
        .collect();
    let rank = Arc::new(Rank {
        world: world.clone(),
        patches: patches.clone(),
        part: part.clone(),
        values: Values::new(&vec![0.0; cells]),
        locals,
        slots: std::array::from_fn(|_| Slot {
            done: AtomicU32::new(0),
            drift: AtomicU64::new(0),
            complete: Semaphore::new(0),
        }),
        complete: AtomicU64::new(0),
        converged: AtomicU64::new(NOT_YET),
        gave_up: AtomicBool::new(false),
        gate: Mutex::new(()),
        opened: Condvar::new(),
        tolerance,
        max_sweeps,
        messages: AtomicU64::new(0),
    });
    must(world.barrier(), "barrier before the solve");
    let start = Instant::now();
    let coordinator = {
        let rank = rank.clone();
        elite_rt::spawn(move || rank.coordinate())
    };
    let ults: Vec<_> = part
        .mine
        .clone()
        .map(|p| {
            let rank = rank.clone();
            elite_rt::spawn(move || rank.run_patch(p))
        })
        .collect();
    let mut sweeps = 0;
    for h in ults {
        sweeps = h.join().unwrap_or_else(|_| panic!("adaptive_grid_mpi: a patch's ULT panicked"));
    }
    coordinator.join().unwrap_or_else(|_| panic!("adaptive_grid_mpi: the coordinator panicked"));
    let elapsed = start.elapsed();
    let converged = rank.converged.load(Ordering::Acquire);
    if part.mine.is_empty() {
        sweeps = converged + LAG - 1;
    }
    let solved = Solved {
        sweeps,
        elapsed,
        messages: rank.messages.load(Ordering::Relaxed),
        gave_up: rank.gave_up.load(Ordering::Relaxed),
    };
    (solved, rank)
}

/// The same multicolour sweeps on one process, for `sweeps` sweeps: the reference.
fn sweep_alone(problem: &Problem, patches: &Patches, sweeps: u64) -> Vec<f64> {
    let values = Values::new(&vec![0.0; problem.len()]);
    let mut by_colour = vec![Vec::new(); patches.colours()];
    for p in 0..patches.count() {
        by_colour[patches.colour(p)].push(p);
    }
    for _ in 0..sweeps {
        for colour in &by_colour {
            for &p in colour {
                patches.patch(p).relax(&values);
            }
        }
    }
    values.to_vec()
}

/// The document's `machine` object (`docs/bench-json.md`).
fn machine() -> serde_json::Value {
    let topology = elite_affinity::Topology::detect();
    let cache_of_level = |level: u8| topology.caches_of(0).find(|c| c.level == level).map(|c| c.size);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(|| "unknown".to_string(), |(_, m)| m.trim().to_string());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".to_string(), |k| k.trim().to_string());
    json!({
        "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "cpu_model": model,
        "kernel": kernel,
        "l2_bytes": cache_of_level(2),
        "l3_bytes": cache_of_level(3),
        "pmu": elite_affinity::HardwareSource::open(elite_affinity::CounterEvent::CacheMisses).is_ok(),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `--boundaries N`: the partition into `N` ranks, rank by rank, and the largest and mean
/// figures (no MPI: the partition is computed for each rank in turn).
fn print_boundaries(a: &Args, ranks: usize) -> ExitCode {
    let problem = match (Model { level: a.level }).problem() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("adaptive_grid_mpi: --level {}: {e}", a.level);
            return ExitCode::from(2);
        }
    };
    let patches = Patches::new(&problem, a.patch);
    let mut rows = Vec::new();
    for r in 0..ranks {
        let part = match partition(&problem, &patches, r, ranks, i32::MAX) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("adaptive_grid_mpi: {e}");
                return ExitCode::FAILURE;
            }
        };
        let sent: usize = part.outgoing.iter().map(Vec::len).sum();
        let peers: BTreeSet<usize> = part.outgoing.iter().flatten().map(|p| p.peer).collect();
        let cells = part.cells[r + 1] - part.cells[r];
        rows.push((cells, part.mine.len(), sent, part.boundary_cells, peers.len()));
    }
    let max = |f: fn(&(usize, usize, usize, usize, usize)) -> usize| rows.iter().map(f).max().unwrap_or(0);
    let mean = |f: fn(&(usize, usize, usize, usize, usize)) -> usize| {
        rows.iter().map(f).sum::<usize>() as f64 / ranks.max(1) as f64
    };
    println!(
        "level {}, {} cells, {} patches of {}, {ranks} ranks: per rank (largest / mean): cells {} / {:.0}, \
         patches {} / {:.1}, messages sent per sweep {} / {:.1}, boundary cells sent per sweep {} / {:.1}, \
         neighbouring ranks {} / {:.1}",
        a.level,
        problem.len(),
        patches.count(),
        patches.size(),
        max(|r| r.0),
        mean(|r| r.0),
        max(|r| r.1),
        mean(|r| r.1),
        max(|r| r.2),
        mean(|r| r.2),
        max(|r| r.3),
        mean(|r| r.3),
        max(|r| r.4),
        mean(|r| r.4),
    );
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let a = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            // The help (exit 0), or what was wrong with which flag and the usage line (exit 2).
            let _ = e.print();
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    if let Some(ranks) = a.boundaries {
        return print_boundaries(&a, ranks);
    }
    let mpi = match elite_mpi::init(elite_rt::Runtime::builder().processors(a.processors)) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("adaptive_grid_mpi: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (rank, size) = (mpi.rank(), mpi.size());
    let problem = match (Model { level: a.level }).problem() {
        Ok(p) => Arc::new(p),
        Err(e) => {
            eprintln!("adaptive_grid_mpi: --level {}: {e}", a.level);
            return ExitCode::from(2);
        }
    };
    let patches = Arc::new(Patches::new(&problem, a.patch));
    let part = match partition(&problem, &patches, rank, size, mpi.world().max_tag()) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            eprintln!("adaptive_grid_mpi: rank {rank}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let world = mpi.world();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..a.runs {
        let (w, p, pt) = (world.clone(), patches.clone(), part.clone());
        let (cells, tol, max) = (problem.len(), a.tolerance, a.max_sweeps);
        let (s, r) = mpi.block_on(move || solve(&w, &p, &pt, cells, tol, max));
        times.push(s.elapsed.as_secs_f64());
        last = Some((s, r));
    }
    let (solved, solved_rank) = last.expect("at least one run");
    let values = &solved_rank.values;
    // Gather the owned ranges on rank 0.
    let (lo, hi) = (part.cells[rank], part.cells[rank + 1]);
    let mine: Vec<f64> = (lo..hi).map(|i| values.get(i)).collect();
    let (w, pt) = (world.clone(), part.clone());
    let gathered = mpi.block_on(move || -> Result<Option<Vec<f64>>, String> {
        if rank != 0 {
            w.send_slice(&mine, 0, GATHER_TAG).map_err(|e| e.to_string())?;
            return Ok(None);
        }
        let mut all = vec![0.0f64; *pt.cells.last().unwrap_or(&0)];
        all[lo..hi].copy_from_slice(&mine);
        for r in 1..w.size() {
            let (a, b) = (pt.cells[r], pt.cells[r + 1]);
            w.recv_into(&mut all[a..b], r, GATHER_TAG).map_err(|e| e.to_string())?;
        }
        Ok(Some(all))
    });
    let all = match gathered {
        Ok(Some(all)) => all,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("adaptive_grid_mpi: gathering: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The one-machine check (elite-grid's experiments): residual and error within the bounds.
    let residual = problem.residual(&all);
    let residual_bound = problem.residual_bound(a.tolerance);
    let error = problem.error(&all);
    let error_bound = problem.inverse_norm_bound().map_or(f64::INFINITY, |n| n * residual_bound);
    let reference = sweep_alone(&problem, &patches, solved.sweeps);
    let same = reference.iter().zip(&all).all(|(x, y)| x.to_bits() == y.to_bits());
    let ok = residual <= residual_bound && error <= error_bound && same && !solved.gave_up;
    let solve_s = median(times.clone());
    println!(
        "adaptive_grid_mpi: {size} rank(s) x {} processor(s), level {}, {} cells, {} patches ({} colours), \
         {} sweeps, rank 0: {} cross-rank pairs of patches, {} boundary cells sent per sweep, \
         {} messages, solve {:.3} s (median of {}), residual {:.3e} (bound {:.3e}), \
         error {:.3e} (bound {:.3e}), same as one process: {same}: {}",
        a.processors,
        a.level,
        problem.len(),
        patches.count(),
        patches.colours(),
        solved.sweeps,
        part.pairs,
        part.boundary_cells,
        solved.messages,
        solve_s,
        times.len(),
        residual,
        residual_bound,
        error,
        error_bound,
        if ok { "ok" } else { "WRONG" }
    );
    if let Some(path) = &a.json {
        let (min, max) = times.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
        let doc = json!({
            "suite": "mpi",
            "machine": machine(),
            "results": [{
                "bench": "adaptive_grid_mpi", "system": "elite-mpi", "metric": "solve_s",
                "runs": times.len(), "ok": ok, "median": solve_s, "min": min, "max": max,
                "params": { "ranks": size, "processors": a.processors, "level": a.level,
                    "patch": patches.size(), "cells": problem.len(), "tolerance": a.tolerance,
                    "sweeps": solved.sweeps, "residual": residual, "residual_bound": residual_bound,
                    "error": error, "error_bound": error_bound, "same_as_one_process": same,
                    "rank0_pairs": part.pairs, "rank0_boundary_cells": part.boundary_cells,
                    "rank0_messages": solved.messages },
            }],
        });
        if let Err(e) = std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap_or_default()) {
            eprintln!("adaptive_grid_mpi: writing {path}: {e}");
            return ExitCode::FAILURE;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
