//! The closed forms against powers of the explicit transition matrices, and the tables against
//! the closed forms.

use super::closed_form::{footprint_after_run, harmonic, reload_transient, still_valid};
use super::*;

/// A square matrix of `f64`, row-major.
#[derive(Clone)]
struct Matrix {
    size: usize,
    cells: Vec<f64>,
}

impl Matrix {
    fn identity(size: usize) -> Matrix {
        let mut cells = vec![0.0; size * size];
        for i in 0..size {
            cells[i * size + i] = 1.0;
        }
        Matrix { size, cells }
    }

    fn at(&self, i: usize, j: usize) -> f64 {
        self.cells[i * self.size + j]
    }

    fn times(&self, other: &Matrix) -> Matrix {
        let n = self.size;
        let mut cells = vec![0.0; n * n];
        for i in 0..n {
            for k in 0..n {
                let a = self.at(i, k);
                if a != 0.0 {
                    for j in 0..n {
                        cells[i * n + j] += a * other.at(k, j);
                    }
                }
            }
        }
        Matrix { size: n, cells }
    }

    /// `self^power` by repeated squaring.
    fn power(&self, mut power: u64) -> Matrix {
        let mut result = Matrix::identity(self.size);
        let mut square = self.clone();
        while power > 0 {
            if power & 1 == 1 {
                result = result.times(&square);
            }
            square = square.times(&square);
            power >>= 1;
        }
        result
    }

    /// The expected state after the chain's steps, from state `from`.
    fn expectation(&self, from: usize) -> f64 {
        (0..self.size).map(|j| j as f64 * self.at(from, j)).sum()
    }
}

/// The chain of a running ULT in a cache of `n` lines: state `k` (its lines) gains one with
/// probability `(n - k) / n` per miss.
fn gain_chain(n: usize) -> Matrix {
    let mut m = Matrix { size: n + 1, cells: vec![0.0; (n + 1) * (n + 1)] };
    for k in 0..=n {
        let gain = (n - k) as f64 / n as f64;
        m.cells[k * (n + 1) + k] = 1.0 - gain;
        if k < n {
            m.cells[k * (n + 1) + k + 1] = gain;
        }
    }
    m
}

/// The chain of a waiting ULT: each foreign miss evicts one of its `k` lines with probability
/// `k / n`.
fn loss_chain(n: usize) -> Matrix {
    let mut m = Matrix { size: n + 1, cells: vec![0.0; (n + 1) * (n + 1)] };
    for k in 0..=n {
        let loss = k as f64 / n as f64;
        m.cells[k * (n + 1) + k] = 1.0 - loss;
        if k > 0 {
            m.cells[k * (n + 1) + k - 1] = loss;
        }
    }
    m
}

fn assert_close(got: f64, want: f64, relative: f64, what: &str) {
    let scale = want.abs().max(1e-300);
    assert!((got - want).abs() <= relative * scale, "{what}: got {got}, want {want}");
}

#[test]
fn footprint_matches_matrix_powers() {
    for n in 4..=16 {
        let chain = gain_chain(n);
        for m in [0u64, 1, 2, 3, 5, 17, 64, 300] {
            let power = chain.power(m);
            for v in 0..=n {
                let want = power.expectation(v);
                let got = footprint_after_run(n as f64, v as f64, m as f64);
                assert_close(got, want, 1e-9, &format!("N={n} v={v} m={m}"));
            }
        }
    }
}

#[test]
fn still_valid_matches_matrix_powers() {
    for n in 4..=16 {
        let chain = loss_chain(n);
        for o in [0u64, 1, 2, 3, 5, 17, 64, 300] {
            let power = chain.power(o);
            for f in 0..=n {
                let want = power.expectation(f);
                let got = still_valid(n as f64, f as f64, o as f64);
                // Expectations below 1e-300 are zero for both.
                if want > 1e-290 {
                    assert_close(got, want, 1e-9, &format!("N={n} f={f} o={o}"));
                }
            }
        }
    }
}

/// The expected number of misses for the gain chain to reach `f` from `v`: the sum over `t >= 0`
/// of `P(X_t < f)`, read off successive matrix powers until the remaining mass is below 1e-16.
fn hitting_time_by_powers(chain: &Matrix, v: usize, f: usize) -> f64 {
    let mut power = Matrix::identity(chain.size);
    let mut expected = 0.0;
    for _ in 0..100_000 {
        let below: f64 = (0..f).map(|j| power.at(v, j)).sum();
        if below < 1e-16 {
            return expected;
        }
        expected += below;
        power = power.times(chain);
    }
    panic!("did not converge");
}

