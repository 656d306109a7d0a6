//! Random tensors: bit-exact against a host Philox4x32-10 (the same test
//! runs on the GPU when one is present, so the same seed gives the same
//! values on every device), through views and fusion modes; distribution
//! checks with fixed seeds (deterministic, so they cannot flake); the
//! fusion promise (`randn(..) * 2 + 1` is one kernel that reads nothing).

mod common;

use common::*;
use smelt::{DType, Fusion, SliceArg, Tensor};
use smelt_codegen::philox::{key_of_seed, philox4x32_10, unit_f32, unit_f64};

const SEEDS: [u64; 4] = [0, 7, 0xdead_beef_0123_4567, u64::MAX];

/// Word `word` of element `i`'s block.
fn word(seed: u64, word: usize, i: usize) -> u32 {
    philox4x32_10([i as u32, 0, 0, 0], key_of_seed(seed))[word]
}

/// The 64-bit draw of word `word` for element `i`: the word of block 0
/// (counter `[i, 0, 0, 0]`), then of block 1 (`[i, 1, 0, 0]`), written out
/// here independently of `smelt_codegen::philox::draw64`.
fn word64(seed: u64, word: usize, i: usize) -> u64 {
    let lo = philox4x32_10([i as u32, 1, 0, 0], key_of_seed(seed))[word];
    (u64::from(self::word(seed, word, i)) << 32) | u64::from(lo)
}

/// The host's `F64` `rand`: 53-bit uniforms from word 0.
fn host_rand64(seed: u64, shape: &[usize]) -> NdArray {
    let n = shape.iter().product();
    NdArray::new(
        shape,
        (0..n).map(|i| unit_f64(word64(seed, 0, i))).collect(),
    )
}

