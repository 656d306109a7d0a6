//! `f32` sequences for the special functions: `erf` and the exact GELU,
//! `log1p`, `expm1` and `atan2`. The polynomials are minimax fits (Remez,
//! in `f64`) made for smelt; their coefficients are kept here as `f64` and
//! rounded to `f32` immediates, and the tests below evaluate them in `f32`
//! exactly as the emitted code does (same Horner order, fused
//! multiply-adds) against `f64` references. Measured maximum errors of the
//! whole sequences are listed in the `ptx` module doc.

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use super::math::{self, add, div_for, exp_for, fma, freg, horner, imm, mul, select, Accuracy};
use crate::fits::{
    ERFC_CENTRE, ERFC_END, ERFC_LOG, ERF_SMALL, ERF_SPLIT, EXPM1, EXPM1_RANGE, LN2_HI, LN2_LO,
};
use std::f64::consts::{FRAC_1_SQRT_2, FRAC_PI_2, FRAC_PI_4, LOG2_E, PI};

/// `atan(t) = t * P(t^2)` for `|t| <= tan(pi/8)`: `P`, highest power first
/// (relative error of the fit 6.0e-10).
pub const ATAN: [f64; 6] = [
    -0.060347904303906345,
    0.10573479838105455,
    -0.14240083013199556,
    0.19998216947903516,
    -0.33333307625847475,
    0.9999999993966707,
];

/// `tan(pi/8)`: above it `atan` reduces `a` to `(a - 1) / (a + 1)`.
pub const TAN_PI_8: f64 = 0.414_213_562_373_095_03;

fn pred(b: &mut Builder) -> Reg {
    b.reg(RegKind::Pred)
}

/// What `erf` and the exact GELU share: `|x|`, `small = erf(x)` valid for
/// `|x| < 1`, `tail = erfc(|x|)` valid for `|x| >= 1` (0 from 4 on), and
/// `big` = `|x| >= 1` (false for NaN, which then flows through `small`).
struct ErfParts {
    small: Reg,
    tail: Reg,
    big: Reg,
}

fn erf_parts(b: &mut Builder, x: Reg, r: Accuracy) -> ErfParts {
    let a = freg(b);
    ins!(b, "abs.f32 {a}, {x}");
    let z = mul(b, x, x);
    let p = horner(b, z, &ERF_SMALL);
    let small = fma(b, x, p, x);
    let ac = freg(b);
    ins!(b, "min.f32 {ac}, {a}, {}", imm(ERFC_END));
    let t = add(b, ac, imm(-ERFC_CENTRE));
    let q = horner(b, t, &ERFC_LOG);
    let e = exp_for(b, q, r);
    let inside = pred(b);
    ins!(b, "setp.lt.f32 {inside}, {a}, {}", imm(ERFC_END));
    let tail = select(b, e, imm(0.0), inside);
    let big = pred(b);
    ins!(b, "setp.ge.f32 {big}, {a}, {}", imm(ERF_SPLIT));
    ErfParts { small, tail, big }
}

/// `erf(x)`: `x + x P(x^2)` below 1, `+-(1 - exp(Q(|x|)))` from 1 on.
pub fn erf(b: &mut Builder, x: Reg, r: Accuracy) -> Reg {
    let e = erf_parts(b, x, r);
    let one_minus = freg(b);
    ins!(b, "sub.rn.f32 {one_minus}, {}, {}", imm(1.0), e.tail);
    let large = freg(b);
    ins!(b, "copysign.f32 {large}, {x}, {one_minus}");
    select(b, large, e.small, e.big)
}

/// The exact GELU, `x * Phi(x)` with `Phi(x) = (1 + erf(x / sqrt 2)) / 2`.
/// For `x / sqrt 2 <= -1`, `Phi` is `erfc(|u|) / 2` straight from the tail
/// (no cancellation in `1 + erf`), so the negative tail keeps its relative
/// accuracy. As in PyTorch, `gelu(-inf)` is NaN (`-inf * 0`).
pub fn gelu(b: &mut Builder, x: Reg, r: Accuracy) -> Reg {
    let u = mul(b, x, imm(FRAC_1_SQRT_2));
    let e = erf_parts(b, u, r);
    let half_tail = mul(b, e.tail, imm(0.5));
    let upper = freg(b);
    ins!(b, "sub.rn.f32 {upper}, {}, {half_tail}", imm(1.0));
    let pos = pred(b);
    ins!(b, "setp.gt.f32 {pos}, {u}, 0f00000000");
    let far = select(b, upper, half_tail, pos);
    let near = fma(b, e.small, imm(0.5), imm(0.5));
    let phi = select(b, far, near, e.big);
    mul(b, x, phi)
}

