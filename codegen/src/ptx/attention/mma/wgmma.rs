//! The two products of the tensor-core attention kernel as warpgroup MMAs
//! (`wgmma.mma_async`, sm_90a), for tiles with [`super::Cta::wgmma`]: the
//! rest of the kernel (staging, logits, online softmax, epilogue) is the
//! `mma.sync` kernel's, because a warpgroup's `m64nNk16` accumulators give
//! each warp's lanes exactly the elements of `mma.m16n8k16` C fragments
//! (accumulator `j` of warp `v`, lane `l`: row `16 v + l / 4 + 8 ((j / 2)
//! % 2)`, column `8 (j / 4) + 2 (l % 4) + j % 2`), and its A operand from
//! registers takes the `mma.sync` A fragment layout, so `p` feeds `O += P
//! V` straight from the softmax's registers.
//!
//! - Warpgroup `w` (warps `4w .. 4w + 3`) owns query rows `64 w ..` of the
//!   CTA's tile.
//! - Tiles are swizzled (`Tile::swizzled`): blocks of 64 head-dim columns,
//!   each `rows x 128` bytes with the hardware's 128-byte swizzle, so one
//!   shared-memory descriptor per operand addresses them
//!   (`matmul::descriptor_bits`):
//!   - `S = Q K^T`: A is the warpgroup's 64 `q` rows, B the `k` tile, both
//!     k-major (`d` contiguous); k-step `ks` of 16 starts `32 (ks % 4)`
//!     bytes into column block `ks / 4`.
//!   - `O += P V`: A is `p` (registers), B the `v` tile, MN-major (`dv`
//!     contiguous, the transpose flag; `LBO` = `bn x 128` bytes between
//!     column blocks); k-step `c` (keys `16c ..`) starts `2048 c` bytes in.
//! - The key loop is software-pipelined ([`Emitter::pipelined_loop`]): a
//!   warpgroup's softmax of one tile overlaps its own `O += P V` of the
//!   tile before, and other warpgroups' and CTAs' MMAs.

use super::{pack_p, rescale, Acc, Emitter, Geom, KeyTiles, LogitCx};
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::matmul::{descriptor, descriptor_bits, Layout};
use crate::DType;

/// Shared addresses of the warpgroup's `q` rows (in the first column
/// block) and of buffer 0's `k` and `v` tiles.
pub(super) fn tile_addresses(b: &mut Builder, g: &Geom, warp: Reg, base: Reg) -> (Reg, Reg, Reg) {
    let (wg, q, k, v) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
    );
    ins!(b, "shr.u32 {wg}, {warp}, 2");
    // From lane 0: ptxas then knows it is warp-uniform and keeps the
    // descriptors built from it in uniform registers (no R2UR per MMA).
    ins!(b, "shfl.sync.idx.b32 {wg}, {wg}, 0, 31, -1");
    ins!(b, "mad.lo.u32 {q}, {wg}, {}, {base}", 64 * 128);
    ins!(b, "add.u32 {k}, {base}, {}", g.k_off);
    ins!(b, "add.u32 {v}, {base}, {}", g.v_off);
    (q, k, v)
}

/// The shared address of the block of ones ([`Geom::ones`]) where the
/// kernel has one, from the shared base `base`.
pub(super) fn ones_address(b: &mut Builder, g: &Geom, base: Reg) -> Option<Reg> {
    g.ones.map(|off| {
        let r = b.reg(RegKind::B32);
        ins!(b, "add.u32 {r}, {base}, {off}");
        r
    })
}

/// The operands' PTX type.
fn ty(h: DType) -> &'static str {
    if h == DType::F16 {
        "f16"
    } else {
        "bf16"
    }
}

