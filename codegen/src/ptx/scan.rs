//! Scan kernels: a team of threads per row (see [`Scan`]) walks the row in
//! chunks of `tpr * lanes` elements. Per chunk each thread scans its
//! `lanes` consecutive elements sequentially; a warp scans its threads'
//! totals with `shfl.sync.up` (Hillis-Steele, 5 steps); a CTA team writes
//! each warp's total to shared memory and every warp scans those totals
//! again with shuffles; the running value carried from earlier chunks, the
//! earlier warps' and the earlier lanes' totals then prefix each element.
//! Every combine takes the earlier operand first, so the index ops'
//! ordered rule (ties go to the later position) holds.
//!
//! Few long rows instead take the single-pass scan with decoupled
//! look-back ([`super::lookback`], chosen by [`super::launch::lookback`]):
//! each CTA scans one tile of a few such chunks at once (their loads in
//! flight together, one `bar.sync` for all), the first chunk's carry
//! being the tile's exclusive prefix from its predecessors.

use super::builder::{ins, Builder, Reg, RegKind};
use super::col_lookback;
use super::elementwise::used_vars;
use super::eval::{needs, Cx, Lanes, Point, Vals};
use super::expr;
use super::launch::Scan;
use super::lookback;
use super::ops::{self, Value};
use super::scan_cols;
use super::scan_state::{
    scan_insts, select, shuffle, slot_bytes, state_slots, warp_scan, ScanInst, State,
};
use crate::ir::{Kernel, Val};
use crate::DType;

/// One chunk of a team's elements: the point group of the thread's
/// `lanes` elements, the values evaluated there, per scan the thread's
/// running states over its lanes and its warp's inclusive scan of their
/// totals.
struct Chunk {
    point: Point,
    pos32: Reg,
    vals: Vals,
    local: Vec<Vec<State>>,
    incl: Vec<State>,
}

