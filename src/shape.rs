//! Shape and axis arguments: conversions and NumPy-style normalisation.
//! Results are [`Shape`]s and [`Axes`] (inline up to six entries), so
//! normalising an argument allocates nothing.

use smelt_codegen::{Axes, Dims, Shape};

/// Something that names a shape: `[2, 3]`, `vec![2, 3]`, `&[2, 3][..]`,
/// a [`Shape`] (what [`crate::Tensor::shape`] derefs from).
/// A `-1` entry (in signed forms) is inferred by [`crate::Tensor::reshape`].
pub trait IntoShape {
    /// The sizes, with `-1` where one is to be inferred.
    fn into_dims(self) -> Dims<isize>;
}

macro_rules! into_shape {
    ($($t:ty),*) => {$(
        impl<const N: usize> IntoShape for [$t; N] {
            fn into_dims(self) -> Dims<isize> {
                self.iter().map(|d| *d as isize).collect()
            }
        }
        impl IntoShape for &[$t] {
            fn into_dims(self) -> Dims<isize> {
                self.iter().map(|d| *d as isize).collect()
            }
        }
        impl IntoShape for Vec<$t> {
            fn into_dims(self) -> Dims<isize> {
                self.iter().map(|d| *d as isize).collect()
            }
        }
        impl IntoShape for &Vec<$t> {
            fn into_dims(self) -> Dims<isize> {
                self.iter().map(|d| *d as isize).collect()
            }
        }
        impl IntoShape for Dims<$t> {
            fn into_dims(self) -> Dims<isize> {
                self.iter().map(|d| *d as isize).collect()
            }
        }
        impl IntoShape for &Dims<$t> {
            fn into_dims(self) -> Dims<isize> {
                self.iter().map(|d| *d as isize).collect()
            }
        }
    )*};
}
into_shape!(usize, i32, i64, isize);

/// The dims as sizes.
///
/// # Panics
/// If a dim is negative or the element count overflows.
#[track_caller]
pub(crate) fn dims(op: &str, s: impl IntoShape) -> Shape {
    let d = s.into_dims();
    let mut out = Shape::with_capacity(d.len());
    for x in &d {
        match usize::try_from(*x) {
            Ok(n) => out.push(n),
            Err(_) => panic!("{op}: negative dimension in shape {d:?}"),
        }
    }
    numel(op, &out);
    out
}

/// The element count of `shape`. Views index with `isize` strides, so the
/// count must fit in `isize`.
///
/// # Panics
/// If it overflows, naming the op and the shape.
#[track_caller]
pub(crate) fn numel(op: &str, shape: &[usize]) -> usize {
    match shape
        .iter()
        .try_fold(1usize, |acc, d| acc.checked_mul(*d))
        .filter(|n| isize::try_from(*n).is_ok())
    {
        Some(n) => n,
        None => panic!("{op}: shape {shape:?} has more than isize::MAX elements"),
    }
}

/// One or several axes, possibly negative; `..` means every axis.
pub trait IntoAxes {
    /// `None` for every axis.
    fn into_axes(self) -> Option<Dims<isize>>;
}

macro_rules! into_axes {
    ($($t:ty),*) => {$(
        impl IntoAxes for $t {
            fn into_axes(self) -> Option<Dims<isize>> {
                Some(smelt_codegen::dims![self as isize])
            }
        }
        impl<const N: usize> IntoAxes for [$t; N] {
            fn into_axes(self) -> Option<Dims<isize>> {
                Some(self.iter().map(|a| *a as isize).collect())
            }
        }
        impl IntoAxes for &[$t] {
            fn into_axes(self) -> Option<Dims<isize>> {
                Some(self.iter().map(|a| *a as isize).collect())
            }
        }
        impl IntoAxes for Vec<$t> {
            fn into_axes(self) -> Option<Dims<isize>> {
                Some(self.iter().map(|a| *a as isize).collect())
            }
        }
        impl IntoAxes for Dims<$t> {
            fn into_axes(self) -> Option<Dims<isize>> {
                Some(self.iter().map(|a| *a as isize).collect())
            }
        }
    )*};
}
into_axes!(usize, i32, i64, isize);

impl IntoAxes for std::ops::RangeFull {
    fn into_axes(self) -> Option<Dims<isize>> {
        None
    }
}

/// Normalises a possibly negative axis of a rank-`rank` tensor.
///
/// # Panics
/// If the axis is out of range, naming the op and shape.
#[track_caller]
pub(crate) fn axis(op: &str, a: isize, shape: &[usize]) -> usize {
    let r = shape.len() as isize;
    let n = if a < 0 { a + r } else { a };
    assert!(
        (0..r).contains(&n),
        "{op}: axis {a} is out of range for a tensor of shape {shape:?} (rank {r})"
    );
    n as usize
}

/// Normalised, sorted, deduplicated axes (`None` = every axis).
///
/// # Panics
/// On an out-of-range or repeated axis.
#[track_caller]
pub(crate) fn axes(op: &str, a: impl IntoAxes, shape: &[usize]) -> Axes {
    match a.into_axes() {
        None => (0..shape.len()).collect(),
        // As in PyTorch, a 0-d tensor takes axis 0 or -1 and has no axis
        // to reduce: `sum(0)` of a scalar is the scalar.
        Some(list) if shape.is_empty() => {
            for x in &list {
                assert!(
                    *x == 0 || *x == -1,
                    "{op}: axis {x} is out of range for a tensor of shape [] (rank 0 takes 0 or -1)"
                );
            }
            Axes::new()
        }
        Some(list) => {
            let mut out = Axes::with_capacity(list.len());
            for x in &list {
                out.push(axis(op, *x, shape));
            }
            out.sort_unstable();
            let n = out.len();
            out.dedup();
            assert!(
                out.len() == n,
                "{op}: repeated axis in {list:?} for shape {shape:?}"
            );
            out
        }
    }
}

/// Axis `i` of `shape` right-aligned to rank `r` (1 where it has none).
fn aligned(shape: &[usize], i: usize, r: usize) -> usize {
    (i + shape.len()).checked_sub(r).map_or(1, |j| shape[j])
}

/// NumPy broadcasting of two shapes.
///
/// # Panics
/// If they do not broadcast, naming the op, both shapes and the axis.
#[track_caller]
pub(crate) fn broadcast_shapes(op: &str, a: &[usize], b: &[usize]) -> Shape {
    let r = a.len().max(b.len());
    let mut out = Shape::with_capacity(r);
    // A loop, not a closure: the panic keeps the caller's location.
    for i in 0..r {
        let (da, db) = (aligned(a, i, r), aligned(b, i, r));
        out.push(match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => panic!(
                "{op}: shapes {a:?} and {b:?} do not broadcast (axis {} of the result: {da} vs {db})",
                i as isize - r as isize
            ),
        });
    }
    out
}
