//! Which element values the JIT's passes keep in tile buffers for later
//! passes, instead of computing them again (layer norm reads its row in
//! three passes, softmax in two after the max).
//!
//! When tiles hold whole rows ([`crate::exec::tiles_hold_rows`]) the
//! driver runs a row block's passes one after the other over one tile
//! with one per-thread state, which the executor's element state relies
//! on too. A later pass then reads a value that an earlier pass computed
//! from a buffer of the tile's values when one holds it anyway (the
//! operand a `Reduce` folds, or a load the executor folded in place) or
//! when computing it again costs more than storing and loading it
//! ([`emit::costly`]: a shim call per point, `F32` `exp`'s polynomial, a
//! load through a view or with checks); IEEE arithmetic over contiguous
//! loads is computed again, which costs less than a store and a load.
//! With longer rows each pass runs over all of a row's chunks before the
//! next starts, so nothing is kept across passes.
//!
//! Which values each pass needs is the executor's plan
//! ([`Plan::reduce_needs`], [`Plan::store_needs`]); this only decides
//! where each comes from.

use crate::exec::plan::{Level, Plan};
use crate::exec::tiles_hold_rows;
use crate::ir::{Inst, Kernel, Val};

use super::emit::{self, Pass};
use super::fold;

/// Who folds a fill's operand, and from where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// The executor, from the buffer the pass writes (the operand's, or
    /// the scratch tile) or from one an earlier pass wrote (then the pass
    /// has no code). Also the answer for passes that are not fills.
    Executor,
    /// The executor, a bare load in place ([`folds_in_place`]): no code,
    /// and its element state holds the load's values.
    InPlace,
    /// The pass, each segment after computing it into the buffer it
    /// writes ([`fold`]).
    Jit,
    /// The pass, a bare contiguous load straight from its input
    /// ([`fold::direct`]); it computes nothing else.
    Direct,
}

/// One element pass and the buffers it writes and reads.
#[derive(Clone, Debug)]
pub struct PassKeep {
    /// The pass.
    pub pass: Pass,
    /// Who folds the operand of a fill.
    pub fold: Fold,
    /// Element values this pass computes and writes to their buffers.
    pub writes: Vec<Val>,
    /// Element values this pass reads from their buffers.
    pub reads: Vec<Val>,
    /// A fill whose operand must be converted to the reduction's dtype:
    /// it writes the converted values to the scratch tile, which is
    /// folded (otherwise the operand's own buffer is).
    pub scratch: bool,
}

impl PassKeep {
    /// A pass that keeps nothing.
    pub fn plain(pass: Pass) -> PassKeep {
        PassKeep {
            pass,
            fold: Fold::Executor,
            writes: Vec::new(),
            reads: Vec::new(),
            scratch: false,
        }
    }

    /// Whether the pass has a compiled function: not an in-place fold,
    /// nor a fill of an operand that a buffer holds already.
    pub fn has_code(&self) -> bool {
        match self.fold {
            Fold::InPlace => false,
            Fold::Direct => true,
            Fold::Executor | Fold::Jit => {
                !matches!(self.pass, Pass::Fill(_)) || self.scratch || !self.writes.is_empty()
            }
        }
    }
}

/// A kernel's element passes, in the order the driver runs them (each
/// `Reduce`'s fill in SSA order, then the element-level stores).
#[derive(Clone, Debug)]
pub struct Keep {
    /// The passes.
    pub passes: Vec<PassKeep>,
    /// Per instruction, the pass whose buffer holds its values (`None`
    /// for those that no buffer holds).
    pub home: Vec<Option<usize>>,
    /// Per instruction, the element-level store whose output elements
    /// hold its kept values in place of a tile buffer ([`lodge`]).
    pub lodged: Vec<Option<usize>>,
}

impl Keep {
    /// The passes of `k` (a kernel [`emit::check`] admits) and what each
    /// keeps.
    pub fn new(k: &Kernel, plan: &Plan) -> Keep {
        let n = k.insts.len();
        let across = tiles_hold_rows(k);
        let mut passes: Vec<PassKeep> = (0..n)
            .filter(|i| {
                plan.level[*i] == Level::Row && matches!(k.insts[*i].inst, Inst::Reduce(..))
            })
            .map(|i| PassKeep::plain(Pass::Fill(i)))
            .collect();
        if !plan.elem_stores.is_empty() {
            passes.push(PassKeep::plain(Pass::ElemStores));
        }
        let mut home: Vec<Option<usize>> = vec![None; n];
        // Per instruction, the first pass that computed it.
        let mut first: Vec<Option<usize>> = vec![None; n];
        for p in 0..passes.len() {
            let (roots, operand) = match passes[p].pass {
                Pass::Fill(i) => {
                    let Inst::Reduce(_, a) = k.insts[i].inst else {
                        unreachable!("fills are of reductions")
                    };
                    if fold::jit_folds(k, i) && fold::direct(k, plan, i) {
                        // Later passes load it again: a contiguous load
                        // costs no more than reading a buffer.
                        passes[p].fold = Fold::Direct;
                        continue;
                    }
                    if folds_in_place(k, plan, i) {
                        passes[p].fold = Fold::InPlace;
                        first[a].get_or_insert(p);
                        home[a].get_or_insert(p);
                        continue;
                    }
                    let elem = plan.level[a] == Level::Elem;
                    passes[p].scratch = !elem || k.insts[a].dtype != k.insts[i].dtype;
                    (if elem { vec![a] } else { Vec::new() }, Some(a))
                }
                _ => {
                    let roots = plan.elem_stores.iter().map(|s| k.stores[*s].value);
                    (
                        roots.filter(|v| plan.level[*v] == Level::Elem).collect(),
                        None,
                    )
                }
            };
            // From the roots down: a value an earlier pass computed is
            // read where a buffer holds it or should; the rest computed.
            let mut seen = vec![false; n];
            let mut stack = roots;
            let mut computed = Vec::new();
            while let Some(v) = stack.pop() {
                if std::mem::replace(&mut seen[v], true) {
                    continue;
                }
                if let Some(f) = first[v].filter(|_| across) {
                    if home[v].is_some() || emit::costly(k, plan, v) {
                        let h = *home[v].get_or_insert(f);
                        if passes[h].fold != Fold::InPlace && !passes[h].writes.contains(&v) {
                            passes[h].writes.push(v);
                        }
                        passes[p].reads.push(v);
                        continue;
                    }
                }
                computed.push(v);
                let ops = k.insts[v].inst.operands();
                stack.extend(ops.into_iter().filter(|o| plan.level[*o] == Level::Elem));
            }
            for v in computed {
                first[v].get_or_insert(p);
            }
            // A fill's operand in the reduction's dtype is folded from
            // its buffer; by the pass itself where it computes it.
            if let Some(a) = operand.filter(|_| !passes[p].scratch) {
                if !passes[p].reads.contains(&a) {
                    passes[p].writes.push(a);
                    home[a].get_or_insert(p);
                }
            }
            if let Pass::Fill(i) = passes[p].pass {
                if fold::jit_folds(k, i) && passes[p].has_code() {
                    passes[p].fold = Fold::Jit;
                }
            }
        }
        let lodged = lodge(k, plan, &passes, &home);
        Keep {
            passes,
            home,
            lodged,
        }
    }

