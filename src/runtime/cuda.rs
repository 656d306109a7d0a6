//! The CUDA runtime: device buffers with a caching allocator, a module
//! cache keyed by kernel hash and target (autotuned matmul variants first,
//! see `tune.rs`; PTX from the on-disk cache, `disk.rs`, next), bounded to
//! the [`max_modules`] most recently used, launches on one stream, and
//! event timing. Every driver failure becomes a [`crate::Error`]; nothing
//! here panics when no driver is installed (the library is probed first).

use super::disk::DiskCache;
use super::lru::Lru;
use super::stats;
use crate::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::safe::{CudaContext, CudaEvent, CudaStream};
use cudarc::driver::sys;
use smelt_codegen::ptx::{self, PtxKernel, Target};
use smelt_codegen::Kernel;
use smelt_fusion::{BufferHandle, BufferSpec, Schedule};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use super::tune::tunings;

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

fn driver_err(what: &str, e: cu::DriverError) -> Error {
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

/// Loaded modules kept per device by default: each holds device memory
/// for its code, and a process that keeps meeting new kernels (new shapes)
/// would otherwise hold every module it ever loaded. 256 covers the
/// kernels of a training step many times over; `SMELT_MAX_MODULES`
/// overrides it.
const MAX_MODULES: usize = 256;

/// The bound of each device's module cache: `SMELT_MAX_MODULES`, else 256.
/// Beyond it the least recently used module is unloaded (and reloaded from
/// the on-disk PTX cache, one JIT, if it is needed again).
pub fn max_modules() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        smelt_codegen::env::var("SMELT_MAX_MODULES", smelt_codegen::env::parse_count)
            .unwrap_or(MAX_MODULES)
    })
}

/// A loaded kernel. Driver handles are plain pointers owned by the
/// context; the module is unloaded when the last `Arc` goes: when the
/// module cache evicts it and no schedule still holds it, or for the
/// autotuner's losing variants.
pub(super) struct Loaded {
    module: sys::CUmodule,
    func: sys::CUfunction,
    launch: PtxKernel,
    ctx: Arc<CudaContext>,
    /// Whether a launch was queued: the unload must then wait for it.
    launched: AtomicBool,
}

impl Drop for Loaded {
    fn drop(&mut self) {
        // Launches are asynchronous: a module evicted right after its
        // launch may still run. Waiting is rare (an eviction past the
        // cache's bound, which comes with a JIT anyway).
        if *self.launched.get_mut() {
            let _ = self.ctx.synchronize();
        } else {
            let _ = self.ctx.bind_to_thread();
        }
        // SAFETY: the module was loaded once and nothing launches it any
        // more; a failure only leaks its code.
        let _ = unsafe { cu::module::unload(self.module) };
    }
}

// SAFETY: CUfunction handles may be used from any thread once loaded, and
// `Loaded` is never mutated after creation.
unsafe impl Send for Loaded {}
unsafe impl Sync for Loaded {}

/// One GPU: its context, stream, loaded kernels and free memory blocks.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    target: Target,
    /// Loaded modules by key, the [`max_modules`] most recently used.
    modules: Mutex<Lru<u64, Arc<Loaded>>>,
    pool: Mutex<HashMap<usize, Vec<sys::CUdeviceptr>>>,
}

/// Memory on a GPU; returns to its device's pool when dropped.
pub struct CudaBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    dev: Arc<CudaDevice>,
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        // Later work on the same stream is ordered after every kernel that
        // used this block, so it can be reused at once.
        if let Ok(mut p) = self.dev.pool.lock() {
            p.entry(self.bytes).or_default().push(self.ptr);
        }
    }
}

impl CudaBuffer {
    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
}

