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
pub(crate) const BLOCK: usize = 256;
/// Independent accumulators per block, so the loop vectorises.
pub(crate) const LANES: usize = 8;

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

/// The blocks [`tree`] folds a segment of `len` values in: one for a
/// segment of at most [`BLOCK`] (even an empty one), whose value is the
/// tree's.
#[cfg(feature = "llvm-jit")]
pub(crate) fn blocks(len: usize) -> usize {
    len.div_ceil(BLOCK).max(1)
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
/// larger), recursively. Up to four parts (a row of 1024 has four
/// blocks) the same tree written out: the recursion's calls were 2% of
/// a one-thread JIT softmax 4096x1024, whose tiles fold 16 rows' blocks.
#[inline]
fn pairwise<T: Copy>(parts: &[T], f: &impl Fn(T, T) -> T) -> T {
    match *parts {
        [a] => a,
        [a, b] => f(a, b),
        [a, b, c] => f(f(a, b), c),
        [a, b, c, d] => f(f(a, b), f(c, d)),
        _ => {
            let (l, r) = parts.split_at(parts.len().div_ceil(2));
            f(pairwise(l, f), pairwise(r, f))
        }
    }
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
        fold_picked(v, acc, segs, len, id, nan, pick_max);
    } else {
        fold_picked(v, acc, segs, len, id, nan, pick_min);
    }
}

/// `Max`'s fold step on values without NaN: `a` on ties.
#[inline(always)]
fn pick_max<T: PartialOrd>(a: T, x: T) -> T {
    if x > a {
        x
    } else {
        a
    }
}

/// `Min`'s fold step on values without NaN: `a` on ties.
#[inline(always)]
fn pick_min<T: PartialOrd>(a: T, x: T) -> T {
    if x < a {
        x
    } else {
        a
    }
}

/// `op`'s fold step on `F32` values: in `f64`, rounded once (for sums
/// and products exactly the `f32` operation).
#[inline(always)]
fn step_f32(op: ReduceOp) -> impl Fn(f32, f32) -> f32 {
    move |a, x| op.combine(a as f64, x as f64) as f32
}

/// `acc` (a segment's accumulator) after an extreme's fold over the
/// segment, whose values pick to `tree` when none is NaN: `nan` if `acc`
/// or the segment holds a NaN, as [`ReduceOp::combine`] gives.
#[inline(always)]
fn extreme<T: Copy + PartialEq>(acc: T, seg_nan: bool, nan: T, tree: impl FnOnce() -> T) -> T {
    // `x != x`: `x` is NaN.
    #[allow(clippy::eq_op)]
    let acc_nan = acc != acc;
    if acc_nan || seg_nan {
        nan
    } else {
        tree()
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
        *a = extreme(*a, seg_nan != 0, nan, || pick(*a, tree(seg, id, &pick)));
    }
}

/// Folds each of `acc`'s segments from its `n` block values in `parts`
/// (the values [`block`] gives for the segment's [`blocks`]) as
/// [`fold_each`] folds the segment: blocks pairwise, then into `acc[s]`.
#[cfg(feature = "llvm-jit")]
#[inline(always)]
fn fold_parts<T: Copy>(parts: &[T], acc: &mut [T], n: usize, f: impl Fn(T, T) -> T) {
    for (a, seg) in acc.iter_mut().zip(parts.chunks_exact(n)) {
        *a = f(*a, pairwise(seg, &f));
    }
}

/// [`fold_parts`] for a float `Max` or `Min` as [`fold_picked`] folds
/// (a block holding a NaN is NaN: the segment's result is `nan`).
#[cfg(feature = "llvm-jit")]
fn fold_parts_picked<T: Copy + PartialOrd>(
    parts: &[T],
    acc: &mut [T],
    n: usize,
    nan: T,
    pick: impl Fn(T, T) -> T,
) {
    // `x != x`: `x` is NaN.
    #[allow(clippy::eq_op)]
    let is_nan = |x: &T| x != x;
    for (a, seg) in acc.iter_mut().zip(parts.chunks_exact(n)) {
        let seg_nan = seg.iter().any(is_nan);
        *a = extreme(*a, seg_nan, nan, || pick(*a, pairwise(seg, &pick)));
    }
}

