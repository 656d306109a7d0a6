//! Global loads and stores of kernel values: scalar accesses predicated on
//! a mask (reading 0 where it fails, without touching memory) and vector
//! accesses of 4, 8 or 16 bytes packing several lanes.

use super::builder::{ins, Builder, Reg, RegKind};
use super::expr::Width;
use super::fp8;
use super::ops::{narrow_half, reg_kind, widen_half, Value};
use crate::expr::{Cond, Expr};
use crate::DType;

/// Whether `lanes` consecutive elements of variable `var` can be read or
/// written with one vector access at `index`: the index steps by 1 with the
/// variable and every other term keeps the first lane aligned (the variable
/// itself starts at a multiple of `lanes`), the mask holds for all lanes or
/// none ([`mask_run`]: `cat` along the last axis masks each input to
/// `lo <= i < hi`, and pads of whole vectors mask the same way), and the
/// vector is 4, 8 or 16 bytes. A vector access evaluates the mask at the
/// first lane.
pub fn vector_ok(index: &Expr, valid: &Cond, dt: DType, lanes: usize, var: usize) -> bool {
    let bytes = lanes * dt.size();
    let l = lanes as u64;
    lanes > 1
        && matches!(bytes, 4 | 8 | 16)
        && step_run(index, var, &[]) >= l
        && mask_run(valid, var) >= l
}

/// A run longer than any group of lanes: what [`mask_run`] and
/// [`step_run`] give for values that do not depend on the variable at all.
pub const WHOLE_RUN: u64 = 1 << 62;

/// The longest run of consecutive values of `var`, starting at a multiple
/// of its length (a power of two), over which `valid` holds everywhere or
/// nowhere: [`WHOLE_RUN`] when no check reads `var`, else the shortest run
/// of its checks of `var`, each of which must be an aligned range of an
/// index stepping by 1 with it ([`step_run`] of the index and the range's
/// ends). `cat`'s masks `lo <= i < hi` along the joined axis have runs as
/// long as the inputs' offsets are aligned.
pub fn mask_run(valid: &Cond, var: usize) -> u64 {
    valid
        .checks()
        .iter()
        .map(|(e, lo, hi)| {
            let mut vs = Vec::new();
            e.vars(&mut vs);
            if vs.contains(&var) {
                step_run(e, var, &[*lo, *hi])
            } else {
                WHOLE_RUN
            }
        })
        .min()
        .unwrap_or(WHOLE_RUN)
}

/// The longest run `l` (a power of two, at most [`WHOLE_RUN`]) such that
/// `e` steps by 1 with `var` and its other terms, its constant and `also`
/// are all multiples of `l`: then `l` consecutive values of `var` from a
/// multiple of `l` give `l` consecutive values of `e` from a multiple of
/// `l`. 1 when `e` does not step by 1 with `var`.
fn step_run(e: &Expr, var: usize, also: &[i64]) -> u64 {
    if e.affine_coef(var) != Some(1) {
        return 1;
    }
    let (terms, k) = e.parts();
    let bits = terms
        .iter()
        .filter(|(a, _)| *a != crate::expr::Atom::Var(var))
        .map(|(_, c)| *c)
        .chain(also.iter().copied())
        .fold(k.unsigned_abs(), |acc, c| acc | c.unsigned_abs());
    if bits == 0 {
        WHOLE_RUN
    } else {
        (1u64 << bits.trailing_zeros()).min(WHOLE_RUN)
    }
}

/// The byte address of element `idx` of a buffer at `base`.
pub(super) fn address(b: &mut Builder, base: Reg, idx: Reg, size: usize, w: Width) -> Reg {
    let a = b.reg(RegKind::B64);
    if w.wide {
        ins!(b, "mad.lo.s64 {a}, {idx}, {size}, {base}");
    } else {
        ins!(b, "mad.wide.s32 {a}, {idx}, {size}, {base}");
    }
    a
}

fn guard(pred: Option<Reg>) -> String {
    pred.map(|p| format!("@{p} ")).unwrap_or_default()
}

