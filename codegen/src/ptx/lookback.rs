//! The single-pass scan with decoupled look-back (Merrill and Garland,
//! "Single-pass Parallel Prefix Scan with Decoupled Look-back", 2016) for
//! few long rows: each row is cut into tiles of a few CTA chunks, a CTA
//! per tile, so one row of 2^24 elements is spread over the whole GPU and read
//! and written once.
//!
//! The kernel's last output is the status buffer ([`super::scan::status_len`]
//! words of 8 bytes, zeroed by the runtime before every launch): word 0 is
//! the tile counter, then tile `row * tiles + i` has a record of
//! [`record_words`] words: a flag (0 nothing yet, [`AGGREGATE`],
//! [`INCLUSIVE`]), the tile's aggregate (every scan's state: a value, and a
//! position for index ops, one 8-byte slot per register), then its
//! inclusive prefix (the same slots). A state of one 32-bit register (an
//! `f32` sum, product, `logcumsumexp`, max or min; a 32-bit integer max or
//! min) is *packed* instead: one word, the flag in its low half and the
//! state it announces (the aggregate, later the inclusive prefix) in its
//! high half, written and read with single 64-bit strong accesses, so a
//! look-back window costs one round trip to L2 instead of two dependent
//! ones (the flags, then the states). A CTA
//! 1. takes the next tile id from the counter (`atom.add`), so tiles start
//!    in id order: every tile a CTA waits for belongs to a CTA that already
//!    runs, and look-back cannot wait on a CTA that is not resident;
//! 2. scans its tile (the row walk's chunk scan, `ptx/scan.rs`, on all the
//!    tile's chunks at once: their loads are in flight together), which
//!    gives the tile's aggregate;
//! 3. publishes the aggregate (a row's first tile: its inclusive prefix);
//! 4. with its first warp, looks back over the 32 preceding tiles at a
//!    time: it waits until each has published at least its aggregate
//!    (each tile publishes it without waiting on anyone, so this ends),
//!    then combines, in row order, the inclusive prefix of the latest tile
//!    that has one and the aggregates after it; without one in the window
//!    it combines all 32 aggregates and moves the window back (the row's
//!    first tile always has its inclusive prefix, so this ends too);
//! 5. publishes its inclusive prefix and scans its elements from the
//!    exclusive prefix.
//!
//! Memory ordering (PTX memory model): a packed word is written with
//! `st.relaxed.gpu.b64` and read with `ld.relaxed.gpu.b64`: aligned
//! 64-bit strong accesses are single-copy atomic (`cuda::atomic<uint64_t>`
//! maps its loads and stores to them), and nothing else is read on the
//! flag's word. Otherwise a record's values are written once
//! by the CTA's thread 0 with ordinary stores, then its flag with
//! `st.release.gpu`; readers load the flag with `ld.acquire.gpu` and only
//! then the slots of the state the flag announced. The release and the
//! acquire that observes it synchronise, so the value stores happen before
//! the value loads, which must see them (the acquire also keeps stale L1
//! lines from being read). The aggregate and the inclusive prefix have
//! slots of their own and each is written once, so a reader that saw
//! [`AGGREGATE`] and reads the aggregate while the owner publishes its
//! inclusive prefix still reads the aggregate. The counter's `atom.add`
//! needs no ordering: it only hands out tile ids.

use super::builder::{ins, Builder, Reg, RegKind};
use super::eval::Cx;
use super::scan_state::{select, shuffle, warp_scan, ScanInst, State};

/// Flag of a tile whose aggregate is published.
pub(super) const AGGREGATE: u32 = 1;
/// Flag of a tile whose inclusive prefix is published.
pub(super) const INCLUSIVE: u32 = 2;

/// Nanoseconds a look-back warp sleeps before it reads again the flags of
/// predecessors that had published nothing (Merrill and Garland's
/// back-off; short against a tile's loads, about a microsecond).
pub(super) const BACKOFF_NS: u32 = 100;

/// Whether the scans' states (of registers of `sizes` bytes) fit a packed
/// record: one 32-bit register.
pub fn packed(sizes: &[u32]) -> bool {
    sizes == [4]
}

