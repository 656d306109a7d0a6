//! Kernels with reductions ("row kernels"): a team of threads per row (see
//! [`Rows`]) evaluates the kernel's reductions in SSA order, each as one
//! pass over the row (independent reductions share a pass), combines the
//! team's partial results with butterfly shuffles and, for a CTA team,
//! shared memory, then runs the element-level stores in a final pass.

use super::builder::{ins, Builder, Reg, RegKind};
use super::elementwise::used_vars;
use super::eval::{needs, row_free_load, Cx, Lanes, Point, Vals};
use super::expr;
use super::launch::Rows;
use super::memory::cluster_barrier;
use super::online::{self, Pattern};
use super::ops::{self, acc_dtype, Value};
use crate::ir::{Inst, Val};
use crate::ReduceOp;

/// Bytes of one shared-memory slot: an accumulator register of 32 or 64
/// bits (`F64` and `I64` reductions).
const WORD: u32 = 8;

/// `r` of the lane `off` away in a butterfly; 64-bit registers move as
/// two 32-bit halves.
fn shuffle_bfly(b: &mut Builder, r: Reg, off: u32) -> Reg {
    let t = b.reg(r.kind);
    if r.kind.bit_ty() == "b64" {
        let (lo, hi) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "mov.b64 {{{lo}, {hi}}}, {r}");
        ins!(b, "shfl.sync.bfly.b32 {lo}, {lo}, {off}, 31, -1");
        ins!(b, "shfl.sync.bfly.b32 {hi}, {hi}, {off}, 31, -1");
        ins!(b, "mov.b64 {t}, {{{lo}, {hi}}}");
    } else {
        ins!(b, "shfl.sync.bfly.b32 {t}, {r}, {off}, 31, -1");
    }
    t
}

/// A reduction being accumulated by each thread.
enum Acc {
    /// `Reduce(op, ..)` of instruction `val`, in `reg` (of [`acc_dtype`]).
    Plain { val: Val, op: ReduceOp, reg: Reg },
    /// A softmax's max and sum together.
    Online(Pattern, online::State),
}

impl Acc {
    /// The registers the team combine moves.
    fn regs(&self) -> Vec<Reg> {
        match self {
            Acc::Plain { reg, .. } => vec![*reg],
            Acc::Online(_, st) => vec![st.m, st.s],
        }
    }

    /// Merges the partial result in `other` (registers as in [`Acc::regs`]).
    fn merge(&self, b: &mut Builder, k: &crate::Kernel, other: &[Reg]) {
        match self {
            Acc::Plain { val, op, reg } => {
                ops::combine(b, *op, acc_dtype(k.insts[*val].dtype), *reg, other[0], None)
            }
            Acc::Online(_, st) => online::merge(
                b,
                *st,
                online::State {
                    m: other[0],
                    s: other[1],
                },
            ),
        }
    }

    /// Restarts from the identity and merges `parts` partial results in
    /// order; `load(b, part, j, dst)` loads register `j` of a part.
    fn merge_parts(
        &self,
        b: &mut Builder,
        k: &crate::Kernel,
        parts: u32,
        mut load: impl FnMut(&mut Builder, u32, usize, Reg),
    ) {
        let regs = self.regs();
        for (r, id) in regs.iter().zip(self.identity(b, k)) {
            ins!(b, "mov.{} {r}, {id}", r.kind.bit_ty());
        }
        for part in 0..parts {
            let other: Vec<Reg> = regs
                .iter()
                .enumerate()
                .map(|(j, r)| {
                    let x = b.reg(r.kind);
                    load(b, part, j, x);
                    x
                })
                .collect();
            self.merge(b, k, &other);
        }
    }

    /// Fresh registers holding the identity.
    fn identity(&self, b: &mut Builder, k: &crate::Kernel) -> Vec<Reg> {
        match self {
            Acc::Plain { val, op, .. } => vec![ops::identity(b, *op, k.insts[*val].dtype)],
            Acc::Online(..) => {
                let st = online::init(b);
                vec![st.m, st.s]
            }
        }
    }
}

/// One pass over the row: plain reductions, and at most one softmax pair
/// computed online.
#[derive(Debug, Default)]
struct Pass {
    plain: Vec<Val>,
    online: Option<Pattern>,
}

impl Pass {
    fn has(&self, r: Val) -> bool {
        self.plain.contains(&r) || self.online.is_some_and(|p| p.max == r || p.sum == r)
    }
}

