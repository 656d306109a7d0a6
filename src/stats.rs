//! Counters of the work realizes did on the calling thread: kernels run
//! ([`kernels_run`]), and schedules planned, GPU code produced, loaded and
//! tuned ([`compile_stats`]), so a program (or a test) can check that a
//! loop reuses its plans and modules. Constants are kernel parameters, so
//! a loop that only changes a learning rate, a temperature or a step
//! counter plans once and compiles once.
//!
//! ```
//! use smelt::{stats, DType, Device, Tensor};
//! let x = Tensor::ones([4, 4], DType::F32, &Device::Cpu);
//! let y = (&x + 1.0).sum(1);
//! let before = stats::kernels_run();
//! y.realize().unwrap();
//! y.to_vec::<f32>().unwrap(); // already realized: no kernel runs
//! assert_eq!(stats::kernels_run() - before, 1);
//! ```

use std::cell::Cell;

/// Counts of compilation work done by the calling thread; see
/// [`compile_stats`]. Take a reading before and after some work and
/// subtract with [`CompileStats::since`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Schedules planned from scratch: schedule cache misses (a graph of a
    /// structure, shapes or dtypes not seen before).
    pub schedules_planned: u64,
    /// Realizes whose schedule came from the schedule cache.
    pub schedule_cache_hits: u64,
    /// Kernels the CUDA runtime lowered to PTX (neither loaded in this
    /// process nor in the on-disk cache; each autotuning variant counts).
    pub ptx_emitted: u64,
    /// Kernels whose PTX came from the on-disk cache (`SMELT_CACHE_DIR`).
    pub ptx_disk_hits: u64,
    /// CUDA modules loaded, each a JIT compile by the driver.
    pub modules_loaded: u64,
    /// Modules unloaded to keep the module cache within its bound (least
    /// recently used first; `SMELT_MAX_MODULES`, 256 by default).
    pub modules_evicted: u64,
    /// Kernels the matmul autotuner timed in all their variants (a choice
    /// read from the tune file is not counted; `SMELT_TUNE=0` turns tuning
    /// off).
    pub kernels_tuned: u64,
}

impl CompileStats {
    /// The work done between `earlier` (an earlier reading on this thread)
    /// and `self`.
    pub fn since(&self, earlier: &CompileStats) -> CompileStats {
        CompileStats {
            schedules_planned: self
                .schedules_planned
                .saturating_sub(earlier.schedules_planned),
            schedule_cache_hits: self
                .schedule_cache_hits
                .saturating_sub(earlier.schedule_cache_hits),
            ptx_emitted: self.ptx_emitted.saturating_sub(earlier.ptx_emitted),
            ptx_disk_hits: self.ptx_disk_hits.saturating_sub(earlier.ptx_disk_hits),
            modules_loaded: self.modules_loaded.saturating_sub(earlier.modules_loaded),
            modules_evicted: self.modules_evicted.saturating_sub(earlier.modules_evicted),
            kernels_tuned: self.kernels_tuned.saturating_sub(earlier.kernels_tuned),
        }
    }
}

thread_local! {
    static KERNELS_RUN: Cell<u64> = const { Cell::new(0) };
}

/// Number of kernels this thread has run so far (all devices). Tests use it
/// to prove that realized results are not recomputed (see the module's
/// example).
pub fn kernels_run() -> u64 {
    KERNELS_RUN.with(|c| c.get())
}

/// Counts one kernel run by this thread.
pub(crate) fn count_kernel() {
    KERNELS_RUN.with(|c| c.set(c.get() + 1));
}

thread_local! {
    /// The GPU counters (the schedule counts live in the schedule cache).
    static GPU: Cell<CompileStats> = const {
        Cell::new(CompileStats {
            schedules_planned: 0,
            schedule_cache_hits: 0,
            ptx_emitted: 0,
            ptx_disk_hits: 0,
            modules_loaded: 0,
            modules_evicted: 0,
            kernels_tuned: 0,
        })
    };
}

/// The compilation work this thread has done so far (since it started).
///
/// Counted per thread, like [`kernels_run`]: work is counted on the
/// thread whose realize did it, so realizes on other threads (tests run in
/// parallel) do not disturb a measurement. The module cache is shared, so
/// a module one thread loaded is not loaded, nor counted, again by another.
///
/// ```
/// use smelt::{stats::compile_stats, Device, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &Device::Cpu);
/// let before = compile_stats();
/// for step in 0..10 {
///     let lr = 0.1 / (1.0 + step as f64);
///     (&x * lr).realize().unwrap();
/// }
/// let done = compile_stats().since(&before);
/// assert_eq!(done.schedules_planned, 1);
/// assert_eq!(done.schedule_cache_hits, 9);
/// ```
pub fn compile_stats() -> CompileStats {
    let plans = smelt_fusion::cache::counts();
    CompileStats {
        schedules_planned: plans.planned,
        schedule_cache_hits: plans.reused,
        ..GPU.with(Cell::get)
    }
}

/// Adds to this thread's GPU counters.
pub(crate) fn count(f: impl FnOnce(&mut CompileStats)) {
    GPU.with(|c| {
        let mut s = c.get();
        f(&mut s);
        c.set(s);
    });
}
