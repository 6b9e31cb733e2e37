//! A 2:1-balanced quadtree on the unit square, refined towards a feature, its leaves in Morton order.
//!
//! A [`Cell`] is a square of level `l`: side `2^-l`, integer coordinates `(x, y)` in `0..2^l`. The
//! tree starts from the uniform grid of `base_level` and splits every cell whose centre lies within
//! [`Refinement::band`] cell sides of the [`Feature`] until `max_level`. It is then *2:1 balanced*:
//! two leaves that share a face differ by at most one level, so a leaf sees one neighbour or two
//! half-size neighbours through each face (4 to 8 in all, fewer at the boundary).
//!
//! The leaves are stored sorted by their Morton (Z-order) key: the bits of the lower-left corner's
//! coordinates at the finest level, interleaved. A run of consecutive leaves in that order is a
//! compact region of the square (a union of few quadtree blocks), so neighbours sit near each other
//! in memory, and a run of consecutive leaves makes a good patch for one ULT.

use std::collections::{HashMap, HashSet};
use std::fmt;

/// The deepest level a tree may have: coordinates and Morton keys stay within `u32` and `u64`.
pub const MAX_LEVEL: u8 = 24;

/// A square cell of the tree: level `level`, side `2^-level`, lower-left corner at
/// `(x, y) * 2^-level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    /// Refinement level: 0 is the whole unit square.
    pub level: u8,
    /// Column, `0..2^level`.
    pub x: u32,
    /// Row, `0..2^level`.
    pub y: u32,
}

impl Cell {
    /// The cell of `level` at column `x`, row `y`.
    pub const fn new(level: u8, x: u32, y: u32) -> Cell {
        Cell { level, x, y }
    }

    /// Side length.
    pub fn size(&self) -> f64 {
        1.0 / (1u64 << self.level) as f64
    }

    /// Centre point.
    pub fn centre(&self) -> (f64, f64) {
        let h = self.size();
        ((self.x as f64 + 0.5) * h, (self.y as f64 + 0.5) * h)
    }

    /// The Morton (Z-order) key of the lower-left corner at `finest` level (`finest >= level`):
    /// sorting the leaves of a tree by it gives the depth-first order of the tree.
    pub fn morton(&self, finest: u8) -> u64 {
        let shift = finest - self.level;
        interleave(self.x << shift, self.y << shift)
    }

    /// The four children, in Morton order.
    pub fn children(&self) -> [Cell; 4] {
        let (l, x, y) = (self.level + 1, 2 * self.x, 2 * self.y);
        [Cell::new(l, x, y), Cell::new(l, x + 1, y), Cell::new(l, x, y + 1), Cell::new(l, x + 1, y + 1)]
    }

    /// The ancestor at `level` (`level <= self.level`).
    pub fn ancestor(&self, level: u8) -> Cell {
        let shift = self.level - level;
        Cell::new(level, self.x >> shift, self.y >> shift)
    }

    /// The cell of the same level across face `dir`, or `None` at the boundary of the square.
    pub fn across(&self, dir: Dir) -> Option<Cell> {
        let n = 1i64 << self.level;
        let (dx, dy) = dir.offset();
        let (x, y) = (self.x as i64 + dx, self.y as i64 + dy);
        ((0..n).contains(&x) && (0..n).contains(&y)).then(|| Cell::new(self.level, x as u32, y as u32))
    }
}

/// Spreads the bits of `x` and `y` into alternate bits (`x` in the even ones).
fn interleave(x: u32, y: u32) -> u64 {
    fn spread(v: u32) -> u64 {
        let mut v = v as u64;
        v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v << 2)) & 0x3333_3333_3333_3333;
        v = (v | (v << 1)) & 0x5555_5555_5555_5555;
        v
    }
    spread(x) | (spread(y) << 1)
}

/// A face direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Towards smaller x.
    West,
    /// Towards larger x.
    East,
    /// Towards smaller y.
    South,
    /// Towards larger y.
    North,
}

