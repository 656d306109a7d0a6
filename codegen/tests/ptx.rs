//! PTX emission for representative kernels, assembled with `ptxas` for
//! sm_80 and sm_90 when it is installed (`SMELT_REQUIRE_PTXAS=1` makes its
//! absence a failure).

mod ptx_cases;

use smelt_codegen::ptx::{emit, launch, ptxas, Target};
use smelt_codegen::{DType, ScanOp, PARAM_BYTES};

const H100: Target = Target {
    sm: 90,
    num_sms: 132,
};

#[test]
fn every_case_emits_and_assembles() {
    let cases = ptx_cases::all();
    let assembled = ptx_cases::assemble_all(&cases, |k, p| {
        assert!(!p.ptx.contains('\0'));
        for l in &p.launches {
            assert!(p.ptx.contains(&format!(".entry {}(", l.entry)));
            assert!(l.grid.0 >= 1 && l.block.0 >= 32 && l.block.0 <= 1024);
        }
        // `param_bytes` is the one accounting of what each entry declares
        // (the budget planner splits kernels by it).
        let declared = p.ptx.matches("\t.param .").count() / p.launches.len();
        assert_eq!(declared * PARAM_BYTES, k.param_bytes(), "{}", k.name);
    });
    println!("{assembled} of {} assembled", 2 * cases.len());
}

/// Scans of few long rows given their status buffer (as the fusion
/// planner does) map to the look-back scan, a CTA per tile, and assemble
/// with their acquire/release flags, for 32-bit, 64-bit and paired
/// (value, position) states; without the buffer they keep the row walk.
/// So do column tiles of a long strided axis.
#[test]
fn look_back_scans_map_and_assemble() {
    let with_status = |mut k: smelt_codegen::Kernel| {
        let len = smelt_codegen::ptx::scan_status_len(&k);
        assert!(len > 0, "{}: not a look-back shape", k.name);
        k.outputs.push(smelt_codegen::Arg {
            dtype: DType::I64,
            len,
        });
        k
    };
    // Elements a thread: 16, 32 where every access is 16-bit.
    let cases = [
        (ScanOp::Sum, DType::F32, 1, 1 << 20, 4, 16),
        (ScanOp::ArgMax, DType::F64, 3, 100_003, 1, 16),
        (ScanOp::Min, DType::I32, 2, 40_001, 1, 16),
        (ScanOp::LogSumExp, DType::BF16, 5, 65_536, 8, 32),
    ];
    let mut kernels = Vec::new();
    for (op, dt, rows, len, lanes, per_thread) in cases {
        let plain = ptx_cases::scan(op, dt, rows, len, false);
        let launch::Plan::Scan(p) = launch::choose(&plain, &H100) else {
            panic!("{}: not a scan plan", plain.name);
        };
        assert_eq!(p.tiles, 0, "{}: no status buffer, no look-back", plain.name);
        let k = with_status(plain);
        let launch::Plan::Scan(p) = launch::choose(&k, &H100) else {
            panic!("{}: not a scan plan", k.name);
        };
        // At most 8 chunks in a tile.
        let chunks = (per_thread / lanes).min(8);
        let tiles = (len as usize).div_ceil(512 * lanes * chunks) as u32;
        let got = (p.lanes, p.tpr, p.chunks as usize, p.tiles);
        assert_eq!(got, (lanes, 512, chunks, tiles), "{}", k.name);
        assert_eq!(p.grid as i64, rows * tiles as i64, "{}", k.name);
        // One 32-bit state (an f32 one; integers scan in i64 here) is
        // packed with its flag in one 64-bit word.
        let ptx = emit(&k, &H100).unwrap().ptx;
        let flags = if matches!(dt, DType::F32 | DType::BF16) {
            ["st.relaxed.gpu.global.b64", "ld.relaxed.gpu.global.b64"]
        } else {
            ["st.release.gpu", "ld.acquire.gpu"]
        };
        for needle in ["atom.global.add.u32", flags[0], flags[1]] {
            assert!(ptx.contains(needle), "{}: no {needle}", k.name);
        }
        kernels.push(k);
    }
    // Axis 0 of [4096, 4096] f32 in column tiles: 128 columns (4-wide
    // vectors) by 32 positions (4 a thread), 128 tiles chained along the
    // axis for each of 32 column blocks.
    let k = with_status(ptx_cases::scan(ScanOp::Sum, DType::F32, 4096, 4096, true));
    let launch::Plan::Scan(p) = launch::choose(&k, &H100) else {
        panic!("{}: not a scan plan", k.name);
    };
    let got = (p.cols, p.lanes, p.chunks, p.tiles, p.grid);
    assert_eq!(got, (32, 4, 4, 128, 32 * 128), "{}", k.name);
    let ptx = emit(&k, &H100).unwrap().ptx;
    for needle in [
        "atom.global.add.u32",
        "st.release.gpu",
        "ld.acquire.gpu",
        "nanosleep",
    ] {
        assert!(ptx.contains(needle), "{}: no {needle}", k.name);
    }
    kernels.push(k);
    let assembled = ptx_cases::assemble_all(&kernels, |_, _| {});
    if ptx_cases::ptxas_required() {
        assert_eq!(assembled, 2 * kernels.len());
    }
}

