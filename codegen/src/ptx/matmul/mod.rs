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
mod load;
mod mma;
mod mma_sync;
mod pipeline;
mod shape;
mod simt;
mod start;
mod wgmma;

pub use config::{candidates, wgmma_candidates, Tile};
pub(crate) use load::Layout;
pub(crate) use mma::{ldmatrix, mma, mma_op};
pub use shape::{recognise, Elem, Operand, Shape};
pub(crate) use wgmma::{descriptor, descriptor_bits};

use super::module::PtxKernel;
use super::target::Target;
use crate::ir::Kernel;

/// The matmul's shape when a specialised emitter takes `kernel`: the
/// tensor-core one for half types and TF32, the SIMT one (`simt.rs`) for
/// exact `f32`.
fn specialised(kernel: &Kernel) -> Option<Shape> {
    // Indirect loads (and their error flag) are the generic emitters'.
    if !crate::env::flag("SMELT_MATMUL_MMA", true) || kernel.has_indirect() {
        return None;
    }
    recognise(kernel)
}

/// Lowers `kernel` with a specialised matmul emitter when one applies,
/// with the heuristic configuration; `None` sends it to the generic path.
pub fn emit(kernel: &Kernel, target: &Target) -> Option<PtxKernel> {
    let s = specialised(kernel)?;
    let batches = s.batches(kernel);
    Some(if s.elem == Elem::F32 {
        simt::emit(kernel, target, &s, &simt::choose(&s, batches, target))
    } else {
        emit_with(kernel, target, &s, &config::choose(&s, batches, target))
    })
}

/// Names of the configurations an autotuner may time for `kernel` (empty
/// when no tuned emitter takes it): tensor-core tiles, or for exact `f32`
/// the SIMT tiles (named `simt...`); see [`emit_variant`].
pub fn variants(kernel: &Kernel, target: &Target) -> Vec<String> {
    match specialised(kernel) {
        Some(s) if s.elem == Elem::F32 => simt::candidates().iter().map(simt::Simt::name).collect(),
        Some(s) => tiles(&s, target).iter().map(Tile::name).collect(),
        None => Vec::new(),
    }
}

/// The tensor-core tiles for `s` on `target`: `mma.sync` ones, and on
/// sm_90 the warpgroup ones where they apply and fit.
fn tiles(s: &Shape, target: &Target) -> Vec<Tile> {
    let mut all = candidates();
    if config::wgmma_applies(s, target) {
        all.extend(
            wgmma_candidates()
                .into_iter()
                .filter(|t| config::wgmma_fits(s, t)),
        );
    }
    all
}

/// `kernel` lowered with the configuration named `name` (one of
/// [`variants`]); `None` for an unknown name or a kernel no tuned emitter
/// takes.
pub fn emit_variant(kernel: &Kernel, target: &Target, name: &str) -> Option<PtxKernel> {
    let s = specialised(kernel)?;
    if s.elem == Elem::F32 {
        let t = simt::candidates().into_iter().find(|t| t.name() == name)?;
        return Some(simt::emit(kernel, target, &s, &t));
    }
    let tile = tiles(&s, target).into_iter().find(|t| t.name() == name)?;
    Some(emit_with(kernel, target, &s, &tile))
}

/// Lowers the recognised tensor-core matmul `s` of `kernel` with tile `t`
/// (any of [`candidates`] is correct).
pub fn emit_with(kernel: &Kernel, target: &Target, s: &Shape, t: &Tile) -> PtxKernel {
    if t.wgmma {
        wgmma::emit(kernel, target, s, t)
    } else {
        mma_sync::emit(kernel, target, s, t)
    }
}
