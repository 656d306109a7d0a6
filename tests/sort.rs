//! Sorting (`sort`, `argsort`, `topk`) against an exact host reference (a
//! stable sort of each row with NaN above `+inf`): every layout, every
//! axis (negative too), halves, integers and bools, `F64` and `I64` (64-bit
//! keys: values equal as `f32` or beyond `i32` stay apart), empty,
//! single-element, prime and long rows (on the GPU: the radix sort and,
//! for `topk`, the radix select over many CTAs), many duplicates
//! (stability), NaN, infinities and `-0.0`, both directions, and the
//! fusion of producers into the sort kernel.

mod common;

use common::*;
use smelt::{DType, Element, Fusion, KernelKind, SliceArg, Tensor};
use smelt_codegen::ptx::{self, Target};
use std::cmp::Ordering;

/// PyTorch's order: NaN above everything, `-0.0 == 0.0`.
fn order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap(),
    }
}

/// Host stable sort of `x` along `axis`, keeping the first `k` of each
/// row: (values, indices).
fn host_sort(x: &NdArray, axis: usize, descending: bool, k: usize) -> (NdArray, NdArray) {
    let mut out_shape = x.shape.clone();
    out_shape[axis] = k;
    let n = x.shape[axis];
    let mut vals = NdArray::full(&out_shape, 0.0);
    let mut idx = NdArray::full(&out_shape, 0.0);
    let inner: usize = x.shape[axis + 1..].iter().product();
    let outer: usize = x.shape[..axis].iter().product();
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * n + j) * inner + i;
            let mut pos: Vec<usize> = (0..n).collect();
            pos.sort_by(|p, q| {
                let c = order(x.data[at(*p)], x.data[at(*q)]);
                if descending {
                    c.reverse()
                } else {
                    c
                }
            });
            for (j, p) in pos.iter().take(k).enumerate() {
                let dst = (o * k + j) * inner + i;
                vals.data[dst] = x.data[at(*p)];
                idx.data[dst] = *p as f64;
            }
        }
    }
    (vals, idx)
}

/// Checks `sort` (values and indices) and `argsort` of `x` along every
/// axis (each as its positive and negative spelling in turn), both
/// directions, and `topk` for `ks` (capped at the axis length).
fn check_all_axes(what: &str, x: &Input, ks: &[usize]) {
    let dt = x.base.dtype();
    let host = x.host();
    let rank = host.ndim() as isize;
    for a in 0..rank {
        let signed = if a % 2 == 0 { a } else { a - rank };
        let n = host.shape[a as usize];
        for descending in [false, true] {
            let (v, i) = host_sort(&host, a as usize, descending, n);
            let label = format!("{what} {dt} {:?} axis {signed} desc={descending}", x.layout);
            check_dt(
                &label,
                || x.tensor().sort(signed, descending).0,
                dt,
                &v,
                EXACT,
            );
            check_dt(
                &format!("{label} indices"),
                || x.tensor().sort(signed, descending).1,
                DType::I64,
                &i,
                EXACT,
            );
            check_dt(
                &format!("{label} argsort"),
                || x.tensor().argsort(signed, descending),
                DType::I64,
                &i,
                EXACT,
            );
            for &k in ks.iter().filter(|k| **k <= n) {
                let (tv, ti) = host_sort(&host, a as usize, descending, k);
                let l = format!("{label} topk {k}");
                check_dt(
                    &l,
                    || x.tensor().topk(k, signed, descending).0,
                    dt,
                    &tv,
                    EXACT,
                );
                check_dt(
                    &format!("{l} indices"),
                    || x.tensor().topk(k, signed, descending).1,
                    DType::I64,
                    &ti,
                    EXACT,
                );
            }
        }
    }
}

#[test]
fn every_layout_axis_and_dtype() {
    // Many duplicates: stability decides the indices.
    let vals = [
        1.5, -2.0, 0.0, 3.0, -2.0, 1.5, 1.0, -7.0, 0.0, 3.0, -1.0, 1.5,
    ];
    let dts = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::Bool,
        DType::F64,
        DType::I64,
    ];
    for dt in dts {
        for layout in LAYOUTS {
            let x = Input::with_values(layout, &[3, 5, 7], dt, &vals);
            check_all_axes("layouts", &x, &[0, 1, 3]);
        }
    }
}

