//! Scans (`cumsum`, `cumprod`, `cummax`, `cummin`, `logcumsumexp`)
//! against an f64 (floats) or exact (integers) host reference: every
//! layout, every axis (negative too), halves, integers and bools, empty,
//! single-element and long rows, NaN and infinities, and the fusion of
//! producers into the scan kernel.

mod common;

use common::*;
use smelt::{DType, Fusion, KernelKind, Tensor};
use smelt_codegen::ptx::{launch, Target};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Sum,
    Prod,
    Max,
    Min,
    Lse,
}

/// Host scan of `x` along `axis`: values (f64, or exact wrapping `i64`
/// arithmetic with `int`, as `cumsum`/`cumprod` of integers compute) and, for max/min, PyTorch's indices (the later
/// index on ties, the latest NaN once one was seen). Also, per element,
/// the scale its rounding error is measured against: the running sum of
/// magnitudes for sums (cancellation can make the sum itself tiny), the
/// magnitude of the result otherwise.
fn host_scan(x: &NdArray, axis: usize, op: Op, int: bool) -> (NdArray, NdArray, NdArray) {
    let mut vals = x.clone();
    let mut idx = NdArray::full(&x.shape, 0.0);
    let mut scale = NdArray::full(&x.shape, 0.0);
    let n = x.shape[axis];
    let stride: usize = x.shape[axis + 1..].iter().product();
    for start in 0..x.numel() {
        if !(start / stride).is_multiple_of(n.max(1)) {
            continue; // not the first element of its row
        }
        let (mut acc, mut at, mut mag) = (f64::NAN, 0usize, 0.0);
        let mut iacc = 0i64;
        for i in 0..n {
            let p = start + i * stride;
            let v = x.data[p];
            if i == 0 {
                acc = v;
                iacc = v as i64;
            } else {
                acc = match op {
                    Op::Sum if int => {
                        iacc = iacc.wrapping_add(v as i64);
                        iacc as f64
                    }
                    Op::Prod if int => {
                        iacc = iacc.wrapping_mul(v as i64);
                        iacc as f64
                    }
                    Op::Sum => acc + v,
                    Op::Prod => acc * v,
                    Op::Max | Op::Min => {
                        let wins = if op == Op::Max { v >= acc } else { v <= acc };
                        if v.is_nan() || (!acc.is_nan() && wins) {
                            at = i;
                            v
                        } else {
                            acc
                        }
                    }
                    Op::Lse => {
                        if acc.is_nan() || v.is_nan() {
                            f64::NAN
                        } else if acc.max(v).is_infinite() {
                            // log(e^a + e^inf) = inf; both -inf stays -inf.
                            acc.max(v)
                        } else {
                            let m = acc.max(v);
                            m + ((acc - m).exp() + (v - m).exp()).ln()
                        }
                    }
                };
            }
            mag += v.abs();
            vals.data[p] = acc;
            idx.data[p] = at as f64;
            scale.data[p] = if op == Op::Sum { mag } else { acc.abs() };
        }
    }
    (vals, idx, scale)
}

/// Realizes a fresh `build()` under both fusion modes; each element must
/// be within `rel * scale + abs` of `want` (NaN and infinities exactly).
fn check_scaled(
    what: &str,
    build: impl Fn() -> Tensor,
    dt: DType,
    want: &NdArray,
    scale: &NdArray,
    t: Tol,
) {
    for mode in MODES {
        let label = format!("{what} [{mode:?}]");
        let (got_dt, shape, got) = run_labelled(&label, || {
            let y = build();
            Ok((y.dtype(), y.shape().to_vec(), values(&y, mode)))
        });
        assert_eq!(got_dt, dt, "{label}: dtype");
        assert_eq!(shape, want.shape, "{label}: shape");
        for (i, ((g, w), s)) in got.iter().zip(&want.data).zip(&scale.data).enumerate() {
            let ok = if w.is_nan() || w.is_infinite() || g.is_nan() || g.is_infinite() {
                (g.is_nan() && w.is_nan()) || g == w
            } else {
                (g - w).abs() <= t.rel * s.max(w.abs()) + t.abs
            };
            assert!(
                ok,
                "{label}: element {:?} of {:?}: got {g}, want {w} (scale {s}, {t:?})",
                unravel(i, &want.shape),
                want.shape
            );
        }
    }
}

