//! Loaded kernels: a module is PTX the driver compiled (one JIT each), and
//! each GPU keeps the [`max_modules`] most recently used by key (`lru.rs`).
//! An evicted module is unloaded once no schedule holds its `Arc` and, if
//! it was ever launched, after a context synchronize; it is reloaded from
//! the on-disk PTX cache if needed again. Which PTX to load (tuned variant,
//! disk, emitter) is decided by the caller (`execute.rs`).

use super::lru::Lru;
use super::probe::driver_err;
use crate::stats;
use crate::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::safe::CudaContext;
use cudarc::driver::sys;
use smelt_codegen::ptx::PtxKernel;
use std::ffi::{c_void, CString};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

/// Loaded modules kept per device by default: each holds device memory
/// for its code, and a process that keeps meeting new kernels (new shapes)
/// would otherwise hold every module it ever loaded. 256 covers the
/// kernels of a training step many times over; `SMELT_MAX_MODULES`
/// overrides it.
const MAX_MODULES: usize = 256;

/// The bound of each device's module cache: `SMELT_MAX_MODULES`, else 256.
/// Beyond it the least recently used module is unloaded (and reloaded from
/// the on-disk PTX cache, one JIT, if it is needed again).
pub(super) fn max_modules() -> usize {
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
    /// The entry point of each launch, in order.
    pub(super) funcs: Vec<sys::CUfunction>,
    /// Its PTX and launch shapes.
    pub(super) launch: PtxKernel,
    ctx: Arc<CudaContext>,
    /// Whether a launch was queued: the unload must then wait for it.
    pub(super) launched: AtomicBool,
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
// `Loaded` is never mutated after creation (but for the `launched` flag,
// an atomic).
unsafe impl Send for Loaded {}
unsafe impl Sync for Loaded {}

/// One GPU's loaded modules by key, at most [`max_modules`].
pub(super) struct ModuleCache {
    ctx: Arc<CudaContext>,
    modules: Mutex<Lru<u64, Arc<Loaded>>>,
}

impl ModuleCache {
    /// An empty cache for modules of `ctx`.
    pub(super) fn new(ctx: Arc<CudaContext>) -> ModuleCache {
        ModuleCache {
            ctx,
            modules: Mutex::new(Lru::new(max_modules())),
        }
    }

    /// The module loaded under `key`, marked as just used (the map's lock
    /// is released on return, so a caller may go on to load one).
    pub(super) fn get(&self, key: u64) -> Option<Arc<Loaded>> {
        self.modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
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

    /// Loads the module of `launch` and remembers it under `key`.
    pub(super) fn load_as(&self, key: u64, launch: PtxKernel, name: &str) -> Result<Arc<Loaded>> {
        Ok(self.remember(key, self.load(launch, name)?))
    }

    /// Loads the module of `launch` (kernel `name`, for messages) without
    /// remembering it: the autotuner loads every variant, keeps one.
    pub(super) fn load(&self, launch: PtxKernel, name: &str) -> Result<Arc<Loaded>> {
        let src = CString::new(launch.ptx.clone())
            .map_err(|_| Error::Compile(format!("kernel {name}: PTX holds a NUL byte")))?;
        let entries = launch
            .launches
            .iter()
            .map(|l| CString::new(l.entry.clone()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| Error::Compile(format!("kernel {name}: bad entry name")))?;
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_err("binding the context", e))?;
        // SAFETY: `src` is NUL-terminated PTX text; the module lives as
        // long as the `Loaded` holding the function handle.
        let module = unsafe { cu::module::load_data(src.as_ptr() as *const c_void) }
            .map_err(|e| driver_err(&format!("loading kernel {name}"), e))?;
        stats::count(|s| s.modules_loaded += 1);
        // Owned from here, so the module is unloaded if an entry is missing
        // or the device cannot give it the shared memory it asks for (an
        // autotuner variant).
        let mut l = Loaded {
            module,
            funcs: Vec::with_capacity(entries.len()),
            launch,
            ctx: self.ctx.clone(),
            launched: AtomicBool::new(false),
        };
        for (entry, shape) in entries.into_iter().zip(&l.launch.launches) {
            // SAFETY: the module is loaded and outlives the handle.
            let func = unsafe { cu::module::get_function(l.module, entry) }
                .map_err(|e| driver_err(&format!("finding kernel {name}"), e))?;
            if shape.shared_bytes > 48 * 1024 {
                // SAFETY: raises the dynamic shared-memory limit of a valid function.
                unsafe {
                    cu::function::set_function_attribute(
                        func,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        shape.shared_bytes as i32,
                    )
                }
                .map_err(|e| driver_err(&format!("raising shared memory of {name}"), e))?;
            }
            l.funcs.push(func);
        }
        Ok(Arc::new(l))
    }
}
