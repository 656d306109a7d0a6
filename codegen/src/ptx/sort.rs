//! Sort kernels: a CTA per row (a grid-stride loop over rows). Each
//! element becomes a 64-bit pair `key << 32 | position`, with the key of
//! [`crate::sort::sort_key`] (complemented for a descending sort): pairs are
//! all distinct and order exactly as the stable sort does, so a bitonic
//! network (not stable by itself) gives the stable order, and comparisons
//! are single `u64` ones.
//!
//! A chunk of up to [`crate::sort::SORT_CHUNK`] pairs (padded to a power
//! of two with all-ones pairs, which sort last) is sorted in shared memory.
//! A row that fits one chunk is stored from there. A longer row's sorted
//! chunks go to the kernel's scratch buffer (two copies of the row's
//! pairs) and are merged pairwise, run lengths doubling: each element
//! finds its place in the merged run as its own rank plus a binary search
//! in the other run, and the pass writes the other copy. The stores then
//! read position `j < k`'s pair; values are the operand evaluated again at
//! the pair's position (a gather through the fused producers), so `-0.0`
//! and NaN payloads come out as they went in.
//!
//! Not yet here: a radix sort over many CTAs for long rows (one CTA merges
//! a whole row), and a selection for `topk` that does not sort the whole
//! row.

use super::builder::{ins, Builder, Reg, RegKind};
use super::elementwise::used_vars;
use super::eval::{needs, Cx, Point, Vals};
use super::expr;
use super::launch::Sort;
use super::ops::{self, Value};
use crate::ir::{Inst, Val};
use crate::sort::{scratch_len, SortOp, SortPart};
use crate::DType;

/// A counted loop `for i = start; i < end; i += step` over `u32`
/// registers: returns `i` and the labels to close it with [`end_loop`].
fn begin_loop(b: &mut Builder, start: Reg, end: Reg, step: u32) -> (Reg, String, String, u32) {
    let i = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {i}, {start}");
    let (top, done) = (b.label(), b.label());
    b.place(&top);
    let p = b.reg(RegKind::Pred);
    ins!(b, "setp.ge.u32 {p}, {i}, {end}");
    ins!(b, "@{p} bra {done}");
    (i, top, done, step)
}

fn end_loop(b: &mut Builder, (i, top, done, step): (Reg, String, String, u32)) {
    ins!(b, "add.u32 {i}, {i}, {step}");
    ins!(b, "bra {top}");
    b.place(&done);
}

/// A `u32` position as an index register of the kernel's width.
fn widen(b: &mut Builder, cx: &Cx, r: Reg) -> Reg {
    if cx.width.wide {
        let x = b.reg(RegKind::B64);
        ins!(b, "cvt.u64.u32 {x}, {r}");
        x
    } else {
        r
    }
}

/// The sort key of `v` (`F32` or `I32`) in `op`'s direction.
fn key(b: &mut Builder, op: SortOp, v: Value) -> Reg {
    let k = b.reg(RegKind::B32);
    if v.dtype == DType::I32 {
        ins!(b, "xor.b32 {k}, {}, -2147483648", v.reg);
    } else {
        // -0.0 -> 0.0 and every NaN -> 0x7fffffff, then flip the sign bit
        // of positives and every bit of negatives.
        let x = ops::convert(b, v, DType::F32).reg;
        let bits = b.reg(RegKind::B32);
        ins!(b, "mov.b32 {bits}, {x}");
        let p = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.f32 {p}, {x}, 0f00000000");
        ins!(b, "selp.b32 {bits}, 0, {bits}, {p}");
        ins!(b, "setp.nan.f32 {p}, {x}, {x}");
        ins!(b, "selp.b32 {bits}, 2147483647, {bits}, {p}");
        let m = b.reg(RegKind::B32);
        ins!(b, "shr.s32 {m}, {bits}, 31");
        ins!(b, "or.b32 {m}, {m}, -2147483648");
        ins!(b, "xor.b32 {k}, {bits}, {m}");
    }
    if op.descending {
        ins!(b, "not.b32 {k}, {k}");
    }
    k
}

