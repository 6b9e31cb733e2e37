//! How the solver's data lies in memory: the shared unknowns, and one contiguous block per patch.
//!
//! A *patch* is a run of `size` consecutive cells in Morton order (the last one may be shorter):
//! a compact piece of the mesh, relaxed by one ULT.
//!
//! * [`Values`]: the unknowns, shared by the ULTs (or rayon's threads) of every patch. The
//!   solvers order a patch's writes before its neighbours' reads themselves (see
//!   `crate::active`), but the type does not rely on it: each value is an `f64` kept as bits in an
//!   `AtomicU64`, read and written with relaxed loads and stores, the same plain moves as an `f64`
//!   array on x86-64 or AArch64. [`Patch::relax`] reads them through one flat slice, the
//!   neighbours' without bounds checks (every column is checked when the blocks are laid out).
//!   They are laid out in cache lines of 8, 64-byte aligned, so patches of a multiple of 8 cells
//!   never share a line.
//! * [`Patches`]: everything else a patch's ULT reads, in *one block of words per patch*, the
//!   blocks in patch order: first the patches to wake (its neighbours, two `u32` to a word),
//!   then per cell its right-hand side, the inverse of its diagonal entry, the number of its
//!   couplings and one word per coupling holding `j` (low half) and `a_ij` (an `f32`, high half):
//!   about 60 bytes per cell. One block is what ELiTE's application interface (section 2.3.5)
//!   declares as a thread's data, and what a waker can prefetch before the thread runs.
//! * The colouring ([`Patches::colour`]): greedy in patch order, so that no two neighbouring
//!   patches share a colour; the multicolour sweeps of `crate::active` and `crate::rayon_peer`
//!   relax the colours in turn.
//!
//! Morton order keeps the cells a patch couples to mostly inside the patch or in the patches next
//! to it in memory, so a relaxation touches few lines besides its own.

use crate::matrix::Problem;
use std::sync::atomic::{AtomicU64, Ordering};

/// Unknowns per cache line of [`Values`].
pub const LINE_VALUES: usize = 8;

/// Most cells a patch may have (a sweep keeps nothing per cell on the stack, so the bound only
/// keeps a patch's block, about 60 bytes per cell, a few hundred KiB at most).
pub const MAX_PATCH: usize = 4096;

/// One cache line of unknowns.
#[repr(align(64))]
struct Line([AtomicU64; LINE_VALUES]);

// `Values::atomics` views the lines as one slice of `AtomicU64`: no padding between them.
const _: () = assert!(std::mem::size_of::<Line>() == LINE_VALUES * std::mem::size_of::<AtomicU64>());

/// The unknowns, shared by every ULT: `f64` bits in relaxed atomics, 8 to a cache line.
pub struct Values {
    lines: Box<[Line]>,
    len: usize,
}

impl Values {
    /// Unknowns holding `init`.
    pub fn new(init: &[f64]) -> Values {
        let lines = init
            .chunks(LINE_VALUES)
            .map(|chunk| {
                let line = Line(Default::default());
                for (slot, v) in line.0.iter().zip(chunk) {
                    slot.store(v.to_bits(), Ordering::Relaxed);
                }
                line
            })
            .collect();
        Values { lines, len: init.len() }
    }

    /// Number of unknowns.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The unknowns as one slice (`len()` of them; the last line's spare slots are left out).
    #[inline]
    pub fn atomics(&self) -> &[AtomicU64] {
        // SAFETY: `lines` is one allocation of `lines.len()` `Line`s, each exactly
        // `LINE_VALUES` `AtomicU64`s with no padding (checked at compile time above), so it holds
        // `lines.len() * LINE_VALUES >= len` initialized `AtomicU64`s in a row, borrowed from
        // `self` for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<AtomicU64>(), self.len) }
    }

    /// Unknown `i` (a relaxed load: the latest value this thread may see).
    #[inline]
    pub fn get(&self, i: usize) -> f64 {
        f64::from_bits(self.atomics()[i].load(Ordering::Relaxed))
    }

