//! The warp's share of one pipeline stage: `ldmatrix` fragments from the
//! swizzled shared tiles (layouts in `load.rs`) and the MMAs.
//!
//! Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 / k8"
//! and "ldmatrix"), with `g = lane >> 2`, `t = lane & 3`:
//! - `ldmatrix .x4` loads four 8x8 b16 matrices; lanes `8j..8j+7` give the
//!   row addresses of matrix `j`, and register `j` of lane `l` receives
//!   row `l >> 2`, columns `2 (l & 3) + {0, 1}` of matrix `j` (with
//!   `.trans`, of the transposed matrix).
//! - One MMA step consumes 32 bytes of `k` per row: `k16` of halves
//!   (`m16n8k16`) or `k8` of TF32 (`m16n8k8`). A 16-byte row piece is 8
//!   halves or 4 TF32 values, so the same addresses serve both: A (16 x
//!   step) is four matrices, rows 0-7 / 8-15 at the first 16 bytes, then
//!   at the second (`a0..a3`); B (step x 8, "col") is two matrices per n8
//!   tile (`b0`, `b1`), one `.x4` covering two n8 tiles.
//! - k-major tiles (rows of `m` or `n`, `k` contiguous): lane `l`
//!   addresses row `((l >> 3) & 1) * 8 + (l & 7)`, 16-byte chunk `l >> 4`
//!   for A; row `(l >> 4) * 8 + (l & 7)`, chunk `(l >> 3) & 1` for B.
//! - row-major tiles (rows of `k`, halves only): `ldmatrix.trans`; lane `l`
//!   addresses k-row `(l >> 4) * 8 + (l & 7)`, chunk `(l >> 3) & 1` (of 8
//!   `m`) for A; k-row `((l >> 3) & 1) * 8 + (l & 7)`, chunk `l >> 4` (of
//!   8 `n`) for B.
//! - C/D (16x8 f32): `c0, c1` = (row g, cols 2t, 2t + 1), `c2, c3` = row
//!   g + 8.

use super::config::{Tile, KSTEP_BYTES};
use super::load::Layout;
use super::shape::Elem;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::math;

/// The warp's f32 accumulators: `[mi][ni][c0..c3]`.
pub type Acc = Vec<Vec<[Reg; 4]>>;

/// Zeroed accumulators for a `warp_m x warp_n` warp tile.
pub fn zero_acc(b: &mut Builder, t: &Tile) -> Acc {
    (0..t.warp_m / 16)
        .map(|_| {
            (0..t.warp_n / 8)
                .map(|_| std::array::from_fn(|_| b.mov(RegKind::F32, "f32", "0f00000000")))
                .collect()
        })
        .collect()
}

/// `(row element at lane, which 8-row half, ...)`: the lane bits that pick
/// an `ldmatrix` address. `outer` selects the 8-row block of the operand's
/// rows (`m` or `n`), `inner` the 16-byte chunk or 8-row block of `k`.
struct LaneBits {
    lane7: Reg,
    bit3: Reg,
    bit4: Reg,
}

/// One operand's lane-dependent `ldmatrix` byte offsets within its tile.
enum Offsets {
    /// k-major: one register per MMA step; the x4 loads of one step are
    /// `16 * k_bytes` apart (16 rows; the swizzle repeats every 8 rows).
    KMajor { per_step: Vec<Reg>, rows16: u32 },
    /// row-major: one register per x4 load; steps are `16 * row_bytes`
    /// apart (16 k-rows; the swizzle depends on `k & 7` only).
    RowMajor { per_load: Vec<Reg>, step: u32 },
}

impl Offsets {
    /// Register and immediate offset of x4 load `i` of step `ks`.
    fn at(&self, ks: u32, i: u32) -> (Reg, u32) {
        match self {
            Offsets::KMajor { per_step, rows16 } => (per_step[ks as usize], i * rows16),
            Offsets::RowMajor { per_load, step } => (per_load[i as usize], ks * step),
        }
    }
}

