//! Tile configurations of the tensor-core matmul and the heuristic that
//! picks one per shape. The runtime's autotuner times [`candidates`] per
//! kernel and target and passes its pick to [`super::emit_with`];
//! [`choose`] is the untimed default.

use super::shape::{Elem, Operand, Shape};
use crate::ptx::Target;

/// Bytes of `k` one MMA step consumes per row: `k16` of halves, `k8` of
/// TF32, `k32` of FP8 (`wgmma` only). Fragment addressing is the same for
/// all (see `mma.rs`).
pub const KSTEP_BYTES: u32 = 32;

/// One CTA's tile and pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Warps along M.
    pub warps_m: u32,
    /// Warps along N.
    pub warps_n: u32,
    /// Rows (M) and columns (N) of C one warp computes: multiples of 16
    /// and 16 (pairs of `n8` MMA tiles).
    pub warp_m: u32,
    /// Columns (N) of C one warp computes.
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
    /// How a warpgroup tile's CTA divides the work ([`Schedule::Plain`]
    /// for `mma.sync` tiles).
    pub schedule: Schedule,
}

/// Who copies and who multiplies in a warpgroup tile's CTA (issue 15).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// Every warpgroup multiplies; the copies start between the MMAs
    /// (`wgmma.rs`).
    Plain,
    /// An extra producer warpgroup copies through the copy engine while
    /// the tile's warpgroups multiply (`specialized.rs`, name suffix
    /// `ws`); where the engine does not apply or `k` is split, as
    /// [`Schedule::Plain`].
    Specialized,
    /// [`Schedule::Specialized`] on a persistent grid of at most a wave,
    /// each CTA looping over output tiles (name suffix `wsp`).
    Persistent,
}

impl Tile {
    /// Rows (M) of C one CTA computes.
    pub fn bm(&self) -> u32 {
        self.warps_m * self.warp_m
    }
    /// Columns (N) of C one CTA computes.
    pub fn bn(&self) -> u32 {
        self.warps_n * self.warp_n
    }
    /// Threads per CTA.
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
    /// Whether two CTAs of the tile fit one SM's shared memory (228 KiB,
    /// 1 KiB of it reserved per CTA, a few bytes of barriers): the
    /// buffers or the epilogue's staged tile, whichever is larger.
    pub fn two_per_sm(&self) -> bool {
        let staged = super::epilogue::staging_bytes(self.bm(), self.bn());
        2 * (self.shared_bytes().max(staged) + 2048) <= crate::ptx::target::SHARED_PER_SM_90
    }
    /// A short stable name (`128x256k64w64x64s4g8`, `ws` appended for a
    /// [`Schedule::Specialized`] one, `wsp` for [`Schedule::Persistent`]):
    /// the autotuner's on-disk cache stores it.
    pub fn name(&self) -> String {
        format!(
            "{}{}x{}k{}w{}x{}s{}g{}{}",
            if self.wgmma { "wg" } else { "" },
            self.bm(),
            self.bn(),
            self.k_bytes,
            self.warp_m,
            self.warp_n,
            self.stages,
            self.group_m,
            match self.schedule {
                Schedule::Plain => "",
                Schedule::Specialized => "ws",
                Schedule::Persistent => "wsp",
            }
        )
    }

    /// This tile with schedule `schedule`.
    pub fn with(self, schedule: Schedule) -> Tile {
        Tile { schedule, ..self }
    }
}

/// Shared memory one CTA may use on sm_80 and sm_90 (227 KiB; the
/// launcher raises the default 48 KiB limit).
pub const MAX_SHARED: u32 = 227 * 1024;

/// The `mma.sync` configurations worth timing, as `(warps_m, warps_n,
/// warp_m, warp_n, k_bytes, stages)`: the eight that were fastest for some
/// shape among 26 timed on an H100 (f16/bf16/TF32, k-major and row-major B,
/// 4096^3 and 8192^3; BENCHMARKS.md), the best default first. 64x64 warp
/// tiles keep 64-byte stages: their 128 accumulators leave no registers
/// for a deeper stage's fragment addresses (TF32 spills).
const MMA_SYNC: [(u32, u32, u32, u32, u32, u32); 8] = [
    (2, 2, 64, 64, 64, 4),
    (2, 2, 64, 64, 64, 3),
    (2, 4, 64, 64, 64, 4),
    (4, 2, 64, 64, 64, 4),
    (2, 2, 64, 32, 128, 4),
    (1, 4, 64, 32, 128, 3),
    (1, 2, 64, 32, 128, 3),
    (2, 2, 32, 32, 128, 3),
];

