//! Elementwise instructions as tight loops over typed slices. Every op's
//! value is [`crate::ops`]'s scalar reference: the loops call
//! `UnaryOp::eval` / `BinaryOp::eval` with the op a constant (the
//! `with_*` macros), so the match folds away and simple ops vectorise; a
//! float op of dtype `F32` is evaluated in `f64` and rounded once, which
//! for `+ - * /` and `sqrt` is exactly the `f32` operation. The ops with
//! code of their own are `F32` `exp` and the activations built on it
//! ([`exp_ops`]).

use std::borrow::Cow;
use std::mem::MaybeUninit;

use crate::exec::exp_ops;
use crate::exec::simd::{self, vectorised};
use crate::exec::vals::{class, convert, write_map, write_zip, Class, Sink, Vals};
use crate::ops::{BinaryOp, UnaryOp};
use crate::DType;

/// One operand of an instruction evaluated over `segs` segments of `len`
/// points: a value per point, per segment (a row-level value read by an
/// element-level instruction), or one value for all.
#[derive(Clone, Copy)]
pub enum Src<'a, T> {
    /// `segs * len` values.
    Full(&'a [T]),
    /// One value per segment.
    PerSeg(&'a [T]),
    /// One value.
    One(T),
}

impl<'a, T: Copy> Src<'a, T> {
    /// The operand at points `lo..lo + n` of segments `s0..s0 + k` (of
    /// `len` points each; `k > 1` only for whole segments).
    pub fn piece(self, len: usize, s0: usize, k: usize, lo: usize, n: usize) -> Src<'a, T> {
        match self {
            Src::Full(v) => Src::Full(&v[s0 * len + lo..(s0 + k - 1) * len + lo + n]),
            Src::PerSeg(v) => Src::PerSeg(&v[s0..s0 + k]),
            Src::One(c) => Src::One(c),
        }
    }
}

/// How an operand is shaped, before its values are typed.
#[derive(Clone, Copy)]
pub enum Shape {
    /// A value per point.
    Full,
    /// A value per segment.
    PerSeg,
    /// One value.
    One,
}

/// The typed view of `v` (holding `T`s, as `get` extracts) in `shape`.
pub fn src<'a, T: Copy>(v: &'a Vals, shape: Shape, get: fn(&'a Vals) -> &'a [T]) -> Src<'a, T> {
    let s = get(v);
    match shape {
        Shape::Full => Src::Full(s),
        Shape::PerSeg => Src::PerSeg(s),
        Shape::One => Src::One(s[0]),
    }
}

/// The `f32` values of `v`.
pub fn f32s<'v>(v: &'v Vals) -> &'v [f32] {
    v.f32s()
}

/// The `f64` values of `v`.
pub fn f64s<'v>(v: &'v Vals) -> &'v [f64] {
    v.f64s()
}

/// The `i64` values of `v`.
pub fn i64s<'v>(v: &'v Vals) -> &'v [i64] {
    v.ints()
}

/// A segment of an operand: a slice or one value.
enum Part<'a, T> {
    S(&'a [T]),
    C(T),
}

#[inline(always)]
fn part<'a, T: Copy>(s: &Src<'a, T>, seg: usize, len: usize) -> Part<'a, T> {
    match *s {
        Src::Full(v) => Part::S(&v[seg * len..(seg + 1) * len]),
        Src::PerSeg(v) => Part::C(v[seg]),
        Src::One(c) => Part::C(c),
    }
}

/// `f(a, b)` at every point of `segs` segments of `len` points, into
/// `out` (appended to a vector, or over an output's elements), at the
/// executor's vector width ([`simd`]).
#[inline(always)]
pub fn zip2<A: Copy, B: Copy, O: Copy>(
    a: Src<A>,
    b: Src<B>,
    segs: usize,
    len: usize,
    out: impl Sink<O>,
    f: impl Fn(A, B) -> O,
) {
    out.fill(segs * len, |d| {
        vectorised!(simd::level(), zip2_in(a, b, len, d, &f))
    });
}

