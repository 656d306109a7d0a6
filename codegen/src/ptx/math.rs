//! `f32` sequences for the transcendental ops. Each takes and returns `.f32`
//! registers; the error bounds are listed in the module doc of `ptx`.

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use std::f64::consts::{FRAC_2_PI, FRAC_PI_2, LN_2, LOG2_E};

/// `v` as an `f32` immediate.
pub fn imm(v: f64) -> String {
    f32_imm(v as f32)
}

/// A fresh `.f32` register.
pub fn freg(b: &mut Builder) -> Reg {
    b.reg(RegKind::F32)
}

/// Rounds the `f32` in `.b32` register `x` to TF32 in place as
/// `RoundTf32` rounds (to nearest, ties to even; NaN and infinities
/// unchanged, overflow to infinity): `cvt.rn.tf32.f32` where the target
/// has it (`native`: sm_90), else the same in integer arithmetic.
pub fn round_tf32(b: &mut Builder, x: Reg, native: bool) {
    if native {
        ins!(b, "cvt.rn.tf32.f32 {x}, {x}");
        return;
    }
    let (e, l, finite) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::Pred),
    );
    ins!(b, "and.b32 {e}, {x}, 0x7f800000");
    ins!(b, "setp.ne.u32 {finite}, {e}, 0x7f800000");
    // Just under half the dropped 13 bits, plus the kept last bit.
    ins!(b, "bfe.u32 {l}, {x}, 13, 1");
    ins!(b, "add.u32 {l}, {l}, 4095");
    ins!(b, "add.u32 {l}, {l}, {x}");
    ins!(b, "and.b32 {l}, {l}, 0xffffe000");
    ins!(b, "selp.b32 {x}, {l}, {x}, {finite}");
}

/// `a * b` without fma contraction.
pub fn mul(b: &mut Builder, x: Reg, y: impl std::fmt::Display) -> Reg {
    let r = freg(b);
    ins!(b, "mul.rn.f32 {r}, {x}, {y}");
    r
}

/// `a + b`.
pub fn add(b: &mut Builder, x: Reg, y: impl std::fmt::Display) -> Reg {
    let r = freg(b);
    ins!(b, "add.rn.f32 {r}, {x}, {y}");
    r
}

/// `x * y + z`, rounded once.
pub fn fma(
    b: &mut Builder,
    x: impl std::fmt::Display,
    y: impl std::fmt::Display,
    z: impl std::fmt::Display,
) -> Reg {
    let r = freg(b);
    ins!(b, "fma.rn.f32 {r}, {x}, {y}, {z}");
    r
}

/// Horner evaluation of `coefs[0] * z^(n-1) + ... + coefs[n-1]`.
pub fn horner(b: &mut Builder, z: Reg, coefs: &[f64]) -> Reg {
    let mut p = b.mov(RegKind::F32, "f32", imm(coefs[0]));
    for c in &coefs[1..] {
        p = fma(b, p, z, imm(*c));
    }
    p
}

/// `cond ? x : y`.
pub fn select(
    b: &mut Builder,
    x: impl std::fmt::Display,
    y: impl std::fmt::Display,
    cond: Reg,
) -> Reg {
    let r = freg(b);
    ins!(b, "selp.f32 {r}, {x}, {y}, {cond}");
    r
}

/// `e^x` as `ex2.approx(t) * (1 + lo * ln 2)` where `t + lo` is `x * log2(e)`
/// to about 2^-48: the correction keeps the error near ex2's 2^-22 even for
/// large `|x|`, where the rounding of `x * log2(e)` alone would cost up to
/// 2^-17.
pub fn exp(b: &mut Builder, x: Reg) -> Reg {
    let l2e = LOG2_E as f32;
    let l2e_lo = (LOG2_E - l2e as f64) as f32;
    let t = mul(b, x, f32_imm(l2e));
    let nt = freg(b);
    ins!(b, "neg.f32 {nt}, {t}");
    let lo = fma(b, x, f32_imm(l2e), nt);
    let lo = fma(b, x, f32_imm(l2e_lo), lo);
    // For infinite t the correction is NaN and must not reach the result.
    let fin = b.reg(RegKind::Pred);
    ins!(b, "testp.finite.f32 {fin}, {t}");
    let lo = select(b, lo, imm(0.0), fin);
    let e = exp2(b, t);
    let c = mul(b, lo, imm(LN_2));
    let r = fma(b, e, c, e);
    // An overflowed e stays infinite (inf * c + inf could be NaN).
    let inf = b.reg(RegKind::Pred);
    ins!(b, "testp.infinite.f32 {inf}, {e}");
    select(b, e, r, inf)
}

