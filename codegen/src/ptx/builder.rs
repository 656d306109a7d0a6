//! PTX text assembly: virtual registers by class, labels, instruction lines
//! and the register declarations that head a kernel body.

use std::fmt::{self, Write};

/// Register class; PTX declares each class with its own prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegKind {
    Pred,
    B16,
    B32,
    B64,
    F32,
    F64,
}

const KINDS: [RegKind; 6] = [
    RegKind::Pred,
    RegKind::B16,
    RegKind::B32,
    RegKind::B64,
    RegKind::F32,
    RegKind::F64,
];

impl RegKind {
    fn prefix(self) -> &'static str {
        match self {
            RegKind::Pred => "p",
            RegKind::B16 => "h",
            RegKind::B32 => "r",
            RegKind::B64 => "rd",
            RegKind::F32 => "f",
            RegKind::F64 => "fd",
        }
    }

    /// The bit-size PTX type of the class (`b32`, `b64`, ...) that moves,
    /// selects, shuffles and shared-memory accesses use; `pred` for
    /// predicates.
    pub fn bit_ty(self) -> &'static str {
        match self {
            RegKind::Pred => "pred",
            RegKind::B16 => "b16",
            RegKind::B32 | RegKind::F32 => "b32",
            RegKind::B64 | RegKind::F64 => "b64",
        }
    }

    fn decl(self) -> &'static str {
        match self {
            RegKind::Pred => ".pred",
            RegKind::B16 => ".b16",
            RegKind::B32 => ".b32",
            RegKind::B64 => ".b64",
            RegKind::F32 => ".f32",
            RegKind::F64 => ".f64",
        }
    }
}

/// A virtual register; ptxas does the real allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg {
    pub kind: RegKind,
    id: u32,
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}{}", self.kind.prefix(), self.id)
    }
}

/// An `f32` immediate in PTX's exact hexadecimal form.
pub fn f32_imm(v: f32) -> String {
    format!("0f{:08X}", v.to_bits())
}

/// Appends one instruction line (`ins!(b, "add.f32 {d}, {a}, {c}")`).
macro_rules! ins {
    ($b:expr, $($arg:tt)*) => {
        $b.ins(format_args!($($arg)*))
    };
}
pub(crate) use ins;

/// Accumulates a kernel body.
#[derive(Default)]
pub struct Builder {
    body: String,
    counts: [u32; 6],
    labels: u32,
}

impl Builder {
    /// A fresh register of `kind`.
    pub fn reg(&mut self, kind: RegKind) -> Reg {
        let slot = KINDS.iter().position(|k| *k == kind).unwrap();
        let id = self.counts[slot];
        self.counts[slot] += 1;
        Reg { kind, id }
    }

    /// Appends `text;` as one instruction.
    pub fn ins(&mut self, text: fmt::Arguments) {
        let _ = writeln!(self.body, "\t{text};");
    }

    /// Appends a comment line (read in `SMELT_DEBUG=4` dumps).
    pub fn comment(&mut self, text: &str) {
        let _ = writeln!(self.body, "\t// {text}");
    }

    /// A fresh label name.
    pub fn label(&mut self) -> String {
        self.labels += 1;
        format!("$L{}", self.labels)
    }

    /// Places `label` here.
    pub fn place(&mut self, label: &str) {
        let _ = writeln!(self.body, "{label}:");
    }

    /// A register holding the immediate `imm` (any PTX immediate text).
    pub fn mov(&mut self, kind: RegKind, ty: &str, imm: impl fmt::Display) -> Reg {
        let r = self.reg(kind);
        ins!(self, "mov.{ty} {r}, {imm}");
        r
    }

    /// The register declarations followed by the body.
    pub fn finish(self) -> String {
        let mut out = String::new();
        for (k, n) in KINDS.iter().zip(self.counts) {
            if n > 0 {
                let _ = writeln!(out, "\t.reg {} %{}<{n}>;", k.decl(), k.prefix());
            }
        }
        out.push_str(&self.body);
        out
    }
}
