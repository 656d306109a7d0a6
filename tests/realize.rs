//! realize() semantics (results kept, nothing recomputed, buffers freed),
//! the unfused kernel list of naive softmax, and `Display`.

mod common;

use common::*;
use smelt::stats::kernels_run;
use smelt::{realize_all, DType, Fusion, KernelKind, Tensor};
use std::sync::Arc;

/// Kernels run by `f`.
fn kernels_during(f: impl FnOnce()) -> u64 {
    let k0 = kernels_run();
    f();
    kernels_run() - k0
}

/// A realized `randn` input: data, as these tests count the kernels of the
/// ops on it (a lazy `randn` would be computed inside them).
fn data(shape: [usize; 2], seed: u64, dev: &smelt::Device) -> Tensor {
    let x = Tensor::randn(shape, DType::F32, seed, dev);
    x.realize().unwrap();
    x
}

fn op_lists(t: &Tensor, mode: Fusion) -> Vec<Vec<String>> {
    t.schedule(mode)
        .items
        .iter()
        .map(|i| i.ops.clone())
        .collect()
}

#[test]
fn realize_runs_once_and_later_graphs_reuse_the_result() {
    let dev = test_device();
    for mode in MODES {
        let x = data([4, 8], 1, &dev);
        let y = (&x + 1.0).exp();
        assert!(!y.is_realized());
        let n = kernels_during(|| {
            y.realize_with(mode).unwrap();
        });
        match mode {
            Fusion::Off => assert_eq!(n, 2, "add and exp"),
            Fusion::On => assert!((1..=2).contains(&n), "{n} kernels"),
        }
        assert!(y.is_realized());
        let first = y.to_vec::<f32>().unwrap();

        // Realizing again, in either mode, reading, or viewing: nothing runs.
        let n = kernels_during(|| {
            y.realize_with(mode).unwrap();
            y.realize_with(Fusion::Off).unwrap();
            y.realize_with(Fusion::On).unwrap();
            y.realize().unwrap();
            assert_eq!(y.to_vec::<f32>().unwrap(), first);
            y.t().realize_with(mode).unwrap();
            y.narrow(0, 1, 2).realize_with(mode).unwrap();
        });
        assert_eq!(n, 0, "{mode:?}: recomputed a realized tensor");
        assert!(y.schedule(mode).items.is_empty());

        // A later graph using y computes only what is new.
        let z = &y * 2.0;
        assert_eq!(op_lists(&z, Fusion::Off), vec![vec!["mul".to_string()]]);
        for items in op_lists(&z, Fusion::On) {
            assert!(
                !items.iter().any(|o| o == "add" || o == "exp"),
                "{mode:?}: fused schedule recomputes y: {items:?}"
            );
        }
        let n = kernels_during(|| {
            z.realize_with(mode).unwrap();
        });
        assert_eq!(n, 1, "{mode:?}: one kernel for z = y * 2");
        let zv = z.to_vec::<f32>().unwrap();
        for (a, b) in zv.iter().zip(&first) {
            assert_eq!(*a, b * 2.0);
        }

        // A reduction over y, then again on a view of y: one kernel each.
        let n = kernels_during(|| {
            y.sum(1).realize_with(mode).unwrap();
            y.t().max(0).realize_with(mode).unwrap();
        });
        assert_eq!(n, 2, "{mode:?}");
    }
}

#[test]
fn realize_intermediate_then_consumer() {
    let dev = test_device();
    for mode in MODES {
        let x = Tensor::arange(0.0, 12.0, 1.0, DType::F32, &dev).reshape([3, 4]);
        let a = x.exp();
        let b = &a + 1.0;
        a.realize_with(mode).unwrap();
        assert_eq!(op_lists(&b, Fusion::Off), vec![vec!["add".to_string()]]);
        let n = kernels_during(|| {
            b.realize_with(mode).unwrap();
        });
        assert_eq!(n, 1, "{mode:?}: exp was not reused");
        let want: Vec<f32> = (0..12).map(|i| (i as f32).exp() + 1.0).collect();
        let got = b.to_vec::<f32>().unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5 * w.abs(), "{g} vs {w}");
        }
    }
}

