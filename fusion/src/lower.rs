//! Lowering: a group of graph nodes that the scheduler put in one kernel
//! becomes kernel IR. Views are folded into index expressions by composing
//! shape trackers down to the loads, so movement ops never cost a kernel.

use crate::domain::{matmul_domain, matmul_operands, AttnVar, Domain, Source};
use crate::graph::is_compute;
use crate::graph::{BufferHandle, NodeRef, Op};
use crate::schedule::ScalarSpec;
use crate::view::{contiguous_strides, ShapeTracker, View};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::{smallvec, SmallVec};
use smelt_codegen::{
    Arg, BinaryOp, Cond, DType, Expr, Gather, Inst, Kernel, KernelKind, Node, ReduceOp, SortPart,
    Store, StoreKind, Val,
};
use std::hash::{Hash, Hasher};

/// Follows views down from `src` while `stop` says no; returns the node it
/// stopped at and the tracker from `src`'s coordinates to that node's
/// linear index.
fn view_chain(src: &NodeRef, stop: impl Fn(&NodeRef) -> bool) -> (NodeRef, ShapeTracker) {
    let mut t = ShapeTracker::contiguous(src.shape());
    let mut n = src.clone();
    while !stop(&n) {
        let below = match &*n.op_ref() {
            Op::View(below, st) => {
                t = st.compose(&t);
                below.clone()
            }
            _ => break,
        };
        n = below;
    }
    (n, t)
}

/// The one strided, unmasked view of `t`, if it is that.
fn single_view(t: &ShapeTracker) -> Option<&View> {
    match t.views.as_slice() {
        [v] if v.mask.is_none() => Some(v),
        _ => None,
    }
}

/// Gather sources the planner materializes: a gather reads its source
/// with one indirect load, so the source must be data (a buffer, or a node
/// another kernel materializes) read through one strided view. Where the
/// views from the source down to its data are one strided view, the node
/// below them is materialized if it is computed; otherwise the source
/// itself (a stacked or padded view, a view of a constant).
pub fn gather_sources(order: &[NodeRef]) -> Vec<u64> {
    let mut out = Vec::new();
    for n in order {
        // Borrowed: every node of the plan passes here.
        let src = match &*n.op_ref() {
            Op::Gather(src, _, _) => src.clone(),
            _ => continue,
        };
        let (root, t) = view_chain(&src, |x| x.realized().is_some());
        match single_view(&t) {
            Some(_) if root.realized().is_some() => {}
            Some(_) if root.computes() => out.push(root.id()),
            _ => out.push(src.id()),
        }
    }
    out
}

/// A reduction or matmul a kernel could not compute in its domain.
pub struct Failure {
    /// The reduction or matmul.
    pub node: NodeRef,
    /// Nodes from the kernel's stored node down to `node` (exclusive).
    pub path: Vec<NodeRef>,
}

/// Shape trackers interned once per planning run and shared by every
/// lowering in it (the planner lowers the graph several times): their
/// index expressions and compositions are computed once. A tracker is over
/// its kernel's domain shape, so its expression depends on it alone.
#[derive(Default)]
pub struct Trackers {
    list: Vec<ShapeTracker>,
    ids: FxHashMap<ShapeTracker, usize>,
    exprs: Vec<Option<(Expr, Cond)>>,
    /// `(view tracker address, tracker id) -> composed tracker id`.
    composed: FxHashMap<(usize, usize), usize>,
}

impl Trackers {
    fn intern(&mut self, t: &ShapeTracker) -> usize {
        if let Some(id) = self.ids.get(t) {
            return *id;
        }
        self.list.push(t.clone());
        self.exprs.push(None);
        self.ids.insert(t.clone(), self.list.len() - 1);
        self.list.len() - 1
    }

    fn get(&self, tid: usize) -> &ShapeTracker {
        &self.list[tid]
    }

