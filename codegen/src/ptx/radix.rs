//! The LSD radix sort of long rows ([`Method::Radix`]) over many CTAs:
//! a pass per 8-bit digit of the keys that orders them (all 8 of the
//! 64-bit keys of `F64` and `I64`, all 4 for `F32` and `I32` sources, 2
//! for `BF16`: [`crate::sort::key_digits`]), lowest digit first. LSD
//! radix sorting is stable, so the positions travel as a payload and equal
//! keys keep their order; the keys are `u32` or `u64` words ([`Keys`]),
//! everything else the same at both widths. Each pass is three launches
//! over the scratch buffer ([`RadixScratch`]):
//! 1. histogram: a CTA per `(row, tile)` of [`RADIX_TILE`] elements counts
//!    its digits in shared memory (one add per distinct digit of a warp)
//!    and writes the 256 counts;
//! 2. scan: a CTA per `(row, digit)` turns that digit's counts over the
//!    row's tiles into exclusive offsets, and writes the digit's total;
//! 3. scatter: a CTA per `(row, tile)` ranks its elements stably by digit
//!    (rounds of 256 in position order: `match.any` gives a lane its equal
//!    digits in the warp, per-warp counts in shared memory the earlier
//!    warps' and rounds'), stages them in shared memory in digit order,
//!    and writes them out coalesced to `digit start + tile offset + rank`.
//!
//! The first pass evaluates the operand (its producers fused) and takes
//! positions as the payload; later passes read the copy the previous pass
//! wrote. The last pass's scatter does not write scratch: it stores the
//! kernel's outputs at each sorted position below `k` directly.

use super::builder::{ins, Builder, Reg, RegKind};
use super::module::Launch;
use super::sort_cx::{
    begin_loop, count_digit, digit_or_none, end_loop, launch, peers, sort_op, tile_of, tile_rounds,
    to_u64, word_at, SortCx,
};
use super::target::Target;
use crate::ir::Kernel;
use crate::sort::{key_digits, RadixScratch, DIGITS, RADIX_TILE};

/// Threads per CTA: one per digit.
const BLOCK: u32 = DIGITS as u32;

/// Warps per CTA.
const WARPS: u32 = BLOCK / 32;

/// One radix pass: its number, the key digit it sorts by, whether it is
/// the last (which stores the outputs), and the keys it sorts.
#[derive(Clone, Copy)]
struct Pass {
    index: u32,
    digit: u32,
    last: bool,
    keys: Keys,
}

/// The width of the keys sorted: `u32` words, or `u64` for 64-bit keys.
#[derive(Clone, Copy)]
struct Keys {
    bits: u32,
}

impl Keys {
    /// Bytes of a key.
    fn bytes(self) -> u32 {
        self.bits / 8
    }

    /// The register kind of a key.
    fn kind(self) -> RegKind {
        match self.bits {
            64 => RegKind::B64,
            _ => RegKind::B32,
        }
    }

    /// The global address of key `index` (a `u64` register) of copy
    /// `copy` of the scratch buffer at `scratch`.
    fn at(self, b: &mut Builder, scratch: Reg, s: RadixScratch, copy: u64, index: Reg) -> Reg {
        let a = b.reg(RegKind::B64);
        ins!(b, "mad.lo.u64 {a}, {index}, {}, {scratch}", self.bytes());
        ins!(b, "add.u64 {a}, {a}, {}", 4 * s.keys(copy));
        a
    }

    /// Offsets (bytes) in the scatter's shared memory: the staged keys
    /// (from 0) and positions, two sets (by round parity) of per-warp
    /// digit counts, each digit's output base and its start within the
    /// tile, and the scan's warp sums; then its size.
    fn stage_pos(self) -> u32 {
        self.bytes() * RADIX_TILE as u32
    }
    fn warp_counts(self) -> u32 {
        self.stage_pos() + 4 * RADIX_TILE as u32
    }
    fn bases(self) -> u32 {
        self.warp_counts() + 2 * PARITY
    }
    fn starts(self) -> u32 {
        self.bases() + 4 * BLOCK
    }
    fn sums(self) -> u32 {
        self.starts() + 4 * BLOCK
    }
    fn scatter_shared(self) -> u32 {
        self.sums() + 4 * WARPS
    }
}

/// Bytes of a set of per-warp digit counts in the scatter.
const PARITY: u32 = 4 * WARPS * BLOCK;