/// `ln(1 + x)`: with `u = 1 + x` rounded, `ln(u) * x / (u - 1)`, which
/// cancels the rounding of `u` (`u - 1` is exact); `x` itself where `u` is
/// 1 and for `+inf`.
pub fn log1p(b: &mut Builder, x: Reg, r: Accuracy) -> Reg {
    let u = add(b, x, imm(1.0));
    let um1 = add(b, u, imm(-1.0));
    let l = math::log(b, u, math::LogBase::E);
    let q = div_for(b, x, um1, r);
    let v = mul(b, l, q);
    let keep = pred(b);
    ins!(b, "setp.eq.f32 {keep}, {u}, {}", imm(1.0));
    let inf = pred(b);
    ins!(b, "setp.eq.f32 {inf}, {x}, 0f7F800000");
    ins!(b, "or.pred {keep}, {keep}, {inf}");
    select(b, x, v, keep)
}

/// `e^x - 1`: `x = k ln 2 + r` with `|r| <= ln(2)/2` (Cody-Waite),
/// `expm1(r) = r P(r)`, then `2^k (expm1(r) + 1) - 1` as
/// `2 * fma(2^(k-1), expm1(r), 2^(k-1) - 1/2)`, one rounding, with `2^k`
/// up to `2^128` representable through the halving. Zeros are returned
/// as they are (keeping `-0`).
pub fn expm1(b: &mut Builder, x: Reg) -> Reg {
    let xc = freg(b);
    ins!(b, "min.NaN.f32 {xc}, {x}, {}", imm(EXPM1_RANGE.1));
    ins!(b, "max.NaN.f32 {xc}, {xc}, {}", imm(EXPM1_RANGE.0));
    let k = mul(b, xc, imm(LOG2_E));
    ins!(b, "cvt.rni.f32.f32 {k}, {k}");
    let rr = fma(b, k, f32_imm(-LN2_HI), xc);
    let rr = fma(b, k, f32_imm(-LN2_LO), rr);
    let p = horner(b, rr, &EXPM1);
    let e = mul(b, rr, p);
    let ki = b.reg(RegKind::B32);
    ins!(b, "cvt.rzi.s32.f32 {ki}, {k}");
    ins!(b, "add.s32 {ki}, {ki}, 126");
    ins!(b, "shl.b32 {ki}, {ki}, 23");
    let s = freg(b);
    ins!(b, "mov.b32 {s}, {ki}");
    let c = add(b, s, imm(-0.5));
    let y = fma(b, s, e, c);
    let y = add(b, y, y);
    let zero = pred(b);
    ins!(b, "setp.eq.f32 {zero}, {x}, 0f00000000");
    select(b, x, y, zero)
}

