//! `F32` ops computed from one branch-free `e^t` polynomial ([`exp_poly`]):
//! `exp` itself (the hot op of softmax) and the activations that are a
//! few operations around an exponential, `sigmoid`, `silu`, `tanh`,
//! `gelu_tanh`, and `erf` and the exact `gelu` (PyTorch's default). The
//! reference ([`UnaryOp::eval`]) evaluates them in `f64` through libm,
//! about 20 ns a value, which made a GELU epilogue cost as much as the
//! 512x1024x4096 product before it.
//!
//! Each op is a few operations around `e^t` for an argument `t(x)`.
//! Every operation is an `f32` one, the fused multiply-adds as `mul_add`
//! (one rounding at every vector width: the instruction on AVX2 and
//! AVX-512, libm's `fmaf` at SSE2), so every width, and the LLVM JIT,
//! which emits the same operations in the same order (`llvm::emit`), give
//! the same bits. `exp`'s values whose argument leaves `+-EXP_RANGE`
//! (overflow, subnormal results, infinities, NaN) are redone by the
//! reference in a second pass; the activations are computed outside the
//! range too ([`ratio`], [`tanh`]), and only NaN is redone.
//!
//! Accuracy against the correctly rounded `f32` of the exact value, over
//! every 7th `f32` of each domain: `exp`, `sigmoid` and `silu` within 2
//! ulp (3 where the result is below `2^-125`), `tanh` within 1 ulp.
//! `gelu_tanh` is `x / (1 + e^-2u)` with `u = sqrt(2/pi) (x + 0.044715
//! x^3)` (the reference's `0.5 x (1 + tanh u)` rewritten so it does not
//! cancel for negative `x`); the rounding of `2u` moves `e^-2u` by up to
//! `2e-7 |2u|` relative, so it is within 2 ulp near zero and within `2e-5`
//! relative at `x = -9.9`, where the result is `1e-37` (0.8% of values
//! over 2 ulp). There the reference's own formula cancels in `1 + tanh u`
//! (it gives `-0` below `x = -7`), and the GPU's `f32` one does too.
//!
//! `log` and `log2` are the GPU's `f32` sequences too (`ptx::math::log`: `x =
//! 2^e m`, `ln m = 2 atanh((m - 1) / (m + 1))` by its series), `log` within 2
//! ulp and `log2` within 3 (over every 997th positive normal `f32` and 2M
//! points of `[0.5, 2.5]`), for normal positive finite `x`; zeros, negatives,
//! subnormals, infinities and NaN are redone by the reference. `log1p` is
//! `ptx::special::log1p` around that `log`, within 3 ulp (2M points of
//! `[-0.999, 1]` and of `[-1e-3, 1e-3]` besides). `expm1` is
//! `ptx::special::expm1`, within 2 ulp; only NaN is redone.
//!
//! `erf` and `gelu` are the GPU's `f32` sequences (`ptx::special`, the fits
//! of [`crate::fits`]) with this module's `exp`: `erf` within 2 ulp (over
//! 2M points of `[-6, 6]`; the test allows 3); `gelu` within 3 ulp for `x >=
//! 0`, and on the negative side, where `Phi(x)` comes from `erfc` and the
//! roundings of `x / sqrt 2` and of the tail's exponent grow like `x^2 2^-24`
//! relative, within 16 ulp down to -2.8 and 64 down to -5.6; below that it is
//! `-0` (the exact value is under `1e-7` there, and the reference's `1 + erf`
//! cancels to 0 a little further on). Neither is ever redone: the tail's
//! exponent stays in `exp`'s range, and NaN flows through the small-argument
//! polynomial.

use crate::exec::simd::{self, vectorised, Level};
use crate::exec::vals::{write_map, Sink};
use crate::fits::{
    ERFC_CENTRE, ERFC_END, ERFC_LOG, ERF_SMALL, ERF_SPLIT, EXPM1, EXPM1_RANGE, LN2_HI, LN2_LO,
};
use crate::ops::UnaryOp;

