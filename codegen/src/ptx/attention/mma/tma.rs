//! Key and value tiles through the copy engine (`cp.async.bulk.tensor`,
//! sm_90) for the `wgmma` kernel's tiles of two or three warpgroups, and the
//! warpgroups' ping-pong (FlashAttention-3's schedule, without a producer
//! warp).
//!
//! # Copies
//! Where `k` and `v` are plain loads ([`plain`]) with a positive key
//! stride, each is a 3-d tensor map ([`TensorMap`], encoded by the
//! launcher from the input's pointer): dimension 0 the head dim, 1 the
//! keys, 2 the batch offset in units of the greatest common divisor of its
//! coefficients (so a grouped-query head's division, any batch strides
//! and a view's offset are one coordinate). A box is 64 head-dim columns
//! by `bn` keys: exactly one column block of a swizzled tile, which the
//! copy engine writes in the same 128-byte swizzle, with zeros past the
//! last key and column. Thread 0 issues every copy. (One-warpgroup tiles
//! keep `cp.async`: with the copy engine they measured 11-15% slower,
//! H200, 2026-11-27.)
//!
//! # Barriers
//! Per buffer (3): `k` and `v` "full" barriers (the copy's bytes,
//! `expect_tx`) and "empty" barriers (one arrival per warp once its
//! warpgroup's MMAs that read the tile are done). `k` and `v` are separate
//! because a tile's `k` is done with half an iteration after it lands
//! (`S`), its `v` only in the next iteration (`P V`), so the `k` copies
//! run two tiles ahead and the `v` copies one. Tile `n` lives in buffer `n
//! % 3` with phase parity `(n / 3) % 2`. In iteration `t` thread 0 starts
//! tile `t + 2`'s `k` once the MMAs are issued (into tile `t - 1`'s
//! buffer, whose `S` every warpgroup has finished) and tile `t + 1`'s `v`
//! after the softmax (into tile `t - 2`'s, whose `P V` ended iteration `t
//! - 1`).
//!
//! # Causal masks
//! A warpgroup's rows end their keys up to a CTA's rows minus 64 before
//! the CTA's last row does. Where that can be a whole key tile
//! (`bm >= 64 + bn`: 128-row CTAs of 64-key tiles, 192-row CTAs), each warpgroup's
//! loop stops at its own rows' end (tile 0 always runs) and then walks
//! the CTA's remaining tiles without computing them
//! ([`Emitter::tma_drain`]): it waits for each tile to land before
//! releasing it, so its arrivals count in that tile's phase of the
//! "empty" barriers; thread 0 (warpgroup 0, the one that stops first)
//! keeps starting the copies there; and it takes its turns, so the
//! round-robin keeps count. On an H200 (2026-11-29) that took causal d =
//! 64 with `8x16x64rw` from 311-314 to 313-318 TFLOP/s (f16 and bf16)
//! and `12x16x128rw` from 302-304 to 305-309; 128-row CTAs of 128-key
//! tiles, where it never applies on a square mask, lost 2-5% to the
//! walk's registers, so they do without it.
//!
//! # Ping-pong (`SMELT_ATTENTION_PINGPONG`; by default as `Geom::pingpong` says)
//! On an H200 (2026-11-27, same session) it took d = 128 prefill from
//! 448-451 to 469-470 TFLOP/s at 2048 keys and from 496-517 to 585-591 at
//! 8192; with `k` copied only one tile ahead it had been 3-5% slower.
//! Named barriers `1 ..= n` order the `n` (2 or 3) warpgroups' MMA issues
//! round-robin: warpgroup `w` waits on barrier `1 + w` before issuing and
//! arrives on the next warpgroup's after (the last on warpgroup 0's), and
//! the last arrives once first, so the tensor cores run one warpgroup's
//! products while the others compute their softmax. Warpgroup 0 waits
//! once more at the end for the last one's final arrival, so every
//! barrier ends complete.

