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
//! (k-major only) each chunk is predicated element loads and one 16-byte
//! shared store, neighbouring threads taking neighbouring chunks along `k`
//! when `k` is contiguous, else neighbouring rows (coalesced when the row
//! stride is 1: a row-major B or a transposed A is staged k-major so).
//!
//! FP8 operands are always k-major (FP8 `wgmma` has no transpose): 16-byte
//! copies where `k` is contiguous; operands contiguous along their rows
//! staged through registers and transposed there (`fp8_rows.rs`) where
//! the pipeline stages (neither operand needs byte loads); else byte
//! loads into 32-bit registers, packed four to a word by `prmt` before the
//! shared store.
//!
//! TF32 operands of `wgmma` ([`Source::round_tf32`]) are *staged through
//! registers*: the tensor core reads shared memory through descriptors and
//! would truncate f32 to TF32, so each chunk is loaded into registers
//! ([`OperandLoad::fetch`], a 16-byte load or element loads as above),
//! rounded with `cvt.rn.tf32.f32` as `RoundTf32` rounds, and stored
//! ([`OperandLoad::put`]). Rounding on the way costs no shared-memory
//! traffic, where rounding the tiles in place after `cp.async` would read
//! and write every stage once more next to the MMAs' own reads. The
//! registers live from one pipeline step to the next (see `pipeline.rs`),
//! so the loads' latency hides behind a step of MMAs.

use super::config::Tile;
use super::fp8_rows::RowBytes;
use super::shape::Operand;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::math;

/// How an operand's tile is laid out in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    KMajor,
    RowMajor,
    MnAtoms,
}

/// One chunk a thread copies every stage.
#[derive(Clone, Copy)]
struct Chunk {
    /// Whether the chunk's rows lie inside the matrix.
    row_ok: Reg,
    /// First `k` of the chunk within the stage (u32): `k_in + k_off`.
    k_in: Reg,
    k_off: u32,
    /// Global address of the chunk in k-tile 0: `addr0 + addr_off`.
    addr0: Reg,
    addr_off: i64,
    /// Byte offset of the chunk in the operand's tile: `smem + smem_off`.
    smem: Reg,
    smem_off: u32,
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
    /// Registers each chunk is staged in (`per` elements, or four `b32`
    /// for a 16-byte load) when staged; empty otherwise.
    staged: Vec<Vec<Reg>>,
    /// Whether staged elements are rounded to TF32.
    round_tf32: bool,
    /// A staged FP8 operand contiguous along its rows (no chunks then).
    rows: Option<RowBytes>,
}

/// Where one operand's tile comes from.
pub struct Source<'a> {
    pub op: &'a Operand,
    /// Bytes per element (1, 2 or 4).
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
    /// Stage tiles through registers (TF32 and FP8 for `wgmma`, see
    /// `pipeline.rs`) rather than `cp.async`.
    pub staged: bool,
    /// Round f32 elements to TF32 on their way to shared memory (staged:
    /// `wgmma` reads TF32 tiles as they are).
    pub round_tf32: bool,
}

impl Source<'_> {
    /// Whether this is an FP8 operand contiguous along its rows only,
    /// aligned for 16-byte loads along them: staged, it is transposed in
    /// registers (`fp8_rows.rs`); otherwise read by bytes.
    pub fn fp8_rows(&self) -> bool {
        self.eb == 1 && self.op.rows_only(self.k_len, self.rows, 16)
    }

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

impl Chunk {
    /// Whether the chunk lies inside the matrix, `left` `k` being left
    /// from the k-tile's start.
    fn in_k(&self, b: &mut Builder, left: Reg) -> Reg {
        let (k, ok) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
        ins!(b, "add.u32 {k}, {}, {}", self.k_in, self.k_off);
        ins!(b, "setp.lt.and.s32 {ok}, {k}, {left}, {}", self.row_ok);
        ok
    }