/// The PTX type of a scalar load or store of `dt`: 8- and 16-bit integers
/// are sign- or zero-extended into (or truncated from) a `.b32` register.
fn mem_ty(dt: DType) -> &'static str {
    match dt {
        DType::Bool | DType::U8 | DType::F8E4M3 | DType::F8E5M2 => "u8",
        DType::I8 => "s8",
        DType::I16 => "s16",
        DType::F16 | DType::BF16 => "b16",
        _ => reg_kind(dt).bit_ty(),
    }
}

/// Element `idx` of a `dt` buffer at `base`; 0 where `pred` fails.
pub fn load(b: &mut Builder, base: Reg, idx: Reg, dt: DType, pred: Option<Reg>, w: Width) -> Value {
    let a = address(b, base, idx, dt.size(), w);
    let g = guard(pred);
    let ty = mem_ty(dt);
    let reg = match dt {
        DType::F16 | DType::BF16 => {
            let h = b.mov(RegKind::B16, "b16", 0);
            ins!(b, "{g}ld.global.b16 {h}, [{a}]");
            widen_half(b, h, dt)
        }
        DType::F8E4M3 | DType::F8E5M2 => {
            let c = b.mov(RegKind::B32, "b32", 0);
            ins!(b, "{g}ld.global.u8 {c}, [{a}]");
            fp8::widen(b, c, dt)
        }
        DType::Bool => {
            let r = b.mov(RegKind::B32, "b32", 0);
            ins!(b, "{g}ld.global.u8 {r}, [{a}]");
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.ne.u32 {p}, {r}, 0");
            p
        }
        _ => {
            let kind = reg_kind(dt);
            let r = b.mov(kind, kind.bit_ty(), 0);
            ins!(b, "{g}ld.global.{ty} {r}, [{a}]");
            r
        }
    };
    Value { reg, dtype: dt }
}

/// The lanes of one 32-bit word holding elements of `dt` narrower than 4
/// bytes, each extended as [`normalize`](super::ops::normalize) does.
fn unpack_word(b: &mut Builder, w: Reg, dt: DType, out: &mut Vec<Value>) {
    match dt {
        DType::F16 | DType::BF16 => {
            let (lo, hi) = (b.reg(RegKind::B16), b.reg(RegKind::B16));
            ins!(b, "mov.b32 {{{lo}, {hi}}}, {w}");
            for h in [lo, hi] {
                let reg = widen_half(b, h, dt);
                out.push(Value { reg, dtype: dt });
            }
        }
        _ => {
            let bits = dt.bits();
            // FP8 codes are bit patterns: zero-extended, as `fp8::widen` takes them.
            let ext = if dt.is_signed() && !dt.is_fp8() {
                "s32"
            } else {
                "u32"
            };
            for k in 0..32 / bits {
                let t = b.reg(RegKind::B32);
                ins!(b, "bfe.{ext} {t}, {w}, {}, {bits}", bits * k);
                let reg = if dt == DType::Bool {
                    let p = b.reg(RegKind::Pred);
                    ins!(b, "setp.ne.u32 {p}, {t}, 0");
                    p
                } else if dt.is_fp8() {
                    fp8::widen(b, t, dt)
                } else {
                    t
                };
                out.push(Value { reg, dtype: dt });
            }
        }
    }
}

/// `lanes` consecutive elements from `idx` (see [`vector_ok`]); zeros where
/// `pred` fails.
pub fn load_vector(
    b: &mut Builder,
    base: Reg,
    idx: Reg,
    dt: DType,
    lanes: usize,
    pred: Option<Reg>,
    w: Width,
) -> Vec<Value> {
    let a = address(b, base, idx, dt.size(), w);
    let words: Vec<Reg> = (0..lanes * dt.size() / 4)
        .map(|_| b.mov(RegKind::B32, "b32", 0))
        .collect();
    let g = guard(pred);
    ins!(
        b,
        "{g}ld.global{} {}, [{a}]",
        vec_suffix(words.len()),
        reg_list(&words)
    );
    let mut out = Vec::with_capacity(lanes);
    match dt.size() {
        // One element per word (or per pair of words).
        4 | 8 => {
            for pair in words.chunks(dt.size() / 4) {
                let kind = reg_kind(dt);
                let reg = b.reg(kind);
                ins!(b, "mov.{} {reg}, {}", kind.bit_ty(), reg_list(pair));
                out.push(Value { reg, dtype: dt });
            }
        }
        _ => {
            for w in words {
                unpack_word(b, w, dt, &mut out);
            }
        }
    }
    out
}

