//! Composites (softmax, log_softmax, logsumexp, var, std, layer_norm,
//! rms_norm, cross_entropy) against host references written out here, on
//! every layout, several axes and dtypes, under both fusion modes.

mod common;

use common::*;
use smelt::{DType, Tensor};

fn softmax_ref(x: &NdArray, a: usize) -> NdArray {
    let m = x.max(&[a], true);
    let e = x.zip(&m, |x, m| (x - m).exp());
    let s = e.sum(&[a], true);
    e.zip(&s, |e, s| e / s)
}

fn log_softmax_ref(x: &NdArray, a: usize) -> NdArray {
    let m = x.max(&[a], true);
    let s = x.zip(&m, |x, m| x - m);
    let l = s.map(f64::exp).sum(&[a], true).map(f64::ln);
    s.zip(&l, |s, l| s - l)
}

fn logsumexp_ref(x: &NdArray, axes: &[usize], keep: bool) -> NdArray {
    let m = x
        .max(axes, true)
        .map(|m| if m.is_infinite() { 0.0 } else { m });
    let s = x.zip(&m, |x, m| (x - m).exp()).sum(axes, true);
    let r = s.zip(&m, |s, m| s.ln() + m);
    if keep {
        r
    } else {
        let shape: Vec<usize> = (0..x.ndim())
            .filter(|d| !axes.contains(d))
            .map(|d| x.shape[d])
            .collect();
        r.reshape(&shape)
    }
}

fn var_ref(x: &NdArray, axes: &[usize], correction: usize, keep: bool) -> NdArray {
    let n: usize = axes.iter().map(|a| x.shape[*a]).product();
    let m = x.mean(axes, true);
    x.zip(&m, |x, m| (x - m) * (x - m))
        .sum(axes, keep)
        .map(|s| s / n.saturating_sub(correction) as f64)
}

fn layer_norm_ref(
    x: &NdArray,
    axes: &[usize],
    w: Option<&NdArray>,
    b: Option<&NdArray>,
    eps: f64,
) -> NdArray {
    let m = x.mean(axes, true);
    let v = var_ref(x, axes, 0, true);
    let mut y = x.zip(&m, |x, m| x - m).zip(&v, |c, v| c / (v + eps).sqrt());
    if let Some(w) = w {
        y = y.zip(w, |y, w| y * w);
    }
    if let Some(b) = b {
        y = y.zip(b, |y, b| y + b);
    }
    y
}

fn rms_norm_ref(x: &NdArray, axes: &[usize], w: Option<&NdArray>, eps: f64) -> NdArray {
    let ms = x.map(|x| x * x).mean(axes, true);
    let y = x.zip(&ms, |x, ms| x / (ms + eps).sqrt());
    match w {
        Some(w) => y.zip(w, |y, w| y * w),
        None => y,
    }
}

/// Shapes and the axes the row composites are checked along: last, first
/// and middle axes, prime lengths, size-1 rows.
fn shapes_axes() -> Vec<(Vec<usize>, Vec<isize>)> {
    vec![
        (vec![5, 7], vec![0, 1, -1]),
        (vec![3, 4, 6], vec![0, 1, 2]),
        (vec![13], vec![0]),
        (vec![4, 1], vec![1, 0]),
        (vec![2, 1, 2, 3, 1, 2], vec![3, -1]),
    ]
}

#[test]
fn softmax_log_softmax_every_layout() {
    for (shape, axes) in shapes_axes() {
        for layout in LAYOUTS {
            let inp = Input::new(layout, &shape, DType::F32, -4.0, 4.0, 21);
            for a in &axes {
                let a = *a;
                let d = ax(a, shape.len());
                let what = format!("{shape:?} {layout:?} axis {a}");
                check_dt(
                    &format!("softmax {what}"),
                    || inp.tensor().softmax(a),
                    DType::F32,
                    &softmax_ref(&inp.host(), d),
                    tol(DType::F32).times(4.0),
                );
                check_dt(
                    &format!("log_softmax {what}"),
                    || inp.tensor().log_softmax(a),
                    DType::F32,
                    &log_softmax_ref(&inp.host(), d),
                    tol(DType::F32).times(4.0),
                );
            }
        }
    }
}

#[test]
fn logsumexp_axes_and_keepdim() {
    for layout in LAYOUTS {
        let inp = Input::new(layout, &[3, 4, 5], DType::F32, -5.0, 5.0, 22);
        let axes_list: Vec<Vec<isize>> =
            vec![vec![0], vec![2], vec![-2], vec![0, 2], vec![0, 1, 2]];
        for axes in axes_list {
            let norm: Vec<usize> = {
                let mut v: Vec<usize> = axes.iter().map(|a| ax(*a, 3)).collect();
                v.sort_unstable();
                v
            };
            for keep in [false, true] {
                check(
                    &format!("logsumexp {layout:?} {axes:?} keep {keep}"),
                    || inp.tensor().logsumexp(axes.clone(), keep),
                    &logsumexp_ref(&inp.host(), &norm, keep),
                    tol(DType::F32).times(4.0),
                );
            }
        }
    }
}

