//! The one conversion rule between dtypes, and elements as bytes.
//!
//! The rule is Rust's `as` on every backend: floats round to nearest even
//! once from the exact value; float to integer truncates toward zero and
//! saturates at the type's range, NaN giving 0 (PTX `cvt.rzi` to `s32` or
//! `s64`, then a clamp for 8- and 16-bit types); integer to integer wraps
//! (keeps the low bits, two's complement); anything to `Bool` is `!= 0`
//! (NaN is true).
//!
//! Floats are handled as `f64` values and integers as `i64` values; both
//! are exact for every element of their kind.
//!
//! The FP8 formats follow PyTorch's casts from `f32` bit for bit
//! ([`crate::fp8`]: `E4M3` turns overflow, infinities and NaN into NaN,
//! `E5M2` overflows to infinity). From an `f64` or an `i64` they round
//! once from the exact value, as the halves do (through an `f32` rounded
//! to odd); PyTorch rounds an `f64` to `f32` first, which differs only for
//! values within an `f32` rounding of an FP8 tie.

use crate::{fp8, DType};

impl DType {
    /// Converts an `f64` to this type by the rule above, as an `f64` (lossy
    /// only for `I64` values beyond 2^53: see [`DType::saturate`]).
    #[inline]
    pub fn round(self, v: f64) -> f64 {
        match self {
            DType::F64 => v,
            DType::F32 => v as f32 as f64,
            DType::F16 => to_f16(v).to_f64(),
            DType::BF16 => to_bf16(v).to_f64(),
            DType::F8E4M3 | DType::F8E5M2 => f64::from(fp8::to_f32(self, to_fp8(self, v))),
            _ => self.saturate(v) as f64,
        }
    }

    /// A float converted to this integer type (or `Bool`): truncation
    /// toward zero, saturating, NaN to 0; `Bool` is `v != 0`.
    #[inline]
    pub fn saturate(self, v: f64) -> i64 {
        match self {
            DType::Bool => (v != 0.0) as i64,
            DType::I64 => v as i64,
            // Through i64 (saturating) and a clamp: the same as `as` into
            // the narrow type.
            _ => (v as i64).clamp(self.int_min(), self.int_max()),
        }
    }

    /// An integer converted to this integer type (or `Bool`): the low bits,
    /// two's complement; `Bool` is `v != 0`.
    #[inline]
    pub fn wrap(self, v: i64) -> i64 {
        match self {
            DType::Bool => (v != 0) as i64,
            DType::U8 => v as u8 as i64,
            DType::I8 => v as i8 as i64,
            DType::I16 => v as i16 as i64,
            DType::I32 => v as i32 as i64,
            _ => v,
        }
    }

    /// An integer converted to this type as an `f64`: floats round once
    /// from the exact integer, integer types wrap.
    #[inline]
    pub fn from_int(self, v: i64) -> f64 {
        match self {
            DType::F64 => v as f64,
            DType::F32 => v as f32 as f64,
            DType::F16 => half::f16::from_f32(i64_to_f32_odd(v)).to_f64(),
            DType::BF16 => half::bf16::from_f32(i64_to_f32_odd(v)).to_f64(),
            DType::F8E4M3 | DType::F8E5M2 => {
                f64::from(fp8::to_f32(self, fp8::from_f32(self, i64_to_f32_odd(v))))
            }
            _ => self.wrap(v) as f64,
        }
    }

    /// Reads element `i` of a byte buffer holding this type as an `f64`
    /// (exact but for `I64` beyond 2^53; [`DType::read_int`] is exact).
    #[inline]
    pub fn read(self, bytes: &[u8], i: usize) -> f64 {
        match self {
            DType::F64 => f64::from_le_bytes(le(bytes, i)),
            DType::F32 => f32::from_le_bytes(le(bytes, i)) as f64,
            DType::F16 => half::f16::from_le_bytes(le(bytes, i)).to_f64(),
            DType::BF16 => half::bf16::from_le_bytes(le(bytes, i)).to_f64(),
            DType::F8E4M3 | DType::F8E5M2 => f64::from(fp8::to_f32(self, bytes[i])),
            _ => self.read_int(bytes, i) as f64,
        }
    }

