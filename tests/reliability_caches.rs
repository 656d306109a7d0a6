//! The CUDA runtime's caches under stress (issue 10): a corrupt file in
//! the on-disk PTX cache is re-emitted instead of failing the realize, and
//! the module cache keeps at most `SMELT_MAX_MODULES` modules, reloading
//! an evicted one from the disk cache.
//!
//! GPU-only: on the CPU these tests print `skipped` (the PTX cache and the
//! module cache belong to the CUDA runtime; their file handling and the
//! LRU bookkeeping are unit-tested without a GPU in
//! `src/runtime/cuda/disk.rs` and `src/runtime/cuda/lru.rs`). Each stage runs in a child process (this
//! binary again, one test, `STAGE` naming the stage) whose environment
//! points `SMELT_CACHE_DIR` at a fresh directory, so no process starts with
//! anything loaded and the parent never changes its own environment.

mod common;

use smelt::stats::{compile_stats, CompileStats};
use smelt::{Device, Tensor};
use std::path::{Path, PathBuf};

/// Names the stage a child process runs.
const STAGE: &str = "SMELT_CACHES_TEST_STAGE";

/// The GPU, or `None` (and a note) on a machine without one.
fn gpu(what: &str) -> Option<Device> {
    let dev = common::test_device();
    if dev == Device::Cpu {
        println!("skipped: {what} is a CUDA runtime cache; see src/runtime/cuda/disk.rs and lru.rs for its CPU-side unit tests");
        return None;
    }
    Some(dev)
}

/// A fresh cache directory for one test.
fn fresh_cache(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smelt-caches-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs `test` of this binary in a child process at `stage`, with
/// `SMELT_CACHE_DIR=cache` and `env`; panics if the child fails.
fn child(test: &str, stage: &str, cache: &Path, env: &[(&str, &str)]) {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(STAGE, stage)
        .env("SMELT_CACHE_DIR", cache)
        .envs(env.iter().copied())
        .status()
        .unwrap();
    assert!(status.success(), "{test}: stage {stage} failed");
}

/// The PTX cache files under `cache` (in its versioned subdirectory).
fn ptx_files(cache: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "ptx"))
        .collect();
    files.sort();
    files
}

/// Realizes `x * s + t` over `n` elements on `dev`, checks every element,
/// and returns the compilation work it did.
fn realize_affine(dev: Device, n: usize, s: f32, t: f32) -> CompileStats {
    let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 9.0).collect();
    let x = Tensor::from_vec(data.clone(), [n], &dev);
    x.realize().unwrap();
    let before = compile_stats();
    let y = &(&x * f64::from(s)) + f64::from(t);
    y.realize().unwrap();
    let done = compile_stats().since(&before);
    let got = y.to_vec::<f32>().unwrap();
    for (i, (g, x)) in got.iter().zip(&data).enumerate() {
        assert_eq!(*g, x * s + t, "n {n}, s {s}, t {t}, at {i}");
    }
    done
}

const CORRUPT: &str = "a_corrupt_ptx_cache_file_is_re_emitted";

/// A cache file holding garbage, and one whose header is valid but whose
/// PTX the driver rejects, are both replaced by a freshly emitted kernel;
/// a good file is used (a hit) and serves other scalar values.
#[test]
fn a_corrupt_ptx_cache_file_is_re_emitted() {
    let n = 4099;
    if let Ok(stage) = std::env::var(STAGE) {
        let dev = gpu("the PTX disk cache").expect("the parent saw a GPU");
        // Other values in each stage: the cached PTX holds none of them.
        let (s, t) = match stage.as_str() {
            "emit" => (0.75, 2.0),
            "hit" => (-1.25, 0.5),
            _ => (3.5, -4.0),
        };
        let done = realize_affine(dev, n, s, t);
        let want = match stage.as_str() {
            "hit" => (0, 1, 1),
            _ => (1, 0, 1),
        };
        assert_eq!(
            (done.ptx_emitted, done.ptx_disk_hits, done.modules_loaded),
            want,
            "stage {stage}: (emitted, disk hits, loaded) in {done:?}"
        );
        return;
    }
    if gpu("the PTX disk cache").is_none() {
        return;
    }
    let cache = fresh_cache("corrupt");
    child(CORRUPT, "emit", &cache, &[]);
    let files = ptx_files(&cache);
    assert_eq!(files.len(), 1, "one kernel, one cache file: {files:?}");
    let file = &files[0];
    let good = std::fs::read_to_string(file).unwrap();
    assert!(good.starts_with("smelt-ptx-1 "), "{good:.80}");

    let (head, _) = good.split_once('\n').unwrap();
    let entry = head.split(' ').nth(1).unwrap();
    let rejected = format!(
        "{head}\n.version 8.0\n.target sm_90\n.visible .entry {entry}(\n)\n{{ not ptx; }}\n"
    );
    for (what, bytes) in [
        ("garbage", b"\x00\xffgarbage\x13".to_vec()),
        (
            "a truncated file",
            good.as_bytes()[..good.len() / 3].to_vec(),
        ),
        ("PTX the driver rejects", rejected.into_bytes()),
    ] {
        std::fs::write(file, bytes).unwrap();
        child(CORRUPT, "re-emit", &cache, &[]);
        let now = std::fs::read_to_string(file).unwrap_or_default();
        assert_eq!(now, good, "after {what} the file holds the kernel again");
    }
    child(CORRUPT, "hit", &cache, &[]);
    let _ = std::fs::remove_dir_all(&cache);
}

const BOUNDED: &str = "the_module_cache_is_bounded_and_reloads_from_disk";

/// With `SMELT_MAX_MODULES=2`, four kernels leave two loaded: each new one
/// evicts the least recently used, and the first kernel, needed again, is
/// loaded again from the disk cache (no new PTX) and computes right.
#[test]
fn the_module_cache_is_bounded_and_reloads_from_disk() {
    if std::env::var(STAGE).is_ok() {
        let dev = gpu("the module cache").expect("the parent saw a GPU");
        let sizes = [1001, 1003, 1005, 1007];
        let mut total = CompileStats::default();
        for (i, n) in sizes.into_iter().enumerate() {
            let done = realize_affine(dev, n, 1.5 + i as f32, -0.25);
            assert_eq!((done.ptx_emitted, done.modules_loaded), (1, 1), "{done:?}");
            total.modules_evicted += done.modules_evicted;
        }
        assert_eq!(total.modules_evicted, 2, "4 kernels, 2 kept");
        // The first kernel was evicted: loaded again, from disk.
        let again = realize_affine(dev, sizes[0], -2.0, 8.0);
        assert_eq!(
            (
                again.ptx_emitted,
                again.ptx_disk_hits,
                again.modules_loaded,
                again.modules_evicted
            ),
            (0, 1, 1, 1),
            "{again:?}"
        );
        // The last two are still loaded (the most recent, the kernel just
        // reloaded, evicted the oldest of the rest).
        let kept = realize_affine(dev, sizes[3], 0.5, 0.5);
        assert_eq!(kept.modules_loaded, 0, "{kept:?}");
        return;
    }
    if gpu("the module cache").is_none() {
        return;
    }
    let cache = fresh_cache("bounded");
    child(BOUNDED, "run", &cache, &[("SMELT_MAX_MODULES", "2")]);
    let _ = std::fs::remove_dir_all(&cache);
}
