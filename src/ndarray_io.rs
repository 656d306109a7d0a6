//! Conversions between tensors and `ndarray` arrays (cargo feature
//! `ndarray`).
//!
//! ```
//! use smelt::{Device, Tensor};
//! let a = ndarray::arr2(&[[1.0f32, 2.0], [3.0, 4.0]]);
//! let t = Tensor::from_ndarray(&a.t(), &Device::Cpu); // any layout
//! assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
//! let back = t.to_ndarray::<f32>().unwrap();
//! assert_eq!(back, a.t().into_dyn());
//! ```

use crate::{Device, Element, Result, Tensor};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

impl Tensor {
    /// A tensor with `a`'s shape and elements (in its logical row-major
    /// order, whatever its memory layout), placed on `device` when first
    /// realized.
    pub fn from_ndarray<T, S, D>(a: &ArrayBase<S, D>, device: &Device) -> Tensor
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        Tensor::from_vec(a.iter().copied().collect(), a.shape(), device)
    }

    /// The tensor's values as a row-major `ArrayD<T>` (realizing it, then
    /// converting as [`Tensor::to_vec`] does).
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>> {
        let v = self.to_vec::<T>()?;
        Ok(ArrayD::from_shape_vec(IxDyn(self.shape()), v)
            .expect("the tensor's shape holds its elements"))
    }
}
