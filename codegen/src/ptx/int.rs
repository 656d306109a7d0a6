//! Integer ops beyond `+ - *`: the division family, bitwise ops and
//! shifts, with the edge rules of [`crate::int_ops`]. Written for a signed
//! integer of `bits` bits (32 or 64) held in a `.b32` / `.b64` register.

use super::builder::{ins, Builder, Reg, RegKind};
use crate::BinaryOp;

fn int_reg(b: &mut Builder, bits: u32) -> Reg {
    b.reg(if bits == 64 {
        RegKind::B64
    } else {
        RegKind::B32
    })
}

/// `op(x, y)` on `bits`-wide signed integers, for the ops that
/// [`BinaryOp::eval_int`] defines through `int_ops`, and the bitwise ones.
pub fn binary(b: &mut Builder, op: BinaryOp, x: Reg, y: Reg, bits: u32) -> Reg {
    let (s, w) = (format!("s{bits}"), format!("b{bits}"));
    let r = int_reg(b, bits);
    match op {
        BinaryOp::BitAnd => ins!(b, "and.{w} {r}, {x}, {y}"),
        BinaryOp::BitOr => ins!(b, "or.{w} {r}, {x}, {y}"),
        BinaryOp::BitXor => ins!(b, "xor.{w} {r}, {x}, {y}"),
        // PTX clamps shift amounts above the width (a negative amount is a
        // huge unsigned one): 0 for shl, the sign fill for shr.s, which is
        // the rule. The amount is a .u32 operand.
        BinaryOp::Shl | BinaryOp::Shr => {
            let amount = shift_amount(b, y, bits);
            let text = if op == BinaryOp::Shl {
                format!("shl.{w}")
            } else {
                format!("shr.{s}")
            };
            ins!(b, "{text} {r}, {x}, {amount}");
        }
        BinaryOp::Fmod | BinaryOp::Remainder | BinaryOp::FloorDiv => {
            return division(b, op, x, y, bits);
        }
        _ => unreachable!("not an integer-only op: {op:?}"),
    }
    r
}

/// The shift amount as a `.u32`: a 64-bit amount saturates to `u32::MAX`
/// when it does not fit (so it still clamps).
fn shift_amount(b: &mut Builder, y: Reg, bits: u32) -> Reg {
    if bits != 64 {
        return y;
    }
    let c = b.reg(RegKind::B64);
    ins!(b, "min.u64 {c}, {y}, 4294967295");
    let a = b.reg(RegKind::B32);
    ins!(b, "cvt.u32.u64 {a}, {c}");
    a
}

/// `fmod`, `remainder` or `floor_divide`: the hardware divides by `y`
/// except for 0 and -1 (undefined or overflowing there), which divide by 1
/// and are then fixed: remainders are 0 for both, the quotient is 0 for
/// `y = 0` and `-x` (wrapping) for `y = -1`.
fn division(b: &mut Builder, op: BinaryOp, x: Reg, y: Reg, bits: u32) -> Reg {
    let (s, w) = (format!("s{bits}"), format!("b{bits}"));
    let (zero, minus1) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
    ins!(b, "setp.eq.{s} {zero}, {y}, 0");
    ins!(b, "setp.eq.{s} {minus1}, {y}, -1");
    let special = b.reg(RegKind::Pred);
    ins!(b, "or.pred {special}, {zero}, {minus1}");
    let safe = int_reg(b, bits);
    ins!(b, "selp.{w} {safe}, 1, {y}, {special}");
    let r = int_reg(b, bits);
    ins!(b, "rem.{s} {r}, {x}, {safe}");
    if op == BinaryOp::Fmod {
        return r;
    }
    // A nonzero remainder whose sign differs from y's.
    let t = int_reg(b, bits);
    ins!(b, "xor.{w} {t}, {r}, {y}");
    let (differ, nz) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
    ins!(b, "setp.lt.{s} {differ}, {t}, 0");
    ins!(b, "setp.ne.{s} {nz}, {r}, 0");
    ins!(b, "and.pred {differ}, {differ}, {nz}");
    let out = int_reg(b, bits);
    if op == BinaryOp::Remainder {
        ins!(b, "add.{s} {t}, {r}, {y}");
        ins!(b, "selp.{w} {out}, {t}, {r}, {differ}");
        return out;
    }
    ins!(b, "div.{s} {out}, {x}, {safe}");
    ins!(b, "sub.{s} {t}, {out}, 1");
    ins!(b, "selp.{w} {out}, {t}, {out}, {differ}");
    ins!(b, "neg.{s} {t}, {x}");
    ins!(b, "selp.{w} {out}, {t}, {out}, {minus1}");
    ins!(b, "selp.{w} {out}, 0, {out}, {zero}");
    out
}
