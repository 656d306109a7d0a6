//! Copies part of a kernel's instruction DAG into a new, reduction-free
//! kernel over other loop variables, so the interpreter can evaluate a piece
//! of a matmul kernel (an operand, the epilogue) on its own.

use crate::expr::{Cond, Expr};
use crate::ir::{Inst, Kernel, Node, Val};

/// How old loop variables map to the new kernel's variables.
pub(super) struct VarMap<'a> {
    /// `to[old]`: the new variable, `None` when the new kernel lacks it.
    pub to: &'a [Option<usize>],
    /// Sizes of the new kernel's variables.
    pub ranges: &'a [i64],
}

impl VarMap<'_> {
    fn expr(&self, e: &Expr) -> Option<Expr> {
        let mut vs = Vec::new();
        e.vars(&mut vs);
        if vs.iter().any(|v| self.to[*v].is_none()) {
            return None;
        }
        Some(e.substitute(&|v| Expr::var(self.to[v].unwrap()), self.ranges))
    }

    fn cond(&self, c: &Cond) -> Option<Cond> {
        let mut vs = Vec::new();
        for (e, _, _) in c.checks() {
            e.vars(&mut vs);
        }
        if vs.iter().any(|v| self.to[*v].is_none()) {
            return None;
        }
        Some(c.substitute(&|v| Expr::var(self.to[v].unwrap()), self.ranges))
    }
}

/// The instructions `roots` depend on, copied in SSA order with their
/// variables mapped; instruction `replace.0` becomes `replace.1` (its
/// operands are not copied). Returns the new instructions and, per old
/// instruction, its new index. `None` when a copied instruction reads a
/// variable the map drops or is a `Reduce` (the new kernel has no reduced
/// variables).
pub(super) fn copy_insts(
    k: &Kernel,
    roots: &[Val],
    map: &VarMap,
    replace: Option<(Val, Node)>,
) -> Option<(Vec<Node>, Vec<Option<Val>>)> {
    let mut want = vec![false; k.insts.len()];
    let mut stack = roots.to_vec();
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut want[v], true) {
            continue;
        }
        if replace.as_ref().is_some_and(|r| r.0 == v) {
            continue;
        }
        stack.extend(k.insts[v].inst.operands());
    }
    let mut new_of: Vec<Option<Val>> = vec![None; k.insts.len()];
    let mut out = Vec::new();
    for (i, node) in k.insts.iter().enumerate() {
        if !want[i] {
            continue;
        }
        let m = |v: Val| new_of[v].expect("operands precede their users");
        let inst = match &replace {
            Some((r, n)) if *r == i => n.inst.clone(),
            _ => match &node.inst {
                Inst::Load {
                    input,
                    index,
                    valid,
                } => Inst::Load {
                    input: *input,
                    index: map.expr(index)?,
                    valid: map.cond(valid)?,
                },
                Inst::Valid(c) => Inst::Valid(map.cond(c)?),
                Inst::Index(e) => Inst::Index(map.expr(e)?),
                Inst::Random(d, ops) => Inst::Random(*d, ops.iter().map(|o| m(*o)).collect()),
                Inst::Const(c) => Inst::Const(*c),
                Inst::Scalar(slot) => Inst::Scalar(*slot),
                Inst::Cast(a) => Inst::Cast(m(*a)),
                Inst::Unary(op, a) => Inst::Unary(*op, m(*a)),
                Inst::Binary(op, a, b) => Inst::Binary(*op, m(*a), m(*b)),
                Inst::Where(c, a, b) => Inst::Where(m(*c), m(*a), m(*b)),
                Inst::Reduce(..) | Inst::Scan(..) | Inst::Sort(..) | Inst::Gather { .. } => {
                    return None
                }
            },
        };
        new_of[i] = Some(out.len());
        out.push(Node {
            inst,
            dtype: node.dtype,
        });
    }
    Some((out, new_of))
}

/// The row-major linear index over variables `vars` (in that order) of a
/// kernel with variable sizes `ranges`.
pub(super) fn row_major(vars: &[usize], ranges: &[i64]) -> Expr {
    let mut e = Expr::constant(0);
    let mut stride = 1;
    for v in vars.iter().rev() {
        e = e.add(&Expr::var(*v).scale(stride));
        stride *= ranges[*v];
    }
    e
}

/// Variables read by the instructions `root` depends on (loads' indices and
/// every validity check).
pub(super) fn vars_read(k: &Kernel, root: Val) -> Vec<usize> {
    let mut seen = vec![false; k.insts.len()];
    let mut stack = vec![root];
    let mut vs = Vec::new();
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut seen[v], true) {
            continue;
        }
        let node = &k.insts[v].inst;
        let (e, c) = node.exprs();
        if let Some(e) = e {
            e.vars(&mut vs);
        }
        for (e, _, _) in c.map(|c| c.checks()).unwrap_or(&[]) {
            e.vars(&mut vs);
        }
        stack.extend(node.operands());
    }
    vs
}
