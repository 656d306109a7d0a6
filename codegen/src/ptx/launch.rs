//! Launch heuristics: how a kernel is mapped onto threads (vector width,
//! threads per row, slots per thread, block and grid), decided per kernel
//! and shape in [`choose`] alone.

use super::eval::{lane_runs, row_free_load};
use super::memory::vector_ok;
use super::scan_state::{scan_insts, slot_bytes};
use super::target::Target;
use crate::ir::{Gather, Inst, Kernel, KernelKind};
use crate::sort::{sort_chunk, Method, SORT_CHUNK};
use crate::{Cond, Expr};

/// How an elementwise kernel (no reduction) runs: a grid-stride loop over
/// groups of `lanes` consecutive values of the last variable, `unroll`
/// groups per thread and iteration (loads of all of them issued first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elementwise {
    /// Consecutive values of the last variable per group (a vector access when
    /// aligned).
    pub lanes: usize,
    /// Groups per thread and loop iteration.
    pub unroll: usize,
    /// Threads per CTA.
    pub block: u32,
    /// CTAs in the grid.
    pub grid: u32,
}

/// How a kernel with reductions runs: a *team* of `tpr` threads per row (a
/// sub-warp, a warp or the whole CTA), `block / tpr` rows per CTA at a time,
/// a persistent grid looping over rows. A thread handles `slots` groups of
/// `lanes` elements of the row at a time; when `cached`, those cover the
/// whole row and its loads stay in registers across the passes, else every
/// pass streams over the row again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rows {
    /// Consecutive elements per load group.
    pub lanes: usize,
    /// Threads per row in one CTA (the team).
    pub tpr: u32,
    /// Threads per CTA.
    pub block: u32,
    /// Load groups a thread holds at a time.
    pub slots: usize,
    /// Whether the slots cover the whole row, which then stays in registers.
    pub cached: bool,
    /// CTAs in the grid.
    pub grid: u32,
    /// CTAs per SM that ptxas must allow for (caps registers per thread so
    /// that a CTA's loads overlap another's compute); 1 leaves it free.
    pub min_ctas: u32,
    /// CTAs of one thread-block cluster (sm_90) that share each row, 1 for
    /// none. Above 1 the team is each CTA whole (`tpr == block`), a row
    /// has `tpr * cluster` threads, and the CTAs combine their partial
    /// results through distributed shared memory: rows up to 8 times
    /// longer stay in registers.
    pub cluster: u32,
}

impl Rows {
    /// Threads that share a row, over all CTAs of a cluster.
    pub fn team_threads(&self) -> u32 {
        self.tpr * self.cluster
    }
}

/// How a scan kernel runs: a team of `tpr` threads per row (one thread,
/// a warp, or a whole CTA of up to 1024) walks the row in chunks of
/// `tpr * lanes` elements, each thread scanning `lanes` consecutive ones,
/// carrying the running value from chunk to chunk. With `tiles > 0` it is
/// the single-pass scan with decoupled look-back instead: each row is cut
/// into `tiles` tiles of `chunks` chunks, a CTA (`tpr == block`) per tile
/// that scans its chunks together, the running value before a tile coming
/// from its predecessors' published states (`ptx/lookback.rs`). With
/// `cols > 0` it is a scan along a strided axis in column tiles
/// (`ptx/scan_cols.rs`): a CTA per tile of `cols * lanes` rows (columns of
/// the tensor, `lanes` consecutive ones a thread) and `block / cols *
/// chunks` positions of the scanned axis (`chunks` a thread), `tiles`
/// tiles along the axis chained by look-back when there are several.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scan {
    /// Consecutive elements per thread and chunk (a vector access where
    /// aligned); divides the row length.
    pub lanes: usize,
    /// Threads per row: 1, or a multiple of 32 up to the block.
    pub tpr: u32,
    /// Threads per CTA.
    pub block: u32,
    /// CTAs in the grid (rows beyond `grid * block / tpr` loop; with
    /// look-back, one per tile: `rows * tiles`).
    pub grid: u32,
    /// Tiles per row of the look-back scan, 0 for the row walk.
    pub tiles: u32,
    /// Chunks per look-back tile (their loads are in flight together), 1
    /// for the row walk; for column tiles, the positions of the scanned
    /// axis each thread scans.
    pub chunks: u32,
    /// Threads across the columns of a column tile (a warp), 0 for teams
    /// along rows.
    pub cols: u32,
}

