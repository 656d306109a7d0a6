//! The FP8 dtypes `F8E4M3` (PyTorch's `float8_e4m3fn`) and `F8E5M2`
//! (`float8_e5m2`): every code through safetensors and back, casts from
//! every dtype with ties, subnormals, overflow, NaN and infinities against
//! a reference built from the formats' definitions (`common::fp8_ref`),
//! through views; elementwise ops, reductions and sorts on FP8 inputs;
//! `scaled_mm` and `to_fp8` against f64 references; both fusion modes on
//! the test device.

mod common;

use common::*;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use smelt::{DType, Fusion, Tensor};

const FP8: [DType; 2] = [DType::F8E4M3, DType::F8E5M2];

fn format_of(dt: DType) -> Dtype {
    if dt == DType::F8E4M3 {
        Dtype::F8_E4M3
    } else {
        Dtype::F8_E5M2
    }
}

fn temp_file(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "smelt-fp8-{}-{name}.safetensors",
        std::process::id()
    ))
}

/// A realized tensor of `dt` holding the raw codes `codes`, loaded from a
/// safetensors file written by the format's own crate.
fn from_codes(dt: DType, codes: &[u8], name: &str) -> Tensor {
    let path = temp_file(name);
    let view = TensorView::new(format_of(dt), vec![codes.len()], codes).unwrap();
    safetensors::serialize_to_file([("x", view)], None, &path).unwrap();
    let t = smelt::safetensors::load(&path, &test_device()).unwrap()["x"].clone();
    let t = t.contiguous();
    t.realize().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(t.dtype(), dt);
    t
}

/// The raw codes of `t` (an FP8 tensor), saved by smelt and read by the
/// format's own crate.
fn codes_of(t: &Tensor, name: &str) -> Vec<u8> {
    let path = temp_file(name);
    smelt::safetensors::save(&path, &[("y", t)]).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let view = st.tensor("y").unwrap();
    assert_eq!(view.dtype(), format_of(t.dtype()));
    view.data().to_vec()
}

#[test]
fn every_code_decodes_and_round_trips() {
    let all: Vec<u8> = (0..=255).collect();
    for dt in FP8 {
        let x = from_codes(dt, &all, &format!("decode-{dt}"));
        let want = NdArray::new(&[256], all.iter().map(|c| fp8_value(dt, *c)).collect());
        for to in [DType::F64, DType::F32, DType::F16, DType::BF16] {
            // Every FP8 value is exact in these.
            check_dt(
                &format!("{dt} codes -> {to}"),
                || x.cast(to),
                to,
                &want,
                EXACT,
            );
        }
        // Back from f32 to the same codes (NaNs to a NaN code).
        let back = x.cast(DType::F32).cast(dt);
        let codes = codes_of(&back, &format!("encode-{dt}"));
        for (c, got) in all.iter().zip(&codes) {
            if fp8_value(dt, *c).is_nan() {
                assert!(
                    fp8_value(dt, *got).is_nan(),
                    "{dt} NaN {c:#04x} -> {got:#04x}"
                );
            } else {
                assert_eq!(got, c, "{dt} code {c:#04x}");
            }
        }
        // The negative zero keeps its sign.
        assert_eq!(codes[0x80], 0x80);
    }
}

/// Values probing every rounding case of `dt`: each code, the midpoints
/// between neighbours (ties), points just off them, the subnormal range,
/// the overflow edge and the specials, in both signs.
fn probes(dt: DType) -> Vec<f64> {
    let mut finite: Vec<f64> = (0..0x80u8)
        .map(|c| fp8_value(dt, c))
        .filter(|v| v.is_finite())
        .collect();
    finite.sort_by(f64::total_cmp);
    let mut v = Vec::new();
    for w in finite.windows(2) {
        let mid = (w[0] + w[1]) / 2.0;
        let step = (w[1] - w[0]) / 64.0;
        v.extend([w[0], mid, mid + step, mid - step]);
    }
    let top = finite[finite.len() - 1];
    let next = 2.0 * top - finite[finite.len() - 2];
    let edge = (top + next) / 2.0;
    v.extend([top, edge, edge + 1.0, edge - 1.0, next, 1e6, 1e30]);
    v.extend([2f64.powi(-20), 1e-30]);
    let neg: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v.extend([f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0]);
    v
}

