//! Elementwise kernels: a grid-stride loop over groups of `lanes`
//! consecutive values of the last variable; each thread takes `unroll`
//! groups per iteration, `grid * block` groups apart, issues all their
//! loads (and the gathers they feed) first, and computes them all before
//! the first store.

use super::builder::{ins, Builder, RegKind};
use super::eval::{needs, uses_var, Cx, Point, Vals};
use super::expr::{self, Width};
use super::launch::Elementwise;

/// Which variables any access of the kernel reads.
pub fn used_vars(cx: &Cx) -> Vec<bool> {
    let n = cx.k.ranges.len();
    let mut used = vec![false; n];
    let mut mark = |e: Option<&crate::Expr>, c: Option<&crate::Cond>| {
        for (v, u) in used.iter_mut().enumerate() {
            *u |= uses_var(e, c, v);
        }
    };
    for node in &cx.k.insts {
        let (e, c) = node.inst.exprs();
        mark(e, c);
    }
    for s in &cx.k.stores {
        mark(Some(&s.index), None);
    }
    used
}

/// Thread index in the grid and the grid's thread count, `w` bits wide.
pub fn global_thread(b: &mut Builder, w: Width) -> (super::builder::Reg, super::builder::Reg) {
    let (tid, ntid, ctaid, nctaid) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
    );
    ins!(b, "mov.u32 {tid}, %tid.x");
    ins!(b, "mov.u32 {ntid}, %ntid.x");
    ins!(b, "mov.u32 {ctaid}, %ctaid.x");
    ins!(b, "mov.u32 {nctaid}, %nctaid.x");
    let (g, stride) = (w.reg(b), w.reg(b));
    if w.wide {
        ins!(b, "mul.wide.u32 {g}, {ctaid}, {ntid}");
        let t = b.reg(RegKind::B64);
        ins!(b, "cvt.u64.u32 {t}, {tid}");
        ins!(b, "add.s64 {g}, {g}, {t}");
        ins!(b, "mul.wide.u32 {stride}, {nctaid}, {ntid}");
    } else {
        ins!(b, "mad.lo.s32 {g}, {ctaid}, {ntid}, {tid}");
        ins!(b, "mul.lo.s32 {stride}, {nctaid}, {ntid}");
    }
    (g, stride)
}

/// Emits the body of an elementwise kernel.
pub fn emit(b: &mut Builder, cx: &Cx, plan: &Elementwise) {
    let k = cx.k;
    let w = cx.width;
    let n = w.bits();
    let lanes = plan.lanes;
    let numel: i64 = k.ranges.iter().product();
    let groups = numel / lanes as i64;
    let mut sizes = k.ranges.clone();
    if let Some(last) = sizes.last_mut() {
        *last /= lanes as i64;
    }
    let used = used_vars(cx);
    let all = vec![true; k.insts.len()];
    let roots: Vec<_> = k.stores.iter().flat_map(|s| s.operands()).collect();
    let todo = needs(k, &all, &roots);

    let (g, stride) = global_thread(b, w);
    let (top, end) = (b.label(), b.label());
    b.place(&top);
    let done = b.reg(RegKind::Pred);
    ins!(b, "setp.ge.s{n} {done}, {g}, {groups}");
    ins!(b, "@{done} bra {end}");
    let mut points = Vec::new();
    for u in 0..plan.unroll {
        let (gu, pred) = if u == 0 {
            (g, None)
        } else {
            let gu = w.reg(b);
            ins!(b, "mad.lo.s{n} {gu}, {stride}, {u}, {g}");
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.lt.s{n} {p}, {gu}, {groups}");
            (gu, Some(p))
        };
        let mut vars = expr::unravel(b, gu, &sizes, &used, w);
        if let (Some(Some(v)), true) = (vars.last_mut(), lanes > 1) {
            let r = w.reg(b);
            ins!(b, "mul.lo.s{n} {r}, {v}, {lanes}");
            *v = r;
        }
        points.push(Point { vars, lanes, pred });
    }
    let mut vals: Vec<Vals> = vec![vec![None; k.insts.len()]; plan.unroll];
    for (p, v) in points.iter().zip(&mut vals) {
        cx.eval_loads(b, p, &todo, v);
    }
    for (p, v) in points.iter().zip(&mut vals) {
        cx.eval_gathers(b, p, &todo, v);
    }
    // Every group's values before the first store: ptxas keeps a load
    // after a store that might alias it, so a group's gathers (issued
    // when its ids arrive) or loads issued after another group's stores
    // would wait for that group's data.
    for (p, v) in points.iter().zip(&mut vals) {
        cx.eval(b, p, &todo, v);
    }
    for (p, v) in points.iter().zip(&vals) {
        for s in &k.stores {
            cx.store(b, p, s, v);
        }
    }
    ins!(b, "mad.lo.s{n} {g}, {stride}, {}, {g}", plan.unroll);
    ins!(b, "bra {top}");
    b.place(&end);
}