impl Dir {
    /// All four, in a fixed order.
    pub const ALL: [Dir; 4] = [Dir::West, Dir::East, Dir::South, Dir::North];

    fn offset(self) -> (i64, i64) {
        match self {
            Dir::West => (-1, 0),
            Dir::East => (1, 0),
            Dir::South => (0, -1),
            Dir::North => (0, 1),
        }
    }

    /// The two children of a cell that touch its face `self`.
    fn face_children(self, cell: Cell) -> [Cell; 2] {
        let [sw, se, nw, ne] = cell.children();
        match self {
            Dir::West => [sw, nw],
            Dir::East => [se, ne],
            Dir::South => [sw, se],
            Dir::North => [nw, ne],
        }
    }

    fn opposite(self) -> Dir {
        match self {
            Dir::West => Dir::East,
            Dir::East => Dir::West,
            Dir::South => Dir::North,
            Dir::North => Dir::South,
        }
    }
}

/// What the mesh is refined towards.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Feature {
    /// A point `(x, y)`.
    Point(f64, f64),
    /// A circle: centre `(cx, cy)` and radius `r` (a closed line through the square).
    Circle {
        /// Centre, x.
        cx: f64,
        /// Centre, y.
        cy: f64,
        /// Radius.
        r: f64,
    },
}

impl Feature {
    /// Distance from `(x, y)` to the feature.
    pub fn distance(&self, x: f64, y: f64) -> f64 {
        match *self {
            Feature::Point(px, py) => (x - px).hypot(y - py),
            Feature::Circle { cx, cy, r } => ((x - cx).hypot(y - cy) - r).abs(),
        }
    }
}

/// How to refine: from a uniform grid of `base_level`, split cells whose centre lies within
/// `band` of their own sides from the feature, down to `max_level`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Refinement {
    /// Level of the starting uniform grid (`4^base_level` cells).
    pub base_level: u8,
    /// The finest level.
    pub max_level: u8,
    /// What to refine towards.
    pub feature: Feature,
    /// Width of the refined band around the feature, in sides of the cell being tested.
    pub band: f64,
    /// Extra width of the refined band, as a distance: a cell is split while its centre lies
    /// within `band * side + halo` of the feature.
    pub halo: f64,
}

impl Refinement {
    /// The leaves this refinement makes before [`Quadtree::build`] balances them, counted without
    /// storing a cell: a lower bound on the tree's [`len`](Quadtree::len) (balancing only splits
    /// leaves), in a fraction of the time and none of the memory of building it, for refusing a
    /// mesh too large for what comes next before building it. Refused as `build` refuses.
    ///
    /// ```
    /// use elite_grid::quadtree::{Feature, Quadtree, Refinement};
    ///
    /// let r = Refinement { base_level: 2, max_level: 7, feature: Feature::Point(0.3, 0.3), band: 1.0, halo: 0.0 };
    /// let tree = Quadtree::build(&r)?;
    /// assert!(r.leaves_at_least()? <= tree.len() as u64);
    /// # Ok::<(), elite_grid::quadtree::RefinementError>(())
    /// ```
    pub fn leaves_at_least(&self) -> Result<u64, RefinementError> {
        self.check()?;
        let n = 1u32 << self.base_level;
        Ok((0..n)
            .flat_map(|y| (0..n).map(move |x| (x, y)))
            .map(|(x, y)| count(Cell::new(self.base_level, x, y), self))
            .sum())
    }

    /// What [`Quadtree::build`] refuses.
    fn check(&self) -> Result<(), RefinementError> {
        let Refinement { base_level, max_level, band, halo, .. } = *self;
        if base_level == 0 || base_level > max_level || max_level > MAX_LEVEL {
            return Err(RefinementError::Levels { base_level, max_level });
        }
        if !(band.is_finite() && band >= 0.0) {
            return Err(RefinementError::Band(band));
        }
        if !(halo.is_finite() && halo >= 0.0) {
            return Err(RefinementError::Halo(halo));
        }
        Ok(())
    }
}

