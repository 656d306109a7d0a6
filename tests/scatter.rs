//! `scatter_add`, `index_add` and `index_add_scaled` against exact host
//! references: every layout of the tensor, the index and the values, every
//! dtype that adds (floats with NaN and infinities, wrapping `I32`),
//! repeated positions, empty, size-1, odd and long axes; out-of-range and
//! negative indices are an `Err` at realize; the values' producers fuse
//! into the adds' kernel.
//!
//! Test values are small multiples of 1/4, so every partial sum is exact
//! in every float dtype and the GPU's atomics, which add in any order,
//! must match exactly too.

mod common;

use common::*;
use smelt::{realize_all, DType, Error, Fusion, KernelKind, Tensor};

const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::I32];

/// Stored values: NaN and infinities among them for floats, the extremes
/// (whose sums wrap) for `I32`.
fn values(dt: DType) -> Vec<f64> {
    match dt {
        DType::I32 => vec![7.0, -3.0, 2147483647.0, -2147483648.0, 0.0, 11.0, 5.0],
        _ => vec![
            1.5,
            f64::NAN,
            -2.25,
            f64::INFINITY,
            0.0,
            f64::NEG_INFINITY,
            3.0,
            -0.5,
            8.0,
        ],
    }
}

/// Finite values only (for long rows, where a NaN would hide the rest).
fn finite(dt: DType) -> Vec<f64> {
    values(dt).into_iter().filter(|v| v.is_finite()).collect()
}

/// An index input of `shape` in `layout` whose entries lie in `0..n`.
fn index_input(layout: Layout, shape: &[usize], n: usize, seed: u64) -> Input {
    let mut rng = Rng::new(seed);
    let vals: Vec<f64> = (0..97).map(|_| rng.below(n.max(1)) as f64).collect();
    Input::with_values(layout, shape, DType::I32, &vals)
}

/// `a + b` in `dt` as smelt adds: `I32` wraps; the float test values add
/// exactly.
fn add(dt: DType, a: f64, b: f64) -> f64 {
    match dt {
        DType::I32 => (a as i32).wrapping_add(b as i32) as f64,
        _ => a + b,
    }
}

/// `scatter_add` on the host: `t` with `src[p]` added at `p` with
/// coordinate `ax` replaced by `index[p]`, for every `p` of `index`'s
/// shape, in row-major order.
fn host_scatter_add(t: &NdArray, ax: usize, index: &NdArray, src: &NdArray, dt: DType) -> NdArray {
    let mut out = t.clone();
    let strides = strides_of(&t.shape);
    for p in 0..index.numel() {
        let c = unravel(p, &index.shape);
        let mut o = c.clone();
        o[ax] = index.at(&c) as usize;
        let j: usize = o.iter().zip(&strides).map(|(x, s)| x * s).sum();
        out.data[j] = add(dt, out.data[j], src.at(&c));
    }
    out
}

#[test]
fn scatter_add_matches_the_host_on_every_layout_and_dtype() {
    // (tensor shape, axis, index shape, src shape): an index longer than
    // the tensor along the axis (many repeats), shorter than src, size-1,
    // empty, and prime sizes.
    type Case<'a> = (&'a [usize], usize, &'a [usize], &'a [usize]);
    let cases: [Case; 5] = [
        (&[3, 5], 1, &[3, 7], &[3, 7]),
        (&[4, 3], 0, &[2, 3], &[3, 3]),
        (&[2, 3, 5], 1, &[2, 4, 3], &[2, 4, 4]),
        (&[1, 13], 1, &[1, 1], &[1, 2]),
        (&[3, 4], 1, &[3, 0], &[3, 2]),
    ];
    for dt in DTYPES {
        for (li, layout) in LAYOUTS.iter().enumerate() {
            for (ci, (shape, ax, ishape, sshape)) in cases.iter().enumerate() {
                let t = Input::with_values(*layout, shape, dt, &values(dt));
                // Index and values in layouts other than the tensor's.
                let il = LAYOUTS[(li + ci + 1) % LAYOUTS.len()];
                let sl = LAYOUTS[(li + 2 * ci + 2) % LAYOUTS.len()];
                let idx = index_input(il, ishape, shape[*ax], (li * 10 + ci) as u64);
                let src = Input::with_values(sl, sshape, dt, &values(dt)[2..]);
                let want = host_scatter_add(&t.host(), *ax, &idx.host(), &src.host(), dt);
                let what = format!(
                    "scatter_add {dt} tensor {layout:?} {shape:?} axis {ax} index {il:?} {ishape:?} src {sl:?} {sshape:?}"
                );
                check_dt(
                    &what,
                    || {
                        t.tensor()
                            .scatter_add(*ax as isize, &idx.tensor(), &src.tensor())
                    },
                    dt,
                    &want,
                    EXACT,
                );
            }
        }
    }
}

