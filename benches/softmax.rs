//! The GPU benchmark of issue 4, all in one run: the device's copy ceiling,
//! vector add from 2^12 to 2^28 elements, softmax and layer norm over
//! M = 4096 rows for N from 256 to 131072 in f32 and bf16, each naive
//! (`Fusion::Off`) and fused, and the host overhead of a cached realize.
//! GPU time by CUDA events around each kernel (summed per run), with the
//! GPU kept busy before each run so that launch latency is not counted
//! (see `common::kernel_ms`), median of 50 runs after 10 warm-up runs;
//! inputs rotate when they would fit in L2.
//!
//! `cargo bench --bench softmax` (prints `skipped` without a GPU). Writes
//! a table to stdout and `softmax.json` plus SVG plots (`vector_add.svg`,
//! `softmax_{f32,bf16}.svg`, `layer_norm_{f32,bf16}.svg`) to
//! `$SMELT_BENCH_OUT` (default `target/bench`).
//! `cargo bench --bench softmax -- --replot FILE` redraws the plots from a
//! saved `softmax.json`, without a GPU.

mod common;

use common::report::{read_json, to_json, BandwidthReport, Point};
use common::{copy_gbps, gpu, kernel_ms, out_dir, rotation, today, write_report};
use smelt::{DType, Device, Fusion, Result, Tensor};
use std::time::Instant;

const M: usize = 4096;
const NS: [usize; 10] = [
    256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072,
];

