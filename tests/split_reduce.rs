//! Huge reductions with few rows run in two stages (partial reductions of
//! 1024 pieces, then their reduction) so they spread over the GPU; check
//! the values against f64 loops and the kernel count.

mod common;

use common::test_device;
use smelt::{Fusion, Tensor};

#[test]
fn sum_of_two_million_elements_is_exact_enough_and_two_kernels() {
    let n = (1 << 21) + 3; // not a multiple of the piece count: padded
    let host: Vec<f32> = (0..n).map(|i| ((i % 97) as f32 - 48.0) / 7.0).collect();
    let want: f64 = host.iter().map(|v| *v as f64).sum();
    // f32 accumulation: error relative to the sum of magnitudes.
    let scale: f64 = host.iter().map(|v| v.abs() as f64).sum();
    let x = Tensor::from_vec(host, [n], &test_device());
    let s = x.sum(..);
    assert_eq!(s.schedule(Fusion::On).items.len(), 2);
    let got = s.to_scalar::<f64>().unwrap();
    assert!((got - want).abs() <= 1e-6 * scale, "{got} vs {want}");
}

#[test]
fn max_and_min_pad_with_their_identity() {
    let n = (1 << 20) + 5;
    // All negative, so padding with 0 would wrongly win the max.
    let host: Vec<f32> = (0..n).map(|i| -1.0 - (i % 1000) as f32).collect();
    let x = Tensor::from_vec(host, [n], &test_device());
    assert_eq!(x.max(..).to_scalar::<f32>().unwrap(), -1.0);
    assert_eq!((-&x).min(..).to_scalar::<f32>().unwrap(), 1.0);
    assert_eq!(x.argmax(0).to_scalar::<i32>().unwrap(), 0);
}

#[test]
fn few_rows_over_a_permuted_view_keep_their_order() {
    let (rows, len) = (3, 1 << 20);
    let host: Vec<f32> = (0..rows * len)
        .map(|i| (i % 5) as f32 + (i / len) as f32 * 100.0)
        .collect();
    // Stored as [len, rows] and reduced over axis 0 of that view.
    let x = Tensor::from_vec(host.clone(), [rows, len], &test_device()).t();
    let got = x.sum_keepdim(0).to_vec::<f64>().unwrap();
    for r in 0..rows {
        let want: f64 = host[r * len..(r + 1) * len].iter().map(|v| *v as f64).sum();
        assert!(
            (got[r] - want).abs() <= 1e-6 * want,
            "row {r}: {} vs {want}",
            got[r]
        );
    }
    let m = Tensor::from_vec(host.clone(), [rows, len], &test_device()).mean(1);
    assert_eq!(m.shape(), &[rows]);
    for (r, got) in m.to_vec::<f64>().unwrap().iter().enumerate() {
        let want = host[r * len..(r + 1) * len]
            .iter()
            .map(|v| *v as f64)
            .sum::<f64>()
            / len as f64;
        assert!(
            (got - want).abs() <= 1e-5 * want.abs(),
            "row {r}: {got} vs {want}"
        );
    }
}
