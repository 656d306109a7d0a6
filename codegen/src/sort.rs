//! Sorting along one axis, with its reference semantics: the order
//! `sort`, `argsort` and `topk` put a row in, and what a sort kernel
//! stores.
//!
//! The sorted operand is `F32` (floats up to 32 bits: halves are cast up
//! exactly by the tensor API), `I32` (integers up to 32 bits and bools),
//! `F64` or `I64`. Each value maps to an unsigned integer key of the
//! operand's width ([`key_bits`]: 32 or 64 bits) whose order is PyTorch's
//! sort order ([`sort_key`], one function for both widths): NaN above
//! `+inf`, `-0.0` equal to `0.0`. A descending sort uses the complemented
//! key, so NaN comes first. Ties keep their positions (the sort is
//! stable), which every backend gets by comparing `(key, position)` pairs:
//! those are all distinct, so any correct sort of them gives the one
//! stable order. 64-bit keys are exact: casting `F64` or `I64` values to
//! 32 bits would merge values that differ below `f32` precision or beyond
//! the `i32` range.

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
    /// `I32` cast, or themselves for `F64` and `I64`): it gives the key's
    /// width ([`key_bits`]), and narrow values have keys with fewer bits
    /// that vary ([`key_digits`], [`Narrow`]), which the GPU sorts need
    /// fewer passes or smaller pairs for.
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

    /// Bits of this sort's keys: [`key_bits`] of the dtype sorted.
    #[inline]
    pub fn key_bits(self) -> u32 {
        key_bits(self.dtype)
    }

    /// The key ordering `x` (a value of this sort's operand) in this
    /// sort's direction: ascending keys for an ascending sort, their
    /// complement (within [`SortOp::key_bits`]) for a descending one.
    #[inline]
    pub fn key(self, x: impl Into<SortValue>) -> u64 {
        let bits = self.key_bits();
        let key = sort_key(bits, x.into());
        if self.descending {
            !key & (u64::MAX >> (64 - bits))
        } else {
            key
        }
    }

    /// [`SortOp::key`] of an `f32` value (of a sort of 32-bit keys),
    /// computed on its bits without the detour through `f64` and
    /// [`SortValue`] and without branches, so a loop over a row
    /// vectorises: NaN above `+inf`, both zeros as `+0.0`.
    #[inline]
    pub fn f32_key(self, x: f32) -> u64 {
        const SIGN: u32 = 1 << 31;
        let bits = x.to_bits();
        let raw = if x.is_nan() {
            SIGN - 1
        } else if x == 0.0 {
            0
        } else {
            bits
        };
        // Negatives reversed, positives above them.
        let flip = ((raw as i32 >> 31) as u32) | SIGN;
        let key = raw ^ flip;
        u64::from(if self.descending { !key } else { key })
    }
}

/// Bits of the sort keys of `dtype` values: 64 for `F64` and `I64`
/// (sorted as themselves), 32 for every other dtype (sorted as their
/// `F32` or `I32` cast, which is exact).
#[inline]
pub fn key_bits(dtype: DType) -> u32 {
    match dtype {
        DType::F64 | DType::I64 => 64,
        _ => 32,
    }
}

/// A value of a sort's operand, as a backend holds it (the interpreter's
/// floats as `f64`, its integers as `i64`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SortValue {
    /// A float (an `F32` operand's is exactly an `f32`).
    Float(f64),
    /// An integer (an `I32` operand's is within `i32`).
    Int(i64),
}

impl From<f64> for SortValue {
    fn from(x: f64) -> Self {
        SortValue::Float(x)
    }
}

impl From<i64> for SortValue {
    fn from(x: i64) -> Self {
        SortValue::Int(x)
    }
}

/// Rows up to this long are sorted on chip (one CTA per row) when their
/// keys have 32 bits ([`sort_chunk`]); longer rows go through
/// [`Method::Select`] or [`Method::Radix`] over many CTAs. The PTX
/// emitter's shared-memory sort holds this many 8-byte `(key, position)`
/// pairs (136 KiB with its padding, dynamic shared memory within the 163
/// KiB of an sm_80 CTA): one launch that reads the row once beats the
/// radix sort's 12 launches over 84 bytes an element up to here.
pub const SORT_CHUNK: usize = 16384;

/// The longest row sorted on chip with keys of `key_bits`: a pair with a
/// 64-bit key takes 16 bytes (the key and the position, a 64-bit word
/// each), so half as many fit the same shared memory.
pub fn sort_chunk(key_bits: u32) -> usize {
    if key_bits > 32 {
        SORT_CHUNK / 2
    } else {
        SORT_CHUNK
    }
}

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

