//! Philox4x32-10 in PTX: the rounds of [`crate::philox`] on 32-bit
//! registers (`mul.hi.u32`/`mul.lo.u32`, `xor.b32`, `add.u32`), so a draw
//! has exactly the interpreter's bits.

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use crate::philox::{Draw, M, ROUNDS, W};

/// The value `draw` makes of the block for counter `[counter, 0, 0, 0]`
/// under key `[k0, k1]` (all `.b32` registers; `bound` for
/// [`Draw::Below`]): a `.f32` register for a uniform, a `.b32` for an
/// integer.
pub fn draw(
    b: &mut Builder,
    draw: Draw,
    k0: Reg,
    k1: Reg,
    counter: Reg,
    bound: Option<Reg>,
) -> Reg {
    let zero = b.mov(RegKind::B32, "b32", 0);
    let (mut c, mut k) = ([counter, zero, zero, zero], [k0, k1]);
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
    let w = c[draw.word()];
    match draw {
        Draw::Uniform(_) => {
            let top = b.reg(RegKind::B32);
            ins!(b, "shr.u32 {top}, {w}, 8");
            let f = b.reg(RegKind::F32);
            // Exact: a 24-bit integer, then a power of two.
            ins!(b, "cvt.rn.f32.u32 {f}, {top}");
            ins!(
                b,
                "mul.rn.f32 {f}, {f}, {}",
                f32_imm(1.0 / (1u32 << 24) as f32)
            );
            f
        }
        Draw::Below(_) => {
            let n = bound.expect("a bounded draw has a bound operand");
            let r = b.reg(RegKind::B32);
            ins!(b, "mul.hi.u32 {r}, {w}, {n}");
            // A bound of 0 stands for 2^32: the word itself.
            let full = b.reg(RegKind::Pred);
            ins!(b, "setp.eq.u32 {full}, {n}, 0");
            ins!(b, "selp.b32 {r}, {w}, {r}, {full}");
            r
        }
    }
}
