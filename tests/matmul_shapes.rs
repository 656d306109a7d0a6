//! Matmul at awkward and large shapes against an f64 host reference:
//! 1, 7, 127 and 1000 in each dimension (4097 for the tensor-core
//! layouts), batched, transposed and sliced operands, fused operand
//! producers and epilogues, f32 / f16 / bf16 / TF32. Relative error
//! `||out - ref|| / ||ref||` must stay within 1e-5 for exact f32, 5e-3 for
//! TF32 and 1e-2 for f16 / bf16. On the CPU this exercises the blocked
//! fast path (`smelt_codegen::matmul_cpu`); on a GPU, the matmul PTX
//! kernels.

use half::{bf16, f16};
use smelt::{DType, Device, Fusion, Precision, Tensor};
use smelt_codegen::rng::SplitMix64;

/// The first CUDA GPU unless `SMELT_TEST_DEVICE=cpu`, else the CPU; with
/// `SMELT_REQUIRE_CUDA=1` a missing GPU fails.
fn device() -> Device {
    let forced_cpu = std::env::var("SMELT_TEST_DEVICE").is_ok_and(|v| v == "cpu");
    if !forced_cpu && smelt::cuda::is_available() {
        return Device::Cuda(0);
    }
    assert!(
        std::env::var("SMELT_REQUIRE_CUDA").map_or(true, |v| v != "1"),
        "SMELT_REQUIRE_CUDA=1 but no CUDA device is available"
    );
    Device::Cpu
}

/// A host matrix stack: shape and row-major f64 values.
#[derive(Clone)]
struct Host {
    shape: Vec<usize>,
    data: Vec<f64>,
}

impl Host {
    /// Deterministic values in [-1, 1), rounded to `dt`.
    fn random(shape: &[usize], dt: DType, seed: u64) -> Host {
        let n: usize = shape.iter().product();
        let mut rng = SplitMix64::new(seed);
        let data = (0..n)
            .map(|_| dt_round(dt, rng.next_f64() * 2.0 - 1.0))
            .collect();
        Host {
            shape: shape.to_vec(),
            data,
        }
    }

    fn tensor(&self, dt: DType, dev: &Device) -> Tensor {
        let shape = self.shape.clone();
        match dt {
            DType::F16 => Tensor::from_vec(
                self.data.iter().map(|v| f16::from_f64(*v)).collect(),
                shape,
                dev,
            ),
            DType::BF16 => Tensor::from_vec(
                self.data.iter().map(|v| bf16::from_f64(*v)).collect(),
                shape,
                dev,
            ),
            _ => Tensor::from_vec(self.data.iter().map(|v| *v as f32).collect(), shape, dev),
        }
    }

    /// Swaps the last two axes.
    fn t(&self) -> Host {
        let r = self.shape.len();
        let (rows, cols) = (self.shape[r - 2], self.shape[r - 1]);
        let mut shape = self.shape.clone();
        shape.swap(r - 2, r - 1);
        let mut data = vec![0.0; self.data.len()];
        for (src, dst) in self
            .data
            .chunks(rows * cols)
            .zip(data.chunks_mut(rows * cols))
        {
            for i in 0..rows {
                for j in 0..cols {
                    dst[j * rows + i] = src[i * cols + j];
                }
            }
        }
        Host { shape, data }
    }

    /// Columns `c0..c0 + len` of every matrix.
    fn narrow_cols(&self, c0: usize, len: usize) -> Host {
        let cols = *self.shape.last().unwrap();
        let data = self
            .data
            .chunks(cols)
            .flat_map(|row| row[c0..c0 + len].to_vec())
            .collect();
        let mut shape = self.shape.clone();
        *shape.last_mut().unwrap() = len;
        Host { shape, data }
    }
}

fn dt_round(dt: DType, v: f64) -> f64 {
    match dt {
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        _ => v as f32 as f64,
    }
}