/// Magnitudes of the exponent argument up to which [`exp_poly`] applies:
/// `2^n` stays a normal `f32` and the result neither overflows nor goes
/// subnormal.
pub const EXP_RANGE: f32 = 87.0;

/// Whether [`exp_poly`] applies to `t` (false for NaN).
#[inline(always)]
fn in_range(t: f32) -> bool {
    t.abs() <= EXP_RANGE
}

/// `2 sqrt(2/pi)`: `gelu_tanh`'s exponent is `-GELU_K (x + GELU_C x^3)`.
pub const GELU_K: f32 = 1.595_769;
/// The cubic's coefficient in `gelu_tanh`.
pub const GELU_C: f32 = 0.044_715;
/// Below this magnitude `tanh` is Cephes' odd polynomial in `x`, above it
/// `1 - 2 / (e^2|x| + 1)`, which cancels less there.
pub const TANH_SMALL: f32 = 0.625;
/// Cephes' `tanhf` coefficients of `x^2`, highest degree first:
/// `tanh x = x + x^3 P(x^2)` below [`TANH_SMALL`].
pub const TANH_POLY: [f32; 5] = [
    -5.704_988_7e-3,
    2.063_909e-2,
    -5.373_971_6e-2,
    1.333_144_2e-1,
    -3.333_328e-1,
];

/// Whether `op` of `F32` values is computed here ([`unary`]).
pub fn covers(op: UnaryOp) -> bool {
    matches!(
        op,
        UnaryOp::Exp
            | UnaryOp::Sigmoid
            | UnaryOp::Silu
            | UnaryOp::Tanh
            | UnaryOp::GeluTanh
            | UnaryOp::Erf
            | UnaryOp::Gelu
            | UnaryOp::Log
            | UnaryOp::Log2
            | UnaryOp::Log1p
            | UnaryOp::Expm1
    )
}

/// Whether some values of `op` ([`covers`]) are redone by the reference:
/// not `erf`'s or `gelu`'s, whose exponent never leaves `exp`'s range.
pub fn redoes(op: UnaryOp) -> bool {
    !matches!(op, UnaryOp::Erf | UnaryOp::Gelu)
}

/// `e^x` of every value of `xs`, appended to `out` (see [`unary`]).
pub fn exp_f32(xs: &[f32], out: impl Sink<f32>) {
    unary(UnaryOp::Exp, xs, out);
}

/// `op` ([`covers`]) of every value of `xs`, appended to `out`.
///
/// # Panics
/// If `op` is not one [`covers`] takes (a caller bug).
pub fn unary(op: UnaryOp, xs: &[f32], out: impl Sink<f32>) {
    unary_at(simd::level(), op, xs, out);
}

/// [`unary`] at vector width `level` (one the CPU supports); every level
/// gives the same values.
pub fn unary_at(level: Level, op: UnaryOp, xs: &[f32], out: impl Sink<f32>) {
    // The closures are inlined by force: one left out of line is compiled
    // for the baseline, and a call in the loop keeps it scalar.
    match op {
        UnaryOp::Exp => through_exp(
            level,
            op,
            xs,
            out,
            #[inline(always)]
            |x| (x, exp_poly(x)),
        ),
        UnaryOp::Sigmoid => through_exp(
            level,
            op,
            xs,
            out,
            #[inline(always)]
            |x| ratio(1.0, -x),
        ),
        UnaryOp::Silu => through_exp(
            level,
            op,
            xs,
            out,
            #[inline(always)]
            |x| ratio(x, -x),
        ),
        UnaryOp::Tanh => through_exp(level, op, xs, out, tanh),
        UnaryOp::GeluTanh => through_exp(
            level,
            op,
            xs,
            out,
            #[inline(always)]
            |x| ratio(x, gelu_arg(x)),
        ),
        UnaryOp::Erf => through_exp(level, op, xs, out, erf),
        UnaryOp::Gelu => through_exp(level, op, xs, out, gelu),
        UnaryOp::Log => through_exp(level, op, xs, out, log),
        UnaryOp::Log2 => through_exp(level, op, xs, out, log2),
        UnaryOp::Log1p => through_exp(level, op, xs, out, log1p),
        UnaryOp::Expm1 => through_exp(level, op, xs, out, expm1),
        _ => panic!("exp_ops: {op:?} has no exp-based path"),
    }
}