#[test]
fn realize_all_shares_work() {
    let dev = test_device();
    for mode in MODES {
        let x = data([5, 6], 2, &dev);
        let a = x.exp();
        let b = &a + 1.0;
        let c = a.sum(1);
        let n = kernels_during(|| realize_all(&[&b, &c], mode).unwrap());
        match mode {
            // exp once, add, sum: exp is not computed twice.
            Fusion::Off => assert_eq!(n, 3),
            Fusion::On => assert!((1..=3).contains(&n), "{n}"),
        }
        assert!(b.is_realized() && c.is_realized());
        let n = kernels_during(|| realize_all(&[&b, &c], mode).unwrap());
        assert_eq!(n, 0);
        let xv = x.to_vec::<f64>().unwrap();
        let bv = b.to_vec::<f64>().unwrap();
        let cv = c.to_vec::<f64>().unwrap();
        for i in 0..5 {
            let mut s = 0.0;
            for j in 0..6 {
                let e = xv[i * 6 + j].exp();
                s += e;
                assert!((bv[i * 6 + j] - (e + 1.0)).abs() < 1e-5 * (e + 1.0));
            }
            assert!((cv[i] - s).abs() < 1e-5 * s);
        }
    }
    realize_all(&[], Fusion::On).unwrap();
}

#[test]
fn buffers_no_longer_referenced_are_freed() {
    let dev = test_device();
    let x = data([16, 16], 3, &dev);
    let x_buf = Arc::downgrade(&x.node().realized().expect("from data"));
    let y = x.exp().sum_keepdim(1);
    drop(x);
    // The graph still needs x's data.
    assert!(x_buf.upgrade().is_some());
    y.realize().unwrap();
    // Once y holds its result, nothing refers to x's data any more.
    assert!(
        x_buf.upgrade().is_none(),
        "x's buffer outlived its last user"
    );
    let y_buf = Arc::downgrade(&y.node().realized().expect("realized"));
    drop(y);
    assert!(y_buf.upgrade().is_none(), "y's buffer outlived y");
}

#[test]
fn naive_softmax_is_five_kernels_unfused() {
    let dev = test_device();
    let (m, n) = (8usize, 16usize);
    let x = data([m, n], 4, &dev);
    let e = (&x - x.max_keepdim(1)).exp();
    let y = &e / e.sum_keepdim(1);
    for t in [&y, &x.softmax(1), &x.softmax(-1)] {
        let s = t.schedule(Fusion::Off);
        let ops = op_lists(t, Fusion::Off);
        assert_eq!(
            ops,
            vec![
                vec!["max"],
                vec!["sub"],
                vec!["exp"],
                vec!["sum"],
                vec!["div"]
            ],
            "{s}"
        );
        let kinds: Vec<KernelKind> = s.items.iter().map(|i| i.kernel.kind).collect();
        use KernelKind::*;
        assert_eq!(
            kinds,
            vec![Reduce, Elementwise, Elementwise, Reduce, Elementwise]
        );
        let written: Vec<usize> = s.items.iter().map(|i| i.kernel.bytes_written()).collect();
        let (mn, row) = (4 * m * n, 4 * m);
        assert_eq!(written, vec![row, mn, mn, row, mn]);
        // Every kernel reads the whole matrix once; sub and div also read
        // the row vector.
        assert_eq!(s.bytes_read(), 5 * mn + 2 * row, "{s}");
    }
    // Along the first axis too.
    let ops = op_lists(&x.softmax(0), Fusion::Off);
    assert_eq!(ops.len(), 5);
    // And it runs exactly those five kernels.
    let k = kernels_during(|| {
        y.realize_with(Fusion::Off).unwrap();
    });
    assert_eq!(k, 5);
    let rows = y.sum(1).to_vec::<f32>().unwrap();
    assert!(rows.iter().all(|r| (r - 1.0).abs() < 1e-5), "{rows:?}");
    // Fused: the same values.
    let y2 = x.softmax(1);
    y2.realize_with(Fusion::On).unwrap();
    let (a, b) = (y.to_vec::<f32>().unwrap(), y2.to_vec::<f32>().unwrap());
    for (p, q) in a.iter().zip(&b) {
        assert!((p - q).abs() <= 1e-6, "{p} vs {q}");
    }
}

