//! Matmul throughput on the GPU (issue 5): TFLOP/s of smelt's kernels and
//! of cuBLAS (called through cudarc, in the same process, on the same GPU
//! and the same operands) for square sizes and transformer shapes in f16,
//! bf16 and f32; with B given as `[n, k]` transposed (k-contiguous, the
//! tensor-core path's fast layout) and as row-major `[k, n]`; f32 also with
//! TF32 products; and matmul + bias + gelu, smelt's one fused kernel against
//! a cuBLAS GEMM followed by smelt's bias+gelu kernel over its output (the
//! sum of the two times). GPU time from events around each kernel (each
//! cuBLAS call), with the GPU kept busy before each run so launch latency
//! is not counted, median of 50 runs after 10 warm-up runs.
//!
//! `cargo bench --bench matmul` (prints `skipped` without a GPU, and
//! `cuBLAS: not found (...), skipped` without cuBLAS, leaving its columns
//! empty). Writes a table to stdout, and `matmul.json` and
//! `matmul_square.svg` (TFLOP/s against the square size, smelt and cuBLAS
//! per dtype) to `$SMELT_BENCH_OUT` (default `target/bench`).
//! `cargo bench --bench matmul -- --replot FILE` redraws the plot from a
//! saved `matmul.json`, without a GPU. `SMELT_BENCH_DTYPES=float16,bfloat16` limits
//! the dtypes and `SMELT_BENCH_SHAPES=1x1024x1024x1024,1x2048x2048x2048`
//! (`batch x m x n x k`, any sizes) the shapes (the first run of each large shape
//! also autotunes, which makes a full run several minutes long).
//! `SMELT_MATMUL_TILE=<tile>` and `SMELT_MATMUL_SPLITS=<n>` (printed at the
//! top) time one tensor-core tile and split-K count on every shape (where
//! the tile applies; the autotuner steps aside while either is set);
//! `SMELT_TUNE=0` times the untimed default.
//!
//! FP8 (issue 15): after the other rows, square products (2048, 4096,
//! 8192) of e4m3 operands with per-tensor scales (0-d f32 tensors) to
//! bf16, smelt's `scaled_mm` with B given transposed (`[n, k]`, PyTorch's
//! `_scaled_mm` layout) and row-major, against `cublasLtMatmul` on the
//! same bytes (e4m3, "TN", scale pointers, bf16 out) with fast
//! accumulation (the tensor cores sum all of `k`, as smelt's kernel does)
//! and without (cuBLASLt's default, which adds partial sums in f32 every
//! few MMAs), and cuBLAS's bf16 GEMM at the same shape for scale.
//! `cargo bench --bench matmul -- --only fp8` runs only these rows,
//! `--only dense` only the others (`SMELT_BENCH_SHAPES` filters both).
//!
//! Finding cuBLAS: cudarc opens `libcublas.so` or `libcublas.so.12` (and
//! older) from the loader's path. When neither opens, the bench finds a
//! `libcublas.so.N` in `$SMELT_CUBLAS` (the file or its folder), the folders
//! on `LD_LIBRARY_PATH`, python3's `nvidia/*/lib` (the pip wheel
//! nvidia-cublas: `nvidia/cu13/lib/libcublas.so.13` for CUDA 13) or
//! `/usr/local/cuda/lib64`, links it as `$TMPDIR/smelt-cublas/libcublas.so`
//! and re-runs itself with `LD_LIBRARY_PATH=$TMPDIR/smelt-cublas:<its
//! folder>:$LD_LIBRARY_PATH`; no variable needs setting by hand. The same by
//! hand: `ln -s <dir>/libcublas.so.13 /tmp/cb/libcublas.so` and
//! `LD_LIBRARY_PATH=/tmp/cb:<dir> cargo bench --bench matmul`.

mod common;
mod cublas;