#[test]
fn reload_transient_matches_matrix_powers_and_the_sum() {
    for n in 4..=16 {
        let chain = gain_chain(n);
        for v in 0..=n {
            for f in v..=n {
                let sum: f64 = (v..f).map(|k| n as f64 / (n - k) as f64).sum();
                let by_powers = hitting_time_by_powers(&chain, v, f);
                assert_close(by_powers, sum, 1e-9, &format!("powers N={n} v={v} f={f}"));
                let closed = reload_transient(n as f64, v as f64, f as f64);
                if f == v {
                    assert_eq!(closed, 0.0);
                } else {
                    assert_close(closed, sum, 1e-9, &format!("closed N={n} v={v} f={f}"));
                }
            }
        }
    }
}

#[test]
fn harmonic_numbers() {
    let mut sum = 0.0;
    for k in 1..=5000u32 {
        sum += 1.0 / f64::from(k);
        assert_close(harmonic(f64::from(k)), sum, 1e-13, &format!("H({k})"));
    }
    // Half-integers: H(1/2) = 2 - 2 ln 2; H(x) = H(x - 1) + 1/x.
    assert_close(harmonic(0.5), 2.0 - 2.0 * std::f64::consts::LN_2, 1e-13, "H(1/2)");
    let quarter = 4.0 - std::f64::consts::FRAC_PI_2 - 3.0 * std::f64::consts::LN_2;
    assert_close(harmonic(0.25), quarter, 1e-13, "H(1/4)");
    for x in [1.7, 9.5, 10.2, 11.0, 123.456] {
        assert_close(harmonic(x), harmonic(x - 1.0) + 1.0 / x, 1e-13, "recurrence");
    }
    assert_eq!(harmonic(0.0), 0.0);
    assert_eq!(harmonic(-1.0), 0.0);
}

/// Sample line counts in `[0, n]`: dense near 0 and near `n`, geometric in between.
fn samples(n: u64) -> Vec<f32> {
    let n = n as f64;
    let mut xs = vec![0.0, 0.3, 0.5, 1.0, 1.5, 2.0, 3.7];
    let mut x = 4.0;
    while x < n {
        xs.push(x);
        xs.push(n - x);
        x *= 1.37;
    }
    xs.extend([n - 3.3, n - 1.0, n - 0.5, n - 0.01, n]);
    let mut xs: Vec<f32> = xs.into_iter().filter(|&x| (0.0..=n).contains(&x)).map(|x| x as f32).collect();
    xs.sort_by(f32::total_cmp);
    xs.dedup();
    xs
}

const SIZES: [u64; 6] = [2, 16, 1000, 32768, 1 << 20, 1 << 24];

#[test]
fn decay_table_is_exact_to_f32() {
    for n in SIZES {
        let model = CacheModel::new(n, 64).expect("valid");
        // Exactly: `grow_in_range` relies on it.
        assert_eq!(model.decay(0), 1.0);
        let mut misses =
            vec![0u64, 1, 2, 1023, 1024, 1025, 1 << 20, (1 << 20) + 7, (1 << 30) - 1, 1 << 30, u64::MAX];
        let mut m = 3u64;
        while m < 1 << 31 {
            misses.push(m);
            m = m * 7 / 5;
        }
        for m in misses {
            let want = closed_form::decay(n as f64, m as f64);
            let got = f64::from(model.decay(m));
            if m >= DECAY_LIMIT {
                assert_eq!(got, 0.0, "N={n} m={m}: 0 beyond the tables");
                assert!(want * n as f64 <= 1e-20, "N={n} m={m}: the lines lost by that are negligible");
            } else if want < 1e-30 {
                assert!(got < 1e-29, "N={n} m={m}: {got}");
            } else {
                assert_close(got, want, 4e-7, &format!("decay N={n} m={m}"));
            }
        }
    }
}

