//! Movement ops (reshape, permute, transpose, t, slice with `s!`, narrow,
//! flip, broadcast_to/expand, squeeze/unsqueeze, flatten, pad) against the
//! host reference, on views of every layout; and creation functions.
//! Movement ops never run a kernel.

// Slices with negative steps run from a high bound to a low one.
#![allow(clippy::reversed_empty_ranges)]

mod common;

use common::*;
use smelt::{s, DType, NewAxis, SliceArg, Tensor};

fn iota(shape: &[usize]) -> (Tensor, NdArray) {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
    make(&v, shape, DType::F32)
}

/// The host reference itself, against values Python prints.
#[test]
fn reference_helpers_match_python() {
    // range(5)[a:b:c]
    assert_eq!(py_slice(None, None, -1, 5), vec![4, 3, 2, 1, 0]);
    assert_eq!(py_slice(Some(10), Some(0), -3, 5), vec![4, 1]);
    assert_eq!(py_slice(Some(-2), None, 1, 5), vec![3, 4]);
    assert_eq!(py_slice(Some(1), Some(7), 2, 5), vec![1, 3]);
    assert_eq!(py_slice(Some(-100), Some(100), 4, 5), vec![0, 4]);
    assert_eq!(py_slice(Some(3), Some(1), 1, 5), Vec::<usize>::new());
    assert_eq!(py_slice(None, Some(-6), -1, 5), vec![4, 3, 2, 1, 0]);
    assert_eq!(py_slice(Some(-1), Some(-3), -1, 5), vec![4, 3]);
    assert_eq!(py_slice(None, None, 2, 0), Vec::<usize>::new());
    let h = NdArray::new(&[2, 3], (0..6).map(|v| v as f64).collect());
    assert_eq!(h.permute(&[1, 0]).data, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(h.flip(&[1]).data, vec![2.0, 1.0, 0.0, 5.0, 4.0, 3.0]);
    assert_eq!(h.sum(&[0], false).data, vec![3.0, 5.0, 7.0]);
    assert_eq!(h.max(&[1], true).shape, vec![2, 1]);
    assert_eq!(
        h.pad(&[(1, 0), (0, 1)], 9.0).data,
        vec![9.0, 9.0, 9.0, 9.0, 0.0, 1.0, 2.0, 9.0, 3.0, 4.0, 5.0, 9.0]
    );
    assert_eq!(
        h.slice(s![.., NewAxis, ..;-2]).data,
        vec![2.0, 0.0, 5.0, 3.0]
    );
    assert_eq!(h.slice(s![.., NewAxis, ..;-2]).shape, vec![2, 1, 2]);
    let v = NdArray::new(&[3], vec![1.0, 2.0, 3.0]);
    assert_eq!(h.matmul(&v.reshape(&[3, 1])).data, vec![8.0, 26.0]);
}

#[test]
fn reshape_contiguous_and_inferred() {
    let (x, h) = iota(&[2, 3, 4]);
    let cases: Vec<(Vec<isize>, Vec<usize>)> = vec![
        (vec![4, 6], vec![4, 6]),
        (vec![24], vec![24]),
        (vec![-1, 2], vec![12, 2]),
        (vec![2, -1, 3], vec![2, 4, 3]),
        (vec![1, 2, 1, 12, 1], vec![1, 2, 1, 12, 1]),
        (vec![2, 3, 4], vec![2, 3, 4]),
    ];
    for (arg, shape) in cases {
        check(
            &format!("reshape {arg:?}"),
            || x.reshape(arg.clone()),
            &h.reshape(&shape),
            EXACT,
        );
    }
    // Rank 0 <-> one element.
    let (s, _) = make(&[7.0], &[], DType::F32);
    check(
        "scalar -> [1, 1]",
        || s.reshape([1, 1]),
        &NdArray::new(&[1, 1], vec![7.0]),
        EXACT,
    );
    let (one, _) = make(&[7.0], &[1, 1], DType::F32);
    check(
        "[1, 1] -> scalar",
        || one.reshape([0usize; 0]),
        &NdArray::scalar(7.0),
        EXACT,
    );
    // Zero-size.
    let (z, _) = make(&[], &[0, 4], DType::F32);
    check(
        "[0, 4] -> [2, 0, 3]",
        || z.reshape([2, 0, 3]),
        &NdArray::new(&[2, 0, 3], vec![]),
        EXACT,
    );
}

#[test]
fn reshape_of_every_layout() {
    // Non-contiguous views that merge (permuted pairs), split, or cannot
    // be expressed with strides and stack a view.
    let targets: Vec<Vec<usize>> = vec![
        vec![60],
        vec![3, 20],
        vec![6, 10],
        vec![5, 4, 3],
        vec![2, 2, 15],
        vec![1, 60, 1],
    ];
    for layout in LAYOUTS {
        let inp = Input::new(layout, &[3, 4, 5], DType::F32, -9.0, 9.0, 70);
        for t in &targets {
            check(
                &format!("reshape {layout:?} -> {t:?}"),
                || inp.tensor().reshape(t.clone()),
                &inp.host().reshape(t),
                EXACT,
            );
            // A view of the reshaped view.
            let p: Vec<usize> = (0..t.len()).rev().collect();
            check(
                &format!("reshape {layout:?} -> {t:?} -> permute -> reshape"),
                || {
                    inp.tensor()
                        .reshape(t.clone())
                        .permute(p.clone())
                        .reshape([-1])
                },
                &inp.host().reshape(t).permute(&p).reshape(&[60]),
                EXACT,
            );
        }
    }
}

#[test]
fn permute_transpose_t() {
    let (x, h) = iota(&[2, 3, 4]);
    for perm in [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ] {
        check(
            &format!("permute {perm:?}"),
            || x.permute(perm),
            &h.permute(&perm),
            EXACT,
        );
    }
    check(
        "permute negative",
        || x.permute([-1, 0, -2]),
        &h.permute(&[2, 0, 1]),
        EXACT,
    );
    check(
        "transpose 0 2",
        || x.transpose(0, 2),
        &h.permute(&[2, 1, 0]),
        EXACT,
    );
    check(
        "transpose -1 -2",
        || x.transpose(-1, -2),
        &h.permute(&[0, 2, 1]),
        EXACT,
    );
    let (m, hm) = iota(&[3, 5]);
    check("t 2-D", || m.t(), &hm.permute(&[1, 0]), EXACT);
    check("t t", || m.t().t(), &hm, EXACT);
    let (v, hv) = iota(&[4]);
    check("t 1-D", || v.t(), &hv, EXACT);
    let (s, hs) = make(&[3.0], &[], DType::F32);
    check("t 0-D", || s.t(), &hs, EXACT);
    // Rank 7.
    let (r7, h7) = iota(&[2, 1, 3, 1, 2, 2, 1]);
    let p = [6, 2, 0, 5, 1, 4, 3];
    check("permute rank 7", || r7.permute(p), &h7.permute(&p), EXACT);
}

/// Slicing cases: Python semantics including clamping, negative bounds,
/// negative steps, integer indices, new axes and empty results.
fn slice_cases() -> Vec<Vec<SliceArg>> {
    vec![
        s![1..3],
        s![..;2],
        s![..;-1],
        s![-2..],
        s![..-1],
        s![1..7;2],
        s![5..1;-1],
        s![10..0;-3],
        s![-1..;-2],
        s![2],
        s![-1],
        s![.., 1],
        s![.., -2..;-1],
        s![NewAxis, ..],
        s![.., NewAxis, 0],
        s![1..=2],
        s![0..=-1],
        s![3..1],
        s![..;-2, 1..;3],
        s![1usize..4usize, 2i64..],
        s![.., .., ..;-1],
        s![0, 0, 0],
        s![-100..100;4, 2..2],
        s![.., 6..;-2, NewAxis],
    ]
}

#[test]
fn slice_every_case_every_layout() {
    for layout in LAYOUTS {
        let inp = Input::new(layout, &[5, 7, 3], DType::F32, -9.0, 9.0, 71);
        for args in slice_cases() {
            let want = inp.host().slice(&args);
            check(
                &format!("slice {args:?} {layout:?}"),
                || inp.tensor().slice(args.clone()),
                &want,
                EXACT,
            );
        }
    }
}

#[test]
fn slice_macro_builds_numpy_style_args() {
    let r = |start: Option<isize>, end: Option<isize>, step: isize| SliceArg::Range {
        start,
        end,
        step,
    };
    assert_eq!(s![1..7;2], vec![r(Some(1), Some(7), 2)]);
    assert_eq!(s![..], vec![r(None, None, 1)]);
    assert_eq!(s![..;-1], vec![r(None, None, -1)]);
    assert_eq!(s![-2..], vec![r(Some(-2), None, 1)]);
    assert_eq!(s![..3], vec![r(None, Some(3), 1)]);
    assert_eq!(s![1..=2], vec![r(Some(1), Some(3), 1)]);
    assert_eq!(s![-3..=-2], vec![r(Some(-3), Some(-1), 1)]);
    assert_eq!(s![0..=-1], vec![r(Some(0), None, 1)]);
    assert_eq!(s![4, -1], vec![SliceArg::Index(4), SliceArg::Index(-1)]);
    assert_eq!(s![NewAxis, ..], vec![SliceArg::NewAxis, r(None, None, 1)]);
    assert_eq!(
        s![.., 5..;-2,],
        vec![r(None, None, 1), r(Some(5), None, -2)]
    );
}

#[test]
fn slice_chains() {
    let (x, h) = iota(&[9, 8]);
    let want = h
        .slice(s![1..;2, ..;-1])
        .slice(s![..;-1, 1..6;2])
        .slice(s![1]);
    check(
        "slice of slice of slice",
        || {
            x.slice(s![1..;2, ..;-1])
                .slice(s![..;-1, 1..6;2])
                .slice(s![1])
        },
        &want,
        EXACT,
    );
    // A view of a zero-size slice.
    let want = h.slice(s![3..3]).permute(&[1, 0]);
    check(
        "empty slice permuted",
        || x.slice(s![3..3]).t(),
        &want,
        EXACT,
    );
    // A rank-0 result.
    check(
        "x[2, -1]",
        || x.slice(s![2, -1]),
        &NdArray::scalar(h.at(&[2, 7])),
        EXACT,
    );
}

#[test]
fn narrow_and_flip() {
    for layout in LAYOUTS {
        let inp = Input::new(layout, &[4, 6, 3], DType::I32, -50.0, 50.0, 72);
        let h = inp.host();
        check(
            &format!("narrow 1 {layout:?}"),
            || inp.tensor().narrow(1, 2, 3),
            &h.narrow(1, 2, 3),
            EXACT,
        );
        check(
            &format!("narrow -1 {layout:?}"),
            || inp.tensor().narrow(-1, 1, 2),
            &h.narrow(2, 1, 2),
            EXACT,
        );
        check(
            &format!("narrow empty {layout:?}"),
            || inp.tensor().narrow(0, 4, 0),
            &h.narrow(0, 4, 0),
            EXACT,
        );
        for axes in [vec![0isize], vec![1], vec![-1], vec![0, 2], vec![2, 1, 0]] {
            let norm: Vec<usize> = axes.iter().map(|a| ax(*a, 3)).collect();
            check(
                &format!("flip {axes:?} {layout:?}"),
                || inp.tensor().flip(axes.clone()),
                &h.flip(&norm),
                EXACT,
            );
        }
        check(
            &format!("flip all {layout:?}"),
            || inp.tensor().flip(..),
            &h.flip(&[0, 1, 2]),
            EXACT,
        );
        check(
            &format!("flip flip {layout:?}"),
            || inp.tensor().flip(1).flip(1),
            &h,
            EXACT,
        );
    }
}

#[test]
fn broadcast_to_and_expand() {
    let cases: Vec<(Vec<usize>, Vec<usize>)> = vec![
        (vec![3, 1], vec![2, 3, 4]),
        (vec![], vec![2, 2]),
        (vec![1], vec![0]),
        (vec![1, 4], vec![5, 4]),
        (vec![2, 1, 3], vec![2, 1, 2, 5, 3]),
        (vec![3], vec![3]),
    ];
    for (from, to) in cases {
        for layout in [Layout::Contiguous, Layout::Flipped, Layout::Strided] {
            let inp = Input::new(layout, &from, DType::F32, -9.0, 9.0, 73);
            check(
                &format!("broadcast_to {from:?} -> {to:?} {layout:?}"),
                || inp.tensor().broadcast_to(to.clone()),
                &inp.host().broadcast_to(&to),
                EXACT,
            );
            check(
                &format!("expand {from:?} -> {to:?} {layout:?}"),
                || inp.tensor().expand(to.clone()),
                &inp.host().broadcast_to(&to),
                EXACT,
            );
        }
    }
    // Expanding a broadcast view, then slicing it.
    let (x, h) = iota(&[3, 1]);
    let want = h
        .broadcast_to(&[3, 4])
        .broadcast_to(&[2, 3, 4])
        .slice(s![.., ..;-1, 1..3]);
    check(
        "expand expand slice",
        || {
            x.expand([3, 4])
                .expand([2, 3, 4])
                .slice(s![.., ..;-1, 1..3])
        },
        &want,
        EXACT,
    );
}

#[test]
fn squeeze_unsqueeze_flatten() {
    for layout in LAYOUTS {
        let inp = Input::new(layout, &[1, 3, 1, 4], DType::F32, -9.0, 9.0, 74);
        let h = inp.host();
        check(
            &format!("squeeze 0 {layout:?}"),
            || inp.tensor().squeeze(0),
            &h.reshape(&[3, 1, 4]),
            EXACT,
        );
        check(
            &format!("squeeze [0, -2] {layout:?}"),
            || inp.tensor().squeeze([0, -2]),
            &h.reshape(&[3, 4]),
            EXACT,
        );
        check(
            &format!("squeeze_all {layout:?}"),
            || inp.tensor().squeeze_all(),
            &h.reshape(&[3, 4]),
            EXACT,
        );
        for (a, shape) in [
            (0isize, vec![1, 1, 3, 1, 4]),
            (2, vec![1, 3, 1, 1, 4]),
            (4, vec![1, 3, 1, 4, 1]),
            (-1, vec![1, 3, 1, 4, 1]),
            (-5, vec![1, 1, 3, 1, 4]),
        ] {
            check(
                &format!("unsqueeze {a} {layout:?}"),
                || inp.tensor().unsqueeze(a),
                &h.reshape(&shape),
                EXACT,
            );
        }
        check(
            &format!("flatten {layout:?}"),
            || inp.tensor().flatten(),
            &h.reshape(&[12]),
            EXACT,
        );
        check(
            &format!("flatten_dims 1..=2 {layout:?}"),
            || inp.tensor().flatten_dims(1, 2),
            &h.reshape(&[1, 3, 4]),
            EXACT,
        );
        check(
            &format!("flatten_dims -2..=-1 {layout:?}"),
            || inp.tensor().flatten_dims(-2, -1),
            &h.reshape(&[1, 3, 4]),
            EXACT,
        );
    }
    let (s, _) = make(&[2.0], &[], DType::F32);
    check(
        "flatten rank 0",
        || s.flatten(),
        &NdArray::new(&[1], vec![2.0]),
        EXACT,
    );
    check(
        "squeeze_all rank 0",
        || s.squeeze_all(),
        &NdArray::scalar(2.0),
        EXACT,
    );
    check(
        "unsqueeze rank 0",
        || s.unsqueeze(0),
        &NdArray::new(&[1], vec![2.0]),
        EXACT,
    );
}

#[test]
fn pad_zero_and_constant_every_layout() {
    let pads = [(1, 2), (0, 1), (2, 0)];
    for layout in LAYOUTS {
        for dt in [DType::F32, DType::I32, DType::F16] {
            let inp = Input::new(layout, &[3, 2, 4], dt, -9.0, 9.0, 75);
            let h = inp.host();
            for value in [0.0f64, 1.5, -7.0] {
                let value = if dt == DType::I32 {
                    value.trunc()
                } else {
                    value
                };
                check_dt(
                    &format!("pad {value} {dt} {layout:?}"),
                    || inp.tensor().pad(&pads, value),
                    dt,
                    &h.pad(&pads, value),
                    EXACT,
                );
            }
        }
    }
}

#[test]
fn pad_compositions() {
    let (x, h) = iota(&[3, 4]);
    let p1 = [(1, 1), (2, 0)];
    let p2 = [(0, 2), (1, 1)];
    check(
        "pad of pad",
        || x.pad(&p1, 0.0).pad(&p2, 0.0),
        &h.pad(&p1, 0.0).pad(&p2, 0.0),
        EXACT,
    );
    check(
        "pad 5 of pad 0",
        || x.pad(&p1, 0.0).pad(&p2, 5.0),
        &h.pad(&p1, 0.0).pad(&p2, 5.0),
        EXACT,
    );
    check(
        "slice into the padding",
        || x.pad(&p1, 0.0).slice(s![..;-1, 1..;2]),
        &h.pad(&p1, 0.0).slice(s![..;-1, 1..;2]),
        EXACT,
    );
    check(
        "permute, pad, reshape",
        || x.t().pad(&p2, 0.0).reshape([-1]),
        &h.permute(&[1, 0]).pad(&p2, 0.0).reshape(&[30]),
        EXACT,
    );
    check(
        "pad, expand",
        || x.narrow(0, 0, 1).pad(&[(0, 0), (1, 1)], 0.0).expand([3, 6]),
        &h.narrow(0, 0, 1)
            .pad(&[(0, 0), (1, 1)], 0.0)
            .broadcast_to(&[3, 6]),
        EXACT,
    );
    // Padding a computed value: the padding must not be computed as
    // exp(0) = 1.
    let want = h.map(|v| (v / 10.0).exp()).pad(&p1, 0.0);
    check(
        "pad of exp",
        || (&x / 10.0).exp().pad(&p1, 0.0),
        &want,
        tol(DType::F32),
    );
    let want = h.map(|v| (v / 10.0).exp()).pad(&p1, -1.0).map(|v| v * 2.0);
    check(
        "pad -1 of exp, times 2",
        || (&x / 10.0).exp().pad(&p1, -1.0) * 2.0,
        &want,
        tol(DType::F32),
    );
    // A zero-size axis padded to a non-empty one.
    let (z, hz) = make(&[], &[0, 2], DType::F32);
    check(
        "pad empty",
        || z.pad(&[(1, 1), (0, 0)], 3.0),
        &hz.pad(&[(1, 1), (0, 0)], 3.0),
        EXACT,
    );
}

#[test]
fn views_of_computed_values() {
    for layout in LAYOUTS {
        let inp = Input::new(layout, &[4, 6], DType::F32, -2.0, 2.0, 76);
        let h = inp.host().map(|v| v * 3.0 + 1.0);
        let want = h.permute(&[1, 0]).slice(s![1..;2, ..;-1]).reshape(&[12]);
        check(
            &format!("(3x + 1).t()[1::2, ::-1].flatten() {layout:?}"),
            || {
                (inp.tensor() * 3.0 + 1.0)
                    .t()
                    .slice(s![1..;2, ..;-1])
                    .flatten()
            },
            &want,
            tol(DType::F32),
        );
        // A view of a computed value consumed by another op.
        let want = h
            .flip(&[0])
            .zip(&h.narrow(1, 0, 1), |a, b| a - b)
            .map(f64::exp);
        check(
            &format!("exp(flip(y) - y[:, :1]) {layout:?}"),
            || {
                let y = inp.tensor() * 3.0 + 1.0;
                (y.flip(0) - y.narrow(1, 0, 1)).exp()
            },
            &want,
            tol(DType::F32),
        );
    }
}

#[test]
fn movement_ops_run_no_kernel() {
    let (x, _) = iota(&[4, 6]);
    let k0 = smelt::stats::kernels_run();
    let v = x
        .reshape([2, 12])
        .permute([1, 0])
        .slice(s![1..;2, ..;-1])
        .flip(0)
        .unsqueeze(0)
        .expand([3, 6, 2])
        .narrow(2, 1, 1)
        .squeeze(2)
        .pad(&[(1, 0), (0, 2)], 0.0)
        .flatten()
        .reshape([4, 2, 4])
        .transpose(0, 2);
    assert_eq!(
        smelt::stats::kernels_run(),
        k0,
        "recording views ran a kernel"
    );
    for mode in MODES {
        assert!(
            v.schedule(mode).items.is_empty(),
            "{mode:?}: a view needs no kernel"
        );
        v.realize_with(mode).unwrap();
    }
    assert_eq!(
        smelt::stats::kernels_run(),
        k0,
        "realizing a view ran a kernel"
    );
    assert!(v.is_realized());
}

// ---------------------------------------------------------------------------
// Creation

#[test]
fn creation_functions() {
    let dev = test_device();
    let f = tol(DType::F32);
    check(
        "full",
        || Tensor::full([2, 3], 2.5, DType::F32, &dev),
        &NdArray::full(&[2, 3], 2.5),
        EXACT,
    );
    check_dt(
        "full i32 truncates",
        || Tensor::full([4], -2.7, DType::I32, &dev),
        DType::I32,
        &NdArray::full(&[4], -2.0),
        EXACT,
    );
    check(
        "zeros",
        || Tensor::zeros([3, 0, 2], DType::F16, &dev),
        &NdArray::new(&[3, 0, 2], vec![]),
        EXACT,
    );
    check(
        "ones",
        || Tensor::ones([5], DType::Bool, &dev),
        &NdArray::full(&[5], 1.0),
        EXACT,
    );
    check(
        "scalar",
        || Tensor::scalar(4.5f32, &dev),
        &NdArray::scalar(4.5),
        EXACT,
    );
    check_dt(
        "scalar i32",
        || Tensor::scalar(-3i32, &dev),
        DType::I32,
        &NdArray::scalar(-3.0),
        EXACT,
    );
    let (x, _) = iota(&[2, 2]);
    check(
        "zeros_like",
        || x.zeros_like(),
        &NdArray::full(&[2, 2], 0.0),
        EXACT,
    );
    check(
        "ones_like",
        || x.ones_like(),
        &NdArray::full(&[2, 2], 1.0),
        EXACT,
    );
    check(
        "full_like",
        || x.full_like(-1.0),
        &NdArray::full(&[2, 2], -1.0),
        EXACT,
    );
    // A constant used in arithmetic, broadcast and sliced.
    check(
        "full + slice",
        || {
            Tensor::full([4, 3], 2.0, DType::F32, &dev).slice(s![..;-2])
                * &x.narrow(0, 1, 1).narrow(1, 1, 1)
        },
        &NdArray::full(&[2, 3], 6.0),
        EXACT,
    );

    let ar = |s: f64, e: f64, st: f64| {
        let mut v = Vec::new();
        let mut i = 0;
        loop {
            let x = s + i as f64 * st;
            if (st > 0.0 && x >= e) || (st < 0.0 && x <= e) {
                break;
            }
            v.push(x);
            i += 1;
        }
        NdArray::new(&[v.len()], v)
    };
    check(
        "arange 0..5",
        || Tensor::arange(0.0, 5.0, 1.0, DType::F32, &dev),
        &ar(0.0, 5.0, 1.0),
        EXACT,
    );
    check(
        "arange 0.5..2 by 0.25",
        || Tensor::arange(0.5, 2.0, 0.25, DType::F32, &dev),
        &ar(0.5, 2.0, 0.25),
        f,
    );
    check(
        "arange 5..-3 by -2",
        || Tensor::arange(5.0, -3.0, -2.0, DType::I32, &dev),
        &ar(5.0, -3.0, -2.0),
        EXACT,
    );
    check(
        "arange empty",
        || Tensor::arange(3.0, 3.0, 1.0, DType::F32, &dev),
        &NdArray::new(&[0], vec![]),
        EXACT,
    );
    for n in [0usize, 1, 2, 5, 11] {
        let want = NdArray::from_fn(&[n], |i| {
            if n == 1 {
                -1.0
            } else {
                -1.0 + 3.0 * i[0] as f64 / (n - 1) as f64
            }
        });
        check(
            &format!("linspace {n}"),
            || Tensor::linspace(-1.0, 2.0, n, DType::F32, &dev),
            &want,
            f,
        );
    }
    for n in [0usize, 1, 4] {
        check(
            &format!("eye {n}"),
            || Tensor::eye(n, DType::I32, &dev),
            &NdArray::from_fn(&[n, n], |c| (c[0] == c[1]) as u8 as f64),
            EXACT,
        );
    }
}

#[test]
fn random_tensors_are_seeded() {
    let dev = test_device();
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let a = Tensor::rand([1000], dt, 7, &dev).to_vec::<f64>().unwrap();
        let b = Tensor::rand([1000], dt, 7, &dev).to_vec::<f64>().unwrap();
        let c = Tensor::rand([1000], dt, 8, &dev).to_vec::<f64>().unwrap();
        assert_eq!(a, b, "same seed, same numbers");
        assert_ne!(a, c, "different seeds, different numbers");
        assert!(a.iter().all(|v| (0.0..=1.0).contains(v)), "rand in [0, 1]");
        let mean = a.iter().sum::<f64>() / 1000.0;
        assert!((mean - 0.5).abs() < 0.05, "rand mean {mean}");
    }
    let z = Tensor::randn([100, 100], DType::F32, 3, &dev);
    let z2 = Tensor::randn([100, 100], DType::F32, 3, &dev);
    assert_eq!(z.to_vec::<f32>().unwrap(), z2.to_vec::<f32>().unwrap());
    for mode in MODES {
        let m = values(&z.mean(..), mode)[0];
        let s = values(&z.std(.., 1, false), mode)[0];
        assert!(
            m.abs() < 0.05 && (s - 1.0).abs() < 0.05,
            "{mode:?}: randn mean {m} std {s}"
        );
    }
    // A prefix of a larger draw is the smaller draw (counter-based).
    let big = Tensor::randn([10], DType::F32, 9, &dev)
        .to_vec::<f32>()
        .unwrap();
    let small = Tensor::randn([4], DType::F32, 9, &dev)
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(&big[..4], &small[..]);
}

