//! Reductions over one, several or all axes, with NumPy's `keepdims`.

use crate::creation::LONG;
use crate::shape::{axes, axis, IntoAxes};
use crate::{DType, Tensor};
use smelt_codegen::{dims, Axes, ReduceOp, Shape};
use smelt_fusion::Op;

macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident, $keep:ident => $op:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                ///
                /// # Panics
                /// On an out-of-range or repeated axis, and for `max` and
                /// `min` on an empty axis (no identity is a right answer).
                #[track_caller]
                pub fn $name(&self, ax: impl IntoAxes) -> Tensor {
                    self.reduce(ReduceOp::$op, ax, false)
                }
                /// Like the method without `_keepdim`, keeping reduced axes with size 1.
                #[track_caller]
                pub fn $keep(&self, ax: impl IntoAxes) -> Tensor {
                    self.reduce(ReduceOp::$op, ax, true)
                }
            )*
        }
    };
}

reductions! {
    /// Sum over `axes` (`..` for all). Half floats accumulate in `F32`;
    /// integers and bools sum to `I64`, as in PyTorch; `F64` sums in `F64`.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &Device::Cpu);
    /// assert_eq!(x.sum(1).to_vec::<f32>().unwrap(), vec![6.0, 15.0]);
    /// assert_eq!(x.sum(..).to_vec::<f32>().unwrap(), vec![21.0]);
    /// assert_eq!(x.sum_keepdim(0).shape(), &[1, 3]);
    /// ```
    sum, sum_keepdim => Sum;
    /// Maximum over `axes` (NaN propagates).
    max, max_keepdim => Max;
    /// Minimum over `axes` (NaN propagates).
    min, min_keepdim => Min;
    /// Product over `axes`.
    prod, prod_keepdim => Prod;
}

/// A reduction of at most this many rows, each at least this long, runs
/// in two stages so it spreads over the whole GPU instead of a few blocks
/// (the sum of 2^28 elements becomes 2^10 partial sums, then their sum).
const SPLIT_MAX_ROWS: usize = 64;
const SPLIT_MIN_LEN: usize = 1 << 20;
const SPLIT_PARTS: usize = 1024;

/// `op` over `axes` of `x` as partial reductions of [`SPLIT_PARTS`] pieces
/// of each row, then a reduction of the partials; the result has the kept
/// axes only (in order). Rows are padded with the op's identity to a
/// multiple of the piece count, through views only.
fn split_reduce(x: &Tensor, op: ReduceOp, axes_: &[usize]) -> Tensor {
    let kept: Axes = (0..x.ndim()).filter(|d| !axes_.contains(d)).collect();
    let rows: usize = kept.iter().map(|d| x.shape()[*d]).product();
    let len: usize = axes_.iter().map(|d| x.shape()[*d]).product();
    let order: Axes = kept.iter().chain(axes_).copied().collect();
    let flat = x.permute(order).reshape([rows, len]);
    let padded_len = len.div_ceil(SPLIT_PARTS) * SPLIT_PARTS;
    let flat = if padded_len == len {
        flat
    } else {
        flat.pad(&[(0, 0), (0, padded_len - len)], op.identity(x.dtype()))
    };
    let parts = flat.reshape([rows, SPLIT_PARTS, padded_len / SPLIT_PARTS]);
    let partial = parts.derive(
        Op::Reduce(op, parts.node.clone(), dims![2]),
        [rows, SPLIT_PARTS, 1].as_slice(),
        x.dtype(),
    );
    let total = partial.derive(
        Op::Reduce(op, partial.node.clone(), dims![1]),
        [rows, 1, 1].as_slice(),
        x.dtype(),
    );
    total.reshape([rows])
}

impl Tensor {
    /// Whether any element over `axes` (`..` for all) is nonzero, as
    /// `Bool` (PyTorch `any`); NaN counts as nonzero, an empty axis gives
    /// `false`.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![0.0f32, 0.0, f32::NAN, 0.0], [2, 2], &Device::Cpu);
    /// assert_eq!(x.any(1).to_vec::<bool>().unwrap(), vec![false, true]);
    /// ```
    ///
    /// # Panics
    /// On an out-of-range or repeated axis.
    #[track_caller]
    pub fn any(&self, ax: impl IntoAxes) -> Tensor {
        self.nonzero_reduce("any", ReduceOp::Max, ax, false)
    }

    /// [`Tensor::any`] keeping reduced axes with size 1.
    #[track_caller]
    pub fn any_keepdim(&self, ax: impl IntoAxes) -> Tensor {
        self.nonzero_reduce("any", ReduceOp::Max, ax, true)
    }