use common::report::{read_json, to_json, MatmulPoint, MatmulReport};
use common::{gpu, kernel_ms, today, write_report};
use cublas::{BLayout, Blas, Fp8Gemm, Gemm, Math};
use smelt::{DType, Device, Precision, Result, Tensor};
use std::fmt::Write as _;

/// (batch, m, n, k): square sizes, a product of few output tiles and a
/// long `k` (split-K's case), a transformer MLP's up and down
/// projections, and attention-sized batched products.
const SHAPES: [(usize, usize, usize, usize); 8] = [
    (1, 1024, 1024, 1024),
    (1, 1024, 1024, 4096),
    (1, 2048, 2048, 2048),
    (1, 4096, 4096, 4096),
    (1, 8192, 8192, 8192),
    (1, 4096, 11008, 4096),
    (1, 4096, 4096, 11008),
    (32, 512, 512, 64),
];

/// Square sizes of the FP8 rows.
const FP8_SIZES: [usize; 3] = [2048, 4096, 8192];

/// The FP8 rows' columns: smelt's and cuBLASLt's like-for-like pair
/// first (named as the other rows' B^T pair, so the square plot draws
/// FP8 beside f16 and bf16), then the rest.
const FP8_COLUMNS: [&str; 5] = [
    "smelt B^T",
    "cuBLAS B^T",
    "cuBLASLt B^T (f32 promotion)",
    "smelt B",
    "cuBLAS bf16 B^T",
];

/// The measured columns (milliseconds per run), in report order: each
/// smelt column is followed by its cuBLAS counterpart.
const COLUMNS: [&str; 8] = [
    "smelt B^T",
    "cuBLAS B^T",
    "smelt B",
    "cuBLAS B",
    "smelt TF32 B^T",
    "cuBLAS TF32 B^T",
    "smelt mm+bias+gelu",
    "cuBLAS mm + smelt bias+gelu",
];

/// The table's column groups: a title and the index of its smelt column
/// (the cuBLAS one follows).
const GROUPS: [(&str, usize); 4] = [
    ("B^T", 0),
    ("B", 2),
    ("TF32 (f32), B^T", 4),
    ("+bias+gelu, B^T", 6),
];

/// One shape and dtype, and its columns' times (`None`: not measured).
struct Row {
    shape: (usize, usize, usize, usize),
    dtype: DType,
    ms: [Option<f64>; 8],
}

impl Row {
    /// TFLOP/s of column `i`.
    fn tflops(&self, i: usize) -> Option<f64> {
        let (bs, m, n, k) = self.shape;
        let flops = 2.0 * (bs * m * n * k) as f64;
        self.ms[i].map(|ms| flops / (ms * 1e-3) / 1e12)
    }
}

