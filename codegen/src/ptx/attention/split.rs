//! Split-KV ("flash-decoding"): an attention kernel whose CTAs, one per
//! (head, tile of query rows), are too few to fill the GPU (decode: a few
//! query rows against a long key/value cache) also splits the keys among
//! CTAs, and a second entry of the same module merges the splits.
//!
//! - Launch 1, the emitter's entry over a grid `(ctas, count)`: CTA `(x,
//!   s)` runs the emitter's key loop over keys `s chunk .. min((s + 1)
//!   chunk, lk)` only (`chunk` a multiple of the key tile, so that no
//!   tile straddles two splits; under a causal mask also no further than
//!   the CTA's `key_end`) and writes each of its rows' partial softmax,
//!   unnormalized, to the scratch buffer (the kernel's last output,
//!   [`scratch`]): a record of `dv + 2` values of the accumulation type,
//!   `m_s` (the running maximum), `l_s = sum_j exp(x_j - m_s')` and `O_s[e]
//!   = sum_j exp(x_j - m_s') v[j, e]`, where `m_s' = m_s`, or 0 while `m_s
//!   = -inf` (then both sums are 0: a split whose keys the row cannot see
//!   adds nothing). Record `(head lq + i) count + s`.
//! - Launch 2, `<entry>_combine`, a thread per (row, output column): `M =
//!   max_s m_s`, `w_s = exp(m_s - M')` (`M' = M`, or 0 where `M = -inf`),
//!   `L = sum_s l_s w_s`, `O = sum_s O_s w_s` over the splits with `m_s >
//!   -inf` (the others hold no visible key), then `O / L` through the
//!   epilogue part to the real outputs.
//!
//! Soundness (the exp-sum algebra): with `m_s' = m_s` finite, `O_s exp(m_s)
//! = sum_{j in s} exp(x_j) v_j` and `l_s exp(m_s) = sum_{j in s}
//! exp(x_j)`, so `sum_s O_s w_s / sum_s l_s w_s` is the row's `sum_j
//! exp(x_j) v_j / sum_j exp(x_j)` (the common factor `exp(M)` cancels),
//! the unsplit kernel's value up to rounding. Splits with `m_s = -inf`
//! have no visible key (their sums are 0, or NaN from `0 * inf` where a
//! masked `v` is infinite): skipping them is exact, and keeps a causal
//! row finite where the unsplit kernel, which never reaches those keys,
//! is. A row no split sees gets `M = -inf`, `L = O = 0`, `0 / 0` = NaN,
//! as unsplit. A NaN logit makes
//! its split's `m_s` or `l_s` NaN and the row NaN through its weight; an
//! infinite maximum gives `exp(inf - inf)` = NaN in its split's sums.
//!
//! When ([`plan`]): `SMELT_ATTENTION_SPLITS=<n>` forces `n` splits (0 or 1:
//! none), else the rule splits where the CTAs are fewer than
//! [`SPLIT_BELOW_WAVES`] waves of CTA slots (SMs times the CTAs one SM
//! holds by shared memory, at most [`MAX_CTAS_PER_SM`]), into at most
//! [`MOST_WAVES`] waves, each split at least [`MIN_KEYS`] keys, picking
//! the count whose last wave is fullest. The planner sizes the scratch
//! ([`scratch`]) before the target is known, for the most splits the rule
//! can pick on [`PLAN_SMS`] SMs; the emitter never exceeds the scratch it
//! is given (a kernel without one is not split).

use super::{acc_imm, acc_ty, epilogue_part, store, Coords};
use crate::attention::Attention;
use crate::env;
use crate::ir::{Arg, Kernel};
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::module::{entry, entry_name, header, Launch, PtxKernel};
use crate::ptx::ops::{self, Value};
use crate::ptx::target::Target;
use crate::{BinaryOp, KernelKind, ReduceOp, UnaryOp};

pub use crate::ptx::split::Split;

