//! Scalar ops on register values: dtype conversions, the unary and binary
//! ops, `where`, and the reduction combiners. Half types live in `.f32`
//! registers holding a value already rounded to the half type; bools live in
//! predicates.

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use super::math::{self, LogBase, Trig};
use super::{fmod, int, special};
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use crate::DType;

/// A value of a kernel dtype in a register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value {
    pub reg: Reg,
    pub dtype: DType,
}

/// The register class that holds `dt`.
pub fn reg_kind(dt: DType) -> RegKind {
    match dt {
        DType::Bool => RegKind::Pred,
        DType::I32 => RegKind::B32,
        DType::F16 | DType::BF16 | DType::F32 => RegKind::F32,
    }
}

/// `f32` value of the `.b16` register `h` holding an `F16` or `BF16`.
pub fn widen_half(b: &mut Builder, h: Reg, dt: DType) -> Reg {
    let f = b.reg(RegKind::F32);
    if dt == DType::F16 {
        ins!(b, "cvt.f32.f16 {f}, {h}");
    } else {
        // bf16 is the top half of an f32 (cvt.f32.bf16 needs sm_90).
        let w = b.reg(RegKind::B32);
        ins!(b, "cvt.u32.u16 {w}, {h}");
        ins!(b, "shl.b32 {w}, {w}, 16");
        ins!(b, "mov.b32 {f}, {w}");
    }
    f
}

/// The `.b16` half of `f`, rounded to nearest even.
pub fn narrow_half(b: &mut Builder, f: Reg, dt: DType) -> Reg {
    let h = b.reg(RegKind::B16);
    let ty = if dt == DType::F16 { "f16" } else { "bf16" };
    ins!(b, "cvt.rn.{ty}.f32 {h}, {f}");
    h
}

fn round_half(b: &mut Builder, f: Reg, dt: DType) -> Reg {
    let h = narrow_half(b, f, dt);
    widen_half(b, h, dt)
}

/// `v` as an `f32` rounded to odd: exact when representable, else the
/// truncation with its last bit set, so that a later rounding to a half type
/// rounds once, correctly.
fn i32_to_f32_odd(b: &mut Builder, v: Reg) -> Reg {
    let f = b.reg(RegKind::F32);
    ins!(b, "cvt.rz.f32.s32 {f}, {v}");
    let back = b.reg(RegKind::B32);
    ins!(b, "cvt.rzi.s32.f32 {back}, {f}");
    let inexact = b.reg(RegKind::Pred);
    ins!(b, "setp.ne.s32 {inexact}, {back}, {v}");
    let bits = b.reg(RegKind::B32);
    ins!(b, "mov.b32 {bits}, {f}");
    let odd = b.reg(RegKind::B32);
    ins!(b, "or.b32 {odd}, {bits}, 1");
    ins!(b, "selp.b32 {bits}, {odd}, {bits}, {inexact}");
    let r = b.reg(RegKind::F32);
    ins!(b, "mov.b32 {r}, {bits}");
    r
}

/// `f32` to `i32` by the one conversion rule ([`DType::round`], Rust's
/// `as`): truncation toward zero, saturating, NaN to 0.
fn f32_to_i32(b: &mut Builder, f: Reg) -> Reg {
    let r = b.reg(RegKind::B32);
    ins!(b, "cvt.rzi.s32.f32 {r}, {f}");
    r
}

