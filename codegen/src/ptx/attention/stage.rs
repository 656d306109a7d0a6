//! A tile of one attention part (`q`, `k` or `v`) evaluated into shared
//! memory, the way both emitters fill their tiles: every point through
//! the shared `eval::Cx` (loads through any view, casts, fused producers),
//! zero outside the matrix.

use super::{acc_imm, acc_ty, Coords};
use crate::attention::Attention;
use crate::expr::Expr;
use crate::ir::{Inst, Kernel, Val};
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::eval::{Cx, Vals};
use crate::ptx::{expr, ops};
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
    /// Byte offset of the tile in shared memory and bytes between rows
    /// (unless swizzled).
    pub dst: u32,
    pub row_bytes: u32,
    /// The `wgmma` operand layout instead of padded rows: the tile (of
    /// halves, `padded` a multiple of 64) as blocks of 64 columns, each
    /// `rows` rows of 128 bytes whose 16-byte chunk `c` sits at `c ^ (row
    /// & 7)` (the hardware's 128-byte swizzle); `row_bytes` is unused.
    pub swizzled: bool,
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
        if t.swizzled {
            swizzle(b, addr, rr, t.rows);
        } else {
            ins!(b, "mad.lo.u32 {addr}, {rr}, {}, {addr}", t.row_bytes);
        }
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

/// Turns `x`, the byte column of a row `r` of a swizzled tile of `rows`
/// rows ([`Tile::swizzled`]), into the byte's offset in the tile.
fn swizzle(b: &mut Builder, x: Reg, r: Reg, rows: u32) {
    let (block, chunk, r7) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
    );
    ins!(b, "shr.u32 {block}, {x}, 7");
    ins!(b, "bfe.u32 {chunk}, {x}, 4, 3");
    ins!(b, "and.b32 {r7}, {r}, 7");
    ins!(b, "xor.b32 {chunk}, {chunk}, {r7}");
    // block * rows * 128 + r * 128 + chunk * 16 + (x & 15)
    ins!(b, "and.b32 {x}, {x}, 15");
    ins!(b, "mad.lo.u32 {x}, {chunk}, 16, {x}");
    ins!(b, "mad.lo.u32 {x}, {r}, 128, {x}");
    ins!(b, "mad.lo.u32 {x}, {block}, {}, {x}", rows * 128);
}

/// The `.b16` bits of the `f32` register `x` rounded to the half type `h`.
fn half_bits(b: &mut Builder, x: Reg, h: DType) -> Reg {
    let r = b.reg(RegKind::B16);
    let ty = if h == DType::F16 { "f16" } else { "bf16" };
    ins!(b, "cvt.rn.{ty}.f32 {r}, {x}");
    r
}

/// A half part that is one unmasked load whose tile rows can be copied
/// in 16-byte chunks (8 halves along the contiguous column axis) with
/// `cp.async`.
pub(super) struct Plain {
    pub input: usize,
    /// The element index at row and column 0: a function of the batch
    /// variables (any, a grouped-query head's division included).
    pub batch: Expr,
    /// Coefficient of the row variable.
    pub row: i64,
}

/// `root`'s load when [`Stager::copy`] can fill its tiles: a cast of a
/// half-typed load of a half buffer, never masked, affine in the row and
/// column variables with unit column stride, `cols` a multiple of 8, and
/// the row stride and every coefficient and the constant of the rest
/// multiples of 8 (16-byte aligned chunks, buffers being 16-byte
/// aligned).
pub(super) fn plain(
    k: &Kernel,
    root: Val,
    (row_var, col_var): (usize, usize),
    cols: u32,
) -> Option<Plain> {
    let Inst::Cast(l) = k.insts[root].inst else {
        return None;
    };
    let Inst::Load {
        input,
        index,
        valid,
    } = &k.insts[l].inst
    else {
        return None;
    };
    let half = k.insts[l].dtype;
    if !half.is_float() || half.size() != 2 || k.inputs[*input].dtype != half {
        return None;
    }
    let row = index.affine_coef(row_var)?;
    let zero = |v: usize| {
        if v == row_var || v == col_var {
            Expr::constant(0)
        } else {
            Expr::var(v)
        }
    };
    let batch = index.substitute(&zero, &k.ranges);
    let (terms, konst) = batch.parts();
    let aligned = terms
        .iter()
        .map(|(_, c)| *c)
        .chain([konst, row])
        .all(|c| c % 8 == 0);
    let ok = valid.is_always()
        && index.affine_coef(col_var) == Some(1)
        && cols.is_multiple_of(8)
        && aligned;
    ok.then_some(Plain {
        input: *input,
        batch,
        row,
    })
}