/// The fewest keys the rule gives a split (its CTA's fixed costs, the
/// `q` tile and the partials' stores, stay small beside its key loop).
pub const MIN_KEYS: u64 = 1024;

/// The most splits of a kernel.
pub const MAX_SPLITS: u64 = 256;

/// Kernels of fewer CTAs than this many waves of CTA slots are split.
pub const SPLIT_BELOW_WAVES: u64 = 2;

/// The most waves of CTA slots the split grid reaches.
pub const MOST_WAVES: u64 = 4;

/// The most CTAs per SM the rule counts (its estimate from shared memory
/// is capped here: registers bound them too).
pub const MAX_CTAS_PER_SM: u32 = 4;

/// SMs the planner sizes the scratch for, at least any GPU's (H100 and
/// H200: 132).
pub const PLAN_SMS: u32 = 160;

/// Shared memory of an SM: sm_90's, the larger (sm_80 has 164 KiB), so
/// that the estimate of CTAs per SM errs towards more splits.
const SHARED_PER_SM: u32 = crate::ptx::target::SHARED_PER_SM_90;

/// The most query rows a CTA of either emitter takes (8 warps of 32).
const MAX_CTA_ROWS: u32 = 256;

/// Threads of a combine CTA at most (a CTA per row and up to this many
/// output columns).
const COMBINE_THREADS: u32 = 256;

/// `SMELT_ATTENTION_SPLITS`: a forced split count (0 or 1: none), `None`
/// for the rule.
pub fn env_splits() -> Option<usize> {
    env::var("SMELT_ATTENTION_SPLITS", env::parse_splits)
}

/// A kernel's sizes: heads (product of the batch dims), query rows, keys,
/// output columns.
struct Sizes {
    heads: u64,
    lq: u64,
    lk: u64,
    dv: u64,
}

impl Sizes {
    fn new(k: &Kernel, a: &Attention) -> Sizes {
        let r = |v: usize| k.ranges[v] as u64;
        Sizes {
            heads: a.vars.batch.clone().map(r).product(),
            lq: r(a.vars.i),
            lk: r(a.vars.j),
            dv: r(a.vars.e),
        }
    }

    /// Scratch elements of one split of every row (`None` past `u64`).
    fn per_split(&self) -> Option<u64> {
        self.heads
            .checked_mul(self.lq)?
            .checked_mul(self.dv.checked_add(2)?)
    }

    /// CTAs of the unsplit grid at `bm` rows a CTA.
    fn ctas(&self, bm: u32) -> u64 {
        self.heads.saturating_mul(self.lq.div_ceil(u64::from(bm)))
    }

    /// Whether the combine's grid (a CTA per row) fits.
    fn combine_fits(&self) -> bool {
        self.heads
            .checked_mul(self.lq)
            .is_some_and(|n| n <= i32::MAX as u64)
    }
}

/// The most splits the rule gives `base` CTAs over `lk` keys with `slots`
/// CTA slots: 1 from [`SPLIT_BELOW_WAVES`] waves on, else up to
/// [`MOST_WAVES`] waves, [`MIN_KEYS`] keys a split and [`MAX_SPLITS`].
/// Non-increasing in `base`, non-decreasing in `slots`.
fn most(base: u64, lk: u64, slots: u64) -> u64 {
    let slots = slots.max(1);
    if base >= SPLIT_BELOW_WAVES * slots {
        return 1;
    }
    (lk / MIN_KEYS)
        .min((MOST_WAVES * slots).div_ceil(base.max(1)))
        .clamp(1, MAX_SPLITS)
}