use super::wgmma::{issue_pv, issue_scores, ones_address, q_descriptors};
use super::{pack_p, rescale, Acc, Emitter, Geom, LogitCx};
use crate::attention::Attention;
use crate::expr::Expr;
use crate::ir::Kernel;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::module::{batch_units, map_param, MapElem, TensorMap};
use crate::ptx::{attention::stage::plain, expr};

/// Bytes of the barriers after the buffers: 4 kinds of 3.
pub(super) const BARRIER_BYTES: u32 = 4 * 3 * 8;

/// One part (`k` or `v`) read through tensor map `map`.
#[derive(Clone)]
pub(super) struct MapPart {
    map: usize,
    /// The element offset of the batch's key 0, column 0.
    batch: Expr,
    /// Elements per unit of dimension 2 (a multiple of 8).
    unit: i64,
    /// Column blocks of 64 and the tile's byte offset in buffer 0.
    blocks: u32,
    dst: u32,
}

/// The copy engine's plan for one kernel.
#[derive(Clone)]
pub(super) struct Tma {
    k: MapPart,
    v: MapPart,
    /// The warpgroups take turns at the tensor cores.
    pingpong: bool,
    /// The entry whose map parameters the copies read.
    entry: String,
}

/// The tensor maps of `k` and `v` and their plan, for a two-warpgroup
/// tile whose `k` and `v` are plain loads the copy engine can take: a
/// positive key stride, and sizes the map's fields hold.
pub(super) fn plan(
    k: &Kernel,
    a: &Attention,
    g: &Geom,
    (entry, pingpong): (&str, bool),
) -> Option<(Tma, Vec<TensorMap>)> {
    if g.cta.warps < 8 {
        return None;
    }
    let v = &a.vars;
    let part = |root, col, cols: u32, dst, map| -> Option<(MapPart, TensorMap)> {
        let p = plain(k, root, (v.j, col), cols)?;
        let (terms, konst) = p.batch.parts();
        let coefs = terms.iter().map(|(_, c)| *c).chain([konst]);
        // One batch: dimension 2 has one unit, of any multiple of 8.
        let (unit, units) = batch_units(coefs, 8, k.inputs[p.input].len as u64);
        let fits =
            p.row > 0 && units <= i32::MAX as u64 && (2 * p.row.max(unit)) < (1 << 40) && g.lk > 0;
        let m = TensorMap {
            input: p.input,
            elem: MapElem::B16,
            dims: [u64::from(cols), u64::from(g.lk), units],
            strides: [2 * p.row as u64, 2 * unit as u64],
            boxes: [64, g.bn, 1],
        };
        fits.then_some((
            MapPart {
                map,
                batch: p.batch,
                unit,
                blocks: cols.div_ceil(64),
                dst,
            },
            m,
        ))
    };
    let (kp, km) = part(a.k, v.d, g.d, g.k_off, 0)?;
    let (vp, vm) = part(a.v, v.e, g.dv, g.v_off, 1)?;
    let tma = Tma {
        k: kp,
        v: vp,
        pingpong,
        entry: entry.to_string(),
    };
    Some((tma, vec![km, vm]))
}

impl Tma {
    /// Whether the warpgroups take turns at the tensor cores.
    pub(super) fn pingpong(&self) -> bool {
        self.pingpong
    }
}

/// The barrier kinds, in their order after the buffers.
#[derive(Clone, Copy)]
enum Bar {
    KFull = 0,
    VFull = 1,
    KEmpty = 2,
    VEmpty = 3,
}

/// The registers the copies and barriers use through the kernel.
pub(super) struct Live {
    /// Shared address of the buffers (buffer 0) and of the barriers.
    base: Reg,
    bars: Reg,
    /// Thread 0 (issues the copies), lane 0 (arrives for its warp).
    producer: Reg,
    lane0: Reg,
    /// Per part (`k`, `v`): the map's generic address and the batch's
    /// dimension-2 coordinate.
    map: [Reg; 2],
    unit: [Reg; 2],
    /// The ping-pong's named barriers: this warpgroup's and the next
    /// one's, and whether this is the first and the last warpgroup.
    turns: Option<Turns>,
}

