//! GPU benchmarks of the ops beyond softmax and matmul, one section per
//! op family, with the protocol of `benches/softmax.rs`: GPU time by CUDA
//! events around each realize (the GPU kept busy before each run, so
//! launch latency is not counted), median of 50 runs after 10 warm-up
//! runs, inputs rotated when they would fit in L2, GB/s against the
//! device's 1 GiB copy ceiling and a copy of the same bytes.
//!
//! Sections:
//! - scan: `cumsum` in f32 and bf16 along the last axis of `[rows, n]`
//!   (rows * n = 2^24 elements, n from 256 to 2^24: the last is one row),
//!   and along the first axis of `[n, 4096]` (a thread per column).
//!   `benches/reference/torch_ops.py` measures `torch.cumsum` the same way.
//! - sort: `sort` (values and indices) in f32 and bf16 along the last axis
//!   of `[rows, n]` (rows * n = 2^22 elements, n from 256 to 2^20), and
//!   `topk` with k = 8 and 64 in f32 over the same shapes; GB/s counts the
//!   input read once and the values and `i32` indices written.
//!   `torch_ops.py` measures `torch.sort` and `torch.topk` the same way.
//!
//! `cargo bench --bench ops` (prints `skipped` without a GPU). Writes a
//! table to stdout and `ops.json` plus `cumsum.svg` and `sort.svg` to
//! `$SMELT_BENCH_OUT`
//! (default `target/bench`). `cargo bench --bench ops -- --replot FILE`
//! redraws the plots from a saved `ops.json`, without a GPU.

mod common;

use common::report::{read_json, svg, to_json, BandwidthReport, Point};
use common::{copy_gbps, gpu, kernel_ms, out_dir, rotation, today, write_report};
use smelt::{DType, Device, Fusion, Result, Tensor};

/// Elements of every scan input: large enough to stream from memory.
const SCAN_ELEMS: usize = 1 << 24;

/// Row lengths of the last-axis scans (the longest is a single row).
const SCAN_NS: [usize; 7] = [256, 1024, 4096, 16384, 65536, 1 << 20, 1 << 24];

/// Columns of the first-axis scans.
const SCAN_COLS: usize = 4096;

/// Elements of every sort input.
const SORT_ELEMS: usize = 1 << 22;

/// Row lengths of the sorts: on chip up to 16384, radix sort beyond
/// (`topk` of small `k`: a select, on chip up to 4096).
const SORT_NS: [usize; 6] = [256, 1024, 4096, 16384, 65536, 1 << 20];

/// The `k` of the `topk` cases.
const TOPK_KS: [usize; 2] = [8, 64];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--replot") {
        let file = args
            .get(i + 1)
            .ok_or_else(|| smelt::Error::Runtime("--replot needs an ops.json path".into()))?;
        let report: BandwidthReport = read_json(std::path::Path::new(file))?;
        return write_plots(&report);
    }
    let Some(dev) = gpu() else { return Ok(()) };
    let props = smelt::cuda::get_device_properties(&dev)?;
    println!("device: {} (sm_{})", props.name, props.target_sm);
    let ceiling = copy_gbps(&dev, 1 << 30)?;
    println!("device-to-device copy of 1 GiB: {ceiling:.0} GB/s (the ceiling)");

    let mut points = Vec::new();
    scan_section(&dev, ceiling, &mut points)?;
    sort_section(&dev, ceiling, &mut points)?;

    let device = format!(
        "{} (sm_{}, {} SMs)",
        props.name, props.target_sm, props.multi_processor_count
    );
    let report = BandwidthReport {
        device,
        date: today(),
        points,
    };
    write_report("ops.json", &to_json(&report)?)?;
    write_plots(&report)
}

