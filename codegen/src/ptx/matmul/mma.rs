//! The warp's share of one pipeline stage: `ldmatrix` fragments from the
//! swizzled shared tiles (layout in `load.rs`) and `m16n8k16` MMAs.
//!
//! Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16" and
//! "ldmatrix"), with `g = lane >> 2`, `t = lane & 3`:
//! - `ldmatrix .x4` loads four 8x8 b16 matrices; lanes `8j..8j+7` give the
//!   row addresses of matrix `j`, and register `j` of lane `l` receives
//!   row `l >> 2`, columns `2 (l & 3) + {0, 1}` of matrix `j`.
//! - A (16x16, row): `a0` = (row g, k 2t..2t+1), `a1` = (g + 8, 2t),
//!   `a2` = (g, 2t + 8), `a3` = (g + 8, 2t + 8). So the four matrices are
//!   rows 0-7 / 8-15 at k 0-7, then at k 8-15: lane `l` addresses row
//!   `((l >> 3) & 1) * 8 + (l & 7)`, k chunk `l >> 4`.
//! - B (16x8, col): `b0` = (k 2t..2t+1, col g), `b1` = (k 2t + 8, g). B is
//!   stored n-major (row = n, k contiguous), so an 8x8 matrix of rows n and
//!   columns k gives exactly `b0`/`b1`; one `.x4` covers two n8 tiles:
//!   lane `l` addresses row `(l >> 4) * 8 + (l & 7)`, k chunk `(l >> 3) & 1`,
//!   registers `b0, b1` of the first tile then of the second.
//! - C/D (16x8 f32): `c0, c1` = (row g, cols 2t, 2t + 1), `c2, c3` = row
//!   g + 8.

use super::config::{BK, WARP_M, WARP_N};
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::DType;

/// MMA tiles per warp along M (16 rows each) and N (8 columns each).
pub const MI: usize = (WARP_M / 16) as usize;
pub const NI: usize = (WARP_N / 8) as usize;
/// `k16` steps per stage.
const KSTEPS: usize = (BK / 16) as usize;

/// The warp's f32 accumulators: `[mi][ni][c0..c3]`.
pub type Acc = Vec<Vec<[Reg; 4]>>;

/// Zeroed accumulators.
pub fn zero_acc(b: &mut Builder) -> Acc {
    (0..MI)
        .map(|_| {
            (0..NI)
                .map(|_| std::array::from_fn(|_| b.mov(RegKind::F32, "f32", "0f00000000")))
                .collect()
        })
        .collect()
}

/// Lane-dependent byte offsets of the `ldmatrix` rows within the A and B
/// tiles, per k16 step (the tile's other fragments are constant offsets
/// away: 16 rows = 1024 bytes, which leaves the swizzle unchanged).
pub struct Frags {
    a: Vec<Reg>,
    b: Vec<Reg>,
}

impl Frags {
    pub fn new(b: &mut Builder, lane: Reg, warp_m: Reg, warp_n: Reg) -> Frags {
        let lane7 = b.reg(RegKind::B32);
        ins!(b, "and.b32 {lane7}, {lane}, 7");
        let bit3 = b.reg(RegKind::B32);
        ins!(b, "bfe.u32 {bit3}, {lane}, 3, 1");
        let bit4 = b.reg(RegKind::B32);
        ins!(b, "shr.u32 {bit4}, {lane}, 4");
        // A: row bit from bit 3 of the lane, k chunk from bit 4; B the reverse.
        let a = offsets(b, warp_m, WARP_M, bit3, bit4, lane7);
        let bo = offsets(b, warp_n, WARP_N, bit4, bit3, lane7);
        Frags { a, b: bo }
    }

    /// One stage: the fragments of both tiles (at shared addresses
    /// `a_tile`, `b_tile`) and the warp's MMAs, for each k16 step.
    pub fn stage(&self, b: &mut Builder, a_tile: Reg, b_tile: Reg, acc: &Acc, dt: DType) {
        let ty = if dt == DType::BF16 { "bf16" } else { "f16" };
        for ks in 0..KSTEPS {
            let (pa, pb) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
            ins!(b, "add.u32 {pa}, {a_tile}, {}", self.a[ks]);
            ins!(b, "add.u32 {pb}, {b_tile}, {}", self.b[ks]);
            let af: Vec<[Reg; 4]> = (0..MI).map(|mi| ldmatrix(b, pa, mi * 1024)).collect();
            let bf: Vec<[Reg; 4]> = (0..NI / 2).map(|nj| ldmatrix(b, pb, nj * 1024)).collect();
            for (mi, a) in af.iter().enumerate() {
                for ni in 0..NI {
                    let bb = &bf[ni / 2][(ni % 2) * 2..][..2];
                    let d = acc[mi][ni];
                    ins!(
                        b,
                        "mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32 {{{}, {}, {}, {}}}, {{{}, {}, {}, {}}}, {{{}, {}}}, {{{}, {}, {}, {}}}",
                        d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], bb[0], bb[1], d[0], d[1], d[2], d[3]
                    );
                }
            }
        }
    }
}

/// Per k16 step, the byte offset of lane's `ldmatrix` row: row
/// `warp * warp_rows + row_bit * 8 + (lane & 7)`, chunk `2 ks + chunk_bit`,
/// swizzled as the stores were.
fn offsets(
    b: &mut Builder,
    warp: Reg,
    warp_rows: u32,
    row_bit: Reg,
    chunk_bit: Reg,
    lane7: Reg,
) -> Vec<Reg> {
    let row = b.reg(RegKind::B32);
    ins!(b, "mul.lo.u32 {row}, {warp}, {warp_rows}");
    ins!(b, "mad.lo.u32 {row}, {row_bit}, 8, {row}");
    ins!(b, "add.u32 {row}, {row}, {lane7}");
    let sw = b.reg(RegKind::B32);
    ins!(b, "bfe.u32 {sw}, {row}, 1, 2");
    (0..KSTEPS)
        .map(|ks| {
            let (c, off) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
            ins!(b, "add.u32 {c}, {chunk_bit}, {}", 2 * ks);
            ins!(b, "xor.b32 {c}, {c}, {sw}");
            ins!(b, "shl.b32 {c}, {c}, 4");
            ins!(b, "mad.lo.u32 {off}, {row}, 64, {c}");
            off
        })
        .collect()
}

fn ldmatrix(b: &mut Builder, base: Reg, off: usize) -> [Reg; 4] {
    let r: [Reg; 4] = std::array::from_fn(|_| b.reg(RegKind::B32));
    ins!(
        b,
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{}, {}, {}, {}}}, [{base}+{off}]",
        r[0],
        r[1],
        r[2],
        r[3]
    );
    r
}
