//! Sorts (`Inst::Sort`) over a tile of whole rows, with the interpreter's
//! order bit for bit: each row's `(key, position)` pairs ([`SortOp::key`],
//! the one key every backend sorts by; for `f32` values
//! [`SortOp::f32_key`], the same key from the bits, which made the pairs
//! of a row vectorise: topk16 of 4096x4096 39 -> 25 ms, sort 77-83 -> 68
//! on 2 cores) packed in one unsigned integer,
//! key above position. The pairs are all distinct, so any correct sort of
//! them, stable or not, serial or parallel, gives the one stable order
//! ([`crate::sort`]): an LSD radix sort of 32-bit keys (and of 64-bit
//! ones that fit 32 bits once less the row's smallest; `sort_unstable` of
//! short rows and wider keys), or for a `topk` a selection of the `k`
//! smallest pairs and a sort of those only. A long row (one tile, while
//! the pool's other threads have nothing to do) takes every thread: its
//! pairs and output in parallel chunks, its radix sort as [`par_radix`]
//! (MSD passes while buckets are big, then LSD in cache; wider keys:
//! rayon's parallel comparison sort).

use rayon::prelude::*;

use crate::exec::vals::Vals;
use crate::sort::{SortOp, SortPart};

/// Rows at least this long sort on every thread of the pool: below,
/// splitting costs more than it gains. (On one thread the long-row path
/// measured as fast as the plain one.)
const PAR_SORT_MIN: usize = 1 << 16;

/// Whether rows of `nc` sort on every thread.
fn long(nc: usize) -> bool {
    nc >= PAR_SORT_MIN
}

/// A `(key, position)` pair as one integer ordered as the pair: `u64` for
/// keys of 32 bits, `u128` for wider ones. Positions fit `u32` (the plan
/// declines longer rows).
trait Pair: Copy + Ord + Send + Sync {
    /// The pair of `key` (within this pair's key bits) and `pos`.
    fn new(key: u64, pos: usize) -> Self;
    /// The pair's position.
    fn pos(self) -> usize;
    /// Sorts a row's pairs, made in position order, on this thread
    /// (`tmp` a buffer to reuse).
    fn sort_row(pairs: &mut Vec<Self>, tmp: &mut Vec<Self>);
    /// The same on every thread of the pool.
    fn par_sort_row(pairs: &mut Vec<Self>, tmp: &mut Vec<Self>);
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
    fn par_sort_row(pairs: &mut Vec<u64>, tmp: &mut Vec<u64>) {
        par_radix(pairs, tmp);
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
    fn par_sort_row(pairs: &mut Vec<u128>, _: &mut Vec<u128>) {
        pairs.par_sort_unstable();
    }
}

/// Rows at least this long sort 32-bit keys by [`radix`] (shorter ones
/// by comparisons: the histograms' fixed cost would dominate).
const RADIX_MIN: usize = 256;

/// Byte `d` of the key of pair `p` (32-bit keys above positions).
fn digit(p: u64, d: usize) -> usize {
    (p >> (32 + 8 * d)) as u8 as usize
}

/// Sorts `pairs` (32-bit keys above positions, made in position order) by
/// an LSD radix sort of their keys' bytes ([`lsd`]).
fn radix(pairs: &mut Vec<u64>, tmp: &mut Vec<u64>) {
    tmp.clear();
    tmp.resize(pairs.len(), 0);
    if lsd(pairs, tmp, 4) {
        std::mem::swap(pairs, tmp);
    }
}

/// Sorts `a` by the low `digits` bytes of its keys, an LSD radix sort with
/// `b` (as long) as the other buffer, skipping bytes that all keys share
/// (3 of 4 for `U8` and bools): each pass is stable, so pairs of equal
/// keys keep their order. Returns whether the result is in `b`.
fn lsd<'s>(mut a: &'s mut [u64], mut b: &'s mut [u64], digits: usize) -> bool {
    let n = a.len();
    let mut counts = [[0usize; 256]; 4];
    for p in a.iter() {
        for (d, c) in counts.iter_mut().enumerate().take(digits) {
            c[digit(*p, d)] += 1;
        }
    }
    let mut in_b = false;
    for (d, c) in counts.iter().enumerate().take(digits) {
        if c.contains(&n) {
            continue;
        }
        let mut at = [0usize; 256];
        let mut sum = 0;
        for (a, c) in at.iter_mut().zip(c) {
            *a = sum;
            sum += c;
        }
        for p in a.iter() {
            let x = digit(*p, d);
            b[at[x]] = *p;
            at[x] += 1;
        }
        std::mem::swap(&mut a, &mut b);
        in_b = !in_b;
    }
    in_b
}

/// [`radix`] on every thread of the pool ([`msd`]).
fn par_radix(pairs: &mut Vec<u64>, tmp: &mut Vec<u64>) {
    tmp.clear();
    tmp.par_extend(rayon::iter::repeat_n(0, pairs.len()));
    if msd(pairs, tmp, 4) {
        std::mem::swap(pairs, tmp);
    }
}

