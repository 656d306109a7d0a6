//! Integer index expressions over a kernel's loop variables, kept in a
//! simplified normal form: a linear combination of atoms (variables, floor
//! divisions and remainders by constants) plus a constant.
//!
//! Every builder takes the loop variables' sizes (`ranges`) so it can use
//! bounds to drop divisions and remainders that cannot change the value; that
//! is how a contiguous view becomes a plain linear index.

use std::fmt;

/// An atom of a linear index expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Atom {
    /// Loop variable `i` of the kernel, in `0..ranges[i]`.
    Var(usize),
    /// Floor division by a positive constant.
    Div(Box<Expr>, i64),
    /// Euclidean remainder by a positive constant.
    Mod(Box<Expr>, i64),
}

/// `konst + sum(coef * atom)`, terms sorted by atom, no zero coefficients.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Expr {
    terms: Vec<(Atom, i64)>,
    konst: i64,
}

impl Expr {
    /// The constant `c`.
    pub fn constant(c: i64) -> Expr {
        Expr {
            terms: Vec::new(),
            konst: c,
        }
    }

    /// Loop variable `i`.
    pub fn var(i: usize) -> Expr {
        Expr {
            terms: vec![(Atom::Var(i), 1)],
            konst: 0,
        }
    }

    fn atom(a: Atom) -> Expr {
        Expr {
            terms: vec![(a, 1)],
            konst: 0,
        }
    }

