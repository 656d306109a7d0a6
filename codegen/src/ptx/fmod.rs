//! The float division family: `fmod` computed exactly (PTX has no
//! remainder instruction for floats), and PyTorch's `remainder` and
//! `floor_divide` built on it, for `f32` and `f64` registers alike.

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use super::ops::f64_imm;

/// The float register type the sequences run in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Fl {
    /// `.f32` (also the half types' registers).
    F32,
    /// `.f64`.
    F64,
}

impl Fl {
    fn ty(self) -> &'static str {
        match self {
            Fl::F32 => "f32",
            Fl::F64 => "f64",
        }
    }

    fn kind(self) -> RegKind {
        match self {
            Fl::F32 => RegKind::F32,
            Fl::F64 => RegKind::F64,
        }
    }

    /// Explicit mantissa bits.
    fn mant(self) -> u32 {
        match self {
            Fl::F32 => 23,
            Fl::F64 => 52,
        }
    }

    fn imm(self, v: f64) -> String {
        match self {
            Fl::F32 => f32_imm(v as f32),
            Fl::F64 => f64_imm(v),
        }
    }

    fn reg(self, b: &mut Builder) -> Reg {
        b.reg(self.kind())
    }

    fn select(self, b: &mut Builder, x: impl std::fmt::Display, y: Reg, c: Reg) -> Reg {
        let r = self.reg(b);
        ins!(b, "selp.{} {r}, {x}, {y}, {c}", self.ty());
        r
    }

    fn add(self, b: &mut Builder, x: Reg, y: impl std::fmt::Display) -> Reg {
        let r = self.reg(b);
        ins!(b, "add.rn.{} {r}, {x}, {y}", self.ty());
        r
    }
}

/// A finite nonzero magnitude `a` as `m * 2^(e - bias - mant)` with the
/// integer significand `m < 2^(mant + 1)` in a `.b64` register and the
/// biased exponent `e` in a `.b32` one (subnormals: `e = 1`).
fn significand(b: &mut Builder, fl: Fl, a: Reg) -> (Reg, Reg) {
    let bits = b.reg(RegKind::B64);
    if fl == Fl::F32 {
        let w = b.reg(RegKind::B32);
        ins!(b, "mov.b32 {w}, {a}");
        ins!(b, "cvt.u64.u32 {bits}, {w}");
    } else {
        ins!(b, "mov.b64 {bits}, {a}");
    }
    let mant = fl.mant();
    let e64 = b.reg(RegKind::B64);
    ins!(b, "shr.u64 {e64}, {bits}, {mant}");
    let e = b.reg(RegKind::B32);
    ins!(b, "cvt.u32.u64 {e}, {e64}");
    let m = b.reg(RegKind::B64);
    ins!(b, "and.b64 {m}, {bits}, {}", (1u64 << mant) - 1);
    let normal = b.reg(RegKind::Pred);
    ins!(b, "setp.ne.u32 {normal}, {e}, 0");
    let mi = b.reg(RegKind::B64);
    ins!(b, "or.b64 {mi}, {m}, {}", 1u64 << mant);
    ins!(b, "selp.b64 {m}, {mi}, {m}, {normal}");
    ins!(b, "max.u32 {e}, {e}, 1");
    (m, e)
}

