//! `cat`, `stack`, `split`, `chunk`, `unbind` against host references,
//! through every layout, on every dtype, with empty, size-1 and odd axes;
//! `cat` is one kernel that reads each input once and fuses onward.

mod common;

use common::*;
use smelt::{DType, Fusion, Tensor};
use smelt_codegen::ptx::{emit, Target};

const DTYPES: [DType; 5] = [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool];

/// `cat` on the host: the inputs' elements in order along `ax`.
fn host_cat(parts: &[NdArray], ax: usize) -> NdArray {
    let mut shape = parts[0].shape.clone();
    shape[ax] = parts.iter().map(|p| p.shape[ax]).sum();
    NdArray::from_fn(&shape, |c| {
        let mut c = c.to_vec();
        for p in parts {
            if c[ax] < p.shape[ax] {
                return p.at(&c);
            }
            c[ax] -= p.shape[ax];
        }
        unreachable!("coordinate beyond the joined axis")
    })
}

#[test]
fn cat_matches_the_host_on_every_layout_dtype_and_axis() {
    // Sizes along the joined axis: odd, empty and size 1 among them.
    let along = [3usize, 0, 1, 5];
    for dt in DTYPES {
        for (li, layout) in LAYOUTS.iter().enumerate() {
            for ax in 0..3usize {
                let inputs: Vec<Input> = along
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        let mut shape = vec![2, 3, 7];
                        shape[ax] = *n;
                        // Each input in another layout, so one cat mixes them.
                        let l = LAYOUTS[(li + i) % LAYOUTS.len()];
                        Input::new(l, &shape, dt, -4.0, 4.0, 7 + i as u64)
                    })
                    .collect();
                let hosts: Vec<NdArray> = inputs.iter().map(Input::host).collect();
                let want = host_cat(&hosts, ax);
                for axis in [ax as isize, ax as isize - 3] {
                    check_dt(
                        &format!("cat {dt} {layout:?} axis {axis}"),
                        || {
                            let ts: Vec<Tensor> = inputs.iter().map(Input::tensor).collect();
                            Tensor::cat(&ts.iter().collect::<Vec<_>>(), axis)
                        },
                        dt,
                        &want,
                        EXACT,
                    );
                }
            }
        }
    }
}

/// Widths along the last axis whose offsets (0, 8, 24, 24, 32, 36) are
/// multiples of 4: each input's mask covers whole vectors, so the GPU
/// reads them with vector loads (4 lanes; 2 for 8-byte types).
const ALIGNED_WIDTHS: [usize; 5] = [8, 16, 0, 8, 4];

#[test]
fn cat_along_the_last_axis_at_vector_boundaries_matches_the_host() {
    let dtypes = [DType::F32, DType::F16, DType::F64, DType::U8, DType::Bool];
    for dt in dtypes {
        for (li, layout) in LAYOUTS.iter().enumerate() {
            let inputs: Vec<Input> = ALIGNED_WIDTHS
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let l = LAYOUTS[(li + i) % LAYOUTS.len()];
                    Input::new(l, &[3, *w], dt, -4.0, 4.0, 30 + i as u64)
                })
                .collect();
            let hosts: Vec<NdArray> = inputs.iter().map(Input::host).collect();
            let want = host_cat(&hosts, 1);
            check_dt(
                &format!("cat {dt} {layout:?} at vector boundaries"),
                || {
                    let ts: Vec<Tensor> = inputs.iter().map(Input::tensor).collect();
                    Tensor::cat(&ts.iter().collect::<Vec<_>>(), -1)
                },
                dt,
                &want,
                EXACT,
            );
        }
    }
}