/// `2^64` and `2^-64`: [`ratio`] scales `e^-t` up by the first where it
/// is below the normal range, and its result down by the second.
const TWO_64: f32 = 18_446_744_073_709_551_616.0;
/// See [`TWO_64`].
pub const TWO_M64: f32 = 1.0 / TWO_64;

/// Magnitudes of `-t` up to which [`ratio`]'s scaled `2^64 e^-t` is a
/// normal `f32` (its exponent's biased `n + 191` at least 1); beyond it
/// the result is below `2^-150 |num|` and taken as zero.
pub const SCALED_RANGE: f32 = 131.0;

/// `(c, num / (1 + e^t))`, with `c` the argument the caller checks: `t`
/// inside `exp`'s range, `0` outside, so that only NaN is redone. Below
/// the range `e^t` is under `2^-125`, far below half an ulp of the 1 it
/// is added to, and the result is `num`; above it the result is `num
/// e^-t` (`1 + e^-t` rounds to 1), computed as `(num * 2^64 e^-t) *
/// 2^-64` from [`exp_core`] so that subnormal results keep their bits
/// (within one step of the subnormals), and zero past [`SCALED_RANGE`].
/// `sigmoid` is `num = 1`, `t = -x`; `silu` `num = x`, `t = -x`;
/// `gelu_tanh` `num = x`, `t = -2u`.
#[inline(always)]
fn ratio(num: f32, t: f32) -> (f32, f32) {
    let high = t > EXP_RANGE;
    let low = t < -EXP_RANGE;
    let c = if high || low { 0.0 } else { t };
    let u = if high { -t } else { c };
    let far = u < -SCALED_RANGE;
    let u = if far { 0.0 } else { u };
    let e = exp_core(u, high);
    let e = if far || low { 0.0 } else { e };
    let v = if high {
        num * e * TWO_M64
    } else {
        num / (1.0 + e)
    };
    (c, v)
}

/// `(c, tanh x)` with `c = 2 |x|` inside `exp`'s range, else `0`: above
/// it `1 - 2 / (e + 1)` is 1, and only NaN is redone. Cephes' odd
/// polynomial below [`TANH_SMALL`], else `1 - 2 / (e^2|x| + 1)`, with
/// `x`'s sign (so `tanh(-0) = -0`).
#[inline(always)]
fn tanh(x: f32) -> (f32, f32) {
    let a = x.abs();
    let t = 2.0 * a;
    let high = t > EXP_RANGE;
    let c = if high { 0.0 } else { t };
    let e = exp_poly(c);
    let large = if high { 1.0 } else { 1.0 - 2.0 / (e + 1.0) };
    let s = x * x;
    let p = TANH_POLY[1..]
        .iter()
        .fold(TANH_POLY[0], |p, c| p.mul_add(s, *c));
    let small = (p * s).mul_add(a, a);
    let r = if a < TANH_SMALL { small } else { large };
    (c, r.copysign(x))
}

/// `gelu_tanh`'s exponent argument, `-2u = -GELU_K (x + GELU_C x^3)`.
#[inline(always)]
fn gelu_arg(x: f32) -> f32 {
    let x3 = x * x * x;
    let inner = x3.mul_add(GELU_C, x);
    inner * -GELU_K
}