/// What the emitter needs of the kernel's sort.
struct SortCx<'a> {
    cx: &'a Cx<'a>,
    op: SortOp,
    /// The sorted operand and the instructions computing it.
    src: Val,
    src_todo: Vec<Val>,
    /// The kept variables of the current row.
    kept: Vec<Option<Reg>>,
    /// `%tid.x`.
    tid: Reg,
    block: u32,
    /// Shared memory: `chunk` pairs.
    smem: Reg,
}

impl SortCx<'_> {
    /// The operand at position `pos` of the row (`u32`), where `valid`.
    fn operand(&self, b: &mut Builder, pos: Reg, valid: Option<Reg>) -> Value {
        let mut vars = self.kept.clone();
        vars.push(Some(widen(b, self.cx, pos)));
        let point = Point {
            vars,
            lanes: 1,
            pred: valid,
        };
        let mut vals: Vals = vec![None; self.cx.k.insts.len()];
        self.cx.eval_loads(b, &point, &self.src_todo, &mut vals);
        self.cx.eval(b, &point, &self.src_todo, &mut vals);
        vals[self.src].as_ref().expect("sort operand evaluated")[0]
    }

    /// Shared-memory address of pair `i` (`u32`).
    fn shared_at(&self, b: &mut Builder, i: Reg) -> Reg {
        let a = b.reg(RegKind::B32);
        ins!(b, "mad.lo.u32 {a}, {i}, 8, {}", self.smem);
        a
    }

    /// Sorts positions `c0..c0 + len` of the row (`len <= chunk`) into
    /// shared memory, ascending by pair; ends with a barrier.
    fn sort_chunk(&self, b: &mut Builder, c0: Reg, len: Reg, chunk: u32) {
        let tid = self.tid;
        let end = b.mov(RegKind::B32, "u32", chunk);
        let l = begin_loop(b, tid, end, self.block);
        let t = l.0;
        let valid = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.u32 {valid}, {t}, {len}");
        let pos = b.reg(RegKind::B32);
        ins!(b, "add.u32 {pos}, {c0}, {t}");
        let v = self.operand(b, pos, Some(valid));
        let k = key(b, self.op, v);
        let pair = b.reg(RegKind::B64);
        ins!(b, "mov.b64 {pair}, {{{pos}, {k}}}");
        ins!(b, "@!{valid} mov.b64 {pair}, -1");
        let a = self.shared_at(b, t);
        ins!(b, "st.shared.b64 [{a}], {pair}");
        end_loop(b, l);
        ins!(b, "bar.sync 0");
        // Bitonic network: blocks of `size` sorted in alternating
        // directions, merged by half-cleaners of shrinking `stride`.
        let size = b.mov(RegKind::B32, "u32", 2);
        let (size_top, size_end) = (b.label(), b.label());
        b.place(&size_top);
        let p = b.reg(RegKind::Pred);
        ins!(b, "setp.gt.u32 {p}, {size}, {chunk}");
        ins!(b, "@{p} bra {size_end}");
        let stride = b.reg(RegKind::B32);
        ins!(b, "shr.u32 {stride}, {size}, 1");
        let (stride_top, stride_end) = (b.label(), b.label());
        b.place(&stride_top);
        ins!(b, "setp.eq.u32 {p}, {stride}, 0");
        ins!(b, "@{p} bra {stride_end}");
        let half = b.mov(RegKind::B32, "u32", chunk / 2);
        let l = begin_loop(b, tid, half, self.block);
        let t = l.0;
        // Comparison `t` pairs `lo = 2t - t % stride` with `lo + stride`.
        let (m, lo, hi) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
        );
        ins!(b, "sub.u32 {m}, {stride}, 1");
        ins!(b, "and.b32 {m}, {t}, {m}");
        ins!(b, "shl.b32 {lo}, {t}, 1");
        ins!(b, "sub.u32 {lo}, {lo}, {m}");
        ins!(b, "add.u32 {hi}, {lo}, {stride}");
        let (alo, ahi) = (self.shared_at(b, lo), self.shared_at(b, hi));
        let (x, y) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
        ins!(b, "ld.shared.b64 {x}, [{alo}]");
        ins!(b, "ld.shared.b64 {y}, [{ahi}]");
        // Swap when out of order for this block's direction.
        let (gt, down) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
        ins!(b, "setp.gt.u64 {gt}, {x}, {y}");
        ins!(b, "and.b32 {m}, {lo}, {size}");
        ins!(b, "setp.ne.u32 {down}, {m}, 0");
        ins!(b, "xor.pred {gt}, {gt}, {down}");
        ins!(b, "@{gt} st.shared.b64 [{alo}], {y}");
        ins!(b, "@{gt} st.shared.b64 [{ahi}], {x}");
        end_loop(b, l);
        ins!(b, "bar.sync 0");
        ins!(b, "shr.u32 {stride}, {stride}, 1");
        ins!(b, "bra {stride_top}");
        b.place(&stride_end);
        ins!(b, "shl.b32 {size}, {size}, 1");
        ins!(b, "bra {size_top}");
        b.place(&size_end);
    }

    /// One merge pass over a row of `n` pairs at global `src`: runs of
    /// `run` pairs merged pairwise into `dst`; ends with a barrier.
    fn merge_pass(&self, b: &mut Builder, src: Reg, dst: Reg, run: Reg, n: u32) {
        let nr = b.mov(RegKind::B32, "u32", n);
        let l = begin_loop(b, self.tid, nr, self.block);
        let p = l.0;
        let x = b.reg(RegKind::B64);
        let addr = |b: &mut Builder, base: Reg, i: Reg| {
            let a = b.reg(RegKind::B64);
            ins!(b, "mad.wide.u32 {a}, {i}, 8, {base}");
            a
        };
        let a = addr(b, src, p);
        ins!(b, "ld.global.b64 {x}, [{a}]");
        // The pair of runs holding `p`: [start, mid) and [mid, end).
        let (start, mid, end, m) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
        );
        ins!(b, "shl.b32 {m}, {run}, 1");
        ins!(b, "rem.u32 {start}, {p}, {m}");
        ins!(b, "sub.u32 {start}, {p}, {start}");
        ins!(b, "add.u32 {mid}, {start}, {run}");
        ins!(b, "min.u32 {mid}, {mid}, {n}");
        ins!(b, "add.u32 {end}, {start}, {m}");
        ins!(b, "min.u32 {end}, {end}, {n}");
        // Search the other run; own rank within this one.
        let first = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.u32 {first}, {p}, {mid}");
        let (lo, hi, own) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
        );
        ins!(b, "selp.b32 {lo}, {mid}, {start}, {first}");
        ins!(b, "selp.b32 {hi}, {end}, {mid}, {first}");
        ins!(b, "selp.b32 {own}, {start}, {mid}, {first}");
        ins!(b, "sub.u32 {own}, {p}, {own}");
        let base = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {base}, {lo}");
        let (top, done) = (b.label(), b.label());
        b.place(&top);
        let q = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.u32 {q}, {lo}, {hi}");
        ins!(b, "@{q} bra {done}");
        let c = b.reg(RegKind::B32);
        ins!(b, "add.u32 {c}, {lo}, {hi}");
        ins!(b, "shr.u32 {c}, {c}, 1");
        let ac = addr(b, src, c);
        let y = b.reg(RegKind::B64);
        ins!(b, "ld.global.b64 {y}, [{ac}]");
        ins!(b, "setp.lt.u64 {q}, {y}, {x}");
        ins!(b, "@{q} add.u32 {lo}, {c}, 1");
        ins!(b, "@!{q} mov.u32 {hi}, {c}");
        ins!(b, "bra {top}");
        b.place(&done);
        // Destination: run start + own rank + smaller pairs of the other.
        let d = b.reg(RegKind::B32);
        ins!(b, "sub.u32 {d}, {lo}, {base}");
        ins!(b, "add.u32 {d}, {d}, {own}");
        ins!(b, "add.u32 {d}, {d}, {start}");
        let ad = addr(b, dst, d);
        ins!(b, "st.global.b64 [{ad}], {x}");
        end_loop(b, l);
        ins!(b, "bar.sync 0");
    }
}

