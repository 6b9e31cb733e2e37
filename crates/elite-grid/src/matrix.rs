//! The discrete Poisson problem: cell-centred finite volumes on a [`Quadtree`].
//!
//! For `-Δu = f` on the unit square with `u = 0` on its boundary, the flux through a face between
//! leaves `i` and `j` is approximated by the two-point formula `a_ij (u_i - u_j)` with
//! `a_ij = |face| / |c_i - c_j|` (face length over the distance between the cell centres; the face
//! is the side of the smaller cell). A boundary face of a cell of side `h` contributes
//! `h / (h/2) = 2` times `u_i` (the boundary value 0 sits at the face's midpoint, `h/2` away). Row
//! `i` of `A` is `a_ii = Σ_j a_ij + 2 · (boundary faces)` on the diagonal and `-a_ij` off it
//! (each `a_ij` rounded to the nearest `f32`, which changes nothing below but lets the solver
//! store a coupling and its column in one word):
//! symmetric, with positive diagonal, non-positive off-diagonals, weakly diagonally dominant and
//! strictly so on boundary rows, irreducible: an M-matrix, for which Gauss-Seidel converges from
//! any start in any order of the unknowns (the multicolour order of `crate::active` included).
//!
//! The right-hand side is manufactured, `b = A u*` for a chosen `u*`, so the discrete solution
//! is `u*` at the cell centres exactly and a solver's error can be measured against it.

use crate::quadtree::{Across, Dir, Quadtree};

/// A sparse symmetric matrix in compressed rows, kept as the diagonal plus the off-diagonal
/// couplings `a_ij > 0` (the entries are `-a_ij`).
#[derive(Clone, Debug)]
pub struct Matrix {
    diag: Vec<f64>,
    row_start: Vec<u32>,
    cols: Vec<u32>,
    coefs: Vec<f64>,
}

impl Matrix {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.diag.len()
    }

    /// Whether the matrix has no rows.
    pub fn is_empty(&self) -> bool {
        self.diag.is_empty()
    }

    /// The diagonal entry of row `i`.
    pub fn diag(&self, i: usize) -> f64 {
        self.diag[i]
    }

    /// Row `i`'s couplings: `(j, a_ij)` with `a_ij > 0`, the entry being `-a_ij`.
    pub fn row(&self, i: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let (s, e) = (self.row_start[i] as usize, self.row_start[i + 1] as usize);
        self.cols[s..e].iter().zip(&self.coefs[s..e]).map(|(&j, &a)| (j as usize, a))
    }

    /// Number of couplings (off-diagonal entries).
    pub fn couplings(&self) -> usize {
        self.cols.len()
    }

    /// `A x`.
    pub fn apply(&self, x: &[f64]) -> Vec<f64> {
        (0..self.len())
            .map(|i| self.diag[i] * x[i] - self.row(i).map(|(j, a)| a * x[j]).sum::<f64>())
            .collect()
    }

    /// Largest row sum of the couplings, `max_i Σ_j a_ij`.
    pub fn max_coupling_sum(&self) -> f64 {
        (0..self.len()).map(|i| self.row(i).map(|(_, a)| a).sum::<f64>()).fold(0.0, f64::max)
    }

    /// Assembles the finite-volume operator of `tree` (see the module docs).
    pub fn assemble(tree: &Quadtree, reaction: f64) -> Matrix {
        let leaves = tree.leaves();
        let mut m = Matrix {
            diag: Vec::with_capacity(leaves.len()),
            row_start: Vec::with_capacity(leaves.len() + 1),
            cols: Vec::with_capacity(leaves.len() * 5),
            coefs: Vec::with_capacity(leaves.len() * 5),
        };
        m.row_start.push(0);
        for (i, cell) in leaves.iter().enumerate() {
            let (cx, cy) = cell.centre();
            let h = cell.size();
            let mut diag = 0.0;
            let couple = |m: &mut Matrix, j: u32| {
                let other = leaves[j as usize];
                let face = h.min(other.size());
                let (ox, oy) = other.centre();
                // Rounded to `f32`, so a patch's block can store it in half a word (see
                // `crate::layout`); the matrix is still exactly symmetric.
                let a = (face / (cx - ox).hypot(cy - oy)) as f32 as f64;
                m.cols.push(j);
                m.coefs.push(a);
                a
            };
            for dir in Dir::ALL {
                diag += match tree.across(i, dir) {
                    Across::Boundary => 2.0,
                    Across::One(j) => couple(&mut m, j),
                    Across::Two(a, b) => couple(&mut m, a) + couple(&mut m, b),
                };
            }
            m.diag.push(diag + reaction * h * h);
            m.row_start.push(m.cols.len() as u32);
        }
        m
    }
}

