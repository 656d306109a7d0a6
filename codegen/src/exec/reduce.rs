//! Reductions: each segment (a row's part in a chunk) folded blockwise
//! and pairwise, then the partial results folded into each row's
//! accumulator in chunk order. Every fold step is [`ReduceOp::fold`] /
//! [`ReduceOp::fold_int`], the interpreter's; only the order differs, so
//! float results agree within rounding and integer ones (wrapping sums
//! and products, max, min: all associative) bit for bit.

use smallvec::SmallVec;

use crate::exec::simd::{self, vectorised, Level};
use crate::exec::vals::{class, Class, Vals};
use crate::ops::ReduceOp;
use crate::DType;

/// Values per block folded in lanes before blocks are folded pairwise.
const BLOCK: usize = 256;
/// Independent accumulators per block, so the loop vectorises.
const LANES: usize = 8;

/// `f` over `v`: blocks of [`BLOCK`] folded in [`LANES`] interleaved
/// lanes, blocks and lanes combined pairwise, so rounding error grows with
/// `BLOCK / LANES` plus the log of the length (as on the GPU's tree
/// reductions), not with the length. The order is fixed by `LANES`, not
/// by the vector width the loop runs at.
#[inline(always)]
fn tree<T: Copy>(v: &[T], id: T, f: &impl Fn(T, T) -> T) -> T {
    if v.len() <= BLOCK {
        return block(v, id, f);
    }
    // The blocks' values (a tile's segment has at most 64 blocks), then
    // their pairwise fold, out of line: it runs once per segment.
    // (A plain loop: an iterator's `collect` may leave the blocks' fold
    // out of line, compiled for the baseline width.)
    let mut parts = SmallVec::<[T; 64]>::new();
    for b in v.chunks(BLOCK) {
        parts.push(block(b, id, f));
    }
    pairwise(&parts, f)
}

/// Folds one block of at most [`BLOCK`] values in [`LANES`] lanes.
#[inline(always)]
fn block<T: Copy>(v: &[T], id: T, f: &impl Fn(T, T) -> T) -> T {
    let mut acc = [id; LANES];
    let mut it = v.chunks_exact(LANES);
    for c in &mut it {
        for l in 0..LANES {
            acc[l] = f(acc[l], c[l]);
        }
    }
    for (l, x) in it.remainder().iter().enumerate() {
        acc[l] = f(acc[l], *x);
    }
    let a = [
        f(acc[0], acc[1]),
        f(acc[2], acc[3]),
        f(acc[4], acc[5]),
        f(acc[6], acc[7]),
    ];
    f(f(a[0], a[1]), f(a[2], a[3]))
}

/// `f` over `parts` (at least one), halves first (the left one the
/// larger), recursively.
fn pairwise<T: Copy>(parts: &[T], f: &impl Fn(T, T) -> T) -> T {
    if parts.len() == 1 {
        return parts[0];
    }
    let (l, r) = parts.split_at(parts.len().div_ceil(2));
    f(pairwise(l, f), pairwise(r, f))
}

/// `n` copies of `op`'s identity in `dt`.
pub fn identity<'a>(op: ReduceOp, dt: DType, n: usize) -> Vals<'a> {
    let mut v = Vals::default();
    match class(dt) {
        Class::F32 => v.f32().resize(n, op.identity(dt) as f32),
        Class::F64 => v.f64().resize(n, op.identity(dt)),
        Class::I64 => v.i64().resize(n, op.identity_int(dt)),
    }
    v
}

/// Calls `$body` with `$c` bound to the constant [`ReduceOp`] equal to
/// `$op`, so its `combine` folds to one case inside the lanes.
macro_rules! with_reduce {
    ($op:expr, $c:ident => $body:expr) => {
        match $op {
            ReduceOp::Sum => {
                const $c: ReduceOp = ReduceOp::Sum;
                $body
            }
            ReduceOp::Prod => {
                const $c: ReduceOp = ReduceOp::Prod;
                $body
            }
            ReduceOp::Max => {
                const $c: ReduceOp = ReduceOp::Max;
                $body
            }
            ReduceOp::Min => {
                const $c: ReduceOp = ReduceOp::Min;
                $body
            }
        }
    };
}

