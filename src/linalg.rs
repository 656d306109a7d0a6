//! Matrix products.

use crate::shape::broadcast_shapes;
use crate::{DType, Tensor};
use smelt_fusion::Op;

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
    pub fn matmul(&self, other: &Tensor) -> Tensor {
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
        let shape_a: Vec<usize> = batch.iter().copied().chain([m, k]).collect();
        let shape_b: Vec<usize> = batch.iter().copied().chain([k, n]).collect();
        let a = a.cast(dt).broadcast_to(&shape_a);
        let b = b.cast(dt).broadcast_to(&shape_b);
        let out: Vec<usize> = batch.iter().copied().chain([m, n]).collect();
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