/// The registers of `acc` in accumulator order, as a `wgmma` operand.
fn operand(acc: &Acc) -> String {
    acc.iter()
        .flatten()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The shared-memory descriptors of the warpgroup's `q` rows (at
/// `q_tile`), one per k-step of 16: computed once before the key loop, so
/// ptxas keeps them in uniform registers rather than rebuilding each
/// from the address every tile.
pub(super) fn q_descriptors(b: &mut Builder, g: &Geom, q_tile: Reg) -> Vec<Reg> {
    let (bits, _, _) = descriptor_bits(Layout::KMajor, 0);
    let dq = descriptor(b, q_tile, bits);
    (0..g.dp / 16)
        .map(|ks| {
            let (block, within) = (ks / 4, 32 * (ks % 4));
            let sa = b.reg(RegKind::B64);
            // Descriptor addresses count 16-byte units.
            ins!(
                b,
                "add.s64 {sa}, {dq}, {}",
                (block * g.bm * 128 + within) >> 4
            );
            sa
        })
        .collect()
}

/// Issues `s = Q K^T` for the warpgroup's rows (`q`, its
/// [`q_descriptors`]) and the key tile at `k_tile` (`bn / 8` n8 tiles of
/// accumulators, overwritten) as one commit group.
pub(super) fn issue_scores(
    b: &mut Builder,
    g: &Geom,
    h: DType,
    (q, k_tile): (&[Reg], Reg),
    s: &Acc,
) {
    b.comment("S = Q K^T (wgmma)");
    let (bits, _, _) = descriptor_bits(Layout::KMajor, 0);
    let dk = descriptor(b, k_tile, bits);
    let (add, fresh) = (b.reg(RegKind::Pred), b.reg(RegKind::Pred));
    ins!(b, "setp.ne.b32 {add}, 1, 0");
    ins!(b, "setp.eq.b32 {fresh}, 1, 0");
    let d = operand(s);
    let ty = ty(h);
    for (ks, sa) in (0..g.dp / 16).zip(q) {
        let (block, within) = (ks / 4, 32 * (ks % 4));
        let sb = b.reg(RegKind::B64);
        ins!(
            b,
            "add.s64 {sb}, {dk}, {}",
            (block * g.bn * 128 + within) >> 4
        );
        let scale = if ks == 0 { fresh } else { add };
        ins!(
            b,
            "wgmma.mma_async.sync.aligned.m64n{}k16.f32.{ty}.{ty} {{{d}}}, {sa}, {sb}, {scale}, 1, 1, 0, 0",
            g.bn
        );
    }
    ins!(b, "wgmma.commit_group.sync.aligned");
}

/// Issues `o += p V` for the `v` tile at `v_tile`, `pa` the packed A
/// fragments of `p` per 16 keys, as one commit group.
///
/// With `ones` (the shared address of [`Geom::ones`]' block; `o` then has
/// one n8 tile past `dvp`), `o += p [V | 1]`: the MMAs are 8 columns
/// wider and read their second column block, which `V`'s layout puts
/// `LBO` bytes after the first, from the ones. Each k-step's descriptor
/// takes `LBO` = the ones' address minus its own start.
pub(super) fn issue_pv(
    b: &mut Builder,
    g: &Geom,
    h: DType,
    (v_tile, ones): (Reg, Option<Reg>),
    pa: &[[Reg; 4]],
    o: &Acc,
) {
    b.comment("O += P V (wgmma)");
    let (dv, step, trans) = match ones {
        None => {
            let (bits, step, trans) = descriptor_bits(Layout::RowMajor, g.bn);
            (descriptor(b, v_tile, bits), i64::from(step), trans)
        }
        Some(ones) => {
            let (bits, step, trans) = descriptor_bits(Layout::RowMajor, 0);
            let dv = descriptor(b, v_tile, bits);
            let (gap, wide) = (b.reg(RegKind::B32), b.reg(RegKind::B64));
            // In 16-byte units; positive: the ones follow every buffer.
            ins!(b, "sub.u32 {gap}, {ones}, {v_tile}");
            ins!(b, "shr.u32 {gap}, {gap}, 4");
            ins!(b, "cvt.u64.u32 {wide}, {gap}");
            ins!(b, "shl.b64 {wide}, {wide}, 16");
            ins!(b, "add.s64 {dv}, {dv}, {wide}");
            // A k-step further in starts `step` later and is as much
            // nearer the ones.
            let step = i64::from(step);
            (dv, step - (step << 16), trans)
        }
    };
    let add = b.reg(RegKind::Pred);
    ins!(b, "setp.ne.b32 {add}, 1, 0");
    let d = operand(o);
    let ty = ty(h);
    for (c, a) in pa.iter().enumerate() {
        let sb = b.reg(RegKind::B64);
        ins!(b, "add.s64 {sb}, {dv}, {}", step * c as i64);
        ins!(
            b,
            "wgmma.mma_async.sync.aligned.m64n{}k16.f32.{ty}.{ty} {{{d}}}, {{{}, {}, {}, {}}}, {sb}, {add}, 1, 1, {trans}",
            8 * o.len(),
            a[0],
            a[1],
            a[2],
            a[3]
        );
    }
    ins!(b, "wgmma.commit_group.sync.aligned");
}

impl Emitter<'_> {
    /// The key loop of `wgmma` tiles, software-pipelined (FlashAttention-3's
    /// intra-warpgroup overlap): the softmax of tile `t` runs while the
    /// tensor cores compute `O += P V` of tile `t - 1`.
    ///
    /// Tile 0's scores and softmax come first. Then per tile `t`: wait for
    /// its copies and every thread (so every warpgroup has finished tile
    /// `t - 2`), start tile `t + 1` into tile `t - 2`'s buffer, issue `S_t
    /// = Q K_t^T` and `O += P_{t-1} V_{t-1}` (two commit groups), wait for
    /// the first, evaluate the logits and the softmax of `S_t` (maxima,
    /// `p`, sums), wait for the second, rescale `O` (it now holds every
    /// tile to `t - 1`, relative to the old maxima) and pack `p_t`. After
    /// the last tile, `O += P V` of it. Buffer `t % 3` holds tile `t`.
    /// Returns the shared address of the buffer of the tile after the
    /// last, which no warpgroup reads any more (`staged.rs`).
    pub(super) fn pipelined_loop(
        &self,
        b: &mut Builder,
        lx: &LogitCx,
        kv: &KeyTiles,
        q: Reg,
        (m, l, o): (&[Reg], &[Reg], &Acc),
    ) -> Reg {
        let (g, h) = (self.g, self.h);
        let s = Emitter::zeros(b, g.bn / 8);
        let q = q_descriptors(b, &g, q);
        let ones = ones_address(b, &g, kv.base);
        let next = b.reg(RegKind::B32);
        b.comment("tile 0: scores and softmax");
        ins!(b, "wgmma.fence.sync.aligned");
        issue_scores(b, &g, h, (&q, kv.k), &s);
        ins!(b, "wgmma.wait_group.sync.aligned 0");
        ins!(b, "add.u32 {next}, {}, {}", kv.j0, g.bn);
        let x = self.tile_logits(b, lx, (kv.j0, next), std::slice::from_ref(&s));
        // `O` is zero: the factors have nothing to scale.
        let (p, _) = self.softmax(b, &x, m, l);
        let pa: Vec<[Reg; 4]> = (0..(g.bn / 16) as usize)
            .map(|c| pack_p(b, h, &p[0], c))
            .collect();
        ins!(b, "mov.u32 {}, {next}", kv.j0);
        // Buffers of tiles t - 1, t and t + 1 (byte offsets).
        let prev = b.mov(RegKind::B32, "u32", 0);
        let cur = b.mov(RegKind::B32, "u32", g.kv_bytes);
        let fill = b.mov(RegKind::B32, "u32", 2 * g.kv_bytes);
        let (top, end) = (b.label(), b.label());
        b.place(&top);
        let more = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.u32 {more}, {}, {}", kv.j0, kv.keys);
        ins!(b, "@!{more} bra.uni {end}");
        b.comment("tile j0 has landed; every warpgroup is done with tile j0 - 2 bn");
        ins!(b, "cp.async.wait_group 0");
        ins!(b, "fence.proxy.async.shared::cta");
        ins!(b, "bar.sync 0");
        let (ahead, buf) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "add.u32 {next}, {}, {}", kv.j0, g.bn);
        ins!(b, "add.u32 {buf}, {}, {fill}", kv.base);
        ins!(b, "mov.u32 {ahead}, {next}");
        (kv.load)(b, buf, ahead, kv.keys);
        let (ka, va) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "add.u32 {ka}, {}, {cur}", kv.k);
        ins!(b, "add.u32 {va}, {}, {prev}", kv.v);
        // The scores were read and `pa` written since the last MMAs.
        ins!(b, "wgmma.fence.sync.aligned");
        issue_scores(b, &g, h, (&q, ka), &s);
        issue_pv(b, &g, h, (va, ones), &pa, o);
        ins!(b, "wgmma.wait_group.sync.aligned 1");
        let x = self.tile_logits(b, lx, (kv.j0, next), std::slice::from_ref(&s));
        let (p, alpha) = self.softmax(b, &x, m, l);
        ins!(b, "wgmma.wait_group.sync.aligned 0");
        alpha.apply(b, |b, alphas| rescale(b, o, alphas));
        for (c, dst) in pa.iter().enumerate() {
            for (d, src) in dst.iter().zip(pack_p(b, h, &p[0], c)) {
                ins!(b, "mov.b32 {d}, {src}");
            }
        }
        for r in [prev, cur, fill] {
            Self::next_buffer(b, r, g.kv_bytes, 3);
        }
        ins!(b, "mov.u32 {}, {next}", kv.j0);
        ins!(b, "bra.uni {top}");
        b.place(&end);
        b.comment("the last tile's O += P V");
        let va = b.reg(RegKind::B32);
        ins!(b, "add.u32 {va}, {}, {prev}", kv.v);
        ins!(b, "wgmma.fence.sync.aligned");
        issue_pv(b, &g, h, (va, ones), &pa, o);
        ins!(b, "wgmma.wait_group.sync.aligned 0");
        let free = b.reg(RegKind::B32);
        ins!(b, "add.u32 {free}, {}, {cur}", kv.base);
        ins!(b, "add.u32 {free}, {free}, {}", g.k_off);
        free
    }
}
