//! The pipeline the tensor-core emitters share: both operands' tiles
//! copied into `stages` rotating shared buffers of a [`Tile`], A's tile
//! first in each stage, then B's.
//!
//! Tiles travel by the copy engine (`tma.rs`: `wgmma` operands it can map,
//! one barrier per stage), by `cp.async` (one commit group per k-tile),
//! or, for TF32 operands of `wgmma` the engine cannot map and FP8 ones
//! contiguous along their rows, through registers that round or transpose
//! them (see `load.rs`, `fp8_rows.rs`): then each step stores the k-tile
//! fetched the step before and fetches the next, so a global load has a
//! whole step of MMAs to arrive.

use super::config::Tile;
use super::load::{Layout, OperandLoad, Source};
use super::shape::{Elem, Operand, Shape};
use super::split::{self, Split};
use super::start::{batch_offset, Start};
use super::tma;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};

pub struct Pipeline {
    /// A's and B's shared layouts.
    pub layouts: (Layout, Layout),
    copies: Copies,
    /// Offset of B's tile within a stage.
    pub b_off: u32,
    /// The k-tiles this CTA multiplies, the main loop's bound: `kt_total`
    /// as an immediate, or under split-K the register of its count.
    pub kt_end: String,
    /// Split-K: the CTA's first k-tile (the loop counts from 0 and the
    /// copies add it).
    kt0: Option<Reg>,
    /// The most k-tiles any CTA multiplies (known when emitting).
    kt_most: u32,
    smem_base: Reg,
    stages: u32,
    stage_bytes: u32,
}

/// Who copies the tiles.
enum Copies {
    /// Every thread its chunks: by `cp.async`, or staged through
    /// registers (rounded to TF32, or FP8 rows transposed).
    Threads {
        la: Box<OperandLoad>,
        lb: Box<OperandLoad>,
        staged: bool,
    },
    /// Thread 0 through the copy engine.
    Engine(tma::Copies),
}

/// Whether `wgmma` tiles of `s` travel through registers: TF32 (rounded
/// on the way), and FP8 where an operand is contiguous along its rows
/// (transposed on the way) and the other is too or is copied 16 bytes
/// along `k` (an operand of byte loads keeps the unstaged pipeline).
pub fn stages_in_registers(s: &Shape) -> bool {
    match s.elem {
        Elem::Tf32 => true,
        Elem::Fp8 { .. } => {
            let rows = |op: &Operand, n: i64| op.rows_only(s.k, n, 16);
            let copied = |op: &Operand, n: i64| op.vector_ok(s.k, 16) || rows(op, n);
            (rows(&s.a, s.m) || rows(&s.b, s.n)) && copied(&s.a, s.m) && copied(&s.b, s.n)
        }
        _ => false,
    }
}

/// Shared address of k-tile `kt`'s stage among `stages` of `stage_bytes`
/// from `base`.
fn stage_at(b: &mut Builder, kt: Reg, (stages, stage_bytes): (u32, u32), base: Reg) -> Reg {
    let (st, addr) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "rem.u32 {st}, {kt}, {stages}");
    ins!(b, "mad.lo.u32 {addr}, {st}, {stage_bytes}, {base}");
    addr
}

/// Shared address of k-tile `kt`'s stage of tile `t` whose stages start
/// at `base`.
pub fn stage_address(b: &mut Builder, kt: Reg, t: &Tile, base: Reg) -> Reg {
    stage_at(b, kt, (t.stages, t.stage_bytes()), base)
}

