//! Finding and running `ptxas` to validate generated PTX without a GPU
//! (tests and CI use it on every kernel they generate).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Where `ptxas` is: `$SMELT_PTXAS`, else on `PATH`, else in the pip
/// package `nvidia-cuda-nvcc` of `python3`. `None` if absent.
pub fn find() -> Option<&'static Path> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(locate).as_deref()
}

fn runs(p: &Path) -> bool {
    Command::new(p)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn locate() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SMELT_PTXAS") {
        return Some(PathBuf::from(p));
    }
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(p) = std::env::split_paths(&path)
            .map(|d| d.join("ptxas"))
            .find(|p| p.is_file())
        {
            return Some(p);
        }
    }
    let out = Command::new("python3")
        .args(["-c", "import nvidia; print('\\n'.join(nvidia.__path__))"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .flat_map(|dir| {
            ["cu13", "cu12", "cuda_nvcc"].map(|sub| Path::new(dir).join(sub).join("bin/ptxas"))
        })
        .find(|p| p.is_file() && runs(p))
}

/// Assembles `ptx` for `sm_{sm}` with `ptxas -v` (for `sm_90a` when the
/// module targets it: `wgmma` kernels). `Ok(None)` when ptxas is not found,
/// `Ok(Some(info))` with its resource report (registers, spills, shared
/// memory) on success, `Err(diagnostics)` when it rejects the PTX.
pub fn assemble(ptx: &str, sm: u32) -> Result<Option<String>, String> {
    run(ptx, sm, &["-v"])
}

/// Like [`assemble`] but without optimisation (`-O0`) or the resource
/// report: it validates the PTX as the driver's JIT parses it (syntax,
/// types, operands, limits) in a fraction of the time, which is what CI's
/// check of every generated kernel needs. Register counts and spills need
/// [`assemble`].
pub fn validate(ptx: &str, sm: u32) -> Result<Option<String>, String> {
    run(ptx, sm, &["-O0"])
}

fn run(ptx: &str, sm: u32, flags: &[&str]) -> Result<Option<String>, String> {
    let Some(ptxas) = find() else {
        return Ok(None);
    };
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let stem = format!(
        "smelt-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let dir = std::env::temp_dir();
    let (src, bin) = (
        dir.join(format!("{stem}.ptx")),
        dir.join(format!("{stem}.cubin")),
    );
    std::fs::write(&src, ptx).map_err(|e| format!("writing {}: {e}", src.display()))?;
    let out = Command::new(ptxas)
        .args(flags)
        .arg(if ptx.contains(".target sm_90a") {
            "-arch=sm_90a".to_string()
        } else {
            format!("-arch=sm_{sm}")
        })
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .output();
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&bin);
    let out = out.map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(Some(text))
    } else {
        Err(text)
    }
}
