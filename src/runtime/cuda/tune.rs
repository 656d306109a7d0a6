//! The matmul autotuner. The first launch of a kernel that codegen can emit
//! in several configurations (`ptx::matmul::variants`: tile shape, warps,
//! pipeline depth) times each on the launch's own arguments and keeps the
//! fastest. Choices are keyed like the module cache (kernel hash, which
//! covers M, N, K and dtypes, mixed with the target), kept in memory for
//! the process and appended to `tune.txt` next to the on-disk PTX cache,
//! so later processes emit the chosen variant without timing anything.
//! `SMELT_TUNE=0` turns tuning and cached choices off (heuristic tiles).
//!
//! Everything here is best effort: a variant that fails to load or launch
//! is skipped, a cache file that cannot be read or written is ignored, and
//! with no usable variant the caller falls back to the heuristic kernel.

use super::device::CudaDevice;
use super::disk::DiskCache;
use super::modules::Loaded;
use super::profile::elapsed_ms;
use crate::runtime::debug;
use crate::stats;
use crate::{Error, Result};
use cudarc::driver::safe::CudaEvent;
use smelt_codegen::ptx::matmul;
use smelt_codegen::Kernel;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Kernels doing fewer flops (`2 * rows * row_len`: `2 M N K` per batch)
/// are never timed: 2^32, so 2048 x 1024 x 1024 tunes and 1024^3 does
/// not. Smaller runs take microseconds, where launch overhead dwarfs what
/// a better tile saves; bigger ones repay the one-off cost (one JIT per
/// variant, about a second per shape, once per machine thanks to the
/// file). The test suite's largest matmul (1024^3 f32, 2^31 flops, under a
/// time limit) and all its half-precision ones (below 2^27) never tune.
const MIN_FLOPS: u64 = 1 << 32;

/// Timed launches per variant after one warm-up; the median counts, so
/// one launch disturbed by other work on the GPU does not decide.
const REPS: usize = 5;

/// Microseconds the GPU spins before a variant's timed launches, so they
/// are all queued when it reaches them and the host's launch latency
/// stays out of the times (kernels near `MIN_FLOPS` are shorter than it).
const SPIN_US: u32 = 500;

/// Name of the choices file in the PTX cache directory.
const FILE: &str = "tune.txt";

/// False when `SMELT_TUNE=0`.
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| smelt_codegen::env::flag("SMELT_TUNE", true))
}

/// The chosen variant per key (the key mixes in the target, so devices of
/// another kind do not share choices): the choices file as read on first
/// use plus this process's tunings. Its lock is held across a whole lookup or
/// tuning, so two threads never time the same kernel twice nor time two
/// kernels on one stream at once.
fn choices() -> &'static Mutex<HashMap<u64, String>> {
    static CHOICES: OnceLock<Mutex<HashMap<u64, String>>> = OnceLock::new();
    CHOICES.get_or_init(|| Mutex::new(file().map(|p| read(&p)).unwrap_or_default()))
}

/// The choices file, next to the PTX cache (same versioned directory, so
/// an upgrade that renames or changes variants starts afresh).
fn file() -> Option<PathBuf> {
    DiskCache::open().map(|d| d.dir().join(FILE))
}

/// The well-formed lines of a tune file's text, `<key hex> <variant> <ms>`,
/// the last per key (two processes may tune one key at once), in file
/// order. Malformed lines (torn by a crash, edited by hand) are dropped.
fn last_lines(text: &str) -> Vec<(u64, String, &str)> {
    let mut last: HashMap<u64, usize> = HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [key, name, ms] = f[..] else { continue };
        let (Ok(key), Ok(v)) = (u64::from_str_radix(key, 16), ms.parse::<f64>()) else {
            continue;
        };
        if v.is_finite() && v >= 0.0 {
            last.insert(key, out.len());
            out.push((key, name.to_string(), line));
        }
    }
    let mut i = 0;
    out.retain(|(key, _, _)| {
        i += 1;
        last[key] == i - 1
    });
    out
}

/// The choice map of `last_lines`' result.
fn to_choices(lines: Vec<(u64, String, &str)>) -> HashMap<u64, String> {
    lines
        .into_iter()
        .map(|(key, name, _)| (key, name))
        .collect()
}

