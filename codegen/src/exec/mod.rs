//! The CPU executor: runs elementwise, reduce, multi-reduce, scan, sort
//! and scatter kernels (and matmuls the matmul fast path declines) over
//! typed value vectors, spread over all cores with rayon (a scatter's
//! adds applied on one thread, in domain order: `scatter`). The
//! interpreter ([`crate::interp`]) stays the reference and runs what this
//! declines (`plan::Plan::new`: attention, overwriting stores that might
//! write an element twice).
//!
//! A kernel's rows are cut into tiles as the interpreter's are (several
//! short rows, or one chunk of a long row; `TILE` points, 4x the
//! interpreter's). Each instruction is one loop over a tile (`arith`,
//! `memory`): `f32` in
//! `f32`, halves in `f32` rounded to their dtype at every instruction,
//! `f64` in `f64`, integers in wrapping `i64` wrapped to their dtype, each
//! op by [`crate::ops`]' scalar reference. Loads and stores go run by run
//! (`runs`): strided slices instead of an index per point.
//!
//! Parallelism: row blocks go to threads when there are enough of them
//! (or when rows are too short to split); otherwise (a few long rows: a
//! full sum, softmax over one long row) each row's chunks go to threads in
//! groups of `GROUP`, each reduction's partial results folded in chunk
//! order, so results never depend on the thread count.

mod arith;
pub(crate) mod exp_ops;
mod memory;
pub(crate) mod plan;
pub(crate) mod reduce;
mod runs;
mod scan;
mod scatter;
pub(crate) mod simd;
mod sort;
mod spread;
pub(crate) mod tile;
pub(crate) mod vals;

use rayon::prelude::*;

use crate::interp::{check_args, InterpError};
use crate::ir::{Inst, Kernel, Val};
use crate::outs::Outs;
use plan::{Level, Plan};
use tile::{Ctx, ElemState, RowState, Tile};
use vals::Vals;

/// Points per tile: the vectors of a tile's instructions stay in cache
/// (64 KiB of `f32` each), and dispatch is paid once per many points (a
/// 2^24-element add took 1.4x as long with tiles of 4096).
const TILE: usize = 16384;

/// Points below which a kernel runs on the calling thread (fanning out
/// costs more than it saves).
const PARALLEL_MIN: usize = 1 << 15;

/// Whether the executor runs `kernel` (else [`run`] returns `None`).
pub fn covers(kernel: &Kernel) -> bool {
    Plan::new(kernel).is_some()
}

/// Runs `kernel` as [`crate::interp::run`] does (same arguments, results
/// within rounding, integers bit for bit), or returns `None` for a kernel
/// it does not cover.
pub fn run(
    kernel: &Kernel,
    inputs: &[&[u8]],
    scalars: &[f64],
    outputs: &mut [&mut [u8]],
) -> Option<Result<(), InterpError>> {
    let plan = Plan::new(kernel)?;
    Some(check_args(kernel, inputs, scalars, outputs).and_then(|()| {
        let outs = Outs::new(outputs);
        let ctx = Ctx::new(kernel, &plan, inputs, scalars, &outs)?;
        execute(&Typed(&ctx))
    }))
}

