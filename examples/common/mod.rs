//! Shared by the examples: run a graph on the best device, time it, and
//! compare with the CPU backend.

#![allow(dead_code)] // each example uses the part it needs

use smelt::{Device, Fusion, Result, Tensor};
use std::time::Instant;

/// What one [`run`] measured.
pub struct Run {
    /// Largest difference from the CPU backend (0 on the CPU).
    pub err: f64,
    /// Wall time of the timed realize.
    pub secs: f64,
}

/// Builds the graph with `build` on `device` (inputs made by `inputs`),
/// realizes it, and prints kernel count, time, GB/s (for `bytes` moved) and
/// the largest difference from the same graph on the CPU.
pub fn run(
    name: &str,
    bytes: usize,
    inputs: impl Fn(&Device) -> Vec<Tensor>,
    build: impl Fn(&[Tensor]) -> Tensor,
) -> Result<Run> {
    let dev = Device::default_device();
    let fusion = Fusion::from_env();
    let xs = inputs(&dev);
    for x in &xs {
        x.realize()?;
    }
    let kernels = build(&xs).schedule(fusion).items.len();
    // Warm-up (kernel compilation, allocation), then a timed run.
    build(&xs).realize_with(fusion)?;
    let y = build(&xs);
    dev.synchronize()?;
    let t0 = Instant::now();
    y.realize_with(fusion)?;
    dev.synchronize()?;
    let secs = t0.elapsed().as_secs_f64();
    let out = y.to_vec::<f32>()?;
    let mut err = 0.0f64;
    if dev != Device::Cpu {
        let cpu_in: Vec<Tensor> = xs
            .iter()
            .map(|x| x.to_device(&Device::Cpu))
            .collect::<Result<_>>()?;
        let reference = build(&cpu_in).to_vec::<f32>()?;
        err = out
            .iter()
            .zip(&reference)
            .map(|(a, b)| (*a as f64 - *b as f64).abs())
            .fold(0.0, f64::max);
    }
    println!(
        "{name} on {dev}: {kernels} kernel(s) ({fusion:?}), {:.3} ms, {:.1} GB/s, max |{dev} - cpu| = {err:.2e}",
        secs * 1e3,
        bytes as f64 / secs / 1e9
    );
    Ok(Run { err, secs })
}
