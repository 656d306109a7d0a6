//! The kernel DAG of a schedule: kernels are nodes, buffers are edges.
//!
//! A buffer written by kernel `i` and read by kernel `j` is an edge
//! `i -> j` labelled with the buffer's index. A buffer that kernel `j`
//! writes again after kernel `i` (an in-place update: a scatter's adds
//! into its copy) is an edge `i -> j` too, and its readers read it from
//! its last writer. Buffers that exist before
//! the schedule runs (realized tensors) come from [`DagNode::Input`]
//! sources; buffers handed to the realized nodes go to [`DagNode::Result`]
//! sinks. So every buffer a kernel touches is an edge at that kernel, and
//! the questions runtimes and tools ask are graph questions:
//! - is the kernel order a topological order? ([`KernelDag::check_order`],
//!   [`KernelDag::topo_order`] derives one with petgraph's `toposort`);
//! - after which kernel can a buffer be freed? ([`KernelDag::last_uses`]);
//! - what does the schedule look like? (`Schedule::to_dot`, fusion/src/dot.rs).
//!
//! The graph is the kernel-level schedule, not the lazy graph of ops: the
//! lazy graph already is a DAG of reference-counted nodes, and the planner
//! walks it directly.

use crate::schedule::{BufferSpec, ScheduleItem};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;

/// A node of the kernel DAG.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DagNode {
    /// Kernel `i` of the schedule (`items[i]`); its node index is `i`.
    Kernel(usize),
    /// Buffer `b` exists before the schedule runs (a realized tensor).
    Input(usize),
    /// Buffer `b` is handed to a realized node once the schedule has run.
    Result(usize),
    /// Buffer `b` is written by a kernel, read by none and no result (the
    /// planner never makes one; kept so every write is an edge).
    Unread(usize),
    /// Buffer `b` is read by a kernel, written by none and not an input (a
    /// scheduler bug, which [`KernelDag::check_order`] reports).
    Missing(usize),
}

/// An edge: the buffer that flows along it (an index into
/// `Schedule::buffers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DagEdge {
    /// The buffer's index in `Schedule::buffers`.
    pub buffer: usize,
}

/// The kernel DAG of one schedule, with the buffer lifetimes derived from
/// it.
///
/// Built once per planned schedule (`lower_plans`) and shared with the
/// schedule cache, so a cached realize neither rebuilds the graph nor
/// recomputes `last_uses`, it borrows them. Measured in release on 1,000
/// kernels (`benches/schedule.rs`): building the DAG and its `last_uses`
/// takes 9-11 µs, the hand-written loop that computed `last_uses` on
/// every run before took 1.6 µs, so rebuilding per run would have made
/// the hot path slower (a cached realize of a small graph costs a few µs
/// of host time in all); reading the cached array costs nothing.
#[derive(Clone, Debug)]
pub struct KernelDag {
    graph: DiGraph<DagNode, DagEdge>,
    kernels: usize,
    last_uses: Vec<usize>,
}

