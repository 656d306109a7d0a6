//! The tensor-core matmul emitter: every generated kernel (f16 / bf16 /
//! TF32, every operand layout, odd shapes, batches, epilogues, every tile
//! configuration) must be taken by the emitter and pass `ptxas` for sm_80
//! and sm_90 when it is installed (`SMELT_REQUIRE_PTXAS=1` makes its
//! absence a failure). `cargo test --test ptx_matmul -- --nocapture`
//! prints ptxas's register and spill report per tile configuration.

#[allow(dead_code)] // shared with the other PTX tests, which use the rest
mod ptx_cases;

use ptx_cases::{lin, matmul_layout as kernel, Kb, MatLayout as Layout};
use smelt_codegen::ptx::matmul::Elem;
use smelt_codegen::ptx::{matmul, ptxas, Target};
use smelt_codegen::{BinaryOp, DType, Kernel, KernelKind, ReduceOp};

fn cases() -> Vec<Kernel> {
    let mut ks = Vec::new();
    for dt in [Elem::F16, Elem::BF16, Elem::Tf32] {
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
        kernel(1, 4096, 4096, 4096, Elem::F16, Layout::Nt, false),
        kernel(1, 4096, 4096, 4096, Elem::BF16, Layout::Tn, false),
        kernel(1, 4096, 4096, 4096, Elem::Tf32, Layout::Nt, false),
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
