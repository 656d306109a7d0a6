//! `gather`, `index_select` and `embedding` against exact host references:
//! every layout of the source and of the index, every dtype, empty, size-1,
//! odd and long axes; out-of-range and negative indices are an `Err` at
//! realize; a gather folds into its consumer's kernel and reads only the
//! rows it names.

mod common;

use common::*;
use smelt::{DType, Error, Fusion, Tensor};
use smelt_codegen::ptx::{emit, launch, Plan, Target};

const DTYPES: [DType; 8] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::F64,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::Bool,
];

/// The index dtypes ([`DType::is_index`]).
const INDEX_DTYPES: [DType; 2] = [DType::I64, DType::I32];

/// Stored source values: NaN and infinities among them for floats.
fn source_values(dt: DType) -> Vec<f64> {
    match dt {
        DType::Bool => vec![1.0, 0.0, 0.0, 1.0, 1.0],
        DType::I32 => vec![7.0, -3.0, 2147483647.0, -2147483648.0, 0.0, 11.0, 5.0],
        DType::I64 => vec![7.0, -3.0, 2f64.powi(62), -(2f64.powi(63)), 0.0, 11.0, 5.0],
        DType::U8 => vec![7.0, 255.0, 0.0, 128.0, 11.0],
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

/// An index input of `shape` in `layout` and index dtype `dt` whose
/// entries lie in `0..n`.
fn index_input(layout: Layout, shape: &[usize], n: usize, seed: u64, dt: DType) -> Input {
    let mut rng = Rng::new(seed);
    let vals: Vec<f64> = (0..64).map(|_| rng.below(n.max(1)) as f64).collect();
    Input::with_values(layout, shape, dt, &vals)
}

/// `gather` on the host: `src` at each index position with coordinate
/// `ax` replaced by the index.
fn host_gather(src: &NdArray, ax: usize, index: &NdArray) -> NdArray {
    NdArray::from_fn(&index.shape, |c| {
        let mut c = c.to_vec();
        c[ax] = index.at(&c) as usize;
        src.at(&c)
    })
}

#[test]
fn gather_matches_the_host_on_every_layout_and_dtype() {
    // (source shape, axis, index shape): a shorter index on other axes,
    // a longer one along the axis, size-1, empty and prime sizes.
    let cases: [(&[usize], usize, &[usize]); 5] = [
        (&[3, 5], 1, &[3, 7]),
        (&[4, 3], 0, &[2, 3]),
        (&[2, 3, 5], 1, &[2, 4, 3]),
        (&[1, 13], 1, &[1, 1]),
        (&[3, 4], 1, &[3, 0]),
    ];
    for dt in DTYPES {
        for (li, layout) in LAYOUTS.iter().enumerate() {
            for (ci, (shape, ax, ishape)) in cases.iter().enumerate() {
                let src = Input::with_values(*layout, shape, dt, &source_values(dt));
                // The index in a different layout from the source's.
                let il = LAYOUTS[(li + ci) % LAYOUTS.len()];
                let n = if il == Layout::Padded { 1 } else { shape[*ax] };
                let idt = INDEX_DTYPES[(li + ci) % 2];
                let idx = index_input(il, ishape, n, (li * 10 + ci) as u64, idt);
                let want = host_gather(&src.host(), *ax, &idx.host());
                let what = format!(
                    "gather {dt} src {layout:?} {shape:?} axis {ax} index {il:?} {idt} {ishape:?}"
                );
                check_dt(
                    &what,
                    || src.tensor().gather(*ax as isize, &idx.tensor()),
                    dt,
                    &want,
                    EXACT,
                );
            }
        }
    }
}

#[test]
fn index_select_matches_the_host_on_every_layout_and_dtype() {
    for dt in DTYPES {
        for layout in LAYOUTS {
            for ax in 0..3usize {
                let shape = [3usize, 4, 5];
                let src = Input::with_values(layout, &shape, dt, &source_values(dt));
                for idx in [vec![2i64, 0, 2, 1], vec![], vec![1]] {
                    let pos: Vec<usize> = idx.iter().map(|i| *i as usize).collect();
                    let want = src.host().take(ax, &pos);
                    let what = format!("index_select {dt} {layout:?} axis {ax} {idx:?}");
                    let it = Tensor::from_vec(idx.clone(), [idx.len()], &test_device());
                    // I64 indices, or the same as I32 on odd axes.
                    let it = if ax % 2 == 1 { it.cast(DType::I32) } else { it };
                    check_dt(
                        &what,
                        || src.tensor().index_select(ax as isize - 3, &it),
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
fn embedding_reads_rows_of_every_layout_and_long_rows() {
    for dt in DTYPES {
        for layout in LAYOUTS {
            // A long row (odd, beyond a vector width), a short one, and
            // rows of whole vectors (the GPU reads those with vector loads,
            // one id check per vector).
            for (vocab, dim) in [(7usize, 1031usize), (5, 3), (6, 40)] {
                let table = Input::with_values(layout, &[vocab, dim], dt, &source_values(dt));
                let ids = index_input(Layout::Flipped, &[2, 3], vocab, 9, INDEX_DTYPES[dim % 2]);
                let host_ids = ids.host();
                let mut shape = host_ids.shape.clone();
                shape.push(dim);
                let t = table.host();
                let want =
                    NdArray::from_fn(&shape, |c| t.at(&[host_ids.at(&c[..2]) as usize, c[2]]));
                let what = format!("embedding {dt} {layout:?} [{vocab}, {dim}]");
                check_dt(
                    &what,
                    || table.tensor().embedding(&ids.tensor()),
                    dt,
                    &want,
                    EXACT,
                );
            }
        }
    }
}

#[test]
fn zero_dim_and_computed_sources_gather() {
    let dev = test_device();
    let x = Tensor::from_vec(vec![4.5f32], [0usize; 0], &dev);
    let i = Tensor::from_vec(vec![0i32], [0usize; 0], &dev);
    check(
        "0-d gather",
        || x.gather(0, &i),
        &NdArray::scalar(4.5),
        EXACT,
    );
    // A computed source (materialized first) and a computed index (fused).
    let src = Input::with_values(
        Layout::Permuted,
        &[4, 6],
        DType::F32,
        &source_values(DType::F32),
    );
    let idx = index_input(Layout::Contiguous, &[4, 6], 6, 3, DType::I64);
    let host = src.host().map(|v| v * 2.0 - 1.0);
    let hidx = idx.host().map(|v| 5.0 - v);
    let want = host_gather(&host, 1, &hidx);
    check(
        "gather of computed tensors",
        || {
            let five = Tensor::full([0usize; 0], 5.0, DType::I32, &test_device());
            (src.tensor() * 2.0 - 1.0).gather(1, &(five - idx.tensor()))
        },
        &want,
        EXACT,
    );
    // A source that is a stacked view (a reshape of a transpose) and a
    // gather consumed by a reduction.
    let base = Input::with_values(
        Layout::Contiguous,
        &[6, 4],
        DType::F32,
        &[1.0, 2.0, -3.0, 0.5, 7.0],
    );
    let stacked = base.host().permute(&[1, 0]).reshape(&[3, 8]);
    let idx = index_input(Layout::Contiguous, &[3, 5], 8, 4, DType::I32);
    let want = host_gather(&stacked, 1, &idx.host()).sum(&[1], false);
    check(
        "sum of a gather from a stacked view",
        || {
            base.tensor()
                .t()
                .reshape([3, 8])
                .gather(1, &idx.tensor())
                .sum(1)
        },
        &want,
        Tol::new(1e-6, 1e-6),
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
    for bad in [4i32, -1, i32::MAX, i32::MIN] {
        for mode in MODES {
            let i = Tensor::from_vec(vec![0i32, bad, 1], [3, 1], &dev);
            let e = realize_err(&x.gather(1, &i), mode);
            assert!(
                matches!(&e, Error::Launch(m) if m.contains("out of range")),
                "gather index {bad} [{mode:?}]: {e}"
            );
            let i = Tensor::from_vec(vec![bad], [1], &dev);
            let e = realize_err(&x.index_select(1, &i), mode);
            assert!(matches!(e, Error::Launch(_)), "index_select {bad}: {e}");
            let e = realize_err(&(x.embedding(&i) * 2.0 + 1.0), mode);
            assert!(matches!(e, Error::Launch(_)), "embedding {bad}: {e}");
        }
    }
    // Any index into an empty axis is out of range; an empty index is fine.
    let empty = Tensor::zeros([3, 0], DType::F32, &dev);
    let i = Tensor::from_vec(vec![0i32; 3], [3, 1], &dev);
    assert!(matches!(
        realize_err(&empty.gather(1, &i), Fusion::On),
        Error::Launch(_)
    ));
    let none = Tensor::from_vec(Vec::<i32>::new(), [3, 0], &dev);
    assert_eq!(
        empty.gather(1, &none).to_vec::<f32>().unwrap(),
        Vec::<f32>::new()
    );
    // The same graph in range still works afterwards.
    let i = Tensor::from_vec(vec![3i32, 0, 2], [3, 1], &dev);
    assert_eq!(
        x.gather(1, &i).to_vec::<f32>().unwrap(),
        vec![3.0, 4.0, 10.0]
    );
}

#[test]
fn int64_indices_beyond_32_bits_are_errors_not_wrapped_reads() {
    let dev = test_device();
    let x = Tensor::from_vec((0..12).map(|v| v as f32).collect(), [3, 4], &dev);
    // 2^32 + 1 would read element 1 if the index were cut to 32 bits.
    for bad in [(1i64 << 32) + 1, 1 << 40, -(1 << 32), i64::MAX, i64::MIN] {
        for mode in MODES {
            let i = Tensor::from_vec(vec![0i64, bad, 1], [3, 1], &dev);
            let e = realize_err(&x.gather(1, &i), mode);
            assert!(
                matches!(&e, Error::Launch(m) if m.contains("out of range")),
                "gather index {bad} [{mode:?}]: {e}"
            );
            let i = Tensor::from_vec(vec![bad], [1], &dev);
            let e = realize_err(&x.index_select(0, &i), mode);
            assert!(matches!(e, Error::Launch(_)), "index_select {bad}: {e}");
            let e = realize_err(&x.embedding(&i), mode);
            assert!(matches!(e, Error::Launch(_)), "embedding {bad}: {e}");
        }
    }
    // In range, I64 and I32 indices select the same elements.
    let i64s = Tensor::from_vec(vec![3i64, 0, 2], [3, 1], &dev);
    assert_eq!(
        x.gather(1, &i64s).to_vec::<f32>().unwrap(),
        x.gather(1, &i64s.cast(DType::I32)).to_vec::<f32>().unwrap()
    );
    assert_eq!(
        x.gather(1, &i64s).to_vec::<f32>().unwrap(),
        vec![3.0, 4.0, 10.0]
    );
}

#[test]
fn embedding_then_elementwise_is_one_kernel_reading_only_its_rows() {
    let dev = test_device();
    let (vocab, dim) = (1000usize, 64usize);
    let table = Tensor::from_vec(
        (0..vocab * dim).map(|v| (v % 97) as f32).collect(),
        [vocab, dim],
        &dev,
    );
    let ids = Tensor::from_vec(vec![999i32, 3, 3, 512], [2, 2], &dev);
    let y = table.embedding(&ids) * 2.0 + 1.0;
    let s = y.schedule(Fusion::On);
    assert_eq!(s.items.len(), 1, "one kernel:\n{s}");
    let table_bytes = vocab * dim * 4;
    let rows_bytes = 4 * dim * 4 + 4 * 4; // the 4 rows named, and the ids
    assert!(
        s.bytes_read() <= rows_bytes,
        "reads {} B (table {table_bytes} B):\n{s}",
        s.bytes_read()
    );
    let got = y.to_vec::<f32>().unwrap();
    for (p, id) in [999usize, 3, 3, 512].iter().enumerate() {
        for d in 0..dim {
            assert_eq!(got[p * dim + d], ((id * dim + d) % 97) as f32 * 2.0 + 1.0);
        }
    }
}

/// An embedding of a contiguous table reads each row with 16-byte loads:
/// one id check and one load per vector, none per element.
#[test]
fn embedding_rows_are_read_with_vector_loads() {
    let dev = test_device();
    for (dt, scalar) in [(DType::F16, "ld.global.b16"), (DType::F32, "ld.global.b32")] {
        let table = Tensor::from_vec(vec![0.5f32; 6400], [100, 64], &dev).cast(dt);
        table.realize().unwrap();
        let ids = Tensor::from_vec(vec![99i64, 3, 3, 50], [4], &dev);
        ids.realize().unwrap();
        let s = table.embedding(&ids).schedule(Fusion::On);
        assert_eq!(s.items.len(), 1, "{s}");
        for t in Target::CHECKED {
            let p = emit(&s.items[0].kernel, &t).unwrap();
            let vectors = p.ptx.matches("ld.global.v4.b32").count();
            assert!(vectors >= 1, "{dt}: {}", p.ptx);
            assert!(!p.ptx.contains(scalar), "{dt}: {}", p.ptx);
            assert_eq!(
                p.ptx.matches("st.global.u32").count(),
                vectors,
                "{dt}: one id check per vector: {}",
                p.ptx
            );
        }
    }
}

/// Embeddings whose GPU threads take several row groups at once (2 for
/// `f32` and `f64` rows with `i64` ids, 3 for 2-byte rows with `i32` ids,
/// 4 for byte rows): a prime count of ids leaves the last thread's later
/// groups outside the domain; contiguous tables (vector loads) and
/// permuted ones (element loads), fused onward; an id out of range in the
/// first, a middle or the last group is an `Err`.
#[test]
fn embeddings_of_unrolled_row_groups_match_the_host() {
    let dev = test_device();
    let (vocab, dim, n) = (50usize, 64usize, 37usize);
    for dt in DTYPES {
        for layout in [Layout::Contiguous, Layout::Permuted, Layout::Strided] {
            let table = Input::with_values(layout, &[vocab, dim], dt, &source_values(dt));
            let idt = if dt.size() == 2 {
                DType::I32
            } else {
                DType::I64
            };
            let ids = index_input(Layout::Contiguous, &[n], vocab, 17, idt);
            let (t, hi) = (table.host(), ids.host());
            let want = NdArray::from_fn(&[n, dim], |c| t.at(&[hi.at(&c[..1]) as usize, c[1]]));
            let what = format!("embedding {dt} {layout:?} of {n} ids");
            check_dt(
                &what,
                || table.tensor().embedding(&ids.tensor()),
                dt,
                &want,
                EXACT,
            );
            if dt != DType::Bool {
                check(
                    &format!("{what}, cast and doubled"),
                    || table.tensor().embedding(&ids.tensor()).cast(DType::F64) * 2.0,
                    &want.map(|v| 2.0 * v),
                    EXACT,
                );
            }
            for at in [0, n / 2, n - 1] {
                let mut bad: Vec<i64> = (0..n as i64).map(|i| i % vocab as i64).collect();
                bad[at] = vocab as i64;
                let bad = Tensor::from_vec(bad, [n], &dev).cast(idt);
                for mode in MODES {
                    let e = realize_err(&table.tensor().embedding(&bad), mode);
                    assert!(matches!(e, Error::Launch(_)), "{what}, bad id at {at}: {e}");
                }
            }
        }
    }
}

/// An embedding of 4096 ids into `f32` rows of 768 (786432 groups of 4
/// lanes): on an H100 a single wave of threads with 3 groups each, their
/// ids loaded first, then all their rows, then all their stores; the
/// values match the host.
#[test]
fn a_small_embedding_is_one_wave_with_every_row_in_flight() {
    let dev = test_device();
    let (vocab, dim, n) = (3001usize, 768usize, 4096usize);
    let table = Tensor::from_vec(
        (0..vocab * dim).map(|v| (v % 8191) as f32).collect(),
        [vocab, dim],
        &dev,
    );
    table.realize().unwrap();
    let id_vals: Vec<i64> = (0..n as i64)
        .map(|i| (i * 577 + 13) % vocab as i64)
        .collect();
    let ids = Tensor::from_vec(id_vals.clone(), [n], &dev);
    ids.realize().unwrap();
    let y = table.embedding(&ids);
    let s = y.schedule(Fusion::On);
    assert_eq!(s.items.len(), 1, "{s}");
    let k = &s.items[0].kernel;
    for t in Target::CHECKED {
        let Plan::Elementwise(p) = launch::choose(k, &t) else {
            panic!("an elementwise plan for {}", k.name);
        };
        let groups = (n * dim / p.lanes) as u64;
        let threads = p.grid as u64 * p.block as u64;
        assert!(p.unroll > 1, "{p:?}");
        assert!(threads * p.unroll as u64 >= groups, "one pass: {p:?}");
        assert!(threads <= t.num_sms as u64 * 2048, "one wave: {p:?}");
        let ptx = emit(k, &t).unwrap().ptx;
        let last_load = ptx.rfind("ld.global.v4").expect("vector row loads");
        let first_store = ptx.find("st.global.v4").expect("vector stores");
        assert!(last_load < first_store, "rows in flight together:\n{ptx}");
    }
    let got = y.to_vec::<f32>().unwrap();
    for (p, id) in id_vals.iter().enumerate() {
        for d in [0, 1, 383, 767] {
            let want = ((*id as usize * dim + d) % 8191) as f32;
            assert_eq!(got[p * dim + d], want, "id {p} element {d}");
        }
    }
}

#[test]
#[should_panic(expected = "gather: indices must have an integer index dtype, got float32")]
fn float_indices_panic_at_the_op() {
    let dev = test_device();
    let x = Tensor::zeros([2, 2], DType::F32, &dev);
    x.gather(0, &Tensor::zeros([2, 2], DType::F32, &dev));
}

#[test]
#[should_panic(
    expected = "gather: index of shape [3, 2] is longer than the source's shape [2, 2] along axis 0"
)]
fn a_longer_index_on_another_axis_panics() {
    let dev = test_device();
    let x = Tensor::zeros([2, 2], DType::F32, &dev);
    x.gather(1, &Tensor::zeros([3, 2], DType::I32, &dev));
}

#[test]
#[should_panic(expected = "embedding: the table must be 2-d")]
fn embedding_needs_a_matrix() {
    let dev = test_device();
    Tensor::zeros([4], DType::F32, &dev).embedding(&Tensor::zeros([1], DType::I32, &dev));
}

/// Cumulative sum along the last axis of a 2-D host array.
fn host_cumsum_rows(a: &NdArray) -> NdArray {
    NdArray::from_fn(&a.shape, |c| (0..=c[1]).map(|j| a.at(&[c[0], j])).sum())
}

#[test]
fn gathers_feed_scans_and_read_scanned_sources() {
    let src = Input::with_values(
        Layout::Strided,
        &[5, 9],
        DType::F32,
        &source_values(DType::F32),
    );
    let idx = index_input(Layout::Permuted, &[5, 7], 9, 11, DType::I64);
    // The gather is computed in the scan kernel's loads.
    let want = host_cumsum_rows(&host_gather(&src.host(), 1, &idx.host()));
    check(
        "cumsum of a gather",
        || src.tensor().gather(1, &idx.tensor()).cumsum(1),
        &want,
        Tol::new(1e-5, 1e-5),
    );
    // The scan is materialized and gathered from like a buffer.
    let want = host_gather(&host_cumsum_rows(&src.host()), 1, &idx.host());
    check(
        "gather of a cumsum",
        || src.tensor().cumsum(1).gather(1, &idx.tensor()),
        &want,
        Tol::new(1e-5, 1e-5),
    );
    // An index out of range inside a scan kernel is still an error.
    let dev = test_device();
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [1usize, 3], &dev);
    let bad = Tensor::from_vec(vec![0i32, 3, 1], [1usize, 3], &dev);
    for mode in [Fusion::On, Fusion::Off] {
        realize_err(&x.gather(1, &bad).cumsum(1), mode);
    }
}
