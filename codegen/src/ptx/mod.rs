//! The PTX backend: lowers a [`Kernel`] to PTX text for NVIDIA GPUs
//! (sm_80 and newer), written by our own code, with no CUDA compiler at run
//! time.
//!
//! # Mapping
//! - Elementwise kernels (no reduction): a grid-stride loop over groups of
//!   consecutive values of the last loop variable, with 4-16 byte vector
//!   loads and stores wherever an access is unit-stride and aligned in it.
//! - Kernels with reductions: a team of threads per row (sub-warp, warp or
//!   whole CTA), a persistent grid over rows; rows that fit stay in
//!   registers across passes. See [`launch::Rows`] and the `reduce` module.
//! - Scans: a thread, warp or CTA per row walking it in chunks (thread,
//!   warp shuffle and shared-memory scans, a carry between chunks); few
//!   long rows instead as a single-pass scan with decoupled look-back, a
//!   CTA per tile; a strided scanned axis in column tiles (a warp across
//!   columns), chained along the axis by look-back. See [`launch::Scan`]
//!   and the `scan`, `lookback`, `scan_cols` and `col_lookback` modules.
//! - Sorts: a CTA per row, a bitonic sort of `(key, position)` pairs in
//!   shared memory; long rows through a radix select (`topk`) or an LSD
//!   radix sort over many CTAs, several launches of one module sharing a
//!   global scratch buffer. See [`launch::Sort`] and the `sort` module.
//! - Scatter kernels: the elementwise mapping, each store an atomic add at
//!   a checked data-dependent position (the `scatter` module).
//! - Attention kernels: a CTA per batch and tile of query rows, an online
//!   softmax over key tiles staged in shared memory; `mma.sync` tensor
//!   cores for half operands, FMA arithmetic otherwise; too few CTAs also
//!   split the keys (split-KV: a second launch merges the splits'
//!   partial softmaxes from a scratch buffer). See the `attention`
//!   module.
//!
//! Buffers must be at least 16-byte aligned (as device allocations are):
//! vector accesses rely on it.
//!
//! # Numerics
//! Half types and FP8 compute in `f32` and are rounded to their type
//! after every instruction, as the interpreter does (FP8 codes convert
//! by an integer sequence on every target, `fp8.rs`). Bools are predicates in
//! registers and bytes in memory. Integer arithmetic wraps in its dtype.
//! `f64` sequences are in `math_f64`. Exact ops use the
//! IEEE-rounded instructions (`add/sub/mul/div/sqrt/rcp .rn`, never fused
//! into fma). Approximations, with their error against the exact `f32`
//! result:
//! - `exp`: `ex2.approx.f32` with a correction term for the rounding of
//!   `x * log2(e)`: about 2 ulp over the whole range, denormals kept. With
//!   a half-type result, plain `ex2.approx.f32(x * log2(e))` (up to 2^-17
//!   relative, invisible after rounding to the half type). `exp2`:
//!   `ex2.approx.f32`, 2 ulp. `sigmoid`, `silu`, `tanh` (for `|x| >= 0.625`)
//!   and `gelu` go through the accurate `exp` and `div.rn`: a few ulp; with
//!   a half-type result through the plain `ex2.approx` and `div.full.f32`
//!   (errors up to about 2^-17, invisible after rounding to the half type).
//! - `/`: `div.rn.f32` (exact) for `f32` results, `div.full.f32` (2 ulp)
//!   for half-type results.
//! - `log`, `log2`: own reduction and `atanh` series, about 1-2 ulp
//!   (`lg2.approx` only for 0, negative, infinite and NaN inputs, where it
//!   is exact).
//! - `sin`, `cos`: reduction by pi/2 (Cody-Waite for `|x| <= 1e5`, else
//!   Payne-Hanek in `f64`) and minimax polynomials: a few ulp (absolute
//!   error below 1e-7) over the whole range.
//! - `tanh` for `|x| < 0.625`: odd minimax polynomial, 1-2 ulp.
//! - `pow` (float): `exp2(b * log2|a|)` with C99 special cases: relative
//!   error about `|b log2|a|| * 2^-23` (1e-6 for results near 2^20).
//! - `erf`, the exact `gelu`, `log1p`, `expm1`, `atan2` (`special.rs`,
//!   own minimax polynomials; its tests replay each sequence in `f32` on
//!   the host against `f64`, and these are the maxima they find, with
//!   `exp`/`log` taken as correctly rounded): `erf` 1.5 ulp (`x + x P(x^2)`
//!   below 1, `1 - exp(Q(|x|))` above); `gelu` 1.6 ulp for `x >= 0`, on
//!   the negative side up to 14 ulp down to -2.8 (where `1 + erf`
//!   cancels; the tail from `x / sqrt 2 <= -1` uses `erfc` directly) and
//!   up to 45 ulp of values below 1e-5 further out, always within 1e-7
//!   absolutely; `log1p` 2.3 ulp (`ln(u) * x / (u - 1)`, `u = 1 + x`);
//!   `expm1` 1.8 ulp (`2^k (expm1(r) + 1) - 1` in one fused multiply-add);
//!   `atan2` 2.4 ulp (octant reduction, C99 zeros and infinities). With a
//!   half-type result they use the plain `ex2.approx` and `div.full.f32`.
//!   `softplus` and `logaddexp` are composites of `exp`, `log1p` and
//!   `max` (a few ulp, never overflowing).
//! - `fmod` (float): exact, from the integer significands (`fmod.rs`, `f32`
//!   and `f64`); `remainder` and `floor_divide` follow PyTorch's formulas
//!   on it. `floor`, `ceil`, `round` (to even), `trunc`: `cvt.r*i`, exact.
//! - Integer `floor_divide`, `remainder`, `fmod`, shifts (`int.rs`, 32 or
//!   64 bits): exact, with `crate::int_ops`' rules at division by zero and
//!   shifts past the width.
//! - Reductions combine in a tree (per thread, then shuffles, then shared
//!   memory), not left to right: sums differ from the interpreter by
//!   rounding. Half-type sums and products accumulate in `f32` and round
//!   once (the front end already casts them to `f32`).
//! - Conversions follow `convert.rs`'s one rule, as the interpreter does:
//!   float to integer truncates and saturates (NaN to 0); integers and
//!   `f64` to half types and FP8 round once, correctly.

