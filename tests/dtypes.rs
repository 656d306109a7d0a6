//! The dtypes beyond f32/f16/bf16/i32/bool (F64, I64, I16, I8, U8, and
//! the FP8 formats in the promotion and cast tables):
//! promotion of every pair against PyTorch's table, casts between every
//! pair (NaN, infinities, out-of-range values), integer wrap-around,
//! `I64` exactness beyond 2^31 and 2^53, `F64` precision that `F32`
//! cannot give, reductions returning `I64`, views, creation and matmul,
//! under both fusion modes on the test device.

mod common;

use common::*;
use smelt::{DType, Device, Fusion, Tensor};

use DType::*;

/// PyTorch's `torch.result_type` for two tensors, rows and columns in
/// `DType::ALL` order (Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64,
/// F8E4M3, F8E5M2). PyTorch raises for every pair with an FP8 type and
/// another; smelt promotes FP8 as a one-byte float (a wider float holds
/// each of its values exactly) and panics only for the two FP8 formats
/// together ([`RAISES`]).
const TORCH: [[DType; 12]; 12] = [
    [Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64, E4, E5],
    [U8, U8, I16, I16, I32, I64, F16, BF16, F32, F64, E4, E5],
    [I8, I16, I8, I16, I32, I64, F16, BF16, F32, F64, E4, E5],
    [I16, I16, I16, I16, I32, I64, F16, BF16, F32, F64, E4, E5],
    [I32, I32, I32, I32, I32, I64, F16, BF16, F32, F64, E4, E5],
    [I64, I64, I64, I64, I64, I64, F16, BF16, F32, F64, E4, E5],
    [F16, F16, F16, F16, F16, F16, F16, F32, F32, F64, F16, F16],
    [
        BF16, BF16, BF16, BF16, BF16, BF16, F32, BF16, F32, F64, BF16, BF16,
    ],
    [F32, F32, F32, F32, F32, F32, F32, F32, F32, F64, F32, F32],
    [F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64],
    [E4, E4, E4, E4, E4, E4, F16, BF16, F32, F64, E4, RAISES],
    [E5, E5, E5, E5, E5, E5, F16, BF16, F32, F64, RAISES, E5],
];

const E4: DType = F8E4M3;
const E5: DType = F8E5M2;
/// A table cell whose pair does not promote (no pair promotes to `Bool`).
const RAISES: DType = Bool;

const NEW: [DType; 5] = [F64, I64, I16, I8, U8];

#[test]
fn promotion_of_every_pair_matches_torch() {
    for (i, a) in DType::ALL.into_iter().enumerate() {
        for (j, b) in DType::ALL.into_iter().enumerate() {
            let want = TORCH[i][j];
            if want == RAISES && a != Bool {
                let panicked = std::panic::catch_unwind(|| a.promote(b)).is_err();
                assert!(panicked, "{a} with {b} must not promote");
                continue;
            }
            assert_eq!(a.promote(b), want, "{a} with {b}");
            // Through the tensor API: 3 + 2 in the promoted dtype (bools
            // are 1 + 1, which is true).
            let (x, _) = make(&[3.0, 3.0], &[2], a);
            let (y, _) = make(&[2.0, 2.0], &[2], b);
            let s = &x + &y;
            assert_eq!(s.dtype(), want, "{a} + {b}");
            let expect = if want == Bool {
                1.0
            } else {
                want.round(a.round(3.0) + b.round(2.0))
            };
            check(
                &format!("{a} + {b}"),
                || &x + &y,
                &NdArray::new(&[2], vec![expect; 2]),
                EXACT,
            );
        }
    }
}

#[test]
fn scalars_follow_the_tensor() {
    let dev = test_device();
    for dt in NEW {
        let x = Tensor::zeros([2], dt, &dev);
        assert_eq!((&x + 1).dtype(), dt, "{dt} + int");
        assert_eq!((&x + 1i64).dtype(), dt, "{dt} + i64");
        assert_eq!((&x + 1u8).dtype(), dt, "{dt} + u8");
        let float = if dt.is_float() { dt } else { F32 };
        assert_eq!((&x + 0.5).dtype(), float, "{dt} + float");
    }
    // An i64 scalar beyond 2^53 stays exact.
    let big = (1i64 << 60) + 7;
    let x = Tensor::from_vec(vec![1i64, -1], [2], &dev);
    assert_eq!((&x + big).to_vec::<i64>().unwrap(), vec![big + 1, big - 1]);
    let s = Tensor::scalar(big, &dev);
    assert_eq!(s.to_scalar::<i64>().unwrap(), big);
    assert_eq!(Tensor::scalar(3i64, &dev).to_scalar::<i64>().unwrap(), 3);
}