/// Lane-dependent fragment addressing of both operands.
pub struct Frags {
    a: Offsets,
    b: Offsets,
    a_trans: bool,
    b_trans: bool,
    mi: u32,
    ni: u32,
    steps: u32,
    /// The target rounds to TF32 in one instruction (sm_90).
    tf32_native: bool,
}

impl Frags {
    pub fn new(
        b: &mut Builder,
        lane: Reg,
        (warp_m, warp_n): (Reg, Reg),
        t: &Tile,
        (la, lb): (Layout, Layout),
        tf32_native: bool,
    ) -> Frags {
        let lane7 = b.reg(RegKind::B32);
        ins!(b, "and.b32 {lane7}, {lane}, 7");
        let bit3 = b.reg(RegKind::B32);
        ins!(b, "bfe.u32 {bit3}, {lane}, 3, 1");
        let bit4 = b.reg(RegKind::B32);
        ins!(b, "shr.u32 {bit4}, {lane}, 4");
        let bits = LaneBits { lane7, bit3, bit4 };
        let steps = t.k_bytes / KSTEP_BYTES;
        let (mi, ni) = (t.warp_m / 16, t.warp_n / 16);
        // A: row block from bit 3 and k chunk from bit 4 (k-major), or the
        // reverse for the transposed load; B the other way round.
        let a = offsets(b, &bits, warp_m, t.warp_m, la, false, t, t.bm(), mi, steps);
        let bo = offsets(b, &bits, warp_n, t.warp_n, lb, true, t, t.bn(), ni, steps);
        Frags {
            a,
            b: bo,
            a_trans: la == Layout::RowMajor,
            b_trans: lb == Layout::RowMajor,
            mi,
            ni,
            steps,
            tf32_native,
        }
    }

    /// One stage: the fragments of both tiles (at shared addresses
    /// `a_tile`, `b_tile`) and the warp's MMAs, for each k step.
    pub fn stage(&self, b: &mut Builder, a_tile: Reg, b_tile: Reg, acc: &Acc, elem: Elem) {
        let op = mma_op(elem);
        let load = |b: &mut Builder, offs: &Offsets, tile: Reg, ks: u32, i: u32, trans: bool| {
            let (reg, imm) = offs.at(ks, i);
            let p = b.reg(RegKind::B32);
            ins!(b, "add.u32 {p}, {tile}, {reg}");
            let r = ldmatrix(b, p, imm, trans);
            if elem == Elem::Tf32 {
                // The tensor core would truncate; round as `RoundTf32` does.
                for x in &r {
                    math::round_tf32(b, *x, self.tf32_native);
                }
            }
            r
        };
        for ks in 0..self.steps {
            let af: Vec<[Reg; 4]> = (0..self.mi)
                .map(|i| load(b, &self.a, a_tile, ks, i, self.a_trans))
                .collect();
            let bf: Vec<[Reg; 4]> = (0..self.ni)
                .map(|i| load(b, &self.b, b_tile, ks, i, self.b_trans))
                .collect();
            for (mi, a) in af.iter().enumerate() {
                for ni in 0..2 * self.ni as usize {
                    mma(b, op, &acc[mi][ni], a, &bf[ni / 2][(ni % 2) * 2..][..2]);
                }
            }
        }
    }
}

