//! The tensor-core matmul emitter: every generated kernel (f16 / bf16,
//! every operand layout, odd shapes, batches, epilogues, every tile
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

/// `batch x [m, k] @ [k, n]` in `dt`, optionally `gelu(c + bias[n])`,
/// stored in `dt`. Domain `[batch?, m, n | k]`.
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
    let a = kb.load(dt, (batch * m * k) as usize, ia);
    let b = kb.load(dt, (batch * k * n) as usize, ib);
    let (a, b) = (kb.cast(a, DType::F32), kb.cast(b, DType::F32));
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
    for dt in [DType::F16, DType::BF16] {
        for layout in [Layout::Nn, Layout::Nt, Layout::Tn] {
            ks.push(kernel(1, 128, 128, 64, dt, layout, false));
            ks.push(kernel(1, 17, 9, 33, dt, layout, true));
            ks.push(kernel(3, 64, 48, 40, dt, layout, true));
            ks.push(kernel(1, 1000, 127, 7, dt, layout, false));
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
        assert!(p.ptx.contains("mma.sync.aligned.m16n8k16"), "{k}");
    });
    println!("{assembled} matmul kernels assembled");
}

#[test]
fn every_tile_configuration_assembles_with_its_resources() {
    let k = kernel(1, 4096, 4096, 4096, DType::F16, Layout::Nt, true);
    let s = matmul::recognise(&k).expect("recognised");
    for tile in matmul::candidates() {
        for t in Target::CHECKED {
            let p = matmul::emit_with(&k, &t, &s, &tile);
            match ptxas::assemble(&p.ptx, t.sm) {
                Ok(Some(info)) => println!("{tile:?} sm_{}: {}", t.sm, info.trim()),
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

#[test]
fn f32_and_masked_matmuls_stay_on_the_generic_path() {
    let f32_kernel = kernel(1, 32, 32, 32, DType::F32, Layout::Nn, false);
    let mut k = f32_kernel.clone();
    // f32 operands have no Cast: not recognised.
    assert!(matmul::recognise(&k).is_none());
    k.kind = KernelKind::Reduce;
    assert!(matmul::recognise(&k).is_none());
}