/// Folds each of the `segs` segments of `len` values of `v` into `acc[s]`.
#[inline(always)]
fn fold_each<T: Copy>(
    v: &[T],
    acc: &mut [T],
    segs: usize,
    len: usize,
    id: T,
    f: impl Fn(T, T) -> T,
) {
    for (s, a) in acc.iter_mut().enumerate().take(segs) {
        *a = f(*a, tree(&v[s * len..(s + 1) * len], id, &f));
    }
}

/// [`fold_each`] for a float `Max` (`max`) or `Min`, NaN-propagating as
/// [`ReduceOp::combine`]: the blocks fold with a plain comparison, which
/// vectorises (the reference's NaN test does not) and which on values
/// without NaN picks what `combine` picks (the first operand on ties of
/// `-0` and `+0`), so in the same order the same value; a separate,
/// vectorised scan makes a segment holding a NaN give `nan`, the
/// reference's NaN.
#[inline(always)]
fn fold_extreme<T: Copy + PartialOrd>(
    v: &[T],
    acc: &mut [T],
    segs: usize,
    len: usize,
    id: T,
    max: bool,
    nan: T,
) {
    if max {
        fold_picked(v, acc, segs, len, id, nan, |a, x| if x > a { x } else { a });
    } else {
        fold_picked(v, acc, segs, len, id, nan, |a, x| if x < a { x } else { a });
    }
}

/// [`fold_extreme`] with `pick` choosing between two values without NaN.
#[inline(always)]
fn fold_picked<T: Copy + PartialOrd>(
    v: &[T],
    acc: &mut [T],
    segs: usize,
    len: usize,
    id: T,
    nan: T,
    pick: impl Fn(T, T) -> T,
) {
    // `x != x`: `x` is NaN.
    #[allow(clippy::eq_op)]
    let is_nan = |x: T| x != x;
    for (s, a) in acc.iter_mut().enumerate().take(segs) {
        let seg = &v[s * len..(s + 1) * len];
        // Or-folded in a `u32` (not `any`, nor a `bool`), so that it
        // vectorises.
        let seg_nan = seg.iter().fold(0u32, |o, x| o | u32::from(is_nan(*x)));
        *a = if is_nan(*a) || seg_nan != 0 {
            nan
        } else {
            pick(*a, tree(seg, id, &pick))
        };
    }
}

/// Folds each of the `segs` segments of `len` values of `v` (of `dt`'s
/// class) into `acc[s]`. `F32` values fold in `f64`, rounded once per
/// step (for sums and products exactly the `f32` operation); half
/// accumulators round to their dtype at every step, as the interpreter's.
pub fn fold_segments(op: ReduceOp, dt: DType, v: &Vals, segs: usize, len: usize, acc: &mut Vals) {
    fold_segments_at(simd::level(), op, dt, v, segs, len, acc);
}

/// [`fold_segments`] at vector width `level` (one the CPU supports): the
/// same fold order, so the same values, at every level.
pub fn fold_segments_at(
    level: Level,
    op: ReduceOp,
    dt: DType,
    v: &Vals,
    segs: usize,
    len: usize,
    acc: &mut Vals,
) {
    let extreme = matches!(op, ReduceOp::Max | ReduceOp::Min);
    match (v, acc) {
        (Vals::F32(_) | Vals::F32In(_), Vals::F32(acc)) if dt == DType::F32 && extreme => {
            let id = op.identity(dt) as f32;
            let max = op == ReduceOp::Max;
            vectorised!(
                level,
                fold_extreme(v.f32s(), acc, segs, len, id, max, f32::NAN)
            )
        }
        (Vals::F64(v), Vals::F64(acc)) if extreme => {
            let (id, max) = (op.identity(dt), op == ReduceOp::Max);
            vectorised!(level, fold_extreme(v, acc, segs, len, id, max, f64::NAN))
        }
        (Vals::F32(_) | Vals::F32In(_), Vals::F32(acc)) => {
            let v = v.f32s();
            let id = op.identity(dt) as f32;
            if dt == DType::F32 {
                with_reduce!(op, OP => vectorised!(level, fold_each(
                    v, acc, segs, len, id, |a: f32, x: f32| OP.combine(a as f64, x as f64) as f32)))
            } else {
                vectorised!(
                    level,
                    fold_each(v, acc, segs, len, id, |a: f32, x: f32| {
                        op.fold(dt, a as f64, x as f64) as f32
                    })
                )
            }
        }
        (Vals::F64(v), Vals::F64(acc)) => with_reduce!(op, OP => vectorised!(level, fold_each(
            v, acc, segs, len, OP.identity(dt), |a, x| OP.combine(a, x)))),
        (Vals::I64(v), Vals::I64(acc)) => vectorised!(level, {
            fold_each(v, acc, segs, len, op.identity_int(dt), |a, x| {
                op.fold_int(dt, a, x)
            })
        }),
        _ => unreachable!("a reduction's operand has its dtype's class"),
    }
}

