//! What every launch of a sort kernel shares (see the `sort` module): the
//! operand and its key at a position (32 or 64 bits, one emitter for
//! both), `(key, position)` pairs (the `pairs` module), the stores
//! of one sorted position, the on-chip bitonic sort of pairs, a grid-stride
//! loop over work items, and the CTA-wide building blocks of the radix
//! passes (a prefix sum over 256 threads, a digit count aggregated per
//! warp).

use super::builder::{ins, Builder, Reg, RegKind};
use super::elementwise::used_vars;
use super::eval::{needs, Cx, Point, Vals};
use super::expr;
use super::module::{self, Launch};
use super::ops::{self, Value};
use super::pairs::Pairs;
use super::target::Target;
use crate::ir::{Inst, Kernel, Val};
use crate::sort::{Narrow, SortOp, SortPart, RADIX_TILE};
use crate::DType;

/// A counted loop `for i = start; i < end; i += step` over `u32`
/// registers: returns `i` and the labels to close it with [`end_loop`].
pub(super) fn begin_loop(
    b: &mut Builder,
    start: Reg,
    end: Reg,
    step: u32,
) -> (Reg, String, String, u32) {
    let i = b.reg(RegKind::B32);
    ins!(b, "mov.u32 {i}, {start}");
    let (top, done) = (b.label(), b.label());
    b.place(&top);
    let p = b.reg(RegKind::Pred);
    ins!(b, "setp.ge.u32 {p}, {i}, {end}");
    ins!(b, "@{p} bra {done}");
    (i, top, done, step)
}

/// Closes a loop opened by [`begin_loop`].
pub(super) fn end_loop(b: &mut Builder, (i, top, done, step): (Reg, String, String, u32)) {
    ins!(b, "add.u32 {i}, {i}, {step}");
    ins!(b, "bra {top}");
    b.place(&done);
}

/// The global address of `u32` word `index` (a `u64` register) past word
/// `words` of the buffer at `base`.
pub(super) fn word_at(b: &mut Builder, base: Reg, index: Reg, words: u64) -> Reg {
    let a = b.reg(RegKind::B64);
    ins!(b, "shl.b64 {a}, {index}, 2");
    ins!(b, "add.u64 {a}, {a}, {base}");
    if words > 0 {
        ins!(b, "add.u64 {a}, {a}, {}", words * 4);
    }
    a
}

/// A `u32` register as a `u64` one.
pub(super) fn to_u64(b: &mut Builder, r: Reg) -> Reg {
    let x = b.reg(RegKind::B64);
    ins!(b, "cvt.u64.u32 {x}, {r}");
    x
}

/// Shared memory a CTA may have on every target (sm_80: 163 KiB; sm_90
/// allows 227 KiB).
const MAX_SHARED: u32 = 163 * 1024;

/// One launch of a sort kernel: entry `name` of CTAs of `block` threads,
/// whose body `body` writes (given the builder, the lowering context and
/// the name of the entry's shared memory), returning the bytes of shared
/// memory it uses and the grid to launch. Returns the entry's text and
/// the launch.
pub(super) fn launch(
    kernel: &Kernel,
    target: &Target,
    name: String,
    block: u32,
    body: impl FnOnce(&mut Builder, &Cx, &str) -> (u32, u32),
) -> (String, Launch) {
    let mut grid = 1;
    let (text, shared) = module::entry(kernel, target, &name, block, |b, cx, smem| {
        let (shared, g) = body(b, cx, smem);
        grid = g;
        (shared, 16)
    });
    assert!(
        shared <= MAX_SHARED,
        "sort launch {name} needs {shared} bytes of shared memory"
    );
    let launch = Launch {
        entry: name,
        grid: (grid, 1, 1),
        block: (block, 1, 1),
        shared_bytes: shared,
    };
    (text, launch)
}

/// The sort of sort kernel `k` (all its sort instructions share it but
/// for the part).
pub(super) fn sort_op(k: &Kernel) -> SortOp {
    k.sort_op().expect("a sort kernel has a sort")
}

