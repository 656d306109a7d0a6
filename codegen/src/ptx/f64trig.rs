//! `f64` sine, cosine and `atan2` over [`F64Ops`]. The reduction of `sin`
//! and `cos` is exact to far beyond the last bit for every finite input:
//! Cody-Waite below 2^27, Payne-Hanek (integer arithmetic on the bits of
//! 2/pi) above, so huge arguments are as accurate as small ones.

use super::f64alg::horner;
use super::f64ops::{Cmp, F64Ops, IOp, Rnd};
use std::f64::consts::FRAC_2_PI;

/// `pi/2` in three parts (each the rounded rest of the previous): `k C1` is
/// exact inside the first fma and `x - k C1` is exact too (a multiple of
/// 2^-52 below 1), so for `|k| < 2^27` the reduction loses nothing beyond
/// the last rounding.
const PIO2_1: f64 = f64::from_bits(0x3FF9_21FB_5444_2D18);
const PIO2_2: f64 = f64::from_bits(0x3C91_A626_3314_5C07);
const PIO2_3: f64 = f64::from_bits(0xB91F_1976_B7ED_8FBC);

/// `|x|` from which the Payne-Hanek reduction runs.
const CODY_WAITE_LIMIT: f64 = 134_217_728.0; // 2^27

/// The bits of `2/pi` after the binary point, 64 to a word, behind a zero
/// word (the bits before the point): 1216 bits cover the window of every
/// finite double's exponent.
const TWO_OVER_PI: [u64; 20] = [
    0,
    0xA2F9_836E_4E44_1529,
    0xFC27_57D1_F534_DDC0,
    0xDB62_9599_3C43_9041,
    0xFE51_63AB_DEBB_C561,
    0xB724_6E3A_424D_D2E0,
    0x0649_2EEA_09D1_921C,
    0xFE1D_EB1C_B129_A73E,
    0xE882_35F5_2EBB_4484,
    0xE99C_7026_B45F_7E41,
    0x3991_D639_8353_39F4,
    0x9C84_5F8B_BDF9_283B,
    0x1FF8_97FF_DE05_980F,
    0xEF2F_118B_5A0A_6D1F,
    0x6D36_7ECF_27CB_09B7,
    0x4F46_3F66_9E5F_EA2D,
    0x7527_BAC7_EBE5_F17B,
    0x3D07_39F7_8A52_92EA,
    0x6BFB_5FB1_1F8D_5D08,
    0x5603_3046_FC7B_6BAB,
];

/// `(sin r - r) / r^3` in `z = r^2`: Taylor's `(-1)^k / (2k+1)!` for `k =
/// 8..=1`; for `|r| <= pi/4` the first dropped term is below 1e-19.
const SIN_COEFS: [f64; 8] = [
    1.0 / 355_687_428_096_000.0,
    -1.0 / 1_307_674_368_000.0,
    1.0 / 6_227_020_800.0,
    -1.0 / 39_916_800.0,
    1.0 / 362_880.0,
    -1.0 / 5_040.0,
    1.0 / 120.0,
    -1.0 / 6.0,
];

/// `(cos r - 1 + r^2/2) / r^4` in `z`: `(-1)^k / (2k)!` for `k = 8..=2`;
/// the first dropped term is below 3e-18.
const COS_COEFS: [f64; 7] = [
    1.0 / 20_922_789_888_000.0,
    -1.0 / 87_178_291_200.0,
    1.0 / 479_001_600.0,
    -1.0 / 3_628_800.0,
    1.0 / 40_320.0,
    -1.0 / 720.0,
    1.0 / 24.0,
];

