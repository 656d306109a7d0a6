//! Index expressions over runs of points. Points of a space (loop
//! variables with sizes `ranges`, row-major) are numbered linearly; an
//! expression that is affine along the innermost variables with a
//! consistent step is `base + step * j` over a run of consecutive points,
//! so loads and stores become strided (mostly contiguous) slices and range
//! checks become intervals, evaluated once per run instead of per point.

use crate::expr::{Atom, Cond, Expr};

/// How an expression moves along consecutive points: by `step` per point
/// over spans of `span` points (aligned to multiples of `span`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Points per span (at least 1).
    pub span: usize,
    /// The expression's change from one point to the next within a span.
    pub step: i64,
}

/// The longest suffix of variables along which `e` is affine with one
/// step (variables of size 1 never change, so they never break a span).
pub fn step_of(e: &Expr, ranges: &[i64]) -> Step {
    let (terms, _) = e.parts();
    let coef = |v: usize| -> i64 {
        terms
            .iter()
            .filter(|(a, _)| *a == Atom::Var(v))
            .map(|(_, c)| *c)
            .sum()
    };
    let nonlinear = |v: usize| {
        terms.iter().any(|(a, _)| match a {
            Atom::Var(_) => false,
            Atom::Div(inner, _) | Atom::Mod(inner, _) => {
                let mut vs = Vec::new();
                inner.vars(&mut vs);
                vs.contains(&v)
            }
        })
    };
    let (mut span, mut step) = (1usize, None);
    for v in (0..ranges.len()).rev() {
        if ranges[v] <= 1 {
            continue;
        }
        if nonlinear(v) {
            break;
        }
        let c = coef(v);
        match step {
            None => step = Some(c),
            Some(s) if c == s.saturating_mul(span as i64) => {}
            Some(_) => break,
        }
        span = span.saturating_mul(ranges[v] as usize);
    }
    Step {
        span: span.max(1),
        step: step.unwrap_or(0),
    }
}

/// Steps of the expressions one instruction reads (its index and its
/// condition's checks), over the span they all share.
#[derive(Clone, Debug, Default)]
pub struct Runs {
    /// Points per shared span (the smallest of the expressions' spans,
    /// which divides the others: each is a product over a suffix of the
    /// same sizes).
    pub span: usize,
    /// The index's step (0 without an index).
    pub index: i64,
    /// Each check's step, in [`Cond::checks`] order.
    pub checks: Vec<i64>,
}

impl Runs {
    /// The runs of `index` (if any) and `valid` over `ranges`.
    pub fn new(index: Option<&Expr>, valid: &Cond, ranges: &[i64]) -> Runs {
        let idx = index.map(|e| step_of(e, ranges));
        let checks: Vec<Step> = valid
            .checks()
            .iter()
            .map(|(e, _, _)| step_of(e, ranges))
            .collect();
        let span = idx
            .iter()
            .chain(&checks)
            .map(|s| s.span)
            .min()
            .unwrap_or(usize::MAX);
        Runs {
            span,
            index: idx.map_or(0, |s| s.step),
            checks: checks.iter().map(|s| s.step).collect(),
        }
    }
}

/// A run of consecutive points: its offset in the evaluated points, its
/// length, the index at its first point and the valid positions
/// `lo..hi` (of `0..len`).
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// Offset of the run's first point among the evaluated ones.
    pub off: usize,
    /// Points in the run.
    pub len: usize,
    /// The index expression at the run's first point.
    pub base: i64,
    /// First valid position.
    pub lo: usize,
    /// One past the last valid position.
    pub hi: usize,
}

/// Calls `f` with every run of points `p0..p0 + n` of the space `ranges`,
/// evaluating `index` (0 without one) and `valid` as `runs` describes.
pub fn for_runs<E>(
    ranges: &[i64],
    p0: usize,
    n: usize,
    index: Option<&Expr>,
    valid: &Cond,
    runs: &Runs,
    mut f: impl FnMut(Run) -> Result<(), E>,
) -> Result<(), E> {
    let mut coords: smallvec::SmallVec<[i64; 8]> = smallvec::smallvec![0; ranges.len()];
    let never = valid.is_never();
    let mut p = p0;
    while p < p0 + n {
        let len = (runs.span - p % runs.span).min(p0 + n - p);
        unravel(ranges, p, &mut coords);
        let base = index.map_or(0, |e| e.eval(&coords));
        let (mut lo, mut hi) = if never { (0, 0) } else { (0, len) };
        for ((e, clo, chi), step) in valid.checks().iter().zip(&runs.checks) {
            let (a, b) = interval(e.eval(&coords), *step, *clo, *chi, len);
            lo = lo.max(a);
            hi = hi.min(b);
        }
        f(Run {
            off: p - p0,
            len,
            base,
            lo,
            hi: hi.max(lo),
        })?;
        p += len;
    }
    Ok(())
}

/// The coordinates of linear point `p` of the space `ranges`.
fn unravel(ranges: &[i64], mut p: usize, coords: &mut [i64]) {
    for (c, r) in coords.iter_mut().zip(ranges).rev() {
        let r = (*r).max(1) as usize;
        *c = (p % r) as i64;
        p /= r;
    }
}

/// The positions `j` of `0..len` where `lo <= base + step * j < hi`: one
/// interval, since the value is monotone in `j`.
fn interval(base: i64, step: i64, lo: i64, hi: i64, len: usize) -> (usize, usize) {
    let len_i = len as i64;
    let (a, b) = match step.signum() {
        0 if lo <= base && base < hi => (0, len_i),
        0 => (0, 0),
        // base + step * j >= lo and < hi, step > 0.
        1 => (ceil_div(lo - base, step), ceil_div(hi - base, step)),
        // step < 0: j <= (base - lo) / -step and j > (base - hi) / -step.
        _ => (
            (base - hi).div_euclid(-step) + 1,
            (base - lo).div_euclid(-step) + 1,
        ),
    };
    let clamp = |x: i64| x.clamp(0, len_i) as usize;
    (clamp(a), clamp(b))
}

/// `ceil(a / b)` for `b > 0`.
fn ceil_div(a: i64, b: i64) -> i64 {
    -((-a).div_euclid(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_match_pointwise_checks() {
        for step in -3..=3 {
            for base in -7..7 {
                for (lo, hi) in [(0, 4), (-2, 1), (3, 3), (5, 2)] {
                    let len = 6;
                    let (a, b) = interval(base, step, lo, hi, len);
                    for j in 0..len {
                        let v = base + step * j as i64;
                        let inside = lo <= v && v < hi;
                        assert_eq!(inside, a <= j && j < b, "{base} {step} {lo} {hi} {j}");
                    }
                }
            }
        }
    }

    #[test]
    fn spans_follow_contiguous_suffixes() {
        let ranges = [3i64, 4, 5];
        // Row-major contiguous: one span over everything.
        let e = Expr::var(0)
            .scale(20)
            .add(&Expr::var(1).scale(5))
            .add(&Expr::var(2));
        assert_eq!(step_of(&e, &ranges), Step { span: 60, step: 1 });
        // Transposed inner axes: spans of the innermost axis only.
        let t = Expr::var(1).add(&Expr::var(2).scale(4));
        assert_eq!(step_of(&t, &ranges), Step { span: 5, step: 4 });
        // Broadcast along the innermost axis.
        let b = Expr::var(0).scale(4).add(&Expr::var(1));
        assert_eq!(step_of(&b, &ranges), Step { span: 5, step: 0 });
        // A division of the innermost variable breaks every span.
        let d = Expr::var(2).div(2, &ranges);
        assert_eq!(step_of(&d, &ranges).span, 1);
    }
}
