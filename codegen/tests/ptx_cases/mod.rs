//! Representative kernels built directly as IR, shared by the PTX tests.

use smelt_codegen::ptx::matmul::Elem;
use smelt_codegen::ptx::{emit, ptxas, PtxKernel, Target};
use smelt_codegen::{
    Arg, BinaryOp, Cond, DType, Expr, Inst, Kernel, KernelKind, Node, ReduceOp, ScanOp, Store,
    UnaryOp, Val,
};

/// True when `SMELT_REQUIRE_PTXAS=1` makes a missing `ptxas` a failure.
pub fn ptxas_required() -> bool {
    smelt_codegen::env::flag("SMELT_REQUIRE_PTXAS", false)
}

/// Emits every kernel for [`Target::CHECKED`], runs `check` on each
/// result, and assembles it with `ptxas`; panics on the first rejection.
/// Without `ptxas` prints `skipped: ptxas not found` (a failure with
/// `SMELT_REQUIRE_PTXAS=1`). Returns how many modules assembled.
#[allow(dead_code)] // not every test crate that shares this module uses it
pub fn assemble_all(kernels: &[Kernel], check: impl Fn(&Kernel, &PtxKernel)) -> usize {
    let mut emitted = Vec::new();
    for k in kernels {
        for t in Target::CHECKED {
            let p = emit(k, &t).unwrap_or_else(|e| panic!("{}: {e}", k.name));
            check(k, &p);
            emitted.push((k, t.sm, p.ptx));
        }
    }
    let jobs: Vec<_> = emitted
        .iter()
        .map(|(_, sm, ptx)| (ptx.as_str(), *sm))
        .collect();
    let mut assembled = 0;
    let mut failures = Vec::new();
    for ((k, sm, ptx), r) in emitted.iter().zip(ptxas::assemble_each(&jobs)) {
        match r {
            Ok(Some(_)) => assembled += 1,
            Ok(None) => {}
            Err(e) => failures.push(format!("{} sm_{sm}: {e}\n{ptx}", k.name)),
        }
    }
    if let Some(f) = failures.first() {
        panic!("{} kernels rejected by ptxas; first:\n{f}", failures.len());
    }
    if assembled == 0 {
        println!("skipped: ptxas not found");
        assert!(
            !ptxas_required(),
            "SMELT_REQUIRE_PTXAS=1 but ptxas was not found"
        );
    }
    assembled
}

/// `k` emitted for `t` (panics on an emitter error).
#[allow(dead_code)] // not every test crate that shares this module uses it
pub fn emit_for(k: &Kernel, t: &Target) -> PtxKernel {
    emit(k, t).unwrap_or_else(|e| panic!("{}: {e}", k.name))
}

/// Builds a kernel instruction by instruction.
pub struct Kb {
    pub k: Kernel,
}

impl Kb {
    pub fn new(name: &str, kind: KernelKind, ranges: &[i64], n_kept: usize) -> Kb {
        Kb {
            k: Kernel {
                name: name.into(),
                kind,
                ranges: ranges.into(),
                n_kept,
                inputs: vec![],
                outputs: vec![],
                scalars: vec![],
                insts: vec![],
                stores: vec![],
            },
        }
    }

    pub fn push(&mut self, inst: Inst, dtype: DType) -> Val {
        self.k.insts.push(Node { inst, dtype });
        self.k.insts.len() - 1
    }

    /// Loads from a new input of `len` elements.
    pub fn load(&mut self, dtype: DType, len: usize, index: Expr) -> Val {
        self.load_if(dtype, len, index, Cond::always())
    }

    pub fn load_if(&mut self, dtype: DType, len: usize, index: Expr, valid: Cond) -> Val {
        self.k.inputs.push(Arg { dtype, len });
        let input = self.k.inputs.len() - 1;
        self.push(
            Inst::Load {
                input,
                index,
                valid,
            },
            dtype,
        )
    }

    pub fn c(&mut self, v: f64, dtype: DType) -> Val {
        self.push(Inst::Const(v), dtype)
    }

    /// Reads a new scalar parameter of `dtype`.
    pub fn scalar(&mut self, dtype: DType) -> Val {
        self.k.scalars.push(dtype);
        self.push(Inst::Scalar(self.k.scalars.len() - 1), dtype)
    }

    pub fn un(&mut self, op: UnaryOp, a: Val) -> Val {
        let dt = op.out_dtype(self.k.insts[a].dtype);
        self.push(Inst::Unary(op, a), dt)
    }

