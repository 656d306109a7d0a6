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

use crate::extract::vars_read_above;
use crate::ir::{Inst, Kernel, KernelKind, Val};
use crate::DType;
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
