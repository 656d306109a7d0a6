//! Reductions (sum, max, min, prod, mean, argmax, argmin) against host
//! references: one, several, negative and all axes, keepdim, every layout,
//! every dtype, NaN/inf, rank 0, zero-size and rank-6 inputs, under both
//! fusion modes.

mod common;

use common::*;
use smelt::{DType, ReduceOp, Tensor};

#[derive(Clone, Copy, Debug, PartialEq)]
enum R {
    Sum,
    Max,
    Min,
    Prod,
    Mean,
}

const ALL_R: [R; 5] = [R::Sum, R::Max, R::Min, R::Prod, R::Mean];

fn apply(r: R, x: &Tensor, axes: Option<&[isize]>, keep: bool) -> Tensor {
    match (axes, keep) {
        (Some(a), false) => match r {
            R::Sum => x.sum(a),
            R::Max => x.max(a),
            R::Min => x.min(a),
            R::Prod => x.prod(a),
            R::Mean => x.mean(a),
        },
        (Some(a), true) => match r {
            R::Sum => x.sum_keepdim(a),
            R::Max => x.max_keepdim(a),
            R::Min => x.min_keepdim(a),
            R::Prod => x.prod_keepdim(a),
            R::Mean => x.mean_keepdim(a),
        },
        (None, false) => match r {
            R::Sum => x.sum(..),
            R::Max => x.max(..),
            R::Min => x.min(..),
            R::Prod => x.prod(..),
            R::Mean => x.mean(..),
        },
        (None, true) => match r {
            R::Sum => x.sum_keepdim(..),
            R::Max => x.max_keepdim(..),
            R::Min => x.min_keepdim(..),
            R::Prod => x.prod_keepdim(..),
            R::Mean => x.mean_keepdim(..),
        },
    }
}

fn reference(r: R, x: &NdArray, axes: &[usize], keep: bool) -> NdArray {
    match r {
        R::Sum => x.sum(axes, keep),
        R::Max => x.max(axes, keep),
        R::Min => x.min(axes, keep),
        R::Prod => x.prod(axes, keep),
        R::Mean => x.mean(axes, keep),
    }
}

/// Result dtype for an input dtype (PyTorch: integer sums are int64).
fn out_dtype(r: R, dt: DType) -> DType {
    match (r, dt) {
        (R::Mean, _) => dt.to_float(),
        (R::Sum | R::Prod, _) if !dt.is_float() => DType::I64,
        _ => dt,
    }
}

fn norm_axes(axes: Option<&[isize]>, rank: usize) -> Vec<usize> {
    match axes {
        None => (0..rank).collect(),
        Some(a) => {
            let mut v: Vec<usize> = a.iter().map(|x| ax(*x, rank)).collect();
            v.sort_unstable();
            v
        }
    }
}

/// A shape and the axis lists it is reduced over (`None` is `..`).
type ShapeAxes = (Vec<usize>, Vec<Option<Vec<isize>>>);

fn shape_axes() -> Vec<ShapeAxes> {
    vec![
        (
            vec![4, 5, 3],
            vec![
                Some(vec![0]),
                Some(vec![1]),
                Some(vec![2]),
                Some(vec![-1]),
                Some(vec![0, 2]),
                Some(vec![-1, -3]),
                Some(vec![1, 0]),
                Some(vec![]),
                None,
            ],
        ),
        (vec![13], vec![Some(vec![0]), Some(vec![-1]), None]),
        (vec![1, 7], vec![Some(vec![0]), Some(vec![1])]),
        (vec![], vec![None, Some(vec![])]),
        (
            vec![2, 1, 3, 2, 1, 2],
            vec![Some(vec![1, 3, 5]), Some(vec![0, -2]), None],
        ),
        (vec![31, 2], vec![Some(vec![0]), Some(vec![1])]),
    ]
}