/// `v` converted to `to` with the interpreter's rounding.
pub fn convert(b: &mut Builder, v: Value, to: DType) -> Value {
    if v.dtype == to {
        return v;
    }
    let reg = match (v.dtype, to) {
        (DType::I32, DType::Bool) => {
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.ne.s32 {p}, {}, 0", v.reg);
            p
        }
        (_, DType::Bool) => {
            // NaN is truthy: unordered not-equal.
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.neu.f32 {p}, {}, 0f00000000", v.reg);
            p
        }
        (DType::Bool, DType::I32) => {
            let r = b.reg(RegKind::B32);
            ins!(b, "selp.s32 {r}, 1, 0, {}", v.reg);
            r
        }
        (DType::Bool, _) => math::select(b, f32_imm(1.0), f32_imm(0.0), v.reg),
        (_, DType::I32) => f32_to_i32(b, v.reg),
        (DType::I32, DType::F32) => {
            let f = b.reg(RegKind::F32);
            ins!(b, "cvt.rn.f32.s32 {f}, {}", v.reg);
            f
        }
        (DType::I32, half) => {
            let f = i32_to_f32_odd(b, v.reg);
            round_half(b, f, half)
        }
        (_, DType::F32) => v.reg,
        (_, half) => round_half(b, v.reg, half),
    };
    Value { reg, dtype: to }
}

/// How accurate a float result of dtype `dt` must be.
fn accuracy(dt: DType) -> math::Accuracy {
    if dt == DType::F32 {
        math::Accuracy::F32
    } else {
        math::Accuracy::Half
    }
}

/// Rounds an `f32` result to the half type `dt` (identity for `F32`).
fn finish_float(b: &mut Builder, f: Reg, dt: DType) -> Value {
    let reg = if dt == DType::F32 {
        f
    } else {
        round_half(b, f, dt)
    };
    Value { reg, dtype: dt }
}

