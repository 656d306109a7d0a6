//! The warpgroup tiles' epilogue through shared memory (sm_90): `O / l`
//! leaves as runs of 16 bytes of a row instead of each lane's two columns
//! of 16 rows.
//!
//! A lane of a `wgmma` accumulator holds two adjacent columns of rows `g`
//! and `g + 8` of its warp's 16, so the direct epilogue (`finish`) stores
//! 4 bytes a point, 32 stores a thread at `dv = 128`, each with its own
//! address. On an H200 (ncu, 2026-11-28, d = 128, 2048 keys) that
//! epilogue took 8% of the kernel's warp samples, and with the prologue a
//! sixth of the time of a CTA of 16 key tiles (a twentieth of one of 64),
//! which is most of what 2048 keys lose to 8192.
//!
//! Here each warpgroup writes its `64 x dv` block of `O / l` (f32) to its
//! share of a key buffer no warpgroup reads any more (the key loops return
//! it), then every thread takes runs of `lanes` consecutive columns of a
//! row (neighbouring threads neighbouring runs) through the epilogue part
//! to the stores: one 16-byte store a run where the output is contiguous
//! along `e`. A buffer too small for the whole block takes it in rounds of
//! columns.
//!
//! The staged rows are swizzled as the tiles are: 16-byte chunk `c` of row
//! `r` lives at chunk `c ^ (r % 8)`, so the 8 rows a fragment store writes
//! and the 2 rows a run load reads hit distinct banks.
//!
//! Why the buffer is free: in the loops, the buffer of tile `t + 1` after
//! the last tile `t` was last filled with tile `t - 2`, which every
//! warpgroup finished before either passed its last tile's barrier (the
//! `cp.async` loop), or before the next warpgroup's turn at tile `t`'s
//! scores (the ping-pong of two warpgroups); nothing is copied into it
//! after. Without the ping-pong the copy engine's warpgroups may be a tile
//! further apart, and with three in turns the middle one's share overlaps
//! `v` of tile `t - 2`, which the last may still be multiplying, so there
//! the CTA waits for every warpgroup first. A warpgroup that stopped early
//! under a causal mask (`tma.rs`) reads nothing past its last tile.

use super::super::{epilogue_part, store, Coords};
use super::{Acc, Emitter};
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::memory;
use crate::ptx::ops::{self, Value};
use crate::{BinaryOp, DType};

/// Query rows of a warpgroup.
const WG_ROWS: u32 = 64;

/// The fewest columns a round takes: 8 chunks of 16 bytes a row, which
/// the swizzle needs.
const MIN_COLS: u32 = 32;

/// A kernel's staging: columns per round (a power of two) and columns per
/// run of the second phase.
#[derive(Clone, Copy)]
pub(super) struct Staging {
    cols: u32,
    lanes: u32,
}