/// Eight inputs along the last axis, their offsets multiples of 8: on the
/// GPU each input's mask then holds for a whole 8-lane group of the 2-byte
/// types, and the select chain evaluates it once per group; with a width
/// of 4 among them, groups of 4. Every dtype and layout, fused onward.
#[test]
fn cat_of_eight_inputs_at_vector_boundaries_matches_the_host() {
    let sets: [&[usize]; 2] = [&[8, 16, 8, 0, 24, 8, 16, 8], &[8, 4, 12, 8, 8, 16, 0, 8]];
    let dtypes = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I64,
        DType::Bool,
    ];
    for widths in sets {
        for dt in dtypes {
            for (li, layout) in LAYOUTS.iter().enumerate() {
                let inputs: Vec<Input> = widths
                    .iter()
                    .enumerate()
                    .map(|(i, w)| {
                        let l = LAYOUTS[(li + i) % LAYOUTS.len()];
                        Input::new(l, &[3, *w], dt, -4.0, 4.0, 40 + i as u64)
                    })
                    .collect();
                let hosts: Vec<NdArray> = inputs.iter().map(Input::host).collect();
                let want = host_cat(&hosts, 1);
                let what = format!("cat {dt} {layout:?} of {widths:?}");
                let cat = || {
                    let ts: Vec<Tensor> = inputs.iter().map(Input::tensor).collect();
                    Tensor::cat(&ts.iter().collect::<Vec<_>>(), -1)
                };
                check_dt(&what, cat, dt, &want, EXACT);
                let twice = want.map(|v| 2.0 * v);
                let t = Tol::new(1e-6, 0.0);
                check(
                    &format!("{what} * 2"),
                    || cat().cast(DType::F64) * 2.0,
                    &twice,
                    t,
                );
            }
        }
    }
}

/// `cat` of 8 `bf16` inputs whose widths are whole 8-lane vectors checks
/// each input's range once per vector (its load's mask and its select's),
/// not once per lane.
#[test]
fn cat_checks_each_input_once_per_vector() {
    let ts: Vec<Tensor> = realized(8, &[16, 64])
        .iter()
        .map(|t| t.cast(DType::BF16))
        .collect();
    for t in &ts {
        t.realize().unwrap();
    }
    let refs: Vec<&Tensor> = ts.iter().collect();
    let s = Tensor::cat(&refs, -1).schedule(Fusion::On);
    assert_eq!(s.items.len(), 1, "{s}");
    for t in Target::CHECKED {
        let p = emit(&s.items[0].kernel, &t).unwrap();
        assert_eq!(p.ptx.matches("ld.global.v4.b32").count(), 8, "{}", p.ptx);
        let checks = p.ptx.matches("setp.lt.u32").count();
        assert!(checks < 2 * 8, "{checks} range checks:\n{}", p.ptx);
    }
}

/// `cat` along the last axis of contiguous inputs whose widths are whole
/// vectors is one kernel of 16-byte loads, no element-wise loads.
#[test]
fn cat_along_the_last_axis_emits_vector_loads() {
    let ts = realized(3, &[64, 32]);
    for t in &ts {
        t.realize().unwrap();
    }
    let refs: Vec<&Tensor> = ts.iter().collect();
    let s = Tensor::cat(&refs, -1).schedule(Fusion::On);
    assert_eq!(s.items.len(), 1, "{s}");
    for t in Target::CHECKED {
        let p = emit(&s.items[0].kernel, &t).unwrap();
        assert_eq!(p.ptx.matches("ld.global.v4.b32").count(), 3, "{}", p.ptx);
        assert!(!p.ptx.contains("ld.global.b32"), "{}", p.ptx);
    }
}

#[test]
fn cat_promotes_dtypes_and_keeps_signed_zeros_and_nans() {
    let (a, ha) = make(&[-0.0, f64::NAN, f64::INFINITY], &[3], DType::F32);
    let (b, hb) = make(&[1.0, -2.0], &[2], DType::I32);
    let c = Tensor::cat(&[&a, &b], 0);
    assert_eq!(c.dtype(), DType::F32);
    let got = c.to_vec::<f32>().unwrap();
    assert_eq!(got[0].to_bits(), (-0.0f32).to_bits(), "-0.0 kept");
    assert!(got[1].is_nan());
    let want = host_cat(&[ha, hb], 0);
    assert_close("cat f32+i32", &values(&c, Fusion::On), &want, EXACT);
    // Bool with F16 gives F16, as in arithmetic.
    let t = Tensor::from_vec(vec![true, false], [2], &test_device());
    let h = Tensor::from_vec(vec![half::f16::from_f32(0.5)], [1], &test_device());
    assert_eq!(Tensor::cat(&[&t, &h], 0).dtype(), DType::F16);
}