/// The kernel's sort and what its launches need of it.
pub(super) struct SortCx<'a> {
    pub cx: &'a Cx<'a>,
    pub op: SortOp,
    /// The sorted operand and the instructions computing it.
    src: Val,
    src_todo: Vec<Val>,
    /// The sort instructions (values, indices) and the stores' other
    /// instructions.
    sorts: Vec<(Val, SortOp)>,
    store_todo: Vec<Val>,
    /// The kept variables the kernel reads.
    used: Vec<bool>,
    /// `%tid.x`.
    pub tid: Reg,
    /// Threads per CTA.
    pub block: u32,
    /// Name of the entry's static shared memory.
    smem: String,
}

impl<'a> SortCx<'a> {
    /// The context of an entry of `block` threads whose shared memory is
    /// named `smem`.
    pub(super) fn new(b: &mut Builder, cx: &'a Cx<'a>, block: u32, smem: &str) -> Self {
        let k = cx.k;
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
        let tid = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {tid}, %tid.x");
        SortCx {
            cx,
            op,
            src,
            src_todo,
            sorts: sorts.iter().map(|s| (s.0, s.1)).collect(),
            store_todo: needs(k, &not_sort, &roots),
            used: used_vars(cx),
            tid,
            block,
            smem: smem.to_string(),
        }
    }

    /// The shared-memory address of byte `offset` of the entry's shared
    /// memory (`u32`).
    pub(super) fn shared(&self, b: &mut Builder, offset: u32) -> Reg {
        let a = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {a}, {}", self.smem);
        if offset > 0 {
            ins!(b, "add.u32 {a}, {a}, {offset}");
        }
        a
    }

    /// The kept variables of row `row` (a `u64` register).
    pub(super) fn row_vars(&self, b: &mut Builder, row: Reg) -> Vec<Option<Reg>> {
        let w = self.cx.width;
        let nk = self.cx.k.n_kept;
        let r = if w.wide {
            row
        } else {
            let r = b.reg(RegKind::B32);
            ins!(b, "cvt.u32.u64 {r}, {row}");
            r
        };
        let mut kept = expr::unravel(b, r, &self.cx.k.ranges[..nk], &self.used[..nk], w);
        kept.truncate(nk);
        kept
    }

    /// A `u32` position as an index register of the kernel's width.
    fn widen(&self, b: &mut Builder, r: Reg) -> Reg {
        if self.cx.width.wide {
            to_u64(b, r)
        } else {
            r
        }
    }

