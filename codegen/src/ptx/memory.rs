//! Global loads and stores of kernel values: scalar accesses predicated on
//! a mask (reading 0 where it fails, without touching memory) and vector
//! accesses of 4, 8 or 16 bytes packing several lanes.

use super::builder::{ins, Builder, Reg, RegKind};
use super::expr::Width;
use super::ops::{narrow_half, widen_half, Value};
use crate::expr::{Cond, Expr};
use crate::DType;

/// Whether `lanes` consecutive elements of variable `var` can be read or
/// written with one vector access at `index`: the index steps by 1 with the
/// variable and every other term keeps the first lane aligned (the variable
/// itself starts at a multiple of `lanes`), the mask does not depend on the
/// variable, and the vector is 4, 8 or 16 bytes.
pub fn vector_ok(index: &Expr, valid: &Cond, dt: DType, lanes: usize, var: usize) -> bool {
    let bytes = lanes * dt.size();
    let l = lanes as i64;
    let (terms, k) = index.parts();
    let mut mask_vars = Vec::new();
    for (e, _, _) in valid.checks() {
        e.vars(&mut mask_vars);
    }
    lanes > 1
        && matches!(bytes, 4 | 8 | 16)
        && index.affine_coef(var) == Some(1)
        && k % l == 0
        && terms
            .iter()
            .all(|(a, c)| *a == crate::expr::Atom::Var(var) || c % l == 0)
        && !mask_vars.contains(&var)
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

/// Element `idx` of a `dt` buffer at `base`; 0 where `pred` fails.
pub fn load(b: &mut Builder, base: Reg, idx: Reg, dt: DType, pred: Option<Reg>, w: Width) -> Value {
    let a = address(b, base, idx, dt.size(), w);
    let g = guard(pred);
    let reg = match dt {
        DType::F32 | DType::I32 => {
            let kind = if dt == DType::F32 {
                RegKind::F32
            } else {
                RegKind::B32
            };
            let r = b.mov(kind, "b32", 0);
            ins!(b, "{g}ld.global.b32 {r}, [{a}]");
            r
        }
        DType::F16 | DType::BF16 => {
            let h = b.mov(RegKind::B16, "b16", 0);
            ins!(b, "{g}ld.global.b16 {h}, [{a}]");
            widen_half(b, h, dt)
        }
        DType::Bool => {
            let r = b.mov(RegKind::B32, "b32", 0);
            ins!(b, "{g}ld.global.u8 {r}, [{a}]");
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.ne.u32 {p}, {r}, 0");
            p
        }
    };
    Value { reg, dtype: dt }
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
    for w in words {
        match dt {
            DType::F32 | DType::I32 => {
                let reg = if dt == DType::F32 {
                    let f = b.reg(RegKind::F32);
                    ins!(b, "mov.b32 {f}, {w}");
                    f
                } else {
                    w
                };
                out.push(Value { reg, dtype: dt });
            }
            DType::F16 | DType::BF16 => {
                let (lo, hi) = (b.reg(RegKind::B16), b.reg(RegKind::B16));
                ins!(b, "mov.b32 {{{lo}, {hi}}}, {w}");
                for h in [lo, hi] {
                    let reg = widen_half(b, h, dt);
                    out.push(Value { reg, dtype: dt });
                }
            }
            DType::Bool => {
                for k in 0..4 {
                    let t = b.reg(RegKind::B32);
                    ins!(b, "bfe.u32 {t}, {w}, {}, 8", 8 * k);
                    let p = b.reg(RegKind::Pred);
                    ins!(b, "setp.ne.u32 {p}, {t}, 0");
                    out.push(Value { reg: p, dtype: dt });
                }
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
        DType::F32 | DType::I32 => ins!(b, "{g}st.global.b32 [{a}], {}", v.reg),
        DType::F16 | DType::BF16 => {
            let h = narrow_half(b, v.reg, v.dtype);
            ins!(b, "{g}st.global.b16 [{a}], {h}");
        }
        DType::Bool => {
            let r = b.reg(RegKind::B32);
            ins!(b, "selp.u32 {r}, 1, 0, {}", v.reg);
            ins!(b, "{g}st.global.u8 [{a}], {r}");
        }
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
    let per_word = 4 / dt.size();
    let mut words = Vec::new();
    for chunk in vs.chunks(per_word) {
        let r = b.reg(RegKind::B32);
        match dt {
            DType::F32 | DType::I32 => ins!(b, "mov.b32 {r}, {}", chunk[0].reg),
            DType::F16 | DType::BF16 => {
                let lo = narrow_half(b, chunk[0].reg, dt);
                let hi = narrow_half(b, chunk[1].reg, dt);
                ins!(b, "mov.b32 {r}, {{{lo}, {hi}}}");
            }
            DType::Bool => {
                ins!(b, "mov.b32 {r}, 0");
                for (k, v) in chunk.iter().enumerate() {
                    let t = b.reg(RegKind::B32);
                    ins!(b, "selp.u32 {t}, 1, 0, {}", v.reg);
                    ins!(b, "bfi.b32 {r}, {t}, {r}, {}, 8", 8 * k);
                }
            }
        }
        words.push(r);
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

fn reg_list(regs: &[Reg]) -> String {
    let names: Vec<String> = regs.iter().map(|r| r.to_string()).collect();
    if names.len() == 1 {
        names[0].clone()
    } else {
        format!("{{{}}}", names.join(", "))
    }
}