    /// The value if the expression is constant.
    pub fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.konst)
    }

    /// The terms `(atom, coefficient)` and the constant.
    pub fn parts(&self) -> (&[(Atom, i64)], i64) {
        (&self.terms, self.konst)
    }

    /// `self + other`.
    pub fn add(&self, other: &Expr) -> Expr {
        let mut terms = Vec::with_capacity(self.terms.len() + other.terms.len());
        let (mut i, mut j) = (0, 0);
        while i < self.terms.len() || j < other.terms.len() {
            let take_left = j >= other.terms.len()
                || (i < self.terms.len() && self.terms[i].0 < other.terms[j].0);
            let take_right = i >= self.terms.len()
                || (j < other.terms.len() && other.terms[j].0 < self.terms[i].0);
            if take_left {
                terms.push(self.terms[i].clone());
                i += 1;
            } else if take_right {
                terms.push(other.terms[j].clone());
                j += 1;
            } else {
                let c = self.terms[i].1 + other.terms[j].1;
                if c != 0 {
                    terms.push((self.terms[i].0.clone(), c));
                }
                i += 1;
                j += 1;
            }
        }
        Expr {
            terms,
            konst: self.konst + other.konst,
        }
    }

    /// `self + c`.
    pub fn add_const(&self, c: i64) -> Expr {
        Expr {
            terms: self.terms.clone(),
            konst: self.konst + c,
        }
    }

    /// `self * k`.
    pub fn scale(&self, k: i64) -> Expr {
        if k == 0 {
            return Expr::constant(0);
        }
        Expr {
            terms: self.terms.iter().map(|(a, c)| (a.clone(), c * k)).collect(),
            konst: self.konst * k,
        }
    }

    /// Inclusive bounds `(min, max)` given the variables' sizes.
    pub fn bounds(&self, ranges: &[i64]) -> (i64, i64) {
        let (mut lo, mut hi) = (self.konst, self.konst);
        for (a, c) in &self.terms {
            let (alo, ahi) = a.bounds(ranges);
            if *c >= 0 {
                lo += c * alo;
                hi += c * ahi;
            } else {
                lo += c * ahi;
                hi += c * alo;
            }
        }
        (lo, hi)
    }

    /// Splits `self = d * q + r` with `q` holding every term whose
    /// coefficient `d` divides, and `r` the rest (constant in `0..d`).
    fn split(&self, d: i64) -> (Expr, Expr) {
        let mut q = Expr::constant(self.konst.div_euclid(d));
        let mut r = Expr::constant(self.konst.rem_euclid(d));
        for (a, c) in &self.terms {
            if c % d == 0 {
                q.terms.push((a.clone(), c / d));
            } else {
                r.terms.push((a.clone(), *c));
            }
        }
        (q, r)
    }

    /// `self = g y + r` for the largest divisor `g < d` of `d` (shared with
    /// a coefficient) whose `r` (the terms `g` does not divide, the
    /// constant's remainder) stays in `0..g`: then no carry crosses a
    /// multiple of `g`, so `self / d = y / (d / g)` and `self % d = g (y %
    /// (d / g)) + r` (with `y = (d / g) a + b`, `g b + r < d`). How a
    /// reshape of an expanded axis (grouped-query heads) divides back.
    fn carry_free(&self, d: i64, ranges: &[i64]) -> Option<(i64, Expr, Expr)> {
        let gcd = |mut a: i64, mut b: i64| {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        };
        let mut best: Option<(i64, Expr, Expr)> = None;
        for (_, c) in &self.terms {
            let g = gcd(c.abs(), d);
            if g <= 1 || g == d || best.as_ref().is_some_and(|(b, ..)| *b >= g) {
                continue;
            }
            let (y, r) = self.split(g);
            let (lo, hi) = r.bounds(ranges);
            if lo >= 0 && hi < g {
                best = Some((g, y, r));
            }
        }
        best
    }

    /// Floor division `self / d` for `d > 0`.
    pub fn div(&self, d: i64, ranges: &[i64]) -> Expr {
        assert!(d > 0, "index division by {d}");
        if d == 1 {
            return self.clone();
        }
        let (q, r) = self.split(d);
        let (lo, hi) = r.bounds(ranges);
        if lo.div_euclid(d) == hi.div_euclid(d) {
            return q.add_const(lo.div_euclid(d));
        }
        if let Some((g, y, _)) = r.carry_free(d, ranges) {
            return q.add(&y.div(d / g, ranges));
        }
        // (x / a) / d == x / (a * d)
        let inner = match (r.terms.as_slice(), r.konst) {
            ([(Atom::Div(x, a), 1)], 0) => Atom::Div(x.clone(), a * d),
            _ => Atom::Div(Box::new(r), d),
        };
        q.add(&Expr::atom(inner))
    }

    /// Euclidean remainder `self % d` for `d > 0`.
    pub fn rem(&self, d: i64, ranges: &[i64]) -> Expr {
        assert!(d > 0, "index remainder by {d}");
        if d == 1 {
            return Expr::constant(0);
        }
        let (_, r) = self.split(d);
        let (lo, hi) = r.bounds(ranges);
        if lo >= 0 && hi < d {
            return r;
        }
        if lo.div_euclid(d) == hi.div_euclid(d) {
            return r.add_const(-lo.div_euclid(d) * d);
        }
        if let Some((g, y, rest)) = r.carry_free(d, ranges) {
            return y.rem(d / g, ranges).scale(g).add(&rest);
        }
        // (x % m) % d == x % d when d divides m
        let inner = match (r.terms.as_slice(), r.konst) {
            ([(Atom::Mod(x, m), 1)], 0) if m % d == 0 => Atom::Mod(x.clone(), d),
            _ => Atom::Mod(Box::new(r), d),
        };
        Expr::atom(inner)
    }

    /// Value at one point.
    pub fn eval(&self, vars: &[i64]) -> i64 {
        self.terms
            .iter()
            .fold(self.konst, |acc, (a, c)| acc + c * a.eval(vars))
    }

    /// Values at many points: `vars[i][p]` is variable `i` at point `p`;
    /// writes `out[p]`.
    pub fn eval_many(&self, vars: &[&[i64]], out: &mut [i64]) {
        out.fill(self.konst);
        let mut tmp = Vec::new();
        for (a, c) in &self.terms {
            let vals: &[i64] = match a {
                Atom::Var(i) => vars[*i],
                _ => {
                    tmp.resize(out.len(), 0);
                    a.eval_many(vars, &mut tmp);
                    &tmp
                }
            };
            for (o, v) in out.iter_mut().zip(vals) {
                *o += c * v;
            }
        }
    }

    /// The expression with every `Var(i)` replaced by `f(i)`, simplified
    /// with the new variables' `ranges`.
    pub fn substitute(&self, f: &dyn Fn(usize) -> Expr, ranges: &[i64]) -> Expr {
        self.terms
            .iter()
            .fold(Expr::constant(self.konst), |acc, (a, c)| {
                let v = match a {
                    Atom::Var(i) => f(*i),
                    Atom::Div(e, d) => e.substitute(f, ranges).div(*d, ranges),
                    Atom::Mod(e, d) => e.substitute(f, ranges).rem(*d, ranges),
                };
                acc.add(&v.scale(*c))
            })
    }

    /// Variables the expression reads.
    pub fn vars(&self, out: &mut Vec<usize>) {
        for (a, _) in &self.terms {
            match a {
                Atom::Var(i) => {
                    if !out.contains(i) {
                        out.push(*i)
                    }
                }
                Atom::Div(e, _) | Atom::Mod(e, _) => e.vars(out),
            }
        }
    }

    /// The coefficient of `Var(i)` if the expression is affine in it (the
    /// variable appears in no division or remainder).
    pub fn affine_coef(&self, i: usize) -> Option<i64> {
        let mut coef = 0;
        for (a, c) in &self.terms {
            match a {
                Atom::Var(j) if *j == i => coef = *c,
                Atom::Var(_) => {}
                Atom::Div(e, _) | Atom::Mod(e, _) => {
                    let mut vs = Vec::new();
                    e.vars(&mut vs);
                    if vs.contains(&i) {
                        return None;
                    }
                }
            }
        }
        Some(coef)
    }
}

