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

use crate::DType;

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
    /// The dtype of the values sorted (the operand is their `F32` or
    /// `I32` cast): the order does not depend on it, but narrow values
    /// have keys with fewer bits that vary ([`key_digits`], [`Narrow`]),
    /// which the GPU sorts need fewer passes or smaller pairs for.
    pub dtype: DType,
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

/// Rows up to this long are sorted on chip (one CTA per row); longer rows
/// go through [`Method::Select`] or [`Method::Radix`] over many CTAs. The
/// PTX emitter's shared-memory sort holds this many 8-byte
/// `(key, position)` pairs (136 KiB with its padding, dynamic shared
/// memory within the 163 KiB of an sm_80 CTA): one launch that reads the
/// row once beats the radix sort's 12 launches over 84 bytes an element
/// up to here.
pub const SORT_CHUNK: usize = 16384;

/// Elements of a row that one CTA of a [`Method::Select`] or
/// [`Method::Radix`] pass handles (a *tile*).
pub const RADIX_TILE: usize = 2048;

/// Values of one radix digit (8 bits).
pub const DIGITS: usize = 256;

/// A `topk` selects instead of sorting the row when `k` is at most this
/// fraction of the row ([`Method::SelectOnChip`], [`Method::Select`]): a
/// select reads the row's pairs once per
/// digit it needs (2-3 settle random keys) and once to collect the `k`,
/// where the bitonic sort of 4096 pairs takes 78 compare steps over them;
/// with `k` near the row length, the select's final sort of `k` pairs
/// would cost about as much as sorting the row.
pub const SELECT_RATIO: usize = 8;

/// Rows up to this long select on chip ([`Method::SelectOnChip`], a CTA
/// of 256 threads per row holding its pairs, 32 KiB); longer rows would
/// leave one such CTA per SM, latency-bound on loading the row, where
/// [`Method::Select`] spreads a row over CTAs of 2048 elements.
pub const SELECT_ON_CHIP: usize = 4096;

/// How the GPU sorts a kernel's rows: a function of the row length and
/// the stored prefix `k` alone, so the planner sizes the scratch buffer
/// ([`scratch_len`]) for the launches the emitter chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Rows up to [`SORT_CHUNK`]: a CTA per row sorts it in shared memory.
    OnChip,
    /// Rows up to [`SELECT_ON_CHIP`], `k * SELECT_RATIO <= row_len`
    /// (`topk`): a CTA per row holds the row's pairs in shared memory, radix-selects
    /// the `k` smallest there and sorts only those.
    SelectOnChip,
    /// Longer rows with `k * SELECT_RATIO <= row_len`, or past
    /// [`SORT_CHUNK`] with `k <= SORT_CHUNK` (`topk`): a radix select of the `k`-th
    /// smallest `(key, position)` pair finds exactly the `k` pairs to keep
    /// without sorting the row; a CTA per row sorts those on chip.
    Select,
    /// Long rows, larger `k` (`sort`): an LSD radix sort, 4 passes of
    /// 8-bit digits over many CTAs.
    Radix,
}

impl Method {
    /// The method for rows of `row_len` of which `k` are stored.
    pub fn of(row_len: usize, k: usize) -> Method {
        let few = k.saturating_mul(SELECT_RATIO) <= row_len;
        if few && row_len <= SELECT_ON_CHIP {
            Method::SelectOnChip
        } else if few {
            Method::Select
        } else if row_len <= SORT_CHUNK {
            Method::OnChip
        } else if k <= SORT_CHUNK {
            Method::Select
        } else {
            Method::Radix
        }
    }
}

/// Words (`u32`) of a [`Method::Select`] row's head in the scratch buffer:
/// the current pass's digit histogram, then [`SELECT_STATE`] words of
/// state; its `k` candidate pairs follow (8-byte aligned).
pub const SELECT_HEAD: usize = DIGITS + SELECT_STATE;

/// State words of a [`Method::Select`] row, after its histogram: the mask
/// and value (two words each, low first) of the pair bits chosen so far,
/// the rank still wanted among pairs matching them, whether the selection
/// is complete, the count of the pass's tiles done, and of candidates
/// collected; two words of padding.
pub const SELECT_STATE: usize = 10;

/// Where each array of a [`Method::Radix`] sort lies in the scratch
/// buffer, in `u32` words from its start (one array of each for all rows,
/// row-major): two copies of the keys and positions (each pass reads one
/// and writes the other), per row the digit count of each `(digit, tile)`
/// of the current pass, each one's exclusive offset among its digit's
/// tiles, and each digit's total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RadixScratch {
    /// Rows sorted.
    pub rows: u64,
    /// Elements of all rows (`rows * row_len`).
    pub numel: u64,
    /// Tiles of one row (`ceil(row_len / RADIX_TILE)`).
    pub tiles: u64,
}

