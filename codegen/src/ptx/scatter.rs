//! Indirect adds ([`crate::StoreKind::AddAt`]): a scatter kernel adds each
//! value into its output at a position that is data, with one atomic per
//! value. The position is checked as a gather's is (`gather::position`):
//! outside its axis the add is skipped and the error flag raised.
//!
//! Atomics per dtype: `red.global.add` for `f32` and `s32`,
//! `red.global.add.noftz.f16` for `f16` (sm_70+), `.bf16` on sm_90;
//! on sm_80 a `bf16` add is a compare-and-swap loop on the 16-bit element
//! (the sum computed in `f32`, then rounded to `bf16`). Each add rounds to
//! the output's dtype, as the interpreter's do; the order of the adds to
//! one element is the hardware's, so float results are not bit-for-bit
//! reproducible when positions repeat (integer sums are).

use super::builder::{ins, Builder, Reg, RegKind};
use super::expr::Width;
use super::gather::{position, Axis};
use super::memory::address;
use super::ops::{narrow_half, widen_half, Value};
use crate::DType;

/// Adds `v` (already of the output's dtype) to element `at` along `axis`
/// where `pred` holds; raises `err` where `pred` holds and `at` is outside
/// the axis (and adds nothing there).
#[allow(clippy::too_many_arguments)]
pub fn add(
    b: &mut Builder,
    axis: &Axis,
    at: Value,
    v: Value,
    pred: Option<Reg>,
    err: Reg,
    w: Width,
    sm: u32,
) {
    let (j, ok) = position(b, axis, at, pred, err, w);
    let a = address(b, axis.base, j, axis.dtype.size(), w);
    match axis.dtype {
        DType::F32 => ins!(b, "@{ok} red.global.add.f32 [{a}], {}", v.reg),
        DType::I32 => ins!(b, "@{ok} red.global.add.s32 [{a}], {}", v.reg),
        DType::F64 => ins!(b, "@{ok} red.global.add.f64 [{a}], {}", v.reg),
        // Two's complement: the unsigned add wraps as the signed one.
        DType::I64 => ins!(b, "@{ok} red.global.add.u64 [{a}], {}", v.reg),
        DType::F16 => {
            let h = narrow_half(b, v.reg, DType::F16);
            ins!(b, "@{ok} red.global.add.noftz.f16 [{a}], {h}");
        }
        DType::BF16 if sm >= 90 => {
            let h = narrow_half(b, v.reg, DType::BF16);
            ins!(b, "@{ok} red.global.add.noftz.bf16 [{a}], {h}");
        }
        DType::BF16 => cas_add_bf16(b, a, v.reg, ok),
        DType::Bool | DType::U8 | DType::I8 | DType::I16 | DType::F8E4M3 | DType::F8E5M2 => {
            unreachable!("validate rejects adds into {} outputs", axis.dtype)
        }
    }
}

/// `bf16` at address `a` += `f` (an `f32` register) where `ok` holds, by
/// compare-and-swap: read the element, add in `f32`, round, and swap it in
/// unless another thread changed it meanwhile (then retry with its value).
fn cas_add_bf16(b: &mut Builder, a: Reg, f: Reg, ok: Reg) {
    let (top, done) = (b.label(), b.label());
    ins!(b, "@!{ok} bra {done}");
    let old = b.reg(RegKind::B16);
    ins!(b, "ld.global.b16 {old}, [{a}]");
    b.place(&top);
    let x = widen_half(b, old, DType::BF16);
    let sum = b.reg(RegKind::F32);
    ins!(b, "add.rn.f32 {sum}, {x}, {f}");
    let new = narrow_half(b, sum, DType::BF16);
    let seen = b.reg(RegKind::B16);
    ins!(b, "atom.global.cas.b16 {seen}, [{a}], {old}, {new}");
    let again = b.reg(RegKind::Pred);
    ins!(b, "setp.ne.b16 {again}, {seen}, {old}");
    ins!(b, "mov.b16 {old}, {seen}");
    ins!(b, "@{again} bra {top}");
    b.place(&done);
}
