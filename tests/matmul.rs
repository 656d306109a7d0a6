//! Matmul against a triple-loop host reference: 2-D, batched, broadcast
//! batch dims, 1-D operands, empty dims, every operand layout, dtypes and
//! epilogues, under both fusion modes.

mod common;

use common::*;
use smelt::{DType, Tensor};

/// NumPy's matmul on the host, 1-D operands included.
fn matmul_ref(a: &NdArray, b: &NdArray) -> NdArray {
    let a2 = if a.ndim() == 1 {
        a.reshape(&[1, a.shape[0]])
    } else {
        a.clone()
    };
    let b2 = if b.ndim() == 1 {
        b.reshape(&[b.shape[0], 1])
    } else {
        b.clone()
    };
    let mut r = a2.matmul(&b2);
    let mut shape = r.shape.clone();
    if b.ndim() == 1 {
        shape.remove(shape.len() - 1);
    }
    if a.ndim() == 1 {
        shape.remove(shape.len() - if b.ndim() == 1 { 1 } else { 2 });
    }
    r = r.reshape(&shape);
    r
}

fn mm_tol(k: usize) -> Tol {
    Tol::new(1e-5, 1e-6 * (k.max(1) as f64))
}

#[test]
fn matmul_2d_every_operand_layout() {
    for (m, k, n) in [(7, 13, 11), (1, 5, 1), (4, 1, 3), (16, 16, 16), (3, 31, 2)] {
        for (i, la) in LAYOUTS.iter().enumerate() {
            for lb in [LAYOUTS[i], LAYOUTS[(i + 2) % 6], LAYOUTS[(i + 3) % 6]] {
                let a = Input::new(*la, &[m, k], DType::F32, -1.0, 1.0, 50);
                let b = Input::new(lb, &[k, n], DType::F32, -1.0, 1.0, 51);
                check_dt(
                    &format!("[{m},{k}]{la:?} @ [{k},{n}]{lb:?}"),
                    || a.tensor().matmul(&b.tensor()),
                    DType::F32,
                    &matmul_ref(&a.host(), &b.host()),
                    mm_tol(k),
                );
            }
        }
    }
}

#[test]
fn matmul_batched_and_broadcast_batches() {
    let cases: &[(&[usize], &[usize])] = &[
        (&[2, 3, 4], &[2, 4, 5]),
        (&[3, 1, 4, 5], &[2, 5, 6]),
        (&[4, 5], &[2, 5, 3]),
        (&[2, 4, 5], &[5, 3]),
        (&[2, 1, 2, 1, 3, 4], &[1, 2, 1, 2, 4, 2]),
        (&[0, 3, 4], &[4, 2]),
    ];
    for (sa, sb) in cases {
        for layout in LAYOUTS {
            let a = Input::new(layout, sa, DType::F32, -1.0, 1.0, 52);
            let b = Input::new(Layout::Permuted, sb, DType::F32, -1.0, 1.0, 53);
            check(
                &format!("{sa:?}{layout:?} @ {sb:?}"),
                || a.tensor().matmul(&b.tensor()),
                &matmul_ref(&a.host(), &b.host()),
                mm_tol(sa[sa.len() - 1]),
            );
        }
    }
}

#[test]
fn matmul_vectors() {
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[5], &[5, 3], &[3]),
        (&[4, 5], &[5], &[4]),
        (&[5], &[5], &[]),
        (&[2, 3, 4], &[4], &[2, 3]),
        (&[4], &[2, 4, 3], &[2, 3]),
    ];
    for (sa, sb, out) in cases {
        for layout in [Layout::Contiguous, Layout::Strided, Layout::Flipped] {
            let a = Input::new(layout, sa, DType::F32, -1.0, 1.0, 54);
            let b = Input::new(layout, sb, DType::F32, -1.0, 1.0, 55);
            let want = matmul_ref(&a.host(), &b.host());
            assert_eq!(&want.shape[..], *out, "test bug");
            check(
                &format!("{sa:?} @ {sb:?} {layout:?}"),
                || a.tensor().matmul(&b.tensor()),
                &want,
                mm_tol(5),
            );
        }
    }
}

