//! Typed columns of values, the CPU interpreter's unit of work: floats as
//! `f64` (every float dtype is exact there), integers and bools as `i64`
//! (exact for every integer dtype, `I64` beyond 2^53 included). Each op
//! runs as one loop over a column, by the rules of [`crate::convert`] and
//! [`crate::ops`].

use std::borrow::Cow;

use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use crate::DType;

/// Values of one dtype at a run of points.
#[derive(Clone, Debug, PartialEq)]
pub enum Col {
    /// Values of a float dtype.
    F(Vec<f64>),
    /// Values of an integer dtype or `Bool` (0 or 1).
    I(Vec<i64>),
}

impl Default for Col {
    fn default() -> Col {
        Col::F(Vec::new())
    }
}

impl Col {
    /// `n` copies of `c` converted to `dt`.
    pub fn splat(dt: DType, c: f64, n: usize) -> Col {
        if dt.is_float() {
            Col::F(vec![dt.round(c); n])
        } else {
            Col::I(vec![dt.saturate(c); n])
        }
    }

    /// `n` copies of the identity of `op` in `dt`.
    pub fn identity(op: ReduceOp, dt: DType, n: usize) -> Col {
        if dt.is_float() {
            Col::F(vec![op.identity(dt); n])
        } else {
            Col::I(vec![op.identity_int(dt); n])
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Col::F(v) => v.len(),
            Col::I(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each of the first `rows` values repeated `n` times.
    pub fn repeat_each(&self, rows: usize, n: usize) -> Col {
        fn rep<T: Copy>(v: &[T], rows: usize, n: usize) -> Vec<T> {
            let mut e = Vec::with_capacity(rows * n);
            for x in &v[..rows] {
                e.extend(std::iter::repeat_n(*x, n));
            }
            e
        }
        match self {
            Col::F(v) => Col::F(rep(v, rows, n)),
            Col::I(v) => Col::I(rep(v, rows, n)),
        }
    }

    /// Whether value `p` is true as a condition (`!= 0`; NaN is true).
    #[inline]
    pub fn truthy(&self, p: usize) -> bool {
        match self {
            Col::F(v) => v[p] != 0.0,
            Col::I(v) => v[p] != 0,
        }
    }

    /// The values (of dtype `from`) converted to `to` by the one
    /// conversion rule; borrowed when the dtypes are equal.
    pub fn to(&self, from: DType, to: DType) -> Cow<'_, Col> {
        if from == to {
            return Cow::Borrowed(self);
        }
        Cow::Owned(match self {
            Col::F(v) if to.is_float() => Col::F(v.iter().map(|x| to.round(*x)).collect()),
            Col::F(v) => Col::I(v.iter().map(|x| to.saturate(*x)).collect()),
            Col::I(v) if to.is_float() => Col::F(v.iter().map(|x| to.from_int(*x)).collect()),
            Col::I(v) => Col::I(v.iter().map(|x| to.wrap(*x)).collect()),
        })
    }

    /// `op` of these values (of dtype `from`) with result dtype `out`: the
    /// operand is converted to `out` first (to `Bool` for `Not`), as the
    /// PTX backend does.
    pub fn unary(&self, op: UnaryOp, from: DType, out: DType) -> Col {
        let cd = if op == UnaryOp::Not { DType::Bool } else { out };
        match &*self.to(from, cd) {
            Col::F(v) => Col::F(v.iter().map(|x| out.round(op.eval(*x))).collect()),
            Col::I(v) => Col::I(v.iter().map(|x| op.eval_int(out, *x)).collect()),
        }
    }

    /// `op(a, b)` for operands of dtypes `adt`, `bdt` and result dtype
    /// `out`, computed in [`BinaryOp::compute_dtype`].
    pub fn binary(op: BinaryOp, a: &Col, adt: DType, b: &Col, bdt: DType, out: DType) -> Col {
        let cd = op.compute_dtype(adt, bdt, out);
        let (a, b) = (a.to(adt, cd), b.to(bdt, cd));
        // Comparisons give bools whatever they compare.
        let rd = if op.is_comparison() { DType::Bool } else { cd };
        let r = match (&*a, &*b) {
            (Col::F(x), Col::F(y)) => {
                let it = x.iter().zip(y);
                if op.is_comparison() {
                    Col::I(it.map(|(x, y)| op.eval(*x, *y) as i64).collect())
                } else {
                    Col::F(it.map(|(x, y)| cd.round(op.eval(*x, *y))).collect())
                }
            }
            (Col::I(x), Col::I(y)) => Col::I(
                x.iter()
                    .zip(y)
                    .map(|(x, y)| op.eval_int(cd, *x, *y))
                    .collect(),
            ),
            _ => unreachable!("operands converted to one dtype"),
        };
        r.to(rd, out).into_owned()
    }

    /// `c ? a : b` per point, `a` and `b` of dtype `out` after conversion
    /// from `adt` and `bdt`.
    pub fn select(c: &Col, a: &Col, adt: DType, b: &Col, bdt: DType, out: DType) -> Col {
        let (a, b) = (a.to(adt, out), b.to(bdt, out));
        match (&*a, &*b) {
            (Col::F(x), Col::F(y)) => Col::F(
                (0..x.len())
                    .map(|p| if c.truthy(p) { x[p] } else { y[p] })
                    .collect(),
            ),
            (Col::I(x), Col::I(y)) => Col::I(
                (0..x.len())
                    .map(|p| if c.truthy(p) { x[p] } else { y[p] })
                    .collect(),
            ),
            _ => unreachable!("branches converted to one dtype"),
        }
    }

    /// Folds `vals[r * n..(r + 1) * n]` into `acc[r]` for every row `r`
    /// of `acc`, pairwise within the chunk (see [`tree_fold`]).
    pub fn fold_rows(acc: &mut Col, op: ReduceOp, dt: DType, vals: &Col, n: usize) {
        match (acc, vals) {
            (Col::F(acc), Col::F(v)) => {
                for (r, a) in acc.iter_mut().enumerate() {
                    let part = tree_fold(&v[r * n..(r + 1) * n], op.identity(dt), &|x, y| {
                        op.fold(dt, x, y)
                    });
                    *a = op.fold(dt, *a, part);
                }
            }
            (Col::I(acc), Col::I(v)) => {
                for (r, a) in acc.iter_mut().enumerate() {
                    let part = tree_fold(&v[r * n..(r + 1) * n], op.identity_int(dt), &|x, y| {
                        op.fold_int(dt, x, y)
                    });
                    *a = op.fold_int(dt, *a, part);
                }
            }
            _ => unreachable!("a reduction's operand has its dtype"),
        }
    }
}

/// `f` over `vals`, pairwise (the halves folded separately, then
/// together): rounding error grows with the log of the length, as on the
/// GPU's tree reductions, instead of linearly as a running sum's does.
fn tree_fold<T: Copy>(vals: &[T], id: T, f: &impl Fn(T, T) -> T) -> T {
    if vals.len() <= 8 {
        return vals.iter().fold(id, |a, v| f(a, *v));
    }
    let (l, r) = vals.split_at(vals.len() / 2);
    f(tree_fold(l, id, f), tree_fold(r, id, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_ops_compute_in_their_dtype() {
        let a = Col::I(vec![200, 3]);
        let b = Col::I(vec![100, 4]);
        let u8 = DType::U8;
        assert_eq!(
            Col::binary(BinaryOp::Add, &a, u8, &b, u8, u8),
            Col::I(vec![44, 7])
        );
        // Division of integers is a float op.
        assert_eq!(
            Col::binary(BinaryOp::Div, &a, u8, &b, u8, DType::F32),
            Col::F(vec![2.0, 0.75])
        );
        let big = Col::I(vec![(1 << 60) + 1]);
        let one = Col::I(vec![1 << 60]);
        let i64 = DType::I64;
        assert_eq!(
            Col::binary(BinaryOp::Gt, &big, i64, &one, i64, DType::Bool),
            Col::I(vec![1])
        );
    }

    #[test]
    fn reductions_wrap_in_their_dtype() {
        let mut acc = Col::identity(ReduceOp::Sum, DType::I64, 1);
        let v = Col::I(vec![i64::MAX, 1, 5]);
        Col::fold_rows(&mut acc, ReduceOp::Sum, DType::I64, &v, 3);
        assert_eq!(acc, Col::I(vec![i64::MIN + 5]));
    }
}