/// `e^x` as `ex2.approx(x * log2(e))`: relative error up to 2^-17 for
/// results near the ends of the `f32` range, enough for results rounded to
/// a half type.
pub fn exp_fast(b: &mut Builder, x: Reg) -> Reg {
    let t = mul(b, x, imm(LOG2_E));
    exp2(b, t)
}

/// `2^x` (ex2.approx, full range with subnormal results).
pub fn exp2(b: &mut Builder, x: Reg) -> Reg {
    let r = freg(b);
    ins!(b, "ex2.approx.f32 {r}, {x}");
    r
}

/// Which logarithm [`log`] computes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum LogBase {
    E,
    Two,
}

/// `ln x` or `log2 x`: `x = 2^e * m` with `m` in `[sqrt(1/2), sqrt(2))`,
/// `ln m = 2 atanh(s)`, `s = (m - 1) / (m + 1)`, by its series to `s^9`
/// (truncation below 2^-28 relative). Zero, negative, infinite and NaN
/// inputs take `lg2.approx`, whose results there are exact.
pub fn log(b: &mut Builder, x: Reg, base: LogBase) -> Reg {
    let pred = |b: &mut Builder| b.reg(RegKind::Pred);
    let int = |b: &mut Builder| b.reg(RegKind::B32);
    // Subnormals are scaled into the normal range first.
    let bits = int(b);
    ins!(b, "mov.b32 {bits}, {x}");
    let sub = pred(b);
    ins!(b, "setp.lt.u32 {sub}, {bits}, 8388608");
    let scaled = mul(b, x, imm(8388608.0));
    let xs = select(b, scaled, x, sub);
    let bits = int(b);
    ins!(b, "mov.b32 {bits}, {xs}");
    let e = int(b);
    ins!(b, "shr.u32 {e}, {bits}, 23");
    let m = int(b);
    ins!(b, "and.b32 {m}, {bits}, 8388607");
    ins!(b, "or.b32 {m}, {m}, 1065353216");
    // m > sqrt(2): halve it and bump the exponent.
    let big = pred(b);
    ins!(b, "setp.gt.u32 {big}, {m}, 1068827891");
    let mh = int(b);
    ins!(b, "sub.u32 {mh}, {m}, 8388608");
    ins!(b, "selp.b32 {m}, {mh}, {m}, {big}");
    let adj = int(b);
    ins!(b, "selp.s32 {adj}, -150, -127, {sub}");
    ins!(b, "add.s32 {e}, {e}, {adj}");
    let inc = int(b);
    ins!(b, "selp.s32 {inc}, 1, 0, {big}");
    ins!(b, "add.s32 {e}, {e}, {inc}");
    let ef = freg(b);
    ins!(b, "cvt.rn.f32.s32 {ef}, {e}");
    let mf = freg(b);
    ins!(b, "mov.b32 {mf}, {m}");
    let f = add(b, mf, imm(-1.0));
    let den = add(b, mf, imm(1.0));
    let s = freg(b);
    ins!(b, "div.rn.f32 {s}, {f}, {den}");
    let s2 = mul(b, s, s);
    let p = horner(b, s2, &[1.0 / 9.0, 1.0 / 7.0, 1.0 / 5.0, 1.0 / 3.0]);
    let p = mul(b, p, s2);
    let two_s = add(b, s, s);
    let ln_m = fma(b, two_s, p, two_s);
    let normal = match base {
        LogBase::E => fma(b, ef, imm(LN_2), ln_m),
        LogBase::Two => fma(b, ln_m, imm(LOG2_E), ef),
    };
    let special = freg(b);
    ins!(b, "lg2.approx.f32 {special}, {x}");
    let special = match base {
        LogBase::E => mul(b, special, imm(LN_2)),
        LogBase::Two => special,
    };
    let pos = pred(b);
    ins!(b, "setp.gt.f32 {pos}, {x}, 0f00000000");
    let fin = pred(b);
    ins!(b, "setp.lt.f32 {fin}, {x}, 0f7F800000");
    ins!(b, "and.pred {pos}, {pos}, {fin}");
    select(b, normal, special, pos)
}

/// Which of sine and cosine [`sincos`] computes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Trig {
    Sin,
    Cos,
}

/// Bits of 2/pi after the binary point, 24 at a time (fdlibm's `ipio2`).
const TWO_OVER_PI_24: [u32; 9] = [
    0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD, 0xC0DB62, 0x95993C, 0x439041, 0xFE5163,
];