impl Pipeline {
    /// The per-thread copy state of the CTA at `st`, over its k-tiles
    /// under split `sp`. For `wgmma` (`wgmma`), operands the copy engine
    /// can map go through it (`tma.rs`, both or neither), row-major half
    /// tiles are cut into 64-row atoms and other TF32 tiles are rounded on
    /// their way through registers.
    pub fn new(
        b: &mut Builder,
        st: &Start,
        s: &Shape,
        t: &Tile,
        wgmma: bool,
        sp: Split,
    ) -> Pipeline {
        let eb = s.elem.bytes();
        let b_off = t.bm() * t.k_bytes;
        let kt_total = (s.k as u64).div_ceil(t.bk(eb) as u64) as u32;
        let (kt0, kt_end, kt_most) = if sp.is_split() {
            let (first, count) = split::k_tiles(b, sp, kt_total);
            (Some(first), count.to_string(), sp.chunk.min(kt_total))
        } else {
            (None, kt_total.to_string(), kt_total)
        };
        let engine = wgmma.then(|| tma::plan(st.cx.k, s, t)).flatten();
        let (layouts, copies) = match engine {
            Some(plan) => {
                let offs = [&s.a, &s.b].map(|op| batch_offset(b, op, &st.batch));
                let at = (0, tma::Plan::barriers(t).0);
                let c = tma::Copies::new(b, &plan, st, (s, t), offs, at);
                (plan.layouts(), Copies::Engine(c))
            }
            None => {
                let staged = wgmma && stages_in_registers(s);
                let mut load = |op, row0, rows, tile_rows, tile_off| {
                    let batch_off = batch_offset(b, op, &st.batch);
                    let src = Source {
                        op,
                        eb,
                        base: st.cx.inputs[op.input],
                        batch_off,
                        row0,
                        rows,
                        tile_rows,
                        k_len: s.k,
                        tile_off,
                        atoms: wgmma,
                        staged,
                        round_tf32: staged && s.elem == Elem::Tf32,
                    };
                    OperandLoad::new(b, &src, st.tid, t)
                };
                let la = Box::new(load(&s.a, st.m0, s.m, t.bm(), 0));
                let lb = Box::new(load(&s.b, st.n0, s.n, t.bn(), b_off));
                ((la.layout, lb.layout), Copies::Threads { la, lb, staged })
            }
        };
        Pipeline {
            layouts,
            copies,
            b_off,
            kt_end,
            kt0,
            kt_most,
            smem_base: st.smem_base,
            stages: t.stages,
            stage_bytes: t.stage_bytes(),
        }
    }

    /// The dynamic shared bytes of a kernel that needs `shared` besides
    /// the pipeline's barriers (the copy engine's, see `tma.rs`).
    pub fn shared_bytes(&self, shared: u32, t: &Tile) -> u32 {
        match self.copies {
            Copies::Engine(_) => shared.max(tma::Plan::barriers(t).1),
            Copies::Threads { .. } => shared,
        }
    }

    /// Shared address of the stage of k-tile `kt`.
    pub fn stage(&self, b: &mut Builder, kt: Reg) -> Reg {
        stage_at(b, kt, (self.stages, self.stage_bytes), self.smem_base)
    }

    /// Starts the copies of the first `n` k-tiles, one commit group each
    /// (empty past the last tile, so group counts stay fixed); staged
    /// tiles are stored, and tile `n` is fetched. (Under split-K the last
    /// split may copy tiles past its own: they are zero past `K`, or the
    /// next split's, and never multiplied; the copy engine starts only
    /// the CTA's own, each of which it waits for.) With the copy engine,
    /// ends with a barrier that shows every thread the initialised
    /// barriers.
    pub fn prologue(&self, b: &mut Builder, n: u32) {
        b.comment("pipeline prologue");
        match &self.copies {
            Copies::Engine(c) => {
                c.init(b, None);
                for kt in 0..n.min(self.kt_most) {
                    let kt = b.mov(RegKind::B32, "u32", kt);
                    let ours = b.reg(RegKind::Pred);
                    ins!(b, "setp.lt.u32 {ours}, {kt}, {}", self.kt_end);
                    let (g, stage) = (self.global(b, kt), self.stage(b, kt));
                    c.start(b, (kt, g), stage, Some(ours));
                }
                ins!(b, "bar.sync 0");
            }
            Copies::Threads { staged, .. } => {
                for kt in 0..n {
                    if kt < self.kt_most {
                        let kt = b.mov(RegKind::B32, "u32", kt);
                        self.copy(b, kt);
                    }
                    if !staged {
                        ins!(b, "cp.async.commit_group");
                    }
                }
                if *staged && n < self.kt_most {
                    let kt = b.mov(RegKind::B32, "u32", n);
                    self.fetch(b, kt);
                }
            }
        }
    }