/// `x = k pi/2 + r` for `|x| >= 2^27` (and, as garbage, for infinities and
/// NaN), returned as `[r, k mod 4]` with `x`'s sign. Payne-Hanek: `x = m
/// 2^E` with a 53-bit integer `m`; the bits of 2/pi that multiply `m` into
/// a multiple of 4 are skipped, the next 192 are the window `W`, and the
/// low 192 bits of `m W` are `x 2/pi mod 4` with 190 fraction bits
/// (truncation error below 2^-137, against a fraction never below about
/// 2^-62 for a double). Adding a half rounds to the nearest `k`; the
/// fraction's top 128 bits become `r / (pi/2)`.
fn payne_hanek<E: F64Ops>(e: &mut E, x: E::F) -> [E::F; 2] {
    let bits = e.bits_of(x);
    let s52 = e.i(52);
    let bexp = e.iop(IOp::ShrU, bits, s52);
    let emask = e.i(0x7FF);
    let bexp = e.iop(IOp::And, bexp, emask);
    let fmask = e.i(0x000F_FFFF_FFFF_FFFF);
    let frac = e.iop(IOp::And, bits, fmask);
    let implicit = e.i(1 << 52);
    let m = e.iop(IOp::Or, frac, implicit);
    // x = m 2^E, E = bexp - 1075; the window starts at bit 64 + E - 2 of
    // the table (its first bit is worth 2^(1 - E), the last to leave a
    // multiple of 4), at least 37 for |x| >= 2^27 and at most 1034.
    let off = e.i(62 - 1075);
    let s = e.iop(IOp::Add, bexp, off);
    let s6 = e.i(6);
    let j = e.iop(IOp::ShrU, s, s6);
    let m63 = e.i(63);
    let sh = e.iop(IOp::And, s, m63);
    let i64_ = e.i(64);
    let rsh = e.iop(IOp::Sub, i64_, sh);
    // The table words j..j+3, by selects (j <= 16).
    let mut w: [E::I; 4] = std::array::from_fn(|i| e.i(TWO_OVER_PI[i] as i64));
    for k in 1..=16 {
        let kk = e.i(k as i64);
        let at = e.icmp(Cmp::Eq, false, j, kk);
        for (i, wi) in w.iter_mut().enumerate() {
            let t = e.i(TWO_OVER_PI[k + i] as i64);
            *wi = e.isel(at, t, *wi);
        }
    }
    // W's three words: bits sh.. of w[0..4] (a shift by 64 gives 0).
    let word = |e: &mut E, a: E::I, b: E::I| {
        let hi = e.iop(IOp::Shl, a, sh);
        let lo = e.iop(IOp::ShrU, b, rsh);
        e.iop(IOp::Or, hi, lo)
    };
    let w2 = word(e, w[0], w[1]);
    let w1 = word(e, w[1], w[2]);
    let w0 = word(e, w[2], w[3]);
    // The low 192 bits of m W: r0 + r1 2^64 + r2 2^128.
    let r0 = e.iop(IOp::MulLo, m, w0);
    let h0 = e.iop(IOp::MulHiU, m, w0);
    let l1 = e.iop(IOp::MulLo, m, w1);
    let h1 = e.iop(IOp::MulHiU, m, w1);
    let l2 = e.iop(IOp::MulLo, m, w2);
    let r1 = e.iop(IOp::Add, h0, l1);
    let carry = e.icmp(Cmp::Lt, false, r1, l1);
    let (one, zero) = (e.i(1), e.i(0));
    let c = e.isel(carry, one, zero);
    let r2 = e.iop(IOp::Add, h1, l2);
    let r2 = e.iop(IOp::Add, r2, c);
    // + 1/2 (bit 189), then k = the 2 integer bits and the fraction - 1/2
    // as a signed 128-bit number g2 2^64 + g1 (times 2^-128).
    let halfbit = e.i(1 << 61);
    let r2 = e.iop(IOp::Add, r2, halfbit);
    let s62 = e.i(62);
    let q = e.iop(IOp::ShrU, r2, s62);
    let two = e.i(2);
    let g2 = e.iop(IOp::Shl, r2, two);
    let t = e.iop(IOp::ShrU, r1, s62);
    let g2 = e.iop(IOp::Or, g2, t);
    let top = e.i(i64::MIN);
    let g2 = e.iop(IOp::Xor, g2, top);
    let g1 = e.iop(IOp::Shl, r1, two);
    let t = e.iop(IOp::ShrU, r0, s62);
    let g1 = e.iop(IOp::Or, g1, t);
    let fh = e.int_to_f(g2, true);
    let sc = e.f(2f64.powi(-64));
    let fh = e.mul(fh, sc);
    let fl = e.int_to_f(g1, false);
    let sc = e.f(2f64.powi(-128));
    let f = e.fma(fl, sc, fh);
    let (p1, p2) = (e.f(PIO2_1), e.f(PIO2_2));
    let lo = e.mul(f, p2);
    let r = e.fma(f, p1, lo);
    let k = e.int_to_f(q, false);
    let zero = e.f(0.0);
    let neg = e.cmp(Cmp::Lt, x, zero);
    let (nr, nk) = (e.neg(r), e.neg(k));
    [e.sel(neg, nr, r), e.sel(neg, nk, k)]
}

