//! `topk` of long rows ([`Method::Select`]): a radix select finds the `k`
//! smallest `(key, position)` pairs of each row without sorting it, then a
//! CTA per row sorts those `k` on chip. Pairs are distinct and order as the
//! stable sort does, so "the `k` smallest pairs" is exactly the stable
//! sort's first `k`, ties and NaN included.
//!
//! Each row's state in the scratch buffer (its head, [`SELECT_HEAD`]
//! words, then room for `k` pairs) is a mask of the pair bits decided so
//! far, their value (a `u64` per word of the pairs: [`Pairs`]), and the
//! rank `r` still wanted among the pairs that match them. Launches:
//! 1. clear: zero the histograms and counters, mask 0, `r = k`;
//! 2. one select pass per 8-bit digit ([`digits`]), from the key's top
//!    digit (4 of a 32-bit key, 8 of a 64-bit one) down to the position's
//!    lowest needed one: a CTA per `(row, tile)` counts the
//!    next digit of the matching pairs in shared memory and adds the
//!    counts to the row's histogram; the row's last CTA to finish (a
//!    counter after a fence) finds the digit where the running count
//!    reaches `r`, extends mask and value by it, and is done when that
//!    digit holds exactly `r` pairs (then "masked pair <= value" selects
//!    exactly `k`); a row that is done skips the later passes, and the
//!    last position digit always finishes it (pairs are distinct);
//! 3. collect: the pairs with `pair & mask <= value` (exactly `k` a row)
//!    go to the row's candidate slots (a counter hands out slots);
//! 4. sort: a CTA per row sorts its `k` candidates in shared memory (the
//!    on-chip bitonic sort) and stores them.
//!
//! Every pass evaluates the operand again (its producers fused): reading
//! the row once per digit costs less than writing pairs out and back.

use super::bitonic;
use super::builder::{ins, Builder, Reg, RegKind};
use super::launch::Sort;
use super::module::Launch;
use super::pairs::Pairs;
use super::sort_cx::{
    begin_loop, count_digit, digit_or_none, end_loop, launch, sort_op, tile_of, tile_rounds,
    word_at, SortCx,
};
use super::target::Target;
use crate::ir::Kernel;
use crate::sort::{pair_words, DIGITS, RADIX_TILE, SELECT_HEAD};

/// Threads per CTA of the passes: one per digit.
const BLOCK: u32 = DIGITS as u32;

/// Words of a row's head: the histogram (from 0), then the state (mask
/// and value: room for two `u64` pair words each).
const MASK: u64 = DIGITS as u64;
const VALUE: u64 = MASK + 4;
const RANK: u64 = VALUE + 4;
const DONE: u64 = RANK + 1;
const FINISHED: u64 = DONE + 1;
const COLLECTED: u64 = FINISHED + 1;

/// The pass's shared memory (bytes): the histogram, the scan's warp sums,
/// the last-CTA flag.
const SUMS: u32 = 4 * BLOCK;
const FLAG: u32 = SUMS + 4 * (BLOCK / 32);
const PASS_SHARED: u32 = FLAG + 8;

/// The launches of a select of `kernel`'s rows, named from `base`; `plan`
/// maps the final on-chip sort of `k` pairs.
pub(super) fn entries(
    kernel: &Kernel,
    target: &Target,
    plan: &Sort,
    base: &str,
) -> Vec<(String, Launch)> {
    let n = kernel.row_len();
    let rows = kernel.rows() as u64;
    let k = kernel.stored_len();
    let op = sort_op(kernel);
    let g = Geometry {
        n: n as u32,
        k: k as u32,
        rows,
        tiles: n.div_ceil(RADIX_TILE) as u64,
        stride: (SELECT_HEAD + pair_words(op.key_bits()) * k) as u64,
        pairs: Pairs::of(op),
    };
    let mut out = vec![clear(kernel, target, base, g)];
    for (i, d) in digits(n, g.pairs).into_iter().enumerate() {
        out.push(pass(kernel, target, base, g, (i, d)));
    }
    out.push(collect(kernel, target, base, g));
    out.push(sort(kernel, target, base, g, plan));
    out
}