#[test]
fn schedule_does_not_run_anything() {
    let dev = test_device();
    let x = data([4, 4], 5, &dev);
    let y = x.exp().sum(0);
    let n = kernels_during(|| {
        let _ = y.schedule(Fusion::Off);
        let _ = y.schedule(Fusion::On);
        let _ = format!("{}", y.schedule(Fusion::Off));
    });
    assert_eq!(n, 0);
    assert!(!y.is_realized());
}

// ---------------------------------------------------------------------------
// Display

#[test]
fn display_like_pytorch() {
    let dev = test_device();
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev);
    assert_eq!(
        x.to_string(),
        format!("tensor([[1., 2.],\n        [3., 4.]], shape=[2, 2], dtype=float32, device={dev})")
    );
    let i = Tensor::from_vec(vec![1i32, -20, 3], [3], &dev);
    assert_eq!(
        i.to_string(),
        format!("tensor([  1, -20,   3], shape=[3], dtype=int32, device={dev})")
    );
    let f = Tensor::from_vec(vec![1.5f32, -2.25, 10.0], [3], &dev);
    assert_eq!(
        f.to_string(),
        format!("tensor([ 1.5000, -2.2500, 10.0000], shape=[3], dtype=float32, device={dev})")
    );
    let b = Tensor::from_vec(vec![true, false], [2], &dev);
    assert_eq!(
        b.to_string(),
        format!("tensor([ True, False], shape=[2], dtype=bool, device={dev})")
    );
    let s = Tensor::scalar(3.5f32, &dev);
    assert_eq!(
        s.to_string(),
        format!("tensor(3.5000, shape=[], dtype=float32, device={dev})")
    );
    // Three axes: a blank line between blocks, inner rows aligned.
    let c = Tensor::arange(1.0, 9.0, 1.0, DType::F32, &dev).reshape([2, 2, 2]);
    assert_eq!(
        c.to_string(),
        format!(
            "tensor([[[1., 2.],\n         [3., 4.]],\n\n        [[5., 6.],\n         [7., 8.]]], \
         shape=[2, 2, 2], dtype=float32, device={dev})"
        )
    );
    // Half floats, and a lazy view (printing realizes it).
    let h = Tensor::from_vec(vec![0.5f32, 0.25], [2], &dev)
        .cast(DType::F16)
        .flip(0);
    assert_eq!(
        h.to_string(),
        format!("tensor([0.2500, 0.5000], shape=[2], dtype=float16, device={dev})")
    );
    // Large tensors are summarised with `...`.
    let big = Tensor::arange(0.0, 2000.0, 1.0, DType::F32, &dev);
    assert_eq!(
        big.to_string(),
        format!("tensor([   0.,    1.,    2., ..., 1997., 1998., 1999.], shape=[2000], dtype=float32, device={dev})")
    );
    // Empty tensors and non-finite values.
    let e = Tensor::zeros([0, 3], DType::F32, &dev);
    assert_eq!(
        e.to_string(),
        format!("tensor([], shape=[0, 3], dtype=float32, device={dev})")
    );
    let nf = Tensor::from_vec(vec![1.0f32, f32::NAN, f32::NEG_INFINITY], [3], &dev);
    let txt = nf.to_string();
    assert!(
        txt.contains("nan") && txt.contains("-inf") && txt.contains("1."),
        "{txt}"
    );
    // Debug is a one-line summary.
    assert_eq!(
        format!("{x:?}"),
        format!("Tensor(shape=[2, 2], dtype=float32, device={dev}, realized=true)")
    );
}
