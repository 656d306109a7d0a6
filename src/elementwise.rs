//! Elementwise ops: unary math, broadcasting binary ops with dtype
//! promotion, comparisons, `where_` and casts.

use crate::device::same_device;
use crate::shape::broadcast_shapes;
use crate::{DType, Tensor};
use smelt_codegen::{BinaryOp, UnaryOp};
use smelt_fusion::Op;

/// A right-hand side of a binary op: a tensor or a Rust scalar.
///
/// Scalars follow PyTorch: a float scalar keeps a float tensor's dtype and
/// makes an integer tensor `F32`; an integer scalar (`i64`, `i32`, `i16`,
/// `i8`, `u8`) keeps the tensor's dtype (`I32` for `Bool`), wrapping to it.
pub trait Operand {
    /// The operand as a tensor on `like`'s device.
    fn into_operand(self, like: &Tensor) -> Tensor;

    /// True for Rust scalars, whose dtype follows the tensor they meet.
    fn is_scalar(&self) -> bool {
        true
    }
}

impl Operand for &Tensor {
    fn into_operand(self, _: &Tensor) -> Tensor {
        self.clone()
    }

    fn is_scalar(&self) -> bool {
        false
    }
}

impl Operand for Tensor {
    fn into_operand(self, _: &Tensor) -> Tensor {
        self
    }

    fn is_scalar(&self) -> bool {
        false
    }
}

fn float_scalar(v: f64, like: &Tensor) -> Tensor {
    let dt = if like.dtype().is_float() {
        like.dtype()
    } else {
        DType::F32
    };
    Tensor::full([0usize; 0], v, dt, &like.device())
}

impl Operand for f64 {
    fn into_operand(self, like: &Tensor) -> Tensor {
        float_scalar(self, like)
    }
}

impl Operand for f32 {
    fn into_operand(self, like: &Tensor) -> Tensor {
        float_scalar(self as f64, like)
    }
}

/// An integer scalar in the tensor's dtype (`I32` for `Bool`): a graph
/// constant, or beyond 2^53 (where an `f64` constant would round) an exact
/// [`Tensor::scalar`] cast to it.
fn int_scalar(v: i64, like: &Tensor) -> Tensor {
    let dt = if like.dtype() == DType::Bool {
        DType::I32
    } else {
        like.dtype()
    };
    if v.unsigned_abs() <= 1 << 53 {
        Tensor::full([0usize; 0], v as f64, dt, &like.device())
    } else {
        Tensor::scalar(v, &like.device()).cast(dt)
    }
}

macro_rules! int_operand {
    ($($t:ty),*) => {$(
        impl Operand for $t {
            fn into_operand(self, like: &Tensor) -> Tensor {
                int_scalar(self as i64, like)
            }
        }
    )*};
}

int_operand!(i64, i32, i16, i8, u8);

