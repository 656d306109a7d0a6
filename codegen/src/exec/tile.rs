//! Evaluating instructions over a tile: rows `r0..r0 + nr` times reduced
//! positions `c0..c0 + nc` of each (the whole row, or one row's chunk), a
//! contiguous range of the domain's points. Row-level values are held per
//! row, element-level ones per point of the tile.

use std::borrow::Cow;

use crate::exec::arith::{self, Shape};
use crate::exec::exp_ops;
use crate::exec::memory::{self, Space};
use crate::exec::plan::{Level, Plan};
use crate::exec::reduce;
use crate::exec::scan::{self, Carry};
use crate::exec::scatter::Pending;
use crate::exec::sort;
use crate::exec::vals::{convert, Sink, Vals};
use crate::interp::InterpError;
use crate::ir::{Inst, Kernel, StoreKind, Val};
use crate::outs::Outs;
use crate::philox::Draw;
use crate::DType;

/// What every tile of a run reads.
pub struct Ctx<'a> {
    /// The kernel.
    pub k: &'a Kernel,
    /// Its plan.
    pub plan: &'a Plan,
    /// Input buffers.
    pub inputs: &'a [&'a [u8]],
    /// Scalar parameters' values.
    pub scalars: &'a [f64],
    /// Output buffers.
    pub outs: &'a Outs<'a>,
    /// The uniform instructions' values (one each; empty for the others).
    pub uni: Vec<Vals<'a>>,
}

impl<'a> Ctx<'a> {
    /// The context of one run, with its uniform values computed.
    ///
    /// # Errors
    /// A uniform instruction that fails (none read memory, so none do
    /// today).
    pub fn new(
        k: &'a Kernel,
        plan: &'a Plan,
        inputs: &'a [&'a [u8]],
        scalars: &'a [f64],
        outs: &'a Outs<'a>,
    ) -> Result<Ctx<'a>, InterpError> {
        let mut ctx = Ctx {
            k,
            plan,
            inputs,
            scalars,
            outs,
            uni: Vec::new(),
        };
        ctx.uni = uniforms(&ctx)?;
        Ok(ctx)
    }
}

/// A tile: rows `r0..r0 + nr`, reduced positions `c0..c0 + nc` of each
/// (`nr == 1` or `nc` the whole row, so its points are consecutive).
#[derive(Clone, Copy, Debug)]
pub struct Tile {
    /// First row.
    pub r0: usize,
    /// Rows.
    pub nr: usize,
    /// First reduced position.
    pub c0: usize,
    /// Reduced positions per row.
    pub nc: usize,
}

impl Tile {
    /// The tile's points of the domain, `(first, count)` (rows of
    /// `row_len` reduced positions).
    pub fn points(&self, row_len: usize) -> (usize, usize) {
        (self.r0 * row_len + self.c0, self.nr * self.nc)
    }

    /// The tile's points in the space of variables with sizes `ranges`:
    /// one segment of `nc` positions a row.
    pub fn space<'r>(&self, ranges: &'r [i64], row_len: usize) -> Space<'r> {
        Space::segments(
            ranges,
            self.r0 * row_len + self.c0,
            self.nr,
            self.nc,
            row_len,
        )
    }
}

/// The values an instruction of some level reads.
struct Frame<'f, 'a> {
    uni: &'f [Vals<'a>],
    row: &'f [Vals<'a>],
    elem: &'f [Vals<'a>],
    plan: &'f Plan,
    /// The level being computed, over `segs` segments of `len` points.
    at: Level,
    segs: usize,
    len: usize,
}

impl<'a> Frame<'_, 'a> {
    /// Operand `v`'s values and how they spread over the points.
    fn operand(&self, v: Val) -> (&Vals<'a>, Shape) {
        match (self.plan.level[v], self.at) {
            (Level::Uniform, _) => (&self.uni[v], Shape::One),
            (Level::Row, Level::Elem) => (&self.row[v], Shape::PerSeg),
            (Level::Row, _) => (&self.row[v], Shape::Full),
            (Level::Elem, _) => (&self.elem[v], Shape::Full),
        }
    }

    /// Operand `v`'s values, held in `f32`, and how they spread.
    fn f32s(&self, v: Val) -> arith::Src<'_, f32> {
        let (vals, shape) = self.operand(v);
        arith::src(vals, shape, arith::f32s)
    }

    /// Operand `v` with a value per point.
    fn full(&self, v: Val) -> Cow<'_, Vals<'a>> {
        let (vals, shape) = self.operand(v);
        let per = match shape {
            Shape::Full => return Cow::Borrowed(vals),
            Shape::PerSeg => self.len,
            Shape::One => self.segs * self.len,
        };
        let mut out = Vals::default();
        vals.repeat_each(per, &mut out);
        Cow::Owned(out)
    }
}

