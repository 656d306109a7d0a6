//! Operand tiles through the copy engine (`cp.async.bulk.tensor`, sm_90)
//! for the warpgroup kernel, wherever `k` spans more than one k-tile
//! (`SMELT_MATMUL_TMA=0` keeps the threads' copies).
//!
//! On an H100 (2026-11-28, `SMELT_TUNE=0`, cuBLAS in the same process) it
//! took f16/bf16 `B^T` from 84-97% of cuBLAS to 97-110% at 2048^3-8192^3
//! and the transformer shapes (row-major B from 76-89% to 94-116%), TF32
//! from 46-72% to 72-106%, and FP8 from 87-102% of cuBLASLt to 96-114%.
//!
//! # Maps
//! An operand whose elements are contiguous along `k` with a row stride
//! of whole 16 bytes is a 3-d tensor map (dimension 0 `k`, 1 its rows,
//! 2 the batch offset in units of the greatest common divisor of the
//! offset's coefficients, as the attention kernel's maps are): one box of
//! `bk x rows` per stage lands in exactly the k-major layout of `load.rs`
//! (128-byte rows, 128-byte swizzle). A half operand contiguous along its
//! rows (a row-major B, a transposed A) is mapped rows first, and each
//! 64-row atom of the MN-major layout is one box of `64 x bk`. The engine
//! writes zeros past the matrix (any M, N and K: a K that is not a
//! multiple of 8 needs no element loads), and rounds TF32 operands on the
//! way ([`MapElem::Tf32`]: ties to even, as `RoundTf32`), so TF32 tiles
//! are not staged through registers.
//!
//! # Barriers
//! One barrier per stage, after the buffers and the epilogue's staging
//! area (so nothing reuses its memory): thread 0 announces a stage's bytes
//! (`expect_tx`) and starts its copies; every thread waits on the phase of
//! k-tile `kt`, `(kt / stages) % 2`. The pipeline's per-tile `bar.sync`
//! still orders a refill after every warpgroup's MMAs of the stage, so no
//! "empty" barriers are needed. Thread 0 starts only k-tiles of the CTA's
//! own range, so every copy is waited for before the CTA exits.

use super::config::Tile;
use super::epilogue;
use super::load::Layout;
use super::shape::{Elem, Operand, Shape};
use super::start::Start;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::module::{batch_units, map_param, MapElem, TensorMap};

/// How one operand's tiles are copied.
#[derive(Clone, Copy)]
struct Part {
    layout: Layout,
    /// Elements per unit of dimension 2.
    unit: i64,
    /// Boxes per tile: 1 (k-major) or its 64-row atoms.
    boxes: u32,
    /// The tile's byte offset within a stage.
    tile_off: u32,
}

/// The copy engine's plan for one kernel: A's and B's parts, and their
/// tensor maps (A's first).
pub struct Plan {
    parts: [Part; 2],
    pub maps: Vec<TensorMap>,
}

/// Whether the copy engine is on (`SMELT_MATMUL_TMA`, default on).
pub fn enabled() -> bool {
    crate::env::flag("SMELT_MATMUL_TMA", true)
}

/// The plan for warpgroup tile `t` over `s` when both operands can be
/// mapped (and the copy engine is on); `None` keeps the threads' copies.
pub fn plan(kernel: &crate::ir::Kernel, s: &Shape, t: &Tile) -> Option<Plan> {
    if !t.wgmma || !enabled() {
        return None;
    }
    let elem = match s.elem {
        Elem::F16 | Elem::BF16 => MapElem::B16,
        Elem::Tf32 => MapElem::Tf32,
        Elem::Fp8 { .. } => MapElem::B8,
        Elem::F32 => return None,
    };
    let bk = t.bk(s.elem.bytes());
    // One k-tile leaves nothing to overlap: the barriers' setup cost more
    // than the copies saved (f16 32 x 512x512x64: 3-6% slower, H100).
    if s.k <= i64::from(bk) {
        return None;
    }
    let (a, ma) = part(kernel, &s.a, (s.m, t.bm(), 0), (s.k, bk), elem)?;
    let (b, mb) = part(
        kernel,
        &s.b,
        (s.n, t.bn(), t.bm() * t.k_bytes),
        (s.k, bk),
        elem,
    )?;
    Some(Plan {
        parts: [a, b],
        maps: vec![ma, mb],
    })
}

