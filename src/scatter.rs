//! Adding by index tensors: `scatter_add`, `index_add`, `index_add_scaled`.
//!
//! Each records one graph node (`Op::ScatterAdd`) over a copy of the
//! tensor added into. Realized, the copy is one kernel (fusing the
//! tensor's producers) and the adds another, over the domain of the values
//! added (fusing their producers and the index's): each value is added at
//! the position its index names, with an atomic add on the GPU. An index
//! outside its axis (negative ones included, as in PyTorch) is an `Err`
//! when the result is realized, on every device, and never a write outside
//! a buffer.
//!
//! Determinism: the CPU adds in the order of the values (row-major over
//! the index), so its results are reproducible. On the GPU the atomic adds
//! to one element land in any order, so float results whose index repeats
//! a position can differ in their last bits from run to run (as PyTorch's
//! CUDA `scatter_add_` does); integer results are exact and identical on
//! every device.
//!
//! Dtypes: floats, `I32` and `I64`; each add rounds to the tensor's dtype
//! (half types accumulate in the half type, as PyTorch does; on sm_80 a
//! `BF16` add computes in `f32` and rounds once). Bool, `U8`, `I8`,
//! `I16` and FP8 tensors panic: there is no atomic add on bytes or 16-bit
//! integers (cast to `I32`, or FP8 to `F32`), and PyTorch's bool "sum" is a logical or that a user
//! can write as a scatter into `I32` and a comparison.

use crate::device::same_device;
use crate::indexing::check_index;
use crate::shape::axis;
use crate::{DType, Tensor};
use smelt_fusion::Op;

impl Tensor {
    /// `self` with the values of `src` added along `axis` at the positions
    /// `index` holds (PyTorch `torch.scatter_add`, out of place): for a 3-d
    /// tensor and `axis == 1`, `out[i][index[i][j][k]][k] += src[i][j][k]`
    /// for every position of `index`. `index` has `self`'s rank and may be
    /// shorter than `src` on every axis and than `self` on every axis but
    /// `axis` (only its extent of `src` is read); repeated positions
    /// accumulate. The result has `self`'s shape and dtype.
    ///
    /// Lazy and fused: a copy of `self` and one kernel of adds. An index
    /// outside `0..self.shape()[axis]` (negative ones included) makes the
    /// realize return [`crate::Error::Launch`]. On the GPU repeated
    /// positions of a float tensor are added in no fixed order, so results
    /// may differ in rounding between runs (see the module docs).
    ///
    /// ```
    /// use smelt::{DType, Device, Tensor};
    /// let dev = Device::Cpu;
    /// let x = Tensor::zeros([2, 3], DType::F32, &dev);
    /// let i = Tensor::from_vec(vec![0i32, 2, 2, 1], [2, 2], &dev);
    /// let s = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev);
    /// let y = x.scatter_add(1, &i, &s);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, 0.0, 2.0, 0.0, 4.0, 3.0]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range, the ranks differ, `index` is longer than
    /// `src` on an axis or than `self` on an axis other than `axis`,
    /// `index` is not of an index dtype, `src` has another dtype than
    /// `self`, the dtype is `Bool`, or the tensors are on different
    /// devices.
    #[track_caller]
    pub fn scatter_add(&self, axis_: isize, index: &Tensor, src: &Tensor) -> Tensor {
        let op = "scatter_add";
        same_device(op, &[self.device(), index.device(), src.device()]);
        check_index(op, index);
        check_values(op, self, src);
        if self.ndim() == 0 {
            // A 0-d tensor is scattered into as a 1-element vector.
            assert!(
                index.ndim() == 0 && src.ndim() == 0,
                "scatter_add: index of shape {:?} and src of shape {:?} for a 0-d tensor",
                index.shape(),
                src.shape()
            );
            axis(op, axis_, &[1]);
            return self
                .reshape([1])
                .scatter_add(0, &index.reshape([1]), &src.reshape([1]))
                .reshape([0usize; 0]);
        }
        let a = axis(op, axis_, self.shape());
        assert!(
            index.ndim() == self.ndim() && src.ndim() == self.ndim(),
            "scatter_add: index of shape {:?} and src of shape {:?} must have the rank of the tensor's shape {:?}",
            index.shape(),
            src.shape(),
            self.shape()
        );
        for d in 0..self.ndim() {
            let n = index.shape()[d];
            assert!(
                n <= src.shape()[d] && (d == a || n <= self.shape()[d]),
                "scatter_add: index of shape {:?} is longer along axis {d} than src of shape {:?} or the tensor's shape {:?} (adding along axis {a})",
                index.shape(),
                src.shape(),
                self.shape()
            );
        }
        // The values cut to the index's extent: then they have its shape.
        let mut values = src.clone();
        for d in 0..src.ndim() {
            if index.shape()[d] < src.shape()[d] {
                values = values.narrow(d as isize, 0, index.shape()[d]);
            }
        }
        let copy = self.contiguous();
        self.derive(
            Op::ScatterAdd(
                copy.node().clone(),
                index.node().clone(),
                values.node().clone(),
                a,
            ),
            self.shape().to_vec(),
            self.dtype(),
        )
    }

