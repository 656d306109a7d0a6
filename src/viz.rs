//! Pictures of what fusion did.
//!
//! [`Schedule::to_dot`] draws one schedule as Graphviz DOT. With
//! `SMELT_VIZ=DIR` in the environment, every realize that runs kernels
//! also writes `DIR/realize-<n>.dot` (`n` counts the realizes of the
//! process, zero-padded: `realize-000000.dot`, ...) and, when Graphviz's
//! `dot` is on `PATH`, `DIR/realize-<n>.svg` next to it. `DIR` is created
//! if needed. Pictures are a debugging aid: a file that cannot be written
//! or a missing or failing `dot` never fails the realize; each kind of
//! problem is reported once on stderr. Rendering runs `dot` before the
//! kernels, so it slows every realize down (milliseconds, more for
//! schedules of hundreds of kernels).
//!
//! [`write_dot`] and [`render_svg`] do the same for a directory given
//! explicitly.
//!
//! ```
//! use smelt::{viz, DType, Device, Fusion, Tensor};
//! let x = Tensor::randn([32, 64], DType::F32, 0, &Device::Cpu);
//! let dir = std::env::temp_dir().join(format!("smelt-viz-doc-{}", std::process::id()));
//! let dot = viz::write_dot(&dir, &x.softmax(-1).schedule(Fusion::On)).unwrap();
//! assert!(std::fs::read_to_string(&dot).unwrap().contains("multireduce"));
//! if let Some(svg) = viz::render_svg(&dot).unwrap() {
//!     assert!(std::fs::read_to_string(svg).unwrap().contains("<svg"));
//! }
//! std::fs::remove_dir_all(dir).unwrap();
//! ```

use smelt_fusion::Schedule;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Realizes pictured so far in this process (numbers the files).
static PICTURES: AtomicU64 = AtomicU64::new(0);

/// Set once `dot` was not found, so later realizes do not look again.
static NO_DOT: AtomicBool = AtomicBool::new(false);

/// `SMELT_VIZ`, read once (the environment is read at the first realize,
/// like `SMELT_DEBUG`).
pub fn dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| smelt_codegen::env::path("SMELT_VIZ"))
        .as_deref()
}

/// Writes the next `realize-<n>.dot` of this process into `dir` (created
/// if missing) and returns its path.
///
/// # Errors
/// Creating `dir` or writing the file.
pub fn write_dot(dir: &Path, schedule: &Schedule) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let n = PICTURES.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("realize-{n:06}.dot"));
    std::fs::write(&path, schedule.to_dot())?;
    Ok(path)
}

/// Runs Graphviz's `dot` (from `PATH`) on `dot_file`, writing the SVG
/// next to it (`.svg` for `.dot`); `Ok(None)` when there is no `dot`.
///
/// # Errors
/// `dot` failed (its stderr in the message).
pub fn render_svg(dot_file: &Path) -> io::Result<Option<PathBuf>> {
    let svg = dot_file.with_extension("svg");
    let out = Command::new("dot")
        .arg("-Tsvg")
        .arg(dot_file)
        .arg("-o")
        .arg(&svg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match out {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
        Ok(o) if o.status.success() => Ok(Some(svg)),
        Ok(o) => Err(io::Error::other(format!(
            "dot exited with {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
    }
}

/// The hook in `realize_all`: pictures `schedule` when `SMELT_VIZ` is set.
/// Never fails; problems are reported once each on stderr.
pub(crate) fn on_realize(schedule: &Schedule) {
    if let Some(dir) = dir() {
        picture(dir, schedule);
    }
}

fn picture(dir: &Path, schedule: &Schedule) {
    static WRITE_FAILED: AtomicBool = AtomicBool::new(false);
    static DOT_MISSING: AtomicBool = AtomicBool::new(false);
    static DOT_FAILED: AtomicBool = AtomicBool::new(false);
    let dot = match write_dot(dir, schedule) {
        Ok(p) => p,
        Err(e) => {
            warn_once(
                &WRITE_FAILED,
                format_args!("SMELT_VIZ: cannot write into {}: {e}", dir.display()),
            );
            return;
        }
    };
    if NO_DOT.load(Ordering::Relaxed) {
        return;
    }
    match render_svg(&dot) {
        Ok(Some(_)) => {}
        Ok(None) => {
            NO_DOT.store(true, Ordering::Relaxed);
            warn_once(
                &DOT_MISSING,
                format_args!("SMELT_VIZ: Graphviz `dot` is not on PATH; writing .dot files only"),
            );
        }
        Err(e) => warn_once(
            &DOT_FAILED,
            format_args!("SMELT_VIZ: rendering {}: {e}", dot.display()),
        ),
    }
}

fn warn_once(flag: &AtomicBool, msg: std::fmt::Arguments) {
    if !flag.swap(true, Ordering::Relaxed) {
        eprintln!("smelt: {msg}");
    }
}
