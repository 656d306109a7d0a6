//! The lazy graph: every tensor is a node; nothing runs until a schedule is
//! made and executed.

use crate::view::ShapeTracker;
use rustc_hash::FxHashSet;
use smallvec::{smallvec, SmallVec};
use smelt_codegen::philox::Draw;
use smelt_codegen::{Axes, BinaryOp, DType, ReduceOp, ScanOp, Shape, SortOp, UnaryOp};
use std::any::Any;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A realized buffer, owned by the runtime; the graph only holds it.
pub type BufferHandle = Arc<dyn Any + Send + Sync>;

/// A shared reference to a node.
pub type NodeRef = Arc<Node>;

/// What a node computes. Sources have the node's shape except where noted;
/// the tensor API inserts broadcasts and casts before recording.
#[derive(Clone, Debug)]
pub enum Op {
    /// Data that already exists (created from host data or realized).
    Buffer,
    /// A rank-0 constant; other shapes are views of it.
    Const(f64),
    /// A movement op: the source read through a shape tracker (shared, so
    /// cloning an op is cheap).
    View(NodeRef, Arc<ShapeTracker>),
    /// An elementwise op of one source.
    Unary(UnaryOp, NodeRef),
    /// An elementwise op of two sources (same shape and dtype).
    Binary(BinaryOp, NodeRef, NodeRef),
    /// `cond ? a : b`, elementwise.
    Where(NodeRef, NodeRef, NodeRef),
    /// Conversion to the node's dtype; with the same dtype, a copy.
    Cast(NodeRef),
    /// Reduction over `axes`; the result keeps them with size 1.
    Reduce(ReduceOp, NodeRef, Axes),
    /// `a[.., m, k] @ b[.., k, n]` with equal batch axes.
    Matmul(NodeRef, NodeRef),
    /// Inclusive scan along `axis` (the source's shape). The source is
    /// `F32` or `I32` and the scan runs in its dtype; the node's dtype is
    /// the result's (a half, bool, or the index dtype of index ops), to
    /// which each element is rounded when stored.
    Scan(ScanOp, NodeRef, usize),
    /// `gather(src, index, axis)`: element `p` is `src` at `p` with
    /// coordinate `axis` replaced by `index[p]` (the node has `index`'s
    /// shape, which equals `src`'s but along `axis`; `index` has an index
    /// dtype). Computed inside its consumers' kernels as an indirect load
    /// of `src`, which is read from a buffer through one strided view.
    Gather(NodeRef, NodeRef, usize),
    /// `I32`: `start + step * x` at row-major linear index `x` (the
    /// creator checks every value fits an `I32`). Never held in memory
    /// by a fused kernel: it lowers to an index expression of the loop
    /// coordinates it reads through (an arange viewed as a column is the
    /// row coordinate), `start` and `step` compiled in, so a causal mask
    /// `j <= i + c` is visible in the kernel (`Kernel::attention`).
    Iota {
        /// The value at linear index 0.
        start: i64,
        /// The difference between neighbours.
        step: i64,
    },
    /// A Philox draw per element (`smelt_codegen::philox`), elementwise
    /// over its sources: the key's two words, the counter (an `Iota`, so
    /// an element's number depends on its position alone) and, for
    /// [`Draw::Below`], the bound.
    Random(Draw, Vec<NodeRef>),
    /// Stable sort along `axis` (the source's shape) of an `F32` or `I32`
    /// source: the first `op.k` sorted values (rounded to the node's
    /// dtype) or their positions. The node's shape is the source's with
    /// `k` along `axis`.
    Sort(SortOp, NodeRef, usize),
    /// `scatter_add(init, index, src, axis)`: `init` with `src[p]` added at
    /// `p` with coordinate `axis` replaced by `index[p]`, for every `p` of
    /// `index`'s shape (`src` has that shape and the node's dtype; the node
    /// has `init`'s shape). `init` is a copy made for this node alone and
    /// materialized by its own kernel; a scatter kernel over `index`'s
    /// shape then adds into that buffer in place, and the buffer becomes
    /// the node's.
    ScatterAdd(NodeRef, NodeRef, NodeRef, usize),
}

impl Op {
    /// The node's sources (at most four, a bounded draw's, so no
    /// allocation: graph walks ask for them at every node).
    pub fn srcs(&self) -> SmallVec<[&NodeRef; 4]> {
        match self {
            Op::Buffer | Op::Const(_) | Op::Iota { .. } => SmallVec::new(),
            Op::Random(_, srcs) => srcs.iter().collect(),
            Op::View(a, _)
            | Op::Unary(_, a)
            | Op::Cast(a)
            | Op::Reduce(_, a, _)
            | Op::Scan(_, a, _)
            | Op::Sort(_, a, _) => smallvec![a],
            Op::Binary(_, a, b) | Op::Matmul(a, b) | Op::Gather(a, b, _) => smallvec![a, b],
            Op::Where(c, a, b) | Op::ScatterAdd(c, a, b, _) => smallvec![c, a, b],
        }
    }

