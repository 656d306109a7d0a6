//! Scalar operations shared by the graph, the kernel IR and every backend,
//! with their reference semantics: floats evaluated in `f64` (callers round
//! to the result dtype), integers in wrapping `i64` arithmetic wrapped to
//! their dtype after every op (so 8-, 16- and 32-bit results are what a
//! backend computing in 32 bits and wrapping gives).

use crate::{int_ops, DType};

/// One-input elementwise operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `e^x`.
    Exp,
    /// `2^x`.
    Exp2,
    /// Natural logarithm.
    Log,
    /// Base-2 logarithm.
    Log2,
    /// Square root.
    Sqrt,
    /// `1 / sqrt(x)`.
    Rsqrt,
    /// `1 / x`.
    Recip,
    /// Sine (radians).
    Sin,
    /// Cosine (radians).
    Cos,
    /// Hyperbolic tangent.
    Tanh,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `max(x, 0)`.
    Relu,
    /// GELU, exact: `x * (1 + erf(x / sqrt(2))) / 2` (PyTorch's default).
    Gelu,
    /// GELU, tanh approximation (PyTorch's `approximate="tanh"`).
    GeluTanh,
    /// `x * sigmoid(x)` (SiLU, swish).
    Silu,
    /// `x * x`.
    Square,
    /// Logical not of a bool.
    Not,
    /// The error function.
    Erf,
    /// `ln(1 + x)`, accurate near 0.
    Log1p,
    /// `e^x - 1`, accurate near 0.
    Expm1,
    /// Largest integer `<= x` (integers unchanged).
    Floor,
    /// Smallest integer `>= x` (integers unchanged).
    Ceil,
    /// Nearest integer, halves to even (integers unchanged).
    Round,
    /// Integer part, rounding toward zero (integers unchanged).
    Trunc,
    /// -1, 0 or 1 by the sign of `x` (`+0` for both zeros); NaN stays NaN.
    Sign,
    /// Bitwise not of an integer (`-x - 1` in two's complement).
    BitNot,
    /// Rounds an `f32` to TF32 precision (10 mantissa bits, to nearest,
    /// ties to even: PTX `cvt.rn.tf32.f32`, and the copy engine's rounding
    /// of `f32` tiles to TF32), what a TF32 tensor core multiplies.
    /// `Precision::Tf32` matmuls round their operands so.
    RoundTf32,
}

/// Two-input elementwise operations. Comparisons produce `Bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (operands promoted to a float type first).
    Div,
    /// `a` to the power `b` (integers: see [`pow_int`]).
    Pow,
    /// Larger of the two; NaN if either is NaN.
    Max,
    /// Smaller of the two; NaN if either is NaN.
    Min,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
    /// Logical and (operands as bools).
    And,
    /// Logical or (operands as bools).
    Or,
    /// `atan(a / b)` in the quadrant of the point `(b, a)`, in radians
    /// (operands promoted to a float type first).
    Atan2,
    /// `a - trunc(a / b) * b`: the remainder with the sign of the dividend
    /// (C's `fmod`, exact for floats). See [`crate::int_ops`] for integers.
    Fmod,
    /// `a - floor(a / b) * b`: the remainder with the sign of the divisor
    /// (Python's `%`).
    Remainder,
    /// `floor(a / b)`, computed as PyTorch's `floor_divide` does (floats:
    /// from the exact `fmod`, so `1 // 0.1` is 9).
    FloorDiv,
    /// Bitwise and of integers.
    BitAnd,
    /// Bitwise or of integers.
    BitOr,
    /// Bitwise exclusive or of integers.
    BitXor,
    /// `a << b`; 0 when `b` is negative or at least the bit width.
    Shl,
    /// `a >> b`, arithmetic; the sign fill when `b` is negative or at least
    /// the bit width.
    Shr,
}