/// `(0, erf x)`: `x + x P(x^2)` below [`ERF_SPLIT`], else `+-(1 -
/// erfc |x|)` with `erfc a = e^Q(a)` ([`ErfParts`]), as `ptx::special`.
#[inline(always)]
fn erf(x: f32) -> (f32, f32) {
    let p = erf_parts(x);
    let large = (1.0 - p.tail).copysign(x);
    (0.0, if p.big { large } else { p.small })
}

/// `(0, gelu x)`, the exact GELU `x Phi(x)` with `Phi(x) = (1 + erf(x /
/// sqrt 2)) / 2`, where for `x / sqrt 2 <= -1` `Phi` is half the tail
/// `erfc` itself (no cancellation in `1 + erf`). `gelu(-inf)` is NaN
/// (`-inf * 0`), as in PyTorch.
#[inline(always)]
fn gelu(x: f32) -> (f32, f32) {
    let u = x * std::f32::consts::FRAC_1_SQRT_2;
    let p = erf_parts(u);
    let half_tail = p.tail * 0.5;
    let far = if u > 0.0 { 1.0 - half_tail } else { half_tail };
    let near = p.small.mul_add(0.5, 0.5);
    (0.0, x * if p.big { far } else { near })
}

/// The bits of `sqrt 2` rounded down: [`log`] halves a mantissa above it.
pub const SQRT2_BITS: u32 = 0x3FB5_04F3;
/// The atanh series' coefficients of `s^2`, highest power first: `ln m =
/// 2s + 2s s^2 P(s^2)`.
pub const LOG_SERIES: [f64; 4] = [1.0 / 9.0, 1.0 / 7.0, 1.0 / 5.0, 1.0 / 3.0];

/// `(c, ln x)`, `c` 0 for normal positive finite `x` and NaN otherwise
/// (redone): `e ln 2 + ln m` ([`log_parts`]) in one fused multiply-add,
/// as `ptx::math::log`.
#[inline(always)]
fn log(x: f32) -> (f32, f32) {
    let (c, e, ln_m) = log_parts(x);
    (c, e.mul_add(std::f32::consts::LN_2, ln_m))
}

/// `(c, log2 x)` as [`log`]: `ln m log2(e) + e`.
#[inline(always)]
fn log2(x: f32) -> (f32, f32) {
    let (c, e, ln_m) = log_parts(x);
    (c, ln_m.mul_add(std::f32::consts::LOG2_E, e))
}

/// `(c, ln(1 + x))` as `ptx::special::log1p`: with `u = 1 + x` rounded,
/// `ln(u) x / (u - 1)`, which cancels the rounding of `u` (`u - 1` is
/// exact); `x` itself where `u` is 1. `c` is [`log`]'s of `u` (0 where
/// `u` is 1), so `x <= -1`, `+inf` and NaN are redone.
#[inline(always)]
fn log1p(x: f32) -> (f32, f32) {
    let u = x + 1.0;
    let (c, l) = log(u);
    let one = u == 1.0;
    let v = l * (x / (u - 1.0));
    (if one { 0.0 } else { c }, if one { x } else { v })
}

/// `(c, e^x - 1)` as `ptx::special::expm1`, `c` NaN for NaN (redone),
/// else 0: `x` clamped to [`EXPM1_RANGE`], `x = k ln 2 + r`, `expm1(r) = r
/// P(r)`, then `2 (2^(k-1) expm1(r) + 2^(k-1) - 1/2)` with one rounding
/// inside; zeros as they are (keeping `-0`).
#[inline(always)]
fn expm1(x: f32) -> (f32, f32) {
    let c = if x.is_nan() { f32::NAN } else { 0.0 };
    let xc = x.clamp(EXPM1_RANGE.0 as f32, EXPM1_RANGE.1 as f32);
    let k = (xc * std::f32::consts::LOG2_E).round_ties_even();
    let r = k.mul_add(-LN2_HI, xc);
    let r = k.mul_add(-LN2_LO, r);
    let e = r * horner(r, &EXPM1);
    let s = f32::from_bits(((k as i32 + 126) as u32) << 23);
    let y = s.mul_add(e, s - 0.5);
    (c, if x == 0.0 { x } else { y + y })
}