/// Folds each segment of `acc` from `n` block values a segment in
/// `parts`, each a [`BLOCK`] of the segment folded in [`LANES`] lanes as
/// [`fold_segments`] folds it (the LLVM JIT computes them in its loops),
/// into the same values [`fold_segments`] gives. `F32` and `F64`
/// reductions only (halves round at every step, integers take
/// [`fold_segments`]).
#[cfg(feature = "llvm-jit")]
pub fn fold_blocks(op: ReduceOp, dt: DType, parts: &Vals, n: usize, acc: &mut Vals) {
    match (op, parts, acc) {
        (ReduceOp::Max, Vals::F32(p), Vals::F32(acc)) if dt == DType::F32 => {
            fold_parts_picked(p, acc, n, f32::NAN, pick_max)
        }
        (ReduceOp::Min, Vals::F32(p), Vals::F32(acc)) if dt == DType::F32 => {
            fold_parts_picked(p, acc, n, f32::NAN, pick_min)
        }
        (ReduceOp::Max, Vals::F64(p), Vals::F64(acc)) => {
            fold_parts_picked(p, acc, n, f64::NAN, pick_max)
        }
        (ReduceOp::Min, Vals::F64(p), Vals::F64(acc)) => {
            fold_parts_picked(p, acc, n, f64::NAN, pick_min)
        }
        (_, Vals::F32(p), Vals::F32(acc)) if dt == DType::F32 => {
            fold_parts(p, acc, n, step_f32(op))
        }
        (_, Vals::F64(p), Vals::F64(acc)) => fold_parts(p, acc, n, |a, x| op.combine(a, x)),
        _ => unreachable!("block values of F32 and F64 reductions"),
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
                    v, acc, segs, len, id, step_f32(OP))))
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

    /// The written-out small cases of `pairwise` are its recursive tree:
    /// the bracketing of `a`, `b`, ... for every length up to nine.
    #[test]
    fn pairwise_brackets_halves_first() {
        fn tree(p: &[u64]) -> String {
            match p {
                [a] => format!("{a}"),
                _ => {
                    let (l, r) = p.split_at(p.len().div_ceil(2));
                    format!("({} {})", tree(l), tree(r))
                }
            }
        }
        // Values encode their bracketing: each leaf a digit, each step
        // a new number looked up in `steps`.
        for n in 1..=9u64 {
            let leaves: Vec<u64> = (0..n).collect();
            let steps = std::cell::RefCell::new(Vec::<String>::new());
            let name = |x: u64| {
                let s = steps.borrow();
                if x < 100 {
                    x.to_string()
                } else {
                    s[(x - 100) as usize].clone()
                }
            };
            let f = |a: u64, b: u64| {
                let t = format!("({} {})", name(a), name(b));
                let mut s = steps.borrow_mut();
                s.push(t);
                99 + s.len() as u64
            };
            let r = pairwise(&leaves, &f);
            assert_eq!(name(r), tree(&leaves), "{n} parts");
        }
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

    #[cfg(feature = "llvm-jit")]
    #[test]
    fn folding_the_blocks_values_is_folding_the_segments() {
        // What the LLVM JIT hands over: each segment's block values.
        for (segs, len) in [
            (3, 0),
            (2, 1),
            (2, 9),
            (1, 256),
            (3, 257),
            (1, 1031),
            (2, 4097),
        ] {
            let mut v = values(segs * len, len as u64 + 1);
            if len > 600 {
                // A NaN in the last segment's third block; zeros tied
                // with the max in the first.
                v[(segs - 1) * len + 600] = f32::NAN;
                v.iter_mut().take(len).for_each(|x| *x = -x.abs());
                (v[5], v[300]) = (-0.0, 0.0);
            }
            let n = blocks(len);
            for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
                let (id, f32_step) = (op.identity(DType::F32) as f32, step_f32(op));
                let f = |a: f32, x: f32| match (op, a.is_nan() || x.is_nan()) {
                    (ReduceOp::Max, false) => pick_max(a, x),
                    (ReduceOp::Min, false) => pick_min(a, x),
                    _ => f32_step(a, x),
                };
                let parts: Vec<f32> = (0..segs)
                    .flat_map(|s| {
                        let seg = &v[s * len..(s + 1) * len];
                        let chunks: Vec<&[f32]> = match len {
                            0 => vec![seg],
                            _ => seg.chunks(BLOCK).collect(),
                        };
                        chunks
                            .into_iter()
                            .map(|b| block(b, id, &f))
                            .collect::<Vec<_>>()
                    })
                    .collect();
                assert_eq!(parts.len(), segs * n);
                let want = fold(
                    Level::Sse2,
                    op,
                    DType::F32,
                    &Vals::F32(v.clone()),
                    segs,
                    len,
                );
                let mut got = identity(op, DType::F32, segs);
                fold_blocks(op, DType::F32, &Vals::F32(parts), n, &mut got);
                for (g, w) in got.f32s().iter().zip(want.f32s()) {
                    let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
                    assert!(same, "{op:?} {segs}x{len}: {g} vs {w}");
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
