//! Elementwise math (issue 12): rounding, sign, erf, log1p, expm1, the
//! exact and tanh GELUs, softplus, clamp, isinf/isfinite, atan2, fmod,
//! remainder, floor_divide, logaddexp, rpow and the bitwise ops, against
//! f64 or exact host references on every layout, with NaN, infinities,
//! signed zeros and halves-to-even among the values; the fused schedule of
//! a chain of them is one kernel, and GELU stays in the matmul epilogue.

mod common;

use common::*;
use smelt::KernelKind::{Elementwise, Matmul};
use smelt::{DType, Device, Fusion, Tensor};
use std::f64::consts::SQRT_2;

type Un = fn(&Tensor) -> Tensor;
type Bin = fn(&Tensor, &Tensor) -> Tensor;

/// Values every float op sees besides random ones.
const SPECIALS: [f64; 20] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    0.5,
    -0.5,
    1.5,
    2.5,
    -2.5,
    1e-30,
    -1e-7,
    1e-4,
    3.7,
    -3.7,
    100.0,
    -100.0,
    30.0,
    -1.0,
    7.0,
];

/// Shapes: primes, size-1 axes, rank 0, zero-size axes, a long row, rank 6.
const SHAPES: &[&[usize]] = &[
    &[5, 7],
    &[3, 1, 4],
    &[],
    &[13],
    &[0, 3],
    &[3, 0],
    &[2, 1031],
    &[2, 1, 3, 2, 1, 2],
];

/// `SPECIALS` followed by `n` random values in `[lo, hi)`.
fn values(lo: f64, hi: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    let mut v = SPECIALS.to_vec();
    v.extend((0..n).map(|_| rng.uniform(lo, hi)));
    v
}

fn sign(x: f64) -> f64 {
    if x.is_nan() {
        x
    } else if x == 0.0 {
        0.0
    } else {
        x.signum()
    }
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / SQRT_2))
}

