//! Copies part of a kernel's instruction DAG into a new, reduction-free
//! kernel over other loop variables, so the interpreter can evaluate a piece
//! of a matmul or attention kernel (an operand, the logits, the epilogue)
//! on its own.

use crate::dims::Ranges;
use crate::expr::{Cond, Expr};
use crate::ir::{Arg, Inst, Kernel, KernelKind, Node, Store, Val};
use crate::DType;

/// How old loop variables map to the new kernel's variables.
pub(crate) struct VarMap<'a> {
    /// `to[old]`: the old variable's value over the new kernel's variables
    /// (a new variable, or one plus an offset, or a constant), `None` when
    /// the new kernel lacks it.
    pub to: &'a [Option<Expr>],
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
        Some(e.substitute(&|v| self.to[v].clone().unwrap(), self.ranges))
    }

    fn cond(&self, c: &Cond) -> Option<Cond> {
        let mut vs = Vec::new();
        for (e, _, _) in c.checks() {
            e.vars(&mut vs);
        }
        if vs.iter().any(|v| self.to[*v].is_none()) {
            return None;
        }
        Some(c.substitute(&|v| self.to[v].clone().unwrap(), self.ranges))
    }
}

/// The instructions `roots` depend on, copied in SSA order with their
/// variables mapped; each instruction `r.0` of `replace` becomes `r.1` (its
/// operands are not copied). Returns the new instructions and, per old
/// instruction, its new index. `None` when a copied instruction reads a
/// variable the map drops or is a `Reduce` (the new kernel has no reduced
/// variables).
pub(crate) fn copy_insts(
    k: &Kernel,
    roots: &[Val],
    map: &VarMap,
    replace: &[(Val, Node)],
) -> Option<(Vec<Node>, Vec<Option<Val>>)> {
    let replacement = |v: Val| replace.iter().find(|r| r.0 == v).map(|r| &r.1);
    let mut want = vec![false; k.insts.len()];
    let mut stack = roots.to_vec();
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut want[v], true) {
            continue;
        }
        if replacement(v).is_some() {
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
        let inst = match replacement(i) {
            Some(n) => n.inst.clone(),
            None => match &node.inst {
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
                Inst::Reduce(..)
                | Inst::Scan(..)
                | Inst::Sort(..)
                | Inst::Gather(_)
                | Inst::Dot(..)
                | Inst::Attend(..) => return None,
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
pub(crate) fn row_major(vars: &[usize], ranges: &[i64]) -> Expr {
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
pub(crate) fn vars_read(k: &Kernel, root: Val) -> Vec<usize> {
    vars_read_above(k, root, None)
}

/// [`vars_read`], not looking below instruction `stop` (nor at it).
pub(crate) fn vars_read_above(k: &Kernel, root: Val, stop: Option<Val>) -> Vec<usize> {
    let mut seen = vec![false; k.insts.len()];
    let mut stack = vec![root];
    let mut vs = Vec::new();
    while let Some(v) = stack.pop() {
        if Some(v) == stop || std::mem::replace(&mut seen[v], true) {
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

/// A kernel writing the value `root` of `k` as a dense array of `dtype`
/// over `k`'s variables `old` (row-major, in that order); `None` if `root`
/// reads another variable or a reduction.
pub(crate) fn dense_kernel(k: &Kernel, root: Val, old: &[usize], dtype: DType) -> Option<Kernel> {
    let ranges: Ranges = old.iter().map(|v| k.ranges[*v]).collect();
    let mut to = vec![None; k.ranges.len()];
    for (new, v) in old.iter().enumerate() {
        to[*v] = Some(Expr::var(new));
    }
    let map = VarMap {
        to: &to,
        ranges: &ranges,
    };
    let (insts, new_of) = copy_insts(k, &[root], &map, &[])?;
    let all: Vec<usize> = (0..ranges.len()).collect();
    let len = ranges.iter().product::<i64>() as usize;
    Some(Kernel {
        name: format!("{}_operand", k.name),
        kind: KernelKind::Elementwise,
        n_kept: ranges.len(),
        inputs: k.inputs.clone(),
        outputs: vec![Arg { dtype, len }],
        scalars: k.scalars.clone(),
        insts,
        stores: vec![Store::write(0, row_major(&all, &ranges), new_of[root]?)],
        ranges,
    })
}

/// A value with one entry per kept point (a `Reduce`, an `Attend`) that
/// an epilogue kernel loads from an extra input instead of computing it.
pub(crate) struct RowInput {
    /// The instruction replaced.
    pub val: Val,
    /// The extra input's dtype.
    pub dtype: DType,
    /// Where the value of each kept point lies in the extra input, over
    /// the kept variables (the fast path chooses its own layout).
    pub index: Expr,
}

/// `k`'s stores over its kept variables, each instruction of `rows`
/// replaced by a load of an extra input (in that order, after `k`'s own
/// inputs); `None` if a store needs a reduced variable.
pub(crate) fn epilogue(k: &Kernel, rows: &[RowInput]) -> Option<Kernel> {
    let ranges = &k.ranges[..k.n_kept];
    let to: Vec<Option<Expr>> = (0..k.ranges.len())
        .map(|v| (v < k.n_kept).then(|| Expr::var(v)))
        .collect();
    let map = VarMap { to: &to, ranges };
    let replace: Vec<(Val, Node)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let load = Inst::Load {
                input: k.inputs.len() + i,
                index: r.index.clone(),
                valid: Cond::always(),
            };
            (
                r.val,
                Node {
                    inst: load,
                    dtype: r.dtype,
                },
            )
        })
        .collect();
    let roots: Vec<Val> = k.stores.iter().map(|s| s.value).collect();
    let (insts, new_of) = copy_insts(k, &roots, &map, &replace)?;
    let stores = k
        .stores
        .iter()
        .map(|s| {
            let mut vs = Vec::new();
            s.index.vars(&mut vs);
            let index = s.index.substitute(&Expr::var, ranges);
            (vs.iter().all(|v| *v < k.n_kept)).then(|| {
                Store::write(
                    s.output,
                    index,
                    new_of[s.value].expect("store values are copied"),
                )
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let mut inputs = k.inputs.clone();
    inputs.extend(rows.iter().map(|r| Arg {
        dtype: r.dtype,
        len: k.rows(),
    }));
    Some(Kernel {
        name: format!("{}_epilogue", k.name),
        kind: KernelKind::Elementwise,
        ranges: ranges.into(),
        n_kept: k.n_kept,
        inputs,
        outputs: k.outputs.clone(),
        scalars: k.scalars.clone(),
        insts,
        stores,
    })
}