/// The ping-pong's registers. Barrier ids are registers, not a predicated
/// instruction per warpgroup with immediate ids: those made d = 128 3-5%
/// slower (H200, 2026-11-28), though a register id makes ptxas reserve
/// all 16 barriers.
#[derive(Clone, Copy)]
struct Turns {
    own: Reg,
    next: Reg,
    first: Reg,
    last: Reg,
}

/// Tile `n`'s buffer index and phase parity (u32 registers).
#[derive(Clone, Copy)]
struct Slot {
    n: Reg,
    buf: Reg,
    ph: Reg,
}

impl Slot {
    /// Tile 0's.
    fn first(b: &mut Builder) -> Slot {
        Slot {
            n: b.mov(RegKind::B32, "u32", 0),
            buf: b.mov(RegKind::B32, "u32", 0),
            ph: b.mov(RegKind::B32, "u32", 0),
        }
    }

    /// The next tile's (no division: the buffer wraps, the parity flips).
    fn next(self, b: &mut Builder) -> Slot {
        let (n, buf, ph, wrap) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::Pred),
        );
        ins!(b, "add.u32 {n}, {}, 1", self.n);
        ins!(b, "add.u32 {buf}, {}, 1", self.buf);
        ins!(b, "setp.eq.u32 {wrap}, {buf}, 3");
        ins!(b, "selp.u32 {buf}, 0, {buf}, {wrap}");
        ins!(b, "xor.b32 {ph}, {}, 1", self.ph);
        ins!(b, "selp.u32 {ph}, {ph}, {}, {wrap}", self.ph);
        Slot { n, buf, ph }
    }

    /// Makes `self` hold `other` (loop-carried registers).
    fn assign(self, b: &mut Builder, other: Slot) {
        for (d, s) in [
            (self.n, other.n),
            (self.buf, other.buf),
            (self.ph, other.ph),
        ] {
            ins!(b, "mov.u32 {d}, {s}");
        }
    }
}

impl Live {
    /// The shared address of barrier `kind` of buffer `buf` (a register).
    fn bar(&self, b: &mut Builder, kind: Bar, buf: Reg) -> Reg {
        let r = b.reg(RegKind::B32);
        ins!(b, "mad.lo.u32 {r}, {buf}, 8, {}", self.bars);
        ins!(b, "add.u32 {r}, {r}, {}", kind as u32 * 24);
        r
    }

    /// Every thread waits for the phase of parity `ph` of `bar` to end.
    fn wait(b: &mut Builder, bar: Reg, ph: Reg) {
        let (top, done) = (b.label(), b.reg(RegKind::Pred));
        b.place(&top);
        ins!(
            b,
            "mbarrier.try_wait.parity.shared::cta.b64 {done}, [{bar}], {ph}"
        );
        ins!(b, "@!{done} bra {top}");
    }

    /// Lane 0 of every warp arrives on `kind` of tile `at`'s buffer.
    fn release(&self, b: &mut Builder, kind: Bar, at: Slot) {
        let bar = self.bar(b, kind, at.buf);
        ins!(
            b,
            "@{} mbarrier.arrive.shared::cta.b64 _, [{bar}]",
            self.lane0
        );
    }

    /// Every thread waits until `kind` (full) of tile `at` has landed.
    fn landed(&self, b: &mut Builder, kind: Bar, at: Slot) {
        let bar = self.bar(b, kind, at.buf);
        Self::wait(b, bar, at.ph);
    }