    /// Index and validity of tracker `tid` over its domain.
    fn expr(&mut self, tid: usize) -> (Expr, Cond) {
        if self.exprs[tid].is_none() {
            let t = &self.list[tid];
            let ranges: Vec<i64> = t.shape().iter().map(|n| *n as i64).collect();
            let vars: Vec<Expr> = (0..ranges.len()).map(Expr::var).collect();
            self.exprs[tid] = Some(t.expr(&vars, &ranges));
        }
        self.exprs[tid].clone().expect("computed above")
    }

    /// The id of view `st` (held by a graph node, so its address is stable
    /// for the run) read through tracker `tid`.
    fn compose(&mut self, st: &std::sync::Arc<ShapeTracker>, tid: usize) -> usize {
        let key = (std::sync::Arc::as_ptr(st) as usize, tid);
        if let Some(c) = self.composed.get(&key) {
            return *c;
        }
        let c = self.intern(&st.compose(&self.list[tid]));
        self.composed.insert(key, c);
        c
    }
}

/// Where a kernel input's data comes from.
#[derive(Clone)]
pub enum Input {
    /// A buffer of the schedule (materialized by an earlier kernel).
    Scheduled(usize),
    /// Data that already exists, held by the node with this id.
    Realized(u64, BufferHandle),
}

impl Input {
    fn same(&self, other: &Input) -> bool {
        match (self, other) {
            (Input::Scheduled(a), Input::Scheduled(b)) => a == b,
            (Input::Realized(a, _), Input::Realized(b, _)) => a == b,
            _ => false,
        }
    }
}

/// An instruction as a hash-consing key (constants compare by bits).
struct InstKey(Inst, DType);

impl PartialEq for InstKey {
    fn eq(&self, o: &InstKey) -> bool {
        self.1 == o.1
            && match (&self.0, &o.0) {
                (Inst::Const(a), Inst::Const(b)) => a.to_bits() == b.to_bits(),
                (a, b) => a == b,
            }
    }
}

impl Eq for InstKey {}

impl Hash for InstKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.1.hash(h);
        std::mem::discriminant(&self.0).hash(h);
        match &self.0 {
            Inst::Load {
                input,
                index,
                valid,
            } => (input, index, valid).hash(h),
            Inst::Const(c) => c.to_bits().hash(h),
            Inst::Scalar(slot) => slot.hash(h),
            Inst::Valid(c) => c.hash(h),
            Inst::Cast(a) => a.hash(h),
            Inst::Unary(op, a) => (op, a).hash(h),
            Inst::Binary(op, a, b) => (op, a, b).hash(h),
            Inst::Where(c, a, b) => (c, a, b).hash(h),
            Inst::Reduce(op, a) => (op, a).hash(h),
            Inst::Scan(op, a) => (op, a).hash(h),
            Inst::Gather(g) => g.hash(h),
            Inst::Index(e) => e.hash(h),
            Inst::Random(d, ops) => (d, ops).hash(h),
            Inst::Sort(op, a) => (op, a).hash(h),
            Inst::Dot(a, b) | Inst::Attend(a, b) => (a, b).hash(h),
        }
    }
}

/// A node whose sources are evaluated before it (its op is read again
/// when it is finished: borrowed twice is cheaper than cloned once).
struct Pending {
    node: NodeRef,
    tid: usize,
    /// Each source with the tracker it is read through.
    srcs: SmallVec<[(NodeRef, usize); 4]>,
}

/// What visiting a node found.
enum Visited {
    /// Its value (it reads no source values).
    Done(Val),
    /// The sources to evaluate before it.
    Needs(Pending),
}

/// A step of [`Lowerer::value`]'s walk.
enum Task {
    /// Evaluate a node at a tracker (unless memoised).
    Visit(NodeRef, usize),
    /// Combine the values of a node's sources.
    Finish(Pending),
}

