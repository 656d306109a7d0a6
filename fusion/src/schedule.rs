//! Scheduling: which kernels a realize runs, over which buffers.

use crate::graph::{BufferHandle, NodeRef, Op};
use crate::lower::{matmul_domain, Domain, Input, Lowerer};
use crate::view::ShapeTracker;
use smelt_codegen::{Arg, DType, Kernel};
use std::collections::{HashMap, HashSet};
use std::fmt;

/// Whether the scheduler fuses ops into few kernels or runs one per op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fusion {
    /// Fuse (the default).
    On,
    /// One kernel per op: the naive baseline benchmarks compare against.
    Off,
}

impl Fusion {
    /// `Off` when the environment sets `SMELT_FUSION=0`, else `On`.
    pub fn from_env() -> Fusion {
        match std::env::var("SMELT_FUSION").as_deref() {
            Ok("0") | Ok("off") => Fusion::Off,
            _ => Fusion::On,
        }
    }
}

/// A buffer a schedule reads or writes.
#[derive(Clone)]
pub enum BufferSpec {
    /// Data that exists before the schedule runs.
    Realized(BufferHandle),
    /// A buffer the schedule allocates.
    New { dtype: DType, len: usize },
}

/// One kernel launch.
pub struct ScheduleItem {
    pub kernel: Kernel,
    /// Graph ops computed by the kernel, in order.
    pub ops: Vec<String>,
    /// Schedule buffers bound to the kernel's inputs and outputs.
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
}

/// Everything a realize runs.
pub struct Schedule {
    pub items: Vec<ScheduleItem>,
    pub buffers: Vec<BufferSpec>,
    /// Nodes that receive a buffer once the schedule has run.
    pub results: Vec<(NodeRef, usize)>,
}

/// What the planner decides per kernel: its domain and the nodes it
/// materializes, each stored at the coordinates its tracker gives.
pub struct KernelPlan {
    pub domain: Domain,
    pub outputs: Vec<(NodeRef, ShapeTracker)>,
}

/// Follows views down to the node that holds or computes the data.
pub fn base(node: &NodeRef) -> NodeRef {
    let mut n = node.clone();
    while let Op::View(src, _) = n.op() {
        n = src;
    }
    n
}

/// Unrealized compute nodes reachable from `roots`, sources first.
pub fn topo_order(roots: &[NodeRef]) -> Vec<NodeRef> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<(NodeRef, bool)> = roots.iter().rev().map(|n| (n.clone(), false)).collect();
    while let Some((n, expanded)) = stack.pop() {
        if expanded {
            order.push(n);
            continue;
        }
        if !seen.insert(n.id()) || n.realized().is_some() {
            continue;
        }
        stack.push((n.clone(), true));
        for s in n.op().srcs().into_iter().rev() {
            if !seen.contains(&s.id()) {
                stack.push((s.clone(), false));
            }
        }
    }
    order
}

/// True for nodes that compute values (not data, constants or views).
pub fn is_compute(op: &Op) -> bool {
    !matches!(op, Op::Buffer | Op::Const(_) | Op::View(..))
}

/// The kernel that computes `node` alone.
pub fn single_kernel(node: &NodeRef) -> KernelPlan {
    match node.op() {
        Op::Reduce(_, a, axes) => {
            let domain = Domain::reduce(a.shape(), &axes);
            let out = domain.reduce_result(a.shape(), &axes);
            KernelPlan {
                domain,
                outputs: vec![(node.clone(), out)],
            }
        }
        Op::Matmul(a, b) => {
            let domain = matmul_domain(a.shape(), b.shape());
            let out = domain.matmul_result(node.shape());
            KernelPlan {
                domain,
                outputs: vec![(node.clone(), out)],
            }
        }
        _ => KernelPlan {
            domain: Domain::elementwise(node.shape()),
            outputs: vec![(node.clone(), ShapeTracker::contiguous(node.shape()))],
        },
    }
}