/// Reductions over one or several axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (halves accumulate in `f32`).
    Sum,
    /// Maximum; NaN if any element is NaN.
    Max,
    /// Minimum; NaN if any element is NaN.
    Min,
    /// Product.
    Prod,
}

/// `x` rounded to the nearest TF32 value (10 mantissa bits, ties to
/// even, as the copy engine rounds `f32` to TF32 on its way to the tensor
/// cores); NaN and infinities unchanged, overflow rounds to infinity.
pub fn round_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    // Adding just under half of the dropped 13 bits, plus the kept last
    // bit, rounds to nearest with ties to even; a carry into the exponent
    // is the correct rounding.
    let bits = x.to_bits();
    f32::from_bits((bits + 0xfff + ((bits >> 13) & 1)) & !0x1fff)
}

/// `a^b` in wrapping `i64` arithmetic (square and multiply); wrapped to a
/// narrower type it is that type's wrapping power. A negative exponent
/// gives the truncated real power: 1 for `a = 1`, +-1 for `a = -1`, else 0
/// (PyTorch raises instead; a kernel cannot).
pub fn pow_int(a: i64, b: i64) -> i64 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 if b % 2 != 0 => -1,
            -1 => 1,
            _ => 0,
        };
    }
    let (mut r, mut base, mut e) = (1i64, a, b as u64);
    while e != 0 {
        if e & 1 != 0 {
            r = r.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    r
}

pub(crate) const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// `-1`, `0` or `1` by the sign of `x`; NaN gives NaN (NumPy's `sign`;
/// PyTorch returns 0, pytorch/pytorch#41245).
fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else if x == 0.0 {
        0.0
    } else {
        x
    }
}

/// PyTorch's float `floor_divide` (`div_floor_floating`): the quotient of
/// `a - fmod(a, b)` by `b`, moved down one where the remainder's sign
/// differs from `b`'s, then rounded to the nearest integer to undo the
/// division's rounding. Division by zero is IEEE's `a / b`.
fn floor_div(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && (b < 0.0) != (m < 0.0) {
        div -= 1.0;
    }
    if div == 0.0 {
        return 0f64.copysign(a / b);
    }
    let f = div.floor();
    if div - f > 0.5 {
        f + 1.0
    } else {
        f
    }
}

/// Python's `%` on floats (PyTorch's `remainder`): `fmod`, plus `b` where
/// a nonzero remainder's sign differs from `b`'s.
fn remainder(a: f64, b: f64) -> f64 {
    let m = a % b;
    if m != 0.0 && (b < 0.0) != (m < 0.0) {
        m + b
    } else {
        m
    }
}

