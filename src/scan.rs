//! Scans along one axis: `cumsum`, `cumprod`, `cummax`, `cummin`,
//! `logcumsumexp`, recorded as one graph op each (`Op::Scan`) that a scan
//! kernel computes with its producers fused into its loads.

use crate::index::INDEX_DTYPE;
use crate::shape::{axes, axis};
use crate::{DType, Tensor};
use smelt_codegen::ScanOp;
use smelt_fusion::Op;

impl Tensor {
    /// Cumulative sum along `axis` (negative counts from the end), as
    /// PyTorch's `cumsum`. Floats keep their dtype (halves accumulate in
    /// `F32` and are rounded once per element; `F64` in `F64`); integers
    /// and bools give `I64`, as in PyTorch, wrapping on overflow.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &Device::Cpu);
    /// assert_eq!(x.cumsum(1).to_vec::<f32>().unwrap(), vec![1.0, 3.0, 6.0, 4.0, 9.0, 15.0]);
    /// assert_eq!(x.cumsum(0).to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range for the tensor's shape.
    #[track_caller]
    #[doc(alias = "cumulative_sum")]
    pub fn cumsum(&self, axis: isize) -> Tensor {
        self.scan_values("cumsum", ScanOp::Sum, axis, self.int_or_float())
    }

    /// Cumulative product along `axis`, with `cumsum`'s dtypes.
    ///
    /// # Panics
    /// If `axis` is out of range for the tensor's shape.
    #[track_caller]
    #[doc(alias = "cumulative_prod")]
    pub fn cumprod(&self, axis: isize) -> Tensor {
        self.scan_values("cumprod", ScanOp::Prod, axis, self.int_or_float())
    }

    /// Running maximum along `axis` and the index where it was reached, as
    /// PyTorch's `cummax`: on ties the later index, once a NaN is seen the
    /// value stays NaN and the index is the latest NaN's. Values keep the
    /// dtype; indices are `I64`, as in PyTorch.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0, 3.0], [4], &Device::Cpu);
    /// let (v, i) = x.cummax(0);
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 3.0, 3.0]);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 1, 1, 3]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range for the tensor's shape.
    #[track_caller]
    #[doc(alias = "maximum.accumulate")]
    pub fn cummax(&self, axis: isize) -> (Tensor, Tensor) {
        self.scan_extreme("cummax", ScanOp::Max, ScanOp::ArgMax, axis)
    }

    /// Running minimum along `axis` and its index, like [`Tensor::cummax`]
    /// (ties: the later index; NaN stays).
    ///
    /// # Panics
    /// If `axis` is out of range for the tensor's shape.
    #[track_caller]
    #[doc(alias = "minimum.accumulate")]
    pub fn cummin(&self, axis: isize) -> (Tensor, Tensor) {
        self.scan_extreme("cummin", ScanOp::Min, ScanOp::ArgMin, axis)
    }

    /// `log(cumsum(exp(x)))` along `axis`, computed without overflow
    /// (pairwise `max + log1p(exp(min - max))`), as PyTorch's
    /// `logcumsumexp`. Integers and bools are scanned as `F32`; halves
    /// compute in `F32` and round once; `F64` scans in `F64`.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1000.0f32, 1000.0], [2], &Device::Cpu);
    /// let y = x.logcumsumexp(0).to_vec::<f32>().unwrap();
    /// assert_eq!(y[0], 1000.0);
    /// assert!((y[1] - (1000.0 + 2f32.ln())).abs() < 1e-3);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range for the tensor's shape.
    #[track_caller]
    pub fn logcumsumexp(&self, axis: isize) -> Tensor {
        let out = self.dtype().to_float();
        self.scan_values("logcumsumexp", ScanOp::LogSumExp, axis, out)
    }

    /// The result dtype of `cumsum` and `cumprod`.
    fn int_or_float(&self) -> DType {
        if self.dtype().is_float() {
            self.dtype()
        } else {
            INDEX_DTYPE
        }
    }

    /// A value scan `op` along `ax` with result dtype `out`, computed in
    /// `F32` for floats (`F64` for `F64`) and in the integer dtype
    /// otherwise.
    #[track_caller]
    fn scan_values(&self, name: &str, op: ScanOp, ax: isize, out: DType) -> Tensor {
        let d = self.scan_axis(name, ax);
        let x = self.cast(scan_dtype(out));
        x.scan(op, d, out)
    }

    /// `cummax` / `cummin`: the value scan and the index scan of one
    /// operand (two graph nodes whose kernels merge when both are
    /// realized together).
    #[track_caller]
    fn scan_extreme(&self, name: &str, op: ScanOp, arg: ScanOp, ax: isize) -> (Tensor, Tensor) {
        let d = self.scan_axis(name, ax);
        let x = self.cast(scan_dtype(self.dtype()));
        (x.scan(op, d, self.dtype()), x.scan(arg, d, INDEX_DTYPE))
    }

    /// The scanned axis (`None` for a 0-d tensor, which takes 0 or -1 and
    /// is its own scan).
    #[track_caller]
    fn scan_axis(&self, name: &str, ax: isize) -> Option<usize> {
        if self.ndim() == 0 {
            axes(name, ax, self.shape());
            return None;
        }
        Some(axis(name, ax, self.shape()))
    }

    /// Records `op` along axis `d` of this (already `F32`, `F64` or integer)
    /// tensor with result dtype `out`. A scan over one element is the
    /// element itself (its index 0), so it needs no scan kernel; nor does
    /// an empty tensor.
    fn scan(&self, op: ScanOp, d: Option<usize>, out: DType) -> Tensor {
        let trivial = match d {
            None => true,
            Some(d) => self.shape()[d] <= 1 || self.numel() == 0,
        };
        match (d, trivial) {
            (_, true) if op.is_index() => Tensor::zeros(self.shape(), out, &self.device()),
            (_, true) => self.cast(out),
            (Some(d), false) => self.derive(Op::Scan(op, self.node.clone(), d), self.shape(), out),
            (None, false) => unreachable!("a 0-d scan is trivial"),
        }
    }
}

/// The dtype a scan with result dtype `out` computes in: `F32` for every
/// float but `F64` (itself), an integer type itself, the integer scan
/// dtype for bools.
fn scan_dtype(out: DType) -> DType {
    match out {
        DType::Bool => INDEX_DTYPE,
        _ if out.is_float() => out.compute_float(),
        _ => out,
    }
}
