//! Elementwise ops (unary, binary, comparisons, where, cast) against host
//! references, on every layout, under both fusion modes.

mod common;

use common::*;
use smelt::{where_, DType, Tensor};

type Un = fn(&Tensor) -> Tensor;
type Bin = fn(&Tensor, &Tensor) -> Tensor;
/// (name, op, reference, input range).
type UnaryCase = (&'static str, Un, fn(f64) -> f64, (f64, f64));

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn unary_cases() -> Vec<UnaryCase> {
    vec![
        ("neg", Tensor::neg, |x| -x, (-3.0, 3.0)),
        ("abs", Tensor::abs, f64::abs, (-3.0, 3.0)),
        ("exp", Tensor::exp, f64::exp, (-3.0, 3.0)),
        ("exp2", Tensor::exp2, f64::exp2, (-3.0, 3.0)),
        ("log", Tensor::log, f64::ln, (0.05, 5.0)),
        ("log2", Tensor::log2, f64::log2, (0.05, 5.0)),
        ("sqrt", Tensor::sqrt, f64::sqrt, (0.0, 5.0)),
        ("rsqrt", Tensor::rsqrt, |x| 1.0 / x.sqrt(), (0.05, 5.0)),
        ("recip", Tensor::recip, |x| 1.0 / x, (-3.0, 3.0)),
        ("sin", Tensor::sin, f64::sin, (-4.0, 4.0)),
        ("cos", Tensor::cos, f64::cos, (-4.0, 4.0)),
        ("tanh", Tensor::tanh, f64::tanh, (-3.0, 3.0)),
        ("sigmoid", Tensor::sigmoid, sigmoid, (-6.0, 6.0)),
        (
            "relu",
            Tensor::relu,
            |x| if x > 0.0 { x } else { 0.0 },
            (-3.0, 3.0),
        ),
        (
            "gelu",
            Tensor::gelu,
            |x| 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
            (-4.0, 4.0),
        ),
        (
            "gelu_tanh",
            Tensor::gelu_tanh,
            |x| 0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)).tanh()),
            (-4.0, 4.0),
        ),
        ("silu", Tensor::silu, |x| x * sigmoid(x), (-4.0, 4.0)),
        ("square", Tensor::square, |x| x * x, (-3.0, 3.0)),
    ]
}

/// (name, op, reference, lhs range, rhs range).
type BinaryCase = (
    &'static str,
    Bin,
    fn(f64, f64) -> f64,
    (f64, f64),
    (f64, f64),
);

fn binary_cases() -> Vec<BinaryCase> {
    vec![
        ("add", |a, b| a + b, |a, b| a + b, (-3.0, 3.0), (-3.0, 3.0)),
        ("sub", |a, b| a - b, |a, b| a - b, (-3.0, 3.0), (-3.0, 3.0)),
        ("mul", |a, b| a * b, |a, b| a * b, (-3.0, 3.0), (-3.0, 3.0)),
        ("div", |a, b| a / b, |a, b| a / b, (-3.0, 3.0), (0.5, 3.0)),
        ("pow", |a, b| a.pow(b), f64::powf, (0.1, 3.0), (-2.0, 2.0)),
        (
            "maximum",
            |a, b| a.maximum(b),
            nan_max,
            (-3.0, 3.0),
            (-3.0, 3.0),
        ),
        (
            "minimum",
            |a, b| a.minimum(b),
            nan_min,
            (-3.0, 3.0),
            (-3.0, 3.0),
        ),
        (
            "lt",
            |a, b| a.lt(b),
            |a, b| (a < b) as u8 as f64,
            (-2.0, 2.0),
            (-2.0, 2.0),
        ),
        (
            "le",
            |a, b| a.le(b),
            |a, b| (a <= b) as u8 as f64,
            (-2.0, 2.0),
            (-2.0, 2.0),
        ),
        (
            "gt",
            |a, b| a.gt(b),
            |a, b| (a > b) as u8 as f64,
            (-2.0, 2.0),
            (-2.0, 2.0),
        ),
        (
            "ge",
            |a, b| a.ge(b),
            |a, b| (a >= b) as u8 as f64,
            (-2.0, 2.0),
            (-2.0, 2.0),
        ),
        (
            "eq",
            |a, b| a.eq(b),
            |a, b| (a == b) as u8 as f64,
            (-2.0, 2.0),
            (-2.0, 2.0),
        ),
        (
            "ne",
            |a, b| a.ne(b),
            |a, b| (a != b) as u8 as f64,
            (-2.0, 2.0),
            (-2.0, 2.0),
        ),
        (
            "logical_and",
            |a, b| a.logical_and(b),
            |a, b| (a != 0.0 && b != 0.0) as u8 as f64,
            (-1.0, 2.0),
            (-1.0, 2.0),
        ),
        (
            "logical_or",
            |a, b| a.logical_or(b),
            |a, b| (a != 0.0 || b != 0.0) as u8 as f64,
            (-1.0, 2.0),
            (-1.0, 2.0),
        ),
    ]
}

