//! Causal attention written the naive way, `softmax(q @ k^T * s + mask) @
//! v` with the mask from `arange` comparisons, in f16 with the softmax in
//! f32: one kernel. Prints the kernel count, the largest difference from
//! the unfused graph (`Fusion::Off`) on the same device and, on a GPU, the
//! time and TFLOP/s (4 b h s^2 d, halved for causal).

use smelt::{DType, Device, Fusion, Tensor};
use std::time::Instant;

fn main() -> smelt::Result<()> {
    let dev = Device::default_device();
    let gpu = dev != Device::Cpu;
    let (b, h, s, d) = if gpu {
        (4, 16, 2048, 64)
    } else {
        (1, 4, 256, 64)
    };
    let dt = DType::F16;
    let q = Tensor::randn([b, h, s, d], dt, 1, &dev);
    let k = Tensor::randn([b, h, s, d], dt, 2, &dev);
    let v = Tensor::randn([b, h, s, d], dt, 3, &dev);
    for x in [&q, &k, &v] {
        x.realize()?;
    }
    let attention = || {
        let scores = q.matmul(&k.transpose(-2, -1)) * (1.0 / (d as f64).sqrt());
        let rows = Tensor::arange(0.0, s as f64, 1.0, DType::I32, &dev).reshape([s, 1]);
        let cols = Tensor::arange(0.0, s as f64, 1.0, DType::I32, &dev).reshape([1, s]);
        let masked = cols.le(&rows).where_(&scores, f64::NEG_INFINITY);
        masked.cast(DType::F32).softmax(-1).cast(dt).matmul(&v)
    };
    let kernels = attention().schedule(Fusion::On).items.len();
    let unfused = attention().schedule(Fusion::Off).items.len();
    // Warm-up (compilation, allocation), then a timed run.
    attention().realize()?;
    let o = attention();
    dev.synchronize()?;
    let t0 = Instant::now();
    o.realize()?;
    dev.synchronize()?;
    let secs = t0.elapsed().as_secs_f64();
    let naive = attention();
    naive.realize_with(Fusion::Off)?;
    let (got, want) = (
        o.cast(DType::F32).to_vec::<f32>()?,
        naive.cast(DType::F32).to_vec::<f32>()?,
    );
    let err = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!(
        "causal attention b={b} h={h} s={s} d={d} f16 on {dev}: {kernels} kernel(s) fused ({unfused} unfused), max |fused - unfused| = {err:.2e}"
    );
    if gpu {
        let flops = 4.0 * (b * h * s * s * d) as f64 / 2.0;
        println!("{:.3} ms, {:.1} TFLOP/s", secs * 1e3, flops / secs / 1e12);
    }
    assert_eq!(kernels, 1, "naive attention did not fuse");
    // Outputs are averages of unit normals: f16 rounding of p and of the
    // output in the unfused graph stays well below this.
    assert!(err <= 2e-2, "fused and unfused differ by {err}");
    Ok(())
}
