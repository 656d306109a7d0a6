//! A `Reduce`'s fold inside the JIT's fill pass. After each segment's
//! values are computed into the buffer the pass writes anyway (or, for
//! the max or min of a bare contiguous load, straight from the input), a
//! function of this module folds the segment's blocks in the executor's
//! order and writes one value per block; the executor's
//! [`reduce::fold_blocks`] then folds those pairwise, as it folds its own
//! blocks. The values are thus [`reduce::fold_segments`]' bit for bit:
//! each block of [`BLOCK`] values from the segment's start is folded in
//! [`LANES`] lanes (lane `l` takes the block's values `l`, `l + LANES`,
//! ... in order, the last partial group into the first lanes), the lanes
//! combined `((0, 1), (2, 3)), ((4, 5), (6, 7))`, each step the
//! executor's: `F32` sums and products are the `f32` operation, which is
//! the executor's `f64` one rounded once; `Max` and `Min` a comparison
//! that keeps the accumulator on ties (so the same one of `-0` and `+0`),
//! with a block holding a NaN made NaN, as the executor's separate NaN
//! scan makes the segment's result.
//!
//! Why: the executor's folds were a third of a one-thread JIT softmax.
//! Its sum read back the tile buffer the pass had just written (64 KiB,
//! out of L1) and folded one block after another, each block a chain of
//! dependent adds; here a segment is folded while it is in L1, [`SIDE`]
//! blocks at a time as independent accumulators. Its max scanned each
//! segment for NaN and then folded it, two passes; here one pass does
//! both.
//!
//! [`reduce::fold_blocks`]: crate::exec::reduce::fold_blocks
//! [`reduce::fold_segments`]: crate::exec::reduce::fold_segments

use std::fmt::Write;

use crate::exec::plan::{Level, Plan};
use crate::exec::reduce::{BLOCK, LANES};
use crate::ir::{Inst, Kernel, Val};
use crate::ops::ReduceOp;
use crate::DType;

use super::emit::{checked, flit, ty};

/// Blocks folded side by side from a buffer the pass wrote.
const SIDE: usize = 4;

/// The blocks a fold takes side by side: [`SIDE`] from the pass's buffer
/// (in L1), one at a time from an input in place. Side by side, the loads
/// are several streams a block apart within a page, which the hardware
/// prefetchers served badly from memory: a softmax's max and a row sum of
/// 4096x4096 took 1.3-1.8x as long on the 2-core build machine.
pub fn side(direct: bool) -> usize {
    if direct {
        1
    } else {
        SIDE
    }
}

/// Whether the JIT folds `Reduce` instruction `i` in its fill pass: an
/// `F32` or `F64` reduction (halves round at every step, integers are
/// the executor's) over one variable, so each of the pass's runs along
/// the innermost variable is one segment of a tile.
pub fn jit_folds(k: &Kernel, i: Val) -> bool {
    matches!(k.insts[i].dtype, DType::F32 | DType::F64) && k.ranges.len() == k.n_kept + 1
}

/// Whether `Reduce` instruction `i` (one [`jit_folds`] takes) is a `Max`
/// or `Min` of a bare load that its fold reads from the input in place:
/// of the reduction's dtype, step 1 along the reduced variable and inside
/// its buffer without checks. (Sums and products of such a load stay the
/// executor's in-place fold, one pass over the input as this would be,
/// and measured faster: a row sum of 4096x4096 took 3.7 ms there, 4.2
/// here, medians on the 2-core build machine.)
pub fn direct(k: &Kernel, plan: &Plan, i: Val) -> bool {
    let Inst::Reduce(ReduceOp::Max | ReduceOp::Min, a) = k.insts[i].inst else {
        return false;
    };
    let Inst::Load {
        input,
        ref index,
        ref valid,
    } = k.insts[a].inst
    else {
        return false;
    };
    let dt = k.insts[i].dtype;
    let inner = k.ranges.last().map_or(1, |r| (*r).max(1) as usize);
    plan.level[a] == Level::Elem
        && k.insts[a].dtype == dt
        && k.inputs[input].dtype == dt
        && !checked(k, input, index, valid)
        && plan.runs[a].index == 1
        && plan.runs[a].span >= inner
}

/// The symbol of the fold of `op` over values of `dt`.
pub fn symbol(op: ReduceOp, dt: DType, side: usize) -> String {
    format!("fold.{op:?}.{}.{side}", ty(dt))
}

