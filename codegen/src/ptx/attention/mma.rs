//! The tensor-core attention kernel (FlashAttention-2's schedule on
//! `mma.sync.m16n8k16`, sm_80 and sm_90), for `q`, `k` and `v` of one half
//! type (`f16` or `bf16`) with `f32` accumulation.
//!
//! # Mapping
//! The CTA's shape is an [`AttentionTile`] (`SMELT_ATTENTION_TILE`)
//! resolved per kernel ([`Cta`]); the default is 4 warps of 16 rows and
//! key tiles of 64 (32 past head dim 128), double-buffered.
//! - One CTA of `warps` warps per (batch, tile of `bm = warps * 16 mt`
//!   query rows); warp `w` owns rows `16 mt w ..` of the tile, `mt` (1 or
//!   2) `m16` row blocks, and in row block `r` lane `l` (with `g = l >>
//!   2`, `t = l & 3`) rows `16r + g` and `16r + g + 8` of those. Two row
//!   blocks share every `k` and `v` fragment a warp loads, halving the
//!   shared-memory reads per MMA. Row blocks are taken in order, or
//!   under a causal mask optionally last first (the CTAs with the most
//!   key tiles in the first wave, so the last wave is short).
//! - The `q` tile (`bm x dp`, `dp` = `d` rounded up to 16, zeros past `d`)
//!   is evaluated once into shared memory; its A fragments are loaded
//!   once into registers with `ldmatrix` when `mt * dp <= 128`, else
//!   again per key tile (the registers go to the accumulators).
//! - Key tiles of `bn` keys: the `k` (`bn x dp`) and `v` (`bn x dvp`)
//!   tiles are evaluated into shared memory (zero rows past the last
//!   key, zero columns past `d` / `dv`), `stages` buffers deep (tile
//!   `t + stages - 1` is started before tile `t` is computed), then each
//!   warp computes its `16 mt x bn` scores `S = Q K^T` (A: `q` rows, B
//!   "col": `k` rows, both `ldmatrix` without transpose since `d` is
//!   contiguous in both tiles).
//! - The logit part runs per accumulator element at its `(i, j)` (scale,
//!   masks, casts, as the FMA kernel evaluates it), `-inf` past the last
//!   key; what it computes from the row alone (a causal mask's row index,
//!   a scale) once per row before the key loop, what it computes from
//!   the key alone once per key for all the lane's rows; online softmax
//!   per row on the accumulators (where the logit is the score times a
//!   positive per-row factor, a whole tile's maxima are taken on the raw
//!   scores and the factor rides in the exponential's FMA: `Scale`): the
//!   row maximum of
//!   the lane's elements, then across the 4 lanes of a quad (`shfl.bfly`
//!   1, 2), which hold the same two rows; `m' = m_new`, or 0 while the
//!   row is all `-inf` (so a masked tile adds nothing); `p = exp(l - m')`;
//!   the lane's partial row sums and the `O` accumulators are rescaled by
//!   `exp(m_old - m')`; the quads' sums are combined once at the end
//!   (`wgmma` tiles of value dim 64 sum the rows on the tensor cores
//!   instead: [`Geom::ones`]).
//! - Under a causal mask (`Attention::causal`, `j <= i + c`) the key loop
//!   ends after the CTA's last row's last visible key (`key_end`), and a
//!   tile that every row of the warp sees whole evaluates the logit part
//!   without the mask (`Unmasked`); only tiles crossing the diagonal
//!   evaluate it.
//! - `P` is rounded to the half type in registers and is directly the A
//!   operand of `O += P V`: the C fragments of n8 tiles `2c` and `2c + 1`
//!   (keys `16c .. 16c + 15`) are the A fragment of k-step `c` (see
//!   below). B is `v` (keys x `dv`, `dv` contiguous: row-major), read
//!   with `ldmatrix.trans`.
//! - At the end `O / l`, as `O` times the row's reciprocal of `l` (NaN
//!   for a row with no finite logit: `0 * inf`, as the unfused graph's
//!   `0 / 0` gives), goes through the epilogue part to the
//!   stores, for existing rows and columns only; under split-KV
//!   (`split.rs`) the CTA walks its split's keys only and stores `m`, `l`
//!   and `O` to the scratch buffer instead, for the combine entry.
//!
//! # Fragments (PTX ISA, "mma.m16n8k16"; `g = lane >> 2`, `t = lane & 3`)
//! - A (16 x 16, row): `a0` = (row g, cols 2t, 2t+1), `a1` = (row g+8,
//!   cols 2t, 2t+1), `a2` = (row g, cols 2t+8, 2t+9), `a3` = (row g+8,
//!   cols 2t+8, 2t+9); two halves per register, the lower column in the
//!   low half.
//! - B (16 x 8, col): `b0` = (rows 2t, 2t+1, col g), `b1` = (rows 2t+8,
//!   2t+9, col g).
//! - C (16 x 8, f32): `c0, c1` = (row g, cols 2t, 2t+1), `c2, c3` = (row
//!   g+8, cols 2t, 2t+1). So for scores `S` of keys `16c ..` (n8 tiles
//!   `2c`, `2c+1`): `a0 = (S[2c].c0, c1)`, `a1 = (S[2c].c2, c3)`, `a2 =
//!   (S[2c+1].c0, c1)`, `a3 = (S[2c+1].c2, c3)`: P's A fragment without
//!   moving data between lanes.
//! - `ldmatrix.x4`: lanes `8m .. 8m+7` address the 8 rows of matrix `m`;
//!   register `m` of lane `l` gets row `l >> 2`, cols `2(l & 3) + {0, 1}`
//!   of matrix `m` (of its transpose with `.trans`). For A (`q`) and the
//!   transposed B (`v`), lane `l` addresses row `((l >> 3) & 1) * 8 + (l &
//!   7)`, 16-byte chunk `l >> 4`: matrices (rows 0-7, cols 0-7), (rows
//!   8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15), which
//!   is `a0..a3`, and for `v` (rows = keys) `b0, b1` of n8 tile 0 then of
//!   n8 tile 1. For B from `k` (rows = keys, chunks along `d`), row `(l >>
//!   4) * 8 + (l & 7)`, chunk `(l >> 3) & 1`: `b0, b1` of keys 0-7, then
//!   of keys 8-15.
//!
//! # Pipeline
//! The copies of tiles `0 .. stages - 2` (tile 0 with the `q` tile's)
//! are committed as one `cp.async` group each before the loop; each
//! iteration commits one group (tile `t + stages - 1`'s copies, or none
//! past the keys: an empty group keeps the count), and ends with
//! `cp.async.wait_group stages - 2` (all groups done but the newest
//! `stages - 2`: tile `t + 1` has landed) and a barrier (every warp is
//! done with tile `t`, whose buffer the next iteration refills).
//!
//! # Shared memory
//! `q` (`bm` rows), then `stages` buffers of `k` and `v` (`bn` rows each)
//! tiles of halves, each row padded by 16 bytes: the row stride is then an
//! odd number of 16-byte units, so the 8 rows one `ldmatrix` matrix reads
//! hit distinct banks.
//!
//! # Numerics
//! The products are exact in `f32` (half operands); sums are in `f32`
//! in the tensor cores' order. `p` is rounded to the half type, as the
//! unfused graph rounds the softmax before its matmul (there after
//! normalizing). `exp(x - m)` is `ex2.approx.ftz(x log2 e - m log2 e)`,
//! one FMA (about 2^-17 relative; results below 2^-126 flush to 0, both
//! far below the half rounding of `p`). The logit part runs in `f32`
//! without half roundings (`Attention::f32_logits`).

mod staged;
mod tma;
mod wgmma;

use super::split::{self, Split};
use super::stage::{plain, Stager, Tile};
use super::{epilogue_part, key_end, logit, part, store, Coords, LogitInsts, LogitSplit};
use crate::attention::Attention;
use crate::env::AttentionTile;
use crate::ir::{Inst, Kernel};
use crate::ptx::builder::{f32_imm, ins, Builder, Reg, RegKind};
use crate::ptx::eval::{Cx, Vals};
use crate::ptx::matmul::{ldmatrix, mma, mma_op, Elem};
use crate::ptx::module::{entry_name, entry_with_maps, Launch, PtxKernel};
use crate::ptx::ops::{self, Value};
use crate::ptx::target::Target;
use crate::{BinaryOp, DType, ReduceOp};

