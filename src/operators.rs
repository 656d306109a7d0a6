//! `+ - * /`, unary `-`, and the bitwise `& | ^ << >> !` on tensors,
//! references and scalars.

use crate::elementwise::Operand;
use crate::Tensor;
use smelt_codegen::BinaryOp;
use std::ops::{Add, BitAnd, BitOr, BitXor, Div, Mul, Neg, Not, Shl, Shr, Sub};

macro_rules! tensor_ops {
    ($($tr:ident $method:ident $op:ident),*) => {$(
        impl<R: Operand> $tr<R> for Tensor {
            type Output = Tensor;
            #[track_caller] fn $method(self, rhs: R) -> Tensor { self.binary(BinaryOp::$op, rhs) }
        }
        impl<R: Operand> $tr<R> for &Tensor {
            type Output = Tensor;
            #[track_caller] fn $method(self, rhs: R) -> Tensor { self.binary(BinaryOp::$op, rhs) }
        }
        scalar_lhs!($tr $method $op; f64, f32, i32);
    )*};
}

/// `scalar op tensor`: the scalar becomes a tensor like the right side.
macro_rules! scalar_lhs {
    ($tr:ident $method:ident $op:ident; $($s:ty),*) => {$(
        impl $tr<Tensor> for $s {
            type Output = Tensor;
            #[track_caller] fn $method(self, rhs: Tensor) -> Tensor { self.into_operand(&rhs).binary(BinaryOp::$op, &rhs) }
        }
        impl $tr<&Tensor> for $s {
            type Output = Tensor;
            #[track_caller] fn $method(self, rhs: &Tensor) -> Tensor { self.into_operand(rhs).binary(BinaryOp::$op, rhs) }
        }
    )*};
}

tensor_ops!(Add add Add, Sub sub Sub, Mul mul Mul, Div div Div);

impl Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}

impl Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}

/// Bitwise operators: the `bitwise_*` methods (which check the dtypes).
macro_rules! bitwise_ops {
    ($($tr:ident $method:ident $tensor_method:ident),*) => {$(
        impl<R: Operand> $tr<R> for Tensor {
            type Output = Tensor;
            #[track_caller] fn $method(self, rhs: R) -> Tensor { self.$tensor_method(rhs) }
        }
        impl<R: Operand> $tr<R> for &Tensor {
            type Output = Tensor;
            #[track_caller] fn $method(self, rhs: R) -> Tensor { self.$tensor_method(rhs) }
        }
        impl $tr<Tensor> for i32 {
            type Output = Tensor;
            #[track_caller] fn $method(self, rhs: Tensor) -> Tensor { self.into_operand(&rhs).$tensor_method(&rhs) }
        }
        impl $tr<&Tensor> for i32 {
            type Output = Tensor;
            #[track_caller] fn $method(self, rhs: &Tensor) -> Tensor { self.into_operand(rhs).$tensor_method(rhs) }
        }
    )*};
}

bitwise_ops!(
    BitAnd bitand bitwise_and,
    BitOr bitor bitwise_or,
    BitXor bitxor bitwise_xor,
    Shl shl bitwise_left_shift,
    Shr shr bitwise_right_shift
);

impl Not for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}

impl Not for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}