/// The tensor op for `op` (values; max/min give their values here).
fn apply(x: &Tensor, op: Op, axis: isize) -> Tensor {
    match op {
        Op::Sum => x.cumsum(axis),
        Op::Prod => x.cumprod(axis),
        Op::Max => x.cummax(axis).0,
        Op::Min => x.cummin(axis).0,
        Op::Lse => x.logcumsumexp(axis),
    }
}

/// The result dtype of `op` on `dt`.
fn out_dtype(op: Op, dt: DType) -> DType {
    match op {
        Op::Max | Op::Min => dt,
        Op::Lse => dt.to_float(),
        _ if dt.is_float() => dt,
        _ => DType::I64,
    }
}

/// Checks `op` on `x` along every axis (each as its positive and negative
/// spelling in turn), values and (max/min) indices.
fn check_all_axes(what: &str, x: &Input, op: Op, t: Tol) {
    for a in 0..x.shape.len() {
        check_axis(what, x, op, t, a);
    }
}

/// Checks `op` on `x` along axis `a` (spelled negative for odd axes),
/// values and (max/min) indices.
fn check_axis(what: &str, x: &Input, op: Op, t: Tol, a: usize) {
    let dt = x.base.dtype();
    let host = x.host();
    let rank = host.ndim() as isize;
    let a = a as isize;
    let signed = if a % 2 == 0 { a } else { a - rank };
    let int = !out_dtype(op, dt).is_float();
    let (v, i, s) = host_scan(&host, a as usize, op, int);
    let out = out_dtype(op, dt);
    let label = format!("{what} {op:?} {dt} {:?} axis {signed}", x.layout);
    check_scaled(
        &label,
        || apply(&x.tensor(), op, signed),
        out,
        &v.round(out),
        &s,
        t,
    );
    if matches!(op, Op::Max | Op::Min) {
        check_scaled(
            &format!("{label} indices"),
            || {
                let (_, i) = if op == Op::Max {
                    x.tensor().cummax(signed)
                } else {
                    x.tensor().cummin(signed)
                };
                i
            },
            DType::I64,
            &i,
            &i,
            EXACT,
        );
    }
}

/// Sums and products of floats: a few roundings of the running scale in
/// the result dtype (f32 accumulation on the GPU, f64 on the CPU).
fn scan_tol(dt: DType) -> Tol {
    match dt {
        DType::F32 => Tol::new(1e-5, 1e-6),
        d => tol(d),
    }
}

#[test]
fn every_layout_axis_and_dtype() {
    let vals = [
        1.5, -2.0, 0.0, 3.25, -0.5, 4.0, 1.0, -7.0, 0.25, 2.5, -1.0, 2.0,
    ];
    // Products of many of these would overflow the halves: values near 1.
    let near_one = [1.25, -0.75, 1.0, 0.5, -1.5, 1.125, 0.875, -1.0, 2.0];
    let cases: [(DType, &[Op]); 8] = [
        (DType::F32, &[Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Lse]),
        (DType::F64, &[Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Lse]),
        (DType::I64, &[Op::Sum, Op::Prod, Op::Max, Op::Min]),
        (DType::U8, &[Op::Sum, Op::Max, Op::Min]),
        (DType::F16, &[Op::Sum, Op::Prod, Op::Max, Op::Lse]),
        (DType::BF16, &[Op::Sum, Op::Min, Op::Lse]),
        (DType::I32, &[Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Lse]),
        (DType::Bool, &[Op::Sum, Op::Max]),
    ];
    for (dt, ops) in cases {
        for layout in LAYOUTS {
            for op in ops {
                let v: &[f64] = if *op == Op::Prod { &near_one } else { &vals };
                let x = Input::with_values(layout, &[3, 5, 7], dt, v);
                let t = scan_tol(out_dtype(*op, dt));
                check_all_axes("layouts", &x, *op, t);
            }
        }
    }
}

#[test]
fn row_lengths_around_warps_and_blocks() {
    // Empty, single, around a warp, a CTA's chunk and carries across
    // chunks, primes; rows along the last axis and along the first.
    for n in [0, 1, 2, 31, 32, 33, 127, 1031, 4099, 9973] {
        for shape in [vec![3, n], vec![n, 5]] {
            let x = Input::new(Layout::Contiguous, &shape, DType::F32, -1.0, 1.0, n as u64);
            for op in [Op::Sum, Op::Max, Op::Lse] {
                check_all_axes(&format!("n={n}"), &x, op, scan_tol(DType::F32));
            }
            let xi = Input::new(
                Layout::Strided,
                &shape,
                DType::I32,
                -50.0,
                50.0,
                7 + n as u64,
            );
            for op in [Op::Sum, Op::Min] {
                check_all_axes(&format!("n={n}"), &xi, op, EXACT);
            }
        }
    }
}