/// The reference cast of `v`, a value of `from`, to `to`, by Rust's `as`
/// on native types (floats saturate into integers, integers wrap).
fn ref_cast(v: f64, from: DType, to: DType) -> f64 {
    let int = |v: f64| -> i64 { v as i64 };
    match to {
        Bool => (v != 0.0) as u8 as f64,
        F64 => v,
        F32 => v as f32 as f64,
        F16 => half::f16::from_f64(v).to_f64(),
        BF16 => half::bf16::from_f64(v).to_f64(),
        F8E4M3 | F8E5M2 => fp8_ref(v, to),
        _ if from.is_float() => match to {
            U8 => v as u8 as f64,
            I8 => v as i8 as f64,
            I16 => v as i16 as f64,
            I32 => v as i32 as f64,
            _ => v as i64 as f64,
        },
        U8 => int(v) as u8 as f64,
        I8 => int(v) as i8 as f64,
        I16 => int(v) as i16 as f64,
        I32 => int(v) as i32 as f64,
        _ => int(v) as f64,
    }
}

#[test]
fn casts_between_every_pair() {
    // Values exact in every float type they are made in, and integers
    // whose wrap in each narrow type differs from their saturation.
    let vals = [
        -2.75,
        -1.0,
        -0.5,
        0.0,
        0.5,
        1.5,
        2.75,
        100.25,
        -300.75,
        40000.0,
        -70000.0,
        5e9,
        -1e19,
        1e19,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    for from in DType::ALL {
        for to in DType::ALL {
            if from == to {
                continue;
            }
            for layout in [Layout::Contiguous, Layout::Permuted, Layout::Padded] {
                let inp = Input::with_values(layout, &[3, 7], from, &vals);
                let want = inp.host().map(|v| ref_cast(v, from, to));
                check_dt(
                    &format!("cast {from} -> {to} {layout:?}"),
                    || inp.tensor().cast(to),
                    to,
                    &want,
                    EXACT,
                );
            }
        }
    }
}

#[test]
fn narrow_integers_wrap_before_every_use() {
    let dev = test_device();
    let u = Tensor::from_vec(vec![200u8, 255, 0, 17], [4], &dev);
    // 200 + 100 wraps to 44 before the comparison, as in PyTorch.
    check(
        "u8 add then compare",
        || (&u + 100).gt(50),
        &NdArray::new(&[4], vec![0.0, 1.0, 1.0, 1.0]),
        EXACT,
    );
    check(
        "u8 sub",
        || &u - 201,
        &NdArray::new(&[4], vec![255.0, 54.0, 55.0, 72.0]),
        EXACT,
    );
    let i = Tensor::from_vec(vec![127i8, -128, 5, -7], [4], &dev);
    check(
        "i8 add, neg, abs, square",
        || ((&i + 1) * 3).neg().abs() + i.square(),
        &NdArray::new(
            &[4],
            [127i8, -128, 5, -7]
                .iter()
                .map(|v| {
                    let a = v
                        .wrapping_add(1)
                        .wrapping_mul(3)
                        .wrapping_neg()
                        .wrapping_abs();
                    a.wrapping_add(v.wrapping_mul(*v)) as f64
                })
                .collect(),
        ),
        EXACT,
    );
    let h = Tensor::from_vec(vec![300i16, -32768, 181], [3], &dev);
    check(
        "i16 mul and pow",
        || (&h * &h).pow(3),
        &NdArray::new(
            &[3],
            [300i16, -32768, 181]
                .iter()
                .map(|v| v.wrapping_mul(*v).wrapping_pow(3) as f64)
                .collect(),
        ),
        EXACT,
    );
    let l = Tensor::from_vec(vec![i64::MAX, i64::MIN, 3], [3], &dev);
    assert_eq!(
        (&l + 1).to_vec::<i64>().unwrap(),
        vec![i64::MIN, i64::MIN + 1, 4]
    );
    assert_eq!(
        l.neg().to_vec::<i64>().unwrap(),
        vec![-i64::MAX, i64::MIN, -3]
    );
    assert_eq!(
        (&l * &l).to_vec::<i64>().unwrap(),
        vec![1, 0, 9],
        "i64 products wrap"
    );
}

/// `f` realized under both fusion modes, read back as `i64`.
fn ints(f: impl Fn() -> Tensor) -> Vec<Vec<i64>> {
    [Fusion::Off, Fusion::On]
        .into_iter()
        .map(|mode| {
            let y = f();
            y.realize_with(mode).unwrap();
            let c = y.contiguous();
            c.realize_with(mode).unwrap();
            c.to_vec::<i64>().unwrap()
        })
        .collect()
}

#[test]
fn i64_is_exact_beyond_2_pow_53() {
    let dev = test_device();
    let p53 = 1i64 << 53;
    let vals = vec![p53, p53 + 1, -(p53 + 3), (1 << 40) + 5, i64::MAX - 1];
    let x = Tensor::from_vec(vals.clone(), [5], &dev);
    for got in ints(|| &x + 1) {
        assert_eq!(got, vals.iter().map(|v| v + 1).collect::<Vec<_>>());
    }
    for got in ints(|| x.flip(0) * 2 - &x.flip(0)) {
        let want: Vec<i64> = vals.iter().rev().copied().collect();
        assert_eq!(got, want, "flipped view");
    }
    // A sum an f64 accumulator would round: 2^53 + 1 + 1.
    let s = Tensor::from_vec(vec![p53, 1, 1, 1 << 31, 1 << 31], [5], &dev);
    for got in ints(|| s.sum(..)) {
        assert_eq!(got, vec![p53 + 2 + (1 << 32)]);
    }
    for got in ints(|| x.max(..)) {
        assert_eq!(got, vec![i64::MAX - 1]);
    }
    for got in ints(|| x.min(..)) {
        assert_eq!(got, vec![-(p53 + 3)]);
    }
    // Comparisons see the last bit.
    let y = Tensor::from_vec(vec![p53 + 1], [1], &dev);
    let z = Tensor::from_vec(vec![p53], [1], &dev);
    assert_eq!(y.gt(&z).to_vec::<bool>().unwrap(), vec![true]);
    assert_eq!(y.eq(&z).to_vec::<bool>().unwrap(), vec![false]);
    // To i32: the low 32 bits.
    assert_eq!(
        x.cast(I32).to_vec::<i32>().unwrap(),
        vals.iter().map(|v| *v as i32).collect::<Vec<_>>()
    );
    // argmax of values one apart beyond 2^53.
    let a = Tensor::from_vec(vec![p53 + 1, p53 + 2, p53], [3], &dev);
    assert_eq!(a.argmax(0).to_vec::<i64>().unwrap(), vec![1]);
}

#[test]
fn f64_keeps_precision_f32_cannot() {
    let dev = test_device();
    let x = Tensor::from_vec(vec![1.0f64, 1e8, -3.0], [3], &dev);
    assert_eq!(x.dtype(), F64);
    let y = (&x + 1e-10) - &x;
    let got = y.to_vec::<f64>().unwrap();
    for (g, v) in got.iter().zip([1.0f64, 1e8, -3.0]) {
        assert_eq!(*g, (v + 1e-10) - v, "{v}");
    }
    assert!(got[0] != 0.0, "f32 would give 0");
    let third = (Tensor::ones([1], F64, &dev) / 3.0)
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(third, vec![1.0 / 3.0]);
    let r = Tensor::full([2], 2.0, F64, &dev)
        .sqrt()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(r, vec![2f64.sqrt(); 2]);
    // A long sum of 0.1 is within a few f64 ulp of the exact one.
    let n = 100_003;
    let s: f64 = Tensor::full([n], 0.1, F64, &dev)
        .sum(..)
        .to_scalar()
        .unwrap();
    assert!((s - 0.1 * n as f64).abs() < 1e-9, "{s}");
    // Mean, softmax and layer norm compute in f64.
    let v: Vec<f64> = (0..37).map(|i| 1.0 + i as f64 * 1e-9).collect();
    let t = Tensor::from_vec(v.clone(), [37], &dev);
    let m: f64 = t.mean(..).to_scalar().unwrap();
    let want = v.iter().sum::<f64>() / 37.0;
    assert!((m - want).abs() < 1e-15, "{m} {want}");
    assert_eq!(t.mean(..).dtype(), F64);
}

#[test]
fn reductions_of_every_new_dtype() {
    let mut seed = 0;
    for dt in NEW {
        for shape in [vec![0usize], vec![1], vec![7, 13], vec![3, 1000]] {
            for layout in LAYOUTS {
                seed += 1;
                let inp = Input::new(layout, &shape, dt, -6.0, 6.0, seed);
                let h = inp.host();
                let last = shape.len() - 1;
                let t = tol(dt.promote(I64));
                let sum_dt = if dt.is_float() { dt } else { I64 };
                check_dt(
                    &format!("sum {dt} {shape:?} {layout:?}"),
                    || inp.tensor().sum(last as isize),
                    sum_dt,
                    &h.sum(&[last], false),
                    t,
                );
                if shape[last] > 0 {
                    check_dt(
                        &format!("max {dt} {shape:?} {layout:?}"),
                        || inp.tensor().max(last as isize),
                        dt,
                        &h.max(&[last], false),
                        EXACT,
                    );
                    check_dt(
                        &format!("min {dt} {shape:?} {layout:?}"),
                        || inp.tensor().min_keepdim(last as isize),
                        dt,
                        &h.min(&[last], true),
                        EXACT,
                    );
                    check_dt(
                        &format!("argmax {dt} {shape:?} {layout:?}"),
                        || inp.tensor().argmax(last as isize),
                        I64,
                        &h.arg(last, false, |a, b| a > b),
                        EXACT,
                    );
                }
            }
        }
    }
}

#[test]
fn integer_sums_and_products_are_i64() {
    let dev = test_device();
    for dt in [Bool, U8, I8, I16, I32] {
        let x = Tensor::ones([3, 5], dt, &dev);
        assert_eq!(x.sum(..).dtype(), I64, "sum of {dt}");
        assert_eq!(x.prod(1).dtype(), I64, "prod of {dt}");
    }
    // Beyond i32: 8 * 2^30 and 255 * 5000.
    let big = Tensor::full([8], (1u64 << 30) as f64, I32, &dev);
    assert_eq!(big.sum(..).to_vec::<i64>().unwrap(), vec![1i64 << 33]);
    let u = Tensor::full([5000], 255.0, U8, &dev);
    assert_eq!(u.sum(..).to_vec::<i64>().unwrap(), vec![255 * 5000]);
    let p = Tensor::full([3], 70000.0, I32, &dev);
    assert_eq!(p.prod(..).to_vec::<i64>().unwrap(), vec![70000i64.pow(3)]);
    let b = Tensor::from_vec(vec![true, false, true], [3], &dev);
    assert_eq!(b.sum(..).to_vec::<i64>().unwrap(), vec![2]);
    assert_eq!(b.argmin(0).dtype(), I64);
}

/// `v` (a whole number, or any float for float types) in `dt` with
/// integers wrapping, by Rust's `as` on native types.
fn wrap(dt: DType, v: f64) -> f64 {
    let i = v as i64;
    match dt {
        U8 => i as u8 as f64,
        I8 => i as i8 as f64,
        I16 => i as i16 as f64,
        I32 => i as i32 as f64,
        I64 => i as f64,
        _ => dt.round(v),
    }
}

#[test]
fn elementwise_through_every_view() {
    let mut seed = 100;
    for dt in NEW {
        for shape in [vec![0usize, 3], vec![1, 1], vec![5, 7], vec![2, 1031]] {
            for layout in LAYOUTS {
                seed += 1;
                let a = Input::new(layout, &shape, dt, -50.0, 50.0, seed);
                let b = Input::new(Layout::Contiguous, &shape, dt, -50.0, 50.0, seed + 7);
                let (ha, hb) = (a.host(), b.host());
                let want = ha.zip(&hb, |x, y| wrap(dt, wrap(dt, x * y) - x));
                check_dt(
                    &format!("a * b - a {dt} {shape:?} {layout:?}"),
                    || a.tensor() * b.tensor() - a.tensor(),
                    dt,
                    &want,
                    tol(dt),
                );
                let want = ha.zip(&hb, |x, y| (x < y) as u8 as f64);
                check_dt(
                    &format!("a < b {dt} {shape:?} {layout:?}"),
                    || a.tensor().lt(b.tensor()),
                    Bool,
                    &want,
                    EXACT,
                );
                let want = ha.zip(&hb, |x, y| if x > 0.0 { x } else { y });
                check_dt(
                    &format!("where {dt} {shape:?} {layout:?}"),
                    || a.tensor().gt(0).where_(a.tensor(), b.tensor()),
                    dt,
                    &want,
                    EXACT,
                );
            }
        }
    }
}

#[test]
fn f64_special_values() {
    let vals = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1e-310,
        1e308,
    ];
    let (x, h) = make(&vals, &[7], F64);
    check(
        "f64 max with NaN",
        || x.maximum(1.0),
        &h.map(|v| nan_max(v, 1.0)),
        EXACT,
    );
    check(
        "f64 min with NaN",
        || x.minimum(1.0),
        &h.map(|v| nan_min(v, 1.0)),
        EXACT,
    );
    check(
        "f64 relu",
        || x.relu(),
        &h.map(|v| if v > 0.0 || v.is_nan() { v } else { 0.0 }),
        EXACT,
    );
    check("f64 x * 2", || &x * 2.0, &h.map(|v| v * 2.0), EXACT);
    check("f64 sqrt", || x.sqrt(), &h.map(f64::sqrt), EXACT);
    check("f64 rsqrt", || x.rsqrt(), &h.map(|v| 1.0 / v.sqrt()), EXACT);
    check("f64 recip", || x.recip(), &h.map(|v| 1.0 / v), EXACT);
    check(
        "f64 max reduction",
        || x.max(..),
        &NdArray::scalar(f64::NAN),
        EXACT,
    );
    check(
        "f64 eq",
        || x.eq(&x),
        &h.map(|v| (v == v) as u8 as f64),
        EXACT,
    );
    check(
        "f64 ne",
        || x.ne(&x),
        &h.map(|v| (v != v) as u8 as f64),
        EXACT,
    );
}

