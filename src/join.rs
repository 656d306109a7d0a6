//! Joining and splitting along an axis: `cat`, `stack`, `split`, `chunk`,
//! `unbind`.
//!
//! `cat` is not a copy per input: each input becomes a zero-padded view
//! covering the whole result, and a chain of selects on the padded views'
//! valid regions picks the one that owns each element. The chain is one
//! elementwise kernel that loads each input only where it lies (a padded
//! view's load is predicated off elsewhere), and it fuses into whatever
//! consumes the result. A select rather than a sum keeps `-0.0` and NaN
//! payloads as they are.

use crate::device::same_device;
use crate::shape::axis;
use crate::{DType, Tensor};

impl Tensor {
    /// Joins `tensors` along `axis` (PyTorch `torch.cat`; NumPy
    /// `concatenate`). All must have the same rank and the same sizes off
    /// `axis`; dtypes promote as in arithmetic.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], [1, 2], &Device::Cpu);
    /// let b = Tensor::from_vec(vec![3.0f32, 4.0, 5.0, 6.0], [2, 2], &Device::Cpu);
    /// let c = Tensor::cat(&[&a, &b], 0);
    /// assert_eq!(c.shape(), &[3, 2]);
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// ```
    ///
    /// # Panics
    /// With no tensors, ranks or off-axis sizes that differ, an axis out of
    /// range, or tensors on different devices.
    #[doc(alias = "concatenate")]
    #[track_caller]
    pub fn cat(tensors: &[&Tensor], axis_: isize) -> Tensor {
        let first = tensors.first().expect("cat: expected at least one tensor");
        let devices: Vec<_> = tensors.iter().map(|t| t.device()).collect();
        same_device("cat", &devices);
        let ax = axis("cat", axis_, first.shape());
        let mut total = 0usize;
        for t in tensors {
            let same_off_axis = t.ndim() == first.ndim()
                && (0..t.ndim()).all(|d| d == ax || t.shape()[d] == first.shape()[d]);
            assert!(
                same_off_axis,
                "cat: shapes {:?} and {:?} differ off axis {axis_}",
                first.shape(),
                t.shape()
            );
            total = total
                .checked_add(t.shape()[ax])
                .unwrap_or_else(|| panic!("cat: the joined axis {axis_} overflows usize"));
        }
        let dt = tensors
            .iter()
            .map(|t| t.dtype())
            .reduce(DType::promote)
            .expect("non-empty");
        let mut shape = first.shape().to_vec();
        shape[ax] = total;
        // Each input's padding puts it at its offset inside the result.
        let mut placed = Vec::new();
        let mut offset = 0;
        for t in tensors {
            let n = t.shape()[ax];
            if n > 0 {
                let mut pads = vec![(0, 0); t.ndim()];
                pads[ax] = (offset, total - offset - n);
                placed.push((t.shape().to_vec(), pads));
            }
            offset += n;
        }
        let kept: Vec<&&Tensor> = tensors.iter().filter(|t| t.shape()[ax] > 0).collect();
        let Some((last, rest)) = kept.split_last() else {
            return Tensor::zeros(shape, dt, &first.device());
        };
        let (_, last_pads) = placed.last().expect("one per kept tensor");
        let mut out = last.cast(dt).pad(last_pads, 0.0);
        // Innermost select first, so the chain reads in input order.
        for (t, (shape, pads)) in rest.iter().zip(&placed).rev() {
            let inside = Tensor::ones(shape.as_slice(), DType::Bool, &t.device()).pad(pads, 0.0);
            out = inside.where_(t.cast(dt).pad(pads, 0.0), &out);
        }
        out
    }

