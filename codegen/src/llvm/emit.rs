//! A kernel's passes as LLVM IR text. Each pass is one function over a
//! range of consecutive points of a space (the whole domain, or the kept
//! variables' rows): an outer loop over runs along the innermost variable
//! and an inner loop over the run, whose body evaluates every instruction
//! the pass needs at one point without branches (selects only), so LLVM
//! vectorises it. Values are held as the executor holds them (`float` for
//! `F32` and the halves, `double` for `F64`, `i64` for integers and
//! `Bool`), and every op computes exactly the executor's value (see
//! [`Emitter::unary`]); the executor's planning ([`Plan`]: levels, which
//! stores run per row) decides what each pass computes.
//!
//! Pass functions have the signature `i32 (ptr ctx, i64 p0, i64 n, ptr
//! scratch)`; `ctx` points at [`super::Args`]. They return 1 when a load
//! or gather touched an index outside its buffer (reading element 0
//! instead, so nothing faults), else 0. A pass reads some element values
//! from buffers of the tile's values, and writes some for later passes
//! ([`super::keep`] decides which).

use std::fmt::Write;

use crate::exec::exp_ops;
use crate::exec::plan::{Level, Plan};
use crate::exec::vals::{class, Class};
use crate::expr::{Atom, Cond, Expr};
use crate::fits::{
    ERFC_CENTRE, ERFC_END, ERFC_LOG, ERF_SMALL, ERF_SPLIT, EXPM1, EXPM1_RANGE, LN2_HI, LN2_LO,
};
use crate::ir::{Inst, Kernel, Val};
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use crate::DType;

use super::fold;
use super::keep::{Fold, PassKeep};
use super::shims::{self, binary_id, dtype_id, unary_id};

/// What one pass function computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// The operand of `Reduce` instruction `i` at every point `p` of the
    /// domain: written to its buffer at `p - p0`, or converted to the
    /// reduction's dtype and written to `scratch[p - p0]`; where the pass
    /// folds ([`fold`]), each segment then folded into its blocks' values
    /// at `parts`.
    Fill(Val),
    /// The element-level stores, over points of the domain.
    ElemStores,
    /// The row-level stores, over rows (points of the kept variables).
    RowStores,
}

impl Pass {
    /// The function's symbol.
    pub fn symbol(self) -> String {
        match self {
            Pass::Fill(i) => format!("fill{i}"),
            Pass::ElemStores => "elem_stores".to_string(),
            Pass::RowStores => "row_stores".to_string(),
        }
    }
}

/// Why the JIT declines a kernel (the executor then runs it).
pub type Decline = &'static str;

/// The LLVM type holding a dtype's values.
pub(super) fn ty(dt: DType) -> &'static str {
    match class(dt) {
        Class::F32 => "float",
        Class::F64 => "double",
        Class::I64 => "i64",
    }
}

/// The LLVM type of a dtype's elements in memory.
pub(super) fn mem_ty(dt: DType) -> &'static str {
    match dt {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F16 | DType::BF16 | DType::I16 => "i16",
        DType::Bool | DType::U8 | DType::I8 | DType::F8E4M3 | DType::F8E5M2 => "i8",
        DType::I32 => "i32",
        DType::I64 => "i64",
    }
}

/// A float literal in LLVM's hexadecimal form (exact for any `f64`; an
/// `f32` constant must be exact in `f32`, as LLVM requires).
pub(super) fn flit(x: f64) -> String {
    format!("0x{:016X}", x.to_bits())
}

/// The module text of `k`'s passes (of a kernel [`check`] admits): shim
/// declarations, intrinsics, every pass function, with `attrs` (the
/// host's `target-cpu` and `target-features`) on each; kept values with
/// a store in `lodged` live in that store's output elements
/// ([`super::keep::Keep::lodged`]).
pub fn module(
    k: &Kernel,
    plan: &Plan,
    passes: &[&PassKeep],
    lodged: &[Option<usize>],
    attrs: &str,
) -> String {
    let mut m = String::new();
    for s in shims::all() {
        m.push_str(s.decl);
        m.push('\n');
    }
    for f in [
        "sqrt",
        "fabs",
        "floor",
        "ceil",
        "trunc",
        "roundeven",
        "maxnum",
        "minnum",
        "fma",
        "copysign",
    ] {
        for t in ["f64", "f32"] {
            let ll = if t == "f64" { "double" } else { "float" };
            let args = match f {
                "maxnum" | "minnum" | "copysign" => format!("{ll}, {ll}"),
                "fma" => format!("{ll}, {ll}, {ll}"),
                _ => ll.to_string(),
            };
            writeln!(m, "declare {ll} @llvm.{f}.{t}({args})").expect("to a string");
        }
    }
    m.push_str("declare i64 @llvm.fptosi.sat.i64.f64(double)\n");
    m.push_str("declare i64 @llvm.smax.i64(i64, i64)\ndeclare i64 @llvm.smin.i64(i64, i64)\n");
    for t in ["i32", "i64"] {
        for f in ["umin", "umax"] {
            writeln!(m, "declare {t} @llvm.{f}.{t}({t}, {t})").expect("to a string");
        }
    }
    m.push_str(&fold::declarations());
    writeln!(m, "attributes #0 = {{ nounwind {attrs} }}").expect("to a string");
    writeln!(m, "attributes #1 = {{ nounwind alwaysinline {attrs} }}").expect("to a string");
    let mut folds = Vec::new();
    for p in passes {
        m.push_str(&function(k, plan, p, lodged));
        if let Some(f) = folded(k, p).filter(|f| !folds.contains(f)) {
            m.push_str(&fold::function(f.0, f.1, f.2));
            folds.push(f);
        }
    }
    m
}

/// The reduction a fill pass folds itself, its dtype and the blocks
/// folded side by side.
fn folded(k: &Kernel, pk: &PassKeep) -> Option<(ReduceOp, DType, usize)> {
    match (pk.pass, pk.fold) {
        (Pass::Fill(i), Fold::Jit | Fold::Direct) => {
            let Inst::Reduce(op, _) = k.insts[i].inst else {
                unreachable!("fills are of reductions")
            };
            let side = fold::side(pk.fold == Fold::Direct);
            Some((op, k.insts[i].dtype, side))
        }
        _ => None,
    }
}

/// Kernels and instructions the JIT leaves to the executor (each a
/// documented decline, never a wrong result).
///
/// # Errors
/// Why the JIT declines the kernel.
pub fn check(k: &Kernel, plan: &Plan) -> Result<(), Decline> {
    if plan.adds {
        // Their one-thread, in-order adds are the executor's.
        return Err("a scatter's adds run on the executor");
    }
    let fp8 = |dt: DType| dt.is_fp8();
    if k.insts.iter().any(|n| fp8(n.dtype))
        || k.inputs.iter().chain(&k.outputs).any(|a| fp8(a.dtype))
    {
        // No shim converts FP8 yet; the executor does.
        return Err("FP8 values run on the executor");
    }
    for n in &k.insts {
        match &n.inst {
            Inst::Random(..) => return Err("Philox draws run on the executor"),
            Inst::Gather(_) => return Err("gathers run on the executor"),
            Inst::Scan(..) => return Err("scans run on the executor"),
            Inst::Sort(..) => return Err("sorts run on the executor"),
            Inst::Unary(op, _)
                if class(n.dtype) == Class::I64 && !op.keeps_integers() && *op != UnaryOp::Not =>
            {
                return Err("a unary op without an integer result on integers")
            }
            _ => {}
        }
    }
    // Stores are not checked per point: every index a store can reach
    // must lie in its output (else the executor reports the bad index).
    for (s, st) in k.stores.iter().enumerate() {
        let space = if plan.elem_stores.contains(&s) {
            &k.ranges[..]
        } else {
            &k.ranges[..k.n_kept]
        };
        if space.contains(&0) {
            continue;
        }
        let (lo, hi) = st.index.bounds(space);
        if lo < 0 || hi >= k.outputs[st.output].len as i64 {
            return Err("a store index may leave its output");
        }
    }
    Ok(())
}

