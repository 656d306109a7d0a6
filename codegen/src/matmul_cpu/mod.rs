//! The CPU fast path for matmul kernels.
//!
//! A [`KernelKind::Matmul`] kernel computes, per row (kept point), one
//! `Reduce(Sum, Mul(x, y))` in f32 followed by a row-level epilogue. The
//! generic interpreter evaluates that product element by element; here it is
//! split in three:
//!
//! 1. each operand's sub-DAG (`x`, `y`: loads through any view, fused
//!    casts or scales) is evaluated by the interpreter into a packed f32
//!    matrix over its own variables: `x` over `[batch.., m.., k..]`, `y`
//!    over `[batch.., n.., k..]`, where `batch` are the kept variables both
//!    read, `m` those only `x` reads and `n` the rest;
//! 2. a cache-blocked GEMM (the `gemm` module) multiplies them per batch and scatters
//!    the sums into one f32 value per row;
//! 3. the epilogue (everything the stores need, the `Reduce` replaced by a
//!    load of those row values) runs through the interpreter.
//!
//! The GEMM accumulates in f32 in ascending k (the generic interpreter's
//! `Reduce` sums pairwise: both agree to f32 rounding). Kernels of
//! another shape (integer matmuls, several reductions, element-level
//! stores, empty dimensions) return `None` and take the generic path.

mod gemm;

use crate::dense;
use crate::extract::{dense_kernel, epilogue, vars_read};
use crate::host_alloc::{filled, AllocError};
use crate::interp::{self, InterpError};
use crate::ir::{Inst, Kernel, Val};
use crate::DType;

/// Runs `kernel` with the fast path if it applies (see the module docs);
/// `None` means the caller must interpret it generically. The arguments
/// are [`interp::run`]'s.
pub fn try_run(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Option<Result<(), InterpError>> {
    if kernel.has_indirect() {
        return None; // the generic interpreter checks indices
    }
    let mm = Matmul::recognise(kernel)?;
    let epilogue = epilogue(kernel, mm.reduce, DType::F32)?;
    let (xk, yk) = (
        mm.operand(kernel, mm.x, &mm.m)?,
        mm.operand(kernel, mm.y, &mm.n)?,
    );
    Some((|| {
        let x = dense::eval::<f32>(&xk, inputs, scalars)?;
        let y = dense::eval::<f32>(&yk, inputs, scalars)?;
        let sums = mm.product(kernel, &x, &y)?;
        let mut ins = inputs.to_vec();
        ins.push(&sums);
        interp::run(&epilogue, &ins, scalars, outputs)
    })())
}

/// The recognised structure of a matmul kernel.
struct Matmul {
    /// The `Reduce` instruction and its two factors.
    reduce: Val,
    x: Val,
    y: Val,
    /// Kept variables read by both factors, by `x` only, and the others.
    batch: Vec<usize>,
    m: Vec<usize>,
    n: Vec<usize>,
    /// The reduced variables.
    k: Vec<usize>,
}

impl Matmul {
    fn recognise(k: &Kernel) -> Option<Matmul> {
        let (reduce, x, y) = k.matmul_product()?;
        let prod = match k.insts[reduce].inst {
            Inst::Reduce(_, p) => p,
            _ => unreachable!("matmul_product returns a reduction"),
        };
        let f32s = [k.insts[prod].dtype, k.insts[x].dtype, k.insts[y].dtype];
        if f32s.iter().any(|d| *d != DType::F32) {
            return None;
        }
        let (vx, vy) = (vars_read(k, x), vars_read(k, y));
        let kept = 0..k.n_kept;
        let batch: Vec<usize> = kept
            .clone()
            .filter(|v| vx.contains(v) && vy.contains(v))
            .collect();
        let m: Vec<usize> = kept
            .clone()
            .filter(|v| vx.contains(v) && !vy.contains(v))
            .collect();
        let n = kept.filter(|v| !vx.contains(v)).collect();
        Some(Matmul {
            reduce,
            x,
            y,
            batch,
            m,
            n,
            k: (k.n_kept..k.ranges.len()).collect(),
        })
    }

    /// A kernel writing factor `root` as a dense f32 array over
    /// `[batch.., side.., k..]` (row-major).
    fn operand(&self, k: &Kernel, root: Val, side: &[usize]) -> Option<Kernel> {
        let old: Vec<usize> = [&self.batch[..], side, &self.k].concat();
        dense_kernel(k, root, &old, DType::F32)
    }

    /// Multiplies the packed factors per batch; returns the row sums as f32
    /// bytes in row-major order of the kept variables.
    fn product(&self, k: &Kernel, x: &[f32], y: &[f32]) -> Result<Vec<u8>, InterpError> {
        let size = |vs: &[usize]| vs.iter().map(|v| k.ranges[*v] as usize).product::<usize>();
        let (m, n, kk) = (size(&self.m), size(&self.n), size(&self.k));
        // Row offset of each batch / m / n position: the kept variables'
        // row-major strides, gathered per group.
        let mut stride = vec![0usize; k.n_kept];
        let mut s = 1;
        for v in (0..k.n_kept).rev() {
            stride[v] = s;
            s *= k.ranges[v] as usize;
        }
        let offsets = |vs: &[usize]| -> Vec<usize> {
            let mut offs = vec![0usize];
            for v in vs {
                let (r, st) = (k.ranges[*v] as usize, stride[*v]);
                offs = offs
                    .iter()
                    .flat_map(|o| (0..r).map(move |i| o + i * st))
                    .collect();
            }
            offs
        };
        let (boffs, moffs, noffs) = (offsets(&self.batch), offsets(&self.m), offsets(&self.n));
        // Sized by the user's matrices: a failure is an error, not an abort.
        let mut sums = filled(k.rows(), 0f32)?;
        let mut c = filled(m.checked_mul(n).ok_or(AllocError { bytes: None })?, 0f32)?;
        for (b, boff) in boffs.iter().enumerate() {
            c.fill(0.0);
            let g = gemm::Gemm {
                m,
                n,
                k: kk,
                a: &x[b * m * kk..][..m * kk],
                bt: &y[b * n * kk..][..n * kk],
            };
            g.run(&mut c);
            for (crow, moff) in c.chunks_exact(n).zip(&moffs) {
                for (v, noff) in crow.iter().zip(&noffs) {
                    sums[boff + moff + noff] = *v;
                }
            }
        }
        dense::to_bytes(&sums)
    }
}
