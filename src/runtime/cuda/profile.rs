//! Kernel timing with CUDA events: a pair recorded around a launch when
//! `SMELT_DEBUG>=2` prints each kernel's time or when the thread is
//! profiling (`smelt::profile`, whose log reads the pair when taken).

use super::device::CudaDevice;
use super::probe::driver_err;
use crate::profile::{self, Timing};
use crate::runtime::debug;
use crate::Result;
use cudarc::driver::safe::CudaEvent;
use smelt_codegen::Kernel;

/// Milliseconds between two recorded events (waits for the later one).
pub(crate) fn elapsed_ms(start: &CudaEvent, end: &CudaEvent) -> Result<f64> {
    start
        .elapsed_ms(end)
        .map(|t| t as f64)
        .map_err(|e| driver_err("reading an event", e))
}

/// The events around one kernel launch.
pub(super) struct Timer {
    start: CudaEvent,
    end: CudaEvent,
}

impl Timer {
    /// Records the start of a launch on `dev`'s stream, when someone wants
    /// its time (`SMELT_DEBUG>=2` or profiling); else `None`.
    pub(super) fn start(dev: &CudaDevice) -> Result<Option<Timer>> {
        if debug::level() < 2 && !profile::active() {
            return Ok(None);
        }
        let t = Timer {
            start: dev.event()?,
            end: dev.event()?,
        };
        dev.record(&t.start)?;
        Ok(Some(t))
    }

    /// Records the end of the launch of `k`, prints its time at
    /// `SMELT_DEBUG>=2` (waiting for it) and logs it while profiling (read
    /// when the log is taken, so launches are not held back).
    pub(super) fn stop(self, dev: &CudaDevice, k: &Kernel) -> Result<()> {
        dev.record(&self.end)?;
        if debug::level() >= 2 {
            let ms = elapsed_ms(&self.start, &self.end)?;
            debug::report_kernel(k, std::time::Duration::from_secs_f64(ms / 1e3));
        }
        if profile::active() {
            let Timer { start, end } = self;
            profile::record(
                &k.name,
                Timing::Device(Box::new(move || elapsed_ms(&start, &end))),
            );
        }
        Ok(())
    }
}
