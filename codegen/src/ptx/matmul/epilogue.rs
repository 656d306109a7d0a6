//! The epilogue on the accumulator registers: every accumulator becomes a
//! point of the kernel's kept domain, the `Reduce` takes its value, and the
//! kernel's row-level instructions and stores run there through the
//! generic evaluator, masked to the matrix.

use super::shape::Shape;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::eval::{needs, Cx, Point, Vals};
use crate::ptx::ops::Value;
use crate::DType;

/// The thread's origin in C: `m` and `n` (u32) that its accumulators'
/// offsets are relative to, and the batch variables' registers.
pub struct Origin {
    pub m: Reg,
    pub n: Reg,
    pub batch: Vec<Reg>,
}

/// One f32 accumulator and its `(m, n)` offset from the [`Origin`].
pub struct Item {
    pub reg: Reg,
    pub dm: u32,
    pub dn: u32,
}

/// Emits the epilogue for every accumulator.
pub fn emit(b: &mut Builder, cx: &Cx, s: &Shape, items: &[Item], o: &Origin) {
    let k = cx.k;
    let row_level: Vec<bool> = cx
        .level
        .iter()
        .enumerate()
        .map(|(i, l)| !l && i != s.reduce)
        .collect();
    let roots: Vec<usize> = k.stores.iter().map(|st| st.value).collect();
    let insts = needs(k, &row_level, &roots);
    let w = cx.width;
    let widen = |b: &mut Builder, r: Reg| {
        if w.wide {
            let x = b.reg(RegKind::B64);
            ins!(b, "cvt.u64.u32 {x}, {r}");
            x
        } else {
            r
        }
    };
    let batch: Vec<Reg> = o.batch.iter().map(|r| widen(b, *r)).collect();
    for it in items {
        let (m, n) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "add.u32 {m}, {}, {}", o.m, it.dm);
        ins!(b, "add.u32 {n}, {}, {}", o.n, it.dn);
        let pred = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.u32 {pred}, {m}, {}", s.m);
        ins!(b, "setp.lt.and.u32 {pred}, {n}, {}, {pred}", s.n);
        let mut vars = vec![None; k.ranges.len()];
        for (v, r) in s.batch_vars.iter().zip(&batch) {
            vars[*v] = Some(*r);
        }
        if let Some(v) = s.m_var {
            vars[v] = Some(widen(b, m));
        }
        if let Some(v) = s.n_var {
            vars[v] = Some(widen(b, n));
        }
        let p = Point {
            vars,
            lanes: 1,
            pred: Some(pred),
        };
        let mut vals: Vals = vec![None; k.insts.len()];
        vals[s.reduce] = Some(vec![Value {
            reg: it.reg,
            dtype: DType::F32,
        }]);
        cx.eval(b, &p, &insts, &mut vals);
        for st in &k.stores {
            cx.store(b, &p, st, &vals);
        }
    }
}