impl Operand for bool {
    fn into_operand(self, like: &Tensor) -> Tensor {
        Tensor::full([0usize; 0], self as u8 as f64, DType::Bool, &like.device())
    }
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {
            $($(#[$doc])* #[track_caller] pub fn $name(&self) -> Tensor { self.unary(UnaryOp::$op) })*
        }
    };
}

unary_methods! {
    /// `-x`.
    neg => Neg;
    /// `|x|`.
    abs => Abs;
    /// `e^x`.
    exp => Exp;
    /// `2^x`.
    exp2 => Exp2;
    /// Natural logarithm.
    log => Log;
    /// Base-2 logarithm.
    log2 => Log2;
    /// Square root.
    sqrt => Sqrt;
    /// `1 / sqrt(x)`.
    rsqrt => Rsqrt;
    /// `1 / x`.
    recip => Recip;
    /// Sine.
    sin => Sin;
    /// Cosine.
    cos => Cos;
    /// Hyperbolic tangent.
    tanh => Tanh;
    /// `1 / (1 + e^-x)`.
    sigmoid => Sigmoid;
    /// `max(x, 0)` (NaN stays NaN).
    relu => Relu;
    /// GELU, exact (PyTorch's default): `x * (1 + erf(x / sqrt 2)) / 2`.
    /// Fuses into a matmul's epilogue. On the GPU about 2 ulp for `x >= 0`;
    /// below, where `1 + erf` cancels, within 1e-7 absolutely. As in
    /// PyTorch, `gelu(-inf)` is NaN.
    gelu => Gelu;
    /// GELU, tanh approximation (PyTorch's `approximate="tanh"`): within
    /// 5e-4 of [`Tensor::gelu`].
    gelu_tanh => GeluTanh;
    /// The error function, `2 / sqrt(pi) * integral of e^(-t^2)` from 0 to
    /// `x` (about 2 ulp on the GPU).
    erf => Erf;
    /// `ln(1 + x)`, accurate for tiny `x` where `log(1 + x)` is not.
    log1p => Log1p;
    /// `e^x - 1`, accurate for tiny `x` where `exp(x) - 1` is not.
    expm1 => Expm1;
    /// Largest integer `<= x`; integers are returned unchanged.
    floor => Floor;
    /// Smallest integer `>= x`; integers are returned unchanged.
    ceil => Ceil;
    /// Nearest integer, halves to even (`round(2.5) = 2`, as in PyTorch);
    /// integers are returned unchanged.
    #[doc(alias = "rint")]
    #[doc(alias = "around")]
    round => Round;
    /// Integer part, rounding toward zero; integers are returned unchanged.
    #[doc(alias = "fix")]
    trunc => Trunc;
    /// -1, 0 or 1 by the sign (both zeros give `+0`). NaN gives NaN, as in
    /// NumPy (PyTorch returns 0, pytorch/pytorch#41245). Integers stay
    /// integers; bools become `I32`.
    sign => Sign;
    /// `x * sigmoid(x)`.
    silu => Silu;
    /// `x * x`.
    square => Square;
    /// Logical not (any nonzero is true).
    logical_not => Not;
    /// Rounded to TF32 precision (10 mantissa bits, to nearest, ties to
    /// even), as a TF32 tensor core sees an `f32`; exact for f16/bf16.
    round_tf32 => RoundTf32;
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {
            $($(#[$doc])* #[track_caller] pub fn $name(&self, other: impl Operand) -> Tensor {
                self.binary(BinaryOp::$op, other)
            })*
        }
    };
}

binary_methods! {
    /// `x ^ y` elementwise. On `I32` it is exact, wrapping like `*`; a
    /// negative integer exponent gives the truncated real power (1 for
    /// `x = 1`, +-1 for `x = -1`, else 0) where PyTorch raises.
    pow => Pow;
    /// Elementwise maximum (NaN propagates).
    maximum => Max;
    /// Elementwise minimum (NaN propagates).
    minimum => Min;
    /// `x < y` as `Bool`.
    lt => Lt;
    /// `x <= y` as `Bool`.
    le => Le;
    /// `x > y` as `Bool`.
    gt => Gt;
    /// `x >= y` as `Bool`.
    ge => Ge;
    /// `x == y` as `Bool`.
    eq => Eq;
    /// `x != y` as `Bool`.
    ne => Ne;
    /// Logical and.
    logical_and => And;
    /// Logical or.
    logical_or => Or;
    /// `atan(self / other)` in the quadrant of the point `(other, self)`:
    /// `(-pi, pi]`, with C's signed zeros and infinities. Integers compute
    /// in `F32`.
    #[doc(alias = "arctan2")]
    atan2 => Atan2;
    /// The remainder of `self / other` with the sign of `self` (C's
    /// `fmod`; exact for floats). Integer division by zero gives 0 (as in
    /// NumPy; PyTorch raises).
    fmod => Fmod;
    /// The remainder of `self / other` with the sign of `other` (Python's
    /// `%`). Integer division by zero gives 0 (as in NumPy; PyTorch
    /// raises).
    #[doc(alias = "mod")]
    remainder => Remainder;
    /// `floor(self / other)` (Python's `//`, PyTorch's `floor_divide`):
    /// integers are exact and wrap (`i32::MIN // -1` is `i32::MIN`);
    /// integer division by zero gives 0 (as in NumPy; PyTorch raises).
    /// Floats follow PyTorch's algorithm through the exact `fmod`, so
    /// `1.0 // 0.1` is 9.
    floor_divide => FloorDiv;
}