/// The host's `F64` `randn` from 53-bit uniforms of words 2 and 3.
fn host_randn64(seed: u64, shape: &[usize]) -> NdArray {
    let n = shape.iter().product();
    let z = (0..n).map(|i| {
        let u1 = unit_f64(word64(seed, 2, i));
        let u2 = unit_f64(word64(seed, 3, i));
        (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    });
    NdArray::new(shape, z.collect())
}

/// The host's `rand`: uniforms from word 0.
fn host_rand(seed: u64, shape: &[usize]) -> NdArray {
    let n = shape.iter().product();
    NdArray::new(
        shape,
        (0..n).map(|i| unit_f32(word(seed, 0, i)) as f64).collect(),
    )
}

/// The host's `randn` in `f64` from the same uniforms (words 2 and 3).
fn host_randn(seed: u64, shape: &[usize]) -> NdArray {
    let n = shape.iter().product();
    let z = (0..n).map(|i| {
        let u1 = unit_f32(word(seed, 2, i)) as f64;
        let u2 = unit_f32(word(seed, 3, i)) as f64;
        (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    });
    NdArray::new(shape, z.collect())
}

/// The host's `randint`: the high 64 bits of `word64(1) * (high - low)`,
/// plus `low` (wrapping), as exact `i64`s.
fn host_randint(seed: u64, low: i64, high: i64, n: usize) -> Vec<i64> {
    let range = u128::from(high.wrapping_sub(low) as u64);
    (0..n)
        .map(|i| {
            let r = (u128::from(word64(seed, 1, i)) * range) >> 64;
            low.wrapping_add(r as i64)
        })
        .collect()
}

/// A Box-Muller normal computed in `f32` with 2-ulp `log` and `cos` is
/// within this of the `f64` value.
const NORMAL_TOL: Tol = Tol {
    rel: 2e-5,
    abs: 2e-6,
};

const SHAPES: [&[usize]; 6] = [&[0], &[1], &[13], &[3, 0, 2], &[7, 11], &[2, 4099]];

#[test]
fn rand_is_bit_exact_against_the_host_generator() {
    for seed in SEEDS {
        for shape in SHAPES {
            let want = host_rand(seed, shape);
            let dev = test_device();
            let what = format!("rand seed {seed} {shape:?}");
            check_dt(
                &what,
                || Tensor::rand(shape, DType::F32, seed, &dev),
                DType::F32,
                &want,
                EXACT,
            );
            // Halves round the same f32 once.
            for dt in [DType::F16, DType::BF16] {
                let want = want.round(dt);
                check_dt(
                    &what,
                    || Tensor::rand(shape, dt, seed, &dev),
                    dt,
                    &want,
                    EXACT,
                );
            }
        }
    }
}

#[test]
fn randn_matches_the_host_in_f64_within_a_few_ulp() {
    for seed in SEEDS {
        for shape in SHAPES {
            let want = host_randn(seed, shape);
            let dev = test_device();
            let what = format!("randn seed {seed} {shape:?}");
            check_dt(
                &what,
                || Tensor::randn(shape, DType::F32, seed, &dev),
                DType::F32,
                &want,
                NORMAL_TOL,
            );
            let want = host_randn(seed, shape).map(|z| 1.5 + 0.25 * z);
            let what = format!("normal(1.5, 0.25) seed {seed} {shape:?}");
            let build = || Tensor::normal(1.5, 0.25, shape, DType::F32, seed, &dev);
            check_dt(&what, build, DType::F32, &want, NORMAL_TOL);
        }
    }
}

#[test]
fn uniform_scales_rand_in_f32() {
    let dev = test_device();
    for (lo, hi) in [(-2.0, 3.0), (5.0, 5.0), (0.0, 1e-3)] {
        let want = host_rand(11, &[257]).map(|u| (u * (hi - lo) as f32 as f64) as f32 as f64 + lo);
        let want = want.map(|v| v as f32 as f64);
        let build = || Tensor::uniform(lo, hi, [257], DType::F32, 11, &dev);
        check_dt(
            &format!("uniform({lo}, {hi})"),
            build,
            DType::F32,
            &want,
            EXACT,
        );
        let got = values(&build(), Fusion::On);
        assert!(
            got.iter().all(|v| lo <= *v && *v <= hi),
            "uniform({lo}, {hi}) out of range"
        );
    }
}

#[test]
fn randint_is_exact_and_inclusive_exclusive() {
    let dev = test_device();
    let ranges = [
        (0, 1),
        (1, 7),
        (-5, 5),
        (-1000, 1 << 20),
        (i32::MIN as i64, i32::MAX as i64 + 1),
        (i32::MAX as i64 - 2, i32::MAX as i64 + 1),
        // Ranges of more than 32 bits, up to the whole of i64.
        (0, 1 << 40),
        (-(1 << 62), 1 << 62),
        (i64::MAX - 3, i64::MAX),
        (i64::MIN, i64::MIN + 2),
        (i64::MIN, i64::MAX),
    ];
    for seed in SEEDS {
        for (lo, hi) in ranges {
            for shape in SHAPES {
                let n = shape.iter().product();
                let want = host_randint(seed, lo, hi, n);
                let what = format!("randint({lo}, {hi}) seed {seed} {shape:?}");
                for mode in MODES {
                    let t = Tensor::randint(lo, hi, shape, seed, &dev);
                    assert_eq!(t.dtype(), DType::I64, "{what}");
                    assert_eq!(t.shape(), shape, "{what}");
                    t.realize_with(mode).unwrap();
                    let got = t.to_vec::<i64>().unwrap();
                    assert_eq!(got, want, "{what} [{mode:?}]");
                }
                assert!(want.iter().all(|v| (lo..hi).contains(v)), "{what}");
            }
        }
    }
    // Every value of a small range appears, and nothing outside it.
    let d = values(&Tensor::randint(-2, 3, [1000], 5, &dev), Fusion::On);
    for v in -2..3 {
        assert!(d.contains(&(v as f64)), "randint(-2, 3) never drew {v}");
    }
    assert!(d.iter().all(|v| (-2.0..3.0).contains(v)));
    // A range beyond 2^32 reaches its upper half (a 32-bit draw would
    // not): the top bit of the offset is set in about half of the values.
    let d = Tensor::randint(0, 1 << 40, [1000], 9, &dev)
        .to_vec::<i64>()
        .unwrap();
    let upper = d.iter().filter(|v| **v >= 1 << 39).count();
    assert!(
        (400..600).contains(&upper),
        "{upper} of 1000 in the upper half"
    );
    // Fused with arithmetic, randint stays I64 and exact.
    let want: Vec<i64> = host_randint(4, -3, 1 << 35, 77)
        .iter()
        .map(|v| v * 2 + 1)
        .collect();
    let got = (Tensor::randint(-3, 1 << 35, [77], 4, &dev) * 2 + 1)
        .to_vec::<i64>()
        .unwrap();
    assert_eq!(got, want);
}

#[test]
fn f64_rand_and_randn_use_53_bits() {
    let dev = test_device();
    for seed in SEEDS {
        for shape in SHAPES {
            let what = format!("f64 rand seed {seed} {shape:?}");
            let want = host_rand64(seed, shape);
            let build = || Tensor::rand(shape, DType::F64, seed, &dev);
            check_dt(&what, build, DType::F64, &want, EXACT);
            // Each refines the f32 value of the same seed.
            let r32 = host_rand(seed, shape);
            for (a, b) in want.data.iter().zip(&r32.data) {
                assert!(*b <= *a && a - b < 2f64.powi(-24), "{what}: {a} vs {b}");
            }
            let what = format!("f64 randn seed {seed} {shape:?}");
            let want = host_randn64(seed, shape);
            let build = || Tensor::randn(shape, DType::F64, seed, &dev);
            check_dt(&what, build, DType::F64, &want, Tol::new(1e-13, 1e-14));
        }
    }
    // The low bits are random too: few of 1000 values are multiples of
    // 2^-24 (a 24-bit draw gives only those).
    let r = Tensor::rand([1000], DType::F64, 1, &dev)
        .to_vec::<f64>()
        .unwrap();
    let coarse = r
        .iter()
        .filter(|v| (*v * 2f64.powi(24)).fract() == 0.0)
        .count();
    assert!(coarse < 5, "{coarse} of 1000 are multiples of 2^-24");
    assert!(r.iter().all(|v| (0.0..1.0).contains(v)));
    // bernoulli(p) is rand < p for f64 too.
    let p = Tensor::full([1000], 0.3, DType::F64, &dev);
    let b = p.bernoulli(1).to_vec::<f64>().unwrap();
    let want: Vec<f64> = r.iter().map(|u| (*u < 0.3) as u8 as f64).collect();
    assert_eq!(b, want);
}

#[test]
fn views_of_random_tensors_read_the_right_elements() {
    let dev = test_device();
    let base = || Tensor::rand([6, 9], DType::F32, 3, &dev);
    let h = host_rand(3, &[6, 9]);
    check(
        "rand.t()",
        || base().permute([1, 0]),
        &h.permute(&[1, 0]),
        EXACT,
    );
    check("rand.flip()", || base().flip(..), &h.flip(&[0, 1]), EXACT);
    let steps = [
        SliceArg::Range {
            start: Some(1),
            end: None,
            step: 2,
        },
        SliceArg::Range {
            start: None,
            end: None,
            step: -3,
        },
    ];
    check(
        "rand[1::2, ::-3]",
        || base().slice(steps.to_vec()),
        &h.slice(steps),
        EXACT,
    );
    check(
        "rand.pad",
        || base().pad(&[(1, 0), (0, 2)], 0.0),
        &h.pad(&[(1, 0), (0, 2)], 0.0),
        EXACT,
    );
    let row = || Tensor::rand([1, 9], DType::F32, 3, &dev);
    let hrow = host_rand(3, &[1, 9]).broadcast_to(&[5, 9]);
    check("rand.expand", || row().expand([5, 9]), &hrow, EXACT);
    // A reshape of the counter keeps row-major numbering.
    check(
        "rand.reshape",
        || base().reshape([3, 18]),
        &h.reshape(&[3, 18]),
        EXACT,
    );
}

#[test]
fn same_seed_same_values_other_seed_other_values() {
    let dev = test_device();
    let a = values(&Tensor::randn([1000], DType::F32, 1, &dev), Fusion::On);
    let b = values(&Tensor::randn([1000], DType::F32, 1, &dev), Fusion::Off);
    assert_eq!(a, b, "a seed's values do not depend on the fusion mode");
    let c = values(&Tensor::randn([1000], DType::F32, 2, &dev), Fusion::On);
    assert!(a.iter().zip(&c).filter(|(x, y)| x == y).count() < 5);
    // A tensor's first elements do not depend on its size.
    let short = values(&Tensor::randn([10], DType::F32, 1, &dev), Fusion::On);
    assert_eq!(short, a[..10]);
    // High seed bits matter.
    let hi = values(
        &Tensor::rand([100], DType::F32, 1 | (1 << 40), &dev),
        Fusion::On,
    );
    let lo = values(&Tensor::rand([100], DType::F32, 1, &dev), Fusion::On);
    assert_ne!(hi, lo);
}

#[test]
fn randn_times_two_plus_one_is_one_kernel_that_reads_nothing() {
    let dev = test_device();
    let y = Tensor::randn([1024, 513], DType::F32, 9, &dev) * 2.0 + 1.0;
    let s = y.schedule(Fusion::On);
    assert_eq!(s.items.len(), 1, "{s}");
    assert_eq!(s.bytes_read(), 0, "generated in the kernel: {s}");
    assert_eq!(s.bytes_written(), 1024 * 513 * 4, "{s}");
    let want = host_randn(9, &[1024, 513]).map(|z| 2.0 * z + 1.0);
    check(
        "randn * 2 + 1",
        || Tensor::randn([1024, 513], DType::F32, 9, &dev) * 2.0 + 1.0,
        &want,
        NORMAL_TOL.times(2.0),
    );
    // A new seed reuses the kernel: the seed is a scalar parameter.
    let other = (Tensor::randn([1024, 513], DType::F32, 10, &dev) * 2.0 + 1.0).schedule(Fusion::On);
    assert_eq!(
        s.items[0].kernel.code_hash(),
        other.items[0].kernel.code_hash()
    );
    // And a reduction of random values reads no memory either.
    let m = Tensor::rand([64, 1000], DType::F32, 4, &dev)
        .sum(1)
        .schedule(Fusion::On);
    assert_eq!((m.items.len(), m.bytes_read()), (1, 0), "{m}");
}

/// Moments and bucket counts of fixed-seed samples. The seeds are fixed,
/// so the outcome is too; the bounds are five standard errors wide, so
/// they held for the seeds when written and say the generator is sound.
#[test]
fn distributions_have_the_right_moments_and_buckets() {
    let dev = test_device();
    let n = 1 << 20;
    let u = values(&Tensor::rand([n], DType::F32, 21, &dev), Fusion::On);
    let mean = u.iter().sum::<f64>() / n as f64;
    assert!(
        (mean - 0.5).abs() < 5.0 * (1.0 / 12.0 / n as f64).sqrt(),
        "rand mean {mean}"
    );
    let mut buckets = [0usize; 16];
    for x in &u {
        buckets[(x * 16.0) as usize] += 1;
    }
    let expect = n as f64 / 16.0;
    let sd = (expect * (1.0 - 1.0 / 16.0)).sqrt();
    for (b, c) in buckets.iter().enumerate() {
        assert!(
            (*c as f64 - expect).abs() < 5.0 * sd,
            "rand bucket {b}: {c} of {n}"
        );
    }
    let z = values(&Tensor::randn([n], DType::F32, 22, &dev), Fusion::On);
    let m = z.iter().sum::<f64>() / n as f64;
    let v = z.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
    let k4 = z.iter().map(|x| (x - m).powi(4)).sum::<f64>() / n as f64 / (v * v);
    assert!(m.abs() < 5.0 / (n as f64).sqrt(), "randn mean {m}");
    assert!(
        (v - 1.0).abs() < 5.0 * (2.0 / n as f64).sqrt(),
        "randn variance {v}"
    );
    assert!((k4 - 3.0).abs() < 0.05, "randn kurtosis {k4}");
    // The share within one standard deviation: 68.27%.
    let within = z.iter().filter(|x| x.abs() < 1.0).count() as f64 / n as f64;
    assert!(
        (within - 0.6827).abs() < 5.0 * (0.6827 * 0.3173 / n as f64).sqrt(),
        "{within}"
    );
    let d = values(&Tensor::randint(0, 10, [n], 23, &dev), Fusion::On);
    let expect = n as f64 / 10.0;
    let sd = (expect * 0.9).sqrt();
    for b in 0..10 {
        let c = d.iter().filter(|x| **x == b as f64).count();
        assert!(
            (c as f64 - expect).abs() < 5.0 * sd,
            "randint bucket {b}: {c} of {n}"
        );
    }
}

#[test]
fn bernoulli_draws_ones_with_the_given_probabilities() {
    let dev = test_device();
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for layout in LAYOUTS {
            let shape = [6, 35];
            let p = Input::with_values(
                layout,
                &shape,
                dt,
                &[0.0, 1.0, 0.3, 0.9, -0.5, 1.5, f64::NAN],
            );
            let u = host_rand(17, &shape);
            let want = p.host().zip(&u, |p, u| (u < p) as u8 as f64);
            let what = format!("bernoulli {dt} {layout:?}");
            check_dt(&what, || p.tensor().bernoulli(17), dt, &want, EXACT);
        }
    }
    let n = 1 << 18;
    let p = Tensor::full([n], 0.3, DType::F32, &dev);
    let ones = values(&p.bernoulli(5), Fusion::On).iter().sum::<f64>() / n as f64;
    assert!(
        (ones - 0.3).abs() < 5.0 * (0.21 / n as f64).sqrt(),
        "{ones}"
    );
}

#[test]
fn dropout_zeroes_with_probability_p_and_scales_the_rest() {
    let dev = test_device();
    let vals = [1.5, -2.0, f64::NAN, 0.0, 3.25, f64::INFINITY, -7.0];
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for layout in LAYOUTS {
            let shape = [5, 21];
            let x = Input::with_values(layout, &shape, dt, &vals);
            let u = host_rand(8, &shape);
            for p in [0.0, 0.25, 0.5, 1.0] {
                let scale = (1.0 / (1.0 - p)) as f32 as f64;
                // PyTorch multiplies by the mask: a dropped NaN or inf is NaN.
                let want = x
                    .host()
                    .zip(&u, |x, u| {
                        if u >= p {
                            (x * scale) as f32 as f64
                        } else {
                            x * 0.0
                        }
                    })
                    .round(dt);
                let what = format!("dropout({p}) {dt} {layout:?}");
                check_dt(&what, || x.tensor().dropout(p, 8), dt, &want, EXACT);
            }
        }
    }
    let n = 1 << 18;
    let y = values(
        &Tensor::ones([n], DType::F32, &dev).dropout(0.2, 6),
        Fusion::On,
    );
    let kept = y.iter().filter(|v| **v != 0.0).count() as f64 / n as f64;
    assert!(
        (kept - 0.8).abs() < 5.0 * (0.16 / n as f64).sqrt(),
        "{kept}"
    );
    assert!(y.iter().all(|v| *v == 0.0 || *v == 1.25));
}

#[test]
#[should_panic(expected = "dropout: probability p = 1.5 is not in [0, 1]")]
fn dropout_with_p_above_one_panics() {
    let _ = Tensor::ones([3], DType::F32, &test_device()).dropout(1.5, 0);
}

#[test]
#[should_panic(expected = "randint: expected low < high, got [3, 3)")]
fn randint_of_an_empty_range_panics() {
    let _ = Tensor::randint(3, 3, [3], 0, &test_device());
}

#[test]
#[should_panic(expected = "rand: dtype int32 is not a float type")]
fn rand_of_an_integer_dtype_panics() {
    let _ = Tensor::rand([3], DType::I32, 0, &test_device());
}

#[test]
#[should_panic(expected = "bernoulli: dtype int32 is not a float type")]
fn bernoulli_of_integers_panics() {
    let _ = Tensor::zeros([3], DType::I32, &test_device()).bernoulli(0);
}

#[test]
#[should_panic(expected = "randn: shape [65536, 65537] has more than 2^32 elements")]
fn randn_beyond_the_counter_panics() {
    let _ = Tensor::randn([1 << 16, (1 << 16) + 1], DType::F32, 0, &test_device());
}