/// `atan2(y, x)`: `a = min(|x|, |y|) / max(|x|, |y|)` in `[0, 1]`, reduced
/// by `pi/4` above `tan(pi/8)`, `atan(t) = t P(t^2)`, then the octant
/// (`pi/2 - r` when `|y| > |x|`, `pi - r` when `x` has its sign bit set)
/// and the sign of `y`. The C99 special cases fall out of it: both zero
/// (`a = 0`), both infinite (`a = 1`); NaN in either gives NaN.
pub fn atan2(b: &mut Builder, y: Reg, x: Reg, r: Accuracy) -> Reg {
    let (ax, ay) = (freg(b), freg(b));
    ins!(b, "abs.f32 {ax}, {x}");
    ins!(b, "abs.f32 {ay}, {y}");
    let (hi, lo) = (freg(b), freg(b));
    ins!(b, "max.f32 {hi}, {ax}, {ay}");
    ins!(b, "min.f32 {lo}, {ax}, {ay}");
    let a = div_for(b, lo, hi, r);
    let (ix, iy) = (pred(b), pred(b));
    ins!(b, "setp.eq.f32 {ix}, {ax}, 0f7F800000");
    ins!(b, "setp.eq.f32 {iy}, {ay}, 0f7F800000");
    ins!(b, "and.pred {ix}, {ix}, {iy}");
    let a = select(b, imm(1.0), a, ix);
    let zero = pred(b);
    ins!(b, "setp.eq.f32 {zero}, {hi}, 0f00000000");
    let a = select(b, imm(0.0), a, zero);
    let big = pred(b);
    ins!(b, "setp.gt.f32 {big}, {a}, {}", imm(TAN_PI_8));
    let num = add(b, a, imm(-1.0));
    let den = add(b, a, imm(1.0));
    let reduced = div_for(b, num, den, r);
    let t = select(b, reduced, a, big);
    let z = mul(b, t, t);
    let p = horner(b, z, &ATAN);
    let v = mul(b, t, p);
    let v_big = plus_const(b, v, FRAC_PI_4);
    let v = select(b, v_big, v, big);
    let swap = pred(b);
    ins!(b, "setp.gt.f32 {swap}, {ay}, {ax}");
    let v_swap = const_minus(b, FRAC_PI_2, v);
    let v = select(b, v_swap, v, swap);
    let xb = b.reg(RegKind::B32);
    ins!(b, "mov.b32 {xb}, {x}");
    let left = pred(b);
    ins!(b, "setp.lt.s32 {left}, {xb}, 0");
    let v_left = const_minus(b, PI, v);
    let v = select(b, v_left, v, left);
    let signed = freg(b);
    ins!(b, "copysign.f32 {signed}, {y}, {v}");
    let nan = pred(b);
    ins!(b, "setp.nan.f32 {nan}, {x}, {y}");
    select(b, "0f7FC00000", signed, nan)
}

/// `c` split into an `f32` and the `f32` rest.
fn split(c: f64) -> (f32, f32) {
    let hi = c as f32;
    (hi, (c - hi as f64) as f32)
}

/// `v + c` with `c` carried to about 48 bits.
fn plus_const(b: &mut Builder, v: Reg, c: f64) -> Reg {
    let (hi, lo) = split(c);
    let t = add(b, v, f32_imm(lo));
    add(b, t, f32_imm(hi))
}

/// `c - v` with `c` carried to about 48 bits.
fn const_minus(b: &mut Builder, c: f64, v: Reg) -> Reg {
    let (hi, lo) = split(c);
    let t = freg(b);
    ins!(b, "sub.rn.f32 {t}, {}, {v}", f32_imm(hi));
    add(b, t, f32_imm(lo))
}

#[cfg(test)]
mod tests {
    //! The sequences above, replayed in `f32` on the host: the same
    //! constants, Horner order and fused multiply-adds. `exp` and `ln` stand
    //! in for the PTX `exp` and `log` (themselves about 2 ulp), and division
    //! is IEEE's (`div.rn`, the `f32` path).
    use super::*;

    fn horner_f32(z: f32, coefs: &[f64]) -> f32 {
        coefs[1..]
            .iter()
            .fold(coefs[0] as f32, |p, c| p.mul_add(z, *c as f32))
    }

    fn erf_f32(x: f32) -> f32 {
        let a = x.abs();
        if a >= ERF_SPLIT as f32 {
            let t = a.min(ERFC_END as f32) - ERFC_CENTRE as f32;
            let tail = if a < ERFC_END as f32 {
                horner_f32(t, &ERFC_LOG).exp()
            } else {
                0.0
            };
            (1.0 - tail).copysign(x)
        } else {
            x.mul_add(horner_f32(x * x, &ERF_SMALL), x)
        }
    }

    fn gelu_f32(x: f32) -> f32 {
        let u = x * FRAC_1_SQRT_2 as f32;
        let a = u.abs();
        let phi = if a >= ERF_SPLIT as f32 {
            let t = a.min(ERFC_END as f32) - ERFC_CENTRE as f32;
            let tail = if a < ERFC_END as f32 {
                horner_f32(t, &ERFC_LOG).exp()
            } else {
                0.0
            };
            if u > 0.0 {
                1.0 - 0.5 * tail
            } else {
                0.5 * tail
            }
        } else {
            u.mul_add(horner_f32(u * u, &ERF_SMALL), u)
                .mul_add(0.5, 0.5)
        };
        x * phi
    }