/// A digit of a pair that a select decides: bits `shift..shift + 8` of
/// its word `word` (words most significant first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Digit {
    /// The word (0 the most significant).
    pub word: usize,
    /// The digit's lowest bit within the word.
    pub shift: u32,
}

/// The digits a select of rows of `n` `pairs` decides, in order: the
/// key's from its top (bits 63..32 of a [`Pairs::Wide`] word, all of a
/// [`Pairs::Split`] pair's first word), then the position's from its
/// highest byte that can be nonzero.
pub(super) fn digits(n: usize, pairs: Pairs) -> Vec<Digit> {
    let pos_bytes = (usize::BITS - (n - 1).leading_zeros()).div_ceil(8);
    let (key_low, pos_word) = match pairs {
        Pairs::Split => (0, 1),
        _ => (4, 0),
    };
    let key = (key_low..8).rev().map(|d| Digit {
        word: 0,
        shift: 8 * d,
    });
    let pos = (0..pos_bytes).rev().map(|d| Digit {
        word: pos_word,
        shift: 8 * d,
    });
    key.chain(pos).collect()
}

/// Whether `pair` matches the selection so far (`pair & mask == value`,
/// word by word).
pub(super) fn matches(b: &mut Builder, pair: &[Reg], mask: &[Reg], value: &[Reg]) -> Reg {
    let p = b.reg(RegKind::Pred);
    for (w, ((x, m), v)) in pair.iter().zip(mask).zip(value).enumerate() {
        let t = b.reg(RegKind::B64);
        ins!(b, "and.b64 {t}, {x}, {m}");
        match w {
            0 => ins!(b, "setp.eq.u64 {p}, {t}, {v}"),
            _ => ins!(b, "setp.eq.and.u64 {p}, {t}, {v}, {p}"),
        }
    }
    p
}

/// Whether `pair` lies beyond the selection (`pair & mask > value`,
/// lexicographically): the selected pairs are the others.
pub(super) fn beyond(
    b: &mut Builder,
    pairs: Pairs,
    pair: &[Reg],
    mask: &[Reg],
    value: &[Reg],
) -> Reg {
    let masked: Vec<Reg> = pair
        .iter()
        .zip(mask)
        .map(|(x, m)| {
            let t = b.reg(RegKind::B64);
            ins!(b, "and.b64 {t}, {x}, {m}");
            t
        })
        .collect();
    pairs.compare(b, "gt", &masked, value)
}

/// Digit `d` (`u32`) of `pair`.
pub(super) fn digit_of(b: &mut Builder, pair: &[Reg], d: Digit) -> Reg {
    let (d64, x) = (b.reg(RegKind::B64), b.reg(RegKind::B32));
    ins!(b, "shr.b64 {d64}, {}, {}", pair[d.word], d.shift);
    ins!(b, "cvt.u32.u64 {x}, {d64}");
    ins!(b, "and.b32 {x}, {x}, 255");
    x
}

/// Extends the selection by digit `d` of value `v` (`u32`): its bits join
/// `mask`, `v` joins `value`.
pub(super) fn extend(b: &mut Builder, mask: &[Reg], value: &[Reg], d: Digit, v: Reg) {
    let v64 = b.reg(RegKind::B64);
    ins!(b, "cvt.u64.u32 {v64}, {v}");
    ins!(b, "shl.b64 {v64}, {v64}, {}", d.shift);
    ins!(b, "or.b64 {}, {}, {v64}", value[d.word], value[d.word]);
    let m = 255u64 << d.shift;
    ins!(b, "or.b64 {}, {}, 0x{m:016X}", mask[d.word], mask[d.word]);
}