/// `sin x` (or `cos x`), within 2 ulp for every finite `x`: `x = k pi/2 +
/// r` (Cody-Waite with [`PIO2_1`]..[`PIO2_3`] below 2^27, [`payne_hanek`]
/// above, on a branch), Taylor's polynomials on `|r| <= pi/4`
/// ([`SIN_COEFS`], [`COS_COEFS`]; `cos r` as `w + ((1 - w) - h + ...)`
/// with `h = r^2/2`, `w = 1 - h`, so the rounding of `w` is added back),
/// then the quadrant `k mod 4`. `sin(±0) = ±0`; infinities and NaN give
/// NaN.
pub fn sincos<E: F64Ops>(e: &mut E, x: E::F, cos: bool) -> E::F {
    let c2pi = e.f(FRAC_2_PI);
    let t = e.mul(x, c2pi);
    let k = e.round(Rnd::Nearest, t);
    let nk = e.neg(k);
    let (p1, p2, p3) = (e.f(PIO2_1), e.f(PIO2_2), e.f(PIO2_3));
    let r = e.fma(nk, p1, x);
    let r = e.fma(nk, p2, r);
    let r = e.fma(nk, p3, r);
    let ax = e.abs(x);
    let lim = e.f(CODY_WAITE_LIMIT);
    let small = e.cmp(Cmp::Lt, ax, lim);
    let [r, k] = e.unless(small, [r, k], |e| payne_hanek(e, x));
    let q = e.f_to_int(k);
    let q = if cos {
        let one = e.i(1);
        e.iop(IOp::Add, q, one)
    } else {
        q
    };
    let z = e.mul(r, r);
    let ps = horner(e, z, &SIN_COEFS);
    let rz = e.mul(r, z);
    let s = e.fma(rz, ps, r);
    let pc = horner(e, z, &COS_COEFS);
    let z2 = e.mul(z, z);
    let half = e.f(0.5);
    let h = e.mul(z, half);
    let one = e.f(1.0);
    let w = e.sub(one, h);
    let t = e.sub(one, w);
    let corr = e.sub(t, h);
    let tail = e.fma(z2, pc, corr);
    let c = e.add(w, tail);
    let (b1, b2, i0) = (e.i(1), e.i(2), e.i(0));
    let bit = e.iop(IOp::And, q, b1);
    let odd = e.icmp(Cmp::Ne, false, bit, i0);
    let v = e.sel(odd, c, s);
    let bit = e.iop(IOp::And, q, b2);
    let neg = e.icmp(Cmp::Ne, false, bit, i0);
    let nv = e.neg(v);
    let v = e.sel(neg, nv, v);
    let v = if cos {
        v
    } else {
        // r lost the sign of a zero x.
        let zero = e.f(0.0);
        let z = e.cmp(Cmp::Eq, x, zero);
        e.sel(z, x, v)
    };
    let max = e.f(f64::MAX);
    let finite = e.cmp(Cmp::Le, ax, max);
    let nan = e.sub(x, x);
    e.sel(finite, v, nan)
}

/// `atan(c)` for `c = j/4`, `j = 0..=4`, as double-doubles.
const ATAN_QUARTERS: [(f64, f64); 5] = [
    (0.0, 0.0),
    (
        f64::from_bits(0x3FCF_5B75_F92C_80DD),
        f64::from_bits(0x3C68_AB6E_3CF7_AFBD),
    ),
    (
        f64::from_bits(0x3FDD_AC67_0561_BB4F),
        f64::from_bits(0x3C7A_2B7F_222F_65E2),
    ),
    (
        f64::from_bits(0x3FE4_978F_A326_9EE1),
        f64::from_bits(0x3C72_419A_87F2_A458),
    ),
    (
        f64::from_bits(0x3FE9_21FB_5444_2D18),
        f64::from_bits(0x3C81_A626_3314_5C07),
    ),
];