impl UnaryOp {
    /// Every unary op, for tests and fuzzers.
    pub const ALL: [UnaryOp; 29] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Log,
        UnaryOp::Log2,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Recip,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Square,
        UnaryOp::Not,
        UnaryOp::RoundTf32,
        UnaryOp::Erf,
        UnaryOp::Log1p,
        UnaryOp::Expm1,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Trunc,
        UnaryOp::Sign,
        UnaryOp::BitNot,
    ];

    /// Reference value of the op.
    #[inline]
    pub fn eval(self, x: f64) -> f64 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Exp2 => x.exp2(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Log2 => x.log2(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => 1.0 / x.sqrt(),
            UnaryOp::Recip => 1.0 / x,
            UnaryOp::Sin => x.sin(),
            UnaryOp::Cos => x.cos(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            UnaryOp::Relu => {
                if x > 0.0 || x.is_nan() {
                    x
                } else {
                    0.0
                }
            }
            UnaryOp::Gelu => 0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2)),
            UnaryOp::GeluTanh => {
                0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)).tanh())
            }
            UnaryOp::Silu => x / (1.0 + (-x).exp()),
            UnaryOp::Square => x * x,
            UnaryOp::Not => (x == 0.0) as u8 as f64,
            UnaryOp::RoundTf32 => round_tf32(x as f32) as f64,
            UnaryOp::Erf => libm::erf(x),
            UnaryOp::Log1p => x.ln_1p(),
            UnaryOp::Expm1 => x.exp_m1(),
            UnaryOp::Floor => x.floor(),
            UnaryOp::Ceil => x.ceil(),
            UnaryOp::Round => x.round_ties_even(),
            UnaryOp::Trunc => x.trunc(),
            UnaryOp::Sign => sign(x),
            UnaryOp::BitNot => -x - 1.0,
        }
    }

    /// The op on an integer (or bool as 0/1) with an integer result of
    /// dtype `dt`, wrapping like PTX (`neg`, `abs`, `mul.lo`). Only the ops
    /// that [`UnaryOp::keeps_integers`] and `Not` have integer results.
    #[inline]
    pub fn eval_int(self, dt: DType, v: i64) -> i64 {
        let r = match self {
            UnaryOp::Neg => v.wrapping_neg(),
            UnaryOp::Abs => v.wrapping_abs(),
            UnaryOp::Relu => v.max(0),
            UnaryOp::Square => v.wrapping_mul(v),
            UnaryOp::Not => (v == 0) as i64,
            // Integers are their own floor, ceiling, rounding and truncation.
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc => v,
            UnaryOp::Sign => v.signum(),
            UnaryOp::BitNot => !v,
            _ => panic!("{} has no integer result", self.name()),
        };
        dt.wrap(r)
    }

    /// True for the ops that map integers to integers (the rest compute
    /// in a float type, or give `Bool`).
    pub fn keeps_integers(self) -> bool {
        matches!(
            self,
            UnaryOp::Neg
                | UnaryOp::Abs
                | UnaryOp::Relu
                | UnaryOp::Square
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::Trunc
                | UnaryOp::Sign
                | UnaryOp::BitNot
        )
    }

    /// Result dtype for an input of dtype `x`.
    pub fn out_dtype(self, x: DType) -> DType {
        match self {
            _ if self.keeps_integers() => {
                if x == DType::Bool {
                    DType::I32
                } else {
                    x
                }
            }
            UnaryOp::Not => DType::Bool,
            _ => x.to_float(),
        }
    }

    /// Lower-case name used in kernel names and debug output.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Exp2 => "exp2",
            UnaryOp::Log => "log",
            UnaryOp::Log2 => "log2",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Recip => "recip",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Silu => "silu",
            UnaryOp::Square => "square",
            UnaryOp::Not => "not",
            UnaryOp::RoundTf32 => "round_tf32",
            UnaryOp::Erf => "erf",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Expm1 => "expm1",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Trunc => "trunc",
            UnaryOp::Sign => "sign",
            UnaryOp::BitNot => "bitwise_not",
        }
    }
}