    /// Sets unknown `i` (a relaxed store; only the patch owning `i` writes it).
    #[inline]
    pub fn set(&self, i: usize, v: f64) {
        self.atomics()[i].store(v.to_bits(), Ordering::Relaxed);
    }

    /// A copy of all unknowns.
    pub fn to_vec(&self) -> Vec<f64> {
        (0..self.len).map(|i| self.get(i)).collect()
    }
}

/// The static data of every patch, one contiguous block of words each (see the module docs),
/// and a colouring of the patches: no two neighbouring patches have the same colour.
#[derive(Clone, Debug)]
pub struct Patches {
    size: usize,
    cells: usize,
    words: Vec<u64>,
    /// `block_start[p]..block_start[p + 1]` is patch `p`'s block.
    block_start: Vec<usize>,
    /// Each patch's colour, `0..colours`.
    colour: Vec<u32>,
    /// Number of colours.
    colours: usize,
}

/// Packs `u32`s two to a word.
fn pack(ids: &[u32], out: &mut Vec<u64>) {
    for pair in ids.chunks(2) {
        out.push(pair[0] as u64 | (pair.get(1).copied().unwrap_or(0) as u64) << 32);
    }
}

/// The `k`-th `u32` of words packed by [`pack`].
#[inline]
fn unpack(words: &[u64], k: usize) -> usize {
    (words[k / 2] >> (32 * (k % 2))) as u32 as usize
}

impl Patches {
    /// Splits `problem`'s cells into patches of `size` consecutive cells (`1..=MAX_PATCH`) and
    /// lays out their blocks.
    ///
    /// # Panics
    /// If `size` is out of range (callers validate it first, see `SolveOptions`).
    pub fn new(problem: &Problem, size: usize) -> Patches {
        assert!((1..=MAX_PATCH).contains(&size), "patch size {size} out of 1..={MAX_PATCH}");
        let n = problem.len();
        let m = &problem.matrix;
        let count = n.div_ceil(size);
        let mut words = Vec::with_capacity(n * 8 + count * 5);
        let mut block_start = Vec::with_capacity(count + 1);
        let mut ids = Vec::new();
        for p in 0..count {
            block_start.push(words.len());
            let cells = p * size..((p + 1) * size).min(n);
            // The patches to wake: those owning a cell coupled to one of ours, not ourselves.
            ids.clear();
            ids.extend(cells.clone().flat_map(|i| m.row(i)).map(|(j, _)| (j / size) as u32));
            ids.sort_unstable();
            ids.dedup();
            ids.retain(|&q| q as usize != p);
            words.push(ids.len() as u64);
            pack(&ids, &mut words);
            for i in cells {
                words.push(problem.rhs[i].to_bits());
                words.push((1.0 / m.diag(i)).to_bits());
                words.push(m.row(i).count() as u64);
                // `a_ij` is an `f32` value already (see `crate::matrix`): the cast is exact.
                // Every column is below `n`: `Patch::relax` reads the unknowns unchecked on that.
                assert!(m.row(i).all(|(j, _)| j < n), "row {i} couples to a cell out of range");
                words.extend(m.row(i).map(|(j, a)| j as u64 | ((a as f32).to_bits() as u64) << 32));
            }
        }
        block_start.push(words.len());
        let mut patches = Patches { size, cells: n, words, block_start, colour: Vec::new(), colours: 0 };
        patches.colour = greedy_colouring(&patches);
        patches.colours = patches.colour.iter().max().map_or(0, |&c| c as usize + 1);
        patches
    }

    /// Patch `p`'s colour (`0..colours()`); neighbouring patches differ.
    pub fn colour(&self, p: usize) -> usize {
        self.colour[p] as usize
    }

    /// Number of colours.
    pub fn colours(&self) -> usize {
        self.colours
    }

    /// The neighbours of patch `p` with a smaller colour: the patches whose sweep `k` comes before
    /// `p`'s in a multicolour sweep.
    pub fn lower_neighbours(&self, p: usize) -> usize {
        self.patch(p).neighbours().filter(|&q| self.colour[q] < self.colour[p]).count()
    }