/// The choices in the file at `path` (none when it cannot be read). A
/// file mostly made of superseded or malformed lines is rewritten with one
/// line per key, so appends from many processes do not grow it forever.
fn read(path: &Path) -> HashMap<u64, String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return HashMap::new();
    };
    let kept = last_lines(&text);
    if text.lines().count() > 2 * kept.len() + 16 {
        let compact: String = kept.iter().map(|(_, _, l)| format!("{l}\n")).collect();
        // Write then rename, so a concurrent reader never sees half a file
        // (a line another process appends meanwhile may be lost: it is
        // only a cached choice, tuned again when missing).
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, compact).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }
    to_choices(kept)
}

/// Appends a choice to the file at `path`, creating it (and its directory)
/// if needed; skipped when that fails. The line goes out in one `write` on
/// a file opened for appending, so lines appended by concurrent processes
/// never interleave.
fn append(path: &Path, key: u64, name: &str, ms: f64) {
    debug_assert!(!name.contains(char::is_whitespace), "variant {name:?}");
    let line = format!("{key:016x} {name} {ms:.4}\n");
    let _ = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        })
        .and_then(|mut f| f.write_all(line.as_bytes()));
}

impl CudaDevice {
    /// The tuned module for kernel `k` (module-cache key `key`), launched
    /// over `args` (inputs, outputs, scalars): the cached choice, else the
    /// fastest variant timed now. `None` when tuning is off, `k` is too
    /// small or has no variants, or, with no usable cached choice, an
    /// output is also an input (the timing launches would read what they
    /// wrote) or no variant runs.
    pub(super) fn tuned(&self, k: &Kernel, key: u64, args: &[u64]) -> Option<Arc<Loaded>> {
        let flops = (2 * k.rows() as u64).saturating_mul(k.row_len() as u64);
        if !enabled() || flops < MIN_FLOPS {
            return None;
        }
        let names = matmul::variants(k, self.target());
        if names.is_empty() {
            return None;
        }
        let mut choices = choices().lock().unwrap_or_else(|e| e.into_inner());
        // Another thread may have loaded it while this one waited.
        if let Some(l) = self.modules.get(key) {
            return Some(l);
        }
        if let Some(name) = choices.get(&key) {
            let cached = self
                .emit_variant(k, name)
                .and_then(|launch| self.modules.load(launch, &k.name).ok());
            if cached.is_some() {
                return cached;
            }
            // A name codegen no longer knows, or one that fails here:
            // choose again.
        }
        let (ins, rest) = args.split_at(k.inputs.len());
        if rest[..k.outputs.len()].iter().any(|o| ins.contains(o)) {
            return None;
        }
        let (name, ms, l) = self.time_variants(k, &names, args)?;
        if let Some(p) = file() {
            append(&p, key, &name, ms);
        }
        choices.insert(key, name);
        Some(l)
    }

    /// Variant `name` of `k` as PTX (counted as an emission).
    fn emit_variant(&self, k: &Kernel, name: &str) -> Option<smelt_codegen::ptx::PtxKernel> {
        let launch = matmul::emit_variant(k, self.target(), name)?;
        stats::count(|s| s.ptx_emitted += 1);
        Some(launch)
    }

    /// Times every variant of `k` over `args` and returns the fastest by
    /// median (name, milliseconds, module); `None` when none ran.
    fn time_variants(
        &self,
        k: &Kernel,
        names: &[String],
        args: &[u64],
    ) -> Option<(String, f64, Arc<Loaded>)> {
        // One set of events serves every variant: `elapsed_ms` waits for
        // them, so they are free to record again.
        let events: Vec<CudaEvent> = (0..=REPS)
            .map(|_| self.event())
            .collect::<Result<_>>()
            .ok()?;
        // Counted on the thread whose realize tunes (`CompileStats`).
        stats::count(|s| s.kernels_tuned += 1);
        let mut best: Option<(String, f64, Arc<Loaded>)> = None;
        let mut report = Vec::with_capacity(names.len());
        // Every module loaded, kept until the stream is idle: dropping the
        // losers unloads them, and a failed variant may have launches queued.
        let mut modules = Vec::with_capacity(names.len());
        for name in names {
            let timed = self
                .emit_variant(k, name)
                .ok_or_else(|| Error::Compile(format!("kernel {}: no variant {name}", k.name)))
                .and_then(|launch| self.modules.load(launch, &k.name))
                .and_then(|l| {
                    modules.push(l.clone());
                    Ok((self.median_ms(&l, &k.name, args, &events)?, l))
                });
            match timed {
                Ok((ms, l)) => {
                    report.push(format!("{name} {ms:.3} ms"));
                    if !best.as_ref().is_some_and(|b| b.1 <= ms) {
                        best = Some((name.clone(), ms, l));
                    }
                }
                Err(e) => report.push(format!("{name} failed ({e})")),
            }
        }
        let _ = self.sync();
        if debug::level() >= 2 {
            let winner = best.as_ref().map_or("none, heuristic kernel", |b| &b.0);
            eprintln!("smelt: tuned {}: {} -> {winner}", k.name, report.join(", "));
        }
        best
    }