/// How a sort kernel's on-chip sort runs: a CTA per row (a grid-stride
/// loop over rows) sorts `chunk` `(key, position)` pairs in shared memory
/// with a bitonic network: the whole row ([`Method::OnChip`]) or the `k`
/// pairs a select kept ([`Method::Select`], [`Method::SelectOnChip`],
/// whose CTAs have 256 threads). A radix sort
/// ([`Method::Radix`]) has no on-chip sort; its launches are fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    /// Pairs sorted at once in shared memory: a power of two, at least 2,
    /// at most [`crate::sort::sort_chunk`] of the key width, at least the
    /// pairs sorted.
    pub chunk: u32,
    /// Threads per CTA (at least those of the bitonic sort, which holds
    /// up to 16 pairs a thread in registers).
    pub block: u32,
    /// CTAs in the grid.
    pub grid: u32,
}

/// The mapping chosen for a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// No reduction: see [`Elementwise`].
    Elementwise(Elementwise),
    /// Reductions, a team per row: see [`Rows`].
    Rows(Rows),
    /// A scan, a team per row: see [`Scan`].
    Scan(Scan),
    /// A sort, a CTA per row: see [`Sort`].
    Sort(Sort),
}

/// Global accesses of a kernel: index, mask, dtype, and whether the
/// element depends on a reduced variable.
fn accesses(k: &Kernel, level: &[bool]) -> Vec<(Expr, Cond, crate::DType, bool)> {
    let mut out = Vec::new();
    for (i, n) in k.insts.iter().enumerate() {
        if let Inst::Load {
            input,
            index,
            valid,
        } = &n.inst
        {
            out.push((
                index.clone(),
                valid.clone(),
                k.inputs[*input].dtype,
                level[i],
            ));
        }
    }
    for s in &k.stores {
        let elem = k.store_is_element_level(s, level);
        out.push((
            s.index.clone(),
            Cond::always(),
            k.outputs[s.output].dtype,
            elem,
        ));
    }
    out
}

/// The widest vector along the last variable that every unit-stride
/// access among `acc` supports (1 if none).
fn lanes_for(k: &Kernel, acc: &[(Expr, Cond, crate::DType, bool)]) -> usize {
    match k.ranges.len().checked_sub(1) {
        Some(last) => lanes_along(k, acc, last),
        None => 1,
    }
}

/// The widest vector along variable `var` that every access among `acc`
/// with unit stride in it supports (1 if none).
fn lanes_along(k: &Kernel, acc: &[(Expr, Cond, crate::DType, bool)], var: usize) -> usize {
    let unit: Vec<_> = acc
        .iter()
        .filter(|a| a.0.affine_coef(var) == Some(1))
        .collect();
    [8, 4, 2]
        .into_iter()
        .find(|&l| {
            k.ranges[var] % l as i64 == 0
                && !unit.is_empty()
                && unit.iter().all(|a| vector_ok(&a.0, &a.1, a.2, l, var))
        })
        .unwrap_or(1)
}

/// Most groups an elementwise thread takes per iteration.
const MAX_UNROLL: usize = 4;