/// How the GPU sorts a kernel's rows: a function of the row length, the
/// stored prefix `k` and the key width alone, so the planner sizes the
/// scratch buffer ([`scratch_len`]) for the launches the emitter chooses.
/// "The chunk" below is [`sort_chunk`] of the key width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Rows up to the chunk: a CTA per row sorts it in shared memory.
    OnChip,
    /// Rows up to [`SELECT_ON_CHIP`], `k * SELECT_RATIO <= row_len`
    /// (`topk`): a CTA per row holds the row's pairs in shared memory, radix-selects
    /// the `k` smallest there and sorts only those.
    SelectOnChip,
    /// Longer rows with `k * SELECT_RATIO <= row_len`, or past the chunk,
    /// with `k` at most the chunk (its final on-chip sort holds the `k`;
    /// `topk`): a radix select of the `k`-th
    /// smallest `(key, position)` pair finds exactly the `k` pairs to keep
    /// without sorting the row; a CTA per row sorts those on chip.
    Select,
    /// Long rows, larger `k` (`sort`): an LSD radix sort, a pass per 8-bit
    /// digit of the key (4, or 8 for 64-bit keys) over many CTAs.
    Radix,
}

impl Method {
    /// The method for rows of `row_len` of which `k` are stored, with
    /// keys of `key_bits`.
    pub fn of(row_len: usize, k: usize, key_bits: u32) -> Method {
        let few = k.saturating_mul(SELECT_RATIO) <= row_len;
        let chunk = sort_chunk(key_bits);
        if few && row_len <= SELECT_ON_CHIP {
            Method::SelectOnChip
        } else if (few || row_len > chunk) && k <= chunk {
            Method::Select
        } else if row_len <= chunk {
            Method::OnChip
        } else {
            Method::Radix
        }
    }
}

/// Words (`u32`) of a [`Method::Select`] row's head in the scratch buffer:
/// the current pass's digit histogram, then [`SELECT_STATE`] words of
/// state; its `k` candidate pairs follow ([`pair_words`] each, 8-byte
/// aligned).
pub const SELECT_HEAD: usize = DIGITS + SELECT_STATE;

/// State words of a [`Method::Select`] row, after its histogram: the mask
/// and value (four words each: two `u64` pair words, the second unused by
/// pairs of 32-bit keys) of the pair bits chosen so far, the rank still
/// wanted among pairs matching them, whether the selection is complete,
/// the count of the pass's tiles done, and of candidates collected.
pub const SELECT_STATE: usize = 12;

/// Words (`u32`) of a `(key, position)` pair outside shared memory: one
/// `u64` `key << 32 | position` for 32-bit keys, two `u64` words (the
/// key, then the position) for 64-bit ones.
pub fn pair_words(key_bits: u32) -> usize {
    if key_bits > 32 {
        4
    } else {
        2
    }
}

/// Where each array of a [`Method::Radix`] sort lies in the scratch
/// buffer, in `u32` words from its start (one array of each for all rows,
/// row-major): two copies of the keys (each pass reads one and writes the
/// other; a key takes [`RadixScratch::key_words`] words, so 64-bit keys
/// start 8-byte aligned) and then two of the positions, per row the digit
/// count of each `(digit, tile)` of the current pass, each one's exclusive
/// offset among its digit's tiles, and each digit's total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RadixScratch {
    /// Rows sorted.
    pub rows: u64,
    /// Elements of all rows (`rows * row_len`).
    pub numel: u64,
    /// Tiles of one row (`ceil(row_len / RADIX_TILE)`).
    pub tiles: u64,
    /// Words of a key: 1, or 2 for 64-bit keys.
    pub key_words: u64,
}

impl RadixScratch {
    /// The layout for `rows` rows of `row_len` with keys of `key_bits`;
    /// `None` when its size overflows a `u64`.
    pub fn new(rows: usize, row_len: usize, key_bits: u32) -> Option<RadixScratch> {
        let s = RadixScratch {
            rows: rows as u64,
            numel: (rows as u64).checked_mul(row_len as u64)?,
            tiles: row_len.div_ceil(RADIX_TILE) as u64,
            key_words: u64::from(key_bits / 32),
        };
        s.words()?;
        Some(s)
    }

    /// Start of copy `c` (0 or 1) of the keys.
    pub fn keys(self, c: u64) -> u64 {
        c * self.key_words * self.numel
    }

    /// Start of copy `c` (0 or 1) of the positions.
    pub fn positions(self, c: u64) -> u64 {
        (2 * self.key_words + c) * self.numel
    }

