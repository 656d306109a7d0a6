//! The instruction set that the `f64` math algorithms ([`super::f64alg`],
//! [`super::f64trig`], [`super::f64erf`]) are written against. Each
//! algorithm is one generic function over [`F64Ops`]; [`Ptx`] reads it as
//! PTX text, one instruction per call, and the tests' model reads the same
//! function as `f64`/`u64` arithmetic with PTX's semantics. So the PTX that
//! runs on the GPU is, step by step, the arithmetic that the tests check
//! against `std` and `libm` on the CPU: there is no second transcription
//! to drift.

use super::builder::{ins, Builder, Reg, RegKind};
use super::ops::f64_imm;
use std::fmt;

/// An ordered comparison (false when an operand is NaN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Eq,
    Ne,
}

impl Cmp {
    fn ptx(self) -> &'static str {
        match self {
            Cmp::Lt => "lt",
            Cmp::Le => "le",
            Cmp::Gt => "gt",
            Cmp::Eq => "eq",
            Cmp::Ne => "ne",
        }
    }
}

/// The rounding of an `f64` to an integral `f64` (`cvt.r*i.f64.f64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rnd {
    /// To nearest, ties to even (`rni`).
    Nearest,
    /// Toward zero (`rzi`).
    Zero,
}

/// A 64-bit integer operation (two's complement, wrapping). Shift amounts
/// of 64 or more give 0 (`ShrS`: the sign fill), as PTX clamps them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IOp {
    Add,
    Sub,
    And,
    Or,
    Xor,
    Shl,
    ShrU,
    ShrS,
    MulLo,
    /// The high 64 bits of the unsigned 128-bit product.
    MulHiU,
}

/// `f64` values (`F`), 64-bit integers (`I`) and predicates (`P`), with the
/// PTX instructions the algorithms use. Float arithmetic is IEEE
/// round-to-nearest (`.rn`), `fma` rounds once; `min`/`max` return the
/// other operand when one is NaN (PTX `min.f64`).
pub trait F64Ops {
    type F: Copy;
    type I: Copy;
    type P: Copy;
    fn f(&mut self, v: f64) -> Self::F;
    fn i(&mut self, v: i64) -> Self::I;
    fn add(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn sub(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn mul(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn div(&mut self, a: Self::F, b: Self::F) -> Self::F;
    /// `a * b + c`, rounded once.
    fn fma(&mut self, a: Self::F, b: Self::F, c: Self::F) -> Self::F;
    fn min(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn max(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn neg(&mut self, a: Self::F) -> Self::F;
    fn abs(&mut self, a: Self::F) -> Self::F;
    fn round(&mut self, r: Rnd, a: Self::F) -> Self::F;
    /// `|mag|` with the sign bit of `sign`.
    fn copysign(&mut self, mag: Self::F, sign: Self::F) -> Self::F;
    fn cmp(&mut self, c: Cmp, a: Self::F, b: Self::F) -> Self::P;
    fn is_nan(&mut self, a: Self::F) -> Self::P;
    /// `p ? a : b`.
    fn sel(&mut self, p: Self::P, a: Self::F, b: Self::F) -> Self::F;
    fn and(&mut self, p: Self::P, q: Self::P) -> Self::P;
    fn or(&mut self, p: Self::P, q: Self::P) -> Self::P;
    fn not(&mut self, p: Self::P) -> Self::P;
    fn bits_of(&mut self, a: Self::F) -> Self::I;
    fn float_of(&mut self, a: Self::I) -> Self::F;
    fn iop(&mut self, op: IOp, a: Self::I, b: Self::I) -> Self::I;
    fn icmp(&mut self, c: Cmp, signed: bool, a: Self::I, b: Self::I) -> Self::P;
    fn isel(&mut self, p: Self::P, a: Self::I, b: Self::I) -> Self::I;
    /// The integer rounded to the nearest `f64`.
    fn int_to_f(&mut self, a: Self::I, signed: bool) -> Self::F;
    /// `trunc(a)` as an `i64`, saturating; NaN gives 0.
    fn f_to_int(&mut self, a: Self::F) -> Self::I;
    /// `cur` where `skip`, else `body`'s values: on the GPU a branch around
    /// `body`, so that only the threads that need a slow path run it.
    fn unless<const N: usize>(
        &mut self,
        skip: Self::P,
        cur: [Self::F; N],
        body: impl FnOnce(&mut Self) -> [Self::F; N],
    ) -> [Self::F; N];
}

/// An `f64` operand for PTX: a register or an immediate.
#[derive(Clone, Copy, Debug)]
pub enum Fv {
    R(Reg),
    C(f64),
}

impl fmt::Display for Fv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fv::R(r) => r.fmt(f),
            Fv::C(v) => f.write_str(&f64_imm(*v)),
        }
    }
}

/// A 64-bit integer operand for PTX: a register or an immediate.
#[derive(Clone, Copy, Debug)]
pub enum Iv {
    R(Reg),
    C(i64),
}

impl fmt::Display for Iv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Iv::R(r) => r.fmt(f),
            Iv::C(v) => write!(f, "0x{:016X}", *v as u64),
        }
    }
}