/// Bytes that the loads and gathers of one group of `lanes` read: `lanes`
/// elements for those that differ along the lane variable, one for those
/// constant over the group (an embedding's id, a row's scale); at least 1.
fn group_bytes(k: &Kernel, lanes: usize) -> usize {
    let runs = lane_runs(k, k.ranges.len().saturating_sub(1), None);
    let bytes: usize = k
        .insts
        .iter()
        .zip(&runs)
        .filter_map(|(n, &run)| {
            let input = match n.inst {
                Inst::Load { input, .. } | Inst::Gather(Gather { input, .. }) => input,
                _ => return None,
            };
            let per_lane = lanes > 1 && run < lanes as u64;
            Some(k.inputs[input].dtype.size() * if per_lane { lanes } else { 1 })
        })
        .sum();
    bytes.max(1)
}

/// Number of loads among the instructions marked in `which` (at least 1).
fn count_loads(k: &Kernel, which: &[bool]) -> u64 {
    let n = k
        .insts
        .iter()
        .zip(which)
        .filter(|(n, w)| **w && matches!(n.inst, Inst::Load { .. } | Inst::Gather(_)))
        .count();
    n.max(1) as u64
}

/// Whether an element-level load of `k` reads the same element in every
/// row (a weight vector).
fn has_invariant_loads(k: &Kernel) -> bool {
    let level = k.element_level();
    (0..k.insts.len()).any(|i| level[i] && row_free_load(k, i))
}

/// Threads resident per SM that we aim for.
const THREADS_PER_SM: u32 = 2048;

/// Threads of a look-back scan's CTA, which scans a tile of
/// `LOOKBACK_THREADS * lanes * chunks` elements.
const LOOKBACK_THREADS: u32 = 512;

/// Elements a look-back thread scans per tile (`lanes * chunks`), at
/// most [`LOOKBACK_MAX_CHUNKS`] chunks: enough bytes in flight per CTA to
/// cover its look-back's latency. Kernels whose accesses are all 16-bit
/// or narrower take twice as many, so that a tile moves as many bytes as
/// an `f32` one (at 16, `bf16` reached 48% of the copy ceiling on one row
/// of 2^24 on an H100, `f32` 62%), and rows have half as many tiles to
/// look back over.
const LOOKBACK_PER_THREAD: usize = 16;

/// Chunks of a look-back tile at most (each costs a warp scan and a scan
/// of warp totals, so one-lane rows take fewer elements per thread).
const LOOKBACK_MAX_CHUNKS: usize = 8;

/// Scans of at most this many rows use the look-back scan when their rows
/// are longer than one tile. The row walk runs a row per CTA (up to 1024
/// threads, two per SM), so fewer rows than an H100's 132 SMs leave SMs
/// idle (16 rows of 2^20 `f32` reached 15% of the copy ceiling on an
/// H100, BENCHMARKS.md), while 256 rows of 65536 reached 87%. With 16-bit
/// or narrower accesses twice as many rows: 256 rows of 65536 `bf16`
/// reached only 57% in the row walk (80% for 1024 rows of 16384), and
/// their look-back tiles (16384 elements, 4 a row) look back over at most
/// one window of predecessors (not measured yet).
const LOOKBACK_MAX_ROWS: usize = 128;

/// Where [`lookback`] puts a scan kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiling {
    /// Consecutive elements per thread and chunk.
    pub lanes: usize,
    /// Chunks per tile.
    pub chunks: u32,
    /// Tiles per row.
    pub tiles: u32,
}

