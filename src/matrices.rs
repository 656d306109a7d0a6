//! Matrix helpers built from views and existing ops: `diagonal`, `diag`,
//! `trace`, `outer`. None copies data: a diagonal is a strided view (a
//! square block, flattened, read with a step of one past its width), and
//! `diag` of a vector is a padded, reshaped view whose padding reads 0.

use crate::movement::SliceArg;
use crate::shape::axis;
use crate::Tensor;

impl Tensor {
    /// The diagonal `offset` of the matrices over axes `dim1` and `dim2`,
    /// as a view with those axes replaced by a last axis (PyTorch
    /// `Tensor.diagonal`). `offset > 0` is above the main diagonal.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec((0..6).collect::<Vec<i32>>(), [2, 3], &Device::Cpu);
    /// assert_eq!(x.diagonal(0, 0, 1).to_vec::<i32>().unwrap(), vec![0, 4]);
    /// assert_eq!(x.diagonal(1, 0, 1).to_vec::<i32>().unwrap(), vec![1, 5]);
    /// assert_eq!(x.diagonal(-1, 0, 1).to_vec::<i32>().unwrap(), vec![3]);
    /// ```
    ///
    /// # Panics
    /// If the axes are out of range or equal.
    #[track_caller]
    pub fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Tensor {
        let (a, b) = (
            axis("diagonal", dim1, self.shape()),
            axis("diagonal", dim2, self.shape()),
        );
        assert!(
            a != b,
            "diagonal: dim1 and dim2 are both axis {a} of shape {:?}",
            self.shape()
        );
        let mut perm: Vec<usize> = (0..self.ndim()).filter(|d| *d != a && *d != b).collect();
        perm.extend([a, b]);
        let x = self.permute(perm);
        let (n, m) = (self.shape()[a], self.shape()[b]);
        let skip = offset.unsigned_abs();
        // The block whose main diagonal is the wanted one.
        let (len, row0, col0) = if offset >= 0 {
            (n.min(m.saturating_sub(skip)), 0, skip)
        } else {
            (n.saturating_sub(skip).min(m), skip, 0)
        };
        let block = x.narrow(-2, row0.min(n), len).narrow(-1, col0.min(m), len);
        let flat = block.flatten_dims(-2, -1);
        if len == 0 {
            return flat;
        }
        let mut args = vec![SliceArg::from(..); flat.ndim() - 1];
        args.push(SliceArg::from(..).step(len as isize + 1));
        flat.slice(args)
    }

    /// PyTorch `torch.diag`: of a vector, the square matrix with it on
    /// diagonal `offset` and 0 elsewhere; of a matrix, its diagonal
    /// `offset` (a view).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let v = Tensor::from_vec(vec![1.0f32, 2.0], [2], &Device::Cpu);
    /// assert_eq!(v.diag(0).to_vec::<f32>().unwrap(), vec![1.0, 0.0, 0.0, 2.0]);
    /// assert_eq!(v.diag(1).shape(), &[3, 3]);
    /// ```
    ///
    /// # Panics
    /// If the tensor is not 1-D or 2-D.
    #[track_caller]
    pub fn diag(&self, offset: isize) -> Tensor {
        match self.ndim() {
            2 => self.diagonal(offset, 0, 1),
            1 => {
                let n = self.shape()[0];
                // Rows of the value then n zeros, read n at a time: element
                // (i, j) of the result is row-major position i(n+1) + (j-i),
                // the value when j == i and padding otherwise.
                let square = self
                    .unsqueeze(1)
                    .pad(&[(0, 0), (0, n)], 0.0)
                    .flatten()
                    .narrow(0, 0, n * n)
                    .reshape([n, n]);
                let k = offset.unsigned_abs();
                if offset >= 0 {
                    square.pad(&[(0, k), (k, 0)], 0.0)
                } else {
                    square.pad(&[(k, 0), (0, k)], 0.0)
                }
            }
            _ => panic!(
                "diag: expected a 1-D or 2-D tensor, got shape {:?}",
                self.shape()
            ),
        }
    }

    /// The sum of the main diagonal of a matrix (PyTorch `torch.trace`),
    /// as a 0-d tensor of the dtype `sum` gives.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &Device::Cpu);
    /// assert_eq!(x.trace().to_scalar::<f32>().unwrap(), 5.0);
    /// ```
    ///
    /// # Panics
    /// If the tensor is not 2-D.
    #[track_caller]
    pub fn trace(&self) -> Tensor {
        assert!(
            self.ndim() == 2,
            "trace: expected a 2-D tensor, got shape {:?}",
            self.shape()
        );
        self.diagonal(0, 0, 1).sum(0)
    }

    /// The outer product of two vectors: `[n] x [m] -> [n, m]` (PyTorch
    /// `torch.outer`, alias `ger`), a broadcast multiply that fuses.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let a = Tensor::from_vec(vec![1i32, 2], [2], &Device::Cpu);
    /// let b = Tensor::from_vec(vec![3i32, 4, 5], [3], &Device::Cpu);
    /// assert_eq!(a.outer(&b).to_vec::<i32>().unwrap(), vec![3, 4, 5, 6, 8, 10]);
    /// ```
    ///
    /// # Panics
    /// If either operand is not 1-D, or they are on different devices.
    #[doc(alias = "ger")]
    #[track_caller]
    pub fn outer(&self, other: &Tensor) -> Tensor {
        assert!(
            self.ndim() == 1 && other.ndim() == 1,
            "outer: expected two 1-D tensors, got shapes {:?} and {:?}",
            self.shape(),
            other.shape()
        );
        self.unsqueeze(1) * other.unsqueeze(0)
    }
}