/// The rule's split count: of the counts up to [`most`] that fill at
/// least one wave of `slots`, the fewest whose waves are fullest (CTAs
/// over the slots of their whole waves); [`most`] where none fills one.
fn auto(base: u64, lk: u64, slots: u64) -> u64 {
    let (most, slots) = (most(base, lk, slots), slots.max(1));
    // (count, CTAs, slots of their waves): fullness CTAs / slots.
    let mut best: Option<(u64, u64, u64)> = None;
    for s in 1..=most {
        let ctas = base * s;
        if ctas < slots {
            continue;
        }
        let room = ctas.div_ceil(slots) * slots;
        if best.is_none_or(|(_, c, r)| ctas * r > c * room) {
            best = Some((s, ctas, room));
        }
    }
    best.map_or(most, |b| b.0)
}

/// The scratch buffer the fusion planner gives attention kernel `k` (its
/// last output, of the accumulation type): room for the most splits the
/// emitters may pick (`SMELT_ATTENTION_SPLITS` as set now, else the rule
/// on [`PLAN_SMS`] SMs with the fewest CTAs any tile gives); `None` for
/// kernels that are not attention or are never split. The length is
/// computed with checked arithmetic (`None` past `usize`).
pub fn scratch(k: &Kernel) -> Option<Arg> {
    if k.kind != KernelKind::Attention {
        return None;
    }
    let a = k.attention().ok()?;
    let z = Sizes::new(k, &a);
    let slots = u64::from(PLAN_SMS * MAX_CTAS_PER_SM);
    let count = match env_splits() {
        Some(n) => (n as u64).min(MAX_SPLITS),
        None => most(z.ctas(MAX_CTA_ROWS), z.lk, slots),
    }
    .min(z.lk);
    if count < 2 || !z.combine_fits() {
        return None;
    }
    let len = z.per_split()?.checked_mul(count)?;
    Some(Arg {
        dtype: a.acc,
        len: usize::try_from(len).ok()?,
    })
}

/// Splits of every row the scratch buffer of `k` holds: 0 without one
/// (the last output is the scratch when no store writes it and it has
/// the accumulation type).
fn capacity(k: &Kernel, a: &Attention, z: &Sizes) -> u64 {
    let Some(last) = k.outputs.len().checked_sub(1) else {
        return 0;
    };
    let o = &k.outputs[last];
    if o.dtype != a.acc || k.stores.iter().any(|s| s.output == last) {
        return 0;
    }
    z.per_split().map_or(0, |n| o.len as u64 / n.max(1))
}

/// The split of kernel `k` for an emitter's CTAs of `bm` rows, key tiles
/// of `bn` and `shared` bytes of shared memory on `target`: `want` splits
/// (`Some(0 | 1)`: none), or the rule's for `None`; at most what the
/// scratch holds, and normalized so that every split has keys: `chunk`
/// is `lk / count` rounded up to a multiple of `bn`, `count = lk /
/// chunk` rounded up.
pub(super) fn plan(
    k: &Kernel,
    a: &Attention,
    target: &Target,
    (bm, bn, shared): (u32, u32, u32),
    want: Option<usize>,
) -> Split {
    let z = Sizes::new(k, a);
    let per_sm = (SHARED_PER_SM / shared.saturating_add(1024)).clamp(1, MAX_CTAS_PER_SM);
    let slots = u64::from(target.num_sms.max(1)) * u64::from(per_sm);
    let count = match want {
        Some(n) => n as u64,
        None => auto(z.ctas(bm), z.lk, slots),
    };
    let count = count.min(MAX_SPLITS).min(capacity(k, a, &z));
    if count < 2 || !z.combine_fits() {
        return Split::NONE;
    }
    // Below 2^31: lk is below 2^30 (`emit`) and bn at most 128.
    let chunk = z.lk.div_ceil(count).next_multiple_of(u64::from(bn));
    match z.lk.div_ceil(chunk) {
        0 | 1 => Split::NONE,
        n => Split {
            count: n as u32,
            chunk: chunk as u32,
        },
    }
}