#[test]
fn readback_conversions() {
    let dev = test_device();
    let x = Tensor::from_vec(vec![1.5f32, -2.5, 0.0], [3], &dev);
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.5, -2.5, 0.0]);
    assert_eq!(x.to_vec::<i32>().unwrap(), vec![1, -2, 0]);
    assert_eq!(x.to_vec::<bool>().unwrap(), vec![true, true, false]);
    let b = Tensor::from_vec(vec![true, false], [2], &dev);
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![1.0, 0.0]);
    assert_eq!(b.dtype(), DType::Bool);
    let s = Tensor::from_slice(&[4i32], [0usize; 0], &dev);
    assert_eq!(s.to_scalar::<i32>().unwrap(), 4);
    assert_eq!(s.ndim(), 0);
    assert_eq!(x.sum(..).to_scalar::<f32>().unwrap(), -1.0);
    assert_eq!(Tensor::ones([2, 3], DType::F32, &dev).numel(), 6);
    // Reading a view realizes it under the default mode.
    assert_eq!(
        x.flip(0).to_vec::<f32>().unwrap(),
        vec![0.0, -2.5, 1.5],
        "flip read"
    );
}

/// Pads of whole vectors along the last axis (8 before, 4 after a row of
/// 16): the GPU reads such rows with vector loads whose mask holds for
/// all lanes or none, in elementwise, reduce, multi-reduce and scan
/// kernels alike.
#[test]
fn pads_of_whole_vectors_along_the_last_axis_in_every_kernel_kind() {
    let pads = [(0, 0), (8, 4)];
    for layout in LAYOUTS {
        for dt in [DType::F32, DType::F16] {
            let inp = Input::new(layout, &[5, 16], dt, -3.0, 3.0, 76);
            for value in [0.0f64, 1.5] {
                let h = inp.host().pad(&pads, value);
                let what = format!("pad {value} {dt} {layout:?}");
                let t = tol(dt).times(4.0);
                check(
                    &format!("{what} + 1"),
                    || inp.tensor().pad(&pads, value).cast(DType::F32) + 1.0,
                    &h.map(|v| v + 1.0),
                    t,
                );
                check(
                    &format!("{what} sum"),
                    || inp.tensor().pad(&pads, value).cast(DType::F32).sum(-1),
                    &h.sum(&[1], false),
                    t,
                );
                let e = h.map(f64::exp);
                let softmax = NdArray::from_fn(&h.shape, |c| {
                    e.at(c) / (0..h.shape[1]).map(|j| e.at(&[c[0], j])).sum::<f64>()
                });
                check(
                    &format!("{what} softmax"),
                    || inp.tensor().pad(&pads, value).cast(DType::F32).softmax(-1),
                    &softmax,
                    t,
                );
                let cumsum = NdArray::from_fn(&h.shape, |c| {
                    (0..=c[1]).map(|j| h.at(&[c[0], j])).sum::<f64>()
                });
                check(
                    &format!("{what} cumsum"),
                    || inp.tensor().pad(&pads, value).cast(DType::F32).cumsum(-1),
                    &cumsum,
                    t,
                );
            }
        }
    }
}

/// A select on a padded mask next to unmasked vector loads: where the
/// mask's range is aligned to the vector width (4 lanes of `f32`) the GPU
/// evaluates it once per vector, where it starts inside a vector (pad 2)
/// once per lane, both as the host does.
#[test]
fn selects_on_padded_masks_aligned_or_not_to_vectors() {
    for layout in LAYOUTS {
        let x = Input::new(layout, &[3, 8], DType::F32, -3.0, 3.0, 81);
        let y = Input::new(Layout::Contiguous, &[3, 8], DType::F32, -3.0, 3.0, 82);
        for before in [2usize, 4] {
            let pads = [(0, 0), (before, 0)];
            let (hx, hy) = (x.host(), y.host());
            let want = NdArray::from_fn(
                &[3, 8],
                |c| {
                    if c[1] >= before {
                        hx.at(c)
                    } else {
                        hy.at(c)
                    }
                },
            );
            check(
                &format!("where on a mask padded by {before}, {layout:?}"),
                || {
                    let mask =
                        Tensor::ones([3, 8 - before], DType::Bool, &test_device()).pad(&pads, 0.0);
                    mask.where_(x.tensor(), y.tensor())
                },
                &want,
                EXACT,
            );
        }
    }
}
