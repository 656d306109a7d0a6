//! Global to shared memory: one operand's tile of a pipeline stage.
//!
//! Two shared layouts, both in 16-byte chunks with an XOR swizzle that
//! keeps a warp's chunk stores and the 8 rows one `ldmatrix` matrix reads
//! on distinct banks:
//! - [`Layout::KMajor`]: `rows x k_bytes`, `k` contiguous. Chunk `c` of
//!   row `r` lives at `r * k_bytes + ((c ^ sw(r)) << 4)`, `sw(r) = (r >> 1)
//!   & 3` for 64-byte rows (two rows share a 128-byte line), `r & 7` for
//!   128-byte rows. Read by plain `ldmatrix`.
//! - [`Layout::RowMajor`] (halves only): `bk x rows`, the operand's rows
//!   (`m` of A, `n` of B) contiguous, as a row-major B `[k, n]` or a
//!   transposed A `[k, m]` is stored. Chunk `c` of k-row `k` lives at
//!   `k * rows * 2 + ((c ^ (k & 7)) << 4)`. Read by `ldmatrix.trans`.
//! - [`Layout::MnAtoms`] (halves only, for `wgmma`): the same rows cut
//!   into atoms of 64 (128 bytes): atom `a = c / 8` holds `bk x 64` at
//!   `a * bk * 128 + k * 128 + (((c % 8) ^ (k & 7)) << 4)`, the 128-byte
//!   swizzle of the hardware's MN-major layout.
//!
//! A thread owns `chunks / threads` chunks. Where the operand's strides
//! allow 16-byte copies ([`Operand::vector_ok`], [`Operand::row_vector_ok`])
//! each chunk is one `cp.async.cg` with zero fill outside the matrix,
//! neighbouring threads taking neighbouring chunks (coalesced). Otherwise
//! (k-major only) each chunk is predicated element loads and shared
//! stores, neighbouring threads taking neighbouring rows (coalesced when
//! the row stride is 1).

use super::config::Tile;
use super::shape::Operand;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};

/// How an operand's tile is laid out in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    KMajor,
    RowMajor,
    MnAtoms,
}

/// One chunk a thread copies every stage.
struct Chunk {
    /// Whether the chunk's rows lie inside the matrix.
    row_ok: Reg,
    /// First `k` of the chunk within the stage (u32).
    k_in: Reg,
    /// Global address of the chunk in k-tile 0.
    addr0: Reg,
    /// Byte offset of the chunk in the operand's tile.
    smem: Reg,
}

/// Per-thread state for loading one operand's tiles.
pub struct OperandLoad {
    pub layout: Layout,
    chunks: Vec<Chunk>,
    vector: bool,
    /// Element size and elements per 16-byte chunk.
    eb: u32,
    per: u32,
    /// `k` per stage.
    bk: u32,
    /// Bytes between consecutive `k` in global memory.
    k_stride: i64,
    /// Global base of the input, the safe address of masked copies.
    base: Reg,
    /// Offset of this operand's tile within a stage.
    tile_off: u32,
    k_len: i64,
}

/// Where one operand's tile comes from.
pub struct Source<'a> {
    pub op: &'a Operand,
    /// Bytes per element (2 or 4).
    pub eb: u32,
    /// Global base address of the input buffer.
    pub base: Reg,
    /// Element offset of the CTA's batch (`konst + Σ batch coefs`), s64.
    pub batch_off: Reg,
    /// First row of the CTA tile (`m0` or `n0`), u32.
    pub row0: Reg,
    /// Rows of the matrix (M or N) and of the tile (BM or BN).
    pub rows: i64,
    pub tile_rows: u32,
    pub k_len: i64,
    pub tile_off: u32,
    /// Row-major tiles in 64-row atoms (`wgmma`) rather than whole rows.
    pub atoms: bool,
}