/// Groups the reductions into passes: a reduction joins the current pass
/// unless its operand depends on a reduction of that pass; with `online`,
/// a softmax sum joins the pass of its max.
fn passes(cx: &Cx, online: bool) -> Vec<Pass> {
    let k = cx.k;
    // For every instruction, the reductions it depends on.
    let mut deps: Vec<Vec<Val>> = vec![Vec::new(); k.insts.len()];
    let mut out: Vec<Pass> = Vec::new();
    for (i, n) in k.insts.iter().enumerate() {
        let mut d: Vec<Val> = Vec::new();
        for o in n.inst.operands() {
            for r in &deps[o] {
                if !d.contains(r) {
                    d.push(*r);
                }
            }
        }
        if let Inst::Reduce(..) = n.inst {
            let pair = online.then(|| online::pattern(k, i)).flatten();
            let last = out.last_mut();
            match (pair, last) {
                // The max is a plain reduction of the current pass and the
                // sum depends on no other reduction of it.
                (Some(p), Some(last))
                    if last.online.is_none()
                        && last.plain.contains(&p.max)
                        && d.iter().all(|r| *r == p.max || !last.has(*r)) =>
                {
                    last.plain.retain(|r| *r != p.max);
                    last.online = Some(p);
                }
                (_, Some(last)) if !d.iter().any(|r| last.has(*r)) => last.plain.push(i),
                _ => out.push(Pass {
                    plain: vec![i],
                    online: None,
                }),
            }
            d.push(i);
        }
        deps[i] = d;
    }
    out
}

/// The reduced variables at group `g` of a row (the last one scaled by
/// the vector width).
fn group_vars(
    b: &mut Builder,
    cx: &Cx,
    plan: &Rows,
    sizes: &[i64],
    used: &[bool],
    g: Reg,
) -> Vec<Option<Reg>> {
    let w = cx.width;
    let mut red = expr::unravel(b, g, sizes, &used[cx.k.n_kept..], w);
    if let (Some(Some(v)), true) = (red.last_mut(), plan.lanes > 1) {
        let r = w.reg(b);
        ins!(b, "mul.lo.s{} {r}, {v}, {}", w.bits(), plan.lanes);
        *v = r;
    }
    red
}

/// What a pass does with a thread's evaluated slots.
type SlotBody<'b> = dyn FnMut(&mut Builder, &mut [(Point, Vals)]) + 'b;

/// Per-row state shared by the passes.
struct Row<'a> {
    cx: &'a Cx<'a>,
    plan: &'a Rows,
    /// Row-level values (one lane).
    vals: Vals,
    point: Point,
    /// Loop variables' sizes over the reduced domain, in groups.
    sizes: Vec<i64>,
    used: Vec<bool>,
    team_lane: Reg,
    ngroups: Reg,
    /// Cached slots: their points and values, alive across passes.
    slots: Vec<(Point, Vals)>,
}

