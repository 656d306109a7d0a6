//! CUDA devices, in the manner of `torch.cuda`: whether there is a GPU,
//! what it is, and the few raw handles that timing and interop with other
//! CUDA libraries need (events, the spin kernel, smelt's stream, device
//! memory, and [`Tensor::data_ptr`]).
//!
//! smelt queues all work for a GPU on one stream, so everything queued here
//! (events, copies, sleeps) is ordered with smelt's kernels. Nothing here
//! panics without a driver or a GPU: [`is_available`] is false and the
//! rest returns [`Error::NoDevice`], as it does for [`Device::Cpu`].
//!
//! Timing a realize on the GPU (the benchmarks' protocol: the GPU first
//! sleeps, so the work is queued before it is reached and the events time
//! the GPU, not the host's launches):
//!
//! ```
//! use smelt::{cuda, DType, Device, Tensor};
//! if cuda::is_available() {
//!     let dev = Device::Cuda(0);
//!     let x = Tensor::randn([1024, 4096], DType::F32, 0, &dev);
//!     x.realize().unwrap();
//!     let (start, end) = (cuda::Event::new(&dev).unwrap(), cuda::Event::new(&dev).unwrap());
//!     cuda::sleep(&dev, 200).unwrap();
//!     start.record().unwrap();
//!     x.softmax(-1).realize().unwrap();
//!     end.record().unwrap();
//!     let ms = start.elapsed_time(&end).unwrap();
//!     let props = cuda::get_device_properties(&dev).unwrap();
//!     println!("softmax on {}: {ms:.3} ms", props.name);
//! }
//! ```

use crate::runtime::{self, cuda as rt};
use crate::{Device, Error, Result, Tensor};
use cudarc::driver::safe::CudaEvent;
use smelt_fusion::Op;
use std::ffi::c_void;
use std::sync::Arc;

/// The runtime's device behind `device`, or `NoDevice` for the CPU.
fn gpu(device: &Device) -> Result<Arc<rt::CudaDevice>> {
    match device {
        Device::Cuda(n) => rt::device(*n),
        Device::Cpu => Err(Error::NoDevice(format!("{device} is not a CUDA device"))),
    }
}

/// True when a CUDA driver and at least one GPU are present. Never panics,
/// also without a driver (the library is probed before it is called).
///
/// ```
/// use smelt::{cuda, Device};
/// let dev = if cuda::is_available() { Device::Cuda(0) } else { Device::Cpu };
/// assert_eq!(cuda::is_available(), cuda::device_count() > 0);
/// # let _ = dev;
/// ```
pub fn is_available() -> bool {
    rt::available()
}

/// Number of CUDA GPUs (0 without a driver).
pub fn device_count() -> usize {
    rt::device_count()
}

/// What [`get_device_properties`] reports about a GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    /// The name the driver reports, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability, major part (9 for Hopper).
    pub major: u32,
    /// Compute capability, minor part.
    pub minor: u32,
    /// Number of streaming multiprocessors.
    pub multi_processor_count: u32,
    /// The architecture smelt emits PTX for on this GPU: 90 from compute
    /// capability 9.0 up, else 80.
    pub target_sm: u32,
    /// Total device memory in bytes.
    pub total_memory: u64,
}

/// The properties of a GPU.
///
/// # Errors
/// `NoDevice` for the CPU or a GPU that does not exist.
pub fn get_device_properties(device: &Device) -> Result<DeviceProperties> {
    let d = gpu(device)?;
    let (major, minor) = d.capability();
    Ok(DeviceProperties {
        name: d.name()?,
        major,
        minor,
        multi_processor_count: d.target().num_sms,
        target_sm: d.target().sm,
        total_memory: d.total_memory(),
    })
}

/// Keeps the GPU busy for about `micros` microseconds (a one-warp kernel
/// that watches the clock), queued on smelt's stream; returns at once.
/// Benchmarks queue it before their first timing event so that the work
/// they time is queued when the GPU reaches it, and host launch latency
/// stays out of the measurement (`torch.cuda._sleep` in PyTorch).
pub fn sleep(device: &Device, micros: u32) -> Result<()> {
    gpu(device)?.busy(micros)
}

/// The driver's handle (`CUstream`, the same as the runtime API's
/// `cudaStream_t`) of the stream smelt queues all work for `device` on,
/// for libraries that should run in order with smelt's kernels (a cuBLAS
/// handle set to it, say). The stream lives as long as the process.
pub fn stream(device: &Device) -> Result<*mut c_void> {
    Ok(gpu(device)?.raw_stream() as *mut c_void)
}

