//! Issue 10, items 1 and 11: half-precision reductions and composites
//! accumulate in f32, and PyTorch's semantics where smelt used to differ
//! (bool arithmetic, exact i32, bf16 rounding, pairwise sums, one
//! conversion rule, empty and 0-d axes). References are f64 or exact.

mod common;

use common::{test_device, Rng};
use half::bf16;
use smelt::{DType, Fusion, Tensor};

const HALVES: [DType; 2] = [DType::F16, DType::BF16];

/// Standard normal samples (Box-Muller) scaled by `sd`.
fn normal(rng: &mut Rng, n: usize, sd: f64) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let u = rng.unit().max(1e-300);
            let v = rng.unit();
            sd * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        })
        .collect()
}

/// A tensor of `dt` holding `vals` rounded to `dt`, and those rounded values
/// (what an f64 reference must start from).
fn half_tensor(vals: &[f64], shape: &[usize], dt: DType) -> (Tensor, Vec<f64>) {
    let t = Tensor::from_vec(vals.to_vec(), shape, &test_device()).cast(dt);
    let rounded = t.to_vec::<f64>().unwrap();
    (t, rounded)
}

/// Half an ulp of `dt` relative, plus what f32 intermediates add.
fn tol(dt: DType) -> f64 {
    match dt {
        DType::F16 => 1.5e-3,
        DType::BF16 => 1.2e-2,
        _ => 1e-5,
    }
}

fn assert_close(what: &str, got: &[f64], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= abs + rel * w.abs(),
            "{what}: element {i} is {g}, want {w}"
        );
    }
}

// ---------------------------------------------------------------------------
// Item 1: half-precision reductions and composites

#[test]
fn half_mean_of_a_sum_beyond_the_half_range_is_finite() {
    let dev = test_device();
    for dt in HALVES {
        let x = Tensor::full([4096], 16.0, dt, &dev);
        let m = x.mean(..);
        assert_eq!(m.dtype(), dt);
        assert_eq!(m.to_scalar::<f64>().unwrap(), 16.0, "{dt}");
        let rows = Tensor::full([3, 70000], 2.0, dt, &dev).mean(1);
        assert_eq!(rows.to_vec::<f64>().unwrap(), vec![2.0; 3], "{dt}");
    }
}

#[test]
fn half_var_and_std_compute_in_f32() {
    let dev = test_device();
    for dt in HALVES {
        let x = Tensor::from_vec(vec![60000.0f32, 60000.0], [2], &dev).cast(dt);
        assert_eq!(x.var(.., 1, false).to_scalar::<f64>().unwrap(), 0.0);
        assert_eq!(x.std(.., 0, false).to_scalar::<f64>().unwrap(), 0.0);
        // The variance (80000) is beyond f16, its root is not.
        let y = Tensor::from_vec(vec![0.0f32, 400.0], [2], &dev).cast(dt);
        let s = y.std(.., 1, false);
        assert_eq!(s.dtype(), dt);
        let want = 80000f64.sqrt();
        let got = s.to_scalar::<f64>().unwrap();
        assert!((got - want).abs() <= tol(dt) * want, "{dt}: std {got}");
    }
}