/// This CTA's keys under split `sp`: `(start, end)` (u32 registers),
/// `start = s chunk` for `s = %ctaid.y`, `end = min(start + chunk, lk)`.
/// Every split starts below `lk` ([`plan`]).
pub(super) fn keys(b: &mut Builder, sp: Split, lk: u32) -> (Reg, Reg) {
    b.comment("split-KV: this CTA's keys, chunk %ctaid.y");
    let (start, end) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "mov.u32 {start}, %ctaid.y");
    ins!(b, "mul.lo.u32 {start}, {start}, {}", sp.chunk);
    // Below 2^31: start < lk < 2^30 and chunk <= lk + bn.
    ins!(b, "add.u32 {end}, {start}, {}", sp.chunk);
    ins!(b, "min.u32 {end}, {end}, {lk}");
    (start, end)
}

/// The address (u64) of query row `i`'s partial record for this CTA's
/// split (`%ctaid.y`) in the scratch buffer, `head` the CTA's head.
/// Records of rows past `lq` are never stored.
pub(super) fn record(
    b: &mut Builder,
    cx: &crate::ptx::eval::Cx,
    a: &Attention,
    sp: Split,
    head: Reg,
    i: Reg,
) -> Reg {
    let k = cx.k;
    let lq = k.ranges[a.vars.i] as u32;
    let rec_bytes = record_bytes(k, a);
    let scratch = *cx.outputs.last().expect("a split kernel has its scratch");
    let (s, r, x) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B64),
        b.reg(RegKind::B64),
    );
    ins!(b, "mov.u32 {s}, %ctaid.y");
    ins!(b, "mul.wide.u32 {r}, {head}, {lq}");
    ins!(b, "cvt.u64.u32 {x}, {i}");
    ins!(b, "add.u64 {r}, {r}, {x}");
    ins!(b, "mul.lo.u64 {r}, {r}, {}", sp.count);
    ins!(b, "cvt.u64.u32 {x}, {s}");
    ins!(b, "add.u64 {r}, {r}, {x}");
    ins!(b, "mad.lo.u64 {r}, {r}, {rec_bytes}, {scratch}");
    r
}

/// Bytes of one partial record: `m`, `l` and `dv` columns.
fn record_bytes(k: &Kernel, a: &Attention) -> u64 {
    (k.ranges[a.vars.e] as u64 + 2) * a.acc.size() as u64
}

/// Stores a row's running maximum `m` and sum `l` in its record `rec`
/// where `ok` holds.
pub(super) fn store_stats(b: &mut Builder, a: &Attention, rec: Reg, (m, l): (Reg, Reg), ok: Reg) {
    let (ty, _) = acc_ty(a);
    let size = a.acc.size();
    ins!(b, "@{ok} st.global.{ty} [{rec}], {m}");
    ins!(b, "@{ok} st.global.{ty} [{rec}+{size}], {l}");
}

/// Stores a row's unnormalized output `o` at column `e` (u32) in its
/// record `rec` where `ok` holds.
pub(super) fn store_column(b: &mut Builder, a: &Attention, rec: Reg, e: Reg, o: Reg, ok: Reg) {
    let (ty, _) = acc_ty(a);
    let size = a.acc.size();
    let at = b.reg(RegKind::B64);
    ins!(b, "mad.wide.u32 {at}, {e}, {size}, {rec}");
    ins!(b, "@{ok} st.global.{ty} [{at}+{}], {o}", 2 * size);
}