/// Thread `d`'s digit count `count` (`u32`) of the pairs matching the
/// selection so far, scanned over the CTA's 256 threads (warp sums at
/// shared byte `sums`): whether digit `d` holds the wanted `rank` (the
/// running count reaches it there: `excl < rank <= excl + count`) and
/// the count of smaller digits `excl`. Every thread must call it.
pub(super) fn wanted_digit(
    b: &mut Builder,
    sc: &SortCx,
    count: Reg,
    rank: Reg,
    sums: u32,
) -> (Reg, Reg) {
    let (excl, _) = sc.block_scan(b, count, sums);
    let incl = b.reg(RegKind::B32);
    ins!(b, "add.u32 {incl}, {excl}, {count}");
    let (p, q) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
    ins!(b, "setp.lt.u32 {p}, {excl}, {rank}");
    ins!(b, "setp.ge.u32 {q}, {incl}, {rank}");
    ins!(b, "and.pred {p}, {p}, {q}");
    (p, excl)
}

/// The sizes the launches share.
#[derive(Clone, Copy)]
struct Geometry {
    n: u32,
    k: u32,
    rows: u64,
    /// Tiles of a row.
    tiles: u64,
    /// Words per row in the scratch buffer.
    stride: u64,
    /// The pairs' form.
    pairs: Pairs,
}

impl Geometry {
    /// The global address of row `row`'s head (`u64`).
    fn head(self, b: &mut Builder, scratch: Reg, row: Reg) -> Reg {
        let w = b.reg(RegKind::B64);
        ins!(b, "mul.lo.u64 {w}, {row}, {}", self.stride);
        word_at(b, scratch, w, 0)
    }
}

/// Loads a row's mask and value (a `u64` per pair word).
fn mask_value(b: &mut Builder, head: Reg, pairs: Pairs) -> (Vec<Reg>, Vec<Reg>) {
    let (mask, value) = (pairs.regs(b), pairs.regs(b));
    for (w, (m, v)) in mask.iter().zip(&value).enumerate() {
        let off = 8 * w as u64;
        ins!(b, "ld.global.cg.u64 {m}, [{head}+{}]", 4 * MASK + off);
        ins!(b, "ld.global.cg.u64 {v}, [{head}+{}]", 4 * VALUE + off);
    }
    (mask, value)
}

/// Stores a row's mask and value.
fn store_mask_value(b: &mut Builder, head: Reg, mask: &[Reg], value: &[Reg]) {
    for (w, (m, v)) in mask.iter().zip(value).enumerate() {
        let off = 8 * w as u64;
        ins!(b, "st.global.u64 [{head}+{}], {m}", 4 * MASK + off);
        ins!(b, "st.global.u64 [{head}+{}], {v}", 4 * VALUE + off);
    }
}

/// Launch 1: every row's state to its start.
fn clear(kernel: &Kernel, target: &Target, base: &str, g: Geometry) -> (String, Launch) {
    launch(kernel, target, format!("{base}_c"), BLOCK, |b, cx, smem| {
        let sc = SortCx::new(b, cx, BLOCK, smem);
        let scratch = *cx.outputs.last().expect("selects have a scratch output");
        let grid = sc.for_items(b, g.rows, |b, row, _| {
            let head = g.head(b, scratch, row);
            let a = b.reg(RegKind::B64);
            ins!(b, "mad.wide.u32 {a}, {}, 4, {head}", sc.tid);
            ins!(b, "st.global.u32 [{a}], 0");
            let (p, skip) = (b.reg(RegKind::Pred), b.label());
            ins!(b, "setp.ne.u32 {p}, {}, 0", sc.tid);
            ins!(b, "@{p} bra {skip}");
            let zero = g.pairs.fill(b, 0);
            store_mask_value(b, head, &zero, &zero);
            ins!(b, "st.global.u32 [{head}+{}], {}", 4 * RANK, g.k);
            for w in [DONE, FINISHED, COLLECTED] {
                ins!(b, "st.global.u32 [{head}+{}], 0", 4 * w);
            }
            b.place(&skip);
        });
        (0, grid)
    })
}

