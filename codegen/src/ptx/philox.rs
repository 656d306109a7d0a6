//! Philox4x32-10 in PTX: the rounds of [`crate::philox`] on 32-bit
//! registers (`mul.hi.u32`/`mul.lo.u32`, `xor.b32`, `add.u32`), so a draw
//! has exactly the interpreter's bits.

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use super::ops::f64_imm;
use crate::philox::{Draw, M, ROUNDS, W};

/// Word `w` of block `j` (counter `[counter, j, 0, 0]`) under key `[k0,
/// k1]` (`.b32` registers).
fn word(b: &mut Builder, k0: Reg, k1: Reg, counter: Reg, j: u32, w: usize) -> Reg {
    let zero = b.mov(RegKind::B32, "b32", 0);
    let block = b.mov(RegKind::B32, "b32", j);
    let (mut c, mut k) = ([counter, block, zero, zero], [k0, k1]);
    for round in 0..ROUNDS {
        if round > 0 {
            let bumped = [b.reg(RegKind::B32), b.reg(RegKind::B32)];
            for i in 0..2 {
                ins!(b, "add.u32 {}, {}, {}", bumped[i], k[i], W[i]);
            }
            k = bumped;
        }
        let [hi0, lo0, hi1, lo1, x0, x2] = [(); 6].map(|_| b.reg(RegKind::B32));
        ins!(b, "mul.hi.u32 {hi0}, {}, {}", c[0], M[0]);
        ins!(b, "mul.lo.u32 {lo0}, {}, {}", c[0], M[0]);
        ins!(b, "mul.hi.u32 {hi1}, {}, {}", c[2], M[1]);
        ins!(b, "mul.lo.u32 {lo1}, {}, {}", c[2], M[1]);
        ins!(b, "xor.b32 {x0}, {hi1}, {}", c[1]);
        ins!(b, "xor.b32 {x0}, {x0}, {}", k[0]);
        ins!(b, "xor.b32 {x2}, {hi0}, {}", c[3]);
        ins!(b, "xor.b32 {x2}, {x2}, {}", k[1]);
        c = [x0, lo1, x2, lo0];
    }
    c[w]
}

/// The value `draw` makes of the blocks for counter `counter` under key
/// `[k0, k1]` (all `.b32` registers; `bound`, a `.b64`, for
/// [`Draw::Below`]): a `.f32` register for a `Uniform`, a `.f64` for a
/// `Uniform53`, a `.b64` for a `Below`.
pub fn draw(
    b: &mut Builder,
    draw: Draw,
    k0: Reg,
    k1: Reg,
    counter: Reg,
    bound: Option<Reg>,
) -> Reg {
    let hi = word(b, k0, k1, counter, 0, draw.word());
    if !draw.wide() {
        let top = b.reg(RegKind::B32);
        ins!(b, "shr.u32 {top}, {hi}, 8");
        let f = b.reg(RegKind::F32);
        // Exact: a 24-bit integer, then a power of two.
        ins!(b, "cvt.rn.f32.u32 {f}, {top}");
        ins!(
            b,
            "mul.rn.f32 {f}, {f}, {}",
            f32_imm(1.0 / (1u32 << 24) as f32)
        );
        return f;
    }
    let lo = word(b, k0, k1, counter, 1, draw.word());
    let d = b.reg(RegKind::B64);
    ins!(b, "mov.b64 {d}, {{{lo}, {hi}}}");
    match draw {
        Draw::Below(_) => {
            let n = bound.expect("a bounded draw has a bound operand");
            let r = b.reg(RegKind::B64);
            ins!(b, "mul.hi.u64 {r}, {d}, {n}");
            r
        }
        _ => {
            let top = b.reg(RegKind::B64);
            ins!(b, "shr.u64 {top}, {d}, 11");
            let f = b.reg(RegKind::F64);
            // Exact: a 53-bit integer, then a power of two.
            ins!(b, "cvt.rn.f64.u64 {f}, {top}");
            ins!(
                b,
                "mul.rn.f64 {f}, {f}, {}",
                f64_imm(1.0 / (1u64 << 53) as f64)
            );
            f
        }
    }
}
