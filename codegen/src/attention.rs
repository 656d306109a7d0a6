//! The parts of an attention kernel ([`KernelKind::Attention`]), found
//! once and checked, for the backends.
//!
//! Such a kernel computes, for every output point `(batch.., i, e)`,
//! ```text
//! s_j = Dot(q(batch, i, d), k(batch, j, d))      (sum over d)
//! l_j = logit(s_j, batch, i, j)                  (scale, mask, casts)
//! o   = Attend(l_j, v(batch, j, e))              (softmax over j, then sum)
//! out = epilogue(o, batch, i, e)                 (casts), stored
//! ```
//! Each part is a sub-DAG of the kernel's instructions that depends only on
//! the variables named here; [`Kernel::attention`] checks that, so a
//! backend may evaluate each part over its own variables (the CPU packs
//! `q`, `k` and `v` into dense arrays, the GPU stages tiles of them).

use crate::expr::{Atom, Expr};
use crate::extract::vars_read_above;
use crate::ir::{Inst, Kernel, KernelKind, Val};
use crate::{BinaryOp, DType};
use std::ops::Range;

/// The loop variables of an attention kernel: `[batch.., i, e, j, d]`,
/// the first `n_kept` (batch, `i`, `e`) kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttentionVars {
    /// The batch variables (any number, heads included).
    pub batch: Range<usize>,
    /// The query row.
    pub i: usize,
    /// The output column (of `v`'s head dim).
    pub e: usize,
    /// The key position (softmax axis).
    pub j: usize,
    /// The head dim of `q` and `k` (the score's sum).
    pub d: usize,
}

impl AttentionVars {
    /// The variables of a domain with `n_kept` kept ones.
    pub fn new(n_kept: usize) -> AttentionVars {
        AttentionVars {
            batch: 0..n_kept - 2,
            i: n_kept - 2,
            e: n_kept - 1,
            j: n_kept,
            d: n_kept + 1,
        }
    }
}

/// The recognised parts of an attention kernel (instruction indices).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attention {
    /// The loop variables.
    pub vars: AttentionVars,
    /// The accumulation dtype of both sums (`F32` or `F64`).
    pub acc: DType,
    /// The `Dot` and its operands (`q` over `batch, i, d`, `k` over
    /// `batch, j, d`).
    pub dot: Val,
    /// The query value at `(batch, i, d)`.
    pub q: Val,
    /// The key value at `(batch, j, d)`.
    pub k: Val,
    /// The `Attend` and its operands.
    pub attend: Val,
    /// The logit at `(batch, i, j)`, reading the `Dot`.
    pub logit: Val,
    /// The value at `(batch, j, e)`.
    pub v: Val,
    /// Set when the logit is a causal mask (see [`causal`]).
    pub causal: Option<Causal>,
}

/// A causal mask found in an attention kernel's logit part: the logit is
/// `-inf` at every key `j > i + offset`, whatever the score, so a backend
/// may skip those keys; where `j <= i + offset` it is the logit part with
/// the `Where` `mask` replaced by its operand `visible`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Causal {
    /// `c` of `j <= i + c`, in `-lq..=lk` (clamped: the same mask).
    pub offset: i64,
    /// The `Where` that masks.
    pub mask: Val,
    /// Its operand taken where the key is visible.
    pub visible: Val,
}

/// The instructions `roots` depend on, not looking below `stops` (whose
/// values a backend provides), in SSA order.
pub(crate) fn part(k: &Kernel, roots: &[Val], stops: &[Val]) -> Vec<Val> {
    let mut want = vec![false; k.insts.len()];
    let mut stack = roots.to_vec();
    while let Some(v) = stack.pop() {
        if stops.contains(&v) || std::mem::replace(&mut want[v], true) {
            continue;
        }
        stack.extend(k.insts[v].inst.operands());
    }
    (0..k.insts.len()).filter(|v| want[*v]).collect()
}

impl Attention {
    /// `k` (this attention's kernel) with the half-typed arithmetic of its
    /// logit part (casts, element ops, selections, constants of `f16` or
    /// `bf16` that no other part reads) in the accumulation type: the
    /// fused kernel keeps scores, scales and masks unrounded between the
    /// `Dot` and the softmax, as FlashAttention never materializes half
    /// scores and torch.compile's generated kernels keep intermediates
    /// in `f32`. Loads and scalar parameters keep their half values
    /// (exact in the accumulation type). The unfused graph rounds the
    /// scores its matmul stores; the fused result differs from it by that
    /// rounding and is the nearer of the two to the exact value.
    pub fn f32_logits(&self, k: &Kernel) -> Kernel {
        let logit = part(k, &[self.logit], &[self.dot]);
        let mut others: Vec<Val> = k.stores.iter().map(|s| s.value).collect();
        others.extend([self.q, self.k, self.v]);
        let others = part(k, &others, &[self.attend]);
        let mut out = k.clone();
        for v in logit {
            let node = &mut out.insts[v];
            let arithmetic = matches!(
                node.inst,
                Inst::Cast(_)
                    | Inst::Unary(..)
                    | Inst::Binary(..)
                    | Inst::Where(..)
                    | Inst::Const(_)
            );
            if arithmetic && node.dtype.is_float() && node.dtype.size() == 2 && !others.contains(&v)
            {
                node.dtype = self.acc;
            }
        }
        out
    }
}

