//! Indirect loads ([`crate::Inst::Gather`]): the position along the
//! gathered axis is data, so it is checked while the kernel runs. An index
//! outside the axis masks the load (nothing outside the buffer is read;
//! the value is 0) and sets the kernel's error flag, which the runtime
//! turns into an error after the schedule.

use super::builder::{ins, Builder, Reg, RegKind};
use super::expr::{and, Width};
use super::memory;
use super::ops::Value;
use crate::DType;

/// Where and what a gather reads (or a scatter adds into): a buffer of
/// `dtype` at `base`, the index `idx` of the axis' element 0 (`width`
/// bits), the axis' `stride` and `len`.
pub struct Axis {
    pub base: Reg,
    pub dtype: DType,
    pub idx: Reg,
    pub stride: i64,
    pub len: i64,
}

/// `at` (an index value of an index dtype, see [`DType::is_index`]) sign
/// extended to 64 bits.
fn index_s64(b: &mut Builder, at: Value) -> Reg {
    match at.dtype {
        DType::I32 => {
            let r = b.reg(RegKind::B64);
            ins!(b, "cvt.s64.s32 {r}, {}", at.reg);
            r
        }
        DType::I64 => at.reg,
        dt => unreachable!("validate admits only index dtypes, not {dt}"),
    }
}

/// Element `at` along the axis where `pred` holds (0 elsewhere); raises
/// `err` (a global `u32`) where `pred` holds and `at` is outside `0..len`.
pub fn load(
    b: &mut Builder,
    axis: &Axis,
    at: Value,
    pred: Option<Reg>,
    err: Reg,
    w: Width,
) -> Value {
    let (j, read) = position(b, axis, at, pred, err, w);
    memory::load(b, axis.base, j, axis.dtype, Some(read), w)
}

/// `lanes` consecutive elements from element `at` along the axis, in one
/// vector access (the caller has checked with [`memory::vector_ok`] that
/// they are aligned, the stride included), zeros where not read; `at` is
/// checked once for all of them, as [`load`] checks it.
pub fn load_vector(
    b: &mut Builder,
    axis: &Axis,
    at: Value,
    pred: Option<Reg>,
    err: Reg,
    lanes: usize,
    w: Width,
) -> Vec<Value> {
    let (j, read) = position(b, axis, at, pred, err, w);
    memory::load_vector(b, axis.base, j, axis.dtype, lanes, Some(read), w)
}

/// The element index of `at` along the axis (`width` bits) and the
/// predicate under which it may be accessed: `pred` and `at` inside
/// `0..len`. Raises `err` (a global `u32`) where `pred` holds and `at` is
/// outside; there the index is meaningless and must not be used.
pub fn position(
    b: &mut Builder,
    axis: &Axis,
    at: Value,
    pred: Option<Reg>,
    err: Reg,
    w: Width,
) -> (Reg, Reg) {
    let a = index_s64(b, at);
    // Unsigned comparisons: a negative index is a huge one.
    let (ok, outside) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
    ins!(b, "setp.lt.u64 {ok}, {a}, {}", axis.len);
    ins!(b, "setp.ge.u64 {outside}, {a}, {}", axis.len);
    let bad = and(b, pred, Some(outside)).expect("a predicate");
    ins!(b, "@{bad} st.global.u32 [{err}], 1");
    let j = w.reg(b);
    if w.wide {
        ins!(b, "mad.lo.s64 {j}, {a}, {}, {}", axis.stride, axis.idx);
    } else {
        // In range, `at * stride` fits (the kernel's width covers the
        // whole axis); out of range the access does not happen.
        let a32 = b.reg(RegKind::B32);
        ins!(b, "cvt.u32.u64 {a32}, {a}");
        ins!(b, "mad.lo.s32 {j}, {a32}, {}, {}", axis.stride, axis.idx);
    }
    let inside = and(b, pred, Some(ok)).expect("a predicate");
    (j, inside)
}