/// [`F64Ops`] as PTX text appended to a [`Builder`]. Immediates stay
/// immediates where PTX allows them (second and later operands, `selp`);
/// a leading or lone one is moved into a register first.
pub struct Ptx<'a>(pub &'a mut Builder);

impl Ptx<'_> {
    fn freg(&mut self) -> Reg {
        self.0.reg(RegKind::F64)
    }

    fn ireg(&mut self) -> Reg {
        self.0.reg(RegKind::B64)
    }

    fn preg(&mut self) -> Reg {
        self.0.reg(RegKind::Pred)
    }

    /// `a` as a register.
    pub fn reg_of(&mut self, a: Fv) -> Reg {
        match a {
            Fv::R(r) => r,
            Fv::C(v) => self.0.mov(RegKind::F64, "f64", f64_imm(v)),
        }
    }

    fn ireg_of(&mut self, a: Iv) -> Reg {
        match a {
            Iv::R(r) => r,
            Iv::C(_) => self.0.mov(RegKind::B64, "b64", a),
        }
    }

    fn fop(&mut self, text: &str, a: Fv, b: Fv) -> Fv {
        let a = self.reg_of(a);
        let d = self.freg();
        ins!(self.0, "{text}.f64 {d}, {a}, {b}");
        Fv::R(d)
    }

    fn funary(&mut self, text: &str, a: Fv) -> Fv {
        let a = self.reg_of(a);
        let d = self.freg();
        ins!(self.0, "{text} {d}, {a}");
        Fv::R(d)
    }

    fn pop(&mut self, text: &str, p: Reg, q: Reg) -> Reg {
        let d = self.preg();
        ins!(self.0, "{text}.pred {d}, {p}, {q}");
        d
    }
}

