//! Composite ops built from primitives only: no special kernels. The fusion
//! pass turns each into few (usually one) kernels.
//!
//! As in PyTorch, every intermediate is `F32` whatever the input's float
//! type, and only the result is cast to it: f16 rows whose sums pass 65504
//! stay finite. The casts fuse into the loads and stores, so a half tensor
//! is still read and written as halves.

use crate::device::same_device;
use crate::shape::IntoAxes;
use crate::{DType, Tensor};
use smelt_codegen::ReduceOp;

impl Tensor {
    /// `exp(x - max) / sum(exp(x - max))` along `axis`. A row of all `-inf`
    /// gives NaN, as in PyTorch.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [1, 3], &Device::Cpu);
    /// let s: f32 = x.softmax(-1).sum(..).to_scalar().unwrap();
    /// assert!((s - 1.0).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn softmax(&self, ax: isize) -> Tensor {
        // Checked here so an error names softmax, not the max inside it.
        let a = crate::shape::axes("softmax", ax, self.shape());
        let x = self.cast(self.dtype().compute_float());
        let e = (&x - x.reduce_axes(ReduceOp::Max, &a, true)).exp();
        (&e / e.sum_keepdim(a)).cast(self.float_dtype())
    }

    /// `log(softmax(x))` along `axis`, computed stably.
    #[track_caller]
    pub fn log_softmax(&self, ax: isize) -> Tensor {
        let a = crate::shape::axes("log_softmax", ax, self.shape());
        let x = self.cast(self.dtype().compute_float());
        let s = &x - x.reduce_axes(ReduceOp::Max, &a, true);
        (&s - s.exp().sum_keepdim(a).log()).cast(self.float_dtype())
    }

    /// `log(sum(exp(x)))` over `axes`, computed stably (an infinite maximum
    /// is not subtracted, so all `-inf` gives `-inf`).
    #[track_caller]
    pub fn logsumexp(&self, ax: impl IntoAxes + Clone, keepdim: bool) -> Tensor {
        let a = crate::shape::axes("logsumexp", ax, self.shape());
        self.logsumexp_f32(&a, keepdim).cast(self.float_dtype())
    }

    /// [`Tensor::logsumexp`] over normalised axes, in `F32` (`F64` for `F64`).
    fn logsumexp_f32(&self, a: &[usize], keepdim: bool) -> Tensor {
        let x = self.cast(self.dtype().compute_float());
        let m = x.reduce_axes(ReduceOp::Max, a, true);
        let finite = m.abs().lt(f64::INFINITY);
        let m = finite.where_(&m, 0.0);
        let s = (&x - &m).exp().sum_keepdim(a.to_vec()).log() + &m;
        if keepdim {
            s
        } else {
            s.squeeze(a.to_vec())
        }
    }

    /// Variance over `axes` with `correction` (1 for the unbiased estimate,
    /// PyTorch's default; 0 for NumPy's).
    pub fn var(&self, ax: impl IntoAxes + Clone, correction: usize, keepdim: bool) -> Tensor {
        let a = crate::shape::axes("var", ax, self.shape());
        self.var_f32(&a, correction, keepdim)
            .cast(self.float_dtype())
    }

    /// Standard deviation: `sqrt(var)`.
    pub fn std(&self, ax: impl IntoAxes + Clone, correction: usize, keepdim: bool) -> Tensor {
        let a = crate::shape::axes("std", ax, self.shape());
        self.var_f32(&a, correction, keepdim)
            .sqrt()
            .cast(self.float_dtype())
    }

    /// [`Tensor::var`] over normalised axes, in `F32`.
    fn var_f32(&self, a: &[usize], correction: usize, keepdim: bool) -> Tensor {
        let n: usize = a.iter().map(|d| self.shape()[*d]).product();
        let x = self.cast(self.dtype().compute_float());
        let xc = &x - x.mean_keepdim(a.to_vec());
        let denom = n.saturating_sub(correction) as f64;
        xc.square().reduce_axes(ReduceOp::Sum, a, keepdim) / denom
    }

    /// The float dtype of a composite's result: the input's, integers and
    /// bools as `F32`.
    fn float_dtype(&self) -> DType {
        self.dtype().to_float()
    }

    /// Layer normalisation over `axes`: `(x - mean) / sqrt(var + eps)`
    /// (biased variance), then `* weight + bias` when given (they broadcast
    /// against `x`).
    #[track_caller]
    pub fn layer_norm(
        &self,
        ax: impl IntoAxes + Clone,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Tensor {
        let a = crate::shape::axes("layer_norm", ax, self.shape());
        let x = self.cast(self.dtype().compute_float());
        let xc = &x - x.mean_keepdim(a.clone());
        let y = &xc * (xc.square().mean_keepdim(a) + eps).rsqrt();
        affine("layer_norm", self.float_dtype(), y, weight, bias)
    }

    /// RMS normalisation over `axes`: `x / sqrt(mean(x^2) + eps)`, then
    /// `* weight` when given.
    #[track_caller]
    pub fn rms_norm(&self, ax: impl IntoAxes + Clone, weight: Option<&Tensor>, eps: f64) -> Tensor {
        let a = crate::shape::axes("rms_norm", ax, self.shape());
        let x = self.cast(self.dtype().compute_float());
        let y = &x * (x.square().mean_keepdim(a) + eps).rsqrt();
        affine("rms_norm", self.float_dtype(), y, weight, None)
    }

    /// Cross-entropy of logits `[N, C]` (or `[C]`) against class indices
    /// `[N]` (or `[]`) along the class axis `1`, one loss per row:
    /// `logsumexp(x) - x[target]`. Take `.mean(..)` for PyTorch's default
    /// reduction. A target outside `0..C` contributes `x[target] = 0`.
    ///
    /// # Panics
    /// If the shapes do not match.
    #[track_caller]
    pub fn cross_entropy(&self, target: &Tensor) -> Tensor {
        same_device("cross_entropy", &[self.device(), target.device()]);
        let (x, t) = if self.ndim() == 1 {
            (self.unsqueeze(0), target.reshape([1usize]))
        } else {
            (self.clone(), target.clone())
        };
        assert!(
            x.ndim() == 2 && t.ndim() == 1 && t.shape()[0] == x.shape()[0],
            "cross_entropy: logits of shape {:?} and targets of shape {:?} (expected [N, C] and [N])",
            self.shape(),
            target.shape()
        );
        let c = x.shape()[1];
        let out = self.float_dtype();
        let x = x.cast(x.dtype().compute_float());
        // I32 class numbers (4 bytes each) compared as I64, so an I64 target
        // beyond 2^31 matches no class instead of wrapping onto one.
        let classes = Tensor::arange(0.0, c as f64, 1.0, DType::I32, &x.device()).reshape([1, c]);
        let onehot = classes.eq(t.cast(DType::I64).unsqueeze(1));
        let picked = onehot.where_(&x, 0.0).sum(1);
        let loss = (x.logsumexp_f32(&[1], false) - picked).cast(out);
        if self.ndim() == 1 {
            loss.reshape([0usize; 0])
        } else {
            loss
        }
    }
}

/// `y * weight + bias` in `y`'s dtype (`F32`, or `F64`), cast to `x_dtype` promoted with the
/// dtypes of `weight` and `bias` (what the op would give in that dtype).
/// The optional parameters of `op` are checked for device here so the
/// message names `op`, not `mul`.
#[track_caller]
fn affine(
    op: &str,
    x_dtype: DType,
    y: Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
) -> Tensor {
    let devices: Vec<_> = [Some(&y), weight, bias]
        .into_iter()
        .flatten()
        .map(Tensor::device)
        .collect();
    same_device(op, &devices);
    let mut out = x_dtype;
    let y = match weight {
        Some(w) => {
            out = out.promote(w.dtype());
            {
                let c = w.cast(y.dtype());
                y * c
            }
        }
        None => y,
    };
    let y = match bias {
        Some(b) => {
            out = out.promote(b.dtype());
            {
                let c = b.cast(y.dtype());
                y + c
            }
        }
        None => y,
    };
    y.cast(out)
}