/// Computes instruction `i` (not a `Reduce`) over the frame's points
/// (`sp` for those reading indices) into `out`.
fn compute<'a>(
    ctx: &Ctx<'a>,
    i: Val,
    fr: &Frame<'_, 'a>,
    sp: Space,
    out: &mut Vals<'a>,
) -> Result<(), InterpError> {
    let k = ctx.k;
    let dt = k.insts[i].dtype;
    let dtype = |v: Val| k.insts[v].dtype;
    let n = fr.segs * fr.len;
    match &k.insts[i].inst {
        Inst::Load {
            input,
            index,
            valid,
        } => memory::load(
            k,
            *input,
            index,
            valid,
            &ctx.plan.runs[i],
            ctx.inputs[*input],
            dt,
            sp,
            out,
        )?,
        Inst::Const(c) => Vals::splat(dt, *c, n, out),
        Inst::Scalar(slot) => Vals::splat(dt, ctx.scalars[*slot], n, out),
        Inst::Valid(c) => *out = memory::valid_values(c, &ctx.plan.runs[i], dt, sp),
        Inst::Index(e) => {
            let always = crate::expr::Cond::always();
            let (idx, _) = memory::index_values(e, &always, &ctx.plan.runs[i], sp);
            // Wrapped to the instruction's dtype, as a PTX `cvt` keeps the
            // low bits.
            *out = convert(&Vals::I64(idx), DType::I64, dt).into_owned();
        }
        Inst::Cast(a) => *out = convert(fr.operand(*a).0, dtype(*a), dt).into_owned(),
        Inst::Unary(_, a) if ctx.plan.fused[*a] => exp_of_binary(ctx, *a, fr, out.f32()),
        Inst::Unary(op, a) => {
            let (v, shape) = fr.operand(*a);
            arith::unary(*op, v, shape, dtype(*a), dt, fr.segs, fr.len, out);
        }
        Inst::Binary(op, a, b) => {
            let (av, ash) = fr.operand(*a);
            let (bv, bsh) = fr.operand(*b);
            let a = (av, ash, dtype(*a));
            let b = (bv, bsh, dtype(*b));
            arith::binary(*op, a, b, dt, fr.segs, fr.len, out);
        }
        Inst::Where(c, a, b) => {
            let (cv, av, bv) = (fr.full(*c), fr.full(*a), fr.full(*b));
            *out = arith::select(&cv, (&av, dtype(*a)), (&bv, dtype(*b)), dt);
        }
        Inst::Gather(g) => {
            let ats = fr.full(g.at);
            let buf = ctx.inputs[g.input];
            *out = memory::gather(k, g, &ctx.plan.runs[i], ats.ints(), buf, dt, sp)?;
        }
        Inst::Random(draw, ops) => *out = random(*draw, ops, fr, dt),
        Inst::Reduce(..) => unreachable!("reductions are folded by the passes"),
        Inst::Scan(..) | Inst::Sort(..) => unreachable!("computed by ElemState::eval"),
        Inst::Dot(..) | Inst::Attend(..) => {
            unreachable!("the plan declines these kernels")
        }
    }
    Ok(())
}

/// `Random(draw, ops)` of dtype `dt` at every point.
fn random<'a>(draw: Draw, ops: &[Val], fr: &Frame<'_, 'a>, dt: DType) -> Vals<'a> {
    // Operands are integers; the generator reads their bits.
    let cols: Vec<Cow<Vals>> = ops.iter().map(|o| fr.full(*o)).collect();
    let bits = |o: usize, p: usize| cols[o].ints()[p] as u32;
    let n = fr.segs * fr.len;
    let (vals, from) = match draw {
        Draw::Below(_) => {
            let v = (0..n)
                .map(|p| {
                    draw.eval_int(
                        [bits(0, p), bits(1, p)],
                        bits(2, p),
                        cols[3].ints()[p] as u64,
                    )
                })
                .collect();
            (Vals::I64(v), DType::I64)
        }
        _ => {
            let v = (0..n)
                .map(|p| draw.eval_float([bits(0, p), bits(1, p)], bits(2, p)))
                .collect();
            (Vals::F64(v), DType::F64)
        }
    };
    convert(&vals, from, dt).into_owned()
}

