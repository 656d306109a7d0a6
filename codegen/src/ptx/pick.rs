//! `topk` of short rows with small `k`
//! ([`crate::sort::Method::SelectOnChip`]): one launch, a CTA per row. The
//! row's `(key, position)` pairs go to shared memory once; a radix select
//! over them (as the `select` module does over many CTAs, here within
//! one) finds the `k` smallest; only those are sorted (the on-chip
//! bitonic sort of `k` pairs) and stored.
//!
//! The select keeps, in registers every thread holds alike, a mask of the
//! pair bits decided so far, their value (a `u64` per word of the pairs,
//! [`Pairs`]: one for 32-bit keys, two for 64-bit ones, whose 8 key
//! digits all come before the position's), and the rank `r` still wanted
//! among the pairs matching them (`r = k` at first). Each pass counts the
//! next 8-bit digit of the matching pairs in a shared histogram (one add
//! per distinct digit of a warp), scans it, and the thread of the digit
//! where the running count reaches `r` publishes it; when that digit
//! holds exactly `r` pairs, "masked pair <= value" selects exactly `k`
//! and the passes stop (random keys: after 2 or 3 digits; the position's
//! last digit always ends them, since pairs are distinct). A warp-wide
//! ballot then compacts the selected pairs to the front of shared memory.

use super::bitonic;
use super::builder::{ins, Builder, Reg, RegKind};
use super::launch::Sort;
use super::module::Launch;
use super::pairs::Pairs;
use super::select::{beyond, digit_of, digits, extend, matches, wanted_digit};
use super::sort_cx::{begin_loop, count_digit, digit_or_none, end_loop, launch, sort_op, SortCx};
use super::target::Target;
use crate::ir::Kernel;
use crate::sort::DIGITS;

/// Threads per CTA: one per digit (the histogram scan takes 256).
pub(super) const BLOCK: u32 = DIGITS as u32;

