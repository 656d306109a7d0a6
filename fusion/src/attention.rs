//! The attention fusion rule: finds `softmax_j(l(q @ kt)) @ v` in the
//! graph, so the planner can compute it in one kernel that never holds the
//! score matrix (see docs/ARCHITECTURE.md, "Attention").
//!
//! Taken: an output matmul `p @ v` whose left operand is, through views
//! that are the identity and float casts, `e / sum_j(e)` with
//! `e = exp(l - max_j(l))` (both reductions over the last axis, keepdim,
//! broadcast back; `Tensor::softmax` and the same written by hand), where
//! the logits `l` reach a score matmul `q @ kt` of `l`'s shape through
//! elementwise ops and views (a scale, an additive mask, a `where` from
//! index comparisons or a bool mask, casts).
//!
//! Whether the logits are causally masked (keys a kernel may skip) is found
//! later, on the kernel's IR (`smelt_codegen::attention::causal`), where
//! `arange`'s coordinates and the `-inf` fill are visible.

use crate::domain::AttentionDomain;
use crate::graph::{NodeRef, Op};
use crate::schedule::{AttentionFusion, Planning, Target};
use crate::view::{ShapeTracker, View};
use rustc_hash::FxHashMap;
use smallvec::smallvec;
use smelt_codegen::ptx::ATTENTION_MMA_MAX_DIM;
use smelt_codegen::{BinaryOp, DType, ReduceOp, UnaryOp};

/// Head dims the fused kernel takes: the GPU's tensor-core kernel holds
/// a warp's `16 x dv` output in registers (128 a lane at 256) and its
/// FMA kernel's tiles must fit 48 KiB of shared memory.
pub const MAX_HEAD_DIM: usize = 256;

/// A recognised attention.
pub struct Attention {
    /// What identifies its kernel's domain.
    pub domain: AttentionDomain,
    /// The softmax's input (logits), `[batch.., lq, lk]`.
    pub logit: NodeRef,
    /// The score matmul's operands and the value operand.
    pub q: NodeRef,
    /// See `q`.
    pub kt: NodeRef,
    /// See `q`.
    pub v: NodeRef,
    /// Nodes only the fused kernel computes (the softmax, the score matmul
    /// and every node between the logits and the scores): if the planner
    /// materializes one of them, the attention is planned unfused.
    pub interior: Vec<u64>,
    /// The output matmul's left operand (the softmax, perhaps cast), which
    /// a plan without this fusion materializes.
    pub probs: NodeRef,
}

/// Score elements above which attention is planned fused on any target
/// by default: the 3-kernel plan's score matrix would hold more than 2^31
/// elements (8 GiB in `f32`, and past `i32` element offsets).
const MAX_SCORES: usize = 1 << 31;

/// The fraction of device memory (1 / this) that the 3-kernel plan's
/// score-sized buffers may take before a GPU plans attention fused:
/// beyond it they crowd out the operands, the outputs and everything
/// else the program holds.
const GPU_MEMORY_SHARE: u64 = 4;

/// Scores (query rows times keys, all heads) past which the CPU plans
/// attention fused by default: below, the 3-kernel plan's matmuls (the
/// `gemm` crate, all cores) and softmax (the executor) are faster than
/// the fused path's per-row dot products (8 heads of 512x512, d = 64, on
/// 2 cores: 13.8 ms against 41; on 16 cores 6.5 against 150 before the
/// fused path ran its blocks in parallel; BENCHMARKS.md, "CPU"); above,
/// the two score-sized buffers (256 MiB each in `f32`) cost more memory
/// than the plan is worth.
const CPU_MAX_SCORES: usize = 1 << 26;

/// Whether the planner with `options` fuses the recognised attention `a`.
pub fn fuse(a: &Attention, options: &Planning) -> bool {
    match options.attention {
        AttentionFusion::On => true,
        AttentionFusion::Off => false,
        AttentionFusion::Auto => prefer_fused(a, options.target),
    }
}