/// Builds one kernel's IR.
pub struct Lowerer<'a> {
    domain: &'a Domain,
    /// Nodes read from buffers rather than computed here, by node id, with
    /// their schedule buffer (the kernel's own outputs excepted).
    leaves: &'a FxHashMap<u64, usize>,
    own: FxHashSet<u64>,
    insts: Vec<Node>,
    cse: FxHashMap<InstKey, Val>,
    memo: FxHashMap<(u64, usize), Val>,
    /// Interned trackers: values are memoised per (node, tracker id).
    trackers: &'a mut Trackers,
    /// What each kernel input reads, in order.
    pub inputs: Vec<Input>,
    input_args: Vec<Arg>,
    /// The graph constant each scalar parameter holds, by slot, and the
    /// slots' dtypes.
    pub scalars: Vec<ScalarSpec>,
    scalar_dtypes: Vec<DType>,
    /// Slot of each graph constant read, by node id.
    scalar_slot: FxHashMap<u64, usize>,
    outputs: Vec<Arg>,
    stores: Vec<Store>,
    /// Names of the graph ops computed, in order.
    pub op_names: Vec<String>,
    /// Path from the stored node to the node being visited (exclusive).
    stack: Vec<NodeRef>,
    /// Reductions and matmuls this kernel could not compute in its domain,
    /// with the path that reached them.
    pub failed: Vec<Failure>,
    /// Reductions and matmuls computed inside this kernel, by node id.
    pub inlined: Vec<u64>,
    matmul: bool,
    attention: bool,
    scan: bool,
    sort: bool,
    scatter: bool,
}