/// 8-byte words of one tile's record for state registers of `sizes`
/// bytes: a packed word (the flag and the state), or the flag, then the
/// aggregate's and the inclusive prefix's state slots.
pub fn record_words(sizes: &[u32]) -> usize {
    if packed(sizes) {
        1
    } else {
        1 + 2 * sizes.len()
    }
}

/// The CTA's tile: its id (`row * tiles + index`, `u32`) and its index
/// within the row.
pub struct Tile {
    pub id: Reg,
    pub index: Reg,
}

/// Takes the CTA's tile id from the status buffer's counter (thread 0) and
/// shares it with the CTA through shared memory at `base + off`.
pub fn take_tile(b: &mut Builder, cx: &Cx, tid: Reg, base: Reg, off: u32) -> Reg {
    let status = *cx
        .outputs
        .last()
        .expect("look-back scans have a status output");
    let t = b.mov(RegKind::B32, "u32", 0);
    let first = b.reg(RegKind::Pred);
    ins!(b, "setp.eq.u32 {first}, {tid}, 0");
    ins!(b, "@{first} atom.global.add.u32 {t}, [{status}], 1");
    ins!(b, "@{first} st.shared.u32 [{base}+{off}], {t}");
    ins!(b, "bar.sync 0");
    ins!(b, "ld.shared.u32 {t}, [{base}+{off}]");
    t
}

/// What the look-back needs to know of the kernel.
pub struct Lookback<'a> {
    /// The kernel's scans.
    pub scans: &'a [ScanInst],
    /// Each scan's first state slot.
    pub slots: &'a [usize],
    /// Bytes of each state register of all scans together, by slot.
    pub sizes: &'a [u32],
    /// Shared memory: its base register and the offset of the tile id's
    /// slot, followed by the prefix's slots.
    pub shared: (Reg, u32),
}