impl BinaryOp {
    /// Every binary op, for tests and backends that name ops by position.
    pub const ALL: [BinaryOp; 24] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Atan2,
        BinaryOp::Fmod,
        BinaryOp::Remainder,
        BinaryOp::FloorDiv,
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::Shl,
        BinaryOp::Shr,
    ];

    /// Reference value of the op. `Max`/`Min` propagate NaN like PyTorch's
    /// `maximum`/`minimum`.
    #[inline]
    pub fn eval(self, a: f64, b: f64) -> f64 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Pow => a.powf(b),
            BinaryOp::Max => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            }
            BinaryOp::Min => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.min(b)
                }
            }
            BinaryOp::Lt => (a < b) as u8 as f64,
            BinaryOp::Le => (a <= b) as u8 as f64,
            BinaryOp::Gt => (a > b) as u8 as f64,
            BinaryOp::Ge => (a >= b) as u8 as f64,
            BinaryOp::Eq => (a == b) as u8 as f64,
            BinaryOp::Ne => (a != b) as u8 as f64,
            BinaryOp::And => (a != 0.0 && b != 0.0) as u8 as f64,
            BinaryOp::Or => (a != 0.0 || b != 0.0) as u8 as f64,
            BinaryOp::Atan2 => a.atan2(b),
            BinaryOp::Fmod => a % b,
            BinaryOp::Remainder => remainder(a, b),
            BinaryOp::FloorDiv => floor_div(a, b),
            // Bitwise and, or and xor of two's complement integers do not
            // depend on the width.
            BinaryOp::BitAnd => (a as i64 & b as i64) as f64,
            BinaryOp::BitOr => (a as i64 | b as i64) as f64,
            BinaryOp::BitXor => (a as i64 ^ b as i64) as f64,
            // Shifts exist on integers only, where `eval_int` runs them (at
            // the widest integer width here).
            BinaryOp::Shl | BinaryOp::Shr => self.eval_int(DType::I64, a as i64, b as i64) as f64,
        }
    }

    /// The op on integer operands of compute dtype `dt` (see
    /// [`BinaryOp::compute_dtype`]; never `Div`, which computes in a
    /// float): two's complement, wrapping to `dt`, as PTX `add` / `mul.lo`
    /// compute it. Comparisons give 0 or 1. `Pow` is [`pow_int`]; the
    /// division family and shifts follow [`crate::int_ops`] at `dt`'s width.
    #[inline]
    pub fn eval_int(self, dt: DType, a: i64, b: i64) -> i64 {
        let r = match self {
            BinaryOp::Add => a.wrapping_add(b),
            BinaryOp::Sub => a.wrapping_sub(b),
            BinaryOp::Mul => a.wrapping_mul(b),
            BinaryOp::Pow => pow_int(a, b),
            BinaryOp::Max => a.max(b),
            BinaryOp::Min => a.min(b),
            BinaryOp::Lt => return (a < b) as i64,
            BinaryOp::Le => return (a <= b) as i64,
            BinaryOp::Gt => return (a > b) as i64,
            BinaryOp::Ge => return (a >= b) as i64,
            BinaryOp::Eq => return (a == b) as i64,
            BinaryOp::Ne => return (a != b) as i64,
            BinaryOp::And => return (a != 0 && b != 0) as i64,
            BinaryOp::Or => return (a != 0 || b != 0) as i64,
            BinaryOp::BitAnd => a & b,
            BinaryOp::BitOr => a | b,
            BinaryOp::BitXor => a ^ b,
            BinaryOp::Fmod => int_ops::fmod(dt, a, b),
            BinaryOp::Remainder => int_ops::remainder(dt, a, b),
            BinaryOp::FloorDiv => int_ops::floor_div(dt, a, b),
            BinaryOp::Shl => int_ops::shl(dt, a, b),
            BinaryOp::Shr => int_ops::shr(dt, a, b),
            BinaryOp::Div | BinaryOp::Atan2 => {
                panic!("integer {} computes in a float", self.name())
            }
        };
        dt.wrap(r)
    }

    /// The dtype the op computes in for operands `x`, `y` and result
    /// `out`, on every backend: comparisons in the promoted operand type,
    /// logical ops in `Bool`, arithmetic with a `Bool` result (`bool +
    /// bool`, bitwise ops of bools) in `I32`, `Div` and `Atan2` in their
    /// float result type, the rest in `out`.
    pub fn compute_dtype(self, x: DType, y: DType, out: DType) -> DType {
        match self {
            BinaryOp::And | BinaryOp::Or => DType::Bool,
            _ if self.is_comparison() => x.promote(y),
            BinaryOp::Max | BinaryOp::Min => out,
            BinaryOp::Div | BinaryOp::Atan2 => out.to_float(),
            _ if out == DType::Bool => DType::I32,
            _ => out,
        }
    }

    /// True for the ops defined on integers and bools only.
    pub fn is_bitwise(self) -> bool {
        matches!(
            self,
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor | BinaryOp::Shl | BinaryOp::Shr
        )
    }

    /// True for ops whose result is `Bool`.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Lt
                | BinaryOp::Le
                | BinaryOp::Gt
                | BinaryOp::Ge
                | BinaryOp::Eq
                | BinaryOp::Ne
                | BinaryOp::And
                | BinaryOp::Or
        )
    }

    /// The dtype both operands are cast to before the op.
    pub fn operand_dtype(self, a: DType, b: DType) -> DType {
        let p = a.promote(b);
        match self {
            BinaryOp::Div | BinaryOp::Atan2 => p.to_float(),
            BinaryOp::And | BinaryOp::Or => DType::Bool,
            // As in PyTorch, bool + bool and bool * bool stay bool (logical
            // or / and: the sum or product rounded by `!= 0`), and so do
            // bitwise and, or and xor of bools.
            BinaryOp::Sub
            | BinaryOp::Pow
            | BinaryOp::Fmod
            | BinaryOp::Remainder
            | BinaryOp::FloorDiv
            | BinaryOp::Shl
            | BinaryOp::Shr
                if p == DType::Bool =>
            {
                DType::I32
            }
            _ => p,
        }
    }

    /// Result dtype given the operand dtype.
    pub fn out_dtype(self, operand: DType) -> DType {
        if self.is_comparison() {
            DType::Bool
        } else {
            operand
        }
    }

    /// Lower-case name used in kernel names and debug output.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Max => "maximum",
            BinaryOp::Min => "minimum",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Atan2 => "atan2",
            BinaryOp::Fmod => "fmod",
            BinaryOp::Remainder => "remainder",
            BinaryOp::FloorDiv => "floor_divide",
            BinaryOp::BitAnd => "bitwise_and",
            BinaryOp::BitOr => "bitwise_or",
            BinaryOp::BitXor => "bitwise_xor",
            BinaryOp::Shl => "bitwise_left_shift",
            BinaryOp::Shr => "bitwise_right_shift",
        }
    }
}