impl F64Ops for Ptx<'_> {
    type F = Fv;
    type I = Iv;
    type P = Reg;

    fn f(&mut self, v: f64) -> Fv {
        Fv::C(v)
    }

    fn i(&mut self, v: i64) -> Iv {
        Iv::C(v)
    }

    fn add(&mut self, a: Fv, b: Fv) -> Fv {
        self.fop("add.rn", a, b)
    }

    fn sub(&mut self, a: Fv, b: Fv) -> Fv {
        self.fop("sub.rn", a, b)
    }

    fn mul(&mut self, a: Fv, b: Fv) -> Fv {
        self.fop("mul.rn", a, b)
    }

    fn div(&mut self, a: Fv, b: Fv) -> Fv {
        self.fop("div.rn", a, b)
    }

    fn fma(&mut self, a: Fv, b: Fv, c: Fv) -> Fv {
        let a = self.reg_of(a);
        let d = self.freg();
        ins!(self.0, "fma.rn.f64 {d}, {a}, {b}, {c}");
        Fv::R(d)
    }

    fn min(&mut self, a: Fv, b: Fv) -> Fv {
        self.fop("min", a, b)
    }

    fn max(&mut self, a: Fv, b: Fv) -> Fv {
        self.fop("max", a, b)
    }

    fn neg(&mut self, a: Fv) -> Fv {
        self.funary("neg.f64", a)
    }

    fn abs(&mut self, a: Fv) -> Fv {
        self.funary("abs.f64", a)
    }

    fn round(&mut self, r: Rnd, a: Fv) -> Fv {
        let mode = match r {
            Rnd::Nearest => "rni",
            Rnd::Zero => "rzi",
        };
        self.funary(&format!("cvt.{mode}.f64.f64"), a)
    }

    fn copysign(&mut self, mag: Fv, sign: Fv) -> Fv {
        let (m, s) = (self.reg_of(mag), self.reg_of(sign));
        let d = self.freg();
        // PTX's operand order: the sign source first.
        ins!(self.0, "copysign.f64 {d}, {s}, {m}");
        Fv::R(d)
    }

    fn cmp(&mut self, c: Cmp, a: Fv, b: Fv) -> Reg {
        let a = self.reg_of(a);
        let p = self.preg();
        ins!(self.0, "setp.{}.f64 {p}, {a}, {b}", c.ptx());
        p
    }

    fn is_nan(&mut self, a: Fv) -> Reg {
        let a = self.reg_of(a);
        let p = self.preg();
        ins!(self.0, "setp.nan.f64 {p}, {a}, {a}");
        p
    }

    fn sel(&mut self, p: Reg, a: Fv, b: Fv) -> Fv {
        let d = self.freg();
        ins!(self.0, "selp.f64 {d}, {a}, {b}, {p}");
        Fv::R(d)
    }

    fn and(&mut self, p: Reg, q: Reg) -> Reg {
        self.pop("and", p, q)
    }

    fn or(&mut self, p: Reg, q: Reg) -> Reg {
        self.pop("or", p, q)
    }

    fn not(&mut self, p: Reg) -> Reg {
        let d = self.preg();
        ins!(self.0, "not.pred {d}, {p}");
        d
    }

    fn bits_of(&mut self, a: Fv) -> Iv {
        let a = self.reg_of(a);
        let d = self.ireg();
        ins!(self.0, "mov.b64 {d}, {a}");
        Iv::R(d)
    }

    fn float_of(&mut self, a: Iv) -> Fv {
        let a = self.ireg_of(a);
        let d = self.freg();
        ins!(self.0, "mov.b64 {d}, {a}");
        Fv::R(d)
    }

    fn iop(&mut self, op: IOp, a: Iv, b: Iv) -> Iv {
        let a = self.ireg_of(a);
        let d = self.ireg();
        let text = match op {
            IOp::Add => "add.s64",
            IOp::Sub => "sub.s64",
            IOp::And => "and.b64",
            IOp::Or => "or.b64",
            IOp::Xor => "xor.b64",
            IOp::Shl => "shl.b64",
            IOp::ShrU => "shr.u64",
            IOp::ShrS => "shr.s64",
            IOp::MulLo => "mul.lo.u64",
            IOp::MulHiU => "mul.hi.u64",
        };
        if matches!(op, IOp::Shl | IOp::ShrU | IOp::ShrS) {
            // Shift amounts are .u32 operands.
            let n = match b {
                Iv::C(v) => (v as u32).to_string(),
                Iv::R(r) => {
                    let n = self.0.reg(RegKind::B32);
                    ins!(self.0, "cvt.u32.u64 {n}, {r}");
                    n.to_string()
                }
            };
            ins!(self.0, "{text} {d}, {a}, {n}");
        } else {
            ins!(self.0, "{text} {d}, {a}, {b}");
        }
        Iv::R(d)
    }

    fn icmp(&mut self, c: Cmp, signed: bool, a: Iv, b: Iv) -> Reg {
        let a = self.ireg_of(a);
        let p = self.preg();
        let ty = if signed { "s64" } else { "u64" };
        ins!(self.0, "setp.{}.{ty} {p}, {a}, {b}", c.ptx());
        p
    }

    fn isel(&mut self, p: Reg, a: Iv, b: Iv) -> Iv {
        let d = self.ireg();
        ins!(self.0, "selp.b64 {d}, {a}, {b}, {p}");
        Iv::R(d)
    }

    fn int_to_f(&mut self, a: Iv, signed: bool) -> Fv {
        let a = self.ireg_of(a);
        let d = self.freg();
        let ty = if signed { "s64" } else { "u64" };
        ins!(self.0, "cvt.rn.f64.{ty} {d}, {a}");
        Fv::R(d)
    }

    fn f_to_int(&mut self, a: Fv) -> Iv {
        let a = self.reg_of(a);
        let d = self.ireg();
        ins!(self.0, "cvt.rzi.s64.f64 {d}, {a}");
        Iv::R(d)
    }

    fn unless<const N: usize>(
        &mut self,
        skip: Reg,
        cur: [Fv; N],
        body: impl FnOnce(&mut Self) -> [Fv; N],
    ) -> [Fv; N] {
        // Fresh registers: the body's values are moved into them, never
        // into a register that other code reads.
        let out = cur.map(|v| {
            let o = self.freg();
            ins!(self.0, "mov.f64 {o}, {v}");
            Fv::R(o)
        });
        let done = self.0.label();
        ins!(self.0, "@{skip} bra {done}");
        let new = body(self);
        for (o, n) in out.iter().zip(new) {
            ins!(self.0, "mov.f64 {o}, {n}");
        }
        self.0.place(&done);
        out
    }
}
