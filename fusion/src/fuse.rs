//! Fusion rules: which nodes share a kernel.
//!
//! Every kernel materializes some nodes; everything else is computed inside
//! the kernels that need it:
//! - elementwise ops and views are never materialized unless realized:
//!   they are recomputed inside every kernel that reads them (cheap, and
//!   it saves a round trip through memory);
//! - a kernel iterates over the domain of a reduction (or matmul) it reads
//!   when its output lines up with that reduction's input (multi-reduce:
//!   softmax, layer norm, ...) or output (fuse on write, also through a
//!   permutation); the reduction is then computed inside it;
//! - when a kernel cannot compute a reduction in its domain, the highest
//!   node between them whose own reductions all share the failing one's
//!   domain is materialized (a per-row loss, a matmul epilogue), else the
//!   reduction itself;
//! - a reduction is computed by one kernel only: if two kernels need it, it
//!   is materialized;
//! - kernels over equal domains merge, so tensors realized together share
//!   one kernel; an elementwise output joins a reduction over its shape as
//!   an element-level store;
//! - an operand of a matmul computed by elementwise ops is materialized
//!   (see [`matmul_operand_producers`]), and so is a gather's source unless
//!   it is a buffer read through one strided view
//!   ([`crate::lower::gather_sources`]);
//! - a scan is always materialized by a kernel over its own domain, with
//!   its producers computed in its loads; kernels of scans over the same
//!   tensor and axis merge (`cummax`'s values and indices: one pass);
//! - a sort likewise, and only sorts of the same node in the same
//!   direction with the same `k` merge (`sort`'s values and indices: one
//!   kernel sorting once);
//! - a scatter is two kernels: its copy of the tensor scattered into (with
//!   that tensor's producers fused) and the adds over the values' domain
//!   (with the values' and the index's producers fused), which update the
//!   copy's buffer in place;
//! - attention (`softmax_j(l(q @ kt)) @ v`, see [`crate::attention`]),
//!   where the planning options choose it ([`crate::attention::fuse`]), is
//!   one kernel over the output's domain that computes the scores, the
//!   logits and the softmax inside, unless the planner materializes one
//!   of the nodes in between (a target, or one another kernel needs):
//!   then it is planned like any other graph; its computed `q`, `kt` and
//!   `v` are materialized by the matmul operand rule (each `k`/`v`
//!   element is read once per query tile);
//! - no kernel outgrows the instruction budget or the parameter space: long
//!   chains and wide sums are cut ([`crate::budget::split`]) and merging
//!   stops where a kernel would be full.

use crate::attention::{fuse, recognise, Attention};
use crate::budget::{split, Cost};
use crate::domain::{matmul_domain, Domain, Source};
use crate::graph::{NodeRef, Op};
use crate::lower::{gather_sources, Failure, Trackers};
use crate::plan::{lower_plans, plan_unfused, single_kernel, KernelPlan};
use crate::schedule::{Planning, Schedule};
use crate::view::{contiguous_strides, ShapeTracker};
use rustc_hash::{FxHashMap, FxHashSet};
use smelt_codegen::{dims, Axes, Dims, Shape, Strides, UnaryOp};