impl ReduceOp {
    /// The neutral element the accumulator starts from, as an `f64`
    /// (`I64`'s maximum rounds to 2^63 there; [`DType::saturate`] turns it
    /// back into `i64::MAX`).
    pub fn identity(self, dtype: DType) -> f64 {
        match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Max => dtype.min_value(),
            ReduceOp::Min => dtype.max_value(),
        }
    }

    /// The neutral element of an integer (or `Bool`) reduction.
    pub fn identity_int(self, dtype: DType) -> i64 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Prod => 1,
            ReduceOp::Max => dtype.int_min(),
            ReduceOp::Min => dtype.int_max(),
        }
    }

    /// Folds one value into the accumulator (NaN propagates through max/min).
    #[inline]
    pub fn combine(self, acc: f64, x: f64) -> f64 {
        match self {
            ReduceOp::Sum => acc + x,
            ReduceOp::Prod => acc * x,
            ReduceOp::Max => BinaryOp::Max.eval(acc, x),
            ReduceOp::Min => BinaryOp::Min.eval(acc, x),
        }
    }

    /// Folds `x` into `acc` with the result rounded to the float `dtype`
    /// ([`DType::round`] of the exact value).
    #[inline]
    pub fn fold(self, dtype: DType, acc: f64, x: f64) -> f64 {
        dtype.round(self.combine(acc, x))
    }

    /// Folds `x` into `acc` in the integer (or `Bool`) `dtype`: wrapping
    /// two's complement, as the GPU adds and multiplies.
    #[inline]
    pub fn fold_int(self, dtype: DType, acc: i64, x: i64) -> i64 {
        let op = match self {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        op.eval_int(dtype, acc, x)
    }

    /// Dtype of the result for an input dtype: sums and products of
    /// integers and bools are `I64`, as in PyTorch.
    pub fn out_dtype(self, x: DType) -> DType {
        match self {
            ReduceOp::Sum | ReduceOp::Prod if !x.is_float() => DType::I64,
            _ => x,
        }
    }

    /// Lower-case name used in kernel names and debug output.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Prod => "prod",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_propagates_through_max_and_min() {
        assert!(BinaryOp::Max.eval(f64::NAN, 1.0).is_nan());
        assert!(BinaryOp::Min.eval(1.0, f64::NAN).is_nan());
        assert!(ReduceOp::Max.combine(f64::NEG_INFINITY, f64::NAN).is_nan());
        assert!(UnaryOp::Relu.eval(f64::NAN).is_nan());
        // TF32 keeps 10 mantissa bits: 1 + 2^-11 is a tie (to the even 1),
        // 1 + 3 * 2^-11 one to the even 1 + 2^-9.
        assert_eq!(round_tf32(1.0 + 2f32.powi(-11)), 1.0);
        assert_eq!(round_tf32(-(1.0 + 2f32.powi(-11))), -1.0);
        let odd_tie = 1.0 + 3.0 * 2f32.powi(-11);
        assert_eq!(round_tf32(odd_tie), 1.0 + 2f32.powi(-9));
        assert_eq!(round_tf32(-odd_tie), -(1.0 + 2f32.powi(-9)));
        assert_eq!(
            round_tf32(1.0 + 2f32.powi(-11) + 2f32.powi(-23)),
            1.0 + 2f32.powi(-10)
        );
        assert_eq!(round_tf32(1.0 + 2f32.powi(-12)), 1.0);
        assert_eq!(round_tf32(f32::MAX), f32::INFINITY);
        assert!(round_tf32(f32::NAN).is_nan());
    }

    #[test]
    fn dtype_rules() {
        assert_eq!(
            BinaryOp::Div.operand_dtype(DType::I32, DType::I32),
            DType::F32
        );
        assert_eq!(BinaryOp::Lt.out_dtype(DType::F32), DType::Bool);
        assert_eq!(UnaryOp::Exp.out_dtype(DType::I32), DType::F32);
        assert_eq!(UnaryOp::Exp.out_dtype(DType::I64), DType::F32);
        assert_eq!(ReduceOp::Sum.out_dtype(DType::Bool), DType::I64);
        assert_eq!(ReduceOp::Sum.out_dtype(DType::U8), DType::I64);
        assert_eq!(ReduceOp::Max.out_dtype(DType::I8), DType::I8);
        assert_eq!(
            BinaryOp::Add.operand_dtype(DType::Bool, DType::Bool),
            DType::Bool
        );
        assert_eq!(BinaryOp::Mul.eval_int(DType::I32, 65536, 65536), 0);
        assert_eq!(BinaryOp::Mul.eval_int(DType::I64, 65536, 65536), 1 << 32);
    }

    #[test]
    fn int_ops_wrap_exactly() {
        let max = i32::MAX as i64;
        let i32 = DType::I32;
        assert_eq!(UnaryOp::Square.eval_int(i32, max), 1);
        assert_eq!(UnaryOp::Neg.eval_int(i32, i32::MIN as i64), i32::MIN as i64);
        assert_eq!(UnaryOp::Abs.eval_int(DType::I8, -128), -128);
        assert_eq!(BinaryOp::Add.eval_int(i32, max, 1), i32::MIN as i64);
        assert_eq!(BinaryOp::Add.eval_int(DType::U8, 200, 100), 44);
        assert_eq!(BinaryOp::Add.eval_int(DType::I64, i64::MAX, 1), i64::MIN);
        assert_eq!(
            DType::I32.wrap(pow_int(3, 40)),
            3i32.wrapping_pow(40) as i64
        );
        assert_eq!(pow_int(3, 40), 3i64.wrapping_pow(40));
        assert_eq!(pow_int(-1, -3), -1);
        assert_eq!(pow_int(2, -1), 0);
        assert_eq!(ReduceOp::Prod.fold_int(i32, max, max), 1);
        assert_eq!(ReduceOp::Min.identity_int(DType::I64), i64::MAX);
        assert_eq!(
            DType::I64.saturate(ReduceOp::Min.identity(DType::I64)),
            i64::MAX
        );
    }
}
