//! The lazy graph: every tensor is a node; nothing runs until a schedule is
//! made and executed.

use crate::view::ShapeTracker;
use smelt_codegen::{BinaryOp, DType, ReduceOp, UnaryOp};
use std::any::Any;
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
    Unary(UnaryOp, NodeRef),
    Binary(BinaryOp, NodeRef, NodeRef),
    Where(NodeRef, NodeRef, NodeRef),
    /// Conversion to the node's dtype; with the same dtype, a copy.
    Cast(NodeRef),
    /// Reduction over `axes`; the result keeps them with size 1.
    Reduce(ReduceOp, NodeRef, Vec<usize>),
    /// `a[.., m, k] @ b[.., k, n]` with equal batch axes.
    Matmul(NodeRef, NodeRef),
}

impl Op {
    /// The node's sources.
    pub fn srcs(&self) -> Vec<&NodeRef> {
        match self {
            Op::Buffer | Op::Const(_) => vec![],
            Op::View(a, _) | Op::Unary(_, a) | Op::Cast(a) | Op::Reduce(_, a, _) => vec![a],
            Op::Binary(_, a, b) | Op::Matmul(a, b) => vec![a, b],
            Op::Where(c, a, b) => vec![c, a, b],
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
        }
    }
}

struct State {
    op: Op,
    buffer: Option<BufferHandle>,
}

/// One node of the lazy graph.
pub struct Node {
    id: u64,
    shape: Vec<usize>,
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
    /// Records a new node.
    pub fn new(op: Op, shape: Vec<usize>, dtype: DType) -> NodeRef {
        Arc::new(Node {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            shape,
            dtype,
            state: Mutex::new(State { op, buffer: None }),
        })
    }

    /// A node holding existing data.
    pub fn buffer(buf: BufferHandle, shape: Vec<usize>, dtype: DType) -> NodeRef {
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

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

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
    /// this node used can be freed.
    pub fn set_realized(&self, buf: BufferHandle) {
        let mut st = self.lock();
        st.buffer = Some(buf);
        st.op = Op::Buffer;
    }
}
