//! With `SMELT_CHECK_PTX=1` (CI sets it), every kernel the CPU runtime runs
//! is also lowered to PTX for sm_80 and sm_90 and assembled with `ptxas`,
//! so generated GPU code is validated on machines without a GPU. A missing
//! `ptxas` is a failure only with `SMELT_REQUIRE_PTXAS=1`.

use crate::{Error, Result};
use smelt_codegen::ptx::{self, ptxas, Target};
use smelt_codegen::Kernel;
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// The targets every kernel is checked for: an A100 and an H100.
const TARGETS: [Target; 2] = [
    Target {
        sm: 80,
        num_sms: 108,
    },
    Target {
        sm: 90,
        num_sms: 132,
    },
];

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("SMELT_CHECK_PTX").is_ok_and(|v| v == "1"))
}

/// Emits and assembles `k` once per distinct kernel, when checking is on.
pub(crate) fn check(k: &Kernel) -> Result<()> {
    if !enabled() {
        return Ok(());
    }
    static SEEN: OnceLock<Mutex<HashSet<u64>>> = OnceLock::new();
    let fresh = SEEN
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(k.code_hash());
    if !fresh {
        return Ok(());
    }
    for t in TARGETS {
        let p = ptx::emit(k, &t).map_err(|e| Error::Compile(format!("kernel {}: {e}", k.name)))?;
        match ptxas::assemble(&p.ptx, t.sm) {
            Ok(Some(_)) => {}
            Ok(None) if std::env::var("SMELT_REQUIRE_PTXAS").is_ok_and(|v| v == "1") => {
                return Err(Error::Compile(
                    "SMELT_REQUIRE_PTXAS=1 but ptxas was not found".into(),
                ));
            }
            Ok(None) => return Ok(()),
            Err(e) => {
                return Err(Error::Compile(format!(
                    "ptxas rejected kernel {} for sm_{}: {e}\n{k}\n{}",
                    k.name, t.sm, p.ptx
                )))
            }
        }
    }
    Ok(())
}