    /// The operand at position `pos` (`u32`) of the row with kept
    /// variables `kept`, where `valid`.
    pub(super) fn operand(
        &self,
        b: &mut Builder,
        kept: &[Option<Reg>],
        pos: Reg,
        valid: Option<Reg>,
    ) -> Value {
        let mut vars = kept.to_vec();
        vars.push(Some(self.widen(b, pos)));
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

    /// The sort key of the operand at `pos`, in the sort's direction:
    /// [`crate::sort::sort_key`], complemented when descending; a `u32`,
    /// or a `u64` for 64-bit keys ([`SortOp::key_bits`]), by the same
    /// steps at either width.
    pub(super) fn key(
        &self,
        b: &mut Builder,
        kept: &[Option<Reg>],
        pos: Reg,
        valid: Option<Reg>,
    ) -> Reg {
        let v = self.operand(b, kept, pos, valid);
        let w = self.op.key_bits();
        let (kind, float, zero) = match w {
            64 => (RegKind::B64, DType::F64, "0d0000000000000000"),
            _ => (RegKind::B32, DType::F32, "0f00000000"),
        };
        // The sign bit of the key's width.
        let sign = format!("0x{:X}", 1u64 << (w - 1));
        let k = b.reg(kind);
        if v.dtype.is_int() {
            ins!(b, "xor.b{w} {k}, {}, {sign}", v.reg);
        } else {
            // -0.0 -> 0.0 and every NaN -> the positive quiet NaN with
            // every mantissa bit set, then flip the sign bit of positives
            // and every bit of negatives.
            let x = ops::convert(b, v, float).reg;
            let bits = b.reg(kind);
            ins!(b, "mov.b{w} {bits}, {x}");
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.eq.f{w} {p}, {x}, {zero}");
            ins!(b, "selp.b{w} {bits}, 0, {bits}, {p}");
            ins!(b, "setp.nan.f{w} {p}, {x}, {x}");
            ins!(
                b,
                "selp.b{w} {bits}, 0x{:X}, {bits}, {p}",
                (1u64 << (w - 1)) - 1
            );
            let m = b.reg(kind);
            ins!(b, "shr.s{w} {m}, {bits}, {}", w - 1);
            ins!(b, "or.b{w} {m}, {m}, {sign}");
            ins!(b, "xor.b{w} {k}, {bits}, {m}");
        }
        if self.op.descending {
            ins!(b, "not.b{w} {k}, {k}");
        }
        k
    }

    /// The pair of the operand at `pos`, in the form [`Pairs::of`] gives
    /// the sort (`key << 32 | pos`, or the 64-bit key and `pos` as two words):
    /// pairs are all distinct and order as the stable sort does.
    pub(super) fn pair(
        &self,
        b: &mut Builder,
        kept: &[Option<Reg>],
        pos: Reg,
        valid: Option<Reg>,
    ) -> Vec<Reg> {
        let k = self.key(b, kept, pos, valid);
        let pair = b.reg(RegKind::B64);
        match Pairs::of(self.op) {
            Pairs::Split => {
                ins!(b, "cvt.u64.u32 {pair}, {pos}");
                vec![k, pair]
            }
            _ => {
                ins!(b, "mov.b64 {pair}, {{{pos}, {k}}}");
                vec![pair]
            }
        }
    }

    /// The 32-bit pair `packed key << pos_bits | pos` of the operand at
    /// `pos` (`u32`, below `2^pos_bits`), its key packed by `narrow`.
    pub(super) fn narrow_pair(
        &self,
        b: &mut Builder,
        kept: &[Option<Reg>],
        pos: Reg,
        valid: Option<Reg>,
        (narrow, pos_bits): (Narrow, u32),
    ) -> Vec<Reg> {
        let k = self.key(b, kept, pos, valid);
        let pair = b.reg(RegKind::B32);
        match narrow {
            Narrow::Shift(s) => ins!(b, "shr.b32 {pair}, {k}, {s}"),
            Narrow::Offset(lo) => ins!(b, "sub.u32 {pair}, {k}, {lo}"),
        }
        ins!(b, "shl.b32 {pair}, {pair}, {pos_bits}");
        ins!(b, "or.b32 {pair}, {pair}, {pos}");
        vec![pair]
    }

    /// The kernel's stores at sorted position `j` (`u32`) of the row with
    /// kept variables `kept`, whose element was at position `pos` before
    /// sorting: indices are `pos`, values the operand evaluated again at
    /// `pos` (a gather through the fused producers, so `-0.0` and NaN
    /// payloads come out as they went in).
    pub(super) fn store(&self, b: &mut Builder, kept: &[Option<Reg>], j: Reg, pos: Reg) {
        let k = self.cx.k;
        let mut vals: Vals = vec![None; k.insts.len()];
        let gathered = self
            .sorts
            .iter()
            .any(|s| s.1.part == SortPart::Values)
            .then(|| self.operand(b, kept, pos, None));
        for &(i, sop) in &self.sorts {
            let v = match sop.part {
                SortPart::Values => gathered.expect("values gathered"),
                SortPart::Indices => Value {
                    reg: pos,
                    dtype: DType::I32,
                },
            };
            vals[i] = Some(vec![ops::convert(b, v, k.insts[i].dtype)]);
        }
        let mut vars = kept.to_vec();
        vars.push(Some(self.widen(b, j)));
        let point = Point {
            vars,
            lanes: 1,
            pred: None,
        };
        self.cx.eval_loads(b, &point, &self.store_todo, &mut vals);
        self.cx.eval(b, &point, &self.store_todo, &mut vals);
        for s in &k.stores {
            self.cx.store(b, &point, s, &vals);
        }
    }

    /// Stores the first `k` (`u32`) pairs sorted in shared memory by
    /// [`SortCx::sort_pairs`] (of the row with kept variables `kept`).
    pub(super) fn store_sorted(&self, b: &mut Builder, kept: &[Option<Reg>], k: Reg, pairs: Pairs) {
        let l = begin_loop(b, self.tid, k, self.block);
        let j = l.0;
        let a = self.pair_at(b, j, pairs);
        let pair = pairs.regs(b);
        pairs.access(b, "ld", "shared", "", &pair, (a, 0));
        let pos = pairs.position(b, &pair);
        self.store(b, kept, j, pos);
        end_loop(b, l);
    }

    /// A grid-stride loop over `items` work items: `body` gets the item
    /// (`u64`) of each turn; every turn ends with a barrier, so the next
    /// item may reuse shared memory. Also returns the grid to launch (one
    /// turn per CTA where the grid allows).
    pub(super) fn for_items(
        &self,
        b: &mut Builder,
        items: u64,
        body: impl FnOnce(&mut Builder, Reg, &str),
    ) -> u32 {
        let (ctaid, nctaid) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "mov.u32 {ctaid}, %ctaid.x");
        ins!(b, "mov.u32 {nctaid}, %nctaid.x");
        let item = to_u64(b, ctaid);
        let step = to_u64(b, nctaid);
        let (top, next, done) = (b.label(), b.label(), b.label());
        b.place(&top);
        let p = b.reg(RegKind::Pred);
        ins!(b, "setp.ge.u64 {p}, {item}, {items}");
        ins!(b, "@{p} bra {done}");
        body(b, item, &next);
        b.place(&next);
        ins!(b, "bar.sync 0");
        ins!(b, "add.u64 {item}, {item}, {step}");
        ins!(b, "bra {top}");
        b.place(&done);
        items.clamp(1, i32::MAX as u64) as u32
    }

