//! Scheduling: which kernels a realize runs, over which buffers.

use crate::fxhash::{FxMap, FxSet};
use crate::graph::{BufferHandle, GraphLock, NodeRef, Op};
use crate::lower::{matmul_domain, Domain, Input, Lowerer, Trackers};
use crate::view::ShapeTracker;
use smelt_codegen::{Arg, DType, Kernel};
use std::fmt;
use std::sync::Arc;

/// Whether the scheduler fuses ops into few kernels or runs one per op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fusion {
    /// Fuse (the default).
    On,
    /// One kernel per op: the naive baseline benchmarks compare against.
    Off,
}

impl Fusion {
    /// `Off` when the environment sets `SMELT_FUSION` off (`0`, `off`,
    /// `false`, `no`), else `On`.
    pub fn from_env() -> Fusion {
        if smelt_codegen::env::flag("SMELT_FUSION", true) {
            Fusion::On
        } else {
            Fusion::Off
        }
    }
}

/// A buffer a schedule reads or writes.
#[derive(Clone)]
pub enum BufferSpec {
    /// Data that exists before the schedule runs, held by node `node`.
    Realized {
        /// Id of the node holding it.
        node: u64,
        /// The data.
        data: BufferHandle,
    },
    /// A buffer the schedule allocates.
    New {
        /// Element type.
        dtype: DType,
        /// Number of elements.
        len: usize,
    },
}

/// A scalar a schedule passes to its kernels: the value of a graph
/// constant (`Op::Const`), bound per realize like a buffer, since the
/// kernels are shared by graphs that differ in these values.
#[derive(Clone, Copy, Debug)]
pub struct ScalarSpec {
    /// Id of the constant's node.
    pub node: u64,
    /// Its value, in the node's dtype.
    pub value: f64,
}

/// One kernel launch.
pub struct ScheduleItem {
    /// The kernel's IR.
    pub kernel: Kernel,
    /// Graph ops computed by the kernel, in order.
    pub ops: Vec<String>,
    /// Schedule buffers bound to the kernel's inputs and outputs.
    pub inputs: Vec<usize>,
    /// Schedule buffers bound to the kernel's outputs.
    pub outputs: Vec<usize>,
    /// Schedule scalars bound to the kernel's scalar parameters, by slot.
    pub scalars: Vec<usize>,
}

/// Everything a realize runs.
pub struct Schedule {
    /// The kernels, shared with the schedule cache.
    pub items: Arc<Vec<ScheduleItem>>,
    /// Every buffer the kernels read or write; items refer to them by position.
    pub buffers: Vec<BufferSpec>,
    /// The values of this graph's constants that the kernels read.
    pub scalars: Vec<ScalarSpec>,
    /// Nodes that receive a buffer once the schedule has run.
    pub results: Vec<(NodeRef, usize)>,
    /// The kernel DAG and buffer lifetimes (fusion/src/dag.rs), shared
    /// with the schedule cache like `items`.
    pub(crate) dag: Arc<crate::dag::KernelDag>,
}

/// What the planner decides per kernel: its domain and the nodes it
/// materializes, each stored at the coordinates its tracker gives.
pub struct KernelPlan {
    /// The domain the kernel iterates over.
    pub domain: Domain,
    /// The nodes it stores, each with the tracker giving its store coordinates.
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
    let mut seen = FxSet::default();
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
    /// Plans the kernels that realize `targets`, reusing the plan of an
    /// earlier graph of the same structure (same ops, shapes and dtypes;
    /// other data and other constants' values) from the schedule cache. Holds the graph lock, so the
    /// hash, the plan and the cache entry all see the same graph even while
    /// other threads realize parts of it.
    pub fn new(targets: &[NodeRef], fusion: Fusion) -> Schedule {
        let lock = GraphLock::acquire();
        let mut seen = FxSet::default();
        let bases: Vec<NodeRef> = targets
            .iter()
            .map(base)
            .filter(|b| b.realized().is_none() && is_compute(&b.op()) && seen.insert(b.id()))
            .collect();
        if bases.is_empty() {
            // Everything is computed (a read of a realized tensor): no plan
            // to make or reuse, and none counted.
            return Schedule {
                items: Arc::new(Vec::new()),
                buffers: Vec::new(),
                scalars: Vec::new(),
                results: Vec::new(),
                dag: Arc::new(crate::dag::KernelDag::new(&[], &[], &[])),
            };
        }
        let fp = crate::cache::Fingerprint::new(&bases, fusion);
        if let Some(s) = crate::cache::lookup(&fp, &bases) {
            return s;
        }
        let s = Schedule::plan_locked(&bases, fusion, &lock);
        crate::cache::store(&fp, &s);
        s
    }

    /// Plans without the cache (under the graph lock).
    pub fn plan(bases: &[NodeRef], fusion: Fusion) -> Schedule {
        let lock = GraphLock::acquire();
        Schedule::plan_locked(bases, fusion, &lock)
    }

