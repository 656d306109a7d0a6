//! Every `SMELT_*` environment variable is parsed here, so the accepted
//! spellings live in one place. The parsers are pure (value -> parsed or
//! the accepted values); [`var`] reads a variable and warns once on stderr
//! about a value it cannot parse, which then counts as unset.
//! `SMELT_CACHE_DIR` and `SMELT_PTXAS` are paths and are read directly;
//! `SMELT_VIZ` and `SMELT_PTXAS_CACHE` through [`path`].

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// A device named by `SMELT_DEVICE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceVar {
    /// `cpu`.
    Cpu,
    /// `cuda`, `cuda:N`, `gpu` or `gpu:N` (ordinal 0 when not given).
    Cuda(usize),
}

/// Which engine runs generic CPU kernels (`SMELT_CPU`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuEngine {
    /// `exec` (the default): the multi-threaded typed executor
    /// ([`crate::exec`]), the interpreter for kernels it declines.
    Exec,
    /// `interp`: the interpreter ([`crate::interp`]) for every kernel.
    Interp,
    /// `llvm` (the default with feature `llvm`): the LLVM JIT
    /// ([`crate::llvm`]), the executor for kernels it declines.
    Llvm,
}

impl CpuEngine {
    /// The build's default engine: the JIT when it is built in, else the
    /// executor.
    pub fn default_engine() -> CpuEngine {
        if cfg!(feature = "llvm-jit") {
            CpuEngine::Llvm
        } else {
            CpuEngine::Exec
        }
    }
}

/// A vector width for the CPU executor's hot loops (`SMELT_CPU_SIMD`),
/// ordered from narrowest to widest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CpuSimd {
    /// `sse2`: the build's baseline target (4 `f32` lanes on x86-64; the
    /// only level on other architectures).
    Sse2,
    /// `avx2`: AVX2 and FMA (8 lanes).
    Avx2,
    /// `avx512`: AVX-512 F, VL, BW and DQ, with FMA (16 lanes).
    Avx512,
}

const FLAG_VALUES: &str = "0/1, off/on, false/true, no/yes";

/// An on/off switch (`SMELT_FUSION`, `SMELT_TUNE`, `SMELT_CHECK_PTX`, ...).
///
/// # Errors
/// The accepted values, for anything else.
pub fn parse_flag(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(FLAG_VALUES.to_string()),
    }
}

/// `SMELT_DEBUG`: a level from 0 to 4.
///
/// # Errors
/// The accepted values, for anything else.
pub fn parse_debug(value: &str) -> Result<u8, String> {
    match value.trim().parse::<u8>() {
        Ok(n) if n <= 4 => Ok(n),
        _ => Err("a level 0 to 4".to_string()),
    }
}

/// A positive count (`SMELT_MAX_MODULES`).
///
/// # Errors
/// The accepted values, for anything else.
pub fn parse_count(value: &str) -> Result<usize, String> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("a positive integer".to_string()),
    }
}

/// `SMELT_ATTENTION_SPLITS`: a split count, `0` or `1` for none (see
/// `ptx::attention::split`).
///
/// # Errors
/// The accepted values, for anything else.
pub fn parse_splits(value: &str) -> Result<usize, String> {
    value
        .trim()
        .parse::<usize>()
        .map_err(|_| "a split count (0 or 1: off)".to_string())
}

/// `SMELT_MATMUL_TILE`: the name of a tensor-core matmul tile (one of
/// `ptx::matmul::tile_names`, as the autotuner's variants are named, e.g.
/// `wg128x64k128w16x64s4g8`).
///
/// # Errors
/// The accepted values, for anything else.
pub fn parse_matmul_tile(value: &str) -> Result<String, String> {
    let names = crate::ptx::matmul::tile_names();
    let v = value.trim();
    if names.iter().any(|n| n == v) {
        Ok(v.to_string())
    } else {
        Err(names.join(", "))
    }
}

