//! `SMELT_MATMUL_WS=1` (issue 15): every warpgroup tile whose operands the
//! copy engine maps is emitted warp-specialised, by the heuristic and by
//! the autotuner's names alike, with `SMELT_MATMUL_PERSIST=1` on a
//! persistent grid, and the module caches' key tells them apart. A test binary of its own: it sets the variable, which the other
//! matmul tests, running in parallel threads, must not see.

#[allow(dead_code)] // shared with the other PTX tests, which use the rest
mod ptx_cases;

use ptx_cases::{matmul_layout as kernel, MatLayout as Layout};
use smelt_codegen::ptx::matmul::{self, Elem};
use smelt_codegen::ptx::{emit, env_key, Target};

#[test]
fn smelt_matmul_ws_and_persist_specialise_the_copy_engine_kernels() {
    let t = Target::CHECKED[1];
    let mapped = kernel(1, 4096, 4096, 1024, Elem::F16, Layout::Nt, true);
    // One k-tile: no copy engine, so the plain kernel.
    let short = kernel(1, 2048, 2048, 64, Elem::F16, Layout::Nt, false);
    let plain = (emit(&mapped, &t).unwrap(), emit(&short, &t).unwrap());
    let (key, names) = (env_key(&mapped), matmul::variants(&mapped, &t));
    std::env::set_var("SMELT_MATMUL_WS", "1");
    let ws = (emit(&mapped, &t).unwrap(), emit(&short, &t).unwrap());
    let ws_key = env_key(&mapped);
    let tuned: Vec<_> = names
        .iter()
        .map(|n| matmul::emit_variant(&mapped, &t, n).unwrap())
        .collect();
    let ws_names = matmul::variants(&mapped, &t);
    std::env::set_var("SMELT_MATMUL_PERSIST", "1");
    let persistent = emit(&mapped, &t).unwrap();
    let persistent_key = env_key(&mapped);
    std::env::remove_var("SMELT_MATMUL_WS");
    let alone = emit(&mapped, &t).unwrap();
    std::env::remove_var("SMELT_MATMUL_PERSIST");
    assert_eq!(alone, plain.0, "SMELT_MATMUL_PERSIST needs SMELT_MATMUL_WS");
    assert!(persistent.ptx.contains("%nctaid.x"));
    assert!(persistent.launches[0].grid.0 <= t.num_sms);
    assert!(persistent.launches[0].grid.0 < ws.0.launches[0].grid.0);
    assert!(persistent_key != ws_key && persistent_key != key);
    assert_ne!(key, ws_key);
    assert_eq!(names, ws_names, "the autotuner's candidates stay");
    assert!(!plain.0.ptx.contains("setmaxnreg"));
    assert!(ws.0.ptx.contains("setmaxnreg.dec.sync.aligned.u32 24"));
    assert_eq!(ws.0.launches[0].block.0, plain.0.launches[0].block.0 + 128);
    assert_eq!(ws.1, plain.1);
    for (name, p) in names.iter().zip(&tuned) {
        assert_eq!(
            p.ptx.contains("setmaxnreg"),
            name.starts_with("wg"),
            "{name}"
        );
    }
    assert_eq!(emit(&mapped, &t).unwrap(), plain.0, "unset again: plain");
    assert_eq!(env_key(&mapped), key);
}
