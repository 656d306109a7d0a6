//! The schedule: which kernels a realize runs, over which buffers (the
//! data; `pipeline.rs` makes one).

use crate::graph::{BufferHandle, GraphLock, NodeRef};
use smelt_codegen::{DType, Kernel};
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

/// Whether a recognised attention (`softmax_j(l(q @ kt)) @ v`, see
/// [`crate::attention`]) is planned as one fused kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionFusion {
    /// Where the fused kernel is the better plan on the target
    /// ([`crate::attention::prefer_fused`]): the default.
    Auto,
    /// Always fused (unless the planner materializes a node inside it).
    On,
    /// Never: the score matmul, the softmax row kernel and the output
    /// matmul, as the other fusion rules plan it.
    Off,
}

impl AttentionFusion {
    /// `On` or `Off` when the environment sets `SMELT_FUSE_ATTENTION` to
    /// a switch value (`1`/`0`, `on`/`off`, ...), else `Auto`.
    pub fn from_env() -> AttentionFusion {
        match smelt_codegen::env::var("SMELT_FUSE_ATTENTION", smelt_codegen::env::parse_flag) {
            Some(true) => AttentionFusion::On,
            Some(false) => AttentionFusion::Off,
            None => AttentionFusion::Auto,
        }
    }
}

/// Where a schedule's kernels run, as far as planning cares: which plan of
/// an attention is the faster depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// The host: the interpreter and its dense paths.
    Cpu,
    /// A GPU with `memory` bytes of device memory (0 when unknown).
    Gpu {
        /// Total device memory in bytes.
        memory: u64,
    },
}

/// What a plan depends on besides the graph; part of the schedule cache
/// key. A [`Fusion`] converts to the options a plain realize uses
/// (attention fusion from the environment, the CPU target); a tensor's
/// realize sets the target to its device ([`Planning::on`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Planning {
    /// Fused or one kernel per op.
    pub fusion: Fusion,
    /// Whether attention is fused (with `Fusion::On`).
    pub attention: AttentionFusion,
    /// Where the kernels run.
    pub target: Target,
}

impl Planning {
    /// These options for kernels that run on `target`.
    pub fn on(self, target: Target) -> Planning {
        Planning { target, ..self }
    }

    /// These options with attention fusion `attention`.
    pub fn attention(self, attention: AttentionFusion) -> Planning {
        Planning { attention, ..self }
    }
}

impl From<Fusion> for Planning {
    fn from(fusion: Fusion) -> Planning {
        Planning {
            fusion,
            attention: AttentionFusion::from_env(),
            target: Target::Cpu,
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

impl Schedule {
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