    /// Number of patches.
    pub fn count(&self) -> usize {
        self.block_start.len() - 1
    }

    /// Cells per patch (the last patch may have fewer).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Patch `p`.
    pub fn patch(&self, p: usize) -> Patch<'_> {
        let block = &self.words[self.block_start[p]..self.block_start[p + 1]];
        let first = p * self.size;
        let len = self.size.min(self.cells - first);
        let wake = block[0] as usize;
        Patch { first, len, cells: self.cells, wake, rows_at: 1 + wake.div_ceil(2), block }
    }

    /// Bytes of all blocks.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// Colours the patches greedily in order: each takes the smallest colour none of its
/// lower-numbered neighbours has (at most one more colour than the largest neighbour count).
fn greedy_colouring(patches: &Patches) -> Vec<u32> {
    let mut colour: Vec<u32> = Vec::with_capacity(patches.count());
    let mut taken = Vec::new();
    for p in 0..patches.count() {
        taken.clear();
        taken.extend(patches.patch(p).neighbours().filter(|&q| q < p).map(|q| colour[q]));
        let c = (0..).find(|c| !taken.contains(c)).unwrap_or(0);
        colour.push(c);
    }
    colour
}

/// One patch: its cells `first..first + len` and its block.
#[derive(Clone, Copy, Debug)]
pub struct Patch<'a> {
    first: usize,
    len: usize,
    /// Cells of the whole problem: every column in the block is below it.
    cells: usize,
    wake: usize,
    rows_at: usize,
    block: &'a [u64],
}

impl<'a> Patch<'a> {
    /// The first cell.
    pub fn first(&self) -> usize {
        self.first
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the patch has no cells (never true).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The patch's data block: what a ULT relaxing it reads besides the unknowns.
    pub fn block(&self) -> &'a [u64] {
        self.block
    }

