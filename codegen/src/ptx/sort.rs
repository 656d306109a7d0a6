//! Sort kernels. Every method sorts `(key, position)` pairs (the `pairs`
//! module), with the key of [`crate::sort::sort_key`] (complemented for a
//! descending sort): 64-bit words `key << 32 | position` for 32-bit keys
//! (or, on chip, 32-bit ones of a packed narrow key), two 64-bit words
//! (the key, the position) compared lexicographically for the 64-bit keys
//! of `F64` and `I64`. Pairs are all distinct and order exactly as the
//! stable sort does, so any correct sort or selection of them gives the
//! stable order. Every method handles both key widths with the same
//! emitters, parametrised by the pairs' form and the key's width. Which
//! launches a kernel gets is [`Method::of`] its row length, `k` and key
//! width:
//! - [`Method::OnChip`] (rows up to [`crate::sort::sort_chunk`]: 16384
//!   pairs, 8192 of 64-bit keys, whose pairs take twice the bytes): one
//!   launch, a CTA per row (a grid-stride loop over rows). The row's
//!   pairs, padded to a power of two with all-ones pairs (which sort
//!   last), are sorted in shared memory by a bitonic network
//!   ([`SortCx::sort_pairs`], the `bitonic` module: up to 16 pairs a
//!   thread in registers) and positions `j < k` stored from there.
//!   Narrow keys ([`crate::sort::Narrow`]) make 32-bit pairs.
//! - [`Method::SelectOnChip`] (rows up to the chunk, `topk` with small
//!   `k`): one launch, a CTA per row selects the `k` smallest pairs in
//!   shared memory and sorts only those (the `pick` module).
//! - [`Method::Select`] (long rows, small `k`): a radix select of the `k`
//!   smallest pairs, then the on-chip sort of those (the `select` module).
//! - [`Method::Radix`] (long rows, large `k`): an LSD radix sort over many
//!   CTAs (the `radix` module), a pass per 8-bit key digit (8 for 64-bit
//!   keys).
//!
//! Stored values are the operand evaluated again at the sorted position
//! (a gather through the fused producers), so `-0.0` and NaN payloads
//! come out as they went in. All launches of a kernel are entries of one
//! module, launched in order with the same parameters; the scratch buffer
//! they share is the kernel's last output ([`crate::sort::scratch_len`]).

use super::bitonic;
use super::builder::RegKind;
use super::launch::{sort_method, Sort};
use super::module::{entry_name, header, Launch, PtxKernel};
use super::pairs::Pairs;
use super::pick;
use super::radix;
use super::select;
use super::sort_cx::{launch, sort_op, SortCx};
use super::target::Target;
use crate::ir::Kernel;
use crate::sort::{Method, Narrow};

/// Lowers sort kernel `kernel` with on-chip mapping `plan`.
pub fn emit(kernel: &Kernel, target: &Target, plan: &Sort) -> PtxKernel {
    let base = entry_name(kernel);
    let parts = match sort_method(kernel) {
        Method::OnChip => vec![on_chip(kernel, target, plan, &base)],
        Method::SelectOnChip => vec![pick::entry(kernel, target, plan, &base)],
        Method::Select => select::entries(kernel, target, plan, &base),
        Method::Radix => radix::entries(kernel, target, &base),
    };
    let mut ptx = header(target);
    let mut launches = Vec::with_capacity(parts.len());
    for (text, l) in parts {
        ptx += &text;
        launches.push(l);
    }
    PtxKernel {
        ptx,
        launches,
        maps: Vec::new(),
    }
}

/// The one launch of an on-chip sort: 32-bit pairs where the key packs
/// into few enough bits ([`Narrow`]) that, with the position's, a real
/// pair stays below the all-ones padding, else [`Pairs::of`] the sort.
fn on_chip(kernel: &Kernel, target: &Target, plan: &Sort, base: &str) -> (String, Launch) {
    let n = kernel.row_len() as u32;
    let pos_bits = u32::BITS - (n.max(2) - 1).leading_zeros();
    let op = sort_op(kernel);
    let narrow = Narrow::of(op).filter(|(_, bits)| bits + pos_bits <= 31);
    let pairs = match narrow {
        Some(_) => Pairs::Narrow { pos_bits },
        None => Pairs::of(op),
    };
    launch(
        kernel,
        target,
        base.to_string(),
        plan.block,
        |b, cx, smem| {
            let sc = SortCx::new(b, cx, plan.block, smem);
            let stored = kernel.stored_len() as u32;
            let grid = sc.for_items(b, kernel.rows() as u64, |b, row, _| {
                let kept = sc.row_vars(b, row);
                let len = b.mov(RegKind::B32, "u32", n);
                sc.sort_pairs(b, len, plan.chunk, pairs, |b, t, valid| match narrow {
                    Some((packing, _)) => {
                        sc.narrow_pair(b, &kept, t, Some(valid), (packing, pos_bits))
                    }
                    None => sc.pair(b, &kept, t, Some(valid)),
                });
                let k = b.mov(RegKind::B32, "u32", stored);
                sc.store_sorted(b, &kept, k, pairs);
            });
            (bitonic::bytes(plan.chunk, pairs), grid)
        },
    )
}
