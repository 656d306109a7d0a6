//! FP8 matrix products (`scaled_mm` of `F8E4M3` / `F8E5M2` operands,
//! issue 15) against an f64 reference of the dequantized operands: M, N
//! and K through 1, 7, 127 and 4097, both formats and the mixed pair,
//! every operand layout (k-contiguous, transposed, strided, flipped),
//! batches, per-tensor scales as numbers and as tensors, a bias + gelu
//! epilogue, NaN and infinity codes; both fusion modes on the test device
//! (on an H100 the products run on `wgmma` FP8 tensor cores). The
//! reference sums exactly; smelt accumulates in f32, so each element is
//! bounded by `K 2^-24 Σ|a b|` plus the output's rounding (and on a GPU
//! by the FP8 tensor cores' coarser accumulation, see [`bound`]). Where an FP8
//! product lowers to is asserted at emit level for sm_90 and sm_80.

mod common;

use common::*;
use smelt::{DType, Device, Fusion, Tensor};
use smelt_codegen::ptx::{self, Target};
use smelt_codegen::KernelKind;

/// The operand pairs: both formats, and the mixed pair both ways round.
const PAIRS: [(DType, DType); 4] = [
    (DType::F8E4M3, DType::F8E4M3),
    (DType::F8E5M2, DType::F8E5M2),
    (DType::F8E4M3, DType::F8E5M2),
    (DType::F8E5M2, DType::F8E4M3),
];

/// How an operand `[.., rows, cols]` is stored.
#[derive(Clone, Copy, Debug)]
enum Store {
    /// Contiguous.
    Plain,
    /// The transpose of a contiguous `[.., cols, rows]` buffer.
    Swapped,
    /// Every axis sliced with a step, odd ones negative (`Layout::Strided`).
    Strided,
    /// Every axis flipped (`Layout::Flipped`).
    Flipped,
}

/// An FP8 operand of logical shape `shape`, stored as `store` says, with
/// values uniform in `[lo, hi)` rounded to `dt`; and its host values.
fn operand(
    dt: DType,
    shape: &[usize],
    store: Store,
    lo: f64,
    hi: f64,
    seed: u64,
) -> (Tensor, NdArray) {
    let r = shape.len();
    let layout = match store {
        Store::Plain | Store::Swapped => Layout::Contiguous,
        Store::Strided => Layout::Strided,
        Store::Flipped => Layout::Flipped,
    };
    if let Store::Swapped = store {
        let mut base = shape.to_vec();
        base.swap(r - 2, r - 1);
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        let inp = Input::new(layout, &base, dt, lo, hi, seed);
        return (
            inp.tensor().permute(perm.clone()),
            inp.host().permute(&perm),
        );
    }
    let inp = Input::new(layout, shape, dt, lo, hi, seed);
    (inp.tensor(), inp.host())
}

/// `a @ b` over the last two axes (batch axes broadcast) in f64, and
/// `Σ|a b|` per element (the f32 accumulation's error scale).
fn product(a: &NdArray, b: &NdArray) -> (NdArray, NdArray) {
    let (ra, rb) = (a.ndim(), b.ndim());
    let (m, k, n) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
    let batch = broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2]);
    let mut shape = batch.clone();
    shape.extend([m, n]);
    let (mut sum, mut abs) = (Vec::new(), Vec::new());
    let nb: usize = batch.iter().product();
    for bi in 0..nb {
        let c = unravel(bi, &batch);
        let at = |x: &NdArray, i: usize, j: usize| {
            let mut idx = c[c.len() + 2 - x.ndim()..].to_vec();
            idx.extend([i, j]);
            x.at_broadcast(&idx)
        };
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut t) = (0.0, 0.0);
                for p in 0..k {
                    let v = at(a, i, p) * at(b, p, j);
                    s += v;
                    t += v.abs();
                }
                sum.push(s);
                abs.push(t);
            }
        }
    }
    (NdArray::new(&shape, sum), NdArray::new(&shape, abs))
}

/// Half an ulp of `dt` relative to a value (its rounding's relative error).
fn rounding(dt: DType) -> f64 {
    match dt {
        DType::F32 => 2f64.powi(-24),
        DType::F16 => 2f64.powi(-11),
        DType::BF16 => 2f64.powi(-8),
        _ => unreachable!("outputs tested: f32, f16, bf16"),
    }
}

