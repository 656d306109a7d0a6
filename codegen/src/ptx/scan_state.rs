//! Scan states in registers and what combines them: the identity, the
//! ordered combine of every [`ScanOp`] (earlier operand first), and their
//! warp-level forms (shuffles of 64-bit states as two halves, the
//! Hillis-Steele warp scan). Shared by the row walk (`scan`) and the
//! look-back (`lookback`).

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use super::math_f64;
use super::ops::{self, f64_imm, Value};
use crate::ir::{Inst, Kernel, Val};
use crate::{DType, ScanOp, UnaryOp};

/// A running scan state: the value (an `f32`, `f64`, `s32` or `s64`
/// register) and, for index ops, its position (`s32`).
#[derive(Clone, Copy)]
pub(super) struct State {
    pub(super) v: Reg,
    pub(super) i: Option<Reg>,
}

impl State {
    /// Its registers: the value, then the position.
    pub(super) fn regs(&self) -> Vec<Reg> {
        std::iter::once(self.v).chain(self.i).collect()
    }

    /// The state held in `regs`, ordered as [`State::regs`] lists them.
    pub(super) fn from_regs(regs: &[Reg]) -> State {
        State {
            v: regs[0],
            i: regs.get(1).copied(),
        }
    }
}

/// One scan instruction: `op` over operand `src` of dtype `dt` (`F32`,
/// `F64`, `I32` or `I64`), its result instruction `val`.
#[derive(Clone, Copy)]
pub(super) struct ScanInst {
    pub(super) val: Val,
    pub(super) op: ScanOp,
    pub(super) src: Val,
    pub(super) dt: DType,
}

impl ScanInst {
    /// The state a scan starts from: a left identity of
    /// [`ScanInst::combine`] (position 0 for index ops).
    pub(super) fn identity(&self, b: &mut Builder) -> State {
        let v = match self.dt {
            DType::F32 => b.mov(RegKind::F32, "f32", f32_imm(self.op.identity() as f32)),
            DType::F64 => b.mov(RegKind::F64, "f64", f64_imm(self.op.identity())),
            DType::I64 => b.mov(RegKind::B64, "b64", self.op.identity_int(self.dt)),
            _ => b.mov(RegKind::B32, "b32", self.op.identity_int(self.dt) as i32),
        };
        let i = self.op.is_index().then(|| b.mov(RegKind::B32, "b32", 0));
        State { v, i }
    }

    /// `earlier` combined with `later`, in fresh registers.
    pub(super) fn combine(&self, b: &mut Builder, earlier: State, later: State) -> State {
        let int = !self.dt.is_float();
        let ty = match self.dt {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I64 => "s64",
            _ => "s32",
        };
        let (e, l) = (earlier.v, later.v);
        let arith = |b: &mut Builder, text: &str| {
            let r = b.reg(e.kind);
            ins!(b, "{text} {r}, {e}, {l}");
            State { v: r, i: None }
        };
        match self.op {
            ScanOp::Sum if int => arith(b, &format!("add.{ty}")),
            ScanOp::Sum => arith(b, &format!("add.rn.{ty}")),
            ScanOp::Prod if int => arith(b, &format!("mul.lo.{ty}")),
            ScanOp::Prod => arith(b, &format!("mul.rn.{ty}")),
            ScanOp::LogSumExp => State {
                v: log_add_exp(b, self.dt, e, l),
                i: None,
            },
            ScanOp::Max | ScanOp::Min | ScanOp::ArgMax | ScanOp::ArgMin => {
                // The later value wins when it is NaN or compares >= (<=)
                // with a non-NaN earlier one (a NaN earlier value fails
                // the ordered comparison).
                let max = matches!(self.op, ScanOp::Max | ScanOp::ArgMax);
                let cmp = if max { "ge" } else { "le" };
                let wins = b.reg(RegKind::Pred);
                ins!(b, "setp.{cmp}.{ty} {wins}, {l}, {e}");
                if !int {
                    let nan = b.reg(RegKind::Pred);
                    ins!(b, "setp.nan.{ty} {nan}, {l}, {l}");
                    ins!(b, "or.pred {wins}, {wins}, {nan}");
                }
                select(b, wins, later, earlier)
            }
        }
    }
}

/// The kernel's scan instructions, in order.
pub(super) fn scan_insts(k: &Kernel) -> Vec<ScanInst> {
    k.insts
        .iter()
        .enumerate()
        .filter_map(|(val, node)| match node.inst {
            Inst::Scan(op, src) => Some(ScanInst {
                val,
                op,
                src,
                dt: k.insts[src].dtype,
            }),
            _ => None,
        })
        .collect()
}

/// Registers of the scans' states together (a value, and a position for
/// index ops): what the shared-memory and look-back slots hold.
pub(super) fn state_slots(scans: &[ScanInst]) -> usize {
    scans.iter().map(|s| 1 + s.op.is_index() as usize).sum()
}