/// `op(x)` with result dtype `out`.
pub fn unary(b: &mut Builder, op: UnaryOp, x: Value, out: DType) -> Value {
    if op == UnaryOp::Not {
        let x = convert(b, x, DType::Bool);
        let p = b.reg(RegKind::Pred);
        ins!(b, "not.pred {p}, {}", x.reg);
        return convert(
            b,
            Value {
                reg: p,
                dtype: DType::Bool,
            },
            out,
        );
    }
    if !out.is_float() {
        // The ops that keep integers (bools compute as i32).
        let x = convert(b, x, DType::I32).reg;
        let r = b.reg(RegKind::B32);
        match op {
            UnaryOp::Neg => ins!(b, "neg.s32 {r}, {x}"),
            UnaryOp::Abs => ins!(b, "abs.s32 {r}, {x}"),
            UnaryOp::Relu => ins!(b, "max.s32 {r}, {x}, 0"),
            UnaryOp::Square => ins!(b, "mul.lo.s32 {r}, {x}, {x}"),
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc => {
                ins!(b, "mov.b32 {r}, {x}")
            }
            UnaryOp::Sign => {
                // (x > 0) - (x < 0): selp gives 1 and -1 directly.
                let (pos, neg) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
                ins!(b, "setp.gt.s32 {pos}, {x}, 0");
                ins!(b, "setp.lt.s32 {neg}, {x}, 0");
                ins!(b, "selp.s32 {r}, 1, 0, {pos}");
                ins!(b, "selp.s32 {r}, -1, {r}, {neg}");
            }
            UnaryOp::BitNot => ins!(b, "not.b32 {r}, {x}"),
            _ => {
                // Float ops into an integer result: compute in f32.
                let f = unary(b, op, i32_value(x), DType::F32);
                return convert(b, f, out);
            }
        }
        return convert(
            b,
            Value {
                reg: r,
                dtype: DType::I32,
            },
            out,
        );
    }
    let x = convert(b, x, out).reg;
    let f = b.reg(RegKind::F32);
    let accuracy = accuracy(out);
    let r = match op {
        UnaryOp::Neg => {
            ins!(b, "neg.f32 {f}, {x}");
            return Value { reg: f, dtype: out };
        }
        UnaryOp::Abs => {
            ins!(b, "abs.f32 {f}, {x}");
            return Value { reg: f, dtype: out };
        }
        UnaryOp::Relu => {
            // max.NaN keeps NaN, as x > 0 || isnan(x) ? x : 0 does.
            ins!(b, "max.NaN.f32 {f}, {x}, 0f00000000");
            return Value { reg: f, dtype: out };
        }
        UnaryOp::Not => unreachable!("handled above"),
        // Half results cannot see the last f32 bits: the plain ex2 will do.
        UnaryOp::Exp if out == DType::F32 => math::exp(b, x),
        UnaryOp::Exp => math::exp_fast(b, x),
        UnaryOp::Exp2 => math::exp2(b, x),
        UnaryOp::Log => math::log(b, x, LogBase::E),
        UnaryOp::Log2 => math::log(b, x, LogBase::Two),
        UnaryOp::Sqrt => {
            ins!(b, "sqrt.rn.f32 {f}, {x}");
            f
        }
        UnaryOp::Rsqrt => {
            ins!(b, "sqrt.rn.f32 {f}, {x}");
            let r = b.reg(RegKind::F32);
            ins!(b, "rcp.rn.f32 {r}, {f}");
            r
        }
        UnaryOp::Recip => {
            ins!(b, "rcp.rn.f32 {f}, {x}");
            f
        }
        UnaryOp::Sin => math::sincos(b, x, Trig::Sin),
        UnaryOp::Cos => math::sincos(b, x, Trig::Cos),
        UnaryOp::Tanh => math::tanh(b, x, accuracy),
        UnaryOp::Sigmoid => math::over_one_plus_exp_neg(b, f32_imm(1.0), x, accuracy),
        UnaryOp::Silu => math::over_one_plus_exp_neg(b, x, x, accuracy),
        UnaryOp::Gelu => special::gelu(b, x, accuracy),
        UnaryOp::GeluTanh => math::gelu_tanh(b, x, accuracy),
        UnaryOp::Erf => special::erf(b, x, accuracy),
        UnaryOp::Log1p => special::log1p(b, x, accuracy),
        UnaryOp::Expm1 => special::expm1(b, x),
        // Integral results of half inputs are halves again: no rounding.
        UnaryOp::Floor => return rounded(b, "rmi", x, out),
        UnaryOp::Ceil => return rounded(b, "rpi", x, out),
        UnaryOp::Round => return rounded(b, "rni", x, out),
        UnaryOp::Trunc => return rounded(b, "rzi", x, out),
        UnaryOp::Sign => {
            // +-1 by the sign bit, then 0 for both zeros, NaN for NaN.
            ins!(b, "copysign.f32 {f}, {x}, {}", f32_imm(1.0));
            let p = b.reg(RegKind::Pred);
            ins!(b, "testp.notanumber.f32 {p}, {x}");
            ins!(b, "selp.f32 {f}, {x}, {f}, {p}");
            ins!(b, "setp.eq.f32 {p}, {x}, 0f00000000");
            ins!(b, "selp.f32 {f}, 0f00000000, {f}, {p}");
            return Value { reg: f, dtype: out };
        }
        UnaryOp::BitNot => unreachable!("bitwise_not of a float"),
        UnaryOp::Square => math::mul(b, x, x),
        UnaryOp::RoundTf32 => {
            let t = b.reg(RegKind::B32);
            ins!(b, "cvt.rna.tf32.f32 {t}, {x}");
            ins!(b, "mov.b32 {f}, {t}");
            f
        }
    };
    finish_float(b, r, out)
}

/// `x` rounded to an integral value by the `cvt` rounding `mode`.
fn rounded(b: &mut Builder, mode: &str, x: Reg, out: DType) -> Value {
    let f = b.reg(RegKind::F32);
    ins!(b, "cvt.{mode}.f32.f32 {f}, {x}");
    Value { reg: f, dtype: out }
}

fn i32_value(reg: Reg) -> Value {
    Value {
        reg,
        dtype: DType::I32,
    }
}

/// The dtype a binary op computes in, given its operands and result.
fn compute_dtype(op: BinaryOp, x: DType, y: DType, out: DType) -> DType {
    match op {
        BinaryOp::And | BinaryOp::Or => DType::Bool,
        _ if op.is_comparison() => x.promote(y),
        BinaryOp::Max | BinaryOp::Min => out,
        _ if out == DType::Bool => DType::I32,
        _ => out,
    }
}

