//! The CPU matmul fast path (`matmul_cpu::try_run`): every float-product
//! matmul kernel (f32 or f64 accumulators, any operand layout, batches,
//! half operands cast up, an epilogue, several products in one kernel)
//! must be taken by it instead of the element-by-element interpreter, and
//! must compute what the interpreter (the oracle) computes. This replaces timing the CPU
//! backend: a kernel the fast path declines would still be correct, only
//! about a hundred times slower, so the test asserts the path itself.

#[allow(dead_code)] // shared with the PTX tests, which use the rest
mod ptx_cases;

use ptx_cases::{lin, matmul_domain, matmul_layout, matmul_scaled, Kb, MatLayout};
use smelt_codegen::matmul_cpu::try_run;
use smelt_codegen::ptx::matmul::Elem;
use smelt_codegen::{interp, BinaryOp, Cond, DType, Kernel, KernelKind, ReduceOp, UnaryOp};

/// Deterministic operand values in [-1, 1), exact in f16 and bf16.
fn values(len: usize, seed: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 37 + seed * 101) % 64) as f32 / 32.0 - 1.0)
        .collect()
}

fn bytes(v: &[f32], dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::F16 => v
            .iter()
            .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
            .collect(),
        DType::BF16 => v
            .iter()
            .flat_map(|x| half::bf16::from_f32(*x).to_le_bytes())
            .collect(),
        other => panic!("no test operands of {other:?}"),
    }
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Runs `k` with scalar parameters `scalars` through the fast path;
/// panics if the path declines it.
fn run_fast(k: &Kernel, inputs: &[Vec<u8>], scalars: &[f64]) -> Vec<u8> {
    let ins: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
    let out = &k.outputs[0];
    let mut buf = vec![0u8; out.len * out.dtype.size()];
    try_run(k, &ins, scalars, &mut [&mut buf])
        .unwrap_or_else(|| panic!("fast path declined {k}"))
        .expect("fast path runs");
    buf
}

/// `C[b, i, j] = sum_p A[b, i, p] * B[b, p, j]` in f64, operands indexed as
/// `matmul_layout` stores them.
fn reference(
    a: &[f32],
    b: &[f32],
    (batch, m, n, k): (usize, usize, usize, usize),
    layout: MatLayout,
) -> Vec<f64> {
    let mut c = vec![0.0; batch * m * n];
    for t in 0..batch {
        let (a, b) = (&a[t * m * k..], &b[t * k * n..]);
        for i in 0..m {
            for j in 0..n {
                c[(t * m + i) * n + j] = (0..k)
                    .map(|p| {
                        let (ai, bi) = match layout {
                            MatLayout::Nn => (i * k + p, p * n + j),
                            MatLayout::Nt => (i * k + p, j * k + p),
                            MatLayout::Tn => (p * m + i, p * n + j),
                        };
                        a[ai] as f64 * b[bi] as f64
                    })
                    .sum();
            }
        }
    }
    c
}

#[test]
fn f32_products_of_every_layout_take_the_fast_path() {
    for layout in [MatLayout::Nn, MatLayout::Nt, MatLayout::Tn] {
        for dims in [
            (1, 1, 1, 1),
            (1, 17, 9, 33),
            (3, 64, 48, 40),
            (2, 7, 130, 5),
        ] {
            let (batch, m, n, k) = dims;
            let kernel = matmul_layout(
                batch as i64,
                m as i64,
                n as i64,
                k as i64,
                Elem::F32,
                layout,
                false,
            );
            let (a, b) = (values(batch * m * k, 1), values(batch * k * n, 2));
            let got = f32s(&run_fast(
                &kernel,
                &[bytes(&a, DType::F32), bytes(&b, DType::F32)],
                &[],
            ));
            let want = reference(&a, &b, dims, layout);
            for (idx, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{layout:?} {dims:?} at {idx}: {g} vs {w}"
                );
            }
        }
    }
}

