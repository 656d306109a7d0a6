//! What every matmul emitter shares: the kernel's start (parameters,
//! thread and CTA ids, the CTA tile's origin in grouped order, the batch
//! variables), the operands' batch offsets, and the module around the body.

use super::config::Tile;
use super::epilogue;
use super::shape::{Operand, Shape};
use crate::ir::Kernel;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::eval::Cx;
use crate::ptx::module::{entry_name, module, prologue, Launch, PtxKernel};
use crate::ptx::target::Target;

/// What every matmul emitter starts from: the kernel's parameters and
/// evaluator, the thread index, the shared base, the CTA tile's origin in
/// C and the batch variables' values.
pub(super) struct Start<'k> {
    pub(super) entry: String,
    pub(super) smem: String,
    pub(super) params: Vec<String>,
    pub(super) cx: Cx<'k>,
    pub(super) tid: Reg,
    pub(super) smem_base: Reg,
    pub(super) m0: Reg,
    pub(super) n0: Reg,
    pub(super) batch: Vec<Reg>,
}

/// How the module bounds a CTA's registers.
pub(super) enum Bounds {
    /// ptxas keeps registers low enough for this many CTAs per SM of the
    /// tile's threads.
    MinCtas(u32),
    /// `threads` per CTA (the tile's and more), each launched with at most
    /// `regs` registers (`.maxnreg`, what `setmaxnreg` needs).
    Registers { threads: u32, regs: u32 },
}

/// The common start of a matmul kernel with CTA tiles `t`, and the
/// builder holding its code so far.
pub(super) fn start<'k>(
    kernel: &'k Kernel,
    target: &Target,
    s: &Shape,
    t: &impl CtaTile,
) -> (Builder, Start<'k>) {
    let entry = entry_name(kernel);
    let smem = format!("{entry}_smem");
    let mut b = Builder::default();
    let (params, cx) = prologue(kernel, target, &entry, &mut b);
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
    /// Where the CTA's threads stage tile `t` for the epilogue: the whole
    /// tile at the shared base, each thread's items from `local`.
    pub(super) fn staging(&self, t: &Tile, local: (Reg, Reg)) -> epilogue::Staging {
        epilogue::Staging {
            smem: self.smem_base,
            tid: self.tid,
            threads: t.threads(),
            bm: t.bm(),
            bn: t.bn(),
            origin: (self.m0, self.n0),
            local,
            cols: t.bn(),
            named_barrier: false,
        }
    }

    /// The staged epilogue (see [`epilogue::staged`]) of a tensor-core
    /// tile `t` whose thread holds `items` from `local` (row, column within
    /// the tile), to `sink`; returns the dynamic shared memory the kernel
    /// needs.
    pub(super) fn staged_epilogue(
        &self,
        b: &mut Builder,
        s: &Shape,
        t: &Tile,
        items: &[epilogue::Item],
        local: (Reg, Reg),
        sink: &epilogue::Sink,
    ) -> u32 {
        let staging = self.staging(t, local);
        epilogue::staged(b, &self.cx, s, items, &staging, &self.batch, sink);
        t.shared_bytes()
            .max(epilogue::staging_bytes(t.bm(), t.bn()))
    }

    /// The module around the body emitted into `b` (which this ends with
    /// `ret`), launched as one CTA per tile and batch (of `t.threads()`,
    /// or the threads `bounds` gives) with `shared` dynamic shared bytes
    /// aligned to `align`, its registers bounded as `bounds` says.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish(
        self,
        mut b: Builder,
        kernel: &Kernel,
        target: &Target,
        s: &Shape,
        t: &impl CtaTile,
        align: u32,
        bounds: Bounds,
        shared: u32,
    ) -> PtxKernel {
        ins!(b, "ret");
        let decls = format!(".extern .shared .align {align} .b8 {}[];\n\n", self.smem);
        let (threads, directives) = match bounds {
            Bounds::MinCtas(n) => (
                t.threads(),
                format!(".maxntid {}, 1, 1\n.minnctapersm {n}\n", t.threads()),
            ),
            Bounds::Registers { threads, regs } => (
                threads,
                format!(".maxntid {threads}, 1, 1\n.maxnreg {regs}\n"),
            ),
        };
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
            launches: vec![Launch {
                entry: self.entry,
                grid: (ctas_m * ctas_n, 1, s.batches(kernel) as u32),
                block: (threads, 1, 1),
                shared_bytes: shared,
            }],
            maps: Vec::new(),
        }
    }
}

/// `(lane, warp)` of thread `tid`.
pub(super) fn lane_and_warp(b: &mut Builder, tid: Reg) -> (Reg, Reg) {
    let (lane, warp) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "and.b32 {lane}, {tid}, 31");
    ins!(b, "shr.u32 {warp}, {tid}, 5");
    (lane, warp)
}

/// A CTA tile launched in grouped order: both emitters' configurations.
pub(super) trait CtaTile {
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
pub(super) fn tile_origin(b: &mut Builder, s: &Shape, t: &impl CtaTile, pid: Reg) -> (Reg, Reg) {
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
pub(super) fn unravel_batch(b: &mut Builder, k: &Kernel, s: &Shape, z: Reg) -> Vec<Reg> {
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
pub(super) fn batch_offset(b: &mut Builder, op: &Operand, batch: &[Reg]) -> Reg {
    let off = b.reg(RegKind::B64);
    ins!(b, "mov.b64 {off}, {}", op.konst);
    for (c, r) in op.batch.iter().zip(batch) {
        let r64 = b.reg(RegKind::B64);
        ins!(b, "cvt.u64.u32 {r64}, {r}");
        ins!(b, "mad.lo.s64 {off}, {r64}, {c}, {off}");
    }
    off
}
