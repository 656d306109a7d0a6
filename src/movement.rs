//! Movement ops: every one only changes a view; none copies or runs a
//! kernel.

use crate::shape::{axes, axis, dims, numel, IntoAxes, IntoShape};
use crate::Tensor;
use smelt_codegen::{dims, Axes, Shape};

/// One entry of a NumPy-style index: see [`s!`](crate::s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceArg {
    /// A single position; the axis is removed. Negative counts from the end.
    Index(isize),
    /// `start..end` with `step` (Python slice semantics: negative bounds
    /// count from the end, bounds clamp, a negative step walks backwards).
    Range {
        /// First position (`None`: the start, or the end for a negative
        /// step).
        start: Option<isize>,
        /// Position one past the last (`None`: past the end, or before the
        /// start for a negative step).
        end: Option<isize>,
        /// Distance between positions; not 0.
        step: isize,
    },
    /// Inserts an axis of size 1.
    NewAxis,
}

impl SliceArg {
    /// The same range with `step`.
    ///
    /// # Panics
    /// On an index (which has no step).
    #[track_caller]
    pub fn step(self, step: isize) -> SliceArg {
        match self {
            SliceArg::Range { start, end, .. } => SliceArg::Range { start, end, step },
            other => panic!("slice: a step needs a range, got {other:?}"),
        }
    }
}

macro_rules! slice_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for SliceArg {
            fn from(i: $t) -> Self { SliceArg::Index(i as isize) }
        }
        impl From<std::ops::Range<$t>> for SliceArg {
            fn from(r: std::ops::Range<$t>) -> Self {
                SliceArg::Range { start: Some(r.start as isize), end: Some(r.end as isize), step: 1 }
            }
        }
        impl From<std::ops::RangeFrom<$t>> for SliceArg {
            fn from(r: std::ops::RangeFrom<$t>) -> Self {
                SliceArg::Range { start: Some(r.start as isize), end: None, step: 1 }
            }
        }
        impl From<std::ops::RangeTo<$t>> for SliceArg {
            fn from(r: std::ops::RangeTo<$t>) -> Self {
                SliceArg::Range { start: None, end: Some(r.end as isize), step: 1 }
            }
        }
        impl From<std::ops::RangeInclusive<$t>> for SliceArg {
            fn from(r: std::ops::RangeInclusive<$t>) -> Self {
                let end = *r.end() as isize;
                SliceArg::Range { start: Some(*r.start() as isize), end: if end == -1 { None } else { Some(end + 1) }, step: 1 }
            }
        }
    )*};
}
slice_from_int!(i32, i64, isize, usize);

impl From<std::ops::RangeFull> for SliceArg {
    fn from(_: std::ops::RangeFull) -> Self {
        SliceArg::Range {
            start: None,
            end: None,
            step: 1,
        }
    }
}

/// Builds a `Vec<SliceArg>` that reads like NumPy indexing:
/// `s![.., 1..7;2, -1, NewAxis]` is `x[:, 1:7:2, -1, None]`.
///
/// ```
/// use smelt::{s, Device, Tensor};
/// let x = Tensor::from_vec((0..12).collect::<Vec<i32>>(), [3, 4], &Device::Cpu);
/// let y = x.slice(s![..;-1, 1..4;2]);
/// assert_eq!(y.to_vec::<i32>().unwrap(), vec![9, 11, 5, 7, 1, 3]);
/// ```
#[macro_export]
macro_rules! s {
    (@one $r:expr) => { $crate::SliceArg::from($r) };
    (@one $r:expr ; $st:expr) => { $crate::SliceArg::from($r).step($st as isize) };
    ($($r:expr $(;$st:expr)?),* $(,)?) => {
        vec![$($crate::s!(@one $r $(;$st)?)),*]
    };
}

/// Marks a new size-1 axis in [`s!`](crate::s) (NumPy's `None`).
#[derive(Clone, Copy, Debug)]
pub struct NewAxis;

impl From<NewAxis> for SliceArg {
    fn from(_: NewAxis) -> Self {
        SliceArg::NewAxis
    }
}