impl Kernel {
    /// The parts of an attention kernel, checked: one `Dot` and one
    /// `Attend` of one float accumulation dtype, each part reading only
    /// its own variables, and stores over the kept variables reading the
    /// `Attend` (never the `Dot` directly).
    ///
    /// # Errors
    /// A message naming the kernel and what does not fit.
    pub fn attention(&self) -> Result<Attention, String> {
        let bad = |what: &str| Err(format!("attention kernel {}: {what}", self.name));
        if self.kind != KernelKind::Attention
            || self.n_kept < 2
            || self.ranges.len() != self.n_kept + 2
        {
            return bad("not an attention domain [batch.., i, e | j, d]");
        }
        let vars = AttentionVars::new(self.n_kept);
        let find = |want: fn(&Inst) -> Option<(Val, Val)>| {
            let mut hits = self
                .insts
                .iter()
                .enumerate()
                .filter_map(|(i, n)| want(&n.inst).map(|(a, b)| (i, a, b)));
            match (hits.next(), hits.next()) {
                (Some(h), None) => Some(h),
                _ => None,
            }
        };
        let Some((dot, q, k)) = find(|i| match i {
            Inst::Dot(a, b) => Some((*a, *b)),
            _ => None,
        }) else {
            return bad("needs exactly one Dot");
        };
        let Some((attend, logit, v)) = find(|i| match i {
            Inst::Attend(a, b) => Some((*a, *b)),
            _ => None,
        }) else {
            return bad("needs exactly one Attend");
        };
        let acc = self.insts[dot].dtype;
        let same = [q, k, attend, logit, v]
            .iter()
            .all(|x| self.insts[*x].dtype == acc);
        if !matches!(acc, DType::F32 | DType::F64) || !same {
            return bad("Dot and Attend need one F32 or F64 dtype");
        }
        let batch: Vec<usize> = vars.batch.clone().collect();
        let allowed = |extra: &[usize]| [&batch[..], extra].concat();
        let parts = [
            (q, None, allowed(&[vars.i, vars.d]), "q"),
            (k, None, allowed(&[vars.j, vars.d]), "k"),
            (logit, Some(dot), allowed(&[vars.i, vars.j]), "the logit"),
            (v, None, allowed(&[vars.j, vars.e]), "v"),
        ];
        for (root, stop, ok, name) in &parts {
            if vars_read_above(self, *root, *stop)
                .iter()
                .any(|x| !ok.contains(x))
            {
                return bad(&format!("{name} reads a variable outside its part"));
            }
            if self.reaches(*root, *stop, &[dot, attend]) {
                return bad(&format!("{name} reads the Dot or Attend"));
            }
        }
        let kept = allowed(&[vars.i, vars.e]);
        for s in &self.stores {
            let mut vs = vars_read_above(self, s.value, Some(attend));
            s.index.vars(&mut vs);
            if s.is_add() || vs.iter().any(|x| !kept.contains(x)) {
                return bad("a store is not a plain write over the kept variables");
            }
            if self.reaches(s.value, Some(attend), &[dot]) {
                return bad("a store reads the Dot outside the Attend");
            }
        }
        Ok(Attention {
            causal: causal(self, &vars, logit),
            vars,
            acc,
            dot,
            q,
            k,
            attend,
            logit,
            v,
        })
    }

    /// Whether the DAG below `root` (not looking below `stop`) holds one
    /// of `targets`, or an instruction that an attention part cannot hold
    /// (a reduction, scan, sort or gather).
    fn reaches(&self, root: Val, stop: Option<Val>, targets: &[Val]) -> bool {
        let mut seen = vec![false; self.insts.len()];
        let mut stack = vec![root];
        while let Some(x) = stack.pop() {
            if Some(x) == stop || std::mem::replace(&mut seen[x], true) {
                continue;
            }
            let inst = &self.insts[x].inst;
            if targets.contains(&x)
                || matches!(
                    inst,
                    Inst::Reduce(..) | Inst::Scan(..) | Inst::Sort(..) | Inst::Gather(_)
                )
            {
                return true;
            }
            stack.extend(inst.operands());
        }
        false
    }
}