/// The largest head dim (of `q`/`k`, and of `v`) this kernel takes: its
/// registers and shared memory are sized for up to 256 (the fusion
/// planner's default rule reads it too).
pub const MAX_DIM: usize = 256;

/// The half type of `q`, `k` and `v` when this kernel takes `k`: each of
/// the three parts is a cast of a value of one half type to `f32` (so
/// storing it as that half type is exact), and the head dims are at most
/// [`MAX_DIM`].
pub fn elem(k: &Kernel, a: &Attention) -> Option<DType> {
    let half = |v: usize| match k.insts[v].inst {
        Inst::Cast(x) => Some(k.insts[x].dtype),
        _ => None,
    };
    let h = half(a.q)?;
    let dims_fit = [a.vars.d, a.vars.e]
        .iter()
        .all(|v| k.ranges[*v] as usize <= MAX_DIM);
    let ok = matches!(h, DType::F16 | DType::BF16)
        && dims_fit
        && a.acc == DType::F32
        && half(a.k) == Some(h)
        && half(a.v) == Some(h);
    ok.then_some(h)
}

/// Shared memory one CTA may use on sm_80 and sm_90 (227 KiB; the
/// launcher raises the default 48 KiB limit).
const MAX_SHARED: u32 = 227 * 1024;

/// Whether `wgmma` kernels take their key tiles through the copy engine
/// (`SMELT_ATTENTION_TMA`, on by default) and whether their warpgroups
/// take turns at the MMAs (`SMELT_ATTENTION_PINGPONG`; `None`: as
/// [`Geom::pingpong`] says): see `mma/tma.rs`.
pub(super) fn env_tma() -> (bool, Option<bool>) {
    (
        crate::env::flag("SMELT_ATTENTION_TMA", true),
        crate::env::var("SMELT_ATTENTION_PINGPONG", crate::env::parse_flag),
    )
}

/// Whether `wgmma` kernels whose value dim fits one column block take
/// their row sums from the tensor cores (`SMELT_ATTENTION_SUMS`, on by
/// default): see [`Geom::ones`].
pub(super) fn env_sums() -> bool {
    crate::env::flag("SMELT_ATTENTION_SUMS", true)
}

/// Bytes of the block of ones that `O += P [V | 1]` reads as its last
/// column block ([`Geom::ones`]): one k-step's 16 rows of 128 bytes.
const ONES_BYTES: u32 = 16 * 128;

/// An [`AttentionTile`] resolved for one kernel's head dims.
#[derive(Clone, Copy)]
struct Cta {
    warps: u32,
    /// `m16` row blocks per warp: 2 for 32-row warps where both head dims
    /// are at most 128 (then the `O` accumulators are at most 128
    /// registers a lane), else 1.
    mt: u32,
    /// Keys per tile: the tile's, at most 128 for head dims up to 64, 64
    /// up to 128 and 32 above, halved for two row blocks (the score
    /// accumulators' registers).
    bn: u32,
    stages: u32,
    /// Row blocks last first (causal kernels only).
    reverse: bool,
    /// Warpgroup MMAs (`wgmma.rs`): the tile asks for them, the target
    /// is sm_90 and both head dims, rounded up to 64, are at most 128.
    wgmma: bool,
}

impl Cta {
    fn new(t: &AttentionTile, wide: u32, causal: bool, target: &Target) -> Cta {
        let wgmma = t.wgmma && target.sm >= 90 && wide.next_multiple_of(64) <= 128;
        if wgmma {
            // Score, `O` and packed `p` registers: `bn / 2 + 64 + bn / 4`
            // at most, 160 at key tiles of 128. The pipelined loop reads
            // two tiles while a third lands: always 3 buffers, so three
            // warpgroups past head dim 64 take key tiles of 64 (128 would
            // need 240 KiB of shared memory).
            let cap = if t.warps > 8 && wide > 64 { 64 } else { 128 };
            return Cta {
                warps: t.warps,
                mt: 1,
                bn: t.bn.min(cap),
                stages: 3,
                reverse: t.reverse && causal,
                wgmma,
            };
        }
        let mt = if t.rows == 32 && wide <= 128 { 2 } else { 1 };
        // Score plus `O` accumulators at most about 160 registers a lane
        // (`mt (bn + dvp) / 2`; more spilled in the key loop on sm_90).
        let cap = match (wide, mt) {
            (0..=64, 1) => 128,
            (0..=64, _) | (65..=128, 1) => 64,
            _ => 32,
        };
        Cta {
            warps: t.warps,
            mt,
            bn: t.bn.min(cap),
            stages: t.stages,
            reverse: t.reverse && causal,
            wgmma,
        }
    }

    /// Query rows per warp and per CTA.
    fn warp_rows(&self) -> u32 {
        16 * self.mt
    }
    fn bm(&self) -> u32 {
        self.warps * self.warp_rows()
    }
    fn threads(&self) -> u32 {
        32 * self.warps
    }
}

/// Sizes of one kernel.
#[derive(Clone, Copy)]
struct Geom {
    cta: Cta,
    lq: u32,
    lk: u32,
    d: u32,
    dv: u32,
    /// Head dims rounded up to 16 (an MMA's `k`, and pairs of n8 tiles).
    dp: u32,
    dvp: u32,
    /// Keys per tile (`cta.bn`).
    bn: u32,
    /// Query rows per CTA (`cta.bm()`).
    bm: u32,
    /// Bytes per shared row of the `q` and `k` tiles, of the `v` tile.
    qk_row: u32,
    v_row: u32,
    /// Byte offsets of the `k` and `v` tiles of buffer 0 (`q` is at 0;
    /// buffer `s` is `s * kv_bytes` after buffer 0) and the bytes of one
    /// buffer.
    k_off: u32,
    v_off: u32,
    kv_bytes: u32,
    /// Where the row sums come from the tensor cores, the byte offset of
    /// a block of ones after the buffers: `O += P V` then runs as `O' +=
    /// P [V | 1]`, one n8 tile wider, whose last 8 columns (read from
    /// the ones, [`wgmma::issue_pv`]) are each row's sum of the rounded
    /// `p`, rescaled with `O`. That takes the `add.f32` per score (64 of
    /// the 491 instructions a thread issues per 128-key tile at d = 64)
    /// off the softmax for 1/8 more `P V` tensor work, so only `wgmma`
    /// tiles whose value dim is one column block (`dvp` = 64) take it.
    ones: Option<u32>,
    /// Bytes of shared memory.
    shared: u32,
}

impl Geom {
    fn new(k: &Kernel, a: &Attention, t: &AttentionTile, target: &Target) -> Geom {
        let r = |v: usize| k.ranges[v] as u32;
        let (lq, lk, d, dv) = (r(a.vars.i), r(a.vars.j), r(a.vars.d), r(a.vars.e));
        let (dp, dvp) = (d.next_multiple_of(16), dv.next_multiple_of(16));
        let cta = Cta::new(t, dp.max(dvp), a.causal.is_some(), target);
        let (bn, bm) = (cta.bn, cta.bm());
        let (dp, dvp, qk_row, v_row) = if cta.wgmma {
            // Swizzled 128-byte rows of 64 halves (`Tile::swizzled`).
            (d.next_multiple_of(64), dv.next_multiple_of(64), 128, 128)
        } else {
            // 2-byte elements plus 16 bytes: an odd multiple of 16 bytes.
            (dp, dvp, 2 * dp + 16, 2 * dvp + 16)
        };
        // Swizzled tiles are `rows x 2 d` bytes, 1024-byte multiples.
        let (q_bytes, k_bytes, v_bytes) = if cta.wgmma {
            (bm * 2 * dp, bn * 2 * dp, bn * 2 * dvp)
        } else {
            (bm * qk_row, bn * qk_row, bn * v_row)
        };
        let k_off = q_bytes;
        let v_off = k_off + k_bytes;
        let kv_bytes = k_bytes + v_bytes;
        let buffers = k_off + cta.stages * kv_bytes;
        let ones = (cta.wgmma && dvp == 64 && env_sums()).then_some(buffers);
        Geom {
            cta,
            lq,
            lk,
            d,
            dv,
            dp,
            dvp,
            bn,
            bm,
            qk_row,
            v_row,
            k_off,
            v_off,
            kv_bytes,
            ones,
            shared: buffers + if ones.is_some() { ONES_BYTES } else { 0 },
        }
    }