impl Source<'_> {
    /// The layout this operand is copied into: row-major where only the
    /// rows are contiguous and the elements are halves (`ldmatrix.trans`
    /// and `wgmma` transpose 16-bit elements only), k-major otherwise.
    pub fn layout(&self) -> Layout {
        let per = (16 / self.eb) as i64;
        let row_major = self.eb == 2
            && !self.op.vector_ok(self.k_len, per)
            && self.op.row_vector_ok(self.rows, per);
        match (row_major, self.atoms) {
            (false, _) => Layout::KMajor,
            (true, false) => Layout::RowMajor,
            (true, true) => Layout::MnAtoms,
        }
    }
}

impl OperandLoad {
    pub fn new(b: &mut Builder, src: &Source, tid: Reg, t: &Tile) -> OperandLoad {
        let eb = src.eb;
        let per = 16 / eb;
        let layout = src.layout();
        let vector = layout != Layout::KMajor || src.op.vector_ok(src.k_len, per as i64);
        let bk = t.bk(eb);
        let total = src.tile_rows * t.k_bytes / 16;
        debug_assert_eq!(total % t.threads(), 0, "tile chunks split over threads");
        let row_bytes = src.tile_rows * eb;
        let chunks = (0..total / t.threads())
            .map(|i| {
                let c = b.reg(RegKind::B32);
                ins!(b, "add.u32 {c}, {tid}, {}", i * t.threads());
                // (row within the tile, chunk index along the contiguous axis)
                let (major, minor) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                let (smem, k_in, first_row) = match layout {
                    Layout::KMajor => {
                        let chunks_per_row = t.k_bytes / 16;
                        if vector {
                            ins!(b, "div.u32 {major}, {c}, {chunks_per_row}");
                            ins!(b, "rem.u32 {minor}, {c}, {chunks_per_row}");
                        } else {
                            ins!(b, "rem.u32 {major}, {c}, {}", src.tile_rows);
                            ins!(b, "div.u32 {minor}, {c}, {}", src.tile_rows);
                        }
                        let sw = b.reg(RegKind::B32);
                        if t.k_bytes == 64 {
                            ins!(b, "bfe.u32 {sw}, {major}, 1, 2");
                        } else {
                            ins!(b, "and.b32 {sw}, {major}, 7");
                        }
                        let smem = swizzled(b, major, minor, sw, t.k_bytes);
                        let k_in = b.reg(RegKind::B32);
                        ins!(b, "mul.lo.u32 {k_in}, {minor}, {per}");
                        (smem, k_in, major)
                    }
                    Layout::RowMajor | Layout::MnAtoms => {
                        let chunks_per_row = row_bytes / 16;
                        ins!(b, "div.u32 {major}, {c}, {chunks_per_row}");
                        ins!(b, "rem.u32 {minor}, {c}, {chunks_per_row}");
                        let sw = b.reg(RegKind::B32);
                        ins!(b, "and.b32 {sw}, {major}, 7");
                        let smem = if layout == Layout::RowMajor {
                            swizzled(b, major, minor, sw, row_bytes)
                        } else {
                            let (atom, within) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                            ins!(b, "shr.u32 {atom}, {minor}, 3");
                            ins!(b, "and.b32 {within}, {minor}, 7");
                            let off = swizzled(b, major, within, sw, 128);
                            ins!(b, "mad.lo.u32 {off}, {atom}, {}, {off}", bk * 128);
                            off
                        };
                        let first = b.reg(RegKind::B32);
                        ins!(b, "mul.lo.u32 {first}, {minor}, {per}");
                        (smem, major, first)
                    }
                };
                let (g, row_ok) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
                ins!(b, "add.u32 {g}, {}, {first_row}", src.row0);
                ins!(b, "setp.lt.u32 {row_ok}, {g}, {}", src.rows);
                // Element offset of the chunk at k-tile 0, then its address.
                let (g64, k64, off, addr0) = (
                    b.reg(RegKind::B64),
                    b.reg(RegKind::B64),
                    b.reg(RegKind::B64),
                    b.reg(RegKind::B64),
                );
                ins!(b, "cvt.u64.u32 {g64}, {g}");
                ins!(b, "cvt.u64.u32 {k64}, {k_in}");
                ins!(
                    b,
                    "mad.lo.s64 {off}, {g64}, {}, {}",
                    src.op.row,
                    src.batch_off
                );
                ins!(b, "mad.lo.s64 {off}, {k64}, {}, {off}", src.op.k);
                ins!(b, "mad.lo.s64 {addr0}, {off}, {eb}, {}", src.base);
                Chunk {
                    row_ok,
                    k_in,
                    addr0,
                    smem,
                }
            })
            .collect();
        OperandLoad {
            layout,
            chunks,
            vector,
            eb,
            per,
            bk,
            k_stride: eb as i64 * src.op.k,
            base: src.base,
            tile_off: src.tile_off,
            k_len: src.k_len,
        }
    }