/// `cumsum` GB/s (bytes read and written) for each shape and dtype, with
/// the copy of the same bytes.
fn scan_section(dev: &Device, ceiling: f64, points: &mut Vec<Point>) -> Result<()> {
    for dt in [DType::F32, DType::BF16] {
        println!(
            "\ncumsum {dt}, {SCAN_ELEMS} elements\n{:>16} {:>10} {:>10} {:>8} {:>10}",
            "shape", "ms", "GB/s", "% copy", "% same-size"
        );
        let mut cases: Vec<(String, [usize; 2], isize)> = SCAN_NS
            .iter()
            .map(|&n| (format!("last {dt}"), [SCAN_ELEMS / n, n], -1))
            .collect();
        cases.push((
            format!("first {dt}"),
            [SCAN_ELEMS / SCAN_COLS, SCAN_COLS],
            0,
        ));
        for (series, shape, axis) in cases {
            let bytes = 2 * SCAN_ELEMS * dt.size();
            let rot = rotation(bytes);
            let xs: Vec<Tensor> = (0..rot as u64)
                .map(|i| {
                    let x = Tensor::randn(shape, dt, 300 + i, dev);
                    x.realize()?;
                    Ok(x)
                })
                .collect::<Result<_>>()?;
            let ms = kernel_ms(dev, |i| {
                xs[i % rot]
                    .cumsum(axis)
                    .realize_with(Fusion::On)
                    .map(|_| ())
            })?;
            let gbps = bytes as f64 / (ms * 1e-3) / 1e9;
            let same = copy_gbps(dev, bytes / 2)?;
            println!(
                "{:>16} {ms:>10.4} {gbps:>10.0} {:>7.1}% {:>9.1}%",
                format!("{shape:?}"),
                100.0 * gbps / ceiling,
                100.0 * gbps / same
            );
            // The x axis: the scanned axis's length.
            let x = shape[if axis == 0 { 0 } else { 1 }] as f64;
            points.push(Point {
                series: format!("cumsum {series}"),
                x,
                y: gbps,
                ms,
            });
            points.push(Point {
                series: format!("cumsum copy (same bytes) {series}"),
                x,
                y: same,
                ms: 0.0,
            });
        }
    }
    Ok(())
}

/// `sort` and `topk` GB/s (input read, values and indices written) for
/// each row length.
fn sort_section(dev: &Device, ceiling: f64, points: &mut Vec<Point>) -> Result<()> {
    let mut cases: Vec<(DType, Option<usize>)> = vec![(DType::F32, None), (DType::BF16, None)];
    cases.extend(TOPK_KS.iter().map(|k| (DType::F32, Some(*k))));
    for (dt, k) in cases {
        let name = match k {
            None => format!("sort {dt}"),
            Some(k) => format!("topk k={k} {dt}"),
        };
        println!(
            "\n{name}, {SORT_ELEMS} elements\n{:>16} {:>10} {:>10} {:>8}",
            "shape", "ms", "GB/s", "% copy"
        );
        for n in SORT_NS {
            let shape = [SORT_ELEMS / n, n];
            let kept = k.unwrap_or(n).min(n);
            let out = SORT_ELEMS / n * kept * (dt.size() + 4);
            let bytes = SORT_ELEMS * dt.size() + out;
            let rot = rotation(bytes);
            let xs: Vec<Tensor> = (0..rot as u64)
                .map(|i| {
                    let x = Tensor::randn(shape, dt, 400 + i, dev);
                    x.realize()?;
                    Ok(x)
                })
                .collect::<Result<_>>()?;
            let ms = kernel_ms(dev, |i| {
                let x = &xs[i % rot];
                let (v, ix) = match k {
                    None => x.sort(-1, false),
                    Some(k) => x.topk(k, -1, true),
                };
                smelt::realize_all(&[&v, &ix], Fusion::On)
            })?;
            let gbps = bytes as f64 / (ms * 1e-3) / 1e9;
            println!(
                "{:>16} {ms:>10.4} {gbps:>10.0} {:>7.1}%",
                format!("{shape:?}"),
                100.0 * gbps / ceiling
            );
            points.push(Point {
                series: name.clone(),
                x: n as f64,
                y: gbps,
                ms,
            });
        }
    }
    Ok(())
}

/// Writes the plots of the report's sections and says where.
fn write_plots(report: &BandwidthReport) -> Result<()> {
    let scans: Vec<Point> = report
        .points
        .iter()
        .filter(|p| p.series.starts_with("cumsum"))
        .cloned()
        .collect();
    if !scans.is_empty() {
        let title = format!("cumsum, {SCAN_ELEMS} elements: GB/s vs scanned length");
        write_report(
            "cumsum.svg",
            &svg(&scans, &title, "scanned length", "GB/s")?,
        )?;
    }
    let sorts: Vec<Point> = report
        .points
        .iter()
        .filter(|p| p.series.starts_with("sort") || p.series.starts_with("topk"))
        .cloned()
        .collect();
    if !sorts.is_empty() {
        let title = format!("sort and topk, {SORT_ELEMS} elements: GB/s vs row length");
        write_report("sort.svg", &svg(&sorts, &title, "row length", "GB/s")?)?;
    }
    println!("reports in {}", out_dir().display());
    Ok(())
}