/// `SMELT_CPU`: `exec` or `interp`, and `llvm` in builds with feature
/// `llvm`.
///
/// # Errors
/// The accepted values, for anything else.
pub fn parse_cpu(value: &str) -> Result<CpuEngine, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "exec" => Ok(CpuEngine::Exec),
        "interp" => Ok(CpuEngine::Interp),
        "llvm" if cfg!(feature = "llvm-jit") => Ok(CpuEngine::Llvm),
        _ if cfg!(feature = "llvm-jit") => Err("exec, interp, llvm".to_string()),
        _ => Err("exec, interp (llvm needs feature `llvm`)".to_string()),
    }
}

/// `SMELT_CPU_SIMD`: `sse2`, `avx2` or `avx512`.
///
/// # Errors
/// The accepted values, for anything else.
pub fn parse_cpu_simd(value: &str) -> Result<CpuSimd, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "sse2" => Ok(CpuSimd::Sse2),
        "avx2" => Ok(CpuSimd::Avx2),
        "avx512" => Ok(CpuSimd::Avx512),
        _ => Err("sse2, avx2, avx512".to_string()),
    }
}

/// `SMELT_DEVICE`: `cpu`, `cuda`, `cuda:N`, `gpu` or `gpu:N`.
///
/// # Errors
/// The accepted values, for anything else.
pub fn parse_device(value: &str) -> Result<DeviceVar, String> {
    let v = value.trim().to_ascii_lowercase();
    let bad = || "cpu, cuda, cuda:N, gpu, gpu:N".to_string();
    if v == "cpu" {
        return Ok(DeviceVar::Cpu);
    }
    let rest = v
        .strip_prefix("cuda")
        .or_else(|| v.strip_prefix("gpu"))
        .ok_or_else(bad)?;
    match rest.strip_prefix(':') {
        None if rest.is_empty() => Ok(DeviceVar::Cuda(0)),
        Some(n) => n.parse().map(DeviceVar::Cuda).map_err(|_| bad()),
        None => Err(bad()),
    }
}

/// `SMELT_ATTENTION_TILE`: the tensor-core attention kernel's CTA shape
/// and pipeline (see `ptx/attention/mma.rs`), spelt
/// `<warps>x<rows>x<bn>[x<stages>][r][w]`: `4x16x64` is the default,
/// `8x16x64x3r` 8 warps of 16 query rows, key tiles of up to 64, a
/// 3-stage copy pipeline and reversed row-block order; `8x16x128w` two
/// warpgroups of `wgmma` (sm_90) with key tiles of 128.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttentionTile {
    /// Warps per CTA: 4 or 8, or 12 for `wgmma` tiles (three
    /// warpgroups).
    pub warps: u32,
    /// Query rows per warp: 16 or 32 (32 only where both head dims are
    /// at most 128; 16 above).
    pub rows: u32,
    /// Keys per tile at most: 32, 64 or 128 (capped at 128 for head dims
    /// up to 64, 64 up to 128, 32 above; at 32-row warps 64 up to 64 and
    /// 32 above).
    pub bn: u32,
    /// Shared-memory buffers of the `k`/`v` copy pipeline: 2 or 3.
    pub stages: u32,
    /// Causal kernels take their row blocks last first (the ones with
    /// the most key tiles start in the first wave).
    pub reverse: bool,
    /// Warpgroup MMAs (`wgmma`, sm_90 only; 16-row warps, a warpgroup
    /// per 64 query rows) instead of `mma.sync`.
    pub wgmma: bool,
}

impl AttentionTile {
    /// 4 warps of 16 rows, key tiles of 64 (32 past head dim 128), two
    /// buffers, row blocks in order.
    pub const DEFAULT: AttentionTile = AttentionTile {
        warps: 4,
        rows: 16,
        bn: 64,
        stages: 2,
        reverse: false,
        wgmma: false,
    };

