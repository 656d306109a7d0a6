//! `f64` exponentials and logarithms over [`F64Ops`]: `exp`, `exp2`,
//! `expm1`, `log`, `log2`, `log1p`, `pow`, `tanh`, and the shared pieces
//! (Horner's scheme, `2^k`, the double-double logarithm). The error bounds
//! are in [`super::math_f64::unary`]; the tests run every function on the
//! model against `std`.

use super::f64ops::{Cmp, F64Ops, IOp, Rnd};
use std::f64::consts::{LN_2, LOG2_E};

/// `ln 2` split (fdlibm's values): `LN2_HI` has its low 21 bits zero, so
/// `n * LN2_HI` is exact for the `|n| < 2^11` a double's exponent gives,
/// and `LN2_LO` is the next 53 bits of `ln 2` (not `LN_2 - LN2_HI`, which
/// would lose them to `LN_2`'s rounding: 2^-54 relative error times `n`).
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);

/// `log2(e)` as a double-double: `LOG2_E` and the next 53 bits.
const LOG2_E_LO: f64 = f64::from_bits(0x3C77_77D0_FFDA_0D24);

/// `1/k!` for `k = 13..=0`: Taylor's series of `e^r` for `|r| <= ln2/2`,
/// where the first dropped term is below `4.3e-18` (0.02 ulp). The first
/// 12 (`k = 13..=2`) are also `(e^r - 1 - r) / r^2` for `expm1`.
const EXP_COEFS: [f64; 14] = [
    1.0 / 6_227_020_800.0,
    1.0 / 479_001_600.0,
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
    1.0,
];

/// `2 / (2k + 1)` for `k = 11..=2`: `ln m = 2 atanh s = 2s + (2/3) s^3 +
/// s^3 z P(z)` with `s = (m - 1) / (m + 1)`, `z = s^2 <= 0.0295` for `m`
/// in `[sqrt(1/2), sqrt(2))`; the first dropped term is below `1e-18`.
const LOG_COEFS: [f64; 10] = [
    2.0 / 23.0,
    2.0 / 21.0,
    2.0 / 19.0,
    2.0 / 17.0,
    2.0 / 15.0,
    2.0 / 13.0,
    2.0 / 11.0,
    2.0 / 9.0,
    2.0 / 7.0,
    2.0 / 5.0,
];

/// `2/3` as a double-double.
const TWO_THIRDS: (f64, f64) = (2.0 / 3.0, f64::from_bits(0x3C85_5555_5555_5555));

/// Horner's scheme with fma: `coefs[0] z^(n-1) + ... + coefs[n-1]`.
pub fn horner<E: F64Ops>(e: &mut E, z: E::F, coefs: &[f64]) -> E::F {
    let mut p = e.f(coefs[0]);
    for c in &coefs[1..] {
        let c = e.f(*c);
        p = e.fma(p, z, c);
    }
    p
}

/// `2^k` for an integer `k` in `[-1022, 1023]`.
fn pow2<E: F64Ops>(e: &mut E, k: E::I) -> E::F {
    let bias = e.i(1023);
    let w = e.iop(IOp::Add, k, bias);
    let s = e.i(52);
    let w = e.iop(IOp::Shl, w, s);
    e.float_of(w)
}

/// `p * 2^n` for an integral `n` in `[-2044, 2046]`, as `p * 2^(n/2) *
/// 2^(n - n/2)`: the first product is exact, so an overflow, underflow or
/// subnormal result rounds once.
fn scale<E: F64Ops>(e: &mut E, p: E::F, n: E::F) -> E::F {
    let k = e.f_to_int(n);
    let one = e.i(1);
    let k1 = e.iop(IOp::ShrS, k, one);
    let k2 = e.iop(IOp::Sub, k, k1);
    let (s1, s2) = (pow2(e, k1), pow2(e, k2));
    let y = e.mul(p, s1);
    e.mul(y, s2)
}

/// `x = n ln2 + r` with `n = rint(x log2 e)` and `r` by two fmas with the
/// split `ln 2` (`|r| <= ln2/2` plus rounding; the first fma is exact).
fn reduce_ln2<E: F64Ops>(e: &mut E, x: E::F) -> (E::F, E::F) {
    let l2e = e.f(LOG2_E);
    let t = e.mul(x, l2e);
    let n = e.round(Rnd::Nearest, t);
    let hi = e.f(-LN2_HI);
    let h = e.fma(n, hi, x);
    let lo = e.f(-LN2_LO);
    (n, e.fma(n, lo, h))
}

