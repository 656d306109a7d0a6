//! The LLVM JIT backend (feature `llvm`): elementwise, reduce and
//! multi-reduce kernels compiled to host machine code through inkwell.
//!
//! It runs a kernel's passes where the executor ([`crate::exec`]) runs its
//! typed loops, under the executor's own driver ([`crate::exec::execute`]:
//! the same tiles, threads and fold order) and plan ([`Plan`]: levels,
//! which stores run per row). Each pass is one compiled loop over a range
//! of points that evaluates every instruction it needs at each point
//! ([`emit`]): the operand of a `Reduce` into a scratch tile (folded by the
//! executor's blocked, pairwise [`crate::exec::reduce`]; a `Reduce` of a
//! bare load is the executor's own fold, which reads in place), the
//! element-level stores, the row-level stores. Values are the executor's bit for bit:
//! the same dtype classes and roundings, the ops that are not one IEEE
//! operation through the same Rust functions ([`shims`]), `F32` `exp` as
//! the executor's polynomial.
//!
//! Compiled kernels are kept in memory, keyed by [`Kernel::code_hash`]
//! (which covers shapes and scalar slots, not scalar values, so a new
//! scalar reuses the code) and checked against the kernel itself.
//!
//! Declined, so run by the executor (each reported by [`decline`]):
//! whatever the executor declines (scans, sorts, scatters, attention,
//! stores that may write an element twice), Philox draws and gathers,
//! stores whose index bounds are not inside their output, and kernels
//! LLVM fails to compile. A load outside its buffer is detected per point
//! (the kernel reads element 0 instead and flags it); the run is then
//! redone by the executor, which reports the error.

mod emit;
mod jit;
mod shims;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::exec::plan::{Level, Plan};
use crate::exec::reduce;
use crate::exec::tile::{Ctx, ElemState, RowState, Tile};
use crate::exec::vals::{class, Class, Vals};
use crate::exec::{self, Passes};
use crate::interp::{check_args, InterpError};
use crate::ir::{Inst, Kernel, Val};
use crate::outs::Outs;
use emit::Pass;

/// What a pass function reads: pointer tables and the block's first row.
#[repr(C)]
struct Args {
    ins: *const *const u8,
    outs: *const *mut u8,
    uni: *const u64,
    rows: *const *const u8,
    r0: i64,
}

/// A compiled pass: `(args, p0, n, scratch) -> error flag`.
type PassFn = unsafe extern "C" fn(*const Args, i64, i64, *mut u8) -> i32;

/// A kernel's compiled passes.
struct Compiled {
    /// Per instruction, the fill of a `Reduce`'s operand.
    fills: Vec<Option<PassFn>>,
    elem: Option<PassFn>,
    row: Option<PassFn>,
    /// Owns the machine code the pointers above point into.
    _code: jit::Loaded,
}

/// A cache entry: the kernel it was made for, its code or why the JIT
/// declined it, and when it was last used.
struct Entry {
    kernel: Kernel,
    code: Arc<Result<Compiled, String>>,
    used: u64,
}

/// Compiled kernels kept at most (the least recently used go first; a run
/// holding one keeps it alive until it ends). Each holds an LLVM context
/// and engine besides its code.
const MAX_KERNELS: usize = 512;

/// The compiled kernels by code hash, and a use counter.
#[derive(Default)]
struct Cache {
    map: HashMap<u64, Vec<Entry>>,
    len: usize,
    clock: u64,
}

impl Cache {
    /// The entry of `k` (hash `h`), marked used.
    fn get(&mut self, h: u64, k: &Kernel) -> Option<Arc<Result<Compiled, String>>> {
        self.clock += 1;
        let e = self.map.get_mut(&h)?.iter_mut().find(|e| e.kernel == *k)?;
        e.used = self.clock;
        Some(e.code.clone())
    }

    /// Adds `code` for `k`, evicting the least recently used entry when
    /// full.
    fn put(&mut self, h: u64, k: &Kernel, code: Arc<Result<Compiled, String>>) {
        if self.len >= MAX_KERNELS {
            let oldest = self
                .map
                .iter()
                .flat_map(|(h, es)| es.iter().enumerate().map(move |(i, e)| (e.used, *h, i)))
                .min();
            if let Some((_, oh, i)) = oldest {
                let es = self.map.get_mut(&oh).expect("found above");
                es.swap_remove(i);
                if es.is_empty() {
                    self.map.remove(&oh);
                }
                self.len -= 1;
            }
        }
        self.clock += 1;
        self.map.entry(h).or_default().push(Entry {
            kernel: k.clone(),
            code,
            used: self.clock,
        });
        self.len += 1;
    }
}