/// The kernel of module text `main` (one entry, launched as `launch`)
/// under split `sp`: unsplit as it is; split with grid `y` = the count
/// and the combine entry after it.
///
/// # Errors
/// A combine grid that does not fit (never for a split [`plan`] gave).
pub(super) fn kernel(
    k: &Kernel,
    target: &Target,
    a: &Attention,
    sp: Split,
    main: String,
    mut launch: Launch,
) -> Result<PtxKernel, String> {
    let mut ptx = header(target) + &main;
    let mut launches = Vec::new();
    if sp.is_split() {
        launch.grid.1 = sp.count;
        launches.push(launch);
        let z = Sizes::new(k, a);
        let rows = u32::try_from(z.heads * z.lq)
            .map_err(|_| format!("attention kernel {}: too many rows to split", k.name))?;
        let dv = z.dv as u32;
        let threads = dv.next_multiple_of(32).min(COMBINE_THREADS);
        let name = format!("{}_combine", entry_name(k));
        let (text, _) = entry(k, target, &name, threads, |b, cx, _| {
            combine(b, cx, a, sp, threads);
            (0, 16)
        });
        ptx += "\n";
        ptx += &text;
        launches.push(Launch {
            entry: name,
            grid: (rows, dv.div_ceil(threads), 1),
            block: (threads, 1, 1),
            shared_bytes: 0,
        });
    } else {
        launches.push(launch);
    }
    Ok(PtxKernel {
        ptx,
        launches,
        maps: Vec::new(),
    })
}