#[test]
fn long_rows() {
    let x = Input::new(Layout::Contiguous, &[1, 100003], DType::F32, -1.0, 1.0, 11);
    for op in [Op::Sum, Op::Max, Op::Min, Op::Lse] {
        check_all_axes("long", &x, op, scan_tol(DType::F32));
    }
    // Values near 1 keep a long product finite.
    let p = Input::new(Layout::Flipped, &[2, 20011], DType::F32, 0.999, 1.001, 12);
    check_all_axes("long", &p, Op::Prod, Tol::new(1e-4, 1e-6));
    let h = Input::new(Layout::Permuted, &[30011, 2], DType::F16, -1.0, 1.0, 13);
    check_all_axes("long", &h, Op::Sum, tol(DType::F16).times(2.0));
    let i = Input::new(Layout::Contiguous, &[100003], DType::I32, -1e6, 1e6, 14);
    check_all_axes("long", &i, Op::Sum, EXACT);
}

/// Asserts that `y`'s scan kernel takes the GPU's single-pass look-back
/// path (or, with `want == false`, the row walk): a status buffer, and a
/// tiled plan on every checked target. Returns the plan's vector width.
fn assert_look_back(what: &str, y: &Tensor, want: bool) -> usize {
    let s = y.schedule(Fusion::On);
    let k = &s
        .items
        .iter()
        .find(|it| it.kernel.kind == KernelKind::Scan)
        .unwrap_or_else(|| panic!("{what}: no scan kernel"))
        .kernel;
    assert_eq!(k.zeroed_output().is_some(), want, "{what}: status buffer");
    for t in Target::CHECKED {
        let launch::Plan::Scan(p) = launch::choose(k, &t) else {
            panic!("{what}: not a scan plan");
        };
        assert_eq!(p.tiles >= 2, want, "{what}: {p:?} on {t:?}");
    }
    let launch::Plan::Scan(p) = launch::choose(k, &Target::CHECKED[1]) else {
        unreachable!("checked above");
    };
    p.lanes
}

/// Float sums, products and `logcumsumexp` of rows of 2^20 on the GPU
/// carry a prefix through about 2^8 tiles and, within each, their chunks,
/// one `f32` rounding each (the row walk: one per chunk, 2^10), so they
/// get a looser bound than short rows.
const LONG_F32: Tol = Tol {
    rel: 1e-4,
    abs: 1e-6,
};