#[test]
fn matmul_on_f64_and_integers() {
    let mut rng = Rng::new(5);
    for dt in [F64, I64, I32] {
        for (m, k, n) in [(1, 1, 1), (7, 13, 5), (33, 64, 17)] {
            let a = random_values(m * k, dt, -20.0, 20.0, &mut rng);
            let b = random_values(k * n, dt, -20.0, 20.0, &mut rng);
            let (ta, ha) = make(&a, &[m, k], dt);
            let (tb, hb) = make(&b, &[k, n], dt);
            check_dt(
                &format!("matmul {dt} {m}x{k}x{n}"),
                || ta.matmul(&tb),
                dt,
                &ha.matmul(&hb),
                tol(dt).times(10.0),
            );
            check_dt(
                &format!("matmul {dt} transposed"),
                || tb.t().matmul(&ta.t()),
                dt,
                &hb.permute(&[1, 0]).matmul(&ha.permute(&[1, 0])),
                tol(dt).times(10.0),
            );
        }
    }
}

#[test]
fn creation_accepts_every_new_dtype() {
    let dev = test_device();
    for dt in NEW {
        let z = Tensor::zeros([2, 3], dt, &dev);
        assert_eq!(z.dtype(), dt);
        assert_eq!(z.to_vec::<f64>().unwrap(), vec![0.0; 6]);
        assert_eq!(
            Tensor::ones([4], dt, &dev).to_vec::<f64>().unwrap(),
            vec![1.0; 4]
        );
        assert_eq!(
            Tensor::full([2], 7.0, dt, &dev).to_vec::<f64>().unwrap(),
            vec![7.0; 2]
        );
        assert_eq!(
            Tensor::arange(0.0, 5.0, 2.0, dt, &dev)
                .to_vec::<f64>()
                .unwrap(),
            vec![0.0, 2.0, 4.0]
        );
        let e = Tensor::eye(3, dt, &dev).to_vec::<f64>().unwrap();
        assert_eq!(e, vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    }
    // f64 random numbers take 53 random bits: within 2^-24 of the f32
    // ones of the same seed, not equal to them (tests/random.rs checks
    // the bits).
    let r = Tensor::rand([1000], F64, 3, &dev).to_vec::<f64>().unwrap();
    let r32 = Tensor::rand([1000], F32, 3, &dev).to_vec::<f32>().unwrap();
    assert!(r.iter().all(|v| (0.0..1.0).contains(v)));
    assert!(r
        .iter()
        .zip(&r32)
        .all(|(a, b)| *b as f64 <= *a && a - (*b as f64) < 2f64.powi(-24)));
    assert!(r.iter().zip(&r32).any(|(a, b)| *a != *b as f64));
    let z = Tensor::randn([1000], F64, 3, &dev).to_vec::<f64>().unwrap();
    let mean = z.iter().sum::<f64>() / 1000.0;
    assert!(mean.abs() < 0.1, "{mean}");
    // from_vec of f64 keeps F64.
    assert_eq!(
        Tensor::from_vec(vec![0.1f64], [1], &Device::Cpu).dtype(),
        F64
    );
    assert_eq!(
        Tensor::from_vec(vec![0.1f64], [1], &dev)
            .to_vec::<f64>()
            .unwrap(),
        vec![0.1]
    );
}

#[test]
fn f64_composites_compute_in_f64() {
    let mut rng = Rng::new(11);
    let (rows, cols) = (5, 37);
    let v: Vec<f64> = (0..rows * cols).map(|_| rng.uniform(-30.0, 30.0)).collect();
    let (x, h) = make(&v, &[rows, cols], F64);
    let t = Tol::new(1e-13, 1e-15);
    let lse = |r: &[f64]| {
        let m = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        m + r.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
    };
    let mut soft = Vec::new();
    let mut logsoft = Vec::new();
    let mut norm = Vec::new();
    for r in v.chunks(cols) {
        let l = lse(r);
        soft.extend(r.iter().map(|v| (v - l).exp()));
        logsoft.extend(r.iter().map(|v| v - l));
        let mean = r.iter().sum::<f64>() / cols as f64;
        let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
        norm.extend(r.iter().map(|v| (v - mean) / (var + 1e-5).sqrt()));
    }
    let shape = [rows, cols];
    check_dt(
        "f64 softmax",
        || x.softmax(-1),
        F64,
        &NdArray::new(&shape, soft.clone()),
        t,
    );
    check_dt(
        "f64 log_softmax",
        || x.log_softmax(-1),
        F64,
        &NdArray::new(&shape, logsoft.clone()),
        t,
    );
    check_dt(
        "f64 layer_norm",
        || x.layer_norm(-1, None, None, 1e-5),
        F64,
        &NdArray::new(&shape, norm.clone()),
        t,
    );
    check("f64 exp", || x.exp(), &h.map(f64::exp), t);
    check("f64 log", || x.abs().log(), &h.map(|v| v.abs().ln()), t);
}

#[test]
fn f64_rounding_and_division_family_are_exact() {
    let dev = test_device();
    // Fractions f32 cannot hold, halves (round to even), huge and tiny
    // magnitudes, signed zeros, infinities and NaN.
    let a = [
        2.5,
        -2.5,
        3.5,
        1.0 + 1e-12,
        -(1e15 + 0.5),
        4503599627370497.0,
        1e300,
        -5e-324,
        -0.0,
        f64::INFINITY,
        f64::NAN,
    ];
    let b = [0.1, -3.0, 1e-300, 7.0, f64::INFINITY, -0.0];
    let (na, nb) = (a.len(), b.len());
    for mode in MODES {
        let x = Tensor::from_vec(a.to_vec(), [na], &dev);
        type Round = (&'static str, fn(&Tensor) -> Tensor, fn(f64) -> f64);
        let rounding: [Round; 5] = [
            ("floor", |t| t.floor(), f64::floor),
            ("ceil", |t| t.ceil(), f64::ceil),
            ("round", |t| t.round(), f64::round_ties_even),
            ("trunc", |t| t.trunc(), f64::trunc),
            (
                "sign",
                |t| t.sign(),
                |v| {
                    if v.is_nan() {
                        v
                    } else if v == 0.0 {
                        0.0
                    } else {
                        v.signum()
                    }
                },
            ),
        ];
        for (name, op, f) in rounding {
            let y = op(&x);
            y.realize_with(mode).unwrap();
            assert_eq!(y.dtype(), F64);
            for (g, v) in y.to_vec::<f64>().unwrap().iter().zip(a) {
                let w = f(v);
                assert!(
                    (g.is_nan() && w.is_nan()) || *g == w,
                    "{name}({v}) = {g}, want {w} [{mode:?}]"
                );
            }
        }
        // fmod is exact: Rust's `%` on f64 is C's fmod.
        let x = Tensor::from_vec(a.to_vec(), [na, 1], &dev);
        let y = Tensor::from_vec(b.to_vec(), [1, nb], &dev);
        let r = x.fmod(&y);
        r.realize_with(mode).unwrap();
        for (p, g) in r.to_vec::<f64>().unwrap().iter().enumerate() {
            let w = a[p / nb] % b[p % nb];
            assert!(
                (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
                "fmod({}, {}) = {g}, want {w} [{mode:?}]",
                a[p / nb],
                b[p % nb]
            );
        }
        // floor_divide and remainder agree with the quotient identity
        // where it is exact: x = q * y + r for small integers.
        let xi = Tensor::from_vec(vec![7.0f64, -7.0, 7.0, -7.0], [4], &dev);
        let yi = Tensor::from_vec(vec![2.0f64, 2.0, -2.0, -2.0], [4], &dev);
        assert_eq!(
            xi.floor_divide(&yi).to_vec::<f64>().unwrap(),
            vec![3.0, -4.0, -4.0, 3.0]
        );
        assert_eq!(
            xi.remainder(&yi).to_vec::<f64>().unwrap(),
            vec![1.0, 1.0, -1.0, -1.0]
        );
    }
}

/// `arange` keeps its values exactly (start, stop and step are floats,
/// any dtype): integral ranges whose every value the dtype holds exactly
/// are a lazy index computed from the loop coordinates (no memory read;
/// `arange(0, n)` in a mask is then visible to the planner), others are
/// generated as before (fractions, values past a half type's exact
/// integers or an `I32`, `-0.0`).
#[test]
fn arange_is_lazy_where_exact() {
    let dev = test_device();
    let big = 2_147_483_640.0;
    // (start, end, step, lazy for every dtype where in range)
    let cases: [(f64, f64, f64); 9] = [
        (0.0, 5.0, 1.0),
        (5.0, -3.0, -2.0),
        (-3.0, 40.0, 7.0),
        (2040.0, 2060.0, 3.0),
        (250.0, 262.0, 1.0),
        (0.5, 3.0, 0.5),
        (-0.0, -4.0, -1.0),
        (big, big + 12.0, 1.0),
        (16_777_210.0, 16_777_222.0, 1.0),
    ];
    let all = [Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64];
    for (start, end, step) in cases {
        let n = ((end - start) / step).ceil().max(0.0) as usize;
        let exact: Vec<f64> = (0..n).map(|i| start + i as f64 * step).collect();
        for dt in all {
            // Integer dtypes only where every value fits (the conversion
            // of out-of-range values is not what this test is about).
            let fits = exact.iter().all(|v| {
                !dt.is_int() || (v.fract() == 0.0 && *v >= dt.min_value() && *v <= dt.max_value())
            });
            if dt == Bool || !fits {
                continue;
            }
            let t = Tensor::arange(start, end, step, dt, &dev);
            let want = make(&exact, &[n], dt).0.to_vec::<f64>().unwrap();
            for mode in MODES {
                let got = t.realize_with(mode).unwrap().to_vec::<f64>().unwrap();
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "arange({start}, {end}, {step}) {dt:?} {mode:?}"
                );
            }
            let integral = start.fract() == 0.0
                && step.fract() == 0.0
                && !(start == 0.0 && start.is_sign_negative());
            let limit = match dt {
                F16 => 2048.0,
                BF16 => 256.0,
                F32 => 16_777_216.0,
                _ => i32::MAX as f64,
            };
            let lazy = integral && exact.iter().all(|v| v.abs() <= limit);
            let read = (Tensor::arange(start, end, step, dt, &dev) + 0.0)
                .schedule(Fusion::On)
                .bytes_read();
            assert_eq!(
                read == 0,
                lazy,
                "arange({start}, {end}, {step}) {dt:?} reads {read} bytes"
            );
        }
    }
}