    /// Global address of the chunk in the k-tile `step` bytes on.
    fn address(&self, b: &mut Builder, step: Reg) -> Reg {
        let addr = b.reg(RegKind::B64);
        ins!(b, "add.s64 {addr}, {}, {step}", self.addr0);
        if self.addr_off != 0 {
            ins!(b, "add.s64 {addr}, {addr}, {}", self.addr_off);
        }
        addr
    }
}

impl OperandLoad {
    pub fn new(b: &mut Builder, src: &Source, tid: Reg, t: &Tile) -> OperandLoad {
        let eb = src.eb;
        let transposed = (src.staged && src.fp8_rows()).then(|| RowBytes::new(b, src, tid, t));
        let per = 16 / eb;
        let layout = src.layout();
        let vector = layout != Layout::KMajor || src.op.vector_ok(src.k_len, per as i64);
        // Threads walk the contiguous axis: `k` where it is (16-byte loads,
        // or element loads of a row whose chunks are unaligned), else rows.
        let along_k = vector || src.op.k == 1;
        let bk = t.bk(eb);
        let total = if transposed.is_some() {
            0
        } else {
            src.tile_rows * t.k_bytes / 16
        };
        debug_assert_eq!(total % t.threads(), 0, "tile chunks split over threads");
        let row_bytes = src.tile_rows * eb;
        // Chunk `i` of a k-major tile is chunk 0 moved by a constant
        // `(rows, chunks along k)`: it shares chunk 0's `k`, address and
        // (where the swizzle allows) shared offset registers, with
        // immediates, so only its row mask is its own. This keeps 128x256
        // TF32 tiles, whose staging registers come on top, below 255
        // registers.
        let (threads, rows) = (t.threads(), src.tile_rows);
        let chunks_per_row = t.k_bytes / 16;
        let shift = |i: u32| -> Option<(u32, u32)> {
            let c = i * threads;
            match (layout, along_k) {
                (Layout::KMajor, true) if threads % chunks_per_row == 0 => {
                    Some((c / chunks_per_row, 0))
                }
                (Layout::KMajor, false) if threads % rows == 0 || rows % threads == 0 => {
                    Some((c % rows, c / rows))
                }
                _ => None,
            }
        };
        let mut first: Option<(Chunk, [Reg; 3])> = None;
        let chunks = (0..total / t.threads())
            .map(|i| {
                let moved = shift(i).and_then(|(dr, dk)| {
                    let off = (dr as i64 * src.op.row)
                        .checked_add((dk * per) as i64 * src.op.k)?
                        .checked_mul(eb as i64)?;
                    Some((dr, dk, off))
                });
                if let (Some((dr, dk, addr_off)), Some((c0, [g0, major0, minor0]))) = (moved, first)
                {
                    let (g, row_ok) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
                    ins!(b, "add.u32 {g}, {g0}, {dr}");
                    ins!(b, "setp.lt.u32 {row_ok}, {g}, {}", src.rows);
                    // The swizzle repeats every 8 rows.
                    let (smem, smem_off) = if dk == 0 && dr % 8 == 0 {
                        (c0.smem, dr * t.k_bytes)
                    } else {
                        let (major, minor) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                        ins!(b, "add.u32 {major}, {major0}, {dr}");
                        ins!(b, "add.u32 {minor}, {minor0}, {dk}");
                        (kmajor_offset(b, major, minor, t.k_bytes), 0)
                    };
                    return Chunk {
                        row_ok,
                        k_off: dk * per,
                        addr_off,
                        smem,
                        smem_off,
                        ..c0
                    };
                }
                let c = b.reg(RegKind::B32);
                ins!(b, "add.u32 {c}, {tid}, {}", i * t.threads());
                // (row within the tile, chunk index along the contiguous axis)
                let (major, minor) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                let (smem, k_in, first_row) = match layout {
                    Layout::KMajor => {
                        if along_k {
                            ins!(b, "div.u32 {major}, {c}, {chunks_per_row}");
                            ins!(b, "rem.u32 {minor}, {c}, {chunks_per_row}");
                        } else {
                            ins!(b, "rem.u32 {major}, {c}, {}", src.tile_rows);
                            ins!(b, "div.u32 {minor}, {c}, {}", src.tile_rows);
                        }
                        let smem = kmajor_offset(b, major, minor, t.k_bytes);
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
                let chunk = Chunk {
                    row_ok,
                    k_in,
                    k_off: 0,
                    addr0,
                    addr_off: 0,
                    smem,
                    smem_off: 0,
                };
                first.get_or_insert((chunk, [g, major, minor]));
                chunk
            })
            .collect::<Vec<Chunk>>();
        let staged = if src.staged {
            // FP8 is staged only where every chunk is a 16-byte load.
            debug_assert!(layout == Layout::KMajor && (eb == 4 || vector || transposed.is_some()));
            let regs = |b: &mut Builder| (0..4).map(|_| b.reg(RegKind::B32)).collect();
            chunks.iter().map(|_| regs(b)).collect()
        } else {
            Vec::new()
        };
        OperandLoad {
            layout,
            chunks,
            vector,
            staged,
            round_tf32: src.round_tf32,
            rows: transposed,
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
    /// `stage`; `cp.async` copies join the current commit group. Not for
    /// operands staged through registers ([`Self::fetch`], [`Self::put`]).
    pub fn tile(&self, b: &mut Builder, stage: Reg, kt: Reg) {
        debug_assert!(self.staged.is_empty() && self.rows.is_none());
        let (left, step) = self.k_tile(b, kt);
        for c in &self.chunks {
            let addr = c.address(b, step);
            let dst = self.dst(b, c, stage);
            if self.vector {
                let (ok, size) = (c.in_k(b, left), b.reg(RegKind::B32));
                ins!(b, "selp.b64 {addr}, {addr}, {}, {ok}", self.base);
                ins!(b, "selp.u32 {size}, 16, 0, {ok}");
                ins!(b, "cp.async.cg.shared.global [{dst}], [{addr}], 16, {size}");
                continue;
            }
            // Bytes (FP8) load into 32-bit registers, packed by `store`.
            let kind = if self.eb == 2 {
                RegKind::B16
            } else {
                RegKind::B32
            };
            let regs: Vec<Reg> = (0..self.per).map(|_| b.reg(kind)).collect();
            self.elements(b, c, addr, left, &regs);
            store(b, dst, &regs);
        }
    }

    /// Loads k-tile `kt` into the staging registers (zero outside the
    /// matrix); [`Self::put`] stores them.
    pub fn fetch(&self, b: &mut Builder, kt: Reg) {
        let (left, step) = self.k_tile(b, kt);
        if let Some(rows) = &self.rows {
            return rows.fetch(b, left, step);
        }
        for (c, regs) in self.chunks.iter().zip(&self.staged) {
            let addr = c.address(b, step);
            if !self.vector {
                self.elements(b, c, addr, left, regs);
                continue;
            }
            let ok = c.in_k(b, left);
            for r in regs {
                ins!(b, "mov.b32 {r}, 0");
            }
            ins!(
                b,
                "@{ok} ld.global.cg.v4.b32 {{{}, {}, {}, {}}}, [{addr}]",
                regs[0],
                regs[1],
                regs[2],
                regs[3]
            );
        }
    }

    /// Stores the staging registers into the stage at shared address
    /// `stage`: TF32 rounded as `RoundTf32` rounds, FP8 rows transposed.
    pub fn put(&self, b: &mut Builder, stage: Reg) {
        if let Some(rows) = &self.rows {
            return rows.put(b, stage);
        }
        for (c, regs) in self.chunks.iter().zip(&self.staged) {
            if self.round_tf32 {
                // Staged tiles are `wgmma`'s: sm_90.
                for r in regs {
                    math::round_tf32(b, *r, true);
                }
            }
            let dst = self.dst(b, c, stage);
            store(b, dst, regs);
        }
    }

    /// `k` left from k-tile `kt`'s start (s32, for the masks) and the
    /// tile's global byte offset (s64).
    fn k_tile(&self, b: &mut Builder, kt: Reg) -> (Reg, Reg) {
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
        (left, step)
    }

    /// Shared address of chunk `c` in the stage at `stage`.
    fn dst(&self, b: &mut Builder, c: &Chunk, stage: Reg) -> Reg {
        let dst = b.reg(RegKind::B32);
        ins!(b, "add.u32 {dst}, {stage}, {}", c.smem);
        ins!(b, "add.u32 {dst}, {dst}, {}", self.tile_off + c.smem_off);
        dst
    }

    /// Predicated element loads of chunk `c` (global address `addr` in
    /// this k-tile, `left` `k` left) into `regs`, zero outside the matrix.
    fn elements(&self, b: &mut Builder, c: &Chunk, addr: Reg, left: Reg, regs: &[Reg]) {
        let bits = 8 * self.eb;
        // The registers `tile` gives: b16 for halves, else b32.
        let reg_bits = if self.eb == 2 { 16 } else { 32 };
        for (e, h) in regs.iter().enumerate() {
            let (ke, oke) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
            ins!(b, "add.u32 {ke}, {}, {}", c.k_in, c.k_off + e as u32);
            ins!(b, "setp.lt.and.s32 {oke}, {ke}, {left}, {}", c.row_ok);
            ins!(b, "mov.b{reg_bits} {h}, 0");
            ins!(
                b,
                // `+-6`, not `-6`: older PTX parsers (the CUDA 13.0
                // driver's JIT) reject a bare minus in an address.
                "@{oke} ld.global.u{bits} {h}, [{addr}+{}]",
                e as i64 * self.k_stride
            );
        }
    }
}

/// One 16-byte shared store at `dst` of a chunk's elements `regs` (four
/// `b32`, eight `b16` packed in pairs, or sixteen bytes each in the low
/// byte of a `b32`, packed in fours).
fn store(b: &mut Builder, dst: Reg, regs: &[Reg]) {
    let words: Vec<Reg> = match regs.len() {
        4 => regs.to_vec(),
        8 => regs
            .chunks(2)
            .map(|pair| {
                let w = b.reg(RegKind::B32);
                ins!(b, "mov.b32 {w}, {{{}, {}}}", pair[0], pair[1]);
                w
            })
            .collect(),
        _ => regs
            .chunks(4)
            .map(|q| {
                // Byte 0 of each, in order: (q0, q1) and (q2, q3) into the
                // low halves, then both halves into one word.
                let (lo, hi, w) = (
                    b.reg(RegKind::B32),
                    b.reg(RegKind::B32),
                    b.reg(RegKind::B32),
                );
                ins!(b, "prmt.b32 {lo}, {}, {}, 0x0040", q[0], q[1]);
                ins!(b, "prmt.b32 {hi}, {}, {}, 0x0040", q[2], q[3]);
                ins!(b, "prmt.b32 {w}, {lo}, {hi}, 0x5410");
                w
            })
            .collect(),
    };
    ins!(
        b,
        "st.shared.v4.b32 [{dst}], {{{}, {}, {}, {}}}",
        words[0],
        words[1],
        words[2],
        words[3]
    );
}

/// Byte offset of 16-byte chunk `chunk` of row `row` in a k-major tile of
/// `k_bytes` rows (swizzle in the module docs).
fn kmajor_offset(b: &mut Builder, row: Reg, chunk: Reg, k_bytes: u32) -> Reg {
    let sw = b.reg(RegKind::B32);
    if k_bytes == 64 {
        ins!(b, "bfe.u32 {sw}, {row}, 1, 2");
    } else {
        ins!(b, "and.b32 {sw}, {row}, 7");
    }
    swizzled(b, row, chunk, sw, k_bytes)
}

/// `row * row_bytes + ((chunk ^ sw) << 4)`.
fn swizzled(b: &mut Builder, row: Reg, chunk: Reg, sw: Reg, row_bytes: u32) -> Reg {
    let (x, off) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "xor.b32 {x}, {chunk}, {sw}");
    ins!(b, "shl.b32 {x}, {x}, 4");
    ins!(b, "mad.lo.u32 {off}, {row}, {row_bytes}, {x}");
    off
}
