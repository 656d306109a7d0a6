//! The caching allocator: device memory in size classes within 1/8 of the
//! request, returned to its device's pool when a buffer is dropped and
//! handed out again without a driver call. Stream order makes immediate
//! reuse safe (every later use of a block is queued after the kernels that
//! used it before). When memory runs out the pool is freed and the
//! allocation retried once.

use super::probe::driver_err;
use crate::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::safe::{CudaContext, CudaStream};
use cudarc::driver::sys;
use smelt_fusion::BufferHandle;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The free blocks of one GPU by size class, with the context to allocate
/// in and the stream whose order makes reuse safe.
pub(super) struct Pool {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    free: Mutex<HashMap<usize, Vec<sys::CUdeviceptr>>>,
}

/// Memory on a GPU; returns to its device's pool when dropped.
pub struct CudaBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    pool: Arc<Pool>,
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        // Later work on the same stream is ordered after every kernel that
        // used this block, so it can be reused at once.
        if let Ok(mut p) = self.pool.free.lock() {
            p.entry(self.bytes).or_default().push(self.ptr);
        }
    }
}

impl CudaBuffer {
    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The block's size in bytes (its size class: at least what was asked).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The CUDA buffer behind a handle.
pub fn buffer(h: &BufferHandle) -> Result<&CudaBuffer> {
    h.downcast_ref::<CudaBuffer>()
        .ok_or_else(|| Error::Runtime("a CUDA tensor holds a buffer of another device".into()))
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

impl Pool {
    /// An empty pool allocating in `ctx`, reused in `stream`'s order.
    pub(super) fn new(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Arc<Pool> {
        Arc::new(Pool {
            ctx,
            stream,
            free: Mutex::new(HashMap::new()),
        })
    }

    /// A block of at least `bytes`, from the pool or newly allocated (the
    /// pool is emptied and the allocation retried once when memory runs
    /// out).
    pub(super) fn alloc(self: &Arc<Self>, bytes: usize) -> Result<CudaBuffer> {
        // No allocation can be this large; the size class would overflow.
        if bytes > isize::MAX as usize {
            return Err(Error::OutOfMemory(format!("allocating {bytes} bytes")));
        }
        let class = size_class(bytes);
        let reused = self
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&class)
            .and_then(|v| v.pop());
        let ptr = match reused {
            Some(p) => p,
            None => {
                self.ctx
                    .bind_to_thread()
                    .map_err(|e| driver_err("binding the context", e))?;
                // SAFETY: a plain allocation in the bound context.
                match unsafe { cu::malloc_sync(class) } {
                    Ok(p) => p,
                    Err(_) => {
                        self.release()?;
                        unsafe { cu::malloc_sync(class) }
                            .map_err(|e| driver_err(&format!("allocating {bytes} bytes"), e))?
                    }
                }
            }
        };
        Ok(CudaBuffer {
            ptr,
            bytes: class,
            pool: self.clone(),
        })
    }

    /// Frees every pooled block, once the stream is idle.
    fn release(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| driver_err("synchronising", e))?;
        let blocks: Vec<sys::CUdeviceptr> = self
            .free
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
}

#[cfg(test)]
mod tests {
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
