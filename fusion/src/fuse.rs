//! Fusion rules: which nodes share a kernel.
//!
//! Every kernel materializes some nodes; everything else is computed inside
//! the kernels that need it:
//! - elementwise ops and views are never materialized unless realized:
//!   they are recomputed inside every kernel that reads them (cheap, and
//!   it saves a round trip through memory);
//! - a reduction (or matmul) is computed inside a consumer's kernel when
//!   that kernel iterates over the reduction's own domain and reads the
//!   result at the row it belongs to (the multi-reduce pattern: softmax,
//!   layer norm, ...); otherwise the nearest consumer with the reduction's
//!   element count, or the reduction itself, is materialized;
//! - a reduction is computed by one kernel only: if two kernels need it, it
//!   is materialized;
//! - kernels over the same domain merge, so tensors realized together
//!   share one kernel (independent ones too).

use crate::fxhash::{FxMap, FxSet};
use crate::graph::{NodeRef, Op};
use crate::lower::{matmul_domain, Domain};
use crate::schedule::{is_compute, lower_plans, single_kernel, KernelPlan, Schedule};

/// Groups `order` (sources first) into kernels that materialize `targets`
/// and lowers them.
pub fn plan(order: &[NodeRef], targets: &[NodeRef]) -> Schedule {
    let mut materialized: FxSet<u64> = targets.iter().map(|t| t.id()).collect();
    // Outputs that may not join a kernel they read from (joining made that
    // kernel read one of its own outputs at the wrong row).
    let mut no_merge: FxSet<u64> = FxSet::default();
    // Cleared if the rules above ever fail to converge (a safety net: a
    // schedule with an unresolved failure would compute wrong values).
    let mut merging = true;
    loop {
        let before = (materialized.len(), no_merge.len());
        let nodes: Vec<&NodeRef> = order
            .iter()
            .filter(|n| materialized.contains(&n.id()))
            .collect();
        let plans = merge(
            nodes.iter().map(|n| plan_for(n, &materialized)).collect(),
            &materialized,
            &no_merge,
            merging,
        );
        let mut grow = Vec::new();
        let mut inlined_by: FxMap<u64, usize> = FxMap::default();
        let (schedule, reports) = lower_plans(&plans, targets);
        eprintln!(
            "ITER: plans {:?} failed {:?}",
            plans
                .iter()
                .map(|p| p.outputs.iter().map(|(n, _)| n.id()).collect::<Vec<_>>())
                .collect::<Vec<_>>(),
            reports
                .iter()
                .map(|r| r.failed.iter().map(|n| n.id()).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        );
        for (p, low) in plans.iter().zip(&reports) {
            for f in &low.failed {
                if materialized.contains(&f.id()) {
                    no_merge.extend(p.outputs.iter().skip(1).map(|(n, _)| n.id()));
                } else {
                    grow.push(f.id());
                }
            }
            for id in low.inlined.iter().collect::<FxSet<_>>() {
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
            return lower_plans(&crate::schedule::plan_unfused(order), targets).0;
        }
    }
}

/// The kernel that materializes `t`: over the domain of a reduction or
/// matmul it reads when the shapes allow (fusing them), else elementwise.
fn plan_for(t: &NodeRef, materialized: &FxSet<u64>) -> KernelPlan {
    if matches!(t.op(), Op::Reduce(..) | Op::Matmul(..)) {
        return single_kernel(t);
    }
    let squeeze = |s: &[usize]| -> Vec<usize> { s.iter().copied().filter(|n| *n != 1).collect() };
    for r in row_candidates(t, materialized) {
        match r.op() {
            Op::Reduce(_, a, axes) => {
                let domain = Domain::reduce(a.shape(), &axes);
                if t.shape() == a.shape() {
                    let store = domain.reduce_source(a.shape(), &axes);
                    return KernelPlan {
                        domain,
                        outputs: vec![(t.clone(), store)],
                    };
                }
                if squeeze(t.shape()) == squeeze(r.shape()) {
                    let store = domain.reduce_result(a.shape(), &axes);
                    return KernelPlan {
                        domain,
                        outputs: vec![(t.clone(), store)],
                    };
                }
            }
            Op::Matmul(a, b) if squeeze(t.shape()) == squeeze(r.shape()) => {
                let domain = matmul_domain(a.shape(), b.shape());
                let store = domain.matmul_result(r.shape());
                return KernelPlan {
                    domain,
                    outputs: vec![(t.clone(), store)],
                };
            }
            _ => {}
        }
    }
    single_kernel(t)
}

/// Reductions and matmuls `t` reads through elementwise ops and views
/// only (not through other materialized nodes), nearest first.
fn row_candidates(t: &NodeRef, materialized: &FxSet<u64>) -> Vec<NodeRef> {
    let mut out = Vec::new();
    let mut seen = FxSet::default();
    let mut queue = std::collections::VecDeque::from(vec![t.clone()]);
    while let Some(n) = queue.pop_front() {
        if !seen.insert(n.id()) || n.realized().is_some() {
            continue;
        }
        if n.id() != t.id() {
            if materialized.contains(&n.id()) {
                continue;
            }
            if matches!(n.op(), Op::Reduce(..) | Op::Matmul(..)) {
                out.push(n);
                continue;
            }
        }
        queue.extend(n.op().srcs().into_iter().cloned());
    }
    out
}

/// Merges plans over equal domains when neither reads what the other
/// writes through a kernel in between (plans are in dependency order);
/// with `merging` off, returns them as they are.
fn merge(
    plans: Vec<KernelPlan>,
    materialized: &FxSet<u64>,
    no_merge: &FxSet<u64>,
    merging: bool,
) -> Vec<KernelPlan> {
    if !merging {
        return plans;
    }
    let mut out: Vec<KernelPlan> = Vec::new();
    for p in plans {
        let deps = loads(&p, materialized);
        // The latest earlier kernel p depends on: p can only join a kernel
        // at or after it.
        let first_ok = out
            .iter()
            .rposition(|q| q.outputs.iter().any(|(n, _)| deps.contains(&n.id())));
        let strict = p.outputs.iter().any(|(n, _)| no_merge.contains(&n.id()));
        let start = match first_ok {
            Some(i) if strict => i + 1,
            Some(i) => i,
            None => 0,
        };
        let target =
            (start..out.len()).find(|i| out[*i].domain == p.domain && is_compute_plan(&out[*i]));
        match target {
            // Joining the kernel it depends on computes that value inline.
            Some(i) => out[i].outputs.extend(p.outputs),
            None => out.push(p),
        }
    }
    out
}

fn is_compute_plan(p: &KernelPlan) -> bool {
    p.outputs.iter().all(|(n, _)| is_compute(&n.op()))
}

/// Ids of the materialized nodes `p` loads (its direct dependencies; the
/// plans that produce them come after everything they depend on).
fn loads(p: &KernelPlan, materialized: &FxSet<u64>) -> FxSet<u64> {
    let own: FxSet<u64> = p.outputs.iter().map(|(n, _)| n.id()).collect();
    let mut seen = FxSet::default();
    let mut deps = FxSet::default();
    let mut stack: Vec<NodeRef> = p.outputs.iter().map(|(n, _)| n.clone()).collect();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.id()) || n.realized().is_some() {
            continue;
        }
        if materialized.contains(&n.id()) && !own.contains(&n.id()) {
            deps.insert(n.id());
            continue;
        }
        stack.extend(n.op().srcs().into_iter().cloned());
    }
    deps
}