/// Python's `slice.indices`: (start, count, step) for an axis of `n`.
fn resolve(start: Option<isize>, end: Option<isize>, step: isize, n: usize) -> (usize, usize) {
    // i128: `isize::MIN` steps and `end - start + step` cannot overflow.
    let (n, step) = (n as i128, step as i128);
    let clamp = |v: i128, lo: i128, hi: i128| v.max(lo).min(hi);
    let norm = |v: isize| if v < 0 { v as i128 + n } else { v as i128 };
    let (lo_d, hi_d) = if step > 0 { (0, n) } else { (-1, n - 1) };
    let s = start.map_or(if step > 0 { lo_d } else { hi_d }, |v| {
        clamp(norm(v), lo_d, hi_d)
    });
    let e = end.map_or(if step > 0 { hi_d } else { lo_d }, |v| {
        clamp(norm(v), lo_d, hi_d)
    });
    let count = if step > 0 {
        (e - s + step - 1).max(0) / step
    } else {
        (s - e - step - 1).max(0) / -step
    };
    // Both lie in 0..=n, so they fit in usize.
    (s.max(0) as usize, count as usize)
}

/// What a list of [`SliceArg`]s selects from a tensor of a given shape,
/// per axis of that tensor: shared by `slice` (which views it) and
/// `slice_assign` (which writes into it).
pub(crate) struct SlicePlan {
    /// Per axis, the half-open range of positions the selection spans.
    pub ranges: Vec<(usize, usize)>,
    /// Per axis, the step between selected positions (1 when at most one
    /// is selected: a huge step would overflow a stride).
    pub steps: Vec<isize>,
    /// Per axis, how many positions are selected (1 for an index).
    pub counts: Vec<usize>,
    /// Axes taken by an index (absent from the result).
    pub dropped: Vec<usize>,
    /// Positions in the result of inserted size-1 axes.
    pub new_axes: Vec<usize>,
}

impl SlicePlan {
    /// Resolves `args` for `shape`, Python-style; missing trailing axes
    /// are taken whole.
    ///
    /// # Panics
    /// On too many indices, an index out of range or a zero step, naming
    /// `op`.
    #[track_caller]
    pub fn new(op: &str, args: &[SliceArg], shape: &[usize]) -> SlicePlan {
        let consumed = args
            .iter()
            .filter(|a| !matches!(a, SliceArg::NewAxis))
            .count();
        assert!(
            consumed <= shape.len(),
            "{op}: {consumed} indices for a tensor of shape {shape:?}"
        );
        let mut plan = SlicePlan {
            ranges: Vec::new(),
            steps: Vec::new(),
            counts: Vec::new(),
            dropped: Vec::new(),
            new_axes: Vec::new(),
        };
        let mut kept = 0;
        let whole = SliceArg::Range {
            start: None,
            end: None,
            step: 1,
        };
        for a in args
            .iter()
            .chain(std::iter::repeat_n(&whole, shape.len() - consumed))
        {
            let d = plan.ranges.len();
            match *a {
                SliceArg::NewAxis => {
                    plan.new_axes.push(kept + plan.new_axes.len());
                    continue;
                }
                SliceArg::Index(i) => {
                    let n = shape[d] as isize;
                    let j = if i < 0 { i + n } else { i };
                    assert!(
                        (0..n).contains(&j),
                        "{op}: index {i} is out of range for axis {d} of size {n} (shape {shape:?})"
                    );
                    plan.ranges.push((j as usize, j as usize + 1));
                    plan.steps.push(1);
                    plan.counts.push(1);
                    plan.dropped.push(d);
                }
                SliceArg::Range { start, end, step } => {
                    assert!(
                        step != 0,
                        "{op}: step of axis {d} is zero (shape {shape:?})"
                    );
                    let (s, count) = resolve(start, end, step, shape[d]);
                    let span = if count == 0 {
                        0
                    } else {
                        (count - 1) * step.unsigned_abs() + 1
                    };
                    plan.ranges.push(if count == 0 {
                        (0, 0)
                    } else if step > 0 {
                        (s, s + span)
                    } else {
                        (s + 1 - span, s + 1)
                    });
                    plan.steps.push(if count > 1 { step } else { 1 });
                    plan.counts.push(count);
                    kept += 1;
                }
            }
        }
        plan
    }