/// `a @ b` in f64, `a: [batch.., m, k]`, `b: [k, n]` or `[batch.., k, n]`
/// with the same batch.
fn matmul_ref(a: &Host, b: &Host) -> Host {
    let r = a.shape.len();
    let (m, k) = (a.shape[r - 2], a.shape[r - 1]);
    let n = *b.shape.last().unwrap();
    let batch: usize = a.shape[..r - 2].iter().product();
    let b_batched = b.shape.len() == r;
    let mut data = vec![0.0; batch * m * n];
    for bi in 0..batch {
        let ab = &a.data[bi * m * k..][..m * k];
        let bb = &b.data[if b_batched { bi * k * n } else { 0 }..][..k * n];
        let cb = &mut data[bi * m * n..][..m * n];
        for i in 0..m {
            for p in 0..k {
                let av = ab[i * k + p];
                for (c, bv) in cb[i * n..][..n].iter_mut().zip(&bb[p * n..][..n]) {
                    *c += av * bv;
                }
            }
        }
    }
    let mut shape = a.shape.clone();
    shape[r - 1] = n;
    Host { shape, data }
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
}

/// Realizes `t` under `fusion` and checks it against `want`.
fn check(what: &str, t: &Tensor, want: &Host, tol: f64, fusion: Fusion) {
    t.realize_with(fusion)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(t.shape(), &want.shape[..], "{what}: shape");
    let got = t.to_vec::<f32>().unwrap();
    let (mut err, mut norm) = (0.0, 0.0);
    for (g, w) in got.iter().zip(&want.data) {
        err += (*g as f64 - w) * (*g as f64 - w);
        norm += w * w;
    }
    let rel = (err / norm.max(1e-30)).sqrt();
    assert!(
        rel <= tol,
        "{what} ({fusion:?}): relative error {rel:.3e} > {tol:e}"
    );
}

fn tol(dt: DType) -> f64 {
    if dt == DType::F32 {
        1e-5
    } else {
        1e-2
    }
}

const SIZES: [usize; 4] = [1, 7, 127, 1000];

#[test]
fn every_size_in_every_dimension() {
    let dev = device();
    for m in SIZES {
        for n in SIZES {
            for k in SIZES {
                // The host reference is a triple loop: skip the cubes.
                if m * n * k > 130_000_000 {
                    continue;
                }
                let a = Host::random(&[m, k], DType::F32, (m * 31 + k) as u64);
                let b = Host::random(&[k, n], DType::F32, (k * 17 + n) as u64);
                let c = a
                    .tensor(DType::F32, &dev)
                    .matmul(&b.tensor(DType::F32, &dev));
                let what = format!("[{m},{k}] @ [{k},{n}]");
                check(&what, &c, &matmul_ref(&a, &b), 1e-5, Fusion::On);
            }
        }
    }
}

#[test]
fn transposed_and_sliced_operands_with_bias_gelu() {
    let dev = device();
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for (m, n, k) in [(127, 7, 1000), (1000, 127, 7), (7, 1000, 127), (64, 64, 64)] {
            // a is stored transposed, b as columns 3.. of a wider matrix.
            let at = Host::random(&[k, m], dt, 1);
            let bw = Host::random(&[k, n + 5], dt, 2);
            let bias = Host::random(&[n], dt, 3);
            let (a, b) = (at.t(), bw.narrow_cols(3, n));
            let mut want = matmul_ref(&a, &b);
            for row in want.data.chunks_mut(n) {
                for (v, bv) in row.iter_mut().zip(&bias.data) {
                    *v = gelu(*v + bv);
                }
            }
            for fusion in [Fusion::On, Fusion::Off] {
                let ta = at.tensor(dt, &dev).t();
                let tb = bw.tensor(dt, &dev).narrow(1, 3, n);
                let c = (ta.matmul(&tb) + bias.tensor(dt, &dev)).gelu();
                let what = format!("{dt:?} [{m},{k}]^T @ [{k},{n}+5][:, 3:] + bias, gelu");
                check(&what, &c, &want, tol(dt), fusion);
            }
        }
    }
}

