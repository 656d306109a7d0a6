//! `any`, `all` and `count_nonzero` against a host reference on every
//! layout and dtype, over one, several and all axes, with NaN (nonzero)
//! and infinities, and empty axes (the identities: false, true, 0).

mod common;

use common::*;
use smelt::{DType, Tensor};

type Build = fn(&Tensor, &[isize], bool) -> Tensor;
type Fold = fn(f64, f64) -> f64;

/// Each op: name, host fold (from its identity) over "is nonzero" flags,
/// result dtype, build.
fn ops() -> [(&'static str, f64, Fold, DType, Build); 3] {
    [
        (
            "any",
            0.0,
            |a, x| (a != 0.0 || x != 0.0) as u8 as f64,
            DType::Bool,
            |t, a, k| {
                if k {
                    t.any_keepdim(a)
                } else {
                    t.any(a)
                }
            },
        ),
        (
            "all",
            1.0,
            |a, x| (a != 0.0 && x != 0.0) as u8 as f64,
            DType::Bool,
            |t, a, k| {
                if k {
                    t.all_keepdim(a)
                } else {
                    t.all(a)
                }
            },
        ),
        (
            "count_nonzero",
            0.0,
            |a, x| a + (x != 0.0) as u8 as f64,
            DType::I32,
            |t, a, k| {
                if k {
                    t.count_nonzero_keepdim(a)
                } else {
                    t.count_nonzero(a)
                }
            },
        ),
    ]
}

fn check_all_axes(x: &Input, what: &str) {
    let rank = x.shape.len() as isize;
    let mut axis_sets: Vec<Vec<isize>> = (0..rank).map(|a| vec![a]).collect();
    axis_sets.push(vec![-1]);
    axis_sets.push((0..rank).collect());
    if rank >= 3 {
        axis_sets.push(vec![0, 2]);
    }
    for (name, init, fold, dt, build) in ops() {
        for axes in &axis_sets {
            let norm: Vec<usize> = axes.iter().map(|a| ax(*a, rank as usize)).collect();
            for keep in [false, true] {
                // NaN is nonzero: the host folds flags, not values.
                let flags = x.host().map(|v| (v != 0.0) as u8 as f64);
                let want = flags.reduce(&norm, keep, init, fold);
                let label = format!("{name}({axes:?}, keepdim {keep}) {what}");
                check_dt(&label, || build(&x.tensor(), axes, keep), dt, &want, EXACT);
            }
        }
    }
}

#[test]
fn any_all_count_match_the_host_on_every_layout_and_dtype() {
    // Mostly zeros, so rows differ in whether any or all are nonzero.
    let vals = [
        0.0,
        0.0,
        1.5,
        0.0,
        f64::NAN,
        0.0,
        -2.0,
        0.0,
        f64::INFINITY,
        0.0,
        0.0,
        3.0,
        -0.0,
    ];
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool] {
        for layout in LAYOUTS {
            for shape in [vec![4, 7], vec![3, 5, 2]] {
                let x = Input::with_values(layout, &shape, dt, &vals);
                check_all_axes(&x, &format!("{dt} {layout:?} {shape:?}"));
            }
        }
    }
}

#[test]
fn rows_of_all_ones_all_zeros_long_rows_and_empty_axes() {
    let cases: [(&[usize], &[f64]); 6] = [
        (&[3, 8], &[1.0]),
        (&[3, 8], &[0.0]),
        (&[2, 3000], &[0.0, 0.0, 0.0, 4.0, 0.0]),
        (&[3, 0], &[1.0]),
        (&[0, 5], &[1.0]),
        (&[1], &[f64::NAN]),
    ];
    for (shape, vals) in cases {
        for layout in [Layout::Contiguous, Layout::Permuted] {
            let x = Input::with_values(layout, shape, DType::F32, vals);
            check_all_axes(&x, &format!("{layout:?} {shape:?} of {vals:?}"));
        }
    }
    // A huge row goes through the split reduction.
    let n: usize = 1 << 21;
    let y = Tensor::zeros([n], DType::F32, &test_device()).exp() - 1.0;
    assert_eq!(y.count_nonzero(..).to_vec::<i32>().unwrap(), vec![0]);
    assert_eq!(y.any(..).to_vec::<bool>().unwrap(), vec![false]);
    let ones = Tensor::ones([n], DType::F16, &test_device());
    assert_eq!(
        ones.count_nonzero(0).to_vec::<i32>().unwrap(),
        vec![n as i32]
    );
    assert_eq!(ones.all(0).to_vec::<bool>().unwrap(), vec![true]);
}

#[test]
#[should_panic(expected = "any: axis 2 is out of range for a tensor of shape [2, 3] (rank 2)")]
fn any_with_a_bad_axis_panics() {
    let _ = Tensor::zeros([2, 3], DType::F32, &test_device()).any(2);
}
