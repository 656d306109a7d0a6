//! GPU benchmarks of the ops beyond softmax and matmul, one section per
//! op family, with the protocol of `benches/softmax.rs`: GPU time by CUDA
//! events around each realize (the GPU kept busy before each run, so
//! launch latency is not counted), median of 50 runs after 10 warm-up
//! runs, inputs rotated when they would fit in L2, GB/s against the
//! device's 1 GiB copy ceiling (stored in `ops.json` as the series
//! `copy ceiling (1 GiB)`). Every case states the bytes it moves (reads
//! plus writes) next to its timing, so GB/s is what the op must move, not
//! what a kernel happens to touch.
//!
//! Sections:
//! - scan: `cumsum` in f32 and bf16 along the last axis of `[rows, n]`
//!   (rows * n = 2^24 elements, n from 256 to 2^24: the last is one row),
//!   along the first axis of `[n, 4096]` and the middle one of
//!   `[64, n, 64]` (column tiles), with a copy of the same bytes.
//! - sort: `sort` (values and indices) in f32 and bf16 along the last axis
//!   of `[rows, n]` (rows * n = 2^22 elements, n from 256 to 2^20), and
//!   `topk` with k = 8 and 64 in f32 over the same shapes.
//! - gather: `embedding` of `[50257, dim]` tables (dim 768 and 4096, f16
//!   and f32) at 4096 and 16384 random `i64` ids (only the ids rotate: the
//!   tables exceed L2 and random rows rarely repeat); `index_select` along
//!   axis 0 of `[32768, 1024]` with random `i32` indices; `gather` along
//!   the last axis (take_along_axis) of `[rows, n]` (2^24 elements) with
//!   a random `i64` index of the same shape.
//! - cat: `Tensor::cat` of 2, 4 and 8 equal inputs along the first and
//!   the last axis into `[4096, 4096]`, f32 and bf16.
//!
//! `benches/reference/torch_ops.py` measures the torch equivalent of every
//! case the same way and writes `torch_ops.json` with the same series
//! names; `cargo bench --bench ops -- --compare ops.json torch_ops.json`
//! prints each case with its % of the copy ceiling and the ratio to torch
//! (torch's time over smelt's), without a GPU.
//!
//! `cargo bench --bench ops` (prints `skipped` without a GPU). Writes a
//! table to stdout and `ops.json` plus `cumsum.svg`, `sort.svg`,
//! `embedding.svg`, `gather.svg` and `cat.svg` to `$SMELT_BENCH_OUT`
//! (default `target/bench`). `-- --replot FILE` redraws the plots from a
//! saved `ops.json`, without a GPU. `-- --smoke` runs every section at
//! small sizes on the default device (the CPU interpreter here, where the
//! copy ceiling is a smelt copy kernel): it checks the bench end to end,
//! its figures mean nothing.

mod common;

use common::report::{read_json, svg, to_json, BandwidthReport, Point, CEILING};
use common::{copy_gbps, gpu, kernel_ms, out_dir, rotation, today, write_report};
use smelt::{DType, Device, Fusion, Result, Tensor};

/// The sizes of every section: the real run, or a smoke run.
struct Sizes {
    /// Elements of every scan input: large enough to stream from memory.
    scan_elems: usize,
    /// Row lengths of the last-axis scans (the longest is a single row).
    scan_ns: &'static [usize],
    /// Columns of the first-axis scans.
    scan_cols: usize,
    /// Elements of every sort input.
    sort_elems: usize,
    /// Row lengths of the sorts: on chip up to 16384, radix sort beyond
    /// (`topk` of small `k`: a select, on chip up to 4096).
    sort_ns: &'static [usize],
    /// The `k` of the `topk` cases.
    topk_ks: &'static [usize],
    /// Rows of the embedding tables (GPT-2's vocabulary).
    vocab: usize,
    /// Row lengths of the embedding tables.
    dims: &'static [usize],
    /// Ids looked up per embedding.
    ids: &'static [usize],
    /// Shape of the `index_select` source.
    select_src: [usize; 2],
    /// Indices per `index_select`.
    selects: &'static [usize],
    /// Elements of every take_along_axis source (and index).
    gather_elems: usize,
    /// Row lengths of the take_along_axis cases.
    gather_ns: &'static [usize],
    /// Shape of every `cat` result.
    cat_shape: [usize; 2],
    /// Inputs per `cat`.
    cat_inputs: &'static [usize],
}

