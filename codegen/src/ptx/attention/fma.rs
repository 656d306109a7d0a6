//! The FMA attention kernel: plain arithmetic in the accumulation dtype
//! (`f32`, `f64`), exact for `f32` and `f64` inputs; half inputs take the
//! tensor-core kernel (`mma.rs`) unless `SMELT_ATTENTION_MMA=0`.
//!
//! One CTA per (batch, tile of `bm` query rows), [`TPR`] threads per row:
//! 1. the `q` tile (`bm x d`) is evaluated (its part of the kernel: loads
//!    through views, casts) into shared memory;
//! 2. for each tile of `bn` keys (under a causal mask only up to the
//!    CTA's last row's last visible key, `key_end`), the `k` (`bn x d`) and `v` (`bn x dv`)
//!    tiles are evaluated into shared memory (zero past the last key);
//!    thread `c` of a row computes the scores of keys `c, c + 8, ..`
//!    (`d` FMAs each) and the logit part on them (scale, masks: loads at
//!    `(i, j)`), a key past the last one counting as `-inf`;
//! 3. online softmax per row: the tile's maximum (shuffles within the
//!    row's 8 threads) updates the running maximum `m`; with `m' = m`
//!    or 0 where `m = -inf` (a row masked so far adds nothing instead of
//!    NaN), `p = exp(l - m')`, the running sum `s = s * exp(m_old - m') +
//!    sum(p)` and each accumulator `o = o * exp(m_old - m') + sum_j p_j
//!    v_j` (the `p` row through shared memory, `o` in registers: thread
//!    `c` holds columns `c, c + 8, ..`);
//! 4. at the end `o / s` (NaN for a row with no finite logit: `0 / 0`, as
//!    the unfused graph gives) goes through the epilogue part to the
//!    stores; under split-KV (`split.rs`) the CTA walks its split's keys
//!    only and stores `m`, `s` and `o` to the scratch buffer instead, for
//!    the combine entry.
//!
//! Every load of a part runs under the point's bounds (rows past the last
//! query or key are predicated off), and stores only for existing rows and
//! columns.

use super::split::{self, Split};
use super::stage::{Stager, Tile};
use super::{
    acc_imm, acc_ty, epilogue_part, key_end, logit, logit_part, part, store, Coords, LogitInsts,
};
use crate::attention::Attention;
use crate::ir::Kernel;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::eval::Cx;
use crate::ptx::module::{entry, entry_name, Launch, PtxKernel};
use crate::ptx::ops::{self, Value};
use crate::ptx::target::Target;
use crate::{BinaryOp, DType, ReduceOp, UnaryOp};

/// Threads per query row (a power of two dividing a warp).
pub const TPR: u32 = 8;

/// Static shared memory a kernel may declare.
const SHARED_LIMIT: usize = 48 * 1024;

/// Tile sizes of a kernel: query rows and keys per tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiles {
    /// Query rows per CTA.
    pub bm: u32,
    /// Keys per tile (a multiple of [`TPR`]).
    pub bn: u32,
}

impl Tiles {
    /// Bytes of shared memory: the `q`, `k` tiles (rows padded by one
    /// element against bank conflicts), the `v` tile and the `p` rows.
    fn shared(self, d: usize, dv: usize, size: usize) -> usize {
        let (bm, bn) = (self.bm as usize, self.bn as usize);
        size * (bm * (d + 1) + bn * (d + 1) + bn * dv + bm * (bn + 1))
    }
}

/// The largest tiles whose shared memory fits, for head dims `d`, `dv`
/// and an accumulation type of `size` bytes.
pub fn tiles(d: usize, dv: usize, size: usize) -> Option<Tiles> {
    [
        (32, 32),
        (16, 32),
        (16, 16),
        (8, 16),
        (8, 8),
        (4, 8),
        (2, 8),
        (1, 8),
    ]
    .into_iter()
    .map(|(bm, bn)| Tiles { bm, bn })
    .find(|t| t.shared(d, dv, size) <= SHARED_LIMIT)
}

