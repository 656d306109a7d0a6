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
mod shape;
mod simt;
mod wgmma;

pub use config::{candidates, wgmma_candidates, Tile};
pub use shape::{recognise, Elem, Operand, Shape};

use super::builder::{ins, Builder, Reg, RegKind};
use super::{entry_name, module, prologue, PtxKernel, Target};
use crate::ir::Kernel;
use load::{OperandLoad, Source};
use mma::Frags;

/// The matmul's shape when a specialised emitter takes `kernel`: the
/// tensor-core one for half types and TF32, the SIMT one (`simt.rs`) for
/// exact `f32`.
fn specialised(kernel: &Kernel) -> Option<Shape> {
    if std::env::var("SMELT_MATMUL_MMA").is_ok_and(|v| v == "0") {
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
    let entry = entry_name(kernel);
    let smem = format!("{entry}_smem");
    let mut b = Builder::default();
    let (params, cx) = prologue(kernel, &entry, &mut b);
    let b = &mut b;
    let sreg = |b: &mut Builder, name: &str| {
        let r = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {r}, {name}");
        r
    };
    let (tid, pid, z) = (sreg(b, "%tid.x"), sreg(b, "%ctaid.x"), sreg(b, "%ctaid.z"));
    let smem_base = sreg(b, &smem);
    let (lane, warp) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "and.b32 {lane}, {tid}, 31");
    ins!(b, "shr.u32 {warp}, {tid}, 5");
    let (warp_m, warp_n) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "rem.u32 {warp_m}, {warp}, {}", t.warps_m);
    ins!(b, "div.u32 {warp_n}, {warp}, {}", t.warps_m);
    let (m0, n0) = tile_origin(b, s, t, pid);
    let batch = unravel_batch(b, kernel, s, z);
    let eb = s.elem.bytes();
    let load = |b: &mut Builder, opnd: &Operand, row0, rows, tile_rows, tile_off| {
        let batch_off = batch_offset(b, opnd, &batch);
        let src = Source {
            op: opnd,
            eb,
            base: cx.inputs[opnd.input],
            batch_off,
            row0,
            rows,
            tile_rows,
            k_len: s.k,
            tile_off,
            atoms: false,
        };
        OperandLoad::new(b, &src, tid, t)
    };
    let la = load(b, &s.a, m0, s.m, t.bm(), 0);
    let lb = load(b, &s.b, n0, s.n, t.bn(), t.bm() * t.k_bytes);
    let frags = Frags::new(b, lane, (warp_m, warp_n), t, (la.layout, lb.layout));
    let acc = mma::zero_acc(b, t);
    let kt_total = (s.k as u64).div_ceil(t.bk(eb) as u64) as u32;
    let stage_addr = |b: &mut Builder, kt: Reg| {
        let (st, addr) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "rem.u32 {st}, {kt}, {}", t.stages);
        ins!(
            b,
            "mad.lo.u32 {addr}, {st}, {}, {smem_base}",
            t.stage_bytes()
        );
        addr
    };
    b.comment("prologue: the first stages - 1 k-tiles in flight");
    for st in 0..t.stages - 1 {
        if st < kt_total {
            let kt = b.mov(RegKind::B32, "u32", st);
            let addr = stage_addr(b, kt);
            la.tile(b, addr, kt);
            lb.tile(b, addr, kt);
        }
        ins!(b, "cp.async.commit_group");
    }
    b.comment("main loop: wait for tile kt, refill the stage freed by kt - 1, multiply kt");
    let kt = b.mov(RegKind::B32, "u32", 0);
    let top = b.label();
    b.place(&top);
    ins!(b, "cp.async.wait_group {}", t.stages - 2);
    ins!(b, "bar.sync 0");
    let (next, more) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
    ins!(b, "add.u32 {next}, {kt}, {}", t.stages - 1);
    ins!(b, "setp.lt.u32 {more}, {next}, {kt_total}");
    let skip = b.label();
    ins!(b, "@!{more} bra.uni {skip}");
    let addr = stage_addr(b, next);
    la.tile(b, addr, next);
    lb.tile(b, addr, next);
    b.place(&skip);
    ins!(b, "cp.async.commit_group");
    let a_tile = stage_addr(b, kt);
    let b_tile = b.reg(RegKind::B32);
    ins!(b, "add.u32 {b_tile}, {a_tile}, {}", t.bm() * t.k_bytes);
    frags.stage(b, a_tile, b_tile, &acc, s.elem);
    let again = b.reg(RegKind::Pred);
    ins!(b, "add.u32 {kt}, {kt}, 1");
    ins!(b, "setp.lt.u32 {again}, {kt}, {kt_total}");
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
    let staging = epilogue::Staging {
        smem: smem_base,
        tid,
        threads: t.threads(),
        bm: t.bm(),
        bn: t.bn(),
        origin: (m0, n0),
        local: (lm, ln),
    };
    epilogue::staged(b, &cx, s, &items, &staging, &batch);
    ins!(b, "ret");
    let decls = format!(".extern .shared .align 128 .b8 {smem}[];\n\n");
    // Without `.minnctapersm 1` ptxas caps 8-warp tiles at 128 registers
    // and spills; with it, up to 255 (one CTA per SM).
    let directives = format!(".maxntid {}, 1, 1\n.minnctapersm 1\n", t.threads());
    let ctas_m = (s.m as u32).div_ceil(t.bm());
    let ctas_n = (s.n as u32).div_ceil(t.bn());
    let ptx = module(
        kernel,
        target,
        &entry,
        &params,
        &decls,
        &directives,
        std::mem::take(b),
    );
    PtxKernel {
        ptx,
        entry,
        grid: (ctas_m * ctas_n, 1, s.batches(kernel) as u32),
        block: (t.threads(), 1, 1),
        shared_bytes: t
            .shared_bytes()
            .max(epilogue::staging_bytes(t.bm(), t.bn())),
    }
}

/// A CTA tile launched in grouped order: both emitters' configurations.
trait CtaTile {
    /// Rows (M) and columns (N) of C one CTA computes.
    fn bm(&self) -> u32;
    fn bn(&self) -> u32;
    /// CTA tiles along M visited together.
    fn group_m(&self) -> u32;
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