/// [`zip2`]'s loops, over `out`'s segments of `len` slots.
#[inline(always)]
fn zip2_in<A: Copy, B: Copy, O: Copy>(
    a: Src<A>,
    b: Src<B>,
    len: usize,
    out: &mut [MaybeUninit<O>],
    f: &impl Fn(A, B) -> O,
) {
    if len == 0 {
        return;
    }
    for (s, o) in out.chunks_exact_mut(len).enumerate() {
        match (part(&a, s, len), part(&b, s, len)) {
            (Part::S(x), Part::S(y)) => write_zip(o, x, y, f),
            (Part::S(x), Part::C(y)) => write_map(o, x, |x| f(x, y)),
            (Part::C(x), Part::S(y)) => write_map(o, y, |y| f(x, y)),
            (Part::C(x), Part::C(y)) => o.fill(MaybeUninit::new(f(x, y))),
        }
    }
}

/// `f(a)` at every point of `segs` segments of `len` points.
#[inline(always)]
pub fn map1<A: Copy, O: Copy>(
    a: Src<A>,
    segs: usize,
    len: usize,
    out: impl Sink<O>,
    f: impl Fn(A) -> O,
) {
    zip2(a, Src::One(()), segs, len, out, |x, _| f(x));
}

/// Calls `$body` with `$c` bound to the constant [`UnaryOp`] equal to
/// `$op`, so the op's `eval` folds to its one case inside loops.
macro_rules! with_unary {
    ($op:expr, $c:ident => $body:expr) => {
        with_unary!(@ $op, $c, $body, Neg Abs Exp Exp2 Log Log2 Sqrt Rsqrt Recip Sin Cos Tanh
            Sigmoid Relu Gelu GeluTanh Silu Square Not RoundTf32 Erf Log1p Expm1 Floor Ceil
            Round Trunc Sign BitNot)
    };
    (@ $op:expr, $c:ident, $body:expr, $($v:ident)*) => {
        match $op {
            $(UnaryOp::$v => {
                const $c: UnaryOp = UnaryOp::$v;
                $body
            })*
        }
    };
}

/// [`with_unary`] for [`BinaryOp`].
macro_rules! with_binary {
    ($op:expr, $c:ident => $body:expr) => {
        with_binary!(@ $op, $c, $body, Add Sub Mul Div Pow Max Min Lt Le Gt Ge Eq Ne And Or
            Atan2 Fmod Remainder FloorDiv BitAnd BitOr BitXor Shl Shr)
    };
    (@ $op:expr, $c:ident, $body:expr, $($v:ident)*) => {
        match $op {
            $(BinaryOp::$v => {
                const $c: BinaryOp = BinaryOp::$v;
                $body
            })*
        }
    };
}

/// `op` of an operand of dtype `from` into `out` (dtype `dt`), as
/// [`crate::column::Col::unary`]: converted to `dt` first (to `Bool` for
/// `Not`).
#[allow(clippy::too_many_arguments)]
pub fn unary(
    op: UnaryOp,
    a: &Vals,
    shape: Shape,
    from: DType,
    dt: DType,
    segs: usize,
    len: usize,
    out: &mut Vals,
) {
    let cd = if op == UnaryOp::Not { DType::Bool } else { dt };
    let a = convert(a, from, cd);
    match class(cd) {
        Class::F32 if dt == DType::F32 => unary_f32(op, src(&a, shape, f32s), segs, len, out.f32()),
        Class::F32 if exp_ops::covers(op) => {
            // A half's exp or activation: the `f32` polynomial's value
            // rounded to the half (within its rounding of the reference's,
            // at a twentieth of the cost).
            let o = out.f32();
            unary_f32(op, src(&a, shape, f32s), segs, len, &mut *o);
            for v in o.iter_mut() {
                *v = dt.round(*v as f64) as f32;
            }
        }
        Class::F32 => map1(src(&a, shape, f32s), segs, len, out.f32(), |x| {
            dt.round(op.eval(x as f64)) as f32
        }),
        Class::F64 => with_unary!(op, OP => map1(
            src(&a, shape, f64s), segs, len, out.f64(), |x| OP.eval(x))),
        Class::I64 => map1(src(&a, shape, i64s), segs, len, out.i64(), |x| {
            op.eval_int(dt, x)
        }),
    }
}