#[test]
fn row_lengths_around_chunks() {
    // Empty, single, primes, a CTA's on-chip sort (the bitonic sort's
    // register windows change at 2^5 and 2^9 pairs) and, past 16384, the
    // radix sort and select; rows along the last axis and the first.
    for n in [0, 1, 2, 3, 31, 33, 511, 1031, 4099, 16384, 16411] {
        for shape in [vec![3, n], vec![n, 2]] {
            let x = Input::new(Layout::Contiguous, &shape, DType::F32, -1.0, 1.0, n as u64);
            check_all_axes(&format!("n={n}"), &x, &[0, 1, 5, n]);
            // Few distinct integers: long runs of ties.
            let xi = Input::new(Layout::Strided, &shape, DType::I32, -5.0, 5.0, 7 + n as u64);
            check_all_axes(&format!("n={n}"), &xi, &[2]);
        }
    }
}

#[test]
fn long_rows() {
    let x = Input::new(Layout::Contiguous, &[1, 100003], DType::F32, -1.0, 1.0, 11);
    check_all_axes("long", &x, &[7]);
    let h = Input::new(Layout::Permuted, &[20011, 2], DType::F16, -4.0, 4.0, 13);
    check_all_axes("long", &h, &[20011]);
}

/// Rows longer than the on-chip chunk (16384): the GPU's radix sort (a
/// full sort, or `topk` with `k > 16384`) and radix select (`topk` up to
/// 16384; its final on-chip sort of up to 16384 pairs),
/// through views, in every sort dtype, with ties, NaN, infinities and
/// `-0.0` (their payloads kept), and many rows.
#[test]
fn long_rows_through_radix_sort_and_select() {
    let inf = f64::INFINITY;
    // 23 values (prime, so rows do not repeat in step): ties everywhere.
    let specials = [
        1.0,
        f64::NAN,
        -0.0,
        -inf,
        inf,
        0.0,
        -1.5,
        2.0,
        1.0,
        -0.0,
        f64::NAN,
        3.0,
        -inf,
        0.5,
        -2.0,
        2.0,
        0.0,
        inf,
        -1.5,
        7.0,
        -3.0,
        0.25,
        1.0,
    ];
    for (layout, dt) in [
        (Layout::Flipped, DType::F32),
        (Layout::Permuted, DType::F16),
        (Layout::Contiguous, DType::BF16),
    ] {
        let x = Input::with_values(layout, &[2, 16411], dt, &specials);
        check_all_axes("long specials", &x, &[1, 7, 16384, 16385]);
    }
    let x = Input::new(Layout::Strided, &[2, 20011], DType::F32, -1.0, 1.0, 5);
    check_all_axes("long strided", &x, &[1, 7, 20011]);
    let xi = Input::new(Layout::Flipped, &[2, 20011], DType::I32, -9.0, 9.0, 6);
    check_all_axes("long ties", &xi, &[1, 7, 5000]);
    // Narrow dtypes sort by fewer key digits (bools and U8: 1 pass, I8
    // and BF16: 2, I16 and F16: 3), full ranges with negatives.
    for (dt, lo, hi) in [
        (DType::U8, 0.0, 256.0),
        (DType::I8, -128.0, 128.0),
        (DType::I16, -32768.0, 32768.0),
        (DType::F16, -7e4, 7e4),
        (DType::BF16, -1e30, 1e30),
    ] {
        let x = Input::new(Layout::Flipped, &[2, 16411], dt, lo, hi, 10);
        check_all_axes("long narrow", &x, &[16385]);
    }
    let xb = Input::new(Layout::Permuted, &[20011, 2], DType::Bool, 0.0, 1.0, 8);
    check_all_axes("long bools", &xb, &[1, 7]);
    // Several tiles of 2048 and one partial, along the first axis of a
    // permuted view (rows strided in memory).
    let xl = Input::new(Layout::Permuted, &[65539, 2], DType::F32, -1e3, 1e3, 9);
    check_all_axes("65536+3", &xl, &[1, 7, 65539]);
}