    pub fn bin(&mut self, op: BinaryOp, a: Val, b: Val) -> Val {
        let dt = op.out_dtype(self.k.insts[a].dtype);
        self.push(Inst::Binary(op, a, b), dt)
    }

    pub fn cast(&mut self, a: Val, dtype: DType) -> Val {
        self.push(Inst::Cast(a), dtype)
    }

    pub fn reduce(&mut self, op: ReduceOp, a: Val) -> Val {
        let dt = op.out_dtype(self.k.insts[a].dtype);
        self.push(Inst::Reduce(op, a), dt)
    }

    /// Stores to a new output of `len` elements (of the value's dtype
    /// unless `dtype` is given).
    pub fn store(&mut self, len: usize, index: Expr, value: Val, dtype: Option<DType>) {
        let dtype = dtype.unwrap_or(self.k.insts[value].dtype);
        self.k.outputs.push(Arg { dtype, len });
        let output = self.k.outputs.len() - 1;
        self.k.stores.push(Store::write(output, index, value));
    }

    pub fn done(self) -> Kernel {
        self.k
    }
}

/// `sum(stride * var) + konst`.
pub fn lin(terms: &[(usize, i64)], konst: i64) -> Expr {
    terms.iter().fold(Expr::constant(konst), |e, (v, s)| {
        e.add(&Expr::var(*v).scale(*s))
    })
}

/// Row-major contiguous index over all variables of `ranges`.
pub fn contiguous(ranges: &[i64]) -> Expr {
    let mut stride = 1;
    let mut terms = Vec::new();
    for v in (0..ranges.len()).rev() {
        terms.push((v, stride));
        stride *= ranges[v];
    }
    lin(&terms, 0)
}

const FLOATS: [DType; 5] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::F8E4M3,
    DType::F8E5M2,
];
const ALL: [DType; 12] = DType::ALL;
const INTS: [DType; 5] = [DType::U8, DType::I8, DType::I16, DType::I32, DType::I64];

/// The unary ops with an `f64` PTX sequence.
pub const F64_UNARY: [UnaryOp; 18] = [
    UnaryOp::Exp,
    UnaryOp::Exp2,
    UnaryOp::Log,
    UnaryOp::Log2,
    UnaryOp::Sigmoid,
    UnaryOp::Silu,
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Relu,
    UnaryOp::Sqrt,
    UnaryOp::Rsqrt,
    UnaryOp::Recip,
    UnaryOp::Square,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Trunc,
    UnaryOp::Sign,
];

/// `out = op(x)` over `n` elements of dtype `dt`.
pub fn unary(op: UnaryOp, dt: DType, n: i64) -> Kernel {
    let mut kb = Kb::new(
        &format!("elementwise_{}_{dt}", op.name()),
        KernelKind::Elementwise,
        &[n],
        1,
    );
    let x = kb.load(dt, n as usize, Expr::var(0));
    let x = if op == UnaryOp::Not {
        kb.cast(x, DType::Bool)
    } else {
        x
    };
    let y = kb.un(op, x);
    kb.store(n as usize, Expr::var(0), y, None);
    kb.done()
}

/// `out = op(a, b)` over `n` elements, operands of dtype `dt`.
pub fn binary(op: BinaryOp, dt: DType, n: i64) -> Kernel {
    let mut kb = Kb::new(
        &format!("elementwise_{}_{dt}", op.name()),
        KernelKind::Elementwise,
        &[n],
        1,
    );
    let a = kb.load(dt, n as usize, Expr::var(0));
    let b = kb.load(dt, n as usize, Expr::var(0));
    let y = kb.bin(op, a, b);
    kb.store(n as usize, Expr::var(0), y, None);
    kb.done()
}

/// `out = cast(x)` from `from` to `to`.
pub fn cast(from: DType, to: DType, n: i64) -> Kernel {
    let mut kb = Kb::new(
        &format!("elementwise_cast_{from}_{to}"),
        KernelKind::Elementwise,
        &[n],
        1,
    );
    let x = kb.load(from, n as usize, Expr::var(0));
    let y = kb.cast(x, to);
    kb.store(n as usize, Expr::var(0), y, None);
    kb.done()
}