impl Tensor {
    /// Converts to `dtype` by Rust's `as` rule, identical on every device
    /// and in `to_vec`: floats round to nearest even, floats to `I32`
    /// truncate toward zero and saturate (NaN gives 0), nonzero is `true`.
    ///
    /// ```
    /// use smelt::{DType, Device, Tensor};
    /// let x = Tensor::from_vec(vec![-1.7f32, 0.0, 2.5, f32::NAN], [4], &Device::Cpu);
    /// assert_eq!(x.cast(DType::I32).to_vec::<i32>().unwrap(), vec![-1, 0, 2, 0]);
    /// assert_eq!(x.cast(DType::Bool).to_vec::<bool>().unwrap(), vec![true, false, true, true]);
    /// assert_eq!(x.cast(DType::F16).dtype(), DType::F16);
    /// ```
    pub fn cast(&self, dtype: DType) -> Tensor {
        if dtype == self.dtype() {
            return self.clone();
        }
        self.derive(Op::Cast(self.node.clone()), self.shape(), dtype)
    }

    /// Applies a unary op, casting the input to the op's compute dtype
    /// first (integers become `F32` for float math, anything becomes `Bool`
    /// for `logical_not`).
    #[track_caller]
    pub fn unary(&self, op: UnaryOp) -> Tensor {
        let out = op.out_dtype(self.dtype());
        let x = if op == UnaryOp::Not {
            self.cast(DType::Bool)
        } else {
            self.cast(out)
        };
        x.derive(Op::Unary(op, x.node.clone()), x.shape(), out)
    }

    /// Applies a binary op with NumPy broadcasting and PyTorch promotion.
    ///
    /// # Panics
    /// If the shapes do not broadcast or the tensors are on different
    /// devices.
    #[track_caller]
    pub fn binary(&self, op: BinaryOp, other: impl Operand) -> Tensor {
        let other = other.into_operand(self);
        let name = op.name();
        same_device(name, &[self.device(), other.device()]);
        let shape = broadcast_shapes(name, self.shape(), other.shape());
        let dt = op.operand_dtype(self.dtype(), other.dtype());
        let a = self.cast(dt).broadcast_to(&shape);
        let b = other.cast(dt).broadcast_to(&shape);
        a.derive(
            Op::Binary(op, a.node.clone(), b.node.clone()),
            shape,
            op.out_dtype(dt),
        )
    }

    /// `self ? a : b` elementwise, broadcasting all three; the result has
    /// the promoted dtype of `a` and `b` (a scalar branch follows the other
    /// branch's dtype, as in PyTorch). Same as [`where_`].
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![-2.0f32, 0.5, 3.0], [3], &Device::Cpu);
    /// let relu = x.gt(0.0).where_(&x, 0.0);
    /// assert_eq!(relu.to_vec::<f32>().unwrap(), vec![0.0, 0.5, 3.0]);
    /// ```
    ///
    /// # Panics
    /// If the shapes do not broadcast or the tensors are on different
    /// devices.
    #[track_caller]
    pub fn where_(&self, a: impl Operand, b: impl Operand) -> Tensor {
        // A scalar takes its dtype from the other branch, not the condition.
        let (a, b) = match (a.is_scalar(), b.is_scalar()) {
            (true, false) => {
                let b = b.into_operand(self);
                (a.into_operand(&b), b)
            }
            (false, true) => {
                let a = a.into_operand(self);
                let b = b.into_operand(&a);
                (a, b)
            }
            _ => (a.into_operand(self), b.into_operand(self)),
        };
        same_device("where", &[self.device(), a.device(), b.device()]);
        let s1 = broadcast_shapes("where", self.shape(), a.shape());
        let shape = broadcast_shapes("where", &s1, b.shape());
        let dt = a.dtype().promote(b.dtype());
        let c = self.cast(DType::Bool).broadcast_to(&shape);
        let a = a.cast(dt).broadcast_to(&shape);
        let b = b.cast(dt).broadcast_to(&shape);
        c.derive(
            Op::Where(c.node.clone(), a.node.clone(), b.node.clone()),
            shape,
            dt,
        )
    }

    /// True where the value is NaN.
    pub fn isnan(&self) -> Tensor {
        self.ne(self)
    }
}

/// `cond ? a : b` elementwise with broadcasting (NumPy's `where`).
///
/// ```
/// use smelt::{where_, Device, Tensor};
/// let x = Tensor::from_vec(vec![-1.0f32, 2.0], [2], &Device::Cpu);
/// let y = where_(&x.gt(0.0), &x, 0.0);
/// assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 2.0]);
/// ```
#[track_caller]
pub fn where_(cond: &Tensor, a: impl Operand, b: impl Operand) -> Tensor {
    cond.where_(a, b)
}