/// Asserts that `got` matches `want` (the exact result before the output
/// rounding) within `err` (the computation's error bound per element)
/// and `out`'s rounding; NaN must match NaN and an infinity itself.
fn assert_within(what: &str, got: &[f64], want: &NdArray, err: &NdArray, out: DType) {
    assert_eq!(got.len(), want.numel(), "{what}: element count");
    let u = rounding(out);
    for (i, ((g, w), e)) in got.iter().zip(&want.data).zip(&err.data).enumerate() {
        let ok = if w.is_nan() || w.is_infinite() {
            g.is_nan() && w.is_nan() || g == w
        } else {
            // The smallest normal of the output bounds subnormal rounding.
            (g - w).abs() <= e * (1.0 + u) + u * w.abs() + 1e-30
        };
        assert!(
            ok,
            "{what}: element {:?} of {:?}: got {g}, want {w} (bound {e}, output {out})",
            unravel(i, &want.shape),
            want.shape
        );
    }
}

/// The error bound of `Σ a b` scaled by `s`: f32 recursive summation's
/// `K 2^-24 Σ|a b|` and the scaling's own rounding; on a GPU also the FP8
/// tensor cores' accumulation, which keeps only about 14 bits where each
/// `k32` MMA adds its products to the accumulator (DeepSeek-V3 report,
/// 3.3.2: Hopper's FP8 MMA), bounded by `ceil(K / 32) 2^-12 Σ|a b|`.
fn bound(exact: &NdArray, abs: &NdArray, k: usize, s: f64) -> NdArray {
    let u = 2f64.powi(-24);
    let mma = if matches!(test_device(), Device::Cuda(_)) {
        k.div_ceil(32) as f64 * 2f64.powi(-12)
    } else {
        0.0
    };
    exact.zip(abs, |e, t| {
        ((k as f64 * u + mma) * t * s.abs()) * (1.0 + u) + 2.0 * u * (e * s).abs()
    })
}

/// Realizes `y` under both fusion modes and checks it against `want`.
fn check_product(what: &str, y: impl Fn() -> Tensor, want: &NdArray, err: &NdArray, out: DType) {
    for mode in MODES {
        let t = y();
        assert_eq!(t.dtype(), out, "{what}");
        assert_eq!(t.shape(), &want.shape[..], "{what}");
        let got = values(&t, mode);
        assert_within(&format!("{what} [{mode:?}]"), &got, want, err, out);
    }
}

#[test]
fn fp8_products_match_the_dequantized_product_at_edge_shapes() {
    let shapes = [
        (1, 1, 1),
        (7, 7, 7),
        (1, 127, 7),
        (127, 1, 127),
        (7, 127, 4097),
        (4097, 7, 33),
        (127, 127, 127),
        (33, 4097, 7),
        // Multiples of 16: row-major B and transposed A are transposed
        // in registers on sm_90 (else read by bytes).
        (48, 64, 160),
        (96, 32, 1024),
    ];
    let layouts = [
        (Store::Plain, Store::Swapped),
        (Store::Plain, Store::Plain),
        (Store::Swapped, Store::Swapped),
        (Store::Swapped, Store::Plain),
    ];
    let mut seed = 1;
    for (i, (m, n, k)) in shapes.into_iter().enumerate() {
        for (j, (da, db)) in PAIRS.into_iter().enumerate() {
            for (sa_store, sb_store) in layouts {
                seed += 2;
                let (a, ha) = operand(da, &[m, k], sa_store, -4.0, 4.0, seed);
                let (b, hb) = operand(db, &[k, n], sb_store, -4.0, 4.0, seed + 1);
                let (exact, abs) = product(&ha, &hb);
                let out = [DType::F32, DType::BF16, DType::F16][(i + j) % 3];
                let (sa, sb) = (0.375, 1.0 / 16.0);
                let want = exact.map(|v| v * sa * sb);
                let err = bound(&exact, &abs, k, sa * sb);
                let what =
                    format!("{da} {sa_store:?} [{m}, {k}] @ {db} {sb_store:?} [{k}, {n}] -> {out}");
                check_product(&what, || a.scaled_mm(&b, sa, sb, out), &want, &err, out);
            }
        }
    }
}

