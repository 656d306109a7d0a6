//! Exact `f32` matmul on the FMA units (SGEMM): every product is one
//! `fma.rn.f32` into an `f32` accumulator, no tensor cores, no TF32 (what
//! PyTorch computes by default), fed from shared memory that a multi-stage
//! `cp.async` pipeline fills, with the kernel's epilogue fused on the
//! accumulators before the only store. Too few output tiles over a long
//! `k` split `k` among CTAs (`split.rs`, grid `y`): each then stores its
//! sums to its plane of the scratch buffer, and the reduction launch runs
//! the epilogue.
//!
//! # Floor
//! H100/H200 FP32 peak: 132 SMs x 128 FMA/clk x 2 flop x ~1.98 GHz ≈ 67
//! TFLOP/s; cuBLAS SGEMM measures ~51 TFLOP/s on the H200. The aim is at
//! least 30 TFLOP/s at 4096^3. An 8x8 thread tile issues 4 `ld.shared.v4`
//! per 64 FMAs per `k`, so shared-memory bandwidth is not the limit; the
//! FMA pipe is, and the rest (copies, address math, barriers, epilogue) is
//! overhead to keep small.
//!
//! # Mapping
//! - Grid `x`: CTA tiles `bm x bn` of C in grouped order ([`tile_origin`],
//!   `group_m` tile rows per sweep along N, for L2 reuse of A); grid `z`:
//!   the batch ([`unravel_batch`]).
//! - A CTA is `warps_m x warps_n` warps; a warp computes a 64 (m) x `4 tn`
//!   (n) tile with its lanes as 8 (m) x 4 (n): lane `l` has `lm = l / 4`,
//!   `ln = l % 4`. A thread computes 8 x `tn` outputs (`tn` 8, or 16 as
//!   cuBLAS's SGEMM tiles) as blocks of 4x4: rows `wm 64 + lm 4 + {0..3,
//!   32..35}`, columns `wn 4 tn + ln 4 + 16 j + {0..3}` for `j < tn / 4`
//!   (warp `w`: `wm = w % warps_m`, `wn = w / warps_m`). Each `k` it reads
//!   its 8 A values and `tn` B values as `ld.shared.v4.f32` (one per
//!   block of 4) and issues `8 tn` FMAs. The warp's distinct words are
//!   contiguous: 8 values of `lm` read 128 bytes of A, 4 of `ln` 64 bytes
//!   of B, the other lanes getting broadcasts, so a quarter-warp (8 lanes,
//!   2 `lm` x 4 `ln`) never has two words on one bank. (8 consecutive rows
//!   per thread would spread the same words over twice the bytes.)
//! - Shared memory: per stage `As[bk][bm + 4]` then `Bs[bk][bn + 4]`, both
//!   `k`-major (a `k` row holds the tile's `m` or `n` contiguously), so the
//!   per-`k` reads above are contiguous vectors. The 4 floats of padding
//!   keep rows 16-byte aligned and put the 8 `k` a warp's transposing
//!   copies write (below) on different banks.
//! - Copies, per operand (`Mode`), every one a `cp.async` so the copy of
//!   one tile overlaps the FMAs of another:
//!   - rows contiguous and aligned (B stored `[k, n]`, A stored `[k, m]`;
//!     [`Operand::row_vector_ok`] with 4 floats per 16 bytes): 16-byte
//!     `cp.async.cg` of 4 rows at one `k`, neighbouring lanes on
//!     neighbouring chunks;
//!   - otherwise 4-byte `cp.async.ca` per element, which transposes on the
//!     fly: `k`-contiguous operands (A stored `[m, k]`, B stored `[n, k]`)
//!     put 8 neighbouring lanes on the 8 consecutive `k` of one row (a
//!     32-byte sector per row) and 4 rows per warp (conflict-free shared
//!     writes thanks to the padding); operands whose rows are the denser
//!     axis (an unaligned slice of a row-major B) put lanes on neighbouring
//!     rows.
//!
//!   A copy whose row lies outside the matrix is skipped: such rows only
//!   feed outputs the epilogue masks. `k` outside the matrix must read 0
//!   (garbage times 0 may be NaN): only the last k-tile can hold such `k`,
//!   and only its copies test `k` and zero-fill (`cp.async` with source
//!   size 0 from the input's base address).
//! - Pipeline: `stages` buffers; k-tile `kt + stages - 1` is copied while
//!   k-tile `kt` is multiplied, one `bar.sync` per k-tile (it both
//!   publishes the next tile and frees the buffer the last one used). In
//!   8x8 tiles the barrier starts the iteration, the copies follow, then
//!   each `k`'s reads and FMAs. 8x16 tiles rotate the loop as cuBLAS's
//!   SGEMM does (its SASS, read on the H200): the operands of `k + 1` are
//!   read into one of two register sets while the FMAs of `k` use the
//!   other, the copies start mid-tile, an iteration ends with the wait and
//!   barrier for tile `kt + 1` and the reads of its first `k`, and the next
//!   starts with the FMAs of tile `kt`'s last `k`, which do not depend on
//!   those reads and so cover their latency (zeros on the first pass; the
//!   last tile's last `k` follows the loop). Unrotated, each warp waited
//!   on its first reads right after the barrier: ncu at 4096^3 counted
//!   0.41 short-scoreboard stall cycles an instruction in the 8x16 kernel
//!   where cuBLAS's has 0.32. The two sets live across the back edge do
//!   not fit the 128 registers of an 8x8 thread without spills.
//! - `.maxntid` and `.minnctapersm` cap ptxas at 128 registers for 8x8
//!   (the 64 accumulators, two sets of 16 operand registers so the next
//!   `k`'s reads overlap this one's FMAs, addresses): 512 threads per SM,
//!   two 256-thread CTAs, so one CTA's barrier wait hides behind the
//!   other's FMAs. 8x16 takes 255 (two 128-thread CTAs an SM, as cuBLAS's
//!   128x128 SGEMM tile).