/// Lowers the attention kernel `k` (parts `a`) with FMAs, its keys split
/// as [`split::plan`] says for `splits`.
///
/// # Errors
/// Head dims too large for its tiles, or too many CTAs.
pub fn emit(
    k: &Kernel,
    target: &Target,
    a: &Attention,
    splits: Option<usize>,
) -> Result<PtxKernel, String> {
    let size = a.acc.size();
    let r = |v: usize| k.ranges[v] as usize;
    let (lq, dv, d) = (r(a.vars.i), r(a.vars.e), r(a.vars.d));
    let t = tiles(d, dv, size)
        .ok_or_else(|| format!("attention kernel {}: head dims {d}, {dv} too large", k.name))?;
    let heads: u64 = a.vars.batch.clone().map(|v| k.ranges[v] as u64).product();
    let grid = u32::try_from(heads * lq.div_ceil(t.bm as usize) as u64)
        .map_err(|_| format!("attention kernel {}: too many CTAs", k.name))?;
    let shared = t.shared(d, dv, size) as u32;
    let sp = split::plan(k, a, target, (t.bm, t.bn, shared), splits);
    let name = entry_name(k);
    let threads = t.bm * TPR;
    let (text, shared) = entry(k, target, &name, threads, |b, cx, smem| {
        Emitter::new(cx, a, t, smem, sp).body(b);
        (shared, 16)
    });
    let launch = Launch {
        entry: name,
        grid: (grid.max(1), 1, 1),
        block: (threads, 1, 1),
        shared_bytes: shared,
    };
    split::kernel(k, target, a, sp, text, launch)
}

/// What one kernel's body needs.
struct Emitter<'a> {
    cx: &'a Cx<'a>,
    a: &'a Attention,
    t: Tiles,
    smem: &'a str,
    /// The keys' split among CTAs.
    sp: Split,
    acc: DType,
    /// `f32` or `f64`.
    ty: &'static str,
    kind: RegKind,
    size: u32,
    lq: u32,
    dv: u32,
    lk: u32,
    d: u32,
    /// Byte offsets of the tiles in shared memory.
    k_off: u32,
    v_off: u32,
    p_off: u32,
}

/// A thread's position: its row of the tile and lane within the row, the
/// query row `i`, the head and its batch variables.
struct Thread {
    tid: Reg,
    head: Reg,
    r: Reg,
    c: Reg,
    i: Reg,
    row_ok: Reg,
    base: Reg,
    coords: Coords,
}

impl<'a> Emitter<'a> {
    fn new(cx: &'a Cx<'a>, a: &'a Attention, t: Tiles, smem: &'a str, sp: Split) -> Self {
        let k = cx.k;
        let r = |v: usize| k.ranges[v] as u32;
        let (lq, dv, lk, d) = (r(a.vars.i), r(a.vars.e), r(a.vars.j), r(a.vars.d));
        let size = a.acc.size() as u32;
        let k_off = size * t.bm * (d + 1);
        let v_off = k_off + size * t.bn * (d + 1);
        let p_off = v_off + size * t.bn * dv;
        let (ty, kind) = acc_ty(a);
        Emitter {
            cx,
            a,
            t,
            smem,
            sp,
            acc: a.acc,
            ty,
            kind,
            size,
            lq,
            dv,
            lk,
            d,
            k_off,
            v_off,
            p_off,
        }
    }

    /// An immediate of the accumulation type.
    fn imm(&self, v: f64) -> String {
        acc_imm(self.a, v)
    }

    fn constant(&self, b: &mut Builder, v: f64) -> Reg {
        b.mov(self.kind, self.ty, self.imm(v))
    }

    fn value(&self, reg: Reg) -> Value {
        Value {
            reg,
            dtype: self.acc,
        }
    }