/// `x` clamped to `[lo, hi]` (NaN becomes `lo`: callers select NaN back).
fn clamp<E: F64Ops>(e: &mut E, x: E::F, lo: f64, hi: f64) -> E::F {
    let (l, h) = (e.f(lo), e.f(hi));
    let c = e.max(x, l);
    e.min(c, h)
}

/// `e^(x + lo)` (or `2^x` with `base2`, where `lo` must be `None`) for a
/// non-NaN `x`, with `|lo|` below an ulp of `x`'s reduced argument: `x` is
/// clamped to `[-1100, 1100]` (beyond, the result is 0 or infinity anyway),
/// reduced by [`reduce_ln2`] (`2^x`: `n = rint(x)`, `r = (x - n) ln 2`),
/// `e^r` by [`EXP_COEFS`], then [`scale`]d by `2^n`.
fn exp_core<E: F64Ops>(e: &mut E, x: E::F, lo: Option<E::F>, base2: bool) -> E::F {
    let c = clamp(e, x, -1100.0, 1100.0);
    let (n, r) = if base2 {
        let n = e.round(Rnd::Nearest, c);
        let f = e.sub(c, n);
        let ln2 = e.f(LN_2);
        (n, e.mul(f, ln2))
    } else {
        reduce_ln2(e, c)
    };
    let r = match lo {
        Some(lo) => e.add(r, lo),
        None => r,
    };
    let p = horner(e, r, &EXP_COEFS);
    scale(e, p, n)
}

/// `e^x` (or `2^x`), within 2 ulp; NaN passes through.
pub fn exp<E: F64Ops>(e: &mut E, x: E::F, base2: bool) -> E::F {
    let z = exp_core(e, x, None, base2);
    let nan = e.is_nan(x);
    e.sel(nan, x, z)
}

/// `e^x - 1`, within 2 ulp: `x = n ln2 + r` as in [`exp`], `q = e^r - 1 =
/// r + r^2 P(r)` (relative to `r`, so tiny `x` keeps its digits), then
/// `(q + (1 - 2^-n)) 2^n` (`1 - 2^-n` is exact for the `n <= 60` that
/// matter; beyond, it rounds to 1 anyway). `x` is clamped to `[-60, 710]`
/// (`-1` and infinity beyond); `±0` and NaN pass through.
pub fn expm1<E: F64Ops>(e: &mut E, x: E::F) -> E::F {
    let c = clamp(e, x, -60.0, 710.0);
    let (n, r) = reduce_ln2(e, c);
    let p = horner(e, r, &EXP_COEFS[..12]);
    let r2 = e.mul(r, r);
    let q = e.fma(r2, p, r);
    let k = e.f_to_int(n);
    let sixty = e.i(60);
    let big = e.icmp(Cmp::Gt, true, k, sixty);
    let kk = e.isel(big, sixty, k);
    let zero = e.i(0);
    let nk = e.iop(IOp::Sub, zero, kk);
    let inv = pow2(e, nk);
    let one = e.f(1.0);
    let cst = e.sub(one, inv);
    let s = e.add(q, cst);
    let y = scale(e, s, n);
    let zero = e.f(0.0);
    let z = e.cmp(Cmp::Eq, x, zero);
    let nan = e.is_nan(x);
    let keep = e.or(z, nan);
    e.sel(keep, x, y)
}

/// `tanh x = sign(x) t / (t + 2)` with `t = expm1(2|x|)`, `|x|` clamped
/// to 40 (where `tanh` is 1 to the last bit): within 4 ulp, `±0` and NaN
/// pass through.
pub fn tanh<E: F64Ops>(e: &mut E, x: E::F) -> E::F {
    let a = e.abs(x);
    let forty = e.f(40.0);
    let a = e.min(a, forty);
    let a2 = e.add(a, a);
    let t = expm1(e, a2);
    let two = e.f(2.0);
    let d = e.add(t, two);
    let q = e.div(t, d);
    let r = e.copysign(q, x);
    let nan = e.is_nan(x);
    e.sel(nan, x, r)
}