/// The look-back geometry of scan kernel `k`, from its shape and accesses
/// alone, when its rows are few and longer than one tile (and the tile
/// count fits a grid), else `None`. The fusion planner gives such a
/// kernel its status buffer ([`super::scan_status_len`]), and [`choose`]
/// maps it as a look-back scan only when it has one.
pub fn lookback(k: &Kernel) -> Option<Tiling> {
    if k.kind != KernelKind::Scan || k.n_kept + 1 != k.ranges.len() {
        return None;
    }
    let (rows, row_len) = (k.rows(), k.row_len());
    let last = k.ranges.len() - 1;
    let acc = accesses(k, &k.element_level());
    let row_contig = acc.iter().any(|a| a.0.affine_coef(last) == Some(1));
    let lanes = if row_contig { lanes_for(k, &acc) } else { 1 };
    // Kernels moving 16-bit (or narrower) elements only.
    let narrow = 1 + acc.iter().all(|a| a.2.size() <= 2) as usize;
    let chunks = (narrow * LOOKBACK_PER_THREAD / lanes).clamp(1, LOOKBACK_MAX_CHUNKS);
    let tile = LOOKBACK_THREADS as usize * lanes * chunks;
    let tiles = row_len.div_ceil(tile);
    let fits = rows
        .checked_mul(tiles)
        .is_some_and(|n| n <= i32::MAX as usize);
    (rows <= narrow * LOOKBACK_MAX_ROWS && tiles >= 2 && fits).then_some(Tiling {
        lanes,
        chunks: chunks as u32,
        tiles: tiles as u32,
    })
}

/// Threads across the columns of a column tile: a warp, so that its loads
/// of one position of the scanned axis are `32 * lanes` neighbouring
/// elements.
pub const COL_THREADS: u32 = 32;

/// Warps of a column tile, each scanning its own positions of the
/// scanned axis (their totals are combined through shared memory).
const COL_WARPS: u32 = 8;

/// 4-byte state registers a column-tile thread may hold for its elements:
/// 16 `f32` sums (64 bytes of `f32` loads in flight a thread). ptxas then
/// needs 63 registers for axis 0 of `[4096, 4096]` `f32`, so four
/// 256-thread CTAs fit an SM (at 32, 91: two), whose look-backs overlap
/// the others' loads.
const COL_STATE_WORDS: usize = 16;

/// Shared memory (bytes) a column tile may use for its warps' totals, its
/// prefix and its look-back window (below the 48 KiB of static shared
/// memory, with room for the window's marks): a vector width that needs
/// more is halved.
const COL_SHARED: usize = 44 << 10;

/// Column blocks that narrower vectors keep at least, where they can: a
/// tile's predecessor along the axis took its id `blocks` tiles earlier,
/// and a look-back window (8 predecessors, one round trip) then covers
/// `8 * blocks` tiles; with 2 blocks of 128 `f32` columns (256 columns)
/// windows of 16 tiles would bound the scan near 1 TB/s, with 8 of 32
/// columns it is 4 times that (a warp still reads whole 128-byte lines).
const COL_MIN_BLOCKS: usize = 8;

/// Where [`column_tiles`] puts a scan kernel along a strided axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColTiling {
    /// Consecutive columns (values of the last kept variable) a thread.
    pub lanes: usize,
    /// Positions of the scanned axis a thread scans.
    pub chunks: u32,
    /// Tiles along the scanned axis.
    pub tiles: u32,
    /// Blocks of `COL_THREADS * lanes` columns.
    pub blocks: u32,
}

impl ColTiling {
    /// Columns of a tile.
    pub fn width(&self) -> usize {
        COL_THREADS as usize * self.lanes
    }

    /// Positions of the scanned axis in a tile.
    pub fn length(&self) -> usize {
        COL_WARPS as usize * self.chunks as usize
    }
}

