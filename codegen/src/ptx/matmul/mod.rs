//! Tensor-core matmul kernels: `mma.sync` `m16n8k16` (f16 / bf16 operands)
//! or `m16n8k8` (TF32), f32 accumulation, fed by `ldmatrix` from swizzled
//! shared memory that a multi-stage `cp.async` pipeline fills, with the
//! kernel's epilogue applied to the accumulators before the only store.
//!
//! # Mapping
//! - Grid `x`: CTA tiles of C in grouped order (`group_m` tiles along M
//!   share each sweep along N, so their A rows stay in L2); grid `z`: the
//!   batch, unravelled into the batch variables.
//! - A CTA of `warps_m x warps_n` warps computes a `warps_m warp_m x
//!   warps_n warp_n` tile ([`Tile`]); a warp `warp_m x warp_n` as `m16n8`
//!   MMA tiles (see `mma.rs` for the fragment layouts, `load.rs` for the
//!   shared layouts and swizzles).
//! - K in steps of `k_bytes` bytes through `stages` shared buffers: tile
//!   `kt + stages - 1` is copied while tile `kt` is multiplied. Rows,
//!   columns and `k` outside the matrix read as zero (any M, N, K).
//!   k-contiguous operands are copied as they are; halves contiguous along
//!   `m` or `n` (row-major B, transposed A) keep that layout and are read
//!   with `ldmatrix.trans`; other strides use predicated element loads.
//!
//! Kernels this does not recognise (see [`shape::recognise`]: integer
//! operands, masked or div/mod operand indices, fused operand producers
//! other than casts from halves and `RoundTf32`) stay on the generic reduce
//! path; plain `f32` matmuls are not tensor-core work: `simt.rs` computes
//! them exactly with FMAs. `SMELT_MATMUL_MMA=0` disables both emitters
//! (for bisecting).

mod config;
mod epilogue;
mod fp8_rows;
mod load;
mod mma;
mod mma_sync;
mod pipeline;
mod shape;
mod simt;
mod specialized;
mod split;
mod start;
mod tma;
mod wgmma;

pub use config::{candidates, wgmma_candidates, Schedule, Tile};
pub(crate) use load::Layout;
pub(crate) use mma::{ldmatrix, mma, mma_op};
pub use shape::{recognise, Elem, Operand, Shape};
pub use specialized::{budget, Budget};
pub use split::{Split, MAX_SPLITS, MIN_SPLIT_K, PLAN_SMS};
pub(crate) use wgmma::{descriptor, descriptor_bits};

use super::module::PtxKernel;
use super::target::Target;
use crate::ir::{Arg, Kernel};

/// The matmul's shape when a specialised emitter takes `kernel` on
/// `target`: the tensor-core one for half types, TF32 and (sm_90) FP8,
/// the SIMT one (`simt.rs`) for exact `f32`.
fn specialised(kernel: &Kernel, target: &Target) -> Option<Shape> {
    recognised(kernel).filter(|s| config::applies(s, target))
}

/// Every tile name `SMELT_MATMUL_TILE` accepts: the tensor-core tiles'
/// and the exact-`f32` SIMT tiles'.
pub fn tile_names() -> Vec<String> {
    let mut names = config::tile_names();
    names.extend(simt::candidates().iter().map(simt::Simt::name));
    names
}

/// [`specialised`] on any target (FP8 included wherever it may apply).
fn recognised(kernel: &Kernel) -> Option<Shape> {
    // Indirect loads (and their error flag) are the generic emitters'.
    if !crate::env::flag("SMELT_MATMUL_MMA", true) || kernel.has_indirect() {
        return None;
    }
    recognise(kernel)
}

/// Lowers `kernel` with a specialised matmul emitter when one applies,
/// with the heuristic configuration (the tile of `SMELT_MATMUL_TILE`
/// where it applies, split as `SMELT_MATMUL_SPLITS` asks); `None` sends
/// it to the generic path.
pub fn emit(kernel: &Kernel, target: &Target) -> Option<PtxKernel> {
    let s = specialised(kernel, target)?;
    let batches = s.batches(kernel);
    Some(if s.elem == Elem::F32 {
        let t = simt::choose(&s, batches, target);
        let want = t.splits(&s, batches, target);
        simt::emit(kernel, target, &s, &t, split::plan(kernel, &s, t.bk, want))
    } else {
        let t = config::choose(&s, batches, target);
        let sp = split_plan(kernel, &s, &t, split::wanted(&s, batches, &t, target));
        emit_split(kernel, target, &s, &t, sp)
    })
}

/// What the environment decides about matmul kernels' code beyond
/// [`emit`]'s arguments, for the module caches' keys:
/// `SMELT_MATMUL_TILE` and `SMELT_MATMUL_SPLITS`.
pub fn env_knobs() -> (Option<String>, Option<usize>) {
    (
        crate::env::var("SMELT_MATMUL_TILE", crate::env::parse_matmul_tile),
        split::env_splits(),
    )
}

