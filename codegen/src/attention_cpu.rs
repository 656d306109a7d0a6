//! The CPU path of attention kernels ([`crate::KernelKind::Attention`]).
//!
//! 1. `q`, `k` and `v` (each part's sub-DAG: loads through any view, fused
//!    casts) are evaluated by the interpreter into dense arrays of the
//!    accumulation dtype, `[batch, i, d]`, `[batch, j, d]`, `[batch, j, e]`;
//! 2. per batch and block of query rows, the scores (`Dot`, `d`
//!    ascending) are computed here and the logit part (scale, masks) runs
//!    through the interpreter over the block, reading them;
//! 3. each row's softmax is exact, as the unfused graph computes it (the
//!    row's maximum, `exp(l - max)`, their sum), and its weighted sum of
//!    `v` rows is divided by that sum; under a causal mask only over the
//!    keys the row sees (the others' scores are not computed either);
//! 4. the epilogue (the stores, the `Attend` replaced by a load of the
//!    outputs) runs through the interpreter.
//!
//! Heads and blocks of query rows run on all cores (rayon); each block's
//! values are computed as one thread would, so results do not depend on
//! the thread count. Memory stays `O(threads * rows_per_block * keys)`
//! beyond the packed operands: the score matrix of a whole head is never
//! held.

use crate::attention::Attention;
use crate::dense::{self, Acc};
use crate::expr::{Cond, Expr};
use crate::extract::{copy_insts, dense_kernel, epilogue, row_major, RowInput, VarMap};
use crate::host_alloc::filled;
use crate::interp::{self, InterpError};
use crate::ir::{Arg, Inst, Kernel, KernelKind, Node, Store};
use crate::DType;
use rayon::prelude::*;

/// Logits computed per interpreter call: enough to amortise building the
/// block's kernel, few enough to stay in cache.
const BLOCK_LOGITS: usize = 1 << 16;