#[test]
fn footprint_and_still_valid_tables_within_a_millionth_of_the_cache() {
    for n in SIZES {
        let model = CacheModel::new(n, 64).expect("valid");
        let lines = n as f64;
        for x in samples(n) {
            for m in [0u64, 1, 5, 100, n / 3, n, 4 * n, 40 * n] {
                let got = f64::from(model.footprint_after_run(x, m));
                let want = footprint_after_run(lines, f64::from(x), m as f64);
                assert!((got - want).abs() <= 1e-6 * lines, "footprint N={n} v={x} m={m}: {got} vs {want}");
                let got = f64::from(model.still_valid(x, m));
                let want = still_valid(lines, f64::from(x), m as f64);
                assert!((got - want).abs() <= 1e-6 * lines, "valid N={n} f={x} o={m}: {got} vs {want}");
            }
        }
    }
}

#[test]
fn reload_transient_table_within_its_bound() {
    for n in SIZES {
        let model = CacheModel::new(n, 64).expect("valid");
        let lines = n as f64;
        let xs = samples(n);
        let mut worst = 0.0f64;
        for &v in &xs {
            for &f in &xs {
                let got = f64::from(model.reload_transient(v, f));
                let want = reload_transient(lines, f64::from(v), f64::from(f));
                worst = worst.max((got - want).abs() / lines);
            }
        }
        // Within the grid cells too: points just off the grid in [0, 2] and near n.
        for i in 0..2000 {
            let v = i as f32 * 0.001;
            let f = (n as f32).min(v + 0.37);
            let (v, f) = (n as f32 - f, n as f32 - v);
            let got = f64::from(model.reload_transient(v, f));
            let want = reload_transient(lines, f64::from(v), f64::from(f));
            worst = worst.max((got - want).abs() / lines);
        }
        assert!(worst <= RELOAD_ERROR_BOUND, "N={n}: worst error {worst} N");
    }
}

#[test]
fn reload_transient_keeps_the_order() {
    let model = CacheModel::new(32768, 64).expect("valid");
    let xs = samples(32768);
    for &v in &xs {
        let mut last = 0.0;
        for &f in &xs.iter().copied().filter(|&f| f >= v).collect::<Vec<_>>() {
            let r = model.reload_transient(v, f);
            assert!(r >= last, "more footprint never costs less: v={v} f={f}");
            last = r;
        }
    }
    for &f in &xs {
        let mut last = f32::INFINITY;
        for &v in xs.iter().filter(|&&v| v <= f) {
            let r = model.reload_transient(v, f);
            assert!(r <= last, "more valid lines never cost more: v={v} f={f}");
            last = r;
        }
    }
}

#[test]
fn clamps_and_edges() {
    let model = CacheModel::new(100, 64).expect("valid");
    assert_eq!(model.reload_transient(5.0, 5.0), 0.0);
    assert_eq!(model.reload_transient(7.0, 5.0), 0.0);
    assert_eq!(model.reload_transient(f32::NAN, 0.0), 0.0);
    assert_eq!(model.still_valid(-3.0, 0), 0.0);
    assert_eq!(model.still_valid(1e9, 0), 100.0);
    assert_eq!(model.footprint_after_run(f32::NAN, 0), 0.0);
    assert_eq!(model.footprint_after_run(0.0, u64::MAX), 100.0);
    assert_eq!(model.decay(0), 1.0);
    // The whole cache from nothing: N H(N).
    let full = f64::from(model.reload_transient(0.0, 100.0));
    assert!((full - 100.0 * harmonic(100.0)).abs() < RELOAD_ERROR_BOUND * 100.0);
    assert!(CacheModel::new(CacheModel::MAX_LINES, 64).is_ok());
    assert_eq!(
        CacheModel::new(CacheModel::MAX_LINES + 1, 64).expect_err("too big").to_string(),
        "cache model needs `lines` in 2..=16777216, got 16777217"
    );
    assert_eq!(
        CacheModel::new(64, 0).expect_err("no line").to_string(),
        "cache model needs `line_size` in 1..=4294967295, got 0"
    );
}

#[test]
fn grid_index_round_trips() {
    for i in 0..(STEPS * 30) {
        let x = grid_point(i) as f32;
        assert_eq!(harmonic_index(x), (i, 0.0), "grid point {i} = {x}");
    }
    let (i, t) = harmonic_index(1.5 + 1.0 / 128.0);
    assert_eq!(i, STEPS + STEPS / 2);
    assert!((t - 0.5).abs() < 1e-6);
}