/// The operands of one row, on the GPU: A `[b, m, k]`, B stored as `[b, n,
/// k]` (`bt`) and as `[b, k, n]` (`b`), and the bias `[n]`.
struct Operands {
    a: Tensor,
    bt: Tensor,
    b: Tensor,
    bias: Tensor,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--replot") {
        let file = args
            .get(i + 1)
            .ok_or_else(|| smelt::Error::Runtime("--replot needs a matmul.json path".into()))?;
        let report: MatmulReport = read_json(std::path::Path::new(file))?;
        return save("matmul_square.svg", &report.square_svg()?);
    }
    // Finding cuBLAS may re-run the process, so it comes before any work.
    let loadable = cublas::make_loadable();
    let Some(dev) = gpu() else { return Ok(()) };
    // `cublas` describes the cuBLAS columns' source, for the table and JSON.
    let (blas, cublas) = match loadable.and_then(|()| cublas::load()) {
        Ok(b) => {
            let from = b.file.as_ref().map(|f| format!(" ({f})"));
            let what = format!(
                "cuBLAS {} through cudarc{}",
                b.version,
                from.unwrap_or_default()
            );
            (Some(b), what)
        }
        Err(why) => {
            println!("cuBLAS: not found ({why}), skipped");
            (None, format!("cuBLAS not found ({why})"))
        }
    };
    let props = smelt::cuda::get_device_properties(&dev)?;
    let device = format!(
        "{} (sm_{}, {} SMs)",
        props.name, props.target_sm, props.multi_processor_count
    );
    println!("device: {device}; {cublas}");
    println!(
        "TFLOP/s; ratio = smelt / cuBLAS. B^T: B stored [n, k]; B: stored [k, n]. \
         +bias+gelu: smelt's one kernel vs cuBLAS's GEMM + smelt's bias+gelu kernel."
    );
    for knob in ["SMELT_MATMUL_TILE", "SMELT_MATMUL_SPLITS", "SMELT_TUNE"] {
        let v = std::env::var(knob).unwrap_or_else(|_| "unset".into());
        println!("{knob}: {v}");
    }
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let mut rows = Vec::new();
    let mut points = Vec::new();
    if only != Some("fp8") {
        dense_rows(&dev, blas.as_ref(), &mut rows)?;
        points = cells(&rows);
    }
    if only != Some("dense") {
        points.extend(fp8_rows(&dev, blas.as_ref())?);
    }
    let report = MatmulReport {
        device,
        date: today(),
        cublas,
        points,
    };
    save("matmul.json", &to_json(&report)?)?;
    save("matmul_square.svg", &report.square_svg()?)
}

/// The dense rows' shapes: those `SMELT_BENCH_SHAPES` names (any
/// `batch x m x n x k`, in its order; names that do not parse are
/// skipped), else [`SHAPES`].
fn dense_shapes() -> Vec<(usize, usize, usize, usize)> {
    let Ok(names) = std::env::var("SMELT_BENCH_SHAPES") else {
        return SHAPES.to_vec();
    };
    names
        .split(',')
        .filter_map(|name| {
            let d: Vec<usize> = name
                .split('x')
                .map(|x| x.trim().parse().ok())
                .collect::<Option<_>>()?;
            match d[..] {
                [bs, m, n, k] => Some((bs, m, n, k)),
                _ => None,
            }
        })
        .collect()
}

/// Whether `SMELT_BENCH_SHAPES` leaves out the shape named `name`.
fn shape_left_out(name: &str) -> bool {
    std::env::var("SMELT_BENCH_SHAPES")
        .ok()
        .is_some_and(|w| !w.split(',').any(|x| x == name))
}

/// The f16, bf16 and f32 rows (each printed as it is measured).
fn dense_rows(dev: &Device, blas: Option<&Blas>, rows: &mut Vec<Row>) -> Result<()> {
    print_header();
    let wanted = std::env::var("SMELT_BENCH_DTYPES").ok();
    let dtypes = [DType::F16, DType::BF16, DType::F32]
        .into_iter()
        .filter(|dt| {
            wanted
                .as_ref()
                .is_none_or(|w| w.split(',').any(|x| x == dt.name()))
        });
    for dt in dtypes {
        for shape in dense_shapes() {
            let (bs, m, n, k) = shape;
            if dt == DType::F32 && m * n * k > 4096 * 4096 * 4096 {
                continue; // the generic f32 path is slow; skip the largest
            }
            let ops = operands(shape, dt)?;
            let mut row = Row {
                shape,
                dtype: dt,
                ms: [None; 8],
            };
            smelt_columns(dev, &ops, &mut row)?;
            if let Some(blas) = blas {
                // A cuBLAS failure costs its cells, not the run.
                if let Err(e) = cublas_columns(dev, blas, &ops, &mut row) {
                    eprintln!("{bs}x{m}x{n}x{k} {}: {e}", dt.name());
                }
            }
            println!("{}", format_row(&row));
            rows.push(row);
        }
    }
    Ok(())
}