impl RadixScratch {
    /// The layout for `rows` rows of `row_len`; `None` when its size
    /// overflows a `u64`.
    pub fn new(rows: usize, row_len: usize) -> Option<RadixScratch> {
        let s = RadixScratch {
            rows: rows as u64,
            numel: (rows as u64).checked_mul(row_len as u64)?,
            tiles: row_len.div_ceil(RADIX_TILE) as u64,
        };
        s.words()?;
        Some(s)
    }

    /// Start of copy `c` (0 or 1) of the keys; its positions follow
    /// `numel` words later.
    pub fn keys(self, c: u64) -> u64 {
        2 * c * self.numel
    }

    /// Start of the `(digit, tile)` counts: per row, `DIGITS` runs of its
    /// tiles.
    pub fn counts(self) -> u64 {
        4 * self.numel
    }

    /// Start of the offsets, laid out as the counts.
    pub fn offsets(self) -> u64 {
        self.counts() + DIGITS as u64 * self.tiles * self.rows
    }

    /// Start of the digit totals, `DIGITS` per row.
    pub fn totals(self) -> u64 {
        self.offsets() + DIGITS as u64 * self.tiles * self.rows
    }

    /// Words in all.
    pub fn words(self) -> Option<u64> {
        let per_row = (2 * self.tiles + 1).checked_mul(DIGITS as u64)?;
        self.numel
            .checked_mul(4)?
            .checked_add(per_row.checked_mul(self.rows)?)
    }
}

/// Elements (`I32`) of the scratch buffer a sort kernel with `rows` rows
/// of `row_len`, storing `k` of each, needs on the GPU (see [`Method`]):
/// none on chip, a head and `k` pairs per row for a select, the
/// [`RadixScratch`] arrays for a radix sort. Saturates instead of
/// overflowing, so an impossible size fails at allocation.
pub fn scratch_len(rows: usize, row_len: usize, k: usize) -> usize {
    match Method::of(row_len, k) {
        Method::OnChip | Method::SelectOnChip => 0,
        Method::Select => rows.saturating_mul(SELECT_HEAD + 2 * k),
        Method::Radix => RadixScratch::new(rows, row_len)
            .and_then(|s| s.words())
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(usize::MAX),
    }
}

/// The digits (bit `d`: key bits `8d..8d+8`) of the [`sort_key`]s of
/// `dtype` values (which sort as `F32` or `I32`) that decide their order:
/// two keys equal on them are equal, the others being constant or a
/// function of the sign, which the top digit holds. `BF16` keys are the
/// top 16 bits of `F32` ones (the low 16 are all 0s, or all 1s for
/// negatives); an `F16`'s low 13 bits are so too; narrow integers are
/// sign extensions (`U8` and bools: only the low digit varies).
pub fn key_digits(dtype: DType) -> u8 {
    use DType::*;
    match dtype {
        Bool | U8 => 0b0001,
        I8 => 0b1001,
        I16 => 0b1011,
        F16 => 0b1110,
        BF16 => 0b1100,
        _ => 0b1111,
    }
}

/// How the on-chip sort packs the key of a narrow dtype into fewer bits,
/// so that a `(key, position)` pair fits a `u32` (half the shared memory
/// and single-instruction compares): see [`Narrow::of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Narrow {
    /// Floats: the key's top bits, `key >> shift` (the low bits of a
    /// half's key are all 0s, or all 1s with the sign: [`key_digits`]).
    Shift(u32),
    /// Integers and bools: the key less the dtype's smallest key in the
    /// sort's direction (their keys are consecutive).
    Offset(u32),
}

impl Narrow {
    /// The packing of `op`'s keys and the bits a packed key takes, or
    /// `None` for 32-bit dtypes. Packing keeps the keys' order.
    pub fn of(op: SortOp) -> Option<(Narrow, u32)> {
        let dt = op.dtype;
        match dt {
            DType::BF16 => Some((Narrow::Shift(16), 16)),
            DType::F16 => Some((Narrow::Shift(13), 19)),
            _ if dt.bits() < 32 && !dt.is_float() => {
                let (lo, hi) = (dt.int_min(), dt.int_max());
                let keys = [op.key(true, lo as f64), op.key(true, hi as f64)];
                let bits = 64 - ((hi - lo) as u64).leading_zeros();
                Some((Narrow::Offset(keys[0].min(keys[1])), bits))
            }
            _ => None,
        }
    }