#[test]
fn footprint_record() {
    let model = CacheModel::new(1000, 64).expect("valid");
    let mut ult = Footprint::default();
    assert_eq!(ult, Footprint::EMPTY);
    assert_eq!((ult.processor(), ult.lines()), (None, 0.0));
    assert_eq!(ult.valid_on(&model, 0, 0), 0.0, "never ran: nothing cached");
    ult.record_run(&model, 3, 0.0, 100, 500);
    assert_eq!((ult.processor(), ult.clock()), (Some(3), 500));
    let f = f64::from(ult.lines());
    assert!((f - footprint_after_run(1000.0, 0.0, 100.0)).abs() < 1e-3);
    assert_eq!(ult.valid_on(&model, 3, 500), ult.lines(), "no foreign misses yet");
    let v = f64::from(ult.valid_on(&model, 3, 1500));
    assert!((v - still_valid(1000.0, f, 1000.0)).abs() < 1e-3);
    assert_eq!(ult.valid_on(&model, 2, 1500), 0.0, "another processor's cache holds none");
    assert_eq!(ult.valid_on(&model, 3, 100), ult.lines(), "a clock behind the stamp counts no misses");
    let here = ult.reload_transient_on(&model, 3, 1500);
    let there = ult.reload_transient_on(&model, 2, 0);
    assert!(here < there);
    assert!((f64::from(there) - reload_transient(1000.0, 0.0, f)).abs() < RELOAD_ERROR_BOUND * 1000.0);
    assert_eq!(std::mem::size_of::<Footprint>(), 16);
}

/// `grow_in_range` of a run of no misses (no lookup) gives what its general case gives with the
/// decay of 0 misses from the table, for lines across `[0, N]` (grid points, their neighbours,
/// random values) and every model size of the tests.
#[test]
fn a_run_of_no_misses_grows_as_the_general_case() {
    let mut x = 0x9E37_79B9_7F4A_7C15_u64;
    for n in SIZES {
        let model = CacheModel::new(n, 64).expect("valid");
        let nf = n as f32;
        let general = |valid: f32| {
            let grown = nf - (nf - valid) * model.decay(0);
            grown.max(valid).min(nf)
        };
        let mut values = vec![0.0, f32::MIN_POSITIVE, 0.5, 1.0, nf - 1.0, nf, nf.next_down()];
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = match i % 3 {
                0 => (x >> 40) as f32 / (1u64 << 24) as f32 * nf,
                1 => ((x % (2 * n)) as f32 / 2.0).min(nf),
                _ => f32::from_bits((x as u32) % nf.to_bits()),
            };
            values.push(v);
        }
        for v in values {
            assert!((0.0..=nf).contains(&v));
            assert_eq!(model.grow_in_range(v, 0).to_bits(), general(v).to_bits(), "N={n} valid={v}");
        }
    }
}

/// `reload_transient_on` (with its shortcut where no miss was counted since the run) gives,
/// bit for bit, the model's reload transient of the lines `valid_on` finds, for footprints
/// recorded on two processors by runs of few and many misses, and clocks behind, at, just past
/// and far past their run's end.
#[test]
fn reload_transient_on_is_the_models_reload_of_the_valid_lines() {
    let mut x = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut shortcuts = 0;
    for lines in [2, 1000, 32768, CacheModel::MAX_LINES] {
        let model = CacheModel::new(lines, 64).expect("valid");
        let mut ult = Footprint::EMPTY;
        let mut clocks = [0u64; 2];
        for _ in 0..20_000 {
            let p = (next() % 2) as usize;
            let valid = ult.valid_on(&model, p, clocks[p]);
            let misses = match next() % 3 {
                0 => 0,
                1 => next() % 4,
                _ => next() % (2 * lines),
            };
            clocks[p] += misses;
            ult.record_run(&model, p, valid, misses, clocks[p]);
            clocks[p] += [0, 0, 1, next() % (4 * lines)][(next() % 4) as usize];
            for q in 0..3 {
                let clock = clocks.get(q).copied().unwrap_or(7);
                for clock in [clock, clock.saturating_sub(1), clock + 1] {
                    let got = ult.reload_transient_on(&model, q, clock);
                    let want = model.reload_transient(ult.valid_on(&model, q, clock), ult.lines());
                    assert_eq!(got.to_bits(), want.to_bits(), "{ult:?} on {q} at {clock}");
                    shortcuts += usize::from(ult.processor() == Some(q) && clock <= ult.clock());
                }
            }
        }
    }
    assert!(shortcuts > 10_000, "{shortcuts}");
}