/// `1 / (1 + e^-x)` (`x / (1 + e^-x)` with `silu`), the reference's formula
/// with an IEEE division: within 4 ulp.
pub fn sigmoid<E: F64Ops>(e: &mut E, x: E::F, silu: bool) -> E::F {
    let n = e.neg(x);
    let ex = exp(e, n, false);
    let one = e.f(1.0);
    let d = e.add(ex, one);
    let num = if silu { x } else { one };
    e.div(num, d)
}

/// `ln v = e ln 2 + a + b` for a positive finite `v` (other inputs give
/// garbage that callers replace): subnormals scaled by 2^54 first; `v = m
/// 2^e` with `m` in `[sqrt(1/2), sqrt(2))` from the bits; `f = m - 1`
/// (exact), `s = f / (2 + f)` as a double-double `sh + sl`, and `ln m` as
/// `2s + (2/3) s^3 + s^3 z P(z)` ([`LOG_COEFS`], `z = sh^2`): `s^3` and
/// `(2/3) s^3` as double-doubles (fma products), `a = RN(2 sh + (2/3)
/// s^3)` and `b` the rest (`a`'s rounding error, `2 sl`, the low parts
/// and the tail, all below an ulp of `a`). The tail's rounding is below
/// 2^-64 of `ln m`, so `a + b` is `ln m` to about 2^-64 relative: `pow`
/// multiplies that error by `y ln x` (up to 745).
struct LogParts<F> {
    e: F,
    a: F,
    b: F,
}

fn log_parts<E: F64Ops>(e: &mut E, v: E::F) -> LogParts<E::F> {
    let min = e.f(f64::MIN_POSITIVE);
    let tiny = e.cmp(Cmp::Lt, v, min);
    let k54 = e.f(2f64.powi(54));
    let vs = e.mul(v, k54);
    let v = e.sel(tiny, vs, v);
    let bits = e.bits_of(v);
    // The biased exponent, and the mantissa with exponent 0 (m in [1, 2)),
    // moved to [sqrt(1/2), sqrt(2)) by comparing the mantissa bits with
    // sqrt(2)'s.
    let s52 = e.i(52);
    let ex = e.iop(IOp::ShrU, bits, s52);
    let mask = e.i(0x7FF);
    let ex = e.iop(IOp::And, ex, mask);
    let fmask = e.i(0x000F_FFFF_FFFF_FFFF);
    let frac = e.iop(IOp::And, bits, fmask);
    let sqrt2 = e.i(0x6_A09E_667F_3BCD);
    let big = e.icmp(Cmp::Gt, false, frac, sqrt2);
    let (half, one) = (e.i(0x3FE0 << 48), e.i(0x3FF0 << 48));
    let mexp = e.isel(big, half, one);
    let mbits = e.iop(IOp::Or, frac, mexp);
    let m = e.float_of(mbits);
    let (b1, b0) = (e.i(-1022), e.i(-1023));
    let inc = e.isel(big, b1, b0);
    let ex = e.iop(IOp::Add, ex, inc);
    let (t54, t0) = (e.i(-54), e.i(0));
    let adj = e.isel(tiny, t54, t0);
    let ex = e.iop(IOp::Add, ex, adj);
    let ef = e.int_to_f(ex, true);
    let (one, two) = (e.f(1.0), e.f(2.0));
    let f = e.sub(m, one);
    // 2 + f = dh + dl exactly (Fast2Sum, |2| > |f|).
    let dh = e.add(two, f);
    let t = e.sub(two, dh);
    let dl = e.add(t, f);
    // s = f / (dh + dl) = sh + sl: the remainder f - sh dh is exact.
    let sh = e.div(f, dh);
    let nsh = e.neg(sh);
    let rho = e.fma(nsh, dh, f);
    let rho = e.fma(nsh, dl, rho);
    let sl = e.div(rho, dh);
    // s^3 = ch + cl: sh^3 by exact fma products, plus 3 sh^2 sl.
    let z = e.mul(sh, sh);
    let nz = e.neg(z);
    let zl = e.fma(sh, sh, nz);
    let ch = e.mul(sh, z);
    let nch = e.neg(ch);
    let cl = e.fma(sh, z, nch);
    let cl = e.fma(sh, zl, cl);
    let three = e.f(3.0);
    let z3 = e.mul(z, three);
    let cl = e.fma(z3, sl, cl);
    // (2/3) s^3 = uh + ul.
    let (th, tl) = (e.f(TWO_THIRDS.0), e.f(TWO_THIRDS.1));
    let uh = e.mul(ch, th);
    let nuh = e.neg(uh);
    let ul = e.fma(ch, th, nuh);
    let ul = e.fma(ch, tl, ul);
    let ul = e.fma(cl, th, ul);
    // The tail s^3 z P(z), about 2% of (2/3) s^3.
    let p = horner(e, z, &LOG_COEFS);
    let cz = e.mul(ch, z);
    let tail = e.mul(cz, p);
    // a = RN(2 sh + uh) (Fast2Sum: |2 sh| > |uh|), b the rest.
    let a0 = e.add(sh, sh);
    let (a, ea) = fast_two_sum(e, a0, uh);
    let sl2 = e.add(sl, sl);
    let b = e.add(ea, sl2);
    let b = e.add(b, ul);
    let b = e.add(b, tail);
    LogParts { e: ef, a, b }
}