mod attention;
mod bitonic;
mod builder;
mod col_lookback;
mod elementwise;
mod eval;
mod expr;
mod f64alg;
mod f64erf;
#[cfg(test)]
mod f64model;
mod f64ops;
mod f64trig;
mod fmod;
mod fp8;
mod gather;
mod int;
pub mod launch;
mod lookback;
mod math;
mod math_f64;
pub mod matmul;
mod memory;
mod module;
mod online;
mod ops;
mod pairs;
mod philox;
mod pick;
pub mod ptxas;
mod radix;
mod reduce;
mod scan;
mod scan_cols;
mod scan_state;
mod scatter;
mod select;
mod sort;
mod sort_cx;
mod special;
mod split;
mod target;

use crate::ir::{Gather, Inst, Kernel, KernelKind};
pub use attention::mma::MAX_DIM as ATTENTION_MMA_MAX_DIM;
pub use attention::split::scratch as attention_scratch;
use builder::{ins, Builder};
pub use launch::Plan;
pub use matmul::scratch as matmul_scratch;
use module::{entry_name, module, prologue};
pub use module::{scalar_param, Launch, MapElem, PtxKernel, TensorMap};
pub use scan::{status_len as scan_status_len, status_zeroed_len as scan_status_zeroed_len};
pub use target::Target;