    /// The sources read at the node's own coordinates (through the same
    /// tracker): all of them but a gather's source, read at data-dependent
    /// positions, and none of a scatter's, which its own kernels compute.
    pub fn pointwise_srcs(&self) -> SmallVec<[&NodeRef; 4]> {
        match self {
            Op::Gather(_, index, _) => smallvec![index],
            Op::ScatterAdd(..) => SmallVec::new(),
            op => op.srcs(),
        }
    }

    /// Short name for schedules and kernel names.
    pub fn name(&self) -> String {
        match self {
            Op::Buffer => "buffer".into(),
            Op::Const(_) => "const".into(),
            Op::View(..) => "view".into(),
            Op::Unary(op, _) => op.name().into(),
            Op::Binary(op, ..) => op.name().into(),
            Op::Where(..) => "where".into(),
            Op::Cast(..) => "cast".into(),
            Op::Reduce(op, ..) => op.name().into(),
            Op::Matmul(..) => "matmul".into(),
            Op::Scan(op, ..) => op.name().into(),
            Op::Gather(..) => "gather".into(),
            Op::Iota { start: 0, step: 1 } => "iota".into(),
            Op::Iota { start, step } => format!("iota {start} + {step}x"),
            Op::Random(d, _) => d.name().into(),
            Op::Sort(op, ..) => op.name().into(),
            Op::ScatterAdd(..) => "scatter_add".into(),
        }
    }
}

struct State {
    op: Op,
    buffer: Option<BufferHandle>,
}

/// The op of a node, borrowed under the node's lock (see [`Node::op_ref`]).
pub struct OpRef<'a>(MutexGuard<'a, State>);

impl Deref for OpRef<'_> {
    type Target = Op;

    fn deref(&self) -> &Op {
        &self.0.op
    }
}

impl OpRef<'_> {
    /// The realized data, if any (read under the same lock as the op).
    pub fn data(&self) -> Option<&BufferHandle> {
        self.0.buffer.as_ref()
    }
}

/// One node of the lazy graph.
pub struct Node {
    id: u64,
    shape: Shape,
    dtype: DType,
    state: Mutex<State>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Node#{}({:?} {} {})",
            self.id,
            self.shape,
            self.dtype,
            self.op().name()
        )
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl Node {
    /// Records a new node (`shape`: a [`Shape`], a `Vec` or a slice).
    pub fn new(op: Op, shape: impl Into<Shape>, dtype: DType) -> NodeRef {
        Arc::new(Node {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            shape: shape.into(),
            dtype,
            state: Mutex::new(State { op, buffer: None }),
        })
    }

    /// A node holding existing data.
    pub fn buffer(buf: BufferHandle, shape: impl Into<Shape>, dtype: DType) -> NodeRef {
        let n = Node::new(Op::Buffer, shape, dtype);
        n.lock().buffer = Some(buf);
        n
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-written
        // (every write is a single assignment), so a poisoned lock is usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Unique id (stable for the node's life).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The op (a `Buffer` once realized).
    pub fn op(&self) -> Op {
        self.lock().op.clone()
    }

    /// The op, borrowed: no clone of its sources' reference counts, which
    /// graph walks would pay at every node. Holds this node's lock until
    /// dropped, so the holder must not call another method of this node
    /// that reads its op or data (the lock is not reentrant); other nodes
    /// are fine.
    pub fn op_ref(&self) -> OpRef<'_> {
        OpRef(self.lock())
    }

    /// True if the node computes values (see [`is_compute`]), read without
    /// cloning its op.
    pub fn computes(&self) -> bool {
        is_compute(&self.lock().op)
    }

    /// True if the node is a reduction or a matmul (a kernel computes it
    /// over its own loop domain).
    pub fn is_row_op(&self) -> bool {
        matches!(self.lock().op, Op::Reduce(..) | Op::Matmul(..))
    }

    /// The sources, each an owned reference (not the whole op: a walk
    /// that only follows sources clones nothing else).
    pub fn srcs(&self) -> SmallVec<[NodeRef; 4]> {
        self.lock().op.srcs().into_iter().cloned().collect()
    }

    /// The sources read at the node's own coordinates (see
    /// [`Op::pointwise_srcs`]), each an owned reference.
    pub fn pointwise_srcs(&self) -> SmallVec<[NodeRef; 4]> {
        self.lock()
            .op
            .pointwise_srcs()
            .into_iter()
            .cloned()
            .collect()
    }

    /// The op and the realized data, read together (one lock).
    pub fn op_and_data(&self) -> (Op, Option<BufferHandle>) {
        let st = self.lock();
        (st.op.clone(), st.buffer.clone())
    }

    /// The realized data, if any.
    pub fn realized(&self) -> Option<BufferHandle> {
        self.lock().buffer.clone()
    }

    /// Stores the realized data and drops the sources, so buffers that only
    /// this node used can be freed. Only under the graph lock (see
    /// [`GraphLock`]), so no planner sees a node change state mid-plan; a
    /// node that is already realized keeps its buffer (another thread
    /// computed the same values first), so committing twice is harmless.
    pub fn set_realized(&self, buf: BufferHandle, _lock: &GraphLock) {
        let old = {
            let mut st = self.lock();
            if st.buffer.is_some() {
                return;
            }
            st.buffer = Some(buf);
            std::mem::replace(&mut st.op, Op::Buffer)
        };
        // Sources are dropped outside the node's lock.
        drop(old);
    }

    /// Replaces a realized node's buffer with one holding the same values
    /// in another place (created host data once it is on its device), under
    /// the graph lock like every other change of node state.
    pub fn replace_realized(&self, buf: BufferHandle, _lock: &GraphLock) {
        let mut st = self.lock();
        if st.buffer.is_some() {
            st.buffer = Some(buf);
        }
    }
}