/// Why a [`Refinement`] was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum RefinementError {
    /// `base_level` or `max_level` out of range: `base_level` in `1..=max_level`, `max_level` in
    /// `base_level..=MAX_LEVEL`.
    Levels {
        /// The base level given.
        base_level: u8,
        /// The finest level given.
        max_level: u8,
    },
    /// `band` must be a finite number `>= 0`.
    Band(f64),
    /// `halo` must be a finite number `>= 0`.
    Halo(f64),
}

impl fmt::Display for RefinementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefinementError::Levels { base_level, max_level } => write!(
                f,
                "invalid levels: base_level {base_level}, max_level {max_level}; expected \
                 1 <= base_level <= max_level <= {MAX_LEVEL}"
            ),
            RefinementError::Band(b) => write!(f, "invalid `band` {b}: expected a finite number >= 0"),
            RefinementError::Halo(h) => write!(f, "invalid `halo` {h}: expected a finite number >= 0"),
        }
    }
}

impl std::error::Error for RefinementError {}

/// Who is across one face of a leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Across {
    /// The boundary of the square.
    Boundary,
    /// One leaf, of the same level or one level coarser.
    One(u32),
    /// Two leaves one level finer, each covering half the face.
    Two(u32, u32),
}

/// The leaves of a balanced quadtree, in Morton order, with an index from cell to position.
#[derive(Clone, Debug)]
pub struct Quadtree {
    finest: u8,
    leaves: Vec<Cell>,
    index: HashMap<Cell, u32>,
}

impl Quadtree {
    /// Builds the refined, 2:1-balanced tree.
    ///
    /// ```
    /// use elite_grid::quadtree::{Feature, Quadtree, Refinement};
    /// let tree = Quadtree::build(&Refinement {
    ///     base_level: 2,
    ///     max_level: 6,
    ///     feature: Feature::Point(0.3, 0.3),
    ///     band: 1.0,
    ///     halo: 0.0,
    /// })?;
    /// assert!(tree.len() > 16);
    /// # Ok::<(), elite_grid::quadtree::RefinementError>(())
    /// ```
    pub fn build(refinement: &Refinement) -> Result<Quadtree, RefinementError> {
        refinement.check()?;
        let Refinement { base_level, max_level, .. } = *refinement;
        let mut leaves = HashSet::new();
        let n = 1u32 << base_level;
        for y in 0..n {
            for x in 0..n {
                refine(Cell::new(base_level, x, y), refinement, &mut leaves);
            }
        }
        balance(&mut leaves, base_level, max_level);
        let finest = leaves.iter().map(|c| c.level).max().unwrap_or(base_level);
        let mut leaves: Vec<Cell> = leaves.into_iter().collect();
        leaves.sort_unstable_by_key(|c| c.morton(finest));
        let index = leaves.iter().enumerate().map(|(i, c)| (*c, i as u32)).collect();
        Ok(Quadtree { finest, leaves, index })
    }

    /// Number of leaves.
    pub fn len(&self) -> usize {
        self.leaves.len()
    }

    /// Whether the tree has no leaves (never true for a built tree).
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }

    /// The leaves in Morton order.
    pub fn leaves(&self) -> &[Cell] {
        &self.leaves
    }

    /// The finest level present.
    pub fn finest_level(&self) -> u8 {
        self.finest
    }

    /// Position of `cell` among the leaves, if it is one.
    pub fn position(&self, cell: &Cell) -> Option<u32> {
        self.index.get(cell).copied()
    }

    /// Who is across face `dir` of the leaf at position `i`.
    ///
    /// # Panics
    /// If `i` is out of range, or the tree is not balanced (it always is once built).
    pub fn across(&self, i: usize, dir: Dir) -> Across {
        let cell = self.leaves[i];
        let Some(same) = cell.across(dir) else {
            return Across::Boundary;
        };
        if let Some(j) = self.position(&same) {
            return Across::One(j);
        }
        if same.level > 0 {
            if let Some(j) = self.position(&same.ancestor(same.level - 1)) {
                return Across::One(j);
            }
        }
        let [a, b] = dir.opposite().face_children(same);
        match (self.position(&a), self.position(&b)) {
            (Some(a), Some(b)) => Across::Two(a, b),
            _ => panic!("quadtree not 2:1 balanced across face {dir:?} of {cell:?}"),
        }
    }
}