/// The process's compiled kernels.
fn cache() -> std::sync::MutexGuard<'static, Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE
        .get_or_init(|| Mutex::new(Cache::default()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Points (domain size) from which a kernel repays its compile when the
/// JIT is the default engine: below, the executor runs it on the calling
/// thread in at most a few milliseconds, while a compile at O3 takes tens
/// of milliseconds (more for the longest kernels), which made the test
/// suite's many small, distinct kernels take minutes.
pub const MIN_POINTS: usize = 1 << 15;

/// Whether `kernel` is big enough for the default engine to compile it.
pub fn worth_compiling(kernel: &Kernel) -> bool {
    kernel.rows().saturating_mul(kernel.row_len().max(1)) >= MIN_POINTS
}

/// Why the JIT declines `kernel`, or `None` when it runs it (compiling it
/// if needed).
pub fn decline(kernel: &Kernel) -> Option<String> {
    let Some(plan) = Plan::new(kernel) else {
        return Some("the executor's plan declines it".to_string());
    };
    compiled(kernel, &plan).as_ref().as_ref().err().cloned()
}

/// The compiled passes of `k` (made once per distinct kernel while it
/// stays cached).
fn compiled(k: &Kernel, plan: &Plan) -> Arc<Result<Compiled, String>> {
    let h = k.code_hash();
    if let Some(c) = cache().get(h, k) {
        return c;
    }
    // Compiled outside the lock: kernels compile in parallel; a kernel
    // two threads compile at once is kept once.
    let made = Arc::new(compile(k, plan));
    let mut c = cache();
    if let Some(c) = c.get(h, k) {
        return c;
    }
    c.put(h, k, made.clone());
    made
}

/// Emits and compiles every pass `k` runs.
fn compile(k: &Kernel, plan: &Plan) -> Result<Compiled, String> {
    let reduces: Vec<Val> = (0..k.insts.len())
        .filter(|i| plan.level[*i] == Level::Row && matches!(k.insts[*i].inst, Inst::Reduce(..)))
        .collect();
    let mut passes: Vec<Pass> = reduces.iter().map(|i| Pass::Fill(*i)).collect();
    if !plan.elem_stores.is_empty() {
        passes.push(Pass::ElemStores);
    }
    if !plan.row_stores.is_empty() {
        passes.push(Pass::RowStores);
    }
    let ir = emit::module(k, plan, &passes, &jit::host_attrs()?)?;
    if crate::env::var("SMELT_DEBUG", crate::env::parse_debug).unwrap_or(0) >= 4 {
        eprintln!("{ir}");
    }
    let code = jit::compile(&ir)?;
    let addr = |p: Pass| -> Result<PassFn, String> {
        let a = code.address(&p.symbol())?;
        // SAFETY: the symbol is a function of exactly this signature
        // (emit::function), alive as long as `code`.
        Ok(unsafe { std::mem::transmute::<usize, PassFn>(a) })
    };
    let mut fills = vec![None; k.insts.len()];
    for i in &reduces {
        fills[*i] = Some(addr(Pass::Fill(*i))?);
    }
    let elem = (!plan.elem_stores.is_empty())
        .then(|| addr(Pass::ElemStores))
        .transpose()?;
    let row = (!plan.row_stores.is_empty())
        .then(|| addr(Pass::RowStores))
        .transpose()?;
    Ok(Compiled {
        fills,
        elem,
        row,
        _code: code,
    })
}

/// Runs `kernel` as [`crate::exec::run`] does (bit for bit its results),
/// or returns `None` for a kernel the JIT declines.
pub fn run(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Option<Result<(), InterpError>> {
    let plan = Plan::new(kernel)?;
    let code = compiled(kernel, &plan);
    let code = code.as_ref().as_ref().ok()?;
    if let Err(e) = check_args(kernel, inputs, scalars, outputs) {
        return Some(Err(e));
    }
    let flagged = {
        let outs = Outs::new(outputs);
        let ctx = match Ctx::new(kernel, &plan, inputs, scalars, &outs) {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let jit = Jit {
            ins: inputs.iter().map(|i| i.as_ptr()).collect(),
            outs: (0..kernel.outputs.len()).map(|o| outs.ptr(o)).collect(),
            uni: uniform_bits(&ctx),
            ctx: &ctx,
            code,
        };
        exec::execute(&jit).is_err()
    };
    if flagged {
        // A load outside its buffer: the executor names it.
        return crate::exec::run(kernel, inputs, scalars, outputs);
    }
    Some(Ok(()))
}

/// The uniform instructions' values as the passes read them: 8 bytes per
/// instruction, an `f32`'s bits in the low half.
fn uniform_bits(ctx: &Ctx<'_>) -> Vec<u64> {
    ctx.uni
        .iter()
        .map(|v| match v {
            _ if v.len() == 0 => 0,
            Vals::F32(_) | Vals::F32In(_) => u64::from(v.f32s()[0].to_bits()),
            Vals::F64(x) => x[0].to_bits(),
            Vals::I64(x) => x[0] as u64,
        })
        .collect()
}

/// The JIT's passes over one run.
struct Jit<'c, 'a> {
    ctx: &'c Ctx<'a>,
    code: &'c Compiled,
    ins: Vec<*const u8>,
    outs: Vec<*mut u8>,
    uni: Vec<u64>,
}

// SAFETY: the pointers are the run's buffers; the passes read the inputs
// and write disjoint output elements from different threads, as the
// executor's `Outs` does (the plan admits only stores that write each
// element once).
unsafe impl Sync for Jit<'_, '_> {}

/// The error a flagged pass returns; [`run`] replaces it by the
/// executor's.
fn flagged() -> InterpError {
    InterpError("jit: an index outside its buffer".to_string())
}

impl Jit<'_, '_> {
    /// Calls pass `f` over points `p0..p0 + n` of the block from row `r0`.
    fn call(
        &self,
        f: PassFn,
        row: &[Vals<'_>],
        r0: usize,
        p0: usize,
        n: usize,
        scratch: *mut u8,
    ) -> Result<(), InterpError> {
        let rows: Vec<*const u8> = row
            .iter()
            .map(|v| match v {
                Vals::F32(_) | Vals::F32In(_) => v.f32s().as_ptr().cast(),
                Vals::F64(x) => x.as_ptr().cast(),
                Vals::I64(x) => x.as_ptr().cast(),
            })
            .collect();
        let args = Args {
            ins: self.ins.as_ptr(),
            outs: self.outs.as_ptr(),
            uni: self.uni.as_ptr(),
            rows: rows.as_ptr(),
            r0: r0 as i64,
        };
        // SAFETY: the pass reads the kernel's inputs at indices it checks
        // (or bounds prove), the rows' values of this block, writes the
        // outputs at indices `emit::check` proved inside them and
        // `scratch[0..n]`.
        let bad = unsafe { f(&args, p0 as i64, n as i64, scratch) };
        if bad != 0 {
            return Err(flagged());
        }
        Ok(())
    }
}

/// A thread's state: the JIT's scratch tile, and the executor's state for
/// the folds it does itself.
type Elem<'a> = (Vals<'a>, ElemState<'a>);

impl<'a> Passes<'a> for Jit<'_, 'a> {
    type Elem = Elem<'a>;
    fn ctx(&self) -> &Ctx<'a> {
        self.ctx
    }
    fn elem(&self) -> Elem<'a> {
        (Vals::default(), ElemState::new(self.ctx.k))
    }
    fn row(&self, _: &mut RowState<'a>, _: Val, _: usize, _: usize) -> Result<(), InterpError> {
        // Row-level values are computed inside the passes that read them.
        Ok(())
    }
    fn fold(
        &self,
        (scratch, es): &mut Elem<'a>,
        row: &[Vals<'a>],
        i: Val,
        t: Tile,
    ) -> Result<Vals<'a>, InterpError> {
        let k = self.ctx.k;
        let Inst::Reduce(op, a) = k.insts[i].inst else {
            unreachable!("folds are of reductions")
        };
        if matches!(k.insts[a].inst, Inst::Load { .. }) && self.ctx.plan.level[a] == Level::Elem {
            // Nothing to fuse: the executor folds a contiguous `F32` load
            // in place, where the JIT would copy it to its scratch first.
            // The load reads no row-level value, which only the executor
            // would have computed.
            return es.fold(self.ctx, row, i, t);
        }
        let dt = k.insts[i].dtype;
        let n = t.nr * t.nc;
        let ptr: *mut u8 = match class(dt) {
            Class::F32 => {
                let v = scratch.f32();
                v.resize(n, 0.0);
                v.as_mut_ptr().cast()
            }
            Class::F64 => {
                let v = scratch.f64();
                v.resize(n, 0.0);
                v.as_mut_ptr().cast()
            }
            Class::I64 => {
                let v = scratch.i64();
                v.resize(n, 0);
                v.as_mut_ptr().cast()
            }
        };
        let f = self.code.fills[i].expect("a fill per reduction");
        let p0 = t.r0 * k.row_len() + t.c0;
        self.call(f, row, t.r0, p0, n, ptr)?;
        let mut part = reduce::identity(op, dt, t.nr);
        reduce::fold_segments(op, dt, scratch, t.nr, t.nc, &mut part);
        Ok(part)
    }
    fn row_store(&self, row: &[Vals<'a>], r0: usize, nr: usize) -> Result<(), InterpError> {
        match self.code.row {
            Some(f) => self.call(f, row, r0, r0, nr, std::ptr::null_mut()),
            None => Ok(()),
        }
    }
    fn elem_store(&self, _: &mut Elem<'a>, row: &[Vals<'a>], t: Tile) -> Result<(), InterpError> {
        let f = self.code.elem.expect("element stores compiled");
        let p0 = t.r0 * self.ctx.k.row_len() + t.c0;
        self.call(f, row, t.r0, p0, t.nr * t.nc, std::ptr::null_mut())
    }
}