impl Drop for Node {
    /// Drops the sources that this node owns alone through a work list: the
    /// default recursive drop of `Arc<Node>` chains would overflow the stack
    /// on a deep unrealized graph.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut work = Vec::new();
        take_srcs(&mut st.op, &mut work);
        while let Some(mut n) = work.pop() {
            // Shared nodes are only released here; whoever drops the last
            // reference runs this loop for them.
            if let Some(node) = Arc::get_mut(&mut n) {
                let st = node.state.get_mut().unwrap_or_else(|e| e.into_inner());
                take_srcs(&mut st.op, &mut work);
            }
        }
    }
}

/// Moves `op`'s sources into `out`, leaving `Op::Buffer`.
fn take_srcs(op: &mut Op, out: &mut Vec<NodeRef>) {
    match std::mem::replace(op, Op::Buffer) {
        Op::Buffer | Op::Const(_) | Op::Iota { .. } => {}
        Op::Random(_, srcs) => out.extend(srcs),
        Op::View(a, _)
        | Op::Unary(_, a)
        | Op::Cast(a)
        | Op::Reduce(_, a, _)
        | Op::Scan(_, a, _)
        | Op::Sort(_, a, _) => out.push(a),
        Op::Binary(_, a, b) | Op::Matmul(a, b) | Op::Gather(a, b, _) => out.extend([a, b]),
        Op::Where(c, a, b) | Op::ScatterAdd(c, a, b, _) => out.extend([c, a, b]),
    }
}

/// The graph lock: held while a schedule is planned from the graph and
/// while its results are committed, so a planner reads one consistent
/// graph (no node becomes realized between hashing, planning and lowering)
/// while kernels run outside it, in parallel.
pub struct GraphLock {
    _guard: MutexGuard<'static, ()>,
}

impl GraphLock {
    /// Waits for the graph lock. Not reentrant: planning code below it
    /// must not take it again.
    pub fn acquire() -> GraphLock {
        static LOCK: Mutex<()> = Mutex::new(());
        // A panic while planning leaves no graph state half-written (nodes
        // change only in `set_realized`), so a poisoned lock is usable.
        GraphLock {
            _guard: LOCK.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }
}

/// Follows views down to the node that holds or computes the data.
pub fn base(node: &NodeRef) -> NodeRef {
    let mut n = node.clone();
    loop {
        let below = match &*n.op_ref() {
            Op::View(src, _) => src.clone(),
            _ => break,
        };
        n = below;
    }
    n
}

/// Visits every node reachable from `roots` once, sources before their
/// users (roots in order), with its op and realized data read together; a
/// realized node is a leaf (its sources are not followed). Iterative, so a
/// graph of any depth walks on a small stack. The one graph walk: the
/// planner's order and the schedule cache's hash both come from it.
///
/// The op is borrowed under the node's lock (nothing is cloned per node),
/// so `visit` must not read the op or data of the node it is given.
/// Callers hold the [`GraphLock`], so no node changes between its two
/// visits on the stack (sources pushed, then visited).
pub fn post_order(roots: &[NodeRef], mut visit: impl FnMut(&NodeRef, &Op, Option<&BufferHandle>)) {
    let mut done = FxHashSet::default();
    // A node, and whether its sources were pushed already.
    let mut stack: Vec<(NodeRef, bool)> = roots.iter().rev().map(|n| (n.clone(), false)).collect();
    while let Some((n, expanded)) = stack.pop() {
        if done.contains(&n.id()) {
            continue;
        }
        let op = n.op_ref();
        if !expanded && op.data().is_none() {
            let srcs = op.srcs();
            if !srcs.is_empty() {
                stack.push((n.clone(), true));
                for s in srcs.into_iter().rev() {
                    if !done.contains(&s.id()) {
                        stack.push((s.clone(), false));
                    }
                }
                continue;
            }
        }
        done.insert(n.id());
        visit(&n, &op, op.data());
    }
}

/// Unrealized nodes reachable from `roots`, sources first.
pub fn topo_order(roots: &[NodeRef]) -> Vec<NodeRef> {
    let mut order = Vec::new();
    post_order(roots, |n, _, data| {
        if data.is_none() {
            order.push(n.clone());
        }
    });
    order
}

/// True for nodes that compute values (not data, constants or views).
pub fn is_compute(op: &Op) -> bool {
    !matches!(op, Op::Buffer | Op::Const(_) | Op::View(..))
}