/// One operand's part and map: `(rows, tile_rows, tile_off)` of it,
/// `(k, bk)`.
fn part(
    kernel: &crate::ir::Kernel,
    op: &Operand,
    (rows, tile_rows, tile_off): (i64, u32, u32),
    (k, bk): (i64, u32),
    elem: MapElem,
) -> Option<(Part, TensorMap)> {
    let eb = i64::from(elem.bytes());
    let aligned = |stride: i64| stride > 0 && (stride * eb) % 16 == 0;
    // Dimension 0 is the contiguous one: `k` (k-major), else the rows
    // (halves only: the MN-major layout is `wgmma`'s transpose of them).
    let (layout, dim0, dim1, stride1, box_) = if op.k == 1 && aligned(op.row) {
        (Layout::KMajor, k, rows, op.row, [bk, tile_rows])
    } else if elem == MapElem::B16 && op.row == 1 && aligned(op.k) {
        (Layout::MnAtoms, rows, k, op.k, [64, bk])
    } else {
        return None;
    };
    let coefs = op.batch.iter().copied().chain([op.konst]);
    let (unit, units) = batch_units(coefs, 16 / eb, kernel.inputs[op.input].len as u64);
    let fits = (unit * eb) % 16 == 0
        && units <= i32::MAX as u64
        && [dim0, dim1]
            .iter()
            .all(|d| (1..=i64::from(u32::MAX)).contains(d))
        && (stride1.max(unit) * eb) < (1 << 40);
    let map = TensorMap {
        input: op.input,
        elem,
        dims: [dim0 as u64, dim1 as u64, units],
        strides: [(stride1 * eb) as u64, (unit * eb) as u64],
        boxes: [box_[0], box_[1], 1],
    };
    let boxes = match layout {
        Layout::KMajor => 1,
        _ => tile_rows / 64,
    };
    let p = Part {
        layout,
        unit,
        boxes,
        tile_off,
    };
    fits.then_some((p, map))
}

impl Plan {
    /// A's and B's shared layouts.
    pub fn layouts(&self) -> (Layout, Layout) {
        (self.parts[0].layout, self.parts[1].layout)
    }

    /// The byte offset of the barriers in dynamic shared memory (past
    /// the stages and the epilogue's staging), and the kernel's dynamic
    /// shared bytes with them.
    pub fn barriers(t: &Tile) -> (u32, u32) {
        let off = t
            .shared_bytes()
            .max(epilogue::staging_bytes(t.bm(), t.bn()))
            .next_multiple_of(8);
        (off, off + 8 * t.stages)
    }
}

/// The registers the copies use through the kernel.
pub struct Copies {
    parts: [Part; 2],
    maps: Vec<TensorMap>,
    /// Per operand: the map's generic address, dimension 2's coordinate
    /// and the tile's first row (`m0` or `n0`).
    map: [Reg; 2],
    unit: [Reg; 2],
    row0: [Reg; 2],
    /// The thread that starts every copy.
    producer: Reg,
    bars: Reg,
    stages: u32,
    stage_bytes: u32,
    bk: u32,
}

impl Copies {
    /// The copies' registers for the CTA at `st`, the operands' batch
    /// offsets `batch_off` (elements, s64) and the tile `t` of `s`; thread
    /// `issuer` starts every copy, and the barriers lie at byte `bars` of
    /// dynamic shared memory ([`Plan::barriers`] but in the persistent
    /// kernel).
    pub fn new(
        b: &mut Builder,
        plan: &Plan,
        st: &Start,
        (s, t): (&Shape, &Tile),
        batch_off: [Reg; 2],
        (issuer, bars_at): (u32, u32),
    ) -> Copies {
        let producer = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {producer}, {}, {issuer}", st.tid);
        let bars = b.reg(RegKind::B32);
        ins!(b, "add.u32 {bars}, {}, {bars_at}", st.smem_base);
        // Per operand: the map's generic address, the batch's coordinate.
        let regs: [(Reg, Reg); 2] = std::array::from_fn(|i| {
            let (m, gm) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
            ins!(b, "mov.b64 {m}, {}", map_param(&st.entry, i));
            ins!(b, "cvta.param.u64 {gm}, {m}");
            let (q, u) = (b.reg(RegKind::B64), b.reg(RegKind::B32));
            ins!(b, "div.s64 {q}, {}, {}", batch_off[i], plan.parts[i].unit);
            ins!(b, "cvt.u32.u64 {u}, {q}");
            (gm, u)
        });
        Copies {
            parts: plan.parts,
            maps: plan.maps.clone(),
            map: regs.map(|r| r.0),
            unit: regs.map(|r| r.1),
            row0: [st.m0, st.n0],
            producer,
            bars,
            stages: t.stages,
            stage_bytes: t.stage_bytes(),
            bk: t.bk(s.elem.bytes()),
        }
    }