    /// Whether the copy engine's warpgroups take turns at the MMAs by
    /// default: but for two warpgroups at value dim 64. H200, 2026-11-29,
    /// with the row sums on the tensor cores ([`Geom::ones`]): three
    /// warpgroups at d = 64 (`12x16x128w`) 441 TFLOP/s with turns, 434
    /// without (before the sums, 408-411 against 415-417); two at causal
    /// d = 64 (`8x16x64rw`) 340 without, 334 with; two at d = 128 gained
    /// 4-17% from them (2026-11-27).
    fn pingpong(&self) -> bool {
        !(self.cta.warps == 8 && self.dvp == 64)
    }

    /// The A fragments of the warp's `q` rows stay in registers (`mt *
    /// dp / 16` k-steps of 4 registers, at most 32).
    fn q_resident(&self) -> bool {
        self.cta.mt * self.dp <= 128
    }
}

/// Lowers the attention kernel `k` (parts `a`, operands of half type `h`
/// from [`elem`]) with CTA tile `tile`, its keys split as
/// [`split::plan`] says for `splits`.
///
/// # Errors
/// Too many CTAs for one grid.
pub fn emit(
    k: &Kernel,
    target: &Target,
    a: &Attention,
    h: DType,
    tile: &AttentionTile,
    splits: Option<usize>,
) -> Result<PtxKernel, String> {
    let g = Geom::new(k, a, tile, target);
    if g.shared > MAX_SHARED {
        return Err(format!(
            "attention kernel {}: tile {} needs {} bytes of shared memory",
            k.name,
            tile.name(),
            g.shared
        ));
    }
    let heads: u64 = a.vars.batch.clone().map(|v| k.ranges[v] as u64).product();
    let grid = u32::try_from(heads * u64::from(g.lq.div_ceil(g.bm)))
        .map_err(|_| format!("attention kernel {}: too many CTAs", k.name))?;
    let name = entry_name(k);
    let (copy, pingpong) = env_tma();
    let pingpong = pingpong.unwrap_or_else(|| g.pingpong());
    let tma = (g.cta.wgmma && copy && g.shared + tma::BARRIER_BYTES <= MAX_SHARED)
        .then(|| tma::plan(k, a, &g, (&name, pingpong)))
        .flatten();
    let shared = g.shared + if tma.is_some() { tma::BARRIER_BYTES } else { 0 };
    let sp = split::plan(k, a, target, (g.bm, g.bn, shared), splits);
    let threads = g.cta.threads();
    let (tma, maps) = tma.unzip();
    let maps = maps.unwrap_or_default();
    let (text, shared) = entry_with_maps(k, target, (&name, maps.len()), threads, |b, cx, smem| {
        Emitter {
            cx,
            a,
            g,
            h,
            sp,
            tma,
        }
        .body(b, smem);
        // The 128-byte swizzle repeats every 1024 bytes.
        (shared, if g.cta.wgmma { 1024 } else { 16 })
    });
    let launch = Launch {
        entry: name,
        grid: (grid.max(1), 1, 1),
        block: (threads, 1, 1),
        shared_bytes: shared,
    };
    let mut kernel = split::kernel(k, target, a, sp, text, launch)?;
    kernel.maps = maps;
    if g.cta.wgmma {
        // wgmma exists only on the architecture-specific target.
        kernel.ptx = kernel
            .ptx
            .replacen(".target sm_90\n", ".target sm_90a\n", 1);
    }
    Ok(kernel)
}

/// What one kernel's body needs.
struct Emitter<'a> {
    cx: &'a Cx<'a>,
    a: &'a Attention,
    g: Geom,
    /// The operands' half type.
    h: DType,
    /// The keys' split among CTAs.
    sp: Split,
    /// `wgmma` key tiles through the copy engine (`tma.rs`).
    tma: Option<tma::Tma>,
}

/// A warp's `m16n8` accumulators of one `m16` row block, `[n8
/// tile][c0..c3]`.
type Acc = Vec<[Reg; 4]>;

/// A key tile's logits: `x` times the lane row's factor (1, or the
/// logit's folded [`Scale`](super::Scale)).
struct Logits {
    x: Vec<Acc>,
    factors: Vec<Reg>,
}

/// What the logits of a key tile are evaluated from ([`Emitter::tile_logits`]).
struct LogitCx<'a> {
    coords: &'a Coords,
    split: &'a LogitSplit,
    /// The logit part's per-row values, per lane row.
    rows: &'a [Vals],
    ln: &'a Lane,
    /// Under a causal mask, the end of the tiles whole for the warp.
    visible: Option<Reg>,
    /// The logit's [`Scale`](super::Scale) factor per lane row (`f32`),
    /// and a warp-uniform predicate: every one is positive and finite.
    fold: Option<(Vec<Reg>, Reg)>,
}

/// Starts key tile `j` into the buffer at shared address `buf` where `j <
/// keys` and commits a copy group either way: `(b, buf, j, keys)`.
type LoadKv<'a> = dyn Fn(&mut Builder, Reg, Reg, Reg) + 'a;

/// The key tiles of the pipelined `wgmma` loop: shared memory, the end of
/// the keys, the first key (a register the loop advances), the `k` and
/// `v` tiles of buffer 0, and the copies.
struct KeyTiles<'a> {
    base: Reg,
    keys: Reg,
    j0: Reg,
    k: Reg,
    v: Reg,
    load: &'a LoadKv<'a>,
}

/// One lane's place: its query rows (`16r + g`, `16r + g + 8` of the
/// warp's, at `2r` and `2r + 1` for row block `r`) and their existence,
/// `2t` (its first column in a C fragment).
struct Lane {
    rows: Vec<Reg>,
    row_ok: Vec<Reg>,
    t2: Reg,
}

