//! Scans (`Inst::Scan`) over a tile: each row's running state carried
//! from the chunk before (tiles of one row run in order on one thread:
//! `execute` never splits a scan kernel's rows), with the interpreter's
//! semantics bit for bit: float states in `f64`, each result rounded once
//! to the scan's dtype, integer sums and products wrapped in the operand's
//! dtype ([`ScanOp::combine_int`]), positions of the max/min family as
//! `I64`.

use std::borrow::Cow;

use crate::exec::vals::{class, convert, Class, Vals};
use crate::{DType, ScanOp};

/// One scan instruction's state at each row of the current tile: the
/// running value and, for index ops, the position where it was reached.
#[derive(Clone, Debug, Default)]
pub struct Carry {
    floats: Vec<f64>,
    ints: Vec<i64>,
    pos: Vec<i64>,
}

impl Carry {
    /// Fresh states of `op` over an `src_dt` operand for `rows` rows.
    fn reset(&mut self, op: ScanOp, src_dt: DType, rows: usize) {
        self.floats.clear();
        self.ints.clear();
        self.pos.clear();
        if src_dt.is_float() {
            self.floats.resize(rows, op.identity());
        } else {
            self.ints.resize(rows, op.identity_int(src_dt));
        }
        self.pos.resize(rows, 0);
    }
}

/// Scan `op` of `src` (values of dtype `src_dt` at `nr` rows of `nc`
/// positions from `c0`) into `out` (dtype `out_dt`), continuing `carry`
/// (reset where `c0 == 0`: a row's first chunk).
#[allow(clippy::too_many_arguments)]
pub fn scan<'a>(
    op: ScanOp,
    src: &Vals<'_>,
    src_dt: DType,
    out_dt: DType,
    nr: usize,
    nc: usize,
    c0: usize,
    carry: &mut Carry,
    out: &mut Vals<'a>,
) {
    if c0 == 0 || carry.pos.len() != nr {
        carry.reset(op, src_dt, nr);
    }
    let n = nr * nc;
    let Carry { floats, ints, pos } = carry;
    // Index ops give positions, value ops running values of the operand's
    // dtype (floats in `f64`, rounded once by the conversion, as the
    // interpreter rounds them).
    let (vals, from) = match (class(src_dt), op.is_index()) {
        (Class::I64, true) => (
            Vals::I64(index_rows(op, src.ints(), nc, c0, ints, pos, |x| x)),
            DType::I64,
        ),
        (Class::F32, true) => {
            let at = index_rows(op, src.f32s(), nc, c0, floats, pos, f64::from);
            (Vals::I64(at), DType::I64)
        }
        (Class::F64, true) => (
            Vals::I64(index_rows(op, src.f64s(), nc, c0, floats, pos, |x| x)),
            DType::I64,
        ),
        // `int64` sums (every integer and bool sum: the API scans them in
        // `int64`) wrap as `i64` does: a loop without the general
        // combine's dtype dispatch.
        (Class::I64, false) if op == ScanOp::Sum && src_dt == DType::I64 => {
            let sums = value_rows(src.ints(), n, nc, ints, i64::wrapping_add);
            (Vals::I64(sums), src_dt)
        }
        (Class::I64, false) => {
            let combine = |a: i64, x: i64| op.combine_int(src_dt, a, x);
            (
                Vals::I64(value_rows(src.ints(), n, nc, ints, combine)),
                src_dt,
            )
        }
        (Class::F32, false) => (
            Vals::F64(float_rows(op, src.f32s(), n, nc, floats)),
            DType::F64,
        ),
        (Class::F64, false) => (
            Vals::F64(float_rows(op, src.f64s(), n, nc, floats)),
            DType::F64,
        ),
    };
    *out = match convert(&vals, from, out_dt) {
        Cow::Borrowed(_) => vals,
        Cow::Owned(v) => v,
    };
}

/// Running values of a float scan of rows of `nc` values (`f32` or `f64`,
/// widened exactly), in `f64`.
fn float_rows<T: Copy + Into<f64>>(
    op: ScanOp,
    src: &[T],
    n: usize,
    nc: usize,
    accs: &mut [f64],
) -> Vec<f64> {
    // Each op a loop of its own: the combine's match folds away and the
    // loop carries one dependency (the running value).
    match op {
        ScanOp::Sum => value_rows(src, n, nc, accs, |a, x| a + x.into()),
        ScanOp::Prod => value_rows(src, n, nc, accs, |a, x| a * x.into()),
        ScanOp::Max => value_rows(src, n, nc, accs, |a, x| ScanOp::Max.combine(a, x.into())),
        ScanOp::Min => value_rows(src, n, nc, accs, |a, x| ScanOp::Min.combine(a, x.into())),
        ScanOp::LogSumExp => value_rows(src, n, nc, accs, |a, x| {
            ScanOp::LogSumExp.combine(a, x.into())
        }),
        ScanOp::ArgMax | ScanOp::ArgMin => unreachable!("index ops give positions"),
    }
}

/// Running values under `combine` of rows of `nc` values (`n` in all),
/// each row continuing its state in `accs`.
fn value_rows<S: Copy, T: Copy>(
    src: &[S],
    n: usize,
    nc: usize,
    accs: &mut [T],
    combine: impl Fn(T, S) -> T,
) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    for (row, acc) in src.chunks(nc.max(1)).zip(accs.iter_mut()) {
        let mut a = *acc;
        out.extend(row.iter().map(|x| {
            a = combine(a, *x);
            a
        }));
        *acc = a;
    }
    out
}

/// Positions of the running maximum or minimum (`op` an index op; ties
/// and NaN as [`ScanOp::later_wins`]) of rows of `nc` values from
/// position `c0`, each row continuing its value in `accs` (`src` widened
/// by `widen`) and position in `pos`.
fn index_rows<S: Copy, T: Copy + PartialOrd>(
    op: ScanOp,
    src: &[S],
    nc: usize,
    c0: usize,
    accs: &mut [T],
    pos: &mut [i64],
    widen: impl Fn(S) -> T,
) -> Vec<i64> {
    let mut out = Vec::with_capacity(src.len());
    let rows = src
        .chunks(nc.max(1))
        .zip(accs.iter_mut())
        .zip(pos.iter_mut());
    for ((row, acc), p) in rows {
        for (j, x) in row.iter().enumerate() {
            let x = widen(*x);
            if op.later_wins(*acc, x) {
                (*acc, *p) = (x, (c0 + j) as i64);
            }
            out.push(*p);
        }
    }
    out
}