/// One kernel per compute node.
pub fn plan_unfused(order: &[NodeRef]) -> Vec<KernelPlan> {
    order
        .iter()
        .filter(|n| is_compute(&n.op()))
        .map(single_kernel)
        .collect()
}

impl Schedule {
    /// Plans the kernels that realize `targets`.
    pub fn new(targets: &[NodeRef], fusion: Fusion) -> Schedule {
        let mut seen = HashSet::new();
        let bases: Vec<NodeRef> = targets
            .iter()
            .map(base)
            .filter(|b| b.realized().is_none() && is_compute(&b.op()) && seen.insert(b.id()))
            .collect();
        let order = topo_order(&bases);
        let plans = match fusion {
            Fusion::Off => plan_unfused(&order),
            Fusion::On => crate::fuse::plan(&order, &bases),
        };
        Schedule::from_plans(plans, &bases)
    }

    fn from_plans(plans: Vec<KernelPlan>, bases: &[NodeRef]) -> Schedule {
        let mut buffers = Vec::new();
        let mut buf_of: HashMap<u64, usize> = HashMap::new();
        let mut produced_by: HashMap<u64, usize> = HashMap::new();
        for (k, p) in plans.iter().enumerate() {
            for (n, _) in &p.outputs {
                buf_of.insert(n.id(), buffers.len());
                produced_by.insert(n.id(), k);
                buffers.push(BufferSpec::New {
                    dtype: n.dtype(),
                    len: n.numel(),
                });
            }
        }
        let mut items = Vec::new();
        let mut realized_buf: HashMap<u64, usize> = HashMap::new();
        for (k, p) in plans.iter().enumerate() {
            // Leaves: realized data and what other kernels materialize.
            let leaves: HashMap<u64, usize> = buf_of
                .iter()
                .filter(|(id, _)| produced_by[*id] != k)
                .map(|(id, b)| (*id, *b))
                .collect();
            let mut low = Lowerer::new(&p.domain, &leaves);
            let mut outputs = Vec::new();
            let vars = p.domain.vars();
            for (n, t) in &p.outputs {
                let v = low.value(n, t);
                let (index, _) = t.expr(&vars, &p.domain.ranges);
                low.store(
                    Arg {
                        dtype: n.dtype(),
                        len: n.numel(),
                    },
                    index,
                    v,
                );
                outputs.push(buf_of[&n.id()]);
            }
            let ops = low.op_names.clone();
            let inputs = low
                .inputs
                .iter()
                .map(|i| match i {
                    Input::Scheduled(b) => *b,
                    Input::Realized(id, data) => *realized_buf.entry(*id).or_insert_with(|| {
                        buffers.push(BufferSpec::Realized(data.clone()));
                        buffers.len() - 1
                    }),
                })
                .collect();
            items.push(ScheduleItem {
                kernel: crate::collapse::collapse(low.finish()),
                ops,
                inputs,
                outputs,
            });
        }
        let results = bases.iter().map(|b| (b.clone(), buf_of[&b.id()])).collect();
        Schedule {
            items,
            buffers,
            results,
        }
    }

    /// Total bytes read by all kernels.
    pub fn bytes_read(&self) -> usize {
        self.items.iter().map(|i| i.kernel.bytes_read()).sum()
    }

    /// Total bytes written by all kernels.
    pub fn bytes_written(&self) -> usize {
        self.items.iter().map(|i| i.kernel.bytes_written()).sum()
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} kernel(s), {} bytes read, {} bytes written",
            self.items.len(),
            self.bytes_read(),
            self.bytes_written()
        )?;
        for (i, it) in self.items.iter().enumerate() {
            writeln!(
                f,
                "  #{i} {:<12} ops [{}] in {:?} out {:?} read {} B written {} B",
                it.kernel.kind.name(),
                it.ops.join(", "),
                it.inputs,
                it.outputs,
                it.kernel.bytes_read(),
                it.kernel.bytes_written()
            )?;
        }
        Ok(())
    }
}