/// The `mma.sync` configurations ([`MMA_SYNC`]). Any is correct for any
/// shape the tensor-core emitter takes.
pub fn candidates() -> Vec<Tile> {
    MMA_SYNC
        .iter()
        .map(
            |&(warps_m, warps_n, warp_m, warp_n, k_bytes, stages)| Tile {
                warps_m,
                warps_n,
                warp_m,
                warp_n,
                k_bytes,
                stages,
                group_m: 8,
                wgmma: false,
                schedule: Schedule::Plain,
            },
        )
        .inspect(|t| debug_assert!(t.shared_bytes() <= MAX_SHARED, "{t:?}"))
        .collect()
}

/// The warpgroup (`wgmma`) configurations worth timing on sm_90, as
/// `(warpgroups, n, stages)`: `m64 x n` per warpgroup, 128-byte rows; the
/// seven fastest of 11 timed on an H100, then 128x64 and 64x64 (issue 15:
/// enough CTAs to fill 132 SMs at 1024^2 outputs; not yet timed).
const WGMMA: [(u32, u32, u32); 9] = [
    (2, 256, 4),
    (2, 256, 3),
    (2, 128, 3),
    (2, 128, 4),
    (1, 256, 4),
    (1, 128, 3),
    (1, 128, 4),
    (2, 64, 4),
    (1, 64, 4),
];

/// The warpgroup configurations ([`WGMMA`]).
pub fn wgmma_candidates() -> Vec<Tile> {
    WGMMA
        .iter()
        .map(|&(wgs, n, stages)| Tile {
            warps_m: 4 * wgs,
            warps_n: 1,
            warp_m: 16,
            warp_n: n,
            k_bytes: 128,
            stages,
            group_m: 8,
            wgmma: true,
            schedule: Schedule::Plain,
        })
        .inspect(|t| debug_assert!(t.shared_bytes() <= MAX_SHARED, "{t:?}"))
        .collect()
}

/// The untimed default tile: the first of a preference list that gives
/// the GPU enough CTAs (the last when none does): big tiles reuse more,
/// small ones fill small problems. Where warpgroup MMAs apply (sm_90,
/// halves and TF32): two warpgroups of 128x256 4 stages deep, 128x128 3
/// deep, one of 64x128 4 deep, two of 128x64, then one of 64x64, the
/// first with at least 7/8 of a CTA per SM ([`fills_wave`]: 2048^2
/// outputs take 128x256 as 128 CTAs, 0.97 waves, rather than 1.94 waves
/// of 128x128; 1024^2 take 64x128, which with the copy engine beat
/// 128x64 by 4% at 1024^3 and 8% at 1024x1024x4096 in f16, H100
/// 2026-11-28); else `mma.sync` 128x128 of four 64x64 warps, then 128x64,
/// 64x128, 64x64, the first with a CTA per SM (the fastest measured at
/// each size on an H100, BENCHMARKS.md). Where the warpgroup pick is one
/// warpgroup of 64x128 and `k` is long (`split::LONG_SPLIT_K`), two warpgroups of
/// 128x128 4 deep instead, when twice their CTAs fill the wave: the split
/// rule then halves `k` for them, and the larger tile reads a third less
/// per product (1024x1024x4096 f16: 78 -> 83% of cuBLAS for `B^T`, with
/// bias and gelu 97 -> 103% of cuBLAS and a separate kernel, against
/// 64x128 split in two; H200 2026-11-28, BENCHMARKS.md). `SMELT_MATMUL_TILE` names the
/// tile instead where that tile applies to `s` ([`forced`]).
///
/// FP8 has only warpgroup tiles; where they do not apply ([`applies`]
/// false) the `mma.sync` pick returned here only sizes split-K scratch.
pub fn choose(s: &Shape, batches: i64, target: &Target) -> Tile {
    if let Some(t) = forced(s, target) {
        return t;
    }
    if wgmma_applies(s, target) {
        let wg = wgmma_candidates();
        let prefs: Vec<Tile> = [0, 2, 6, 7, 8]
            .iter()
            .map(|i| wg[*i])
            .filter(|t| wgmma_fits(s, t))
            .collect();
        if let Some(t) = prefs
            .iter()
            .find(|t| fills_wave(ctas(s, batches, t), target.num_sms))
        {
            let pair = wg[3];
            let long = s.k >= super::split::LONG_SPLIT_K
                && *t == wg[6]
                && wgmma_fits(s, &pair)
                && fills_wave(2 * ctas(s, batches, &pair), target.num_sms);
            return if long { pair } else { *t };
        }
        if let Some(t) = prefs.last() {
            return *t;
        }
    }
    let all = candidates();
    let prefs: Vec<Tile> = [0, 4, 5, 6, 7].iter().map(|i| all[*i]).collect();
    prefs
        .iter()
        .copied()
        .find(|t| ctas(s, batches, t) >= target.num_sms as u64)
        .unwrap_or(prefs[prefs.len() - 1])
}