#[test]
fn var_and_std() {
    for layout in LAYOUTS {
        let inp = Input::new(layout, &[4, 5, 3], DType::F32, -3.0, 3.0, 23);
        let axes_list: Vec<Vec<isize>> = vec![vec![1], vec![-1], vec![0, 2], vec![0, 1, 2]];
        for axes in axes_list {
            let norm: Vec<usize> = axes.iter().map(|a| ax(*a, 3)).collect();
            for correction in [0, 1] {
                for keep in [false, true] {
                    let what = format!("{layout:?} {axes:?} c={correction} keep {keep}");
                    let v = var_ref(&inp.host(), &norm, correction, keep);
                    check(
                        &format!("var {what}"),
                        || inp.tensor().var(axes.clone(), correction, keep),
                        &v,
                        tol(DType::F32).times(10.0),
                    );
                    check(
                        &format!("std {what}"),
                        || inp.tensor().std(axes.clone(), correction, keep),
                        &v.map(f64::sqrt),
                        tol(DType::F32).times(10.0),
                    );
                }
            }
        }
    }
    // Every axis at once, and the unbiased variance of a single element
    // (0 / 0 = NaN, as in PyTorch).
    let (x, h) = make(&[1.0, 2.0, 4.0, 8.0], &[2, 2], DType::F32);
    check(
        "var all",
        || x.var(.., 1, false),
        &var_ref(&h, &[0, 1], 1, false),
        tol(DType::F32),
    );
    let (one, _) = make(&[3.0], &[1], DType::F32);
    check(
        "var of one",
        || one.var(0, 1, false),
        &NdArray::scalar(f64::NAN),
        EXACT,
    );
    check(
        "var0 of one",
        || one.var(0, 0, false),
        &NdArray::scalar(0.0),
        EXACT,
    );
}

#[test]
fn layer_norm_and_rms_norm() {
    let eps = 1e-5;
    for layout in LAYOUTS {
        let inp = Input::new(layout, &[4, 3, 8], DType::F32, -3.0, 3.0, 24);
        let w = Input::new(Layout::Flipped, &[8], DType::F32, 0.5, 1.5, 25);
        let b = Input::new(Layout::Strided, &[8], DType::F32, -1.0, 1.0, 26);
        let (hw, hb) = (w.host(), b.host());
        let h = inp.host();
        let t = tol(DType::F32).times(20.0);
        check(
            &format!("layer_norm -1 {layout:?}"),
            || inp.tensor().layer_norm(-1, None, None, eps),
            &layer_norm_ref(&h, &[2], None, None, eps),
            t,
        );
        check(
            &format!("layer_norm -1 affine {layout:?}"),
            || {
                inp.tensor()
                    .layer_norm(-1, Some(&w.tensor()), Some(&b.tensor()), eps)
            },
            &layer_norm_ref(&h, &[2], Some(&hw), Some(&hb), eps),
            t,
        );
        check(
            &format!("layer_norm [1, 2] {layout:?}"),
            || inp.tensor().layer_norm([1, 2], None, None, eps),
            &layer_norm_ref(&h, &[1, 2], None, None, eps),
            t,
        );
        check(
            &format!("layer_norm axis 0 {layout:?}"),
            || inp.tensor().layer_norm(0, None, Some(&b.tensor()), eps),
            &layer_norm_ref(&h, &[0], None, Some(&hb), eps),
            t,
        );
        check(
            &format!("rms_norm -1 {layout:?}"),
            || inp.tensor().rms_norm(-1, Some(&w.tensor()), eps),
            &rms_norm_ref(&h, &[2], Some(&hw), eps),
            t,
        );
        check(
            &format!("rms_norm 1 {layout:?}"),
            || inp.tensor().rms_norm(1, None, eps),
            &rms_norm_ref(&h, &[1], None, eps),
            t,
        );
    }
}

fn cross_entropy_ref(x: &NdArray, t: &[usize]) -> NdArray {
    let lse = logsumexp_ref(x, &[1], false);
    NdArray::from_fn(&[x.shape[0]], |i| lse.at(i) - x.at(&[i[0], t[i[0]]]))
}

