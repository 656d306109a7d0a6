//! Composite ops built from primitives only: no special kernels. The fusion
//! pass turns each into few (usually one) kernels.

use crate::device::same_device;
use crate::shape::IntoAxes;
use crate::{DType, Tensor};

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
        crate::shape::axis("softmax", ax, self.shape());
        let x = self.cast(self.dtype().to_float());
        let e = (&x - x.max_keepdim(ax)).exp();
        &e / e.sum_keepdim(ax)
    }

    /// `log(softmax(x))` along `axis`, computed stably.
    #[track_caller]
    pub fn log_softmax(&self, ax: isize) -> Tensor {
        crate::shape::axis("log_softmax", ax, self.shape());
        let x = self.cast(self.dtype().to_float());
        let s = &x - x.max_keepdim(ax);
        &s - s.exp().sum_keepdim(ax).log()
    }

    /// `log(sum(exp(x)))` over `axes`, computed stably (an infinite maximum
    /// is not subtracted, so all `-inf` gives `-inf`).
    #[track_caller]
    pub fn logsumexp(&self, ax: impl IntoAxes + Clone, keepdim: bool) -> Tensor {
        let a = crate::shape::axes("logsumexp", ax, self.shape());
        let x = self.cast(self.dtype().to_float());
        let m = x.max_keepdim(a.clone());
        let finite = m.abs().lt(f64::INFINITY);
        let m = finite.where_(&m, 0.0);
        let s = (&x - &m).exp().sum_keepdim(a.clone()).log() + &m;
        if keepdim {
            s
        } else {
            s.squeeze(a)
        }
    }

    /// Variance over `axes` with `correction` (1 for the unbiased estimate,
    /// PyTorch's default; 0 for NumPy's).
    pub fn var(&self, ax: impl IntoAxes + Clone, correction: usize, keepdim: bool) -> Tensor {
        let a = crate::shape::axes("var", ax, self.shape());
        let n: usize = a.iter().map(|d| self.shape()[*d]).product();
        let x = self.cast(self.dtype().to_float());
        let xc = &x - x.mean_keepdim(a.clone());
        let denom = n.saturating_sub(correction) as f64;
        xc.square().reduce(smelt_codegen::ReduceOp::Sum, a, keepdim) / denom
    }

    /// Standard deviation: `sqrt(var)`.
    pub fn std(&self, ax: impl IntoAxes + Clone, correction: usize, keepdim: bool) -> Tensor {
        self.var(ax, correction, keepdim).sqrt()
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
        let x = self.cast(self.dtype().to_float());
        let xc = &x - x.mean_keepdim(a.clone());
        let y = &xc * (xc.square().mean_keepdim(a) + eps).rsqrt();
        affine("layer_norm", y, weight, bias)
    }

    /// RMS normalisation over `axes`: `x / sqrt(mean(x^2) + eps)`, then
    /// `* weight` when given.
    #[track_caller]
    pub fn rms_norm(&self, ax: impl IntoAxes + Clone, weight: Option<&Tensor>, eps: f64) -> Tensor {
        let a = crate::shape::axes("rms_norm", ax, self.shape());
        let x = self.cast(self.dtype().to_float());
        let y = &x * (x.square().mean_keepdim(a) + eps).rsqrt();
        affine("rms_norm", y, weight, None)
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
        let x = x.cast(x.dtype().to_float());
        let classes = Tensor::arange(0.0, c as f64, 1.0, DType::I32, &x.device()).reshape([1, c]);
        let onehot = classes.eq(t.cast(DType::I32).unsqueeze(1));
        let picked = onehot.where_(&x, 0.0).sum(1);
        let loss = x.logsumexp(1, false) - picked;
        if self.ndim() == 1 {
            loss.reshape([0usize; 0])
        } else {
            loss
        }
    }
}

/// `y * weight + bias`, the optional parameters of `op` (checked for device
/// here so the message names `op`, not `mul`).
#[track_caller]
fn affine(op: &str, y: Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>) -> Tensor {
    let devices: Vec<_> = [Some(&y), weight, bias]
        .into_iter()
        .flatten()
        .map(Tensor::device)
        .collect();
    same_device(op, &devices);
    let y = match weight {
        Some(w) => y * w,
        None => y,
    };
    match bias {
        Some(b) => y + b,
        None => y,
    }
}