    /// Copies k-tile `kt` (u32 register) into the stage at shared address
    /// `stage`; `cp.async` copies join the current commit group.
    pub fn tile(&self, b: &mut Builder, stage: Reg, kt: Reg) {
        // `k` left from this tile's start (for the masks) and the global
        // offset of the tile.
        let (k0, left, kt64, step) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B64),
            b.reg(RegKind::B64),
        );
        ins!(b, "mul.lo.u32 {k0}, {kt}, {}", self.bk);
        ins!(b, "sub.s32 {left}, {}, {k0}", self.k_len);
        ins!(b, "cvt.u64.u32 {kt64}, {kt}");
        ins!(
            b,
            "mul.lo.s64 {step}, {kt64}, {}",
            self.k_stride * self.bk as i64
        );
        for c in &self.chunks {
            let (addr, dst) = (b.reg(RegKind::B64), b.reg(RegKind::B32));
            ins!(b, "add.s64 {addr}, {}, {step}", c.addr0);
            ins!(b, "add.u32 {dst}, {stage}, {}", c.smem);
            ins!(b, "add.u32 {dst}, {dst}, {}", self.tile_off);
            if self.vector {
                let (ok, size) = (b.reg(RegKind::Pred), b.reg(RegKind::B32));
                ins!(b, "setp.lt.and.s32 {ok}, {}, {left}, {}", c.k_in, c.row_ok);
                ins!(b, "selp.b64 {addr}, {addr}, {}, {ok}", self.base);
                ins!(b, "selp.u32 {size}, 16, 0, {ok}");
                ins!(b, "cp.async.cg.shared.global [{dst}], [{addr}], 16, {size}");
                continue;
            }
            let (kind, bits) = if self.eb == 2 {
                (RegKind::B16, 16)
            } else {
                (RegKind::B32, 32)
            };
            for e in 0..self.per {
                let (ke, oke, h) = (b.reg(RegKind::B32), b.reg(RegKind::Pred), b.reg(kind));
                ins!(b, "add.u32 {ke}, {}, {e}", c.k_in);
                ins!(b, "setp.lt.and.s32 {oke}, {ke}, {left}, {}", c.row_ok);
                ins!(b, "mov.b{bits} {h}, 0");
                ins!(
                    b,
                    // `+-6`, not `-6`: older PTX parsers (the CUDA 13.0
                    // driver's JIT) reject a bare minus in an address.
                    "@{oke} ld.global.u{bits} {h}, [{addr}+{}]",
                    e as i64 * self.k_stride
                );
                ins!(b, "st.shared.u{bits} [{dst}+{}], {h}", self.eb * e);
            }
        }
    }
}

/// `row * row_bytes + ((chunk ^ sw) << 4)`.
fn swizzled(b: &mut Builder, row: Reg, chunk: Reg, sw: Reg, row_bytes: u32) -> Reg {
    let (x, off) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "xor.b32 {x}, {chunk}, {sw}");
    ins!(b, "shl.b32 {x}, {x}, 4");
    ins!(b, "mad.lo.u32 {off}, {row}, {row_bytes}, {x}");
    off
}
