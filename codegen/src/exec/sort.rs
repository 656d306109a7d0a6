//! Sorts (`Inst::Sort`) over a tile of whole rows, with the interpreter's
//! order bit for bit: each row's `(key, position)` pairs ([`SortOp::key`],
//! the one key every backend sorts by) packed in one unsigned integer,
//! key above position. The pairs are all distinct, so any correct sort of
//! them, stable or not, serial or parallel, gives the one stable order
//! ([`crate::sort`]): `sort_unstable` (rayon's parallel one for a long
//! row), or for a `topk` a selection of the `k` smallest pairs and a sort
//! of those only.

use rayon::prelude::*;

use crate::exec::vals::Vals;
use crate::sort::{SortOp, SortPart, SortValue};

/// Rows at least this long sort in parallel (when the pool has several
/// threads): below, splitting costs more than it gains.
const PAR_SORT_MIN: usize = 1 << 16;

/// A `(key, position)` pair as one integer ordered as the pair: `u64` for
/// 32-bit keys, `u128` for 64-bit ones. Positions fit `u32` (the plan
/// declines longer rows).
trait Pair: Copy + Ord + Send {
    fn new(key: u64, pos: usize) -> Self;
    fn pos(self) -> usize;
}

impl Pair for u64 {
    fn new(key: u64, pos: usize) -> u64 {
        key << 32 | pos as u64
    }
    fn pos(self) -> usize {
        self as u32 as usize
    }
}

impl Pair for u128 {
    fn new(key: u64, pos: usize) -> u128 {
        u128::from(key) << 64 | pos as u128
    }
    fn pos(self) -> usize {
        self as u64 as usize
    }
}

/// Sort `op` of `src` (the values of `op`'s operand, `F32`, `I32`, `F64`
/// or `I64`, at `nr` whole rows of `nc`) into `out`: at each row's
/// position `j < op.k`, the `j`-th value of the row in sorted order, or
/// its position (`I64`); positions from `op.k` on hold the rest of the
/// row in no particular order (no store reads them).
pub fn sort(op: SortOp, src: &Vals<'_>, nr: usize, nc: usize, out: &mut Vals<'_>) {
    let at = match src {
        Vals::F32(_) | Vals::F32In(_) => positions(op, src.f32s(), nr, nc, |x| f64::from(x).into()),
        Vals::F64(v) => positions(op, v, nr, nc, SortValue::from),
        Vals::I64(v) => positions(op, v, nr, nc, SortValue::from),
    };
    // Position `p` of the tile holds element `at[p]` of its row.
    let gather = |p: usize, j: &usize| (p / nc.max(1)) * nc + j;
    *out = match (op.part, src) {
        (SortPart::Indices, _) => Vals::I64(at.iter().map(|j| *j as i64).collect()),
        (SortPart::Values, Vals::F32(_) | Vals::F32In(_)) => {
            let v = src.f32s();
            Vals::F32(
                at.iter()
                    .enumerate()
                    .map(|(p, j)| v[gather(p, j)])
                    .collect(),
            )
        }
        (SortPart::Values, Vals::F64(v)) => Vals::F64(
            at.iter()
                .enumerate()
                .map(|(p, j)| v[gather(p, j)])
                .collect(),
        ),
        (SortPart::Values, Vals::I64(v)) => Vals::I64(
            at.iter()
                .enumerate()
                .map(|(p, j)| v[gather(p, j)])
                .collect(),
        ),
    };
}

/// For each of `nr` rows of `nc` values `T` (keyed through `value`), the
/// positions of its elements in sorted order (as [`order`] leaves them).
fn positions<T: Copy>(
    op: SortOp,
    src: &[T],
    nr: usize,
    nc: usize,
    value: impl Fn(T) -> SortValue,
) -> Vec<usize> {
    if op.key_bits() > 32 {
        positions_in::<u128, T>(op, src, nr, nc, value)
    } else {
        positions_in::<u64, T>(op, src, nr, nc, value)
    }
}

/// [`positions`] through pairs `P`.
fn positions_in<P: Pair, T: Copy>(
    op: SortOp,
    src: &[T],
    nr: usize,
    nc: usize,
    value: impl Fn(T) -> SortValue,
) -> Vec<usize> {
    let mut pairs: Vec<P> = Vec::with_capacity(nc);
    let mut at = Vec::with_capacity(nr * nc);
    for row in src.chunks(nc.max(1)).take(nr) {
        pairs.clear();
        let keyed = row.iter().enumerate();
        pairs.extend(keyed.map(|(j, x)| P::new(op.key(value(*x)), j)));
        order(&mut pairs, op.k);
        at.extend(pairs.iter().map(|p| p.pos()));
    }
    at
}

/// Puts the `k` smallest of `pairs` first, in order (the rest after them
/// in no particular order).
fn order<P: Pair>(pairs: &mut [P], k: usize) {
    let n = pairs.len();
    if k == 0 {
        return;
    }
    if k < n {
        // A `topk`: the `k` smallest are found in linear time; only they
        // are sorted.
        pairs.select_nth_unstable(k - 1);
        pairs[..k].sort_unstable();
    } else if n >= PAR_SORT_MIN && rayon::current_num_threads() > 1 {
        pairs.par_sort_unstable();
    } else {
        pairs.sort_unstable();
    }
}