    /// Exclusive prefix sums of `v` (`u32`, one per thread) over the
    /// CTA's threads in order, and their total; the CTA has 256 threads,
    /// and 8 words of shared memory from byte `scratch` hold the warps'
    /// sums. Every thread must call it.
    pub(super) fn block_scan(&self, b: &mut Builder, v: Reg, scratch: u32) -> (Reg, Reg) {
        let (lane, warp) = self.lane_warp(b);
        let x = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {x}, {v}");
        let (y, p) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
        for d in [1, 2, 4, 8, 16] {
            ins!(b, "shfl.sync.up.b32 {y}|{p}, {x}, {d}, 0, -1");
            ins!(b, "@{p} add.u32 {x}, {x}, {y}");
        }
        let ws = self.shared(b, scratch);
        let a = b.reg(RegKind::B32);
        ins!(b, "mad.lo.u32 {a}, {warp}, 4, {ws}");
        ins!(b, "setp.eq.u32 {p}, {lane}, 31");
        ins!(b, "@{p} st.shared.u32 [{a}], {x}");
        ins!(b, "bar.sync 0");
        let (pre, total) = (b.mov(RegKind::B32, "u32", 0), b.mov(RegKind::B32, "u32", 0));
        for w in 0..self.block / 32 {
            ins!(b, "ld.shared.u32 {y}, [{ws}+{}]", 4 * w);
            ins!(b, "add.u32 {total}, {total}, {y}");
            ins!(b, "setp.gt.u32 {p}, {warp}, {w}");
            ins!(b, "@{p} add.u32 {pre}, {pre}, {y}");
        }
        // The warp sums may be overwritten from here.
        ins!(b, "bar.sync 0");
        let excl = b.reg(RegKind::B32);
        ins!(b, "add.u32 {excl}, {pre}, {x}");
        ins!(b, "sub.u32 {excl}, {excl}, {v}");
        (excl, total)
    }