#[test]
fn long_single_rows_scan_in_tiles() {
    let n = (1 << 20) + 7;
    let x = Input::new(Layout::Contiguous, &[n], DType::F32, -1.0, 1.0, 21);
    assert_look_back("[2^20+7] cumsum", &x.tensor().cumsum(0), true);
    for op in [Op::Sum, Op::Max, Op::Min, Op::Lse] {
        check_all_axes("2^20+7", &x, op, LONG_F32);
    }
    let p = Input::new(Layout::Contiguous, &[n], DType::F32, 0.999, 1.001, 22);
    check_all_axes("2^20+7", &p, Op::Prod, Tol::new(2e-3, 1e-6));
    // Views of the scanned axis: a step of 2, and a negative step.
    for layout in [Layout::Strided, Layout::Flipped] {
        let v = Input::new(layout, &[n], DType::F32, -1.0, 1.0, 23);
        assert_look_back(&format!("{layout:?} cumsum"), &v.tensor().cumsum(0), true);
        for op in [Op::Sum, Op::Max] {
            check_all_axes("2^20+7", &v, op, LONG_F32);
        }
    }
    // Vector accesses (4 lanes of f32, 8 of bf16) and a last tile of one
    // vector.
    let m = (1 << 19) + 4;
    let v = Input::new(Layout::Contiguous, &[2, m], DType::F32, -1.0, 1.0, 29);
    let lanes = assert_look_back("[2, 2^19+4] cumsum", &v.tensor().cumsum(1), true);
    assert_eq!(lanes, 4);
    // I64 indices: 2 lanes.
    let lanes = assert_look_back("[2, 2^19+4] cummax", &v.tensor().cummax(1).1, true);
    assert_eq!(lanes, 2);
    for op in [Op::Sum, Op::Max, Op::Lse] {
        check_all_axes("2x(2^19+4)", &v, op, LONG_F32);
    }
    // bf16 over 130 rows (look-back up to 256 rows of 16-bit elements),
    // two tiles of 16384 a row, the last one vector.
    let many = Input::new(
        Layout::Contiguous,
        &[130, 16392],
        DType::BF16,
        -1.0,
        1.0,
        38,
    );
    assert_look_back("[130, 16392] bf16", &many.tensor().cumsum(1), true);
    check_axis("130x16392", &many, Op::Sum, tol(DType::BF16), 1);
    let h = Input::new(Layout::Contiguous, &[2, m], DType::BF16, -1.0, 1.0, 30);
    assert!(assert_look_back("[2, 2^19+4] bf16", &h.tensor().cumsum(1), true) > 1);
    check_all_axes("2x(2^19+4)", &h, Op::Sum, tol(DType::BF16));
    let d = Input::new(Layout::Contiguous, &[n], DType::F64, -1.0, 1.0, 24);
    for op in [Op::Sum, Op::Min, Op::Lse] {
        check_all_axes("2^20+7", &d, op, tol(DType::F64));
    }
    // Integers are exact (I64 sums; I32 min with many ties across tiles).
    let i = Input::new(Layout::Flipped, &[n], DType::I32, -1e6, 1e6, 25);
    check_all_axes("2^20+7", &i, Op::Sum, EXACT);
    let t = Input::new(Layout::Contiguous, &[n], DType::I32, -50.0, 50.0, 26);
    check_all_axes("2^20+7", &t, Op::Min, EXACT);
    // Halves accumulate in f32 and round once.
    let h = Input::new(Layout::Contiguous, &[n], DType::F16, -1.0, 1.0, 27);
    check_all_axes("2^20+7", &h, Op::Sum, tol(DType::F16));
    let b = Input::new(Layout::Strided, &[n], DType::BF16, -1.0, 1.0, 28);
    check_all_axes("2^20+7", &b, Op::Lse, tol(DType::BF16));
}

#[test]
fn few_long_rows_scan_in_tiles_through_every_view() {
    let shape = [3, 300_007];
    for layout in [
        Layout::Contiguous,
        Layout::Permuted,
        Layout::Strided,
        Layout::Flipped,
    ] {
        let x = Input::new(layout, &shape, DType::F32, -1.0, 1.0, 31);
        assert_look_back(&format!("{layout:?} cummax"), &x.tensor().cummax(1).1, true);
        for op in [Op::Sum, Op::Max, Op::Min, Op::Lse] {
            check_all_axes("3x300007", &x, op, LONG_F32);
        }
        let p = Input::new(layout, &shape, DType::F32, 0.999, 1.001, 32);
        check_all_axes("3x300007", &p, Op::Prod, Tol::new(1e-3, 1e-6));
        let i = Input::new(layout, &shape, DType::I64, -50.0, 50.0, 33);
        for op in [Op::Sum, Op::Prod, Op::Max, Op::Min] {
            check_all_axes("3x300007", &i, op, EXACT);
        }
    }
    let d = Input::new(Layout::Flipped, &shape, DType::F64, 0.999, 1.001, 34);
    for op in [Op::Prod, Op::Max, Op::Lse] {
        check_all_axes("3x300007", &d, op, tol(DType::F64));
    }
    let u = Input::new(Layout::Strided, &shape, DType::U8, 0.0, 255.0, 35);
    for op in [Op::Sum, Op::Max] {
        check_all_axes("3x300007", &u, op, EXACT);
    }
    let b = Input::new(Layout::Permuted, &shape, DType::Bool, 0.0, 2.0, 36);
    check_all_axes("3x300007", &b, Op::Sum, EXACT);
    let h = Input::new(Layout::Contiguous, &shape, DType::BF16, -1.0, 1.0, 37);
    for op in [Op::Sum, Op::Min] {
        check_all_axes("3x300007", &h, op, tol(DType::BF16));
    }
}