/// Emits the body of a sort kernel; returns the static shared memory it
/// declares as `smem` (bytes).
pub fn emit(b: &mut Builder, cx: &Cx, plan: &Sort, smem: &str) -> u32 {
    let k = cx.k;
    let nk = k.n_kept;
    let w = cx.width;
    let nbits = w.bits();
    let sorts: Vec<(Val, SortOp, Val)> = k
        .insts
        .iter()
        .enumerate()
        .filter_map(|(i, n)| match n.inst {
            Inst::Sort(op, a) => Some((i, op, a)),
            _ => None,
        })
        .collect();
    let (_, op, src) = sorts[0];
    let all = vec![true; k.insts.len()];
    let src_todo = needs(k, &all, &[src]);
    // The stores' instructions, with the sorts' results filled in.
    let not_sort: Vec<bool> = k
        .insts
        .iter()
        .map(|n| !matches!(n.inst, Inst::Sort(..)))
        .collect();
    let roots: Vec<Val> = k.stores.iter().map(|s| s.value).collect();
    let store_todo = needs(k, &not_sort, &roots);

    let rows = k.rows() as i64;
    let n = k.row_len() as u32;
    let stored = k.stored_len() as u32;
    let chunk = plan.chunk;
    let long = scratch_len(k.rows(), k.row_len()) > 0;

    let tid = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {tid}, %tid.x");
    let (ctaid, nctaid) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "mov.u32 {ctaid}, %ctaid.x");
    ins!(b, "mov.u32 {nctaid}, %nctaid.x");
    let row = w.reg(b);
    if w.wide {
        ins!(b, "cvt.u64.u32 {row}, {ctaid}");
    } else {
        ins!(b, "mov.u32 {row}, {ctaid}");
    }
    let smem_reg = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {smem_reg}, {smem}");
    let used = used_vars(cx);

    let (row_top, row_end) = (b.label(), b.label());
    b.place(&row_top);
    let done = b.reg(RegKind::Pred);
    ins!(b, "setp.ge.s{nbits} {done}, {row}, {rows}");
    ins!(b, "@{done} bra {row_end}");
    let mut kept = expr::unravel(b, row, &k.ranges[..nk], &used[..nk], w);
    kept.truncate(nk);
    let sc = SortCx {
        cx,
        op,
        src,
        src_todo,
        kept,
        tid,
        block: plan.block,
        smem: smem_reg,
    };
    // Where the sorted row's pairs end up: shared memory, or the scratch
    // copy the last merge pass wrote.
    let zero = b.mov(RegKind::B32, "u32", 0);
    let sorted = if long {
        let scratch = *cx.outputs.last().expect("long sorts have a scratch output");
        // This row's two copies: `n` pairs each.
        let (a, c) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
        let row64 = if w.wide {
            row
        } else {
            let r = b.reg(RegKind::B64);
            ins!(b, "cvt.u64.u32 {r}, {row}");
            r
        };
        ins!(b, "mul.lo.u64 {a}, {row64}, {}", n as u64 * 16);
        ins!(b, "add.u64 {a}, {a}, {scratch}");
        ins!(b, "add.u64 {c}, {a}, {}", n as u64 * 8);
        // Sorted chunks into the first copy.
        let nr = b.mov(RegKind::B32, "u32", n);
        let cl = begin_loop(b, zero, nr, chunk);
        let c0 = cl.0;
        let len = b.reg(RegKind::B32);
        ins!(b, "sub.u32 {len}, {n}, {c0}");
        ins!(b, "min.u32 {len}, {len}, {chunk}");
        sc.sort_chunk(b, c0, len, chunk);
        let l = begin_loop(b, tid, len, plan.block);
        let t = l.0;
        let s = sc.shared_at(b, t);
        let x = b.reg(RegKind::B64);
        ins!(b, "ld.shared.b64 {x}, [{s}]");
        let g = b.reg(RegKind::B32);
        ins!(b, "add.u32 {g}, {c0}, {t}");
        let ag = b.reg(RegKind::B64);
        ins!(b, "mad.wide.u32 {ag}, {g}, 8, {a}");
        ins!(b, "st.global.b64 [{ag}], {x}");
        end_loop(b, l);
        ins!(b, "bar.sync 0");
        end_loop(b, cl);
        // Merge passes, the copies swapping roles.
        let run = b.mov(RegKind::B32, "u32", chunk);
        let (top, end) = (b.label(), b.label());
        b.place(&top);
        let p = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.u32 {p}, {run}, {n}");
        ins!(b, "@{p} bra {end}");
        sc.merge_pass(b, a, c, run, n);
        let t = b.reg(RegKind::B64);
        ins!(b, "mov.b64 {t}, {a}");
        ins!(b, "mov.b64 {a}, {c}");
        ins!(b, "mov.b64 {c}, {t}");
        ins!(b, "shl.b32 {run}, {run}, 1");
        ins!(b, "bra {top}");
        b.place(&end);
        Some(a)
    } else {
        let nr = b.mov(RegKind::B32, "u32", n);
        sc.sort_chunk(b, zero, nr, chunk);
        None
    };

    // Stores of positions j < k.
    let kr = b.mov(RegKind::B32, "u32", stored);
    let l = begin_loop(b, tid, kr, plan.block);
    let j = l.0;
    let pair = b.reg(RegKind::B64);
    match sorted {
        Some(base) => {
            let a = b.reg(RegKind::B64);
            ins!(b, "mad.wide.u32 {a}, {j}, 8, {base}");
            ins!(b, "ld.global.b64 {pair}, [{a}]");
        }
        None => {
            let a = sc.shared_at(b, j);
            ins!(b, "ld.shared.b64 {pair}, [{a}]");
        }
    }
    let (pos, hi) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "mov.b64 {{{pos}, {hi}}}, {pair}");
    let mut vals: Vals = vec![None; k.insts.len()];
    let gathered = sorts
        .iter()
        .any(|s| s.1.part == SortPart::Values)
        .then(|| sc.operand(b, pos, None));
    for (i, sop, _) in &sorts {
        let v = match sop.part {
            SortPart::Values => gathered.expect("values gathered"),
            SortPart::Indices => Value {
                reg: pos,
                dtype: DType::I32,
            },
        };
        vals[*i] = Some(vec![ops::convert(b, v, k.insts[*i].dtype)]);
    }
    let mut vars = sc.kept.clone();
    vars.push(Some(widen(b, cx, j)));
    let point = Point {
        vars,
        lanes: 1,
        pred: None,
    };
    cx.eval_loads(b, &point, &store_todo, &mut vals);
    cx.eval(b, &point, &store_todo, &mut vals);
    for s in &k.stores {
        cx.store(b, &point, s, &vals);
    }
    end_loop(b, l);
    // The next row reuses shared memory and scratch.
    ins!(b, "bar.sync 0");
    if w.wide {
        let nc = b.reg(RegKind::B64);
        ins!(b, "cvt.u64.u32 {nc}, {nctaid}");
        ins!(b, "add.s64 {row}, {row}, {nc}");
    } else {
        ins!(b, "add.s32 {row}, {row}, {nctaid}");
    }
    ins!(b, "bra {row_top}");
    b.place(&row_end);
    chunk * 8
}
