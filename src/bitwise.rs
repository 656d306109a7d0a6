//! Bitwise ops on integers (two's complement) and bools (logical), as
//! methods with PyTorch's names; the operators `& | ^ ! << >>` are in
//! `operators.rs`.

use crate::device::same_device;
use crate::elementwise::Operand;
use crate::shape::broadcast_shapes;
use crate::{DType, Tensor};
use smelt_codegen::{BinaryOp, UnaryOp};

impl Tensor {
    /// Bitwise and; logical and of bools. Also `self & other`.
    ///
    /// # Panics
    /// If either operand is a float, the shapes do not broadcast or the
    /// tensors are on different devices.
    #[track_caller]
    pub fn bitwise_and(&self, other: impl Operand) -> Tensor {
        self.bitwise(BinaryOp::BitAnd, other)
    }

    /// Bitwise or; logical or of bools. Also `self | other`.
    ///
    /// # Panics
    /// As [`Tensor::bitwise_and`].
    #[track_caller]
    pub fn bitwise_or(&self, other: impl Operand) -> Tensor {
        self.bitwise(BinaryOp::BitOr, other)
    }

    /// Bitwise exclusive or; logical xor (`!=`) of bools. Also
    /// `self ^ other`.
    ///
    /// # Panics
    /// As [`Tensor::bitwise_and`].
    #[track_caller]
    pub fn bitwise_xor(&self, other: impl Operand) -> Tensor {
        self.bitwise(BinaryOp::BitXor, other)
    }

    /// `self << other`: 0 where the shift is negative or at least the bit
    /// width (as in PyTorch); bools shift as `I32`. Also `self << other`.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1i32, -3, 5], [3], &Device::Cpu);
    /// assert_eq!((&x << 2).to_vec::<i32>().unwrap(), vec![4, -12, 20]);
    /// assert_eq!((&x >> 1).to_vec::<i32>().unwrap(), vec![0, -2, 2]);
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::bitwise_and`].
    #[doc(alias = "left_shift")]
    #[track_caller]
    pub fn bitwise_left_shift(&self, other: impl Operand) -> Tensor {
        self.bitwise(BinaryOp::Shl, other)
    }

    /// `self >> other`, arithmetic (the sign is kept): the sign fill (0 or
    /// -1) where the shift is negative or at least the bit width (as in
    /// PyTorch). Also `self >> other`.
    ///
    /// # Panics
    /// As [`Tensor::bitwise_and`].
    #[doc(alias = "right_shift")]
    #[track_caller]
    pub fn bitwise_right_shift(&self, other: impl Operand) -> Tensor {
        self.bitwise(BinaryOp::Shr, other)
    }

    /// Bitwise not (`-x - 1`); logical not of bools. Also `!self`.
    ///
    /// # Panics
    /// If `self` is a float tensor.
    #[doc(alias = "invert")]
    #[doc(alias = "bitwise_invert")]
    #[track_caller]
    pub fn bitwise_not(&self) -> Tensor {
        match self.dtype() {
            DType::Bool => self.logical_not(),
            dt if dt.is_float() => {
                panic!("bitwise_not: needs an integer or bool tensor, got {dt}")
            }
            _ => self.unary(UnaryOp::BitNot),
        }
    }

    /// `op` after the dtype check; on bools, and / or / xor are the
    /// logical ops.
    #[track_caller]
    fn bitwise(&self, op: BinaryOp, other: impl Operand) -> Tensor {
        let other = other.into_operand(self);
        // Checked under this op's name: bool xor records as `ne`.
        same_device(op.name(), &[self.device(), other.device()]);
        broadcast_shapes(op.name(), self.shape(), other.shape());
        let (a, b) = (self.dtype(), other.dtype());
        if a.is_float() || b.is_float() {
            panic!(
                "{}: needs integer or bool tensors, got {a} and {b}",
                op.name()
            );
        }
        let op = match (op, a.promote(b)) {
            (BinaryOp::BitAnd, DType::Bool) => BinaryOp::And,
            (BinaryOp::BitOr, DType::Bool) => BinaryOp::Or,
            (BinaryOp::BitXor, DType::Bool) => BinaryOp::Ne,
            _ => op,
        };
        self.binary(op, other)
    }
}
