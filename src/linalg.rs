//! Matrix products.

use crate::device::same_device;
use crate::shape::broadcast_shapes;
use crate::{DType, Tensor};
use smelt_codegen::Shape;
use smelt_fusion::Op;

/// How an `f32` matrix product may compute (PyTorch's
/// `torch.backends.cuda.matmul.allow_tf32`, chosen per product).
/// Half-precision and integer products are unaffected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Full `f32` products, accumulated in `f32` (the default).
    #[default]
    Highest,
    /// Operands rounded to TF32 (10 mantissa bits, [`Tensor::round_tf32`]),
    /// products accumulated in `f32`: runs on the GPU's tensor cores. The
    /// rounding is recorded in the graph, so the CPU computes the same
    /// products (relative error about 1e-3 against `f32`).
    Tf32,
}

impl Tensor {
    /// Matrix product with NumPy's rules: 1-D operands are treated as a row
    /// (left) or column (right) vector and that axis is removed; leading
    /// batch axes broadcast. Recorded as one matmul node.
    ///
    /// # Panics
    /// On a 0-D operand or mismatched inner dimensions.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &Device::Cpu);
    /// let v = Tensor::from_vec(vec![1.0f32, 1.0], [2], &Device::Cpu);
    /// assert_eq!(a.matmul(&v).to_vec::<f32>().unwrap(), vec![3.0, 7.0]);
    /// ```
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        self.matmul_with(other, Precision::Highest)
    }

    /// [`Tensor::matmul`] with an explicit [`Precision`] for `f32`
    /// operands.
    ///
    /// # Panics
    /// As [`Tensor::matmul`].
    ///
    /// ```
    /// use smelt::{Device, Precision, Tensor};
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &Device::Cpu);
    /// let c = a.matmul_with(&a, Precision::Tf32);
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![7.0, 10.0, 15.0, 22.0]);
    /// ```
    #[track_caller]
    pub fn matmul_with(&self, other: &Tensor, precision: Precision) -> Tensor {
        same_device("matmul", &[self.device(), other.device()]);
        assert!(
            self.ndim() >= 1 && other.ndim() >= 1,
            "matmul: operands must have at least 1 dimension, got shapes {:?} and {:?}",
            self.shape(),
            other.shape()
        );
        let a = if self.ndim() == 1 {
            self.unsqueeze(0)
        } else {
            self.clone()
        };
        let b = if other.ndim() == 1 {
            other.unsqueeze(1)
        } else {
            other.clone()
        };
        let (ra, rb) = (a.ndim(), b.ndim());
        let (m, k) = (a.shape()[ra - 2], a.shape()[ra - 1]);
        let (k2, n) = (b.shape()[rb - 2], b.shape()[rb - 1]);
        assert!(
            k == k2,
            "matmul: inner dimensions differ: shapes {:?} and {:?} ({k} vs {k2})",
            self.shape(),
            other.shape()
        );
        let (ba, bb) = (&a.shape()[..ra - 2], &b.shape()[..rb - 2]);
        // Checked here so the message shows the operands, not just the batch axes.
        assert!(
            ba.iter()
                .rev()
                .zip(bb.iter().rev())
                .all(|(x, y)| x == y || *x == 1 || *y == 1),
            "matmul: batch dimensions of shapes {:?} and {:?} do not broadcast",
            self.shape(),
            other.shape()
        );
        let batch = broadcast_shapes("matmul", ba, bb);
        let dt = match a.dtype().promote(b.dtype()) {
            DType::Bool => DType::I32,
            d => d,
        };
        let shape_a: Shape = batch.iter().copied().chain([m, k]).collect();
        let shape_b: Shape = batch.iter().copied().chain([k, n]).collect();
        let (mut a, mut b) = (a.cast(dt), b.cast(dt));
        if precision == Precision::Tf32 && dt == DType::F32 {
            (a, b) = (a.round_tf32(), b.round_tf32());
        }
        let a = a.broadcast_to(&shape_a);
        let b = b.broadcast_to(&shape_b);
        let out: Shape = batch.iter().copied().chain([m, n]).collect();
        let mut r = a.derive(Op::Matmul(a.node.clone(), b.node.clone()), out.clone(), dt);
        // The row axis first: for vector @ vector it is still at -2.
        if self.ndim() == 1 {
            r = r.squeeze(-2);
        }
        if other.ndim() == 1 {
            r = r.squeeze(-1);
        }
        r
    }
}