impl Row<'_> {
    /// Evaluates every row-level instruction whose operands are ready (one
    /// sweep suffices: operands precede their users).
    fn eval_ready(&mut self, b: &mut Builder) {
        let k = self.cx.k;
        for i in 0..k.insts.len() {
            let inst = &k.insts[i].inst;
            if !self.cx.level[i]
                && self.vals[i].is_none()
                && !matches!(inst, Inst::Reduce(..))
                && inst.operands().iter().all(|o| self.vals[*o].is_some())
            {
                self.cx.eval(b, &self.point, &[i], &mut self.vals);
            }
        }
    }

    /// The point of group `g` of the row, valid where `pred` holds.
    fn group_point(&self, b: &mut Builder, g: Reg, pred: Option<Reg>) -> Point {
        let nk = self.cx.k.n_kept;
        let mut vars = self.point.vars.clone();
        vars[nk..].copy_from_slice(&group_vars(
            b,
            self.cx,
            self.plan,
            &self.sizes,
            &self.used,
            g,
        ));
        Point {
            vars,
            lanes: self.plan.lanes,
            pred,
        }
    }

    /// Values at a slot start from the row-level ones.
    fn slot_vals(&self, into: &mut Vals) {
        for (i, v) in self.vals.iter().enumerate() {
            if into[i].is_none() && v.is_some() {
                into[i] = v.clone();
            }
        }
    }

    /// Emits a pass over the row: `body` runs on the slots of a thread
    /// once `todo` is evaluated in all of them (loads first).
    fn pass(&mut self, b: &mut Builder, todo: &[Val], body: &mut SlotBody) {
        let cx = self.cx;
        if self.plan.cached {
            let mut slots = std::mem::take(&mut self.slots);
            for (p, v) in &mut slots {
                self.slot_vals(v);
                cx.eval(b, p, todo, v);
            }
            body(b, &mut slots);
            self.slots = slots;
            return;
        }
        let w = cx.width;
        let n = w.bits();
        let tpr = self.plan.team_threads();
        let g = w.reg(b);
        ins!(b, "mov.b{n} {g}, {}", self.team_lane);
        let (top, end) = (b.label(), b.label());
        b.place(&top);
        let done = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.s{n} {done}, {g}, {}", self.ngroups);
        ins!(b, "@{done} bra {end}");
        let mut slots = Vec::new();
        for s in 0..self.plan.slots {
            let (gs, pred) = if s == 0 {
                (g, None)
            } else {
                let gs = w.reg(b);
                ins!(b, "add.s{n} {gs}, {g}, {}", s as u32 * tpr);
                let p = b.reg(RegKind::Pred);
                ins!(b, "setp.lt.s{n} {p}, {gs}, {}", self.ngroups);
                (gs, Some(p))
            };
            let p = self.group_point(b, gs, pred);
            let mut v = vec![None; cx.k.insts.len()];
            self.slot_vals(&mut v);
            cx.eval_loads(b, &p, todo, &mut v);
            slots.push((p, v));
        }
        for (p, v) in &mut slots {
            cx.eval(b, p, todo, v);
        }
        body(b, &mut slots);
        ins!(b, "add.s{n} {g}, {g}, {}", self.plan.slots as u32 * tpr);
        ins!(b, "bra {top}");
        b.place(&end);
    }
}

/// Thread geometry of the team.
struct Team {
    tid: Reg,
    /// The thread's lane in its team (over all CTAs of a cluster team).
    lane: Reg,
    warp: Reg,
    /// Toggles every row so that consecutive rows use different shared
    /// memory for their CTA-wide combine.
    parity: Reg,
}

