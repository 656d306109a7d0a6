//! Devices a tensor can live on.

use smelt_codegen::env;
use std::fmt;

/// The one device of an op's operands, given in operand order.
///
/// # Panics
/// If they differ, naming the op and both devices (at the caller's line).
#[track_caller]
pub(crate) fn same_device(op: &str, devices: &[Device]) -> Device {
    let first = devices[0];
    if let Some(other) = devices.iter().find(|d| **d != first) {
        panic!("{op}: tensors on {first} and {other}; move one with to_device");
    }
    first
}

/// Where a tensor's data lives and its kernels run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// The host: kernels are interpreted.
    Cpu,
    /// An NVIDIA GPU by ordinal.
    Cuda(usize),
}

impl Device {
    /// The device picked by `SMELT_DEVICE` (`cpu`, `cuda[:N]`, `gpu[:N]`),
    /// else the best available one.
    pub fn default_device() -> Device {
        match env::var("SMELT_DEVICE", env::parse_device) {
            Some(env::DeviceVar::Cpu) => Device::Cpu,
            Some(env::DeviceVar::Cuda(n)) => Device::Cuda(n),
            None => Device::best(),
        }
    }

    /// Waits until all work queued on the device has finished (the CPU runs
    /// synchronously, so there it returns at once).
    pub fn synchronize(&self) -> crate::Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(n) => crate::runtime::cuda::device(*n)?.sync(),
        }
    }

    /// A CUDA GPU when a driver and a GPU are present, else the CPU. Never
    /// panics.
    pub fn best() -> Device {
        if crate::cuda::is_available() {
            Device::Cuda(0)
        } else {
            Device::Cpu
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}
