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
//!
//! Besides tensors: [`cuda`] (is there a GPU, events, raw handles for
//! interop), [`profile`] (per-kernel times), [`stats`] (kernels run,
//! schedules planned, GPU code compiled) and [`graph`] (the recorded graph
//! and schedules, for inspection).

#![warn(missing_docs)]

mod assign;
mod bitwise;
mod composite;
mod creation;
pub mod cuda;
mod device;
mod display;
mod einsum;
mod element;
mod elementwise;
mod error;
mod fp8;
mod index;
mod indexing;
mod join;
mod linalg;
mod math;
mod matrices;
mod movement;
#[cfg(feature = "ndarray")]
mod ndarray_io;
mod norms;
pub mod npy;
mod operators;
pub mod profile;
mod random;
mod reduce;
mod runtime;
pub mod safetensors;
mod scan;
mod scatter;
mod shape;
mod sort;
pub mod stats;
mod tensor;
mod triangular;
pub mod viz;

pub use device::Device;
pub use einsum::einsum;
pub use element::Element;
pub use elementwise::{where_, Operand};
pub use error::{Error, Result};
pub use linalg::Precision;
pub use movement::{NewAxis, SliceArg};
pub use shape::{IntoAxes, IntoShape};
/// A tensor's shape: up to six sizes inline (no allocation), more on the
/// heap; it derefs to `&[usize]`. [`Tensor::shape`] returns the slice.
///
/// ```
/// use smelt::{DType, Device, Shape, Tensor};
/// let s: Shape = Tensor::zeros([2, 3], DType::F32, &Device::Cpu).shape().into();
/// assert_eq!(s.iter().product::<usize>(), 6);
/// assert_eq!(Tensor::zeros(&s, DType::F32, &Device::Cpu).shape(), &[2, 3]);
/// ```
pub use smelt_codegen::Shape;
pub use smelt_codegen::{
    BinaryOp, DType, Kernel, KernelKind, ReduceOp, ScanOp, SortOp, SortPart, UnaryOp,
};
pub use smelt_fusion::{AttentionFusion, Fusion, Planning, Schedule, Target};
/// One schedule for several tensors: kernels they share run once, and
/// kernels over the same domain merge.
///
/// ```
/// use smelt::{realize_all, stats, DType, Device, Fusion, Tensor};
/// let x = Tensor::randn([64, 256], DType::F32, 0, &Device::Cpu);
/// let (mean, max) = (x.mean(1), x.max(1)); // two reductions of one input
/// let before = stats::kernels_run();
/// realize_all(&[&mean, &max], Fusion::On).unwrap();
/// assert_eq!(stats::kernels_run() - before, 1); // one pass computes both
/// assert!(mean.is_realized() && max.is_realized());
/// ```
pub use tensor::realize_all;
pub use tensor::Tensor;

/// The lazy graph behind tensors and the schedules planned from it, for
/// inspection: [`Tensor::node`] returns a [`graph::NodeRef`], and
/// [`Schedule::new`] plans the nodes of several tensors together (what
/// [`realize_all`] runs). These are the planner's own types
/// (`smelt-fusion`), re-exported so they can be named; they change with
/// the planner.
///
/// ```
/// use smelt::{graph::Op, Device, DType, Fusion, Schedule, Tensor};
/// let x = Tensor::ones([4, 8], DType::F32, &Device::Cpu);
/// let (a, b) = ((&x + 1.0).exp(), x.sum(1));
/// assert!(matches!(a.node().op(), Op::Unary(..)));
/// let both = Schedule::new(&[a.node().clone(), b.node().clone()], Fusion::On);
/// assert!(!both.items.is_empty());
/// ```
pub mod graph {
    pub use smelt_fusion::{
        BufferSpec, Node, NodeRef, Op, ScalarSpec, ScheduleItem, ShapeTracker, View,
    };
}
