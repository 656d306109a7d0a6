//! Elementwise math composed of primitives: `clamp`, `isinf` / `isfinite`,
//! `logaddexp`, `softplus` and powers of a scalar base. Each fuses into
//! its neighbours like any chain of elementwise ops; float composites
//! compute in `F32` (`F64` for `F64`) and cast the result back, as PyTorch
//! does for halves.

use crate::device::same_device;
use crate::elementwise::Operand;
use crate::shape::broadcast_shapes;
use crate::{DType, Tensor};
use smelt_codegen::Shape;

impl Tensor {
    /// Each value limited to `[min, max]`: `minimum(maximum(x, min), max)`,
    /// so NaN (in `x` or in a bound) propagates and `min > max` gives `max`,
    /// as in PyTorch. Bounds are tensors (broadcast) or scalars, and
    /// promote like any binary op (a float bound makes an integer tensor
    /// `F32`).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![-2.0f32, 0.5, 3.0, f32::NAN], [4], &Device::Cpu);
    /// let y = x.clamp(-1.0, 1.0).to_vec::<f32>().unwrap();
    /// assert_eq!(&y[..3], &[-1.0, 0.5, 1.0]);
    /// assert!(y[3].is_nan());
    /// ```
    ///
    /// # Panics
    /// If a bound does not broadcast against `self` or is on another device.
    #[doc(alias = "clip")]
    #[track_caller]
    pub fn clamp(&self, min: impl Operand, max: impl Operand) -> Tensor {
        let (lo, hi) = (min.into_operand(self), max.into_operand(self));
        check_operands("clamp", self, &[&lo, &hi]);
        self.maximum(&lo).minimum(&hi)
    }

    /// Each value raised to at least `min` (`maximum(x, min)`; NaN
    /// propagates).
    ///
    /// # Panics
    /// If `min` does not broadcast against `self` or is on another device.
    #[doc(alias = "clip")]
    #[track_caller]
    pub fn clamp_min(&self, min: impl Operand) -> Tensor {
        let lo = min.into_operand(self);
        check_operands("clamp_min", self, &[&lo]);
        self.maximum(&lo)
    }

    /// Each value lowered to at most `max` (`minimum(x, max)`; NaN
    /// propagates).
    ///
    /// # Panics
    /// If `max` does not broadcast against `self` or is on another device.
    #[doc(alias = "clip")]
    #[track_caller]
    pub fn clamp_max(&self, max: impl Operand) -> Tensor {
        let hi = max.into_operand(self);
        check_operands("clamp_max", self, &[&hi]);
        self.minimum(&hi)
    }

    /// True where the value is `+inf` or `-inf` (`Bool`; never for
    /// integers and bools).
    pub fn isinf(&self) -> Tensor {
        if self.dtype().is_float() {
            self.abs().eq(f64::INFINITY)
        } else {
            Tensor::full(self.shape(), 0.0, DType::Bool, &self.device())
        }
    }

    /// True where the value is neither infinite nor NaN (`Bool`; always
    /// for integers and bools).
    pub fn isfinite(&self) -> Tensor {
        if self.dtype().is_float() {
            self.abs().lt(f64::INFINITY)
        } else {
            Tensor::full(self.shape(), 1.0, DType::Bool, &self.device())
        }
    }

    /// `ln(e^self + e^other)` without overflow: `max + log1p(e^-|a - b|)`,
    /// with `a == b` (infinities included) giving `max + ln 2`, so
    /// `logaddexp(-inf, -inf)` is `-inf`. Operands promote like `+`;
    /// integers compute in `F32`, `F64` in `F64`.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let a = Tensor::from_vec(vec![1000.0f32, -1000.0], [2], &Device::Cpu);
    /// let y = a.logaddexp(&a).to_vec::<f32>().unwrap();
    /// assert!((y[0] - (1000.0 + 2f32.ln())).abs() < 1e-3 && y[1].is_finite());
    /// ```
    ///
    /// # Panics
    /// If the shapes do not broadcast or the tensors are on different
    /// devices.
    #[track_caller]
    pub fn logaddexp(&self, other: impl Operand) -> Tensor {
        let other = other.into_operand(self);
        check_operands("logaddexp", self, &[&other]);
        let out = self.dtype().promote(other.dtype()).to_float();
        let cd = out.compute_float();
        let (a, b) = (self.cast(cd), other.cast(cd));
        let gap = (&a - &b).abs().neg();
        let gap = a.eq(&b).where_(0.0, &gap);
        (a.maximum(&b) + gap.exp().log1p()).cast(out)
    }

    /// `ln(1 + e^x)`, PyTorch's defaults (`beta = 1`, `threshold = 20`):
    /// `x` itself above the threshold, never overflowing.
    pub fn softplus(&self) -> Tensor {
        self.softplus_with(1.0, 20.0)
    }

    /// PyTorch's `softplus(x, beta, threshold)`: `ln(1 + e^(beta x)) / beta`,
    /// and `x` where `beta x > threshold`. Computed in `F32` (integers
    /// too; `F64` in `F64`),
    /// cast back to a half input's dtype.
    pub fn softplus_with(&self, beta: f64, threshold: f64) -> Tensor {
        let x = self.cast(self.dtype().compute_float());
        let bx = if beta == 1.0 { x.clone() } else { &x * beta };
        let soft = bx.exp().log1p();
        let soft = if beta == 1.0 { soft } else { soft / beta };
        bx.gt(threshold)
            .where_(&x, &soft)
            .cast(self.dtype().to_float())
    }

    /// `base ^ self` elementwise, for a scalar (or tensor) base: PyTorch's
    /// `torch.pow(2.0, t)`. Promotes like `pow` with the base on the left:
    /// a float base makes an integer exponent tensor `F32`, an integer base
    /// keeps it integral (exact, wrapping).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let t = Tensor::from_vec(vec![0i32, 1, 10], [3], &Device::Cpu);
    /// assert_eq!(t.rpow(2.0).to_vec::<f32>().unwrap(), vec![1.0, 2.0, 1024.0]);
    /// assert_eq!(t.rpow(3).to_vec::<i32>().unwrap(), vec![1, 3, 59049]);
    /// ```
    ///
    /// # Panics
    /// If a tensor base does not broadcast against `self` or is on another
    /// device.
    #[doc(alias = "pow")]
    #[doc(alias = "power")]
    #[doc(alias = "float_power")]
    #[track_caller]
    pub fn rpow(&self, base: impl Operand) -> Tensor {
        let base = base.into_operand(self);
        check_operands("rpow", self, &[&base]);
        base.pow(self)
    }
}

/// Panics, naming `op`, unless every operand broadcasts against `x` and
/// shares its device.
#[track_caller]
fn check_operands(op: &str, x: &Tensor, others: &[&Tensor]) {
    let mut devices = vec![x.device()];
    devices.extend(others.iter().map(|t| t.device()));
    same_device(op, &devices);
    let mut shape: Shape = x.shape().into();
    for t in others {
        shape = broadcast_shapes(op, &shape, t.shape());
    }
}