/// The FP8 rows (module docs), printed as measured; their report cells.
fn fp8_rows(dev: &Device, blas: Option<&Blas>) -> Result<Vec<MatmulPoint>> {
    println!(
        "\nFP8 e4m3 x e4m3 -> bf16, per-tensor scales: TFLOP/s. smelt scaled_mm vs \
         cuBLASLt with fast accumulation (like for like); cuBLASLt with f32 promotion, \
         smelt with B row-major and cuBLAS bf16 for scale."
    );
    if let Some(Err(why)) = blas.map(|b| &b.lt) {
        println!("cuBLASLt: not found ({why}), its columns skipped");
    }
    println!(
        "{:>6} | {:>7} {:>8} {:>5} | {:>8} {:>7} {:>7}",
        "m=n=k", "smelt", "cuBLASLt", "ratio", "Lt promo", "smelt B", "bf16"
    );
    let cuda = Device::Cuda(0);
    let mut points = Vec::new();
    for size in FP8_SIZES {
        if shape_left_out(&format!("1x{size}x{size}x{size}")) {
            continue;
        }
        let to_fp8 = |seed| -> Result<(Tensor, Tensor)> {
            let (q, scale) =
                Tensor::randn([size, size], DType::F32, seed, &cuda).to_fp8(DType::F8E4M3);
            smelt::realize_all(&[&q, &scale], smelt::Fusion::On)?;
            Ok((q, scale))
        };
        // A [m, k]; B stored [n, k] (`bt`) and [k, n] (`b`).
        let ((a, sa), (bt, sb)) = (to_fp8(1)?, to_fp8(2)?);
        let b = bt.t().contiguous();
        b.realize()?;
        let mut ms = [None; 5];
        ms[0] = Some(kernel_ms(dev, |_| {
            a.scaled_mm(&bt.t(), &sa, &sb, DType::BF16)
                .realize()
                .map(|_| ())
        })?);
        ms[3] = Some(kernel_ms(dev, |_| {
            a.scaled_mm(&b, &sa, &sb, DType::BF16).realize().map(|_| ())
        })?);
        if let Some(blas) = blas {
            if let Err(e) = cublas_fp8_columns(dev, blas, [&a, &bt, &sa, &sb], size, &mut ms) {
                eprintln!("FP8 {size}^3: {e}");
            }
        }
        let flops = 2.0 * (size as f64).powi(3);
        let tflops = |c: usize| ms[c].map(|ms: f64| flops / (ms * 1e-3) / 1e12);
        let cell =
            |v: Option<f64>, w: usize| v.map_or(format!("{:>w$}", "-"), |v| format!("{v:>w$.1}"));
        let ratio = tflops(0).zip(tflops(1)).map(|(o, t)| 100.0 * o / t);
        println!(
            "{size:>6} | {} {} {} | {} {} {}",
            cell(tflops(0), 7),
            cell(tflops(1), 8),
            ratio.map_or(format!("{:>5}", "-"), |r| format!("{r:>4.0}%")),
            cell(tflops(2), 8),
            cell(tflops(3), 7),
            cell(tflops(4), 7)
        );
        for (c, series) in FP8_COLUMNS.iter().enumerate() {
            if let (Some(ms), Some(tflops)) = (ms[c], tflops(c)) {
                let dtype = if c == 4 { DType::BF16 } else { DType::F8E4M3 };
                points.push(MatmulPoint {
                    series: series.to_string(),
                    batch: 1,
                    m: size,
                    n: size,
                    k: size,
                    dtype: dtype.name().to_string(),
                    ms,
                    tflops,
                });
            }
        }
    }
    Ok(points)
}

