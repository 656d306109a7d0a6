//! Indexing by index tensors: `gather`, `index_select`, `embedding`.
//!
//! Each records one graph node (`Op::Gather`) that consumers compute in
//! their own kernels as an indirect load: the kernel loads the index, then
//! the source at the position it names. No copy kernel runs for the
//! gather itself. Index tensors have an index dtype ([`crate::DType::is_index`]);
//! an index outside its axis is an `Err` when the result is realized, on
//! every device, and never a read outside a buffer.

use crate::device::same_device;
use crate::shape::axis;
use crate::Tensor;
use smelt_codegen::Shape;
use smelt_fusion::Op;

/// Panics unless `index` has an index dtype (the one check every op of
/// this family makes; [`crate::DType::is_index`] says which dtypes those are).
#[track_caller]
pub(crate) fn check_index(op: &str, index: &Tensor) {
    assert!(
        index.dtype().is_index(),
        "{op}: indices must have an integer index dtype, got {}",
        index.dtype()
    );
}

impl Tensor {
    /// Values of `self` along `axis` at the positions `index` holds
    /// (PyTorch `torch.gather`, NumPy `take_along_axis`): for a 3-d
    /// tensor and `axis == 1`, `out[i][j][k] = self[i][index[i][j][k]][k]`.
    /// The result has `index`'s shape and `self`'s dtype; along every other
    /// axis `index` may be shorter than `self` (it reads the first
    /// elements), as in PyTorch.
    ///
    /// Lazy and fused: the consumer's kernel loads the index and then the
    /// element it names. An index outside `0..self.shape()[axis]`
    /// (negative ones included, as in PyTorch) makes the realize that
    /// computes the result return [`crate::Error::Launch`].
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &Device::Cpu);
    /// let i = Tensor::from_vec(vec![0i64, 0, 1, 0], [2, 2], &Device::Cpu);
    /// assert_eq!(x.gather(1, &i).to_vec::<f32>().unwrap(), vec![1.0, 1.0, 4.0, 3.0]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range, `index` has another rank or an index
    /// longer than `self` along an axis other than `axis`, `index` is not
    /// of an index dtype, or the tensors are on different devices.
    #[doc(alias = "take_along_axis")]
    #[track_caller]
    pub fn gather(&self, axis_: isize, index: &Tensor) -> Tensor {
        same_device("gather", &[self.device(), index.device()]);
        check_index("gather", index);
        if self.ndim() == 0 {
            // A 0-d tensor is gathered as a 1-element vector.
            assert!(
                index.ndim() == 0,
                "gather: index of shape {:?} for a 0-d tensor",
                index.shape()
            );
            axis("gather", axis_, &[1]);
            return self
                .reshape([1])
                .gather(0, &index.reshape([1]))
                .reshape([0usize; 0]);
        }
        let a = axis("gather", axis_, self.shape());
        assert!(
            index.ndim() == self.ndim(),
            "gather: index of shape {:?} must have the rank of the source's shape {:?}",
            index.shape(),
            self.shape()
        );
        for (d, (&n, &m)) in index.shape().iter().zip(self.shape()).enumerate() {
            assert!(
                d == a || n <= m,
                "gather: index of shape {:?} is longer than the source's shape {:?} along axis {d} (gathering along axis {a})",
                index.shape(),
                self.shape()
            );
        }
        // The source cut to the index's extent on every other axis: then
        // the node's shape is index's, the source's but along `a`.
        let mut src = self.clone();
        for d in 0..self.ndim() {
            if d != a && index.shape()[d] < self.shape()[d] {
                src = src.narrow(d as isize, 0, index.shape()[d]);
            }
        }
        self.derive(
            Op::Gather(src.node().clone(), index.node().clone(), a),
            index.shape(),
            self.dtype(),
        )
    }

    /// The slices of `self` along `axis` at the positions of the 1-d
    /// `index`, in its order (PyTorch `torch.index_select`, NumPy `take`
    /// with an axis). The result has `self`'s shape with `axis` of
    /// `index`'s length. A gather whose index is a broadcast view, so it
    /// fuses the same way; an index outside the axis (negative included)
    /// is an `Err` at realize.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], [3, 2], &Device::Cpu);
    /// let i = Tensor::from_vec(vec![2i32, 0], [2], &Device::Cpu);
    /// assert_eq!(x.index_select(0, &i).to_vec::<i32>().unwrap(), vec![5, 6, 1, 2]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range, `index` is not 1-d (0-d is taken as one
    /// position) or not of an index dtype, or the tensors are on different
    /// devices.
    #[doc(alias = "take")]
    #[track_caller]
    pub fn index_select(&self, axis_: isize, index: &Tensor) -> Tensor {
        same_device("index_select", &[self.device(), index.device()]);
        check_index("index_select", index);
        assert!(
            index.ndim() <= 1,
            "index_select: the index must be 1-d, got shape {:?}",
            index.shape()
        );
        if self.ndim() == 0 {
            axis("index_select", axis_, &[1]);
            let n = index.numel();
            return self
                .reshape([1])
                .index_select(0, index)
                .reshape(if index.ndim() == 0 { vec![] } else { vec![n] });
        }
        let a = axis("index_select", axis_, self.shape());
        let mut shape: Shape = self.shape().into();
        shape[a] = index.numel();
        let mut along = vec![1; self.ndim()];
        along[a] = index.numel();
        let index = index.reshape(along).expand(shape.as_slice());
        self.gather(a as isize, &index)
    }

    /// Rows of the `[vocab, dim]` table `self` at the positions `ids`
    /// holds (PyTorch `torch.nn.functional.embedding(ids, table)`): the
    /// result has shape `ids.shape() + [dim]`. An `index_select` along
    /// axis 0, so `table.embedding(&ids) * 2 + 1` is one kernel that reads
    /// only the rows it names; an id outside `0..vocab` is an `Err` at
    /// realize.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let table = Tensor::from_vec(vec![0.0f32, 0.5, 1.0, 1.5, 2.0, 2.5], [3, 2], &Device::Cpu);
    /// let ids = Tensor::from_vec(vec![2i64, 2, 0], [3], &Device::Cpu);
    /// let e = table.embedding(&ids);
    /// assert_eq!(e.shape(), &[3, 2]);
    /// assert_eq!(e.to_vec::<f32>().unwrap(), vec![2.0, 2.5, 2.0, 2.5, 0.0, 0.5]);
    /// ```
    ///
    /// # Panics
    /// If `self` is not 2-d, `ids` is not of an index dtype, or the tensors
    /// are on different devices.
    #[track_caller]
    pub fn embedding(&self, ids: &Tensor) -> Tensor {
        same_device("embedding", &[self.device(), ids.device()]);
        check_index("embedding", ids);
        assert!(
            self.ndim() == 2,
            "embedding: the table must be 2-d [vocab, dim], got shape {:?}",
            self.shape()
        );
        let mut shape: Shape = ids.shape().into();
        shape.push(self.shape()[1]);
        self.index_select(0, &ids.flatten()).reshape(shape)
    }
}