/// Whether the fused kernel is the better plan for `a` on `target`.
///
/// On a GPU, wherever the tensor-core attention kernel applies (`q`, `k`
/// and `v` all `F16` or all `BF16`, head dims up to
/// [`ATTENTION_MMA_MAX_DIM`]): measured on an H100 it is 1.35-3.2x faster
/// than the 3-kernel plan (two tensor-core matmuls and a softmax row
/// kernel) on prefill shapes, 1.4-1.6x on decode with caches up to 32768
/// (level or 0.92x at 131072; BENCHMARKS.md, "Attention").
/// Other dtypes get the FMA attention kernel, several times slower than
/// the 3-kernel plan, so they fuse only where that plan would hold too
/// large a score matrix: more than [`MAX_SCORES`] elements, or its two
/// score-sized buffers (the logits and the probabilities) above a
/// [`GPU_MEMORY_SHARE`]th of the device's memory.
///
/// On the CPU, past [`CPU_MAX_SCORES`] scores.
pub fn prefer_fused(a: &Attention, target: Target) -> bool {
    let scores = a.logit.numel();
    let too_big = scores > MAX_SCORES;
    match target {
        Target::Cpu => scores > CPU_MAX_SCORES,
        Target::Gpu { memory } => {
            let bytes = (scores as u64)
                .saturating_mul((a.logit.dtype().size() + a.probs.dtype().size()) as u64);
            tensor_cores(a) || too_big || (memory > 0 && bytes > memory / GPU_MEMORY_SHARE)
        }
    }
}

/// Whether `a`'s GPU kernel is the tensor-core one: its operands share a
/// half dtype and its head dims fit.
fn tensor_cores(a: &Attention) -> bool {
    let dt = a.q.dtype();
    let dim = |n: &NodeRef, axis: usize| n.shape().get(axis).copied().unwrap_or(0);
    let rank = a.q.shape().len();
    matches!(dt, DType::F16 | DType::BF16)
        && a.kt.dtype() == dt
        && a.v.dtype() == dt
        && rank >= 2
        && dim(&a.q, rank - 1) <= ATTENTION_MMA_MAX_DIM
        && dim(&a.v, rank - 1) <= ATTENTION_MMA_MAX_DIM
}

/// Follows views and float-to-float casts down from `n`; the node reached
/// and whether the views between compose to the identity on `n`'s shape.
fn through_casts(n: &NodeRef, seen: &mut Vec<u64>) -> (NodeRef, bool) {
    let mut t = ShapeTracker::contiguous(n.shape());
    let mut x = n.clone();
    loop {
        let below = match &*x.op_ref() {
            Op::View(src, st) => {
                t = st.compose(&t);
                src.clone()
            }
            Op::Cast(src) if src.dtype().is_float() && x.dtype().is_float() => src.clone(),
            _ => break,
        };
        seen.push(x.id());
        x = below;
    }
    let identity = x.shape() == n.shape() && t.equivalent(&ShapeTracker::contiguous(x.shape()));
    (x, identity)
}

/// If `n` is, through views, a keepdim reduction `op` over the last axis
/// broadcast back along it, that reduction's source.
fn row_reduce(n: &NodeRef, op: ReduceOp, seen: &mut Vec<u64>) -> Option<NodeRef> {
    let mut t = ShapeTracker::contiguous(n.shape());
    let mut x = n.clone();
    loop {
        let below = match &*x.op_ref() {
            Op::View(src, st) => {
                t = st.compose(&t);
                src.clone()
            }
            Op::Reduce(o, src, axes) => {
                let last = src.shape().len().checked_sub(1)?;
                if *o != op || axes.as_slice() != [last] || src.shape() != n.shape() {
                    return None;
                }
                // The reduction's result read at each row, whatever the
                // position along the row.
                let mut strides = crate::view::contiguous_strides(x.shape());
                strides[last] = 0;
                let want = ShapeTracker {
                    views: smallvec![View {
                        shape: n.shape().into(),
                        strides,
                        offset: 0,
                        mask: None,
                    }],
                };
                seen.push(x.id());
                return t.equivalent(&want).then(|| src.clone());
            }
            _ => return None,
        };
        seen.push(x.id());
        x = below;
    }
}

/// The binary op `op` of `n`, if it is one.
fn binary(n: &NodeRef, op: BinaryOp) -> Option<(NodeRef, NodeRef)> {
    match &*n.op_ref() {
        Op::Binary(o, a, b) if *o == op => Some((a.clone(), b.clone())),
        _ => None,
    }
}

