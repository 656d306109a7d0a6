//! Host data recorded by the creation functions and placed on its device
//! at realize, so a missing device or a full memory is an `Err` there
//! instead of a panic when the tensor is created.

use super::{cpu, cuda};
use crate::{DType, Device, Error, Result};
use smelt_codegen::host_alloc::zeroed_bytes;
use smelt_fusion::BufferHandle;
use std::sync::{Arc, Mutex};

/// Where a created tensor's elements come from.
pub(crate) enum Source {
    /// Elements already in the dtype's bytes.
    Bytes(Vec<u8>),
    /// Element `i` computed when the tensor is placed (no memory before).
    Gen(Box<dyn Fn(usize) -> f64 + Send + Sync>),
    /// Bytes of a memory-mapped file (a loaded safetensors tensor): copied
    /// to the host or uploaded straight from the mapping when placed.
    Mapped(Mapped),
    /// Creating the host copy failed; every realize reports it.
    Failed(Error),
}

/// A byte range of a read-only file mapping, shared by every tensor
/// loaded from that file.
pub(crate) struct Mapped {
    /// The whole file.
    pub map: Arc<memmap2::Mmap>,
    /// Where the tensor's bytes start in it.
    pub start: usize,
    /// How many bytes it has.
    pub len: usize,
}

impl Mapped {
    fn bytes(&self) -> &[u8] {
        &self.map[self.start..self.start + self.len]
    }
}

/// Places mapped bytes: the CPU gets its own copy, a GPU an upload read
/// straight from the mapping (no host copy in between).
fn place_mapped(m: &Mapped, device: Device) -> Result<BufferHandle> {
    match device {
        Device::Cpu => {
            let mut v = smelt_codegen::host_alloc::vec_with_capacity(m.len)?;
            v.extend_from_slice(m.bytes());
            Ok(cpu::wrap(v))
        }
        Device::Cuda(n) => Ok(Arc::new(cuda::device(n)?.upload(m.bytes())?)),
    }
}

/// Data not yet on its device: the buffer handle a created tensor holds
/// until [`resolve`] places it (once; a failed placement can be retried).
struct Pending {
    dtype: DType,
    len: usize,
    state: Mutex<State>,
}

enum State {
    Waiting(Source),
    Placed(BufferHandle),
}

/// A buffer handle for `len` elements of `dtype` from `source`.
pub(crate) fn pending(source: Source, dtype: DType, len: usize) -> BufferHandle {
    Arc::new(Pending {
        dtype,
        len,
        state: Mutex::new(State::Waiting(source)),
    })
}

/// The device buffer behind `buf`: `buf` itself, or its pending host data
/// placed on `device` now (later calls return the same buffer).
pub(crate) fn resolve(buf: &BufferHandle, device: Device) -> Result<BufferHandle> {
    let Some(p) = buf.downcast_ref::<Pending>() else {
        return Ok(buf.clone());
    };
    let mut st = p.state.lock().unwrap_or_else(|e| e.into_inner());
    if let State::Waiting(Source::Mapped(m)) = &*st {
        let placed = place_mapped(m, device)?;
        *st = State::Placed(placed.clone());
        return Ok(placed);
    }
    let bytes = match &mut *st {
        State::Placed(b) => return Ok(b.clone()),
        State::Waiting(Source::Failed(e)) => return Err(e.clone()),
        State::Waiting(Source::Mapped(_)) => unreachable!("placed above"),
        State::Waiting(Source::Bytes(b)) => std::mem::take(b),
        State::Waiting(Source::Gen(f)) => {
            let mut b = zeroed_bytes(p.len, p.dtype.size())?;
            for i in 0..p.len {
                p.dtype.write(&mut b, i, f(i));
            }
            b
        }
    };
    let placed: Result<BufferHandle> = match device {
        Device::Cpu => Ok(cpu::wrap(bytes)),
        Device::Cuda(n) => match cuda::device(n).and_then(|d| d.upload(&bytes)) {
            Ok(b) => Ok(Arc::new(b)),
            Err(e) => {
                // Keep the data so a realize after freeing memory succeeds.
                if let State::Waiting(Source::Bytes(b)) = &mut *st {
                    *b = bytes;
                }
                Err(e)
            }
        },
    };
    let placed = placed?;
    *st = State::Placed(placed.clone());
    Ok(placed)
}