/// Narrow dtypes sort on chip with 32-bit pairs (the key packed, then the
/// position) where both fit 31 bits: every narrow dtype over its full
/// range (halves overflowing to infinities), rows from 2 to 16384, and
/// F16 rows past 4096, whose 19 key bits and 13 position bits take 64-bit
/// pairs again.
#[test]
fn narrow_keys_on_chip() {
    for (dt, lo, hi) in [
        (DType::Bool, 0.0, 1.0),
        (DType::U8, 0.0, 256.0),
        (DType::I8, -128.0, 128.0),
        (DType::I16, -32768.0, 32768.0),
        (DType::F16, -7e4, 7e4),
        (DType::BF16, -1e30, 1e30),
    ] {
        // Past 4096 F16 pairs are wide; the others stay narrow.
        let long = if dt.is_float() { 4097 } else { 1031 };
        for n in [2, 33, long] {
            let x = Input::new(Layout::Flipped, &[3, n], dt, lo, hi, n as u64);
            check_all_axes(&format!("narrow n={n}"), &x, &[n - 1]);
        }
    }
    let x = Input::new(Layout::Permuted, &[16384, 2], DType::I16, -9.0, 9.0, 3);
    check_all_axes("narrow ties n=16384", &x, &[16383]);
}

/// `topk` with `k` at most an eighth of the row: on the GPU, rows up to
/// 4096 take a CTA per row that radix-selects the `k` in shared memory
/// (one launch) and sorts only those, longer ones the select over many
/// CTAs; larger `k` sorts the row (on chip up to 16384). Rows around
/// the thresholds, through views, with all-equal rows (the select decides
/// every digit of the key and of the position), few distinct integers,
/// NaN, infinities and `-0.0`, in both directions.
#[test]
fn short_rows_small_k_select_on_chip() {
    for (n, ks) in [
        (8, vec![1, 2]),
        (64, vec![1, 8, 9]),
        (257, vec![1, 7, 32, 33]),
        (1031, vec![3, 128, 129]),
        (4096, vec![8, 64, 512, 513]),
        (4097, vec![8, 512, 513]),
    ] {
        let x = Input::new(Layout::Flipped, &[3, n], DType::F32, -1.0, 1.0, n as u64);
        check_all_axes(&format!("select n={n}"), &x, &ks);
        let xi = Input::new(
            Layout::Permuted,
            &[n, 2],
            DType::I32,
            -3.0,
            3.0,
            n as u64 + 1,
        );
        check_all_axes(&format!("select ties n={n}"), &xi, &ks);
        let zero = Input::with_values(Layout::Strided, &[2, n], DType::BF16, &[0.5]);
        check_all_axes(&format!("select equal n={n}"), &zero, &ks);
    }
    let inf = f64::INFINITY;
    let specials = [
        1.0,
        f64::NAN,
        -0.0,
        -inf,
        inf,
        0.0,
        -1.5,
        f64::NAN,
        0.0,
        2.0,
        -inf,
    ];
    for dt in [DType::F32, DType::F16] {
        let x = Input::with_values(Layout::Contiguous, &[5, 300], dt, &specials);
        check_all_axes("select specials", &x, &[1, 2, 5, 37]);
    }
}

/// The GPU launches of a kernel sorting `x` along its last axis and
/// keeping `k`: one module, one entry per launch, each grid at least 1.
fn gpu_launches(x: &Tensor, k: usize) -> Vec<ptx::Launch> {
    let n = *x.shape().last().unwrap();
    let v = if k == n {
        x.sort(-1, false).0
    } else {
        x.topk(k, -1, true).0
    };
    let s = v.schedule(Fusion::On);
    assert_eq!(s.items.len(), 1);
    let p = ptx::emit(&s.items[0].kernel, &Target::CHECKED[1]).expect("emit");
    for l in &p.launches {
        assert!(p.ptx.contains(&format!(".entry {}(", l.entry)));
        assert!(l.grid.0 >= 1 && l.block.0 <= 1024);
    }
    p.launches
}

