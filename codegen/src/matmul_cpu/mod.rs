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
//! 3. a kernel that only stores its one product's result, or that result
//!    times a constant or scalar (attention's `q @ k^T * scale`), has it
//!    written straight into the output through the store's strides, the
//!    factor applied by the GEMM to its sums; otherwise each
//!    result goes to a temporary of the product's dtype (a recycled
//!    buffer, which the GEMM overwrites), and the epilogue
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
use crate::host_alloc::{self, filled};
use crate::interp::InterpError;
use crate::ir::{Inst, Kernel, StoreKind, Val};
use crate::{BinaryOp, DType};
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
    /// When the kernel only stores its one product (or it times a factor):
    /// that output, the result's layout in it and the factor.
    direct: Option<(usize, Layout, Factor)>,
}

/// What a directly stored product is multiplied by.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Factor {
    One,
    /// A constant of the kernel's code.
    Const(f64),
    /// A scalar parameter (`Kernel::scalars` slot).
    Scalar(usize),
}

impl Factor {
    /// The factor's value at this run, if the GEMM may apply it: finite and
    /// not zero, so `beta * sum` rounds as the epilogue's `sum * s` would
    /// (the crate may skip a product whose factor is zero, which would
    /// lose an infinite sum's NaN).
    fn value(self, scalars: &[f64]) -> Option<f64> {
        let v = match self {
            Factor::One => 1.0,
            Factor::Const(c) => c,
            Factor::Scalar(slot) => scalars[slot],
        };
        (v.is_finite() && v != 0.0).then_some(v)
    }
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
        if let Some((out, layout, factor)) = &self.direct {
            if let Some(f) = factor.value(scalars) {
                let done = self.write(0, k, (inputs, scalars), outputs[*out], layout, f)?;
                if done {
                    return Ok(());
                }
            }
        }
        let mut temps = Vec::with_capacity(self.products.len());
        for i in 0..self.products.len() {
            temps.push(self.temporary(i, k, inputs, scalars)?);
        }
        let mut ins = inputs.to_vec();
        ins.extend(temps.iter().map(Vec::as_slice));
        let done = crate::cpu::run(&self.epilogue, &ins, scalars, outputs);
        drop(ins);
        temps.into_iter().for_each(host_alloc::recycle);
        done
    }

    /// Writes product `i` times `factor` into buffer `buf` (bytes of the
    /// product's dtype) at `layout`; `false` (nothing written) if the
    /// buffer is not aligned for that dtype.
    fn write(
        &self,
        i: usize,
        k: &Kernel,
        (inputs, scalars): (&[&[u8]], &[f64]),
        buf: &mut [u8],
        layout: &Layout,
        factor: f64,
    ) -> Result<bool, InterpError> {
        fn typed<T: Elem>(buf: &mut [u8]) -> Option<&mut [T]> {
            // SAFETY: every bit pattern is a valid f32 / f64.
            let (head, vals, _) = unsafe { buf.align_to_mut::<T>() };
            head.is_empty().then_some(vals)
        }
        let args = (inputs, scalars);
        match self.products[i].dtype {
            DType::F32 => typed::<f32>(buf)
                .map(|out| self.multiply(i, k, args, out, layout, Elem::from_f64(factor)))
                .transpose(),
            _ => typed::<f64>(buf)
                .map(|out| self.multiply(i, k, args, out, layout, Elem::from_f64(factor)))
                .transpose(),
        }
        .map(|done| done.is_some())
    }

    /// Product `i`'s results in a temporary, `[batch, m, n]` row-major, as
    /// bytes of its dtype: a recycled buffer ([`host_alloc::reused_bytes`]),
    /// since the product writes every element. A zeroed one cost a memset
    /// on one thread and fresh pages at every run (an 8 MiB temporary of
    /// the 512x1024x4096 MLP's first product: the fused kernels took 2.7
    /// ms more than the unfused ones on 16 cores, 2026-11-29).
    fn temporary(
        &self,
        i: usize,
        k: &Kernel,
        inputs: &[&[u8]],
        scalars: &[f64],
    ) -> Result<Vec<u8>, InterpError> {
        let (batch, m, n) = self.dims(i, k);
        let layout = Layout::packed(&batch, m, n);
        let dtype = self.products[i].dtype;
        let mut buf = host_alloc::reused_bytes(k.rows(), dtype.size())?;
        if self.write(i, k, (inputs, scalars), &mut buf, &layout, 1.0)? {
            return Ok(buf);
        }
        // Not aligned for the dtype (the allocator's blocks normally are):
        // typed values, then a copy of their bytes.
        host_alloc::recycle(buf);
        let args = (inputs, scalars);
        let bytes = match dtype {
            DType::F32 => host_alloc::copy(bytes_of(&self.typed::<f32>(i, k, args, &layout)?)),
            _ => host_alloc::copy(bytes_of(&self.typed::<f64>(i, k, args, &layout)?)),
        };
        Ok(bytes?)
    }

    /// Product `i`'s results at `layout` (packed) in a new vector of `T`.
    fn typed<T: Elem>(
        &self,
        i: usize,
        k: &Kernel,
        args: (&[&[u8]], &[f64]),
        layout: &Layout,
    ) -> Result<Vec<T>, InterpError> {
        let mut out = filled(k.rows(), T::ZERO)?;
        self.multiply(i, k, args, &mut out, layout, T::ONE)?;
        Ok(out)
    }

    /// Batch sizes, `m` and `n` of product `i`.
    fn dims(&self, i: usize, k: &Kernel) -> (Vec<usize>, usize, usize) {
        let p = &self.products[i];
        let size = |vs: &[usize]| vs.iter().map(|v| k.ranges[*v] as usize).product();
        let batch = p.batch.iter().map(|v| k.ranges[*v] as usize).collect();
        (batch, size(&p.m), size(&p.n))
    }

    /// Reads product `i`'s factors and multiplies them, times `scale`, into
    /// `dst` at `layout`.
    fn multiply<T: Elem>(
        &self,
        i: usize,
        k: &Kernel,
        (inputs, scalars): (&[&[u8]], &[f64]),
        dst: &mut [T],
        layout: &Layout,
        scale: T,
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
            scale,
        );
        Ok(())
    }
}