/// Emits the body of a scan kernel; returns the static shared memory it
/// declares as `smem` (bytes).
pub fn emit(b: &mut Builder, cx: &Cx, plan: &Scan, smem: &str) -> u32 {
    if plan.cols > 0 {
        return scan_cols::emit(b, cx, plan, smem);
    }
    let k = cx.k;
    let w = cx.width;
    let n = w.bits();
    let nk = k.n_kept;
    let lanes = plan.lanes;
    let scans = scan_insts(k);
    let slots: Vec<usize> = scans
        .iter()
        .scan(0, |acc, s| {
            let first = *acc;
            *acc += 1 + s.op.is_index() as usize;
            Some(first)
        })
        .collect();
    let nslots = state_slots(&scans) as u32;
    let warps = plan.tpr / 32;
    let cta = plan.tpr > 32;
    let tiled = plan.tiles > 0;
    // A look-back tile is `chunks` chunks scanned together; the row walk
    // scans one chunk per step.
    let chunks = if tiled { plan.chunks as usize } else { 1 };
    let chunk_len = plan.tpr as usize * lanes;
    // Every shared entry takes 8 bytes (a 64-bit state register fits):
    // the warp totals (an area per chunk of a tile, or two areas that the
    // row walk's chunks alternate), then for a look-back scan the tile id
    // and the tile's exclusive prefix.
    let area = nslots * warps * 8;
    let areas = if tiled { chunks as u32 } else { 2 };
    let totals_bytes = if cta { areas * area } else { 0 };
    let shared_bytes = totals_bytes + if tiled { 8 + nslots * 8 } else { 0 };

    // Team geometry: `team_lane` within the row's team, `lane` within the
    // warp, `warp` within the team.
    let tid = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {tid}, %tid.x");
    let (ctaid, nctaid) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "mov.u32 {ctaid}, %ctaid.x");
    ins!(b, "mov.u32 {nctaid}, %nctaid.x");
    let teams = plan.block / plan.tpr;
    let (team_lane, team) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "rem.u32 {team_lane}, {tid}, {}", plan.tpr);
    ins!(b, "div.u32 {team}, {tid}, {}", plan.tpr);
    let (lane, warp) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "and.b32 {lane}, {team_lane}, 31");
    ins!(b, "shr.u32 {warp}, {team_lane}, 5");
    let to_w = |b: &mut Builder, r: Reg| -> Reg {
        if w.wide {
            let x = b.reg(RegKind::B64);
            ins!(b, "cvt.u64.u32 {x}, {r}");
            x
        } else {
            r
        }
    };
    let base = b.reg(RegKind::B32);
    if cta {
        ins!(b, "mov.u32 {base}, {smem}");
    }
    let (row, nteams) = (w.reg(b), w.reg(b));
    let c = w.reg(b);
    let tile = tiled.then(|| {
        // One tile per CTA, in the order the CTAs start (see `lookback`).
        let t = lookback::take_tile(b, cx, tid, base, totals_bytes);
        let (r, i) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "div.u32 {r}, {t}, {}", plan.tiles);
        ins!(b, "rem.u32 {i}, {t}, {}", plan.tiles);
        let rw = to_w(b, r);
        ins!(b, "mov.b{n} {row}, {rw}");
        let tile_len = chunk_len * chunks;
        if w.wide {
            ins!(b, "mul.wide.u32 {c}, {i}, {tile_len}");
        } else {
            ins!(b, "mul.lo.s32 {c}, {i}, {tile_len}");
        }
        lookback::Tile { id: t, index: i }
    });
    if !tiled {
        let team_w = to_w(b, team);
        if w.wide {
            ins!(b, "mul.wide.u32 {row}, {ctaid}, {teams}");
            ins!(b, "add.s64 {row}, {row}, {team_w}");
            ins!(b, "mul.wide.u32 {nteams}, {nctaid}, {teams}");
        } else {
            ins!(b, "mad.lo.s32 {row}, {ctaid}, {teams}, {team_w}");
            ins!(b, "mul.lo.s32 {nteams}, {nctaid}, {teams}");
        }
    }
    let lane_w = to_w(b, team_lane);
    let first = w.reg(b);
    ins!(b, "mul.lo.s{n} {first}, {lane_w}, {lanes}");
    let parity = b.mov(RegKind::B32, "u32", 0);

    let rows = k.rows() as i64;
    let row_len = k.row_len() as i64;
    let used = used_vars(cx);
    let all = vec![true; k.insts.len()];
    let srcs: Vec<Val> = scans.iter().map(|s| s.src).collect();
    let src_todo = needs(k, &all, &srcs);
    let roots: Vec<Val> = k.stores.iter().map(|s| s.value).collect();
    let store_todo = needs(k, &all, &roots);

    // The row walk loops over rows and, within a row, over chunks; a
    // look-back CTA scans its one tile.
    let (row_top, row_end) = (b.label(), b.label());
    let (chunk_top, chunk_end) = (b.label(), b.label());
    if !tiled {
        b.place(&row_top);
        let done = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.s{n} {done}, {row}, {rows}");
        ins!(b, "@{done} bra {row_end}");
    }
    let mut kept = expr::unravel(b, row, &k.ranges[..nk], &used[..nk], w);
    kept.truncate(nk);
    let carry: Vec<State> = scans.iter().map(|s| s.identity(b)).collect();
    if !tiled {
        ins!(b, "mov.b{n} {c}, 0");
        b.place(&chunk_top);
        let chunk_done = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.s{n} {chunk_done}, {c}, {row_len}");
        ins!(b, "@{chunk_done} bra {chunk_end}");
    }

    // Every chunk's loads first (they are in flight together), then its
    // operands, thread-local scans and warp scans.
    let mut parts: Vec<Chunk> = (0..chunks)
        .map(|ch| {
            // The thread's elements: `lanes` consecutive positions from
            // `pos`.
            let pos = w.reg(b);
            ins!(b, "add.s{n} {pos}, {c}, {first}");
            if ch > 0 {
                ins!(b, "add.s{n} {pos}, {pos}, {}", ch * chunk_len);
            }
            let valid = b.reg(RegKind::Pred);
            ins!(b, "setp.lt.s{n} {valid}, {pos}, {row_len}");
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
            Chunk {
                point,
                pos32,
                vals,
                local: Vec::new(),
                incl: Vec::new(),
            }
        })
        .collect();
    for part in &mut parts {
        cx.eval(b, &part.point, &src_todo, &mut part.vals);
        for si in &scans {
            let xs = part.vals[si.src].clone().expect("scan operand evaluated");
            let mut run: Vec<State> = Vec::new();
            for l in 0..lanes {
                let v = ops::convert(b, xs[l.min(xs.len() - 1)], si.dt).reg;
                let i = si.op.is_index().then(|| {
                    let r = b.reg(RegKind::B32);
                    ins!(b, "add.s32 {r}, {}, {l}", part.pos32);
                    r
                });
                let x = State { v, i };
                let next = match run.last() {
                    Some(prev) => si.combine(b, *prev, x),
                    None => x,
                };
                run.push(next);
            }
            let t = *run.last().expect("lanes >= 1");
            part.local.push(run);
            part.incl.push(if plan.tpr >= 32 {
                warp_scan(b, si, lane, t, 32)
            } else {
                t
            });
        }
    }
    // Each chunk's warp totals area: a tile's chunks have one each, the
    // row walk's chunks alternate two (one `bar.sync` per chunk).
    let areas: Vec<Reg> = (0..chunks)
        .map(|ch| {
            let wa = b.reg(RegKind::B32);
            if !cta {
                return wa;
            }
            if tiled {
                ins!(b, "add.s32 {wa}, {base}, {}", ch as u32 * area);
            } else {
                ins!(b, "mad.lo.s32 {wa}, {parity}, {area}, {base}");
            }
            wa
        })
        .collect();
    if cta {
        // Each warp's totals, by its last lane.
        let last = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {last}, {lane}, 31");
        let my = b.reg(RegKind::B32);
        ins!(b, "shl.b32 {my}, {warp}, 3");
        for (part, wa) in parts.iter().zip(&areas) {
            let at = b.reg(RegKind::B32);
            ins!(b, "add.s32 {at}, {my}, {wa}");
            for (t, slot) in part.incl.iter().zip(&slots) {
                for (j, r) in t.regs().iter().enumerate() {
                    let off = (*slot + j) as u32 * warps * 8;
                    ins!(b, "@{last} st.shared.{} [{at}+{off}], {r}", r.kind.bit_ty());
                }
            }
        }
        ins!(b, "bar.sync 0");
    }
    // Per chunk and scan: the chunk's total, and in a CTA team the
    // earlier warps' totals (`None` for the first warp).
    let mut totals: Vec<Vec<State>> = Vec::new();
    let mut befores: Vec<Vec<Option<(Reg, State)>>> = Vec::new();
    for (part, wa) in parts.iter().zip(&areas) {
        let mut ts = Vec::new();
        let mut bs = Vec::new();
        for (s, si) in scans.iter().enumerate() {
            let (before, total) = team_total(b, si, plan, part.incl[s], lane, warp, *wa, slots[s]);
            ts.push(total);
            bs.push(before);
        }
        totals.push(ts);
        befores.push(bs);
    }
    // The running value before each chunk: from the look-back (a tile's
    // first chunk) or the row walk's carry, then each chunk's total.
    let mut carries: Vec<Vec<State>> = Vec::new();
    carries.push(match &tile {
        Some(tile) => {
            let aggregate: Vec<State> = scans
                .iter()
                .enumerate()
                .map(|(s, si)| {
                    (1..chunks).fold(totals[0][s], |acc, ch| si.combine(b, acc, totals[ch][s]))
                })
                .collect();
            let sizes = slot_bytes(&scans);
            let lb = lookback::Lookback {
                scans: &scans,
                slots: &slots,
                sizes: &sizes,
                shared: (base, totals_bytes),
            };
            lb.emit(b, cx, tile, tid, lane, warp, &aggregate)
        }
        None => carry.clone(),
    });
    for ch in 1..chunks {
        let next = scans
            .iter()
            .enumerate()
            .map(|(s, si)| si.combine(b, carries[ch - 1][s], totals[ch - 1][s]))
            .collect();
        carries.push(next);
    }
    for (ch, part) in parts.iter_mut().enumerate() {
        for (s, si) in scans.iter().enumerate() {
            let cin = carries[ch][s];
            let mut pre = match befores[ch][s] {
                Some((later, before)) => {
                    let with = si.combine(b, cin, before);
                    select(b, later, with, cin)
                }
                None => cin,
            };
            if plan.tpr >= 32 {
                // The earlier lanes of the warp.
                let ex = shuffle(b, "up", part.incl[s], "1");
                let with = si.combine(b, pre, ex);
                let later = b.reg(RegKind::Pred);
                ins!(b, "setp.gt.u32 {later}, {lane}, 0");
                pre = select(b, later, with, pre);
            }
            let out: Lanes = part.local[s]
                .iter()
                .map(|x| {
                    let y = si.combine(b, pre, *x);
                    let dt = k.insts[si.val].dtype;
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
                    ops::convert(b, v, dt)
                })
                .collect();
            part.vals[si.val] = Some(out);
        }
        cx.eval(b, &part.point, &store_todo, &mut part.vals);
        for s in &k.stores {
            cx.store(b, &part.point, s, &part.vals);
        }
    }
    if !tiled {
        for (s, si) in scans.iter().enumerate() {
            let next = si.combine(b, carry[s], totals[0][s]);
            for (dst, src) in carry[s].regs().iter().zip(next.regs()) {
                ins!(b, "mov.{} {dst}, {src}", dst.kind.bit_ty());
            }
        }
        ins!(b, "xor.b32 {parity}, {parity}, 1");
        ins!(b, "add.s{n} {c}, {c}, {chunk_len}");
        ins!(b, "bra {chunk_top}");
        b.place(&chunk_end);
        ins!(b, "add.s{n} {row}, {row}, {nteams}");
        ins!(b, "bra {row_top}");
        b.place(&row_end);
    }
    shared_bytes
}

