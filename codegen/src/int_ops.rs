//! Integer semantics of the ops whose C or PyTorch behaviour is undefined
//! or raises at the edges, written once for every integer dtype (operands
//! already in the dtype's range, results wrapped to it by
//! [`DType::wrap`]) so that each integer width shares them and every
//! backend matches them:
//! - division by zero gives 0 (`fmod`, `remainder`, `floor_divide`), as
//!   NumPy's integer division does; PyTorch raises, which a kernel cannot;
//! - the most negative value divided by -1 wraps (to itself), its
//!   remainder is 0;
//! - shifts by a negative amount or by the width or more give 0 (`<<`) or
//!   the sign fill (`>>`), as PyTorch's shift kernels define them (and as
//!   PTX `shl` / `shr` clamp their shift amount).

use crate::DType;

/// `v` wrapped to `dt` (through `i128`, where no quotient overflows).
#[inline]
fn wrap(dt: DType, v: i128) -> i64 {
    dt.wrap(v as i64)
}

/// `a - trunc(a / b) * b` (C's `%`), 0 for `b = 0`.
#[inline]
pub fn fmod(dt: DType, a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        wrap(dt, a as i128 % b as i128)
    }
}

/// `a - floor(a / b) * b` (Python's `%`): the sign of `b`; 0 for `b = 0`.
#[inline]
pub fn remainder(dt: DType, a: i64, b: i64) -> i64 {
    let r = fmod(dt, a, b);
    if r != 0 && (r < 0) != (b < 0) {
        wrap(dt, r as i128 + b as i128)
    } else {
        r
    }
}

/// `floor(a / b)`, wrapping; 0 for `b = 0`.
#[inline]
pub fn floor_div(dt: DType, a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let (a, b) = (a as i128, b as i128);
    let q = a / b;
    let q = if a % b != 0 && (a < 0) != (b < 0) {
        q - 1
    } else {
        q
    };
    wrap(dt, q)
}

/// `a << b`, wrapping; 0 when `b` is negative or at least the width.
#[inline]
pub fn shl(dt: DType, a: i64, b: i64) -> i64 {
    if b < 0 || b >= dt.bits() as i64 {
        0
    } else {
        wrap(dt, (a as i128) << b)
    }
}

/// `a >> b`, arithmetic for signed types (unsigned values are never
/// negative, so it is logical for them); the sign fill (0 or -1) when `b`
/// is negative or at least the width.
#[inline]
pub fn shr(dt: DType, a: i64, b: i64) -> i64 {
    if b < 0 || b >= dt.bits() as i64 {
        if a < 0 {
            -1
        } else {
            0
        }
    } else {
        a >> b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_match_the_documented_rules() {
        let i32 = DType::I32;
        let (min, max) = (i32::MIN as i64, i32::MAX as i64);
        assert_eq!(fmod(i32, -7, 2), -1);
        assert_eq!(remainder(i32, -7, 2), 1);
        assert_eq!(remainder(i32, 7, -2), -1);
        assert_eq!(floor_div(i32, -7, 2), -4);
        assert_eq!(floor_div(i32, 7, -2), -4);
        assert_eq!(floor_div(i32, 6, -2), -3);
        assert_eq!(floor_div(i32, 5, 0), 0);
        assert_eq!(remainder(i32, 5, 0), 0);
        assert_eq!(fmod(i32, min, -1), 0);
        assert_eq!(floor_div(i32, min, -1), min);
        assert_eq!(shl(i32, 1, 31), min);
        assert_eq!(shl(i32, max, 1), -2);
        assert_eq!(shl(i32, 1, 32), 0);
        assert_eq!(shl(i32, 1, -1), 0);
        assert_eq!(shr(i32, -8, 1), -4);
        assert_eq!(shr(i32, -8, 40), -1);
        assert_eq!(shr(i32, 8, -3), 0);
        // The same rules at other widths.
        assert_eq!(shl(DType::I8, 1, 7), -128);
        assert_eq!(floor_div(DType::I8, -128, -1), -128);
        assert_eq!(shl(DType::U8, 200, 1), 144);
        assert_eq!(shr(DType::U8, 200, 8), 0);
        assert_eq!(remainder(DType::U8, 200, 201), 200);
        assert_eq!(floor_div(DType::U8, 255, 1), 255);
        let (lmin, lmax) = (i64::MIN, i64::MAX);
        assert_eq!(floor_div(DType::I64, lmin, -1), lmin);
        assert_eq!(fmod(DType::I64, lmin, -1), 0);
        assert_eq!(remainder(DType::I64, lmax, lmin), -1);
        assert_eq!(shl(DType::I64, 1, 63), lmin);
        assert_eq!(shl(DType::I64, 1, 64), 0);
        assert_eq!(shr(DType::I64, lmin, 63), -1);
        assert_eq!(shl(DType::I16, 3, 15), -32768);
    }
}