impl Lookback<'_> {
    /// Byte offset, from a record's address, of aggregate slot `slot`
    /// (inclusive prefix slots follow the aggregate's).
    fn slot(&self, slot: usize) -> usize {
        8 * (1 + slot)
    }

    /// Publishes the tile's `aggregate` (per scan), looks back, and
    /// publishes the inclusive prefix; returns the tile's exclusive prefix
    /// (per scan) in every thread of the CTA.
    #[allow(clippy::too_many_arguments)]
    pub fn emit(
        &self,
        b: &mut Builder,
        cx: &Cx,
        tile: &Tile,
        tid: Reg,
        lane: Reg,
        warp: Reg,
        aggregate: &[State],
    ) -> Vec<State> {
        let status = *cx
            .outputs
            .last()
            .expect("look-back scans have a status output");
        let nslots = self.sizes.len();
        let packed = packed(self.sizes);
        let rec_bytes = record_words(self.sizes) * 8;
        let inc_off = nslots * 8;
        // A record's address: past the counter word, `rec_bytes` a tile.
        let record = |b: &mut Builder, id: Reg| {
            let a = b.reg(RegKind::B64);
            ins!(b, "mul.wide.u32 {a}, {id}, {rec_bytes}");
            ins!(b, "add.s64 {a}, {a}, {status}");
            ins!(b, "add.s64 {a}, {a}, 8");
            a
        };
        let my = record(b, tile.id);
        let (lead, first) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
        ins!(b, "setp.eq.u32 {lead}, {tid}, 0");
        ins!(b, "setp.eq.u32 {first}, {}, 0", tile.index);
        let lead_first = b.reg(RegKind::Pred);
        ins!(b, "and.pred {lead_first}, {lead}, {first}");

        // Step 3: the aggregate, and a row's first tile's inclusive prefix.
        let flag = b.reg(RegKind::B32);
        ins!(b, "selp.u32 {flag}, {INCLUSIVE}, {AGGREGATE}, {first}");
        if packed {
            publish_packed(b, lead, my, flag, aggregate[0].v);
        } else {
            for (s, total) in aggregate.iter().enumerate() {
                for (j, r) in total.regs().iter().enumerate() {
                    let (bt, off) = (r.kind.bit_ty(), self.slot(self.slots[s] + j));
                    ins!(b, "@{lead} st.global.{bt} [{my}+{off}], {r}");
                    ins!(
                        b,
                        "@{lead_first} st.global.{bt} [{my}+{}], {r}",
                        off + inc_off
                    );
                }
            }
            ins!(b, "@{lead} st.release.gpu.global.u32 [{my}], {flag}");
        }

        // Step 4, by the first warp of a tile after a row's first.
        let prefix: Vec<State> = self.scans.iter().map(|si| si.identity(b)).collect();
        let (top, end) = (b.label(), b.label());
        let skip = b.reg(RegKind::Pred);
        ins!(b, "setp.ne.u32 {skip}, {warp}, 0");
        ins!(b, "or.pred {skip}, {skip}, {first}");
        ins!(b, "@{skip} bra {end}");
        let row_start = b.reg(RegKind::B32);
        ins!(b, "sub.u32 {row_start}, {}, {}", tile.id, tile.index);
        // The window is the 32 tiles before `upto`; lane `l` reads tile
        // `upto - 32 + l` (before the row's start: an inclusive identity).
        let upto = b.reg(RegKind::B32);
        ins!(b, "mov.u32 {upto}, {}", tile.index);
        b.place(&top);
        let p = b.reg(RegKind::B32);
        ins!(b, "add.s32 {p}, {upto}, {lane}");
        ins!(b, "sub.s32 {p}, {p}, 32");
        let before_row = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.s32 {before_row}, {p}, 0");
        let id = b.reg(RegKind::B32);
        ins!(b, "max.s32 {id}, {p}, 0");
        ins!(b, "add.u32 {id}, {id}, {row_start}");
        let rec = record(b, id);
        let f = b.mov(RegKind::B32, "u32", INCLUSIVE);
        // A packed record's state comes with its flag (the identity
        // before the row's start).
        let word_state = packed.then(|| {
            let v = self.scans[0].identity(b).v;
            let (word, bits) = (b.reg(RegKind::B64), b.reg(RegKind::B32));
            ins!(b, "mov.b32 {bits}, {v}");
            ins!(b, "mov.b64 {word}, {{{f}, {bits}}}");
            ins!(
                b,
                "@!{before_row} ld.relaxed.gpu.global.b64 {word}, [{rec}]"
            );
            ins!(b, "mov.b64 {{{f}, {bits}}}, {word}");
            ins!(b, "mov.b32 {v}, {bits}");
            v
        });
        if !packed {
            ins!(b, "@!{before_row} ld.acquire.gpu.global.u32 {f}, [{rec}]");
        }
        let (published, all) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
        ins!(b, "setp.ne.u32 {published}, {f}, 0");
        ins!(b, "vote.sync.all.pred {all}, {published}, -1");
        // Back off while a predecessor has published nothing, so that
        // spinning warps leave the memory system to the tiles' loads.
        ins!(b, "@!{all} nanosleep.u32 {BACKOFF_NS}");
        ins!(b, "@!{all} bra {top}");
        // The state the flag announced: the inclusive prefix's slots or the
        // aggregate's.
        let inclusive = b.reg(RegKind::Pred);
        ins!(b, "setp.eq.u32 {inclusive}, {f}, {INCLUSIVE}");
        let (skip_w, skip_d) = (b.reg(RegKind::B32), b.reg(RegKind::B64));
        ins!(b, "selp.u32 {skip_w}, {inc_off}, 0, {inclusive}");
        ins!(b, "cvt.u64.u32 {skip_d}, {skip_w}");
        ins!(b, "add.s64 {rec}, {rec}, {skip_d}");
        // The latest lane with an inclusive prefix; earlier lanes drop out.
        let (ballot, last) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "vote.sync.ballot.b32 {ballot}, {inclusive}, -1");
        ins!(b, "bfind.u32 {last}, {ballot}");
        let (found, drop) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
        ins!(b, "setp.ne.u32 {found}, {ballot}, 0");
        ins!(b, "setp.lt.u32 {drop}, {lane}, {last}");
        ins!(b, "and.pred {drop}, {drop}, {found}");
        for (s, si) in self.scans.iter().enumerate() {
            let id = si.identity(b);
            let regs: Vec<Reg> = match word_state {
                Some(v) => vec![v],
                None => id
                    .regs()
                    .iter()
                    .enumerate()
                    .map(|(j, r)| {
                        let x = b.reg(r.kind);
                        let bt = r.kind.bit_ty();
                        ins!(b, "mov.{bt} {x}, {r}");
                        let off = self.slot(self.slots[s] + j);
                        ins!(b, "@!{before_row} ld.global.{bt} {x}, [{rec}+{off}]");
                        x
                    })
                    .collect(),
            };
            let x = select(b, drop, id, State::from_regs(&regs));
            let window = warp_scan(b, si, lane, x, 32);
            let window = shuffle(b, "idx", window, "31");
            // The window precedes what was combined so far.
            let next = si.combine(b, window, prefix[s]);
            for (d, r) in prefix[s].regs().iter().zip(next.regs()) {
                ins!(b, "mov.{} {d}, {r}", d.kind.bit_ty());
            }
        }
        ins!(b, "sub.s32 {upto}, {upto}, 32");
        ins!(b, "@!{found} bra {top}");
        b.place(&end);

        // Step 5: the inclusive prefix (the first tile's is out already),
        // and the exclusive prefix to the whole CTA.
        let later = b.reg(RegKind::Pred);
        ins!(b, "not.pred {later}, {first}");
        ins!(b, "and.pred {later}, {later}, {lead}");
        let (base, off) = self.shared;
        let done = b.mov(RegKind::B32, "u32", INCLUSIVE);
        for (s, si) in self.scans.iter().enumerate() {
            let incl = si.combine(b, prefix[s], aggregate[s]);
            if packed {
                publish_packed(b, later, my, done, incl.v);
            }
            for (j, (r, p)) in incl.regs().iter().zip(prefix[s].regs()).enumerate() {
                let bt = r.kind.bit_ty();
                let slot = self.slots[s] + j;
                if !packed {
                    ins!(
                        b,
                        "@{later} st.global.{bt} [{my}+{}], {r}",
                        self.slot(slot) + inc_off
                    );
                }
                ins!(
                    b,
                    "@{lead} st.shared.{bt} [{base}+{}], {p}",
                    off + 8 * (1 + slot as u32)
                );
            }
        }
        if !packed {
            ins!(b, "@{later} st.release.gpu.global.u32 [{my}], {done}");
        }
        ins!(b, "bar.sync 0");
        prefix
            .iter()
            .enumerate()
            .map(|(s, st)| {
                let regs: Vec<Reg> = st
                    .regs()
                    .iter()
                    .enumerate()
                    .map(|(j, r)| {
                        let x = b.reg(r.kind);
                        let slot = (self.slots[s] + j) as u32;
                        ins!(
                            b,
                            "ld.shared.{} {x}, [{base}+{}]",
                            r.kind.bit_ty(),
                            off + 8 * (1 + slot)
                        );
                        x
                    })
                    .collect();
                State::from_regs(&regs)
            })
            .collect()
    }
}

/// Stores, where `pred` holds, the packed record word at `at`: `flag` in
/// its low half, the 32-bit state `v` in its high half, with one 64-bit
/// strong store (single-copy atomic, as `cuda::atomic<uint64_t>` stores
/// are), so that a reader's one 64-bit strong load sees the flag and the
/// state it announces together.
fn publish_packed(b: &mut Builder, pred: Reg, at: Reg, flag: Reg, v: Reg) {
    let (bits, word) = (b.reg(RegKind::B32), b.reg(RegKind::B64));
    ins!(b, "mov.b32 {bits}, {v}");
    ins!(b, "mov.b64 {word}, {{{flag}, {bits}}}");
    ins!(b, "@{pred} st.relaxed.gpu.global.b64 [{at}], {word}");
}
