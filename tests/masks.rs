//! `tril` and `triu` against a host reference on every layout and dtype,
//! batched, with diagonals inside and beyond the matrix, and the fusion
//! promise: the mask is computed from loop coordinates, never stored.

mod common;

use common::*;
use smelt::{DType, Fusion, Tensor};

/// The host triangle: element `[.., r, c]` kept where `keep(c - r)`.
fn host_triangle(x: &NdArray, keep: impl Fn(i64) -> bool) -> NdArray {
    let rank = x.ndim();
    NdArray::from_fn(&x.shape, |c| {
        let d = c[rank - 1] as i64 - c[rank - 2] as i64;
        if keep(d) {
            x.at(c)
        } else {
            0.0
        }
    })
}

/// Diagonal offsets around and beyond a `m x n` matrix.
fn offsets(m: usize, n: usize) -> Vec<isize> {
    let (m, n) = (m as isize, n as isize);
    let mut ks = vec![0, 1, -1, 2, -2, n - 1, n, n + 5, -(m - 1), -m, -m - 5];
    ks.extend([isize::MAX, isize::MIN]);
    ks.sort();
    ks.dedup();
    ks
}

#[test]
fn tril_and_triu_match_the_host_on_every_layout_and_dtype() {
    let vals = [
        1.5,
        -2.0,
        f64::NAN,
        0.0,
        3.25,
        f64::INFINITY,
        -7.0,
        f64::NEG_INFINITY,
    ];
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool] {
        for layout in LAYOUTS {
            for shape in [vec![5, 7], vec![2, 3, 4]] {
                let x = Input::with_values(layout, &shape, dt, &vals);
                let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
                for k in offsets(m, n) {
                    let want = host_triangle(&x.host(), |d| d <= k as i64);
                    let what = format!("tril({k}) {dt} {layout:?} {shape:?}");
                    check_dt(&what, || x.tensor().tril(k), dt, &want, EXACT);
                    let want = host_triangle(&x.host(), |d| d >= k as i64);
                    let what = format!("triu({k}) {dt} {layout:?} {shape:?}");
                    check_dt(&what, || x.tensor().triu(k), dt, &want, EXACT);
                }
            }
        }
    }
}

#[test]
fn sizes_zero_one_primes_and_long_rows() {
    let shapes: [&[usize]; 7] = [
        &[0, 4],
        &[3, 0],
        &[1, 1],
        &[13, 1],
        &[1, 17],
        &[4, 13, 11],
        &[3, 5000],
    ];
    for shape in shapes {
        let x = Input::new(Layout::Contiguous, shape, DType::F32, -3.0, 3.0, 9);
        for k in [-3, 0, 2] {
            let want = host_triangle(&x.host(), |d| d <= k);
            check(
                &format!("tril({k}) {shape:?}"),
                || x.tensor().tril(k as isize),
                &want,
                EXACT,
            );
            let want = host_triangle(&x.host(), |d| d >= k);
            check(
                &format!("triu({k}) {shape:?}"),
                || x.tensor().triu(k as isize),
                &want,
                EXACT,
            );
        }
    }
}

#[test]
fn tril_of_a_computed_value_and_its_sum_are_one_kernel_reading_x_once() {
    let (m, n) = (64, 48);
    let x = Input::new(Layout::Contiguous, &[m, n], DType::F32, -1.0, 1.0, 3);
    let t = x.tensor();
    t.realize().unwrap();
    let s = t.tril(0).sum(..).schedule(Fusion::On);
    assert_eq!(s.items.len(), 1, "{s}");
    assert_eq!(s.bytes_read(), m * n * 4, "x read once, no mask read: {s}");
    assert_eq!(s.bytes_written(), 4, "only the sum is written: {s}");
    let want = host_triangle(&x.host(), |d| d <= 0).sum(&[0, 1], false);
    check(
        "tril(0).sum()",
        || t.tril(0).sum(..),
        &want,
        tol(DType::F32).times(10.0),
    );
    // An elementwise producer and consumer fuse too.
    let y = (t.exp().triu(1) * 2.0).schedule(Fusion::On);
    assert_eq!(y.items.len(), 1, "{y}");
    assert_eq!(y.bytes_read(), m * n * 4, "{y}");
    assert_eq!(y.bytes_written(), m * n * 4, "{y}");
    // A new diagonal reuses the kernel: k is a scalar parameter.
    let a = t.tril(3).schedule(Fusion::On);
    let b = t.tril(-5).schedule(Fusion::On);
    assert_eq!(a.items[0].kernel.code_hash(), b.items[0].kernel.code_hash());
}

#[test]
fn masks_on_a_matmul_result_and_under_a_reduction_over_rows() {
    let x = Input::new(Layout::Contiguous, &[6, 9], DType::F32, -1.0, 1.0, 4);
    let y = Input::new(Layout::Contiguous, &[9, 5], DType::F32, -1.0, 1.0, 5);
    let p = x.host().matmul(&y.host());
    let want = host_triangle(&p, |d| d <= 1);
    check(
        "(x @ y).tril(1)",
        || x.tensor().matmul(&y.tensor()).tril(1),
        &want,
        tol(DType::F32).times(10.0),
    );
    let want = host_triangle(&x.host(), |d| d >= -1).sum(&[0], false);
    check(
        "triu(-1).sum(0)",
        || x.tensor().triu(-1).sum(0),
        &want,
        tol(DType::F32).times(10.0),
    );
}

#[test]
#[should_panic(expected = "tril: expected a tensor with at least 2 axes, got shape [5]")]
fn tril_of_a_vector_panics() {
    let _ = Tensor::zeros([5], DType::F32, &test_device()).tril(0);
}

#[test]
#[should_panic(expected = "triu: expected a tensor with at least 2 axes, got shape []")]
fn triu_of_a_scalar_panics() {
    let _ = Tensor::zeros([0usize; 0], DType::F32, &test_device()).triu(0);
}