#[test]
fn fp8_products_through_strided_and_flipped_views() {
    let mut seed = 500;
    for (da, db) in PAIRS {
        for (sa_store, sb_store) in [
            (Store::Strided, Store::Flipped),
            (Store::Flipped, Store::Strided),
            (Store::Strided, Store::Swapped),
        ] {
            for (m, n, k) in [(7, 9, 33), (65, 130, 127)] {
                seed += 2;
                let (a, ha) = operand(da, &[m, k], sa_store, -8.0, 8.0, seed);
                let (b, hb) = operand(db, &[k, n], sb_store, -8.0, 8.0, seed + 1);
                let (exact, abs) = product(&ha, &hb);
                let err = bound(&exact, &abs, k, 1.0);
                let what = format!("{da} {sa_store:?} [{m}, {k}] @ {db} {sb_store:?} [{k}, {n}]");
                check_product(
                    &what,
                    || a.scaled_mm(&b, 1.0, 1.0, DType::F32),
                    &exact,
                    &err,
                    DType::F32,
                );
            }
        }
    }
}

#[test]
fn batched_fp8_products_with_tensor_scales() {
    let dev = test_device();
    let mut seed = 900;
    for (da, db) in PAIRS {
        // [3, m, k] @ [3, k, n] (b k-contiguous and row-major), and a
        // 2-D b broadcast over the batch.
        for (b_shape, sb_store) in [
            (vec![3, 144, 80], Store::Swapped),
            (vec![3, 144, 80], Store::Plain),
            (vec![144, 80], Store::Plain),
        ] {
            let (m, k) = (48, 144);
            seed += 2;
            let (a, ha) = operand(da, &[3, m, k], Store::Plain, -2.0, 2.0, seed);
            let (b, hb) = operand(db, &b_shape, sb_store, -2.0, 2.0, seed + 1);
            let (exact, abs) = product(&ha, &hb);
            let (sa, sb) = (0.5f32, 3.0f32);
            let (ta, tb) = (
                Tensor::from_vec(vec![sa], [1], &dev),
                Tensor::scalar(sb, &dev),
            );
            let s = f64::from(sa * sb);
            let want = exact.map(|v| v * s);
            let err = bound(&exact, &abs, k, s);
            let what = format!("{da} [3, {m}, {k}] @ {db} {b_shape:?} {sb_store:?}");
            check_product(
                &what,
                || a.scaled_mm(&b, &ta, &tb, DType::BF16),
                &want,
                &err,
                DType::BF16,
            );
        }
    }
}

#[test]
fn fp8_products_of_quantized_tensors_with_a_bias_and_gelu() {
    let dev = test_device();
    for (da, db) in PAIRS {
        for (m, n, k) in [(7, 127, 127), (130, 72, 4097)] {
            let x = Tensor::rand([m, k], DType::F32, 7, &dev) * 6.0 - 3.0;
            let w = Tensor::rand([n, k], DType::F32, 8, &dev) * 2.0 - 1.0;
            let bias = Tensor::rand([n], DType::F32, 9, &dev) - 0.5;
            // torch's recipe: per-tensor scales, w stored [n, k] and used
            // transposed (k-contiguous for both operands).
            let (qa, sa) = x.to_fp8(da);
            let (qw, sw) = w.to_fp8(db);
            smelt::realize_all(&[&qa, &sa, &qw, &sw, &bias], Fusion::On).unwrap();
            let host =
                |t: &Tensor, shape: &[usize]| NdArray::new(shape, t.to_vec::<f64>().unwrap());
            let (ha, hw) = (host(&qa, &[m, k]), host(&qw, &[n, k]).permute(&[1, 0]));
            let hb = host(&bias, &[n]);
            let s = sa.to_scalar::<f32>().unwrap() * sw.to_scalar::<f32>().unwrap();
            let s = f64::from(s);
            let (exact, abs) = product(&ha, &hw);
            let gelu = |v: f64| 0.5 * v * (1.0 + libm::erf(v / std::f64::consts::SQRT_2));
            let pre = NdArray::from_fn(&[m, n], |c| exact.at(c) * s + hb.data[c[1]]);
            let want = pre.map(gelu);
            // gelu' <= 1.13; smelt's f32 gelu adds a few ulps of its input.
            let err = bound(&exact, &abs, k, s).zip(&pre, |e, p| {
                1.13 * (e + 2f64.powi(-23) * p.abs()) + 1e-6 * (1.0 + p.abs())
            });
            let y = || {
                (qa.scaled_mm(&qw.t(), &sa, &sw, DType::F32) + &bias)
                    .gelu()
                    .cast(DType::BF16)
            };
            let what = format!("gelu({da} [{m}, {k}] @ {db} [{n}, {k}]^T + bias)");
            check_product(&what, y, &want, &err, DType::BF16);
            // One kernel: the product with its scaling, bias, gelu and cast.
            let sched = y().schedule(Fusion::On);
            assert_eq!(sched.items.len(), 1, "{what}: {sched}");
            assert_eq!(sched.items[0].kernel.kind, KernelKind::Matmul, "{what}");
        }
    }
}