    /// The median time in milliseconds of `l` (kernel `name`) over `args`:
    /// one warm-up launch, then `REPS` timed between consecutive `events`.
    fn median_ms(&self, l: &Loaded, name: &str, args: &[u64], events: &[CudaEvent]) -> Result<f64> {
        self.launch_loaded(l, args, name)?;
        self.busy(SPIN_US)?;
        self.record(&events[0])?;
        for e in &events[1..] {
            self.launch_loaded(l, args, name)?;
            self.record(e)?;
        }
        let mut ms = events
            .windows(2)
            .map(|w| elapsed_ms(&w[0], &w[1]))
            .collect::<Result<Vec<f64>>>()?;
        ms.sort_by(f64::total_cmp);
        Ok(ms[ms.len() / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::{append, last_lines, read, to_choices};
    use std::path::PathBuf;

    /// A fresh directory for one test (removed by the test).
    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("smelt-tune-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// Superseded and malformed lines are dropped from the file when they
    /// outnumber the live ones, keeping the last choice per key.
    #[test]
    fn a_file_of_superseded_lines_is_compacted() {
        let dir = scratch("compact");
        let p = dir.join("tune.txt");
        for i in 0..200u32 {
            append(&p, u64::from(i % 3), &format!("v{i}"), 1.0);
        }
        std::fs::write(&p, std::fs::read_to_string(&p).unwrap() + "torn line\n").unwrap();
        let c = read(&p);
        assert_eq!(c.len(), 3);
        assert_eq!(
            (&c[&0][..], &c[&1][..], &c[&2][..]),
            ("v198", "v199", "v197")
        );
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert_eq!(read(&p), c);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn choices_round_trip_through_the_file() {
        let dir = scratch("round_trip");
        // The directory does not exist yet: appending creates it.
        let p = dir.join("v").join("tune.txt");
        append(&p, 0x0123_4567_89ab_cdef, "128x128k64w64x32s4g8", 0.25);
        append(&p, u64::MAX, "64x64k128w32x32s3g8", 1.5);
        append(&p, 7, "a", 2.0);
        append(&p, 7, "b", 3.0);
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text.lines().next(),
            Some("0123456789abcdef 128x128k64w64x32s4g8 0.2500")
        );
        let c = read(&p);
        assert_eq!(c.len(), 3, "{c:?}");
        assert_eq!(c[&0x0123_4567_89ab_cdef], "128x128k64w64x32s4g8");
        assert_eq!(c[&u64::MAX], "64x64k128w32x32s3g8");
        assert_eq!(c[&7], "b", "the last line for a key wins");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn malformed_lines_are_ignored() {
        let text = "\
00000000000000ff good 0.5
garbage
zz name 1.0
0000000000000001 name
0000000000000002 name 1.0 extra
0000000000000003 name NaN
0000000000000004 name -1
0000000000000005 name inf
10000000000000000 name 1.0

0000000000000006 torn 0.12300000000000000007 other 1.0
0000000000000008 also-good 2";
        let c = to_choices(last_lines(text));
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[&0xff], "good");
        assert_eq!(c[&8], "also-good");
    }

    #[test]
    fn unreadable_or_unwritable_files_are_skipped() {
        let dir = scratch("unwritable");
        assert!(read(&dir.join("missing.txt")).is_empty());
        // A file where the directory should be: appending fails quietly.
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), "").unwrap();
        let p = dir.join("f").join("tune.txt");
        append(&p, 1, "x", 1.0);
        assert!(read(&p).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn concurrent_appends_keep_every_line_whole() {
        let dir = scratch("concurrent");
        let p = dir.join("tune.txt");
        let (threads, per) = (8u64, 200u64);
        std::thread::scope(|s| {
            for t in 0..threads {
                let p = &p;
                s.spawn(move || {
                    for i in 0..per {
                        let name = format!("t{t}-variant-{i}-{}", "x".repeat((i % 50) as usize));
                        append(p, t << 32 | i, &name, i as f64);
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count() as u64, threads * per);
        let c = to_choices(last_lines(&text));
        assert_eq!(c.len() as u64, threads * per);
        for t in 0..threads {
            for i in 0..per {
                assert!(c[&(t << 32 | i)].starts_with(&format!("t{t}-variant-{i}-")));
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
