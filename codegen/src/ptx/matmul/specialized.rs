//! The warp-specialised warpgroup kernel (issue 15; the default for tiles
//! of one warpgroup, [`super::config::scheduled`]; every warpgroup tile
//! under `SMELT_MATMUL_WS=1`, or a tile name ending in `ws`; with
//! `SMELT_MATMUL_PERSIST=1` too, or `wsp`, persistent): where the copy
//! engine maps both operands (`tma.rs`) and `k` is not split, one extra
//! **producer** warpgroup copies every k-tile while the tile's warpgroups
//! (the **consumers**) only multiply and run the epilogue.
//!
//! # Roles
//! Threads `0 .. C` (`C` = the tile's threads) are the consumers, exactly
//! as in `wgmma.rs` (same accumulators, same epilogue mapping); threads
//! `C .. C + 128` the producer, of which thread `C` alone issues. After
//! the barriers are initialised and one CTA-wide `bar.sync`, the roles
//! split on warpgroup boundaries and never meet again. Both loop over the
//! CTA's output tiles in the same order (`%ctaid.x`, then every
//! `%nctaid.x`-th, in the grouped order; one tile unless persistent) and
//! count the CTA's k-tiles `it` over all of them: k-tile `it` lives in
//! stage `it % stages`.
//! - The producer runs `setmaxnreg.dec` to [`PRODUCER_REGS`]; thread `C`
//!   waits for k-tile `it`'s stage to be empty, announces its bytes on the
//!   stage's "full" barrier (`expect_tx`) and starts its boxes; the other
//!   127 threads exit at once.
//! - The consumers run `setmaxnreg.inc` (registers the producer gave back)
//!   and per k-tile wait for its "full" phase, issue their MMAs, and after
//!   `wgmma.wait_group 1` (the MMAs of k-tile `it - 1` are complete) lane
//!   0 of every consumer warp arrives on the "empty" barrier of `it - 1`
//!   (but at a tile's first k-tile: the previous tile's last is released
//!   already); after a tile's last k-tile, `wait_group 0`, its release, and
//!   the epilogue, synchronised on named barrier 1 over the `C` consumers.
//!
//! # Invariants
//! - "full" barrier of stage `s` (count 1: the producer's `expect_tx`)
//!   completes its phase `n` when k-tile `s + n stages` has landed:
//!   consumers wait on parity `(it / stages) % 2`, so nobody reads a stage
//!   before its copies completed (the copy engine's `complete_tx` makes
//!   them visible to the threads that see the phase). The producer re-arms
//!   it for `it + stages` only after every consumer warp waited on `it`
//!   (below), so no phase is missed.
//! - "empty" barrier of stage `s` (count: the consumer warps) completes
//!   phase `n` when every consumer warp has retired its MMAs of k-tile
//!   `s + n stages`. Before refilling with k-tile `it`, the producer waits on
//!   parity `(it / stages + 1) % 2`: the release of `it - stages`, and for
//!   `it < stages` the phase before the first, which a fresh barrier
//!   counts as complete (CUTLASS's producer start state). So no copy
//!   overwrites a stage an MMA may still read, the stage ring never needs
//!   a CTA-wide barrier, and the producer runs up to `stages` k-tiles
//!   ahead, across tiles too.
//! - No copy is in flight at exit: consumers wait on every k-tile's
//!   "full" phase before they finish, and the producer thread itself waits
//!   for the release of the last `stages` k-tiles before it exits (as
//!   CUTLASS's producer tail does).
//! - The epilogue's staging area: with one tile per CTA it overlaps the
//!   stages, as in `wgmma.rs`: consumers enter it after their last "full"
//!   wait and `wait_group 0`, when the producer has no copy left to start,
//!   and named barrier 1 orders every consumer's last MMA before any
//!   staging write. Persistent, the producer fills the next tile's stages
//!   meanwhile, so it lies past the stages (in column slices where the
//!   whole tile does not fit, see [`layout`]), and the next epilogue's
//!   first barrier orders this one's reads before its writes.
//! - Registers ([`Budget`]): `.maxnreg` makes `threads x launch` fit the
//!   64K register file (per CTA of the SM's share), and what the producer
//!   gives back covers what the consumers take, so `setmaxnreg.inc`
//!   cannot wait forever. ptxas compiles both roles within the launch
//!   budget (at 4096^3 f16 the producer uses 10 registers, the consumers
//!   of 128x256 155, 128x128 91, 64x128 92; `USETMAXREG` in the SASS), so
//!   the launch budget must hold the consumers: the registers the
//!   producer gives back are not ones ptxas lets the consumers use.
//!
//! The persistent grid is at most a wave (the CTAs per SM the registers
//! and shared memory allow), shared by the batches on grid `z`. Split-K
//! keeps `wgmma.rs`'s pipeline (its partial sinks and cluster barriers
//! assume every thread in the epilogue).