/// The pass function of `pk` (a wrapper reading [`super::Args`], and its
/// body with `noalias` buffer parameters, inlined into it).
fn function(k: &Kernel, plan: &Plan, pk: &PassKeep, lodged: &[Option<usize>]) -> String {
    let name = pk.pass.symbol();
    let kept: Vec<(Val, bool)> = (pk.writes.iter().map(|v| (*v, true)))
        .chain(pk.reads.iter().map(|v| (*v, false)))
        .filter(|(v, _)| lodged[*v].is_none())
        .collect();
    let ni = k.inputs.len();
    let no = k.outputs.len();
    let reduces: Vec<Val> = (0..k.insts.len())
        .filter(|i| matches!(k.insts[*i].inst, Inst::Reduce(..)))
        .collect();
    let mut params = vec![
        "i64 %p0".to_string(),
        "i64 %n".to_string(),
        "ptr noalias %scratch".to_string(),
        "ptr noalias readonly %uni".to_string(),
        "i64 %r0".to_string(),
        "ptr noalias %parts".to_string(),
    ];
    params.extend((0..ni).map(|i| format!("ptr noalias readonly %in{i}")));
    params.extend((0..no).map(|o| format!("ptr noalias %out{o}")));
    params.extend(
        reduces
            .iter()
            .map(|r| format!("ptr noalias readonly %row{r}")),
    );
    params.extend(kept.iter().map(|(v, written)| {
        let ro = if *written { "" } else { " readonly" };
        format!("ptr noalias{ro} %keep{v}")
    }));
    let mut w = String::new();
    // The wrapper: loads the pointers once and calls the body.
    writeln!(
        w,
        "define i32 @{name}(ptr %ctx, i64 %p0, i64 %n, ptr %scratch) #0 {{"
    )
    .expect("to a string");
    let field = |w: &mut String, f: usize, t: &str, to: &str| {
        writeln!(w, "  %{to}.a = getelementptr i8, ptr %ctx, i64 {}", 8 * f).expect("s");
        writeln!(w, "  %{to} = load {t}, ptr %{to}.a").expect("s");
    };
    field(&mut w, 0, "ptr", "ins");
    field(&mut w, 1, "ptr", "outs");
    field(&mut w, 2, "ptr", "uni");
    field(&mut w, 3, "ptr", "rows");
    field(&mut w, 4, "ptr", "keep");
    field(&mut w, 5, "i64", "r0");
    field(&mut w, 6, "ptr", "parts");
    let mut args = vec![
        "i64 %p0".to_string(),
        "i64 %n".to_string(),
        "ptr %scratch".to_string(),
        "ptr %uni".to_string(),
        "i64 %r0".to_string(),
        "ptr %parts".to_string(),
    ];
    let mut elem = |w: &mut String, table: &str, i: usize, to: String| {
        writeln!(w, "  %{to}.a = getelementptr ptr, ptr %{table}, i64 {i}").expect("s");
        writeln!(w, "  %{to} = load ptr, ptr %{to}.a").expect("s");
        args.push(format!("ptr %{to}"));
    };
    for i in 0..ni {
        elem(&mut w, "ins", i, format!("in{i}"));
    }
    for o in 0..no {
        elem(&mut w, "outs", o, format!("out{o}"));
    }
    for r in &reduces {
        elem(&mut w, "rows", *r, format!("row{r}"));
    }
    for (v, _) in &kept {
        elem(&mut w, "keep", *v, format!("keep{v}"));
    }
    writeln!(
        w,
        "  %e = call i32 @{name}.body({})\n  ret i32 %e\n}}",
        args.join(", ")
    )
    .expect("s");
    writeln!(
        w,
        "define internal i32 @{name}.body({}) #1 {{",
        params.join(", ")
    )
    .expect("s");
    w.push_str(&Emitter::body(k, plan, pk, lodged));
    w.push_str("}\n");
    w
}

/// Emits one pass body.
struct Emitter<'k> {
    k: &'k Kernel,
    plan: &'k Plan,
    /// Per instruction, the store whose output elements hold its kept
    /// values, if not a tile buffer.
    lodged: &'k [Option<usize>],
    /// Per instruction, whether the pass reads it from its buffer.
    reads: Vec<bool>,
    /// Instructions of the body, appended.
    out: String,
    /// Next fresh name.
    next: usize,
    /// Per instruction, its value at the current point.
    memo: Vec<Option<String>>,
    /// The variables of the space, by kernel variable.
    coords: Vec<String>,
    /// Whether `F32` `exp` takes the polynomial path (which flags
    /// out-of-range inputs) or the reference (the redo of a flagged run).
    fast: bool,
    /// Whether the body computes an `F32` `exp` (costly, [`costly`]).
    has_exp: bool,
    /// The domains the fast loop checks over each run ([`Emitter::track`]:
    /// an `F32` `exp`'s inputs, a [`Emitter::div_by_row`]'s operands); a
    /// run outside one is computed again with the references.
    spans: Vec<Span>,
    /// Whether a `Row`-level value is the same at every point of a run
    /// (the pass's space is the whole domain and the innermost variable
    /// is not kept).
    rows_span_runs: bool,
    /// Calls of Rust functions ([`shims`]) emitted.
    shim_calls: usize,
    /// The current point's offset in the pass's points (`p - p0`).
    at: String,
    /// The block the body's next instruction goes to: the run loop's, or
    /// the join after the last value the redo computed on a branch.
    block: String,
}