/// The launches of a radix sort of `kernel`'s rows, named from `base`.
pub(super) fn entries(kernel: &Kernel, target: &Target, base: &str) -> Vec<(String, Launch)> {
    let op = sort_op(kernel);
    let keys = Keys {
        bits: op.key_bits(),
    };
    let s = RadixScratch::new(kernel.rows(), kernel.row_len(), keys.bits)
        .expect("the planner sized the scratch buffer");
    // Only the digits that order the keys (all but for narrow dtypes):
    // skipping one whose value the others decide leaves the order alone.
    let digits = key_digits(op.dtype);
    let used: Vec<u32> = (0..keys.bytes()).filter(|d| digits >> d & 1 == 1).collect();
    let mut out = Vec::new();
    for (i, &digit) in used.iter().enumerate() {
        let pass = Pass {
            index: i as u32,
            digit,
            last: i + 1 == used.len(),
            keys,
        };
        out.push(histogram(kernel, target, base, s, pass));
        out.push(scan(kernel, target, base, s, pass));
        out.push(scatter(kernel, target, base, s, pass));
    }
    out
}

/// The digit (`u32`) of `key` that pass `pass` sorts by.
fn digit(b: &mut Builder, key: Reg, pass: Pass) -> Reg {
    let d = b.reg(RegKind::B32);
    let shift = 8 * pass.digit;
    match pass.keys.bits {
        64 => {
            let d64 = b.reg(RegKind::B64);
            ins!(b, "bfe.u64 {d64}, {key}, {shift}, 8");
            ins!(b, "cvt.u32.u64 {d}, {d64}");
        }
        _ => ins!(b, "bfe.u32 {d}, {key}, {shift}, 8"),
    }
    d
}

/// The key and position at `pos` (`u32`) of the row whose elements start
/// at element `row_base` (`u64`), in the copy pass `pass` reads, where
/// `valid`.
fn read(
    b: &mut Builder,
    scratch: Reg,
    s: RadixScratch,
    pass: Pass,
    row_base: Reg,
    pos: Reg,
    valid: Reg,
) -> (Reg, Reg) {
    let idx = b.reg(RegKind::B64);
    let p64 = to_u64(b, pos);
    ins!(b, "add.u64 {idx}, {row_base}, {p64}");
    let copy = u64::from((pass.index + 1) % 2);
    let w = pass.keys.bits;
    let ka = pass.keys.at(b, scratch, s, copy, idx);
    let pa = word_at(b, scratch, idx, s.positions(copy));
    let (key, at) = (
        b.mov(pass.keys.kind(), &format!("b{w}"), 0),
        b.reg(RegKind::B32),
    );
    ins!(b, "mov.u32 {at}, 0");
    ins!(b, "@{valid} ld.global.b{w} {key}, [{ka}]");
    ins!(b, "@{valid} ld.global.u32 {at}, [{pa}]");
    (key, at)
}

/// `row * row_len` (`u64`).
fn row_base(b: &mut Builder, row: Reg, n: u32) -> Reg {
    let r = b.reg(RegKind::B64);
    ins!(b, "mul.lo.u64 {r}, {row}, {n}");
    r
}

/// Index (`u64`) of `(row, digit, tile)` in the counts and offsets.
fn count_index(b: &mut Builder, row: Reg, digit: Reg, t: Reg, tiles: u64) -> Reg {
    let (i, d, t64) = (b.reg(RegKind::B64), to_u64(b, digit), to_u64(b, t));
    ins!(b, "mad.lo.u64 {i}, {row}, {DIGITS}, {d}");
    ins!(b, "mad.lo.u64 {i}, {i}, {tiles}, {t64}");
    i
}