#[test]
fn half_operands_and_epilogues_take_the_fast_path() {
    for elem in [Elem::F16, Elem::BF16] {
        let (m, n, k) = (19, 24, 70);
        let kernel = matmul_layout(1, m, n, k, elem, MatLayout::Nn, true);
        let dt = elem.dtypes()[0];
        let (a, b, bias) = (
            values((m * k) as usize, 3),
            values((k * n) as usize, 4),
            values(n as usize, 5),
        );
        let out = run_fast(
            &kernel,
            &[bytes(&a, dt), bytes(&b, dt), bytes(&bias, dt)],
            &[],
        );
        assert_eq!(out.len(), (m * n) as usize * dt.size(), "{elem:?}");
        let want = reference(
            &a,
            &b,
            (1, m as usize, n as usize, k as usize),
            MatLayout::Nn,
        );
        // smelt's gelu is the exact one (PyTorch's default).
        let gelu = |x: f64| 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2));
        for (idx, c) in out.chunks_exact(2).enumerate() {
            let bits = u16::from_le_bytes([c[0], c[1]]);
            let g = match elem {
                Elem::F16 => half::f16::from_bits(bits).to_f64(),
                _ => half::bf16::from_bits(bits).to_f64(),
            };
            let w = gelu(want[idx] + bias[idx % n as usize] as f64);
            assert!(
                (g - w).abs() <= 2e-2 * (1.0 + w.abs()),
                "{elem:?} at {idx}: {g} vs {w}"
            );
        }
    }
}