/// Prints the PTX of the kernels named in `SMELT_PTX_SHOW` (substring of
/// the entry), and ptxas's resource report for the benchmark shapes of
/// softmax and layer norm (`cargo test --test ptx -- --nocapture`).
#[test]
fn resource_report() {
    let show = std::env::var("SMELT_PTX_SHOW").ok();
    for k in ptx_cases::all() {
        let p = emit(&k, &H100).unwrap();
        if show
            .as_deref()
            .is_some_and(|s| p.launches[0].entry.contains(s))
        {
            println!("{}", p.ptx);
        }
    }
    for dt in [DType::F32, DType::BF16] {
        for n in [1024, 8192, 32768, 131_072] {
            for k in [
                ptx_cases::softmax(4096, n, dt),
                ptx_cases::layernorm(4096, n, dt),
            ] {
                let p = emit(&k, &H100).unwrap();
                let Ok(Some(info)) = ptxas::assemble(&p.ptx, 90) else {
                    continue;
                };
                let regs: Vec<&str> = info
                    .lines()
                    .filter(|l| l.contains("registers") || l.contains("spill"))
                    .map(|l| l.trim_start_matches("ptxas info    : ").trim())
                    .collect();
                println!(
                    "{} {dt} {:?}: {:?} | {}",
                    k.name,
                    k.ranges,
                    launch::choose(&k, &H100),
                    regs.join(" | ")
                );
            }
        }
    }
}

/// Scan kernels pick the mapping their shape needs (a CTA per long row,
/// a warp per short one, a thread per row when the scanned axis is
/// strided), use warp shuffles where a team has several threads, and
/// assemble.
#[test]
fn scan_kernels_map_and_assemble() {
    let cases = [
        (
            ptx_cases::scan(ScanOp::Sum, DType::F32, 64, 8192, false),
            1024,
            4,
        ),
        (
            ptx_cases::scan(ScanOp::Max, DType::BF16, 1000, 100, false),
            32,
            4,
        ),
        (
            ptx_cases::scan(ScanOp::Sum, DType::I32, 4096, 129, true),
            1,
            1,
        ),
        (
            ptx_cases::scan(ScanOp::ArgMax, DType::F16, 3, 100_003, false),
            1024,
            1,
        ),
    ];
    for (k, tpr, lanes) in &cases {
        let launch::Plan::Scan(p) = launch::choose(k, &H100) else {
            panic!("{}: not a scan plan", k.name);
        };
        assert_eq!((p.tpr, p.lanes), (*tpr, *lanes), "{}: {p:?}", k.name);
        let ptx = emit(k, &H100).unwrap().ptx;
        assert_eq!(ptx.contains("shfl.sync.up.b32"), *tpr > 1, "{}", k.name);
        assert_eq!(ptx.contains("bar.sync"), *tpr > 32, "{}", k.name);
    }
    let kernels: Vec<_> = cases.into_iter().map(|c| c.0).collect();
    let assembled = ptx_cases::assemble_all(&kernels, |_, _| {});
    if ptx_cases::ptxas_required() {
        assert_eq!(assembled, 2 * kernels.len());
    }
}
