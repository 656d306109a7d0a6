//! Hopper matmul (sm_90a): warpgroup MMAs (`wgmma.mma_async`) that read
//! both operands straight from shared memory, so the register file holds
//! only accumulators and `ldmatrix` traffic disappears.
//!
//! # Mapping
//! - A CTA of `wgs` warpgroups (128 threads each) computes a `64 wgs x bn`
//!   tile of C; warpgroup `w` owns rows `64 w ..`, one `m64nBNk16` MMA per
//!   16 `k` of halves (`m64nBNk8` per 8 `k` of TF32, `m64nBNk32` per 32
//!   `k` of FP8: 32 bytes of `k` every time), accumulating in `bn / 2` f32
//!   registers per thread.
//! - Where the copy engine can map both operands and `k` spans more than
//!   one k-tile, thread 0 copies every tile with it (`tma.rs`): into the
//!   same layouts, so the same descriptors serve, and TF32 rounded on the
//!   way; otherwise every thread copies its chunks as below.
//! - For tiles of one warpgroup by default (`specialized.rs`,
//!   `config::scheduled`): where the copy engine applies and `k` is not
//!   split, a warp-specialised CTA instead, a producer warpgroup copying
//!   while these warpgroups multiply, optionally persistent.
//! - TF32 tiles are always k-major; those the copy engine does not take
//!   reach shared memory through registers, rounded (`load.rs`).
//! - FP8 tiles (`e4m3`/`e5m2`, either for each operand) are always
//!   k-major too: FP8 `wgmma` has no transpose flag. An operand contiguous
//!   along `k` is copied by `cp.async` as halves are (128 `k` per 128-byte
//!   row, so descriptors, swizzle and the 32-byte k step are the halves'
//!   with `k` counted in bytes); one contiguous along its rows is loaded
//!   16 bytes along them and transposed in registers (`fp8_rows.rs`); any
//!   other is read by predicated byte loads, threads walking its
//!   contiguous rows, and stored k-major (`load.rs`): correct for every
//!   view, slower than the copies.
//! - Each operand is contiguous along `k` or along its rows (`m` of A, `n`
//!   of B: a row-major B, a transposed A), 16-byte aligned, and copied with
//!   `cp.async` (see `load.rs`) into a layout whose XOR swizzle (`chunk ^
//!   (row & 7)` within 128-byte rows) is exactly the hardware's 128-byte
//!   swizzle. A shared-memory matrix descriptor gives the start address,
//!   the two strides and swizzle mode 1:
//!   - k-major (rows of 64 `k`): `SBO` = 1024 bytes between groups of 8
//!     rows, `LBO` unused; the four k16 steps start 32 bytes apart;
//!   - MN-major (`wgmma`'s transpose flag; atoms of 64 rows x 8 `k`):
//!     `LBO` = `bk * 128` bytes between atoms along the rows, `SBO` = 1024
//!     between groups of 8 `k`; k16 steps start 2048 bytes apart.
//! - Pipeline of `stages` buffers with prefetch distance `stages - 2`: the
//!   MMAs of tile `kt` run while the CTA waits for tile `kt + 1`
//!   (`wgmma.wait_group 1`), and the stage refilled at `kt` is the one of
//!   tile `kt - 2`, whose MMAs every warpgroup has finished before the
//!   barrier. `cp.async` writes through the generic proxy and `wgmma`
//!   reads through the async proxy, hence `fence.proxy.async` before the
//!   barrier. Copy-engine tiles are awaited on their stage's `mbarrier`
//!   instead of a `cp.async` group.
//! - Accumulator `j` of a thread (warp `v` of its warpgroup, lane `l`) is
//!   row `16 v + l / 4 + 8 ((j / 2) % 2)`, column `8 (j / 4) + 2 (l % 4) +
//!   j % 2` of the warpgroup's tile, as for `mma.sync` C fragments.

use super::config::{Tile, KSTEP_BYTES};
use super::epilogue;
use super::load::Layout;
use super::pipeline::Pipeline;
use super::shape::{Elem, Shape};
use super::specialized;
use super::split::{self, Split};
use super::start::{lane_and_warp, start, Bounds, Start};
use crate::ir::Kernel;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::module::{map_param_decl, PtxKernel, TensorMap};
use crate::ptx::target::Target;
use crate::DType;

/// Descriptor bits of a tile that do not depend on its address (strides
/// in 16-byte units, 128-byte swizzle), the descriptor step per k16, and
/// the transpose flag, for an operand laid out as `layout` with `bk` `k`
/// per stage (the attention kernel's tiles are laid out the same way).
pub(crate) fn descriptor_bits(layout: Layout, bk: u32) -> (u64, u32, u32) {
    let swizzle = 1 << 62;
    let sbo = (1024 >> 4) << 32;
    match layout {
        // LBO 1: unused by swizzled k-major layouts.
        Layout::KMajor => (swizzle | sbo | (1 << 16), 32 >> 4, 0),
        _ => (
            swizzle | sbo | (((bk as u64 * 128) >> 4) << 16),
            2048 >> 4,
            1,
        ),
    }
}

