//! The tensor-core matmul emitter: every generated kernel (f16 / bf16 /
//! TF32, every operand layout, odd shapes, batches, epilogues, every tile
//! configuration) must be taken by the emitter and pass `ptxas` for sm_80
//! and sm_90 when it is installed (`SMELT_REQUIRE_PTXAS=1` makes its
//! absence a failure). `cargo test --test ptx_matmul -- --nocapture`
//! prints ptxas's register and spill report per tile configuration.

#[allow(dead_code)] // shared with the other PTX tests, which use the rest
mod ptx_cases;

use ptx_cases::{lin, Kb};
use smelt_codegen::ptx::{matmul, ptxas, Target};
use smelt_codegen::{BinaryOp, DType, Kernel, KernelKind, ReduceOp, UnaryOp};

/// How each operand is stored.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// `a: [m, k]`, `b: [k, n]`, both row-major.
    Nn,
    /// `b` stored `[n, k]` (k-contiguous: both operands take `cp.async`).
    Nt,
    /// `a` stored `[k, m]`.
    Tn,
}

/// The operand element: a half type (cast to f32) or f32 rounded to TF32.
fn factor(kb: &mut Kb, dt: DType, tf32: bool, len: usize, index: smelt_codegen::Expr) -> usize {
    let x = kb.load(dt, len, index);
    if tf32 {
        kb.un(UnaryOp::RoundTf32, x)
    } else {
        kb.cast(x, DType::F32)
    }
}

/// `batch x [m, k] @ [k, n]` in `dt` (f32 means TF32 operands),
/// optionally `gelu(c + bias[n])`, stored in `dt`. Domain `[batch?, m, n |
/// k]`.
fn kernel(batch: i64, m: i64, n: i64, k: i64, dt: DType, layout: Layout, epilogue: bool) -> Kernel {
    let batched = batch > 1;
    let (vm, vn, vk) = if batched { (1, 2, 3) } else { (0, 1, 2) };
    let mut ranges = vec![m, n, k];
    if batched {
        ranges.insert(0, batch);
    }
    let kept = ranges.len() - 1;
    let mut kb = Kb::new("matmul", KernelKind::Matmul, &ranges, kept);
    let bt = |t: &[(usize, i64)], per: i64| {
        let mut t = t.to_vec();
        if batched {
            t.push((0, per));
        }
        lin(&t, 0)
    };
    let (ia, ib) = match layout {
        Layout::Nn => (
            bt(&[(vm, k), (vk, 1)], m * k),
            bt(&[(vk, n), (vn, 1)], k * n),
        ),
        Layout::Nt => (
            bt(&[(vm, k), (vk, 1)], m * k),
            bt(&[(vn, k), (vk, 1)], k * n),
        ),
        Layout::Tn => (
            bt(&[(vk, m), (vm, 1)], m * k),
            bt(&[(vk, n), (vn, 1)], k * n),
        ),
    };
    let tf32 = dt == DType::F32;
    let a = factor(&mut kb, dt, tf32, (batch * m * k) as usize, ia);
    let b = factor(&mut kb, dt, tf32, (batch * k * n) as usize, ib);
    let p = kb.bin(BinaryOp::Mul, a, b);
    let mut v = kb.reduce(ReduceOp::Sum, p);
    if epilogue {
        let bias = kb.load(dt, n as usize, lin(&[(vn, 1)], 0));
        let bias = kb.cast(bias, DType::F32);
        v = kb.bin(BinaryOp::Add, v, bias);
        v = kb.un(UnaryOp::Gelu, v);
    }
    let out = bt(&[(vm, n), (vn, 1)], m * n);
    kb.store((batch * m * n) as usize, out, v, Some(dt));
    kb.done()
}

fn cases() -> Vec<Kernel> {
    let mut ks = Vec::new();
    for dt in [DType::F16, DType::BF16, DType::F32] {
        for layout in [Layout::Nn, Layout::Nt, Layout::Tn] {
            ks.push(kernel(1, 128, 128, 64, dt, layout, false));
            ks.push(kernel(1, 17, 9, 33, dt, layout, true));
            ks.push(kernel(3, 64, 48, 40, dt, layout, true));
            ks.push(kernel(1, 1000, 127, 7, dt, layout, false));
            // Aligned sizes: 16-byte copies, row-major tiles for halves.
            ks.push(kernel(2, 192, 136, 72, dt, layout, true));
        }
    }
    ks
}

