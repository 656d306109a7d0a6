//! With `SMELT_CHECK_PTX=1` (CI sets it), every distinct kernel the CPU
//! runtime runs is also lowered to PTX for sm_80 and sm_90 and assembled
//! with `ptxas`, so generated GPU code is validated on machines without a
//! GPU. A missing `ptxas` is a failure only with `SMELT_REQUIRE_PTXAS=1`.
//!
//! The check is hooked in where schedules enter the runtime
//! (`runtime::execute`), not in the CPU executor's loop: a schedule's
//! kernels are checked the first time it runs, and a schedule reused from
//! the schedule cache (same kernel list) is not looked at again.
//!
//! `ptxas` runs without optimisation (`ptxas::validate`): the check is
//! whether the driver's JIT accepts the PTX, and optimising costs most of
//! the time. A kernel whose sm_90 PTX differs from its sm_80 PTX only in
//! the header is assembled for sm_80 alone.
//!
//! Starting `ptxas` costs far more than assembling one kernel, so kernels
//! are assembled in batches of [`BATCH`] as one module each; the last
//! partial batch is assembled when the process exits (a failure there ends
//! the process with status 101, as a failed test does), which then prints
//! how many kernels were checked. A batch that fails is re-assembled kernel
//! by kernel to name the culprit.

use crate::{Error, Result};
use smelt_codegen::ptx::{self, ptxas, Target};
use smelt_codegen::Kernel;
use smelt_fusion::{Schedule, ScheduleItem};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock, Weak};

const TARGETS: [Target; 2] = Target::CHECKED;

/// Kernels per `ptxas` run.
const BATCH: usize = 64;

/// Kernels emitted for checking, and kernels `ptxas` accepted, so far.
static QUEUED: AtomicU64 = AtomicU64::new(0);
static ASSEMBLED: AtomicU64 = AtomicU64::new(0);
/// Kernels whose sm_90 PTX is their sm_80 PTX but for the header.
static SAME_BODY: AtomicU64 = AtomicU64::new(0);

/// A kernel waiting to be assembled: its name and PTX, per target; the
/// sm_90 text is `None` when it differs from the sm_80 one only in its
/// header (a PTX body valid for sm_80 is valid for sm_90, a superset).
struct Pending {
    name: String,
    ptx: [Option<String>; 2],
}

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| smelt_codegen::env::flag("SMELT_CHECK_PTX", false))
}

fn pending() -> &'static Mutex<Vec<Pending>> {
    static P: OnceLock<Mutex<Vec<Pending>>> = OnceLock::new();
    P.get_or_init(|| Mutex::new(Vec::new()))
}

/// Checks the kernels of `schedule` when checking is on (see the module
/// documentation): once per planned schedule, once per distinct kernel.
pub(crate) fn check_schedule(schedule: &Schedule) -> Result<()> {
    if !enabled() {
        return Ok(());
    }
    check_new(schedule).map(drop)
}

/// Emits the kernels of `schedule` not seen before unless this kernel list
/// was checked already; returns how many were new.
fn check_new(schedule: &Schedule) -> Result<usize> {
    // Schedules from the schedule cache share their kernel list. An entry
    // holds it weakly: a dead entry whose address was reused by another
    // list does not match, since it no longer upgrades.
    static LISTS: OnceLock<Mutex<HashMap<usize, Weak<Vec<ScheduleItem>>>>> = OnceLock::new();
    {
        let mut lists = LISTS
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let addr = Arc::as_ptr(&schedule.items) as usize;
        if lists.get(&addr).and_then(Weak::upgrade).is_some() {
            return Ok(0);
        }
        if lists.len() >= 1024 && lists.len().is_power_of_two() {
            lists.retain(|_, l| l.strong_count() > 0);
        }
        lists.insert(addr, Arc::downgrade(&schedule.items));
    }
    let mut new = 0;
    for it in schedule.items.iter() {
        new += usize::from(check(&it.kernel)?);
    }
    Ok(new)
}