    fn plan_locked(bases: &[NodeRef], fusion: Fusion, _lock: &GraphLock) -> Schedule {
        let order = topo_order(bases);
        let mut s = match fusion {
            Fusion::Off => lower_plans(&plan_unfused(&order), bases, &mut Trackers::default()).0,
            Fusion::On => crate::fuse::plan(&order, bases),
        };
        let items = Arc::get_mut(&mut s.items).expect("a new schedule is not shared");
        for it in items.iter_mut() {
            crate::collapse::collapse(&mut it.kernel);
        }
        debug_assert_eq!(s.dag.check_order(), Ok(()), "kernel order of\n{s}");
        s
    }

    /// Stores the results' buffers (`bufs`, in the order of `results`) in
    /// their nodes under the graph lock. A node that another thread
    /// realized since this schedule was planned keeps its buffer (same
    /// values), so concurrent realizes of one graph agree.
    pub fn commit(&self, bufs: Vec<BufferHandle>) {
        let lock = GraphLock::acquire();
        for ((node, _), buf) in self.results.iter().zip(bufs) {
            node.set_realized(buf, &lock);
        }
    }

    /// For every buffer, the index of the last kernel that uses it
    /// (`usize::MAX` for results and unused buffers): runtimes free a buffer
    /// after that kernel. Derived from the kernel DAG when the schedule was
    /// planned, not per run (see [`crate::dag::KernelDag`]).
    pub fn last_uses(&self) -> &[usize] {
        self.dag.last_uses()
    }

    /// The kernel DAG: kernels as nodes, buffers as edges.
    pub fn dag(&self) -> &crate::dag::KernelDag {
        &self.dag
    }

    /// The values of `item`'s scalar parameters, by slot (the backends
    /// round each to its slot's dtype, `item.kernel.scalars`).
    pub fn scalar_values(&self, item: &ScheduleItem) -> Vec<f64> {
        item.scalars
            .iter()
            .map(|s| self.scalars[*s].value)
            .collect()
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

/// What lowering one kernel plan reported to the fusion planner.
pub struct LowerReport {
    /// Nodes the kernel asks to have materialized.
    pub failed: Vec<crate::lower::Failure>,
    /// Reductions and matmuls it computes inline.
    pub inlined: Vec<u64>,
}

/// Lowers every plan to kernel IR (buffers numbered in plan order) and
/// reports what the fusion planner needs to check its choices.
pub fn lower_plans(
    plans: &[KernelPlan],
    bases: &[NodeRef],
    trackers: &mut Trackers,
) -> (Schedule, Vec<LowerReport>) {
    let mut buffers = Vec::new();
    let mut buf_of: FxMap<u64, usize> = FxMap::default();
    for p in plans {
        for (n, _) in &p.outputs {
            buf_of.insert(n.id(), buffers.len());
            buffers.push(BufferSpec::New {
                dtype: n.dtype(),
                len: n.numel(),
            });
        }
    }
    let mut items = Vec::new();
    let mut reports = Vec::new();
    let mut realized_buf: FxMap<u64, usize> = FxMap::default();
    let mut scalars: Vec<ScalarSpec> = Vec::new();
    let mut scalar_of: FxMap<u64, usize> = FxMap::default();
    for p in plans {
        let own = p.outputs.iter().map(|(n, _)| n.id()).collect();
        let mut low = Lowerer::new(&p.domain, &buf_of, own, trackers);
        let mut outputs = Vec::new();
        let vars = p.domain.vars();
        for (n, t) in &p.outputs {
            let v = low.value(n, t);
            let (index, _) = t.expr(&vars, &p.domain.ranges);
            let arg = Arg {
                dtype: n.dtype(),
                len: n.numel(),
            };
            low.store(arg, index, v);
            outputs.push(buf_of[&n.id()]);
        }
        let inputs = low
            .inputs
            .iter()
            .map(|i| match i {
                Input::Scheduled(b) => *b,
                Input::Realized(id, data) => *realized_buf.entry(*id).or_insert_with(|| {
                    buffers.push(BufferSpec::Realized {
                        node: *id,
                        data: data.clone(),
                    });
                    buffers.len() - 1
                }),
            })
            .collect();
        let item_scalars = low
            .scalars
            .iter()
            .map(|c| {
                *scalar_of.entry(c.node).or_insert_with(|| {
                    scalars.push(*c);
                    scalars.len() - 1
                })
            })
            .collect();
        reports.push(LowerReport {
            failed: std::mem::take(&mut low.failed),
            inlined: std::mem::take(&mut low.inlined),
        });
        items.push(ScheduleItem {
            ops: low.op_names.clone(),
            kernel: low.finish(),
            inputs,
            outputs,
            scalars: item_scalars,
        });
    }
    let results: Vec<(NodeRef, usize)> =
        bases.iter().map(|b| (b.clone(), buf_of[&b.id()])).collect();
    let result_bufs: Vec<usize> = results.iter().map(|(_, b)| *b).collect();
    let dag = Arc::new(crate::dag::KernelDag::new(&items, &buffers, &result_bufs));
    let s = Schedule {
        items: Arc::new(items),
        buffers,
        scalars,
        results,
        dag,
    };
    (s, reports)
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
