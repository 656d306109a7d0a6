//! GPU attention kernels ([`crate::KernelKind::Attention`]): [`emit`] picks
//! one of two emitters sharing the parts' evaluation (this module) and the
//! tiles' staging into shared memory (`stage.rs`):
//! - `mma.rs`: tensor cores (`mma.sync` `m16n8k16`, f32 accumulation) for
//!   `q`, `k` and `v` that are all `f16` or all `bf16` values (each part a
//!   cast of a half-typed value to the accumulation type), on sm_80 and
//!   sm_90;
//! - `fma.rs`: plain FMA arithmetic in the accumulation type, exact for
//!   `f32` and `f64` inputs and the fallback for everything else.
//!
//! `SMELT_ATTENTION_MMA=0` sends every attention kernel to the FMA
//! emitter (for bisecting and for testing that kernel on half inputs);
//! `SMELT_ATTENTION_TILE` picks the tensor-core kernel's CTA shape
//! ([`AttentionTile`]); `SMELT_ATTENTION_SPLITS` the split-KV count
//! (`split.rs`: CTAs over ranges of keys and a second entry that merges
//! them, for kernels with too few CTAs); `SMELT_ATTENTION_TMA=0` keeps the
//! two-warpgroup `wgmma` kernel's key tiles on `cp.async`, and
//! `SMELT_ATTENTION_PINGPONG=0|1` its warpgroups' MMAs unordered or in turns
//! (`mma/tma.rs`), and `SMELT_ATTENTION_SUMS=0` the row sums of `wgmma`
//! kernels at head dim 64 on the FMA pipe (`mma.rs`, `Geom::ones`). All
//! are read at each emission,
//! and [`env_key`] folds them into the module caches' keys, so each
//! setting is a kernel of its own.

mod fma;
pub(super) mod mma;
pub(super) mod split;
pub(super) mod stage;

use super::builder::{ins, Builder, Reg, RegKind};
use super::eval::{uses_var, Cx, Point, Vals};
use super::module::PtxKernel;
use super::ops::{self, Value};
use super::target::Target;
use crate::attention::{part, Attention};
use crate::env::{self, AttentionTile};
use crate::ir::{Inst, Kernel, Val};
use crate::{BinaryOp, DType};

/// What the environment asks of the tensor-core kernel: `None` under
/// `SMELT_ATTENTION_MMA=0` (the FMA kernel for every input), else
/// `SMELT_ATTENTION_TILE`'s tile, or `Some(None)` for [`measured_tile`]'s
/// choice per kernel.
fn env_tile() -> Option<Option<AttentionTile>> {
    env::flag("SMELT_ATTENTION_MMA", true)
        .then(|| env::var("SMELT_ATTENTION_TILE", env::parse_attention_tile))
}

/// A hash of what the environment decides about attention kernels'
/// code ([`env_tile`], [`split::env_splits`]), fixed in algorithm like
/// `Kernel::code_hash` (it joins that hash in the on-disk PTX cache's
/// keys).
pub fn env_key() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = crate::fnv::Fnv1a::default();
    env_tile().hash(&mut h);
    split::env_splits().hash(&mut h);
    (mma::env_tma(), mma::env_sums()).hash(&mut h);
    h.finish()
}