#[test]
fn nan_and_infinities_in_late_tiles() {
    // Finite values, with NaN and infinities first seen deep in the rows
    // (in tiles whose prefixes come from earlier tiles' states).
    let (rows, n) = (3, 300_007);
    let mut rng = Rng::new(41);
    let mut vals: Vec<f64> = (0..rows * n).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let inf = f64::INFINITY;
    // Row 0: +inf, later -inf (a NaN sum); row 1: NaN then more; row 2:
    // -inf only (logcumsumexp of -inf stays -inf until then).
    for (at, v) in [
        (100_000, inf),
        (200_000, -inf),
        (n + 150_000, f64::NAN),
        (n + 250_001, f64::NAN),
        (n + 260_000, inf),
        (2 * n + 2, -inf),
        (2 * n + 299_999, -inf),
    ] {
        vals[at] = v;
    }
    for layout in [Layout::Contiguous, Layout::Flipped] {
        for dt in [DType::F32, DType::F16] {
            let x = Input::with_values(layout, &[rows, n], dt, &vals);
            assert_look_back("nan/inf cumsum", &x.tensor().cumsum(1), true);
            let t = if dt == DType::F32 { LONG_F32 } else { tol(dt) };
            for op in [Op::Sum, Op::Max, Op::Min, Op::Lse] {
                check_all_axes("nan/inf late", &x, op, t);
            }
        }
    }
}

#[test]
fn only_few_long_rows_take_the_look_back_path() {
    let dev = test_device();
    let x = |shape: &[usize]| Tensor::zeros(shape, DType::F32, &dev);
    // Rows of one tile, and many rows, keep the row walk.
    assert_look_back("[3, 1000]", &x(&[3, 1000]).cumsum(1), false);
    assert_look_back("[1000, 4099]", &x(&[1000, 4099]).cumsum(1), false);
    assert_look_back("[300007, 3] axis 1", &x(&[300_007, 3]).cumsum(1), false);
    // Rows of 65536 keep the row walk from 256 rows (it fills the GPU),
    // from 512 rows in bf16.
    assert_look_back("[256, 65536]", &x(&[256, 65536]).cumsum(1), false);
    assert_look_back("[128, 65536]", &x(&[128, 65536]).cumsum(1), true);
    let h = |shape: &[usize]| Tensor::zeros(shape, DType::BF16, &dev);
    assert_look_back("[256, 65536] bf16", &h(&[256, 65536]).cumsum(1), true);
    assert_look_back("[512, 65536] bf16", &h(&[512, 65536]).cumsum(1), false);
    // bf16 tiles: 8-wide vectors, 4 chunks (32 elements a thread), 16384
    // elements.
    let s = h(&[1 << 24]).cumsum(0).schedule(Fusion::On);
    let launch::Plan::Scan(p) = launch::choose(&s.items[0].kernel, &Target::CHECKED[1]) else {
        panic!("not a scan plan");
    };
    assert_eq!((p.lanes, p.chunks, p.tiles), (8, 4, 1024));
    // A single row of 2^24 f32: 4-wide vectors, 4 chunks of 512 threads a
    // tile (8192 elements), a CTA each; every element read once and
    // written once.
    let big = Tensor::from_vec(vec![0f32; 1 << 24], [1 << 24], &dev).cumsum(0);
    assert_look_back("[2^24]", &big, true);
    let s = big.schedule(Fusion::On);
    let k = &s.items[0].kernel;
    let launch::Plan::Scan(p) = launch::choose(k, &Target::CHECKED[1]) else {
        panic!("not a scan plan");
    };
    let got = (p.lanes, p.tpr, p.chunks, p.tiles, p.grid);
    assert_eq!(got, (4, 512, 4, 2048, 2048));
    assert_eq!(k.bytes_read(), 4 << 24);
    // The data, plus the status buffer: a counter and a packed word (flag
    // and f32 state) a tile.
    assert_eq!(k.bytes_written(), (4 << 24) + 8 * (1 + 2048));
}

/// Asserts that `y`'s scan kernel runs in column tiles (its scanned axis
/// strided) on every checked target, chained by look-back through a status
/// buffer when `chained` (several tiles along the axis). Returns the
/// plan's vector width along the columns.
fn assert_column_tiles(what: &str, y: &Tensor, chained: bool) -> usize {
    let s = y.schedule(Fusion::On);
    let k = &s
        .items
        .iter()
        .find(|it| it.kernel.kind == KernelKind::Scan)
        .unwrap_or_else(|| panic!("{what}: no scan kernel"))
        .kernel;
    assert_eq!(
        k.zeroed_output().is_some(),
        chained,
        "{what}: status buffer"
    );
    let mut lanes = 0;
    for t in Target::CHECKED {
        let launch::Plan::Scan(p) = launch::choose(k, &t) else {
            panic!("{what}: not a scan plan");
        };
        assert!(p.cols > 0, "{what}: {p:?} on {t:?} is not in column tiles");
        assert_eq!(p.tiles >= 2, chained, "{what}: {p:?} on {t:?}");
        lanes = p.lanes;
    }
    lanes
}