/// `ln v` as a double-double `(hi, lo)` for a positive finite `v`, to about
/// 2^-64 relative: `e LN2_HI + a` by Fast2Sum (`e LN2_HI` is exact and,
/// unless 0, larger than `|a| <= 0.35`), the low parts added, renormalized.
pub fn ln_dd<E: F64Ops>(e: &mut E, v: E::F) -> (E::F, E::F) {
    let LogParts { e: ef, a, b } = log_parts(e, v);
    let (hi_c, lo_c) = (e.f(LN2_HI), e.f(LN2_LO));
    let hi = e.mul(ef, hi_c);
    let h = e.add(hi, a);
    let t = e.sub(hi, h);
    let l = e.add(t, a);
    let lb = e.fma(ef, lo_c, b);
    let lo = e.add(l, lb);
    fast_two_sum(e, h, lo)
}

/// `(s, err)` with `s = RN(a + b)` and `s + err = a + b` exactly, for `|a|
/// >= |b|` (or `a = 0`).
fn fast_two_sum<E: F64Ops>(e: &mut E, a: E::F, b: E::F) -> (E::F, E::F) {
    let s = e.add(a, b);
    let t = e.sub(a, s);
    (s, e.add(t, b))
}

/// The results of `ln` at the special inputs, over `y`: 0 gives `-inf`,
/// negatives and NaN give NaN, `inf` stays.
fn log_specials<E: F64Ops>(e: &mut E, x: E::F, y: E::F) -> E::F {
    let zero = e.f(0.0);
    let z = e.cmp(Cmp::Eq, x, zero);
    let ninf = e.f(f64::NEG_INFINITY);
    let out = e.sel(z, ninf, y);
    let inf = e.f(f64::INFINITY);
    let i = e.cmp(Cmp::Eq, x, inf);
    let out = e.sel(i, x, out);
    let neg = e.cmp(Cmp::Lt, x, zero);
    let nan = e.is_nan(x);
    let bad = e.or(neg, nan);
    let n = e.f(f64::NAN);
    e.sel(bad, n, out)
}

/// `ln x` ([`ln_dd`]'s high part: within 1 ulp) or `log2 x` (`e + (a + b)
/// log2 e` with the product in double-double: within 1 ulp).
pub fn log<E: F64Ops>(e: &mut E, x: E::F, base2: bool) -> E::F {
    let y = if base2 {
        let LogParts { e: ef, a, b } = log_parts(e, x);
        let (ch, cl) = (e.f(LOG2_E), e.f(LOG2_E_LO));
        let p = e.mul(a, ch);
        let np = e.neg(p);
        let pe = e.fma(a, ch, np);
        let bh = e.fma(b, ch, pe);
        let q = e.fma(a, cl, bh);
        let (s, err) = fast_two_sum(e, ef, p);
        let lo = e.add(err, q);
        e.add(s, lo)
    } else {
        ln_dd(e, x).0
    };
    log_specials(e, x, y)
}

/// `ln(1 + x)`, within 1 ulp: `u = 1 + x` with its rounding error `c`
/// (TwoSum), then `ln u + c / u` with `ln u` from [`ln_dd`]. `-1` gives
/// `-inf`, below it NaN; `±0`, `inf` and NaN pass through.
pub fn log1p<E: F64Ops>(e: &mut E, x: E::F) -> E::F {
    let one = e.f(1.0);
    let u = e.add(one, x);
    let bb = e.sub(u, one);
    let ub = e.sub(u, bb);
    let t1 = e.sub(one, ub);
    let t2 = e.sub(x, bb);
    let c = e.add(t1, t2);
    let (h, l) = ln_dd(e, u);
    let cu = e.div(c, u);
    let lo = e.add(l, cu);
    let y = e.add(h, lo);
    let y = log_specials(e, u, y);
    let zero = e.f(0.0);
    let z = e.cmp(Cmp::Eq, x, zero);
    let inf = e.f(f64::INFINITY);
    let i = e.cmp(Cmp::Eq, x, inf);
    let keep = e.or(z, i);
    let y = e.sel(keep, x, y);
    let nan = e.is_nan(x);
    e.sel(nan, x, y)
}