/// The tile for `k` when the environment names none, from the sweeps on
/// an H200 (BENCHMARKS.md, "Attention"):
/// - sm_90, more than 64 query rows, head dims up to 128 (2026-11-27,
///   the pipelined `wgmma` loop with the copy engine and ping-pong for two
///   warpgroups): past head dim 64 two warpgroups with key tiles of 128,
///   causal row blocks last first (`8x16x128w`, `8x16x128rw`: 469-472 /
///   544-561 TFLOP/s at d = 128 where 64-key tiles made 373-462; reversed
///   causal 526-529 at 8192 keys where in order made 502-518); at d = 64
///   without a mask three warpgroups of 128-key tiles (`12x16x128w`,
///   2026-11-28: 415-417 without ping-pong and 408-411 with it, 2026-11-29
///   with the row sums on the tensor cores 441 with it and 434 without;
///   `8x16x64w` made 385-393 and `12x16x64w` 323-324; earlier
///   `8x16x64w` had beaten one warpgroup on `cp.async`, `4x16x64w`,
///   341-343 to 322-329) and `8x16x64rw` causal (2026-11-29, once each
///   warpgroup stops at its own rows' last key: 313-316 where
///   `4x16x64w`, the default before, made 308-309, `8x16x64w` 313-315
///   and `12x16x128rw` 305-307).
/// - sm_90, at most 64 query rows (decode), head dims up to 128
///   (2026-11-27, late): one warpgroup of 64-key tiles on `cp.async`
///   (`4x16x64w`), 4.50-4.66 TB/s of cache read where the `mma.sync`
///   kernel below made 4.0-4.3 (a sweep of its tiles, stages and split
///   counts moved it at most 2%); two warpgroups on the copy engine made
///   4.0-4.4, one warpgroup on the copy engine 4.51-4.62.
/// - else `mma.sync` (2026-11-27, before `wgmma`): 4 warps of 32 rows
///   (128-row CTAs sharing each `k`/`v` fragment between two row blocks)
///   were 5-20% faster than 4 x 16 on every prefill shape but causal `d =
///   64` (6-11% slower there); one-row decode was 40% slower with 128-row
///   CTAs, so short queries keep 64 rows (sm_80's decode).
fn measured_tile(k: &Kernel, a: &Attention, target: &Target) -> AttentionTile {
    let r = |v: usize| k.ranges[v];
    let wide = r(a.vars.d).max(r(a.vars.e));
    let prefill = r(a.vars.i) > 64;
    if target.sm >= 90 && !prefill && wide <= 128 {
        // Decode: one warpgroup, its MMAs idle but for the few query rows,
        // streams the cache fastest.
        return AttentionTile {
            warps: 4,
            bn: 64,
            wgmma: true,
            ..AttentionTile::DEFAULT
        };
    }
    if target.sm >= 90 && prefill && wide <= 128 {
        let causal = a.causal.is_some();
        let (warps, bn) = match (wide > 64, causal) {
            (true, _) => (8, 128),
            (false, false) => (12, 128),
            (false, true) => (8, 64),
        };
        return AttentionTile {
            warps,
            bn,
            wgmma: true,
            // Causal row blocks last first (the longest CTAs start first).
            reverse: causal,
            ..AttentionTile::DEFAULT
        };
    }
    if prefill && !(a.causal.is_some() && wide <= 64) {
        AttentionTile {
            rows: 32,
            ..AttentionTile::DEFAULT
        }
    } else {
        AttentionTile::DEFAULT
    }
}

/// Lowers an attention kernel with the tensor-core emitter where it
/// applies ([`mma::elem`]), with the environment's tile or
/// [`measured_tile`], else the FMA one; split as `SMELT_ATTENTION_SPLITS`
/// says, else by the rule ([`split::plan`]).
///
/// # Errors
/// A kernel that is not a well-formed attention kernel, sizes beyond the
/// 32-bit coordinates the kernels compute, or head dims too large.
pub fn emit(k: &Kernel, target: &Target) -> Result<PtxKernel, String> {
    let tile = match env_tile() {
        None => None,
        Some(Some(t)) => Some(t),
        Some(None) => Some(measured_tile(k, &k.attention()?, target)),
    };
    emit_tile(k, target, tile.as_ref(), split::env_splits())
}

/// Lowers an attention kernel with the tensor-core emitter and `tile`
/// where it applies, else (or for `tile` `None`) the FMA one, into
/// `splits` key ranges (0 or 1: none; at most what the kernel's scratch
/// holds, see [`split::plan`]) or, for `None`, as the rule says.
///
/// # Errors
/// As [`emit`].
pub fn emit_tile(
    k: &Kernel,
    target: &Target,
    tile: Option<&AttentionTile>,
    splits: Option<usize>,
) -> Result<PtxKernel, String> {
    let a = k.attention()?;
    if k.ranges.iter().any(|n| *n > i32::MAX as i64 / 2) {
        return Err(format!("attention kernel {}: a size exceeds 2^30", k.name));
    }
    // Unrounded logits, as the CPU's fused attention computes them.
    let k = &a.f32_logits(k);
    match (mma::elem(k, &a), tile) {
        (Some(elem), Some(t)) => mma::emit(k, target, &a, elem, t, splits),
        _ => fma::emit(k, target, &a, splits),
    }
}