/// Float sums and the like along a long strided axis carry one `f32`
/// rounding per tile of positions (and per warp within it).
const COLUMN_F32: Tol = Tol {
    rel: 2e-5,
    abs: 1e-6,
};

#[test]
fn strided_axes_scan_in_column_tiles() {
    // First axis of [2053, 136]: one column a thread (4-wide vectors
    // would leave 2 blocks of columns), 4 full blocks of 32 columns and a
    // partial one, 65 tiles of 32 positions chained by look-back (the
    // last one partial).
    let shape = [2053, 136];
    let x = Input::new(Layout::Contiguous, &shape, DType::F32, -1.0, 1.0, 51);
    assert_eq!(
        assert_column_tiles("[2053, 136] axis 0", &x.tensor().cumsum(0), true),
        1
    );
    for op in [Op::Sum, Op::Max, Op::Min, Op::Lse] {
        check_axis("2053x136", &x, op, COLUMN_F32, 0);
    }
    let p = Input::new(Layout::Contiguous, &shape, DType::F32, 0.999, 1.001, 52);
    check_axis("2053x136", &p, Op::Prod, Tol::new(1e-4, 1e-6), 0);
    // 4-wide vectors of f32 over 9 blocks of 128 columns (the last of 8),
    // 10 tiles along the axis.
    let v = Input::new(Layout::Contiguous, &[300, 1032], DType::F32, -1.0, 1.0, 50);
    assert_eq!(
        assert_column_tiles("[300, 1032] axis 0", &v.tensor().cumsum(0), true),
        4
    );
    for op in [Op::Sum, Op::Max] {
        check_axis("300x1032", &v, op, COLUMN_F32, 0);
    }
    // Views: flipped and stepped columns (one lane a thread), and a
    // broadcast row (the operand is the same in every column).
    for layout in [Layout::Flipped, Layout::Strided, Layout::Broadcast] {
        let v = Input::new(layout, &[1031, 140], DType::F32, -1.0, 1.0, 53);
        assert_column_tiles(&format!("{layout:?} axis 0"), &v.tensor().cumsum(0), true);
        for op in [Op::Sum, Op::Max] {
            check_axis("1031x140", &v, op, COLUMN_F32, 0);
        }
    }
    // The middle axis of [3, 1031, 48]: a block of 128 columns spans three
    // outer indices; 17 tiles along the axis.
    let m = Input::new(
        Layout::Contiguous,
        &[3, 1031, 48],
        DType::F32,
        -1.0,
        1.0,
        54,
    );
    assert_column_tiles("[3, 1031, 48] axis 1", &m.tensor().cumsum(1), true);
    for op in [Op::Sum, Op::Min, Op::Lse] {
        check_axis("3x1031x48", &m, op, COLUMN_F32, 1);
    }
    // Other dtypes: f64 (2 lanes), halves (8 lanes, f32 states), integers
    // (exact, I64 sums; I32 max with ties across tiles), bytes and bools.
    let d = Input::new(Layout::Contiguous, &[1500, 130], DType::F64, -1.0, 1.0, 55);
    for op in [Op::Sum, Op::Max, Op::Lse] {
        check_axis("1500x130", &d, op, tol(DType::F64), 0);
    }
    let h = Input::new(Layout::Contiguous, &[200, 2056], DType::BF16, -1.0, 1.0, 56);
    assert_eq!(
        assert_column_tiles("bf16 axis 0", &h.tensor().cumsum(0), true),
        8
    );
    for op in [Op::Sum, Op::Min] {
        check_axis("200x2056", &h, op, tol(DType::BF16), 0);
    }
    let f = Input::new(Layout::Flipped, &[1500, 40], DType::F16, -1.0, 1.0, 57);
    check_axis("1500x40", &f, Op::Lse, tol(DType::F16), 0);
    let i = Input::new(Layout::Contiguous, &[3001, 136], DType::I64, -1e6, 1e6, 58);
    for op in [Op::Sum, Op::Prod] {
        check_axis("3001x136", &i, op, EXACT, 0);
    }
    let t = Input::new(Layout::Strided, &[3001, 72], DType::I32, -50.0, 50.0, 59);
    check_axis("3001x72", &t, Op::Max, EXACT, 0);
    let u = Input::new(Layout::Contiguous, &[1200, 200], DType::U8, 0.0, 255.0, 60);
    check_axis("1200x200", &u, Op::Sum, EXACT, 0);
    let b = Input::new(Layout::Permuted, &[1200, 3, 40], DType::Bool, 0.0, 2.0, 61);
    check_axis("1200x3x40", &b, Op::Sum, EXACT, 1);
}