/// `|x|` above which [`sincos`] reduces in `f64` against 216 bits of 2/pi.
const CODY_WAITE_LIMIT: f64 = 1e5;

/// Sine or cosine: `x = k * pi/2 + r`, then Cephes' minimax polynomials on
/// `|r| <= pi/4` and the quadrant `k mod 4`. The reduction is a three-part
/// Cody-Waite one for `|x| <= 1e5` and, beyond, a Payne-Hanek one in `f64`
/// (each 24-bit chunk of 2/pi times `x` is exact in `f64` and reduced mod
/// 4 exactly), so the error stays a few ulp over the whole range.
pub fn sincos(b: &mut Builder, x: Reg, which: Trig) -> Reg {
    let p1 = FRAC_PI_2 as f32;
    let p2 = (FRAC_PI_2 - p1 as f64) as f32;
    let p3 = (FRAC_PI_2 - p1 as f64 - p2 as f64) as f32;
    let k = mul(b, x, imm(FRAC_2_PI));
    ins!(b, "cvt.rni.f32.f32 {k}, {k}");
    let r = fma(b, k, f32_imm(-p1), x);
    let r = fma(b, k, f32_imm(-p2), r);
    ins!(b, "fma.rn.f32 {r}, {k}, {}, {r}", f32_imm(-p3));
    let q = b.reg(RegKind::B32);
    ins!(b, "cvt.rzi.s32.f32 {q}, {k}");
    let a = freg(b);
    ins!(b, "abs.f32 {a}, {x}");
    let small = b.reg(RegKind::Pred);
    ins!(b, "setp.le.f32 {small}, {a}, {}", imm(CODY_WAITE_LIMIT));
    let reduced = b.label();
    ins!(b, "@{small} bra {reduced}");
    let f64r = |b: &mut Builder| b.reg(RegKind::F64);
    let xd = f64r(b);
    ins!(b, "cvt.f64.f32 {xd}, {x}");
    let sum = f64r(b);
    ins!(b, "mov.f64 {sum}, 0d0000000000000000");
    for (i, chunk) in TWO_OVER_PI_24.iter().enumerate() {
        let c = *chunk as f64 * 2f64.powi(-24 * (i as i32 + 1));
        let (p, h) = (f64r(b), f64r(b));
        ins!(b, "mul.rn.f64 {p}, {xd}, 0d{:016X}", c.to_bits());
        ins!(b, "mul.rn.f64 {h}, {p}, 0d3FD0000000000000");
        ins!(b, "cvt.rmi.f64.f64 {h}, {h}");
        ins!(b, "fma.rn.f64 {p}, {h}, 0dC010000000000000, {p}");
        ins!(b, "add.rn.f64 {sum}, {sum}, {p}");
    }
    let (n, f) = (f64r(b), f64r(b));
    ins!(b, "cvt.rni.f64.f64 {n}, {sum}");
    ins!(b, "sub.rn.f64 {f}, {sum}, {n}");
    ins!(b, "mul.rn.f64 {f}, {f}, 0d{:016X}", FRAC_PI_2.to_bits());
    ins!(b, "cvt.rn.f32.f64 {r}, {f}");
    ins!(b, "cvt.rzi.s32.f64 {q}, {n}");
    b.place(&reduced);
    if which == Trig::Cos {
        ins!(b, "add.s32 {q}, {q}, 1");
    }
    let z = mul(b, r, r);
    let ps = horner(
        b,
        z,
        &[-1.951_529_589_1e-4, 8.332_160_873_6e-3, -1.666_665_461_1e-1],
    );
    let ps = mul(b, ps, z);
    let sin_r = fma(b, ps, r, r);
    let pc = horner(
        b,
        z,
        &[
            2.443_315_711_809_948e-5,
            -1.388_731_625_493_765e-3,
            4.166_664_568_298_827e-2,
        ],
    );
    let pc = mul(b, pc, z);
    let pc = mul(b, pc, z);
    let half = fma(b, z, imm(-0.5), imm(1.0));
    let cos_r = add(b, pc, half);
    let bit = b.reg(RegKind::B32);
    ins!(b, "and.b32 {bit}, {q}, 1");
    let odd = b.reg(RegKind::Pred);
    ins!(b, "setp.ne.u32 {odd}, {bit}, 0");
    let v = select(b, cos_r, sin_r, odd);
    ins!(b, "and.b32 {bit}, {q}, 2");
    let neg = b.reg(RegKind::Pred);
    ins!(b, "setp.ne.u32 {neg}, {bit}, 0");
    let nv = freg(b);
    ins!(b, "neg.f32 {nv}, {v}");
    select(b, nv, v, neg)
}