/// Launch 1 of a pass: each tile's digit counts.
fn histogram(
    kernel: &Kernel,
    target: &Target,
    base: &str,
    s: RadixScratch,
    pass: Pass,
) -> (String, Launch) {
    let n = kernel.row_len() as u32;
    launch(
        kernel,
        target,
        format!("{base}_h{}", pass.index),
        BLOCK,
        |b, cx, smem| {
            let sc = SortCx::new(b, cx, BLOCK, smem);
            let scratch = *cx
                .outputs
                .last()
                .expect("radix sorts have a scratch output");
            let grid = sc.for_items(b, s.rows * s.tiles, |b, item, _| {
                let (row, t, start, len) = tile_of(b, item, s.tiles, n);
                let kept = if pass.index == 0 {
                    sc.row_vars(b, row)
                } else {
                    Vec::new()
                };
                let rb = row_base(b, row, n);
                let hist = sc.shared(b, 0);
                let mine = b.reg(RegKind::B32);
                ins!(b, "mad.lo.u32 {mine}, {}, 4, {hist}", sc.tid);
                ins!(b, "st.shared.u32 [{mine}], 0");
                ins!(b, "bar.sync 0");
                let rounds = tile_rounds(b, sc.tid, start, len);
                let mut keys = Vec::with_capacity(rounds.len());
                for &(pos, valid) in &rounds {
                    keys.push(if pass.index == 0 {
                        sc.key(b, &kept, pos, Some(valid))
                    } else {
                        read(b, scratch, s, pass, rb, pos, valid).0
                    });
                }
                for (&key, &(_, valid)) in keys.iter().zip(&rounds) {
                    let d = digit(b, key, pass);
                    let d = digit_or_none(b, d, valid);
                    count_digit(b, hist, d, valid);
                }
                ins!(b, "bar.sync 0");
                let h = b.reg(RegKind::B32);
                ins!(b, "ld.shared.u32 {h}, [{mine}]");
                let i = count_index(b, row, sc.tid, t, s.tiles);
                let a = word_at(b, scratch, i, s.counts());
                ins!(b, "st.global.u32 [{a}], {h}");
            });
            (4 * BLOCK, grid)
        },
    )
}

/// Launch 2 of a pass: per `(row, digit)`, exclusive offsets of the
/// digit's counts over the row's tiles, and the digit's total.
fn scan(
    kernel: &Kernel,
    target: &Target,
    base: &str,
    s: RadixScratch,
    pass: Pass,
) -> (String, Launch) {
    launch(
        kernel,
        target,
        format!("{base}_s{}", pass.index),
        BLOCK,
        |b, cx, smem| {
            let sc = SortCx::new(b, cx, BLOCK, smem);
            let scratch = *cx
                .outputs
                .last()
                .expect("radix sorts have a scratch output");
            let grid = sc.for_items(b, s.rows * DIGITS as u64, |b, item, _| {
                // `item` is `row * DIGITS + digit`: its counts start there
                // times the tiles.
                let first = b.reg(RegKind::B64);
                ins!(b, "mul.lo.u64 {first}, {item}, {}", s.tiles);
                let carry = b.mov(RegKind::B32, "u32", 0);
                let zero = b.mov(RegKind::B32, "u32", 0);
                let tiles = b.mov(RegKind::B32, "u32", s.tiles);
                let l = begin_loop(b, zero, tiles, BLOCK);
                let t = b.reg(RegKind::B32);
                ins!(b, "add.u32 {t}, {}, {}", l.0, sc.tid);
                let valid = b.reg(RegKind::Pred);
                ins!(b, "setp.lt.u32 {valid}, {t}, {tiles}");
                let (i, t64) = (b.reg(RegKind::B64), to_u64(b, t));
                ins!(b, "add.u64 {i}, {first}, {t64}");
                let c = b.mov(RegKind::B32, "u32", 0);
                let ca = word_at(b, scratch, i, s.counts());
                ins!(b, "@{valid} ld.global.u32 {c}, [{ca}]");
                let (excl, total) = sc.block_scan(b, c, 0);
                ins!(b, "add.u32 {excl}, {excl}, {carry}");
                let oa = word_at(b, scratch, i, s.offsets());
                ins!(b, "@{valid} st.global.u32 [{oa}], {excl}");
                ins!(b, "add.u32 {carry}, {carry}, {total}");
                end_loop(b, l);
                let p = b.reg(RegKind::Pred);
                ins!(b, "setp.eq.u32 {p}, {}, 0", sc.tid);
                let ta = word_at(b, scratch, item, s.totals());
                ins!(b, "@{p} st.global.u32 [{ta}], {carry}");
            });
            (4 * WARPS, grid)
        },
    )
}