use super::epilogue;
use super::shape::{Operand, Shape};
use super::split::{self, Split};
use super::start::{batch_offset, start, Bounds, CtaTile};
use crate::ir::Kernel;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::module::PtxKernel;
use crate::ptx::target::Target;

/// Rows (m) of C one warp computes: lanes 8 (m) x 4 (n), each 8 rows.
const WARP_M: u32 = 64;
/// Floats of padding after each `k` row of a shared tile.
const PAD: u32 = 4;
/// Registers per thread the launch bounds aim at for 8x8 thread tiles
/// (see the module docs).
const REGS: u32 = 128;
/// The same for a split kernel: at 128 its CTA's chunk end spills around
/// the loop (12 bytes at 128x128), so it declares fewer CTAs an SM.
const SPLIT_REGS: u32 = 160;
/// Registers per thread for 8x16 thread tiles: 128 accumulators, two sets
/// of 24 operands, addresses.
const WIDE_REGS: u32 = 255;

/// One CTA's tile and pipeline of the SIMT matmul.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Simt {
    /// Warps along M and N (each warp `64 x 4 tn`).
    pub warps_m: u32,
    pub warps_n: u32,
    /// `k` per stage: 8 or 16.
    pub bk: u32,
    /// Shared-memory stages of the `cp.async` pipeline (2..=4).
    pub stages: u32,
    /// CTA tiles along M visited together (grouped order, for L2 reuse).
    pub group_m: u32,
    /// Columns of C per thread: 8 (a warp computes 64x32) or 16 (64x64,
    /// cuBLAS's SGEMM warp tile: 128 accumulators a thread, 6 shared
    /// reads per 128 FMAs where 8x8 issues 4 per 64).
    pub tn: u32,
}

impl Simt {
    pub fn threads(&self) -> u32 {
        32 * self.warps_m * self.warps_n
    }
    /// Registers a thread may use (split or not).
    fn regs(&self, split: bool) -> u32 {
        match (self.tn, split) {
            (16, _) => WIDE_REGS,
            (_, true) => SPLIT_REGS,
            _ => REGS,
        }
    }
    /// The splits of `k` the rule (or `SMELT_MATMUL_SPLITS`) asks of this
    /// tile for `s`: an SM counted as the split CTAs it holds.
    pub fn splits(&self, s: &Shape, batches: i64, target: &Target) -> u64 {
        split::wanted_simt(s, batches, (self, self.ctas_per_sm(true)), target)
    }
    /// CTAs an SM holds at the registers a thread may use (split or not).
    fn ctas_per_sm(&self, split: bool) -> u32 {
        // Registers are allocated to a warp in units of 8 a thread.
        let regs = self.regs(split).next_multiple_of(8);
        (crate::ptx::target::REGISTERS_PER_SM / (regs * self.threads())).max(1)
    }
    /// Whether the main loop is rotated as cuBLAS's SGEMM's (the module
    /// docs' "Pipeline"): two sets of operands stay live across its back
    /// edge, which the 128 registers of an 8x8 thread do not hold without
    /// spills, so only 8x16 tiles (255 registers) take it.
    fn rotated(&self) -> bool {
        self.tn == 16
    }
    /// Columns (n) of C one warp computes: 4 lanes of `tn` each.
    fn warp_n(&self) -> u32 {
        4 * self.tn
    }
    /// Offsets of the 4-wide blocks of a thread's rows (A) from its first
    /// one: half the warp tile apart, so a warp's 8 lanes along M read 128
    /// contiguous bytes per block.
    fn a_blocks(&self) -> [u32; 2] {
        [0, WARP_M / 2]
    }
    /// The same for its columns (B): 16 apart (the 4 lanes along N).
    fn b_blocks(&self) -> Vec<u32> {
        (0..self.tn / 4).map(|i| 16 * i).collect()
    }
    /// Bytes of one `k` row of the A (`bm + PAD` floats) or B tile.
    fn a_row(&self) -> u32 {
        4 * (self.bm() + PAD)
    }
    fn b_row(&self) -> u32 {
        4 * (self.bn() + PAD)
    }
    /// Bytes of one stage: the A tile, then the B tile.
    fn stage_bytes(&self) -> u32 {
        self.bk * (self.a_row() + self.b_row())
    }
    /// Dynamic shared memory the kernel launches with.
    pub fn shared_bytes(&self) -> u32 {
        self.stages * self.stage_bytes()
    }
    /// A short stable name (`simt128x128k8s3g8`, `...n16` for 16 columns
    /// a thread), distinct from the tensor-core tiles' names: the
    /// autotuner's on-disk cache stores it.
    pub fn name(&self) -> String {
        format!(
            "simt{}x{}k{}s{}g{}{}",
            self.bm(),
            self.bn(),
            self.bk,
            self.stages,
            self.group_m,
            if self.tn == 8 {
                String::new()
            } else {
                format!("n{}", self.tn)
            }
        )
    }
    /// The thread's first row of C within the CTA tile: `wm 64 + lm 4`.
    fn thread_m(&self) -> Coord {
        Coord(vec![
            Term::new(32, Some(self.warps_m), WARP_M),
            Term::new(4, Some(8), 4),
        ])
    }
    /// The thread's first column: `wn warp_n + ln 4`.
    fn thread_n(&self) -> Coord {
        Coord(vec![
            Term::new(32 * self.warps_m, None, self.warp_n()),
            Term::new(1, Some(4), 4),
        ])
    }
}