#[test]
fn cat_of_only_empty_inputs_and_of_one_input() {
    let dev = test_device();
    let e = Tensor::zeros([0, 4], DType::F32, &dev);
    let c = Tensor::cat(&[&e, &e], 0);
    assert_eq!(c.shape(), &[0, 4]);
    assert_eq!(c.to_vec::<f32>().unwrap(), Vec::<f32>::new());
    // Joining along the non-empty axis of empty tensors.
    assert_eq!(Tensor::cat(&[&e, &e], 1).shape(), &[0, 8]);
    let (x, hx) = make(&[1.0, 2.0, 3.0], &[3], DType::I32);
    assert_close(
        "cat of one",
        &values(&Tensor::cat(&[&x], 0), Fusion::On),
        &hx,
        EXACT,
    );
}

/// Realized inputs of `shape` with distinct values.
fn realized(n: usize, shape: &[usize]) -> Vec<Tensor> {
    (0..n)
        .map(|i| {
            let len = shape.iter().product::<usize>();
            let v: Vec<f32> = (0..len).map(|j| (i * 1000 + j) as f32).collect();
            Tensor::from_vec(v, shape, &test_device())
        })
        .collect()
}

#[test]
fn cat_is_one_kernel_reading_each_input_once_and_fuses_onward() {
    let ts = realized(3, &[64, 33]);
    for t in &ts {
        t.realize().unwrap();
    }
    let refs: Vec<&Tensor> = ts.iter().collect();
    let y = Tensor::cat(&refs, 1).exp();
    let s = y.schedule(Fusion::On);
    assert_eq!(s.items.len(), 1, "{s}");
    let f32_bytes = 64 * 33 * 4;
    assert_eq!(s.bytes_read(), 3 * f32_bytes, "each input read once: {s}");
    assert_eq!(s.bytes_written(), 3 * f32_bytes, "{s}");
    // And a reduction over the joined axis stays one kernel.
    let r = Tensor::cat(&refs, 1).sum(1);
    assert_eq!(r.schedule(Fusion::On).items.len(), 1);
    let want: Vec<f64> = (0..64)
        .map(|row| {
            (0..3)
                .flat_map(|i| (0..33).map(move |j| (i * 1000 + row * 33 + j) as f64))
                .sum()
        })
        .collect();
    assert_eq!(r.to_vec::<f64>().unwrap(), want);
}

#[test]
fn stack_adds_an_axis_anywhere() {
    let dt = DType::F32;
    let inputs: Vec<Input> = (0..3)
        .map(|i| Input::new(LAYOUTS[i * 2], &[2, 5], dt, -1.0, 1.0, i as u64))
        .collect();
    let hosts: Vec<NdArray> = inputs.iter().map(Input::host).collect();
    for (axis, ax) in [(0isize, 0usize), (1, 1), (2, 2), (-1, 2), (-3, 0)] {
        let lifted: Vec<NdArray> = hosts
            .iter()
            .map(|h| {
                let mut s = h.shape.clone();
                s.insert(ax, 1);
                h.reshape(&s)
            })
            .collect();
        check(
            &format!("stack axis {axis}"),
            || {
                let ts: Vec<Tensor> = inputs.iter().map(Input::tensor).collect();
                Tensor::stack(&ts.iter().collect::<Vec<_>>(), axis)
            },
            &host_cat(&lifted, ax),
            EXACT,
        );
    }
}

