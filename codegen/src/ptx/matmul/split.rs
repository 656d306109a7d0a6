//! Split-K: a matmul whose CTA tiles are too few to fill the
//! GPU and whose `k` is long also splits `k` among CTAs, which then add
//! their partial sums up and run the epilogue, in one of two ways.
//!
//! The emitter's entry runs over a grid `(tiles, count, batches)`: CTA
//! `(x, s, z)` runs the pipeline over k-tiles `s chunk .. min((s + 1)
//! chunk, kt_total)` only (`chunk` k-tiles of the tile's `bk`, so that
//! every split has at least one) and stages its f32 sums in shared memory
//! (the staged epilogue's first phase). Then:
//!
//! - **In a cluster** ([`clustered`]: sm_90, at most a wave of one CTA
//!   per SM, a count of 2, 4 or 8 that divides the tile's rows): the
//!   count CTAs of a tile are one cluster
//!   along `y` (`.reqnctapercluster 1, count, 1`). After a cluster
//!   barrier, rank `r` takes rows `r bm / count ..` of the tile and sums
//!   each run over the `count` staged tiles, rank by rank, through
//!   distributed shared memory, then runs the kernel's epilogue there; a
//!   last cluster barrier keeps every tile alive until its peers have
//!   read it. One launch, and the partials never leave the SMs: at
//!   1024x1024x4096 f16 the second launch below was a fifth of the time
//!   under ncu (H200, 2026-11-28).
//! - **Through the scratch buffer** (otherwise, or with
//!   `SMELT_MATMUL_SPLIT_CLUSTER=0`): each CTA stores its staged sums to
//!   its *plane* of the scratch buffer (the kernel's last output,
//!   [`scratch`]): element `(s batches + z) M N + m N + n`, and nothing
//!   else. A second launch, `<entry>_splitk`, a thread per run of `lanes`
//!   consecutive columns of a row (as the staged epilogue's second phase),
//!   sums the run's `count` partials in split order and runs the kernel's
//!   epilogue (bias, activation, casts, every store) exactly once per
//!   output element.
//!
//! Both add the splits in split order from `+0`, so they give the same
//! bits: the unsplit kernel's up to the order of the f32 sums (each split
//! sums its `k` in the unsplit order), and a run is deterministic. NaN and
//! infinities propagate as in any sum. The planner gives the scratch
//! buffer either way (it sizes it before the target is known), and a
//! kernel without one is not split.
//!
//! When: `SMELT_MATMUL_SPLITS=<n>` asks for `n` splits (0 or 1: none),
//! else [`rule`]: a tile that leaves the GPU under 7/8 of a wave
//! (`config::fills_wave`) is split into as many as give each SM at most
//! one CTA, each at least [`MIN_SPLIT_K`] long, at most [`MAX_SPLITS`];
//! and a warpgroup tile of at most one CTA per SM, two of which fit an
//! SM's shared memory, is split in two where `k` is at least
//! [`LONG_SPLIT_K`] (the two CTAs an SM then runs hide each other's
//! waits: 1024x1024x4096 f16 in 64x128 tiles went from 78% to 81% of
//! cuBLAS, row-major B from 68% to 75%, + bias + gelu from 87% to 102%
//! of cuBLAS and a separate kernel; H200, 2026-11-28; at `k` = 1024 the
//! same split lost a quarter).
//! Exact `f32` (the SIMT kernel, `simt.rs`) splits by the same rule over
//! its own tiles, always through the scratch buffer: its sums are in
//! registers, not a staged tile, so each thread stores its own to its
//! CTA's plane. The fusion planner sizes
//! the scratch ([`scratch`]) before the target is known, for the most any
//! tile's rule asks on [`PLAN_SMS`] SMs (so the autotuner may time each
//! tile's split); the emitter never exceeds the scratch it is given (a
//! kernel without one is not split).

use super::config::{self, Tile};
use super::epilogue;
use super::shape::Shape;
use super::start::{unravel_batch, CtaTile};
use crate::env;
use crate::ir::{Arg, Kernel};
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::eval::Cx;
use crate::ptx::module::{entry, entry_name, Launch, PtxKernel};
use crate::ptx::target::Target;
use crate::DType;

pub use crate::ptx::split::Split;

/// The most splits of a kernel.
pub const MAX_SPLITS: u64 = 16;

/// The shortest `k` the rule gives a split (8 k-tiles of 64 halves: the
/// pipeline's prologue and the partials' stores stay small beside it).
pub const MIN_SPLIT_K: i64 = 512;

