//! Scans along a strided axis (axis 0 of a matrix, the middle axis of
//! `[64, 4096, 64]`) in column tiles: a CTA per tile of
//! `COL_THREADS * lanes` columns (neighbouring rows of the kernel: values
//! of the last kept variable) by `warps * chunks` positions of the scanned
//! axis ([`super::launch::column_tiles`]). A warp spans the columns, so
//! each of its loads and stores at one position is `32 * lanes`
//! neighbouring elements where that variable is contiguous (vector
//! accesses of `lanes`); its thread scans `chunks` consecutive positions
//! of its `lanes` columns sequentially (all loads in flight first). Each
//! warp then writes its threads' totals to shared memory, and every
//! thread combines the totals of the warps before its own: the tile's
//! elements need nothing else but the tile's exclusive prefix per column.
//! With one tile along the axis that prefix is the identity; with several
//! the tiles of a column block chain by decoupled look-back, per column
//! ([`super::col_lookback`]).

use super::builder::{ins, Builder, Reg, RegKind};
use super::col_lookback::{Chain, Window};
use super::elementwise::used_vars;
use super::eval::{needs, Cx, Lanes, Point, Vals};
use super::expr;
use super::launch::{column_tiles, Scan, COL_THREADS};
use super::lookback::take_tile;
use super::ops::{self, Value};
use super::scan_state::{scan_insts, select, slot_bytes, ScanInst, State};
use crate::ir::Val;
use crate::DType;

/// A state of scan `si` from shared memory: register `j` at `addr +
/// offs[j]`.
fn load_shared(b: &mut Builder, si: &ScanInst, addr: Reg, offs: &[usize]) -> State {
    let regs: Vec<Reg> = si
        .identity(b)
        .regs()
        .iter()
        .zip(offs)
        .map(|(r, off)| {
            let bt = r.kind.bit_ty();
            let x = b.reg(r.kind);
            ins!(b, "ld.shared.{bt} {x}, [{addr}+{off}]");
            x
        })
        .collect();
    State::from_regs(&regs)
}