    /// Reads element `i` of a byte buffer holding this integer type (or
    /// `Bool`, as 0 or 1).
    #[inline]
    pub fn read_int(self, bytes: &[u8], i: usize) -> i64 {
        match self {
            DType::Bool => (bytes[i] != 0) as i64,
            DType::U8 => bytes[i] as i64,
            DType::I8 => bytes[i] as i8 as i64,
            DType::I16 => i16::from_le_bytes(le(bytes, i)) as i64,
            DType::I32 => i32::from_le_bytes(le(bytes, i)) as i64,
            DType::I64 => i64::from_le_bytes(le(bytes, i)),
            _ => panic!("read_int of a {self} buffer"),
        }
    }

    /// Writes `v` (converted to this type) as element `i` of a byte buffer.
    #[inline]
    pub fn write(self, bytes: &mut [u8], i: usize, v: f64) {
        let s = self.size();
        let at = &mut bytes[s * i..s * i + s];
        match self {
            DType::F64 => at.copy_from_slice(&v.to_le_bytes()),
            DType::F32 => at.copy_from_slice(&(v as f32).to_le_bytes()),
            DType::F16 => at.copy_from_slice(&to_f16(v).to_le_bytes()),
            DType::BF16 => at.copy_from_slice(&to_bf16(v).to_le_bytes()),
            DType::F8E4M3 | DType::F8E5M2 => at[0] = to_fp8(self, v),
            _ => self.write_int(bytes, i, self.saturate(v)),
        }
    }

    /// Writes the integer `v` (wrapped to this integer type, or `!= 0` for
    /// `Bool`) as element `i` of a byte buffer.
    #[inline]
    pub fn write_int(self, bytes: &mut [u8], i: usize, v: i64) {
        let s = self.size();
        let v = self.wrap(v);
        bytes[s * i..s * i + s].copy_from_slice(&v.to_le_bytes()[..s]);
    }
}

/// The `N` bytes of element `i` (of `N` bytes each).
#[inline]
fn le<const N: usize>(bytes: &[u8], i: usize) -> [u8; N] {
    bytes[N * i..N * i + N].try_into().unwrap()
}

/// `f` (the nearest `f32` to `exact`) turned into `exact` rounded to odd:
/// `f` when exact, else the truncation with its last bit set. A later
/// rounding to a half type (11 or 8 significant bits, far fewer than f32's
/// 24) then rounds once, correctly.
#[inline]
fn odd(f: f32, exact: bool, above: bool) -> f32 {
    if exact || f.is_nan() {
        return f;
    }
    // Round-to-nearest went away from zero: step back toward zero first.
    let bits = if above { f.to_bits() - 1 } else { f.to_bits() };
    f32::from_bits(bits | 1)
}

/// `v` as an `f32` rounded to odd (see [`odd`]); `half`'s own `from_f64`
/// drops the low mantissa bits and can round wrong.
#[inline]
fn to_f32_odd(v: f64) -> f32 {
    let f = v as f32;
    if !v.is_finite() {
        return f;
    }
    odd(f, f as f64 == v, (f as f64).abs() > v.abs())
}

/// `v` as an `f32` rounded to odd, from the exact integer (an `f64` would
/// round first beyond 2^53).
#[inline]
fn i64_to_f32_odd(v: i64) -> f32 {
    let f = v as f32;
    // Every f32 of an i64's magnitude is an integer below 2^64.
    let back = f as f64 as i128;
    odd(
        f,
        back == v as i128,
        back.unsigned_abs() > (v as i128).unsigned_abs(),
    )
}

/// `v` rounded once to the nearest `f16` (ties to even).
#[inline]
pub fn to_f16(v: f64) -> half::f16 {
    half::f16::from_f32(to_f32_odd(v))
}

/// `v` rounded once to the nearest `bf16` (ties to even).
#[inline]
pub fn to_bf16(v: f64) -> half::bf16 {
    half::bf16::from_f32(to_f32_odd(v))
}

