//! Evaluation of kernel instructions at a *point group*: one value of every
//! kept and reduced variable, except that the lane variable (the last one,
//! or another chosen with [`Cx::with_lane_var`]) covers `lanes` consecutive
//! values (the vector width), so that every instruction has either one
//! value per lane or, when it does not depend on the lane variable, one
//! value shared by all lanes.

use super::builder::{f32_imm, ins, Builder, Reg, RegKind};
use super::expr::{self, Width};
use super::gather;
use super::memory::{self, WHOLE_RUN};
use super::ops::{self, Value};
use super::philox;
use super::scatter;
use crate::ir::{Gather, Inst, Kernel, Store, StoreKind, Val};
use crate::DType;

/// An instruction's values: one per lane, or one for every lane.
pub type Lanes = Vec<Value>;

/// Values of the instructions evaluated so far, by [`Val`].
pub type Vals = Vec<Option<Lanes>>;

/// What lowering needs to know about a kernel, computed once.
pub struct Cx<'a> {
    pub k: &'a Kernel,
    /// Element-level instructions (see [`Kernel::element_level`]).
    pub level: Vec<bool>,
    /// The variable that a point group's lanes step along, and the runs of
    /// its values over which each instruction is constant ([`lane_runs`]).
    pub lane_var: usize,
    pub lane_runs: Vec<u64>,
    pub width: Width,
    /// Global addresses of the inputs, then of the outputs.
    pub inputs: Vec<Reg>,
    pub outputs: Vec<Reg>,
    /// Names of the scalar parameters, by slot.
    pub scalars: Vec<String>,
    /// Global address of the error flag (kernels with indirect loads or
    /// stores).
    pub err: Option<Reg>,
    /// The target's SM version (instructions such as `bf16` atomics
    /// depend on it).
    pub sm: u32,
}

/// A point group: registers of the variables with the lane variable at its
/// first lane (a multiple of `lanes`, which vector accesses and
/// [`lane_runs`] rely on), and the predicate under which the point exists.
pub struct Point {
    pub vars: Vec<Option<Reg>>,
    pub lanes: usize,
    pub pred: Option<Reg>,
}

/// The variables `e` reads, plus those of `c`'s checks.
pub fn uses_var(e: Option<&crate::Expr>, c: Option<&crate::Cond>, var: usize) -> bool {
    let mut vs = Vec::new();
    if let Some(e) = e {
        e.vars(&mut vs);
    }
    for (e, _, _) in c.map(|c| c.checks()).unwrap_or(&[]) {
        e.vars(&mut vs);
    }
    vs.contains(&var)
}

/// Whether instruction `i` of `k` is a load that reads the same element in
/// every row (depends on no kept variable: a weight vector).
pub fn row_free_load(k: &Kernel, i: usize) -> bool {
    match &k.insts[i].inst {
        Inst::Load { index, valid, .. } => {
            (0..k.n_kept).all(|v| !uses_var(Some(index), Some(valid), v))
        }
        _ => false,
    }
}

/// For each instruction of `k`, the longest run of consecutive values of
/// variable `var`, from a multiple of the run's length (a power of two),
/// over which its value cannot change: [`WHOLE_RUN`] when it depends
/// neither on `var` nor on the value of instruction `also` (a `Reduce` is
/// otherwise constant along a row), 1 when it may change at every value.
/// A mask (`Inst::Valid`) of aligned ranges has the run of
/// [`memory::mask_run`], and so do the selects it drives between values as
/// uniform: `cat`'s chain of selects then evaluates its masks once per
/// group of lanes instead of once per lane.
pub fn lane_runs(k: &Kernel, var: usize, also: Option<Val>) -> Vec<u64> {
    let mut run = vec![WHOLE_RUN; k.insts.len()];
    for (i, n) in k.insts.iter().enumerate() {
        run[i] = match &n.inst {
            _ if Some(i) == also => 1,
            Inst::Reduce(..) => WHOLE_RUN,
            // A scan differs along its row even where its operand
            // does not.
            Inst::Scan(_, a) | Inst::Sort(_, a) if var >= k.n_kept || run[*a] < WHOLE_RUN => 1,
            Inst::Scan(..) | Inst::Sort(..) => WHOLE_RUN,
            Inst::Valid(c) => memory::mask_run(c, var),
            inst => {
                let (e, c) = inst.exprs();
                let own = if uses_var(e, c, var) { 1 } else { WHOLE_RUN };
                inst.operands().iter().map(|o| run[*o]).fold(own, u64::min)
            }
        };
    }
    run
}