    /// The shape of the selection: counts of the ranged axes, with the
    /// new axes inserted.
    pub fn shape(&self) -> Vec<usize> {
        let mut out: Vec<usize> = (0..self.counts.len())
            .filter(|d| !self.dropped.contains(d))
            .map(|d| self.counts[d])
            .collect();
        for a in &self.new_axes {
            out.insert(*a, 1);
        }
        out
    }
}

impl Tensor {
    /// Reshape to `shape` (one `-1` is inferred). Never copies: a view that
    /// strides cannot express is stacked on the current one.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec((0..6).collect::<Vec<i32>>(), [2, 3], &Device::Cpu);
    /// let y = x.reshape([3, -1]);
    /// assert_eq!(y.shape(), &[3, 2]);
    /// assert_eq!(y.to_vec::<i32>().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    /// // A transpose's reshape reads in the transposed order.
    /// assert_eq!(x.t().reshape([6]).to_vec::<i32>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
    /// ```
    ///
    /// # Panics
    /// If the element counts differ or more than one dim is `-1`.
    #[track_caller]
    pub fn reshape(&self, shape: impl IntoShape) -> Tensor {
        let d = shape.into_dims();
        let n = self.numel();
        let infer = d.iter().filter(|x| **x == -1).count();
        assert!(
            infer <= 1 && d.iter().all(|x| *x >= -1),
            "reshape: invalid shape {d:?} for a tensor of shape {:?}",
            self.shape()
        );
        let given: Shape = d.iter().filter(|x| **x >= 0).map(|x| *x as usize).collect();
        let known = numel("reshape", &given);
        let mut new = Shape::with_capacity(d.len());
        for x in &d {
            if *x == -1 {
                assert!(
                    known != 0 && n.is_multiple_of(known),
                    "reshape: cannot infer -1 in {d:?} for a tensor of shape {:?}",
                    self.shape()
                );
                new.push(n / known);
            } else {
                new.push(*x as usize);
            }
        }
        assert!(
            numel("reshape", &new) == n,
            "reshape: shape {:?} ({n} elements) cannot become {new:?}",
            self.shape()
        );
        if new.as_slice() == self.shape() {
            return self.clone();
        }
        self.view_with(|st| st.reshape(&new))
    }

    /// Reorders axes: result axis `i` is input axis `axes[i]`.
    ///
    /// ```
    /// use smelt::{DType, Device, Tensor};
    /// let x = Tensor::zeros([2, 3, 4], DType::F32, &Device::Cpu);
    /// assert_eq!(x.permute([2, 0, 1]).shape(), &[4, 2, 3]);
    /// let y = Tensor::from_vec(vec![1, 2, 3, 4, 5, 6], [2, 3], &Device::Cpu);
    /// assert_eq!(y.permute([1, 0]).to_vec::<i32>().unwrap(), vec![1, 4, 2, 5, 3, 6]);
    /// ```
    ///
    /// # Panics
    /// If `axes` is not a permutation of the tensor's axes.
    #[track_caller]
    pub fn permute(&self, perm: impl IntoAxes) -> Tensor {
        let shape = self.shape();
        let list = perm
            .into_axes()
            .unwrap_or_else(|| (0..shape.len() as isize).collect());
        let p: Axes = list.iter().map(|a| axis("permute", *a, shape)).collect();
        let mut sorted = p.clone();
        sorted.sort_unstable();
        assert!(
            sorted.iter().copied().eq(0..shape.len()),
            "permute: {list:?} is not a permutation of the axes of shape {shape:?}"
        );
        self.view_with(|st| st.permute(&p))
    }

    /// Swaps two axes.
    #[track_caller]
    pub fn transpose(&self, a: isize, b: isize) -> Tensor {
        let (a, b) = (
            axis("transpose", a, self.shape()),
            axis("transpose", b, self.shape()),
        );
        let mut p: Axes = (0..self.ndim()).collect();
        p.swap(a, b);
        self.view_with(|st| st.permute(&p))
    }

    /// Matrix transpose of a 2-D tensor (1-D and 0-D return themselves, as
    /// in PyTorch).
    ///
    /// # Panics
    /// For more than 2 dimensions.
    #[track_caller]
    pub fn t(&self) -> Tensor {
        assert!(
            self.ndim() <= 2,
            "t: expects at most 2 dimensions, got shape {:?}",
            self.shape()
        );
        if self.ndim() < 2 {
            self.clone()
        } else {
            self.transpose(0, 1)
        }
    }