#[test]
fn nan_and_infinity_codes_propagate_through_fp8_products() {
    // E4M3 has NaN but no infinity (an infinite f64 becomes NaN); E5M2
    // has both. A row of A holding one special poisons its output row
    // (inf * 0 is NaN; +inf and -inf in one sum are NaN).
    for (da, db) in PAIRS {
        let (m, n, k) = (5, 24, 40);
        let mut va: Vec<f64> = (0..m * k)
            .map(|i| ((i * 7) % 11) as f64 / 4.0 - 1.25)
            .collect();
        va[k + 3] = f64::NAN;
        va[2 * k + 5] = f64::INFINITY;
        va[3 * k + 1] = f64::NEG_INFINITY;
        va[3 * k + 2] = f64::INFINITY;
        let vb: Vec<f64> = (0..k * n)
            .map(|i| ((i * 5) % 13) as f64 / 8.0 - 0.75)
            .collect();
        let a = Input::with_values(Layout::Contiguous, &[m, k], da, &va);
        let b = Input::with_values(Layout::Permuted, &[k, n], db, &vb);
        let (exact, abs) = product(&a.host(), &b.host());
        assert!(exact.data[n..2 * n].iter().all(|v| v.is_nan()));
        let err = bound(&exact, &abs, k, 1.0).map(|e| if e.is_finite() { e } else { 0.0 });
        let what = format!("{da} with specials @ {db}");
        check_product(
            &what,
            || a.tensor().scaled_mm(&b.tensor(), 1.0, 1.0, DType::F32),
            &exact,
            &err,
            DType::F32,
        );
    }
}

#[test]
fn fp8_products_lower_to_wgmma_on_sm90_and_the_generic_kernel_on_sm80() {
    let dev = test_device();
    for (da, db) in PAIRS {
        for transposed_b in [false, true] {
            let a = Tensor::rand([256, 512], DType::F32, 1, &dev).cast(da);
            let b = if transposed_b {
                Tensor::rand([384, 512], DType::F32, 2, &dev).cast(db).t()
            } else {
                Tensor::rand([512, 384], DType::F32, 2, &dev).cast(db)
            };
            smelt::realize_all(&[&a, &b], Fusion::On).unwrap();
            let c = a.scaled_mm(&b, 0.5, 2.0, DType::BF16);
            let s = c.schedule(Fusion::On);
            assert_eq!(s.items.len(), 1, "{s}");
            let k = &s.items[0].kernel;
            assert_eq!(k.kind, KernelKind::Matmul, "{s}");
            let name = |dt: DType| if dt == DType::F8E4M3 { "e4m3" } else { "e5m2" };
            let [sm80, sm90] = Target::CHECKED.map(|t| ptx::emit(k, &t).unwrap().ptx);
            assert!(
                sm90.contains(&format!("k32.f32.{}.{}", name(da), name(db))),
                "{da} x {db}: no FP8 wgmma on sm_90"
            );
            // A k-contiguous B is copied 16 bytes at a time; a row-major
            // one (16-aligned rows) is transposed in registers on its way
            // to shared memory (FP8 wgmma has no transpose): 4-byte stores.
            assert!(!sm90.contains("ld.global.u8"));
            assert_eq!(sm90.contains("st.shared.b32"), !transposed_b);
            assert!(!sm80.contains("mma"), "{da} x {db}: sm_80 has no FP8 MMA");
        }
    }
}