/// `op(a, b)` for operands of dtypes `adt`, `bdt` into `out` (dtype
/// `dt`), computed in [`BinaryOp::compute_dtype`] as
/// [`crate::column::Col::binary`] does.
#[allow(clippy::too_many_arguments)]
pub fn binary(
    op: BinaryOp,
    (a, ashape, adt): (&Vals, Shape, DType),
    (b, bshape, bdt): (&Vals, Shape, DType),
    dt: DType,
    segs: usize,
    len: usize,
    out: &mut Vals,
) {
    let cd = op.compute_dtype(adt, bdt, dt);
    let (a, b) = (convert(a, adt, cd), convert(b, bdt, cd));
    // Comparisons give bools whatever they compare.
    let rd = if op.is_comparison() { DType::Bool } else { cd };
    let mut r = Vals::default();
    let res = if rd == dt { &mut *out } else { &mut r };
    match class(cd) {
        Class::F32 if op.is_comparison() => with_binary!(op, OP => zip2(
            src(&a, ashape, f32s), src(&b, bshape, f32s), segs, len, res.i64(),
            |x, y| OP.eval(x as f64, y as f64) as i64)),
        Class::F32 if cd == DType::F32 => binary_f32(
            op,
            src(&a, ashape, f32s),
            src(&b, bshape, f32s),
            segs,
            len,
            res.f32(),
        ),
        Class::F32 => zip2(
            src(&a, ashape, f32s),
            src(&b, bshape, f32s),
            segs,
            len,
            res.f32(),
            |x, y| cd.round(op.eval(x as f64, y as f64)) as f32,
        ),
        Class::F64 if op.is_comparison() => with_binary!(op, OP => zip2(
            src(&a, ashape, f64s), src(&b, bshape, f64s), segs, len, res.i64(),
            |x, y| OP.eval(x, y) as i64)),
        Class::F64 => with_binary!(op, OP => zip2(
            src(&a, ashape, f64s), src(&b, bshape, f64s), segs, len, res.f64(),
            |x, y| OP.eval(x, y))),
        Class::I64 => zip2(
            src(&a, ashape, i64s),
            src(&b, bshape, i64s),
            segs,
            len,
            res.i64(),
            |x, y| op.eval_int(cd, x, y),
        ),
    }
    if rd != dt {
        *out = convert(&r, rd, dt).into_owned();
    }
}

/// `op` of `F32` values, giving `F32` values (not `Not`, which gives
/// bools), into `out`: [`unary`]'s loop once its operand is converted,
/// and the whole of an `F32` unary instruction whose operand is `F32`.
pub fn unary_f32(op: UnaryOp, a: Src<f32>, segs: usize, len: usize, out: impl Sink<f32>) {
    if exp_ops::covers(op) {
        let xs = match a {
            Src::Full(v) => Cow::Borrowed(v),
            _ => {
                let mut v = Vec::new();
                map1(a, segs, len, &mut v, |x| x);
                Cow::Owned(v)
            }
        };
        exp_ops::unary(op, &xs, out);
    } else {
        with_unary!(op, OP => map1(a, segs, len, out, |x| OP.eval(x as f64) as f32));
    }
}

/// `op` (not a comparison) of `F32` values computed in `F32`, into `out`:
/// [`binary`]'s loop once its operands are converted, and the whole of an
/// `F32` binary instruction of `F32` operands that computes in `F32`.
pub fn binary_f32(
    op: BinaryOp,
    a: Src<f32>,
    b: Src<f32>,
    segs: usize,
    len: usize,
    out: impl Sink<f32>,
) {
    with_binary!(op, OP => zip2(a, b, segs, len, out, |x, y| OP.eval(x as f64, y as f64) as f32));
}

/// `c ? a : b` at every point (all three with a value per point), `a` and
/// `b` converted from `adt` and `bdt` to `dt`.
pub fn select<'a>(
    c: &Vals,
    (a, adt): (&Vals, DType),
    (b, bdt): (&Vals, DType),
    dt: DType,
) -> Vals<'a> {
    fn pick<T: Copy>(c: &Vals, x: &[T], y: &[T], out: &mut Vec<T>) {
        out.extend((0..x.len()).map(|p| if c.truthy(p) { x[p] } else { y[p] }));
    }
    let (a, b) = (convert(a, adt, dt), convert(b, bdt, dt));
    let mut out = Vals::default();
    match class(dt) {
        Class::F32 => pick(c, a.f32s(), b.f32s(), out.f32()),
        Class::F64 => pick(c, a.f64s(), b.f64s(), out.f64()),
        Class::I64 => pick(c, a.ints(), b.ints(), out.i64()),
    }
    out
}