/// Pairs from which [`msd`] splits a slice again rather than sorting it
/// by [`lsd`]: 256 KiB of pairs and as much of the other buffer, in a
/// core's L2.
const MSD_MIN: usize = 1 << 15;

/// Sorts `a` by the low `digits` bytes of its keys with `b` (as long) as
/// the other buffer, like [`lsd`], returning whether the result is in
/// `b`. A slice of [`MSD_MIN`] pairs or more is scattered by the highest
/// of those bytes that not all its keys share (each of a few chunks a
/// thread counting its bytes, then writing to its own region of each
/// bucket, bucket by bucket and chunk by chunk, as one thread would
/// place them: a stable pass over disjoint slices of `b`), and each
/// bucket, whose keys then share that byte, sorts by the lower bytes the
/// same way, in parallel; smaller ones sort by [`lsd`] in cache. Every
/// pass is stable: the result is [`lsd`]'s. (Keys bunched in a few
/// values of their highest byte, as the exponents of floats are, split
/// again on the next.)
fn msd<'s>(a: &'s mut [u64], b: &'s mut [u64], digits: usize) -> bool {
    let n = a.len();
    if n < MSD_MIN {
        return lsd(a, b, digits);
    }
    let size = n
        .div_ceil(4 * rayon::current_num_threads())
        .max(MSD_MIN / 4);
    let counts: Vec<[[usize; 256]; 4]> = a
        .par_chunks(size)
        .map(|c| {
            let mut t = [[0usize; 256]; 4];
            for p in c {
                for (d, td) in t.iter_mut().enumerate().take(digits) {
                    td[digit(*p, d)] += 1;
                }
            }
            t
        })
        .collect();
    let total = |d: usize, x: usize| counts.iter().map(|c| c[d][x]).sum::<usize>();
    // Keys equal in every byte left: the pairs are in order already.
    let Some(top) = (0..digits)
        .rev()
        .find(|&d| (0..256).all(|x| total(d, x) < n))
    else {
        return false;
    };
    let mut regions: Vec<Vec<&mut [u64]>> =
        counts.iter().map(|_| Vec::with_capacity(256)).collect();
    let mut rest: &mut [u64] = &mut *b;
    for x in 0..256 {
        for (region, count) in regions.iter_mut().zip(&counts) {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(count[top][x]);
            region.push(head);
            rest = tail;
        }
    }
    a.par_chunks(size).zip(regions).for_each(|(src, mut dst)| {
        let mut at = [0usize; 256];
        for p in src {
            let x = digit(*p, top);
            dst[x][at[x]] = *p;
            at[x] += 1;
        }
    });
    // `b` holds the buckets; each sorts with its span of `a` as the other
    // buffer, its result copied back into `b` where it ends in `a`.
    let mut buckets = Vec::with_capacity(256);
    let (mut bs, mut as_): (&mut [u64], &mut [u64]) = (b, a);
    for x in 0..256 {
        let len = total(top, x);
        let (bh, bt) = std::mem::take(&mut bs).split_at_mut(len);
        let (ah, at) = std::mem::take(&mut as_).split_at_mut(len);
        buckets.push((bh, ah));
        (bs, as_) = (bt, at);
    }
    buckets.into_par_iter().for_each(|(b, a)| {
        if msd(b, a, top) {
            b.copy_from_slice(a);
        }
    });
    true
}

/// Sort `op` of `src` (the values of `op`'s operand, `F32`, `I32`, `F64`
/// or `I64`, at `nr` whole rows of `nc`) into `out`: at each row's
/// position `j < op.k`, the `j`-th value of the row in sorted order, or
/// its position (`I64`); positions from `op.k` on hold the rest of the
/// row in no particular order (no store reads them).
pub fn sort(op: SortOp, src: &Vals<'_>, nr: usize, nc: usize, out: &mut Vals<'_>) {
    let shape = (nr, nc);
    let f32_key = move |x: f32| op.f32_key(x);
    fn index<T>(_: &[T], j: usize) -> i64 {
        j as i64
    }
    fn at<T: Copy>(row: &[T], j: usize) -> T {
        row[j]
    }
    *out = match (op.part, src) {
        (SortPart::Indices, Vals::F32(_) | Vals::F32In(_)) => {
            Vals::I64(sort_rows(op, src.f32s(), shape, f32_key, index))
        }
        (SortPart::Indices, Vals::F64(v)) => {
            Vals::I64(sort_rows(op, v, shape, move |x: f64| op.key(x), index))
        }
        (SortPart::Indices, Vals::I64(v)) => {
            Vals::I64(sort_rows(op, v, shape, move |x: i64| op.key(x), index))
        }
        (SortPart::Values, Vals::F32(_) | Vals::F32In(_)) => {
            Vals::F32(sort_rows(op, src.f32s(), shape, f32_key, at))
        }
        (SortPart::Values, Vals::F64(v)) => {
            Vals::F64(sort_rows(op, v, shape, move |x: f64| op.key(x), at))
        }
        (SortPart::Values, Vals::I64(v)) => {
            Vals::I64(sort_rows(op, v, shape, move |x: i64| op.key(x), at))
        }
    };
}