/// The end of the keys that query rows `q0 .. q0 + rows` (a u32
/// register; rows past `lq` do not count) can see: `lk`, or under a
/// causal mask `j <= i + c` the key after the last row's last visible
/// one, `clamp(min(q0 + rows, lq) + c, 0, lk)`. Keys from there on have
/// `-inf` logits for every row (`Attention::causal`): they add nothing,
/// so a CTA's key loop ends there.
fn key_end(b: &mut Builder, k: &Kernel, a: &Attention, q0: Reg, rows: u32) -> Reg {
    let (lq, lk) = (k.ranges[a.vars.i], k.ranges[a.vars.j]);
    let Some(c) = a.causal else {
        return b.mov(RegKind::B32, "u32", lk);
    };
    b.comment("causal mask: the key loop ends after the last row's last visible key");
    let end = b.reg(RegKind::B32);
    ins!(b, "add.u32 {end}, {q0}, {rows}");
    ins!(b, "min.u32 {end}, {end}, {lq}");
    // Sizes are below 2^30 (`emit`) and `c` in `-lq..=lk`: no overflow.
    ins!(b, "add.s32 {end}, {end}, {}", c.offset);
    ins!(b, "max.s32 {end}, {end}, 0");
    ins!(b, "min.u32 {end}, {end}, {lk}");
    end
}

/// A CTA's batch variables (from its head index `head`, the last batch
/// variable fastest) and the coordinates the kernels set per point.
#[derive(Clone)]
struct Coords {
    vars: Vec<Option<Reg>>,
}

impl Coords {
    /// The batch variables of head `head` (u32).
    fn new(b: &mut Builder, cx: &Cx, a: &Attention, head: Reg) -> Coords {
        let k = cx.k;
        let mut vars = vec![None; k.ranges.len()];
        let mut rest = head;
        for bv in a.vars.batch.clone().rev() {
            let n = k.ranges[bv];
            let (x, q) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
            ins!(b, "rem.u32 {x}, {rest}, {n}");
            ins!(b, "div.u32 {q}, {rest}, {n}");
            vars[bv] = Some(widen(b, cx, x));
            rest = q;
        }
        Coords { vars }
    }

    /// The point at these batch variables with `(v1, x1)` and `(v2, x2)`
    /// set (32-bit coordinates), existing where `pred` holds.
    fn point(&self, b: &mut Builder, cx: &Cx, set: [(usize, Reg); 2], pred: Reg) -> Point {
        let mut vars = self.vars.clone();
        for (v, x) in set {
            vars[v] = Some(widen(b, cx, x));
        }
        Point {
            vars,
            lanes: 1,
            pred: Some(pred),
        }
    }
}

/// A 32-bit coordinate as an index variable of the kernel's width.
fn widen(b: &mut Builder, cx: &Cx, x: Reg) -> Reg {
    if cx.width.wide {
        let w = b.reg(RegKind::B64);
        ins!(b, "cvt.u64.u32 {w}, {x}");
        w
    } else {
        x
    }
}