    fn body(&self, b: &mut Builder) {
        let th = self.thread(b);
        let v = &self.a.vars;
        // m = -inf, s = 0, o = 0.
        let m = self.constant(b, f64::NEG_INFINITY);
        let s = self.constant(b, 0.0);
        let cols = self.dv.div_ceil(TPR);
        let o: Vec<Reg> = (0..cols).map(|_| self.constant(b, 0.0)).collect();
        let q0 = b.reg(RegKind::B32);
        ins!(b, "sub.u32 {q0}, {}, {}", th.i, th.r);
        let stager = Stager {
            cx: self.cx,
            a: self.a,
            coords: &th.coords,
            tid: th.tid,
            threads: self.t.bm * TPR,
            base: th.base,
        };
        let k = self.cx.k;
        // Rows padded by one element against bank conflicts (not `v`'s).
        let tile = |insts, root, rows, cols, vars, from, dst, stride: u32| Tile {
            insts,
            root,
            rows,
            cols,
            padded: cols,
            vars,
            from,
            dst,
            row_bytes: stride * self.size,
            swizzled: false,
            half: None,
        };
        let q_insts = part(k, &[self.a.q], &[]);
        let q_tile = tile(
            &q_insts,
            self.a.q,
            self.t.bm,
            self.d,
            (v.i, v.d),
            (q0, self.lq),
            0,
            self.d + 1,
        );
        stager.stage(b, &q_tile);
        let k_insts = part(k, &[self.a.k], &[]);
        let v_insts = part(k, &[self.a.v], &[]);
        let keys = key_end(b, k, self.a, q0, self.t.bm);
        let j0 = if self.sp.is_split() {
            let (start, end) = split::keys(b, self.sp, self.lk);
            ins!(b, "min.u32 {keys}, {keys}, {end}");
            start
        } else {
            b.mov(RegKind::B32, "b32", 0)
        };
        let k_tile = tile(
            &k_insts,
            self.a.k,
            self.t.bn,
            self.d,
            (v.j, v.d),
            (j0, self.lk),
            self.k_off,
            self.d + 1,
        );
        let v_tile = tile(
            &v_insts,
            self.a.v,
            self.t.bn,
            self.dv,
            (v.j, v.e),
            (j0, self.lk),
            self.v_off,
            self.dv,
        );
        let (top, end) = (b.label(), b.label());
        b.place(&top);
        let done = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.u32 {done}, {j0}, {keys}");
        ins!(b, "@{done} bra {end}");
        ins!(b, "bar.sync 0");
        stager.stage(b, &k_tile);
        stager.stage(b, &v_tile);
        ins!(b, "bar.sync 0");
        let alpha = self.softmax_tile(b, &th, j0, m, s);
        ins!(b, "bar.sync 0");
        self.accumulate(b, &th, alpha, &o);
        ins!(b, "add.u32 {j0}, {j0}, {}", self.t.bn);
        ins!(b, "bra {top}");
        b.place(&end);
        self.finish(b, &th, (m, s), &o);
    }

