//! FP8 helpers: per-tensor quantization ([`Tensor::to_fp8`]) and the
//! scaled matrix product ([`Tensor::scaled_mm`], PyTorch's
//! `torch._scaled_mm`).
//!
//! The FP8 dtypes themselves ([`DType::F8E4M3`], [`DType::F8E5M2`]) are
//! ordinary storage dtypes: every op reads them into `f32`, computes there
//! and rounds its result back to FP8, as the half types do.

use crate::elementwise::Operand;
use crate::{DType, Tensor};

impl Tensor {
    /// `self` quantized to the FP8 type `dtype` with one per-tensor scale:
    /// returns `(q, scale)` with `scale = amax(|self|) / max` (`max` the
    /// format's largest finite value, 448 or 57344; `amax` raised to at
    /// least 1e-12 so an all-zero tensor gets a finite scale) and `q =
    /// clamp(self / scale, -max, max)` cast to `dtype`, so `q * scale`
    /// approximates `self` and `scale` is what [`Tensor::scaled_mm`] takes
    /// for `q`. `scale` is a 0-d `F32` tensor (`F64` for `F64` input) and
    /// both stay lazy. This is PyTorch's usual recipe, `scale =
    /// x.abs().max().clamp(min=1e-12) / finfo.max`, written with smelt's
    /// ops. A NaN or infinite element makes the scale NaN or infinite.
    ///
    /// # Panics
    /// When `dtype` is not an FP8 type or `self` is not a float.
    ///
    /// ```
    /// use smelt::{DType, Device, Tensor};
    /// let x = Tensor::from_vec(vec![0.5f32, -2.0, 1.0, 0.0], [4], &Device::Cpu);
    /// let (q, scale) = x.to_fp8(DType::F8E4M3);
    /// assert_eq!(scale.to_scalar::<f32>().unwrap(), 2.0 / 448.0);
    /// assert_eq!(q.to_vec::<f32>().unwrap(), vec![112.0, -448.0, 224.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn to_fp8(&self, dtype: DType) -> (Tensor, Tensor) {
        assert!(
            dtype.is_fp8(),
            "to_fp8: {dtype} is not an FP8 dtype (float8_e4m3fn or float8_e5m2)"
        );
        assert!(
            self.dtype().is_float(),
            "to_fp8: quantizes float tensors, got {} of shape {:?}",
            self.dtype(),
            self.shape()
        );
        let max = smelt_codegen::fp8::max_finite(dtype);
        let x = self.cast(self.dtype().compute_float());
        let scale = x.abs().max(..).clamp_min(1e-12) / max;
        let q = (&x / &scale).clamp(-max, max).cast(dtype);
        (q, scale)
    }

    /// Matrix product of scaled operands, PyTorch's `torch._scaled_mm`:
    /// `((self * scale_a) @ (b * scale_b))` computed as `(self @ b) *
    /// (scale_a * scale_b)` with the products accumulated in `f32` (`f64`
    /// when an operand is `F64`), then cast to `out_dtype`. The scales are
    /// per-tensor: a tensor of one element (any shape: PyTorch's 0-d or
    /// `[1]` scale tensors, or the scale [`Tensor::to_fp8`] returns) or a
    /// Rust number. Operands may be any floats, FP8 the intended ones (two
    /// different FP8 formats included, as PyTorch allows); shapes follow
    /// [`Tensor::matmul`].
    ///
    /// The operands are read by the product's own loads and widened there
    /// (no `f32` copy is written), and the scaling and cast are the
    /// product's epilogue, on every backend.
    ///
    /// # Panics
    /// When an operand, a scale or `out_dtype` is not a float, a scale has
    /// more than one element, or the shapes do not multiply (as
    /// [`Tensor::matmul`]).
    ///
    /// ```
    /// use smelt::{DType, Device, Tensor};
    /// let dev = Device::Cpu;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev).cast(DType::F8E4M3);
    /// let b = Tensor::from_vec(vec![1.0f32, 0.5, -1.0, 2.0], [2, 2], &dev).cast(DType::F8E5M2);
    /// let c = a.scaled_mm(&b, 0.5, 2.0, DType::F32);
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![-1.0, 4.5, -1.0, 9.5]);
    /// ```
    #[track_caller]
    pub fn scaled_mm(
        &self,
        b: &Tensor,
        scale_a: impl Operand,
        scale_b: impl Operand,
        out_dtype: DType,
    ) -> Tensor {
        for (what, dt) in [
            ("self", self.dtype()),
            ("b", b.dtype()),
            ("out_dtype", out_dtype),
        ] {
            assert!(
                dt.is_float(),
                "scaled_mm: {what} must be a float dtype, got {dt} (shapes {:?} and {:?})",
                self.shape(),
                b.shape()
            );
        }
        let acc = if self.dtype() == DType::F64 || b.dtype() == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        let prod = self.cast(acc).matmul(&b.cast(acc));
        let scale = |name: &str, s: Tensor| {
            assert!(
                s.numel() == 1 && s.dtype().is_float(),
                "scaled_mm: {name} must be one float (a per-tensor scale), got {} of shape {:?}",
                s.dtype(),
                s.shape()
            );
            s.cast(acc).reshape([0usize; 0])
        };
        // Rust numbers take `prod`'s dtype, never an FP8 operand's.
        let sa = scale("scale_a", scale_a.into_operand(&prod));
        let sb = scale("scale_b", scale_b.into_operand(&prod));
        (prod * (sa * sb)).cast(out_dtype)
    }
}
