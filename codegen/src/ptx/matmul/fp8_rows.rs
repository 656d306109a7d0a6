//! FP8 operands contiguous along their rows (a row-major B `[k, n]`, a
//! transposed A `[k, m]`), transposed to the k-major tile in registers on
//! their way to shared memory: FP8 `wgmma` has no transpose flag.
//!
//! A thread owns *blocks* of 16 rows x 4 `k`: four 16-byte loads along
//! the rows (one per `k`), a 4x4 byte transpose per word (8 `prmt` for 4
//! rows), and 16 four-byte shared stores, each one row's 4 `k`. Block `c`
//! of a stage's `tile_rows / 16 x 32` is `k` quad `c % 32` of row group
//! `c / 32`, so a warp writes the 128 `k` of one row group and, for each
//! row, its 32 stores fall on 32 distinct banks (8 swizzled 16-byte chunks
//! x 4 words); its loads read 32 `k` rows of 16 bytes, and the warps of
//! the other row groups find the rest of those lines in L1.
//!
//! The loads of one k-tile land in registers while the previous tile's
//! MMAs run and are stored the step after (`pipeline.rs`, as TF32's).

use super::config::Tile;
use super::load::Source;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};

/// `k` per block, and the blocks' `k` quads per 128-byte row.
const QUADS: u32 = 32;

/// One block a thread owns every stage: block 0 moved by `dr` rows.
struct Block {
    /// Whether the block's 16 rows lie inside the matrix (and the tile).
    row_ok: Reg,
    /// Whether the block lies inside the tile (`None`: always).
    live: Option<Reg>,
    /// Rows from block 0's.
    dr: u32,
}

/// A thread's blocks of one operand's tiles and their staging registers.
pub struct RowBytes {
    blocks: Vec<Block>,
    /// `4 kq`: the block's first `k` within a k-tile (u32).
    k_in: Reg,
    /// Global address of block 0 in k-tile 0.
    addr0: Reg,
    /// Offset within the operand's tile of block 0's row `s` at its `k`,
    /// less `128 s`, for `s` in 0..8 (the swizzle of row `r` is `r & 7`).
    smem: Vec<Reg>,
    /// Bytes between consecutive `k` in global memory.
    k_stride: i64,
    /// Offset of the operand's tile within a stage.
    tile_off: u32,
    /// Per block, the four loads' words (`4 j + q`: word `q` of `k` `j`).
    words: Vec<Vec<Reg>>,
}