/// Rows up to 16384 sort on chip in one launch; longer rows take the
/// radix sort's 3 launches per 8-bit digit (histogram, scan, scatter)
/// or, for `topk` up to 16384, the select's clear, a pass per digit of
/// the key and of the position, collect and the final sort.
#[test]
fn long_rows_launch_the_radix_passes() {
    let dev = test_device();
    let x = |n: usize| Tensor::zeros([4, n], DType::F32, &dev);
    assert_eq!(gpu_launches(&x(16384), 16384).len(), 1);
    assert_eq!(gpu_launches(&x(4096), 8).len(), 1);
    assert_eq!(gpu_launches(&x(16384), 2049).len(), 1);
    assert_eq!(gpu_launches(&x(16384), 8).len(), 1 + 4 + 2 + 2);
    let sort = gpu_launches(&x(1 << 20), 1 << 20);
    assert_eq!(sort.len(), 12);
    // Histograms and scatters over (row, tile of 2048), scans over
    // (row, digit).
    assert_eq!(
        sort.iter().map(|l| l.grid.0).collect::<Vec<_>>()[..3],
        [4 * 512, 4 * 256, 4 * 512]
    );
    // Positions below 2^20 need 3 digits after the key's 4.
    assert_eq!(gpu_launches(&x(1 << 20), 8).len(), 1 + 4 + 3 + 2);
    assert_eq!(gpu_launches(&x(16385), 8).len(), 1 + 4 + 2 + 2);
    // k past the on-chip chunk: the radix sort, storing k (also where k
    // is at most an eighth of the row: a select's final on-chip sort
    // could not hold it).
    assert_eq!(gpu_launches(&x(32768), 16385).len(), 12);
    assert_eq!(gpu_launches(&x(8 * 16385), 16385).len(), 12);
    // 64-bit keys: an on-chip chunk of 8192, 8 radix passes, 8 key
    // digits to select.
    for dt in [DType::F64, DType::I64] {
        let w = |n: usize| Tensor::zeros([4, n], dt, &dev);
        assert_eq!(gpu_launches(&w(8192), 8192).len(), 1, "{dt}");
        assert_eq!(gpu_launches(&w(4096), 8).len(), 1, "{dt}");
        assert_eq!(gpu_launches(&w(8193), 8193).len(), 3 * 8, "{dt}");
        assert_eq!(gpu_launches(&w(8193), 8192).len(), 1 + 8 + 2 + 2, "{dt}");
        assert_eq!(gpu_launches(&w(1 << 20), 8).len(), 1 + 8 + 3 + 2, "{dt}");
        assert_eq!(gpu_launches(&w(8 * 8193), 8193).len(), 3 * 8, "{dt}");
    }
    // Narrow keys: a pass per digit that orders them.
    let narrow = |dt| Tensor::zeros([4, 1 << 20], dt, &dev);
    for (dt, passes) in [
        (DType::BF16, 2),
        (DType::F16, 3),
        (DType::I16, 3),
        (DType::I8, 2),
        (DType::U8, 1),
        (DType::Bool, 1),
        (DType::I32, 4),
    ] {
        assert_eq!(gpu_launches(&narrow(dt), 1 << 20).len(), 3 * passes, "{dt}");
    }
}

/// `F64` sorts by all 64 bits of its key: values that round to one `f32`
/// (1 and `1 + 2^-40`, random values in `[1, 1 + 1e-9)`) keep their order,
/// among NaN, infinities, `-0.0` and subnormals, on every GPU path of
/// 64-bit keys: rows sorted on chip (1031, and 8192: a whole chunk),
/// `topk` selected on chip (rows up to 4096, `k` up to an eighth: 1031)
/// and over many CTAs (4099 and 8209 with small `k`; 8209 with `k =
/// 8192`, whose final on-chip sort takes a whole chunk), and the radix
/// sort (8209, past the chunk) with its 8 passes.
#[test]
fn f64_keys_on_every_path() {
    let e = |p| 2f64.powi(p);
    // 17 values (prime, so rows do not repeat in step), ties among them.
    let specials = [
        1.0,
        1.0 + e(-40),
        f64::NAN,
        1.0 - e(-45),
        -0.0,
        1.0 + e(-52),
        -1.0 - e(-40),
        f64::INFINITY,
        0.0,
        -1.0,
        5e-324,
        -f64::INFINITY,
        1.0 + e(-40),
        1e300,
        -1e-300,
        f64::NAN,
        -1.0 - e(-41),
    ];
    // Few cases of long rows: every distinct kernel costs CI a ptxas run.
    for (n, ks) in [
        (2, vec![1]),
        (31, vec![3]),
        (1031, vec![3, 129]),
        (8192, vec![]),
        (8209, vec![7, 8192]),
    ] {
        let x = Input::with_values(Layout::Flipped, &[2, n], DType::F64, &specials);
        check_all_axes(&format!("f64 n={n}"), &x, &ks);
    }
    // Distinct as `f64`, nearly all equal as `f32`; rows along the first
    // axis of a permuted view (strided in memory).
    let x = Input::new(Layout::Permuted, &[4099, 2], DType::F64, 1.0, 1.0 + 1e-9, 3);
    check_all_axes("f64 near 1, long", &x, &[7]);
}