    fn log1p_f32(x: f32) -> f32 {
        let u = x + 1.0;
        if u == 1.0 || x == f32::INFINITY {
            return x;
        }
        u.ln() * (x / (u - 1.0))
    }

    fn expm1_f32(x: f32) -> f32 {
        if x == 0.0 {
            return x;
        }
        let xc = x.clamp(EXPM1_RANGE.0 as f32, EXPM1_RANGE.1 as f32);
        let k = (xc * LOG2_E as f32).round_ties_even();
        let r = k.mul_add(-LN2_HI, xc);
        let r = k.mul_add(-LN2_LO, r);
        let e = r * horner_f32(r, &EXPM1);
        let s = f32::from_bits(((k as i32 + 126) as u32) << 23);
        let y = s.mul_add(e, s - 0.5);
        y + y
    }

    fn atan2_f32(y: f32, x: f32) -> f32 {
        if x.is_nan() || y.is_nan() {
            return f32::NAN;
        }
        let (ax, ay) = (x.abs(), y.abs());
        let (hi, lo) = (ax.max(ay), ax.min(ay));
        let mut a = lo / hi;
        if ax.is_infinite() && ay.is_infinite() {
            a = 1.0;
        }
        if hi == 0.0 {
            a = 0.0;
        }
        let big = a > TAN_PI_8 as f32;
        let t = if big { (a - 1.0) / (a + 1.0) } else { a };
        let mut v = t * horner_f32(t * t, &ATAN);
        let parts = |c: f64| split(c);
        if big {
            let (h, l) = parts(FRAC_PI_4);
            v = (v + l) + h;
        }
        if ay > ax {
            let (h, l) = parts(FRAC_PI_2);
            v = (h - v) + l;
        }
        if x.is_sign_negative() {
            let (h, l) = parts(PI);
            v = (h - v) + l;
        }
        v.copysign(y)
    }

    /// Error of `got` in units of the last place of the `f32` nearest
    /// `want` (at least the smallest normal's, so tiny results count
    /// absolutely).
    fn ulps(got: f32, want: f64) -> f64 {
        if got.is_nan() && want.is_nan() || got as f64 == want {
            return 0.0;
        }
        let w = (want as f32).abs().max(f32::MIN_POSITIVE);
        let ulp = (f32::from_bits(w.to_bits() + 1) - w) as f64;
        (got as f64 - want).abs() / ulp
    }

    /// The largest error over `n` points evenly spread on `[lo, hi]`, and
    /// where.
    fn worst(
        lo: f64,
        hi: f64,
        n: usize,
        f: impl Fn(f32) -> f32,
        r: impl Fn(f64) -> f64,
    ) -> (f64, f32) {
        let mut w = (0.0, 0.0);
        for i in 0..=n {
            let x = (lo + (hi - lo) * i as f64 / n as f64) as f32;
            let e = ulps(f(x), r(x as f64));
            if e > w.0 {
                w = (e, x);
            }
        }
        w
    }

    #[test]
    fn erf_within_2_ulp() {
        let (e, at) = worst(-6.0, 6.0, 400_000, erf_f32, libm::erf);
        println!("erf: {e:.2} ulp at {at}");
        assert!(e <= 2.0, "erf: {e} ulp at {at}");
        assert_eq!(erf_f32(f32::INFINITY), 1.0);
        assert_eq!(erf_f32(f32::NEG_INFINITY), -1.0);
        assert!(erf_f32(f32::NAN).is_nan());
        assert!(erf_f32(-0.0).is_sign_negative());
    }

