//! `diagonal`, `diag`, `trace`, `outer`, `tensordot` and `einsum` against
//! brute-force host references, through layouts and dtypes; einsum lowers
//! to the kernels hand-written code gives.

mod common;

use common::*;
use smelt::{einsum, DType, Fusion, Tensor};
use std::collections::HashMap;

/// Brute-force einsum on the host: letters only, explicit output. Loops
/// over every assignment of every label.
fn host_einsum(spec: &str, ops: &[&NdArray]) -> NdArray {
    let (lhs, out) = spec.split_once("->").unwrap();
    let sides: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    let out: Vec<char> = out.chars().collect();
    let mut size: HashMap<char, usize> = HashMap::new();
    for (s, a) in sides.iter().zip(ops) {
        for (c, n) in s.iter().zip(&a.shape) {
            let e = size.entry(*c).or_insert(*n);
            *e = (*e).max(*n); // size 1 broadcasts
        }
    }
    let mut labels: Vec<char> = size.keys().copied().collect();
    labels.sort();
    let out_shape: Vec<usize> = out.iter().map(|c| size[c]).collect();
    let mut acc = NdArray::full(&out_shape, 0.0);
    let total: usize = labels.iter().map(|c| size[c]).product();
    for flat in 0..total {
        let idx = unravel(flat, &labels.iter().map(|c| size[c]).collect::<Vec<_>>());
        let at = |c: char| idx[labels.iter().position(|l| *l == c).unwrap()];
        let mut p = 1.0;
        for (s, a) in sides.iter().zip(ops) {
            let coord: Vec<usize> = s
                .iter()
                .zip(&a.shape)
                .map(|(c, n)| if *n == 1 { 0 } else { at(*c) })
                .collect();
            p *= a.at(&coord);
        }
        let oc: Vec<usize> = out.iter().map(|c| at(*c)).collect();
        let mut i = 0;
        for (d, x) in oc.iter().enumerate() {
            i = i * out_shape[d] + x;
        }
        acc.data[i] += p;
    }
    acc
}

fn input(shape: &[usize], layout: Layout, seed: u64) -> Input {
    // Small integers: every product and sum is exact in f32.
    let vals: Vec<f64> = (0..97)
        .map(|i| ((i * 7 + seed as usize) % 9) as f64 - 4.0)
        .collect();
    Input::with_values(layout, shape, DType::F32, &vals)
}

#[test]
fn einsum_matches_brute_force() {
    let cases: &[(&str, &[&[usize]])] = &[
        ("ij,jk->ik", &[&[3, 5], &[5, 4]]),
        ("bhqd,bhkd->bhqk", &[&[2, 3, 5, 4], &[2, 3, 7, 4]]),
        ("ij->ji", &[&[3, 4]]),
        ("ij->", &[&[3, 4]]),
        ("ij->j", &[&[3, 4]]),
        ("ii->i", &[&[4, 4]]),
        ("ii->", &[&[5, 5]]),
        ("i,j->ij", &[&[3], &[4]]),
        ("i,i->", &[&[7], &[7]]),
        ("bij,bjk->bik", &[&[2, 3, 4], &[2, 4, 5]]),
        ("bij,jk->bki", &[&[2, 3, 4], &[4, 5]]),
        ("ijk,ikl,lm->jm", &[&[2, 3, 4], &[2, 4, 5], &[5, 3]]),
        ("ij,ij->ij", &[&[3, 4], &[3, 4]]),
        ("ij,kj->ikj", &[&[3, 4], &[2, 4]]),
        ("iij,jk->ik", &[&[3, 3, 4], &[4, 2]]),
        ("ij,jk->ik", &[&[1, 5], &[5, 1]]),
        ("bj,jk->bk", &[&[1, 3], &[3, 4]]),
        ("ij,jk->ik", &[&[0, 5], &[5, 4]]),
        ("ij,jk->ik", &[&[3, 0], &[0, 4]]),
    ];
    for (ci, (spec, shapes)) in cases.iter().enumerate() {
        for layout in [Layout::Contiguous, Layout::Permuted, Layout::Flipped] {
            let inputs: Vec<Input> = shapes
                .iter()
                .enumerate()
                .map(|(i, s)| input(s, layout, (ci * 3 + i) as u64))
                .collect();
            let hosts: Vec<NdArray> = inputs.iter().map(Input::host).collect();
            let want = host_einsum(spec, &hosts.iter().collect::<Vec<_>>());
            check(
                &format!("einsum {spec} {layout:?}"),
                || {
                    let ts: Vec<Tensor> = inputs.iter().map(Input::tensor).collect();
                    einsum(spec, &ts.iter().collect::<Vec<_>>())
                },
                &want,
                EXACT,
            );
        }
    }
}

