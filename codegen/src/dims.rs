//! Shapes, strides, axes and loop ranges: short lists kept inline.
//!
//! Every recorded op stores a shape, every view a shape, strides and
//! perhaps a valid range per axis, and the planner builds domains and
//! trackers by the thousand. As heap `Vec`s each of these was an
//! allocation and a free. [`Dims`] holds up to [`INLINE`] entries inside
//! the value and spills to the heap only beyond, so copying, comparing
//! and hashing a shape of ordinary rank touches no allocator.
//!
//! Six covers what tensors use in practice (NCHW images with a batch of
//! groups, `[batch, heads, seq, dim]` attention, a 5-d convolution's
//! input) and a matmul's loop domain, which is the operands' rank plus
//! one. A longer list still works, on the heap. More inline entries would
//! make every shape bigger to move for the rare tensor that needs them.
//!
//! A `Dims` dereferences to a slice, so code that reads `&[usize]` takes
//! a [`Shape`] unchanged; `Vec`s and slices convert with `.into()`.

pub use smallvec::SmallVec;

/// Entries a [`Dims`] holds without allocating.
pub const INLINE: usize = 6;

/// A short list (one entry per axis or loop variable), inline up to
/// [`INLINE`] entries.
pub type Dims<T> = SmallVec<[T; INLINE]>;

/// Size of each axis of a tensor or view.
pub type Shape = Dims<usize>;

/// Elements between neighbours along each axis of a view (0 for broadcast
/// axes, negative for flipped ones).
pub type Strides = Dims<isize>;

/// Axis numbers (of a reduction, a permutation).
pub type Axes = Dims<usize>;

/// Sizes of a kernel's loop variables.
pub type Ranges = Dims<i64>;

/// Builds a [`Dims`] like `vec!`: `dims![2, 3]`, `dims![0; rank]`.
///
/// ```
/// use smelt_codegen::{dims, dims::Shape};
/// let s: Shape = dims![2, 3];
/// assert_eq!(s.as_slice(), &[2, 3]);
/// assert!(!s.spilled());
/// let z: Shape = dims![0; 8];
/// assert_eq!(z.len(), 8);
/// ```
#[macro_export]
macro_rules! dims {
    ($elem:expr; $n:expr) => {
        $crate::dims::Dims::from_elem($elem, $n)
    };
    ($($x:expr),* $(,)?) => {
        <$crate::dims::Dims<_> as ::core::iter::FromIterator<_>>::from_iter([$($x),*])
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_to_inline_entries_stay_inline_and_longer_lists_spill() {
        let s: Shape = (1..=INLINE).collect();
        assert!(!s.spilled());
        let long: Shape = (1..=INLINE + 1).collect();
        assert!(long.spilled());
        assert_eq!(long.iter().product::<usize>(), 5040);
        let v: Strides = vec![3, -1, 0].into();
        assert_eq!(&v[..], &[3, -1, 0]);
        let empty: Axes = dims![];
        assert!(empty.is_empty());
    }

    #[test]
    fn a_shape_is_only_a_word_bigger_than_its_entries() {
        assert_eq!(
            std::mem::size_of::<Shape>(),
            (INLINE + 1) * std::mem::size_of::<usize>()
        );
    }
}