/// A `rows x n` input made on the GPU from a `rows x 1024` random block
/// repeated along the rows (host-side generation of 512M values would
/// dominate the run; the values' pattern does not matter for bandwidth).
fn randn_on_gpu(rows: usize, n: usize, dt: DType, seed: u64, dev: &Device) -> Result<Tensor> {
    let w = n.min(1024);
    let block = Tensor::randn([rows, 1, w], dt, seed, dev);
    let x = block
        .expand([rows, n / w, w])
        .reshape([rows, n])
        .contiguous();
    x.realize()?;
    Ok(x)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--replot") {
        let file = args
            .get(i + 1)
            .ok_or_else(|| smelt::Error::Runtime("--replot needs a softmax.json path".into()))?;
        let report: BandwidthReport = read_json(std::path::Path::new(file))?;
        return write_plots(&report);
    }
    let Some(dev) = gpu() else { return Ok(()) };
    let cuda = Device::Cuda(0);
    if args.iter().any(|a| a == "--host-only") {
        return host_overhead(&cuda);
    }
    let mut points = Vec::new();

    let props = smelt::cuda::get_device_properties(&dev)?;
    println!("device: {} (sm_{})", props.name, props.target_sm);
    let ceiling = copy_gbps(&dev, 1 << 30)?;
    println!("device-to-device copy of 1 GiB: {ceiling:.0} GB/s (the ceiling)");

    println!(
        "\nvector add (f32)\n{:>12} {:>10} {:>10} {:>8} {:>10}",
        "n", "ms", "GB/s", "% copy", "% same-size copy"
    );
    for log in (12..=28).step_by(2) {
        let n = 1usize << log;
        let rot = rotation(3 * 4 * n);
        let xs: Vec<(Tensor, Tensor)> = (0..rot as u64)
            .map(|i| {
                let a = randn_on_gpu(1, n, DType::F32, 2 * i, &cuda)?.reshape([n]);
                let b = randn_on_gpu(1, n, DType::F32, 2 * i + 1, &cuda)?.reshape([n]);
                Ok((a, b))
            })
            .collect::<Result<_>>()?;
        let ms = kernel_ms(&dev, |i| {
            let (a, b) = &xs[i % rot];
            (a + b).realize().map(|_| ())
        })?;
        let gbps = 12.0 * n as f64 / (ms * 1e-3) / 1e9;
        let same = copy_gbps(&dev, 6 * n)?;
        println!(
            "{n:>12} {ms:>10.4} {gbps:>10.0} {:>7.1}% {:>9.1}%",
            100.0 * gbps / ceiling,
            100.0 * gbps / same
        );
        points.push(Point {
            series: "vector add".into(),
            x: n as f64,
            y: gbps,
            ms,
        });
        points.push(Point {
            series: "copy (same bytes)".into(),
            x: n as f64,
            y: same,
            ms: 0.0,
        });
    }

    for (name, op) in [("softmax", 0), ("layer_norm", 1)] {
        for dt in [DType::F32, DType::BF16] {
            println!(
                "\n{name} {dt}, M = {M}\n{:>8} {:>10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>8}",
                "N",
                "naive ms",
                "fused ms",
                "naive GB/s",
                "fused GB/s",
                "% copy",
                "% same-size",
                "speedup"
            );
            for n in NS {
                let bytes = 2 * M * n * dt.size();
                let rot = rotation(bytes / 2);
                let xs: Vec<Tensor> = (0..rot)
                    .map(|i| randn_on_gpu(M, n, dt, 100 + i as u64, &cuda))
                    .collect::<Result<_>>()?;
                let run = |mode: Fusion| {
                    kernel_ms(&dev, |i| {
                        let x = &xs[i % rot];
                        let y = if op == 0 {
                            x.softmax(-1)
                        } else {
                            x.layer_norm(-1, None, None, 1e-5)
                        };
                        y.cast(dt).realize_with(mode).map(|_| ())
                    })
                };
                let (naive, fused) = (run(Fusion::Off)?, run(Fusion::On)?);
                let same = copy_gbps(&dev, bytes / 2)?;
                let gb = |ms: f64| bytes as f64 / (ms * 1e-3) / 1e9;
                println!(
                    "{n:>8} {naive:>10.4} {fused:>10.4} {:>10.0} {:>10.0} {:>7.1}% {:>9.1}% {:>7.2}x",
                    gb(naive),
                    gb(fused),
                    100.0 * gb(fused) / ceiling,
                    100.0 * gb(fused) / same,
                    naive / fused
                );
                let series = |s: &str| format!("{name} {dt} {s}");
                points.push(Point {
                    series: series("naive"),
                    x: n as f64,
                    y: gb(naive),
                    ms: naive,
                });
                points.push(Point {
                    series: series("fused"),
                    x: n as f64,
                    y: gb(fused),
                    ms: fused,
                });
                points.push(Point {
                    series: series("copy (same bytes)"),
                    x: n as f64,
                    y: same,
                    ms: 0.0,
                });
                points.push(Point {
                    series: series("copy ceiling (1 GiB)"),
                    x: n as f64,
                    y: ceiling,
                    ms: 0.0,
                });
            }
        }
    }

    host_overhead(&cuda)?;

    let device = format!(
        "{} (sm_{}, {} SMs)",
        props.name, props.target_sm, props.multi_processor_count
    );
    let report = BandwidthReport {
        device,
        date: today(),
        points,
    };
    write_report("softmax.json", &to_json(&report)?)?;
    write_plots(&report)
}

/// Writes the report's SVG plots to the report folder and says where.
fn write_plots(report: &BandwidthReport) -> Result<()> {
    for (file, svg) in report.plots()? {
        write_report(file, &svg)?;
    }
    println!("reports in {}", out_dir().display());
    Ok(())
}

/// Host overhead: a cached realize of the 5-op softmax graph (small, so
/// the GPU never holds the host back), host time only.
fn host_overhead(cuda: &Device) -> Result<()> {
    let x = Tensor::randn([64, 256], DType::F32, 7, cuda);
    // Data, not a generator fused into every timed graph.
    x.realize()?;
    let mut host = Vec::new();
    for i in 0..2000 {
        let e = (&x - x.max_keepdim(1)).exp();
        let y = &e / e.sum_keepdim(1);
        let t0 = Instant::now();
        y.realize()?;
        let dt = t0.elapsed().as_secs_f64() * 1e6;
        if i >= 100 {
            host.push(dt);
        }
        if i % 100 == 0 {
            cuda.synchronize()?;
        }
    }
    println!(
        "\nhost time of a cached softmax realize: {:.1} us (median of {})",
        common::median(&mut host),
        host.len()
    );
    Ok(())
}