impl CtaTile for Simt {
    fn bm(&self) -> u32 {
        self.warps_m * WARP_M
    }
    fn bn(&self) -> u32 {
        self.warps_n * self.warp_n()
    }
    fn group_m(&self) -> u32 {
        self.group_m
    }
    fn threads(&self) -> u32 {
        Simt::threads(self)
    }
}

/// The configurations worth timing: CTA tiles 128x128 (256 threads),
/// 128x64 and 64x128 (128), 64x64 (64, for small problems) of 8x8 thread
/// tiles, `k` 8 per stage 3 or 4 deep, or 16 per stage 2 or 3 deep; and
/// 128x128 (128 threads) and 64x128 (64) of 8x16, `k` 8 per stage 3 or 4
/// deep (16 per stage ran 5-60% slower in every product the autotuner
/// timed on the H200, 2026-11-29). Any is correct for any shape.
pub fn candidates() -> Vec<Simt> {
    let tile = |warps_m, warps_n, tn, (bk, stages)| Simt {
        warps_m,
        warps_n,
        bk,
        stages,
        group_m: 8,
        tn,
    };
    let mut out = Vec::new();
    for (warps_m, warps_n) in [(2, 4), (2, 2), (1, 4), (1, 2)] {
        for pipe in [(8, 3), (8, 4), (16, 2), (16, 3)] {
            out.push(tile(warps_m, warps_n, 8, pipe));
        }
    }
    for (warps_m, warps_n) in [(2, 2), (1, 2)] {
        for pipe in [(8, 3), (8, 4)] {
            out.push(tile(warps_m, warps_n, 16, pipe));
        }
    }
    out
}

/// The SIMT tile `SMELT_MATMUL_TILE` names, if it names one.
pub fn forced() -> Option<Simt> {
    let name = crate::env::var("SMELT_MATMUL_TILE", crate::env::parse_matmul_tile)?;
    candidates().into_iter().find(|t| t.name() == name)
}

/// The tile `SMELT_MATMUL_TILE` names, else (`k` 8 per stage, 3 stages)
/// the largest 8x8 tile that still gives every SM a CTA (the smallest
/// when none does), of 128 threads at most where `k` is at most 128; and
/// where the split rule splits that tile, the 128x128 tile of 8x16
/// instead, split as the rule asks of it.
///
/// Why (H200, 2026-11-29, cuBLAS's SGEMM in the same process,
/// BENCHMARKS.md): a short `k` loop (32 x 512x512x64) ran at 82% of
/// cuBLAS in 128x64 tiles, four CTAs an SM overlapping their pipeline
/// fills and epilogues, and at 70% in 128x128 tiles (two an SM); products
/// the rule splits (1024^3) ran at 96% split in 128x128 tiles of 8x16
/// (cuBLAS's own SGEMM tile) and at 92% in the 64x64 tiles of 8x8 that
/// filled the GPU.
pub fn choose(s: &Shape, batches: i64, target: &Target) -> Simt {
    if let Some(t) = forced() {
        return t;
    }
    let ctas = |t: &Simt| {
        (s.m as u64).div_ceil(t.bm() as u64) * (s.n as u64).div_ceil(t.bn() as u64) * batches as u64
    };
    let all: Vec<Simt> = candidates()
        .into_iter()
        .filter(|t| t.bk == 8 && t.stages == 3)
        .collect();
    let (narrow, wide): (Vec<Simt>, Vec<Simt>) = all.into_iter().partition(|t| t.tn == 8);
    let short = s.k <= 128;
    let fits = narrow
        .iter()
        .filter(|t| !short || t.threads() <= 128)
        .find(|t| ctas(t) >= target.num_sms as u64);
    let t = *fits.unwrap_or(&narrow[narrow.len() - 1]);
    if split::rule_simt(s, batches, (&t, t.ctas_per_sm(true)), target) > 1 {
        return wide[0];
    }
    t
}

/// One term `((tid / div) % rem) * scale` of a [`Coord`].
#[derive(Clone, Copy, Debug)]
struct Term {
    div: u32,
    rem: Option<u32>,
    scale: u32,
}

impl Term {
    fn new(div: u32, rem: Option<u32>, scale: u32) -> Term {
        Term { div, rem, scale }
    }
}

