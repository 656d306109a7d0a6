//! Kernel budgets: where the planner must materialize so that no kernel
//! exceeds the instruction budget or the driver's parameter space
//! ([`smelt_codegen::INST_BUDGET`], [`smelt_codegen::PARAM_BYTES_LIMIT`]).
//!
//! Costs are sets of node ids, so a node reached along two paths (`x - max(x)`)
//! counts once; a set never grows past the budget, as the node is cut first.

use crate::graph::{base, NodeRef, Op};
use rustc_hash::{FxHashMap, FxHashSet};

use smelt_codegen::{INST_BUDGET, PARAM_BYTES, PARAM_BYTES_LIMIT};

/// The most parameters (buffers and scalars) one kernel may take.
pub const MAX_PARAMS: usize = PARAM_BYTES_LIMIT / PARAM_BYTES;

/// What computing a node inside a kernel costs: the compute nodes it
/// inlines (an instruction each), and the nodes whose data it loads (an
/// instruction and a kernel parameter each: buffers, materialized nodes,
/// and constants, which become scalar parameters).
#[derive(Clone, Default)]
pub struct Cost {
    /// Ids of the compute nodes inlined.
    pub nodes: FxHashSet<u64>,
    /// Ids of the nodes loaded.
    pub loads: FxHashSet<u64>,
}

impl Cost {
    fn load(id: u64) -> Cost {
        Cost {
            nodes: FxHashSet::default(),
            loads: FxHashSet::from_iter([id]),
        }
    }

    /// Estimated instructions.
    pub fn insts(&self) -> usize {
        self.nodes.len() + self.loads.len()
    }

    /// Adds `other` (a second cone in the same kernel).
    pub fn add(&mut self, other: &Cost) {
        self.nodes.extend(other.nodes.iter().copied());
        self.loads.extend(other.loads.iter().copied());
    }

    /// Whether a kernel with this cost and `outputs` stores fits both
    /// budgets.
    pub fn fits(&self, outputs: usize) -> bool {
        self.fits_with(&Cost::default(), outputs)
    }

    /// Whether a kernel computing both `self` and `other` with `outputs`
    /// stores fits both budgets (without building the union: merging asks
    /// this for every candidate kernel).
    pub fn fits_with(&self, other: &Cost, outputs: usize) -> bool {
        let new =
            |a: &FxHashSet<u64>, b: &FxHashSet<u64>| b.iter().filter(|x| !a.contains(x)).count();
        let nodes = self.nodes.len() + new(&self.nodes, &other.nodes);
        let loads = self.loads.len() + new(&self.loads, &other.loads);
        nodes + loads + outputs <= INST_BUDGET && loads + outputs <= MAX_PARAMS
    }
}

/// Walks `order` (sources first) and adds to `materialized` the nodes
/// that end an inline cone before it outgrows a kernel: a long chain is cut
/// every budget's worth of ops, a sum of many tensors into partial sums.
/// Returns each compute node's cost when its own kernel computes it.
pub fn split(order: &[NodeRef], materialized: &mut FxHashSet<u64>) -> FxHashMap<u64, Cost> {
    let mut costs: FxHashMap<u64, Cost> = FxHashMap::default();
    for n in order {
        // Sources are read under `n`'s lock (borrowed, not cloned); locks
        // are only ever taken from a user down to its sources.
        let cost = match &*n.op_ref() {
            Op::View(src, _) => inline(src, &costs, materialized),
            Op::Buffer | Op::Const(_) => Cost::load(n.id()),
            op => {
                let srcs = op.srcs();
                let mut parts: Vec<Cost> = srcs
                    .iter()
                    .map(|s| inline(s, &costs, materialized))
                    .collect();
                let mut cost = total(&parts);
                // Materialize the costliest inlined sources until it fits.
                let mut order: Vec<usize> = (0..srcs.len()).collect();
                order.sort_by_key(|i| std::cmp::Reverse(parts[*i].insts()));
                for i in order {
                    if cost.fits(1) {
                        break;
                    }
                    let b = base(srcs[i]);
                    if b.computes() && b.realized().is_none() {
                        materialized.insert(b.id());
                        parts[i] = Cost::load(b.id());
                        cost = total(&parts);
                    }
                }
                cost.nodes.insert(n.id());
                cost
            }
        };
        costs.insert(n.id(), cost);
    }
    costs
}

/// The union of `parts`, grown from the largest.
fn total(parts: &[Cost]) -> Cost {
    let Some(big) = (0..parts.len()).max_by_key(|i| parts[*i].insts()) else {
        return Cost::default();
    };
    let mut t = parts[big].clone();
    for (i, p) in parts.iter().enumerate() {
        if i != big {
            t.add(p);
        }
    }
    t
}

/// The cost of reading `s` in a consumer's kernel: a load if it holds data
/// or is materialized, else its cone.
fn inline(s: &NodeRef, costs: &FxHashMap<u64, Cost>, materialized: &FxHashSet<u64>) -> Cost {
    match costs.get(&s.id()) {
        Some(c) if !materialized.contains(&s.id()) => c.clone(),
        _ => Cost::load(s.id()),
    }
}