/// Lowers `kernel` (recognised as `s`, [`super::config::wgmma_applies`]) with the warpgroup
/// tile `t` (`t.wgmma`), its `k` split as `sp` (`split.rs`); warp-specialised
/// (`specialized.rs`) where `t`'s schedule asks and that applies.
pub fn emit(kernel: &Kernel, target: &Target, s: &Shape, t: &Tile, sp: Split) -> PtxKernel {
    debug_assert!(t.wgmma && t.k_bytes == 128 && t.stages >= 3);
    let plan = specialized::plan(kernel, s, t, sp);
    if let Some(k) = plan.and_then(|plan| specialized::emit(kernel, target, s, t, &plan)) {
        return k;
    }
    let (mut bld, st) = start(kernel, target, s, t);
    let tid = st.tid;
    let b = &mut bld;
    let (lane, warp) = lane_and_warp(b, tid);
    let p = Pipeline::new(b, &st, s, t, true, sp);
    let mma = Mma::new(b, s, t, p.layouts, tid);
    let distance = t.stages - 2;
    p.prologue(b, distance);
    b.comment("main loop: wait for tile kt, refill the stage of kt - 2, multiply kt");
    let kt = b.mov(RegKind::B32, "u32", 0);
    let top = b.label();
    b.place(&top);
    p.wait(b, kt, distance);
    ins!(b, "fence.proxy.async.shared::cta");
    ins!(b, "bar.sync 0");
    p.refill(b, kt, distance);
    let stage = p.stage(b, kt);
    mma.issue(b, stage);
    ins!(b, "wgmma.wait_group.sync.aligned 1");
    let again = b.reg(RegKind::Pred);
    ins!(b, "add.u32 {kt}, {kt}, 1");
    ins!(b, "setp.lt.u32 {again}, {kt}, {}", p.kt_end);
    ins!(b, "@{again} bra.uni {top}");
    ins!(b, "wgmma.wait_group.sync.aligned 0");
    ins!(b, "cp.async.wait_all");
    b.comment("epilogue");
    let (items, local) = mma.items(b, lane, warp);
    // The 128-byte swizzle repeats every 1024 bytes: stages start there.
    let sink = split::sink(b, &st.cx, (kernel, target), (s, t), sp);
    let shared = st.staged_epilogue(b, s, t, &items, local, &sink);
    let shared = p.shared_bytes(shared, t);
    let maps = p.maps().unwrap_or_default();
    let k = finish(
        st,
        bld,
        (kernel, target),
        (s, t),
        maps,
        Bounds::MinCtas(1),
        shared,
    );
    split::finish(k, kernel, target, s, (sp, &sink))
}

/// The module of a warpgroup kernel whose body is in `bld`: its tensor
/// maps `maps` as parameters, bounded by `bounds`, `shared` dynamic bytes
/// aligned to 1024 (where the 128-byte swizzle repeats), for sm_90a.
pub(super) fn finish(
    mut st: Start,
    bld: Builder,
    (kernel, target): (&Kernel, &Target),
    (s, t): (&Shape, &Tile),
    maps: Vec<TensorMap>,
    bounds: Bounds,
    shared: u32,
) -> PtxKernel {
    st.params
        .extend((0..maps.len()).map(|i| map_param_decl(&st.entry, i)));
    let mut k = st.finish(bld, kernel, target, s, t, 1024, bounds, shared);
    k.maps = maps;
    // wgmma exists only on the architecture-specific target.
    k.ptx = k.ptx.replacen(".target sm_90\n", ".target sm_90a\n", 1);
    k
}

/// One warpgroup's accumulators and the MMAs of a stage into them.
pub(super) struct Mma {
    acc: Vec<Reg>,
    accumulate: Reg,
    /// Byte offset of the warpgroup's 64 rows of A within a stage.
    a_rows: Reg,
    /// Byte offset of B's tile within a stage.
    b_off: u32,
    /// Per operand: descriptor bits, step per MMA, transpose flag.
    bits: [(u64, u32, u32); 2],
    /// The instruction's type suffix, `k` per MMA and transpose operands.
    types: String,
    kstep: u32,
    trans: String,
    steps: u32,
    bn: u32,
}

