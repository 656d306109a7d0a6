//! `tril` and `triu`: a `where` whose condition compares the column and
//! row coordinates, both `iota`s viewed along their axis. A kernel that
//! reads the result computes the mask from its own loop coordinates, so
//! the mask never exists in memory and `x.tril(0).sum(..)` reads `x` once.

use crate::{DType, Tensor};
use smelt_codegen::dims;

/// Which side of the diagonal a triangular op keeps.
#[derive(Clone, Copy)]
enum Keep {
    /// On and below diagonal `k`: `col - row <= k`.
    Lower,
    /// On and above diagonal `k`: `col - row >= k`.
    Upper,
}

impl Tensor {
    /// The lower triangle of the matrices over the last two axes: elements
    /// with `col - row <= k` are kept, the others are 0 (PyTorch `tril`;
    /// `k > 0` keeps diagonals above the main one, `k < 0` drops some
    /// below it; a `k` past the matrix keeps everything or nothing).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec((1..=9).collect::<Vec<i32>>(), [3, 3], &Device::Cpu);
    /// assert_eq!(x.tril(0).to_vec::<i32>().unwrap(), vec![1, 0, 0, 4, 5, 0, 7, 8, 9]);
    /// assert_eq!(x.tril(-1).to_vec::<i32>().unwrap(), vec![0, 0, 0, 4, 0, 0, 7, 8, 0]);
    /// ```
    ///
    /// # Panics
    /// If the tensor has fewer than 2 axes or a matrix axis has more than
    /// `i32::MAX` elements.
    #[track_caller]
    pub fn tril(&self, k: isize) -> Tensor {
        self.triangle("tril", k, Keep::Lower)
    }

    /// The upper triangle of the matrices over the last two axes: elements
    /// with `col - row >= k` are kept, the others are 0 (PyTorch `triu`).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec((1..=6).collect::<Vec<i32>>(), [2, 3], &Device::Cpu);
    /// assert_eq!(x.triu(1).to_vec::<i32>().unwrap(), vec![0, 2, 3, 0, 0, 6]);
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::tril`].
    #[track_caller]
    pub fn triu(&self, k: isize) -> Tensor {
        self.triangle("triu", k, Keep::Upper)
    }

    #[track_caller]
    fn triangle(&self, op: &str, k: isize, keep: Keep) -> Tensor {
        let shape = self.shape();
        assert!(
            shape.len() >= 2,
            "{op}: expected a tensor with at least 2 axes, got shape {shape:?}"
        );
        let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        assert!(
            i32::try_from(m.max(n)).is_ok(),
            "{op}: matrix axes of shape {shape:?} exceed i32::MAX, the coordinates' range"
        );
        let dev = self.device();
        let row = Tensor::iota(dims![m], &dev).reshape([m, 1]);
        let col = Tensor::iota(dims![n], &dev).reshape([1, n]);
        // col - row lies in [-(m - 1), n - 1]; a k beyond it acts like the
        // nearest value past that range, which fits an I32.
        let k = k.clamp(-(m as isize), n as isize) as i32;
        let diag = col - row;
        let mask = match keep {
            Keep::Lower => diag.le(k),
            Keep::Upper => diag.ge(k),
        };
        let zero = Tensor::zeros([0usize; 0], self.dtype(), &dev);
        debug_assert_eq!(mask.dtype(), DType::Bool);
        mask.where_(self, &zero)
    }
}