/// A manufactured solution with a steep layer across a circle, vanishing on the boundary.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Layer {
    /// Centre of the circle, x.
    pub cx: f64,
    /// Centre of the circle, y.
    pub cy: f64,
    /// Radius of the circle.
    pub r: f64,
    /// Width of the layer.
    pub width: f64,
}

impl Layer {
    /// `u*(x, y) = 16 x(1-x) y(1-y) · (1 + tanh((r - |(x, y) - c|) / width)) / 2`: close to the
    /// bubble inside the circle, close to 0 outside, in `[0, 1]`.
    pub fn value(&self, x: f64, y: f64) -> f64 {
        let bubble = 16.0 * x * (1.0 - x) * y * (1.0 - y);
        let d = (x - self.cx).hypot(y - self.cy);
        bubble * 0.5 * (1.0 + ((self.r - d) / self.width).tanh())
    }
}

/// A linear system `A u = b` with its known solution `u*`.
#[derive(Clone, Debug)]
pub struct Problem {
    /// The mesh.
    pub tree: Quadtree,
    /// The operator.
    pub matrix: Matrix,
    /// The right-hand side, `A u*`.
    pub rhs: Vec<f64>,
    /// The solution, at the cell centres.
    pub exact: Vec<f64>,
}

impl Problem {
    /// The problem on `tree` whose solution is `solution` sampled at the cell centres.
    pub fn manufactured(tree: Quadtree, reaction: f64, solution: impl Fn(f64, f64) -> f64) -> Problem {
        let matrix = Matrix::assemble(&tree, reaction);
        let exact: Vec<f64> = tree
            .leaves()
            .iter()
            .map(|c| {
                let (x, y) = c.centre();
                solution(x, y)
            })
            .collect();
        let rhs = matrix.apply(&exact);
        Problem { tree, matrix, rhs, exact }
    }

    /// Number of unknowns.
    pub fn len(&self) -> usize {
        self.exact.len()
    }

    /// Whether there are no unknowns.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }

    /// `||b - A u||_inf`.
    pub fn residual(&self, u: &[f64]) -> f64 {
        let m = &self.matrix;
        (0..self.len())
            .map(|i| (self.rhs[i] - m.diag(i) * u[i] + m.row(i).map(|(j, a)| a * u[j]).sum::<f64>()).abs())
            .fold(0.0, f64::max)
    }

