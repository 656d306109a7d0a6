//! The minimax fits (Remez, in `f64`, made for smelt) and constants behind
//! the `f32` sequences of `erf`, the exact GELU and `expm1`, shared by the
//! GPU's code (`ptx::special`) and the CPU's (`exec::exp_ops`, mirrored by
//! the LLVM JIT): both evaluate them in `f32` in this Horner order with
//! fused multiply-adds (`erf` and the GELU differ only in their `exp`).

use std::f64::consts::LN_2;

/// `erf(x) = x + x * P(x^2)` for `|x| < 1`: `P`, highest power first
/// (relative error of the fit 1.2e-9). Adding `x` in the last fused
/// multiply-add keeps the rounding of `P` small against the result.
pub const ERF_SMALL: [f64; 7] = [
    7.853861297375589e-05,
    -0.0008010193608453488,
    0.005188327683841719,
    -0.026853811934302908,
    0.11283585148590045,
    -0.3761262582423084,
    0.128_379_165_726_710_2,
];

/// `ln(erfc(a)) = Q(a - ERFC_CENTRE)` for `1 <= a <= 4`: `Q`, highest
/// power first (absolute error of the fit 5.1e-9). Beyond 4, `erf` is 1 in
/// `f32`.
pub const ERFC_LOG: [f64; 10] = [
    -5.5550727721677644e-08,
    1.614955966360459e-06,
    -1.3028142048945727e-05,
    7.739040177001414e-05,
    -0.0004206192253471761,
    0.0021651659664980545,
    -0.010858220306673142,
    -0.9438936428169511,
    -5.352680731153332,
    -7.806815276873154,
];

/// The point `ERFC_LOG` is centred on, so its terms stay small.
pub const ERFC_CENTRE: f64 = 2.5;

/// `|x|` from which `erf` uses `1 - exp(ERFC_LOG)`.
pub const ERF_SPLIT: f64 = 1.0;

/// `|x|` beyond which `erfc(|x|)` is taken as 0 (`erf(4)` is 1 in `f32`).
pub const ERFC_END: f64 = 4.0;

/// `expm1(r) = r * P(r)` for `|r| <= ln(2)/2`: `P`, highest power first
/// (relative error of the fit 2.5e-10).
pub const EXPM1: [f64; 7] = [
    0.00019841250893671926,
    0.001394204017188195,
    0.008333405689717946,
    0.041666341936544615,
    0.1666666622428421,
    0.5000000049481323,
    1.0000000000337474,
];

/// `ln 2` split so that `k * LN2_HI` is exact for `|k| < 2^15`.
pub const LN2_HI: f32 = 0.693_359_4;

/// `ln 2 - LN2_HI`.
pub const LN2_LO: f32 = (LN_2 - LN2_HI as f64) as f32;

/// `expm1` clamps its input to this range: below it the result is -1 in
/// `f32`, above it infinite, and `2^k` stays a normal `f32`.
pub const EXPM1_RANGE: (f64, f64) = (-20.0, 89.0);
