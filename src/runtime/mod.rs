//! Runtimes: where schedules run and buffers live. Private: the crate's
//! public modules (`cuda`, `profile`, `stats`) and the tensor API are its
//! only doors.
//!
//! This file dispatches to the CPU and CUDA runtimes; the files it
//! dispatches to import nothing from it (shared helpers live in files of
//! their own: `debug.rs`, `host.rs`, and the crate's `stats.rs` and
//! `profile.rs`).

pub(crate) mod cpu;
pub(crate) mod cuda;
mod debug;
pub(crate) mod host;
mod ptx_check;

use crate::{Device, Result};
use smelt_fusion::{BufferHandle, BufferSpec, Schedule, Target};

/// The `SMELT_DEBUG` level (0 when unset).
pub(crate) fn debug_level() -> u8 {
    debug::level()
}

/// Runs `schedule` on `device`; returns the buffers of its results, in the
/// order of `schedule.results`.
pub(crate) fn execute(schedule: &Schedule, device: Device) -> Result<Vec<BufferHandle>> {
    // Both runtimes refuse a kernel that would read or write out of bounds.
    for item in schedule.items.iter() {
        item.kernel.check_bounds().map_err(crate::Error::Launch)?;
    }
    // Created data reaching the schedule as an input is placed now, once.
    let inputs = schedule
        .buffers
        .iter()
        .map(|b| match b {
            BufferSpec::Realized { data, .. } => host::resolve(data, device).map(Some),
            BufferSpec::New { .. } => Ok(None),
        })
        .collect::<Result<Vec<Option<BufferHandle>>>>()?;
    match device {
        Device::Cpu => {
            // CI's PTX check (`SMELT_CHECK_PTX=1`), once per planned
            // schedule, outside the executor's loop.
            ptx_check::check_schedule(schedule)?;
            cpu::execute(schedule, inputs)
        }
        Device::Cuda(n) => cuda::execute(n, schedule, inputs),
    }
}

/// What the planner weighs about `device` (where fused attention pays).
pub(crate) fn target(device: Device) -> Result<Target> {
    match device {
        Device::Cpu => Ok(Target::Cpu),
        Device::Cuda(n) => Ok(Target::Gpu {
            memory: cuda::device(n)?.total_memory(),
        }),
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

/// The address of a buffer's first byte: a device address on a GPU, a
/// host address on the CPU.
pub(crate) fn data_ptr(buf: &BufferHandle, device: Device) -> Result<u64> {
    match device {
        Device::Cpu => Ok(cpu::bytes(buf).as_ptr() as u64),
        Device::Cuda(_) => Ok(cuda::buffer(buf)?.ptr()),
    }
}
