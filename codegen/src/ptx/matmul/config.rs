//! Tile configurations of the tensor-core matmul and the heuristic that
//! picks one per shape. An autotuner (which needs the GPU) would time the
//! candidates of [`candidates`] per (M, N, K, dtype) and pass its pick to
//! [`super::emit_with`]; [`choose`] is the untimed default.

use super::shape::Shape;
use crate::ptx::Target;

/// Rows and columns of C one warp computes: 4 x 4 `m16n8` MMA tiles.
pub const WARP_M: u32 = 64;
pub const WARP_N: u32 = 32;
/// Depth of one shared-memory stage (two `k16` MMA steps); a row of a
/// stage is 64 bytes of halves.
pub const BK: u32 = 32;

/// One CTA's tile and pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Warps along M and N: the CTA tile is `warps_m * 64 x warps_n * 32`.
    pub warps_m: u32,
    pub warps_n: u32,
    /// Shared-memory stages of the `cp.async` pipeline (2..=4).
    pub stages: u32,
    /// CTA tiles along M visited together (grouped order, for L2 reuse).
    pub group_m: u32,
}

impl Tile {
    pub fn bm(&self) -> u32 {
        self.warps_m * WARP_M
    }
    pub fn bn(&self) -> u32 {
        self.warps_n * WARP_N
    }
    pub fn threads(&self) -> u32 {
        32 * self.warps_m * self.warps_n
    }
    /// Bytes of one stage (A then B tiles, halves).
    pub fn stage_bytes(&self) -> u32 {
        (self.bm() + self.bn()) * BK * 2
    }
    /// Dynamic shared memory the kernel launches with.
    pub fn shared_bytes(&self) -> u32 {
        self.stages * self.stage_bytes()
    }
}

/// The configurations worth timing, largest first: 128x128 (8 warps),
/// 128x64 and 64x128 (4 warps), 64x64 (2 warps), all 4 stages deep.
pub fn candidates() -> Vec<Tile> {
    [(2, 4), (2, 2), (1, 4), (1, 2)]
        .into_iter()
        .map(|(warps_m, warps_n)| Tile {
            warps_m,
            warps_n,
            stages: 4,
            group_m: 8,
        })
        .collect()
}

/// The largest candidate that still gives every SM a CTA (the last one
/// when none does): big tiles reuse more, small ones fill small problems.
pub fn choose(s: &Shape, batches: i64, target: &Target) -> Tile {
    let ctas = |t: &Tile| {
        (s.m as u64).div_ceil(t.bm() as u64) * (s.n as u64).div_ceil(t.bn() as u64) * batches as u64
    };
    let all = candidates();
    all.iter()
        .copied()
        .find(|t| ctas(t) >= target.num_sms as u64)
        .unwrap_or(all[all.len() - 1])
}