/// Rounds a request up to its pool size class (256 B granules below 1 MiB,
/// steps of at most 1/8 of the size above), so freed blocks are reused.
fn size_class(bytes: usize) -> usize {
    let b = bytes.max(256);
    if b <= 1 << 20 {
        b.div_ceil(256) * 256
    } else {
        let step = (b.next_power_of_two() / 16).max(1);
        b.div_ceil(step) * step
    }
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
    // PTX for sm_90 runs on sm_90 and newer; older parts get sm_80 code.
    let sm = if major * 10 + minor >= 90 { 90 } else { 80 };
    let d = Arc::new(CudaDevice {
        ctx,
        stream,
        target: Target {
            sm,
            num_sms: sms.max(1) as u32,
        },
        modules: Mutex::new(Lru::new(max_modules())),
        pool: Mutex::new(HashMap::new()),
    });
    devs.insert(n, d.clone());
    Ok(d)
}

impl CudaDevice {
    fn bind(&self) -> Result<()> {
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

    /// A block of at least `bytes`, from the pool or newly allocated (the
    /// pool is emptied and the allocation retried once when memory runs
    /// out).
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> Result<CudaBuffer> {
        // No allocation can be this large; the size class would overflow.
        if bytes > isize::MAX as usize {
            return Err(Error::OutOfMemory(format!("allocating {bytes} bytes")));
        }
        let class = size_class(bytes);
        let reused = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&class)
            .and_then(|v| v.pop());
        let ptr = match reused {
            Some(p) => p,
            None => {
                self.bind()?;
                // SAFETY: a plain allocation in the bound context.
                match unsafe { cu::malloc_sync(class) } {
                    Ok(p) => p,
                    Err(_) => {
                        self.release_pool()?;
                        unsafe { cu::malloc_sync(class) }
                            .map_err(|e| driver_err(&format!("allocating {bytes} bytes"), e))?
                    }
                }
            }
        };
        Ok(CudaBuffer {
            ptr,
            bytes: class,
            dev: self.clone(),
        })
    }

    /// Frees every pooled block.
    fn release_pool(&self) -> Result<()> {
        self.sync()?;
        let blocks: Vec<sys::CUdeviceptr> = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .flat_map(|(_, v)| v)
            .collect();
        for p in blocks {
            // SAFETY: pooled blocks are unused (the stream was synchronised).
            unsafe { cu::free_sync(p) }.map_err(|e| driver_err("freeing memory", e))?;
        }
        Ok(())
    }

    /// Waits for all queued work.
    pub fn sync(&self) -> Result<()> {
        self.bind()?;
        self.stream
            .synchronize()
            .map_err(|e| driver_err("synchronising", e))
    }

    /// Copies host bytes into a new buffer.
    pub fn upload(self: &Arc<Self>, bytes: &[u8]) -> Result<CudaBuffer> {
        let b = self.alloc(bytes.len())?;
        if !bytes.is_empty() {
            self.bind()?;
            self.sync()?;
            // SAFETY: the block holds at least `bytes.len()` bytes.
            unsafe { cu::memcpy_htod_sync(b.ptr, bytes) }
                .map_err(|e| driver_err("copying to the device", e))?;
        }
        Ok(b)
    }

    /// Copies the first `len` bytes of a buffer to the host.
    pub fn download(&self, b: &CudaBuffer, len: usize) -> Result<Vec<u8>> {
        let mut out = smelt_codegen::host_alloc::filled(len, 0u8)?;
        if len > 0 {
            self.sync()?;
            // SAFETY: the block holds at least `len` bytes (callers pass the
            // tensor's size, which the block was allocated for).
            unsafe { cu::memcpy_dtoh_sync(&mut out, b.ptr) }
                .map_err(|e| driver_err("copying to the host", e))?;
        }
        Ok(out)
    }

