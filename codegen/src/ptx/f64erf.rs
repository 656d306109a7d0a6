//! `f64` `erf` and the two GELUs over [`F64Ops`]. The coefficients were
//! computed for smelt with mpmath at 60 digits (Taylor's series of `erf`;
//! interpolation of `g(a) = e^(a^2) erfc(a)` at 17 Chebyshev nodes of
//! each piece, as a polynomial in `a - mid`, truncation error below 2e-18
//! relative).

use super::f64alg::{exp, horner, tanh};
use super::f64ops::{Cmp, F64Ops};
use crate::ops::SQRT_2_OVER_PI;
use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI};

/// `erf(x) / x` in `z = x^2`: `2/sqrt(pi) (-1)^n / (n! (2n+1))` for `n =
/// 18..=0`; for `|x| < 1` the first dropped term is below 3e-19.
const ERF_SMALL: [f64; 19] = [
    4.763348040515068e-18,
    -9.063970842808673e-17,
    1.6342614095367152e-15,
    -2.7835162072109215e-14,
    4.4632242632864775e-13,
    -6.7113668551641105e-12,
    9.422759064650411e-11,
    -1.2290555301717928e-09,
    1.4807192815879218e-08,
    -1.6365844691234924e-07,
    1.6462114365889248e-06,
    -1.492565035840625e-05,
    0.000_120_553_329_817_896_64,
    -0.000_854_832_702_345_085_3,
    0.005_223_977_625_442_188,
    -0.026_866_170_645_131_252,
    0.112_837_916_709_551_26,
    -0.376_126_389_031_837_54,
    FRAC_2_SQRT_PI,
];

/// The pieces of `[1, 6]` for `g(a) = e^(a^2) erfc(a)`: upper ends (the
/// last open) and midpoints (`a - mid` is exact, by Sterbenz's lemma).
const ERFC_ENDS: [f64; 3] = [1.75, 2.75, 4.0];
const ERFC_MIDS: [f64; 4] = [1.375, 2.25, 3.375, 5.0];

/// `g(mid + h)` per piece, highest power first.
const ERFC_PIECES: [[f64; 17]; 4] = [
    [
        2.2575386293583425e-08,
        -8.258426484142557e-08,
        2.8161461092590827e-07,
        -9.79429726284813e-07,
        3.3208707890193137e-06,
        -1.0938283816318301e-05,
        3.496502300438936e-05,
        -0.000_108_236_827_783_857_08,
        0.000_323_650_776_388_533_14,
        -0.000_932_085_581_475_055_2,
        0.002_576_220_779_200_762,
        -0.006_804_603_105_287_626,
        0.017_084_991_607_390_358,
        -0.040_503_371_223_401_18,
        0.089_862_118_646_957_19,
        -0.184_315_469_974_667_77,
        0.343_295_889_862_125_4,
    ],
    [
        5.597915005891037e-10,
        -2.369998621421023e-09,
        9.247765672737061e-09,
        -3.754184410495511e-08,
        1.4943597983829897e-07,
        -5.806473162649516e-07,
        2.203021592065496e-06,
        -8.150281398780411e-06,
        2.9353247391975407e-05,
        -0.000_102_721_081_296_012_02,
        0.000_348_535_422_044_458_1,
        -0.001_143_728_483_648_228_3,
        0.003_618_995_354_358_101_3,
        -0.011_002_060_756_440_144,
        0.031_992_627_410_706_26,
        -0.088_486_502_808_749_16,
        0.231_087_258_730_391_88,
    ],
    [
        9.544276867333644e-12,
        -4.8171097536702815e-11,
        2.2368906801554894e-10,
        -1.0928673712292231e-09,
        5.264259017056374e-09,
        -2.4884347918893887e-08,
        1.1556674733459852e-07,
        -5.268974420086213e-07,
        2.356113291759771e-06,
        -1.0322921565487491e-05,
        4.4264313373503906e-05,
        -0.000_185_522_283_049_509_24,
        0.000_758_930_645_417_170_1,
        -0.003_025_196_635_909_616_6,
        0.011_727_899_937_029_176,
        -0.044_119_457_241_337_846,
        0.160_631_068_126_544_4,
    ],
    [
        7.935106373004748e-14,
        -5.033015540266547e-13,
        2.8223551375217665e-12,
        -1.7487307640493828e-11,
        1.0775422677534866e-10,
        -6.530435800013467e-10,
        3.911235575229903e-09,
        -2.3147442750962905e-08,
        1.3529365302452254e-07,
        -7.806319626987718e-07,
        4.4443343492985714e-06,
        -2.4953883568128706e-05,
        0.000_138_102_420_900_339_54,
        -0.000_752_896_813_427_442_9,
        0.004_040_688_908_937_075,
        -0.021_332_789_764_826_308,
        0.110_704_637_733_068_63,
    ],
];