/// Writes `v` (already of the buffer's dtype) as element `idx` where `pred`
/// holds.
pub fn store(b: &mut Builder, base: Reg, idx: Reg, v: Value, pred: Option<Reg>, w: Width) {
    let a = address(b, base, idx, v.dtype.size(), w);
    let g = guard(pred);
    match v.dtype {
        DType::F16 | DType::BF16 => {
            let h = narrow_half(b, v.reg, v.dtype);
            ins!(b, "{g}st.global.b16 [{a}], {h}");
        }
        DType::Bool => {
            let r = b.reg(RegKind::B32);
            ins!(b, "selp.u32 {r}, 1, 0, {}", v.reg);
            ins!(b, "{g}st.global.u8 [{a}], {r}");
        }
        DType::F8E4M3 | DType::F8E5M2 => {
            let c = fp8::narrow(b, v.reg, v.dtype);
            ins!(b, "{g}st.global.u8 [{a}], {c}");
        }
        // Narrow integers store their register's low bits.
        dt => ins!(b, "{g}st.global.{} [{a}], {}", mem_ty(dt), v.reg),
    }
}

/// Writes the lanes `vs` (of one dtype, see [`vector_ok`]) from `idx` on.
pub fn store_vector(
    b: &mut Builder,
    base: Reg,
    idx: Reg,
    vs: &[Value],
    pred: Option<Reg>,
    w: Width,
) {
    let dt = vs[0].dtype;
    let a = address(b, base, idx, dt.size(), w);
    let mut words = Vec::new();
    if dt.size() >= 4 {
        for v in vs {
            let n = dt.size() / 4;
            let parts: Vec<Reg> = (0..n).map(|_| b.reg(RegKind::B32)).collect();
            ins!(
                b,
                "mov.{} {}, {}",
                v.reg.kind.bit_ty(),
                reg_list(&parts),
                v.reg
            );
            words.extend(parts);
        }
    } else {
        for chunk in vs.chunks(4 / dt.size()) {
            let r = b.reg(RegKind::B32);
            match dt {
                DType::F16 | DType::BF16 => {
                    let lo = narrow_half(b, chunk[0].reg, dt);
                    let hi = narrow_half(b, chunk[1].reg, dt);
                    ins!(b, "mov.b32 {r}, {{{lo}, {hi}}}");
                }
                _ => {
                    let bits = dt.bits();
                    ins!(b, "mov.b32 {r}, 0");
                    for (k, v) in chunk.iter().enumerate() {
                        let t = if dt == DType::Bool {
                            let t = b.reg(RegKind::B32);
                            ins!(b, "selp.u32 {t}, 1, 0, {}", v.reg);
                            t
                        } else if dt.is_fp8() {
                            fp8::narrow(b, v.reg, dt)
                        } else {
                            v.reg
                        };
                        ins!(b, "bfi.b32 {r}, {t}, {r}, {}, {bits}", bits * k as u32);
                    }
                }
            }
            words.push(r);
        }
    }
    let g = guard(pred);
    ins!(
        b,
        "{g}st.global{} [{a}], {}",
        vec_suffix(words.len()),
        reg_list(&words)
    );
}

fn vec_suffix(words: usize) -> String {
    match words {
        1 => ".b32".into(),
        n => format!(".v{n}.b32"),
    }
}

/// Loads the `f32` registers `regs` (1, 2 or 4: one scalar or vector
/// load) from shared address `at` plus `off` bytes.
pub fn load_shared_f32(b: &mut Builder, regs: &[Reg], at: Reg, off: u32) {
    load_f32_from(b, "shared", regs, at, off);
}

/// [`load_shared_f32`] from another CTA of the cluster: `at` is a
/// `shared::cluster` address (`mapa`).
pub fn load_peer_f32(b: &mut Builder, regs: &[Reg], at: Reg, off: u32) {
    load_f32_from(b, "shared::cluster", regs, at, off);
}

