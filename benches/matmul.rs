//! Matmul throughput on the GPU (issue 5): TFLOP/s of smelt's kernels for
//! square sizes and transformer shapes in f16, bf16 and f32, with B given
//! as `[n, k]` transposed (k-contiguous, the tensor-core path's fast
//! layout) and as row-major `[k, n]`; and matmul + bias + gelu fused in one
//! kernel. GPU time from events around each kernel, median of 50 runs.
//! cuBLAS is not linked here: compare with `torch.matmul` (cuBLAS) timed
//! in the same device session (see BENCHMARKS.md).
//!
//! `cargo bench --bench matmul` (prints `skipped` without a GPU).

mod common;

use common::{gpu, kernel_ms};
use smelt::{DType, Device, Result, Tensor};

fn main() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let cuda = Device::Cuda(0);
    println!("device: {} (sm_{})", dev.name()?, dev.target().sm);
    let shapes: [(usize, usize, usize, usize); 7] = [
        (1, 1024, 1024, 1024),
        (1, 2048, 2048, 2048),
        (1, 4096, 4096, 4096),
        (1, 8192, 8192, 8192),
        (1, 4096, 11008, 4096),
        (1, 4096, 4096, 11008),
        (32, 512, 512, 64),
    ];
    println!(
        "{:>6} {:>6} {:>6} {:>6} {:>9} {:>14} {:>14} {:>16}",
        "batch", "m", "n", "k", "dtype", "B^T TFLOP/s", "B TFLOP/s", "+bias+gelu TFLOP/s"
    );
    for dt in [DType::F16, DType::BF16, DType::F32] {
        for &(bs, m, n, k) in &shapes {
            if dt == DType::F32 && m * n * k > 4096 * 4096 * 4096 {
                continue; // the generic f32 path is slow; skip the largest
            }
            let a = Tensor::randn([bs, m, k], dt, 1, &cuda);
            let bt = Tensor::randn([bs, n, k], dt, 2, &cuda);
            let b = bt.transpose(1, 2).contiguous();
            let bias = Tensor::randn([n], dt, 3, &cuda);
            b.realize()?;
            let flops = 2.0 * (bs * m * n * k) as f64;
            let tflops = |ms: f64| flops / (ms * 1e-3) / 1e12;
            let nt = kernel_ms(&dev, |_| {
                a.matmul(&bt.transpose(1, 2)).realize().map(|_| ())
            })?;
            let nn = kernel_ms(&dev, |_| a.matmul(&b).realize().map(|_| ()))?;
            let fused = kernel_ms(&dev, |_| {
                (a.matmul(&bt.transpose(1, 2)) + &bias)
                    .gelu()
                    .cast(dt)
                    .realize()
                    .map(|_| ())
            })?;
            println!(
                "{bs:>6} {m:>6} {n:>6} {k:>6} {:>9} {:>14.1} {:>14.1} {:>16.1}",
                dt.name(),
                tflops(nt),
                tflops(nn),
                tflops(fused)
            );
        }
    }
    Ok(())
}
