//! Seeded random numbers, generated on the host so every backend sees the
//! same values for the same seed.

/// SplitMix64 of `x`: a strong 64-bit mix, the counter-based generator.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Uniform in `[0, 1)` for counter `i` of stream `seed`.
pub(crate) fn uniform(seed: u64, i: u64) -> f64 {
    let r = mix(mix(seed) ^ i.wrapping_mul(0xD1B5_4A32_D192_ED03));
    (r >> 11) as f64 / (1u64 << 53) as f64
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
}