/// The column-tile geometry of scan kernel `k` (see [`Scan`]) when no
/// access is contiguous along its scanned axis, else `None`. A tile is
/// `COL_THREADS * lanes` columns wide (a warp across neighbouring rows of
/// the kernel, vector accesses where the last kept axis is contiguous)
/// and `COL_WARPS * chunks` positions long; short axes take fewer
/// positions a thread. More
/// than one tile along the axis needs the status buffer
/// ([`super::scan_status_len`]) that the fusion planner gives the kernel.
pub fn column_tiles(k: &Kernel) -> Option<ColTiling> {
    let nk = k.n_kept;
    if k.kind != KernelKind::Scan || nk == 0 || nk + 1 != k.ranges.len() {
        return None;
    }
    let acc = accesses(k, &k.element_level());
    if acc.iter().any(|a| a.0.affine_coef(nk) == Some(1)) {
        return None;
    }
    let sizes = slot_bytes(&scan_insts(k));
    let words = sizes.iter().sum::<u32>() as usize / 4;
    // Warp totals, the tile's prefix and the look-back window: an 8-byte
    // entry per slot and column each (`ptx/scan_cols.rs`).
    let shared = |lanes: usize| {
        (2 * COL_WARPS as usize + 1) * COL_THREADS as usize * lanes * 8 * sizes.len()
    };
    let mut lanes = lanes_along(k, &acc, nk - 1);
    let blocks = |lanes: usize| k.rows().div_ceil(COL_THREADS as usize * lanes);
    while lanes > 1 && (shared(lanes) > COL_SHARED || blocks(lanes) < COL_MIN_BLOCKS) {
        lanes /= 2;
    }
    if shared(lanes) > COL_SHARED {
        return None;
    }
    let per_thread = (COL_STATE_WORDS / words.max(1)).max(4);
    let chunks = (per_thread / lanes)
        .max(1)
        .min(k.row_len().div_ceil(COL_WARPS as usize));
    let tiles = k.row_len().div_ceil(COL_WARPS as usize * chunks);
    let blocks = blocks(lanes);
    let fits = blocks
        .checked_mul(tiles)
        .is_some_and(|n| n <= i32::MAX as usize);
    fits.then_some(ColTiling {
        lanes,
        chunks: chunks as u32,
        tiles: tiles as u32,
        blocks: blocks as u32,
    })
}

/// The mapping of a scan kernel: the look-back scan for few long rows
/// ([`lookback`]) when the kernel has its status buffer; column tiles
/// ([`column_tiles`]) when the scanned axis is strided (given their
/// status buffer where the axis takes several tiles; without it a thread
/// per row where a kept axis is contiguous, neighbouring threads reading
/// neighbouring elements); else a team per row just wide enough to cover
/// the row in one chunk, from a warp (several rows per CTA) to 1024
/// threads (longer rows take several chunks).
fn choose_scan(k: &Kernel) -> Scan {
    let level = k.element_level();
    let acc = accesses(k, &level);
    let rows = k.rows() as u64;
    let row_len = k.row_len() as u64;
    let status = super::scan::has_status(k);
    if let (Some(t), true) = (lookback(k), status) {
        return Scan {
            lanes: t.lanes,
            tpr: LOOKBACK_THREADS,
            block: LOOKBACK_THREADS,
            grid: (rows * t.tiles as u64) as u32,
            tiles: t.tiles,
            chunks: t.chunks,
            cols: 0,
        };
    }
    if let Some(t) = column_tiles(k).filter(|t| t.tiles == 1 || status) {
        return Scan {
            lanes: t.lanes,
            tpr: 1,
            block: COL_THREADS * COL_WARPS,
            grid: t.blocks * t.tiles,
            tiles: t.tiles,
            chunks: t.chunks,
            cols: COL_THREADS,
        };
    }
    let last = k.ranges.len().saturating_sub(1);
    let row_contig = acc.iter().any(|a| a.0.affine_coef(last) == Some(1));
    let col_contig = k.n_kept > 0 && acc.iter().any(|a| a.0.affine_coef(k.n_kept - 1) == Some(1));
    let (lanes, tpr) = if !row_contig && col_contig {
        (1, 1)
    } else {
        let lanes = lanes_for(k, &acc);
        let threads = row_len.div_ceil(lanes as u64).next_power_of_two();
        (lanes, threads.clamp(32, 1024) as u32)
    };
    let block = if tpr <= 32 { 256 } else { tpr };
    let teams = (block / tpr) as u64;
    let grid = rows.div_ceil(teams).clamp(1, i32::MAX as u64) as u32;
    Scan {
        lanes,
        tpr,
        block,
        grid,
        tiles: 0,
        chunks: 1,
        cols: 0,
    }
}

