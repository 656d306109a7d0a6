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

mod extract;
mod gemm;

use crate::dims::Ranges;
use crate::expr::{Cond, Expr};
use crate::host_alloc::{filled, vec_with_capacity, zeroed_bytes, AllocError};
use crate::interp::{self, InterpError};
use crate::ir::{Arg, Inst, Kernel, KernelKind, Node, Store, Val};
use crate::DType;
use extract::{copy_insts, row_major, vars_read, VarMap};

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
    let epilogue = mm.epilogue(kernel)?;
    let (xk, yk) = (
        mm.operand(kernel, mm.x, &mm.m)?,
        mm.operand(kernel, mm.y, &mm.n)?,
    );
    Some((|| {
        let x = eval_f32(&xk, inputs, scalars)?;
        let y = eval_f32(&yk, inputs, scalars)?;
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
        let ranges: Ranges = old.iter().map(|v| k.ranges[*v]).collect();
        let mut to = vec![None; k.ranges.len()];
        for (new, v) in old.iter().enumerate() {
            to[*v] = Some(new);
        }
        let map = VarMap {
            to: &to,
            ranges: &ranges,
        };
        let (insts, new_of) = copy_insts(k, &[root], &map, None)?;
        let all: Vec<usize> = (0..ranges.len()).collect();
        let len = ranges.iter().product::<i64>() as usize;
        Some(Kernel {
            name: format!("{}_operand", k.name),
            kind: KernelKind::Elementwise,
            n_kept: ranges.len(),
            inputs: k.inputs.clone(),
            outputs: vec![Arg {
                dtype: DType::F32,
                len,
            }],
            scalars: k.scalars.clone(),
            insts,
            stores: vec![Store::write(0, row_major(&all, &ranges), new_of[root]?)],
            ranges,
        })
    }

    /// The kernel's stores over its kept variables, the `Reduce` replaced by
    /// a load of an extra f32 input holding one value per row.
    fn epilogue(&self, k: &Kernel) -> Option<Kernel> {
        let ranges = &k.ranges[..k.n_kept];
        let to: Vec<Option<usize>> = (0..k.ranges.len())
            .map(|v| (v < k.n_kept).then_some(v))
            .collect();
        let map = VarMap { to: &to, ranges };
        let kept: Vec<usize> = (0..k.n_kept).collect();
        let sums = Node {
            inst: Inst::Load {
                input: k.inputs.len(),
                index: row_major(&kept, ranges),
                valid: Cond::always(),
            },
            dtype: DType::F32,
        };
        let roots: Vec<Val> = k.stores.iter().map(|s| s.value).collect();
        let (insts, new_of) = copy_insts(k, &roots, &map, Some((self.reduce, sums)))?;
        let stores = k
            .stores
            .iter()
            .map(|s| {
                let mut vs = Vec::new();
                s.index.vars(&mut vs);
                let index = s.index.substitute(&Expr::var, ranges);
                (vs.iter().all(|v| *v < k.n_kept)).then(|| {
                    Store::write(
                        s.output,
                        index,
                        new_of[s.value].expect("store values are copied"),
                    )
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let mut inputs = k.inputs.clone();
        inputs.push(Arg {
            dtype: DType::F32,
            len: k.rows(),
        });
        Some(Kernel {
            name: format!("{}_epilogue", k.name),
            kind: KernelKind::Elementwise,
            ranges: ranges.into(),
            n_kept: k.n_kept,
            inputs,
            outputs: k.outputs.clone(),
            scalars: k.scalars.clone(),
            insts,
            stores,
        })
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
        let mut bytes = vec_with_capacity(sums.len() * 4)?;
        bytes.extend(sums.iter().flat_map(|v| v.to_le_bytes()));
        Ok(bytes)
    }
}

/// Runs a one-output f32 kernel and returns its output.
fn eval_f32(k: &Kernel, inputs: &[&[u8]], scalars: &[f64]) -> Result<Vec<f32>, InterpError> {
    let mut out = zeroed_bytes(k.outputs[0].len, 4)?;
    interp::run(k, inputs, scalars, &mut [&mut out])?;
    let mut vals = vec_with_capacity(k.outputs[0].len)?;
    vals.extend(
        out.chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap())),
    );
    Ok(vals)
}