    /// Whether every element over `axes` is nonzero, as `Bool` (PyTorch
    /// `all`); NaN counts as nonzero, an empty axis gives `true`.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1i32, 2, 0, 3], [2, 2], &Device::Cpu);
    /// assert_eq!(x.all(1).to_vec::<bool>().unwrap(), vec![true, false]);
    /// ```
    ///
    /// # Panics
    /// On an out-of-range or repeated axis.
    #[track_caller]
    pub fn all(&self, ax: impl IntoAxes) -> Tensor {
        self.nonzero_reduce("all", ReduceOp::Min, ax, false)
    }

    /// [`Tensor::all`] keeping reduced axes with size 1.
    #[track_caller]
    pub fn all_keepdim(&self, ax: impl IntoAxes) -> Tensor {
        self.nonzero_reduce("all", ReduceOp::Min, ax, true)
    }

    /// How many elements over `axes` are nonzero (PyTorch
    /// `count_nonzero`; NaN counts), as an `I64` like PyTorch's.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![0.0f32, 1.5, -2.0, 0.0, 0.0, 0.0], [2, 3], &Device::Cpu);
    /// assert_eq!(x.count_nonzero(1).to_vec::<i64>().unwrap(), vec![2, 0]);
    /// assert_eq!(x.count_nonzero(..).to_vec::<i64>().unwrap(), vec![2]);
    /// ```
    ///
    /// # Panics
    /// On an out-of-range or repeated axis.
    #[track_caller]
    pub fn count_nonzero(&self, ax: impl IntoAxes) -> Tensor {
        self.nonzero_reduce("count_nonzero", ReduceOp::Sum, ax, false)
    }

    /// [`Tensor::count_nonzero`] keeping reduced axes with size 1.
    #[track_caller]
    pub fn count_nonzero_keepdim(&self, ax: impl IntoAxes) -> Tensor {
        self.nonzero_reduce("count_nonzero", ReduceOp::Sum, ax, true)
    }

    /// `op` over `axes` of `self != 0`: `Max` is any, `Min` all (bools,
    /// whose identities are `false` and `true`), `Sum` the count.
    #[track_caller]
    fn nonzero_reduce(&self, name: &str, op: ReduceOp, ax: impl IntoAxes, keepdim: bool) -> Tensor {
        let a = axes(name, ax, self.shape());
        let nonzero = self.ne(Tensor::zeros([0usize; 0], self.dtype(), &self.device()));
        let x = if op == ReduceOp::Sum {
            nonzero.cast(LONG)
        } else {
            nonzero
        };
        x.reduce_axes(op, &a, keepdim)
    }
}

impl Tensor {
    /// Reduces with `op` over `axes`; `keepdim` keeps them with size 1.
    ///
    /// # Panics
    /// On an out-of-range or repeated axis, and for `Max` / `Min` over an
    /// empty axis, as PyTorch raises.
    #[track_caller]
    pub fn reduce(&self, op: ReduceOp, ax: impl IntoAxes, keepdim: bool) -> Tensor {
        let a = axes(op.name(), ax, self.shape());
        if matches!(op, ReduceOp::Max | ReduceOp::Min) {
            if let Some(d) = a.iter().find(|d| self.shape()[**d] == 0) {
                panic!(
                    "{}: axis {d} of shape {:?} is empty (the {} of no elements is undefined)",
                    op.name(),
                    self.shape(),
                    op.name()
                );
            }
        }
        self.reduce_axes(op, &a, keepdim)
    }

    /// [`Tensor::reduce`] over normalised axes `a`; an empty axis gives the
    /// op's identity (what composites such as `logsumexp` build on).
    pub(crate) fn reduce_axes(&self, op: ReduceOp, a: &[usize], keepdim: bool) -> Tensor {
        let a: Axes = a.into();
        let shape = self.shape();
        let out_dt = op.out_dtype(self.dtype());
        // Sums and products of half floats (and FP8) accumulate in f32, as
        // PyTorch does; every FP8 reduction does (E4M3 has no -inf for the
        // identity of `max`).
        let acc = match op {
            ReduceOp::Sum | ReduceOp::Prod if out_dt.is_narrow_float() => DType::F32,
            _ if out_dt.is_fp8() => DType::F32,
            _ => out_dt,
        };
        let x = self.cast(acc);
        let kept: Shape = (0..shape.len())
            .map(|d| if a.contains(&d) { 1 } else { shape[d] })
            .collect();
        let rows: usize = kept.iter().product();
        let len: usize = a.iter().map(|d| shape[*d]).product();
        let r = if a.is_empty() {
            x
        } else if len == 0 {
            // No kernel reduces an empty row: the result is the identity.
            Tensor::full(kept.clone(), op.identity(acc), acc, &self.device())
        } else if rows <= SPLIT_MAX_ROWS && len >= SPLIT_MIN_LEN {
            split_reduce(&x, op, &a).reshape(kept.clone())
        } else {
            x.derive(Op::Reduce(op, x.node.clone(), a.clone()), kept.clone(), acc)
        }
        .cast(out_dt);
        if keepdim {
            r
        } else {
            let dropped: Shape = (0..shape.len())
                .filter(|d| !a.contains(d))
                .map(|d| shape[d])
                .collect();
            r.reshape(dropped)
        }
    }