impl KernelDag {
    /// The DAG of kernels `items` over `n_buffers` buffers (`buffers` says
    /// which exist before the run) whose results are the buffers `results`.
    pub fn new(items: &[ScheduleItem], buffers: &[BufferSpec], results: &[usize]) -> KernelDag {
        let n_buffers = buffers.len();
        let reads: usize = items.iter().map(|it| it.inputs.len()).sum();
        let mut graph = DiGraph::with_capacity(items.len() + results.len(), reads + results.len());
        for i in 0..items.len() {
            graph.add_node(DagNode::Kernel(i));
        }
        // Where each buffer comes from: its last writer, or a source node
        // made on its first read. A buffer written again (a scatter adding
        // into its copy in place) depends on its earlier writer: an edge
        // from that writer to the kernel updating it.
        let mut source: Vec<Option<NodeIndex>> = vec![None; n_buffers];
        for (i, it) in items.iter().enumerate() {
            let me = NodeIndex::new(i);
            for (o, &b) in it.outputs.iter().enumerate() {
                let prev = match source[b].replace(me) {
                    Some(prev) => prev,
                    // Adding into a buffer nothing wrote first reads it
                    // unwritten (`check_order` reports the `Missing` source).
                    None if it.kernel.stores.iter().any(|s| s.output == o && s.is_add()) => graph
                        .add_node(match buffers[b] {
                            BufferSpec::Realized { .. } => DagNode::Input(b),
                            BufferSpec::New { .. } => DagNode::Missing(b),
                        }),
                    None => continue,
                };
                graph.add_edge(prev, me, DagEdge { buffer: b });
            }
        }
        let mut read = vec![false; n_buffers];
        let mut origin = |graph: &mut DiGraph<DagNode, DagEdge>, b: usize| {
            *source[b].get_or_insert_with(|| {
                graph.add_node(match buffers[b] {
                    BufferSpec::Realized { .. } => DagNode::Input(b),
                    BufferSpec::New { .. } => DagNode::Missing(b),
                })
            })
        };
        for (j, it) in items.iter().enumerate() {
            for &b in &it.inputs {
                let from = origin(&mut graph, b);
                graph.add_edge(from, NodeIndex::new(j), DagEdge { buffer: b });
                read[b] = true;
            }
        }
        let mut is_result = vec![false; n_buffers];
        for &b in results {
            if std::mem::replace(&mut is_result[b], true) {
                continue;
            }
            let from = origin(&mut graph, b);
            let to = graph.add_node(DagNode::Result(b));
            graph.add_edge(from, to, DagEdge { buffer: b });
        }
        for (i, it) in items.iter().enumerate() {
            for &b in &it.outputs {
                let last_writer = source[b] == Some(NodeIndex::new(i));
                if last_writer && !read[b] && !is_result[b] {
                    let to = graph.add_node(DagNode::Unread(b));
                    graph.add_edge(NodeIndex::new(i), to, DagEdge { buffer: b });
                }
            }
        }
        let mut dag = KernelDag {
            graph,
            kernels: items.len(),
            last_uses: Vec::new(),
        };
        dag.last_uses = dag.derive_last_uses(n_buffers);
        dag
    }

    /// The petgraph graph (node `i < kernels()` is kernel `i`).
    pub fn graph(&self) -> &DiGraph<DagNode, DagEdge> {
        &self.graph
    }

    /// Number of kernels.
    pub fn kernels(&self) -> usize {
        self.kernels
    }

    /// The node of kernel `i`.
    pub fn kernel_node(&self, i: usize) -> NodeIndex {
        assert!(i < self.kernels, "kernel {i} of {}", self.kernels);
        NodeIndex::new(i)
    }

    /// For every buffer, the index of the last kernel that uses it
    /// (`usize::MAX` for results and unused buffers): runtimes free a
    /// buffer after that kernel.
    pub fn last_uses(&self) -> &[usize] {
        &self.last_uses
    }

    /// Every buffer is an edge at each kernel that reads it (incoming) or
    /// writes it (outgoing: to its readers, a result or an `Unread` sink),
    /// so the last kernel in schedule order with an edge of buffer `b` is
    /// its last use. Buffers that reach a result live on.
    fn derive_last_uses(&self, n_buffers: usize) -> Vec<usize> {
        let mut last = vec![usize::MAX; n_buffers];
        for k in 0..self.kernels {
            let n = NodeIndex::new(k);
            let edges = self
                .graph
                .edges_directed(n, Direction::Incoming)
                .chain(self.graph.edges_directed(n, Direction::Outgoing));
            for e in edges {
                // Kernels are visited in order, so the last write wins.
                last[e.weight().buffer] = k;
            }
        }
        for n in self.graph.node_weights() {
            if let DagNode::Result(b) = n {
                last[*b] = usize::MAX;
            }
        }
        last
    }