/// `op(x, y)` with result dtype `out`.
pub fn binary(b: &mut Builder, op: BinaryOp, x: Value, y: Value, out: DType) -> Value {
    let cd = compute_dtype(op, x.dtype, y.dtype, out);
    let (xv, yv) = (convert(b, x, cd), convert(b, y, cd));
    let (x, y) = (xv.reg, yv.reg);
    let v = match cd {
        DType::Bool => {
            let p = b.reg(RegKind::Pred);
            match op {
                BinaryOp::And | BinaryOp::Min => ins!(b, "and.pred {p}, {x}, {y}"),
                BinaryOp::Or | BinaryOp::Max => ins!(b, "or.pred {p}, {x}, {y}"),
                // Comparisons of bools compare 0/1 integers.
                _ => {
                    let xi = convert(b, xv, DType::I32);
                    let yi = convert(b, yv, DType::I32);
                    return binary(b, op, xi, yi, out);
                }
            }
            Value {
                reg: p,
                dtype: DType::Bool,
            }
        }
        _ if op.is_comparison() => {
            let (ty, cmp) = match (cd, op) {
                (DType::I32, BinaryOp::Ne) => ("s32", "ne"),
                (DType::I32, _) => ("s32", cmp_name(op)),
                // Unordered not-equal: NaN != anything.
                (_, BinaryOp::Ne) => ("f32", "neu"),
                _ => ("f32", cmp_name(op)),
            };
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.{cmp}.{ty} {p}, {x}, {y}");
            Value {
                reg: p,
                dtype: DType::Bool,
            }
        }
        DType::I32 => {
            let r = b.reg(RegKind::B32);
            match op {
                BinaryOp::Add => ins!(b, "add.s32 {r}, {x}, {y}"),
                BinaryOp::Sub => ins!(b, "sub.s32 {r}, {x}, {y}"),
                BinaryOp::Mul => ins!(b, "mul.lo.s32 {r}, {x}, {y}"),
                BinaryOp::Max => ins!(b, "max.s32 {r}, {x}, {y}"),
                BinaryOp::Min => ins!(b, "min.s32 {r}, {x}, {y}"),
                BinaryOp::Pow => {
                    let r = math::powi(b, x, y);
                    return convert(b, i32_value(r), out);
                }
                BinaryOp::Fmod | BinaryOp::Remainder | BinaryOp::FloorDiv => {
                    let r = int::binary(b, op, x, y, 32);
                    return convert(b, i32_value(r), out);
                }
                _ if op.is_bitwise() => {
                    let r = int::binary(b, op, x, y, 32);
                    return convert(b, i32_value(r), out);
                }
                // True division of integers is a float op.
                _ => {
                    let (xf, yf) = (convert(b, xv, DType::F32), convert(b, yv, DType::F32));
                    let q = binary(b, op, xf, yf, DType::F32);
                    return convert(b, q, out);
                }
            }
            Value {
                reg: r,
                dtype: DType::I32,
            }
        }
        _ => {
            let r = b.reg(RegKind::F32);
            match op {
                BinaryOp::Add => ins!(b, "add.rn.f32 {r}, {x}, {y}"),
                BinaryOp::Sub => ins!(b, "sub.rn.f32 {r}, {x}, {y}"),
                BinaryOp::Mul => ins!(b, "mul.rn.f32 {r}, {x}, {y}"),
                BinaryOp::Div if cd == DType::F32 => ins!(b, "div.rn.f32 {r}, {x}, {y}"),
                // 2 ulp of f32 are invisible after rounding to a half type.
                BinaryOp::Div => ins!(b, "div.full.f32 {r}, {x}, {y}"),
                BinaryOp::Max => ins!(b, "max.NaN.f32 {r}, {x}, {y}"),
                BinaryOp::Min => ins!(b, "min.NaN.f32 {r}, {x}, {y}"),
                BinaryOp::Pow => {
                    let r = math::powf(b, x, y);
                    return finish_float(b, r, cd);
                }
                BinaryOp::Atan2 => {
                    let r = special::atan2(b, x, y, accuracy(cd));
                    return finish_float(b, r, cd);
                }
                BinaryOp::Fmod => {
                    // Exact, so a half result needs no rounding.
                    let r = fmod::fmod(b, x, y);
                    return Value { reg: r, dtype: cd };
                }
                BinaryOp::Remainder => {
                    let r = fmod::remainder(b, x, y);
                    return finish_float(b, r, cd);
                }
                BinaryOp::FloorDiv => {
                    let r = fmod::floor_divide(b, x, y);
                    return finish_float(b, r, cd);
                }
                _ => unreachable!("comparisons handled above, no bitwise ops on floats"),
            }
            if matches!(op, BinaryOp::Max | BinaryOp::Min) {
                Value { reg: r, dtype: cd }
            } else {
                finish_float(b, r, cd)
            }
        }
    };
    convert(b, v, out)
}