    /// Mean over `axes` (integers are averaged as `F32`).
    ///
    /// ```
    /// use smelt::{DType, Device, Tensor};
    /// let x = Tensor::from_vec(vec![1i32, 2, 3, 4], [2, 2], &Device::Cpu);
    /// let m = x.mean(0);
    /// assert_eq!(m.dtype(), DType::F32);
    /// assert_eq!(m.to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    /// assert_eq!(x.mean_keepdim([0, 1]).to_vec::<f32>().unwrap(), vec![2.5]);
    /// ```
    ///
    /// # Panics
    /// On an out-of-range or repeated axis.
    #[track_caller]
    pub fn mean(&self, ax: impl IntoAxes) -> Tensor {
        self.mean_impl(ax, false)
    }

    /// Mean keeping reduced axes with size 1.
    #[track_caller]
    pub fn mean_keepdim(&self, ax: impl IntoAxes) -> Tensor {
        self.mean_impl(ax, true)
    }

    /// Sums in `F32` (`F64` for `F64`) and divides before the cast to the result dtype, so
    /// a half mean is finite whenever the mean itself is.
    fn mean_impl(&self, ax: impl IntoAxes, keepdim: bool) -> Tensor {
        let a = axes("mean", ax, self.shape());
        let count: usize = a.iter().map(|d| self.shape()[*d]).product();
        let sum = self
            .cast(self.dtype().compute_float())
            .reduce_axes(ReduceOp::Sum, &a, keepdim);
        (sum / count as f64).cast(self.dtype().to_float())
    }

    /// Index of the maximum along `axis` (first one on ties, the first NaN
    /// if any), as `I64` (as in PyTorch).
    #[track_caller]
    pub fn argmax(&self, ax: isize) -> Tensor {
        self.arg_reduce(ReduceOp::Max, ax, false)
    }

    /// [`Tensor::argmax`] keeping the axis with size 1.
    #[track_caller]
    pub fn argmax_keepdim(&self, ax: isize) -> Tensor {
        self.arg_reduce(ReduceOp::Max, ax, true)
    }

    /// Index of the minimum along `axis` (first one on ties, the first NaN
    /// if any), as `I64` (as in PyTorch).
    #[track_caller]
    pub fn argmin(&self, ax: isize) -> Tensor {
        self.arg_reduce(ReduceOp::Min, ax, false)
    }

    /// [`Tensor::argmin`] keeping the axis with size 1.
    #[track_caller]
    pub fn argmin_keepdim(&self, ax: isize) -> Tensor {
        self.arg_reduce(ReduceOp::Min, ax, true)
    }

    /// Built from primitives: the smallest index where the value equals the
    /// extreme (or is NaN).
    fn arg_reduce(&self, op: ReduceOp, ax: isize, keepdim: bool) -> Tensor {
        let name = if op == ReduceOp::Max {
            "argmax"
        } else {
            "argmin"
        };
        if self.ndim() == 0 {
            // A scalar's only element is at index 0, as in PyTorch.
            axes(name, ax, self.shape());
            return Tensor::full([0usize; 0], 0.0, DType::I64, &self.device());
        }
        let d = axis(name, ax, self.shape());
        let n = self.shape()[d];
        assert!(
            n > 0,
            "{name}: axis {d} of shape {:?} is empty",
            self.shape()
        );
        let m = self.reduce(op, [d], true);
        let hit = self.eq(&m).logical_or(self.isnan());
        let mut idx_shape = vec![1usize; self.ndim()];
        idx_shape[d] = n;
        let idx = Tensor::arange(0.0, n as f64, 1.0, DType::I64, &self.device()).reshape(idx_shape);
        hit.where_(&idx, n as i64)
            .reduce(ReduceOp::Min, [d], keepdim)
    }
}