/// `a[m, n] + b[n]` (broadcast), f32.
pub fn broadcast_add(m: i64, n: i64, dt: DType) -> Kernel {
    let r = [m, n];
    let mut kb = Kb::new("elementwise_add_broadcast", KernelKind::Elementwise, &r, 2);
    let a = kb.load(dt, (m * n) as usize, contiguous(&r));
    let b = kb.load(dt, n as usize, Expr::var(1));
    let y = kb.bin(BinaryOp::Add, a, b);
    kb.store((m * n) as usize, contiguous(&r), y, None);
    kb.done()
}

/// `flip(a)` along the last axis of `[m, n]`, times the transpose of
/// `b[n, m]`.
pub fn flip_transpose(m: i64, n: i64) -> Kernel {
    let r = [m, n];
    let mut kb = Kb::new(
        "elementwise_flip_mul_transpose",
        KernelKind::Elementwise,
        &r,
        2,
    );
    let a = kb.load(DType::F32, (m * n) as usize, lin(&[(0, n), (1, -1)], n - 1));
    let b = kb.load(DType::F32, (m * n) as usize, lin(&[(0, 1), (1, m)], 0));
    let y = kb.bin(BinaryOp::Mul, a, b);
    kb.store((m * n) as usize, contiguous(&r), y, None);
    kb.done()
}

/// Padding by 2 on both sides of a length-`n` vector: masked loads and a
/// `Valid` select.
pub fn pad(n: i64) -> Kernel {
    let r = [n + 4];
    let mut kb = Kb::new("elementwise_pad_where", KernelKind::Elementwise, &r, 1);
    let valid = Cond::always().and_range(Expr::var(0).add_const(-2), 0, n, &r);
    let x = kb.load_if(
        DType::F32,
        n as usize,
        Expr::var(0).add_const(-2),
        valid.clone(),
    );
    let v = kb.push(Inst::Valid(valid), DType::Bool);
    let one = kb.c(-1.0, DType::F32);
    let y = kb.push(Inst::Where(v, x, one), DType::F32);
    kb.store((n + 4) as usize, Expr::var(0), y, None);
    kb.done()
}

/// A reshape of a transposed view: indices with divisions and remainders
/// (including of negative offsets).
pub fn div_mod(n: i64) -> Kernel {
    let r = [n * 6];
    let mut kb = Kb::new("elementwise_div_mod", KernelKind::Elementwise, &r, 1);
    let i = Expr::var(0);
    // element (i / 6, i % 6) of a [n, 6] view over a transposed [6, n].
    let idx = i.rem(6, &r).scale(n).add(&i.div(6, &r));
    let a = kb.load(DType::BF16, (6 * n) as usize, idx);
    let shifted = i.add_const(-7).div(5, &r).add(&i.add_const(-3).rem(4, &r));
    let valid = Cond::always().and_range(shifted.clone(), 0, 6 * n, &r);
    let b = kb.load_if(DType::I32, (6 * n) as usize, shifted, valid);
    let b = kb.cast(b, DType::BF16);
    let y = kb.bin(BinaryOp::Sub, a, b);
    kb.store((6 * n) as usize, Expr::var(0), y, Some(DType::F32));
    kb.done()
}

/// `op` over the last axis of a contiguous `[rows, len]` of `dt`.
pub fn reduce_last(op: ReduceOp, dt: DType, rows: i64, len: i64) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new(
        &format!("reduce_{}_{dt}", op.name()),
        KernelKind::Reduce,
        &r,
        1,
    );
    let x = kb.load(dt, (rows * len) as usize, contiguous(&r));
    let x = if matches!(op, ReduceOp::Sum | ReduceOp::Prod) && dt == DType::Bool {
        kb.cast(x, DType::I32)
    } else {
        x
    };
    let s = kb.reduce(op, x);
    kb.store(rows as usize, Expr::var(0), s, None);
    kb.done()
}

/// Scan `op` of a contiguous `[rows, len]` of `dt` (halves scanned in
/// `f32` and rounded back, integers in `i64` as the tensor API does)
/// along its last axis, or with `axis0` along
/// its first axis of a `[len, rows]` (a thread per row).
pub fn scan(op: ScanOp, dt: DType, rows: i64, len: i64, axis0: bool) -> Kernel {
    let r = [rows, len];
    let name = format!(
        "scan_{}_{dt}{}",
        op.name(),
        if axis0 { "_axis0" } else { "" }
    );
    let mut kb = Kb::new(&name, KernelKind::Scan, &r, 1);
    let index = if axis0 {
        lin(&[(0, 1), (1, rows)], 0)
    } else {
        contiguous(&r)
    };
    let x = kb.load(dt, (rows * len) as usize, index.clone());
    let acc = match dt {
        DType::F64 => DType::F64,
        _ if dt.is_float() => DType::F32,
        _ => DType::I64,
    };
    let x = if acc == dt { x } else { kb.cast(x, acc) };
    let out = if op.is_index() { DType::I64 } else { acc };
    let s = kb.push(Inst::Scan(op, x), out);
    let s = if op.is_index() || out == dt {
        s
    } else {
        kb.cast(s, dt)
    };
    kb.store((rows * len) as usize, index, s, None);
    kb.done()
}