/// A chunk's total over the team from the warp's inclusive scan `t` of
/// its threads' totals, and in a CTA team (whose warp totals are in shared
/// memory at `wa`, scan slot `slot`) the combined totals of the earlier
/// warps with the predicate of warps that have some.
#[allow(clippy::too_many_arguments)]
fn team_total(
    b: &mut Builder,
    si: &ScanInst,
    plan: &Scan,
    t: State,
    lane: Reg,
    warp: Reg,
    wa: Reg,
    slot: usize,
) -> (Option<(Reg, State)>, State) {
    let warps = plan.tpr / 32;
    if plan.tpr == 1 {
        return (None, t);
    }
    if plan.tpr <= 32 {
        return (None, shuffle(b, "idx", t, "31"));
    }
    // Every warp scans the warp totals: lane `j < warps` holds warp `j`'s.
    let has = b.reg(RegKind::Pred);
    ins!(b, "setp.lt.u32 {has}, {lane}, {warps}");
    let addr = b.reg(RegKind::B32);
    ins!(b, "shl.b32 {addr}, {lane}, 3");
    ins!(b, "add.s32 {addr}, {addr}, {wa}");
    let id = si.identity(b);
    let regs: Vec<Reg> = id
        .regs()
        .iter()
        .enumerate()
        .map(|(j, r)| {
            let x = b.reg(r.kind);
            let bt = r.kind.bit_ty();
            ins!(b, "mov.{bt} {x}, {r}");
            let off = (slot + j) as u32 * warps * 8;
            ins!(b, "@{has} ld.shared.{bt} {x}, [{addr}+{off}]");
            x
        })
        .collect();
    let totals = warp_scan(b, si, lane, State::from_regs(&regs), warps);
    let total = shuffle(b, "idx", totals, &(warps - 1).to_string());
    let prev = b.reg(RegKind::B32);
    ins!(b, "max.u32 {prev}, {warp}, 1");
    ins!(b, "sub.u32 {prev}, {prev}, 1");
    let before = shuffle(b, "idx", totals, &prev.to_string());
    let later = b.reg(RegKind::Pred);
    ins!(b, "setp.gt.u32 {later}, {warp}, 0");
    (Some((later, before)), total)
}