/// How accurate a result must be: `F32` results get the accurate [`exp`]
/// and IEEE division (a few ulp); `Half` results (f16/bf16, whose 11 or 8
/// bits cannot see the last f32 bits) the plain `ex2.approx` and
/// `div.full.f32` (2 ulp), several times fewer instructions (a matmul
/// epilogue's gelu for a half-precision output).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Accuracy {
    F32,
    Half,
}

/// `e^x` at accuracy `r`.
pub fn exp_for(b: &mut Builder, x: Reg, r: Accuracy) -> Reg {
    match r {
        Accuracy::F32 => exp(b, x),
        Accuracy::Half => exp_fast(b, x),
    }
}

/// `n / d` at accuracy `r`.
pub fn div_for(b: &mut Builder, n: impl std::fmt::Display, d: Reg, r: Accuracy) -> Reg {
    let q = freg(b);
    match r {
        Accuracy::F32 => ins!(b, "div.rn.f32 {q}, {n}, {d}"),
        Accuracy::Half => ins!(b, "div.full.f32 {q}, {n}, {d}"),
    }
    q
}

/// `tanh x`: Cephes' odd polynomial for `|x| < 0.625`, else
/// `sign(x) * (1 - 2 / (e^(2|x|) + 1))`, at accuracy `r`.
pub fn tanh(b: &mut Builder, x: Reg, r: Accuracy) -> Reg {
    let a = freg(b);
    ins!(b, "abs.f32 {a}, {x}");
    let small = b.reg(RegKind::Pred);
    ins!(b, "setp.lt.f32 {small}, {a}, {}", imm(0.625));
    let z = mul(b, x, x);
    let p = horner(
        b,
        z,
        &[
            -5.704_988_727_45e-3,
            2.063_908_879_54e-2,
            -5.373_971_555_31e-2,
            1.333_144_220_36e-1,
            -3.333_328_194_22e-1,
        ],
    );
    let p = mul(b, p, z);
    let poly = fma(b, p, x, x);
    let a2 = add(b, a, a);
    let e = exp_for(b, a2, r);
    let d = add(b, e, imm(1.0));
    let q = div_for(b, imm(2.0), d, r);
    let one_minus = freg(b);
    ins!(b, "sub.rn.f32 {one_minus}, {}, {q}", imm(1.0));
    let large = freg(b);
    ins!(b, "copysign.f32 {large}, {x}, {one_minus}");
    select(b, poly, large, small)
}

/// `num / (1 + e^-x)` at accuracy `r`; with `num = 1` the sigmoid, with
/// `num = x` silu.
pub fn over_one_plus_exp_neg(
    b: &mut Builder,
    num: impl std::fmt::Display,
    x: Reg,
    r: Accuracy,
) -> Reg {
    let nx = freg(b);
    ins!(b, "neg.f32 {nx}, {x}");
    let e = exp_for(b, nx, r);
    let d = add(b, e, imm(1.0));
    div_for(b, num, d, r)
}

/// GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, at
/// accuracy `r`.
pub fn gelu_tanh(b: &mut Builder, x: Reg, r: Accuracy) -> Reg {
    let x2 = mul(b, x, x);
    let x3 = mul(b, x2, x);
    let inner = fma(b, x3, imm(0.044715), x);
    let u = mul(b, inner, imm(0.797_884_560_802_865_4));
    let t = tanh(b, u, r);
    let one_t = add(b, t, imm(1.0));
    let hx = mul(b, x, imm(0.5));
    mul(b, hx, one_t)
}

