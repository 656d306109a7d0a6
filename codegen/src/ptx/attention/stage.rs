//! A tile of one attention part (`q`, `k` or `v`) evaluated into shared
//! memory, the way both emitters fill their tiles: every point through
//! the shared `eval::Cx` (loads through any view, casts, fused producers),
//! zero outside the matrix.

use super::{acc_imm, acc_ty, Coords};
use crate::attention::Attention;
use crate::ir::Val;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::eval::{Cx, Vals};
use crate::ptx::ops;
use crate::DType;

/// The CTA's threads that evaluate tiles together.
pub(super) struct Stager<'a> {
    pub cx: &'a Cx<'a>,
    pub a: &'a Attention,
    pub coords: &'a Coords,
    /// The thread's index in the CTA and the CTA's thread count.
    pub tid: Reg,
    pub threads: u32,
    /// Shared address of the kernel's shared memory.
    pub base: Reg,
}

/// One tile: part `root` (instructions `insts`) at `rows x padded`
/// points, row `r` at variable `vars.0 = from.0 + r`, column `c` at
/// `vars.1 = c`. Points with `vars.0 >= from.1` or `c >= cols` store 0.
pub(super) struct Tile<'p> {
    pub insts: &'p [Val],
    pub root: Val,
    pub rows: u32,
    pub cols: u32,
    /// Columns written per row (`cols` rounded up to the consumer's
    /// granularity: zeros there leave sums over the columns unchanged).
    pub padded: u32,
    pub vars: (usize, usize),
    pub from: (Reg, u32),
    /// Byte offset of the tile in shared memory and bytes between rows.
    pub dst: u32,
    pub row_bytes: u32,
    /// Stored as this half type (`.b16`, exact for a part that is a cast
    /// of a half value) instead of the accumulation type.
    pub half: Option<DType>,
}

impl Stager<'_> {
    /// Evaluates `t` into shared memory: consecutive threads take
    /// consecutive points of a row (no barrier here).
    pub fn stage(&self, b: &mut Builder, t: &Tile) {
        let (ty, kind) = acc_ty(self.a);
        let idx = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {idx}, {}", self.tid);
        let (top, end) = (b.label(), b.label());
        b.place(&top);
        let done = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.u32 {done}, {idx}, {}", t.rows * t.padded);
        ins!(b, "@{done} bra {end}");
        let (rr, cc, g) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
        );
        ins!(b, "div.u32 {rr}, {idx}, {}", t.padded);
        ins!(b, "rem.u32 {cc}, {idx}, {}", t.padded);
        ins!(b, "add.u32 {g}, {}, {rr}", t.from.0);
        let ok = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.u32 {ok}, {g}, {}", t.from.1);
        if t.padded > t.cols {
            ins!(b, "setp.lt.and.u32 {ok}, {cc}, {}, {ok}", t.cols);
        }
        let p = self
            .coords
            .point(b, self.cx, [(t.vars.0, g), (t.vars.1, cc)], ok);
        let mut vals: Vals = vec![None; self.cx.k.insts.len()];
        self.cx.eval(b, &p, t.insts, &mut vals);
        let x = vals[t.root].as_ref().expect("part evaluated")[0];
        let x = ops::convert(b, x, self.a.acc).reg;
        let z = b.reg(kind);
        ins!(b, "selp.{ty} {z}, {x}, {}, {ok}", acc_imm(self.a, 0.0));
        let size = t.half.map_or(self.a.acc.size(), DType::size) as u32;
        let addr = b.reg(RegKind::B32);
        ins!(b, "mul.lo.u32 {addr}, {cc}, {size}");
        ins!(b, "mad.lo.u32 {addr}, {rr}, {}, {addr}", t.row_bytes);
        ins!(b, "add.u32 {addr}, {addr}, {}", self.base);
        match t.half {
            Some(h) => {
                let hb = half_bits(b, z, h);
                ins!(b, "st.shared.b16 [{addr}+{}], {hb}", t.dst);
            }
            None => ins!(b, "st.shared.{ty} [{addr}+{}], {z}", t.dst),
        }
        ins!(b, "add.u32 {idx}, {idx}, {}", self.threads);
        ins!(b, "bra {top}");
        b.place(&end);
    }
}

/// The `.b16` bits of the `f32` register `x` rounded to the half type `h`.
fn half_bits(b: &mut Builder, x: Reg, h: DType) -> Reg {
    let r = b.reg(RegKind::B16);
    let ty = if h == DType::F16 { "f16" } else { "bf16" };
    ins!(b, "cvt.rn.{ty}.f32 {r}, {x}");
    r
}
