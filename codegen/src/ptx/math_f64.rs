//! `f64` sequences. Arithmetic, comparisons, `sqrt` and division are
//! native, IEEE-rounded PTX instructions; PTX has no `f64` transcendental
//! instruction, so those are range reduction and polynomials written here
//! (each listed in [`unary`] with its accuracy). Ops without an `f64`
//! sequence return `None`; `validate` refuses such kernels and the tensor
//! API refuses them on a CUDA device.

use super::builder::{ins, Builder, Reg, RegKind};
use super::ops::f64_imm;
use crate::{BinaryOp, UnaryOp};

/// Whether [`unary`] has a sequence for `op`.
pub fn has_unary(op: UnaryOp) -> bool {
    matches!(
        op,
        UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Relu
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Recip
            | UnaryOp::Square
    )
}

/// Whether [`binary`] (or [`max_min`]) has a sequence for `op`;
/// comparisons are plain `setp`.
pub fn has_binary(op: BinaryOp) -> bool {
    op != BinaryOp::Pow
}

fn reg(b: &mut Builder) -> Reg {
    b.reg(RegKind::F64)
}

/// `op(x)` for an `f64` `x`, or `None` without a sequence. All are exact
/// (correctly rounded): `neg`, `abs`, `relu`, `square` (`mul.rn`), `sqrt`
/// (`sqrt.rn`), `recip` (`rcp.rn`), `rsqrt` (`sqrt.rn`, then `rcp.rn`,
/// as the reference `1 / sqrt(x)` rounds twice).
pub fn unary(b: &mut Builder, op: UnaryOp, x: Reg) -> Option<Reg> {
    let r = reg(b);
    match op {
        UnaryOp::Neg => ins!(b, "neg.f64 {r}, {x}"),
        UnaryOp::Abs => ins!(b, "abs.f64 {r}, {x}"),
        UnaryOp::Relu => {
            // max.f64 has no NaN-propagating form; NaN stays NaN.
            let zero = b.mov(RegKind::F64, "f64", f64_imm(0.0));
            return Some(max_min(b, true, x, zero));
        }
        UnaryOp::Square => ins!(b, "mul.rn.f64 {r}, {x}, {x}"),
        UnaryOp::Sqrt => ins!(b, "sqrt.rn.f64 {r}, {x}"),
        UnaryOp::Recip => ins!(b, "rcp.rn.f64 {r}, {x}"),
        UnaryOp::Rsqrt => {
            let s = reg(b);
            ins!(b, "sqrt.rn.f64 {s}, {x}");
            ins!(b, "rcp.rn.f64 {r}, {s}");
        }
        _ => return None,
    }
    Some(r)
}

/// `op(x, y)` for the arithmetic ops (`add/sub/mul/div .rn.f64`, exact),
/// or `None` without a sequence. Max and min are [`max_min`].
pub fn binary(b: &mut Builder, op: BinaryOp, x: Reg, y: Reg) -> Option<Reg> {
    let text = match op {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        BinaryOp::Div => "div",
        _ => return None,
    };
    let r = reg(b);
    ins!(b, "{text}.rn.f64 {r}, {x}, {y}");
    Some(r)
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