    /// Joins `tensors` of equal shape along a new axis `axis` (PyTorch
    /// `torch.stack`): the result has one more dimension, of size
    /// `tensors.len()`, at `axis` (negative counts from the result's end).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let a = Tensor::from_vec(vec![1i32, 2], [2], &Device::Cpu);
    /// let b = Tensor::from_vec(vec![3i32, 4], [2], &Device::Cpu);
    /// let s = Tensor::stack(&[&a, &b], 1);
    /// assert_eq!(s.shape(), &[2, 2]);
    /// assert_eq!(s.to_vec::<i32>().unwrap(), vec![1, 3, 2, 4]);
    /// ```
    ///
    /// # Panics
    /// With no tensors, shapes that differ, an axis out of range, or
    /// tensors on different devices.
    #[track_caller]
    pub fn stack(tensors: &[&Tensor], axis_: isize) -> Tensor {
        let first = tensors
            .first()
            .expect("stack: expected at least one tensor");
        for t in tensors {
            assert!(
                t.shape() == first.shape(),
                "stack: shapes {:?} and {:?} differ",
                first.shape(),
                t.shape()
            );
        }
        // The new axis may sit after the last one: resolve it in the
        // result's rank.
        let mut grown = first.shape().to_vec();
        grown.push(1);
        let ax = axis("stack", axis_, &grown) as isize;
        let lifted: Vec<Tensor> = tensors.iter().map(|t| t.unsqueeze(ax)).collect();
        Tensor::cat(&lifted.iter().collect::<Vec<_>>(), ax)
    }

    /// Views of consecutive pieces of `size` along `axis`, the last one
    /// shorter when `size` does not divide the axis (PyTorch
    /// `Tensor.split` with an int). No data moves.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::arange(0.0, 5.0, 1.0, smelt::DType::F32, &Device::Cpu);
    /// let parts = x.split(2, 0);
    /// let sizes: Vec<usize> = parts.iter().map(|p| p.shape()[0]).collect();
    /// assert_eq!(sizes, vec![2, 2, 1]);
    /// assert_eq!(parts[2].to_vec::<f32>().unwrap(), vec![4.0]);
    /// ```
    ///
    /// # Panics
    /// If `size` is 0 on a non-empty axis, or the axis is out of range.
    #[track_caller]
    pub fn split(&self, size: usize, axis_: isize) -> Vec<Tensor> {
        let n = self.shape()[axis("split", axis_, self.shape())];
        assert!(
            size > 0 || n == 0,
            "split: size 0 for axis {axis_} of shape {:?}",
            self.shape()
        );
        if n == 0 {
            return vec![self.clone()];
        }
        let sizes: Vec<usize> = (0..n).step_by(size).map(|s| size.min(n - s)).collect();
        self.split_sizes(&sizes, axis_)
    }

    /// Views of consecutive pieces with the given `sizes` along `axis`
    /// (PyTorch `Tensor.split` with a list, `split_with_sizes`).
    ///
    /// # Panics
    /// If the sizes do not add up to the axis' size, or the axis is out of
    /// range.
    #[track_caller]
    pub fn split_sizes(&self, sizes: &[usize], axis_: isize) -> Vec<Tensor> {
        let ax = axis("split", axis_, self.shape());
        let sum = sizes.iter().try_fold(0usize, |a, s| a.checked_add(*s));
        assert!(
            sum == Some(self.shape()[ax]),
            "split: sizes {sizes:?} do not add up to axis {axis_} of shape {:?}",
            self.shape()
        );
        let mut start = 0;
        sizes
            .iter()
            .map(|&len| {
                let piece = self.narrow(ax as isize, start, len);
                start += len;
                piece
            })
            .collect()
    }

    /// Splits `axis` into at most `chunks` views of equal size (the last
    /// may be smaller, and there may be fewer than `chunks`), as PyTorch's
    /// `Tensor.chunk`.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::zeros([6, 4], smelt::DType::F32, &Device::Cpu);
    /// let parts = x.chunk(4, 0); // pieces of ceil(6 / 4) = 2 rows
    /// assert_eq!(parts.len(), 3);
    /// ```
    ///
    /// # Panics
    /// If `chunks` is 0 or the axis is out of range.
    #[track_caller]
    pub fn chunk(&self, chunks: usize, axis_: isize) -> Vec<Tensor> {
        assert!(chunks > 0, "chunk: 0 chunks of shape {:?}", self.shape());
        let n = self.shape()[axis("chunk", axis_, self.shape())];
        self.split(n.div_ceil(chunks), axis_)
    }

    /// The slices along `axis`, each without that axis (PyTorch
    /// `Tensor.unbind`): views, no data moves.
    ///
    /// # Panics
    /// If the axis is out of range.
    #[track_caller]
    pub fn unbind(&self, axis_: isize) -> Vec<Tensor> {
        let ax = axis("unbind", axis_, self.shape());
        (0..self.shape()[ax])
            .map(|i| self.narrow(ax as isize, i, 1).squeeze(ax as isize))
            .collect()
    }
}