/// What the environment decides about `kernel`'s code beyond the kernel
/// and the target, as a hash to mix into a cache key: for attention
/// kernels `SMELT_ATTENTION_MMA`, `SMELT_ATTENTION_TILE` and
/// `SMELT_ATTENTION_SPLITS`, for matmuls `SMELT_MATMUL_MMA`,
/// `SMELT_MATMUL_WGMMA`, `SMELT_MATMUL_TMA`, `SMELT_MATMUL_SPLIT_CLUSTER`,
/// `SMELT_MATMUL_WS`, `SMELT_MATMUL_PERSIST`, `SMELT_MATMUL_TILE` and
/// `SMELT_MATMUL_SPLITS` (the first six as bits, and `SMELT_MATMUL_WS=0` as a seventh, set when not at their default, so that the key of
/// every setting left at its default stays as it was); 0 for the others.
/// Without it a module cached under one setting would be reused under
/// another.
pub fn env_key(kernel: &Kernel) -> u64 {
    match kernel.kind {
        KernelKind::Attention => attention::env_key(),
        KernelKind::Matmul => {
            use std::hash::{Hash, Hasher};
            let off = |knob| u64::from(!crate::env::flag(knob, true));
            let switches = off("SMELT_MATMUL_MMA")
                | off("SMELT_MATMUL_WGMMA") << 1
                | off("SMELT_MATMUL_TMA") << 2
                | off("SMELT_MATMUL_SPLIT_CLUSTER") << 3
                | u64::from(crate::env::flag("SMELT_MATMUL_WS", false)) << 63
                | u64::from(crate::env::flag("SMELT_MATMUL_PERSIST", false)) << 62
                | off("SMELT_MATMUL_WS") << 61;
            let knobs = matmul::env_knobs();
            if knobs == (None, None) {
                return switches;
            }
            let mut h = crate::fnv::Fnv1a::default();
            knobs.hash(&mut h);
            switches ^ h.finish() << 4
        }
        _ => 0,
    }
}

/// `kernel`, an attention kernel, lowered with the tensor-core emitter
/// and CTA tile `tile` where that emitter takes it (else, or for `tile`
/// `None`, the FMA one), as [`emit`] does with `SMELT_ATTENTION_TILE` set
/// to `tile`, with its keys split `splits` ways
/// (0 or 1: none), as [`emit`] does with `SMELT_ATTENTION_SPLITS` set to
/// `splits`: at most what the kernel's scratch buffer holds
/// ([`attention_scratch`]), into key ranges that are whole key tiles.
///
/// # Errors
/// As [`emit`].
pub fn emit_attention_split(
    kernel: &Kernel,
    target: &Target,
    tile: Option<&crate::env::AttentionTile>,
    splits: usize,
) -> Result<PtxKernel, String> {
    validate(kernel, target)?;
    attention::emit_tile(kernel, target, tile, Some(splits))
}

/// Lowers `kernel` for `target`: half-precision matmuls through the
/// tensor-core emitter ([`matmul`]), everything else by [`launch::choose`]'s
/// plan.
///
/// Kernel parameters, in order: one `.u64` global pointer per input, then
/// one per output, then 8 bytes per scalar parameter holding
/// [`scalar_param`]'s value, then, for a kernel with indirect loads or
/// adds ([`Kernel::has_indirect`]), a `.u64` pointer to a `u32` error flag that
/// the kernel sets to 1 where an index is out of range; nothing else. Every buffer must be 16-byte
/// aligned.
/// Errors on an unsupported target (below sm_80) or a malformed kernel.
pub fn emit(kernel: &Kernel, target: &Target) -> Result<PtxKernel, String> {
    validate(kernel, target)?;
    if kernel.kind == KernelKind::Attention {
        return attention::emit(kernel, target);
    }
    if let Some(p) = matmul::emit(kernel, target) {
        return Ok(p);
    }
    emit_plan(kernel, target, &launch::choose(kernel, target))
}

