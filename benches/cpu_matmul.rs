//! The CPU matmul benchmark (issue 14): smelt's CPU matmul path against
//! NumPy (OpenBLAS) on the same machine, in one run.
//!
//! Cases (each one realize of a freshly built graph, so planning counts):
//! - `matmul f32 N^3` for N = 1024 and 2048 (4096 with `-- --big`);
//! - `relu(x@w+b) f32 1024^3`: a product with a fused epilogue;
//! - `swiglu f16 256x512x1024`: `silu(x @ w1) * (x @ w3)` in f16, two
//!   products in one kernel (NumPy computes it in f32 and casts, its
//!   fastest way: it has no f16 GEMM).
//!
//! Wall time per realize, median of many runs (about 2 s per case) after
//! 3 warm-up runs. `benches/reference/cpu_matmul.py` measures the NumPy
//! side the same way; this bench runs it (`python3`, or `$SMELT_PYTHON`)
//! and prints each case with smelt's time as a share of NumPy's speed
//! (NumPy time / smelt time). The target is at least 70% for
//! f32 products from 1024^3 up.
//!
//! `cargo bench --bench cpu_matmul`. Writes a table to stdout and
//! `cpu_matmul.json` to `$SMELT_BENCH_OUT` (default `target/bench`).
//! `-- --smoke` runs tiny sizes, one timed run each: it checks the bench
//! end to end. `-- --no-reference` skips NumPy.

mod common;

use common::{median, today, write_report};
use smelt::{DType, Device, Result, Tensor};
use std::time::Instant;

/// A benchmark case: its name (shared with the NumPy script), its flops
/// and one run.
struct Case {
    name: String,
    flops: f64,
    run: Box<dyn Fn() -> Result<()>>,
}

/// A realized random tensor on the CPU.
fn input(shape: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
    let t = Tensor::randn(shape, dtype, seed, &Device::Cpu);
    t.realize()?;
    Ok(t)
}

fn cases(smoke: bool, big: bool) -> Result<Vec<Case>> {
    let mut sizes = if smoke {
        vec![64, 96]
    } else {
        vec![1024, 2048]
    };
    if big && !smoke {
        sizes.push(4096);
    }
    let mut out = Vec::new();
    for n in sizes {
        let (a, b) = (
            input(&[n, n], DType::F32, 1)?,
            input(&[n, n], DType::F32, 2)?,
        );
        out.push(Case {
            name: format!("matmul f32 {n}^3"),
            flops: 2.0 * (n as f64).powi(3),
            run: Box::new(move || a.matmul(&b).realize().map(|_| ())),
        });
    }
    let n = if smoke { 64 } else { 1024 };
    let (x, w, bias) = (
        input(&[n, n], DType::F32, 3)?,
        input(&[n, n], DType::F32, 4)?,
        input(&[n], DType::F32, 5)?,
    );
    out.push(Case {
        name: format!("relu(x@w+b) f32 {n}^3"),
        flops: 2.0 * (n as f64).powi(3),
        run: Box::new(move || (x.matmul(&w) + &bias).relu().realize().map(|_| ())),
    });
    let (m, k, h) = if smoke {
        (16, 32, 64)
    } else {
        (256, 512, 1024)
    };
    let (x, w1, w3) = (
        input(&[m, k], DType::F16, 6)?,
        input(&[k, h], DType::F16, 7)?,
        input(&[k, h], DType::F16, 8)?,
    );
    out.push(Case {
        name: format!("swiglu f16 {m}x{k}x{h}"),
        flops: 4.0 * (m * k * h) as f64,
        run: Box::new(move || (x.matmul(&w1).silu() * x.matmul(&w3)).realize().map(|_| ())),
    });
    Ok(out)
}

/// Median wall milliseconds of `run`: 3 warm-up runs, then runs for about
/// two seconds (at least 5); one of each with `smoke`.
fn time_ms(run: &dyn Fn() -> Result<()>, smoke: bool) -> Result<f64> {
    let warmup = if smoke { 1 } else { 3 };
    for _ in 0..warmup {
        run()?;
    }
    let mut ms = Vec::new();
    let start = Instant::now();
    while ms.len() < if smoke { 1 } else { 5 } || (start.elapsed().as_secs_f64() < 2.0 && !smoke) {
        let t = Instant::now();
        run()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(&mut ms))
}

/// NumPy's milliseconds per case name, from the reference script's JSON
/// (`None`, with a note, when it cannot run).
fn numpy(smoke: bool, big: bool) -> Option<serde_json::Value> {
    let python = std::env::var("SMELT_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/reference/cpu_matmul.py"
    );
    let mut cmd = std::process::Command::new(python);
    cmd.arg(script);
    if smoke {
        cmd.arg("--smoke");
    }
    if big {
        cmd.arg("--big");
    }
    match cmd.output() {
        Ok(out) if out.status.success() => serde_json::from_slice(&out.stdout).ok(),
        Ok(out) => {
            eprintln!(
                "NumPy reference failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            None
        }
        Err(e) => {
            eprintln!("NumPy reference not run: {e}");
            None
        }
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let (smoke, big) = (has("--smoke"), has("--big"));
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    println!("CPU matmul, {threads} threads");
    let reference = if has("--no-reference") {
        None
    } else {
        numpy(smoke, big)
    };
    if let Some(r) = &reference {
        println!("reference: NumPy {} ({})", r["numpy"], r["blas"]);
    }
    println!(
        "{:<28} {:>10} {:>9} {:>10} {:>9}",
        "case", "smelt ms", "GFLOP/s", "NumPy ms", "% NumPy"
    );
    let mut rows = Vec::new();
    for case in cases(smoke, big)? {
        let ms = time_ms(&case.run, smoke)?;
        let np = reference
            .as_ref()
            .and_then(|r| r["cases"][&case.name].as_f64());
        let share = np.map(|np| 100.0 * np / ms);
        println!(
            "{:<28} {:>10.2} {:>9.1} {:>10} {:>9}",
            case.name,
            ms,
            case.flops / (ms * 1e-3) / 1e9,
            np.map_or("-".into(), |v| format!("{v:.2}")),
            share.map_or("-".into(), |v| format!("{v:.0}%")),
        );
        rows.push(serde_json::json!({
            "case": case.name,
            "smelt_ms": ms,
            "numpy_ms": np,
            "gflops": case.flops / (ms * 1e-3) / 1e9,
        }));
    }
    let report = serde_json::json!({
        "date": today(),
        "threads": threads,
        "numpy": reference,
        "cases": rows,
    });
    let text = serde_json::to_string_pretty(&report)
        .map_err(|e| smelt::Error::Runtime(format!("cpu_matmul.json: {e}")))?;
    let path = write_report("cpu_matmul.json", &text)?;
    println!("wrote {}", path.display());
    Ok(())
}