/// cuBLAS's FP8 columns on smelt's operands `[a, bt, scale_a, scale_b]`
/// (`size` square): cuBLASLt with and without fast accumulation, and
/// cuBLAS's bf16 GEMM on bf16 copies.
fn cublas_fp8_columns(
    dev: &Device,
    blas: &Blas,
    [a, bt, sa, sb]: [&Tensor; 4],
    size: usize,
    ms: &mut [Option<f64>; 5],
) -> Result<()> {
    let cuda = Device::Cuda(0);
    let c = Tensor::zeros([size, size], DType::BF16, &cuda).contiguous();
    let (a16, bt16) = (a.cast(DType::BF16), bt.cast(DType::BF16));
    let (sa, sb) = (sa.contiguous(), sb.contiguous());
    smelt::realize_all(&[&c, &a16, &bt16, &sa, &sb], smelt::Fusion::On)?;
    let g = Fp8Gemm {
        m: size,
        n: size,
        k: size,
        a: a.data_ptr()?,
        bt: bt.data_ptr()?,
        c: c.data_ptr()?,
        scale_a: sa.data_ptr()?,
        scale_b: sb.data_ptr()?,
    };
    let bf16 = Gemm {
        batch: 1,
        m: size,
        n: size,
        k: size,
        dtype: DType::BF16,
        b_layout: BLayout::Transposed,
        a: a16.data_ptr()?,
        b: bt16.data_ptr()?,
        c: g.c,
    };
    dev.synchronize()?; // smelt's stream wrote the operands
    ms[4] = Some(blas.time_ms(dev, || blas.gemm(&bf16, Math::Exact))?);
    if blas.lt.is_ok() {
        ms[1] = Some(blas.time_ms(dev, || blas.fp8_gemm(&g, true))?);
        ms[2] = Some(blas.time_ms(dev, || blas.fp8_gemm(&g, false))?);
    }
    blas.sync()
}

/// Writes one report file (see [`write_report`]) and says where.
fn save(file: &str, text: &str) -> Result<()> {
    println!("report in {}", write_report(file, text)?.display());
    Ok(())
}

/// Random operands of `shape` in `dt`, realized on GPU 0.
fn operands((bs, m, n, k): (usize, usize, usize, usize), dt: DType) -> Result<Operands> {
    let cuda = Device::Cuda(0);
    let bt = Tensor::randn([bs, n, k], dt, 2, &cuda);
    let b = bt.transpose(1, 2).contiguous();
    let a = Tensor::randn([bs, m, k], dt, 1, &cuda);
    let bias = Tensor::randn([n], dt, 3, &cuda);
    // Random tensors are generated where they are used: realize them so
    // the timed kernels read data, as a model's operands are.
    smelt::realize_all(&[&a, &b, &bt, &bias], smelt::Fusion::On)?;
    Ok(Operands { a, b, bt, bias })
}

/// smelt's columns: both layouts, TF32 for f32, and the fused epilogue.
fn smelt_columns(dev: &Device, o: &Operands, row: &mut Row) -> Result<()> {
    let (a, bt, b, bias) = (&o.a, &o.bt, &o.b, &o.bias);
    let dt = row.dtype;
    row.ms[0] = Some(kernel_ms(dev, |_| {
        a.matmul(&bt.transpose(1, 2)).realize().map(|_| ())
    })?);
    row.ms[2] = Some(kernel_ms(dev, |_| a.matmul(b).realize().map(|_| ()))?);
    if dt == DType::F32 {
        row.ms[4] = Some(kernel_ms(dev, |_| {
            a.matmul_with(&bt.transpose(1, 2), Precision::Tf32)
                .realize()
                .map(|_| ())
        })?);
    }
    row.ms[6] = Some(kernel_ms(dev, |_| {
        (a.matmul(&bt.transpose(1, 2)) + bias)
            .gelu()
            .cast(dt)
            .realize()
            .map(|_| ())
    })?);
    Ok(())
}