/// `powf(a, b)` with C99's special cases: `2^(b log2|a|)`, negated for a
/// negative base and an odd integer exponent, NaN for a finite negative
/// base and a non-integer exponent, 1 for `b = 0`, `a = 1` and
/// `a = -1, b = +-inf`.
pub fn powf(bld: &mut Builder, a: Reg, b: Reg) -> Reg {
    let pred = |bld: &mut Builder| bld.reg(RegKind::Pred);
    let aa = freg(bld);
    ins!(bld, "abs.f32 {aa}, {a}");
    let l = log(bld, aa, LogBase::Two);
    let t = mul(bld, b, l);
    let m = exp2(bld, t);
    // Exponent parity: odd iff integral and b/2 is not.
    let bi = freg(bld);
    ins!(bld, "cvt.rni.f32.f32 {bi}, {b}");
    let isint = pred(bld);
    ins!(bld, "setp.eq.f32 {isint}, {bi}, {b}");
    let h = mul(bld, b, imm(0.5));
    let hi = freg(bld);
    ins!(bld, "cvt.rni.f32.f32 {hi}, {h}");
    let odd = pred(bld);
    ins!(bld, "setp.neu.f32 {odd}, {hi}, {h}");
    ins!(bld, "and.pred {odd}, {odd}, {isint}");
    let abits = bld.reg(RegKind::B32);
    ins!(bld, "mov.b32 {abits}, {a}");
    let neg = pred(bld);
    ins!(bld, "setp.lt.s32 {neg}, {abits}, 0");
    ins!(bld, "and.pred {neg}, {neg}, {odd}");
    let nm = freg(bld);
    ins!(bld, "neg.f32 {nm}, {m}");
    let r = select(bld, nm, m, neg);
    // Finite negative base with a non-integral exponent: NaN.
    let nan = pred(bld);
    ins!(bld, "setp.lt.f32 {nan}, {a}, 0f00000000");
    let gt_ninf = pred(bld);
    ins!(bld, "setp.gt.f32 {gt_ninf}, {a}, 0fFF800000");
    ins!(bld, "and.pred {nan}, {nan}, {gt_ninf}");
    let nonint = pred(bld);
    ins!(bld, "setp.neu.f32 {nonint}, {bi}, {b}");
    ins!(bld, "and.pred {nan}, {nan}, {nonint}");
    let r = select(bld, "0f7FC00000", r, nan);
    // Results that are exactly 1 whatever the other operand.
    let one = pred(bld);
    ins!(bld, "setp.eq.f32 {one}, {b}, 0f00000000");
    let p = pred(bld);
    ins!(bld, "setp.eq.f32 {p}, {a}, 0f3F800000");
    ins!(bld, "or.pred {one}, {one}, {p}");
    let ab = freg(bld);
    ins!(bld, "abs.f32 {ab}, {b}");
    let q = pred(bld);
    ins!(bld, "setp.eq.f32 {p}, {a}, 0fBF800000");
    ins!(bld, "setp.eq.f32 {q}, {ab}, 0f7F800000");
    ins!(bld, "and.pred {p}, {p}, {q}");
    ins!(bld, "or.pred {one}, {one}, {p}");
    select(bld, "0f3F800000", r, one)
}

/// `a^b` for `i32` or `i64` (by the registers' class), wrapping:
/// square-and-multiply for `b >= 0`; for `b < 0` the truncated `powf` (1
/// for `a = 1`, +-1 for `a = -1`, else 0), as `ops::pow_int`.
pub fn powi(bld: &mut Builder, a: Reg, b: Reg) -> Reg {
    let kind = a.kind;
    let (ty, bits) = if kind == RegKind::B64 {
        ("s64", "b64")
    } else {
        ("s32", "b32")
    };
    let int = |bld: &mut Builder| bld.reg(kind);
    let r = bld.mov(kind, bits, 1);
    let base = int(bld);
    ins!(bld, "mov.{bits} {base}, {a}");
    let e = int(bld);
    ins!(bld, "max.{ty} {e}, {b}, 0");
    let (top, done) = (bld.label(), bld.label());
    let p = bld.reg(RegKind::Pred);
    let bit = int(bld);
    bld.place(&top);
    ins!(bld, "setp.eq.{ty} {p}, {e}, 0");
    ins!(bld, "@{p} bra {done}");
    ins!(bld, "and.{bits} {bit}, {e}, 1");
    ins!(bld, "setp.ne.{ty} {p}, {bit}, 0");
    ins!(bld, "@{p} mul.lo.{ty} {r}, {r}, {base}");
    ins!(bld, "mul.lo.{ty} {base}, {base}, {base}");
    ins!(bld, "shr.{bits} {e}, {e}, 1");
    ins!(bld, "bra {top}");
    bld.place(&done);
    // Negative exponents.
    let neg = int(bld);
    ins!(bld, "and.{bits} {bit}, {b}, 1");
    ins!(bld, "setp.ne.{ty} {p}, {bit}, 0");
    ins!(bld, "selp.{bits} {neg}, -1, 1, {p}");
    ins!(bld, "setp.eq.{ty} {p}, {a}, -1");
    let small = int(bld);
    ins!(bld, "selp.{bits} {small}, {neg}, 0, {p}");
    ins!(bld, "setp.eq.{ty} {p}, {a}, 1");
    ins!(bld, "selp.{bits} {small}, 1, {small}, {p}");
    ins!(bld, "setp.lt.{ty} {p}, {b}, 0");
    let out = int(bld);
    ins!(bld, "selp.{bits} {out}, {small}, {r}, {p}");
    out
}
