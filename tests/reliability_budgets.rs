//! Kernel budgets: the scheduler splits kernels so each stays within the
//! instruction budget and the driver's 4 KiB parameter space, and the
//! values stay right.

mod common;

use smelt::{Fusion, Schedule, Tensor};
use smelt_codegen::{INST_BUDGET, PARAM_BYTES_LIMIT};

/// Every kernel of `s` within both budgets; returns how many there are.
fn assert_within_budget(s: &smelt::Schedule) -> usize {
    for item in s.items.iter() {
        let k = &item.kernel;
        assert!(
            k.insts.len() <= INST_BUDGET,
            "kernel {} has {} insts",
            k.name,
            k.insts.len()
        );
        assert!(
            k.param_bytes() <= PARAM_BYTES_LIMIT,
            "kernel {} has {} parameter bytes",
            k.name,
            k.param_bytes()
        );
    }
    s.items.len()
}

/// `x` through `n` alternating ops that keep values near 1, and the f64
/// reference of the same chain.
fn chain(n: usize) {
    let dev = common::test_device();
    let host: Vec<f32> = (0..64).map(|i| i as f32 / 64.0).collect();
    let x = Tensor::from_slice(&host, [64], &dev);
    let mut y = x.clone();
    let mut want: Vec<f64> = host.iter().map(|v| *v as f64).collect();
    for i in 0..n {
        if i % 2 == 0 {
            y = &y * 0.5;
            want.iter_mut().for_each(|v| *v *= 0.5);
        } else {
            y = &y + 0.25;
            want.iter_mut().for_each(|v| *v += 0.25);
        }
    }
    let kernels = assert_within_budget(&y.schedule(Fusion::On));
    assert!(kernels > 1, "a {n}-op chain was one kernel");
    let got = y.to_vec::<f32>().unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((*g as f64 - w).abs() < 1e-5, "{g} vs {w}");
    }
}

#[test]
fn chain_of_1000_ops_is_split() {
    chain(1000);
}

#[test]
fn chain_of_10000_ops_is_split() {
    chain(10000);
}

#[test]
fn realize_all_of_600_tensors_fits_the_parameter_space() {
    let dev = common::test_device();
    let xs: Vec<Tensor> = (0..600)
        .map(|i| Tensor::from_slice(&[i as f32; 8], [8], &dev))
        .collect();
    let ys: Vec<Tensor> = xs.iter().map(|x| x + 1.0).collect();
    let refs: Vec<&Tensor> = ys.iter().collect();
    let nodes: Vec<_> = ys.iter().map(|y| y.node().clone()).collect();
    let kernels = assert_within_budget(&Schedule::new(&nodes, Fusion::On));
    assert!(kernels > 1);
    smelt::realize_all(&refs, Fusion::On).unwrap();
    for (i, y) in ys.iter().enumerate() {
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![i as f32 + 1.0; 8]);
    }
}

#[test]
fn sum_of_600_tensors_fits_the_parameter_space() {
    let dev = common::test_device();
    let xs: Vec<Tensor> = (0..600)
        .map(|i| Tensor::from_slice(&[i as f32, 1.0], [2], &dev))
        .collect();
    let mut s = xs[0].clone();
    for x in &xs[1..] {
        s = &s + x;
    }
    let kernels = assert_within_budget(&s.schedule(Fusion::On));
    assert!(kernels > 1);
    assert_eq!(
        s.to_vec::<f32>().unwrap(),
        vec![(0..600).sum::<i32>() as f32, 600.0]
    );
}

#[test]
fn two_hundred_softmaxes_in_one_realize_stay_within_budget() {
    let dev = common::test_device();
    let host: Vec<f32> = (0..32).map(|i| (i % 7) as f32 * 0.3).collect();
    let x = Tensor::from_slice(&host, [4, 8], &dev);
    let ys: Vec<Tensor> = (0..200)
        .map(|i| (&x * (1.0 + i as f64 * 0.01)).softmax(-1))
        .collect();
    let nodes: Vec<_> = ys.iter().map(|y| y.node().clone()).collect();
    assert_within_budget(&Schedule::new(&nodes, Fusion::On));
    let refs: Vec<&Tensor> = ys.iter().collect();
    smelt::realize_all(&refs, Fusion::On).unwrap();
    for (i, y) in ys.iter().enumerate() {
        let got = y.to_vec::<f32>().unwrap();
        let s = 1.0 + i as f64 * 0.01;
        for r in 0..4 {
            let row: Vec<f64> = (0..8).map(|c| host[r * 8 + c] as f64 * s).collect();
            let m = row.iter().cloned().fold(f64::MIN, f64::max);
            let z: f64 = row.iter().map(|v| (v - m).exp()).sum();
            for c in 0..8 {
                let w = (row[c] - m).exp() / z;
                assert!((got[r * 8 + c] as f64 - w).abs() < 1e-5);
            }
        }
    }
}
