//! The CPU backend: interprets a [`Kernel`] over byte buffers.
//!
//! Work is vectorised by tiles: a tile is a block of rows, and for the
//! reduced variables a chunk of each row, so every instruction runs as a
//! tight loop over a slice instead of once per element. Values are held in
//! typed [`Col`]umns (floats as `f64`, integers as `i64`) and rounded or
//! wrapped to each instruction's dtype, so the results match a backend
//! computing in that dtype.
//!
//! Scans ([`Inst::Scan`]) run left to right along each row, chunk after
//! chunk, carrying their state between chunks. Float scans keep that state
//! in `f64` and round each result once to its dtype (the GPU combines in
//! the operand's dtype in another order, so the two agree within
//! rounding); integer sums and products wrap in their dtype, so every
//! backend gives the same bits.
//!
//! Sorts ([`Inst::Sort`]) take a whole row as one chunk, order it stably by
//! [`crate::sort::sort_order`] and store its first [`Kernel::stored_len`]
//! positions.
//!
//! Adds at data-dependent positions ([`StoreKind::AddAt`]) read, add and
//! write one point after the other in domain order, so a scatter's repeated
//! positions accumulate in the same order on every run.

use crate::column::Col;
use crate::ir::{Gather, Inst, Kernel, Store, StoreKind, Val};
use crate::outs::{one_writer, Outs};
use crate::philox::Draw;
use crate::sort::{sort_order, SortPart};
use crate::{DType, KernelKind, ScanOp, SortOp};
use rayon::prelude::*;

/// Points per tile: enough to amortise the per-instruction dispatch.
const TILE: usize = 4096;

/// A kernel failed on the CPU: an index outside a buffer (a scheduler bug)
/// or buffers that do not match the kernel's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterpError(pub String);

impl std::fmt::Display for InterpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a kernel reads besides its loop variables: its input buffers and
/// the values of its scalar parameters.
#[derive(Clone, Copy)]
struct Args<'a> {
    inputs: &'a [&'a [u8]],
    scalars: &'a [f64],
}

