//! Scalar ops on register values: dtype conversions, the unary and binary
//! ops, `where`, and the reduction combiners. Half types and FP8 live in
//! `.f32` registers holding a value already rounded to their type; bools live in
//! predicates; 8- and 16-bit integers in `.b32` registers, always extended
//! from their type's bits (see [`normalize`]).

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use super::fmod::{self, Fl};
use super::math::{self, LogBase, Trig};
use super::math_f64;
use super::{fp8, int, special};
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use crate::DType;

/// A value of a kernel dtype in a register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value {
    pub reg: Reg,
    pub dtype: DType,
}

/// The register class that holds `dt`: predicates for bools, `.b32` for
/// integers up to 32 bits (8- and 16-bit ones always sign- or
/// zero-extended, see [`normalize`]), `.b64` for `I64`, `.f32` for `F32`
/// and the half types, `.f64` for `F64`.
pub fn reg_kind(dt: DType) -> RegKind {
    match dt {
        DType::Bool => RegKind::Pred,
        DType::I64 => RegKind::B64,
        DType::F64 => RegKind::F64,
        _ if dt.is_float() => RegKind::F32,
        _ => RegKind::B32,
    }
}

/// The PTX type an integer (or float) dtype computes in: `s32` for every
/// integer up to 32 bits, `s64`, `f32` (halves too) or `f64`.
fn compute_ty(dt: DType) -> &'static str {
    match reg_kind(dt) {
        RegKind::B64 => "s64",
        RegKind::F64 => "f64",
        RegKind::F32 => "f32",
        _ => "s32",
    }
}

/// The `.f64` immediate of `v`.
pub fn f64_imm(v: f64) -> String {
    format!("0d{:016X}", v.to_bits())
}