#[test]
fn reductions_f32_every_layout() {
    for r in ALL_R {
        let (lo, hi) = if r == R::Prod {
            (0.5, 1.5)
        } else {
            (-3.0, 3.0)
        };
        for (si, (shape, axes_list)) in shape_axes().into_iter().enumerate() {
            for layout in LAYOUTS {
                let inp = Input::new(layout, &shape, DType::F32, lo, hi, si as u64 + 40);
                for axes in &axes_list {
                    for keep in [false, true] {
                        let a = axes.as_deref();
                        let want = reference(r, &inp.host(), &norm_axes(a, shape.len()), keep);
                        check_dt(
                            &format!("{r:?} {shape:?} {layout:?} axes {a:?} keep {keep}"),
                            || apply(r, &inp.tensor(), a, keep),
                            DType::F32,
                            &want,
                            tol(DType::F32).times(4.0),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn reductions_other_dtypes() {
    for dt in [DType::F16, DType::BF16, DType::I32, DType::Bool] {
        for r in ALL_R {
            let (lo, hi) = match (r, dt) {
                (R::Prod, DType::I32) => (-2.0, 3.0),
                (R::Prod, _) => (0.5, 1.5),
                (_, DType::I32) => (-50.0, 50.0),
                _ => (-3.0, 3.0),
            };
            let out = out_dtype(r, dt);
            for layout in [Layout::Contiguous, Layout::Permuted, Layout::Padded] {
                let inp = Input::new(layout, &[4, 6, 3], dt, lo, hi, 5);
                for axes in [Some(&[1isize][..]), Some(&[0, -1][..]), None] {
                    let want = reference(r, &inp.host(), &norm_axes(axes, 3), false);
                    // Half sums accumulate in F32 and round once at the end.
                    let t = match out {
                        d if !d.is_float() => EXACT,
                        d => tol(d).times(2.0),
                    };
                    check_dt(
                        &format!("{r:?} {dt} {layout:?} axes {axes:?}"),
                        || apply(r, &inp.tensor(), axes, false),
                        out,
                        &want,
                        t,
                    );
                }
            }
        }
    }
}

#[test]
fn generic_reduce_entry_point() {
    let inp = Input::new(Layout::Flipped, &[3, 4], DType::F32, -1.0, 1.0, 3);
    check(
        "reduce(Max, [1], keepdim)",
        || inp.tensor().reduce(ReduceOp::Max, [1], true),
        &inp.host().max(&[1], true),
        EXACT,
    );
    check(
        "reduce(Sum, .., no keepdim)",
        || inp.tensor().reduce(ReduceOp::Sum, .., false),
        &inp.host().sum(&[0, 1], false),
        tol(DType::F32),
    );
}

#[test]
fn reductions_over_zero_size_axes() {
    for layout in [Layout::Contiguous, Layout::Permuted, Layout::Strided] {
        let inp = Input::new(layout, &[0, 3], DType::F32, -1.0, 1.0, 1);
        // Over the empty axis: the identity (sum 0, prod 1, mean NaN).
        check(
            "sum axis 0",
            || inp.tensor().sum(0),
            &NdArray::full(&[3], 0.0),
            EXACT,
        );
        check(
            "prod axis 0",
            || inp.tensor().prod(0),
            &NdArray::full(&[3], 1.0),
            EXACT,
        );
        check(
            "mean axis 0",
            || inp.tensor().mean(0),
            &NdArray::full(&[3], f64::NAN),
            EXACT,
        );
        check(
            "sum all",
            || inp.tensor().sum(..),
            &NdArray::scalar(0.0),
            EXACT,
        );
        // Over a non-empty axis of an empty tensor: an empty result.
        check(
            "sum axis 1",
            || inp.tensor().sum(1),
            &NdArray::new(&[0], vec![]),
            EXACT,
        );
        check(
            "max axis 1 keepdim",
            || inp.tensor().max_keepdim(1),
            &NdArray::new(&[0, 1], vec![]),
            EXACT,
        );
        check(
            "argmax axis 1",
            || inp.tensor().argmax(1),
            &NdArray::new(&[0], vec![]),
            EXACT,
        );
    }
    let (b, _) = make(&[], &[2, 0], DType::Bool);
    check_dt(
        "bool sum of empty rows",
        || b.sum(1),
        DType::I64,
        &NdArray::full(&[2], 0.0),
        EXACT,
    );
}

/// (name, op, keepdim) of each argmax/argmin variant.
type ArgCase = (&'static str, fn(&Tensor, isize) -> Tensor, bool);

fn arg_cases() -> Vec<ArgCase> {
    vec![
        ("argmax", Tensor::argmax, false),
        ("argmin", Tensor::argmin, false),
        ("argmax_keepdim", Tensor::argmax_keepdim, true),
        ("argmin_keepdim", Tensor::argmin_keepdim, true),
    ]
}

#[test]
fn argmax_argmin_every_layout_and_dtype() {
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool] {
        for (name, op, keep) in arg_cases() {
            let better: fn(f64, f64) -> bool = if name.starts_with("argmax") {
                |v, b| v > b
            } else {
                |v, b| v < b
            };
            for layout in LAYOUTS {
                // Few distinct values, so ties are common: the first wins.
                let inp = Input::new(layout, &[4, 5, 3], dt, -3.0, 3.0, 8);
                let inp = if dt.is_float() {
                    let h = inp.base_host.map(|x| x.round());
                    let mut i2 = inp.clone();
                    i2.base = tensor_of(&h, dt);
                    i2.base_host = h;
                    i2
                } else {
                    inp
                };
                for axis in [0isize, 1, 2, -1, -3] {
                    let want = inp.host().arg(ax(axis, 3), keep, better);
                    check_dt(
                        &format!("{name} {dt} {layout:?} axis {axis}"),
                        || op(&inp.tensor(), axis),
                        DType::I64,
                        &want,
                        EXACT,
                    );
                }
            }
        }
    }
}

#[test]
fn argmax_of_prime_length_rows_and_rank0_like() {
    let inp = Input::new(Layout::Strided, &[3, 97], DType::F32, -10.0, 10.0, 4);
    check(
        "argmax 97",
        || inp.tensor().argmax(1),
        &inp.host().arg(1, false, |v, b| v > b),
        EXACT,
    );
    let (one, _) = make(&[5.0], &[1], DType::F32);
    check(
        "argmin of one",
        || one.argmin(0),
        &NdArray::scalar(0.0),
        EXACT,
    );
}

// ---------------------------------------------------------------------------
// NaN and infinity

#[test]
fn max_and_min_propagate_nan() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let rows = [
        1.0, nan, 3.0, // NaN in the middle
        nan, -inf, inf, // NaN first
        -inf, -inf, -inf, // all -inf
        2.0, 1.0, 0.0, // plain
    ];
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for layout in [Layout::Contiguous, Layout::Permuted, Layout::Flipped] {
            let inp = Input::with_values(layout, &[4, 3], dt, &rows);
            let h = inp.host();
            let what = format!("{dt} {layout:?}");
            check(
                &format!("max {what}"),
                || inp.tensor().max(1),
                &h.max(&[1], false),
                EXACT,
            );
            check(
                &format!("min {what}"),
                || inp.tensor().min(1),
                &h.min(&[1], false),
                EXACT,
            );
            check(
                &format!("max0 {what}"),
                || inp.tensor().max(0),
                &h.max(&[0], false),
                EXACT,
            );
            check(
                &format!("sum {what}"),
                || inp.tensor().sum(1),
                &h.sum(&[1], false),
                tol(dt),
            );
            check(
                &format!("argmax {what}"),
                || inp.tensor().argmax(1),
                &h.arg(1, false, |v, b| v > b),
                EXACT,
            );
            check(
                &format!("argmin {what}"),
                || inp.tensor().argmin(0),
                &h.arg(0, false, |v, b| v < b),
                EXACT,
            );
        }
    }
    // Spelled out once, independently of the NdArray reference.
    let (x, _) = make(&rows, &[4, 3], DType::F32);
    for mode in MODES {
        let m = values(&x.max(1), mode);
        assert!(m[0].is_nan() && m[1].is_nan(), "{mode:?}: {m:?}");
        assert_eq!(&m[2..], &[-inf, 2.0], "{mode:?}");
        let s = values(&x.sum(1), mode);
        assert!(s[0].is_nan() && s[1].is_nan() && s[2] == -inf && s[3] == 3.0);
        assert_eq!(values(&x.argmax(1), mode), vec![1.0, 0.0, 0.0, 0.0]);
    }
}

#[test]
fn integer_extremes() {
    let (x, h) = make(
        &[i32::MIN as f64, i32::MAX as f64, -1.0, 0.0],
        &[2, 2],
        DType::I32,
    );
    check("max i32", || x.max(1), &h.max(&[1], false), EXACT);
    check("min i32", || x.min(0), &h.min(&[0], false), EXACT);
    check(
        "min all",
        || x.min(..),
        &NdArray::scalar(i32::MIN as f64),
        EXACT,
    );
    check(
        "max all",
        || x.max(..),
        &NdArray::scalar(i32::MAX as f64),
        EXACT,
    );
}

#[test]
fn reductions_feed_elementwise_and_each_other() {
    // Reductions whose results are broadcast back and reduced again.
    for layout in LAYOUTS {
        let inp = Input::new(layout, &[5, 6], DType::F32, -2.0, 2.0, 12);
        let h = inp.host();
        let m = h.max(&[1], true);
        let want = h.zip(&m, |x, m| x - m).sum(&[1], false).max(&[0], false);
        check(
            &format!("(x - max).sum(1).max(0) {layout:?}"),
            || {
                let x = inp.tensor();
                (&x - x.max_keepdim(1)).sum(1).max(0)
            },
            &want,
            tol(DType::F32),
        );
        let s0 = h.sum(&[0], true);
        let want = h.zip(&s0, |x, s| x * s).mean(&[0, 1], false);
        check(
            &format!("(x * x.sum(0)).mean() {layout:?}"),
            || {
                let x = inp.tensor();
                (&x * x.sum_keepdim(0)).mean(..)
            },
            &want,
            tol(DType::F32).times(4.0),
        );
    }
}
