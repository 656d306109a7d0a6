//! The CPU backend's entry, mirroring [`crate::ptx::emit`]: an attention
//! kernel runs on its own path, a kernel runs on the specialised matmul
//! path when it fits it, else on the LLVM JIT (feature `llvm`, the
//! default engine then; `crate::llvm`), else on the executor
//! ([`crate::exec`]), or on the interpreter for the kernels the executor
//! declines (rows spread over the cores where they are independent:
//! scans along a strided axis; scatters). `SMELT_CPU=exec|interp|llvm` picks the first engine
//! tried (by default the JIT takes only kernels worth compiling,
//! `crate::llvm::worth_compiling`); under `SMELT_CPU=interp` every kernel
//! runs on the one-thread interpreter (today's reference).

use crate::env::{self, CpuEngine};
use crate::interp::{self, InterpError};
use crate::ir::{Kernel, KernelKind};

/// Runs `kernel` over byte buffers; the arguments are [`interp::run`]'s.
///
/// # Errors
/// Buffers that do not match the kernel's parameters, an index outside a
/// buffer, or a host allocation that fails.
pub fn run(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Result<(), InterpError> {
    interp::check_args(kernel, inputs, scalars, outputs)?;
    if kernel.kind == KernelKind::Attention {
        return crate::attention_cpu::run(kernel, inputs, scalars, outputs);
    }
    match crate::matmul_cpu::try_run(kernel, inputs, scalars, outputs) {
        Some(done) => done,
        None => generic(kernel, inputs, scalars, outputs),
    }
}

/// Runs a kernel that no specialised path takes.
fn generic(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Result<(), InterpError> {
    let named = env::var("SMELT_CPU", env::parse_cpu);
    let engine = named.unwrap_or_else(CpuEngine::default_engine);
    if engine == CpuEngine::Interp {
        return interp::run(kernel, inputs, scalars, outputs);
    }
    // By default the JIT takes the kernels big enough to repay a compile
    // (tens of milliseconds); `SMELT_CPU=llvm` sends it every kernel.
    #[cfg(feature = "llvm-jit")]
    if engine == CpuEngine::Llvm && (named.is_some() || crate::llvm::worth_compiling(kernel)) {
        if let Some(done) = crate::llvm::run(kernel, inputs, scalars, outputs) {
            return done;
        }
    }
    match crate::exec::run(kernel, inputs, scalars, outputs) {
        Some(done) => done,
        None => interp::run_parallel(kernel, inputs, scalars, outputs),
    }
}