    /// The thread's ids, its query row and batch variables, and the
    /// shared memory's address.
    fn thread(&self, b: &mut Builder) -> Thread {
        let (tid, cta) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "mov.u32 {tid}, %tid.x");
        ins!(b, "mov.u32 {cta}, %ctaid.x");
        let q_tiles = self.lq.div_ceil(self.t.bm);
        let (head, qt) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "div.u32 {head}, {cta}, {q_tiles}");
        ins!(b, "rem.u32 {qt}, {cta}, {q_tiles}");
        let (r, c, i) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
        );
        ins!(b, "shr.u32 {r}, {tid}, {}", TPR.trailing_zeros());
        ins!(b, "and.b32 {c}, {tid}, {}", TPR - 1);
        ins!(b, "mad.lo.u32 {i}, {qt}, {}, {r}", self.t.bm);
        let row_ok = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.u32 {row_ok}, {i}, {}", self.lq);
        let base = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {base}, {}", self.smem);
        let coords = Coords::new(b, self.cx, self.a, head);
        Thread {
            tid,
            head,
            r,
            c,
            i,
            row_ok,
            base,
            coords,
        }
    }

    /// Scores, logits and the online softmax of one key tile starting at
    /// `j0`: updates `m` and `s`, writes the row's `p` to shared memory
    /// and returns the factor `exp(m_old - m')` the accumulators take.
    fn softmax_tile(&self, b: &mut Builder, th: &Thread, j0: Reg, m: Reg, s: Reg) -> Reg {
        let logit_insts = logit_part(self.cx.k, self.a);
        let neg_inf = self.imm(f64::NEG_INFINITY);
        let mut logits = Vec::new();
        for u in 0..self.t.bn / TPR {
            let (jj, j) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
            ins!(b, "add.u32 {jj}, {}, {}", th.c, u * TPR);
            ins!(b, "add.u32 {j}, {j0}, {jj}");
            let key_ok = b.reg(RegKind::Pred);
            ins!(b, "setp.lt.u32 {key_ok}, {j}, {}", self.lk);
            let dot = self.dot(b, th, jj);
            let ok = b.reg(RegKind::Pred);
            ins!(b, "and.pred {ok}, {key_ok}, {}", th.row_ok);
            let x = logit(
                b,
                self.cx,
                self.a,
                &th.coords,
                (
                    LogitInsts::All(&logit_insts),
                    vec![None; self.cx.k.insts.len()],
                ),
                (th.i, j),
                dot,
                (ok, key_ok),
            );
            logits.push(x);
        }
        // The tile's row maximum, then the new running maximum.
        let tmax = self.constant(b, f64::NEG_INFINITY);
        for l in &logits {
            ops::combine(b, ReduceOp::Max, self.acc, tmax, *l, None);
        }
        self.row_reduce(b, ReduceOp::Max, tmax);
        let m_new = b.reg(self.kind);
        ins!(b, "mov.{} {m_new}, {m}", self.ty);
        ops::combine(b, ReduceOp::Max, self.acc, m_new, tmax, None);
        // m' = 0 where m_new is -inf: a row masked so far adds nothing.
        let (masked, m_use) = (b.reg(RegKind::Pred), b.reg(self.kind));
        ins!(b, "setp.eq.{} {masked}, {m_new}, {neg_inf}", self.ty);
        ins!(
            b,
            "selp.{} {m_use}, {}, {m_new}, {masked}",
            self.ty,
            self.imm(0.0)
        );
        let exp_diff = |b: &mut Builder, x: Reg| {
            let d = ops::binary(b, BinaryOp::Sub, self.value(x), self.value(m_use), self.acc);
            ops::unary(b, UnaryOp::Exp, d, self.acc).reg
        };
        let alpha = exp_diff(b, m);
        let psum = self.constant(b, 0.0);
        for (u, l) in logits.iter().enumerate() {
            let p = exp_diff(b, *l);
            ops::combine(b, ReduceOp::Sum, self.acc, psum, p, None);
            let addr = b.reg(RegKind::B32);
            ins!(
                b,
                "mad.lo.u32 {addr}, {}, {}, {}",
                th.r,
                self.t.bn + 1,
                th.c
            );
            ins!(b, "add.u32 {addr}, {addr}, {}", u as u32 * TPR);
            ins!(
                b,
                "mad.lo.u32 {addr}, {addr}, {}, {}",
                self.size,
                self.p_off
            );
            ins!(b, "add.u32 {addr}, {addr}, {}", th.base);
            ins!(b, "st.shared.{} [{addr}], {p}", self.ty);
        }
        self.row_reduce(b, ReduceOp::Sum, psum);
        ins!(b, "fma.rn.{ty} {s}, {s}, {alpha}, {psum}", ty = self.ty);
        ins!(b, "mov.{} {m}, {m_new}", self.ty);
        alpha
    }

    /// `sum_d q[r, d] * k[jj, d]` from the shared tiles, `d` ascending.
    fn dot(&self, b: &mut Builder, th: &Thread, jj: Reg) -> Reg {
        let (qa, ka) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        let row = (self.d + 1) * self.size;
        ins!(b, "mad.lo.u32 {qa}, {}, {row}, {}", th.r, th.base);
        ins!(b, "mad.lo.u32 {ka}, {jj}, {row}, {}", th.base);
        ins!(b, "add.u32 {ka}, {ka}, {}", self.k_off);
        let acc = self.constant(b, 0.0);
        let n = b.mov(RegKind::B32, "b32", 0);
        let (top, end) = (b.label(), b.label());
        b.place(&top);
        let done = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.u32 {done}, {n}, {}", self.d);
        ins!(b, "@{done} bra {end}");
        let (x, y) = (b.reg(self.kind), b.reg(self.kind));
        ins!(b, "ld.shared.{} {x}, [{qa}]", self.ty);
        ins!(b, "ld.shared.{} {y}, [{ka}]", self.ty);
        ins!(b, "fma.rn.{ty} {acc}, {x}, {y}, {acc}", ty = self.ty);
        ins!(b, "add.u32 {qa}, {qa}, {}", self.size);
        ins!(b, "add.u32 {ka}, {ka}, {}", self.size);
        ins!(b, "add.u32 {n}, {n}, 1");
        ins!(b, "bra {top}");
        b.place(&end);
        acc
    }

    /// `x = op` over the row's [`TPR`] threads (a butterfly within their
    /// aligned group of lanes).
    fn row_reduce(&self, b: &mut Builder, op: ReduceOp, x: Reg) {
        let threads = self.t.bm * TPR;
        let mask: u32 = if threads >= 32 {
            u32::MAX
        } else {
            (1u32 << threads) - 1
        };
        let mut off = TPR / 2;
        while off > 0 {
            let t = b.reg(self.kind);
            if self.kind == RegKind::F64 {
                let (lo, hi) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                ins!(b, "mov.b64 {{{lo}, {hi}}}, {x}");
                ins!(b, "shfl.sync.bfly.b32 {lo}, {lo}, {off}, 31, {mask}");
                ins!(b, "shfl.sync.bfly.b32 {hi}, {hi}, {off}, 31, {mask}");
                ins!(b, "mov.b64 {t}, {{{lo}, {hi}}}");
            } else {
                ins!(b, "shfl.sync.bfly.b32 {t}, {x}, {off}, 31, {mask}");
            }
            ops::combine(b, op, self.acc, x, t, None);
            off /= 2;
        }
    }

    /// `o = o * alpha + sum_j p[r, j] v[j, e]` for the thread's columns
    /// `e = c + 8t`.
    fn accumulate(&self, b: &mut Builder, th: &Thread, alpha: Reg, o: &[Reg]) {
        for acc in o {
            ins!(b, "mul.rn.{ty} {acc}, {acc}, {alpha}", ty = self.ty);
        }
        let col_ok = self.column_predicates(b, th, o.len());
        let (pa, va) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(
            b,
            "mad.lo.u32 {pa}, {}, {}, {}",
            th.r,
            (self.t.bn + 1) * self.size,
            self.p_off
        );
        ins!(b, "add.u32 {pa}, {pa}, {}", th.base);
        ins!(
            b,
            "mad.lo.u32 {va}, {}, {}, {}",
            th.c,
            self.size,
            self.v_off
        );
        ins!(b, "add.u32 {va}, {va}, {}", th.base);
        let n = b.mov(RegKind::B32, "b32", 0);
        let (top, end) = (b.label(), b.label());
        b.place(&top);
        let done = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.u32 {done}, {n}, {}", self.t.bn);
        ins!(b, "@{done} bra {end}");
        let p = b.reg(self.kind);
        ins!(b, "ld.shared.{} {p}, [{pa}]", self.ty);
        for (t, acc) in o.iter().enumerate() {
            let x = b.reg(self.kind);
            let guard = col_ok[t].map(|g| format!("@{g} ")).unwrap_or_default();
            let off = t as u32 * TPR * self.size;
            ins!(b, "{guard}ld.shared.{} {x}, [{va}+{off}]", self.ty);
            ins!(b, "{guard}fma.rn.{ty} {acc}, {p}, {x}, {acc}", ty = self.ty);
        }
        ins!(b, "add.u32 {pa}, {pa}, {}", self.size);
        ins!(b, "add.u32 {va}, {va}, {}", self.dv * self.size);
        ins!(b, "add.u32 {n}, {n}, 1");
        ins!(b, "bra {top}");
        b.place(&end);
    }

    /// For each of the thread's `n` columns `c + 8t`, the predicate that
    /// it exists (`None` where every thread's does).
    fn column_predicates(&self, b: &mut Builder, th: &Thread, n: usize) -> Vec<Option<Reg>> {
        (0..n as u32)
            .map(|t| {
                ((t + 1) * TPR > self.dv).then(|| {
                    let p = b.reg(RegKind::Pred);
                    ins!(b, "setp.lt.u32 {p}, {}, {}", th.c, self.dv - t * TPR);
                    p
                })
            })
            .collect()
    }

    /// `o / s` through the epilogue part to the stores, for existing rows
    /// and columns; under split-KV `m`, `s` (by the row's first thread)
    /// and `o` to the row's partial record ([`split::record`]) instead.
    fn finish(&self, b: &mut Builder, th: &Thread, (m, s): (Reg, Reg), o: &[Reg]) {
        let insts = epilogue_part(self.cx.k, self.a);
        let col_ok = self.column_predicates(b, th, o.len());
        let rec = self.sp.is_split().then(|| {
            b.comment("split-KV: m, s and o (unnormalized) to the scratch buffer");
            let rec = split::record(b, self.cx, self.a, self.sp, th.head, th.i);
            let lead = b.reg(RegKind::Pred);
            ins!(b, "setp.eq.and.u32 {lead}, {}, 0, {}", th.c, th.row_ok);
            split::store_stats(b, self.a, rec, (m, s), lead);
            rec
        });
        for (t, acc) in o.iter().enumerate() {
            let e = b.reg(RegKind::B32);
            ins!(b, "add.u32 {e}, {}, {}", th.c, t as u32 * TPR);
            let ok = b.reg(RegKind::Pred);
            match col_ok[t] {
                Some(c) => ins!(b, "and.pred {ok}, {c}, {}", th.row_ok),
                None => ins!(b, "mov.pred {ok}, {}", th.row_ok),
            }
            if let Some(rec) = rec {
                split::store_column(b, self.a, rec, e, *acc, ok);
                continue;
            }
            let out = ops::binary(b, BinaryOp::Div, self.value(*acc), self.value(s), self.acc);
            store(
                b,
                self.cx,
                self.a,
                &th.coords,
                &insts,
                (th.i, e),
                &[out],
                ok,
            );
        }
    }
}