/// The sizes measured on the GPU.
const FULL: Sizes = Sizes {
    scan_elems: 1 << 24,
    scan_ns: &[256, 1024, 4096, 16384, 65536, 1 << 20, 1 << 24],
    scan_cols: 4096,
    sort_elems: 1 << 22,
    sort_ns: &[256, 1024, 4096, 16384, 65536, 1 << 20],
    topk_ks: &[8, 64],
    vocab: 50257,
    dims: &[768, 4096],
    ids: &[4096, 16384],
    select_src: [32768, 1024],
    selects: &[4096, 16384, 32768],
    gather_elems: 1 << 24,
    gather_ns: &[256, 4096, 65536],
    cat_shape: [4096, 4096],
    cat_inputs: &[2, 4, 8],
};

/// Sizes small enough for the CPU interpreter, with every kind of case
/// (a sort longer than the on-chip limit of 16384 included).
const SMOKE: Sizes = Sizes {
    scan_elems: 1 << 12,
    scan_ns: &[16, 256, 4096],
    scan_cols: 64,
    sort_elems: 1 << 15,
    sort_ns: &[16, 256, 32768],
    topk_ks: &[8],
    vocab: 1000,
    dims: &[8, 64],
    ids: &[64, 256],
    select_src: [512, 64],
    selects: &[64, 256],
    gather_elems: 1 << 12,
    gather_ns: &[16, 256],
    cat_shape: [64, 64],
    cat_inputs: &[2, 8],
};

/// The header of every section's table (one row per case).
const HEADER: &str = "          shape        ms       GB/s   % copy";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str, n: usize| -> Result<Option<Vec<&String>>> {
        let Some(i) = args.iter().position(|a| a == flag) else {
            return Ok(None);
        };
        let got: Vec<&String> = args.iter().skip(i + 1).take(n).collect();
        if got.len() < n {
            return Err(smelt::Error::Runtime(format!("{flag} needs {n} file(s)")));
        }
        Ok(Some(got))
    };
    if let Some(f) = arg("--replot", 1)? {
        let report: BandwidthReport = read_json(std::path::Path::new(f[0]))?;
        return write_plots(&report);
    }
    if let Some(f) = arg("--compare", 2)? {
        let ours: BandwidthReport = read_json(std::path::Path::new(f[0]))?;
        let torch: BandwidthReport = read_json(std::path::Path::new(f[1]))?;
        print!("{}", ours.compare(&torch, "torch"));
        return Ok(());
    }
    let smoke = args.iter().any(|a| a == "--smoke");
    let (dev, sizes, device) = if smoke {
        let dev = Device::default_device();
        println!("smoke run on {dev}: small sizes, figures mean nothing");
        (dev, &SMOKE, format!("smoke run on {dev}"))
    } else {
        let Some(dev) = gpu() else { return Ok(()) };
        let props = smelt::cuda::get_device_properties(&dev)?;
        println!("device: {} (sm_{})", props.name, props.target_sm);
        let device = format!(
            "{} (sm_{}, {} SMs)",
            props.name, props.target_sm, props.multi_processor_count
        );
        (dev, &FULL, device)
    };
    let ceiling_bytes = if smoke { 1 << 20 } else { 1 << 30 };
    let ceiling = copy_bandwidth(&dev, ceiling_bytes)?;
    println!("copy of {ceiling_bytes} bytes: {ceiling:.0} GB/s (the ceiling)");

    let mut b = Bench {
        dev,
        sizes,
        ceiling,
        points: vec![Point {
            series: CEILING.into(),
            x: ceiling_bytes as f64,
            y: ceiling,
            ms: 0.0,
        }],
    };
    b.scans()?;
    b.sorts()?;
    b.embeddings()?;
    b.selects()?;
    b.take_along_axis()?;
    b.cats()?;

    let report = BandwidthReport {
        device,
        date: today(),
        points: b.points,
    };
    write_report("ops.json", &to_json(&report)?)?;
    write_plots(&report)
}

