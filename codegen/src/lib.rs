//! smelt-codegen: the kernel IR, the index-expression simplifier, and the
//! backends that turn a kernel into something that runs (the CPU
//! interpreter; PTX for NVIDIA GPUs).

#![warn(missing_docs)]

pub mod attention;
mod attention_cpu;
pub mod bounds;
pub mod column;
pub mod convert;
pub mod cpu;
mod dense;
pub mod dims;
pub mod dtype;
pub mod env;
pub mod exec;
pub mod expr;
mod extract;
pub mod fits;
pub mod fnv;
pub mod fp8;
pub mod host_alloc;
pub mod int_ops;
pub mod interp;
pub mod ir;
#[cfg(feature = "llvm-jit")]
pub mod llvm;
pub mod matmul_cpu;
pub mod ops;
mod outs;
pub mod philox;
pub mod ptx;
pub mod rng;
pub mod scan;
pub mod sort;

/// Hash of this crate's sources (FNV-1a 64, from `build.rs`): keys caches
/// of generated code, so any change to the IR, simplifier or emitter
/// makes them miss instead of reusing stale code.
pub const CODEGEN_HASH: &str = env!("SMELT_CODEGEN_HASH");

pub use dims::{Axes, Dims, Ranges, Shape, Strides};
pub use dtype::DType;
pub use expr::{Cond, Expr};
pub use ir::{
    Arg, Gather, Inst, Kernel, KernelKind, Node, Store, StoreKind, Val, INST_BUDGET, PARAM_BYTES,
    PARAM_BYTES_LIMIT,
};
pub use ops::{BinaryOp, ReduceOp, UnaryOp};
pub use scan::ScanOp;
pub use sort::{SortOp, SortPart};