/// The uniform instructions' values, computed once per run.
fn uniforms<'a>(ctx: &Ctx<'a>) -> Result<Vec<Vals<'a>>, InterpError> {
    let mut uni = vec![Vals::default(); ctx.k.insts.len()];
    for i in 0..ctx.k.insts.len() {
        if ctx.plan.level[i] != Level::Uniform {
            continue;
        }
        let mut out = Vals::default();
        let fr = Frame {
            uni: &uni,
            row: &[],
            elem: &[],
            plan: ctx.plan,
            at: Level::Uniform,
            segs: 1,
            len: 1,
        };
        let sp = Space::contiguous(&[], 0, 1);
        compute(ctx, i, &fr, sp, &mut out)?;
        uni[i] = out;
    }
    Ok(uni)
}

/// A row block's row-level values.
pub struct RowState<'a> {
    /// Per instruction, its values at the block's rows (row-level ones).
    pub row: Vec<Vals<'a>>,
    /// A scatter's adds at the block's rows, not yet applied
    /// ([`crate::exec::scatter`]).
    pub adds: Pending,
}

impl<'a> RowState<'a> {
    /// Empty values for `k`.
    pub fn new(k: &Kernel) -> RowState<'a> {
        RowState {
            row: vec![Vals::default(); k.insts.len()],
            adds: Pending::default(),
        }
    }

    /// Computes row-level instruction `i` (not a `Reduce`) at rows
    /// `r0..r0 + nr`.
    pub fn compute(
        &mut self,
        ctx: &Ctx<'a>,
        i: Val,
        r0: usize,
        nr: usize,
    ) -> Result<(), InterpError> {
        let mut out = std::mem::take(&mut self.row[i]);
        let (fr, sp) = rows(ctx, &self.row, r0, nr);
        let res = compute(ctx, i, &fr, sp, &mut out);
        self.row[i] = out;
        res
    }
}

/// Runs the row-level stores at rows `r0..r0 + nr`, reading the rows'
/// values from `rs`; a scatter's adds go to `rs.adds`.
pub fn row_store<'a>(
    ctx: &Ctx<'a>,
    rs: &mut RowState<'a>,
    r0: usize,
    nr: usize,
) -> Result<(), InterpError> {
    let (fr, sp) = rows(ctx, &rs.row, r0, nr);
    run_stores(ctx, &fr, &ctx.plan.row_stores, sp, Some(&mut rs.adds))
}

/// The frame and space of row-level work at rows `r0..r0 + nr`.
fn rows<'f, 'a>(
    ctx: &'f Ctx<'a>,
    row: &'f [Vals<'a>],
    r0: usize,
    nr: usize,
) -> (Frame<'f, 'a>, Space<'f>) {
    let fr = Frame {
        uni: &ctx.uni,
        row,
        elem: &[],
        plan: ctx.plan,
        at: Level::Row,
        segs: 1,
        len: nr,
    };
    let sp = Space::contiguous(&ctx.k.ranges[..ctx.k.n_kept], r0, nr);
    (fr, sp)
}

/// Element-level values of one tile, reused by later passes over the same
/// tile (every pass, when a row fits one tile).
pub struct ElemState<'a> {
    elem: Vec<Vals<'a>>,
    /// Per instruction, the points `(p0, n)` its values were computed at.
    at: Vec<Option<(usize, usize)>>,
    /// Per scan instruction, its rows' running state after the tiles
    /// computed so far.
    carry: Vec<Carry>,
}