    /// This thread's lane and warp.
    pub(super) fn lane_warp(&self, b: &mut Builder) -> (Reg, Reg) {
        let (lane, warp) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "and.b32 {lane}, {}, 31", self.tid);
        ins!(b, "shr.u32 {warp}, {}, 5", self.tid);
        (lane, warp)
    }
}

/// Where tile `item` (`u64`, row-major over rows and their `tiles` tiles
/// of [`RADIX_TILE`]) of rows of `n` lies: its row (`u64`), tile (`u32`),
/// first position and length (`u32`).
pub(super) fn tile_of(b: &mut Builder, item: Reg, tiles: u64, n: u32) -> (Reg, Reg, Reg, Reg) {
    let (row, t64) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
    ins!(b, "div.u64 {row}, {item}, {tiles}");
    ins!(b, "mul.lo.u64 {t64}, {row}, {tiles}");
    ins!(b, "sub.u64 {t64}, {item}, {t64}");
    let (t, start, len) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
    );
    ins!(b, "cvt.u32.u64 {t}, {t64}");
    ins!(b, "mul.lo.u32 {start}, {t}, {RADIX_TILE}");
    ins!(b, "sub.u32 {len}, {n}, {start}");
    ins!(b, "min.u32 {len}, {len}, {RADIX_TILE}");
    (row, t, start, len)
}

/// This thread's positions in a tile of `len` from `start`, one per round
/// of 256 (`RADIX_TILE / 256` rounds for every thread: warp-wide
/// instructions need all lanes), each with whether it lies in the tile.
/// Callers load every round's element before working on any, so that a
/// thread has all its loads in flight at once (a loop loading one a
/// round left each warp waiting out a memory latency per round).
pub(super) fn tile_rounds(b: &mut Builder, tid: Reg, start: Reg, len: Reg) -> Vec<(Reg, Reg)> {
    (0..RADIX_TILE as u32 / 256)
        .map(|r| {
            let i = b.reg(RegKind::B32);
            ins!(b, "add.u32 {i}, {tid}, {}", 256 * r);
            let valid = b.reg(RegKind::Pred);
            ins!(b, "setp.lt.u32 {valid}, {i}, {len}");
            let pos = b.reg(RegKind::B32);
            ins!(b, "add.u32 {pos}, {start}, {i}");
            (pos, valid)
        })
        .collect()
}

/// The lanes of this warp whose `digit` equals this lane's (every lane of
/// the warp must execute it), this lane's rank among them, and whether it
/// is the first of them.
pub(super) fn peers(b: &mut Builder, digit: Reg) -> (Reg, Reg, Reg) {
    let (peers, below, rank) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
    );
    ins!(b, "match.any.sync.b32 {peers}, {digit}, -1");
    ins!(b, "mov.u32 {below}, %lanemask_lt");
    ins!(b, "and.b32 {below}, {below}, {peers}");
    ins!(b, "popc.b32 {rank}, {below}");
    let first = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.u32 {first}, {below}, 0");
    (peers, rank, first)
}

/// Adds 1 for each valid lane of the warp to word `digit` of the `u32`
/// counters at shared address `counts`, one add per distinct digit of the
/// warp (equal keys would otherwise serialize on one counter). Every lane
/// of the warp must execute it; invalid lanes pass digit `u32::MAX`.
pub(super) fn count_digit(b: &mut Builder, counts: Reg, digit: Reg, valid: Reg) {
    let (peers, _, first) = peers(b, digit);
    let n = b.reg(RegKind::B32);
    ins!(b, "popc.b32 {n}, {peers}");
    ins!(b, "and.pred {first}, {first}, {valid}");
    let a = b.reg(RegKind::B32);
    ins!(b, "mad.lo.u32 {a}, {digit}, 4, {counts}");
    ins!(b, "@{first} red.shared.add.u32 [{a}], {n}");
}

/// `digit` where `valid`, else `u32::MAX` (which matches no digit).
pub(super) fn digit_or_none(b: &mut Builder, digit: Reg, valid: Reg) -> Reg {
    let d = b.reg(RegKind::B32);
    ins!(b, "selp.b32 {d}, {digit}, -1, {valid}");
    d
}
