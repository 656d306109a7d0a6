//! Running a schedule on a GPU: buffers from the caching allocator, each
//! kernel's module (the autotuned variant, else the module cache, the
//! on-disk PTX cache or the emitter, in that order), launches in schedule
//! order on the device's stream, and intermediates freed after their last
//! use.

use super::alloc::buffer;
use super::device::{device, CudaDevice};
use super::disk::DiskCache;
use super::launch::launch_args;
use super::modules::Loaded;
use super::profile::Timer;
use crate::runtime::debug;
use crate::stats;
use crate::{Error, Result};
use smelt_codegen::ptx;
use smelt_codegen::Kernel;
use smelt_fusion::{BufferHandle, BufferSpec, Schedule};
use std::sync::Arc;

impl CudaDevice {
    /// The module-cache key of `k` on this device: its code hash (which
    /// leaves out its scalars' values, so one module serves every value)
    /// mixed with the environment's emitter switches (`ptx::env_key`) and
    /// the target.
    fn key(&self, k: &Kernel) -> u64 {
        k.code_hash()
            ^ ptx::env_key(k).rotate_left(16)
            ^ (self.target.sm as u64).rotate_left(48)
            ^ (self.target.num_sms as u64).rotate_left(32)
    }

    /// The loaded kernel for `k`, emitting and loading it on first use:
    /// the autotuned variant when there is one (`tune.rs`; timed on
    /// `args`, the launch's parameters, if not chosen yet), else the
    /// heuristic kernel from the on-disk cache or the emitter.
    fn kernel(&self, k: &Kernel, args: &[u64]) -> Result<Arc<Loaded>> {
        let key = self.key(k);
        if let Some(l) = self.modules.get(key) {
            return Ok(l);
        }
        // Before the PTX cache, which holds the heuristic kernel under the
        // same key.
        if let Some(l) = self.tuned(k, key, args) {
            return Ok(self.modules.remember(key, l));
        }
        let disk = DiskCache::open();
        if let Some(d) = &disk {
            if let Some(cached) = d.load(key) {
                match self.modules.load_as(key, cached, &k.name) {
                    Ok(l) => {
                        stats::count(|s| s.ptx_disk_hits += 1);
                        return Ok(l);
                    }
                    // A damaged or stale cache file must not fail every
                    // run: drop it and emit the kernel afresh.
                    Err(_) => d.evict(key),
                }
            }
        }
        let launch = ptx::emit(k, &self.target)
            .map_err(|e| Error::Compile(format!("kernel {}: {e}", k.name)))?;
        stats::count(|s| s.ptx_emitted += 1);
        if let Some(d) = &disk {
            d.store(key, &launch);
        }
        if debug::level() >= 4 {
            eprintln!("{}", launch.ptx);
        }
        self.modules.load_as(key, launch, &k.name)
    }
}

/// Runs a schedule on GPU `n`. `inputs` holds, per schedule buffer, the
/// placed data of a realized one (`None` for buffers the kernels write).
/// Returns the buffers of its results, in the order of `schedule.results`.
pub(crate) fn execute(
    n: usize,
    schedule: &Schedule,
    inputs: Vec<Option<BufferHandle>>,
) -> Result<Vec<BufferHandle>> {
    let dev = device(n)?;
    let last_use = schedule.last_uses();
    let mut slots = inputs;
    // Kernels with indirect loads or adds raise this flag where an index is
    // out of range (they mask the access); it is read once, after the
    // schedule.
    let flag = match schedule.items.iter().any(|it| it.kernel.has_indirect()) {
        true => Some(dev.upload(&[0u8; 4])?),
        false => None,
    };
    for (i, it) in schedule.items.iter().enumerate() {
        for &b in &it.outputs {
            // A buffer an earlier kernel wrote is updated in place (a
            // scatter's adds into its copy), so it keeps its slot.
            if slots[b].is_some() {
                continue;
            }
            if let BufferSpec::New { dtype, len } = schedule.buffers[b] {
                let bytes = len.checked_mul(dtype.size()).ok_or_else(|| {
                    Error::OutOfMemory(format!("a buffer of {len} x {dtype} overflows usize"))
                })?;
                slots[b] = Some(Arc::new(dev.alloc(bytes)?));
            }
        }
        if let Some(o) = it.kernel.zeroed_output() {
            // A look-back scan's status buffer starts from zeros at every
            // launch (on the stream, before the kernel): its counter and
            // flags, the part the kernel reads before writing.
            let h = slots[it.outputs[o]]
                .as_ref()
                .ok_or_else(|| Error::Runtime("status buffer not allocated".into()))?;
            let words = ptx::scan_status_zeroed_len(&it.kernel);
            dev.zero(buffer(h)?, words.saturating_mul(std::mem::size_of::<i64>()))?;
        }
        let mut ptrs = Vec::with_capacity(it.inputs.len() + it.outputs.len());
        for &b in it.inputs.iter().chain(&it.outputs) {
            let h = slots[b]
                .as_ref()
                .ok_or_else(|| Error::Runtime("buffer used before it was written".into()))?;
            ptrs.push(buffer(h)?.ptr());
        }
        let flag_ptr = flag.as_ref().map(|f| f.ptr());
        let args = launch_args(&it.kernel, ptrs, &schedule.scalar_values(it), flag_ptr);
        // Loaded (and tuned) before the first event, so a kernel's first
        // timing holds neither the JIT nor the autotuner.
        let loaded = match it.kernel.rows() {
            0 => None, // nothing to write
            _ => Some(dev.kernel(&it.kernel, &args)?),
        };
        let timer = Timer::start(&dev)?;
        if let Some(l) = &loaded {
            dev.launch_loaded(l, &args, &it.kernel.name)?;
        }
        stats::count_kernel();
        if let Some(t) = timer {
            t.stop(&dev, &it.kernel)?;
        }
        for &b in it.inputs.iter().chain(&it.outputs) {
            if last_use[b] == i {
                slots[b] = None;
            }
        }
    }
    if let Some(f) = &flag {
        // One synchronising read per realize with indirect loads.
        if dev.download(f, 4)? != [0u8; 4] {
            return Err(Error::Launch(
                "an index is out of range for the axis it indexes (gather, index_select, embedding, scatter_add or index_add)"
                    .into(),
            ));
        }
    }
    schedule
        .results
        .iter()
        .map(|(_, b)| {
            slots[*b]
                .clone()
                .ok_or_else(|| Error::Runtime("result was not written".into()))
        })
        .collect()
}