/// Launch 3 of a pass: each tile's elements, ranked stably by digit, to
/// their place in the other copy (or, in the last pass, stored).
fn scatter(
    kernel: &Kernel,
    target: &Target,
    base: &str,
    s: RadixScratch,
    pass: Pass,
) -> (String, Launch) {
    let n = kernel.row_len() as u32;
    let stored = kernel.stored_len() as u32;
    let last = pass.last;
    let keys = pass.keys;
    let bits = keys.bits;
    launch(
        kernel,
        target,
        format!("{base}_x{}", pass.index),
        BLOCK,
        |b, cx, smem| {
            let sc = SortCx::new(b, cx, BLOCK, smem);
            let scratch = *cx
                .outputs
                .last()
                .expect("radix sorts have a scratch output");
            let tid = sc.tid;
            let grid = sc.for_items(b, s.rows * s.tiles, |b, item, _| {
                let (row, t, start, len) = tile_of(b, item, s.tiles, n);
                let kept = if pass.index == 0 || last {
                    sc.row_vars(b, row)
                } else {
                    Vec::new()
                };
                let rb = row_base(b, row, n);
                // Thread `d` sets up digit `d`: where its elements of this
                // tile go (the digit's start in the row, plus the tile's
                // offset among the digit's, minus its start within the tile:
                // then the element at staged index `i` goes to `base + i`).
                let ci = count_index(b, row, tid, t, s.tiles);
                let ti = b.reg(RegKind::B64);
                let d64 = to_u64(b, tid);
                ins!(b, "mad.lo.u64 {ti}, {row}, {DIGITS}, {d64}");
                let (total, count, offset) = (
                    b.reg(RegKind::B32),
                    b.reg(RegKind::B32),
                    b.reg(RegKind::B32),
                );
                let a = word_at(b, scratch, ti, s.totals());
                ins!(b, "ld.global.u32 {total}, [{a}]");
                let a = word_at(b, scratch, ci, s.counts());
                ins!(b, "ld.global.u32 {count}, [{a}]");
                let a = word_at(b, scratch, ci, s.offsets());
                ins!(b, "ld.global.u32 {offset}, [{a}]");
                let (digit_start, _) = sc.block_scan(b, total, keys.sums());
                let (tile_start, _) = sc.block_scan(b, count, keys.sums());
                let out_base = b.reg(RegKind::B32);
                ins!(b, "add.u32 {out_base}, {digit_start}, {offset}");
                ins!(b, "sub.u32 {out_base}, {out_base}, {tile_start}");
                let mine = b.reg(RegKind::B32);
                ins!(b, "shl.b32 {mine}, {tid}, 2");
                // Element `idx` of the shared array at `off` of elements of
                // `size` bytes.
                let at_size = |b: &mut Builder, off: u32, idx: Reg, size: u32| {
                    let base = sc.shared(b, off);
                    let a = b.reg(RegKind::B32);
                    ins!(b, "mad.lo.u32 {a}, {idx}, {size}, {base}");
                    a
                };
                let at = |b: &mut Builder, off: u32, idx: Reg| at_size(b, off, idx, 4);
                let a = at(b, keys.bases(), tid);
                ins!(b, "st.shared.u32 [{a}], {out_base}");
                let a = at(b, keys.starts(), tid);
                ins!(b, "st.shared.u32 [{a}], {tile_start}");
                // Per-warp counts of digit `d` of both parities start at 0.
                let mine_counts = at(b, keys.warp_counts(), tid);
                for w in 0..2 * WARPS {
                    ins!(b, "st.shared.u32 [{mine_counts}+{}], 0", 4 * BLOCK * w);
                }
                // Elements of digit `d` ranked in earlier rounds.
                let running = b.mov(RegKind::B32, "u32", 0);
                ins!(b, "bar.sync 0");
                let (_, warp) = sc.lane_warp(b);
                let rounds = tile_rounds(b, tid, start, len);
                let mut loaded = Vec::with_capacity(rounds.len());
                for &(pos, valid) in &rounds {
                    loaded.push(if pass.index == 0 {
                        (sc.key(b, &kept, pos, Some(valid)), pos)
                    } else {
                        read(b, scratch, s, pass, rb, pos, valid)
                    });
                }
                for (round, (&(_, valid), &(key, payload))) in
                    rounds.iter().zip(&loaded).enumerate()
                {
                    let dg = digit(b, key, pass);
                    let dm = digit_or_none(b, dg, valid);
                    let (peer_mask, rank, first) = peers(b, dm);
                    // This round's per-warp counts, by parity: the other set is
                    // cleared for the next round while this one is read.
                    let par = round as u32 % 2;
                    let (cur, next) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                    let counts = sc.shared(b, keys.warp_counts());
                    ins!(b, "add.u32 {cur}, {counts}, {}", par * PARITY);
                    ins!(b, "add.u32 {next}, {counts}, {}", (1 - par) * PARITY);
                    let slot = b.reg(RegKind::B32);
                    ins!(b, "mad.lo.u32 {slot}, {warp}, {BLOCK}, {dg}");
                    ins!(b, "mad.lo.u32 {slot}, {slot}, 4, {cur}");
                    let n_peers = b.reg(RegKind::B32);
                    ins!(b, "popc.b32 {n_peers}, {peer_mask}");
                    ins!(b, "and.pred {first}, {first}, {valid}");
                    ins!(b, "@{first} st.shared.u32 [{slot}], {n_peers}");
                    ins!(b, "bar.sync 0");
                    // Thread `d`: each warp's count of digit `d` becomes the
                    // number of `d`s before that warp (earlier rounds included).
                    let (cur_d, next_d, c) = (
                        b.reg(RegKind::B32),
                        b.reg(RegKind::B32),
                        b.reg(RegKind::B32),
                    );
                    ins!(b, "add.u32 {cur_d}, {cur}, {mine}");
                    ins!(b, "add.u32 {next_d}, {next}, {mine}");
                    for w in 0..WARPS {
                        let off = 4 * BLOCK * w;
                        ins!(b, "ld.shared.u32 {c}, [{cur_d}+{off}]");
                        ins!(b, "st.shared.u32 [{cur_d}+{off}], {running}");
                        ins!(b, "add.u32 {running}, {running}, {c}");
                        ins!(b, "st.shared.u32 [{next_d}+{off}], 0");
                    }
                    ins!(b, "bar.sync 0");
                    // Staged index: the digit's start in the tile, the earlier
                    // `d`s, this lane's rank among its warp's.
                    let (local, x) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                    let sa = at(b, keys.starts(), dg);
                    ins!(b, "@{valid} ld.shared.u32 {local}, [{sa}]");
                    ins!(b, "@{valid} ld.shared.u32 {x}, [{slot}]");
                    ins!(b, "add.u32 {local}, {local}, {x}");
                    ins!(b, "add.u32 {local}, {local}, {rank}");
                    let ka = at_size(b, 0, local, keys.bytes());
                    ins!(b, "@{valid} st.shared.b{bits} [{ka}], {key}");
                    let pa = at(b, keys.stage_pos(), local);
                    ins!(b, "@{valid} st.shared.u32 [{pa}], {payload}");
                }
                ins!(b, "bar.sync 0");
                // Out in staged order: runs of equal digits go to consecutive
                // addresses.
                let l = begin_loop(b, tid, len, BLOCK);
                let i = l.0;
                let (key, at_pos, dst) =
                    (b.reg(keys.kind()), b.reg(RegKind::B32), b.reg(RegKind::B32));
                let ka = at_size(b, 0, i, keys.bytes());
                ins!(b, "ld.shared.b{bits} {key}, [{ka}]");
                let pa = at(b, keys.stage_pos(), i);
                ins!(b, "ld.shared.u32 {at_pos}, [{pa}]");
                let dg = digit(b, key, pass);
                let ba = at(b, keys.bases(), dg);
                ins!(b, "ld.shared.u32 {dst}, [{ba}]");
                ins!(b, "add.u32 {dst}, {dst}, {i}");
                if last {
                    let (skip, p) = (b.label(), b.reg(RegKind::Pred));
                    ins!(b, "setp.ge.u32 {p}, {dst}, {stored}");
                    ins!(b, "@{p} bra {skip}");
                    sc.store(b, &kept, dst, at_pos);
                    b.place(&skip);
                } else {
                    // Destinations are a permutation of the row (the passes
                    // evaluate the same keys); the check only keeps any other
                    // count inside the row.
                    let (skip, p) = (b.label(), b.reg(RegKind::Pred));
                    ins!(b, "setp.ge.u32 {p}, {dst}, {n}");
                    ins!(b, "@{p} bra {skip}");
                    let (idx, d64) = (b.reg(RegKind::B64), to_u64(b, dst));
                    ins!(b, "add.u64 {idx}, {rb}, {d64}");
                    let copy = u64::from(pass.index % 2);
                    let ka = keys.at(b, scratch, s, copy, idx);
                    ins!(b, "st.global.b{bits} [{ka}], {key}");
                    let pa = word_at(b, scratch, idx, s.positions(copy));
                    ins!(b, "st.global.u32 [{pa}], {at_pos}");
                    b.place(&skip);
                }
                end_loop(b, l);
            });
            (keys.scatter_shared(), grid)
        },
    )
}