/// Sum over the first axis of a contiguous `[len, cols]` (domain `[cols,
/// len]`).
pub fn reduce_first(len: i64, cols: i64) -> Kernel {
    let r = [cols, len];
    let mut kb = Kb::new("reduce_sum_axis0", KernelKind::Reduce, &r, 1);
    let x = kb.load(
        DType::F32,
        (len * cols) as usize,
        lin(&[(0, 1), (1, cols)], 0),
    );
    let s = kb.reduce(ReduceOp::Sum, x);
    kb.store(cols as usize, Expr::var(0), s, None);
    kb.done()
}

/// Mean over the two inner axes of `[b, h, w]` with the max too.
pub fn reduce_two_axes(b: i64, h: i64, w: i64) -> Kernel {
    let r = [b, h, w];
    let mut kb = Kb::new("reduce_sum_max_2axes", KernelKind::Reduce, &r, 1);
    let x = kb.load(DType::F32, (b * h * w) as usize, contiguous(&r));
    let s = kb.reduce(ReduceOp::Sum, x);
    let m = kb.reduce(ReduceOp::Max, x);
    let n = kb.c((h * w) as f64, DType::F32);
    let mean = kb.bin(BinaryOp::Div, s, n);
    kb.store(b as usize, Expr::var(0), mean, None);
    kb.store(b as usize, Expr::var(0), m, Some(DType::F16));
    kb.done()
}

/// Softmax over the last axis of `[rows, len]` in `dt` (as the front end
/// builds it: half types compute the exp in the half type, sum in f32).
pub fn softmax(rows: i64, len: i64, dt: DType) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new(
        "multireduce_max_sub_exp_sum_div",
        KernelKind::MultiReduce,
        &r,
        1,
    );
    let x = kb.load(dt, (rows * len) as usize, contiguous(&r));
    let m = kb.reduce(ReduceOp::Max, x);
    let d = kb.bin(BinaryOp::Sub, x, m);
    let e = kb.un(UnaryOp::Exp, d);
    let e32 = if dt == DType::F32 {
        e
    } else {
        kb.cast(e, DType::F32)
    };
    let s = kb.reduce(ReduceOp::Sum, e32);
    let s = if dt == DType::F32 { s } else { kb.cast(s, dt) };
    let y = kb.bin(BinaryOp::Div, e, s);
    kb.store((rows * len) as usize, contiguous(&r), y, None);
    kb.done()
}

/// Layer norm over the last axis with weight and bias.
pub fn layernorm(rows: i64, len: i64, dt: DType) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new("multireduce_layernorm", KernelKind::MultiReduce, &r, 1);
    let x = kb.load(dt, (rows * len) as usize, contiguous(&r));
    let x = kb.cast(x, DType::F32);
    let s = kb.reduce(ReduceOp::Sum, x);
    let n = kb.c(len as f64, DType::F32);
    let mean = kb.bin(BinaryOp::Div, s, n);
    let xc = kb.bin(BinaryOp::Sub, x, mean);
    let sq = kb.un(UnaryOp::Square, xc);
    let ss = kb.reduce(ReduceOp::Sum, sq);
    let var = kb.bin(BinaryOp::Div, ss, n);
    let eps = kb.c(1e-5, DType::F32);
    let ve = kb.bin(BinaryOp::Add, var, eps);
    let rs = kb.un(UnaryOp::Rsqrt, ve);
    let y = kb.bin(BinaryOp::Mul, xc, rs);
    let w = kb.load(DType::F32, len as usize, Expr::var(1));
    let bias = kb.load(DType::F32, len as usize, Expr::var(1));
    let y = kb.bin(BinaryOp::Mul, y, w);
    let y = kb.bin(BinaryOp::Add, y, bias);
    kb.store((rows * len) as usize, contiguous(&r), y, Some(dt));
    kb.done()
}