    /// Every thread waits until both copies have landed, testing the two
    /// barriers before either branch (so their latencies overlap; a
    /// completed phase tests true again until the buffer is refilled,
    /// which waits for this warp's release).
    fn both_landed(&self, b: &mut Builder, (k1, at1): (Bar, Slot), (k2, at2): (Bar, Slot)) {
        let (b1, b2) = (self.bar(b, k1, at1.buf), self.bar(b, k2, at2.buf));
        let (top, d1, d2) = (b.label(), b.reg(RegKind::Pred), b.reg(RegKind::Pred));
        b.place(&top);
        ins!(
            b,
            "mbarrier.try_wait.parity.shared::cta.b64 {d1}, [{b1}], {}",
            at1.ph
        );
        ins!(
            b,
            "mbarrier.try_wait.parity.shared::cta.b64 {d2}, [{b2}], {}",
            at2.ph
        );
        ins!(b, "and.pred {d1}, {d1}, {d2}");
        ins!(b, "@!{d1} bra {top}");
    }

    /// The shared address of tile `at`'s `k` or `v` (`off`, buffer 0's).
    fn tile(&self, b: &mut Builder, g: &Geom, at: Slot, off: u32) -> Reg {
        let r = b.reg(RegKind::B32);
        ins!(
            b,
            "mad.lo.u32 {r}, {}, {}, {}",
            at.buf,
            g.kv_bytes,
            self.base
        );
        ins!(b, "add.u32 {r}, {r}, {off}");
        r
    }

    /// Waits for this warpgroup's turn at the tensor cores (ping-pong).
    fn my_turn(&self, b: &mut Builder) {
        if let Some(t) = self.turns {
            ins!(b, "bar.sync {}, 256", t.own);
        }
    }

    /// Hands the tensor cores to the next warpgroup (ping-pong).
    fn your_turn(&self, b: &mut Builder) {
        if let Some(t) = self.turns {
            ins!(b, "bar.arrive {}, 256", t.next);
        }
    }
}

