//! Vector norms over axes (PyTorch `torch.linalg.vector_norm`,
//! `Tensor.norm`), composed of `abs`, powers and reductions, so a norm is
//! one reduction kernel with its producers fused in. Computed in `F32` and
//! returned in the input's float type (integers give `F32`).

use crate::shape::{axes, IntoAxes};
use crate::Tensor;
use smelt_codegen::ReduceOp;

impl Tensor {
    /// The `p`-norm over `axes` (`..` for all): `(sum |x|^p)^(1/p)`; `p =
    /// f64::INFINITY` is the largest `|x|`, `-INFINITY` the smallest, and
    /// `p = 0` counts the non-zeros. `p = 2` over a matrix's two axes is
    /// its Frobenius norm (see [`Tensor::norm_fro`]). NaN propagates; an
    /// empty axis gives 0 (`inf` too, as PyTorch's `vector_norm`; `-inf`
    /// gives `inf`, where PyTorch raises).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![3.0f32, -4.0], [2], &Device::Cpu);
    /// assert_eq!(x.norm(2.0, ..).to_scalar::<f32>().unwrap(), 5.0);
    /// assert_eq!(x.norm(1.0, ..).to_scalar::<f32>().unwrap(), 7.0);
    /// assert_eq!(x.norm(f64::INFINITY, 0).to_scalar::<f32>().unwrap(), 4.0);
    /// ```
    ///
    /// # Panics
    /// On an out-of-range or repeated axis, or `p` NaN.
    #[track_caller]
    pub fn norm(&self, p: f64, ax: impl IntoAxes) -> Tensor {
        self.norm_with(p, ax, false)
    }

    /// [`Tensor::norm`] keeping the reduced axes with size 1.
    #[track_caller]
    pub fn norm_keepdim(&self, p: f64, ax: impl IntoAxes) -> Tensor {
        self.norm_with(p, ax, true)
    }

    /// The Frobenius norm of the matrices over the last two axes:
    /// `sqrt(sum x^2)` (PyTorch `norm(p="fro")`).
    ///
    /// # Panics
    /// If the tensor has fewer than 2 axes.
    #[track_caller]
    pub fn norm_fro(&self) -> Tensor {
        assert!(
            self.ndim() >= 2,
            "norm_fro: expected at least 2 axes, got shape {:?}",
            self.shape()
        );
        self.norm(2.0, [-2isize, -1])
    }

    #[track_caller]
    fn norm_with(&self, p: f64, ax: impl IntoAxes, keepdim: bool) -> Tensor {
        assert!(!p.is_nan(), "norm: p is NaN");
        let a = axes("norm", ax, self.shape());
        let out = self.dtype().to_float();
        let x = self.cast(self.dtype().compute_float()).abs();
        let r = if p == f64::INFINITY {
            // Floored at 0 afterwards, so an empty axis (-inf) gives 0.
            x.reduce_axes(ReduceOp::Max, &a, keepdim).maximum(0.0)
        } else if p == f64::NEG_INFINITY {
            x.reduce_axes(ReduceOp::Min, &a, keepdim)
        } else if p == 0.0 {
            // NaN counts as non-zero, as in PyTorch.
            x.ne(0.0)
                .cast(x.dtype())
                .reduce_axes(ReduceOp::Sum, &a, keepdim)
        } else if p == 1.0 {
            x.reduce_axes(ReduceOp::Sum, &a, keepdim)
        } else if p == 2.0 {
            x.square().reduce_axes(ReduceOp::Sum, &a, keepdim).sqrt()
        } else {
            x.pow(p)
                .reduce_axes(ReduceOp::Sum, &a, keepdim)
                .pow(1.0 / p)
        };
        r.cast(out)
    }
}
