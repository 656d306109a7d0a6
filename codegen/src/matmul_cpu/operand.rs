//! How the GEMM reads each factor of a product: in place through its
//! strides when it is a plain load, else from a packed copy.

use super::gemm::Elem;
use super::layout::Layout;
use crate::dense;
use crate::extract::dense_kernel;
use crate::host_alloc::filled;
use crate::interp::InterpError;
use crate::ir::{Inst, Kernel, Val};
use crate::DType;
use rayon::prelude::*;
use std::borrow::Cow;

/// A factor's variables: batch, its own side of the product (rows of `x`,
/// columns of the result for `y`) and the reduction, each outer first.
pub(super) type Groups<'a> = (&'a [usize], &'a [usize], &'a [usize]);

/// Where a factor's values come from.
pub(super) enum Source {
    /// An unmasked load of the GEMM's type through an affine view
    /// (transposed, sliced, broadcast, batched): read in place.
    Direct { input: usize, layout: Layout },
    /// An exact widening cast (`f16`/`bf16` to `f32`; those and `f32` to
    /// `f64`) of such a load: converted into packed panels by a strided
    /// copy (O(m k), next to the product's O(m n k)).
    Widen {
        input: usize,
        from: DType,
        layout: Layout,
    },
    /// Anything else (masked or padded views, fused producers, views one
    /// stride per group cannot express): a kernel the generic path runs,
    /// writing the factor packed as `[batch.., side.., k..]`.
    Computed(Kernel),
}

impl Source {
    /// How to read factor `root` (of the GEMM's dtype `dtype`) of `k`
    /// over its variable groups; `None` if it cannot be evaluated apart.
    pub fn plan(k: &Kernel, root: Val, dtype: DType, groups: Groups) -> Option<Source> {
        let (load, from) = match k.insts[root].inst {
            Inst::Cast(a) if widens(k.insts[a].dtype, dtype) => (a, k.insts[a].dtype),
            _ => (root, k.insts[root].dtype),
        };
        if let Inst::Load {
            input,
            index,
            valid,
        } = &k.insts[load].inst
        {
            let arg = &k.inputs[*input];
            let layout = Layout::of_index(index, &k.ranges, arg.len, groups);
            if let (true, true, Some(layout)) = (valid.is_always(), arg.dtype == from, layout) {
                let input = *input;
                return Some(if from == dtype {
                    Source::Direct { input, layout }
                } else {
                    Source::Widen {
                        input,
                        from,
                        layout,
                    }
                });
            }
        }
        let (batch, side, red) = groups;
        dense_kernel(k, root, &[batch, side, red].concat(), dtype).map(Source::Computed)
    }

    /// The factor's buffer and layout (batch sizes `batch`, `rows x cols`
    /// matrices), borrowing the input when it is read in place.
    pub fn read<'a, T: Elem>(
        &self,
        inputs: &[&'a [u8]],
        scalars: &[f64],
        (batch, rows, cols): (&[usize], usize, usize),
    ) -> Result<(Cow<'a, [T]>, Layout), InterpError> {
        match self {
            Source::Direct { input, layout } => {
                // SAFETY: every bit pattern is a valid f32 / f64.
                let (head, vals, _) = unsafe { inputs[*input].align_to::<T>() };
                if head.is_empty() {
                    return Ok((Cow::Borrowed(vals), layout.clone()));
                }
                // A buffer not aligned for T (host buffers normally are).
                widen(inputs[*input], T::DTYPE, layout, batch)
            }
            Source::Widen {
                input,
                from,
                layout,
            } => widen(inputs[*input], *from, layout, batch),
            Source::Computed(kernel) => {
                let vals = dense::eval::<T>(kernel, inputs, scalars)?;
                Ok((Cow::Owned(vals), Layout::packed(batch, rows, cols)))
            }
        }
    }
}

/// Whether casting `from` to `to` is exact, so reading the narrow value
/// and widening it here gives the cast's result.
fn widens(from: DType, to: DType) -> bool {
    from.is_float() && to.is_float() && from.size() < to.size() && to.size() >= 4
}

/// Copies the matrices of `layout` in `bytes` (elements of `from`) into a
/// packed `[batch.., rows, cols]` buffer of `T`, one row per task.
fn widen<'a, T: Elem>(
    bytes: &[u8],
    from: DType,
    layout: &Layout,
    batch: &[usize],
) -> Result<(Cow<'a, [T]>, Layout), InterpError> {
    let len = batch.iter().product::<usize>() * layout.rows * layout.cols;
    let mut out = filled(len, T::ZERO)?;
    let into = (&mut out[..], layout, batch);
    match from {
        DType::F16 => copy_rows(bytes, into, |b: [u8; 2]| {
            half::f16::from_le_bytes(b).to_f64()
        }),
        DType::BF16 => copy_rows(bytes, into, |b: [u8; 2]| {
            half::bf16::from_le_bytes(b).to_f64()
        }),
        DType::F8E4M3 | DType::F8E5M2 => copy_rows(bytes, into, |b: [u8; 1]| {
            f64::from(crate::fp8::to_f32(from, b[0]))
        }),
        DType::F32 => copy_rows(bytes, into, |b: [u8; 4]| f32::from_le_bytes(b) as f64),
        _ => copy_rows(bytes, into, f64::from_le_bytes),
    }
    Ok((
        Cow::Owned(out),
        Layout::packed(batch, layout.rows, layout.cols),
    ))
}

/// [`widen`]'s copy for elements of `N` bytes that `value` reads
/// (monomorphised per source type, so the inner loop has no dispatch).
fn copy_rows<T: Elem, const N: usize>(
    bytes: &[u8],
    (out, layout, batch): (&mut [T], &Layout, &[usize]),
    value: impl Fn([u8; N]) -> f64 + Sync,
) {
    let offsets = layout.batch_offsets(batch);
    out.par_chunks_mut(layout.cols)
        .enumerate()
        .for_each(|(r, row)| {
            let (b, i) = (r / layout.rows, r % layout.rows);
            let base = offsets[b] as isize + i as isize * layout.rs;
            for (j, v) in row.iter_mut().enumerate() {
                let at = (base + j as isize * layout.cs) as usize * N;
                let raw: [u8; N] = bytes[at..at + N].try_into().expect("N bytes");
                *v = T::from_f64(value(raw));
            }
        });
}
