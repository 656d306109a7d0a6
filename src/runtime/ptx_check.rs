//! With `SMELT_CHECK_PTX=1` (CI sets it), every distinct kernel the CPU
//! runtime runs is also lowered to PTX for sm_80 and sm_90 and assembled
//! with `ptxas`, so generated GPU code is validated on machines without a
//! GPU. A missing `ptxas` is a failure only with `SMELT_REQUIRE_PTXAS=1`.
//!
//! Starting `ptxas` costs far more than assembling one kernel, so kernels
//! are assembled in batches of [`BATCH`] as one module each; the last
//! partial batch is assembled when the process exits (a failure there ends
//! the process with status 101, as a failed test does). A batch that fails
//! is re-assembled kernel by kernel to name the culprit.

use crate::{Error, Result};
use smelt_codegen::ptx::{self, ptxas, Target};
use smelt_codegen::Kernel;
use std::collections::HashSet;
use std::sync::{Mutex, Once, OnceLock};

const TARGETS: [Target; 2] = Target::CHECKED;

/// Kernels per `ptxas` run.
const BATCH: usize = 64;

/// A kernel waiting to be assembled: its name and PTX, per target.
struct Pending {
    name: String,
    ptx: [String; 2],
}

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| smelt_codegen::env::flag("SMELT_CHECK_PTX", false))
}

fn pending() -> &'static Mutex<Vec<Pending>> {
    static P: OnceLock<Mutex<Vec<Pending>>> = OnceLock::new();
    P.get_or_init(|| Mutex::new(Vec::new()))
}

/// Emits `k` (once per distinct kernel) and assembles a batch when one is
/// full, when checking is on.
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
    let emit = |t: &Target| -> Result<String> {
        ptx::emit(k, t)
            .map(|p| p.ptx)
            .map_err(|e| Error::Compile(format!("kernel {}: {e}", k.name)))
    };
    let item = Pending {
        name: k.name.clone(),
        ptx: [emit(&TARGETS[0])?, emit(&TARGETS[1])?],
    };
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain function with the C runtime.
        unsafe { atexit(flush_at_exit) };
    });
    let full = {
        let mut p = pending().lock().unwrap_or_else(|e| e.into_inner());
        p.push(item);
        if p.len() >= BATCH {
            std::mem::take(&mut *p)
        } else {
            Vec::new()
        }
    };
    assemble(&full)
}

extern "C" {
    fn atexit(f: extern "C" fn()) -> i32;
    fn _exit(status: i32) -> !;
}

extern "C" fn flush_at_exit() {
    let rest = std::mem::take(&mut *pending().lock().unwrap_or_else(|e| e.into_inner()));
    if let Err(e) = assemble(&rest) {
        eprintln!("smelt: PTX check failed at exit: {e}");
        // SAFETY: ends the process without running further exit handlers.
        unsafe { _exit(101) };
    }
}

/// Assembles `items` as one module per target; on failure finds and
/// reports the kernels that fail alone.
fn assemble(items: &[Pending]) -> Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    for (t, target) in TARGETS.iter().enumerate() {
        let modules: Vec<&str> = items.iter().map(|i| i.ptx[t].as_str()).collect();
        match ptxas::assemble(&combine(&modules), target.sm) {
            Ok(Some(_)) => {}
            Ok(None) if smelt_codegen::env::flag("SMELT_REQUIRE_PTXAS", false) => {
                return Err(Error::Compile(
                    "SMELT_REQUIRE_PTXAS=1 but ptxas was not found".into(),
                ));
            }
            Ok(None) => return Ok(()),
            Err(batch_err) => {
                for i in items {
                    if let Err(e) = ptxas::assemble(&i.ptx[t], target.sm) {
                        return Err(Error::Compile(format!(
                            "ptxas rejected kernel {} for sm_{}: {e}\n{}",
                            i.name, target.sm, i.ptx[t]
                        )));
                    }
                }
                return Err(Error::Compile(format!(
                    "ptxas rejected a batch of {} kernels for sm_{} (each alone passes): {batch_err}",
                    items.len(),
                    target.sm
                )));
            }
        }
    }
    Ok(())
}

/// One module from several: the first header (targeting `sm_90a` if any
/// module does), then every module's body with its symbols renamed apart
/// (entry names carry only a 32-bit hash).
fn combine(modules: &[&str]) -> String {
    let is_header = |l: &str| {
        l.starts_with(".version") || l.starts_with(".target") || l.starts_with(".address_size")
    };
    let mut out: String = modules[0]
        .lines()
        .filter(|l| is_header(l))
        .map(|l| format!("{l}\n"))
        .collect();
    if modules.iter().any(|m| m.contains(".target sm_90a")) {
        out = out.replace(".target sm_90\n", ".target sm_90a\n");
    }
    for (n, m) in modules.iter().enumerate() {
        let body: String = m
            .lines()
            .filter(|l| !is_header(l))
            .map(|l| format!("{l}\n"))
            .collect();
        out.push_str(&body.replace("smelt_", &format!("smelt{n}_")));
    }
    out
}