    #[test]
    fn gelu_close_to_f64() {
        let g = |x: f64| 0.5 * x * (1.0 + libm::erf(x * FRAC_1_SQRT_2));
        // The positive side in ulp; the negative side, where `1 + erf`
        // cancels (down to `x / sqrt 2 = -1`) or the tail's exponent is
        // rounded, in ulp with a looser bound; everywhere absolutely.
        let (e, at) = worst(0.0, 10.0, 300_000, gelu_f32, g);
        println!("gelu on [0, 10]: {e:.2} ulp at {at}");
        assert!(e <= 3.0, "gelu: {e} ulp at {at}");
        let (e, at) = worst(-2.8, 0.0, 300_000, gelu_f32, g);
        println!("gelu on [-2.8, 0]: {e:.2} ulp at {at}");
        assert!(e <= 16.0, "gelu, negative side: {e} ulp at {at}");
        // Deeper, the rounding of x / sqrt 2 and of the exponent (up to
        // 16) grow like x^2 2^-24 relative; the values are below 1e-5.
        let (e, at) = worst(-5.6, -2.8, 300_000, gelu_f32, g);
        println!("gelu on [-5.6, -2.8]: {e:.2} ulp at {at}");
        assert!(e <= 64.0, "gelu, negative tail: {e} ulp at {at}");
        for i in 0..=10_000 {
            let x = -20.0 + 20.0 * i as f64 / 10_000.0;
            let d = (gelu_f32(x as f32) as f64 - g(x as f32 as f64)).abs();
            assert!(d < 1e-7, "gelu({x}): off by {d}");
        }
        assert!(gelu_f32(f32::NEG_INFINITY).is_nan());
        assert_eq!(gelu_f32(f32::INFINITY), f32::INFINITY);
    }

    #[test]
    fn log1p_within_3_ulp() {
        for (lo, hi) in [(-0.999, 1.0), (-1e-3, 1e-3), (1.0, 1e6)] {
            let (e, at) = worst(lo, hi, 200_000, log1p_f32, f64::ln_1p);
            println!("log1p on [{lo}, {hi}]: {e:.2} ulp at {at}");
            assert!(e <= 3.0, "log1p: {e} ulp at {at}");
        }
        assert_eq!(log1p_f32(1e-30), 1e-30);
        assert_eq!(log1p_f32(-1.0), f32::NEG_INFINITY);
        assert_eq!(log1p_f32(f32::INFINITY), f32::INFINITY);
        assert!(log1p_f32(-2.0).is_nan());
    }

    #[test]
    fn expm1_within_2_ulp() {
        for (lo, hi) in [(-1.0, 1.0), (-1e-3, 1e-3), (-30.0, 88.7)] {
            let (e, at) = worst(lo, hi, 200_000, expm1_f32, f64::exp_m1);
            println!("expm1 on [{lo}, {hi}]: {e:.2} ulp at {at}");
            assert!(e <= 2.0, "expm1: {e} ulp at {at}");
        }
        assert_eq!(expm1_f32(89.0), f32::INFINITY);
        assert_eq!(expm1_f32(f32::NEG_INFINITY), -1.0);
        assert!(expm1_f32(-0.0).is_sign_negative());
    }

    #[test]
    fn atan2_within_3_ulp() {
        let mut w: (f64, f32, f32) = (0.0, 0.0, 0.0);
        for i in 0..=600 {
            for j in 0..=600 {
                let y = (-3.0 + 6.0 * i as f64 / 600.0) as f32;
                let x = (-3.0 + 6.0 * j as f64 / 600.0) as f32;
                let e = ulps(atan2_f32(y, x), (y as f64).atan2(x as f64));
                if e > w.0 {
                    w = (e, y, x);
                }
            }
        }
        println!("atan2: {:.2} ulp at ({}, {})", w.0, w.1, w.2);
        assert!(w.0 <= 3.0, "atan2: {w:?}");
        let specials = [0.0f32, -0.0, 1.0, -1.0, f32::INFINITY, f32::NEG_INFINITY];
        for y in specials {
            for x in specials {
                let (got, want) = (atan2_f32(y, x), (y as f64).atan2(x as f64));
                assert!(
                    ulps(got, want) <= 1.0,
                    "atan2({y}, {x}) = {got}, want {want}"
                );
                assert_eq!(
                    got.is_sign_negative(),
                    want.is_sign_negative(),
                    "atan2({y}, {x})"
                );
            }
        }
    }
}
