//! Naive softmax (max, sub, exp, sum, div) of a 4096 x 1024 randn matrix on
//! the best device: checks that every row sums to 1, prints the kernel
//! count, time, GB/s and the largest difference from the CPU backend.

mod common;

use smelt::{s, DType, Tensor};

fn main() -> smelt::Result<()> {
    let (m, n) = (4096, 1024);
    let softmax = |x: &[Tensor]| {
        let e = (&x[0] - x[0].max_keepdim(1)).exp();
        &e / e.sum_keepdim(1)
    };
    let randn = |d: &smelt::Device| vec![Tensor::randn([m, n], DType::F32, 0, d)];
    let err = common::run("softmax 4096x1024 f32", 2 * m * n * 4, randn, softmax)?.err;
    assert!(err <= 1e-5, "device and CPU differ by {err}");

    let y = softmax(&randn(&smelt::Device::default_device()));
    let sums = y.sum(1).to_vec::<f32>()?;
    let worst = sums.iter().map(|s| (s - 1.0).abs()).fold(0.0f32, f32::max);
    println!("max |row sum - 1| = {worst:.2e}");
    assert!(worst <= 1e-5, "a row does not sum to 1 (error {worst})");
    println!("{}", y.slice(s![..2, ..4]));
    Ok(())
}