/// Copy bandwidth (bytes read and written over time) of a buffer of
/// `bytes`: the driver's device-to-device copy on a GPU; on the CPU (smoke
/// runs), which has no such copy, a smelt kernel negating as many `f32`s.
fn copy_bandwidth(dev: &Device, bytes: usize) -> Result<f64> {
    if matches!(dev, Device::Cuda(_)) {
        return copy_gbps(dev, bytes);
    }
    // Random data, realized: a realized constant would stay a view that
    // the kernel computes instead of reading.
    let x = Tensor::randn([bytes / 4], DType::F32, 0, dev);
    x.realize()?;
    let ms = kernel_ms(dev, |_| x.neg().realize_with(Fusion::On).map(|_| ()))?;
    Ok(gbps(2 * (bytes / 4) * 4, ms))
}

/// GB/s of `bytes` moved in `ms` milliseconds.
fn gbps(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// `rot` realized inputs, the `i`-th made by `make(i)`.
fn rotated(rot: usize, mut make: impl FnMut(u64) -> Tensor) -> Result<Vec<Tensor>> {
    (0..rot as u64)
        .map(|i| {
            let x = make(i);
            x.realize()?;
            Ok(x)
        })
        .collect()
}

/// Random indices below `bound` of dtype `dt`, shaped `shape`.
fn indices(bound: usize, shape: &[usize], dt: DType, seed: u64, dev: &Device) -> Tensor {
    Tensor::randint(0, bound as i64, shape, seed, dev).cast(dt)
}

/// One run of the bench: where, how large, and the points so far.
struct Bench {
    dev: Device,
    sizes: &'static Sizes,
    /// The copy ceiling in GB/s.
    ceiling: f64,
    points: Vec<Point>,
}

impl Bench {
    /// Times `run` (its kernels, median), prints a table row and records
    /// the point `(series, x)`; `bytes` is what the op reads plus writes.
    /// With `same`, the GB/s of a copy of the same bytes, the row ends with
    /// the % of it too.
    fn measure(
        &mut self,
        series: &str,
        x: usize,
        shape: &str,
        bytes: usize,
        same: Option<f64>,
        run: impl FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        let ms = kernel_ms(&self.dev, run)?;
        let y = gbps(bytes, ms);
        let same = same.map_or(String::new(), |c| format!(" {:>10.1}%", 100.0 * y / c));
        println!(
            "{shape:>15} {ms:>9.4} {y:>10.0} {:>7.1}%{same}",
            100.0 * y / self.ceiling
        );
        self.points.push(Point {
            series: series.into(),
            x: x as f64,
            y,
            ms,
        });
        Ok(())
    }

    /// `cumsum` along the last axis of `[rows, n]` and the first of
    /// `[n, cols]`, with a copy of the same bytes. Bytes: the input read
    /// and the result written.
    fn scans(&mut self) -> Result<()> {
        let s = self.sizes;
        for dt in [DType::F32, DType::BF16] {
            println!(
                "\ncumsum {dt}, {} elements\n{HEADER} {:>11}",
                s.scan_elems, "% same-size"
            );
            let mut cases: Vec<(&str, Vec<usize>, usize)> = s
                .scan_ns
                .iter()
                .map(|&n| ("last", vec![s.scan_elems / n, n], 1))
                .collect();
            let n = s.scan_elems / s.scan_cols;
            cases.push(("first", vec![n, s.scan_cols], 0));
            // The middle axis of `[64, n, cols / 64]`: column tiles too.
            cases.push(("middle", vec![64, n, s.scan_cols / 64], 1));
            for (along, shape, axis) in cases {
                let bytes = 2 * s.scan_elems * dt.size();
                let rot = rotation(bytes);
                let xs = rotated(rot, |i| {
                    Tensor::randn(shape.as_slice(), dt, 300 + i, &self.dev)
                })?;
                // The x axis: the scanned axis's length.
                let x = shape[axis];
                let same = copy_bandwidth(&self.dev, bytes / 2)?;
                self.measure(
                    &format!("cumsum {along} {dt}"),
                    x,
                    &format!("{shape:?}"),
                    bytes,
                    Some(same),
                    |i| {
                        xs[i % rot]
                            .cumsum(axis as isize)
                            .realize_with(Fusion::On)
                            .map(|_| ())
                    },
                )?;
                self.points.push(Point {
                    series: format!("cumsum copy (same bytes) {along} {dt}"),
                    x: x as f64,
                    y: same,
                    ms: 0.0,
                });
            }
        }
        Ok(())
    }

    /// `sort` and `topk` along the last axis. Bytes: the input read once
    /// and the values and `i32` indices written (smelt's indices are
    /// `i64`; 4 bytes keeps the figures comparable with earlier runs).
    fn sorts(&mut self) -> Result<()> {
        let s = self.sizes;
        let mut cases: Vec<(DType, Option<usize>)> = vec![(DType::F32, None), (DType::BF16, None)];
        cases.extend(s.topk_ks.iter().map(|k| (DType::F32, Some(*k))));
        for (dt, k) in cases {
            let name = match k {
                None => format!("sort {dt}"),
                Some(k) => format!("topk k={k} {dt}"),
            };
            println!("\n{name}, {} elements\n{HEADER}", s.sort_elems);
            for &n in s.sort_ns {
                let shape = [s.sort_elems / n, n];
                let kept = k.unwrap_or(n).min(n);
                let out = s.sort_elems / n * kept * (dt.size() + 4);
                let bytes = s.sort_elems * dt.size() + out;
                let rot = rotation(bytes);
                let xs = rotated(rot, |i| Tensor::randn(shape, dt, 400 + i, &self.dev))?;
                self.measure(&name, n, &format!("{shape:?}"), bytes, None, |i| {
                    let x = &xs[i % rot];
                    let (v, ix) = match k {
                        None => x.sort(-1, false),
                        Some(k) => x.topk(k, -1, true),
                    };
                    smelt::realize_all(&[&v, &ix], Fusion::On)
                })?;
            }
        }
        Ok(())
    }

    /// `table.embedding(&ids)` with random `i64` ids. Bytes: the ids read,
    /// each named row read once and the rows written.
    fn embeddings(&mut self) -> Result<()> {
        let s = self.sizes;
        for dt in [DType::F16, DType::F32] {
            for &dim in s.dims {
                let series = format!("embedding {dt} dim {dim}");
                println!("\n{series}, vocab {}\n{HEADER}", s.vocab);
                let table = Tensor::randn([s.vocab, dim], dt, 500, &self.dev);
                table.realize()?;
                for &n in s.ids {
                    let bytes = n * DType::I64.size() + 2 * n * dim * dt.size();
                    let rot = rotation(bytes);
                    let ids = rotated(rot, |i| {
                        indices(s.vocab, &[n], DType::I64, 510 + i, &self.dev)
                    })?;
                    self.measure(&series, n, &format!("{n} ids"), bytes, None, |i| {
                        table
                            .embedding(&ids[i % rot])
                            .realize_with(Fusion::On)
                            .map(|_| ())
                    })?;
                }
            }
        }
        Ok(())
    }

    /// `x.index_select(0, &index)` with random `i32` indices. Bytes: the
    /// indices read, each named row read once and the rows written.
    fn selects(&mut self) -> Result<()> {
        let s = self.sizes;
        let [rows, dim] = s.select_src;
        for dt in [DType::F32, DType::BF16] {
            let series = format!("index_select axis 0 {dt}");
            println!("\n{series}, source {:?}\n{HEADER}", s.select_src);
            let x = Tensor::randn(s.select_src, dt, 600, &self.dev);
            x.realize()?;
            for &n in s.selects {
                let bytes = n * DType::I32.size() + 2 * n * dim * dt.size();
                let rot = rotation(bytes);
                let index = rotated(rot, |i| indices(rows, &[n], DType::I32, 610 + i, &self.dev))?;
                self.measure(&series, n, &format!("{n} rows"), bytes, None, |i| {
                    x.index_select(0, &index[i % rot])
                        .realize_with(Fusion::On)
                        .map(|_| ())
                })?;
            }
        }
        Ok(())
    }

    /// `x.gather(-1, &index)` (take_along_axis) with a random `i64` index
    /// of `x`'s shape. Bytes: the index read, one source element read per
    /// index and the result written.
    fn take_along_axis(&mut self) -> Result<()> {
        let s = self.sizes;
        for dt in [DType::F32, DType::BF16] {
            let series = format!("gather last {dt}");
            println!("\n{series}, {} elements\n{HEADER}", s.gather_elems);
            for &n in s.gather_ns {
                let shape = [s.gather_elems / n, n];
                let bytes = s.gather_elems * (DType::I64.size() + 2 * dt.size());
                let rot = rotation(bytes);
                let xs = rotated(rot, |i| Tensor::randn(shape, dt, 700 + i, &self.dev))?;
                let index = rotated(rot, |i| indices(n, &shape, DType::I64, 710 + i, &self.dev))?;
                self.measure(&series, n, &format!("{shape:?}"), bytes, None, |i| {
                    xs[i % rot]
                        .gather(-1, &index[i % rot])
                        .realize_with(Fusion::On)
                        .map(|_| ())
                })?;
            }
        }
        Ok(())
    }

    /// `Tensor::cat` of equal inputs along the first and the last axis.
    /// Bytes: every input read and the result written.
    fn cats(&mut self) -> Result<()> {
        let s = self.sizes;
        let [rows, cols] = s.cat_shape;
        for dt in [DType::F32, DType::BF16] {
            for axis in [0isize, -1] {
                let series = format!("cat axis {axis} {dt}");
                println!("\n{series}, result {:?}\n{HEADER}", s.cat_shape);
                for &n in s.cat_inputs {
                    let part = if axis == 0 {
                        [rows / n, cols]
                    } else {
                        [rows, cols / n]
                    };
                    let bytes = 2 * rows * cols * dt.size();
                    let rot = rotation(bytes);
                    let sets: Vec<Vec<Tensor>> = (0..rot as u64)
                        .map(|r| {
                            rotated(n, |i| Tensor::randn(part, dt, 800 + 8 * r + i, &self.dev))
                        })
                        .collect::<Result<_>>()?;
                    self.measure(&series, n, &format!("{n} x {part:?}"), bytes, None, |i| {
                        let set: Vec<&Tensor> = sets[i % rot].iter().collect();
                        Tensor::cat(&set, axis).realize_with(Fusion::On).map(|_| ())
                    })?;
                }
            }
        }
        Ok(())
    }
}

/// A plot of `ops.json`: its file, the series prefixes it draws, whether
/// it draws the copy ceiling (cumsum has same-size copies instead; sorts
/// are far below it), its title and x label.
type Plot = (
    &'static str,
    &'static [&'static str],
    bool,
    &'static str,
    &'static str,
);

const PLOTS: [Plot; 5] = [
    (
        "cumsum.svg",
        &["cumsum"],
        false,
        "cumsum: GB/s vs scanned length",
        "scanned length",
    ),
    (
        "sort.svg",
        &["sort", "topk"],
        false,
        "sort and topk: GB/s vs row length",
        "row length",
    ),
    (
        "embedding.svg",
        &["embedding", "index_select"],
        true,
        "embedding and index_select: GB/s vs rows looked up",
        "rows looked up",
    ),
    (
        "gather.svg",
        &["gather"],
        true,
        "gather along the last axis: GB/s vs row length",
        "row length",
    ),
    ("cat.svg", &["cat"], true, "cat: GB/s vs inputs", "inputs"),
];

/// Writes the plots of the sections the report has and says where.
fn write_plots(report: &BandwidthReport) -> Result<()> {
    for (file, prefixes, ceiling, title, xlabel) in PLOTS {
        let sel = report.select(prefixes, ceiling);
        if !sel.is_empty() {
            let title = format!("{title}; {}, {}", report.device, report.date);
            write_report(file, &svg(&sel, &title, xlabel, "GB/s")?)?;
        }
    }
    println!("reports in {}", out_dir().display());
    Ok(())
}