/// `(c, e, ln m)` for `x = 2^e m` with `m` in `[sqrt(1/2), sqrt 2]`: `ln
/// m = 2 atanh s`, `s = (m - 1) / (m + 1)`, by its series to `s^9`; `c`
/// is 0 for normal positive finite `x` and NaN otherwise (redone).
#[inline(always)]
fn log_parts(x: f32) -> (f32, f32, f32) {
    let normal = (f32::MIN_POSITIVE..f32::INFINITY).contains(&x);
    let c = if normal { 0.0 } else { f32::NAN };
    let bits = x.to_bits();
    let m = (bits & 0x7F_FFFF) | 0x3F80_0000;
    let big = m > SQRT2_BITS;
    let m = if big { m - 0x80_0000 } else { m };
    let e = (bits >> 23) as i32 - 127 + big as i32;
    let mf = f32::from_bits(m);
    let s = (mf - 1.0) / (mf + 1.0);
    let s2 = s * s;
    let p = horner(s2, &LOG_SERIES) * s2;
    let two_s = s + s;
    (c, e as f32, two_s.mul_add(p, two_s))
}

/// What [`erf`] and [`gelu`] share at `x`.
struct ErfParts {
    /// `erf x`, valid below [`ERF_SPLIT`] (NaN for NaN).
    small: f32,
    /// `erfc |x|` from [`ERF_SPLIT`] on, 0 from [`ERFC_END`] on.
    tail: f32,
    /// `|x| >= ERF_SPLIT` (false for NaN).
    big: bool,
}

#[inline(always)]
fn erf_parts(x: f32) -> ErfParts {
    let a = x.abs();
    let small = x.mul_add(horner(x * x, &ERF_SMALL), x);
    // `min` takes 4 for NaN, so the exponent is always in range.
    let q = horner(a.min(ERFC_END as f32) - ERFC_CENTRE as f32, &ERFC_LOG);
    let tail = if a < ERFC_END as f32 {
        exp_poly(q)
    } else {
        0.0
    };
    ErfParts {
        small,
        tail,
        big: a >= ERF_SPLIT as f32,
    }
}

/// `P(z)` for coefficients highest power first, rounded to `f32`, by
/// fused multiply-adds.
#[inline(always)]
fn horner(z: f32, coefs: &[f64]) -> f32 {
    coefs[1..]
        .iter()
        .fold(coefs[0] as f32, |p, c| p.mul_add(z, *c as f32))
}

/// `f(x) = (c, value)` over `xs` in one vectorised pass, then (where `op`
/// [`redoes`] any) the reference for the values whose checked argument
/// `c` [`exp_poly`] does not take.
#[inline(always)]
fn through_exp(
    level: Level,
    op: UnaryOp,
    xs: &[f32],
    out: impl Sink<f32>,
    f: impl Fn(f32) -> (f32, f32) + Copy,
) {
    out.fill(xs.len(), |d| {
        vectorised!(level, {
            write_map(
                d,
                xs,
                #[inline(always)]
                |x| f(x).1,
            );
            // The check in a separate pass (a flag set inside the loop
            // above would keep it from vectorising), by blocks: a flag a
            // value, computed without branches, so that the scalar scan
            // for the values to redo only branches at those (a test of
            // each value's argument branched on the data, and mispredicted
            // at a third of a product's outputs).
            if redoes(op) {
                const BLOCK: usize = 256;
                let mut flags = [0u8; BLOCK];
                for (dc, xc) in d.chunks_mut(BLOCK).zip(xs.chunks(BLOCK)) {
                    let fl = &mut flags[..xc.len()];
                    write_flags(
                        fl,
                        xc,
                        #[inline(always)]
                        |x| !in_range(f(x).0),
                    );
                    if fl.iter().fold(0, |a, f| a | f) != 0 {
                        for ((o, x), f) in dc.iter_mut().zip(xc).zip(fl.iter()) {
                            if *f != 0 {
                                o.write(op.eval(*x as f64) as f32);
                            }
                        }
                    }
                }
            }
        })
    });
}