impl Emitter<'_> {
    fn zeros(b: &mut Builder, n: u32) -> Acc {
        (0..n)
            .map(|_| std::array::from_fn(|_| b.mov(RegKind::F32, "f32", f32_imm(0.0))))
            .collect()
    }

    /// `mt` row blocks of `n` n8 tiles of zeros.
    fn zero_blocks(&self, b: &mut Builder, n: u32) -> Vec<Acc> {
        (0..self.g.cta.mt).map(|_| Self::zeros(b, n)).collect()
    }

    fn body(&self, b: &mut Builder, smem: &str) {
        let (a, g, k) = (self.a, self.g, self.cx.k);
        let v = &a.vars;
        let (tid, cta) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "mov.u32 {tid}, %tid.x");
        ins!(b, "mov.u32 {cta}, %ctaid.x");
        let head = self.head(b, cta);
        let q0 = self.first_row(b, cta);
        let base = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {base}, {smem}");
        let coords = Coords::new(b, self.cx, a, head);
        let stager = Stager {
            cx: self.cx,
            a,
            coords: &coords,
            tid,
            threads: g.cta.threads(),
            base,
        };
        let (q_insts, k_insts, v_insts) = (
            part(k, &[a.q], &[]),
            part(k, &[a.k], &[]),
            part(k, &[a.v], &[]),
        );
        let tile = |insts, root, rows, cols, padded, vars, from, dst, row_bytes| Tile {
            insts,
            root,
            rows,
            cols,
            padded,
            vars,
            from,
            dst,
            row_bytes,
            swizzled: g.cta.wgmma,
            half: Some(self.h),
        };
        b.comment("the q tile, as halves, zero past the last row and column");
        let q_tile = tile(
            &q_insts,
            a.q,
            g.bm,
            g.d,
            g.dp,
            (v.i, v.d),
            (q0, g.lq),
            0,
            g.qk_row,
        );
        self.fill(b, &stager, &q_tile);
        if let Some(off) = g.ones {
            self.fill_ones(b, (base, tid), off);
        }
        // Key tile `j` into the buffer at shared address `buf` (the
        // caller commits the copies).
        let load_kv = |b: &mut Builder, buf: Reg, j: Reg| {
            let at = stager.at(buf);
            let kt = tile(
                &k_insts,
                a.k,
                g.bn,
                g.d,
                g.dp,
                (v.j, v.d),
                (j, g.lk),
                g.k_off,
                g.qk_row,
            );
            self.fill(b, &at, &kt);
            let vt = tile(
                &v_insts,
                a.v,
                g.bn,
                g.dv,
                g.dvp,
                (v.j, v.e),
                (j, g.lk),
                g.v_off,
                g.v_row,
            );
            self.fill(b, &at, &vt);
        };
        // Key tile `j` into buffer `buf` where `j < keys`, then a commit
        // either way (an empty group past the keys keeps the count).
        let load_kv_if = |b: &mut Builder, buf: Reg, j: Reg, keys: Reg| {
            let (some, skip) = (b.reg(RegKind::Pred), b.label());
            ins!(b, "setp.lt.u32 {some}, {j}, {keys}");
            ins!(b, "@!{some} bra.uni {skip}");
            load_kv(b, buf, j);
            b.place(&skip);
            ins!(b, "cp.async.commit_group");
        };
        let keys = key_end(b, k, a, q0, g.bm);
        let j0 = if self.sp.is_split() {
            let (start, end) = split::keys(b, self.sp, g.lk);
            ins!(b, "min.u32 {keys}, {keys}, {end}");
            start
        } else {
            b.mov(RegKind::B32, "u32", 0)
        };
        let live = match &self.tma {
            Some(t) => {
                ins!(b, "cp.async.commit_group");
                let warp = b.reg(RegKind::B32);
                ins!(b, "shr.u32 {warp}, {tid}, 5");
                let live = self.tma_start(b, t, (base, tid, warp), &coords, (j0, keys));
                b.comment("the q tile has landed; every thread sees the barriers");
                ins!(b, "cp.async.wait_group 0");
                ins!(b, "fence.proxy.async.shared::cta");
                ins!(b, "bar.sync 0");
                Some(live)
            }
            None => {
                b.comment("key tile j0 into buffer 0 (with the q tile's copies)");
                load_kv(b, base, j0);
                ins!(b, "cp.async.commit_group");
                let stages = g.cta.stages;
                for st in 1..stages - 1 {
                    b.comment(&format!("key tile j0 + {st} bn into buffer {st}"));
                    let (j, buf) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                    ins!(b, "add.u32 {j}, {j0}, {}", st * g.bn);
                    ins!(b, "add.u32 {buf}, {base}, {}", st * g.kv_bytes);
                    load_kv_if(b, buf, j, keys);
                }
                self.tiles_landed(b, stages);
                None
            }
        };
        let (lane, warp) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "and.b32 {lane}, {tid}, 31");
        ins!(b, "shr.u32 {warp}, {tid}, 5");
        let (q_addr, k_addr, v_addr) = if g.cta.wgmma {
            wgmma::tile_addresses(b, &g, warp, base)
        } else {
            self.ldmatrix_addresses(b, lane, warp, base)
        };
        let ln = self.lane(b, lane, warp, q0);
        let resident: Option<Vec<Vec<[Reg; 4]>>> = (g.q_resident() && !g.cta.wgmma).then(|| {
            b.comment("the warp's q rows as A fragments, one per row block and k-step of 16");
            (0..g.cta.mt)
                .map(|r| {
                    (0..g.dp / 16)
                        .map(|ks| ldmatrix(b, q_addr, r * 16 * g.qk_row + 32 * ks, false))
                        .collect()
                })
                .collect()
        });
        let neg_inf = f32_imm(f32::NEG_INFINITY);
        let rows = ln.rows.len();
        let m: Vec<Reg> = (0..rows)
            .map(|_| b.mov(RegKind::F32, "f32", &neg_inf))
            .collect();
        let l: Vec<Reg> = (0..rows)
            .map(|_| b.mov(RegKind::F32, "f32", f32_imm(0.0)))
            .collect();
        // With row sums on the tensor cores, one n8 tile more: the sums.
        let o = self.zero_blocks(b, g.dvp / 8 + u32::from(g.ones.is_some()));
        let split = LogitSplit::new(k, a);
        let row_vals = self.row_logits(b, &coords, &split, &ln);
        let visible = self.all_visible_end(b, q0, warp);
        let fold = self.fold(b, &split, &row_vals);
        let lx = LogitCx {
            coords: &coords,
            split: &split,
            rows: &row_vals,
            ln: &ln,
            visible,
            fold,
        };
        // A buffer the `wgmma` loops leave free for the staged epilogue,
        // and whether the warpgroups are known to be within a tile.
        let mut free = None;
        if let (Some(t), Some(live)) = (&self.tma, &live) {
            // Only where a warpgroup's rows can end a whole key tile
            // before the CTA's (the walk's registers cost 128-row CTAs
            // of 128-key tiles 2-5% where it never applies: H200,
            // 2026-11-29).
            let mine = (a.causal.is_some() && g.bm >= 64 + g.bn).then(|| {
                let first = b.reg(RegKind::B32);
                ins!(b, "shr.u32 {first}, {warp}, 2");
                ins!(b, "mad.lo.u32 {first}, {first}, 64, {q0}");
                let end = key_end(b, k, a, first, 64);
                ins!(b, "min.u32 {end}, {end}, {keys}");
                end
            });
            let area = self.tma_loop(b, &lx, (t, live), (keys, j0), mine, q_addr, (&m, &l, &o[0]));
            // Two warpgroups in turns are within a tile of each other;
            // with three, the middle one's share of the free buffer
            // overlaps `v` of a tile the last may still be reading.
            free = Some((area, t.pingpong() && g.cta.warps == 8));
        } else if g.cta.wgmma {
            let kv = KeyTiles {
                base,
                keys,
                j0,
                k: k_addr,
                v: v_addr,
                load: &load_kv_if,
            };
            free = Some((
                self.pipelined_loop(b, &lx, &kv, q_addr, (&m, &l, &o[0])),
                true,
            ));
        } else {
            // Some CTA's last warps hold no row when `bm` does not divide
            // the rows.
            let idle = (g.lq % g.bm != 0).then(|| {
                let (first, idle) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
                ins!(b, "mad.lo.u32 {first}, {warp}, {}, {q0}", g.cta.warp_rows());
                ins!(b, "setp.ge.u32 {idle}, {first}, {}", g.lq);
                idle
            });
            self.key_loop(
                b,
                &lx,
                (base, keys, j0, idle),
                (q_addr, k_addr, v_addr),
                &load_kv_if,
                resident.as_deref(),
                (&m, &l, &o),
            );
        }
        // Recomputed rather than held across the key loop, whose
        // accumulators want every register (at 32 rows a warp, ptxas
        // spilled the rows kept from before the loop).
        let ln = self.lane_again(b);
        let (l, o) = self.row_sums(b, l, o);
        self.finish(b, &coords, &ln, (&m, &l), &o, free);
    }

    /// The block of ones at byte offset `off` ([`Geom::ones`]): 16 bytes
    /// for each of the first 128 threads, before the barrier that shows
    /// the `q` tile to every thread (and its proxy fence: `wgmma` reads it
    /// through the async proxy).
    fn fill_ones(&self, b: &mut Builder, (base, tid): (Reg, Reg), off: u32) {
        b.comment("the block of ones that O += P [V | 1] reads");
        let one = if self.h == DType::F16 { 0x3c00 } else { 0x3f80 };
        let pair = b.mov(RegKind::B32, "b32", one * 0x1_0001u32);
        let (mine, skip, at) = (b.reg(RegKind::Pred), b.label(), b.reg(RegKind::B32));
        ins!(b, "setp.lt.u32 {mine}, {tid}, {}", ONES_BYTES / 16);
        ins!(b, "@!{mine} bra {skip}");
        ins!(b, "mad.lo.u32 {at}, {tid}, 16, {base}");
        ins!(
            b,
            "st.shared.v4.b32 [{at}+{off}], {{{pair}, {pair}, {pair}, {pair}}}"
        );
        b.place(&skip);
    }

    /// The rows' sums `l` (over the quad's lanes) and the `O` accumulators
    /// after the key loop: with row sums on the tensor cores, `o`'s last
    /// n8 tile holds them whole in every column (row `g` in c0, row `g +
    /// 8` in c2) and leaves `o`; else the lanes' partial sums are combined.
    fn row_sums(&self, b: &mut Builder, l: Vec<Reg>, mut o: Vec<Acc>) -> (Vec<Reg>, Vec<Acc>) {
        if self.g.ones.is_none() {
            for s in &l {
                quad_reduce(b, ReduceOp::Sum, *s);
            }
            return (l, o);
        }
        let sums: Vec<Reg> = o
            .iter_mut()
            .flat_map(|or| {
                let t = or.pop().expect("the sums' n8 tile");
                [t[0], t[2]]
            })
            .collect();
        (sums, o)
    }

    /// The head (u32) of CTA `cta`: the CTA index's slower part.
    fn head(&self, b: &mut Builder, cta: Reg) -> Reg {
        let head = b.reg(RegKind::B32);
        ins!(
            b,
            "div.u32 {head}, {cta}, {}",
            self.g.lq.div_ceil(self.g.bm)
        );
        head
    }

    /// The `mma.sync` key loop: per key tile, start the copies of tile
    /// `t + stages - 1`, compute `S`, the logits and the online softmax,
    /// `O += P V` (not in a warp whose rows are all past the last, where
    /// `idle` holds), then wait for tile `t + 1` and every warp.
    #[allow(clippy::too_many_arguments)]
    fn key_loop(
        &self,
        b: &mut Builder,
        lx: &LogitCx,
        (base, keys, j0, idle): (Reg, Reg, Reg, Option<Reg>),
        (q_addr, k_addr, v_addr): (Reg, Reg, Reg),
        load_kv_if: &LoadKv,
        resident: Option<&[Vec<[Reg; 4]>]>,
        (m, l, o): (&[Reg], &[Reg], &[Acc]),
    ) {
        let (g, stages) = (self.g, self.g.cta.stages);
        // The current tile's buffer and the one the loop fills next (byte
        // offsets; buffer `t % stages` holds tile `t`).
        let cur = b.mov(RegKind::B32, "u32", 0);
        let fill = b.mov(RegKind::B32, "u32", (stages - 1) * g.kv_bytes);
        let top = b.label();
        b.place(&top);
        b.comment("tile j0 is in buffer `cur`; buffer `fill` is free");
        let (next, more) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
        ins!(b, "add.u32 {next}, {j0}, {}", g.bn);
        ins!(b, "setp.lt.u32 {more}, {next}, {keys}");
        b.comment(&format!("start key tile j0 + {} bn", stages - 1));
        let (ahead, buf) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "add.u32 {ahead}, {j0}, {}", (stages - 1) * g.bn);
        ins!(b, "add.u32 {buf}, {base}, {fill}");
        load_kv_if(b, buf, ahead, keys);
        let (ka, va) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "add.u32 {ka}, {k_addr}, {cur}");
        ins!(b, "add.u32 {va}, {v_addr}, {cur}");
        let skip = b.label();
        if let Some(idle) = idle {
            // (Decode: 3 warps of 4.)
            b.comment("a warp whose rows are all past the last only copies tiles");
            ins!(b, "@{idle} bra.uni {skip}");
        }
        let s = self.scores(b, q_addr, ka, resident);
        let x = self.tile_logits(b, lx, (j0, next), &s);
        let (p, alpha) = self.softmax(b, &x, m, l);
        alpha.apply(b, |b, alphas| {
            for (or, r) in o.iter().zip(alphas.chunks(2)) {
                rescale(b, or, r);
            }
        });
        self.accumulate(b, va, &p, o);
        b.place(&skip);
        b.comment("the next tile has landed and every warp is done with this one");
        self.tiles_landed(b, stages);
        for r in [cur, fill] {
            Self::next_buffer(b, r, g.kv_bytes, stages);
        }
        ins!(b, "mov.u32 {j0}, {next}");
        ins!(b, "@{more} bra.uni {top}");
    }

    /// The logits of the key tile `j0 .. next` from its scores `s`, in
    /// two versions: for a tile whole for every row of the warp (under a
    /// causal mask, the mask kept, evaluated without it; else every key
    /// existing), and for the others. With a fold (`lx.fold`, its factors
    /// positive), a whole tile's logits are the scores themselves, to be
    /// multiplied by the row's factor: the returned [`Logits`] say so.
    fn tile_logits(
        &self,
        b: &mut Builder,
        lx: &LogitCx,
        (j0, next): (Reg, Reg),
        s: &[Acc],
    ) -> Logits {
        let (coords, split, rows, ln) = (lx.coords, lx.split, lx.rows, lx.ln);
        let all = LogitInsts::All(&split.rest);
        let (whole, fast) = (b.reg(RegKind::Pred), b.label());
        let fast_insts = match (&split.unmasked, lx.visible) {
            (Some(u), Some(visible)) => {
                b.comment("a tile the causal mask keeps whole for the warp's rows skips it");
                ins!(b, "setp.le.s32 {whole}, {next}, {visible}");
                LogitInsts::Unmasked(u)
            }
            _ => {
                b.comment("a tile of existing keys only skips their test");
                ins!(b, "setp.le.u32 {whole}, {next}, {}", self.g.lk);
                all
            }
        };
        if let Some((_, ok)) = &lx.fold {
            ins!(b, "and.pred {whole}, {whole}, {ok}");
        }
        let one = f32_imm(1.0);
        let factors: Vec<Reg> = (0..ln.rows.len())
            .map(|_| b.mov(RegKind::F32, "f32", &one))
            .collect();
        let done = b.label();
        ins!(b, "@{whole} bra.uni {fast}");
        let x = self.logits(b, coords, (split, rows, all), ln, (j0, false), s);
        ins!(b, "bra.uni {done}");
        b.place(&fast);
        let y = match &lx.fold {
            Some((f, _)) => {
                for (d, src) in factors.iter().zip(f) {
                    ins!(b, "mov.f32 {d}, {src}");
                }
                s.to_vec()
            }
            None => self.logits(b, coords, (split, rows, fast_insts), ln, (j0, true), s),
        };
        for (xt, yt) in x.iter().flatten().zip(y.iter().flatten()) {
            for (xr, yr) in xt.iter().zip(yt) {
                ins!(b, "mov.f32 {xr}, {yr}");
            }
        }
        b.place(&done);
        Logits { x, factors }
    }

    /// The fold of the logit's [`Scale`](super::Scale) factor, if it has
    /// one: the factor per lane row (from the per-row values `rows`, its
    /// reciprocal where the logit divides) and whether all the warp's are
    /// positive and finite (else every tile takes the general logits).
    fn fold(&self, b: &mut Builder, split: &LogitSplit, rows: &[Vals]) -> Option<(Vec<Reg>, Reg)> {
        let sc = split.scale?;
        b.comment("the logit's scale, folded into the softmax's FMA where positive");
        let ok = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {ok}, 0, 0");
        let factors = rows
            .iter()
            .map(|vals| {
                let v = vals[sc.factor].as_ref().expect("row value evaluated")[0];
                let f = ops::convert(b, v, DType::F32).reg;
                let r = b.reg(RegKind::F32);
                if sc.divides {
                    ins!(b, "rcp.rn.f32 {r}, {f}");
                } else {
                    ins!(b, "mov.f32 {r}, {f}");
                }
                ins!(b, "setp.gt.and.f32 {ok}, {r}, 0f00000000, {ok}");
                ins!(
                    b,
                    "setp.lt.and.f32 {ok}, {r}, {}, {ok}",
                    f32_imm(f32::INFINITY)
                );
                r
            })
            .collect();
        ins!(b, "vote.sync.all.pred {ok}, {ok}, -1");
        Some((factors, ok))
    }

    /// The first query row of CTA `cta`'s row block (u32; the row block
    /// is the CTA index's fastest part, counted down when reversed).
    fn first_row(&self, b: &mut Builder, cta: Reg) -> Reg {
        let g = self.g;
        let q_tiles = g.lq.div_ceil(g.bm);
        let q0 = b.reg(RegKind::B32);
        ins!(b, "rem.u32 {q0}, {cta}, {q_tiles}");
        if g.cta.reverse {
            b.comment("row blocks last first: the most key tiles start first");
            ins!(b, "sub.u32 {q0}, {}, {q0}", q_tiles - 1);
        }
        ins!(b, "mul.lo.u32 {q0}, {q0}, {}", g.bm);
        q0
    }

    /// The lane's place ([`Lane`]) from the thread and CTA indices read
    /// afresh.
    fn lane_again(&self, b: &mut Builder) -> Lane {
        let (tid, cta) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "mov.u32 {tid}, %tid.x");
        ins!(b, "mov.u32 {cta}, %ctaid.x");
        let q0 = self.first_row(b, cta);
        let (lane, warp) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "and.b32 {lane}, {tid}, 31");
        ins!(b, "shr.u32 {warp}, {tid}, 5");
        self.lane(b, lane, warp, q0)
    }

    /// Waits for all copies but the newest `stages - 2` groups and for
    /// every thread (after a proxy fence where `wgmma`, which reads shared
    /// memory through the async proxy, reads what the copies wrote).
    fn tiles_landed(&self, b: &mut Builder, stages: u32) {
        ins!(b, "cp.async.wait_group {}", stages - 2);
        if self.g.cta.wgmma {
            ins!(b, "fence.proxy.async.shared::cta");
        }
        ins!(b, "bar.sync 0");
    }

    /// Advances the buffer offset `r` to the next of `stages` buffers of
    /// `bytes` each.
    fn next_buffer(b: &mut Builder, r: Reg, bytes: u32, stages: u32) {
        let wrap = b.reg(RegKind::Pred);
        ins!(b, "add.u32 {r}, {r}, {bytes}");
        ins!(b, "setp.eq.u32 {wrap}, {r}, {}", stages * bytes);
        ins!(b, "selp.u32 {r}, 0, {r}, {wrap}");
    }

    /// Fills tile `t` with `cp.async` where its part is a plain load
    /// ([`plain`]), else by evaluating it.
    fn fill(&self, b: &mut Builder, st: &Stager, t: &Tile) {
        match plain(self.cx.k, t.root, t.vars, t.cols) {
            Some(p) => st.copy(b, t, &p),
            None => st.stage(b, t),
        }
    }

    /// The lane's `ldmatrix` row addresses (see the module docs): into
    /// the `q` tile at the warp's first row block and into the `v` tile
    /// (A layout: row `((l >> 3) & 1) * 8 + (l & 7)`, chunk `l >> 4`), and
    /// into the `k` tile (B layout: row `(l >> 4) * 8 + (l & 7)`, chunk
    /// `(l >> 3) & 1`).
    fn ldmatrix_addresses(
        &self,
        b: &mut Builder,
        lane: Reg,
        warp: Reg,
        base: Reg,
    ) -> (Reg, Reg, Reg) {
        let g = self.g;
        let (l7, bit3, bit4) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
        );
        ins!(b, "and.b32 {l7}, {lane}, 7");
        ins!(b, "bfe.u32 {bit3}, {lane}, 3, 1");
        ins!(b, "shr.u32 {bit4}, {lane}, 4");
        // `base + off + row * row_bytes + chunk * 16`, row = 8 hi + l7
        // (plus the warp's first row).
        let addr =
            |b: &mut Builder, hi: Reg, chunk: Reg, row0: Option<Reg>, off: u32, row_bytes: u32| {
                let (row, x) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                ins!(b, "mad.lo.u32 {row}, {hi}, 8, {l7}");
                if let Some(r0) = row0 {
                    ins!(b, "mad.lo.u32 {row}, {r0}, {}, {row}", g.cta.warp_rows());
                }
                ins!(b, "mad.lo.u32 {x}, {row}, {row_bytes}, {base}");
                ins!(b, "mad.lo.u32 {x}, {chunk}, 16, {x}");
                ins!(b, "add.u32 {x}, {x}, {off}");
                x
            };
        let q = addr(b, bit3, bit4, Some(warp), 0, g.qk_row);
        let k = addr(b, bit4, bit3, None, g.k_off, g.qk_row);
        let v = addr(b, bit3, bit4, None, g.v_off, g.v_row);
        (q, k, v)
    }

    /// The lane's query rows `q0 + 16 mt warp + 16 r + g (+ 8)` for row
    /// blocks `r`, their existence and `2t`.
    fn lane(&self, b: &mut Builder, lane: Reg, warp: Reg, q0: Reg) -> Lane {
        let (first, t2) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "shr.u32 {first}, {lane}, 2");
        ins!(
            b,
            "mad.lo.u32 {first}, {warp}, {}, {first}",
            self.g.cta.warp_rows()
        );
        ins!(b, "add.u32 {first}, {first}, {q0}");
        ins!(b, "and.b32 {t2}, {lane}, 3");
        ins!(b, "shl.b32 {t2}, {t2}, 1");
        let rows: Vec<Reg> = (0..2 * self.g.cta.mt)
            .map(|n| {
                if n == 0 {
                    return first;
                }
                let r = b.reg(RegKind::B32);
                ins!(b, "add.u32 {r}, {first}, {}", 8 * n);
                r
            })
            .collect();
        let row_ok = rows
            .iter()
            .map(|r| {
                let p = b.reg(RegKind::Pred);
                ins!(b, "setp.lt.u32 {p}, {r}, {}", self.g.lq);
                p
            })
            .collect();
        Lane { rows, row_ok, t2 }
    }

    /// The warp's scores `S = Q K^T` for the key tile (`bn / 8` n8 tiles
    /// per row block): per k-step of 16 along `d`, each row block's `q` A
    /// fragment (`resident`, or loaded now) times two n8 tiles of keys
    /// per `ldmatrix` of `k`, shared by the row blocks.
    fn scores(
        &self,
        b: &mut Builder,
        q_addr: Reg,
        k_addr: Reg,
        resident: Option<&[Vec<[Reg; 4]>]>,
    ) -> Vec<Acc> {
        let g = self.g;
        let op = mma_op(self.elem());
        let s = self.zero_blocks(b, g.bn / 8);
        b.comment("S = Q K^T");
        for ks in 0..g.dp / 16 {
            let qa: Vec<[Reg; 4]> = (0..g.cta.mt)
                .map(|r| match resident {
                    Some(q) => q[r as usize][ks as usize],
                    None => ldmatrix(b, q_addr, r * 16 * g.qk_row + 32 * ks, false),
                })
                .collect();
            for nb in 0..g.bn / 16 {
                let kb = ldmatrix(b, k_addr, nb * 16 * g.qk_row + 32 * ks, false);
                let n = 2 * nb as usize;
                for (sr, qr) in s.iter().zip(&qa) {
                    mma(b, op, &sr[n], qr, &kb[..2]);
                    mma(b, op, &sr[n + 1], qr, &kb[2..]);
                }
            }
        }
        s
    }

    fn elem(&self) -> Elem {
        if self.h == DType::F16 {
            Elem::F16
        } else {
            Elem::BF16
        }
    }

    /// The logit part's values that depend on the row only (`split.row`),
    /// for each of the lane's rows, computed once before the key loop.
    fn row_logits(
        &self,
        b: &mut Builder,
        coords: &Coords,
        split: &LogitSplit,
        ln: &Lane,
    ) -> Vec<Vals> {
        b.comment("the logit part's per-row values");
        ln.rows
            .iter()
            .zip(&ln.row_ok)
            .map(|(&i, &ok)| {
                // `j` is not read: any register will do.
                let p = coords.point(b, self.cx, [(self.a.vars.i, i), (self.a.vars.j, i)], ok);
                let mut vals: Vals = vec![None; self.cx.k.insts.len()];
                self.cx.eval(b, &p, &split.row, &mut vals);
                vals
            })
            .collect()
    }

    /// Under a causal mask, the end (s32) of the key tiles the mask keeps
    /// whole for every row of the warp (from `q0 + 16 mt warp`): a tile
    /// ending at `j0 + bn` at most `min(q0 + 16 mt warp + c + 1, lk)`.
    fn all_visible_end(&self, b: &mut Builder, q0: Reg, warp: Reg) -> Option<Reg> {
        let c = self.a.causal?;
        let end = b.reg(RegKind::B32);
        ins!(
            b,
            "mad.lo.u32 {end}, {warp}, {}, {q0}",
            self.g.cta.warp_rows()
        );
        // Below 2^31: sizes are below 2^30 and `c` in `-lq..=lk`.
        ins!(b, "add.s32 {end}, {end}, {}", c.offset + 1);
        ins!(b, "min.s32 {end}, {end}, {}", self.g.lk);
        Some(end)
    }

    /// The logit of every score element: element `c` of n8 tile `n` of
    /// row block `r` is row `rows[2r + c / 2]`, key `j0 + 8n + 2t + c %
    /// 2`. The part's per-key values (`split.col`) are computed once per
    /// key for all the rows, the rest per element (`rest`: `split.rest`,
    /// or without the causal mask) on top of them and of the per-row
    /// values `rows`. In a `full` tile every key exists (no `-inf` past
    /// the last).
    #[allow(clippy::too_many_arguments)]
    fn logits(
        &self,
        b: &mut Builder,
        coords: &Coords,
        (split, rows, rest): (&LogitSplit, &[Vals], LogitInsts),
        ln: &Lane,
        (j0, full): (Reg, bool),
        s: &[Acc],
    ) -> Vec<Acc> {
        b.comment("logits at each score's (i, j)");
        let jt = b.reg(RegKind::B32);
        ins!(b, "add.u32 {jt}, {j0}, {}", ln.t2);
        let a = self.a;
        let mut x: Vec<Acc> = vec![Vec::new(); s.len()];
        for n in 0..s[0].len() {
            let keys: [(Reg, Reg, Vals); 2] = std::array::from_fn(|odd| {
                let j = b.reg(RegKind::B32);
                ins!(b, "add.u32 {j}, {jt}, {}", 8 * n + odd);
                let key_ok = b.reg(RegKind::Pred);
                if full {
                    // A constant ptxas folds into the selections.
                    ins!(b, "setp.eq.u32 {key_ok}, 0, 0");
                } else {
                    ins!(b, "setp.lt.u32 {key_ok}, {j}, {}", self.g.lk);
                }
                // Reads neither `i` nor the row values that read it.
                let p = coords.point(b, self.cx, [(a.vars.i, ln.rows[0]), (a.vars.j, j)], key_ok);
                let mut vals = rows[0].clone();
                self.cx.eval(b, &p, &split.col, &mut vals);
                (j, key_ok, vals)
            });
            for (r, (xr, sr)) in x.iter_mut().zip(s).enumerate() {
                xr.push(std::array::from_fn(|c| {
                    let row = 2 * r + c / 2;
                    let (j, key_ok, col) = &keys[c % 2];
                    let ok = b.reg(RegKind::Pred);
                    ins!(b, "and.pred {ok}, {key_ok}, {}", ln.row_ok[row]);
                    let mut known = rows[row].clone();
                    for v in &split.col {
                        known[*v].clone_from(&col[*v]);
                    }
                    logit(
                        b,
                        self.cx,
                        a,
                        coords,
                        (rest, known),
                        (ln.rows[row], *j),
                        sr[n][c],
                        (ok, *key_ok),
                    )
                }));
            }
        }
        x
    }

    /// The online softmax of one tile's logits (`lg.x` times the row's
    /// factor) for the lane's rows (row `2r + h` of row block `r`:
    /// elements c0, c1 for `h` = 0, c2, c3 for `h` = 1): updates the
    /// running maxima `m` (of the logits) and partial sums `l` (not with
    /// the sums on the tensor cores, [`Geom::ones`]), returns
    /// `p` and each row's factor `exp(m_old - m')` for the `O`
    /// accumulators ([`rescale`]).
    fn softmax(&self, b: &mut Builder, lg: &Logits, m: &[Reg], l: &[Reg]) -> (Vec<Acc>, Rescale) {
        let x = &lg.x;
        // Whether some row of the thread moved its max (and `O` needs
        // rescaling).
        let any = b.reg(RegKind::Pred);
        ins!(b, "setp.ne.b32 {any}, 1, 1");
        b.comment("online softmax: row maxima over the quad, p = exp(x - m'), rescale");
        let p: Vec<Acc> = x
            .iter()
            .map(|xr| {
                xr.iter()
                    .map(|_| std::array::from_fn(|_| b.reg(RegKind::F32)))
                    .collect()
            })
            .collect();
        let mut alphas = Vec::new();
        for (r, (xr, pr)) in x.iter().zip(&p).enumerate() {
            for h in 0..2 {
                let row = 2 * r + h;
                let tmax = b.mov(RegKind::F32, "f32", f32_imm(f32::NEG_INFINITY));
                for tile in xr {
                    for c in [2 * h, 2 * h + 1] {
                        ops::combine(b, ReduceOp::Max, DType::F32, tmax, tile[c], None);
                    }
                }
                quad_reduce(b, ReduceOp::Max, tmax);
                // A positive factor: the max of the products is the
                // product of the max, exactly.
                let f = lg.factors[row];
                ins!(b, "mul.f32 {tmax}, {tmax}, {f}");
                ops::combine(b, ReduceOp::Max, DType::F32, tmax, m[row], None);
                // The max moves only past the old one plus `LAZY_MAX` (or
                // to NaN: `gtu`); else the old one stays, exactly.
                let (bound, upd) = (b.reg(RegKind::F32), b.reg(RegKind::Pred));
                ins!(b, "add.f32 {bound}, {}, {}", m[row], f32_imm(LAZY_MAX));
                ins!(b, "setp.gtu.f32 {upd}, {tmax}, {bound}");
                ins!(b, "selp.f32 {tmax}, {tmax}, {}, {upd}", m[row]);
                ins!(b, "or.pred {any}, {any}, {upd}");
                // m' = 0 while the row is all -inf: exp(-inf - 0) = 0 adds
                // nothing (instead of exp(-inf - -inf) = NaN).
                let (masked, m_use) = (b.reg(RegKind::Pred), b.reg(RegKind::F32));
                ins!(
                    b,
                    "setp.eq.f32 {masked}, {tmax}, {}",
                    f32_imm(f32::NEG_INFINITY)
                );
                ins!(b, "selp.f32 {m_use}, {}, {tmax}, {masked}", f32_imm(0.0));
                // exp(v - m') = 2^(v log2 e - m' log2 e): one FMA and the
                // flushing ex2 per element (results below 2^-126 are 0, far
                // below the half rounding of `p`).
                let log2e = f32_imm(std::f32::consts::LOG2_E);
                let (nml, fl2e) = (b.reg(RegKind::F32), b.reg(RegKind::F32));
                ins!(
                    b,
                    "mul.f32 {nml}, {m_use}, {}",
                    f32_imm(-std::f32::consts::LOG2_E)
                );
                ins!(b, "mul.f32 {fl2e}, {f}, {log2e}");
                let exp_minus = |b: &mut Builder, v: Reg, by: &str| {
                    let (t, e) = (b.reg(RegKind::F32), b.reg(RegKind::F32));
                    ins!(b, "fma.rn.f32 {t}, {v}, {by}, {nml}");
                    ins!(b, "ex2.approx.ftz.f32 {e}, {t}");
                    e
                };
                let alpha = exp_minus(b, m[row], &log2e);
                ins!(b, "selp.f32 {alpha}, {alpha}, {}, {upd}", f32_imm(1.0));
                // (With the sums on the tensor cores, `l` is `O`'s.)
                let sum = (self.g.ones.is_none()).then(|| b.mov(RegKind::F32, "f32", f32_imm(0.0)));
                for (tile, pt) in xr.iter().zip(pr) {
                    for c in [2 * h, 2 * h + 1] {
                        let e = exp_minus(b, tile[c], &fl2e.to_string());
                        ins!(b, "mov.f32 {}, {e}", pt[c]);
                        if let Some(sum) = sum {
                            ins!(b, "add.f32 {sum}, {sum}, {e}");
                        }
                    }
                }
                if let Some(sum) = sum {
                    ins!(b, "fma.rn.f32 {}, {}, {alpha}, {sum}", l[row], l[row]);
                }
                ins!(b, "mov.f32 {}, {tmax}", m[row]);
                alphas.push(alpha);
            }
        }
        let warp = b.reg(RegKind::Pred);
        ins!(b, "vote.sync.any.pred {warp}, {any}, -1");
        (p, Rescale { alphas, any: warp })
    }

    /// `O += P V`: per k-step `c` of 16 keys, each row block's `p` C
    /// fragments of n8 tiles `2c`, `2c + 1` packed as the A fragment,
    /// times two n8 tiles of `v` columns per `ldmatrix.trans`, shared by
    /// the row blocks.
    fn accumulate(&self, b: &mut Builder, v_addr: Reg, p: &[Acc], o: &[Acc]) {
        let g = self.g;
        let op = mma_op(self.elem());
        b.comment("O += P V");
        for c in 0..(g.bn / 16) as usize {
            let pa: Vec<[Reg; 4]> = p.iter().map(|pr| pack_p(b, self.h, pr, c)).collect();
            for nb in 0..g.dvp / 16 {
                let vb = ldmatrix(b, v_addr, c as u32 * 16 * g.v_row + 32 * nb, true);
                let n = 2 * nb as usize;
                for (or, par) in o.iter().zip(&pa) {
                    mma(b, op, &or[n], par, &vb[..2]);
                    mma(b, op, &or[n + 1], par, &vb[2..]);
                }
            }
        }
    }

    /// `O / l` (the quad's partial sums combined) through the epilogue to
    /// the stores: element `c` of n8 tile `n` of row block `r` is row
    /// `rows[2r + c / 2]`, column `8n + 2t + c % 2`.
    ///
    /// Under split-KV, `m`, `l` and `O` unnormalized to the rows' partial
    /// records instead ([`split::record`]). Where the key loop left a
    /// buffer free (`free`: its shared address, and whether the
    /// warpgroups are within a tile of each other) and the kernel stages
    /// ([`Emitter::staging`]), through shared memory
    /// ([`Emitter::staged`]).
    fn finish(
        &self,
        b: &mut Builder,
        coords: &Coords,
        ln: &Lane,
        (m, l): (&[Reg], &[Reg]),
        o: &[Acc],
        free: Option<(Reg, bool)>,
    ) {
        if self.sp.is_split() {
            return self.partials(b, ln, (m, l), o);
        }
        // One reciprocal a row instead of a division an element (the
        // output is rounded to its type after; `0 * inf` is the NaN of a
        // row with no finite logit, as `0 / 0` was).
        let inv: Vec<Reg> = l
            .iter()
            .map(|s| {
                let r = b.reg(RegKind::F32);
                ins!(b, "rcp.rn.f32 {r}, {s}");
                r
            })
            .collect();
        if let (Some((area, together)), Some(st)) = (free, self.staging()) {
            return self.staged(b, coords, (st, area, together), &inv, &o[0]);
        }
        b.comment("epilogue: O / l to the stores");
        let insts = epilogue_part(self.cx.k, self.a);
        let f32v = |reg| Value {
            reg,
            dtype: DType::F32,
        };
        // A lane's two columns of a row (`2t`, `2t + 1` of an n8 tile) as
        // the two lanes of one point, so a contiguous output takes them in
        // one store (the column count even: both exist or neither).
        let paired = self.g.dv.is_multiple_of(2);
        let cxl = paired.then(|| self.cx.with_lanes_along(self.a.vars.e, self.a.attend));
        let cx = cxl.as_ref().unwrap_or(self.cx);
        let lanes = if paired { 2 } else { 1 };
        self.for_each_out(b, ln, o, lanes, |b, row, e, accs, ok| {
            let out: Vec<Value> = accs
                .iter()
                .map(|acc| ops::binary(b, BinaryOp::Mul, f32v(*acc), f32v(inv[row]), DType::F32))
                .collect();
            store(b, cx, self.a, coords, &insts, (ln.rows[row], e), &out, ok);
        });
    }

    /// `f(b, row, e, accs, ok)` for each run of `lanes` (1 or 2) `O`
    /// accumulators `accs`: element `c` of n8 tile `n` of row block `r` is
    /// the lane's row `row = 2r + c / 2`, column `e = 8n + 2t + c % 2` (a
    /// register: the run's first), existing where `ok` (the run's first
    /// column does).
    fn for_each_out(
        &self,
        b: &mut Builder,
        ln: &Lane,
        o: &[Acc],
        lanes: usize,
        mut f: impl FnMut(&mut Builder, usize, Reg, &[Reg], Reg),
    ) {
        for (r, or) in o.iter().enumerate() {
            for (n, tile) in or.iter().enumerate() {
                for (k, accs) in tile.chunks(lanes).enumerate() {
                    let c = k * lanes;
                    let row = 2 * r + c / 2;
                    let e = b.reg(RegKind::B32);
                    ins!(b, "add.u32 {e}, {}, {}", ln.t2, 8 * n + c % 2);
                    let ok = b.reg(RegKind::Pred);
                    ins!(
                        b,
                        "setp.lt.and.u32 {ok}, {e}, {}, {}",
                        self.g.dv,
                        ln.row_ok[row]
                    );
                    f(b, row, e, accs, ok);
                }
            }
        }
    }

    /// Split-KV: each of the lane's rows' `m` and `l` (the quad's, stored
    /// by its first lane) and its `O` elements, unnormalized, to the row's
    /// record for this CTA's split.
    fn partials(&self, b: &mut Builder, ln: &Lane, (m, l): (&[Reg], &[Reg]), o: &[Acc]) {
        b.comment("split-KV: m, l and O (unnormalized) to the scratch buffer");
        let cta = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {cta}, %ctaid.x");
        let head = self.head(b, cta);
        let lead = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {lead}, {}, 0", ln.t2);
        let recs: Vec<Reg> = (0..ln.rows.len())
            .map(|row| {
                let rec = split::record(b, self.cx, self.a, self.sp, head, ln.rows[row]);
                let ok = b.reg(RegKind::Pred);
                ins!(b, "and.pred {ok}, {lead}, {}", ln.row_ok[row]);
                split::store_stats(b, self.a, rec, (m[row], l[row]), ok);
                rec
            })
            .collect();
        self.for_each_out(b, ln, o, 1, |b, row, e, accs, ok| {
            let acc = accs[0];
            split::store_column(b, self.a, recs[row], e, acc, ok);
        });
    }
}