    /// The loaded kernel for `k`, emitting and loading it on first use:
    /// the autotuned variant when there is one (`tune.rs`; timed on
    /// `args`, the launch's parameters, if not chosen yet), else the
    /// heuristic kernel. The key is the kernel's code hash, which leaves
    /// out its scalars' values: one module serves every value.
    fn kernel(&self, k: &Kernel, args: &[u64]) -> Result<Arc<Loaded>> {
        let key = k.code_hash()
            ^ (self.target.sm as u64).rotate_left(48)
            ^ (self.target.num_sms as u64).rotate_left(32);
        if let Some(l) = self.loaded(key) {
            return Ok(l);
        }
        // Before the PTX cache, which holds the heuristic kernel under the
        // same key.
        if let Some(l) = self.tuned(k, key, args) {
            return Ok(self.remember(key, l));
        }
        let disk = DiskCache::open();
        if let Some(d) = &disk {
            if let Some(cached) = d.load(key) {
                match self.load(key, cached, &k.name) {
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
        if super::debug_level() >= 4 {
            eprintln!("{}", launch.ptx);
        }
        self.load(key, launch, &k.name)
    }

    /// The module already loaded under `key`, marked as just used (the
    /// map's lock is released on return, so a caller may go on to `load`).
    pub(super) fn loaded(&self, key: u64) -> Option<Arc<Loaded>> {
        self.modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
    }

    /// Loads the module of `launch` and remembers it under `key`.
    fn load(&self, key: u64, launch: PtxKernel, name: &str) -> Result<Arc<Loaded>> {
        Ok(self.remember(key, self.module(launch, name)?))
    }

    /// Makes `l` the module launched for `key` and returns it, or the one
    /// another thread remembered first (then `l`, never launched, goes).
    /// Past the cache's bound the least recently used modules are let go;
    /// each is unloaded once no schedule holds it and its launches are
    /// done (see [`Loaded`]'s drop), outside the cache's lock.
    pub(super) fn remember(&self, key: u64, l: Arc<Loaded>) -> Arc<Loaded> {
        let (l, evicted) = self
            .modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(key, l);
        stats::count(|s| s.modules_evicted += evicted.len() as u64);
        l
    }

    /// Loads the module of `launch` (kernel `name`, for messages) without
    /// remembering it: the autotuner loads every variant, keeps one.
    pub(super) fn module(&self, launch: PtxKernel, name: &str) -> Result<Arc<Loaded>> {
        let src = CString::new(launch.ptx.clone())
            .map_err(|_| Error::Compile(format!("kernel {name}: PTX holds a NUL byte")))?;
        let entry = CString::new(launch.entry.clone())
            .map_err(|_| Error::Compile(format!("kernel {name}: bad entry name")))?;
        self.bind()?;
        // SAFETY: `src` is NUL-terminated PTX text; the module lives as
        // long as the `Loaded` holding the function handle.
        let (module, func) = unsafe {
            let module = cu::module::load_data(src.as_ptr() as *const c_void)
                .map_err(|e| driver_err(&format!("loading kernel {name}"), e))?;
            let func = cu::module::get_function(module, entry)
                .map_err(|e| driver_err(&format!("finding kernel {name}"), e))?;
            (module, func)
        };
        stats::count(|s| s.modules_loaded += 1);
        // Owned from here, so the module is unloaded if the device cannot
        // give it the shared memory it asks for (an autotuner variant).
        let l = Loaded {
            module,
            func,
            launch,
            ctx: self.ctx.clone(),
            launched: AtomicBool::new(false),
        };
        if l.launch.shared_bytes > 48 * 1024 {
            // SAFETY: raises the dynamic shared-memory limit of a valid function.
            unsafe {
                cu::function::set_function_attribute(
                    l.func,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    l.launch.shared_bytes as i32,
                )
            }
            .map_err(|e| driver_err(&format!("raising shared memory of {name}"), e))?;
        }
        Ok(Arc::new(l))
    }

    /// Queues a kernel that keeps the GPU busy for about `micros`
    /// microseconds. Benchmarks queue it before their first timing event,
    /// so that the launches they time are already queued when the GPU
    /// reaches them and host launch latency stays out of the measurement
    /// (as `torch.cuda._sleep` does in PyTorch's benchmarks).
    pub fn busy(&self, micros: u32) -> Result<()> {
        let l = match self.loaded(SPIN_KEY) {
            Some(l) => l,
            None => self.load(SPIN_KEY, spin_kernel(), "smelt_spin")?,
        };
        self.launch_loaded(&l, &[u64::from(micros) * 1000], "smelt_spin")
    }

    /// Queues a loaded kernel over its parameters, 8 bytes each (see
    /// [`launch_args`] for an IR kernel's).
    pub(super) fn launch_loaded(&self, l: &Loaded, args: &[u64], name: &str) -> Result<()> {
        let mut vals: Vec<u64> = args.to_vec();
        let mut params: Vec<*mut c_void> = vals
            .iter_mut()
            .map(|p| p as *mut u64 as *mut c_void)
            .collect();
        let g = l.launch.grid;
        let b = l.launch.block;
        self.bind()?;
        l.launched.store(true, Ordering::Relaxed);
        // SAFETY: the parameters are the 8-byte values the kernel declares,
        // in order (the driver copies each parameter's declared size from
        // its pointer): for an IR kernel the device pointers it was emitted
        // for, each backing the lengths in its IR, then its scalars; for
        // the spin kernel a duration.
        unsafe {
            cu::launch_kernel(
                l.func,
                (g.0.max(1), g.1.max(1), g.2.max(1)),
                b,
                l.launch.shared_bytes,
                self.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(|e| driver_err(&format!("launching {name}"), e))
    }

    /// Queues a device-to-device copy of `bytes` bytes (the bandwidth
    /// ceiling benchmarks compare against).
    pub fn copy(&self, dst: &CudaBuffer, src: &CudaBuffer, bytes: usize) -> Result<()> {
        if bytes > dst.bytes.min(src.bytes) {
            return Err(Error::Runtime(format!(
                "copy of {bytes} bytes exceeds a {}-byte buffer",
                dst.bytes.min(src.bytes)
            )));
        }
        self.bind()?;
        // SAFETY: both blocks hold at least `bytes` bytes (checked above).
        unsafe { cu::memcpy_dtod_async(dst.ptr, src.ptr, bytes, self.stream.cu_stream()) }
            .map_err(|e| driver_err("copying on the device", e))
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

/// Module-cache key of the spin kernel (kernel keys are hashes of IR).
const SPIN_KEY: u64 = u64::MAX;

/// One warp that waits until `%globaltimer` has advanced by its parameter
/// (nanoseconds).
fn spin_kernel() -> PtxKernel {
    let ptx = "\
.version 8.0
.target sm_80
.address_size 64
.visible .entry smelt_spin(.param .u64 ns)
{
    .reg .u64 %t<3>;
    .reg .pred %p;
    ld.param.u64 %t2, [ns];
    mov.u64 %t0, %globaltimer;
SPIN:
    mov.u64 %t1, %globaltimer;
    sub.u64 %t1, %t1, %t0;
    setp.lt.u64 %p, %t1, %t2;
    @%p bra SPIN;
    ret;
}
";
    PtxKernel {
        ptx: ptx.into(),
        entry: "smelt_spin".into(),
        grid: (1, 1, 1),
        block: (32, 1, 1),
        shared_bytes: 0,
    }
}

thread_local! {
    /// Event pairs around every kernel this thread launches while
    /// profiling is on.
    static PROFILE: std::cell::RefCell<Option<Vec<(String, CudaEvent, CudaEvent)>>> =
        const { std::cell::RefCell::new(None) };
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

/// Milliseconds between two recorded events.
pub fn elapsed_ms(start: &CudaEvent, end: &CudaEvent) -> Result<f64> {
    start
        .elapsed_ms(end)
        .map(|t| t as f64)
        .map_err(|e| driver_err("reading an event", e))
}

/// The CUDA buffer behind a handle.
pub fn buffer(h: &BufferHandle) -> Result<&CudaBuffer> {
    h.downcast_ref::<CudaBuffer>()
        .ok_or_else(|| Error::Runtime("a CUDA tensor holds a buffer of another device".into()))
}

/// The parameters of a launch of IR kernel `k`, 8 bytes each as
/// `ptx::emit` declares them: the device pointers `ptrs` of its inputs
/// then outputs, then each of its scalars' `values` encoded by
/// [`ptx::scalar_param`] (rounded to the slot's dtype, as the CPU does).
fn launch_args(k: &Kernel, mut ptrs: Vec<u64>, values: &[f64]) -> Vec<u64> {
    ptrs.extend(
        k.scalars
            .iter()
            .zip(values)
            .map(|(dt, v)| ptx::scalar_param(*dt, *v)),
    );
    ptrs
}

/// Runs a schedule on GPU `n`.
pub fn execute(n: usize, schedule: &Schedule) -> Result<Vec<BufferHandle>> {
    let dev = device(n)?;
    let last_use = schedule.last_uses();
    let slots: Result<Vec<Option<BufferHandle>>> = schedule
        .buffers
        .iter()
        .map(|b| match b {
            BufferSpec::Realized { data, .. } => {
                super::host::resolve(data, crate::Device::Cuda(n)).map(Some)
            }
            BufferSpec::New { .. } => Ok(None),
        })
        .collect();
    let mut slots = slots?;
    let debug_timing = super::debug_level() >= 2;
    let profiling = PROFILE.with(|p| p.borrow().is_some());
    for (i, it) in schedule.items.iter().enumerate() {
        for &b in &it.outputs {
            if let BufferSpec::New { dtype, len } = schedule.buffers[b] {
                let bytes = len.checked_mul(dtype.size()).ok_or_else(|| {
                    Error::OutOfMemory(format!("a buffer of {len} x {dtype} overflows usize"))
                })?;
                slots[b] = Some(Arc::new(dev.alloc(bytes)?));
            }
        }
        let mut ptrs = Vec::with_capacity(it.inputs.len() + it.outputs.len());
        for &b in it.inputs.iter().chain(&it.outputs) {
            let h = slots[b]
                .as_ref()
                .ok_or_else(|| Error::Runtime("buffer used before it was written".into()))?;
            ptrs.push(buffer(h)?.ptr);
        }
        let args = launch_args(&it.kernel, ptrs, &schedule.scalar_values(it));
        // Loaded (and tuned) before the first event, so a kernel's first
        // timing holds neither the JIT nor the autotuner.
        let loaded = match it.kernel.rows() {
            0 => None, // nothing to write
            _ => Some(dev.kernel(&it.kernel, &args)?),
        };
        let events = if debug_timing || profiling {
            Some((dev.event()?, dev.event()?))
        } else {
            None
        };
        if let Some((s, _)) = &events {
            dev.record(s)?;
        }
        if let Some(l) = &loaded {
            dev.launch_loaded(l, &args, &it.kernel.name)?;
        }
        super::count_kernel();
        if let Some((s, e)) = events {
            dev.record(&e)?;
            if debug_timing {
                let ms = elapsed_ms(&s, &e)?;
                super::report_kernel(&it.kernel, std::time::Duration::from_secs_f64(ms / 1e3));
            }
            PROFILE.with(|p| {
                if let Some(log) = p.borrow_mut().as_mut() {
                    log.push((it.kernel.name.clone(), s, e));
                }
            });
        }
        for &b in it.inputs.iter().chain(&it.outputs) {
            if last_use[b] == i {
                slots[b] = None;
            }
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

#[cfg(test)]
mod tests {
    #[test]
    fn spin_kernel_assembles() {
        for sm in [80, 90] {
            match smelt_codegen::ptx::ptxas::assemble(&super::spin_kernel().ptx, sm) {
                Ok(Some(_)) => {}
                Ok(None) if smelt_codegen::env::flag("SMELT_REQUIRE_PTXAS", false) => {
                    panic!("SMELT_REQUIRE_PTXAS=1 but ptxas was not found")
                }
                Ok(None) => println!("skipped: ptxas not found"),
                Err(e) => panic!("ptxas rejected the spin kernel: {e}"),
            }
        }
    }

    #[test]
    fn size_classes_cover_the_request() {
        for b in [0, 1, 255, 257, 1 << 20, (1 << 20) + 1, 3 << 28] {
            let c = super::size_class(b);
            assert!(
                c >= b && c >= 256 && c <= b.max(256) * 9 / 8 + 256,
                "{b} -> {c}"
            );
        }
    }
}