/// The launch of an on-chip select of `kernel`'s rows, named `name`;
/// `plan.chunk` (at least `k`, a power of two) pairs are sorted at the
/// end.
pub(super) fn entry(kernel: &Kernel, target: &Target, plan: &Sort, name: &str) -> (String, Launch) {
    let n = kernel.row_len() as u32;
    let k = kernel.stored_len() as u32;
    let form = Pairs::of(sort_op(kernel));
    // Shared memory (bytes): the candidates (sorted in place by the
    // bitonic sort, which works from byte 0), the row's pairs (aligned to
    // their size: the candidates' bytes are a multiple of it), the
    // histogram, the scan's warp sums, and the state a pass publishes
    // (digit, rank, done) with the collect's counter.
    let pairs = bitonic::bytes(plan.chunk, form);
    let hist = pairs + form.size() * n;
    let sums = hist + 4 * BLOCK;
    let state = sums + 4 * (BLOCK / 32);
    let shared = state + 16;
    launch(kernel, target, name.to_string(), BLOCK, |b, cx, smem| {
        let sc = SortCx::new(b, cx, BLOCK, smem);
        let tid = sc.tid;
        let grid = sc.for_items(b, kernel.rows() as u64, |b, row, _| {
            let kept = sc.row_vars(b, row);
            let pair_base = sc.shared(b, pairs);
            let pair_at = |b: &mut Builder, t: Reg| {
                let a = b.reg(RegKind::B32);
                ins!(b, "mad.lo.u32 {a}, {t}, {}, {pair_base}", form.size());
                a
            };
            let len = b.mov(RegKind::B32, "u32", n);
            let l = begin_loop(b, tid, len, BLOCK);
            let pair = sc.pair(b, &kept, l.0, None);
            let a = pair_at(b, l.0);
            form.access(b, "st", "shared", "", &pair, (a, 0));
            end_loop(b, l);
            let st = sc.shared(b, state);
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.eq.u32 {p}, {tid}, 0");
            ins!(b, "@{p} st.shared.u32 [{st}+12], 0");
            let h = sc.shared(b, hist);
            let mine = b.reg(RegKind::B32);
            ins!(b, "mad.lo.u32 {mine}, {tid}, 4, {h}");
            let (mask, value) = (form.fill(b, 0), form.fill(b, 0));
            let rank = b.mov(RegKind::B32, "u32", k);
            let collect = b.label();
            // Every thread runs the same number of rounds over the row
            // (the warp-wide digit count needs all lanes).
            let rounds_end = b.mov(RegKind::B32, "u32", n.next_multiple_of(BLOCK));
            let round = |b: &mut Builder| {
                let zero = b.mov(RegKind::B32, "u32", 0);
                let l = begin_loop(b, zero, rounds_end, BLOCK);
                let t = b.reg(RegKind::B32);
                ins!(b, "add.u32 {t}, {}, {tid}", l.0);
                let valid = b.reg(RegKind::Pred);
                ins!(b, "setp.lt.u32 {valid}, {t}, {n}");
                let pair = form.fill(b, 0);
                let a = pair_at(b, t);
                form.access(b, "ld", "shared", &format!("@{valid} "), &pair, (a, 0));
                (l, pair, valid)
            };
            for d in digits(n as usize, form) {
                ins!(b, "st.shared.u32 [{mine}], 0");
                ins!(b, "bar.sync 0");
                let (l, pair, valid) = round(b);
                let matches = matches(b, &pair, &mask, &value);
                ins!(b, "and.pred {matches}, {matches}, {valid}");
                let x = digit_of(b, &pair, d);
                let x = digit_or_none(b, x, matches);
                count_digit(b, h, x, matches);
                end_loop(b, l);
                ins!(b, "bar.sync 0");
                let count = b.reg(RegKind::B32);
                ins!(b, "ld.shared.u32 {count}, [{mine}]");
                let (found, excl) = wanted_digit(b, &sc, count, rank, sums);
                // The wanted digit's thread publishes it, the rank left
                // within it, and whether that digit holds exactly as many.
                let (r, done) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                ins!(b, "sub.u32 {r}, {rank}, {excl}");
                ins!(b, "setp.eq.u32 {p}, {count}, {r}");
                ins!(b, "selp.u32 {done}, 1, 0, {p}");
                ins!(b, "@{found} st.shared.u32 [{st}], {tid}");
                ins!(b, "@{found} st.shared.u32 [{st}+4], {r}");
                ins!(b, "@{found} st.shared.u32 [{st}+8], {done}");
                ins!(b, "bar.sync 0");
                let digit = b.reg(RegKind::B32);
                ins!(b, "ld.shared.u32 {digit}, [{st}]");
                ins!(b, "ld.shared.u32 {rank}, [{st}+4]");
                ins!(b, "ld.shared.u32 {done}, [{st}+8]");
                extend(b, &mask, &value, d, digit);
                ins!(b, "setp.ne.u32 {p}, {done}, 0");
                ins!(b, "@{p} bra {collect}");
            }
            b.place(&collect);
            // The selected pairs (exactly `k`) to the candidate slots: a
            // warp takes consecutive slots for its selected lanes.
            let (l, pair, valid) = round(b);
            let sel = beyond(b, form, &pair, &mask, &value);
            ins!(b, "not.pred {sel}, {sel}");
            ins!(b, "and.pred {sel}, {sel}, {valid}");
            let (ballot, below, n_sel, slot) = (
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
            );
            ins!(b, "vote.sync.ballot.b32 {ballot}, {sel}, -1");
            ins!(b, "popc.b32 {n_sel}, {ballot}");
            ins!(b, "mov.u32 {slot}, 0");
            let lane0 = b.reg(RegKind::Pred);
            ins!(b, "and.b32 {below}, {tid}, 31");
            ins!(b, "setp.eq.u32 {lane0}, {below}, 0");
            ins!(b, "@{lane0} atom.shared.add.u32 {slot}, [{st}+12], {n_sel}");
            ins!(b, "shfl.sync.idx.b32 {slot}, {slot}, 0, 31, -1");
            ins!(b, "mov.u32 {below}, %lanemask_lt");
            ins!(b, "and.b32 {below}, {below}, {ballot}");
            ins!(b, "popc.b32 {below}, {below}");
            ins!(b, "add.u32 {slot}, {slot}, {below}");
            // Exactly `k` pairs are selected; the check only keeps any
            // other count inside the candidates.
            ins!(b, "setp.lt.u32 {p}, {slot}, {k}");
            ins!(b, "and.pred {sel}, {sel}, {p}");
            let a = sc.pair_at(b, slot, form);
            form.access(b, "st", "shared", &format!("@{sel} "), &pair, (a, 0));
            end_loop(b, l);
            ins!(b, "bar.sync 0");
            // Each thread reloads and stores back its own slots, so the
            // sort may take its input from where it sorts.
            let kk = b.mov(RegKind::B32, "u32", k);
            sc.sort_pairs(b, kk, plan.chunk, form, |b, t, valid| {
                let (a, pair) = (sc.pair_at(b, t, form), form.regs(b));
                form.access(b, "ld", "shared", &format!("@{valid} "), &pair, (a, 0));
                pair
            });
            sc.store_sorted(b, &kept, kk, form);
        });
        (shared, grid)
    })
}
