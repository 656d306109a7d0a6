//! Per-kernel times of the calling thread's realizes, for benchmarks and
//! for finding the slow kernel of a graph.
//!
//! Between [`start`] and [`take`], every kernel the thread runs is timed:
//! on a GPU by a pair of CUDA events around its launch (the kernel's GPU
//! time alone, however long the host takes between launches; launches are
//! not held back by the timing, [`take`] waits for the events), on the CPU
//! by the host's clock around the kernel. Profiling is per thread, so
//! realizes on other threads are not recorded.
//!
//! ```
//! use smelt::{profile, DType, Device, Tensor};
//! let x = Tensor::randn([256, 512], DType::F32, 0, &Device::Cpu);
//! profile::start();
//! x.softmax(-1).realize().unwrap();
//! let kernels = profile::take().unwrap();
//! assert!(!kernels.is_empty());
//! let total_ms: f64 = kernels.iter().map(|k| k.ms).sum();
//! for k in &kernels {
//!     println!("{:<40} {:8.3} ms", k.name, k.ms);
//! }
//! assert!(total_ms >= 0.0);
//! ```
//!
//! `SMELT_DEBUG=2` prints the same times as kernels run, for every thread.

use crate::Result;
use std::cell::RefCell;
use std::time::Duration;

/// The time of one kernel run, as [`take`] returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    /// The kernel's name (its kind and the ops it computes, as
    /// `SMELT_DEBUG` prints it).
    pub name: String,
    /// Milliseconds: GPU time on a CUDA device, host time on the CPU.
    pub ms: f64,
}

/// How a recorded kernel's time is known: measured, or read from the
/// device later (waiting for its events).
pub(crate) enum Timing {
    /// Measured by the host.
    Host(Duration),
    /// Read when [`take`] asks, in milliseconds.
    Device(Box<dyn FnOnce() -> Result<f64>>),
}

thread_local! {
    /// The kernels run by this thread since [`start`], while profiling.
    static LOG: RefCell<Option<Vec<(String, Timing)>>> = const { RefCell::new(None) };
}

/// Starts recording the time of every kernel this thread runs (discarding
/// what an earlier `start` recorded and nobody took).
pub fn start() {
    LOG.with(|l| *l.borrow_mut() = Some(Vec::new()));
}

/// Stops recording and returns the time of each kernel run since
/// [`start`], in the order they ran (empty if profiling was not started).
/// On a GPU it waits until those kernels have finished.
pub fn take() -> Result<Vec<KernelTime>> {
    let log = LOG.with(|l| l.borrow_mut().take()).unwrap_or_default();
    log.into_iter()
        .map(|(name, t)| {
            let ms = match t {
                Timing::Host(d) => d.as_secs_f64() * 1e3,
                Timing::Device(read) => read()?,
            };
            Ok(KernelTime { name, ms })
        })
        .collect()
}

/// True while this thread is profiling.
pub(crate) fn active() -> bool {
    LOG.with(|l| l.borrow().is_some())
}

/// Records the time of kernel `name`, if this thread is profiling.
pub(crate) fn record(name: &str, t: Timing) {
    LOG.with(|l| {
        if let Some(log) = l.borrow_mut().as_mut() {
            log.push((name.to_string(), t));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::{record, start, take, Timing};
    use std::time::Duration;

    #[test]
    fn records_only_between_start_and_take() {
        record("before", Timing::Host(Duration::from_millis(1)));
        start();
        record("a", Timing::Host(Duration::from_micros(1500)));
        record("b", Timing::Device(Box::new(|| Ok(0.25))));
        let got = take().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].name.as_str(), got[0].ms), ("a", 1.5));
        assert_eq!((got[1].name.as_str(), got[1].ms), ("b", 0.25));
        record("after", Timing::Host(Duration::from_millis(1)));
        assert!(take().unwrap().is_empty());
    }
}
