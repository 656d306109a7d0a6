//! Which matmul kernels the fast path takes, and how each product's loop
//! variables split into batch, rows, columns and the reduction.

use crate::extract::vars_read;
use crate::ir::{Inst, Kernel, KernelKind, Val};
use crate::{BinaryOp, DType, ReduceOp};

/// One product `Reduce(Sum, Mul(x, y))` of a matmul kernel.
pub(super) struct Product {
    /// The `Reduce` instruction.
    pub reduce: Val,
    /// Its dtype (`F32` or `F64`): the accumulation and the GEMM's type.
    pub dtype: DType,
    /// The two factors (element-level values).
    pub x: Val,
    pub y: Val,
    /// Kept variables both factors read (`batch`), `x` only (`m`), and the
    /// rest (`n`: `y` only, or neither, a broadcast axis of the result).
    pub batch: Vec<usize>,
    pub m: Vec<usize>,
    pub n: Vec<usize>,
}

impl Product {
    /// The kept variables in the order of the product's own row-major
    /// result layout, `[batch.., m.., n..]`.
    pub fn result_order(&self) -> Vec<usize> {
        [&self.batch[..], &self.m, &self.n].concat()
    }
}

/// Every product of `k` if the fast path takes it: a matmul kernel over a
/// non-empty domain without indirect loads whose reductions are all float
/// sums of products (f32 or f64 accumulators; several matmuls in one
/// kernel, such as SwiGLU's, are several products over the same reduced
/// variables). `None` leaves the kernel to the generic path.
pub(super) fn products(k: &Kernel) -> Option<Vec<Product>> {
    // An empty domain does no work worth a fast path; indirect loads need
    // the generic path's index checks; the GEMM reads and writes the
    // little-endian byte buffers in place, as host values.
    let skip = k.ranges.contains(&0) || k.has_indirect() || cfg!(target_endian = "big");
    if k.kind != KernelKind::Matmul || skip {
        return None;
    }
    let mut out = Vec::new();
    for (reduce, node) in k.insts.iter().enumerate() {
        let Inst::Reduce(op, prod) = node.inst else {
            continue;
        };
        let dtype = node.dtype;
        let Inst::Binary(BinaryOp::Mul, x, y) = k.insts[prod].inst else {
            return None;
        };
        let float = matches!(dtype, DType::F32 | DType::F64);
        if op != ReduceOp::Sum || !float || k.insts[prod].dtype != dtype {
            return None;
        }
        out.push(split(k, reduce, dtype, x, y));
    }
    (!out.is_empty()).then_some(out)
}

fn split(k: &Kernel, reduce: Val, dtype: DType, x: Val, y: Val) -> Product {
    let (vx, vy) = (vars_read(k, x), vars_read(k, y));
    let kept = 0..k.n_kept;
    let batch = kept
        .clone()
        .filter(|v| vx.contains(v) && vy.contains(v))
        .collect();
    let m = kept
        .clone()
        .filter(|v| vx.contains(v) && !vy.contains(v))
        .collect();
    let n = kept.filter(|v| !vx.contains(v)).collect();
    Product {
        reduce,
        dtype,
        x,
        y,
        batch,
        m,
        n,
    }
}