    /// Waits until k-tile `kt` (started with distance `ahead`) has landed:
    /// every thread on its barrier with the copy engine, else this
    /// thread's own copies (staged stores need no wait). A barrier must
    /// follow before other threads read a tile the threads copied.
    pub fn wait(&self, b: &mut Builder, kt: Reg, ahead: u32) {
        match &self.copies {
            Copies::Engine(c) => c.wait(b, kt),
            Copies::Threads { staged: false, .. } => {
                ins!(b, "cp.async.wait_group {}", ahead - 1)
            }
            Copies::Threads { staged: true, .. } => {}
        }
    }

    /// Starts the copy of the CTA's k-tile `kt + ahead` if it exists, and
    /// commits a group either way; staged, stores k-tile `kt + ahead`
    /// (fetched the step before) and fetches the next.
    pub fn refill(&self, b: &mut Builder, kt: Reg, ahead: u32) {
        let (next, more) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
        ins!(b, "add.u32 {next}, {kt}, {ahead}");
        ins!(b, "setp.lt.u32 {more}, {next}, {}", self.kt_end);
        let (la, lb, staged) = match &self.copies {
            Copies::Engine(c) => {
                let (g, stage) = (self.global(b, next), self.stage(b, next));
                return c.start(b, (next, g), stage, Some(more));
            }
            Copies::Threads { la, lb, staged } => (la, lb, *staged),
        };
        let skip = b.label();
        ins!(b, "@!{more} bra.uni {skip}");
        if staged {
            let addr = self.stage(b, next);
            la.put(b, addr);
            lb.put(b, addr);
            let after = b.reg(RegKind::B32);
            ins!(b, "add.u32 {after}, {next}, 1");
            ins!(b, "setp.lt.u32 {more}, {after}, {}", self.kt_end);
            ins!(b, "@!{more} bra.uni {skip}");
            self.fetch(b, after);
            b.place(&skip);
            return;
        }
        self.copy(b, next);
        b.place(&skip);
        ins!(b, "cp.async.commit_group");
    }

    /// The threads copy the CTA's k-tile `kt` into its stage (staged:
    /// fetched and stored at once, for the prologue).
    fn copy(&self, b: &mut Builder, kt: Reg) {
        let Copies::Threads { la, lb, staged } = &self.copies else {
            unreachable!("the copy engine starts its own copies")
        };
        let addr = self.stage(b, kt);
        if *staged {
            self.fetch(b, kt);
            la.put(b, addr);
            lb.put(b, addr);
        } else {
            let g = self.global(b, kt);
            la.tile(b, addr, g);
            lb.tile(b, addr, g);
        }
    }

    /// Loads the CTA's k-tile `kt` into the staging registers.
    fn fetch(&self, b: &mut Builder, kt: Reg) {
        let Copies::Threads { la, lb, .. } = &self.copies else {
            unreachable!("the copy engine stages nothing")
        };
        let g = self.global(b, kt);
        la.fetch(b, g);
        lb.fetch(b, g);
    }

    /// The product's k-tile of the CTA's k-tile `kt`.
    fn global(&self, b: &mut Builder, kt: Reg) -> Reg {
        match self.kt0 {
            Some(first) => {
                let g = b.reg(RegKind::B32);
                ins!(b, "add.u32 {g}, {kt}, {first}");
                g
            }
            None => kt,
        }
    }

    /// The tensor maps the copies read (A's then B's), if any.
    pub fn maps(&self) -> Option<Vec<crate::ptx::module::TensorMap>> {
        match &self.copies {
            Copies::Engine(c) => Some(c.maps()),
            Copies::Threads { .. } => None,
        }
    }
}