impl Atom {
    fn bounds(&self, ranges: &[i64]) -> (i64, i64) {
        match self {
            Atom::Var(i) => (0, (ranges[*i] - 1).max(0)),
            Atom::Div(e, d) => {
                let (lo, hi) = e.bounds(ranges);
                (lo.div_euclid(*d), hi.div_euclid(*d))
            }
            Atom::Mod(e, d) => {
                let (lo, hi) = e.bounds(ranges);
                if lo >= 0 && hi < *d {
                    (lo, hi)
                } else {
                    (0, d - 1)
                }
            }
        }
    }

    fn eval(&self, vars: &[i64]) -> i64 {
        match self {
            Atom::Var(i) => vars[*i],
            Atom::Div(e, d) => e.eval(vars).div_euclid(*d),
            Atom::Mod(e, d) => e.eval(vars).rem_euclid(*d),
        }
    }

    fn eval_many(&self, vars: &[&[i64]], out: &mut [i64]) {
        match self {
            Atom::Var(i) => out.copy_from_slice(vars[*i]),
            Atom::Div(e, d) => {
                e.eval_many(vars, out);
                out.iter_mut().for_each(|v| *v = v.div_euclid(*d));
            }
            Atom::Mod(e, d) => {
                e.eval_many(vars, out);
                out.iter_mut().for_each(|v| *v = v.rem_euclid(*d));
            }
        }
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Var(i) => write!(f, "i{i}"),
            Atom::Div(e, d) => write!(f, "({e})/{d}"),
            Atom::Mod(e, d) => write!(f, "({e})%{d}"),
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (a, c) in &self.terms {
            let sep = if first { "" } else { " + " };
            match c {
                1 => write!(f, "{sep}{a}")?,
                _ => write!(f, "{sep}{a}*{c}")?,
            }
            first = false;
        }
        if first {
            write!(f, "{}", self.konst)
        } else if self.konst != 0 {
            write!(f, " + {}", self.konst)
        } else {
            Ok(())
        }
    }
}

/// A conjunction of range checks `lo <= expr < hi`; empty means always true.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Cond {
    /// The checks; `None` when the condition can never hold.
    checks: Option<Vec<(Expr, i64, i64)>>,
}

impl Cond {
    /// The condition that always holds.
    pub fn always() -> Cond {
        Cond {
            checks: Some(Vec::new()),
        }
    }

    /// True if no check remains.
    pub fn is_always(&self) -> bool {
        matches!(&self.checks, Some(c) if c.is_empty())
    }

    /// True if the condition can never hold.
    pub fn is_never(&self) -> bool {
        self.checks.is_none()
    }

    /// The remaining checks (empty for both always and never).
    pub fn checks(&self) -> &[(Expr, i64, i64)] {
        self.checks.as_deref().unwrap_or(&[])
    }

    /// Adds `lo <= e < hi`, dropping it when bounds prove it.
    pub fn and_range(mut self, e: Expr, lo: i64, hi: i64, ranges: &[i64]) -> Cond {
        let Some(checks) = self.checks.as_mut() else {
            return self;
        };
        let (elo, ehi) = e.bounds(ranges);
        if elo >= lo && ehi < hi {
            return self;
        }
        if ehi < lo || elo >= hi || lo >= hi {
            return Cond { checks: None };
        }
        if !checks.iter().any(|c| c.0 == e && c.1 == lo && c.2 == hi) {
            checks.push((e, lo, hi));
        }
        self
    }

    /// The condition with variables replaced (see [`Expr::substitute`]).
    pub fn substitute(&self, f: &dyn Fn(usize) -> Expr, ranges: &[i64]) -> Cond {
        match &self.checks {
            None => Cond { checks: None },
            Some(cs) => cs.iter().fold(Cond::always(), |acc, (e, lo, hi)| {
                acc.and_range(e.substitute(f, ranges), *lo, *hi, ranges)
            }),
        }
    }

    /// Conjunction of two conditions.
    pub fn and(mut self, other: &Cond, ranges: &[i64]) -> Cond {
        match &other.checks {
            None => Cond { checks: None },
            Some(cs) => {
                for (e, lo, hi) in cs {
                    self = self.and_range(e.clone(), *lo, *hi, ranges);
                }
                self
            }
        }
    }