impl<'a> ElemState<'a> {
    /// Empty values for `k`.
    pub fn new(k: &Kernel) -> ElemState<'a> {
        ElemState {
            elem: vec![Vals::default(); k.insts.len()],
            at: vec![None; k.insts.len()],
            carry: vec![Carry::default(); k.insts.len()],
        }
    }

    /// Evaluates element-level instructions `needs` over tile `t`.
    fn eval<'c>(
        &mut self,
        ctx: &'c Ctx<'a>,
        row: &[Vals<'a>],
        needs: &[Val],
        t: Tile,
    ) -> Result<Space<'c>, InterpError> {
        let key = t.points(ctx.k.row_len());
        let sp = t.space(&ctx.k.ranges, ctx.k.row_len());
        for &i in needs {
            if self.at[i] == Some(key) {
                continue;
            }
            let mut out = std::mem::take(&mut self.elem[i]);
            let fr = Frame {
                uni: &ctx.uni,
                row,
                elem: &self.elem,
                plan: ctx.plan,
                at: Level::Elem,
                segs: t.nr,
                len: t.nc,
            };
            let res = if let Inst::Scan(op, a) = ctx.k.insts[i].inst {
                let (src_dt, out_dt) = (ctx.k.insts[a].dtype, ctx.k.insts[i].dtype);
                let carry = &mut self.carry[i];
                let src = fr.full(a);
                scan::scan(op, &src, src_dt, out_dt, t.nr, t.nc, t.c0, carry, &mut out);
                Ok(())
            } else if let Inst::Sort(op, a) = ctx.k.insts[i].inst {
                // Tiles of a sort kernel hold whole rows.
                sort::sort(op, &fr.full(a), t.nr, t.nc, &mut out);
                Ok(())
            } else {
                compute(ctx, i, &fr, sp, &mut out)
            };
            self.elem[i] = out;
            res?;
            self.at[i] = Some(key);
        }
        Ok(sp)
    }

    /// Element-level instruction `i`'s values over the points `at` (as
    /// [`Tile::points`] gives them), if this state computed them there
    /// last.
    #[cfg(feature = "llvm-jit")]
    pub fn kept(&self, i: Val, at: (usize, usize)) -> Option<&Vals<'a>> {
        (self.at[i] == Some(at)).then(|| &self.elem[i])
    }

    /// The frame of tile `t`'s element values.
    fn frame<'f>(&'f self, ctx: &'f Ctx<'a>, row: &'f [Vals<'a>], t: Tile) -> Frame<'f, 'a> {
        Frame {
            uni: &ctx.uni,
            row,
            elem: &self.elem,
            plan: ctx.plan,
            at: Level::Elem,
            segs: t.nr,
            len: t.nc,
        }
    }

    /// The fold of `Reduce` instruction `i` over tile `t`: one partial
    /// result per row of the tile.
    pub fn fold(
        &mut self,
        ctx: &Ctx<'a>,
        row: &[Vals<'a>],
        i: Val,
        t: Tile,
    ) -> Result<Vals<'a>, InterpError> {
        let k = ctx.k;
        let Inst::Reduce(op, a) = k.insts[i].inst else {
            unreachable!("folds are of reductions")
        };
        let dt = k.insts[i].dtype;
        self.eval(ctx, row, &ctx.plan.reduce_needs[i], t)?;
        let fr = self.frame(ctx, row, t);
        // A row-level operand counts once per element.
        let vals = fr.full(a);
        let vals = convert(&vals, k.insts[a].dtype, dt);
        let mut part = reduce::identity(op, dt, t.nr);
        reduce::fold_segments(op, dt, &vals, t.nr, t.nc, &mut part);
        Ok(part)
    }

    /// Runs a sort kernel's element-level stores over tile `t` (whole
    /// rows, values computed): the first [`Kernel::stored_len`] values of
    /// each row, at the points of [`Plan::store_ranges`].
    fn store_prefixes(&self, ctx: &Ctx<'a>, row: &[Vals<'a>], t: Tile) -> Result<(), InterpError> {
        let k = ctx.k.stored_len();
        let fr = self.frame(ctx, row, t);
        // The stored points of the tile's rows: `k` per row.
        let sp = Space::contiguous(&ctx.plan.store_ranges, t.r0 * k, t.nr * k);
        for &s in &ctx.plan.elem_stores {
            let st = &ctx.k.stores[s];
            let vals = fr.full(st.value);
            let vals = match k == t.nc {
                true => vals,
                false => Cow::Owned(vals.prefixes(t.nr, t.nc, k)),
            };
            let from = ctx.k.insts[st.value].dtype;
            let runs = &ctx.plan.store_runs[s];
            memory::store(ctx.k, st.output, &st.index, runs, &vals, from, ctx.outs, sp)?;
        }
        Ok(())
    }

    /// Runs the element-level stores over tile `t`. A direct store
    /// ([`Plan::direct`]) whose elements here are one aligned slice gets
    /// its value computed straight into them; elsewhere its value is
    /// computed into its vector and stored as any other.
    pub fn store(&mut self, ctx: &Ctx<'a>, row: &[Vals<'a>], t: Tile) -> Result<(), InterpError> {
        let sp = self.eval(ctx, row, &ctx.plan.store_needs, t)?;
        if ctx.plan.sorts {
            return self.store_prefixes(ctx, row, t);
        }
        for &s in &ctx.plan.elem_stores {
            let st = &ctx.k.stores[s];
            if ctx.plan.direct[s] {
                let runs = &ctx.plan.store_runs[s];
                // SAFETY: the tile's points are this thread's, and so are
                // the elements a store writes there (`one_writer`).
                let dst =
                    unsafe { memory::out_f32(ctx.k, st.output, &st.index, runs, ctx.outs, sp)? };
                if let Some(dst) = dst {
                    compute_f32_into(ctx, st.value, &self.frame(ctx, row, t), dst);
                    continue;
                }
                self.eval(ctx, row, &[st.value], t)?;
            }
            run_stores(ctx, &self.frame(ctx, row, t), &[s], sp, None)?;
        }
        Ok(())
    }
}

