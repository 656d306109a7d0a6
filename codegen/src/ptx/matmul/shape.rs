//! Recognises the matmul kernels the tensor-core emitter handles and reads
//! their operands' strides off the load indices.

use crate::expr::{Atom, Expr};
use crate::ir::{Inst, Kernel, Val};
use crate::{DType, UnaryOp};

/// What the operands hold, which picks the kernel: half types, TF32 and
/// FP8 run on tensor cores, exact `f32` on the FMA units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// `f16` operands.
    F16,
    /// `bf16` operands.
    BF16,
    /// `f32` operands each rounded by `UnaryOp::RoundTf32`.
    Tf32,
    /// Plain `f32` operands.
    F32,
    /// FP8 operands widened to `f32` (`scaled_mm`): A's and B's dtype,
    /// each `F8E4M3` or `F8E5M2` (mixed pairs too: `wgmma` multiplies
    /// e4m3 by e5m2).
    Fp8 {
        /// A's dtype.
        a: DType,
        /// B's dtype.
        b: DType,
    },
}

impl Elem {
    /// Bytes of one operand element in memory.
    pub fn bytes(self) -> u32 {
        match self {
            Elem::Fp8 { .. } => 1,
            Elem::F16 | Elem::BF16 => 2,
            Elem::Tf32 | Elem::F32 => 4,
        }
    }

    /// The operand buffers' dtypes, A's then B's.
    pub fn dtypes(self) -> [DType; 2] {
        match self {
            Elem::F16 => [DType::F16; 2],
            Elem::BF16 => [DType::BF16; 2],
            Elem::Tf32 | Elem::F32 => [DType::F32; 2],
            Elem::Fp8 { a, b } => [a, b],
        }
    }

    /// Whether the operands are FP8 (tensor cores on sm_90 only).
    pub fn is_fp8(self) -> bool {
        matches!(self, Elem::Fp8 { .. })
    }

    /// The element kind of a product of factors read as `a` and `b` (each
    /// [`operand_load`]'s kind, FP8 ones as `Fp8 { a: x, b: x }`): equal
    /// kinds, or two FP8 kinds of either format; `None` otherwise.
    fn pair(a: Elem, b: Elem) -> Option<Elem> {
        match (a, b) {
            (Elem::Fp8 { a, .. }, Elem::Fp8 { b, .. }) => Some(Elem::Fp8 { a, b }),
            _ => (a == b).then_some(a),
        }
    }
}

/// One operand read as `konst + Σ batch[i]·b_i + row·r + k·kk` (elements),
/// where `row` is `m` for A and `n` for B.
#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    /// The input buffer it reads.
    pub input: usize,
    /// Constant offset (elements).
    pub konst: i64,
    /// Coefficient of each batch variable of [`Shape::batch_vars`].
    pub batch: Vec<i64>,
    /// Stride of its row variable (`m` for A, `n` for B).
    pub row: i64,
    /// Stride of `k`.
    pub k: i64,
}

impl Operand {
    /// Whether 16-byte copies of `per` (elements in 16 bytes) consecutive
    /// `k` are legal: unit `k` stride, every other stride and the offset
    /// multiples of `per` (buffers are 16-byte aligned), and `K % per == 0`
    /// so a chunk is wholly inside or outside the matrix.
    pub fn vector_ok(&self, k_len: i64, per: i64) -> bool {
        self.chunks_along(self.k, k_len, self.row, per)
    }

    /// Whether 16-byte copies of `per` consecutive rows (`m` or `n`) are
    /// legal: the same with the roles of `k` and the row swapped (B stored
    /// `[k, n]`, A stored `[k, m]`).
    pub fn row_vector_ok(&self, rows: i64, per: i64) -> bool {
        self.chunks_along(self.row, rows, self.k, per)
    }

    /// Whether 16-byte copies of `per` consecutive rows are legal but
    /// copies along `k` are not ([`Self::row_vector_ok`] alone).
    pub fn rows_only(&self, k_len: i64, rows: i64, per: i64) -> bool {
        !self.vector_ok(k_len, per) && self.row_vector_ok(rows, per)
    }

    /// Chunks of `per` elements along the axis of stride `unit` and length
    /// `len`, the other matrix axis having stride `other`.
    fn chunks_along(&self, unit: i64, len: i64, other: i64, per: i64) -> bool {
        unit == 1
            && len % per == 0
            && self.konst % per == 0
            && other % per == 0
            && self.batch.iter().all(|c| c % per == 0)
    }
}