#[test]
fn einsum_ellipsis_implicit_output_and_broadcast() {
    let a = input(&[2, 3, 4, 5], Layout::Contiguous, 1);
    let b = input(&[3, 5, 6], Layout::Permuted, 2);
    let (ha, hb) = (a.host(), b.host());
    // `...` lines up from the right and broadcasts: a's [2, 3] with b's [3].
    let want = host_einsum("xyij,yjk->xyik", &[&ha, &hb]);
    check(
        "...ij,...jk->...ik",
        || einsum("...ij,...jk->...ik", &[&a.tensor(), &b.tensor()]),
        &want,
        EXACT,
    );
    // Without "->": the ellipsis, then letters used once, sorted.
    check(
        "...ij,...jk",
        || einsum("...ij,...jk", &[&a.tensor(), &b.tensor()]),
        &want,
        EXACT,
    );
    let want = host_einsum("xyij->xyji", &[&ha]);
    check(
        "...ij->...ji",
        || einsum("... i j -> ... j i", &[&a.tensor()]),
        &want,
        EXACT,
    );
    let m = input(&[4, 3], Layout::Contiguous, 5);
    let want = host_einsum("ba->ab", &[&m.host()]);
    check(
        "ba (implicit)",
        || einsum("ba", &[&m.tensor()]),
        &want,
        EXACT,
    );
}

#[test]
fn einsum_attention_scores_are_one_matmul_kernel() {
    let dev = test_device();
    let q = Tensor::randn([2, 4, 64, 32], DType::F32, 1, &dev);
    let k = Tensor::randn([2, 4, 64, 32], DType::F32, 2, &dev);
    q.realize().unwrap();
    k.realize().unwrap();
    let e = einsum("bhqd,bhkd->bhqk", &[&q, &k]);
    let hand = q.matmul(&k.transpose(-2, -1));
    let (se, sh) = (e.schedule(Fusion::On), hand.schedule(Fusion::On));
    assert_eq!(se.items.len(), 1, "{se}");
    assert_eq!(se.items.len(), sh.items.len());
    assert_eq!(se.items[0].kernel.kind, sh.items[0].kernel.kind, "{se}");
    assert_eq!(e.to_vec::<f32>().unwrap(), hand.to_vec::<f32>().unwrap());
}

#[test]
fn bad_einsum_specs_panic_clearly() {
    let dev = test_device();
    let a = Tensor::zeros([2, 3], DType::F32, &dev);
    let b = Tensor::zeros([4, 5], DType::F32, &dev);
    let msg = |f: &dyn Fn()| {
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_err();
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap()
    };
    for (spec, ops, want) in [
        ("ij,jk->ik", vec![&a, &b], "sizes 3 and 4"),
        ("ijk->i", vec![&a], "rank 2"),
        ("ij,jk->ik", vec![&a], "2 operands, 1 given"),
        ("ij->iz", vec![&a], "in no input"),
        ("i1->i", vec![&a], "not a letter"),
        ("ii->i", vec![&a], "sizes 2 and 3"),
    ] {
        let m = msg(&|| {
            einsum(spec, &ops);
        });
        assert!(m.contains("einsum") && m.contains(want), "{spec}: {m}");
    }
}

#[test]
fn tensordot_matches_einsum() {
    let a = input(&[3, 4, 5], Layout::Flipped, 3);
    let b = input(&[5, 2, 4], Layout::Contiguous, 4);
    let want = host_einsum("ijk,kmj->im", &[&a.host(), &b.host()]);
    check(
        "tensordot",
        || a.tensor().tensordot(&b.tensor(), &[1, -1], &[2, 0]),
        &want,
        EXACT,
    );
    // No axes: the outer product.
    let want = host_einsum("ijk,lmn->ijklmn", &[&a.host(), &b.host()]);
    check(
        "tensordot outer",
        || a.tensor().tensordot(&b.tensor(), &[], &[]),
        &want,
        EXACT,
    );
}