/// `fmod(x, y)`, exact, with C's special cases: NaN for `y = 0`, an
/// infinite `x` or a NaN; `x` where `|x| < |y|` (so for an infinite `y`).
/// With `x = mx 2^ex`, `y = my 2^ey` (integer significands), the result is
/// `(mx 2^(ex - ey) mod my) 2^ey`: the power is applied in 64-bit integers
/// as many bits at a time as the significand leaves room for (40 for
/// `f32`, 11 for `f64`), and the remainder, below `my`, is scaled back
/// exactly (in `f64` for `f32`; in two steps for subnormal `f64` results).
pub fn fmod(b: &mut Builder, fl: Fl, x: Reg, y: Reg) -> Reg {
    let ty = fl.ty();
    let (ax, ay) = (fl.reg(b), fl.reg(b));
    ins!(b, "abs.{ty} {ax}, {x}");
    ins!(b, "abs.{ty} {ay}, {y}");
    let (mx, ex) = significand(b, fl, ax);
    let (m, ey) = significand(b, fl, ay);
    let d = b.reg(RegKind::B32);
    ins!(b, "sub.s32 {d}, {ex}, {ey}");
    // y = 0 gives NaN below; keep the integer remainder defined.
    ins!(b, "max.u64 {m}, {m}, 1");
    let r = b.reg(RegKind::B64);
    ins!(b, "rem.u64 {r}, {mx}, {m}");
    let (top, done) = (b.label(), b.label());
    let p = b.reg(RegKind::Pred);
    let s = b.reg(RegKind::B32);
    let step = 63 - fl.mant();
    b.place(&top);
    ins!(b, "setp.le.s32 {p}, {d}, 0");
    ins!(b, "@{p} bra {done}");
    ins!(b, "min.s32 {s}, {d}, {step}");
    ins!(b, "shl.b64 {r}, {r}, {s}");
    ins!(b, "rem.u64 {r}, {r}, {m}");
    ins!(b, "sub.s32 {d}, {d}, {s}");
    ins!(b, "bra {top}");
    b.place(&done);
    let rd = b.reg(RegKind::F64);
    ins!(b, "cvt.rn.f64.u64 {rd}, {r}");
    // 2^(ey - bias - mant) as an f64 power (exponent field + 1023).
    let pow2 = |b: &mut Builder, add: i64| {
        let sc = b.reg(RegKind::B64);
        ins!(b, "cvt.u64.u32 {sc}, {ey}");
        ins!(b, "add.s64 {sc}, {sc}, {add}");
        ins!(b, "shl.b64 {sc}, {sc}, 52");
        let f = b.reg(RegKind::F64);
        ins!(b, "mov.b64 {f}, {sc}");
        f
    };
    let mag = match fl {
        Fl::F32 => {
            let sc = pow2(b, 1023 - 150);
            ins!(b, "mul.rn.f64 {rd}, {rd}, {sc}");
            let mag = fl.reg(b);
            ins!(b, "cvt.rn.f32.f64 {mag}, {rd}");
            mag
        }
        Fl::F64 => {
            // 2^(ey - 1075) is no normal f64 for ey <= 52: scale by
            // 2^(ey - 875) and then by 2^-200 there (both exact, as the
            // result is representable).
            let big = pow2(b, 1023 - 1075);
            let small = pow2(b, 1023 - 875);
            let low = b.reg(RegKind::Pred);
            ins!(b, "setp.lt.u32 {low}, {ey}, 100");
            let sc = fl.select(b, small, big, low);
            ins!(b, "mul.rn.f64 {rd}, {rd}, {sc}");
            let one = b.mov(RegKind::F64, "f64", f64_imm(1.0));
            let down = fl.select(b, f64_imm(2f64.powi(-200)), one, low);
            let mag = fl.reg(b);
            ins!(b, "mul.rn.f64 {mag}, {rd}, {down}");
            mag
        }
    };
    let res = fl.reg(b);
    ins!(b, "copysign.{ty} {res}, {x}, {mag}");
    let below = b.reg(RegKind::Pred);
    ins!(b, "setp.lt.{ty} {below}, {ax}, {ay}");
    let res = fl.select(b, x, res, below);
    let nan = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.{ty} {nan}, {ay}, {}", fl.imm(0.0));
    let fin = b.reg(RegKind::Pred);
    ins!(b, "testp.finite.{ty} {fin}, {x}");
    ins!(b, "not.pred {fin}, {fin}");
    ins!(b, "or.pred {nan}, {nan}, {fin}");
    let ynan = b.reg(RegKind::Pred);
    ins!(b, "setp.nan.{ty} {ynan}, {y}, {y}");
    ins!(b, "or.pred {nan}, {nan}, {ynan}");
    fl.select(b, fl.imm(f64::NAN), res, nan)
}

