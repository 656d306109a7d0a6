//! The decoupled look-back that chains column tiles ([`super::scan_cols`])
//! along the scanned axis, per column. Tile ids come from the status buffer's counter in *chunk-major* order
//! (`index * blocks + block`), so a tile's predecessor along the axis took
//! its id `blocks` tiles earlier (with many column blocks it has long
//! finished). Warp 0 of a tile computes the tile's aggregate per column
//! and publishes it (the first tile: as its inclusive prefix). Then every
//! warp looks back: the window is the `warps` predecessors before the
//! tile, warp `w` reading the `w + 1`-th latest (each lane its columns'
//! state), all into shared memory; warp 0 combines, per lane, the window
//! from the latest back to the first inclusive prefix, and while a lane
//! has found none the CTA moves the window back. Warp 0 then publishes the
//! tile's inclusive prefix and hands the exclusive one to the CTA. Fewer
//! column blocks make each tile's predecessor a more recent one, with only
//! its aggregate out: the window bounds that walk to one round trip per
//! `warps` predecessors.
//!
//! Status buffer ([`status_words`] `I64` words): word 0 is the tile
//! counter; then a `u32` flag per tile and lane of warp 0 (0 nothing yet,
//! [`AGGREGATE`], [`INCLUSIVE`]), [`FLAG_WORDS`] words a tile; only these
//! are zeroed before the launch. Then a record per tile: the aggregate's
//! block, then the inclusive prefix's, each holding per state register
//! (slot) an array over the tile's columns (4 or 8 bytes an entry).
//! Every lane of warp 0 owns its `lanes` columns: it writes their entries
//! with plain stores, then its own flag with `st.release.gpu`; a reader's
//! lane loads the same lane's flag with `ld.acquire.gpu` and only then the
//! entries of the state that flag announced, so each lane is a chain of
//! its own and no ordering across threads is needed (the PTX memory
//! model's release/acquire between two threads: lane `x` of every warp
//! reads lane `x`'s flags, written by lane `x` of warp 0). Lanes may stop
//! at different predecessors; the look-back goes on while any lane has
//! found no inclusive prefix yet, and the axis's first tile only ever
//! publishes one, so it ends. A tile waits only for tiles with smaller
//! ids, which belong to CTAs that already took them and run.

use super::builder::{ins, Builder, Reg, RegKind};
use super::eval::Cx;
use super::launch::{ColTiling, COL_THREADS};
use super::lookback::{AGGREGATE, BACKOFF_NS, INCLUSIVE};
use super::scan_state::{scan_insts, select, slot_bytes, ScanInst, State};
use crate::ir::Kernel;

/// `I64` words of a tile's flags (a `u32` per lane of warp 0).
const FLAG_WORDS: usize = COL_THREADS as usize / 2;

/// Bytes of one tile's record: the aggregate's and the inclusive
/// prefix's entries, per state register of `sizes` bytes, for `width`
/// columns.
fn record_bytes(width: usize, sizes: &[u32]) -> usize {
    2 * width * sizes.iter().sum::<u32>() as usize
}

/// `I64` words of the status buffer of column tiles `t` of kernel `k`
/// when they chain (several tiles along the axis): (the counter and the
/// flags, which must be zero at the launch; the whole buffer).
pub fn status_words(k: &Kernel, t: &ColTiling) -> (usize, usize) {
    let n = t.blocks as usize * t.tiles as usize;
    let flags = n.saturating_mul(FLAG_WORDS).saturating_add(1);
    let record = record_bytes(t.width(), &slot_bytes(&scan_insts(k))) / 8;
    (flags, flags.saturating_add(n.saturating_mul(record)))
}

/// Moves `src` into `dst`'s registers.
fn assign(b: &mut Builder, dst: State, src: State) {
    for (d, s) in dst.regs().iter().zip(src.regs()) {
        ins!(b, "mov.{} {d}, {s}", d.kind.bit_ty());
    }
}

/// The look-back of a column tile along its chain (warp 0, a lane per
/// `lanes` columns).
pub(super) struct Chain<'a> {
    pub(super) cx: &'a Cx<'a>,
    pub(super) scans: &'a [ScanInst],
    pub(super) first_slot: &'a [usize],
    pub(super) sizes: &'a [u32],
    pub(super) tiling: &'a ColTiling,
    pub(super) lanes: usize,
    pub(super) warps: u32,
}