/// Declarations of the intrinsics the folds call.
pub fn declarations() -> String {
    let mut m = String::new();
    for (t, s) in [("float", "f32"), ("double", "f64")] {
        writeln!(
            m,
            "declare <{LANES} x {t}> @llvm.masked.load.v{LANES}{s}.p0(ptr, i32, <{LANES} x i1>, <{LANES} x {t}>)"
        )
        .expect("to a string");
    }
    writeln!(
        m,
        "declare i1 @llvm.vector.reduce.or.v{LANES}i1(<{LANES} x i1>)"
    )
    .expect("s");
    m
}

/// The function `void (ptr v, i64 len, ptr parts)` that folds the
/// segment of `len` values of `dt` at `v` by `op`, writing its
/// [`crate::exec::reduce::blocks`] block values to `parts`.
pub fn function(op: ReduceOp, dt: DType, side: usize) -> String {
    let f = Fold::new(op, dt);
    let t = f.t;
    let mut w = String::new();
    writeln!(
        w,
        "define internal void @{}(ptr noalias readonly %v, i64 %len, ptr noalias %parts) #0 {{",
        symbol(op, dt, side)
    )
    .expect("s");
    // Groups of SIDE full blocks, then the full blocks left one by one,
    // then the partial last block (or an empty segment's one block).
    writeln!(
        w,
        "entry:\n  %nfull = udiv i64 %len, {BLOCK}\n  %nrest = urem i64 %nfull, {side}\n  %ngrp = sub i64 %nfull, %nrest\n  br label %g.head"
    )
    .expect("s");
    // `%ngrp`: the blocks of whole groups.
    f.full_blocks(&mut w, "g", side, ("0", "entry"), "%ngrp", "s.head");
    f.full_blocks(&mut w, "s", 1, ("%ngrp", "g.head"), "%nfull", "t.pre");
    writeln!(
        w,
        "t.pre:\n  %rem = urem i64 %len, {BLOCK}\n  %t.some = icmp ne i64 %rem, 0\n  %t.none = icmp eq i64 %nfull, 0\n  %t.go = or i1 %t.some, %t.none\n  br i1 %t.go, label %t.body, label %exit\nt.body:\n  %t.base = mul i64 %nfull, {BLOCK}\n  %t.nv = udiv i64 %rem, {LANES}\n  br label %t.head\nt.head:\n  %t.i = phi i64 [ 0, %t.body ], [ %t.i.n, %t.loop ]\n  %t.a = phi {v} [ {id}, %t.body ], [ %t.a.n, %t.loop ]",
        v = f.v,
        id = f.id
    )
    .expect("s");
    if f.nan {
        writeln!(
            w,
            "  %t.m = phi {m} [ zeroinitializer, %t.body ], [ %t.m.n, %t.loop ]",
            m = f.m
        )
        .expect("s");
    }
    writeln!(
        w,
        "  %t.more = icmp ult i64 %t.i, %t.nv\n  br i1 %t.more, label %t.loop, label %t.last\nt.loop:\n  %t.i8 = mul i64 %t.i, {LANES}\n  %t.off = add i64 %t.base, %t.i8"
    )
    .expect("s");
    f.step(&mut w, "%t.off", "%t.a", "%t.m", "t");
    writeln!(w, "  %t.i.n = add i64 %t.i, 1\n  br label %t.head\nt.last:").expect("s");
    // The last values, fewer than LANES, into the first lanes.
    let lanes: Vec<String> = (0..LANES).map(|l| format!("i64 {l}")).collect();
    writeln!(
        w,
        "  %t.r = urem i64 %rem, {LANES}\n  %t.i8l = mul i64 %t.nv, {LANES}\n  %t.offl = add i64 %t.base, %t.i8l\n  %t.pl = getelementptr {t}, ptr %v, i64 %t.offl\n  %t.ri = insertelement <{LANES} x i64> poison, i64 %t.r, i64 0\n  %t.rs = shufflevector <{LANES} x i64> %t.ri, <{LANES} x i64> poison, <{LANES} x i32> zeroinitializer\n  %t.mask = icmp ult <{LANES} x i64> <{}>, %t.rs\n  %t.xl = call {v} @llvm.masked.load.v{LANES}{s}.p0(ptr %t.pl, i32 {al}, <{LANES} x i1> %t.mask, {v} {id})",
        lanes.join(", "),
        v = f.v,
        id = f.id,
        s = f.suffix,
        al = f.align,
    )
    .expect("s");
    let y = f.op("%t.a", "%t.xl", &f.v, "%t.y");
    writeln!(
        w,
        "{y}  %t.al = select <{LANES} x i1> %t.mask, {v} %t.y, {v} %t.a",
        v = f.v
    )
    .expect("s");
    let m = if f.nan {
        writeln!(
            w,
            "  %t.ul = fcmp uno {v} %t.xl, %t.xl\n  %t.ulm = and <{LANES} x i1> %t.ul, %t.mask\n  %t.ml = or <{LANES} x i1> %t.m, %t.ulm",
            v = f.v
        )
        .expect("s");
        "%t.ml"
    } else {
        ""
    };
    f.finish(&mut w, "%t.al", m, "%nfull", "t.f");
    w.push_str("  br label %exit\nexit:\n  ret void\n}\n");
    w
}

