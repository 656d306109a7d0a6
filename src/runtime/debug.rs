//! `SMELT_DEBUG` output shared by the runtimes: per-kernel times (`>=2`)
//! and IR (`>=3`).

use std::sync::OnceLock;
use std::time::Duration;

/// The `SMELT_DEBUG` level (0 when unset).
pub(crate) fn level() -> u8 {
    static LEVEL: OnceLock<u8> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        smelt_codegen::env::var("SMELT_DEBUG", smelt_codegen::env::parse_debug).unwrap_or(0)
    })
}

/// Prints the per-kernel debug line (`SMELT_DEBUG>=2`) and the IR (`>=3`).
pub(crate) fn report_kernel(k: &smelt_codegen::Kernel, time: Duration) {
    let level = level();
    if level >= 2 {
        let bytes = (k.bytes_read() + k.bytes_written()) as f64;
        let secs = time.as_secs_f64().max(1e-12);
        eprintln!(
            "smelt: kernel {:<40} {:>10.3} ms {:>9.2} GB/s",
            k.name,
            secs * 1e3,
            bytes / secs / 1e9
        );
    }
    if level >= 3 {
        eprintln!("{k}");
    }
}