/// `x^y` with C99's special cases (Rust's `powf`): `|x|^y = e^(y ln|x|)`
/// with `ln|x|` from [`ln_dd`] and the product kept as a double-double into
/// [`exp_core`]: within 2 ulp, also where `|y ln x|` nears 745 (results
/// near overflow or underflow), as `ln_dd` is good to 2^-64. A negative `x`
/// takes the sign of `(-1)^y` for an integral `y` and gives NaN otherwise;
/// zeros, infinities, NaN, `x = ±1` and `y = ±0` follow C99.
pub fn pow<E: F64Ops>(e: &mut E, x: E::F, y: E::F) -> E::F {
    let a = e.abs(x);
    let (h, l) = ln_dd(e, a);
    let ph = e.mul(y, h);
    let nph = e.neg(ph);
    let err = e.fma(y, h, nph);
    let pl = e.fma(y, l, err);
    // Beyond |y ln x| = 1000 the result is 0 or infinity and the low part
    // may be NaN (inf - inf).
    let aph = e.abs(ph);
    let thousand = e.f(1000.0);
    let finite = e.cmp(Cmp::Lt, aph, thousand);
    let zero = e.f(0.0);
    let pl = e.sel(finite, pl, zero);
    let mag = exp_core(e, ph, Some(pl), false);
    // y integral, y odd, x negative (by the sign bit: -0 counts).
    let yt = e.round(Rnd::Zero, y);
    let yint = e.cmp(Cmp::Eq, yt, y);
    let half = e.f(0.5);
    let hy = e.mul(y, half);
    let ht = e.round(Rnd::Zero, hy);
    let heven = e.cmp(Cmp::Eq, ht, hy);
    let hodd = e.not(heven);
    let odd = e.and(yint, hodd);
    let xb = e.bits_of(x);
    let i0 = e.i(0);
    let xneg = e.icmp(Cmp::Lt, true, xb, i0);
    let flip = e.and(odd, xneg);
    let nmag = e.neg(mag);
    let g = e.sel(flip, nmag, mag);
    let yfrac = e.not(yint);
    let bad = e.and(xneg, yfrac);
    let nan = e.f(f64::NAN);
    let g = e.sel(bad, nan, g);
    // x = ±0 or ±inf: 0 or inf by (|x| = inf) == (y > 0), signed for odd y.
    let inf = e.f(f64::INFINITY);
    let ainf = e.cmp(Cmp::Eq, a, inf);
    let ylt0 = e.cmp(Cmp::Lt, y, zero);
    let inf_or_0 = e.sel(ylt0, zero, inf);
    let zero_or_inf = e.sel(ylt0, inf, zero);
    let zmag = e.sel(ainf, inf_or_0, zero_or_inf);
    let nz = e.neg(zmag);
    let zval = e.sel(flip, nz, zmag);
    let a0 = e.cmp(Cmp::Eq, a, zero);
    let edge = e.or(a0, ainf);
    let g = e.sel(edge, zval, g);
    // y = ±inf: 1 for |x| = 1, else 0 or inf by (|x| > 1) == (y > 0).
    let ay = e.abs(y);
    let yinf = e.cmp(Cmp::Eq, ay, inf);
    let one = e.f(1.0);
    let agt1 = e.cmp(Cmp::Gt, a, one);
    let imag = e.sel(agt1, inf_or_0, zero_or_inf);
    let a1 = e.cmp(Cmp::Eq, a, one);
    let imag = e.sel(a1, one, imag);
    let g = e.sel(yinf, imag, g);
    let xn = e.is_nan(x);
    let yn = e.is_nan(y);
    let any_nan = e.or(xn, yn);
    let g = e.sel(any_nan, nan, g);
    let y0 = e.cmp(Cmp::Eq, y, zero);
    let x1 = e.cmp(Cmp::Eq, x, one);
    let unit = e.or(y0, x1);
    e.sel(unit, one, g)
}
