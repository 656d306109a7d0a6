//! `norm` against an f64 host reference for p = 0, 1, 2, 3, inf, -inf and
//! Frobenius, through layouts, over one, several and all axes.

mod common;

use common::*;
use smelt::{DType, Fusion};

fn host_norm(x: &NdArray, p: f64, axes: &[usize], keepdim: bool) -> NdArray {
    let mut shape = x.shape.clone();
    for a in axes {
        shape[*a] = 1;
    }
    let mut acc = NdArray::full(&shape, f64::NAN);
    let mut vals: Vec<Vec<f64>> = vec![Vec::new(); acc.numel()];
    for i in 0..x.numel() {
        let mut c = unravel(i, &x.shape);
        for a in axes {
            c[*a] = 0;
        }
        let mut j = 0;
        for (d, v) in c.iter().enumerate() {
            j = j * shape[d] + v;
        }
        vals[j].push(x.data[i].abs());
    }
    for (j, v) in vals.iter().enumerate() {
        acc.data[j] = if v.iter().any(|x| x.is_nan()) {
            if p == 0.0 {
                v.iter().filter(|x| **x != 0.0).count() as f64
            } else {
                f64::NAN
            }
        } else if p == f64::INFINITY {
            v.iter().copied().fold(0.0, f64::max)
        } else if p == f64::NEG_INFINITY {
            v.iter().copied().fold(f64::INFINITY, f64::min)
        } else if p == 0.0 {
            v.iter().filter(|x| **x != 0.0).count() as f64
        } else {
            v.iter().map(|x| x.powf(p)).sum::<f64>().powf(1.0 / p)
        };
    }
    if keepdim {
        acc
    } else {
        let s: Vec<usize> = (0..shape.len())
            .filter(|d| !axes.contains(d))
            .map(|d| shape[d])
            .collect();
        acc.reshape(&s)
    }
}

#[test]
fn norms_match_the_host() {
    for dt in [DType::F32, DType::F16, DType::I32] {
        for layout in LAYOUTS {
            let x = Input::with_values(
                layout,
                &[3, 5, 7],
                dt,
                &[1.5, -2.0, 0.0, 3.25, -0.5, 4.0, 1.0, -7.0, 0.25, 2.5, -1.0],
            );
            for p in [0.0, 1.0, 2.0, 3.0, f64::INFINITY, f64::NEG_INFINITY] {
                for (axes, signed) in [
                    (vec![2usize], vec![-1isize]),
                    (vec![0, 2], vec![0, -1]),
                    (vec![0, 1, 2], vec![0, 1, 2]),
                ] {
                    for keepdim in [false, true] {
                        let want = host_norm(&x.host(), p, &axes, keepdim).round(dt.to_float());
                        let out = dt.to_float();
                        check_dt(
                            &format!("norm {dt} {layout:?} p={p} {axes:?} keepdim={keepdim}"),
                            || {
                                if keepdim {
                                    x.tensor().norm_keepdim(p, signed.clone())
                                } else {
                                    x.tensor().norm(p, signed.clone())
                                }
                            },
                            out,
                            &want,
                            tol(out),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn norms_of_nans_empty_axes_and_matrices() {
    let (x, hx) = make(&[1.0, f64::NAN, -3.0, 4.0], &[2, 2], DType::F32);
    for p in [1.0, 2.0, f64::INFINITY] {
        let got = values(&x.norm(p, 1), Fusion::On);
        assert!(got[0].is_nan(), "p={p}: NaN propagates");
        assert_eq!(got[1], host_norm(&hx, p, &[1], false).data[1], "p={p}");
    }
    let e = smelt::Tensor::zeros([3, 0], DType::F32, &test_device());
    for p in [0.0, 1.0, 2.0, f64::INFINITY] {
        assert_eq!(e.norm(p, 1).to_vec::<f32>().unwrap(), vec![0.0; 3], "p={p}");
    }
    let (m, hm) = make(
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        &[2, 2, 2],
        DType::F32,
    );
    let want = host_norm(&hm, 2.0, &[1, 2], false);
    assert_close(
        "fro",
        &values(&m.norm_fro(), Fusion::On),
        &want,
        tol(DType::F32),
    );
    // One reduction kernel, abs and square fused in.
    m.realize().unwrap();
    assert_eq!(m.norm(2.0, ..).schedule(Fusion::On).items.len(), 1);
}