/// The online softmax keeps a row's running max `m` until a tile's max
/// exceeds it by more than this (natural-log units), as FlashAttention-4
/// does: `p = exp(x - m)` then stays at most 2^8 (exact in halves' range,
/// `O` and `l` in f32), the result `O / l` does not depend on which `m`
/// they share, and a warp none of whose rows moved skips rescaling `O`
/// (64 multiplies a thread on the path from one tile's `P V` to the
/// next). H200, 2026-11-27: 1-3% on prefill, in A/B runs of one session.
const LAZY_MAX: f32 = 8.0 * std::f32::consts::LN_2;

/// The factors that rescale `O` after a tile's softmax (1 where a row kept
/// its max), and a warp-uniform predicate: some row of the warp moved it.
pub(super) struct Rescale {
    alphas: Vec<Reg>,
    any: Reg,
}

impl Rescale {
    /// Runs `f` (the rescaling) with the factors, skipped by the whole
    /// warp where no row of it moved its max.
    fn apply(&self, b: &mut Builder, f: impl FnOnce(&mut Builder, &[Reg])) {
        let skip = b.label();
        ins!(b, "@!{} bra.uni {skip}", self.any);
        f(b, &self.alphas);
        b.place(&skip);
    }
}

/// Scales a row block's `O` accumulators by its rows' factors `alpha`
/// (row `g` in elements c0, c1, row `g + 8` in c2, c3).
fn rescale(b: &mut Builder, o: &Acc, alpha: &[Reg]) {
    for tile in o {
        for (c, acc) in tile.iter().enumerate() {
            ins!(b, "mul.f32 {acc}, {acc}, {}", alpha[c / 2]);
        }
    }
}