    /// NumPy-style indexing with [`s!`](crate::s); missing trailing axes are
    /// taken whole.
    ///
    /// ```
    /// use smelt::{s, Device, NewAxis, Tensor};
    /// let x = Tensor::from_vec((0..12).collect::<Vec<i32>>(), [3, 4], &Device::Cpu);
    /// assert_eq!(x.slice(s![1]).to_vec::<i32>().unwrap(), vec![4, 5, 6, 7]); // x[1]
    /// assert_eq!(x.slice(s![.., -1]).to_vec::<i32>().unwrap(), vec![3, 7, 11]); // x[:, -1]
    /// assert_eq!(x.slice(s![1.., ..2]).shape(), &[2, 2]); // x[1:, :2]
    /// assert_eq!(x.slice(s![NewAxis, ..;2]).shape(), &[1, 2, 4]); // x[None, ::2]
    /// ```
    ///
    /// # Panics
    /// On too many indices, an index out of range or a zero step.
    #[track_caller]
    pub fn slice(&self, args: Vec<SliceArg>) -> Tensor {
        let plan = SlicePlan::new("slice", &args, self.shape());
        let flips: Vec<usize> = (0..plan.steps.len())
            .filter(|a| plan.steps[*a] < 0)
            .collect();
        let t = self.view_with(|st| {
            let mut st = st.shrink(&plan.ranges).flip(&flips);
            for (a, s) in plan.steps.iter().enumerate() {
                if s.unsigned_abs() > 1 {
                    st = st.step(a, s.unsigned_abs());
                }
            }
            st
        });
        if plan.shape() == t.shape() {
            t
        } else {
            t.reshape(plan.shape())
        }
    }

    /// `len` elements of `axis` starting at `start`.
    ///
    /// # Panics
    /// If the range exceeds the axis.
    #[track_caller]
    pub fn narrow(&self, axis_: isize, start: usize, len: usize) -> Tensor {
        let a = axis("narrow", axis_, self.shape());
        let n = self.shape()[a];
        let Some(end) = start.checked_add(len) else {
            panic!(
                "narrow: start {start} + length {len} overflows (axis {a}, shape {:?})",
                self.shape()
            )
        };
        assert!(
            end <= n,
            "narrow: range {start}..{end} exceeds axis {a} of size {n} (shape {:?})",
            self.shape()
        );
        let ranges: Vec<(usize, usize)> = self
            .shape()
            .iter()
            .enumerate()
            .map(|(d, n)| {
                if d == a {
                    (start, start + len)
                } else {
                    (0, *n)
                }
            })
            .collect();
        self.view_with(|st| st.shrink(&ranges))
    }

    /// Reverses the order of elements along `axes`.
    #[track_caller]
    pub fn flip(&self, ax: impl IntoAxes) -> Tensor {
        let a = axes("flip", ax, self.shape());
        self.view_with(|st| st.flip(&a))
    }

