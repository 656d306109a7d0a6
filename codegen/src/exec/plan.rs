//! What the executor decides once per kernel: whether it covers the
//! kernel, each instruction's level, the runs of its index expressions,
//! and which element-level instructions each pass needs.

use crate::dims::Ranges;
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
    /// Per instruction, whether it is an `F32` binary op that only an
    /// `F32` `exp` reads (softmax's `x - max`), computed by that `exp` in
    /// blocks that stay in L1 (`tile::exp_of_binary`) instead of into a
    /// vector of its own (a pass less over the tile).
    pub fused: Vec<bool>,
    /// Whether the kernel scans (`Inst::Scan`): its rows' chunks then run
    /// in order on one thread, never split over threads.
    pub scans: bool,
    /// Whether the kernel sorts (`Inst::Sort`): its tiles then hold whole
    /// rows, however long.
    pub sorts: bool,
    /// Whether the kernel adds at data positions (a scatter's
    /// [`StoreKind::AddAt`], its only stores): its adds are then applied
    /// in domain order on one thread ([`crate::exec::scatter`]), so
    /// repeated positions sum in the interpreter's order.
    pub adds: bool,
    /// Whether the kernel scans along an axis strided in memory: its tiles
    /// are then column tiles, many rows by a chunk of positions
    /// (`exec::tiling`).
    pub columns: bool,
    /// The ranges the element-level stores run over
    /// ([`Kernel::store_ranges`]: a sort stores the first `k` positions
    /// of each row).
    pub store_ranges: Ranges,
}

