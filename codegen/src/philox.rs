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
//! the element's linear index (see [`Draw`]).
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

/// What a random instruction draws from word `word` (0..4) of the block
/// for its element. Its operands are, in order: the key's low and high
/// words (`I32`, the seed's halves), the counter (`I32` read as unsigned:
/// the block's counter is `[counter, 0, 0, 0]`), and for [`Draw::Below`]
/// the bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Draw {
    /// `F32` uniform in `[0, 1)`: the word's top 24 bits times `2^-24`, so
    /// every value is exact in `f32` (and in the half types' `f32`
    /// registers before their rounding).
    Uniform(u8),
    /// `I32` uniform in `[0, n)` for the bound `n` read as unsigned, 0
    /// meaning `2^32` (the word itself): the high word of `word * n`
    /// (Lemire's multiply-shift; bias at most `n / 2^32` per value, far
    /// below anything a test of a 32-bit range can see).
    Below(u8),
}

impl Draw {
    /// Which word of the block it reads.
    pub fn word(self) -> usize {
        match self {
            Draw::Uniform(w) | Draw::Below(w) => usize::from(w),
        }
    }

    /// How many operands the instruction takes (key, counter, bound).
    pub fn operands(self) -> usize {
        match self {
            Draw::Uniform(_) => 3,
            Draw::Below(_) => 4,
        }
    }

    /// Short name for kernel names and IR listings.
    pub fn name(self) -> &'static str {
        match self {
            Draw::Uniform(_) => "uniform",
            Draw::Below(_) => "randint",
        }
    }

    /// The value drawn for counter `counter` under `key` (`bound` for
    /// [`Draw::Below`]), as the instruction's dtype holds it.
    pub fn eval(self, key: [u32; 2], counter: u32, bound: u32) -> f64 {
        let w = philox4x32_10([counter, 0, 0, 0], key)[self.word()];
        match self {
            Draw::Uniform(_) => unit_f32(w) as f64,
            Draw::Below(_) => {
                let n = if bound == 0 {
                    1 << 32
                } else {
                    u64::from(bound)
                };
                let r = ((u64::from(w) * n) >> 32) as u32;
                // The `I32` register holds the same 32 bits.
                r as i32 as f64
            }
        }
    }
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
            let u = Draw::Uniform(1).eval([7, 9], i, 0);
            assert!((0.0..1.0).contains(&u), "{u}");
            let r = Draw::Below(0).eval([7, 9], i, 10);
            assert!((0.0..10.0).contains(&r) && r.fract() == 0.0, "{r}");
            // A bound of 2^32 - 1 (all bits) stays below it as unsigned.
            let big = Draw::Below(2).eval([7, 9], i, u32::MAX) as i32 as u32;
            assert!(big < u32::MAX);
            // A bound of 0 is 2^32: the word itself.
            let all = Draw::Below(3).eval([7, 9], i, 0) as i32 as u32;
            assert_eq!(all, philox4x32_10([i, 0, 0, 0], [7, 9])[3]);
        }
        assert_eq!(
            key_of_seed(0x1234_5678_9abc_def0),
            [0x9abc_def0, 0x1234_5678]
        );
    }
}