/// Bytes of each state register of the scans, in slot order: 8 for `f64`
/// and `s64` values, 4 for 32-bit values and positions.
pub(super) fn slot_bytes(scans: &[ScanInst]) -> Vec<u32> {
    scans
        .iter()
        .flat_map(|s| {
            let v = if s.dt.size() == 8 { 8 } else { 4 };
            std::iter::once(v).chain(s.op.is_index().then_some(4))
        })
        .collect()
}

/// `p ? a : b` for every register of the states.
pub(super) fn select(b: &mut Builder, p: Reg, a: State, c: State) -> State {
    let regs: Vec<Reg> = a
        .regs()
        .iter()
        .zip(c.regs())
        .map(|(x, y)| {
            let r = b.reg(x.kind);
            ins!(b, "selp.{} {r}, {x}, {y}, {p}", x.kind.bit_ty());
            r
        })
        .collect();
    State::from_regs(&regs)
}

/// `log(e^a + e^c)` in the float `dt` (`F32` or `F64`) as
/// `hi + log1p(e^(lo - hi))`, with `log1p(t)` as `log(u) * t / (u - 1)`
/// for `u = 1 + t` (exact to a few ulp where `1 + t` rounds). NaN if
/// either is NaN; an infinite maximum is the result (where `lo - hi` would
/// be NaN).
fn log_add_exp(b: &mut Builder, dt: DType, a: Reg, c: Reg) -> Reg {
    let kind = a.kind;
    let (ty, one, zero) = if dt == DType::F64 {
        ("f64", f64_imm(1.0), f64_imm(0.0))
    } else {
        ("f32", f32_imm(1.0), f32_imm(0.0))
    };
    let f = |b: &mut Builder| b.reg(kind);
    let (hi, lo) = if dt == DType::F64 {
        (
            math_f64::max_min(b, true, a, c),
            math_f64::max_min(b, false, a, c),
        )
    } else {
        let (hi, lo) = (f(b), f(b));
        ins!(b, "max.NaN.f32 {hi}, {a}, {c}");
        ins!(b, "min.NaN.f32 {lo}, {a}, {c}");
        (hi, lo)
    };
    let d = f(b);
    ins!(b, "sub.rn.{ty} {d}, {lo}, {hi}");
    let val = |reg| Value { reg, dtype: dt };
    let t = ops::unary(b, UnaryOp::Exp, val(d), dt).reg;
    let (u, um1) = (f(b), f(b));
    ins!(b, "add.rn.{ty} {u}, {t}, {one}");
    ins!(b, "sub.rn.{ty} {um1}, {u}, {one}");
    let lu = ops::unary(b, UnaryOp::Log, val(u), dt).reg;
    let (q, l1p, r) = (f(b), f(b), f(b));
    ins!(b, "div.rn.{ty} {q}, {t}, {um1}");
    ins!(b, "mul.rn.{ty} {l1p}, {lu}, {q}");
    let tiny = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.{ty} {tiny}, {um1}, {zero}");
    ins!(b, "selp.{ty} {l1p}, {t}, {l1p}, {tiny}");
    ins!(b, "add.rn.{ty} {r}, {hi}, {l1p}");
    let inf = b.reg(RegKind::Pred);
    ins!(b, "testp.infinite.{ty} {inf}, {hi}");
    ins!(b, "selp.{ty} {r}, {hi}, {r}, {inf}");
    r
}

/// `shfl.sync.<mode>` of every register of `s` by `arg`.
pub(super) fn shuffle(b: &mut Builder, mode: &str, s: State, arg: &str) -> State {
    let c = if mode == "up" { 0 } else { 31 };
    let regs: Vec<Reg> = s
        .regs()
        .iter()
        .map(|r| {
            let t = b.reg(r.kind);
            if r.kind.bit_ty() == "b64" {
                // Shuffles move 32 bits: the two halves separately.
                let (lo, hi) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                ins!(b, "mov.b64 {{{lo}, {hi}}}, {r}");
                ins!(b, "shfl.sync.{mode}.b32 {lo}, {lo}, {arg}, {c}, -1");
                ins!(b, "shfl.sync.{mode}.b32 {hi}, {hi}, {arg}, {c}, -1");
                ins!(b, "mov.b64 {t}, {{{lo}, {hi}}}");
            } else {
                ins!(b, "shfl.sync.{mode}.b32 {t}, {r}, {arg}, {c}, -1");
            }
            t
        })
        .collect();
    State::from_regs(&regs)
}

/// Inclusive scan of `t` over the lanes of a warp below `width` (a power
/// of two), Hillis-Steele with `shfl.sync.up`.
pub(super) fn warp_scan(
    b: &mut Builder,
    si: &ScanInst,
    lane: Reg,
    mut t: State,
    width: u32,
) -> State {
    let mut off = 1;
    while off < width {
        let y = shuffle(b, "up", t, &off.to_string());
        let r = si.combine(b, y, t);
        let p = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.u32 {p}, {lane}, {off}");
        t = select(b, p, r, t);
        off *= 2;
    }
    t
}