impl<'k> Emitter<'k> {
    /// An emitter over a space of `d` variables, reading no buffers.
    fn new(k: &'k Kernel, plan: &'k Plan, lodged: &'k [Option<usize>], d: usize) -> Emitter<'k> {
        Emitter {
            k,
            plan,
            lodged,
            reads: vec![false; k.insts.len()],
            out: String::new(),
            next: 0,
            memo: vec![None; k.insts.len()],
            coords: vec![String::new(); d],
            fast: true,
            has_exp: false,
            spans: Vec::new(),
            rows_span_runs: false,
            shim_calls: 0,
            at: String::new(),
            block: String::new(),
        }
    }

    /// The body of pass `pk`: loops over points `p0..p0 + n`.
    fn body(k: &Kernel, plan: &Plan, pk: &PassKeep, lodged: &[Option<usize>]) -> String {
        let p = pk.pass;
        let space: Vec<i64> = match p {
            Pass::RowStores => k.ranges[..k.n_kept].to_vec(),
            _ => k.ranges.to_vec(),
        };
        // A space without variables has one point; a variable of size 1
        // stands for it.
        let ranges = if space.is_empty() { vec![1] } else { space };
        let d = ranges.len();
        let inner = ranges[d - 1];
        let mut e = Emitter::new(k, plan, lodged, d);
        e.rows_span_runs = p != Pass::RowStores && k.n_kept < k.ranges.len();
        for v in &pk.reads {
            e.reads[*v] = true;
        }
        let mut head = String::new();
        head.push_str("entry:\n  %err = alloca i8\n  store i8 0, ptr %err\n");
        // Uniform values, loaded once.
        for (i, n) in k.insts.iter().enumerate() {
            if plan.level[i] == Level::Uniform {
                writeln!(
                    head,
                    "  %u{i}.a = getelementptr i8, ptr %uni, i64 {}\n  %u{i} = load {}, ptr %u{i}.a",
                    8 * i,
                    ty(n.dtype)
                )
                .expect("s");
            }
        }
        let folds = folded(k, pk);
        // The outer loop's blocks, after the entry block (which gets the
        // divisions' range accumulators once the fast loop is emitted).
        let mut head_rest = String::new();
        // Where the run's block values go, when the pass folds (one
        // segment a run).
        let parts = match folds {
            Some(_) => "  %pp = phi ptr [ %parts, %entry ], [ %ppnext, %latch ]\n",
            None => "",
        };
        writeln!(
            head_rest,
            "  %end = add i64 %p0, %n\n  br label %outer\nouter:\n  %p = phi i64 [ %p0, %entry ], [ %pnext, %latch ]\n{parts}  %more = icmp slt i64 %p, %end\n  br i1 %more, label %ohead, label %exit\nohead:\n  %o = udiv i64 %p, {inner}\n  %j0 = urem i64 %p, {inner}\n  %rest = sub i64 %end, %p\n  %lim = sub i64 {inner}, %j0\n  %lt = icmp ult i64 %lim, %rest\n  %cnt = select i1 %lt, i64 %lim, i64 %rest\n  %j1 = add i64 %j0, %cnt\n  %sp = sub i64 %p, %p0\n  %sbase = sub i64 %sp, %j0"
        )
        .expect("s");
        // The outer variables from the run's outer index.
        let mut rest = "%o".to_string();
        for v in (0..d - 1).rev() {
            writeln!(
                head_rest,
                "  %c{v} = urem i64 {rest}, {r}\n  %q{v} = udiv i64 {rest}, {r}",
                r = ranges[v]
            )
            .expect("s");
            e.coords[v] = format!("%c{v}");
            rest = format!("%q{v}");
        }
        let mut s = head;
        if pk.fold == Fold::Direct {
            // Nothing to compute: the fold reads the input.
            s.push_str(&head_rest);
            s.push_str("  br label %latch\n");
        } else {
            // The fast loop, then (when an exp flagged an input outside
            // the polynomial's range, or a division by a row value met a
            // point outside its domain) the same run again with the
            // references.
            let fast = e.run_loop(pk, "inner", "ohead", d);
            for sp in &e.spans {
                s.push_str(&sp.alloca());
            }
            s.push_str(&head_rest);
            for sp in &e.spans {
                s.push_str(&sp.start());
            }
            s.push_str("  br label %inner\n");
            s.push_str(&fast);
            if !e.spans.is_empty() {
                let mut redo = "false".to_string();
                for sp in &e.spans {
                    let next = format!("%redo.{}", sp.id);
                    s.push_str(&sp.outside(&redo, &next));
                    redo = next;
                }
                writeln!(s, "  br i1 {redo}, label %slow, label %latch").expect("s");
                e.fast = false;
                e.out.clear();
                s.push_str(&e.run_loop(pk, "slow", "after_inner", d));
            }
            s.push_str("  br label %latch\n");
        }
        s.push_str("latch:\n");
        if let Some((_, dt, side)) = folds {
            s.push_str(&e.fold_run(pk, dt, side, d));
        }
        s.push_str(
            "  %pnext = add i64 %p, %cnt\n  br label %outer\nexit:\n  %ev = load i8, ptr %err\n  %ret = zext i8 %ev to i32\n  ret i32 %ret\n",
        );
        s
    }

    /// The fold of the run `j0..j0 + cnt` (one segment of the tile: the
    /// kernel reduces one variable, [`fold::jit_folds`]) by a fill that
    /// folds (reduction dtype `dt`, `side` blocks side by side): its values
    /// (the input's in place, or the buffer the pass wrote) folded into
    /// its blocks' values at `%pp`, and `%ppnext` past them.
    fn fold_run(&mut self, pk: &PassKeep, dt: DType, side: usize, d: usize) -> String {
        let Pass::Fill(i) = pk.pass else {
            unreachable!("folds are fills'")
        };
        let Inst::Reduce(op, a) = self.k.insts[i].inst else {
            unreachable!("fills are of reductions")
        };
        let t = ty(dt);
        self.out.clear();
        let src = if pk.fold == Fold::Direct {
            let Inst::Load { input, index, .. } = &self.k.insts[a].inst else {
                unreachable!("a direct fold's operand is a load")
            };
            self.coords[d - 1] = "%j0".to_string();
            let idx = self.expr(index);
            format!("getelementptr {t}, ptr %in{input}, i64 {idx}")
        } else if pk.scratch {
            format!("getelementptr {t}, ptr %scratch, i64 %sp")
        } else if self.lodged[a].is_some() {
            // The segment is contiguous in the output from its first point.
            self.coords[d - 1] = "%j0".to_string();
            let (out, idx) = self.lodged_at(a);
            format!("getelementptr {t}, ptr {out}, i64 {idx}")
        } else {
            format!("getelementptr {t}, ptr %keep{a}, i64 %sp")
        };
        let mut s = std::mem::take(&mut self.out);
        // The segment's `reduce::blocks(cnt)` values: at least one.
        let block = crate::exec::reduce::BLOCK;
        writeln!(
            s,
            "  %fsrc = {src}\n  call void @{}(ptr %fsrc, i64 %cnt, ptr %pp)\n  %nb.a = add i64 %cnt, {}\n  %nb.b = udiv i64 %nb.a, {block}\n  %nb.z = icmp eq i64 %nb.b, 0\n  %nb = select i1 %nb.z, i64 1, i64 %nb.b\n  %ppnext = getelementptr {t}, ptr %pp, i64 %nb",
            fold::symbol(op, dt, side),
            block - 1
        )
        .expect("s");
        s
    }

    /// One loop over the run `j0..j1` of the innermost variable, its
    /// block named `label` (entered from `from`); ends in a block named
    /// `after_{label}` without a terminator.
    fn run_loop(&mut self, pk: &PassKeep, label: &str, from: &str, d: usize) -> String {
        self.memo.iter_mut().for_each(|m| *m = None);
        self.out.clear();
        let j = format!("%j.{label}");
        self.coords[d - 1] = j.clone();
        self.at = format!("%at.{label}");
        self.block = label.to_string();
        self.line(format!("{} = add i64 %sbase, {j}", self.at));
        // Lodged values first: a store of this pass may overwrite the
        // output element that holds one.
        for v in pk.reads.iter().filter(|v| self.lodged[**v].is_some()) {
            self.val(*v);
        }
        for v in &pk.writes {
            let x = self.val(*v);
            let t = ty(self.k.insts[*v].dtype);
            if self.lodged[*v].is_some() {
                let (out, idx) = self.lodged_at(*v);
                let ptr = self.tmp();
                self.line(format!("{ptr} = getelementptr {t}, ptr {out}, i64 {idx}"));
                self.line(format!("store {t} {x}, ptr {ptr}"));
            } else {
                self.put(&format!("%keep{v}"), t, &x);
            }
        }
        match pk.pass {
            Pass::Fill(i) if pk.scratch => {
                let Inst::Reduce(_, a) = self.k.insts[i].inst else {
                    unreachable!("fills are of reductions")
                };
                let v = self.val(a);
                let (from_dt, to) = (self.k.insts[a].dtype, self.k.insts[i].dtype);
                let v = self.convert(&v, from_dt, to);
                self.put("%scratch", ty(to), &v);
            }
            // The operand is among the writes.
            Pass::Fill(_) => {}
            Pass::ElemStores => {
                let stores = self.plan.elem_stores.clone();
                stores.iter().for_each(|s| self.store(*s));
            }
            Pass::RowStores => {
                let stores = self.plan.row_stores.clone();
                stores.iter().for_each(|s| self.store(*s));
            }
        }
        let body = std::mem::take(&mut self.out);
        let last = &self.block;
        format!(
            "{label}:\n  {j} = phi i64 [ %j0, %{from} ], [ {j}.n, %{last} ]\n{body}  {j}.n = add i64 {j}, 1\n  {j}.c = icmp ult i64 {j}.n, %j1\n  br i1 {j}.c, label %{label}, label %after_{label}\nafter_{label}:\n"
        )
    }

    /// The output and index (at the current point) of the element that
    /// holds lodged value `v`: its store's.
    fn lodged_at(&mut self, v: Val) -> (String, String) {
        let s = self.lodged[v].expect("a lodged value");
        let st = &self.k.stores[s];
        let (out, index) = (format!("%out{}", st.output), st.index.clone());
        (out, self.expr(&index))
    }

    /// Stores `v` (of LLVM type `t`) at the current point's offset of
    /// the tile buffer `buf`.
    fn put(&mut self, buf: &str, t: &str, v: &str) {
        let ptr = self.tmp();
        let at = &self.at;
        self.line(format!("{ptr} = getelementptr {t}, ptr {buf}, i64 {at}"));
        self.line(format!("store {t} {v}, ptr {ptr}"));
    }

    fn tmp(&mut self) -> String {
        self.next += 1;
        format!("%t{}", self.next)
    }

    fn line(&mut self, s: String) {
        self.out.push_str("  ");
        self.out.push_str(&s);
        self.out.push('\n');
    }

    /// `{op} {ty} {a}, {b}` into a fresh value.
    fn op2(&mut self, op: &str, t: &str, a: &str, b: &str) -> String {
        let r = self.tmp();
        self.line(format!("{r} = {op} {t} {a}, {b}"));
        r
    }

    /// A call of `f` returning `t`.
    fn call(&mut self, t: &str, f: &str, args: &[String]) -> String {
        if f.starts_with("smelt_") {
            self.shim_calls += 1;
        }
        let r = self.tmp();
        self.line(format!("{r} = call {t} @{f}({})", args.join(", ")));
        r
    }

    fn select(&mut self, c: &str, t: &str, a: &str, b: &str) -> String {
        let r = self.tmp();
        self.line(format!("{r} = select i1 {c}, {t} {a}, {t} {b}"));
        r
    }

    /// An `i1` widened to the `i64` 0 or 1 of a `Bool`.
    fn bool64(&mut self, c: &str) -> String {
        let r = self.tmp();
        self.line(format!("{r} = zext i1 {c} to i64"));
        r
    }

    /// The value of index expression `e` at the point (`i64`).
    fn expr(&mut self, e: &Expr) -> String {
        let (terms, konst) = e.parts();
        let mut acc = konst.to_string();
        for (a, c) in terms {
            let v = match a {
                Atom::Var(v) => self.coords[*v].clone(),
                Atom::Div(x, dv) | Atom::Mod(x, dv) => {
                    let x = self.expr(x);
                    // Floor division and Euclidean remainder by a positive
                    // constant: truncating ones corrected for negatives.
                    let q = self.op2("sdiv", "i64", &x, &dv.to_string());
                    let r = self.op2("srem", "i64", &x, &dv.to_string());
                    let neg = self.op2("icmp slt", "i64", &r, "0");
                    if matches!(a, Atom::Div(..)) {
                        let q1 = self.op2("sub", "i64", &q, "1");
                        self.select(&neg, "i64", &q1, &q)
                    } else {
                        let r1 = self.op2("add", "i64", &r, &dv.to_string());
                        self.select(&neg, "i64", &r1, &r)
                    }
                }
            };
            let t = self.op2("mul", "i64", &v, &c.to_string());
            acc = self.op2("add", "i64", &acc, &t);
        }
        acc
    }

    /// Whether `c` holds at the point (`i1`).
    fn cond(&mut self, c: &Cond) -> String {
        if c.is_never() {
            return "false".to_string();
        }
        let mut acc = "true".to_string();
        for (e, lo, hi) in c.checks() {
            let v = self.expr(e);
            let a = self.op2("icmp sge", "i64", &v, &lo.to_string());
            let b = self.op2("icmp slt", "i64", &v, &hi.to_string());
            let ab = self.op2("and", "i1", &a, &b);
            acc = self.op2("and", "i1", &acc, &ab);
        }
        acc
    }

    /// The index of the current row among the block's rows (the rows
    /// arrays hold the block's rows from `r0`).
    fn row_index(&mut self) -> String {
        let kept = &self.k.ranges[..self.k.n_kept];
        let mut acc = "0".to_string();
        let mut stride = 1i64;
        for v in (0..kept.len()).rev() {
            let c = self.coords[v].clone();
            let t = self.op2("mul", "i64", &c, &stride.to_string());
            acc = self.op2("add", "i64", &acc, &t);
            stride *= kept[v];
        }
        self.op2("sub", "i64", &acc, "%r0")
    }

    /// The value of instruction `i` at the point.
    fn val(&mut self, i: Val) -> String {
        if let Some(v) = &self.memo[i] {
            return v.clone();
        }
        // A redo computes lodged values again: the first loop has
        // overwritten the elements that held them.
        let v = if self.reads[i] && (self.fast || self.lodged[i].is_none()) {
            // Computed by an earlier pass over this tile.
            let t = ty(self.k.insts[i].dtype);
            let (buf, at) = if self.lodged[i].is_some() {
                self.lodged_at(i)
            } else {
                (format!("%keep{i}"), self.at.clone())
            };
            let (ptr, v) = (self.tmp(), self.tmp());
            self.line(format!("{ptr} = getelementptr {t}, ptr {buf}, i64 {at}"));
            self.line(format!("{v} = load {t}, ptr {ptr}"));
            v
        } else {
            self.compute(i)
        };
        self.memo[i] = Some(v.clone());
        v
    }

    fn compute(&mut self, i: Val) -> String {
        let k = self.k;
        let dt = k.insts[i].dtype;
        let dtype = |v: Val| k.insts[v].dtype;
        if self.plan.level[i] == Level::Uniform {
            return format!("%u{i}");
        }
        match &k.insts[i].inst {
            Inst::Reduce(..) => {
                let r = self.row_index();
                let ptr = self.tmp();
                self.line(format!(
                    "{ptr} = getelementptr {}, ptr %row{i}, i64 {r}",
                    ty(dt)
                ));
                let v = self.tmp();
                self.line(format!("{v} = load {}, ptr {ptr}", ty(dt)));
                v
            }
            Inst::Load {
                input,
                index,
                valid,
            } => self.load(*input, index, valid, dt),
            Inst::Valid(c) => {
                let b = self.cond(c);
                let b = self.bool64(&b);
                self.convert(&b, DType::Bool, dt)
            }
            Inst::Index(e) => {
                let x = self.expr(e);
                self.convert(&x, DType::I64, dt)
            }
            Inst::Cast(a) => {
                let x = self.val(*a);
                self.convert(&x, dtype(*a), dt)
            }
            Inst::Unary(op, a) => {
                let x = self.val(*a);
                self.unary(*op, &x, dtype(*a), dt)
            }
            Inst::Binary(BinaryOp::Div, a, b)
                if self.fast
                    && matches!(dt, DType::F32 | DType::F64)
                    && dtype(*a) == dt
                    && dtype(*b) == dt
                    && self.same_along_run(*b) =>
            {
                let (x, y) = (self.val(*a), self.val(*b));
                self.div_by_row(&x, &y, dt)
            }
            Inst::Binary(op, a, b) => {
                let (x, y) = (self.val(*a), self.val(*b));
                self.binary(*op, (&x, dtype(*a)), (&y, dtype(*b)), dt)
            }
            Inst::Where(c, a, b) => {
                let cv = self.val(*c);
                let t = self.truthy(&cv, dtype(*c));
                let x = self.val(*a);
                let x = self.convert(&x, dtype(*a), dt);
                let y = self.val(*b);
                let y = self.convert(&y, dtype(*b), dt);
                self.select(&t, ty(dt), &x, &y)
            }
            Inst::Const(_) | Inst::Scalar(_) => unreachable!("uniform"),
            Inst::Gather(_) | Inst::Random(..) | Inst::Scan(..) | Inst::Sort(..) => {
                unreachable!("declined by check")
            }
            Inst::Dot(..) | Inst::Attend(..) => {
                unreachable!("the plan declines these kernels")
            }
        }
    }

    /// Whether a value of `dt` is true as a condition (`!= 0`; NaN is).
    fn truthy(&mut self, v: &str, dt: DType) -> String {
        match class(dt) {
            Class::I64 => self.op2("icmp ne", "i64", v, "0"),
            _ => self.op2("fcmp une", ty(dt), v, "0.0"),
        }
    }

    /// `Load { input, index, valid }` of dtype `dt`: 0 where `valid`
    /// fails; an index outside the buffer (where valid) sets the error
    /// flag and reads element 0, unless bounds prove it inside.
    fn load(&mut self, input: usize, index: &Expr, valid: &Cond, dt: DType) -> String {
        let arg = self.k.inputs[input];
        let at = arg.dtype;
        if valid.is_never() || arg.len == 0 {
            if !valid.is_never() {
                // Every valid point reads outside an empty buffer.
                let ok = self.cond(valid);
                self.flag_error(&ok);
            }
            return self.convert(&zero(at), at, dt);
        }
        let idx = self.expr(index);
        let (idx, ok) = if !checked(self.k, input, index, valid) {
            (idx, None)
        } else {
            let ok = self.cond(valid);
            let a = self.op2("icmp sge", "i64", &idx, "0");
            let b = self.op2("icmp slt", "i64", &idx, &arg.len.to_string());
            let inside = self.op2("and", "i1", &a, &b);
            let out = self.op2("xor", "i1", &inside, "true");
            let bad = self.op2("and", "i1", &ok, &out);
            self.flag_error(&bad);
            let read = self.op2("and", "i1", &ok, &inside);
            (self.select(&read, "i64", &idx, "0"), Some(ok))
        };
        let ptr = self.tmp();
        self.line(format!(
            "{ptr} = getelementptr {}, ptr %in{input}, i64 {idx}",
            mem_ty(at)
        ));
        let raw = self.tmp();
        self.line(format!("{raw} = load {}, ptr {ptr}", mem_ty(at)));
        let v = self.decode(&raw, at);
        let v = match ok {
            Some(ok) => self.select(&ok, ty(at), &v, &zero(at)),
            None => v,
        };
        self.convert(&v, at, dt)
    }

    /// Sets the error flag where `bad` holds.
    fn flag_error(&mut self, bad: &str) {
        let b = self.tmp();
        self.line(format!("{b} = zext i1 {bad} to i8"));
        let e = self.tmp();
        self.line(format!("{e} = load i8, ptr %err"));
        let e2 = self.op2("or", "i8", &e, &b);
        self.line(format!("store i8 {e2}, ptr %err"));
    }

    /// A loaded element of `dt` as its class' value.
    fn decode(&mut self, raw: &str, dt: DType) -> String {
        match dt {
            DType::F32 | DType::F64 | DType::I64 => raw.to_string(),
            DType::F16 | DType::BF16 => self.call(
                "float",
                "smelt_half_to_f32",
                &[format!("i32 {}", dtype_id(dt)), format!("i16 {raw}")],
            ),
            DType::Bool => {
                let c = self.op2("icmp ne", "i8", raw, "0");
                self.bool64(&c)
            }
            DType::U8 => self.ext("zext", raw, "i8"),
            DType::I8 => self.ext("sext", raw, "i8"),
            DType::I16 => self.ext("sext", raw, "i16"),
            DType::I32 => self.ext("sext", raw, "i32"),
            DType::F8E4M3 | DType::F8E5M2 => unreachable!("`check` declines FP8"),
        }
    }

    fn ext(&mut self, how: &str, v: &str, from: &str) -> String {
        let r = self.tmp();
        self.line(format!("{r} = {how} {from} {v} to i64"));
        r
    }

    /// Store `s`: its value converted to the output's dtype, written at
    /// its index (proved inside the output by [`check`]).
    fn store(&mut self, s: usize) {
        let st = &self.k.stores[s];
        let (output, index, value) = (st.output, st.index.clone(), st.value);
        let out = self.k.outputs[output].dtype;
        let v = self.val(value);
        let v = self.convert(&v, self.k.insts[value].dtype, out);
        let idx = self.expr(&index);
        let bits = match out {
            DType::F32 | DType::F64 | DType::I64 => v,
            DType::F16 | DType::BF16 => self.call(
                "i16",
                "smelt_f32_to_half",
                &[format!("i32 {}", dtype_id(out)), format!("float {v}")],
            ),
            _ => {
                let r = self.tmp();
                self.line(format!("{r} = trunc i64 {v} to {}", mem_ty(out)));
                r
            }
        };
        let ptr = self.tmp();
        self.line(format!(
            "{ptr} = getelementptr {}, ptr %out{output}, i64 {idx}",
            mem_ty(out)
        ));
        self.line(format!("store {} {bits}, ptr {ptr}", mem_ty(out)));
    }

    /// `v` (of dtype `from`) converted to `to` by the one conversion rule,
    /// as [`crate::exec::vals::convert`] does.
    fn convert(&mut self, v: &str, from: DType, to: DType) -> String {
        if from == to {
            return v.to_string();
        }
        match class(from) {
            Class::F32 | Class::F64 => {
                let x = self.widen(v, from);
                match class(to) {
                    Class::F32 if to == DType::F32 => self.trunc32(&x),
                    Class::F32 => {
                        let r = self.round(&x, to);
                        self.trunc32(&r)
                    }
                    Class::F64 => x,
                    Class::I64 => self.saturate(&x, to),
                }
            }
            Class::I64 => match class(to) {
                Class::F32 if to == DType::F32 => {
                    let r = self.tmp();
                    self.line(format!("{r} = sitofp i64 {v} to float"));
                    r
                }
                Class::F32 => {
                    let r = self.call(
                        "double",
                        "smelt_from_int",
                        &[format!("i32 {}", dtype_id(to)), format!("i64 {v}")],
                    );
                    self.trunc32(&r)
                }
                Class::F64 => {
                    let r = self.tmp();
                    self.line(format!("{r} = sitofp i64 {v} to double"));
                    r
                }
                Class::I64 => self.wrap(v, to),
            },
        }
    }

    /// A float class value as `double` (exact).
    fn widen(&mut self, v: &str, dt: DType) -> String {
        if class(dt) == Class::F64 {
            return v.to_string();
        }
        let r = self.tmp();
        self.line(format!("{r} = fpext float {v} to double"));
        r
    }

    /// `x as f32`.
    fn trunc32(&mut self, x: &str) -> String {
        let r = self.tmp();
        self.line(format!("{r} = fptrunc double {x} to float"));
        r
    }

    /// [`DType::round`] of a `double` to a half type.
    fn round(&mut self, x: &str, dt: DType) -> String {
        self.call(
            "double",
            "smelt_round",
            &[format!("i32 {}", dtype_id(dt)), format!("double {x}")],
        )
    }

    /// [`DType::saturate`]: a `double` to an integer dtype.
    fn saturate(&mut self, x: &str, dt: DType) -> String {
        match dt {
            DType::Bool => {
                let c = self.op2("fcmp une", "double", x, "0.0");
                self.bool64(&c)
            }
            _ => {
                let r = self.call("i64", "llvm.fptosi.sat.i64.f64", &[format!("double {x}")]);
                if dt == DType::I64 {
                    return r;
                }
                let a = self.call(
                    "i64",
                    "llvm.smax.i64",
                    &[format!("i64 {r}"), format!("i64 {}", dt.int_min())],
                );
                self.call(
                    "i64",
                    "llvm.smin.i64",
                    &[format!("i64 {a}"), format!("i64 {}", dt.int_max())],
                )
            }
        }
    }

    /// [`DType::wrap`]: an `i64` to an integer dtype's value.
    fn wrap(&mut self, v: &str, dt: DType) -> String {
        match dt {
            DType::I64 => v.to_string(),
            DType::Bool => {
                let c = self.op2("icmp ne", "i64", v, "0");
                self.bool64(&c)
            }
            DType::U8 => self.op2("and", "i64", v, "255"),
            _ => {
                let t = self.tmp();
                self.line(format!("{t} = trunc i64 {v} to {}", mem_ty(dt)));
                self.ext("sext", &t, mem_ty(dt))
            }
        }
    }

    /// `op` of `x` (dtype `from`) with result dtype `dt`, as
    /// `exec::arith::unary`: in `f64` rounded once for `F32`, rounded by
    /// [`DType::round`] for the halves (from the `f32` polynomial of
    /// [`exp_ops`] for `exp` and the activations it takes, rounded again
    /// for the halves), `eval_int` for integers.
    fn unary(&mut self, op: UnaryOp, x: &str, from: DType, dt: DType) -> String {
        let cd = if op == UnaryOp::Not { DType::Bool } else { dt };
        let a = self.convert(x, from, cd);
        match class(cd) {
            Class::F32 if dt == DType::F32 && exp_ops::covers(op) => self.through_exp(op, &a),
            Class::F32 if exp_ops::covers(op) => {
                let v = self.through_exp(op, &a);
                let r = self.widen(&v, DType::F32);
                let r = self.round(&r, dt);
                self.trunc32(&r)
            }
            Class::F32 => {
                let x = self.widen(&a, cd);
                let r = self.unary_f64(op, &x);
                if dt == DType::F32 {
                    self.trunc32(&r)
                } else {
                    let r = self.round(&r, dt);
                    self.trunc32(&r)
                }
            }
            Class::F64 => self.unary_f64(op, &a),
            Class::I64 => self.unary_int(op, &a, dt),
        }
    }

    /// `UnaryOp::eval` on a `double`: inline where the reference is one
    /// IEEE operation or selection, else the reference through its shim.
    fn unary_f64(&mut self, op: UnaryOp, x: &str) -> String {
        let intr = |f: &str| format!("llvm.{f}.f64");
        match op {
            UnaryOp::Neg => {
                let r = self.tmp();
                self.line(format!("{r} = fneg double {x}"));
                r
            }
            UnaryOp::Abs => self.call("double", &intr("fabs"), &[format!("double {x}")]),
            UnaryOp::Sqrt => self.call("double", &intr("sqrt"), &[format!("double {x}")]),
            UnaryOp::Floor => self.call("double", &intr("floor"), &[format!("double {x}")]),
            UnaryOp::Ceil => self.call("double", &intr("ceil"), &[format!("double {x}")]),
            UnaryOp::Trunc => self.call("double", &intr("trunc"), &[format!("double {x}")]),
            UnaryOp::Round => self.call("double", &intr("roundeven"), &[format!("double {x}")]),
            UnaryOp::Rsqrt => {
                let s = self.call("double", &intr("sqrt"), &[format!("double {x}")]);
                self.op2("fdiv", "double", "1.0", &s)
            }
            UnaryOp::Recip => self.op2("fdiv", "double", "1.0", x),
            UnaryOp::Square => self.op2("fmul", "double", x, x),
            UnaryOp::Relu => {
                // `x > 0 || x is NaN`.
                let c = self.op2("fcmp ugt", "double", x, "0.0");
                self.select(&c, "double", x, "0.0")
            }
            UnaryOp::Not => {
                let c = self.op2("fcmp oeq", "double", x, "0.0");
                let r = self.tmp();
                self.line(format!("{r} = uitofp i1 {c} to double"));
                r
            }
            UnaryOp::Sign => {
                let gt = self.op2("fcmp ogt", "double", x, "0.0");
                let lt = self.op2("fcmp olt", "double", x, "0.0");
                let eq = self.op2("fcmp oeq", "double", x, "0.0");
                let z = self.select(&eq, "double", "0.0", x);
                let n = self.select(&lt, "double", "-1.0", &z);
                self.select(&gt, "double", "1.0", &n)
            }
            UnaryOp::BitNot => {
                let n = self.tmp();
                self.line(format!("{n} = fneg double {x}"));
                self.op2("fsub", "double", &n, "1.0")
            }
            _ => self.call(
                "double",
                "smelt_unary",
                &[format!("i32 {}", unary_id(op)), format!("double {x}")],
            ),
        }
    }

    /// `UnaryOp::eval_int(dt, x)`.
    fn unary_int(&mut self, op: UnaryOp, x: &str, dt: DType) -> String {
        let r = match op {
            UnaryOp::Neg => self.op2("sub", "i64", "0", x),
            UnaryOp::Abs => {
                let n = self.op2("sub", "i64", "0", x);
                let neg = self.op2("icmp slt", "i64", x, "0");
                self.select(&neg, "i64", &n, x)
            }
            UnaryOp::Relu => self.call(
                "i64",
                "llvm.smax.i64",
                &[format!("i64 {x}"), "i64 0".into()],
            ),
            UnaryOp::Square => self.op2("mul", "i64", x, x),
            UnaryOp::Not => {
                let c = self.op2("icmp eq", "i64", x, "0");
                self.bool64(&c)
            }
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc => x.to_string(),
            UnaryOp::Sign => {
                let gt = self.op2("icmp sgt", "i64", x, "0");
                let lt = self.op2("icmp slt", "i64", x, "0");
                let g = self.bool64(&gt);
                let l = self.bool64(&lt);
                self.op2("sub", "i64", &g, &l)
            }
            UnaryOp::BitNot => self.op2("xor", "i64", x, "-1"),
            _ => unreachable!("declined by check"),
        };
        self.wrap(&r, dt)
    }

    /// `op(a, b)` as `exec::arith::binary`: operands converted to
    /// [`BinaryOp::compute_dtype`], the op, the result converted to `dt`.
    fn binary(&mut self, op: BinaryOp, a: (&str, DType), b: (&str, DType), dt: DType) -> String {
        let cd = op.compute_dtype(a.1, b.1, dt);
        let x = self.convert(a.0, a.1, cd);
        let y = self.convert(b.0, b.1, cd);
        let rd = if op.is_comparison() { DType::Bool } else { cd };
        let r = match class(cd) {
            Class::F32 | Class::F64 => {
                let x = self.widen(&x, cd);
                let y = self.widen(&y, cd);
                let r = self.binary_f64(op, &x, &y);
                if op.is_comparison() || cd == DType::F64 {
                    r
                } else if cd == DType::F32 {
                    self.trunc32(&r)
                } else {
                    let r = self.round(&r, cd);
                    self.trunc32(&r)
                }
            }
            Class::I64 => self.binary_int(op, &x, &y, cd),
        };
        self.convert(&r, rd, dt)
    }

    /// `BinaryOp::eval` on `double`s; comparisons give the `i64` 0 or 1.
    fn binary_f64(&mut self, op: BinaryOp, x: &str, y: &str) -> String {
        let cmp = |e: &mut Self, pred: &str| {
            let c = e.op2(&format!("fcmp {pred}"), "double", x, y);
            e.bool64(&c)
        };
        match op {
            BinaryOp::Add => self.op2("fadd", "double", x, y),
            BinaryOp::Sub => self.op2("fsub", "double", x, y),
            BinaryOp::Mul => self.op2("fmul", "double", x, y),
            BinaryOp::Div => self.op2("fdiv", "double", x, y),
            BinaryOp::Max | BinaryOp::Min => {
                let f = if op == BinaryOp::Max {
                    "maxnum"
                } else {
                    "minnum"
                };
                let m = self.call(
                    "double",
                    &format!("llvm.{f}.f64"),
                    &[format!("double {x}"), format!("double {y}")],
                );
                let nan = self.op2("fcmp uno", "double", x, y);
                self.select(&nan, "double", &flit(f64::NAN), &m)
            }
            BinaryOp::Lt => cmp(self, "olt"),
            BinaryOp::Le => cmp(self, "ole"),
            BinaryOp::Gt => cmp(self, "ogt"),
            BinaryOp::Ge => cmp(self, "oge"),
            BinaryOp::Eq => cmp(self, "oeq"),
            BinaryOp::Ne => cmp(self, "une"),
            BinaryOp::And | BinaryOp::Or => {
                let a = self.op2("fcmp une", "double", x, "0.0");
                let b = self.op2("fcmp une", "double", y, "0.0");
                let how = if op == BinaryOp::And { "and" } else { "or" };
                let c = self.op2(how, "i1", &a, &b);
                self.bool64(&c)
            }
            _ => self.call(
                "double",
                "smelt_binary",
                &[
                    format!("i32 {}", binary_id(op)),
                    format!("double {x}"),
                    format!("double {y}"),
                ],
            ),
        }
    }

    /// `BinaryOp::eval_int(cd, x, y)`.
    fn binary_int(&mut self, op: BinaryOp, x: &str, y: &str, cd: DType) -> String {
        let cmp = |e: &mut Self, pred: &str| {
            let c = e.op2(&format!("icmp {pred}"), "i64", x, y);
            e.bool64(&c)
        };
        let r = match op {
            BinaryOp::Add => self.op2("add", "i64", x, y),
            BinaryOp::Sub => self.op2("sub", "i64", x, y),
            BinaryOp::Mul => self.op2("mul", "i64", x, y),
            BinaryOp::Max => self.call(
                "i64",
                "llvm.smax.i64",
                &[format!("i64 {x}"), format!("i64 {y}")],
            ),
            BinaryOp::Min => self.call(
                "i64",
                "llvm.smin.i64",
                &[format!("i64 {x}"), format!("i64 {y}")],
            ),
            BinaryOp::BitAnd => self.op2("and", "i64", x, y),
            BinaryOp::BitOr => self.op2("or", "i64", x, y),
            BinaryOp::BitXor => self.op2("xor", "i64", x, y),
            BinaryOp::Lt => return cmp(self, "slt"),
            BinaryOp::Le => return cmp(self, "sle"),
            BinaryOp::Gt => return cmp(self, "sgt"),
            BinaryOp::Ge => return cmp(self, "sge"),
            BinaryOp::Eq => return cmp(self, "eq"),
            BinaryOp::Ne => return cmp(self, "ne"),
            BinaryOp::And | BinaryOp::Or => {
                let a = self.op2("icmp ne", "i64", x, "0");
                let b = self.op2("icmp ne", "i64", y, "0");
                let how = if op == BinaryOp::And { "and" } else { "or" };
                let c = self.op2(how, "i1", &a, &b);
                return self.bool64(&c);
            }
            // The rest already wrap to `cd`.
            _ => {
                return self.call(
                    "i64",
                    "smelt_binary_int",
                    &[
                        format!("i32 {}", binary_id(op)),
                        format!("i32 {}", dtype_id(cd)),
                        format!("i64 {x}"),
                        format!("i64 {y}"),
                    ],
                )
            }
        };
        self.wrap(&r, cd)
    }

    /// `F32` `op` ([`exp_ops::covers`]) as [`exp_ops::unary`] computes it:
    /// on the fast pass the same branch-free `f32` operations in the same
    /// order (its fused multiply-adds as `llvm.fma`, so the same
    /// roundings), the run checked for the arguments `exp_ops` redoes
    /// ([`Emitter::track`]); on the redo the reference for those.
    fn through_exp(&mut self, op: UnaryOp, x: &str) -> String {
        self.has_exp = true;
        let (c, fast) = match op {
            UnaryOp::Exp => {
                let e = self.exp_poly(x, &exp_ops::EXP_SUB.to_string());
                (x.to_string(), e)
            }
            UnaryOp::Sigmoid => {
                let t = self.fneg(x);
                self.ratio(&flit(1.0), &t)
            }
            UnaryOp::Silu => {
                let t = self.fneg(x);
                self.ratio(x, &t)
            }
            UnaryOp::Tanh => self.tanh(x),
            UnaryOp::GeluTanh => {
                let t = self.gelu_arg(x);
                self.ratio(x, &t)
            }
            UnaryOp::Log => self.log(x),
            UnaryOp::Log2 => {
                let (c, e, ln_m) = self.log_parts(x);
                let log2e = flit(std::f32::consts::LOG2_E as f64);
                (c, self.fma(&ln_m, &log2e, &e))
            }
            UnaryOp::Log1p => self.log1p(x),
            UnaryOp::Expm1 => self.expm1(x),
            UnaryOp::Erf => ("0.0".to_string(), self.erf(x)),
            UnaryOp::Gelu => ("0.0".to_string(), self.gelu(x)),
            _ => unreachable!("exp_ops::covers"),
        };
        if !exp_ops::redoes(op) {
            return fast;
        }
        let range = exp_ops::EXP_RANGE as f64;
        if self.fast {
            // A run with a checked argument past the range (or NaN) is
            // redone, so the fast loop needs no clamp.
            self.track(&c, DType::F32, None, bits(DType::F32, range), None);
            return fast;
        }
        let ac = self.call("float", "llvm.fabs.f32", &[format!("float {c}")]);
        let inr = self.op2("fcmp ole", "float", &ac, &flit(range));
        // The reference on a branch, taken only by the values redone: a
        // call at every point of a flagged run made a GELU after a product
        // (2% of its values redone, in most runs) 20 times slower.
        let (from, id) = (self.block.clone(), self.next);
        let (slow_block, join) = (format!("ref{id}"), format!("join{id}"));
        self.line(format!("br i1 {inr}, label %{join}, label %{slow_block}"));
        self.out.push_str(&format!("{slow_block}:\n"));
        let xd = self.widen(x, DType::F32);
        let r = self.call(
            "double",
            "smelt_unary",
            &[format!("i32 {}", unary_id(op)), format!("double {xd}")],
        );
        let slow = self.trunc32(&r);
        self.line(format!("br label %{join}"));
        self.out.push_str(&format!("{join}:\n"));
        self.block = join;
        let v = self.tmp();
        self.line(format!(
            "{v} = phi float [ {fast}, %{from} ], [ {slow}, %{slow_block} ]"
        ));
        v
    }

    /// `exp_ops::ratio(num, t)`: `(c, num / (1 + e^t))`, past `exp`'s
    /// range `num` below it and `num e^-t` (scaled by `2^64`) above.
    fn ratio(&mut self, num: &str, t: &str) -> (String, String) {
        let range = exp_ops::EXP_RANGE as f64;
        let high = self.op2("fcmp ogt", "float", t, &flit(range));
        let low = self.op2("fcmp olt", "float", t, &flit(-range));
        let out = self.op2("or", "i1", &high, &low);
        let c = self.select(&out, "float", "0.0", t);
        let neg = self.fneg(t);
        let u0 = self.select(&high, "float", &neg, &c);
        let far = self.op2(
            "fcmp olt",
            "float",
            &u0,
            &flit(-exp_ops::SCALED_RANGE as f64),
        );
        let u = self.select(&far, "float", "0.0", &u0);
        let sub = self.select(
            &high,
            "i32",
            &exp_ops::EXP_SUB_SCALED.to_string(),
            &exp_ops::EXP_SUB.to_string(),
        );
        let e0 = self.exp_poly(&u, &sub);
        let zero = self.op2("or", "i1", &far, &low);
        let e = self.select(&zero, "float", "0.0", &e0);
        let ne = self.op2("fmul", "float", num, &e);
        let vh = self.op2("fmul", "float", &ne, &flit(exp_ops::TWO_M64 as f64));
        let d = self.op2("fadd", "float", &flit(1.0), &e);
        let vl = self.op2("fdiv", "float", num, &d);
        let v = self.select(&high, "float", &vh, &vl);
        (c, v)
    }

    /// `exp_ops::tanh(x)`: `(c, tanh x)`.
    fn tanh(&mut self, x: &str) -> (String, String) {
        let range = exp_ops::EXP_RANGE as f64;
        let a = self.call("float", "llvm.fabs.f32", &[format!("float {x}")]);
        let t = self.op2("fmul", "float", &flit(2.0), &a);
        let high = self.op2("fcmp ogt", "float", &t, &flit(range));
        let c = self.select(&high, "float", "0.0", &t);
        let e = self.exp_poly(&c, &exp_ops::EXP_SUB.to_string());
        let d = self.op2("fadd", "float", &e, &flit(1.0));
        let q = self.op2("fdiv", "float", &flit(2.0), &d);
        let l = self.op2("fsub", "float", &flit(1.0), &q);
        let large = self.select(&high, "float", &flit(1.0), &l);
        let s = self.op2("fmul", "float", x, x);
        let [c0, cs @ ..] = exp_ops::TANH_POLY;
        let mut p = flit(c0 as f64);
        for k in cs {
            p = self.fma(&p, &s, &flit(k as f64));
        }
        let ps = self.op2("fmul", "float", &p, &s);
        let small = self.fma(&ps, &a, &a);
        let is_small = self.op2("fcmp olt", "float", &a, &flit(exp_ops::TANH_SMALL as f64));
        let r = self.select(&is_small, "float", &small, &large);
        let v = self.call(
            "float",
            "llvm.copysign.f32",
            &[format!("float {r}"), format!("float {x}")],
        );
        (c, v)
    }

    /// `exp_ops::expm1(x)`: `(c, e^x - 1)`.
    fn expm1(&mut self, x: &str) -> (String, String) {
        let nan = self.op2("fcmp uno", "float", x, x);
        let c = self.select(&nan, "float", &flit(f64::NAN), "0.0");
        // `f32::clamp`: NaN stays NaN (its result is redone).
        let (lo, hi) = (
            flit(EXPM1_RANGE.0 as f32 as f64),
            flit(EXPM1_RANGE.1 as f32 as f64),
        );
        let below = self.op2("fcmp olt", "float", x, &lo);
        let x0 = self.select(&below, "float", &lo, x);
        let above = self.op2("fcmp ogt", "float", &x0, &hi);
        let xc = self.select(&above, "float", &hi, &x0);
        let t = self.op2("fmul", "float", &xc, &flit(std::f32::consts::LOG2_E as f64));
        let k = self.call("float", "llvm.roundeven.f32", &[format!("float {t}")]);
        let r0 = self.fma(&k, &flit(-LN2_HI as f64), &xc);
        let r = self.fma(&k, &flit(-LN2_LO as f64), &r0);
        let p = self.horner(&r, &EXPM1);
        let e = self.op2("fmul", "float", &r, &p);
        let ki = self.tmp();
        self.line(format!("{ki} = fptosi float {k} to i32"));
        let kb = self.op2("add", "i32", &ki, "126");
        let sh = self.op2("shl", "i32", &kb, "23");
        let sv = self.tmp();
        self.line(format!("{sv} = bitcast i32 {sh} to float"));
        let half = self.op2("fsub", "float", &sv, &flit(0.5));
        let y = self.fma(&sv, &e, &half);
        let yy = self.op2("fadd", "float", &y, &y);
        let zero = self.op2("fcmp oeq", "float", x, "0.0");
        let v = self.select(&zero, "float", x, &yy);
        (c, v)
    }

    /// `exp_ops::log(x)`: `(c, ln x)`.
    fn log(&mut self, x: &str) -> (String, String) {
        let (c, e, ln_m) = self.log_parts(x);
        let ln2 = flit(std::f32::consts::LN_2 as f64);
        (c, self.fma(&e, &ln2, &ln_m))
    }

    /// `exp_ops::log1p(x)`: `(c, ln(1 + x))`.
    fn log1p(&mut self, x: &str) -> (String, String) {
        let u = self.op2("fadd", "float", x, &flit(1.0));
        let (cu, l) = self.log(&u);
        let um1 = self.op2("fsub", "float", &u, &flit(1.0));
        let q = self.op2("fdiv", "float", x, &um1);
        let v = self.op2("fmul", "float", &l, &q);
        let one = self.op2("fcmp oeq", "float", &u, &flit(1.0));
        let c = self.select(&one, "float", "0.0", &cu);
        let r = self.select(&one, "float", x, &v);
        (c, r)
    }

    /// `exp_ops::log_parts(x)`: `(c, e, ln m)`, `c` NaN (redone) unless
    /// `x` is normal, positive and finite.
    fn log_parts(&mut self, x: &str) -> (String, String, String) {
        let lo = self.op2("fcmp oge", "float", x, &flit(f32::MIN_POSITIVE as f64));
        let hi = self.op2("fcmp olt", "float", x, &flit(f64::INFINITY));
        let normal = self.op2("and", "i1", &lo, &hi);
        let c = self.select(&normal, "float", "0.0", &flit(f64::NAN));
        let bits = self.tmp();
        self.line(format!("{bits} = bitcast float {x} to i32"));
        let mant = self.op2("and", "i32", &bits, &0x7F_FFFF.to_string());
        let m0 = self.op2("or", "i32", &mant, &0x3F80_0000.to_string());
        let big = self.op2("icmp ugt", "i32", &m0, &exp_ops::SQRT2_BITS.to_string());
        let mh = self.op2("sub", "i32", &m0, &0x80_0000.to_string());
        let m = self.select(&big, "i32", &mh, &m0);
        let sh = self.op2("lshr", "i32", &bits, "23");
        let e0 = self.op2("sub", "i32", &sh, "127");
        let inc = self.tmp();
        self.line(format!("{inc} = zext i1 {big} to i32"));
        let e = self.op2("add", "i32", &e0, &inc);
        let ef = self.tmp();
        self.line(format!("{ef} = sitofp i32 {e} to float"));
        let mf = self.tmp();
        self.line(format!("{mf} = bitcast i32 {m} to float"));
        let num = self.op2("fsub", "float", &mf, &flit(1.0));
        let den = self.op2("fadd", "float", &mf, &flit(1.0));
        let sv = self.op2("fdiv", "float", &num, &den);
        let s2 = self.op2("fmul", "float", &sv, &sv);
        let p0 = self.horner(&s2, &exp_ops::LOG_SERIES);
        let p = self.op2("fmul", "float", &p0, &s2);
        let two_s = self.op2("fadd", "float", &sv, &sv);
        let ln_m = self.fma(&two_s, &p, &two_s);
        (c, ef, ln_m)
    }

    /// `exp_ops::erf(x)`, never redone.
    fn erf(&mut self, x: &str) -> String {
        let (small, tail, big) = self.erf_parts(x);
        let one_minus = self.op2("fsub", "float", &flit(1.0), &tail);
        let large = self.call(
            "float",
            "llvm.copysign.f32",
            &[format!("float {one_minus}"), format!("float {x}")],
        );
        self.select(&big, "float", &large, &small)
    }

    /// `exp_ops::gelu(x)`, the exact GELU, never redone.
    fn gelu(&mut self, x: &str) -> String {
        let u = self.op2(
            "fmul",
            "float",
            x,
            &flit(std::f32::consts::FRAC_1_SQRT_2 as f64),
        );
        let (small, tail, big) = self.erf_parts(&u);
        let half_tail = self.op2("fmul", "float", &tail, &flit(0.5));
        let upper = self.op2("fsub", "float", &flit(1.0), &half_tail);
        let pos = self.op2("fcmp ogt", "float", &u, "0.0");
        let far = self.select(&pos, "float", &upper, &half_tail);
        let near = self.fma(&small, &flit(0.5), &flit(0.5));
        let phi = self.select(&big, "float", &far, &near);
        self.op2("fmul", "float", x, &phi)
    }

    /// `exp_ops::erf_parts(x)`: `(small, tail, big)`.
    fn erf_parts(&mut self, x: &str) -> (String, String, String) {
        let a = self.call("float", "llvm.fabs.f32", &[format!("float {x}")]);
        let z = self.op2("fmul", "float", x, x);
        let p = self.horner(&z, &ERF_SMALL);
        let small = self.fma(x, &p, x);
        let end = flit(ERFC_END as f32 as f64);
        let ac = self.call(
            "float",
            "llvm.minnum.f32",
            &[format!("float {a}"), format!("float {end}")],
        );
        let t = self.op2("fsub", "float", &ac, &flit(ERFC_CENTRE as f32 as f64));
        let q = self.horner(&t, &ERFC_LOG);
        let e = self.exp_poly(&q, &exp_ops::EXP_SUB.to_string());
        let inside = self.op2("fcmp olt", "float", &a, &end);
        let tail = self.select(&inside, "float", &e, "0.0");
        let big = self.op2("fcmp oge", "float", &a, &flit(ERF_SPLIT as f32 as f64));
        (small, tail, big)
    }

    /// `exp_ops::horner`: `P(z)`, coefficients highest power first rounded
    /// to `f32`, by fused multiply-adds.
    fn horner(&mut self, z: &str, coefs: &[f64]) -> String {
        let mut p = flit(coefs[0] as f32 as f64);
        for c in &coefs[1..] {
            p = self.fma(&p, z, &flit(*c as f32 as f64));
        }
        p
    }

    /// `exp_ops::gelu_arg(x)`: `-GELU_K (x + GELU_C x^3)`.
    fn gelu_arg(&mut self, x: &str) -> String {
        let x2 = self.op2("fmul", "float", x, x);
        let x3 = self.op2("fmul", "float", &x2, x);
        let inner = self.fma(&x3, &flit(exp_ops::GELU_C as f64), x);
        self.op2("fmul", "float", &inner, &flit(-exp_ops::GELU_K as f64))
    }

    /// `-x` of a `float`.
    fn fneg(&mut self, x: &str) -> String {
        let m = self.tmp();
        self.line(format!("{m} = fneg float {x}"));
        m
    }

    /// Keeps the largest of the bits of `|x|` (`F32` or `F64`) over the
    /// run, and the least minus one where the domain has a least magnitude
    /// (`least`: those bits minus one; a zero wraps to the largest, so
    /// zeros pass); the run is redone where they leave the domain up to
    /// `most`, or `ok` (an `i1` the same along the run) is false
    /// ([`Span`]). One or two integer reductions a point, where a compare
    /// and a flag took a mask, a merge and a byte reduction.
    fn track(&mut self, x: &str, dt: DType, least: Option<u64>, most: u64, ok: Option<String>) {
        let (t, it) = match dt {
            DType::F32 => ("float", "i32"),
            _ => ("double", "i64"),
        };
        let sp = Span {
            id: self.spans.len(),
            ty: it,
            least,
            most,
            ok,
        };
        let xb = self.tmp();
        self.line(format!("{xb} = bitcast {t} {x} to {it}"));
        let mag = self.op2(
            "and",
            it,
            &xb,
            &(u64::MAX >> (65 - 8 * sp.bytes())).to_string(),
        );
        let mut accs = vec![(sp.hi(), "umax", mag.clone())];
        if least.is_some() {
            accs.push((sp.lo(), "umin", self.op2("add", it, &mag, "-1")));
        }
        for (acc, f, v) in accs {
            let old = self.tmp();
            self.line(format!("{old} = load {it}, ptr {acc}"));
            let new = self.call(
                it,
                &format!("llvm.{f}.{it}"),
                &[format!("{it} {old}"), format!("{it} {v}")],
            );
            self.line(format!("store {it} {new}, ptr {acc}"));
        }
        self.spans.push(sp);
    }

    /// Whether value `v` is the same at every point of a run.
    fn same_along_run(&self, v: Val) -> bool {
        match self.plan.level[v] {
            Level::Uniform => true,
            Level::Row => self.rows_span_runs,
            Level::Elem => false,
        }
    }

    /// `x / y` for `F32` or `F64` values (`dt`) with `y` the same along the
    /// run ([`Emitter::same_along_run`]): a product by `y`'s correctly
    /// rounded reciprocal `r` and one remainder step, `q0 = x r`, `q = q0 +
    /// (x - y q0) r` in fused multiply-adds, which is the correctly rounded
    /// quotient (Markstein's theorem) where the remainder is exact and
    /// nothing underflows or overflows: `|y|` in `[2^-24, 2^24]` and `x`
    /// zero or in `[2^-100, 2^100]` for `F32` (`[2^-500, 2^500]` and
    /// `[2^-400, 2^400]` for `F64`). `q` takes `q0`'s sign, which keeps a
    /// zero quotient's. The loop keeps the least and the largest of `|x|`'s
    /// bits (a zero's minus one, so that zeros pass) and the run is redone
    /// with divisions where they or `y` leave the domain ([`Span`]): two
    /// integer reductions a point instead of compares and a flag. Why: a
    /// 16-lane `vdivps` issues once in about 10 cycles on Intel's AVX-512
    /// cores, which bound softmax's stores pass there. `tests/llvm.rs`
    /// (`row_divisions`) checks the bits against the executor's division
    /// across the domain's ends.
    fn div_by_row(&mut self, x: &str, y: &str, dt: DType) -> String {
        let (t, s, ys, xs) = match dt {
            DType::F32 => ("float", "f32", 24, 100),
            _ => ("double", "f64", 500, 400),
        };
        let p2 = |e: i32| flit(2f64.powi(e));
        let r = self.op2("fdiv", t, "1.0", y);
        let q0 = self.op2("fmul", t, x, &r);
        let n = self.tmp();
        self.line(format!("{n} = fneg {t} {q0}"));
        let f = format!("llvm.fma.{s}");
        let rem = self.call(
            t,
            &f,
            &[n, y.to_string(), x.to_string()].map(|v| format!("{t} {v}")),
        );
        let q1 = self.call(t, &f, &[rem, r, q0.clone()].map(|v| format!("{t} {v}")));
        let q = self.call(
            t,
            &format!("llvm.copysign.{s}"),
            &[format!("{t} {q1}"), format!("{t} {q0}")],
        );
        let ay = self.call(t, &format!("llvm.fabs.{s}"), &[format!("{t} {y}")]);
        let lo = self.op2("fcmp oge", t, &ay, &p2(-ys));
        let hi = self.op2("fcmp ole", t, &ay, &p2(ys));
        let y_ok = self.op2("and", "i1", &lo, &hi);
        self.track(
            x,
            dt,
            Some(bits(dt, 2f64.powi(-xs)) - 1),
            bits(dt, 2f64.powi(xs)),
            Some(y_ok),
        );
        q
    }

    /// `exp_ops`' polynomial for `e^c` (`exp_core`: its constants, its
    /// operations in its order, no clamp), its exponent bits less `sub`
    /// ([`exp_ops::EXP_SUB`], or `EXP_SUB_SCALED` for `2^64 e^c`).
    fn exp_poly(&mut self, c: &str, sub: &str) -> String {
        let f = |v: f32| flit(v as f64);
        let t = self.fma(c, &f(std::f32::consts::LOG2_E), &f(12_582_912.0));
        let n = self.op2("fsub", "float", &t, &f(12_582_912.0));
        let m = self.fneg(&n);
        let r0 = self.fma(&m, &f(LN2_HI), c);
        let r = self.fma(&m, &f(LN2_LO), &r0);
        let mut p = f(1.987_569_1e-4);
        for k in [
            1.398_199_9e-3f32,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            0.5,
        ] {
            p = self.fma(&p, &r, &f(k));
        }
        let rr = self.op2("fmul", "float", &r, &r);
        let e1 = self.fma(&p, &rr, &r);
        let e = self.op2("fadd", "float", &e1, &f(1.0));
        let tb = self.tmp();
        self.line(format!("{tb} = bitcast float {t} to i32"));
        let sb = self.op2("sub", "i32", &tb, sub);
        let sh = self.op2("shl", "i32", &sb, "23");
        let scale = self.tmp();
        self.line(format!("{scale} = bitcast i32 {sh} to float"));
        self.op2("fmul", "float", &e, &scale)
    }

    /// `a * b + c` in `f32`, rounded once.
    fn fma(&mut self, a: &str, b: &str, c: &str) -> String {
        let args = [a, b, c].map(|v| format!("float {v}"));
        self.call("float", "llvm.fma.f32", &args)
    }
}

/// Whether a load of `input` at `index` where `valid` is checked at each
/// point (its bounds do not prove it inside the buffer, or it has a
/// condition).
pub(super) fn checked(k: &Kernel, input: usize, index: &Expr, valid: &Cond) -> bool {
    let (lo, hi) = index.bounds(&k.ranges);
    !valid.is_always() || lo < 0 || hi >= k.inputs[input].len as i64
}

/// Whether computing element-level instruction `v` (of a kernel [`check`]
/// admits) at a point, given its
/// operands, costs more than storing it and loading it back: it calls a
/// Rust function ([`shims`]: transcendentals, half roundings and
/// conversions), is `F32` `exp`'s polynomial, or loads through a view (a
/// step other than 0 or 1 along the innermost variable, a division of
/// it, or checks).
pub fn costly(k: &Kernel, plan: &Plan, v: Val) -> bool {
    if let Inst::Load {
        input,
        index,
        valid,
    } = &k.insts[v].inst
    {
        let runs = &plan.runs[v];
        let inner = k.ranges.last().map_or(1, |r| (*r).max(1) as usize);
        if checked(k, *input, index, valid) || !matches!(runs.index, 0 | 1) || runs.span < inner {
            return true;
        }
    }
    // What the pass would emit, with the operands as placeholders.
    let none = vec![None; k.insts.len()];
    let mut e = Emitter::new(k, plan, &none, k.ranges.len().max(1));
    for (c, name) in e.coords.iter_mut().enumerate() {
        *name = format!("%c{c}");
    }
    e.at = "%at".to_string();
    for o in k.insts[v].inst.operands() {
        e.memo[o] = Some(format!("%v{o}"));
    }
    e.val(v);
    e.shim_calls > 0 || e.has_exp
}

/// The domain a fast loop checks over a run ([`Emitter::track`]): the
/// largest of `|x|`'s bits and, where the domain has a least magnitude,
/// the least minus one, in accumulators; and a condition the same along
/// the run.
struct Span {
    /// The span's number in its pass.
    id: usize,
    /// The integer type of the bits (`i32` or `i64`).
    ty: &'static str,
    /// The bits of the domain's least magnitude, minus one, and of its
    /// largest.
    least: Option<u64>,
    most: u64,
    /// An `i1` of the loop (which dominates the check after it).
    ok: Option<String>,
}

impl Span {
    fn bytes(&self) -> u32 {
        if self.ty == "i32" {
            4
        } else {
            8
        }
    }
    fn lo(&self) -> String {
        format!("%span{}.lo", self.id)
    }
    fn hi(&self) -> String {
        format!("%span{}.hi", self.id)
    }
    /// The accumulators, in the entry block.
    fn alloca(&self) -> String {
        format!(
            "  {} = alloca {t}\n  {} = alloca {t}\n",
            self.lo(),
            self.hi(),
            t = self.ty
        )
    }
    /// Before a run: the identities of `umin` and `umax`.
    fn start(&self) -> String {
        format!(
            "  store {t} -1, ptr {}\n  store {t} 0, ptr {}\n",
            self.lo(),
            self.hi(),
            t = self.ty
        )
    }
    /// After the fast loop: `to = from | (the run left the domain)`.
    fn outside(&self, from: &str, to: &str) -> String {
        let (t, id) = (self.ty, self.id);
        let least = self.least.unwrap_or(0);
        let ok = self.ok.as_deref().unwrap_or("true");
        format!(
            "  %span{id}.l = load {t}, ptr {lo}\n  %span{id}.h = load {t}, ptr {hi}\n  %span{id}.a = icmp ult {t} %span{id}.l, {least}\n  %span{id}.b = icmp ugt {t} %span{id}.h, {most}\n  %span{id}.c = xor i1 {ok}, true\n  %span{id}.d = or i1 %span{id}.a, %span{id}.b\n  %span{id}.e = or i1 %span{id}.d, %span{id}.c\n  {to} = or i1 {from}, %span{id}.e\n",
            lo = self.lo(),
            hi = self.hi(),
            most = self.most,
        )
    }
}

/// The bits of `x` as a value of `dt` (`F32` or `F64`).
fn bits(dt: DType, x: f64) -> u64 {
    match dt {
        DType::F32 => u64::from((x as f32).to_bits()),
        _ => x.to_bits(),
    }
}

/// The zero of `dt`'s class, as a literal.
fn zero(dt: DType) -> String {
    match class(dt) {
        Class::I64 => "0".to_string(),
        _ => "0.0".to_string(),
    }
}