impl RowBytes {
    /// The blocks of thread `tid` for `src` (FP8, [`Source::fp8_rows`]).
    pub fn new(b: &mut Builder, src: &Source, tid: Reg, t: &Tile) -> RowBytes {
        debug_assert!(src.eb == 1 && src.op.row == 1 && t.k_bytes == 128);
        let threads = t.threads();
        let total = src.tile_rows / 16 * QUADS;
        let per_thread = total.div_ceil(threads);
        let (kq, rg) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "and.b32 {kq}, {tid}, {}", QUADS - 1);
        ins!(b, "shr.u32 {rg}, {tid}, 5");
        let k_in = b.reg(RegKind::B32);
        ins!(b, "shl.b32 {k_in}, {kq}, 2");
        // First row of block 0 within the matrix, and its address.
        let (g, g64, k64, off, addr0) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B64),
            b.reg(RegKind::B64),
            b.reg(RegKind::B64),
            b.reg(RegKind::B64),
        );
        ins!(b, "mad.lo.u32 {g}, {rg}, 16, {}", src.row0);
        ins!(b, "cvt.u64.u32 {g64}, {g}");
        ins!(b, "cvt.u64.u32 {k64}, {k_in}");
        ins!(b, "add.s64 {off}, {g64}, {}", src.batch_off);
        ins!(b, "mad.lo.s64 {off}, {k64}, {}, {off}", src.op.k);
        ins!(b, "add.s64 {addr0}, {off}, {}", src.base);
        // Shared offsets: row group `rg` at 2048 bytes, chunk `kq / 4`
        // swizzled by the row, word `kq % 4` within it.
        let (chunk, word, base) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
        );
        ins!(b, "shr.u32 {chunk}, {kq}, 2");
        ins!(b, "and.b32 {word}, {kq}, 3");
        ins!(b, "shl.b32 {word}, {word}, 2");
        ins!(b, "mad.lo.u32 {base}, {rg}, 2048, {word}");
        let smem = (0..8)
            .map(|s| {
                let x = b.reg(RegKind::B32);
                ins!(b, "xor.b32 {x}, {chunk}, {s}");
                ins!(b, "shl.b32 {x}, {x}, 4");
                ins!(b, "add.u32 {x}, {x}, {base}");
                x
            })
            .collect();
        let blocks = (0..per_thread)
            .map(|i| {
                let dr = 16 * i * (threads / QUADS);
                let (gi, row_ok) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
                ins!(b, "add.u32 {gi}, {g}, {dr}");
                ins!(b, "setp.lt.u32 {row_ok}, {gi}, {}", src.rows);
                // Threads past the tile's blocks (a 64-row tile over 256
                // threads) load and store nothing.
                let live = ((i + 1) * threads > total).then(|| {
                    let live = b.reg(RegKind::Pred);
                    ins!(b, "setp.lt.u32 {live}, {tid}, {}", total - i * threads);
                    ins!(b, "and.pred {row_ok}, {row_ok}, {live}");
                    live
                });
                Block { row_ok, live, dr }
            })
            .collect::<Vec<Block>>();
        let words = blocks
            .iter()
            .map(|_| (0..16).map(|_| b.reg(RegKind::B32)).collect())
            .collect();
        RowBytes {
            blocks,
            k_in,
            addr0,
            smem,
            k_stride: src.op.k,
            tile_off: src.tile_off,
            words,
        }
    }

    /// Loads the k-tile at global byte offset `step` (`left` `k` left from
    /// its start, s32) into the staging registers, zero outside the matrix.
    pub fn fetch(&self, b: &mut Builder, left: Reg, step: Reg) {
        let addr = b.reg(RegKind::B64);
        ins!(b, "add.s64 {addr}, {}, {step}", self.addr0);
        for (blk, w) in self.blocks.iter().zip(&self.words) {
            for j in 0..4 {
                let (k, ok) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
                ins!(b, "add.u32 {k}, {}, {j}", self.k_in);
                ins!(b, "setp.lt.and.s32 {ok}, {k}, {left}, {}", blk.row_ok);
                let q = &w[4 * j..4 * j + 4];
                for r in q {
                    ins!(b, "mov.b32 {r}, 0");
                }
                ins!(
                    b,
                    // `+-6` for a negative offset: see `load.rs`.
                    "@{ok} ld.global.v4.b32 {{{}, {}, {}, {}}}, [{addr}+{}]",
                    q[0],
                    q[1],
                    q[2],
                    q[3],
                    blk.dr as i64 + j as i64 * self.k_stride
                );
            }
        }
    }

    /// Transposes the staging registers to rows of 4 `k` and stores them
    /// into the stage at shared address `stage`.
    pub fn put(&self, b: &mut Builder, stage: Reg) {
        let rows: Vec<Reg> = self
            .smem
            .iter()
            .map(|s| {
                let a = b.reg(RegKind::B32);
                ins!(b, "add.u32 {a}, {stage}, {s}");
                a
            })
            .collect();
        for (blk, w) in self.blocks.iter().zip(&self.words) {
            let guard = blk.live.map(|p| format!("@{p} ")).unwrap_or_default();
            for q in 0..4 {
                // x_j: rows 4q..4q+3 at k j; y_r: k 0..3 of row 4q + r.
                let x = [w[q], w[4 + q], w[8 + q], w[12 + q]];
                let t: Vec<Reg> = [
                    (0, 1, 0x5140),
                    (0, 1, 0x7362),
                    (2, 3, 0x5140),
                    (2, 3, 0x7362),
                ]
                .iter()
                .map(|&(i, j, sel)| prmt(b, x[i], x[j], sel))
                .collect();
                let y = [
                    prmt(b, t[0], t[2], 0x5410),
                    prmt(b, t[0], t[2], 0x7632),
                    prmt(b, t[1], t[3], 0x5410),
                    prmt(b, t[1], t[3], 0x7632),
                ];
                for (r, yr) in y.iter().enumerate() {
                    let row = 4 * q as u32 + r as u32;
                    let imm = self.tile_off + (blk.dr + row) * 128;
                    ins!(
                        b,
                        "{guard}st.shared.b32 [{}+{imm}], {yr}",
                        rows[(row & 7) as usize]
                    );
                }
            }
        }
    }
}

/// `prmt.b32` of `a` (bytes 0-3) and `b` (bytes 4-7) with selector `sel`.
fn prmt(b: &mut Builder, x: Reg, y: Reg, sel: u32) -> Reg {
    let d = b.reg(RegKind::B32);
    ins!(b, "prmt.b32 {d}, {x}, {y}, {sel:#06x}");
    d
}