#[test]
fn index_add_matches_the_host_on_every_layout_and_dtype() {
    let shape = [3usize, 4, 5];
    for dt in DTYPES {
        for (li, layout) in LAYOUTS.iter().enumerate() {
            let t = Input::with_values(*layout, &shape, dt, &values(dt));
            for ax in 0..3usize {
                for idx in [vec![2i32, 0, 2, 1, 2], vec![], vec![1]] {
                    let mut sshape = shape;
                    sshape[ax] = idx.len();
                    let sl = LAYOUTS[(li + ax + 1) % LAYOUTS.len()];
                    let src = Input::with_values(sl, &sshape, dt, &values(dt)[1..]);
                    let host_idx = NdArray::from_fn(&sshape, |c| idx[c[ax]] as f64);
                    let want = host_scatter_add(&t.host(), ax, &host_idx, &src.host(), dt);
                    let what = format!("index_add {dt} {layout:?} axis {ax} {idx:?} src {sl:?}");
                    let it = Tensor::from_vec(idx.clone(), [idx.len()], &test_device());
                    check_dt(
                        &what,
                        || t.tensor().index_add(ax as isize - 3, &it, &src.tensor()),
                        dt,
                        &want,
                        EXACT,
                    );
                }
            }
        }
    }
}

#[test]
fn long_and_odd_rows_and_scaled_adds() {
    for dt in [DType::F32, DType::I32, DType::F16] {
        // 1031 values into a prime-length row: about 150 repeats per
        // position; the partial sums (quarters below 512) are exact in f16.
        let t = Input::with_values(Layout::Flipped, &[2, 1031], dt, &finite(dt));
        let idx = index_input(Layout::Contiguous, &[2, 1031], 7, 5);
        let src = Input::with_values(Layout::Permuted, &[2, 1031], dt, &[1.0, -1.0, 2.0, -2.0]);
        let want = host_scatter_add(&t.host(), 1, &idx.host(), &src.host(), dt);
        check_dt(
            &format!("long scatter_add {dt}"),
            || t.tensor().scatter_add(-1, &idx.tensor(), &src.tensor()),
            dt,
            &want,
            EXACT,
        );
    }
    // alpha scales the values inside the adds' kernel.
    let dev = test_device();
    for (dt, alpha) in [(DType::F32, -0.5), (DType::F16, 2.0), (DType::I32, 3.0)] {
        let t = Input::with_values(Layout::Strided, &[5, 3], dt, &finite(dt));
        let src = Input::with_values(Layout::Contiguous, &[4, 3], dt, &finite(dt)[1..]);
        let idx = [4i32, 0, 4, 2];
        let host_idx = NdArray::from_fn(&[4, 3], |c| idx[c[0]] as f64);
        let scaled = src.host().map(|v| {
            if dt == DType::I32 {
                (v as i32).wrapping_mul(alpha as i32) as f64
            } else {
                v * alpha
            }
        });
        let want = host_scatter_add(&t.host(), 0, &host_idx, &scaled, dt);
        let it = Tensor::from_vec(idx.to_vec(), [4], &dev);
        check_dt(
            &format!("index_add_scaled {dt} alpha {alpha}"),
            || t.tensor().index_add_scaled(0, &it, &src.tensor(), alpha),
            dt,
            &want,
            EXACT,
        );
    }
}

#[test]
fn zero_dim_tensors_and_computed_operands() {
    let dev = test_device();
    let x = Tensor::from_vec(vec![4.5f32], [0usize; 0], &dev);
    let i = Tensor::from_vec(vec![0i32], [0usize; 0], &dev);
    let s = Tensor::from_vec(vec![-1.25f32], [0usize; 0], &dev);
    check(
        "0-d scatter_add",
        || x.scatter_add(0, &i, &s),
        &NdArray::scalar(3.25),
        EXACT,
    );
    let i = Tensor::from_vec(vec![0i32, 0], [2], &dev);
    let s = Tensor::from_vec(vec![1.0f32, 2.0], [2], &dev);
    check(
        "0-d index_add",
        || x.index_add(-1, &i, &s),
        &NdArray::scalar(7.5),
        EXACT,
    );
    // A computed tensor, index and values, each fused into its kernel.
    let t = Input::with_values(Layout::Permuted, &[4, 6], DType::F32, &finite(DType::F32));
    let src = Input::with_values(Layout::Strided, &[4, 5], DType::F32, &values(DType::F32));
    let idx = index_input(Layout::Contiguous, &[4, 5], 6, 3);
    let hidx = idx.host().map(|v| 5.0 - v);
    let want = host_scatter_add(
        &t.host().map(|v| v + 1.0),
        1,
        &hidx,
        &src.host().map(|v| v * 2.0),
        DType::F32,
    )
    .map(|v| v * 0.5);
    check(
        "scatter_add of computed tensors, then consumed",
        || {
            let five = Tensor::full([0usize; 0], 5.0, DType::I32, &test_device());
            let y =
                (t.tensor() + 1.0).scatter_add(1, &(five - idx.tensor()), &(src.tensor() * 2.0));
            y * 0.5
        },
        &want,
        EXACT,
    );
}

