//! One GPU: its context, stream, code target, allocator and module cache,
//! created on first use by the process-wide registry [`device`]; host and
//! device copies and timing events. Launching (`launch.rs`), running
//! schedules (`execute.rs`) and autotuning (`tune.rs`) add their methods
//! in their own files.

use super::alloc::{CudaBuffer, Pool};
use super::modules::ModuleCache;
use super::probe::{device_count, driver_err};
use crate::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::safe::{CudaContext, CudaEvent, CudaStream};
use cudarc::driver::sys;
use smelt_codegen::ptx::Target;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// One GPU: its context, stream, loaded kernels and free memory blocks.
pub struct CudaDevice {
    /// The device's primary context.
    pub(super) ctx: Arc<CudaContext>,
    /// The one stream all of smelt's work on the device is queued on.
    pub(super) stream: Arc<CudaStream>,
    /// The code target kernels are emitted for.
    pub(super) target: Target,
    /// The GPU's compute capability (major, minor).
    pub(super) capability: (u32, u32),
    /// Total device memory in bytes.
    pub(super) memory: u64,
    /// Loaded modules by key, the most recently used.
    pub(super) modules: ModuleCache,
    /// Free memory blocks.
    pub(super) pool: Arc<Pool>,
}

/// The device with ordinal `n`, created on first use.
pub fn device(n: usize) -> Result<Arc<CudaDevice>> {
    static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<CudaDevice>>>> = OnceLock::new();
    if n >= device_count() {
        return Err(Error::NoDevice(format!(
            "cuda:{n} (found {} CUDA device(s))",
            device_count()
        )));
    }
    let mut devs = DEVICES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(d) = devs.get(&n) {
        return Ok(d.clone());
    }
    let ctx = CudaContext::new(n).map_err(|e| driver_err("creating the context", e))?;
    let stream = ctx
        .new_stream()
        .map_err(|e| driver_err("creating a stream", e))?;
    let attr = |a| {
        ctx.attribute(a)
            .map_err(|e| driver_err("reading device attributes", e))
    };
    let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let sms = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let memory = ctx
        .total_mem()
        .map_err(|e| driver_err("reading the memory size", e))?;
    // PTX for sm_90 runs on sm_90 and newer; older parts get sm_80 code.
    let sm = if major * 10 + minor >= 90 { 90 } else { 80 };
    let d = Arc::new(CudaDevice {
        pool: Pool::new(ctx.clone(), stream.clone()),
        modules: ModuleCache::new(ctx.clone()),
        ctx,
        stream,
        target: Target {
            sm,
            num_sms: sms.max(1) as u32,
        },
        capability: (major.max(0) as u32, minor.max(0) as u32),
        memory: memory as u64,
    });
    devs.insert(n, d.clone());
    Ok(d)
}

impl CudaDevice {
    /// Makes the device's context current on this thread.
    pub(super) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_err("binding the context", e))
    }

    /// The GPU's name as the driver reports it (e.g. "NVIDIA H200").
    pub fn name(&self) -> Result<String> {
        self.ctx
            .name()
            .map_err(|e| driver_err("reading the device name", e))
    }

    /// The code target kernels are emitted for.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The GPU's compute capability (major, minor), e.g. (9, 0).
    pub fn capability(&self) -> (u32, u32) {
        self.capability
    }

    /// Total device memory in bytes.
    pub fn total_memory(&self) -> u64 {
        self.memory
    }

    /// The driver's handle of the stream all of smelt's work on this
    /// device is queued on (for interop).
    pub fn raw_stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    /// A block of at least `bytes` from the caching allocator.
    pub fn alloc(&self, bytes: usize) -> Result<CudaBuffer> {
        self.pool.alloc(bytes)
    }

    /// Waits for all queued work.
    pub fn sync(&self) -> Result<()> {
        self.bind()?;
        self.stream
            .synchronize()
            .map_err(|e| driver_err("synchronising", e))
    }

    /// Copies host bytes into a new buffer.
    ///
    /// Both copies are queued on smelt's stream and waited for. The
    /// synchronous driver copies run on the legacy default stream, which
    /// does not order against smelt's non-blocking stream: a pageable
    /// upload may still be in flight when it returns, and a kernel queued
    /// next could read the old bytes (the cause of wrong results seen only
    /// under GPU load).
    pub fn upload(&self, bytes: &[u8]) -> Result<CudaBuffer> {
        let b = self.alloc(bytes.len())?;
        if !bytes.is_empty() {
            self.bind()?;
            // SAFETY: the block holds at least `bytes.len()` bytes; the
            // stream is synchronised before `bytes` is released.
            unsafe { cu::memcpy_htod_async(b.ptr(), bytes, self.stream.cu_stream()) }
                .map_err(|e| driver_err("copying to the device", e))?;
            self.sync()?;
        }
        Ok(b)
    }

    /// Copies the first `len` bytes of a buffer to the host, after all
    /// work queued before it.
    pub fn download(&self, b: &CudaBuffer, len: usize) -> Result<Vec<u8>> {
        let mut out = smelt_codegen::host_alloc::filled(len, 0u8)?;
        if len > 0 {
            self.bind()?;
            // SAFETY: the block holds at least `len` bytes (callers pass the
            // tensor's size, which the block was allocated for); `out` is
            // read only after the stream is synchronised.
            unsafe { cu::memcpy_dtoh_async(&mut out, b.ptr(), self.stream.cu_stream()) }
                .map_err(|e| driver_err("copying to the host", e))?;
            self.sync()?;
        }
        Ok(out)
    }

    /// Queues a device-to-device copy of `bytes` bytes (the bandwidth
    /// ceiling benchmarks compare against).
    pub fn copy(&self, dst: &CudaBuffer, src: &CudaBuffer, bytes: usize) -> Result<()> {
        if bytes > dst.bytes().min(src.bytes()) {
            return Err(Error::Runtime(format!(
                "copy of {bytes} bytes exceeds a {}-byte buffer",
                dst.bytes().min(src.bytes())
            )));
        }
        self.bind()?;
        // SAFETY: both blocks hold at least `bytes` bytes (checked above).
        unsafe { cu::memcpy_dtod_async(dst.ptr(), src.ptr(), bytes, self.stream.cu_stream()) }
            .map_err(|e| driver_err("copying on the device", e))
    }

    /// Queues zeroing the first `bytes` bytes of `b` (at most all of it: a
    /// look-back scan's status buffer before each launch).
    pub fn zero(&self, b: &CudaBuffer, bytes: usize) -> Result<()> {
        self.bind()?;
        let bytes = bytes.min(b.bytes());
        // SAFETY: the block holds `b.bytes()` bytes, at least `bytes`.
        unsafe { cu::memset_d8_async(b.ptr(), 0, bytes, self.stream.cu_stream()) }
            .map_err(|e| driver_err("zeroing on the device", e))
    }

    /// A timing event (created with timing enabled).
    pub fn event(&self) -> Result<CudaEvent> {
        self.ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| driver_err("creating an event", e))
    }

    /// Records `e` on the device's stream.
    pub fn record(&self, e: &CudaEvent) -> Result<()> {
        e.record(&self.stream)
            .map_err(|e| driver_err("recording an event", e))
    }
}