/// The element-level instructions that `roots` need, in SSA order.
pub fn needs(k: &Kernel, level: &[bool], roots: &[Val]) -> Vec<Val> {
    let mut want = vec![false; k.insts.len()];
    let mut stack: Vec<Val> = roots.iter().copied().filter(|r| level[*r]).collect();
    while let Some(v) = stack.pop() {
        if !want[v] {
            want[v] = true;
            stack.extend(k.insts[v].inst.operands().into_iter().filter(|o| level[*o]));
        }
    }
    (0..k.insts.len()).filter(|v| want[*v]).collect()
}

impl Cx<'_> {
    /// The same kernel with lanes along kept variable `var`, where the
    /// value of `reduce` also differs per lane (a matmul epilogue steps
    /// along `n`, and each lane has its own accumulator).
    pub fn with_lanes_along(&self, var: usize, reduce: Val) -> Self {
        self.lanes_on(var, Some(reduce))
    }

    /// The same kernel with lanes along variable `var` (a scan along a
    /// strided axis steps along the contiguous kept one).
    pub fn with_lane_var(&self, var: usize) -> Self {
        self.lanes_on(var, None)
    }

    fn lanes_on(&self, var: usize, also: Option<Val>) -> Self {
        Cx {
            k: self.k,
            level: self.level.clone(),
            lane_var: var,
            lane_runs: lane_runs(self.k, var, also),
            width: self.width,
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            scalars: self.scalars.clone(),
            err: self.err,
            sm: self.sm,
        }
    }

    /// The point's variables with the lane variable at lane `lane`.
    fn lane_vars(&self, b: &mut Builder, p: &Point, lane: usize) -> Vec<Option<Reg>> {
        let mut vars = p.vars.clone();
        if lane > 0 {
            let last = self.lane_var;
            let v = vars[last].expect("last variable computed");
            let r = self.width.reg(b);
            ins!(b, "add.s{} {r}, {v}, {lane}", self.width.bits());
            vars[last] = Some(r);
        }
        vars
    }

    /// Whether instruction `i` has one value per lane at `p` (else one for
    /// all: the group's lanes lie in one of its runs, since a point's lane
    /// variable starts at a multiple of its lanes).
    fn per_lane(&self, p: &Point, i: Val) -> bool {
        p.lanes > 1 && self.lane_runs[i] < p.lanes as u64
    }

    /// Evaluates the loads among `insts` (so that they are all in flight
    /// before the first use).
    pub fn eval_loads(&self, b: &mut Builder, p: &Point, insts: &[Val], vals: &mut Vals) {
        for &i in insts {
            if vals[i].is_none() && matches!(self.k.insts[i].inst, Inst::Load { .. }) {
                vals[i] = Some(self.eval_one(b, p, i, vals));
            }
        }
    }

    /// Evaluates the gathers among `insts` whose positions are known (an
    /// embedding's row reads, once [`Cx::eval_loads`] has loaded the ids
    /// of every group: then they are all in flight together).
    pub fn eval_gathers(&self, b: &mut Builder, p: &Point, insts: &[Val], vals: &mut Vals) {
        for &i in insts {
            if let Inst::Gather(Gather { at, .. }) = self.k.insts[i].inst {
                if vals[i].is_none() && vals[at].is_some() {
                    vals[i] = Some(self.eval_one(b, p, i, vals));
                }
            }
        }
    }

    /// Evaluates `insts` (SSA order) not yet in `vals`.
    pub fn eval(&self, b: &mut Builder, p: &Point, insts: &[Val], vals: &mut Vals) {
        for &i in insts {
            if vals[i].is_none() {
                vals[i] = Some(self.eval_one(b, p, i, vals));
            }
        }
    }

    fn eval_one(&self, b: &mut Builder, p: &Point, i: Val, vals: &Vals) -> Lanes {
        let node = &self.k.insts[i];
        let dt = node.dtype;
        let ranges = &self.k.ranges;
        let w = self.width;
        let lanes = if self.per_lane(p, i) { p.lanes } else { 1 };
        let operand = |o: Val, lane: usize| -> Value {
            let l = vals[o].as_ref().expect("operand evaluated");
            l[lane.min(l.len() - 1)]
        };
        match &node.inst {
            Inst::Load {
                input,
                index,
                valid,
            } => {
                let (base, arg) = (self.inputs[*input], self.k.inputs[*input]);
                if lanes > 1 && memory::vector_ok(index, valid, arg.dtype, lanes, self.lane_var) {
                    let idx = expr::eval(b, index, &p.vars, ranges, w);
                    let c = expr::cond(b, valid, &p.vars, ranges, w);
                    let pred = expr::and(b, p.pred, c);
                    let vs = memory::load_vector(b, base, idx, arg.dtype, lanes, pred, w);
                    return vs.into_iter().map(|v| ops::convert(b, v, dt)).collect();
                }
                (0..lanes)
                    .map(|lane| {
                        let vars = self.lane_vars(b, p, lane);
                        let idx = expr::eval(b, index, &vars, ranges, w);
                        let c = expr::cond(b, valid, &vars, ranges, w);
                        let pred = expr::and(b, p.pred, c);
                        let v = memory::load(b, base, idx, arg.dtype, pred, w);
                        ops::convert(b, v, dt)
                    })
                    .collect()
            }
            Inst::Gather(Gather {
                input,
                index,
                valid,
                at,
                stride,
                len,
            }) => {
                let err = self.err.expect("kernels with gathers get an error flag");
                let dtype = self.k.inputs[*input].dtype;
                // One position for the whole group (an embedding's row id)
                // and lanes that are consecutive, aligned elements of the
                // row (the stride keeps `at * stride` aligned too): one
                // check and one vector load.
                if lanes > 1
                    && !self.per_lane(p, *at)
                    && stride % lanes as i64 == 0
                    && memory::vector_ok(index, valid, dtype, lanes, self.lane_var)
                {
                    let axis = gather::Axis {
                        base: self.inputs[*input],
                        dtype,
                        idx: expr::eval(b, index, &p.vars, ranges, w),
                        stride: *stride,
                        len: *len,
                    };
                    let c = expr::cond(b, valid, &p.vars, ranges, w);
                    let pred = expr::and(b, p.pred, c);
                    let vs = gather::load_vector(b, &axis, operand(*at, 0), pred, err, lanes, w);
                    return vs.into_iter().map(|v| ops::convert(b, v, dt)).collect();
                }
                (0..lanes)
                    .map(|lane| {
                        let vars = self.lane_vars(b, p, lane);
                        let axis = gather::Axis {
                            base: self.inputs[*input],
                            dtype,
                            idx: expr::eval(b, index, &vars, ranges, w),
                            stride: *stride,
                            len: *len,
                        };
                        let c = expr::cond(b, valid, &vars, ranges, w);
                        let pred = expr::and(b, p.pred, c);
                        let v = gather::load(b, &axis, operand(*at, lane), pred, err, w);
                        ops::convert(b, v, dt)
                    })
                    .collect()
            }
            Inst::Const(c) => vec![constant(b, *c, dt)],
            Inst::Scalar(slot) => vec![scalar(b, &self.scalars[*slot], dt)],
            Inst::Valid(c) => (0..lanes)
                .map(|lane| {
                    let vars = self.lane_vars(b, p, lane);
                    let reg = match expr::cond(b, c, &vars, ranges, w) {
                        Some(p) => p,
                        None => {
                            let t = b.reg(RegKind::Pred);
                            ins!(b, "setp.eq.u32 {t}, 0, 0");
                            t
                        }
                    };
                    ops::convert(
                        b,
                        Value {
                            reg,
                            dtype: DType::Bool,
                        },
                        dt,
                    )
                })
                .collect(),
            Inst::Cast(a) => (0..lanes)
                .map(|l| ops::convert(b, operand(*a, l), dt))
                .collect(),
            Inst::Unary(op, a) => (0..lanes)
                .map(|l| ops::unary(b, *op, operand(*a, l), dt))
                .collect(),
            Inst::Binary(op, x, y) => (0..lanes)
                .map(|l| ops::binary(b, *op, operand(*x, l), operand(*y, l), dt))
                .collect(),
            Inst::Where(c, x, y) => (0..lanes)
                .map(|l| ops::select(b, operand(*c, l), operand(*x, l), operand(*y, l), dt))
                .collect(),
            Inst::Index(e) => (0..lanes)
                .map(|lane| {
                    let vars = self.lane_vars(b, p, lane);
                    let v = expr::eval(b, e, &vars, ranges, w);
                    let reg = if w.wide {
                        // The `I32` value keeps the low 32 bits.
                        let r = b.reg(RegKind::B32);
                        ins!(b, "cvt.u32.u64 {r}, {v}");
                        r
                    } else {
                        v
                    };
                    Value {
                        reg,
                        dtype: DType::I32,
                    }
                })
                .collect(),
            Inst::Random(draw, ops) => (0..lanes)
                .map(|l| {
                    let o = |i: usize| operand(ops[i], l).reg;
                    let bound = ops.get(3).map(|_| o(3));
                    let reg = philox::draw(b, *draw, o(0), o(1), o(2), bound);
                    Value { reg, dtype: dt }
                })
                .collect(),
            Inst::Reduce(..) => unreachable!("reductions are lowered by the row kernel"),
            Inst::Scan(..) => unreachable!("scans are lowered by the scan kernel"),
            Inst::Sort(..) => unreachable!("sorts are lowered by the sort kernel"),
            Inst::Dot(..) | Inst::Attend(..) => {
                unreachable!("attention sums are lowered by the attention kernel")
            }
        }
    }

    /// Emits `s` at `p` (all of its operands evaluated).
    pub fn store(&self, b: &mut Builder, p: &Point, s: &Store, vals: &Vals) {
        let (base, arg) = (self.outputs[s.output], self.k.outputs[s.output]);
        let ranges = &self.k.ranges;
        let w = self.width;
        let value = vals[s.value].as_ref().expect("stored value evaluated");
        if let StoreKind::AddAt { at, stride, len } = s.kind {
            let err = self
                .err
                .expect("kernels with indirect stores get an error flag");
            let ats = vals[at].as_ref().expect("position evaluated");
            // Every lane is a point of its own and adds once, even where
            // the position and value are the same for all lanes.
            for lane in 0..p.lanes {
                let vars = self.lane_vars(b, p, lane);
                let axis = gather::Axis {
                    base,
                    dtype: arg.dtype,
                    idx: expr::eval(b, &s.index, &vars, ranges, w),
                    stride,
                    len,
                };
                let v = ops::convert(b, value[lane.min(value.len() - 1)], arg.dtype);
                let a = ats[lane.min(ats.len() - 1)];
                scatter::add(b, &axis, a, v, p.pred, err, w, self.sm);
            }
            return;
        }
        let index_per_lane = p.lanes > 1 && uses_var(Some(&s.index), None, self.lane_var);
        let lanes = if index_per_lane { p.lanes } else { 1 };
        let vs: Vec<Value> = (0..lanes)
            .map(|l| {
                // With a lane-invariant index the last lane's write wins.
                let v = if index_per_lane {
                    value[l.min(value.len() - 1)]
                } else {
                    value[value.len() - 1]
                };
                ops::convert(b, v, arg.dtype)
            })
            .collect();
        let always = crate::Cond::always();
        if lanes > 1 && memory::vector_ok(&s.index, &always, arg.dtype, lanes, self.lane_var) {
            let idx = expr::eval(b, &s.index, &p.vars, ranges, w);
            memory::store_vector(b, base, idx, &vs, p.pred, w);
            return;
        }
        for (lane, v) in vs.into_iter().enumerate() {
            let vars = self.lane_vars(b, p, lane);
            let idx = expr::eval(b, &s.index, &vars, ranges, w);
            memory::store(b, base, idx, v, p.pred, w);
        }
    }
}