    /// Value at one point.
    pub fn eval(&self, vars: &[i64]) -> bool {
        match &self.checks {
            None => false,
            Some(cs) => cs.iter().all(|(e, lo, hi)| {
                let v = e.eval(vars);
                *lo <= v && v < *hi
            }),
        }
    }
}

impl fmt::Display for Cond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.checks {
            None => f.write_str("false"),
            Some(cs) if cs.is_empty() => f.write_str("true"),
            Some(cs) => {
                for (k, (e, lo, hi)) in cs.iter().enumerate() {
                    if k > 0 {
                        f.write_str(" && ")?;
                    }
                    write!(f, "{lo}<={e}<{hi}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_unravel_ravel_is_linear() {
        // i0 in 0..24 unravelled into (4, 6) and ravelled again.
        let r = [24];
        let l = Expr::var(0);
        let a = l.div(6, &r).rem(4, &r);
        let b = l.rem(6, &r);
        assert_eq!(a, l.div(6, &r));
        let back = a.scale(6).add(&b);
        assert_eq!(back.eval(&[13]), 13);
        assert_eq!(format!("{}", l.div(6, &r)), "(i0)/6");
    }

    #[test]
    fn bounds_drop_div_and_mod() {
        let r = [4, 6];
        let e = Expr::var(0).scale(6).add(&Expr::var(1));
        assert_eq!(e.div(6, &r), Expr::var(0));
        assert_eq!(e.rem(6, &r), Expr::var(1));
        assert_eq!(e.div(24, &r), Expr::constant(0));
        assert_eq!(e.div(2, &r).div(3, &r), Expr::var(0));
    }

    #[test]
    fn carry_free_divisions_split() {
        // A reshape of an expanded head axis: (h * 448 + j * 64 + d) / 896
        // is h / 2 since j * 64 + d < 448; the remainder keeps j and d.
        let r = [4, 7, 64];
        let e = Expr::var(0)
            .scale(448)
            .add(&Expr::var(1).scale(64))
            .add(&Expr::var(2));
        assert_eq!(e.div(896, &r), Expr::var(0).div(2, &r));
        let m = e.rem(896, &r);
        assert_eq!(m.affine_coef(1), Some(64));
        assert_eq!(m.affine_coef(2), Some(1));
        // Exhaustively equal to the plain floor division and remainder,
        // with constants and negative coefficients too.
        let cases = [
            (vec![(0, 12), (1, 3), (2, 1)], 1, 24),
            (vec![(0, -12), (1, 4), (2, 1)], 2, 36),
            (vec![(0, 6), (1, 2), (2, 1)], 0, 12),
            (vec![(0, 10), (1, 5), (2, 1)], 3, 20),
        ];
        let r = [5, 3, 2];
        for (terms, k, d) in cases {
            let e = terms.iter().fold(Expr::constant(k), |acc, (v, c)| {
                acc.add(&Expr::var(*v).scale(*c))
            });
            let (q, m) = (e.div(d, &r), e.rem(d, &r));
            for a in 0..5 {
                for b in 0..3 {
                    for c in 0..2 {
                        let x = e.eval(&[a, b, c]);
                        assert_eq!(q.eval(&[a, b, c]), x.div_euclid(d), "{e} / {d}");
                        assert_eq!(m.eval(&[a, b, c]), x.rem_euclid(d), "{e} % {d}");
                    }
                }
            }
        }
    }

    #[test]
    fn eval_many_matches_eval() {
        let r = [7, 5];
        let e = Expr::var(0)
            .scale(-3)
            .add(&Expr::var(1).rem(2, &r))
            .add_const(40)
            .div(4, &r);
        let v0: Vec<i64> = (0..35).map(|p| p / 5).collect();
        let v1: Vec<i64> = (0..35).map(|p| p % 5).collect();
        let mut out = vec![0; 35];
        e.eval_many(&[&v0, &v1], &mut out);
        for p in 0..35 {
            assert_eq!(out[p], e.eval(&[v0[p], v1[p]]));
            assert_eq!(out[p], (40 - 3 * v0[p] + v1[p] % 2).div_euclid(4));
        }
    }

    #[test]
    fn conditions_simplify() {
        let r = [10];
        let c = Cond::always().and_range(Expr::var(0), 0, 10, &r);
        assert!(c.is_always());
        let c = Cond::always().and_range(Expr::var(0).add_const(-2), 0, 5, &r);
        assert!(!c.is_always() && c.eval(&[3]) && !c.eval(&[1]) && !c.eval(&[7]));
        assert!(Cond::always()
            .and_range(Expr::var(0), 20, 30, &r)
            .is_never());
    }
}