/// f64 layer norm (no affine) of each row.
fn layer_norm_ref(x: &[f64], cols: usize, eps: f64, rms: bool) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|r| {
            let mean = if rms {
                0.0
            } else {
                r.iter().sum::<f64>() / cols as f64
            };
            let ms = r.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cols as f64;
            let s = 1.0 / (ms + eps).sqrt();
            r.iter().map(move |v| (v - mean) * s).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn half_layer_norm_and_rms_norm_of_wide_rows_match_f64() {
    // Hidden size 8192 of N(0, 4^2): sums of squares near 131072.
    let (rows, cols) = (3, 8192);
    let mut rng = Rng::new(1);
    let vals = normal(&mut rng, rows * cols, 4.0);
    for dt in HALVES {
        let (x, xr) = half_tensor(&vals, &[rows, cols], dt);
        let ln = x.layer_norm(-1, None, None, 1e-5);
        assert_eq!(ln.dtype(), dt);
        let want = layer_norm_ref(&xr, cols, 1e-5, false);
        let got = ln.to_vec::<f64>().unwrap();
        assert_close(&format!("layer_norm {dt}"), &got, &want, tol(dt), 1e-3);
        let rn = x.rms_norm(-1, None, 1e-5);
        let want = layer_norm_ref(&xr, cols, 1e-5, true);
        let got = rn.to_vec::<f64>().unwrap();
        assert_close(&format!("rms_norm {dt}"), &got, &want, tol(dt), 1e-3);
        // A half weight keeps the half result.
        let w = Tensor::full([cols], 0.5, dt, &test_device());
        let lw = x.layer_norm(-1, Some(&w), None, 1e-5);
        assert_eq!(lw.dtype(), dt);
        let want: Vec<f64> = layer_norm_ref(&xr, cols, 1e-5, false)
            .iter()
            .map(|v| v * 0.5)
            .collect();
        assert_close(
            &format!("layer_norm*w {dt}"),
            &lw.to_vec::<f64>().unwrap(),
            &want,
            tol(dt),
            1e-3,
        );
    }
}

#[test]
fn half_softmax_of_many_equal_logits_is_not_zero() {
    let n = 70000;
    let dev = test_device();
    for dt in HALVES {
        let x = Tensor::full([1, n], 3.0, dt, &dev);
        let want = dt_round(1.0 / n as f64, dt);
        let s = x.softmax(-1);
        assert_eq!(s.dtype(), dt);
        let got = s.to_vec::<f64>().unwrap();
        // One f16 ulp of a subnormal is 2^-24.
        assert_close(
            &format!("softmax {dt}"),
            &got,
            &vec![want; n],
            tol(dt),
            6e-8,
        );
        let ls = x.log_softmax(-1).to_vec::<f64>().unwrap();
        let lw = -(n as f64).ln();
        assert_close(
            &format!("log_softmax {dt}"),
            &ls,
            &vec![lw; n],
            tol(dt),
            0.0,
        );
        let t = Tensor::from_vec(vec![5i32], [1], &dev);
        let ce = x.cross_entropy(&t).to_vec::<f64>().unwrap();
        assert_close(&format!("cross_entropy {dt}"), &ce, &[-lw], tol(dt), 0.0);
        let lse = x.logsumexp(-1, false).to_vec::<f64>().unwrap();
        assert_close(&format!("logsumexp {dt}"), &lse, &[3.0 - lw], tol(dt), 0.0);
    }
}

/// `v` rounded to `dt` by smelt's conversion rule.
fn dt_round(v: f64, dt: DType) -> f64 {
    dt.round(v)
}

#[test]
fn half_softmax_and_cross_entropy_over_a_large_vocabulary_match_f64() {
    let (rows, vocab) = (2, 128256);
    let mut rng = Rng::new(2);
    let vals = normal(&mut rng, rows * vocab, 2.0);
    let targets = [7i32, 128255];
    for dt in HALVES {
        let (x, xr) = half_tensor(&vals, &[rows, vocab], dt);
        let mut sm = Vec::new();
        let mut lsm = Vec::new();
        let mut ce = Vec::new();
        for (r, row) in xr.chunks(vocab).enumerate() {
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = row.iter().map(|v| (v - m).exp()).sum();
            sm.extend(row.iter().map(|v| (v - m).exp() / z));
            lsm.extend(row.iter().map(|v| v - m - z.ln()));
            ce.push(m + z.ln() - row[targets[r] as usize]);
        }
        let got = x.softmax(-1).to_vec::<f64>().unwrap();
        assert_close(&format!("softmax {dt}"), &got, &sm, tol(dt), 1e-7);
        let got = x.log_softmax(-1).to_vec::<f64>().unwrap();
        assert_close(&format!("log_softmax {dt}"), &got, &lsm, tol(dt), 1e-3);
        let t = Tensor::from_vec(targets.to_vec(), [rows], &test_device());
        let got = x.cross_entropy(&t);
        assert_eq!(got.dtype(), dt);
        assert_close(
            &format!("cross_entropy {dt}"),
            &got.to_vec::<f64>().unwrap(),
            &ce,
            tol(dt),
            1e-3,
        );
    }
}

#[test]
fn half_softmax_reads_and_writes_halves_once() {
    let (rows, cols) = (8, 1024);
    let x = Tensor::full([rows, cols], 1.0, DType::F16, &test_device()).contiguous();
    x.realize().unwrap();
    let s = x.softmax(-1).schedule(Fusion::On);
    assert_eq!(s.items.len(), 1, "one kernel");
    assert_eq!(s.bytes_read(), rows * cols * 2);
    assert_eq!(s.bytes_written(), rows * cols * 2);
}

// ---------------------------------------------------------------------------
// Item 11: PyTorch semantics

#[test]
fn bool_add_and_mul_are_logical_or_and_and() {
    let dev = test_device();
    let a = Tensor::from_vec(vec![true, true, false, false], [4], &dev);
    let b = Tensor::from_vec(vec![true, false, true, false], [4], &dev);
    let s = &a + &b;
    assert_eq!(s.dtype(), DType::Bool);
    assert_eq!(s.to_vec::<bool>().unwrap(), vec![true, true, true, false]);
    let p = &a * &b;
    assert_eq!(p.dtype(), DType::Bool);
    assert_eq!(p.to_vec::<bool>().unwrap(), vec![true, false, false, false]);
    // Summing bools still counts them.
    assert_eq!(s.sum(..).to_scalar::<i32>().unwrap(), 3);
}

#[test]
fn i32_arithmetic_wraps_exactly() {
    let dev = test_device();
    let big = [i32::MAX, i32::MIN, 46341, -3, 123456789];
    let x = Tensor::from_vec(big.to_vec(), [5], &dev);
    let want: Vec<i32> = big.iter().map(|v| v.wrapping_mul(*v)).collect();
    assert_eq!(x.square().to_vec::<i32>().unwrap(), want);
    let want: Vec<i32> = big.iter().map(|v| v.wrapping_neg()).collect();
    assert_eq!((-&x).to_vec::<i32>().unwrap(), want);
    let want: Vec<i32> = big.iter().map(|v| v.wrapping_add(i32::MAX)).collect();
    assert_eq!((&x + i32::MAX).to_vec::<i32>().unwrap(), want);

    let three = Tensor::from_vec(vec![3i32; 40], [40], &dev);
    let want = 3i32.wrapping_pow(40);
    assert_eq!(three.prod(..).to_scalar::<i32>().unwrap(), want);
    let e = Tensor::from_vec(vec![40i32, 19, 0, 31], [4], &dev);
    let want: Vec<i32> = [40u32, 19, 0, 31]
        .iter()
        .map(|p| 3i32.wrapping_pow(*p))
        .collect();
    let base = Tensor::full([4], 3.0, DType::I32, &dev);
    assert_eq!(base.pow(&e).to_vec::<i32>().unwrap(), want);
    // Sums wrap too, in any order.
    let s = Tensor::full([5000], i32::MAX as f64, DType::I32, &dev).sum(..);
    assert_eq!(
        s.to_scalar::<i32>().unwrap(),
        i32::MAX.wrapping_mul(5000),
        "sum"
    );
}

#[test]
fn f32_to_bf16_rounds_once_from_the_f32_bits() {
    let dev = test_device();
    let v = 1.0f32 + 2f32.powi(-8) + 2f32.powi(-23);
    let up = 1.0 + 2f64.powi(-7);
    let x = Tensor::from_vec(vec![v, 1.0 + 2f32.powi(-8)], [2], &dev);
    assert_eq!(
        x.cast(DType::BF16).to_vec::<f64>().unwrap(),
        vec![up, 1.0],
        "cast"
    );
    assert_eq!(x.to_vec::<bf16>().unwrap()[0].to_f64(), up, "to_vec");
    assert_eq!(
        Tensor::from_vec(vec![v as f64], [1], &dev)
            .cast(DType::BF16)
            .to_vec::<f64>()
            .unwrap(),
        vec![up],
        "from f64"
    );
}

#[test]
fn f32_sums_of_long_rows_are_accurate() {
    let n = 1 << 18;
    let mut rng = Rng::new(3);
    // Nearly equal terms: a running f32 sum rounds each one the same way
    // once it is large, so its error grows linearly with the length.
    let vals: Vec<f64> = (0..n).map(|_| rng.uniform(0.0, 0.01)).collect();
    let x32: Vec<f32> = vals.iter().map(|v| *v as f32).collect();
    let xr: Vec<f64> = x32.iter().map(|v| *v as f64).collect();
    let x = Tensor::from_vec(x32, [1, n], &test_device());
    let m = xr.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = xr.iter().map(|v| (v - m).exp()).sum();
    let want: Vec<f64> = xr.iter().map(|v| (v - m).exp() / z).collect();
    let got = x.softmax(-1).to_vec::<f64>().unwrap();
    assert_close("softmax 2^18", &got, &want, 1e-5, 0.0);
    let s = x.sum(..).to_scalar::<f64>().unwrap();
    let want: f64 = xr.iter().sum();
    assert!((s - want).abs() <= 1e-5 * want.abs(), "sum {s} vs {want}");
}

#[test]
fn reading_into_i32_follows_the_cast_rule() {
    let dev = test_device();
    let vals = vec![3e9f32, -3e9, f32::NAN, 2.7, -2.7, f32::INFINITY, 65536.5];
    let want = vec![i32::MAX, i32::MIN, 0, 2, -2, i32::MAX, 65536];
    let x = Tensor::from_vec(vals, [7], &dev);
    assert_eq!(x.to_vec::<i32>().unwrap(), want, "to_vec");
    assert_eq!(x.cast(DType::I32).to_vec::<i32>().unwrap(), want, "cast");
    let h = x.cast(DType::F16);
    assert_eq!(
        h.to_vec::<i32>().unwrap(),
        h.cast(DType::I32).to_vec::<i32>().unwrap(),
        "from f16"
    );
    // i32 into f32 rounds to nearest even, the same way.
    let i = Tensor::from_vec(vec![16777217i32, i32::MAX], [2], &dev);
    assert_eq!(
        i.to_vec::<f32>().unwrap(),
        i.cast(DType::F32).to_vec::<f32>().unwrap()
    );
}

#[test]
#[should_panic(expected = "max: axis 1 of shape [3, 0] is empty")]
fn max_over_an_empty_axis_panics() {
    Tensor::zeros([3, 0], DType::F32, &test_device()).max(1);
}

#[test]
#[should_panic(expected = "min: axis 0 of shape [0] is empty")]
fn min_over_an_empty_axis_panics() {
    Tensor::zeros([0], DType::I32, &test_device()).min(..);
}

#[test]
#[should_panic(expected = "argmax: axis 0 of shape [0, 2] is empty")]
fn argmax_over_an_empty_axis_panics() {
    Tensor::zeros([0, 2], DType::F32, &test_device()).argmax(0);
}

#[test]
fn empty_axes_still_work_where_pytorch_defines_them() {
    let dev = test_device();
    let e = Tensor::zeros([2, 0], DType::F32, &dev);
    assert_eq!(e.sum(1).to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    assert_eq!(
        e.logsumexp(1, false).to_vec::<f32>().unwrap(),
        vec![f32::NEG_INFINITY; 2]
    );
    assert_eq!(e.softmax(1).shape(), &[2, 0]);
    // Max over a non-empty axis of an empty tensor is empty, not an error.
    assert_eq!(e.max(0).shape(), &[0]);
}

#[test]
fn axis_0_and_minus_1_of_a_0_d_tensor_are_accepted() {
    let dev = test_device();
    let s = Tensor::scalar(2.5f32, &dev);
    assert_eq!(s.sum(0).to_scalar::<f32>().unwrap(), 2.5);
    assert_eq!(s.max(-1).to_scalar::<f32>().unwrap(), 2.5);
    assert_eq!(s.mean(0).to_scalar::<f32>().unwrap(), 2.5);
    assert_eq!(s.sum_keepdim(0).shape(), &[] as &[usize]);
    assert_eq!(s.softmax(-1).to_scalar::<f32>().unwrap(), 1.0);
    assert_eq!(s.log_softmax(0).to_scalar::<f32>().unwrap(), 0.0);
    assert_eq!(s.argmax(0).to_scalar::<i32>().unwrap(), 0);
    assert_eq!(s.argmin(-1).to_scalar::<i32>().unwrap(), 0);
}

#[test]
#[should_panic(expected = "sum: axis 1 is out of range for a tensor of shape []")]
fn axis_1_of_a_0_d_tensor_panics() {
    Tensor::scalar(1.0f32, &test_device()).sum(1);
}