/// Emits the body of a row kernel; returns the static shared memory it
/// declares as `smem` (bytes).
pub fn emit(b: &mut Builder, cx: &Cx, plan: &Rows, smem: &str) -> u32 {
    let k = cx.k;
    let w = cx.width;
    let n = w.bits();
    let nk = k.n_kept;
    let passes = passes(cx, !plan.cached);
    // Shared words per warp: one per reduction (a softmax pair uses its two).
    let nred = passes
        .iter()
        .map(|p| p.plain.len() + 2 * p.online.is_some() as usize)
        .sum::<usize>();
    let warps = plan.tpr.div_ceil(32);
    // Per parity: a word per warp and reduction register, then with a
    // cluster the CTA's combined word per reduction register.
    let cta_words = if plan.tpr > 32 {
        nred as u32 * warps
    } else {
        0
    };
    let cluster_words = if plan.cluster > 1 { nred as u32 } else { 0 };
    let shared_bytes = 2 * (cta_words + cluster_words) * WORD;

    // Team geometry. With a cluster, its CTAs are the team: rows go by
    // cluster, and a thread's lane counts from the CTA's rank in it.
    let tid = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {tid}, %tid.x");
    let (block_id, nblocks) = if plan.cluster > 1 {
        ("%clusterid.x", "%nclusterid.x")
    } else {
        ("%ctaid.x", "%nctaid.x")
    };
    let ctaid = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {ctaid}, {block_id}");
    let nctaid = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {nctaid}, {nblocks}");
    let team_shift = plan.tpr.trailing_zeros();
    let teams_per_block = plan.block / plan.tpr;
    let lane32 = b.reg(RegKind::B32);
    ins!(b, "and.b32 {lane32}, {tid}, {}", plan.tpr - 1);
    if plan.cluster > 1 {
        let rank = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {rank}, %cluster_ctarank");
        ins!(b, "mad.lo.u32 {lane32}, {rank}, {}, {lane32}", plan.tpr);
    }
    let team_in_block = b.reg(RegKind::B32);
    ins!(b, "shr.u32 {team_in_block}, {tid}, {team_shift}");
    let team_in_warp = b.reg(RegKind::B32);
    if plan.tpr < 32 {
        ins!(
            b,
            "and.b32 {team_in_warp}, {team_in_block}, {}",
            32 / plan.tpr - 1
        );
    } else {
        ins!(b, "mov.u32 {team_in_warp}, 0");
    }
    let to_w = |b: &mut Builder, r: Reg| -> Reg {
        if w.wide {
            let x = b.reg(RegKind::B64);
            ins!(b, "cvt.u64.u32 {x}, {r}");
            x
        } else {
            r
        }
    };
    let team_lane = to_w(b, lane32);
    let row = w.reg(b);
    let nteams = w.reg(b);
    if w.wide {
        ins!(b, "mul.wide.u32 {row}, {ctaid}, {teams_per_block}");
        let t = to_w(b, team_in_block);
        ins!(b, "add.s64 {row}, {row}, {t}");
        ins!(b, "mul.wide.u32 {nteams}, {nctaid}, {teams_per_block}");
    } else {
        ins!(
            b,
            "mad.lo.s32 {row}, {ctaid}, {teams_per_block}, {team_in_block}"
        );
        ins!(b, "mul.lo.s32 {nteams}, {nctaid}, {teams_per_block}");
    }
    let first = w.reg(b);
    let tiw = to_w(b, team_in_warp);
    ins!(b, "sub.s{n} {first}, {row}, {tiw}");
    let warp = b.reg(RegKind::B32);
    ins!(b, "shr.u32 {warp}, {tid}, 5");
    let parity = b.mov(RegKind::B32, "u32", 0);
    let team = Team {
        tid,
        lane: lane32,
        warp,
        parity,
    };

    let rows = k.rows() as i64;
    let row_len = k.row_len() as i64;
    let ngroups_total = row_len / plan.lanes as i64;
    let used = used_vars(cx);
    let mut sizes: Vec<i64> = k.ranges[nk..].to_vec();
    if let Some(l) = sizes.last_mut() {
        *l /= plan.lanes as i64;
    }

    // Cached rows: a thread's groups are the same in every row, so their
    // variables, and the loads that do not depend on the row (weights),
    // are computed once before the row loop.
    let loads: Vec<Val> = (0..k.insts.len())
        .filter(|&i| cx.level[i] && matches!(k.insts[i].inst, Inst::Load { .. }))
        .collect();
    let (invariant, per_row): (Vec<Val>, Vec<Val>) = loads
        .iter()
        .partition(|&&i| rows > 0 && row_free_load(k, i));
    let mut hoisted = Vec::new();
    if plan.cached {
        for s in 0..plan.slots {
            let g = w.reg(b);
            ins!(
                b,
                "add.s{n} {g}, {team_lane}, {}",
                s as u32 * plan.team_threads()
            );
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.lt.s{n} {p}, {g}, {ngroups_total}");
            let mut vars = vec![None; nk];
            vars.extend(group_vars(b, cx, plan, &sizes, &used, g));
            let point = Point {
                vars,
                lanes: plan.lanes,
                pred: Some(p),
            };
            let mut v = vec![None; k.insts.len()];
            cx.eval_loads(b, &point, &invariant, &mut v);
            hoisted.push((point, v));
        }
    }

    let (top, end) = (b.label(), b.label());
    b.place(&top);
    let done = b.reg(RegKind::Pred);
    ins!(b, "setp.ge.s{n} {done}, {first}, {rows}");
    ins!(b, "@{done} bra.uni {end}");
    let row_valid = b.reg(RegKind::Pred);
    ins!(b, "setp.lt.s{n} {row_valid}, {row}, {rows}");
    let mut vars = expr::unravel(b, row, &k.ranges[..nk], &used[..nk], w);
    vars.resize(k.ranges.len(), None);
    let ngroups = w.reg(b);
    ins!(b, "selp.b{n} {ngroups}, {ngroups_total}, 0, {row_valid}");
    let mut st = Row {
        cx,
        plan,
        vals: vec![None; k.insts.len()],
        point: Point {
            vars,
            lanes: 1,
            pred: Some(row_valid),
        },
        sizes,
        used,
        team_lane,
        ngroups,
        slots: Vec::new(),
    };
    for (hp, hv) in &hoisted {
        // Every other element-level load of the row, issued up front.
        let mut vars = st.point.vars.clone();
        vars[nk..].copy_from_slice(&hp.vars[nk..]);
        let point = Point {
            vars,
            lanes: plan.lanes,
            pred: expr::and(b, hp.pred, Some(row_valid)),
        };
        let mut v = hv.clone();
        cx.eval_loads(b, &point, &per_row, &mut v);
        st.slots.push((point, v));
    }

    let mut ordinal = 0;
    for pass in &passes {
        b.comment(&format!("pass: {pass:?}"));
        st.eval_ready(b);
        let mut accs: Vec<Acc> = pass
            .plain
            .iter()
            .map(|&r| {
                let Inst::Reduce(op, _) = k.insts[r].inst else {
                    unreachable!("passes hold reductions")
                };
                Acc::Plain {
                    val: r,
                    op,
                    reg: ops::identity(b, op, k.insts[r].dtype),
                }
            })
            .collect();
        let mut roots: Vec<Val> = pass
            .plain
            .iter()
            .map(|&r| k.insts[r].inst.operands()[0])
            .collect();
        if let Some(p) = pass.online {
            accs.push(Acc::Online(p, online::init(b)));
            roots.push(p.x);
        }
        let todo = needs(k, &cx.level, &roots);
        st.pass(b, &todo, &mut |b, slots| {
            for a in &accs {
                match a {
                    Acc::Plain { val, op, reg } => {
                        let adt = acc_dtype(k.insts[*val].dtype);
                        let src = k.insts[*val].inst.operands()[0];
                        for (p, v) in slots.iter() {
                            let lanes = v[src].clone().expect("reduction operand evaluated");
                            // An operand without a value per lane counts once per lane.
                            for l in 0..p.lanes {
                                let x = ops::convert(b, lanes[l.min(lanes.len() - 1)], adt);
                                ops::combine(b, *op, adt, *reg, x.reg, p.pred);
                            }
                        }
                    }
                    Acc::Online(pat, state) => {
                        let mut xs = Vec::new();
                        for (p, v) in slots.iter() {
                            let lanes = v[pat.x].clone().expect("softmax input evaluated");
                            for l in 0..p.lanes {
                                xs.push((lanes[l.min(lanes.len() - 1)], p.pred));
                            }
                        }
                        online::update(b, k, pat, *state, &xs);
                    }
                }
            }
        });
        team_reduce(b, plan, &team, &accs, k, smem, ordinal, nred);
        for a in &accs {
            ordinal += a.regs().len();
            let results = match a {
                Acc::Plain { val, reg, .. } => vec![(*val, *reg)],
                Acc::Online(p, state) => {
                    online::finish(b, *state, row_len);
                    vec![(p.max, state.m), (p.sum, state.s)]
                }
            };
            for (val, reg) in results {
                let dt = k.insts[val].dtype;
                let v = Value {
                    reg,
                    dtype: acc_dtype(dt),
                };
                let v: Lanes = vec![ops::convert(b, v, dt)];
                st.vals[val] = Some(v);
            }
        }
    }
    st.eval_ready(b);

    // Row-level stores: one thread per team.
    let level = &cx.level;
    let (elem_stores, row_stores): (Vec<_>, Vec<_>) = k
        .stores
        .iter()
        .partition(|s| k.store_is_element_level(s, level));
    if !row_stores.is_empty() {
        let first_lane = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {first_lane}, {}, 0", team.lane);
        let pred = expr::and(b, Some(row_valid), Some(first_lane));
        let p = Point {
            vars: st.point.vars.clone(),
            lanes: 1,
            pred,
        };
        for s in &row_stores {
            cx.store(b, &p, s, &st.vals);
        }
    }
    if !elem_stores.is_empty() {
        b.comment("pass: element stores");
        let roots: Vec<Val> = elem_stores.iter().map(|s| s.value).collect();
        let todo = needs(k, level, &roots);
        st.pass(b, &todo, &mut |b, slots| {
            for (p, v) in slots.iter() {
                for s in &elem_stores {
                    cx.store(b, p, s, v);
                }
            }
        });
    }

    ins!(b, "add.s{n} {row}, {row}, {nteams}");
    ins!(b, "add.s{n} {first}, {first}, {nteams}");
    ins!(b, "xor.b32 {parity}, {parity}, 1");
    ins!(b, "bra.uni {top}");
    b.place(&end);
    if plan.cluster > 1 {
        // Peers may still read this CTA's shared memory.
        cluster_barrier(b);
    }
    shared_bytes
}