    /// The spelling [`parse_attention_tile`] reads (`4x16x64x2`, `r`
    /// appended when reversed, then `w` for warpgroup MMAs).
    pub fn name(&self) -> String {
        let r = if self.reverse { "r" } else { "" };
        let g = if self.wgmma { "w" } else { "" };
        let (w, m, n, s) = (self.warps, self.rows, self.bn, self.stages);
        format!("{w}x{m}x{n}x{s}{r}{g}")
    }
}

impl Default for AttentionTile {
    fn default() -> AttentionTile {
        AttentionTile::DEFAULT
    }
}

/// `SMELT_ATTENTION_TILE` (see [`AttentionTile`]).
///
/// # Errors
/// The accepted values, for anything else.
pub fn parse_attention_tile(value: &str) -> Result<AttentionTile, String> {
    let bad = || {
        "<warps>x<rows>x<bn>[x<stages>][r][w]: warps 4|8 (12 with w), rows 16|32, \
         bn 32|64|128, stages 2|3, r to reverse the row blocks, w for wgmma (rows 16)"
            .to_string()
    };
    let v = value.trim().to_ascii_lowercase();
    let (v, wgmma) = match v.strip_suffix('w') {
        Some(rest) => (rest, true),
        None => (v.as_str(), false),
    };
    let (v, reverse) = match v.strip_suffix('r') {
        Some(rest) => (rest, true),
        None => (v, false),
    };
    let nums = v
        .split('x')
        .map(|n| n.parse::<u32>().map_err(|_| bad()))
        .collect::<Result<Vec<u32>, String>>()?;
    let (warps, rows, bn, stages) = match nums[..] {
        [w, m, n] => (w, m, n, 2),
        [w, m, n, s] => (w, m, n, s),
        _ => return Err(bad()),
    };
    // Three warpgroups only as warpgroup MMAs (the `mma.sync` tiles were
    // swept at 4 and 8 warps).
    let ok = (matches!(warps, 4 | 8) || (warps == 12 && wgmma))
        && matches!(rows, 16 | 32)
        && matches!(bn, 32 | 64 | 128)
        && matches!(stages, 2 | 3)
        && !(wgmma && rows != 16);
    ok.then_some(AttentionTile {
        warps,
        rows,
        bn,
        stages,
        reverse,
        wgmma,
    })
    .ok_or_else(bad)
}

/// The parsed value of `name`; `None` when unset or unparsable (the latter
/// warns on stderr once per variable, naming the accepted values).
pub fn var<T>(name: &'static str, parse: fn(&str) -> Result<T, String>) -> Option<T> {
    let raw = std::env::var(name).ok()?;
    match parse(&raw) {
        Ok(v) => Some(v),
        Err(accepted) => {
            static WARNED: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
            let first = WARNED
                .get_or_init(|| Mutex::new(HashSet::new()))
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name);
            if first {
                eprintln!("smelt: ignoring {name}={raw:?}: expected {accepted}");
            }
            None
        }
    }
}

/// A path variable's value (`SMELT_VIZ`): as given, `None` when empty.
pub fn parse_path(value: &OsStr) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

/// The path variable `name`; `None` when unset or empty. Any other value
/// is a path (not necessarily UTF-8), so nothing warns.
pub fn path(name: &'static str) -> Option<PathBuf> {
    parse_path(&std::env::var_os(name)?)
}