/// The shortest `k` split in two for the SMs' sake alone (each half 32
/// k-tiles of 64 halves).
pub const LONG_SPLIT_K: i64 = 4096;

/// SMs the planner sizes the scratch for, at least any GPU's (H100 and
/// H200: 132).
pub const PLAN_SMS: u32 = 160;

/// The most scratch elements a kernel is given (1 GiB of f32): a split
/// asked of bigger products is not made.
const MAX_SCRATCH: u64 = 1 << 28;

/// Threads of a reduction CTA.
const THREADS: u32 = 256;

/// The most CTAs of a cluster that adds its splits (the portable cluster
/// size).
const MAX_CLUSTER: u32 = 8;

/// `SMELT_MATMUL_SPLITS`: a forced split count (0 or 1: none), `None`
/// for the rule.
pub fn env_splits() -> Option<usize> {
    env::var("SMELT_MATMUL_SPLITS", env::parse_splits)
}

/// The rule's split count for `base` CTAs over `k` on `num_sms` SMs:
/// under 7/8 of a wave, as many as keep every SM at one CTA at most, each
/// split at least [`MIN_SPLIT_K`] long, at most [`MAX_SPLITS`]; and at
/// least 2 where `pair` (two CTAs of the tile fit an SM), `base` is at
/// most `num_sms` and `k` at least [`LONG_SPLIT_K`]. Non-increasing in
/// `base`, non-decreasing in `num_sms`.
pub fn rule(base: u64, k: i64, num_sms: u32, pair: bool) -> u64 {
    if base == 0 {
        return 1;
    }
    let fill = if config::fills_wave(base, num_sms) {
        1
    } else {
        (u64::from(num_sms) / base)
            .min(u64::try_from(k / MIN_SPLIT_K).unwrap_or(0))
            .clamp(1, MAX_SPLITS)
    };
    let long = pair && base <= u64::from(num_sms) && k >= LONG_SPLIT_K;
    fill.max(if long { 2 } else { 1 })
}

/// The split count `s` asks for with tile `t` on `target`, before the
/// scratch caps it: `SMELT_MATMUL_SPLITS`, else [`rule`].
pub fn wanted(s: &Shape, batches: i64, t: &Tile, target: &Target) -> u64 {
    asked(
        config::ctas(s, batches, t),
        s.k,
        target,
        t.wgmma && t.two_per_sm(),
    )
}

/// [`wanted`] for exact `f32` with SIMT tile `t`, of which an SM holds
/// `per_sm` CTAs when split: the rule then counts an SM as that many
/// (64x64 tiles of two warps fill a GPU only several to an SM).
pub fn wanted_simt(
    s: &Shape,
    batches: i64,
    (t, per_sm): (&impl CtaTile, u32),
    target: &Target,
) -> u64 {
    env_or(|| rule_simt(s, batches, (t, per_sm), target))
}

/// [`rule`]'s count for exact `f32` with SIMT tile `t` ([`wanted_simt`]
/// without `SMELT_MATMUL_SPLITS`).
pub fn rule_simt(
    s: &Shape,
    batches: i64,
    (t, per_sm): (&impl CtaTile, u32),
    target: &Target,
) -> u64 {
    let ctas = (s.m as u64).div_ceil(u64::from(t.bm()))
        * (s.n as u64).div_ceil(u64::from(t.bn()))
        * batches.max(0) as u64;
    rule(ctas, s.k, target.num_sms.saturating_mul(per_sm), false)
}

/// `SMELT_MATMUL_SPLITS`, else [`rule`] for `ctas` CTAs over `k`, at most
/// [`MAX_SPLITS`].
fn asked(ctas: u64, k: i64, target: &Target, pair: bool) -> u64 {
    env_or(|| rule(ctas, k, target.num_sms, pair))
}

/// `SMELT_MATMUL_SPLITS`, else `rule()`, at most [`MAX_SPLITS`].
fn env_or(rule: impl FnOnce() -> u64) -> u64 {
    env_splits().map_or_else(rule, |n| n as u64).min(MAX_SPLITS)
}

/// Elements of one split's plane (`batches M N`), when the reduction's
/// 32-bit indices reach them all.
fn plane(s: &Shape, batches: i64) -> Option<u64> {
    let n = (s.m as u64)
        .checked_mul(s.n as u64)?
        .checked_mul(u64::try_from(batches).ok()?)?;
    (n > 0 && n <= i32::MAX as u64).then_some(n)
}

