//! The LLVM JIT backend (feature `llvm`): elementwise, reduce and
//! multi-reduce kernels compiled to host machine code through inkwell.
//!
//! It runs a kernel's passes where the executor ([`crate::exec`]) runs its
//! typed loops, under the executor's own driver ([`crate::exec::execute`]:
//! the same tiles, threads and fold order) and plan ([`Plan`]: levels,
//! which stores run per row). Each pass is one compiled loop over a range
//! of points that evaluates every instruction it needs at each point
//! ([`emit`]): the operand of a `Reduce` into a tile buffer, the
//! element-level stores, the row-level stores. An `F32` or `F64`
//! reduction over one variable is folded by its pass, each segment while
//! it is in L1, in the order of the executor's blocked, pairwise
//! [`crate::exec::reduce`] ([`fold`]; a max or min of a bare contiguous
//! load straight from the input); other reductions by the executor from
//! the buffer (a `Reduce` of another bare load is the executor's own
//! fold, which reads in place). Where tiles hold whole
//! rows, element values that an earlier pass computed over the tile and
//! that are costly to compute again are read from buffers ([`keep`]), as
//! the executor keeps a tile's values between its passes. Values are the
//! executor's bit for bit:
//! the same dtype classes and roundings, the ops that are not one IEEE
//! operation through the same Rust functions ([`shims`]), `F32` `exp` as
//! the executor's polynomial.
//!
//! Compiled kernels are kept in memory, keyed by [`Kernel::code_hash`]
//! (which covers shapes and scalar slots, not scalar values, so a new
//! scalar reuses the code) and checked against the kernel itself.
//!
//! Declined, so run by the executor (each reported by [`decline`]):
//! whatever the executor declines (strided scans, attention, stores that
//! may write an element twice), scans, sorts and scatters (the
//! executor's), Philox draws and gathers,
//! stores whose index bounds are not inside their output, and kernels
//! LLVM fails to compile. A load outside its buffer is detected per point
//! (the kernel reads element 0 instead and flags it); the run is then
//! redone by the executor, which reports the error.

mod emit;
mod fold;
mod jit;
mod keep;
mod shims;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::exec::plan::Plan;
use crate::exec::reduce;
use crate::exec::tile::{Ctx, ElemState, RowState, Tile};
use crate::exec::vals::{class, Class, Vals};
use crate::exec::{self, Passes};
use crate::interp::{check_args, InterpError};
use crate::ir::{Inst, Kernel, Val};
use crate::outs::Outs;
use crate::DType;
use emit::Pass;
use keep::{Fold, Keep, PassKeep};

/// What a pass function reads: pointer tables (per input, output, and
/// per instruction for the rows' values and the tile buffers), the
/// block's first row, and where a fill that folds writes its segments'
/// block values.
#[repr(C)]
struct Args {
    ins: *const *const u8,
    outs: *const *mut u8,
    uni: *const u64,
    rows: *const *const u8,
    keep: *const *mut u8,
    r0: i64,
    parts: *mut u8,
}

/// A compiled pass: `(args, p0, n, scratch) -> error flag`.
type PassFn = unsafe extern "C" fn(*const Args, i64, i64, *mut u8) -> i32;