/// `flag(x)` as 0 or 1 for each value of `xs`, over `out` (of one length).
#[inline(always)]
fn write_flags(out: &mut [u8], xs: &[f32], flag: impl Fn(f32) -> bool) {
    for (o, x) in out.iter_mut().zip(xs) {
        *o = flag(*x) as u8;
    }
}

/// `e^t` for `t` within `+-EXP_RANGE` (any value otherwise, which the
/// caller redoes): `t = n ln 2 + r` with `|r| <= ln2/2` (`ln 2` split in
/// two parts), a degree-6 polynomial for `e^r` (Cephes' `expf`
/// coefficients) and `2^n` built from its exponent bits. Branch-free, so
/// it vectorises; fused multiply-adds are 9 of its 20 operations, which
/// made the exp-bound passes of a softmax faster (BENCHMARKS.md, "CPU").
#[inline(always)]
pub fn exp_poly(t: f32) -> f32 {
    let c = if in_range(t) { t } else { 0.0 };
    exp_core(c, false)
}

/// `e^t`, times `2^64` when `scaled`, for `t` where that is a normal
/// `f32` (no clamp: the callers keep `t` there).
#[inline(always)]
fn exp_core(c: f32, scaled: bool) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // 1.5 * 2^23: adding it rounds to an integer (ties to even) for
    // magnitudes below 2^22, which then sits in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let t = c.mul_add(LOG2E, ROUND);
    let n = t - ROUND;
    let r = (-n).mul_add(LN2_HI, c);
    let r = (-n).mul_add(LN2_LO, r);
    let p = 1.987_569_1e-4_f32;
    let p = p.mul_add(r, 1.398_199_9e-3);
    let p = p.mul_add(r, 8.333_452e-3);
    let p = p.mul_add(r, 4.166_579_6e-2);
    let p = p.mul_add(r, 1.666_666_5e-1);
    let p = p.mul_add(r, 0.5);
    let e = p.mul_add(r * r, r) + 1.0;
    // The biased exponent n + 127 (+ 64 scaled), from t's low bits.
    let sub = if scaled { EXP_SUB_SCALED } else { EXP_SUB };
    let scale = f32::from_bits(t.to_bits().wrapping_sub(sub) << 23);
    e * scale
}

