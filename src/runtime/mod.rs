//! Runtimes: where schedules run and buffers live.

pub mod cpu;
pub mod cuda;
mod disk;
pub(crate) mod host;
mod lru;
mod ptx_check;
mod stats;
mod tune;

pub use stats::{compile_stats, CompileStats};

use crate::{Device, Result};
use smelt_fusion::{BufferHandle, Schedule};
use std::cell::Cell;
use std::time::Duration;

/// True when a CUDA driver and at least one GPU are present (never
/// panics, also without a driver).
pub fn cuda_available() -> bool {
    cuda::available()
}

thread_local! {
    static KERNELS_RUN: Cell<u64> = const { Cell::new(0) };
}

/// Number of kernels this thread has run so far (all devices). Tests use it
/// to prove that realized results are not recomputed.
pub fn kernels_run() -> u64 {
    KERNELS_RUN.with(|c| c.get())
}

pub(crate) fn count_kernel() {
    KERNELS_RUN.with(|c| c.set(c.get() + 1));
}

/// The `SMELT_DEBUG` level (0 when unset).
pub fn debug_level() -> u8 {
    static LEVEL: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| {
        smelt_codegen::env::var("SMELT_DEBUG", smelt_codegen::env::parse_debug).unwrap_or(0)
    })
}

/// Prints the per-kernel debug line (`SMELT_DEBUG>=2`) and the IR (`>=3`).
pub(crate) fn report_kernel(k: &smelt_codegen::Kernel, time: Duration) {
    let level = debug_level();
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

/// Runs `schedule` on `device`; returns the buffers of its results, in the
/// order of `schedule.results`.
pub(crate) fn execute(schedule: &Schedule, device: Device) -> Result<Vec<BufferHandle>> {
    // Both runtimes refuse a kernel that would read or write out of bounds.
    for item in schedule.items.iter() {
        item.kernel.check_bounds().map_err(crate::Error::Launch)?;
    }
    match device {
        Device::Cpu => cpu::execute(schedule),
        Device::Cuda(n) => cuda::execute(n, schedule),
    }
}

/// Copies host bytes to a new buffer on `device`.
pub(crate) fn upload(bytes: Vec<u8>, device: Device) -> Result<BufferHandle> {
    match device {
        Device::Cpu => Ok(cpu::wrap(bytes)),
        Device::Cuda(n) => Ok(std::sync::Arc::new(cuda::device(n)?.upload(&bytes)?)),
    }
}

/// Copies the first `len` bytes of a buffer to the host.
pub(crate) fn download(buf: &BufferHandle, len: usize, device: Device) -> Result<Vec<u8>> {
    match device {
        Device::Cpu => Ok(smelt_codegen::host_alloc::copy(&cpu::bytes(buf)[..len])?),
        Device::Cuda(n) => cuda::device(n)?.download(cuda::buffer(buf)?, len),
    }
}
