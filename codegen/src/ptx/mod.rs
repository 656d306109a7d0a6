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
//!
//! Buffers must be at least 16-byte aligned (as device allocations are):
//! vector accesses rely on it.
//!
//! # Numerics
//! Half types compute in `f32` and are rounded to the half type after
//! every instruction, as the interpreter does. Bools are predicates in
//! registers and bytes in memory. `i32` arithmetic wraps. Exact ops use the
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
//! - Reductions combine in a tree (per thread, then shuffles, then shared
//!   memory), not left to right: sums differ from the interpreter by
//!   rounding. Half-type sums and products accumulate in `f32` and round
//!   once (the front end already casts them to `f32`).
//! - `f32` to `i32` conversion wraps as the interpreter does (through
//!   `s64`); `i32` to half types rounds once, correctly.

mod builder;
mod elementwise;
mod eval;
mod expr;
pub mod launch;
mod math;
pub mod matmul;
mod memory;
mod online;
mod ops;
pub mod ptxas;
mod reduce;
mod target;

use crate::ir::{Inst, Kernel, PARAM_BYTES};
use crate::DType;
use builder::{ins, Builder, RegKind};
use eval::Cx;
use expr::Width;
pub use launch::Plan;
pub use target::Target;

/// A kernel lowered to PTX, with its launch configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxKernel {
    /// The complete module: `.version 8.0`, `.target sm_80` or `sm_90`,
    /// `.address_size 64`, one `.entry`.
    pub ptx: String,
    /// Name of the `.entry`.
    pub entry: String,
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    /// Dynamic shared memory to launch with (0 but for the tensor-core
    /// matmul's pipeline; above 48 KiB the launcher raises the limit).
    pub shared_bytes: u32,
}

/// Lowers `kernel` for `target`: half-precision matmuls through the
/// tensor-core emitter ([`matmul`]), everything else by [`launch::choose`]'s
/// plan.
///
/// Kernel parameters, in order: one `.u64` global pointer per input, then
/// one per output, then 8 bytes per scalar parameter holding
/// [`scalar_param`]'s value; nothing else. Every buffer must be 16-byte
/// aligned.
/// Errors on an unsupported target (below sm_80) or a malformed kernel.
pub fn emit(kernel: &Kernel, target: &Target) -> Result<PtxKernel, String> {
    validate(kernel, target)?;
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
    launch::valid(kernel, plan)?;
    let cluster = match plan {
        Plan::Rows(p) => p.cluster,
        Plan::Elementwise(_) => 1,
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
    let (params, cx) = prologue(kernel, &entry, &mut b);
    let (block, grid, shared, min_ctas) = match plan {
        Plan::Elementwise(p) => {
            elementwise::emit(&mut b, &cx, p);
            (p.block, p.grid, 0, 1)
        }
        Plan::Rows(p) => {
            let shared = reduce::emit(&mut b, &cx, p, &smem);
            (p.block, p.grid, shared, p.min_ctas)
        }
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
        format!(".shared .align 4 .b8 {smem}[{shared}];\n\n")
    } else {
        String::new()
    };
    Ok(PtxKernel {
        ptx: module(
            kernel,
            target,
            &entry,
            &params,
            &shared_decl,
            &directives,
            b,
        ),
        entry,
        grid: (grid, 1, 1),
        block: (block, 1, 1),
        shared_bytes: 0,
    })
}

/// The 8 bytes a launch passes for a scalar parameter of dtype `dt` holding
/// `value`, as a little-endian `u64`. The value is rounded to `dt` by
/// [`DType::round`], as the interpreter does, and passed as the
/// kernel's registers hold it: the bits of an `f32` for every float type
/// (halves compute in `f32`; a half value is exact there, and the kernel
/// then needs no conversion), of an `i32`, or 0/1 for a bool.
pub fn scalar_param(dt: DType, value: f64) -> u64 {
    let v = dt.round(value);
    match dt {
        DType::Bool => u64::from(v != 0.0),
        DType::I32 => u64::from(v as i32 as u32),
        _ => u64::from((v as f32).to_bits()),
    }
}

/// Declares the entry's parameters (one `.u64` pointer per input, then per
/// output, then an 8-byte parameter per scalar: [`Kernel::param_bytes`]
/// counts exactly these) and loads the pointers as global addresses at the
/// top of the body (scalars are read where used); returns the parameter
/// declarations and the lowering context.
fn prologue<'a>(kernel: &'a Kernel, entry: &str, b: &mut Builder) -> (Vec<String>, Cx<'a>) {
    let pointers: Vec<String> = (0..kernel.inputs.len() + kernel.outputs.len())
        .map(|i| format!("{entry}_param_{i}"))
        .collect();
    let scalars: Vec<String> = (0..kernel.scalars.len())
        .map(|s| format!("{entry}_scalar_{s}"))
        .collect();
    let mut ptrs = Vec::new();
    for p in &pointers {
        let (raw, g) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
        ins!(b, "ld.param.u64 {raw}, [{p}]");
        ins!(b, "cvta.to.global.u64 {g}, {raw}");
        ptrs.push(g);
    }
    let decls = pointers
        .iter()
        .map(|p| format!("\t.param .u64 {p}"))
        .chain(
            scalars
                .iter()
                .map(|s| format!("\t.param .align {PARAM_BYTES} .b8 {s}[{PARAM_BYTES}]")),
        )
        .collect();
    let outputs = ptrs.split_off(kernel.inputs.len());
    let cx = Cx {
        k: kernel,
        level: kernel.element_level(),
        lane_var: kernel.ranges.len().saturating_sub(1),
        lane_dep: eval::depends_on(kernel, kernel.ranges.len().saturating_sub(1)),
        width: width(kernel),
        inputs: ptrs,
        outputs,
        scalars,
    };
    (decls, cx)
}