    /// Broadcasts to `shape` (NumPy's `broadcast_to`): size-1 axes repeat,
    /// new axes are added in front. Zero-copy (stride 0).
    ///
    /// # Panics
    /// If the shapes are not compatible.
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl IntoShape) -> Tensor {
        let target = dims("broadcast_to", shape);
        let s = self.shape();
        assert!(
            target.len() >= s.len()
                && s.iter()
                    .zip(&target[target.len() - s.len()..])
                    .all(|(a, b)| a == b || *a == 1),
            "broadcast_to: shape {s:?} cannot broadcast to {target:?}"
        );
        if target.as_slice() == s {
            return self.clone();
        }
        let mut padded: Shape = dims![1; target.len() - s.len()];
        padded.extend_from_slice(s);
        self.reshape(padded).view_with(|st| st.expand(&target))
    }

    /// Same as [`Tensor::broadcast_to`] (PyTorch's name).
    #[track_caller]
    pub fn expand(&self, shape: impl IntoShape) -> Tensor {
        self.broadcast_to(shape)
    }

    /// Removes size-1 axes among `axes`.
    ///
    /// # Panics
    /// If one of them does not have size 1.
    #[track_caller]
    pub fn squeeze(&self, ax: impl IntoAxes) -> Tensor {
        let a = axes("squeeze", ax, self.shape());
        let s = self.shape();
        for &d in &a {
            assert!(
                s[d] == 1,
                "squeeze: axis {d} has size {} (shape {s:?})",
                s[d]
            );
        }
        let new: Shape = (0..s.len())
            .filter(|d| !a.contains(d))
            .map(|d| s[d])
            .collect();
        self.reshape(new)
    }

    /// Removes every size-1 axis.
    #[track_caller]
    pub fn squeeze_all(&self) -> Tensor {
        let new: Shape = self.shape().iter().copied().filter(|n| *n != 1).collect();
        self.reshape(new)
    }

    /// Inserts a size-1 axis at `axis` (which may be `ndim`, or negative).
    ///
    /// # Panics
    /// If `axis` is outside `-(ndim + 1)..=ndim`.
    #[track_caller]
    pub fn unsqueeze(&self, axis_: isize) -> Tensor {
        let mut s = Shape::from(self.shape());
        let r = s.len() as isize + 1;
        let a = if axis_ < 0 { axis_ + r } else { axis_ };
        assert!(
            (0..r).contains(&a),
            "unsqueeze: axis {axis_} is out of range for a tensor of shape {s:?} (valid: {}..={})",
            -r,
            r - 1
        );
        s.insert(a as usize, 1);
        self.reshape(s)
    }

    /// All axes into one.
    #[track_caller]
    pub fn flatten(&self) -> Tensor {
        self.reshape([self.numel()])
    }

    /// Axes `start..=end` into one (PyTorch's `flatten(start_dim, end_dim)`).
    #[track_caller]
    pub fn flatten_dims(&self, start: isize, end: isize) -> Tensor {
        if self.ndim() == 0 {
            return self.reshape([1usize]);
        }
        let (a, b) = (
            axis("flatten", start, self.shape()),
            axis("flatten", end, self.shape()),
        );
        assert!(a <= b, "flatten: start axis {a} is after end axis {b}");
        let s = self.shape();
        let mut new = Shape::from(&s[..a]);
        new.push(s[a..=b].iter().product());
        new.extend_from_slice(&s[b + 1..]);
        self.reshape(new)
    }

    /// Pads every axis with `(before, after)` elements of `value`
    /// (`np.pad(x, pads, constant_values=value)`). Zero padding is a masked
    /// view; another value adds a `where` that fusion folds into consumers.
    ///
    /// # Panics
    /// If `pads` does not have one pair per axis.
    #[track_caller]
    pub fn pad(&self, pads: &[(usize, usize)], value: f64) -> Tensor {
        assert!(
            pads.len() == self.ndim(),
            "pad: {} pairs for a tensor of shape {:?}",
            pads.len(),
            self.shape()
        );
        let padded_shape: Option<Shape> = self
            .shape()
            .iter()
            .zip(pads)
            .map(|(n, (b, a))| n.checked_add(*b)?.checked_add(*a))
            .collect();
        match padded_shape {
            Some(s) => numel("pad", &s),
            None => panic!(
                "pad: pads {pads:?} overflow for a tensor of shape {:?}",
                self.shape()
            ),
        };
        let padded = self.view_with(|st| st.pad(pads));
        if value == 0.0 {
            return padded;
        }
        let inside = Tensor::ones(self.shape(), crate::DType::Bool, &self.device())
            .view_with(|st| st.pad(pads));
        inside.where_(&padded, padded.full_like(value))
    }
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn python_slice_indices() {
        assert_eq!(resolve(None, None, 1, 5), (0, 5));
        assert_eq!(resolve(None, None, -1, 5), (4, 5));
        assert_eq!(resolve(Some(-2), None, 1, 5), (3, 2));
        assert_eq!(resolve(Some(1), Some(7), 2, 5), (1, 2));
        assert_eq!(resolve(Some(10), Some(0), -3, 5), (4, 2));
        assert_eq!(resolve(Some(3), Some(1), 1, 5).1, 0);
        assert_eq!(resolve(None, None, 1, 0), (0, 0));
    }
}