/// The scratch buffer the fusion planner gives the matmul `s` of `k` (its
/// last output, f32): room for `most(target)` splits, the most any tile
/// of its emitter asks on a target, over either checked target's family
/// with [`PLAN_SMS`] SMs; `None` when it is never split. Checked
/// arithmetic, at most [`MAX_SCRATCH`].
pub fn scratch(k: &Kernel, s: &Shape, most: impl Fn(&Target) -> u64) -> Option<Arg> {
    let plane = plane(s, s.batches(k))?;
    let count = Target::CHECKED
        .iter()
        .map(|t| {
            most(&Target {
                num_sms: PLAN_SMS,
                ..*t
            })
        })
        .max()?
        // At least 16 `k` a k-tile (TF32 `mma.sync`).
        .min((s.k.max(0) as u64).div_ceil(16));
    if count < 2 {
        return None;
    }
    let len = plane.checked_mul(count)?;
    (len <= MAX_SCRATCH).then_some(Arg {
        dtype: DType::F32,
        len: usize::try_from(len).ok()?,
    })
}

/// Planes the scratch buffer of `k` holds: 0 without one (the last
/// output is the scratch when it is f32 and no store writes it).
fn capacity(k: &Kernel, plane: u64) -> u64 {
    let Some(last) = k.outputs.len().checked_sub(1) else {
        return 0;
    };
    let o = &k.outputs[last];
    if o.dtype != DType::F32 || k.stores.iter().any(|st| st.output == last) {
        return 0;
    }
    o.len as u64 / plane
}

/// The split of `s` (kernel `k`) in k-tiles of `bk` into `want` splits
/// (0 or 1: none): at most [`MAX_SPLITS`] and what the scratch holds,
/// normalized so that every split has k-tiles (`chunk = ceil(kt_total /
/// want)`, `count = ceil(kt_total / chunk)`).
pub fn plan(k: &Kernel, s: &Shape, bk: u32, want: u64) -> Split {
    let Some(plane) = plane(s, s.batches(k)) else {
        return Split::NONE;
    };
    let count = want.min(MAX_SPLITS).min(capacity(k, plane));
    let kt_total = (s.k.max(0) as u64).div_ceil(u64::from(bk));
    if count < 2 || kt_total < 2 {
        return Split::NONE;
    }
    let chunk = kt_total.div_ceil(count);
    match kt_total.div_ceil(chunk) {
        0 | 1 => Split::NONE,
        n => Split {
            count: n as u32,
            chunk: chunk as u32,
        },
    }
}

/// This CTA's k-tiles under split `sp` of `kt_total`: `(first, count)`
/// (u32 registers), `first = s chunk` for `s = %ctaid.y`, `count =
/// min(chunk, kt_total - first)`, at least 1 ([`plan`]).
pub(super) fn k_tiles(b: &mut Builder, sp: Split, kt_total: u32) -> (Reg, Reg) {
    b.comment("split-K: this CTA's k-tiles, chunk %ctaid.y");
    let (first, count) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "mov.u32 {first}, %ctaid.y");
    ins!(b, "mul.lo.u32 {first}, {first}, {}", sp.chunk);
    ins!(b, "sub.u32 {count}, {kt_total}, {first}");
    ins!(b, "min.u32 {count}, {count}, {}", sp.chunk);
    (first, count)
}

/// Whether split `sp` of tile `t` adds its partials in a cluster (see the
/// module's doc): on sm_90 with `SMELT_MATMUL_SPLIT_CLUSTER` on (the
/// default), where the split CTAs make at most one wave of one CTA per SM
/// (64x128 tiles split in two, two CTAs to an SM, went from 80% to 69% of
/// cuBLAS in clusters at 1024x1024x4096, H200 2026-11-28), with a count
/// that is a power of two of at most [`MAX_CLUSTER`] and divides the
/// tile's rows, each share of rows whole runs for every thread of the
/// staged epilogue.
fn clustered(cx: &Cx, s: &Shape, t: &Tile, sp: Split, target: &Target) -> bool {
    let count = sp.count;
    let runs = |rows: u32| rows * (t.bn() / epilogue::run_lanes(cx, s, t.bn()));
    let one_wave = config::ctas(s, s.batches(cx.k), t).saturating_mul(u64::from(count))
        <= u64::from(target.num_sms);
    sp.is_split()
        && target.sm >= 90
        && env::flag("SMELT_MATMUL_SPLIT_CLUSTER", true)
        && one_wave
        && count.is_power_of_two()
        && count <= MAX_CLUSTER
        && t.bm().is_multiple_of(count)
        && runs(t.bm() / count).is_multiple_of(t.threads())
}

