//! Sorting along one axis, with its reference semantics: the order
//! `sort`, `argsort` and `topk` put a row in, and what a sort kernel
//! stores.
//!
//! Keys are `F32` (every float: halves are cast up exactly by the tensor
//! API) or `I32` (integers and bools). Each key maps to an unsigned 32-bit
//! integer whose order is PyTorch's sort order ([`sort_key`]): NaN above
//! `+inf`, `-0.0` equal to `0.0`. A descending sort uses the complemented
//! key, so NaN comes first. Ties keep their positions (the sort is
//! stable), which every backend gets by comparing `(key, position)` pairs:
//! those are all distinct, so any correct sort of them gives the one
//! stable order.

/// What an [`crate::Inst::Sort`] yields at position `j` of its row: the
/// `j`-th element of the row sorted stably by its operand, or that
/// element's position in the unsorted row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SortOp {
    /// Largest first (NaN first) instead of smallest first (NaN last).
    pub descending: bool,
    /// Values (the operand's dtype) or indices (the instruction's integer
    /// dtype).
    pub part: SortPart,
    /// How many leading positions of each sorted row the kernel stores
    /// (`topk`'s `k`; the row length for a full sort). All sort
    /// instructions of a kernel have the same `k`.
    pub k: usize,
}

/// Which half of a sort's result an instruction holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SortPart {
    /// The sorted values.
    Values,
    /// Their positions along the row before sorting.
    Indices,
}

impl SortOp {
    /// Lower-case name used in kernel names and debug output.
    pub fn name(self) -> &'static str {
        match (self.part, self.descending) {
            (SortPart::Values, false) => "sort",
            (SortPart::Values, true) => "sort_desc",
            (SortPart::Indices, false) => "argsort",
            (SortPart::Indices, true) => "argsort_desc",
        }
    }

    /// The key ordering `x` (a value of an `F32` or `I32` operand) in this
    /// sort's direction: ascending keys for an ascending sort, their
    /// complement for a descending one.
    pub fn key(self, int: bool, x: f64) -> u32 {
        let key = sort_key(int, x);
        if self.descending {
            !key
        } else {
            key
        }
    }
}

/// Rows longer than this are sorted in chunks of this many elements that
/// are then merged through a global scratch buffer ([`scratch_len`]);
/// shorter rows are sorted on chip. The PTX emitter's shared-memory sort
/// holds this many 8-byte `(key, position)` pairs (32 KiB, within the
/// 48 KiB of static shared memory a CTA may declare).
pub const SORT_CHUNK: usize = 4096;

/// Elements (`I32`) of the scratch buffer a sort kernel with `rows` rows
/// of `row_len` needs: two 8-byte `(key, position)` pairs per element (a
/// merge pass reads one copy and writes the other), none when a row fits
/// one chunk. Saturates instead of overflowing, so an impossible size
/// fails at allocation.
pub fn scratch_len(rows: usize, row_len: usize) -> usize {
    if row_len <= SORT_CHUNK {
        0
    } else {
        rows.saturating_mul(row_len).saturating_mul(4)
    }
}

/// The ascending sort key of `x` (a value of an `I32` operand when `int`,
/// else of an `F32` one): unsigned integers ordered as PyTorch orders the
/// values. Integers flip their sign bit. Floats canonicalise `-0.0` to
/// `0.0` and every NaN to the one positive quiet NaN with all mantissa
/// bits set, then flip the sign bit of positives and every bit of
/// negatives, so `-inf < .. < -0.0 == 0.0 < .. < +inf < NaN`.
pub fn sort_key(int: bool, x: f64) -> u32 {
    if int {
        return (x as i32 as u32) ^ 0x8000_0000;
    }
    let f = x as f32;
    let bits = if f.is_nan() {
        0x7fff_ffff
    } else if f == 0.0 {
        0
    } else {
        f.to_bits()
    };
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    }
}

/// The positions of `row` in stable sorted order (by [`SortOp::key`]).
pub fn sort_order(op: SortOp, int: bool, row: &[f64]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..row.len() as u32).collect();
    order.sort_by_key(|j| op.key(int, row[*j as usize]));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(descending: bool) -> SortOp {
        SortOp {
            descending,
            part: SortPart::Indices,
            k: 0,
        }
    }

    #[test]
    fn float_keys_follow_pytorch_order() {
        let xs = [
            f64::NEG_INFINITY,
            -3.5,
            -1e-45,
            0.0,
            1e-45,
            2.0,
            f64::INFINITY,
            f64::NAN,
        ];
        for w in xs.windows(2) {
            assert!(sort_key(false, w[0]) < sort_key(false, w[1]), "{w:?}");
        }
        assert_eq!(sort_key(false, -0.0), sort_key(false, 0.0));
        assert_eq!(sort_key(false, -f64::NAN), sort_key(false, f64::NAN));
    }

    #[test]
    fn int_keys_are_ordered() {
        let xs = [i32::MIN, -7, -1, 0, 1, 9, i32::MAX];
        for w in xs.windows(2) {
            assert!(sort_key(true, w[0] as f64) < sort_key(true, w[1] as f64));
        }
    }

    #[test]
    fn order_is_stable_both_ways() {
        let row = [2.0, f64::NAN, 1.0, 2.0, -0.0, 0.0, f64::NAN];
        assert_eq!(
            sort_order(op(false), false, &row),
            vec![4, 5, 2, 0, 3, 1, 6]
        );
        assert_eq!(sort_order(op(true), false, &row), vec![1, 6, 0, 3, 2, 4, 5]);
    }

    #[test]
    fn scratch_only_for_long_rows() {
        assert_eq!(scratch_len(7, SORT_CHUNK), 0);
        assert_eq!(scratch_len(3, SORT_CHUNK + 1), 3 * (SORT_CHUNK + 1) * 4);
        assert_eq!(scratch_len(usize::MAX, SORT_CHUNK + 1), usize::MAX);
    }
}