/// CTAs of tile `t` over `s` (`batches` of them).
pub fn ctas(s: &Shape, batches: i64, t: &Tile) -> u64 {
    (s.m as u64).div_ceil(t.bm() as u64)
        * (s.n as u64).div_ceil(t.bn() as u64)
        * batches.max(0) as u64
}

/// Whether `ctas` CTAs make at least 7/8 of a wave of one CTA per SM on
/// `num_sms` SMs:
/// then a tile's last wave idles at most an eighth of the GPU.
pub fn fills_wave(ctas: u64, num_sms: u32) -> bool {
    8 * ctas >= 7 * u64::from(num_sms)
}

/// Every tensor-core tile's name (the values `SMELT_MATMUL_TILE`
/// accepts): [`candidates`], then [`wgmma_candidates`], then those
/// [`Schedule::Specialized`] and [`Schedule::Persistent`].
pub fn tile_names() -> Vec<String> {
    let wg = wgmma_candidates();
    candidates()
        .iter()
        .chain(&wg)
        .copied()
        .chain(specialized(&wg))
        .map(|t| t.name())
        .collect()
}

/// The [`Schedule::Specialized`], then the [`Schedule::Persistent`],
/// tiles of the warpgroup tiles among `tiles`.
fn specialized(tiles: &[Tile]) -> Vec<Tile> {
    [Schedule::Specialized, Schedule::Persistent]
        .iter()
        .flat_map(|sc| tiles.iter().filter(|t| t.wgmma).map(|t| t.with(*sc)))
        .collect()
}

/// The tiles a name may pick for `s` on `target` ([`tiles`], then their
/// warpgroup tiles specialised and persistent): what `SMELT_MATMUL_TILE`
/// and the autotuner's names choose from.
pub fn named(s: &Shape, target: &Target) -> Vec<Tile> {
    let mut all = tiles(s, target);
    all.extend(specialized(&all));
    all
}

/// The tile `SMELT_MATMUL_TILE` names, if it applies to `s` on `target`
/// (a warpgroup tile only where [`wgmma_applies`] and [`wgmma_fits`]);
/// `None` leaves `s` to the heuristic.
pub fn forced(s: &Shape, target: &Target) -> Option<Tile> {
    let name = crate::env::var("SMELT_MATMUL_TILE", crate::env::parse_matmul_tile)?;
    named(s, target).into_iter().find(|t| t.name() == name)
}

/// `t` as it runs: a plain warpgroup tile of one warpgroup (64 rows) is
/// [`Schedule::Specialized`] by default, one of two warpgroups plain;
/// `SMELT_MATMUL_WS=1` specialises every warpgroup tile (and
/// `SMELT_MATMUL_PERSIST=1` too makes them [`Schedule::Persistent`]),
/// `SMELT_MATMUL_WS=0` none. Why (H200, 2026-11-29, `SMELT_TUNE=0`, two
/// rounds, cuBLAS in the same process; BENCHMARKS.md): 1024^3 f16, whose
/// default is one warpgroup of 64x128, went from 84% to 94-96% of cuBLAS
/// (`B^T`; row-major `B` 80% to 94-96%, with bias and gelu 99-100% to
/// 106-109% of cuBLAS and a separate kernel) with its own producer
/// warpgroup, where two-warpgroup tiles (2048^3-8192^3 and the transformer
/// shapes, 128x256) moved within the run's noise either way, and the
/// persistent grid gained nothing anywhere.
pub fn scheduled(t: &Tile) -> Tile {
    let flag = |name, default| crate::env::flag(name, default);
    let one_warpgroup = t.warps_m == 4;
    let specialise =
        flag("SMELT_MATMUL_WS", false) || (one_warpgroup && flag("SMELT_MATMUL_WS", true));
    if !t.wgmma || t.schedule != Schedule::Plain || !specialise {
        *t
    } else if flag("SMELT_MATMUL_PERSIST", false) {
        t.with(Schedule::Persistent)
    } else {
        t.with(Schedule::Specialized)
    }
}