/// A per-thread coordinate as a function of the thread index: the sum of
/// its terms. The emitter computes it in PTX and the tests evaluate the
/// same description, so the coverage checks test what runs.
#[derive(Clone, Debug)]
struct Coord(Vec<Term>);

impl Coord {
    /// The coordinate of thread `tid` (u32 register).
    fn emit(&self, b: &mut Builder, tid: Reg) -> Reg {
        let out = b.mov(RegKind::B32, "u32", 0);
        for t in self.0.iter().filter(|t| t.rem != Some(1)) {
            let x = b.reg(RegKind::B32);
            ins!(b, "div.u32 {x}, {tid}, {}", t.div);
            if let Some(r) = t.rem {
                ins!(b, "rem.u32 {x}, {x}, {r}");
            }
            ins!(b, "mad.lo.u32 {out}, {x}, {}, {out}", t.scale);
        }
        out
    }

    #[cfg(test)]
    fn at(&self, tid: u32) -> u32 {
        self.0
            .iter()
            .map(|t| (tid / t.div) % t.rem.unwrap_or(u32::MAX) * t.scale)
            .sum()
    }
}

/// How an operand's tile is copied (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// 16-byte copies of 4 consecutive rows at one `k`.
    Rows4,
    /// 4-byte copies, neighbouring lanes on neighbouring rows.
    RowFast,
    /// 4-byte copies, 8 neighbouring lanes on 8 consecutive `k`.
    KFast,
}

impl Mode {
    /// The mode for operand `op` with `rows` rows (M or N).
    fn of(op: &Operand, rows: i64) -> Mode {
        if op.row_vector_ok(rows, 4) {
            Mode::Rows4
        } else if op.row != 0 && op.row.unsigned_abs() < op.k.unsigned_abs() {
            Mode::RowFast
        } else {
            Mode::KFast
        }
    }
}

/// Which elements of a `tile_rows x bk` tile a thread copies: copy `i`
/// covers row `row + offs[i].0` (4 rows from there for [`Mode::Rows4`])
/// and `k` `k + offs[i].1`, `row` and `k` the thread's coordinates.
#[derive(Debug)]
struct Copies {
    row: Coord,
    k: Coord,
    offs: Vec<(u32, u32)>,
}

/// Splits a tile's copies over `threads`: consecutive thread indices take
/// consecutive units along the fast axis (`units` of them per line), copy
/// `i` of thread `tid` is unit `tid + i threads`. When `threads` and
/// `units` divide one another, unit `tid + i threads` is the thread's
/// unit `(tid % units, tid / units)` moved by a constant per `i`, so a
/// thread needs one address and constant offsets.
fn copies(mode: Mode, tile_rows: u32, bk: u32, threads: u32) -> Copies {
    // (units along the fast axis per line, lanes taking one unit each)
    let (units, lanes) = match mode {
        Mode::Rows4 => (tile_rows / 4, threads),
        Mode::RowFast => (tile_rows, threads),
        // Each group of 8 lanes takes the 8 `k` of one row: groups run
        // along the rows, then along `k` in steps of 8.
        Mode::KFast => (tile_rows, threads / 8),
    };
    assert!(
        units % lanes == 0 || lanes % units == 0,
        "{mode:?}: {units} units per line, {lanes} lanes"
    );
    let total = match mode {
        Mode::Rows4 | Mode::RowFast => units * bk,
        Mode::KFast => units * bk / 8,
    };
    assert_eq!(total % lanes, 0, "{mode:?}: {total} units over {lanes}");
    let offs = (0..total / lanes)
        .map(|i| {
            let (fast, line) = ((i * lanes) % units, (i * lanes) / units);
            match mode {
                Mode::Rows4 => (4 * fast, line),
                Mode::RowFast => (fast, line),
                Mode::KFast => (fast, 8 * line),
            }
        })
        .collect();
    let (row, k) = match mode {
        Mode::Rows4 => (
            Coord(vec![Term::new(1, Some(units), 4)]),
            Coord(vec![Term::new(units, None, 1)]),
        ),
        Mode::RowFast => (
            Coord(vec![Term::new(1, Some(units), 1)]),
            Coord(vec![Term::new(units, None, 1)]),
        ),
        Mode::KFast => (
            Coord(vec![Term::new(8, Some(units), 1)]),
            Coord(vec![
                Term::new(8 * units, None, 8),
                Term::new(1, Some(8), 1),
            ]),
        ),
    };
    Copies { row, k, offs }
}

/// Per-thread state for copying one operand's tiles.
struct OperandCopy {
    mode: Mode,
    offs: Vec<(u32, u32)>,
    /// Global base of the input: the (never read) source of zero fills.
    base: Reg,
    /// Global address of the thread's first element in k-tile 0 (u64).
    addr: Reg,
    /// Global row (`m` or `n`) of the thread's first element (u32).
    row: Reg,
    /// `k` of the thread's first element within a tile (u32).
    k: Reg,
    /// Byte offset of the thread's first element within a stage (u32).
    smem: Reg,
    /// Bytes of one shared `k` row.
    srow: u32,
    /// Rows of the matrix (M or N).
    rows: i64,
    /// Bytes between neighbouring rows and `k` in global memory.
    row_b: i64,
    k_b: i64,
    bk: u32,
    k_len: i64,
}

