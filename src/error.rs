//! Run-time errors. Shape errors are programming errors and panic where the
//! op is recorded; everything that can fail while running returns
//! [`Error`].

use std::fmt;

/// What can go wrong while realizing or moving data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The requested device is not available (no driver, no GPU, bad index).
    NoDevice(String),
    /// The device ran out of memory.
    OutOfMemory(String),
    /// The device rejected generated code.
    Compile(String),
    /// A kernel failed while running.
    Launch(String),
    /// Anything else the runtime reports.
    Runtime(String),
    /// A file could not be read or written, or does not hold what its
    /// format says (safetensors, npy, npz).
    Io(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDevice(m) => write!(f, "no device: {m}"),
            Error::OutOfMemory(m) => write!(f, "out of memory: {m}"),
            Error::Compile(m) => write!(f, "kernel rejected: {m}"),
            Error::Launch(m) => write!(f, "kernel failed: {m}"),
            Error::Runtime(m) => write!(f, "runtime error: {m}"),
            Error::Io(m) => write!(f, "file error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<smelt_codegen::interp::InterpError> for Error {
    fn from(e: smelt_codegen::interp::InterpError) -> Self {
        Error::Launch(e.0)
    }
}

impl From<smelt_codegen::host_alloc::AllocError> for Error {
    fn from(e: smelt_codegen::host_alloc::AllocError) -> Self {
        Error::OutOfMemory(e.to_string())
    }
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