/// The method of sort kernel `k`.
pub(super) fn sort_method(k: &Kernel) -> Method {
    let op = k.sort_op().expect("a sort kernel has a sort");
    Method::of(k.row_len(), op.k, op.key_bits())
}

/// The pairs a sort kernel sorts on chip per row (see [`Sort`]).
fn on_chip_len(k: &Kernel) -> usize {
    match sort_method(k) {
        Method::OnChip => k.row_len(),
        Method::Select | Method::SelectOnChip => k.stored_len(),
        Method::Radix => 0,
    }
}

/// The mapping of a sort kernel: its on-chip pairs padded to a power of
/// two; the threads of its bitonic sort (at least a warp), but an
/// on-chip select runs 256 (a thread per digit of its histogram).
fn choose_sort(k: &Kernel) -> Sort {
    let chunk = on_chip_len(k).clamp(2, SORT_CHUNK).next_power_of_two() as u32;
    let block = match sort_method(k) {
        Method::SelectOnChip => super::pick::BLOCK,
        _ => super::bitonic::threads(chunk).max(32),
    };
    Sort {
        chunk,
        block,
        grid: (k.rows() as u64).clamp(1, i32::MAX as u64) as u32,
    }
}

/// Picks the mapping of `k` on `target`.
pub fn choose(k: &Kernel, target: &Target) -> Plan {
    if k.kind == KernelKind::Scan {
        return Plan::Scan(choose_scan(k));
    }
    if k.kind == KernelKind::Sort {
        return Plan::Sort(choose_sort(k));
    }
    let level = k.element_level();
    let has_reduce = k.insts.iter().any(|n| matches!(n.inst, Inst::Reduce(..)));
    let numel: i64 = k.ranges.iter().product();
    let sms = target.num_sms.max(1);
    if !has_reduce {
        let all = vec![true; k.insts.len()];
        let acc = accesses(k, &all);
        let lanes = lanes_for(k, &acc);
        let gathers = k.insts.iter().any(|n| matches!(n.inst, Inst::Gather(_)));
        // About 32 bytes of loads in flight per thread; 64 with gathers,
        // whose groups wait for two memory latencies (the ids', then the
        // rows').
        let target = if gathers { 64 } else { 32 };
        let mut unroll = (target / group_bytes(k, lanes)).clamp(1, MAX_UNROLL);
        let block = 256;
        let groups = (numel as u64).div_ceil(lanes as u64);
        // A gather that one pass covers in at most MAX_UNROLL groups per
        // thread of one full wave (every SM at THREADS_PER_SM) takes
        // as many groups per thread as that needs: the wave ends together,
        // where a second, partial wave would add a whole id-then-row
        // latency for a fraction of the work (embeddings of 4096 ids).
        let wave = (sms * THREADS_PER_SM) as u64;
        let one_wave = groups.div_ceil(wave) as usize;
        if gathers && one_wave <= MAX_UNROLL {
            unroll = unroll.max(one_wave);
        }
        // One pass over the domain (the grid-stride loop runs once): 3-7%
        // faster than a persistent grid from 2^24 elements on an H200.
        let grid = groups
            .div_ceil(block as u64 * unroll as u64)
            .clamp(1, i32::MAX as u64) as u32;
        return Plan::Elementwise(Elementwise {
            lanes,
            unroll,
            block,
            grid,
        });
    }
    let rows = k.rows() as u64;
    let row_len = k.row_len() as u64;
    let acc: Vec<_> = accesses(k, &level).into_iter().filter(|a| a.3).collect();
    let last = k.ranges.len().saturating_sub(1);
    let reduced_last = k.n_kept < k.ranges.len();
    let row_contig = reduced_last && acc.iter().any(|a| a.0.affine_coef(last) == Some(1));
    let col_contig = k.n_kept > 0 && acc.iter().any(|a| a.0.affine_coef(k.n_kept - 1) == Some(1));
    // Registers one slot of one lane costs when cached: its element loads.
    let loads = count_loads(k, &level);
    let (mut cluster, mut min_ctas) = (1, 1);
    let (lanes, tpr, block, slots, cached) = if !row_contig && col_contig {
        // Reduction over a leading axis: a thread per row, neighbouring
        // threads on neighbouring (contiguous) rows.
        let cached = row_len * loads <= 32;
        (1, 1, 256, if cached { row_len.max(1) } else { 4 }, cached)
    } else {
        let lanes = if reduced_last { lanes_for(k, &acc) } else { 1 } as u64;
        let groups = row_len.div_ceil(lanes);
        // Elements per thread: 16 up to 4096-element rows, 32 beyond (the
        // best of every power-of-two team for softmax and layer norm on an
        // H200, 2026-11-22), fewer (not below 8) when the domain would not
        // fill the GPU at half occupancy.
        let want = if row_len <= 4096 { 16 } else { 32 };
        let fill = rows * row_len / (sms as u64 * THREADS_PER_SM as u64 / 2);
        let per_thread = want.min(fill.max(8));
        let slots = (per_thread / lanes).max(1);
        let team = groups.div_ceil(slots).next_power_of_two();
        // Teams wider than a 1024-thread CTA are clusters of 512-thread
        // CTAs on sm_90, two per SM (faster than one 1024-thread CTA per
        // row, and than streaming the row, on an H200 for 65536 and 131072
        // f32 columns; a 1024-thread CTA is faster for 32768).
        let tpr = if target.sm >= 90 && team > 1024 {
            cluster = (team / 512).min(8) as u32;
            min_ctas = 2;
            512
        } else {
            team.clamp(1, 1024) as u32
        };
        let block = tpr.max(if tpr <= 32 { 256 } else { 32 });
        let full = groups.div_ceil(tpr as u64 * cluster as u64).max(1);
        // The cached row may take a thread's share of the register file
        // but for about 32 registers of addresses and temporaries.
        let budget = (u64::from(crate::ptx::target::REGISTERS_PER_SM) / (block * min_ctas) as u64)
            .saturating_sub(32)
            .min(96);
        if full * lanes * loads <= budget {
            (lanes as usize, tpr, block, full, true)
        } else {
            // Streamed rows: 512 threads keep two CTAs per SM.
            (cluster, min_ctas) = (1, 1);
            (lanes as usize, 512, 512, 4, false)
        }
    };
    let slots = slots as usize;
    let teams = (block / tpr) as u64;
    // A team per row, all launched at once: a CTA's loads then overlap
    // other CTAs' reductions. Only long cached rows with row-invariant
    // loads (layer norm's weights) keep a persistent grid, which loads
    // those once per CTA instead of once per row.
    let persistent = cached && row_len >= 16384 && has_invariant_loads(k);
    let cap = if persistent {
        (sms * (THREADS_PER_SM / block).max(1)) as u64
    } else {
        i32::MAX as u64
    };
    let teams_total = rows.div_ceil(teams).clamp(1, cap / cluster as u64);
    Plan::Rows(Rows {
        lanes,
        tpr,
        block,
        slots,
        cached,
        grid: (teams_total * cluster as u64) as u32,
        min_ctas,
        cluster,
    })
}

