//! Host element types that tensors are built from and read back into.

use crate::DType;
use half::{bf16, f16};

/// A Rust type that maps to a [`DType`].
///
/// `f64` maps to `F32` (smelt's widest float): building from `f64` rounds,
/// reading into `f64` is exact.
pub trait Element: Copy + Send + Sync + 'static {
    /// The dtype a tensor built from this type has.
    const DTYPE: DType;
    fn to_f64(self) -> f64;
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

element!(f32, DType::F32, |x| x as f64, |v| v as f32);
element!(f64, DType::F32, |x| x, |v| v);
element!(i32, DType::I32, |x| x as f64, |v| v as i32);
element!(bool, DType::Bool, |x| x as u8 as f64, |v| v != 0.0);
element!(f16, DType::F16, |x| x.to_f64(), |v| f16::from_f64(v));
element!(bf16, DType::BF16, |x| x.to_f64(), |v| bf16::from_f64(v));