    /// Kernels in a topological order of the DAG (petgraph's `toposort`),
    /// or the kernel on a cycle.
    ///
    /// # Errors
    /// A kernel that lies on a cycle (a kernel reading what it or a later
    /// kernel of the cycle writes).
    pub fn topo_order(&self) -> Result<Vec<usize>, usize> {
        let order = petgraph::algo::toposort(&self.graph, None)
            .map_err(|c| self.kernel_of(c.node_id()).unwrap_or(usize::MAX))?;
        Ok(order
            .into_iter()
            .filter_map(|n| self.kernel_of(n))
            .collect())
    }

    /// Checks that running the kernels in schedule order is sound: the
    /// DAG has no cycle, every kernel runs after the kernels whose buffers
    /// it reads, and every buffer read is written or realized.
    ///
    /// # Errors
    /// What is wrong, in words.
    pub fn check_order(&self) -> Result<(), String> {
        if let Err(k) = self.topo_order() {
            return Err(format!("kernel {k} lies on a cycle of buffers"));
        }
        for e in self.graph.edge_references() {
            let (from, to) = (self.graph[e.source()], self.graph[e.target()]);
            match (from, to) {
                (DagNode::Kernel(i), DagNode::Kernel(j)) if i >= j => {
                    return Err(format!(
                        "kernel {j} reads buffer {} before kernel {i} writes it",
                        e.weight().buffer
                    ));
                }
                (DagNode::Missing(b), DagNode::Kernel(j)) => {
                    return Err(format!("kernel {j} reads buffer {b}, which nothing writes"));
                }
                (DagNode::Missing(b), _) => {
                    return Err(format!("result buffer {b} is written by no kernel"));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The kernel index of node `n`, if it is a kernel.
    pub fn kernel_of(&self, n: NodeIndex) -> Option<usize> {
        match self.graph.node_weight(n) {
            Some(DagNode::Kernel(i)) => Some(*i),
            _ => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::graph::BufferHandle;
    use smelt_codegen::{Arg, DType, Expr, Kernel, KernelKind, Store, StoreKind};
    use std::sync::Arc;

    /// A kernel item reading `inputs` and writing `outputs` (an empty
    /// elementwise kernel: the DAG only looks at buffer indices).
    pub(crate) fn item(ops: &[&str], inputs: &[usize], outputs: &[usize]) -> ScheduleItem {
        let arg = Arg {
            dtype: DType::F32,
            len: 16,
        };
        ScheduleItem {
            kernel: Kernel {
                name: format!("elementwise_{}", ops.join("_")),
                kind: KernelKind::Elementwise,
                ranges: smelt_codegen::dims![16],
                n_kept: 1,
                inputs: vec![arg; inputs.len()],
                outputs: vec![arg; outputs.len()],
                insts: vec![],
                stores: vec![],
                scalars: vec![],
            },
            ops: ops.iter().map(|s| s.to_string()).collect(),
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
            scalars: vec![],
        }
    }

    pub(crate) fn realized() -> BufferSpec {
        let data: BufferHandle = Arc::new(());
        BufferSpec::Realized { node: 7, data }
    }

    pub(crate) fn new_buf() -> BufferSpec {
        BufferSpec::New {
            dtype: DType::F32,
            len: 16,
        }
    }

    /// The hand-written loop `Schedule::last_uses` was before the DAG, kept
    /// as the reference the DAG must agree with.
    fn last_uses_loop(items: &[ScheduleItem], n_buffers: usize, results: &[usize]) -> Vec<usize> {
        let mut last = vec![usize::MAX; n_buffers];
        for (i, it) in items.iter().enumerate() {
            for b in it.inputs.iter().chain(&it.outputs) {
                last[*b] = i;
            }
        }
        for b in results {
            last[*b] = usize::MAX;
        }
        last
    }

    fn edges(dag: &KernelDag) -> Vec<(DagNode, DagNode, usize)> {
        let g = dag.graph();
        let mut v: Vec<_> = g
            .edge_references()
            .map(|e| (g[e.source()], g[e.target()], e.weight().buffer))
            .collect();
        v.sort_by_key(|(a, b, buf)| (format!("{a:?}"), format!("{b:?}"), *buf));
        v
    }

    /// Buffers: 0 realized input, 1 and 2 written by kernel 0, 3 written by
    /// kernel 1, 4 never used, 5 written by kernel 2 (the result). Buffer 1
    /// is read by kernels 1 and 2.
    fn diamond() -> (Vec<ScheduleItem>, Vec<BufferSpec>, Vec<usize>) {
        let items = vec![
            item(&["max", "sub"], &[0], &[1, 2]),
            item(&["exp"], &[1], &[3]),
            item(&["sum", "div"], &[1, 2, 3], &[5]),
        ];
        let buffers = vec![
            realized(),
            new_buf(),
            new_buf(),
            new_buf(),
            new_buf(),
            new_buf(),
        ];
        (items, buffers, vec![5])
    }

    #[test]
    fn edges_follow_buffers() {
        let (items, buffers, results) = diamond();
        let dag = KernelDag::new(&items, &buffers, &results);
        use DagNode::*;
        let mut want = vec![
            (Input(0), Kernel(0), 0),
            (Kernel(0), Kernel(1), 1),
            (Kernel(0), Kernel(2), 1),
            (Kernel(0), Kernel(2), 2),
            (Kernel(1), Kernel(2), 3),
            (Kernel(2), Result(5), 5),
        ];
        want.sort_by_key(|(a, b, buf)| (format!("{a:?}"), format!("{b:?}"), *buf));
        assert_eq!(edges(&dag), want);
        assert_eq!(dag.kernels(), 3);
        assert_eq!(dag.graph().node_count(), 5, "3 kernels, an input, a result");
        assert_eq!(dag.kernel_of(dag.kernel_node(2)), Some(2));
    }

    #[test]
    fn topological_order() {
        let (items, buffers, results) = diamond();
        let dag = KernelDag::new(&items, &buffers, &results);
        assert_eq!(dag.topo_order(), Ok(vec![0, 1, 2]));
        assert_eq!(dag.check_order(), Ok(()));
        // Independent kernels: any order is topological.
        let items = vec![item(&["a"], &[0], &[1]), item(&["b"], &[0], &[2])];
        let buffers = vec![realized(), new_buf(), new_buf()];
        let dag = KernelDag::new(&items, &buffers, &[1, 2]);
        let mut order = dag.topo_order().unwrap();
        order.sort_unstable();
        assert_eq!(order, vec![0, 1]);
        assert_eq!(dag.check_order(), Ok(()));
    }

    #[test]
    fn order_errors() {
        // Kernel 0 reads what kernel 1 writes.
        let items = vec![item(&["a"], &[1], &[2]), item(&["b"], &[0], &[1])];
        let buffers = vec![realized(), new_buf(), new_buf()];
        let dag = KernelDag::new(&items, &buffers, &[2]);
        let err = dag.check_order().unwrap_err();
        assert!(
            err.contains("kernel 0 reads buffer 1 before kernel 1"),
            "{err}"
        );
        // The DAG is still acyclic, and petgraph finds the order that works.
        assert_eq!(dag.topo_order(), Ok(vec![1, 0]));
        // A cycle: each kernel reads the other's output.
        let items = vec![item(&["a"], &[1], &[0]), item(&["b"], &[0], &[1])];
        let dag = KernelDag::new(&items, &[new_buf(), new_buf()], &[]);
        assert!(dag.topo_order().is_err());
        assert!(dag.check_order().unwrap_err().contains("cycle"));
        // A read of a new buffer nothing writes.
        let items = vec![item(&["a"], &[0], &[1])];
        let dag = KernelDag::new(&items, &[new_buf(), new_buf()], &[1]);
        assert!(dag.check_order().unwrap_err().contains("nothing writes"));
    }

    #[test]
    fn last_uses_match_the_loop() {
        let (items, buffers, results) = diamond();
        let dag = KernelDag::new(&items, &buffers, &results);
        // Buffer 1 is read by kernels 1 and 2; buffer 4 is unused.
        assert_eq!(dag.last_uses(), &[0, 2, 2, 2, usize::MAX, usize::MAX]);
        let cases: Vec<(Vec<ScheduleItem>, Vec<BufferSpec>, Vec<usize>)> = vec![
            diamond(),
            (vec![], vec![realized(), new_buf()], vec![]),
            // A realized input that is also read last by the first kernel,
            // two results, one of which a later kernel reads.
            (
                vec![
                    item(&["a"], &[0], &[1]),
                    item(&["b"], &[1, 0], &[2]),
                    item(&["c"], &[3], &[4]),
                ],
                vec![realized(), new_buf(), new_buf(), realized(), new_buf()],
                vec![1, 4],
            ),
            // A write nobody reads (freed right after its kernel), and a
            // kernel with two outputs read by one later kernel.
            (
                vec![item(&["a"], &[0], &[1, 2, 3]), item(&["b"], &[1, 2], &[4])],
                vec![realized(), new_buf(), new_buf(), new_buf(), new_buf()],
                vec![4],
            ),
            // The same buffer read twice by one kernel.
            (
                vec![item(&["a"], &[0, 0], &[1])],
                vec![realized(), new_buf()],
                vec![1],
            ),
        ];
        for (items, buffers, results) in cases {
            let dag = KernelDag::new(&items, &buffers, &results);
            assert_eq!(
                dag.last_uses(),
                last_uses_loop(&items, buffers.len(), &results).as_slice()
            );
            assert_eq!(dag.check_order(), Ok(()));
        }
    }

    /// Kernel 1 adds into buffer 1, which kernel 0 wrote (a scatter), and
    /// kernel 2 reads the updated buffer.
    #[test]
    fn updates_in_place_follow_the_first_write() {
        let add = || {
            let mut it = item(&["scatter_add"], &[0], &[1]);
            it.kernel.stores.push(Store {
                output: 0,
                index: Expr::var(0),
                value: 0,
                kind: StoreKind::AddAt {
                    at: 0,
                    stride: 1,
                    len: 16,
                },
            });
            it
        };
        let items = vec![
            item(&["cast"], &[0], &[1]),
            add(),
            item(&["exp"], &[1], &[2]),
        ];
        let buffers = vec![realized(), new_buf(), new_buf()];
        let dag = KernelDag::new(&items, &buffers, &[1, 2]);
        use DagNode::*;
        let mut want = vec![
            (Input(0), Kernel(0), 0),
            (Input(0), Kernel(1), 0),
            (Kernel(0), Kernel(1), 1),
            (Kernel(1), Kernel(2), 1),
            (Kernel(1), Result(1), 1),
            (Kernel(2), Result(2), 2),
        ];
        want.sort_by_key(|(a, b, buf)| (format!("{a:?}"), format!("{b:?}"), *buf));
        assert_eq!(edges(&dag), want);
        assert_eq!(dag.topo_order(), Ok(vec![0, 1, 2]));
        assert_eq!(dag.check_order(), Ok(()));
        // Adds into a buffer before anything wrote it.
        let swapped = vec![add(), item(&["cast"], &[0], &[1])];
        let dag = KernelDag::new(&swapped, &buffers[..2], &[1]);
        let err = dag.check_order().unwrap_err();
        assert!(
            err.contains("kernel 0 reads buffer 1, which nothing writes"),
            "{err}"
        );
    }

    #[test]
    fn unread_writes_are_sinks() {
        let items = vec![item(&["a"], &[0], &[1, 2])];
        let dag = KernelDag::new(&items, &[realized(), new_buf(), new_buf()], &[1]);
        let sinks: Vec<DagNode> = dag
            .graph()
            .node_weights()
            .copied()
            .filter(|n| matches!(n, DagNode::Unread(_)))
            .collect();
        assert_eq!(sinks, vec![DagNode::Unread(2)]);
        assert_eq!(dag.last_uses(), &[0, usize::MAX, 0]);
    }
}