/// Launch 2: select pass `i`, over digit `d` of the pairs.
fn pass(
    kernel: &Kernel,
    target: &Target,
    base: &str,
    g: Geometry,
    (i, d): (usize, Digit),
) -> (String, Launch) {
    launch(
        kernel,
        target,
        format!("{base}_p{i}"),
        BLOCK,
        |b, cx, smem| {
            let sc = SortCx::new(b, cx, BLOCK, smem);
            let scratch = *cx.outputs.last().expect("selects have a scratch output");
            let tid = sc.tid;
            let grid = sc.for_items(b, g.rows * g.tiles, |b, item, next| {
                let (row, _, start, len) = tile_of(b, item, g.tiles, g.n);
                let head = g.head(b, scratch, row);
                // The whole CTA skips a finished row.
                let (done, p) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
                ins!(b, "ld.global.cg.u32 {done}, [{head}+{}]", 4 * DONE);
                ins!(b, "setp.ne.u32 {p}, {done}, 0");
                ins!(b, "@{p} bra {next}");
                let (mask, value) = mask_value(b, head, g.pairs);
                let rank = b.reg(RegKind::B32);
                ins!(b, "ld.global.cg.u32 {rank}, [{head}+{}]", 4 * RANK);
                let kept = sc.row_vars(b, row);
                let hist = sc.shared(b, 0);
                let mine = b.reg(RegKind::B32);
                ins!(b, "mad.lo.u32 {mine}, {tid}, 4, {hist}");
                ins!(b, "st.shared.u32 [{mine}], 0");
                ins!(b, "bar.sync 0");
                let rounds = tile_rounds(b, tid, start, len);
                let mut pairs = Vec::with_capacity(rounds.len());
                for &(pos, valid) in &rounds {
                    pairs.push(sc.pair(b, &kept, pos, Some(valid)));
                }
                for (pair, &(_, valid)) in pairs.iter().zip(&rounds) {
                    let matches = matches(b, pair, &mask, &value);
                    ins!(b, "and.pred {matches}, {matches}, {valid}");
                    let x = digit_of(b, pair, d);
                    let x = digit_or_none(b, x, matches);
                    count_digit(b, hist, x, matches);
                }
                ins!(b, "bar.sync 0");
                let h = b.reg(RegKind::B32);
                ins!(b, "ld.shared.u32 {h}, [{mine}]");
                let ha = b.reg(RegKind::B64);
                ins!(b, "mad.wide.u32 {ha}, {tid}, 4, {head}");
                ins!(b, "setp.ne.u32 {p}, {h}, 0");
                ins!(b, "@{p} red.global.add.u32 [{ha}], {h}");
                // The adds are visible before this tile counts as finished.
                ins!(b, "membar.gl");
                ins!(b, "bar.sync 0");
                let flag = sc.shared(b, FLAG);
                let (old, last) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                ins!(b, "setp.eq.u32 {p}, {tid}, 0");
                let skip = b.label();
                ins!(b, "@!{p} bra {skip}");
                ins!(b, "atom.global.add.u32 {old}, [{head}+{}], 1", 4 * FINISHED);
                ins!(b, "setp.eq.u32 {p}, {old}, {}", g.tiles - 1);
                ins!(b, "selp.u32 {last}, 1, 0, {p}");
                ins!(b, "st.shared.u32 [{flag}], {last}");
                b.place(&skip);
                ins!(b, "bar.sync 0");
                ins!(b, "ld.shared.u32 {last}, [{flag}]");
                ins!(b, "setp.eq.u32 {p}, {last}, 0");
                ins!(b, "@{p} bra {next}");
                // The row's last tile: every other tile's adds are in.
                ins!(b, "membar.gl");
                let count = b.reg(RegKind::B32);
                ins!(b, "atom.global.exch.b32 {count}, [{ha}], 0");
                let (p, excl) = wanted_digit(b, &sc, count, rank, SUMS);
                let found = b.label();
                ins!(b, "@!{p} bra {found}");
                ins!(b, "sub.u32 {rank}, {rank}, {excl}");
                extend(b, &mask, &value, d, tid);
                ins!(b, "setp.eq.u32 {p}, {count}, {rank}");
                ins!(b, "selp.u32 {done}, 1, 0, {p}");
                store_mask_value(b, head, &mask, &value);
                ins!(b, "st.global.u32 [{head}+{}], {rank}", 4 * RANK);
                ins!(b, "st.global.u32 [{head}+{}], {done}", 4 * DONE);
                b.place(&found);
                ins!(b, "setp.eq.u32 {p}, {tid}, 0");
                ins!(b, "@{p} st.global.u32 [{head}+{}], 0", 4 * FINISHED);
            });
            (PASS_SHARED, grid)
        },
    )
}

