//! Shrinking a kernel's loop domain: size-1 variables disappear and
//! neighbouring variables that every access walks contiguously merge, so a
//! contiguous kernel indexes with one plain linear variable.

use smelt_codegen::{Cond, Expr, Gather, Inst, Kernel, KernelKind, Ranges};

/// Drops size-1 loop variables and merges contiguous neighbours until
/// nothing changes. Attention kernels keep their domain: each variable
/// has a role there (`smelt_codegen::attention::AttentionVars`).
pub fn collapse(k: &mut Kernel) {
    if k.kind == KernelKind::Attention {
        return;
    }
    while let Some(next) = collapse_once(k) {
        *k = next;
    }
}

/// Every index expression and condition of the kernel.
fn exprs(k: &Kernel) -> (Vec<&Expr>, Vec<&Cond>) {
    let mut es: Vec<&Expr> = k.stores.iter().map(|s| &s.index).collect();
    let mut cs = Vec::new();
    for n in &k.insts {
        let (e, c) = n.inst.exprs();
        es.extend(e);
        cs.extend(c);
    }
    (es, cs)
}

fn cond_uses(c: &Cond, v: usize) -> bool {
    c.checks().iter().any(|(e, _, _)| {
        let mut vs = Vec::new();
        e.vars(&mut vs);
        vs.contains(&v)
    })
}

/// One step: drops a size-1 variable or merges one pair; `None` if neither
/// applies.
fn collapse_once(k: &Kernel) -> Option<Kernel> {
    let n = k.ranges.len();
    if let Some(v) = (0..n).find(|v| k.ranges[*v] == 1) {
        let mut ranges = k.ranges.clone();
        ranges.remove(v);
        let map = move |i: usize| -> Expr {
            match i.cmp(&v) {
                std::cmp::Ordering::Less => Expr::var(i),
                std::cmp::Ordering::Equal => Expr::constant(0),
                std::cmp::Ordering::Greater => Expr::var(i - 1),
            }
        };
        let n_kept = k.n_kept - usize::from(v < k.n_kept);
        return Some(rewrite(k, &map, ranges, n_kept));
    }
    let (es, cs) = exprs(k);
    // Innermost pairs first: they are the likeliest to be contiguous.
    for v in (0..n.saturating_sub(1)).rev() {
        if v + 1 == k.n_kept {
            continue; // a kept and a reduced variable never merge
        }
        let inner = k.ranges[v + 1];
        let ok = es
            .iter()
            .all(|e| match (e.affine_coef(v), e.affine_coef(v + 1)) {
                (Some(a), Some(b)) => a == b * inner,
                _ => false,
            })
            && !cs.iter().any(|c| cond_uses(c, v) || cond_uses(c, v + 1));
        if ok {
            let mut ranges = k.ranges.clone();
            ranges[v] *= inner;
            ranges.remove(v + 1);
            // v's contribution is folded into the merged variable, which
            // takes v's place with v+1's coefficient.
            let map = move |i: usize| -> Expr {
                if i < v {
                    Expr::var(i)
                } else if i == v {
                    Expr::constant(0)
                } else if i == v + 1 {
                    Expr::var(v)
                } else {
                    Expr::var(i - 1)
                }
            };
            let n_kept = k.n_kept - usize::from(v < k.n_kept);
            return Some(rewrite(k, &map, ranges, n_kept));
        }
    }
    None
}

fn rewrite(k: &Kernel, map: &dyn Fn(usize) -> Expr, ranges: Ranges, n_kept: usize) -> Kernel {
    let mut out = k.clone();
    for s in &mut out.stores {
        s.index = s.index.substitute(map, &ranges);
    }
    for n in &mut out.insts {
        match &mut n.inst {
            Inst::Load { index, valid, .. } | Inst::Gather(Gather { index, valid, .. }) => {
                *index = index.substitute(map, &ranges);
                *valid = valid.substitute(map, &ranges);
            }
            Inst::Valid(c) => *c = c.substitute(map, &ranges),
            Inst::Index(e) => *e = e.substitute(map, &ranges),
            _ => {}
        }
    }
    out.ranges = ranges;
    out.n_kept = n_kept;
    out
}