fn load_f32_from(b: &mut Builder, space: &str, regs: &[Reg], at: Reg, off: u32) {
    let v = match regs.len() {
        1 => "",
        2 => ".v2",
        4 => ".v4",
        n => panic!("no shared load of {n} registers"),
    };
    ins!(b, "ld.{space}{v}.f32 {}, [{at}+{off}]", reg_list(regs));
}

/// Waits for every thread of the cluster; the shared-memory writes before
/// it are visible to the whole cluster after it.
pub fn cluster_barrier(b: &mut Builder) {
    ins!(b, "barrier.cluster.arrive.release");
    ins!(b, "barrier.cluster.wait.acquire");
}

fn reg_list(regs: &[Reg]) -> String {
    let names: Vec<String> = regs.iter().map(|r| r.to_string()).collect();
    if names.len() == 1 {
        names[0].clone()
    } else {
        format!("{{{}}}", names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `in[i0 * 64 + i1 - off]` over `[4, 64]`, masked to `lo <= i1 < hi`.
    fn case(off: i64, lo: i64, hi: i64) -> (Expr, Cond) {
        let ranges = [4, 64];
        let index = Expr::var(0).scale(64).add(&Expr::var(1)).add_const(-off);
        let valid = Cond::always().and_range(Expr::var(1), lo, hi, &ranges);
        (index, valid)
    }

    #[test]
    fn masks_of_whole_vectors_allow_vector_accesses() {
        let (index, valid) = case(16, 16, 32);
        assert!(vector_ok(&index, &valid, DType::F32, 4, 1));
        assert!(vector_ok(&index, &valid, DType::F16, 8, 1));
        // A mask on another variable never splits a vector.
        let other = Cond::always().and_range(Expr::var(0), 1, 3, &[4, 64]);
        assert!(vector_ok(&index, &other, DType::F32, 4, 1));
    }

    #[test]
    fn masks_that_split_a_vector_do_not() {
        // The range starts or ends inside a vector of 4.
        for (off, lo, hi) in [(18, 18, 32), (16, 16, 30), (16, 16, 34)] {
            let (index, valid) = case(off, lo, hi);
            assert!(!vector_ok(&index, &valid, DType::F32, 4, 1), "{lo}..{hi}");
        }
        // Aligned for 4 lanes, not for 8.
        let (index, valid) = case(4, 4, 20);
        assert!(vector_ok(&index, &valid, DType::F32, 4, 1));
        assert!(!vector_ok(&index, &valid, DType::F16, 8, 1));
        // A mask stepping by 2 with the variable covers lanes unevenly.
        let ranges = [4, 64];
        let twice = Cond::always().and_range(Expr::var(1).scale(2), 0, 64, &ranges);
        let (index, _) = case(0, 0, 64);
        assert!(!vector_ok(&index, &twice, DType::F32, 4, 1));
    }

    #[test]
    fn mask_runs_are_the_alignment_of_the_ranges() {
        assert_eq!(mask_run(&case(16, 16, 32).1, 1), 16);
        assert_eq!(mask_run(&case(4, 4, 20).1, 1), 4);
        assert_eq!(mask_run(&case(18, 18, 32).1, 1), 2);
        assert_eq!(mask_run(&case(0, 0, 64).1, 1), WHOLE_RUN, "always holds");
        let ranges = [4, 64];
        let other = Cond::always().and_range(Expr::var(0), 1, 3, &ranges);
        assert_eq!(mask_run(&other, 1), WHOLE_RUN);
        // An offset of 8 in the checked index halves a run of 16.
        let shifted = Cond::always().and_range(Expr::var(1).add_const(8), 16, 48, &ranges);
        assert_eq!(mask_run(&shifted, 1), 8);
        let twice = Cond::always().and_range(Expr::var(1).scale(2), 0, 64, &ranges);
        assert_eq!(mask_run(&twice, 1), 1);
        // The shortest run of several checks.
        let both = case(16, 16, 32).1.and(&case(4, 4, 60).1, &ranges);
        assert_eq!(mask_run(&both, 1), 4);
    }
}
