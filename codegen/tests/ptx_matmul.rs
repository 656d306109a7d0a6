//! The tensor-core matmul emitter: every generated kernel (f16 / bf16 /
//! TF32, every operand layout, odd shapes, batches, epilogues, every tile
//! configuration) must be taken by the emitter and pass `ptxas` for sm_80
//! and sm_90 when it is installed (`SMELT_REQUIRE_PTXAS=1` makes its
//! absence a failure). `cargo test --test ptx_matmul -- --nocapture`
//! prints ptxas's register and spill report per tile configuration.

#[allow(dead_code)] // shared with the other PTX tests, which use the rest
mod ptx_cases;

use ptx_cases::{lin, matmul_domain, matmul_layout as kernel, Kb, MatLayout as Layout};
use smelt_codegen::ptx::matmul::{Elem, Schedule};
use smelt_codegen::ptx::{matmul, ptxas, MapElem, Target};
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
        // On sm_90 every product takes a warpgroup tile where one applies
        // (TF32, halves with 16-byte copies): the smallest when none
        // fills the GPU.
        let sm90 = !p.ptx.contains(".target sm_80");
        let wgmma = matmul::variants(k, &Target::CHECKED[1])
            .iter()
            .any(|n| n.starts_with("wg"));
        assert_eq!(p.ptx.contains("wgmma.mma_async"), sm90 && wgmma, "{k}");
        if sm90 && wgmma {
            return;
        }
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
        kernel(1, 4096, 4096, 4096, Elem::Tf32, Layout::Nn, false),
    ];
    let t = Target::CHECKED[1];
    let mut jobs = Vec::new();
    for k in &ks {
        let s = matmul::recognise(k).expect("recognised");
        // Warpgroup tiles for halves (contiguous along k or the rows) and
        // TF32 (any layout).
        let wgmma = matmul::wgmma_candidates();
        let expected = matmul::candidates().len() + wgmma.len();
        assert_eq!(matmul::variants(k, &t).len(), expected);
        for tile in matmul::candidates().into_iter().chain(wgmma) {
            let p = matmul::emit_variant(k, &t, &tile.name()).expect("a candidate");
            assert_eq!(p, matmul::emit_with(k, &t, &s, &tile));
            assert_eq!(p.ptx.contains("wgmma.mma_async"), tile.wgmma);
            jobs.push((s.elem, layout_of(k), tile, p.ptx));
        }
    }
    let ptx: Vec<_> = jobs.iter().map(|j| (j.3.as_str(), t.sm)).collect();
    for ((elem, layout, tile, _), r) in jobs.iter().zip(ptxas::assemble_each(&ptx)) {
        match r {
            Ok(Some(info)) => {
                println!("{elem:?} {layout:?} {}: {}", tile.name(), info.trim());
                assert_eq!(spilled(&info), 0, "{}: {info}", tile.name());
                // ptxas serialises the warpgroup MMAs when it cannot
                // keep them in flight (a silent 2x loss): never.
                assert!(!info.contains("wgmma"), "{}: {info}", tile.name());
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

#[test]
fn tf32_takes_wgmma_on_sm90_at_edge_shapes_without_spills() {
    // M, N and K each through 1, 7, 127 and 4097 (K not a multiple of 4
    // takes element loads), k-major and row-major B, a transposed A, and
    // a batch with an epilogue.
    let shapes = [
        (1, 1, 1),
        (7, 7, 7),
        (127, 127, 127),
        (4097, 4097, 4097),
        (1, 4097, 7),
        (4097, 1, 127),
        (7, 127, 4097),
        (127, 7, 1),
    ];
    let mut ks = Vec::new();
    for (m, n, k) in shapes {
        for layout in [Layout::Nt, Layout::Nn, Layout::Tn] {
            ks.push(kernel(1, m, n, k, Elem::Tf32, layout, false));
        }
    }
    ks.push(kernel(3, 127, 7, 4097, Elem::Tf32, Layout::Nt, true));
    ks.push(kernel(5, 7, 127, 127, Elem::Tf32, Layout::Nn, true));
    let t = Target::CHECKED[1];
    // The default pick for a big product (small ones that cannot fill the
    // GPU with warpgroup tiles take mma.sync tiles, as halves do).
    let big = ptx_cases::emit_for(&ks[9], &t);
    assert!(big.ptx.contains("k8.f32.tf32.tf32"));
    let wg = matmul::wgmma_candidates();
    let mut jobs = Vec::new();
    for k in &ks {
        let s = matmul::recognise(k).expect("recognised");
        assert_eq!(s.elem, Elem::Tf32);
        // Two warpgroups of 128x256 (where 16-byte copies leave the
        // registers for it) or 128x128, and one of 64x128.
        let names = matmul::variants(k, &t);
        let wide = if names.contains(&wg[0].name()) {
            wg[0]
        } else {
            wg[2]
        };
        for tile in [wide, wg[5]] {
            let p = matmul::emit_variant(k, &t, &tile.name()).expect("a wgmma variant");
            assert!(p.ptx.contains(&format!(
                "wgmma.mma_async.sync.aligned.m64n{}k8.f32.tf32.tf32",
                tile.bn()
            )));
            // Rounded as `RoundTf32` rounds, before shared memory: by the
            // copy engine where both operands are k-major with rows of
            // whole 16 bytes, else in registers.
            let s = matmul::recognise(k).expect("recognised");
            let mapped = s.a.k == 1 && s.b.k == 1 && s.k % 4 == 0 && s.k > 32;
            assert_eq!(p.maps.len(), if mapped { 2 } else { 0 }, "{k}");
            assert!(p.maps.iter().all(|m| m.elem == MapElem::Tf32), "{k}");
            assert_eq!(p.ptx.contains("cvt.rn.tf32.f32"), !mapped, "{k}");
            assert!(!p.ptx.contains("cvt.rna"), "{k}");
            assert!(!p.ptx.contains("mma.sync"), "{k}");
            jobs.push((k, tile, p.ptx));
        }
    }
    let ptx: Vec<_> = jobs.iter().map(|j| (j.2.as_str(), t.sm)).collect();
    for ((k, tile, _), r) in jobs.iter().zip(ptxas::assemble_each(&ptx)) {
        match r {
            Ok(Some(info)) => {
                assert_eq!(spilled(&info), 0, "{} {k}: {info}", tile.name());
                assert!(!info.contains("wgmma"), "{k}: {info}");
            }
            Ok(None) => {
                assert!(!ptx_cases::ptxas_required(), "ptxas not found");
                return;
            }
            Err(e) => panic!("{k}: {e}"),
        }
    }
    // sm_80 keeps mma.sync for the same kernels.
    let p = ptx_cases::emit_for(&ks[0], &Target::CHECKED[0]);
    assert!(p.ptx.contains("m16n8k8.row.col.f32.tf32"));
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
    // never takes the tensor-core emitter (the SIMT one does).
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
    let names = matmul::variants(&k, &Target::CHECKED[1]);
    assert!(!names.is_empty() && names.iter().all(|n| n.starts_with("simt")));
    k.kind = KernelKind::Reduce;
    assert!(matmul::recognise(&k).is_none());
}

/// `batch x [m, k] @ [k, n]` of plain f32 with `gelu(c + bias[n])`: A
/// `[m, k]` and B columns `1..=n` of a `[k, n + 3]` matrix (unaligned rows,
/// no 16-byte copies), or with `strided` no unit stride anywhere. Domain
/// `[batch?, m, n | k]`.
fn f32_odd_layout(batch: i64, m: i64, n: i64, k: i64, strided: bool) -> Kernel {
    let (mut kb, d) = matmul_domain("matmul_f32_odd", batch, m, n, k);
    let (vm, vn, vk) = (d.m, d.n, d.k);
    // (terms, elements per batch, offset)
    let index = |t: &[(usize, i64)], per: i64, konst: i64| d.index(t, per, konst);
    let (ia, la, ib, lb) = if strided {
        let (la, lb) = (3 * m * k, 2 * k * n);
        let ia = index(&[(vm, 3), (vk, 3 * m)], la, 0);
        (ia, la, index(&[(vk, 2 * n), (vn, 2)], lb, 0), lb)
    } else {
        let (la, lb) = (m * k, k * (n + 3));
        let ia = index(&[(vm, k), (vk, 1)], la, 0);
        (ia, la, index(&[(vk, n + 3), (vn, 1)], lb, 1), lb)
    };
    let a = kb.load(DType::F32, (batch * la) as usize, ia);
    let b = kb.load(DType::F32, (batch * lb) as usize, ib);
    let p = kb.bin(BinaryOp::Mul, a, b);
    let v = kb.reduce(ReduceOp::Sum, p);
    let bias = kb.load(DType::F32, n as usize, lin(&[(vn, 1)], 0));
    let v = kb.bin(BinaryOp::Add, v, bias);
    let v = kb.un(smelt_codegen::UnaryOp::Gelu, v);
    kb.store(
        (batch * m * n) as usize,
        index(&[(vm, n), (vn, 1)], m * n, 0),
        v,
        None,
    );
    kb.done()
}

/// Emits each (kernel, SIMT configuration, target) and assembles it on
/// all cores: no rejection, no spills. Returns how many assembled.
fn assemble_simt_variants(jobs: &[(&Kernel, String, Target)], report: bool) -> usize {
    let emitted: Vec<_> = jobs
        .iter()
        .map(|(k, name, t)| {
            assert!(name.starts_with("simt"), "{name}");
            let p = matmul::emit_variant(k, t, name).expect("a listed variant");
            assert!(p.ptx.contains("fma.rn.f32") && !p.ptx.contains("mma.sync"));
            p.ptx
        })
        .collect();
    let ptx: Vec<_> = emitted
        .iter()
        .zip(jobs)
        .map(|(p, (_, _, t))| (p.as_str(), t.sm))
        .collect();
    let mut n = 0;
    for ((k, name, t), r) in jobs.iter().zip(ptxas::assemble_each(&ptx)) {
        match r {
            Ok(Some(info)) => {
                if report {
                    println!("{name} sm_{}: {}", t.sm, info.trim());
                }
                assert_eq!(spilled(&info), 0, "{name} sm_{}: {info}", t.sm);
                n += 1;
            }
            Ok(None) => {}
            Err(e) => panic!("{name} sm_{} {}: {e}", t.sm, k.name),
        }
    }
    if n == 0 {
        println!("skipped: ptxas not found");
        assert!(
            !ptx_cases::ptxas_required(),
            "SMELT_REQUIRE_PTXAS=1 but ptxas was not found"
        );
    }
    n
}

/// Exact-f32 kernels over every copy mode: aligned rows (16-byte copies),
/// k-contiguous operands (transposing 4-byte copies), unaligned and
/// strided operands, sizes 1, 7, 127 and 1000, batches, an epilogue.
fn f32_cases() -> Vec<Kernel> {
    let f32 =
        |batch, m, n, k, layout, epilogue| kernel(batch, m, n, k, Elem::F32, layout, epilogue);
    vec![
        f32(1, 1000, 127, 7, Layout::Nt, true),
        f32(3, 64, 48, 40, Layout::Tn, true),
        f32(1, 1, 1000, 127, Layout::Nn, true),
        f32(1, 7, 1, 1000, Layout::Tn, false),
        f32(2, 129, 260, 36, Layout::Nn, true),
        f32_odd_layout(2, 127, 1000, 33, false),
        f32_odd_layout(1, 17, 9, 7, true),
    ]
}

#[test]
fn exact_f32_matmuls_take_the_simt_emitter() {
    let ks = f32_cases();
    let assembled = ptx_cases::assemble_all(&ks, |k, p| {
        assert!(
            p.ptx.contains("fma.rn.f32") && !p.ptx.contains("mma.sync"),
            "{k}"
        );
        let s = matmul::recognise(k).expect("recognised");
        // Which copies each operand gets (the emitter notes them).
        let copies = match (s.a.row, s.b.row) {
            _ if k.name == "matmul_f32_odd" && s.b.row == 1 => "A KFast, B RowFast",
            _ if k.name == "matmul_f32_odd" => "A RowFast, B RowFast",
            (1, 1) if s.m % 4 == 0 && s.n % 4 == 0 => "A Rows4, B Rows4",
            (_, 1) if s.n % 4 == 0 => "A KFast, B Rows4",
            _ => "",
        };
        assert!(p.ptx.contains(&format!("copies: {copies}")), "{k}");
        let l = &p.launches[0];
        assert!(p.launches.len() == 1 && l.block.0 >= 64 && l.shared_bytes > 0);
    });
    println!("{assembled} exact-f32 matmul kernels assembled");
}

#[test]
fn simt_configurations_assemble_without_spills() {
    // Every configuration for both targets on the common layout; on the
    // other layouts each configuration for one target, alternating (a
    // ptxas run takes about half a second).
    let big = kernel(1, 4096, 4096, 4096, Elem::F32, Layout::Nn, false);
    let names = matmul::variants(&big, &Target::CHECKED[1]);
    assert_eq!(names.len(), 20);
    let all: Vec<_> = names
        .iter()
        .flat_map(|n| Target::CHECKED.map(|t| (&big, n.clone(), t)))
        .collect();
    let cases = f32_cases();
    let alternating: Vec<_> = cases
        .iter()
        .filter(|k| k.ranges.iter().all(|r| *r > 1))
        .enumerate()
        .flat_map(|(i, k)| {
            let names = matmul::variants(k, &Target::CHECKED[1]);
            assert_eq!(names.len(), 20, "{k}");
            names
                .into_iter()
                .enumerate()
                .map(move |(j, n)| (k, n, Target::CHECKED[(i + j) % 2]))
        })
        .collect();
    let n = assemble_simt_variants(&all, true) + assemble_simt_variants(&alternating, false);
    println!("{n} exact-f32 matmul variants assembled");
}

/// The warpgroup tiles that fill the GPU at small products (issue 15:
/// two warpgroups of 128x64, one of 64x64) for halves and TF32, every
/// operand layout, sizes 1, 7, 127, 1024 and 4097, a batch with an
/// epilogue: taken where warpgroup MMAs apply, and assembled for sm_90a
/// without spills or serialised MMAs.
#[test]
fn small_wgmma_tiles_assemble_at_edge_shapes_without_spills() {
    let wg = matmul::wgmma_candidates();
    let small: Vec<matmul::Tile> = wg.iter().copied().filter(|t| t.bn() == 64).collect();
    assert_eq!(small.len(), 2);
    assert_eq!((small[0].bm(), small[1].bm()), (128, 64));
    let t = Target::CHECKED[1];
    let mut jobs = Vec::new();
    for elem in [Elem::F16, Elem::BF16, Elem::Tf32] {
        for layout in [Layout::Nt, Layout::Nn, Layout::Tn] {
            for (batch, m, n, k, epi) in [
                (1, 1, 1, 1, false),
                (1, 7, 7, 7, true),
                (1, 127, 127, 127, false),
                (1, 1024, 1024, 1024, false),
                (3, 4097, 136, 4097, true),
            ] {
                let kern = kernel(batch, m, n, k, elem, layout, epi);
                let names = matmul::variants(&kern, &t);
                for tile in &small {
                    // Halves need 16-byte copies for warpgroup tiles.
                    let applies = names.contains(&tile.name());
                    let aligned = [m, n, k].iter().all(|d| d % 8 == 0) || layout_is_nt(layout, k);
                    assert_eq!(
                        applies,
                        elem == Elem::Tf32 || aligned,
                        "{kern} {}",
                        tile.name()
                    );
                    if applies {
                        let p = matmul::emit_variant(&kern, &t, &tile.name()).expect("listed");
                        let mma = format!("m64n64k{}", if elem == Elem::Tf32 { 8 } else { 16 });
                        assert!(p.ptx.contains(&mma), "{kern}");
                        assert_eq!(p.launches[0].block.0, launched_threads(tile, &p));
                        jobs.push((format!("{kern} {}", tile.name()), p.ptx));
                    }
                }
            }
        }
    }
    assemble_no_spills(&jobs, t.sm);
}

/// Whether halves of `layout` copy 16 bytes along `k` for both operands
/// (`Nt`: both k-contiguous, `K % 8 == 0`).
fn layout_is_nt(layout: Layout, k: i64) -> bool {
    matches!(layout, Layout::Nt) && k % 8 == 0
}

/// Assembles every `(name, ptx)` for `sm` on all cores: no rejection, no
/// spills, no serialised warpgroup MMAs.
fn assemble_no_spills(jobs: &[(String, String)], sm: u32) {
    let ptx: Vec<_> = jobs.iter().map(|(_, ptx)| (ptx.as_str(), sm)).collect();
    let mut n = 0;
    for ((name, _), r) in jobs.iter().zip(ptxas::assemble_each(&ptx)) {
        match r {
            Ok(Some(info)) => {
                assert_eq!(spilled(&info), 0, "{name}: {info}");
                assert!(!info.contains("wgmma"), "{name}: {info}");
                n += 1;
            }
            Ok(None) => {}
            Err(e) => panic!("{name} sm_{sm}: {e}"),
        }
    }
    println!("{n} of {} kernels assembled for sm_{sm}", jobs.len());
    if n == 0 {
        assert!(!ptx_cases::ptxas_required(), "ptxas not found");
    }
}

/// [`assemble_no_spills`] over named `(name, sm, ptx)` jobs, per target.
fn assemble_each_target(jobs: &[(String, u32, String)]) {
    for sm in [80, 90] {
        let these: Vec<(String, String)> = jobs
            .iter()
            .filter(|j| j.1 == sm)
            .map(|j| (j.0.clone(), j.2.clone()))
            .collect();
        assemble_no_spills(&these, sm);
    }
}

/// `k` with a split-K scratch buffer (its last output, f32) of `planes`
/// planes of its `batch M N` outputs, as the fusion planner appends one.
fn with_scratch(mut k: Kernel, planes: usize) -> Kernel {
    let s = matmul::recognise(&k).expect("recognised");
    let plane = (s.m * s.n * s.batches(&k)) as usize;
    k.outputs.push(smelt_codegen::Arg {
        dtype: DType::F32,
        len: planes * plane,
    });
    k
}

/// Split-K at the emitter's level (issue 15), `mma.sync` and warpgroup
/// tiles, halves and TF32, every operand layout, sizes 1, 7, 127 and
/// 4097, batches and an epilogue: `n` splits asked become at most 16 and
/// what the scratch holds, in whole k-tiles (`chunk = ceil(kt / n)`,
/// `count = ceil(kt / chunk)`); the first launch's grid has the count as
/// its `y`. On sm_90 a count of 2, 4 or 8 dividing the tile's rows into
/// shares of whole runs per thread, whose CTAs make at most a wave of one
/// per SM, adds up in a cluster of the count along `y` (one launch, no
/// reduction entry, the shares summed from every rank's staged tile);
/// otherwise the second launch is the reduction (a
/// thread per run of columns). Without a scratch buffer, or with one
/// k-tile, it is one launch. Every split kernel assembles for sm_80 and
/// sm_90 without spills.
#[test]
fn split_k_launches_and_assembles_without_spills() {
    let wg = matmul::wgmma_candidates();
    let mma = matmul::candidates();
    let mut jobs: Vec<(String, u32, String)> = Vec::new();
    // sm_90 split kernels in a cluster and through the scratch.
    let mut paths = [0usize; 2];
    let cases = [
        (1, 1, 1, 4097, Elem::F16, Layout::Nt, false),
        (1, 7, 1000, 4097, Elem::BF16, Layout::Nn, true),
        (1, 127, 127, 127, Elem::Tf32, Layout::Nn, false),
        (3, 64, 136, 1024, Elem::F16, Layout::Tn, true),
        (2, 256, 256, 4096, Elem::Tf32, Layout::Nt, true),
        (1, 128, 64, 7, Elem::F16, Layout::Nt, false),
    ];
    for (batch, m, n, k, elem, layout, epi) in cases {
        let bare = kernel(batch, m, n, k, elem, layout, epi);
        let s = matmul::recognise(&bare).expect("recognised");
        // No scratch buffer: never split.
        for t in [mma[0], wg[2]] {
            assert_eq!(matmul::split_plan(&bare, &s, &t, 4), matmul::Split::NONE);
        }
        let planes = 6;
        let kern = with_scratch(bare, planes);
        for target in Target::CHECKED {
            let mut tiles = vec![mma[0], mma[7]];
            if target.sm >= 90 {
                let names = matmul::variants(&kern, &target);
                tiles.extend(
                    [wg[0], wg[2], wg[7], wg[8]]
                        .into_iter()
                        .filter(|t| names.contains(&t.name())),
                );
            }
            for t in tiles {
                let kt = (k as u64).div_ceil(t.bk(elem.bytes()) as u64);
                for want in [0, 2, 3, 16] {
                    let sp = matmul::split_plan(&kern, &s, &t, want);
                    let p = matmul::emit_split(&kern, &target, &s, &t, sp);
                    let n_asked = want.min(planes as u64);
                    if n_asked < 2 || kt < 2 {
                        assert!(!sp.is_split() && p.launches.len() == 1, "{kern} {want}");
                        continue;
                    }
                    let chunk = kt.div_ceil(n_asked);
                    let count = kt.div_ceil(chunk);
                    assert_eq!((sp.count as u64, sp.chunk as u64), (count, chunk), "{kern}");
                    // A thread per run of 8 columns (16 bytes of halves)
                    // where N allows, else of one; TF32 outputs f32: 4.
                    let lanes = match elem {
                        Elem::Tf32 if n % 4 == 0 => 4,
                        Elem::F16 | Elem::BF16 if n % 8 == 0 => 8,
                        _ => 1,
                    };
                    let c = count as u32;
                    let share_runs = t.bm() / c.max(1) * (t.bn() / lanes);
                    let ctas =
                        (m as u32).div_ceil(t.bm()) * (n as u32).div_ceil(t.bn()) * batch as u32;
                    let cluster = target.sm >= 90
                        && ctas * c <= target.num_sms
                        && [2, 4, 8].contains(&c)
                        && t.bm().is_multiple_of(c)
                        && share_runs.is_multiple_of(t.threads());
                    let directive = format!(".reqnctapercluster 1, {count}, 1");
                    assert_eq!(p.ptx.contains(&directive), cluster, "{kern} {}", t.name());
                    if cluster {
                        let [main] = &p.launches[..] else {
                            panic!("{kern} {want}: one launch, got {:?}", p.launches)
                        };
                        assert_eq!(main.grid.1 as u64, count);
                        assert!(!p.ptx.contains("_splitk"), "{kern}");
                        // Every rank's staged tile, through the cluster.
                        let peers = p.ptx.matches("mapa.shared::cluster").count();
                        assert!(peers >= c as usize, "{kern}: {peers} peer reads");
                        // A cluster CTA's shared addresses carry high bits:
                        // `wgmma` descriptors keep the low 18.
                        if t.wgmma {
                            assert!(p.ptx.contains(", 16383;"), "{kern}: descriptors unmasked");
                        }
                        jobs.push((
                            format!("{kern} {} {count} in a cluster", t.name()),
                            target.sm,
                            p.ptx,
                        ));
                        paths[0] += 1;
                        continue;
                    }
                    let [main, reduce] = &p.launches[..] else {
                        panic!("{kern} {want}: two launches, got {:?}", p.launches)
                    };
                    assert_eq!(main.grid.1 as u64, count);
                    assert!(reduce.entry.ends_with("_splitk"), "{reduce:?}");
                    assert!(p.ptx.contains(&format!(".entry {}(", reduce.entry)));
                    let runs = (m * n) as u32 / lanes;
                    assert_eq!(reduce.grid, (runs.div_ceil(256), 1, batch as u32), "{kern}");
                    paths[1] += usize::from(target.sm >= 90);
                    let name = format!("{kern} {} {count} splits", t.name());
                    jobs.push((name, target.sm, p.ptx));
                }
            }
        }
    }
    assert!(paths[0] > 0 && paths[1] > 0, "sm_90 paths {paths:?}");
    jobs.sort_by(|a, b| (&a.2, a.1).cmp(&(&b.2, b.1)));
    jobs.dedup_by(|a, b| a.2 == b.2 && a.1 == b.1);
    assemble_each_target(&jobs);
}

/// Split-K for exact `f32` (the SIMT kernel, issue 15): with a scratch
/// buffer, each SIMT tile is also offered split as the rule asks
/// (`<tile>-split<n>`), and a split asked of it becomes whole k-tiles
/// (`chunk = ceil(kt / n)`, `count = ceil(kt / chunk)`, at most what the
/// scratch holds): the main launch's grid has the count as its `y` and
/// stores each CTA's sums to its plane (16-byte runs where `N` keeps them
/// aligned), the second launch is the reduction that runs the epilogue.
/// A 1024x1024 output over `k` = 4096 is offered in 128x128 tiles split
/// in two on sm_90 (64 CTAs, one an SM), in 64x64 tiles in three (256
/// CTAs, six an SM). Every split kernel assembles for sm_80 and sm_90
/// without spills; without a scratch buffer nothing splits.
#[test]
fn exact_f32_split_k_launches_and_assembles_without_spills() {
    let planes = 6;
    let cases = [
        kernel(1, 1024, 1024, 4096, Elem::F32, Layout::Nt, true),
        kernel(1, 7, 1000, 4097, Elem::F32, Layout::Nn, false),
        kernel(3, 64, 136, 1024, Elem::F32, Layout::Tn, true),
        kernel(1, 127, 127, 127, Elem::F32, Layout::Nn, false),
        f32_odd_layout(2, 127, 1000, 3000, false),
    ];
    // The rule's count for 64 CTAs of 128x128 (one an SM when split) on
    // 132 SMs: 2; for 256 of 64x64 (six an SM): 3.
    let big = with_scratch(cases[0].clone(), planes);
    let names = matmul::variants(&big, &Target::CHECKED[1]);
    for name in ["simt128x128k8s3g8-split2", "simt64x64k8s3g8-split3"] {
        assert!(names.contains(&name.to_string()), "{name}: {names:?}");
    }
    let mut jobs: Vec<(String, u32, String)> = Vec::new();
    for bare in cases {
        let names = matmul::variants(&bare, &Target::CHECKED[1]);
        assert!(
            names.iter().all(|n| !n.contains("-split")),
            "{bare}: {names:?}"
        );
        let kern = with_scratch(bare, planes);
        let s = matmul::recognise(&kern).expect("recognised");
        for target in Target::CHECKED {
            let names = matmul::variants(&kern, &target);
            let tiles: Vec<&String> = names.iter().filter(|n| !n.contains("-split")).collect();
            assert_eq!(tiles.len(), 20, "{kern}");
            for (i, tile) in tiles.iter().enumerate().filter(|(i, _)| i % 5 == 0) {
                let bk = if tile.contains("k16") { 16 } else { 8 };
                let kt = (s.k as u64).div_ceil(bk);
                for want in [2, 3, 16] {
                    let name = format!("{tile}-split{want}");
                    let p = matmul::emit_variant(&kern, &target, &name).expect("a SIMT tile");
                    let asked = want.min(planes as u64);
                    if kt < 2 {
                        assert_eq!(p.launches.len(), 1, "{kern} {name}");
                        continue;
                    }
                    let count = kt.div_ceil(kt.div_ceil(asked));
                    let [main, reduce] = &p.launches[..] else {
                        panic!("{kern} {name}: two launches, got {:?}", p.launches)
                    };
                    assert_eq!(main.grid.1 as u64, count, "{kern} {name}");
                    assert!(reduce.entry.ends_with("_splitk"), "{reduce:?}");
                    assert!(p.ptx.contains("fma.rn.f32"), "{kern} {name}");
                    let runs = s.n % 4 == 0;
                    assert_eq!(p.ptx.contains("st.global.v4.f32"), runs, "{kern} {name}");
                    if (i + want as usize).is_multiple_of(2) {
                        jobs.push((format!("{kern} {name}"), target.sm, p.ptx));
                    }
                }
            }
        }
    }
    assemble_each_target(&jobs);
}

/// The FP8 operand pairs `wgmma` multiplies: both formats, and mixed.
const FP8_PAIRS: [Elem; 3] = [
    Elem::Fp8 {
        a: DType::F8E4M3,
        b: DType::F8E4M3,
    },
    Elem::Fp8 {
        a: DType::F8E5M2,
        b: DType::F8E5M2,
    },
    Elem::Fp8 {
        a: DType::F8E4M3,
        b: DType::F8E5M2,
    },
];

/// The `wgmma` instruction of an FP8 pair with `n` columns.
fn fp8_wgmma(elem: Elem, n: u32) -> String {
    let name = |dt: DType| if dt == DType::F8E4M3 { "e4m3" } else { "e5m2" };
    let [a, b] = elem.dtypes();
    format!(
        "wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{}.{}",
        name(a),
        name(b)
    )
}

/// FP8 products (issue 15; what `scaled_mm` records: casts of FP8 loads
/// to f32, the scale in the epilogue) at M, N, K of 1, 7, 127 and 4097,
/// every layout and FP8 pair, a batch with an epilogue: recognised as
/// FP8, lowered on sm_90 to `wgmma` `k32` with the operands' FP8 types
/// (16-byte copies where `k` is contiguous in 16-byte chunks, else byte
/// loads packed by `prmt`), and on sm_80, which has no FP8 MMA, to the
/// generic kernel; both assemble.
#[test]
fn fp8_products_take_wgmma_on_sm90_and_the_generic_kernel_on_sm80() {
    let shapes = [
        (1, 1, 1, 1, false),
        (1, 7, 7, 7, true),
        (1, 127, 127, 127, false),
        (1, 4097, 7, 4097, false),
        (1, 7, 4097, 127, true),
        (3, 128, 136, 4096, true),
    ];
    let mut ks = Vec::new();
    for elem in FP8_PAIRS {
        for layout in [Layout::Nt, Layout::Nn, Layout::Tn] {
            for (batch, m, n, k, epi) in shapes {
                ks.push(kernel(batch, m, n, k, elem, layout, epi));
            }
        }
    }
    ks.push(ptx_cases::matmul_scaled(256, 64, 512, FP8_PAIRS[0]));
    let assembled = ptx_cases::assemble_all(&ks, |k, p| {
        let s = matmul::recognise(k).expect("recognised");
        assert!(s.elem.is_fp8(), "{k}");
        if p.ptx.contains(".target sm_80") {
            assert!(!p.ptx.contains("mma"), "{k}");
            assert!(matmul::variants(k, &Target::CHECKED[0]).is_empty());
            return;
        }
        let names = matmul::variants(k, &Target::CHECKED[1]);
        assert!(!names.is_empty() && names.iter().all(|n| n.starts_with("wg")));
        assert!(
            p.ptx.contains(&fp8_wgmma(s.elem, 64))
                || [128, 256]
                    .iter()
                    .any(|n| p.ptx.contains(&fp8_wgmma(s.elem, *n))),
            "{k}"
        );
        assert!(!p.ptx.contains("mma.sync") && !p.ptx.contains("cvt.rna.tf32"));
        // k-contiguous operands in 16-byte chunks are copied, ones
        // contiguous along their rows transposed in registers (unless the
        // other takes bytes); others are byte loads.
        let (along_k, along_rows) = (
            |op: &matmul::Operand, _: i64| op.vector_ok(s.k, 16),
            |op: &matmul::Operand, rows: i64| op.rows_only(s.k, rows, 16),
        );
        let fast = |op, rows| along_k(op, rows) || along_rows(op, rows);
        let bytes = !(fast(&s.a, s.m) && fast(&s.b, s.n));
        let transposed = !bytes && (along_rows(&s.a, s.m) || along_rows(&s.b, s.n));
        assert_eq!(p.ptx.contains("ld.global.u8"), bytes, "{k}");
        assert_eq!(p.ptx.contains("prmt.b32"), bytes || transposed, "{k}");
        assert_eq!(p.ptx.contains("st.shared.b32"), transposed, "{k}");
    });
    println!("{assembled} FP8 matmul kernels assembled");
    // The default sm_90 kernels keep within 255 registers, byte loads too.
    let t = Target::CHECKED[1];
    let jobs: Vec<(String, String)> = ks
        .iter()
        .map(|k| (k.to_string(), ptx_cases::emit_for(k, &t).ptx))
        .collect();
    assemble_no_spills(&jobs, t.sm);
}

/// Every warpgroup tile (128x256, 128x128, 128x64, 64x64 and the rest)
/// for FP8 at 4096^3: k-contiguous (16-byte copies) all tiles; a
/// row-major B or a transposed A (transposed in registers), and at 4088^3
/// a row-major B read by bytes, tiles up to 128 wide (64 for one
/// warpgroup); assembled for
/// sm_90a without spills or serialised MMAs. `-- --nocapture` prints
/// ptxas's report per tile.
#[test]
fn fp8_tiles_assemble_without_spills() {
    let t = Target::CHECKED[1];
    let wg = matmul::wgmma_candidates();
    let mut jobs = Vec::new();
    let cases = [
        (FP8_PAIRS[0], Layout::Nt, 4096),
        (FP8_PAIRS[2], Layout::Nn, 4096),
        (FP8_PAIRS[1], Layout::Tn, 4096),
        // K % 16 != 0 and N % 16 != 0: bytes for B.
        (FP8_PAIRS[0], Layout::Nn, 4088),
    ];
    for (elem, layout, size) in cases {
        let k = kernel(1, size, size, size, elem, layout, false);
        let names = matmul::variants(&k, &t);
        let expected: Vec<String> = wg
            .iter()
            .filter(|tile| matches!(layout, Layout::Nt) || tile.bn() <= 128)
            // Read by bytes, not one warpgroup 128 wide (it spills at
            // small K, see `wgmma_fits`).
            .filter(|tile| size % 16 == 0 || tile.threads() > 128 || tile.bn() <= 64)
            .map(|tile| tile.name())
            .collect();
        assert_eq!(names, expected, "{layout:?}");
        let s = matmul::recognise(&k).expect("recognised");
        for tile in wg.iter().filter(|tile| names.contains(&tile.name())) {
            let p = matmul::emit_variant(&k, &t, &tile.name()).expect("listed");
            assert_eq!(p, matmul::emit_with(&k, &t, &s, tile));
            assert!(
                p.ptx.contains(&fp8_wgmma(elem, tile.bn())),
                "{}",
                tile.name()
            );
            // The stages, and with the copy engine a barrier per stage
            // past them, within the 227 KiB a CTA may use.
            let shared = p.launches[0].shared_bytes;
            // "full" barriers, and "empty" ones where warp-specialised.
            let barriers = if p.maps.is_empty() {
                0
            } else if specialised(tile, &p) {
                16 * tile.stages
            } else {
                8 * tile.stages
            };
            assert_eq!(shared, tile.shared_bytes() + barriers, "{}", tile.name());
            assert!(shared <= 227 * 1024, "{}", tile.name());
            jobs.push((format!("{elem:?} {layout:?} {}", tile.name()), p.ptx));
        }
    }
    let ptx: Vec<_> = jobs.iter().map(|(_, ptx)| (ptx.as_str(), t.sm)).collect();
    for ((name, _), r) in jobs.iter().zip(ptxas::assemble_each(&ptx)) {
        match r {
            Ok(Some(info)) => {
                println!("{name}: {}", info.trim());
                assert_eq!(spilled(&info), 0, "{name}: {info}");
                assert!(!info.contains("wgmma"), "{name}: {info}");
            }
            Ok(None) => {
                assert!(!ptx_cases::ptxas_required(), "ptxas not found");
                return;
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

/// Split-K for FP8 (`split.rs` applies as for halves): a small output
/// over a long `k` splits under the rule with the default tile into a
/// cluster of 4 or through its reduction launch, and the split kernels of
/// the small tiles assemble without spills.
#[test]
fn fp8_split_k_assembles_without_spills() {
    let t = Target::CHECKED[1];
    let wg = matmul::wgmma_candidates();
    let mut jobs = Vec::new();
    for (elem, layout) in [(FP8_PAIRS[0], Layout::Nt), (FP8_PAIRS[2], Layout::Tn)] {
        let bare = kernel(1, 512, 512, 8192, elem, layout, true);
        let k = with_scratch(bare, 16);
        let p = ptx_cases::emit_for(&k, &t);
        let split = p.launches[0].grid.1;
        let cluster = p.ptx.contains(&format!(".reqnctapercluster 1, {split}, 1"));
        assert!(split > 1, "{k}: {:?}", p.launches);
        assert_eq!(p.launches.len(), if cluster { 1 } else { 2 }, "{k}");
        assert!(cluster || p.launches[1].entry.ends_with("_splitk"));
        let s = matmul::recognise(&k).expect("recognised");
        for tile in [wg[2], wg[7], wg[8]] {
            let sp = matmul::split_plan(&k, &s, &tile, 4);
            assert_eq!((sp.count, sp.chunk), (4, 16));
            let p = matmul::emit_split(&k, &t, &s, &tile, sp);
            assert_eq!(p.launches[0].grid.1, 4);
            jobs.push((
                format!("{elem:?} {layout:?} {} split 4", tile.name()),
                p.ptx,
            ));
        }
    }
    assemble_no_spills(&jobs, t.sm);
}

/// The copy engine (issue 15): on sm_90, a warpgroup tile whose operands
/// are both contiguous along `k` with rows of whole 16 bytes, or halves
/// contiguous along their rows (a row-major B, a transposed A, in 64-row
/// atoms), reads them through two tensor maps (A's, then B's: the right
/// element kind, dims, byte strides and boxes of one swizzled 128-byte
/// row) that thread 0 starts under a barrier per stage; any other operand
/// keeps the threads' copies for both, as does a `k` of one k-tile.
/// Halves, TF32 and FP8, odd sizes,
/// batches, every tile, split-K: all assemble without spills.
#[test]
fn the_copy_engine_takes_operands_it_can_map() {
    let t = Target::CHECKED[1];
    let mut jobs = Vec::new();
    let shapes = [
        (1, 128, 256, 512),
        (3, 64, 48, 40),
        (1, 1000, 127, 7),
        (2, 7, 200, 4096),
    ];
    for elem in [Elem::F16, Elem::BF16, Elem::Tf32, FP8_PAIRS[0]] {
        let eb = i64::from(elem.bytes());
        for layout in [Layout::Nt, Layout::Nn, Layout::Tn] {
            for (batch, m, n, k) in shapes {
                let kern = kernel(batch, m, n, k, elem, layout, batch > 1);
                let s = matmul::recognise(&kern).expect("recognised");
                let aligned = |stride: i64| (stride * eb) % 16 == 0;
                // k-major with 16-byte rows, or (halves) contiguous rows.
                let maps_op = |op: &matmul::Operand| {
                    (op.k == 1 && aligned(op.row)) || (eb == 2 && op.row == 1 && aligned(op.k))
                };
                // ... and more than one k-tile of 128 bytes.
                let mapped = maps_op(&s.a) && maps_op(&s.b) && k * eb > 128;
                let names = matmul::variants(&kern, &t);
                for name in names.iter().filter(|n| n.starts_with("wg")) {
                    let p = matmul::emit_variant(&kern, &t, name).expect("a variant");
                    let what = format!("{name} {layout:?} {elem:?} {batch}x{m}x{n}x{k}");
                    assert_eq!(p.maps.len(), if mapped { 2 } else { 0 }, "{what}");
                    let bulk = p.ptx.contains("cp.async.bulk.tensor.3d");
                    assert_eq!(bulk, mapped, "{what}");
                    for (m, op) in p.maps.iter().zip([&s.a, &s.b]) {
                        assert_eq!(m.input, op.input, "{what}");
                        assert_eq!(m.boxes[0] as i64 * eb, 128, "{what}: one swizzled row");
                        let kind = match elem {
                            Elem::Tf32 => MapElem::Tf32,
                            Elem::F16 | Elem::BF16 => MapElem::B16,
                            _ => MapElem::B8,
                        };
                        assert_eq!(m.elem, kind, "{what}");
                        let (dim1, stride) = if op.k == 1 { (k, op.row) } else { (k, op.k) };
                        assert!(m.dims.contains(&(dim1 as u64)), "{what}: {m:?}");
                        assert_eq!(m.strides[0] as i64, stride * eb, "{what}: {m:?}");
                    }
                    if mapped {
                        // Thread 0 announces a stage's bytes, all wait.
                        assert!(p.ptx.contains("mbarrier.arrive.expect_tx"), "{what}");
                        assert!(p.ptx.contains("mbarrier.try_wait.parity"), "{what}");
                        assert!(!p.ptx.contains("cvt.rn.tf32"), "{what}: the engine rounds");
                    }
                    jobs.push((what, p.ptx));
                }
            }
        }
    }
    assert!(jobs.len() > 40, "{}", jobs.len());
    assemble_no_spills(&jobs, t.sm);
}

/// Whether kernel `p` of tile `t` runs warp-specialised, as it must by
/// default exactly where `t` is one warpgroup and the copy engine maps
/// its operands (`k` unsplit: the variants named here are).
fn specialised(t: &matmul::Tile, p: &smelt_codegen::ptx::PtxKernel) -> bool {
    let ws = p.ptx.contains("setmaxnreg");
    assert_eq!(
        ws,
        t.wgmma && t.bm() == 64 && !p.maps.is_empty(),
        "{}",
        t.name()
    );
    ws
}

/// Threads a CTA of tile `t` launches with: the tile's, and the producer
/// warpgroup's where it is warp-specialised ([`specialised`]).
fn launched_threads(t: &matmul::Tile, p: &smelt_codegen::ptx::PtxKernel) -> u32 {
    t.threads() + if specialised(t, p) { 128 } else { 0 }
}

/// The untimed pick over a 1024^2 output: one warpgroup of 64x128 for
/// `k` = 1024, two of 128x128 for a long `k` (the split rule then halves
/// `k` for its 64 CTAs, where the kernel has scratch), for halves in
/// either layout of B.
#[test]
fn long_k_over_small_outputs_takes_two_warpgroups_of_128x128() {
    let t = Target::CHECKED[1];
    for layout in [Layout::Nt, Layout::Nn] {
        // One warpgroup of 64x128 and its producer warpgroup, or two of
        // 128x128 (split, so not warp-specialised).
        for (k, threads) in [(1024, 256), (4032, 256), (4096, 256), (8192, 256)] {
            let kern = kernel(1, 1024, 1024, k, Elem::F16, layout, false);
            let p = ptx_cases::emit_for(&kern, &t);
            assert_eq!(p.launches[0].block.0, threads, "k = {k}");
            assert!(p.ptx.contains("m64n128k16.f32.f16.f16"), "k = {k}");
        }
    }
    // A bigger output fills the GPU with 128x256 tiles at any `k`.
    let kern = kernel(1, 2048, 2048, 8192, Elem::F16, Layout::Nt, false);
    assert!(ptx_cases::emit_for(&kern, &t).ptx.contains("m64n256k16"));
}

/// The warp-specialised warpgroup kernel (issue 15, tile names ending in
/// `ws`, `SMELT_MATMUL_WS=1`): for halves, TF32 and FP8 in every layout,
/// M, N and K through 1, 7, 127 and 4097, batches and an epilogue, the
/// main tiles and the small ones. Where the copy engine maps both
/// operands and `k` spans several k-tiles, the kernel has a producer
/// warpgroup more (`setmaxnreg.dec` to 24, one thread issuing after the
/// stage's "empty" barrier), consumers that `setmaxnreg.inc`, release
/// stages by `mbarrier.arrive` and synchronise only on named barrier 1
/// (the one CTA-wide `bar.sync` initialises the barriers, before the
/// roles split), twice the barriers, `.maxnreg` at the budget; everywhere
/// else it is the plain tile's kernel. All assemble without spills.
#[test]
fn warp_specialised_kernels_assemble_without_spills() {
    let t = Target::CHECKED[1];
    let wg = matmul::wgmma_candidates();
    let shapes = [
        (1, 1, 1, 1),
        (1, 7, 7, 7),
        (1, 127, 127, 127),
        (1, 4097, 4097, 4097),
        (1, 1, 4097, 4096),
        (1, 4097, 7, 1024),
        (1, 127, 4096, 4104),
        (1, 7, 127, 520),
        (3, 127, 136, 4096),
        (2, 1000, 1, 264),
    ];
    let mut jobs = Vec::new();
    let mut specialised = 0;
    for elem in [Elem::F16, Elem::BF16, Elem::Tf32, FP8_PAIRS[2]] {
        for layout in [Layout::Nt, Layout::Nn, Layout::Tn] {
            for (i, (batch, m, n, k)) in shapes.into_iter().enumerate() {
                let kern = kernel(batch, m, n, k, elem, layout, i % 2 == 1);
                let names = matmul::variants(&kern, &t);
                // The main tiles (128x256, 128x128, 64x128), the small ones.
                for tile in [wg[0], wg[2], wg[6], wg[7], wg[8]] {
                    if !names.contains(&tile.name()) {
                        continue;
                    }
                    let plain = matmul::emit_variant(&kern, &t, &tile.name()).expect("listed");
                    for schedule in [Schedule::Specialized, Schedule::Persistent] {
                        let ws = tile.with(schedule);
                        let what = format!("{kern} {}", ws.name());
                        let p = matmul::emit_variant(&kern, &t, &ws.name()).expect("a ws name");
                        if p.maps.is_empty() {
                            assert_eq!(p, plain, "{what}: no copy engine, the plain kernel");
                            continue;
                        }
                        check_specialised(&p, &ws, (&kern, &t), &what);
                        specialised += 1;
                        jobs.push((what, p.ptx));
                    }
                }
            }
        }
    }
    assert!(specialised > 200, "{specialised}");
    assemble_no_spills(&jobs, t.sm);
}

/// The producer/consumer structure of warp-specialised kernel `p` of tile
/// `t` for `kern` on `target` (see
/// [`warp_specialised_kernels_assemble_without_spills`]).
fn check_specialised(
    p: &smelt_codegen::ptx::PtxKernel,
    t: &matmul::Tile,
    (kern, target): (&Kernel, &Target),
    what: &str,
) {
    let ptx = &p.ptx;
    assert_eq!(p.launches.len(), 1, "{what}");
    let l = &p.launches[0];
    let budget = matmul::budget(t, l.shared_bytes);
    assert_eq!(l.block.0, t.threads() + 128, "{what}");
    let directives = format!(".maxntid {}, 1, 1\n.maxnreg {}\n", l.block.0, budget.launch);
    assert!(ptx.contains(&directives), "{what}");
    let dec = format!("setmaxnreg.dec.sync.aligned.u32 {};", budget.producer);
    assert!(ptx.contains(&dec), "{what}");
    let inc = format!("setmaxnreg.inc.sync.aligned.u32 {};", budget.consumer);
    assert!(ptx.contains(&inc), "{what}");
    // Full barriers of count 1, empty ones of one arrival per consumer
    // warp, and lane 0 of each releasing.
    let empty = format!("], {};", t.threads() / 32);
    let inits: Vec<&str> = ptx
        .lines()
        .filter(|l| l.contains("mbarrier.init"))
        .collect();
    assert_eq!(inits.len() as u32, 2 * t.stages, "{what}");
    assert_eq!(
        inits.iter().filter(|l| l.ends_with(&empty)).count() as u32,
        t.stages,
        "{what}"
    );
    assert_eq!(ptx.matches("mbarrier.arrive.shared::cta.b64 _,").count(), 2);
    assert_eq!(ptx.matches("mbarrier.arrive.expect_tx").count(), 1);
    // One CTA-wide barrier, before the roles split; the consumers' main
    // loop has none; the epilogue waits for the consumers only.
    assert_eq!(ptx.matches("bar.sync 0;").count(), 1, "{what}");
    let named = format!("bar.sync 1, {};", t.threads());
    let syncs = ptx.matches("bar.sync").count();
    assert_eq!(syncs, 1 + ptx.matches(&named).count(), "{what}");
    let split = ptx.find("setmaxnreg.dec").expect("a producer");
    assert!(ptx.find("bar.sync 0;").expect("one") < split, "{what}");
    assert!(!ptx.contains("cp.async.cg") && !ptx.contains("cp.async.wait"));
    // Both barrier sets past the stages and the staging area (past the
    // stages too in a persistent kernel, in slices of columns where the
    // whole tile does not fit).
    let staged = t.bm() * (t.bn() + 8) * 4;
    let s = matmul::recognise(kern).expect("recognised");
    let tiles = (s.m as u32).div_ceil(t.bm()) * (s.n as u32).div_ceil(t.bn());
    assert!(l.shared_bytes <= 227 * 1024, "{what}");
    assert_eq!(l.grid.2 as i64, s.batches(kern), "{what}");
    if t.schedule == Schedule::Persistent {
        assert!(l.shared_bytes > t.shared_bytes() + 16 * t.stages, "{what}");
        let slices = ptx.matches(&named).count() / 2;
        let full = t.shared_bytes() + staged + 16 * t.stages <= 227 * 1024;
        assert_eq!(slices == 1, full, "{what}");
        // At most a wave, shared by the batches.
        let wave = (budget.ctas * target.num_sms / l.grid.2).max(1);
        assert!(l.grid.0 >= 1 && l.grid.0 <= tiles.min(wave), "{what}");
        assert!(ptx.contains("%nctaid.x"), "{what}");
    } else {
        assert_eq!(ptx.matches(&named).count(), 2, "{what}");
        assert_eq!(l.grid.0, tiles, "{what}");
        let shared = t.shared_bytes().max(staged);
        assert_eq!(l.shared_bytes, shared + 16 * t.stages, "{what}");
    }
}

/// The register budgets of the warp-specialised tiles (with the shared
/// memory of their kernels that are not persistent): every thread fits
/// the register file at launch, the producer gives back at least what the
/// consumers take, all multiples of 8 in `setmaxnreg`'s range; two CTAs
/// per SM where two fit in shared memory and the launch budget keeps 40
/// registers over the accumulators.
#[test]
fn warp_specialised_register_budgets_fit() {
    let wg = matmul::wgmma_candidates();
    let budget = |t: &matmul::Tile| {
        let staged = t.bm() * (t.bn() + 8) * 4;
        let shared = t.shared_bytes().max(staged) + 16 * t.stages;
        (matmul::budget(t, shared), shared)
    };
    for t in &wg {
        let (b, shared) = budget(t);
        let (c, threads) = (t.threads(), t.threads() + 128);
        assert!(b.ctas * threads * b.launch <= 65536, "{t:?} {b:?}");
        assert!(b.ctas * (shared + 1024) <= 228 * 1024, "{t:?} {b:?}");
        assert!(
            128 * b.producer + c * b.consumer <= threads * b.launch,
            "{b:?}"
        );
        for r in [b.launch, b.producer, b.consumer] {
            assert!(r % 8 == 0 && (24..=256).contains(&r), "{t:?} {b:?}");
        }
        assert!(b.launch <= 248 && b.producer <= b.launch && b.launch <= b.consumer);
        // ptxas compiles the consumers within the launch budget.
        assert!(b.launch >= t.bn() / 2 + 40, "{t:?} {b:?}");
    }
    let shape = |t: &matmul::Tile| {
        let b = budget(t).0;
        (b.ctas, b.launch, b.producer, b.consumer)
    };
    assert_eq!(shape(&wg[0]), (1, 168, 24, 240), "128x256");
    assert_eq!(shape(&wg[2]), (1, 168, 24, 240), "128x128, 3 stages");
    assert_eq!(shape(&wg[7]), (2, 80, 24, 104), "128x64");
    assert_eq!(shape(&wg[3]), (1, 168, 24, 240), "128x128, 4 stages");
    assert_eq!(shape(&wg[6]), (2, 128, 24, 232), "64x128");
    assert_eq!(shape(&wg[4]), (1, 248, 24, 256), "64x256");
    // The names `SMELT_MATMUL_TILE` accepts include every specialised one.
    let names = matmul::tile_names();
    for t in matmul::wgmma_candidates() {
        let ws = t.with(Schedule::Specialized).name();
        let wsp = t.with(Schedule::Persistent).name();
        assert_eq!(
            (&ws, &wsp),
            (&format!("{}ws", t.name()), &format!("{}wsp", t.name()))
        );
        assert!(names.contains(&ws) && names.contains(&wsp), "{ws}");
    }
}

/// The SIMT tile exact-`f32` products get without the autotuner (issue
/// 15; `simt::choose`): 1024^3 would fill the GPU in 64x64 tiles only by
/// splitting them, so it takes the 128x128 tile of 8x16 (128 threads) and
/// splits that (64 CTAs); a short `k` (32 x 512x512x64) takes 128x64
/// tiles of 128 threads, unsplit; 4096^3 the 128x128 tile of 8x8 (256
/// threads). Each launch declares its threads' register budget.
#[test]
fn exact_f32_heuristic_tiles() {
    let t = Target::CHECKED[1];
    let emit = |batch, m, n, k| {
        let kern = with_scratch(kernel(batch, m, n, k, Elem::F32, Layout::Nn, false), 6);
        matmul::emit(&kern, &t).expect("the SIMT emitter")
    };
    let p = emit(1, 1024, 1024, 1024);
    let main = &p.launches[0];
    assert_eq!((main.block.0, main.grid.0), (128, 64), "{:?}", p.launches);
    assert!(p.launches.len() == 2 && main.grid.1 > 1, "{:?}", p.launches);
    assert!(p.ptx.contains(".maxntid 128, 1, 1") && p.ptx.contains(".minnctapersm 2"));
    let p = emit(32, 512, 512, 64);
    let main = &p.launches[0];
    assert_eq!(
        (main.block.0, main.grid.0 * main.grid.2),
        (128, 1024),
        "{:?}",
        p.launches
    );
    assert_eq!(p.launches.len(), 1);
    let p = emit(1, 4096, 4096, 4096);
    assert_eq!((p.launches[0].block.0, p.launches[0].grid.0), (256, 1024));
}