    /// Start of the `(digit, tile)` counts: per row, `DIGITS` runs of its
    /// tiles.
    pub fn counts(self) -> u64 {
        self.positions(2)
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
            .checked_mul(2 * (self.key_words + 1))?
            .checked_add(per_row.checked_mul(self.rows)?)
    }
}

/// Elements (`I32`) of the scratch buffer a sort kernel with `rows` rows
/// of `row_len`, storing `k` of each, with keys of `key_bits`, needs on
/// the GPU (see [`Method`]): none on chip, a head and `k` pairs per row
/// for a select, the [`RadixScratch`] arrays for a radix sort. Saturates
/// instead of overflowing, so an impossible size fails at allocation.
pub fn scratch_len(rows: usize, row_len: usize, k: usize, key_bits: u32) -> usize {
    match Method::of(row_len, k, key_bits) {
        Method::OnChip | Method::SelectOnChip => 0,
        Method::Select => rows.saturating_mul(
            k.saturating_mul(pair_words(key_bits))
                .saturating_add(SELECT_HEAD),
        ),
        Method::Radix => RadixScratch::new(rows, row_len, key_bits)
            .and_then(|s| s.words())
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(usize::MAX),
    }
}

/// The digits (bit `d`: key bits `8d..8d+8`) of the [`sort_key`]s of
/// `dtype` values that decide their order: two keys equal on them are
/// equal, the others being constant or a function of the sign, which the
/// top digit holds. All 8 of a 64-bit key (`F64`, `I64`), all 4 of a
/// 32-bit one, but narrow dtypes (sorted as `F32` or `I32`) need fewer:
/// `BF16` keys are the top 16 bits of `F32` ones (the low 16 are all 0s,
/// or all 1s for negatives); an `F16`'s low 13 bits are so too, and the
/// low 20 or 21 of the FP8 formats' ([`float_shift`]); narrow
/// integers are sign extensions (`U8` and bools: only the low digit
/// varies).
pub fn key_digits(dtype: DType) -> u8 {
    use DType::*;
    match dtype {
        Bool | U8 => 0b0001,
        I8 => 0b1001,
        I16 => 0b1011,
        F64 | I64 => 0xff,
        // The digits holding bits `shift..32` of the key.
        _ if dtype.is_narrow_float() => 0b1111 & !((1u8 << (float_shift(dtype) / 8)) - 1),
        _ => 0b1111,
    }
}