#[test]
fn fused_producers_make_two_kernels_and_the_input_is_not_changed() {
    let dev = test_device();
    let t = Tensor::from_vec((0..12).map(|v| v as f32).collect(), [3, 4], &dev);
    let s = Tensor::from_vec((0..6).map(|v| v as f32).collect(), [3, 2], &dev);
    let i = Tensor::from_vec(vec![3i32, 3, 0, 1, 2, 2], [3, 2], &dev);
    let y = t.scatter_add(1, &i, &(&s * 2.0));
    let sched = y.schedule(Fusion::On);
    assert_eq!(sched.items.len(), 2, "the copy and the adds:\n{sched}");
    let adds = &sched.items[1];
    assert_eq!(adds.kernel.kind, KernelKind::Scatter, "{sched}");
    assert!(
        adds.ops.contains(&"mul".to_string()),
        "s * 2 fused:\n{sched}"
    );
    assert_eq!(
        adds.outputs, sched.items[0].outputs,
        "added in place:\n{sched}"
    );
    // The adds write one element per value, not the whole output.
    assert_eq!(adds.kernel.bytes_written(), 6 * 4, "{sched}");
    // A consumer of the result and producers of the tensor add no kernel
    // of their own beyond the consumer's.
    let z = (&t + 1.0).scatter_add(1, &i, &s).exp();
    assert_eq!(z.schedule(Fusion::On).items.len(), 3);
    y.realize().unwrap();
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![0.0, 1.0, 2.0, 5.0, 8.0, 11.0, 6.0, 7.0, 8.0, 9.0, 28.0, 11.0]
    );
    // The tensor scattered into keeps its values.
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        (0..12).map(|v| v as f32).collect::<Vec<_>>()
    );
}

#[test]
fn chained_scatters_realized_together() {
    let dev = test_device();
    let t = Tensor::zeros([2, 3], DType::I32, &dev);
    let i = Tensor::from_vec(vec![2i32, 2, 0], [3], &dev);
    let s = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], [2, 3], &dev);
    for mode in MODES {
        let a = t.index_add(1, &i, &s);
        let b = a.index_add(1, &i, &s);
        let c = a.scatter_add(0, &Tensor::ones([1, 3], DType::I32, &dev), &s);
        realize_all(&[&a, &b, &c], mode).unwrap();
        let a_want = vec![3, 0, 3, 6, 0, 9];
        assert_eq!(a.to_vec::<i32>().unwrap(), a_want, "{mode:?}");
        assert_eq!(
            b.to_vec::<i32>().unwrap(),
            vec![6, 0, 6, 12, 0, 18],
            "{mode:?}"
        );
        assert_eq!(
            c.to_vec::<i32>().unwrap(),
            vec![3, 0, 3, 7, 2, 12],
            "{mode:?}"
        );
    }
}

#[test]
fn reductions_feed_values_and_indices() {
    // Values with a row reduction and an index from an argmax: both are
    // materialized before the adds' kernel, which reads them.
    let x = Input::with_values(
        Layout::Strided,
        &[4, 6],
        DType::F32,
        &[1.5, -2.25, 3.0, -0.5, 8.0, 0.0, 2.5],
    );
    let hx = x.host();
    let hmax = hx.max(&[1], true);
    let centred = NdArray::from_fn(&[4, 6], |c| hx.at(c) - hmax.at(&[c[0], 0]));
    let harg = hx.arg(1, true, |a, b| a > b);
    let t = Input::with_values(Layout::Contiguous, &[4, 6], DType::F32, &[0.25, 1.0]);
    let want = host_scatter_add(&t.host(), 1, &harg, &centred, DType::F32);
    check(
        "scatter_add at argmax of centred rows",
        || {
            let x = x.tensor();
            let centred = &x - x.max_keepdim(1);
            t.tensor().scatter_add(1, &x.argmax_keepdim(1), &centred)
        },
        &want,
        EXACT,
    );
}

