//! The CPU fast path for matmul kernels.
//!
//! A [`KernelKind::Matmul`](crate::KernelKind::Matmul) kernel computes, per
//! row (kept point), one or more products `Reduce(Sum, Mul(x, y))` in f32
//! or f64 (SwiGLU's `silu(x @ w1) * (x @ w3)` is two) followed by a
//! row-level epilogue. The generic interpreter evaluates them element by
//! element; here each product is a GEMM (`recognise` splits its variables
//! into batch, `m`, `n` and `k`):
//!
//! 1. each factor is read in place through its strides when it is a plain
//!    load (transposed, sliced, broadcast or batched views included), from
//!    a packed f32 copy when it is a half load cast up, else from a packed
//!    matrix that the generic path computes (`operand`);
//! 2. the `gemm` crate multiplies them per batch position (`gemm`);
//! 3. a kernel that only stores its one product's result has it written
//!    straight into the output through the store's strides; otherwise each
//!    result goes to a temporary of the product's dtype, and the epilogue
//!    (every store, each `Reduce` replaced by a load of its temporary: bias,
//!    activations, residuals, casts, several products combined) runs over
//!    the whole output through [`crate::cpu::run`], the backend's generic
//!    path for elementwise kernels. Half outputs are rounded once, where
//!    the kernel casts.
//!
//! Kernels of another shape (integer matmuls, other reductions,
//! element-level stores, indirect loads, empty domains) return `None` and
//! take the generic path.

mod gemm;
mod layout;
mod operand;
mod recognise;

use crate::extract::{epilogue, row_major, RowInput};
use crate::host_alloc::filled;
use crate::interp::InterpError;
use crate::ir::{Kernel, StoreKind};
use crate::DType;
use gemm::{Elem, Strided};
use layout::Layout;
use operand::Source;
use recognise::Product;

