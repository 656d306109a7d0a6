//! Sorting along one axis: `sort`, `argsort`, `topk`, recorded as sort
//! graph ops (`Op::Sort`, one for the values and one for the indices) that
//! one sort kernel computes, with producers fused into its loads.

use crate::index::INDEX_DTYPE;
use crate::shape::{axes, axis};
use crate::{DType, Tensor};
use smelt_codegen::{Shape, SortOp, SortPart};
use smelt_fusion::Op;

impl Tensor {
    /// Sorts along `axis` (negative counts from the end), as PyTorch's
    /// `sort(dim, descending, stable=True)`: the sorted values and, for
    /// each, its position along `axis` before sorting (`I64`, as in
    /// PyTorch). The sort is stable (equal values keep their order;
    /// `-0.0` equals `0.0`), NaN sorts above `+inf` (last ascending, first
    /// descending), and every dtype compares exactly by value (`F64`
    /// values that round to one `f32`, and `I64` ones beyond `i32`, too).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![3.0f32, f32::NAN, -1.0, 3.0], [4], &Device::Cpu);
    /// let (v, i) = x.sort(0, false);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![2, 0, 3, 1]);
    /// assert_eq!(v.to_vec::<f32>().unwrap()[..3], [-1.0, 3.0, 3.0]);
    /// let (_, i) = x.sort(-1, true);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 0, 3, 2]);
    /// // 64-bit keys: beyond `i32`, and below `f32` precision.
    /// let big = Tensor::from_vec(vec![i64::MAX, 1 << 40, i64::MIN, 1 << 40], [4], &Device::Cpu);
    /// assert_eq!(big.sort(0, false).1.to_vec::<i64>().unwrap(), vec![2, 1, 3, 0]);
    /// let near = Tensor::from_vec(vec![1.0 + 1e-12, 1.0, 1.0 - 1e-12], [3], &Device::Cpu);
    /// assert_eq!(near.argsort(0, false).to_vec::<i64>().unwrap(), vec![2, 1, 0]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range, or the axis is longer than `i32::MAX`.
    #[track_caller]
    pub fn sort(&self, axis: isize, descending: bool) -> (Tensor, Tensor) {
        let n = self.sort_len("sort", axis);
        self.sorted("sort", axis, descending, n)
    }

    /// The indices that sort along `axis`: [`Tensor::sort`]'s second
    /// result (stable, NaN above `+inf`).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![2i32, 1, 2, 0], [2, 2], &Device::Cpu);
    /// assert_eq!(x.argsort(1, false).to_vec::<i64>().unwrap(), vec![1, 0, 1, 0]);
    /// assert_eq!(x.argsort(0, true).to_vec::<i64>().unwrap(), vec![0, 0, 1, 1]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range, or the axis is longer than `i32::MAX`.
    #[track_caller]
    pub fn argsort(&self, axis: isize, descending: bool) -> Tensor {
        let n = self.sort_len("argsort", axis);
        self.sorted("argsort", axis, descending, n).1
    }

    /// The `k` largest (`largest`) or smallest elements along `axis` and
    /// their indices, sorted (largest first, or smallest first), as
    /// PyTorch's `topk(k, dim, largest, sorted=True)`. Ties keep their
    /// order along the axis; NaN counts as larger than `+inf`. `k = 0`
    /// gives empty results.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 5.0, 2.0], [5], &Device::Cpu);
    /// let (v, i) = x.topk(3, 0, true);
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![5.0, 5.0, 3.0]);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 3, 2]);
    /// let (v, _) = x.topk(2, -1, false);
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range, `k` exceeds the axis length, or the axis
    /// is longer than `i32::MAX`.
    #[track_caller]
    pub fn topk(&self, k: usize, axis: isize, largest: bool) -> (Tensor, Tensor) {
        let n = self.sort_len("topk", axis);
        assert!(
            k <= n,
            "topk: k = {k} exceeds the length {n} of axis {axis} of a tensor of shape {:?}",
            self.shape()
        );
        self.sorted("topk", axis, largest, k)
    }

    /// The length of the sorted axis (1 for a 0-d tensor, which takes
    /// axis 0 or -1).
    #[track_caller]
    fn sort_len(&self, name: &str, ax: isize) -> usize {
        if self.ndim() == 0 {
            axes(name, ax, self.shape());
            return 1;
        }
        let n = self.shape()[axis(name, ax, self.shape())];
        assert!(
            i32::try_from(n).is_ok(),
            "{name}: axis {ax} of a tensor of shape {:?} is longer than {} indices can count",
            self.shape(),
            i32::MAX
        );
        n
    }

    /// The first `k` values and indices of the stable sort along `ax`
    /// (checked by the caller).
    fn sorted(&self, name: &str, ax: isize, descending: bool, k: usize) -> (Tensor, Tensor) {
        let dev = self.device();
        if self.ndim() == 0 {
            // One element: itself at index 0, or nothing.
            return if k == 1 {
                (self.clone(), Tensor::zeros([0usize; 0], INDEX_DTYPE, &dev))
            } else {
                let empty = |dt| Tensor::zeros([0usize], dt, &dev);
                (empty(self.dtype()), empty(INDEX_DTYPE))
            };
        }
        let d = axis(name, ax, self.shape());
        let n = self.shape()[d];
        let mut out: Shape = self.shape().into();
        out[d] = k;
        if k == 0 || self.numel() == 0 {
            let empty = |dt| Tensor::zeros(out.clone(), dt, &dev);
            return (empty(self.dtype()), empty(INDEX_DTYPE));
        }
        if n == 1 {
            return (self.clone(), Tensor::zeros(out, INDEX_DTYPE, &dev));
        }
        // Floats up to 32 bits sort as `F32` (exact for halves), bools and
        // integers up to 32 bits as `I32`; `F64` and `I64` as themselves
        // (64-bit keys: a 32-bit cast would merge distinct values).
        let key = match self.dtype() {
            DType::F64 | DType::I64 => self.dtype(),
            dt if dt.is_float() => DType::F32,
            _ => DType::I32,
        };
        let x = self.cast(key);
        let node = |part| {
            let op = SortOp {
                descending,
                part,
                k,
                dtype: self.dtype(),
            };
            Op::Sort(op, x.node.clone(), d)
        };
        (
            x.derive(node(SortPart::Values), out.clone(), self.dtype()),
            x.derive(node(SortPart::Indices), out, INDEX_DTYPE),
        )
    }
}
