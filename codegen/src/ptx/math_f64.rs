//! `f64` sequences. Arithmetic, comparisons, `sqrt` and division are
//! native, IEEE-rounded PTX instructions; PTX has no `f64` transcendental
//! instruction, so the rest are smelt's own range reductions and
//! polynomials, each written once over [`F64Ops`] ([`f64alg`],
//! [`f64trig`], [`f64erf`]) and read here as PTX through [`Ptx`] (the
//! tests read the same functions as Rust arithmetic: `f64model`). `floor`,
//! `ceil`, `round`, `trunc` (`cvt.r*i.f64.f64`), `sign` and the division
//! family (`fmod`, `remainder`, `floor_divide`: the exact `fmod` of the
//! `fmod` module) are exact. Every float op has an `f64` sequence.

use super::builder::{ins, Builder, Reg, RegKind};
use super::f64ops::{Fv, Ptx};
use super::ops::f64_imm;
use super::{f64alg, f64erf, f64trig};
use crate::{BinaryOp, UnaryOp};

fn reg(b: &mut Builder) -> Reg {
    b.reg(RegKind::F64)
}

/// `op(x)` for an `f64` `x` (`Not` and `BitNot` have no float form).
/// Exact (correctly rounded): `neg`, `abs`, `relu`, `floor`, `ceil`,
/// `round`, `trunc`, `sign`, `square` (`mul.rn`), `sqrt` (`sqrt.rn`),
/// `recip` (`rcp.rn`), `rsqrt` (`sqrt.rn`, then `rcp.rn`, as the reference
/// `1 / sqrt(x)` rounds twice), `round_tf32` (through `f32`, as the
/// reference). Within 1 ulp: `log`, `log2`, `log1p`; 2 ulp: `exp`,
/// `exp2`, `expm1`, `sin`, `cos` (every finite argument), `erf`; 4 ulp:
/// `tanh`, `sigmoid`, `silu` (the reference's `x / (1 + e^-x)`). `gelu`
/// and `gelu_tanh` follow the reference's formulas, whose cancellation for
/// negative `x` bounds every backend's result to about `|x|` ulp of 1.
pub fn unary(b: &mut Builder, op: UnaryOp, x: Reg) -> Reg {
    if let Some(f) = algorithm(op) {
        let mut p = Ptx(b);
        let v = f(&mut p, Fv::R(x));
        return p.reg_of(v);
    }
    let r = reg(b);
    match op {
        UnaryOp::Neg => ins!(b, "neg.f64 {r}, {x}"),
        UnaryOp::Abs => ins!(b, "abs.f64 {r}, {x}"),
        UnaryOp::Relu => {
            // max.f64 has no NaN-propagating form; NaN stays NaN.
            let zero = b.mov(RegKind::F64, "f64", f64_imm(0.0));
            return max_min(b, true, x, zero);
        }
        UnaryOp::Square => ins!(b, "mul.rn.f64 {r}, {x}, {x}"),
        UnaryOp::Floor => ins!(b, "cvt.rmi.f64.f64 {r}, {x}"),
        UnaryOp::Ceil => ins!(b, "cvt.rpi.f64.f64 {r}, {x}"),
        UnaryOp::Round => ins!(b, "cvt.rni.f64.f64 {r}, {x}"),
        UnaryOp::Trunc => ins!(b, "cvt.rzi.f64.f64 {r}, {x}"),
        UnaryOp::Sign => {
            // +-1 by the sign bit, then 0 for both zeros, NaN for NaN.
            let (s, t) = (reg(b), reg(b));
            ins!(b, "copysign.f64 {s}, {x}, {}", f64_imm(1.0));
            let p = b.reg(RegKind::Pred);
            ins!(b, "testp.notanumber.f64 {p}, {x}");
            ins!(b, "selp.f64 {t}, {x}, {s}, {p}");
            ins!(b, "setp.eq.f64 {p}, {x}, {}", f64_imm(0.0));
            ins!(b, "selp.f64 {r}, {}, {t}, {p}", f64_imm(0.0));
        }
        UnaryOp::Sqrt => ins!(b, "sqrt.rn.f64 {r}, {x}"),
        UnaryOp::Recip => ins!(b, "rcp.rn.f64 {r}, {x}"),
        UnaryOp::Rsqrt => {
            let s = reg(b);
            ins!(b, "sqrt.rn.f64 {s}, {x}");
            ins!(b, "rcp.rn.f64 {r}, {s}");
        }
        UnaryOp::RoundTf32 => {
            let (f, t, g) = (
                b.reg(RegKind::F32),
                b.reg(RegKind::B32),
                b.reg(RegKind::F32),
            );
            ins!(b, "cvt.rn.f32.f64 {f}, {x}");
            ins!(b, "mov.b32 {t}, {f}");
            super::math::round_tf32(b, t, false);
            ins!(b, "mov.b32 {g}, {t}");
            ins!(b, "cvt.f64.f32 {r}, {g}");
        }
        UnaryOp::Not | UnaryOp::BitNot => unreachable!("{} has no float form", op.name()),
        _ => unreachable!("{} is an algorithm", op.name()),
    }
    r
}