/// The 32-bit register `r` wrapped to the 8-, 16- or 32-bit integer type
/// `dt` and extended back to 32 bits (zero for `U8`, sign otherwise): how
/// narrow integers live in registers, so that every op sees the value
/// the interpreter's [`DType::wrap`] gives.
pub fn normalize(b: &mut Builder, r: Reg, dt: DType) -> Reg {
    let len = match dt {
        DType::U8 => {
            let t = b.reg(RegKind::B32);
            ins!(b, "and.b32 {t}, {r}, 255");
            return t;
        }
        DType::I8 => 8,
        DType::I16 => 16,
        _ => return r,
    };
    let t = b.reg(RegKind::B32);
    ins!(b, "bfe.s32 {t}, {r}, 0, {len}");
    t
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

/// `f` rounded to the narrow float `dt` (a half type or FP8), as an `f32`.
fn round_half(b: &mut Builder, f: Reg, dt: DType) -> Reg {
    if dt.is_fp8() {
        let c = fp8::narrow(b, f, dt);
        return fp8::widen(b, c, dt);
    }
    let h = narrow_half(b, f, dt);
    widen_half(b, h, dt)
}

/// `v` (of PTX type `src`: `s32`, `s64` or `f64`) as an `f32` rounded to
/// odd: exact when representable, else the truncation with its last bit
/// set, so that a later rounding to a half type rounds once, correctly
/// (the interpreter's `convert::to_f32_odd`).
fn to_f32_odd(b: &mut Builder, v: Reg, src: &str) -> Reg {
    let f = b.reg(RegKind::F32);
    ins!(b, "cvt.rz.f32.{src} {f}, {v}");
    let back = b.reg(v.kind);
    let inexact = b.reg(RegKind::Pred);
    if src == "f64" {
        ins!(b, "cvt.f64.f32 {back}, {f}");
        ins!(b, "setp.neu.f64 {inexact}, {back}, {v}");
    } else {
        ins!(b, "cvt.rzi.{src}.f32 {back}, {f}");
        ins!(b, "setp.ne.{src} {inexact}, {back}, {v}");
    }
    let bits = b.reg(RegKind::B32);
    ins!(b, "mov.b32 {bits}, {f}");
    let odd = b.reg(RegKind::B32);
    ins!(b, "or.b32 {odd}, {bits}, 1");
    ins!(b, "selp.b32 {bits}, {odd}, {bits}, {inexact}");
    let r = b.reg(RegKind::F32);
    ins!(b, "mov.b32 {r}, {bits}");
    r
}

/// A value as a predicate: `!= 0`, NaN true (unordered not-equal).
fn to_bool(b: &mut Builder, v: Value) -> Reg {
    let p = b.reg(RegKind::Pred);
    match reg_kind(v.dtype) {
        RegKind::F32 => ins!(b, "setp.neu.f32 {p}, {}, 0f00000000", v.reg),
        RegKind::F64 => ins!(b, "setp.neu.f64 {p}, {}, {}", v.reg, f64_imm(0.0)),
        _ => ins!(b, "setp.ne.{} {p}, {}, 0", compute_ty(v.dtype), v.reg),
    }
    p
}

/// A predicate as 1 or 0 of dtype `to`.
fn from_bool(b: &mut Builder, p: Reg, to: DType) -> Reg {
    let r = b.reg(reg_kind(to));
    match reg_kind(to) {
        RegKind::F32 => ins!(b, "selp.f32 {r}, {}, {}, {p}", f32_imm(1.0), f32_imm(0.0)),
        RegKind::F64 => ins!(b, "selp.f64 {r}, {}, {}, {p}", f64_imm(1.0), f64_imm(0.0)),
        RegKind::B64 => ins!(b, "selp.b64 {r}, 1, 0, {p}"),
        _ => ins!(b, "selp.b32 {r}, 1, 0, {p}"),
    }
    r
}

fn float_to_float(b: &mut Builder, v: Value, to: DType) -> Reg {
    match (v.dtype, to) {
        (DType::F64, DType::F32) => {
            let f = b.reg(RegKind::F32);
            ins!(b, "cvt.rn.f32.f64 {f}, {}", v.reg);
            f
        }
        (DType::F64, half) => {
            let f = to_f32_odd(b, v.reg, "f64");
            round_half(b, f, half)
        }
        (_, DType::F64) => {
            let d = b.reg(RegKind::F64);
            ins!(b, "cvt.f64.f32 {d}, {}", v.reg);
            d
        }
        (_, DType::F32) => v.reg,
        (_, half) => round_half(b, v.reg, half),
    }
}

/// Float to integer by the one rule: truncation toward zero, saturating
/// (`cvt.rzi` clamps to the destination range, and 8- and 16-bit types
/// clamp after), NaN to 0 (made explicit: the PTX manual promises it for
/// no `cvt`).
fn float_to_int(b: &mut Builder, v: Value, to: DType) -> Reg {
    let src = compute_ty(v.dtype);
    let dst = compute_ty(to);
    let r = b.reg(reg_kind(to));
    ins!(b, "cvt.rzi.{dst}.{src} {r}, {}", v.reg);
    if to.bits() < 32 {
        ins!(b, "max.s32 {r}, {r}, {}", to.int_min());
        ins!(b, "min.s32 {r}, {r}, {}", to.int_max());
    }
    let nan = b.reg(RegKind::Pred);
    ins!(b, "setp.nan.{src} {nan}, {}, {}", v.reg, v.reg);
    let out = b.reg(reg_kind(to));
    ins!(b, "selp.b{} {out}, 0, {r}, {nan}", to.bits().max(32));
    out
}

fn int_to_float(b: &mut Builder, v: Value, to: DType) -> Reg {
    let src = compute_ty(v.dtype);
    match to {
        DType::F32 | DType::F64 => {
            let f = b.reg(reg_kind(to));
            ins!(b, "cvt.rn.{}.{src} {f}, {}", compute_ty(to), v.reg);
            f
        }
        // Below 2^24 the f32 is exact; beyond it round to odd first.
        half if v.dtype.bits() < 32 => {
            let f = b.reg(RegKind::F32);
            ins!(b, "cvt.rn.f32.s32 {f}, {}", v.reg);
            round_half(b, f, half)
        }
        half => {
            let f = to_f32_odd(b, v.reg, src);
            round_half(b, f, half)
        }
    }
}

fn int_to_int(b: &mut Builder, v: Value, to: DType) -> Reg {
    let from = v.dtype;
    if to.int_min() <= from.int_min() && from.int_max() <= to.int_max() {
        // Every value of `from` is one of `to`: only the register may widen.
        if to == DType::I64 && from != DType::I64 {
            let r = b.reg(RegKind::B64);
            ins!(b, "cvt.s64.s32 {r}, {}", v.reg);
            return r;
        }
        return v.reg;
    }
    let low = if from == DType::I64 {
        let r = b.reg(RegKind::B32);
        ins!(b, "cvt.u32.u64 {r}, {}", v.reg);
        r
    } else {
        v.reg
    };
    normalize(b, low, to)
}

/// `v` converted to `to` by the one conversion rule (`convert.rs`).
pub fn convert(b: &mut Builder, v: Value, to: DType) -> Value {
    let from = v.dtype;
    if from == to {
        return v;
    }
    let reg = if to == DType::Bool {
        to_bool(b, v)
    } else if from == DType::Bool {
        from_bool(b, v.reg, to)
    } else if from.is_float() && to.is_float() {
        float_to_float(b, v, to)
    } else if from.is_float() {
        float_to_int(b, v, to)
    } else if to.is_float() {
        int_to_float(b, v, to)
    } else {
        int_to_int(b, v, to)
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
        // The ops that keep integers, in 32 or 64 bits, then wrapped to
        // the type (bools compute as `I32`, their result type).
        let x = convert(b, x, out).reg;
        let ty = compute_ty(out);
        let bits = x.kind.bit_ty();
        let r = b.reg(x.kind);
        match op {
            UnaryOp::Neg => ins!(b, "neg.{ty} {r}, {x}"),
            UnaryOp::Abs => ins!(b, "abs.{ty} {r}, {x}"),
            UnaryOp::Relu => ins!(b, "max.{ty} {r}, {x}, 0"),
            UnaryOp::Square => ins!(b, "mul.lo.{ty} {r}, {x}, {x}"),
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc => {
                ins!(b, "mov.{bits} {r}, {x}")
            }
            UnaryOp::Sign => {
                // (x > 0) - (x < 0): selp gives 1 and -1 directly.
                let (pos, neg) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
                ins!(b, "setp.gt.{ty} {pos}, {x}, 0");
                ins!(b, "setp.lt.{ty} {neg}, {x}, 0");
                ins!(b, "selp.{ty} {r}, 1, 0, {pos}");
                ins!(b, "selp.{ty} {r}, -1, {r}, {neg}");
            }
            UnaryOp::BitNot => ins!(b, "not.{bits} {r}, {x}"),
            _ => unreachable!("{} has a float result", op.name()),
        }
        let reg = normalize(b, r, out);
        return Value { reg, dtype: out };
    }
    if out == DType::F64 {
        let x = convert(b, x, out).reg;
        let reg = math_f64::unary(b, op, x);
        return Value { reg, dtype: out };
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
            ins!(b, "mov.b32 {t}, {x}");
            // Elementwise kernels are emitted for sm_80 too.
            math::round_tf32(b, t, false);
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

/// `op(x, y)` with result dtype `out`, computed in
/// [`BinaryOp::compute_dtype`] as the interpreter does.
pub fn binary(b: &mut Builder, op: BinaryOp, x: Value, y: Value, out: DType) -> Value {
    let cd = op.compute_dtype(x.dtype, y.dtype, out);
    let (xv, yv) = (convert(b, x, cd), convert(b, y, cd));
    let (x, y) = (xv.reg, yv.reg);
    let ty = compute_ty(cd);
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
            let cmp = match op {
                // Unordered not-equal: NaN != anything.
                BinaryOp::Ne if cd.is_float() => "neu",
                BinaryOp::Ne => "ne",
                _ => cmp_name(op),
            };
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.{cmp}.{ty} {p}, {x}, {y}");
            Value {
                reg: p,
                dtype: DType::Bool,
            }
        }
        _ if !cd.is_float() => {
            let r = match op {
                BinaryOp::Pow => math::powi(b, x, y),
                BinaryOp::Fmod | BinaryOp::Remainder | BinaryOp::FloorDiv => {
                    int::binary(b, op, x, y, cd.bits().max(32))
                }
                _ if op.is_bitwise() => int::binary(b, op, x, y, cd.bits().max(32)),
                _ => {
                    let text = match op {
                        BinaryOp::Add => "add",
                        BinaryOp::Sub => "sub",
                        BinaryOp::Mul => "mul.lo",
                        BinaryOp::Max => "max",
                        BinaryOp::Min => "min",
                        _ => unreachable!("{} computes in a float", op.name()),
                    };
                    let r = b.reg(x.kind);
                    ins!(b, "{text}.{ty} {r}, {x}, {y}");
                    r
                }
            };
            Value {
                reg: normalize(b, r, cd),
                dtype: cd,
            }
        }
        DType::F64 => {
            let reg = match op {
                BinaryOp::Max | BinaryOp::Min => math_f64::max_min(b, op == BinaryOp::Max, x, y),
                BinaryOp::Fmod => fmod::fmod(b, Fl::F64, x, y),
                BinaryOp::Remainder => fmod::remainder(b, Fl::F64, x, y),
                BinaryOp::FloorDiv => fmod::floor_divide(b, Fl::F64, x, y),
                _ => math_f64::binary(b, op, x, y),
            };
            Value { reg, dtype: cd }
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
                    let v = finish_float(b, r, cd);
                    return convert(b, v, out);
                }
                BinaryOp::Atan2 => {
                    let r = special::atan2(b, x, y, accuracy(cd));
                    return finish_float(b, r, cd);
                }
                BinaryOp::Fmod => {
                    // Exact, so a half result needs no rounding.
                    let r = fmod::fmod(b, Fl::F32, x, y);
                    return Value { reg: r, dtype: cd };
                }
                BinaryOp::Remainder => {
                    let r = fmod::remainder(b, Fl::F32, x, y);
                    return finish_float(b, r, cd);
                }
                BinaryOp::FloorDiv => {
                    let r = fmod::floor_divide(b, Fl::F32, x, y);
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
    match reg_kind(out) {
        RegKind::Pred => {
            let (t, nc) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
            ins!(b, "and.pred {t}, {c}, {x}");
            ins!(b, "not.pred {nc}, {c}");
            ins!(b, "and.pred {r}, {nc}, {y}");
            ins!(b, "or.pred {r}, {r}, {t}");
        }
        k => ins!(b, "selp.{} {r}, {x}, {y}, {c}", k.bit_ty()),
    }
    Value { reg: r, dtype: out }
}

/// The dtype a reduction accumulates in: bools and integers up to 32 bits
/// as `i32` (so that warp shuffles can move them), `I64` and `F64` as
/// themselves, half types in `f32`.
pub fn acc_dtype(dt: DType) -> DType {
    match dt {
        DType::I64 | DType::F64 => dt,
        _ if dt.is_float() => DType::F32,
        _ => DType::I32,
    }
}

/// A fresh accumulator register holding the identity of `op` for a
/// reduction of result dtype `dt`.
pub fn identity(b: &mut Builder, op: ReduceOp, dt: DType) -> Reg {
    let acc = acc_dtype(dt);
    match acc {
        DType::I32 => b.mov(RegKind::B32, "b32", op.identity_int(dt) as i32),
        DType::I64 => b.mov(RegKind::B64, "b64", op.identity_int(dt)),
        DType::F64 => b.mov(RegKind::F64, "f64", f64_imm(op.identity(dt))),
        _ => b.mov(RegKind::F32, "f32", f32_imm(op.identity(dt) as f32)),
    }
}

/// `acc = op(acc, x)` in place, where `pred` holds when given; `x` is
/// already in [`acc_dtype`].
pub fn combine(b: &mut Builder, op: ReduceOp, acc_dt: DType, acc: Reg, x: Reg, pred: Option<Reg>) {
    let guard = pred.map(|p| format!("@{p} ")).unwrap_or_default();
    let ty = compute_ty(acc_dt);
    if acc_dt == DType::F64 && matches!(op, ReduceOp::Max | ReduceOp::Min) {
        let m = math_f64::max_min(b, op == ReduceOp::Max, acc, x);
        ins!(b, "{guard}mov.f64 {acc}, {m}");
        return;
    }
    let text = match (op, acc_dt.is_float()) {
        (ReduceOp::Sum, false) => "add",
        (ReduceOp::Prod, false) => "mul.lo",
        (ReduceOp::Sum, true) => "add.rn",
        (ReduceOp::Prod, true) => "mul.rn",
        (ReduceOp::Max, false) => "max",
        (ReduceOp::Min, false) => "min",
        (ReduceOp::Max, true) => "max.NaN",
        (ReduceOp::Min, true) => "min.NaN",
    };
    ins!(b, "{guard}{text}.{ty} {acc}, {acc}, {x}");
}
