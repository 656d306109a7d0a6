//! Launching a loaded kernel on a device's stream (every parameter 8
//! bytes: an IR kernel's buffer pointers, then its scalars as
//! `ptx::scalar_param` encodes them), and the spin kernel that keeps the
//! GPU busy so that timed launches are queued before it reaches them.

use super::device::CudaDevice;
use super::modules::Loaded;
use super::probe::driver_err;
use crate::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::sys::CUtensorMap;
use smelt_codegen::ptx::{self, MapElem, PtxKernel, TensorMap};
use smelt_codegen::Kernel;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// Module-cache key of the spin kernel (kernel keys are hashes of IR).
const SPIN_KEY: u64 = u64::MAX;

impl CudaDevice {
    /// Queues a loaded kernel's launches, in order, over its parameters,
    /// 8 bytes each (see [`launch_args`] for an IR kernel's).
    pub(super) fn launch_loaded(&self, l: &Loaded, args: &[u64], name: &str) -> Result<()> {
        let mut vals: Vec<u64> = args.to_vec();
        let mut maps = l
            .launch
            .maps
            .iter()
            .map(|m| encode(m, args, name))
            .collect::<Result<Vec<_>>>()?;
        let mut params: Vec<*mut c_void> = vals
            .iter_mut()
            .map(|p| p as *mut u64 as *mut c_void)
            .chain(
                maps.iter_mut()
                    .map(|m| m as *mut CUtensorMap as *mut c_void),
            )
            .collect();
        self.bind()?;
        l.launched.store(true, Ordering::Relaxed);
        for (func, shape) in l.funcs.iter().zip(&l.launch.launches) {
            let g = shape.grid;
            // SAFETY: the parameters are the 8-byte values every entry of
            // the module declares, in order (the driver copies each
            // parameter's declared size from its pointer): for an IR
            // kernel the device pointers it was emitted for, each backing
            // the lengths in its IR, then its scalars; for the spin kernel
            // a duration. Then the 128-byte tensor maps, which only the
            // entries that read them declare (the driver reads as many
            // parameters as an entry declares), each over a device pointer
            // of the launch backing its dims and strides (`encode`).
            unsafe {
                cu::launch_kernel(
                    *func,
                    (g.0.max(1), g.1.max(1), g.2.max(1)),
                    shape.block,
                    shape.shared_bytes,
                    self.stream.cu_stream(),
                    &mut params,
                )
            }
            .map_err(|e| driver_err(&format!("launching {name}"), e))?;
        }
        Ok(())
    }

    /// Queues a kernel that keeps the GPU busy for about `micros`
    /// microseconds. Benchmarks queue it before their first timing event,
    /// so that the launches they time are already queued when the GPU
    /// reaches them and host launch latency stays out of the measurement
    /// (as `torch.cuda._sleep` does in PyTorch's benchmarks).
    pub fn busy(&self, micros: u32) -> Result<()> {
        let l = match self.modules.get(SPIN_KEY) {
            Some(l) => l,
            None => self
                .modules
                .load_as(SPIN_KEY, spin_kernel(), "smelt_spin")?,
        };
        self.launch_loaded(&l, &[u64::from(micros) * 1000], "smelt_spin")
    }
}

/// Encodes tensor map `m` over its input's device pointer in `args` (the
/// inputs' pointers come first).
fn encode(m: &TensorMap, args: &[u64], name: &str) -> Result<CUtensorMap> {
    use cudarc::driver::sys::{
        CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
        CUtensorMapL2promotion, CUtensorMapSwizzle,
    };
    let ptr = *args
        .get(m.input)
        .ok_or_else(|| Error::Launch(format!("{name}: a tensor map's input has no pointer")))?;
    let mut map = CUtensorMap { opaque: [0; 16] };
    let (dims, strides, boxes, unit) = (m.dims, m.strides, m.boxes, [1u32; 3]);
    let elem = match m.elem {
        MapElem::B8 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        MapElem::B16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        MapElem::Tf32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
    };
    // SAFETY: the arrays hold `rank` dims, boxes and element strides and
    // `rank - 1` strides; the map is written in place; `ptr` is a device
    // address the copies read only inside `dims` at `strides` (the kernel
    // was emitted so that those are in the buffer).
    let r = unsafe {
        cudarc::driver::sys::cuTensorMapEncodeTiled(
            &mut map,
            elem,
            3,
            ptr as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            unit.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    r.result().map_err(|e| {
        Error::Launch(format!(
            "{name}: encoding a tensor map (dims {dims:?}, strides {strides:?}, box {boxes:?}): {e:?}"
        ))
    })?;
    Ok(map)
}

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
    PtxKernel::single(ptx.into(), "smelt_spin".into(), 1, 32, 0)
}

/// The parameters of a launch of IR kernel `k`, 8 bytes each as
/// `ptx::emit` declares them: the device pointers `ptrs` of its inputs
/// then outputs, then each of its scalars' `values` encoded by
/// [`ptx::scalar_param`] (rounded to the slot's dtype, as the CPU does),
/// then, for a kernel with indirect loads, the address of the schedule's
/// error flag `flag`.
pub(super) fn launch_args(
    k: &Kernel,
    mut ptrs: Vec<u64>,
    values: &[f64],
    flag: Option<u64>,
) -> Vec<u64> {
    ptrs.extend(
        k.scalars
            .iter()
            .zip(values)
            .map(|(dt, v)| ptx::scalar_param(*dt, *v)),
    );
    if k.has_indirect() {
        ptrs.extend(flag);
    }
    ptrs
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
}