/// A generic `f64` algorithm read as PTX.
type Alg = fn(&mut Ptx<'_>, Fv) -> Fv;

/// The algorithm of `op`, for the ops that are not one native instruction.
fn algorithm(op: UnaryOp) -> Option<Alg> {
    Some(match op {
        UnaryOp::Exp => |p, x| f64alg::exp(p, x, false),
        UnaryOp::Exp2 => |p, x| f64alg::exp(p, x, true),
        UnaryOp::Expm1 => |p, x| f64alg::expm1(p, x),
        UnaryOp::Log => |p, x| f64alg::log(p, x, false),
        UnaryOp::Log2 => |p, x| f64alg::log(p, x, true),
        UnaryOp::Log1p => |p, x| f64alg::log1p(p, x),
        UnaryOp::Tanh => |p, x| f64alg::tanh(p, x),
        UnaryOp::Sigmoid => |p, x| f64alg::sigmoid(p, x, false),
        UnaryOp::Silu => |p, x| f64alg::sigmoid(p, x, true),
        UnaryOp::Sin => |p, x| f64trig::sincos(p, x, false),
        UnaryOp::Cos => |p, x| f64trig::sincos(p, x, true),
        UnaryOp::Erf => |p, x| f64erf::erf(p, x),
        UnaryOp::Gelu => |p, x| f64erf::gelu(p, x),
        UnaryOp::GeluTanh => |p, x| f64erf::gelu_tanh(p, x),
        _ => return None,
    })
}

/// `op(x, y)` for the arithmetic ops (`add/sub/mul/div .rn.f64`, exact),
/// `pow` and `atan2` (2 ulp). Max and min
/// are [`max_min`], the division family the `fmod` module's.
pub fn binary(b: &mut Builder, op: BinaryOp, x: Reg, y: Reg) -> Reg {
    let text = match op {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        BinaryOp::Div => "div",
        BinaryOp::Pow | BinaryOp::Atan2 => {
            let mut p = Ptx(b);
            let v = if op == BinaryOp::Pow {
                f64alg::pow(&mut p, Fv::R(x), Fv::R(y))
            } else {
                f64trig::atan2(&mut p, Fv::R(x), Fv::R(y))
            };
            return p.reg_of(v);
        }
        _ => unreachable!("f64 {} is not arithmetic", op.name()),
    };
    let r = reg(b);
    ins!(b, "{text}.rn.f64 {r}, {x}, {y}");
    r
}

/// The larger (or smaller) of `x` and `y`, NaN if either is NaN (PTX's
/// `max.f64` returns the other operand instead).
pub fn max_min(b: &mut Builder, max: bool, x: Reg, y: Reg) -> Reg {
    let m = reg(b);
    let op = if max { "max" } else { "min" };
    ins!(b, "{op}.f64 {m}, {x}, {y}");
    let nan = b.reg(RegKind::Pred);
    ins!(b, "setp.nan.f64 {nan}, {x}, {y}");
    // x + y is NaN when either is.
    let s = reg(b);
    ins!(b, "add.rn.f64 {s}, {x}, {y}");
    let r = reg(b);
    ins!(b, "selp.f64 {r}, {s}, {m}, {nan}");
    r
}
