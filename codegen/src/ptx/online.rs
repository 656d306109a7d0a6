//! Online softmax: a reduction `max(x)` followed by `sum(exp(x - max))`
//! computed in one pass over the row, with a running maximum and a sum
//! rescaled whenever the maximum grows. Used when the row does not stay in
//! registers, so that the row is read once for both.
//!
//! Matches the two-pass result, special values included: a row that is all
//! `-inf` sums to NaN (every `exp(-inf - -inf)` is NaN), `-inf` entries
//! add 0, a NaN or `+inf` anywhere gives NaN.

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use super::math;
use super::ops::{self, Value};
use crate::ir::{Inst, Kernel, Val};
use crate::{BinaryOp, DType, ReduceOp, UnaryOp};

/// The instructions of a `sum(exp(x - max(x)))` reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// The `Reduce(Max, x)`.
    pub max: Val,
    /// The `Reduce(Sum, ..)`.
    pub sum: Val,
    /// `x`.
    pub x: Val,
    sub: Val,
    exp: Val,
    /// The optional cast of the exp to the sum's dtype.
    cast: Option<Val>,
}

/// Recognises reduction `sum` as the sum of a softmax.
pub fn pattern(k: &Kernel, sum: Val) -> Option<Pattern> {
    let Inst::Reduce(ReduceOp::Sum, o) = k.insts[sum].inst else {
        return None;
    };
    let (cast, o) = match k.insts[o].inst {
        Inst::Cast(a) => (Some(o), a),
        _ => (None, o),
    };
    let Inst::Unary(UnaryOp::Exp, sub) = k.insts[o].inst else {
        return None;
    };
    let Inst::Binary(BinaryOp::Sub, x, max) = k.insts[sub].inst else {
        return None;
    };
    let Inst::Reduce(ReduceOp::Max, x2) = k.insts[max].inst else {
        return None;
    };
    let floats = [x, max, sub, o, sum]
        .iter()
        .all(|v| k.insts[*v].dtype.is_float());
    (x2 == x && floats && k.insts[sum].dtype == DType::F32).then_some(Pattern {
        max,
        sum,
        x,
        sub,
        exp: o,
        cast,
    })
}

/// A thread's running maximum and rescaled sum (both `f32`).
#[derive(Clone, Copy)]
pub struct State {
    pub m: Reg,
    pub s: Reg,
}

/// `-inf`, `0`.
pub fn init(b: &mut Builder) -> State {
    State {
        m: b.mov(RegKind::F32, "f32", "0fFF800000"),
        s: b.mov(RegKind::F32, "f32", "0f00000000"),
    }
}

/// `exp(from - to)`, taken as 1 where `from == to` (so that equal
/// infinities rescale by 1).
fn scale(b: &mut Builder, from: Reg, to: Reg) -> Reg {
    let d = b.reg(RegKind::F32);
    ins!(b, "sub.rn.f32 {d}, {from}, {to}");
    let e = math::exp(b, d);
    let eq = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.f32 {eq}, {from}, {to}");
    math::select(b, f32_imm(1.0), e, eq)
}

/// Folds the values `xs` of `x`, each counted where its predicate holds,
/// into `st`: one rescale for the new maximum, then the terms.
pub fn update(b: &mut Builder, k: &Kernel, p: &Pattern, st: State, xs: &[(Value, Option<Reg>)]) {
    let mdt = k.insts[p.max].dtype;
    let mut m_new = b.reg(RegKind::F32);
    ins!(b, "mov.f32 {m_new}, {}", st.m);
    for (x, pred) in xs {
        let xm = ops::convert(b, *x, mdt).reg;
        let xm = match pred {
            Some(q) => math::select(b, xm, "0fFF800000", *q),
            None => xm,
        };
        let r = b.reg(RegKind::F32);
        ins!(b, "max.NaN.f32 {r}, {m_new}, {xm}");
        m_new = r;
    }
    let sc = scale(b, st.m, m_new);
    ins!(b, "mul.rn.f32 {}, {}, {sc}", st.s, st.s);
    // While the maximum is -inf every term is exp(NaN): count 0 for now
    // (see `finish`).
    let all_ninf = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.f32 {all_ninf}, {m_new}, 0fFF800000");
    let mv = Value {
        reg: m_new,
        dtype: mdt,
    };
    for (x, pred) in xs {
        let d = ops::binary(b, BinaryOp::Sub, *x, mv, k.insts[p.sub].dtype);
        let e = ops::unary(b, UnaryOp::Exp, d, k.insts[p.exp].dtype);
        let e = match p.cast {
            Some(c) => ops::convert(b, e, k.insts[c].dtype),
            None => e,
        };
        let t = ops::convert(b, e, DType::F32).reg;
        let t = math::select(b, "0f00000000", t, all_ninf);
        let t = match pred {
            Some(q) => math::select(b, t, "0f00000000", *q),
            None => t,
        };
        ins!(b, "add.rn.f32 {}, {}, {t}", st.s, st.s);
    }
    ins!(b, "mov.f32 {}, {m_new}", st.m);
}

/// Merges `other` into `st`.
pub fn merge(b: &mut Builder, st: State, other: State) {
    let m = b.reg(RegKind::F32);
    ins!(b, "max.NaN.f32 {m}, {}, {}", st.m, other.m);
    let s1 = scale(b, st.m, m);
    let s2 = scale(b, other.m, m);
    let t = math::mul(b, other.s, s2);
    ins!(b, "mul.rn.f32 {}, {}, {s1}", st.s, st.s);
    ins!(b, "add.rn.f32 {}, {}, {t}", st.s, st.s);
    ins!(b, "mov.f32 {}, {m}", st.m);
}

/// The sum after the whole row is merged: NaN when the row is not empty
/// and its maximum is -inf.
pub fn finish(b: &mut Builder, st: State, row_len: i64) {
    if row_len > 0 {
        let p = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.f32 {p}, {}, 0fFF800000", st.m);
        ins!(b, "@{p} mov.f32 {}, 0f7FC00000", st.s);
    }
}