/// Softmax over the first axis of `[len, cols]` (column rows).
pub fn softmax_axis0(len: i64, cols: i64) -> Kernel {
    let r = [cols, len];
    let mut kb = Kb::new("multireduce_softmax_axis0", KernelKind::MultiReduce, &r, 1);
    let idx = lin(&[(0, 1), (1, cols)], 0);
    let x = kb.load(DType::F32, (len * cols) as usize, idx.clone());
    let m = kb.reduce(ReduceOp::Max, x);
    let d = kb.bin(BinaryOp::Sub, x, m);
    let e = kb.un(UnaryOp::Exp, d);
    let s = kb.reduce(ReduceOp::Sum, e);
    let y = kb.bin(BinaryOp::Div, e, s);
    kb.store((len * cols) as usize, idx, y, None);
    kb.done()
}

/// `a[m, k] @ b[k, n]` in `dt` (f32 accumulation), domain `[m, n, k]`.
pub fn matmul(m: i64, n: i64, k: i64, dt: DType) -> Kernel {
    let elem = match dt {
        DType::F16 => Elem::F16,
        DType::BF16 => Elem::BF16,
        _ => Elem::F32,
    };
    matmul_layout(1, m, n, k, elem, MatLayout::Nn, false)
}

/// How each operand of [`matmul_layout`] is stored.
#[allow(dead_code)] // not every test crate that shares this module uses it
#[derive(Clone, Copy, Debug)]
pub enum MatLayout {
    /// `a: [m, k]`, `b: [k, n]`, both row-major.
    Nn,
    /// `b` stored `[n, k]` (k-contiguous: both operands take `cp.async`).
    Nt,
    /// `a` stored `[k, m]`.
    Tn,
}

/// An operand factor of dtype `dt` (one of `elem`'s): a half or FP8 type
/// cast to f32, f32 rounded to TF32, or plain f32.
fn factor(kb: &mut Kb, elem: Elem, dt: DType, len: usize, index: Expr) -> Val {
    let x = kb.load(dt, len, index);
    match elem {
        Elem::F16 | Elem::BF16 | Elem::Fp8 { .. } => kb.cast(x, DType::F32),
        Elem::Tf32 => kb.un(UnaryOp::RoundTf32, x),
        Elem::F32 => x,
    }
}

/// The dtype a test product of `elem` operands stores (and its bias):
/// the operands' own, or for FP8 `bf16` (`scaled_mm`'s usual output).
pub fn out_dtype(elem: Elem) -> DType {
    match elem {
        Elem::Fp8 { .. } => DType::BF16,
        _ => elem.dtypes()[0],
    }
}

/// The variables of a matmul kernel's domain `[batch?, m, n | k]` (the
/// batch axis only when `batch > 1`).
pub struct MatDomain {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    batched: bool,
}

impl MatDomain {
    /// `sum(var * stride over terms) + konst`, plus `batch * per` when
    /// batched.
    pub fn index(&self, terms: &[(usize, i64)], per: i64, konst: i64) -> Expr {
        let mut t = terms.to_vec();
        if self.batched {
            t.push((0, per));
        }
        lin(&t, konst)
    }
}

/// A matmul kernel builder named `name` over `[batch?, m, n | k]`, and its
/// variables.
pub fn matmul_domain(name: &str, batch: i64, m: i64, n: i64, k: i64) -> (Kb, MatDomain) {
    let batched = batch > 1;
    let mut ranges = vec![m, n, k];
    if batched {
        ranges.insert(0, batch);
    }
    let kept = ranges.len() - 1;
    let first = usize::from(batched);
    let d = MatDomain {
        m: first,
        n: first + 1,
        k: first + 2,
        batched,
    };
    (Kb::new(name, KernelKind::Matmul, &ranges, kept), d)
}