/// A scalar parameter in the epilogue (`(a @ b) * s`) keeps the fast path,
/// which binds each launch's value: two values, one kernel.
#[test]
fn scalar_epilogues_take_the_fast_path() {
    let (m, n, k) = (9, 12, 20);
    let kernel = matmul_scaled(m, n, k, Elem::F32);
    let (a, b) = (values((m * k) as usize, 6), values((k * n) as usize, 7));
    let dims = (1, m as usize, n as usize, k as usize);
    let want = reference(&a, &b, dims, MatLayout::Nn);
    for s in [0.5, -3.0] {
        let inputs = [bytes(&a, DType::F32), bytes(&b, DType::F32)];
        let got = f32s(&run_fast(&kernel, &inputs, &[s]));
        for (idx, (g, w)) in got.iter().zip(&want).enumerate() {
            let w = w * s;
            assert!(
                (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "scale {s} at {idx}: {g} vs {w}"
            );
        }
    }
    // The GEMM applies a finite nonzero scale to its sums; a zero or
    // infinite one goes through the epilogue, so an infinite sum times 0
    // is NaN and a zero sum times inf too, as the interpreter has them.
    let mut a = a;
    a[0] = f32::INFINITY;
    let inputs = [bytes(&a, DType::F32), bytes(&b, DType::F32)];
    for s in [0.0, f64::INFINITY, 0.25] {
        let got = f32s(&run_fast(&kernel, &inputs, &[s]));
        let mut out = vec![0u8; got.len() * 4];
        let ins: Vec<&[u8]> = inputs.iter().map(|i| i.as_slice()).collect();
        interp::run(&kernel, &ins, &[s], &mut [out.as_mut_slice()]).expect("interpreter runs");
        let want = f32s(&out);
        assert!(
            got[0].is_nan() || got[0].is_infinite(),
            "scale {s}: {}",
            got[0]
        );
        for (idx, (g, w)) in got.iter().zip(&want).enumerate() {
            let same =
                (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 1e-5 * (1.0 + w.abs());
            assert!(same, "scale {s} at {idx}: {g} vs interpreter {w}");
        }
    }
}

/// Little-endian bytes of `len` values of `dtype`, deterministic in
/// [-1, 1) and exact in every float dtype.
fn input(len: usize, dtype: DType, seed: usize) -> Vec<u8> {
    let v = values(len, seed);
    match dtype {
        DType::F64 => v.iter().flat_map(|x| (*x as f64).to_le_bytes()).collect(),
        _ => bytes(&v, dtype),
    }
}

/// The kernel's outputs as f64, computed by `run`.
fn outputs(k: &Kernel, run: impl FnOnce(&mut [&mut [u8]])) -> Vec<Vec<f64>> {
    let mut bufs: Vec<Vec<u8>> = k
        .outputs
        .iter()
        .map(|a| vec![0u8; a.len * a.dtype.size()])
        .collect();
    let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
    run(&mut outs);
    bufs.iter()
        .zip(&k.outputs)
        .map(|(b, a)| {
            b.chunks_exact(a.dtype.size())
                .map(|c| match a.dtype {
                    DType::F64 => f64::from_le_bytes(c.try_into().unwrap()),
                    DType::F32 => f32::from_le_bytes(c.try_into().unwrap()) as f64,
                    DType::F16 => half::f16::from_le_bytes([c[0], c[1]]).to_f64(),
                    DType::BF16 => half::bf16::from_le_bytes([c[0], c[1]]).to_f64(),
                    other => panic!("no test outputs of {other:?}"),
                })
                .collect()
        })
        .collect()
}

/// Runs `k` on inputs `ins` through the fast path (which must take it) and
/// through the interpreter, and compares every output within `tol`
/// relative to each value's magnitude plus the row length.
fn agrees_with_interpreter(k: &Kernel, ins: &[&[u8]], tol: f64) {
    let fast = outputs(k, |outs| {
        try_run(k, ins, &[], outs)
            .unwrap_or_else(|| panic!("fast path declined {k}"))
            .expect("fast path runs")
    });
    let slow = outputs(k, |outs| {
        interp::run(k, ins, &[], outs).expect("interpreter runs")
    });
    for (o, (f, s)) in fast.iter().zip(&slow).enumerate() {
        for (i, (a, b)) in f.iter().zip(s).enumerate() {
            assert!(
                (a - b).abs() <= tol * (1.0 + b.abs()),
                "{}: out{o}[{i}] fast {a} vs interpreter {b}",
                k.name
            );
        }
    }
}

/// An f64 product accumulates in f64 on the fast path too.
#[test]
fn f64_products_take_the_fast_path() {
    for (m, n, k) in [(1, 1, 1), (13, 7, 29), (67, 71, 131)] {
        let (mut kb, d) = matmul_domain("matmul_f64", 1, m, n, k);
        let a = kb.load(DType::F64, (m * k) as usize, lin(&[(d.m, k), (d.k, 1)], 0));
        let b = kb.load(DType::F64, (k * n) as usize, lin(&[(d.k, n), (d.n, 1)], 0));
        let p = kb.bin(BinaryOp::Mul, a, b);
        let v = kb.reduce(ReduceOp::Sum, p);
        kb.store((m * n) as usize, lin(&[(d.m, n), (d.n, 1)], 0), v, None);
        let kernel = kb.done();
        let (a, b) = (
            input((m * k) as usize, DType::F64, 1),
            input((k * n) as usize, DType::F64, 2),
        );
        agrees_with_interpreter(&kernel, &[&a, &b], 1e-12);
    }
}

/// SwiGLU, `silu(x @ w1) * (x @ w3)`: two products over one reduction in
/// one kernel, half operands, an epilogue combining both and a half
/// output (the planner's kernel for it).
#[test]
fn several_products_in_one_kernel_take_the_fast_path() {
    for dt in [DType::F16, DType::BF16, DType::F32] {
        for (m, n, k) in [(1, 1, 1), (5, 17, 3), (37, 64, 70)] {
            let (mut kb, d) = matmul_domain("matmul_matmul_silu_matmul_mul", 1, m, n, k);
            let x = kb.load(dt, (m * k) as usize, lin(&[(d.m, k), (d.k, 1)], 0));
            let w1 = kb.load(dt, (k * n) as usize, lin(&[(d.k, n), (d.n, 1)], 0));
            let w3 = kb.load(dt, (k * n) as usize, lin(&[(d.k, n), (d.n, 1)], 0));
            let up = |kb: &mut Kb, v| match dt {
                DType::F32 => v,
                _ => kb.cast(v, DType::F32),
            };
            let (xf, w1f, w3f) = (up(&mut kb, x), up(&mut kb, w1), up(&mut kb, w3));
            let p1 = kb.bin(BinaryOp::Mul, xf, w1f);
            let h1 = kb.reduce(ReduceOp::Sum, p1);
            let h1 = kb.cast(h1, dt);
            let g = kb.un(UnaryOp::Silu, h1);
            let p3 = kb.bin(BinaryOp::Mul, xf, w3f);
            let h3 = kb.reduce(ReduceOp::Sum, p3);
            let h3 = kb.cast(h3, dt);
            let out = kb.bin(BinaryOp::Mul, g, h3);
            kb.store((m * n) as usize, lin(&[(d.m, n), (d.n, 1)], 0), out, None);
            let kernel = kb.done();
            let (x, w1, w3) = (
                input((m * k) as usize, dt, 3),
                input((k * n) as usize, dt, 4),
                input((k * n) as usize, dt, 5),
            );
            // The two paths sum in other orders: f32 rounding, then one
            // rounding of the half result either way.
            let tol = if dt == DType::F32 { 1e-5 } else { 1e-2 };
            agrees_with_interpreter(&kernel, &[&x, &w1, &w3], tol);
        }
    }
}

/// Operands read in place through any affine view (each batch of `x`
/// transposed, at an offset; `w` flipped along k with a padded batch
/// stride) and a result written straight into a transposed output; then
/// the same kernel with every buffer one byte off its alignment, which the
/// fast path copies instead of reading in place. And `w` broadcast over
/// the batch, which makes the batch a row group of `x` that one stride
/// cannot hold (packed first).
#[test]
fn strided_operands_and_outputs_read_in_place() {
    let (b, m, n, k) = (3, 11, 13, 17);
    let kernel = |broadcast: bool| {
        let (mut kb, d) = matmul_domain("matmul_strided", b, m, n, k);
        // x[b, i, p] at 5 + b * (m k) + p * m + i (each batch stored [k, m]).
        let x = kb.load(
            DType::F32,
            (5 + b * m * k) as usize,
            lin(&[(0, m * k), (d.k, m), (d.m, 1)], 5),
        );
        // w[b, p, j] at b * (k n + 3) + (k - 1 - p) * n + j.
        let per = if broadcast { 0 } else { k * n + 3 };
        let w = kb.load(
            DType::F32,
            (b * (k * n + 3)) as usize,
            lin(&[(0, per), (d.k, -n), (d.n, 1)], (k - 1) * n),
        );
        let p = kb.bin(BinaryOp::Mul, x, w);
        let v = kb.reduce(ReduceOp::Sum, p);
        // out[b, i, j] at b * (m n) + j * m + i.
        let out = lin(&[(0, m * n), (d.n, m), (d.m, 1)], 0);
        kb.store((b * m * n) as usize, out, v, None);
        kb.done()
    };
    let x = input((5 + b * m * k) as usize, DType::F32, 6);
    let w = input((b * (k * n + 3)) as usize, DType::F32, 7);
    agrees_with_interpreter(&kernel(true), &[&x, &w], 1e-5);
    let kernel = kernel(false);
    agrees_with_interpreter(&kernel, &[&x, &w], 1e-5);
    let shifted = |v: &[u8]| [&[0u8][..], v].concat();
    let (xs, ws) = (shifted(&x), shifted(&w));
    let fast = outputs(&kernel, |outs| {
        let mut buf = vec![0u8; outs[0].len() + 1];
        try_run(&kernel, &[&xs[1..], &ws[1..]], &[], &mut [&mut buf[1..]])
            .expect("taken")
            .expect("runs");
        outs[0].copy_from_slice(&buf[1..]);
    });
    let aligned = outputs(&kernel, |outs| {
        try_run(&kernel, &[&x, &w], &[], outs)
            .expect("taken")
            .expect("runs")
    });
    assert_eq!(fast, aligned, "unaligned buffers give other results");
}

/// Factors that are not plain loads (a computed producer, a masked view)
/// are packed by the generic path first, and still take the GEMM.
#[test]
fn computed_and_masked_factors_take_the_fast_path() {
    let (m, n, k) = (7, 5, 19);
    let (mut kb, d) = matmul_domain("matmul_exp_pad", 1, m, n, k);
    let x = kb.load(DType::F32, (m * k) as usize, lin(&[(d.m, k), (d.k, 1)], 0));
    let x = kb.un(UnaryOp::Exp, x);
    // w: [k - 2, n] zero-padded by one row on each side of k.
    let valid = Cond::always().and_range(lin(&[(d.k, 1)], -1), 0, k - 2, &kb.k.ranges);
    let w = kb.load_if(
        DType::F32,
        ((k - 2) * n) as usize,
        lin(&[(d.k, n), (d.n, 1)], -n),
        valid,
    );
    let p = kb.bin(BinaryOp::Mul, x, w);
    let v = kb.reduce(ReduceOp::Sum, p);
    kb.store((m * n) as usize, lin(&[(d.m, n), (d.n, 1)], 0), v, None);
    let kernel = kb.done();
    assert_eq!(kernel.kind, KernelKind::Matmul);
    let x = input((m * k) as usize, DType::F32, 8);
    let w = input(((k - 2) * n) as usize, DType::F32, 9);
    agrees_with_interpreter(&kernel, &[&x, &w], 1e-5);
}