/// Runs `kernel` with the fast path if it applies (see the module docs);
/// `None` means the caller must run it generically. The arguments are
/// [`crate::interp::run`]'s.
pub fn try_run(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Option<Result<(), InterpError>> {
    let plan = Plan::new(kernel)?;
    Some(plan.run(kernel, inputs, scalars, outputs))
}

/// Everything decided before running: the products, how to read their
/// factors, and where their results go.
struct Plan {
    products: Vec<Product>,
    /// Per product, its `x` and `y` sources.
    sources: Vec<[Source; 2]>,
    /// The reduced variables (every product's `k`).
    red: Vec<usize>,
    /// The stores, each product's `Reduce` loaded from its temporary
    /// (extra inputs in product order, `[batch, m, n]` row-major).
    epilogue: Kernel,
    /// When the kernel only stores its one product: that output and the
    /// result's layout in it.
    direct: Option<(usize, Layout)>,
}

impl Plan {
    fn new(k: &Kernel) -> Option<Plan> {
        let products = recognise::products(k)?;
        let red: Vec<usize> = (k.n_kept..k.ranges.len()).collect();
        let sources = products
            .iter()
            .map(|p| {
                Some([
                    Source::plan(k, p.x, p.dtype, (&p.batch, &p.m, &red))?,
                    Source::plan(k, p.y, p.dtype, (&p.batch, &p.n, &red))?,
                ])
            })
            .collect::<Option<Vec<_>>>()?;
        let rows: Vec<RowInput> = products
            .iter()
            .map(|p| RowInput {
                val: p.reduce,
                dtype: p.dtype,
                index: row_major(&p.result_order(), &k.ranges),
            })
            .collect();
        let epilogue = epilogue(k, &rows)?;
        let direct = direct_store(k, &products);
        Some(Plan {
            products,
            sources,
            red,
            epilogue,
            direct,
        })
    }

    fn run(
        &self,
        k: &Kernel,
        inputs: &[&[u8]],
        scalars: &[f64],
        outputs: &mut [&mut [u8]],
    ) -> Result<(), InterpError> {
        if let Some((out, layout)) = &self.direct {
            let buf = &mut *outputs[*out];
            let p = &self.products[0];
            let done = match p.dtype {
                DType::F32 => self.into_output::<f32>(k, inputs, scalars, buf, layout),
                _ => self.into_output::<f64>(k, inputs, scalars, buf, layout),
            }?;
            if done {
                return Ok(());
            }
        }
        let mut values = Vec::with_capacity(self.products.len());
        for i in 0..self.products.len() {
            values.push(match self.products[i].dtype {
                DType::F32 => Values::F32(self.temporary(i, k, inputs, scalars)?),
                _ => Values::F64(self.temporary(i, k, inputs, scalars)?),
            });
        }
        let mut ins = inputs.to_vec();
        ins.extend(values.iter().map(Values::bytes));
        crate::cpu::run(&self.epilogue, &ins, scalars, outputs)
    }

    /// Writes the one product into output buffer `buf` at `layout`;
    /// `false` (nothing written) if the buffer is not aligned for `T`.
    fn into_output<T: Elem>(
        &self,
        k: &Kernel,
        inputs: &[&[u8]],
        scalars: &[f64],
        buf: &mut [u8],
        layout: &Layout,
    ) -> Result<bool, InterpError> {
        // SAFETY: every bit pattern is a valid f32 / f64.
        let (head, out, _) = unsafe { buf.align_to_mut::<T>() };
        if !head.is_empty() {
            return Ok(false);
        }
        self.multiply(0, k, inputs, scalars, out, layout)?;
        Ok(true)
    }

    /// Product `i`'s results in a new temporary, `[batch, m, n]` row-major.
    fn temporary<T: Elem>(
        &self,
        i: usize,
        k: &Kernel,
        inputs: &[&[u8]],
        scalars: &[f64],
    ) -> Result<Vec<T>, InterpError> {
        let (batch, m, n) = self.dims(i, k);
        let mut out = filled(k.rows(), T::ZERO)?;
        let layout = Layout::packed(&batch, m, n);
        self.multiply(i, k, inputs, scalars, &mut out, &layout)?;
        Ok(out)
    }

    /// Batch sizes, `m` and `n` of product `i`.
    fn dims(&self, i: usize, k: &Kernel) -> (Vec<usize>, usize, usize) {
        let p = &self.products[i];
        let size = |vs: &[usize]| vs.iter().map(|v| k.ranges[*v] as usize).product();
        let batch = p.batch.iter().map(|v| k.ranges[*v] as usize).collect();
        (batch, size(&p.m), size(&p.n))
    }

    /// Reads product `i`'s factors and multiplies them into `dst` at
    /// `layout`.
    fn multiply<T: Elem>(
        &self,
        i: usize,
        k: &Kernel,
        inputs: &[&[u8]],
        scalars: &[f64],
        dst: &mut [T],
        layout: &Layout,
    ) -> Result<(), InterpError> {
        let (batch, m, n) = self.dims(i, k);
        let depth = self.red.iter().map(|v| k.ranges[*v] as usize).product();
        let [xs, ys] = &self.sources[i];
        let (x, xl) = xs.read::<T>(inputs, scalars, (&batch, m, depth))?;
        let (y, yl) = ys.read::<T>(inputs, scalars, (&batch, n, depth))?;
        gemm::product(
            Strided {
                data: &x,
                layout: &xl,
            },
            Strided {
                data: &y,
                layout: &yl,
            },
            &batch,
            dst,
            layout,
        );
        Ok(())
    }
}

/// The output and layout a kernel's only store writes its only product
/// to, when that store is a plain write of the `Reduce` itself (no
/// epilogue) to an output of the product's dtype whose index has one
/// stride per group and never repeats a place.
fn direct_store(k: &Kernel, products: &[Product]) -> Option<(usize, Layout)> {
    let ([p], [s]) = (products, &k.stores[..]) else {
        return None;
    };
    let out = &k.outputs[s.output];
    if s.kind != StoreKind::Write || s.value != p.reduce || out.dtype != p.dtype {
        return None;
    }
    let layout = Layout::of_index(&s.index, &k.ranges, out.len, (&p.batch, &p.m, &p.n))?;
    let batch: Vec<usize> = p.batch.iter().map(|v| k.ranges[*v] as usize).collect();
    layout.injective(&batch).then_some((s.output, layout))
}

/// A product's results as the epilogue reads them.
enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Values {
    /// The values' bytes (little-endian: the host's order, which the
    /// backend's byte buffers assume).
    fn bytes(&self) -> &[u8] {
        fn of<T: Elem>(v: &[T]) -> &[u8] {
            // SAFETY: the bytes of initialised f32 / f64 values, borrowed
            // for as long as the values.
            unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
        }
        match self {
            Values::F32(v) => of(v),
            Values::F64(v) => of(v),
        }
    }
}