/// Emits the body of a column-tile scan kernel; returns the static shared
/// memory it declares as `smem` (bytes).
pub fn emit(b: &mut Builder, cx: &Cx, plan: &Scan, smem: &str) -> u32 {
    let k = cx.k;
    let nk = k.n_kept;
    let t = column_tiles(k).expect("a column-tile plan fits its kernel");
    let cx = &cx.with_lane_var(nk - 1);
    let w = cx.width;
    let n = w.bits();
    let lanes = plan.lanes;
    let chunks = plan.chunks as usize;
    let warps = plan.block / plan.cols;
    let width = t.width() as u32;
    let scans = scan_insts(k);
    let sizes = slot_bytes(&scans);
    let nslots = sizes.len() as u32;
    // Each scan's first slot.
    let first_slot: Vec<usize> = scans
        .iter()
        .scan(0, |acc, s| {
            let first = *acc;
            *acc += 1 + s.op.is_index() as usize;
            Some(first)
        })
        .collect();
    // Shared memory, 8-byte entries: the warps' totals [warp][slot][column],
    // the tile's exclusive prefix [slot][column], the look-back window's
    // states [warp][slot][column] and `u32` inclusive marks [warp][lane],
    // the tile id.
    let warp_bytes = nslots * width * 8;
    let prefix_off = warps * warp_bytes;
    let window_off = prefix_off + warp_bytes;
    let incl_off = window_off + warps * warp_bytes;
    let id_off = incl_off + warps * COL_THREADS * 4;
    let shared_bytes = id_off + 8;

    let tid = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {tid}, %tid.x");
    let (lane, warp) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "and.b32 {lane}, {tid}, 31");
    ins!(b, "shr.u32 {warp}, {tid}, 5");
    let base = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {base}, {smem}");
    let chained = plan.tiles > 1;
    let id = if chained {
        take_tile(b, cx, tid, base, id_off)
    } else {
        let r = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {r}, %ctaid.x");
        r
    };
    // Chunk-major tile ids: `index` along the axis, `block` of columns.
    let (index, block) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "div.u32 {index}, {id}, {}", t.blocks);
    ins!(b, "rem.u32 {block}, {id}, {}", t.blocks);
    // The thread's first column and first position along the axis.
    let first_col = b.reg(RegKind::B32);
    ins!(b, "mul.lo.u32 {first_col}, {lane}, {lanes}");
    let (col, pos0) = (w.reg(b), w.reg(b));
    let first_pos = b.reg(RegKind::B32);
    ins!(b, "mul.lo.u32 {first_pos}, {warp}, {chunks}");
    if w.wide {
        let (c, p) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
        ins!(b, "cvt.u64.u32 {c}, {first_col}");
        ins!(b, "cvt.u64.u32 {p}, {first_pos}");
        ins!(b, "mad.wide.u32 {col}, {block}, {width}, {c}");
        ins!(b, "mad.wide.u32 {pos0}, {index}, {}, {p}", t.length());
    } else {
        ins!(b, "mad.lo.s32 {col}, {block}, {width}, {first_col}");
        ins!(b, "mad.lo.s32 {pos0}, {index}, {}, {first_pos}", t.length());
    }
    let col_ok = b.reg(RegKind::Pred);
    ins!(b, "setp.lt.s{n} {col_ok}, {col}, {}", k.rows());
    let used = used_vars(cx);
    let mut kept = expr::unravel(b, col, &k.ranges[..nk], &used[..nk], w);
    kept.truncate(nk);

    let all = vec![true; k.insts.len()];
    let srcs: Vec<Val> = scans.iter().map(|s| s.src).collect();
    let src_todo = needs(k, &all, &srcs);
    let roots: Vec<Val> = k.stores.iter().map(|s| s.value).collect();
    let store_todo = needs(k, &all, &roots);

    // Every position's loads first (in flight together).
    let mut parts: Vec<(Point, Reg, Vals)> = (0..chunks)
        .map(|j| {
            let pos = w.reg(b);
            ins!(b, "add.s{n} {pos}, {pos0}, {j}");
            let valid = b.reg(RegKind::Pred);
            ins!(b, "setp.lt.s{n} {valid}, {pos}, {}", k.row_len());
            ins!(b, "and.pred {valid}, {valid}, {col_ok}");
            let pos32 = if w.wide {
                let r = b.reg(RegKind::B32);
                ins!(b, "cvt.u32.u64 {r}, {pos}");
                r
            } else {
                pos
            };
            let mut vars = kept.clone();
            vars.push(Some(pos));
            let point = Point {
                vars,
                lanes,
                pred: Some(valid),
            };
            let mut vals: Vals = vec![None; k.insts.len()];
            cx.eval_loads(b, &point, &src_todo, &mut vals);
            (point, pos32, vals)
        })
        .collect();
    // Per position, scan and column: the thread's running state.
    let mut local: Vec<Vec<Vec<State>>> = Vec::new();
    for (point, pos32, vals) in &mut parts {
        cx.eval(b, point, &src_todo, vals);
        let states = scans
            .iter()
            .enumerate()
            .map(|(s, si)| {
                let xs = vals[si.src].clone().expect("scan operand evaluated");
                (0..lanes)
                    .map(|l| {
                        let v = ops::convert(b, xs[l.min(xs.len() - 1)], si.dt).reg;
                        let x = State {
                            v,
                            i: si.op.is_index().then_some(*pos32),
                        };
                        match local.last() {
                            Some(prev) => si.combine(b, prev[s][l], x),
                            None => x,
                        }
                    })
                    .collect()
            })
            .collect();
        local.push(states);
    }
    let totals = local.last().expect("chunks >= 1");

    // The warps' totals to shared memory; a thread's entries start at
    // `mine` in its warp's area (`cols` offsets entries of its columns).
    let cols = b.reg(RegKind::B32);
    ins!(b, "mad.lo.u32 {cols}, {first_col}, 8, {base}");
    let mine = b.reg(RegKind::B32);
    ins!(b, "mad.lo.u32 {mine}, {warp}, {warp_bytes}, {cols}");
    let entry = |s: usize, j: usize, l: usize| (first_slot[s] + j) * width as usize * 8 + l * 8;
    for (s, per_col) in totals.iter().enumerate() {
        for (l, st) in per_col.iter().enumerate() {
            for (j, r) in st.regs().iter().enumerate() {
                let bt = r.kind.bit_ty();
                ins!(b, "st.shared.{bt} [{mine}+{}], {r}", entry(s, j, l));
            }
        }
    }
    ins!(b, "bar.sync 0");
    // The totals of the warps before this one (per scan and column), and
    // in warp 0 the tile's aggregate: every warp's.
    let offs = |s: usize, l: usize, area: u32| -> Vec<usize> {
        (0..1 + scans[s].op.is_index() as usize)
            .map(|j| area as usize + entry(s, j, l))
            .collect()
    };
    let mut before: Vec<Vec<State>> = Vec::new();
    for (s, si) in scans.iter().enumerate() {
        let per_col = (0..lanes)
            .map(|l| {
                let mut pre = si.identity(b);
                for y in 0..warps - 1 {
                    let v = load_shared(b, si, cols, &offs(s, l, y * warp_bytes));
                    let with = si.combine(b, pre, v);
                    let earlier = b.reg(RegKind::Pred);
                    ins!(b, "setp.gt.u32 {earlier}, {warp}, {y}");
                    pre = select(b, earlier, with, pre);
                }
                pre
            })
            .collect();
        before.push(per_col);
    }
    // The tile's exclusive prefix per scan and column (in warp 0): the
    // identity for a tile at the start of the axis, else from the chain.
    let prefix: Vec<Vec<State>> = scans
        .iter()
        .map(|si| (0..lanes).map(|_| si.identity(b)).collect())
        .collect();
    let not_first_warp = b.reg(RegKind::Pred);
    ins!(b, "setp.ne.u32 {not_first_warp}, {warp}, 0");
    if chained {
        let chain = Chain {
            cx,
            scans: &scans,
            first_slot: &first_slot,
            sizes: &sizes,
            tiling: &t,
            lanes,
            warps,
        };
        // Warp 0: the tile's aggregate (every warp's totals), published.
        let published = b.label();
        ins!(b, "@{not_first_warp} bra {published}");
        let aggregate: Vec<Vec<State>> = scans
            .iter()
            .enumerate()
            .map(|(s, si)| {
                (0..lanes)
                    .map(|l| {
                        let mut acc = load_shared(b, si, cols, &offs(s, l, 0));
                        for y in 1..warps {
                            let v = load_shared(b, si, cols, &offs(s, l, y * warp_bytes));
                            acc = si.combine(b, acc, v);
                        }
                        acc
                    })
                    .collect()
            })
            .collect();
        chain.publish(b, id, index, lane, &aggregate);
        b.place(&published);
        // Every warp: the look-back, into warp 0's `prefix`.
        let window = Window {
            states: mine,
            states_read: cols,
            flags: base,
            states_off: window_off,
            flags_off: incl_off,
            warp_bytes,
        };
        chain.look_back(b, &window, index, block, lane, warp, &prefix);
        let done = b.label();
        ins!(b, "@{not_first_warp} bra {done}");
        chain.publish_inclusive(b, id, index, lane, &prefix, &aggregate);
        b.place(&done);
    }
    let after = b.label();
    ins!(b, "@{not_first_warp} bra {after}");
    for (s, per_col) in prefix.iter().enumerate() {
        for (l, st) in per_col.iter().enumerate() {
            for (j, r) in st.regs().iter().enumerate() {
                let bt = r.kind.bit_ty();
                ins!(
                    b,
                    "st.shared.{bt} [{cols}+{}], {r}",
                    prefix_off as usize + entry(s, j, l)
                );
            }
        }
    }
    b.place(&after);
    ins!(b, "bar.sync 0");

    // Each element: the tile's prefix, the earlier warps' totals, the
    // thread's running state.
    let start: Vec<Vec<State>> = scans
        .iter()
        .enumerate()
        .map(|(s, si)| {
            (0..lanes)
                .map(|l| {
                    let p = load_shared(b, si, cols, &offs(s, l, prefix_off));
                    si.combine(b, p, before[s][l])
                })
                .collect()
        })
        .collect();
    for ((point, _, vals), states) in parts.iter_mut().zip(&local) {
        for (s, si) in scans.iter().enumerate() {
            let out: Lanes = (0..lanes)
                .map(|l| {
                    let y = si.combine(b, start[s][l], states[s][l]);
                    let v = match y.i {
                        Some(i) => Value {
                            reg: i,
                            dtype: DType::I32,
                        },
                        None => Value {
                            reg: y.v,
                            dtype: si.dt,
                        },
                    };
                    ops::convert(b, v, k.insts[si.val].dtype)
                })
                .collect();
            vals[si.val] = Some(out);
        }
        cx.eval(b, point, &store_todo, vals);
        for s in &k.stores {
            cx.store(b, point, s, vals);
        }
    }
    shared_bytes
}