/// cuBLAS's columns on the same operands, writing into a smelt tensor `c`;
/// for the epilogue, smelt's bias+gelu kernel then runs over `c` (holding
/// cuBLAS's product) and its time is added to the GEMM's.
fn cublas_columns(dev: &Device, blas: &Blas, o: &Operands, row: &mut Row) -> Result<()> {
    let (bs, m, n, k) = row.shape;
    let dt = row.dtype;
    let c = Tensor::zeros([bs, m, n], dt, &Device::Cuda(0)).contiguous();
    let (a, bt, b, cp) = (
        o.a.data_ptr()?,
        o.bt.data_ptr()?,
        o.b.data_ptr()?,
        c.data_ptr()?,
    );
    dev.synchronize()?; // smelt's stream wrote the operands; cuBLAS's reads them
    let gemm = |b, b_layout| Gemm {
        batch: bs,
        m,
        n,
        k,
        dtype: dt,
        b_layout,
        a,
        b,
        c: cp,
    };
    let nt = gemm(bt, BLayout::Transposed);
    let nn = gemm(b, BLayout::RowMajor);
    row.ms[1] = Some(blas.time_ms(dev, || blas.gemm(&nt, Math::Exact))?);
    row.ms[3] = Some(blas.time_ms(dev, || blas.gemm(&nn, Math::Exact))?);
    if dt == DType::F32 {
        row.ms[5] = Some(blas.time_ms(dev, || blas.gemm(&nt, Math::Tf32))?);
    }
    blas.gemm(&nt, Math::Exact)?;
    blas.sync()?; // `c` holds the product before smelt's stream reads it
    let epilogue = kernel_ms(dev, |_| {
        (&c + &o.bias).gelu().cast(dt).realize().map(|_| ())
    })?;
    row.ms[7] = row.ms[1].map(|gemm| gemm + epilogue);
    Ok(())
}

/// The table's two header lines: column groups, then what each holds.
fn print_header() {
    let mut top = format!("{:37}", "");
    let mut sub = format!(
        "{:>6} {:>6} {:>6} {:>6} {:>9}",
        "batch", "m", "n", "k", "dtype"
    );
    for (title, _) in GROUPS {
        let _ = write!(top, " | {title:^21}");
        let _ = write!(sub, " | {:>7} {:>7} {:>5}", "smelt", "cuBLAS", "ratio");
    }
    println!("{top}\n{sub}");
}

/// One table line: TFLOP/s of each group's smelt and cuBLAS columns and
/// their ratio, `-` where not measured.
fn format_row(r: &Row) -> String {
    let (bs, m, n, k) = r.shape;
    let mut s = format!("{bs:>6} {m:>6} {n:>6} {k:>6} {:>9}", r.dtype.name());
    let cell = |v: Option<f64>, width: usize, digits: usize, unit: &str| match v {
        Some(v) => format!("{v:>w$.digits$}{unit}", w = width - unit.len()),
        None => format!("{:>width$}", "-"),
    };
    for (_, i) in GROUPS {
        let (ours, theirs) = (r.tflops(i), r.tflops(i + 1));
        let ratio = ours.zip(theirs).map(|(o, t)| 100.0 * o / t);
        let _ = write!(
            s,
            " | {} {} {}",
            cell(ours, 7, 1, ""),
            cell(theirs, 7, 1, ""),
            cell(ratio, 5, 0, "%")
        );
    }
    s
}

/// The report's cells: one per measured column of each row, with its
/// series (the column's name), shape, dtype, milliseconds and TFLOP/s.
fn cells(rows: &[Row]) -> Vec<MatmulPoint> {
    let mut points = Vec::new();
    for r in rows {
        let (batch, m, n, k) = r.shape;
        for (i, series) in COLUMNS.iter().enumerate() {
            if let (Some(ms), Some(tflops)) = (r.ms[i], r.tflops(i)) {
                points.push(MatmulPoint {
                    series: series.to_string(),
                    batch,
                    m,
                    n,
                    k,
                    dtype: r.dtype.name().to_string(),
                    ms,
                    tflops,
                });
            }
        }
    }
    points
}
