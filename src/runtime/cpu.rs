//! The CPU runtime: host buffers and the kernel interpreter.

use super::debug::report_kernel;
use crate::profile::{self, Timing};
use crate::stats::count_kernel;
use crate::Result;
use smelt_codegen::host_alloc;
use smelt_fusion::{BufferHandle, BufferSpec, Schedule};
use std::sync::Arc;
use std::time::Instant;

/// A host buffer. Freed, its memory is kept for later outputs
/// ([`host_alloc::recycle`]).
pub struct CpuBuffer(Vec<u8>);

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        host_alloc::recycle(std::mem::take(&mut self.0));
    }
}

/// Wraps host bytes as a buffer handle.
pub fn wrap(bytes: Vec<u8>) -> BufferHandle {
    Arc::new(CpuBuffer(bytes))
}

/// The bytes of a CPU buffer handle.
pub fn bytes(buf: &BufferHandle) -> &[u8] {
    &buf.downcast_ref::<CpuBuffer>()
        .expect("a CPU tensor holds a CPU buffer")
        .0
}

enum Slot {
    Empty,
    Shared(BufferHandle),
    Owned(Vec<u8>),
}

impl Slot {
    fn bytes(&self) -> &[u8] {
        match self {
            Slot::Shared(b) => bytes(b),
            Slot::Owned(v) => v,
            Slot::Empty => &[],
        }
    }
}

/// Runs a schedule on the host. `inputs` holds, per schedule buffer, the
/// placed data of a realized one (`None` for buffers the kernels write).
pub fn execute(
    schedule: &Schedule,
    inputs: Vec<Option<BufferHandle>>,
) -> Result<Vec<BufferHandle>> {
    let last_use = schedule.last_uses();
    let mut slots: Vec<Slot> = inputs
        .into_iter()
        .map(|b| b.map_or(Slot::Empty, Slot::Shared))
        .collect();
    for (i, it) in schedule.items.iter().enumerate() {
        let outs: Result<Vec<Vec<u8>>> = it
            .outputs
            .iter()
            .enumerate()
            .map(|(o, b)| match (&schedule.buffers[*b], &mut slots[*b]) {
                // Written by an earlier kernel: updated in place (a
                // scatter's adds into its copy).
                (_, slot @ Slot::Owned(_)) => match std::mem::replace(slot, Slot::Empty) {
                    Slot::Owned(v) => Ok(v),
                    _ => unreachable!("matched as owned"),
                },
                // Sized by user data: a failure is an `Err`, not an abort.
                // Zeroed unless the kernel writes every element.
                (BufferSpec::New { .. }, _) => Ok(host_alloc::output(&it.kernel, o)?),
                (BufferSpec::Realized { .. }, _) => unreachable!("kernels write new buffers"),
            })
            .collect();
        let mut outs = outs?;
        let ins: Vec<&[u8]> = it.inputs.iter().map(|b| slots[*b].bytes()).collect();
        let mut out_refs: Vec<&mut [u8]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
        let t0 = Instant::now();
        let scalars = schedule.scalar_values(it);
        smelt_codegen::cpu::run(&it.kernel, &ins, &scalars, &mut out_refs)?;
        let time = t0.elapsed();
        count_kernel();
        report_kernel(&it.kernel, time);
        profile::record(&it.kernel.name, Timing::Host(time));
        for (b, o) in it.outputs.iter().zip(outs) {
            slots[*b] = Slot::Owned(o);
        }
        for b in it.inputs.iter().chain(&it.outputs) {
            if last_use[*b] == i {
                if let Slot::Owned(v) = std::mem::replace(&mut slots[*b], Slot::Empty) {
                    host_alloc::recycle(v);
                }
            }
        }
    }
    Ok(schedule
        .results
        .iter()
        .map(
            |(_, b)| match std::mem::replace(&mut slots[*b], Slot::Empty) {
                Slot::Owned(v) => wrap(v),
                Slot::Shared(h) => h,
                Slot::Empty => unreachable!("results are kept"),
            },
        )
        .collect())
}