    /// The shared address of the barriers.
    pub fn bars(&self) -> Reg {
        self.bars
    }

    /// The tensor maps the copies read, A's then B's.
    pub fn maps(&self) -> Vec<TensorMap> {
        self.maps.clone()
    }

    /// The issuing thread initialises the barriers, and with `empty`
    /// (an arrival count) a second set of `stages` past them (the
    /// warp-specialised kernel's "empty" barriers); the caller's
    /// `bar.sync` then shows them to every thread before any waits.
    pub fn init(&self, b: &mut Builder, empty: Option<u32>) {
        let skip = b.label();
        ins!(b, "@!{} bra {skip}", self.producer);
        for i in 0..self.stages {
            ins!(
                b,
                "mbarrier.init.shared::cta.b64 [{}+{}], 1",
                self.bars,
                8 * i
            );
        }
        if let Some(count) = empty {
            for i in self.stages..2 * self.stages {
                ins!(
                    b,
                    "mbarrier.init.shared::cta.b64 [{}+{}], {count}",
                    self.bars,
                    8 * i
                );
            }
        }
        ins!(b, "fence.mbarrier_init.release.cluster");
        b.place(&skip);
    }

    /// The issuing thread starts k-tile `kt` of the CTA (product k-tile
    /// `g`) into its stage at shared address `stage`, where `go` (a
    /// predicate) holds too.
    pub fn start(&self, b: &mut Builder, (kt, g): (Reg, Reg), stage: Reg, go: Option<Reg>) {
        let skip = b.label();
        let me = match go {
            Some(go) => {
                let me = b.reg(RegKind::Pred);
                ins!(b, "and.pred {me}, {go}, {}", self.producer);
                me
            }
            None => self.producer,
        };
        ins!(b, "@!{me} bra {skip}");
        let bar = barrier(b, self.bars, self.stages, kt);
        ins!(
            b,
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{bar}], {}",
            self.stage_bytes
        );
        let k0 = b.reg(RegKind::B32);
        ins!(b, "mul.lo.u32 {k0}, {g}, {}", self.bk);
        for (i, p) in self.parts.iter().enumerate() {
            for a in 0..p.boxes {
                // k-major: {k, row}; MN-major atom `a`: {row + 64 a, k}.
                let (c0, c1, dst) = match p.layout {
                    Layout::KMajor => (k0, self.row0[i], p.tile_off),
                    _ => {
                        let r = b.reg(RegKind::B32);
                        ins!(b, "add.u32 {r}, {}, {}", self.row0[i], 64 * a);
                        (r, k0, p.tile_off + a * self.bk * 128)
                    }
                };
                ins!(
                    b,
                    "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{stage}+{dst}], [{}, {{{c0}, {c1}, {}}}], [{bar}]",
                    self.map[i],
                    self.unit[i]
                );
            }
        }
        b.place(&skip);
    }

    /// Every thread waits until k-tile `kt`'s copies have landed.
    pub fn wait(&self, b: &mut Builder, kt: Reg) {
        wait_phase(b, self.bars, self.stages, kt, false);
    }
}

/// Waits until k-tile `kt`'s barrier among `stages` at `bars` completes
/// the phase of `kt`, parity `(kt / stages) % 2`; with `before`, the
/// phase before it (parity flipped: the previous k-tile of the stage,
/// and for `kt < stages` the phase before a fresh barrier's first, which
/// counts as complete).
pub fn wait_phase(b: &mut Builder, bars: Reg, stages: u32, kt: Reg, before: bool) {
    let bar = barrier(b, bars, stages, kt);
    let ph = b.reg(RegKind::B32);
    ins!(b, "div.u32 {ph}, {kt}, {stages}");
    ins!(b, "and.b32 {ph}, {ph}, 1");
    if before {
        ins!(b, "xor.b32 {ph}, {ph}, 1");
    }
    let (top, done) = (b.label(), b.reg(RegKind::Pred));
    b.place(&top);
    ins!(
        b,
        "mbarrier.try_wait.parity.shared::cta.b64 {done}, [{bar}], {ph}"
    );
    ins!(b, "@!{done} bra {top}");
}

/// The shared address of k-tile `kt`'s barrier among `stages` at `bars`.
pub fn barrier(b: &mut Builder, bars: Reg, stages: u32, kt: Reg) -> Reg {
    let r = b.reg(RegKind::B32);
    ins!(b, "rem.u32 {r}, {kt}, {stages}");
    ins!(b, "mad.lo.u32 {r}, {r}, 8, {bars}");
    r
}
