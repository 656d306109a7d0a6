//! The CUDA runtime (cudarc, driver API, loaded dynamically). Every driver
//! failure becomes a [`crate::Error`]; nothing here panics when no driver
//! is installed (the library is probed first). One file per concern, each
//! importing only files below it:
//!
//! - `probe.rs`: is there a driver and a GPU; driver errors as `Error`s.
//! - `alloc.rs`: device buffers and the caching allocator.
//! - `lru.rs`, `disk.rs`: the bounded map behind the module cache, the
//!   on-disk PTX cache (plain data structure and files, tested on the CPU).
//! - `modules.rs`: loaded modules and the bounded module cache.
//! - `device.rs`: one GPU (context, stream, target) and the registry.
//! - `launch.rs`: launches and the spin kernel.
//! - `profile.rs`: event timing of launches.
//! - `tune.rs`: the matmul autotuner.
//! - `execute.rs`: choosing each kernel's module, running a schedule.
//!
//! This file only declares them and names what the rest of the crate uses.

mod alloc;
mod device;
mod disk;
mod execute;
mod launch;
mod lru;
mod modules;
mod probe;
mod profile;
mod tune;

pub(crate) use alloc::{buffer, CudaBuffer};
pub(crate) use device::{device, CudaDevice};
pub(crate) use execute::execute;
pub(crate) use probe::{available, device_count};
pub(crate) use profile::elapsed_ms;
