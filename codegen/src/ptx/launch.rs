//! Launch heuristics: how a kernel is mapped onto threads (vector width,
//! threads per row, slots per thread, block and grid), decided per kernel
//! and shape in [`choose`] alone.

use super::eval::row_free_load;
use super::memory::vector_ok;
use super::target::Target;
use crate::ir::{Inst, Kernel, KernelKind};
use crate::sort::{Method, SORT_CHUNK};
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
/// carrying the running value from chunk to chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scan {
    /// Consecutive elements per thread and chunk (a vector access where
    /// aligned); divides the row length.
    pub lanes: usize,
    /// Threads per row: 1, or a multiple of 32 up to the block.
    pub tpr: u32,
    /// Threads per CTA.
    pub block: u32,
    /// CTAs in the grid (rows beyond `grid * block / tpr` loop).
    pub grid: u32,
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
    /// at most [`crate::sort::SORT_CHUNK`], at least the pairs sorted.
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
    let Some(last) = k.ranges.len().checked_sub(1) else {
        return 1;
    };
    let unit: Vec<_> = acc
        .iter()
        .filter(|a| a.0.affine_coef(last) == Some(1))
        .collect();
    [8, 4, 2]
        .into_iter()
        .find(|&l| {
            k.ranges[last] % l as i64 == 0
                && !unit.is_empty()
                && unit.iter().all(|a| vector_ok(&a.0, &a.1, a.2, l, last))
        })
        .unwrap_or(1)
}

/// Number of loads among the instructions marked in `which` (at least 1).
fn count_loads(k: &Kernel, which: &[bool]) -> u64 {
    let n = k
        .insts
        .iter()
        .zip(which)
        .filter(|(n, w)| **w && matches!(n.inst, Inst::Load { .. } | Inst::Gather { .. }))
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

/// The mapping of a scan kernel: a thread per row when the scanned axis is
/// strided and a kept one contiguous (neighbouring threads then read
/// neighbouring elements), else a team per row just wide enough to cover
/// the row in one chunk, from a warp (several rows per CTA) to 1024
/// threads (longer rows take several chunks).
fn choose_scan(k: &Kernel) -> Scan {
    let level = k.element_level();
    let acc = accesses(k, &level);
    let rows = k.rows() as u64;
    let row_len = k.row_len() as u64;
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
    }
}

/// The pairs a sort kernel sorts on chip per row (see [`Sort`]).
fn on_chip_len(k: &Kernel) -> usize {
    match Method::of(k.row_len(), k.stored_len()) {
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
    let block = match Method::of(k.row_len(), k.stored_len()) {
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
        let loads = count_loads(k, &all) as usize;
        let widest = acc.iter().map(|a| a.2.size()).max().unwrap_or(4);
        // About 32 bytes of loads in flight per thread.
        let unroll = (32 / (lanes * widest * loads)).clamp(1, 4);
        let block = 256;
        let groups = (numel as u64).div_ceil(lanes as u64);
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
        let budget = (65536 / (block * min_ctas) as u64)
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
/// that divides the last range, power-of-two teams that tile the block.
pub fn valid(k: &Kernel, plan: &Plan) -> Result<(), String> {
    let has_reduce = k.insts.iter().any(|n| matches!(n.inst, Inst::Reduce(..)));
    let last = k.ranges.last().copied().unwrap_or(1);
    let scan = k.kind == KernelKind::Scan;
    let sort = k.kind == KernelKind::Sort;
    let (lanes, block) = match plan {
        Plan::Sort(p) if sort => {
            let chunk_ok = p.chunk.is_power_of_two()
                && (2..=SORT_CHUNK as u32).contains(&p.chunk)
                && p.chunk as usize >= on_chip_len(k);
            if !chunk_ok || k.n_kept + 1 != k.ranges.len() || has_reduce {
                return Err(format!("plan {p:?} does not fit sort kernel {}", k.name));
            }
            (1, p.block)
        }
        Plan::Scan(p) if scan => {
            let team_ok = p.tpr == 1 || (p.tpr % 32 == 0 && p.block % p.tpr == 0);
            if !team_ok || k.n_kept + 1 != k.ranges.len() || has_reduce {
                return Err(format!("plan {p:?} does not fit scan kernel {}", k.name));
            }
            (p.lanes, p.block)
        }
        Plan::Elementwise(p) if !has_reduce && !scan && !sort => (p.lanes, p.block),
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
            (p.lanes, p.block)
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
        || last % lanes as i64 != 0
        || block % 32 != 0
        || !(32..=1024).contains(&block)
        || grid == 0
    {
        return Err(format!("plan {plan:?} does not fit kernel {}", k.name));
    }
    Ok(())
}