/// What [`exp_core`] subtracts from the bits of `n + 1.5 * 2^23` for the
/// biased exponent `n + 127`, and for `n + 127 + 64` (scaled by `2^64`).
pub const EXP_SUB: u32 = 0x4B40_0000 - 127;
/// See [`EXP_SUB`].
pub const EXP_SUB_SCALED: u32 = 0x4B40_0000 - 127 - 64;

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units of the last place between two finite `f32`s of
    /// one sign.
    fn ulps(a: f32, b: f32) -> u32 {
        a.to_bits().abs_diff(b.to_bits())
    }

    /// The exact value of `op` at `x`, as `f64` (`gelu_tanh` in the form
    /// that does not cancel, unlike the reference's).
    fn exact(op: UnaryOp, x: f64) -> f64 {
        match op {
            UnaryOp::GeluTanh => {
                let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                x / (1.0 + (-2.0 * u).exp())
            }
            _ => op.eval(x),
        }
    }

    /// `(c, value)` of `op` at `x`, as [`unary_at`] computes it.
    fn eval(op: UnaryOp, x: f32) -> (f32, f32) {
        match op {
            UnaryOp::Exp => (x, exp_poly(x)),
            UnaryOp::Sigmoid => ratio(1.0, -x),
            UnaryOp::Silu => ratio(x, -x),
            UnaryOp::Tanh => tanh(x),
            UnaryOp::Erf => erf(x),
            UnaryOp::Gelu => gelu(x),
            UnaryOp::Log => log(x),
            UnaryOp::Log2 => log2(x),
            UnaryOp::Log1p => log1p(x),
            UnaryOp::Expm1 => expm1(x),
            _ => ratio(x, gelu_arg(x)),
        }
    }

    /// Ulps allowed for `op` at `x` ([`exp_ops`](self)'s bounds).
    fn allowed(op: UnaryOp, x: f32) -> u32 {
        let t = match op {
            UnaryOp::GeluTanh => gelu_arg(x),
            _ => -x,
        };
        // Scaled down past the range: one more rounding.
        let base = if op != UnaryOp::Exp && t > EXP_RANGE {
            3
        } else {
            2
        };
        match op {
            UnaryOp::Tanh => 1,
            UnaryOp::Erf | UnaryOp::Log2 | UnaryOp::Log1p => 3,
            UnaryOp::Gelu if x >= 0.0 => 3,
            UnaryOp::Gelu if x >= -2.8 => 16,
            UnaryOp::Gelu => 64,
            // 2e-7 |2u| relative, in ulps (at least 2^-24 each).
            UnaryOp::GeluTanh => base + (t.abs().min(1e3) * 2e-7 * 16_777_216.0) as u32,
            _ => base,
        }
    }

    #[test]
    fn every_op_is_within_its_ulps_at_every_width() {
        let mut xs: Vec<f32> = (-2000..=2000).map(|i| i as f32 * 0.0457).collect();
        xs.extend((-300..300).map(|i| i as f32 * 1e-3));
        xs.extend([
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            1e-40,
            0.624_999_9,
            0.625,
            -0.625,
            9.0,
            -9.9,
            -10.5,
            43.5,
            43.6,
            87.0,
            -87.0,
            88.5,
            88.8,
            -88.0,
            -100.0,
            -104.0,
            -200.0,
            100.0,
            3.5e4,
            1e10,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MAX,
            f32::MIN,
        ]);
        // Past the range on both sides, and past the scaled range.
        xs.extend((-400..400).map(|i| i as f32 * 0.377));
        xs.extend([-87.1, -111.9, -112.1, -10.4, -11.7, -12.0, 300.0, -300.0]);
        for op in UnaryOp::ALL.into_iter().filter(|op| covers(*op)) {
            // Every vector width the CPU has: within the op's ulps of the
            // exact value, and bit for bit the baseline's values.
            let mut base = Vec::new();
            unary_at(Level::Sse2, op, &xs, &mut base);
            for level in simd::levels() {
                let mut got = vec![7.0];
                unary_at(level, op, &xs, &mut got);
                assert_eq!(got.remove(0), 7.0, "{op:?} {level:?}: appends");
                for ((x, g), b) in xs.iter().zip(&got).zip(&base) {
                    let reference = op.eval(*x as f64) as f32;
                    let want = exact(op, *x as f64) as f32;
                    let what = format!("{op:?} {level:?} at {x:e}: {g:e}, want {want:e}");
                    if !in_range(eval(op, *x).0) {
                        // Redone: the reference's bits (NaN for NaN).
                        assert!(
                            g.to_bits() == reference.to_bits() || g.is_nan() && reference.is_nan(),
                            "{what} (redone)"
                        );
                    } else if want.is_nan() {
                        assert!(g.is_nan(), "{what}");
                    } else if op == UnaryOp::Gelu && *x < -5.6 {
                        // `-0` where the exact value is below `1e-7`.
                        assert!((g - want).abs() < 1e-7, "{what}");
                        assert!(g.is_sign_negative() || g.is_nan(), "{what}");
                    } else {
                        assert!(ulps(*g, want) <= allowed(op, *x), "{what}");
                        assert_eq!(g.is_sign_negative(), want.is_sign_negative(), "{what}");
                    }
                    assert_eq!(g.to_bits(), b.to_bits(), "{what}: as sse2's");
                }
            }
        }
    }
}