/// Groups `order` (sources first) into kernels that materialize `targets`
/// and lowers them; `options` says which attentions to fuse.
pub fn plan(order: &[NodeRef], targets: &[NodeRef], options: &Planning) -> Schedule {
    let mut materialized: FxHashSet<u64> = targets.iter().map(|t| t.id()).collect();
    let attentions: Vec<Attention> = order
        .iter()
        .filter_map(recognise)
        .filter(|a| fuse(a, options))
        .collect();
    let fused: FxHashSet<u64> = attentions.iter().map(|a| a.domain.output).collect();
    materialized.extend(matmul_operand_producers(order, &fused));
    materialized.extend(
        order
            .iter()
            .filter(|n| matches!(&*n.op_ref(), Op::Scan(..) | Op::Sort(..)))
            .map(|n| n.id()),
    );
    materialized.extend(gather_sources(order));
    materialized.extend(scatter_nodes(order));
    let costs = split(order, &mut materialized);
    // Outputs that may not join a kernel they read from (joining made that
    // kernel read one of its own outputs at the wrong row).
    let mut no_merge: FxHashSet<u64> = FxHashSet::default();
    // Cleared if the rules ever fail to converge (a safety net: a schedule
    // with an unresolved failure would compute wrong values).
    let mut merging = true;
    let mut trackers = Trackers::default();
    loop {
        let active = active_attentions(&attentions, &mut materialized);
        let before = (materialized.len(), no_merge.len());
        let nodes = order.iter().filter(|n| materialized.contains(&n.id()));
        let plans: Vec<KernelPlan> = nodes.map(|n| plan_for(n, &materialized, &active)).collect();
        let plans = if merging {
            merge(plans, &materialized, &no_merge, &costs)
        } else {
            plans
        };
        let (schedule, reports) = lower_plans(&plans, targets, &mut trackers);
        let mut grow = Vec::new();
        let mut inlined_by: FxHashMap<u64, usize> = FxHashMap::default();
        for (p, low) in plans.iter().zip(&reports) {
            for f in &low.failed {
                if materialized.contains(&f.node.id()) {
                    no_merge.extend(p.outputs.iter().map(|(n, _)| n.id()));
                } else {
                    grow.push(pick(f, &materialized, &active).id());
                }
            }
            for id in low.inlined.iter().collect::<FxHashSet<_>>() {
                *inlined_by.entry(*id).or_default() += 1;
            }
        }
        grow.extend(
            inlined_by
                .iter()
                .filter(|(_, c)| **c > 1)
                .map(|(id, _)| *id),
        );
        materialized.extend(grow);
        if (materialized.len(), no_merge.len()) != before {
            continue;
        }
        if reports.iter().all(|r| r.failed.is_empty()) {
            return schedule;
        }
        if merging {
            merging = false;
        } else {
            // Cannot happen with unmerged plans (a kernel then only fails on
            // nodes it loads); kept so a bug costs speed, not correctness.
            return lower_plans(&plan_unfused(order), targets, &mut trackers).0;
        }
    }
}

/// The nodes that compute matmul operands, below the views and TF32
/// rounding a matmul kernel reads them through. The GPU's matmul kernels
/// load each operand with one strided load (a cast from a half type and
/// `RoundTf32` included); an operand computed in the kernel (`(x * 0.5) @
/// w`) would send the whole product to the generic reduce kernel, many
/// times slower than one more pass over the operand through memory.
fn matmul_operand_producers(order: &[NodeRef], fused: &FxHashSet<u64>) -> Vec<u64> {
    order
        .iter()
        .filter_map(|n| match &*n.op_ref() {
            // A fused attention computes its softmax operand inside.
            Op::Matmul(_, b) if fused.contains(&n.id()) => Some(vec![operand_root(b)]),
            Op::Matmul(a, b) => Some(vec![operand_root(a), operand_root(b)]),
            _ => None,
        })
        .flatten()
        .filter(|r| r.computes())
        .map(|r| r.id())
        .collect()
}

/// The node below the views, TF32 rounding and FP8 dequantizing casts a
/// matmul kernel reads its operand `x` through. An FP8 operand widened to
/// `F32` (`scaled_mm`) is read and converted by the product's own loads:
/// materializing the `f32` copy would move four times its bytes.
fn operand_root(x: &NodeRef) -> NodeRef {
    let mut n = x.clone();
    loop {
        let below = match &*n.op_ref() {
            Op::View(src, _) | Op::Unary(UnaryOp::RoundTf32, src) => Some(src.clone()),
            Op::Cast(src) if src.dtype().is_fp8() && n.dtype().size() >= 4 => Some(src.clone()),
            _ => None,
        };
        match below {
            Some(b) => n = b,
            None => return n,
        }
    }
}

