//! Kernel budgets: where the planner must materialize so that no kernel
//! exceeds the instruction budget or the driver's parameter space
//! ([`smelt_codegen::INST_BUDGET`], [`smelt_codegen::PARAM_BYTES_LIMIT`]).
//!
//! Estimates are upper bounds: a node inlined twice in a kernel is counted
//! twice, so the planner may split a little early, never too late.

use crate::fxhash::{FxMap, FxSet};
use crate::graph::{NodeRef, Op};
use crate::schedule::{base, is_compute};
use smelt_codegen::{INST_BUDGET, PARAM_BYTES_LIMIT, POINTER_PARAM_BYTES};

/// The most buffers (inputs and outputs) one kernel may bind.
pub const MAX_BUFFERS: usize = PARAM_BYTES_LIMIT / POINTER_PARAM_BYTES;

/// What computing a node inside a kernel costs: instructions, and the
/// nodes whose data the kernel loads (buffers, materialized nodes and
/// constants, which become kernel parameters too).
#[derive(Clone, Default)]
pub struct Cost {
    pub insts: usize,
    pub loads: FxSet<u64>,
}

impl Cost {
    fn load(id: u64) -> Cost {
        Cost {
            insts: 1,
            loads: FxSet::from_iter([id]),
        }
    }

    /// Adds `other` (a second cone in the same kernel).
    pub fn add(&mut self, other: &Cost) {
        self.insts = self.insts.saturating_add(other.insts);
        self.loads.extend(other.loads.iter().copied());
    }

    /// Whether a kernel with this cost and `outputs` stores fits both
    /// budgets.
    pub fn fits(&self, outputs: usize) -> bool {
        self.insts + outputs <= INST_BUDGET && self.loads.len() + outputs <= MAX_BUFFERS
    }

    /// Whether a kernel computing both `self` and `other` with `outputs`
    /// stores fits both budgets (without building the union: merging asks
    /// this for every candidate kernel).
    pub fn fits_with(&self, other: &Cost, outputs: usize) -> bool {
        let new_loads = other.loads.iter().filter(|l| !self.loads.contains(l));
        self.insts.saturating_add(other.insts) + outputs <= INST_BUDGET
            && self.loads.len() + new_loads.count() + outputs <= MAX_BUFFERS
    }
}

/// Walks `order` (sources first) and adds to `materialized` the nodes
/// that end an inline cone before it outgrows a kernel: a long chain is cut
/// every budget's worth of ops, a sum of many tensors into partial sums.
/// Returns each compute node's cost when its own kernel computes it.
pub fn split(order: &[NodeRef], materialized: &mut FxSet<u64>) -> FxMap<u64, Cost> {
    let mut costs: FxMap<u64, Cost> = FxMap::default();
    for n in order {
        let cost = match n.op() {
            Op::View(src, _) => inline(&src, &costs, materialized),
            Op::Buffer | Op::Const(_) => Cost::load(n.id()),
            op => {
                let srcs: Vec<NodeRef> = op.srcs().into_iter().cloned().collect();
                let mut parts: Vec<Cost> = srcs
                    .iter()
                    .map(|s| inline(s, &costs, materialized))
                    .collect();
                // Materialize the costliest inlined sources until it fits.
                let mut order: Vec<usize> = (0..srcs.len()).collect();
                order.sort_by_key(|i| std::cmp::Reverse(parts[*i].insts));
                for i in order {
                    if total(&parts).fits(1) {
                        break;
                    }
                    let b = base(&srcs[i]);
                    if is_compute(&b.op()) && b.realized().is_none() {
                        materialized.insert(b.id());
                        parts[i] = Cost::load(b.id());
                    }
                }
                let mut cost = total(&parts);
                cost.insts += 1;
                cost
            }
        };
        costs.insert(n.id(), cost);
    }
    costs
}

fn total(parts: &[Cost]) -> Cost {
    let mut t = Cost::default();
    for p in parts {
        t.add(p);
    }
    t
}

/// The cost of reading `s` in a consumer's kernel: a load if it holds data
/// or is materialized, else its cone.
fn inline(s: &NodeRef, costs: &FxMap<u64, Cost>, materialized: &FxSet<u64>) -> Cost {
    match costs.get(&s.id()) {
        Some(c) if !materialized.contains(&s.id()) => c.clone(),
        _ => Cost::load(s.id()),
    }
}
