//! What the executor decides once per kernel: whether it covers the
//! kernel, each instruction's level, the runs of its index expressions,
//! and which element-level instructions each pass needs.

use crate::exec::runs::Runs;
use crate::expr::Cond;
use crate::ir::{Inst, Kernel, StoreKind, Val};
use crate::ops::UnaryOp;
use crate::outs::one_writer;
use crate::{DType, KernelKind};

/// Where an instruction's value varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nowhere: one value for the whole kernel (constants, scalars and
    /// ops of them).
    Uniform,
    /// Per row (a point of the kept variables).
    Row,
    /// Per point of the whole domain.
    Elem,
}

/// The executor's plan of a kernel.
pub struct Plan {
    /// Each instruction's level.
    pub level: Vec<Level>,
    /// Each instruction's index runs (loads, gathers, `Valid`, `Index`),
    /// over the space of its level.
    pub runs: Vec<Runs>,
    /// Each store's index runs.
    pub store_runs: Vec<Runs>,
    /// For each `Reduce` instruction, the element-level instructions its
    /// operand needs, in SSA order.
    pub reduce_needs: Vec<Vec<Val>>,
    /// Element-level instructions the element-level stores need, except
    /// the values of `direct` stores.
    pub store_needs: Vec<Val>,
    /// Per store, whether it is element-level and its value may be
    /// computed straight into the output (`direct_f32`), skipping a vector
    /// and its copy: a pass less over the tile.
    pub direct: Vec<bool>,
    /// Stores run once per row.
    pub row_stores: Vec<usize>,
    /// Stores run at every point.
    pub elem_stores: Vec<usize>,
}

impl Plan {
    /// The plan of `k`; `None` when the executor does not cover it (scans,
    /// sorts, scatters, attention, or stores that may write one element
    /// twice, whose order only the interpreter's sequential loop fixes).
    pub fn new(k: &Kernel) -> Option<Plan> {
        let covered_kind = !matches!(
            k.kind,
            KernelKind::Scan | KernelKind::Sort | KernelKind::Scatter | KernelKind::Attention
        );
        let covered_insts = k.insts.iter().all(|n| {
            !matches!(
                n.inst,
                Inst::Scan(..) | Inst::Sort(..) | Inst::Dot(..) | Inst::Attend(..)
            )
        });
        if !covered_kind || !covered_insts || k.stores.iter().any(|s| s.kind != StoreKind::Write) {
            return None;
        }
        let element = k.element_level();
        let mut level = Vec::with_capacity(k.insts.len());
        for (i, n) in k.insts.iter().enumerate() {
            let l = match &n.inst {
                Inst::Const(_) | Inst::Scalar(_) => Level::Uniform,
                Inst::Reduce(..) => Level::Row,
                Inst::Load { .. } | Inst::Gather(_) | Inst::Valid(_) | Inst::Index(_) => {
                    if element[i] {
                        Level::Elem
                    } else {
                        Level::Row
                    }
                }
                inst => inst
                    .operands()
                    .iter()
                    .map(|o| level[*o])
                    .max()
                    .unwrap_or(Level::Uniform),
            };
            level.push(l);
        }
        let nk = k.n_kept;
        let space = |l: Level| {
            if l == Level::Elem {
                &k.ranges[..]
            } else {
                &k.ranges[..nk]
            }
        };
        let runs = k
            .insts
            .iter()
            .zip(&level)
            .map(|(n, l)| {
                let (index, valid) = n.inst.exprs();
                let always = Cond::always();
                match n.inst {
                    Inst::Load { .. } | Inst::Gather(_) | Inst::Valid(_) | Inst::Index(_) => {
                        Runs::new(index, valid.unwrap_or(&always), space(*l))
                    }
                    _ => Runs::default(),
                }
            })
            .collect();
        let (elem_stores, row_stores): (Vec<usize>, Vec<usize>) =
            (0..k.stores.len()).partition(|s| k.store_is_element_level(&k.stores[*s], &element));
        let store_level = |s: usize| {
            if elem_stores.contains(&s) {
                Level::Elem
            } else {
                Level::Row
            }
        };
        // Threads take disjoint points; each element must have one writer.
        if !one_writer(k, |s| space(store_level(s))) {
            return None;
        }
        let store_runs: Vec<Runs> = (0..k.stores.len())
            .map(|s| {
                let ranges = space(store_level(s));
                Runs::new(Some(&k.stores[s].index), &Cond::always(), ranges)
            })
            .collect();
        let needs = |roots: &[Val]| needs(k, &level, roots);
        let reduce_needs = k
            .insts
            .iter()
            .map(|n| match n.inst {
                Inst::Reduce(_, a) => needs(&[a]),
                _ => Vec::new(),
            })
            .collect();
        let direct: Vec<bool> = (0..k.stores.len())
            .map(|s| {
                elem_stores.contains(&s)
                    && store_runs[s].index == 1
                    && direct_f32(k, &level, k.stores[s].value)
            })
            .collect();
        // A direct store's operands are its value's (its value is read
        // nowhere else).
        let roots: Vec<Val> = elem_stores
            .iter()
            .flat_map(|s| match direct[*s] {
                true => k.insts[k.stores[*s].value].inst.operands(),
                false => k.stores[*s].operands(),
            })
            .collect();
        Some(Plan {
            store_needs: needs(&roots),
            direct,
            level,
            runs,
            store_runs,
            reduce_needs,
            row_stores,
            elem_stores,
        })
    }
}

/// Whether element-level instruction `v`, stored by one store, can be
/// computed straight into that store's `F32` output: an `F32` unary
/// (`arith::unary_f32`) or non-comparison binary op
/// (`arith::binary_f32`) of `F32` operands, computed in `F32`, whose value
/// nothing else reads (no instruction, no other store), so that it needs
/// no vector of its own.
fn direct_f32(k: &Kernel, level: &[Level], v: Val) -> bool {
    let f32 = |v: Val| k.insts[v].dtype == DType::F32;
    let op_ok = match k.insts[v].inst {
        Inst::Unary(op, a) => op != UnaryOp::Not && f32(a),
        Inst::Binary(op, a, b) => {
            !op.is_comparison()
                && f32(a)
                && f32(b)
                && op.compute_dtype(DType::F32, DType::F32, DType::F32) == DType::F32
        }
        _ => false,
    };
    let readers = k
        .insts
        .iter()
        .flat_map(|n| n.inst.operands())
        .chain(k.stores.iter().flat_map(|s| s.operands()))
        .filter(|o| *o == v)
        .count();
    let stored_to_f32 = k
        .stores
        .iter()
        .any(|s| s.value == v && k.outputs[s.output].dtype == DType::F32);
    level[v] == Level::Elem && f32(v) && op_ok && readers == 1 && stored_to_f32
}

/// The element-level instructions that `roots` need, in SSA order.
fn needs(k: &Kernel, level: &[Level], roots: &[Val]) -> Vec<Val> {
    let mut want = vec![false; k.insts.len()];
    let mut stack: Vec<Val> = roots
        .iter()
        .copied()
        .filter(|r| level[*r] == Level::Elem)
        .collect();
    while let Some(v) = stack.pop() {
        if !want[v] {
            want[v] = true;
            stack.extend(
                k.insts[v]
                    .inst
                    .operands()
                    .into_iter()
                    .filter(|o| level[*o] == Level::Elem),
            );
        }
    }
    (0..k.insts.len()).filter(|v| want[*v]).collect()
}