/// The value of scalar parameter `param` of dtype `dt`, as
/// [`super::scalar_param`] passes it. Read where it is used, like a
/// constant: ptxas turns the read into a constant-bank operand, so it
/// costs no register across loops.
fn scalar(b: &mut Builder, param: &str, dt: DType) -> Value {
    let reg = match ops::reg_kind(dt) {
        RegKind::Pred => {
            let r = b.reg(RegKind::B32);
            ins!(b, "ld.param.b32 {r}, [{param}]");
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.ne.b32 {p}, {r}, 0");
            p
        }
        kind => {
            let r = b.reg(kind);
            ins!(b, "ld.param.{} {r}, [{param}]", kind.bit_ty());
            r
        }
    };
    Value { reg, dtype: dt }
}

/// The constant `c` of dtype `dt` (converted as the interpreter does).
fn constant(b: &mut Builder, c: f64, dt: DType) -> Value {
    let reg = match ops::reg_kind(dt) {
        RegKind::Pred => {
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.ne.u32 {p}, {}, 0", dt.saturate(c));
            p
        }
        RegKind::F32 => b.mov(RegKind::F32, "f32", f32_imm(dt.round(c) as f32)),
        RegKind::F64 => b.mov(RegKind::F64, "f64", ops::f64_imm(c)),
        kind => b.mov(kind, kind.bit_ty(), dt.saturate(c)),
    };
    Value { reg, dtype: dt }
}
