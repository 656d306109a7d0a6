//! The module around a kernel body: the entry's name and parameters (the
//! one place that declares them, as [`Kernel::param_bytes`] counts them),
//! the lowering context they give, and the module text.

use super::builder::{ins, Builder, RegKind};
use super::eval::{self, Cx};
use super::expr::{self, Width};
use super::target::Target;
use crate::ir::{Gather, Inst, Kernel, PARAM_BYTES};
use crate::DType;

/// A kernel lowered to PTX: one module and the launches that compute the
/// kernel, queued in order on one stream with the same parameters (one for
/// most kernels; a long-row sort's passes are several, see the `sort`
/// module).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxKernel {
    /// The complete module: `.version 8.0`, `.target sm_80` or `sm_90`,
    /// `.address_size 64`, one `.entry` per launch.
    pub ptx: String,
    /// The launches, in order (at least one).
    pub launches: Vec<Launch>,
    /// The tensor maps the launcher encodes and passes by value after
    /// the other parameters, in order (entries that declare them: see
    /// [`map_param`]).
    pub maps: Vec<TensorMap>,
}

/// A tensor map (`CUtensorMap`) of the copy engine's bulk tensor copies
/// (`cp.async.bulk.tensor`, sm_90) over input `input`: elements of kind
/// `elem`, three dimensions (element 0 fastest and contiguous), boxes of
/// `boxes` elements stored with the 128-byte swizzle, zeros read past
/// each dimension's end. Its address is the input's device pointer:
/// encoded at each launch, so it follows whatever buffer the launch binds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorMap {
    /// The input's position in [`Kernel::inputs`].
    pub input: usize,
    /// What the elements are, and what the copy does to them.
    pub elem: MapElem,
    /// Elements per dimension.
    pub dims: [u64; 3],
    /// Bytes between consecutive elements of dimensions 1 and 2
    /// (multiples of 16).
    pub strides: [u64; 2],
    /// Elements per dimension of one copy's box (dimension 0's 128 bytes).
    pub boxes: [u32; 3],
}

/// The elements a [`TensorMap`] copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapElem {
    /// Bytes, copied as they are (FP8).
    B8,
    /// 2-byte elements, copied as they are (`f16`, `bf16`).
    B16,
    /// `f32` rounded to TF32 by the copy engine on the way (to nearest,
    /// ties to even; NaN and infinities unchanged: `RoundTf32`).
    Tf32,
}

impl MapElem {
    /// Bytes per element.
    pub fn bytes(self) -> u32 {
        match self {
            MapElem::B8 => 1,
            MapElem::B16 => 2,
            MapElem::Tf32 => 4,
        }
    }
}

/// The batch dimension of a tensor map over an input of `len` elements
/// read at element offsets `Σ coefs[i] · x_i` (a view's constant among
/// them): its unit, the greatest common divisor of the coefficients (so
/// every offset is a whole number of units; `default` where all are 0),
/// and how many units the input spans.
pub(super) fn batch_units(
    coefs: impl IntoIterator<Item = i64>,
    default: i64,
    len: u64,
) -> (i64, u64) {
    fn gcd(a: i64, b: i64) -> i64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let unit = coefs
        .into_iter()
        .fold(0, |u, c| gcd(u, c.unsigned_abs() as i64));
    let unit = if unit == 0 { default } else { unit };
    (unit, (len.max(1) - 1) / unit as u64 + 1)
}

/// The name of tensor map `i`'s parameter in entry `entry` (declared
/// `.param .align 64 .b8 NAME[128]` after the others by [`entry_with_maps`]).
pub(super) fn map_param(entry: &str, i: usize) -> String {
    format!("{entry}_map_{i}")
}

/// The declaration of tensor map `i`'s parameter in entry `entry`.
pub(super) fn map_param_decl(entry: &str, i: usize) -> String {
    format!("\t.param .align 64 .b8 {}[128]", map_param(entry, i))
}

/// One launch of a [`PtxKernel`]: an entry of its module and its shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Name of the `.entry`.
    pub entry: String,
    /// CTAs per grid dimension.
    pub grid: (u32, u32, u32),
    /// Threads per CTA dimension.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory to launch with (the tensor-core matmul's
    /// pipeline, a sort's pairs; above 48 KiB the launcher raises the
    /// limit).
    pub shared_bytes: u32,
}

impl PtxKernel {
    /// A module launched once, as `entry` over a 1-d grid of `grid`
    /// 1-d CTAs of `block` threads, with `shared_bytes` of dynamic shared
    /// memory.
    pub fn single(ptx: String, entry: String, grid: u32, block: u32, shared_bytes: u32) -> Self {
        PtxKernel {
            ptx,
            launches: vec![Launch {
                entry,
                grid: (grid, 1, 1),
                block: (block, 1, 1),
                shared_bytes,
            }],
            maps: Vec::new(),
        }
    }
}

/// The 8 bytes a launch passes for a scalar parameter of dtype `dt` holding
/// `value`, as a little-endian `u64`. The value is converted to `dt` by
/// the one conversion rule, as the interpreter does, and passed as the
/// kernel's registers hold it: the bits of an `f32` for `F32` and the
/// half types (halves compute in `f32`; a half value is exact there, and
/// the kernel then needs no conversion), of an `f64`, of an `i64`, of an
/// `i32` for the narrower integers (sign- or zero-extended from their
/// type), or 0/1 for a bool.
pub fn scalar_param(dt: DType, value: f64) -> u64 {
    match dt {
        DType::F64 => value.to_bits(),
        DType::I64 => dt.saturate(value) as u64,
        _ if dt.is_float() => u64::from((dt.round(value) as f32).to_bits()),
        _ => u64::from(dt.saturate(value) as i32 as u32),
    }
}