/// `batch x [m, k] @ [k, n]` of `elem` operands, optionally `gelu(c +
/// bias[n])`, stored in the operands' dtype ([`out_dtype`]). Domain
/// `[batch?, m, n | k]`.
pub fn matmul_layout(
    batch: i64,
    m: i64,
    n: i64,
    k: i64,
    elem: Elem,
    layout: MatLayout,
    epilogue: bool,
) -> Kernel {
    let dt = out_dtype(elem);
    let (mut kb, d) = matmul_domain("matmul", batch, m, n, k);
    let (vm, vn, vk) = (d.m, d.n, d.k);
    let bt = |t: &[(usize, i64)], per: i64| d.index(t, per, 0);
    let (ia, ib) = match layout {
        MatLayout::Nn => (
            bt(&[(vm, k), (vk, 1)], m * k),
            bt(&[(vk, n), (vn, 1)], k * n),
        ),
        MatLayout::Nt => (
            bt(&[(vm, k), (vk, 1)], m * k),
            bt(&[(vn, k), (vk, 1)], k * n),
        ),
        MatLayout::Tn => (
            bt(&[(vk, m), (vm, 1)], m * k),
            bt(&[(vk, n), (vn, 1)], k * n),
        ),
    };
    let [da, db] = elem.dtypes();
    let a = factor(&mut kb, elem, da, (batch * m * k) as usize, ia);
    let b = factor(&mut kb, elem, db, (batch * k * n) as usize, ib);
    let p = kb.bin(BinaryOp::Mul, a, b);
    let mut v = kb.reduce(ReduceOp::Sum, p);
    if epilogue {
        let bias = kb.load(dt, n as usize, lin(&[(vn, 1)], 0));
        let bias = kb.cast(bias, DType::F32);
        v = kb.bin(BinaryOp::Add, v, bias);
        v = kb.un(UnaryOp::Gelu, v);
    }
    let out = bt(&[(vm, n), (vn, 1)], m * n);
    kb.store((batch * m * n) as usize, out, v, Some(dt));
    kb.done()
}

/// `x * s0 + s1` with scalar parameters in `dt` (`(x & s0) | s1` for
/// bools).
pub fn scalars(dt: DType, n: i64) -> Kernel {
    let mut kb = Kb::new("elementwise_scalars", KernelKind::Elementwise, &[n], 1);
    let x = kb.load(dt, n as usize, Expr::var(0));
    let (s0, s1) = (kb.scalar(dt), kb.scalar(dt));
    let (mul, add) = match dt {
        DType::Bool => (BinaryOp::And, BinaryOp::Or),
        _ => (BinaryOp::Mul, BinaryOp::Add),
    };
    let y = kb.bin(mul, x, s0);
    let y = kb.bin(add, y, s1);
    kb.store(n as usize, Expr::var(0), y, None);
    kb.done()
}

/// Softmax of `x / t` over the last axis of `[rows, len]` with a scalar
/// temperature `t`, and a bool scalar choosing it or its negation.
pub fn softmax_temperature(rows: i64, len: i64) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new(
        "multireduce_div_max_sub_exp_sum_div_where",
        KernelKind::MultiReduce,
        &r,
        1,
    );
    let x = kb.load(DType::F32, (rows * len) as usize, contiguous(&r));
    let t = kb.scalar(DType::F32);
    let x = kb.bin(BinaryOp::Div, x, t);
    let m = kb.reduce(ReduceOp::Max, x);
    let d = kb.bin(BinaryOp::Sub, x, m);
    let e = kb.un(UnaryOp::Exp, d);
    let s = kb.reduce(ReduceOp::Sum, e);
    let y = kb.bin(BinaryOp::Div, e, s);
    let flip = kb.scalar(DType::Bool);
    let ny = kb.un(UnaryOp::Neg, y);
    let y = kb.push(Inst::Where(flip, ny, y), DType::F32);
    kb.store((rows * len) as usize, contiguous(&r), y, None);
    kb.done()
}

/// `(a[m, k] @ b[k, n]) * s` of `elem` operands with a scalar scale in
/// the epilogue, stored in the operands' dtype.
pub fn matmul_scaled(m: i64, n: i64, k: i64, elem: Elem) -> Kernel {
    let (mut kb, d) = matmul_domain("matmul_mul", 1, m, n, k);
    let [da, db] = elem.dtypes();
    let a = factor(
        &mut kb,
        elem,
        da,
        (m * k) as usize,
        lin(&[(d.m, k), (d.k, 1)], 0),
    );
    let b = factor(
        &mut kb,
        elem,
        db,
        (k * n) as usize,
        lin(&[(d.k, n), (d.n, 1)], 0),
    );
    let p = kb.bin(BinaryOp::Mul, a, b);
    let v = kb.reduce(ReduceOp::Sum, p);
    let s = kb.scalar(DType::F32);
    let v = kb.bin(BinaryOp::Mul, v, s);
    kb.store(
        (m * n) as usize,
        lin(&[(d.m, n), (d.n, 1)], 0),
        v,
        Some(out_dtype(elem)),
    );
    kb.done()
}