/// Host stable sort (by `cmp`) of the lines along `axis` of the
/// row-major 2-d `x` of `shape`, keeping `k` of each: the values and
/// indices, row-major.
fn host_sort_by<T: Copy>(
    x: &[T],
    shape: [usize; 2],
    axis: usize,
    k: usize,
    cmp: impl Fn(&T, &T) -> Ordering,
) -> (Vec<T>, Vec<i64>) {
    let n = shape[axis];
    let lines = shape[1 - axis];
    let at = |line: usize, j: usize| match axis {
        0 => j * shape[1] + line,
        _ => line * shape[1] + j,
    };
    let Some(&first) = x.first() else {
        return (Vec::new(), Vec::new());
    };
    let mut out = vec![(first, 0i64); lines * k];
    for line in 0..lines {
        let mut pos: Vec<usize> = (0..n).collect();
        pos.sort_by(|p, q| cmp(&x[at(line, *p)], &x[at(line, *q)]));
        for (j, p) in pos.iter().take(k).enumerate() {
            let dst = match axis {
                0 => j * lines + line,
                _ => line * k + j,
            };
            out[dst] = (x[at(line, *p)], *p as i64);
        }
    }
    out.into_iter().unzip()
}

/// A view of a row-major `[r, c]` tensor.
#[derive(Clone, Copy, Debug)]
enum View {
    Contiguous,
    Permuted,
    /// Both axes flipped.
    Flipped,
    /// Every other column, from the last (step -2).
    StepBack,
}

impl View {
    /// The view of `base` (of shape `[r, c]`) and its shape.
    fn of(self, base: &Tensor, [r, c]: [usize; 2]) -> (Tensor, [usize; 2]) {
        let all = |step| SliceArg::Range {
            start: None,
            end: None,
            step,
        };
        match self {
            View::Contiguous => (base.clone(), [r, c]),
            View::Permuted => (base.permute([1, 0]), [c, r]),
            View::Flipped => (base.flip(..), [r, c]),
            View::StepBack => (base.slice(vec![all(1), all(-2)]), [r, c.div_ceil(2)]),
        }
    }

    /// The base's element (row-major) at `(i, j)` of the view.
    fn source(self, [r, c]: [usize; 2], i: usize, j: usize) -> usize {
        match self {
            View::Contiguous => i * c + j,
            View::Permuted => j * c + i,
            View::Flipped => (r - 1 - i) * c + (c - 1 - j),
            View::StepBack => i * c + (c - 1 - 2 * j),
        }
    }
}

