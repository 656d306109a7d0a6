//! Typed value vectors, the executor's unit of work: `f32` for `F32` and
//! the half types (every half value is exact in `f32`; each instruction
//! rounds its result to its own dtype, so halves are computed in `f32` and
//! rounded at every step as the GPU does), `f64` for `F64`, `i64` for the
//! integers and `Bool` (exact for every width; each op wraps to its dtype).
//! Conversions follow [`crate::convert`]'s one rule, element by element.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use crate::exec::simd::{self, vectorised};
use crate::DType;

/// Values of one dtype at a run of points; `'a` is the inputs' lifetime.
#[derive(Clone, Debug)]
pub enum Vals<'a> {
    /// `F32` values, and those of the narrow floats (`F16`, `BF16`, FP8).
    F32(Vec<f32>),
    /// `F32` values read in place from an input buffer (a contiguous
    /// load): copying them first would cost more than using them.
    F32In(&'a [f32]),
    /// `F64` values.
    F64(Vec<f64>),
    /// Integer or `Bool` values.
    I64(Vec<i64>),
}

impl Default for Vals<'_> {
    fn default() -> Self {
        Vals::F32(Vec::new())
    }
}

/// How a dtype's values are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// In `f32`.
    F32,
    /// In `f64`.
    F64,
    /// In `i64`.
    I64,
}

/// The class holding `dt`'s values.
pub fn class(dt: DType) -> Class {
    match dt {
        DType::F64 => Class::F64,
        _ if dt.is_float() => Class::F32,
        _ => Class::I64,
    }
}

impl Vals<'_> {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Vals::F32(v) => v.len(),
            Vals::F32In(v) => v.len(),
            Vals::F64(v) => v.len(),
            Vals::I64(v) => v.len(),
        }
    }

    /// The `f32` vector, emptied (reusing this one's allocation when it
    /// already holds `f32`s).
    pub fn f32(&mut self) -> &mut Vec<f32> {
        if !matches!(self, Vals::F32(_)) {
            *self = Vals::F32(Vec::new());
        }
        match self {
            Vals::F32(v) => {
                v.clear();
                v
            }
            _ => unreachable!("just made f32"),
        }
    }

    /// The `f64` vector, emptied.
    pub fn f64(&mut self) -> &mut Vec<f64> {
        if !matches!(self, Vals::F64(_)) {
            *self = Vals::F64(Vec::new());
        }
        match self {
            Vals::F64(v) => {
                v.clear();
                v
            }
            _ => unreachable!("just made f64"),
        }
    }

    /// The `i64` vector, emptied.
    pub fn i64(&mut self) -> &mut Vec<i64> {
        if !matches!(self, Vals::I64(_)) {
            *self = Vals::I64(Vec::new());
        }
        match self {
            Vals::I64(v) => {
                v.clear();
                v
            }
            _ => unreachable!("just made i64"),
        }
    }

    /// The integer values (of an integer or `Bool` instruction).
    pub fn ints(&self) -> &[i64] {
        match self {
            Vals::I64(v) => v,
            _ => unreachable!("an integer instruction holds i64 values"),
        }
    }

    /// The values of an instruction whose dtype is held in `f32`.
    pub fn f32s(&self) -> &[f32] {
        match self {
            Vals::F32(v) => v,
            Vals::F32In(v) => v,
            _ => unreachable!("an f32-class instruction holds f32 values"),
        }
    }

    /// The values of an `F64` instruction.
    pub fn f64s(&self) -> &[f64] {
        match self {
            Vals::F64(v) => v,
            _ => unreachable!("an F64 instruction holds f64 values"),
        }
    }

    /// `n` copies of `c` converted to `dt` (as [`crate::column::Col::splat`]).
    pub fn splat(dt: DType, c: f64, n: usize, out: &mut Vals<'_>) {
        match class(dt) {
            Class::F32 => out.f32().resize(n, dt.round(c) as f32),
            Class::F64 => out.f64().resize(n, c),
            Class::I64 => out.i64().resize(n, dt.saturate(c)),
        }
    }

    /// Whether value `p` is true as a condition (`!= 0`; NaN is true).
    #[inline]
    pub fn truthy(&self, p: usize) -> bool {
        match self {
            Vals::F32(_) | Vals::F32In(_) => self.f32s()[p] != 0.0,
            Vals::F64(v) => v[p] != 0.0,
            Vals::I64(v) => v[p] != 0,
        }
    }

    /// Each value repeated `n` times.
    pub fn repeat_each(&self, n: usize, out: &mut Vals<'_>) {
        fn rep<T: Copy>(v: &[T], n: usize, out: &mut Vec<T>) {
            for x in v {
                out.extend(std::iter::repeat_n(*x, n));
            }
        }
        match self {
            Vals::F32(_) | Vals::F32In(_) => rep(self.f32s(), n, out.f32()),
            Vals::F64(v) => rep(v, n, out.f64()),
            Vals::I64(v) => rep(v, n, out.i64()),
        }
    }

    /// The first `k` values of each of `segs` segments of `len` (`k <=
    /// len`), in order.
    pub fn prefixes(&self, segs: usize, len: usize, k: usize) -> Vals<'static> {
        fn take<T: Copy>(v: &[T], segs: usize, len: usize, k: usize) -> Vec<T> {
            let mut out = Vec::with_capacity(segs * k);
            for s in 0..segs {
                out.extend_from_slice(&v[s * len..s * len + k]);
            }
            out
        }
        match self {
            Vals::F32(_) | Vals::F32In(_) => Vals::F32(take(self.f32s(), segs, len, k)),
            Vals::F64(v) => Vals::F64(take(v, segs, len, k)),
            Vals::I64(v) => Vals::I64(take(v, segs, len, k)),
        }
    }
}