#[test]
fn casts_from_floats_round_like_pytorch() {
    for dt in FP8 {
        let vals = probes(dt);
        for from in [DType::F64, DType::F32, DType::F16, DType::BF16] {
            let n = vals.len();
            for layout in [Layout::Contiguous, Layout::Flipped, Layout::Padded] {
                let inp = Input::with_values(layout, &[n], from, &vals);
                let want = inp.host().map(|v| fp8_ref(v, dt));
                check_dt(
                    &format!("cast {from} -> {dt} {layout:?}"),
                    || inp.tensor().cast(dt),
                    dt,
                    &want,
                    EXACT,
                );
            }
        }
        // Integers: ties between codes, overflow, and the extremes.
        let ints = [
            0.0, 1.0, -1.0, 17.0, 19.0, -33.0, 300.0, 464.0, 465.0, 61439.0, 61440.0, 1e9, -1e18,
        ];
        for from in [DType::I64, DType::I32, DType::I16, DType::I8, DType::U8] {
            let inp = Input::with_values(Layout::Permuted, &[3, 13], from, &ints);
            let want = inp.host().map(|v| fp8_ref(v, dt));
            check_dt(
                &format!("cast {from} -> {dt}"),
                || inp.tensor().cast(dt),
                dt,
                &want,
                EXACT,
            );
        }
        let flags = Input::with_values(Layout::Strided, &[4, 3], DType::Bool, &[1.0, 0.0]);
        let want = flags.host();
        check_dt(
            "cast bool -> fp8",
            || flags.tensor().cast(dt),
            dt,
            &want,
            EXACT,
        );
    }
}

#[test]
fn casts_between_the_two_formats() {
    let (e4, e5) = (DType::F8E4M3, DType::F8E5M2);
    for (from, to) in [(e4, e5), (e5, e4)] {
        let all: Vec<u8> = (0..=255).collect();
        let x = from_codes(from, &all, &format!("between-{from}"));
        let want = NdArray::new(
            &[256],
            all.iter()
                .map(|c| fp8_ref(fp8_value(from, *c), to))
                .collect(),
        );
        check_dt(&format!("{from} -> {to}"), || x.cast(to), to, &want, EXACT);
    }
}

/// Random FP8 values in `[lo, hi)` (rounded to `dt`) through `layout`.
fn fp8_input(layout: Layout, shape: &[usize], dt: DType, lo: f64, hi: f64, seed: u64) -> Input {
    Input::new(layout, shape, dt, lo, hi, seed)
}

#[test]
fn elementwise_ops_compute_in_f32_and_round_to_fp8() {
    for dt in FP8 {
        for (i, layout) in LAYOUTS.into_iter().enumerate() {
            let shape = [5, 7];
            let x = fp8_input(layout, &shape, dt, -6.0, 6.0, 10 + i as u64);
            let y = fp8_input(Layout::Contiguous, &shape, dt, 0.5, 4.0, 20 + i as u64);
            let (hx, hy) = (x.host(), y.host());
            // Each op rounds to the FP8 type, as the reference does.
            let r = |v: f64| fp8_ref(v, dt);
            let want = NdArray::new(
                &shape,
                hx.data
                    .iter()
                    .zip(&hy.data)
                    .map(|(a, b)| r(r(r(a * b) + a) / b))
                    .collect(),
            );
            let t = tol(dt).times(2.0);
            check_dt(
                &format!("(x * y + x) / y {dt} {layout:?}"),
                || (&(&x.tensor() * &y.tensor()) + &x.tensor()) / &y.tensor(),
                dt,
                &want,
                t,
            );
            let want = hx.map(|a| r(r(a).exp()));
            check_dt(
                &format!("exp {dt} {layout:?}"),
                || x.tensor().exp(),
                dt,
                &want,
                t,
            );
            // Scalars keep the FP8 type; wider floats win.
            let want = hx.map(|a| r(r(a * 0.5) + 1.0));
            check_dt(
                &format!("x * 0.5 + 1 {dt}"),
                || x.tensor() * 0.5 + 1,
                dt,
                &want,
                EXACT,
            );
            let h = Input::new(layout, &shape, DType::F16, -2.0, 2.0, 30 + i as u64);
            let want = NdArray::new(
                &shape,
                hx.data
                    .iter()
                    .zip(&h.host().data)
                    .map(|(a, b)| half::f16::from_f64(a + b).to_f64())
                    .collect(),
            );
            check_dt(
                &format!("{dt} + f16"),
                || &x.tensor() + &h.tensor(),
                DType::F16,
                &want,
                tol(DType::F16),
            );
            let want = hx.map(|a| (a > 1.0) as u8 as f64);
            check_dt("x > 1", || x.tensor().gt(1.0), DType::Bool, &want, EXACT);
        }
    }
}

