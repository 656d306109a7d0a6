//! Tile configurations of the tensor-core matmul and the heuristic that
//! picks one per shape. The runtime's autotuner times [`candidates`] per
//! kernel and target and passes its pick to [`super::emit_with`];
//! [`choose`] is the untimed default.

use super::shape::Shape;
use super::wgmma;
use crate::ptx::Target;

/// Bytes of `k` one MMA step consumes per row: `k16` of halves, `k8` of
/// TF32. Fragment addressing is the same for both (see `mma.rs`).
pub const KSTEP_BYTES: u32 = 32;

/// One CTA's tile and pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Warps along M and N.
    pub warps_m: u32,
    pub warps_n: u32,
    /// Rows (M) and columns (N) of C one warp computes: multiples of 16
    /// and 16 (pairs of `n8` MMA tiles).
    pub warp_m: u32,
    pub warp_n: u32,
    /// Bytes of `k` per row of a stage: 64 or 128 (32 or 64 halves).
    pub k_bytes: u32,
    /// Shared-memory stages of the `cp.async` pipeline (2..=5).
    pub stages: u32,
    /// CTA tiles along M visited together (grouped order, for L2 reuse).
    pub group_m: u32,
    /// Hopper warpgroup MMAs (`wgmma.rs`): then each warpgroup's four
    /// warps are `warp_m = 16` rows of its `m64 x warp_n` product and
    /// `k_bytes` is 128 (the 128-byte swizzle).
    pub wgmma: bool,
}

impl Tile {
    pub fn bm(&self) -> u32 {
        self.warps_m * self.warp_m
    }
    pub fn bn(&self) -> u32 {
        self.warps_n * self.warp_n
    }
    pub fn threads(&self) -> u32 {
        32 * self.warps_m * self.warps_n
    }
    /// `k` per stage for elements of `eb` bytes.
    pub fn bk(&self, eb: u32) -> u32 {
        self.k_bytes / eb
    }
    /// Bytes of one stage (A then B tiles).
    pub fn stage_bytes(&self) -> u32 {
        (self.bm() + self.bn()) * self.k_bytes
    }
    /// Dynamic shared memory the kernel launches with.
    pub fn shared_bytes(&self) -> u32 {
        self.stages * self.stage_bytes()
    }
    /// A short stable name (`128x256k64w64x64s4g8`): the autotuner's
    /// on-disk cache stores it.
    pub fn name(&self) -> String {
        format!(
            "{}{}x{}k{}w{}x{}s{}g{}",
            if self.wgmma { "wg" } else { "" },
            self.bm(),
            self.bn(),
            self.k_bytes,
            self.warp_m,
            self.warp_n,
            self.stages,
            self.group_m
        )
    }
}

/// Shared memory one CTA may use on sm_80 and sm_90 (227 KiB; the
/// launcher raises the default 48 KiB limit).
const MAX_SHARED: u32 = 227 * 1024;

/// The configurations worth timing: CTA tiles from 64x64 to 256x128 with
/// 64x64, 64x32 and 32x32 warp tiles, 64- and 128-byte stages (64 only
/// for 64x64 warp tiles, whose 128 accumulators leave no registers for
/// the deeper stage's fragment addresses: TF32 spills), 3 or 4 stages
/// deep. Any is correct for any shape the tensor-core emitter takes.
pub fn candidates() -> Vec<Tile> {
    let mut out = Vec::new();
    // (warps_m, warps_n, warp_m, warp_n): the best measured default first,
    // then by CTA tile size.
    let shapes = [
        (2, 2, 64, 64),
        (2, 4, 64, 64),
        (4, 2, 64, 64),
        (2, 4, 64, 32),
        (2, 2, 64, 32),
        (1, 4, 64, 32),
        (1, 2, 64, 32),
        (2, 2, 32, 32),
    ];
    for (warps_m, warps_n, warp_m, warp_n) in shapes {
        let deep: &[u32] = if warp_n == 64 { &[64] } else { &[64, 128] };
        for &k_bytes in deep {
            for stages in [4, 3] {
                let t = Tile {
                    warps_m,
                    warps_n,
                    warp_m,
                    warp_n,
                    k_bytes,
                    stages,
                    group_m: 8,
                    wgmma: false,
                };
                debug_assert!(t.shared_bytes() <= MAX_SHARED, "{t:?}");
                out.push(t);
            }
        }
    }
    out
}

/// The warpgroup (`wgmma`) configurations worth timing on sm_90: one or
/// two warpgroups of `m64 x n` with n of 128 or 256, 3 to 5 stages of
/// 128-byte rows that fit the shared memory.
pub fn wgmma_candidates() -> Vec<Tile> {
    let mut out = Vec::new();
    for (wgs, n) in [(2, 256), (2, 128), (1, 256), (1, 128)] {
        for stages in [4, 3, 5] {
            let t = Tile {
                warps_m: 4 * wgs,
                warps_n: 1,
                warp_m: 16,
                warp_n: n,
                k_bytes: 128,
                stages,
                group_m: 8,
                wgmma: true,
            };
            if t.shared_bytes() <= MAX_SHARED {
                out.push(t);
            }
        }
    }
    out
}

/// The first candidate that still gives every SM a CTA (the smallest
/// when none does): big tiles reuse more, small ones fill small problems.
/// Where warpgroup MMAs apply (sm_90, halves), two warpgroups of 128x256
/// 4 stages deep, else 128x128: the fastest at 4096^3 and 8192^3 on an
/// H100; otherwise `mma.sync` tiles of four 64x64 warps, 64-byte stages 4
/// deep (BENCHMARKS.md).
pub fn choose(s: &Shape, batches: i64, target: &Target) -> Tile {
    let ctas = |t: &Tile| {
        (s.m as u64).div_ceil(t.bm() as u64) * (s.n as u64).div_ceil(t.bn() as u64) * batches as u64
    };
    let fills = |t: &Tile| ctas(t) >= target.num_sms as u64;
    if wgmma::applies(s, target) {
        let pick = wgmma_candidates()
            .into_iter()
            .filter(|t| t.warps_m == 8 && t.stages == if t.bn() == 256 { 4 } else { 3 })
            .find(fills);
        if let Some(t) = pick {
            return t;
        }
    }
    let all: Vec<Tile> = candidates()
        .into_iter()
        .filter(|t| t.k_bytes == 64 && t.stages == 4)
        .collect();
    all.iter()
        .copied()
        .find(fills)
        .unwrap_or(all[all.len() - 1])
}