/// The values (of dtype `from`) converted to `to` by the one conversion
/// rule ([`crate::column::Col::to`]'s, element by element); borrowed when
/// the dtypes are equal. At the executor's vector width ([`simd`]).
pub fn convert<'s, 'a>(src: &'s Vals<'a>, from: DType, to: DType) -> Cow<'s, Vals<'a>> {
    if from == to {
        return Cow::Borrowed(src);
    }
    let mut out = Vals::default();
    match src {
        // Every value of a half type is exact in f32 and f64.
        Vals::F32(_) | Vals::F32In(_) => {
            let v = src.f32s();
            match class(to) {
                // `as f32` is `F32`'s rounding; the halves round once from
                // the exact value.
                Class::F32 if to == DType::F32 => {
                    vectorised!(simd::level(), push_map(out.f32(), v, |x| x))
                }
                Class::F32 => push_map(out.f32(), v, |x| to.round(x as f64) as f32),
                Class::F64 => vectorised!(simd::level(), push_map(out.f64(), v, |x| x as f64)),
                Class::I64 => push_map(out.i64(), v, |x| to.saturate(x as f64)),
            }
        }
        Vals::F64(v) => match class(to) {
            Class::F32 if to == DType::F32 => {
                vectorised!(simd::level(), push_map(out.f32(), v, |x| x as f32))
            }
            Class::F32 => push_map(out.f32(), v, |x| to.round(x) as f32),
            Class::F64 => out.f64().extend_from_slice(v),
            Class::I64 => push_map(out.i64(), v, |x| to.saturate(x)),
        },
        Vals::I64(v) => match class(to) {
            Class::F32 => vectorised!(
                simd::level(),
                push_map(out.f32(), v, |x| { to.from_int(x) as f32 })
            ),
            Class::F64 => vectorised!(simd::level(), push_map(out.f64(), v, |x| to.from_int(x))),
            Class::I64 => vectorised!(simd::level(), push_map(out.i64(), v, |x| to.wrap(x))),
        },
    }
    Cow::Owned(out)
}

/// Where a loop's values go: appended to a vector, or over an output's
/// own elements (a store written straight from the instruction that
/// computes its value, with no vector in between).
pub trait Sink<O> {
    /// Calls `fill` with `n` slots, which it must all write (in any
    /// order), and takes them as the next `n` values.
    fn fill(self, n: usize, fill: impl FnOnce(&mut [MaybeUninit<O>]));
}

impl<O> Sink<O> for &mut Vec<O> {
    fn fill(self, n: usize, fill: impl FnOnce(&mut [MaybeUninit<O>])) {
        self.reserve(n);
        let len = self.len();
        fill(&mut self.spare_capacity_mut()[..n]);
        // SAFETY: `fill` wrote the `n` slots after the `len` values
        // (`reserve` made room for them); if it panicked, this is not
        // reached and the vector keeps its `len` values.
        unsafe { self.set_len(len + n) };
    }
}

impl<O: Copy> Sink<O> for &mut [O] {
    fn fill(self, n: usize, fill: impl FnOnce(&mut [MaybeUninit<O>])) {
        assert_eq!(self.len(), n, "a slice sink takes exactly its length");
        // SAFETY: `MaybeUninit<O>` has `O`'s layout, and `fill` only
        // writes initialised values (`MaybeUninit::write`), so the slice
        // stays initialised; `O: Copy` has no drop to skip.
        let slots = unsafe { &mut *(self as *mut [O] as *mut [MaybeUninit<O>]) };
        fill(slots);
    }
}

impl<O> Sink<O> for &mut [MaybeUninit<O>] {
    fn fill(self, n: usize, fill: impl FnOnce(&mut [MaybeUninit<O>])) {
        assert_eq!(self.len(), n, "a slice sink takes exactly its length");
        fill(self);
    }
}

/// `f` of each value of `xs`, appended to `out`. Written into the spare
/// capacity in a plain loop: `Vec::extend` over an iterator adapter may be
/// left out of line, and so compiled for the baseline width only.
#[inline(always)]
pub fn push_map<A: Copy, O>(out: &mut Vec<O>, xs: &[A], f: impl Fn(A) -> O) {
    out.fill(xs.len(), |d| write_map(d, xs, f));
}

/// `f` of each value of `xs` written over `out` (of one length).
#[inline(always)]
pub fn write_map<A: Copy, O>(out: &mut [MaybeUninit<O>], xs: &[A], f: impl Fn(A) -> O) {
    assert_eq!(out.len(), xs.len(), "one slot per value");
    for (o, x) in out.iter_mut().zip(xs) {
        o.write(f(*x));
    }
}

/// `f` of each pair of values of `xs` and `ys` written over `out` (all
/// three of one length), as [`write_map`].
#[inline(always)]
pub fn write_zip<A: Copy, B: Copy, O>(
    out: &mut [MaybeUninit<O>],
    xs: &[A],
    ys: &[B],
    f: impl Fn(A, B) -> O,
) {
    assert!(
        xs.len() == ys.len() && out.len() == xs.len(),
        "operands of one length"
    );
    for ((o, x), y) in out.iter_mut().zip(xs).zip(ys) {
        o.write(f(*x, *y));
    }
}