/// Launch 3: each row's `k` selected pairs to its candidate slots.
fn collect(kernel: &Kernel, target: &Target, base: &str, g: Geometry) -> (String, Launch) {
    launch(kernel, target, format!("{base}_g"), BLOCK, |b, cx, smem| {
        let sc = SortCx::new(b, cx, BLOCK, smem);
        let scratch = *cx.outputs.last().expect("selects have a scratch output");
        let grid = sc.for_items(b, g.rows * g.tiles, |b, item, _| {
            let (row, _, start, len) = tile_of(b, item, g.tiles, g.n);
            let head = g.head(b, scratch, row);
            let (mask, value) = mask_value(b, head, g.pairs);
            let kept = sc.row_vars(b, row);
            let l = begin_loop(b, sc.tid, len, BLOCK);
            let pos = b.reg(RegKind::B32);
            ins!(b, "add.u32 {pos}, {start}, {}", l.0);
            let pair = sc.pair(b, &kept, pos, None);
            let (p, skip) = (beyond(b, g.pairs, &pair, &mask, &value), b.label());
            ins!(b, "@{p} bra {skip}");
            let slot = b.reg(RegKind::B32);
            ins!(
                b,
                "atom.global.add.u32 {slot}, [{head}+{}], 1",
                4 * COLLECTED
            );
            // Exactly `k` pairs are selected; the check only keeps any
            // other count inside the row.
            ins!(b, "setp.ge.u32 {p}, {slot}, {}", g.k);
            ins!(b, "@{p} bra {skip}");
            let a = b.reg(RegKind::B64);
            ins!(b, "mad.wide.u32 {a}, {slot}, {}, {head}", g.pairs.size());
            let at = (a, 4 * SELECT_HEAD as u64);
            g.pairs.access(b, "st", "global", "", &pair, at);
            b.place(&skip);
            end_loop(b, l);
        });
        (0, grid)
    })
}

/// Launch 4: a CTA per row sorts its candidates and stores them.
fn sort(
    kernel: &Kernel,
    target: &Target,
    base: &str,
    g: Geometry,
    plan: &Sort,
) -> (String, Launch) {
    launch(
        kernel,
        target,
        format!("{base}_t"),
        plan.block,
        |b, cx, smem| {
            let sc = SortCx::new(b, cx, plan.block, smem);
            let scratch = *cx.outputs.last().expect("selects have a scratch output");
            let grid = sc.for_items(b, g.rows, |b, row, _| {
                let head = g.head(b, scratch, row);
                let kept = sc.row_vars(b, row);
                let k = b.mov(RegKind::B32, "u32", g.k);
                sc.sort_pairs(b, k, plan.chunk, g.pairs, |b, t, valid| {
                    let (a, pair) = (b.reg(RegKind::B64), g.pairs.regs(b));
                    ins!(b, "mad.wide.u32 {a}, {t}, {}, {head}", g.pairs.size());
                    let at = (a, 4 * SELECT_HEAD as u64);
                    g.pairs
                        .access(b, "ld", "global", &format!("@{valid} "), &pair, at);
                    pair
                });
                sc.store_sorted(b, &kept, k, g.pairs);
            });
            (bitonic::bytes(plan.chunk, g.pairs), grid)
        },
    )
}