/// The low bits of a narrow float's `F32` sort key that are constant (0s,
/// or 1s with the sign): `F32`'s mantissa bits it lacks (13 for `F16`, 16
/// for `BF16`, 20 for `F8E4M3`, 21 for `F8E5M2`; all its values, FP8
/// subnormals included, are normal `f32`s).
fn float_shift(dtype: DType) -> u32 {
    DType::F32.mantissa_bits() - dtype.mantissa_bits()
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
            _ if dt.is_narrow_float() => {
                let shift = float_shift(dt);
                Some((Narrow::Shift(shift), 32 - shift))
            }
            _ if dt.bits() < 32 && !dt.is_float() => {
                let (lo, hi) = (dt.int_min(), dt.int_max());
                // 32-bit keys: the casts are exact.
                let keys = [op.key(lo) as u32, op.key(hi) as u32];
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

/// The ascending sort key of `x` (a value of an operand with keys of
/// `bits`, 32 or 64: [`key_bits`]): an unsigned integer below `2^bits`,
/// ordered as PyTorch orders the values. Integers flip their sign bit.
/// Floats canonicalise `-0.0` to `0.0` and every NaN to the one positive
/// quiet NaN with all mantissa bits set, then flip the sign bit of
/// positives and every bit of negatives, so `-inf < .. < -0.0 == 0.0 <
/// .. < +inf < NaN`. The same steps for both widths: only the sign bit's
/// place and the float's bits differ.
#[inline]
pub fn sort_key(bits: u32, x: SortValue) -> u64 {
    let mask = u64::MAX >> (64 - bits);
    let sign = 1u64 << (bits - 1);
    match x {
        SortValue::Int(i) => (i as u64 & mask) ^ sign,
        SortValue::Float(f) => {
            let raw = if f.is_nan() {
                sign - 1
            } else if f == 0.0 {
                0
            } else if bits == 32 {
                u64::from((f as f32).to_bits())
            } else {
                f.to_bits()
            };
            if raw & sign != 0 {
                !raw & mask
            } else {
                raw | sign
            }
        }
    }
}

/// The positions of `row` (values of `op`'s operand) in stable sorted
/// order (by [`SortOp::key`]).
pub fn sort_order<T: Copy + Into<SortValue>>(op: SortOp, row: &[T]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..row.len() as u32).collect();
    order.sort_by_key(|j| op.key(row[*j as usize]));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f32_key` is `key` of the value as `f64`, in both directions, on
    /// NaNs (with payloads and signs), zeros, infinities, subnormals and
    /// a sweep of bit patterns.
    #[test]
    fn f32_keys_are_the_keys() {
        let mut xs = vec![
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7fc0_0001),
            f32::from_bits(0xffff_ffff),
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
            -f32::from_bits(1),
            f32::from_bits(1),
            f32::MAX,
            f32::MIN,
        ];
        xs.extend((0..1u32 << 16).map(|i| f32::from_bits(i.wrapping_mul(0x9e37_79b9))));
        for descending in [false, true] {
            let o = SortOp {
                descending,
                part: SortPart::Values,
                k: 0,
                dtype: crate::DType::F32,
            };
            for x in &xs {
                assert_eq!(o.f32_key(*x), o.key(f64::from(*x)), "{x:?} {descending}");
            }
        }
    }

    fn op(descending: bool) -> SortOp {
        SortOp {
            descending,
            part: SortPart::Indices,
            k: 0,
            dtype: DType::F32,
        }
    }

    /// `x` as a value of an integer operand (`int`) or a float one.
    fn val(int: bool, x: f64) -> SortValue {
        if int {
            SortValue::Int(x as i64)
        } else {
            SortValue::Float(x)
        }
    }

    /// Keys of `xs` (in order) are strictly increasing and below
    /// `2^bits`, and complemented keys strictly decreasing.
    fn increasing(dtype: DType, xs: &[SortValue]) {
        let bits = key_bits(dtype);
        let [up, down] = [false, true].map(|descending| SortOp {
            dtype,
            ..op(descending)
        });
        for w in xs.windows(2) {
            assert!(
                sort_key(bits, w[0]) < sort_key(bits, w[1]),
                "{dtype}: {w:?}"
            );
            assert!(down.key(w[0]) > down.key(w[1]), "{dtype}: {w:?}");
            assert!(up.key(w[1]) <= u64::MAX >> (64 - bits), "{dtype}: {w:?}");
            assert_eq!(up.key(w[0]) + down.key(w[0]), u64::MAX >> (64 - bits));
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
        for dtype in [DType::F32, DType::F64] {
            let bits = key_bits(dtype);
            increasing(dtype, &xs.map(SortValue::Float));
            let key = |x: f64| sort_key(bits, SortValue::Float(x));
            assert_eq!(key(-0.0), key(0.0));
            assert_eq!(key(-f64::NAN), key(f64::NAN));
        }
        // 64-bit keys tell apart what rounds to one `f32`, and NaNs are
        // all one key whatever their sign and payload.
        let one_up = 1.0 + 2f64.powi(-40);
        let xs = [
            -f64::MAX,
            -1.0 - 2f64.powi(-52),
            -1.0,
            -f64::MIN_POSITIVE,
            -5e-324,
            0.0,
            5e-324,
            1e-300,
            1.0,
            one_up,
            f64::MAX,
            f64::INFINITY,
            f64::NAN,
        ];
        increasing(DType::F64, &xs.map(SortValue::Float));
        let key = |x: f64| sort_key(64, SortValue::Float(x));
        assert_eq!(sort_key(32, 1.0.into()), sort_key(32, one_up.into()));
        assert_eq!(key(-0.0), key(0.0));
        let payload = f64::from_bits(0xfff0_0000_0000_0001);
        assert!(payload.is_nan());
        assert_eq!(key(payload), key(f64::NAN));
        assert_eq!(key(f64::NAN), u64::MAX);
    }

    #[test]
    fn int_keys_are_ordered() {
        let xs = [i32::MIN, -7, -1, 0, 1, 9, i32::MAX];
        for dtype in [DType::I32, DType::I64] {
            increasing(dtype, &xs.map(|x| SortValue::Int(x.into())));
        }
        let xs = [
            i64::MIN,
            i64::MIN + 1,
            -(1 << 31) - 1,
            -(1 << 31),
            -1,
            0,
            1 << 31,
            i64::MAX - 1,
            i64::MAX,
        ];
        increasing(DType::I64, &xs.map(SortValue::Int));
        assert_eq!(sort_key(64, SortValue::Int(i64::MIN)), 0);
        assert_eq!(sort_key(64, SortValue::Int(i64::MAX)), u64::MAX);
    }

    #[test]
    fn order_is_stable_both_ways() {
        let row = [2.0, f64::NAN, 1.0, 2.0, -0.0, 0.0, f64::NAN];
        for dtype in [DType::F32, DType::F64] {
            let [up, down] = [false, true].map(|descending| SortOp {
                dtype,
                ..op(descending)
            });
            assert_eq!(sort_order(up, &row), vec![4, 5, 2, 0, 3, 1, 6]);
            assert_eq!(sort_order(down, &row), vec![1, 6, 0, 3, 2, 4, 5]);
        }
        let big = [i64::MAX, 1 << 40, i64::MIN, 1 << 40, -(1 << 40), i64::MAX];
        let [up, down] = [false, true].map(|descending| SortOp {
            dtype: DType::I64,
            ..op(descending)
        });
        assert_eq!(sort_order(up, &big), vec![2, 4, 1, 3, 0, 5]);
        assert_eq!(sort_order(down, &big), vec![0, 5, 1, 3, 4, 2]);
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
            (DType::F8E4M3, false, fp8_values(DType::F8E4M3)),
            (DType::F8E5M2, false, fp8_values(DType::F8E5M2)),
        ]
    }

    fn fp8_values(dt: DType) -> Vec<f64> {
        (0..=255u8)
            .map(|c| f64::from(crate::fp8::to_f32(dt, c)))
            .collect()
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
                .fold(0u64, |m, d| m | 0xff << (8 * d));
            let mut keys: Vec<u64> = xs.iter().map(|x| sort_key(32, val(int, *x))).collect();
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
                let mut keys: Vec<u32> = xs.iter().map(|x| op.key(val(int, *x)) as u32).collect();
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
        assert_eq!(scratch_len(7, SORT_CHUNK, SORT_CHUNK, 32), 0);
        assert_eq!(Method::of(4096, 512, 32), Method::SelectOnChip);
        assert_eq!(Method::of(4096, 513, 32), Method::OnChip);
        assert_eq!(Method::of(4097, 512, 32), Method::Select);
        assert_eq!(
            Method::of(SORT_CHUNK, SORT_CHUNK / 8 + 1, 32),
            Method::OnChip
        );
        assert_eq!(scratch_len(7, SELECT_ON_CHIP, 1, 32), 0);
        assert_eq!(Method::of(n, SORT_CHUNK, 32), Method::Select);
        assert_eq!(scratch_len(3, n, 5, 32), 3 * (SELECT_HEAD + 10));
        assert_eq!(Method::of(n, n, 32), Method::Radix);
        // Keys and positions twice, 256 counts and offsets per tile and
        // 256 totals per row.
        let tiles = n.div_ceil(RADIX_TILE);
        assert_eq!(tiles, SORT_CHUNK / RADIX_TILE + 1);
        assert_eq!(
            scratch_len(3, n, n, 32),
            3 * n * 4 + 3 * (2 * tiles + 1) * 256
        );
        assert_eq!(scratch_len(usize::MAX, n, n, 32), usize::MAX);
        assert_eq!(scratch_len(usize::MAX, n, 1, 32), usize::MAX);
        // A select's final on-chip sort holds its `k`: few of a very long
        // row, but more than the chunk, take the radix sort.
        assert_eq!(Method::of(8 * n, n, 32), Method::Radix);
        assert_eq!(Method::of(8 * n, SORT_CHUNK, 32), Method::Select);
    }

    /// 64-bit keys: half the on-chip chunk, pairs of four words, keys of
    /// two.
    #[test]
    fn wide_keys_halve_the_chunk() {
        let c = SORT_CHUNK / 2;
        assert_eq!(sort_chunk(64), c);
        assert_eq!(Method::of(c, c, 64), Method::OnChip);
        assert_eq!(Method::of(c + 1, c + 1, 64), Method::Radix);
        assert_eq!(Method::of(c + 1, c, 64), Method::Select);
        assert_eq!(Method::of(c + 1, c, 32), Method::OnChip);
        assert_eq!(Method::of(4096, 512, 64), Method::SelectOnChip);
        assert_eq!(Method::of(8 * (c + 1), c + 1, 64), Method::Radix);
        assert_eq!(Method::of(8 * (c + 1), c, 64), Method::Select);
        assert_eq!(scratch_len(3, c + 1, 5, 64), 3 * (SELECT_HEAD + 20));
        let s = RadixScratch::new(3, c + 1, 64).unwrap();
        let numel = 3 * (c as u64 + 1);
        assert_eq!((s.keys(1), s.positions(0)), (2 * numel, 4 * numel));
        assert_eq!(s.counts(), 6 * numel);
        let tiles = (c + 1).div_ceil(RADIX_TILE);
        assert_eq!(
            scratch_len(3, c + 1, c + 1, 64),
            3 * (c + 1) * 6 + 3 * (2 * tiles + 1) * 256
        );
    }
}