/// How a kernel's passes are computed: the executor's typed loops
/// ([`Typed`]) or code compiled for the kernel (the LLVM JIT). [`execute`]
/// drives either over the same tiles, threads and fold order, so results
/// agree bit for bit where the passes' values do.
pub(crate) trait Passes<'a>: Sync {
    /// Per-thread state of the element-level passes.
    type Elem: Send;
    /// The kernel and its plan.
    fn ctx(&self) -> &Ctx<'a>;
    /// A fresh per-thread state.
    fn elem(&self) -> Self::Elem;
    /// Computes row-level instruction `i` (not a `Reduce`) at rows
    /// `r0..r0 + nr` into `rs.row[i]` (or nothing, for passes that
    /// compute row-level values where they read them).
    fn row(&self, rs: &mut RowState<'a>, i: Val, r0: usize, nr: usize) -> Result<(), InterpError>;
    /// The fold of `Reduce` instruction `i` over tile `t`: one partial
    /// result per row of the tile.
    fn fold(
        &self,
        es: &mut Self::Elem,
        row: &[Vals<'a>],
        i: Val,
        t: Tile,
    ) -> Result<Vals<'a>, InterpError>;
    /// Runs the row-level stores at rows `r0..r0 + nr`.
    fn row_store(&self, rs: &mut RowState<'a>, r0: usize, nr: usize) -> Result<(), InterpError>;
    /// Runs the element-level stores over tile `t`.
    fn elem_store(&self, es: &mut Self::Elem, row: &[Vals<'a>], t: Tile)
        -> Result<(), InterpError>;
}

/// The executor's own passes: each instruction one typed loop over a tile.
pub(crate) struct Typed<'c, 'a>(pub &'c Ctx<'a>);

impl<'a> Passes<'a> for Typed<'_, 'a> {
    type Elem = ElemState<'a>;
    fn ctx(&self) -> &Ctx<'a> {
        self.0
    }
    fn elem(&self) -> ElemState<'a> {
        ElemState::new(self.0.k)
    }
    fn row(&self, rs: &mut RowState<'a>, i: Val, r0: usize, nr: usize) -> Result<(), InterpError> {
        rs.compute(self.0, i, r0, nr)
    }
    fn fold(
        &self,
        es: &mut ElemState<'a>,
        row: &[Vals<'a>],
        i: Val,
        t: Tile,
    ) -> Result<Vals<'a>, InterpError> {
        es.fold(self.0, row, i, t)
    }
    fn row_store(&self, rs: &mut RowState<'a>, r0: usize, nr: usize) -> Result<(), InterpError> {
        tile::row_store(self.0, rs, r0, nr)
    }
    fn elem_store(
        &self,
        es: &mut ElemState<'a>,
        row: &[Vals<'a>],
        t: Tile,
    ) -> Result<(), InterpError> {
        es.store(self.0, row, t)
    }
}

/// Runs every row block of the kernel through `passes`.
pub(crate) fn execute<'a, P: Passes<'a>>(passes: &P) -> Result<(), InterpError> {
    let k = passes.ctx().k;
    let (rows, row_len) = (k.rows(), k.row_len());
    let plan = passes.ctx().plan;
    let threads = rayon::current_num_threads();
    let (tile_rows, chunk) = tiling(rows, row_len, plan.sorts, plan.columns, threads);
    let blocks = rows.div_ceil(tile_rows);
    let points = rows.saturating_mul(row_len.max(1));
    let block = |rs: &mut RowState<'a>, es: &mut P::Elem, b: usize, split: bool| {
        let r0 = b * tile_rows;
        run_block(passes, rs, es, r0, tile_rows.min(rows - r0), chunk, split)
    };
    let states = || (RowState::new(k), passes.elem());
    // With one thread, handing the work to rayon's one worker and waiting
    // for it costs two context switches per kernel and gains nothing.
    let parallel = points >= PARALLEL_MIN && threads > 1;
    if passes.ctx().plan.adds {
        // The adds go in domain order (the interpreter's), on one thread.
        let ctx = passes.ctx();
        let block_points = tile_rows * row_len.max(1);
        return scatter::run(
            (k, ctx.outs),
            (blocks, block_points),
            parallel,
            states,
            |(rs, es), b| block(rs, es, b, false),
        );
    }
    if !parallel {
        let (mut rs, mut es) = states();
        (0..blocks).try_for_each(|b| block(&mut rs, &mut es, b, false))
    } else if blocks >= 4 * threads
        || row_len.div_ceil(chunk.max(1)) <= GROUP
        || passes.ctx().plan.scans
    {
        // Each thread takes the same blocks in every run (`spread`), with
        // one set of states and tile vectors per thread.
        spread::spread(blocks, states, |(rs, es), b| block(rs, es, b, false))
    } else {
        // Few rows, each of several groups of chunks (not scans, which
        // carry a row's state from chunk to chunk): split each row's
        // groups over the threads.
        let (mut rs, mut es) = states();
        (0..blocks).try_for_each(|b| block(&mut rs, &mut es, b, true))
    }
}

/// Rows per tile and reduced positions per chunk for rows of `row_len`:
/// several whole rows per tile, or one chunk of `TILE` of a longer row
/// (but a whole row, however long, when `whole`: a sort's; and
/// [`COLUMNS`] rows by a chunk of positions when `columns`: a scan along
/// a strided axis; fewer rows where that leaves a thread of `threads`
/// without a tile, but at least a line's worth).
fn tiling(
    rows: usize,
    row_len: usize,
    whole: bool,
    columns: bool,
    threads: usize,
) -> (usize, usize) {
    if row_len == 0 {
        (TILE, 0)
    } else if columns && !whole && row_len > TILE / COLUMNS {
        let n = COLUMNS.min(rows.div_ceil(threads).max(16)).min(rows).max(1);
        (n, TILE / n)
    } else if row_len <= TILE || whole {
        ((TILE / row_len).max(1), row_len)
    } else {
        (1, TILE)
    }
}

/// Rows of a column tile ([`tiling`]) at most. A scan along a strided
/// axis (`cumsum(0)` of a matrix) reads each row's positions a line and a
/// page apart; when the tile's rows are neighbours in memory (the
/// matrix's columns), loads and stores go position by position, each a
/// contiguous row of the tile's columns (`memory::Columns`). `cumsum(0)`
/// of 4096x4096 `f32` on the 2-core build machine: 48 ms with 64 rows (64
/// positions each), 41 with 128, 36-37 with 256 or 512, 39 with 1024.
const COLUMNS: usize = 256;

/// Whether every tile of `k` holds whole rows, so that [`execute`] runs
/// all of a row block's passes over one tile, one after the other, with
/// one per-thread state: element values a pass computed are then still
/// that tile's in the passes after it (the executor's [`ElemState`] reuses
/// them; the JIT keeps some in buffers).
#[cfg(feature = "llvm-jit")]
pub(crate) fn tiles_hold_rows(k: &Kernel) -> bool {
    let row_len = k.row_len();
    tiling(k.rows(), row_len, k.sort_op().is_some(), false, 1).1 == row_len
}

/// Chunks per task when a row's chunks are spread over the threads: a
/// fixed count, so the order in which partial results are folded (and so
/// every float result) does not depend on the number of threads.
const GROUP: usize = 16;

/// Runs rows `r0..r0 + nr` in chunks of `chunk` reduced positions: their
/// row-level instructions in order (each `Reduce` folding its operand over
/// the chunks), the row-level stores, then the element-level stores. With
/// `split`, groups of [`GROUP`] chunks run in parallel.
fn run_block<'a, P: Passes<'a>>(
    passes: &P,
    rs: &mut RowState<'a>,
    es: &mut P::Elem,
    r0: usize,
    nr: usize,
    chunk: usize,
    split: bool,
) -> Result<(), InterpError> {
    let ctx = passes.ctx();
    let k = ctx.k;
    let row_len = k.row_len();
    let tiles = row_len.div_ceil(chunk.max(1));
    let tile = |c: usize| Tile {
        r0,
        nr,
        c0: c * chunk,
        nc: chunk.min(row_len - c * chunk),
    };
    let groups = tiles.div_ceil(GROUP);
    let group = |g: usize| g * GROUP..tiles.min((g + 1) * GROUP);
    for (i, n) in k.insts.iter().enumerate() {
        if ctx.plan.level[i] != Level::Row {
            continue;
        }
        let Inst::Reduce(op, _) = n.inst else {
            passes.row(rs, i, r0, nr)?;
            continue;
        };
        let row = &rs.row;
        // The chunks' partial results folded in order.
        let fold = |es: &mut P::Elem, cs: std::ops::Range<usize>| {
            let mut part = reduce::identity(op, n.dtype, nr);
            for c in cs {
                reduce::combine(op, n.dtype, &mut part, &passes.fold(es, row, i, tile(c))?);
            }
            Ok::<_, InterpError>(part)
        };
        // Chunks fold in groups of `GROUP` whether or not the groups go
        // to threads, so the sums' order never depends on the thread count.
        let parts: Vec<Result<vals::Vals<'a>, InterpError>> = if split {
            (0..groups)
                .into_par_iter()
                .map_init(|| passes.elem(), |es, g| fold(es, group(g)))
                .collect()
        } else {
            (0..groups).map(|g| fold(es, group(g))).collect()
        };
        let mut acc = reduce::identity(op, n.dtype, nr);
        for p in parts {
            reduce::combine(op, n.dtype, &mut acc, &p?);
        }
        rs.row[i] = acc;
    }
    passes.row_store(rs, r0, nr)?;
    if ctx.plan.elem_stores.is_empty() {
        return Ok(());
    }
    let row = &rs.row;
    let store = |es: &mut P::Elem, cs: std::ops::Range<usize>| {
        cs.into_iter()
            .try_for_each(|c| passes.elem_store(es, row, tile(c)))
    };
    if split {
        (0..groups)
            .into_par_iter()
            .try_for_each_init(|| passes.elem(), |es, g| store(es, group(g)))
    } else {
        store(es, 0..tiles)
    }
}
