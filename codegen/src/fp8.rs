//! The two FP8 formats' codes and their conversions to and from `f32`,
//! bit for bit PyTorch's (`c10::Float8_e4m3fn`, `c10::Float8_e5m2`).
//!
//! From `f32`, both round to nearest even. Beyond the finite range they
//! differ: `E5M2` is IEEE-like (overflow gives `±inf`, NaN gives
//! `0x7F`/`0xFF`); `E4M3` (`fn`: finite, NaN-only) has no infinity, and
//! every `f32` that rounds beyond 448 (above 464, the tie between 448 and
//! the NaN code's 480, which rounds to the even 448), every infinity and
//! every NaN becomes the NaN code `S.1111.111` with the input's sign.
//! That is PyTorch's cast, not the saturating `satfinite` of the PTX
//! instructions or of OCP's optional saturation mode.
//!
//! Written here (a few lines of bit manipulation) rather than taken from
//! a crate: the project's one conversion rule needs exactly PyTorch's
//! overflow behaviour, and the GPU emitter ([`crate::ptx`]) must follow the
//! same rule, which the exhaustive tests below pin down.

use crate::DType;

/// The layout of one FP8 format.
#[derive(Clone, Copy, Debug)]
struct Format {
    /// Explicit mantissa bits.
    mant: u32,
    /// Exponent bias.
    bias: i32,
    /// Whether the all-ones exponent holds infinities and NaNs (`E5M2`)
    /// or ordinary values with one NaN code (`E4M3`).
    ieee: bool,
}

const E4M3: Format = Format {
    mant: 3,
    bias: 7,
    ieee: false,
};
const E5M2: Format = Format {
    mant: 2,
    bias: 15,
    ieee: true,
};

/// The layout of `dt`.
///
/// # Panics
/// When `dt` is not an FP8 type (a caller's bug).
fn format(dt: DType) -> Format {
    match dt {
        DType::F8E4M3 => E4M3,
        DType::F8E5M2 => E5M2,
        _ => panic!("fp8 conversion of a {dt} value"),
    }
}

/// The canonical positive NaN code of every FP8 format (`0x7F`).
pub const NAN: u8 = 0x7f;
/// `E5M2`'s positive infinity.
pub const E5M2_INF: u8 = 0x7c;

/// The smallest `|x|` (as `f32` bits) that no longer rounds to a finite
/// code: `E4M3`'s 480 (the NaN code read as a number), `E5M2`'s 65536
/// (2^16, what its infinity code would be).
pub fn overflow_bits(dt: DType) -> u32 {
    let f = format(dt);
    // The value of the all-ones code (E4M3) or of the first code with the
    // all-ones exponent (E5M2), as f32 bits.
    let top_exp = (1i32 << (7 - f.mant)) - 1;
    let frac = if f.ieee { 0 } else { (1u32 << f.mant) - 1 };
    (((top_exp - f.bias + 127) as u32) << 23) | (frac << (23 - f.mant))
}

/// Bits of the smallest normal `|x|` of `dt`, `2^(1 - bias)`, as `f32` bits.
pub fn min_normal_bits(dt: DType) -> u32 {
    ((128 - format(dt).bias) as u32) << 23
}

/// `f32`'s exponent bias less `dt`'s, which rebiases a normal value's
/// exponent field.
pub fn rebias(dt: DType) -> u32 {
    (127 - format(dt).bias) as u32
}

/// The power of two that scales `dt`'s smallest subnormal, 2^(1 - bias -
/// mant), to 1: a subnormal `|x|` times `2^subnormal_exp` is its code.
pub fn subnormal_exp(dt: DType) -> i32 {
    let f = format(dt);
    f.bias - 1 + f.mant as i32
}

/// The code of `|x|` (`x`'s `f32` bits without the sign) by the
/// normal-range rule: the mantissa rounded to `dt`'s bits, to nearest
/// even (a carry steps the exponent), and the exponent rebiased.
fn normal_code(dt: DType, a: u32) -> u32 {
    let shift = 23 - format(dt).mant;
    let half = (1u32 << (shift - 1)) - 1;
    let r = a + half + ((a >> shift) & 1);
    (r >> shift) - (rebias(dt) << (23 - shift))
}

/// `x` rounded to the nearest `dt` code (ties to even), PyTorch's cast.
///
/// The GPU emitter (`ptx::fp8`) runs the same steps on the same constants.
pub fn from_f32(dt: DType, x: f32) -> u8 {
    let f = format(dt);
    let bits = x.to_bits();
    let sign = ((bits >> 24) & 0x80) as u8;
    let a = bits & 0x7fff_ffff;
    if a >= overflow_bits(dt) {
        let code = if f.ieee && a <= 0x7f80_0000 {
            E5M2_INF
        } else {
            NAN
        };
        return sign | code;
    }
    let code = if a < min_normal_bits(dt) {
        // Subnormal: the value in units of the smallest subnormal is exact
        // in f32 (a power-of-two scale); rounding it to an integer is the
        // rounding to the code. A result of 2^mant is the smallest
        // normal's code, as it should be.
        let units = f32::from_bits(a) * 2f32.powi(subnormal_exp(dt));
        units.round_ties_even() as u32
    } else {
        normal_code(dt, a)
    };
    sign | code as u8
}