/// Checks `sort`, `argsort` and `topk` (for `ks` up to the axis length)
/// of the views `kinds` of `data` (an `[r, c]` tensor) along both axes, both
/// directions, against [`host_sort_by`] with `cmp`: values compared by
/// `same`, indices exactly.
fn check_exact<T: Element + std::fmt::Debug>(
    what: &str,
    data: Vec<T>,
    shape: [usize; 2],
    kinds: &[View],
    ks: &[usize],
    cmp: impl Fn(&T, &T) -> Ordering + Copy,
    same: impl Fn(T, T) -> bool,
) {
    let base = Tensor::from_vec(data.clone(), shape, &test_device());
    for &kind in kinds {
        let (t, vshape) = kind.of(&base, shape);
        assert_eq!(t.shape(), vshape, "test bug: {kind:?}");
        let host: Vec<T> = (0..vshape[0] * vshape[1])
            .map(|p| data[kind.source(shape, p / vshape[1], p % vshape[1])])
            .collect();
        let shape = vshape;
        for axis in [0, 1] {
            let signed = if axis == 1 { -1 } else { 0 };
            let n = shape[axis];
            for descending in [false, true] {
                let label = format!("{what} {kind:?} {shape:?} axis {signed} desc={descending}");
                let order = |a: &T, b: &T| {
                    let c = cmp(a, b);
                    if descending {
                        c.reverse()
                    } else {
                        c
                    }
                };
                let run = |k: usize, (v, i): (Tensor, Tensor)| {
                    let (hv, hi) = host_sort_by(&host, shape, axis, k, order);
                    let got = run_labelled(&label, || Ok((v.to_vec::<T>()?, i.to_vec::<i64>()?)));
                    assert_eq!(got.1, hi, "{label} k={k}: indices");
                    let bad = got.0.iter().zip(&hv).position(|(g, w)| !same(*g, *w));
                    assert!(
                        bad.is_none() && got.0.len() == hv.len(),
                        "{label} k={k}: value {bad:?}: got {:?}, want {:?}",
                        bad.map(|p| got.0[p]),
                        bad.map(|p| hv[p])
                    );
                };
                run(n, t.sort(signed, descending));
                let (_, hi) = host_sort_by(&host, shape, axis, n, order);
                let args = run_labelled(&label, || t.argsort(signed, descending).to_vec::<i64>());
                assert_eq!(args, hi, "{label}: argsort");
                for &k in ks.iter().filter(|k| **k <= n) {
                    run(k, t.topk(k, signed, descending));
                }
            }
        }
    }
}

/// `I64` sorts by all 64 bits: values beyond `i32` (near `i64::MIN` and
/// `i64::MAX`, around `±2^31` and `2^40`) with many ties, through views
/// (permuted, flipped, a negative step), sizes 0, 1 and primes, on every
/// GPU path of 64-bit keys (see [`f64_keys_on_every_path`]): rows of 37
/// and 1031 on chip, `topk` selected on chip (1031) and over many CTAs
/// (4099, 8206 with `k = 8192`, 16411), the radix sort (8206 and 16411).
#[test]
fn i64_keys_on_every_path() {
    let palette = [
        i64::MIN,
        i64::MAX,
        i64::MIN + 1,
        i64::MAX - 1,
        1 << 31,
        -(1 << 31),
        (1 << 31) - 1,
        -(1 << 31) - 1,
        1 << 32,
        -(1 << 32),
        1 << 40,
        (1 << 40) + 1,
        0,
        -1,
        3,
        1 << 62,
        -(1 << 62) - 7,
    ];
    let values = |n: usize, seed: u64| -> Vec<i64> {
        let mut h = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                h ^= h << 13;
                h ^= h >> 7;
                h ^= h << 17;
                // Offsets of 0..3 wrap past the extremes to the others.
                palette[(h % palette.len() as u64) as usize].wrapping_add((h >> 40) as i64 % 4)
            })
            .collect()
    };
    use View::*;
    let all = [Contiguous, Permuted, Flipped, StepBack];
    for (shape, kinds, ks) in [
        ([3, 0], &[Contiguous][..], vec![0]),
        ([3, 1], &[Contiguous, Permuted], vec![1]),
        ([5, 37], &all, vec![0, 1, 4, 37]),
        ([3, 1031], &[Contiguous, Permuted], vec![3, 129]),
        ([2, 4099], &[Flipped], vec![7, 600]),
        ([2, 16411], &[Contiguous], vec![7]),
        ([2, 16411], &[StepBack], vec![8192]),
    ] {
        let data = values(shape[0] * shape[1], shape[1] as u64);
        let what = format!("i64 {shape:?}");
        check_exact(&what, data, shape, kinds, &ks, i64::cmp, |a, b| a == b);
    }
}

