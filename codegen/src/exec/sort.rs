//! Sorts (`Inst::Sort`) over a tile of whole rows, with the interpreter's
//! order bit for bit: each row's `(key, position)` pairs ([`SortOp::key`],
//! the one key every backend sorts by) packed in one unsigned integer,
//! key above position. The pairs are all distinct, so any correct sort of
//! them, stable or not, serial or parallel, gives the one stable order
//! ([`crate::sort`]): an LSD radix sort of keys that fit 32 bits once
//! less the row's smallest (`sort_unstable` of short rows and wider keys;
//! rayon's parallel sort of a long row on 4 threads or more), or for a
//! `topk` a selection of the `k` smallest pairs and a sort of those only.

use rayon::prelude::*;

use crate::exec::vals::Vals;
use crate::sort::{SortOp, SortPart, SortValue};

/// Rows at least this long sort in parallel when the pool has
/// [`PAR_SORT_THREADS`] threads: below, splitting costs more than it
/// gains.
const PAR_SORT_MIN: usize = 1 << 16;

/// Threads from which a long row's parallel comparison sort beats the
/// radix sort on one thread: a row of 2^22 `f32` took 200-210 ms by
/// [`radix`] on one thread and 220-255 ms by `par_sort_unstable` on two
/// (the 2-core build machine, under load).
const PAR_SORT_THREADS: usize = 4;

/// A `(key, position)` pair as one integer ordered as the pair: `u64` for
/// keys of 32 bits, `u128` for wider ones. Positions fit `u32` (the plan
/// declines longer rows).
trait Pair: Copy + Ord + Send {
    /// The pair of `key` (within this pair's key bits) and `pos`.
    fn new(key: u64, pos: usize) -> Self;
    /// The pair's position.
    fn pos(self) -> usize;
    /// Sorts a row's pairs, made in position order, on this thread
    /// (`tmp` a buffer to reuse).
    fn sort_row(pairs: &mut Vec<Self>, tmp: &mut Vec<Self>);
}

impl Pair for u64 {
    fn new(key: u64, pos: usize) -> u64 {
        key << 32 | pos as u64
    }
    fn pos(self) -> usize {
        self as u32 as usize
    }
    fn sort_row(pairs: &mut Vec<u64>, tmp: &mut Vec<u64>) {
        if pairs.len() < RADIX_MIN {
            pairs.sort_unstable();
        } else {
            radix(pairs, tmp);
        }
    }
}

impl Pair for u128 {
    fn new(key: u64, pos: usize) -> u128 {
        u128::from(key) << 64 | pos as u128
    }
    fn pos(self) -> usize {
        self as u64 as usize
    }
    fn sort_row(pairs: &mut Vec<u128>, _: &mut Vec<u128>) {
        pairs.sort_unstable();
    }
}

/// Rows at least this long sort 32-bit keys by [`radix`] (shorter ones
/// by comparisons: the histograms' fixed cost would dominate).
const RADIX_MIN: usize = 256;

/// Sorts `pairs` (32-bit keys above positions, made in position order) by
/// an LSD radix sort of their keys' bytes, skipping bytes that all keys
/// share (3 of 4 for `U8` and bools): each pass is stable, so pairs of
/// equal keys keep their position order and the result is the pairs'
/// sorted order.
fn radix(pairs: &mut Vec<u64>, tmp: &mut Vec<u64>) {
    let n = pairs.len();
    let mut counts = [[0usize; 256]; 4];
    for p in pairs.iter() {
        let key = (p >> 32) as u32;
        for (d, c) in counts.iter_mut().enumerate() {
            c[(key >> (8 * d)) as u8 as usize] += 1;
        }
    }
    tmp.clear();
    tmp.resize(n, 0);
    for (d, c) in counts.iter().enumerate() {
        if c.contains(&n) {
            continue;
        }
        let mut at = [0usize; 256];
        let mut sum = 0;
        for (a, c) in at.iter_mut().zip(c) {
            *a = sum;
            sum += c;
        }
        for p in pairs.iter() {
            let b = (p >> (32 + 8 * d)) as u8 as usize;
            tmp[at[b]] = *p;
            at[b] += 1;
        }
        std::mem::swap(pairs, tmp);
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
/// A row's keys less its smallest key keep their order; where they fit
/// 32 bits (64-bit keys of `I64` values within `2^32` of each other), the
/// row sorts as `u64` pairs (by [`radix`]) instead of `u128` ones.
fn positions<T: Copy>(
    op: SortOp,
    src: &[T],
    nr: usize,
    nc: usize,
    value: impl Fn(T) -> SortValue,
) -> Vec<usize> {
    let mut keys = Vec::with_capacity(nc);
    let (mut narrow, mut narrow_tmp): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    let (mut wide, mut wide_tmp): (Vec<u128>, Vec<u128>) = (Vec::new(), Vec::new());
    let mut at = Vec::with_capacity(nr * nc);
    for row in src.chunks(nc.max(1)).take(nr) {
        keys.clear();
        keys.extend(row.iter().map(|x| op.key(value(*x))));
        let lo = keys.iter().copied().min().unwrap_or(0);
        let hi = keys.iter().copied().max().unwrap_or(0);
        if hi - lo <= u64::from(u32::MAX) {
            sort_keys(&keys, lo, op.k, &mut narrow, &mut narrow_tmp, &mut at);
        } else {
            sort_keys(&keys, lo, op.k, &mut wide, &mut wide_tmp, &mut at);
        }
    }
    at
}

/// Sorts one row's `keys` (less `lo`, their smallest) as pairs `P`
/// (`pairs` and `tmp` buffers to reuse), pushing its positions to `at`.
fn sort_keys<P: Pair>(
    keys: &[u64],
    lo: u64,
    k: usize,
    pairs: &mut Vec<P>,
    tmp: &mut Vec<P>,
    at: &mut Vec<usize>,
) {
    pairs.clear();
    pairs.extend(keys.iter().enumerate().map(|(j, key)| P::new(key - lo, j)));
    order(pairs, tmp, k);
    at.extend(pairs.iter().map(|p| p.pos()));
}

/// Puts the `k` smallest of `pairs` first, in order (the rest after them
/// in no particular order).
fn order<P: Pair>(pairs: &mut Vec<P>, tmp: &mut Vec<P>, k: usize) {
    let n = pairs.len();
    if k == 0 {
        return;
    }
    if k < n {
        // A `topk`: the `k` smallest are found in linear time; only they
        // are sorted.
        pairs.select_nth_unstable(k - 1);
        pairs[..k].sort_unstable();
    } else if n >= PAR_SORT_MIN && rayon::current_num_threads() >= PAR_SORT_THREADS {
        pairs.par_sort_unstable();
    } else {
        P::sort_row(pairs, tmp);
    }
}
