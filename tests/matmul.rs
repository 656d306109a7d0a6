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

/// Tolerance of a product of depth `k` whose result is `dt`: f64
/// accumulates in f64, the others in f32, then one rounding to `dt`.
fn dt_tol(dt: DType, k: usize) -> Tol {
    let acc = if dt == DType::F64 {
        Tol::new(1e-12, 1e-14 * k.max(1) as f64)
    } else {
        mm_tol(k)
    };
    let r = tol(dt);
    Tol::new(r.rel.max(acc.rel), r.abs.max(acc.abs))
}

#[test]
fn matmul_float_dtypes_every_operand_layout() {
    // Sizes past the CPU GEMM's register and cache blocks (primes, so no
    // block divides them), and degenerate ones.
    for dt in [DType::F64, DType::F16, DType::BF16, DType::F32] {
        for (m, k, n) in [(1, 1, 1), (2, 3, 1), (37, 67, 41)] {
            for (i, la) in LAYOUTS.iter().enumerate() {
                let lb = LAYOUTS[(i + 1) % 6];
                let a = Input::new(*la, &[m, k], dt, -1.0, 1.0, 63);
                let b = Input::new(lb, &[k, n], dt, -1.0, 1.0, 64);
                check_dt(
                    &format!("{dt} [{m},{k}]{la:?} @ [{k},{n}]{lb:?}"),
                    || a.tensor().matmul(&b.tensor()),
                    dt,
                    &matmul_ref(&a.host(), &b.host()),
                    dt_tol(dt, k),
                );
            }
        }
    }
}

#[test]
fn matmul_float_dtypes_batched_and_broadcast() {
    let cases: &[(&[usize], &[usize])] = &[
        (&[3, 1, 5, 7], &[2, 7, 4]),
        (&[2, 4, 6], &[6, 5]),
        (&[4, 6], &[3, 6, 5]),
        (&[1, 3, 2], &[4, 1, 2, 3]),
    ];
    for dt in [DType::F64, DType::F16, DType::BF16, DType::F32] {
        for (sa, sb) in cases {
            for (la, lb) in [
                (Layout::Contiguous, Layout::Permuted),
                (Layout::Flipped, Layout::Strided),
                (Layout::Broadcast, Layout::Contiguous),
            ] {
                let a = Input::new(la, sa, dt, -1.0, 1.0, 65);
                let b = Input::new(lb, sb, dt, -1.0, 1.0, 66);
                check(
                    &format!("{dt} {sa:?}{la:?} @ {sb:?}{lb:?}"),
                    || a.tensor().matmul(&b.tensor()),
                    &matmul_ref(&a.host(), &b.host()),
                    dt_tol(dt, sa[sa.len() - 1]),
                );
            }
        }
    }
}

#[test]
fn matmul_float_dtypes_empty_dims() {
    for dt in [DType::F64, DType::F16] {
        let (a, _) = make(&[], &[3, 0], dt);
        let (b, _) = make(&[], &[0, 4], dt);
        check(
            &format!("{dt} K=0"),
            || a.matmul(&b),
            &NdArray::full(&[3, 4], 0.0),
            EXACT,
        );
        let (c, _) = make(&[], &[2, 0, 5], dt);
        let (d, _) = make(&[1.0; 10], &[5, 2], dt);
        check(
            &format!("{dt} M=0 batched"),
            || c.matmul(&d),
            &NdArray::new(&[2, 0, 2], vec![]),
            EXACT,
        );
    }
}

#[test]
fn matmul_nan_and_infinities() {
    let inf = f64::INFINITY;
    // Row 0 meets a NaN, row 1 an infinity times zero and times a
    // finite value, row 2 only finite values; column 2 holds -inf.
    let a = [f64::NAN, 1.0, inf, 0.0, 1.0, 2.0];
    let b = [1.0, 0.0, -inf, 2.0, 0.0, 1.0];
    for dt in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let (ta, ha) = make(&a, &[3, 2], dt);
        let (tb, hb) = make(&b, &[2, 3], dt);
        check(
            &format!("{dt} NaN and inf"),
            || ta.matmul(&tb),
            &matmul_ref(&ha, &hb),
            dt_tol(dt, 2),
        );
    }
}

/// `silu(x)` in f64.
fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// Several matmuls in one kernel (SwiGLU's `silu(x @ w1) * (x @ w3)`, a
/// sum of two products with a bias): each product is its own GEMM on the
/// CPU, and the epilogue combines them.
#[test]
fn several_matmuls_in_one_kernel() {
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for (m, k, n) in [(1, 1, 1), (5, 7, 3), (33, 65, 47)] {
            let x = Input::new(Layout::Permuted, &[m, k], dt, -1.0, 1.0, 67);
            let w1 = Input::new(Layout::Contiguous, &[k, n], dt, -1.0, 1.0, 68);
            let w3 = Input::new(Layout::Flipped, &[k, n], dt, -1.0, 1.0, 69);
            let (hx, h1, h3) = (x.host(), w1.host(), w3.host());
            let t = dt_tol(dt, k).times(2.0);
            let want = matmul_ref(&hx, &h1)
                .map(silu)
                .zip(&matmul_ref(&hx, &h3), |g, u| g * u);
            check(
                &format!("{dt} swiglu [{m},{k}] @ [{k},{n}]"),
                || x.tensor().matmul(&w1.tensor()).silu() * x.tensor().matmul(&w3.tensor()),
                &want,
                t,
            );
            let y = Input::new(Layout::Strided, &[m, k], dt, -1.0, 1.0, 70);
            let bias = Input::new(Layout::Contiguous, &[n], dt, -1.0, 1.0, 71);
            let want = matmul_ref(&hx, &h1)
                .zip(&matmul_ref(&y.host(), &h3), |p, q| p + q)
                .zip(&bias.host(), |s, b| s + b);
            check(
                &format!("{dt} x @ w1 + y @ w3 + bias [{m},{k}] @ [{k},{n}]"),
                || {
                    x.tensor().matmul(&w1.tensor())
                        + y.tensor().matmul(&w3.tensor())
                        + bias.tensor()
                },
                &want,
                // Each product is rounded to `dt` before the sum, which
                // may cancel: the error scales with the products' size.
                Tol::new(t.rel, t.abs.max(tol(dt).rel * (k as f64).sqrt())),
            );
        }
    }
    // Batched, with broadcast batch dims.
    let x = Input::new(
        Layout::Contiguous,
        &[2, 1, 9, 11],
        DType::F32,
        -1.0,
        1.0,
        72,
    );
    let w1 = Input::new(Layout::Permuted, &[3, 11, 6], DType::F32, -1.0, 1.0, 73);
    let w3 = Input::new(Layout::Contiguous, &[11, 6], DType::F32, -1.0, 1.0, 74);
    let want = matmul_ref(&x.host(), &w1.host())
        .map(silu)
        .zip(&matmul_ref(&x.host(), &w3.host()), |g, u| g * u);
    check(
        "batched swiglu",
        || x.tensor().matmul(&w1.tensor()).silu() * x.tensor().matmul(&w3.tensor()),
        &want,
        mm_tol(11).times(2.0),
    );
}