#[test]
fn reductions_accumulate_in_f32() {
    for dt in FP8 {
        for (i, layout) in [
            Layout::Contiguous,
            Layout::Permuted,
            Layout::Strided,
            Layout::Flipped,
        ]
        .into_iter()
        .enumerate()
        {
            for shape in [[1usize, 1], [3, 127], [7, 1000]] {
                let x = fp8_input(layout, &shape, dt, -8.0, 8.0, 40 + i as u64);
                let hx = x.host();
                let cols = shape[1];
                let rows = |f: &dyn Fn(&[f64]) -> f64| {
                    NdArray::new(
                        &[shape[0]],
                        hx.data.chunks(cols).map(|r| fp8_ref(f(r), dt)).collect(),
                    )
                };
                // Sums of up to 1000 values of +-8 would overflow E4M3 (448)
                // if accumulated in FP8; in f32 only the result rounds.
                let sum = rows(&|r| r.iter().sum());
                check_dt(
                    &format!("sum {dt} {shape:?} {layout:?}"),
                    || x.tensor().sum(1),
                    dt,
                    &sum,
                    tol(dt),
                );
                let max = rows(&|r| r.iter().copied().fold(f64::NEG_INFINITY, f64::max));
                check_dt(
                    &format!("max {dt} {shape:?}"),
                    || x.tensor().max(1),
                    dt,
                    &max,
                    EXACT,
                );
                let mean = rows(&|r| r.iter().sum::<f64>() / r.len() as f64);
                check_dt(
                    &format!("mean {dt} {shape:?}"),
                    || x.tensor().mean(1),
                    dt,
                    &mean,
                    tol(dt),
                );
                // A softmax over FP8 logits computes in f32 and rounds once.
                let sm = NdArray::new(
                    &shape,
                    hx.data
                        .chunks(cols)
                        .flat_map(|r| {
                            let m = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                            let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
                            r.iter()
                                .map(move |v| fp8_ref((v - m).exp() / s, dt))
                                .collect::<Vec<_>>()
                        })
                        .collect(),
                );
                check_dt(
                    &format!("softmax {dt} {shape:?}"),
                    || x.tensor().softmax(-1),
                    dt,
                    &sm,
                    tol(dt).times(2.0),
                );
            }
        }
    }
}

#[test]
fn sorts_order_fp8_values_with_nan_last() {
    for dt in FP8 {
        // Every code once (NaNs included), shuffled by a stride.
        let codes: Vec<u8> = (0..256usize).map(|i| ((i * 97) % 256) as u8).collect();
        let x = from_codes(dt, &codes, &format!("sort-{dt}"));
        let mut want: Vec<f64> = codes.iter().map(|c| fp8_value(dt, *c)).collect();
        want.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            _ => a.partial_cmp(b).unwrap(),
        });
        let want = NdArray::new(&[256], want);
        check(&format!("sort {dt}"), || x.sort(0, false).0, &want, EXACT);
    }
}

/// `v` rounded to `dt` by a reference independent of smelt's conversions.
fn round_ref(v: f64, dt: DType) -> f64 {
    match dt {
        DType::F32 => v as f32 as f64,
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        _ => fp8_ref(v, dt),
    }
}

/// `(a @ b) * sa * sb` of the dequantized operands, in f64.
fn scaled_ref(a: &NdArray, b: &NdArray, sa: f64, sb: f64, out: DType) -> NdArray {
    let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1]);
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k).map(|p| a.data[i * k + p] * b.data[p * n + j]).sum();
            c[i * n + j] = round_ref(s * (sa * sb), out);
        }
    }
    NdArray::new(&[m, n], c)
}

#[test]
fn scaled_mm_matches_the_dequantized_product() {
    let pairs = [
        (DType::F8E4M3, DType::F8E4M3),
        (DType::F8E4M3, DType::F8E5M2),
        (DType::F8E5M2, DType::F8E4M3),
        (DType::BF16, DType::F16),
        (DType::F32, DType::F32),
    ];
    let mut seed = 100;
    for (da, db) in pairs {
        for (m, k, n) in [
            (1, 1, 1),
            (7, 127, 1),
            (1, 7, 127),
            (127, 7, 7),
            (7, 127, 127),
        ] {
            for out in [DType::F32, DType::BF16, DType::F8E4M3] {
                seed += 1;
                let a = Input::new(Layout::Contiguous, &[m, k], da, -4.0, 4.0, seed);
                // `b` as the transpose of a `[n, k]` buffer: a view.
                let b = Input::new(Layout::Permuted, &[k, n], db, -4.0, 4.0, seed + 500);
                let (sa, sb) = (0.375, 1.0 / 16.0);
                let want = scaled_ref(&a.host(), &b.host(), sa, sb, out);
                // The reference is exact; smelt accumulates in f32.
                let t = if out == DType::F32 {
                    Tol::new(1e-5, 1e-5 * k as f64)
                } else {
                    tol(out).times(1.5)
                };
                let what = format!("scaled_mm {da} x {db} -> {out} [{m}, {k}] @ [{k}, {n}]");
                check_dt(
                    &format!("{what} (scalar scales)"),
                    || a.tensor().scaled_mm(&b.tensor(), sa, sb, out),
                    out,
                    &want,
                    t,
                );
                let dev = test_device();
                let (ta, tb) = (
                    Tensor::from_vec(vec![sa as f32], [1], &dev),
                    Tensor::scalar(sb as f32, &dev),
                );
                check_dt(
                    &format!("{what} (tensor scales)"),
                    || a.tensor().scaled_mm(&b.tensor(), &ta, &tb, out),
                    out,
                    &want,
                    t,
                );
            }
        }
    }
}