fn cmp_name(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Lt => "lt",
        BinaryOp::Le => "le",
        BinaryOp::Gt => "gt",
        BinaryOp::Ge => "ge",
        BinaryOp::Eq => "eq",
        _ => unreachable!("not an ordered comparison: {op:?}"),
    }
}

/// `c ? x : y` in dtype `out`.
pub fn select(b: &mut Builder, c: Value, x: Value, y: Value, out: DType) -> Value {
    let c = convert(b, c, DType::Bool).reg;
    let (x, y) = (convert(b, x, out).reg, convert(b, y, out).reg);
    let r = b.reg(reg_kind(out));
    match out {
        DType::Bool => {
            let (t, nc) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
            ins!(b, "and.pred {t}, {c}, {x}");
            ins!(b, "not.pred {nc}, {c}");
            ins!(b, "and.pred {r}, {nc}, {y}");
            ins!(b, "or.pred {r}, {r}, {t}");
        }
        DType::I32 => ins!(b, "selp.b32 {r}, {x}, {y}, {c}"),
        _ => ins!(b, "selp.f32 {r}, {x}, {y}, {c}"),
    }
    Value { reg: r, dtype: out }
}

/// The dtype a reduction accumulates in: bools as 0/1 `i32` (so that warp
/// shuffles can move them), half types in `f32`.
pub fn acc_dtype(dt: DType) -> DType {
    match dt {
        DType::Bool => DType::I32,
        DType::I32 => DType::I32,
        _ => DType::F32,
    }
}

/// A fresh accumulator register holding the identity of `op` for a
/// reduction of result dtype `dt`.
pub fn identity(b: &mut Builder, op: ReduceOp, dt: DType) -> Reg {
    let acc = acc_dtype(dt);
    let v = op.identity(dt);
    if acc == DType::I32 {
        b.mov(RegKind::B32, "b32", v as i32)
    } else {
        b.mov(RegKind::F32, "f32", f32_imm(v as f32))
    }
}

/// `acc = op(acc, x)` in place, where `pred` holds when given; `x` is
/// already in [`acc_dtype`].
pub fn combine(b: &mut Builder, op: ReduceOp, acc_dt: DType, acc: Reg, x: Reg, pred: Option<Reg>) {
    let guard = pred.map(|p| format!("@{p} ")).unwrap_or_default();
    let text = match (op, acc_dt) {
        (ReduceOp::Sum, DType::I32) => "add.s32",
        (ReduceOp::Prod, DType::I32) => "mul.lo.s32",
        (ReduceOp::Max, DType::I32) => "max.s32",
        (ReduceOp::Min, DType::I32) => "min.s32",
        (ReduceOp::Sum, _) => "add.rn.f32",
        (ReduceOp::Prod, _) => "mul.rn.f32",
        (ReduceOp::Max, _) => "max.NaN.f32",
        (ReduceOp::Min, _) => "min.NaN.f32",
    };
    ins!(b, "{guard}{text} {acc}, {acc}, {x}");
}
