//! `a + b` over 2^24 f32 elements on the best device: kernel count, time,
//! GB/s and the largest difference from the CPU backend.

mod common;

use smelt::{DType, Tensor};

fn main() -> smelt::Result<()> {
    let n = 1 << 24;
    let err = common::run(
        "vector add 2^24 f32",
        3 * 4 * n,
        |d| {
            vec![
                Tensor::randn([n], DType::F32, 1, d),
                Tensor::randn([n], DType::F32, 2, d),
            ]
        },
        |x| &x[0] + &x[1],
    )?
    .err;
    assert!(err == 0.0, "device and CPU differ by {err}");
    Ok(())
}
