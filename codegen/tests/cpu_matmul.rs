//! The CPU matmul fast path (`matmul_cpu::try_run`): every f32-product
//! matmul kernel (any operand layout, batches, half operands cast up, an
//! epilogue) must be taken by it instead of the element-by-element
//! interpreter, and must compute the product. This replaces timing the CPU
//! backend: a kernel the fast path declines would still be correct, only
//! about a hundred times slower, so the test asserts the path itself.

#[allow(dead_code)] // shared with the PTX tests, which use the rest
mod ptx_cases;

use ptx_cases::{matmul_layout, matmul_scaled, MatLayout};
use smelt_codegen::matmul_cpu::try_run;
use smelt_codegen::ptx::matmul::Elem;
use smelt_codegen::{DType, Kernel};

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
        let dt = elem.dtype();
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
}