/// What one fold's IR is made of.
struct Fold {
    op: ReduceOp,
    /// The scalar type, a lane vector of it, and of `i1`.
    t: &'static str,
    v: String,
    m: String,
    /// The masked load's type suffix and the elements' alignment.
    suffix: &'static str,
    align: usize,
    /// The identity splat.
    id: String,
    /// Whether blocks track NaN (`Max`, `Min`).
    nan: bool,
}

impl Fold {
    fn new(op: ReduceOp, dt: DType) -> Fold {
        let t = ty(dt);
        let v = format!("<{LANES} x {t}>");
        let id = format!("{t} {}", flit(op.identity(dt)));
        let id = format!("<{}>", vec![id; LANES].join(", "));
        Fold {
            op,
            t,
            v,
            m: format!("<{LANES} x i1>"),
            suffix: if t == "float" { "f32" } else { "f64" },
            align: dt.size(),
            id,
            nan: matches!(op, ReduceOp::Max | ReduceOp::Min),
        }
    }

    /// `op`'s step `a` then `x` (of type `t`) into `r`: the executor's
    /// `combine`, or for `Max`/`Min` its pick (`a` on ties).
    fn op(&self, a: &str, x: &str, t: &str, r: &str) -> String {
        match self.op {
            ReduceOp::Sum => format!("  {r} = fadd {t} {a}, {x}\n"),
            ReduceOp::Prod => format!("  {r} = fmul {t} {a}, {x}\n"),
            ReduceOp::Max | ReduceOp::Min => {
                let c = if self.op == ReduceOp::Max {
                    "ogt"
                } else {
                    "olt"
                };
                let ct = t.replace(self.t, "i1");
                format!("  {r}.c = fcmp {c} {t} {x}, {a}\n  {r} = select {ct} {r}.c, {t} {x}, {t} {a}\n")
            }
        }
    }

    /// Folds the lane group at element `off` of `%v` into accumulator
    /// `a` (and NaN mask `m`), giving `{a}.n` and `{m}.n`; names start
    /// with `p`.
    fn step(&self, w: &mut String, off: &str, a: &str, m: &str, p: &str) {
        writeln!(
            w,
            "  %{p}.p = getelementptr {t}, ptr %v, i64 {off}\n  %{p}.x = load {v}, ptr %{p}.p, align {al}",
            t = self.t,
            v = self.v,
            al = self.align
        )
        .expect("s");
        w.push_str(&self.op(a, &format!("%{p}.x"), &self.v, &format!("{a}.n")));
        if self.nan {
            writeln!(
                w,
                "  %{p}.u = fcmp uno {v} %{p}.x, %{p}.x\n  {m}.n = or {mt} {m}, %{p}.u",
                v = self.v,
                mt = self.m
            )
            .expect("s");
        }
    }