/// Scatters and the copies they add into: each is materialized by a
/// kernel of its own (the copy over its shape, the adds over the values'),
/// the scatter's buffer being its copy's, updated in place.
fn scatter_nodes(order: &[NodeRef]) -> Vec<u64> {
    order
        .iter()
        .filter_map(|n| match &*n.op_ref() {
            Op::ScatterAdd(init, ..) => Some([n.id(), init.id()]),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Recognised attentions by output id, fused unless an interior node is
/// materialized; a dropped one's softmax operand is materialized instead,
/// as the operand rule does for any matmul ([`matmul_operand_producers`]).
fn active_attentions<'a>(
    attentions: &'a [Attention],
    materialized: &mut FxHashSet<u64>,
) -> FxHashMap<u64, &'a Attention> {
    let mut active = FxHashMap::default();
    for a in attentions {
        if a.interior.iter().any(|id| materialized.contains(id)) {
            let root = operand_root(&a.probs);
            if root.computes() {
                materialized.insert(root.id());
            }
        } else {
            active.insert(a.domain.output, a);
        }
    }
    active
}

/// The domain a reduction, matmul or fused attention is computed in.
fn domain_of(r: &NodeRef, active: &FxHashMap<u64, &Attention>) -> Option<Domain> {
    if let Some(a) = active.get(&r.id()) {
        return Some(Domain::attention(a.domain.clone()));
    }
    match &*r.op_ref() {
        Op::Reduce(_, a, axes) => Some(Domain::reduce(a.shape(), axes)),
        Op::Matmul(a, b) => Some(matmul_domain(a.shape(), b.shape())),
        _ => None,
    }
}

/// What to materialize when a kernel cannot compute `f.node`: the highest
/// node on the path (below the stored one) with `f.node`'s element count
/// whose reductions all share `f.node`'s domain — its kernel then computes
/// them and the consumers between, one pass — else `f.node` itself.
fn pick(
    f: &Failure,
    materialized: &FxHashSet<u64>,
    active: &FxHashMap<u64, &Attention>,
) -> NodeRef {
    let want = domain_of(&f.node, active);
    f.path
        .iter()
        .skip(1)
        .find(|x| {
            x.computes()
                && x.numel() == f.node.numel()
                && row_candidates(x, materialized, false)
                    .iter()
                    .all(|r| domain_of(r, active) == want)
        })
        .unwrap_or(&f.node)
        .clone()
}

/// The kernel that materializes `t`: over the domain of a reduction or
/// matmul it reads when `t` lines up with it (fusing them), else
/// elementwise.
fn plan_for(
    t: &NodeRef,
    materialized: &FxHashSet<u64>,
    active: &FxHashMap<u64, &Attention>,
) -> KernelPlan {
    if let Some(a) = active.get(&t.id()) {
        let domain = Domain::attention(a.domain.clone());
        let out = domain.matmul_result(t.shape());
        return KernelPlan {
            domain,
            outputs: vec![(t.clone(), out)],
        };
    }
    if matches!(
        &*t.op_ref(),
        Op::Reduce(..) | Op::Matmul(..) | Op::Scan(..) | Op::Sort(..) | Op::ScatterAdd(..)
    ) {
        return single_kernel(t);
    }
    let squeeze = |s: &[usize]| -> Shape { s.iter().copied().filter(|n| *n != 1).collect() };
    // Best first: a row kernel over t's own shape (multi-reduce), then
    // storing per row of a reduction or matmul, then sharing the kernel of
    // one already materialized.
    let mut candidates = row_candidates(t, materialized, true);
    let rank = |r: &NodeRef| match &*r.op_ref() {
        _ if materialized.contains(&r.id()) => 2,
        Op::Reduce(_, a, _) if a.shape() == t.shape() => 0,
        _ => 1,
    };
    candidates.sort_by_key(rank);
    for r in candidates {
        let Some(domain) = domain_of(&r, active) else {
            continue;
        };
        let store = match &domain.source {
            Source::Reduce(shape, axes) if t.shape() == shape.as_slice() => {
                Some(domain.reduce_source(shape, axes))
            }
            Source::Reduce(shape, axes) if squeeze(t.shape()) == squeeze(r.shape()) => {
                Some(domain.reduce_result(shape, axes))
            }
            Source::Matmul(..) | Source::Attention(_)
                if squeeze(t.shape()) == squeeze(r.shape()) =>
            {
                Some(domain.matmul_result(r.shape()))
            }
            _ => permuted_store(t, &r, &domain, materialized),
        };
        if let Some(store) = store {
            return KernelPlan {
                domain,
                outputs: vec![(t.clone(), store)],
            };
        }
    }
    single_kernel(t)
}

/// Reductions and matmuls `t` reads through elementwise ops and views
/// only, nearest first; materialized ones end a path and are included only
/// with `include_materialized` (a consumer can still share their kernel).
fn row_candidates(
    t: &NodeRef,
    materialized: &FxHashSet<u64>,
    include_materialized: bool,
) -> Vec<NodeRef> {
    let mut out = Vec::new();
    let mut seen = FxHashSet::default();
    let mut queue = std::collections::VecDeque::from(vec![t.clone()]);
    while let Some(n) = queue.pop_front() {
        if !seen.insert(n.id()) || n.realized().is_some() {
            continue;
        }
        let row = n.is_row_op();
        if n.id() != t.id() {
            if materialized.contains(&n.id()) {
                if row && include_materialized {
                    out.push(n);
                }
                continue;
            }
            if row {
                out.push(n);
                continue;
            }
        }
        queue.extend(n.pointwise_srcs());
    }
    out
}

/// How `t` reads `r`: the tracker from `t`'s coordinates to `r`'s linear
/// index along the first path of elementwise ops and views between them.
fn path_tracker(t: &NodeRef, r: &NodeRef, materialized: &FxHashSet<u64>) -> Option<ShapeTracker> {
    let mut stack = vec![(t.clone(), ShapeTracker::contiguous(t.shape()))];
    let mut seen = FxHashSet::default();
    while let Some((n, st)) = stack.pop() {
        if n.id() == r.id() {
            return Some(st);
        }
        if !seen.insert(n.id())
            || n.realized().is_some()
            || (n.id() != t.id() && materialized.contains(&n.id()))
        {
            continue;
        }
        match &*n.op_ref() {
            Op::View(src, v) => stack.push((src.clone(), v.compose(&st))),
            Op::Reduce(..) | Op::Matmul(..) if n.id() != t.id() => {}
            op => stack.extend(
                op.pointwise_srcs()
                    .into_iter()
                    .map(|s| (s.clone(), st.clone())),
            ),
        }
    }
    None
}

/// The store tracker that lets `t` be written by `r`'s kernel when `t`
/// reads `r`'s result through a permutation of its axes: `t`'s element at
/// each of `r`'s rows is stored where that permutation puts it.
fn permuted_store(
    t: &NodeRef,
    r: &NodeRef,
    domain: &Domain,
    materialized: &FxHashSet<u64>,
) -> Option<ShapeTracker> {
    if t.numel() != r.numel() {
        return None;
    }
    let st = path_tracker(t, r, materialized)?;
    let [v] = st.views.as_slice() else {
        return None;
    };
    if v.offset != 0 || v.mask.is_some() {
        return None;
    }
    // Map each axis of t onto the axis of r's output it walks.
    let out = r.shape();
    let cs_out = contiguous_strides(out);
    let cs_t = contiguous_strides(t.shape());
    let mut stride_of_out_axis: Strides = dims![0; out.len()];
    let mut used: Dims<bool> = dims![false; out.len()];
    for (i, (&n, &s)) in t.shape().iter().zip(&v.strides).enumerate() {
        if n == 1 {
            continue;
        }
        let j = (0..out.len()).find(|j| !used[*j] && out[*j] == n && cs_out[*j] == s)?;
        used[j] = true;
        stride_of_out_axis[j] = cs_t[i];
    }
    if (0..out.len()).any(|j| out[j] > 1 && !used[j]) {
        return None;
    }
    // The domain's kept variables are r's non-reduced output axes in order.
    let kept: Axes = match &domain.source {
        Source::Reduce(shape, axes) => (0..shape.len()).filter(|a| !axes.contains(a)).collect(),
        Source::Matmul(..) | Source::Attention(_) => (0..out.len()).collect(),
        Source::Elementwise(_) | Source::Scan(..) | Source::Sort(..) | Source::Scatter(_) => {
            return None
        }
    };
    let mut strides: Strides = kept.iter().map(|j| stride_of_out_axis[*j]).collect();
    strides.resize(domain.ranges.len(), 0);
    Some(domain.tracker(strides))
}

/// Merges plans over equal domains when neither reads what the other
/// writes through a kernel in between (plans are in dependency order) and
/// the merged kernel stays within budget (`costs`: each output's cost). An
/// elementwise plan over the input shape of a reduction plan joins it as
/// an element-level store (in either order).
fn merge(
    plans: Vec<KernelPlan>,
    materialized: &FxHashSet<u64>,
    no_merge: &FxHashSet<u64>,
    costs: &FxHashMap<u64, Cost>,
) -> Vec<KernelPlan> {
    let mut out: Vec<KernelPlan> = Vec::new();
    let mut out_costs: Vec<Cost> = Vec::new();
    // Whether each kernel of `out` only stores compute nodes (kept per
    // kernel: checking all outputs per candidate was quadratic).
    let mut out_compute: Vec<bool> = Vec::new();
    // Which kernel of `out` stores each node (keeps merging linear).
    let mut kernel_of: FxHashMap<u64, usize> = FxHashMap::default();
    for mut p in plans {
        let deps = loads(&p, materialized);
        // The latest earlier kernel p depends on: p can only join a kernel
        // at or after it (joining it computes that value inline).
        let first_ok = deps.iter().filter_map(|d| kernel_of.get(d)).max().copied();
        let strict = p.outputs.iter().any(|(n, _)| no_merge.contains(&n.id()));
        let start = match first_ok {
            Some(i) if strict => i + 1,
            Some(i) => i,
            None => 0,
        };
        let mut cost = Cost::default();
        for (n, _) in &p.outputs {
            cost.add(costs.get(&n.id()).unwrap_or(&Cost::default()));
        }
        let target = (start..out.len()).find(|i| {
            let q = &mut out[*i];
            out_compute[*i]
                && out_costs[*i].fits_with(&cost, q.outputs.len() + p.outputs.len())
                && (q.domain == p.domain || adopt(&mut p, &q.domain) || adopt(q, &p.domain))
        });
        let ids: Vec<u64> = p.outputs.iter().map(|(n, _)| n.id()).collect();
        let compute = is_compute_plan(&p);
        let i = match target {
            Some(i) => {
                out[i].outputs.extend(p.outputs);
                out_costs[i].add(&cost);
                out_compute[i] &= compute;
                i
            }
            None => {
                out.push(p);
                out_costs.push(cost);
                out_compute.push(compute);
                out.len() - 1
            }
        };
        kernel_of.extend(ids.into_iter().map(|id| (id, i)));
    }
    out
}

/// Re-expresses an elementwise plan over shape `s` in the domain of a
/// reduction over `s` (its outputs become element-level stores); false if
/// the plan is not like that.
fn adopt(p: &mut KernelPlan, domain: &Domain) -> bool {
    let (Source::Elementwise(shape), Source::Reduce(rshape, axes)) =
        (&p.domain.source, &domain.source)
    else {
        return false;
    };
    if shape != rshape || p.outputs.iter().any(|(n, _)| n.shape() != shape.as_slice()) {
        return false;
    }
    let store = domain.reduce_source(rshape, axes);
    for o in &mut p.outputs {
        o.1 = store.clone();
    }
    p.domain = domain.clone();
    true
}

fn is_compute_plan(p: &KernelPlan) -> bool {
    p.outputs.iter().all(|(n, _)| n.computes())
}

/// Ids of the materialized nodes `p` loads (its direct dependencies; the
/// plans that produce them come after everything they depend on).
fn loads(p: &KernelPlan, materialized: &FxHashSet<u64>) -> FxHashSet<u64> {
    let own: FxHashSet<u64> = p.outputs.iter().map(|(n, _)| n.id()).collect();
    let mut seen = FxHashSet::default();
    let mut deps = FxHashSet::default();
    let mut stack: Vec<NodeRef> = p.outputs.iter().map(|(n, _)| n.clone()).collect();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.id()) || n.realized().is_some() {
            continue;
        }
        if materialized.contains(&n.id()) && !own.contains(&n.id()) {
            deps.insert(n.id());
            continue;
        }
        stack.extend(n.srcs());
    }
    deps
}