/// For each of `nr` rows of `nc` values `T` (keyed by `key_of`, the
/// op's key of a value), `emit(row, j)` for its positions `j` in sorted
/// order (as [`order`] leaves them), on every thread for long rows. 32-bit
/// keys sort as `u64` pairs (by [`radix`]); 64-bit keys less the row's smallest keep their
/// order, and where those fit 32 bits (`I64` values within `2^32` of each
/// other) the row sorts as `u64` pairs too, else as `u128` ones.
fn sort_rows<T: Copy + Sync, O: Send>(
    op: SortOp,
    src: &[T],
    (nr, nc): (usize, usize),
    key_of: impl Fn(T) -> u64 + Sync + Send,
    emit: impl Fn(&[T], usize) -> O + Sync + Send,
) -> Vec<O> {
    let par = long(nc);
    let (mut narrow, mut narrow_tmp): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    let (mut wide, mut wide_tmp): (Vec<u128>, Vec<u128>) = (Vec::new(), Vec::new());
    let mut out = Vec::with_capacity(nr * nc);
    let mut keys = Vec::with_capacity(nc);
    for row in src.chunks(nc.max(1)).take(nr) {
        let emit = |j: usize| emit(row, j);
        if op.key_bits() == 32 {
            // Every key fits 32 bits: the pairs straight from the row.
            let key = |j: usize| key_of(row[j]);
            let row = (row.len(), &key, 0, op.k, par);
            sort_keys(row, (&mut narrow, &mut narrow_tmp), &mut out, emit);
            continue;
        }
        // 64-bit keys, computed once (which costs more than a pass over
        // them), then less the row's smallest.
        keys.clear();
        let key = |x: &T| key_of(*x);
        if par {
            keys.par_extend(row.par_iter().map(key));
        } else {
            keys.extend(row.iter().map(key));
        }
        let (lo, hi) = key_range(&keys, par);
        let key = |j: usize| keys[j];
        let row = (keys.len(), &key, lo, op.k, par);
        if hi - lo <= u64::from(u32::MAX) {
            sort_keys(row, (&mut narrow, &mut narrow_tmp), &mut out, emit);
        } else {
            sort_keys(row, (&mut wide, &mut wide_tmp), &mut out, emit);
        }
    }
    out
}

/// The smallest and largest of `keys` (`(0, 0)` for none), in parallel
/// chunks where `par`.
fn key_range(keys: &[u64], par: bool) -> (u64, u64) {
    let (lo, hi) = if par {
        keys.par_iter()
            .map(|k| (*k, *k))
            .reduce(|| (u64::MAX, 0), |a, b| (a.0.min(b.0), a.1.max(b.1)))
    } else {
        let lo = keys.iter().copied().min().unwrap_or(u64::MAX);
        (lo, keys.iter().copied().max().unwrap_or(0))
    };
    (lo.min(hi), hi)
}

/// Sorts one row of `n` keys `key(j)` (less `lo`, at most the smallest;
/// on every thread where `par`) as pairs `P` (`pairs` and `tmp` buffers
/// to reuse), pushing `emit(j)` of its positions `j` to `out`.
fn sort_keys<P: Pair, O: Send>(
    (n, key, lo, k, par): (usize, &(impl Fn(usize) -> u64 + Sync), u64, usize, bool),
    (pairs, tmp): (&mut Vec<P>, &mut Vec<P>),
    out: &mut Vec<O>,
    emit: impl Fn(usize) -> O + Sync + Send,
) {
    pairs.clear();
    let pair = |j: usize| P::new(key(j) - lo, j);
    if par {
        pairs.par_extend((0..n).into_par_iter().map(pair));
    } else {
        pairs.extend((0..n).map(pair));
    }
    order(pairs, tmp, k, par);
    if par {
        out.par_extend(pairs.par_iter().map(|p| emit(p.pos())));
    } else {
        out.extend(pairs.iter().map(|p| emit(p.pos())));
    }
}

/// Puts the `k` smallest of `pairs` first, in order (the rest after them
/// in no particular order), on every thread where `par`.
fn order<P: Pair>(pairs: &mut Vec<P>, tmp: &mut Vec<P>, k: usize, par: bool) {
    let n = pairs.len();
    if k == 0 {
        return;
    }
    if k < n {
        // A `topk`: the `k` smallest are found in linear time; only they
        // are sorted.
        pairs.select_nth_unstable(k - 1);
        pairs[..k].sort_unstable();
    } else if par {
        P::par_sort_row(pairs, tmp);
    } else {
        P::sort_row(pairs, tmp);
    }
}