/// A matmul kernel in the form the emitters need.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// What both operands hold.
    pub elem: Elem,
    /// Rows of the product.
    pub m: i64,
    /// Columns of the product.
    pub n: i64,
    /// Length of the dot products.
    pub k: i64,
    /// The loop variables of `m` and `n` (absent when of size 1, dropped by
    /// domain collapse) and the kept variables that index batches (grid z).
    pub m_var: Option<usize>,
    /// The loop variable of `n`, if any.
    pub n_var: Option<usize>,
    /// The kept variables that index batches (grid z).
    pub batch_vars: Vec<usize>,
    /// The left operand, `[.., m, k]`.
    pub a: Operand,
    /// The right operand, read as `[.., n, k]`.
    pub b: Operand,
    /// The `Reduce` whose value the epilogue consumes.
    pub reduce: Val,
}

impl Shape {
    /// Number of batches (product of the batch variables' ranges).
    pub fn batches(&self, k: &Kernel) -> i64 {
        self.batch_vars.iter().map(|v| k.ranges[*v]).product()
    }
}

/// The shape of `k` if it is a matmul of two operands of the same [`Elem`]
/// (or of two FP8 formats) each read by one unmasked load affine in the
/// loop variables, with one
/// reduced variable, at most one `m` and one `n` variable and at most
/// 65535 batches; `None` sends it to the generic reduce path.
pub fn recognise(k: &Kernel) -> Option<Shape> {
    if k.ranges.len() != k.n_kept + 1 {
        return None;
    }
    let (reduce, x, y) = k.matmul_product()?;
    let (xa, ex) = operand_load(k, x)?;
    let (ya, ey) = operand_load(k, y)?;
    let dt = Elem::pair(ex, ey)?;
    let kv = k.n_kept;
    let reads = |e: &Expr, v: usize| e.affine_coef(v).is_some_and(|c| c != 0);
    let kept = 0..k.n_kept;
    let m_vars: Vec<usize> = kept
        .clone()
        .filter(|v| reads(xa.1, *v) && !reads(ya.1, *v))
        .collect();
    let n_vars: Vec<usize> = kept
        .clone()
        .filter(|v| !reads(xa.1, *v) && reads(ya.1, *v))
        .collect();
    if m_vars.len() > 1 || n_vars.len() > 1 {
        return None;
    }
    let (m_var, n_var) = (m_vars.first().copied(), n_vars.first().copied());
    let batch_vars: Vec<usize> = kept
        .filter(|v| Some(*v) != m_var && Some(*v) != n_var)
        .collect();
    let operand = |(input, e): (usize, &Expr), row: Option<usize>| Operand {
        input,
        konst: e.parts().1,
        batch: batch_vars.iter().map(|v| coef(e, *v)).collect(),
        row: row.map_or(0, |v| coef(e, v)),
        k: coef(e, kv),
    };
    let shape = Shape {
        elem: dt,
        m: m_var.map_or(1, |v| k.ranges[v]),
        n: n_var.map_or(1, |v| k.ranges[v]),
        k: k.ranges[kv],
        a: operand(xa, m_var),
        b: operand(ya, n_var),
        m_var,
        n_var,
        batch_vars,
        reduce,
    };
    (shape.batches(k) <= 65535).then_some(shape)
}

fn coef(e: &Expr, v: usize) -> i64 {
    e.affine_coef(v).expect("checked affine")
}

/// `(input, index)` and element kind of a factor: `Cast(Load)` of a half
/// type or (to `f32`) of an FP8 type, `RoundTf32(Load)` or a plain `Load`
/// of `f32`, whose index is a linear combination of variables and which
/// is never masked. An FP8 factor's kind names its format as both `a`
/// and `b` ([`Elem::pair`] combines two).
fn operand_load(k: &Kernel, v: Val) -> Option<((usize, &Expr), Elem)> {
    let (l, elem) = match k.insts[v].inst {
        Inst::Cast(l) => match k.insts[l].dtype {
            DType::F16 => (l, Elem::F16),
            DType::BF16 => (l, Elem::BF16),
            // Widened to f32 only: the tensor cores accumulate in f32.
            dt @ (DType::F8E4M3 | DType::F8E5M2) if k.insts[v].dtype == DType::F32 => {
                (l, Elem::Fp8 { a: dt, b: dt })
            }
            _ => return None,
        },
        Inst::Unary(UnaryOp::RoundTf32, l) => (l, Elem::Tf32),
        Inst::Load { .. } => (v, Elem::F32),
        _ => return None,
    };
    let Inst::Load {
        input,
        index,
        valid,
    } = &k.insts[l].inst
    else {
        return None;
    };
    let linear = index
        .parts()
        .0
        .iter()
        .all(|(a, _)| matches!(a, Atom::Var(_)));
    let dt = elem.dtypes()[0];
    let typed = k.inputs[*input].dtype == dt && k.insts[l].dtype == dt;
    (typed && linear && valid.is_always()).then_some(((*input, index), elem))
}
