//! Index lowering: loop-variable unravelling, index expressions and range
//! conditions, in 32-bit integers when every intermediate value provably
//! fits and in 64-bit otherwise.

use super::builder::{ins, Builder, Reg, RegKind};
use crate::expr::{Atom, Cond, Expr};

/// Integer width of a kernel's index arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Width {
    pub wide: bool,
}

impl Width {
    /// The register class of an index.
    pub fn kind(self) -> RegKind {
        if self.wide {
            RegKind::B64
        } else {
            RegKind::B32
        }
    }

    /// Bit width as used in type suffixes (`s32`, `u64`, ...).
    pub fn bits(self) -> u32 {
        if self.wide {
            64
        } else {
            32
        }
    }

    /// A fresh index register.
    pub fn reg(self, b: &mut Builder) -> Reg {
        b.reg(self.kind())
    }

    /// An index register holding `v`.
    pub fn imm(self, b: &mut Builder, v: i64) -> Reg {
        let r = self.reg(b);
        ins!(b, "mov.b{} {r}, {v}", self.bits());
        r
    }
}

/// Largest magnitude any intermediate value of `e` can take, with the
/// shifts [`eval`] adds before unsigned division.
pub fn magnitude(e: &Expr, ranges: &[i64]) -> i128 {
    let (terms, k) = e.parts();
    let mut total = k.unsigned_abs() as i128;
    for (a, c) in terms {
        let m = match a {
            Atom::Var(i) => ranges[*i].max(1) as i128,
            Atom::Div(inner, d) | Atom::Mod(inner, d) => {
                magnitude(inner, ranges) + 2 * shift(inner, *d, ranges) as i128
            }
        };
        total += m * c.unsigned_abs() as i128;
    }
    total
}

/// The multiple of `d` added to `e` so that it is never negative.
fn shift(e: &Expr, d: i64, ranges: &[i64]) -> i64 {
    let (lo, _) = e.bounds(ranges);
    if lo >= 0 {
        0
    } else {
        (-lo + d - 1) / d * d
    }
}

/// Registers of the loop variables that have been computed.
pub type Vars = [Option<Reg>];

/// `e` at the point whose variables are `vars`.
pub fn eval(b: &mut Builder, e: &Expr, vars: &Vars, ranges: &[i64], w: Width) -> Reg {
    let (terms, k) = e.parts();
    let n = w.bits();
    let mut acc: Option<Reg> = None;
    for (a, c) in terms {
        let v = atom(b, a, vars, ranges, w);
        let r = w.reg(b);
        match (acc, *c) {
            (None, 1) => ins!(b, "mov.b{n} {r}, {v}"),
            (None, c) => ins!(b, "mul.lo.s{n} {r}, {v}, {c}"),
            (Some(s), 1) => ins!(b, "add.s{n} {r}, {v}, {s}"),
            (Some(s), c) => ins!(b, "mad.lo.s{n} {r}, {v}, {c}, {s}"),
        }
        acc = Some(r);
    }
    match acc {
        None => w.imm(b, k),
        Some(s) if k == 0 => s,
        Some(s) => {
            let r = w.reg(b);
            ins!(b, "add.s{n} {r}, {s}, {k}");
            r
        }
    }
}

fn atom(b: &mut Builder, a: &Atom, vars: &Vars, ranges: &[i64], w: Width) -> Reg {
    let n = w.bits();
    match a {
        Atom::Var(i) => vars[*i].unwrap_or_else(|| panic!("loop variable {i} not computed")),
        Atom::Div(inner, d) | Atom::Mod(inner, d) => {
            // Floor division and euclidean remainder as unsigned ops on
            // `inner + s` (s a multiple of d that makes it non-negative).
            let s = shift(inner, *d, ranges);
            let x = eval(b, inner, vars, ranges, w);
            let x = if s == 0 {
                x
            } else {
                let r = w.reg(b);
                ins!(b, "add.s{n} {r}, {x}, {s}");
                r
            };
            let r = w.reg(b);
            if matches!(a, Atom::Div(..)) {
                ins!(b, "div.u{n} {r}, {x}, {d}");
                if s != 0 {
                    ins!(b, "sub.s{n} {r}, {r}, {}", s / d);
                }
            } else {
                ins!(b, "rem.u{n} {r}, {x}, {d}");
            }
            r
        }
    }
}

/// `p && q`, where `None` is true.
pub fn and(b: &mut Builder, p: Option<Reg>, q: Option<Reg>) -> Option<Reg> {
    match (p, q) {
        (Some(p), Some(q)) => {
            let r = b.reg(RegKind::Pred);
            ins!(b, "and.pred {r}, {p}, {q}");
            Some(r)
        }
        (p, None) => p,
        (None, q) => q,
    }
}

/// A predicate that is always false.
pub fn never(b: &mut Builder) -> Reg {
    let p = b.reg(RegKind::Pred);
    ins!(b, "setp.ne.u32 {p}, 0, 0");
    p
}

/// The predicate of `c` (`None` when it always holds).
pub fn cond(b: &mut Builder, c: &Cond, vars: &Vars, ranges: &[i64], w: Width) -> Option<Reg> {
    if c.is_never() {
        return Some(never(b));
    }
    let n = w.bits();
    let mut acc = None;
    for (e, lo, hi) in c.checks() {
        // lo <= v < hi  <=>  (v - lo) < (hi - lo) unsigned.
        let v = eval(b, e, vars, ranges, w);
        let t = w.reg(b);
        ins!(b, "sub.s{n} {t}, {v}, {lo}");
        let p = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.u{n} {p}, {t}, {}", hi - lo);
        acc = and(b, acc, Some(p));
    }
    acc
}

/// The variables of a row-major domain of `sizes` at linear position
/// `lin`, computing only those marked in `needed`.
pub fn unravel(
    b: &mut Builder,
    lin: Reg,
    sizes: &[i64],
    needed: &[bool],
    w: Width,
) -> Vec<Option<Reg>> {
    let n = w.bits();
    let mut out = vec![None; sizes.len()];
    let mut stride = 1i64;
    for d in (0..sizes.len()).rev() {
        let size = sizes[d].max(1);
        if needed[d] {
            let q = if stride == 1 {
                lin
            } else {
                let q = w.reg(b);
                ins!(b, "div.u{n} {q}, {lin}, {stride}");
                q
            };
            out[d] = Some(if d == 0 {
                q
            } else {
                let r = w.reg(b);
                ins!(b, "rem.u{n} {r}, {q}, {size}");
                r
            });
        }
        stride = stride.saturating_mul(size);
    }
    out
}