use super::config::{Schedule, Tile, MAX_SHARED};
use super::epilogue;
use super::pipeline::stage_address;
use super::shape::Shape;
use super::split::Split;
use super::start::{batch_offset, lane_and_warp, start, tile_origin, Bounds, Start};
use super::tma::{self, Plan};
use super::wgmma::{self, Mma};
use crate::ir::Kernel;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::eval::Cx;
use crate::ptx::module::PtxKernel;
use crate::ptx::target::{Target, REGISTERS_PER_SM, SHARED_PER_SM_90};

/// Registers of a producer thread after `setmaxnreg.dec`, the least
/// `setmaxnreg` allows: its loop holds the maps' addresses, coordinates
/// and a few counters (10 registers, ptxas 13.0 at 4096^3).
pub const PRODUCER_REGS: u32 = 24;

/// Registers a consumer thread needs besides its `bn / 2` accumulators
/// (descriptors, counters, the epilogue's addresses): at most 28 over
/// them in f16 kernels at 4096^3 (ptxas 13.0), so two CTAs to an SM are
/// planned only where the launch budget leaves this much more. (ptxas
/// compiles every instruction within the launch budget, `setmaxnreg.inc`
/// regions too: with `.maxnreg 80` and `setmaxnreg.inc 104`, 128x128
/// consumers needing 90 failed with "Insufficient registers (80)".)
const CONSUMER_SPARE: u32 = 40;

/// Threads of the producer warpgroup.
const PRODUCER_THREADS: u32 = 128;

/// Per-thread registers of a warp-specialised CTA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// CTAs per SM the registers (and shared memory) leave room for.
    pub ctas: u32,
    /// At launch (`.maxnreg`), every thread.
    pub launch: u32,
    /// A producer thread after `setmaxnreg.dec`.
    pub producer: u32,
    /// A consumer thread after `setmaxnreg.inc`.
    pub consumer: u32,
}

/// The budget of tile `t` whose CTA asks for `shared` dynamic bytes: for
/// two CTAs per SM where two fit in shared memory and the launch budget
/// leaves [`CONSUMER_SPARE`] registers over the accumulators, else one. The
/// launch budget is the register file's share per thread (a multiple of
/// 8, at most 248); the producer keeps [`PRODUCER_REGS`] and the consumers
/// split the rest of the CTA's pool (multiples of 8, at most 256): at one
/// CTA, 168 / 24 / 240 for two consumer warpgroups (248 / 24 / 256 for
/// one); at two, 80 / 24 / 104 for two (128x64 only) and 128 / 24 / 232
/// for one.
pub fn budget(t: &Tile, shared: u32) -> Budget {
    let consumers = t.threads();
    let threads = consumers + PRODUCER_THREADS;
    let at = |ctas: u32| {
        let launch = (REGISTERS_PER_SM / (ctas * threads) / 8 * 8).min(248);
        let freed = (launch - PRODUCER_REGS) * PRODUCER_THREADS;
        Budget {
            ctas,
            launch,
            producer: PRODUCER_REGS,
            consumer: ((launch + freed / consumers) / 8 * 8).min(256),
        }
    };
    let two = at(2);
    let fits = 2 * (shared + 1024) <= SHARED_PER_SM_90 && two.launch >= t.bn() / 2 + CONSUMER_SPARE;
    if fits {
        two
    } else {
        at(1)
    }
}

/// The copy engine's plan when tile `t` of `s` is warp-specialised: a
/// specialised schedule, `k` unsplit, and both operands mapped.
pub fn plan(kernel: &Kernel, s: &Shape, t: &Tile, sp: Split) -> Option<Plan> {
    if t.schedule == Schedule::Plain || sp.is_split() {
        return None;
    }
    tma::plan(kernel, s, t)
}

