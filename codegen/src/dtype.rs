//! Element types and the promotion rules between them.

use std::fmt;

/// Element type of a tensor.
///
/// Promotion follows PyTorch: `Bool < I32 < F16/BF16 < F32`, and `F16` with
/// `BF16` promotes to `F32`.
///
/// ```
/// use smelt_codegen::DType;
/// assert_eq!(DType::I32.promote(DType::F16), DType::F16);
/// assert_eq!(DType::F16.promote(DType::BF16), DType::F32);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Booleans, one byte each (0 or 1).
    Bool,
    /// 32-bit two's-complement integers (arithmetic wraps).
    I32,
    /// IEEE half precision (computed in `f32`).
    F16,
    /// bfloat16 (computed in `f32`).
    BF16,
    /// IEEE single precision.
    F32,
}

impl DType {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
        }
    }

    /// True for the types an index tensor may have (gather, index_select,
    /// embedding, scatter_add): the one place that says which they are.
    pub fn is_index(self) -> bool {
        matches!(self, DType::I32)
    }

    /// True for the floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32)
    }

    /// The type both operands of a binary op are cast to.
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        match (self, other) {
            (a, b) if a == b => a,
            (F16, BF16) | (BF16, F16) => F32,
            (F32, _) | (_, F32) => F32,
            (F16, _) | (_, F16) => F16,
            (BF16, _) | (_, BF16) => BF16,
            (I32, _) | (_, I32) => I32,
            _ => Bool,
        }
    }

    /// The float type an op such as `exp` or `/` computes in for this input:
    /// integers and bools become `F32`, floats stay.
    pub fn to_float(self) -> DType {
        if self.is_float() {
            self
        } else {
            DType::F32
        }
    }

    /// Converts an `f64` to this type by smelt's one conversion rule, the
    /// rule of Rust's `as` (and of `cast()` on every backend): floats round
    /// to nearest even (once, from the exact value), float to `I32`
    /// truncates toward zero and saturates with NaN giving 0, `Bool` is
    /// `!= 0` (NaN is true).
    #[inline]
    pub fn round(self, v: f64) -> f64 {
        match self {
            DType::F32 => v as f32 as f64,
            DType::F16 => to_f16(v).to_f64(),
            DType::BF16 => to_bf16(v).to_f64(),
            DType::I32 => v as i32 as f64,
            DType::Bool => (v != 0.0) as u8 as f64,
        }
    }

    /// Reads element `i` of a byte buffer holding this type.
    #[inline]
    pub fn read(self, bytes: &[u8], i: usize) -> f64 {
        match self {
            DType::F32 => f32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap()) as f64,
            DType::I32 => i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap()) as f64,
            DType::F16 => {
                half::f16::from_le_bytes(bytes[2 * i..2 * i + 2].try_into().unwrap()).to_f64()
            }
            DType::BF16 => {
                half::bf16::from_le_bytes(bytes[2 * i..2 * i + 2].try_into().unwrap()).to_f64()
            }
            DType::Bool => (bytes[i] != 0) as u8 as f64,
        }
    }

    /// Writes `v` (rounded to this type) as element `i` of a byte buffer.
    #[inline]
    pub fn write(self, bytes: &mut [u8], i: usize, v: f64) {
        match self {
            DType::F32 => bytes[4 * i..4 * i + 4].copy_from_slice(&(v as f32).to_le_bytes()),
            DType::I32 => bytes[4 * i..4 * i + 4].copy_from_slice(&(v as i32).to_le_bytes()),
            DType::F16 => bytes[2 * i..2 * i + 2].copy_from_slice(&to_f16(v).to_le_bytes()),
            DType::BF16 => bytes[2 * i..2 * i + 2].copy_from_slice(&to_bf16(v).to_le_bytes()),
            DType::Bool => bytes[i] = (v != 0.0) as u8,
        }
    }

    /// The name NumPy and PyTorch print (`float32`, `int32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I32 => "int32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
        }
    }
}

/// `v` as an `f32` rounded to odd: exact when representable, else the
/// truncation with its last bit set. A later rounding to a half type (11 or
/// 8 significant bits, far fewer than f32's 24) then rounds once, correctly;
/// `half`'s own `from_f64` drops the low mantissa bits and can round wrong.
#[inline]
fn to_f32_odd(v: f64) -> f32 {
    let f = v as f32;
    if !v.is_finite() || f as f64 == v {
        return f;
    }
    // Round-to-nearest went away from zero: step back toward zero first.
    let bits = if (f as f64).abs() > v.abs() {
        f.to_bits() - 1
    } else {
        f.to_bits()
    };
    f32::from_bits(bits | 1)
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

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_is_symmetric_and_matches_torch() {
        let all = [DType::Bool, DType::I32, DType::F16, DType::BF16, DType::F32];
        for a in all {
            for b in all {
                assert_eq!(a.promote(b), b.promote(a));
            }
        }
        assert_eq!(DType::Bool.promote(DType::I32), DType::I32);
        assert_eq!(DType::BF16.promote(DType::I32), DType::BF16);
    }

    #[test]
    fn rounding_and_bytes_roundtrip() {
        let mut buf = vec![0u8; 8];
        for dt in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool] {
            dt.write(&mut buf, 1, 3.0);
            assert_eq!(dt.read(&buf, 1), dt.round(3.0));
        }
        // Float to int saturates like Rust's `as` and PTX `cvt.rzi.s32.f32`.
        assert_eq!(DType::I32.round(2147483648.0), 2147483647.0);
        assert_eq!(DType::I32.round(f64::NAN), 0.0);
        assert_eq!(DType::I32.round(-2.7), -2.0);
        assert_eq!(DType::F16.round(1.0 + 1e-4), 1.0);
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
    }
}
