//! The CPU backend: interprets a [`Kernel`] over byte buffers.
//!
//! Work is vectorised by tiles: a tile is a block of rows, and for the
//! reduced variables a chunk of each row, so every instruction runs as a
//! tight loop over a slice instead of once per element. Values are held as
//! `f64` and rounded to each instruction's dtype, so the results match a
//! backend computing in that dtype.
//!
//! Scans ([`Inst::Scan`]) run left to right along each row, chunk after
//! chunk, carrying their state between chunks. Float scans keep that state
//! in `f64` and round each result once to its dtype (the GPU combines in
//! `f32` in another order, so the two agree within rounding); integer sums
//! and products wrap, so every backend gives the same bits.
//!
//! Sorts ([`Inst::Sort`]) take a whole row as one chunk, order it stably by
//! [`crate::sort::sort_order`] and store its first [`Kernel::stored_len`]
//! positions.

use crate::expr::Expr;
use crate::ir::{Inst, Kernel, Val};
use crate::sort::{sort_order, SortPart};
use crate::{DType, KernelKind, ReduceOp, ScanOp, SortOp};

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
/// dispatches matmuls to their fast path first.
pub fn run(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Result<(), InterpError> {
    check_args(kernel, inputs, scalars, outputs)?;
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
    let mut st = State::new(kernel.insts.len());
    let mut r0 = 0;
    while r0 < rows {
        let nr = tile_rows.min(rows - r0);
        st.run_rows(kernel, &plan, args, outputs, r0, nr, row_len, chunk)?;
        r0 += nr;
    }
    Ok(())
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
        let roots: Vec<Val> = element_stores.iter().map(|s| k.stores[*s].value).collect();
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
    row: Vec<Vec<f64>>,
    elem: Vec<Vec<f64>>,
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
    scan: Vec<Vec<(f64, f64)>>,
}

impl State {
    fn new(n: usize) -> State {
        State {
            row: vec![Vec::new(); n],
            elem: vec![Vec::new(); n],
            row_vars: Vec::new(),
            elem_vars: Vec::new(),
            idx: Vec::new(),
            tmp: Vec::new(),
            tile: 0,
            elem_at: vec![None; n],
            scan: vec![Vec::new(); n],
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_rows(
        &mut self,
        k: &Kernel,
        plan: &Plan,
        args: Args,
        outputs: &mut [&mut [u8]],
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
                let mut acc = vec![op.identity(n.dtype); nr];
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
                    for (r, acc) in acc.iter_mut().enumerate() {
                        let part = tree_fold(op, n.dtype, &src[r * nc..(r + 1) * nc]);
                        *acc = op.fold(n.dtype, *acc, part);
                    }
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
            write_out(
                k,
                st.output,
                &st.index,
                &self.row[st.value],
                &vars,
                outputs,
                &mut self.idx,
                |_| true,
            )?;
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
                    if !plan.level[st.value] {
                        self.tmp_expand(st.value, nr, nc);
                    }
                    let vars: Vec<&[i64]> = self.elem_vars.iter().map(|v| v.as_slice()).collect();
                    write_out(
                        k,
                        st.output,
                        &st.index,
                        &self.elem[st.value],
                        &vars,
                        outputs,
                        &mut self.idx,
                        keep,
                    )?;
                }
                c0 += nc;
            }
        }
        Ok(())
    }

    /// Copies row-level value `a` into its element-level slot, repeated over
    /// the chunk.
    fn tmp_expand(&mut self, a: Val, nr: usize, nc: usize) {
        let mut e = std::mem::take(&mut self.elem[a]);
        e.clear();
        for r in 0..nr {
            e.extend(std::iter::repeat_n(self.row[a][r], nc));
        }
        self.elem[a] = e;
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
                    self.scan[i] = vec![(op.identity(src_dt), 0.0); nr];
                }
                scan_chunk(op, src_dt, out_dt, &self.elem[a], &mut self.scan[i], c0)
            } else if let Inst::Sort(op, a) = k.insts[i].inst {
                sort_rows(op, k.insts[a].dtype, &self.elem[a], nc)
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

/// Scan `op` of an `src_dt` operand at positions `c0..c0 + nc` of each
/// row, whose values are `src` (`states.len()` rows of `nc`), continuing
/// each row's `(value, position)` state from the previous chunk (which
/// precedes it: the store pass visits chunks in order). Results are rounded
/// to `out_dt`.
fn scan_chunk(
    op: ScanOp,
    src_dt: DType,
    out_dt: DType,
    src: &[f64],
    states: &mut [(f64, f64)],
    c0: usize,
) -> Vec<f64> {
    let nc = src.len() / states.len().max(1);
    let mut out = Vec::with_capacity(src.len());
    for (row, state) in src.chunks(nc.max(1)).zip(states.iter_mut()) {
        let (mut acc, mut pos) = *state;
        for (j, x) in row.iter().enumerate() {
            if op.is_index() {
                if op.later_wins(acc, *x) {
                    (acc, pos) = (*x, (c0 + j) as f64);
                }
                out.push(pos);
            } else {
                acc = op.combine(src_dt, acc, *x);
                out.push(out_dt.round(acc));
            }
        }
        *state = (acc, pos);
    }
    out
}

/// Sort `op` of the rows of `src` (each `nc` long, the whole row; `dt`
/// is the operand's `F32` or `I32`): the sorted values or their positions.
fn sort_rows(op: SortOp, dt: DType, src: &[f64], nc: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(src.len());
    for row in src.chunks(nc.max(1)) {
        let order = sort_order(op, dt == DType::I32, row);
        out.extend(order.iter().map(|j| match op.part {
            SortPart::Values => row[*j as usize],
            SortPart::Indices => *j as f64,
        }));
    }
    out
}

/// `op` over `vals` in dtype `dt`, pairwise (the halves folded separately,
/// then together): rounding error grows with the log of the length, as on
/// the GPU's tree reductions, instead of linearly as a running sum's does.
fn tree_fold(op: ReduceOp, dt: DType, vals: &[f64]) -> f64 {
    if vals.len() <= 8 {
        return vals.iter().fold(op.identity(dt), |a, v| op.fold(dt, a, *v));
    }
    let (l, r) = vals.split_at(vals.len() / 2);
    op.fold(dt, tree_fold(op, dt, l), tree_fold(op, dt, r))
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
    vals: &[Vec<f64>],
    vars: &[&[i64]],
    args: Args,
    n: usize,
    idx: &mut Vec<i64>,
    tmp: &mut Vec<i64>,
) -> Result<Vec<f64>, InterpError> {
    let node = &k.insts[i];
    let dt = node.dtype;
    let out: Vec<f64> = match &node.inst {
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
            let mut out = Vec::with_capacity(n);
            for p in 0..n {
                if mask.as_ref().is_some_and(|m| !m[p]) {
                    out.push(0.0);
                    continue;
                }
                let j = idx[p];
                if j < 0 || j as usize >= arg.len {
                    return Err(oob(k, *input, j, arg.len));
                }
                out.push(arg.dtype.read(buf, j as usize));
            }
            out
        }
        Inst::Gather {
            input,
            index,
            valid,
            at,
            stride,
            len,
        } => {
            let arg = k.inputs[*input];
            idx.resize(n, 0);
            index.eval_many(vars, idx);
            let mask = eval_cond(valid, vars, n, tmp);
            let buf = args.inputs[*input];
            let mut out = Vec::with_capacity(n);
            for (p, a) in vals[*at].iter().enumerate() {
                if mask.as_ref().is_some_and(|m| !m[p]) {
                    out.push(0.0);
                    continue;
                }
                // Index values are exact integers (i32 now; i64 up to 2^53).
                let a = *a as i64;
                if a < 0 || a >= *len {
                    return Err(InterpError(format!(
                        "kernel {}: index {a} is out of range for an axis of size {len}",
                        k.name
                    )));
                }
                let j = idx[p] + a * stride;
                if j < 0 || j as usize >= arg.len {
                    return Err(oob(k, *input, j, arg.len));
                }
                out.push(arg.dtype.read(buf, j as usize));
            }
            out
        }
        Inst::Const(c) => vec![dt.round(*c); n],
        Inst::Scalar(slot) => vec![dt.round(args.scalars[*slot]); n],
        Inst::Valid(c) => match eval_cond(c, vars, n, tmp) {
            None => vec![1.0; n],
            Some(m) => m.iter().map(|b| *b as u8 as f64).collect(),
        },
        Inst::Cast(a) => vals[*a].iter().map(|v| dt.round(*v)).collect(),
        Inst::Unary(op, a) if dt == DType::I32 && k.insts[*a].dtype == DType::I32 => {
            vals[*a].iter().map(|v| op.eval_i32(*v)).collect()
        }
        Inst::Unary(op, a) => vals[*a].iter().map(|v| dt.round(op.eval(*v))).collect(),
        Inst::Binary(op, a, b) => {
            let (a, b) = (&vals[*a], &vals[*b]);
            if dt == DType::I32 {
                a.iter().zip(b).map(|(x, y)| op.eval_i32(*x, *y)).collect()
            } else {
                a.iter()
                    .zip(b)
                    .map(|(x, y)| dt.round(op.eval(*x, *y)))
                    .collect()
            }
        }
        Inst::Where(c, a, b) => vals[*c]
            .iter()
            .zip(&vals[*a])
            .zip(&vals[*b])
            .map(|((c, a), b)| if *c != 0.0 { *a } else { *b })
            .collect(),
        Inst::Index(e) => {
            idx.resize(n, 0);
            e.eval_many(vars, idx);
            // The `I32` register's value (a PTX `cvt` keeps the low bits).
            idx.iter().map(|v| *v as i32 as f64).collect()
        }
        Inst::Random(draw, ops) => {
            // Operands are `I32` values; the generator reads their bits.
            let bits = |o: Val, p: usize| vals[o][p] as i32 as u32;
            let bound = |p: usize| ops.get(3).map_or(0, |b| bits(*b, p));
            (0..n)
                .map(|p| {
                    draw.eval(
                        [bits(ops[0], p), bits(ops[1], p)],
                        bits(ops[2], p),
                        bound(p),
                    )
                })
                .collect()
        }
        Inst::Reduce(..) => unreachable!("reductions are evaluated by run_rows"),
        Inst::Scan(..) => unreachable!("scans are evaluated by eval_elements"),
        Inst::Sort(..) => unreachable!("sorts are evaluated by eval_elements"),
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

/// Writes `vals` at the points where `keep` (of the point's position in
/// `vals`) holds.
#[allow(clippy::too_many_arguments)]
fn write_out(
    k: &Kernel,
    output: usize,
    index: &Expr,
    vals: &[f64],
    vars: &[&[i64]],
    outputs: &mut [&mut [u8]],
    idx: &mut Vec<i64>,
    keep: impl Fn(usize) -> bool,
) -> Result<(), InterpError> {
    let arg = k.outputs[output];
    idx.resize(vals.len(), 0);
    index.eval_many(vars, idx);
    let buf = &mut *outputs[output];
    for (p, (j, v)) in idx.iter().zip(vals).enumerate() {
        if !keep(p) {
            continue;
        }
        if *j < 0 || *j as usize >= arg.len {
            return Err(InterpError(format!(
                "kernel {}: store index {j} outside out{output} of {} elements",
                k.name, arg.len
            )));
        }
        arg.dtype.write(buf, *j as usize, *v);
    }
    Ok(())
}

fn oob(k: &Kernel, input: usize, j: i64, len: usize) -> InterpError {
    InterpError(format!(
        "kernel {}: load index {j} outside in{input} of {len} elements",
        k.name
    ))
}