#[test]
fn batched_broadcast_and_scaled_operands() {
    let dev = device();
    for dt in [DType::F32, DType::F16] {
        for (batch, m, n, k) in [(3, 127, 7, 33), (5, 1, 1000, 7), (2, 64, 48, 1000)] {
            let a = Host::random(&[batch, m, k], dt, 4);
            let b = Host::random(&[batch, k, n], dt, 5);
            let shared = Host::random(&[k, n], dt, 6);
            let res = Host::random(&[batch, m, n], dt, 7);
            // Batched with a residual add and relu.
            let mut want = matmul_ref(&a, &b);
            for (v, r) in want.data.iter_mut().zip(&res.data) {
                *v = (*v + r).max(0.0);
            }
            let c = (a.tensor(dt, &dev).matmul(&b.tensor(dt, &dev)) + res.tensor(dt, &dev)).relu();
            check(
                &format!("{dt:?} batched {batch}x[{m},{k},{n}]"),
                &c,
                &want,
                tol(dt),
                Fusion::On,
            );
            // A shared (broadcast) right operand and a scaled left one.
            let mut want = matmul_ref(&a, &shared);
            want.data.iter_mut().for_each(|v| *v *= 0.5);
            let a2 = a.tensor(dt, &dev) * 0.5;
            let c = a2.matmul(&shared.tensor(dt, &dev));
            check(
                &format!("{dt:?} broadcast {batch}x[{m},{k},{n}]"),
                &c,
                &want,
                tol(dt),
                Fusion::On,
            );
        }
    }
}

#[test]
fn integer_matmul_takes_the_generic_path() {
    let dev = device();
    let a: Vec<i32> = (0..12).map(|i| i - 5).collect();
    let b: Vec<i32> = (0..20).map(|i| 3 - i).collect();
    let c = Tensor::from_vec(a.clone(), [3, 4], &dev).matmul(&Tensor::from_vec(
        b.clone(),
        [4, 5],
        &dev,
    ));
    assert_eq!(c.dtype(), DType::I32);
    let got = c.to_vec::<i32>().unwrap();
    for i in 0..3 {
        for j in 0..5 {
            let want: i32 = (0..4).map(|p| a[i * 4 + p] * b[p * 5 + j]).sum();
            assert_eq!(got[i * 5 + j], want, "at {i},{j}");
        }
    }
}

/// A large product on the default device, spot-checked. That the CPU takes
/// its blocked GEMM here rather than the interpreter is asserted by
/// `codegen/tests/cpu_matmul.rs`, not by timing this test.
#[test]
fn square_1024_matches_reference() {
    let dev = device();
    let n = 1024;
    let a = Host::random(&[n, n], DType::F32, 8);
    let b = Host::random(&[n, n], DType::F32, 9);
    let (ta, tb) = (a.tensor(DType::F32, &dev), b.tensor(DType::F32, &dev));
    let c = ta.matmul(&tb);
    // Spot-check a few entries against the reference.
    let got = c.to_vec::<f32>().unwrap();
    for (i, j) in [(0, 0), (17, 1000), (1023, 1023), (512, 3)] {
        let want: f64 = (0..n).map(|p| a.data[i * n + p] * b.data[p * n + j]).sum();
        let g = got[i * n + j] as f64;
        assert!(
            (g - want).abs() <= 1e-4 * (1.0 + want.abs()),
            "at {i},{j}: {g} vs {want}"
        );
    }
}

/// Every operand layout the tensor-core kernels read differently (A and B
/// k-contiguous, B row-major, A transposed: 16-byte copies, `ldmatrix`,
/// `ldmatrix.trans`, `wgmma` with and without its transpose flag) in f16,
/// bf16, TF32 and exact f32 (FMA tiles), at sizes that span several CTA
/// tiles and pipeline stages, and 4097 in each dimension.
#[test]
fn tensor_core_layouts_and_precisions() {
    let dev = device();
    let cases = [
        (256, 264, 520),
        (4097, 72, 64),
        (33, 4097, 136),
        (40, 48, 4097),
    ];
    for (dt, precision, tol) in [
        (DType::F16, Precision::Highest, 1e-2),
        (DType::BF16, Precision::Highest, 1e-2),
        (DType::F32, Precision::Tf32, 5e-3),
        (DType::F32, Precision::Highest, 1e-5),
    ] {
        for (ci, &(m, n, k)) in cases.iter().enumerate() {
            let a = Host::random(&[m, k], dt, 11 + ci as u64);
            let b = Host::random(&[k, n], dt, 13 + ci as u64);
            let bias = Host::random(&[n], dt, 17);
            let mut want = matmul_ref(&a, &b);
            let epilogue = ci == 1;
            if epilogue {
                for row in want.data.chunks_mut(n) {
                    for (v, bv) in row.iter_mut().zip(&bias.data) {
                        *v = gelu(*v + bv);
                    }
                }
            }
            for (a_t, b_t) in [(false, false), (false, true), (true, false), (true, true)] {
                // Operands stored as given or transposed (then viewed back).
                let ta = if a_t {
                    a.t().tensor(dt, &dev).t()
                } else {
                    a.tensor(dt, &dev)
                };
                let tb = if b_t {
                    b.t().tensor(dt, &dev).t()
                } else {
                    b.tensor(dt, &dev)
                };
                let mut c = ta.matmul_with(&tb, precision);
                if epilogue {
                    c = (c + bias.tensor(dt, &dev)).gelu();
                }
                let what =
                    format!("{dt:?} {precision:?} [{m},{k}] @ [{k},{n}] a^T {a_t} b^T {b_t}");
                check(&what, &c, &want, tol, Fusion::On);
            }
        }
    }
}