impl Plan {
    /// The plan of `k`; `None` when the executor does not cover it
    /// (attention, scans beside reductions, sorts
    /// of rows past `u32` positions, adds beside writes, or overwriting
    /// stores that may write one element twice, whose order only the
    /// interpreter's sequential loop fixes).
    pub fn new(k: &Kernel) -> Option<Plan> {
        let covered_kind = k.kind != KernelKind::Attention;
        let covered_insts = k
            .insts
            .iter()
            .all(|n| !matches!(n.inst, Inst::Dot(..) | Inst::Attend(..)));
        let scans = k.insts.iter().any(|n| matches!(n.inst, Inst::Scan(..)));
        let sorts = k.insts.iter().any(|n| matches!(n.inst, Inst::Sort(..)));
        // A scan carries each row's state from chunk to chunk, so its
        // tiles run once each, in order: only the store pass may read it.
        // A sort's tile is a whole row, whose positions `exec::sort` packs
        // in `u32`s.
        let reduces = k.insts.iter().any(|n| matches!(n.inst, Inst::Reduce(..)));
        let adds = k.stores.iter().any(|s| s.kind != StoreKind::Write);
        if !covered_kind
            || !covered_insts
            || ((scans || sorts) && reduces)
            || (sorts && (k.kind != KernelKind::Sort || k.row_len() > u32::MAX as usize))
            || (adds && (scans || sorts))
            || (adds && k.stores.iter().any(|s| s.kind == StoreKind::Write))
        {
            return None;
        }
        let element = k.element_level();
        let mut level = Vec::with_capacity(k.insts.len());
        for (i, n) in k.insts.iter().enumerate() {
            let l = match &n.inst {
                Inst::Const(_) | Inst::Scalar(_) => Level::Uniform,
                Inst::Reduce(..) => Level::Row,
                // Element-level even over a row-invariant operand.
                Inst::Scan(..) | Inst::Sort(..) => Level::Elem,
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
        let store_ranges = k.store_ranges();
        let runs: Vec<Runs> = k
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
        let store_space = |s: usize| {
            if elem_stores.contains(&s) {
                &store_ranges[..]
            } else {
                &k.ranges[..nk]
            }
        };
        // Adds are collected at row level only (`tile::row_store`): a
        // scatter kernel has no reduced variable.
        if adds && !elem_stores.is_empty() {
            return None;
        }
        // Threads take disjoint points; each element must have one writer
        // (adds are applied on one thread, in order).
        if !adds && !one_writer(k, store_space) {
            return None;
        }
        let store_runs: Vec<Runs> = (0..k.stores.len())
            .map(|s| Runs::new(Some(&k.stores[s].index), &Cond::always(), store_space(s)))
            .collect();
        // A scanned axis strided in memory (`cumsum(0)` of a matrix): tiles
        // of whole rows would read a line and a page per element (2x
        // slower than the interpreter's parallel rows), so its tiles are
        // column tiles (`exec::tiling`).
        let strided = |r: &Runs| r.index.abs() > 1;
        let loads_strided =
            (0..k.insts.len()).any(|i| level[i] == Level::Elem && strided(&runs[i]));
        let stores_strided = elem_stores.iter().any(|s| strided(&store_runs[*s]));
        let columns = scans && (loads_strided || stores_strided);
        let readers = readers(k);
        let fused: Vec<bool> = (0..k.insts.len())
            .map(|v| {
                let exp_reads = |r: &Inst| matches!(r, Inst::Unary(UnaryOp::Exp, a) if *a == v);
                level[v] == Level::Elem
                    && f32_op(k, v)
                    && matches!(k.insts[v].inst, Inst::Binary(..))
                    && readers[v] == 1
                    && k.insts
                        .iter()
                        .any(|n| exp_reads(&n.inst) && n.dtype == DType::F32)
            })
            .collect();
        let needs = |roots: &[Val]| needs(k, &level, &fused, roots);
        let reduce_needs = k
            .insts
            .iter()
            .map(|n| match n.inst {
                Inst::Reduce(_, a) => needs(&[a]),
                _ => Vec::new(),
            })
            .collect();
        // A sort stores a prefix of each row, not the tile's points.
        let direct: Vec<bool> = (0..k.stores.len())
            .map(|s| {
                !sorts
                    && k.stores[s].kind == StoreKind::Write
                    && elem_stores.contains(&s)
                    && store_runs[s].index == 1
                    && direct_f32(k, &level, &readers, k.stores[s].value)
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
            fused,
            level,
            runs,
            store_runs,
            reduce_needs,
            row_stores,
            elem_stores,
            scans,
            sorts,
            adds,
            columns,
            store_ranges,
        })
    }
}

/// How many instructions and stores read each instruction (once per
/// operand slot).
fn readers(k: &Kernel) -> Vec<usize> {
    let mut n = vec![0; k.insts.len()];
    let insts = k.insts.iter().flat_map(|n| n.inst.operands());
    for o in insts.chain(k.stores.iter().flat_map(|s| s.operands())) {
        n[o] += 1;
    }
    n
}

/// Whether instruction `v` is an `F32` unary op (`arith::unary_f32`) or
/// non-comparison binary op (`arith::binary_f32`) of `F32` operands,
/// computed in `F32`: one that can write its values anywhere.
fn f32_op(k: &Kernel, v: Val) -> bool {
    let f32 = |v: Val| k.insts[v].dtype == DType::F32;
    f32(v)
        && match k.insts[v].inst {
            Inst::Unary(op, a) => op != UnaryOp::Not && f32(a),
            Inst::Binary(op, a, b) => {
                !op.is_comparison()
                    && f32(a)
                    && f32(b)
                    && op.compute_dtype(DType::F32, DType::F32, DType::F32) == DType::F32
            }
            _ => false,
        }
}

/// Whether element-level instruction `v`, stored by one store, can be
/// computed straight into that store's `F32` output: an [`f32_op`] whose
/// value nothing else reads (no instruction, no other store), so that it
/// needs no vector of its own.
fn direct_f32(k: &Kernel, level: &[Level], readers: &[usize], v: Val) -> bool {
    let stored_to_f32 = k
        .stores
        .iter()
        .any(|s| s.value == v && k.outputs[s.output].dtype == DType::F32);
    level[v] == Level::Elem && f32_op(k, v) && readers[v] == 1 && stored_to_f32
}

/// The element-level instructions that `roots` need, in SSA order (not
/// the `fused` ones: their readers compute them, from their operands).
fn needs(k: &Kernel, level: &[Level], fused: &[bool], roots: &[Val]) -> Vec<Val> {
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
    (0..k.insts.len())
        .filter(|v| want[*v] && !fused[*v])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use crate::ir::{Arg, Node, Store};
    use crate::ops::{BinaryOp, ReduceOp};

    /// `exp(x - max) / sum` over rows of 8 stored as `out` (`F32` or a
    /// half), with `x - max` also stored when `keep_diff`.
    fn softmax(out: DType, keep_diff: bool) -> Kernel {
        let f = DType::F32;
        let index = Expr::var(0).scale(8).add(&Expr::var(1));
        let node = |inst, dtype| Node { inst, dtype };
        let mut insts = vec![
            node(
                Inst::Load {
                    input: 0,
                    index: index.clone(),
                    valid: Cond::always(),
                },
                f,
            ),
            node(Inst::Reduce(ReduceOp::Max, 0), f),
            node(Inst::Binary(BinaryOp::Sub, 0, 1), f),
            node(Inst::Unary(UnaryOp::Exp, 2), f),
            node(Inst::Reduce(ReduceOp::Sum, 3), f),
            node(Inst::Binary(BinaryOp::Div, 3, 4), f),
        ];
        if out != f {
            insts.push(node(Inst::Cast(5), out));
        }
        let arg = |dtype| Arg { dtype, len: 24 };
        let mut stores = vec![Store::write(0, index.clone(), insts.len() - 1)];
        let mut outputs = vec![arg(out)];
        if keep_diff {
            stores.push(Store::write(1, index, 2));
            outputs.push(arg(f));
        }
        Kernel {
            name: "multireduce_softmax".into(),
            kind: KernelKind::MultiReduce,
            ranges: [3, 8].as_slice().into(),
            n_kept: 1,
            inputs: vec![arg(f)],
            outputs,
            scalars: vec![],
            insts,
            stores,
        }
    }

    #[test]
    fn softmax_stores_its_quotient_directly_and_fuses_the_difference() {
        let p = Plan::new(&softmax(DType::F32, false)).expect("covered");
        assert_eq!(p.direct, [true]);
        assert_eq!(p.fused, [false, false, true, false, false, false]);
        // The store needs the `exp` (kept from the sum's pass) and what
        // that reads, not the quotient it computes itself nor the
        // difference inside the `exp`.
        assert_eq!(p.store_needs, [0, 3]);
        assert_eq!(p.reduce_needs[4], [0, 3]);
    }

    #[test]
    fn values_read_twice_or_stored_converted_take_vectors() {
        // A half output: the cast goes through a vector (the store converts).
        let p = Plan::new(&softmax(DType::BF16, false)).expect("covered");
        assert_eq!(p.direct, [false]);
        assert!(p.fused[2]);
        // `x - max` stored as well: computed once, into its vector.
        let p = Plan::new(&softmax(DType::F32, true)).expect("covered");
        assert_eq!(p.direct, [true, false]);
        assert!(!p.fused[2]);
        assert!(p.store_needs.contains(&2));
    }
}