/// Where an operand comes from and where its tile goes.
struct Source<'a> {
    op: &'a Operand,
    base: Reg,
    /// First row of the CTA tile (`m0` or `n0`), u32.
    row0: Reg,
    rows: i64,
    tile_rows: u32,
    /// Offset of the tile within a stage, and bytes per `k` row there.
    tile_off: u32,
    srow: u32,
}

impl OperandCopy {
    fn new(
        b: &mut Builder,
        src: &Source,
        batch: &[Reg],
        tid: Reg,
        t: &Simt,
        k_len: i64,
    ) -> OperandCopy {
        let mode = Mode::of(src.op, src.rows);
        let sp = copies(mode, src.tile_rows, t.bk, t.threads());
        let row_in = sp.row.emit(b, tid);
        let k = sp.k.emit(b, tid);
        let row = b.reg(RegKind::B32);
        ins!(b, "add.u32 {row}, {}, {row_in}", src.row0);
        let smem = b.reg(RegKind::B32);
        ins!(b, "mad.lo.u32 {smem}, {k}, {}, {}", src.srow, src.tile_off);
        ins!(b, "mad.lo.u32 {smem}, {row_in}, 4, {smem}");
        let off = batch_offset(b, src.op, batch);
        let (row64, k64, addr) = (
            b.reg(RegKind::B64),
            b.reg(RegKind::B64),
            b.reg(RegKind::B64),
        );
        ins!(b, "cvt.u64.u32 {row64}, {row}");
        ins!(b, "cvt.u64.u32 {k64}, {k}");
        ins!(b, "mad.lo.s64 {off}, {row64}, {}, {off}", src.op.row);
        ins!(b, "mad.lo.s64 {off}, {k64}, {}, {off}", src.op.k);
        ins!(b, "mad.lo.s64 {addr}, {off}, 4, {}", src.base);
        OperandCopy {
            mode,
            offs: sp.offs,
            base: src.base,
            addr,
            row,
            k,
            smem,
            srow: src.srow,
            rows: src.rows,
            row_b: 4 * src.op.row,
            k_b: 4 * src.op.k,
            bk: t.bk,
            k_len,
        }
    }

    /// Copies k-tile `kt` (u32 register) into the stage at shared address
    /// `stage`; the copies join the current commit group. `masked` tests
    /// `k` against K (the last tile when `bk` does not divide K).
    fn tile(&self, b: &mut Builder, stage: Reg, kt: Reg, masked: bool) {
        let (kt64, gaddr, dst) = (
            b.reg(RegKind::B64),
            b.reg(RegKind::B64),
            b.reg(RegKind::B32),
        );
        ins!(b, "cvt.u64.u32 {kt64}, {kt}");
        ins!(
            b,
            "mad.lo.s64 {gaddr}, {kt64}, {}, {}",
            self.k_b * self.bk as i64,
            self.addr
        );
        ins!(b, "add.u32 {dst}, {stage}, {}", self.smem);
        let left = masked.then(|| {
            let left = b.reg(RegKind::B32);
            ins!(b, "mul.lo.u32 {left}, {kt}, {}", self.bk);
            ins!(b, "sub.s32 {left}, {}, {left}", self.k_len);
            left
        });
        let (bytes, cache) = match self.mode {
            Mode::Rows4 => (16, "cg"),
            Mode::RowFast | Mode::KFast => (4, "ca"),
        };
        for &(dr, dk) in &self.offs {
            if dr as i64 >= self.rows {
                // Every thread's row is past the matrix: nothing to copy.
                continue;
            }
            let (row_ok, src) = (b.reg(RegKind::Pred), b.reg(RegKind::B64));
            ins!(
                b,
                "setp.lt.u32 {row_ok}, {}, {}",
                self.row,
                self.rows - dr as i64
            );
            ins!(
                b,
                "add.s64 {src}, {gaddr}, {}",
                dr as i64 * self.row_b + dk as i64 * self.k_b
            );
            let soff = dk * self.srow + 4 * dr;
            match left {
                None => ins!(
                    b,
                    "@{row_ok} cp.async.{cache}.shared.global [{dst}+{soff}], [{src}], {bytes}"
                ),
                Some(left) => {
                    let (lim, k_ok, size) = (
                        b.reg(RegKind::B32),
                        b.reg(RegKind::Pred),
                        b.reg(RegKind::B32),
                    );
                    ins!(b, "sub.s32 {lim}, {left}, {dk}");
                    ins!(b, "setp.lt.s32 {k_ok}, {}, {lim}", self.k);
                    ins!(b, "selp.b64 {src}, {src}, {}, {k_ok}", self.base);
                    ins!(b, "selp.u32 {size}, {bytes}, 0, {k_ok}");
                    ins!(
                        b,
                        "@{row_ok} cp.async.{cache}.shared.global [{dst}+{soff}], [{src}], {bytes}, {size}"
                    );
                }
            }
        }
    }
}