    /// The index of element pass `p` in [`Keep::passes`].
    pub fn index(&self, p: Pass) -> usize {
        (self.passes.iter().position(|pk| pk.pass == p)).expect("an element pass of the kernel")
    }
}

/// Whether `Reduce` instruction `i` is folded by the executor itself: its
/// operand is a bare element-level load, which the executor folds in
/// place (a contiguous `F32` load read from the input itself, where the
/// JIT would copy it to a tile first).
pub fn folds_in_place(k: &Kernel, plan: &Plan, i: Val) -> bool {
    let Inst::Reduce(_, a) = k.insts[i].inst else {
        return false;
    };
    matches!(k.insts[a].inst, Inst::Load { .. }) && plan.level[a] == Level::Elem
}

/// Where the element-level stores' pass reads a kept value that it only
/// transforms and stores (softmax's `exp(x - max)`, divided by the sum),
/// the value is kept in the output elements that pass writes at the same
/// points, instead of a tile buffer: the earlier pass (the sum's fill)
/// writes it there, and the stores' pass reads each element and
/// overwrites it with its result. The output's lines are then fetched
/// while the earlier pass computes (`exp`'s polynomial), and the stores'
/// pass finds them in cache instead of waiting on them, as torch's
/// softmax writes `exp` to its output and scales it in place; the tile
/// buffer (64 KiB of `f32` a thread, beside the input's tile) is not
/// needed. Each element is read at its own point before it is written
/// there, by the thread that owns the tile, so the values are the
/// buffer's.
///
/// A value is lodged in store `s`'s output when `s` is the only store
/// to that output, steps by one along the innermost variable over whole
/// rows (so a segment the fill folds is contiguous there; the plan's
/// single-writer rule makes it injective), the output's elements are the
/// value's class as held in memory (`F32` in `float`, `F64`, `I64`), and
/// nothing but compiled passes read the value (not the executor's fold
/// of a fill's buffer). One value an output. A pass that redoes a run
/// (an `exp` input outside the polynomial's range, a division outside
/// its reciprocal's domain) has overwritten the elements in its first
/// loop, so its redo computes lodged values again instead of reading them
/// (a kernel the graph fuzzer made: the `exp` of the kept value over the
/// sum).
fn lodge(
    k: &Kernel,
    plan: &Plan,
    passes: &[PassKeep],
    home: &[Option<usize>],
) -> Vec<Option<usize>> {
    let mut lodged = vec![None; k.insts.len()];
    let Some(stores) = passes.iter().find(|p| p.pass == Pass::ElemStores) else {
        return lodged;
    };
    let inner = k.ranges.last().map_or(1, |r| (*r).max(1) as usize);
    // Values the executor reads from a fill's buffer.
    let by_rust = |v: Val| {
        let folded = |p: &PassKeep| match p.pass {
            Pass::Fill(i) => matches!(k.insts[i].inst, Inst::Reduce(_, a) if a == v),
            _ => false,
        };
        let in_place = home[v].is_some_and(|h| passes[h].fold == Fold::InPlace);
        in_place
            || passes
                .iter()
                .any(|p| p.fold == Fold::Executor && !p.scratch && folded(p))
    };
    let mut taken: Vec<usize> = Vec::new();
    for &v in &stores.reads {
        let fits = |s: &usize| {
            let o = k.stores[*s].output;
            let runs = &plan.store_runs[*s];
            k.stores.iter().filter(|t| t.output == o).count() == 1
                && !taken.contains(&o)
                && emit::mem_ty(k.outputs[o].dtype) == emit::ty(k.insts[v].dtype)
                && runs.index == 1
                && runs.span >= inner
        };
        if by_rust(v) {
            continue;
        }
        if let Some(s) = plan.elem_stores.iter().copied().find(|s| fits(s)) {
            taken.push(k.stores[s].output);
            lodged[v] = Some(s);
        }
    }
    lodged
}