fn is_comparison(name: &str) -> bool {
    matches!(
        name,
        "lt" | "le" | "gt" | "ge" | "eq" | "ne" | "logical_and" | "logical_or"
    )
}

/// Shapes every elementwise op is checked on: primes, size-1 axes, rank 0,
/// zero-size axes and rank 6.
const SHAPES: &[&[usize]] = &[
    &[5, 7],
    &[3, 1, 4],
    &[],
    &[13],
    &[0, 3],
    &[3, 0],
    &[2, 1, 3, 2, 1, 2],
];

#[test]
fn unary_f32_every_layout_and_shape() {
    for (name, op, f, (lo, hi)) in unary_cases() {
        for (si, shape) in SHAPES.iter().enumerate() {
            for layout in LAYOUTS {
                let inp = Input::new(layout, shape, DType::F32, lo, hi, si as u64);
                let want = inp.host().map(f);
                check_dt(
                    &format!("{name} {shape:?} {layout:?}"),
                    || op(&inp.tensor()),
                    DType::F32,
                    &want,
                    tol(DType::F32),
                );
            }
        }
    }
}

#[test]
fn unary_half_floats() {
    for dt in [DType::F16, DType::BF16] {
        for (name, op, f, (lo, hi)) in unary_cases() {
            for layout in [Layout::Contiguous, Layout::Strided, Layout::Flipped] {
                let inp = Input::new(layout, &[3, 5], dt, lo, hi, 7);
                let want = inp.host().map(f);
                check_dt(
                    &format!("{name} {dt} {layout:?}"),
                    || op(&inp.tensor()),
                    dt,
                    &want,
                    tol(dt),
                );
            }
        }
    }
}