/// Shared memory of the look-back window: each warp's predecessor's
/// states (8-byte entries [warp][slot][column], written at `states +
/// states_off` by a thread, whose `warp_bytes` area starts there; read
/// from `states_read + states_off + warp * warp_bytes`, which points at
/// the thread's columns of warp 0's area) and whether it was an inclusive
/// prefix (`u32` [warp][lane] at `flags + flags_off`).
pub(super) struct Window {
    pub(super) states: Reg,
    pub(super) states_read: Reg,
    pub(super) flags: Reg,
    pub(super) states_off: u32,
    pub(super) flags_off: u32,
    pub(super) warp_bytes: u32,
}

impl Chain<'_> {
    /// Byte offsets, from a record block's address plus the lane's
    /// column offset for 4-byte entries, of scan `s`'s registers for
    /// column `l` of the lane.
    fn offs(&self, s: usize, l: usize) -> Vec<usize> {
        let width = self.tiling.width();
        let si = &self.scans[s];
        (0..1 + si.op.is_index() as usize)
            .map(|j| {
                let slot = self.first_slot[s] + j;
                let start: u32 = self.sizes[..slot].iter().sum();
                width * start as usize + l * self.sizes[slot] as usize
            })
            .collect()
    }

    /// The address of tile `id`'s record, and of the flag of `lane`.
    fn addresses(&self, b: &mut Builder, id: Reg, lane: Reg) -> (Reg, Reg) {
        let status = *self
            .cx
            .outputs
            .last()
            .expect("chained column tiles have a status output");
        let (flags, _) = status_words(self.cx.k, self.tiling);
        let rec_bytes = record_bytes(self.tiling.width(), self.sizes);
        let rec = b.reg(RegKind::B64);
        ins!(b, "mul.wide.u32 {rec}, {id}, {rec_bytes}");
        ins!(b, "add.s64 {rec}, {rec}, {status}");
        ins!(b, "add.s64 {rec}, {rec}, {}", flags * 8);
        // Past the counter, `FLAG_WORDS` words a tile, 4 bytes a lane
        // (64-bit: ids go up to 2^31).
        let (flag, at) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
        ins!(b, "mul.wide.u32 {flag}, {id}, {}", FLAG_WORDS * 8);
        ins!(b, "mul.wide.u32 {at}, {lane}, 4");
        ins!(b, "add.s64 {flag}, {flag}, {at}");
        ins!(b, "add.s64 {flag}, {flag}, {status}");
        ins!(b, "add.s64 {flag}, {flag}, 8");
        (rec, flag)
    }

    /// Adds the lane's column offsets to record address `rec`: the
    /// returned registers address its 4-byte and its 8-byte entries.
    fn columns(&self, b: &mut Builder, rec: Reg, lane: Reg) -> [Reg; 2] {
        [4u32, 8].map(|size| {
            let a = b.reg(RegKind::B64);
            ins!(
                b,
                "mul.wide.u32 {a}, {lane}, {}",
                size as usize * self.lanes
            );
            ins!(b, "add.s64 {a}, {a}, {rec}");
            a
        })
    }

    /// Stores the lane's `states` (per scan and column) into the block at
    /// `rec` (the tile's record, plus the inclusive block's offset).
    fn store(&self, b: &mut Builder, rec: Reg, lane: Reg, states: &[Vec<State>]) {
        let at = self.columns(b, rec, lane);
        for (s, per_col) in states.iter().enumerate() {
            for (l, st) in per_col.iter().enumerate() {
                for (r, off) in st.regs().iter().zip(self.offs(s, l)) {
                    let a = at[(r.kind.bit_ty() == "b64") as usize];
                    ins!(b, "st.global.{} [{a}+{off}], {r}", r.kind.bit_ty());
                }
            }
        }
    }

    /// Warp 0: publishes the tile's `aggregate` (per scan and column):
    /// the first tile of the axis as its inclusive prefix.
    pub(super) fn publish(
        &self,
        b: &mut Builder,
        id: Reg,
        index: Reg,
        lane: Reg,
        aggregate: &[Vec<State>],
    ) {
        let inc_off = record_bytes(self.tiling.width(), self.sizes) / 2;
        let (rec, flag) = self.addresses(b, id, lane);
        let first = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {first}, {index}, 0");
        let (at, skip) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
        ins!(b, "selp.b64 {skip}, {inc_off}, 0, {first}");
        ins!(b, "add.s64 {at}, {rec}, {skip}");
        self.store(b, at, lane, aggregate);
        let state = b.reg(RegKind::B32);
        ins!(b, "selp.u32 {state}, {INCLUSIVE}, {AGGREGATE}, {first}");
        ins!(b, "st.release.gpu.global.u32 [{flag}], {state}");
    }

    /// Warp 0 of a tile after the axis's first: publishes its inclusive
    /// prefix, `prefix` (the exclusive one) combined with `aggregate`.
    pub(super) fn publish_inclusive(
        &self,
        b: &mut Builder,
        id: Reg,
        index: Reg,
        lane: Reg,
        prefix: &[Vec<State>],
        aggregate: &[Vec<State>],
    ) {
        let end = b.label();
        let first = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {first}, {index}, 0");
        ins!(b, "@{first} bra {end}");
        let inclusive: Vec<Vec<State>> = self
            .scans
            .iter()
            .enumerate()
            .map(|(s, si)| {
                (0..self.lanes)
                    .map(|l| si.combine(b, prefix[s][l], aggregate[s][l]))
                    .collect()
            })
            .collect();
        let inc_off = record_bytes(self.tiling.width(), self.sizes) / 2;
        let (rec, flag) = self.addresses(b, id, lane);
        let inc = b.reg(RegKind::B64);
        ins!(b, "add.s64 {inc}, {rec}, {inc_off}");
        self.store(b, inc, lane, &inclusive);
        let state = b.mov(RegKind::B32, "u32", INCLUSIVE);
        ins!(b, "st.release.gpu.global.u32 [{flag}], {state}");
        b.place(&end);
    }

    /// Every warp of a tile after the axis's first: looks back over
    /// windows of `warps` predecessors, warp `w` reading the `w + 1`-th
    /// latest of the window (lane by lane: each lane's flag, then the
    /// state it announced); warp 0 combines, per lane, the window's states
    /// from the latest back to the first inclusive prefix into `prefix`.
    /// Every warp reads the same inclusive marks, so all know alike which
    /// lanes are done and loop together (a `bar.sync` each way); a lane
    /// is done once it combined an inclusive prefix, which the axis's
    /// first tile always has. Predecessors before the axis's start count
    /// as inclusive identities.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn look_back(
        &self,
        b: &mut Builder,
        win: &Window,
        index: Reg,
        block: Reg,
        lane: Reg,
        warp: Reg,
        prefix: &[Vec<State>],
    ) {
        let end = b.label();
        let first = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {first}, {index}, 0");
        ins!(b, "@{first} bra {end}");
        let inc_off = record_bytes(self.tiling.width(), self.sizes) / 2;
        // `upto`: the window is the `warps` predecessors before it.
        let upto = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {upto}, {index}");
        let done = b.reg(RegKind::Pred);
        ins!(b, "setp.ne.u32 {done}, 0, 0");
        let top = b.label();
        b.place(&top);
        let j = b.reg(RegKind::B32);
        ins!(b, "sub.s32 {j}, {upto}, {warp}");
        ins!(b, "sub.s32 {j}, {j}, 1");
        let before_axis = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.s32 {before_axis}, {j}, 0");
        let live = b.reg(RegKind::Pred);
        ins!(b, "not.pred {live}, {done}");
        let read = b.reg(RegKind::Pred);
        ins!(b, "not.pred {read}, {before_axis}");
        ins!(b, "and.pred {read}, {read}, {live}");
        let jc = b.reg(RegKind::B32);
        ins!(b, "max.s32 {jc}, {j}, 0");
        let pid = b.reg(RegKind::B32);
        ins!(b, "mad.lo.u32 {pid}, {jc}, {}, {block}", self.tiling.blocks);
        let (prec, pflag) = self.addresses(b, pid, lane);
        // Wait until the lane's predecessor has published something.
        let (spin, seen) = (b.label(), b.label());
        let f = b.reg(RegKind::B32);
        b.place(&spin);
        ins!(b, "mov.u32 {f}, {INCLUSIVE}");
        ins!(b, "@{read} ld.acquire.gpu.global.u32 {f}, [{pflag}]");
        let (ready, all) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
        ins!(b, "setp.ne.u32 {ready}, {f}, 0");
        ins!(b, "vote.sync.all.pred {all}, {ready}, -1");
        ins!(b, "@{all} bra {seen}");
        // Back off while the predecessor has published nothing.
        ins!(b, "nanosleep.u32 {BACKOFF_NS}");
        ins!(b, "bra {spin}");
        b.place(&seen);
        // The announced state (the identity before the axis), into the
        // window, and whether it is an inclusive prefix.
        let inclusive = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {inclusive}, {f}, {INCLUSIVE}");
        let block_off = b.reg(RegKind::B64);
        ins!(b, "selp.b64 {block_off}, {inc_off}, 0, {inclusive}");
        ins!(b, "add.s64 {prec}, {prec}, {block_off}");
        let at = self.columns(b, prec, lane);
        for (s, si) in self.scans.iter().enumerate() {
            for l in 0..self.lanes {
                let regs = si.identity(b).regs();
                for (j, (r, off)) in regs.iter().zip(self.offs(s, l)).enumerate() {
                    let bt = r.kind.bit_ty();
                    let a = at[(bt == "b64") as usize];
                    ins!(b, "@{read} ld.global.{bt} {r}, [{a}+{off}]");
                    let entry = (self.first_slot[s] + j) * self.tiling.width() * 8 + l * 8;
                    ins!(
                        b,
                        "st.shared.{bt} [{}+{}], {r}",
                        win.states,
                        win.states_off as usize + entry
                    );
                }
            }
        }
        let mark = b.reg(RegKind::B32);
        ins!(b, "selp.u32 {mark}, 1, 0, {inclusive}");
        let mark_at = b.reg(RegKind::B32);
        ins!(b, "mad.lo.u32 {mark_at}, {warp}, {COL_THREADS}, {lane}");
        ins!(b, "mad.lo.u32 {mark_at}, {mark_at}, 4, {}", win.flags);
        ins!(b, "st.shared.u32 [{mark_at}+{}], {mark}", win.flags_off);
        ins!(b, "bar.sync 0");
        // The lane's marks of the window, latest first; warp 0 combines the
        // states up to the first inclusive one.
        let lane_marks = b.reg(RegKind::B32);
        ins!(b, "mad.lo.u32 {lane_marks}, {lane}, 4, {}", win.flags);
        let w0 = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {w0}, {warp}, 0");
        let take = b.reg(RegKind::Pred);
        ins!(b, "and.pred {take}, {live}, {w0}");
        for w in 0..self.warps {
            let m = b.reg(RegKind::B32);
            let off = win.flags_off + w * COL_THREADS * 4;
            ins!(b, "ld.shared.u32 {m}, [{lane_marks}+{off}]");
            for (s, si) in self.scans.iter().enumerate() {
                for (l, acc) in prefix[s].iter().enumerate() {
                    let regs: Vec<Reg> = si
                        .identity(b)
                        .regs()
                        .iter()
                        .enumerate()
                        .map(|(j, r)| {
                            let bt = r.kind.bit_ty();
                            let x = b.reg(r.kind);
                            let entry = (self.first_slot[s] + j) * self.tiling.width() * 8 + l * 8;
                            let off = (win.states_off + w * win.warp_bytes) as usize + entry;
                            ins!(b, "ld.shared.{bt} {x}, [{}+{off}]", win.states_read);
                            x
                        })
                        .collect();
                    // The earlier predecessor precedes what was combined.
                    let next = si.combine(b, State::from_regs(&regs), *acc);
                    let next = select(b, take, next, *acc);
                    assign(b, *acc, next);
                }
            }
            let stop = b.reg(RegKind::Pred);
            ins!(b, "setp.ne.u32 {stop}, {m}, 0");
            ins!(b, "or.pred {done}, {done}, {stop}");
            ins!(b, "not.pred {take}, {done}");
            ins!(b, "and.pred {take}, {take}, {w0}");
        }
        ins!(b, "sub.s32 {upto}, {upto}, {}", self.warps);
        // The window is read before the next one is written.
        ins!(b, "bar.sync 0");
        ins!(b, "not.pred {live}, {done}");
        let more = b.reg(RegKind::Pred);
        ins!(b, "vote.sync.any.pred {more}, {live}, -1");
        ins!(b, "@{more} bra {top}");
        b.place(&end);
    }
}
