//! FP8 codes to and from `f32` registers, bit for bit the host's
//! [`crate::fp8`] (PyTorch's casts).
//!
//! One integer sequence for every target: sm_80 has no FP8 `cvt`, and
//! sm_89's `cvt.rn.satfinite.e4m3x2.f32` saturates where PyTorch gives NaN
//! (`E4M3`) or infinity (`E5M2`), so it would need the same overflow tests
//! around it. A code lives in the low byte of a `.b32` register; values
//! live in `.f32` registers like the half types' (see [`super::ops`]).

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use crate::{fp8, DType};

/// The `f32` value of the `dt` code in the low byte of `.b32` register `c`
/// (its other bits zero).
pub fn widen(b: &mut Builder, c: Reg, dt: DType) -> Reg {
    let f = b.reg(RegKind::F32);
    if dt == DType::F8E5M2 {
        // E5M2 is the top byte of an f16: infinities, NaNs and subnormals
        // convert exactly.
        let h = b.reg(RegKind::B16);
        ins!(b, "cvt.u16.u32 {h}, {c}");
        ins!(b, "shl.b16 {h}, {h}, 8");
        ins!(b, "cvt.f32.f16 {f}, {h}");
        return f;
    }
    // E4M3: exponent and mantissa placed in an f32's fields read as the
    // value times 2^-rebias (an f32 subnormal for a code's zero exponent,
    // which the multiplication makes normal); the scale is exact.
    let mant = dt.mantissa_bits();
    let (m, bits, s) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
    );
    ins!(b, "and.b32 {m}, {c}, 127");
    ins!(b, "shl.b32 {bits}, {m}, {}", 23 - mant);
    ins!(b, "and.b32 {s}, {c}, 128");
    ins!(b, "shl.b32 {s}, {s}, 24");
    ins!(b, "or.b32 {bits}, {bits}, {s}");
    let scaled = b.reg(RegKind::F32);
    ins!(b, "mov.b32 {scaled}, {bits}");
    let scale = f32_imm(2f32.powi(fp8::rebias(dt) as i32));
    ins!(b, "mul.rn.f32 {scaled}, {scaled}, {scale}");
    // The all-ones code is NaN (with the code's sign).
    let nan = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.u32 {nan}, {m}, 127");
    let (v, nan_bits) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "mov.b32 {v}, {scaled}");
    ins!(b, "or.b32 {nan_bits}, {s}, 0x7FC00000");
    ins!(b, "selp.b32 {v}, {nan_bits}, {v}, {nan}");
    ins!(b, "mov.b32 {f}, {v}");
    f
}

/// The `dt` code of `f32` register `f` rounded to nearest even, in the low
/// byte of a `.b32` register (its other bits zero).
pub fn narrow(b: &mut Builder, f: Reg, dt: DType) -> Reg {
    let (bits, a) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "mov.b32 {bits}, {f}");
    ins!(b, "and.b32 {a}, {bits}, 0x7FFFFFFF");
    // Subnormal: |x| in units of the smallest subnormal (exact), rounded
    // to the nearest even integer.
    let (units, sub) = (b.reg(RegKind::F32), b.reg(RegKind::B32));
    ins!(b, "mov.b32 {units}, {a}");
    let scale = f32_imm(2f32.powi(fp8::subnormal_exp(dt)));
    ins!(b, "mul.rn.f32 {units}, {units}, {scale}");
    ins!(b, "cvt.rni.u32.f32 {sub}, {units}");
    // Normal: the mantissa rounded to nearest even by adding half an
    // ulp less one and the kept lowest bit, then the exponent rebiased.
    let shift = 23 - dt.mantissa_bits();
    let (odd, code) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "bfe.u32 {odd}, {a}, {shift}, 1");
    ins!(b, "add.u32 {code}, {a}, {}", (1u32 << (shift - 1)) - 1);
    ins!(b, "add.u32 {code}, {code}, {odd}");
    ins!(b, "shr.u32 {code}, {code}, {shift}");
    ins!(
        b,
        "sub.u32 {code}, {code}, {}",
        fp8::rebias(dt) << (23 - shift)
    );
    let small = b.reg(RegKind::Pred);
    ins!(b, "setp.lt.u32 {small}, {a}, {}", fp8::min_normal_bits(dt));
    ins!(b, "selp.b32 {code}, {sub}, {code}, {small}");
    // Beyond the finite range: E4M3's NaN, E5M2's infinity (NaN for NaN).
    let (over, top) = (b.reg(RegKind::Pred), b.reg(RegKind::B32));
    ins!(b, "setp.ge.u32 {over}, {a}, {}", fp8::overflow_bits(dt));
    if dt == DType::F8E5M2 {
        let nan = b.reg(RegKind::Pred);
        ins!(b, "setp.gt.u32 {nan}, {a}, 0x7F800000");
        ins!(b, "selp.b32 {top}, {}, {}, {nan}", fp8::NAN, fp8::E5M2_INF);
    } else {
        ins!(b, "mov.b32 {top}, {}", fp8::NAN);
    }
    ins!(b, "selp.b32 {code}, {top}, {code}, {over}");
    // The sign: bit 31 to bit 7.
    let s = b.reg(RegKind::B32);
    ins!(b, "shr.u32 {s}, {bits}, 24");
    ins!(b, "and.b32 {s}, {s}, 128");
    ins!(b, "or.b32 {code}, {code}, {s}");
    code
}