/// Where a CTA of tile `t` stages its epilogue: the byte offset in
/// dynamic shared memory and the columns staged at once
/// ([`epilogue::Staging::cols`]), and the barriers' offset. Over the
/// stages as `wgmma.rs` does, but for [`Schedule::Persistent`]: past them,
/// since the producer fills the next tile's stages during the epilogue,
/// in the widest slices of `bn / 2^i` columns (multiples of 8, whole runs
/// for every thread) with which everything fits in [`MAX_SHARED`]; `None`
/// where none does.
fn layout(cx: &Cx, s: &Shape, t: &Tile) -> Option<(u32, u32, u32)> {
    let bars = |end: u32| end.next_multiple_of(8);
    if t.schedule != Schedule::Persistent {
        return Some((0, t.bn(), Plan::barriers(t).0));
    }
    let stages = t.shared_bytes();
    (0..4).map(|i| t.bn() >> i).find_map(|cols| {
        let runs = cols / epilogue::run_lanes(cx, s, cols);
        let whole = cols % 8 == 0 && (t.bm() * runs).is_multiple_of(t.threads());
        let at = bars(stages + epilogue::staging_bytes(t.bm(), cols));
        (whole && at + 16 * t.stages <= MAX_SHARED).then_some((stages, cols, at))
    })
}

/// Lowers `kernel` (recognised as `s`) with warpgroup tile `t`, its
/// operands copied as `plan` maps them (from [`plan`]); `None` for a
/// persistent tile whose stages and epilogue do not fit together.
pub fn emit(
    kernel: &Kernel,
    target: &Target,
    s: &Shape,
    t: &Tile,
    plan: &Plan,
) -> Option<PtxKernel> {
    let (mut bld, st) = start(kernel, target, s, t);
    let (staging_at, cols, bars_at) = layout(&st.cx, s, t)?;
    let b = &mut bld;
    let tid = st.tid;
    let consumers = t.threads();
    let shared = bars_at + 16 * t.stages;
    let budget = budget(t, shared);
    let offs = [&s.a, &s.b].map(|op| batch_offset(b, op, &st.batch));
    let copies = tma::Copies::new(b, plan, &st, (s, t), offs, (consumers, bars_at));
    let kt_end = (s.k as u64).div_ceil(u64::from(t.bk(s.elem.bytes()))) as u32;
    let tiles = (s.m as u32).div_ceil(t.bm()) * (s.n as u32).div_ceil(t.bn());
    let empties = b.reg(RegKind::B32);
    ins!(b, "add.u32 {empties}, {}, {}", copies.bars(), 8 * t.stages);
    // Lane 0 of every consumer warp releases a stage.
    copies.init(b, Some(consumers / 32));
    ins!(b, "bar.sync 0");
    let (producer, consume) = (b.reg(RegKind::Pred), b.label());
    ins!(b, "setp.ge.u32 {producer}, {tid}, {consumers}");
    ins!(b, "@!{producer} bra.uni {consume}");

    b.comment("producer warpgroup: thread C copies every k-tile once its stage is empty");
    ins!(b, "setmaxnreg.dec.sync.aligned.u32 {}", budget.producer);
    let (issuer, done) = (b.reg(RegKind::Pred), b.label());
    ins!(b, "setp.eq.u32 {issuer}, {tid}, {consumers}");
    ins!(b, "@!{issuer} bra {done}");
    let it = b.mov(RegKind::B32, "u32", 0);
    let tile_loop = TileLoop::new(b, &st, s, t, tiles);
    let kt = b.mov(RegKind::B32, "u32", 0);
    let top = b.label();
    b.place(&top);
    tma::wait_phase(b, empties, t.stages, it, true);
    let stage = stage_address(b, it, t, st.smem_base);
    copies.start(b, (it, kt), stage, None);
    next_k_tile(b, (it, kt), kt_end, &top);
    tile_loop.next(b);
    b.comment("the producer's tail: the release of the last stages k-tiles");
    let (tail, end) = (b.label(), b.reg(RegKind::B32));
    ins!(b, "add.u32 {end}, {it}, {}", t.stages);
    b.place(&tail);
    tma::wait_phase(b, empties, t.stages, it, true);
    let again = b.reg(RegKind::Pred);
    ins!(b, "add.u32 {it}, {it}, 1");
    ins!(b, "setp.lt.u32 {again}, {it}, {end}");
    ins!(b, "@{again} bra {tail}");
    b.place(&done);
    ins!(b, "ret");

    b.place(&consume);
    b.comment("consumer warpgroups: wait for k-tile kt, multiply it, release kt - 1");
    ins!(b, "setmaxnreg.inc.sync.aligned.u32 {}", budget.consumer);
    let (lane, warp) = lane_and_warp(b, tid);
    let mma = Mma::new(b, s, t, plan.layouts(), tid);
    let lead = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.u32 {lead}, {lane}, 0");
    let (items, local) = mma.items(b, lane, warp);
    let staging_base = b.reg(RegKind::B32);
    ins!(b, "add.u32 {staging_base}, {}, {staging_at}", st.smem_base);
    let it = b.mov(RegKind::B32, "u32", 0);
    let tile_loop = TileLoop::new(b, &st, s, t, tiles);
    mma.zero(b);
    let kt = b.mov(RegKind::B32, "u32", 0);
    let top = b.label();
    b.place(&top);
    copies.wait(b, it);
    let stage = stage_address(b, it, t, st.smem_base);
    mma.issue(b, stage);
    ins!(b, "wgmma.wait_group.sync.aligned 1");
    let (first, release) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
    ins!(b, "setp.ne.u32 {first}, {kt}, 0");
    ins!(b, "and.pred {release}, {first}, {lead}");
    release_previous(b, empties, t.stages, it, release);
    next_k_tile(b, (it, kt), kt_end, &top);
    ins!(b, "wgmma.wait_group.sync.aligned 0");
    release_previous(b, empties, t.stages, it, lead);
    b.comment("epilogue (consumers, named barrier 1)");
    let staging = epilogue::Staging {
        smem: staging_base,
        cols,
        named_barrier: true,
        ..st.staging(t, local)
    };
    epilogue::staged(
        b,
        &st.cx,
        s,
        &items,
        &staging,
        &st.batch,
        &epilogue::Sink::Kernel,
    );
    tile_loop.next(b);
    let bounds = Bounds::Registers {
        threads: consumers + PRODUCER_THREADS,
        regs: budget.launch,
    };
    let maps = plan.maps.clone();
    let mut k = wgmma::finish(st, bld, (kernel, target), (s, t), maps, bounds, shared);
    if t.schedule == Schedule::Persistent {
        // At most a wave, shared among the batches.
        let l = &mut k.launches[0];
        let wave = (target.num_sms * budget.ctas / l.grid.2.max(1)).max(1);
        l.grid.0 = tiles.min(wave);
    }
    Some(k)
}