/// TF32 rounds the operands (recorded in the graph): the CPU and the GPU
/// compute the same products, close to but not equal to exact f32.
#[test]
fn tf32_rounds_operands_and_exact_f32_does_not() {
    let dev = device();
    // 1 + 2^-12 is below TF32's resolution: its square rounds to 1.
    let x = Tensor::from_vec(vec![1.0f32 + 2f32.powi(-12); 64 * 64], [64, 64], &dev);
    let exact = x.matmul(&x).to_vec::<f32>().unwrap();
    let tf32 = x.matmul_with(&x, Precision::Tf32).to_vec::<f32>().unwrap();
    let e = 64.0 * (1.0 + 2f64.powi(-12)).powi(2);
    assert!(
        exact.iter().all(|v| (*v as f64 - e).abs() < 1e-4),
        "{}",
        exact[0]
    );
    assert!(tf32.iter().all(|v| *v == 64.0), "{}", tf32[0]);
}

/// TF32 rounds to nearest with ties to even, on every path (issue 15):
/// the CPU, the GPU's copy engine (k-major operands with 16-byte rows)
/// and its rounding in registers (a row-major B). `1 + 2^-11` is a tie
/// that rounds down to 1, `1 + 3 * 2^-11` one that rounds up to `1 +
/// 2^-9`; the ones they multiply are exact, so each sum is exact.
#[test]
fn tf32_rounds_ties_to_even() {
    let dev = device();
    let n = 64;
    for (v, rounded) in [
        (1.0 + 2f32.powi(-11), 1.0f32),
        (1.0 + 3.0 * 2f32.powi(-11), 1.0 + 2f32.powi(-9)),
        (-(1.0 + 2f32.powi(-11)), -1.0),
    ] {
        let x = Tensor::from_vec(vec![v; n * n], [n, n], &dev);
        let ones = Tensor::from_vec(vec![1.0f32; n * n], [n, n], &dev);
        let want = n as f32 * rounded;
        // B^T (both k-major) and a row-major B.
        for (what, b) in [("B^T", ones.t()), ("B", ones.clone())] {
            let got = x.matmul_with(&b, Precision::Tf32).to_vec::<f32>().unwrap();
            assert!(
                got.iter().all(|g| *g == want),
                "{v} {what}: {} != {want}",
                got[0]
            );
            let got = b
                .t()
                .matmul_with(&x.t(), Precision::Tf32)
                .to_vec::<f32>()
                .unwrap();
            assert!(
                got.iter().all(|g| *g == want),
                "{v} {what} swapped: {}",
                got[0]
            );
        }
    }
}