/// The output, layout and factor a kernel's only store writes its only
/// product to, when that store is a plain write of the `Reduce` itself, or
/// of it times a constant or scalar (no other epilogue), to an output of
/// the product's dtype whose index has one stride per group and never
/// repeats a place.
fn direct_store(k: &Kernel, products: &[Product]) -> Option<(usize, Layout, Factor)> {
    let ([p], [s]) = (products, &k.stores[..]) else {
        return None;
    };
    let out = &k.outputs[s.output];
    let factor = factor_of(k, s.value, p.reduce)?;
    if s.kind != StoreKind::Write || out.dtype != p.dtype {
        return None;
    }
    let layout = Layout::of_index(&s.index, &k.ranges, out.len, (&p.batch, &p.m, &p.n))?;
    let batch: Vec<usize> = p.batch.iter().map(|v| k.ranges[*v] as usize).collect();
    layout
        .injective(&batch)
        .then_some((s.output, layout, factor))
}

/// What `value` multiplies the product `reduce` by: the product itself, or
/// `reduce * c` / `c * reduce` with `c` a constant or scalar.
fn factor_of(k: &Kernel, value: Val, reduce: Val) -> Option<Factor> {
    if value == reduce {
        return Some(Factor::One);
    }
    let Inst::Binary(BinaryOp::Mul, a, b) = k.insts[value].inst else {
        return None;
    };
    let c = match (a == reduce, b == reduce) {
        (true, false) => b,
        (false, true) => a,
        _ => return None,
    };
    match k.insts[c].inst {
        Inst::Const(v) => Some(Factor::Const(v)),
        Inst::Scalar(slot) => Some(Factor::Scalar(slot)),
        _ => None,
    }
}