/// Combines the team's partial results of `accs` in place: butterfly
/// shuffles within the warp (or sub-warp team), then, for a CTA team, one
/// shared-memory word per warp and register, and a sweep over them by
/// every thread. `ordinal` is the first word of these accumulators among
/// the `nred` of a row.
#[allow(clippy::too_many_arguments)]
fn team_reduce(
    b: &mut Builder,
    plan: &Rows,
    team: &Team,
    accs: &[Acc],
    k: &crate::Kernel,
    smem: &str,
    ordinal: usize,
    nred: usize,
) {
    let width = plan.tpr.min(32);
    let mut off = width / 2;
    while off > 0 {
        for a in accs {
            let other: Vec<Reg> = a.regs().iter().map(|r| shuffle_bfly(b, *r, off)).collect();
            a.merge(b, k, &other);
        }
        off /= 2;
    }
    if plan.tpr <= 32 {
        return;
    }
    let warps = plan.tpr / 32;
    // Word (parity, accumulator register, warp) of the buffer.
    let base = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {base}, {smem}");
    let t = b.reg(RegKind::B32);
    ins!(
        b,
        "mul.lo.s32 {t}, {}, {}",
        team.parity,
        nred as u32 * warps * WORD
    );
    ins!(b, "add.s32 {base}, {base}, {t}");
    let lane0 = b.reg(RegKind::Pred);
    let l = b.reg(RegKind::B32);
    ins!(b, "and.b32 {l}, {}, 31", team.tid);
    ins!(b, "setp.eq.u32 {lane0}, {l}, 0");
    let wa = b.reg(RegKind::B32);
    ins!(b, "shl.b32 {wa}, {}, {}", team.warp, WORD.trailing_zeros());
    ins!(b, "add.s32 {wa}, {wa}, {base}");
    let mut word = ordinal as u32;
    let mut first = Vec::new();
    for a in accs {
        first.push(word);
        for r in a.regs() {
            ins!(
                b,
                "@{lane0} st.shared.{} [{wa}+{}], {r}",
                r.kind.bit_ty(),
                word * warps * WORD
            );
            word += 1;
        }
    }
    ins!(b, "bar.sync 0");
    for (a, w0) in accs.iter().zip(&first) {
        // Every warp's result, in warp order.
        a.merge_parts(b, k, warps, |b, wi, j, x| {
            let off = ((w0 + j as u32) * warps + wi) * WORD;
            ins!(b, "ld.shared.{} {x}, [{base}+{off}]", x.kind.bit_ty());
        });
    }
    if plan.cluster > 1 {
        cluster_reduce(b, plan, team, accs, k, smem, &first, nred);
    }
}