/// The split-K count the emitters are asked for from outside
/// (`SMELT_MATMUL_SPLITS`, `SMELT_MATMUL_TILE`): then the planner's
/// scratch follows the knobs, not the rule this file asserts.
fn knobs_set() -> bool {
    ["SMELT_MATMUL_SPLITS", "SMELT_MATMUL_TILE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// Split-K (issue 15): products with too few output tiles for the GPU and
/// a long `k` (the rule splits them on any GPU: a few 64x64 tiles, `k`
/// of 2048 to 4097; and 1024x1024 outputs with `k` = 4096, one 64x128
/// warpgroup tile per SM, split in two on sm_90 so two CTAs share an SM)
/// in f16 with bias + gelu, bf16 batched, TF32, exact f32 (the SIMT
/// kernel's split), with B
/// row-major and transposed, against the f64 reference; a NaN and an
/// infinity in A reach their rows' outputs as unsplit (cases without the
/// epilogue). The fused plan
/// gives each a scratch buffer of f32 partial planes (its last output).
/// On the CPU the fast path ignores the scratch (and `SMELT_CHECK_PTX=1`
/// assembles the split kernels); on a GPU they run split.
#[test]
fn split_k_small_outputs_long_k() {
    let dev = device();
    // (batch, m, n, k, dtype, precision, bias + gelu)
    let cases = [
        (1, 256, 256, 4096, DType::F16, Precision::Highest, true),
        (3, 7, 1000, 4097, DType::BF16, Precision::Highest, false),
        (1, 127, 127, 2048, DType::F32, Precision::Tf32, true),
        (2, 64, 72, 3000, DType::F16, Precision::Highest, false),
        (1, 1024, 1024, 4096, DType::F16, Precision::Highest, true),
        (1, 256, 256, 4096, DType::F32, Precision::Highest, true),
        (3, 7, 1000, 4097, DType::F32, Precision::Highest, false),
    ];
    for (ci, &(batch, m, n, k, dt, precision, epilogue)) in cases.iter().enumerate() {
        let tol = match (dt, precision) {
            (DType::F32, Precision::Highest) => 2e-5,
            (DType::F32, _) => 5e-3,
            _ => 1e-2,
        };
        let mut a = Host::random(&[batch, m, k], dt, 40 + ci as u64);
        if !epilogue {
            // A NaN in row 1 and an infinity in row 2 of the first batch.
            a.data[k + 5] = f64::NAN;
            a.data[2 * k + k / 2] = f64::INFINITY;
        }
        let b = Host::random(&[k, n], dt, 50 + ci as u64);
        let bias = Host::random(&[n], dt, 60);
        let mut want = matmul_ref(&a, &b);
        if epilogue {
            for row in want.data.chunks_mut(n) {
                for (v, bv) in row.iter_mut().zip(&bias.data) {
                    *v = gelu(*v + bv);
                }
            }
        }
        for b_t in [false, true] {
            let tb = if b_t {
                b.t().tensor(dt, &dev).t()
            } else {
                b.tensor(dt, &dev)
            };
            let mut c = a.tensor(dt, &dev).matmul_with(&tb, precision);
            if epilogue {
                c = (c + bias.tensor(dt, &dev)).gelu();
            }
            let what = format!("{dt:?} {precision:?} {batch}x[{m},{k}] @ [{k},{n}] b^T {b_t}");
            if !knobs_set() {
                let s = c.schedule(Fusion::On);
                let it = s
                    .items
                    .iter()
                    .find(|it| it.kernel.kind.name() == "matmul")
                    .unwrap_or_else(|| panic!("{what}: a matmul kernel"));
                let scratch = it.kernel.outputs.last().expect("outputs");
                assert_eq!(scratch.dtype, DType::F32, "{what}");
                assert!(scratch.len >= 2 * batch * m * n, "{what}: {scratch:?}");
                assert_eq!(scratch.len % (batch * m * n), 0, "{what}");
            }
            c.realize_with(Fusion::On)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = c.to_vec::<f32>().unwrap();
            let (mut err, mut norm) = (0.0, 0.0);
            for (i, (g, w)) in got.iter().zip(&want.data).enumerate() {
                let g = *g as f64;
                if !w.is_finite() {
                    let same = (w.is_nan() && g.is_nan()) || g == *w;
                    assert!(same, "{what}: at {i} {g} vs {w}");
                    continue;
                }
                err += (g - w) * (g - w);
                norm += w * w;
            }
            let rel = (err / norm.max(1e-30)).sqrt();
            assert!(rel <= tol, "{what}: relative error {rel:.3e} > {tol:e}");
        }
    }
}