/// Folds partial results `part` into `acc`, value by value.
pub fn combine(op: ReduceOp, dt: DType, acc: &mut Vals, part: &Vals) {
    let n = part.len();
    fold_segments(op, dt, part, n, 1, acc);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in `[-1, 1)` (a 64-bit LCG).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// `op` over `segs` segments of `len` values at `level`.
    fn fold(
        level: Level,
        op: ReduceOp,
        dt: DType,
        v: &Vals,
        segs: usize,
        len: usize,
    ) -> Vals<'static> {
        let mut acc = identity(op, dt, segs);
        fold_segments_at(level, op, dt, v, segs, len, &mut acc);
        acc
    }

    #[test]
    fn folds_match_the_f64_reference_and_the_baseline_at_every_level() {
        // Lengths around the lanes, the block and several blocks.
        for (segs, len) in [
            (1, 0),
            (3, 1),
            (2, 7),
            (5, 9),
            (1, 256),
            (2, 257),
            (1, 16384),
            (1, 1031),
        ] {
            let mut v = values(segs * len, len as u64);
            if len > 3 {
                // Signed zeros and infinities in the extremes' way.
                v[1] = -0.0;
                v[2] = f32::INFINITY;
                v[3] = f32::NEG_INFINITY;
            }
            let vals = Vals::F32(v.clone());
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
                let base = fold(Level::Sse2, op, DType::F32, &vals, segs, len);
                for level in simd::levels() {
                    let got = fold(level, op, DType::F32, &vals, segs, len);
                    for s in 0..segs {
                        let seg = &v[s * len..(s + 1) * len];
                        let g = got.f32s()[s];
                        assert_eq!(
                            g.to_bits(),
                            base.f32s()[s].to_bits(),
                            "{level:?} {op:?} {len}"
                        );
                        let want = seg
                            .iter()
                            .fold(op.identity(DType::F32), |a, x| op.combine(a, *x as f64));
                        match op {
                            ReduceOp::Sum if want.is_finite() => {
                                // Pairwise in f32: a few roundings of the
                                // largest partial sum, |x| <= 1.
                                let tol = 1e-6 * len as f64 + 1e-6;
                                assert!(
                                    (g as f64 - want).abs() <= tol,
                                    "{level:?} sum {g} vs {want}"
                                );
                            }
                            _ => assert!(
                                g as f64 == want || (g.is_nan() && want.is_nan()),
                                "{level:?} {op:?} {g} vs {want}"
                            ),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn extremes_propagate_nan_and_integers_are_exact_at_every_level() {
        let mut v = values(1000, 7);
        v[517] = f32::NAN;
        let vals = Vals::F32(v);
        let ints = Vals::I64((0..1000).map(|i| (i * 7919) % 1013 - 500).collect());
        let want_sum: i64 = ints.ints().iter().sum();
        for level in simd::levels() {
            for op in [ReduceOp::Max, ReduceOp::Min] {
                // The NaN's segment only.
                let got = fold(level, op, DType::F32, &vals, 4, 250);
                let nans: Vec<bool> = got.f32s().iter().map(|x| x.is_nan()).collect();
                assert_eq!(nans, [false, false, true, false], "{level:?} {op:?}");
                assert_eq!(
                    got.f32s()[2].to_bits(),
                    f32::NAN.to_bits(),
                    "the reference's NaN"
                );
                // A NaN accumulator stays NaN.
                let mut acc = Vals::F32(vec![f32::NAN]);
                fold_segments_at(
                    level,
                    op,
                    DType::F32,
                    &Vals::F32(vec![1.0; 40]),
                    1,
                    40,
                    &mut acc,
                );
                assert!(acc.f32s()[0].is_nan(), "{level:?} {op:?}");
            }
            let got = fold(level, ReduceOp::Sum, DType::I64, &ints, 1, 1000);
            assert_eq!(got.ints(), [want_sum], "{level:?}");
            let got = fold(level, ReduceOp::Max, DType::I32, &ints, 2, 500);
            assert_eq!(got.ints(), [511, 512], "{level:?}");
        }
    }
}
