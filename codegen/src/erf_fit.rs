//! The minimax fits (Remez, in `f64`, made for smelt) behind `f32` `erf`
//! and the exact GELU, shared by the GPU's sequence (`ptx::special`) and
//! the CPU's (`exec::exp_ops`, mirrored by the LLVM JIT): both evaluate
//! them in `f32` in this Horner order with fused multiply-adds, so they
//! differ only in their `exp`.

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