/// A CUDA event for timing work on a GPU (created with timing enabled),
/// like `torch.cuda.Event(enable_timing=True)`; see the module's example.
pub struct Event {
    dev: Arc<rt::CudaDevice>,
    event: CudaEvent,
}

impl Event {
    /// A new event on `device`.
    pub fn new(device: &Device) -> Result<Event> {
        let dev = gpu(device)?;
        let event = dev.event()?;
        Ok(Event { dev, event })
    }

    /// Queues the event on smelt's stream: it completes once everything
    /// queued before it has run.
    pub fn record(&self) -> Result<()> {
        self.dev.record(&self.event)
    }

    /// Milliseconds from this event to `end` (both recorded), waiting for
    /// `end` to complete.
    pub fn elapsed_time(&self, end: &Event) -> Result<f64> {
        rt::elapsed_ms(&self.event, &end.event)
    }
}

/// A block of raw GPU memory from smelt's caching allocator (returned to
/// it when dropped), for measurements outside the tensor API such as the
/// device's copy bandwidth.
pub struct DeviceBuffer {
    dev: Arc<rt::CudaDevice>,
    buf: rt::CudaBuffer,
    len: usize,
}

impl DeviceBuffer {
    /// `bytes` of uninitialised memory on `device` (256-byte aligned).
    ///
    /// # Errors
    /// `OutOfMemory` when the GPU cannot hold it, `NoDevice` for the CPU.
    pub fn new(device: &Device, bytes: usize) -> Result<DeviceBuffer> {
        let dev = gpu(device)?;
        let buf = dev.alloc(bytes)?;
        Ok(DeviceBuffer {
            dev,
            buf,
            len: bytes,
        })
    }

    /// The device address of the first byte.
    pub fn data_ptr(&self) -> u64 {
        self.buf.ptr()
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a buffer of 0 bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues a device-to-device copy of all of `src` into the start of
    /// this buffer on smelt's stream (`cuMemcpyDtoDAsync`); returns at once.
    ///
    /// # Errors
    /// `Runtime` if `src` is longer than this buffer.
    pub fn copy_from(&self, src: &DeviceBuffer) -> Result<()> {
        if src.len > self.len {
            return Err(Error::Runtime(format!(
                "copy of {} bytes into a {}-byte buffer",
                src.len, self.len
            )));
        }
        self.dev.copy(&self.buf, &src.buf, src.len)
    }
}

// In this file rather than `tensor.rs` because it exists for interop with
// other libraries, as the rest of this module does.
impl Tensor {
    /// The address of this tensor's data, realizing it first: on a GPU the
    /// device address of its first element, on the CPU the host address,
    /// like PyTorch's `data_ptr()`. For passing tensors to other libraries
    /// (the matmul benchmark hands operands to cuBLAS this way).
    ///
    /// The tensor must own its data or be a plain reshape of a tensor that
    /// does (else call [`Tensor::contiguous`] first); the elements are then
    /// contiguous in row-major order. The address is valid while the
    /// tensor lives. Tensors are immutable values that may share buffers:
    /// write through it only into a tensor made for that purpose (an output
    /// of your own kernel), before anything reads it. On a GPU, another
    /// stream must wait for smelt's work first ([`Device::synchronize`], or
    /// use [`stream`]).
    ///
    /// # Errors
    /// `Runtime` for a view that is not a plain reshape, or whatever the
    /// realize returns.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &Device::Cpu);
    /// let p = x.data_ptr().unwrap() as *const f32;
    /// // SAFETY: `x` owns three contiguous f32 on the host and outlives the read.
    /// assert_eq!(unsafe { *p.add(2) }, 3.0);
    /// assert!(x.reshape([1, 3]).data_ptr().is_ok()); // a plain reshape
    /// assert!(x.flip(0).data_ptr().is_err());
    /// ```
    pub fn data_ptr(&self) -> Result<u64> {
        self.realize()?;
        let buf = match self.node.op_and_data() {
            (_, Some(buf)) => Some(buf),
            (Op::View(src, st), None) if st.is_plain() && src.numel() == self.numel() => {
                src.realized()
            }
            _ => None,
        };
        let buf = buf.ok_or_else(|| {
            Error::Runtime(format!(
                "data_ptr: a view of shape {:?} is not laid out like its data; call contiguous() first",
                self.shape()
            ))
        })?;
        runtime::data_ptr(&buf, self.device)
    }
}