impl Emitter<'_> {
    /// Thread 0 sets up the barriers and starts key tiles 0 and 1 (tile
    /// 1 where `j0 + bn < keys`); the caller's barrier then shows every
    /// thread the initialised barriers. Returns the live registers.
    pub(super) fn tma_start(
        &self,
        b: &mut Builder,
        t: &Tma,
        (base, tid, warp): (Reg, Reg, Reg),
        coords: &super::super::Coords,
        (j0, keys): (Reg, Reg),
    ) -> Live {
        let g = self.g;
        let (producer, lane0) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
        ins!(b, "setp.eq.u32 {producer}, {tid}, 0");
        let lane = b.reg(RegKind::B32);
        ins!(b, "and.b32 {lane}, {tid}, 31");
        ins!(b, "setp.eq.u32 {lane0}, {lane}, 0");
        let bars = b.reg(RegKind::B32);
        ins!(b, "add.u32 {bars}, {base}, {}", g.shared);
        let entry = &t.entry;
        let mut part = |p: &MapPart| {
            let (m, gm) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
            ins!(b, "mov.b64 {m}, {}", map_param(entry, p.map));
            ins!(b, "cvta.param.u64 {gm}, {m}");
            let w = self.cx.width;
            let x = expr::eval(b, &p.batch, &coords.vars, &self.cx.k.ranges, w);
            let u = b.reg(RegKind::B32);
            if w.wide {
                let q = b.reg(RegKind::B64);
                ins!(b, "div.u64 {q}, {x}, {}", p.unit);
                ins!(b, "cvt.u32.u64 {u}, {q}");
            } else {
                ins!(b, "div.u32 {u}, {x}, {}", p.unit);
            }
            (gm, u)
        };
        let (km, ku) = part(&t.k);
        let (vm, vu) = part(&t.v);
        let turns = t.pingpong.then(|| {
            let (wg, own, next) = (
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
            );
            let (first, last) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
            ins!(b, "shr.u32 {wg}, {warp}, 2");
            ins!(b, "add.u32 {own}, {wg}, 1");
            ins!(b, "setp.eq.u32 {first}, {wg}, 0");
            ins!(b, "setp.eq.u32 {last}, {own}, {}", g.cta.warps / 4);
            ins!(b, "add.u32 {next}, {own}, 1");
            ins!(b, "selp.u32 {next}, 1, {next}, {last}");
            Turns {
                own,
                next,
                first,
                last,
            }
        });
        let live = Live {
            base,
            bars,
            producer,
            lane0,
            map: [km, vm],
            unit: [ku, vu],
            turns,
        };
        b.comment("thread 0: the barriers, then key tiles 0 and 1");
        let skip = b.label();
        ins!(b, "@!{producer} bra {skip}");
        for i in 0..3 {
            for (kind, count) in [
                (Bar::KFull, 1),
                (Bar::VFull, 1),
                (Bar::KEmpty, g.cta.warps),
                (Bar::VEmpty, g.cta.warps),
            ] {
                ins!(
                    b,
                    "mbarrier.init.shared::cta.b64 [{bars}+{}], {count}",
                    kind as u32 * 24 + 8 * i
                );
            }
        }
        ins!(b, "fence.mbarrier_init.release.cluster");
        let at = Slot::first(b);
        self.copy(b, &live, t, (at, j0), Bar::KFull);
        self.copy(b, &live, t, (at, j0), Bar::VFull);
        let (j1, some) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
        ins!(b, "add.u32 {j1}, {j0}, {}", g.bn);
        ins!(b, "setp.lt.u32 {some}, {j1}, {keys}");
        ins!(b, "@!{some} bra {skip}");
        let at = at.next(b);
        self.copy(b, &live, t, (at, j1), Bar::KFull);
        self.copy(b, &live, t, (at, j1), Bar::VFull);
        b.place(&skip);
        ins!(b, "bar.warp.sync 0xffffffff");
        live
    }

    /// (Thread 0 only, in a branch.) Starts the copy of tile `at`'s `k`
    /// (`kind` `KFull`) or `v` (`VFull`), keys from `j`, into its buffer.
    fn copy(&self, b: &mut Builder, live: &Live, t: &Tma, (at, j): (Slot, Reg), kind: Bar) {
        let g = self.g;
        let (p, i) = match kind {
            Bar::KFull => (&t.k, 0),
            _ => (&t.v, 1),
        };
        let full = live.bar(b, kind, at.buf);
        let bytes = p.blocks * g.bn * 128;
        ins!(
            b,
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{full}], {bytes}"
        );
        let dst = live.tile(b, &g, at, p.dst);
        for c in 0..p.blocks {
            let col = b.mov(RegKind::B32, "u32", 64 * c);
            ins!(
                b,
                "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{dst}+{}], [{}, {{{col}, {j}, {}}}], [{full}]",
                c * g.bn * 128,
                live.map[i],
                live.unit[i]
            );
        }
    }

    /// Thread 0 starts tile `at`'s `k` or `v` where its keys `j` exist,
    /// first waiting (for tile `n >= 3`) until every warp is done with
    /// tile `n - 3`'s in that buffer; the warp's other lanes wait for it.
    fn refill(
        &self,
        b: &mut Builder,
        live: &Live,
        t: &Tma,
        (at, j, keys): (Slot, Reg, Reg),
        full: Bar,
    ) {
        let empty = match full {
            Bar::KFull => Bar::KEmpty,
            _ => Bar::VEmpty,
        };
        let skip = b.label();
        let go = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.and.u32 {go}, {j}, {keys}, {}", live.producer);
        ins!(b, "@!{go} bra {skip}");
        let (reuse, fresh) = (b.reg(RegKind::Pred), b.label());
        ins!(b, "setp.lt.u32 {reuse}, {}, 3", at.n);
        ins!(b, "@{reuse} bra {fresh}");
        // Tile n - 3's phase: the other parity.
        let ph = b.reg(RegKind::B32);
        ins!(b, "xor.b32 {ph}, {}, 1", at.ph);
        let bar = live.bar(b, empty, at.buf);
        Live::wait(b, bar, ph);
        b.place(&fresh);
        self.copy(b, live, t, (at, j), full);
        b.place(&skip);
        ins!(b, "bar.warp.sync 0xffffffff");
    }

    /// The pipelined key loop ([`Emitter::pipelined_loop`]'s schedule) on
    /// the copy engine's tiles: barriers instead of `cp.async` groups and
    /// a CTA barrier, and, where it is on, the ping-pong. Returns the
    /// shared address of the buffer of the tile after the last, which no
    /// warpgroup reads any more once this one is done (`staged.rs`).
    ///
    /// Under a causal mask `mine` is this warpgroup's own key end (its
    /// last row's, at most `keys`): it computes tiles only up to there
    /// (tile 0 always), then [`Emitter::tma_drain`] walks the CTA's
    /// remaining tiles without computing them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tma_loop(
        &self,
        b: &mut Builder,
        lx: &LogitCx,
        (t, live): (&Tma, &Live),
        (keys, j0): (Reg, Reg),
        mine: Option<Reg>,
        q: Reg,
        (m, l, o): (&[Reg], &[Reg], &Acc),
    ) -> Reg {
        let (g, h) = (self.g, self.h);
        if let Some(t) = live.turns {
            b.comment("ping-pong: warpgroup 0 issues first");
            ins!(b, "@{} bar.arrive 1, 256", t.last);
        }
        let s = Emitter::zeros(b, g.bn / 8);
        let q = q_descriptors(b, &g, q);
        let ones = ones_address(b, &g, live.base);
        let (next, far) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        b.comment("tile 0: scores and softmax");
        let cur = Slot::first(b);
        live.landed(b, Bar::KFull, cur);
        let ka = live.tile(b, &g, cur, g.k_off);
        live.my_turn(b);
        ins!(b, "wgmma.fence.sync.aligned");
        issue_scores(b, &g, h, (&q, ka), &s);
        live.your_turn(b);
        b.comment("thread 0: tile 2's k");
        ins!(b, "add.u32 {next}, {j0}, {}", g.bn);
        ins!(b, "add.u32 {far}, {next}, {}", g.bn);
        let two = cur.next(b).next(b);
        self.refill(b, live, t, (two, far, keys), Bar::KFull);
        ins!(b, "wgmma.wait_group.sync.aligned 0");
        live.release(b, Bar::KEmpty, cur);
        let x = self.tile_logits(b, lx, (j0, next), std::slice::from_ref(&s));
        let (p, _) = self.softmax(b, &x, m, l);
        let pa: Vec<[Reg; 4]> = (0..(g.bn / 16) as usize)
            .map(|c| pack_p(b, h, &p[0], c))
            .collect();
        ins!(b, "mov.u32 {j0}, {next}");
        // Loop-carried: tile n's slot and tile n - 1's.
        let prev = Slot::first(b);
        prev.assign(b, cur);
        let cur = {
            let one = cur.next(b);
            let c = Slot::first(b);
            c.assign(b, one);
            c
        };
        let (top, end) = (b.label(), b.label());
        b.place(&top);
        let more = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.u32 {more}, {j0}, {}", mine.unwrap_or(keys));
        ins!(b, "@!{more} bra.uni {end}");
        ins!(b, "add.u32 {next}, {j0}, {}", g.bn);
        ins!(b, "add.u32 {far}, {next}, {}", g.bn);
        let ahead = cur.next(b);
        let two = ahead.next(b);
        b.comment("tile n's k and tile n - 1's v have landed");
        live.both_landed(b, (Bar::KFull, cur), (Bar::VFull, prev));
        let (ka, va) = (
            live.tile(b, &g, cur, g.k_off),
            live.tile(b, &g, prev, g.v_off),
        );
        live.my_turn(b);
        // The scores were read and `pa` written since the last MMAs.
        ins!(b, "wgmma.fence.sync.aligned");
        issue_scores(b, &g, h, (&q, ka), &s);
        issue_pv(b, &g, h, (va, ones), &pa, o);
        live.your_turn(b);
        b.comment("thread 0: tile n + 2's k (tile n - 1's buffer)");
        self.refill(b, live, t, (two, far, keys), Bar::KFull);
        ins!(b, "wgmma.wait_group.sync.aligned 1");
        live.release(b, Bar::KEmpty, cur);
        let x = self.tile_logits(b, lx, (j0, next), std::slice::from_ref(&s));
        let (p, alpha) = self.softmax(b, &x, m, l);
        b.comment("thread 0: tile n + 1's v (tile n - 2's buffer)");
        self.refill(b, live, t, (ahead, next, keys), Bar::VFull);
        ins!(b, "wgmma.wait_group.sync.aligned 0");
        live.release(b, Bar::VEmpty, prev);
        alpha.apply(b, |b, alphas| rescale(b, o, alphas));
        for (c, dst) in pa.iter().enumerate() {
            for (d, src) in dst.iter().zip(pack_p(b, h, &p[0], c)) {
                ins!(b, "mov.b32 {d}, {src}");
            }
        }
        ins!(b, "mov.u32 {j0}, {next}");
        prev.assign(b, cur);
        cur.assign(b, ahead);
        ins!(b, "bra.uni {top}");
        b.place(&end);
        b.comment("the last tile's O += P V");
        live.landed(b, Bar::VFull, prev);
        let va = live.tile(b, &g, prev, g.v_off);
        live.my_turn(b);
        ins!(b, "wgmma.fence.sync.aligned");
        issue_pv(b, &g, h, (va, ones), &pa, o);
        live.your_turn(b);
        ins!(b, "wgmma.wait_group.sync.aligned 0");
        if mine.is_some() {
            live.release(b, Bar::VEmpty, prev);
            self.tma_drain(b, (t, live), (keys, j0), cur);
        }
        if let Some(t) = live.turns {
            b.comment("ping-pong: warpgroup 0 takes the last warpgroup's last hand-over");
            ins!(b, "@{} bar.sync 1, 256", t.first);
        }
        live.tile(b, &g, cur, g.k_off)
    }

    /// The CTA's key tiles from `j0` (slot `cur`) to `keys`, which this
    /// warpgroup's rows cannot see: it releases each tile's `k` and `v`
    /// once it has landed (so its arrivals count in that tile's phase,
    /// not an earlier one's), thread 0 still starting the copies the
    /// other warpgroups wait for, and takes its turns (ping-pong) so the
    /// round-robin stays in step. Why: a CTA's first rows see fewer keys
    /// under a causal mask; without this every warpgroup computed every
    /// tile to the CTA's last row's end, masked. Leaves `cur` at the slot
    /// after the CTA's last tile.
    fn tma_drain(
        &self,
        b: &mut Builder,
        (t, live): (&Tma, &Live),
        (keys, j0): (Reg, Reg),
        cur: Slot,
    ) {
        let g = self.g;
        b.comment("causal: the CTA's tiles past this warpgroup's last visible key");
        let (top, end) = (b.label(), b.label());
        let (next, far, more) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::Pred),
        );
        b.place(&top);
        ins!(b, "setp.lt.u32 {more}, {j0}, {keys}");
        ins!(b, "@!{more} bra.uni {end}");
        ins!(b, "add.u32 {next}, {j0}, {}", g.bn);
        ins!(b, "add.u32 {far}, {next}, {}", g.bn);
        let ahead = cur.next(b);
        let two = ahead.next(b);
        live.landed(b, Bar::KFull, cur);
        live.my_turn(b);
        live.your_turn(b);
        self.refill(b, live, t, (two, far, keys), Bar::KFull);
        live.release(b, Bar::KEmpty, cur);
        live.landed(b, Bar::VFull, cur);
        self.refill(b, live, t, (ahead, next, keys), Bar::VFull);
        live.release(b, Bar::VEmpty, cur);
        ins!(b, "mov.u32 {j0}, {next}");
        cur.assign(b, ahead);
        ins!(b, "bra.uni {top}");
        b.place(&end);
    }
}
