//! Minimal reproductions of bugs the suite found (by `view_fuzz.rs`,
//! `movement.rs` and `elementwise.rs`), one test each, so each stays fixed.

mod common;

use common::*;
use smelt::{s, DType, Tensor};

fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| i as f64 + 1.0).collect();
    make(&v, shape, DType::F32).0
}

/// A slice that lands entirely in the padding, with a size-1 result: the
/// mask must survive (it read out of bounds instead).
#[test]
fn fully_padded_size_one_view_reads_zero() {
    let x = iota(&[2]);
    check(
        "pad (0, 1) then narrow(0, 2, 1)",
        || x.pad(&[(0, 1)], 0.0).narrow(0, 2, 1),
        &NdArray::new(&[1], vec![0.0]),
        EXACT,
    );
    check(
        "pad (1, 0) then narrow(0, 0, 1)",
        || x.pad(&[(1, 0)], 0.0).narrow(0, 0, 1),
        &NdArray::new(&[1], vec![0.0]),
        EXACT,
    );
    let y = iota(&[2, 4]);
    check(
        "2-D pad then [0, 0] (rank 0)",
        || y.pad(&[(1, 0), (0, 1)], 0.0).slice(s![0, 0]),
        &NdArray::scalar(0.0),
        EXACT,
    );
}

/// Padding an empty view: every element is padding.
#[test]
fn pad_of_empty_view_is_all_padding() {
    let x = iota(&[1]);
    check(
        "narrow to empty then pad",
        || x.narrow(0, 1, 0).pad(&[(0, 1)], 0.0),
        &NdArray::new(&[1], vec![0.0]),
        EXACT,
    );
    let (e, _) = make(&[], &[0], DType::F32);
    check(
        "pad of a [0] buffer",
        || e.pad(&[(0, 1)], 0.0),
        &NdArray::new(&[1], vec![0.0]),
        EXACT,
    );
    check(
        "pad -1 of a [0] buffer",
        || e.pad(&[(1, 1)], -1.0),
        &NdArray::new(&[2], vec![-1.0, -1.0]),
        EXACT,
    );
}

/// Shrinking or striding a reshape that had to stack views (a transpose
/// reshaped to a shape with size-1 axes) panicked while recording.
#[test]
fn slicing_a_stacked_reshape() {
    let w = iota(&[2, 3]);
    let h = NdArray::new(&[2, 3], (1..=6).map(|v| v as f64).collect());
    let t = h.permute(&[1, 0]);
    check(
        "t().reshape([1, 6]).narrow(1, 0, 2)",
        || w.t().reshape([1, 6]).narrow(1, 0, 2),
        &t.reshape(&[1, 6]).narrow(1, 0, 2),
        EXACT,
    );
    check(
        "t().reshape([6, 1])[::2]",
        || w.t().reshape([6, 1]).slice(s![..;2]),
        &t.reshape(&[6, 1]).slice(s![..;2]),
        EXACT,
    );
    check(
        "t().reshape([6]).narrow(0, 0, 0)",
        || w.t().reshape([6]).narrow(0, 0, 0),
        &NdArray::new(&[0], vec![]),
        EXACT,
    );
}

/// A fused elementwise kernel over a zero-size broadcast of a sliced,
/// computed operand panicked under `Fusion::On`.
#[test]
fn fused_zero_size_broadcast() {
    let x = iota(&[2, 3]);
    let (z, _) = make(&[], &[0, 3], DType::F32);
    check(
        "x.narrow(0, 1, 1).exp() + zeros[0, 3]",
        || x.narrow(0, 1, 1).exp() + &z,
        &NdArray::new(&[0, 3], vec![]),
        EXACT,
    );
}

/// `[n] @ [n]` squeezed the wrong axis and panicked (fixed in
/// src/linalg.rs).
#[test]
fn vector_dot_vector_is_rank_zero() {
    let a = iota(&[3]);
    check("a @ a", || a.matmul(&a), &NdArray::scalar(14.0), EXACT);
}

/// A scalar branch of `where_` took its dtype from the condition, so
/// half-precision composites came back as F32 (fixed in
/// src/elementwise.rs).
#[test]
fn where_scalar_follows_the_other_branch() {
    let dev = test_device();
    let x = Tensor::ones([2, 3], DType::F16, &dev);
    assert_eq!(x.logsumexp(1, false).dtype(), DType::F16);
    assert_eq!(x.gt(0.0).where_(&x, 0.0).dtype(), DType::F16);
}

/// A reduction over a single element collapses the kernel domain to no
/// loops at all; the PTX emitter underflowed on it (`SMELT_CHECK_PTX=1`,
/// as in CI, emits PTX for every kernel the CPU runs).
#[test]
fn reduce_of_a_single_element() {
    let x = iota(&[1]);
    check("sum over [1]", || x.sum(0), &NdArray::scalar(1.0), EXACT);
    check("max over [1]", || x.max(..), &NdArray::scalar(1.0), EXACT);
    check(
        "argmin over [1]",
        || x.argmin(0),
        &NdArray::scalar(0.0),
        EXACT,
    );
    let y = iota(&[1, 1, 1]);
    check(
        "sum over [1, 1, 1] keepdim",
        || y.sum_keepdim([0, 2]),
        &NdArray::new(&[1, 1, 1], vec![1.0]),
        EXACT,
    );
}
