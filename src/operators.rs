//! `+ - * /` and unary `-` on tensors, references and scalars.

use crate::elementwise::Operand;
use crate::Tensor;
use smelt_codegen::BinaryOp;
use std::ops::{Add, Div, Mul, Neg, Sub};

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