/// The bytes of `v` (little-endian: the host's order, which the
/// backend's byte buffers assume).
fn bytes_of<T: Elem>(v: &[T]) -> &[u8] {
    // SAFETY: the bytes of initialised f32 / f64 values, borrowed for as
    // long as the values.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Arg, Inst, KernelKind, Node, Store};
    use crate::{BinaryOp, Expr, ReduceOp};

    /// `sum(coef * var) + konst`.
    fn lin(terms: &[(usize, i64)], konst: i64) -> Expr {
        terms.iter().fold(Expr::constant(konst), |e, (v, c)| {
            e.add(&Expr::var(*v).scale(*c))
        })
    }

    /// `out[b, i, j] = sum_p x[b, i, p] * w[b?, p, j]` over `[b, i, j | p]`
    /// = `[2, 3, 4 | 5]`: `x` of `xdt` (cast up when a half) transposed per
    /// batch, `w` flipped along `p` and batched unless `broadcast`, the
    /// result stored transposed per batch in f32.
    fn kernel(xdt: DType, broadcast: bool) -> Kernel {
        let load = |input, index| Node {
            inst: Inst::Load {
                input,
                index,
                valid: crate::Cond::always(),
            },
            dtype: if input == 0 { xdt } else { DType::F32 },
        };
        let node = |inst, dtype| Node { inst, dtype };
        let mut insts = vec![
            load(0, lin(&[(0, 15), (3, 3), (1, 1)], 0)),
            load(
                1,
                lin(&[(0, if broadcast { 0 } else { 20 }), (3, -4), (2, 1)], 16),
            ),
        ];
        let mut x = 0;
        if xdt != DType::F32 {
            insts.push(node(Inst::Cast(0), DType::F32));
            x = 2;
        }
        let prod = insts.len();
        insts.push(node(Inst::Binary(BinaryOp::Mul, x, 1), DType::F32));
        insts.push(node(Inst::Reduce(ReduceOp::Sum, prod), DType::F32));
        Kernel {
            name: "matmul".into(),
            kind: KernelKind::Matmul,
            ranges: [2, 3, 4, 5].as_slice().into(),
            n_kept: 3,
            inputs: vec![
                Arg {
                    dtype: xdt,
                    len: 30,
                },
                Arg {
                    dtype: DType::F32,
                    len: 40,
                },
            ],
            outputs: vec![Arg {
                dtype: DType::F32,
                len: 24,
            }],
            scalars: vec![],
            stores: vec![Store::write(
                0,
                lin(&[(0, 12), (2, 3), (1, 1)], 0),
                prod + 1,
            )],
            insts,
        }
    }

    /// A store of the product times a constant or a scalar is written in
    /// place, the factor given to the GEMM; any other epilogue is not.
    #[test]
    fn scaled_products_are_written_in_place() {
        let with_factor = |inst: Inst| {
            let mut k = kernel(DType::F32, false);
            let (reduce, c) = (k.stores[0].value, k.insts.len());
            k.insts.push(Node {
                inst,
                dtype: DType::F32,
            });
            k.insts.push(Node {
                inst: Inst::Binary(BinaryOp::Mul, c, reduce),
                dtype: DType::F32,
            });
            k.stores[0].value = c + 1;
            k.scalars = vec![DType::F32];
            Plan::new(&k).expect("taken").direct.map(|d| d.2)
        };
        assert_eq!(with_factor(Inst::Const(0.125)), Some(Factor::Const(0.125)));
        assert_eq!(with_factor(Inst::Scalar(0)), Some(Factor::Scalar(0)));
        assert_eq!(with_factor(Inst::Unary(crate::UnaryOp::Exp, 3)), None);
        // A factor the GEMM would not apply as the epilogue does falls back.
        for v in [0.0, f64::INFINITY, f64::NAN] {
            assert_eq!(Factor::Const(v).value(&[]), None);
        }
        assert_eq!(Factor::Scalar(0).value(&[-2.0]), Some(-2.0));
    }

    #[test]
    fn plain_views_are_read_and_written_in_place() {
        let p = Plan::new(&kernel(DType::F32, false)).expect("taken");
        assert!(matches!(
            p.sources[0],
            [Source::Direct { .. }, Source::Direct { .. }]
        ));
        let (_, out, factor) = p.direct.expect("written in place");
        assert_eq!(factor, Factor::One);
        assert_eq!(
            (out.batch, out.rows, out.rs, out.cols, out.cs),
            (vec![12], 3, 1, 4, 3)
        );
        // A half `x` is widened into packed panels.
        let p = Plan::new(&kernel(DType::F16, false)).expect("taken");
        assert!(matches!(
            p.sources[0][0],
            Source::Widen {
                from: DType::F16,
                ..
            }
        ));
        // A `w` shared by every batch makes the batch a row group of `x`
        // that one stride cannot hold: `x` is packed, and the result goes
        // through the epilogue.
        let p = Plan::new(&kernel(DType::F32, true)).expect("taken");
        assert!(matches!(
            p.sources[0],
            [Source::Computed(_), Source::Direct { .. }]
        ));
        assert!(p.direct.is_none());
    }

    /// A product's temporary is a recycled buffer with stale bytes (NaN
    /// here), which the product overwrites everywhere: the epilogue's
    /// results are the interpreter's (`k = 1`, `k = 3`; an empty `k` is
    /// not taken).
    #[test]
    fn temporaries_are_overwritten_in_full() {
        let (m, n) = (128i64, 160);
        for depth in [3i64, 1] {
            let load = |input, index| Node {
                inst: Inst::Load {
                    input,
                    index,
                    valid: crate::Cond::always(),
                },
                dtype: DType::F32,
            };
            let node = |inst| Node {
                inst,
                dtype: DType::F32,
            };
            let k = Kernel {
                name: "matmul_relu".into(),
                kind: KernelKind::Matmul,
                ranges: [m, n, depth].as_slice().into(),
                n_kept: 2,
                inputs: vec![
                    Arg {
                        dtype: DType::F32,
                        len: (m * depth) as usize,
                    },
                    Arg {
                        dtype: DType::F32,
                        len: (depth * n) as usize,
                    },
                ],
                outputs: vec![Arg {
                    dtype: DType::F32,
                    len: (m * n) as usize,
                }],
                scalars: vec![],
                insts: vec![
                    load(0, lin(&[(0, depth), (2, 1)], 0)),
                    load(1, lin(&[(2, n), (1, 1)], 0)),
                    node(Inst::Binary(BinaryOp::Mul, 0, 1)),
                    node(Inst::Reduce(ReduceOp::Sum, 2)),
                    node(Inst::Unary(crate::UnaryOp::Relu, 3)),
                ],
                stores: vec![Store::write(0, lin(&[(0, n), (1, 1)], 0), 4)],
            };
            assert!(Plan::new(&k).expect("taken").direct.is_none());
            let vals = |len: usize, at: f32| -> Vec<u8> {
                (0..len)
                    .flat_map(|i| ((i % 7) as f32 - at).to_le_bytes())
                    .collect()
            };
            let (x, y) = (vals(k.inputs[0].len, 3.0), vals(k.inputs[1].len, 2.5));
            let bytes = (m * n * 4) as usize;
            host_alloc::recycle(vec![0xFF; bytes]);
            let mut got = vec![0u8; bytes];
            try_run(&k, &[&x, &y], &[], &mut [&mut got])
                .expect("taken")
                .unwrap();
            let mut want = vec![0u8; bytes];
            crate::interp::run(&k, &[&x, &y], &[], &mut [&mut want]).unwrap();
            assert_eq!(got, want, "k = {depth}");
        }
    }
}