/// Recognises the attention whose output matmul is `o` (see the module
/// docs); `None` when `o` is not one.
pub fn recognise(o: &NodeRef) -> Option<Attention> {
    let (a, v) = match &*o.op_ref() {
        Op::Matmul(a, v) => (a.clone(), v.clone()),
        _ => return None,
    };
    let float = |n: &NodeRef| n.dtype().is_float();
    if !float(o) || o.realized().is_some() {
        return None;
    }
    let mut interior = Vec::new();
    let (probs, identity) = through_casts(&a, &mut interior);
    if !identity {
        return None;
    }
    // probs = e / sum_j(e), e = exp(l - max_j(l))
    let (e, z) = binary(&probs, BinaryOp::Div)?;
    if row_reduce(&z, ReduceOp::Sum, &mut interior)?.id() != e.id() {
        return None;
    }
    let x = match &*e.op_ref() {
        Op::Unary(UnaryOp::Exp, x) => x.clone(),
        _ => return None,
    };
    let (logit, m) = binary(&x, BinaryOp::Sub)?;
    if row_reduce(&m, ReduceOp::Max, &mut interior)?.id() != logit.id() {
        return None;
    }
    interior.extend([probs.id(), e.id(), x.id()]);
    if logit.shape() != a.shape() || !float(&logit) {
        return None;
    }
    let (score, between) = score_matmul(&logit)?;
    interior.extend(between);
    let (q, kt) = match &*score.op_ref() {
        Op::Matmul(q, kt) => (q.clone(), kt.clone()),
        _ => unreachable!("score_matmul returns a matmul"),
    };
    let acc = |n: &NodeRef| n.dtype().compute_float();
    let r = q.shape().len();
    let dims = [q.shape()[r - 1], v.shape()[r - 1]];
    let sizes_ok = o
        .shape()
        .iter()
        .chain(q.shape())
        .chain(v.shape())
        .all(|n| *n > 0);
    if !float(&score)
        || acc(&score) != acc(o)
        || !sizes_ok
        || dims.iter().any(|d| *d > MAX_HEAD_DIM)
    {
        return None;
    }
    Some(Attention {
        domain: AttentionDomain {
            output: o.id(),
            score: score.id(),
            q: q.shape().into(),
            kt: kt.shape().into(),
            v: v.shape().into(),
        },
        logit,
        q,
        kt,
        v,
        interior,
        probs: a,
    })
}

/// The score matmul below `logit`: the first matmul of `logit`'s shape
/// reached through elementwise ops and views (breadth first), with every
/// node on a path between them.
fn score_matmul(logit: &NodeRef) -> Option<(NodeRef, Vec<u64>)> {
    // The elementwise subgraph above the matmuls, with each node's sources.
    let mut below: FxHashMap<u64, Vec<NodeRef>> = FxHashMap::default();
    let mut queue = std::collections::VecDeque::from([logit.clone()]);
    let mut score = None;
    while let Some(n) = queue.pop_front() {
        if below.contains_key(&n.id()) {
            continue;
        }
        let elementwise = matches!(
            &*n.op_ref(),
            Op::View(..) | Op::Unary(..) | Op::Binary(..) | Op::Where(..) | Op::Cast(..)
        );
        let is_matmul = matches!(&*n.op_ref(), Op::Matmul(..));
        if is_matmul && score.is_none() && n.shape() == logit.shape() {
            score = Some(n.clone());
        }
        let srcs: Vec<NodeRef> = if elementwise {
            n.srcs().into_iter().collect()
        } else {
            Vec::new()
        };
        queue.extend(srcs.iter().cloned());
        below.insert(n.id(), srcs);
    }
    let score = score?;
    // Whether each node reaches the score: a post-order walk with an
    // explicit stack (deep chains must not recurse).
    let mut reach: FxHashMap<u64, bool> = FxHashMap::default();
    reach.insert(score.id(), true);
    let mut stack = vec![(logit.clone(), false)];
    while let Some((n, expanded)) = stack.pop() {
        if !expanded && reach.contains_key(&n.id()) {
            continue;
        }
        let srcs = &below[&n.id()];
        if expanded {
            let r = srcs.iter().any(|s| reach[&s.id()]);
            reach.insert(n.id(), r);
        } else {
            stack.push((n, true));
            stack.extend(srcs.iter().map(|s| (s.clone(), false)));
        }
    }
    let between = reach.into_iter().filter(|(_, r)| *r).map(|(id, _)| id);
    Some((score, between.collect()))
}