/// Splits `cell` while the refinement asks for it, adding the leaves to `leaves`.
fn refine(cell: Cell, r: &Refinement, leaves: &mut HashSet<Cell>) {
    let (x, y) = cell.centre();
    if cell.level < r.max_level && r.feature.distance(x, y) < r.band * cell.size() + r.halo {
        for child in cell.children() {
            refine(child, r, leaves);
        }
    } else {
        leaves.insert(cell);
    }
}

/// The leaves [`refine`] would make of `cell`, counted.
fn count(cell: Cell, r: &Refinement) -> u64 {
    let (x, y) = cell.centre();
    if cell.level < r.max_level && r.feature.distance(x, y) < r.band * cell.size() + r.halo {
        cell.children().into_iter().map(|child| count(child, r)).sum()
    } else {
        1
    }
}

/// The leaf covering `cell`'s square at `cell`'s level or coarser, if there is one (if there is
/// none, the square is split into finer leaves).
fn covering_leaf(leaves: &HashSet<Cell>, cell: Cell, coarsest: u8) -> Option<Cell> {
    (coarsest..=cell.level).rev().map(|l| cell.ancestor(l)).find(|c| leaves.contains(c))
}

/// Enforces the 2:1 rule: for every leaf of level `l`, the leaves across its faces have level at
/// least `l - 1`, splitting coarser ones.
///
/// Levels are processed finest first. Splitting for a leaf of level `l` only creates leaves of
/// level `<= l - 1`, which are processed later, so one pass over the levels suffices.
fn balance(leaves: &mut HashSet<Cell>, base_level: u8, max_level: u8) {
    for level in (base_level + 2..=max_level).rev() {
        let at_level: Vec<Cell> = leaves.iter().filter(|c| c.level == level).copied().collect();
        for cell in at_level {
            for dir in Dir::ALL {
                let Some(same) = cell.across(dir) else { continue };
                let need = same.ancestor(level - 1);
                // Split the coarse leaf covering `need`, and its children towards `need`, until
                // a leaf of level `level - 1` covers it.
                while let Some(coarse) = covering_leaf(leaves, need, base_level) {
                    if coarse.level >= level - 1 {
                        break;
                    }
                    leaves.remove(&coarse);
                    leaves.extend(coarse.children());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(max_level: u8, feature: Feature) -> Quadtree {
        Quadtree::build(&Refinement { base_level: 2, max_level, feature, band: 1.0, halo: 0.0 }).unwrap()
    }

    /// Every leaf covers its own square, the leaves tile the unit square without overlap.
    fn assert_tiles(t: &Quadtree) {
        let area: f64 = t.leaves().iter().map(|c| c.size() * c.size()).sum();
        assert!((area - 1.0).abs() < 1e-12, "leaves cover area {area}");
        for c in t.leaves() {
            for l in 0..c.level {
                assert!(t.position(&c.ancestor(l)).is_none(), "{c:?} overlaps a leaf ancestor");
            }
        }
    }

    #[test]
    fn interleave_orders_z() {
        assert_eq!(interleave(0, 0), 0);
        assert_eq!(interleave(1, 0), 1);
        assert_eq!(interleave(0, 1), 2);
        assert_eq!(interleave(1, 1), 3);
        assert_eq!(interleave(2, 0), 4);
        assert_eq!(interleave(u32::MAX, 0), 0x5555_5555_5555_5555);
    }

    #[test]
    fn refined_towards_a_point_and_a_circle_tiles_and_is_balanced() {
        for feature in [Feature::Point(0.31, 0.27), Feature::Circle { cx: 0.52, cy: 0.47, r: 0.3 }] {
            let t = tree(9, feature);
            assert_tiles(&t);
            assert_eq!(t.finest_level(), 9);
            // 2:1 balance: through every face, one leaf at most one level coarser, or two leaves
            // one level finer.
            for (i, c) in t.leaves().iter().enumerate() {
                let mut neighbours = 0;
                for dir in Dir::ALL {
                    match t.across(i, dir) {
                        Across::Boundary => {}
                        Across::One(j) => {
                            let d = c.level as i32 - t.leaves()[j as usize].level as i32;
                            assert!(d == 0 || d == 1, "{c:?} faces {:?}", t.leaves()[j as usize]);
                            neighbours += 1;
                        }
                        Across::Two(a, b) => {
                            for j in [a, b] {
                                assert_eq!(t.leaves()[j as usize].level, c.level + 1);
                            }
                            neighbours += 2;
                        }
                    }
                }
                assert!(neighbours <= 8);
            }
            // Levels in the tree actually differ, or the test shows nothing.
            let coarsest = t.leaves().iter().map(|c| c.level).min().unwrap();
            assert!(coarsest <= 3);
        }
    }

    #[test]
    fn neighbour_relation_is_symmetric() {
        let t = tree(8, Feature::Circle { cx: 0.5, cy: 0.5, r: 0.25 });
        let mut pairs = HashSet::new();
        for i in 0..t.len() {
            for dir in Dir::ALL {
                match t.across(i, dir) {
                    Across::Boundary => {}
                    Across::One(j) => {
                        pairs.insert((i as u32, j));
                    }
                    Across::Two(a, b) => {
                        pairs.insert((i as u32, a));
                        pairs.insert((i as u32, b));
                    }
                }
            }
        }
        for &(i, j) in &pairs {
            assert!(pairs.contains(&(j, i)), "{i} sees {j} but not the other way round");
        }
    }

    #[test]
    fn leaves_are_in_morton_order_and_morton_runs_are_compact() {
        let t = tree(8, Feature::Point(0.7, 0.2));
        let f = t.finest_level();
        assert!(t.leaves().windows(2).all(|w| w[0].morton(f) < w[1].morton(f)));
        // Depth-first order: the leaves inside any coarse block are consecutive.
        for block_level in 1..=3u8 {
            let mut seen_done = HashSet::new();
            let mut current = None;
            for c in t.leaves() {
                let b = c.ancestor(block_level.min(c.level));
                if current != Some(b) {
                    assert!(seen_done.insert(b), "block {b:?} visited twice");
                    current = Some(b);
                }
            }
        }
    }

    #[test]
    fn an_unbalanced_start_is_balanced() {
        // A point near a corner at high level makes steep level jumps before balancing.
        let t = tree(12, Feature::Point(0.001, 0.001));
        assert_tiles(&t);
        for (i, c) in t.leaves().iter().enumerate() {
            for dir in Dir::ALL {
                if let Across::One(j) = t.across(i, dir) {
                    assert!(c.level <= t.leaves()[j as usize].level + 1);
                }
            }
        }
    }

    #[test]
    fn bad_refinements_are_refused() {
        let r = |base_level, max_level, band| Refinement {
            base_level,
            max_level,
            feature: Feature::Point(0.5, 0.5),
            band,
            halo: 0.0,
        };
        assert!(matches!(Quadtree::build(&r(0, 4, 1.0)), Err(RefinementError::Levels { .. })));
        assert!(matches!(Quadtree::build(&r(5, 4, 1.0)), Err(RefinementError::Levels { .. })));
        assert!(matches!(Quadtree::build(&r(2, MAX_LEVEL + 1, 1.0)), Err(RefinementError::Levels { .. })));
        assert!(matches!(Quadtree::build(&r(2, 4, f64::NAN)), Err(RefinementError::Band(_))));
        let e = Quadtree::build(&r(5, 4, 1.0)).unwrap_err().to_string();
        assert!(e.contains("base_level") && e.contains("max_level"), "{e}");
    }
}
