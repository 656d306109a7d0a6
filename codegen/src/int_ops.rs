//! Integer semantics of the ops whose C or PyTorch behaviour is undefined
//! or raises at the edges, written once for every width (`bits`, signed
//! two's complement, operands already in range) so that each integer dtype
//! shares them and every backend matches them:
//! - division by zero gives 0 (`fmod`, `remainder`, `floor_divide`), as
//!   NumPy's integer division does; PyTorch raises, which a kernel cannot;
//! - the most negative value divided by -1 wraps (to itself), its
//!   remainder is 0;
//! - shifts by a negative amount or by the width or more give 0 (`<<`) or
//!   the sign fill (`>>`), as PyTorch's shift kernels define them (and as
//!   PTX `shl` / `shr.s` clamp their shift amount).

/// `v` reduced to a `bits`-wide two's complement integer.
#[inline]
pub fn wrap(v: i128, bits: u32) -> i64 {
    let s = 128 - bits;
    ((v << s) >> s) as i64
}

/// `a - trunc(a / b) * b` (C's `%`), 0 for `b = 0`.
#[inline]
pub fn fmod(a: i64, b: i64, bits: u32) -> i64 {
    if b == 0 {
        0
    } else {
        wrap(a as i128 % b as i128, bits)
    }
}

/// `a - floor(a / b) * b` (Python's `%`): the sign of `b`; 0 for `b = 0`.
#[inline]
pub fn remainder(a: i64, b: i64, bits: u32) -> i64 {
    let r = fmod(a, b, bits);
    if r != 0 && (r < 0) != (b < 0) {
        r + b
    } else {
        r
    }
}

/// `floor(a / b)`, wrapping; 0 for `b = 0`.
#[inline]
pub fn floor_div(a: i64, b: i64, bits: u32) -> i64 {
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
    wrap(q, bits)
}

/// `a << b`, wrapping; 0 when `b` is negative or at least `bits`.
#[inline]
pub fn shl(a: i64, b: i64, bits: u32) -> i64 {
    if b < 0 || b >= bits as i64 {
        0
    } else {
        wrap((a as i128) << b, bits)
    }
}

/// `a >> b`, arithmetic; the sign fill (0 or -1) when `b` is negative or
/// at least `bits`.
#[inline]
pub fn shr(a: i64, b: i64, bits: u32) -> i64 {
    if b < 0 || b >= bits as i64 {
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
        let (min, max) = (i32::MIN as i64, i32::MAX as i64);
        assert_eq!(fmod(-7, 2, 32), -1);
        assert_eq!(remainder(-7, 2, 32), 1);
        assert_eq!(remainder(7, -2, 32), -1);
        assert_eq!(floor_div(-7, 2, 32), -4);
        assert_eq!(floor_div(7, -2, 32), -4);
        assert_eq!(floor_div(6, -2, 32), -3);
        assert_eq!(floor_div(5, 0, 32), 0);
        assert_eq!(remainder(5, 0, 32), 0);
        assert_eq!(fmod(min, -1, 32), 0);
        assert_eq!(floor_div(min, -1, 32), min);
        assert_eq!(shl(1, 31, 32), min);
        assert_eq!(shl(max, 1, 32), -2);
        assert_eq!(shl(1, 32, 32), 0);
        assert_eq!(shl(1, -1, 32), 0);
        assert_eq!(shr(-8, 1, 32), -4);
        assert_eq!(shr(-8, 40, 32), -1);
        assert_eq!(shr(8, -3, 32), 0);
        // The same rules at another width.
        assert_eq!(shl(1, 7, 8), -128);
        assert_eq!(floor_div(-128, -1, 8), -128);
    }
}
