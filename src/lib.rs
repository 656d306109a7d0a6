//! # smelt
//!
//! NumPy-style tensors in Rust whose ops are recorded lazily and fused into
//! as few kernels as possible when you call [`Tensor::realize`] (or read a
//! result). The CPU backend interprets the generated kernel IR.
//!
//! ```
//! use smelt::{Device, DType, Tensor};
//! let dev = Device::Cpu;
//! let x = Tensor::randn([64, 128], DType::F32, 0, &dev);
//! let e = (&x - x.max_keepdim(1)).exp();
//! let y = &e / e.sum_keepdim(1); // nothing has run yet
//! y.realize().unwrap();
//! let row: f32 = y.sum(1).to_vec::<f32>().unwrap()[0];
//! assert!((row - 1.0).abs() < 1e-5);
//! ```
//!
//! Shape errors (mismatched shapes, bad axes, bad slices) are programming
//! errors: they panic where the op is recorded, with the op, the shapes
//! and the axis in the message. Anything that can fail at run time
//! returns [`Result`].

mod composite;
mod creation;
mod device;
mod display;
mod element;
mod elementwise;
mod error;
mod linalg;
mod movement;
mod operators;
mod reduce;
mod rng;
pub mod runtime;
mod shape;
mod tensor;
pub mod viz;

pub use device::Device;
pub use element::Element;
pub use elementwise::{where_, Operand};
pub use error::{Error, Result};
pub use linalg::Precision;
pub use movement::{NewAxis, SliceArg};
pub use shape::{IntoAxes, IntoShape};
pub use smelt_codegen::{BinaryOp, DType, Kernel, KernelKind, ReduceOp, UnaryOp};
pub use smelt_fusion::{Fusion, Schedule};
pub use tensor::{realize_all, Tensor};