#[test]
fn every_matmul_takes_the_mma_path_and_assembles() {
    let ks = cases();
    for k in &ks {
        assert!(matmul::recognise(k).is_some(), "{k}");
    }
    let assembled = ptx_cases::assemble_all(&ks, |k, p| {
        let tf32 = k.inputs[0].dtype == DType::F32;
        let mma = if tf32 {
            "m16n8k8.row.col.f32.tf32"
        } else {
            "m16n8k16"
        };
        assert!(p.ptx.contains(mma), "{k}");
        // Aligned halves contiguous along m or n are read transposed;
        // k-contiguous operands and TF32 never are.
        let trans = p.ptx.contains("ldmatrix.sync.aligned.m8n8.x4.trans");
        let nt = matches!(layout_of(k), Layout::Nt);
        if tf32 || nt {
            assert!(!trans, "{k}");
        } else if k.ranges.contains(&136) {
            assert!(trans, "{k}");
        }
    });
    println!("{assembled} matmul kernels assembled");
}

/// Which layout a test kernel was built with (from A's index).
fn layout_of(k: &Kernel) -> Layout {
    let s = matmul::recognise(k).expect("recognised");
    match (s.a.k, s.b.k) {
        (1, 1) => Layout::Nt,
        (1, _) => Layout::Nn,
        _ => Layout::Tn,
    }
}

#[test]
fn every_tile_configuration_assembles_with_its_resources() {
    let ks = [
        kernel(1, 4096, 4096, 4096, DType::F16, Layout::Nt, false),
        kernel(1, 4096, 4096, 4096, DType::BF16, Layout::Tn, false),
        kernel(1, 4096, 4096, 4096, DType::F32, Layout::Nt, false),
    ];
    for k in &ks {
        let s = matmul::recognise(k).expect("recognised");
        assert_eq!(matmul::variants(k).len(), matmul::candidates().len());
        for tile in matmul::candidates() {
            let t = Target::CHECKED[1];
            let p = matmul::emit_variant(k, &t, &tile.name()).expect("a candidate");
            assert_eq!(p, matmul::emit_with(k, &t, &s, &tile));
            match ptxas::assemble(&p.ptx, t.sm) {
                Ok(Some(info)) => {
                    println!(
                        "{:?} {:?} {}: {}",
                        s.elem,
                        layout_of(k),
                        tile.name(),
                        info.trim()
                    );
                    assert_eq!(spilled(&info), 0, "{}: {info}", tile.name());
                }
                Ok(None) => {
                    println!("skipped: ptxas not found");
                    assert!(
                        !ptx_cases::ptxas_required(),
                        "SMELT_REQUIRE_PTXAS=1 but ptxas was not found"
                    );
                    return;
                }
                Err(e) => panic!("{tile:?} sm_{}: {e}", t.sm),
            }
        }
    }
}

/// Bytes of spill stores in a `ptxas -v` report.
fn spilled(info: &str) -> u64 {
    info.split(',')
        .filter_map(|part| part.trim().strip_suffix("bytes spill stores"))
        .map(|n| n.trim().parse::<u64>().expect("a byte count"))
        .sum()
}

#[test]
fn exact_f32_and_masked_matmuls_stay_off_the_tensor_cores() {
    // Plain f32 operands (no RoundTf32): recognised as exact f32, which
    // never takes the tensor-core emitter.
    let mut kb = Kb::new("matmul", KernelKind::Matmul, &[32, 32, 32], 2);
    let a = kb.load(DType::F32, 1024, lin(&[(0, 32), (2, 1)], 0));
    let b = kb.load(DType::F32, 1024, lin(&[(2, 32), (1, 1)], 0));
    let p = kb.bin(BinaryOp::Mul, a, b);
    let v = kb.reduce(ReduceOp::Sum, p);
    kb.store(1024, lin(&[(0, 32), (1, 1)], 0), v, None);
    let mut k = kb.done();
    assert_eq!(
        matmul::recognise(&k).map(|s| s.elem),
        Some(matmul::Elem::F32)
    );
    assert!(matmul::variants(&k).is_empty());
    k.kind = KernelKind::Reduce;
    assert!(matmul::recognise(&k).is_none());
}