/// The causal mask, if the logit `logit` is, through float casts,
/// `where(j <= i + c, x, -inf)`: a `Where` whose one branch is the
/// constant `-inf` and whose condition (for the other branch) compares two
/// index values (`Index`, through casts that keep every value exact) whose
/// difference is `j - i` plus a constant (`j <= i + c`, `j < i + c`,
/// `i >= j`, and the negated forms `masked_fill` writes). Every logit at
/// `j > i + c` is then `-inf`, exactly, whatever the score: the key adds
/// nothing to the row's sums (`exp(-inf - m) = 0`), which is what lets a
/// backend skip it. `c` is clamped to `-lq..=lk` (the same mask there).
pub fn causal(k: &Kernel, vars: &AttentionVars, logit: Val) -> Option<Causal> {
    let is_float = |v: Val| k.insts[v].dtype.is_float();
    let mut x = logit;
    while let Inst::Cast(src) = k.insts[x].inst {
        if !is_float(src) {
            return None;
        }
        x = src;
    }
    let Inst::Where(cond, a, b) = k.insts[x].inst else {
        return None;
    };
    let neg_inf = |mut v: Val| loop {
        match k.insts[v].inst {
            Inst::Const(c) => return c == f64::NEG_INFINITY,
            Inst::Cast(src) if is_float(src) && is_float(v) => v = src,
            _ => return false,
        }
    };
    // Whether the visible branch is taken where `cond` holds.
    let (holds, visible) = match (neg_inf(a), neg_inf(b)) {
        (false, true) => (true, a),
        (true, false) => (false, b),
        _ => return None,
    };
    let mask = x;
    let Inst::Binary(op, lhs, rhs) = k.insts[cond].inst else {
        return None;
    };
    let (x, y) = (index_value(k, lhs)?, index_value(k, rhs)?);
    // d = x - y = cj * j + ci * i + konst.
    let d = x.add(&y.scale(-1));
    let (terms, konst) = d.parts();
    let coef = |want: usize| {
        terms
            .iter()
            .find(|(at, _)| *at == Atom::Var(want))
            .map_or(0, |(_, c)| *c)
    };
    let (cj, ci) = (coef(vars.j), coef(vars.i));
    let only_ij = terms
        .iter()
        .all(|(at, _)| *at == Atom::Var(vars.i) || *at == Atom::Var(vars.j));
    let (lq, lk) = (k.ranges[vars.i], k.ranges[vars.j]);
    // With one row, `i` is always 0 and its coefficient does not matter.
    if !only_ij || cj.abs() != 1 || (ci != -cj && lq != 1) {
        return None;
    }
    // The visible condition as `d op 0`.
    let op = match (holds, op) {
        (true, op) => op,
        (false, BinaryOp::Lt) => BinaryOp::Ge,
        (false, BinaryOp::Le) => BinaryOp::Gt,
        (false, BinaryOp::Gt) => BinaryOp::Le,
        (false, BinaryOp::Ge) => BinaryOp::Lt,
        _ => return None,
    };
    // cj = 1: d = j - i + konst; cj = -1: d = i - j + konst.
    let c = match (cj, op) {
        (1, BinaryOp::Le) => -konst,
        (1, BinaryOp::Lt) => -konst - 1,
        (-1, BinaryOp::Ge) => konst,
        (-1, BinaryOp::Gt) => konst - 1,
        _ => return None,
    };
    Some(Causal {
        offset: c.clamp(-lq, lk),
        mask,
        visible,
    })
}

/// The index expression whose value `v` is, if `v` is an `Index` through
/// casts that keep every value it takes exact (and no `I32` wrapped it).
fn index_value(k: &Kernel, mut v: Val) -> Option<Expr> {
    let mut casts = Vec::new();
    while let Inst::Cast(src) = k.insts[v].inst {
        casts.push(k.insts[v].dtype);
        v = src;
    }
    let Inst::Index(e) = &k.insts[v].inst else {
        return None;
    };
    let (lo, hi) = e.bounds(&k.ranges);
    // The largest magnitude up to which each dtype holds every integer.
    let exact = |dt: DType| match dt {
        DType::I32 | DType::I64 | DType::F64 => i32::MAX as i64,
        _ if dt.is_float() => dt.exact_int_limit(),
        _ => 0,
    };
    let limit = casts.into_iter().map(exact).fold(i32::MAX as i64, i64::min);
    (lo >= -limit && hi <= limit).then(|| e.clone())
}