/// How a logit is evaluated: all of its part's instructions (`insts`),
/// or, where a causal mask is known to keep the key ([`Unmasked`]),
/// without the mask.
#[derive(Clone, Copy)]
enum LogitInsts<'a> {
    All(&'a [Val]),
    Unmasked(&'a Unmasked),
}

/// The logit part (instructions `insts`) at query row `i`, key `j`, given
/// the score `dot` there and the values `known` already computed there
/// (see [`LogitSplit`]): a register of the accumulation type, `-inf`
/// where `key_ok` fails (a key past the last); loads run only where `ok`
/// holds.
#[allow(clippy::too_many_arguments)]
fn logit(
    b: &mut Builder,
    cx: &Cx,
    a: &Attention,
    c: &Coords,
    (insts, known): (LogitInsts, Vals),
    (i, j): (Reg, Reg),
    dot: Reg,
    (ok, key_ok): (Reg, Reg),
) -> Reg {
    let p = c.point(b, cx, [(a.vars.i, i), (a.vars.j, j)], ok);
    let mut vals = known;
    vals[a.dot] = Some(vec![Value {
        reg: dot,
        dtype: a.acc,
    }]);
    match insts {
        LogitInsts::All(insts) => cx.eval(b, &p, insts, &mut vals),
        LogitInsts::Unmasked(u) => {
            // The visible operand first, then the mask takes its value
            // (`eval` keeps values already known), then what reads it.
            cx.eval(b, &p, &u.before, &mut vals);
            if vals[u.mask].is_none() {
                vals[u.mask] = vals[u.visible].clone();
            }
            cx.eval(b, &p, &u.after, &mut vals);
        }
    }
    let l = vals[a.logit].as_ref().expect("logit evaluated")[0];
    let l = ops::convert(b, l, a.acc).reg;
    let (ty, kind) = acc_ty(a);
    let x = b.reg(kind);
    let neg_inf = acc_imm(a, f64::NEG_INFINITY);
    ins!(b, "selp.{ty} {x}, {l}, {neg_inf}, {key_ok}");
    x
}

/// The logit part's instructions (below the logit, not below the `Dot`).
fn logit_part(k: &Kernel, a: &Attention) -> Vec<Val> {
    part(k, &[a.logit], &[a.dot])
}

/// The logit part's instructions by what they read, so that a kernel
/// evaluating many logits of a row or of a key computes the shared ones
/// once: `row` reads neither the key `j` nor the `Dot` (a function of the
/// batch and `i`: a causal mask's row index, a scale), `col` reads `j`
/// but neither `i` nor the `Dot`, `rest` the others (SSA order each).
struct LogitSplit {
    row: Vec<Val>,
    col: Vec<Val>,
    rest: Vec<Val>,
    /// Under a causal mask, `rest` for keys the mask keeps.
    unmasked: Option<Unmasked>,
    /// Where the logit of a fast tile is the score times a per-row factor.
    scale: Option<Scale>,
}

/// A logit that, where a causal mask keeps the key (or without a mask),
/// is the `f32` score times `factor` (a per-row value: `split.row`), or
/// divided by it, through casts that keep `f32`. Where the factor is
/// positive and finite the row max of the logits is the factor times the
/// scores' (rounding is monotonic), so a kernel can take the maxima of
/// the raw scores and fold the factor into the exponential's FMA instead
/// of multiplying every score (FlashAttention's softmax scale).
#[derive(Clone, Copy)]
struct Scale {
    factor: Val,
    divides: bool,
}

/// The per-element logit instructions (a [`LogitSplit`]'s `rest`) for a
/// key that a causal mask keeps: the mask (a `Where`) is the value of its
/// operand `visible`, so its condition is not evaluated. `before` computes
/// `visible`, `after` the rest of the logit above the mask.
struct Unmasked {
    before: Vec<Val>,
    after: Vec<Val>,
    mask: Val,
    visible: Val,
}

impl LogitSplit {
    fn new(k: &Kernel, a: &Attention) -> LogitSplit {
        // Whether each instruction reads i, j or the Dot (operands come
        // first in SSA order).
        let n = k.insts.len();
        let (mut reads_i, mut reads_j) = (vec![false; n], vec![false; n]);
        for (v, node) in k.insts.iter().enumerate() {
            let (e, c) = node.inst.exprs();
            let ops = node.inst.operands();
            let dot = v == a.dot;
            reads_i[v] = dot || uses_var(e, c, a.vars.i) || ops.iter().any(|o| reads_i[*o]);
            reads_j[v] = dot || uses_var(e, c, a.vars.j) || ops.iter().any(|o| reads_j[*o]);
        }
        let mut s = LogitSplit {
            row: Vec::new(),
            col: Vec::new(),
            rest: Vec::new(),
            unmasked: None,
            scale: None,
        };
        for v in logit_part(k, a) {
            match (reads_i[v], reads_j[v]) {
                (_, false) => s.row.push(v),
                (false, true) => s.col.push(v),
                (true, true) => s.rest.push(v),
            }
        }
        s.unmasked = a.causal.map(|c| {
            let in_rest = |vs: Vec<Val>| -> Vec<Val> {
                vs.into_iter().filter(|v| s.rest.contains(v)).collect()
            };
            let before = in_rest(part(k, &[c.visible], &[a.dot]));
            let after = in_rest(part(k, &[a.logit], &[a.dot, c.mask]))
                .into_iter()
                .filter(|v| !before.contains(v))
                .collect();
            Unmasked {
                before,
                after,
                mask: c.mask,
                visible: c.visible,
            }
        });
        s.scale = s.find_scale(k, a);
        s
    }

    /// The [`Scale`] of the fast tiles' logit, if it has that form.
    fn find_scale(&self, k: &Kernel, a: &Attention) -> Option<Scale> {
        let fast: Vec<Val> = match &self.unmasked {
            Some(u) => u.before.iter().chain(&u.after).copied().collect(),
            None => self.rest.clone(),
        };
        let f32_at = |v: Val| k.insts[v].dtype == DType::F32;
        let mut found = None;
        let mut v = a.logit;
        while v != a.dot {
            if let Some(u) = self.unmasked.as_ref().filter(|u| u.mask == v) {
                v = u.visible;
                continue;
            }
            if !fast.contains(&v) || !f32_at(v) {
                return None;
            }
            let row = |x: Val| self.row.contains(&x);
            v = match k.insts[v].inst {
                Inst::Cast(x) if f32_at(x) => x,
                Inst::Binary(op, x, y) if found.is_none() => {
                    let (on, factor, divides) = match op {
                        BinaryOp::Mul if row(y) => (x, y, false),
                        BinaryOp::Mul if row(x) => (y, x, false),
                        BinaryOp::Div if row(y) => (x, y, true),
                        _ => return None,
                    };
                    found = Some(Scale { factor, divides });
                    on
                }
                _ => return None,
            };
        }
        found.filter(|_| f32_at(a.dot))
    }
}

/// The epilogue part's instructions (below the stores, not below the
/// `Attend`).
fn epilogue_part(k: &Kernel, a: &Attention) -> Vec<Val> {
    let roots: Vec<Val> = k.stores.iter().map(|st| st.value).collect();
    part(k, &roots, &[a.attend])
}

/// Stores `out` (the `Attend`'s values, of the accumulation type, at
/// output columns `e ..`: one, or one per lane of a `cx` whose lanes step
/// along `e`, [`Cx::with_lanes_along`]) at query row `i` through the
/// epilogue part (`insts`), where `ok` holds.
#[allow(clippy::too_many_arguments)]
fn store(
    b: &mut Builder,
    cx: &Cx,
    a: &Attention,
    c: &Coords,
    insts: &[Val],
    (i, e): (Reg, Reg),
    out: &[Value],
    ok: Reg,
) {
    let mut p = c.point(b, cx, [(a.vars.i, i), (a.vars.e, e)], ok);
    p.lanes = out.len();
    let mut vals: Vals = vec![None; cx.k.insts.len()];
    vals[a.attend] = Some(out.to_vec());
    cx.eval(b, &p, insts, &mut vals);
    for st in &cx.k.stores {
        cx.store(b, &p, st, &vals);
    }
}

/// The accumulation type's PTX type and register class.
fn acc_ty(a: &Attention) -> (&'static str, RegKind) {
    if a.acc == crate::DType::F64 {
        ("f64", RegKind::F64)
    } else {
        ("f32", RegKind::F32)
    }
}

/// An immediate of the accumulation type.
fn acc_imm(a: &Attention, v: f64) -> String {
    if a.acc == crate::DType::F64 {
        ops::f64_imm(v)
    } else {
        super::builder::f32_imm(v as f32)
    }
}
