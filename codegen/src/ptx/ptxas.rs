//! Finding and running `ptxas` to validate generated PTX without a GPU
//! (tests and CI use it on every kernel they generate).
//!
//! `SMELT_PTXAS_CACHE=DIR` keeps each accepted module's report in `DIR`
//! under a hash of ptxas's path, the flags, the architecture and the
//! PTX: CI's second pass over the suite (and tests that emit the same
//! kernel) then reads the report instead of assembling the module again.
//! Rejections are never cached.

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

/// [`assemble`] for each `(ptx, sm)` of `jobs`, on all cores: the results
/// in `jobs`' order. Each `ptxas` is one single-threaded process, so tests
/// that assemble hundreds of kernels one after another left a core idle.
pub fn assemble_each(jobs: &[(&str, u32)]) -> Vec<Result<Option<String>, String>> {
    use rayon::prelude::*;
    jobs.par_iter()
        .map(|&(ptx, sm)| assemble(ptx, sm))
        .collect()
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
    run_in(crate::env::path("SMELT_PTXAS_CACHE"), ptx, sm, flags)
}

/// [`run`] with the report cache in `cache`, if any.
fn run_in(
    cache: Option<PathBuf>,
    ptx: &str,
    sm: u32,
    flags: &[&str],
) -> Result<Option<String>, String> {
    let Some(ptxas) = find() else {
        return Ok(None);
    };
    let arch = if ptx.contains(".target sm_90a") {
        "-arch=sm_90a".to_string()
    } else {
        format!("-arch=sm_{sm}")
    };
    let cached = cache.map(|dir| {
        use std::hash::{Hash, Hasher};
        let mut h = crate::fnv::Fnv1a::default();
        (ptxas, flags, &arch, ptx).hash(&mut h);
        dir.join(format!("{:016x}-{}.txt", h.finish(), ptx.len()))
    });
    if let Some(text) = cached
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok())
    {
        return Ok(Some(text));
    }
    let report = assemble_file(ptxas, flags, &arch, ptx)?;
    if let Some(f) = cached {
        // Written under a name of its own, then renamed: a concurrent
        // reader or writer of the same key sees all or nothing.
        static STORES: AtomicU64 = AtomicU64::new(0);
        let n = STORES.fetch_add(1, Ordering::Relaxed);
        let tmp = f.with_extension(format!("tmp{}-{n}", std::process::id()));
        let stored = f
            .parent()
            .is_some_and(|d| std::fs::create_dir_all(d).is_ok())
            && std::fs::write(&tmp, &report).is_ok()
            && std::fs::rename(&tmp, &f).is_ok();
        if !stored {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(Some(report))
}

/// Runs `ptxas` with `flags` for `arch` over `ptx` in a temporary file:
/// its report, or its diagnostics when it rejects the module.
fn assemble_file(ptxas: &Path, flags: &[&str], arch: &str, ptx: &str) -> Result<String, String> {
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
        .arg(arch)
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
        Ok(text)
    } else {
        Err(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An accepted module's report is kept and read back (a stand-in
    /// report written under its key is what the next call returns, so
    /// ptxas did not run); a rejected module leaves nothing behind.
    #[test]
    fn reports_are_cached_and_rejections_are_not() {
        if find().is_none() {
            assert!(
                std::env::var_os("SMELT_REQUIRE_PTXAS").is_none(),
                "ptxas not found"
            );
            return;
        }
        let dir = std::env::temp_dir().join(format!("smelt-ptxas-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ok = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n";
        let first = run_in(Some(dir.clone()), ok, 80, &["-v"]).unwrap().unwrap();
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(files.len(), 1, "one report, no temporary left");
        assert_eq!(std::fs::read_to_string(files[0].path()).unwrap(), first);
        std::fs::write(files[0].path(), "stand-in").unwrap();
        let again = run_in(Some(dir.clone()), ok, 80, &["-v"]).unwrap().unwrap();
        assert_eq!(again, "stand-in");
        // Another architecture or flag is another key.
        assert_ne!(
            run_in(Some(dir.clone()), ok, 80, &["-O0"])
                .unwrap()
                .unwrap(),
            "stand-in"
        );
        let bad = ok.replace("ret;", "bogus;");
        assert!(run_in(Some(dir.clone()), &bad, 80, &["-v"]).is_err());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            2,
            "the rejection is not kept"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