/// `x + 1` on a rank-0 tensor.
pub fn rank0() -> Kernel {
    let mut kb = Kb::new("elementwise_rank0", KernelKind::Elementwise, &[], 0);
    let x = kb.load(DType::F32, 1, Expr::constant(0));
    let one = kb.c(1.0, DType::F32);
    let y = kb.bin(BinaryOp::Add, x, one);
    kb.store(1, Expr::constant(0), y, None);
    kb.done()
}

/// Sum of all elements to a scalar.
pub fn sum_all(n: i64) -> Kernel {
    let r = [n];
    let mut kb = Kb::new("reduce_sum_all", KernelKind::Reduce, &r, 0);
    let x = kb.load(DType::F32, n as usize, Expr::var(0));
    let s = kb.reduce(ReduceOp::Sum, x);
    kb.store(1, Expr::constant(0), s, None);
    kb.done()
}

/// An elementwise kernel whose indices need 64-bit arithmetic.
pub fn huge_elementwise() -> Kernel {
    let r = [3, 1 << 30];
    let n = (3usize) << 30;
    let mut kb = Kb::new("elementwise_huge", KernelKind::Elementwise, &r, 2);
    let a = kb.load(DType::BF16, n, contiguous(&r));
    let y = kb.un(UnaryOp::Neg, a);
    kb.store(n, contiguous(&r), y, None);
    kb.done()
}

/// Row kernel whose reduced index exceeds 2^31.
pub fn huge_reduce() -> Kernel {
    let r = [3, 1 << 30];
    let n = (3usize) << 30;
    let mut kb = Kb::new("reduce_huge", KernelKind::Reduce, &r, 1);
    let a = kb.load(DType::BF16, n, contiguous(&r));
    let m = kb.reduce(ReduceOp::Max, a);
    kb.store(3, Expr::var(0), m, None);
    kb.done()
}

/// Logsumexp-like with a row-level `where` between the reductions, a
/// row-level load and both row and element stores.
pub fn logsumexp_mixed(rows: i64, len: i64) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new(
        "multireduce_logsumexp_mixed",
        KernelKind::MultiReduce,
        &r,
        1,
    );
    let x = kb.load(DType::F32, (rows * len) as usize, contiguous(&r));
    let m = kb.reduce(ReduceOp::Max, x);
    let am = kb.un(UnaryOp::Abs, m);
    let inf = kb.c(f64::INFINITY, DType::F32);
    let fin = kb.bin(BinaryOp::Lt, am, inf);
    let zero = kb.c(0.0, DType::F32);
    let m = kb.push(Inst::Where(fin, m, zero), DType::F32);
    let d = kb.bin(BinaryOp::Sub, x, m);
    let e = kb.un(UnaryOp::Exp, d);
    let s = kb.reduce(ReduceOp::Sum, e);
    let l = kb.un(UnaryOp::Log, s);
    let l = kb.bin(BinaryOp::Add, l, m);
    let t = kb.load(DType::F32, rows as usize, Expr::var(0));
    let l2 = kb.bin(BinaryOp::Sub, l, t);
    kb.store(rows as usize, Expr::var(0), l2, None);
    let any = kb.bin(BinaryOp::Gt, x, l);
    let anyr = kb.reduce(ReduceOp::Max, any);
    kb.store(rows as usize, Expr::var(0), anyr, None);
    let y = kb.bin(BinaryOp::Sub, d, l);
    kb.store((rows * len) as usize, contiguous(&r), y, Some(DType::BF16));
    kb.done()
}