impl<'a> Lowerer<'a> {
    /// A lowerer for a kernel over `domain` that materializes `own` and
    /// loads the other nodes in `leaves`.
    pub fn new(
        domain: &'a Domain,
        leaves: &'a FxHashMap<u64, usize>,
        own: FxHashSet<u64>,
        trackers: &'a mut Trackers,
    ) -> Lowerer<'a> {
        Lowerer {
            domain,
            leaves,
            own,
            insts: Vec::new(),
            cse: FxHashMap::default(),
            memo: FxHashMap::default(),
            trackers,
            inputs: Vec::new(),
            input_args: Vec::new(),
            scalars: Vec::new(),
            scalar_dtypes: Vec::new(),
            scalar_slot: FxHashMap::default(),
            outputs: Vec::new(),
            stores: Vec::new(),
            op_names: Vec::new(),
            stack: Vec::new(),
            failed: Vec::new(),
            inlined: Vec::new(),
            matmul: false,
            attention: false,
            scan: false,
            sort: false,
            scatter: false,
        }
    }

    /// `node` (a reduction or matmul) cannot be computed in this kernel:
    /// records it for the planner, which decides what to materialize.
    fn fail(&mut self, node: &NodeRef) -> Val {
        if !self.failed.iter().any(|f| f.node.id() == node.id()) {
            let path = self.stack.clone();
            self.failed.push(Failure {
                node: node.clone(),
                path,
            });
        }
        self.constant(0.0, node.dtype())
    }

    /// The schedule buffer `node` is loaded from, if it is not computed here.
    fn leaf(&self, node: &NodeRef) -> Option<usize> {
        match self.leaves.get(&node.id()) {
            Some(b) if !self.own.contains(&node.id()) => Some(*b),
            _ => None,
        }
    }

    fn push(&mut self, inst: Inst, dtype: DType) -> Val {
        let key = InstKey(inst, dtype);
        if let Some(v) = self.cse.get(&key) {
            return *v;
        }
        self.insts.push(Node {
            inst: key.0.clone(),
            dtype,
        });
        let v = self.insts.len() - 1;
        self.cse.insert(key, v);
        v
    }

    /// A constant of the kernel's code (a mask's zero): never a graph
    /// constant, whose value is a parameter ([`Lowerer::scalar`]).
    fn constant(&mut self, c: f64, dtype: DType) -> Val {
        self.push(Inst::Const(dtype.round(c)), dtype)
    }

    /// The value of graph constant `node` (holding `value`): a scalar
    /// parameter, so kernels that differ only in constants' values share
    /// their code. One slot per node, never shared by equal values: the
    /// kernel is cached for later graphs, where the two may differ.
    fn scalar(&mut self, node: &NodeRef, value: f64) -> Val {
        let slot = match self.scalar_slot.get(&node.id()) {
            Some(slot) => *slot,
            None => {
                self.scalars.push(ScalarSpec {
                    node: node.id(),
                    value,
                });
                self.scalar_dtypes.push(node.dtype());
                self.scalar_slot.insert(node.id(), self.scalars.len() - 1);
                self.scalars.len() - 1
            }
        };
        self.push(Inst::Scalar(slot), node.dtype())
    }

    /// `value` where `valid` holds, else 0.
    fn masked(&mut self, valid: Cond, value: Val, dtype: DType) -> Val {
        if valid.is_always() {
            return value;
        }
        let zero = self.constant(0.0, dtype);
        if valid.is_never() {
            return zero;
        }
        let c = self.push(Inst::Valid(valid), DType::Bool);
        self.push(Inst::Where(c, value, zero), dtype)
    }

    fn input(&mut self, buffer: Input, arg: Arg) -> usize {
        match self.inputs.iter().position(|b| b.same(&buffer)) {
            Some(i) => i,
            None => {
                self.inputs.push(buffer);
                self.input_args.push(arg);
                self.inputs.len() - 1
            }
        }
    }

    /// The value of `node` at the domain point whose linear index into
    /// `node`'s contiguous shape is given by `t`.
    ///
    /// The graph is walked with an explicit stack (sources first, in
    /// order), not by recursion: a chain of a million ops must not overflow
    /// the thread's stack.
    pub fn value(&mut self, node: &NodeRef, t: &ShapeTracker) -> Val {
        let tid = self.trackers.intern(t);
        let mut tasks = vec![Task::Visit(node.clone(), tid)];
        while let Some(task) = tasks.pop() {
            match task {
                Task::Visit(n, tid) => {
                    if self.memo.contains_key(&(n.id(), tid)) {
                        continue;
                    }
                    match self.visit(&n, tid) {
                        Visited::Done(v) => {
                            self.memo.insert((n.id(), tid), v);
                        }
                        Visited::Needs(p) => {
                            // Sources on top, first source first.
                            let visits: Vec<Task> = p
                                .srcs
                                .iter()
                                .rev()
                                .map(|(s, t)| Task::Visit(s.clone(), *t))
                                .collect();
                            tasks.push(Task::Finish(p));
                            tasks.extend(visits);
                            self.stack.push(n);
                        }
                    }
                }
                Task::Finish(p) => {
                    let v = self.finish_op(&p);
                    self.stack.pop();
                    self.memo.insert((p.node.id(), p.tid), v);
                }
            }
        }
        self.memo[&(node.id(), tid)]
    }

    fn tracker_expr(&mut self, tid: usize) -> (Expr, Cond) {
        self.trackers.expr(tid)
    }

    /// The value of `node` at tracker `tid` if it needs no source values
    /// (a load, a constant, a reduction this kernel cannot compute), else
    /// the sources to evaluate first.
    fn visit(&mut self, node: &NodeRef, tid: usize) -> Visited {
        if self.fused_attention(node).is_some() {
            // Before the node's op is borrowed: recognising reads it.
            return match self.attention_srcs(node, tid) {
                Some(srcs) => Visited::Needs(Pending {
                    node: node.clone(),
                    tid,
                    srcs,
                }),
                None => Visited::Done(self.fail_op(node, &node.op())),
            };
        }
        let dt = node.dtype();
        // Borrowed under the node's lock: nothing below reads this node's
        // op or data again (only its id, shape and dtype, which need no
        // lock, and its sources).
        let op = node.op_ref();
        let leaf = match self.leaf(node) {
            Some(b) => Some(Input::Scheduled(b)),
            None => op.data().map(|h| Input::Realized(node.id(), h.clone())),
        };
        if let Some(buffer) = leaf {
            let input = self.input(
                buffer,
                Arg {
                    dtype: dt,
                    len: node.numel(),
                },
            );
            let (index, valid) = self.tracker_expr(tid);
            if valid.is_never() {
                return Visited::Done(self.constant(0.0, dt));
            }
            return Visited::Done(self.push(
                Inst::Load {
                    input,
                    index,
                    valid,
                },
                dt,
            ));
        }
        let srcs = match &*op {
            Op::Buffer => unreachable!("realized nodes are leaves"),
            Op::Const(c) => {
                // A non-finite constant (a mask's `-inf` fill, a NaN) is
                // part of the code, so the kernel's structure shows it
                // (`Kernel::attention` finds causal masks by it); the
                // schedule cache keys it by value (`cache::hash_op`).
                let v = if c.is_finite() {
                    self.scalar(node, *c)
                } else {
                    self.constant(*c, dt)
                };
                let (_, valid) = self.tracker_expr(tid);
                return Visited::Done(self.masked(valid, v, dt));
            }
            Op::Iota { start, step } => {
                // The linear index the tracker reads, as coordinates.
                let (index, valid) = self.tracker_expr(tid);
                let index = index.scale(*step).add_const(*start);
                self.op_names.push(op.name());
                let v = self.push(Inst::Index(index), dt);
                return Visited::Done(self.masked(valid, v, dt));
            }
            Op::View(src, st) => smallvec![(src.clone(), self.trackers.compose(st, tid))],
            Op::Reduce(_, a, axes) => {
                let own = Domain::reduce(a.shape(), axes);
                if own != *self.domain
                    || !self
                        .trackers
                        .get(tid)
                        .equivalent(&own.reduce_result(a.shape(), axes))
                {
                    return Visited::Done(self.fail_op(node, &op));
                }
                self.inlined.push(node.id());
                let src_t = self.domain.reduce_source(a.shape(), axes);
                smallvec![(a.clone(), self.trackers.intern(&src_t))]
            }
            Op::Scan(_, a, axis) => {
                // Computed only by its own kernel (scans are always
                // materialized), reading each point's own position.
                let own = Domain::scan(a.shape(), *axis);
                let t = own.scan_tracker(a.shape(), *axis);
                if own != *self.domain || !self.trackers.get(tid).equivalent(&t) {
                    return Visited::Done(self.fail_op(node, &op));
                }
                self.inlined.push(node.id());
                self.scan = true;
                smallvec![(a.clone(), self.trackers.intern(&t))]
            }
            Op::Sort(sort, a, axis) => {
                // Like a scan: computed only by its own kernel, which
                // reads the source at each point of its row.
                let own = Domain::of_sort(*sort, a, *axis);
                let t = own.sort_result(a.shape(), *axis, sort.k);
                if own != *self.domain || !self.trackers.get(tid).equivalent(&t) {
                    return Visited::Done(self.fail_op(node, &op));
                }
                self.inlined.push(node.id());
                self.sort = true;
                let src_t = own.scan_tracker(a.shape(), *axis);
                smallvec![(a.clone(), self.trackers.intern(&src_t))]
            }
            // Computed only by its own kernels (scatters are always
            // materialized, see `Lowerer::scatter_add`).
            Op::ScatterAdd(..) => return Visited::Done(self.fail_op(node, &op)),
            // An attention kernel loads what it cannot compute per point.
            Op::Gather(..) if matches!(self.domain.source, Source::Attention(_)) => {
                return Visited::Done(self.fail_op(node, &op))
            }
            Op::Matmul(a, b) => {
                let own = matmul_domain(a.shape(), b.shape());
                if own != *self.domain
                    || !self
                        .trackers
                        .get(tid)
                        .equivalent(&own.matmul_result(node.shape()))
                {
                    return Visited::Done(self.fail_op(node, &op));
                }
                self.inlined.push(node.id());
                self.matmul = true;
                let (ta, tb) = matmul_operands(a.shape(), b.shape());
                let (ta, tb) = (self.domain.tracker(ta), self.domain.tracker(tb));
                smallvec![
                    (a.clone(), self.trackers.intern(&ta)),
                    (b.clone(), self.trackers.intern(&tb)),
                ]
            }
            op => op
                .pointwise_srcs()
                .into_iter()
                .map(|s| (s.clone(), tid))
                .collect(),
        };
        Visited::Needs(Pending {
            node: node.clone(),
            tid,
            srcs,
        })
    }

    /// For a node this attention kernel fuses: whether it is the output
    /// (`true`) or the score (`false`) matmul.
    fn fused_attention(&self, node: &NodeRef) -> Option<bool> {
        match &self.domain.source {
            Source::Attention(a) if node.id() == a.output => Some(true),
            Source::Attention(a) if node.id() == a.score => Some(false),
            _ => None,
        }
    }

    /// The sources of an attention's output matmul (the logits and `v`)
    /// or score matmul (`q` and `kt`), each read at its variables; `None`
    /// where the kernel reads the node at another point than its own.
    fn attention_srcs(
        &mut self,
        node: &NodeRef,
        tid: usize,
    ) -> Option<SmallVec<[(NodeRef, usize); 4]>> {
        use AttnVar::{D, E, I, J};
        let output = self.fused_attention(node)?;
        let own = if output {
            self.domain.matmul_result(node.shape())
        } else {
            self.domain.attention_operand(node.shape(), [I, J])
        };
        if !self.trackers.get(tid).equivalent(&own) {
            return None;
        }
        let (x, walk_x, y, walk_y) = if output {
            let a = crate::attention::recognise(node)?;
            (a.logit, [I, J], a.v, [J, E])
        } else {
            let Op::Matmul(q, kt) = node.op() else {
                return None;
            };
            (q, [I, D], kt, [D, J])
        };
        self.inlined.push(node.id());
        self.attention = true;
        let tx = self.domain.attention_operand(x.shape(), walk_x);
        let ty = self.domain.attention_operand(y.shape(), walk_y);
        Some(smallvec![
            (x, self.trackers.intern(&tx)),
            (y, self.trackers.intern(&ty)),
        ])
    }

    /// [`Lowerer::fail`], naming the op like a computed one.
    fn fail_op(&mut self, node: &NodeRef, op: &Op) -> Val {
        let v = self.fail(node);
        self.op_names.push(op.name());
        v
    }

    /// The value of a pending node once its sources have values.
    fn finish_op(&mut self, p: &Pending) -> Val {
        let dt = p.node.dtype();
        let vals: SmallVec<[Val; 4]> = p
            .srcs
            .iter()
            .map(|(s, t)| self.memo[&(s.id(), *t)])
            .collect();
        let op = p.node.op_ref();
        if is_compute(&op) {
            self.op_names.push(op.name());
        }
        match &*op {
            Op::View(src, st) => {
                let (v, composed) = (vals[0], p.srcs[0].1);
                if st.has_mask() && self.leaf(src).is_none() && src.realized().is_none() {
                    // Padding of a computed value: zero outside the mask
                    // (a load already reads 0 there).
                    let (_, valid) = self.tracker_expr(composed);
                    self.masked(valid, v, dt)
                } else {
                    v
                }
            }
            Op::Unary(op, _) => self.push(Inst::Unary(*op, vals[0]), dt),
            Op::Binary(op, ..) => self.push(Inst::Binary(*op, vals[0], vals[1]), dt),
            Op::Where(..) => self.push(Inst::Where(vals[0], vals[1], vals[2]), dt),
            Op::Cast(a) => {
                if a.dtype() == dt {
                    vals[0]
                } else {
                    self.push(Inst::Cast(vals[0]), dt)
                }
            }
            Op::Reduce(op, ..) => self.push(Inst::Reduce(*op, vals[0]), dt),
            Op::Scan(op, a, _) => {
                // Values scan in the source's dtype (`F32` for every
                // float) and are rounded once to the node's.
                let acc = if op.is_index() { dt } else { a.dtype() };
                let v = self.push(Inst::Scan(*op, vals[0]), acc);
                if acc == dt {
                    v
                } else {
                    self.push(Inst::Cast(v), dt)
                }
            }
            Op::Random(d, _) => self.push(Inst::Random(*d, vals.to_vec()), dt),
            Op::Sort(op, a, _) => {
                // Values are the source's (`F32`, `I32`, `F64` or `I64`),
                // rounded once to the node's dtype.
                // Positions are computed as `I32` and widened to the
                // index dtype by the cast.
                let acc = match op.part {
                    SortPart::Indices => DType::I32,
                    SortPart::Values => a.dtype(),
                };
                let v = self.push(Inst::Sort(*op, vals[0]), acc);
                if acc == dt {
                    v
                } else {
                    self.push(Inst::Cast(v), dt)
                }
            }
            Op::Matmul(..) if self.fused_attention(&p.node).is_some() => {
                // Both sums accumulate in f32 (f64 for f64), each operand
                // cast on its own (the logits and `v` may differ).
                let acc = dt.compute_float();
                let [x, y] = [0, 1].map(|i| {
                    if p.srcs[i].0.dtype() == acc {
                        vals[i]
                    } else {
                        self.push(Inst::Cast(vals[i]), acc)
                    }
                });
                let inst = if self.fused_attention(&p.node) == Some(true) {
                    Inst::Attend(x, y)
                } else {
                    Inst::Dot(x, y)
                };
                let v = self.push(inst, acc);
                if acc == dt {
                    v
                } else {
                    self.push(Inst::Cast(v), dt)
                }
            }
            Op::Matmul(a, _) => {
                // Halves multiply into f32, f64 into f64, integers wrap.
                let acc = if dt.is_float() {
                    dt.compute_float()
                } else {
                    dt
                };
                let (va, vb) = if a.dtype() == acc {
                    (vals[0], vals[1])
                } else {
                    (
                        self.push(Inst::Cast(vals[0]), acc),
                        self.push(Inst::Cast(vals[1]), acc),
                    )
                };
                let prod = self.push(Inst::Binary(BinaryOp::Mul, va, vb), acc);
                let sum = self.push(Inst::Reduce(ReduceOp::Sum, prod), acc);
                if acc == dt {
                    sum
                } else {
                    self.push(Inst::Cast(sum), dt)
                }
            }
            Op::Gather(src, _, axis) => self.gather(&p.node, src, *axis, p.tid, vals[0]),
            Op::Buffer | Op::Const(_) | Op::Iota { .. } | Op::ScatterAdd(..) => {
                unreachable!("visited without sources")
            }
        }
    }

    /// `node = gather(src, index, axis)` at tracker `tid`, with `at` the
    /// index's value there: an indirect load of the data below `src`'s
    /// view. If `src` is not such data here (the kernel computes it, or
    /// the planner's rule in [`gather_sources`] was not applied), reports
    /// the node to materialize.
    fn gather(&mut self, node: &NodeRef, src: &NodeRef, axis: usize, tid: usize, at: Val) -> Val {
        let leaf = |me: &Self, n: &NodeRef| match me.leaf(n) {
            Some(b) => Some(Input::Scheduled(b)),
            None => n.realized().map(|h| Input::Realized(n.id(), h)),
        };
        let (data, t) = view_chain(src, |n| {
            leaf(self, n).is_some() || self.own.contains(&n.id())
        });
        let (Some(buffer), Some(v)) = (leaf(self, &data), single_view(&t)) else {
            // A source this kernel stores is read back from a later kernel.
            let culprit = if self.own.contains(&data.id()) {
                &data
            } else {
                src
            };
            return self.fail(culprit);
        };
        let (stride, len) = (v.strides[axis] as i64, src.shape()[axis] as i64);
        // The source's view with the gathered axis broadcast over the
        // node's shape: the index of the axis' element 0 at each point.
        let mut base = v.clone();
        base.shape = node.shape().into();
        base.strides[axis] = 0;
        let st = ShapeTracker {
            views: smallvec![base],
        }
        .compose(self.trackers.get(tid));
        let sid = self.trackers.intern(&st);
        let (index, valid) = self.tracker_expr(sid);
        let input = self.input(
            buffer,
            Arg {
                dtype: data.dtype(),
                len: data.numel(),
            },
        );
        self.push(
            Inst::Gather(Gather {
                input,
                index,
                valid,
                at,
                stride,
                len,
            }),
            node.dtype(),
        )
    }

    /// Adds `node = scatter_add(init, index, src, axis)` as this kernel's
    /// output `arg`, over the domain of `index` (this kernel's): at each
    /// point `src` and `index` are computed (their producers fused) and
    /// `src` is added to the output at the point with coordinate `axis`
    /// replaced by `index` ([`StoreKind::AddAt`]). The output buffer holds
    /// `init`'s copy, written by an earlier kernel.
    pub fn scatter_add(&mut self, node: &NodeRef, arg: Arg) {
        let Op::ScatterAdd(_, index, src, axis) = node.op() else {
            unreachable!("scatter_add lowers scatter nodes")
        };
        let points = ShapeTracker::contiguous(index.shape());
        let value = self.value(&src, &points);
        let at = self.value(&index, &points);
        // The output's strides with the scattered axis left to `at`.
        let mut strides = contiguous_strides(node.shape());
        let stride = std::mem::replace(&mut strides[axis], 0) as i64;
        let (out_index, _) = self
            .domain
            .tracker(strides)
            .expr(&self.domain.vars(), &self.domain.ranges);
        self.outputs.push(arg);
        self.stores.push(Store {
            output: self.outputs.len() - 1,
            index: out_index,
            value,
            kind: StoreKind::AddAt {
                at,
                stride,
                len: node.shape()[axis] as i64,
            },
        });
        self.scatter = true;
        self.op_names.push(node.op().name());
    }

    /// Adds an output buffer written at `index` with `value`.
    pub fn store(&mut self, arg: Arg, index: Expr, value: Val) -> usize {
        self.outputs.push(arg);
        let output = self.outputs.len() - 1;
        self.stores.push(Store::write(output, index, value));
        output
    }

    /// Adds an output buffer that no store writes (a sort's scratch).
    pub fn scratch(&mut self, arg: Arg) {
        self.outputs.push(arg);
    }

    /// The finished kernel; its kind follows from what it computes.
    pub fn finish(self) -> Kernel {
        let mut k = Kernel {
            name: String::new(),
            kind: KernelKind::Elementwise,
            ranges: self.domain.ranges.clone(),
            n_kept: self.domain.n_kept,
            inputs: self.input_args,
            outputs: self.outputs,
            scalars: self.scalar_dtypes,
            insts: self.insts,
            stores: self.stores,
        };
        let reduces = k
            .insts
            .iter()
            .filter(|n| matches!(n.inst, Inst::Reduce(..)))
            .count();
        let level = k.element_level();
        let element_store = k.stores.iter().any(|s| k.store_is_element_level(s, &level));
        k.kind = if self.attention {
            KernelKind::Attention
        } else if self.matmul {
            KernelKind::Matmul
        } else if self.scan {
            KernelKind::Scan
        } else if self.sort {
            KernelKind::Sort
        } else if self.scatter {
            KernelKind::Scatter
        } else if reduces == 0 {
            KernelKind::Elementwise
        } else if reduces == 1 && !element_store {
            KernelKind::Reduce
        } else {
            KernelKind::MultiReduce
        };
        k.name = format!("{}_{}", k.kind.name(), self.op_names.join("_"));
        k
    }
}