/// Checks that `plan` fits `k`: the right kind of mapping, a vector width
/// that divides the range it steps along (the last; a column tile's last
/// kept one), power-of-two teams that tile the block.
pub fn valid(k: &Kernel, plan: &Plan) -> Result<(), String> {
    let has_reduce = k.insts.iter().any(|n| matches!(n.inst, Inst::Reduce(..)));
    let last = k.ranges.last().copied().unwrap_or(1);
    let scan = k.kind == KernelKind::Scan;
    let sort = k.kind == KernelKind::Sort;
    let (lanes, block, lane_range) = match plan {
        Plan::Sort(p) if sort => {
            let bits = k.sort_op().map_or(32, |op| op.key_bits());
            let chunk_ok = p.chunk.is_power_of_two()
                && (2..=sort_chunk(bits) as u32).contains(&p.chunk)
                && p.chunk as usize >= on_chip_len(k);
            if !chunk_ok || k.n_kept + 1 != k.ranges.len() || has_reduce {
                return Err(format!("plan {p:?} does not fit sort kernel {}", k.name));
            }
            (1, p.block, last)
        }
        Plan::Scan(p) if scan && p.cols > 0 => {
            // Column tiles: the geometry [`column_tiles`] gives (the
            // status buffer's layout depends on it), a warp across the
            // columns, one CTA per tile, the buffer where tiles chain.
            let fits = column_tiles(k).is_some_and(|t| {
                (t.lanes, t.chunks, t.tiles) == (p.lanes, p.chunks, p.tiles)
                    && p.grid == t.blocks * t.tiles
                    && (t.tiles == 1 || super::scan::has_status(k))
            });
            if !fits || p.cols != COL_THREADS || p.block != COL_THREADS * COL_WARPS || p.tpr != 1 {
                return Err(format!("plan {p:?} does not fit scan kernel {}", k.name));
            }
            // The lanes step along the last kept variable.
            (p.lanes, p.block, k.ranges[k.n_kept - 1])
        }
        Plan::Scan(p) if scan => {
            let team_ok = p.tpr == 1 || (p.tpr % 32 == 0 && p.block % p.tpr == 0);
            // A look-back plan needs the status buffer, whole-CTA tiles
            // covering every row, and a grid of one CTA per tile.
            let tile = p.tpr as usize * p.lanes * p.chunks as usize;
            let tiles_ok = (p.tiles == 0 && p.chunks == 1)
                || (super::scan::has_status(k)
                    && lookback(k).is_some()
                    && p.tpr == p.block
                    && p.tpr > 32
                    && p.chunks >= 1
                    && p.tiles as usize == k.row_len().div_ceil(tile)
                    && p.grid as u64 == k.rows() as u64 * p.tiles as u64);
            if !team_ok || !tiles_ok || k.n_kept + 1 != k.ranges.len() || has_reduce {
                return Err(format!("plan {p:?} does not fit scan kernel {}", k.name));
            }
            (p.lanes, p.block, last)
        }
        Plan::Elementwise(p) if !has_reduce && !scan && !sort => (p.lanes, p.block, last),
        Plan::Rows(p) if has_reduce && !scan && !sort => {
            let teams_ok = p.tpr.is_power_of_two() && p.tpr <= p.block && p.block % p.tpr == 0;
            let cluster_ok = p.cluster == 1
                || ([2, 4, 8].contains(&p.cluster)
                    && p.tpr == p.block
                    && p.tpr > 32
                    && p.grid % p.cluster == 0);
            let fits = !p.cached
                || (p.slots * p.lanes) as u64 * p.team_threads() as u64 >= k.row_len() as u64;
            if !teams_ok || !cluster_ok || !fits || (p.lanes > 1 && k.n_kept == k.ranges.len()) {
                return Err(format!("plan {p:?} does not fit kernel {}", k.name));
            }
            (p.lanes, p.block, last)
        }
        _ => {
            return Err(format!(
                "plan {plan:?} is for the other kind of kernel than {}",
                k.name
            ))
        }
    };
    let grid = match plan {
        Plan::Elementwise(p) => p.grid,
        Plan::Rows(p) => p.grid,
        Plan::Scan(p) => p.grid,
        Plan::Sort(p) => p.grid,
    };
    if lanes == 0
        || lane_range % lanes as i64 != 0
        || block % 32 != 0
        || !(32..=1024).contains(&block)
        || grid == 0
    {
        return Err(format!("plan {plan:?} does not fit kernel {}", k.name));
    }
    Ok(())
}