/// Every representative kernel, by name.
pub fn all() -> Vec<Kernel> {
    let mut ks = Vec::new();
    for dt in FLOATS {
        for op in UnaryOp::ALL {
            if op != UnaryOp::BitNot {
                ks.push(unary(op, dt, 1001));
            }
        }
    }
    for op in F64_UNARY {
        ks.push(unary(op, DType::F64, 1001));
    }
    for dt in INTS {
        for op in UnaryOp::ALL.into_iter().filter(|op| op.keeps_integers()) {
            ks.push(unary(op, dt, 1000));
        }
    }
    ks.push(unary(UnaryOp::Not, DType::Bool, 1024));
    for dt in ALL {
        for op in BinaryOp::ALL {
            let operand = op.operand_dtype(dt, dt);
            let f64_refused = dt == DType::F64 && matches!(op, BinaryOp::Pow | BinaryOp::Atan2);
            if operand == dt && !f64_refused && !(op.is_bitwise() && dt.is_float()) {
                ks.push(binary(op, dt, 4096));
            }
        }
    }
    for from in ALL {
        for to in ALL {
            if from != to {
                ks.push(cast(from, to, 777));
            }
        }
    }
    for op in [
        ScanOp::Sum,
        ScanOp::Prod,
        ScanOp::Max,
        ScanOp::ArgMin,
        ScanOp::LogSumExp,
    ] {
        ks.push(scan(op, DType::F32, 64, 8192, false));
        ks.push(scan(op, DType::F64, 64, 8192, false));
        ks.push(scan(op, DType::BF16, 1000, 100, false));
        if op != ScanOp::LogSumExp {
            ks.push(scan(op, DType::I32, 4096, 129, true));
            ks.push(scan(op, DType::I64, 64, 8192, false));
            ks.push(scan(op, DType::U8, 1000, 100, false));
        }
    }
    ks.push(scan(ScanOp::ArgMax, DType::F16, 3, 100_003, false));
    ks.push(broadcast_add(33, 64, DType::F32));
    ks.push(broadcast_add(5, 24, DType::BF16));
    ks.push(flip_transpose(48, 40));
    ks.push(pad(100));
    ks.push(div_mod(37));
    for (rows, len) in [(64, 1000), (7, 50_000), (1000, 7), (100, 1), (5, 128)] {
        ks.push(reduce_last(ReduceOp::Sum, DType::F32, rows, len));
    }
    for dt in ALL {
        ks.push(reduce_last(ReduceOp::Max, dt, 37, 300));
        ks.push(reduce_last(ReduceOp::Min, dt, 37, 4096));
    }
    ks.push(reduce_last(ReduceOp::Prod, DType::F32, 16, 40));
    for dt in [DType::I32, DType::U8, DType::I64, DType::F64] {
        ks.push(reduce_last(ReduceOp::Sum, dt, 16, 2000));
        ks.push(reduce_last(ReduceOp::Prod, dt, 7, 33));
    }
    ks.push(reduce_last(ReduceOp::Sum, DType::Bool, 16, 2000));
    ks.push(reduce_first(1000, 16));
    ks.push(reduce_first(3, 5000));
    ks.push(reduce_two_axes(6, 17, 32));
    for (rows, len) in [
        (64, 1024),
        (100, 100),
        (8, 8192),
        (4, 32768),
        (2, 65536),
        (2, 131_072),
        (3, 5),
    ] {
        ks.push(softmax(rows, len, DType::F32));
    }
    ks.push(softmax(16, 4096, DType::BF16));
    ks.push(softmax(6, 70_000, DType::F32));
    ks.push(softmax(5, 40_000, DType::BF16));
    ks.push(layernorm(5, 70_000, DType::F32));
    ks.push(softmax(16, 1000, DType::F16));
    ks.push(softmax_axis0(500, 12));
    for (rows, len) in [(64, 768), (8, 4096), (2, 100_000)] {
        ks.push(layernorm(rows, len, DType::F32));
    }
    ks.push(layernorm(16, 1024, DType::BF16));
    ks.push(logsumexp_mixed(10, 300));
    ks.push(logsumexp_mixed(3, 5000));
    ks.push(matmul(32, 48, 64, DType::F32));
    ks.push(matmul(17, 9, 33, DType::BF16));
    for dt in ALL {
        ks.push(scalars(dt, 1000));
    }
    ks.push(softmax_temperature(64, 1024));
    ks.push(softmax_temperature(2, 100_000));
    ks.push(matmul_scaled(64, 64, 32, Elem::F16));
    ks.push(matmul_scaled(32, 48, 64, Elem::F32));
    ks.push(rank0());
    ks.push(sum_all(100_000));
    ks.push(sum_all(0));
    ks.push(reduce_last(ReduceOp::Max, DType::F32, 0, 128));
    ks.push(reduce_last(ReduceOp::Sum, DType::F32, 8, 0));
    ks.push(softmax(0, 1024, DType::F32));
    ks.push(softmax(4, 0, DType::F32));
    ks.push(unary(UnaryOp::Exp, DType::F32, 0));
    ks.push(huge_elementwise());
    ks.push(huge_reduce());
    ks
}