impl Mma {
    /// Zeroed accumulators of thread `tid`'s warpgroup for tile `t` of
    /// `s`, its operands laid out as `layouts`.
    pub(super) fn new(
        b: &mut Builder,
        s: &Shape,
        t: &Tile,
        layouts: (Layout, Layout),
        tid: Reg,
    ) -> Mma {
        let (wg, a_rows) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "shr.u32 {wg}, {tid}, 7");
        // From lane 0: ptxas then knows it is warp-uniform and keeps the
        // descriptors built from it in uniform registers (no R2UR per MMA).
        ins!(b, "shfl.sync.idx.b32 {wg}, {wg}, 0, 31, -1");
        ins!(b, "mul.lo.u32 {a_rows}, {wg}, {}", 64 * t.k_bytes);
        let acc: Vec<Reg> = (0..t.bn() / 2)
            .map(|_| b.mov(RegKind::F32, "f32", "0f00000000"))
            .collect();
        let accumulate = b.reg(RegKind::Pred);
        ins!(b, "setp.ne.b32 {accumulate}, 1, 0");
        let bk = t.bk(s.elem.bytes());
        let bits = [
            descriptor_bits(layouts.0, bk),
            descriptor_bits(layouts.1, bk),
        ];
        let (trans_a, trans_b) = (bits[0].2, bits[1].2);
        // One MMA takes 32 bytes of `k` per row: k16 of halves, k8 of TF32,
        // k32 of FP8; TF32 and FP8 have no transpose flags (their tiles are
        // always k-major).
        let (types, kstep, trans) = match s.elem {
            Elem::F16 => ("f16.f16".into(), 16, format!(", {trans_a}, {trans_b}")),
            Elem::BF16 => ("bf16.bf16".into(), 16, format!(", {trans_a}, {trans_b}")),
            Elem::Tf32 => ("tf32.tf32".into(), 8, String::new()),
            Elem::Fp8 { a, b } => (
                format!("{}.{}", fp8_type(a), fp8_type(b)),
                32,
                String::new(),
            ),
            Elem::F32 => unreachable!("exact f32 products do not use tensor cores"),
        };
        Mma {
            acc,
            accumulate,
            a_rows,
            b_off: t.bm() * t.k_bytes,
            bits,
            types,
            kstep,
            trans,
            steps: t.k_bytes / KSTEP_BYTES,
            bn: t.bn(),
        }
    }

    /// Zeroes the accumulators again (for another output tile).
    pub(super) fn zero(&self, b: &mut Builder) {
        for r in &self.acc {
            ins!(b, "mov.f32 {r}, 0f00000000");
        }
    }

    /// The MMAs of the stage at shared address `stage`, one commit group.
    pub(super) fn issue(&self, b: &mut Builder, stage: Reg) {
        let (a_tile, b_tile) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "add.u32 {a_tile}, {stage}, {}", self.a_rows);
        ins!(b, "add.u32 {b_tile}, {stage}, {}", self.b_off);
        let [(bits_a, step_a, _), (bits_b, step_b, _)] = self.bits;
        let (da, db) = (descriptor(b, a_tile, bits_a), descriptor(b, b_tile, bits_b));
        let d = self
            .acc
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        ins!(b, "wgmma.fence.sync.aligned");
        for step in 0..self.steps {
            let (sa, sb) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
            ins!(b, "add.s64 {sa}, {da}, {}", step_a * step);
            ins!(b, "add.s64 {sb}, {db}, {}", step_b * step);
            ins!(
                b,
                "wgmma.mma_async.sync.aligned.m64n{}k{}.f32.{} {{{d}}}, {sa}, {sb}, {}, 1, 1{}",
                self.bn,
                self.kstep,
                self.types,
                self.accumulate,
                self.trans
            );
        }
        ins!(b, "wgmma.commit_group.sync.aligned");
    }

    /// The accumulators as epilogue items of the thread (`lane` of warp
    /// `warp` of the CTA), and its first row and column in the tile.
    pub(super) fn items(
        &self,
        b: &mut Builder,
        lane: Reg,
        warp: Reg,
    ) -> (Vec<epilogue::Item>, (Reg, Reg)) {
        let (g, tg, lm, ln) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
        );
        ins!(b, "shr.u32 {g}, {lane}, 2");
        ins!(b, "and.b32 {tg}, {lane}, 3");
        // Warp v of the CTA covers rows 16 v of the tile (warpgroups stack).
        ins!(b, "mad.lo.u32 {lm}, {warp}, 16, {g}");
        ins!(b, "shl.b32 {ln}, {tg}, 1");
        let items = self
            .acc
            .iter()
            .enumerate()
            .map(|(j, reg)| {
                let j = j as u32;
                epilogue::Item {
                    reg: *reg,
                    dm: 8 * ((j / 2) % 2),
                    dn: 8 * (j / 4) + j % 2,
                }
            })
            .collect();
        (items, (lm, ln))
    }
}

/// The `wgmma` operand type of FP8 dtype `dt`.
fn fp8_type(dt: DType) -> &'static str {
    match dt {
        DType::F8E4M3 => "e4m3",
        DType::F8E5M2 => "e5m2",
        _ => unreachable!("{dt} is not an FP8 dtype"),
    }
}

/// The shared-memory matrix descriptor of a tile at shared address `addr`
/// (u32, 1024-byte aligned) with the constant `bits`: the address's low
/// 18 bits in 16-byte units. (In a cluster launch a CTA's shared
/// addresses carry bits above those; unmasked, they ran into the `LBO`
/// field and broke the row-major operands' second atom.)
pub(crate) fn descriptor(b: &mut Builder, addr: Reg, bits: u64) -> Reg {
    let (x, d) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
    ins!(b, "cvt.u64.u32 {x}, {addr}");
    ins!(b, "shr.u64 {x}, {x}, 4");
    ins!(b, "and.b64 {x}, {x}, 16383");
    ins!(b, "or.b64 {d}, {x}, {bits}");
    d
}
