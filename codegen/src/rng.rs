//! SplitMix64, the host generator of test data (Steele, Lea and Flood,
//! "Fast splittable pseudorandom number generators", 2014, with the output
//! mix of Vigna's reference version). It lives here because smelt-codegen
//! is the lowest crate that needs random numbers (its tests' kernel
//! inputs); every test and fuzzer draws from it. Tensors' random numbers
//! are Philox, generated in kernels ([`crate::philox`]).
//!
//! Not cryptographic. Its state is one `u64` advanced by a fixed odd step,
//! so a stream never repeats within 2^64 draws, and [`mix64`] alone is a
//! good stateless hash of a counter.

/// The step added to the state at every draw: 2^64 divided by the golden
/// ratio, rounded to odd.
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function of a state that was just advanced:
/// three xor-shift-multiply rounds, each output bit depending on every
/// input bit.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in `[0, 1)` from the top 53 bits of `bits` (every value a
/// multiple of 2^-53, so all of them are exact `f64`s).
pub fn unit_f64(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A SplitMix64 stream. `SplitMix64::new(s).next_u64()` is the first
/// output for seed `s`; equal seeds give equal streams on every platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The stream whose state starts at `seed` (any value, 0 included).
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// The next uniform `f64` in `[0, 1)` (see [`unit_f64`]).
    pub fn next_f64(&mut self) -> f64 {
        unit_f64(self.next_u64())
    }

    /// The next integer in `0..n`, by remainder (biased by at most
    /// `n / 2^64`, which no test can see). Panics if `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "SplitMix64::below(0): empty range");
        self.next_u64() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first outputs for seed 1234567, computed apart from this code
    /// (Python, arbitrary-precision integers masked to 64 bits).
    #[test]
    fn matches_reference_outputs() {
        let mut r = SplitMix64::new(1_234_567);
        let want = [
            6_457_827_717_110_365_317,
            3_203_168_211_198_807_973,
            9_817_491_932_198_370_423,
            4_593_380_528_125_082_431,
            16_408_922_859_458_223_821,
        ];
        for w in want {
            assert_eq!(r.next_u64(), w);
        }
    }

    #[test]
    fn draws_are_in_range() {
        let mut r = SplitMix64::new(0);
        for _ in 0..1000 {
            let u = r.next_f64();
            assert!((0.0..1.0).contains(&u));
            assert!(r.below(7) < 7);
        }
        assert_eq!(unit_f64(u64::MAX), 1.0 - f64::EPSILON / 2.0);
        assert_eq!(unit_f64(0), 0.0);
    }
}