/// The A fragment of k-step `c` (keys `16c ..`) of `O += P V` from the
/// row block's `p` (C fragments), rounded to the half type `h`: (tile,
/// first element) `a0` = `p[2c]` c0, c1; `a1` = `p[2c]` c2, c3; `a2` =
/// `p[2c+1]` c0, c1; `a3` = `p[2c+1]` c2, c3 (the fragment layout of
/// `mma.m16n8k16` and of `wgmma`'s A in registers alike).
fn pack_p(b: &mut Builder, h: DType, p: &Acc, c: usize) -> [Reg; 4] {
    let cvt = if h == DType::F16 {
        "cvt.rn.f16x2.f32"
    } else {
        "cvt.rn.bf16x2.f32"
    };
    [(0, 0), (0, 2), (1, 0), (1, 2)].map(|(t, e)| {
        let r = b.reg(RegKind::B32);
        let pt = &p[2 * c + t];
        // The first operand of the cvt goes to the upper half.
        ins!(b, "{cvt} {r}, {}, {}", pt[e + 1], pt[e]);
        r
    })
}

/// `x = op` over the 4 lanes of `x`'s quad (lanes `4g .. 4g + 3`, which
/// hold the same rows of a C fragment).
fn quad_reduce(b: &mut Builder, op: ReduceOp, x: Reg) {
    for off in [1, 2] {
        let t = b.reg(RegKind::F32);
        ins!(b, "shfl.sync.bfly.b32 {t}, {x}, {off}, 31, -1");
        ops::combine(b, op, DType::F32, x, t, None);
    }
}
