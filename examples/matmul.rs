//! A linear layer with its epilogue, `gelu(x @ w + b)`, in f16 on the best
//! device: one kernel (tensor cores on a GPU, the epilogue applied to the
//! accumulators). Prints the kernel count, time, TFLOP/s and the largest
//! difference from the CPU backend, then the same product in f32 with
//! `Precision::Tf32` against exact f32.

mod common;

use smelt::{DType, Device, Precision, Tensor};

fn main() -> smelt::Result<()> {
    let (m, n, k) = (1024, 1024, 1024);
    let inputs = |dt: DType| {
        move |d: &Device| {
            vec![
                Tensor::randn([m, k], dt, 1, d) * 0.1,
                Tensor::randn([k, n], dt, 2, d) * 0.1,
                Tensor::randn([n], dt, 3, d),
            ]
        }
    };
    let bytes = 2 * (m * k + k * n + m * n);
    let run = common::run(
        "gelu(x @ w + b) 1024^3 f16",
        bytes,
        inputs(DType::F16),
        |x| (x[0].matmul(&x[1]) + &x[2]).gelu(),
    )?;
    let flops = 2.0 * (m * n * k) as f64;
    println!("{:.1} TFLOP/s", flops / run.secs / 1e12);
    // f16 outputs near 1 carry about 1e-3 of rounding; the sums differ by
    // accumulation order only.
    assert!(run.err <= 2e-2, "device and CPU differ by {}", run.err);

    let dev = Device::default_device();
    let x = inputs(DType::F32)(&dev);
    let exact = x[0].matmul(&x[1]).to_vec::<f32>()?;
    let tf32 = x[0].matmul_with(&x[1], Precision::Tf32).to_vec::<f32>()?;
    let worst = exact
        .iter()
        .zip(&tf32)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!("f32 1024^3 on {dev}: max |tf32 - exact| = {worst:.2e}");
    assert!(
        worst <= 1e-2,
        "TF32 is further from f32 than expected: {worst}"
    );
    Ok(())
}