#[test]
fn split_chunk_and_unbind_are_views_that_cover_the_axis() {
    let inp = Input::new(Layout::Strided, &[7, 4], DType::F32, -1.0, 1.0, 3);
    let host = inp.host();
    let x = inp.tensor();
    let rows = |p: &Tensor, start: usize| {
        let n = p.shape()[0];
        NdArray::from_fn(&[n, 4], |c| host.at(&[start + c[0], c[1]]))
    };
    let sizes = |ps: &[Tensor]| ps.iter().map(|p| p.shape()[0]).collect::<Vec<_>>();
    let parts = x.split(3, 0);
    assert_eq!(sizes(&parts), vec![3, 3, 1]);
    for (i, p) in parts.iter().enumerate() {
        assert_close("split", &values(p, Fusion::On), &rows(p, 3 * i), EXACT);
    }
    assert_eq!(sizes(&x.split(7, 0)), vec![7]);
    assert_eq!(sizes(&x.split(100, -2)), vec![7]);
    assert_eq!(sizes(&x.chunk(3, 0)), vec![3, 3, 1]);
    assert_eq!(sizes(&x.chunk(7, 0)), vec![1; 7]);
    // torch.chunk may give fewer pieces than asked: 7 rows in 4 -> 2,2,2,1.
    assert_eq!(sizes(&x.chunk(4, 0)), vec![2, 2, 2, 1]);
    assert_eq!(x.chunk(3, 1).len(), 2);
    let parts = x.split_sizes(&[2, 0, 5], 0);
    assert_eq!(sizes(&parts), vec![2, 0, 5]);
    assert_close(
        "split_sizes",
        &values(&parts[2], Fusion::On),
        &rows(&parts[2], 2),
        EXACT,
    );
    let cols = x.unbind(-1);
    assert_eq!(cols.len(), 4);
    for (j, c) in cols.iter().enumerate() {
        assert_eq!(c.shape(), &[7]);
        let want = NdArray::from_fn(&[7], |i| host.at(&[i[0], j]));
        assert_close("unbind", &values(c, Fusion::On), &want, EXACT);
    }
    // Splitting then joining gives the input back, in one kernel.
    let parts = x.split(2, 0);
    let back = Tensor::cat(&parts.iter().collect::<Vec<_>>(), 0);
    assert_close("split then cat", &values(&back, Fusion::On), &host, EXACT);
    let e = Tensor::zeros([0, 3], DType::F32, &test_device());
    assert_eq!(e.split(2, 0).len(), 1);
    assert_eq!(e.chunk(2, 0).len(), 1);
    assert!(e.unbind(0).is_empty());
}

#[test]
fn bad_joins_and_splits_panic_with_the_shapes() {
    let dev = test_device();
    let a = Tensor::zeros([2, 3], DType::F32, &dev);
    let b = Tensor::zeros([2, 4], DType::F32, &dev);
    let msg = |f: &dyn Fn()| {
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_err();
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap()
    };
    let m = msg(&|| {
        Tensor::cat(&[&a, &b], 0);
    });
    assert!(
        m.contains("cat") && m.contains("[2, 3]") && m.contains("[2, 4]"),
        "{m}"
    );
    assert_eq!(Tensor::cat(&[&a, &b], 1).shape(), &[2, 7]);
    let m = msg(&|| {
        Tensor::cat(&[], 0);
    });
    assert!(m.contains("at least one"), "{m}");
    let m = msg(&|| {
        Tensor::cat(&[&a, &b], 2);
    });
    assert!(m.contains("axis 2"), "{m}");
    let m = msg(&|| {
        Tensor::stack(&[&a, &b], 0);
    });
    assert!(m.contains("stack"), "{m}");
    let m = msg(&|| {
        a.split(0, 1);
    });
    assert!(m.contains("split"), "{m}");
    let m = msg(&|| {
        a.split_sizes(&[1, 1], 1);
    });
    assert!(m.contains("do not add up"), "{m}");
    let m = msg(&|| {
        a.chunk(0, 0);
    });
    assert!(m.contains("chunk"), "{m}");
}
