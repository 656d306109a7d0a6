//! The `mma.sync` matmul kernel (any sm_80+ target): warps multiply
//! `ldmatrix` fragments of the shared stages that the `cp.async` pipeline
//! fills, then the staged epilogue writes C.

use super::config::Tile;
use super::epilogue;
use super::mma::{self, Frags};
use super::pipeline::Pipeline;
use super::shape::Shape;
use super::split::{self, Split};
use super::start::{lane_and_warp, start, Bounds};
use crate::ir::Kernel;
use crate::ptx::builder::{ins, RegKind};
use crate::ptx::module::PtxKernel;
use crate::ptx::target::Target;

/// Lowers the recognised matmul `s` of `kernel` with the `mma.sync` tile
/// `t` (not `t.wgmma`), its `k` split as `sp` (`split.rs`).
pub fn emit(kernel: &Kernel, target: &Target, s: &Shape, t: &Tile, sp: Split) -> PtxKernel {
    let (mut bld, st) = start(kernel, target, s, t);
    let tid = st.tid;
    let b = &mut bld;
    let (lane, warp) = lane_and_warp(b, tid);
    let (warp_m, warp_n) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "rem.u32 {warp_m}, {warp}, {}", t.warps_m);
    ins!(b, "div.u32 {warp_n}, {warp}, {}", t.warps_m);
    let p = Pipeline::new(b, &st, s, t, false, sp);
    let frags = Frags::new(b, lane, (warp_m, warp_n), t, p.layouts, target.sm >= 90);
    let acc = mma::zero_acc(b, t);
    p.prologue(b, t.stages - 1);
    b.comment("main loop: wait for tile kt, refill the stage freed by kt - 1, multiply kt");
    let kt = b.mov(RegKind::B32, "u32", 0);
    let top = b.label();
    b.place(&top);
    p.wait(b, kt, t.stages - 1);
    ins!(b, "bar.sync 0");
    p.refill(b, kt, t.stages - 1);
    let a_tile = p.stage(b, kt);
    let b_tile = b.reg(RegKind::B32);
    ins!(b, "add.u32 {b_tile}, {a_tile}, {}", p.b_off);
    frags.stage(b, a_tile, b_tile, &acc, s.elem);
    let again = b.reg(RegKind::Pred);
    ins!(b, "add.u32 {kt}, {kt}, 1");
    ins!(b, "setp.lt.u32 {again}, {kt}, {}", p.kt_end);
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
    let sink = split::sink(b, &st.cx, (kernel, target), (s, t), sp);
    let shared = st.staged_epilogue(b, s, t, &items, (lm, ln), &sink);
    // Without `.minnctapersm 1` ptxas caps 8-warp tiles at 128 registers
    // and spills; with it, up to 255 (one CTA per SM).
    let k = st.finish(bld, kernel, target, s, t, 128, Bounds::MinCtas(1), shared);
    split::finish(k, kernel, target, s, (sp, &sink))
}