/// Combines the CTAs' results of a cluster team: thread 0 of each CTA
/// writes them to its shared memory (after the CTA words, one per
/// parity and register), a cluster barrier, then every thread merges all
/// CTAs' words in rank order, so that every CTA holds the same result.
#[allow(clippy::too_many_arguments)]
fn cluster_reduce(
    b: &mut Builder,
    plan: &Rows,
    team: &Team,
    accs: &[Acc],
    k: &crate::Kernel,
    smem: &str,
    first: &[u32],
    nred: usize,
) {
    let nred = nred as u32;
    let base = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {base}, {smem}");
    ins!(
        b,
        "add.s32 {base}, {base}, {}",
        2 * nred * (plan.tpr / 32) * WORD
    );
    let t = b.reg(RegKind::B32);
    ins!(b, "mul.lo.s32 {t}, {}, {}", team.parity, nred * WORD);
    ins!(b, "add.s32 {base}, {base}, {t}");
    let t0 = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.u32 {t0}, {}, 0", team.tid);
    for (a, w0) in accs.iter().zip(first) {
        for (j, r) in a.regs().iter().enumerate() {
            ins!(
                b,
                "@{t0} st.shared.{} [{base}+{}], {r}",
                r.kind.bit_ty(),
                (w0 + j as u32) * WORD
            );
        }
    }
    cluster_barrier(b);
    let peer = b.reg(RegKind::B32);
    for (a, w0) in accs.iter().zip(first) {
        // Every CTA's result, in rank order.
        a.merge_parts(b, k, plan.cluster, |b, rank, j, x| {
            if j == 0 {
                ins!(b, "mapa.shared::cluster.u32 {peer}, {base}, {rank}");
            }
            let off = (w0 + j as u32) * WORD;
            ins!(
                b,
                "ld.shared::cluster.{} {x}, [{peer}+{off}]",
                x.kind.bit_ty()
            );
        });
    }
}