/// Offsets of one operand: `warp` is the warp's index along the operand's
/// rows, `warp_rows` its rows, `tile_rows` the CTA tile's, `loads` the x4
/// loads per step. `is_b` swaps which lane bit picks the row block.
#[allow(clippy::too_many_arguments)]
fn offsets(
    b: &mut Builder,
    l: &LaneBits,
    warp: Reg,
    warp_rows: u32,
    layout: Layout,
    is_b: bool,
    t: &Tile,
    tile_rows: u32,
    loads: u32,
    steps: u32,
) -> Offsets {
    match layout {
        Layout::KMajor => {
            let (row_bit, chunk_bit) = if is_b {
                (l.bit4, l.bit3)
            } else {
                (l.bit3, l.bit4)
            };
            let row = b.reg(RegKind::B32);
            ins!(b, "mul.lo.u32 {row}, {warp}, {warp_rows}");
            ins!(b, "mad.lo.u32 {row}, {row_bit}, 8, {row}");
            ins!(b, "add.u32 {row}, {row}, {}", l.lane7);
            let sw = b.reg(RegKind::B32);
            if t.k_bytes == 64 {
                ins!(b, "bfe.u32 {sw}, {row}, 1, 2");
            } else {
                ins!(b, "and.b32 {sw}, {row}, 7");
            }
            let per_step = (0..steps)
                .map(|ks| {
                    let (c, off) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                    ins!(b, "add.u32 {c}, {chunk_bit}, {}", 2 * ks);
                    ins!(b, "xor.b32 {c}, {c}, {sw}");
                    ins!(b, "shl.b32 {c}, {c}, 4");
                    ins!(b, "mad.lo.u32 {off}, {row}, {}, {c}", t.k_bytes);
                    off
                })
                .collect();
            Offsets::KMajor {
                per_step,
                rows16: 16 * t.k_bytes,
            }
        }
        Layout::MnAtoms => unreachable!("64-row atoms are laid out for wgmma only"),
        Layout::RowMajor => {
            // k-row bit and chunk (8-row block) bit of the lane.
            let (k_bit, chunk_bit) = if is_b {
                (l.bit3, l.bit4)
            } else {
                (l.bit4, l.bit3)
            };
            let row_bytes = tile_rows * 2;
            let (krow, base) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
            ins!(b, "mad.lo.u32 {krow}, {k_bit}, 8, {}", l.lane7);
            ins!(b, "mul.lo.u32 {krow}, {krow}, {row_bytes}");
            ins!(b, "mul.lo.u32 {base}, {warp}, {}", warp_rows / 8);
            ins!(b, "add.u32 {base}, {base}, {chunk_bit}");
            let per_load = (0..loads)
                .map(|i| {
                    let (c, off) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                    ins!(b, "add.u32 {c}, {base}, {}", 2 * i);
                    ins!(b, "xor.b32 {c}, {c}, {}", l.lane7);
                    ins!(b, "shl.b32 {c}, {c}, 4");
                    ins!(b, "add.u32 {off}, {krow}, {c}");
                    off
                })
                .collect();
            Offsets::RowMajor {
                per_load,
                step: 16 * row_bytes,
            }
        }
    }
}

/// The `mma.sync` instruction for `elem` operands and `f32` accumulators.
pub fn mma_op(elem: Elem) -> &'static str {
    match elem {
        Elem::F16 => "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        Elem::BF16 => "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        Elem::Tf32 => "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
        Elem::F32 => unreachable!("exact f32 products do not use tensor cores"),
        Elem::Fp8 { .. } => unreachable!("FP8 products take warpgroup tiles only"),
    }
}

/// `d += a * b` for one `m16n8` tile: instruction `op` ([`mma_op`]), the
/// A fragment `a` (4 registers) and the B fragment `bb` (2).
pub fn mma(b: &mut Builder, op: &str, d: &[Reg; 4], a: &[Reg; 4], bb: &[Reg]) {
    ins!(
        b,
        "{op} {{{}, {}, {}, {}}}, {{{}, {}, {}, {}}}, {{{}, {}}}, {{{}, {}, {}, {}}}",
        d[0],
        d[1],
        d[2],
        d[3],
        a[0],
        a[1],
        a[2],
        a[3],
        bb[0],
        bb[1],
        d[0],
        d[1],
        d[2],
        d[3]
    );
}

/// `ldmatrix .x4` (`.trans` if `trans`) of the four 8x8 `b16` matrices
/// whose rows the lanes address at `base + off` (layouts in the module
/// docs).
pub fn ldmatrix(b: &mut Builder, base: Reg, off: u32, trans: bool) -> [Reg; 4] {
    let r: [Reg; 4] = std::array::from_fn(|_| b.reg(RegKind::B32));
    let trans = if trans { ".trans" } else { "" };
    ins!(
        b,
        "ldmatrix.sync.aligned.m8n8.x4{trans}.shared.b16 {{{}, {}, {}, {}}}, [{base}+{off}]",
        r[0],
        r[1],
        r[2],
        r[3]
    );
    r
}