/// The error realizing `y` under `mode`.
fn realize_err(y: &Tensor, mode: Fusion) -> Error {
    match y.realize_with(mode) {
        Err(e) => e,
        Ok(_) => panic!("an out-of-range index realized without error"),
    }
}

#[test]
fn out_of_range_and_negative_indices_are_errors_at_realize() {
    let dev = test_device();
    let x = Tensor::from_vec((0..12).map(|v| v as f32).collect(), [3, 4], &dev);
    let s = Tensor::ones([3, 4], DType::F32, &dev);
    for bad in [4i32, -1, i32::MAX, i32::MIN] {
        for mode in MODES {
            let i = Tensor::from_vec(vec![0i32, bad, 1], [3, 1], &dev);
            let e = realize_err(&x.scatter_add(1, &i, &s), mode);
            assert!(
                matches!(&e, Error::Launch(m) if m.contains("out of range")),
                "scatter_add index {bad} [{mode:?}]: {e}"
            );
            let i = Tensor::from_vec(vec![1, bad, 0], [3], &dev);
            let e = realize_err(&(x.t().index_add(1, &i, &s.t()) * 2.0), mode);
            assert!(matches!(e, Error::Launch(_)), "index_add {bad}: {e}");
        }
    }
    // Any index into an empty axis is out of range; an empty index is fine.
    let empty = Tensor::zeros([3, 0], DType::F32, &dev);
    let i = Tensor::from_vec(vec![0i32; 3], [3, 1], &dev);
    let e = realize_err(&empty.scatter_add(1, &i, &s), Fusion::On);
    assert!(matches!(e, Error::Launch(_)), "{e}");
    let none = Tensor::from_vec(Vec::<i32>::new(), [3, 0], &dev);
    assert_eq!(
        empty.scatter_add(1, &none, &s).to_vec::<f32>().unwrap(),
        Vec::<f32>::new()
    );
    // The same graph in range still works afterwards.
    let i = Tensor::from_vec(vec![3i32, 0, 2], [3, 1], &dev);
    assert_eq!(
        x.scatter_add(1, &i, &s).to_vec::<f32>().unwrap(),
        vec![0.0, 1.0, 2.0, 4.0, 5.0, 5.0, 6.0, 7.0, 8.0, 9.0, 11.0, 11.0]
    );
}

#[test]
#[should_panic(expected = "scatter_add: indices must have an integer index dtype, got float32")]
fn float_indices_panic_at_the_op() {
    let dev = test_device();
    let x = Tensor::zeros([2, 2], DType::F32, &dev);
    x.scatter_add(0, &Tensor::zeros([2, 2], DType::F32, &dev), &x);
}

#[test]
#[should_panic(
    expected = "scatter_add: the values added must have the tensor's dtype float32, got int32"
)]
fn values_of_another_dtype_panic() {
    let dev = test_device();
    let x = Tensor::zeros([2, 2], DType::F32, &dev);
    let i = Tensor::zeros([2, 2], DType::I32, &dev);
    x.scatter_add(0, &i, &i);
}

#[test]
#[should_panic(expected = "index_add: bool tensors have no atomic add")]
fn bool_tensors_panic() {
    let dev = test_device();
    let x = Tensor::zeros([2], DType::Bool, &dev);
    x.index_add(0, &Tensor::zeros([2], DType::I32, &dev), &x);
}

#[test]
#[should_panic(
    expected = "scatter_add: index of shape [2, 3] is longer along axis 1 than src of shape [2, 2] or the tensor's shape [2, 4] (adding along axis 0)"
)]
fn an_index_longer_than_the_values_panics() {
    let dev = test_device();
    let x = Tensor::zeros([2, 4], DType::F32, &dev);
    let s = Tensor::zeros([2, 2], DType::F32, &dev);
    x.scatter_add(0, &Tensor::zeros([2, 3], DType::I32, &dev), &s);
}

#[test]
#[should_panic(
    expected = "index_add: source of shape [3, 2] must have shape [2, 2]: the tensor's shape [4, 2] with axis 0 of the index's length 2"
)]
fn index_add_checks_the_source_shape() {
    let dev = test_device();
    let x = Tensor::zeros([4, 2], DType::F32, &dev);
    let s = Tensor::zeros([3, 2], DType::F32, &dev);
    x.index_add(0, &Tensor::zeros([2], DType::I32, &dev), &s);
}

#[test]
#[should_panic(expected = "scatter_add: axis 2 is out of range for a tensor of shape [2, 2]")]
fn axis_out_of_range_panics() {
    let dev = test_device();
    let x = Tensor::zeros([2, 2], DType::F32, &dev);
    x.scatter_add(2, &Tensor::zeros([2, 2], DType::I32, &dev), &x);
}