/// Whether scan kernel `k` has its look-back status buffer: the output no
/// store writes ([`Kernel::zeroed_output`]), `I64` and at least
/// [`status_len`] long.
pub fn has_status(k: &Kernel) -> bool {
    k.zeroed_output().is_some_and(|o| {
        let a = &k.outputs[o];
        a.dtype == DType::I64 && a.len >= status_len(k) && status_len(k) > 0
    })
}

/// `I64` words of the status buffer a look-back scan of `k` needs (0 when
/// `k` is none), and how many of them, from the start, must be zero at
/// the launch: a look-back over few long rows ([`super::launch::lookback`],
/// the tile counter, then one record per tile, see [`lookback`], all
/// zeroed) or chained column tiles ([`super::launch::column_tiles`], see
/// [`col_lookback`]: the counter and the flags zeroed, not the records).
fn status_layout(k: &Kernel) -> (usize, usize) {
    if let Some(t) = super::launch::lookback(k) {
        let record = lookback::record_words(&slot_bytes(&scan_insts(k)));
        let len = k
            .rows()
            .saturating_mul(t.tiles as usize)
            .saturating_mul(record)
            .saturating_add(1);
        return (len, len);
    }
    match super::launch::column_tiles(k).filter(|t| t.tiles > 1) {
        Some(t) => {
            let (zeroed, len) = col_lookback::status_words(k, &t);
            (len, zeroed)
        }
        None => (0, 0),
    }
}

/// Words (`I64`) of the status buffer a look-back scan of `k` needs, 0
/// when `k` is not one.
pub fn status_len(k: &Kernel) -> usize {
    status_layout(k).0
}

/// Words (`I64`) at the start of `k`'s status buffer that must hold zeros
/// when the kernel starts (runtimes zero them before every launch).
pub fn status_zeroed_len(k: &Kernel) -> usize {
    status_layout(k).1
}