/// `exp` of instruction `a` ([`Plan::fused`]: an `F32` binary op that
/// only this `exp` reads) over the frame's points, into `out`: `a`
/// computed a block at a time into a buffer that stays in L1, each block's
/// `exp` written from there. The values are those of `a` computed into a
/// vector and `exp` of that vector; softmax's `exp(x - max)` writes and
/// reads no tile-sized vector for `x - max` (a pass less).
fn exp_of_binary(ctx: &Ctx<'_>, a: Val, fr: &Frame<'_, '_>, out: impl Sink<f32>) {
    /// Points per block: 8 KiB of `f32`.
    const BLOCK: usize = 2048;
    let Inst::Binary(op, x, y) = ctx.k.insts[a].inst else {
        unreachable!("fused instructions are binary ops")
    };
    let (xs, ys) = (fr.f32s(x), fr.f32s(y));
    let len = fr.len;
    let mut buf = Vec::with_capacity(BLOCK.min(fr.segs * len));
    out.fill(fr.segs * len, |d| {
        if len == 0 {
            return;
        }
        // Blocks of whole segments (short rows), or of one segment's part.
        let (most, blocks) = if len <= BLOCK {
            (BLOCK / len, 1)
        } else {
            (1, len.div_ceil(BLOCK))
        };
        let mut s0 = 0;
        while s0 < fr.segs {
            let k = most.min(fr.segs - s0);
            for b in 0..blocks {
                let (lo, n) = (b * BLOCK, BLOCK.min(len - b * BLOCK));
                buf.clear();
                let (xp, yp) = (xs.piece(len, s0, k, lo, n), ys.piece(len, s0, k, lo, n));
                arith::binary_f32(op, xp, yp, k, n, &mut buf);
                let at = s0 * len + lo;
                exp_ops::exp_f32(&buf, &mut d[at..at + buf.len()]);
            }
            s0 += k;
        }
    });
}

/// Computes instruction `v` (one [`Plan::direct`] allows: an `F32` unary
/// or binary op of `F32` operands) over the frame's points into `dst`.
fn compute_f32_into(ctx: &Ctx<'_>, v: Val, fr: &Frame<'_, '_>, dst: &mut [f32]) {
    match ctx.k.insts[v].inst {
        Inst::Unary(_, a) if ctx.plan.fused[a] => exp_of_binary(ctx, a, fr, dst),
        Inst::Unary(op, a) => arith::unary_f32(op, fr.f32s(a), fr.segs, fr.len, dst),
        Inst::Binary(op, a, b) => {
            arith::binary_f32(op, fr.f32s(a), fr.f32s(b), fr.segs, fr.len, dst)
        }
        _ => unreachable!("direct stores are of unary and binary ops"),
    }
}

/// Runs `stores` (indices into the kernel's stores) over the points of
/// `sp`, their values from `fr`, a scatter's adds into `adds` (row-level
/// stores only: a scatter kernel has no reduced variable).
fn run_stores(
    ctx: &Ctx<'_>,
    fr: &Frame<'_, '_>,
    stores: &[usize],
    sp: Space<'_>,
    mut adds: Option<&mut Pending>,
) -> Result<(), InterpError> {
    for &s in stores {
        let st = &ctx.k.stores[s];
        let vals = fr.full(st.value);
        let from = ctx.k.insts[st.value].dtype;
        let runs = &ctx.plan.store_runs[s];
        match st.kind {
            StoreKind::Write => {
                memory::store(ctx.k, st.output, &st.index, runs, &vals, from, ctx.outs, sp)?
            }
            StoreKind::AddAt { at, .. } => {
                let adds = adds.as_deref_mut().expect("a scatter's adds are row-level");
                adds.collect(ctx.k, (s, st), runs, (&vals, from), &fr.full(at), sp)?
            }
        }
    }
    Ok(())
}
