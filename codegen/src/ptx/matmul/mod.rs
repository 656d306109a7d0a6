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
mod pipeline;
mod shape;
mod simt;
mod wgmma;

pub use config::{candidates, wgmma_candidates, Tile};
pub use shape::{recognise, Elem, Operand, Shape};

use super::builder::{ins, Builder, Reg, RegKind};
use super::eval::Cx;
use super::{entry_name, module, prologue, PtxKernel, Target};
use crate::ir::Kernel;
use mma::Frags;
use pipeline::Pipeline;

/// The matmul's shape when a specialised emitter takes `kernel`: the
/// tensor-core one for half types and TF32, the SIMT one (`simt.rs`) for
/// exact `f32`.
fn specialised(kernel: &Kernel) -> Option<Shape> {
    if !crate::env::flag("SMELT_MATMUL_MMA", true) {
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
/// sm_90 the warpgroup ones where they apply.
fn tiles(s: &Shape, target: &Target) -> Vec<Tile> {
    let mut all = candidates();
    if wgmma::applies(s, target) {
        all.extend(wgmma_candidates());
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
        return wgmma::emit(kernel, target, s, t);
    }
    let (mut bld, st) = start(kernel, s, t);
    let tid = st.tid;
    let b = &mut bld;
    let (lane, warp) = lane_and_warp(b, tid);
    let (warp_m, warp_n) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "rem.u32 {warp_m}, {warp}, {}", t.warps_m);
    ins!(b, "div.u32 {warp_n}, {warp}, {}", t.warps_m);
    let p = Pipeline::new(b, &st, s, t, false);
    let frags = Frags::new(b, lane, (warp_m, warp_n), t, (p.la.layout, p.lb.layout));
    let acc = mma::zero_acc(b, t);
    p.prologue(b, t.stages - 1);
    b.comment("main loop: wait for tile kt, refill the stage freed by kt - 1, multiply kt");
    let kt = b.mov(RegKind::B32, "u32", 0);
    let top = b.label();
    b.place(&top);
    ins!(b, "cp.async.wait_group {}", t.stages - 2);
    ins!(b, "bar.sync 0");
    p.refill(b, kt, t.stages - 1);
    let a_tile = p.stage(b, kt);
    let b_tile = b.reg(RegKind::B32);
    ins!(b, "add.u32 {b_tile}, {a_tile}, {}", p.b_off);
    frags.stage(b, a_tile, b_tile, &acc, s.elem);
    let again = b.reg(RegKind::Pred);
    ins!(b, "add.u32 {kt}, {kt}, 1");
    ins!(b, "setp.lt.u32 {again}, {kt}, {}", p.kt_total);
    ins!(b, "@{again} bra.uni {top}");
    ins!(b, "cp.async.wait_all");
    b.comment("epilogue");
    let (g, tg) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "shr.u32 {g}, {lane}, 2");
    ins!(b, "and.b32 {tg}, {lane}, 3");
    let (lm, ln) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "mad.lo.u32 {lm}, {warp_m}, {}, {g}", t.warp_m);
    ins!(b, "mul.lo.u32 {ln}, {warp_n}, {}", t.warp_n);
    ins!(b, "mad.lo.u32 {ln}, {tg}, 2, {ln}");
    // Accumulator q of MMA tile (mi, ni) is (row g + 8 (q / 2), column
    // 2t + q % 2) of that 16 x 8 tile.
    let items: Vec<epilogue::Item> = acc
        .iter()
        .enumerate()
        .flat_map(|(mi, row)| {
            row.iter().enumerate().flat_map(move |(ni, c)| {
                c.iter().enumerate().map(move |(q, reg)| epilogue::Item {
                    reg: *reg,
                    dm: mi as u32 * 16 + (q as u32 / 2) * 8,
                    dn: ni as u32 * 8 + q as u32 % 2,
                })
            })
        })
        .collect();
    let shared = st.staged_epilogue(b, s, t, &items, (lm, ln));
    // Without `.minnctapersm 1` ptxas caps 8-warp tiles at 128 registers
    // and spills; with it, up to 255 (one CTA per SM).
    st.finish(bld, kernel, target, s, t, 128, 1, shared)
}

/// What every matmul emitter starts from: the kernel's parameters and
/// evaluator, the thread index, the shared base, the CTA tile's origin in
/// C and the batch variables' values.
struct Start<'k> {
    entry: String,
    smem: String,
    params: Vec<String>,
    cx: Cx<'k>,
    tid: Reg,
    smem_base: Reg,
    m0: Reg,
    n0: Reg,
    batch: Vec<Reg>,
}

/// The common start of a matmul kernel with CTA tiles `t`, and the
/// builder holding its code so far.
fn start<'k>(kernel: &'k Kernel, s: &Shape, t: &impl CtaTile) -> (Builder, Start<'k>) {
    let entry = entry_name(kernel);
    let smem = format!("{entry}_smem");
    let mut b = Builder::default();
    let (params, cx) = prologue(kernel, &entry, &mut b);
    let sreg = |b: &mut Builder, name: &str| {
        let r = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {r}, {name}");
        r
    };
    let (tid, pid, z) = (
        sreg(&mut b, "%tid.x"),
        sreg(&mut b, "%ctaid.x"),
        sreg(&mut b, "%ctaid.z"),
    );
    let smem_base = sreg(&mut b, &smem);
    let (m0, n0) = tile_origin(&mut b, s, t, pid);
    let batch = unravel_batch(&mut b, kernel, s, z);
    let start = Start {
        entry,
        smem,
        params,
        cx,
        tid,
        smem_base,
        m0,
        n0,
        batch,
    };
    (b, start)
}