/// The combine entry's body: the thread of row `%ctaid.x` (`head lq +
/// i`) and column `%ctaid.y threads + %tid.x` merges the row's `count`
/// records (two passes: the maximum, then the weighted sums) and stores
/// `O / L` through the epilogue part where the column exists.
fn combine(b: &mut Builder, cx: &crate::ptx::eval::Cx, a: &Attention, sp: Split, threads: u32) {
    let k = cx.k;
    let (lq, dv) = (k.ranges[a.vars.i] as u32, k.ranges[a.vars.e] as u32);
    let (ty, kind) = acc_ty(a);
    let size = a.acc.size() as u64;
    let rec_bytes = record_bytes(k, a);
    let scratch = *cx.outputs.last().expect("a split kernel has its scratch");
    let (row, e, t) = (
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
        b.reg(RegKind::B32),
    );
    ins!(b, "mov.u32 {row}, %ctaid.x");
    ins!(b, "mov.u32 {e}, %ctaid.y");
    ins!(b, "mov.u32 {t}, %tid.x");
    ins!(b, "mad.lo.u32 {e}, {e}, {threads}, {t}");
    let ok = b.reg(RegKind::Pred);
    ins!(b, "setp.lt.u32 {ok}, {e}, {dv}");
    let (head, i) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
    ins!(b, "div.u32 {head}, {row}, {lq}");
    ins!(b, "rem.u32 {i}, {row}, {lq}");
    let coords = Coords::new(b, cx, a, head);
    // The row's first record; the thread's column's offset in a record.
    let (first, col) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
    ins!(
        b,
        "mul.wide.u32 {first}, {row}, {}",
        u64::from(sp.count) * rec_bytes
    );
    ins!(b, "add.u64 {first}, {first}, {scratch}");
    ins!(b, "mul.wide.u32 {col}, {e}, {size}");
    ins!(b, "add.u64 {col}, {col}, {}", 2 * size);
    let value = |reg| Value { reg, dtype: a.acc };
    // Loops over the records: `body` given the record's address.
    let each = |b: &mut Builder, body: &mut dyn FnMut(&mut Builder, Reg)| {
        let (at, n) = (b.reg(RegKind::B64), b.reg(RegKind::B32));
        ins!(b, "mov.u64 {at}, {first}");
        ins!(b, "mov.u32 {n}, 0");
        let top = b.label();
        b.place(&top);
        body(b, at);
        ins!(b, "add.u64 {at}, {at}, {rec_bytes}");
        ins!(b, "add.u32 {n}, {n}, 1");
        let more = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.u32 {more}, {n}, {}", sp.count);
        ins!(b, "@{more} bra {top}");
    };
    b.comment("split-KV combine: the row's maximum over its splits");
    let mx = b.mov(kind, ty, acc_imm(a, f64::NEG_INFINITY));
    each(b, &mut |b, at| {
        let m = b.reg(kind);
        ins!(b, "ld.global.{ty} {m}, [{at}]");
        ops::combine(b, ReduceOp::Max, a.acc, mx, m, None);
    });
    // M' = 0 where every split is -inf: the weights are 0 and the row
    // 0 / 0 = NaN, as unsplit.
    let (masked, m_use) = (b.reg(RegKind::Pred), b.reg(kind));
    ins!(
        b,
        "setp.eq.{ty} {masked}, {mx}, {}",
        acc_imm(a, f64::NEG_INFINITY)
    );
    ins!(b, "selp.{ty} {m_use}, {}, {mx}, {masked}", acc_imm(a, 0.0));
    b.comment("the weighted sums: w = exp(m_s - M'), L += l_s w, O += O_s w");
    let l_sum = b.mov(kind, ty, acc_imm(a, 0.0));
    let o_sum = b.mov(kind, ty, acc_imm(a, 0.0));
    let neg_inf = acc_imm(a, f64::NEG_INFINITY);
    each(b, &mut |b, at| {
        let (m, l, o, oa) = (b.reg(kind), b.reg(kind), b.reg(kind), b.reg(RegKind::B64));
        ins!(b, "ld.global.{ty} {m}, [{at}]");
        // A split with no visible key (m_s = -inf) is skipped rather
        // than weighted by 0: the tensor-core kernel computes its first
        // key tile even when the causal mask hides it all, and a
        // non-finite `v` there leaves `0 * inf` = NaN in its `O_s`.
        let live = b.reg(RegKind::Pred);
        ins!(b, "setp.neu.{ty} {live}, {m}, {neg_inf}");
        ins!(b, "ld.global.{ty} {l}, [{at}+{size}]");
        ins!(b, "add.u64 {oa}, {at}, {col}");
        ins!(b, "mov.{ty} {o}, {}", acc_imm(a, 0.0));
        ins!(b, "@{ok} ld.global.{ty} {o}, [{oa}]");
        let d = ops::binary(b, BinaryOp::Sub, value(m), value(m_use), a.acc);
        let w = ops::unary(b, UnaryOp::Exp, d, a.acc).reg;
        ins!(b, "@{live} fma.rn.{ty} {l_sum}, {l}, {w}, {l_sum}");
        ins!(b, "@{live} fma.rn.{ty} {o_sum}, {o}, {w}, {o_sum}");
    });
    let out = ops::binary(b, BinaryOp::Div, value(o_sum), value(l_sum), a.acc);
    let insts = epilogue_part(k, a);
    store(b, cx, a, &coords, &insts, (i, e), &[out], ok);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule: no split from two waves of slots on; otherwise the
    /// fewest splits whose waves are fullest, within four waves and 1024
    /// keys a split.
    #[test]
    fn rule() {
        // b8 h16, one query row a CTA, 2 CTAs an SM on 132 SMs: 4 splits
        // (512 CTAs in 528 slots) rather than 3 (384 in 528).
        assert_eq!(auto(128, 131072, 264), 4);
        // Enough CTAs already.
        assert_eq!(auto(528, 131072, 264), 1);
        assert_eq!(most(528, 131072, 264), 1);
        // Keys bound the splits: 4097 keys, 4 splits of at least 1024.
        assert_eq!(most(16, 4097, 264), 4);
        assert_eq!(auto(16, 4097, 264), 4);
        assert_eq!(auto(16, 2047, 264), 1);
        // Four waves at most: 1 CTA over 528 slots.
        assert_eq!(most(1, 1 << 30, 528), MAX_SPLITS);
        assert_eq!(most(64, 1 << 30, 132), 9);
        // Monotone where the planner relies on it.
        for base in [1, 7, 64, 128, 300] {
            for slots in [108, 132, 264, 640] {
                assert!(most(base, 1 << 20, slots) <= most(base, 1 << 20, 640));
                assert!(auto(base, 1 << 20, slots) <= most(base, 1 << 20, slots));
                assert!(most(base + 1, 1 << 20, slots) <= most(base, 1 << 20, slots));
            }
        }
    }
}
