//! Layer norm (mean, sub, square, mean, rsqrt, mul, add) of a 4096 x 4096
//! matrix with weight and bias on the best device: kernel count, time, GB/s
//! and the largest difference from the CPU backend.

mod common;

use smelt::{DType, Tensor};

fn main() -> smelt::Result<()> {
    let (m, n) = (4096, 4096);
    let err = common::run(
        "layer_norm 4096x4096 f32",
        2 * m * n * 4,
        |d| {
            vec![
                Tensor::randn([m, n], DType::F32, 3, d),
                Tensor::rand([n], DType::F32, 4, d),
                Tensor::randn([n], DType::F32, 5, d),
            ]
        },
        |x| x[0].layer_norm(-1, Some(&x[1]), Some(&x[2]), 1e-5),
    )?
    .err;
    assert!(err <= 1e-4, "device and CPU differ by {err}");
    Ok(())
}