    /// `||u - u*||_inf`.
    pub fn error(&self, u: &[f64]) -> f64 {
        u.iter().zip(&self.exact).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max)
    }

    /// Gauss-Seidel in Morton order from `u`, sweeping until no unknown changes by more than
    /// `tolerance` in a sweep or `max_sweeps` sweeps are done. Returns the sweeps done.
    pub fn gauss_seidel(&self, u: &mut [f64], tolerance: f64, max_sweeps: usize) -> usize {
        let m = &self.matrix;
        for sweep in 1..=max_sweeps {
            let mut change = 0.0f64;
            for i in 0..self.len() {
                let new = (self.rhs[i] + m.row(i).map(|(j, a)| a * u[j]).sum::<f64>()) / m.diag(i);
                change = change.max((new - u[i]).abs());
                u[i] = new;
            }
            if change <= tolerance {
                return sweep;
            }
        }
        max_sweeps
    }

    /// The bound on `||b - A u||_inf` that a relaxation guarantees when every unknown's last
    /// update was computed from neighbour values within `2 · tolerance` of their final ones
    /// (the active-threads solver's termination guarantees that, see `crate::active`):
    /// `2 · tolerance · max_i Σ_j a_ij`, plus room for rounding.
    pub fn residual_bound(&self, tolerance: f64) -> f64 {
        2.0 * tolerance * self.matrix.max_coupling_sum() + 1e-14 * (1.0 + self.max_abs_rhs_scale())
    }

    /// A bound on `||A⁻¹||_inf` when `A` is strictly diagonally dominant:
    /// `1 / min_i (a_ii - Σ_j a_ij)`; `None` when some row is not strictly dominant.
    pub fn inverse_norm_bound(&self) -> Option<f64> {
        let m = &self.matrix;
        let margin = (0..self.len())
            .map(|i| m.diag(i) - m.row(i).map(|(_, a)| a).sum::<f64>())
            .fold(f64::INFINITY, f64::min);
        (margin > 0.0).then(|| 1.0 / margin)
    }

    /// A scale for rounding errors of a residual: `max_i (|b_i| + a_ii |u*_i|)`.
    fn max_abs_rhs_scale(&self) -> f64 {
        (0..self.len())
            .map(|i| self.rhs[i].abs() + self.matrix.diag(i) * self.exact[i].abs())
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quadtree::{Feature, Refinement};

    fn problem(max_level: u8) -> Problem {
        let tree = Quadtree::build(&Refinement {
            base_level: 2,
            max_level,
            feature: Feature::Circle { cx: 0.52, cy: 0.47, r: 0.3 },
            band: 1.0,
            halo: 0.0,
        })
        .unwrap();
        let layer = Layer { cx: 0.52, cy: 0.47, r: 0.3, width: 0.02 };
        Problem::manufactured(tree, 0.0, |x, y| layer.value(x, y))
    }

    #[test]
    fn assembly_is_a_symmetric_m_matrix() {
        let p = problem(8);
        let m = &p.matrix;
        let mut boundary_rows = 0;
        for i in 0..m.len() {
            let couplings: Vec<(usize, f64)> = m.row(i).collect();
            assert!((2..=8).contains(&couplings.len()), "row {i} has {} couplings", couplings.len());
            let sum: f64 = couplings.iter().map(|&(_, a)| a).sum();
            assert!(m.diag(i) > 0.0);
            // Weakly diagonally dominant everywhere, strictly on rows touching the boundary.
            assert!(m.diag(i) >= sum - 1e-12, "row {i}: diag {} < {sum}", m.diag(i));
            if m.diag(i) > sum + 1.0 {
                boundary_rows += 1;
            }
            for &(j, a) in &couplings {
                assert!(a > 0.0 && j != i);
                let back: Vec<f64> = m.row(j).filter(|&(k, _)| k == i).map(|(_, a)| a).collect();
                assert_eq!(back.len(), 1, "coupling {i}-{j} not mirrored once");
                assert_eq!(back[0], a, "a_ij != a_ji for {i}, {j}");
            }
        }
        assert!(boundary_rows > 0);
        // Refinement really produced 2:1 faces (couplings below 1) and same-size ones (exactly 1).
        assert!(m.coefs.iter().any(|&a| (a - 1.0).abs() < 1e-12));
        assert!(m.coefs.iter().any(|&a| a < 0.9));
    }

    #[test]
    fn manufactured_rhs_has_the_exact_solution() {
        let p = problem(7);
        assert!(p.residual(&p.exact) < 1e-14);
        assert_eq!(p.error(&p.exact), 0.0);
        let zero = vec![0.0; p.len()];
        assert!(p.residual(&zero) > 1e-6);
    }

    #[test]
    fn sequential_gauss_seidel_converges_to_the_exact_solution() {
        let p = problem(6);
        let mut u = vec![0.0; p.len()];
        let tolerance = 1e-11;
        let sweeps = p.gauss_seidel(&mut u, tolerance, 100_000);
        assert!(sweeps < 100_000, "did not converge");
        assert!(sweeps > 10, "converged suspiciously fast: {sweeps} sweeps");
        let residual = p.residual(&u);
        assert!(residual <= p.residual_bound(tolerance), "residual {residual}");
        let error = p.error(&u);
        assert!(error < 1e-7, "error {error} after {sweeps} sweeps");
    }
}
