//! The prediction model (the seed's section III): how many cores a group of each class should
//! get before contention eats what more cores would give.

use super::{Class, Signals, Thresholds};

/// The seed's threshold for L groups: the memory bandwidth `p` cores would draw, over the
/// host's, may reach 1.15.
pub const L_THRESHOLD: f64 = 1.15;

/// The seed's threshold for LC and C groups: the ideal scaling over the predicted one, in
/// percent, must stay at or above 70 (scaling within 30% of ideal).
pub const SCALING_THRESHOLD: f64 = 70.0;

/// The seed's linear relations `scaling(p) = a x f + b` for LC groups, p = 2..=8.
const LC_RELATIONS: [(f64, f64); 7] = [
    (0.01799, 0.50119),
    (0.025163, 0.34286),
    (0.02846, 0.26028),
    (0.03199, 0.21584),
    (0.03404, 0.18296),
    (0.036213, 0.1641),
    (0.03751, 0.139699),
];

/// The same for C groups.
const C_RELATIONS: [(f64, f64); 7] = [
    (0.3447, 0.4947),
    (0.46974, 0.34415),
    (0.5155, 0.2478),
    (0.63609, 0.22492),
    (0.61403, 0.18127),
    (0.65915, 0.15864),
    (0.6095, 0.1263),
];

/// The predicted scaling (time on `p` cores over time on one; `1/p` is ideal) of an LC or C
/// group whose seed factor (`f_LC` or `f_C`) is `f`, for `p` in 2..=8; `None` for other classes
/// or core counts.
pub fn predicted_scaling(class: Class, f: f64, p: usize) -> Option<f64> {
    let table = match class {
        Class::LC => &LC_RELATIONS,
        Class::C => &C_RELATIONS,
        _ => return None,
    };
    let (a, b) = *table.get(p.checked_sub(2)?)?;
    Some(a * f + b)
}

/// The factor `f` that makes the 2-core relation give the measured 2-core `scaling`: how a
/// one-versus-two probe stands in for the counters the seed's factors need. Negative factors are
/// clamped to 0 (scaling better than the relation's intercept).
pub fn factor_from_scaling(class: Class, scaling2: f64) -> Option<f64> {
    let (a, b) = match class {
        Class::LC => LC_RELATIONS[0],
        Class::C => C_RELATIONS[0],
        _ => return None,
    };
    Some(((scaling2 - b) / a).max(0.0))
}

/// The cores a group should get, out of `cores` (at least 1):
///
/// - **L**: the most `p` with `memory x p / max_bandwidth <= 1.15`;
/// - **LC**, **C**: the most `p` such that every count from 2 to `p` keeps
///   `(1/p) / scaling x 100 >= 70`,
///   the scaling from the seed's relations with the factor the 2-core probe implies
///   ([`factor_from_scaling`]); without a probe, all cores up to 2 (the relations' first step
///   needs a measurement);
/// - **N**: all of them.
///
/// ```
/// use elite_rt::contention::{predict_cores, Class, Signals, Thresholds};
///
/// let t = Thresholds::seed(10e9);
/// // A stream drawing 4.5 GB/s on one core: two would draw 0.9 of the link, three 1.35.
/// let stream = Signals { memory: 4.5e9, ..Signals::default() };
/// assert_eq!(predict_cores(Class::L, &stream, &t, 8), 2);
/// // A cache group that ran 0.52 of its one-core time on two cores.
/// let stencil = Signals { scaling2: Some(0.52), ..Signals::default() };
/// assert_eq!(predict_cores(Class::C, &stencil, &t, 8), 6);
/// assert_eq!(predict_cores(Class::C, &stencil, &t, 2), 2);
/// assert_eq!(predict_cores(Class::N, &Signals::default(), &t, 8), 8);
/// ```
pub fn predict_cores(class: Class, s: &Signals, t: &Thresholds, cores: usize) -> usize {
    let cores = cores.max(1);
    match class {
        Class::N => cores,
        Class::L => {
            if s.memory <= 0.0 || t.max_bandwidth <= 0.0 {
                return cores;
            }
            let p = (L_THRESHOLD * t.max_bandwidth / s.memory).floor();
            (p as usize).clamp(1, cores)
        }
        Class::LC | Class::C => {
            let Some(scaling2) = s.scaling2 else {
                return cores.min(2);
            };
            let f = factor_from_scaling(class, scaling2).unwrap_or(0.0);
            let mut best = 1;
            for p in 2..=cores.min(8) {
                let scaling = if p == 2 { scaling2 } else { predicted_scaling(class, f, p).unwrap_or(1.0) };
                if scaling <= 0.0 || (1.0 / p as f64) / scaling * 100.0 < SCALING_THRESHOLD {
                    break; // contention from here on
                }
                best = p;
            }
            best
        }
    }
}