/// Where the staged epilogue sends a CTA's tile under split `sp` of tile
/// `t`: the kernel's epilogue unsplit; the cluster's sum of the splits
/// where they are [`clustered`]; else this CTA's plane of the scratch
/// buffer (split `%ctaid.y`, batch `%ctaid.z`).
pub(super) fn sink(
    b: &mut Builder,
    cx: &Cx,
    (k, target): (&Kernel, &Target),
    (s, t): (&Shape, &Tile),
    sp: Split,
) -> epilogue::Sink {
    if !sp.is_split() {
        return epilogue::Sink::Kernel;
    }
    if clustered(cx, s, t, sp, target) {
        let rank = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {rank}, %cluster_ctarank");
        return epilogue::Sink::Cluster {
            count: sp.count,
            rank,
        };
    }
    epilogue::Sink::Partial(partial_plane(b, cx, k, s))
}

/// The address (u64) of this CTA's plane of the scratch buffer: split
/// `%ctaid.y`, batch `%ctaid.z`.
pub(super) fn partial_plane(b: &mut Builder, cx: &Cx, k: &Kernel, s: &Shape) -> Reg {
    let plane = plane(s, s.batches(k)).expect("a split kernel's plane fits");
    let per_batch = s.m as u64 * s.n as u64;
    let scratch = *cx.outputs.last().expect("a split kernel has its scratch");
    let (y, z, at, off) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B64),
        b.reg(RegKind::B64),
    );
    ins!(b, "mov.u32 {y}, %ctaid.y");
    ins!(b, "mov.u32 {z}, %ctaid.z");
    // Byte strides may pass 32 bits: 64-bit products.
    ins!(b, "cvt.u64.u32 {at}, {y}");
    ins!(b, "mul.lo.u64 {at}, {at}, {}", plane * 4);
    ins!(b, "cvt.u64.u32 {off}, {z}");
    ins!(b, "mul.lo.u64 {off}, {off}, {}", per_batch * 4);
    ins!(b, "add.u64 {at}, {at}, {off}");
    ins!(b, "add.u64 {at}, {at}, {scratch}");
    at
}

/// The kernel of module `main` (the emitter's entry, launched as the one
/// launch of `main.launches`) under split `sp` whose tiles went to `sink`:
/// unsplit as it is; split with grid `y` = the count, and either clusters
/// of the count along `y` or the reduction entry after it.
pub(super) fn finish(
    mut main: PtxKernel,
    k: &Kernel,
    target: &Target,
    s: &Shape,
    (sp, sink): (Split, &epilogue::Sink),
) -> PtxKernel {
    if !sp.is_split() {
        return main;
    }
    main.launches[0].grid.1 = sp.count;
    if let epilogue::Sink::Cluster { count, .. } = sink {
        // The main entry's one launch-bounds directive: the cluster shape
        // goes beside it (a plain launch then makes the clusters).
        main.ptx = main.ptx.replacen(
            ".maxntid",
            &format!(".reqnctapercluster 1, {count}, 1\n.maxntid"),
            1,
        );
        return main;
    }
    let name = format!("{}_splitk", entry_name(k));
    let mut rows = 0;
    let (text, _) = entry(k, target, &name, THREADS, |b, cx, _| {
        rows = reduce(b, cx, s, sp);
        (0, 16)
    });
    main.ptx += "\n";
    main.ptx += &text;
    main.launches.push(Launch {
        entry: name,
        grid: (rows.div_ceil(THREADS), 1, s.batches(k) as u32),
        block: (THREADS, 1, 1),
        shared_bytes: 0,
    });
    main
}