/// `v` rounded once to the nearest code of the FP8 type `dt` (ties to
/// even; overflow as [`crate::fp8`] says).
#[inline]
pub fn to_fp8(dt: DType, v: f64) -> u8 {
    fp8::from_f32(dt, to_f32_odd(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_and_bytes_roundtrip() {
        let mut buf = vec![0u8; 16];
        for dt in DType::ALL {
            dt.write(&mut buf, 1, 3.0);
            assert_eq!(dt.read(&buf, 1), dt.round(3.0));
        }
        // Float to int saturates like Rust's `as` and PTX `cvt.rzi.s32.f32`.
        assert_eq!(DType::I32.round(2147483648.0), 2147483647.0);
        assert_eq!(DType::I32.round(f64::NAN), 0.0);
        assert_eq!(DType::I32.round(-2.7), -2.0);
        assert_eq!(DType::U8.saturate(300.0), 255);
        assert_eq!(DType::U8.saturate(-3.5), 0);
        assert_eq!(DType::I8.saturate(-1e10), -128);
        assert_eq!(DType::I64.saturate(1e30), i64::MAX);
        assert_eq!(DType::Bool.saturate(f64::NAN), 1);
        assert_eq!(DType::F16.round(1.0 + 1e-4), 1.0);
        assert_eq!(DType::F64.round(0.1), 0.1);
    }

    #[test]
    fn integers_wrap_and_roundtrip_exactly() {
        let mut buf = vec![0u8; 16];
        DType::I64.write_int(&mut buf, 1, i64::MIN + 3);
        assert_eq!(DType::I64.read_int(&buf, 1), i64::MIN + 3);
        DType::U8.write_int(&mut buf, 3, 300);
        assert_eq!(DType::U8.read_int(&buf, 3), 44);
        assert_eq!(DType::I8.wrap(200), -56);
        assert_eq!(DType::I16.wrap(40000), 40000 - 65536);
        assert_eq!(DType::Bool.wrap(-7), 1);
    }

    #[test]
    fn halves_round_once_to_nearest_even() {
        // Above the tie between 1 and 1 + 2^-7 by 2^-23: rounds up.
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-23);
        assert_eq!(DType::BF16.round(x), 1.0 + 2f64.powi(-7));
        // An exact tie rounds to even (down), a hair above it rounds up.
        assert_eq!(DType::BF16.round(1.0 + 2f64.powi(-8)), 1.0);
        assert_eq!(
            DType::F16.round(1.0 + 2f64.powi(-11) + 2f64.powi(-40)),
            1.0 + 2f64.powi(-10)
        );
        assert_eq!(DType::F16.round(1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(DType::F16.round(1e6), f64::INFINITY);
        assert!(DType::BF16.round(f64::NAN).is_nan());
        // 2^60 + 2^52 + 1 is just above a bf16 tie; through an f64 it would
        // round to the tie and then to even (down).
        let v = (1i64 << 60) + (1 << 52) + 1;
        assert_eq!(DType::BF16.from_int(v), 2f64.powi(60) + 2f64.powi(53));
        assert_eq!(DType::F32.from_int(i64::MAX), 2f64.powi(63));
    }

    #[test]
    fn fp8_rounds_once_from_f64_and_i64() {
        let (e4, e5) = (DType::F8E4M3, DType::F8E5M2);
        // Just above the tie between 1 and 1.125: up (through a plain f32
        // the 2^-40 would vanish and the tie round to even, down).
        assert_eq!(e4.round(1.0 + 2f64.powi(-4) + 2f64.powi(-40)), 1.125);
        assert_eq!(e4.round(1.0 + 2f64.powi(-4)), 1.0);
        assert_eq!(e5.round(1.0 + 2f64.powi(-3) + 2f64.powi(-40)), 1.25);
        // Overflow: e4m3 NaN from just above 464, e5m2 infinity.
        assert_eq!(e4.round(464.0), 448.0);
        assert!(e4.round(464.0 + 1e-9).is_nan());
        assert!(e4.round(1e300).is_nan());
        assert_eq!(e5.round(1e300), f64::INFINITY);
        assert_eq!(e5.round(-1e300), f64::NEG_INFINITY);
        assert!(e5.round(f64::NAN).is_nan());
        // Below the smallest e4m3 subnormal's half, and just above it.
        assert_eq!(e4.round(2f64.powi(-10)), 0.0);
        assert_eq!(e4.round(2f64.powi(-10) + 2f64.powi(-40)), 2f64.powi(-9));
        // Integers: 17 is a tie between 16 and 18 (even: 16); beyond it up.
        assert_eq!(e4.from_int(17), 16.0);
        assert!(e4.from_int(i64::MAX).is_nan());
        assert_eq!(e5.from_int(i64::MIN), f64::NEG_INFINITY);
        assert_eq!(e5.from_int(-9), -8.0);
        let mut buf = [0u8; 4];
        e4.write(&mut buf, 2, -0.0);
        assert_eq!(buf[2], 0x80);
        e5.write(&mut buf, 3, -3.0);
        assert_eq!(e5.read(&buf, 3), -3.0);
    }
}
