//! Host element types that tensors are built from and read back into.
//!
//! One conversion rule holds everywhere, the rule of Rust's `as`
//! (`num_traits::AsPrimitive`), which [`DType::round`] and `cast()` follow on
//! every backend: floats round to nearest even once from the exact value,
//! float to `i32` truncates toward zero and saturates (NaN gives 0), a bool
//! is `!= 0` (NaN is true) and reads as 0 or 1. Reading a tensor into `T`
//! is therefore the same as `cast(T::DTYPE)` and reading that.

use crate::DType;
use half::{bf16, f16};
use num_traits::AsPrimitive;
use smelt_codegen::dtype::{to_bf16, to_f16};

/// A Rust type that maps to a [`DType`].
///
/// `f64` maps to `F32` (smelt's widest float): building from `f64` rounds,
/// reading into `f64` is exact.
pub trait Element: Copy + Send + Sync + 'static {
    /// The dtype a tensor built from this type has.
    const DTYPE: DType;
    /// The value as an `f64`: exact for every element type.
    fn to_f64(self) -> f64;
    /// `v` converted by the rule above (for `f64`, `v` itself).
    fn from_f64(v: f64) -> Self;
}

macro_rules! element {
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
        }
    };
}

element!(f32, DType::F32, |x| x.as_(), |v| v.as_());
element!(f64, DType::F32, |x| x, |v| v);
element!(i32, DType::I32, |x| x.as_(), |v| v.as_());
element!(bool, DType::Bool, |x| x as u8 as f64, |v| v != 0.0);
// `half`'s own f64 conversions drop low bits before rounding; these round once.
element!(f16, DType::F16, |x| x.as_(), |v| to_f16(v));
element!(bf16, DType::BF16, |x| x.as_(), |v| to_bf16(v));

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
            agrees_with_cast::<f32>(v);
            agrees_with_cast::<i32>(v);
            agrees_with_cast::<bool>(v);
            agrees_with_cast::<f16>(v);
            agrees_with_cast::<bf16>(v);
        }
        assert_eq!(i32::from_f64(f64::NAN), 0);
        assert_eq!(DType::I32.round(f64::NAN), 0.0);
    }
}