#[test]
fn column_tiles_of_short_axes_and_few_columns() {
    // One tile along the axis (no status buffer): a short first axis over
    // many columns, fewer positions a thread.
    let x = Input::new(Layout::Contiguous, &[13, 1000], DType::F32, -1.0, 1.0, 71);
    assert_column_tiles("[13, 1000] axis 0", &x.tensor().cumsum(0), false);
    for op in [Op::Sum, Op::Max, Op::Lse] {
        check_axis("13x1000", &x, op, scan_tol(DType::F32), 0);
    }
    // Few columns (one block, mostly idle lanes) and more than 128 of
    // them over a long axis: each tile's predecessor is the tile just
    // before it, a long chain of look-backs.
    let c = Input::new(Layout::Contiguous, &[2500, 3], DType::F32, -1.0, 1.0, 72);
    assert_column_tiles("[2500, 3] axis 0", &c.tensor().cummin(0).1, true);
    for op in [Op::Sum, Op::Min] {
        check_axis("2500x3", &c, op, COLUMN_F32, 0);
    }
}

#[test]
fn nan_and_infinities_deep_in_column_tiles() {
    let (n, cols) = (2000, 136);
    let mut rng = Rng::new(81);
    let mut vals: Vec<f64> = (0..n * cols).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let inf = f64::INFINITY;
    // Column 5: +inf, later -inf (a NaN sum); column 77: NaN then +inf;
    // column 130 (the partial block): -inf only.
    for (row, col, v) in [
        (700, 5, inf),
        (1500, 5, -inf),
        (900, 77, f64::NAN),
        (1950, 77, inf),
        (3, 130, -inf),
        (1999, 130, -inf),
    ] {
        vals[row * cols + col] = v;
    }
    for layout in [Layout::Contiguous, Layout::Flipped] {
        let x = Input::with_values(layout, &[n, cols], DType::F32, &vals);
        assert_column_tiles("nan/inf axis 0", &x.tensor().cumsum(0), true);
        for op in [Op::Sum, Op::Max, Op::Min, Op::Lse] {
            check_axis("nan/inf columns", &x, op, COLUMN_F32, 0);
        }
    }
}

#[test]
fn nan_and_infinities() {
    let inf = f64::INFINITY;
    let vals = [
        1.0,
        f64::NAN,
        3.0,
        -inf,
        inf,
        2.0,
        f64::NAN,
        -1.0,
        inf,
        inf,
        -inf,
        -inf,
        0.5,
    ];
    for layout in [Layout::Contiguous, Layout::Flipped, Layout::Permuted] {
        for dt in [DType::F32, DType::F16] {
            let x = Input::with_values(layout, &[4, 13], dt, &vals);
            for op in [Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Lse] {
                check_all_axes("nan/inf", &x, op, scan_tol(dt));
            }
        }
    }
    // Without NaN, infinities still combine: -inf logcumsumexp stays -inf
    // until a finite value; +inf then stays.
    let x = Input::with_values(
        Layout::Contiguous,
        &[2, 6],
        DType::F32,
        &[-inf, -inf, 1.0, inf, 2.0, -inf],
    );
    check_all_axes("inf", &x, Op::Lse, scan_tol(DType::F32));
}

#[test]
fn integer_scans_are_int64_and_exact_past_2_53() {
    let dev = test_device();
    // cumsum/cumprod of I32 accumulate in I64 (PyTorch): no wrap at 2^31.
    let x = Tensor::from_vec(vec![100_000i32, 100_000, 100_000, -3], [4], &dev);
    let p = x.cumprod(0);
    assert_eq!(p.dtype(), DType::I64);
    assert_eq!(
        p.to_vec::<i64>().unwrap(),
        vec![
            100_000,
            10_000_000_000,
            1_000_000_000_000_000,
            -3_000_000_000_000_000
        ]
    );
    // I64 sums beyond 2^53 are exact, and wrap at 2^63.
    let big = (1i64 << 60) + 1;
    let y = Tensor::from_vec(vec![big, big, big, big, big, big, big, big, 5], [9], &dev);
    let want: Vec<i64> = (1..=9)
        .map(|k: i64| {
            if k <= 8 {
                big.wrapping_mul(k)
            } else {
                big.wrapping_mul(8).wrapping_add(5)
            }
        })
        .collect();
    assert_eq!(y.cumsum(0).to_vec::<i64>().unwrap(), want);
    // cummax of I64 compares exactly; indices are I64.
    let z = Tensor::from_vec(vec![big, big + 1, big, i64::MIN], [4], &dev);
    let (v, i) = z.cummax(0);
    assert_eq!(
        v.to_vec::<i64>().unwrap(),
        vec![big, big + 1, big + 1, big + 1]
    );
    assert_eq!(i.dtype(), DType::I64);
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 1, 1, 1]);
    // Bools count as I64.
    let b = Tensor::from_vec(vec![true, false, true], [3], &dev);
    assert_eq!(b.cumsum(0).to_vec::<i64>().unwrap(), vec![1, 1, 2]);
}

