//! Reductions: each segment (a row's part in a chunk) folded blockwise
//! and pairwise, then the partial results folded into each row's
//! accumulator in chunk order. Every fold step is [`ReduceOp::fold`] /
//! [`ReduceOp::fold_int`], the interpreter's; only the order differs, so
//! float results agree within rounding and integer ones (wrapping sums
//! and products, max, min: all associative) bit for bit.

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
/// reductions), not with the length.
#[inline(always)]
fn tree<T: Copy>(v: &[T], id: T, f: &impl Fn(T, T) -> T) -> T {
    if v.len() > BLOCK {
        // Split at a block boundary so blocks stay whole.
        let half = v.len().div_ceil(2 * BLOCK) * BLOCK;
        let (l, r) = v.split_at(half.min(v.len()));
        return f(tree(l, id, f), tree(r, id, f));
    }
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

/// Folds each of the `segs` segments of `len` values of `v` (of `dt`'s
/// class) into `acc[s]`. `F32` values fold in `f64`, rounded once per
/// step (for sums and products exactly the `f32` operation); half
/// accumulators round to their dtype at every step, as the interpreter's.
pub fn fold_segments(op: ReduceOp, dt: DType, v: &Vals, segs: usize, len: usize, acc: &mut Vals) {
    match (v, acc) {
        (Vals::F32(_) | Vals::F32In(_), Vals::F32(acc)) => {
            let v = v.f32s();
            let id = op.identity(dt) as f32;
            if dt == DType::F32 {
                with_reduce!(op, OP => fold_each(v, acc, segs, len, id, |a: f32, x: f32| {
                    OP.combine(a as f64, x as f64) as f32
                }))
            } else {
                fold_each(v, acc, segs, len, id, |a: f32, x: f32| {
                    op.fold(dt, a as f64, x as f64) as f32
                })
            }
        }
        (Vals::F64(v), Vals::F64(acc)) => with_reduce!(op, OP => fold_each(
            v, acc, segs, len, OP.identity(dt), |a, x| OP.combine(a, x))),
        (Vals::I64(v), Vals::I64(acc)) => {
            fold_each(v, acc, segs, len, op.identity_int(dt), |a, x| {
                op.fold_int(dt, a, x)
            })
        }
        _ => unreachable!("a reduction's operand has its dtype's class"),
    }
}

/// Folds partial results `part` into `acc`, value by value.
pub fn combine(op: ReduceOp, dt: DType, acc: &mut Vals, part: &Vals) {
    let n = part.len();
    fold_segments(op, dt, part, n, 1, acc);
}