/// Lowers the recognised exact-`f32` matmul `s` of `kernel` with
/// configuration `t` (any of [`candidates`] is correct for any shape),
/// its k-tiles split as `sp` (`split.rs`; [`Split::NONE`] for none): CTA
/// `(x, s, z)` then multiplies k-tiles `s chunk ..` only and stores its
/// sums to its plane of the scratch buffer, which the reduction launch
/// adds up and runs the epilogue on.
pub fn emit(kernel: &Kernel, target: &Target, s: &Shape, t: &Simt, sp: Split) -> PtxKernel {
    let (mut bld, st) = start(kernel, target, s, t);
    let (cx, tid, smem_base, m0, n0) = (&st.cx, st.tid, st.smem_base, st.m0, st.n0);
    let batch = st.batch.clone();
    let b = &mut bld;
    let a_src = Source {
        op: &s.a,
        base: cx.inputs[s.a.input],
        row0: m0,
        rows: s.m,
        tile_rows: t.bm(),
        tile_off: 0,
        srow: t.a_row(),
    };
    let b_src = Source {
        op: &s.b,
        base: cx.inputs[s.b.input],
        row0: n0,
        rows: s.n,
        tile_rows: t.bn(),
        tile_off: t.bk * t.a_row(),
        srow: t.b_row(),
    };
    b.comment(&format!(
        "copies: A {:?}, B {:?}",
        Mode::of(&s.a, s.m),
        Mode::of(&s.b, s.n)
    ));
    let la = OperandCopy::new(b, &a_src, &batch, tid, t, s.k);
    let lb = OperandCopy::new(b, &b_src, &batch, tid, t, s.k);
    let (tm, tn) = (t.thread_m().emit(b, tid), t.thread_n().emit(b, tid));
    // The thread's A and B reads within a stage.
    let (a_rd, b_rd) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "mad.lo.u32 {a_rd}, {tm}, 4, {smem_base}");
    ins!(b, "mad.lo.u32 {b_rd}, {tn}, 4, {smem_base}");
    ins!(b, "add.u32 {b_rd}, {b_rd}, {}", b_src.tile_off);
    let (a_blocks, b_blocks) = (t.a_blocks(), t.b_blocks());
    let acc: Vec<Vec<Reg>> = (0..8)
        .map(|_| {
            (0..t.tn)
                .map(|_| b.mov(RegKind::F32, "f32", "0f00000000"))
                .collect()
        })
        .collect();
    let bk = t.bk as i64;
    let kt_total = (s.k as u64).div_ceil(bk as u64) as u32;
    // k-tiles below `full` lie wholly inside K.
    let full = (s.k / bk) as u32;
    // Stage byte offsets advance cyclically: cheaper than `kt % stages`,
    // a division for 3 stages.
    let ring = t.stages * t.stage_bytes();
    let advance = |b: &mut Builder, off: Reg| {
        let p = b.reg(RegKind::Pred);
        ins!(b, "add.u32 {off}, {off}, {}", t.stage_bytes());
        ins!(b, "setp.eq.u32 {p}, {off}, {ring}");
        ins!(b, "selp.u32 {off}, 0, {off}, {p}");
    };
    let copy = |b: &mut Builder, kt: Reg, off: Reg, masked: bool| {
        let stage = b.reg(RegKind::B32);
        ins!(b, "add.u32 {stage}, {smem_base}, {off}");
        la.tile(b, stage, kt, masked);
        lb.tile(b, stage, kt, masked);
    };
    // This CTA's k-tiles `first .. end`: all of them unsplit.
    let (first, end) = if sp.is_split() {
        let (first, count) = split::k_tiles(b, sp, kt_total);
        let end = b.reg(RegKind::B32);
        ins!(b, "add.u32 {end}, {first}, {count}");
        (first, end)
    } else {
        (
            b.mov(RegKind::B32, "u32", 0),
            b.mov(RegKind::B32, "u32", kt_total),
        )
    };
    // Copies k-tile `kt` (u32 register) into the stage at offset `off`
    // where it is below the CTA's end, masked where it reaches past K.
    let copy_below = |b: &mut Builder, kt: Reg, off: Reg| {
        let (p, done) = (b.reg(RegKind::Pred), b.label());
        ins!(b, "setp.ge.u32 {p}, {kt}, {end}");
        ins!(b, "@{p} bra.uni {done}");
        if full < kt_total {
            let last = b.label();
            ins!(b, "setp.ge.u32 {p}, {kt}, {full}");
            ins!(b, "@{p} bra.uni {last}");
            copy(b, kt, off, false);
            ins!(b, "bra.uni {done}");
            b.place(&last);
            copy(b, kt, off, true);
        } else {
            copy(b, kt, off, false);
        }
        b.place(&done);
    };
    b.comment("prologue: the first stages - 1 k-tiles in flight");
    for st in 0..t.stages - 1 {
        if sp.is_split() {
            let (kt, off) = (
                b.reg(RegKind::B32),
                b.mov(RegKind::B32, "u32", st * t.stage_bytes()),
            );
            ins!(b, "add.u32 {kt}, {first}, {st}");
            copy_below(b, kt, off);
        } else if st < kt_total {
            let kt = b.mov(RegKind::B32, "u32", st);
            let off = b.mov(RegKind::B32, "u32", st * t.stage_bytes());
            copy(b, kt, off, st >= full);
        }
        ins!(b, "cp.async.commit_group");
    }
    b.comment("main loop: multiply tile kt, refill the stage tile kt - 1 used");
    // The stages tile kt is read from and tile kt + stages - 1 copied to.
    let rd = b.mov(RegKind::B32, "u32", 0);
    let wr = b.mov(RegKind::B32, "u32", (t.stages - 1) * t.stage_bytes());
    let (a_ptr, b_ptr) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    // Points the reads at the stage tile `rd` names, and `rd` at the next.
    let read_stage = |b: &mut Builder| {
        ins!(b, "add.u32 {a_ptr}, {a_rd}, {rd}");
        ins!(b, "add.u32 {b_ptr}, {b_rd}, {rd}");
        advance(b, rd);
    };
    // Registers for a `k`'s operands: 8 of A, then `tn` of B.
    let operands =
        |b: &mut Builder| -> Vec<Reg> { (0..8 + t.tn).map(|_| b.reg(RegKind::F32)).collect() };
    let read = |b: &mut Builder, set: &[Reg], kk: u32| {
        let (a_regs, b_regs) = set.split_at(8);
        let blocks = (a_blocks.iter().map(|d| (a_ptr, kk * t.a_row() + 4 * d)))
            .chain(b_blocks.iter().map(|d| (b_ptr, kk * t.b_row() + 4 * d)));
        for (r, (ptr, off)) in a_regs.chunks(4).chain(b_regs.chunks(4)).zip(blocks) {
            ins!(
                b,
                "ld.shared.v4.f32 {{{}, {}, {}, {}}}, [{ptr}+{off}]",
                r[0],
                r[1],
                r[2],
                r[3]
            );
        }
    };
    let fmas = |b: &mut Builder, set: &[Reg]| {
        let (a_vals, b_vals) = set.split_at(8);
        for (row, a) in acc.iter().zip(a_vals) {
            for (c, bb) in row.iter().zip(b_vals) {
                ins!(b, "fma.rn.f32 {c}, {a}, {bb}, {c}");
            }
        }
    };
    // Copies tile kt + stages - 1 into the stage tile kt - 1 used: every
    // thread's reads of it came before the barrier that published tile kt.
    let copy_next = |b: &mut Builder, kt: Reg| {
        let next = b.reg(RegKind::B32);
        ins!(b, "add.u32 {next}, {kt}, {}", t.stages - 1);
        copy_below(b, next, wr);
        ins!(b, "cp.async.commit_group");
        advance(b, wr);
    };
    let wait = |b: &mut Builder| {
        ins!(b, "cp.async.wait_group {}", t.stages - 2);
        ins!(b, "bar.sync 0");
        read_stage(b);
    };
    let (kt, top, again) = (b.reg(RegKind::B32), b.label(), b.reg(RegKind::Pred));
    let step = |b: &mut Builder| {
        ins!(b, "add.u32 {kt}, {kt}, 1");
        ins!(b, "setp.lt.u32 {again}, {kt}, {end}");
        ins!(b, "@{again} bra.uni {top}");
    };
    if t.rotated() {
        // Two sets of operands: the reads of `k + 1` go to one while the
        // FMAs of `k` use the other. The set of a tile's last `k` is
        // multiplied at the top of the next iteration: zeros before the
        // first (adding `0 * 0` keeps every sum).
        let sets = [operands(b), operands(b)];
        let last = &sets[(t.bk as usize - 1) % 2];
        wait(b);
        read(b, &sets[0], 0);
        for r in last {
            ins!(b, "mov.f32 {r}, 0f00000000");
        }
        ins!(b, "mov.u32 {kt}, {first}");
        b.place(&top);
        fmas(b, last);
        for kk in 0..t.bk - 1 {
            read(b, &sets[(kk as usize + 1) % 2], kk + 1);
            if kk == t.bk / 2 {
                copy_next(b, kt);
            }
            fmas(b, &sets[kk as usize % 2]);
        }
        // Past the CTA's last tile this reads a stage that holds an
        // earlier tile (inside the buffer), and nothing uses it.
        wait(b);
        read(b, &sets[0], 0);
        step(b);
        fmas(b, last);
    } else {
        ins!(b, "mov.u32 {kt}, {first}");
        b.place(&top);
        wait(b);
        copy_next(b, kt);
        for kk in 0..t.bk {
            let set = operands(b);
            read(b, &set, kk);
            fmas(b, &set);
        }
        step(b);
    }
    ins!(b, "cp.async.wait_all");
    b.comment("epilogue");
    let (om, on) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "add.u32 {om}, {m0}, {tm}");
    ins!(b, "add.u32 {on}, {n0}, {tn}");
    let origin = epilogue::Origin {
        m: om,
        n: on,
        batch,
    };
    // Accumulator (i, j) is row block i / 4, row i % 4 of it; column block
    // j / 4, column j % 4.
    let items: Vec<epilogue::Item> = acc
        .iter()
        .enumerate()
        .flat_map(|(i, row)| {
            let b_blocks = &b_blocks;
            row.iter().enumerate().map(move |(j, reg)| epilogue::Item {
                reg: *reg,
                dm: a_blocks[i / 4] + i as u32 % 4,
                dn: b_blocks[j / 4] + j as u32 % 4,
            })
        })
        .collect();
    let sink = if sp.is_split() {
        b.comment("split-K: the sums to this CTA's plane of the scratch buffer");
        let plane = split::partial_plane(b, cx, kernel, s);
        partials(b, (plane, s), (om, on), (t, &acc));
        epilogue::Sink::Partial(plane)
    } else {
        epilogue::emit(b, cx, s, &items, &origin);
        epilogue::Sink::Kernel
    };
    let min_ctas = t.ctas_per_sm(sp.is_split());
    let main = st.finish(
        bld,
        kernel,
        target,
        s,
        t,
        16,
        Bounds::MinCtas(min_ctas),
        t.shared_bytes(),
    );
    split::finish(main, kernel, target, s, (sp, &sink))
}