/// `pi/2` and `pi` as double-doubles.
const PIO2: (f64, f64) = (PIO2_1, PIO2_2);
const PI: (f64, f64) = (
    f64::from_bits(0x4009_21FB_5444_2D18),
    f64::from_bits(0x3CA1_A626_3314_5C07),
);

/// `(atan u - u) / u^3` in `z = u^2`: Taylor's `(-1)^k / (2k+1)` for `k =
/// 8..=1`; for `|u| <= 0.125` the first dropped term is below 3e-18
/// relative.
const ATAN_COEFS: [f64; 8] = [
    1.0 / 17.0,
    -1.0 / 15.0,
    1.0 / 13.0,
    -1.0 / 11.0,
    1.0 / 9.0,
    -1.0 / 7.0,
    1.0 / 5.0,
    -1.0 / 3.0,
];

/// `atan2(y, x)`, within 2 ulp, with C99's special cases (Rust's
/// `atan2`): `t = min(|x|, |y|) / max(...)` in `[0, 1]` (1 when equal,
/// infinities included; 0 for two zeros); `atan t = atan(j/4) + atan u`
/// with `j = rint(4t)`, `u = (t - j/4) / (1 + t j/4)` (the numerator
/// exact, `|u| <= 0.125`) by [`ATAN_COEFS`]; then `pi/2 -` that where
/// `|y|` exceeds `|x|`, `pi -` that where `x`'s sign bit is set, and `y`'s
/// sign. The angle stays a double-double until the last addition.
pub fn atan2<E: F64Ops>(e: &mut E, y: E::F, x: E::F) -> E::F {
    let (ay, ax) = (e.abs(y), e.abs(x));
    let swap = e.cmp(Cmp::Gt, ay, ax);
    let num = e.sel(swap, ax, ay);
    let den = e.sel(swap, ay, ax);
    let t = e.div(num, den);
    let (zero, one) = (e.f(0.0), e.f(1.0));
    let eq = e.cmp(Cmp::Eq, ay, ax);
    let t = e.sel(eq, one, t);
    let d0 = e.cmp(Cmp::Eq, den, zero);
    let t = e.sel(d0, zero, t);
    let four = e.f(4.0);
    let t4 = e.mul(t, four);
    let j = e.round(Rnd::Nearest, t4);
    let quarter = e.f(0.25);
    let c = e.mul(j, quarter);
    let n = e.sub(t, c);
    let d = e.fma(t, c, one);
    let u = e.div(n, d);
    let z = e.mul(u, u);
    let p = horner(e, z, &ATAN_COEFS);
    let uz = e.mul(u, z);
    let at = e.fma(uz, p, u);
    let (mut ch, mut cl) = (e.f(0.0), e.f(0.0));
    for (i, (h, l)) in ATAN_QUARTERS.iter().enumerate().skip(1) {
        let ic = e.f(i as f64);
        let at_i = e.cmp(Cmp::Eq, j, ic);
        let (h, l) = (e.f(*h), e.f(*l));
        ch = e.sel(at_i, h, ch);
        cl = e.sel(at_i, l, cl);
    }
    let lo = e.add(cl, at);
    // Reflections of the angle hi + lo.
    let reflect = |e: &mut E, (ph, pl): (f64, f64), hi: E::F, lo: E::F| {
        let (ph, pl) = (e.f(ph), e.f(pl));
        (e.sub(ph, hi), e.sub(pl, lo))
    };
    let (sh, sl) = reflect(e, PIO2, ch, lo);
    let hi = e.sel(swap, sh, ch);
    let lo = e.sel(swap, sl, lo);
    let xb = e.bits_of(x);
    let i0 = e.i(0);
    let xneg = e.icmp(Cmp::Lt, true, xb, i0);
    let (nh, nl) = reflect(e, PI, hi, lo);
    let hi = e.sel(xneg, nh, hi);
    let lo = e.sel(xneg, nl, lo);
    let a = e.add(hi, lo);
    let r = e.copysign(a, y);
    let xn = e.is_nan(x);
    let yn = e.is_nan(y);
    let nan = e.or(xn, yn);
    let s = e.add(x, y);
    e.sel(nan, s, r)
}
