//! The float division family: `fmod` computed exactly (PTX has no
//! remainder instruction for floats), and PyTorch's `remainder` and
//! `floor_divide` built on it.

use super::builder::{ins, Builder, Reg, RegKind};
use super::math::{add, freg, imm, select};

/// A finite nonzero `f32` magnitude `a` as `m * 2^(e - 150)` with the
/// integer significand `m < 2^24` (subnormals: `e = 1`).
fn significand(b: &mut Builder, a: Reg) -> (Reg, Reg) {
    let bits = b.reg(RegKind::B32);
    ins!(b, "mov.b32 {bits}, {a}");
    let e = b.reg(RegKind::B32);
    ins!(b, "shr.u32 {e}, {bits}, 23");
    let m = b.reg(RegKind::B32);
    ins!(b, "and.b32 {m}, {bits}, 8388607");
    let normal = b.reg(RegKind::Pred);
    ins!(b, "setp.ne.u32 {normal}, {e}, 0");
    let mi = b.reg(RegKind::B32);
    ins!(b, "or.b32 {mi}, {m}, 8388608");
    ins!(b, "selp.b32 {m}, {mi}, {m}, {normal}");
    ins!(b, "max.u32 {e}, {e}, 1");
    (m, e)
}

/// `fmod(x, y)`, exact, with C's special cases: NaN for `y = 0`, an
/// infinite `x` or a NaN; `x` where `|x| < |y|` (so for an infinite `y`).
/// With `x = mx 2^ex`, `y = my 2^ey` (integer significands), the result is
/// `(mx 2^(ex - ey) mod my) 2^ey`: the power is applied 40 bits at a time
/// in 64-bit integers (at most 7 steps), and the remainder, below `2^24`,
/// is scaled back in `f64`, exactly.
pub fn fmod(b: &mut Builder, x: Reg, y: Reg) -> Reg {
    let (ax, ay) = (freg(b), freg(b));
    ins!(b, "abs.f32 {ax}, {x}");
    ins!(b, "abs.f32 {ay}, {y}");
    let (mx, ex) = significand(b, ax);
    let (my, ey) = significand(b, ay);
    let d = b.reg(RegKind::B32);
    ins!(b, "sub.s32 {d}, {ex}, {ey}");
    // y = 0 gives NaN below; keep the integer remainder defined.
    ins!(b, "max.u32 {my}, {my}, 1");
    let (r, m) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
    ins!(b, "cvt.u64.u32 {r}, {mx}");
    ins!(b, "cvt.u64.u32 {m}, {my}");
    ins!(b, "rem.u64 {r}, {r}, {m}");
    let (top, done) = (b.label(), b.label());
    let p = b.reg(RegKind::Pred);
    let s = b.reg(RegKind::B32);
    b.place(&top);
    ins!(b, "setp.le.s32 {p}, {d}, 0");
    ins!(b, "@{p} bra {done}");
    ins!(b, "min.s32 {s}, {d}, 40");
    ins!(b, "shl.b64 {r}, {r}, {s}");
    ins!(b, "rem.u64 {r}, {r}, {m}");
    ins!(b, "sub.s32 {d}, {d}, {s}");
    ins!(b, "bra {top}");
    b.place(&done);
    let rd = b.reg(RegKind::F64);
    ins!(b, "cvt.rn.f64.u64 {rd}, {r}");
    // 2^(ey - 150) as an f64: exponent field ey - 150 + 1023.
    let sc = b.reg(RegKind::B64);
    ins!(b, "cvt.u64.u32 {sc}, {ey}");
    ins!(b, "add.u64 {sc}, {sc}, 873");
    ins!(b, "shl.b64 {sc}, {sc}, 52");
    let scale = b.reg(RegKind::F64);
    ins!(b, "mov.b64 {scale}, {sc}");
    ins!(b, "mul.rn.f64 {rd}, {rd}, {scale}");
    let mag = freg(b);
    ins!(b, "cvt.rn.f32.f64 {mag}, {rd}");
    let res = freg(b);
    ins!(b, "copysign.f32 {res}, {x}, {mag}");
    let below = b.reg(RegKind::Pred);
    ins!(b, "setp.lt.f32 {below}, {ax}, {ay}");
    let res = select(b, x, res, below);
    let nan = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.f32 {nan}, {ay}, 0f00000000");
    let fin = b.reg(RegKind::Pred);
    ins!(b, "testp.finite.f32 {fin}, {x}");
    ins!(b, "not.pred {fin}, {fin}");
    ins!(b, "or.pred {nan}, {nan}, {fin}");
    let ynan = b.reg(RegKind::Pred);
    ins!(b, "setp.nan.f32 {ynan}, {y}, {y}");
    ins!(b, "or.pred {nan}, {nan}, {ynan}");
    select(b, "0f7FC00000", res, nan)
}

/// Whether a nonzero remainder `m` has the other sign than `y` (then
/// `remainder` adds `y` and `floor_divide` steps down). NaN `m` counts as
/// nonzero, as in PyTorch.
fn signs_differ(b: &mut Builder, m: Reg, y: Reg) -> Reg {
    let nz = b.reg(RegKind::Pred);
    ins!(b, "setp.neu.f32 {nz}, {m}, 0f00000000");
    let (yn, mn) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
    ins!(b, "setp.lt.f32 {yn}, {y}, 0f00000000");
    ins!(b, "setp.lt.f32 {mn}, {m}, 0f00000000");
    ins!(b, "xor.pred {yn}, {yn}, {mn}");
    ins!(b, "and.pred {nz}, {nz}, {yn}");
    nz
}

/// Python's `%`: `fmod(x, y)`, plus `y` where the signs differ.
pub fn remainder(b: &mut Builder, x: Reg, y: Reg) -> Reg {
    let m = fmod(b, x, y);
    let adj = signs_differ(b, m, y);
    let moved = add(b, m, y);
    select(b, moved, m, adj)
}

/// PyTorch's float `floor_divide`: `(x - fmod(x, y)) / y`, one less where
/// the remainder's sign differs from `y`'s, then rounded to the nearest
/// integer (floor, plus one above a half) to undo the division's rounding;
/// a zero quotient takes the sign of `x / y`; `y = 0` gives `x / y`.
pub fn floor_divide(b: &mut Builder, x: Reg, y: Reg) -> Reg {
    let m = fmod(b, x, y);
    let num = freg(b);
    ins!(b, "sub.rn.f32 {num}, {x}, {m}");
    let div = freg(b);
    ins!(b, "div.rn.f32 {div}, {num}, {y}");
    let adj = signs_differ(b, m, y);
    let down = add(b, div, imm(-1.0));
    let div = select(b, down, div, adj);
    let fl = freg(b);
    ins!(b, "cvt.rmi.f32.f32 {fl}, {div}");
    let frac = freg(b);
    ins!(b, "sub.rn.f32 {frac}, {div}, {fl}");
    let up = b.reg(RegKind::Pred);
    ins!(b, "setp.gt.f32 {up}, {frac}, {}", imm(0.5));
    let fl1 = add(b, fl, imm(1.0));
    let fl = select(b, fl1, fl, up);
    let q = freg(b);
    ins!(b, "div.rn.f32 {q}, {x}, {y}");
    let z = freg(b);
    ins!(b, "copysign.f32 {z}, {q}, 0f00000000");
    let dz = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.f32 {dz}, {div}, 0f00000000");
    let fl = select(b, z, fl, dz);
    let yz = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.f32 {yz}, {y}, 0f00000000");
    select(b, q, fl, yz)
}