/// Runs an attention kernel; the arguments are [`interp::run`]'s.
///
/// # Errors
/// A kernel that is not a well-formed attention kernel, an index outside a
/// buffer, or a host allocation that fails.
pub fn run(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Result<(), InterpError> {
    let a = kernel.attention().map_err(InterpError)?;
    // As the GPU's tensor-core kernel evaluates it (`Attention::f32_logits`).
    let kernel = &a.f32_logits(kernel);
    match a.acc {
        DType::F64 => run_in::<f64>(kernel, &a, inputs, scalars, outputs),
        _ => run_in::<f32>(kernel, &a, inputs, scalars, outputs),
    }
}

fn malformed(k: &Kernel, what: &str) -> InterpError {
    InterpError(format!("attention kernel {}: {what}", k.name))
}

fn run_in<A: Acc + Send + Sync>(
    k: &Kernel,
    a: &Attention,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Result<(), InterpError> {
    let vars = &a.vars;
    let size = |v: usize| k.ranges[v] as usize;
    let batch: Vec<usize> = vars.batch.clone().collect();
    let nb: usize = batch.iter().map(|v| size(*v)).product();
    let (lq, dv, lk, dd) = (size(vars.i), size(vars.e), size(vars.j), size(vars.d));
    let part = |root, own: &[usize]| {
        let old = [&batch[..], own].concat();
        dense_kernel(k, root, &old, A::DTYPE).ok_or_else(|| malformed(k, "a part is not dense"))
    };
    let q = dense::eval::<A>(&part(a.q, &[vars.i, vars.d])?, inputs, scalars)?;
    let kk = dense::eval::<A>(&part(a.k, &[vars.j, vars.d])?, inputs, scalars)?;
    let v = dense::eval::<A>(&part(a.v, &[vars.j, vars.e])?, inputs, scalars)?;
    let mut out = filled(nb * lq * dv, A::ZERO)?;
    let rows = (BLOCK_LOGITS / lk.max(1)).clamp(1, lq.max(1));
    // Keys `0..visible(i)` of row `i`: under a causal mask the others'
    // logits are `-inf` and add nothing (see `Attention::causal`), so
    // neither their scores nor their terms are computed. A row with no
    // visible key gets `0 / 0`, NaN, as unfused.
    let visible = |i: usize| match a.causal {
        Some(c) => (i as i64 + c.offset + 1).clamp(0, lk as i64) as usize,
        None => lk,
    };
    // Heads, and blocks of rows within a head, go to threads: each block
    // writes only its own rows of `out`.
    out.par_chunks_mut((lq * dv).max(1))
        .enumerate()
        .try_for_each(|(b, head)| {
            // The batch coordinates of head `b` (row-major).
            let mut coords = vec![0i64; batch.len()];
            let mut rest = b;
            for (c, v) in coords.iter_mut().zip(&batch).rev() {
                *c = (rest % size(*v)) as i64;
                rest /= size(*v);
            }
            let (qb, kb, vb) = (
                &q[b * lq * dd..][..lq * dd],
                &kk[b * lk * dd..][..lk * dd],
                &v[b * lk * dv..][..lk * dv],
            );
            head.par_chunks_mut(rows * dv)
                .enumerate()
                .try_for_each(|(blk, orows)| {
                    let (i0, r) = (blk * rows, orows.len() / dv);
                    // Keys the block's last row sees: no row of it sees more.
                    let w = visible(i0 + r - 1);
                    let mut scores = filled(r * w, A::ZERO)?;
                    for (ii, srow) in scores.chunks_exact_mut(w.max(1)).enumerate() {
                        let qrow = &qb[(i0 + ii) * dd..][..dd];
                        let srow = &mut srow[..visible(i0 + ii)];
                        for (s, krow) in srow.iter_mut().zip(kb.chunks_exact(dd.max(1))) {
                            *s = qrow
                                .iter()
                                .zip(krow)
                                .fold(A::ZERO, |acc, (x, y)| acc + *x * *y);
                        }
                    }
                    let logits = if w == 0 {
                        // No row of the block sees a key.
                        Vec::new()
                    } else {
                        let lk_kernel = logit_kernel::<A>(k, a, &coords, (i0, r), w)?;
                        let bytes = dense::to_bytes(&scores)?;
                        let mut ins = inputs.to_vec();
                        ins.push(&bytes);
                        dense::eval::<A>(&lk_kernel, &ins, scalars)?
                    };
                    for (ii, orow) in orows.chunks_exact_mut(dv).enumerate() {
                        let n = visible(i0 + ii);
                        let l = logits.get(ii * w..ii * w + n).unwrap_or(&[]);
                        softmax_rows(l, &vb[..n * dv], orow);
                    }
                    Ok::<(), InterpError>(())
                })
        })?;
    let row = RowInput {
        val: a.attend,
        dtype: A::DTYPE,
        index: row_major(&(0..k.n_kept).collect::<Vec<_>>(), &k.ranges),
    };
    let epi = epilogue(k, &[row]).ok_or_else(|| malformed(k, "bad epilogue"))?;
    let bytes = dense::to_bytes(&out)?;
    let mut ins = inputs.to_vec();
    ins.push(&bytes);
    interp::run(&epi, &ins, scalars, outputs)
}

/// `o = sum_j softmax_j(l) v[j]` for one row, as the unfused graph
/// computes the softmax: the maximum (NaN if any logit is), `exp(l - max)`
/// (NaN everywhere when the maximum is infinite), their sum; the weighted
/// sum of `v` rows is divided by it once.
fn softmax_rows<A: Acc>(l: &[A], v: &[A], o: &mut [A]) {
    let mut m = A::NEG_INF;
    for x in l {
        // Once NaN, no comparison is true: the maximum stays NaN.
        if x.is_nan() || *x > m {
            m = *x;
        }
    }
    let dv = o.len();
    let mut z = A::ZERO;
    o.fill(A::ZERO);
    for (x, vrow) in l.iter().zip(v.chunks_exact(dv.max(1))) {
        let p = (*x - m).exp();
        z = z + p;
        for (acc, y) in o.iter_mut().zip(vrow) {
            *acc = *acc + p * *y;
        }
    }
    for acc in o.iter_mut() {
        *acc = *acc / z;
    }
}

/// The logit part over rows `i0..i0 + r` and keys `0..w` of the head at
/// batch `coords`: a kernel over `[row, j]` reading the scores as its
/// last input (`[r, w]`, row-major) and writing the logits there.
fn logit_kernel<A: Acc>(
    k: &Kernel,
    a: &Attention,
    coords: &[i64],
    (i0, r): (usize, usize),
    w: usize,
) -> Result<Kernel, InterpError> {
    let vars = &a.vars;
    let lk = w as i64;
    let ranges: crate::Ranges = [r as i64, lk].into_iter().collect();
    let mut to: Vec<Option<Expr>> = vec![None; k.ranges.len()];
    for (v, c) in vars.batch.clone().zip(coords) {
        to[v] = Some(Expr::constant(*c));
    }
    to[vars.i] = Some(Expr::var(0).add_const(i0 as i64));
    to[vars.j] = Some(Expr::var(1));
    let map = VarMap {
        to: &to,
        ranges: &ranges,
    };
    let scores = Node {
        inst: Inst::Load {
            input: k.inputs.len(),
            index: row_major(&[0, 1], &ranges),
            valid: Cond::always(),
        },
        dtype: A::DTYPE,
    };
    let (insts, new_of) = copy_insts(k, &[a.logit], &map, &[(a.dot, scores)])
        .ok_or_else(|| malformed(k, "the logit part reads other variables"))?;
    let len = r * lk as usize;
    let arg = Arg {
        dtype: A::DTYPE,
        len,
    };
    let mut inputs = k.inputs.clone();
    inputs.push(arg);
    Ok(Kernel {
        name: format!("{}_logits", k.name),
        kind: KernelKind::Elementwise,
        n_kept: 2,
        inputs,
        outputs: vec![arg],
        scalars: k.scalars.clone(),
        insts,
        stores: vec![Store::write(
            0,
            row_major(&[0, 1], &ranges),
            new_of[a.logit].expect("the logit is copied"),
        )],
        ranges,
    })
}