    /// The packed form of `key` (in the sort's direction).
    pub fn pack(self, key: u32) -> u32 {
        match self {
            Narrow::Shift(s) => key >> s,
            Narrow::Offset(lo) => key.wrapping_sub(lo),
        }
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
            dtype: DType::F32,
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

    /// Every value of each narrow dtype (floats: every bit pattern, NaN
    /// and both zeros included), and whether it sorts as an integer.
    fn narrow_values() -> Vec<(DType, bool, Vec<f64>)> {
        vec![
            (DType::Bool, true, vec![0.0, 1.0]),
            (DType::U8, true, (0..256).map(f64::from).collect()),
            (DType::I8, true, (-128..128).map(f64::from).collect()),
            (DType::I16, true, (-32768..32768).map(f64::from).collect()),
            (
                DType::F16,
                false,
                (0..=u16::MAX)
                    .map(|b| half::f16::from_bits(b).to_f64())
                    .collect(),
            ),
            (
                DType::BF16,
                false,
                (0..=u16::MAX)
                    .map(|b| half::bf16::from_bits(b).to_f64())
                    .collect(),
            ),
        ]
    }

    /// Keys equal on a dtype's [`key_digits`] are equal, and the digits
    /// order them as the whole keys do, over every value of each narrow
    /// dtype.
    #[test]
    fn key_digits_decide_the_order() {
        for (dt, int, xs) in narrow_values() {
            let digits = key_digits(dt);
            let mask = (0..4)
                .filter(|d| digits >> d & 1 == 1)
                .fold(0u32, |m, d| m | 0xff << (8 * d));
            let mut keys: Vec<u32> = xs.iter().map(|x| sort_key(int, *x)).collect();
            keys.sort();
            keys.dedup();
            for w in keys.windows(2) {
                assert!(
                    w[0] & mask < w[1] & mask,
                    "{dt:?}: {:08x} {:08x}",
                    w[0],
                    w[1]
                );
            }
        }
    }

    /// Packed narrow keys keep the order of the whole keys and fit their
    /// bits, both directions, over every value of each narrow dtype.
    #[test]
    fn narrow_keys_keep_the_order() {
        for (dt, int, xs) in narrow_values() {
            for descending in [false, true] {
                let op = SortOp {
                    descending,
                    part: SortPart::Values,
                    k: 1,
                    dtype: dt,
                };
                let (narrow, bits) = Narrow::of(op).expect("narrow");
                let mut keys: Vec<u32> = xs.iter().map(|x| op.key(int, *x)).collect();
                keys.sort();
                keys.dedup();
                for w in keys.windows(2) {
                    assert!(narrow.pack(w[0]) < narrow.pack(w[1]), "{dt:?}");
                }
                assert!(keys.iter().all(|k| narrow.pack(*k) >> bits == 0), "{dt:?}");
            }
        }
        for dt in [DType::F32, DType::I32, DType::F64, DType::I64] {
            assert_eq!(
                Narrow::of(SortOp {
                    dtype: dt,
                    ..op(false)
                }),
                None
            );
        }
    }

    #[test]
    fn scratch_only_for_long_rows() {
        let n = SORT_CHUNK + 1;
        assert_eq!(scratch_len(7, SORT_CHUNK, SORT_CHUNK), 0);
        assert_eq!(Method::of(4096, 512), Method::SelectOnChip);
        assert_eq!(Method::of(4096, 513), Method::OnChip);
        assert_eq!(Method::of(4097, 512), Method::Select);
        assert_eq!(Method::of(SORT_CHUNK, SORT_CHUNK / 8 + 1), Method::OnChip);
        assert_eq!(scratch_len(7, SELECT_ON_CHIP, 1), 0);
        assert_eq!(Method::of(n, SORT_CHUNK), Method::Select);
        assert_eq!(scratch_len(3, n, 5), 3 * (SELECT_HEAD + 10));
        assert_eq!(Method::of(n, n), Method::Radix);
        // Keys and positions twice, 256 counts and offsets per tile and
        // 256 totals per row.
        let tiles = n.div_ceil(RADIX_TILE);
        assert_eq!(tiles, SORT_CHUNK / RADIX_TILE + 1);
        assert_eq!(scratch_len(3, n, n), 3 * n * 4 + 3 * (2 * tiles + 1) * 256);
        assert_eq!(scratch_len(usize::MAX, n, n), usize::MAX);
        assert_eq!(scratch_len(usize::MAX, n, 1), usize::MAX);
    }
}