/// Stores the thread's sums `acc` of tile `t` (rows and columns as the
/// epilogue's items, from `(m, n)`) as they are to the partial plane at
/// `plane` (u64, element `m N + n`), masked to C: each run of 4 columns as
/// one 16-byte store where `N` keeps runs aligned, else element by element.
fn partials(
    b: &mut Builder,
    (plane, s): (Reg, &Shape),
    (m, n): (Reg, Reg),
    (t, acc): (&Simt, &[Vec<Reg>]),
) {
    let width = if s.n % 4 == 0 { 4 } else { 1 };
    for (i, row) in acc.iter().enumerate() {
        let mi = b.reg(RegKind::B32);
        ins!(
            b,
            "add.u32 {mi}, {m}, {}",
            t.a_blocks()[i / 4] + i as u32 % 4
        );
        for (block, run) in t.b_blocks().iter().zip(row.chunks(4)) {
            for (e, part) in run.chunks(width).enumerate() {
                let nj = b.reg(RegKind::B32);
                ins!(b, "add.u32 {nj}, {n}, {}", block + (e * width) as u32);
                epilogue::partial(b, s, plane, (mi, nj), part);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every output of the CTA tile belongs to exactly one thread, and the
    /// shared reads stay inside the tile rows.
    #[test]
    fn threads_cover_the_cta_tile_once() {
        for t in candidates() {
            let mut seen = vec![0u32; (t.bm() * t.bn()) as usize];
            for tid in 0..t.threads() {
                let (m, n) = (t.thread_m().at(tid), t.thread_n().at(tid));
                for dm in t.a_blocks().iter().flat_map(|d| (0..4).map(move |i| d + i)) {
                    for dn in t.b_blocks().iter().flat_map(|d| (0..4).map(move |j| d + j)) {
                        let (m, n) = (m + dm, n + dn);
                        assert!(m < t.bm() && n < t.bn(), "{t:?} tid {tid}");
                        seen[(m * t.bn() + n) as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|c| *c == 1), "{t:?}");
        }
    }

    /// Every element of both shared tiles of a stage is written by exactly
    /// one copy of one thread (so every read finds its element), inside
    /// the tile, 16-byte copies at 16-byte aligned shared offsets.
    #[test]
    fn copies_cover_each_stage_once() {
        for t in candidates() {
            for (tile_rows, srow) in [(t.bm(), t.a_row()), (t.bn(), t.b_row())] {
                for mode in [Mode::Rows4, Mode::RowFast, Mode::KFast] {
                    let sp = copies(mode, tile_rows, t.bk, t.threads());
                    let width = if mode == Mode::Rows4 { 4 } else { 1 };
                    let mut seen = vec![0u32; (tile_rows * t.bk) as usize];
                    for tid in 0..t.threads() {
                        let (r0, k0) = (sp.row.at(tid), sp.k.at(tid));
                        for &(dr, dk) in &sp.offs {
                            let (r, k) = (r0 + dr, k0 + dk);
                            assert!(r + width <= tile_rows && k < t.bk, "{t:?} {mode:?}");
                            assert_eq!((k * srow + 4 * r) % (4 * width), 0);
                            for e in 0..width {
                                seen[(k * tile_rows + r + e) as usize] += 1;
                            }
                        }
                    }
                    assert!(seen.iter().all(|c| *c == 1), "{t:?} {mode:?}");
                }
            }
            assert!(t.shared_bytes() <= 227 * 1024, "{t:?}");
        }
    }

    /// A warp's 4-byte copies of a k-contiguous operand hit 32 distinct
    /// banks (the padding's purpose) and read 32-byte runs of each row.
    #[test]
    fn transposing_copies_are_conflict_free() {
        for t in candidates() {
            for (tile_rows, srow) in [(t.bm(), t.a_row()), (t.bn(), t.b_row())] {
                let sp = copies(Mode::KFast, tile_rows, t.bk, t.threads());
                for (i, &(dr, dk)) in sp.offs.iter().enumerate() {
                    let banks: std::collections::HashSet<u32> = (0..32)
                        .map(|tid| {
                            let (r, k) = (sp.row.at(tid) + dr, sp.k.at(tid) + dk);
                            (k * srow / 4 + r) % 32
                        })
                        .collect();
                    assert_eq!(banks.len(), 32, "{t:?} copy {i}");
                }
            }
        }
    }
}
