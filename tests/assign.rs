//! `masked_fill` and `slice_assign` against host references, through
//! layouts and dtypes; an update is one kernel with its reader.

mod common;

use common::*;
use smelt::{s, DType, Fusion, NewAxis, SliceArg, Tensor};

const DTYPES: [DType; 5] = [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool];

#[test]
fn masked_fill_matches_the_host() {
    for dt in DTYPES {
        for layout in LAYOUTS {
            let x = Input::new(layout, &[3, 5, 7], dt, -4.0, 4.0, 1);
            // A mask broadcast along the middle axis.
            let m = Input::new(
                LAYOUTS[(layout as usize + 1) % 6],
                &[3, 1, 7],
                DType::Bool,
                0.0,
                1.0,
                2,
            );
            for value in [f64::NEG_INFINITY, f64::NAN, 2.0, -0.0] {
                let (hx, hm) = (x.host(), m.host());
                let want = hx.zip(&hm, |a, b| if b != 0.0 { dt.round(value) } else { a });
                check_dt(
                    &format!("masked_fill {dt} {layout:?} {value}"),
                    || x.tensor().masked_fill(&m.tensor(), value),
                    dt,
                    &want,
                    EXACT,
                );
            }
        }
    }
}

/// `t[args] = src` on the host: the region's flat positions come from
/// slicing an array of positions with the same arguments.
fn host_assign(t: &NdArray, args: &[SliceArg], src: &NdArray) -> NdArray {
    let positions = NdArray::new(&t.shape, (0..t.numel()).map(|i| i as f64).collect());
    let region = positions.slice(args);
    let src = src.broadcast_to(&region.shape);
    let mut out = t.clone();
    for (p, v) in region.data.iter().zip(&src.data) {
        out.data[*p as usize] = *v;
    }
    out
}

#[test]
fn slice_assign_matches_the_host() {
    let cases: Vec<Vec<SliceArg>> = vec![
        s![1],
        s![.., 2..5],
        s![..;2, ..;3],
        s![-1..;-2, 1],
        s![.., .., ..;-1],
        s![NewAxis, 0..2, -1],
        s![1..2, 3..3],
        s![..;-3, 1..;4, ..2],
        s![2, 4, 6],
    ];
    for dt in [DType::F32, DType::I32, DType::F16, DType::Bool] {
        for (ci, args) in cases.iter().enumerate() {
            let layout = LAYOUTS[ci % LAYOUTS.len()];
            let x = Input::new(layout, &[4, 6, 7], dt, -9.0, 9.0, ci as u64);
            let region = x.tensor().slice(args.clone()).shape().to_vec();
            // The source: the full region, or broadcast from its last axis.
            let mut shapes = vec![region.clone()];
            if let Some(last) = region.last() {
                shapes.push(vec![*last]);
            }
            for (si, shape) in shapes.iter().enumerate() {
                let src = Input::new(
                    LAYOUTS[(ci + si + 2) % 6],
                    shape,
                    DType::F32,
                    -50.0,
                    50.0,
                    9,
                );
                let want = host_assign(&x.host(), args, &src.host().round(dt));
                check_dt(
                    &format!("slice_assign {dt} {args:?} from {shape:?}"),
                    || x.tensor().slice_assign(args.clone(), src.tensor()),
                    dt,
                    &want,
                    EXACT,
                );
            }
            // A scalar source.
            let want = host_assign(&x.host(), args, &NdArray::scalar(dt.round(3.0)));
            check(
                &format!("slice_assign {dt} {args:?} = 3"),
                || x.tensor().slice_assign(args.clone(), 3),
                &want,
                EXACT,
            );
        }
    }
}

#[test]
fn slice_assign_is_one_kernel_with_its_reader() {
    let dev = test_device();
    let x = Tensor::from_vec((0..64 * 32).map(|v| v as f32).collect(), [64, 32], &dev);
    let src = Tensor::from_vec(vec![-1.0f32; 32 * 8], [32, 8], &dev);
    x.realize().unwrap();
    src.realize().unwrap();
    let y = x.slice_assign(s![..;2, 4..12], &src).exp();
    let sched = y.schedule(Fusion::On);
    assert_eq!(sched.items.len(), 1, "{sched}");
    // The old values and the new ones are each read once at most.
    assert!(sched.bytes_read() <= (64 * 32 + 32 * 8) * 4, "{sched}");
    // A KV-cache style update: write row t of a cache, read it back.
    let cache = Tensor::zeros([4, 3], DType::F32, &dev);
    let row = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev);
    let c = cache.slice_assign(s![2], &row);
    assert_eq!(
        c.to_vec::<f32>().unwrap(),
        vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0]
    );
}

#[test]
fn bad_updates_panic_with_the_shapes() {
    let dev = test_device();
    let x = Tensor::zeros([3, 4], DType::F32, &dev);
    let msg = |f: &dyn Fn()| {
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_err();
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap()
    };
    let src = Tensor::zeros([3], DType::F32, &dev);
    let m = msg(&|| {
        x.slice_assign(s![.., 1..3], &src);
    });
    assert!(
        m.contains("slice_assign") && m.contains("[3]") && m.contains("[3, 2]"),
        "{m}"
    );
    let m = msg(&|| {
        x.slice_assign(s![5], 1.0);
    });
    assert!(m.contains("slice_assign") && m.contains("index 5"), "{m}");
    let m = msg(&|| {
        x.masked_fill(&Tensor::zeros([3, 4], DType::F32, &dev), 1.0);
    });
    assert!(m.contains("bool"), "{m}");
    let m = msg(&|| {
        x.masked_fill(&Tensor::zeros([2, 3, 4], DType::Bool, &dev), 1.0);
    });
    assert!(m.contains("masked_fill") && m.contains("[2, 3, 4]"), "{m}");
}
