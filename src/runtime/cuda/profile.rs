//! Kernel timing with CUDA events: pairs recorded around a launch when
//! `SMELT_DEBUG>=2` prints each kernel's time or when profiling is on
//! ([`profile_start`], [`profile_take`]: the benchmarks' per-kernel GPU
//! times, however long the host takes between launches).

use super::device::CudaDevice;
use super::probe::driver_err;
use crate::runtime::debug;
use crate::Result;
use cudarc::driver::safe::CudaEvent;
use smelt_codegen::Kernel;
use std::cell::RefCell;

thread_local! {
    /// Event pairs around every kernel this thread launches while
    /// profiling is on.
    static PROFILE: RefCell<Option<Vec<(String, CudaEvent, CudaEvent)>>> =
        const { RefCell::new(None) };
}

/// Starts recording CUDA events around every kernel this thread launches
/// (GPU time of kernels alone, however long the host takes between them).
pub fn profile_start() {
    PROFILE.with(|p| *p.borrow_mut() = Some(Vec::new()));
}

/// Stops recording and returns `(kernel name, milliseconds)` per launch,
/// in launch order (waits for the events).
pub fn profile_take() -> Result<Vec<(String, f64)>> {
    let log = PROFILE.with(|p| p.borrow_mut().take()).unwrap_or_default();
    log.into_iter()
        .map(|(name, s, e)| Ok((name, elapsed_ms(&s, &e)?)))
        .collect()
}

/// Milliseconds between two recorded events (waits for the later one).
pub fn elapsed_ms(start: &CudaEvent, end: &CudaEvent) -> Result<f64> {
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
        let profiling = PROFILE.with(|p| p.borrow().is_some());
        if debug::level() < 2 && !profiling {
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
    /// `SMELT_DEBUG>=2` (waiting for it) and logs it while profiling.
    pub(super) fn stop(self, dev: &CudaDevice, k: &Kernel) -> Result<()> {
        dev.record(&self.end)?;
        if debug::level() >= 2 {
            let ms = elapsed_ms(&self.start, &self.end)?;
            debug::report_kernel(k, std::time::Duration::from_secs_f64(ms / 1e3));
        }
        PROFILE.with(|p| {
            if let Some(log) = p.borrow_mut().as_mut() {
                log.push((k.name.clone(), self.start, self.end));
            }
        });
        Ok(())
    }
}
