//! Global to shared memory: one operand's tile of a pipeline stage.
//!
//! Shared layout (both operands): the tile is `rows x BK` halves stored
//! k-contiguous, 64 bytes per row, in 16-byte chunks of 8 halves. Chunk
//! `c` of row `r` lives at `r * 64 + ((c ^ ((r >> 1) & 3)) << 4)`: the XOR
//! swizzle spreads the 8 rows an `ldmatrix` reads at one chunk over all 32
//! banks (two rows share a 128-byte line; the XOR permutes the 4 chunks of
//! each pair of lines), and keeps a warp's 16-byte stores conflict-free.
//!
//! A thread owns `rows * BK / 8 / threads` chunks. With a unit k stride
//! and aligned strides ([`Operand::vector_ok`]) each chunk is one 16-byte
//! `cp.async.cg` with zero fill outside the matrix (neighbouring threads
//! take neighbouring chunks of a row: coalesced). Otherwise each chunk is
//! eight predicated 2-byte loads and shared stores, neighbouring threads
//! taking neighbouring rows (coalesced when the row stride is 1, e.g. B
//! stored `[k, n]`).

use super::config::{Tile, BK};
use super::shape::Operand;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};

/// One chunk a thread copies every stage.
struct Chunk {
    /// Whether the chunk's row lies inside the matrix.
    row_ok: Reg,
    /// First `k` of the chunk within the stage (`0, 8, 16, 24`).
    k8: Reg,
    /// Global address of the row at `k = 0` (clamped into the matrix).
    row_addr: Reg,
    /// Byte offset of the chunk in the operand's tile.
    smem: Reg,
}

/// Per-thread state for loading one operand's tiles.
pub struct OperandLoad {
    chunks: Vec<Chunk>,
    vector: bool,
    /// Bytes between consecutive `k`.
    k_bytes: i64,
    /// Global base of the input, the safe address of masked copies.
    base: Reg,
    /// Offset of this operand's tile within a stage.
    tile_off: u32,
    k_len: i64,
}

/// Where one operand's tile comes from.
pub struct Source<'a> {
    pub op: &'a Operand,
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
}

impl OperandLoad {
    pub fn new(b: &mut Builder, src: &Source, tid: Reg, t: &Tile) -> OperandLoad {
        let vector = src.op.vector_ok(src.k_len);
        let per = src.tile_rows * BK / 8 / t.threads();
        let chunks = (0..per)
            .map(|i| {
                let c = b.reg(RegKind::B32);
                ins!(b, "add.u32 {c}, {tid}, {}", i * t.threads());
                let (row, kc) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                if vector {
                    ins!(b, "shr.u32 {row}, {c}, 2");
                    ins!(b, "and.b32 {kc}, {c}, 3");
                } else {
                    ins!(b, "rem.u32 {row}, {c}, {}", src.tile_rows);
                    ins!(b, "div.u32 {kc}, {c}, {}", src.tile_rows);
                }
                let k8 = b.reg(RegKind::B32);
                ins!(b, "shl.b32 {k8}, {kc}, 3");
                // Swizzled chunk offset in the tile.
                let (sw, smem) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                ins!(b, "shr.u32 {sw}, {row}, 1");
                ins!(b, "and.b32 {sw}, {sw}, 3");
                ins!(b, "xor.b32 {sw}, {sw}, {kc}");
                ins!(b, "shl.b32 {sw}, {sw}, 4");
                ins!(b, "mad.lo.u32 {smem}, {row}, 64, {sw}");
                // Global row, clamped so that masked rows keep a valid address.
                let (g, row_ok) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
                ins!(b, "add.u32 {g}, {}, {row}", src.row0);
                ins!(b, "setp.lt.u32 {row_ok}, {g}, {}", src.rows);
                ins!(b, "min.u32 {g}, {g}, {}", src.rows - 1);
                let (g64, off, row_addr) = (
                    b.reg(RegKind::B64),
                    b.reg(RegKind::B64),
                    b.reg(RegKind::B64),
                );
                ins!(b, "cvt.s64.s32 {g64}, {g}");
                ins!(
                    b,
                    "mad.lo.s64 {off}, {g64}, {}, {}",
                    src.op.row,
                    src.batch_off
                );
                ins!(b, "mad.lo.s64 {row_addr}, {off}, 2, {}", src.base);
                Chunk {
                    row_ok,
                    k8,
                    row_addr,
                    smem,
                }
            })
            .collect();
        OperandLoad {
            chunks,
            vector,
            k_bytes: 2 * src.op.k,
            base: src.base,
            tile_off: src.tile_off,
            k_len: src.k_len,
        }
    }

    /// Copies k-tile `kt` (u32 register) into the stage at shared address
    /// `stage`; `cp.async` copies join the current commit group.
    pub fn tile(&self, b: &mut Builder, stage: Reg, kt: Reg) {
        let k0 = b.reg(RegKind::B32);
        ins!(b, "mul.lo.u32 {k0}, {kt}, {BK}");
        for c in &self.chunks {
            let (k, ok) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
            ins!(b, "add.u32 {k}, {k0}, {}", c.k8);
            let (k64, addr, dst) = (
                b.reg(RegKind::B64),
                b.reg(RegKind::B64),
                b.reg(RegKind::B32),
            );
            ins!(b, "cvt.s64.s32 {k64}, {k}");
            ins!(
                b,
                "mad.lo.s64 {addr}, {k64}, {}, {}",
                self.k_bytes,
                c.row_addr
            );
            ins!(b, "add.u32 {dst}, {stage}, {}", c.smem);
            ins!(b, "add.u32 {dst}, {dst}, {}", self.tile_off);
            if self.vector {
                ins!(b, "setp.lt.and.u32 {ok}, {k}, {}, {}", self.k_len, c.row_ok);
                let size = b.reg(RegKind::B32);
                ins!(b, "selp.b64 {addr}, {addr}, {}, {ok}", self.base);
                ins!(b, "selp.u32 {size}, 16, 0, {ok}");
                ins!(b, "cp.async.cg.shared.global [{dst}], [{addr}], 16, {size}");
                continue;
            }
            for e in 0..8 {
                let (ke, oke, h) = (
                    b.reg(RegKind::B32),
                    b.reg(RegKind::Pred),
                    b.reg(RegKind::B16),
                );
                ins!(b, "add.u32 {ke}, {k}, {e}");
                ins!(
                    b,
                    "setp.lt.and.u32 {oke}, {ke}, {}, {}",
                    self.k_len,
                    c.row_ok
                );
                ins!(b, "mov.b16 {h}, 0");
                ins!(
                    b,
                    // `+-6`, not `-6`: older PTX parsers (the CUDA 13.0
                    // driver's JIT) reject a bare minus in an address.
                    "@{oke} ld.global.u16 {h}, [{addr}+{}]",
                    e * self.k_bytes
                );
                ins!(b, "st.shared.u16 [{dst}+{}], {h}", 2 * e);
            }
        }
    }
}