/// The complete module text around a finished body: header, module-level
/// declarations `decls`, the entry with its parameter declarations
/// `params` (from [`prologue`]) and `directives`.
fn module(
    kernel: &Kernel,
    target: &Target,
    entry: &str,
    params: &[String],
    decls: &str,
    directives: &str,
    body: Builder,
) -> String {
    let sm = if target.sm >= 90 { 90 } else { 80 };
    format!(
        ".version 8.0\n.target sm_{sm}\n.address_size 64\n\n{decls}// {}\n.visible .entry {entry}(\n{}\n)\n{directives}{{\n{}}}\n",
        kernel.name.replace('\n', " "),
        params.join(",\n"),
        body.finish()
    )
}

/// The kernel name restricted to identifier characters, with a short hash
/// of its code.
fn entry_name(k: &Kernel) -> String {
    let clean: String = k
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(48)
        .collect();
    format!("smelt_{clean}_{:08x}", k.code_hash() as u32)
}

/// Whether every index fits in 32-bit arithmetic (with room for loop
/// counters running past the domain).
fn width(k: &Kernel) -> Width {
    const LIMIT: i128 = i32::MAX as i128 / 2;
    let r = &k.ranges;
    let numel: i128 = r.iter().map(|x| *x as i128).product();
    let cond = |c: &crate::Cond| {
        c.checks()
            .iter()
            .map(|(e, lo, hi)| {
                expr::magnitude(e, r) + lo.unsigned_abs() as i128 + hi.unsigned_abs() as i128
            })
            .max()
            .unwrap_or(0)
    };
    let mut m = numel;
    for n in &k.insts {
        m = m.max(match &n.inst {
            Inst::Load { index, valid, .. } => cond(valid).max(expr::magnitude(index, r)),
            Inst::Valid(c) => cond(c),
            _ => 0,
        });
    }
    for s in &k.stores {
        m = m.max(expr::magnitude(&s.index, r));
    }
    Width { wide: m > LIMIT }
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
        if let Inst::Load { input, .. } = n.inst {
            if input >= k.inputs.len() {
                return bad(format!("instruction {i} loads missing input {input}"));
            }
        }
    }
    for s in &k.stores {
        if s.output >= k.outputs.len() || s.value >= k.insts.len() {
            return bad(format!(
                "store to out{} of %{} is out of range",
                s.output, s.value
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::scalar_param;
    use crate::DType;

    /// Scalars travel rounded to their dtype (as the interpreter rounds
    /// them), in the register form the kernel reads.
    #[test]
    fn scalar_params_are_rounded_and_encoded() {
        let f32_bits = |v: f64| u64::from((v as f32).to_bits());
        assert_eq!(scalar_param(DType::F32, 0.1), f32_bits(0.1));
        // Halves: the half value, exact as an f32.
        let h = half::f16::from_f64(0.1).to_f64();
        assert_ne!(h, 0.1f32 as f64);
        assert_eq!(scalar_param(DType::F16, 0.1), f32_bits(h));
        let b = half::bf16::from_f64(-3.3).to_f64();
        assert_eq!(scalar_param(DType::BF16, -3.3), f32_bits(b));
        // Integers truncate, saturate, and travel as two's complement bits.
        assert_eq!(scalar_param(DType::I32, -7.9), u64::from((-7i32) as u32));
        assert_eq!(scalar_param(DType::I32, 1e20), u64::from(i32::MAX as u32));
        assert_eq!(scalar_param(DType::Bool, 0.5), 1);
        assert_eq!(scalar_param(DType::Bool, 0.0), 0);
    }
}