#[test]
fn scaled_mm_reads_fp8_operands_in_the_product_kernel() {
    let dev = test_device();
    let a = Tensor::rand([16, 32], DType::F32, 1, &dev).cast(DType::F8E4M3);
    let b = Tensor::rand([32, 8], DType::F32, 2, &dev).cast(DType::F8E5M2);
    smelt::realize_all(&[&a, &b], Fusion::On).unwrap();
    let c = a.scaled_mm(&b, 0.5, 2.0, DType::BF16);
    // One kernel: the widening casts, the product, the scaling and the
    // cast to bf16 (no f32 copy of an operand): 1 byte per operand
    // element read, 2 per result element written.
    let s = c.schedule(Fusion::On);
    assert_eq!(s.items.len(), 1, "{s}");
    let k = &s.items[0].kernel;
    assert_eq!(k.bytes_read(), 16 * 32 + 32 * 8, "{s}");
    assert_eq!(k.bytes_written(), 16 * 8 * 2, "{s}");
}

#[test]
fn to_fp8_quantizes_with_a_per_tensor_scale() {
    for dt in FP8 {
        let max = if dt == DType::F8E4M3 { 448.0 } else { 57344.0 };
        for layout in [Layout::Contiguous, Layout::Permuted, Layout::Padded] {
            let x = Input::new(layout, &[7, 13], DType::F32, -30.0, 30.0, 7);
            let hx = x.host();
            let amax = hx.data.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let scale = (amax as f32 / max as f32) as f64;
            for mode in MODES {
                let (q, s) = x.tensor().to_fp8(dt);
                assert_eq!(q.dtype(), dt);
                assert_eq!(s.dtype(), DType::F32);
                assert_eq!(values(&s, mode), vec![scale], "{dt} scale {mode:?}");
                let got = values(&q, mode);
                for (g, v) in got.iter().zip(&hx.data) {
                    let want = fp8_ref(((*v as f32) / scale as f32) as f64, dt);
                    assert_eq!(*g, want, "{dt} {v} {mode:?}");
                    assert!(g.abs() <= max);
                }
            }
        }
        // All zeros: a finite scale and zero codes.
        let z = Tensor::zeros([4], DType::F32, &test_device());
        let (q, s) = z.to_fp8(dt);
        assert!(s.to_scalar::<f32>().unwrap() > 0.0);
        assert_eq!(q.to_vec::<f32>().unwrap(), vec![0.0; 4]);
    }
}

#[test]
fn fp8_files_and_misuse() {
    let dev = test_device();
    let x = Tensor::from_vec(vec![1.5f32, -0.25, 448.0], [3], &dev).cast(DType::F8E4M3);
    let path = temp_file("roundtrip");
    smelt::safetensors::save(&path, &[("x", &x)]).unwrap();
    let back = smelt::safetensors::load(&path, &dev).unwrap()["x"].clone();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(back.dtype(), DType::F8E4M3);
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![1.5, -0.25, 448.0]);
    // NumPy has no FP8 type.
    let err = smelt::npy::save(std::env::temp_dir().join("smelt-fp8.npy"), &x).unwrap_err();
    assert!(err.to_string().contains("float8_e4m3fn"), "{err}");
}

#[test]
#[should_panic(expected = "float8_e4m3fn and float8_e5m2 do not promote")]
fn mixing_the_formats_panics() {
    let dev = test_device();
    let a = Tensor::zeros([2], DType::F8E4M3, &dev);
    let b = Tensor::zeros([2], DType::F8E5M2, &dev);
    let _ = &a + &b;
}

#[test]
#[should_panic(expected = "scatter_add: float8_e5m2 tensors have no atomic add")]
fn scatter_add_into_fp8_panics() {
    let dev = test_device();
    let a = Tensor::zeros([4], DType::F8E5M2, &dev);
    let i = Tensor::from_vec(vec![0i64, 1], [2], &dev);
    let v = Tensor::zeros([2], DType::F8E5M2, &dev);
    let _ = a.scatter_add(0, &i, &v);
}

#[test]
#[should_panic(expected = "rand: no random values in float8_e4m3fn")]
fn random_fp8_panics() {
    let _ = Tensor::rand([2], DType::F8E4M3, 0, &test_device());
}