/// The reduction entry's body: the thread `g = %ctaid.x THREADS + %tid.x`
/// of batch `%ctaid.z` sums run `g` (row `g / runs`, columns `lanes (g %
/// runs) ..`) over the splits and evaluates the epilogue there. Returns
/// the runs of a batch (`M N / lanes`).
fn reduce(b: &mut Builder, cx: &Cx, s: &Shape, sp: Split) -> u32 {
    let k = cx.k;
    let batches = s.batches(k);
    let plane = plane(s, batches).expect("a split kernel's plane fits");
    let lanes = epilogue::run_lanes(cx, s, 16);
    let runs = (s.n as u32) / lanes;
    let (tid, g, z) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
    );
    ins!(b, "mov.u32 {tid}, %tid.x");
    ins!(b, "mov.u32 {g}, %ctaid.x");
    ins!(b, "mov.u32 {z}, %ctaid.z");
    ins!(b, "mad.lo.u32 {g}, {g}, {THREADS}, {tid}");
    let (row, col) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "div.u32 {row}, {g}, {runs}");
    ins!(b, "rem.u32 {col}, {g}, {runs}");
    ins!(b, "mul.lo.u32 {col}, {col}, {lanes}");
    let (inside, done) = (b.reg(RegKind::Pred), b.label());
    ins!(b, "setp.lt.u32 {inside}, {row}, {}", s.m);
    // Divergent: a warp may straddle the last row.
    ins!(b, "@!{inside} bra {done}");
    b.comment("split-K reduction: the run's partials, split by split");
    let scratch = *cx.outputs.last().expect("a split kernel has its scratch");
    let (at, x) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
    ins!(b, "mul.wide.u32 {at}, {z}, {}", s.m as u64 * s.n as u64);
    ins!(b, "cvt.u64.u32 {x}, {col}");
    ins!(b, "add.u64 {at}, {at}, {x}");
    ins!(b, "mad.wide.u32 {at}, {row}, {}, {at}", s.n);
    ins!(b, "shl.b64 {at}, {at}, 2");
    ins!(b, "add.u64 {at}, {at}, {scratch}");
    let acc: Vec<Reg> = (0..lanes).map(|_| b.reg(RegKind::F32)).collect();
    epilogue::sum_splits(b, sp.count, &acc, |b, split, part| {
        if split > 0 {
            ins!(b, "add.u64 {at}, {at}, {}", plane * 4);
        }
        load_run(b, at, part);
    });
    let z_batch = unravel_batch(b, k, s, z);
    epilogue::evaluate(b, cx, s, (row, col), &z_batch, &acc);
    b.place(&done);
    (s.m as u32) * runs
}

/// Loads the f32 run at `at` (aligned to its length, up to 16 bytes)
/// into `regs`.
pub(super) fn load_run(b: &mut Builder, at: Reg, regs: &[Reg]) {
    let list = |rs: &[Reg]| {
        rs.iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match regs.len() {
        1 => ins!(b, "ld.global.f32 {}, [{at}]", regs[0]),
        2 => ins!(b, "ld.global.v2.f32 {{{}}}, [{at}]", list(regs)),
        _ => {
            for (q, quad) in regs.chunks(4).enumerate() {
                ins!(b, "ld.global.v4.f32 {{{}}}, [{at}+{}]", list(quad), 16 * q);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule: no split from 7/8 of a wave on; otherwise as many splits
    /// as keep one CTA per SM, each at least 512 long, at most 16; and
    /// two for a long `k` where two CTAs of the tile share an SM.
    #[test]
    fn rule_fills_one_wave() {
        // 1024^3 in 128x128 tiles: 64 CTAs, 2 splits of 512.
        assert_eq!(rule(64, 1024, 132, false), 2);
        // 128x64 tiles: 128 CTAs, 97% of a wave already.
        assert_eq!(rule(128, 1 << 20, 132, false), 1);
        // Under 7/8 of a wave (115 of 132) but no room for two splits.
        assert_eq!(rule(115, 1 << 20, 132, false), 1);
        // K bounds the splits; tiny K none.
        assert_eq!(rule(8, 4096, 132, false), 8);
        assert_eq!(rule(8, 1023, 132, false), 1);
        assert_eq!(rule(1, 1 << 20, 132, false), MAX_SPLITS);
        assert_eq!(rule(0, 1 << 20, 132, false), 1);
        // 1024x1024x4096 in 64x128 tiles: 128 CTAs, two to an SM.
        assert_eq!(rule(128, 4096, 132, true), 2);
        assert_eq!(rule(128, 4095, 132, true), 1);
        assert_eq!(rule(133, 1 << 20, 132, true), 1);
        assert_eq!(rule(8, 4096, 132, true), 8);
        for base in [1, 7, 33, 64, 100, 128, 200] {
            for sms in [108, 132, 160] {
                for pair in [false, true] {
                    let r = |base, sms| rule(base, 1 << 16, sms, pair);
                    assert!(r(base, sms) <= r(base, 160));
                    assert!(r(base + 1, sms) <= r(base, sms));
                    let most = if pair {
                        2 * u64::from(sms)
                    } else {
                        u64::from(sms)
                    };
                    assert!(base * r(base, sms) <= most.max(base));
                }
            }
        }
    }
}
