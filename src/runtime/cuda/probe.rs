//! Whether CUDA can be used here: the driver library is probed before it
//! is called, so a machine without a driver never panics. Also the one
//! place where driver errors become [`crate::Error`]s.

use crate::Error;
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::sync::OnceLock;

/// True when the CUDA driver library loads and reports at least one GPU.
pub fn available() -> bool {
    device_count() > 0
}

/// Number of CUDA GPUs (0 without a driver).
pub fn device_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        // SAFETY: only probes whether the shared library can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return 0;
        }
        if cu::init().is_err() {
            return 0;
        }
        cu::device::get_count()
            .map(|n| n.max(0) as usize)
            .unwrap_or(0)
    })
}

/// A driver failure while doing `what`, as the matching [`Error`]: out of
/// memory, PTX rejected (with the JIT's code), no such device, or else a
/// launch error.
pub(super) fn driver_err(what: &str, e: cu::DriverError) -> Error {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let msg = format!("{what}: {name} ({:?})", e.0);
    match e.0 {
        sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfMemory(msg),
        sys::CUresult::CUDA_ERROR_INVALID_PTX
        | sys::CUresult::CUDA_ERROR_INVALID_IMAGE
        | sys::CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU
        | sys::CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | sys::CUresult::CUDA_ERROR_JIT_COMPILER_NOT_FOUND => Error::Compile(msg),
        sys::CUresult::CUDA_ERROR_NO_DEVICE | sys::CUresult::CUDA_ERROR_INVALID_DEVICE => {
            Error::NoDevice(msg)
        }
        _ => Error::Launch(msg),
    }
}