    /// `self` with the slices of `source` along `axis` added at the
    /// positions of the 1-d `index` (PyTorch `torch.index_add`, out of
    /// place): `out.select(axis, index[i]) += source.select(axis, i)`.
    /// `source` has `self`'s shape but along `axis`, where it has
    /// `index`'s length; repeated positions accumulate. A
    /// [`Tensor::scatter_add`] whose index is a broadcast view, so it fuses
    /// the same way; an index outside the axis (negative included) is an
    /// `Err` at realize, and float results on the GPU may differ in
    /// rounding between runs where positions repeat.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let x = Tensor::from_vec(vec![1i32, 1, 1, 1, 1, 1], [3, 2], &dev);
    /// let i = Tensor::from_vec(vec![2i32, 0, 2], [3], &dev);
    /// let s = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], [3, 2], &dev);
    /// let y = x.index_add(0, &i, &s);
    /// assert_eq!(y.to_vec::<i32>().unwrap(), vec![4, 5, 1, 1, 7, 9]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range, `index` is not 1-d (0-d is taken as one
    /// position) or not of an index dtype, `source`'s shape does not match,
    /// `source` has another dtype than `self`, the dtype is `Bool`, or the
    /// tensors are on different devices.
    #[doc(alias = "add.at")]
    #[track_caller]
    pub fn index_add(&self, axis_: isize, index: &Tensor, source: &Tensor) -> Tensor {
        let op = "index_add";
        same_device(op, &[self.device(), index.device(), source.device()]);
        check_index(op, index);
        check_values(op, self, source);
        assert!(
            index.ndim() <= 1,
            "index_add: the index must be 1-d, got shape {:?}",
            index.shape()
        );
        if self.ndim() == 0 {
            axis(op, axis_, &[1]);
            let n = index.numel();
            return self
                .reshape([1])
                .index_add(0, &index.reshape([n]), &source.reshape([n]))
                .reshape([0usize; 0]);
        }
        let a = axis(op, axis_, self.shape());
        let mut want = self.shape().to_vec();
        want[a] = index.numel();
        assert!(
            source.shape() == want.as_slice(),
            "index_add: source of shape {:?} must have shape {want:?}: the tensor's shape {:?} with axis {a} of the index's length {}",
            source.shape(),
            self.shape(),
            index.numel()
        );
        let mut along = vec![1; self.ndim()];
        along[a] = index.numel();
        let index = index.reshape(along).expand(want.as_slice());
        self.scatter_add(a as isize, &index, source)
    }

    /// [`Tensor::index_add`] of `source * alpha` (PyTorch's `index_add`
    /// with its `alpha` argument): the product is computed in the adds'
    /// kernel. `alpha` is rounded to the tensor's dtype (an integer tensor
    /// takes an integral `alpha`, as in PyTorch).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let x = Tensor::from_vec(vec![1.0f32, 1.0], [2], &dev);
    /// let i = Tensor::from_vec(vec![1i32, 1], [2], &dev);
    /// let s = Tensor::from_vec(vec![1.0f32, 2.0], [2], &dev);
    /// let y = x.index_add_scaled(0, &i, &s, -0.5);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, -0.5]);
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::index_add`].
    #[track_caller]
    pub fn index_add_scaled(
        &self,
        axis: isize,
        index: &Tensor,
        source: &Tensor,
        alpha: f64,
    ) -> Tensor {
        check_values("index_add", self, source);
        let alpha = Tensor::full([0usize; 0], alpha, source.dtype(), &source.device());
        self.index_add(axis, index, &(source * &alpha))
    }
}

/// Panics unless `values` can be added into `t`: the same dtype, one with
/// an atomic add (not `Bool` or an 8- or 16-bit integer).
#[track_caller]
fn check_values(op: &str, t: &Tensor, values: &Tensor) {
    assert!(
        values.dtype() == t.dtype(),
        "{op}: the values added must have the tensor's dtype {}, got {}",
        t.dtype(),
        values.dtype()
    );
    assert!(
        t.dtype() != DType::Bool,
        "{op}: bool tensors have no atomic add; cast to int32 (and compare with 0 for a logical or)"
    );
    assert!(
        !matches!(t.dtype(), DType::U8 | DType::I8 | DType::I16),
        "{op}: {} tensors have no atomic add; cast to int32",
        t.dtype()
    );
    // Byte-wide floats: no atomic add either, and repeated adds rounded to
    // 3 or 2 mantissa bits each would lose most of the sum.
    assert!(
        !t.dtype().is_fp8(),
        "{op}: {} tensors have no atomic add; cast to float32 (or a half type)",
        t.dtype()
    );
}