#[test]
fn matmul_empty_dims() {
    // K = 0: a sum of nothing is zero.
    let (a, _) = make(&[], &[3, 0], DType::F32);
    let (b, _) = make(&[], &[0, 4], DType::F32);
    check("K=0", || a.matmul(&b), &NdArray::full(&[3, 4], 0.0), EXACT);
    // M = 0 and N = 0: empty results.
    let (a, _) = make(&[], &[0, 5], DType::F32);
    let (b, _) = make(&[1.0; 10], &[5, 2], DType::F32);
    check(
        "M=0",
        || a.matmul(&b),
        &NdArray::new(&[0, 2], vec![]),
        EXACT,
    );
    let (c, _) = make(&[], &[2, 0], DType::F32);
    check(
        "N=0",
        || b.matmul(&c),
        &NdArray::new(&[5, 0], vec![]),
        EXACT,
    );
}

#[test]
fn matmul_dtypes() {
    // (a dtype, b dtype, result dtype)
    let cases = [
        (DType::I32, DType::I32, DType::I32),
        (DType::Bool, DType::Bool, DType::I32),
        (DType::F16, DType::F16, DType::F16),
        (DType::BF16, DType::BF16, DType::BF16),
        (DType::F16, DType::F32, DType::F32),
        (DType::I32, DType::F32, DType::F32),
        (DType::Bool, DType::BF16, DType::BF16),
    ];
    for (da, db, out) in cases {
        for layout in [Layout::Contiguous, Layout::Permuted, Layout::Padded] {
            let (lo, hi) = if da == DType::I32 {
                (-9.0, 9.0)
            } else {
                (-1.0, 1.0)
            };
            let a = Input::new(layout, &[5, 6], da, lo, hi, 56);
            let b = Input::new(Layout::Flipped, &[6, 3], db, lo, hi, 57);
            // Floats accumulate in F32 and round once.
            let t = if out.is_float() {
                let r = tol(out);
                Tol::new(r.rel, r.abs.max(mm_tol(6).abs))
            } else {
                EXACT
            };
            check_dt(
                &format!("{da} @ {db} {layout:?}"),
                || a.tensor().matmul(&b.tensor()),
                out,
                &matmul_ref(&a.host(), &b.host()),
                t,
            );
        }
    }
}

#[test]
fn matmul_with_epilogue_and_prologue() {
    let a = Input::new(Layout::Permuted, &[6, 5], DType::F32, -1.0, 1.0, 58);
    let b = Input::new(Layout::Strided, &[5, 4], DType::F32, -1.0, 1.0, 59);
    let bias = Input::new(Layout::Flipped, &[4], DType::F32, -1.0, 1.0, 60);
    let (ha, hb, hbias) = (a.host(), b.host(), bias.host());
    let want = matmul_ref(&ha, &hb)
        .zip(&hbias, |x, y| x + y)
        .map(|x| if x > 0.0 { x } else { 0.0 })
        .map(|x| x * 0.5);
    check(
        "relu(a @ b + bias) * 0.5",
        || (a.tensor().matmul(&b.tensor()) + bias.tensor()).relu() * 0.5,
        &want,
        mm_tol(5),
    );
    // Elementwise producers on the operands, and a cast epilogue.
    let want = matmul_ref(&ha.map(f64::exp), &hb.map(|x| x * 2.0)).round(DType::F16);
    check_dt(
        "(exp(a) @ (2 b)).cast(F16)",
        || {
            a.tensor()
                .exp()
                .matmul(&(b.tensor() * 2.0))
                .cast(DType::F16)
        },
        DType::F16,
        &want,
        tol(DType::F16),
    );
    // Two matmuls in a chain, and a reduction of a matmul.
    let c = Input::new(Layout::Contiguous, &[4, 3], DType::F32, -1.0, 1.0, 61);
    let want = matmul_ref(&matmul_ref(&ha, &hb), &c.host());
    check(
        "(a @ b) @ c",
        || a.tensor().matmul(&b.tensor()).matmul(&c.tensor()),
        &want,
        mm_tol(20),
    );
    let want = matmul_ref(&ha, &hb).sum(&[1], false);
    check(
        "(a @ b).sum(1)",
        || a.tensor().matmul(&b.tensor()).sum(1),
        &want,
        mm_tol(20),
    );
}

#[test]
fn matmul_against_identity() {
    let dev = test_device();
    let x = Input::new(Layout::Flipped, &[5, 5], DType::F32, -3.0, 3.0, 62);
    check(
        "eye @ x",
        || Tensor::eye(5, DType::F32, &dev).matmul(&x.tensor()),
        &x.host(),
        EXACT,
    );
    check(
        "x @ eye",
        || x.tensor().matmul(&Tensor::eye(5, DType::F32, &dev)),
        &x.host(),
        EXACT,
    );
}