/// Whether a nonzero remainder `m` has the other sign than `y` (then
/// `remainder` adds `y` and `floor_divide` steps down). NaN `m` counts as
/// nonzero, as in PyTorch.
fn signs_differ(b: &mut Builder, fl: Fl, m: Reg, y: Reg) -> Reg {
    let (ty, zero) = (fl.ty(), fl.imm(0.0));
    let nz = b.reg(RegKind::Pred);
    ins!(b, "setp.neu.{ty} {nz}, {m}, {zero}");
    let (yn, mn) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
    ins!(b, "setp.lt.{ty} {yn}, {y}, {zero}");
    ins!(b, "setp.lt.{ty} {mn}, {m}, {zero}");
    ins!(b, "xor.pred {yn}, {yn}, {mn}");
    ins!(b, "and.pred {nz}, {nz}, {yn}");
    nz
}

/// Python's `%`: `fmod(x, y)`, plus `y` where the signs differ.
pub fn remainder(b: &mut Builder, fl: Fl, x: Reg, y: Reg) -> Reg {
    let m = fmod(b, fl, x, y);
    let adj = signs_differ(b, fl, m, y);
    let moved = fl.add(b, m, y);
    fl.select(b, moved, m, adj)
}

/// PyTorch's float `floor_divide`: `(x - fmod(x, y)) / y`, one less where
/// the remainder's sign differs from `y`'s, then rounded to the nearest
/// integer (floor, plus one above a half) to undo the division's rounding;
/// a zero quotient takes the sign of `x / y`; `y = 0` gives `x / y`.
/// The steps after the exact `fmod` run in `f64` for `f32` operands and
/// round once, as the reference does: in `f32`, `x - fmod` and the division
/// round twice and can land an ulp off for quotients beyond 2^24.
pub fn floor_divide(b: &mut Builder, fl: Fl, x: Reg, y: Reg) -> Reg {
    let m = fmod(b, fl, x, y);
    let adj = signs_differ(b, fl, m, y);
    if fl == Fl::F64 {
        return quotient(b, x, m, y, adj);
    }
    let wide = |b: &mut Builder, r: Reg| {
        let d = b.reg(RegKind::F64);
        ins!(b, "cvt.f64.f32 {d}, {r}");
        d
    };
    let (xd, md, yd) = (wide(b, x), wide(b, m), wide(b, y));
    let q = quotient(b, xd, md, yd, adj);
    let r = b.reg(RegKind::F32);
    ins!(b, "cvt.rn.f32.f64 {r}, {q}");
    r
}

/// `floor_divide`'s quotient in `f64` from `x`, `m = fmod(x, y)`, `y` and
/// whether `m`'s sign differs from `y`'s.
fn quotient(b: &mut Builder, x: Reg, m: Reg, y: Reg, adj: Reg) -> Reg {
    let fl = Fl::F64;
    let ty = fl.ty();
    let num = fl.reg(b);
    ins!(b, "sub.rn.{ty} {num}, {x}, {m}");
    let div = fl.reg(b);
    ins!(b, "div.rn.{ty} {div}, {num}, {y}");
    let down = fl.add(b, div, fl.imm(-1.0));
    let div = fl.select(b, down, div, adj);
    let fl_ = fl.reg(b);
    ins!(b, "cvt.rmi.{ty}.{ty} {fl_}, {div}");
    let frac = fl.reg(b);
    ins!(b, "sub.rn.{ty} {frac}, {div}, {fl_}");
    let up = b.reg(RegKind::Pred);
    ins!(b, "setp.gt.{ty} {up}, {frac}, {}", fl.imm(0.5));
    let fl1 = fl.add(b, fl_, fl.imm(1.0));
    let floor = fl.select(b, fl1, fl_, up);
    let q = fl.reg(b);
    ins!(b, "div.rn.{ty} {q}, {x}, {y}");
    let z = fl.reg(b);
    ins!(b, "copysign.{ty} {z}, {q}, {}", fl.imm(0.0));
    let dz = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.{ty} {dz}, {div}, {}", fl.imm(0.0));
    let floor = fl.select(b, z, floor, dz);
    let yz = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.{ty} {yz}, {y}, {}", fl.imm(0.0));
    fl.select(b, q, floor, yz)
}
