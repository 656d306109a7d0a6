//! Seeded random numbers, generated on the host so every backend sees the
//! same values for the same seed: element `i` of stream `seed` is a hash of
//! the pair through SplitMix64 (`smelt_codegen::rng`), so it does not
//! depend on the elements before it.

use smelt_codegen::rng::{unit_f64, SplitMix64};

/// SplitMix64's first output for state `x`: a strong 64-bit mix, which
/// makes the generator counter-based.
fn mix(x: u64) -> u64 {
    SplitMix64::new(x).next_u64()
}

/// Uniform in `[0, 1)` for counter `i` of stream `seed`.
pub(crate) fn uniform(seed: u64, i: u64) -> f64 {
    unit_f64(mix(mix(seed) ^ i.wrapping_mul(0xD1B5_4A32_D192_ED03)))
}

/// Standard normal for counter `i` of stream `seed` (Box-Muller).
pub(crate) fn normal(seed: u64, i: u64) -> f64 {
    let u1 = uniform(seed, 2 * i);
    let u2 = uniform(seed, 2 * i + 1);
    (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    #[test]
    fn moments_are_right() {
        let n = 100_000;
        let u: f64 = (0..n).map(|i| super::uniform(7, i)).sum::<f64>() / n as f64;
        let z: Vec<f64> = (0..n).map(|i| super::normal(7, i)).collect();
        let m = z.iter().sum::<f64>() / n as f64;
        let v = z.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
        assert!((u - 0.5).abs() < 0.01, "{u}");
        assert!(m.abs() < 0.02 && (v - 1.0).abs() < 0.02, "{m} {v}");
        assert_ne!(super::uniform(1, 0), super::uniform(2, 0));
    }

    /// `rand` and `randn` give the same numbers for a seed in every
    /// release: these were printed by the generator before it moved to
    /// `smelt_codegen::rng`. Uniforms are integer arithmetic, pinned to the
    /// bit; normals go through the platform's `ln` and `cos`, so they get
    /// a few ulp.
    #[test]
    fn values_are_pinned() {
        let pins: [(u64, u64, u64, f64); 5] = [
            (0, 0, 0x3fe4_e0db_a5e9_a32f, 1.361250408580649),
            (7, 0, 0x3fe7_1698_52ef_d579, 0.6485718755383291),
            (7, 1, 0x3fc7_7ddc_518d_ad20, -0.8767266581385198),
            (7, 12345, 0x3fc3_6ff3_b75f_c298, 0.7976105993007303),
            (u64::MAX, 1 << 40, 0x3fec_8dd6_0658_a183, 0.771786775445243),
        ];
        for (seed, i, u_bits, z) in pins {
            let u = super::uniform(seed, i);
            assert_eq!(u.to_bits(), u_bits, "uniform({seed}, {i}) = {u:e}");
            let got = super::normal(seed, i);
            assert!(
                (got - z).abs() <= 1e-14 * z.abs(),
                "normal({seed}, {i}) = {got:e}, pinned {z:e}"
            );
        }
    }
}
