//! The Rust functions compiled kernels call for what they do not compute
//! inline: every op's reference ([`crate::ops`]), the conversions of
//! [`crate::convert`] to and from the half types. Each is the very function
//! the executor and the interpreter call, so the JIT's values are theirs
//! bit for bit. Ops, dtypes are passed by their position in
//! [`UnaryOp::ALL`], [`BinaryOp::ALL`], [`DType::ALL`].

use crate::ops::{BinaryOp, UnaryOp};
use crate::DType;

/// A shim: its symbol in the emitted IR, its LLVM signature, its address.
pub struct Shim {
    /// The symbol the IR declares and calls.
    pub name: &'static str,
    /// `declare` line of the symbol.
    pub decl: &'static str,
    /// The function's address.
    pub addr: usize,
}

/// Position of `op` in [`UnaryOp::ALL`].
pub fn unary_id(op: UnaryOp) -> usize {
    UnaryOp::ALL.iter().position(|o| *o == op).expect("listed")
}

/// Position of `op` in [`BinaryOp::ALL`].
pub fn binary_id(op: BinaryOp) -> usize {
    BinaryOp::ALL.iter().position(|o| *o == op).expect("listed")
}

/// Position of `dt` in [`DType::ALL`].
pub fn dtype_id(dt: DType) -> usize {
    DType::ALL.iter().position(|d| *d == dt).expect("listed")
}

extern "C" fn unary(op: u32, x: f64) -> f64 {
    UnaryOp::ALL[op as usize].eval(x)
}

extern "C" fn binary(op: u32, a: f64, b: f64) -> f64 {
    BinaryOp::ALL[op as usize].eval(a, b)
}

extern "C" fn unary_int(op: u32, dt: u32, x: i64) -> i64 {
    UnaryOp::ALL[op as usize].eval_int(DType::ALL[dt as usize], x)
}

extern "C" fn binary_int(op: u32, dt: u32, a: i64, b: i64) -> i64 {
    BinaryOp::ALL[op as usize].eval_int(DType::ALL[dt as usize], a, b)
}

extern "C" fn round(dt: u32, x: f64) -> f64 {
    DType::ALL[dt as usize].round(x)
}

extern "C" fn from_int(dt: u32, x: i64) -> f64 {
    DType::ALL[dt as usize].from_int(x)
}

extern "C" fn saturate(dt: u32, x: f64) -> i64 {
    DType::ALL[dt as usize].saturate(x)
}

/// A stored half (`F16` or `BF16`, by its bits) as an `f32`, as the
/// executor reads it.
extern "C" fn half_to_f32(dt: u32, bits: u16) -> f32 {
    if DType::ALL[dt as usize] == DType::F16 {
        half::f16::from_bits(bits).to_f32()
    } else {
        half::bf16::from_bits(bits).to_f32()
    }
}

/// An `f32` holding a half type's value as the half's bits, as the
/// executor stores it.
extern "C" fn f32_to_half(dt: u32, x: f32) -> u16 {
    if DType::ALL[dt as usize] == DType::F16 {
        half::f16::from_f32(x).to_bits()
    } else {
        half::bf16::from_f32(x).to_bits()
    }
}

/// Every shim.
pub fn all() -> [Shim; 9] {
    [
        Shim {
            name: "smelt_unary",
            decl: "declare double @smelt_unary(i32, double) nounwind willreturn memory(none)",
            addr: unary as *const () as usize,
        },
        Shim {
            name: "smelt_binary",
            decl:
                "declare double @smelt_binary(i32, double, double) nounwind willreturn memory(none)",
            addr: binary as *const () as usize,
        },
        Shim {
            name: "smelt_unary_int",
            decl: "declare i64 @smelt_unary_int(i32, i32, i64) nounwind willreturn memory(none)",
            addr: unary_int as *const () as usize,
        },
        Shim {
            name: "smelt_binary_int",
            decl:
                "declare i64 @smelt_binary_int(i32, i32, i64, i64) nounwind willreturn memory(none)",
            addr: binary_int as *const () as usize,
        },
        Shim {
            name: "smelt_round",
            decl: "declare double @smelt_round(i32, double) nounwind willreturn memory(none)",
            addr: round as *const () as usize,
        },
        Shim {
            name: "smelt_from_int",
            decl: "declare double @smelt_from_int(i32, i64) nounwind willreturn memory(none)",
            addr: from_int as *const () as usize,
        },
        Shim {
            name: "smelt_saturate",
            decl: "declare i64 @smelt_saturate(i32, double) nounwind willreturn memory(none)",
            addr: saturate as *const () as usize,
        },
        Shim {
            name: "smelt_half_to_f32",
            decl: "declare float @smelt_half_to_f32(i32, i16) nounwind willreturn memory(none)",
            addr: half_to_f32 as *const () as usize,
        },
        Shim {
            name: "smelt_f32_to_half",
            decl: "declare i16 @smelt_f32_to_half(i32, float) nounwind willreturn memory(none)",
            addr: f32_to_half as *const () as usize,
        },
    ]
}