/// The tensor-core tiles for `s` on `target`: `mma.sync` ones (not for
/// FP8: `mma.sync` has no FP8 before sm_89 and smelt targets sm_80), and
/// on sm_90 the warpgroup ones where they apply and fit.
pub fn tiles(s: &Shape, target: &Target) -> Vec<Tile> {
    let mut all = if s.elem.is_fp8() {
        Vec::new()
    } else {
        candidates()
    };
    if wgmma_applies(s, target) {
        all.extend(wgmma_candidates().into_iter().filter(|t| wgmma_fits(s, t)));
    }
    all
}

/// Whether warpgroup tile `t` keeps `s` within 255 registers: TF32
/// operands not copied 16 bytes at a time (`K % 4 != 0`, or strides
/// neither along `k` nor the rows) take element loads and masks per
/// element, which with the 128 accumulators of 256-wide tiles spill; so
/// do FP8 operands not copied 16 bytes along `k` (transposed in registers
/// or read by bytes).
pub fn wgmma_fits(s: &Shape, t: &Tile) -> bool {
    let vector = |op: &Operand, rows: i64| op.vector_ok(s.k, 4) || op.row_vector_ok(rows, 4);
    match s.elem {
        Elem::Tf32 => t.bn() <= 128 || (vector(&s.a, s.m) && vector(&s.b, s.n)),
        // Transposed in registers, 256-wide tiles reach 247-255 registers
        // (ptxas, 4096^3): too close to spilling with an epilogue; read by
        // bytes, one warpgroup's 64x128 (twice the chunks a thread of two
        // warpgroups copies) spilled 20-32 bytes at K = 7 and 40.
        Elem::Fp8 { .. } => {
            let bytes = |op: &Operand, rows| !op.vector_ok(s.k, 16) && !op.rows_only(s.k, rows, 16);
            let byte_loads = bytes(&s.a, s.m) || bytes(&s.b, s.n);
            (s.a.vector_ok(s.k, 16) && s.b.vector_ok(s.k, 16))
                || (t.bn() <= 128 && !(byte_loads && t.threads() == 128 && t.bn() > 64))
        }
        _ => true,
    }
}

/// Whether a tensor-core emitter takes `s` on `target` at all: FP8 only
/// through warpgroup MMAs ([`wgmma_applies`]); every other tensor-core
/// product has `mma.sync` tiles on sm_80 and later.
pub fn applies(s: &Shape, target: &Target) -> bool {
    !s.elem.is_fp8() || wgmma_applies(s, target)
}

/// Whether the Hopper emitter can take `s` on `target`: halves with each
/// operand contiguous along `k` or along its rows and aligned for 16-byte
/// copies, TF32 with any strides (its tiles are staged k-major through
/// registers, see `load.rs`), or FP8 with any strides (k-major tiles:
/// 16-byte copies where `k` is contiguous, element loads otherwise).
/// `SMELT_MATMUL_WGMMA=0` keeps every matmul on `mma.sync` (FP8 on the
/// generic reduce kernel), to compare the two on a Hopper GPU.
pub fn wgmma_applies(s: &Shape, target: &Target) -> bool {
    let ok = |op: &Operand, rows: i64| op.vector_ok(s.k, 8) || op.row_vector_ok(rows, 8);
    let takes = match s.elem {
        Elem::F16 | Elem::BF16 => ok(&s.a, s.m) && ok(&s.b, s.n),
        Elem::Tf32 | Elem::Fp8 { .. } => true,
        Elem::F32 => false,
    };
    target.sm >= 90 && takes && crate::env::flag("SMELT_MATMUL_WGMMA", true)
}