impl Emitter<'_> {
    /// The staging of this kernel, where it applies: a `wgmma` tile,
    /// unsplit, whose runs of 16 bytes of the widest output split every
    /// row of `dv` into whole runs, and whose buffers hold at least
    /// [`MIN_COLS`] columns per warpgroup.
    pub(super) fn staging(&self) -> Option<Staging> {
        let g = self.g;
        if !g.cta.wgmma || self.sp.is_split() {
            return None;
        }
        let k = self.cx.k;
        let widest = k
            .stores
            .iter()
            .map(|st| k.outputs[st.output].dtype.size())
            .max()?;
        let lanes = (16 / widest.max(1)) as u32;
        if lanes < 2 || !g.dv.is_multiple_of(lanes) {
            return None;
        }
        let room = self.area_bytes() / (WG_ROWS * 4);
        let cols = 1 << room.min(g.dvp).max(1).ilog2();
        (cols >= MIN_COLS).then_some(Staging { cols, lanes })
    }

    /// Bytes of a warpgroup's staging area: its share of one buffer, in
    /// whole 128-byte lines (three warpgroups' shares are not).
    fn area_bytes(&self) -> u32 {
        self.g.kv_bytes / (self.g.cta.warps / 4) / 128 * 128
    }

    /// `O / l` through shared memory to the stores (see the module docs):
    /// `area` is the free buffer's shared address, `inv` the reciprocal
    /// row sums of the lane's rows `g` and `g + 8`, `o` its accumulators,
    /// `close` whether the warpgroups are known to be within a tile of
    /// each other (the ping-pong's turns, or the `cp.async` loop's
    /// barriers; else the CTA waits for both first).
    pub(super) fn staged(
        &self,
        b: &mut Builder,
        coords: &Coords,
        (st, area, close): (Staging, Reg, bool),
        inv: &[Reg],
        o: &Acc,
    ) {
        let g = self.g;
        b.comment("epilogue: O / l staged in a free buffer, then runs of a row to the stores");
        if !close && g.cta.warps > 4 {
            ins!(b, "bar.sync 0");
        }
        // Shared memory last written or read by the copy engine and the
        // MMAs (the async proxy) is now written by the threads.
        ins!(b, "fence.proxy.async.shared::cta");
        let (tid, cta) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "mov.u32 {tid}, %tid.x");
        ins!(b, "mov.u32 {cta}, %ctaid.x");
        let (wg, local) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "shr.u32 {wg}, {tid}, 7");
        ins!(b, "and.b32 {local}, {tid}, 127");
        let which: Vec<Reg> = (0..g.cta.warps / 4)
            .map(|w| {
                let p = b.reg(RegKind::Pred);
                ins!(b, "setp.eq.u32 {p}, {wg}, {w}");
                p
            })
            .collect();
        // Warpgroup `w` syncs on named barrier `1 + w`, the ping-pong's,
        // whose phases have all completed (a register barrier id would
        // make ptxas reserve all 16, one CTA an SM).
        let sync = |b: &mut Builder| {
            for (w, p) in which.iter().enumerate() {
                ins!(b, "@{p} bar.sync {}, 128", w + 1);
            }
        };
        let mine = b.reg(RegKind::B32);
        ins!(b, "mad.lo.u32 {mine}, {wg}, {}, {area}", self.area_bytes());
        let q0 = self.first_row(b, cta);
        let rows0 = b.reg(RegKind::B32);
        ins!(b, "mad.lo.u32 {rows0}, {wg}, {WG_ROWS}, {q0}");
        let writes = self.fragment_bases(b, (tid, mine), st.cols);
        let cx = self.cx.with_lanes_along(self.a.vars.e, self.a.attend);
        let insts = epilogue_part(self.cx.k, self.a);
        let rounds = g.dvp / st.cols;
        let tiles = st.cols / 8;
        for round in 0..rounds {
            if round > 0 {
                sync(b);
            }
            for (n, acc) in o
                .iter()
                .enumerate()
                .skip((round * tiles) as usize)
                .take(tiles as usize)
            {
                let n = n as u32 - round * tiles;
                let imm = (n / 4) * 128;
                for (half, pair) in acc.chunks(2).enumerate() {
                    let v: Vec<Reg> = pair
                        .iter()
                        .map(|x| {
                            let f = |reg| Value {
                                reg,
                                dtype: DType::F32,
                            };
                            ops::binary(b, BinaryOp::Mul, f(*x), f(inv[half]), DType::F32).reg
                        })
                        .collect();
                    let at = writes[half][(n % 4) as usize];
                    ins!(b, "st.shared.v2.f32 [{at}+{imm}], {{{}, {}}}", v[0], v[1]);
                }
            }
            sync(b);
            self.runs(b, (&cx, coords, &insts), st, (local, mine, rows0), round);
        }
    }

    /// The lane's shared addresses for its fragment pairs: per row (`g`,
    /// `g + 8` of its warp's 16) and per n8 tile `n % 4`, the pair of
    /// tile `n` is at that address plus `128 (n / 4)` (the swizzle flips
    /// only the low 3 bits of the chunk `2n + t / 2`).
    fn fragment_bases(&self, b: &mut Builder, (tid, mine): (Reg, Reg), cols: u32) -> [[Reg; 4]; 2] {
        let pitch = cols * 4;
        let (lane, warp, g, t, key) = (
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
            b.reg(RegKind::B32),
        );
        ins!(b, "and.b32 {lane}, {tid}, 31");
        ins!(b, "bfe.u32 {warp}, {tid}, 5, 2");
        ins!(b, "shr.u32 {g}, {lane}, 2");
        ins!(b, "and.b32 {t}, {lane}, 3");
        // Chunk bit 0 is `t / 2`; the swizzle key is the row's low bits,
        // which are `g` for both rows.
        ins!(b, "shr.u32 {key}, {t}, 1");
        ins!(b, "xor.b32 {key}, {key}, {g}");
        let within = b.reg(RegKind::B32);
        ins!(b, "and.b32 {within}, {t}, 1");
        ins!(b, "shl.b32 {within}, {within}, 3");
        let row = b.reg(RegKind::B32);
        ins!(b, "mad.lo.u32 {row}, {warp}, 16, {g}");
        ins!(b, "mad.lo.u32 {row}, {row}, {pitch}, {mine}");
        ins!(b, "add.u32 {row}, {row}, {within}");
        std::array::from_fn(|half| {
            std::array::from_fn(|j| {
                let (c, at) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                ins!(b, "xor.b32 {c}, {key}, {}", 2 * j);
                ins!(b, "mad.lo.u32 {at}, {c}, 16, {row}");
                if half == 1 {
                    ins!(b, "add.u32 {at}, {at}, {}", 8 * pitch);
                }
                at
            })
        })
    }

    /// The second phase of round `round`: this thread's runs of the
    /// warpgroup's staged columns, loaded and stored through the epilogue
    /// part.
    fn runs(
        &self,
        b: &mut Builder,
        (cx, coords, insts): (&crate::ptx::eval::Cx, &Coords, &[usize]),
        st: Staging,
        (local, mine, rows0): (Reg, Reg, Reg),
        round: u32,
    ) {
        let g = self.g;
        let pitch = st.cols * 4;
        let per_row = st.cols / st.lanes;
        let chunks = (st.lanes * 4).div_ceil(16);
        for j in 0..WG_ROWS * per_row / 128 {
            let (gi, r, run) = (
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
            );
            ins!(b, "add.u32 {gi}, {local}, {}", 128 * j);
            ins!(b, "shr.u32 {r}, {gi}, {}", per_row.ilog2());
            ins!(b, "and.b32 {run}, {gi}, {}", per_row - 1);
            let (key, row_at) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
            ins!(b, "and.b32 {key}, {r}, 7");
            ins!(b, "mad.lo.u32 {row_at}, {r}, {pitch}, {mine}");
            let regs: Vec<Reg> = (0..st.lanes).map(|_| b.reg(RegKind::F32)).collect();
            for (q, part) in regs.chunks(4).enumerate().take(chunks as usize) {
                // Column `run lanes + 4q` is in chunk `(run lanes) / 4 + q`
                // (a run of 2 is half a chunk, at byte 8 of it or 0).
                let (c, at) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
                ins!(b, "mul.lo.u32 {c}, {run}, {}", st.lanes);
                let byte = b.reg(RegKind::B32);
                ins!(b, "and.b32 {byte}, {c}, 3");
                ins!(b, "shr.u32 {c}, {c}, 2");
                ins!(b, "add.u32 {c}, {c}, {q}");
                ins!(b, "xor.b32 {c}, {c}, {key}");
                ins!(b, "mad.lo.u32 {at}, {c}, 16, {row_at}");
                ins!(b, "mad.lo.u32 {at}, {byte}, 4, {at}");
                memory::load_shared_f32(b, part, at, 0);
            }
            let (row, e, ok) = (
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
                b.reg(RegKind::Pred),
            );
            ins!(b, "add.u32 {row}, {rows0}, {r}");
            ins!(
                b,
                "mad.lo.u32 {e}, {run}, {}, {}",
                st.lanes,
                round * st.cols
            );
            ins!(b, "setp.lt.u32 {ok}, {row}, {}", g.lq);
            ins!(b, "setp.lt.and.u32 {ok}, {e}, {}, {ok}", g.dv);
            let out: Vec<Value> = regs
                .iter()
                .map(|reg| Value {
                    reg: *reg,
                    dtype: DType::F32,
                })
                .collect();
            store(b, cx, self.a, coords, insts, (row, e), &out, ok);
        }
    }
}
