//! Causal attention written the naive way, `softmax(q @ k^T * s + mask) @
//! v` with the mask from `arange` comparisons, in f16 with the softmax in
//! f32. Prints the kernel counts of the fused plan (one attention kernel,
//! forced with `AttentionFusion::On`), of the 3-kernel plan
//! (`AttentionFusion::Off`: score matmul, softmax row kernel, output
//! matmul) and of the plan the device gets by default; the kernel time of
//! both plans (the median over runs of the summed per-kernel times from
//! `smelt::profile`: CUDA events on a GPU, the host's clock on the CPU)
//! with TFLOP/s (GFLOP/s on the CPU; 4 b h s^2 d, halved for causal); and the largest
//! difference between the fused plan and `Fusion::Off`.
//!
//! `cargo run --release --example attention [-- B H S D [f16|bf16|f32]]`
//! (default 4 16 2048 64 f16 on a GPU, 1 4 256 64 f16 on the CPU).

use smelt::{profile, AttentionFusion, DType, Device, Fusion, Planning, Tensor};

/// Timed runs per plan (after one warm-up run); the median is printed.
const RUNS: usize = 9;

fn main() -> smelt::Result<()> {
    let dev = Device::default_device();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dt = match args.last().map(String::as_str) {
        Some("f32") => Some(DType::F32),
        Some("bf16") => Some(DType::BF16),
        Some("f16") => Some(DType::F16),
        _ => None,
    };
    if dt.is_some() {
        args.pop();
    }
    let dt = dt.unwrap_or(DType::F16);
    let sizes: Vec<usize> = args
        .iter()
        .map(|a| a.parse().expect("sizes are B H S D, positive integers"))
        .collect();
    let [b, h, s, d] = match sizes[..] {
        [b, h, s, d] => [b, h, s, d],
        [] if dev != Device::Cpu => [4, 16, 2048, 64],
        [] => [1, 4, 256, 64],
        _ => panic!("expected four sizes B H S D, got {sizes:?}"),
    };
    // Realized inputs: the timed kernels read them, as a model's would.
    let q = Tensor::randn([b, h, s, d], dt, 1, &dev);
    let k = Tensor::randn([b, h, s, d], dt, 2, &dev);
    let v = Tensor::randn([b, h, s, d], dt, 3, &dev);
    smelt::realize_all(&[&q, &k, &v], Fusion::On)?;
    let attention = || {
        let scores = q.matmul(&k.transpose(-2, -1)) * (1.0 / (d as f64).sqrt());
        let rows = Tensor::arange(0.0, s as f64, 1.0, DType::I32, &dev).reshape([s, 1]);
        let cols = Tensor::arange(0.0, s as f64, 1.0, DType::I32, &dev).reshape([1, s]);
        let masked = cols.le(&rows).where_(&scores, f64::NEG_INFINITY);
        masked.cast(DType::F32).softmax(-1).cast(dt).matmul(&v)
    };
    let fused = Planning::from(Fusion::On).attention(AttentionFusion::On);
    let three = Planning::from(Fusion::On).attention(AttentionFusion::Off);
    let kernels = |p: Planning| attention().schedule(p).items.len();
    let (n_fused, n_three) = (kernels(fused), kernels(three));
    let n_default = kernels(Planning::from(Fusion::On).attention(AttentionFusion::Auto));
    let n_off = kernels(Fusion::Off.into());
    println!(
        "causal attention b={b} h={h} s={s} d={d} {dt} on {dev}: fused {n_fused} kernel(s), \
         3-kernel plan {n_three}, Fusion::Off {n_off}; the default plan here has {n_default}"
    );
    let flops = 4.0 * b as f64 * h as f64 * s as f64 * s as f64 * d as f64 / 2.0;
    let (unit, per) = match dev {
        Device::Cpu => ("GFLOP/s", 1e9),
        _ => ("TFLOP/s", 1e12),
    };
    for (name, plan) in [("fused", fused), ("3-kernel", three)] {
        let ms = kernel_ms(|| attention().realize_with(plan).map(|_| ()))?;
        println!(
            "{name:>8}: {ms:9.3} ms, {:7.2} {unit}",
            flops / (ms * 1e-3) / per
        );
    }
    let o = attention();
    o.realize_with(fused)?;
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
    println!("max |fused - unfused| = {err:.2e}");
    assert_eq!(n_fused, 1, "naive attention did not fuse");
    // Outputs are averages of unit normals: half rounding of p and of the
    // output in the unfused graph stays well below this.
    assert!(err <= 2e-2, "fused and unfused differ by {err}");
    Ok(())
}

/// The median over [`RUNS`] runs of `run` (after one warm-up: compiling,
/// allocating) of the summed times of the kernels it ran.
fn kernel_ms(mut run: impl FnMut() -> smelt::Result<()>) -> smelt::Result<f64> {
    run()?;
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        profile::start();
        run()?;
        times.push(profile::take()?.iter().map(|k| k.ms).sum::<f64>());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[RUNS / 2])
}