    /// Folds full blocks `side` at a time from block `start` (a value
    /// from block `from`) while below `limit`, then goes to `after`;
    /// blocks named `p.*`.
    fn full_blocks(
        &self,
        w: &mut String,
        p: &str,
        side: usize,
        (start, from): (&str, &str),
        limit: &str,
        after: &str,
    ) {
        writeln!(
            w,
            "{p}.head:\n  %{p} = phi i64 [ {start}, %{from} ], [ %{p}.next, %{p}.end ]\n  %{p}.more = icmp ult i64 %{p}, {limit}\n  br i1 %{p}.more, label %{p}.pre, label %{after}\n{p}.pre:"
        )
        .expect("s");
        for k in 0..side {
            writeln!(
                w,
                "  %{p}.b{k} = add i64 %{p}, {k}\n  %{p}.o{k} = mul i64 %{p}.b{k}, {BLOCK}"
            )
            .expect("s");
        }
        writeln!(
            w,
            "  br label %{p}.loop\n{p}.loop:\n  %{p}.i = phi i64 [ 0, %{p}.pre ], [ %{p}.i.n, %{p}.loop ]"
        )
        .expect("s");
        for k in 0..side {
            writeln!(
                w,
                "  %{p}.a{k} = phi {v} [ {id}, %{p}.pre ], [ %{p}.a{k}.n, %{p}.loop ]",
                v = self.v,
                id = self.id
            )
            .expect("s");
            if self.nan {
                writeln!(
                    w,
                    "  %{p}.m{k} = phi {m} [ zeroinitializer, %{p}.pre ], [ %{p}.m{k}.n, %{p}.loop ]",
                    m = self.m
                )
                .expect("s");
            }
        }
        writeln!(w, "  %{p}.i8 = mul i64 %{p}.i, {LANES}").expect("s");
        for k in 0..side {
            writeln!(w, "  %{p}.off{k} = add i64 %{p}.o{k}, %{p}.i8").expect("s");
            self.step(
                w,
                &format!("%{p}.off{k}"),
                &format!("%{p}.a{k}"),
                &format!("%{p}.m{k}"),
                &format!("{p}.k{k}"),
            );
        }
        writeln!(
            w,
            "  %{p}.i.n = add i64 %{p}.i, 1\n  %{p}.c = icmp ult i64 %{p}.i.n, {}\n  br i1 %{p}.c, label %{p}.loop, label %{p}.end\n{p}.end:",
            BLOCK / LANES
        )
        .expect("s");
        for k in 0..side {
            self.finish(
                w,
                &format!("%{p}.a{k}.n"),
                &format!("%{p}.m{k}.n"),
                &format!("%{p}.b{k}"),
                &format!("{p}.f{k}"),
            );
        }
        writeln!(
            w,
            "  %{p}.next = add i64 %{p}, {side}\n  br label %{p}.head"
        )
        .expect("s");
    }

    /// Combines accumulator `a`'s lanes (and NaN mask `m`) into the block
    /// value, stored at `%parts[block]`; names start with `p`.
    fn finish(&self, w: &mut String, a: &str, m: &str, block: &str, p: &str) {
        let t = self.t;
        let half = |n: usize, odd: usize| {
            let idx: Vec<String> = (0..n).map(|j| format!("i32 {}", 2 * j + odd)).collect();
            format!("<{n} x i32> <{}>", idx.join(", "))
        };
        // ((0, 1), (2, 3)), ((4, 5), (6, 7)): halving by even and odd.
        let mut cur = a.to_string();
        let mut n = LANES;
        while n > 1 {
            let h = n / 2;
            let (e, o, r) = (
                format!("%{p}.e{h}"),
                format!("%{p}.o{h}"),
                format!("%{p}.s{h}"),
            );
            let (vt, ht) = (format!("<{n} x {t}>"), format!("<{h} x {t}>"));
            writeln!(
                w,
                "  {e} = shufflevector {vt} {cur}, {vt} poison, {}\n  {o} = shufflevector {vt} {cur}, {vt} poison, {}",
                half(h, 0),
                half(h, 1)
            )
            .expect("s");
            w.push_str(&self.op(&e, &o, &ht, &r));
            cur = r;
            n = h;
        }
        let mut val = format!("%{p}.val");
        writeln!(w, "  {val} = extractelement <1 x {t}> {cur}, i64 0").expect("s");
        if self.nan {
            let nan = flit(f64::NAN);
            writeln!(
                w,
                "  %{p}.any = call i1 @llvm.vector.reduce.or.v{LANES}i1(<{LANES} x i1> {m})\n  %{p}.nv = select i1 %{p}.any, {t} {nan}, {t} {val}"
            )
            .expect("s");
            val = format!("%{p}.nv");
        }
        writeln!(
            w,
            "  %{p}.at = getelementptr {t}, ptr %parts, i64 {block}\n  store {t} {val}, ptr %{p}.at"
        )
        .expect("s");
    }
}