#[test]
fn diagonal_diag_trace_outer_match_the_host() {
    for dt in [DType::F32, DType::I32, DType::BF16, DType::Bool] {
        for layout in LAYOUTS {
            for (n, m) in [(4usize, 4usize), (3, 5), (5, 2), (1, 1), (0, 3)] {
                let inp = Input::new(layout, &[2, n, m], dt, -5.0, 5.0, (n * 10 + m) as u64);
                let h = inp.host();
                for off in [-2isize, -1, 0, 1, 3] {
                    let want = host_diagonal(2, n, m, off, |b, r, c| h.at(&[b, r, c]));
                    check_dt(
                        &format!("diagonal {dt} {layout:?} {n}x{m} offset {off}"),
                        || inp.tensor().diagonal(off, 1, -1),
                        dt,
                        &want,
                        EXACT,
                    );
                    // The other axis order: the transposed matrices' diagonal.
                    let want = host_diagonal(2, m, n, off, |b, r, c| h.at(&[b, c, r]));
                    check(
                        &format!("diagonal dims swapped {dt} {layout:?} {n}x{m} offset {off}"),
                        || inp.tensor().diagonal(off, 2, 1),
                        &want,
                        EXACT,
                    );
                }
            }
        }
    }
}

/// Diagonal `off` of `batch` matrices of `rows x cols` whose element
/// `(b, r, c)` is `at(b, r, c)`.
fn host_diagonal(
    batch: usize,
    rows: usize,
    cols: usize,
    off: isize,
    at: impl Fn(usize, usize, usize) -> f64,
) -> NdArray {
    let k = off.unsigned_abs();
    let len = if off >= 0 {
        rows.min(cols.saturating_sub(k))
    } else {
        rows.saturating_sub(k).min(cols)
    };
    NdArray::from_fn(&[batch, len], |c| {
        let (r, q) = if off >= 0 {
            (c[1], c[1] + k)
        } else {
            (c[1] + k, c[1])
        };
        at(c[0], r, q)
    })
}

#[test]
fn diag_of_a_vector_trace_and_outer() {
    for layout in [Layout::Contiguous, Layout::Flipped, Layout::Strided] {
        for n in [0usize, 1, 5] {
            let v = Input::new(layout, &[n], DType::F32, -3.0, 3.0, n as u64);
            let hv = v.host();
            for off in [-2isize, 0, 1] {
                let k = off.unsigned_abs();
                let want = NdArray::from_fn(&[n + k, n + k], |c| {
                    let (i, j) = (c[0] as isize, c[1] as isize);
                    if j - i == off {
                        hv.at(&[(i.min(j)) as usize])
                    } else {
                        0.0
                    }
                });
                check(
                    &format!("diag {layout:?} n={n} offset {off}"),
                    || v.tensor().diag(off),
                    &want,
                    EXACT,
                );
                // diag of the matrix gives the vector back.
                check(
                    &format!("diag(diag) {layout:?} n={n} offset {off}"),
                    || v.tensor().diag(off).diag(off),
                    &hv,
                    EXACT,
                );
            }
        }
    }
    let x = Input::new(Layout::Permuted, &[4, 6], DType::I32, -9.0, 9.0, 1);
    let h = x.host();
    let want = NdArray::scalar((0..4).map(|i| h.at(&[i, i])).sum());
    check("trace", || x.tensor().trace(), &want, EXACT);
    let a = Input::new(Layout::Flipped, &[3], DType::F32, -2.0, 2.0, 2);
    let b = Input::new(Layout::Strided, &[5], DType::I32, -2.0, 2.0, 3);
    let (ha, hb) = (a.host(), b.host());
    let want = NdArray::from_fn(&[3, 5], |c| ha.at(&[c[0]]) * hb.at(&[c[1]]));
    check_dt(
        "outer",
        || a.tensor().outer(&b.tensor()),
        DType::F32,
        &want,
        EXACT,
    );
    // A diagonal of a realized matrix is a strided read: one kernel, n elements.
    let m = Tensor::from_vec((0..64).map(|v| v as f32).collect(), [8, 8], &test_device());
    m.realize().unwrap();
    let d = m.diagonal(0, 0, 1).exp();
    assert_eq!(d.schedule(Fusion::On).items.len(), 1);
}