    /// The patches to wake when this one changed.
    pub fn neighbours(&self) -> impl Iterator<Item = usize> + 'a {
        let block = self.block;
        (0..self.wake).map(move |k| unpack(&block[1..], k))
    }

    /// One Gauss-Seidel sweep over the patch's cells in order: `u_i = (b_i + Σ a_ij u_j) / a_ii`
    /// with the current values of all `u_j`, written to `values`. Returns the largest change,
    /// `max_i |new u_i - old u_i|`.
    ///
    /// # Panics
    /// If `values` has fewer unknowns than the problem the patches were made from.
    #[inline]
    pub fn relax(&self, values: &Values) -> f64 {
        let u = values.atomics();
        assert!(u.len() >= self.cells, "{} unknowns for a problem of {} cells", u.len(), self.cells);
        let mut rest = &self.block[self.rows_at..];
        let mut drift = 0.0f64;
        for i in self.first..self.first + self.len {
            let (head, tail) = rest.split_at(3);
            let (couplings, tail) = tail.split_at(head[2] as usize);
            rest = tail;
            let mut sum = f64::from_bits(head[0]);
            for &w in couplings {
                let j = w as u32 as usize;
                // SAFETY: `Patches::new` stored only columns below the problem's cell count
                // (asserted there), and `u` has at least that many unknowns (asserted above).
                let uj = unsafe { u.get_unchecked(j) }.load(Ordering::Relaxed);
                sum += f32::from_bits((w >> 32) as u32) as f64 * f64::from_bits(uj);
            }
            let new = sum * f64::from_bits(head[1]);
            // A load and a store, not a swap: only this patch writes `u_i` (a swap is a locked
            // instruction on x86-64).
            let old = f64::from_bits(u[i].load(Ordering::Relaxed));
            u[i].store(new.to_bits(), Ordering::Relaxed);
            drift = drift.max((new - old).abs());
        }
        drift
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Layer;
    use crate::quadtree::{Feature, Quadtree, Refinement};

    fn problem() -> Problem {
        let tree = Quadtree::build(&Refinement {
            base_level: 2,
            max_level: 7,
            feature: Feature::Circle { cx: 0.5, cy: 0.5, r: 0.3 },
            band: 1.0,
            halo: 0.0,
        })
        .unwrap();
        let layer = Layer { cx: 0.5, cy: 0.5, r: 0.3, width: 0.05 };
        Problem::manufactured(tree, 100.0, |x, y| layer.value(x, y))
    }

    #[test]
    fn values_round_trip_and_lines_are_aligned() {
        let init: Vec<f64> = (0..21).map(|i| i as f64 * 0.5 - 3.0).collect();
        let v = Values::new(&init);
        assert_eq!(v.len(), 21);
        assert_eq!(v.to_vec(), init);
        v.set(20, -0.0);
        assert_eq!(v.get(20).to_bits(), (-0.0f64).to_bits());
        assert_eq!(v.lines.as_ptr() as usize % 64, 0);
        assert_eq!(std::mem::size_of::<Line>(), 64);
    }

    /// A sweep over all patches in order is exactly a sequential Gauss-Seidel sweep.
    #[test]
    fn patch_sweeps_are_gauss_seidel_sweeps() {
        let p = problem();
        for size in [1, 3, 8, 64] {
            let patches = Patches::new(&p, size);
            assert_eq!(patches.count(), p.len().div_ceil(size));
            let values = Values::new(&vec![0.0; p.len()]);
            let mut reference = vec![0.0; p.len()];
            for _ in 0..3 {
                let mut covered = 0;
                for q in 0..patches.count() {
                    let patch = patches.patch(q);
                    assert_eq!(patch.first(), covered);
                    covered += patch.len();
                    patch.relax(&values);
                }
                assert_eq!(covered, p.len());
                p.gauss_seidel(&mut reference, 0.0, 1);
            }
            let got = values.to_vec();
            for (a, b) in got.iter().zip(&reference) {
                assert!((a - b).abs() <= 1e-14 * b.abs().max(1.0), "size {size}: {a} != {b}");
            }
        }
    }

    #[test]
    fn neighbour_patches_are_exactly_the_coupled_ones() {
        let p = problem();
        let patches = Patches::new(&p, 8);
        for q in 0..patches.count() {
            let patch = patches.patch(q);
            let got: Vec<usize> = patch.neighbours().collect();
            let mut want: Vec<usize> = (patch.first()..patch.first() + patch.len())
                .flat_map(|i| p.matrix.row(i).map(|(j, _)| j / 8))
                .filter(|&r| r != q)
                .collect();
            want.sort_unstable();
            want.dedup();
            assert_eq!(got, want, "patch {q}");
            // Symmetric: whoever we wake wakes us.
            for r in got {
                assert!(patches.patch(r).neighbours().any(|s| s == q));
            }
        }
    }

    #[test]
    fn relax_reports_the_largest_change() {
        let p = problem();
        let patches = Patches::new(&p, 4);
        let values = Values::new(&p.exact);
        let patch = patches.patch(patches.count() / 2);
        // At the solution a sweep changes (almost) nothing.
        assert!(patch.relax(&values) < 1e-12);
        // Moved by 0.25 (its neighbours not), the first cell comes back by that much.
        let i = patch.first();
        values.set(i, p.exact[i] + 0.25);
        let drift = patch.relax(&values);
        assert!((drift - 0.25).abs() < 1e-12, "drift {drift}");
        assert!((values.get(i) - p.exact[i]).abs() < 1e-12);
    }

    /// Neighbouring patches never share a colour, and the lower neighbours are counted right.
    #[test]
    fn the_colouring_separates_neighbours() {
        let p = problem();
        for size in [1, 8, 64] {
            let patches = Patches::new(&p, size);
            assert!(patches.colours() >= 2 && patches.colours() <= 12, "size {size}: {}", patches.colours());
            for q in 0..patches.count() {
                assert!(patches.colour(q) < patches.colours());
                let mut lower = 0;
                for r in patches.patch(q).neighbours() {
                    assert_ne!(patches.colour(q), patches.colour(r), "size {size}: patches {q} and {r}");
                    lower += usize::from(patches.colour(r) < patches.colour(q));
                }
                assert_eq!(patches.lower_neighbours(q), lower);
            }
        }
    }
}