#[test]
fn cross_entropy_rows_and_single() {
    let mut rng = Rng::new(27);
    for layout in LAYOUTS {
        for (n, c) in [(5, 7), (1, 3), (8, 1), (3, 31)] {
            let inp = Input::new(layout, &[n, c], DType::F32, -4.0, 4.0, 28);
            let targets: Vec<usize> = (0..n).map(|_| rng.below(c)).collect();
            let tv: Vec<f64> = targets.iter().map(|t| *t as f64).collect();
            let tgt = Input::with_values(Layout::Flipped, &[n], DType::I32, &tv);
            let want = cross_entropy_ref(
                &inp.host(),
                &tgt.host()
                    .data
                    .iter()
                    .map(|v| *v as usize)
                    .collect::<Vec<_>>(),
            );
            check(
                &format!("cross_entropy [{n}, {c}] {layout:?}"),
                || inp.tensor().cross_entropy(&tgt.tensor()),
                &want,
                tol(DType::F32).times(4.0),
            );
            let mean = want.mean(&[0], false);
            check(
                &format!("cross_entropy mean [{n}, {c}] {layout:?}"),
                || inp.tensor().cross_entropy(&tgt.tensor()).mean(..),
                &mean,
                tol(DType::F32).times(4.0),
            );
        }
    }
    // 1-D logits with a rank-0 target give a rank-0 loss.
    let (x, h) = make(&[0.5, -1.0, 2.0], &[3], DType::F32);
    let t = Tensor::scalar(2i32, &test_device());
    let want = cross_entropy_ref(&h.reshape(&[1, 3]), &[2]).reshape(&[]);
    check(
        "cross_entropy 1-D",
        || x.cross_entropy(&t),
        &want,
        tol(DType::F32),
    );
    // Float targets are class indices too.
    let tf = Tensor::from_vec(vec![2.0f32], [1], &test_device());
    let want = cross_entropy_ref(&h.reshape(&[1, 3]), &[2]);
    check(
        "cross_entropy float target",
        || x.unsqueeze(0).cross_entropy(&tf),
        &want,
        tol(DType::F32),
    );
}

#[test]
fn cross_entropy_target_outside_classes_picks_nothing() {
    // Documented: a target outside 0..C contributes x[target] = 0, so the
    // loss is the row's logsumexp.
    let (x, h) = make(&[0.5, -1.0, 2.0, 1.0, 1.0, 1.0], &[2, 3], DType::F32);
    let t = Tensor::from_vec(vec![3i32, -1], [2], &test_device());
    check(
        "cross_entropy out of range",
        || x.cross_entropy(&t),
        &logsumexp_ref(&h, &[1], false),
        tol(DType::F32),
    );
}

#[test]
fn composites_in_half_precision_and_on_integers() {
    for dt in [DType::F16, DType::BF16] {
        for layout in [Layout::Contiguous, Layout::Permuted, Layout::Padded] {
            let inp = Input::new(layout, &[4, 9], dt, -3.0, 3.0, 29);
            let h = inp.host();
            let t = tol(dt).times(4.0);
            let what = format!("{dt} {layout:?}");
            check_dt(
                &format!("softmax {what}"),
                || inp.tensor().softmax(1),
                dt,
                &softmax_ref(&h, 1),
                t,
            );
            check_dt(
                &format!("log_softmax {what}"),
                || inp.tensor().log_softmax(0),
                dt,
                &log_softmax_ref(&h, 0),
                t,
            );
            check_dt(
                &format!("logsumexp {what}"),
                || inp.tensor().logsumexp(1, false),
                dt,
                &logsumexp_ref(&h, &[1], false),
                t,
            );
            check_dt(
                &format!("layer_norm {what}"),
                || inp.tensor().layer_norm(1, None, None, 1e-5),
                dt,
                &layer_norm_ref(&h, &[1], None, None, 1e-5),
                tol(dt).times(8.0),
            );
            check_dt(
                &format!("rms_norm {what}"),
                || inp.tensor().rms_norm(1, None, 1e-5),
                dt,
                &rms_norm_ref(&h, &[1], None, 1e-5),
                t,
            );
            check_dt(
                &format!("var {what}"),
                || inp.tensor().var(1, 1, false),
                dt,
                &var_ref(&h, &[1], 1, false),
                tol(dt).times(8.0),
            );
        }
    }
    // Integer inputs compute in F32.
    let inp = Input::new(Layout::Flipped, &[3, 5], DType::I32, -5.0, 5.0, 30);
    let h = inp.host();
    check_dt(
        "softmax i32",
        || inp.tensor().softmax(-1),
        DType::F32,
        &softmax_ref(&h, 1),
        tol(DType::F32),
    );
    check_dt(
        "var i32",
        || inp.tensor().var(1, 0, true),
        DType::F32,
        &var_ref(&h, &[1], 0, true),
        tol(DType::F32),
    );
}