/// A kernel's compiled passes.
struct Compiled {
    /// The element passes and the values each keeps.
    keep: Keep,
    /// Per pass of `keep`, its function (none for those without code).
    passes: Vec<Option<PassFn>>,
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

/// The element values of `kernel` that a pass of the JIT reads from a
/// buffer that an earlier pass over the same tile filled, instead of
/// computing them again ([`keep`]), in SSA order; empty where tiles do not
/// hold whole rows or the JIT declines the kernel before compiling it.
pub fn kept(kernel: &Kernel) -> Vec<Val> {
    let Some(plan) = Plan::new(kernel).filter(|p| emit::check(kernel, p).is_ok()) else {
        return Vec::new();
    };
    let keep = Keep::new(kernel, &plan);
    let mut read: Vec<Val> = (keep.passes.iter())
        .flat_map(|p| p.reads.iter().copied())
        .collect();
    read.sort_unstable();
    read.dedup();
    read
}

/// The kept values of `kernel` that its passes hold in an output's
/// elements instead of a tile buffer ([`keep::Keep::lodged`]), in SSA
/// order; empty where [`kept`] is.
pub fn lodged(kernel: &Kernel) -> Vec<Val> {
    let Some(plan) = Plan::new(kernel).filter(|p| emit::check(kernel, p).is_ok()) else {
        return Vec::new();
    };
    let keep = Keep::new(kernel, &plan);
    (0..kernel.insts.len())
        .filter(|v| keep.lodged[*v].is_some())
        .collect()
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
    emit::check(k, plan)?;
    let keep = Keep::new(k, plan);
    let row_pass = PassKeep::plain(Pass::RowStores);
    let mut passes: Vec<&PassKeep> = keep.passes.iter().filter(|p| p.has_code()).collect();
    if !plan.row_stores.is_empty() {
        passes.push(&row_pass);
    }
    let ir = emit::module(k, plan, &passes, &keep.lodged, &jit::host_attrs()?);
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
    let fns = (keep.passes.iter())
        .map(|p| p.has_code().then(|| addr(p.pass)).transpose())
        .collect::<Result<_, _>>()?;
    let row = (!plan.row_stores.is_empty())
        .then(|| addr(Pass::RowStores))
        .transpose()?;
    Ok(Compiled {
        keep,
        passes: fns,
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
    /// Calls pass `f` over points `p0..p0 + n` of the block from row `r0`,
    /// with `[keep, rows]` tables by instruction of the tile buffers (null
    /// where unused) and of the rows' values ([`tables`]), and `[scratch,
    /// parts]` the fill's scratch tile and block values.
    fn call(
        &self,
        f: PassFn,
        (r0, p0, n): (usize, usize, usize),
        [keep, rows]: [&[usize]; 2],
        [scratch, parts]: [*mut u8; 2],
    ) -> Result<(), InterpError> {
        let args = Args {
            ins: self.ins.as_ptr(),
            outs: self.outs.as_ptr(),
            uni: self.uni.as_ptr(),
            rows: rows.as_ptr().cast(),
            keep: keep.as_ptr().cast(),
            r0: r0 as i64,
            parts,
        };
        // SAFETY: the pass reads the kernel's inputs at indices it checks
        // (or bounds prove), the rows' values of this block, the buffers
        // it reads at `0..n` (each holds the tile's `n` values), writes
        // the outputs at indices `emit::check` proved inside them,
        // `scratch` and the buffers it writes at `0..n`, and `parts` at
        // the tile's block values (`run_pass` sizes it).
        let bad = unsafe { f(&args, p0 as i64, n as i64, scratch) };
        if bad != 0 {
            return Err(flagged());
        }
        Ok(())
    }

    /// The buffer holding kept value `v` over the tile at `at` (the
    /// executor's element state for a load it folded in place, else the
    /// JIT's own buffer).
    fn buffer<'s, 'a>(&self, st: &'s Elem<'a>, v: Val, at: (usize, usize)) -> &'s Vals<'a> {
        let keep = &self.code.keep;
        let home = keep.home[v].expect("a kept value has a home pass");
        let held = if keep.passes[home].fold == Fold::InPlace {
            st.es.kept(v, at)
        } else {
            (st.at[v] == Some(at)).then(|| &st.bufs[v])
        };
        // `keep` keeps values only where tiles hold whole rows, whose
        // passes the driver runs in order over one tile and state.
        held.expect("an earlier pass computed the value over this tile")
    }

    /// Runs element pass `p` of `self.code.keep` over tile `t`.
    fn run_pass<'a>(
        &self,
        st: &mut Elem<'a>,
        row: &[Vals<'a>],
        p: usize,
        t: Tile,
    ) -> Result<(), InterpError> {
        let Some(f) = self.code.passes[p] else {
            return Ok(());
        };
        let k = self.ctx.k;
        let pk = &self.code.keep.passes[p];
        let at = t.points(k.row_len());
        let mut ptrs = std::mem::take(&mut st.ptrs);
        let (table, rows) = tables(&mut ptrs, row);
        let lodged = &self.code.keep.lodged;
        for v in pk.writes.iter().filter(|v| lodged[**v].is_none()) {
            table[*v] = sized(&mut st.bufs[*v], k.insts[*v].dtype, at.1) as usize;
        }
        for v in pk.reads.iter().filter(|v| lodged[**v].is_none()) {
            // The pass only reads through it (`readonly`).
            table[*v] = data(self.buffer(st, *v, at)) as usize;
        }
        let scratch = match pk.pass {
            Pass::Fill(i) if pk.scratch => sized(&mut st.scratch, k.insts[i].dtype, at.1),
            _ => std::ptr::null_mut(),
        };
        let parts = match pk.pass {
            Pass::Fill(i) if matches!(pk.fold, Fold::Jit | Fold::Direct) => {
                sized(&mut st.parts, k.insts[i].dtype, t.nr * reduce::blocks(t.nc))
            }
            _ => std::ptr::null_mut(),
        };
        let ran = self.call(f, (t.r0, at.0, at.1), [table, rows], [scratch, parts]);
        st.ptrs = ptrs;
        ran?;
        for v in &pk.writes {
            st.at[*v] = Some(at);
        }
        Ok(())
    }
}

/// A pass's pointer tables by instruction, in `ptrs` (kept by the thread,
/// so that a pass call allocates nothing): the tile buffers (null) and
/// the rows' values `row`. Pointers as `usize`, so that the thread state
/// stays `Send`.
fn tables<'p>(ptrs: &'p mut Vec<usize>, row: &[Vals<'_>]) -> (&'p mut [usize], &'p [usize]) {
    let n = row.len();
    ptrs.clear();
    ptrs.resize(n, 0);
    ptrs.extend(row.iter().map(|r| data(r) as usize));
    let (table, rows) = ptrs.split_at_mut(n);
    (table, rows)
}

/// The first of `v`'s values.
fn data(v: &Vals<'_>) -> *const u8 {
    match v {
        Vals::F32(_) | Vals::F32In(_) => v.f32s().as_ptr().cast(),
        Vals::F64(x) => x.as_ptr().cast(),
        Vals::I64(x) => x.as_ptr().cast(),
    }
}

/// A pointer to `n` values of `dt`'s class held by `v`, which is resized
/// when it holds another count or class (its values are overwritten by
/// the pass it is handed to, so they are not refilled).
fn sized(v: &mut Vals<'_>, dt: DType, n: usize) -> *mut u8 {
    fn fit<T: Copy + Default>(x: &mut Vec<T>, n: usize) -> *mut u8 {
        x.resize(n, T::default());
        x.as_mut_ptr().cast()
    }
    match (class(dt), v) {
        (Class::F32, Vals::F32(x)) => fit(x, n),
        (Class::F64, Vals::F64(x)) => fit(x, n),
        (Class::I64, Vals::I64(x)) => fit(x, n),
        (Class::F32, v) => fit(v.f32(), n),
        (Class::F64, v) => fit(v.f64(), n),
        (Class::I64, v) => fit(v.i64(), n),
    }
}

/// A thread's state.
struct Elem<'a> {
    /// The executor's element state, for the folds it does itself (whose
    /// loads later passes may read).
    es: ElemState<'a>,
    /// Per instruction, the values a pass keeps for later ones.
    bufs: Vec<Vals<'a>>,
    /// Per instruction, the tile ([`Tile::points`]) its buffer holds.
    at: Vec<Option<(usize, usize)>>,
    /// A fill's operand converted to the reduction's dtype.
    scratch: Vals<'a>,
    /// A fill's block values, where the pass folds.
    parts: Vals<'a>,
    /// The pass calls' pointer tables ([`tables`]).
    ptrs: Vec<usize>,
}

impl<'a> Passes<'a> for Jit<'_, 'a> {
    type Elem = Elem<'a>;
    fn ctx(&self) -> &Ctx<'a> {
        self.ctx
    }
    fn elem(&self) -> Elem<'a> {
        let n = self.ctx.k.insts.len();
        Elem {
            es: ElemState::new(self.ctx.k),
            bufs: vec![Vals::default(); n],
            at: vec![None; n],
            scratch: Vals::default(),
            parts: Vals::default(),
            ptrs: Vec::new(),
        }
    }
    fn row(&self, _: &mut RowState<'a>, _: Val, _: usize, _: usize) -> Result<(), InterpError> {
        // Row-level values are computed inside the passes that read them.
        Ok(())
    }
    fn fold(
        &self,
        st: &mut Elem<'a>,
        row: &[Vals<'a>],
        i: Val,
        t: Tile,
    ) -> Result<Vals<'a>, InterpError> {
        let k = self.ctx.k;
        let Inst::Reduce(op, a) = k.insts[i].inst else {
            unreachable!("folds are of reductions")
        };
        let p = self.code.keep.index(Pass::Fill(i));
        let pk = &self.code.keep.passes[p];
        if pk.fold == Fold::InPlace {
            return st.es.fold(self.ctx, row, i, t);
        }
        self.run_pass(st, row, p, t)?;
        let dt = k.insts[i].dtype;
        let mut part = reduce::identity(op, dt, t.nr);
        if pk.fold != Fold::Executor {
            reduce::fold_blocks(op, dt, &st.parts, reduce::blocks(t.nc), &mut part);
            return Ok(part);
        }
        let vals = if pk.scratch {
            &st.scratch
        } else {
            self.buffer(st, a, t.points(k.row_len()))
        };
        reduce::fold_segments(op, dt, vals, t.nr, t.nc, &mut part);
        Ok(part)
    }
    fn row_store(&self, rs: &mut RowState<'a>, r0: usize, nr: usize) -> Result<(), InterpError> {
        match self.code.row {
            Some(f) => {
                let mut ptrs = Vec::new();
                let (_, rows) = tables(&mut ptrs, &rs.row);
                self.call(f, (r0, r0, nr), [&[], rows], [std::ptr::null_mut(); 2])
            }
            None => Ok(()),
        }
    }
    fn elem_store(&self, st: &mut Elem<'a>, row: &[Vals<'a>], t: Tile) -> Result<(), InterpError> {
        let p = self.code.keep.index(Pass::ElemStores);
        self.run_pass(st, row, p, t)
    }
}