/// The switch `name`, `default` when unset or unparsable.
pub fn flag(name: &'static str, default: bool) -> bool {
    var(name, parse_flag).unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        for v in ["1", "on", "TRUE", "yes", " Yes "] {
            assert_eq!(parse_flag(v), Ok(true), "{v}");
        }
        for v in ["0", "off", "false", "No"] {
            assert_eq!(parse_flag(v), Ok(false), "{v}");
        }
        for v in ["", "2", "abc", "enable"] {
            assert!(parse_flag(v).unwrap_err().contains("off/on"), "{v}");
        }
    }

    #[test]
    fn debug_levels() {
        assert_eq!(parse_debug("0"), Ok(0));
        assert_eq!(parse_debug("4"), Ok(4));
        for v in ["5", "-1", "abc", ""] {
            assert!(parse_debug(v).unwrap_err().contains("0 to 4"), "{v}");
        }
    }

    #[test]
    fn counts() {
        assert_eq!(parse_splits("0"), Ok(0));
        assert_eq!(parse_splits(" 16 "), Ok(16));
        assert!(parse_splits("-1").unwrap_err().contains("split count"));
        assert_eq!(parse_count("1"), Ok(1));
        assert_eq!(parse_count(" 256 "), Ok(256));
        for v in ["0", "-3", "1.5", "many", ""] {
            assert!(parse_count(v).unwrap_err().contains("positive"), "{v}");
        }
    }

    #[test]
    fn paths() {
        assert_eq!(parse_path(OsStr::new("")), None);
        assert_eq!(parse_path(OsStr::new("viz")), Some(PathBuf::from("viz")));
        assert_eq!(
            parse_path(OsStr::new(" /tmp/a b/ ")),
            Some(PathBuf::from(" /tmp/a b/ ")),
            "taken as given, spaces included"
        );
        assert_eq!(path("SMELT_TEST_SURELY_UNSET_PATH_VARIABLE"), None);
    }

    #[test]
    fn attention_tiles() {
        assert_eq!(parse_attention_tile("4x16x64"), Ok(AttentionTile::DEFAULT));
        let t = parse_attention_tile(" 8X32x128x3R ").unwrap();
        assert_eq!(
            (t.warps, t.rows, t.bn, t.stages, t.reverse),
            (8, 32, 128, 3, true)
        );
        assert_eq!(parse_attention_tile(&t.name()), Ok(t));
        assert_eq!(AttentionTile::DEFAULT.name(), "4x16x64x2");
        let w = parse_attention_tile("8x16x128x3rw").unwrap();
        assert!(w.wgmma && w.reverse && w.warps == 8);
        assert_eq!(parse_attention_tile(&w.name()), Ok(w));
        for v in [
            "",
            "4x16",
            "4x16x64x2x1",
            "2x16x64",
            "4x8x64",
            "4x16x48",
            "4x16x64x4",
            "4x16x64rr",
            "4x16x64wr",
            "4x32x64w",
            "r",
            "4x-16x64",
        ] {
            assert!(
                parse_attention_tile(v).unwrap_err().contains("warps 4|8"),
                "{v}"
            );
        }
    }

    #[test]
    fn cpu_engines() {
        assert_eq!(parse_cpu("exec"), Ok(CpuEngine::Exec));
        assert_eq!(parse_cpu(" Interp "), Ok(CpuEngine::Interp));
        assert_eq!(parse_cpu("llvm").is_ok(), cfg!(feature = "llvm-jit"));
        for v in ["", "fast", "interpreter"] {
            assert!(parse_cpu(v).unwrap_err().contains("interp"), "{v}");
        }
    }

    #[test]
    fn cpu_simd_levels() {
        assert_eq!(parse_cpu_simd("sse2"), Ok(CpuSimd::Sse2));
        assert_eq!(parse_cpu_simd(" AVX2 "), Ok(CpuSimd::Avx2));
        assert_eq!(parse_cpu_simd("avx512"), Ok(CpuSimd::Avx512));
        for v in ["", "avx", "avx-512", "neon"] {
            assert!(parse_cpu_simd(v).unwrap_err().contains("avx512"), "{v}");
        }
    }

    #[test]
    fn devices() {
        assert_eq!(parse_device("cpu"), Ok(DeviceVar::Cpu));
        assert_eq!(parse_device("CUDA"), Ok(DeviceVar::Cuda(0)));
        assert_eq!(parse_device("cuda:1"), Ok(DeviceVar::Cuda(1)));
        assert_eq!(parse_device("gpu"), Ok(DeviceVar::Cuda(0)));
        assert_eq!(parse_device("gpu:2"), Ok(DeviceVar::Cuda(2)));
        for v in ["cuda:abc", "cuda1", "tpu", "", "gpu:"] {
            assert!(parse_device(v).unwrap_err().contains("cuda:N"), "{v}");
        }
    }
}
