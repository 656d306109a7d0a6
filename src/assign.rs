//! Functional updates: `masked_fill` and `slice_assign` return the updated
//! tensor lazily (tensors are immutable). Both are a select: the new
//! values come in as a view laid over the whole result whose padding
//! reads 0, and a mask of the same view picks them, so an update is part
//! of whatever kernel reads the result, never a copy of the old tensor.

use crate::device::same_device;
use crate::elementwise::Operand;
use crate::movement::{SliceArg, SlicePlan};
use crate::shape::broadcast_shapes;
use crate::{DType, Tensor};

impl Tensor {
    /// `value` where `mask` is true, else `self` (PyTorch
    /// `Tensor.masked_fill`). `mask` broadcasts to `self`'s shape; the
    /// result keeps `self`'s shape and dtype.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &Device::Cpu);
    /// let m = Tensor::from_vec(vec![false, true, false], [3], &Device::Cpu);
    /// let y = x.masked_fill(&m, f32::NEG_INFINITY as f64);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, f32::NEG_INFINITY, 3.0]);
    /// ```
    ///
    /// # Panics
    /// If `mask` is not `Bool`, does not broadcast to `self`'s shape, or is
    /// on another device.
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Tensor {
        same_device("masked_fill", &[self.device(), mask.device()]);
        assert!(
            mask.dtype() == DType::Bool,
            "masked_fill: the mask must be bool, got {}",
            mask.dtype()
        );
        let shape = broadcast_shapes("masked_fill", self.shape(), mask.shape());
        assert!(
            shape.as_slice() == self.shape(),
            "masked_fill: mask of shape {:?} does not broadcast to shape {:?}",
            mask.shape(),
            self.shape()
        );
        let fill = Tensor::full([0usize; 0], value, self.dtype(), &self.device());
        mask.where_(&fill, self)
    }

    /// `self` with the region `index` selects replaced by `src` (PyTorch's
    /// `t[index] = src`, returned as a new tensor: NumPy's `put` by
    /// slices). `src` (a tensor or a scalar) broadcasts to the region's
    /// shape and is cast to `self`'s dtype. Steps, negative steps, indices
    /// and new axes work as in [`Tensor::slice`].
    ///
    /// ```
    /// use smelt::{s, Device, Tensor};
    /// let x = Tensor::zeros([3, 4], smelt::DType::I32, &Device::Cpu);
    /// let y = x.slice_assign(s![1, ..;2], 7);
    /// assert_eq!(y.to_vec::<i32>().unwrap(), vec![0, 0, 0, 0, 7, 0, 7, 0, 0, 0, 0, 0]);
    /// let row = Tensor::from_vec(vec![1i32, 2], [2], &Device::Cpu);
    /// let z = y.slice_assign(s![.., -1..-3;-1], &row); // x[:, -1:-3:-1] = row
    /// assert_eq!(z.slice(s![0]).to_vec::<i32>().unwrap(), vec![0, 0, 2, 1]);
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::slice`] for `index`; if `src` does not broadcast to the
    /// region or is on another device.
    #[track_caller]
    pub fn slice_assign(&self, index: Vec<SliceArg>, src: impl Operand) -> Tensor {
        let src = src.into_operand(self);
        same_device("slice_assign", &[self.device(), src.device()]);
        let plan = SlicePlan::new("slice_assign", &index, self.shape());
        let region = plan.shape();
        let fits = broadcast_shapes("slice_assign", &region, src.shape()).as_slice() == region;
        assert!(
            fits,
            "slice_assign: source of shape {:?} does not broadcast to the region's shape {region:?}",
            src.shape()
        );
        if plan.counts.contains(&0) {
            return self.clone();
        }
        // The values in `self`'s axes (an index is an axis of 1), then laid
        // over the whole shape; the mask takes the same path.
        let values = src.cast(self.dtype()).broadcast_to(&region);
        let values = values.reshape(plan.counts.clone());
        let inside = Tensor::ones(plan.counts.clone(), DType::Bool, &self.device());
        let place = |t: Tensor| -> Tensor {
            let mut t = t;
            for d in 0..self.ndim() {
                let step = plan.steps[d];
                if step < 0 {
                    t = t.flip(d as isize);
                }
                let k = step.unsigned_abs();
                let n = plan.counts[d];
                if k > 1 {
                    // Each value then k - 1 padding slots, the last cut.
                    t = t
                        .unsqueeze(d as isize + 1)
                        .pad(&pads_at(t.ndim() + 1, d + 1, (0, k - 1)), 0.0)
                        .flatten_dims(d as isize, d as isize + 1)
                        .narrow(d as isize, 0, (n - 1) * k + 1);
                }
                let (lo, hi) = plan.ranges[d];
                t = t.pad(&pads_at(t.ndim(), d, (lo, self.shape()[d] - hi)), 0.0);
            }
            t
        };
        place(inside).where_(place(values), self)
    }
}

/// Pads of `(0, 0)` on every axis of a rank-`rank` tensor but `axis`.
fn pads_at(rank: usize, axis: usize, pad: (usize, usize)) -> Vec<(usize, usize)> {
    let mut p = vec![(0, 0); rank];
    p[axis] = pad;
    p
}