#[test]
fn ties_take_the_later_index() {
    let (x, _) = make(&[2.0, 1.0, 2.0, 2.0, 3.0, 3.0, 0.0], &[7], DType::F32);
    let (v, i) = x.cummax(0);
    assert_eq!(
        values(&v, Fusion::On),
        vec![2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0]
    );
    assert_eq!(
        values(&i, Fusion::On),
        vec![0.0, 0.0, 2.0, 3.0, 4.0, 5.0, 5.0]
    );
    let (v, i) = x.cummin(-1);
    assert_eq!(
        values(&v, Fusion::On),
        vec![2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    );
    assert_eq!(
        values(&i, Fusion::On),
        vec![0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 6.0]
    );
}

#[test]
fn zero_dim_and_broadcast_rows() {
    let dev = test_device();
    let s = Tensor::full([0usize; 0], 2.5, DType::F32, &dev);
    assert_eq!(values(&s.cumsum(0), Fusion::On), vec![2.5]);
    assert_eq!(values(&s.cummax(-1).1, Fusion::On), vec![0.0]);
    // A row-invariant operand (stride 0 along the scanned axis).
    let (x, _) = make(&[1.0, 2.0], &[2, 1], DType::F32);
    let y = x.expand([2, 4]).cumsum(1);
    assert_eq!(
        values(&y, Fusion::On),
        vec![1.0, 2.0, 3.0, 4.0, 2.0, 4.0, 6.0, 8.0]
    );
}

#[test]
fn producers_fuse_into_one_scan_kernel() {
    let x = Input::new(Layout::Permuted, &[6, 9], DType::F32, -1.0, 1.0, 3);
    let s = (x.tensor() * 2.0).exp().cumsum(1).schedule(Fusion::On);
    assert_eq!(
        s.items.len(),
        1,
        "{:?}",
        s.items.iter().map(|i| &i.kernel.name).collect::<Vec<_>>()
    );
    assert_eq!(s.items[0].kernel.kind, smelt::KernelKind::Scan);
    let host = x.host().map(|v| (v * 2.0).exp());
    let (want, _, scale) = host_scan(&host, 1, Op::Sum, false);
    check_scaled(
        "exp(2x).cumsum(1)",
        || (x.tensor() * 2.0).exp().cumsum(1),
        DType::F32,
        &want,
        &scale,
        scan_tol(DType::F32),
    );
    // cummax's values and indices realized together: one kernel.
    let (v, i) = x.tensor().cummax(0);
    let both = smelt::Schedule::new(&[v.node().clone(), i.node().clone()], Fusion::On);
    assert_eq!(both.items.len(), 1);
    // A consumer reads the materialized scan.
    let host_c = host_scan(&x.host(), 0, Op::Sum, false);
    check_scaled(
        "cumsum + 1",
        || x.tensor().cumsum(0) + 1.0,
        DType::F32,
        &host_c.0.map(|v| v + 1.0),
        &host_c.2.map(|s| s + 1.0),
        scan_tol(DType::F32),
    );
}

#[test]
#[should_panic(expected = "cumsum: axis 2 is out of range for a tensor of shape [3, 4] (rank 2)")]
fn bad_axis_names_op_shape_and_axis() {
    let x = Tensor::zeros([3, 4], DType::F32, &test_device());
    let _ = x.cumsum(2);
}

#[test]
#[should_panic(expected = "cummax: axis -3 is out of range")]
fn bad_negative_axis_panics() {
    let x = Tensor::zeros([3, 4], DType::F32, &test_device());
    let _ = x.cummax(-3);
}