impl Start<'_> {
    /// The staged epilogue (see [`epilogue::staged`]) of a tensor-core
    /// tile `t` whose thread holds `items` from `local` (row, column within
    /// the tile); returns the dynamic shared memory the kernel needs.
    fn staged_epilogue(
        &self,
        b: &mut Builder,
        s: &Shape,
        t: &Tile,
        items: &[epilogue::Item],
        local: (Reg, Reg),
    ) -> u32 {
        let staging = epilogue::Staging {
            smem: self.smem_base,
            tid: self.tid,
            threads: t.threads(),
            bm: t.bm(),
            bn: t.bn(),
            origin: (self.m0, self.n0),
            local,
        };
        epilogue::staged(b, &self.cx, s, items, &staging, &self.batch);
        t.shared_bytes()
            .max(epilogue::staging_bytes(t.bm(), t.bn()))
    }

    /// The module around the body emitted into `b` (which this ends with
    /// `ret`), launched as one CTA of `t.threads()` per tile and batch
    /// with `shared` dynamic shared bytes aligned to `align`; ptxas keeps
    /// registers low enough for `min_ctas` CTAs per SM.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        self,
        mut b: Builder,
        kernel: &Kernel,
        target: &Target,
        s: &Shape,
        t: &impl CtaTile,
        align: u32,
        min_ctas: u32,
        shared: u32,
    ) -> PtxKernel {
        ins!(b, "ret");
        let decls = format!(".extern .shared .align {align} .b8 {}[];\n\n", self.smem);
        let directives = format!(".maxntid {}, 1, 1\n.minnctapersm {min_ctas}\n", t.threads());
        let ctas_m = (s.m as u32).div_ceil(t.bm());
        let ctas_n = (s.n as u32).div_ceil(t.bn());
        let ptx = module(
            kernel,
            target,
            &self.entry,
            &self.params,
            &decls,
            &directives,
            b,
        );
        PtxKernel {
            ptx,
            entry: self.entry,
            grid: (ctas_m * ctas_n, 1, s.batches(kernel) as u32),
            block: (t.threads(), 1, 1),
            shared_bytes: shared,
        }
    }
}

/// `(lane, warp)` of thread `tid`.
fn lane_and_warp(b: &mut Builder, tid: Reg) -> (Reg, Reg) {
    let (lane, warp) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "and.b32 {lane}, {tid}, 31");
    ins!(b, "shr.u32 {warp}, {tid}, 5");
    (lane, warp)
}

/// A CTA tile launched in grouped order: both emitters' configurations.
trait CtaTile {
    /// Rows (M) and columns (N) of C one CTA computes.
    fn bm(&self) -> u32;
    fn bn(&self) -> u32;
    /// CTA tiles along M visited together.
    fn group_m(&self) -> u32;
    /// Threads of a CTA.
    fn threads(&self) -> u32;
}

impl CtaTile for Tile {
    fn bm(&self) -> u32 {
        Tile::bm(self)
    }
    fn bn(&self) -> u32 {
        Tile::bn(self)
    }
    fn group_m(&self) -> u32 {
        self.group_m
    }
    fn threads(&self) -> u32 {
        Tile::threads(self)
    }
}

/// `(m0, n0)` of the CTA's tile from its linear id, in grouped order:
/// groups of `group_m` tile rows are swept column by column.
fn tile_origin(b: &mut Builder, s: &Shape, t: &impl CtaTile, pid: Reg) -> (Reg, Reg) {
    let tiles_m = (s.m as u32).div_ceil(t.bm());
    let tiles_n = (s.n as u32).div_ceil(t.bn());
    let per_group = t.group_m() * tiles_n;
    let [first, size, within, tm, tn]: [Reg; 5] = std::array::from_fn(|_| b.reg(RegKind::B32));
    ins!(b, "div.u32 {first}, {pid}, {per_group}");
    ins!(b, "mul.lo.u32 {first}, {first}, {}", t.group_m());
    ins!(b, "sub.u32 {size}, {tiles_m}, {first}");
    ins!(b, "min.u32 {size}, {size}, {}", t.group_m());
    ins!(b, "rem.u32 {within}, {pid}, {per_group}");
    ins!(b, "rem.u32 {tm}, {within}, {size}");
    ins!(b, "add.u32 {tm}, {tm}, {first}");
    ins!(b, "div.u32 {tn}, {within}, {size}");
    let (m0, n0) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "mul.lo.u32 {m0}, {tm}, {}", t.bm());
    ins!(b, "mul.lo.u32 {n0}, {tn}, {}", t.bn());
    (m0, n0)
}

/// The batch variables' values (u32) at batch `z`, row-major.
fn unravel_batch(b: &mut Builder, k: &Kernel, s: &Shape, z: Reg) -> Vec<Reg> {
    let mut out = vec![z; s.batch_vars.len()];
    let mut stride = 1i64;
    for (i, v) in s.batch_vars.iter().enumerate().rev() {
        let r = b.reg(RegKind::B32);
        ins!(b, "div.u32 {r}, {z}, {stride}");
        ins!(b, "rem.u32 {r}, {r}, {}", k.ranges[*v]);
        out[i] = r;
        stride *= k.ranges[*v];
    }
    out
}

/// Element offset (s64) of operand `op`'s batch: `konst + Σ coef · batch`.
fn batch_offset(b: &mut Builder, op: &Operand, batch: &[Reg]) -> Reg {
    let off = b.reg(RegKind::B64);
    ins!(b, "mov.b64 {off}, {}", op.konst);
    for (c, r) in op.batch.iter().zip(batch) {
        let r64 = b.reg(RegKind::B64);
        ins!(b, "cvt.u64.u32 {r64}, {r}");
        ins!(b, "mad.lo.s64 {off}, {r64}, {c}, {off}");
    }
    off
}
