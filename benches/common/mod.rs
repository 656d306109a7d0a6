//! Shared by the GPU benchmarks: CUDA-event timing (median of many runs
//! after warm-up), the device's copy ceiling, where reports go, and (in
//! `report`) the report files themselves: JSON and SVG plots.

#![allow(dead_code)] // each bench uses the part it needs

pub mod report;

use smelt::cuda::{self, DeviceBuffer, Event};
use smelt::{profile, Device, Result};

/// Warm-up runs before timing, and timed runs (the median is reported).
pub const WARMUP: usize = 10;
pub const RUNS: usize = 50;

/// Microseconds the GPU is kept busy before each timed run, longer than
/// the host takes to queue the run (a cached realize takes about 7 µs, an
/// unfused one five launches): the kernels are then queued when the GPU
/// reaches them, and their events measure GPU time, not launch latency.
const QUEUE_AHEAD_US: u32 = 200;

/// The first GPU, or `None` (with a message) when there is none.
pub fn gpu() -> Option<Device> {
    if !cuda::is_available() {
        println!("skipped: no CUDA device (benchmarks need a GPU)");
        return None;
    }
    match cuda::get_device_properties(&Device::Cuda(0)) {
        Ok(_) => Some(Device::Cuda(0)),
        Err(e) => {
            println!("skipped: {e}");
            None
        }
    }
}

/// Median GPU milliseconds of `f` (which queues work on the device's
/// stream), each run between its own pair of CUDA events. `f` gets the
/// run index, so callers can rotate inputs.
pub fn gpu_ms(dev: &Device, mut f: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    for i in 0..WARMUP {
        f(i)?;
    }
    dev.synchronize()?;
    let mut pairs = Vec::with_capacity(RUNS);
    for i in 0..RUNS {
        let (s, e) = (Event::new(dev)?, Event::new(dev)?);
        cuda::sleep(dev, QUEUE_AHEAD_US)?;
        s.record()?;
        f(WARMUP + i)?;
        e.record()?;
        pairs.push((s, e));
    }
    dev.synchronize()?;
    let mut t: Vec<f64> = pairs
        .iter()
        .map(|(s, e)| s.elapsed_time(e))
        .collect::<Result<_>>()?;
    Ok(median(&mut t))
}

/// Median GPU milliseconds of the kernels `f` launches (summed per run),
/// timed by events around each kernel: what the kernels cost, without the
/// host's time between launches. `f` gets the run index. On the CPU (a
/// bench's smoke run) the kernels' host times.
pub fn kernel_ms(dev: &Device, f: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    kernel_ms_n(dev, WARMUP, RUNS, f)
}

/// [`kernel_ms`] for plans that may be slow: one run (after a first that
/// compiles) estimates the time, then at most [`RUNS`] runs, and at least
/// `min_runs`, fit in about `budget_ms`; as many warm-up runs (up to
/// [`WARMUP`]).
pub fn kernel_ms_budget(
    dev: &Device,
    budget_ms: f64,
    min_runs: usize,
    mut f: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    f(0)?;
    let est = kernel_ms_n(dev, 0, 1, &mut f)?.max(1e-3);
    let runs = ((budget_ms / est) as usize).clamp(min_runs, RUNS.max(min_runs));
    kernel_ms_n(dev, runs.min(WARMUP), runs, f)
}

/// [`kernel_ms`] with `warmup` untimed and `runs` timed runs.
fn kernel_ms_n(
    dev: &Device,
    warmup: usize,
    runs: usize,
    mut f: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    for i in 0..warmup {
        f(i)?;
    }
    dev.synchronize()?;
    let mut per_run = Vec::with_capacity(runs);
    for i in 0..runs {
        if matches!(dev, Device::Cuda(_)) {
            cuda::sleep(dev, QUEUE_AHEAD_US)?;
        }
        profile::start();
        f(warmup + i)?;
        per_run.push(profile::take()?.iter().map(|k| k.ms).sum::<f64>());
    }
    Ok(median(&mut per_run))
}

/// Median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Device-to-device copy bandwidth in GB/s (read + write bytes / time)
/// for a buffer of `bytes`, rotating buffers like the benchmarks' inputs.
pub fn copy_gbps(dev: &Device, bytes: usize) -> Result<f64> {
    let rot = rotation(2 * bytes);
    let bufs = (0..rot)
        .map(|_| {
            Ok((
                DeviceBuffer::new(dev, bytes)?,
                DeviceBuffer::new(dev, bytes)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let ms = gpu_ms(dev, |i| {
        let (a, b) = &bufs[i % rot];
        b.copy_from(a)
    })?;
    Ok(2.0 * bytes as f64 / (ms * 1e-3) / 1e9)
}

/// How many copies of an input of `bytes` to rotate through so the set
/// exceeds a 50 MB L2 (H100/H200) twice over.
pub fn rotation(bytes: usize) -> usize {
    (100_000_000 / bytes.max(1)).clamp(1, 64)
}

/// Where reports go: `$SMELT_BENCH_OUT` (the GPU machine's `$OUT`), else
/// `target/bench`.
pub fn out_dir() -> std::path::PathBuf {
    let d = std::env::var_os("SMELT_BENCH_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("target/bench"));
    let _ = std::fs::create_dir_all(&d);
    d
}

/// Writes `text` to `file` under [`out_dir`]; returns its path.
pub fn write_report(file: &str, text: &str) -> Result<std::path::PathBuf> {
    let path = out_dir().join(file);
    std::fs::write(&path, text)
        .map_err(|e| smelt::Error::Runtime(format!("writing {}: {e}", path.display())))?;
    Ok(path)
}

/// Today's date as YYYY-MM-DD (UTC), from the system clock.
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86400)
        .unwrap_or(0) as i64;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}