impl Stager<'_> {
    /// The same threads writing at shared address `base` instead.
    pub fn at(&self, base: Reg) -> Stager<'_> {
        Stager { base, ..*self }
    }

    /// Fills tile `t` of the plain part `p` with `cp.async` 16-byte copies
    /// (zero-filled past the last row and column; the caller commits and
    /// waits): thread `tid` copies chunk `tid % lanes` (`lanes`: a row's
    /// chunks rounded up to a power of two, the spare ones idle) of rows
    /// `tid / lanes`, then every `threads / lanes`-th row after, its
    /// addresses computed once and stepped by constants (few registers
    /// held across a key loop). Evaluated instead ([`Stager::stage`])
    /// where the threads are not a multiple of `lanes` or the step's
    /// byte offset overflows. Each copy asks L2 to fetch the whole 128-byte
    /// line (`.L2::128B`): one-row decode on the `mma.sync` kernel read its
    /// cache 2% faster with it (4.20 -> 4.29 TB/s, H200, 2026-11-27).
    pub fn copy(&self, b: &mut Builder, t: &Tile, p: &Plain) {
        let per_row = t.padded / 8;
        let lanes = per_row.next_power_of_two();
        let step = self.threads / lanes;
        // Bytes between a thread's rows in global memory.
        let stride = (2 * i64::from(step))
            .checked_mul(p.row)
            .filter(|s| s.checked_mul(i64::from(t.rows)).is_some());
        // A swizzled tile's rows keep their swizzle across a thread's
        // rows only when those are 8 apart (`step % 8 == 0`).
        let fits = self.threads.is_multiple_of(lanes) && (!t.swizzled || step.is_multiple_of(8));
        let Some(stride) = stride.filter(|_| fits) else {
            return self.stage(b, t);
        };
        // The batch's element offset, s64 (a multiple of 8).
        let w = self.cx.width;
        let x = expr::eval(b, &p.batch, &self.coords.vars, &self.cx.k.ranges, w);
        let off = b.reg(RegKind::B64);
        if w.wide {
            ins!(b, "mov.b64 {off}, {x}");
        } else {
            ins!(b, "cvt.s64.s32 {off}, {x}");
        }
        let src = self.cx.inputs[p.input];
        let (row0, ch, g0) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
        );
        ins!(b, "div.u32 {row0}, {}, {lanes}", self.tid);
        ins!(b, "rem.u32 {ch}, {}, {lanes}", self.tid);
        ins!(b, "add.u32 {g0}, {}, {row0}", t.from.0);
        let col_ok = (t.padded > t.cols).then(|| {
            let ok = b.reg(RegKind::Pred);
            ins!(b, "setp.lt.u32 {ok}, {ch}, {}", t.cols / 8);
            ok
        });
        let has_chunk = (lanes > per_row).then(|| {
            let ok = b.reg(RegKind::Pred);
            ins!(b, "setp.lt.u32 {ok}, {ch}, {per_row}");
            ok
        });
        // The first row's source `src + 2 (off + g0 row + 8 ch)` and
        // shared destination `base + row0 row_bytes + 16 ch`.
        let (x, a0) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
        ins!(b, "cvt.u64.u32 {x}, {g0}");
        ins!(b, "mad.lo.s64 {a0}, {x}, {}, {off}", p.row);
        ins!(b, "cvt.u64.u32 {x}, {ch}");
        ins!(b, "mad.lo.s64 {a0}, {x}, 8, {a0}");
        ins!(b, "mad.lo.s64 {a0}, {a0}, 2, {src}");
        let d0 = b.reg(RegKind::B32);
        let row_bytes = if t.swizzled {
            ins!(b, "shl.b32 {d0}, {ch}, 4");
            swizzle(b, d0, row0, t.rows);
            ins!(b, "add.u32 {d0}, {d0}, {}", self.base);
            128
        } else {
            ins!(b, "mad.lo.u32 {d0}, {row0}, {}, {}", t.row_bytes, self.base);
            ins!(b, "mad.lo.u32 {d0}, {ch}, 16, {d0}");
            t.row_bytes
        };
        for n in 0..t.rows.div_ceil(step) {
            let r = n * step;
            let (g, ok) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
            ins!(b, "add.u32 {g}, {g0}, {r}");
            ins!(b, "setp.lt.u32 {ok}, {g}, {}", t.from.1);
            if let Some(c) = col_ok {
                ins!(b, "and.pred {ok}, {ok}, {c}");
            }
            let (addr, size) = (b.reg(RegKind::B64), b.reg(RegKind::B32));
            ins!(b, "add.s64 {addr}, {a0}, {}", i64::from(n) * stride);
            ins!(b, "selp.b64 {addr}, {addr}, {src}, {ok}");
            ins!(b, "selp.u32 {size}, 16, 0, {ok}");
            // Only rows of the tile and chunks of a row are written.
            let last = r + step > t.rows;
            let guard = match (last, has_chunk) {
                (false, None) => String::new(),
                (false, Some(h)) => format!("@{h} "),
                (true, _) => {
                    let inside = b.reg(RegKind::Pred);
                    ins!(b, "setp.lt.u32 {inside}, {row0}, {}", t.rows - r);
                    if let Some(h) = has_chunk {
                        ins!(b, "and.pred {inside}, {inside}, {h}");
                    }
                    format!("@{inside} ")
                }
            };
            ins!(
                b,
                "{guard}cp.async.cg.shared.global.L2::128B [{d0}+{}], [{addr}], 16, {size}",
                t.dst + r * row_bytes
            );
        }
    }
}
