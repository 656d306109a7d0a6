//! Philox4x32-10, the counter-based generator behind every random tensor
//! (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as
//! 1, 2, 3", SC 2011; the constants and round of Random123).
//!
//! A block of four 32-bit words is a pure function of a 128-bit counter
//! and a 64-bit key: ten rounds of two 32x32->64-bit multiplications and
//! xors, with the key bumped by two Weyl constants between rounds. Every
//! step is exact integer arithmetic, so the interpreter and the PTX
//! emitter (`mul.hi.u32`/`mul.lo.u32`) produce the same bits, and element
//! `i` of a tensor needs no element before it: kernels generate the
//! numbers where they are used. smelt's key is the seed and its counter
//! the element's linear index and a block number (see [`Draw`]).
//!
//! [`Draw`] says what an [`crate::Inst::Random`] makes of a block: this
//! module is the reference both backends follow.

/// The multipliers of the two multiply rounds.
pub const M: [u32; 2] = [0xD251_1F53, 0xCD9E_8D57];

/// The Weyl steps added to the key's two words between rounds (the golden
/// ratio and `sqrt(3) - 1` as 32-bit fractions).
pub const W: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];

/// Rounds of the standard Philox4x32-10.
pub const ROUNDS: usize = 10;

/// The block for `counter` under `key`.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..ROUNDS {
        if round > 0 {
            k = [k[0].wrapping_add(W[0]), k[1].wrapping_add(W[1])];
        }
        let p0 = u64::from(M[0]) * u64::from(c[0]);
        let p1 = u64::from(M[1]) * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// What a random instruction draws for its element from word `w` (0..4)
/// of its Philox blocks. Element `i`'s block `j` is the block for counter
/// `[i, j, 0, 0]`: 32-bit draws read block 0, 64-bit draws ([`draw64`])
/// word `w` of block 0 (high half) and of block 1 (low half), so a 64-bit
/// draw begins with the 32-bit draw of the same word. Operands, in order:
/// the key's low and high words (`I32`, the seed's halves), the counter
/// (`I32` read as unsigned) and, for [`Draw::Below`], the bound (`I64`
/// read as unsigned, at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Draw {
    /// `F32` uniform in `[0, 1)`: the word's top 24 bits times `2^-24`, so
    /// every value is exact in `f32` (and in the half types' `f32`
    /// registers before their rounding).
    Uniform(u8),
    /// `F64` uniform in `[0, 1)`: the top 53 bits of the 64-bit draw times
    /// `2^-53` (so within `2^-24` of the `F32` uniform of the same word).
    Uniform53(u8),
    /// `I64` uniform in `[0, n)` for the bound `n`: the high 64 bits of
    /// `draw64 * n` (Lemire's multiply-shift; bias at most `n / 2^64` per
    /// value, invisible below ranges of 2^40 or so).
    Below(u8),
}

impl Draw {
    /// Which word of the blocks it reads.
    pub fn word(self) -> usize {
        match self {
            Draw::Uniform(w) | Draw::Uniform53(w) | Draw::Below(w) => usize::from(w),
        }
    }

    /// Whether it reads 64 bits (words of blocks 0 and 1).
    pub fn wide(self) -> bool {
        !matches!(self, Draw::Uniform(_))
    }

    /// How many operands the instruction takes (key, counter, bound).
    pub fn operands(self) -> usize {
        match self {
            Draw::Uniform(_) | Draw::Uniform53(_) => 3,
            Draw::Below(_) => 4,
        }
    }

    /// Short name for kernel names and IR listings.
    pub fn name(self) -> &'static str {
        match self {
            Draw::Uniform(_) => "uniform",
            Draw::Uniform53(_) => "uniform53",
            Draw::Below(_) => "randint",
        }
    }

    /// The uniform drawn for counter `counter` under `key` (`Uniform*`
    /// only), exact in the instruction's dtype.
    pub fn eval_float(self, key: [u32; 2], counter: u32) -> f64 {
        match self {
            Draw::Uniform(w) => unit_f32(block(key, counter, 0)[usize::from(w)]) as f64,
            Draw::Uniform53(w) => unit_f64(draw64(key, counter, usize::from(w))),
            Draw::Below(_) => unreachable!("randint draws integers"),
        }
    }

    /// The integer drawn for counter `counter` under `key` below `bound`
    /// (`Below` only).
    pub fn eval_int(self, key: [u32; 2], counter: u32, bound: u64) -> i64 {
        let w = draw64(key, counter, self.word());
        ((u128::from(w) * u128::from(bound)) >> 64) as i64
    }
}

/// Block `j` of the element with counter `counter`.
fn block(key: [u32; 2], counter: u32, j: u32) -> [u32; 4] {
    philox4x32_10([counter, j, 0, 0], key)
}

/// The 64-bit draw of word `w`: block 0's word (high half), block 1's
/// (low half).
pub fn draw64(key: [u32; 2], counter: u32, w: usize) -> u64 {
    let hi = block(key, counter, 0)[w];
    let lo = block(key, counter, 1)[w];
    (u64::from(hi) << 32) | u64::from(lo)
}

/// The uniform `f64` in `[0, 1)` of a 64-bit draw: its top 53 bits times
/// `2^-53`.
pub fn unit_f64(d: u64) -> f64 {
    (d >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The uniform `f32` in `[0, 1)` of a word: its top 24 bits times `2^-24`.
pub fn unit_f32(w: u32) -> f32 {
    (w >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
}

/// A `u64` seed as the key's two words (low, high).
pub fn key_of_seed(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's known-answer vectors for Philox4x32-10 (tests/kat_vectors
    /// of github.com/DEShawResearch/random123): counter, key, block.
    #[test]
    fn matches_random123_known_answers() {
        let cases: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            (
                [0, 0, 0, 0],
                [0, 0],
                [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
            ),
            (
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0],
                [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
            ),
        ];
        for (ctr, key, want) in cases {
            assert_eq!(
                philox4x32_10(ctr, key),
                want,
                "counter {ctr:x?} key {key:x?}"
            );
        }
    }

    #[test]
    fn draws_are_in_range() {
        assert_eq!(unit_f32(0), 0.0);
        assert_eq!(unit_f32(u32::MAX), 1.0 - f32::EPSILON / 2.0);
        for i in 0..1000 {
            let u = Draw::Uniform(1).eval_float([7, 9], i);
            assert!((0.0..1.0).contains(&u), "{u}");
            let u = Draw::Uniform53(1).eval_float([7, 9], i);
            assert!((0.0..1.0).contains(&u), "{u}");
            // The 53-bit uniform refines the 24-bit one of its word.
            let u24 = Draw::Uniform(1).eval_float([7, 9], i);
            assert!(u24 <= u && u - u24 < 2f64.powi(-24), "{u24} {u}");
            let r = Draw::Below(0).eval_int([7, 9], i, 10);
            assert!((0..10).contains(&r), "{r}");
            // The largest bound, 2^64 - 1, stays below it as unsigned.
            let big = Draw::Below(2).eval_int([7, 9], i, u64::MAX) as u64;
            assert!(big < u64::MAX);
            // A bound of 2^32 takes the 64-bit draw's high half: the word.
            let w = Draw::Below(3).eval_int([7, 9], i, 1 << 32);
            assert_eq!(w, i64::from(philox4x32_10([i, 0, 0, 0], [7, 9])[3]));
        }
        assert_eq!(unit_f64(u64::MAX), 1.0 - f64::EPSILON / 2.0);
        assert_eq!(
            key_of_seed(0x1234_5678_9abc_def0),
            [0x9abc_def0, 0x1234_5678]
        );
    }
}
