//! Scan (prefix) operations along one axis, with their reference
//! semantics: what `cumsum`, `cumprod`, `cummax`/`cummin` (values and
//! indices) and `logcumsumexp` compute at each position of a row.
//!
//! Scans run on `F32` or `I32` operands only: the tensor API casts halves
//! to `f32` (they scan in `f32` and are rounded once when stored) and bools
//! to an integer type.

use crate::ops::BinaryOp;
use crate::DType;

/// An inclusive scan along a row: element `i` of the result combines the
/// operand's elements `0..=i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanOp {
    /// Running sum (`cumsum`).
    Sum,
    /// Running product (`cumprod`).
    Prod,
    /// Running maximum (`cummax` values); NaN stays once seen.
    Max,
    /// Running minimum (`cummin` values); NaN stays once seen.
    Min,
    /// Running `log(sum(exp(x)))` (`logcumsumexp`), combined pairwise
    /// with [`log_add_exp`] so no intermediate overflows.
    LogSumExp,
    /// Index of the running maximum (`cummax` indices): the last position
    /// whose value is `>=` the maximum so far, or the last NaN once a NaN
    /// was seen, as PyTorch's `cummax` does.
    ArgMax,
    /// Index of the running minimum (`cummin` indices), like [`ScanOp::ArgMax`]
    /// with `<=`.
    ArgMin,
}

impl ScanOp {
    /// Whether the op yields positions (its result has an integer index
    /// dtype) rather than values of the operand's dtype.
    pub fn is_index(self) -> bool {
        matches!(self, ScanOp::ArgMax | ScanOp::ArgMin)
    }

    /// The value the running state starts from (for index ops, the value
    /// part of the state; the position starts at 0).
    pub fn identity(self, dtype: DType) -> f64 {
        let int = dtype == DType::I32;
        match self {
            ScanOp::Sum => 0.0,
            ScanOp::Prod => 1.0,
            ScanOp::Max | ScanOp::ArgMax if int => i32::MIN as f64,
            ScanOp::Min | ScanOp::ArgMin if int => i32::MAX as f64,
            ScanOp::Max | ScanOp::ArgMax | ScanOp::LogSumExp => f64::NEG_INFINITY,
            ScanOp::Min | ScanOp::ArgMin => f64::INFINITY,
        }
    }

    /// Folds the later value `x` into the running value `acc` (exact, in
    /// `f64`; `I32` sums and products wrap as two's complement). Index ops
    /// fold their value part like `Max`/`Min`.
    #[inline]
    pub fn combine(self, dtype: DType, acc: f64, x: f64) -> f64 {
        let int = dtype == DType::I32;
        match self {
            ScanOp::Sum if int => BinaryOp::Add.eval_i32(acc, x),
            ScanOp::Prod if int => BinaryOp::Mul.eval_i32(acc, x),
            ScanOp::Sum => acc + x,
            ScanOp::Prod => acc * x,
            ScanOp::Max | ScanOp::Min | ScanOp::ArgMax | ScanOp::ArgMin => {
                if self.later_wins(acc, x) {
                    x
                } else {
                    acc
                }
            }
            ScanOp::LogSumExp => log_add_exp(acc, x),
        }
    }

    /// For the max/min family: whether the later value `x` replaces the
    /// running value `acc` (and its position). A NaN always does, nothing
    /// replaces a NaN but a NaN, and ties go to the later position
    /// (PyTorch's `cummax` compares with `>=`, `cummin` with `<=`).
    #[inline]
    pub fn later_wins(self, acc: f64, x: f64) -> bool {
        let max = matches!(self, ScanOp::Max | ScanOp::ArgMax);
        x.is_nan() || (!acc.is_nan() && if max { x >= acc } else { x <= acc })
    }

    /// Lower-case name used in kernel names and debug output.
    pub fn name(self) -> &'static str {
        match self {
            ScanOp::Sum => "cumsum",
            ScanOp::Prod => "cumprod",
            ScanOp::Max => "cummax",
            ScanOp::Min => "cummin",
            ScanOp::LogSumExp => "logcumsumexp",
            ScanOp::ArgMax => "cumargmax",
            ScanOp::ArgMin => "cumargmin",
        }
    }
}

/// `log(e^a + e^b)` without overflow: `max + log1p(e^(min - max))`. NaN if
/// either is NaN; two equal infinities give that infinity (where
/// `min - max` would be NaN).
#[inline]
pub fn log_add_exp(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    if lo == hi && lo.is_infinite() {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_family_follows_pytorch_ties_and_nan() {
        // Ties move the index to the later position.
        assert!(ScanOp::ArgMax.later_wins(1.0, 1.0));
        assert!(ScanOp::ArgMin.later_wins(1.0, 1.0));
        assert!(!ScanOp::ArgMax.later_wins(2.0, 1.0));
        // NaN wins and stays; a later NaN takes the index.
        assert!(ScanOp::ArgMax.later_wins(5.0, f64::NAN));
        assert!(!ScanOp::ArgMax.later_wins(f64::NAN, 9.0));
        assert!(ScanOp::ArgMax.later_wins(f64::NAN, f64::NAN));
        assert!(ScanOp::Max.combine(DType::F32, f64::NAN, 3.0).is_nan());
    }

    #[test]
    fn log_add_exp_is_stable() {
        assert_eq!(
            log_add_exp(f64::NEG_INFINITY, f64::NEG_INFINITY),
            f64::NEG_INFINITY
        );
        assert_eq!(log_add_exp(f64::INFINITY, f64::INFINITY), f64::INFINITY);
        assert_eq!(log_add_exp(f64::INFINITY, 3.0), f64::INFINITY);
        assert!(log_add_exp(f64::NAN, 3.0).is_nan());
        assert!((log_add_exp(1000.0, 1000.0) - (1000.0 + 2f64.ln())).abs() < 1e-12);
        assert_eq!(log_add_exp(-1000.0, f64::NEG_INFINITY), -1000.0);
    }

    #[test]
    fn integer_scans_wrap() {
        let max = i32::MAX as f64;
        assert_eq!(ScanOp::Sum.combine(DType::I32, max, 1.0), i32::MIN as f64);
        assert_eq!(ScanOp::Prod.combine(DType::I32, 65536.0, 65536.0), 0.0);
        assert_eq!(ScanOp::Max.identity(DType::I32), i32::MIN as f64);
    }
}