/// Emits `k` (once per distinct kernel) and assembles a batch when one is
/// full; true when `k` was new.
fn check(k: &Kernel) -> Result<bool> {
    static SEEN: OnceLock<Mutex<HashSet<u64>>> = OnceLock::new();
    let fresh = SEEN
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(k.code_hash());
    if !fresh {
        return Ok(false);
    }
    let emit = |t: &Target| -> Result<String> {
        ptx::emit(k, t)
            .map(|p| p.ptx)
            .map_err(|e| Error::Compile(format!("kernel {}: {e}", k.name)))
    };
    let (old, new) = (emit(&TARGETS[0])?, emit(&TARGETS[1])?);
    let same = body(&old).eq(body(&new));
    SAME_BODY.fetch_add(u64::from(same), Ordering::Relaxed);
    let item = Pending {
        name: k.name.clone(),
        ptx: [Some(old), (!same).then_some(new)],
    };
    QUEUED.fetch_add(1, Ordering::Relaxed);
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
    assemble(&full)?;
    Ok(true)
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
    if enabled() {
        eprintln!(
            "smelt: SMELT_CHECK_PTX: ptxas assembled {} of {} distinct kernels for sm_80 and sm_90 \
             ({} with one body for both)",
            ASSEMBLED.load(Ordering::Relaxed),
            QUEUED.load(Ordering::Relaxed),
            SAME_BODY.load(Ordering::Relaxed)
        );
    }
}

/// Assembles `items` as one module per target; on failure finds and
/// reports the kernels that fail alone.
fn assemble(items: &[Pending]) -> Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    for (t, target) in TARGETS.iter().enumerate() {
        let modules: Vec<&str> = items.iter().filter_map(|i| i.ptx[t].as_deref()).collect();
        if modules.is_empty() {
            continue;
        }
        match ptxas::validate(&combine(&modules), target.sm) {
            Ok(Some(_)) => {}
            Ok(None) if smelt_codegen::env::flag("SMELT_REQUIRE_PTXAS", false) => {
                return Err(Error::Compile(
                    "SMELT_REQUIRE_PTXAS=1 but ptxas was not found".into(),
                ));
            }
            Ok(None) => return Ok(()),
            Err(batch_err) => {
                for (i, ptx) in items.iter().filter_map(|i| Some((i, i.ptx[t].as_ref()?))) {
                    if let Err(e) = ptxas::validate(ptx, target.sm) {
                        return Err(Error::Compile(format!(
                            "ptxas rejected kernel {} for sm_{}: {e}\n{ptx}",
                            i.name, target.sm
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
    ASSEMBLED.fetch_add(items.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// A module's lines but its header (`.version`, `.target`, `.address_size`).
fn body(module: &str) -> impl Iterator<Item = &str> {
    module.lines().filter(|l| !is_header(l))
}

fn is_header(l: &str) -> bool {
    l.starts_with(".version") || l.starts_with(".target") || l.starts_with(".address_size")
}

/// One module from several: the first header (targeting `sm_90a` if any
/// module does), then every module's body with its symbols renamed apart
/// (entry names carry only a 32-bit hash).
fn combine(modules: &[&str]) -> String {
    let mut out: String = modules[0]
        .lines()
        .filter(|l| is_header(l))
        .map(|l| format!("{l}\n"))
        .collect();
    if modules.iter().any(|m| m.contains(".target sm_90a")) {
        out = out.replace(".target sm_90\n", ".target sm_90a\n");
    }
    for (n, m) in modules.iter().enumerate() {
        let body: String = body(m).map(|l| format!("{l}\n")).collect();
        out.push_str(&body.replace("smelt_", &format!("smelt{n}_")));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::{DType, Device, Fusion, Tensor};

    /// A schedule's kernels are emitted the first time it is checked, not
    /// when the schedule cache hands the same kernels out again.
    #[test]
    fn a_schedule_is_checked_once() {
        // Shapes and ops no other test uses, so its kernels are new here.
        let x = Tensor::ones([3, 7, 13], DType::F32, &Device::Cpu);
        let y = (x.sin() * 1.5).sum_keepdim(2).exp();
        let s = y.schedule(Fusion::On);
        assert!(super::check_new(&s).unwrap() >= 1);
        assert_eq!(super::check_new(&s).unwrap(), 0);
        // Planned again (from the cache): the same kernel list.
        let again = y.schedule(Fusion::On);
        assert_eq!(super::check_new(&again).unwrap(), 0);
    }
}
