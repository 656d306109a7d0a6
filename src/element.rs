//! Host element types that tensors are built from and read back into.
//!
//! One conversion rule holds everywhere, the rule of Rust's `as`
//! (`num_traits::AsPrimitive`), which `cast()` follows on every backend
//! (`smelt_codegen::convert`): floats round to nearest even once from the
//! exact value, float to integer truncates toward zero and saturates (NaN
//! gives 0), integer to integer wraps, a bool is `!= 0` (NaN is true) and
//! reads as 0 or 1. Reading a tensor into `T` is therefore the same as
//! `cast(T::DTYPE)` and reading that. Integers travel as `i64`, never
//! through an `f64`, so `I64` values beyond 2^53 are exact.

use crate::DType;
use half::{bf16, f16};
use num_traits::AsPrimitive;

/// A Rust type that maps to a [`DType`]: `f64`, `f32`, `f16`, `bf16`,
/// `i64`, `i32`, `i16`, `i8`, `u8` and `bool`.
pub trait Element: Copy + Send + Sync + 'static {
    /// The dtype a tensor built from this type has.
    const DTYPE: DType;
    /// The value as an `f64`: exact for every element type but `i64`
    /// beyond 2^53.
    fn to_f64(self) -> f64;
    /// The float `v` converted by the rule above.
    fn from_f64(v: f64) -> Self;
    /// The integer `v` converted by the rule above.
    fn from_i64(v: i64) -> Self;
    /// Writes the value as element `i` of a buffer of [`Self::DTYPE`].
    fn write(self, bytes: &mut [u8], i: usize);

    /// Element `i` of a buffer of dtype `dt`, converted to this type.
    fn read(dt: DType, bytes: &[u8], i: usize) -> Self {
        if dt.is_float() {
            Self::from_f64(dt.read(bytes, i))
        } else {
            Self::from_i64(dt.read_int(bytes, i))
        }
    }
}

macro_rules! float_element {
    ($t:ty, $dt:expr, |$x:ident| $to:expr, |$v:ident| $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dt;
            fn to_f64(self) -> f64 {
                let $x = self;
                $to
            }
            fn from_f64($v: f64) -> Self {
                $from
            }
            fn from_i64(v: i64) -> Self {
                // Rounded once from the exact integer, then exact in `Self`.
                Self::from_f64($dt.from_int(v))
            }
            fn write(self, bytes: &mut [u8], i: usize) {
                $dt.write(bytes, i, self.to_f64())
            }
        }
    };
}

float_element!(f64, DType::F64, |x| x, |v| v);
float_element!(f32, DType::F32, |x| x.as_(), |v| v.as_());
// `half`'s own f64 conversions drop low bits before rounding; these round once.
float_element!(f16, DType::F16, |x| x.as_(), |v| f16::from_f64(
    DType::F16.round(v)
));
float_element!(bf16, DType::BF16, |x| x.as_(), |v| {
    bf16::from_f64(DType::BF16.round(v))
});

macro_rules! int_element {
    ($t:ty, $dt:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dt;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn write(self, bytes: &mut [u8], i: usize) {
                $dt.write_int(bytes, i, self as i64)
            }
        }
    };
}

int_element!(i64, DType::I64);
int_element!(i32, DType::I32);
int_element!(i16, DType::I16);
int_element!(i8, DType::I8);
int_element!(u8, DType::U8);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn write(self, bytes: &mut [u8], i: usize) {
        bytes[i] = self as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agrees_with_cast<T: Element>(v: f64) {
        assert_eq!(
            T::from_f64(v).to_f64().to_bits(),
            T::DTYPE.round(v).to_bits(),
            "{v} into {}",
            T::DTYPE
        );
    }

    #[test]
    fn host_conversion_is_the_cast_rule() {
        let values = [
            0.0,
            -2.5,
            3e9,
            -3e9,
            f64::INFINITY,
            f64::NEG_INFINITY,
            70000.0,
            1.0 + 2f64.powi(-8) + 2f64.powi(-23),
            i32::MAX as f64,
            0.1,
        ];
        for v in values {
            agrees_with_cast::<f64>(v);
            agrees_with_cast::<f32>(v);
            agrees_with_cast::<i64>(v);
            agrees_with_cast::<i32>(v);
            agrees_with_cast::<i16>(v);
            agrees_with_cast::<i8>(v);
            agrees_with_cast::<u8>(v);
            agrees_with_cast::<bool>(v);
            agrees_with_cast::<f16>(v);
            agrees_with_cast::<bf16>(v);
        }
        // Integers wrap and convert from the exact value.
        assert_eq!(u8::from_i64(300), 44);
        assert_eq!(i8::from_i64(-129), 127);
        let big = (1i64 << 60) + (1 << 52) + 1;
        assert_eq!(bf16::from_i64(big).to_f64(), DType::BF16.from_int(big));
        let mut b = vec![0u8; 16];
        (i64::MAX - 1).write(&mut b, 1);
        assert_eq!(i64::read(DType::I64, &b, 1), i64::MAX - 1);
        assert_eq!(i32::from_f64(f64::NAN), 0);
        assert_eq!(DType::I32.round(f64::NAN), 0.0);
    }
}