/// The value of `dt` code `c` (exact in `f32`).
pub fn to_f32(dt: DType, c: u8) -> f32 {
    let f = format(dt);
    let e = i32::from((c & 0x7f) >> f.mant);
    let m = i32::from(c) & ((1 << f.mant) - 1);
    let top = (1 << (7 - f.mant)) - 1;
    let v = if f.ieee && e == top {
        if m == 0 {
            f32::INFINITY
        } else {
            f32::NAN
        }
    } else if !f.ieee && e == top && m == (1 << f.mant) - 1 {
        f32::NAN
    } else if e == 0 {
        m as f32 * 2f32.powi(1 - f.bias - f.mant as i32)
    } else {
        ((1 << f.mant) + m) as f32 * 2f32.powi(e - f.bias - f.mant as i32)
    };
    // Negation flips the sign bit of NaNs too, so a NaN keeps its sign.
    if c & 0x80 != 0 {
        -v
    } else {
        v
    }
}

/// Largest finite value of `dt` (448 for `E4M3`, 57344 for `E5M2`).
pub fn max_finite(dt: DType) -> f64 {
    // The code below the NaN (E4M3) or below the infinity (E5M2).
    let code = if format(dt).ieee {
        E5M2_INF - 1
    } else {
        NAN - 1
    };
    f64::from(to_f32(dt, code))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FP8: [DType; 2] = [DType::F8E4M3, DType::F8E5M2];

    /// Code `c`'s value by the format's definition, in f64.
    fn reference(dt: DType, c: u8) -> f64 {
        let (mant, bias, exp_bits) = if dt == DType::F8E4M3 {
            (3, 7, 4)
        } else {
            (2, 15, 5)
        };
        let s = if c & 0x80 != 0 { -1.0 } else { 1.0 };
        let e = ((c & 0x7f) >> mant) as i32;
        let m = (c & ((1 << mant) - 1)) as f64;
        let top = (1 << exp_bits) - 1;
        if dt == DType::F8E5M2 && e == top {
            return if m == 0.0 {
                s * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        if dt == DType::F8E4M3 && c & 0x7f == 0x7f {
            return f64::NAN;
        }
        if e == 0 {
            s * m * 2f64.powi(1 - bias - mant)
        } else {
            s * (1.0 + m / (1 << mant) as f64) * 2f64.powi(e - bias)
        }
    }

    /// The finite codes of `dt`, increasing by value.
    fn ladder(dt: DType) -> Vec<(u8, f64)> {
        let mut v: Vec<(u8, f64)> = (0..=255u8)
            .map(|c| (c, reference(dt, c)))
            .filter(|(c, x)| x.is_finite() && *c != 0x80)
            .collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
        v
    }

    #[test]
    fn every_code_decodes_to_its_definition() {
        for dt in FP8 {
            for c in 0..=255u8 {
                let (got, want) = (to_f32(dt, c) as f64, reference(dt, c));
                assert!(
                    got == want || (got.is_nan() && want.is_nan()),
                    "{dt} code {c:#04x}: {got} vs {want}"
                );
                if c & 0x7f == 0 {
                    assert_eq!(got.is_sign_negative(), c == 0x80, "{dt} signed zero");
                }
            }
        }
        assert_eq!(max_finite(DType::F8E4M3), 448.0);
        assert_eq!(max_finite(DType::F8E5M2), 57344.0);
        assert_eq!(to_f32(DType::F8E4M3, 0x01), 2f32.powi(-9));
        assert_eq!(to_f32(DType::F8E5M2, 0x01), 2f32.powi(-16));
    }

    #[test]
    fn every_code_round_trips() {
        for dt in FP8 {
            for c in 0..=255u8 {
                let x = to_f32(dt, c);
                let back = from_f32(dt, x);
                if x.is_nan() {
                    // NaNs come back as the canonical NaN, with their sign.
                    assert_eq!(back & 0x7f, NAN, "{dt} {c:#04x}");
                } else {
                    assert_eq!(back, c, "{dt} code {c:#04x} ({x})");
                }
            }
        }
    }

    /// Rounds `x` (finite, at most `max`'s magnitude plus a half step) to
    /// the nearest value of the ladder, ties to the even code: the
    /// reference the bit-level conversion must match.
    fn nearest(ladder: &[(u8, f64)], x: f64) -> u8 {
        let mut best = ladder[0];
        for &(c, v) in ladder {
            let (d, db) = ((v - x).abs(), (best.1 - x).abs());
            if d < db || (d == db && c & 1 == 0 && best.0 & 1 == 1) {
                best = (c, v);
            }
        }
        best.0
    }

    #[test]
    fn rounding_matches_the_nearest_even_reference() {
        for dt in FP8 {
            let ladder = ladder(dt);
            let max = max_finite(dt);
            // Every code, both neighbours' midpoints, and points just off
            // them (one f32 step each way), in both signs.
            for w in ladder.windows(2) {
                let (lo, hi) = (w[0].1, w[1].1);
                let mid = ((lo + hi) / 2.0) as f32;
                for x in [
                    lo as f32,
                    mid,
                    f32::from_bits(mid.to_bits() + 1),
                    f32::from_bits(mid.to_bits() - 1),
                    ((3.0 * lo + hi) / 4.0) as f32,
                ] {
                    let got = from_f32(dt, x);
                    let want = nearest(&ladder, x as f64);
                    // Equal values (a zero's sign is checked below).
                    assert_eq!(to_f32(dt, got), to_f32(dt, want), "{dt} {x:e}");
                }
            }
            // Below the smallest subnormal's half: zero, with the sign.
            let tiny = to_f32(dt, 1) / 2.0;
            assert_eq!(from_f32(dt, tiny), 0);
            assert_eq!(from_f32(dt, -tiny), 0x80);
            assert_eq!(from_f32(dt, f32::from_bits(tiny.to_bits() + 1)), 1);
            assert_eq!(from_f32(dt, 1e-30), 0);
            assert_eq!(from_f32(dt, f32::from_bits(1)), 0);
            assert_eq!(to_f32(dt, from_f32(dt, max as f32)) as f64, max);
        }
    }

    #[test]
    fn overflow_follows_pytorch() {
        let e4 = DType::F8E4M3;
        // 464 is the tie between 448 and the NaN code: even, so 448.
        assert_eq!(from_f32(e4, 464.0), 0x7e);
        assert_eq!(from_f32(e4, -464.0), 0xfe);
        assert_eq!(from_f32(e4, 464.0001), NAN);
        assert_eq!(from_f32(e4, 479.99), NAN);
        assert_eq!(from_f32(e4, 480.0), NAN);
        assert_eq!(from_f32(e4, -1e6), 0x80 | NAN);
        assert_eq!(from_f32(e4, f32::INFINITY), NAN);
        assert_eq!(from_f32(e4, f32::NEG_INFINITY), 0xff);
        assert_eq!(from_f32(e4, f32::NAN), NAN);
        assert_eq!(from_f32(e4, -f32::NAN), 0xff);
        let e5 = DType::F8E5M2;
        assert_eq!(from_f32(e5, 57344.0), 0x7b);
        // 61440 is the tie between 57344 and 65536 (inf): even, so inf.
        assert_eq!(from_f32(e5, 61439.996), 0x7b);
        assert_eq!(from_f32(e5, 61440.0), E5M2_INF);
        assert_eq!(from_f32(e5, 1e10), E5M2_INF);
        assert_eq!(from_f32(e5, -1e10), 0x80 | E5M2_INF);
        assert_eq!(from_f32(e5, f32::INFINITY), E5M2_INF);
        assert_eq!(from_f32(e5, f32::NEG_INFINITY), 0xfc);
        assert_eq!(from_f32(e5, f32::NAN), NAN);
        assert_eq!(overflow_bits(e4), 480f32.to_bits());
        assert_eq!(overflow_bits(e5), 65536f32.to_bits());
    }

    #[test]
    fn every_f32_near_the_range_rounds_like_the_reference() {
        // A dense sweep of f32 bit patterns through the subnormals, the
        // normal range and the overflow edge of both formats.
        for dt in FP8 {
            let ladder = ladder(dt);
            let edge = overflow_bits(dt);
            let top = max_finite(dt);
            let step = (edge / 200_000).max(1);
            let mut bits = 0u32;
            while bits < edge + (1 << 22) {
                let x = f32::from_bits(bits);
                let got = from_f32(dt, x);
                let want = if bits >= edge {
                    None
                } else {
                    let c = nearest(&ladder, x as f64);
                    // Beyond the top finite value's half step: overflow.
                    let next = top + (top - ladder[ladder.len() - 2].1);
                    let beyond = (x as f64) > (top + next) / 2.0
                        || ((x as f64) == (top + next) / 2.0 && ladder.last().unwrap().0 & 1 == 1);
                    (!beyond).then_some(c)
                };
                match want {
                    Some(c) => assert_eq!(to_f32(dt, got), to_f32(dt, c), "{dt} {x:e}"),
                    None if dt == DType::F8E4M3 => assert_eq!(got, NAN, "{dt} {x:e}"),
                    None => assert_eq!(got, E5M2_INF, "{dt} {x:e}"),
                }
                bits += step;
            }
        }
    }
}