/// Declares the entry's parameters (one `.u64` pointer per input, then per
/// output, then an 8-byte parameter per scalar, then the error flag's
/// `.u64` pointer if the kernel has indirect loads or adds: [`Kernel::param_bytes`]
/// counts exactly these) and loads the pointers as global addresses at the
/// top of the body (scalars are read where used); returns the parameter
/// declarations and the lowering context.
pub(super) fn prologue<'a>(
    kernel: &'a Kernel,
    target: &Target,
    entry: &str,
    b: &mut Builder,
) -> (Vec<String>, Cx<'a>) {
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
    let flag = kernel.has_indirect().then(|| format!("{entry}_err"));
    let err = flag.as_ref().map(|f| {
        let (raw, g) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
        ins!(b, "ld.param.u64 {raw}, [{f}]");
        ins!(b, "cvta.to.global.u64 {g}, {raw}");
        g
    });
    let decls = pointers
        .iter()
        .map(|p| format!("\t.param .u64 {p}"))
        .chain(
            scalars
                .iter()
                .map(|s| format!("\t.param .align {PARAM_BYTES} .b8 {s}[{PARAM_BYTES}]")),
        )
        .chain(flag.iter().map(|f| format!("\t.param .u64 {f}")))
        .collect();
    let outputs = ptrs.split_off(kernel.inputs.len());
    let cx = Cx {
        k: kernel,
        level: kernel.element_level(),
        lane_var: kernel.ranges.len().saturating_sub(1),
        lane_runs: eval::lane_runs(kernel, kernel.ranges.len().saturating_sub(1), None),
        width: width(kernel),
        inputs: ptrs,
        outputs,
        scalars,
        err,
        sm: target.sm,
    };
    (decls, cx)
}

/// The complete module text around a finished body: header, module-level
/// declarations `decls`, the entry with its parameter declarations
/// `params` (from [`prologue`]) and `directives`.
pub(super) fn module(
    kernel: &Kernel,
    target: &Target,
    entry: &str,
    params: &[String],
    decls: &str,
    directives: &str,
    body: Builder,
) -> String {
    header(target) + &entry_text(kernel, entry, params, decls, directives, body)
}

/// One entry of a multi-entry module: named `entry`, its parameters
/// declared by [`prologue`], at most `block` threads per CTA, its body
/// written by `body` (given the builder, the lowering context and the
/// name of its shared memory; returns that memory's size in bytes, 0 for
/// none, and its alignment: 16, or 1024 where the 128-byte swizzle of
/// `wgmma` operands must line up). The shared memory is dynamic (sized at launch, so it may pass
/// the 48 KiB a CTA may declare statically): returns the entry's text and
/// the bytes to launch it with.
pub(super) fn entry(
    kernel: &Kernel,
    target: &Target,
    entry: &str,
    block: u32,
    body: impl FnOnce(&mut Builder, &Cx, &str) -> (u32, u32),
) -> (String, u32) {
    entry_with_maps(kernel, target, (entry, 0), block, body)
}

/// [`entry`] with `maps` tensor-map parameters ([`map_param`]) after the
/// others.
pub(super) fn entry_with_maps(
    kernel: &Kernel,
    target: &Target,
    (entry, maps): (&str, usize),
    block: u32,
    body: impl FnOnce(&mut Builder, &Cx, &str) -> (u32, u32),
) -> (String, u32) {
    let mut b = Builder::default();
    let (mut params, cx) = prologue(kernel, target, entry, &mut b);
    params.extend((0..maps).map(|i| map_param_decl(entry, i)));
    let smem = format!("{entry}_smem");
    let (shared, align) = body(&mut b, &cx, &smem);
    ins!(b, "ret");
    let decls = if shared > 0 {
        format!(".extern .shared .align {align} .b8 {smem}[];\n\n")
    } else {
        String::new()
    };
    let directives = format!(".maxntid {block}, 1, 1\n");
    let text = entry_text(kernel, entry, &params, &decls, &directives, b);
    (text, shared)
}

/// The module header for `target`.
pub(super) fn header(target: &Target) -> String {
    let sm = if target.sm >= 90 { 90 } else { 80 };
    format!(".version 8.0\n.target sm_{sm}\n.address_size 64\n\n")
}

/// One entry of a module (see [`module`]), preceded by its module-level
/// declarations `decls`.
pub(super) fn entry_text(
    kernel: &Kernel,
    entry: &str,
    params: &[String],
    decls: &str,
    directives: &str,
    body: Builder,
) -> String {
    format!(
        "{decls}// {}\n.visible .entry {entry}(\n{}\n)\n{directives}{{\n{}}}\n",
        kernel.name.replace('\n', " "),
        params.join(",\n"),
        body.finish()
    )
}

/// The kernel name restricted to identifier characters, with a short hash
/// of its code.
pub(super) fn entry_name(k: &Kernel) -> String {
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
            Inst::Gather(Gather {
                index,
                valid,
                stride,
                len,
                ..
            }) => cond(valid)
                .max(expr::magnitude(index, r) + (*len as i128) * (stride.unsigned_abs() as i128)),
            Inst::Valid(c) => cond(c),
            Inst::Index(e) => expr::magnitude(e, r),
            _ => 0,
        });
    }
    for s in &k.stores {
        let reach = match s.kind {
            // Like a gather: the position along the axis is data.
            crate::StoreKind::AddAt { stride, len, .. } => {
                (len as i128) * (stride.unsigned_abs() as i128)
            }
            crate::StoreKind::Write => 0,
        };
        m = m.max(expr::magnitude(&s.index, r) + reach);
    }
    Width { wide: m > LIMIT }
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
