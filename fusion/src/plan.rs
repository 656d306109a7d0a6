//! Kernel plans and their lowering: the planner's unit (a domain and the
//! nodes a kernel stores), one kernel per op for `Fusion::Off`, and the
//! driver that lowers a list of plans into a schedule.

use crate::domain::{matmul_domain, Domain, Source};
use crate::graph::{NodeRef, Op};
use crate::lower::{gather_sources, Failure, Input, Lowerer, Trackers};
use crate::schedule::{BufferSpec, ScalarSpec, Schedule, ScheduleItem};
use crate::view::ShapeTracker;
use rustc_hash::{FxHashMap, FxHashSet};
use smelt_codegen::sort::scratch_len;
use smelt_codegen::{Arg, DType, KernelKind};
use std::sync::Arc;

/// What the planner decides per kernel: its domain and the nodes it
/// materializes, each stored at the coordinates its tracker gives.
pub struct KernelPlan {
    /// The domain the kernel iterates over.
    pub domain: Domain,
    /// The nodes it stores, each with the tracker giving its store coordinates.
    pub outputs: Vec<(NodeRef, ShapeTracker)>,
}

/// The kernel that computes `node` alone.
pub fn single_kernel(node: &NodeRef) -> KernelPlan {
    match &*node.op_ref() {
        Op::Reduce(_, a, axes) => {
            let domain = Domain::reduce(a.shape(), axes);
            let out = domain.reduce_result(a.shape(), axes);
            KernelPlan {
                domain,
                outputs: vec![(node.clone(), out)],
            }
        }
        Op::Scan(_, a, axis) => {
            let domain = Domain::scan(a.shape(), *axis);
            let out = domain.scan_tracker(a.shape(), *axis);
            KernelPlan {
                domain,
                outputs: vec![(node.clone(), out)],
            }
        }
        Op::Sort(op, a, axis) => {
            let domain = Domain::of_sort(*op, a, *axis);
            let out = domain.sort_result(a.shape(), *axis, op.k);
            KernelPlan {
                domain,
                outputs: vec![(node.clone(), out)],
            }
        }
        Op::ScatterAdd(_, index, ..) => {
            // The output is stored by the adds ([`Lowerer::scatter_add`]),
            // not at this tracker.
            let domain = Domain::scatter(index.shape());
            KernelPlan {
                domain,
                outputs: vec![(node.clone(), ShapeTracker::contiguous(index.shape()))],
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

/// One kernel per compute node (and per gather source that must be
/// materialized, see [`gather_sources`]); a scatter's copy is a compute
/// node (a cast), so it has its kernel before the scatter's.
pub fn plan_unfused(order: &[NodeRef]) -> Vec<KernelPlan> {
    let sources: FxHashSet<u64> = gather_sources(order).into_iter().collect();
    order
        .iter()
        .filter(|n| n.computes() || sources.contains(&n.id()))
        .map(single_kernel)
        .collect()
}

/// What lowering one kernel plan reported to the fusion planner.
pub struct LowerReport {
    /// Nodes the kernel asks to have materialized.
    pub failed: Vec<Failure>,
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
    let mut buf_of: FxHashMap<u64, usize> = FxHashMap::default();
    for p in plans {
        for (n, _) in &p.outputs {
            if let Op::ScatterAdd(init, ..) = n.op() {
                // Updated in place: the buffer of its copy, which an
                // earlier plan stores (the planners materialize it).
                let b = *buf_of
                    .get(&init.id())
                    .expect("a scatter's copy is materialized before it");
                buf_of.insert(n.id(), b);
                continue;
            }
            buf_of.insert(n.id(), buffers.len());
            buffers.push(BufferSpec::New {
                dtype: n.dtype(),
                len: n.numel(),
            });
        }
    }
    let mut items = Vec::new();
    let mut reports = Vec::new();
    let mut realized_buf: FxHashMap<u64, usize> = FxHashMap::default();
    let mut scalars: Vec<ScalarSpec> = Vec::new();
    let mut scalar_of: FxHashMap<u64, usize> = FxHashMap::default();
    for p in plans {
        let own = p.outputs.iter().map(|(n, _)| n.id()).collect();
        let mut low = Lowerer::new(&p.domain, &buf_of, own, trackers);
        let mut outputs = Vec::new();
        let vars = p.domain.vars();
        for (n, t) in &p.outputs {
            let arg = Arg {
                dtype: n.dtype(),
                len: n.numel(),
            };
            if let Op::ScatterAdd(..) = n.op() {
                low.scatter_add(n, arg);
                outputs.push(buf_of[&n.id()]);
                continue;
            }
            let v = low.value(n, t);
            let (index, _) = t.expr(&vars, &p.domain.ranges);
            low.store(arg, index, v);
            outputs.push(buf_of[&n.id()]);
        }
        if let Source::Sort(sort) = &p.domain.source {
            // Long rows are sorted on the GPU through a scratch buffer, the
            // kernel's last output (no store writes it; nothing reads it
            // afterwards).
            let row_len = sort.shape[sort.axis];
            let rows = sort.shape.iter().product::<usize>() / row_len;
            let len = scratch_len(rows, row_len, sort.k, sort.key_bits);
            if len > 0 {
                let arg = Arg {
                    dtype: DType::I32,
                    len,
                };
                low.scratch(arg);
                outputs.push(buffers.len());
                buffers.push(BufferSpec::New {
                    dtype: arg.dtype,
                    len,
                });
            }
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
        let ops = low.op_names.clone();
        let mut kernel = low.finish();
        // A look-back scan (few long rows, or a long strided axis, on the
        // GPU) publishes its tiles' states in a status buffer, the kernel's
        // last output: runtimes zero its start before the launch
        // ([`smelt_codegen::Kernel::zeroed_output`]).
        let status = smelt_codegen::ptx::scan_status_len(&kernel);
        if status > 0 {
            let arg = Arg {
                dtype: DType::I64,
                len: status,
            };
            kernel.outputs.push(arg);
            outputs.push(buffers.len());
            buffers.push(BufferSpec::New {
                dtype: arg.dtype,
                len: status,
            });
        }
        // A split-KV attention kernel (GPU, too few CTAs) writes its
        // splits' partial softmaxes to a scratch buffer, its last output,
        // which its second launch merges; where its pointer would pass
        // the parameter space, the kernel is not split.
        let room =
            kernel.param_bytes() + smelt_codegen::PARAM_BYTES <= smelt_codegen::PARAM_BYTES_LIMIT;
        // So does a split-K matmul (too few output tiles for the GPU, a
        // long `k`): its splits' partial sums, added by its second launch.
        // The emitters see it collapsed (a batch that B broadcasts merges
        // into `m`), and collapsing keeps the outputs it sizes by.
        let scratch = smelt_codegen::ptx::attention_scratch(&kernel).or_else(|| {
            (kernel.kind == KernelKind::Matmul)
                .then(|| {
                    let mut collapsed = kernel.clone();
                    crate::collapse::collapse(&mut collapsed);
                    smelt_codegen::ptx::matmul_scratch(&collapsed)
                })
                .flatten()
        });
        if let Some(arg) = scratch.filter(|_| room) {
            kernel.outputs.push(arg);
            outputs.push(buffers.len());
            buffers.push(BufferSpec::New {
                dtype: arg.dtype,
                len: arg.len,
            });
        }
        items.push(ScheduleItem {
            ops,
            kernel,
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
