//! The matmul autotuner on a GPU: a matmul big enough to tune is timed once,
//! computes the right numbers with the chosen variant, leaves its choice in
//! the tune file, and is not timed again, neither in this process nor in a
//! later one (this test binary run again as a child). A binary of its own
//! because it points `SMELT_CACHE_DIR` at a fresh directory for the whole
//! process.

mod common;

use half::f16;
use smelt::stats::compile_stats;
use smelt::{Device, Tensor};
use std::path::PathBuf;

/// Kernels this thread's realizes have autotuned so far.
fn tunings() -> u64 {
    compile_stats().kernels_tuned
}

/// Operand entries: multiples of 1/8 in [-1, 1], so every product is a
/// multiple of 1/64 and every partial sum of 2048 of them is exact in f32;
/// only the final rounding to f16 differs from the exact result.
fn operand(n: usize, seed: usize) -> Vec<f16> {
    (0..n * n)
        .map(|i| f16::from_f32(((i * 7 + seed * 13 + i / n * 5) % 17) as f32 / 8.0 - 1.0))
        .collect()
}

/// The tune file lines under `cache` (its versioned subdirectory holds it).
fn tune_lines(cache: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("tune.txt")).ok())
        .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// Names the first process's cache directory to the child.
const CHILD: &str = "SMELT_TUNE_TEST_CHILD_CACHE";
const TEST: &str = "large_f16_matmul_is_tuned_once_and_cached_on_disk";

#[test]
fn large_f16_matmul_is_tuned_once_and_cached_on_disk() {
    let dev = common::test_device();
    if dev == Device::Cpu {
        println!("skipped: the autotuner runs on CUDA devices only");
        return;
    }
    // Set when this test runs as the later process, to the first one's cache.
    let child = std::env::var_os(CHILD).map(PathBuf::from);
    let cache = child.clone().unwrap_or_else(|| {
        let d = std::env::temp_dir().join(format!("smelt-tune-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    });
    // Before any kernel runs: the cache directory and the switches are
    // read on first use. (The only test in this binary, so no thread races.)
    std::env::set_var("SMELT_CACHE_DIR", &cache);
    std::env::set_var("SMELT_TUNE", "1");
    std::env::remove_var("SMELT_MATMUL_MMA");

    let n = 2048;
    let (a, b) = (operand(n, 1), operand(n, 2));
    let ta = Tensor::from_vec(a.clone(), [n, n], &dev);
    let tb = Tensor::from_vec(b.clone(), [n, n], &dev);
    ta.realize().unwrap();
    tb.realize().unwrap();

    let got = ta.matmul(&tb).to_vec::<f16>().unwrap();
    if child.is_some() {
        assert_eq!(
            tunings(),
            0,
            "a later process takes the choice from the file"
        );
    } else {
        assert_eq!(tunings(), 1, "a 2048^3 f16 matmul is tuned");
    }
    for (i, j) in [(0, 0), (1, 2047), (1000, 17), (2047, 2047), (512, 1024)] {
        let want: f32 = (0..n)
            .map(|p| a[i * n + p].to_f32() * b[p * n + j].to_f32())
            .sum();
        let g = got[i * n + j].to_f32();
        assert!(
            (g - want).abs() <= 1e-3 * (1.0 + want.abs()),
            "at {i},{j}: {g} vs {want}"
        );
    }

    if child.is_some() {
        assert_eq!(tune_lines(&cache).len(), 1);
        return;
    }
    let lines = tune_lines(&cache);
    assert_eq!(lines.len(), 1, "tune file: {lines:?}");
    let f: Vec<&str> = lines[0].split(' ').collect();
    assert!(
        f.len() == 3
            && u64::from_str_radix(f[0], 16).is_ok()
            && f[2].parse::<f64>().is_ok_and(|ms| ms > 0.0),
        "tune line {:?}",
        lines[0]
    );

    // The same shape again (a new graph, same kernel): no second tuning,
    // same numbers.
    let again = ta.matmul(&tb).to_vec::<f16>().unwrap();
    assert_eq!(tunings(), 1, "the choice is cached");
    assert!(again == got, "the cached variant computes the same result");

    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(exe)
        .args([TEST, "--exact", "--nocapture"])
        .env(CHILD, &cache)
        .status()
        .unwrap();
    assert!(status.success(), "the later process failed");
    let _ = std::fs::remove_dir_all(&cache);
}