#[test]
fn unary_on_integers_and_bools() {
    for dt in [DType::I32, DType::Bool] {
        for (name, op, f, _) in unary_cases() {
            let keeps_int = matches!(name, "neg" | "abs" | "relu" | "square");
            // Float math on integers computes in F32; the rest stays
            // integral (bools become I32 as there is no negative bool).
            let out = if keeps_int { DType::I32 } else { DType::F32 };
            let (lo, hi) = if matches!(name, "log" | "log2" | "sqrt" | "rsqrt") {
                (1.0, 9.0)
            } else {
                (-4.0, 5.0)
            };
            for layout in [Layout::Contiguous, Layout::Permuted, Layout::Padded] {
                let inp = Input::new(layout, &[4, 3], dt, lo, hi, 3);
                let want = inp.host().map(f);
                let t = if out == DType::I32 {
                    EXACT
                } else {
                    tol(DType::F32)
                };
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
fn logical_not_of_every_dtype() {
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool] {
        for layout in LAYOUTS {
            let inp = Input::new(layout, &[4, 5], dt, -1.0, 2.0, 11);
            let want = inp.host().map(|x| (x == 0.0) as u8 as f64);
            check_dt(
                &format!("logical_not {dt} {layout:?}"),
                || inp.tensor().logical_not(),
                DType::Bool,
                &want,
                EXACT,
            );
        }
    }
}

/// Pairs of broadcast-compatible shapes.
const PAIRS: &[(&[usize], &[usize])] = &[
    (&[5, 7], &[5, 7]),
    (&[3, 1, 5], &[4, 1]),
    (&[], &[2, 3]),
    (&[6, 1], &[1, 7]),
    (&[0, 3], &[1, 3]),
    (&[2, 1, 3, 1, 2, 3], &[3, 2, 1]),
];

#[test]
fn binary_f32_every_layout_and_broadcast() {
    for (name, op, f, (la, ha), (lb, hb)) in binary_cases() {
        let out = if is_comparison(name) {
            DType::Bool
        } else {
            DType::F32
        };
        for (pi, (sa, sb)) in PAIRS.iter().enumerate() {
            for (li, layout) in LAYOUTS.iter().enumerate() {
                let lb_ = LAYOUTS[(li + 1 + pi) % LAYOUTS.len()];
                let a = Input::new(*layout, sa, DType::F32, la, ha, 2 * pi as u64);
                let b = Input::new(lb_, sb, DType::F32, lb, hb, 2 * pi as u64 + 1);
                let want = a.host().zip(&b.host(), f);
                let what = format!("{name} {sa:?}{layout:?} with {sb:?}{lb_:?}");
                check_dt(
                    &what,
                    || op(&a.tensor(), &b.tensor()),
                    out,
                    &want,
                    tol(DType::F32),
                );
                // And with the operands swapped (broadcast on the other side).
                let want = b.host().zip(&a.host(), f);
                if name != "pow" && name != "div" {
                    check_dt(
                        &format!("{what} swapped"),
                        || op(&b.tensor(), &a.tensor()),
                        out,
                        &want,
                        tol(DType::F32),
                    );
                }
            }
        }
    }
}

#[test]
fn binary_same_tensor_both_sides() {
    // One input read through two different views in one graph.
    let inp = Input::new(Layout::Contiguous, &[6, 6], DType::F32, -2.0, 2.0, 5);
    let h = inp.host();
    let want = h.zip(&h.permute(&[1, 0]), |a, b| a * b - a);
    check(
        "x * x.t() - x",
        || {
            let x = inp.tensor();
            &x * x.t() - &x
        },
        &want,
        tol(DType::F32),
    );
    let want = h.zip(&h.flip(&[0, 1]), |a, b| a + b);
    check(
        "x + flip(x)",
        || {
            let x = inp.tensor();
            &x + x.flip(..)
        },
        &want,
        tol(DType::F32),
    );
}

#[test]
fn binary_half_and_integer_dtypes() {
    for dt in [DType::F16, DType::BF16, DType::I32] {
        for (name, op, f, (la, ha), (lb, hb)) in binary_cases() {
            let (la, ha, lb, hb) = match (dt, name) {
                // Integer powers with negative exponents truncate to 0 or
                // are undefined in PyTorch: keep the exponent non-negative.
                (DType::I32, "pow") => (0.0, 5.0, 0.0, 4.0),
                (DType::I32, "div") => (-9.0, 9.0, 1.0, 5.0),
                (DType::I32, _) => (-4.0, 5.0, -4.0, 5.0),
                _ => (la, ha, lb, hb),
            };
            let out = if is_comparison(name) {
                DType::Bool
            } else if name == "div" {
                dt.to_float()
            } else {
                dt
            };
            for layout in [Layout::Contiguous, Layout::Broadcast, Layout::Flipped] {
                let a = Input::new(layout, &[3, 4], dt, la, ha, 1);
                let b = Input::new(Layout::Permuted, &[4], dt, lb, hb, 2);
                let want = a.host().zip(&b.host(), f);
                let t = if dt == DType::I32 && name != "div" {
                    EXACT
                } else {
                    tol(out).times(2.0)
                };
                check_dt(
                    &format!("{name} {dt} {layout:?}"),
                    || op(&a.tensor(), &b.tensor()),
                    out,
                    &want,
                    t,
                );
            }
        }
    }
}

#[test]
fn scalar_operands_on_either_side() {
    let inp = Input::new(Layout::Strided, &[3, 4], DType::F32, 0.5, 3.0, 9);
    let h = inp.host();
    let f32t = tol(DType::F32);
    check("x + 2", || &inp.tensor() + 2.0, &h.map(|x| x + 2.0), f32t);
    check("x - 2", || inp.tensor() - 2.0f32, &h.map(|x| x - 2.0), f32t);
    check("x * 3i", || &inp.tensor() * 3, &h.map(|x| x * 3.0), f32t);
    check("x / 4", || &inp.tensor() / 4.0, &h.map(|x| x / 4.0), f32t);
    check("1 - x", || 1.0 - &inp.tensor(), &h.map(|x| 1.0 - x), f32t);
    check("2 / x", || 2.0 / inp.tensor(), &h.map(|x| 2.0 / x), f32t);
    check(
        "3 * x",
        || 3.0f32 * &inp.tensor(),
        &h.map(|x| 3.0 * x),
        f32t,
    );
    check("5 + x", || 5 + &inp.tensor(), &h.map(|x| 5.0 + x), f32t);
    check("-x", || -&inp.tensor(), &h.map(|x| -x), f32t);
    check("-(owned x)", || -inp.tensor(), &h.map(|x| -x), f32t);
    check(
        "owned ops",
        || {
            let x = inp.tensor();
            (x.clone() + x.clone()) * x.clone() - &x / x.clone()
        },
        &h.map(|x| (x + x) * x - 1.0),
        f32t,
    );
    check(
        "x.pow(2)",
        || inp.tensor().pow(2.0),
        &h.map(|x| x * x),
        f32t,
    );
    check(
        "x.maximum(1.5)",
        || inp.tensor().maximum(1.5),
        &h.map(|x| x.max(1.5)),
        f32t,
    );
    check(
        "x.gt(1)",
        || inp.tensor().gt(1.0),
        &h.map(|x| (x > 1.0) as u8 as f64),
        EXACT,
    );
}

// ---------------------------------------------------------------------------
// dtype promotion (PyTorch rules, with I32 standing in for int64)

const ALL_DT: [DType; 5] = [DType::Bool, DType::I32, DType::F16, DType::BF16, DType::F32];

/// PyTorch's result type of two tensors, as a table.
fn torch_promote(a: DType, b: DType) -> DType {
    use DType::*;
    // Rows and columns in ALL_DT order: Bool, I32, F16, BF16, F32.
    const T: [[DType; 5]; 5] = [
        [Bool, I32, F16, BF16, F32],
        [I32, I32, F16, BF16, F32],
        [F16, F16, F16, F32, F32],
        [BF16, BF16, F32, BF16, F32],
        [F32, F32, F32, F32, F32],
    ];
    let i = |d| ALL_DT.iter().position(|x| *x == d).unwrap();
    T[i(a)][i(b)]
}

#[test]
fn promotion_of_every_dtype_pair() {
    for da in ALL_DT {
        for db in ALL_DT {
            let a = Input::new(Layout::Contiguous, &[2, 3], da, -2.0, 4.0, 1);
            let b = Input::new(Layout::Flipped, &[3], db, 1.0, 4.0, 2);
            let (ha, hb) = (a.host(), b.host());
            let p = torch_promote(da, db);
            let what = format!("{da} with {db}");
            // Two bools add and multiply as bools (or / and), as in PyTorch.
            let t = tol(p).times(2.0);
            check_dt(
                &format!("add {what}"),
                || &a.tensor() + &b.tensor(),
                p,
                &ha.zip(&hb, |x, y| p.round(x + y)),
                t,
            );
            check_dt(
                &format!("mul {what}"),
                || &a.tensor() * &b.tensor(),
                p,
                &ha.zip(&hb, |x, y| x * y),
                t,
            );
            // True division: integers and bools divide as F32.
            let fdt = p.to_float();
            check_dt(
                &format!("div {what}"),
                || &a.tensor() / &b.tensor(),
                fdt,
                &ha.zip(&hb, |x, y| x / y),
                tol(fdt).times(2.0),
            );
            check_dt(
                &format!("maximum {what}"),
                || a.tensor().maximum(b.tensor()),
                p,
                &ha.zip(&hb, nan_max),
                EXACT,
            );
            check_dt(
                &format!("le {what}"),
                || a.tensor().le(b.tensor()),
                DType::Bool,
                &ha.zip(&hb, |x, y| (x <= y) as u8 as f64),
                EXACT,
            );
            let c = Input::new(Layout::Broadcast, &[2, 3], DType::Bool, 0.0, 1.0, 3);
            let hc = c.host();
            check_dt(
                &format!("where {what}"),
                || where_(&c.tensor(), a.tensor(), b.tensor()),
                p,
                &NdArray::from_fn(&[2, 3], |i| {
                    if hc.at(i) != 0.0 {
                        ha.at(i)
                    } else {
                        hb.at_broadcast(i)
                    }
                }),
                EXACT,
            );
        }
    }
}

#[test]
fn promotion_with_scalars() {
    let dev = test_device();
    let cases: Vec<(DType, Tensor, DType)> = vec![
        // (tensor dtype, tensor op scalar, expected result dtype)
        (
            DType::F16,
            Tensor::ones([2], DType::F16, &dev) + 2.5,
            DType::F16,
        ),
        (
            DType::BF16,
            Tensor::ones([2], DType::BF16, &dev) * 2.5,
            DType::BF16,
        ),
        (
            DType::I32,
            Tensor::ones([2], DType::I32, &dev) + 2.5,
            DType::F32,
        ),
        (
            DType::I32,
            Tensor::ones([2], DType::I32, &dev) + 2,
            DType::I32,
        ),
        (
            DType::I32,
            Tensor::ones([2], DType::I32, &dev) / 2,
            DType::F32,
        ),
        (
            DType::I32,
            1.0 - Tensor::ones([2], DType::I32, &dev),
            DType::F32,
        ),
        (
            DType::Bool,
            Tensor::ones([2], DType::Bool, &dev) + 2,
            DType::I32,
        ),
        (
            DType::Bool,
            Tensor::ones([2], DType::Bool, &dev) * 2.5,
            DType::F32,
        ),
        (
            DType::F16,
            Tensor::ones([2], DType::F16, &dev) * 3,
            DType::F16,
        ),
        (
            DType::F32,
            Tensor::ones([2], DType::F32, &dev) + true,
            DType::F32,
        ),
        (
            DType::I32,
            Tensor::ones([2], DType::I32, &dev).gt(0.5),
            DType::Bool,
        ),
    ];
    for (i, (src, t, want)) in cases.into_iter().enumerate() {
        assert_eq!(t.dtype(), want, "case {i}: {src} with a scalar");
    }
    // where_: a scalar branch follows the other branch, not the condition.
    let c = Tensor::from_vec(vec![true, false], [2], &dev);
    let h = Tensor::ones([2], DType::F16, &dev);
    let i = Tensor::ones([2], DType::I32, &dev);
    assert_eq!(where_(&c, &h, 0.0).dtype(), DType::F16);
    assert_eq!(where_(&c, 0.0, &h).dtype(), DType::F16);
    assert_eq!(where_(&c, 1, &h).dtype(), DType::F16);
    assert_eq!(where_(&c, &i, 2).dtype(), DType::I32);
    assert_eq!(where_(&c, &i, 2.5).dtype(), DType::F32);
    assert_eq!(where_(&c, 1.0, 0.0).dtype(), DType::F32);
    assert_eq!(where_(&c, 1, 0).dtype(), DType::I32);
    assert_eq!(
        where_(&c, &h, -2.5).to_vec::<f64>().unwrap(),
        vec![1.0, -2.5]
    );

    let x = Tensor::from_vec(vec![1i32, 2, 3], [3], &dev);
    assert_eq!((&x + 0.5).to_vec::<f64>().unwrap(), vec![1.5, 2.5, 3.5]);
    assert_eq!((&x / 2).to_vec::<f64>().unwrap(), vec![0.5, 1.0, 1.5]);
    assert_eq!((&x * 2).to_vec::<i32>().unwrap(), vec![2, 4, 6]);
}

#[test]
fn integer_arithmetic_wraps_like_i32() {
    let dev = test_device();
    for mode in MODES {
        let a = Tensor::from_vec(vec![i32::MAX, 65536, -7, 7], [4], &dev);
        let b = Tensor::from_vec(vec![1i32, 65536, 2, -2], [4], &dev);
        let sum = &a + &b;
        let prod = &a * &b;
        assert_eq!(
            values(&sum, mode),
            vec![i32::MIN as f64, 131072.0, -5.0, 5.0]
        );
        assert_eq!(
            values(&prod, mode),
            vec![i32::MAX as f64, 0.0, -14.0, -14.0]
        );
    }
}

// ---------------------------------------------------------------------------
// where_ and cast

#[test]
fn where_every_layout_with_broadcast() {
    for (li, layout) in LAYOUTS.iter().enumerate() {
        let c = Input::new(*layout, &[4, 1, 5], DType::F32, -1.0, 1.0, li as u64);
        let a = Input::new(LAYOUTS[(li + 1) % 6], &[3, 1], DType::F32, -5.0, 5.0, 2);
        let b = Input::new(LAYOUTS[(li + 2) % 6], &[5], DType::F32, -5.0, 5.0, 3);
        let (hc, ha, hb) = (c.host(), a.host(), b.host());
        let want = NdArray::from_fn(&[4, 3, 5], |i| {
            if hc.at_broadcast(i) > 0.0 {
                ha.at_broadcast(i)
            } else {
                hb.at_broadcast(i)
            }
        });
        check(
            &format!("where {layout:?}"),
            || c.tensor().gt(0.0).where_(a.tensor(), b.tensor()),
            &want,
            EXACT,
        );
        // A non-bool condition means "nonzero".
        let want = NdArray::from_fn(&[4, 3, 5], |i| {
            if hc.at_broadcast(i) != 0.0 {
                ha.at_broadcast(i)
            } else {
                -1.0
            }
        });
        check(
            &format!("where nonzero {layout:?}"),
            || where_(&c.tensor(), a.tensor(), -1.0),
            &want,
            EXACT,
        );
    }
}

/// The reference cast: truncation toward zero for integers, nonzero for
/// bools, rounding to nearest for floats.
fn ref_cast(v: f64, to: DType) -> f64 {
    match to {
        DType::Bool => (v != 0.0) as u8 as f64,
        DType::I32 => v.trunc(),
        DType::F32 => v as f32 as f64,
        DType::F16 | DType::BF16 => to.round(v),
    }
}

#[test]
fn cast_between_every_dtype_pair() {
    let vals = [
        -2.7, -1.0, -0.5, 0.0, 0.5, 1.5, 2.9, 100.25, -300.75, 1e-3, 1.0,
    ];
    for from in ALL_DT {
        for to in ALL_DT {
            for layout in [Layout::Contiguous, Layout::Permuted, Layout::Padded] {
                let inp = Input::with_values(layout, &[3, 4], from, &vals);
                let want = inp.host().map(|v| ref_cast(v, to));
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
fn cast_overflow_to_half_is_infinite() {
    let (x, _) = make(&[70000.0, -70000.0, 65504.0], &[3], DType::F32);
    for mode in MODES {
        let y = x.cast(DType::F16);
        assert_eq!(
            values(&y, mode),
            vec![f64::INFINITY, f64::NEG_INFINITY, 65504.0]
        );
        // Squaring in F16 overflows too.
        let (h, _) = make(&[300.0, -2.0], &[2], DType::F16);
        assert_eq!(values(&h.square(), mode), vec![f64::INFINITY, 4.0]);
    }
}

// ---------------------------------------------------------------------------
// NaN and infinity

#[test]
fn nan_and_inf_through_unary_ops() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let xs = [inf, -inf, nan, 0.0, -1.0, 1.0];
    let cases: Vec<(&str, Un, Vec<f64>)> = vec![
        (
            "exp",
            Tensor::exp,
            vec![inf, 0.0, nan, 1.0, (-1f64).exp(), 1f64.exp()],
        ),
        ("log", Tensor::log, vec![inf, nan, nan, -inf, nan, 0.0]),
        ("sqrt", Tensor::sqrt, vec![inf, nan, nan, 0.0, nan, 1.0]),
        ("recip", Tensor::recip, vec![0.0, 0.0, nan, inf, -1.0, 1.0]),
        (
            "tanh",
            Tensor::tanh,
            vec![1.0, -1.0, nan, 0.0, (-1f64).tanh(), 1f64.tanh()],
        ),
        (
            "sigmoid",
            Tensor::sigmoid,
            vec![1.0, 0.0, nan, 0.5, sigmoid(-1.0), sigmoid(1.0)],
        ),
        ("relu", Tensor::relu, vec![inf, 0.0, nan, 0.0, 0.0, 1.0]),
        ("abs", Tensor::abs, vec![inf, inf, nan, 0.0, 1.0, 1.0]),
        ("neg", Tensor::neg, vec![-inf, inf, nan, 0.0, 1.0, -1.0]),
        ("isnan", Tensor::isnan, vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0]),
    ];
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for (name, op, want) in &cases {
            let want = NdArray::new(&[6], want.clone()).round(dt);
            let (x, _) = make(&xs, &[6], dt);
            let t = if *name == "isnan" { EXACT } else { tol(dt) };
            check(&format!("{name} {dt}"), || op(&x), &want, t);
        }
    }
}

#[test]
fn nan_propagates_through_maximum_and_minimum() {
    let nan = f64::NAN;
    let (a, _) = make(&[nan, 1.0, nan, 2.0, f64::INFINITY], &[5], DType::F32);
    let (b, _) = make(&[1.0, nan, nan, 3.0, nan], &[5], DType::F32);
    let want = NdArray::new(&[5], vec![nan, nan, nan, 3.0, nan]);
    check("maximum", || a.maximum(&b), &want, EXACT);
    let want = NdArray::new(&[5], vec![nan, nan, nan, 2.0, nan]);
    check("minimum", || a.minimum(&b), &want, EXACT);
    // Comparisons with NaN are false, except !=.
    let want = NdArray::new(&[5], vec![0.0, 0.0, 0.0, 0.0, 0.0]);
    check("eq nan", || a.eq(&b), &want, EXACT);
    let want_lt = NdArray::new(&[5], vec![0.0, 0.0, 0.0, 1.0, 0.0]);
    check("lt nan", || a.lt(&b), &want_lt, EXACT);
    let want = NdArray::new(&[5], vec![1.0, 1.0, 1.0, 1.0, 1.0]);
    check("ne nan", || a.ne(&b), &want, EXACT);
}

#[test]
fn inf_arithmetic() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let (a, _) = make(&[inf, inf, -inf, 1.0, 0.0, -1.0], &[6], DType::F32);
    let (b, _) = make(&[inf, -inf, -inf, 0.0, 0.0, 0.0], &[6], DType::F32);
    check(
        "a + b",
        || &a + &b,
        &NdArray::new(&[6], vec![inf, nan, -inf, 1.0, 0.0, -1.0]),
        EXACT,
    );
    check(
        "a / b",
        || &a / &b,
        &NdArray::new(&[6], vec![nan, nan, nan, inf, nan, -inf]),
        EXACT,
    );
    check(
        "a * 0",
        || &a * 0.0,
        &NdArray::new(&[6], vec![nan, nan, nan, 0.0, 0.0, 0.0]),
        EXACT,
    );
}