#[test]
fn nan_infinities_and_signed_zeros() {
    let inf = f64::INFINITY;
    let vals = [
        1.0,
        f64::NAN,
        -0.0,
        -inf,
        inf,
        0.0,
        f64::NAN,
        -1.0,
        inf,
        -0.0,
        -inf,
        0.0,
        0.5,
    ];
    for layout in [Layout::Contiguous, Layout::Flipped, Layout::Permuted] {
        for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            let x = Input::with_values(layout, &[4, 13], dt, &vals);
            check_all_axes("nan/inf", &x, &[1, 4, 13]);
        }
    }
    // Signed zeros keep their sign and their order (equal keys).
    let (x, _) = make(&[0.0, -0.0, -0.0, 0.0], &[4], DType::F32);
    let (v, i) = x.sort(0, false);
    let v = v.to_vec::<f32>().unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
    let signs: Vec<bool> = v.iter().map(|x| x.is_sign_negative()).collect();
    assert_eq!(signs, vec![false, true, true, false]);
}

#[test]
fn zero_dim_and_broadcast_rows() {
    let dev = test_device();
    let s = Tensor::full([0usize; 0], 2.5, DType::F32, &dev);
    let (v, i) = s.sort(0, false);
    assert_eq!(
        (values(&v, Fusion::On), values(&i, Fusion::On)),
        (vec![2.5], vec![0.0])
    );
    assert_eq!(s.topk(0, -1, true).0.shape(), &[0]);
    // A row-invariant operand: every element ties, indices in order.
    let (x, _) = make(&[1.0, 2.0], &[2, 1], DType::F32);
    let i = x.expand([2, 4]).argsort(1, true);
    assert_eq!(values(&i, Fusion::On), vec![0., 1., 2., 3., 0., 1., 2., 3.]);
}

#[test]
fn producers_fuse_into_one_sort_kernel() {
    let x = Input::new(Layout::Permuted, &[6, 9], DType::F32, -1.0, 1.0, 3);
    let y = || (x.tensor() * -2.0).exp();
    let s = y().sort(1, true).0.schedule(Fusion::On);
    assert_eq!(
        s.items.len(),
        1,
        "{:?}",
        s.items.iter().map(|i| &i.kernel.name).collect::<Vec<_>>()
    );
    assert_eq!(s.items[0].kernel.kind, KernelKind::Sort);
    let host = x.host().map(|v| (v * -2.0).exp());
    let (want, _) = host_sort(&host, 1, true, 9);
    check(
        "sort(exp(-2x))",
        || y().sort(1, true).0,
        &want,
        tol(DType::F32),
    );
    // Values and indices realized together: one kernel.
    let (v, i) = x.tensor().topk(4, 0, false);
    let both = smelt::Schedule::new(&[v.node().clone(), i.node().clone()], Fusion::On);
    assert_eq!(both.items.len(), 1);
    // Opposite directions do not share a kernel (one sort per kernel).
    let a = x.tensor().sort(0, false).0;
    let b = x.tensor().sort(0, true).0;
    let two = smelt::Schedule::new(&[a.node().clone(), b.node().clone()], Fusion::On);
    assert_eq!(two.items.len(), 2);
    // A consumer reads the materialized sort.
    let (sv, _) = host_sort(&x.host(), 0, false, 6);
    check(
        "sort + 1",
        || x.tensor().sort(0, false).0 + 1.0,
        &sv.map(|v| v + 1.0),
        tol(DType::F32),
    );
}

#[test]
#[should_panic(expected = "topk: k = 6 exceeds the length 5 of axis 1 of a tensor of shape [3, 5]")]
fn topk_k_too_large_names_op_shape_and_axis() {
    let x = Tensor::zeros([3, 5], DType::F32, &test_device());
    let _ = x.topk(6, 1, true);
}

#[test]
#[should_panic(expected = "sort: axis 2 is out of range for a tensor of shape [3, 4] (rank 2)")]
fn bad_axis_names_op_shape_and_axis() {
    let x = Tensor::zeros([3, 4], DType::F32, &test_device());
    let _ = x.sort(2, false);
}

#[test]
#[should_panic(expected = "argsort: axis -3 is out of range")]
fn bad_negative_axis_panics() {
    let x = Tensor::zeros([3, 4], DType::I32, &test_device());
    let _ = x.argsort(-3, true);
}