/// The split-K scratch buffer the fusion planner gives matmul kernel `k`
/// (its last output, f32; see `split.rs`), `None` where it is never
/// split: room for the most splits any of its emitter's tiles asks (for
/// tensor-core kernels with `SMELT_MATMUL_TILE` or `SMELT_MATMUL_SPLITS`
/// set, the heuristic tile's only).
pub fn scratch(k: &Kernel) -> Option<Arg> {
    if k.kind != crate::KernelKind::Matmul {
        return None;
    }
    let s = recognised(k)?;
    let batches = s.batches(k);
    if s.elem == Elem::F32 {
        return split::scratch(k, &s, |t| {
            simt::candidates()
                .iter()
                .map(|tile| tile.splits(&s, batches, t))
                .max()
                .unwrap_or(1)
        });
    }
    split::scratch(k, &s, |t| {
        let tiles = match env_knobs() {
            (None, None) => config::tiles(&s, t),
            _ => vec![config::choose(&s, batches, t)],
        };
        tiles
            .iter()
            .map(|tile| split::wanted(&s, batches, tile, t))
            .max()
            .unwrap_or(1)
    })
}

/// Names of the configurations an autotuner may time for `kernel` (empty
/// when no tuned emitter takes it, or for tensor-core kernels when
/// `SMELT_MATMUL_TILE` or `SMELT_MATMUL_SPLITS` decide): tensor-core
/// tiles or for exact `f32` the SIMT tiles (named `simt...`), each also
/// split (named `<tile>-split<n>`) where the split rule (or
/// `SMELT_MATMUL_SPLITS`) splits it and the scratch allows; see
/// [`emit_variant`].
pub fn variants(kernel: &Kernel, target: &Target) -> Vec<String> {
    let with_split = |name: String, sp: Split| {
        let split = sp.is_split().then(|| format!("{name}-split{}", sp.count));
        std::iter::once(name).chain(split)
    };
    match specialised(kernel, target) {
        Some(s) if s.elem == Elem::F32 && simt::forced().is_some() => Vec::new(),
        Some(s) if s.elem == Elem::F32 => {
            let batches = s.batches(kernel);
            simt::candidates()
                .iter()
                .flat_map(|t| {
                    let want = t.splits(&s, batches, target);
                    with_split(t.name(), split::plan(kernel, &s, t.bk, want))
                })
                .collect()
        }
        Some(_) if env_knobs() != (None, None) => Vec::new(),
        Some(s) => {
            let batches = s.batches(kernel);
            config::tiles(&s, target)
                .iter()
                .flat_map(|t| {
                    let want = split::wanted(&s, batches, t, target);
                    with_split(t.name(), split_plan(kernel, &s, t, want))
                })
                .collect()
        }
        None => Vec::new(),
    }
}

/// `kernel` lowered with the configuration named `name` (one of
/// [`variants`], any of their warpgroup tiles with `ws` or `wsp` appended
/// ([`Schedule::Specialized`], [`Schedule::Persistent`]), or any
/// tensor-core or SIMT tile named `<tile>-split<n>` for `n` splits as far
/// as the scratch allows); `None` for an unknown name or a kernel no
/// tuned emitter takes.
pub fn emit_variant(kernel: &Kernel, target: &Target, name: &str) -> Option<PtxKernel> {
    let s = specialised(kernel, target)?;
    let (tile, want) = match name.split_once("-split") {
        Some((tile, n)) => (tile, n.parse::<u64>().ok()?),
        None => (name, 1),
    };
    if s.elem == Elem::F32 {
        let t = simt::candidates().into_iter().find(|t| t.name() == tile)?;
        let sp = split::plan(kernel, &s, t.bk, want);
        return Some(simt::emit(kernel, target, &s, &t, sp));
    }
    let t = config::named(&s, target)
        .into_iter()
        .find(|t| t.name() == tile)?;
    let sp = split_plan(kernel, &s, &t, want);
    Some(emit_split(kernel, target, &s, &t, sp))
}

/// Lowers the recognised tensor-core matmul `s` of `kernel` with tile `t`
/// (any of [`candidates`] is correct), unsplit.
pub fn emit_with(kernel: &Kernel, target: &Target, s: &Shape, t: &Tile) -> PtxKernel {
    emit_split(kernel, target, s, t, Split::NONE)
}

/// The split of `kernel`'s `k` into `want` splits (0 or 1: none) with
/// tile `t`, as the emitters make it: at most [`MAX_SPLITS`] and what its
/// scratch buffer holds, in whole k-tiles.
pub fn split_plan(kernel: &Kernel, s: &Shape, t: &Tile, want: u64) -> Split {
    split::plan(kernel, s, t.bk(s.elem.bytes()), want)
}

/// `s` of `kernel` with tile `t`, its `k` split as `sp` (from
/// [`split_plan`]; [`Split::NONE`] for none); a warpgroup tile scheduled
/// as `SMELT_MATMUL_WS` asks ([`config::scheduled`]).
pub fn emit_split(kernel: &Kernel, target: &Target, s: &Shape, t: &Tile, sp: Split) -> PtxKernel {
    if t.wgmma {
        wgmma::emit(kernel, target, s, &config::scheduled(t), sp)
    } else {
        mma_sync::emit(kernel, target, s, t, sp)
    }
}
