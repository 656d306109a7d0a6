//! Dense host arrays of `f32` or `f64` that the CPU fast paths (matmul,
//! attention) pass between the interpreter and their own loops.

use crate::host_alloc::{output, recycle, vec_with_capacity};
use crate::interp::InterpError;
use crate::ir::Kernel;
use crate::DType;

/// An accumulation type of the fast paths.
pub(crate) trait Acc:
    Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    /// The kernel dtype of this type.
    const DTYPE: DType;
    /// Bytes per value.
    const SIZE: usize;
    /// Zero.
    const ZERO: Self;
    /// Negative infinity.
    const NEG_INF: Self;
    /// A value from its little-endian bytes (`SIZE` of them).
    fn from_le(b: &[u8]) -> Self;
    /// Appends the value's little-endian bytes.
    fn push_le(self, out: &mut Vec<u8>);
    /// `e^self`.
    fn exp(self) -> Self;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
}

macro_rules! acc {
    ($t:ty, $dt:expr) => {
        impl Acc for $t {
            const DTYPE: DType = $dt;
            const SIZE: usize = std::mem::size_of::<$t>();
            const ZERO: Self = 0.0;
            const NEG_INF: Self = <$t>::NEG_INFINITY;
            fn from_le(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("SIZE bytes"))
            }
            fn push_le(self, out: &mut Vec<u8>) {
                out.extend(self.to_le_bytes());
            }
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}

acc!(f32, DType::F32);
acc!(f64, DType::F64);

/// Runs a kernel whose one output is of `A`'s dtype and returns that
/// output. Through [`crate::cpu::run`], the backend's entry, so these
/// elementwise pieces take its fastest generic path.
pub(crate) fn eval<A: Acc>(
    k: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
) -> Result<Vec<A>, InterpError> {
    let mut out = output(k, 0)?;
    crate::cpu::run(k, inputs, scalars, &mut [&mut out])?;
    let mut vals = vec_with_capacity(k.outputs[0].len)?;
    vals.extend(out.chunks_exact(A::SIZE).map(A::from_le));
    recycle(out);
    Ok(vals)
}

/// The values' little-endian bytes (an input of a kernel the interpreter
/// runs).
pub(crate) fn to_bytes<A: Acc>(vals: &[A]) -> Result<Vec<u8>, InterpError> {
    let mut bytes = vec_with_capacity(vals.len() * A::SIZE)?;
    for v in vals {
        v.push_le(&mut bytes);
    }
    Ok(bytes)
}