/// The loop over a CTA's output tiles: `%ctaid.x`, then every
/// `%nctaid.x`-th (one tile unless the grid is persistent), each setting
/// the tile's origin (`Start::m0`, `n0`) in place.
struct TileLoop {
    tile: Reg,
    top: String,
    tiles: u32,
}

impl TileLoop {
    /// Starts the loop over `tiles` tiles of `t` (its first iteration's
    /// origin set).
    fn new(b: &mut Builder, st: &Start, s: &Shape, t: &Tile, tiles: u32) -> TileLoop {
        let tile = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {tile}, %ctaid.x");
        let top = b.label();
        b.place(&top);
        let (m0, n0) = tile_origin(b, s, t, tile);
        ins!(b, "mov.u32 {}, {m0}", st.m0);
        ins!(b, "mov.u32 {}, {n0}", st.n0);
        TileLoop { tile, top, tiles }
    }

    /// Ends an iteration: the next tile of the CTA, if any.
    fn next(&self, b: &mut Builder) {
        let (step, again) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
        ins!(b, "mov.u32 {step}, %nctaid.x");
        ins!(b, "add.u32 {}, {}, {step}", self.tile, self.tile);
        ins!(b, "setp.lt.u32 {again}, {}, {}", self.tile, self.tiles);
        ins!(b, "@{again} bra.uni {}", self.top);
    }
}

/// Advances the CTA's k-tile count `it` (the stage ring's, across tiles)
/// and the tile's `kt`, back to `top` while `kt < kt_end`; resets `kt`
/// after the last.
fn next_k_tile(b: &mut Builder, (it, kt): (Reg, Reg), kt_end: u32, top: &str) {
    let again = b.reg(RegKind::Pred);
    ins!(b, "add.u32 {it}, {it}, 1");
    ins!(b, "add.u32 {kt}, {kt}, 1");
    ins!(b, "setp.lt.u32 {again}, {kt}, {kt_end}");
    ins!(b, "@{again} bra.uni {top}");
    ins!(b, "mov.u32 {kt}, 0");
}

/// Where `go` holds, arrives on the "empty" barrier (of those at
/// `empties`) of k-tile `kt - 1`, whose MMAs this warp has retired.
fn release_previous(b: &mut Builder, empties: Reg, stages: u32, kt: Reg, go: Reg) {
    let prev = b.reg(RegKind::B32);
    ins!(b, "add.u32 {prev}, {kt}, {}", stages - 1);
    let bar = tma::barrier(b, empties, stages, prev);
    ins!(b, "@{go} mbarrier.arrive.shared::cta.b64 _, [{bar}]");
}