/// Lowers `kernel` with a given mapping instead of the heuristic's (for
/// autotuning: any [`Plan`] of the kernel's kind is correct, see
/// [`launch::valid`]).
pub fn emit_plan(kernel: &Kernel, target: &Target, plan: &Plan) -> Result<PtxKernel, String> {
    validate(kernel, target)?;
    if kernel.kind == KernelKind::Attention {
        return Err(format!(
            "kernel {}: attention kernels have their own mapping",
            kernel.name
        ));
    }
    launch::valid(kernel, plan)?;
    let cluster = match plan {
        Plan::Rows(p) => p.cluster,
        Plan::Elementwise(_) | Plan::Scan(_) | Plan::Sort(_) => 1,
    };
    if cluster > 1 && target.sm < 90 {
        return Err(format!(
            "kernel {}: clusters of CTAs need sm_90, the target is sm_{}",
            kernel.name, target.sm
        ));
    }
    let entry = entry_name(kernel);
    let smem = format!("{entry}_red");
    let mut b = Builder::default();
    let (params, cx) = prologue(kernel, target, &entry, &mut b);
    let (block, grid, shared, min_ctas) = match plan {
        Plan::Elementwise(p) => {
            elementwise::emit(&mut b, &cx, p);
            (p.block, p.grid, 0, 1)
        }
        Plan::Rows(p) => {
            let shared = reduce::emit(&mut b, &cx, p, &smem);
            (p.block, p.grid, shared, p.min_ctas)
        }
        Plan::Scan(p) => {
            let shared = scan::emit(&mut b, &cx, p, &smem);
            (p.block, p.grid, shared, 1)
        }
        Plan::Sort(p) => return Ok(sort::emit(kernel, target, p)),
    };
    let mut directives = format!(".maxntid {block}, 1, 1\n");
    if min_ctas > 1 {
        directives += &format!(".minnctapersm {min_ctas}\n");
    }
    if cluster > 1 {
        directives += &format!(".reqnctapercluster {cluster}, 1, 1\n");
    }
    ins!(b, "ret");
    let shared_decl = if shared > 0 {
        format!(".shared .align 8 .b8 {smem}[{shared}];\n\n")
    } else {
        String::new()
    };
    let ptx = module(
        kernel,
        target,
        &entry,
        &params,
        &shared_decl,
        &directives,
        b,
    );
    Ok(PtxKernel::single(ptx, entry, grid, block, 0))
}

fn validate(k: &Kernel, target: &Target) -> Result<(), String> {
    let bad = |what: String| Err(format!("kernel {}: {what}", k.name));
    if target.sm < 80 {
        return Err(format!(
            "PTX backend needs sm_80 or newer, got sm_{}",
            target.sm
        ));
    }
    if k.n_kept > k.ranges.len() || k.ranges.iter().any(|r| *r < 0) {
        return bad(format!("bad domain {:?} with {} kept", k.ranges, k.n_kept));
    }
    k.check_scalars()?;
    for (i, n) in k.insts.iter().enumerate() {
        if n.inst.operands().iter().any(|o| *o >= i) {
            return bad(format!("instruction {i} uses a later value"));
        }
        match n.inst {
            Inst::Load { input, .. } | Inst::Gather(Gather { input, .. })
                if input >= k.inputs.len() =>
            {
                return bad(format!("instruction {i} loads missing input {input}"));
            }
            Inst::Gather(Gather { at, .. }) if !k.insts[at].dtype.is_index() => {
                return bad(format!(
                    "instruction {i} gathers at a {} value",
                    k.insts[at].dtype
                ));
            }
            _ => {}
        }
    }
    for s in &k.stores {
        if s.output >= k.outputs.len() || s.operands().iter().any(|o| *o >= k.insts.len()) {
            return bad(format!(
                "store to out{} of %{} is out of range",
                s.output, s.value
            ));
        }
        if let crate::StoreKind::AddAt { at, .. } = s.kind {
            let reduced = k.n_kept < k.ranges.len();
            if reduced || k.kind != crate::KernelKind::Scatter {
                return bad("adds at data-dependent positions need a scatter kernel without reduced variables".into());
            }
            let into = k.outputs[s.output].dtype;
            let atomic = (into.is_float() && !into.is_fp8())
                || matches!(into, crate::DType::I32 | crate::DType::I64);
            if !k.insts[at].dtype.is_index() || !atomic {
                return bad(format!(
                    "an add into a {} output at a {} position",
                    k.outputs[s.output].dtype, k.insts[at].dtype
                ));
            }
        }
    }
    Ok(())
}