#[test]
fn softmax_nan_and_inf_semantics() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let rows = [
        -inf, -inf, -inf, // all -inf: NaN (as PyTorch)
        0.0, -inf, 0.0, // -inf entries give 0
        1.0, nan, 2.0, // NaN poisons the row
        -inf, 3.0, -inf, // one finite entry: 1 there
    ];
    let softmax = [nan, nan, nan, 0.5, 0.0, 0.5, nan, nan, nan, 0.0, 1.0, 0.0];
    let log_softmax = [
        nan,
        nan,
        nan,
        -(2f64.ln()),
        -inf,
        -(2f64.ln()),
        nan,
        nan,
        nan,
        -inf,
        0.0,
        -inf,
    ];
    let lse = [-inf, 2f64.ln(), nan, 3.0];
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let (x, h) = make(&rows, &[4, 3], dt);
        let t = tol(dt);
        check(
            &format!("softmax {dt}"),
            || x.softmax(1),
            &NdArray::new(&[4, 3], softmax.to_vec()).round(dt),
            t,
        );
        check(
            &format!("log_softmax {dt}"),
            || x.log_softmax(1),
            &NdArray::new(&[4, 3], log_softmax.to_vec()).round(dt),
            t,
        );
        check(
            &format!("logsumexp {dt}"),
            || x.logsumexp(1, false),
            &NdArray::new(&[4], lse.to_vec()).round(dt),
            t,
        );
        // Along the other axis, through a transpose.
        let xt = h.permute(&[1, 0]);
        check(
            &format!("softmax of transpose {dt}"),
            || x.t().softmax(0),
            &softmax_ref(&xt, 0),
            t,
        );
    }
    // +inf: logsumexp is +inf.
    let (x, _) = make(&[1.0, inf], &[2], DType::F32);
    check(
        "logsumexp +inf",
        || x.logsumexp(0, false),
        &NdArray::scalar(inf),
        EXACT,
    );
}

#[test]
fn softmax_rows_sum_to_one_on_large_prime_rows() {
    let inp = Input::new(Layout::Strided, &[7, 257], DType::F32, -20.0, 20.0, 31);
    for mode in MODES {
        let s = values(&inp.tensor().softmax(-1).sum(-1), mode);
        for (i, v) in s.iter().enumerate() {
            assert!((v - 1.0).abs() < 1e-5, "{mode:?} row {i}: {v}");
        }
    }
    check(
        "softmax 7x257",
        || inp.tensor().softmax(-1),
        &softmax_ref(&inp.host(), 1),
        tol(DType::F32).times(4.0),
    );
}

/// Rows long enough that a GPU team spans a cluster of CTAs (sm_90) and,
/// for the weighted layer norm, a persistent grid loops over rows with it:
/// softmax, log_softmax, logsumexp and layer norm still match the host.
#[test]
fn long_rows_shared_by_several_ctas() {
    let eps = 1e-5;
    for (shape, dt) in [
        (vec![3, 40_000], DType::F32),
        (vec![2, 70_001], DType::F32),
        (vec![4, 50_000], DType::BF16),
    ] {
        let inp = Input::new(Layout::Contiguous, &shape, dt, -8.0, 8.0, 41);
        let h = inp.host();
        let t = tol(dt).times(8.0);
        check(
            &format!("softmax {shape:?} {dt}"),
            || inp.tensor().softmax(-1),
            &softmax_ref(&h, 1).round(dt),
            t,
        );
        check(
            &format!("log_softmax {shape:?} {dt}"),
            || inp.tensor().log_softmax(-1),
            &log_softmax_ref(&h, 1).round(dt),
            t,
        );
        check(
            &format!("logsumexp {shape:?} {dt}"),
            || inp.tensor().logsumexp(-1, false),
            &logsumexp_ref(&h, &[1], false).round(dt),
            t,
        );
    }
    let inp = Input::new(
        Layout::Contiguous,
        &[140, 16_500],
        DType::F32,
        -3.0,
        3.0,
        42,
    );
    let w = Input::new(Layout::Contiguous, &[16_500], DType::F32, 0.5, 1.5, 43);
    let b = Input::new(Layout::Contiguous, &[16_500], DType::F32, -1.0, 1.0, 44);
    check(
        "layer_norm 140x16500 affine",
        || {
            inp.tensor()
                .layer_norm(-1, Some(&w.tensor()), Some(&b.tensor()), eps)
        },
        &layer_norm_ref(&inp.host(), &[1], Some(&w.host()), Some(&b.host()), eps),
        tol(DType::F32).times(20.0),
    );
}