fn gelu_tanh(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

fn softplus(x: f64) -> f64 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// (name, op, reference, exact on every backend, result keeps an integer
/// input's dtype).
type UnaryCase = (&'static str, Un, fn(f64) -> f64, bool, bool);

fn unary_cases() -> Vec<UnaryCase> {
    vec![
        ("floor", Tensor::floor, f64::floor, true, true),
        ("ceil", Tensor::ceil, f64::ceil, true, true),
        ("round", Tensor::round, f64::round_ties_even, true, true),
        ("trunc", Tensor::trunc, f64::trunc, true, true),
        ("sign", Tensor::sign, sign, true, true),
        ("erf", Tensor::erf, libm::erf, false, false),
        ("log1p", Tensor::log1p, f64::ln_1p, false, false),
        ("expm1", Tensor::expm1, f64::exp_m1, false, false),
        ("gelu", Tensor::gelu, gelu, false, false),
        ("gelu_tanh", Tensor::gelu_tanh, gelu_tanh, false, false),
        ("softplus", Tensor::softplus, softplus, false, false),
    ]
}

#[test]
fn unary_f32_every_layout_and_shape() {
    for (ci, (name, op, f, exact, _)) in unary_cases().into_iter().enumerate() {
        let vals = values(-6.0, 6.0, 41, ci as u64);
        for shape in SHAPES {
            for layout in LAYOUTS {
                let inp = Input::with_values(layout, shape, DType::F32, &vals);
                let want = inp.host().map(f).round(DType::F32);
                let t = if exact { EXACT } else { tol(DType::F32) };
                check_dt(
                    &format!("{name} {shape:?} {layout:?}"),
                    || op(&inp.tensor()),
                    DType::F32,
                    &want,
                    t,
                );
            }
        }
    }
}

#[test]
fn unary_tiny_arguments_keep_their_accuracy() {
    // Where log(1 + x) and exp(x) - 1 would lose every digit.
    let vals = [1e-8, -3e-8, 1e-20, 2e-6, -2e-6, 1e-38];
    let inp = Input::with_values(Layout::Contiguous, &[6], DType::F32, &vals);
    for (name, op, f) in [
        ("log1p", Tensor::log1p as Un, f64::ln_1p as fn(f64) -> f64),
        ("expm1", Tensor::expm1, f64::exp_m1),
        ("erf", Tensor::erf, libm::erf),
    ] {
        let want = inp.host().map(f).round(DType::F32);
        check(name, || op(&inp.tensor()), &want, Tol::new(1e-6, 0.0));
    }
}

#[test]
fn unary_half_floats() {
    for dt in [DType::F16, DType::BF16] {
        for (ci, (name, op, f, exact, _)) in unary_cases().into_iter().enumerate() {
            let vals = values(-6.0, 6.0, 17, ci as u64);
            for layout in [Layout::Contiguous, Layout::Strided, Layout::Flipped] {
                let inp = Input::with_values(layout, &[3, 13], dt, &vals);
                let want = inp.host().map(f).round(dt);
                let t = if exact { EXACT } else { tol(dt) };
                check_dt(
                    &format!("{name} {dt} {layout:?}"),
                    || op(&inp.tensor()),
                    dt,
                    &want,
                    t,
                );
            }
        }
    }
}

#[test]
fn unary_on_integers_and_bools() {
    let ints = [0.0, 1.0, -1.0, 7.0, -8.0, 2147483647.0, -2147483648.0, 12.0];
    for dt in [DType::I32, DType::Bool] {
        for (name, op, f, _, keeps) in unary_cases() {
            let out = if keeps { DType::I32 } else { DType::F32 };
            for layout in [Layout::Contiguous, Layout::Permuted, Layout::Padded] {
                let inp = Input::with_values(layout, &[4, 3], dt, &ints);
                let want = inp.host().map(f).round(out);
                let t = if keeps { EXACT } else { tol(DType::F32) };
                check_dt(
                    &format!("{name} {dt} {layout:?}"),
                    || op(&inp.tensor()),
                    out,
                    &want,
                    t,
                );
            }
        }
    }
}

#[test]
fn isinf_and_isfinite_of_every_dtype() {
    let vals = values(-3.0, 3.0, 5, 9);
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool] {
        for layout in LAYOUTS {
            let inp = Input::with_values(layout, &[4, 5], dt, &vals);
            let h = inp.host();
            let inf = h.map(|x| x.is_infinite() as u8 as f64);
            let fin = h.map(|x| x.is_finite() as u8 as f64);
            let what = format!("{dt} {layout:?}");
            check_dt(
                &format!("isinf {what}"),
                || inp.tensor().isinf(),
                DType::Bool,
                &inf,
                EXACT,
            );
            check_dt(
                &format!("isfinite {what}"),
                || inp.tensor().isfinite(),
                DType::Bool,
                &fin,
                EXACT,
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Binary float ops

/// Python's `//` on floats: the floor of the exact quotient (the inputs'
/// quotients here stay far below 2^24, where it is what PyTorch computes).
fn floor_divide(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    if a.is_nan() || b.is_nan() || a.is_infinite() {
        return f64::NAN;
    }
    if b.is_infinite() {
        return if a == 0.0 || (a < 0.0) == (b < 0.0) {
            0.0
        } else {
            -1.0
        };
    }
    (a / b).floor()
}

/// Python's `%` on floats.
fn remainder(a: f64, b: f64) -> f64 {
    let m = a % b;
    if m != 0.0 && (m < 0.0) != (b < 0.0) {
        m + b
    } else {
        m
    }
}

fn logaddexp(a: f64, b: f64) -> f64 {
    if a == b {
        return a + std::f64::consts::LN_2;
    }
    let m = nan_max(a, b);
    m + (-(a - b).abs()).exp().ln_1p()
}

/// (name, op, reference, exact).
type BinaryCase = (&'static str, Bin, fn(f64, f64) -> f64, bool);

fn binary_cases() -> Vec<BinaryCase> {
    vec![
        ("atan2", |a, b| a.atan2(b), f64::atan2, false),
        ("fmod", |a, b| a.fmod(b), |a, b| a % b, true),
        ("remainder", |a, b| a.remainder(b), remainder, false),
        ("floor_divide", |a, b| a.floor_divide(b), floor_divide, true),
        ("logaddexp", |a, b| a.logaddexp(b), logaddexp, false),
    ]
}

/// Pairs of broadcast-compatible shapes.
const PAIRS: &[(&[usize], &[usize])] = &[
    (&[5, 7], &[5, 7]),
    (&[3, 1, 5], &[4, 1]),
    (&[], &[2, 3]),
    (&[6, 1], &[1, 7]),
    (&[0, 3], &[1, 3]),
    (&[2, 1031], &[1031]),
    (&[2, 1, 3, 1, 2, 3], &[3, 2, 1]),
];

#[test]
fn binary_f32_every_layout_and_broadcast() {
    for (ci, (name, op, f, exact)) in binary_cases().into_iter().enumerate() {
        let va = values(-9.0, 9.0, 23, 2 * ci as u64);
        let vb = values(-4.0, 4.0, 29, 2 * ci as u64 + 1);
        let t = if exact { EXACT } else { tol(DType::F32) };
        for (pi, (sa, sb)) in PAIRS.iter().enumerate() {
            for (li, layout) in LAYOUTS.iter().enumerate() {
                let lb = LAYOUTS[(li + 1 + pi) % LAYOUTS.len()];
                let a = Input::with_values(*layout, sa, DType::F32, &va);
                let b = Input::with_values(lb, sb, DType::F32, &vb);
                let want = a.host().zip(&b.host(), f).round(DType::F32);
                let what = format!("{name} {sa:?}{layout:?} with {sb:?}{lb:?}");
                check_dt(&what, || op(&a.tensor(), &b.tensor()), DType::F32, &want, t);
                let want = b.host().zip(&a.host(), f).round(DType::F32);
                check_dt(
                    &format!("{what} swapped"),
                    || op(&b.tensor(), &a.tensor()),
                    DType::F32,
                    &want,
                    t,
                );
            }
        }
    }
}

#[test]
fn binary_specials_against_each_other() {
    // Every pair of special values (zeros, infinities, NaN) in one tensor.
    let n = SPECIALS.len();
    let a = Input::with_values(Layout::Contiguous, &[n, 1], DType::F32, &SPECIALS);
    let b = Input::with_values(Layout::Contiguous, &[1, n], DType::F32, &SPECIALS);
    for (name, op, f, exact) in binary_cases() {
        let want = a.host().zip(&b.host(), f).round(DType::F32);
        let t = if exact { EXACT } else { tol(DType::F32) };
        check(name, || op(&a.tensor(), &b.tensor()), &want, t);
    }
    // atan2's signed zeros decide between 0 and pi.
    let y = Tensor::from_vec(vec![0.0f32, -0.0, 0.0, -0.0], [4], &test_device());
    let x = Tensor::from_vec(vec![0.0f32, 0.0, -0.0, -0.0], [4], &test_device());
    let got = y.atan2(&x).to_vec::<f32>().unwrap();
    let pi = std::f32::consts::PI;
    assert_eq!(got, vec![0.0, -0.0, pi, -pi]);
    assert!(got[1].is_sign_negative());
}

#[test]
fn binary_half_floats() {
    for dt in [DType::F16, DType::BF16] {
        for (ci, (name, op, f, exact)) in binary_cases().into_iter().enumerate() {
            let va = values(-9.0, 9.0, 11, 3 * ci as u64);
            let vb = values(-4.0, 4.0, 13, 3 * ci as u64 + 1);
            let a = Input::with_values(Layout::Strided, &[3, 11], dt, &va);
            let b = Input::with_values(Layout::Flipped, &[3, 11], dt, &vb);
            let want = a.host().zip(&b.host(), f).round(dt);
            let t = if exact { EXACT } else { tol(dt) };
            check_dt(
                &format!("{name} {dt}"),
                || op(&a.tensor(), &b.tensor()),
                dt,
                &want,
                t,
            );
        }
    }
}

#[test]
fn fmod_is_exact_across_exponents() {
    // Huge dividends and tiny divisors, subnormals: exact results.
    let a = [1e38, -3e37, 1.5e-39, 7.0, 16777217.0, 1e20, -1e-30, 3.4e38];
    let b = [3.0, 1e-38, 1e-45, 1e-3, 3.0, 1.7e-38, 7e-45, -2.5];
    let (ta, ha) = make(&a, &[8], DType::F32);
    let (tb, hb) = make(&b, &[8], DType::F32);
    let want = ha.zip(&hb, |x, y| x % y);
    check("fmod exponents", || ta.fmod(&tb), &want, EXACT);
    let want = ha.zip(&hb, remainder).round(DType::F32);
    check("remainder exponents", || ta.remainder(&tb), &want, EXACT);
}

// ---------------------------------------------------------------------------
// Integers and bools

/// Python's integer `//` (the floor of the quotient, exact in f64 for
/// i32 operands), wrapped to i32; 0 for a zero divisor.
fn int_floor_div(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return 0.0;
    }
    (a / b).floor() as i64 as i32 as f64
}

/// Python's integer `%`: `a - b * (a // b)`; 0 for a zero divisor.
fn int_remainder(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return 0.0;
    }
    let q = (a / b).floor() as i64;
    (a as i64 - b as i64 * q) as f64
}

fn int_fmod(a: f64, b: f64) -> f64 {
    let (a, b) = (a as i64, b as i64);
    if b == 0 {
        0.0
    } else {
        (a % b) as f64
    }
}

fn shl(a: f64, b: f64) -> f64 {
    if !(0.0..32.0).contains(&b) {
        0.0
    } else {
        ((a as i32 as u32) << b as u32) as i32 as f64
    }
}

fn shr(a: f64, b: f64) -> f64 {
    let b = if (0.0..32.0).contains(&b) { b } else { 31.0 };
    ((a as i32) >> b as u32) as f64
}

fn int_binary_cases() -> Vec<BinaryCase> {
    vec![
        (
            "floor_divide",
            |a, b| a.floor_divide(b),
            int_floor_div,
            true,
        ),
        ("remainder", |a, b| a.remainder(b), int_remainder, true),
        ("fmod", |a, b| a.fmod(b), int_fmod, true),
        (
            "bitwise_and",
            |a, b| a & b,
            |a, b| ((a as i32) & (b as i32)) as f64,
            true,
        ),
        (
            "bitwise_or",
            |a, b| a | b,
            |a, b| ((a as i32) | (b as i32)) as f64,
            true,
        ),
        (
            "bitwise_xor",
            |a, b| a ^ b,
            |a, b| ((a as i32) ^ (b as i32)) as f64,
            true,
        ),
        ("<<", |a, b| a << b, shl, true),
        (">>", |a, b| a >> b, shr, true),
    ]
}

#[test]
fn integer_ops_are_exact_with_their_edges() {
    let min = i32::MIN as f64;
    let max = i32::MAX as f64;
    let va = [
        7.0, -7.0, 6.0, -6.0, min, max, 0.0, 1.0, -1.0, 12345.0, -99.0,
    ];
    let vb = [
        2.0, -2.0, 0.0, -1.0, 3.0, -3.0, 31.0, 32.0, 40.0, -5.0, 1.0, 7.0, 13.0,
    ];
    for (name, op, f, _) in int_binary_cases() {
        for (la, lb) in [
            (Layout::Contiguous, Layout::Contiguous),
            (Layout::Permuted, Layout::Flipped),
            (Layout::Strided, Layout::Padded),
            (Layout::Broadcast, Layout::Permuted),
        ] {
            let a = Input::with_values(la, &[11, 13], DType::I32, &va);
            let b = Input::with_values(lb, &[11, 13], DType::I32, &vb);
            let want = a.host().zip(&b.host(), f);
            check_dt(
                &format!("{name} i32 {la:?} {lb:?}"),
                || op(&a.tensor(), &b.tensor()),
                DType::I32,
                &want,
                EXACT,
            );
        }
    }
}

#[test]
fn integer_unary_bitwise_not_and_scalars() {
    let va = [0.0, -1.0, 5.0, i32::MIN as f64, i32::MAX as f64];
    for layout in LAYOUTS {
        let a = Input::with_values(layout, &[3, 5], DType::I32, &va);
        let want = a.host().map(|x| !(x as i32) as f64);
        check_dt(
            &format!("!x {layout:?}"),
            || !a.tensor(),
            DType::I32,
            &want,
            EXACT,
        );
        let want = a.host().map(|x| shl(1.0, x.rem_euclid(40.0)));
        check(
            &format!("1 << (x % 40) {layout:?}"),
            || 1 << a.tensor().remainder(40),
            &want,
            EXACT,
        );
        let want = a.host().map(|x| int_floor_div(x, 3.0));
        check(
            &format!("x // 3 {layout:?}"),
            || a.tensor().floor_divide(3),
            &want,
            EXACT,
        );
    }
}

#[test]
fn bools_are_logical() {
    let a = Input::new(Layout::Permuted, &[6, 7], DType::Bool, 0.0, 1.0, 4);
    let b = Input::new(Layout::Flipped, &[6, 7], DType::Bool, 0.0, 1.0, 5);
    let (ha, hb) = (a.host(), b.host());
    type BoolCase = (&'static str, Bin, fn(bool, bool) -> bool);
    let cases: [BoolCase; 3] = [
        ("&", |x, y| x & y, |x, y| x & y),
        ("|", |x, y| x | y, |x, y| x | y),
        ("^", |x, y| x ^ y, |x, y| x ^ y),
    ];
    for (name, op, f) in cases {
        let want = ha.zip(&hb, |x, y| f(x != 0.0, y != 0.0) as u8 as f64);
        check_dt(
            &format!("bool {name}"),
            || op(&a.tensor(), &b.tensor()),
            DType::Bool,
            &want,
            EXACT,
        );
    }
    check_dt(
        "!bool",
        || !a.tensor(),
        DType::Bool,
        &ha.map(|x| (x == 0.0) as u8 as f64),
        EXACT,
    );
    // A bool shifted is an integer, as is a bool and an integer.
    check_dt(
        "bool << 2",
        || a.tensor() << 2,
        DType::I32,
        &ha.map(|x| x * 4.0),
        EXACT,
    );
    check_dt("bool & 3", || a.tensor() & 3, DType::I32, &ha, EXACT);
}

// ---------------------------------------------------------------------------
// Composites with scalars: clamp, softplus's parameters, rpow

#[test]
fn clamp_follows_pytorch() {
    let vals = values(-5.0, 5.0, 20, 21);
    for layout in LAYOUTS {
        let x = Input::with_values(layout, &[4, 10], DType::F32, &vals);
        let h = x.host();
        let clamp = |v: f64, lo: f64, hi: f64| nan_min(nan_max(v, lo), hi);
        let want = h.map(|v| clamp(v, -1.0, 2.0));
        check(
            &format!("clamp {layout:?}"),
            || x.tensor().clamp(-1.0, 2.0),
            &want,
            EXACT,
        );
        // min > max gives max everywhere (NaN stays).
        let want = h.map(|v| clamp(v, 3.0, 1.0));
        check(
            &format!("clamp reversed {layout:?}"),
            || x.tensor().clamp(3.0, 1.0),
            &want,
            EXACT,
        );
        let want = h.map(|v| nan_max(v, 0.5));
        check(
            &format!("clamp_min {layout:?}"),
            || x.tensor().clamp_min(0.5),
            &want,
            EXACT,
        );
        let want = h.map(|v| nan_min(v, 0.5));
        check(
            &format!("clamp_max {layout:?}"),
            || x.tensor().clamp_max(0.5),
            &want,
            EXACT,
        );
    }
    // Tensor bounds broadcast, NaN in a bound propagates.
    let x = Input::with_values(
        Layout::Strided,
        &[3, 4],
        DType::F32,
        &values(-5.0, 5.0, 6, 3),
    );
    let lo = Input::with_values(
        Layout::Contiguous,
        &[4],
        DType::F32,
        &[-1.0, f64::NAN, 0.0, -3.0],
    );
    let hi = Input::with_values(Layout::Contiguous, &[3, 1], DType::F32, &[1.0, 2.0, 4.0]);
    let want = x.host().zip(&lo.host(), nan_max).zip(&hi.host(), nan_min);
    check(
        "clamp by tensors",
        || x.tensor().clamp(lo.tensor(), hi.tensor()),
        &want,
        EXACT,
    );
    // Integer tensors: integer bounds keep I32, float bounds make F32.
    let xi = Input::with_values(
        Layout::Flipped,
        &[7],
        DType::I32,
        &[-9.0, -2.0, 0.0, 3.0, 8.0, 1.0, 5.0],
    );
    let want = xi.host().map(|v| v.clamp(-2.0, 4.0));
    check_dt(
        "clamp i32",
        || xi.tensor().clamp(-2, 4),
        DType::I32,
        &want,
        EXACT,
    );
    let want = xi.host().map(|v| v.clamp(-2.5, 4.5));
    check_dt(
        "clamp i32 by floats",
        || xi.tensor().clamp(-2.5, 4.5),
        DType::F32,
        &want,
        EXACT,
    );
}

#[test]
fn softplus_parameters_and_rpow() {
    let vals = values(-30.0, 30.0, 30, 33);
    let x = Input::with_values(Layout::Permuted, &[5, 10], DType::F32, &vals);
    let want = x.host().map(|v| {
        if 2.0 * v > 5.0 {
            v
        } else {
            (2.0 * v).exp().ln_1p() / 2.0
        }
    });
    check(
        "softplus_with(2, 5)",
        || x.tensor().softplus_with(2.0, 5.0),
        &want.round(DType::F32),
        tol(DType::F32),
    );
    let e = Input::with_values(
        Layout::Flipped,
        &[9],
        DType::F32,
        &[
            -3.0,
            -0.5,
            0.0,
            0.5,
            1.0,
            3.5,
            10.0,
            f64::NAN,
            f64::NEG_INFINITY,
        ],
    );
    let want = e.host().map(|v| 2f64.powf(v)).round(DType::F32);
    check_dt(
        "2 ** x",
        || e.tensor().rpow(2.0),
        DType::F32,
        &want,
        tol(DType::F32),
    );
    let ei = Input::with_values(
        Layout::Contiguous,
        &[6],
        DType::I32,
        &[0.0, 1.0, 2.0, 5.0, 10.0, 31.0],
    );
    let want = ei.host().map(|v| 3i32.wrapping_pow(v as u32) as f64);
    check_dt("3 ** i", || ei.tensor().rpow(3), DType::I32, &want, EXACT);
    let want = ei.host().map(|v| 0.5f64.powf(v)).round(DType::F32);
    check_dt(
        "0.5 ** i",
        || ei.tensor().rpow(0.5),
        DType::F32,
        &want,
        tol(DType::F32),
    );
}

// ---------------------------------------------------------------------------
// Fusion

#[test]
fn a_chain_of_these_ops_is_one_kernel() {
    let dev = Device::Cpu;
    let x = Tensor::randn([64, 33], DType::F32, 1, &dev);
    let y = Tensor::randn([33], DType::F32, 2, &dev);
    let i = Tensor::arange(0.0, 33.0, 1.0, DType::I32, &dev);
    let chain = (x.erf().log1p().expm1().clamp(-1.0, 1.0).floor()
        + x.atan2(&y).fmod(0.7).remainder(&y)
        + x.softplus().logaddexp(&y).floor_divide(0.3)
        + x.gelu()
        + x.gelu_tanh().round().sign().trunc().ceil()
        + (&i << 2 ^ &i).rpow(1.01))
    .isfinite();
    for t in [x.clone(), y.clone(), i.clone()] {
        t.realize().unwrap();
    }
    let s = chain.schedule(Fusion::On);
    assert_eq!(s.items.len(), 1, "{s}");
    assert_eq!(s.items[0].kernel.kind, Elementwise, "{s}");
}

#[test]
fn both_gelus_stay_in_the_matmul_epilogue() {
    let dev = test_device();
    let (m, n, k) = (12, 10, 20);
    let a = Tensor::rand([m, k], DType::F32, 3, &dev);
    let b = Tensor::rand([k, n], DType::F32, 4, &dev);
    let bias = Tensor::rand([n], DType::F32, 5, &dev);
    for t in [&a, &b, &bias] {
        t.realize().unwrap();
    }
    let ha = NdArray::new(&[m, k], a.to_vec::<f64>().unwrap());
    let hb = NdArray::new(&[k, n], b.to_vec::<f64>().unwrap());
    let hbias = NdArray::new(&[n], bias.to_vec::<f64>().unwrap());
    let mm = ha.matmul(&hb).zip(&hbias, |p, q| p + q);
    for (name, op, f) in [
        ("gelu", Tensor::gelu as Un, gelu as fn(f64) -> f64),
        ("gelu_tanh", Tensor::gelu_tanh, gelu_tanh),
    ] {
        let build = || op(&(a.matmul(&b) + &bias));
        let s = build().schedule(Fusion::On);
        assert_eq!(s.items.len(), 1, "{name}: {s}");
        assert_eq!(s.items[0].kernel.kind, Matmul, "{name}: {s}");
        check(name, build, &mm.map(f), Tol::new(1e-5, 1e-5));
    }
}

// ---------------------------------------------------------------------------
// Errors

fn panic_message(f: impl FnOnce() -> Tensor) -> String {
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("no panic");
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn bad_input_panics_naming_the_op() {
    let dev = Device::Cpu;
    let f = Tensor::zeros([2, 3], DType::F32, &dev);
    let i = Tensor::zeros([2, 3], DType::I32, &dev);
    let msg = panic_message(|| &f & &i);
    assert!(
        msg.contains("bitwise_and") && msg.contains("float32"),
        "{msg}"
    );
    let msg = panic_message(|| !&f);
    assert!(
        msg.contains("bitwise_not") && msg.contains("float32"),
        "{msg}"
    );
    let msg = panic_message(|| i.bitwise_left_shift(1.5));
    assert!(msg.contains("bitwise_left_shift"), "{msg}");
    let b = Tensor::zeros([4], DType::Bool, &dev);
    let msg = panic_message(|| Tensor::zeros([3], DType::Bool, &dev) ^ &b);
    assert!(
        msg.contains("bitwise_xor") && msg.contains("[3]") && msg.contains("[4]"),
        "{msg}"
    );
    let msg = panic_message(|| f.clamp(Tensor::zeros([4], DType::F32, &dev), 1.0));
    assert!(
        msg.contains("clamp") && msg.contains("[2, 3]") && msg.contains("[4]"),
        "{msg}"
    );
    let msg = panic_message(|| f.logaddexp(Tensor::zeros([5], DType::F32, &dev)));
    assert!(msg.contains("logaddexp"), "{msg}");
}

/// `v` wrapped to the integer dtype `dt` (two's complement low bits).
fn wrap_to(dt: DType, v: i128) -> i64 {
    match dt {
        DType::U8 => v as u8 as i64,
        DType::I8 => v as i8 as i64,
        DType::I16 => v as i16 as i64,
        DType::I32 => v as i32 as i64,
        _ => v as i64,
    }
}

/// Exact host references for the integer-only binary ops at `dt`'s width,
/// written independently of smelt's `int_ops`: Python's `//` and `%`,
/// C's `fmod`, 0 for a zero divisor, shifts past the width to 0 or the
/// sign fill.
fn int_reference(name: &str, dt: DType, a: i64, b: i64) -> i64 {
    let bits = 8 * dt.size() as i64;
    let (x, y) = (a as i128, b as i128);
    let r = match name {
        "floor_divide" | "remainder" | "fmod" if b == 0 => 0,
        "floor_divide" => x.div_euclid(y) - i128::from(y < 0 && x.rem_euclid(y) != 0),
        "remainder" => x - y * (x.div_euclid(y) - i128::from(y < 0 && x.rem_euclid(y) != 0)),
        "fmod" => x % y,
        "bitwise_and" => x & y,
        "bitwise_or" => x | y,
        "bitwise_xor" => x ^ y,
        "<<" if b < 0 || b >= bits => 0,
        "<<" => x << b,
        ">>" if b < 0 || b >= bits => -i128::from(a < 0),
        ">>" => x >> b,
        _ => unreachable!("{name}"),
    };
    wrap_to(dt, r)
}

#[test]
fn integer_ops_on_every_width_with_their_edges() {
    let dev = test_device();
    let cases: [(DType, Vec<i64>, Vec<i64>); 5] = [
        (
            DType::U8,
            vec![0, 1, 7, 128, 200, 255],
            vec![0, 1, 2, 3, 7, 8, 9, 201, 255],
        ),
        (
            DType::I8,
            vec![0, 1, -1, 7, -7, -128, 127],
            vec![2, -2, 0, -1, 3, 7, 8, -5],
        ),
        (
            DType::I16,
            vec![0, 1, -1, 12345, -32768, 32767],
            vec![2, -2, 0, -1, 15, 16, 17, -7],
        ),
        (
            DType::I32,
            vec![0, -7, i32::MIN as i64, i32::MAX as i64],
            vec![2, -1, 0, 31, 32, -3],
        ),
        (
            DType::I64,
            vec![0, 1, -1, 7, -7, i64::MIN, i64::MAX, 1 << 40, -(1 << 53) - 1],
            vec![2, -2, 0, -1, 3, 31, 32, 63, 64, -5, (1 << 33) + 1, i64::MIN],
        ),
    ];
    for (dt, va, vb) in cases {
        let (na, nb) = (va.len(), vb.len());
        let a = Tensor::from_vec(va.clone(), [na, 1], &dev).cast(dt);
        let b = Tensor::from_vec(vb.clone(), [1, nb], &dev).cast(dt);
        for (name, op, _, _) in int_binary_cases() {
            for mode in MODES {
                let y = op(&a, &b);
                assert_eq!(y.dtype(), dt, "{name} {dt}");
                y.realize_with(mode).unwrap();
                let got = y.cast(DType::I64).to_vec::<i64>().unwrap();
                for (p, g) in got.iter().enumerate() {
                    let (x, z) = (va[p / nb], vb[p % nb]);
                    let want = int_reference(name, dt, x, z);
                    assert_eq!(*g, want, "{name} {dt}: {x} op {z} [{mode:?}]");
                }
            }
        }
        type Unary = (&'static str, fn(&Tensor) -> Tensor, fn(i128) -> i128);
        let unary: [Unary; 7] = [
            ("neg", |t| -t, |x| -x),
            ("abs", |t| t.abs(), |x| x.abs()),
            ("sign", |t| t.sign(), |x| x.signum()),
            ("bitwise_not", |t| !t, |x| !x),
            ("floor", |t| t.floor(), |x| x),
            ("trunc", |t| t.trunc(), |x| x),
            ("square", |t| t.square(), |x| x * x),
        ];
        for (name, op, f) in unary {
            let y = op(&a);
            assert_eq!(y.dtype(), dt, "{name} {dt}");
            let got = y.cast(DType::I64).to_vec::<i64>().unwrap();
            for (g, x) in got.iter().zip(&va) {
                assert_eq!(*g, wrap_to(dt, f(*x as i128)), "{name} {dt} of {x}");
            }
        }
    }
}

/// `F64` arguments that stress the GPU's own `f64` sequences: zeros,
/// subnormals, overflow edges of `exp`, piece ends of `erf`, the
/// Payne-Hanek range of `sin`/`cos` (2^27 and beyond, up to `f64::MAX`,
/// and the double closest to a multiple of pi/2), then random values of
/// every magnitude.
fn f64_edges(seed: u64) -> Vec<f64> {
    let mut v = vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        5e-324,
        1e-310,
        2.2250738585072014e-308,
        1e-300,
        1e-8,
        0.5,
        1.0 - 1e-16,
        1.0,
        1.0 + 2e-16,
        1.5,
        1.75,
        2.75,
        4.0,
        5.9,
        6.0,
        20.0,
        40.0,
        100.0,
        709.7,
        709.8,
        745.2,
        746.0,
        134_217_727.9,
        134_217_728.0,
        1e22,
        1e300,
        f64::MAX,
        6_381_956_970_095_103.0 * 2f64.powi(797),
        std::f64::consts::FRAC_PI_2,
        std::f64::consts::PI,
        1000.0 * std::f64::consts::FRAC_PI_2,
    ];
    // Both signs, and ±0.
    let neg: Vec<f64> = v[3..].iter().map(|x| -x).collect();
    v.extend(neg);
    v.extend([0.0, -0.0]);
    let mut rng = Rng::new(seed);
    for _ in 0..60 {
        v.push(rng.uniform(-8.0, 8.0));
        let e = rng.range(-60, 60) as i32;
        v.push(rng.uniform(-1.0, 1.0) * 2f64.powi(e));
    }
    v
}

/// `F64` to a few ulp: relative 1e-13, absolute 1e-300 (one subnormal ulp
/// is no relative error).
const F64_TOL: Tol = Tol {
    rel: 1e-13,
    abs: 1e-300,
};

/// (name, op, reference, tolerance).
type F64UnaryCase = (&'static str, Un, fn(f64) -> f64, Tol);

#[test]
fn f64_unary_math_on_every_path() {
    // The GELUs' formulas cancel for negative x (1 + erf near 0): every
    // backend is within about |x| ulp of 1 there, so an absolute 1e-13.
    let gelu_tol = Tol::new(1e-13, 1e-13);
    let cases: Vec<F64UnaryCase> = vec![
        ("exp", Tensor::exp, f64::exp, F64_TOL),
        ("exp2", Tensor::exp2, f64::exp2, F64_TOL),
        ("expm1", Tensor::expm1, f64::exp_m1, F64_TOL),
        ("log", Tensor::log, f64::ln, F64_TOL),
        ("log2", Tensor::log2, f64::log2, F64_TOL),
        ("log1p", Tensor::log1p, f64::ln_1p, F64_TOL),
        ("sin", Tensor::sin, f64::sin, F64_TOL),
        ("cos", Tensor::cos, f64::cos, F64_TOL),
        ("tanh", Tensor::tanh, f64::tanh, F64_TOL),
        ("erf", Tensor::erf, libm::erf, F64_TOL),
        (
            "sigmoid",
            Tensor::sigmoid,
            |x| 1.0 / (1.0 + (-x).exp()),
            F64_TOL,
        ),
        ("silu", Tensor::silu, |x| x / (1.0 + (-x).exp()), F64_TOL),
        ("gelu", Tensor::gelu, gelu, gelu_tol),
        ("gelu_tanh", Tensor::gelu_tanh, gelu_tanh, gelu_tol),
        ("softplus", Tensor::softplus, softplus, F64_TOL),
        (
            "round_tf32",
            Tensor::round_tf32,
            |x| smelt_codegen::ops::round_tf32(x as f32) as f64,
            EXACT,
        ),
    ];
    for (ci, (name, op, f, t)) in cases.into_iter().enumerate() {
        let vals = f64_edges(ci as u64);
        let n = vals.len();
        for (shape, layout) in [
            (&[n][..], Layout::Contiguous),
            (&[7, 13][..], Layout::Permuted),
            (&[2, 1031][..], Layout::Flipped),
            (&[3, 5][..], Layout::Padded),
            (&[0, 3][..], Layout::Strided),
            (&[][..], Layout::Contiguous),
        ] {
            let inp = Input::with_values(layout, shape, DType::F64, &vals);
            let want = inp.host().map(f);
            let what = format!("f64 {name} {shape:?} {layout:?}");
            check_dt(&what, || op(&inp.tensor()), DType::F64, &want, t);
        }
    }
}

/// (name, op, reference).
type F64BinaryCase = (&'static str, Bin, fn(f64, f64) -> f64);

#[test]
fn f64_binary_math_on_every_path() {
    let base = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        5e-324,
        0.5,
        -0.5,
        1.0,
        -1.0,
        2.0,
        -2.0,
        3.0,
        -3.0,
        0.3,
        -7.25,
        1e300,
        -1e-300,
        9_007_199_254_740_994.0,
    ];
    let n = base.len();
    let a = Input::with_values(Layout::Contiguous, &[n, 1], DType::F64, &base);
    let b = Input::with_values(Layout::Flipped, &[1, n], DType::F64, &base);
    let mut rng = Rng::new(17);
    let va: Vec<f64> = (0..200).map(|_| rng.uniform(0.0, 50.0)).collect();
    let vb: Vec<f64> = (0..200).map(|_| rng.uniform(-30.0, 30.0)).collect();
    let ra = Input::with_values(Layout::Permuted, &[8, 25], DType::F64, &va);
    let rb = Input::with_values(Layout::Contiguous, &[8, 25], DType::F64, &vb);
    let cases: [F64BinaryCase; 3] = [
        ("pow", |a, b| a.pow(b), f64::powf),
        ("atan2", |a, b| a.atan2(b), f64::atan2),
        ("logaddexp", |a, b| a.logaddexp(b), logaddexp),
    ];
    for (name, op, f) in cases {
        for (x, y, what) in [(&a, &b, "specials"), (&ra, &rb, "random")] {
            let want = x.host().zip(&y.host(), f);
            let what = format!("f64 {name} {what}");
            check_dt(
                &what,
                || op(&x.tensor(), &y.tensor()),
                DType::F64,
                &want,
                F64_TOL,
            );
        }
    }
}

#[test]
fn f64_math_keeps_signed_zeros() {
    let dev = test_device();
    let z = Tensor::from_vec(vec![0.0f64, -0.0], [2], &dev);
    let ops: [(&str, Un); 7] = [
        ("sin", Tensor::sin),
        ("tanh", Tensor::tanh),
        ("erf", Tensor::erf),
        ("expm1", Tensor::expm1),
        ("log1p", Tensor::log1p),
        ("gelu_tanh", Tensor::gelu_tanh),
        ("gelu", Tensor::gelu),
    ];
    for (name, op) in ops {
        let got = op(&z).to_vec::<f64>().unwrap();
        let host = [0.0f64, -0.0].map(|v| match name {
            "sin" => v.sin(),
            "tanh" => v.tanh(),
            "erf" => libm::erf(v),
            "expm1" => v.exp_m1(),
            "log1p" => v.ln_1p(),
            "gelu_tanh" => gelu_tanh(v),
            _ => gelu(v),
        });
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&host), "f64 {name} of ±0");
    }
    // pow and atan2 decide signs from signed zeros.
    let x = Tensor::from_vec(vec![-0.0f64, -0.0, 0.0, -0.0], [4], &dev);
    let y = Tensor::from_vec(vec![3.0f64, -3.0, -0.0, -0.0], [4], &dev);
    let got = x.pow(&y).to_vec::<f64>().unwrap();
    assert!(got[0] == 0.0 && got[0].is_sign_negative(), "{got:?}");
    assert_eq!(got[1], f64::NEG_INFINITY);
    let got = x.atan2(&y).to_vec::<f64>().unwrap();
    let pi = std::f64::consts::PI;
    let want = [
        (-0.0f64).atan2(3.0),
        (-0.0f64).atan2(-3.0),
        0.0f64.atan2(-0.0),
        -pi,
    ];
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got), bits(&want));
}