/// `erf x`, within 2 ulp: `x P(x^2)` ([`ERF_SMALL`]) for `|x| < 1`; else
/// `sign(x) (1 - e^(-a^2) g(a))` with `a = min(|x|, 6)` (beyond 6, `erf`
/// is ±1 to the last bit) and `g` from [`ERFC_PIECES`], whose coefficients
/// are selected per piece. The rounding of `a^2` moves `erfc` by at most
/// 36 ulp of itself, which is below 0.01 ulp of the result. NaN passes.
pub fn erf<E: F64Ops>(e: &mut E, x: E::F) -> E::F {
    let z = e.mul(x, x);
    let ps = horner(e, z, &ERF_SMALL);
    let vs = e.mul(x, ps);
    let a = e.abs(x);
    let six = e.f(6.0);
    let a = e.min(a, six);
    let ins: Vec<E::P> = ERFC_ENDS
        .iter()
        .map(|end| {
            let end = e.f(*end);
            e.cmp(Cmp::Lt, a, end)
        })
        .collect();
    // The last piece's value, overridden by the earlier pieces in reverse.
    let pick = |e: &mut E, vals: &[f64]| {
        let mut v = e.f(vals[ERFC_ENDS.len()]);
        for (p, val) in ins.iter().zip(vals).rev() {
            let c = e.f(*val);
            v = e.sel(*p, c, v);
        }
        v
    };
    let mid = pick(e, &ERFC_MIDS);
    let h = e.sub(a, mid);
    let column = |k: usize| ERFC_PIECES.map(|piece| piece[k]);
    let mut g = pick(e, &column(0));
    for k in 1..ERFC_PIECES[0].len() {
        let c = pick(e, &column(k));
        g = e.fma(g, h, c);
    }
    let s = e.mul(a, a);
    let ns = e.neg(s);
    let ex = exp(e, ns, false);
    let erfc = e.mul(ex, g);
    let one = e.f(1.0);
    let vl = e.sub(one, erfc);
    let vl = e.copysign(vl, x);
    let ax = e.abs(x);
    let small = e.cmp(Cmp::Lt, ax, one);
    let v = e.sel(small, vs, vl);
    let nan = e.is_nan(x);
    e.sel(nan, x, v)
}

/// GELU, the reference's formula: `(0.5 x) (1 + erf(x / sqrt 2))`. Where
/// `erf` is near -1 (`x` below about -3), the sum cancels: the result
/// then is as accurate as the formula, `|x|` ulp of 1, on every backend.
pub fn gelu<E: F64Ops>(e: &mut E, x: E::F) -> E::F {
    let c = e.f(FRAC_1_SQRT_2);
    let u = e.mul(x, c);
    let r = erf(e, u);
    gelu_tail(e, x, r)
}

/// GELU's tanh form, the reference's formula: `(0.5 x) (1 + tanh(sqrt(2 /
/// pi) (x + ((0.044715 x) x) x)))`.
pub fn gelu_tanh<E: F64Ops>(e: &mut E, x: E::F) -> E::F {
    let k = e.f(0.044715);
    let c = e.mul(k, x);
    let c = e.mul(c, x);
    let c = e.mul(c, x);
    let inner = e.add(x, c);
    let s = e.f(SQRT_2_OVER_PI);
    let inner = e.mul(s, inner);
    let t = tanh(e, inner);
    gelu_tail(e, x, t)
}

/// `(0.5 x) (1 + r)`.
fn gelu_tail<E: F64Ops>(e: &mut E, x: E::F, r: E::F) -> E::F {
    let one = e.f(1.0);
    let t = e.add(one, r);
    let half = e.f(0.5);
    let h = e.mul(half, x);
    e.mul(h, t)
}