/// Runs `kernel` reading `inputs` and writing `outputs` (byte buffers in the
/// dtypes and lengths of the kernel's parameters), with `scalars` the values
/// of its scalar parameters by slot (each rounded to its dtype here, as the
/// PTX backend's `ptx::scalar_param` does). Generic: [`crate::cpu::run`]
/// dispatches matmuls to their fast path first, and attention kernels
/// (which only their own path runs) to theirs.
pub fn run(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Result<(), InterpError> {
    run_with(kernel, inputs, scalars, outputs, false)
}

/// [`run`], with blocks of rows spread over all cores when rows are
/// independent (scans and sorts along the last axis, kernels whose stores
/// write each element once): each row is computed exactly as [`run`]
/// computes it, so results do not depend on the thread count. The CPU
/// backend runs the kernels the executor declines this way.
pub fn run_parallel(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Result<(), InterpError> {
    run_with(kernel, inputs, scalars, outputs, true)
}

fn run_with(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
    parallel: bool,
) -> Result<(), InterpError> {
    check_args(kernel, inputs, scalars, outputs)?;
    if kernel.kind == KernelKind::Attention {
        return Err(InterpError(format!(
            "kernel {}: attention kernels run through cpu::run",
            kernel.name
        )));
    }
    let args = Args { inputs, scalars };
    let rows = kernel.rows();
    let row_len = kernel.row_len();
    let (tile_rows, chunk) = if row_len == 0 {
        (TILE, 0)
    } else if row_len <= TILE || kernel.kind == KernelKind::Sort {
        // A sort needs its whole row at once.
        ((TILE / row_len).max(1), row_len)
    } else {
        (1, TILE)
    };
    let level = kernel.element_level();
    let plan = Plan::new(kernel, &level);
    let outs = Outs::new(outputs);
    let tiles = Tiles {
        rows,
        tile_rows,
        row_len,
        chunk,
    };
    // One rayon thread: the calling thread does the work (no hand-off).
    let threads = rayon::current_num_threads();
    let blocks = if parallel && threads > 1 && rows_independent(kernel, &plan) {
        // Whole tiles per block, so each row is computed as alone.
        let work = rows.saturating_mul(row_len.max(1));
        (work / PARALLEL_MIN).min(rows.div_ceil(tile_rows)).max(1)
    } else {
        1
    };
    if blocks == 1 {
        return tiles.run(kernel, &plan, args, &outs, 0, rows);
    }
    let per = rows.div_ceil(tile_rows).div_ceil(blocks) * tile_rows;
    (0..rows.div_ceil(per))
        .into_par_iter()
        .try_for_each(|b| tiles.run(kernel, &plan, args, &outs, b * per, rows.min((b + 1) * per)))
}

/// Points below which [`run_parallel`] stays on the calling thread.
const PARALLEL_MIN: usize = 1 << 15;

/// How a kernel's rows are cut: `tile_rows` rows of `row_len` points at a
/// time, each row in chunks of `chunk`.
struct Tiles {
    rows: usize,
    tile_rows: usize,
    row_len: usize,
    chunk: usize,
}

impl Tiles {
    /// Runs rows `r0..r1` (a whole number of tiles but at the end) on this
    /// thread.
    fn run(
        &self,
        k: &Kernel,
        plan: &Plan,
        args: Args,
        outs: &Outs,
        mut r0: usize,
        r1: usize,
    ) -> Result<(), InterpError> {
        let mut st = State::new(k.insts.len());
        while r0 < r1.min(self.rows) {
            let nr = self.tile_rows.min(r1 - r0);
            st.run_rows(k, plan, args, outs, r0, nr, self.row_len, self.chunk)?;
            r0 += nr;
        }
        Ok(())
    }
}

/// Whether rows of `k` may run on different threads: no adds at
/// data-dependent positions (a scatter's order is the domain order), and
/// every output element has one writer. Each row's scan state, sort and
/// reductions are its own.
fn rows_independent(k: &Kernel, plan: &Plan) -> bool {
    one_writer(k, |s| {
        if plan.element_stores.contains(&s) {
            &k.ranges[..]
        } else {
            &k.ranges[..k.n_kept]
        }
    })
}

/// Checks that the buffers and scalars match the kernel's parameters.
pub fn check_args(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &[&mut [u8]],
) -> Result<(), InterpError> {
    let ok_in = inputs.len() == kernel.inputs.len()
        && inputs
            .iter()
            .zip(&kernel.inputs)
            .all(|(b, a)| b.len() >= a.len * a.dtype.size());
    let ok_out = outputs.len() == kernel.outputs.len()
        && outputs
            .iter()
            .zip(&kernel.outputs)
            .all(|(b, a)| b.len() >= a.len * a.dtype.size());
    if ok_in && ok_out && scalars.len() == kernel.scalars.len() {
        Ok(())
    } else {
        Err(InterpError(format!(
            "kernel {}: buffers or scalars do not match its parameters",
            kernel.name
        )))
    }
}

/// Which element-level instructions each pass needs, in SSA order.
struct Plan {
    level: Vec<bool>,
    /// For each `Reduce` instruction, the element-level instructions its
    /// operand needs.
    reduce_needs: Vec<Vec<Val>>,
    /// Element-level instructions the element-level stores need.
    store_needs: Vec<Val>,
    element_stores: Vec<usize>,
    row_stores: Vec<usize>,
}

impl Plan {
    fn new(k: &Kernel, level: &[bool]) -> Plan {
        let needs = |roots: &[Val]| -> Vec<Val> {
            let mut want = vec![false; k.insts.len()];
            let mut stack: Vec<Val> = roots.iter().copied().filter(|r| level[*r]).collect();
            while let Some(v) = stack.pop() {
                if want[v] {
                    continue;
                }
                want[v] = true;
                for o in k.insts[v].inst.operands() {
                    if level[o] {
                        stack.push(o);
                    }
                }
            }
            (0..k.insts.len()).filter(|v| want[*v]).collect()
        };
        let reduce_needs = k
            .insts
            .iter()
            .map(|n| match n.inst {
                Inst::Reduce(_, a) => needs(&[a]),
                _ => Vec::new(),
            })
            .collect();
        let (element_stores, row_stores): (Vec<usize>, Vec<usize>) =
            (0..k.stores.len()).partition(|s| k.store_is_element_level(&k.stores[*s], level));
        let roots: Vec<Val> = element_stores
            .iter()
            .flat_map(|s| k.stores[*s].operands())
            .collect();
        Plan {
            level: level.to_vec(),
            reduce_needs,
            store_needs: needs(&roots),
            element_stores,
            row_stores,
        }
    }
}

/// Reused scratch: per instruction a row-level and an element-level vector.
struct State {
    row: Vec<Col>,
    elem: Vec<Col>,
    /// Loop-variable values at the current points, one vector per variable.
    row_vars: Vec<Vec<i64>>,
    elem_vars: Vec<Vec<i64>>,
    idx: Vec<i64>,
    tmp: Vec<i64>,
    /// First row of the current tile.
    tile: usize,
    /// Per instruction, the (tile, chunk start, chunk length) its element
    /// values were computed for: a later pass over the same chunk (every
    /// pass, when a row fits one chunk) reuses them instead of recomputing.
    elem_at: Vec<Option<(usize, usize, usize)>>,
    /// Per scan instruction, each row's running value and position after
    /// the chunks evaluated so far.
    scan: Vec<ScanState>,
}

impl State {
    fn new(n: usize) -> State {
        State {
            row: vec![Col::default(); n],
            elem: vec![Col::default(); n],
            row_vars: Vec::new(),
            elem_vars: Vec::new(),
            idx: Vec::new(),
            tmp: Vec::new(),
            tile: 0,
            elem_at: vec![None; n],
            scan: vec![ScanState::default(); n],
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_rows(
        &mut self,
        k: &Kernel,
        plan: &Plan,
        args: Args,
        outs: &Outs,
        r0: usize,
        nr: usize,
        row_len: usize,
        chunk: usize,
    ) -> Result<(), InterpError> {
        self.tile = r0;
        // Kept variables for the rows of this tile; reduced ones are 0 here.
        unravel(&k.ranges[..k.n_kept], r0, nr, &mut self.row_vars);
        self.row_vars.resize(k.ranges.len(), Vec::new());
        for v in &mut self.row_vars[k.n_kept..] {
            v.clear();
            v.resize(nr, 0);
        }
        for (i, n) in k.insts.iter().enumerate() {
            if plan.level[i] {
                continue;
            }
            if let Inst::Reduce(op, a) = n.inst {
                let mut acc = Col::identity(op, n.dtype, nr);
                let mut c0 = 0;
                while c0 < row_len {
                    let nc = chunk.min(row_len - c0);
                    self.eval_elements(k, plan, &plan.reduce_needs[i], args, nr, c0, nc)?;
                    let src = if plan.level[a] {
                        &self.elem[a]
                    } else {
                        // A row-level operand counts once per element.
                        self.tmp_expand(a, nr, nc);
                        &self.elem[a]
                    };
                    let src = src.to(k.insts[a].dtype, n.dtype);
                    Col::fold_rows(&mut acc, op, n.dtype, &src, nc);
                    c0 += nc;
                }
                self.row[i] = acc;
            } else {
                let vars: Vec<&[i64]> = self.row_vars.iter().map(|v| v.as_slice()).collect();
                let out = compute(
                    k,
                    i,
                    &self.row,
                    &vars,
                    args,
                    nr,
                    &mut self.idx,
                    &mut self.tmp,
                )?;
                self.row[i] = out;
            }
        }
        for &s in &plan.row_stores {
            let st = &k.stores[s];
            let vars: Vec<&[i64]> = self.row_vars.iter().map(|v| v.as_slice()).collect();
            write_out(k, st, &self.row, &vars, outs, &mut self.idx, |_| true)?;
        }
        if !plan.element_stores.is_empty() {
            let stored = k.stored_len();
            let mut c0 = 0;
            while c0 < row_len {
                let nc = chunk.min(row_len - c0);
                // Points past a row's stored prefix (a sort's `k`) are not
                // written.
                let keep = |p: usize| c0 + p % nc < stored;
                self.eval_elements(k, plan, &plan.store_needs, args, nr, c0, nc)?;
                for &s in &plan.element_stores {
                    let st = &k.stores[s];
                    for o in st.operands() {
                        if !plan.level[o] {
                            self.tmp_expand(o, nr, nc);
                        }
                    }
                    let vars: Vec<&[i64]> = self.elem_vars.iter().map(|v| v.as_slice()).collect();
                    write_out(k, st, &self.elem, &vars, outs, &mut self.idx, keep)?;
                }
                c0 += nc;
            }
        }
        Ok(())
    }

    /// Copies row-level value `a` into its element-level slot, repeated over
    /// the chunk.
    fn tmp_expand(&mut self, a: Val, nr: usize, nc: usize) {
        self.elem[a] = self.row[a].repeat_each(nr, nc);
    }

    /// Evaluates element-level instructions `needs` at the points of rows
    /// `0..nr` (of the tile) times reduced positions `c0..c0 + nc`.
    #[allow(clippy::too_many_arguments)]
    fn eval_elements(
        &mut self,
        k: &Kernel,
        plan: &Plan,
        needs: &[Val],
        args: Args,
        nr: usize,
        c0: usize,
        nc: usize,
    ) -> Result<(), InterpError> {
        let n = nr * nc;
        // Variables at element points: kept ones repeat per row, reduced
        // ones cycle over the chunk.
        let nk = k.n_kept;
        let mut red = Vec::new();
        unravel(&k.ranges[nk..], c0, nc, &mut red);
        self.elem_vars.resize(k.ranges.len(), Vec::new());
        for v in 0..k.ranges.len() {
            let ev = &mut self.elem_vars[v];
            ev.clear();
            ev.reserve(n);
            for r in 0..nr {
                if v < nk {
                    ev.extend(std::iter::repeat_n(self.row_vars[v][r], nc));
                } else {
                    ev.extend_from_slice(&red[v - nk]);
                }
            }
        }
        // Row-level operands of needed instructions, expanded once.
        let mut expanded = vec![false; k.insts.len()];
        for &i in needs {
            for o in k.insts[i].inst.operands() {
                if !plan.level[o] && !expanded[o] {
                    self.tmp_expand(o, nr, nc);
                    expanded[o] = true;
                }
            }
        }
        let vars: Vec<&[i64]> = self.elem_vars.iter().map(|v| v.as_slice()).collect();
        let at = Some((self.tile, c0, nc));
        for &i in needs {
            if self.elem_at[i] == at {
                continue;
            }
            self.elem_at[i] = at;
            let out = if let Inst::Scan(op, a) = k.insts[i].inst {
                let (src_dt, out_dt) = (k.insts[a].dtype, k.insts[i].dtype);
                if c0 == 0 {
                    self.scan[i] = ScanState::new(op, src_dt, nr);
                }
                scan_chunk(op, src_dt, out_dt, &self.elem[a], &mut self.scan[i], c0)
            } else if let Inst::Sort(op, a) = k.insts[i].inst {
                sort_rows(op, &self.elem[a], nc)
            } else {
                compute(
                    k,
                    i,
                    &self.elem,
                    &vars,
                    args,
                    n,
                    &mut self.idx,
                    &mut self.tmp,
                )?
            };
            self.elem[i] = out;
        }
        Ok(())
    }
}

/// One scan instruction's state for each row of a tile: the running value
/// and, for index ops, the position where it was reached.
#[derive(Clone, Default)]
struct ScanState {
    acc: Col,
    pos: Vec<i64>,
}

impl ScanState {
    /// `rows` fresh states of `op` over an `src_dt` operand.
    fn new(op: ScanOp, src_dt: DType, rows: usize) -> ScanState {
        let acc = if src_dt.is_float() {
            Col::F(vec![op.identity(); rows])
        } else {
            Col::I(vec![op.identity_int(src_dt); rows])
        };
        ScanState {
            acc,
            pos: vec![0; rows],
        }
    }
}

/// Scan `op` of an `src_dt` operand at positions `c0..c0 + nc` of each
/// row, whose values are `src` (`st`'s rows of `nc`), continuing each
/// row's state from the previous chunk (which precedes it: the store pass
/// visits chunks in order). Results are converted to `out_dt`; index ops
/// give positions.
fn scan_chunk(
    op: ScanOp,
    src_dt: DType,
    out_dt: DType,
    src: &Col,
    st: &mut ScanState,
    c0: usize,
) -> Col {
    let rows = st.pos.len();
    let nc = (src.len() / rows.max(1)).max(1);
    let mut pos_out = Vec::with_capacity(src.len());
    let pos = &mut st.pos;
    let vals = match (src, &mut st.acc) {
        (Col::F(src), Col::F(accs)) => Col::F(scan_rows(
            op,
            src,
            accs,
            pos,
            nc,
            c0,
            &mut pos_out,
            |a, x| op.combine(a, x),
        )),
        (Col::I(src), Col::I(accs)) => Col::I(scan_rows(
            op,
            src,
            accs,
            pos,
            nc,
            c0,
            &mut pos_out,
            |a, x| op.combine_int(src_dt, a, x),
        )),
        _ => unreachable!("a scan's state has its operand's kind"),
    };
    if op.is_index() {
        Col::I(pos_out).to(DType::I64, out_dt).into_owned()
    } else if src_dt.is_float() {
        // The running values are exact `f64`s, rounded here once to the
        // scan's dtype (also an `F32` scan's: a cast after it rounds
        // again, as on the GPU).
        vals.to(DType::F64, out_dt).into_owned()
    } else {
        vals.to(src_dt, out_dt).into_owned()
    }
}

/// The rows (each `nc` long) of one chunk of `src`, continuing each row's
/// running value in `accs` and position in `pos`: the running values, or
/// for index ops the positions, pushed to `pos_out`.
#[allow(clippy::too_many_arguments)]
fn scan_rows<T: Copy + PartialOrd>(
    op: ScanOp,
    src: &[T],
    accs: &mut [T],
    pos: &mut [i64],
    nc: usize,
    c0: usize,
    pos_out: &mut Vec<i64>,
    combine: impl Fn(T, T) -> T,
) -> Vec<T> {
    let mut out = Vec::with_capacity(src.len());
    for ((row, acc), p) in src.chunks(nc).zip(accs.iter_mut()).zip(pos.iter_mut()) {
        for (j, x) in row.iter().enumerate() {
            if op.is_index() {
                if op.later_wins(*acc, *x) {
                    (*acc, *p) = (*x, (c0 + j) as i64);
                }
                pos_out.push(*p);
            } else {
                *acc = combine(*acc, *x);
                out.push(*acc);
            }
        }
    }
    out
}

/// Sort `op` of the rows of `src` (each `nc` long, the whole row; values
/// of `op`'s operand: `F32`, `I32`, `F64` or `I64`): the sorted values (of
/// `src`'s kind) or their positions.
fn sort_rows(op: SortOp, src: &Col, nc: usize) -> Col {
    let nc = nc.max(1);
    let mut pos = Vec::with_capacity(src.len());
    let mut push = |order: Vec<u32>| pos.extend(order.iter().map(|j| *j as usize));
    match src {
        Col::F(v) => v.chunks(nc).for_each(|row| push(sort_order(op, row))),
        Col::I(v) => v.chunks(nc).for_each(|row| push(sort_order(op, row))),
    }
    let at = |p: usize| (p / nc) * nc + pos[p];
    match (op.part, src) {
        (SortPart::Indices, _) => Col::I(pos.iter().map(|j| *j as i64).collect()),
        (SortPart::Values, Col::F(v)) => Col::F((0..pos.len()).map(|p| v[at(p)]).collect()),
        (SortPart::Values, Col::I(v)) => Col::I((0..pos.len()).map(|p| v[at(p)]).collect()),
    }
}

/// Values of loop variables with sizes `ranges` at linear positions
/// `start..start + n`.
fn unravel(ranges: &[i64], start: usize, n: usize, out: &mut Vec<Vec<i64>>) {
    out.resize(ranges.len(), Vec::new());
    let mut stride = 1i64;
    for d in (0..ranges.len()).rev() {
        let v = &mut out[d];
        v.clear();
        for p in start..start + n {
            v.push((p as i64 / stride) % ranges[d].max(1));
        }
        stride *= ranges[d].max(1);
    }
}

/// Computes instruction `i` at `n` points whose operand values are in
/// `vals` (all at the same level as `i`).
#[allow(clippy::too_many_arguments)]
fn compute(
    k: &Kernel,
    i: Val,
    vals: &[Col],
    vars: &[&[i64]],
    args: Args,
    n: usize,
    idx: &mut Vec<i64>,
    tmp: &mut Vec<i64>,
) -> Result<Col, InterpError> {
    let node = &k.insts[i];
    let dt = node.dtype;
    let dtype = |v: Val| k.insts[v].dtype;
    let out = match &node.inst {
        Inst::Load {
            input,
            index,
            valid,
        } => {
            let arg = k.inputs[*input];
            idx.resize(n, 0);
            index.eval_many(vars, idx);
            let mask = eval_cond(valid, vars, n, tmp);
            let buf = args.inputs[*input];
            for p in 0..n {
                let j = idx[p];
                let masked = mask.as_ref().is_some_and(|m| !m[p]);
                if !masked && (j < 0 || j as usize >= arg.len) {
                    return Err(oob(k, *input, j, arg.len));
                }
            }
            // Masked points read 0 and touch no memory.
            let js = (0..n).map(|p| match &mask {
                Some(m) if !m[p] => None,
                _ => Some(idx[p] as usize),
            });
            read(arg.dtype, buf, js).to(arg.dtype, dt).into_owned()
        }
        Inst::Gather(Gather {
            input,
            index,
            valid,
            at,
            stride,
            len,
        }) => {
            let arg = k.inputs[*input];
            idx.resize(n, 0);
            index.eval_many(vars, idx);
            let mask = eval_cond(valid, vars, n, tmp);
            let buf = args.inputs[*input];
            let Col::I(ats) = &vals[*at] else {
                unreachable!("gather positions are integers")
            };
            // Masked points read 0 and touch no memory.
            let mut js = Vec::with_capacity(n);
            for (p, a) in ats.iter().enumerate() {
                if mask.as_ref().is_some_and(|m| !m[p]) {
                    js.push(None);
                    continue;
                }
                if *a < 0 || *a >= *len {
                    return Err(InterpError(format!(
                        "kernel {}: index {a} is out of range for an axis of size {len}",
                        k.name
                    )));
                }
                let j = idx[p] + a * stride;
                if j < 0 || j as usize >= arg.len {
                    return Err(oob(k, *input, j, arg.len));
                }
                js.push(Some(j as usize));
            }
            read(arg.dtype, buf, js).to(arg.dtype, dt).into_owned()
        }
        Inst::Const(c) => Col::splat(dt, *c, n),
        Inst::Scalar(slot) => Col::splat(dt, args.scalars[*slot], n),
        Inst::Valid(c) => {
            let b = match eval_cond(c, vars, n, tmp) {
                None => Col::I(vec![1; n]),
                Some(m) => Col::I(m.iter().map(|b| *b as i64).collect()),
            };
            b.to(DType::Bool, dt).into_owned()
        }
        Inst::Cast(a) => vals[*a].to(dtype(*a), dt).into_owned(),
        Inst::Unary(op, a) => vals[*a].unary(*op, dtype(*a), dt),
        Inst::Binary(op, a, b) => Col::binary(*op, &vals[*a], dtype(*a), &vals[*b], dtype(*b), dt),
        Inst::Where(c, a, b) => {
            Col::select(&vals[*c], &vals[*a], dtype(*a), &vals[*b], dtype(*b), dt)
        }
        Inst::Index(e) => {
            idx.resize(n, 0);
            e.eval_many(vars, idx);
            // Wrapped to the instruction's dtype, as a PTX `cvt` keeps the
            // low bits.
            Col::I(idx.clone()).to(DType::I64, dt).into_owned()
        }
        Inst::Random(draw, ops) => {
            // Operands are integers; the generator reads their bits.
            let col = |o: Val| match &vals[o] {
                Col::I(v) => v,
                Col::F(_) => unreachable!("random operands are integers"),
            };
            let bits = |o: Val, p: usize| col(o)[p] as u32;
            let key = |p: usize| [bits(ops[0], p), bits(ops[1], p)];
            let counter = |p: usize| bits(ops[2], p);
            match draw {
                Draw::Below(_) => {
                    let bound = col(ops[3]);
                    let v = (0..n)
                        .map(|p| draw.eval_int(key(p), counter(p), bound[p] as u64))
                        .collect();
                    Col::I(v).to(DType::I64, dt).into_owned()
                }
                _ => {
                    let v = (0..n)
                        .map(|p| draw.eval_float(key(p), counter(p)))
                        .collect();
                    Col::F(v).to(DType::F64, dt).into_owned()
                }
            }
        }
        Inst::Reduce(..) => unreachable!("reductions are evaluated by run_rows"),
        Inst::Scan(..) => unreachable!("scans are evaluated by eval_elements"),
        Inst::Sort(..) => unreachable!("sorts are evaluated by eval_elements"),
        Inst::Dot(..) | Inst::Attend(..) => unreachable!("attention kernels are refused by run"),
    };
    Ok(out)
}

fn eval_cond(
    c: &crate::expr::Cond,
    vars: &[&[i64]],
    n: usize,
    tmp: &mut Vec<i64>,
) -> Option<Vec<bool>> {
    if c.is_always() {
        return None;
    }
    if c.is_never() {
        return Some(vec![false; n]);
    }
    let mut m = vec![true; n];
    for (e, lo, hi) in c.checks() {
        tmp.resize(n, 0);
        e.eval_many(vars, tmp);
        for (m, v) in m.iter_mut().zip(tmp.iter()) {
            *m &= *lo <= *v && *v < *hi;
        }
    }
    Some(m)
}

/// Runs store `st` at the points whose variables are `vars`, with the
/// instructions' values there in `vals`. An add at a data-dependent
/// position ([`StoreKind::AddAt`]) reads, adds and rounds (or wraps) one
/// point after the other in domain order, so repeated positions accumulate
/// in the same order on every run. Points where `keep` (of the point's
/// position in `vals`) fails are not written.
fn write_out(
    k: &Kernel,
    st: &Store,
    vals: &[Col],
    vars: &[&[i64]],
    outs: &Outs,
    idx: &mut Vec<i64>,
    keep: impl Fn(usize) -> bool,
) -> Result<(), InterpError> {
    let output = st.output;
    let arg = k.outputs[output];
    let from = k.insts[st.value].dtype;
    let values = vals[st.value].to(from, arg.dtype);
    idx.resize(values.len(), 0);
    st.index.eval_many(vars, idx);
    let add = st.is_add();
    for p in 0..values.len() {
        if !keep(p) {
            continue;
        }
        let mut j = idx[p];
        if let StoreKind::AddAt { at, stride, len } = st.kind {
            let Col::I(ats) = &vals[at] else {
                unreachable!("scatter positions are integers")
            };
            let a = ats[p];
            if a < 0 || a >= len {
                return Err(position_error(k, a, len));
            }
            j += a * stride;
        }
        if j < 0 || j as usize >= arg.len {
            return Err(store_outside(k, output, j));
        }
        let dt = arg.dtype;
        // SAFETY: `j` is in bounds (above). One slice lives at a time on
        // this thread, and a parallel run only takes kernels whose every
        // element has one writer (`rows_independent`), its threads
        // disjoint rows.
        let buf = unsafe { outs.elems(output, j as usize, 1, dt.size()) };
        let j = 0;
        match &*values {
            Col::F(v) if add => add_float(dt, buf, v[p]),
            Col::F(v) => dt.write(buf, j, v[p]),
            Col::I(v) if add => add_int(dt, buf, v[p]),
            Col::I(v) => dt.write_int(buf, j, v[p]),
        }
    }
    Ok(())
}

/// A store at element `j` outside output `o` (a scheduler bug, reported
/// the same way on every CPU path).
pub(crate) fn store_outside(k: &Kernel, o: usize, j: i64) -> InterpError {
    InterpError(format!(
        "kernel {}: store index {j} outside out{o} of {} elements",
        k.name, k.outputs[o].len
    ))
}

/// A scatter's position `a` outside its axis of `len` (a run-time error
/// on every CPU path).
pub(crate) fn position_error(k: &Kernel, a: i64, len: i64) -> InterpError {
    InterpError(format!(
        "kernel {}: index {a} is out of range for an axis of size {len}",
        k.name
    ))
}

/// Adds `v` to the float element of dtype `dt` in `buf`, rounded to `dt`
/// (a scatter's add: the exact sum of two values of `dt`, rounded once).
pub(crate) fn add_float(dt: DType, buf: &mut [u8], v: f64) {
    dt.write(buf, 0, dt.round(dt.read(buf, 0) + v));
}

/// Adds `v` to the integer element of dtype `dt` in `buf`, wrapped to `dt`.
pub(crate) fn add_int(dt: DType, buf: &mut [u8], v: i64) {
    dt.write_int(buf, 0, dt.wrap(dt.read_int(buf, 0).wrapping_add(v)));
}

/// Elements `js` of a `dt` buffer as a column (0 where a position is
/// `None`: a masked point, which touches no memory).
fn read(dt: DType, buf: &[u8], js: impl IntoIterator<Item = Option<usize>>) -> Col {
    let js = js.into_iter();
    if dt.is_float() {
        Col::F(js.map(|j| j.map_or(0.0, |j| dt.read(buf, j))).collect())
    } else {
        Col::I(js.map(|j| j.map_or(0, |j| dt.read_int(buf, j))).collect())
    }
}

fn oob(k: &Kernel, input: usize, j: i64, len: usize) -> InterpError {
    InterpError(format!(
        "kernel {}: load index {j} outside in{input} of {len} elements",
        k.name
    ))
}
